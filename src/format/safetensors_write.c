/* safetensors_write.c - the safetensors writer, byte-identical to the
 * official Rust serializer (`prepare()` + `serialize()`,
 * ../shared/specs/SAFETENSORS.md section 4):
 *
 *  - tensors sorted by dtype descending in the crate's enum order (the
 *    dtype table's st_order), then by name (bytewise);
 *  - compact JSON: {"__metadata__":{...},"name":{"dtype":"F32","shape":[..],
 *    "data_offsets":[b,e]},...} with serde_json's string escaping;
 *  - the header padded with spaces so that 8 + N is a multiple of 8 (or of
 *    opts->align, e.g. 4096 for O_DIRECT readers);
 *  - data back to back in that order.
 *
 * The file goes through pi_atomic_* (temp file, fsync, rename, fsync dir).
 * Tensors given by a fill callback are produced in chunks of at most
 * FILL_CHUNK bytes, so writing a multi-GB file needs little memory. */
#include "format.h"
#include "../io/io.h"

#include <stdio.h>
#include <stdlib.h>

#define FILL_CHUNK ((size_t)4 << 20)
#define ST_MAX_HEADER 100000000ull

#define sb_room pi_buf_room
#define sb_put pi_buf_put

static void sb_lit(struct pi_buf *s, const char *str) { sb_put(s, str, strlen(str)); }

static void sb_u64(struct pi_buf *s, uint64_t v) {
    char tmp[24];
    int k = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    sb_put(s, tmp, (size_t)k);
}

static void sb_quoted(struct pi_buf *s, const char *str, size_t k) {
    size_t q = pi_json_quoted_len(str, k);
    char *d = sb_room(s, q);
    if (!d) return;
    pi_json_quote(d, str, k);
    s->n += q;
}

struct wt {
    const pagein_write_tensor *t;
    uint64_t nbytes;
};

static int wt_cmp(const void *a, const void *b) {
    const struct wt *x = a, *y = b;
    uint32_t ox = pagein_dtype_get(x->t->dtype)->st_order, oy = pagein_dtype_get(y->t->dtype)->st_order;
    if (ox != oy) return ox > oy ? -1 : 1;
    return strcmp(x->t->name, y->t->name);
}

/* Rejects a repeated string in names[0..n) (n small or sorted is not
 * assumed: a hash set, proportional to n). */
static int check_unique(const char *const *names, size_t n, const char *what) {
    size_t cap = 16;
    while (cap < n * 2) cap *= 2;
    uint32_t *h = pi_calloc(cap, sizeof *h);
    if (!h) return pi_err(-ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        size_t l = strlen(names[i]);
        size_t s = pi_hash_bytes(names[i], l) & (cap - 1);
        while (h[s]) {
            if (strcmp(names[h[s] - 1], names[i]) == 0) {
                rc = pi_err(PAGEIN_E_DUPLICATE, "duplicate %s '%s'", what, names[i]);
                break;
            }
            s = (s + 1) & (cap - 1);
        }
        h[s] = (uint32_t)i + 1;
    }
    pi_free(h);
    return rc;
}

static int write_data(struct pi_atomic_file *a, const struct wt *w, uint8_t *chunk, size_t chunk_len) {
    const pagein_write_tensor *t = w->t;
    if (w->nbytes == 0) return 0;
    if (t->data) return pi_atomic_write(a, t->data, (size_t)w->nbytes);
    for (uint64_t off = 0; off < w->nbytes;) {
        size_t k = (size_t)PI_MIN((uint64_t)chunk_len, w->nbytes - off);
        int rc = t->fill(t->fill_ctx, chunk, off, k);
        if (rc < 0) {
            if (!pagein_last_error_detail()[0])
                pi_err(rc, "tensor '%s': fill callback failed at byte %llu", t->name, (unsigned long long)off);
            return rc;
        }
        FORWARD_IF(pi_atomic_write(a, chunk, k));
        off += k;
    }
    return 0;
}

int pagein_safetensors_write(const char *path, const pagein_write_tensor *tensors, size_t n,
                             const pagein_write_opts *opts) {
    pi_err_clear();
    RETURN_IF(!path || (n && !tensors), PAGEIN_E_INVALID, "pagein_safetensors_write: NULL argument");
    pagein_write_opts o = PAGEIN_WRITE_OPTS_INIT;
    FORWARD_IF(pi_opts_in(&o, sizeof o, opts, "pagein_safetensors_write"));
    uint64_t align = o.align ? o.align : 8;
    RETURN_IF(align < 8 || (align & (align - 1)) || align > ((uint64_t)1 << 30), PAGEIN_E_BAD_ALIGNMENT,
              "align %llu: expected a power of two between 8 and 2^30", (unsigned long long)o.align);
    RETURN_IF(o.n_meta && (!o.meta_keys || !o.meta_values), PAGEIN_E_INVALID, "n_meta %zu without keys/values",
              o.n_meta);
    for (size_t i = 0; i < o.n_meta; i++)
        RETURN_IF(!o.meta_keys[i] || !o.meta_values[i], PAGEIN_E_INVALID, "metadata entry %zu is NULL", i);

    int rc = 0;
    struct pi_buf s = {0};
    uint8_t *chunk = NULL;
    const char **names = NULL;
    struct wt *w = pi_calloc(n ? n : 1, sizeof *w);
    names = pi_calloc(n ? n : 1, sizeof *names);
    if (!w || !names) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    size_t chunk_len = 0;
    for (size_t i = 0; i < n; i++) {
        const pagein_write_tensor *t = &tensors[i];
        if (!t->name) {
            rc = pi_err(PAGEIN_E_INVALID, "tensor %zu has no name", i);
            goto out;
        }
        if (strcmp(t->name, "__metadata__") == 0) {
            rc = pi_err(PAGEIN_E_INVALID, "tensor %zu: the name __metadata__ is reserved", i);
            goto out;
        }
        const pagein_dtype_info *di = pagein_dtype_get(t->dtype);
        if (!di || !(di->flags & PAGEIN_DTYPE_F_SAFETENSORS)) {
            rc = pi_err(PAGEIN_E_BAD_DTYPE, "tensor '%s': dtype %s is not a safetensors dtype", t->name,
                        di ? di->name : "INVALID");
            goto out;
        }
        if (t->ndim && !t->shape) {
            rc = pi_err(PAGEIN_E_INVALID, "tensor '%s': ndim %u without a shape", t->name, t->ndim);
            goto out;
        }
        uint64_t ne = 1;
        for (uint32_t d = 0; d < t->ndim; d++) {
            if (pi_mul_overflow(ne, t->shape[d], &ne)) {
                rc = pi_err(PAGEIN_E_OVERFLOW, "tensor '%s': element count overflows", t->name);
                goto out;
            }
        }
        rc = pagein_dtype_nbytes(t->dtype, ne, &w[i].nbytes);
        if (rc < 0) {
            pi_err_prefix(t->name);
            goto out;
        }
        if (w[i].nbytes && !t->data && !t->fill) {
            rc = pi_err(PAGEIN_E_INVALID, "tensor '%s': neither data nor fill given", t->name);
            goto out;
        }
        if (!t->data && t->fill) chunk_len = (size_t)PI_MAX((uint64_t)chunk_len, PI_MIN(w[i].nbytes, (uint64_t)FILL_CHUNK));
        w[i].t = t;
        names[i] = t->name;
    }
    rc = check_unique(names, n, "tensor name");
    if (rc < 0) goto out;
    rc = check_unique((const char *const *)o.meta_keys, o.n_meta, "metadata key");
    if (rc < 0) goto out;
    if (n > 1) qsort(w, n, sizeof *w, wt_cmp);

    /* header */
    sb_put(&s, "\0\0\0\0\0\0\0\0", 8);
    sb_lit(&s, "{");
    if (o.n_meta) {
        sb_lit(&s, "\"__metadata__\":{");
        for (size_t i = 0; i < o.n_meta; i++) {
            if (i) sb_lit(&s, ",");
            sb_quoted(&s, o.meta_keys[i], strlen(o.meta_keys[i]));
            sb_lit(&s, ":");
            sb_quoted(&s, o.meta_values[i], strlen(o.meta_values[i]));
        }
        sb_lit(&s, "}");
        if (n) sb_lit(&s, ",");
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const pagein_write_tensor *t = w[i].t;
        if (i) sb_lit(&s, ",");
        sb_quoted(&s, t->name, strlen(t->name));
        sb_lit(&s, ":{\"dtype\":\"");
        sb_lit(&s, pagein_dtype_get(t->dtype)->name);
        sb_lit(&s, "\",\"shape\":[");
        for (uint32_t d = 0; d < t->ndim; d++) {
            if (d) sb_lit(&s, ",");
            sb_u64(&s, t->shape[d]);
        }
        sb_lit(&s, "],\"data_offsets\":[");
        sb_u64(&s, off);
        sb_lit(&s, ",");
        if (pi_add_overflow(off, w[i].nbytes, &off)) {
            rc = pi_err(PAGEIN_E_OVERFLOW, "total data size overflows");
            goto out;
        }
        sb_u64(&s, off);
        sb_lit(&s, "]}");
    }
    sb_lit(&s, "}");
    if (s.oom) {
        rc = pi_err(-ENOMEM, "out of memory building the header");
        goto out;
    }
    uint64_t total = pi_align_up(s.n, align);
    if (total - 8 > ST_MAX_HEADER) {
        rc = pi_err(PAGEIN_E_HEADER_TOO_LARGE, "header of %llu bytes exceeds the limit of %llu",
                    (unsigned long long)(total - 8), ST_MAX_HEADER);
        goto out;
    }
    char *pad = sb_room(&s, (size_t)(total - s.n));
    if (!pad) {
        rc = pi_err(-ENOMEM, "out of memory building the header");
        goto out;
    }
    memset(pad, ' ', (size_t)(total - s.n));
    s.n = (size_t)total;
    uint64_t hn = total - 8;
    for (int i = 0; i < 8; i++) s.p[i] = (char)(uint8_t)(hn >> (8 * i));

    if (chunk_len) {
        chunk = pi_malloc(chunk_len);
        if (!chunk) {
            rc = pi_err(-ENOMEM, "out of memory");
            goto out;
        }
    }

    /* the file */
    struct pi_atomic_file a;
    rc = pi_atomic_open(&a, path);
    if (rc < 0) goto out;
    rc = pi_atomic_write(&a, s.p, s.n);
    pi_free(s.p);
    s.p = NULL;
    for (size_t i = 0; i < n && rc == 0; i++) {
        pi_err_clear();
        rc = write_data(&a, &w[i], chunk, chunk_len);
    }
    if (rc == 0)
        rc = pi_atomic_commit(&a);
    else
        pi_atomic_abort(&a);
out:
    pi_free(s.p);
    pi_free(chunk);
    pi_free(w);
    pi_free(names);
    return rc;
}
