/* fuzz_gguf_roundtrip.c - parse -> write -> parse. Every GGUF the reader
 * accepts (any version, either byte order) is copied with the writer into a
 * v3 little-endian file (tensors by data pointer, skipping the ones ggml's
 * writer rules refuse), which must open again with identical metadata and
 * identical tensors. A mismatch traps. Writes one small file per accepted
 * input under /tmp.
 *
 * Metadata goes through every setter in turn (set_by_type): the typed
 * scalar setters, set_scalar, set_str, set_array, set_str_array and
 * set_raw with bytes encoded here (little-endian hosts), and set_meta for
 * nested arrays and keys holding a NUL. Any setter refusing a value the
 * reader accepted traps. */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pagein.h"

/* memcmp that accepts NULL with n == 0 (rank-0 tensors have no shape array) */
static int differ(const void *a, const void *b, size_t n) { return n && memcmp(a, b, n); }

static int same_array(const pagein_file *fa, const pagein_meta *a, const pagein_file *fb, const pagein_meta *b,
                      int depth) {
    if (a->elem_type != b->elem_type || a->count != b->count || depth > 10) return 0;
    for (uint64_t i = 0; i < a->count; i++) {
        if (a->elem_type == PAGEIN_META_STRING) {
            const char *s1, *s2;
            size_t n1, n2;
            if (pagein_meta_array_str(fa, a, i, &s1, &n1) || pagein_meta_array_str(fb, b, i, &s2, &n2) || n1 != n2 ||
                differ(s1, s2, n1))
                return 0;
        } else if (a->elem_type == PAGEIN_META_ARRAY) {
            pagein_meta x, y;
            if (pagein_meta_array_at(fa, a, i, &x) || pagein_meta_array_at(fb, b, i, &y) ||
                !same_array(fa, &x, fb, &y, depth + 1))
                return 0;
        } else if (a->elem_type == PAGEIN_META_F32 || a->elem_type == PAGEIN_META_F64) {
            double x, y;
            if (pagein_meta_array_f64(fa, a, i, &x) || pagein_meta_array_f64(fb, b, i, &y) ||
                memcmp(&x, &y, sizeof x))
                return 0;
        } else {
            int64_t x, y;
            uint64_t ux, uy;
            int r1 = pagein_meta_array_i64(fa, a, i, &x), r2 = pagein_meta_array_i64(fb, b, i, &y);
            if (r1 != r2 || (r1 == 0 && x != y)) return 0;
            r1 = pagein_meta_array_u64(fa, a, i, &ux), r2 = pagein_meta_array_u64(fb, b, i, &uy);
            if (r1 != r2 || (r1 == 0 && ux != uy)) return 0;
        }
    }
    return 1;
}

static int same_meta(const pagein_file *fa, const pagein_meta *a, const pagein_file *fb, const pagein_meta *b) {
    if (a->type != b->type || a->key_len != b->key_len || differ(a->key, b->key, a->key_len)) return 0;
    switch (a->type) {
    case PAGEIN_META_STRING: return a->str_len == b->str_len && !differ(a->str, b->str, (size_t)a->str_len);
    case PAGEIN_META_ARRAY: return same_array(fa, a, fb, b, 0);
    case PAGEIN_META_F32: case PAGEIN_META_F64: return memcmp(&a->v.f, &b->v.f, sizeof a->v.f) == 0;
    case PAGEIN_META_BOOL: return a->v.b == b->v.b;
    default: return a->v.u == b->v.u;
    }
}

/* ---- metadata through the individual setters ---------------------------- */

static size_t scalar_size(pagein_meta_type t) {
    switch (t) {
    case PAGEIN_META_U8: case PAGEIN_META_I8: case PAGEIN_META_BOOL: return 1;
    case PAGEIN_META_U16: case PAGEIN_META_I16: return 2;
    case PAGEIN_META_U32: case PAGEIN_META_I32: case PAGEIN_META_F32: return 4;
    case PAGEIN_META_U64: case PAGEIN_META_I64: case PAGEIN_META_F64: return 8;
    default: return 0;
    }
}

/* One scalar in native byte order (= the little-endian file layout here). */
static void put_scalar(uint8_t *out, pagein_meta_type t, uint64_t u, double f) {
    switch (t) {
    case PAGEIN_META_F32: {
        float x = (float)f;
        memcpy(out, &x, 4);
        break;
    }
    case PAGEIN_META_F64: memcpy(out, &f, 8); break;
    case PAGEIN_META_U8: case PAGEIN_META_I8: case PAGEIN_META_BOOL: out[0] = (uint8_t)u; break;
    case PAGEIN_META_U16: case PAGEIN_META_I16: {
        uint16_t x = (uint16_t)u;
        memcpy(out, &x, 2);
        break;
    }
    case PAGEIN_META_U32: case PAGEIN_META_I32: {
        uint32_t x = (uint32_t)u;
        memcpy(out, &x, 4);
        break;
    }
    default: memcpy(out, &u, 8); break;
    }
}

/* Element i of a scalar array as (u, f); 0 or the getter's error. */
static int elem(const pagein_file *f, const pagein_meta *m, uint64_t i, uint64_t *u, double *d) {
    *u = 0, *d = 0;
    if (m->elem_type == PAGEIN_META_F32 || m->elem_type == PAGEIN_META_F64) return pagein_meta_array_f64(f, m, i, d);
    if (m->elem_type == PAGEIN_META_I8 || m->elem_type == PAGEIN_META_I16 || m->elem_type == PAGEIN_META_I32 ||
        m->elem_type == PAGEIN_META_I64) {
        int64_t x;
        int rc = pagein_meta_array_i64(f, m, i, &x);
        *u = (uint64_t)x;
        return rc;
    }
    return pagein_meta_array_u64(f, m, i, u);
}

static uint8_t *grow(uint8_t **b, size_t *cap, size_t need) {
    if (need > *cap) {
        size_t nc = need * 2;
        uint8_t *n = realloc(*b, nc);
        if (!n) return NULL;
        *b = n, *cap = nc;
    }
    return *b;
}

/* Copies record m of f into w with a setter picked by its type and by i
 * (so every setter sees every kind of value over a corpus). */
static int set_by_type(pagein_gguf_writer *w, const pagein_file *f, const pagein_meta *m, size_t i) {
    const char *k = m->key;
    if (strlen(k) != m->key_len || (m->type == PAGEIN_META_ARRAY && m->elem_type == PAGEIN_META_ARRAY))
        return pagein_gguf_set_meta(w, NULL, f, m);
    unsigned pick = (unsigned)(i % 3);
    uint8_t one[8];
    if (m->type != PAGEIN_META_STRING && m->type != PAGEIN_META_ARRAY) {
        if (pick == 0) switch (m->type) {
            case PAGEIN_META_U32: return pagein_gguf_set_u32(w, k, (uint32_t)m->v.u);
            case PAGEIN_META_I32: return pagein_gguf_set_i32(w, k, (int32_t)m->v.i);
            case PAGEIN_META_U64: return pagein_gguf_set_u64(w, k, m->v.u);
            case PAGEIN_META_F32: return pagein_gguf_set_f32(w, k, (float)m->v.f);
            case PAGEIN_META_BOOL: return pagein_gguf_set_bool(w, k, m->v.b);
            default: break;
            }
        put_scalar(one, m->type, m->type == PAGEIN_META_BOOL ? (uint64_t)(m->v.b != 0) : m->v.u, m->v.f);
        if (pick == 2) return pagein_gguf_set_raw(w, k, m->type, one, scalar_size(m->type));
        return pagein_gguf_set_scalar(w, k, m->type, one);
    }
    if (m->type == PAGEIN_META_STRING) {
        if (pick != 2) return pagein_gguf_set_str(w, k, m->str, (size_t)m->str_len);
        uint8_t *b = malloc((size_t)m->str_len + 8);
        if (!b) return -12;
        uint64_t n = m->str_len;
        memcpy(b, &n, 8);
        if (n) memcpy(b + 8, m->str, (size_t)n);
        int rc = pagein_gguf_set_raw(w, k, PAGEIN_META_STRING, b, (size_t)n + 8);
        free(b);
        return rc;
    }
    /* arrays of scalars or strings: packed native values, or raw bytes */
    if (m->count > (1u << 16)) return pagein_gguf_set_meta(w, NULL, f, m);
    size_t cap = 0, len = 12;
    uint8_t *raw = NULL;
    const char **ss = NULL;
    size_t *ls = NULL;
    int rc = 0;
    if (!grow(&raw, &cap, 12 + (size_t)m->count * 8)) return -12;
    uint32_t et = (uint32_t)m->elem_type;
    memcpy(raw, &et, 4);
    memcpy(raw + 4, &m->count, 8);
    if (m->elem_type == PAGEIN_META_STRING) {
        ss = calloc((size_t)m->count + 1, sizeof *ss);
        ls = calloc((size_t)m->count + 1, sizeof *ls);
        if (!ss || !ls) rc = -12;
        for (uint64_t e = 0; rc == 0 && e < m->count; e++) {
            rc = pagein_meta_array_str(f, m, e, &ss[e], &ls[e]);
            if (rc == 0 && !grow(&raw, &cap, len + 8 + ls[e])) rc = -12;
            if (rc == 0) {
                uint64_t n = ls[e];
                memcpy(raw + len, &n, 8);
                if (n) memcpy(raw + len + 8, ss[e], ls[e]);
                len += 8 + ls[e];
            }
        }
        if (rc == 0)
            rc = pick == 2 ? pagein_gguf_set_raw(w, k, PAGEIN_META_ARRAY, raw, len)
                           : pagein_gguf_set_str_array(w, k, ss, ls, m->count);
    } else {
        size_t es = scalar_size(m->elem_type);
        for (uint64_t e = 0; rc == 0 && e < m->count; e++) {
            uint64_t u;
            double d;
            rc = elem(f, m, e, &u, &d);
            if (rc == 0) put_scalar(raw + len + e * es, m->elem_type, u, d);
        }
        len += (size_t)m->count * es;
        if (rc == 0)
            rc = pick == 2 ? pagein_gguf_set_raw(w, k, PAGEIN_META_ARRAY, raw, len)
                           : pagein_gguf_set_array(w, k, m->elem_type, raw + 12, m->count);
    }
    free(raw);
    free(ss);
    free(ls);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pagein_open_opts o = PAGEIN_OPEN_OPTS_INIT;
    o.format = PAGEIN_FORMAT_GGUF;
    pagein_file *f = NULL, *g = NULL;
    if (pagein_open_memory(&f, data, size, "fuzz", &o) != 0) return 0;
    pagein_gguf_writer *w = NULL;
    if (pagein_gguf_writer_new(&w, NULL) != 0) __builtin_trap();
    for (size_t i = 0; i < pagein_meta_count(f); i++)
        if (set_by_type(w, f, pagein_meta_at(f, i), i) != 0) __builtin_trap();
    size_t kept = 0;
    for (size_t i = 0; i < pagein_tensor_count(f); i++) {
        const pagein_tensor *t = pagein_tensor_at(f, i);
        pagein_write_tensor wt = {t->name, t->dtype, t->ndim, t->shape, t->data, NULL, NULL};
        /* a NUL inside a name cannot be written through a C string */
        if (strlen(t->name) != t->name_len) continue;
        int rc = pagein_gguf_add_tensor(w, &wt);
        if (rc == 0) kept++;
        else if (rc != PAGEIN_E_BAD_TENSOR_INFO) __builtin_trap();
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_gguf_rt_%d.gguf", (int)getpid());
    if (pagein_gguf_write(w, path) == 0) {
        if (pagein_open(&g, path, NULL) != 0) __builtin_trap();
        if (pagein_meta_count(g) != pagein_meta_count(f) || pagein_tensor_count(g) != kept) __builtin_trap();
        for (size_t i = 0; i < pagein_meta_count(f); i++)
            if (!same_meta(f, pagein_meta_at(f, i), g, pagein_meta_at(g, i))) __builtin_trap();
        for (size_t i = 0; i < pagein_tensor_count(g); i++) {
            const pagein_tensor *b = pagein_tensor_at(g, i), *a = pagein_tensor_get(f, b->name);
            if (!a || a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes ||
                differ(a->shape, b->shape, a->ndim * sizeof *a->shape) ||
                differ(a->data, b->data, (size_t)a->nbytes))
                __builtin_trap();
        }
        pagein_close(g);
        unlink(path);
    }
    pagein_gguf_writer_free(w);
    pagein_close(f);
    return 0;
}
