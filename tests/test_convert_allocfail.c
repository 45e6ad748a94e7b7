/* test_convert_allocfail.c - WHITE-BOX (src/internal.h: pi_alloc_fail_after):
 * a sharded conversion (GGUF input with metadata arrays, dequantized) with
 * its 1st, 2nd, ... allocation failing returns an error, leaves no shard,
 * index or temporary directory, and leaves an existing set untouched. */
#include "test.h"
#include "../src/internal.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

/* entries of dir, and a checksum of their names and sizes */
static uint64_t dir_state(const char *dir, int *n) {
    DIR *d = opendir(dir);
    struct dirent *e;
    uint64_t h = 1469598103934665603ull;
    *n = 0;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[600];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        uint64_t sz = stat(p, &sb) == 0 ? (uint64_t)sb.st_size : 0;
        uint64_t x = sz;
        for (const char *c = e->d_name; *c; c++) x = x * 131 + (uint8_t)*c;
        h += x * 0x9E3779B97F4A7C15ull; /* order-independent */
        (*n)++;
    }
    if (d) closedir(d);
    return h;
}

TEST(convert_sharded_allocfail) {
    const char *g = pt_tmppath("af.gguf");
    pagein_gguf_writer *w = NULL;
    CHECK_OK(pagein_gguf_writer_new(&w, NULL));
    if (!w) return FAIL;
    static uint8_t blocks[4][8 * 34];
    uint64_t shape[1] = {256};
    const char *toks[2] = {"a", "b"};
    CHECK_OK(pagein_gguf_set_str_array(w, "tokenizer.ggml.tokens", toks, NULL, 2));
    CHECK_OK(pagein_gguf_set_u32(w, "llama.block_count", 4));
    for (int i = 0; i < 4; i++) {
        char name[32];
        snprintf(name, sizeof name, "blk.%d.w", i);
        for (size_t b = 0; b < 8; b++) blocks[i][b * 34 + 1] = 0x3C; /* d = 1 */
        pagein_write_tensor t = {.name = name, .dtype = PAGEIN_DTYPE_Q8_0, .ndim = 1, .shape = shape, .data = blocks[i]};
        CHECK_OK(pagein_gguf_add_tensor(w, &t));
    }
    CHECK_OK(pagein_gguf_write(w, g));
    pagein_gguf_writer_free(w);
    pagein_file *f = NULL;
    CHECK_OK(pagein_open(&f, g, NULL));
    if (!f) return FAIL;
    char dir[512], out[600];
    snprintf(dir, sizeof dir, "%s/afset", pt_tmpdir());
    mkdir(dir, 0700);
    snprintf(out, sizeof out, "%s/model.safetensors", dir);
    pagein_convert_opts co = PAGEIN_CONVERT_OPTS_INIT;
    co.dequantize = PAGEIN_DTYPE_F32;
    co.max_shard_bytes = 1024; /* one 1 KiB tensor per shard: 4 shards */
    /* an existing set first */
    pagein_convert_stats st;
    CHECK_OK(pagein_convert_safetensors(f, out, &co, &st));
    CHECK_EQ(st.shards, 4);
    int n0, n1;
    uint64_t s0 = dir_state(dir, &n0);
    CHECK_EQ(n0, 5);
    co.dequantize = PAGEIN_DTYPE_F16; /* different bytes: 2 tensors per shard */
    int k, rc = -1;
    for (k = 0; k < 500; k++) {
        pi_alloc_fail_after(k);
        rc = pagein_convert_safetensors(f, out, &co, NULL);
        pi_alloc_fail_after(-1);
        if (rc == 0) break;
        CHECK_EQ(rc, -ENOMEM);
        uint64_t s1 = dir_state(dir, &n1);
        if (s1 != s0 || n1 != n0) {
            printf("    allocation %d failing changed the existing set (%d entries)\n", k, n1);
            pt_failed = 1;
            break;
        }
    }
    printf("    %d allocations, each failed in turn\n", k);
    CHECK_OK(rc);
    s0 = dir_state(dir, &n0);
    CHECK_EQ(n0, 3); /* 2 shards and the index: the old 4 are gone */
    pagein_close(f);
    return PASS;
}
