/* convert.c - any open file (PyTorch checkpoint, GGUF with plain element
 * types, safetensors) to safetensors: optional float cast, sharding with a
 * Hugging Face style index, page-aligned data. Tensor bytes stream through
 * the writer's fill callback in chunks: strided tensors are gathered,
 * byte-swapped ones swapped, tied and viewed tensors written in full, and
 * the source pages already consumed are dropped from this process's
 * resident set, so peak memory stays near one chunk plus the header. */
#include "../io/io.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- float casts ----------------------------------------------------------- */

static float f16_to_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1F, m = h & 0x3FF, u;
    if (e == 0) {
        if (m == 0) {
            u = s;
        } else { /* subnormal: normalise */
            e = 127 - 15 + 1;
            while (!(m & 0x400)) m <<= 1, e--;
            u = s | e << 23 | (m & 0x3FF) << 13;
        }
    } else if (e == 31) {
        u = s | 0x7F800000u | m << 13;
    } else {
        u = s | (e + 127 - 15) << 23 | m << 13;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t s = (u >> 16) & 0x8000, e = (u >> 23) & 0xFF, m = u & 0x7FFFFF;
    if (e == 0xFF) return (uint16_t)(s | 0x7C00 | (m ? 0x200 | (m >> 13) : 0));
    int32_t ne = (int32_t)e - 127 + 15;
    if (ne >= 31) return (uint16_t)(s | 0x7C00);
    if (ne <= 0) {
        if (ne < -10) return (uint16_t)s;
        m |= 0x800000;
        uint32_t shift = (uint32_t)(14 - ne), r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(s | r);
    }
    uint32_t r = (uint32_t)ne << 10 | m >> 13, rem = m & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++; /* may carry into the exponent: correct */
    return (uint16_t)(s | r);
}

static float bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFF)) return (uint16_t)(u >> 16 | 0x40); /* quiet NaN */
    u += 0x7FFF + ((u >> 16) & 1); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

static bool is_castable(pagein_dtype d) {
    return d == PAGEIN_DTYPE_F32 || d == PAGEIN_DTYPE_F16 || d == PAGEIN_DTYPE_BF16 || d == PAGEIN_DTYPE_F64;
}

static float load_f(pagein_dtype d, const uint8_t *p) {
    uint16_t h;
    float f;
    double x;
    switch (d) {
    case PAGEIN_DTYPE_F16: memcpy(&h, p, 2); return f16_to_f32(h);
    case PAGEIN_DTYPE_BF16: memcpy(&h, p, 2); return bf16_to_f32(h);
    case PAGEIN_DTYPE_F64: memcpy(&x, p, 8); return (float)x;
    default: memcpy(&f, p, 4); return f;
    }
}

static void store_f(pagein_dtype d, uint8_t *p, float f) {
    uint16_t h;
    switch (d) {
    case PAGEIN_DTYPE_F16: h = f32_to_f16(f), memcpy(p, &h, 2); break;
    case PAGEIN_DTYPE_BF16: h = f32_to_bf16(f), memcpy(p, &h, 2); break;
    default: memcpy(p, &f, 4); break;
    }
}

/* ---- the fill callback ------------------------------------------------------ */

struct job;

struct src {
    struct job *job;
    const pagein_file *f;
    const pagein_tensor *t;
    pagein_dtype out; /* output dtype */
    uint32_t ies, oes; /* element sizes in and out (0 = not cast) */
    uint64_t out_bytes;
};

struct job {
    const pagein_convert_opts *o;
    uint64_t done, total;
    uint8_t *tmp;
    size_t tmp_len;
    long page;
};

/* Drops the source pages of [off, off+len) of the mapping from our resident
 * set: they stay in the page cache, but are no longer charged to us. */
static void drop_pages(const struct job *j, const pagein_file *f, uint64_t off, uint64_t len) {
    if (!f->mapped || !len) return;
    uint64_t a = off / (uint64_t)j->page * (uint64_t)j->page, e = off + len;
    e = e / (uint64_t)j->page * (uint64_t)j->page;
    if (e > a) madvise((void *)(f->base + a), (size_t)(e - a), MADV_DONTNEED);
}

static int fill(void *ctx, void *dst, uint64_t off, size_t len) {
    struct src *s = ctx;
    struct job *j = s->job;
    int rc;
    if (!s->oes) {
        rc = pagein_tensor_copy(s->f, s->t, off, dst, len);
    } else {
        /* cast: source elements covering [off, off+len) of the output */
        uint64_t e0 = off / s->oes, e1 = (off + len + s->oes - 1) / s->oes;
        size_t need = (size_t)((e1 - e0) * (s->ies > s->oes ? s->ies : s->oes) * 2);
        if (need > j->tmp_len) {
            uint8_t *n = pi_realloc(j->tmp, need);
            if (!n) return pi_err(-ENOMEM, "out of memory");
            j->tmp = n, j->tmp_len = need;
        }
        uint8_t *in = j->tmp, *outb = j->tmp + (e1 - e0) * s->ies;
        rc = pagein_tensor_copy(s->f, s->t, e0 * s->ies, in, (size_t)((e1 - e0) * s->ies));
        if (rc == 0) {
            for (uint64_t i = 0; i < e1 - e0; i++)
                store_f(s->out, outb + i * s->oes, load_f(s->t->dtype, in + i * s->ies));
            memcpy(dst, outb + (off - e0 * s->oes), len);
        }
    }
    if (rc < 0) return rc;
    /* contiguous sources are consumed in order: drop what is behind us */
    if (!(s->t->flags & PAGEIN_TENSOR_NONCONTIGUOUS) && s->t->nbytes) {
        uint64_t in_end = s->oes ? (off + len) / s->oes * s->ies : off + len;
        if (in_end > s->t->nbytes) in_end = s->t->nbytes;
        drop_pages(j, s->f, s->t->offset, in_end);
    }
    j->done += len;
    if (j->o && j->o->progress) j->o->progress(j->o->progress_ctx, j->done, j->total);
    return 0;
}

/* ---- sharding and the index --------------------------------------------------- */

struct wm {
    const char *name;
    uint32_t shard;
};

static int wm_cmp(const void *a, const void *b) { return strcmp(((const struct wm *)a)->name, ((const struct wm *)b)->name); }

/* "dir/model.safetensors" + shard 2 of 5 -> "dir/model-00002-of-00005.safetensors" */
static char *shard_path(const char *out, uint32_t i, uint32_t n) {
    size_t l = strlen(out);
    const char *ext = ".safetensors";
    size_t el = strlen(ext);
    size_t stem = l >= el && strcmp(out + l - el, ext) == 0 ? l - el : l;
    char *p = pi_malloc(stem + el + 32);
    if (p) snprintf(p, stem + el + 32, "%.*s-%05u-of-%05u%s", (int)stem, out, i + 1, n, ext);
    return p;
}

static void json_str(struct pi_atomic_file *a, const char *s, int *rc) {
    char buf[8];
    if (*rc == 0) *rc = pi_atomic_write(a, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p && *rc == 0; p++) {
        if (*p == '"' || *p == '\\') {
            buf[0] = '\\', buf[1] = (char)*p;
            *rc = pi_atomic_write(a, buf, 2);
        } else if (*p < 0x20) {
            snprintf(buf, sizeof buf, "\\u%04x", *p);
            *rc = pi_atomic_write(a, buf, 6);
        } else {
            *rc = pi_atomic_write(a, p, 1);
        }
    }
    if (*rc == 0) *rc = pi_atomic_write(a, "\"", 1);
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int write_index(const char *out, char **paths, const pagein_write_tensor *w, const uint32_t *shard, size_t n,
                       uint64_t total) {
    size_t l = strlen(out);
    char *ip = pi_malloc(l + 16);
    struct wm *m = pi_malloc((n ? n : 1) * sizeof *m);
    if (!ip || !m) {
        pi_free(ip), pi_free(m);
        return pi_err(-ENOMEM, "out of memory");
    }
    snprintf(ip, l + 16, "%s.index.json", out);
    for (size_t i = 0; i < n; i++) m[i].name = w[i].name, m[i].shard = shard[i];
    qsort(m, n, sizeof *m, wm_cmp);
    struct pi_atomic_file a;
    int rc = pi_atomic_open(&a, ip);
    if (rc == 0) {
        char hdr[128];
        snprintf(hdr, sizeof hdr, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {\n",
                 (unsigned long long)total);
        rc = pi_atomic_write(&a, hdr, strlen(hdr));
        for (size_t i = 0; i < n && rc == 0; i++) {
            rc = pi_atomic_write(&a, "    ", 4);
            json_str(&a, m[i].name, &rc);
            if (rc == 0) rc = pi_atomic_write(&a, ": ", 2);
            json_str(&a, base_name(paths[m[i].shard]), &rc);
            if (rc == 0) rc = pi_atomic_write(&a, i + 1 < n ? ",\n" : "\n", i + 1 < n ? 2 : 1);
        }
        if (rc == 0) rc = pi_atomic_write(&a, "  }\n}\n", 6);
        if (rc == 0) rc = pi_atomic_commit(&a);
        else pi_atomic_abort(&a);
    }
    pi_free(ip), pi_free(m);
    return rc;
}

/* ---- the converter --------------------------------------------------------------- */

/* Fills the writer records and fill contexts for every tensor of f. */
static int prepare(const pagein_file *f, const pagein_convert_opts *op, struct job *job, pagein_write_tensor *w,
                   struct src *s, pagein_convert_stats *stp, int gguf) {
    pagein_convert_opts o = *op;
    pagein_convert_stats st = {0};
    int rc = 0;
    size_t n = f->tab.n;
    for (size_t i = 0; i < n; i++) {
        const pagein_tensor *t = &f->tab.t[i];
        const pagein_dtype_info *di = pagein_dtype_get(t->dtype);
        if (!gguf && (!di || !(di->flags & PAGEIN_DTYPE_F_SAFETENSORS)))
            return pi_err(PAGEIN_E_BAD_DTYPE, "tensor '%s' has type %s, which safetensors cannot hold (dequantize it first)",
                          t->name, di ? di->name : "?");
        if (gguf && (!di || di->gguf_id < 0 || t->dtype == PAGEIN_DTYPE_BOOL || t->dtype == PAGEIN_DTYPE_C64))
            return pi_err(PAGEIN_E_BAD_DTYPE, "tensor '%s' has type %s, which GGUF cannot hold", t->name, di ? di->name : "?");
        if (gguf && (di->flags & PAGEIN_DTYPE_F_QUANT) && (t->flags & (PAGEIN_TENSOR_NONCONTIGUOUS | PAGEIN_TENSOR_SWAPPED)))
            return pi_err(PAGEIN_E_BAD_DTYPE, "tensor '%s': strided quantized tensor", t->name);
        s[i].job = job;
        s[i].f = f;
        s[i].t = t;
        s[i].out = t->dtype;
        uint64_t nb = t->nbytes;
        if (t->flags & (PAGEIN_TENSOR_NONCONTIGUOUS | PAGEIN_TENSOR_SWAPPED)) nb = t->nelements * (di->bits / 8);
        if (o.dtype != PAGEIN_DTYPE_INVALID && is_castable(t->dtype) && t->dtype != o.dtype) {
            s[i].out = o.dtype;
            s[i].ies = di->bits / 8;
            s[i].oes = pagein_dtype_get(o.dtype)->bits / 8;
            nb = t->nelements * s[i].oes;
            st.cast++;
        }
        s[i].out_bytes = nb;
        w[i].name = t->name;
        w[i].dtype = s[i].out;
        w[i].ndim = t->ndim;
        w[i].shape = t->shape;
        w[i].fill = fill;
        w[i].fill_ctx = &s[i];
        if (t->flags & PAGEIN_TENSOR_NONCONTIGUOUS) st.materialised++;
        if (t->flags & PAGEIN_TENSOR_VIEW) st.shared++;
        if (strlen(t->name) != t->name_len) {
            return pi_err(PAGEIN_E_INVALID, "tensor name with a NUL byte cannot be written");
        }
        job->total += nb;
    }
    st.tensors = n;
    st.bytes = job->total;
    *stp = st;
    return rc;
}

int pagein_convert_safetensors(const pagein_file *f, const char *out, const pagein_convert_opts *opts,
                               pagein_convert_stats *stats) {
    pi_err_clear();
    if (!f || !out) return pi_err(PAGEIN_E_INVALID, "pagein_convert_safetensors: NULL argument");
    pagein_convert_opts o = PAGEIN_CONVERT_OPTS_INIT;
    if (opts) memcpy(&o, opts, PI_MIN(opts->size ? opts->size : sizeof o, sizeof o));
    if (o.dtype != PAGEIN_DTYPE_INVALID && o.dtype != PAGEIN_DTYPE_F32 && o.dtype != PAGEIN_DTYPE_F16 &&
        o.dtype != PAGEIN_DTYPE_BF16)
        return pi_err(PAGEIN_E_INVALID, "--dtype must be F32, F16 or BF16");
    size_t n = f->tab.n;
    pagein_write_tensor *w = pi_calloc(n ? n : 1, sizeof *w);
    struct src *s = pi_calloc(n ? n : 1, sizeof *s);
    uint32_t *shard = pi_calloc(n ? n : 1, sizeof *shard);
    const char **keys = NULL, **vals = NULL;
    struct job job = {.o = &o, .page = sysconf(_SC_PAGESIZE)};
    char **paths = NULL;
    uint32_t nshards = 0;
    int rc = 0;
    if (!w || !s || !shard) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    pagein_convert_stats st = {0};
    if ((rc = prepare(f, &o, &job, w, s, &st, 0)) < 0) goto out;
    /* shards: in file order, a new shard when the next tensor would overflow
     * (a tensor larger than the limit gets a shard of its own), as
     * transformers' shard_checkpoint does */
    uint64_t cur = 0;
    for (size_t i = 0; i < n; i++) {
        if (o.max_shard_bytes && cur && cur + s[i].out_bytes > o.max_shard_bytes) nshards++, cur = 0;
        shard[i] = nshards;
        cur += s[i].out_bytes;
    }
    nshards++;
    paths = pi_calloc(nshards, sizeof *paths);
    if (!paths) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    for (uint32_t k = 0; k < nshards; k++) {
        paths[k] = nshards == 1 ? pi_strndup(out, strlen(out)) : shard_path(out, k, nshards);
        if (!paths[k]) {
            rc = pi_err(-ENOMEM, "out of memory");
            goto out;
        }
    }
    const char *mk[1] = {"format"}, *mv[1] = {"pt"};
    pagein_write_opts wo = PAGEIN_WRITE_OPTS_INIT;
    wo.align = o.align;
    if (f->tab.format == PAGEIN_FORMAT_TORCH) wo.meta_keys = mk, wo.meta_values = mv, wo.n_meta = 1;
    if (f->tab.format == PAGEIN_FORMAT_SAFETENSORS) {
        /* keep the input's __metadata__ */
        keys = pi_calloc(f->tab.nmeta + 1, sizeof *keys);
        vals = pi_calloc(f->tab.nmeta + 1, sizeof *vals);
        if (!keys || !vals) {
            rc = pi_err(-ENOMEM, "out of memory");
            goto out;
        }
        size_t nm = 0;
        for (size_t i = 0; i < f->tab.nmeta; i++)
            if (f->tab.meta[i].type == PAGEIN_META_STRING) keys[nm] = f->tab.meta[i].key, vals[nm] = f->tab.meta[i].str, nm++;
        wo.meta_keys = keys, wo.meta_values = vals, wo.n_meta = nm;
    }
    /* write each shard: its tensors, contiguous in w[] after a stable sort by shard */
    pagein_write_tensor *sub = pi_calloc(n ? n : 1, sizeof *sub);
    if (!sub) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    for (uint32_t k = 0; k < nshards && rc == 0; k++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (shard[i] == k) sub[m++] = w[i];
        rc = pagein_safetensors_write(paths[k], sub, m, &wo);
        if (rc < 0) pi_err_prefix(paths[k]);
    }
    pi_free(sub);
    if (rc == 0 && nshards > 1) rc = write_index(out, paths, w, shard, n, job.total);
    st.shards = nshards;
    if (rc == 0 && stats) *stats = st;
out:
    if (paths)
        for (uint32_t k = 0; k < nshards; k++) pi_free(paths[k]);
    pi_free(paths);
    pi_free(w), pi_free(s), pi_free(shard), pi_free(keys), pi_free(vals);
    pi_free(job.tmp);
    return rc;
}

int pagein_convert_gguf(const pagein_file *f, const char *out, const pagein_convert_opts *opts,
                        pagein_convert_stats *stats) {
    pi_err_clear();
    if (!f || !out) return pi_err(PAGEIN_E_INVALID, "pagein_convert_gguf: NULL argument");
    pagein_convert_opts o = PAGEIN_CONVERT_OPTS_INIT;
    if (opts) memcpy(&o, opts, PI_MIN(opts->size ? opts->size : sizeof o, sizeof o));
    if (o.dtype != PAGEIN_DTYPE_INVALID && o.dtype != PAGEIN_DTYPE_F32 && o.dtype != PAGEIN_DTYPE_F16 &&
        o.dtype != PAGEIN_DTYPE_BF16)
        return pi_err(PAGEIN_E_INVALID, "--dtype must be F32, F16 or BF16");
    if (o.max_shard_bytes) return pi_err(PAGEIN_E_UNSUPPORTED, "sharded GGUF output is not supported");
    size_t n = f->tab.n;
    pagein_write_tensor *w = pi_calloc(n ? n : 1, sizeof *w);
    struct src *s = pi_calloc(n ? n : 1, sizeof *s);
    struct job job = {.o = &o, .page = sysconf(_SC_PAGESIZE)};
    pagein_gguf_writer *gw = NULL;
    pagein_convert_stats st = {0};
    int rc = 0;
    if (!w || !s) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = prepare(f, &o, &job, w, s, &st, 1)) < 0) goto out;
    pagein_gguf_write_opts go = PAGEIN_GGUF_WRITE_OPTS_INIT;
    if (o.align) {
        if (o.align > UINT32_MAX) {
            rc = pi_err(PAGEIN_E_BAD_ALIGNMENT, "alignment %llu too large for GGUF", (unsigned long long)o.align);
            goto out;
        }
        go.alignment = (uint32_t)o.align;
    }
    if ((rc = pagein_gguf_writer_new(&gw, &go)) < 0) goto out;
    /* string metadata of safetensors / values of checkpoints that are
     * strings or numbers: carried over as GGUF keys; GGUF input keeps its
     * own metadata (copied value by value) */
    for (size_t i = 0; i < f->tab.nmeta && rc == 0; i++) {
        const pagein_meta *m = &f->tab.meta[i];
        if (!m->key_len || strlen(m->key) != m->key_len) continue;
        if (f->tab.format == PAGEIN_FORMAT_GGUF && !strcmp(m->key, "general.alignment")) continue;
        switch (m->type) {
        case PAGEIN_META_STRING: rc = pagein_gguf_set_str(gw, m->key, m->str, (size_t)m->str_len); break;
        case PAGEIN_META_I64: rc = pagein_gguf_set_scalar(gw, m->key, PAGEIN_META_I64, &m->v.i); break;
        case PAGEIN_META_F64: rc = pagein_gguf_set_scalar(gw, m->key, PAGEIN_META_F64, &m->v.f); break;
        case PAGEIN_META_BOOL: rc = pagein_gguf_set_bool(gw, m->key, m->v.b); break;
        default:
            if (f->tab.format == PAGEIN_FORMAT_GGUF && m->type != PAGEIN_META_ARRAY) {
                /* narrower scalars: pass the value in its own width */
                uint8_t b[8];
                uint64_t u = m->v.u;
                switch (m->type) {
                case PAGEIN_META_U8: case PAGEIN_META_I8: b[0] = (uint8_t)u; break;
                case PAGEIN_META_U16: case PAGEIN_META_I16: { uint16_t x = (uint16_t)u; memcpy(b, &x, 2); break; }
                case PAGEIN_META_U32: case PAGEIN_META_I32: { uint32_t x = (uint32_t)u; memcpy(b, &x, 4); break; }
                case PAGEIN_META_F32: { float x = (float)m->v.f; memcpy(b, &x, 4); break; }
                default: memcpy(b, &u, 8); break;
                }
                rc = pagein_gguf_set_scalar(gw, m->key, m->type, b);
            }
            break;
        }
    }
    for (size_t i = 0; i < n && rc == 0; i++) rc = pagein_gguf_add_tensor(gw, &w[i]);
    if (rc == 0) rc = pagein_gguf_write(gw, out);
    if (rc < 0) pi_err_prefix(out);
    st.shards = 1;
    if (rc == 0 && stats) *stats = st;
out:
    pagein_gguf_writer_free(gw);
    pi_free(w), pi_free(s), pi_free(job.tmp);
    return rc;
}
