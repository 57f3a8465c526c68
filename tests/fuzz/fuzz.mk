# libFuzzer targets (clang-14, ASan + UBSan), included by the Makefile.
#
#   make fuzz          each target for FUZZ_TIME seconds (default 60)
#   make fuzz-smoke    each target for 20 seconds (what .ci/run does)
#   make fuzz-regress  each target once over its seed corpus: the crash regressions
#   make fuzz-build    only the binaries, build/fuzz/fuzz_<target>
#
# Targets (tests/fuzz/fuzz_<target>.c):
#   conn    arbitrary bytes through a connection: llhttp, strict checks, limits,
#           router, handlers (over a socketpair, no network)
#   path    path_resolve / path_encode, with a round-trip property
#   config  config_parse_size, config_set, config_load_file, config_apply_cli
#   strict  the strict checks, split-invariance of the line-discipline scan
#   range   Range, If-* and HTTP-date parsing
#   proxy   the PROXY protocol header, the same verdict however it is split
#   relay   a load balancer's connection (over TCP on loopback, from an address
#           under proxy_protocol_from): the PROXY intake, then as conn; and the
#           same answers whether the bytes come whole or in pieces
#
# Seeds are in tests/fuzz/corpus/<target>/ and are only read; what libFuzzer
# finds goes to build/fuzz/corpus/<target>/, crashes to build/fuzz/crashes/.
# A crash becomes a regression test by copying its input into the seed
# corpus, which fuzz-regress replays.

FUZZ_CC      ?= clang-14
FUZZ_TIME    ?= 60
FUZZ_TARGETS := conn path config strict range proxy relay
FUZZ_CFLAGS  := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
                -fno-sanitize-recover=all -fsanitize=fuzzer-no-link
FUZZ_LL_OBJ  := $(addprefix build/fuzz/obj/llhttp/,$(addsuffix .o,$(LLHTTP_C)))
FUZZ_OBJ     := $(call objs,build/fuzz/obj,$(CORE_SRC)) $(FUZZ_LL_OBJ)
FUZZ_BIN     := $(addprefix build/fuzz/fuzz_,$(FUZZ_TARGETS))
# -timeout: an input that takes this long is a hang; -rss_limit_mb: a leak.
FUZZ_ARGS    := -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
FUZZ_DICTED  := conn range relay

.PHONY: fuzz fuzz-smoke fuzz-regress fuzz-build
# Objects reached only through the pattern rule below: keep them.
.SECONDARY: $(FUZZ_OBJ)

build/fuzz/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CC fuzz $<"
	@$(FUZZ_CC) $(BASE) $(WARN) $(FUZZ_CFLAGS) -c $< -o $@

build/fuzz/obj/llhttp/%.o: $(LLHTTP_SRC)/%.c
	@mkdir -p $(dir $@)
	@echo "  CC fuzz $<"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -w -I$(LLHTTP_INC) -c $< -o $@

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJ) $(HEADERS)
	@echo "  LD fuzz $@"
	@$(FUZZ_CC) $(BASE) $(WARN) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_OBJ) -o $@ $(LIBS)

fuzz-build: $(FUZZ_BIN)

fuzz: FUZZ_SECONDS = $(FUZZ_TIME)
fuzz-smoke: FUZZ_SECONDS = 20

# One target after the other (each may use both cores' worth of threads);
# the last lines of each log say how many inputs ran.
fuzz fuzz-smoke: $(FUZZ_BIN)
	@for t in $(FUZZ_TARGETS); do \
	    mkdir -p build/fuzz/corpus/$$t build/fuzz/crashes; \
	    echo "== fuzz $$t, $(FUZZ_SECONDS) s"; \
	    dict=; case " $(FUZZ_DICTED) " in *" $$t "*) dict=-dict=tests/fuzz/http.dict;; esac; \
	    build/fuzz/fuzz_$$t $(FUZZ_ARGS) -max_total_time=$(FUZZ_SECONDS) \
	        -artifact_prefix=build/fuzz/crashes/$$t- $$dict \
	        build/fuzz/corpus/$$t tests/fuzz/corpus/$$t >build/fuzz/$$t.log 2>&1 \
	        || { tail -n 60 build/fuzz/$$t.log; exit 1; }; \
	    grep '^stat::number_of_executed_units' build/fuzz/$$t.log; \
	done

fuzz-regress: $(FUZZ_BIN)
	@for t in $(FUZZ_TARGETS); do \
	    build/fuzz/fuzz_$$t -runs=0 tests/fuzz/corpus/$$t >build/fuzz/$$t-regress.log 2>&1 \
	        || { tail -n 60 build/fuzz/$$t-regress.log; exit 1; }; \
	    echo "fuzz-regress $$t: $$(ls tests/fuzz/corpus/$$t | wc -l) seeds pass"; \
	done
