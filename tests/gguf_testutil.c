/* gguf_testutil.c - see gguf_testutil.h. Uses only <pagein.h>. */
#include "gguf_testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

void gt_bytes(struct gt_buf *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->n + n) nc *= 2;
        b->p = realloc(b->p, nc);
        if (!b->p) abort();
        b->cap = nc;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
void gt_u8(struct gt_buf *b, uint8_t v) { gt_bytes(b, &v, 1); }
void gt_u32(struct gt_buf *b, uint32_t v) {
    if (b->be) v = __builtin_bswap32(v);
    gt_bytes(b, &v, 4);
}
void gt_u64(struct gt_buf *b, uint64_t v) {
    if (b->be) v = __builtin_bswap64(v);
    gt_bytes(b, &v, 8);
}
void gt_len(struct gt_buf *b, uint64_t v) {
    if (b->v1) gt_u32(b, (uint32_t)v);
    else gt_u64(b, v);
}
void gt_str(struct gt_buf *b, const char *s) {
    gt_len(b, strlen(s));
    gt_bytes(b, s, strlen(s));
}
void gt_header(struct gt_buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    gt_bytes(b, "GGUF", 4);
    gt_u32(b, version);
    gt_len(b, n_tensors);
    gt_len(b, n_kv);
}
void gt_tinfo(struct gt_buf *b, const char *name, uint32_t nd, const uint64_t *ne, uint32_t type, uint64_t off) {
    gt_str(b, name);
    gt_u32(b, nd);
    for (uint32_t i = 0; i < nd; i++) gt_len(b, ne[i]);
    gt_u32(b, type);
    gt_u64(b, off);
}
void gt_pad(struct gt_buf *b, size_t a) {
    while (b->n % a) gt_u8(b, 0);
}
void gt_free(struct gt_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

static void jstr(FILE *o, const char *s, size_t n) {
    fputc('"', o);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(o, "\\%c", c);
        else if (c < 0x20) fprintf(o, "\\u%04x", c);
        else fputc(c, o);
    }
    fputc('"', o);
}

static void dump(const pagein_file *f, FILE *o) {
    pagein_file_info in;
    pagein_file_get_info(f, &in);
    fprintf(o, "{\"version\": %u, \"big_endian\": %s, \"alignment\": %u, \"data_start\": %llu, \"n_kv\": %zu, "
               "\"n_tensors\": %zu,\n \"meta\": [",
            in.version, in.big_endian ? "true" : "false", in.alignment, (unsigned long long)in.data_start, in.n_meta,
            in.n_tensors);
    for (size_t i = 0; i < in.n_meta; i++) {
        const pagein_meta *m = pagein_meta_at(f, i);
        fprintf(o, "%s\n  {\"key\": ", i ? "," : "");
        jstr(o, m->key, m->key_len);
        fprintf(o, ", \"type\": %d, \"value\": ", (int)m->type);
        switch (m->type) {
        case PAGEIN_META_U8: case PAGEIN_META_U16: case PAGEIN_META_U32: case PAGEIN_META_U64:
            fprintf(o, "%llu", (unsigned long long)m->v.u);
            break;
        case PAGEIN_META_I8: case PAGEIN_META_I16: case PAGEIN_META_I32: case PAGEIN_META_I64:
            fprintf(o, "%lld", (long long)m->v.i);
            break;
        case PAGEIN_META_BOOL: fprintf(o, "%d", m->v.b ? 1 : 0); break;
        case PAGEIN_META_F32: case PAGEIN_META_F64: fprintf(o, "\"%a\"", m->v.f); break;
        case PAGEIN_META_STRING: fprintf(o, "{\"len\": %llu}", (unsigned long long)m->str_len); break;
        case PAGEIN_META_ARRAY:
            fprintf(o, "{\"elem_type\": %d, \"count\": %llu}", (int)m->elem_type, (unsigned long long)m->count);
            break;
        }
        fputc('}', o);
    }
    fprintf(o, "],\n \"tensors\": [");
    for (size_t i = 0; i < in.n_tensors; i++) {
        const pagein_tensor *t = pagein_tensor_at(f, i);
        uint64_t ne[4];
        uint32_t nd = pagein_tensor_ggml_ne(t, ne);
        fprintf(o, "%s\n  {\"name\": ", i ? "," : "");
        jstr(o, t->name, t->name_len);
        fprintf(o, ", \"type\": %d, \"ne\": [", pagein_dtype_get(t->dtype)->gguf_id);
        for (uint32_t d = 0; d < nd; d++) fprintf(o, "%s%llu", d ? ", " : "", (unsigned long long)ne[d]);
        fprintf(o, "], \"offset\": %llu, \"nbytes\": %llu}", (unsigned long long)t->offset,
                (unsigned long long)t->nbytes);
    }
    fprintf(o, "]}\n");
}

int gt_ref_compare(const char *path) {
    if (access("/usr/bin/python3", X_OK) != 0) return 77;
    pagein_file *f;
    int rc = pagein_open(&f, path, NULL);
    if (rc) {
        printf("    %s: %s: %s\n", path, pagein_strerror(rc), pagein_last_error_detail());
        return 1;
    }
    const char *js = pt_tmppath("gguf_dump.json");
    FILE *o = fopen(js, "w");
    if (!o) {
        pagein_close(f);
        return 1;
    }
    dump(f, o);
    fclose(o);
    pagein_close(f);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/gguf_ref.py --compare '%s' '%s'", path, js);
    int st = system(cmd);
    return st == 0 ? 0 : 1;
}
