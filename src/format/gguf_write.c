/* gguf_write.c - GGUF writer (v3 by default; v1, v2 and big-endian layouts
 * for tests).
 *
 * Metadata is encoded as it is set into one growable buffer, already in the
 * output layout; tensor infos are encoded at write time, when the offsets
 * (running padded sums) are known. The file is written to a temporary file
 * and renamed into place by the shared atomic-file helper (src/io/atomic.c). */
#include "format.h"
#include "../io/io.h"

#include <stdio.h>

/* Bytes being encoded, in the library's growable buffer: -ENOMEM once an
 * allocation failed. */
static int buf_put(struct pi_buf *b, const void *src, size_t n) {
    pi_buf_put(b, src, n);
    return b->oom ? -ENOMEM : 0;
}

struct wtensor {
    char *name;
    pagein_dtype dtype;
    uint32_t ndim;
    uint64_t shape[4];
    uint64_t nbytes;
    const void *data;
    pagein_fill_fn fill;
    void *fill_ctx;
};

struct pagein_gguf_writer {
    uint32_t version, alignment, key_alignment;
    int be;
    uint32_t flags;  /* PAGEIN_GGUF_WRITE_* */
    struct pi_buf kv;   /* encoded metadata entries */
    uint64_t n_kv;
    char **keys;     /* for duplicate checks (may hold NUL: see keylens) */
    size_t *keylens;
    size_t nkeys, keycap;
    struct wtensor *t;
    size_t nt, tcap;
};

static void put_u32(struct pi_buf *b, uint32_t v, int be, int *rc) {
    if (be) v = __builtin_bswap32(v);
    if (*rc == 0) *rc = buf_put(b, &v, 4);
}
static void put_u64(struct pi_buf *b, uint64_t v, int be, int *rc) {
    if (be) v = __builtin_bswap64(v);
    if (*rc == 0) *rc = buf_put(b, &v, 8);
}
static void put_len(const pagein_gguf_writer *w, struct pi_buf *b, uint64_t v, int *rc) {
    if (w->version == 1) put_u32(b, (uint32_t)v, w->be, rc);
    else put_u64(b, v, w->be, rc);
}
static void put_str(const pagein_gguf_writer *w, struct pi_buf *b, const char *s, size_t n, int *rc) {
    put_len(w, b, n, rc);
    if (*rc == 0) *rc = buf_put(b, s, n);
}

/* One scalar of type at p (native order) in the writer's byte order. */
static void put_scalar(const pagein_gguf_writer *w, struct pi_buf *b, uint32_t type, const void *p, int *rc) {
    uint32_t es = pi_gguf_type_size(type);
    uint8_t tmp[8];
    memcpy(tmp, p, es);
    if (w->be && es > 1)
        for (uint32_t i = 0; i < es / 2; i++) {
            uint8_t c = tmp[i];
            tmp[i] = tmp[es - 1 - i];
            tmp[es - 1 - i] = c;
        }
    if (*rc == 0) *rc = buf_put(b, tmp, es);
}

int pi_gguf_writer_layout(pagein_gguf_writer *w, uint32_t version, int big_endian) {
    if (version < 1 || version > 3) return pi_err(PAGEIN_E_INVALID, "cannot write GGUF version %u", version);
    if (w->kv.n || w->nt) return pi_err(PAGEIN_E_INVALID, "GGUF writer layout set after data was added");
    w->version = version;
    w->be = big_endian != 0;
    return 0;
}

int pagein_gguf_writer_new(pagein_gguf_writer **out, const pagein_gguf_write_opts *opts) {
    pi_err_clear();
    if (!out) return pi_err(PAGEIN_E_INVALID, "NULL writer pointer");
    uint32_t version = 3;
    uint32_t align = opts ? opts->alignment : 0;
    if (align & (align - 1)) return pi_err(PAGEIN_E_BAD_ALIGNMENT, "alignment %u is not a power of two", align);
    pagein_gguf_writer *w = pi_calloc(1, sizeof *w);
    if (!w) return pi_err(-ENOMEM, "out of memory");
    w->version = version;
    w->alignment = align;
    w->be = 0;
    if (opts && (!opts->size || opts->size >= offsetof(pagein_gguf_write_opts, flags) + sizeof opts->flags))
        w->flags = opts->flags;
    *out = w;
    return 0;
}

void pagein_gguf_writer_free(pagein_gguf_writer *w) {
    if (!w) return;
    pi_free(w->kv.p);
    for (size_t i = 0; i < w->nkeys; i++) pi_free(w->keys[i]);
    pi_free(w->keys);
    pi_free(w->keylens);
    for (size_t i = 0; i < w->nt; i++) pi_free(w->t[i].name);
    pi_free(w->t);
    pi_free(w);
}

/* Validates the key (klen bytes, may contain NUL when copied from a file),
 * appends it and the type to the KV buffer. end_kv records the key or
 * rolls the buffer back to *mark. */
static int begin_kv(pagein_gguf_writer *w, const char *key, size_t klen, uint32_t type, size_t *mark) {
    if (!w || !key) return pi_err(PAGEIN_E_INVALID, "NULL writer or key");
    if (!klen) return pi_err(PAGEIN_E_INVALID, "empty metadata key");
    if (klen > PI_GGUF_MAX_STRING) return pi_err(PAGEIN_E_LIMIT, "metadata key of %zu bytes", klen);
    if (type >= 13) return pi_err(PAGEIN_E_BAD_TYPE, "'%.*s': invalid type %u", (int)PI_MIN(klen, 64), key, type);
    for (size_t i = 0; i < w->nkeys; i++)
        if (w->keylens[i] == klen && memcmp(w->keys[i], key, klen) == 0)
            return pi_err(PAGEIN_E_DUPLICATE, "metadata key '%.*s' set twice", (int)PI_MIN(klen, 64), key);
    if (w->nkeys == w->keycap) { /* two arrays, one capacity: keycap is the smaller */
        size_t ck = w->keycap, cl = w->keycap;
        FORWARD_IF(pi_grow((void **)&w->keys, &ck, w->nkeys + 1, sizeof *w->keys));
        FORWARD_IF(pi_grow((void **)&w->keylens, &cl, w->nkeys + 1, sizeof *w->keylens));
        w->keycap = PI_MIN(ck, cl);
    }
    *mark = w->kv.n;
    int rc = 0;
    put_str(w, &w->kv, key, klen, &rc);
    put_u32(&w->kv, type, w->be, &rc);
    if (rc) {
        w->kv.n = *mark;
        return pi_err(rc, "out of memory");
    }
    return 0;
}

static int end_kv(pagein_gguf_writer *w, const char *key, size_t klen, size_t mark, int rc) {
    if (rc == 0) {
        char *k = pi_strndup(key, klen);
        if (!k) {
            rc = -ENOMEM;
        } else {
            w->keys[w->nkeys] = k;
            w->keylens[w->nkeys++] = klen;
        }
    }
    if (rc) {
        w->kv.n = mark;
        return rc == -ENOMEM ? pi_err(rc, "out of memory") : rc;
    }
    w->n_kv++;
    return 0;
}

static size_t klen_of(const char *key) { return key ? strlen(key) : 0; }
static bool is_align_key(const char *key, size_t klen) {
    return key && klen == 17 && memcmp(key, "general.alignment", 17) == 0;
}

static int set_scalar_k(pagein_gguf_writer *w, const char *key, size_t klen, pagein_meta_type type,
                        const void *value) {
    if (!value || type == PAGEIN_META_STRING || type == PAGEIN_META_ARRAY || (uint32_t)type >= 13)
        return pi_err(PAGEIN_E_INVALID, "'%.*s': set_scalar needs a scalar type and a value",
                      (int)PI_MIN(klen, 64), key ? key : "");
    size_t mark;
    bool al = is_align_key(key, klen);
    if (al) {
        uint32_t a;
        if (type != PAGEIN_META_U32)
            return pi_err(PAGEIN_E_BAD_ALIGNMENT, "general.alignment must be u32, not %s", pi_gguf_type_name(type));
        memcpy(&a, value, 4);
        if (!a || (a & (a - 1)))
            return pi_err(PAGEIN_E_BAD_ALIGNMENT, "general.alignment %u is not a non-zero power of two", a);
        if (w && w->alignment && w->alignment != a)
            return pi_err(PAGEIN_E_BAD_ALIGNMENT, "general.alignment %u disagrees with the writer's %u", a,
                          w->alignment);
    }
    FORWARD_IF(begin_kv(w, key, klen, type, &mark));
    int rc = 0;
    put_scalar(w, &w->kv, type, value, &rc);
    rc = end_kv(w, key, klen, mark, rc);
    if (rc == 0 && al) memcpy(&w->key_alignment, value, 4);
    return rc;
}

static int set_str_k(pagein_gguf_writer *w, const char *key, size_t klen, const char *s, size_t len) {
    if (!s && len) return pi_err(PAGEIN_E_INVALID, "NULL string");
    if (len > PI_GGUF_MAX_STRING)
        return pi_err(PAGEIN_E_LIMIT, "'%.*s': string of %zu bytes above the 1 GiB limit", (int)PI_MIN(klen, 64),
                      key ? key : "", len);
    size_t mark;
    FORWARD_IF(begin_kv(w, key, klen, PAGEIN_META_STRING, &mark));
    int rc = 0;
    put_str(w, &w->kv, s ? s : "", len, &rc);
    return end_kv(w, key, klen, mark, rc);
}

int pagein_gguf_set_scalar(pagein_gguf_writer *w, const char *key, pagein_meta_type type, const void *value) {
    return set_scalar_k(w, key, klen_of(key), type, value);
}

int pagein_gguf_set_u32(pagein_gguf_writer *w, const char *key, uint32_t v) {
    return pagein_gguf_set_scalar(w, key, PAGEIN_META_U32, &v);
}
int pagein_gguf_set_i32(pagein_gguf_writer *w, const char *key, int32_t v) {
    return pagein_gguf_set_scalar(w, key, PAGEIN_META_I32, &v);
}
int pagein_gguf_set_u64(pagein_gguf_writer *w, const char *key, uint64_t v) {
    return pagein_gguf_set_scalar(w, key, PAGEIN_META_U64, &v);
}
int pagein_gguf_set_f32(pagein_gguf_writer *w, const char *key, float v) {
    return pagein_gguf_set_scalar(w, key, PAGEIN_META_F32, &v);
}
int pagein_gguf_set_bool(pagein_gguf_writer *w, const char *key, int v) {
    uint8_t b = v != 0;
    return pagein_gguf_set_scalar(w, key, PAGEIN_META_BOOL, &b);
}

int pagein_gguf_set_str(pagein_gguf_writer *w, const char *key, const char *s, size_t len) {
    return set_str_k(w, key, klen_of(key), s, len);
}

/* Checks an array's element count and opens its key-value entry. */
static int begin_array(pagein_gguf_writer *w, const char *key, uint64_t count, size_t *mark) {
    if (count > PI_GGUF_MAX_ARRAY)
        return pi_err(PAGEIN_E_LIMIT, "'%s': %llu elements above the 2^30 limit", key ? key : "",
                      (unsigned long long)count);
    return begin_kv(w, key, klen_of(key), PAGEIN_META_ARRAY, mark);
}

int pagein_gguf_set_array(pagein_gguf_writer *w, const char *key, pagein_meta_type et, const void *elems,
                          uint64_t count) {
    uint32_t es = pi_gguf_type_size((uint32_t)et);
    if (!es || (!elems && count)) return pi_err(PAGEIN_E_INVALID, "'%s': set_array needs a scalar element type",
                                                key ? key : "");
    size_t mark;
    FORWARD_IF(begin_array(w, key, count, &mark));
    int rc = 0;
    put_u32(&w->kv, (uint32_t)et, w->be, &rc);
    put_len(w, &w->kv, count, &rc);
    if (!w->be || es == 1) {
        if (rc == 0) rc = buf_put(&w->kv, elems, (size_t)(count * es));
    } else {
        for (uint64_t i = 0; i < count && rc == 0; i++)
            put_scalar(w, &w->kv, (uint32_t)et, (const uint8_t *)elems + i * es, &rc);
    }
    return end_kv(w, key, klen_of(key), mark, rc);
}

int pagein_gguf_set_str_array(pagein_gguf_writer *w, const char *key, const char *const *s, const size_t *lens,
                              uint64_t count) {
    if (!s && count) return pi_err(PAGEIN_E_INVALID, "NULL string array");
    size_t mark;
    FORWARD_IF(begin_array(w, key, count, &mark));
    int rc = 0;
    put_u32(&w->kv, PAGEIN_META_STRING, w->be, &rc);
    put_len(w, &w->kv, count, &rc);
    for (uint64_t i = 0; i < count && rc == 0; i++) {
        size_t n = lens ? lens[i] : strlen(s[i]);
        if (n > PI_GGUF_MAX_STRING) rc = pi_err(PAGEIN_E_LIMIT, "'%s': element %llu above the 1 GiB limit", key,
                                                (unsigned long long)i);
        else put_str(w, &w->kv, s[i], n, &rc);
    }
    return end_kv(w, key, klen_of(key), mark, rc);
}

int pagein_gguf_set_raw(pagein_gguf_writer *w, const char *key, pagein_meta_type type, const void *bytes,
                        size_t len) {
    if (!w || (!bytes && len)) return pi_err(PAGEIN_E_INVALID, "NULL writer or bytes");
    if (key && strcmp(key, "general.alignment") == 0) {
        if (type != PAGEIN_META_U32 || len != 4)
            return pi_err(PAGEIN_E_BAD_ALIGNMENT, "general.alignment must be u32");
        uint32_t a;
        memcpy(&a, bytes, 4);
        if (w->be) a = __builtin_bswap32(a);
        return pagein_gguf_set_scalar(w, key, PAGEIN_META_U32, &a);
    }
    /* Validate with the reader's own value parser on a one-entry image. */
    struct pi_table t;
    pi_table_init(&t);
    struct pi_buf img = {0};
    int rc = 0;
    const char hdr[4] = {'G', 'G', 'U', 'F'};
    rc = buf_put(&img, hdr, 4);
    put_u32(&img, w->version, w->be, &rc);
    put_len(w, &img, 0, &rc);
    put_len(w, &img, 1, &rc);
    put_str(w, &img, "k", 1, &rc);
    put_u32(&img, (uint32_t)type, w->be, &rc);
    if (rc == 0) rc = buf_put(&img, bytes, len);
    if (rc) {
        pi_free(img.p);
        return pi_err(rc, "out of memory");
    }
    rc = pi_gguf_parse((const uint8_t *)img.p, img.n, img.n, 0, &t);
    /* the value must use every byte: no tensors, no padding after it */
    if (rc == 0 && t.data_start != img.n)
        rc = pi_err(PAGEIN_E_INVALID, "'%s': %zu raw bytes hold more than one %s value", key ? key : "", len,
                    pi_gguf_type_name(type));
    pi_table_free(&t);
    pi_free(img.p);
    if (rc) {
        pi_err_prefix(key ? key : "raw value");
        return rc;
    }
    size_t mark;
    FORWARD_IF(begin_kv(w, key, klen_of(key), type, &mark));
    rc = buf_put(&w->kv, bytes, len);
    return end_kv(w, key, klen_of(key), mark, rc);
}

int pagein_gguf_add_tensor(pagein_gguf_writer *w, const pagein_write_tensor *t) {
    if (!w || !t || !t->name || (t->ndim && !t->shape))
        return pi_err(PAGEIN_E_INVALID, "NULL writer, tensor, name or shape");
    size_t nl = strlen(t->name);
    if (nl >= PI_GGUF_MAX_NAME)
        return pi_err(PAGEIN_E_LIMIT, "tensor '%s': name of %zu bytes, GGUF allows at most %d", t->name, nl,
                      PI_GGUF_MAX_NAME - 1);
    if (t->ndim > PI_GGUF_MAX_DIMS)
        return pi_err(PAGEIN_E_LIMIT, "tensor '%s': %u dimensions, GGUF allows at most 4", t->name, t->ndim);
    const pagein_dtype_info *di = pagein_dtype_get(t->dtype);
    if (!di || di->gguf_id < 0)
        return pi_err(PAGEIN_E_BAD_DTYPE, "tensor '%s': dtype %s has no GGUF type", t->name,
                      di ? di->name : "(invalid)");
    /* the reader's rule (specs/GGUF.md 1.6): every dimension fits int64;
     * the element count must not overflow it, unless a dimension is 0 */
    uint64_t nel = 1;
    bool zero = false;
    for (uint32_t d = 0; d < t->ndim; d++) {
        if (t->shape[d] > (uint64_t)INT64_MAX)
            return pi_err(PAGEIN_E_OVERFLOW, "tensor '%s': dimension %u overflows int64", t->name, d);
        if (t->shape[d] == 0) zero = true;
    }
    for (uint32_t d = 0; d < t->ndim && !zero; d++)
        if (pi_mul_overflow(nel, t->shape[d], &nel) || nel > (uint64_t)INT64_MAX)
            return pi_err(PAGEIN_E_OVERFLOW, "tensor '%s': element count overflows int64", t->name);
    if (zero) nel = 0;
    uint64_t ne0 = t->ndim ? t->shape[t->ndim - 1] : 1;
    if (ne0 % di->block_elems && !((w->flags & PAGEIN_GGUF_WRITE_WHOLE_BLOCKS) && nel % di->block_elems == 0))
        return pi_err(PAGEIN_E_BAD_TENSOR_INFO, "tensor '%s': innermost dimension %llu is not a multiple of %s's block of %u",
                      t->name, (unsigned long long)ne0, di->name, di->block_elems);
    uint64_t nbytes;
    FORWARD_IF(pagein_dtype_nbytes(t->dtype, nel, &nbytes));
    if (nbytes && !t->data && !t->fill) return pi_err(PAGEIN_E_INVALID, "tensor '%s': no data and no fill", t->name);
    for (size_t i = 0; i < w->nt; i++)
        if (strcmp(w->t[i].name, t->name) == 0)
            return pi_err(PAGEIN_E_DUPLICATE, "tensor '%s' added twice", t->name);
    FORWARD_IF(pi_grow((void **)&w->t, &w->tcap, w->nt + 1, sizeof *w->t));
    struct wtensor *r = &w->t[w->nt];
    memset(r, 0, sizeof *r);
    r->name = pi_strndup(t->name, nl);
    if (!r->name) return pi_err(-ENOMEM, "out of memory");
    r->dtype = t->dtype;
    r->ndim = t->ndim;
    for (uint32_t d = 0; d < t->ndim; d++) r->shape[d] = t->shape[d];
    r->nbytes = nbytes;
    r->data = t->data;
    r->fill = t->fill;
    r->fill_ctx = t->fill_ctx;
    w->nt++;
    return 0;
}

/* ---- output: the shared atomic-file helper (src/io/atomic.c) ------------ */

struct wfile {
    struct pi_atomic_file a;
};

static int write_begin(struct wfile *o, const char *path) { return pi_atomic_open(&o->a, path); }
static int write_all(struct wfile *o, const void *p, size_t n) { return pi_atomic_write(&o->a, p, n); }
static void write_abort(struct wfile *o) { pi_atomic_abort(&o->a); }
static int write_commit(struct wfile *o) { return pi_atomic_commit(&o->a); }

static const uint8_t zeros[64];

static int write_zeros(struct wfile *o, uint64_t n) {
    while (n) {
        size_t k = n > sizeof zeros ? sizeof zeros : (size_t)n;
        FORWARD_IF(write_all(o, zeros, k));
        n -= k;
    }
    return 0;
}

int pagein_gguf_write(pagein_gguf_writer *w, const char *path) {
    pi_err_clear();
    if (!w || !path) return pi_err(PAGEIN_E_INVALID, "NULL writer or path");
    /* alignment: the writer's, or general.alignment, or 32; add the key
     * when the alignment is not the default and the key is absent */
    if (w->alignment && !w->key_alignment && w->alignment != PI_GGUF_DEFAULT_ALIGNMENT)
        FORWARD_IF(pagein_gguf_set_u32(w, "general.alignment", w->alignment));
    uint32_t align = w->key_alignment ? w->key_alignment : w->alignment ? w->alignment : PI_GGUF_DEFAULT_ALIGNMENT;
    struct pi_buf h = {0};
    int rc = buf_put(&h, "GGUF", 4);
    put_u32(&h, w->version, w->be, &rc);
    put_len(w, &h, w->nt, &rc);
    put_len(w, &h, w->n_kv, &rc);
    if (rc == 0) rc = buf_put(&h, w->kv.p, w->kv.n);
    uint64_t off = 0;
    for (size_t i = 0; i < w->nt && rc == 0; i++) {
        const struct wtensor *t = &w->t[i];
        put_str(w, &h, t->name, strlen(t->name), &rc);
        put_u32(&h, t->ndim, w->be, &rc);
        for (uint32_t d = 0; d < t->ndim; d++) put_len(w, &h, t->shape[t->ndim - 1 - d], &rc);
        put_u32(&h, (uint32_t)pagein_dtype_get(t->dtype)->gguf_id, w->be, &rc);
        put_u64(&h, off, w->be, &rc);
        off += pi_align_up(t->nbytes, align);
    }
    if (rc) {
        pi_free(h.p);
        return pi_err(rc, "out of memory");
    }
    struct wfile o;
    rc = write_begin(&o, path);
    if (rc) {
        pi_free(h.p);
        return rc;
    }
    rc = write_all(&o, h.p, h.n);
    /* gguf.cpp pads the header even without tensors; do the same */
    if (rc == 0) rc = write_zeros(&o, pi_align_up(h.n, align) - h.n);
    pi_free(h.p);
    uint8_t *chunk = NULL;
    for (size_t i = 0; i < w->nt && rc == 0; i++) {
        const struct wtensor *t = &w->t[i];
        if (t->data) {
            rc = write_all(&o, t->data, (size_t)t->nbytes);
        } else if (t->nbytes) {
            const size_t CH = 1u << 20;
            if (!chunk && !(chunk = pi_malloc(CH))) rc = pi_err(-ENOMEM, "out of memory");
            for (uint64_t at = 0; at < t->nbytes && rc == 0; at += CH) {
                size_t k = (size_t)PI_MIN((uint64_t)CH, t->nbytes - at);
                rc = t->fill(t->fill_ctx, chunk, at, k);
                if (rc < 0) pi_err(rc, "tensor '%s': fill callback failed at byte %llu", t->name,
                                   (unsigned long long)at);
                else rc = write_all(&o, chunk, k);
            }
        }
        if (rc == 0) rc = write_zeros(&o, pi_align_up(t->nbytes, align) - t->nbytes);
    }
    pi_free(chunk);
    if (rc) {
        write_abort(&o);
        return rc;
    }
    return write_commit(&o);
}

/* ---- copying a record from an open file --------------------------------- */

/* Appends array m of file f (elem_type, count, elements) to b in the
 * writer's layout, reading the elements through the getters so that any
 * source version and byte order works. */
static int encode_array(pagein_gguf_writer *w, struct pi_buf *b, const pagein_file *f, const pagein_meta *m,
                        int depth) {
    if (depth > PI_GGUF_MAX_DEPTH) return pi_err(PAGEIN_E_LIMIT, "arrays nested deeper than %d", PI_GGUF_MAX_DEPTH);
    int rc = 0;
    uint32_t et = (uint32_t)m->elem_type;
    put_u32(b, et, w->be, &rc);
    put_len(w, b, m->count, &rc);
    uint32_t es = pi_gguf_type_size(et);
    for (uint64_t i = 0; i < m->count && rc == 0; i++) {
        if (es) {
            /* numeric: bytes in the source's order -> native -> writer's */
            uint8_t v[8];
            memcpy(v, (const uint8_t *)m->raw + i * es, es);
            if (f->tab.big_endian && es > 1)
                for (uint32_t k = 0; k < es / 2; k++) {
                    uint8_t c = v[k];
                    v[k] = v[es - 1 - k];
                    v[es - 1 - k] = c;
                }
            put_scalar(w, b, et, v, &rc);
        } else if (et == PAGEIN_META_STRING) {
            const char *s;
            size_t n;
            rc = pagein_meta_array_str(f, m, i, &s, &n);
            if (rc == 0) put_str(w, b, s, n, &rc);
        } else {
            pagein_meta sub;
            rc = pagein_meta_array_at(f, m, i, &sub);
            if (rc == 0) rc = encode_array(w, b, f, &sub, depth + 1);
        }
    }
    return rc;
}

int pagein_gguf_set_meta(pagein_gguf_writer *w, const char *key, const pagein_file *f, const pagein_meta *m) {
    if (!w || !f || !m) return pi_err(PAGEIN_E_INVALID, "NULL writer, file or record");
    /* the file's key byte for byte (it may contain NUL), unless renamed */
    size_t klen = key ? strlen(key) : m->key_len;
    if (!key) key = m->key;
    switch (m->type) {
    case PAGEIN_META_STRING: return set_str_k(w, key, klen, m->str, (size_t)m->str_len);
    case PAGEIN_META_ARRAY: {
        size_t mark;
        FORWARD_IF(begin_kv(w, key, klen, PAGEIN_META_ARRAY, &mark));
        int rc = encode_array(w, &w->kv, f, m, 0);
        return end_kv(w, key, klen, mark, rc);
    }
    default: {
        union {
            uint8_t u8;
            uint16_t u16;
            uint32_t u32;
            uint64_t u64;
            float f32;
            double f64;
        } v;
        memset(&v, 0, sizeof v);
        switch (pi_gguf_type_size((uint32_t)m->type)) {
        case 1: v.u8 = m->type == PAGEIN_META_BOOL ? (uint8_t)(m->v.b != 0) : (uint8_t)m->v.u; break;
        case 2: v.u16 = (uint16_t)m->v.u; break;
        case 4:
            if (m->type == PAGEIN_META_F32) v.f32 = (float)m->v.f;
            else v.u32 = (uint32_t)m->v.u;
            break;
        case 8:
            if (m->type == PAGEIN_META_F64) v.f64 = m->v.f;
            else v.u64 = m->v.u;
            break;
        default: return pi_err(PAGEIN_E_BAD_TYPE, "'%s': invalid type %d", key ? key : "", (int)m->type);
        }
        return set_scalar_k(w, key, klen, m->type, &v);
    }
    }
}
