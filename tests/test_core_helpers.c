/* test_core_helpers.c - the core's small helpers (src/internal.h,
 * src/core/endian.h): the growable buffer's printf and the little-endian
 * loads and stores, the path join, hex digits. White-box. */
#include "test.h"

#include "../src/internal.h"
#include "../src/core/endian.h"

/* pi_buf_printf: short and long (past its stack buffer) formats land whole;
 * pi_le16/32/64 read unaligned little-endian bytes. */
TEST(core_buf_printf_and_endian) {
    struct pi_buf b = {0};
    pi_buf_printf(&b, "%s=%d;", "a", 42);
    char big[600];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    pi_buf_printf(&b, "[%s]", big);
    CHECK(!b.oom);
    CHECK_EQ(b.n, 5 + 2 + 599);
    CHECK(b.p && memcmp(b.p, "a=42;[", 6) == 0 && b.p[b.n - 1] == ']');
    pi_buf_free(&b);
    static const uint8_t le[9] = {0xff, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x88};
    CHECK_EQ(pi_le16(le + 1), 0x0201);
    CHECK_EQ(pi_le32(le + 1), 0x04030201);
    CHECK(pi_le64(le + 1) == 0x8807060504030201ull);
    return PASS;
}

/* pi_st_le32/64 store what pi_le32/64 load; pi_path_join puts one slash
 * between a folder (or URL prefix) and a name; pi_hexval; pi_ends_with. */
TEST(core_store_join_hex) {
    uint8_t b[9] = {0};
    pi_st_le32(b + 1, 0x04030201u);
    CHECK(b[1] == 1 && b[4] == 4 && pi_le32(b + 1) == 0x04030201u);
    pi_st_le64(b + 1, 0x8807060504030201ull);
    CHECK(b[1] == 1 && b[8] == 0x88 && pi_le64(b + 1) == 0x8807060504030201ull);
    static const char *const j[][3] = {{"d", "x", "d/x"},       {"d/", "x", "d/x"}, {"d//", "x", "d/x"},
                                       {"/", "x", "/x"},        {"", "x", "x"},     {"s3://b/p/", "k", "s3://b/p/k"},
                                       {"hf://o/n", "a/b", "hf://o/n/a/b"}};
    for (size_t i = 0; i < sizeof j / sizeof j[0]; i++) {
        char *p = pi_path_join(j[i][0], j[i][1]);
        CHECK(p && strcmp(p, j[i][2]) == 0);
        pi_free(p);
    }
    CHECK(pi_hexval('0') == 0 && pi_hexval('9') == 9 && pi_hexval('a') == 10 && pi_hexval('F') == 15);
    CHECK(pi_hexval('g') == -1 && pi_hexval('/') == -1 && pi_hexval(0) == -1);
    CHECK(pi_ends_with("a.jsonl.gz", ".gz") && !pi_ends_with("gz", ".gz") && !pi_ends_with(NULL, ".gz"));
    return PASS;
}

/* pi_last_le: the last first-position <= x, empty runs (equal firsts) skipped to the last. */
TEST(core_last_le) {
    static const uint64_t a[] = {0, 10, 10, 25, 40};
    CHECK_EQ(pi_last_le(a, 5, 0), 0);
    CHECK_EQ(pi_last_le(a, 5, 9), 0);
    CHECK_EQ(pi_last_le(a, 5, 10), 2);
    CHECK_EQ(pi_last_le(a, 5, 24), 2);
    CHECK_EQ(pi_last_le(a, 5, 25), 3);
    CHECK_EQ(pi_last_le(a, 5, 1000), 4);
    CHECK_EQ(pi_last_le(a, 1, 1000), 0);
    CHECK_EQ(pi_last_le(a, 0, 5), 0);
    /* the same over a field of an array of structs */
    struct {
        uint32_t pad;
        uint64_t first;
    } v[5];
    for (int i = 0; i < 5; i++) v[i].pad = 0xffffffffu, v[i].first = a[i];
    CHECK_EQ(pi_last_le_by(&v[0].first, 5, sizeof v[0], 9), 0);
    CHECK_EQ(pi_last_le_by(&v[0].first, 5, sizeof v[0], 24), 2);
    CHECK_EQ(pi_last_le_by(&v[0].first, 5, sizeof v[0], 25), 3);
    CHECK_EQ(pi_last_le_by(&v[0].first, 5, sizeof v[0], 1000), 4);
    CHECK_EQ(pi_last_le_by(&v[0].first, 0, sizeof v[0], 5), 0);
    return PASS;
}

/* pi_opts_in: a caller's sized options over the defaults, an older (shorter) struct copied as far as it goes. */
TEST(core_opts_in) {
    struct opts {
        size_t size;
        int a, b;
    } o = {sizeof o, 1, 2}, in = {sizeof in, 5, 6};
    CHECK_EQ(pi_opts_in(&o, sizeof o, NULL, "t"), 0);
    CHECK(o.size == sizeof o && o.a == 1 && o.b == 2);
    in.size = offsetof(struct opts, b); /* an older caller: no b */
    CHECK_EQ(pi_opts_in(&o, sizeof o, &in, "t"), 0);
    CHECK(o.size == sizeof o && o.a == 5 && o.b == 2);
    in.size = 3;
    CHECK_EQ(pi_opts_in(&o, sizeof o, &in, "t"), PAGEIN_E_INVALID);
    CHECK(strstr(pagein_last_error_detail(), "t: options size 3") != NULL);
    return PASS;
}

/* One rule for a caller's sized options: every entry point that takes them
 * refuses a size below sizeof(size_t) (a zeroed struct), naming itself,
 * where some took size 0 for the whole struct. */
TEST(core_opts_in_everywhere) {
    const char *model = "tests/data/real/safetensors/burn-mnist-f32.safetensors";
    const char *out = pt_tmppath("o.safetensors");
    pagein_file *f = NULL;
    CHECK_OK(pagein_open(&f, model, NULL));
    pagein_convert_opts co;
    memset(&co, 0, sizeof co);
    CHECK_EQ(pagein_convert_safetensors(f, out, &co, NULL), PAGEIN_E_INVALID);
    CHECK(strstr(pagein_last_error_detail(), "pagein_convert_safetensors: options size 0") != NULL);
    CHECK_EQ(pagein_dcp_convert(pt_tmppath("nodir"), out, &co, NULL), PAGEIN_E_INVALID);
    CHECK(strstr(pagein_last_error_detail(), "pagein_dcp_convert: options size 0") != NULL);
    CHECK_EQ(pagein_dcp_hf_convert(pt_tmppath("nodir"), out, &co, NULL), PAGEIN_E_INVALID);
    CHECK(strstr(pagein_last_error_detail(), "pagein_dcp_hf_convert: options size 0") != NULL);
    pagein_write_opts wo;
    memset(&wo, 0, sizeof wo);
    CHECK_EQ(pagein_safetensors_write(out, NULL, 0, &wo), PAGEIN_E_INVALID);
    CHECK(strstr(pagein_last_error_detail(), "pagein_safetensors_write: options size 0") != NULL);
    pagein_model_opts mo;
    memset(&mo, 0, sizeof mo);
    pagein_live *l = NULL;
    CHECK_EQ(pagein_live_open(&l, model, &mo), PAGEIN_E_INVALID);
    CHECK(strstr(pagein_last_error_detail(), "pagein_live_open: options size 0") != NULL);
    pagein_gpu_opts go;
    memset(&go, 0, sizeof go);
    pagein_gpu_load *g = NULL;
    CHECK_EQ(pagein_gpu_load_file(&g, f, &go), PAGEIN_E_INVALID);
    CHECK(strstr(pagein_last_error_detail(), "GPU load: options size 0") != NULL);
    pagein_close(f);
    return PASS;
}
