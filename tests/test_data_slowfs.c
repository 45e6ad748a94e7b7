/* test_data_slowfs.c - tools/slowfs counts what it serves, and the readers
 * work through it. Skips (with the reason) where FUSE or slowfs is missing. */
#include "test.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char slowfs_bin[4096];

/* Returns NULL when FUSE can be used, else the reason. */
static const char *fuse_unavailable(void) {
    static char why[4400];
    const char *b = getenv("PAGEIN_SLOWFS");
    snprintf(slowfs_bin, sizeof slowfs_bin, "%s", b ? b : "build/slowfs");
    if (access("/dev/fuse", R_OK | W_OK) != 0) return "/dev/fuse is missing or not accessible";
    if (system("command -v fusermount3 >/dev/null 2>&1") != 0) return "fusermount3 is not installed (Debian: fuse3)";
    if (access(slowfs_bin, X_OK) != 0) {
        snprintf(why, sizeof why, "%s not built (needs libfuse3-dev; set PAGEIN_SLOWFS)", slowfs_bin);
        return why;
    }
    return NULL;
}

static int sf_mount(const char *src, const char *mnt, const char *opts) {
    char cmd[20000];
    snprintf(cmd, sizeof cmd, "SLOWFS=%s bash tools/slowfs.sh mount %s %s %s >/dev/null", slowfs_bin, src, mnt, opts);
    return system(cmd) == 0 ? 0 : -1;
}

static void sf_umount(const char *mnt) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "bash tools/slowfs.sh umount %s", mnt);
    if (system(cmd) != 0) printf("    umount %s failed\n", mnt);
}

/* Reads counter `key` from a stats text. */
static long long stat_get(const char *text, const char *key) {
    size_t kl = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, key, kl) == 0 && p[kl] == ' ') return atoll(p + kl + 1);
    return -1;
}

static char *read_stats(const char *mnt) {
    char path[4200];
    snprintf(path, sizeof path, "%s/.slowfs-stats", mnt);
    /* reported size 0 (served with direct_io): read until end of file */
    int fd = open(path, O_RDONLY);
    if (fd < 0) return NULL;
    char *t = calloc(1, 8192);
    size_t n = 0;
    ssize_t k;
    while (n < 8191 && (k = read(fd, t + n, 8191 - n)) > 0) n += (size_t)k;
    close(fd);
    return t;
}

TEST(data_slowfs_counts) {
    const char *why = fuse_unavailable();
    if (why) SKIP_BECAUSE("%s", why);
    char src[4096], mnt[4096], stats[4096], file[4200];
    snprintf(src, sizeof src, "%s", pt_tmppath("sfsrc"));
    snprintf(mnt, sizeof mnt, "%s", pt_tmppath("sfmnt"));
    snprintf(stats, sizeof stats, "%s", pt_tmppath("sf.stats"));
    CHECK_EQ(mkdir(src, 0755), 0);
    snprintf(file, sizeof file, "%s/data", src);
    size_t len = 1 << 20;
    char *buf = malloc(len);
    for (size_t i = 0; i < len; i++) buf[i] = (char)(i * 7);
    CHECK_EQ(pt_write_file(file, buf, len), 0);
    char opts[4200];
    snprintf(opts, sizeof opts, "--delay-us 200 --max-inflight 4 --stats %s", stats);
    if (sf_mount(src, mnt, opts) < 0) {
        free(buf);
        SKIP_BECAUSE("slowfs could not mount here (see tools/slowfs.sh)");
    }
    snprintf(file, sizeof file, "%s/data", mnt);
    int fd = open(file, O_RDONLY);
    CHECK(fd >= 0);
    /* no readahead: each 4 KiB pread of an uncached page is one request */
    CHECK_EQ(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    CHECK_EQ(posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM), 0);
    char page[8192];
    for (int i = 0; i < 10; i++) {
        CHECK_EQ(pread(fd, page, 4096, (off_t)i * 65536), 4096);
        CHECK(memcmp(page, buf + i * 65536, 4096) == 0);
    }
    /* 8 KiB in one call: one request of 8 KiB */
    CHECK_EQ(pread(fd, page, 8192, 20 * 4096 + 65536 * 12), 8192);
    char *t = read_stats(mnt);
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ(stat_get(t, "requests"), 11);
        CHECK_EQ(stat_get(t, "bytes"), 10 * 4096 + 8192);
        CHECK_EQ(stat_get(t, "hist_le_4k"), 10);
        CHECK_EQ(stat_get(t, "hist_le_8k"), 1);
        CHECK_EQ(stat_get(t, "delay_us"), 200);
        CHECK(stat_get(t, "max_seen_inflight") >= 1 && stat_get(t, "max_seen_inflight") <= 4);
        free(t);
    }
    /* cached pages cost no request */
    CHECK_EQ(pread(fd, page, 4096, 0), 4096);
    t = read_stats(mnt);
    if (t) CHECK_EQ(stat_get(t, "requests"), 11);
    free(t);
    close(fd);
    sf_umount(mnt);
    /* the stats file appears when slowfs exits */
    for (int i = 0; i < 100 && access(stats, R_OK) != 0; i++) usleep(20000);
    size_t n;
    t = pt_read_file(stats, &n);
    CHECK(t != NULL);
    if (t) {
        t = realloc(t, n + 1);
        t[n] = 0;
        CHECK_EQ(stat_get(t, "requests"), 11);
        free(t);
    }
    free(buf);
    return PASS;
}

TEST(data_slowfs_readers) {
    const char *why = fuse_unavailable();
    if (why) SKIP_BECAUSE("%s", why);
    char src[4096], mnt[4096], path[4200];
    snprintf(src, sizeof src, "%s", pt_tmppath("sfsrc2"));
    snprintf(mnt, sizeof mnt, "%s", pt_tmppath("sfmnt2"));
    CHECK_EQ(mkdir(src, 0755), 0);
    enum { REC = 4096, N = 300 };
    uint8_t *b = malloc(N * REC);
    for (uint64_t i = 0; i < N; i++) memset(b + i * REC, (int)(i & 0xff), REC);
    snprintf(path, sizeof path, "%s/a.rec", src);
    CHECK_EQ(pt_write_file(path, b, 100 * REC), 0);
    snprintf(path, sizeof path, "%s/b.rec", src);
    CHECK_EQ(pt_write_file(path, b + 100 * REC, 200 * REC), 0);
    free(b);
    if (sf_mount(src, mnt, "--delay-us 50") < 0) SKIP_BECAUSE("slowfs could not mount here");
    char pa[4200], pb[4200];
    snprintf(pa, sizeof pa, "%s/a.rec", mnt);
    snprintf(pb, sizeof pb, "%s/b.rec", mnt);
    const char *paths[2] = {pa, pb};
    pagein_dataset *d = NULL;
    CHECK_OK(pagein_dataset_open_records(&d, paths, 2, REC));
    for (int k = 0; d && k <= PAGEIN_READER_MMAP; k++) {
        pagein_reader_opts o = PAGEIN_READER_OPTS_INIT;
        o.kind = (pagein_reader_kind)k;
        o.block_bytes = 64 * REC;
        o.seed = 11;
        pagein_reader *r = NULL;
        CHECK_OK(pagein_reader_open(&r, d, &o));
        if (!r) continue;
        char seen[N] = {0};
        pagein_sample s;
        int rc, cnt = 0;
        while ((rc = pagein_reader_next(r, &s)) == 1) {
            CHECK(s.id < N && !seen[s.id]);
            if (s.id >= N) break;
            seen[s.id] = 1;
            const uint8_t *p = s.data;
            CHECK(p[0] == (uint8_t)s.id && p[REC - 1] == (uint8_t)s.id);
            cnt++;
        }
        CHECK_EQ(rc, 0);
        CHECK_EQ(cnt, N);
        pagein_reader_close(r);
    }
    pagein_dataset_close(d);
    sf_umount(mnt);
    return PASS;
}

/* The pipeline over FUSE: requests of one readahead window (128 KiB here),
 * so that a batch's round trips are in flight at once, a batch's files read
 * at once (block order over two files); every sample once, its bytes
 * right. */
TEST(data_slowfs_pipe_window_requests) {
    const char *why = fuse_unavailable();
    if (why) SKIP_BECAUSE("%s", why);
    char src[4096], mnt[4096], path[4200];
    snprintf(src, sizeof src, "%s", pt_tmppath("sfsrc3"));
    snprintf(mnt, sizeof mnt, "%s", pt_tmppath("sfmnt3"));
    CHECK_EQ(mkdir(src, 0755), 0);
    enum { REC = 4096, N = 600 };
    uint8_t *b = malloc(N * REC);
    for (uint64_t i = 0; i < N; i++) memset(b + i * REC, (int)(i & 0xff), REC);
    enum { F = 8 }; /* files of N / F records: a batch of a unit's groups holds several files */
    for (int f = 0; f < F; f++) {
        snprintf(path, sizeof path, "%s/%d.rec", src, f);
        CHECK_EQ(pt_write_file(path, b + (size_t)f * (N / F) * REC, (size_t)(N / F) * REC), 0);
    }
    free(b);
    if (sf_mount(src, mnt, "--delay-us 50 --ra-kb 128") < 0) SKIP_BECAUSE("slowfs could not mount here");
    char pf[F][4200];
    const char *paths[F];
    for (int f = 0; f < F; f++) {
        snprintf(pf[f], sizeof pf[f], "%s/%d.rec", mnt, f);
        paths[f] = pf[f];
    }
    unsetenv("PAGEIN_REQUEST_BYTES");
    pagein_dataset *d = NULL;
    CHECK_OK(pagein_dataset_open_records(&d, paths, F, REC));
    pagein_pipe_opts o = PAGEIN_PIPE_OPTS_INIT;
    o.order = PAGEIN_ORDER_BLOCK;
    o.seed = 5;
    pagein_pipe *p = NULL;
    if (d) CHECK_OK(pagein_pipe_open(&p, d, &o));
    pagein_item it;
    int rc = 0, cnt = 0;
    char seen[N] = {0};
    while (p && (rc = pagein_pipe_next(p, &it)) == 1) {
        CHECK(it.id < N && !seen[it.id]);
        if (it.id >= N) break;
        seen[it.id] = 1;
        const uint8_t *q = it.fields[0].data;
        CHECK(it.nfields >= 1 && it.fields[0].nbytes == REC && q[0] == (uint8_t)it.id && q[REC - 1] == (uint8_t)it.id);
        cnt++;
    }
    CHECK_EQ(rc, 0);
    CHECK_EQ(cnt, N);
    pagein_pipe_stats st;
    if (p) {
        pagein_pipe_get_stats(p, &st);
        CHECK_EQ(st.bytes_read, (uint64_t)N * REC);
        /* 2.4 MB in 128 KiB requests: at least 19 (1 MiB requests: 3) */
        CHECK(st.requests >= (uint64_t)N * REC / (128u << 10));
    }
    pagein_pipe_close(p);
    pagein_dataset_close(d);
    sf_umount(mnt);
    return PASS;
}
