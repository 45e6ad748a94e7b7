/* test_dsopenset.c - a dataset of more shards than descriptors
 * (src/data/dsopenset.c): read exactly once under a low RLIMIT_NOFILE, and a
 * shard replaced while its source was closed is refused by name. */
#include "test.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../src/data/data.h"
#include "../src/data/dsopenset.h"

static int count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d) return -1;
    while (readdir(d)) n++;
    closedir(d);
    return n - 2;
}

/* Shard i (of n, in dir) holds (i % 3) + 1 lines "i.j". */
static int make_shards(const char *dir, int n) {
    if (mkdir(dir, 0755) != 0) return -1;
    for (int i = 0; i < n; i++) {
        char p[4096], text[64];
        size_t len = 0;
        for (int j = 0; j <= i % 3; j++) len += (size_t)snprintf(text + len, sizeof text - len, "%d.%d\n", i, j);
        snprintf(p, sizeof p, "%s/s%05d.jsonl", dir, i);
        if (pt_write_file(p, text, len) != 0) return -1;
    }
    return 0;
}

static uint64_t lines_of(int n) { return (uint64_t)(n / 3) * 6 + (n % 3 >= 1 ? 1 : 0) + (n % 3 >= 2 ? 2 : 0); }

/* Reads the whole epoch in order; every id once, every text the shard's. */
static void read_all(pagein_dataset *d, pagein_order order, uint64_t n) {
    pagein_pipe_opts o = PAGEIN_PIPE_OPTS_INIT;
    o.order = order;
    o.seed = 5;
    o.read_batch = 64;
    pagein_pipe *p = NULL;
    CHECK_OK(pagein_pipe_open(&p, d, &o));
    if (!p) return;
    uint8_t *seen = calloc(n, 1);
    pagein_item it;
    int rc;
    uint64_t got = 0, bad = 0;
    while ((rc = pagein_pipe_next(p, &it)) == 1) {
        got++;
        if (it.id >= n || seen[it.id]++) {
            bad++;
            continue;
        }
        /* the text names its shard: the shard of id must match */
        size_t s = pi_ds_shard_of(d, it.id);
        char want[32];
        snprintf(want, sizeof want, "%zu.%" PRIu64, s, it.id - d->files[s].first);
        if (it.nfields != 1 || it.fields[0].nbytes != strlen(want) || memcmp(it.fields[0].data, want, strlen(want)))
            bad++;
    }
    CHECK_OK(rc < 0 ? rc : 0);
    CHECK_EQ(got, n);
    CHECK_EQ(bad, 0);
    pagein_pipe_close(p);
    free(seen);
}

TEST(dsopenset_many_shards_few_descriptors) {
    /* 600 shards under 256 descriptors (the default set: 64 open): more
     * than the process may hold open at once, at 40% of 1,500's work */
    /* under valgrind (which keeps descriptors of its own): 150 shards, 8 open */
    int vg = getenv("PAGEIN_UNDER_VALGRIND") != NULL;
    struct rlimit rl = {256, 256};
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max < 256 ? rl.rlim_max : 256;
    if (!vg) CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
    if (vg) setenv("PAGEIN_MAX_OPEN_SHARDS", "8", 1);
    else unsetenv("PAGEIN_MAX_OPEN_SHARDS");
    const int N = vg ? 150 : 600;
    const size_t limit = vg ? 8 : 64;
    const char *dir = pt_tmppath("many");
    CHECK_EQ(make_shards(dir, N), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pagein_dataset *d = NULL;
    pagein_dataset_opts dop = PAGEIN_DATASET_OPTS_INIT;
    CHECK_OK(pagein_dataset_open(&d, dir, &dop));
    if (!d) return FAIL;
    uint64_t n = pagein_dataset_count(d);
    CHECK_EQ(n, lines_of(N));
    CHECK_EQ(pagein_dataset_file_count(d), (size_t)N);
    CHECK(pi_dsopenset_bounded(d->openset));
    CHECK_EQ(pi_dsopenset_limit(d->openset), limit);
    CHECK(count_fds() < (int)limit + 48);
    read_all(d, PAGEIN_ORDER_NONE, n);
    read_all(d, PAGEIN_ORDER_GLOBAL, n);
    read_all(d, PAGEIN_ORDER_BLOCK, n);
    uint64_t opens = 0, closes = 0;
    size_t most = 0;
    pi_dsopenset_counts(d->openset, &opens, &closes, &most);
    printf("    %d shards: %" PRIu64 " opens, %" PRIu64 " closes, at most %zu open, %d descriptors now\n", N, opens,
           closes, most, count_fds());
    CHECK(most < limit + 48); /* the limit, and what readers held at once */
    CHECK(opens > (uint64_t)N);
    /* linear, not a time: one open for the listing and about one per shard
     * per epoch (7,401 for 1,500 shards); the wall time below is printed
     * only (27 s under ASan at load 19, 1.6 s plain) */
    CHECK(opens <= 8 * (uint64_t)N);
    pagein_dataset_close(d);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("    open and three epochs: %.2f s\n", s);
    return pt_failed ? FAIL : PASS;
}

TEST(dsopenset_within_limit_keeps_descriptors) {
    setenv("PAGEIN_MAX_OPEN_SHARDS", "16", 1);
    const char *dir = pt_tmppath("few");
    CHECK_EQ(make_shards(dir, 10), 0);
    pagein_dataset *d = NULL;
    CHECK_OK(pagein_dataset_open(&d, dir, NULL));
    if (!d) return FAIL;
    CHECK(!pi_dsopenset_bounded(d->openset));
    for (size_t i = 0; i < 10; i++) CHECK(pagein_dataset_fd(d, i) >= 0);
    read_all(d, PAGEIN_ORDER_GLOBAL, lines_of(10));
    uint64_t opens = 0, closes = 0;
    pi_dsopenset_counts(d->openset, &opens, &closes, NULL);
    CHECK_EQ(opens, 10);
    CHECK_EQ(closes, 0);
    pagein_dataset_close(d);
    return pt_failed ? FAIL : PASS;
}

/* Reads in id order; the first error's code (0 none). */
static int first_error(pagein_dataset *d) {
    pagein_pipe_opts o = PAGEIN_PIPE_OPTS_INIT;
    o.order = PAGEIN_ORDER_NONE;
    pagein_pipe *p = NULL;
    int rc = pagein_pipe_open(&p, d, &o);
    pagein_item it;
    while (rc == 0 && (rc = pagein_pipe_next(p, &it)) == 1) rc = 0;
    pagein_pipe_close(p);
    return rc < 0 ? rc : 0;
}

TEST(dsopenset_replaced_shard_refused) {
    setenv("PAGEIN_MAX_OPEN_SHARDS", "1", 1);
    const char *dir = pt_tmppath("repl");
    CHECK_EQ(make_shards(dir, 4), 0);
    char a[4096], tmp[4096];
    snprintf(a, sizeof a, "%s/s00000.jsonl", dir);
    snprintf(tmp, sizeof tmp, "%s/new.tmp", dir);
    for (int how = 0; how < 2; how++) {
        pagein_dataset *d = NULL;
        CHECK_OK(pagein_dataset_open(&d, dir, NULL));
        if (!d) return FAIL;
        CHECK(pi_dsopenset_bounded(d->openset));
        CHECK_EQ(pagein_dataset_fd(d, 3) >= 0, 1); /* kept open from now on */
        if (how == 0) {
            /* replaced by another file of the same size */
            CHECK_EQ(pt_write_file(tmp, "0.X\n", 4), 0);
            CHECK_EQ(rename(tmp, a), 0);
        } else {
            /* rewritten in place, size and mtime kept: only the ctime moves */
            struct stat st;
            CHECK_EQ(stat(a, &st), 0);
            struct timespec keep[2] = {st.st_atim, st.st_mtim};
            struct timespec pause = {0, 20 * 1000 * 1000};
            nanosleep(&pause, NULL);
            CHECK_EQ(pt_write_file(a, "0.Y\n", 4), 0);
            CHECK_EQ(utimensat(AT_FDCWD, a, keep, 0), 0);
        }
        int rc = first_error(d);
        CHECK_EQ(rc, PAGEIN_E_CHANGED);
        const char *det = pagein_last_error_detail();
        CHECK(strstr(det, "s00000.jsonl") != NULL);
        CHECK(strstr(det, "changed since the dataset was opened") != NULL);
        if (how == 1) CHECK(strstr(det, "ctime") != NULL);
        printf("    %s\n", det);
        pagein_dataset_close(d);
    }
    return pt_failed ? FAIL : PASS;
}
