/* test_safetensors.c - the safetensors reader: real files, the crate's
 * malformed files, and hand-made headers (duplicates, escapes, surrogates,
 * bad UTF-8, depth, metadata, lenient mode). Black-box: uses only pagein.h. */
#include "test.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

/* Builds a safetensors image: 8-byte length, hdr, then ndata bytes of
 * 0,1,2,... (malloc'd; *len set). */
static uint8_t *mk(const char *hdr, size_t hlen, size_t ndata, size_t *len) {
    *len = 8 + hlen + ndata;
    uint8_t *b = malloc(*len ? *len : 1);
    uint64_t n = hlen;
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(n >> (8 * i));
    memcpy(b + 8, hdr, hlen);
    for (size_t i = 0; i < ndata; i++) b[8 + hlen + i] = (uint8_t)i;
    return b;
}

/* Opens a header given as a C string with ndata data bytes; returns the
 * code; *out (may be NULL) receives the file on success. */
static int open_hdr2(const char *hdr, size_t hlen, size_t ndata, uint32_t flags, pagein_file **out,
                     uint8_t **keep) {
    size_t len;
    uint8_t *b = mk(hdr, hlen, ndata, &len);
    pagein_open_opts o = PAGEIN_OPEN_OPTS_INIT;
    o.flags = flags;
    pagein_file *f = NULL;
    int rc = pagein_open_memory(&f, b, len, "hand-made", &o);
    if (rc == 0 && out) {
        *out = f;
        *keep = b;
        return 0;
    }
    pagein_close(f);
    free(b);
    return rc;
}

static int open_hdr(const char *hdr, size_t ndata) {
    return open_hdr2(hdr, strlen(hdr), ndata, 0, NULL, NULL);
}

/* ---- real files ----------------------------------------------------------- */

static size_t count_substr(const char *s, size_t n, const char *w) {
    size_t c = 0, wl = strlen(w);
    for (size_t i = 0; i + wl <= n; i++)
        if (memcmp(s + i, w, wl) == 0) c++;
    return c;
}

/* Checks the table against the file's header independently of the parser's
 * JSON code: every name appears as a key, the count matches the number of
 * data_offsets fields, offsets are contiguous, sizes match dtype x shape. */
static void check_file_consistent(const char *path) {
    size_t flen;
    uint8_t *raw = pt_read_file(path, &flen);
    CHECK(raw != NULL);
    if (!raw) return;
    pagein_file *f = NULL;
    int rc = pagein_open(&f, path, NULL);
    if (rc) printf("    %s: %s: %s\n", path, pagein_strerror(rc), pagein_last_error_detail());
    CHECK_OK(rc);
    if (!f) {
        free(raw);
        return;
    }
    pagein_file_info info;
    pagein_file_get_info(f, &info);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | raw[i];
    CHECK_EQ(info.format, PAGEIN_FORMAT_SAFETENSORS);
    CHECK_EQ(info.header_len, n);
    CHECK_EQ(info.data_start, 8 + n);
    CHECK_EQ(info.file_size, flen);
    const char *hdr = (const char *)raw + 8;
    CHECK_EQ(pagein_tensor_count(f), count_substr(hdr, n, "\"data_offsets\""));
    uint64_t pos = info.data_start;
    for (size_t i = 0; i < pagein_tensor_count(f); i++) {
        const pagein_tensor *t = pagein_tensor_at(f, i);
        CHECK_EQ(t->index, i);
        CHECK_EQ(t->offset, pos);
        pos += t->nbytes;
        uint64_t nb = 0;
        CHECK_OK(pagein_dtype_nbytes(t->dtype, t->nelements, &nb));
        CHECK_EQ(nb, t->nbytes);
        CHECK(t->data == (const uint8_t *)info.base + t->offset);
        char key[512];
        snprintf(key, sizeof key, "\"%s\":", t->name);
        CHECK(count_substr(hdr, n, key) == 1);
        CHECK(pagein_tensor_get(f, t->name) == t);
        uint64_t esz = pagein_dtype_get(t->dtype)->bits / 8;
        if (esz == 0) esz = 1;
        CHECK_EQ(!!(t->flags & PAGEIN_TENSOR_UNALIGNED), t->offset % esz != 0);
    }
    CHECK_EQ(pos, flen);
    pagein_close(f);
    free(raw);
}

static int for_each_file(const char *dir, void (*fn)(const char *)) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (!strstr(e->d_name, ".safetensors")) continue;
        fn(p);
        n++;
    }
    closedir(d);
    return n;
}

TEST(st_real_files_open) {
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    int n = 0;
    n += for_each_file(pt_testdata("safetensors"), check_file_consistent);
    n += for_each_file(pt_testdata("safetensors/golden-rust-tests"), check_file_consistent);
    n += for_each_file(pt_testdata("safetensors/samples-2022"), check_file_consistent);
    CHECK(n >= 22);
    return PASS;
}

TEST(st_real_file_contents) {
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    pagein_file *f;
    /* golden writer output: F32 [1,2,3] values 0..5 */
    CHECK_OK(pagein_open(&f, pt_testdata("safetensors/golden-rust-tests/test_serialization_writer_out.safetensors"), NULL));
    const pagein_tensor *t = pagein_tensor_get(f, "attn.0");
    CHECK(t && t->dtype == PAGEIN_DTYPE_F32 && t->ndim == 3 && t->offset == 72 && t->nbytes == 24);
    if (t) {
        CHECK(t->shape[0] == 1 && t->shape[1] == 2 && t->shape[2] == 3);
        float v[6];
        memcpy(v, t->data, 24);
        for (int i = 0; i < 6; i++) CHECK(v[i] == (float)i);
    }
    pagein_close(f);
    /* rank 0 */
    CHECK_OK(pagein_open(&f, pt_testdata("safetensors/golden-rust-tests/test_empty_shapes_allowed.safetensors"), NULL));
    t = pagein_tensor_get(f, "test");
    CHECK(t && t->ndim == 0 && t->nelements == 1 && t->nbytes == 4);
    pagein_close(f);
    /* old writer: metadata, name order, unaligned U32 */
    CHECK_OK(pagein_open(&f, pt_testdata("safetensors/samples-2022/overall.safetensors"), NULL));
    CHECK_EQ(pagein_tensor_count(f), 9);
    CHECK_EQ(pagein_meta_count(f), 1);
    const pagein_meta *m = pagein_meta_find(f, "test");
    CHECK(m && m->type == PAGEIN_META_STRING && m->str_len == 1 && strcmp(m->str, "a") == 0);
    t = pagein_tensor_get(f, "I");
    CHECK(t && t->dtype == PAGEIN_DTYPE_U32);
    t = pagein_tensor_get(f, "f");
    CHECK(t && t->dtype == PAGEIN_DTYPE_F32 && t->nelements == 6);
    if (t) {
        for (int i = 0; i < 6; i++) {
            float x;
            memcpy(&x, (const uint8_t *)t->data + 4 * i, 4);
            CHECK(x == (float)(i - 3));
        }
    }
    int unaligned = 0;
    for (size_t i = 0; i < pagein_tensor_count(f); i++) unaligned += !!(pagein_tensor_at(f, i)->flags & PAGEIN_TENSOR_UNALIGNED);
    CHECK(unaligned > 0);
    pagein_close(f);
    /* burn mnist: 18 F32 + 2 I64 */
    CHECK_OK(pagein_open(&f, pt_testdata("safetensors/burn-mnist-f32.safetensors"), NULL));
    CHECK_EQ(pagein_tensor_count(f), 20);
    int i64 = 0;
    for (size_t i = 0; i < pagein_tensor_count(f); i++) i64 += pagein_tensor_at(f, i)->dtype == PAGEIN_DTYPE_I64;
    CHECK_EQ(i64, 2);
    pagein_close(f);
    /* ollama: HF layer names */
    CHECK_OK(pagein_open(&f, pt_testdata("safetensors/ollama-minicpm3-tiny-f32.safetensors"), NULL));
    CHECK_EQ(pagein_tensor_count(f), 15);
    t = pagein_tensor_get(f, "model.embed_tokens.weight");
    CHECK(t && t->layer == -1);
    CHECK(pagein_tensor_by_layer(f, 0) == t);
    pagein_close(f);
    return PASS;
}

/* ---- malformed: the crate's test inputs, each with its own code ------------ */

static const struct {
    const char *file;
    int code;
} malformed[] = {
    {"test_header_too_large.safetensors", PAGEIN_E_HEADER_TOO_LARGE},
    {"test_header_too_small.safetensors", PAGEIN_E_HEADER_TOO_SMALL},
    {"test_invalid_header_length.safetensors", PAGEIN_E_HEADER_LENGTH},
    {"test_invalid_header_non_utf8.safetensors", PAGEIN_E_BAD_UTF8},
    {"test_invalid_header_not_json.safetensors", PAGEIN_E_BAD_JSON},
    {"test_invalid_info.safetensors", PAGEIN_E_BAD_TENSOR_INFO},
    {"test_metadata_incomplete_buffer_0.safetensors", PAGEIN_E_INCOMPLETE},
    {"test_metadata_incomplete_buffer_1.safetensors", PAGEIN_E_INCOMPLETE},
    {"test_validation_overflow_0.safetensors", PAGEIN_E_OVERFLOW},
    {"test_validation_overflow_1.safetensors", PAGEIN_E_OVERFLOW},
};

static int malformed_seen;
static void check_malformed(const char *path) {
    const char *base = strrchr(path, '/') + 1;
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        if (strcmp(base, malformed[i].file) != 0) continue;
        malformed_seen++;
        pagein_file *f = NULL;
        int rc = pagein_open(&f, path, NULL);
        if (rc != malformed[i].code)
            printf("    %s: got %d (%s: %s), expected %s\n", base, rc, pagein_strerror(rc),
                   pagein_last_error_detail(), pagein_strerror(malformed[i].code));
        CHECK_EQ(rc, malformed[i].code);
        CHECK(f == NULL);
        CHECK(strstr(pagein_last_error_detail(), base) != NULL); /* detail names the file */
        return;
    }
    printf("    %s: malformed file without an expected code in the test table\n", base);
    CHECK(0);
}

TEST(st_malformed_files) {
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    malformed_seen = 0;
    int n = for_each_file(pt_testdata("safetensors/malformed"), check_malformed);
    CHECK_EQ(n, (int)(sizeof malformed / sizeof malformed[0]));
    CHECK_EQ(malformed_seen, n);
    /* lenient mode: trailing bytes are fine, missing bytes are not */
    pagein_open_opts o = PAGEIN_OPEN_OPTS_INIT;
    o.flags = PAGEIN_OPEN_LENIENT;
    pagein_file *f = NULL;
    CHECK_OK(pagein_open(&f, pt_testdata("safetensors/malformed/test_metadata_incomplete_buffer_0.safetensors"), &o));
    CHECK(f && pagein_tensor_count(f) == 1);
    pagein_close(f);
    f = NULL;
    CHECK_EQ(pagein_open(&f, pt_testdata("safetensors/malformed/test_metadata_incomplete_buffer_1.safetensors"), &o),
             PAGEIN_E_INCOMPLETE);
    return PASS;
}

/* ---- hand-made headers ------------------------------------------------------ */

#define T1(dtype, shape, off) "{\"a\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":" off "}}"

TEST(st_rules_in_order) {
    CHECK_OK(open_hdr(T1("F32", "[2]", "[0,8]"), 8));
    CHECK_OK(open_hdr("{}", 0));
    CHECK_OK(open_hdr(" \t\r\n{} \t\r\n", 0)); /* whitespace both sides */
    CHECK_EQ(open_hdr("{} x", 0), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr("[]", 0), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr("", 0), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr("{}", 1), PAGEIN_E_INCOMPLETE);
    CHECK_EQ(open_hdr(T1("F33", "[2]", "[0,8]"), 8), PAGEIN_E_BAD_DTYPE);
    CHECK_EQ(open_hdr(T1("f32", "[2]", "[0,8]"), 8), PAGEIN_E_BAD_DTYPE);
    CHECK_EQ(open_hdr(T1("Q8_0", "[32]", "[0,34]"), 34), PAGEIN_E_BAD_DTYPE); /* GGUF-only */
    CHECK_EQ(open_hdr(T1("F32", "[2]", "[4,12]"), 12), PAGEIN_E_BAD_OFFSET);  /* gap at 0 */
    CHECK_EQ(open_hdr(T1("F32", "[0]", "[8,0]"), 8), PAGEIN_E_BAD_OFFSET);    /* end < begin */
    CHECK_EQ(open_hdr(T1("F32", "[2]", "[0,4]"), 4), PAGEIN_E_BAD_TENSOR_INFO);
    CHECK_EQ(open_hdr(T1("F4", "[3]", "[0,2]"), 2), PAGEIN_E_MISALIGNED_SLICE);
    CHECK_OK(open_hdr(T1("F6_E2M3", "[4]", "[0,3]"), 3));
    CHECK_EQ(open_hdr(T1("F32", "[4294967296,4294967296]", "[0,8]"), 8), PAGEIN_E_OVERFLOW);
    CHECK_EQ(open_hdr(T1("F64", "[4611686018427387904]", "[0,8]"), 8), PAGEIN_E_OVERFLOW); /* bits overflow */
    CHECK_EQ(open_hdr(T1("F32", "[18446744073709551616]", "[0,8]"), 8), PAGEIN_E_BAD_JSON); /* > u64 */
    CHECK_EQ(open_hdr(T1("F32", "[-1]", "[0,8]"), 8), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr(T1("F32", "[2.0]", "[0,8]"), 8), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr(T1("F32", "[2]", "[0,8,9]"), 8), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr(T1("F32", "[2]", "[0]"), 8), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr(T1("F32", "2", "[0,8]"), 8), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 0), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr("{\"a\":[]}", 0), PAGEIN_E_BAD_JSON);
    /* unknown fields are ignored (serde without deny_unknown_fields), nested deeply or not */
    CHECK_OK(open_hdr("{\"a\":{\"x\":{\"y\":[1,2.5e3,true,null,\"s\"]},\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1));
    /* key order inside an entry is free; tensors sorted by offset */
    pagein_file *f;
    uint8_t *keep;
    const char *h = "{\"z\":{\"data_offsets\":[0,2],\"shape\":[1],\"dtype\":\"BF16\"},"
                    "\"b\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[3,4]},"
                    "\"e\":{\"dtype\":\"I8\",\"shape\":[0,5],\"data_offsets\":[2,2]},"
                    "\"y\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]}}";
    CHECK_OK(open_hdr2(h, strlen(h), 4, 0, &f, &keep));
    if (f) {
        CHECK_STR(pagein_tensor_at(f, 0)->name, "z");
        CHECK_STR(pagein_tensor_at(f, 1)->name, "e");
        CHECK_STR(pagein_tensor_at(f, 2)->name, "y");
        CHECK_STR(pagein_tensor_at(f, 3)->name, "b");
        CHECK_EQ(pagein_tensor_at(f, 3)->ndim, 0);
        CHECK_EQ(pagein_tensor_at(f, 1)->nbytes, 0);
        pagein_file_info info;
        pagein_file_get_info(f, &info);
        CHECK_EQ(pagein_tensor_at(f, 3)->offset, info.data_start + 3);
        pagein_close(f);
        free(keep);
    }
    return PASS;
}

TEST(st_duplicates) {
    CHECK_EQ(open_hdr("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                      "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2),
             PAGEIN_E_DUPLICATE);
    /* same name spelled with an escape */
    CHECK_EQ(open_hdr("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                      "\"\\u0061\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2),
             PAGEIN_E_DUPLICATE);
    CHECK_EQ(open_hdr("{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1),
             PAGEIN_E_DUPLICATE);
    /* same offsets: reported as the duplicate, not as the overlap it causes */
    CHECK_EQ(open_hdr("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                      "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1),
             PAGEIN_E_DUPLICATE);
    CHECK_EQ(open_hdr("{\"__metadata__\":{},\"__metadata__\":{}}", 0), PAGEIN_E_DUPLICATE);
    CHECK_EQ(open_hdr("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0), PAGEIN_E_DUPLICATE);
    return PASS;
}

TEST(st_escapes_and_utf8) {
    pagein_file *f;
    uint8_t *keep;
    /* escapes in names: \" \\ \/ \b \f \n \r \t, \u00e9, a surrogate pair (U+1F600), NUL */
    const char *h = "{\"q\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\\u0000z\":"
                    "{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
    CHECK_OK(open_hdr2(h, strlen(h), 1, 0, &f, &keep));
    if (f) {
        const char want[] = "q\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80\0z";
        const pagein_tensor *t = pagein_tensor_at(f, 0);
        CHECK_EQ(t->name_len, sizeof want - 1);
        CHECK(memcmp(t->name, want, sizeof want - 1) == 0);
        CHECK(pagein_tensor_find(f, want, sizeof want - 1) == t);
        pagein_close(f);
        free(keep);
    }
    /* raw UTF-8 in names is fine */
    CHECK_OK(open_hdr("{\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1));
    /* lone surrogates and bad escapes: JSON errors */
    CHECK_EQ(open_hdr("{\"\\ud83d\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr("{\"\\ude00\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr("{\"\\ud83dx\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr("{\"\\ud83d\\u0041\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr("{\"\\x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr("{\"\\u12g4\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr("{\"a\tb\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1), PAGEIN_E_BAD_JSON);
    /* bad UTF-8 anywhere in the header, even where the JSON is also bad */
    CHECK_EQ(open_hdr("{\"\xc0\xaf\":1}", 0), PAGEIN_E_BAD_UTF8);           /* overlong */
    CHECK_EQ(open_hdr("{\"\xed\xa0\x80\":1}", 0), PAGEIN_E_BAD_UTF8);       /* encoded surrogate */
    CHECK_EQ(open_hdr("{\"\xf4\x90\x80\x80\":1}", 0), PAGEIN_E_BAD_UTF8);   /* > U+10FFFF */
    CHECK_EQ(open_hdr("{\"\xe2\x82\":1}", 0), PAGEIN_E_BAD_UTF8);           /* truncated */
    CHECK_EQ(open_hdr("{} \x80", 0), PAGEIN_E_BAD_UTF8);
    return PASS;
}

TEST(st_depth_limit) {
    /* 200 nested arrays in an ignored field: over the depth limit, and no recursion */
    char h[1024];
    size_t k = 0;
    k += (size_t)sprintf(h + k, "{\"a\":{\"x\":");
    for (int i = 0; i < 200; i++) h[k++] = '[';
    for (int i = 0; i < 200; i++) h[k++] = ']';
    k += (size_t)sprintf(h + k, ",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}");
    h[k] = 0;
    CHECK_EQ(open_hdr(h, 1), PAGEIN_E_LIMIT);
    /* 100 deep is fine */
    k = 0;
    k += (size_t)sprintf(h + k, "{\"a\":{\"x\":");
    for (int i = 0; i < 100; i++) h[k++] = '[';
    for (int i = 0; i < 100; i++) h[k++] = ']';
    k += (size_t)sprintf(h + k, ",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}");
    h[k] = 0;
    CHECK_OK(open_hdr(h, 1));
    /* unclosed */
    CHECK_EQ(open_hdr("{\"a\":{\"x\":[[[", 0), PAGEIN_E_BAD_JSON);
    return PASS;
}

TEST(st_metadata) {
    pagein_file *f;
    uint8_t *keep;
    const char *h = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                    "\"__metadata__\":{\"format\":\"pt\",\"nul\":\"x\\u0000y\",\"empty\":\"\"}}";
    CHECK_OK(open_hdr2(h, strlen(h), 1, 0, &f, &keep));
    if (f) {
        CHECK_EQ(pagein_meta_count(f), 3);
        CHECK_EQ(pagein_tensor_count(f), 1);
        const pagein_meta *m = pagein_meta_find(f, "format");
        CHECK(m && m->type == PAGEIN_META_STRING && strcmp(m->str, "pt") == 0 && m->str_len == 2);
        m = pagein_meta_find(f, "nul");
        CHECK(m && m->str_len == 3 && memcmp(m->str, "x\0y", 4) == 0);
        m = pagein_meta_at(f, 2);
        CHECK(m && strcmp(m->key, "empty") == 0 && m->str_len == 0 && m->str[0] == 0);
        pagein_close(f);
        free(keep);
    }
    h = "{\"__metadata__\":null}";
    CHECK_OK(open_hdr2(h, strlen(h), 0, 0, &f, &keep));
    if (f) {
        CHECK_EQ(pagein_meta_count(f), 0);
        pagein_close(f);
        free(keep);
    }
    CHECK_EQ(open_hdr("{\"__metadata__\":{\"n\":1}}", 0), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr("{\"__metadata__\":{\"n\":{}}}", 0), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr("{\"__metadata__\":{\"n\":null}}", 0), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr("{\"__metadata__\":[]}", 0), PAGEIN_E_BAD_JSON);
    CHECK_EQ(open_hdr("{\"__metadata__\":\"x\"}", 0), PAGEIN_E_BAD_JSON);
    return PASS;
}

TEST(st_lenient_and_limits) {
    pagein_file *f;
    uint8_t *keep;
    const char *h = T1("U8", "[2]", "[0,2]");
    CHECK_EQ(open_hdr2(h, strlen(h), 5, 0, NULL, NULL), PAGEIN_E_INCOMPLETE);
    CHECK_OK(open_hdr2(h, strlen(h), 5, PAGEIN_OPEN_LENIENT, &f, &keep));
    if (f) {
        CHECK_EQ(pagein_tensor_at(f, 0)->nbytes, 2);
        pagein_close(f);
        free(keep);
    }
    CHECK_EQ(open_hdr2(h, strlen(h), 1, PAGEIN_OPEN_LENIENT, NULL, NULL), PAGEIN_E_INCOMPLETE);
    /* length prefix rules on raw buffers */
    uint8_t b[16] = {0};
    pagein_file *g = NULL;
    CHECK_EQ(pagein_open_memory(&g, b, 7, NULL, NULL), PAGEIN_E_HEADER_TOO_SMALL);
    b[0] = 0x01, b[1] = 0xe1, b[2] = 0xf5, b[3] = 0x05; /* 100,000,001 */
    CHECK_EQ(pagein_open_memory(&g, b, 16, NULL, NULL), PAGEIN_E_HEADER_TOO_LARGE);
    memset(b, 0xff, 8);
    CHECK_EQ(pagein_open_memory(&g, b, 16, NULL, NULL), PAGEIN_E_HEADER_TOO_LARGE);
    memset(b, 0, 8);
    b[0] = 9;
    CHECK_EQ(pagein_open_memory(&g, b, 16, NULL, NULL), PAGEIN_E_HEADER_LENGTH);
    CHECK(g == NULL);
    /* detail names the tensor, its offsets and the expectation */
    CHECK_EQ(open_hdr("{\"w.x\":{\"dtype\":\"F32\",\"shape\":[2,4],\"data_offsets\":[0,24]}}", 24),
             PAGEIN_E_BAD_TENSOR_INFO);
    const char *d = pagein_last_error_detail();
    CHECK(strstr(d, "w.x") && strstr(d, "[0,24]") && strstr(d, "expected 32"));
    return PASS;
}

/* A random image that is valid, then each single-byte corruption must
 * either parse or fail cleanly (ASan in san-test checks the cleanliness). */
TEST(st_random_corruptions) {
    uint64_t s = pt_seed();
    const char *h = "{\"__metadata__\":{\"k\":\"v\"},\"m.layers.0.w\":{\"dtype\":\"BF16\",\"shape\":[2,2],"
                    "\"data_offsets\":[0,8]},\"m.layers.1.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
    size_t len;
    uint8_t *b = mk(h, strlen(h), 12, &len);
    pagein_file *f = NULL;
    CHECK_OK(pagein_open_memory(&f, b, len, NULL, NULL));
    pagein_close(f);
    for (int it = 0; it < 2000; it++) {
        uint8_t *c = malloc(len);
        memcpy(c, b, len);
        size_t at = pt_rand(&s) % len;
        c[at] = (uint8_t)pt_rand(&s);
        size_t cl = (it % 7 == 0) ? pt_rand(&s) % (len + 1) : len;
        f = NULL;
        int rc = pagein_open_memory(&f, c, cl, NULL, NULL);
        CHECK(rc <= 0);
        if (rc == 0) {
            CHECK(f != NULL);
            pagein_close(f);
        } else {
            CHECK(rc <= PAGEIN_E_BASE && rc > PAGEIN_E_LAST);
        }
        free(c);
    }
    free(b);
    return PASS;
}

/* Layer order (pagein_tensor_by_layer) against an independent sort, for
 * dense layer numbers (counting sort) and sparse ones (fallback). */
static int lcmp3(int ga, int32_t la, uint32_t ia, int gb, int32_t lb, uint32_t ib) {
    if (ga != gb) return ga < gb ? -1 : 1;
    if (la != lb) return la < lb ? -1 : 1;
    return ia < ib ? -1 : ia > ib;
}

TEST(st_layer_order) {
    uint64_t seed = pt_seed();
    for (int round = 0; round < 2; round++) {
        char *h = malloc(1 << 20);
        size_t k = (size_t)sprintf(h, "{");
        int n = 300;
        for (int i = 0; i < n; i++) {
            uint64_t r = pt_rand(&seed);
            char name[96];
            int layer = round == 0 ? (int)(r % 40) : (int)(r % 3) * 49999999;
            switch ((r >> 20) % 5) {
            case 0: snprintf(name, sizeof name, "model.embed_tokens.%d", i); break;
            case 1: snprintf(name, sizeof name, "model.norm.%d", i); break;
            default: snprintf(name, sizeof name, "model.layers.%d.w%d", layer, i); break;
            }
            k += (size_t)sprintf(h + k, "%s\"%s\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%d,%d]}",
                                 i ? "," : "", name, i, i + 1);
        }
        k += (size_t)sprintf(h + k, "}");
        pagein_file *f = NULL;
        uint8_t *keep = NULL;
        CHECK_OK(open_hdr2(h, k, (size_t)n, 0, &f, &keep));
        free(h);
        if (!f) return FAIL;
        for (int i = 1; i < n; i++) {
            const pagein_tensor *a = pagein_tensor_by_layer(f, (size_t)i - 1), *b = pagein_tensor_by_layer(f, (size_t)i);
            int ta = 0, tb = 0;
            pagein_layer_from_name(a->name, a->name_len, &ta);
            pagein_layer_from_name(b->name, b->name_len, &tb);
            int ga = a->layer >= 0 ? 1 : ta ? 2 : 0, gb = b->layer >= 0 ? 1 : tb ? 2 : 0;
            CHECK(lcmp3(ga, a->layer, a->index, gb, b->layer, b->index) < 0);
        }
        pagein_close(f);
        free(keep);
    }
    return PASS;
}

/* The parser has a fast path for compact entries ({"dtype":... right after
 * the ':'); a space before the '{' sends the same entry down the general
 * path. Both must agree on every input: same code, same table. Random
 * headers and random byte mutations of them are parsed both ways. */
static char *spaced(const char *h, size_t n, size_t *out_n) {
    char *o = malloc(2 * n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        o[k++] = h[i];
        if (h[i] == ':' && i + 1 < n && h[i + 1] == '{') o[k++] = ' ';
    }
    *out_n = k;
    return o;
}

static int open_buf(const char *h, size_t hl, size_t ndata, pagein_file **f, uint8_t **keep) {
    *f = NULL;
    *keep = NULL;
    return open_hdr2(h, hl, ndata, 0, f, keep);
}

TEST(st_fast_path_equivalence) {
    uint64_t seed = pt_seed();
    static const char *const dts[] = {"F32", "BF16", "U8", "I64", "F4", "F6_E2M3", "BOOL", "F8_E4M3", "C64", "Q8_0", "f32"};
    static const int bits[] = {32, 16, 8, 64, 4, 6, 8, 8, 64, 8, 32};
    int agreed = 0;
    for (int it = 0; it < 400; it++) {
        char h[4096];
        size_t k = (size_t)sprintf(h, "{");
        uint64_t off = 0;
        int nt = 1 + (int)(pt_rand(&seed) % 5);
        for (int i = 0; i < nt; i++) {
            int d = (int)(pt_rand(&seed) % (sizeof dts / sizeof dts[0]));
            int nd = (int)(pt_rand(&seed) % 3);
            uint64_t dims[2] = {1 + pt_rand(&seed) % 4 * 2, 2 + pt_rand(&seed) % 3 * 2}, ne = 1;
            k += (size_t)sprintf(h + k, "%s\"t%d\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", i, dts[d]);
            for (int j = 0; j < nd; j++) {
                k += (size_t)sprintf(h + k, "%s%" PRIu64, j ? "," : "", dims[j]);
                ne *= dims[j];
            }
            uint64_t nb = ne * (uint64_t)bits[d] / 8;
            k += (size_t)sprintf(h + k, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off, off + nb);
            off += nb;
        }
        k += (size_t)sprintf(h + k, "}");
        int muts = (int)(pt_rand(&seed) % 3);
        for (int m = 0; m < muts; m++) {
            static const char pool[] = "0123456789,:[]{}\" _aFUEB9-.e";
            h[pt_rand(&seed) % k] = pool[pt_rand(&seed) % (sizeof pool - 1)];
        }
        size_t sk;
        char *s = spaced(h, k, &sk);
        pagein_file *fa, *fb;
        uint8_t *ka, *kb;
        int ra = open_buf(h, k, (size_t)off, &fa, &ka);
        int rb = open_buf(s, sk, (size_t)off, &fb, &kb);
        if (ra != rb) printf("    differ (%d vs %d) on: %.*s\n", ra, rb, (int)k, h);
        CHECK_EQ(ra, rb);
        if (ra == 0 && rb == 0) {
            CHECK_EQ(pagein_tensor_count(fa), pagein_tensor_count(fb));
            for (size_t i = 0; i < pagein_tensor_count(fa) && i < pagein_tensor_count(fb); i++) {
                const pagein_tensor *a = pagein_tensor_at(fa, i), *b = pagein_tensor_at(fb, i);
                pagein_file_info ia, ib;
                pagein_file_get_info(fa, &ia);
                pagein_file_get_info(fb, &ib);
                CHECK(a->name_len == b->name_len && memcmp(a->name, b->name, a->name_len) == 0);
                CHECK(a->dtype == b->dtype && a->ndim == b->ndim && a->nbytes == b->nbytes);
                CHECK(a->offset - ia.data_start == b->offset - ib.data_start);
                for (uint32_t d = 0; d < a->ndim && d < b->ndim; d++) CHECK_EQ(a->shape[d], b->shape[d]);
            }
        }
        agreed += ra == rb;
        pagein_close(fa);
        pagein_close(fb);
        free(ka);
        free(kb);
        free(s);
    }
    CHECK_EQ(agreed, 400);
    return PASS;
}
