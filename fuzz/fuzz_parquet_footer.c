/* fuzz_parquet_footer.c - the Parquet footer (Thrift compact protocol,
 * FileMetaData, the schema -> leaf columns) on untrusted bytes, and then
 * every column chunk the footer names, decoded from the same bytes: the
 * input is a whole file. Chunks declaring more than 1<<16 values are
 * skipped (decode cost is linear in the chunk's bytes plus its declared
 * values; the fuzzer keeps the second small). Also drives the Thrift
 * skipper over the raw input, the offset indexes and their first pages one
 * by one, and the dataset-format row (ds_parquet.c:
 * open over memory, every group's ranges, decode and fields) when every
 * chunk is that small, and the row's parts (the global order's page runs,
 * where the file has a page index): the part of each group's first and
 * last row, read from the input as the pipeline would, decoded and every
 * row's fields. White-box: includes src/data/parquet.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/data/dsformat.h"
#include "../src/data/parquet.h"
#include "../src/data/thrift.h"

/* The part of group g holding its row i, as the pipeline reads it. */
static void one_part(const struct pi_dsshard *sh, const uint8_t *data, size_t size, uint64_t g, uint64_t i) {
    struct pi_dsgroupinfo gi;
    struct pi_dsrange r[64];
    struct pi_dsbuf b[64];
    int n = sh->fmt->part(sh, g, i, &gi, r, 64);
    if (n <= 0 || n > 64) return;
    for (int k = 0; k < n; k++) {
        if (r[k].off > size || r[k].len > size - r[k].off) return;
        b[k].p = data + r[k].off;
        b[k].len = r[k].len;
    }
    struct pi_dsgroup grp = {.g = g, .info = gi, .bufs = b, .nbufs = (size_t)n, .part = 1};
    if (sh->fmt->decode(sh, &grp) < 0) return;
    struct pi_dsfield f[16];
    for (uint64_t s = 0; s < gi.count && s < 4096; s++) (void)sh->fmt->fields(sh, &grp, s, f, 16);
    sh->fmt->group_free(sh, &grp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* the Thrift reader alone: any struct */
    struct pi_thrift t;
    pi_thrift_init(&t, data, size);
    (void)pi_thrift_skip(&t, PI_TT_STRUCT);

    uint64_t need;
    if (pi_pq_tail_need(data, size, size, "fuzz", &need) < 0) return 0;
    struct pi_pq_file *f = NULL;
    if (pi_pq_open(&f, data, size, size, "fuzz") < 0) return 0;
    int small = 1;
    for (size_t g = 0; g < f->ngroups; g++)
        for (size_t c = 0; c < f->nleaves; c++) {
            const struct pi_pq_chunk *C = &f->groups[g].chunks[c];
            if (C->num_values > (1 << 16) || f->groups[g].num_rows > (1 << 16)) {
                small = 0;
                continue;
            }
            uint64_t off, len;
            if (pi_pq_chunk_range(f, g, c, &off, &len) < 0) __builtin_trap();
            if (off + len > size) __builtin_trap(); /* checked at open */
            struct pi_pq_column col;
            if (pi_pq_decode_chunk(f, g, c, data + off, (size_t)len, &col) == 0) {
                /* the invariants per-row access relies on */
                uint64_t b, e;
                for (uint64_t r = 0; r < col.nrows && col.kind != PI_PQ_NESTED; r++) {
                    pi_pq_row(&col, r, &b, &e);
                    if (b > e || e > col.nelems) __builtin_trap();
                }
                /* a NESTED column: rows start at increasing slots and values */
                for (uint64_t r = 0; r < col.nrows && col.kind == PI_PQ_NESTED; r++)
                    if (col.rowslot[r] >= col.rowslot[r + 1] || col.rowval[r] > col.rowval[r + 1] ||
                        col.rowslot[r + 1] > col.nslots || col.rowval[r + 1] > col.nelems)
                        __builtin_trap();
                if (!col.width && col.voff[col.nelems] != col.nbytes) __builtin_trap();
                if (col.nrows != (uint64_t)f->groups[g].num_rows) __builtin_trap();
                pi_pq_column_free(&col);
            }
            /* the offset index, and its first pages one by one */
            struct pi_pq_page_loc *loc = NULL;
            size_t n = 0;
            if (C->offset_index_offset > 0 &&
                pi_pq_offset_index(f, g, c, data + C->offset_index_offset, (size_t)C->offset_index_length, &loc, &n) == 0) {
                for (size_t a = 0; a < n && a < 8; a++) {
                    int64_t r1 = a + 1 < n ? loc[a + 1].first_row : f->groups[g].num_rows;
                    if ((uint64_t)loc[0].offset < C->off) __builtin_trap(); /* checked */
                    if (pi_pq_decode_page_run(f, g, c, data + C->off, (size_t)((uint64_t)loc[0].offset - C->off),
                                              data + loc[a].offset, (size_t)loc[a].size, loc[a].first_row,
                                              r1 - loc[a].first_row, &col) == 0)
                        pi_pq_column_free(&col);
                }
                pi_free(loc);
            }
        }
    /* the fields the row can hold (it refuses a file with others unless
     * columns= leaves them out): scalars and lists of numbers whose
     * elements cannot be null */
    char *cols[16];
    size_t ncols = 0;
    for (size_t c = 0; c < f->nleaves && ncols < 16; c++) {
        const struct pi_pq_leaf *L = &f->leaves[c];
        if (L->unsupported || (L->kind == PI_PQ_LIST && (L->type == PI_PQ_BYTE_ARRAY || L->type == PI_PQ_FIXED ||
                                                         L->type == PI_PQ_INT96 || L->max_def > L->list_def + 1)))
            continue;
        if (!(cols[ncols] = strdup(L->field))) break;
        ncols++;
    }
    pi_pq_close(f);
    struct pi_dsshard *sh = NULL;
    struct pi_dsopen a = {.columns = (const char *const *)cols, .ncolumns = ncols};
    if (small && (pi_ds_open_memory(&sh, &pi_dsformat_parquet, data, size, "fuzz", NULL) == 0 ||
                  (ncols && pi_ds_open_memory(&sh, &pi_dsformat_parquet, data, size, "fuzz", &a) == 0))) {
        (void)pi_ds_walk(sh);
        for (uint64_t g = 0; g < sh->ngroups && g < 64; g++) {
            struct pi_dsgroupinfo gi;
            if (sh->fmt->group(sh, g, &gi) < 0 || !gi.count) continue;
            one_part(sh, data, size, g, 0);
            one_part(sh, data, size, g, gi.count - 1);
        }
        pi_ds_shard_close(sh);
    }
    for (size_t k = 0; k < ncols; k++) free(cols[k]);
    return 0;
}
