/* fuzz_safetensors_roundtrip.c - parse -> write -> parse -> write. Any
 * input the (lenient) reader accepts is written with the official writer,
 * which must produce a strictly valid file with the same tensors and
 * metadata; writing that file again must give identical bytes. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pagein.h"

#define ASSERT(c) \
    do {          \
        if (!(c)) abort(); \
    } while (0)

static char path1[256], path2[256];

static void init_paths(void) {
    if (path1[0]) return;
    struct stat st;
    const char *dir = stat("/dev/shm", &st) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path1, sizeof path1, "%s/pagein-fuzz-rt-%d-a.safetensors", dir, (int)getpid());
    snprintf(path2, sizeof path2, "%s/pagein-fuzz-rt-%d-b.safetensors", dir, (int)getpid());
}

static void *slurp(const char *p, size_t *len) {
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = malloc(n > 0 ? (size_t)n : 1);
    if (n > 0 && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* Writes f's tensors and metadata to path; returns the writer's code, or 1
 * if f holds something the writer's C-string API cannot express (NUL in a
 * name, key or value). */
static int write_copy(const pagein_file *f, const char *path) {
    size_t n = pagein_tensor_count(f), nm = pagein_meta_count(f);
    pagein_write_tensor *t = calloc(n ? n : 1, sizeof *t);
    const char **k = calloc(nm ? nm : 1, sizeof *k), **v = calloc(nm ? nm : 1, sizeof *v);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const pagein_tensor *r = pagein_tensor_at(f, i);
        if (strlen(r->name) != r->name_len) rc = 1;
        t[i] = (pagein_write_tensor){r->name, r->dtype, r->ndim, r->shape, r->data, NULL, NULL};
    }
    for (size_t i = 0; i < nm && rc == 0; i++) {
        const pagein_meta *m = pagein_meta_at(f, i);
        if (strlen(m->key) != m->key_len || strlen(m->str) != m->str_len) rc = 1;
        k[i] = m->key, v[i] = m->str;
    }
    if (rc == 0) {
        pagein_write_opts o = PAGEIN_WRITE_OPTS_INIT;
        o.meta_keys = k, o.meta_values = v, o.n_meta = nm;
        rc = pagein_safetensors_write(path, t, n, &o);
    }
    free(t);
    free(k);
    free(v);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    init_paths();
    pagein_open_opts o = PAGEIN_OPEN_OPTS_INIT;
    o.format = PAGEIN_FORMAT_SAFETENSORS;
    o.flags = PAGEIN_OPEN_LENIENT;
    pagein_file *f = NULL;
    if (pagein_open_memory(&f, data, size, "fuzz", &o) != 0) return 0;
    int rc = write_copy(f, path1);
    if (rc == 1) {
        pagein_close(f);
        return 0;
    }
    /* the reader accepted it, so the writer must too (unless the header
     * would exceed the limit after re-encoding, which small inputs cannot) */
    ASSERT(rc == 0);
    pagein_file *g = NULL;
    ASSERT(pagein_open(&g, path1, NULL) == 0); /* strict */
    ASSERT(pagein_tensor_count(g) == pagein_tensor_count(f));
    ASSERT(pagein_meta_count(g) == pagein_meta_count(f));
    pagein_file_info gi;
    pagein_file_get_info(g, &gi);
    ASSERT(gi.data_start % 8 == 0);
    for (size_t i = 0; i < pagein_tensor_count(f); i++) {
        const pagein_tensor *a = pagein_tensor_at(f, i);
        const pagein_tensor *b = pagein_tensor_find(g, a->name, a->name_len);
        ASSERT(b && b->dtype == a->dtype && b->ndim == a->ndim && b->nbytes == a->nbytes);
        ASSERT(a->ndim == 0 || memcmp(a->shape, b->shape, a->ndim * sizeof *a->shape) == 0);
        ASSERT(a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
        ASSERT(!(b->flags & PAGEIN_TENSOR_UNALIGNED));
    }
    for (size_t i = 0; i < pagein_meta_count(f); i++) {
        const pagein_meta *a = pagein_meta_at(f, i), *b = pagein_meta_at(g, i);
        ASSERT(b && a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0);
        ASSERT(a->str_len == b->str_len && memcmp(a->str, b->str, a->str_len) == 0);
    }
    /* canonical: writing the written file again changes nothing */
    ASSERT(write_copy(g, path2) == 0);
    size_t l1, l2;
    void *b1 = slurp(path1, &l1), *b2 = slurp(path2, &l2);
    ASSERT(b1 && b2 && l1 == l2 && memcmp(b1, b2, l1) == 0);
    free(b1);
    free(b2);
    pagein_close(g);
    pagein_close(f);
    unlink(path1);
    unlink(path2);
    return 0;
}
