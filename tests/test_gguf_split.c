/* test_gguf_split.c - split GGUF sets. White-box: includes src/internal.h
 * for pi_gguf_split_paths / pi_gguf_split_check (the load engine's helpers;
 * pagein_model_open tests live with the load engine). */
#include "../src/format/format.h"

#include <stdlib.h>

#include "test.h"

/* Writes shard i (0-based) of n with the given split keys; each shard has
 * two F32 tensors blk.<2i>.w and blk.<2i+1>.w, or `dup` names. */
static int write_shard(const char *path, int i, int n, int no, int count, int tcount, const char *dup) {
    pagein_gguf_writer *w;
    int rc = pagein_gguf_writer_new(&w, NULL);
    if (rc) return rc;
    uint16_t u16 = (uint16_t)no, c16 = (uint16_t)count;
    pagein_gguf_set_str(w, "general.architecture", "llama", 5);
    if (no >= 0) pagein_gguf_set_scalar(w, "split.no", PAGEIN_META_U16, &u16);
    if (count >= 0) pagein_gguf_set_scalar(w, "split.count", PAGEIN_META_U16, &c16);
    if (tcount >= 0) pagein_gguf_set_i32(w, "split.tensors.count", tcount);
    static float data[8];
    uint64_t sh[1] = {8};
    for (int k = 0; k < 2; k++) {
        char name[32];
        if (dup && k == 0) snprintf(name, sizeof name, "%s", dup);
        else snprintf(name, sizeof name, "blk.%d.w", 2 * i + k);
        pagein_write_tensor t = {name, PAGEIN_DTYPE_F32, 1, sh, data, NULL, NULL};
        pagein_gguf_add_tensor(w, &t);
    }
    (void)n;
    rc = pagein_gguf_write(w, path);
    pagein_gguf_writer_free(w);
    return rc;
}

static int open_set(const char *any, pagein_file **files, size_t *n) {
    char **paths;
    int rc = pi_gguf_split_paths(any, &paths, n);
    if (rc < 0) return rc;
    if (rc == 0) {
        *n = 1;
        return pagein_open(&files[0], any, NULL);
    }
    for (size_t i = 0; i < *n; i++) {
        rc = pagein_open(&files[i], paths[i], NULL);
        if (rc) {
            for (size_t k = 0; k < i; k++) pagein_close(files[k]);
            break;
        }
    }
    pi_gguf_split_free_paths(paths, *n);
    if (rc) return rc;
    rc = pi_gguf_split_check((const pagein_file *const *)files, *n);
    if (rc) {
        for (size_t k = 0; k < *n; k++) pagein_close(files[k]);
    }
    return rc;
}

static void close_set(pagein_file **files, size_t n) {
    for (size_t k = 0; k < n; k++) pagein_close(files[k]);
}

TEST(gguf_split_names) {
    char **p;
    size_t n;
    CHECK_EQ(pi_gguf_split_paths("/d/model-00002-of-00003.gguf", &p, &n), 1);
    CHECK_EQ(n, 3);
    if (p) {
        CHECK_STR(p[0], "/d/model-00001-of-00003.gguf");
        CHECK_STR(p[2], "/d/model-00003-of-00003.gguf");
        pi_gguf_split_free_paths(p, n);
    }
    CHECK_EQ(pi_gguf_split_paths("model.gguf", &p, &n), 0);
    CHECK(p == NULL && n == 0);
    CHECK_EQ(pi_gguf_split_paths("model-0001-of-0003.gguf", &p, &n), 0);
    CHECK_EQ(pi_gguf_split_paths("/d/-00001-of-00003.gguf", &p, &n), 0);
    CHECK_EQ(pi_gguf_split_paths("m-00004-of-00003.gguf", &p, &n), PAGEIN_E_BAD_INDEX);
    CHECK_EQ(pi_gguf_split_paths("m-00000-of-00003.gguf", &p, &n), PAGEIN_E_BAD_INDEX);
    return PASS;
}

TEST(gguf_split_sets) {
    char path[3][512];
    for (int i = 0; i < 3; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "m-%05d-of-00003.gguf", i + 1);
        snprintf(path[i], sizeof path[i], "%s", pt_tmppath(nm));
    }
    pagein_file *files[8];
    size_t n;
    /* a good set opens from any shard */
    for (int i = 0; i < 3; i++) CHECK_OK(write_shard(path[i], i, 3, i, 3, 6, NULL));
    for (int i = 0; i < 3; i++) {
        CHECK_OK(open_set(path[i], files, &n));
        CHECK_EQ(n, 3);
        if (n == 3) {
            CHECK(pagein_tensor_get(files[2], "blk.5.w") != NULL);
            close_set(files, n);
        }
    }
    /* split.no out of place */
    CHECK_OK(write_shard(path[1], 1, 3, 2, 3, 6, NULL));
    CHECK_EQ(open_set(path[0], files, &n), PAGEIN_E_BAD_INDEX);
    CHECK(strstr(pagein_last_error_detail(), "split.no") != NULL);
    /* split.count disagrees */
    CHECK_OK(write_shard(path[1], 1, 3, 1, 4, 6, NULL));
    CHECK_EQ(open_set(path[0], files, &n), PAGEIN_E_BAD_INDEX);
    CHECK(strstr(pagein_last_error_detail(), "split.count") != NULL);
    /* split.tensors.count disagrees, or does not match the total */
    CHECK_OK(write_shard(path[1], 1, 3, 1, 3, 7, NULL));
    CHECK_EQ(open_set(path[0], files, &n), PAGEIN_E_BAD_INDEX);
    for (int i = 0; i < 3; i++) CHECK_OK(write_shard(path[i], i, 3, i, 3, 7, NULL));
    CHECK_EQ(open_set(path[0], files, &n), PAGEIN_E_BAD_INDEX);
    CHECK(strstr(pagein_last_error_detail(), "split.tensors.count") != NULL);
    /* a key missing */
    for (int i = 0; i < 3; i++) CHECK_OK(write_shard(path[i], i, 3, i, 3, 6, NULL));
    CHECK_OK(write_shard(path[2], 2, 3, -1, 3, 6, NULL));
    CHECK_EQ(open_set(path[0], files, &n), PAGEIN_E_BAD_INDEX);
    /* a tensor name in two shards */
    CHECK_OK(write_shard(path[2], 2, 3, 2, 3, 6, "blk.0.w"));
    CHECK_EQ(open_set(path[0], files, &n), PAGEIN_E_DUPLICATE);
    /* a missing shard */
    CHECK_OK(write_shard(path[2], 2, 3, 2, 3, 6, NULL));
    remove(path[1]);
    CHECK_EQ(open_set(path[0], files, &n), -ENOENT);
    /* a single file, no split keys */
    const char *single = pt_tmppath("single.gguf");
    CHECK_OK(write_shard(single, 0, 1, -1, -1, -1, NULL));
    CHECK_OK(open_set(single, files, &n));
    if (n == 1) close_set(files, 1);
    return PASS;
}

/* The load engine's pagein_model_open uses the helpers above: any shard
 * opens the whole set as one model; an inconsistent set is refused. */
TEST(gguf_split_model_open) {
    char path[3][512];
    for (int i = 0; i < 3; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "mo-%05d-of-00003.gguf", i + 1);
        snprintf(path[i], sizeof path[i], "%s", pt_tmppath(nm));
        CHECK_OK(write_shard(path[i], i, 3, i, 3, 6, NULL));
    }
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_LAZY;
    for (int i = 0; i < 3; i++) {
        pagein_model *m = NULL;
        CHECK_OK(pagein_model_open(&m, path[i], &o));
        if (!m) continue;
        CHECK_EQ(pagein_model_file_count(m), 3);
        CHECK_EQ(pagein_model_tensor_count(m), 6);
        const pagein_tensor *t = pagein_model_tensor_get(m, "blk.5.w");
        CHECK(t && t->file == 2);
        CHECK_EQ(pagein_model_layer_count(m), 6);
        pagein_model_close(m);
    }
    CHECK_OK(write_shard(path[1], 1, 3, 1, 3, 5, NULL));
    pagein_model *m = NULL;
    CHECK_EQ(pagein_model_open(&m, path[0], &o), PAGEIN_E_BAD_INDEX);
    CHECK(m == NULL);
    return PASS;
}
