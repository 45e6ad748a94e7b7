/* test_hash.c - integrity manifests end to end: write, verify, detect a
 * changed byte, a missing tensor, a truncated manifest. Public API only. */
#include "test.h"

#include <errno.h>
#include <stdlib.h>

struct mm {
    int n;
    char last[256];
};

static void on_mm(void *ctx, const char *file, const char *tensor, size_t tlen, const char *what) {
    struct mm *m = ctx;
    m->n++;
    snprintf(m->last, sizeof m->last, "%.*s: %s", tensor ? (int)tlen : 1, tensor ? tensor : "-", what);
    (void)file;
}

static int write_model(const char *path, uint8_t salt, int with_extra) {
    static uint8_t a[4096], b[1000], c[8];
    for (size_t i = 0; i < sizeof a; i++) a[i] = (uint8_t)(i * 31 + salt);
    for (size_t i = 0; i < sizeof b; i++) b[i] = (uint8_t)(i * 7 + 3);
    memset(c, 9, sizeof c);
    uint64_t sa[2] = {32, 32}, sb[1] = {250}, sc[1] = {2};
    pagein_write_tensor t[3] = {
        {"model.layers.0.w", PAGEIN_DTYPE_F32, 2, sa, a, NULL, NULL},
        {"model.norm.weight", PAGEIN_DTYPE_F32, 1, sb, b, NULL, NULL},
        {"extra", PAGEIN_DTYPE_F32, 1, sc, c, NULL, NULL},
    };
    return pagein_safetensors_write(path, t, with_extra ? 3 : 2, NULL);
}

TEST(hash_manifest_end_to_end) {
    if (!pagein_hash_available()) SKIP_BECAUSE("built without libxxhash (libxxhash-dev not installed)");
    const char *model = pt_tmppath("h.safetensors"), *man = pt_tmppath("h.manifest");
    CHECK_OK(write_model(model, 1, 0));
    pagein_hash_stats st;
    CHECK_OK(pagein_manifest_write(model, man, NULL, &st));
    CHECK_EQ(st.tensors, 2);
    CHECK_EQ(st.files, 1);
    CHECK(st.bytes >= 5000);
    struct mm m = {0, ""};
    pagein_hash_opts o = PAGEIN_HASH_OPTS_INIT;
    o.on_mismatch = on_mm;
    o.ctx = &m;
    o.threads = 3;
    CHECK_OK(pagein_manifest_verify(model, man, &o, &st));
    CHECK_EQ(m.n, 0);

    /* same layout, other bytes in one tensor */
    CHECK_OK(write_model(model, 2, 0));
    CHECK_EQ(pagein_manifest_verify(model, man, &o, &st), PAGEIN_E_HASH_MISMATCH);
    CHECK_EQ(st.mismatches, 1);
    CHECK_EQ(m.n, 1);
    CHECK_STR(m.last, "model.layers.0.w: data hash differs from the manifest");
    CHECK(strstr(pagein_last_error_detail(), "model.layers.0.w") != NULL);

    /* one more tensor: header and layout differ */
    m.n = 0;
    CHECK_OK(write_model(model, 1, 1));
    CHECK_EQ(pagein_manifest_verify(model, man, &o, &st), PAGEIN_E_HASH_MISMATCH);
    CHECK(m.n >= 2); /* header bytes, 'extra' not in the manifest, offsets moved */

    /* a truncated manifest is an error of its own, not a pass */
    size_t len = 0;
    char *text = pt_read_file(man, &len);
    CHECK(text && len > 20);
    CHECK_EQ(pt_write_file(man, text, len - 12), 0);
    CHECK_EQ(pagein_manifest_verify(model, man, NULL, NULL), PAGEIN_E_TRUNCATED);
    free(text);
    CHECK_EQ(pagein_manifest_verify(model, pt_tmppath("none"), NULL, NULL), -ENOENT);
    return PASS;
}

TEST(hash_real_files) {
    if (!pagein_hash_available()) SKIP_BECAUSE("built without libxxhash (libxxhash-dev not installed)");
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    const char *model = pt_testdata("safetensors/ollama-minicpm3-tiny-f32.safetensors");
    const char *man = pt_tmppath("real.manifest");
    pagein_hash_stats st;
    CHECK_OK(pagein_manifest_write(model, man, NULL, &st));
    CHECK_EQ(st.tensors, 15);
    CHECK_OK(pagein_manifest_verify(model, man, NULL, &st));
    /* the two tied embeddings have identical bytes, hence identical hashes */
    size_t len = 0;
    char *text = pt_read_file(man, &len);
    CHECK(text && strstr(text, "77d992e9f1027cc61d23e08a2d117eac lm_head.weight\n"));
    CHECK(text && strstr(text, "77d992e9f1027cc61d23e08a2d117eac model.embed_tokens.weight\n"));
    {
        size_t nt = 0;
        CHECK_EQ(pagein_manifest_validate(text, len, &nt), 0);
        CHECK_EQ(nt, 15);
    }
    free(text);
    /* GGUF: header = everything before the aligned data section */
    model = pt_testdata("gguf/tinyllamas-stories-260k-q8_0.gguf");
    CHECK_OK(pagein_manifest_write(model, man, NULL, &st));
    CHECK(st.tensors > 10);
    CHECK_OK(pagein_manifest_verify(model, man, NULL, &st));
    return PASS;
}

TEST(hash_sharded_model) {
    if (!pagein_hash_available()) SKIP_BECAUSE("built without libxxhash (libxxhash-dev not installed)");
    static uint8_t a[64], b[32];
    memset(a, 1, sizeof a);
    memset(b, 2, sizeof b);
    uint64_t sa[1] = {16}, sb[1] = {8};
    pagein_write_tensor t1 = {"model.layers.0.w", PAGEIN_DTYPE_F32, 1, sa, a, NULL, NULL};
    pagein_write_tensor t2 = {"model.layers.1.w", PAGEIN_DTYPE_F32, 1, sb, b, NULL, NULL};
    CHECK_OK(pagein_safetensors_write(pt_tmppath("sh-00001-of-00002.safetensors"), &t1, 1, NULL));
    CHECK_OK(pagein_safetensors_write(pt_tmppath("sh-00002-of-00002.safetensors"), &t2, 1, NULL));
    const char *ix = "{\"metadata\":{\"total_size\":96},\"weight_map\":{"
                     "\"model.layers.0.w\":\"sh-00001-of-00002.safetensors\","
                     "\"model.layers.1.w\":\"sh-00002-of-00002.safetensors\"}}";
    const char *ixp = pt_tmppath("sh.safetensors.index.json"), *man = pt_tmppath("sh.manifest");
    CHECK_EQ(pt_write_file(ixp, ix, strlen(ix)), 0);
    pagein_hash_stats st;
    CHECK_OK(pagein_manifest_write(ixp, man, NULL, &st));
    CHECK_EQ(st.files, 2);
    CHECK_EQ(st.tensors, 2);
    size_t len = 0;
    char *text = pt_read_file(man, &len);
    CHECK(text && strstr(text, " sh-00002-of-00002.safetensors\n"));
    CHECK(text && strstr(text, "\ntensor 1 "));
    free(text);
    CHECK_OK(pagein_manifest_verify(ixp, man, NULL, &st));
    /* the second shard changes: only its tensor is reported */
    memset(b, 3, sizeof b);
    CHECK_OK(pagein_safetensors_write(pt_tmppath("sh-00002-of-00002.safetensors"), &t2, 1, NULL));
    CHECK_EQ(pagein_manifest_verify(ixp, man, NULL, &st), PAGEIN_E_HASH_MISMATCH);
    CHECK_EQ(st.mismatches, 1);
    CHECK(strstr(pagein_last_error_detail(), "model.layers.1.w") != NULL);
    return PASS;
}
