# unclog — build, run, test, benchmark.
#
#   make              build/unclog (optimised, warnings are errors)
#   make run          serve static/ on http://127.0.0.1:8080
#   make test         unit + integration tests, one prove summary
#   make test-asan    the same tests against an ASan+UBSan build
#   make test-tsan    the pool's integration tests against a ThreadSanitizer build
#   make deps         install the Debian packages the build needs (root)
#   make loadtest     the fairness experiment, quick pass (see loadtest/README.md);
#                     make loadtest SHORT=1: its one-minute form (48 s measured)
#   make loadtest-attacks  the attacks between clients alone (scenario 4);
#                     LOADTEST_ARGS="--attackers 64" spreads each over 64 addresses,
#                     "--attacks stalled" is the stalled-download shape (issue 39)
#   make loadtest-cluster  three unclog machines behind HAProxy in network
#                     namespaces (root): attacks, slow links, a backend lost, a rolling restart
#   make format-check clang-format dry run
#   make clean        build/; make distclean: the load tests' fixtures too (~340 MB)
#   make tools        every binary and page a documented target builds (CI)
#   make install      binary, man page, config, example site, systemd unit
#                     (PREFIX=/usr/local, DESTDIR; see install.mk); make uninstall

# ---- environment -------------------------------------------------------------
.DEFAULT_GOAL := all
DEB_PKGS := build-essential pkg-config libuv1-dev zlib1g-dev node-llhttp curl
# $(call apt_install,PACKAGES): installs those not installed yet (sudo unless root),
# or says in one line, named for the target, that all of them are.
apt_install = missing=""; for p in $(1); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	    echo "installing:$$missing"; \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing; \
	else \
	    echo "$@: all installed ($(strip $(1)))"; \
	fi

# GNU make reads the file system (pkg-config's answers, the llhttp sources)
# once, before any recipe runs. So in `make deps GOAL...` the goals after deps
# run in a second make, started once the packages are in place.
AFTER_DEPS := $(if $(filter deps,$(MAKECMDGOALS)),$(filter-out deps,$(MAKECMDGOALS)))

.PHONY: deps
deps:
	@$(call apt_install,$(DEB_PKGS))
ifneq ($(AFTER_DEPS),)
	@$(MAKE) --no-print-directory $(AFTER_DEPS)

.PHONY: $(AFTER_DEPS)
$(AFTER_DEPS): deps
	@:
else

CC       ?= cc
PKGS     := libuv zlib
LLHTTP_INC := /usr/share/include/llhttp
LLHTTP_SRC := /usr/share/llhttp

WARN     := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wpointer-arith -Wformat=2 -Wundef -Wvla -Wno-unused-parameter -Werror
BASE     := -std=c17 -D_DEFAULT_SOURCE -I. -I$(LLHTTP_INC) $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LIBS     := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread

OPT_FLAGS  := -O2 -g
ASAN_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
# gcc warns (-Wtsan) that TSan does not model atomic_thread_fence: the one
# fence is server/workers/figures.c's seqlock between worker processes, which TSan
# cannot watch anyway. clang has no such warning, nor the flag.
TSAN_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=thread \
              $(shell $(CC) -Wno-tsan -Werror -fsanitize=thread -fsyntax-only -x c /dev/null \
                  >/dev/null 2>&1 && echo -Wno-tsan)

# The core's rooms, bottom up: each uses only the rooms above it in this list.
BASE_ROOM_SRC := $(wildcard server/base/*.c)
POOL_ROOM_SRC := $(wildcard server/pool/*.c)
HTTP_ROOM_SRC := $(wildcard server/http/*.c)
SERVER_SRC  := $(BASE_ROOM_SRC) $(POOL_ROOM_SRC) $(HTTP_ROOM_SRC) $(wildcard server/*.c server/workers/*.c)
HANDLER_SRC := $(wildcard handlers/*.c handlers/*/*.c)
GEN_SRC     := build/gen/dashboard_page.c
CORE_SRC    := $(SERVER_SRC) $(HANDLER_SRC) $(GEN_SRC)
LLHTTP_C    := api http llhttp
UNIT_SRC    := $(wildcard tests/unit/test_*.c)
HEADERS     := $(wildcard server/*.h server/*/*.h handlers/*.h handlers/*/*.h tests/*.h)

# $(call objs,DIR,SOURCES) -> object paths under DIR
objs = $(patsubst %.c,$(1)/%.o,$(2))

.PHONY: all run test test-asan unit unit-asan format format-check clean distclean \
        loadtest loadtest-full bench asan tsan test-tsan
all: build/unclog

# ---- generated sources (build/gen/, never committed) --------------------------
# The dashboard built into the binary (handlers/observe/dashboard.h): the bytes
# of static/dashboard.html as a C array, and of its gzip (-n: no name or time,
# so a build is the same bytes whenever it runs). od and awk are in every Debian, xxd
# is not. Compiled by the rules below as any other source.
build/gen/dashboard_page.c: static/dashboard.html Makefile
	@mkdir -p $(dir $@)
	@echo "  GEN     $@"
	@{ echo '/* Generated by the Makefile from $<: do not edit. */'; \
	  echo '#include "handlers/observe/dashboard.h"'; \
	  echo 'const unsigned char dashboard_page[] = {'; \
	  od -An -v -tu1 $< | awk '{ for (i = 1; i <= NF; i++) printf "%s,", $$i; print "" }'; \
	  echo '};'; \
	  echo 'const size_t dashboard_page_len = sizeof dashboard_page;'; \
	  echo 'const unsigned char dashboard_page_gz[] = {'; \
	  gzip -9n < $< | od -An -v -tu1 | awk '{ for (i = 1; i <= NF; i++) printf "%s,", $$i; print "" }'; \
	  echo '};'; \
	  echo 'const size_t dashboard_page_gz_len = sizeof dashboard_page_gz;'; } > $@.tmp
	@mv $@.tmp $@

# ---- optimised build -------------------------------------------------------
build/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(BASE) $(WARN) $(OPT_FLAGS) $(CFLAGS) -c $< -o $@

# llhttp is generated code: compile it with its own include path and no warnings.
build/obj/llhttp/%.o: $(LLHTTP_SRC)/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) -O2 -g -w -I$(LLHTTP_INC) $(CFLAGS) -c $< -o $@

LL_OBJ   := $(addprefix build/obj/llhttp/,$(addsuffix .o,$(LLHTTP_C)))
CORE_OBJ := $(call objs,build/obj,$(CORE_SRC)) $(LL_OBJ)

build/unclog: build/obj/main.o $(CORE_OBJ)
	@echo "  LD      $@"
	@$(CC) $^ -o $@ $(LIBS) $(LDFLAGS)

# ---- sanitizer build (build/asan/) -------------------------------------------
build/asan/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CC asan $<"
	@$(CC) $(BASE) $(WARN) $(ASAN_FLAGS) -c $< -o $@

build/asan/obj/llhttp/%.o: $(LLHTTP_SRC)/%.c
	@mkdir -p $(dir $@)
	@echo "  CC asan $<"
	@$(CC) $(ASAN_FLAGS) -w -I$(LLHTTP_INC) -c $< -o $@

ASAN_LL_OBJ   := $(addprefix build/asan/obj/llhttp/,$(addsuffix .o,$(LLHTTP_C)))
ASAN_CORE_OBJ := $(call objs,build/asan/obj,$(CORE_SRC)) $(ASAN_LL_OBJ)

build/asan/unclog: build/asan/obj/main.o $(ASAN_CORE_OBJ)
	@echo "  LD asan $@"
	@$(CC) $(ASAN_FLAGS) $^ -o $@ $(LIBS)

asan: build/asan/unclog

# ---- thread sanitizer build (build/tsan/): the pool's jobs against the loop ---
# libuv itself is not instrumented: TSan sees its mutexes (pthread is
# intercepted), which is where a job's hand-over to and from the loop happens.
build/tsan/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CC tsan $<"
	@$(CC) $(BASE) $(WARN) $(TSAN_FLAGS) -c $< -o $@

build/tsan/obj/llhttp/%.o: $(LLHTTP_SRC)/%.c
	@mkdir -p $(dir $@)
	@echo "  CC tsan $<"
	@$(CC) $(TSAN_FLAGS) -w -I$(LLHTTP_INC) -c $< -o $@

TSAN_LL_OBJ   := $(addprefix build/tsan/obj/llhttp/,$(addsuffix .o,$(LLHTTP_C)))
TSAN_CORE_OBJ := $(call objs,build/tsan/obj,$(CORE_SRC)) $(TSAN_LL_OBJ)

build/tsan/unclog: build/tsan/obj/main.o $(TSAN_CORE_OBJ)
	@echo "  LD tsan $@"
	@$(CC) $(TSAN_FLAGS) $^ -o $@ $(LIBS)

tsan: build/tsan/unclog

# ---- unit tests: one binary per module, always sanitized ----------------------
# A unit test may #include the module's .c to reach its statics, so it links
# against every core object except the one it includes.
UNIT_BIN := $(patsubst tests/unit/%.c,build/tests/%,$(UNIT_SRC))

# The module a test includes, as its object: `#include "../../server/base/config.c"`.
included = $(patsubst %.c,build/asan/obj/%.o,$(shell sed -n 's|^#include "\.\./\.\./\(.*\.c\)"|\1|p' $(1)))

build/tests/test_%: tests/unit/test_%.c $(ASAN_CORE_OBJ) $(HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CC test $<"
	@$(CC) $(BASE) $(WARN) $(ASAN_FLAGS) $< $(filter-out $(call included,$<),$(ASAN_CORE_OBJ)) \
	    -o $@ $(LIBS)

unit: $(UNIT_BIN)

# ---- tests -------------------------------------------------------------------
PROVE := prove --timer -j2
INTEG := $(sort $(wildcard tests/integration/*.t))

# The integration tests import their one helper library, harness.py.
INTEG_ENV := PYTHONPATH=$(CURDIR)/tests/integration PYTHONDONTWRITEBYTECODE=1

test: build/unclog $(UNIT_BIN)
	$(INTEG_ENV) UNCLOG_BIN=$(CURDIR)/build/unclog $(PROVE) $(UNIT_BIN) $(INTEG)

test-asan: build/asan/unclog $(UNIT_BIN)
	$(INTEG_ENV) UNCLOG_BIN=$(CURDIR)/build/asan/unclog UNCLOG_ASAN=1 $(PROVE) $(UNIT_BIN) $(INTEG)

# The integration tests against the ThreadSanitizer build: a race between a
# pool job and the loop (or two jobs) fails the test whose server reports it.
# The tests whose servers run pool work of every kind, and change it under
# way: reads and their partitions, /gzip, the scheduler and the budget,
# settings and reloads, workers, cancels at shutdown, ranges, listings,
# compressed files, the cache, the send share, the turns, zlib states reused,
# sendfile pieces.
TSAN_INTEG := $(addprefix tests/integration/,05_partition.t 06_gzip.t 08_backpressure.t \
              10_shutdown.t 11_reload.t 12_workers.t 13_job_classes.t 14_scheduler.t 15_memory.t \
              16_settings.t 29_send_share.t 31_ranges.t 32_directories.t 33_compression.t \
              36_cache.t 55_turns.t 63_zlib_reuse.t 71_sendfile.t)
test-tsan: build/tsan/unclog
	$(INTEG_ENV) UNCLOG_BIN=$(CURDIR)/build/tsan/unclog UNCLOG_TSAN=1 \
	    TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp $$TSAN_OPTIONS" $(PROVE) $(TSAN_INTEG)

# On a terminal the server runs as a foreground job of its own (bash -m), so
# that Ctrl-C reaches it alone: it stops gracefully and make exits with its
# status, 0, instead of dying of the signal itself.
RUN_CMD := build/unclog -c conf/unclog.conf $(RUN_ARGS)
run: build/unclog
	@if [ -t 0 ]; then exec bash -mc '$(RUN_CMD)'; else exec $(RUN_CMD); fi

FORMAT_SRC := main.c $(wildcard server/*.[ch] server/*/*.[ch] handlers/*.[ch] handlers/*/*.[ch] tests/*.h tests/unit/*.c tests/fuzz/*.c loadtest/*.c)

format:
	clang-format -i $(FORMAT_SRC)

format-check:
	clang-format --dry-run --Werror $(FORMAT_SRC)

clean:
	rm -rf build

# The load tests' fixtures too (loadtest/fixtures/, about 340 MB once the
# attacks have run): made again by the next load test.
distclean: clean
	rm -rf loadtest/fixtures

# Every artefact a documented target builds, built without running anything:
# CI builds them all, so a new module cannot silently break a tool.
TOOLS := build/unclog build/asan/unclog build/probe build/bench_pool build/unclog.1 \
         build/unclog.service
.PHONY: tools
tools: $(TOOLS)

# ---- load tests (see loadtest/README.md) --------------------------------------
-include loadtest/loadtest.mk
-include tests/fuzz/fuzz.mk
-include tests/soak/soak.mk
-include install.mk

endif
