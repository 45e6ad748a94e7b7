# mk/api.mk - the public header's experimental section (include/pagein.h,
# "Stability"): everything this tree builds with ALL_CFLAGS (the library,
# the pagein tool, tests, benchmarks, fuzzers, the Python module) uses the
# young parts, so it defines PAGEIN_EXPERIMENTAL. A program outside sees
# only the stable core unless it defines the macro itself
# (tests/cli/api_fence.test.sh checks both ways).
LIB_CFLAGS += -DPAGEIN_EXPERIMENTAL
