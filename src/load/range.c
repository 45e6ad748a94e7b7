/* range.c - the shared primitives of the load strategies: byte ranges of a
 * model (a layer group's ranges, their order) and the fill rows that bring
 * ranges into memory.
 *
 * The files of src/load/ call down only (scripts/layers.sh checks it on
 * the built objects):
 *
 *   model.c (open, close) -> strategy.c (the table) -> pager.c, read.c
 *   access.c (waits, load_tensors) -> pager.c -> populate.c, stream.c -> range.c
 *
 * A fill row (struct pi_fill, load.h) is one kind of memory a strategy
 * pages ranges into: pi_fill_mapping (populate.c: the file's mapping,
 * paged in by the pool) and pi_fill_buffers (stream.c: anonymous buffers
 * read through the range engine, for files without a mapping). The one
 * prefetch machine (pager.c) and the lazy waits (access.c) run over a row
 * and never ask which one it is.
 */
#include "load.h"

#include <stdio.h>

int pi_range_cmp(const void *a, const void *b) {
    const struct pi_range *x = a, *y = b;
    if (x->file != y->file) return x->file < y->file ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

size_t pi_model_group_ranges(const pagein_model *m, int32_t g, struct pi_range *r) {
    size_t k = 0;
    for (size_t i = m->lstart[g]; i < m->lstart[g + 1]; i++) k += pi_tensor_load_ranges(m, m->lt[i], r + k);
    return k;
}

int pi_fill_group(const struct pi_fill *fill, pagein_model *m, int32_t g, uint64_t budget) {
    size_t n = pi_group_nranges(m, g);
    struct pi_range *r = pi_malloc((n ? n : 1) * sizeof *r);
    if (!r) return pi_err(-ENOMEM, "out of memory");
    size_t k = pi_model_group_ranges(m, g, r);
    int rc = fill->load(m, r, k, budget);
    pi_free(r);
    return rc;
}

int pi_model_no_data(const pagein_model *m, uint32_t file, uint64_t off) {
    const pagein_file *f = file < m->nfiles ? m->files[file] : NULL;
    const pagein_tensor *t = NULL;
    for (size_t i = 0; f && i < m->tab.n && !t; i++) /* the tensor at (file, off): an error path, a scan is fine */
        if (m->tab.t[i].file == file && off >= m->tab.t[i].offset && off - m->tab.t[i].offset < m->tab.t[i].nbytes)
            t = &m->tab.t[i];
    char what[300] = "";
    if (t) snprintf(what, sizeof what, "tensor '%.*s' of ", (int)PI_MIN(t->name_len, 200), t->name);
    return pi_err(PAGEIN_E_UNSUPPORTED,
                  "%s%s: opened header-only (strategy lazy on a source that cannot be mapped): tensor data is not "
                  "in memory and has no pointer; read it with pagein_tensor_copy, or open the model with strategy "
                  "read, prefetch or auto",
                  what, f ? f->path : "?");
}
