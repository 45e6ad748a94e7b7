#!/usr/bin/env bash
# The unit-test runner isolates tests (tests/run.c): a crash, an abort, a
# hang past PAGEIN_TEST_TIMEOUT and an ordinary failure each fail their own
# test by name, the run goes on to the end, process-wide state does not leak
# from one test into the next, and nothing a test started outlives it.
set -u
. "$REPO/tests/cli/lib.sh"
B=${BUILD:-build}
case "$B" in /*) ;; *) B=$REPO/$B ;; esac
RUN=$B/tests/run
[ -x "$RUN" ] || { echo "no unit runner at $RUN (make $RUN)"; exit 77; }
mkdir -p "$TMP/t"
out=$(TMPDIR=$TMP/t PAGEIN_TEST_RUNNER_SELFTEST=1 PAGEIN_TEST_TIMEOUT=2 timeout 60 "$RUN" \
  runner_selftest_abort runner_selftest_crash runner_selftest_env_a runner_selftest_env_b \
  runner_selftest_fail runner_selftest_fail_then_skip runner_selftest_hang runner_selftest_pass runner_selftest_skip no_such_test 2>&1)
rc=$?
echo "$out"
fail() { echo "FAILED: $*"; exit 1; }
[ $rc -eq 1 ] || fail "runner exit $rc, expected 1"
echo "$out" | grep -q '^FAIL runner_selftest_abort (killed by signal 6' || fail "abort not reported"
echo "$out" | grep -q '^FAIL runner_selftest_crash (killed by signal 11' || fail "crash not reported"
echo "$out" | grep -q '^FAIL runner_selftest_hang (timed out after 2 s' || fail "hang not reported"
echo "$out" | grep -q '^FAIL runner_selftest_fail$' || fail "plain failure not reported"
echo "$out" | grep -q '^FAIL runner_selftest_fail_then_skip$' || fail "a skip hid a failed check"
echo "$out" | grep -qE '^ok   runner_selftest_env_a( \([0-9.]+ s\))?$' || fail "env_a"
echo "$out" | grep -qE '^ok   runner_selftest_env_b( \([0-9.]+ s\))?$' || fail "state leaked from env_a into env_b"
echo "$out" | grep -qE '^ok   runner_selftest_pass( \([0-9.]+ s\))?$' || fail "pass"
echo "$out" | grep -q '^SKIP runner_selftest_skip$' || fail "skip"
echo "$out" | grep -q '^FAIL no_such_test (no such test)$' || fail "unknown name not reported"
echo "$out" | tail -1 | grep -qx '3 passed, 6 failed, 1 skipped' || fail "summary line"
# the grandchild runner_selftest_pass left behind was killed with its group
if pgrep -f "$RUN runner_selftest" >/dev/null; then fail "a test's process outlived it"; fi
# each test ran in its own directory, removed however it ended (the crash
# left a file there)
[ -z "$(ls -A "$TMP/t")" ] || fail "tests left files behind: $(find "$TMP/t")"
echo "runner isolation: ok"
