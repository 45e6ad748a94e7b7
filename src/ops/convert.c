/* convert.c - any open file (PyTorch checkpoint, GGUF, safetensors) to
 * safetensors or GGUF: optional float cast, dequantization of GGUF block
 * types, sharding with a Hugging Face style index, page-aligned data.
 *
 * Tensor bytes stream through the writer's fill callback in chunks:
 * strided tensors are gathered, byte-swapped ones swapped, tied and viewed
 * tensors written in full, quantized ones dequantized block by block, and
 * the source pages already consumed are dropped from this process's
 * resident set, so peak memory stays near one chunk plus the header.
 *
 * Before anything is written the output size is known exactly (tensor
 * bytes) plus a bound on the headers, and checked against the free space
 * of the target filesystem and the caller's cap: an expansion bomb (a
 * 1 KB checkpoint holding a stride-0 view of 2^40 elements) is refused
 * instead of filling the disk.
 *
 * A sharded set is written all or nothing: the shards and the index go to
 * a fresh directory next to the output, are moved into place (index last)
 * only when every one of them is complete, and old files at those names are
 * kept as hard links until the move succeeded, so a failure at any point
 * leaves either the previous model intact or the new one complete. */
#include "convert.h"
#include "../io/io.h"
#include "../format/dequant.h"
#include "../format/torch_internal.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static bool is_castable(pagein_dtype d) {
    return d == PAGEIN_DTYPE_F32 || d == PAGEIN_DTYPE_F16 || d == PAGEIN_DTYPE_BF16 || d == PAGEIN_DTYPE_F64;
}

/* ---- text built in the library's growable buffer (pi_buf) -------------------- */

/* Valid UTF-8 (no overlong forms, no surrogates, <= U+10FFFF). */
static bool utf8_ok(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k;
        unsigned min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) k = 1, min = 0x80, c &= 0x1F;
        else if ((c & 0xF0) == 0xE0) k = 2, min = 0x800, c &= 0x0F;
        else if ((c & 0xF8) == 0xF0) k = 3, min = 0x10000, c &= 0x07;
        else return false;
        if (i + k >= n) return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return false;
            c = c << 6 | (s[i + j] & 0x3F);
        }
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
        i += k + 1;
    }
    return true;
}

/* A JSON string; false (nothing added) when s is not valid UTF-8. */
static bool sb_json_str(struct pi_buf *b, const char *s, size_t n) {
    if (!utf8_ok((const unsigned char *)s, n)) return false;
    size_t q = pi_json_quoted_len(s, n);
    char *tmp = pi_malloc(q);
    if (!tmp) {
        b->oom = 1;
        return true;
    }
    pi_json_quote(tmp, s, n);
    pi_buf_put(b, tmp, q);
    pi_free(tmp);
    return true;
}

/* Shortest decimal that reads back as the same float (f32) or double, as
 * Python's repr writes it ("1.0", "1e-05"); NaN and infinities as Python's
 * json module writes them. */
static void sb_float(struct pi_buf *b, double v, int f32) {
    char buf[48];
    if (isnan(v)) {
        pi_buf_str(b, "NaN");
        return;
    }
    if (isinf(v)) {
        pi_buf_str(b, v < 0 ? "-Infinity" : "Infinity");
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, v);
        if (f32 ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v) break;
    }
    if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
    pi_buf_str(b, buf);
}

static const char *meta_str_reason(const char *s, size_t n) {
    if (memchr(s, 0, n)) return "string holds a NUL byte";
    if (!utf8_ok((const unsigned char *)s, n)) return "string is not valid UTF-8";
    return NULL;
}

/* An array of f as JSON; returns NULL or why it cannot be written. */
static const char *sb_json_array(struct pi_buf *b, const pagein_file *f, const pagein_meta *m, int depth) {
    if (depth > 8) return "arrays nested too deeply";
    pi_buf_str(b, "[");
    for (uint64_t i = 0; i < m->count && !b->oom; i++) {
        if (i) pi_buf_str(b, ", ");
        char num[32];
        switch (m->elem_type) {
        case PAGEIN_META_STRING: {
            const char *s;
            size_t l;
            if (pagein_meta_array_str(f, m, i, &s, &l) < 0) return "unreadable string element";
            if (!sb_json_str(b, s, l)) return "string element is not valid UTF-8";
            break;
        }
        case PAGEIN_META_ARRAY: {
            pagein_meta in;
            if (pagein_meta_array_at(f, m, i, &in) < 0) return "unreadable nested array";
            const char *why = sb_json_array(b, f, &in, depth + 1);
            if (why) return why;
            break;
        }
        case PAGEIN_META_F32:
        case PAGEIN_META_F64: {
            double d;
            if (pagein_meta_array_f64(f, m, i, &d) < 0) return "unreadable float element";
            sb_float(b, d, m->elem_type == PAGEIN_META_F32);
            break;
        }
        case PAGEIN_META_BOOL: {
            uint64_t u;
            if (pagein_meta_array_u64(f, m, i, &u) < 0) return "unreadable bool element";
            pi_buf_str(b, u ? "true" : "false");
            break;
        }
        case PAGEIN_META_I8: case PAGEIN_META_I16: case PAGEIN_META_I32: case PAGEIN_META_I64: {
            int64_t v;
            if (pagein_meta_array_i64(f, m, i, &v) < 0) return "unreadable integer element";
            snprintf(num, sizeof num, "%lld", (long long)v);
            pi_buf_str(b, num);
            break;
        }
        default: {
            uint64_t v;
            if (pagein_meta_array_u64(f, m, i, &v) < 0) return "unreadable integer element";
            snprintf(num, sizeof num, "%llu", (unsigned long long)v);
            pi_buf_str(b, num);
            break;
        }
        }
    }
    pi_buf_str(b, "]");
    return NULL;
}

/* The value of a metadata entry as a safetensors __metadata__ string:
 * strings as they are, everything else JSON-encoded. Returns NULL (the
 * value in b) or why it cannot be carried. */
static const char *meta_as_string(struct pi_buf *b, const pagein_file *f, const pagein_meta *m) {
    char num[32];
    switch (m->type) {
    case PAGEIN_META_STRING: {
        const char *why = meta_str_reason(m->str, (size_t)m->str_len);
        if (why) return why;
        pi_buf_put(b, m->str, (size_t)m->str_len);
        return NULL;
    }
    case PAGEIN_META_ARRAY: return sb_json_array(b, f, m, 0);
    case PAGEIN_META_BOOL: pi_buf_str(b, m->v.b ? "true" : "false"); return NULL;
    case PAGEIN_META_F32: case PAGEIN_META_F64: sb_float(b, m->v.f, m->type == PAGEIN_META_F32); return NULL;
    case PAGEIN_META_I8: case PAGEIN_META_I16: case PAGEIN_META_I32: case PAGEIN_META_I64:
        snprintf(num, sizeof num, "%lld", (long long)m->v.i);
        pi_buf_str(b, num);
        return NULL;
    default:
        snprintf(num, sizeof num, "%llu", (unsigned long long)m->v.u);
        pi_buf_str(b, num);
        return NULL;
    }
}

/* ---- the fill callback ------------------------------------------------------ */

struct job;

struct src {
    struct job *job;
    const pagein_file *f;
    const pagein_tensor *t;
    pagein_dtype out;   /* output dtype */
    uint32_t ub, ue;    /* converted: a source unit (block or element) is ub bytes, ue elements */
    uint32_t oes;       /* output element size; 0 = bytes copied unchanged */
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
        /* converted: the source units covering output bytes [off, off+len) */
        uint64_t ob = (uint64_t)s->ue * s->oes; /* output bytes per unit */
        uint64_t u0 = off / ob, u1 = (off + len + ob - 1) / ob;
        size_t in_len = (size_t)((u1 - u0) * s->ub), out_len = (size_t)((u1 - u0) * ob);
        if (in_len + out_len > j->tmp_len) {
            uint8_t *n = pi_realloc(j->tmp, in_len + out_len);
            if (!n) return pi_err(-ENOMEM, "out of memory");
            j->tmp = n, j->tmp_len = in_len + out_len;
        }
        uint8_t *in = j->tmp, *outb = j->tmp + in_len;
        /* pagein_tensor_copy gathers and byte-swaps: the units arrive native */
        rc = pagein_tensor_copy(s->f, s->t, u0 * s->ub, in, in_len);
        if (rc == 0) rc = pi_dequant(s->t->name, s->t->dtype, 0, in, in_len, s->out, outb, out_len, NULL);
        if (rc == 0) memcpy(dst, outb + (off - u0 * ob), len);
    }
    if (rc < 0) return rc;
    /* contiguous sources are consumed in order: drop what is behind us */
    if (!(s->t->flags & PAGEIN_TENSOR_NONCONTIGUOUS) && s->t->nbytes) {
        uint64_t in_end = s->oes ? (off + len) / ((uint64_t)s->ue * s->oes) * s->ub : off + len;
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

/* OUT names the file to write (and, sharded, the stem of its shards and
 * index): "dir/" would give shards "-00001-of-0000N.safetensors" and a
 * hidden ".index.json" that no directory scan finds. */
static int check_out_name(const char *out) {
    size_t l = strlen(out);
    if (out[l - 1] == '/' || (l >= 2 && strcmp(out + l - 2, "/.") == 0) || strcmp(out, ".") == 0 ||
        (l >= 3 && strcmp(out + l - 3, "/..") == 0) || strcmp(out, "..") == 0)
        return pi_err(PAGEIN_E_INVALID, "%s names a directory; give the output file's name, e.g. %s%smodel.safetensors",
                      out, out, out[l - 1] == '/' ? "" : "/");
    return 0;
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* length of the stem of a safetensors file name ("model" of "model.safetensors") */
static size_t stem_len(const char *name) {
    size_t l = strlen(name), el = strlen(".safetensors");
    return l >= el && strcmp(name + l - el, ".safetensors") == 0 ? l - el : l;
}

/* "model.safetensors" + shard 2 of 5 -> "model-00002-of-00005.safetensors" */
static char *shard_name(const char *base, uint32_t i, uint32_t n) {
    size_t stem = stem_len(base);
    char *p = pi_malloc(stem + 48);
    if (p) snprintf(p, stem + 48, "%.*s-%05u-of-%05u.safetensors", (int)stem, base, i + 1, n);
    return p;
}

static int write_index(const char *path, char **names, const pagein_write_tensor *w, const uint32_t *shard, size_t n,
                       uint64_t total) {
    struct wm *m = pi_malloc((n ? n : 1) * sizeof *m);
    struct pi_buf b = {0};
    if (!m) return pi_err(-ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) m[i].name = w[i].name, m[i].shard = shard[i];
    qsort(m, n, sizeof *m, wm_cmp);
    char hdr[128];
    snprintf(hdr, sizeof hdr, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {\n",
             (unsigned long long)total);
    pi_buf_str(&b, hdr);
    for (size_t i = 0; i < n; i++) {
        pi_buf_str(&b, "    ");
        size_t q = pi_json_quoted_len(m[i].name, strlen(m[i].name));
        char *t = pi_malloc(q);
        if (!t) {
            b.oom = 1;
            break;
        }
        pi_json_quote(t, m[i].name, strlen(m[i].name));
        pi_buf_put(&b, t, q);
        pi_free(t);
        pi_buf_str(&b, ": \"");
        pi_buf_str(&b, names[m[i].shard]); /* our own names: nothing to escape */
        pi_buf_str(&b, i + 1 < n ? "\",\n" : "\"\n");
    }
    pi_buf_str(&b, "  }\n}\n");
    int rc = 0;
    if (b.oom) {
        rc = pi_err(-ENOMEM, "out of memory");
    } else {
        struct pi_atomic_file a;
        rc = pi_atomic_open(&a, path);
        if (rc == 0) rc = pi_atomic_write(&a, b.p, b.n);
        if (rc == 0) rc = pi_atomic_commit(&a);
        else if (a.fd >= 0) pi_atomic_abort(&a);
    }
    pi_free(m), pi_free(b.p);
    return rc;
}

/* ---- space ---------------------------------------------------------------------- */

/* The directory part of path ("." when none), malloc'd. */
static char *dir_of(const char *path) {
    const char *s = strrchr(path, '/');
    if (!s) return pi_strndup(".", 1);
    if (s == path) return pi_strndup("/", 1);
    return pi_strndup(path, (size_t)(s - path));
}

/* Refuses an output of need bytes that exceeds the cap or the free space of
 * the filesystem holding dir. */
static int check_space(const char *dir, const char *out, uint64_t need, uint64_t cap) {
    if (cap == UINT64_MAX) return 0;
    if (cap) {
        if (need > cap)
            return pi_err(PAGEIN_E_LIMIT, "%s: the output needs %llu bytes, more than the allowed maximum of %llu bytes "
                          "(--max-output-size)", out, (unsigned long long)need, (unsigned long long)cap);
        return 0;
    }
    struct statvfs v;
    if (statvfs(dir, &v) != 0) return 0; /* unknown: the writes will tell */
    uint64_t freeb = (uint64_t)v.f_bavail * (uint64_t)(v.f_frsize ? v.f_frsize : v.f_bsize);
    if (need > freeb)
        return pi_err(-ENOSPC, "%s: the output needs %llu bytes, the filesystem of %s has %llu bytes free "
                      "(nothing written)", out, (unsigned long long)need, dir, (unsigned long long)freeb);
    return 0;
}

/* ---- the converter --------------------------------------------------------------- */

static void skip_meta(const pagein_convert_opts *o, const pagein_meta *m, const char *why) {
    if (o->on_skip) o->on_skip(o->skip_ctx, m->key, m->key_len, why);
}

/* Fills the writer records and fill contexts for every tensor of f, and
 * the bound on the output's size. */
static int prepare(const pagein_file *f, const pagein_convert_opts *op, struct job *job, pagein_write_tensor *w,
                   struct src *s, pagein_convert_stats *stp, int gguf) {
    pagein_convert_opts o = *op;
    pagein_convert_stats st = {0};
    size_t n = f->tab.n;
    uint64_t bound = 4096 + (o.align > 32 ? o.align : 32);
    for (size_t i = 0; i < n; i++) {
        const pagein_tensor *t = &f->tab.t[i];
        const pagein_dtype_info *di = pagein_dtype_get(t->dtype);
        bool quant = di && (di->flags & PAGEIN_DTYPE_F_QUANT);
        bool deq = quant && o.dequantize != PAGEIN_DTYPE_INVALID;
        if (deq && !pi_dequant_supported(t->dtype))
            return pi_err(PAGEIN_E_BAD_DTYPE, "tensor '%s' has type %s, which pagein cannot dequantize (supported: "
                          "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K-Q8_K, IQ4_NL, IQ4_XS)", t->name, di->name);
        if (deq && (t->flags & (PAGEIN_TENSOR_NONCONTIGUOUS | PAGEIN_TENSOR_SWAPPED)))
            return pi_err(PAGEIN_E_UNSUPPORTED, "tensor '%s': %s data in a big-endian file cannot be dequantized "
                          "(ggml defines no big-endian block layout)", t->name, di->name);
        if (!gguf && !deq && (!di || !(di->flags & PAGEIN_DTYPE_F_SAFETENSORS)))
            return pi_err(PAGEIN_E_BAD_DTYPE, "tensor '%s' has type %s, which safetensors cannot hold%s", t->name,
                          di ? di->name : "?", quant ? " (use --dequantize f16|bf16|f32)" : "");
        if (gguf && (!di || di->gguf_id < 0 || t->dtype == PAGEIN_DTYPE_BOOL || t->dtype == PAGEIN_DTYPE_C64))
            return pi_err(PAGEIN_E_BAD_DTYPE, "tensor '%s' has type %s, which GGUF cannot hold", t->name, di ? di->name : "?");
        if (gguf && quant && !deq && (t->flags & (PAGEIN_TENSOR_NONCONTIGUOUS | PAGEIN_TENSOR_SWAPPED)))
            return pi_err(PAGEIN_E_BAD_DTYPE, "tensor '%s': strided or byte-swapped quantized tensor", t->name);
        s[i].job = job;
        s[i].f = f;
        s[i].t = t;
        s[i].out = t->dtype;
        uint64_t nb = t->nbytes;
        if (!quant && (t->flags & (PAGEIN_TENSOR_NONCONTIGUOUS | PAGEIN_TENSOR_SWAPPED)))
            nb = t->nelements * (di->bits / 8);
        pagein_dtype to = deq ? o.dequantize
                              : (o.dtype != PAGEIN_DTYPE_INVALID && is_castable(t->dtype) && t->dtype != o.dtype)
                                    ? o.dtype
                                    : PAGEIN_DTYPE_INVALID;
        if (to != PAGEIN_DTYPE_INVALID) {
            s[i].out = to;
            s[i].ub = deq ? di->block_bytes : di->bits / 8;
            s[i].ue = deq ? di->block_elems : 1;
            s[i].oes = pagein_dtype_get(to)->bits / 8;
            if (pi_mul_overflow(t->nelements, s[i].oes, &nb))
                return pi_err(PAGEIN_E_OVERFLOW, "tensor '%s': output size overflows", t->name);
            if (deq) st.dequantized++;
            else st.cast++;
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
        if (strlen(t->name) != t->name_len) return pi_err(PAGEIN_E_INVALID, "tensor name with a NUL byte cannot be written");
        if (pi_add_overflow(job->total, nb, &job->total))
            return pi_err(PAGEIN_E_OVERFLOW, "the output's size overflows 64 bits");
        /* header: the name escaped, dtype, shape and offsets; GGUF padding */
        bound += 6 * t->name_len + 96 + 24 * (uint64_t)t->ndim + (gguf ? (o.align > 32 ? o.align : 32) : 0);
    }
    for (size_t i = 0; i < f->tab.nmeta; i++) {
        const pagein_meta *m = &f->tab.meta[i];
        bound += 6 * m->key_len + 64 + 6 * (m->type == PAGEIN_META_ARRAY ? m->raw_len + 24 * m->count : m->str_len);
    }
    st.tensors = n;
    st.bytes = job->total;
    if (pi_add_overflow(bound, job->total, &st.output_bound)) st.output_bound = UINT64_MAX;
    *stp = st;
    return 0;
}

/* Directory entries this process created for a sharded write, and the old
 * files they replace, so that a failure can put everything back. */
struct shard_set {
    char *dir, *tmpdir;       /* target directory, fresh directory inside it */
    char **names;             /* n + 1: shard base names, then the index's */
    char **tmp, **final, **old;
    uint8_t *installed;
    uint32_t n;               /* names incl. the index */
};

static void set_free(struct shard_set *ss) {
    for (uint32_t k = 0; k < ss->n; k++) {
        if (ss->tmp) pi_free(ss->tmp[k]);
        if (ss->final) pi_free(ss->final[k]);
        if (ss->old) pi_free(ss->old[k]);
        if (ss->names) pi_free(ss->names[k]);
    }
    pi_free(ss->tmp), pi_free(ss->final), pi_free(ss->old), pi_free(ss->names), pi_free(ss->installed);
    pi_free(ss->dir), pi_free(ss->tmpdir);
}

/* Removes the temporary directory and whatever is left in it. */
static void remove_tmpdir(const char *tmpdir) {
    DIR *d = opendir(tmpdir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
    }
    rmdir(tmpdir);
}

/* Moves every file of the set into place, the index last. Old files at
 * those names are first hard-linked into the temporary directory; on a
 * failure the moved files are taken back and the old ones restored. */
static int install_set(struct shard_set *ss) {
    int rc = 0;
    for (uint32_t k = 0; k < ss->n && rc == 0; k++) {
        if (link(ss->final[k], ss->old[k]) != 0 && errno != ENOENT) {
            int e = errno;
            rc = pi_err(-e, "%s: cannot keep the old file while replacing it: %s", ss->final[k], strerror(e));
            break;
        }
        if (rename(ss->tmp[k], ss->final[k]) != 0) {
            int e = errno;
            rc = pi_err(-e, "%s: cannot move the new file into place: %s", ss->final[k], strerror(e));
            break;
        }
        ss->installed[k] = 1;
    }
    if (rc < 0) {
        for (uint32_t k = ss->n; k-- > 0;) {
            if (!ss->installed[k]) continue;
            if (rename(ss->old[k], ss->final[k]) != 0) unlink(ss->final[k]); /* no old file: remove the new one */
        }
    }
    (void)pi_fsync_dir(ss->dir, NULL); /* best effort: the files are in place */
    return rc;
}

/* After a complete install: shards of an earlier set under the same stem
 * that the new index does not name, and a single file at out (which
 * loaders would prefer to the index) are removed, so the directory holds
 * one model. */
static void remove_stale(const char *dir, const char *base, char **keep, uint32_t nkeep, const char *single) {
    size_t stem = stem_len(base);
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            const char *nm = e->d_name;
            unsigned a, b;
            char tail[32];
            if (strncmp(nm, base, stem) || sscanf(nm + stem, "-%5u-of-%5u%31s", &a, &b, tail) != 3 ||
                strcmp(tail, ".safetensors") || strlen(nm) != stem + 27)
                continue;
            bool kept = false;
            for (uint32_t k = 0; k < nkeep && !kept; k++) kept = !strcmp(keep[k], nm);
            if (!kept) unlinkat(dirfd(d), nm, 0);
        }
        closedir(d);
    }
    if (single) {
        struct stat sb;
        if (lstat(single, &sb) == 0 && S_ISREG(sb.st_mode)) unlink(single);
    }
}

/* Writes w[0..n) to out: one file when nshards is 1, else nshards shards
 * (tensor i in shard[i], each shard's tensors in order ord) and the index,
 * all or nothing (the set in a fresh directory next to out, moved into
 * place index last). total: the tensor bytes, for the index. */
static int write_set(const char *out, const pagein_write_tensor *w, size_t n, const size_t *ord, const uint32_t *shard,
                     uint32_t nshards, const pagein_write_opts *wop, uint64_t total) {
    pagein_write_opts wo = *wop;
    struct shard_set ss = {0};
    pagein_write_tensor *sub = NULL;
    bool made_tmpdir = false;
    int tmp_slots[64]; /* pagein_temp_cleanup registrations (the registry has 64 slots) */
    size_t ntmp_slots = 0;
    int rc = 0;
    if (!(ss.dir = dir_of(out))) return pi_err(-ENOMEM, "out of memory");
    if (nshards == 1) {
        rc = pagein_safetensors_write(out, w, n, &wo);
        if (rc < 0) {
            pi_err_prefix(out);
            goto out;
        }
    } else {
        /* the whole set in a fresh directory next to the output first */
        const char *base = base_name(out);
        size_t tl = strlen(ss.dir) + strlen(base) + 32;
        ss.tmpdir = pi_malloc(tl);
        ss.n = nshards + 1;
        ss.names = pi_calloc(ss.n, sizeof *ss.names);
        ss.tmp = pi_calloc(ss.n, sizeof *ss.tmp);
        ss.final = pi_calloc(ss.n, sizeof *ss.final);
        ss.old = pi_calloc(ss.n, sizeof *ss.old);
        ss.installed = pi_calloc(ss.n, 1);
        sub = pi_calloc(n ? n : 1, sizeof *sub);
        if (!ss.tmpdir || !ss.names || !ss.tmp || !ss.final || !ss.old || !ss.installed || !sub) {
            ss.n = ss.names && ss.tmp && ss.final && ss.old ? ss.n : 0;
            rc = pi_err(-ENOMEM, "out of memory");
            goto out;
        }
        snprintf(ss.tmpdir, tl, "%s/.%.*s.tmp-XXXXXX", ss.dir, (int)PI_MIN(strlen(base), 200), base);
        /* the directory is registered for pagein_temp_cleanup before a
         * signal can see it unregistered */
        sigset_t block, prev;
        sigemptyset(&block);
        sigaddset(&block, SIGINT), sigaddset(&block, SIGTERM), sigaddset(&block, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &block, &prev);
        char *made = mkdtemp(ss.tmpdir);
        if (made) tmp_slots[ntmp_slots++] = pi_temp_register(ss.tmpdir);
        pthread_sigmask(SIG_SETMASK, &prev, NULL);
        if (!made) {
            int e = errno;
            rc = pi_err(-e, "%s: cannot create a temporary directory next to it: %s", out, strerror(e));
            goto out;
        }
        made_tmpdir = true;
        /* a signal before the set is in place removes the temporary
         * directory and what is in it (pagein_temp_cleanup): each file is
         * registered before it is written, so none can appear unregistered */
        for (uint32_t k = 0; k < ss.n; k++) {
            char ob[32];
            snprintf(ob, sizeof ob, ".old-%u", k);
            if (k < nshards) ss.names[k] = shard_name(base, k, nshards);
            else if ((ss.names[k] = pi_malloc(strlen(base) + 12))) snprintf(ss.names[k], strlen(base) + 12, "%s.index.json", base);
            if (!ss.names[k] || !(ss.tmp[k] = pi_path_join(ss.tmpdir, ss.names[k])) ||
                !(ss.final[k] = pi_path_join(ss.dir, ss.names[k])) || !(ss.old[k] = pi_path_join(ss.tmpdir, ob))) {
                rc = pi_err(-ENOMEM, "out of memory");
                goto out;
            }
        }
        /* each shard: its tensors in state-dict order */
        for (uint32_t k = 0; k < nshards && rc == 0; k++) {
            size_t m = 0;
            for (size_t p = 0; p < n; p++)
                if (shard[ord[p]] == k) sub[m++] = w[ord[p]];
            if (ntmp_slots < PI_ARRAY_LEN(tmp_slots)) tmp_slots[ntmp_slots++] = pi_temp_register(ss.tmp[k]);
            rc = pagein_safetensors_write(ss.tmp[k], sub, m, &wo);
            if (rc < 0) pi_err_prefix(ss.final[k]);
        }
        if (rc == 0 && ntmp_slots < PI_ARRAY_LEN(tmp_slots)) tmp_slots[ntmp_slots++] = pi_temp_register(ss.tmp[nshards]);
        if (rc == 0) rc = write_index(ss.tmp[nshards], ss.names, w, shard, n, total);
        if (rc == 0) {
            /* the moves into place are not interrupted by SIGINT, SIGTERM or
             * SIGHUP: a signal then arrives once the set is whole (or
             * restored), never between the shards and the index */
            pthread_sigmask(SIG_BLOCK, &block, &prev);
            rc = install_set(&ss);
            if (rc == 0) remove_stale(ss.dir, base, ss.names, nshards, out);
            for (size_t i = 0; i < ntmp_slots; i++) pi_temp_unregister(tmp_slots[i]);
            ntmp_slots = 0;
            if (made_tmpdir) remove_tmpdir(ss.tmpdir);
            made_tmpdir = false;
            pthread_sigmask(SIG_SETMASK, &prev, NULL);
        }
        if (rc < 0) goto out;
    }
out:
    if (made_tmpdir) remove_tmpdir(ss.tmpdir);
    for (size_t i = 0; i < ntmp_slots; i++) pi_temp_unregister(tmp_slots[i]);
    set_free(&ss);
    pi_free(sub);
    return rc;
}

/* Shards in state-dict order: PyTorch checkpoints in the order of their
 * pickle (model.state_dict()'s key order), other formats in file order. */
static size_t *write_order(const pagein_file *f) {
    size_t n = f->tab.n;
    size_t *ord = pi_malloc((n ? n : 1) * sizeof *ord);
    if (!ord) return NULL;
    const struct pi_torch_ext *x = f->tab.format == PAGEIN_FORMAT_TORCH ? f->tab.ext : NULL;
    if (x && x->n == n) {
        /* seq is a permutation of 0..n-1 (one walk position per tensor) */
        for (size_t i = 0; i < n; i++) ord[i] = SIZE_MAX;
        bool ok = true;
        for (size_t i = 0; i < n && ok; i++) {
            size_t q = x->r[i].seq;
            ok = q < n && ord[q] == SIZE_MAX;
            if (ok) ord[q] = i;
        }
        if (ok) return ord;
    }
    for (size_t i = 0; i < n; i++) ord[i] = i;
    return ord;
}

/* Assigns shards in order ord: a new shard when the next tensor would
 * overflow the current one (a tensor larger than the limit gets a shard of
 * its own), as transformers' shard_checkpoint does; and, before the first
 * tensor of a numbered layer, a new shard when the whole layer fits in one
 * but not in what is left of the current one. Returns the shard count. */
static uint32_t assign_shards(const pagein_file *f, const struct src *s, const size_t *ord, uint32_t *shard,
                              uint64_t max) {
    size_t n = f->tab.n;
    uint32_t k = 0;
    uint64_t cur = 0;
    for (size_t p = 0; p < n; p++) {
        size_t i = ord[p];
        int32_t layer = f->tab.t[i].layer;
        if (max && cur && layer >= 0 && (p == 0 || f->tab.t[ord[p - 1]].layer != layer)) {
            uint64_t group = 0;
            for (size_t q = p; q < n && f->tab.t[ord[q]].layer == layer && group <= max; q++) group += s[ord[q]].out_bytes;
            if (group <= max && cur + group > max) k++, cur = 0;
        }
        if (max && cur && cur + s[i].out_bytes > max) k++, cur = 0;
        shard[i] = k;
        cur += s[i].out_bytes;
    }
    return k + 1;
}

/* Carries f's metadata into safetensors __metadata__: safetensors strings
 * as they are; GGUF values as strings (non-strings JSON-encoded); PyTorch
 * checkpoints get {"format": "pt"} and their non-tensor values are skipped.
 * keys/vals/bufs are filled (bufs owns the values it made). */
static int st_metadata(const pagein_file *f, const pagein_convert_opts *o, const char **keys, const char **vals,
                       char **bufs, size_t *nm) {
    size_t k = 0;
    if (f->tab.format == PAGEIN_FORMAT_TORCH) {
        keys[0] = "format", vals[0] = "pt", k = 1;
        for (size_t i = 0; i < f->tab.nmeta; i++) skip_meta(o, &f->tab.meta[i], "not a tensor");
        *nm = k;
        return 0;
    }
    for (size_t i = 0; i < f->tab.nmeta; i++) {
        const pagein_meta *m = &f->tab.meta[i];
        if (!m->key_len || strlen(m->key) != m->key_len) {
            skip_meta(o, m, "key holds a NUL byte");
            continue;
        }
        if (!utf8_ok((const unsigned char *)m->key, m->key_len)) {
            skip_meta(o, m, "key is not valid UTF-8");
            continue;
        }
        if (f->tab.format == PAGEIN_FORMAT_SAFETENSORS) {
            if (m->type == PAGEIN_META_STRING) keys[k] = m->key, vals[k] = m->str, k++;
            else skip_meta(o, m, "not a string");
            continue;
        }
        struct pi_buf b = {0};
        const char *why = meta_as_string(&b, f, m);
        if (b.oom) {
            pi_free(b.p);
            return pi_err(-ENOMEM, "out of memory");
        }
        if (why) {
            pi_free(b.p);
            skip_meta(o, m, why);
            continue;
        }
        if (!b.p) b.p = pi_strndup("", 0);
        if (!b.p) return pi_err(-ENOMEM, "out of memory");
        bufs[k] = b.p;
        keys[k] = m->key, vals[k] = b.p, k++;
    }
    *nm = k;
    return 0;
}

/* Unset (INVALID) or one of the float types a conversion can produce. */
static int float_target(pagein_dtype d) {
    return d == PAGEIN_DTYPE_INVALID || d == PAGEIN_DTYPE_F32 || d == PAGEIN_DTYPE_F16 || d == PAGEIN_DTYPE_BF16;
}

/* The caller's options over the defaults (an older, shorter struct keeps
 * the defaults for the fields it lacks), with the target dtypes checked. */
static int convert_opts(const char *fn, const pagein_convert_opts *opts, pagein_convert_opts *o) {
    *o = (pagein_convert_opts)PAGEIN_CONVERT_OPTS_INIT;
    FORWARD_IF(pi_opts_in(o, sizeof *o, opts, fn));
    if (!float_target(o->dtype)) return pi_err(PAGEIN_E_INVALID, "--dtype must be F32, F16 or BF16");
    if (!float_target(o->dequantize)) return pi_err(PAGEIN_E_INVALID, "--dequantize must be F32, F16 or BF16");
    return 0;
}

/* What every conversion checks first (fn names it in the message): its
 * arguments, the output's name, and the options, into o. */
static int convert_start(const char *fn, const pagein_file *f, const char *out, const pagein_convert_opts *opts,
                         pagein_convert_opts *o) {
    pi_err_clear();
    if (!f || !out || !*out) return pi_err(PAGEIN_E_INVALID, "%s: NULL argument", fn);
    FORWARD_IF(check_out_name(out));
    return convert_opts(fn, opts, o);
}

int pagein_convert_safetensors(const pagein_file *f, const char *out, const pagein_convert_opts *opts,
                               pagein_convert_stats *stats) {
    pagein_convert_opts o;
    FORWARD_IF(convert_start("pagein_convert_safetensors", f, out, opts, &o));
    size_t n = f->tab.n, nmeta = f->tab.nmeta;
    pagein_write_tensor *w = pi_calloc(n ? n : 1, sizeof *w);
    struct src *s = pi_calloc(n ? n : 1, sizeof *s);
    uint32_t *shard = pi_calloc(n ? n : 1, sizeof *shard);
    const char **keys = pi_calloc(nmeta + 1, sizeof *keys), **vals = pi_calloc(nmeta + 1, sizeof *vals);
    char **bufs = pi_calloc(nmeta + 1, sizeof *bufs);
    size_t *ord = NULL;
    struct job job = {.o = &o, .page = sysconf(_SC_PAGESIZE)};
    char *dir = NULL;
    uint32_t nshards = 0;
    int rc = 0;
    if (!w || !s || !shard || !keys || !vals || !bufs) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    pagein_convert_stats st = {0};
    if ((rc = prepare(f, &o, &job, w, s, &st, 0)) < 0) goto out;
    if (!(ord = write_order(f))) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    nshards = assign_shards(f, s, ord, shard, o.max_shard_bytes);
    pagein_write_opts wo = PAGEIN_WRITE_OPTS_INIT;
    wo.align = o.align;
    size_t nm = 0;
    if ((rc = st_metadata(f, &o, keys, vals, bufs, &nm)) < 0) goto out;
    wo.meta_keys = keys, wo.meta_values = vals, wo.n_meta = nm;
    if (!(dir = dir_of(out))) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    uint64_t need = st.output_bound + (nshards > 1 ? (uint64_t)nshards * (4096 + 8 * n) + 64 * n : 0);
    if ((rc = check_space(dir, out, need, o.max_output_bytes)) < 0) goto out;
    st.output_bound = need;
    if ((rc = write_set(out, w, n, ord, shard, nshards, &wo, job.total)) < 0) goto out;
    st.shards = nshards;
    if (stats) *stats = st;
out:
    pi_free(dir);
    if (bufs)
        for (size_t i = 0; i <= nmeta; i++) pi_free(bufs[i]);
    pi_free(bufs), pi_free(ord);
    pi_free(w), pi_free(s), pi_free(shard), pi_free(keys), pi_free(vals);
    pi_free(job.tmp);
    return rc;
}

int pagein_convert_gguf(const pagein_file *f, const char *out, const pagein_convert_opts *opts,
                        pagein_convert_stats *stats) {
    pagein_convert_opts o;
    FORWARD_IF(convert_start("pagein_convert_gguf", f, out, opts, &o));
    if (o.max_shard_bytes) return pi_err(PAGEIN_E_UNSUPPORTED, "sharded GGUF output is not supported");
    size_t n = f->tab.n;
    pagein_write_tensor *w = pi_calloc(n ? n : 1, sizeof *w);
    struct src *s = pi_calloc(n ? n : 1, sizeof *s);
    struct job job = {.o = &o, .page = sysconf(_SC_PAGESIZE)};
    pagein_gguf_writer *gw = NULL;
    pagein_convert_stats st = {0};
    char *dir = NULL;
    int rc = 0;
    if (!w || !s) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = prepare(f, &o, &job, w, s, &st, 1)) < 0) goto out;
    if (!(dir = dir_of(out))) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = check_space(dir, out, st.output_bound, o.max_output_bytes)) < 0) goto out;
    pagein_gguf_write_opts go = PAGEIN_GGUF_WRITE_OPTS_INIT;
    /* GGUF input is copied as it is, old whole-block layouts included */
    if (f->tab.format == PAGEIN_FORMAT_GGUF) go.flags |= PAGEIN_GGUF_WRITE_WHOLE_BLOCKS;
    if (o.align) {
        if (o.align > UINT32_MAX) {
            rc = pi_err(PAGEIN_E_BAD_ALIGNMENT, "alignment %llu too large for GGUF", (unsigned long long)o.align);
            goto out;
        }
        go.alignment = (uint32_t)o.align;
    }
    if ((rc = pagein_gguf_writer_new(&gw, &go)) < 0) goto out;
    /* GGUF input: every key copied value by value (arrays included, in the
     * writer's layout). Safetensors __metadata__ strings and the PyTorch
     * values that are strings or numbers become GGUF keys. */
    for (size_t i = 0; i < f->tab.nmeta && rc == 0; i++) {
        const pagein_meta *m = &f->tab.meta[i];
        if (f->tab.format == PAGEIN_FORMAT_GGUF) {
            if (!strcmp(m->key, "general.alignment") && m->key_len == strlen(m->key) && o.align) {
                skip_meta(&o, m, "replaced by the requested alignment");
                continue;
            }
            rc = pagein_gguf_set_meta(gw, NULL, f, m);
        } else if (!m->key_len || strlen(m->key) != m->key_len) {
            skip_meta(&o, m, "key holds a NUL byte");
            continue;
        } else if (!strcmp(m->key, "general.alignment")) {
            skip_meta(&o, m, "general.alignment must be a u32 in GGUF");
            continue;
        } else {
            switch (m->type) {
            case PAGEIN_META_STRING: rc = pagein_gguf_set_str(gw, m->key, m->str, (size_t)m->str_len); break;
            case PAGEIN_META_I64: rc = pagein_gguf_set_scalar(gw, m->key, PAGEIN_META_I64, &m->v.i); break;
            case PAGEIN_META_F64: rc = pagein_gguf_set_scalar(gw, m->key, PAGEIN_META_F64, &m->v.f); break;
            case PAGEIN_META_BOOL: rc = pagein_gguf_set_bool(gw, m->key, m->v.b); break;
            default: skip_meta(&o, m, "no GGUF value of this type"); continue;
            }
        }
        if (rc < 0 && rc != -ENOMEM) {
            /* a value the writer cannot take: reported, the rest goes on */
            skip_meta(&o, m, pagein_last_error_detail());
            rc = 0;
        }
    }
    for (size_t i = 0; i < n && rc == 0; i++) rc = pagein_gguf_add_tensor(gw, &w[i]);
    if (rc == 0) rc = pagein_gguf_write(gw, out);
    if (rc < 0) pi_err_prefix(out);
    st.shards = 1;
    if (rc == 0 && stats) *stats = st;
out:
    pagein_gguf_writer_free(gw);
    pi_free(dir);
    pi_free(w), pi_free(s), pi_free(job.tmp);
    return rc;
}

/* ---- for other converters in ops/ (ops/dcp.c) ------------------------------------ */

int pi_convert_write_set(const char *out, const pagein_write_tensor *w, size_t n, const size_t *ord,
                         const uint32_t *shard, uint32_t nshards, const pagein_write_opts *wo, uint64_t total,
                         uint64_t bound, uint64_t max_output_bytes) {
    if (!out || !*out) return pi_err(PAGEIN_E_INVALID, "convert: no output name");
    FORWARD_IF(check_out_name(out));
    char *dir = dir_of(out);
    if (!dir) return pi_err(-ENOMEM, "out of memory");
    uint64_t need = bound + (nshards > 1 ? (uint64_t)nshards * (4096 + 8 * n) + 64 * n : 0);
    int rc = check_space(dir, out, need, max_output_bytes);
    pi_free(dir);
    if (rc == 0) rc = write_set(out, w, n, ord, shard, nshards, wo, total);
    return rc;
}
