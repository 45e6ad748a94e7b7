/* gguf_write.c - GGUF writer (v3 by default; v1, v2 and big-endian layouts
 * for tests).
 *
 * Metadata is encoded as it is set into one growable buffer, already in the
 * output layout; tensor infos are encoded at write time, when the offsets
 * (running padded sums) are known. The file is written to a temporary file
 * and renamed into place (write_begin/write_commit below, the one place to
 * swap for a shared atomic-file helper). */
#include "../internal.h"

#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

struct buf {
    uint8_t *p;
    size_t n, cap;
};

static int buf_put(struct buf *b, const void *src, size_t n) {
    if (n > b->cap - b->n) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc - b->n < n) {
            if (nc > SIZE_MAX / 2) return -ENOMEM;
            nc *= 2;
        }
        uint8_t *np = pi_realloc(b->p, nc);
        if (!np) return -ENOMEM;
        b->p = np;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
    return 0;
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
    struct buf kv;   /* encoded metadata entries */
    uint64_t n_kv;
    char **keys;     /* for duplicate checks */
    size_t nkeys, keycap;
    struct wtensor *t;
    size_t nt, tcap;
};

static void put_u32(struct buf *b, uint32_t v, int be, int *rc) {
    if (be) v = __builtin_bswap32(v);
    if (*rc == 0) *rc = buf_put(b, &v, 4);
}
static void put_u64(struct buf *b, uint64_t v, int be, int *rc) {
    if (be) v = __builtin_bswap64(v);
    if (*rc == 0) *rc = buf_put(b, &v, 8);
}
static void put_len(const pagein_gguf_writer *w, struct buf *b, uint64_t v, int *rc) {
    if (w->version == 1) put_u32(b, (uint32_t)v, w->be, rc);
    else put_u64(b, v, w->be, rc);
}
static void put_str(const pagein_gguf_writer *w, struct buf *b, const char *s, size_t n, int *rc) {
    put_len(w, b, n, rc);
    if (*rc == 0) *rc = buf_put(b, s, n);
}

/* One scalar of type at p (native order) in the writer's byte order. */
static void put_scalar(const pagein_gguf_writer *w, struct buf *b, uint32_t type, const void *p, int *rc) {
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

int pagein_gguf_writer_new(pagein_gguf_writer **out, const pagein_gguf_write_opts *opts) {
    pi_err_clear();
    if (!out) return pi_err(PAGEIN_E_INVALID, "NULL writer pointer");
    uint32_t version = opts && opts->version ? opts->version : 3;
    uint32_t align = opts ? opts->alignment : 0;
    if (version < 1 || version > 3) return pi_err(PAGEIN_E_INVALID, "cannot write GGUF version %u", version);
    if (align & (align - 1)) return pi_err(PAGEIN_E_BAD_ALIGNMENT, "alignment %u is not a power of two", align);
    pagein_gguf_writer *w = pi_calloc(1, sizeof *w);
    if (!w) return pi_err(-ENOMEM, "out of memory");
    w->version = version;
    w->alignment = align;
    w->be = opts ? opts->big_endian != 0 : 0;
    *out = w;
    return 0;
}

void pagein_gguf_writer_free(pagein_gguf_writer *w) {
    if (!w) return;
    pi_free(w->kv.p);
    for (size_t i = 0; i < w->nkeys; i++) pi_free(w->keys[i]);
    pi_free(w->keys);
    for (size_t i = 0; i < w->nt; i++) pi_free(w->t[i].name);
    pi_free(w->t);
    pi_free(w);
}

/* Validates the key, appends it and the type to the KV buffer. On failure
 * the buffer is rolled back by the caller through *mark. */
static int begin_kv(pagein_gguf_writer *w, const char *key, uint32_t type, size_t *mark) {
    if (!w || !key) return pi_err(PAGEIN_E_INVALID, "NULL writer or key");
    size_t kl = strlen(key);
    if (!kl) return pi_err(PAGEIN_E_INVALID, "empty metadata key");
    if (type >= 13) return pi_err(PAGEIN_E_BAD_TYPE, "'%s': invalid type %u", key, type);
    for (size_t i = 0; i < w->nkeys; i++)
        if (strcmp(w->keys[i], key) == 0) return pi_err(PAGEIN_E_DUPLICATE, "metadata key '%s' set twice", key);
    if (w->nkeys == w->keycap) {
        size_t nc = w->keycap ? w->keycap * 2 : 16;
        char **nk = pi_realloc(w->keys, nc * sizeof *nk);
        if (!nk) return pi_err(-ENOMEM, "out of memory");
        w->keys = nk;
        w->keycap = nc;
    }
    *mark = w->kv.n;
    int rc = 0;
    put_str(w, &w->kv, key, kl, &rc);
    put_u32(&w->kv, type, w->be, &rc);
    if (rc) {
        w->kv.n = *mark;
        return pi_err(rc, "out of memory");
    }
    return 0;
}

static int end_kv(pagein_gguf_writer *w, const char *key, size_t mark, int rc) {
    if (rc == 0) {
        char *k = pi_strndup(key, strlen(key));
        if (!k) rc = -ENOMEM;
        else w->keys[w->nkeys++] = k;
    }
    if (rc) {
        w->kv.n = mark;
        return rc == -ENOMEM ? pi_err(rc, "out of memory") : rc;
    }
    w->n_kv++;
    return 0;
}

int pagein_gguf_set_scalar(pagein_gguf_writer *w, const char *key, pagein_meta_type type, const void *value) {
    if (!value || type == PAGEIN_META_STRING || type == PAGEIN_META_ARRAY || (uint32_t)type >= 13)
        return pi_err(PAGEIN_E_INVALID, "'%s': set_scalar needs a scalar type and a value", key ? key : "");
    size_t mark;
    if (key && strcmp(key, "general.alignment") == 0) {
        uint32_t a;
        if (type != PAGEIN_META_U32)
            return pi_err(PAGEIN_E_BAD_ALIGNMENT, "general.alignment must be u32, not %s", pi_gguf_type_name(type));
        memcpy(&a, value, 4);
        if (!a || (a & (a - 1)))
            return pi_err(PAGEIN_E_BAD_ALIGNMENT, "general.alignment %u is not a non-zero power of two", a);
        if (w && w->alignment && w->alignment != a)
            return pi_err(PAGEIN_E_BAD_ALIGNMENT, "general.alignment %u disagrees with the writer's %u", a,
                          w->alignment);
        FORWARD_IF(begin_kv(w, key, type, &mark));
        w->key_alignment = a;
    } else {
        FORWARD_IF(begin_kv(w, key, type, &mark));
    }
    int rc = 0;
    put_scalar(w, &w->kv, type, value, &rc);
    if (rc && strcmp(key, "general.alignment") == 0) w->key_alignment = 0;
    return end_kv(w, key, mark, rc);
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
    if (!s && len) return pi_err(PAGEIN_E_INVALID, "NULL string");
    if (len > PI_GGUF_MAX_STRING || (w && w->version == 1 && len > UINT32_MAX))
        return pi_err(PAGEIN_E_LIMIT, "'%s': string of %zu bytes above the 1 GiB limit", key ? key : "", len);
    size_t mark;
    FORWARD_IF(begin_kv(w, key, PAGEIN_META_STRING, &mark));
    int rc = 0;
    put_str(w, &w->kv, s ? s : "", len, &rc);
    return end_kv(w, key, mark, rc);
}

int pagein_gguf_set_array(pagein_gguf_writer *w, const char *key, pagein_meta_type et, const void *elems,
                          uint64_t count) {
    uint32_t es = pi_gguf_type_size((uint32_t)et);
    if (!es || (!elems && count)) return pi_err(PAGEIN_E_INVALID, "'%s': set_array needs a scalar element type",
                                                key ? key : "");
    if (count > PI_GGUF_MAX_ARRAY)
        return pi_err(PAGEIN_E_LIMIT, "'%s': %llu elements above the 2^30 limit", key ? key : "",
                      (unsigned long long)count);
    size_t mark;
    FORWARD_IF(begin_kv(w, key, PAGEIN_META_ARRAY, &mark));
    int rc = 0;
    put_u32(&w->kv, (uint32_t)et, w->be, &rc);
    put_len(w, &w->kv, count, &rc);
    if (!w->be || es == 1) {
        if (rc == 0) rc = buf_put(&w->kv, elems, (size_t)(count * es));
    } else {
        for (uint64_t i = 0; i < count && rc == 0; i++)
            put_scalar(w, &w->kv, (uint32_t)et, (const uint8_t *)elems + i * es, &rc);
    }
    return end_kv(w, key, mark, rc);
}

int pagein_gguf_set_str_array(pagein_gguf_writer *w, const char *key, const char *const *s, const size_t *lens,
                              uint64_t count) {
    if (!s && count) return pi_err(PAGEIN_E_INVALID, "NULL string array");
    if (count > PI_GGUF_MAX_ARRAY)
        return pi_err(PAGEIN_E_LIMIT, "'%s': %llu elements above the 2^30 limit", key ? key : "",
                      (unsigned long long)count);
    size_t mark;
    FORWARD_IF(begin_kv(w, key, PAGEIN_META_ARRAY, &mark));
    int rc = 0;
    put_u32(&w->kv, PAGEIN_META_STRING, w->be, &rc);
    put_len(w, &w->kv, count, &rc);
    for (uint64_t i = 0; i < count && rc == 0; i++) {
        size_t n = lens ? lens[i] : strlen(s[i]);
        if (n > PI_GGUF_MAX_STRING) rc = pi_err(PAGEIN_E_LIMIT, "'%s': element %llu above the 1 GiB limit", key,
                                                (unsigned long long)i);
        else put_str(w, &w->kv, s[i], n, &rc);
    }
    return end_kv(w, key, mark, rc);
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
    struct buf img = {0};
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
    rc = pi_gguf_parse(img.p, img.n, 0, &t);
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
    FORWARD_IF(begin_kv(w, key, type, &mark));
    rc = buf_put(&w->kv, bytes, len);
    return end_kv(w, key, mark, rc);
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
    uint64_t nel = 1;
    for (uint32_t d = 0; d < t->ndim; d++) {
        if (t->shape[d] > (uint64_t)INT64_MAX || pi_mul_overflow(nel, t->shape[d], &nel) ||
            nel > (uint64_t)INT64_MAX)
            return pi_err(PAGEIN_E_OVERFLOW, "tensor '%s': element count overflows int64", t->name);
    }
    uint64_t ne0 = t->ndim ? t->shape[t->ndim - 1] : 1;
    if (ne0 % di->block_elems)
        return pi_err(PAGEIN_E_BAD_TENSOR_INFO, "tensor '%s': innermost dimension %llu is not a multiple of %s's block of %u",
                      t->name, (unsigned long long)ne0, di->name, di->block_elems);
    uint64_t nbytes;
    FORWARD_IF(pagein_dtype_nbytes(t->dtype, nel, &nbytes));
    if (nbytes && !t->data && !t->fill) return pi_err(PAGEIN_E_INVALID, "tensor '%s': no data and no fill", t->name);
    for (size_t i = 0; i < w->nt; i++)
        if (strcmp(w->t[i].name, t->name) == 0)
            return pi_err(PAGEIN_E_DUPLICATE, "tensor '%s' added twice", t->name);
    if (w->nt == w->tcap) {
        size_t nc = w->tcap ? w->tcap * 2 : 16;
        struct wtensor *nt = pi_realloc(w->t, nc * sizeof *nt);
        if (!nt) return pi_err(-ENOMEM, "out of memory");
        w->t = nt;
        w->tcap = nc;
    }
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

/* ---- output file: temp + fsync + rename (swap for src/io/atomic.c) ---- */

struct wfile {
    int fd;
    char *tmp;
    const char *path;
};

static int write_begin(struct wfile *o, const char *path) {
    o->fd = -1;
    o->path = path;
    size_t pl = strlen(path);
    o->tmp = pi_malloc(pl + 16);
    if (!o->tmp) return pi_err(-ENOMEM, "out of memory");
    snprintf(o->tmp, pl + 16, "%s.tmp.XXXXXX", path);
    o->fd = mkstemp(o->tmp);
    if (o->fd < 0) {
        int e = errno;
        pi_free(o->tmp);
        o->tmp = NULL;
        return pi_err(-e, "%s: cannot create a temporary file: %s", path, strerror(e));
    }
    fchmod(o->fd, 0644);
    return 0;
}

static int write_all(struct wfile *o, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n) {
        ssize_t k = write(o->fd, b, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return pi_err(-errno, "%s: write failed: %s", o->tmp, strerror(errno));
        }
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

static void write_abort(struct wfile *o) {
    if (o->fd >= 0) close(o->fd);
    if (o->tmp) unlink(o->tmp);
    pi_free(o->tmp);
    o->fd = -1;
    o->tmp = NULL;
}

static int write_commit(struct wfile *o) {
    if (fsync(o->fd) < 0) {
        int e = errno;
        write_abort(o);
        return pi_err(-e, "%s: fsync failed: %s", o->path, strerror(e));
    }
    close(o->fd);
    o->fd = -1;
    if (rename(o->tmp, o->path) < 0) {
        int e = errno;
        write_abort(o);
        return pi_err(-e, "%s: rename failed: %s", o->path, strerror(e));
    }
    pi_free(o->tmp);
    o->tmp = NULL;
    /* make the rename durable */
    char *d = pi_strndup(o->path, strlen(o->path));
    if (d) {
        int dfd = open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        pi_free(d);
    }
    return 0;
}

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
    struct buf h = {0};
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
