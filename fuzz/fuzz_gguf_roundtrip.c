/* fuzz_gguf_roundtrip.c - parse -> write -> parse. Every GGUF the reader
 * accepts (any version, either byte order) is copied with the writer into a
 * v3 little-endian file (metadata through pagein_gguf_set_meta, tensors by
 * data pointer, skipping the ones ggml's writer rules refuse), which must
 * open again with identical metadata and identical tensors. A mismatch
 * traps. Writes one small file per accepted input under /tmp. */
#include <stdio.h>
#include <stdint.h>
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pagein_open_opts o = PAGEIN_OPEN_OPTS_INIT;
    o.format = PAGEIN_FORMAT_GGUF;
    pagein_file *f = NULL, *g = NULL;
    if (pagein_open_memory(&f, data, size, "fuzz", &o) != 0) return 0;
    pagein_gguf_writer *w = NULL;
    if (pagein_gguf_writer_new(&w, NULL) != 0) __builtin_trap();
    for (size_t i = 0; i < pagein_meta_count(f); i++)
        if (pagein_gguf_set_meta(w, NULL, f, pagein_meta_at(f, i)) != 0) __builtin_trap();
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
