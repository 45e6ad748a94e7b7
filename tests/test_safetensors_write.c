/* test_safetensors_write.c - the safetensors writer: golden bytes of the
 * Rust crate, round trips for every dtype, layout rules, fill callbacks,
 * atomicity. Black-box: uses only pagein.h. */
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

static int files_equal(const char *a, const char *b) {
    size_t la, lb;
    uint8_t *pa = pt_read_file(a, &la), *pb = pt_read_file(b, &lb);
    int eq = pa && pb && la == lb && memcmp(pa, pb, la) == 0;
    if (!eq && pa && pb) {
        printf("    %s (%zu bytes) != %s (%zu bytes)\n", a, la, b, lb);
        printf("    got:  %.*s\n", (int)(la > 8 ? la - 8 : 0), (const char *)pa + 8);
        printf("    want: %.*s\n", (int)(lb > 8 ? lb - 8 : 0), (const char *)pb + 8);
    }
    free(pa);
    free(pb);
    return eq;
}

/* Counts entries of dir whose names contain ".tmp-" (leftover temp files). */
static int count_temps(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp-")) n++;
    closedir(d);
    return n;
}

TEST(stw_golden_rust_bytes) {
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    const char *dir = pt_testdata("safetensors/golden-rust-tests");
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    if (!d) return PASS;
    float f6[6] = {0, 1, 2, 3, 4, 5};
    uint8_t fp4[1] = {0};
    uint64_t s123[] = {1, 2, 3}, s1123[] = {1, 1, 2, 3}, s12[] = {1, 2};
    struct dirent *e;
    int done = 0;
    char golden[4096];
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, "writer_out")) continue;
        snprintf(golden, sizeof golden, "%s/%s", dir, e->d_name);
        const char *out = pt_tmppath(e->d_name);
        pagein_write_tensor t = {0};
        pagein_write_opts o = PAGEIN_WRITE_OPTS_INIT;
        size_t n = 1;
        const char *mk[] = {"framework"}, *mv[] = {"pt"};
        if (strcmp(e->d_name, "test_serialization_writer_out.safetensors") == 0) {
            t = (pagein_write_tensor){"attn.0", PAGEIN_DTYPE_F32, 3, s123, f6, NULL, NULL};
        } else if (strcmp(e->d_name, "test_serialization_forced_alignement_writer_out.safetensors") == 0) {
            t = (pagein_write_tensor){"attn0", PAGEIN_DTYPE_F32, 4, s1123, f6, NULL, NULL};
        } else if (strcmp(e->d_name, "test_serialization_fp4_writer_out.safetensors") == 0) {
            t = (pagein_write_tensor){"attn.0", PAGEIN_DTYPE_F4, 2, s12, fp4, NULL, NULL};
        } else if (strcmp(e->d_name, "test_empty_writer_out_0.safetensors") == 0) {
            n = 0;
        } else if (strcmp(e->d_name, "test_empty_writer_out_1.safetensors") == 0) {
            n = 0;
            o.meta_keys = mk, o.meta_values = mv, o.n_meta = 1;
        } else {
            printf("    %s: writer golden file without a recipe in this test\n", e->d_name);
            CHECK(0);
            continue;
        }
        CHECK_OK(pagein_safetensors_write(out, &t, n, &o));
        CHECK(files_equal(out, golden));
        done++;
    }
    closedir(d);
    CHECK_EQ(done, 5);
    return PASS;
}

/* Writes one tensor per safetensors dtype plus rank-0 and zero-size ones,
 * reopens, checks order, layout and bytes. */
TEST(stw_roundtrip_every_dtype) {
    uint64_t seed = pt_seed();
    pagein_write_tensor t[64];
    uint8_t *bufs[64];
    uint64_t shapes[64][2];
    size_t n = 0;
    for (int d = 1; d < PAGEIN_DTYPE_COUNT; d++) {
        const pagein_dtype_info *di = pagein_dtype_get((pagein_dtype)d);
        if (!(di->flags & PAGEIN_DTYPE_F_SAFETENSORS)) continue;
        shapes[n][0] = 3, shapes[n][1] = 4; /* 12 elements: whole bytes for F4 and F6 too */
        uint64_t nb = 0;
        CHECK_OK(pagein_dtype_nbytes((pagein_dtype)d, 12, &nb));
        bufs[n] = malloc(nb);
        for (uint64_t i = 0; i < nb; i++) bufs[n][i] = (uint8_t)pt_rand(&seed);
        char *name = malloc(32);
        snprintf(name, 32, "t.%s", di->name);
        t[n] = (pagein_write_tensor){name, (pagein_dtype)d, 2, shapes[n], bufs[n], NULL, NULL};
        n++;
    }
    size_t ndt = n;
    /* rank 0, zero-size, and a name needing escapes */
    static uint64_t zero_shape[] = {4, 0};
    static int64_t scalar = -7;
    t[n++] = (pagein_write_tensor){"num_batches_tracked", PAGEIN_DTYPE_I64, 0, NULL, &scalar, NULL, NULL};
    t[n++] = (pagein_write_tensor){"empty", PAGEIN_DTYPE_F32, 2, zero_shape, NULL, NULL, NULL};
    static uint8_t one = 42;
    static uint64_t one_shape[] = {1};
    t[n++] = (pagein_write_tensor){"we\"ird\\name\n\x01\xc3\xa9", PAGEIN_DTYPE_U8, 1, one_shape, &one, NULL, NULL};
    const char *path = pt_tmppath("every.safetensors");
    const char *mk[] = {"format", "note"}, *mv[] = {"pt", "tab\there \"quoted\""};
    pagein_write_opts o = PAGEIN_WRITE_OPTS_INIT;
    o.meta_keys = mk, o.meta_values = mv, o.n_meta = 2;
    CHECK_OK(pagein_safetensors_write(path, t, n, &o));
    pagein_file *f = NULL;
    CHECK_OK(pagein_open(&f, path, NULL));
    if (!f) return FAIL;
    pagein_file_info info;
    pagein_file_get_info(f, &info);
    CHECK_EQ(info.data_start % 8, 0);
    CHECK_EQ(pagein_tensor_count(f), n);
    CHECK_EQ(pagein_meta_count(f), 2);
    CHECK_STR(pagein_meta_at(f, 0)->key, "format");
    CHECK_STR(pagein_meta_find(f, "note")->str, "tab\there \"quoted\"");
    for (size_t i = 0; i < n; i++) {
        const pagein_tensor *r = pagein_tensor_get(f, t[i].name);
        CHECK(r != NULL);
        if (!r) continue;
        CHECK_EQ(r->dtype, t[i].dtype);
        CHECK_EQ(r->ndim, t[i].ndim);
        for (uint32_t d = 0; d < r->ndim; d++) CHECK_EQ(r->shape[d], t[i].shape[d]);
        if (r->nbytes) CHECK(memcmp(r->data, t[i].data, r->nbytes) == 0);
        /* the official order puts every tensor at a multiple of its element size */
        CHECK(!(r->flags & PAGEIN_TENSOR_UNALIGNED));
    }
    /* file order: dtype descending, then name */
    for (size_t i = 1; i < n; i++) {
        const pagein_tensor *a = pagein_tensor_at(f, i - 1), *b = pagein_tensor_at(f, i);
        CHECK(a->dtype > b->dtype || (a->dtype == b->dtype && strcmp(a->name, b->name) <= 0));
    }
    CHECK_EQ(pagein_tensor_at(f, 0)->dtype, PAGEIN_DTYPE_U64);
    CHECK_EQ(pagein_tensor_at(f, n - 1)->dtype, PAGEIN_DTYPE_BOOL);
    pagein_close(f);
    for (size_t i = 0; i < ndt; i++) {
        free((void *)t[i].name);
        free(bufs[i]);
    }
    return PASS;
}

/* BF16 and F8 files in the official layout, checked byte for byte against
 * a header written out by hand from the spec. */
TEST(stw_bf16_f8_synthesized) {
    uint16_t bf[4] = {0x3f80, 0x4000, 0xbf80, 0x0000}; /* 1, 2, -1, 0 */
    uint8_t f8[3] = {0x38, 0x40, 0xb8};
    uint8_t f8b[2] = {0x3c, 0x40};
    uint64_t s22[] = {2, 2}, s3[] = {3}, s2[] = {2};
    pagein_write_tensor t[] = {
        {"model.layers.0.mlp.up_proj.weight_scale", PAGEIN_DTYPE_F8_E5M2, 1, s2, f8b, NULL, NULL},
        {"model.layers.0.mlp.up_proj.weight", PAGEIN_DTYPE_F8_E4M3, 1, s3, f8, NULL, NULL},
        {"lm_head.weight", PAGEIN_DTYPE_BF16, 2, s22, bf, NULL, NULL},
    };
    const char *path = pt_tmppath("bf16f8.safetensors");
    CHECK_OK(pagein_safetensors_write(path, t, 3, NULL));
    const char hdr[] = "{\"lm_head.weight\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
                       "\"model.layers.0.mlp.up_proj.weight\":{\"dtype\":\"F8_E4M3\",\"shape\":[3],\"data_offsets\":[8,11]},"
                       "\"model.layers.0.mlp.up_proj.weight_scale\":{\"dtype\":\"F8_E5M2\",\"shape\":[2],\"data_offsets\":[11,13]}}";
    size_t hl = sizeof hdr - 1, padded = (hl + 7) / 8 * 8;
    size_t want_len = 8 + padded + 13;
    uint8_t *want = malloc(want_len);
    for (int i = 0; i < 8; i++) want[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    memcpy(want + 8, hdr, hl);
    memset(want + 8 + hl, ' ', padded - hl);
    memcpy(want + 8 + padded, bf, 8);
    memcpy(want + 8 + padded + 8, f8, 3);
    memcpy(want + 8 + padded + 11, f8b, 2);
    size_t got_len;
    uint8_t *got = pt_read_file(path, &got_len);
    CHECK(got && got_len == want_len && memcmp(got, want, want_len) == 0);
    free(got);
    free(want);
    return PASS;
}

TEST(stw_empty_and_metadata_only) {
    const char *p = pt_tmppath("empty.safetensors");
    CHECK_OK(pagein_safetensors_write(p, NULL, 0, NULL));
    size_t len;
    uint8_t *b = pt_read_file(p, &len);
    CHECK(b && len == 16 && memcmp(b, "\x08\0\0\0\0\0\0\0{}      ", 16) == 0);
    free(b);
    pagein_file *f;
    CHECK_OK(pagein_open(&f, p, NULL));
    CHECK_EQ(pagein_tensor_count(f), 0);
    pagein_close(f);
    const char *k[] = {"a", "b"}, *v[] = {"1", ""};
    pagein_write_opts o = PAGEIN_WRITE_OPTS_INIT;
    o.meta_keys = k, o.meta_values = v, o.n_meta = 2;
    CHECK_OK(pagein_safetensors_write(p, NULL, 0, &o));
    CHECK_OK(pagein_open(&f, p, NULL));
    CHECK_EQ(pagein_tensor_count(f), 0);
    CHECK_EQ(pagein_meta_count(f), 2);
    CHECK_STR(pagein_meta_find(f, "b")->str, "");
    pagein_close(f);
    return PASS;
}

TEST(stw_align_4096) {
    float x[3] = {1, 2, 3};
    uint64_t s[] = {3};
    pagein_write_tensor t = {"x", PAGEIN_DTYPE_F32, 1, s, x, NULL, NULL};
    pagein_write_opts o = PAGEIN_WRITE_OPTS_INIT;
    o.align = 4096;
    const char *p = pt_tmppath("aligned.safetensors");
    CHECK_OK(pagein_safetensors_write(p, &t, 1, &o));
    pagein_file *f;
    CHECK_OK(pagein_open(&f, p, NULL));
    pagein_file_info info;
    pagein_file_get_info(f, &info);
    CHECK_EQ(info.data_start, 4096);
    CHECK_EQ(info.file_size, 4096 + 12);
    CHECK(memcmp(pagein_tensor_get(f, "x")->data, x, 12) == 0);
    pagein_close(f);
    o.align = 12;
    CHECK_EQ(pagein_safetensors_write(p, &t, 1, &o), PAGEIN_E_BAD_ALIGNMENT);
    return PASS;
}

struct fillctx {
    uint64_t calls, bytes;
    uint64_t fail_at; /* fail when off >= fail_at */
};

static int fill_pattern(void *ctx, void *dst, uint64_t off, size_t len) {
    struct fillctx *c = ctx;
    if (off >= c->fail_at) return -EIO;
    c->calls++;
    c->bytes += len;
    uint8_t *d = dst;
    for (size_t i = 0; i < len; i++) d[i] = (uint8_t)((off + i) * 7 + ((off + i) >> 11));
    return 0;
}

TEST(stw_fill_callback) {
    uint64_t s[] = {5 << 20};
    struct fillctx c = {0, 0, UINT64_MAX};
    pagein_write_tensor t = {"big", PAGEIN_DTYPE_F16, 1, s, NULL, fill_pattern, &c};
    const char *p = pt_tmppath("fill.safetensors");
    CHECK_OK(pagein_safetensors_write(p, &t, 1, NULL));
    CHECK_EQ(c.bytes, 10u << 20);
    CHECK(c.calls >= 3); /* chunked, not one 10 MiB buffer */
    pagein_file *f;
    CHECK_OK(pagein_open(&f, p, NULL));
    const pagein_tensor *r = pagein_tensor_get(f, "big");
    CHECK(r && r->nbytes == 10u << 20);
    if (r) {
        const uint8_t *d = r->data;
        int bad = 0;
        for (uint64_t i = 0; i < r->nbytes; i++) bad += d[i] != (uint8_t)(i * 7 + (i >> 11));
        CHECK_EQ(bad, 0);
    }
    pagein_close(f);
    return PASS;
}

TEST(stw_failure_is_atomic) {
    const char *dir = pt_tmppath("atomic");
    mkdir(dir, 0700);
    char p[4096];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    uint8_t one = 1;
    uint64_t s1[] = {1};
    pagein_write_tensor good = {"a", PAGEIN_DTYPE_U8, 1, s1, &one, NULL, NULL};
    CHECK_OK(pagein_safetensors_write(p, &good, 1, NULL));
    size_t before_len;
    uint8_t *before = pt_read_file(p, &before_len);
    /* a fill callback failing half way */
    uint64_t s[] = {6 << 20};
    struct fillctx c = {0, 0, 4 << 20};
    pagein_write_tensor t[] = {good, {"big", PAGEIN_DTYPE_U8, 1, s, NULL, fill_pattern, &c}};
    CHECK_EQ(pagein_safetensors_write(p, t, 2, NULL), -EIO);
    CHECK(strstr(pagein_last_error_detail(), "big") != NULL);
    CHECK_EQ(count_temps(dir), 0);
    size_t after_len;
    uint8_t *after = pt_read_file(p, &after_len);
    CHECK(before && after && before_len == after_len && memcmp(before, after, before_len) == 0);
    free(before);
    free(after);
    /* invalid input: nothing created */
    pagein_write_tensor dup[] = {good, good};
    char q[4096];
    snprintf(q, sizeof q, "%s/other.safetensors", dir);
    CHECK_EQ(pagein_safetensors_write(q, dup, 2, NULL), PAGEIN_E_DUPLICATE);
    pagein_write_tensor bad = {"q", PAGEIN_DTYPE_Q8_0, 1, s1, &one, NULL, NULL};
    CHECK_EQ(pagein_safetensors_write(q, &bad, 1, NULL), PAGEIN_E_BAD_DTYPE);
    uint64_t s3[] = {3};
    pagein_write_tensor f4 = {"q", PAGEIN_DTYPE_F4, 1, s3, &one, NULL, NULL};
    CHECK_EQ(pagein_safetensors_write(q, &f4, 1, NULL), PAGEIN_E_MISALIGNED_SLICE);
    pagein_write_tensor meta = {"__metadata__", PAGEIN_DTYPE_U8, 1, s1, &one, NULL, NULL};
    CHECK_EQ(pagein_safetensors_write(q, &meta, 1, NULL), PAGEIN_E_INVALID);
    struct stat st;
    CHECK(stat(q, &st) != 0);
    CHECK_EQ(count_temps(dir), 0);
    /* missing directory */
    snprintf(q, sizeof q, "%s/no/such/dir/x.safetensors", dir);
    CHECK_EQ(pagein_safetensors_write(q, &good, 1, NULL), -ENOENT);
    return PASS;
}
