/* fuzz_gguf.c - the GGUF reader and metadata getters on untrusted bytes.
 * Every accepted input is walked through the public accessors: each
 * metadata entry with its typed getters, the first and last element of
 * each array (recursing into nested arrays), and every tensor's data range,
 * so that a parser bug shows up as an out-of-bounds read under ASan. */
#include <stdint.h>
#include <string.h>

#include "pagein.h"

static volatile uint64_t sink;

static void walk_array(const pagein_file *f, const pagein_meta *m, int depth) {
    if (m->count == 0 || depth > 10) return;
    uint64_t idx[2] = {0, m->count - 1};
    for (int k = 0; k < 2; k++) {
        uint64_t i = idx[k], u;
        int64_t s;
        double d;
        const char *str;
        size_t len;
        pagein_meta sub;
        if (pagein_meta_array_u64(f, m, i, &u) == 0) sink += u;
        if (pagein_meta_array_i64(f, m, i, &s) == 0) sink += (uint64_t)s;
        if (pagein_meta_array_f64(f, m, i, &d) == 0) sink += d == d;
        if (pagein_meta_array_str(f, m, i, &str, &len) == 0 && len) sink += (uint8_t)str[len - 1];
        if (pagein_meta_array_at(f, m, i, &sub) == 0) walk_array(f, &sub, depth + 1);
    }
    if (m->raw_len) sink += ((const uint8_t *)m->raw)[m->raw_len - 1];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pagein_open_opts o = PAGEIN_OPEN_OPTS_INIT;
    o.format = PAGEIN_FORMAT_GGUF;
    pagein_file *f = NULL;
    if (pagein_open_memory(&f, data, size, "fuzz", &o) != 0) return 0;
    for (size_t i = 0; i < pagein_meta_count(f); i++) {
        const pagein_meta *m = pagein_meta_at(f, i);
        uint32_t u32;
        uint64_t u64;
        int64_t i64;
        double d;
        int b;
        const char *s;
        size_t len;
        const pagein_meta *a;
        sink += pagein_meta_get_u32(f, m->key, &u32) + pagein_meta_get_u64(f, m->key, &u64) +
                pagein_meta_get_i64(f, m->key, &i64) + pagein_meta_get_f64(f, m->key, &d) +
                pagein_meta_get_bool(f, m->key, &b);
        if (pagein_meta_get_str(f, m->key, &s, &len) == 0 && len) sink += (uint8_t)s[len - 1];
        if (pagein_meta_get_array(f, m->key, &a) == 0) walk_array(f, a, 0);
    }
    for (size_t i = 0; i < pagein_tensor_count(f); i++) {
        const pagein_tensor *t = pagein_tensor_at(f, i);
        const pagein_tensor *l = pagein_tensor_by_layer(f, i);
        uint64_t ne[4];
        sink += pagein_tensor_ggml_ne(t, ne) + (uint64_t)l->layer;
        if (t->nbytes) sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
        if (pagein_tensor_find(f, t->name, t->name_len) != t) __builtin_trap();
    }
    pagein_close(f);
    return 0;
}
