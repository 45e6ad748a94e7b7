/* test_source_api.c - the public byte-source API (pagein_source_*; what
 * pagein.fsspec binds): sizes and identities, many ranges of several files
 * in one call equal to the files' bytes (overlapping, repeated, contained,
 * far apart, zero merge gap), and the refusals named: a missing file, a
 * range past the end, a zero length, a bad file index, listing a URL that
 * has none. Remote sources are exercised by python/tests/test_fsspec.py
 * against nginx and s3rver. */
#include "test.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static const char *make_file(const char *name, size_t n, unsigned seed, uint8_t **data) {
    const char *p = pt_tmppath(name);
    uint8_t *b = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)((i * 131u + seed * 7u + (i >> 9)) & 0xff);
    FILE *f = fopen(p, "wb");
    if (f) {
        fwrite(b, 1, n, f);
        fclose(f);
    }
    *data = b;
    return p;
}

TEST(source_api_read_ranges_two_files) {
    uint8_t *a, *b;
    char pa[4096], pb[4096];
    snprintf(pa, sizeof pa, "%s", make_file("srcapi_a.bin", 3 << 20, 1, &a));
    snprintf(pb, sizeof pb, "%s", make_file("srcapi_b.bin", 70000, 2, &b));
    pagein_source *s[2] = {NULL, NULL};
    CHECK_EQ(pagein_source_open(&s[0], pa), 0);
    CHECK_EQ(pagein_source_open(&s[1], pb), 0);
    if (!s[0] || !s[1]) return FAIL;
    CHECK_EQ(pagein_source_size(s[0]), 3 << 20);
    CHECK_EQ(pagein_source_size(s[1]), 70000);
    CHECK(pagein_source_is_local(s[0]) && strlen(pagein_source_identity(s[0])) > 0);
    struct { uint32_t file; uint64_t off, len; } want[] = {
        {0, 0, 10},      {0, 5, 100},       {0, 5, 100},  {0, 1 << 20, 1 << 20}, {0, (1 << 20) + 7, 9},
        {1, 69990, 10},  {0, (3 << 20) - 1, 1}, {1, 0, 70000}, {0, 2 << 20, 300000}, {0, 200, 65536},
    };
    size_t n = sizeof want / sizeof want[0];
    for (int gap = 0; gap < 2; gap++) {
        pagein_range r[16];
        for (size_t i = 0; i < n; i++) r[i] = (pagein_range){want[i].file, want[i].off, want[i].len, malloc(want[i].len)};
        pagein_ranges_opts o = PAGEIN_RANGES_OPTS_INIT;
        o.max_gap = gap ? 0 : 1;  /* 1: no merging across gaps; 0: the default 64 KiB */
        o.queue_depth = 4;
        pagein_ranges_stats st;
        CHECK_EQ(pagein_source_read_ranges(s, 2, r, n, &o, &st), 0);
        CHECK_EQ(st.requests, n);
        CHECK(st.reads >= 1 && st.reads <= n);
        for (size_t i = 0; i < n; i++) {
            const uint8_t *src = want[i].file ? b : a;
            CHECK(memcmp(r[i].dst, src + want[i].off, want[i].len) == 0);
            free(r[i].dst);
        }
    }
    /* refusals, each naming the request */
    uint8_t buf[16];
    pagein_range bad = {0, (3 << 20) - 4, 8, buf};
    CHECK_EQ(pagein_source_read_ranges(s, 2, &bad, 1, NULL, NULL), PAGEIN_E_RANGE);
    CHECK(strstr(pagein_last_error_detail(), "past the end") != NULL);
    bad = (pagein_range){2, 0, 8, buf};
    CHECK_EQ(pagein_source_read_ranges(s, 2, &bad, 1, NULL, NULL), PAGEIN_E_INVALID);
    bad = (pagein_range){0, 0, 0, buf};
    CHECK_EQ(pagein_source_read_ranges(s, 2, &bad, 1, NULL, NULL), PAGEIN_E_INVALID);
    CHECK_EQ(pagein_source_read_ranges(NULL, 1, &bad, 1, NULL, NULL), PAGEIN_E_INVALID);
    CHECK_EQ(pagein_source_read_ranges(s, 2, NULL, 0, NULL, NULL), 0);
    pagein_source_close(s[0]);
    pagein_source_close(s[1]);
    pagein_source_close(NULL);
    unlink(pa);
    unlink(pb);
    free(a);
    free(b);
    return PASS;
}

static int count_cb(void *arg, const char *uri) {
    (void)uri;
    ++*(int *)arg;
    return 0;
}

TEST(source_api_refusals) {
    pagein_source *s = NULL;
    CHECK_EQ(pagein_source_open(&s, pt_tmppath("srcapi_none.bin")), -ENOENT);
    CHECK(s == NULL && strstr(pagein_last_error_detail(), "srcapi_none.bin") != NULL);
    CHECK_EQ(pagein_source_open(NULL, "x"), PAGEIN_E_INVALID);
    int n = 0;
    CHECK_EQ(pagein_source_list("http://127.0.0.1:9/dir/", count_cb, &n), PAGEIN_E_UNSUPPORTED);
    CHECK_EQ(pagein_source_list("/tmp", count_cb, &n), PAGEIN_E_UNSUPPORTED);
    CHECK_EQ(n, 0);
    CHECK_EQ(pagein_source_size(NULL), 0);
    return PASS;
}
