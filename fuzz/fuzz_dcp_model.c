/* fuzz_dcp_model.c - a torch DCP checkpoint opened as a model by the format
 * table's dcp row (src/format/dcp_model.c): the .metadata, then each data
 * file's bytes (every chunk's torch.save blob parsed and checked against
 * its chunk), then the model's table and the assembled tensors' pieces.
 * Input: u32 LE length of the .metadata, the .metadata, then the data
 * files in the metadata's file order, each as u32 LE length + bytes (a
 * file not given is empty). White-box: uses src/format/ headers. Seeds
 * (fuzz/corpus/dcp_model/): tests/data/dcp's torch-written checkpoints in
 * that layout, written by tests/data/dcp/fuzz_seeds.py. */
#include "../src/format/dcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4 || u32(data) > size - 4) return 0;
    size_t ml = u32(data);
    const uint8_t *meta = data + 4, *rest = data + 4 + ml;
    size_t left = size - 4 - ml;
    const struct pi_format *row = &pi_format_dcp;
    void *state = NULL;
    const char *const *names = NULL;
    size_t nf = 0;
    if (row->dir_open(meta, ml, "fuzz/.metadata", &state, &names, &nf) < 0) return 0;
    const uint8_t *fbuf[64] = {0};
    uint64_t flen[64] = {0};
    int rc = nf <= 64 ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < nf; i++) {
        if (left >= 4 && u32(rest) <= left - 4) {
            flen[i] = u32(rest);
            fbuf[i] = rest + 4;
            rest += 4 + flen[i];
            left -= 4 + flen[i];
        } else {
            fbuf[i] = (const uint8_t *)"";
        }
        rc = row->dir_file(state, (uint32_t)i, fbuf[i], flen[i]);
    }
    struct pi_table t;
    struct pi_pieces p;
    pi_table_init(&t);
    memset(&p, 0, sizeof p);
    if (rc == 0) rc = row->dir_table(state, &t, &p);
    if (rc == 0) rc = pi_table_finish(&t, NULL);
    for (size_t i = 0; rc == 0 && i < t.n; i++) { /* invariants of a model's table */
        const pagein_tensor *x = &t.t[i];
        if (x->file >= nf && x->nbytes) __builtin_trap();
        if (!(x->flags & PAGEIN_TENSOR_ASSEMBLED)) {
            if (x->nbytes && (x->offset > flen[x->file] || x->nbytes > flen[x->file] - x->offset)) __builtin_trap();
            continue;
        }
        for (uint32_t k = p.first[i]; k < p.first[i + 1]; k++) {
            const struct pi_piece *q = &p.p[k];
            if (q->file >= nf || q->off > flen[q->file] || q->span > flen[q->file] - q->off) __builtin_trap();
            for (uint32_t d = 0; d < x->ndim; d++)
                if (q->at[d] > x->shape[d] || q->len[d] > x->shape[d] - q->at[d]) __builtin_trap();
        }
    }
    pi_table_free(&t);
    pi_arena_free(&p.arena);
    row->dir_free(state);
    return 0;
}
