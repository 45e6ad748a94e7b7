/* fuzz_parquet_page.c - a column chunk's pages on untrusted bytes: page
 * headers, dictionary pages, data pages v1/v2, repetition/definition
 * levels, every value encoding and every codec path. The first 8 bytes
 * describe the column: type, codec, max definition level, max repetition
 * level and the list's empty level, FIXED length, and the chunk's value
 * count; the rest is the chunk. Each input is decoded twice into one
 * reused column and scratch (as a reader decodes chunk after chunk): as
 * described, then as the other kind (a list read as a scalar, a scalar as
 * a list where the levels allow) with another type. White-box: includes
 * src/data/parquet.h. */
#include <stdint.h>
#include <string.h>

#include "../src/data/parquet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 8) return 0;
    struct pi_pq_leaf L;
    memset(&L, 0, sizeof L);
    L.path = L.field = (char *)"fuzz";
    L.type = data[0] & 7;
    int codec = data[1] & 7;
    L.max_def = data[2] & 7;
    L.max_rep = data[3] & 1;
    L.list_def = (data[3] >> 1) & 7;
    L.kind = L.max_rep ? PI_PQ_LIST : PI_PQ_SCALAR;
    if (L.kind == PI_PQ_SCALAR) L.list_def = -1;
    if (L.kind == PI_PQ_LIST && L.list_def >= L.max_def) return 0;
    L.type_length = (int32_t)(data[4] | data[5] << 8) % 64 + 1;
    int64_t nvalues = data[6] | data[7] << 8;
    struct pi_pq_column c;
    struct pi_pq_scratch sc;
    memset(&c, 0, sizeof c);
    memset(&sc, 0, sizeof sc);
    for (int pass = 0; pass < 3; pass++) {
        if (pass == 2) { /* the same pages as a NESTED leaf: levels kept, rows by repetition level 0 */
            L.kind = PI_PQ_NESTED;
            L.max_rep = data[3] & 3;
            if (L.max_rep > L.max_def) L.max_rep = L.max_def;
            L.list_def = -1;
        } else if (pass == 1) {
            if (L.kind == PI_PQ_LIST) {
                L.kind = PI_PQ_SCALAR;
                L.max_rep = 0;
                L.list_def = -1;
            } else if (L.max_def > 0) {
                L.kind = PI_PQ_LIST;
                L.max_rep = 1;
                L.list_def = 0;
            }
            L.type = (L.type + 1 + (data[4] & 3)) & 7;
        }
        if (pi_pq_decode_pages_into(&L, codec, nvalues, -1, data + 8, size - 8, "fuzz", &c, &sc) == 0) {
            uint64_t b, e;
            for (uint64_t r = 0; r < c.nrows && c.kind != PI_PQ_NESTED; r++) {
                pi_pq_row(&c, r, &b, &e);
                if (b > e || e > c.nelems) __builtin_trap();
            }
            for (uint64_t r = 0; r < c.nrows && c.kind == PI_PQ_NESTED; r++)
                if (c.rowslot[r] >= c.rowslot[r + 1] || c.rowval[r] > c.rowval[r + 1] || c.rowslot[r + 1] > c.nslots ||
                    c.rowval[r + 1] > c.nelems)
                    __builtin_trap();
            if (!c.width && c.voff[c.nelems] != c.nbytes) __builtin_trap();
            if (c.kind == PI_PQ_SCALAR && c.row_valid != c.elem_valid) __builtin_trap();
        }
    }
    pi_pq_column_free(&c);
    pi_pq_scratch_free(&sc);
    return 0;
}
