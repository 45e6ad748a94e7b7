/* ds_records.c - the fixed-records row: a shard of record_bytes-byte
 * records, each one sample with one binary field "data". Never detected
 * (records have no signature): named ("records") or opened by
 * pagein_dataset_open_records. */
#include "dsformat.h"

#include <inttypes.h>

struct rec {
    uint64_t rb;
    struct pi_dscol col;
};

static int rec_open(struct pi_dsshard *sh, const struct pi_dsopen *a) {
    if (!a->record_bytes) return pi_err(PAGEIN_E_INVALID, "%s: records need a record size", sh->name);
    if (sh->src->size % a->record_bytes)
        return pi_err(PAGEIN_E_BAD_DATASET, "%s: %" PRIu64 " bytes is not a whole number of %" PRIu64 "-byte records",
                      sh->name, sh->src->size, a->record_bytes);
    static const char *const only[] = {"data"};
    FORWARD_IF(pi_ds_col_flat(sh, a, only, 1, NULL));
    struct rec *r = pi_calloc(1, sizeof *r);
    if (!r) return pi_err(-ENOMEM, "%s: out of memory", sh->name);
    r->rb = a->record_bytes;
    r->col = (struct pi_dscol){.name = "data", .type = PI_DT_BINARY};
    pi_ds_shard_set(sh, r, &r->col, 1, sh->src->size / a->record_bytes);
    return 0;
}

static void rec_close(struct pi_dsshard *sh) { pi_free(sh->impl); }

static int rec_locate(const struct pi_dsshard *sh, uint64_t i, uint64_t *off, uint64_t *len) {
    const struct rec *r = sh->impl;
    *off = i * r->rb;
    *len = r->rb;
    return 0;
}

static int rec_sample(const struct pi_dsshard *sh, uint64_t i, const uint8_t *p, uint64_t len, struct pi_dsfield *f,
                      size_t cap) {
    (void)i;
    if (cap >= 1) f[0] = (struct pi_dsfield){.name = "data", .col = 0, .type = PI_DT_BINARY, .data = p, .nbytes = len};
    return 1;
}

static int rec_detect(const char *name, const uint8_t *h, size_t nh, const uint8_t *t, size_t nt, uint64_t size) {
    (void)name, (void)h, (void)nh, (void)t, (void)nt, (void)size;
    return 0;
}

const struct pi_dsformat pi_dsformat_records = {
    .name = "records",
    .detect = rec_detect,
    .open = rec_open,
    .close = rec_close,
    .locate = rec_locate,
    .sample = rec_sample,
};
