/* residency_model.c - page-cache residency, evict and lock of a model's
 * tensors and layers, on top of the per-file functions in file/residency.c.
 * Works on the files' mappings whatever the strategy: for `read`, this is
 * the page cache behind the private copy. */
#include "load.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* An assembled tensor's residency: the page cache behind its pieces, those
 * in file `file` only (SIZE_MAX: all), added into r. */
static int pieces_residency(const pagein_model *m, const pagein_tensor *t, size_t file, pagein_residency *r) {
    size_t n = pi_tensor_nranges(m, t);
    struct pi_range *p = pi_malloc((n ? n : 1) * sizeof *p);
    if (!p) return pi_err(-ENOMEM, "out of memory");
    n = pi_tensor_ranges(m, t, p);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (file != SIZE_MAX && p[i].file != file) continue;
        pagein_residency one;
        rc = pagein_file_residency(pagein_model_file(m, p[i].file), p[i].off, p[i].len, &one);
        if (rc == 0) pagein_residency_add(r, &one);
    }
    pi_free(p);
    return rc;
}

int pagein_model_tensor_residency(const pagein_model *m, const pagein_tensor *t, pagein_residency *r) {
    if (!m || !t || !r) return pi_err(PAGEIN_E_INVALID, "pagein_model_tensor_residency: NULL argument");
    const pagein_file *f = pagein_model_file(m, t->file);
    RETURN_IF(!f, PAGEIN_E_INVALID, "tensor '%s': file index %u out of range", t->name, t->file);
    memset(r, 0, sizeof *r);
    if (t->nbytes == 0) return 0;
    if (!(t->flags & PAGEIN_TENSOR_ASSEMBLED)) return pagein_file_residency(f, t->offset, t->nbytes, r);
    return pieces_residency(m, t, SIZE_MAX, r);
}

int pagein_model_tensor_file_residency(const pagein_model *m, const pagein_tensor *t, size_t file,
                                       pagein_residency *r) {
    if (!m || !t || !r) return pi_err(PAGEIN_E_INVALID, "pagein_model_tensor_file_residency: NULL argument");
    memset(r, 0, sizeof *r);
    if (file >= m->nfiles || t->nbytes == 0) return 0;
    if (!(t->flags & PAGEIN_TENSOR_ASSEMBLED))
        return t->file == file ? pagein_file_residency(m->files[file], t->offset, t->nbytes, r) : 0;
    return pieces_residency(m, t, file, r);
}

size_t pagein_model_file_tensors(const pagein_model *m, size_t file, uint64_t *bytes) {
    size_t n = 0;
    uint64_t b = 0;
    if (m && file < m->nfiles)
        for (size_t i = 0; i < m->tab.n; i++) {
            const pagein_tensor *t = &m->tab.t[i];
            if (!(t->flags & PAGEIN_TENSOR_ASSEMBLED)) {
                if (t->file == file) n++, b += t->nbytes;
                continue;
            }
            size_t nr = pi_tensor_nranges(m, t);
            struct pi_range one[8], *p = nr <= 8 ? one : pi_malloc(nr * sizeof *p);
            if (!p) continue; /* out of memory: uncounted */
            nr = pi_tensor_ranges(m, t, p);
            int here = 0;
            for (size_t k = 0; k < nr; k++)
                if (p[k].file == file) here = 1, b += p[k].len;
            n += (size_t)here;
            if (p != one) pi_free(p);
        }
    if (bytes) *bytes = b;
    return n;
}

int pagein_model_layer_residency(const pagein_model *m, int32_t layer, pagein_residency *r) {
    if (!m || !r) return pi_err(PAGEIN_E_INVALID, "pagein_model_layer_residency: NULL argument");
    memset(r, 0, sizeof *r);
    const pagein_tensor *const *ts = NULL;
    size_t n = pagein_model_layer_tensors(m, layer, &ts);
    for (size_t i = 0; i < n; i++) {
        pagein_residency one;
        FORWARD_IF(pagein_model_tensor_residency(m, ts[i], &one));
        pagein_residency_add(r, &one);
    }
    return 0;
}

int pagein_model_residency(const pagein_model *m, pagein_residency *r) {
    if (!m || !r) return pi_err(PAGEIN_E_INVALID, "pagein_model_residency: NULL argument");
    memset(r, 0, sizeof *r);
    size_t n = pagein_model_tensor_count(m);
    for (size_t i = 0; i < n; i++) {
        pagein_residency one;
        FORWARD_IF(pagein_model_tensor_residency(m, pagein_model_tensor_at(m, i), &one));
        pagein_residency_add(r, &one);
    }
    return 0;
}

/* ---- selections as merged byte ranges ---------------------------------- */

struct range {
    uint32_t file;
    uint64_t lo, hi;
};

static int range_cmp(const void *a, const void *b) {
    const struct range *x = a, *y = b;
    if (x->file != y->file) return x->file < y->file ? -1 : 1;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    return 0;
}

/* The byte ranges of the tensors (NULL = all of them), sorted by file and
 * offset, touching or overlapping ones merged. *out is pi_malloc'd. */
static int collect(const pagein_model *m, const pagein_tensor *const *t, size_t n, struct range **out,
                   size_t *nout) {
    if (!t) n = pagein_model_tensor_count(m);
    size_t nr = 0;
    for (size_t i = 0; i < n; i++) {
        const pagein_tensor *x = t ? t[i] : pagein_model_tensor_at(m, i);
        if (x) nr += pi_tensor_nranges(m, x);
    }
    struct range *r = pi_malloc((nr ? nr : 1) * sizeof *r);
    struct pi_range *one = pi_malloc((nr ? nr : 1) * sizeof *one);
    if (!r || !one) {
        pi_free(r), pi_free(one);
        return pi_err(-ENOMEM, "out of memory for %zu ranges", nr);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const pagein_tensor *x = t ? t[i] : pagein_model_tensor_at(m, i);
        if (!x || x->nbytes == 0) continue;
        size_t np = pi_tensor_ranges(m, x, one); /* an assembled tensor: its pieces */
        for (size_t j = 0; j < np; j++) r[k++] = (struct range){one[j].file, one[j].off, one[j].off + one[j].len};
    }
    pi_free(one);
    qsort(r, k, sizeof *r, range_cmp);
    size_t w = 0;
    for (size_t i = 0; i < k; i++) {
        if (w > 0 && r[w - 1].file == r[i].file && r[i].lo <= r[w - 1].hi) {
            if (r[i].hi > r[w - 1].hi) r[w - 1].hi = r[i].hi;
        } else {
            r[w++] = r[i];
        }
    }
    *out = r;
    *nout = w;
    return 0;
}

/* Tensors of the layers first..last, as one array (pi_malloc'd). */
static int layer_selection(const pagein_model *m, int32_t first, int32_t last, const pagein_tensor ***out,
                           size_t *nout) {
    int32_t L = pagein_model_layer_count(m);
    RETURN_IF(first > last || first < -1 || last > L, PAGEIN_E_RANGE,
              "layers %d..%d outside -1..%d (leading globals, layers 0..%d, trailing globals)", first, last, L,
              L - 1);
    size_t total = 0;
    for (int32_t l = first; l <= last; l++) {
        const pagein_tensor *const *ts;
        total += pagein_model_layer_tensors(m, l, &ts);
    }
    const pagein_tensor **sel = pi_malloc((total ? total : 1) * sizeof *sel);
    if (!sel) return pi_err(-ENOMEM, "out of memory");
    size_t k = 0;
    for (int32_t l = first; l <= last; l++) {
        const pagein_tensor *const *ts;
        size_t n = pagein_model_layer_tensors(m, l, &ts);
        for (size_t i = 0; i < n; i++) sel[k++] = ts[i];
    }
    *out = sel;
    *nout = k;
    return 0;
}

enum op { OP_EVICT, OP_LOCK, OP_UNLOCK };

static int apply(const pagein_model *m, const pagein_tensor *const *t, size_t n, enum op op) {
    if (!m) return pi_err(PAGEIN_E_INVALID, "NULL model");
    struct range *r = NULL;
    size_t nr = 0;
    FORWARD_IF(collect(m, t, n, &r, &nr));
    int rc = 0;
    size_t i;
    for (i = 0; i < nr; i++) {
        const pagein_file *f = pagein_model_file(m, r[i].file);
        if (!f) {
            rc = pi_err(PAGEIN_E_INVALID, "file index %u out of range", r[i].file);
            break;
        }
        uint64_t len = r[i].hi - r[i].lo;
        switch (op) {
        case OP_EVICT: rc = pagein_file_evict(f, r[i].lo, len); break;
        case OP_LOCK: rc = pagein_file_lock(f, r[i].lo, len); break;
        case OP_UNLOCK: rc = pagein_file_unlock(f, r[i].lo, len); break;
        }
        if (rc < 0) break;
    }
    if (rc < 0 && op == OP_LOCK) {
        /* Undo what this call locked; keep the first error's detail. */
        char detail[1024];
        snprintf(detail, sizeof detail, "%s", pagein_last_error_detail());
        for (size_t j = 0; j < i; j++) {
            const pagein_file *f = pagein_model_file(m, r[j].file);
            if (f) pagein_file_unlock(f, r[j].lo, r[j].hi - r[j].lo);
        }
        pi_err(rc, "%s", detail);
    }
    pi_free(r);
    return rc;
}

int pagein_model_evict_tensors(const pagein_model *m, const pagein_tensor *const *t, size_t n) {
    return apply(m, t, n, OP_EVICT);
}
int pagein_model_lock_tensors(const pagein_model *m, const pagein_tensor *const *t, size_t n) {
    return apply(m, t, n, OP_LOCK);
}
int pagein_model_unlock_tensors(const pagein_model *m, const pagein_tensor *const *t, size_t n) {
    return apply(m, t, n, OP_UNLOCK);
}

static int apply_layers(const pagein_model *m, int32_t first, int32_t last, enum op op) {
    if (!m) return pi_err(PAGEIN_E_INVALID, "NULL model");
    const pagein_tensor **sel = NULL;
    size_t n = 0;
    FORWARD_IF(layer_selection(m, first, last, &sel, &n));
    int rc = n ? apply(m, sel, n, op) : 0;
    pi_free(sel);
    return rc;
}

int pagein_model_evict_layers(const pagein_model *m, int32_t first, int32_t last) {
    return apply_layers(m, first, last, OP_EVICT);
}
int pagein_model_lock_layers(const pagein_model *m, int32_t first, int32_t last) {
    return apply_layers(m, first, last, OP_LOCK);
}
int pagein_model_unlock_layers(const pagein_model *m, int32_t first, int32_t last) {
    return apply_layers(m, first, last, OP_UNLOCK);
}
