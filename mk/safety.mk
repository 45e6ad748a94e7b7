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
# The training-data format suites (fixture files from npm writers, every
# truncation and bit flip of them) take minutes under memcheck; san-test runs
# them under ASan+UBSan with leak checking, and fuzz-replay their corpora.
# data_block_memory_bound reads nine whole epochs (three minutes under
# memcheck, one second plain); san-test runs it with leak checking. The
# remote_ tests (HTTP, TLS and S3 against local servers: mostly waiting,
# 35 s of memcheck) run under ASan+UBSan and, where threads meet, TSan.
VALGRIND_EXCLUDE := arrow_,parquet_,dataformats_,data_block_memory_bound,remote_
TEST_EXTRA += valgrind-test
.PHONY: valgrind-test
VG_SHARD = PAGEIN_UNDER_VALGRIND=1 PAGEIN_NO_URING=1 PAGEIN_TEST_EXCLUDE=$(VALGRIND_EXCLUDE) PAGEIN_TEST_SHARD=$(1)/2 \
  timeout 600 $(VALGRIND) $(VALGRIND_FLAGS) ./$(TESTRUN) >$(BUILD)/valgrind.$(1).log 2>&1
# Two memcheck runners at once, each on half the tests (PAGEIN_TEST_SHARD):
# memcheck runs a process's threads on one core.
valgrind-test: $(TESTRUN)
	@if ! command -v $(VALGRIND) >/dev/null 2>&1; then \
	  echo "SKIP valgrind-test: valgrind is not installed (Debian package valgrind)"; exit 0; fi; \
	echo "valgrind memcheck: $(TESTRUN) (logs in $(BUILD)/valgrind.0.log, $(BUILD)/valgrind.1.log)"; \
	$(call VG_SHARD,0) & p0=$$!; $(call VG_SHARD,1) & p1=$$!; \
	wait $$p0; rc0=$$?; wait $$p1; rc1=$$?; \
	for k in 0 1; do grep -v '^ok ' $(BUILD)/valgrind.$$k.log | tail -40; done; \
	[ $$rc0 -eq 0 ] && [ $$rc1 -eq 0 ] || { echo "valgrind-test failed (exit $$rc0 and $$rc1; 99 = memcheck errors)"; exit 1; }
