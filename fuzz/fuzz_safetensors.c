/* fuzz_safetensors.c - the safetensors header parser on untrusted bytes,
 * through the public API (pagein_open_memory), strict and lenient. Every
 * accepted file must satisfy the table's invariants. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pagein.h"

#define ASSERT(c) \
    do {          \
        if (!(c)) abort(); \
    } while (0)

static void check(const pagein_file *f, const uint8_t *data, size_t size) {
    pagein_file_info info;
    pagein_file_get_info(f, &info);
    ASSERT(info.data_start <= size);
    ASSERT(info.data_start == 8 + info.header_len);
    size_t n = pagein_tensor_count(f);
    uint64_t pos = info.data_start;
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < n; i++) {
        const pagein_tensor *t = pagein_tensor_at(f, i);
        ASSERT(t && t->index == i);
        ASSERT(t->offset == pos);
        ASSERT(t->offset + t->nbytes <= size);
        pos += t->nbytes;
        uint64_t nb = 0;
        ASSERT(pagein_dtype_nbytes(t->dtype, t->nelements, &nb) == 0 && nb == t->nbytes);
        ASSERT(pagein_tensor_find(f, t->name, t->name_len) == t);
        ASSERT(t->name[t->name_len] == 0);
        ASSERT((const uint8_t *)t->data == data + t->offset);
        if (t->nbytes) sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->nbytes - 1];
        ASSERT(pagein_tensor_by_layer(f, i) != NULL);
    }
    ASSERT(pos <= size);
    for (size_t i = 0; i < pagein_meta_count(f); i++) {
        const pagein_meta *m = pagein_meta_at(f, i);
        ASSERT(m->type == PAGEIN_META_STRING && m->str[m->str_len] == 0);
        if (strlen(m->key) == m->key_len) ASSERT(pagein_meta_find(f, m->key) == m);
    }
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pagein_open_opts o = PAGEIN_OPEN_OPTS_INIT;
    o.format = PAGEIN_FORMAT_SAFETENSORS;
    pagein_file *f = NULL;
    int rc = pagein_open_memory(&f, data, size, "fuzz", &o);
    ASSERT(rc <= 0);
    if (rc == 0) {
        check(f, data, size);
        pagein_file_info info;
        pagein_file_get_info(f, &info);
        ASSERT(info.file_size == size);
        pagein_close(f);
    } else {
        ASSERT(f == NULL);
        ASSERT((rc <= PAGEIN_E_BASE && rc > PAGEIN_E_LAST) || rc == -12);
    }
    o.flags = PAGEIN_OPEN_LENIENT;
    f = NULL;
    int rc2 = pagein_open_memory(&f, data, size, "fuzz", &o);
    if (rc == 0) ASSERT(rc2 == 0); /* lenient accepts everything strict accepts */
    if (rc2 == 0) {
        check(f, data, size);
        pagein_close(f);
    }
    return 0;
}
