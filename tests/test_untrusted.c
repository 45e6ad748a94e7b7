/* test_untrusted.c - white-box (src/data/dsformat.h): untrusted training
 * data whose counts would cost memory before they are checked
 * (docs/SAFETY.md, "Counts and indexes"). The hostile files are the
 * committed fuzz seeds fuzz/corpus/NAME/hostile-* (tests/data/hostile/gen.py
 * and gen_arrow.mjs regenerate them); each open is refused with a message
 * that names the file and the group, or reads what is there, within a few
 * MB. */
#include "test.h"

#include <stdlib.h>
#include <sys/resource.h>

#include "../src/data/dsformat.h"

extern const struct pi_dsformat pi_dsformat_arrow;

static long rss_kb(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

/* Opens path with fmt from memory: the open's code; *n the samples. */
static int open_file(const struct pi_dsformat *fmt, const char *path, uint64_t *n, int walk) {
    size_t len = 0;
    void *buf = pt_read_file(path, &len);
    if (!buf) {
        printf("    %s is missing (run from the repository root)\n", path);
        return -1000;
    }
    struct pi_dsshard *sh = NULL;
    struct pi_dsopen a = {.group_bytes = 1 << 20};
    int rc = pi_ds_open_memory(&sh, fmt, buf, len, path, &a);
    if (rc == 0) {
        *n = sh->nsamples;
        if (walk) rc = pi_ds_walk(sh);
        pi_ds_shard_close(sh);
    }
    free(buf);
    return rc;
}

TEST(untrusted_counts_refused) {
    static const struct {
        const char *path, *want;
        int arrow;
    } c[] = {
        {"fuzz/corpus/parquet_footer/hostile-rows.parquet", "claims 268435456 rows in 21 bytes", 0},
        {"fuzz/corpus/parquet_footer/hostile-nocols.parquet", "claims 268435456 rows in 0 bytes", 0},
        {"fuzz/corpus/parquet_footer/hostile-overflow.parquet", "group 0: claims 9223372036854775807 rows", 0},
        {"fuzz/corpus/arrow/hostile-null.arrow", "claims 268435456 rows in 104 bytes", 1},
        {"fuzz/corpus/arrow/hostile-len.stream.arrow", "group 2: claims 1073741824 rows", 1},
    };
    long before = rss_kb();
    for (size_t i = 0; i < PI_ARRAY_LEN(c); i++) {
        uint64_t n = 0;
        int rc = open_file(c[i].arrow ? &pi_dsformat_arrow : &pi_dsformat_parquet, c[i].path, &n, 0);
        CHECK_EQ(rc, PAGEIN_E_FORMAT);
        const char *d = pagein_last_error_detail();
        if (!strstr(d, c[i].want) || !strstr(d, c[i].path)) {
            printf("    %s: detail '%s' lacks '%s'\n", c[i].path, d, c[i].want);
            pt_failed = 1;
        }
    }
    CHECK(rss_kb() - before < (64 << 10));
    return PASS;
}

/* The rule itself: 8 rows a byte, the sum checked for overflow. */
TEST(untrusted_count_rule) {
    struct pi_dsshard sh = {.name = "x.parquet"};
    CHECK_EQ(pi_ds_count_check(&sh, 0, 80, 10, "chunks"), 0);
    CHECK_EQ(pi_ds_count_check(&sh, 0, 81, 10, "chunks"), PAGEIN_E_FORMAT);
    CHECK_EQ(pi_ds_count_check(&sh, 0, 1, 0, "chunks"), PAGEIN_E_FORMAT);
    CHECK_EQ(pi_ds_count_check(&sh, 0, UINT64_MAX, UINT64_MAX, "chunks"), 0);
    uint64_t sum = UINT64_MAX - 1;
    CHECK_EQ(pi_ds_count_add(&sh, 3, &sum, 1), 0);
    CHECK_EQ(pi_ds_count_add(&sh, 4, &sum, 1), PAGEIN_E_FORMAT);
    CHECK(strstr(pagein_last_error_detail(), "group 4") != NULL);
    return PASS;
}

/* Compressed lines and MDS shards: the index pass streams the text (the
 * 22 KB file expands to 256 MiB) and refuses more lines or samples than the
 * compressed bytes may claim; a zstd text of exactly 64 KiB reads. */
TEST(untrusted_compressed_indexes) {
    long before = rss_kb();
    uint64_t n = 0;
    int rc = open_file(&pi_dsformat_lines, "fuzz/corpus/lines/hostile-bomb.jsonl.zst", &n, 0);
    CHECK_EQ(rc, PAGEIN_E_FORMAT);
    CHECK(strstr(pagein_last_error_detail(), "compressed lines") != NULL);
    rc = open_file(&pi_dsformat_mds, "fuzz/corpus/mds/hostile-count.mds.zstd", &n, 0);
    CHECK_EQ(rc, PAGEIN_E_FORMAT);
    CHECK(strstr(pagein_last_error_detail(), "claims 16777216 rows") != NULL);
    CHECK(rss_kb() - before < (64 << 10));
    n = 0;
    CHECK_OK(open_file(&pi_dsformat_lines, "fuzz/corpus/lines/hostile-64k.jsonl.zst", &n, 1));
    CHECK_EQ(n, 64);
    return PASS;
}
