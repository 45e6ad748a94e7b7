/* test_convert.c - the library converter's options: dequantization of
 * quantized GGUF tensors (streamed in chunks, equal to
 * pagein_tensor_dequantize on the whole tensor), GGUF metadata carried into
 * __metadata__ with what cannot be carried reported through on_skip, and
 * the output-size cap refusing before anything is written. */
#include "test.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* A GGUF file with a Q4_K tensor of 3 x 2^20 elements (more than one 4 MiB
 * output chunk), a Q8_0 tensor, an F16 tensor and some metadata. */
static int make_gguf(const char *path, uint8_t **q4k, size_t *q4k_len) {
    uint64_t st = 12345;
    pagein_gguf_writer *w = NULL;
    int rc = pagein_gguf_writer_new(&w, NULL);
    if (rc) return rc;
    size_t n4 = (size_t)3 << 20, nb4 = n4 / 256 * 144;
    uint8_t *a = malloc(nb4), *b = malloc(64 / 32 * 34);
    uint16_t h[8] = {0x3C00, 0xC000, 0x0001, 0x7BFF, 0, 0x8000, 0x3800, 0x4000};
    for (size_t i = 0; i < nb4; i++) a[i] = (uint8_t)pt_rand(&st);
    for (size_t k = 0; k < nb4 / 144; k++) { /* ordinary scales, so values are finite */
        a[k * 144 + 0] = 0x00, a[k * 144 + 1] = (uint8_t)(0x30 + (k & 7));
        a[k * 144 + 2] = 0x00, a[k * 144 + 3] = (uint8_t)(0x28 + (k & 3));
    }
    for (size_t i = 0; i < 68; i++) b[i] = (uint8_t)pt_rand(&st);
    b[0] = 0x00, b[1] = 0x3C, b[34] = 0x00, b[35] = 0x38;
    uint64_t s4[2] = {3 * 1024, 1024}, s8[1] = {64}, sh[1] = {8};
    pagein_write_tensor t4 = {.name = "blk.0.w", .dtype = PAGEIN_DTYPE_Q4_K, .ndim = 2, .shape = s4, .data = a};
    pagein_write_tensor t8 = {.name = "blk.1.w", .dtype = PAGEIN_DTYPE_Q8_0, .ndim = 1, .shape = s8, .data = b};
    pagein_write_tensor tf = {.name = "norm", .dtype = PAGEIN_DTYPE_F16, .ndim = 1, .shape = sh, .data = h};
    const char *toks[3] = {"<s>", "a\"b", "\xc3\xa9"};
    float scores[3] = {0.0f, -1.5f, 1e-5f};
    if (!rc) rc = pagein_gguf_set_str(w, "general.architecture", "llama", 5);
    if (!rc) rc = pagein_gguf_set_u32(w, "llama.block_count", 2);
    if (!rc) rc = pagein_gguf_set_str_array(w, "tokenizer.ggml.tokens", toks, NULL, 3);
    if (!rc) rc = pagein_gguf_set_array(w, "tokenizer.ggml.scores", PAGEIN_META_F32, scores, 3);
    if (!rc) rc = pagein_gguf_set_str(w, "bad.utf8", "\xff\xfe", 2);
    if (!rc) rc = pagein_gguf_set_bool(w, "flag", 1);
    if (!rc) rc = pagein_gguf_add_tensor(w, &t4);
    if (!rc) rc = pagein_gguf_add_tensor(w, &t8);
    if (!rc) rc = pagein_gguf_add_tensor(w, &tf);
    if (!rc) rc = pagein_gguf_write(w, path);
    pagein_gguf_writer_free(w);
    free(b);
    *q4k = a, *q4k_len = nb4;
    return rc;
}

struct skips {
    int n;
    char key[4][64];
};

static void on_skip(void *ctx, const char *key, size_t len, const char *why) {
    struct skips *s = ctx;
    if (s->n < 4) snprintf(s->key[s->n], sizeof s->key[0], "%.*s", (int)len, key);
    s->n++;
    (void)why;
}

TEST(convert_dequantize_library) {
    const char *g = pt_tmppath("deq.gguf"), *o = pt_tmppath("deq.safetensors");
    uint8_t *q4k = NULL;
    size_t q4k_len = 0;
    CHECK_OK(make_gguf(g, &q4k, &q4k_len));
    pagein_file *f = NULL, *s = NULL;
    CHECK_OK(pagein_open(&f, g, NULL));
    if (!f) {
        free(q4k);
        return FAIL;
    }
    /* without --dequantize: refused, naming the tensor */
    CHECK_EQ(pagein_convert_safetensors(f, o, NULL, NULL), PAGEIN_E_BAD_DTYPE);
    CHECK(strstr(pagein_last_error_detail(), "blk.0.w") != NULL);
    CHECK(access(o, F_OK) != 0);
    struct skips sk = {0};
    pagein_convert_opts co = PAGEIN_CONVERT_OPTS_INIT;
    co.dequantize = PAGEIN_DTYPE_BF16;
    co.on_skip = on_skip, co.skip_ctx = &sk;
    pagein_convert_stats st;
    CHECK_OK(pagein_convert_safetensors(f, o, &co, &st));
    CHECK_EQ(st.dequantized, 2);
    CHECK_EQ(st.cast, 0);
    CHECK_EQ(st.bytes, ((uint64_t)3 << 20) * 2 + 64 * 2 + 8 * 2);
    CHECK_EQ(sk.n, 1);
    CHECK_STR(sk.key[0], "bad.utf8");
    CHECK_OK(pagein_open(&s, o, NULL));
    if (s) {
        /* streamed in chunks == dequantized in one call */
        const pagein_tensor *a = pagein_tensor_get(f, "blk.0.w"), *b = pagein_tensor_get(s, "blk.0.w");
        CHECK(a && b && b->dtype == PAGEIN_DTYPE_BF16 && b->nbytes == a->nelements * 2);
        if (a && b) {
            uint16_t *want = malloc(a->nelements * 2);
            CHECK_OK(pagein_tensor_dequantize(a, a->data, a->nbytes, PAGEIN_DTYPE_BF16, want, a->nelements * 2));
            CHECK(memcmp(want, b->data, a->nelements * 2) == 0);
            free(want);
        }
        const pagein_tensor *n16 = pagein_tensor_get(s, "norm");
        CHECK(n16 && n16->dtype == PAGEIN_DTYPE_F16); /* plain types are kept */
        /* metadata as strings, arrays JSON-encoded */
        const char *v;
        size_t l;
        CHECK_OK(pagein_meta_get_str(s, "llama.block_count", &v, &l));
        CHECK(l == 1 && v[0] == '2');
        CHECK_OK(pagein_meta_get_str(s, "tokenizer.ggml.tokens", &v, &l));
        CHECK_STR(v, "[\"<s>\", \"a\\\"b\", \"\xc3\xa9\"]");
        CHECK_OK(pagein_meta_get_str(s, "tokenizer.ggml.scores", &v, &l));
        CHECK_STR(v, "[0.0, -1.5, 1e-05]");
        CHECK_OK(pagein_meta_get_str(s, "flag", &v, &l));
        CHECK_STR(v, "true");
        CHECK(pagein_meta_find(s, "bad.utf8") == NULL);
        pagein_close(s);
    }
    /* GGUF output keeps every key, the invalid string included */
    const char *g2 = pt_tmppath("deq2.gguf");
    sk.n = 0;
    co.dequantize = PAGEIN_DTYPE_INVALID;
    CHECK_OK(pagein_convert_gguf(f, g2, &co, &st));
    CHECK_EQ(sk.n, 0);
    pagein_file *f2 = NULL;
    CHECK_OK(pagein_open(&f2, g2, NULL));
    if (f2) {
        CHECK_EQ(pagein_meta_count(f2), pagein_meta_count(f));
        const pagein_meta *m;
        CHECK_OK(pagein_meta_get_array(f2, "tokenizer.ggml.tokens", &m));
        CHECK_EQ(m->count, 3);
        CHECK(pagein_tensor_get(f2, "blk.0.w")->dtype == PAGEIN_DTYPE_Q4_K);
        pagein_close(f2);
    }
    pagein_close(f);
    free(q4k);
    return PASS;
}

TEST(convert_output_cap) {
    const char *in = pt_tmppath("cap.safetensors"), *o = pt_tmppath("cap-out.safetensors");
    uint64_t shape[1] = {1024};
    float d[1024] = {0};
    pagein_write_tensor t = {.name = "x", .dtype = PAGEIN_DTYPE_F32, .ndim = 1, .shape = shape, .data = d};
    CHECK_OK(pagein_safetensors_write(in, &t, 1, NULL));
    pagein_file *f = NULL;
    CHECK_OK(pagein_open(&f, in, NULL));
    if (!f) return FAIL;
    pagein_convert_opts co = PAGEIN_CONVERT_OPTS_INIT;
    pagein_convert_stats st;
    co.max_output_bytes = 4096; /* the data alone is 4096: with the header it does not fit */
    CHECK_EQ(pagein_convert_safetensors(f, o, &co, NULL), PAGEIN_E_LIMIT);
    CHECK(strstr(pagein_last_error_detail(), "cap-out.safetensors") != NULL);
    CHECK(access(o, F_OK) != 0);
    CHECK_EQ(pagein_convert_gguf(f, pt_tmppath("cap.gguf"), &co, NULL), PAGEIN_E_LIMIT);
    co.max_output_bytes = 1 << 20;
    CHECK_OK(pagein_convert_safetensors(f, o, &co, &st));
    CHECK(st.output_bound >= 4096 && st.output_bound < (1 << 20));
    struct stat sb;
    CHECK(stat(o, &sb) == 0 && (uint64_t)sb.st_size <= st.output_bound);
    co.max_output_bytes = UINT64_MAX; /* no check */
    CHECK_OK(pagein_convert_safetensors(f, o, &co, NULL));
    co.dequantize = PAGEIN_DTYPE_Q8_0;
    CHECK_EQ(pagein_convert_safetensors(f, o, &co, NULL), PAGEIN_E_INVALID);
    pagein_close(f);
    return PASS;
}

/* The GGUF writer's whole-blocks flag: rows of 172 Q8_0 elements (the
 * layout of tinyllamas) are written only when asked for, and only when the
 * element count is a whole number of blocks. */
TEST(gguf_write_whole_blocks_flag) {
    uint64_t shape[2] = {8, 172}, bad[2] = {1, 172};
    uint8_t data[8 * 172 / 32 * 34] = {0};
    pagein_write_tensor t = {.name = "w", .dtype = PAGEIN_DTYPE_Q8_0, .ndim = 2, .shape = shape, .data = data};
    pagein_gguf_writer *w = NULL;
    CHECK_OK(pagein_gguf_writer_new(&w, NULL));
    CHECK_EQ(pagein_gguf_add_tensor(w, &t), PAGEIN_E_BAD_TENSOR_INFO);
    pagein_gguf_writer_free(w);
    pagein_gguf_write_opts o = PAGEIN_GGUF_WRITE_OPTS_INIT;
    o.flags = PAGEIN_GGUF_WRITE_WHOLE_BLOCKS;
    w = NULL;
    CHECK_OK(pagein_gguf_writer_new(&w, &o));
    CHECK_OK(pagein_gguf_add_tensor(w, &t));
    t.name = "v", t.shape = bad;
    CHECK(pagein_gguf_add_tensor(w, &t) < 0); /* 172 elements: not whole blocks */
    const char *p = pt_tmppath("whole.gguf");
    CHECK_OK(pagein_gguf_write(w, p));
    pagein_gguf_writer_free(w);
    pagein_file *f = NULL;
    CHECK_OK(pagein_open(&f, p, NULL));
    if (f) {
        const pagein_tensor *r = pagein_tensor_get(f, "w");
        CHECK(r && r->nbytes == sizeof data && r->shape[1] == 172);
        pagein_close(f);
    }
    return PASS;
}
