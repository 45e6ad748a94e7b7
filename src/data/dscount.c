/* dscount.c - how many samples the bytes behind a count can hold. A
 * shard's sample count becomes per-sample memory (the global order's
 * permutation, a block window's ids: 8 to 16 bytes a sample) before a
 * single sample is decoded, so a count read from a footer or a batch
 * header is trusted only as far as the bytes that would carry its rows:
 * a row of a column needs at least one bit (a value bit, a validity bit or
 * a level), so a row group or record batch claims at most
 * PI_DS_ROWS_PER_BYTE rows per byte of its data. A group whose columns
 * all need no bytes (Arrow's Null type, a Parquet file with no columns)
 * is bounded by the same ratio over the bytes of its own metadata. The
 * rows' sum is checked for overflow. docs/SAFETY.md states the bound. */
#include "dsformat.h"

#include <inttypes.h>

int pi_ds_count_check(const struct pi_dsshard *sh, uint64_t group, uint64_t count, uint64_t bytes,
                      const char *what) {
    uint64_t most = bytes > UINT64_MAX / PI_DS_ROWS_PER_BYTE ? UINT64_MAX : bytes * PI_DS_ROWS_PER_BYTE;
    if (count <= most) return 0;
    return pi_ds_err(sh, PAGEIN_E_FORMAT, group, UINT64_MAX, NULL,
                     "claims %" PRIu64 " rows in %" PRIu64 " bytes of %s (at most %u rows a byte: a row needs a bit)",
                     count, bytes, what, PI_DS_ROWS_PER_BYTE);
}

int pi_ds_count_add(const struct pi_dsshard *sh, uint64_t group, uint64_t *sum, uint64_t count) {
    if (count > UINT64_MAX - *sum)
        return pi_ds_err(sh, PAGEIN_E_FORMAT, group, UINT64_MAX, NULL,
                         "the groups' rows overflow (%" PRIu64 " after %" PRIu64 ")", count, *sum);
    *sum += count;
    return 0;
}

uint64_t pi_ds_decode_budget(void) {
    uint64_t b = pi_env_size("PAGEIN_DS_DECODE_BUDGET", 16ull << 20);
    return b < (1u << 20) ? (1u << 20) : b > PI_DS_MAX_DECODE ? PI_DS_MAX_DECODE : b;
}

/* Compressed text (lines, an MDS shard) holds what its codec expands to:
 * a valid file of many short repeated lines claims far more than 8 a
 * compressed byte. Its count becomes per-sample memory in the orders (8
 * bytes a sample for the global permutation), so it is accepted up to
 * the allowance whatever the compressed size, and beyond that as far as
 * the compressed bytes vouch for it. */
uint64_t pi_ds_zcount_most(uint64_t bytes) {
    uint64_t allow = (uint64_t)pi_env_long("PAGEIN_DS_SAMPLE_ALLOWANCE", 1L << 22, 0, 1L << 40);
    uint64_t most = bytes > UINT64_MAX / PI_DS_ROWS_PER_BYTE ? UINT64_MAX : bytes * PI_DS_ROWS_PER_BYTE;
    return PI_MAX(allow, most);
}

int pi_ds_zcount_check(const struct pi_dsshard *sh, uint64_t count, uint64_t bytes, const char *what) {
    if (count <= pi_ds_zcount_most(bytes)) return 0;
    uint64_t allow = (uint64_t)pi_env_long("PAGEIN_DS_SAMPLE_ALLOWANCE", 1L << 22, 0, 1L << 40);
    return pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, UINT64_MAX, NULL,
                     "claims %" PRIu64 " samples in %" PRIu64 " bytes of %s (at most %" PRIu64
                     " a shard, PAGEIN_DS_SAMPLE_ALLOWANCE, or %u a compressed byte)",
                     count, bytes, what, allow, PI_DS_ROWS_PER_BYTE);
}

/* The allowance is the dataset's, not each shard's: N tiny shards of
 * highly compressible text would otherwise claim N times it (16 shards of
 * 719 bytes: 4 GB of orders). What compressed shards claim beyond
 * PI_DS_ROWS_PER_BYTE a compressed byte is summed into *excess and held
 * to the allowance. */
int pi_ds_zcount_total(const struct pi_dsshard *sh, uint64_t *excess) {
    uint64_t bytes = sh->src ? sh->src->size : 0;
    uint64_t vouched = bytes > UINT64_MAX / PI_DS_ROWS_PER_BYTE ? UINT64_MAX : bytes * PI_DS_ROWS_PER_BYTE;
    uint64_t over = sh->nsamples > vouched ? sh->nsamples - vouched : 0;
    uint64_t allow = (uint64_t)pi_env_long("PAGEIN_DS_SAMPLE_ALLOWANCE", 1L << 22, 0, 1L << 40);
    if (over && (pi_add_overflow(*excess, over, excess) || *excess > allow))
        return pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, UINT64_MAX, NULL,
                         "the dataset's compressed shards claim more than %" PRIu64
                         " samples beyond %u a compressed byte in all (PAGEIN_DS_SAMPLE_ALLOWANCE; this shard: %" PRIu64
                         " samples in %" PRIu64 " bytes)",
                         allow, PI_DS_ROWS_PER_BYTE, sh->nsamples, bytes);
    return 0;
}
