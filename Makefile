# pagein - one Makefile for the library, the tool, tests, fuzzing and benchmarks.
#
#   make              libpagein.a, libpagein.so and the pagein tool (in build/)
#   make test         every test: unit tests, under ASan+UBSan too, fuzz-corpus
#                     replay, CLI tests, and the optional parts' tests
#   make demo         generate a sample model and run the main job on it
#   make install      PREFIX=/usr/local DESTDIR=
#   make fuzz         CC=clang FUZZ_TIME=60: run every libFuzzer target
#   make asan / ubsan / SANITIZE=address,undefined
#
# Optional parts live in mk/*.mk fragments; each appends to the ALL_EXTRA,
# TEST_EXTRA and CLEAN_EXTRA variables below.

# `make demo`, `make test`, `make bench` and `make fuzz` install their Debian
# packages before anything is compiled or any optional part is detected: at
# the top level such a goal runs scripts/deps.sh in a recipe (idempotent and
# quick when nothing is missing), then hands every goal to a sub-make, whose
# parse (mk/*.mk run pkg-config) already sees liburing, FUSE, libcurl, ...
# Nothing is installed while a Makefile is parsed: `make -n test` installs
# nothing. `make check` is the quick loop: the unit tests alone.
DEPS_GOALS := $(filter demo test bench fuzz,$(MAKECMDGOALS))
ifneq ($(DEPS_GOALS)$(MAKELEVEL),0)
ifeq ($(MAKELEVEL),0)
.PHONY: $(MAKECMDGOALS) pagein-deps
$(MAKECMDGOALS): pagein-deps
	@$(MAKE) --no-print-directory $@
pagein-deps:
	bash scripts/deps.sh $(DEPS_GOALS)
DEPS_WRAPPER := 1
endif
endif
ifeq ($(DEPS_WRAPPER),)

CC ?= cc
ifeq ($(origin CC),default)
CC := cc
endif
PREFIX ?= /usr/local
DESTDIR ?=
BUILD ?= build
CFLAGS ?= -O2 -g
WERROR ?=
SANITIZE ?=
PY ?= /usr/bin/python3

VERSION := $(shell sed -n 's/^\#define PAGEIN_VERSION_STRING "\(.*\)"/\1/p' include/pagein.h)

BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -fvisibility=hidden -fPIC -Iinclude -MMD -MP -Wall -Wextra \
               -Wshadow -Wno-unused-parameter $(if $(WERROR),-Werror)
ifneq ($(SANITIZE),)
BASE_CFLAGS += -fsanitize=$(SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_LDFLAGS := -fsanitize=$(SANITIZE)
endif
ALL_CFLAGS = $(BASE_CFLAGS) $(CFLAGS) $(LIB_CFLAGS)
# libm: src/data/reader.c uses log2; libpagein.so records it (DT_NEEDED)
# and pagein.pc lists it for static links.
LDLIBS_CORE := -lpthread -lm
LIB_LDLIBS ?=

LIB_SRC := $(sort $(wildcard src/*.c src/*/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_SRC := $(sort $(wildcard cli/*.c))
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(sort $(wildcard tests/*.c))
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o)
BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
FUZZ_TARGETS := $(patsubst fuzz/fuzz_%.c,%,$(sort $(wildcard fuzz/fuzz_*.c)))

LIBA := $(BUILD)/libpagein.a
LIBSO := $(BUILD)/libpagein.so
TOOL := $(BUILD)/pagein
TESTRUN := $(BUILD)/tests/run

ALL_EXTRA :=
TEST_EXTRA :=
CLEAN_EXTRA :=

.PHONY: all lib check test unit-test san-test fuzz-replay cli-test fixtures-check demo install clean fuzz asan ubsan deps bench

all: lib $(TOOL) $(BENCH_BIN) layers

# The folders of src/ are layers: every include and every call points down
# (scripts/layers.sh, docs/ARCHITECTURE.md). Runs after the library's
# objects exist, so that calls are checked too.
.PHONY: layers
layers: $(LIBA)
	@BUILD=$(BUILD) bash scripts/layers.sh

lib: $(LIBA) $(LIBSO)

-include $(sort $(wildcard mk/*.mk))

all: $(ALL_EXTRA)

# Header dependencies come from the compiler (-MMD -MP: one .d file per
# object); MK_DEPS lists build-configuration files that change flags
# (this Makefile among them).
MK_DEPS += Makefile
$(BUILD)/obj/%.o: %.c $(MK_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

-include $(wildcard $(BUILD)/obj/*/*.d $(BUILD)/obj/*/*/*.d $(BUILD)/bench/*.d $(BUILD)/fuzz/*.d)

$(LIBA): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(LIBSO): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libpagein.so.0 $(SAN_LDFLAGS) -o $@ $^ $(LDLIBS_CORE) $(LIB_LDLIBS)

$(TOOL): $(CLI_OBJ) $(LIBA)
	$(CC) $(SAN_LDFLAGS) -o $@ $(CLI_OBJ) $(LIBA) $(LDLIBS_CORE) $(LIB_LDLIBS) -lm

$(TESTRUN): $(TEST_OBJ) $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(SAN_LDFLAGS) -o $@ $(TEST_OBJ) $(LIBA) $(LDLIBS_CORE) $(LIB_LDLIBS) -lm

$(BUILD)/bench/%: bench/%.c $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(LIBA) $(LDLIBS_CORE) $(LIB_LDLIBS) -lm

# The programs `pagein bench SUITE` runs (bench/bench_SUITE.c, installed
# under PREFIX/libexec/pagein) share the tool's helpers (errors, sizes, JSON
# strings, cleanup on signals, SVG charts, access traces) as benchmarks of
# the tool's family; the rest of bench/ links the library only.
BENCH_CLI_OBJ := $(addprefix $(BUILD)/obj/cli/,util.o cleanup.o svg.o trace.o)
BENCH_CLI_PROGS := $(addprefix $(BUILD)/bench/,bench_gpu bench_load bench_remote bench_share bench_shuffle)
$(BENCH_CLI_PROGS): $(BUILD)/bench/%: bench/%.c $(BENCH_CLI_OBJ) $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Icli -o $@ $< $(BENCH_CLI_OBJ) $(LIBA) $(LDLIBS_CORE) $(LIB_LDLIBS) -lm

# ---- fuzz targets: replay driver (any compiler) and libFuzzer (clang) ------
$(BUILD)/fuzz/replay_%: fuzz/replay.c fuzz/fuzz_%.c $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ fuzz/replay.c fuzz/fuzz_$*.c $(LIBA) $(LDLIBS_CORE) $(LIB_LDLIBS) -lm

FUZZ_TIME ?= 60
FUZZ_BUILD := build-fuzz
fuzz:
	@command -v clang >/dev/null || { echo "make fuzz needs clang"; exit 2; }
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=clang SANITIZE=fuzzer-no-link,address,undefined lib
	@for t in $(FUZZ_TARGETS); do \
	  clang -std=c11 -D_GNU_SOURCE -Iinclude -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	    -o $(FUZZ_BUILD)/fuzz_$$t fuzz/fuzz_$$t.c $(FUZZ_BUILD)/libpagein.a -lpthread $(LIB_LDLIBS) -lm || exit 1; \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	  seeds=""; for s in $$(cat fuzz/seeds_$$t.txt 2>/dev/null); do \
	    if [ -d "$$s" ]; then seeds="$$seeds $$s"; elif [ -f "$$s" ]; then cp "$$s" $(FUZZ_BUILD)/corpus/$$t/; fi; \
	  done; \
	  echo "== fuzzing $$t for $(FUZZ_TIME)s"; \
	  ./$(FUZZ_BUILD)/fuzz_$$t -max_total_time=$(FUZZ_TIME) -print_final_stats=1 \
	    $$([ -f fuzz/$$t.dict ] && echo -dict=fuzz/$$t.dict) -artifact_prefix=$(FUZZ_BUILD)/ \
	    $(FUZZ_BUILD)/corpus/$$t fuzz/corpus/$$t $$seeds || exit 1; \
	done

# ---- tests -----------------------------------------------------------------
SAN_BUILD := build-san
SAN := address,undefined
# The sanitizer builds compile at -O1 with line tables only (-g1: stack
# traces keep file:line): 57% less compile CPU than -O2 -g for ASan+UBSan,
# and the suites ran no slower (7.5 s of CPU against 7.8 s on the four
# heaviest data tests). make test's budget is CPU on two cores.
SAN_CFLAGS ?= -O1 -g1

# The builds inside make test use every core (JOBS); the suites themselves
# run one test at a time.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

# Each stage's time is printed (the whole run is kept under 10 minutes).
# Every stage runs with HOME (and XDG_CACHE_HOME) in a fresh folder of the
# build, and make test fails when a suite wrote anything there: no test or
# benchmark writes into the user's home (npm keeps the user's own cache,
# npm_config_cache, so that s3rver installs offline as before).
TEST_HOME = $(abspath $(BUILD))/test-home
test:
	@start=$$(date +%s); \
	rm -rf "$(TEST_HOME)" && mkdir -p "$(TEST_HOME)" || exit 1; \
	c=$${npm_config_cache:-$$(npm config get cache 2>/dev/null)}; [ -z "$$c" ] || export npm_config_cache="$$c"; \
	export HOME="$(TEST_HOME)" XDG_CACHE_HOME="$(TEST_HOME)/.cache"; unset PAGEIN_META_CACHE_DIR HF_HOME; \
	for t in build san-test cli-test $(TEST_EXTRA); do \
	  s=$$(date +%s); \
	  if [ $$t = build ]; then $(MAKE) -j$(JOBS) all $(TESTRUN) || exit 1; else $(MAKE) $$t || exit 1; fi; \
	  echo "make test: $$t took $$(( $$(date +%s) - s )) s"; \
	done; \
	left=$$(cd "$(TEST_HOME)" && find . -mindepth 1 | head -20); \
	if [ -n "$$left" ]; then echo "make test: a suite wrote into HOME ($(TEST_HOME)):"; echo "$$left"; exit 1; fi; \
	echo "make test: all suites passed in $$(( $$(date +%s) - start )) s; nothing written into HOME"

# The unit tests as make check runs them (two runners, each on half the
# tests, CHECK_TIMEOUT per test), without check's two CLI scripts. make test
# runs each unit test on this build in valgrind-test instead (under memcheck
# or natively: mk/safety.mk), and all of them under ASan+UBSan in san-test.
unit-test:
	@$(MAKE) --no-print-directory check CHECK_UNITS_ONLY=1

# The quick loop: the unit tests alone (each in its own process with a
# time-out of CHECK_TIMEOUT seconds, tests/run.c), no sanitizers, no CLI or
# Python suites; two runners at once, each on half the tests
# (PAGEIN_TEST_SHARD: many tests wait on their servers), each runner's lines
# printed when it is done, then one closing line over both (every SKIP
# counted) and the time the whole check took.
CHECK_TIMEOUT ?= 60
CHECK_SHARD = PAGEIN_TEST_TIMEOUT=$(CHECK_TIMEOUT) PAGEIN_TEST_SHARD=$(1)/2 $(TESTRUN) >$(BUILD)/check.$(1).log 2>&1
check: all $(TESTRUN)
	@start=$$(date +%s); \
	$(call CHECK_SHARD,0) & p0=$$!; $(call CHECK_SHARD,1) & p1=$$!; \
	wait $$p0; r0=$$?; wait $$p1; r1=$$?; \
	cat $(BUILD)/check.0.log $(BUILD)/check.1.log; \
	tail -qn1 $(BUILD)/check.0.log $(BUILD)/check.1.log | awk '{ p += $$1; f += $$3; s += $$5 } \
	  END { printf "make check: unit tests: %d passed, %d failed, %d skipped\n", p, f, s }'; \
	[ $$r0 -eq 0 ] && [ $$r1 -eq 0 ] || { echo "make check: unit tests failed (see FAIL above)"; exit 1; }; \
	[ -n "$(CHECK_UNITS_ONLY)" ] || PAGEIN=$(TOOL) BUILD=$(BUILD) bash tests/cli/run.sh runner layers || exit 1; \
	echo "make check: passed in $$(( $$(date +%s) - start )) s"

# The same unit tests and the fuzz corpora under ASan+UBSan (gcc or clang),
# two runners at once as in check, each on half the tests.
SAN_SHARD = ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 PAGEIN_TEST_SHARD=$(1)/2 \
  $(SAN_BUILD)/tests/run >$(SAN_BUILD)/san.$(1).log 2>&1
san-test:
	$(MAKE) -j$(JOBS) BUILD=$(SAN_BUILD) SANITIZE=$(SAN) CFLAGS='$(SAN_CFLAGS)' $(SAN_BUILD)/tests/run \
	  $(FUZZ_TARGETS:%=$(SAN_BUILD)/fuzz/replay_%)
	@$(call SAN_SHARD,0) & p0=$$!; $(call SAN_SHARD,1) & p1=$$!; \
	wait $$p0; r0=$$?; wait $$p1; r1=$$?; \
	cat $(SAN_BUILD)/san.0.log $(SAN_BUILD)/san.1.log; \
	[ $$r0 -eq 0 ] && [ $$r1 -eq 0 ] || { echo "san-test: unit tests failed under $(SAN) (see FAIL above)"; exit 1; }
	$(MAKE) BUILD=$(SAN_BUILD) SANITIZE=$(SAN) CFLAGS='$(SAN_CFLAGS)' fuzz-replay

fuzz-replay: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/replay_%)
	@for t in $(FUZZ_TARGETS); do \
	  ./$(BUILD)/fuzz/replay_$$t fuzz/corpus/$$t $$(cat fuzz/seeds_$$t.txt 2>/dev/null) || exit 1; \
	done

# The CLI scripts, one more than JOBS at a time (most wait on servers,
# files or child processes); a script marked "# cli: serial" runs alone
# (tests/cli/run.sh).
cli-test: all
	PAGEIN=$(TOOL) BUILD=$(BUILD) PAGEIN_CLI_JOBS=$$(( $(JOBS) + 1 )) bash tests/cli/run.sh

# The committed Arrow and Parquet fixtures are what their writers (npm
# apache-arrow, parquet-wasm) write: tests/data/regen.sh --check writes them
# again into a temporary folder and compares every byte (exit 77, SKIP,
# without node/npm). Run by .ci/run after make test (the tests read the
# committed files; this takes 20-30 s of node).
fixtures-check:
	@bash tests/data/regen.sh --check; rc=$$?; \
	if [ $$rc = 77 ]; then echo "SKIP fixtures-check"; exit 0; fi; \
	[ $$rc = 0 ] && echo "fixtures-check: the committed files are what the writers write"; exit $$rc

deps:
	@bash scripts/deps.sh test

asan:
	$(MAKE) BUILD=build-asan SANITIZE=address
ubsan:
	$(MAKE) BUILD=build-ubsan SANITIZE=undefined

# ---- demo ------------------------------------------------------------------
DEMO_MODEL ?= $(BUILD)/demo/sample.safetensors
demo: all
	PAGEIN=$(TOOL) DEMO_MODEL=$(DEMO_MODEL) bash scripts/demo.sh

# ---- install ---------------------------------------------------------------
install: lib $(TOOL) $(BENCH_CLI_PROGS)
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/pagein.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(LIBA) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIBSO) $(DESTDIR)$(PREFIX)/lib/libpagein.so.$(VERSION)
	ln -sf libpagein.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libpagein.so.0
	ln -sf libpagein.so.0 $(DESTDIR)$(PREFIX)/lib/libpagein.so
	install -m 755 $(TOOL) $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/libexec/pagein
	install -m 755 $(BENCH_CLI_PROGS) $(DESTDIR)$(PREFIX)/libexec/pagein/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' -e 's|@LIBS@|$(strip $(LDLIBS_CORE) $(LIB_LDLIBS))|g' \
	  pagein.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/pagein.pc

clean:
	rm -rf build build-san build-asan build-ubsan build-fuzz build-werror-* $(CLEAN_EXTRA)

endif # DEPS_WRAPPER
