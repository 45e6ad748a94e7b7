/* test_allocfail.c - allocation-failure injection: every parser, fed a valid
 * input, is made to fail its 1st, 2nd, ... allocation in turn and must
 * return exactly -ENOMEM each time, leaving nothing allocated (the ASan and
 * valgrind runs of this suite check the leaks). White-box: uses
 * pi_alloc_fail_after from src/internal.h. */
#include "test.h"
#include "../src/format/format.h"
#include "../src/io/io.h"
#include "../src/load/load.h"

#include <stdlib.h>

/* Calls parse(buf, len) with allocation k failing, for k = 0, 1, ... until a
 * run succeeds. Returns the number of allocations a successful parse makes,
 * or -1 after reporting a failure. */
static long fail_each(const char *what, int (*parse)(const void *, size_t), const void *buf, size_t len) {
    for (long k = 0; k < 100000; k++) {
        pi_alloc_fail_after(k);
        int rc = parse(buf, len);
        pi_alloc_fail_after(-1);
        if (rc >= 0) return k;
        if (rc != -ENOMEM) {
            printf("    %s: allocation %ld failing gave %d (%s), expected -ENOMEM: %s\n", what, k, rc,
                   pagein_strerror(rc), pagein_last_error_detail());
            pt_failed = 1;
            return -1;
        }
    }
    printf("    %s: never succeeded\n", what);
    pt_failed = 1;
    return -1;
}

static int parse_manifest(const void *buf, size_t len) {
    return pagein_manifest_validate(buf, len, NULL);
}

static int parse_manifest_format(const void *buf, size_t len) {
    struct pi_manifest m;
    pi_manifest_init(&m);
    int rc = pi_manifest_parse(buf, len, &m);
    char *out = NULL;
    size_t n = 0;
    if (rc == 0) rc = pi_manifest_format(&m, &out, &n);
    pi_free(out);
    pi_manifest_free(&m);
    return rc;
}

/* A manifest of many files and tensors, so the arrays and the arena grow. */
static char *big_manifest(size_t *len) {
    size_t cap = 1 << 20, n = 0;
    char *b = malloc(cap);
    n += (size_t)snprintf(b + n, cap - n, "pagein-manifest 1\nhash xxh3-128\n");
    for (int f = 0; f < 20; f++)
        n += (size_t)snprintf(b + n, cap - n, "file %d 1000000 16 0123456789abcdef0123456789abcdef shard-%d\n", f, f);
    for (int t = 0; t < 600; t++)
        n += (size_t)snprintf(b + n, cap - n, "tensor %d %d 8 0123456789abcdef0123456789abcdef model.layers.%d.w%%20%s\n",
                              t % 20, 16 + 8 * t, t, t % 7 ? "" : "long-name-to-fill-the-arena-faster-xxxxxxxxxxxxxxxx");
    n += (size_t)snprintf(b + n, cap - n, "end 20 600\n");
    *len = n;
    return b;
}

TEST(allocfail_manifest) {
    size_t len;
    char *m = big_manifest(&len);
    size_t nt = 0;
    CHECK_EQ(pagein_manifest_validate(m, len, &nt), 0);
    CHECK_EQ(nt, 600);
    long n = fail_each("manifest parse", parse_manifest, m, len);
    CHECK(n > 3);
    CHECK(fail_each("manifest parse+format", parse_manifest_format, m, len) > n);
    printf("    manifest: %ld allocations, each failed in turn\n", n);
    free(m);
    return PASS;
}

static int parse_file_image(const void *buf, size_t len) {
    pagein_file *f = NULL;
    int rc = pagein_open_memory(&f, buf, len, "image", NULL);
    pagein_close(f);
    return rc;
}

TEST(allocfail_safetensors) {
    int did = 0;
    if (pt_have_testdata()) {
        size_t len = 0;
        void *b = pt_read_file(pt_testdata("safetensors/ollama-minicpm3-tiny-f32.safetensors"), &len);
        if (b) {
            long n = fail_each("safetensors parse (minicpm3-tiny)", parse_file_image, b, len);
            printf("    safetensors minicpm3-tiny: %ld allocations, each failed in turn\n", n);
            CHECK(n > 3);
            did = 1;
        }
        free(b);
    }
    /* a header with metadata, escapes and many tensors (arena and table growth) */
    static uint8_t data[64 * 4];
    pagein_write_tensor t[64];
    char names[64][48];
    uint64_t shape[1] = {4};
    for (int i = 0; i < 64; i++) {
        snprintf(names[i], sizeof names[i], "model.layers.%d.w\\u00e9\"x", i);
        t[i] = (pagein_write_tensor){names[i], PAGEIN_DTYPE_U8, 1, shape, data + 4 * i, NULL, NULL};
    }
    const char *keys[2] = {"format", "note"}, *vals[2] = {"pt", "caf\xc3\xa9 \\n"};
    pagein_write_opts o = PAGEIN_WRITE_OPTS_INIT;
    o.meta_keys = keys;
    o.meta_values = vals;
    o.n_meta = 2;
    const char *path = pt_tmppath("allocfail.safetensors");
    CHECK_OK(pagein_safetensors_write(path, t, 64, &o));
    size_t len = 0;
    void *b = pt_read_file(path, &len);
    CHECK(b != NULL);
    if (b) {
        long n = fail_each("safetensors parse (64 tensors + metadata)", parse_file_image, b, len);
        printf("    safetensors 64 tensors: %ld allocations, each failed in turn\n", n);
        CHECK(n > 5);
        did = 1;
    }
    free(b);
    return did ? PASS : FAIL;
}

TEST(allocfail_gguf) {
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    const char *files[] = {"gguf/tinyllamas-stories-260k-q8_0.gguf", "gguf/zackshen-test-le-v3-align64.gguf"};
    int did = 0;
    for (size_t i = 0; i < 2; i++) {
        size_t len = 0;
        void *b = pt_read_file(pt_testdata(files[i]), &len);
        if (!b) continue;
        long n = fail_each(files[i], parse_file_image, b, len);
        printf("    %s: %ld allocations, each failed in turn\n", files[i], n);
        CHECK(n > 3);
        free(b);
        did = 1;
    }
    if (!did) SKIP_BECAUSE("GGUF test files missing");
    return PASS;
}

static int parse_index(const void *buf, size_t len) {
    struct pi_index ix;
    pi_index_init(&ix);
    int rc = pi_index_parse(buf, len, &ix);
    pi_index_free(&ix);
    return rc;
}

TEST(allocfail_index) {
    char *b = malloc(1 << 16);
    size_t n = (size_t)sprintf(b, "{\"metadata\":{\"total_size\":123,\"note\":[1,{\"x\":\"\\u00e9\"}]},\"weight_map\":{");
    for (int i = 0; i < 300; i++)
        n += (size_t)sprintf(b + n, "%s\"model.layers.%d.self_attn.q_proj.weight\":\"model-%05d-of-00007.safetensors\"",
                             i ? "," : "", i, i % 7 + 1);
    n += (size_t)sprintf(b + n, "}}");
    CHECK_OK(parse_index(b, n));
    long k = fail_each("index parse", parse_index, b, n);
    printf("    index: %ld allocations, each failed in turn\n", k);
    CHECK(k > 3);
    free(b);
    return PASS;
}
