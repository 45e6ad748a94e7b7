/* test_gguf.c - GGUF reader, metadata getters and writer (public API only).
 * Real files come from tests/data/real/gguf; their expected values
 * come from the independent Python reader tests/gguf_ref.py. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/format/format.h" /* white-box: pi_gguf_writer_layout */
#include "gguf_testutil.h"
#include "test.h"


static int open_mem(pagein_file **f, const struct gt_buf *b) {
    return pagein_open_memory(f, b->p, b->n, "test.gguf", NULL);
}

/* Every real file opens and agrees with the Python reader on the version,
 * alignment, data start, every metadata key/type/value and every tensor's
 * name, type, dims, offset and size. The directory is listed so that a
 * file added later is covered too. */
TEST(gguf_real_files_match_reference) {
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    DIR *d = opendir(pt_testdata("gguf"));
    if (!d) SKIP_BECAUSE("no gguf test data");
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 5, ".gguf") != 0) continue;
        char rel[512];
        snprintf(rel, sizeof rel, "gguf/%s", e->d_name);
        int rc = gt_ref_compare(pt_testdata(rel));
        if (rc == 77) {
            closedir(d);
            SKIP_BECAUSE("/usr/bin/python3 missing");
        }
        if (rc) printf("    %s disagrees with tests/gguf_ref.py\n", rel);
        CHECK_EQ(rc, 0);
        n++;
    }
    closedir(d);
    CHECK(n >= 6); /* the six files of PROVENANCE.md */
    return PASS;
}

TEST(gguf_real_files_facts) {
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    pagein_file *f;
    pagein_file_info in;
    /* spec section 5: data starts */
    CHECK_OK(pagein_open(&f, pt_testdata("gguf/tinyllamas-stories-260k-q8_0.gguf"), NULL));
    if (f) {
        pagein_file_get_info(f, &in);
        CHECK_EQ(in.version, 2);
        CHECK_EQ(in.data_start, 14240);
        CHECK_EQ(in.n_tensors, 48);
        /* the old Q8_0 rows: ne0 = 172, sized nelements * 34 / 32 */
        const pagein_tensor *t = pagein_tensor_get(f, "blk.0.ffn_down.weight");
        CHECK(t != NULL);
        if (t) {
            uint64_t ne[4];
            CHECK_EQ(pagein_tensor_ggml_ne(t, ne), 2);
            CHECK_EQ(ne[0], 172);
            CHECK_EQ(t->shape[1], 172);
            CHECK_EQ(t->dtype, PAGEIN_DTYPE_Q8_0);
            CHECK_EQ(t->nbytes, 11696);
            CHECK_EQ(t->layer, 0);
        }
        /* layer order: token_embd first, blk.* by number, output last */
        CHECK_STR(pagein_tensor_by_layer(f, 0)->name, "token_embd.weight");
        CHECK_STR(pagein_tensor_by_layer(f, 47)->name, "output.weight");
        uint32_t fty;
        CHECK_OK(pagein_meta_get_u32(f, "general.file_type", &fty));
        CHECK_EQ(fty, 7);
        pagein_close(f);
    }
    CHECK_OK(pagein_open(&f, pt_testdata("gguf/zackshen-test-le-v3-align64.gguf"), NULL));
    if (f) {
        pagein_file_get_info(f, &in);
        CHECK_EQ(in.alignment, 64);
        CHECK_EQ(in.data_start, 448);
        uint32_t a;
        double fl;
        CHECK_OK(pagein_meta_get_u32(f, "answer", &a));
        CHECK_EQ(a, 42);
        CHECK_OK(pagein_meta_get_f64(f, "answer_in_float", &fl));
        CHECK(fl == 42.0);
        const pagein_tensor *t = pagein_tensor_get(f, "tensor1");
        CHECK(t && t->dtype == PAGEIN_DTYPE_F32);
        if (t) {
            float v;
            memcpy(&v, t->data, 4);
            CHECK(v == 100.0f);
        }
        const char *s;
        size_t sl;
        CHECK_OK(pagein_meta_get_str(f, "general.architecture", &s, &sl));
        CHECK(sl == 5 && memcmp(s, "llama", 5) == 0);
        pagein_close(f);
    }
    CHECK_OK(pagein_open(&f, pt_testdata("gguf/ggml-vocab-llama-spm.gguf"), NULL));
    if (f) {
        pagein_file_get_info(f, &in);
        CHECK_EQ(in.data_start, in.file_size); /* vocab-only: no padding */
        const pagein_meta *m;
        CHECK_OK(pagein_meta_get_array(f, "tokenizer.ggml.tokens", &m));
        if (m) {
            CHECK_EQ(m->elem_type, PAGEIN_META_STRING);
            CHECK_EQ(m->count, 32000);
            const char *s;
            size_t sl;
            CHECK_OK(pagein_meta_array_str(f, m, 0, &s, &sl));
            CHECK(sl == 5 && memcmp(s, "<unk>", 5) == 0);
            CHECK_OK(pagein_meta_array_str(f, m, 1, &s, &sl));
            CHECK(sl == 3 && memcmp(s, "<s>", 3) == 0);
            CHECK_EQ(pagein_meta_array_str(f, m, 32000, &s, &sl), PAGEIN_E_RANGE);
            uint64_t u;
            CHECK_EQ(pagein_meta_array_u64(f, m, 0, &u), PAGEIN_E_BAD_TYPE);
        }
        CHECK_OK(pagein_meta_get_array(f, "tokenizer.ggml.scores", &m));
        if (m) {
            double sc;
            CHECK_EQ(m->elem_type, PAGEIN_META_F32);
            CHECK_OK(pagein_meta_array_f64(f, m, 0, &sc));
        }
        int b;
        CHECK_OK(pagein_meta_get_bool(f, "tokenizer.ggml.add_bos_token", &b));
        CHECK_EQ(b, 1);
        pagein_close(f);
    }
    return PASS;
}

TEST(gguf_malformed_real_file) {
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    pagein_file *f = NULL;
    int rc = pagein_open(&f, pt_testdata("gguf/malformed/ollama-test-truncated-6bytes.gguf"), NULL);
    CHECK_EQ(rc, PAGEIN_E_TRUNCATED);
    CHECK(f == NULL);
    CHECK(strstr(pagein_last_error_detail(), "version") != NULL);
    CHECK(strstr(pagein_last_error_detail(), "ollama-test-truncated-6bytes.gguf") != NULL);
    return PASS;
}

/* ---- hand-made images: every validation rule ---------------------------- */

/* A valid v3 image with one key and one F32 [2] tensor; the mutators below
 * break one thing at a time. */
struct img_opts {
    uint32_t version;
    int be;
    uint32_t align_type; /* 0 = no general.alignment key */
    uint64_t align_val;
    uint32_t ttype;
    uint64_t ne0;
    uint64_t off;
    uint32_t nd;
    const char *name;
    const char *key2; /* second key (duplicate tests) */
    int two_tensors_same_name;
};

static void build(struct gt_buf *b, const struct img_opts *o) {
    memset(b, 0, sizeof *b);
    b->v1 = o->version == 1;
    b->be = o->be;
    uint64_t nkv = 1 + (o->align_type ? 1 : 0) + (o->key2 ? 1 : 0);
    int nt = o->two_tensors_same_name ? 2 : 1;
    gt_header(b, o->version, (uint64_t)nt, nkv);
    gt_str(b, "general.architecture");
    gt_u32(b, 8);
    gt_str(b, "llama");
    if (o->align_type) {
        gt_str(b, "general.alignment");
        gt_u32(b, o->align_type);
        if (o->align_type == 4) gt_u32(b, (uint32_t)o->align_val);
        else gt_u64(b, o->align_val);
    }
    if (o->key2) {
        gt_str(b, o->key2);
        gt_u32(b, 4);
        gt_u32(b, 7);
    }
    uint64_t ne[8] = {o->ne0, 1, 1, 1, 1, 1, 1, 1};
    gt_tinfo(b, o->name, o->nd, ne, o->ttype, o->off);
    if (nt == 2) gt_tinfo(b, o->name, o->nd, ne, o->ttype, 32);
    uint64_t a = o->align_type ? o->align_val : 32;
    if (a == 0 || a > 4096) a = 32;
    gt_pad(b, (size_t)a);
    for (int i = 0; i < 64 * nt; i++) gt_u8(b, (uint8_t)i);
}

static struct img_opts good(void) {
    struct img_opts o = {3, 0, 0, 0, 0, 2, 0, 1, "w", NULL, 0};
    return o;
}

static int try_img(const struct img_opts *o) {
    struct gt_buf b;
    build(&b, o);
    pagein_file *f = NULL;
    int rc = open_mem(&f, &b);
    pagein_close(f);
    gt_free(&b);
    return rc;
}

TEST(gguf_validation_rules) {
    struct img_opts o = good();
    CHECK_OK(try_img(&o));
    o = good(), o.version = 0;
    CHECK_EQ(try_img(&o), PAGEIN_E_BAD_VERSION);
    o = good(), o.version = 4;
    CHECK_EQ(try_img(&o), PAGEIN_E_BAD_VERSION);
    o = good(), o.version = 1;
    CHECK_OK(try_img(&o));
    o = good(), o.version = 2;
    CHECK_OK(try_img(&o));
    /* alignment: u32 power of two only */
    o = good(), o.align_type = 4, o.align_val = 64;
    CHECK_OK(try_img(&o));
    o = good(), o.align_type = 4, o.align_val = 1;
    CHECK_OK(try_img(&o));
    o = good(), o.align_type = 4, o.align_val = 48;
    CHECK_EQ(try_img(&o), PAGEIN_E_BAD_ALIGNMENT);
    CHECK(strstr(pagein_last_error_detail(), "general.alignment") != NULL);
    o = good(), o.align_type = 4, o.align_val = 0;
    CHECK_EQ(try_img(&o), PAGEIN_E_BAD_ALIGNMENT);
    o = good(), o.align_type = 10, o.align_val = 64;
    CHECK_EQ(try_img(&o), PAGEIN_E_BAD_ALIGNMENT);
    /* removed and unknown tensor types */
    uint32_t bad_types[] = {4, 5, 31, 32, 33, 36, 37, 38, 43, 45, 1000};
    for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
        o = good(), o.ttype = bad_types[i];
        CHECK_EQ(try_img(&o), PAGEIN_E_BAD_DTYPE);
    }
    CHECK(strstr(pagein_last_error_detail(), "tensor 'w'") != NULL);
    /* block multiple: Q8_0 needs 32 elements */
    o = good(), o.ttype = 8, o.ne0 = 33;
    CHECK_EQ(try_img(&o), PAGEIN_E_BAD_TENSOR_INFO);
    o = good(), o.ttype = 8, o.ne0 = 32;
    CHECK_OK(try_img(&o)); /* 34 bytes <= 64 present */
    /* offsets: must equal the running padded sum */
    o = good(), o.off = 32;
    CHECK_EQ(try_img(&o), PAGEIN_E_BAD_OFFSET);
    CHECK(strstr(pagein_last_error_detail(), "expected 0") != NULL);
    /* data beyond end of file */
    o = good(), o.ne0 = 100;
    CHECK_EQ(try_img(&o), PAGEIN_E_TRUNCATED);
    /* n_dims <= 4 */
    o = good(), o.nd = 5;
    CHECK_EQ(try_img(&o), PAGEIN_E_LIMIT);
    o = good(), o.nd = 0; /* scalar: accepted */
    CHECK_OK(try_img(&o));
    /* names: < 64 bytes */
    char n63[64], n64[65];
    memset(n63, 'a', 63), n63[63] = 0;
    memset(n64, 'a', 64), n64[64] = 0;
    o = good(), o.name = n63;
    CHECK_OK(try_img(&o));
    o = good(), o.name = n64;
    CHECK_EQ(try_img(&o), PAGEIN_E_LIMIT);
    /* duplicates */
    o = good(), o.key2 = "general.architecture";
    CHECK_EQ(try_img(&o), PAGEIN_E_DUPLICATE);
    CHECK(strstr(pagein_last_error_detail(), "general.architecture") != NULL);
    o = good(), o.two_tensors_same_name = 1;
    CHECK_EQ(try_img(&o), PAGEIN_E_DUPLICATE);
    /* negative dimension (int64 < 0) */
    o = good(), o.ne0 = (uint64_t)-2;
    CHECK_EQ(try_img(&o), PAGEIN_E_BAD_TENSOR_INFO);
    return PASS;
}

TEST(gguf_truncation_every_prefix) {
    struct img_opts o = good();
    o.align_type = 4, o.align_val = 32;
    struct gt_buf b;
    build(&b, &o);
    /* every proper prefix that cuts the header or the tensor's 8 bytes fails
     * cleanly (the exact-size copy lets ASan see any overread) */
    size_t hdr_end = b.n - 64; /* data start */
    for (size_t n = 0; n < hdr_end + 8; n++) {
        uint8_t *c = malloc(n ? n : 1);
        memcpy(c, b.p, n);
        pagein_file *f = NULL;
        int rc = pagein_open_memory(&f, c, n, "prefix", NULL);
        if (rc == 0) printf("    prefix %zu accepted\n", n);
        CHECK(rc < 0);
        CHECK(f == NULL);
        free(c);
    }
    gt_free(&b);
    return PASS;
}

TEST(gguf_limits_and_hostile_counts) {
    struct gt_buf b = {0};
    pagein_file *f = NULL;
    /* a string length of ~7e10 (text-encoder mangled file) */
    gt_header(&b, 3, 0, 1);
    gt_u64(&b, 70000000000ull);
    gt_bytes(&b, "abcdefghijklmnopqrstuvwxyz", 26);
    CHECK_EQ(open_mem(&f, &b), PAGEIN_E_LIMIT);
    gt_free(&b);
    /* n_kv far beyond what the file can hold: no allocation, clean error */
    gt_header(&b, 3, 0, UINT64_MAX / 2);
    CHECK_EQ(open_mem(&f, &b), PAGEIN_E_TRUNCATED);
    gt_free(&b);
    gt_header(&b, 3, (uint64_t)1 << 62, 0);
    CHECK_EQ(open_mem(&f, &b), PAGEIN_E_TRUNCATED);
    gt_free(&b);
    /* an array of 2^31 u8 */
    gt_header(&b, 3, 0, 1);
    gt_str(&b, "a");
    gt_u32(&b, 9);
    gt_u32(&b, 0);
    gt_u64(&b, (uint64_t)1 << 31);
    CHECK_EQ(open_mem(&f, &b), PAGEIN_E_LIMIT);
    gt_free(&b);
    /* an array of 1000 u64 in 16 bytes */
    gt_header(&b, 3, 0, 1);
    gt_str(&b, "a");
    gt_u32(&b, 9);
    gt_u32(&b, 10);
    gt_u64(&b, 1000);
    gt_u64(&b, 1);
    gt_u64(&b, 2);
    CHECK_EQ(open_mem(&f, &b), PAGEIN_E_TRUNCATED);
    CHECK(strstr(pagein_last_error_detail(), "metadata key 'a'") != NULL);
    gt_free(&b);
    /* invalid value type, invalid array element type */
    gt_header(&b, 3, 0, 1);
    gt_str(&b, "a");
    gt_u32(&b, 13);
    gt_u32(&b, 0);
    CHECK_EQ(open_mem(&f, &b), PAGEIN_E_BAD_TYPE);
    gt_free(&b);
    gt_header(&b, 3, 0, 1);
    gt_str(&b, "a");
    gt_u32(&b, 9);
    gt_u32(&b, 99);
    gt_u64(&b, 0);
    CHECK_EQ(open_mem(&f, &b), PAGEIN_E_BAD_TYPE);
    gt_free(&b);
    /* empty key */
    gt_header(&b, 3, 0, 1);
    gt_str(&b, "");
    gt_u32(&b, 0);
    gt_u8(&b, 1);
    gt_bytes(&b, "padding", 7);
    CHECK_EQ(open_mem(&f, &b), PAGEIN_E_LIMIT);
    gt_free(&b);
    /* nested arrays deeper than 8 */
    gt_header(&b, 3, 0, 1);
    gt_str(&b, "deep");
    gt_u32(&b, 9);
    for (int i = 0; i < 12; i++) {
        gt_u32(&b, 9);
        gt_u64(&b, 1);
    }
    gt_u32(&b, 0);
    gt_u64(&b, 0);
    CHECK_EQ(open_mem(&f, &b), PAGEIN_E_LIMIT);
    gt_free(&b);
    /* element count overflowing int64 */
    gt_header(&b, 3, 1, 0);
    uint64_t ne[4] = {1ull << 32, 1ull << 32, 1, 1};
    gt_tinfo(&b, "big", 2, ne, 0, 0);
    gt_pad(&b, 32);
    CHECK_EQ(open_mem(&f, &b), PAGEIN_E_OVERFLOW);
    gt_free(&b);
    /* byte size overflow: 2^62 F32 elements */
    gt_header(&b, 3, 1, 0);
    uint64_t ne2[4] = {1ull << 31, 1ull << 31, 1, 1};
    gt_tinfo(&b, "big", 2, ne2, 0, 0);
    gt_pad(&b, 32);
    CHECK_EQ(open_mem(&f, &b), PAGEIN_E_OVERFLOW);
    gt_free(&b);
    /* magic */
    gt_bytes(&b, "GGUX\3\0\0\0", 8);
    CHECK(pagein_open_memory(&f, b.p, b.n, "x", NULL) < 0);
    gt_free(&b);
    return PASS;
}

/* Nested and empty arrays, v1 layout, hand-made; checked by the getters and
 * the Python reader. */
TEST(gguf_nested_and_empty_arrays) {
    for (int v1 = 0; v1 < 2; v1++) {
        struct gt_buf b = {0};
        b.v1 = v1;
        gt_header(&b, v1 ? 1 : 3, 0, 3);
        /* [[1,2,3], ["x","yz"], []] */
        gt_str(&b, "nested");
        gt_u32(&b, 9);
        gt_u32(&b, 9);
        gt_len(&b, 3);
        gt_u32(&b, 5);
        gt_len(&b, 3);
        gt_u32(&b, 1), gt_u32(&b, 2), gt_u32(&b, (uint32_t)-3);
        gt_u32(&b, 8);
        gt_len(&b, 2);
        gt_str(&b, "x");
        gt_str(&b, "yz");
        gt_u32(&b, 0);
        gt_len(&b, 0);
        gt_str(&b, "empty");
        gt_u32(&b, 9);
        gt_u32(&b, 8);
        gt_len(&b, 0);
        gt_str(&b, "empty_u64");
        gt_u32(&b, 9);
        gt_u32(&b, 10);
        gt_len(&b, 0);
        pagein_file *f = NULL;
        CHECK_OK(open_mem(&f, &b));
        if (f) {
            const pagein_meta *m;
            pagein_meta sub;
            CHECK_OK(pagein_meta_get_array(f, "nested", &m));
            CHECK_EQ(m->elem_type, PAGEIN_META_ARRAY);
            CHECK_EQ(m->count, 3);
            CHECK_OK(pagein_meta_array_at(f, m, 0, &sub));
            CHECK_EQ(sub.elem_type, PAGEIN_META_I32);
            CHECK_EQ(sub.count, 3);
            int64_t iv;
            uint64_t uv;
            CHECK_OK(pagein_meta_array_i64(f, &sub, 2, &iv));
            CHECK_EQ(iv, -3);
            CHECK_EQ(pagein_meta_array_u64(f, &sub, 2, &uv), PAGEIN_E_OVERFLOW);
            CHECK_OK(pagein_meta_array_at(f, m, 1, &sub));
            const char *s;
            size_t sl;
            CHECK_OK(pagein_meta_array_str(f, &sub, 1, &s, &sl));
            CHECK(sl == 2 && memcmp(s, "yz", 2) == 0);
            CHECK_OK(pagein_meta_array_at(f, m, 2, &sub));
            CHECK_EQ(sub.count, 0);
            CHECK_EQ(pagein_meta_array_at(f, m, 3, &sub), PAGEIN_E_RANGE);
            CHECK_OK(pagein_meta_get_array(f, "empty", &m));
            CHECK_EQ(m->count, 0);
            CHECK_EQ(m->elem_type, PAGEIN_META_STRING);
            CHECK_EQ(pagein_meta_array_str(f, m, 0, &s, &sl), PAGEIN_E_RANGE);
            pagein_close(f);
        }
        const char *p = pt_tmppath("nested.gguf");
        pt_write_file(p, b.p, b.n);
        int rc = gt_ref_compare(p);
        gt_free(&b);
        if (rc == 77) SKIP_BECAUSE("/usr/bin/python3 missing: not compared with tests/gguf_ref.py");
        CHECK_EQ(rc, 0);
    }
    return PASS;
}

/* ---- getters: widths, ranges, types ------------------------------------- */

TEST(gguf_meta_getters_widths) {
    pagein_gguf_writer *w;
    CHECK_OK(pagein_gguf_writer_new(&w, NULL));
    uint16_t u16 = 3;
    int8_t i8 = -1;
    uint64_t big = 1ull << 40;
    CHECK_OK(pagein_gguf_set_scalar(w, "split.no", PAGEIN_META_U16, &u16));
    CHECK_OK(pagein_gguf_set_scalar(w, "neg", PAGEIN_META_I8, &i8));
    CHECK_OK(pagein_gguf_set_u64(w, "big", big));
    CHECK_OK(pagein_gguf_set_i32(w, "i32", 7));
    CHECK_OK(pagein_gguf_set_f32(w, "f", 0.5f));
    CHECK_OK(pagein_gguf_set_bool(w, "b", 1));
    CHECK_OK(pagein_gguf_set_str(w, "s", "hello", 5));
    uint64_t huge = UINT64_MAX;
    CHECK_OK(pagein_gguf_set_scalar(w, "huge", PAGEIN_META_U64, &huge));
    const char *p = pt_tmppath("getters.gguf");
    CHECK_OK(pagein_gguf_write(w, p));
    pagein_gguf_writer_free(w);
    pagein_file *f = NULL;
    CHECK_OK(pagein_open(&f, p, NULL));
    if (!f) return FAIL;
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    double d;
    int b;
    const char *s;
    size_t sl;
    CHECK_OK(pagein_meta_get_u32(f, "split.no", &u32));
    CHECK_EQ(u32, 3);
    CHECK_OK(pagein_meta_get_i64(f, "split.no", &i64));
    CHECK_EQ(i64, 3);
    CHECK_OK(pagein_meta_get_u64(f, "i32", &u64));
    CHECK_EQ(u64, 7);
    CHECK_EQ(pagein_meta_get_u32(f, "neg", &u32), PAGEIN_E_OVERFLOW);
    CHECK_EQ(pagein_meta_get_u64(f, "neg", &u64), PAGEIN_E_OVERFLOW);
    CHECK_OK(pagein_meta_get_i64(f, "neg", &i64));
    CHECK_EQ(i64, -1);
    CHECK_EQ(pagein_meta_get_u32(f, "big", &u32), PAGEIN_E_OVERFLOW);
    CHECK(strstr(pagein_last_error_detail(), "big") != NULL);
    CHECK_OK(pagein_meta_get_u64(f, "big", &u64));
    CHECK_EQ(u64, big);
    CHECK_EQ(pagein_meta_get_i64(f, "huge", &i64), PAGEIN_E_OVERFLOW);
    CHECK_OK(pagein_meta_get_f64(f, "f", &d));
    CHECK(d == 0.5);
    CHECK_OK(pagein_meta_get_f64(f, "i32", &d));
    CHECK(d == 7.0);
    CHECK_OK(pagein_meta_get_bool(f, "b", &b));
    CHECK_EQ(b, 1);
    CHECK_EQ(pagein_meta_get_u32(f, "s", &u32), PAGEIN_E_BAD_TYPE);
    CHECK_EQ(pagein_meta_get_str(f, "i32", &s, &sl), PAGEIN_E_BAD_TYPE);
    CHECK_EQ(pagein_meta_get_f64(f, "s", &d), PAGEIN_E_BAD_TYPE);
    CHECK_OK(pagein_meta_get_str(f, "s", &s, &sl));
    CHECK(sl == 5 && memcmp(s, "hello", 5) == 0);
    CHECK_EQ(pagein_meta_get_u32(f, "absent", &u32), PAGEIN_E_NOT_FOUND);
    CHECK_EQ(pagein_meta_get_u32(NULL, "absent", &u32), PAGEIN_E_INVALID);
    const pagein_meta *m;
    CHECK_EQ(pagein_meta_get_array(f, "s", &m), PAGEIN_E_BAD_TYPE);
    CHECK_STR(pagein_meta_type_name(PAGEIN_META_U16), "u16");
    CHECK_STR(pagein_meta_type_name((pagein_meta_type)77), "unknown");
    CHECK_STR(pagein_reader_kind_name((pagein_reader_kind)77), "unknown");
    pagein_close(f);
    return PASS;
}

/* ---- writer round trips -------------------------------------------------- */

struct fill_ctx {
    uint64_t seed;
};
static int fill_bytes(void *ctx, void *dst, uint64_t off, size_t len) {
    struct fill_ctx *c = ctx;
    for (size_t i = 0; i < len; i++) ((uint8_t *)dst)[i] = (uint8_t)((off + i) * 131 + c->seed);
    return 0;
}
static int fill_fail(void *ctx, void *dst, uint64_t off, size_t len) {
    (void)(ctx), (void)(dst), (void)(off), (void)(len);
    return -5;
}

/* Writes every metadata type (scalars, string, arrays of each element type,
 * string array, nested array, empty arrays) and every GGUF tensor type, in
 * each layout (v3, v2, v1, big-endian v3, alignment 1 and 64), reads them
 * back, and checks every value and byte; the Python reader checks each
 * file independently. */
static int roundtrip(uint32_t version, int be, uint32_t align) {
    uint64_t st = pt_seed() ^ (version * 7 + (uint64_t)be * 13 + align);
    pagein_gguf_write_opts wo = PAGEIN_GGUF_WRITE_OPTS_INIT;
    wo.alignment = align;
    pagein_gguf_writer *w = NULL;
    CHECK_OK(pagein_gguf_writer_new(&w, &wo));
    if (!w) return FAIL;
    CHECK_OK(pi_gguf_writer_layout(w, version, be));
    /* scalars of every type */
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        float f32;
        uint64_t u64;
        int64_t i64;
        double f64;
    } vals[13];
    memset(vals, 0, sizeof vals);
    vals[0].u8 = 200, vals[1].i8 = -100, vals[2].u16 = 60000, vals[3].i16 = -30000;
    vals[4].u32 = 4000000000u, vals[5].i32 = -2000000000, vals[6].f32 = 1.25f, vals[7].u8 = 1;
    vals[10].u64 = 18000000000000000000ull, vals[11].i64 = -9000000000000000000ll, vals[12].f64 = -2.5e300;
    char key[64];
    for (int t = 0; t < 13; t++) {
        if (t == 8 || t == 9) continue;
        snprintf(key, sizeof key, "scalar.%d", t);
        CHECK_OK(pagein_gguf_set_scalar(w, key, (pagein_meta_type)t, &vals[t]));
    }
    CHECK_OK(pagein_gguf_set_str(w, "str", "h\0llo", 5));
    CHECK_OK(pagein_gguf_set_str(w, "str.empty", "", 0));
    /* numeric arrays of every element type: 5 elements of pseudo-random bytes */
    uint8_t arr[13][5 * 8];
    for (int t = 0; t < 13; t++) {
        if (t == 8 || t == 9) continue;
        for (size_t i = 0; i < sizeof arr[t]; i++) arr[t][i] = (uint8_t)pt_rand(&st);
        if (t == 7)
            for (int i = 0; i < 5; i++) arr[t][i] &= 1;
        if (t == 6) /* keep f32 finite */
            for (int i = 0; i < 5; i++) {
                float fv = (float)i - 1.5f;
                memcpy(&arr[t][i * 4], &fv, 4);
            }
        if (t == 12)
            for (int i = 0; i < 5; i++) {
                double dv = (double)i * 1e10;
                memcpy(&arr[t][i * 8], &dv, 8);
            }
        snprintf(key, sizeof key, "array.%d", t);
        CHECK_OK(pagein_gguf_set_array(w, key, (pagein_meta_type)t, arr[t], 5));
        snprintf(key, sizeof key, "array.empty.%d", t);
        CHECK_OK(pagein_gguf_set_array(w, key, (pagein_meta_type)t, NULL, 0));
    }
    const char *strs[] = {"<unk>", "", "hello world", "\xc3\xa9t\xc3\xa9"};
    CHECK_OK(pagein_gguf_set_str_array(w, "array.str", strs, NULL, 4));
    CHECK_OK(pagein_gguf_set_str_array(w, "array.str.empty", NULL, NULL, 0));
    /* a nested array [[7,8],[]] of u16, encoded for this layout */
    {
        struct gt_buf nb = {0};
        nb.v1 = version == 1, nb.be = be;
        gt_u32(&nb, 9);
        gt_len(&nb, 2);
        gt_u32(&nb, 2);
        gt_len(&nb, 2);
        uint16_t a = 7, b2 = 8;
        if (be) a = __builtin_bswap16(a), b2 = __builtin_bswap16(b2);
        gt_bytes(&nb, &a, 2);
        gt_bytes(&nb, &b2, 2);
        gt_u32(&nb, 2);
        gt_len(&nb, 0);
        CHECK_OK(pagein_gguf_set_raw(w, "array.nested", PAGEIN_META_ARRAY, nb.p, nb.n));
        /* one byte too many and one too few are refused */
        CHECK(pagein_gguf_set_raw(w, "array.nested.bad", PAGEIN_META_ARRAY, nb.p, nb.n - 1) < 0);
        gt_u8(&nb, 0);
        CHECK(pagein_gguf_set_raw(w, "array.nested.bad", PAGEIN_META_ARRAY, nb.p, nb.n) < 0);
        gt_free(&nb);
    }
    CHECK_EQ(pagein_gguf_set_u32(w, "str", 1), PAGEIN_E_DUPLICATE);
    /* every GGUF tensor type, innermost dim = 2 blocks, 3 rows */
    int nt = 0;
    uint64_t shapes[PAGEIN_DTYPE_COUNT][2];
    struct fill_ctx fc = {st & 0xff};
    uint8_t *bufs[PAGEIN_DTYPE_COUNT] = {0};
    for (int d = 1; d < PAGEIN_DTYPE_COUNT; d++) {
        const pagein_dtype_info *di = pagein_dtype_get((pagein_dtype)d);
        if (di->gguf_id < 0) continue;
        shapes[d][0] = 3;
        shapes[d][1] = 2ull * di->block_elems;
        pagein_write_tensor t = {0};
        char name[64];
        snprintf(name, sizeof name, "blk.%d.%s.weight", d, di->name);
        t.name = name;
        t.dtype = (pagein_dtype)d;
        t.ndim = 2;
        t.shape = shapes[d];
        size_t nb = 3u * 2u * di->block_bytes;
        if (d % 2) {
            bufs[d] = malloc(nb);
            for (size_t i = 0; i < nb; i++) bufs[d][i] = (uint8_t)pt_rand(&st);
            t.data = bufs[d];
        } else {
            t.fill = fill_bytes;
            t.fill_ctx = &fc;
        }
        CHECK_OK(pagein_gguf_add_tensor(w, &t));
        nt++;
    }
    /* a 1-D tensor with 0 elements and a scalar */
    uint64_t zero_shape[1] = {0};
    pagein_write_tensor tz = {"zero", PAGEIN_DTYPE_F32, 1, zero_shape, NULL, NULL, NULL};
    CHECK_OK(pagein_gguf_add_tensor(w, &tz));
    float scalar = 3.0f;
    pagein_write_tensor ts = {"output_norm.weight", PAGEIN_DTYPE_F32, 0, NULL, &scalar, NULL, NULL};
    CHECK_OK(pagein_gguf_add_tensor(w, &ts));
    const char *p = pt_tmppath("roundtrip.gguf");
    CHECK_OK(pagein_gguf_write(w, p));
    pagein_gguf_writer_free(w);

    pagein_file *f = NULL;
    CHECK_OK(pagein_open(&f, p, NULL));
    if (!f) return FAIL;
    pagein_file_info in;
    pagein_file_get_info(f, &in);
    CHECK_EQ(in.version, version);
    CHECK_EQ(in.big_endian, be);
    CHECK_EQ(in.alignment, align ? align : 32);
    CHECK_EQ(in.n_tensors, (size_t)nt + 2);
    CHECK_EQ(in.file_size % in.alignment, 0);
    /* scalars */
    for (int t = 0; t < 13; t++) {
        if (t == 8 || t == 9) continue;
        snprintf(key, sizeof key, "scalar.%d", t);
        const pagein_meta *m = pagein_meta_find(f, key);
        CHECK(m && (int)m->type == t);
        if (!m) continue;
        switch (t) {
        case 0: CHECK_EQ(m->v.u, 200); break;
        case 1: CHECK_EQ(m->v.i, -100); break;
        case 2: CHECK_EQ(m->v.u, 60000); break;
        case 3: CHECK_EQ(m->v.i, -30000); break;
        case 4: CHECK_EQ(m->v.u, 4000000000u); break;
        case 5: CHECK_EQ(m->v.i, -2000000000); break;
        case 6: CHECK(m->v.f == 1.25); break;
        case 7: CHECK_EQ(m->v.b, 1); break;
        case 10: CHECK(m->v.u == 18000000000000000000ull); break;
        case 11: CHECK_EQ(m->v.i, -9000000000000000000ll); break;
        case 12: CHECK(m->v.f == -2.5e300); break;
        }
    }
    const char *s;
    size_t sl;
    CHECK_OK(pagein_meta_get_str(f, "str", &s, &sl));
    CHECK(sl == 5 && memcmp(s, "h\0llo", 5) == 0);
    CHECK_OK(pagein_meta_get_str(f, "str.empty", &s, &sl));
    CHECK_EQ(sl, 0);
    /* arrays: compare element by element against the native values */
    for (int t = 0; t < 13; t++) {
        if (t == 8 || t == 9) continue;
        const pagein_meta *m;
        snprintf(key, sizeof key, "array.%d", t);
        CHECK_OK(pagein_meta_get_array(f, key, &m));
        if (!m) continue;
        CHECK_EQ(m->count, 5);
        CHECK_EQ((int)m->elem_type, t);
        for (int i = 0; i < 5; i++) {
            if (t == 6 || t == 12) {
                double got, want;
                CHECK_OK(pagein_meta_array_f64(f, m, (uint64_t)i, &got));
                if (t == 6) {
                    float fv;
                    memcpy(&fv, &arr[t][i * 4], 4);
                    want = fv;
                } else {
                    memcpy(&want, &arr[t][i * 8], 8);
                }
                CHECK(got == want);
                continue;
            }
            int64_t want;
            switch (t) {
            case 0: case 7: want = arr[t][i]; break;
            case 1: want = (int8_t)arr[t][i]; break;
            case 2: { uint16_t x; memcpy(&x, &arr[t][i * 2], 2); want = x; break; }
            case 3: { int16_t x; memcpy(&x, &arr[t][i * 2], 2); want = x; break; }
            case 4: { uint32_t x; memcpy(&x, &arr[t][i * 4], 4); want = x; break; }
            case 5: { int32_t x; memcpy(&x, &arr[t][i * 4], 4); want = x; break; }
            case 10: {
                uint64_t x, got;
                memcpy(&x, &arr[t][i * 8], 8);
                CHECK_OK(pagein_meta_array_u64(f, m, (uint64_t)i, &got));
                CHECK(got == x);
                continue;
            }
            default: memcpy(&want, &arr[t][i * 8], 8); break;
            }
            int64_t got;
            CHECK_OK(pagein_meta_array_i64(f, m, (uint64_t)i, &got));
            CHECK_EQ(got, want);
        }
        snprintf(key, sizeof key, "array.empty.%d", t);
        CHECK_OK(pagein_meta_get_array(f, key, &m));
        if (m) CHECK_EQ(m->count, 0);
    }
    const pagein_meta *m;
    CHECK_OK(pagein_meta_get_array(f, "array.str", &m));
    for (int i = 0; m && i < 4; i++) {
        CHECK_OK(pagein_meta_array_str(f, m, (uint64_t)i, &s, &sl));
        CHECK(sl == strlen(strs[i]) && memcmp(s, strs[i], sl) == 0);
    }
    CHECK_OK(pagein_meta_get_array(f, "array.nested", &m));
    if (m) {
        pagein_meta sub;
        uint64_t u;
        CHECK_EQ(m->count, 2);
        CHECK_OK(pagein_meta_array_at(f, m, 0, &sub));
        CHECK_OK(pagein_meta_array_u64(f, &sub, 1, &u));
        CHECK_EQ(u, 8);
        CHECK_OK(pagein_meta_array_at(f, m, 1, &sub));
        CHECK_EQ(sub.count, 0);
    }
    /* tensors: order, types, dims, bytes */
    size_t k = 0;
    for (int d = 1; d < PAGEIN_DTYPE_COUNT; d++) {
        const pagein_dtype_info *di = pagein_dtype_get((pagein_dtype)d);
        if (di->gguf_id < 0) continue;
        const pagein_tensor *t = pagein_tensor_at(f, k++);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK_EQ(t->dtype, d);
        CHECK_EQ(t->ndim, 2);
        CHECK_EQ(t->shape[0], 3);
        CHECK_EQ(t->shape[1], 2ull * di->block_elems);
        CHECK_EQ(t->layer, d);
        CHECK_EQ(t->nbytes, 6ull * di->block_bytes);
        CHECK_EQ((t->offset - in.data_start) % in.alignment, 0);
        CHECK_EQ(!!(t->flags & PAGEIN_TENSOR_SWAPPED), be);
        /* plain types at offsets that are not a multiple of their size (only
         * possible with alignment 1 or 2) are flagged */
        CHECK_EQ(!!(t->flags & PAGEIN_TENSOR_UNALIGNED), di->bits > 8 && t->offset % (di->bits / 8) != 0);
        if (bufs[d]) {
            CHECK(memcmp(t->data, bufs[d], (size_t)t->nbytes) == 0);
        } else {
            uint8_t *want = malloc((size_t)t->nbytes);
            fill_bytes(&fc, want, 0, (size_t)t->nbytes);
            CHECK(memcmp(t->data, want, (size_t)t->nbytes) == 0);
            free(want);
        }
        free(bufs[d]);
    }
    const pagein_tensor *t = pagein_tensor_get(f, "zero");
    CHECK(t && t->nbytes == 0 && t->nelements == 0);
    t = pagein_tensor_get(f, "output_norm.weight");
    CHECK(t && t->ndim == 0 && t->nbytes == 4 && memcmp(t->data, &scalar, 4) == 0);
    pagein_close(f);
    int rc = gt_ref_compare(p);
    if (rc == 77) SKIP_BECAUSE("/usr/bin/python3 missing: not compared with tests/gguf_ref.py");
    CHECK_EQ(rc, 0);
    return PASS;
}

TEST(gguf_writer_roundtrip_v3) { return roundtrip(3, 0, 0); }
TEST(gguf_writer_roundtrip_v2) { return roundtrip(2, 0, 0); }
TEST(gguf_writer_roundtrip_v1) { return roundtrip(1, 0, 0); }
TEST(gguf_writer_roundtrip_big_endian) { return roundtrip(3, 1, 0); }
TEST(gguf_writer_roundtrip_align64) { return roundtrip(3, 0, 64); }
TEST(gguf_writer_roundtrip_align1) { return roundtrip(3, 0, 1); }

/* A big-endian file: header values swapped back, tensor bytes as stored,
 * flagged; the F32 payload 100.0 is stored 42 c8 00 00 (spec 1.4). */
TEST(gguf_big_endian_values) {
    struct gt_buf b = {0};
    b.be = 1;
    gt_header(&b, 3, 1, 2);
    gt_str(&b, "answer");
    gt_u32(&b, 4);
    gt_u32(&b, 42);
    gt_str(&b, "ids");
    gt_u32(&b, 9);
    gt_u32(&b, 5);
    gt_u64(&b, 2);
    gt_u32(&b, (uint32_t)-7);
    gt_u32(&b, 9);
    uint64_t ne[1] = {1};
    gt_tinfo(&b, "t", 1, ne, 0, 0);
    gt_pad(&b, 32);
    gt_bytes(&b, "\x42\xc8\x00\x00", 4);
    gt_pad(&b, 32);
    pagein_file *f = NULL;
    CHECK_OK(open_mem(&f, &b));
    if (f) {
        pagein_file_info in;
        pagein_file_get_info(f, &in);
        CHECK_EQ(in.big_endian, 1);
        CHECK_EQ(in.version, 3);
        uint32_t a;
        CHECK_OK(pagein_meta_get_u32(f, "answer", &a));
        CHECK_EQ(a, 42);
        const pagein_meta *m;
        int64_t v;
        CHECK_OK(pagein_meta_get_array(f, "ids", &m));
        CHECK_OK(pagein_meta_array_i64(f, m, 0, &v));
        CHECK_EQ(v, -7);
        CHECK_OK(pagein_meta_array_i64(f, m, 1, &v));
        CHECK_EQ(v, 9);
        const pagein_tensor *t = pagein_tensor_get(f, "t");
        CHECK(t && (t->flags & PAGEIN_TENSOR_SWAPPED));
        if (t) {
            uint32_t u;
            memcpy(&u, t->data, 4);
            u = __builtin_bswap32(u);
            float fv;
            memcpy(&fv, &u, 4);
            CHECK(fv == 100.0f);
        }
        pagein_close(f);
    }
    gt_free(&b);
    return PASS;
}

TEST(gguf_writer_rejects) {
    pagein_gguf_writer *w;
    CHECK_OK(pagein_gguf_writer_new(&w, NULL));
    uint64_t sh[2] = {4, 33};
    pagein_write_tensor t = {"q", PAGEIN_DTYPE_Q8_0, 2, sh, NULL, NULL, NULL};
    uint8_t dummy[4096] = {0};
    t.data = dummy;
    CHECK_EQ(pagein_gguf_add_tensor(w, &t), PAGEIN_E_BAD_TENSOR_INFO);
    t.dtype = PAGEIN_DTYPE_U32; /* no GGUF id */
    CHECK_EQ(pagein_gguf_add_tensor(w, &t), PAGEIN_E_BAD_DTYPE);
    char longname[80];
    memset(longname, 'n', 64), longname[64] = 0;
    t.name = longname, t.dtype = PAGEIN_DTYPE_F32;
    CHECK_EQ(pagein_gguf_add_tensor(w, &t), PAGEIN_E_LIMIT);
    t.name = "ok";
    uint64_t sh5[5] = {1, 1, 1, 1, 1};
    t.shape = sh5, t.ndim = 5;
    CHECK_EQ(pagein_gguf_add_tensor(w, &t), PAGEIN_E_LIMIT);
    t.shape = sh, t.ndim = 2;
    CHECK_OK(pagein_gguf_add_tensor(w, &t));
    CHECK_EQ(pagein_gguf_add_tensor(w, &t), PAGEIN_E_DUPLICATE);
    CHECK_EQ(pagein_gguf_set_u64(w, "general.alignment", 64), PAGEIN_E_BAD_ALIGNMENT);
    CHECK_EQ(pagein_gguf_set_u32(w, "general.alignment", 48), PAGEIN_E_BAD_ALIGNMENT);
    CHECK_OK(pagein_gguf_set_u32(w, "general.alignment", 128));
    CHECK_EQ(pagein_gguf_set_u32(w, "", 1), PAGEIN_E_INVALID);
    /* a failing fill aborts the write and leaves nothing */
    pagein_write_tensor tf = {"f", PAGEIN_DTYPE_F32, 2, sh, NULL, fill_fail, NULL};
    CHECK_OK(pagein_gguf_add_tensor(w, &tf));
    const char *p = pt_tmppath("fail.gguf");
    CHECK_EQ(pagein_gguf_write(w, p), -5);
    pagein_file *f = NULL;
    CHECK_EQ(pagein_open(&f, p, NULL), -ENOENT);
    pagein_gguf_writer_free(w);
    pagein_gguf_write_opts wo = PAGEIN_GGUF_WRITE_OPTS_INIT;
    wo.alignment = 3;
    w = NULL;
    CHECK(pagein_gguf_writer_new(&w, &wo) < 0);
    CHECK(w == NULL);
    /* an alignment from the key is honoured */
    CHECK_OK(pagein_gguf_writer_new(&w, NULL));
    CHECK_OK(pagein_gguf_set_u32(w, "general.alignment", 256));
    t.shape = sh, t.ndim = 2, t.data = dummy;
    CHECK_OK(pagein_gguf_add_tensor(w, &t));
    CHECK_OK(pagein_gguf_write(w, p));
    pagein_gguf_writer_free(w);
    CHECK_OK(pagein_open(&f, p, NULL));
    if (f) {
        pagein_file_info in;
        pagein_file_get_info(f, &in);
        CHECK_EQ(in.alignment, 256);
        CHECK_EQ(in.data_start % 256, 0);
        pagein_close(f);
    }
    return PASS;
}

/* Layer indexes of GGUF names (spec section 4): blk.N with any prefix;
 * embeddings (incl. token_embd_norm, applied before the first layer) first,
 * output_norm and output last. */
TEST(gguf_layer_names) {
    int tail;
    CHECK_EQ(pagein_layer_from_name("blk.0.attn_q.weight", 19, &tail), 0);
    const char *n = "enc.blk.12.ffn_up.weight";
    CHECK_EQ(pagein_layer_from_name(n, strlen(n), &tail), 12);
    n = "dec.blk.3.attn_k.weight";
    CHECK_EQ(pagein_layer_from_name(n, strlen(n), &tail), 3);
    n = "v.blk.10.attn_out.bias";
    CHECK_EQ(pagein_layer_from_name(n, strlen(n), &tail), 10);
    n = "a.blk.7.ffn_down.weight";
    CHECK_EQ(pagein_layer_from_name(n, strlen(n), &tail), 7);
    n = "token_embd.weight";
    CHECK_EQ(pagein_layer_from_name(n, strlen(n), &tail), -1);
    CHECK_EQ(tail, 0);
    n = "token_embd_norm.weight";
    CHECK_EQ(pagein_layer_from_name(n, strlen(n), &tail), -1);
    CHECK_EQ(tail, 0);
    n = "output_norm.weight";
    CHECK_EQ(pagein_layer_from_name(n, strlen(n), &tail), -1);
    CHECK_EQ(tail, 1);
    n = "output.weight";
    CHECK_EQ(pagein_layer_from_name(n, strlen(n), &tail), -1);
    CHECK_EQ(tail, 1);
    n = "enc.output_norm.weight";
    CHECK_EQ(pagein_layer_from_name(n, strlen(n), &tail), -1);
    CHECK_EQ(tail, 1);
    /* order in a file: written output first, blk.10 before blk.2 */
    pagein_gguf_writer *w;
    CHECK_OK(pagein_gguf_writer_new(&w, NULL));
    static const char *names[] = {"output.weight", "blk.10.w", "output_norm.weight", "blk.2.w",
                                  "token_embd_norm.weight", "token_embd.weight"};
    static const char *order[] = {"token_embd_norm.weight", "token_embd.weight", "blk.2.w", "blk.10.w",
                                  "output.weight", "output_norm.weight"};
    static float d[4];
    uint64_t sh[1] = {4};
    for (int i = 0; i < 6; i++) {
        pagein_write_tensor t = {names[i], PAGEIN_DTYPE_F32, 1, sh, d, NULL, NULL};
        CHECK_OK(pagein_gguf_add_tensor(w, &t));
    }
    const char *p = pt_tmppath("order.gguf");
    CHECK_OK(pagein_gguf_write(w, p));
    pagein_gguf_writer_free(w);
    pagein_file *f = NULL;
    CHECK_OK(pagein_open(&f, p, NULL));
    for (int i = 0; f && i < 6; i++) CHECK_STR(pagein_tensor_by_layer(f, (size_t)i)->name, order[i]);
    pagein_close(f);
    return PASS;
}

/* ---- copying metadata between layouts ----------------------------------- */

/* Compares array a of file fa with array b of file fb element by element,
 * through the getters (so byte order and version do not matter). */
static int same_array(const pagein_file *fa, const pagein_meta *a, const pagein_file *fb, const pagein_meta *b) {
    if (a->elem_type != b->elem_type || a->count != b->count) return 0;
    for (uint64_t i = 0; i < a->count; i++) {
        switch (a->elem_type) {
        case PAGEIN_META_STRING: {
            const char *s1, *s2;
            size_t n1, n2;
            if (pagein_meta_array_str(fa, a, i, &s1, &n1) || pagein_meta_array_str(fb, b, i, &s2, &n2)) return 0;
            if (n1 != n2 || memcmp(s1, s2, n1)) return 0;
            break;
        }
        case PAGEIN_META_ARRAY: {
            pagein_meta x, y;
            if (pagein_meta_array_at(fa, a, i, &x) || pagein_meta_array_at(fb, b, i, &y)) return 0;
            if (!same_array(fa, &x, fb, &y)) return 0;
            break;
        }
        case PAGEIN_META_F32: case PAGEIN_META_F64: {
            double x, y;
            if (pagein_meta_array_f64(fa, a, i, &x) || pagein_meta_array_f64(fb, b, i, &y)) return 0;
            if (memcmp(&x, &y, sizeof x) != 0) return 0; /* bitwise: NaNs too */
            break;
        }
        default: {
            int64_t x, y;
            uint64_t ux, uy;
            if (pagein_meta_array_i64(fa, a, i, &x) == 0) {
                if (pagein_meta_array_i64(fb, b, i, &y) || x != y) return 0;
            } else if (pagein_meta_array_u64(fa, a, i, &ux) || pagein_meta_array_u64(fb, b, i, &uy) || ux != uy) {
                return 0;
            }
        }
        }
    }
    return 1;
}

static int same_meta(const pagein_file *fa, const pagein_meta *a, const pagein_file *fb, const pagein_meta *b) {
    if (a->type != b->type || a->key_len != b->key_len || memcmp(a->key, b->key, a->key_len)) return 0;
    switch (a->type) {
    case PAGEIN_META_STRING: return a->str_len == b->str_len && memcmp(a->str, b->str, (size_t)a->str_len) == 0;
    case PAGEIN_META_ARRAY: return same_array(fa, a, fb, b);
    case PAGEIN_META_F32: case PAGEIN_META_F64: return memcmp(&a->v.f, &b->v.f, sizeof a->v.f) == 0;
    case PAGEIN_META_BOOL: return a->v.b == b->v.b;
    default: return a->v.u == b->v.u;
    }
}

/* Copies src (metadata with pagein_gguf_set_meta, tensors by data pointer)
 * into a new file of the given layout, then checks every record and every
 * tensor byte. Tensors ggml would refuse to write are counted in *skipped. */
static void copy_and_check(const char *src, uint32_t version, int be, int *skipped) {
    pagein_file *f = NULL, *g = NULL;
    CHECK_OK(pagein_open(&f, src, NULL));
    if (!f) return;
    pagein_gguf_write_opts wo = PAGEIN_GGUF_WRITE_OPTS_INIT;
    pagein_file_info in;
    pagein_file_get_info(f, &in);
    if (in.alignment != 32) wo.alignment = in.alignment;
    pagein_gguf_writer *w = NULL;
    CHECK_OK(pagein_gguf_writer_new(&w, &wo));
    if (w) CHECK_OK(pi_gguf_writer_layout(w, version, be));
    for (size_t i = 0; w && i < pagein_meta_count(f); i++) {
        const pagein_meta *m = pagein_meta_at(f, i);
        CHECK_OK(pagein_gguf_set_meta(w, NULL, f, m));
    }
    for (size_t i = 0; w && i < pagein_tensor_count(f); i++) {
        const pagein_tensor *t = pagein_tensor_at(f, i);
        pagein_write_tensor wt = {t->name, t->dtype, t->ndim, t->shape, t->data, NULL, NULL};
        int rc = pagein_gguf_add_tensor(w, &wt);
        if (rc == PAGEIN_E_BAD_TENSOR_INFO) (*skipped)++;
        else CHECK_OK(rc);
    }
    const char *p = pt_tmppath("copy.gguf");
    CHECK_OK(pagein_gguf_write(w, p));
    pagein_gguf_writer_free(w);
    CHECK_OK(pagein_open(&g, p, NULL));
    if (g) {
        CHECK_EQ(pagein_meta_count(g), pagein_meta_count(f));
        for (size_t i = 0; i < pagein_meta_count(f) && i < pagein_meta_count(g); i++) {
            int same = same_meta(f, pagein_meta_at(f, i), g, pagein_meta_at(g, i));
            if (!same) printf("    %s: metadata '%s' differs after copy\n", src, pagein_meta_at(f, i)->key);
            CHECK(same);
        }
        for (size_t i = 0; i < pagein_tensor_count(g); i++) {
            const pagein_tensor *b = pagein_tensor_at(g, i), *a = pagein_tensor_get(f, b->name);
            CHECK(a != NULL);
            if (!a) continue;
            CHECK(a->dtype == b->dtype && a->ndim == b->ndim && a->nbytes == b->nbytes);
            CHECK(memcmp(a->shape, b->shape, a->ndim * sizeof *a->shape) == 0);
            CHECK(memcmp(a->data, b->data, (size_t)a->nbytes) == 0);
        }
        pagein_close(g);
    }
    pagein_close(f);
}

TEST(gguf_copy_real_files_every_layout) {
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    static const char *files[] = {"gguf/ggml-vocab-gpt-2.gguf", "gguf/ggml-vocab-llama-spm.gguf",
                                  "gguf/ggml-vocab-bert-bge.gguf", "gguf/llama-2-tiny-random.gguf",
                                  "gguf/tinyllamas-stories-260k-q8_0.gguf", "gguf/zackshen-test-le-v3-align64.gguf"};
    int skipped = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        copy_and_check(pt_testdata(files[i]), 3, 0, &skipped);
        copy_and_check(pt_testdata(files[i]), 1, 1, &skipped); /* v1 big-endian: every conversion at once */
    }
    /* tinyllamas' 5 odd-row Q8_0 ffn_down tensors, twice: ggml would refuse them */
    CHECK_EQ(skipped, 10);
    /* and back: a v1 big-endian file copied to v3 little-endian */
    const char *be = pt_tmppath("be-src.gguf");
    {
        int sk = 0;
        copy_and_check(pt_testdata("gguf/zackshen-test-le-v3-align64.gguf"), 1, 1, &sk);
        /* copy.gguf now holds the v1 BE copy; copy it again to v3 LE */
        size_t n;
        void *img = pt_read_file(pt_tmppath("copy.gguf"), &n);
        CHECK(img != NULL);
        if (img) {
            pt_write_file(be, img, n);
            free(img);
            copy_and_check(be, 3, 0, &sk);
        }
    }
    return PASS;
}
