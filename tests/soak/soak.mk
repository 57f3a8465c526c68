# make soak: a bounded hostile-load soak of build/unclog (tests/soak/README.md,
# which also says how long it runs; soak.py prints its own time at the end).
#
#   make soak                      the full soak
#   make soak SOAK_ARGS=--short    a short one (for CI)
#
# SOAK_ARGS takes the options of tests/soak/soak.py (--help): --stalled-gzip N,
# --idle N, --duration S, --budget-mib N, --rss-ceiling-mib N, --seed N.

.PHONY: soak
soak: build/unclog
	PYTHONDONTWRITEBYTECODE=1 UNCLOG_BIN=$(CURDIR)/build/unclog python3 tests/soak/soak.py $(SOAK_ARGS)
