/* fuzz_arrow.c - the Arrow IPC reader (src/data/arrow.c) on untrusted
 * bytes: the input is a whole .arrow file or stream, opened through the
 * read callback (as from a file) and decoded batch by batch, every cell of
 * every column read back (within a work budget: a Null column may claim
 * many rows from no bytes). Inputs starting with '{' also go through the
 * save_to_disk state.json parser. Invariants: the index tiles inside the
 * input, rows add up, each decoded column has the batch's rows, cell
 * access never fails for rows in range. Then the same bytes through the
 * dataset-format row (ds_arrow.c): open, every group's ranges, decode and
 * every sample's fields (pi_ds_walk). White-box: includes the private
 * headers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/data/arrow.h"
#include "../src/data/dsformat.h"

extern const struct pi_dsformat pi_dsformat_arrow;

#define ASSERT(c) \
    do {          \
        if (!(c)) abort(); \
    } while (0)

static long budget;
static volatile uint64_t sink;

static void touch(const struct pi_arrow_col *c, uint64_t row, int depth) {
    if (budget-- <= 0) return;
    struct pi_arrow_val v;
    ASSERT(pi_arrow_get(c, row, &v) == 0);
    if (v.null) return;
    switch (c->f->kind) {
    case PI_ARROW_UTF8:
    case PI_ARROW_BINARY:
    case PI_ARROW_LARGE_UTF8:
    case PI_ARROW_LARGE_BINARY:
        ASSERT(v.p + v.n <= c->values + c->values_len);
        if (v.n) sink += v.p[0] + v.p[v.n - 1];
        break;
    case PI_ARROW_LIST:
    case PI_ARROW_LARGE_LIST:
    case PI_ARROW_FIXED_LIST:
        ASSERT(v.first + v.n <= v.child->length);
        for (uint64_t i = 0; i < v.n && budget > 0; i++) touch(v.child, v.first + i, depth + 1);
        break;
    case PI_ARROW_STRUCT:
        for (uint32_t i = 0; i < c->f->nchildren; i++) {
            ASSERT(c->children[i].length >= c->length);
            touch(&c->children[i], row, depth + 1);
        }
        break;
    case PI_ARROW_DICT:
    case PI_ARROW_UNION: { /* the value an index or a type id names: checked at decode */
        const struct pi_arrow_col *vc;
        uint64_t vr;
        ASSERT(pi_arrow_resolve(c, row, &vc, &vr) == 0);
        ASSERT(vr < vc->length);
        if (depth < 64) touch(vc, vr, depth + 1);
        break;
    }
    default: sink += v.u;
    }
}

struct src {
    const uint8_t *p;
    size_t n;
};
static int rd(void *ctx, uint64_t off, void *dst, size_t len) {
    const struct src *s = ctx;
    ASSERT(off <= s->n && len <= s->n - off); /* the reader never asks past the size */
    memcpy(dst, s->p + off, len);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size && data[0] == '{') {
        char **files;
        size_t n;
        if (pi_arrow_state_files((const char *)data, size, "state.json", &files, &n) == 0) {
            ASSERT(n > 0);
            for (size_t i = 0; i < n; i++) ASSERT(files[i][0] && !strchr(files[i], '/'));
            pi_arrow_names_free(files, n);
        }
        return 0;
    }
    struct src s = {data, size};
    struct pi_arrow a;
    int rc = pi_arrow_open(&a, "fuzz.arrow", size, rd, &s);
    if (rc < 0) {
        ASSERT(a.batches == NULL && a.name == NULL);
        ASSERT(rc == -12 || (rc <= PAGEIN_E_BASE && rc > PAGEIN_E_LAST));
        return 0;
    }
    a.max_batch_bytes = 64u << 20;
    uint64_t rows = 0;
    budget = 200000;
    for (size_t i = 0; i < a.nbatches; i++) {
        const struct pi_arrow_batch_ref *r = &a.batches[i];
        ASSERT(r->offset <= size && r->meta_len + r->body_len <= size - r->offset);
        ASSERT(r->first_row == rows);
        rows += r->rows;
        struct pi_arrow_batch b;
        /* every other batch: the odd columns only */
        uint32_t sel[64];
        size_t ns = 0;
        for (uint32_t c = 1; c < a.schema.nfields && ns < 64; c += 2) sel[ns++] = c;
        int all = (i % 2 == 0);
        rc = pi_arrow_decode(&a, i, data + r->offset, r->meta_len + r->body_len, all ? NULL : sel, all ? 0 : ns, &b);
        if (rc < 0) {
            ASSERT(rc == -12 || (rc <= PAGEIN_E_BASE && rc > PAGEIN_E_LAST));
            continue;
        }
        ASSERT(b.rows == r->rows && b.inflated <= a.max_batch_bytes);
        for (uint32_t c = 0; c < b.ncols; c++) {
            if (!b.cols[c].f) continue;
            ASSERT(b.cols[c].length == b.rows);
            for (uint64_t row = 0; row < b.rows && budget > 0; row++) touch(&b.cols[c], row, 0);
        }
        pi_arrow_batch_free(&b);
    }
    ASSERT(rows == a.nrows);
    pi_arrow_close(&a);

    struct pi_dsshard *sh = NULL;
    rc = pi_ds_open_memory(&sh, &pi_dsformat_arrow, data, size, "fuzz.arrow", NULL);
    if (rc == 0) {
        rc = pi_ds_walk(sh);
        ASSERT(rc == 0 || rc == -12 || (rc <= PAGEIN_E_BASE && rc > PAGEIN_E_LAST));
        pi_ds_shard_close(sh);
    }
    return 0;
}
