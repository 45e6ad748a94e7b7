/* access.c - the model's public access calls: the layer cursor
 * (pagein_layer_wait/_done, pagein_tensor_wait), tensor data pointers and
 * pagein_model_load_tensors/_layers.
 *
 * Each asks the model's strategy row (its flags, as data) and then calls
 * down: to the prefetch pager when there is one (pager.c), else, for a
 * mapped model (lazy, populate), to the mapping's fill row and populate
 * primitives (populate.c, range.c). Nothing below calls back here.
 */
#include "load.h"

#include <stdio.h>

int pagein_layer_wait(pagein_model *m, int32_t layer) {
    if (!m) return pi_err(PAGEIN_E_INVALID, "pagein_layer_wait: NULL model");
    RETURN_IF(layer < -1 || layer > m->nlayers, PAGEIN_E_RANGE, "layer %d outside [-1, %d]", layer, m->nlayers);
    int32_t g = layer + 1;
    if (m->pager) FORWARD_IF(pi_pager_wait(m, g));
    else if (!(pi_model_flags(m) & PI_ST_RESIDENT)) FORWARD_IF(pi_fill_group(&pi_fill_mapping, m, g, 0)); /* lazy: now, in parallel */
    return pi_assemble_group(m, g); /* assembled tensors: built from their pieces, now resident */
}

int pagein_tensor_wait(pagein_model *m, const pagein_tensor *t) {
    if (!m || !t) return pi_err(PAGEIN_E_INVALID, "pagein_tensor_wait: NULL argument");
    uintptr_t a = (uintptr_t)m->tab.t, x = (uintptr_t)t;
    RETURN_IF(x < a || x >= a + m->tab.n * sizeof *t || (x - a) % sizeof *t, PAGEIN_E_INVALID,
              "pagein_tensor_wait: tensor %.*s is not from this model", (int)PI_MIN(t->name_len, 200), t->name);
    if (m->pager && (t->flags & PAGEIN_TENSOR_ASSEMBLED)) /* its pieces: the whole layer's ranges */
        FORWARD_IF(pi_pager_wait(m, m->tgroup[t - m->tab.t]));
    else if (m->pager) return pi_pager_wait_tensor(m, m->tgroup[t - m->tab.t], t);
    else if (!(pi_model_flags(m) & PI_ST_RESIDENT)) return pagein_model_load_tensors(m, &t, 1);
    return pi_assemble(m, &t, 1);
}

int pagein_model_tensor_data(pagein_model *m, const pagein_tensor *t, const void **data) {
    if (data) *data = NULL;
    if (!m || !t || !data) return pi_err(PAGEIN_E_INVALID, "pagein_model_tensor_data: NULL argument");
    uintptr_t a = (uintptr_t)m->tab.t, x = (uintptr_t)t;
    RETURN_IF(x < a || x >= a + m->tab.n * sizeof *t || (x - a) % sizeof *t, PAGEIN_E_INVALID,
              "pagein_model_tensor_data: tensor %.*s is not from this model", (int)PI_MIN(t->name_len, 200), t->name);
    /* a header-only model (lazy over remote files) has no bytes to point at */
    if (t->nbytes && !t->data && (pi_model_flags(m) & PI_ST_HEADERS_ONLY) && !m->files[t->file]->mapped)
        return pi_model_no_data(m, t->file, t->offset);
    FORWARD_IF(pi_pager_ensure_tensor(m, t));
    if (pi_assemble_pending(m, t) && !m->pager && !(pi_model_flags(m) & PI_ST_RESIDENT)) {
        int rc = pagein_model_load_tensors(m, &t, 1); /* lazy: its pieces paged in in parallel, then built */
        if (rc < 0 && !strstr(pagein_last_error_detail(), t->name)) {
            char pre[300];
            snprintf(pre, sizeof pre, "tensor '%.*s'", (int)PI_MIN(t->name_len, 200), t->name);
            pi_err_prefix(pre);
        }
        FORWARD_IF(rc);
    } else {
        FORWARD_IF(pi_assemble(m, &t, 1));
    }
    *data = t->data;
    return 0;
}

int pagein_model_read_slice(pagein_model *m, const pagein_tensor *t, const uint64_t *start, const uint64_t *count,
                            void *dst, size_t len) {
    if (!m || !t || (!dst && len)) return pi_err(PAGEIN_E_INVALID, "pagein_model_read_slice: NULL argument");
    uintptr_t a = (uintptr_t)m->tab.t, x = (uintptr_t)t;
    RETURN_IF(x < a || x >= a + m->tab.n * sizeof *t || (x - a) % sizeof *t, PAGEIN_E_INVALID,
              "pagein_model_read_slice: tensor %.*s is not from this model", (int)PI_MIN(t->name_len, 200), t->name);
    const void *src = NULL;
    if (!(t->flags & PAGEIN_TENSOR_ASSEMBLED)) { /* its own bytes, made valid */
        if (t->nbytes && !t->data && (pi_model_flags(m) & PI_ST_HEADERS_ONLY) && !m->files[t->file]->mapped)
            return pi_model_no_data(m, t->file, t->offset);
        FORWARD_IF(pi_pager_ensure_tensor(m, t));
        src = t->data;
    }
    return pi_read_box(m, t, src, start, count, dst, len);
}

int pagein_layer_done(pagein_model *m, int32_t layer) {
    if (!m) return pi_err(PAGEIN_E_INVALID, "pagein_layer_done: NULL model");
    RETURN_IF(layer < -1 || layer > m->nlayers, PAGEIN_E_RANGE, "layer %d outside [-1, %d]", layer, m->nlayers);
    int32_t g = layer + 1;
    if (m->pager) return pi_pager_done(m, g);
    if (m->opts.budget_bytes && !(pi_model_flags(m) & PI_ST_PRIVATE)) pi_model_release_group(m, g);
    return 0;
}

int pagein_model_load_tensors(pagein_model *m, const pagein_tensor *const *t, size_t n) {
    if (!m) return pi_err(PAGEIN_E_INVALID, "pagein_model_load_tensors: NULL model");
    if (pi_model_flags(m) & PI_ST_PRIVATE) return 0;
    if (m->streamed) { /* memory filled by reads: read what is not there yet, in one engine run */
        size_t cnt = t ? n : m->tab.n;
        const pagein_tensor **v = pi_malloc((cnt ? cnt : 1) * sizeof *v);
        if (!v) return pi_err(-ENOMEM, "out of memory");
        for (size_t i = 0; i < cnt; i++) {
            const pagein_tensor *x = t ? t[i] : &m->tab.t[i];
            if (!x || x->file >= m->nfiles || x != pi_table_find(&m->tab, x->name, x->name_len)) {
                pi_free(v);
                return pi_err(PAGEIN_E_INVALID, "load_tensors: tensor %zu is not from this model", i);
            }
            v[i] = x;
        }
        int rc = pi_pager_ensure_tensors(m, v, cnt);
        pi_free(v);
        return rc;
    }
    size_t cnt = t ? n : m->nfiles, nr = 0;
    for (size_t i = 0; t && i < n; i++) {
        if (!t[i] || t[i]->file >= m->nfiles || t[i] != pi_table_find(&m->tab, t[i]->name, t[i]->name_len))
            return pi_err(PAGEIN_E_INVALID, "load_tensors: tensor %zu is not from this model", i);
        nr += pi_tensor_nranges(m, t[i]);
    }
    if (!t) nr = cnt;
    struct pi_range *r = pi_malloc((nr ? nr : 1) * sizeof *r);
    if (!r) return pi_err(-ENOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < cnt; i++) {
        if (t) k += pi_tensor_load_ranges(m, t[i], r + k); /* an assembled tensor: its pieces (none once built) */
        else r[k++] = (struct pi_range){(uint32_t)i, 0, m->files[i]->len};
    }
    int rc = pi_model_populate(m, r, k);
    pi_free(r);
    return rc < 0 ? rc : pi_assemble(m, t, n);
}

int pagein_model_load_layers(pagein_model *m, int32_t first, int32_t last) {
    if (!m) return pi_err(PAGEIN_E_INVALID, "pagein_model_load_layers: NULL model");
    RETURN_IF(first < -1 || last > m->nlayers || first > last, PAGEIN_E_RANGE,
              "load_layers: [%d, %d] outside [-1, %d]", first, last, m->nlayers);
    size_t a = m->lstart[first + 1], b = m->lstart[last + 2];
    return pagein_model_load_tensors(m, m->lt + a, b - a);
}
