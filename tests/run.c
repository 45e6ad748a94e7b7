/* run.c - runs the registered unit tests: `run` for all, `run NAME...` for
 * some. Prints one line per test and, last, "N passed, N failed, N skipped".
 * Exit status is non-zero if any test failed. */
#include "test.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct entry {
    const char *name;
    pt_fn fn;
};

static struct entry *tests;
static size_t ntests, captests;
int pt_failed;

void pt_register(const char *name, pt_fn fn) {
    if (ntests == captests) {
        captests = captests ? captests * 2 : 64;
        tests = realloc(tests, captests * sizeof *tests);
        if (!tests) abort();
    }
    tests[ntests].name = name;
    tests[ntests].fn = fn;
    ntests++;
}

static struct {
    const char *prefix;
    void (*start)(void);
} shared[8];
static size_t nshared;

void pt_register_shared(const char *prefix, void (*start)(void)) {
    if (nshared == sizeof shared / sizeof shared[0]) abort();
    shared[nshared].prefix = prefix;
    shared[nshared].start = start;
    nshared++;
}

static int cmp(const void *a, const void *b) {
    return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

static char ring[8][4096];
static int ringi;
static char *next_buf(void) { return ring[ringi++ & 7]; }

const char *pt_testdata(const char *rel) {
    const char *root = getenv("PAGEIN_TESTDATA");
    char *b = next_buf();
    snprintf(b, 4096, "%s/%s", root ? root : "tests/data/real", rel);
    return b;
}

int pt_have_testdata(void) {
    struct stat st;
    return stat(pt_testdata("PROVENANCE.md"), &st) == 0;
}

static char tmpdir[256];

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void rm_tmpdir(void) {
    if (tmpdir[0] && !getenv("PAGEIN_KEEP_TMP")) nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

const char *pt_tmpdir(void) {
    if (!tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/pagein-test-XXXXXX", base ? base : "/tmp");
        if (!mkdtemp(tmpdir)) {
            perror("mkdtemp");
            abort();
        }
        atexit(rm_tmpdir);
    }
    return tmpdir;
}

const char *pt_tmppath(const char *name) {
    char *b = next_buf();
    snprintf(b, 4096, "%s/%s", pt_tmpdir(), name);
    return b;
}

void *pt_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf && len) *len = (size_t)n;
    return buf;
}

int pt_write_file(const char *path, const void *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int rc = fwrite(buf, 1, len, f) == len ? 0 : -1;
    if (fclose(f) != 0) rc = -1;
    return rc;
}

static uint64_t seed;
uint64_t pt_seed(void) {
    if (!seed) {
        const char *s = getenv("PAGEIN_SEED");
        seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
        if (!seed) seed = 1;
        printf("    seed: PAGEIN_SEED=%" PRIu64 "\n", seed);
    }
    return seed;
}

const char *pt_vma_thp(const void *a, char *out, size_t cap) {
    snprintf(out, cap, "?");
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f) return out;
    char line[512];
    int in = 0;
    uintptr_t x = (uintptr_t)a;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
            in = x >= lo && x < hi;
            continue;
        }
        if (in && strncmp(line, "VmFlags:", 8) == 0) {
            snprintf(out, cap, "%s", strstr(line, " hg") ? "hg" : strstr(line, " nh") ? "nh" : "");
            break;
        }
    }
    fclose(f);
    return out;
}

uint64_t pt_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- isolation -----------------------------------------------------------
 * Each test runs in a child process of its own (its own process group), so a
 * crash, an abort, a leak report or a hang fails that test, by name, and the
 * run goes on; process-wide state (signal handlers, hooks, environment,
 * descriptors, the temporary directory) never leaks into the next test.
 * PAGEIN_TEST_TIMEOUT (seconds, default 300) bounds each test; a test past
 * it is killed with its whole process group. PAGEIN_TEST_NOFORK=1 runs the
 * tests in this process, one after another (for a debugger). */
static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int run_inline(size_t i) {
    pt_failed = 0;
    int rc = tests[i].fn();
    /* a test that skips a part after a failed check has failed: a skip
     * never hides a failure */
    if (rc == SKIP) return pt_failed ? FAIL : SKIP;
    return rc != PASS || pt_failed ? FAIL : PASS;
}

/* Runs test i in a child; returns PASS, FAIL or SKIP and describes a failure
 * that is not an ordinary one (signal, exit status, time-out) in why. */
static int run_forked_in(size_t i, double limit, char *why, size_t whylen, const char *dir);

/* A private directory per test under TMPDIR (or /tmp): the child's TMPDIR.
 * Removed after the test, also when it crashed or was killed, unless
 * PAGEIN_KEEP_TMP is set (then a failure names it). */
static int run_forked(size_t i, double limit, char *why, size_t whylen) {
    const char *base = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/pagein-run-XXXXXX", base && *base ? base : "/tmp");
    int made = mkdtemp(dir) != NULL;
    int rc = run_forked_in(i, limit, why, whylen, made ? dir : NULL);
    if (made) {
        if (getenv("PAGEIN_KEEP_TMP")) {
            if (rc == FAIL) printf("    kept: %s\n", dir);
        } else {
            nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
        }
    }
    return rc;
}

static int run_forked_in(size_t i, double limit, char *why, size_t whylen, const char *dir) {
    why[0] = 0;
    fflush(stdout);
    fflush(stderr);
    /* SIGCHLD blocked (so that it stays pending) wakes the wait below the
     * moment the child ends; the child runs with the runner's mask */
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);
    pid_t pid = fork();
    if (pid < 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        snprintf(why, whylen, "fork failed: %s", strerror(errno));
        return FAIL;
    }
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        setpgid(0, 0);
        if (dir) {
            /* everything the test writes lands in its own directory, which
             * the runner removes whatever way the test ends */
            setenv("TMPDIR", dir, 1);
            char mc[PATH_MAX + 16];
            snprintf(mc, sizeof mc, "%s/meta-cache", dir);
            setenv("PAGEIN_META_CACHE_DIR", mc, 0); /* never the user's ~/.cache */
        }
        int rc = run_inline(i);
        fflush(stdout);
        exit(rc == SKIP ? SKIP : rc == PASS ? 0 : 1);
    }
    setpgid(pid, pid); /* either side may win the race; both ask the same */
    double t0 = mono_s();
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) {
            sigprocmask(SIG_SETMASK, &old, NULL);
            snprintf(why, whylen, "waitpid failed: %s", strerror(errno));
            return FAIL;
        }
        double left = limit - (mono_s() - t0);
        if (left <= 0) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            sigprocmask(SIG_SETMASK, &old, NULL);
            snprintf(why, whylen, "timed out after %.0f s (PAGEIN_TEST_TIMEOUT), killed", limit);
            return FAIL;
        }
        /* until a child ends (this one, or another: then the loop looks
         * again) or at most 0.5 s, within the time left */
        if (left > 0.5) left = 0.5;
        struct timespec ts = {0, (long)(left * 1e9)};
        sigtimedwait(&chld, NULL, &ts);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    /* reap whatever the test left in its group: nothing outlives a test */
    kill(-pid, SIGKILL);
    if (WIFSIGNALED(status)) {
        snprintf(why, whylen, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
        return FAIL;
    }
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (code == 0) return PASS;
    if (code == SKIP) return SKIP;
    if (code != 1) snprintf(why, whylen, "exit status %d%s", code, code == 99 ? " (valgrind: memcheck errors)" : "");
    return FAIL;
}

/* PAGEIN_TEST_EXCLUDE: comma-separated name prefixes to skip (make's
 * valgrind run leaves out the suites that the ASan+UBSan run already covers
 * and that take minutes under memcheck). */
static int prefixed(const char *name, const char *e) {
    while (e && *e) {
        const char *c = strchr(e, ',');
        size_t n = c ? (size_t)(c - e) : strlen(e);
        if (n && strncmp(name, e, n) == 0) return 1;
        e = c ? c + 1 : NULL;
    }
    return 0;
}

static int excluded(const char *name) { return prefixed(name, getenv("PAGEIN_TEST_EXCLUDE")); }

/* Is test i one the command line (names) and PAGEIN_TEST_ONLY (comma-
 * separated name prefixes: make's valgrind stage runs the tests it leaves
 * out of memcheck natively) ask for? The others are not run or counted. */
static int wanted(size_t i, int argc, char **argv) {
    const char *only = getenv("PAGEIN_TEST_ONLY");
    if (only && *only && !prefixed(tests[i].name, only)) return 0;
    if (argc <= 1) return 1;
    for (int a = 1; a < argc; a++)
        if (strcmp(argv[a], tests[i].name) == 0) return 1;
    return 0;
}

/* PAGEIN_TEST_SHARD=K/N: only every N-th test from the K-th (0-based) of
 * the sorted list, so that N runners can share the tests (make's valgrind
 * stage runs two at once: memcheck runs a process on one core). */
static int in_shard(size_t i) {
    const char *e = getenv("PAGEIN_TEST_SHARD");
    unsigned k = 0, n = 0;
    if (!e || sscanf(e, "%u/%u", &k, &n) != 2 || n == 0) return 1;
    return i % n == k;
}

/* Is test i among those this run will run (named, in the shard, not
 * excluded)? */
static int selected(size_t i, int argc, char **argv) {
    return wanted(i, argc, argv) && in_shard(i) && !excluded(tests[i].name);
}

/* Starts each shared fixture that a selected test will use, here, once. */
static void start_shared(int argc, char **argv) {
    const char *e = getenv("PAGEIN_TEST_SHARED");
    if (e && strcmp(e, "0") == 0) return;
    for (size_t k = 0; k < nshared; k++)
        for (size_t i = 0; i < ntests; i++)
            if (strncmp(tests[i].name, shared[k].prefix, strlen(shared[k].prefix)) == 0 && selected(i, argc, argv)) {
                fflush(stdout);
                shared[k].start();
                break;
            }
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    qsort(tests, ntests, sizeof *tests, cmp);
    const char *nf = getenv("PAGEIN_TEST_NOFORK");
    int nofork = nf && *nf && strcmp(nf, "0") != 0;
    const char *ts = getenv("PAGEIN_TEST_TIMEOUT");
    double limit = ts && atof(ts) > 0 ? atof(ts) : 300.0;
    pt_seed(); /* once, here: every forked test inherits the same seed */
    if (!nofork) start_shared(argc, argv);
    int passed = 0, failed = 0, skipped = 0, matched = 0;
    for (size_t i = 0; i < ntests; i++) {
        if (!wanted(i, argc, argv) || !in_shard(i)) continue;
        matched++;
        if (excluded(tests[i].name)) {
            printf("    skip: excluded by PAGEIN_TEST_EXCLUDE\nSKIP %s\n", tests[i].name);
            skipped++;
            continue;
        }
        char why[160] = "";
        double t0 = mono_s();
        int rc = nofork ? run_inline(i) : run_forked(i, limit, why, sizeof why);
        if (rc == SKIP) {
            printf("SKIP %s\n", tests[i].name);
            skipped++;
        } else if (rc != PASS) {
            printf("FAIL %s%s%s%s\n", tests[i].name, why[0] ? " (" : "", why, why[0] ? ")" : "");
            failed++;
        } else {
            double dt = mono_s() - t0;
            if (dt >= 1.0)
                printf("ok   %s (%.1f s)\n", tests[i].name, dt); /* the slow ones, for make test's budget */
            else
                printf("ok   %s\n", tests[i].name);
            passed++;
        }
    }
    if (argc > 1 && matched < argc - 1) {
        for (int a = 1; a < argc; a++) {
            int found = 0;
            for (size_t i = 0; i < ntests; i++)
                if (strcmp(argv[a], tests[i].name) == 0) found = 1;
            if (!found) {
                printf("FAIL %s (no such test)\n", argv[a]);
                failed++;
            }
        }
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    free(tests);
    return failed ? 1 : 0;
}
