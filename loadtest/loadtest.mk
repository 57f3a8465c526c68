# Load tests: the threadpool-fairness experiment (loadtest/README.md, which
# also says how long each target takes; each report ends with its own time).
# Measured once on 2026-12-05/06 on a 2-core VM busy with other test suites:
# make loadtest SHORT=1 48 s, make loadtest 468 s (8 min),
# make loadtest-full 3,477 s (58 min).
# Included by the top-level Makefile; run from the repository root.
#
#   make loadtest       quick pass
#   make loadtest SHORT=1  the one-minute form (run.py short): fifo 64k and
#                       whole and the default, one round, no cold cache, and
#                       of scenario 4 the connection hog alone, no peers
#   make loadtest-full  whole partition sweep + nginx/Node.js peers
#   make loadtest-attacks  only the attacks between clients of loadtest-full
#                       (scenario 4: unclog and the peers, three rounds);
#                       LOADTEST_ARGS="--attackers 64": each attack spread over
#                       64 addresses (127.0.1.1-64, 1/64 of its connections each),
#                       "--attacks stalled": 4,500 slow readers of /16m.bin against
#                       a victim downloading 16 MiB files back to back (issue 39)
#   make loadtest-cluster  three unclog machines behind HAProxy in network
#                       namespaces (root): the attacks through the balancer, rate-
#                       limited hosts, a backend killed, a rolling restart (about
#                       6 minutes; LOADTEST_ARGS="--parts kill,rolling", "--attacks hog");
#                       cluster.md and cluster-attacks.svg (loadtest/cluster.py
#                       --replot DIR redraws the plot from DIR's cluster.json)
#   make bench          unclog vs nginx, req/s and MB/s side by side
#   make bench-pool     the clogging experiment at the pool level, through the
#                       gateway without HTTP: fifo and fair, piece sizes, auto
#                       (BENCH_POOL_ARGS="SECONDS THREADS CHAINS", default 3 4 10)
#   make loadtest-deps  install wrk, gnuplot and nginx (Debian packages)
#   make demo           the clogging live, for a talk (docs/talk.md):
#                       DEMO_ARGS="--script", "--connections 16 --flood-size 64m", ...;
#                       DEMO_ARGS="--act attack": the second act, one client against
#                       another (a connection hog, a small-file flood, a /gzip flood
#                       from 127.0.0.3 against a probe from 127.0.0.2, each under fifo
#                       and fair), about 80 s, then its table; DEMO_ARGS="--act attack --attacks
#                       reader": the slow reader instead (also head, body: slow.py)
#   make dashboard-png  docs/dashboard.png from the demo: 40 s clogged, a switch to
#                       64k, 12 s, a headless Chromium screenshot (DASHBOARD_PNG_ARGS)
#
# Extra arguments for loadtest/run.py go in LOADTEST_ARGS, e.g.
#   make loadtest LOADTEST_ARGS="--partitions 4k,64k,whole --rounds 5"

LOADTEST_PKGS := wrk gnuplot-nox nginx-light
LOADTEST_RUN  := python3 loadtest/run.py

.PHONY: loadtest-deps loadtest-attacks loadtest-cluster bench-pool demo dashboard-png

# The probe parses responses with llhttp: the objects the server links (LL_OBJ).
build/probe: loadtest/probe.c $(LL_OBJ)
	@mkdir -p $(dir $@)
	$(CC) loadtest/probe.c $(LL_OBJ) -o $@ -std=c17 -D_DEFAULT_SOURCE -O2 -Wall -Wextra -Werror \
	    -I$(LLHTTP_INC) $(shell pkg-config --cflags --libs libuv)

# SHORT=1 (any value but 0): run.py's short mode, about a minute, in place of quick.
LOADTEST_MODE := $(if $(filter-out 0,$(SHORT)),short,quick)
loadtest: build/unclog build/probe
	$(LOADTEST_RUN) $(LOADTEST_MODE) $(LOADTEST_ARGS)

loadtest-full: build/unclog build/probe
	$(LOADTEST_RUN) full $(LOADTEST_ARGS)

loadtest-attacks: build/unclog build/probe
	$(LOADTEST_RUN) full --only attacks $(LOADTEST_ARGS)

bench: build/unclog build/probe
	$(LOADTEST_RUN) bench $(LOADTEST_ARGS)

# loadtest/cluster.py: namespaces, haproxy and tc; it says why when it cannot run.
loadtest-cluster: build/unclog build/probe
	python3 loadtest/cluster.py $(LOADTEST_ARGS)

# The gateway and what it needs: the rooms below it, whole (Makefile: ROOM_SRC).
POOL_OBJ := $(call objs,build/obj,$(BASE_ROOM_SRC) $(POOL_ROOM_SRC))
build/bench_pool: loadtest/bench_pool.c $(POOL_OBJ) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(WARN) $(OPT_FLAGS) loadtest/bench_pool.c $(POOL_OBJ) -o $@ $(LIBS)

# A warm 16 MiB file of random bytes, made once.
build/pool-16m.bin:
	@mkdir -p $(dir $@)
	head -c 16777216 /dev/urandom > $@

BENCH_POOL_ARGS ?= 3 4 10
bench-pool: build/bench_pool build/pool-16m.bin
	cat build/pool-16m.bin > /dev/null
	build/bench_pool build/pool-16m.bin $(BENCH_POOL_ARGS)

loadtest-deps:
	@$(call apt_install,$(LOADTEST_PKGS))

# On a terminal the demo runs as a foreground job of its own (bash -m), as
# make run does, so that Ctrl-C reaches it alone: it stops what it started,
# by PID, and make exits 0.
DEMO_CMD := python3 loadtest/demo.py $(DEMO_ARGS)
demo: build/unclog build/probe
	@if [ -t 0 ]; then exec bash -mc '$(DEMO_CMD)'; else exec $(DEMO_CMD); fi

# The demo's own state, as the talk shows it: loadtest/dashboard_png.py.
dashboard-png: build/unclog build/probe
	python3 loadtest/dashboard_png.py $(DASHBOARD_PNG_ARGS)

# tests/integration/41_demo.t runs the demo and the probe.
test test-asan: build/probe
