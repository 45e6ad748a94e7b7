/* test_core.c - dtype table, layer naming, errors, version. */
#include "test.h"

#include <stdlib.h>

TEST(dtype_table) {
    const pagein_dtype_info *i = pagein_dtype_get(PAGEIN_DTYPE_BF16);
    CHECK(i != NULL);
    CHECK_STR(i->name, "BF16");
    CHECK_EQ(i->bits, 16);
    CHECK_EQ(pagein_dtype_from_name("F8_E4M3", 7), PAGEIN_DTYPE_F8_E4M3);
    CHECK_EQ(pagein_dtype_from_name("f32", 3), PAGEIN_DTYPE_INVALID); /* case-sensitive */
    CHECK_EQ(pagein_dtype_from_gguf(8), PAGEIN_DTYPE_Q8_0);
    CHECK_EQ(pagein_dtype_from_gguf(4), PAGEIN_DTYPE_INVALID);  /* removed Q4_2 */
    CHECK_EQ(pagein_dtype_from_gguf(31), PAGEIN_DTYPE_INVALID); /* removed Q4_0_4_4 */
    CHECK_EQ(pagein_dtype_from_gguf(43), PAGEIN_DTYPE_INVALID);
    CHECK(pagein_dtype_get(PAGEIN_DTYPE_INVALID) == NULL);
    CHECK(pagein_dtype_get(PAGEIN_DTYPE_COUNT) == NULL);
    /* every GGUF id 0..42 maps to a dtype or is one of the removed ids */
    int mapped = 0;
    for (uint32_t id = 0; id < 43; id++) {
        pagein_dtype d = pagein_dtype_from_gguf(id);
        int removed = id == 4 || id == 5 || (id >= 31 && id <= 33) || (id >= 36 && id <= 38);
        CHECK(removed == (d == PAGEIN_DTYPE_INVALID));
        if (d != PAGEIN_DTYPE_INVALID) {
            mapped++;
            CHECK_EQ(pagein_dtype_get(d)->gguf_id, id);
        }
    }
    CHECK_EQ(mapped, 43 - 8);
    /* every dtype's name round-trips */
    for (int d = 1; d < PAGEIN_DTYPE_COUNT; d++) {
        const char *n = pagein_dtype_get((pagein_dtype)d)->name;
        CHECK_EQ(pagein_dtype_from_name(n, strlen(n)), d);
    }
    return PASS;
}

TEST(dtype_nbytes) {
    uint64_t n = 0;
    CHECK_OK(pagein_dtype_nbytes(PAGEIN_DTYPE_F32, 6, &n));
    CHECK_EQ(n, 24);
    CHECK_OK(pagein_dtype_nbytes(PAGEIN_DTYPE_F4, 2, &n));
    CHECK_EQ(n, 1);
    CHECK_EQ(pagein_dtype_nbytes(PAGEIN_DTYPE_F4, 3, &n), PAGEIN_E_MISALIGNED_SLICE);
    CHECK_OK(pagein_dtype_nbytes(PAGEIN_DTYPE_F6_E2M3, 4, &n));
    CHECK_EQ(n, 3);
    CHECK_OK(pagein_dtype_nbytes(PAGEIN_DTYPE_Q8_0, 64, &n));
    CHECK_EQ(n, 68);
    CHECK_EQ(pagein_dtype_nbytes(PAGEIN_DTYPE_Q8_0, 33, &n), PAGEIN_E_MISALIGNED_SLICE);
    CHECK_EQ(pagein_dtype_nbytes(PAGEIN_DTYPE_F64, UINT64_MAX / 4, &n), PAGEIN_E_OVERFLOW);
    CHECK_OK(pagein_dtype_nbytes(PAGEIN_DTYPE_BOOL, 0, &n));
    CHECK_EQ(n, 0);
    return PASS;
}

static int32_t layer(const char *n, int *tail) { return pagein_layer_from_name(n, strlen(n), tail); }

TEST(layer_names) {
    int tail = -1;
    CHECK_EQ(layer("model.layers.12.self_attn.q_proj.weight", &tail), 12);
    CHECK_EQ(tail, 0);
    CHECK_EQ(layer("layers.3.attention.wq.weight", NULL), 3);
    CHECK_EQ(layer("transformer.h.7.attn.c_attn.weight", NULL), 7);
    CHECK_EQ(layer("h.0.mlp.c_fc.weight", NULL), 0);
    CHECK_EQ(layer("transformer.blocks.2.ffn.up_proj.weight", NULL), 2);
    CHECK_EQ(layer("encoder.block.5.layer.0.SelfAttention.q.weight", NULL), 5);
    CHECK_EQ(layer("bert.encoder.layer.11.output.dense.weight", NULL), 11);
    CHECK_EQ(layer("blk.10.attn_q.weight", NULL), 10);
    CHECK_EQ(layer("enc.blk.4.ffn_up.weight", NULL), 4);
    CHECK_EQ(layer("v.blk.1.attn_k.weight", NULL), 1);
    CHECK_EQ(layer("base_model.model.model.layers.9.mlp.down_proj.lora_A.weight", NULL), 9);
    CHECK_EQ(layer("model.layers.x.weight", NULL), -1);
    CHECK_EQ(layer("model.layers.12", NULL), 12);
    CHECK_EQ(layer("mylayers.3.weight", NULL), -1); /* whole segment only */
    CHECK_EQ(layer("model.embed_tokens.weight", &tail), -1);
    CHECK_EQ(tail, 0);
    CHECK_EQ(layer("model.norm.weight", &tail), -1);
    CHECK_EQ(tail, 1);
    CHECK_EQ(layer("lm_head.weight", &tail), -1);
    CHECK_EQ(tail, 1);
    CHECK_EQ(layer("output_norm.weight", &tail), -1);
    CHECK_EQ(tail, 1);
    CHECK_EQ(layer("token_embd.weight", &tail), -1);
    CHECK_EQ(tail, 0);
    CHECK_EQ(layer("model.layers.99999999999.x", NULL), -1); /* no overflow */
    return PASS;
}

TEST(strerror_covers_codes) {
    for (int c = PAGEIN_E_BASE; c >= PAGEIN_E_CANCELLED; c--) {
        const char *s = pagein_strerror(c);
        CHECK(s && strcmp(s, "unknown error") != 0);
    }
    CHECK_STR(pagein_strerror(0), "success");
    CHECK(strstr(pagein_strerror(-2), "No such file") != NULL);
    CHECK_EQ(pagein_version(), PAGEIN_VERSION_MAJOR * 10000 + PAGEIN_VERSION_MINOR * 100 + PAGEIN_VERSION_PATCH);
    return PASS;
}

TEST(open_missing_file) {
    pagein_file *f = (pagein_file *)0x1;
    int rc = pagein_open(&f, "/nonexistent/x.safetensors", NULL);
    CHECK_EQ(rc, -2);
    CHECK(f == (pagein_file *)0x1); /* untouched on failure */
    CHECK(strstr(pagein_last_error_detail(), "/nonexistent/x.safetensors") != NULL);
    pagein_close(NULL);
    return PASS;
}

TEST(open_private_is_copy_on_write) {
    const char *p = pt_tmppath("cow.safetensors");
    float v[4] = {1, 2, 3, 4};
    uint64_t shape[1] = {4};
    pagein_write_tensor wt = {.name = "w", .dtype = PAGEIN_DTYPE_F32, .ndim = 1, .shape = shape, .data = v};
    CHECK_OK(pagein_safetensors_write(p, &wt, 1, NULL));
    pagein_open_opts o = PAGEIN_OPEN_OPTS_INIT;
    o.flags = PAGEIN_OPEN_PRIVATE;
    pagein_file *a = NULL, *b = NULL;
    CHECK_OK(pagein_open(&a, p, &o));
    CHECK_OK(pagein_open(&b, p, NULL));
    if (!a || !b) return FAIL;
    float *wa = (float *)pagein_tensor_get(a, "w")->data;
    wa[0] = 42; /* writable, private to this mapping */
    float seen;
    memcpy(&seen, pagein_tensor_get(b, "w")->data, sizeof seen);
    CHECK(seen == 1.0f); /* the shared mapping and the file are untouched */
    pagein_close(a);
    pagein_close(b);
    size_t len = 0;
    unsigned char *bytes = pt_read_file(p, &len);
    CHECK(bytes && len >= 16);
    if (bytes) {
        memcpy(&seen, bytes + len - 16, sizeof seen);
        CHECK(seen == 1.0f);
    }
    free(bytes);
    return PASS;
}
