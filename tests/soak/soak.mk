# make soak: a bounded hostile-load soak of build/unclog (tests/soak/README.md).
#
#   make soak                      120 s of load, under 3 minutes in all
#   make soak SOAK_ARGS=--short    22 s of load, under 40 s (for CI)
#
# SOAK_ARGS takes the options of tests/soak/soak.py (--help): --stalled-gzip N,
# --idle N, --duration S, --budget-mib N, --rss-ceiling-mib N, --seed N.

.PHONY: soak
soak: build/unclog
	PYTHONDONTWRITEBYTECODE=1 UNCLOG_BIN=$(CURDIR)/build/unclog python3 tests/soak/soak.py $(SOAK_ARGS)
