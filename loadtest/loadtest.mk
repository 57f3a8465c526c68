# Load tests: the threadpool-fairness experiment (loadtest/README.md).
# Included by the top-level Makefile; run from the repository root.
#
#   make loadtest       quick pass, ~3 minutes
#   make loadtest-full  whole partition sweep + nginx/Node.js peers, ~20 minutes
#   make bench          unclog vs nginx, req/s and MB/s side by side
#   make loadtest-deps  install wrk, gnuplot and nginx (Debian packages)
#
# Extra arguments for loadtest/run.py go in LOADTEST_ARGS, e.g.
#   make loadtest LOADTEST_ARGS="--partitions 4k,64k,whole --rounds 5"

LOADTEST_PKGS := wrk gnuplot-nox nginx-light
LOADTEST_RUN  := python3 loadtest/run.py

.PHONY: loadtest-deps

# The probe parses responses with llhttp: the objects the server links (LL_OBJ).
build/probe: loadtest/probe.c $(LL_OBJ)
	@mkdir -p $(dir $@)
	$(CC) loadtest/probe.c $(LL_OBJ) -o $@ -std=c17 -D_DEFAULT_SOURCE -O2 -Wall -Wextra -Werror \
	    -I$(LLHTTP_INC) $(shell pkg-config --cflags --libs libuv)

loadtest: build/unclog build/probe
	$(LOADTEST_RUN) quick $(LOADTEST_ARGS)

loadtest-full: build/unclog build/probe
	$(LOADTEST_RUN) full $(LOADTEST_ARGS)

bench: build/unclog build/probe
	$(LOADTEST_RUN) bench $(LOADTEST_ARGS)

loadtest-deps:
	@$(call apt_install,$(LOADTEST_PKGS))
