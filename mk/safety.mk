# mk/safety.mk - optional parts of the safety area (docs/SAFETY.md).
#
#  - Integrity manifests (pagein hash, pagein verify --manifest) hash with
#    XXH3-128 from libxxhash. Only its header is needed (libxxhash-dev): it is
#    compiled inline, so libpagein gains no run-time dependency and the core
#    still links against libc and pthreads only. Without the header the hash
#    functions return PAGEIN_E_UNSUPPORTED and their tests skip with a reason.
#  - `make test` also runs the whole unit suite under valgrind memcheck
#    (valgrind-test). Tests too slow under valgrind skip themselves when
#    PAGEIN_UNDER_VALGRIND=1 is set (it is, here).

HAVE_XXHASH := $(shell $(CC) -E -include xxhash.h -x c /dev/null >/dev/null 2>&1 && echo 1)
ifeq ($(HAVE_XXHASH),1)
LIB_CFLAGS += -DPAGEIN_HAVE_XXHASH
endif
MK_DEPS += mk/safety.mk

VALGRIND ?= valgrind
VALGRIND_FLAGS := -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
                  --show-leak-kinds=definite,indirect --track-fds=no
# make test runs every unit test once on the optimized build (besides
# san-test's ASan+UBSan run of all of them): under memcheck, or natively
# for the tests listed in VALGRIND_EXCLUDE (name prefixes), at the same time
# as the two memcheck runners. Left out of memcheck:
#  - the training-data format suites (fixture files from npm writers, every
#    truncation and bit flip of them: minutes under memcheck; san-test runs
#    them with leak checking, and fuzz-replay their corpora);
#  - data_block_memory_bound (nine whole epochs: three minutes under
#    memcheck, one second plain);
#  - the remote_ tests (HTTP, TLS and S3 against local servers: mostly
#    waiting; ASan+UBSan and, where threads meet, TSan run them);
#  - the six slowest of the rest under memcheck (27-50 s each there, 0.3-2 s
#    plain; readers, pagers and forks over generated data, and the DCP
#    allocation-failure walk), which add nothing that ASan's run misses but
#    uninitialised reads of their own generated inputs.
VALGRIND_EXCLUDE := arrow_,parquet_,dataformats_,data_block_memory_bound,remote_,data_megatron_dataset,\
  fork_after_open_each_strategy,pager_ahead_extreme,data_readers_seeded,data_slowfs_readers,dcp_convert_allocfail
VALGRIND_EXCLUDE := $(subst $(eval) ,,$(VALGRIND_EXCLUDE))
TEST_EXTRA += valgrind-test
.PHONY: valgrind-test
VG_SHARD = PAGEIN_UNDER_VALGRIND=1 PAGEIN_NO_URING=1 PAGEIN_TEST_EXCLUDE=$(VALGRIND_EXCLUDE) PAGEIN_TEST_SHARD=$(1)/2 \
  timeout 600 $(VALGRIND) $(VALGRIND_FLAGS) ./$(TESTRUN) >$(BUILD)/valgrind.$(1).log 2>&1
VG_NATIVE = PAGEIN_TEST_ONLY=$(VALGRIND_EXCLUDE) PAGEIN_TEST_TIMEOUT=$(CHECK_TIMEOUT) ./$(TESTRUN) >$(BUILD)/valgrind.native.log 2>&1
# Two memcheck runners at once, each on half the tests (PAGEIN_TEST_SHARD):
# memcheck runs a process's threads on one core. Without valgrind, the unit
# tests run natively as make check runs them.
valgrind-test: $(TESTRUN)
	@if ! command -v $(VALGRIND) >/dev/null 2>&1; then \
	  echo "SKIP valgrind-test's memcheck: valgrind is not installed (Debian package valgrind); the unit tests natively:"; \
	  exec $(MAKE) --no-print-directory check CHECK_UNITS_ONLY=1; fi; \
	echo "valgrind memcheck: $(TESTRUN) (logs in $(BUILD)/valgrind.0.log, $(BUILD)/valgrind.1.log; natively: $(BUILD)/valgrind.native.log)"; \
	$(call VG_SHARD,0) & p0=$$!; $(call VG_SHARD,1) & p1=$$!; $(VG_NATIVE) & p2=$$!; \
	wait $$p0; rc0=$$?; wait $$p1; rc1=$$?; wait $$p2; rc2=$$?; \
	for k in 0 1 native; do grep -v '^ok ' $(BUILD)/valgrind.$$k.log | tail -40; done; \
	[ $$rc0 -eq 0 ] && [ $$rc1 -eq 0 ] && [ $$rc2 -eq 0 ] || \
	  { echo "valgrind-test failed (exit $$rc0 and $$rc1 under memcheck, 99 = memcheck errors; $$rc2 natively)"; exit 1; }
