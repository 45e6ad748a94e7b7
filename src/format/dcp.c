/* dcp.c - one chunk of a DCP checkpoint: the torch.save blob at an entry's
 * (offset, length) of a `__RANK_N.distcp` file, parsed by the PyTorch
 * reader (torch.c, zip.c) as the self-contained zip it is (its offsets are
 * relative to the blob's start), then checked against the .metadata's
 * chunk: one tensor, the item's dtype, the chunk's shape, big-endian and
 * pickled non-tensors refused. Buffer in, no I/O (docs/FORMAT-DCP.md). */
#include "dcp.h"
#include "torch_internal.h"

#include <stdio.h>

/* Strides that give every element of the shape its own storage element:
 * taken by increasing stride, each dimension's stride (of those longer
 * than 1) exceeds the farthest element the smaller ones reach. Stricter
 * than disjointness for interleaved strides, which torch never writes. */
static int strides_disjoint(const uint64_t *shape, const int64_t *strides, uint32_t nd) {
    uint8_t used[PI_DCP_MAX_NDIM] = {0};
    uint64_t reach = 0; /* the farthest element index the dimensions taken so far reach */
    for (uint32_t k = 0; k < nd; k++) {
        uint32_t best = nd;
        for (uint32_t d = 0; d < nd; d++)
            if (!used[d] && shape[d] > 1 && (best == nd || strides[d] < strides[best])) best = d;
        if (best == nd) break;
        used[best] = 1;
        if (strides[best] <= 0 || (uint64_t)strides[best] <= reach) return 0;
        reach += (shape[best] - 1) * (uint64_t)strides[best]; /* torch.c bounded it inside the storage */
    }
    return 1;
}

static int blob_check(const struct pi_table *tab, const struct pi_dcp_item *it, const struct pi_dcp_chunk *c,
                      const char *where, const char *file, struct pi_dcp_blob *b) {
    const struct pi_torch_ext *x = tab->ext;
    RETURN_IF(tab->n != 1 || !x || x->n != 1, PAGEIN_E_BAD_INDEX,
              "%s: '%s': the blob at %s offset %llu holds %zu tensors, expected one", where, it->name, file,
              (unsigned long long)c->at, tab->n);
    const pagein_tensor *t = &tab->t[0];
    const struct pi_torch_rec *r = &x->r[0];
    RETURN_IF(tab->big_endian, PAGEIN_E_ENDIAN, "%s: '%s': the blob in %s is big-endian", where, it->name, file);
    RETURN_IF(t->dtype != it->dtype, PAGEIN_E_BAD_DTYPE, "%s: '%s': the blob in %s holds %s, the metadata says %s", where,
              it->name, file, pagein_dtype_get(t->dtype)->name, pagein_dtype_get(it->dtype)->name);
    RETURN_IF(t->ndim != it->ndim, PAGEIN_E_BAD_TENSOR_INFO, "%s: '%s': the blob in %s has %u dimensions, the chunk %u",
              where, it->name, file, t->ndim, it->ndim);
    for (uint32_t d = 0; d < t->ndim; d++)
        RETURN_IF(t->shape[d] != c->len[d], PAGEIN_E_BAD_TENSOR_INFO,
                  "%s: '%s': the blob in %s is %llu long in dimension %u, the chunk %llu", where, it->name, file,
                  (unsigned long long)t->shape[d], d, (unsigned long long)c->len[d]);
    uint64_t es = pagein_dtype_get(t->dtype)->bits / 8;
    b->dtype = t->dtype;
    b->ndim = t->ndim;
    b->data_off = r->storage_off + r->elem_offset * es; /* torch.c bounded it inside the storage */
    b->contiguous = !(t->flags & PAGEIN_TENSOR_NONCONTIGUOUS);
    uint64_t maxi = 0;
    for (uint32_t d = 0; d < t->ndim; d++) {
        b->shape[d] = t->shape[d];
        b->strides[d] = r->strides[d];
        if (t->shape[d]) maxi += (t->shape[d] - 1) * (uint64_t)r->strides[d]; /* torch.c: no overflow */
    }
    b->span = c->nelements ? (maxi + 1) * es : 0;
    /* every element its own bytes: an expanded view (stride 0) or strides
     * that overlap would claim more elements than the blob stores, and the
     * assembled tensor more bytes than the checkpoint holds */
    RETURN_IF(c->nelements && !strides_disjoint(b->shape, b->strides, t->ndim), PAGEIN_E_BAD_TENSOR_INFO,
              "%s: '%s': the blob in %s at offset %llu has overlapping or zero strides (%llu elements in %llu "
              "bytes of storage)",
              where, it->name, file, (unsigned long long)c->at, (unsigned long long)c->nelements,
              (unsigned long long)b->span);
    return 0;
}

int pi_dcp_blob_parse(const uint8_t *buf, size_t len, const struct pi_dcp_meta *m, const struct pi_dcp_item *it,
                      const struct pi_dcp_chunk *c, const char *where, struct pi_dcp_blob *b) {
    memset(b, 0, sizeof *b);
    const char *file = m->files[c->file];
    RETURN_IF(it->is_bytes, PAGEIN_E_INVALID, "%s: '%s' is not a tensor", where, it->name);
    RETURN_IF(it->ndim > PI_DCP_MAX_NDIM, PAGEIN_E_LIMIT, "%s: '%s': too many dimensions", where, it->name);
    struct pi_table tab;
    pi_table_init(&tab);
    int rc = pi_torch_parse(buf, len, len, 0, &tab);
    if (rc == 0) rc = pi_table_finish(&tab, NULL);
    if (rc < 0) {
        char pre[512];
        snprintf(pre, sizeof pre, "%s: '%s': the blob at %s bytes [%llu, %llu)", where, it->name, file,
                 (unsigned long long)c->at, (unsigned long long)(c->at + c->nbytes));
        pi_err_prefix(pre);
    } else {
        rc = blob_check(&tab, it, c, where, file, b);
    }
    pi_table_free(&tab);
    return rc;
}
