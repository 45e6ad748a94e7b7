# mk/tsan.mk - `make tsan`: ThreadSanitizer over the unit tests where
# threads meet (the HTTP lanes and the location of remote objects, the
# pager, the range engine, the training-data pipeline, the metadata
# cache), built with -fsanitize=thread into build-tsan/ (gcc or clang).
# A subset, so that `make test` (which runs it) stays short: each test in
# its own process with the runner's time-out; a report fails the test.
# tests/tsan.supp holds only reports shown to be benign, each with why.
# Left out: tests whose assertions are timings (engine_stream_ring_bounded
# requires 2 requests in flight at once, which TSAN's slowdown on a loaded
# machine can deny) and the slowest (load_tensor_wait: 49 s under TSAN).
TSAN_BUILD := build-tsan
TSAN_TESTS ?= remote_readv_lanes remote_presigned_expiry remote_prefetch_walk \
  load_prefetch_order load_prefetch_gate_close load_prefetch_budget pager_ahead_extreme \
  engine_random_plans engine_cancel \
  dataformats_exactly_once dataformats_resume_other_world \
  meta_cache_concurrent_writers meta_cache_roundtrip engine_crew_runs data_pipe_crews \
  parquet_fresh_values_filled
TEST_EXTRA += tsan
.PHONY: tsan
tsan:
	$(MAKE) -j$(JOBS) BUILD=$(TSAN_BUILD) SANITIZE=thread CFLAGS='$(SAN_CFLAGS)' $(TSAN_BUILD)/tests/run
	TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 suppressions=$(abspath tests/tsan.supp)" \
	  $(TSAN_BUILD)/tests/run $(TSAN_TESTS)
CLEAN_EXTRA += $(TSAN_BUILD)
