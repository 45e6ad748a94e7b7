/* test_seams_dsformat.c - a dataset format is one file and one line: this
 * file defines a test-only row (pi_dsformat_test_fake, registered by its one
 * line in src/data/dsformat.c's table, a weak reference that is NULL, the
 * table's end, outside the unit-test runner): detection by a magic, an
 * alias, a suffix a directory scan picks up, and samples read by the
 * table's sample path (locate + sample). The tests open datasets through it
 * end to end (pagein_dataset_open on a file, a directory, by content and by
 * alias; the pipeline's orders; the table's listing). Nothing else in the
 * library knows it exists. White-box (dsformat.h).
 *
 * The fake layout: "PIDSFAKE", u32 count, u32 record bytes, then count
 * records. Integers little-endian. */
#include "test.h"

#include "../src/data/dsformat.h"

#include <stdlib.h>
#include <sys/stat.h>

#define FAKE_MAGIC "PIDSFAKE"
#define FAKE_HDR 16u

struct fake {
    uint64_t rec;
    struct pi_dscol col;
};

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static int fake_detect(const char *name, const uint8_t *h, size_t nh, const uint8_t *t, size_t nt, uint64_t size) {
    (void)t, (void)nt, (void)size;
    if (nh >= 8 && memcmp(h, FAKE_MAGIC, 8) == 0) return 2;
    return name && pi_ends_with(name, ".pidsfake") ? 1 : 0;
}

static int fake_open(struct pi_dsshard *sh, const struct pi_dsopen *a) {
    uint8_t h[FAKE_HDR];
    if (sh->src->size < FAKE_HDR)
        return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL, "%" PRIu64 " bytes, no header",
                         sh->src->size);
    FORWARD_IF(pi_source_read(sh->src, h, FAKE_HDR, 0));
    if (memcmp(h, FAKE_MAGIC, 8) != 0)
        return pi_ds_err(sh, PAGEIN_E_BAD_MAGIC, UINT64_MAX, UINT64_MAX, NULL, "not a fake dataset shard");
    uint64_t count = le32(h + 8), rec = le32(h + 12);
    if (!rec || count > (sh->src->size - FAKE_HDR) / rec)
        return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL,
                         "%" PRIu64 " records of %" PRIu64 " bytes do not fit in %" PRIu64 " bytes", count, rec,
                         sh->src->size);
    for (size_t i = 0; i < a->ncolumns; i++)
        if (strcmp(a->columns[i], "value") != 0)
            return pi_ds_err(sh, PAGEIN_E_NOT_FOUND, UINT64_MAX, UINT64_MAX, a->columns[i], "no such column");
    struct fake *f = pi_calloc(1, sizeof *f);
    if (!f) return pi_err(-ENOMEM, "%s: out of memory", sh->name);
    f->rec = rec;
    f->col = (struct pi_dscol){.name = "value", .type = PI_DT_BINARY};
    pi_ds_shard_set(sh, f, &f->col, 1, count);
    return 0;
}

static void fake_close(struct pi_dsshard *sh) { pi_free(sh->impl); }

static int fake_locate(const struct pi_dsshard *sh, uint64_t i, uint64_t *off, uint64_t *len) {
    const struct fake *f = sh->impl;
    *off = FAKE_HDR + i * f->rec;
    *len = f->rec;
    return 0;
}

static int fake_sample(const struct pi_dsshard *sh, uint64_t i, const uint8_t *p, uint64_t len, struct pi_dsfield *f,
                       size_t cap) {
    (void)sh, (void)i;
    if (cap >= 1) f[0] = (struct pi_dsfield){.name = "value", .type = PI_DT_BINARY, .data = p, .nbytes = len};
    return 1;
}

static const char *const fake_aliases[] = {"fake-ds", NULL};
static const char *const fake_suffixes[] = {".pidsfake", NULL};

const struct pi_dsformat pi_dsformat_test_fake = {
    .name = "test-fake",
    .aliases = fake_aliases,
    .suffixes = fake_suffixes,
    .head_bytes = 8,
    .detect = fake_detect,
    .open = fake_open,
    .close = fake_close,
    .locate = fake_locate,
    .sample = fake_sample,
};

/* A shard of count records of 4 bytes: first + i, little-endian. */
static int write_fake(const char *path, uint32_t count, uint32_t first) {
    size_t n = FAKE_HDR + 4u * count;
    uint8_t *b = malloc(n);
    if (!b) return -1;
    memcpy(b, FAKE_MAGIC, 8);
    uint32_t v[2] = {count, 4};
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 4; j++) b[8 + 4 * k + j] = (uint8_t)(v[k] >> (8 * j));
    for (uint32_t i = 0; i < count; i++)
        for (int j = 0; j < 4; j++) b[FAKE_HDR + 4 * i + j] = (uint8_t)((first + i) >> (8 * j));
    int rc = pt_write_file(path, b, n);
    free(b);
    return rc;
}

/* Every sample of d once over the global order, each value its id. */
static int read_all(pagein_dataset *d) {
    uint64_t n = pagein_dataset_count(d);
    pagein_pipe_opts o = PAGEIN_PIPE_OPTS_INIT;
    o.order = PAGEIN_ORDER_GLOBAL;
    o.seed = 7;
    pagein_pipe *p = NULL;
    if (pagein_pipe_open(&p, d, &o) != 0) return 0;
    uint8_t *seen = calloc(n ? n : 1, 1);
    pagein_item it;
    uint64_t k = 0;
    int ok = seen != NULL;
    while (ok && pagein_pipe_next(p, &it) == 1) {
        ok = it.id < n && !seen[it.id] && it.nfields == 1 && !strcmp(it.fields[0].name, "value") &&
             it.fields[0].nbytes == 4 && le32(it.fields[0].data) == it.id;
        if (ok) seen[it.id] = 1, k++;
    }
    pagein_pipe_close(p);
    free(seen);
    return ok && k == n;
}

TEST(seams_dsformat_row_opens_datasets) {
    const char *dir = pt_tmppath("fakeds");
    CHECK(mkdir(dir, 0755) == 0);
    char a[4200], b[4200], c[4200], bad[4200];
    snprintf(a, sizeof a, "%s/a.pidsfake", dir);
    snprintf(b, sizeof b, "%s/b.pidsfake", dir);
    snprintf(c, sizeof c, "%s", pt_tmppath("plain.bin")); /* no suffix: found by its magic */
    snprintf(bad, sizeof bad, "%s", pt_tmppath("bad.pidsfake"));
    CHECK_EQ(write_fake(a, 5, 0), 0);
    CHECK_EQ(write_fake(b, 3, 5), 0);
    CHECK_EQ(write_fake(c, 4, 0), 0);
    /* the directory scan takes the row's suffix; ids run across shards */
    pagein_dataset *d = NULL;
    CHECK_OK(pagein_dataset_open(&d, dir, NULL));
    if (d) {
        CHECK_EQ(pagein_dataset_file_count(d), 2);
        CHECK_EQ(pagein_dataset_count(d), 8);
        CHECK_STR(pagein_dataset_format(d, 1), "test-fake");
        CHECK(read_all(d));
        pagein_dataset_close(d);
    }
    /* content detection, and the row's alias as the format */
    d = NULL;
    CHECK_OK(pagein_dataset_open(&d, c, NULL));
    if (d) CHECK(pagein_dataset_count(d) == 4 && read_all(d));
    pagein_dataset_close(d);
    pagein_dataset_opts o = PAGEIN_DATASET_OPTS_INIT;
    o.format = "fake-ds";
    d = NULL;
    CHECK_OK(pagein_dataset_open(&d, a, &o));
    if (d) CHECK(pagein_dataset_count(d) == 5 && !strcmp(pagein_dataset_format(d, 0), "test-fake") && read_all(d));
    pagein_dataset_close(d);
    /* the table lists it; names resolve to it */
    int listed = 0;
    for (size_t i = 0; i < pagein_dataset_format_count(); i++) {
        pagein_dataset_format_info in;
        CHECK_OK(pagein_dataset_format_get(i, &in));
        listed |= !strcmp(in.name, "test-fake") && in.content && in.aliases[0] && !strcmp(in.aliases[0], "fake-ds");
    }
    CHECK(listed);
    char row[32];
    CHECK_EQ(pagein_dataset_detect_name("x/y.pidsfake", row, sizeof row), 1);
    CHECK_STR(row, "test-fake");
    /* its errors name the shard */
    CHECK_EQ(pt_write_file(bad, FAKE_MAGIC "\xff\xff\x00\x00\x04\x00\x00\x00", 16), 0);
    d = NULL;
    CHECK_EQ(pagein_dataset_open(&d, bad, NULL), PAGEIN_E_FORMAT);
    CHECK(strstr(pagein_last_error_detail(), "bad.pidsfake") != NULL);
    o.format = "test-fake";
    const char *cols[] = {"nope"};
    o.columns = cols, o.ncolumns = 1;
    CHECK_EQ(pagein_dataset_open(&d, a, &o), PAGEIN_E_NOT_FOUND);
    return PASS;
}
