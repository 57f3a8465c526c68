# unclog — build, run, test, benchmark.
#
#   make              build/unclog (optimised, warnings are errors)
#   make run          serve static/ on http://127.0.0.1:8080
#   make test         unit + integration tests, one prove summary
#   make test-asan    the same tests against an ASan+UBSan build
#   make deps         install the Debian packages the build needs (root)
#   make loadtest     the fairness experiment, quick pass (see loadtest/README.md)
#   make format-check clang-format dry run
#   make tools        every binary and page a documented target builds (CI)
#   make install      binary, man page, config, example site, systemd unit
#                     (PREFIX=/usr/local, DESTDIR; see install.mk); make uninstall

# ---- environment -------------------------------------------------------------
.DEFAULT_GOAL := all
DEB_PKGS := build-essential pkg-config libuv1-dev zlib1g-dev node-llhttp curl
# $(call apt_install,PACKAGES): installs those not installed yet (sudo unless root).
apt_install = missing=""; for p in $(1); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	    echo "installing:$$missing"; \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing; \
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

# The core's rooms, bottom up: each uses only the rooms above it in this list.
BASE_ROOM_SRC := $(wildcard server/base/*.c)
POOL_ROOM_SRC := $(wildcard server/pool/*.c)
HTTP_ROOM_SRC := $(wildcard server/http/*.c)
SERVER_SRC  := $(BASE_ROOM_SRC) $(POOL_ROOM_SRC) $(HTTP_ROOM_SRC) $(wildcard server/*.c)
HANDLER_SRC := $(wildcard handlers/*.c handlers/*/*.c)
CORE_SRC    := $(SERVER_SRC) $(HANDLER_SRC)
LLHTTP_C    := api http llhttp
UNIT_SRC    := $(wildcard tests/unit/test_*.c)
HEADERS     := $(wildcard server/*.h server/*/*.h handlers/*.h handlers/*/*.h tests/*.h)

# $(call objs,DIR,SOURCES) -> object paths under DIR
objs = $(patsubst %.c,$(1)/%.o,$(2))

.PHONY: all run test test-asan unit unit-asan format format-check clean \
        loadtest loadtest-full bench asan
all: build/unclog

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
