/* test_runner_selftest.c - tests of the unit-test runner itself (run.c):
 * a crash, an abort, a hang and a leaked process group must each fail one
 * test, by name, and the run must go on. They register only when
 * PAGEIN_TEST_RUNNER_SELFTEST=1 (tests/cli/runner.test.sh sets it), since
 * they fail on purpose. */
#include "test.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static int selftest_crash(void) {
    /* leaves a file in its temporary directory: the runner removes it */
    pt_write_file(pt_tmppath("left-behind"), "x", 1);
    volatile int *p = NULL;
    return *p;
}
static int selftest_abort(void) {
    abort();
    return PASS;
}
static int selftest_hang(void) {
    for (;;) pause();
    return PASS;
}
static int selftest_pass(void) {
    /* a grandchild left behind is killed with the test's process group */
    pid_t pid = fork();
    if (pid == 0) {
        for (;;) pause();
    }
    CHECK(pid > 0);
    return PASS;
}
static int selftest_fail(void) {
    CHECK_EQ(1, 2);
    return PASS;
}
static int selftest_skip(void) {
    SKIP_BECAUSE("skips on purpose");
}
static int selftest_fail_then_skip(void) {
    /* a skip after a failed check is a failure: a skip hides nothing */
    CHECK_EQ(1, 2);
    SKIP_BECAUSE("skips after a failure");
}
static int selftest_env_a(void) {
    /* process-wide state set by one test is gone in the next */
    setenv("PAGEIN_RUNNER_LEAK", "1", 1);
    signal(SIGPIPE, SIG_IGN);
    return PASS;
}
static int selftest_env_b(void) {
    CHECK(getenv("PAGEIN_RUNNER_LEAK") == NULL);
    return PASS;
}

__attribute__((constructor)) static void register_selftests(void) {
    const char *e = getenv("PAGEIN_TEST_RUNNER_SELFTEST");
    if (!e || strcmp(e, "1") != 0) return;
    pt_register("runner_selftest_abort", selftest_abort);
    pt_register("runner_selftest_crash", selftest_crash);
    pt_register("runner_selftest_env_a", selftest_env_a);
    pt_register("runner_selftest_env_b", selftest_env_b);
    pt_register("runner_selftest_fail", selftest_fail);
    pt_register("runner_selftest_fail_then_skip", selftest_fail_then_skip);
    pt_register("runner_selftest_hang", selftest_hang);
    pt_register("runner_selftest_pass", selftest_pass);
    pt_register("runner_selftest_skip", selftest_skip);
}
