/* test_data.c - training-data readers: ranges coalescing against a
 * brute-force reference, every reader yields each sample once per epoch,
 * seeded orders, the block reader's memory bound, Megatron validation and
 * the shuffle-quality figure.
 * White-box: includes src/data/data.h to check the merge plan itself. */
#include "test.h"

#include "../src/data/data.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------ */

/* Byte j of file f: a pattern that differs between files and offsets. */
static uint8_t pat(unsigned f, uint64_t j) { return (uint8_t)(j * 131 + (j >> 8) * 7 + f * 29 + 1); }

static int make_pattern_file(const char *path, unsigned f, uint64_t size) {
    uint8_t *b = malloc(size ? size : 1);
    if (!b) return -1;
    for (uint64_t j = 0; j < size; j++) b[j] = pat(f, j);
    int rc = pt_write_file(path, b, size);
    free(b);
    return rc;
}

/* Records dataset: record id holds its id (u64) then pattern bytes. */
static int make_records(const char *path, uint64_t first, uint64_t count, uint64_t rec) {
    uint8_t *b = calloc(1, count * rec + 1);
    if (!b) return -1;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t id = first + i;
        memcpy(b + i * rec, &id, 8);
        for (uint64_t j = 8; j < rec; j++) b[i * rec + j] = (uint8_t)(id * 7 + j);
    }
    int rc = pt_write_file(path, b, count * rec);
    free(b);
    return rc;
}

static int check_record(const pagein_sample *s, uint64_t rec) {
    if (s->length != rec) return 0;
    uint64_t id;
    memcpy(&id, s->data, 8);
    if (id != s->id) return 0;
    const uint8_t *p = s->data;
    for (uint64_t j = 8; j < rec; j++)
        if (p[j] != (uint8_t)(s->id * 7 + j)) return 0;
    return 1;
}

/* 4 shards, one empty, uneven sizes: 1000 records of 96 bytes. */
#define REC 96
static pagein_dataset *open_records_ds(void) {
    static const uint64_t counts[] = {300, 0, 457, 243};
    const char *paths[4];
    uint64_t first = 0;
    char names[4][64];
    for (int i = 0; i < 4; i++) {
        snprintf(names[i], sizeof names[i], "shard%d.rec", i);
        paths[i] = strdup(pt_tmppath(names[i]));
        if (make_records(paths[i], first, counts[i], REC) < 0) return NULL;
        first += counts[i];
    }
    pagein_dataset *d = NULL;
    int rc = pagein_dataset_open_records(&d, paths, 4, REC);
    for (int i = 0; i < 4; i++) free((void *)paths[i]);
    if (rc < 0) printf("    open_records: %s: %s\n", pagein_strerror(rc), pagein_last_error_detail());
    return d;
}

/* Reads one epoch; checks every sample once and its bytes; ids to *order. */
static int read_epoch(pagein_reader *r, uint64_t n, uint64_t *order, int check_rec) {
    uint8_t *seen = calloc(n, 1);
    uint64_t got = 0;
    int ok = 1;
    pagein_sample s;
    int rc;
    while ((rc = pagein_reader_next(r, &s)) == 1) {
        if (s.id >= n || seen[s.id]) {
            printf("    sample %" PRIu64 " out of range or repeated\n", s.id);
            ok = 0;
            break;
        }
        seen[s.id] = 1;
        if (check_rec && !check_record(&s, REC)) {
            printf("    sample %" PRIu64 ": wrong bytes\n", s.id);
            ok = 0;
        }
        if (order && got < n) order[got] = s.id;
        got++;
    }
    if (rc < 0) {
        printf("    next: %s: %s\n", pagein_strerror(rc), pagein_last_error_detail());
        ok = 0;
    }
    if (got != n) {
        printf("    %" PRIu64 " samples in the epoch, expected %" PRIu64 "\n", got, n);
        ok = 0;
    }
    free(seen);
    return ok;
}

/* ---- ranges ------------------------------------------------------------- */

TEST(data_ranges_random_vs_reference) {
    uint64_t seed = pt_seed(), s = seed;
    enum { NF = 3 };
    uint64_t sizes[NF] = {70000, 4096, 200001};
    int fds[NF];
    uint8_t *content[NF];
    for (unsigned f = 0; f < NF; f++) {
        char name[32];
        snprintf(name, sizeof name, "ranges%u.bin", f);
        CHECK_EQ(make_pattern_file(pt_tmppath(name), f, sizes[f]), 0);
        fds[f] = open(pt_tmppath(name), O_RDONLY);
        CHECK(fds[f] >= 0);
        content[f] = malloc(sizes[f]);
        for (uint64_t j = 0; j < sizes[f]; j++) content[f][j] = pat(f, j);
    }
    static const uint64_t gaps[] = {0, 1, 100, 4096, 65536, UINT64_MAX / 4};
    static const uint64_t blocks[] = {1, 1000, 16384, 8u << 20};
    int iters = getenv("PAGEIN_UNDER_VALGRIND") ? 40 : 300; /* 300 take ~40 s under valgrind */
    for (int iter = 0; iter < iters && !pt_failed; iter++) {
        size_t n = 1 + pt_rand(&s) % 120;
        pagein_range *r = calloc(n, sizeof *r);
        for (size_t i = 0; i < n; i++) {
            if (i > 0 && pt_rand(&s) % 5 == 0) { /* duplicate or contained */
                r[i] = r[pt_rand(&s) % i];
                if (pt_rand(&s) % 2 && r[i].length > 2) r[i].offset++, r[i].length -= 2;
            } else {
                r[i].file = (uint32_t)(pt_rand(&s) % NF);
                uint64_t fs = sizes[r[i].file];
                uint64_t len = 1 + pt_rand(&s) % (pt_rand(&s) % 4 == 0 ? 20000 : 600);
                if (len > fs) len = fs;
                r[i].offset = pt_rand(&s) % (fs - len + 1);
                r[i].length = len;
            }
            r[i].dst = malloc(r[i].length);
            memset(r[i].dst, 0xEE, r[i].length);
        }
        uint64_t max_gap = gaps[pt_rand(&s) % PI_ARRAY_LEN(gaps)];
        uint64_t max_block = blocks[pt_rand(&s) % PI_ARRAY_LEN(blocks)];
        int no_merge = pt_rand(&s) % 4 == 0;

        /* the plan's invariants, checked against brute force coverage maps */
        struct pi_rplan plan;
        CHECK_OK(pi_ranges_plan(r, n, NF, sizes, max_gap, max_block, no_merge, &plan));
        uint8_t *cov[NF], *rd[NF];
        uint64_t uni = 0, reqbytes = 0;
        for (unsigned f = 0; f < NF; f++) {
            cov[f] = calloc(sizes[f], 1);
            rd[f] = calloc(sizes[f], 1);
        }
        for (size_t i = 0; i < n; i++) {
            reqbytes += r[i].length;
            for (uint64_t j = 0; j < r[i].length; j++) cov[r[i].file][r[i].offset + j] = 1;
        }
        for (unsigned f = 0; f < NF; f++)
            for (uint64_t j = 0; j < sizes[f]; j++) uni += cov[f][j];
        uint64_t sum = 0, block_used = 0;
        size_t served = 0;
        for (size_t b = 0; b < plan.nblocks; b++) {
            const struct pi_rblock *bk = &plan.blocks[b];
            sum += bk->len;
            served += bk->count;
            /* what this read serves, byte by byte (reads may overlap only
             * when a partly overlapping request could not join) */
            memset(rd[bk->file] + bk->off, 0, bk->len);
            int biggest_alone = 0;
            for (size_t j = bk->first; j < bk->first + bk->count; j++) {
                const pagein_range *q = &r[plan.order[j]];
                CHECK(q->file == bk->file && q->offset >= bk->off && q->offset + q->length <= bk->off + bk->len);
                if (q->offset == bk->off && q->length == bk->len) biggest_alone = 1;
                if (q->file == bk->file && q->offset >= bk->off && q->offset + q->length <= bk->off + bk->len)
                    memset(rd[bk->file] + q->offset, 1, q->length);
            }
            for (uint64_t j = 0; j < bk->len; j++) block_used += rd[bk->file][bk->off + j];
            CHECK(bk->len <= max_block || biggest_alone);
            if (b > 0 && plan.blocks[b - 1].file == bk->file) {
                const struct pi_rblock *pb = &plan.blocks[b - 1];
                CHECK(pb->off <= bk->off);
                /* greedy maximality: the next read could not join */
                uint64_t pend = pb->off + pb->len;
                uint64_t gap = bk->off > pend ? bk->off - pend : 0;
                if (bk->off < pend && !no_merge) { /* overlap: refused for size */
                    const pagein_range *q = &r[plan.order[bk->first]];
                    CHECK(q->offset + q->length - pb->off > max_block);
                } else if (!no_merge && gap <= max_gap) {
                    /* it could only have been refused for size: the first request of bk */
                    const pagein_range *q = &r[plan.order[bk->first]];
                    CHECK(q->offset + q->length - pb->off > max_block);
                }
            }
        }
        CHECK_EQ(served, n);
        CHECK_EQ(plan.bytes_read, sum);
        CHECK_EQ(plan.bytes_requested, reqbytes);
        CHECK_EQ(plan.bytes_read - plan.bytes_wasted, block_used);
        CHECK(block_used >= uni);
        /* with unbounded blocks, reads = runs of covered bytes joined across gaps <= max_gap */
        if (!no_merge && max_block >= (8u << 20)) {
            size_t comps = 0;
            for (unsigned f = 0; f < NF; f++) {
                int64_t last = -1;
                for (uint64_t j = 0; j < sizes[f]; j++)
                    if (cov[f][j]) {
                        if (last < 0 || j - (uint64_t)last - 1 > max_gap) comps++;
                        last = (int64_t)j;
                    }
            }
            CHECK_EQ(plan.nblocks, comps);
        }
        pi_rplan_free(&plan);
        for (unsigned f = 0; f < NF; f++) {
            free(cov[f]);
            free(rd[f]);
        }

        /* the bytes: every dst equals a direct read of its range */
        pagein_ranges_opts o = PAGEIN_RANGES_OPTS_INIT;
        o.max_gap = max_gap;
        o.max_block = max_block;
        o.queue_depth = 1 + (unsigned)(pt_rand(&s) % 8);
        /* io_uring writes the buffers from the kernel, which valgrind cannot see:
         * it would call every byte uninitialised, so use threads under it */
        int uring = pt_rand(&s) % 2 && !getenv("PAGEIN_UNDER_VALGRIND");
        o.flags = (no_merge ? PAGEIN_RANGES_NO_MERGE : 0) | (uring ? PAGEIN_RANGES_URING : 0);
        pagein_ranges_stats st;
        CHECK_OK(pagein_read_ranges(fds, NF, r, n, &o, &st));
        CHECK_EQ(st.requests, n);
        for (size_t i = 0; i < n; i++) {
            CHECK(memcmp(r[i].dst, content[r[i].file] + r[i].offset, r[i].length) == 0);
            free(r[i].dst);
        }
        free(r);
    }
    for (unsigned f = 0; f < NF; f++) {
        close(fds[f]);
        free(content[f]);
    }
    return PASS;
}

TEST(data_ranges_errors) {
    CHECK_EQ(make_pattern_file(pt_tmppath("rerr.bin"), 0, 1000), 0);
    int fd = open(pt_tmppath("rerr.bin"), O_RDONLY);
    CHECK(fd >= 0);
    char buf[2000];
    pagein_range r[3] = {{0, 0, 10, buf}, {0, 500, 0, buf}, {0, 10, 10, buf}};
    CHECK_EQ(pagein_read_ranges(&fd, 1, r, 3, NULL, NULL), PAGEIN_E_INVALID);
    CHECK(strstr(pagein_last_error_detail(), "request 1") && strstr(pagein_last_error_detail(), "zero length"));
    r[1] = (pagein_range){0, 990, 11, buf};
    CHECK_EQ(pagein_read_ranges(&fd, 1, r, 3, NULL, NULL), PAGEIN_E_RANGE);
    CHECK(strstr(pagein_last_error_detail(), "request 1") && strstr(pagein_last_error_detail(), "past the end"));
    r[1] = (pagein_range){0, UINT64_MAX - 5, 10, buf};
    CHECK_EQ(pagein_read_ranges(&fd, 1, r, 3, NULL, NULL), PAGEIN_E_RANGE);
    r[1] = (pagein_range){1, 0, 10, buf};
    CHECK_EQ(pagein_read_ranges(&fd, 1, r, 3, NULL, NULL), PAGEIN_E_INVALID);
    CHECK(strstr(pagein_last_error_detail(), "file 1"));
    r[1] = (pagein_range){0, 990, 10, buf + 100};
    pagein_ranges_stats st;
    CHECK_OK(pagein_read_ranges(&fd, 1, r, 3, NULL, &st));
    CHECK_EQ(st.reads, 1); /* [0,20) and [990,1000): the gap of 970 bytes is <= 64 KiB */
    CHECK_EQ(pagein_read_ranges(&fd, 1, NULL, 0, NULL, &st), 0);
    close(fd);
    return PASS;
}

TEST(data_ranges_uring) {
    if (!pagein_ranges_uring_available()) SKIP_BECAUSE("io_uring unavailable (built without liburing, or refused by the kernel)");
    if (getenv("PAGEIN_UNDER_VALGRIND")) SKIP_BECAUSE("valgrind cannot see the kernel filling buffers through io_uring");
    /* many reads, short queue: completions out of order, slices land right */
    CHECK_EQ(make_pattern_file(pt_tmppath("ru.bin"), 2, 1 << 20), 0);
    int fd = open(pt_tmppath("ru.bin"), O_RDONLY);
    enum { N = 500 };
    static char bufs[N][3000];
    pagein_range r[N];
    uint64_t s = pt_seed();
    for (int i = 0; i < N; i++) r[i] = (pagein_range){0, pt_rand(&s) % ((1 << 20) - 3000), 1 + pt_rand(&s) % 3000, bufs[i]};
    pagein_ranges_opts o = PAGEIN_RANGES_OPTS_INIT;
    o.flags = PAGEIN_RANGES_URING;
    o.queue_depth = 3;
    o.max_gap = 1000;
    o.max_block = 20000;
    pagein_ranges_stats st;
    CHECK_OK(pagein_read_ranges(&fd, 1, r, N, &o, &st));
    CHECK(st.reads > 10);
    for (int i = 0; i < N; i++)
        for (uint64_t j = 0; j < r[i].length; j++)
            if ((uint8_t)bufs[i][j] != pat(2, r[i].offset + j)) {
                CHECK(!"io_uring slice differs");
                i = N;
                break;
            }
    /* a file that shrank: a clear error, no crash */
    int fd2 = open(pt_tmppath("ru.bin"), O_RDWR);
    r[0] = (pagein_range){0, 900000, 1000, bufs[0]};
    CHECK_EQ(ftruncate(fd2, 900500), 0);
    r[1] = (pagein_range){0, 100, 10, bufs[1]};
    CHECK_EQ(pagein_read_ranges(&fd, 1, r, 2, &o, NULL), PAGEIN_E_RANGE);
    close(fd2);
    close(fd);
    return PASS;
}

TEST(data_ranges_merge_counts) {
    /* 8 requests of 1 KiB every 4 KiB: max_gap 3 KiB merges all into one read
     * wasting 7 x 3 KiB; max_gap 1 KiB keeps 8 reads; max_block 8 KiB pairs them. */
    CHECK_EQ(make_pattern_file(pt_tmppath("rmc.bin"), 1, 65536), 0);
    int fd = open(pt_tmppath("rmc.bin"), O_RDONLY);
    static char bufs[8][1024];
    pagein_range r[8];
    for (int i = 0; i < 8; i++) r[i] = (pagein_range){0, (uint64_t)(7 - i) * 4096, 1024, bufs[i]};
    pagein_ranges_opts o = PAGEIN_RANGES_OPTS_INIT;
    pagein_ranges_stats st;
    o.max_gap = 3072;
    CHECK_OK(pagein_read_ranges(&fd, 1, r, 8, &o, &st));
    CHECK_EQ(st.reads, 1);
    CHECK_EQ(st.bytes_read, 7 * 4096 + 1024);
    CHECK_EQ(st.bytes_wasted, 7 * 3072);
    o.max_gap = 1024;
    CHECK_OK(pagein_read_ranges(&fd, 1, r, 8, &o, &st));
    CHECK_EQ(st.reads, 8);
    CHECK_EQ(st.bytes_wasted, 0);
    o.max_gap = 3072;
    o.max_block = 8192;
    CHECK_OK(pagein_read_ranges(&fd, 1, r, 8, &o, &st));
    CHECK_EQ(st.reads, 4);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 1024; j++) CHECK(bufs[i][j] == (char)pat(1, (uint64_t)(7 - i) * 4096 + (uint64_t)j));
    close(fd);
    return PASS;
}

/* ---- readers ------------------------------------------------------------ */

static pagein_reader *open_reader(pagein_dataset *d, pagein_reader_kind k, uint64_t seed, uint32_t flags) {
    pagein_reader_opts o = PAGEIN_READER_OPTS_INIT;
    o.kind = k;
    o.seed = seed;
    o.flags = flags;
    o.queue_depth = 4;
    o.batch = 37;
    o.block_bytes = 4096; /* 42 records per block */
    o.buffer_blocks = 3;
    o.max_gap = 200;
    pagein_reader *r = NULL;
    int rc = pagein_reader_open(&r, d, &o);
    if (rc < 0) printf("    reader_open(%s): %s: %s\n", pagein_reader_kind_name(k), pagein_strerror(rc),
                       pagein_last_error_detail());
    return r;
}

TEST(data_readers_each_sample_once) {
    pagein_dataset *d = open_records_ds();
    CHECK(d);
    if (!d) return FAIL;
    uint64_t n = pagein_dataset_count(d);
    CHECK_EQ(n, 1000);
    uint64_t *o1 = malloc(n * 8), *o2 = malloc(n * 8);
    for (int k = 0; k <= PAGEIN_READER_MMAP; k++)
        for (int in_order = 0; in_order < 2; in_order++) {
            pagein_reader *r = open_reader(d, (pagein_reader_kind)k, 42, in_order ? PAGEIN_READER_IN_ORDER : 0);
            CHECK(r);
            if (!r) continue;
            CHECK(read_epoch(r, n, o1, 1));
            if (in_order)
                for (uint64_t i = 0; i < n; i++) CHECK_EQ(o1[i], i);
            CHECK_OK(pagein_reader_start_epoch(r, 1));
            CHECK(read_epoch(r, n, o2, 1));
            if (!in_order) CHECK(memcmp(o1, o2, n * 8) != 0); /* reshuffled each epoch */
            /* abandon an epoch half way, then a full one */
            pagein_sample s;
            CHECK_OK(pagein_reader_start_epoch(r, 9));
            for (int i = 0; i < 500; i++) CHECK_EQ(pagein_reader_next(r, &s), 1);
            CHECK_OK(pagein_reader_start_epoch(r, 2));
            CHECK(read_epoch(r, n, NULL, 1));
            CHECK_EQ(pagein_reader_next(r, &s), 0);
            pagein_reader_stats st;
            pagein_reader_get_stats(r, &st);
            CHECK_EQ(st.samples, 3 * n + 500);
            if (k != PAGEIN_READER_MMAP) CHECK(st.io.bytes_read >= n * REC);
            pagein_reader_close(r);
        }
    free(o1);
    free(o2);
    pagein_dataset_close(d);
    return PASS;
}

TEST(data_readers_seeded) {
    pagein_dataset *d = open_records_ds();
    if (!d) return FAIL;
    uint64_t n = pagein_dataset_count(d);
    uint64_t *a = malloc(n * 8), *b = malloc(n * 8), *c = malloc(n * 8);
    for (int k = 0; k <= PAGEIN_READER_MMAP; k++) {
        pagein_reader *r1 = open_reader(d, (pagein_reader_kind)k, 7, 0);
        pagein_reader *r2 = open_reader(d, (pagein_reader_kind)k, 7, 0);
        pagein_reader *r3 = open_reader(d, (pagein_reader_kind)k, 8, 0);
        CHECK(r1 && r2 && r3);
        if (r1 && r2 && r3) {
            CHECK(read_epoch(r1, n, a, 0));
            CHECK(read_epoch(r2, n, b, 0));
            CHECK(read_epoch(r3, n, c, 0));
            CHECK(memcmp(a, b, n * 8) == 0);
            CHECK(memcmp(a, c, n * 8) != 0);
            if (memcmp(a, b, n * 8)) printf("    kind %s\n", pagein_reader_kind_name((pagein_reader_kind)k));
            /* epoch 5 of a fresh reader = epoch 5 reached after others */
            CHECK_OK(pagein_reader_start_epoch(r1, 5));
            CHECK_OK(pagein_reader_start_epoch(r2, 3));
            CHECK(read_epoch(r2, n, NULL, 0));
            CHECK_OK(pagein_reader_start_epoch(r2, 5));
            CHECK(read_epoch(r1, n, a, 0));
            CHECK(read_epoch(r2, n, b, 0));
            CHECK(memcmp(a, b, n * 8) == 0);
        }
        if (k == PAGEIN_READER_GLOBAL) { /* documented: the order is pagein_permutation's */
            pagein_permutation(c, n, pagein_epoch_seed(7, 5));
            CHECK(memcmp(a, c, n * 8) == 0);
        }
        pagein_reader_close(r1);
        pagein_reader_close(r2);
        pagein_reader_close(r3);
    }
    free(a);
    free(b);
    free(c);
    pagein_dataset_close(d);
    return PASS;
}

/* The readers run on the pipeline: what they hold is the pipe's two units
 * (the one handed out, the one loading), under the bound they state, for
 * every kind, window and batch. */
TEST(data_block_memory_bound) {
    pagein_dataset *d = open_records_ds();
    if (!d) return FAIL;
    uint64_t n = pagein_dataset_count(d);
    static const pagein_reader_kind kinds[] = {PAGEIN_READER_GLOBAL, PAGEIN_READER_RANGES, PAGEIN_READER_BLOCK};
    for (size_t k = 0; k < PI_ARRAY_LEN(kinds); k++)
        for (unsigned K = 1; K <= 5; K += 2) {
            pagein_reader_opts o = PAGEIN_READER_OPTS_INIT;
            o.kind = kinds[k];
            o.buffer_blocks = K;
            o.batch = 8 * K;
            pagein_reader *r = NULL;
            CHECK_OK(pagein_reader_open(&r, d, &o));
            if (!r) continue;
            CHECK(read_epoch(r, n, NULL, 1));
            pagein_reader_stats st;
            pagein_reader_get_stats(r, &st);
            CHECK(st.memory_bound > 0);
            CHECK(st.memory_peak > 0);
            CHECK(st.memory_peak <= st.memory_bound);
            if (st.memory_peak > st.memory_bound)
                printf("    %s, %u: peak %" PRIu64 " > bound %" PRIu64 "\n", pagein_reader_kind_name(kinds[k]), K,
                       st.memory_peak, st.memory_bound);
            CHECK(st.io.reads > 0);
            CHECK_EQ(st.blocks, pagein_dataset_group_count(d));
            pagein_reader_close(r);
        }
    pagein_dataset_close(d);
    return PASS;
}

TEST(data_reader_errors) {
    pagein_dataset *d = NULL;
    const char *p = pt_tmppath("odd.rec");
    CHECK_EQ(make_pattern_file(p, 0, 1001), 0);
    CHECK_EQ(pagein_dataset_open_records(&d, &p, 1, 100), PAGEIN_E_BAD_DATASET);
    CHECK(d == NULL);
    CHECK(strstr(pagein_last_error_detail(), "odd.rec"));
    CHECK_EQ(pagein_dataset_open_records(&d, &p, 1, 0), PAGEIN_E_INVALID);
    const char *missing = pt_tmppath("missing.rec");
    CHECK_EQ(pagein_dataset_open_records(&d, &missing, 1, 10), -ENOENT);
    CHECK_OK(pagein_dataset_open_records(&d, &p, 1, 7));
    CHECK_EQ(pagein_dataset_count(d), 143);
    pagein_sample_loc l;
    CHECK_EQ(pagein_dataset_locate(d, 143, &l), PAGEIN_E_RANGE);
    CHECK_OK(pagein_dataset_locate(d, 142, &l));
    CHECK_EQ(l.offset, 994);
    pagein_reader_opts o = PAGEIN_READER_OPTS_INIT;
    o.kind = (pagein_reader_kind)9;
    pagein_reader *r = NULL;
    CHECK_EQ(pagein_reader_open(&r, d, &o), PAGEIN_E_INVALID);
    CHECK(r == NULL);
    CHECK_EQ(pagein_reader_kind_from_name("block"), PAGEIN_READER_BLOCK);
    CHECK_EQ(pagein_reader_kind_from_name("nope"), PAGEIN_E_NOT_FOUND);
    CHECK_EQ(pagein_reader_kind_from_name(NULL), PAGEIN_E_NOT_FOUND);
    /* a file truncated under a reader gives an error naming the file and
     * the offset (the range engine's reads), not a crash; for every kind
     * that reads (global, ranges, block). The pipe under the reader may
     * have read this small epoch already: the next epoch reads again */
    static const pagein_reader_kind kinds[] = {PAGEIN_READER_GLOBAL, PAGEIN_READER_RANGES, PAGEIN_READER_BLOCK};
    for (size_t k = 0; k < PI_ARRAY_LEN(kinds); k++) {
        CHECK_EQ(make_pattern_file(p, 0, 1001), 0);
        o = (pagein_reader_opts)PAGEIN_READER_OPTS_INIT;
        o.kind = kinds[k];
        o.block_bytes = 256;
        CHECK_OK(pagein_reader_open(&r, d, &o));
        if (!r) continue;
        CHECK_EQ(truncate(p, 500), 0);
        pagein_sample s;
        int rc = pagein_reader_start_epoch(r, 1);
        while (rc == 0 && (rc = pagein_reader_next(r, &s)) == 1) {}
        CHECK_EQ(rc, PAGEIN_E_TRUNCATED);
        const char *det = pagein_last_error_detail();
        if (!strstr(det, "odd.rec") || !strstr(det, "offset")) printf("    %s: %s\n", pagein_reader_kind_name(kinds[k]), det);
        CHECK(strstr(det, "odd.rec") != NULL);
        CHECK(strstr(det, "offset") != NULL);
        pagein_reader_close(r);
        r = NULL;
    }
    pagein_dataset_close(d);
    return PASS;
}

/* ---- Megatron ----------------------------------------------------------- */

struct mega {
    uint8_t *idx;
    size_t len;
};

/* Builds an .idx for S sequences (lengths lens, contiguous pointers),
 * documents = every 3 sequences; dtype code 8 (uint16). */
static struct mega mega_build(const int32_t *lens, uint64_t S, uint8_t code, uint32_t eb) {
    uint64_t D = S / 3 + 2;
    struct mega m;
    m.len = 34 + 12 * S + 8 * D;
    m.idx = calloc(1, m.len);
    memcpy(m.idx, "MMIDIDX\0\0", 9);
    uint64_t v = 1;
    memcpy(m.idx + 9, &v, 8);
    m.idx[17] = code;
    memcpy(m.idx + 18, &S, 8);
    memcpy(m.idx + 26, &D, 8);
    int64_t p = 0;
    for (uint64_t i = 0; i < S; i++) {
        memcpy(m.idx + 34 + 4 * i, &lens[i], 4);
        memcpy(m.idx + 34 + 4 * S + 8 * i, &p, 8);
        p += lens[i] * (int64_t)eb;
    }
    for (uint64_t j = 0; j < D; j++) {
        int64_t di = j + 1 == D ? (int64_t)S : (int64_t)(3 * j < S ? 3 * j : S);
        memcpy(m.idx + 34 + 12 * S + 8 * j, &di, 8);
    }
    return m;
}

static uint64_t mega_bin_size(const int32_t *lens, uint64_t S, uint32_t eb) {
    uint64_t t = 0;
    for (uint64_t i = 0; i < S; i++) t += (uint64_t)lens[i] * eb;
    return t;
}

TEST(data_megatron_dataset) {
    uint64_t s = pt_seed();
    enum { S = 200 };
    int32_t lens[S];
    for (int i = 0; i < S; i++) lens[i] = (int32_t)(pt_rand(&s) % 300); /* some empty */
    lens[5] = 0;
    struct mega m = mega_build(lens, S, 8, 2);
    uint64_t bs = mega_bin_size(lens, S, 2);
    CHECK_EQ(pt_write_file(pt_tmppath("mega.idx"), m.idx, m.len), 0);
    uint16_t *bin = malloc(bs + 2);
    uint64_t k = 0;
    for (int i = 0; i < S; i++)
        for (int j = 0; j < lens[i]; j++) bin[k++] = (uint16_t)(i * 1000 + j);
    CHECK_EQ(pt_write_file(pt_tmppath("mega.bin"), bin, bs), 0);
    free(bin);
    pagein_megatron_info info;
    CHECK_OK(pagein_megatron_validate(m.idx, m.len, bs, &info));
    CHECK_EQ(info.sequences, S);
    CHECK_EQ(info.elem_bytes, 2);
    pagein_dataset *d = NULL;
    const char *prefix = pt_tmppath("mega");
    CHECK_OK(pagein_dataset_open_megatron(&d, prefix));
    if (!d) return FAIL;
    CHECK_EQ(pagein_dataset_count(d), S);
    for (int k2 = 0; k2 <= PAGEIN_READER_MMAP; k2++) {
        pagein_reader_opts o = PAGEIN_READER_OPTS_INIT;
        o.kind = (pagein_reader_kind)k2;
        o.seed = 3;
        o.block_bytes = 1000;
        o.batch = 16;
        pagein_reader *r = NULL;
        CHECK_OK(pagein_reader_open(&r, d, &o));
        if (!r) continue;
        int seen[S] = {0};
        pagein_sample smp;
        int rc, cnt = 0;
        while ((rc = pagein_reader_next(r, &smp)) == 1) {
            cnt++;
            CHECK(smp.id < S && !seen[smp.id]);
            if (smp.id >= S) break;
            seen[smp.id] = 1;
            CHECK_EQ(smp.length, (uint64_t)lens[smp.id] * 2);
            const uint8_t *p = smp.data;
            for (int j = 0; j < lens[smp.id]; j++) {
                uint16_t v;
                memcpy(&v, p + 2 * j, 2);
                if (v != (uint16_t)(smp.id * 1000 + (uint64_t)j)) {
                    CHECK(!"megatron sample bytes");
                    break;
                }
            }
        }
        CHECK_EQ(rc, 0);
        CHECK_EQ(cnt, S);
        pagein_reader_close(r);
    }
    pagein_dataset_close(d);
    free(m.idx);
    return PASS;
}

static void put64(uint8_t *p, int64_t v) { memcpy(p, &v, 8); }

TEST(data_megatron_validation) {
    int32_t lens[10] = {5, 0, 7, 1, 1, 2, 3, 9, 4, 6};
    uint64_t S = 10, bs = mega_bin_size(lens, S, 4);
    struct mega m = mega_build(lens, S, 4, 4);
    CHECK_OK(pagein_megatron_validate(m.idx, m.len, bs, NULL));
    /* every truncation is caught */
    for (size_t l = 0; l < m.len; l++) {
        int rc = pagein_megatron_validate(m.idx, l, bs, NULL);
        CHECK(rc == PAGEIN_E_TRUNCATED || (l < 9 && rc == PAGEIN_E_TRUNCATED) || (l >= 9 && l < 34 && rc == PAGEIN_E_TRUNCATED));
        if (rc != PAGEIN_E_TRUNCATED) {
            printf("    length %zu: %d %s\n", l, rc, pagein_last_error_detail());
            break;
        }
    }
    uint8_t *b = malloc(m.len + 16);
#define MUT(stmt, want, needle)                                                          \
    do {                                                                                 \
        memcpy(b, m.idx, m.len);                                                         \
        size_t len = m.len;                                                              \
        stmt;                                                                            \
        int rc_ = pagein_megatron_validate(b, len, bs, NULL);                            \
        CHECK_EQ(rc_, want);                                                             \
        if (needle[0] && !strstr(pagein_last_error_detail(), needle))                     \
            printf("    detail lacks '%s': %s\n", needle, pagein_last_error_detail()), pt_failed = 1; \
    } while (0)
    MUT(b[0] = 'X', PAGEIN_E_BAD_MAGIC, "magic");
    MUT(put64(b + 9, 2), PAGEIN_E_BAD_VERSION, "version 2");
    MUT(b[17] = 9, PAGEIN_E_BAD_DTYPE, "dtype code 9");
    MUT(put64(b + 18, 11), PAGEIN_E_TRUNCATED, "11 sequences"); /* counts disagree with the size */
    MUT(put64(b + 26, 3), PAGEIN_E_BAD_DATASET, "documents");
    MUT(put64(b + 18, (int64_t)(UINT64_MAX / 8)), PAGEIN_E_OVERFLOW, "overflow");
    MUT(len += 3, PAGEIN_E_BAD_DATASET, "");
    MUT(len += 10, 0, ""); /* multimodal: one mode byte per sequence */
    MUT(put64(b + 34 + 40 + 8 * 9, (int64_t)bs - 23), PAGEIN_E_RANGE, "sequence 9"); /* pointer past end of .bin */
    MUT(put64(b + 34 + 40 + 8 * 2, -1), PAGEIN_E_BAD_DATASET, "negative pointer");
    MUT(memcpy(b + 34 + 4 * 3, &(int32_t){-4}, 4), PAGEIN_E_BAD_DATASET, "negative length");
    MUT(memcpy(b + 34 + 4 * 3, &(int32_t){INT32_MAX}, 4), PAGEIN_E_RANGE, "sequence 3");
    MUT(put64(b + 34 + 120, 1), PAGEIN_E_BAD_DATASET, "starts at 1");
    MUT(put64(b + 34 + 120 + 8 * 4, 9), PAGEIN_E_BAD_DATASET, "ends at 9"); /* last doc entry != S */
    MUT(put64(b + 34 + 120 + 8 * 2, 1), PAGEIN_E_BAD_DATASET, "entry 2"); /* decreasing */
    CHECK_EQ(pagein_megatron_validate(m.idx, m.len, bs - 1, NULL), PAGEIN_E_RANGE);
    /* the dataset refuses a .bin shorter than the index needs */
    CHECK_EQ(pt_write_file(pt_tmppath("short.idx"), m.idx, m.len), 0);
    CHECK_EQ(pt_write_file(pt_tmppath("short.bin"), b, 10), 0);
    pagein_dataset *d = NULL;
    CHECK_EQ(pagein_dataset_open_megatron(&d, pt_tmppath("short")), PAGEIN_E_RANGE);
    CHECK(strstr(pagein_last_error_detail(), "short.idx"));
    CHECK(d == NULL);
    free(b);
    free(m.idx);
    return PASS;
}

/* ---- shuffle quality ---------------------------------------------------- */

TEST(data_shuffle_quality) {
    enum { N = 20000 };
    uint64_t *ids = malloc(N * 8);
    for (uint64_t i = 0; i < N; i++) ids[i] = i;
    double h = -1, q = -1;
    CHECK_OK(pagein_order_entropy(ids, N, &h));
    CHECK(h == 0.0);
    CHECK_OK(pagein_shuffle_quality(ids, N, &q));
    CHECK(q == 0.0);
    pagein_permutation(ids, N, 99);
    CHECK_OK(pagein_shuffle_quality(ids, N, &q));
    CHECK(q > 0.97 && q < 1.03);
    CHECK_OK(pagein_order_entropy(ids, N, &h));
    CHECK(h > 13.0); /* about log2(N) = 14.3 */
    /* blocks of 100 in shuffled order, in order inside: poor */
    for (uint64_t b = 0; b < N / 100; b++)
        for (uint64_t j = 0; j < 100; j++) ids[b * 100 + j] = b * 100 + j;
    uint64_t border[N / 100];
    pagein_permutation(border, N / 100, 5);
    for (uint64_t b = 0; b < N / 100; b++)
        for (uint64_t j = 0; j < 100; j++) ids[b * 100 + j] = border[b] * 100 + j;
    CHECK_OK(pagein_shuffle_quality(ids, N, &q));
    CHECK(q < 0.2);
    CHECK_EQ(pagein_shuffle_quality(ids, 2, &q), PAGEIN_E_INVALID);
    CHECK_EQ(pagein_order_entropy(ids, 1, &h), PAGEIN_E_INVALID);
    free(ids);
    return PASS;
}

TEST(data_block_quality) {
    /* 64 blocks of 512 samples, a window of 7 blocks: the shape of 1 GiB of
     * 32 KiB rows in 16 MiB blocks with the default buffer. */
    enum { N = 32768 };
    uint64_t *v = malloc(N * 8);
    for (uint64_t i = 0; i < N; i++) v[i] = i;
    const char *p = pt_tmppath("quality.rec");
    CHECK_EQ(pt_write_file(p, v, N * 8), 0);
    pagein_dataset *d = NULL;
    CHECK_OK(pagein_dataset_open_records(&d, &p, 1, 8));
    pagein_reader_opts o = PAGEIN_READER_OPTS_INIT;
    o.kind = PAGEIN_READER_BLOCK;
    o.block_bytes = 512 * 8;
    o.seed = 1234;
    pagein_reader *r = NULL;
    CHECK_OK(pagein_reader_open(&r, d, &o));
    if (r) {
        CHECK(read_epoch(r, N, v, 0));
        double q = -1;
        CHECK_OK(pagein_shuffle_quality(v, N, &q));
        printf("    block quality %.3f\n", q);
        CHECK(q >= 0.9 && q <= 1.0);
        o.flags = PAGEIN_READER_IN_ORDER;
        pagein_reader_close(r);
        CHECK_OK(pagein_reader_open(&r, d, &o));
        CHECK(read_epoch(r, N, v, 0));
        CHECK_OK(pagein_shuffle_quality(v, N, &q));
        CHECK(q == 0.0);
    }
    pagein_reader_close(r);
    pagein_dataset_close(d);
    free(v);
    return PASS;
}

/* pagein_order_groups is the pipeline's sequence for a dataset whose groups
 * are runs of group_samples ids (one record file read in groups of k
 * records), for every order, seed and window; pagein_pipe_part is the
 * partition pagein_pipe_ids hands each (rank, worker). */
TEST(data_order_groups_and_part) {
    const char *p = pt_tmppath("uniform.rec");
    CHECK_EQ(make_records(p, 0, 1000, REC), 0);
    static const uint64_t ks[] = {1, 7, 64, 1000};
    uint64_t *a = malloc(1000 * 8), *b = malloc(1000 * 8);
    for (size_t t = 0; t < PI_ARRAY_LEN(ks); t++) {
        pagein_dataset_opts dop = PAGEIN_DATASET_OPTS_INIT;
        dop.format = "records", dop.record_bytes = REC, dop.group_bytes = ks[t] * REC;
        pagein_dataset *d = NULL;
        CHECK_OK(pagein_dataset_open(&d, p, &dop));
        if (!d) continue;
        CHECK_EQ(pagein_dataset_group_count(d), (1000 + ks[t] - 1) / ks[t]);
        for (int order = PAGEIN_ORDER_NONE; order <= PAGEIN_ORDER_GLOBAL; order++)
            for (uint32_t window = 1; window <= 9; window += 4) {
                pagein_pipe_opts po = PAGEIN_PIPE_OPTS_INIT;
                po.order = (pagein_order)order, po.seed = 3 + t, po.epoch = window, po.window = window;
                CHECK_OK(pagein_pipe_order(d, &po, a, 1000));
                CHECK_OK(pagein_order_groups(1000, ks[t], &po, b));
                if (memcmp(a, b, 1000 * 8)) printf("    k %" PRIu64 ", order %d, window %u differ\n", ks[t], order, window);
                CHECK(memcmp(a, b, 1000 * 8) == 0);
            }
        /* the partition: rank slices, then batches dealt to workers */
        pagein_pipe_opts po = PAGEIN_PIPE_OPTS_INIT;
        po.order = PAGEIN_ORDER_GLOBAL, po.seed = 11, po.batch = 5;
        CHECK_OK(pagein_pipe_order(d, &po, a, 1000));
        uint64_t total = 0;
        for (uint32_t r = 0; r < 3; r++)
            for (uint32_t w = 0; w < 2; w++) {
                po.rank = r, po.world_size = 3, po.worker = w, po.num_workers = 2;
                uint64_t off, cnt, n = 0;
                CHECK_OK(pagein_pipe_part(1000, &po, &off, &cnt));
                CHECK_OK(pagein_pipe_ids(d, &po, b, 1000, &n));
                CHECK_EQ(n, cnt);
                CHECK(off + cnt <= 1000 && memcmp(a + off, b, cnt * 8) == 0);
                total += cnt;
            }
        CHECK_EQ(total, 1000);
        pagein_dataset_close(d);
    }
    uint64_t off, cnt;
    pagein_pipe_opts bad = PAGEIN_PIPE_OPTS_INIT;
    bad.rank = 2, bad.world_size = 2;
    CHECK_EQ(pagein_pipe_part(10, &bad, &off, &cnt), PAGEIN_E_INVALID);
    CHECK_EQ(pagein_order_groups(10, 0, NULL, a), PAGEIN_E_INVALID);
    free(a);
    free(b);
    return PASS;
}

/* The pipe's kept workers (the loader's crew for local reads, the
 * decoder's for a unit's groups) over units of several MiB: every sample
 * once with its bytes, in block and global order, two epochs of one pipe
 * (the crews live across them), then closed. Small enough for TSan. */
TEST(data_pipe_crews) {
    enum { NS = 3, PER = 96, R = 32768 };
    const char *paths[NS];
    char names[NS][32];
    for (int i = 0; i < NS; i++) {
        snprintf(names[i], sizeof names[i], "crew%d.rec", i);
        paths[i] = strdup(pt_tmppath(names[i]));
        CHECK(make_records(paths[i], (uint64_t)i * PER, PER, R) == 0);
    }
    pagein_dataset *d = NULL;
    pagein_dataset_opts dop = PAGEIN_DATASET_OPTS_INIT;
    dop.record_bytes = R;
    dop.group_bytes = 1u << 20; /* 32 records a group: a block unit of 8 groups is 8 MiB */
    char spec[3 * 4096];
    snprintf(spec, sizeof spec, "%s\n%s\n%s", paths[0], paths[1], paths[2]);
    for (int i = 0; i < NS; i++) free((void *)paths[i]);
    CHECK_OK(pagein_dataset_open(&d, spec, &dop));
    if (!d) return FAIL;
    uint64_t n = pagein_dataset_count(d);
    CHECK_EQ(n, (uint64_t)NS * PER);
    static const pagein_order orders[] = {PAGEIN_ORDER_BLOCK, PAGEIN_ORDER_GLOBAL};
    uint8_t *seen = calloc(n, 1);
    for (size_t k = 0; k < PI_ARRAY_LEN(orders) && seen; k++) {
        pagein_pipe_opts po = PAGEIN_PIPE_OPTS_INIT;
        po.order = orders[k];
        po.window = 8;
        po.queue_depth = 4; /* the loader's crew whatever the CPUs */
        pagein_pipe *p = NULL;
        CHECK_OK(pagein_pipe_open(&p, d, &po));
        for (uint64_t ep = 0; p && ep < 2; ep++) {
            if (ep) CHECK_OK(pagein_pipe_set_epoch(p, ep));
            memset(seen, 0, n);
            uint64_t got = 0, bad = 0;
            pagein_item it;
            int rc;
            while ((rc = pagein_pipe_next(p, &it)) == 1) {
                pagein_sample s = {.id = it.id, .data = it.fields[0].data, .length = it.fields[0].nbytes};
                if (it.id >= n || seen[it.id]++ || !check_record(&s, R)) bad++;
                got++;
            }
            CHECK_EQ(rc, 0);
            CHECK_EQ(got, n);
            CHECK_EQ(bad, 0);
        }
        pagein_pipe_close(p);
    }
    free(seen);
    pagein_dataset_close(d);
    return PASS;
}
