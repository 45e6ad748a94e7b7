/* test_dequant.c - pagein_tensor_dequantize against hand-computed values and,
 * block by block, against the independent numpy implementation
 * tests/dequant_ref.py: random blocks with extreme scales (inf, NaN,
 * subnormal and maximal F16 scales, zero) and extreme quants (all bits
 * clear, all set), in F32, F16 and BF16; and every quantized tensor of the
 * real GGUF files in tests/data/real. */
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const QTYPES[] = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K",
                                     "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ4_NL", "IQ4_XS"};
static const char *const PTYPES[] = {"F32", "F16", "BF16", "F64", "I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64"};

/* Offsets of the F16 scale fields (d, m/dmin) in each block type; -1 ends. */
static void scale_fields(const char *ty, int off[3]) {
    off[0] = off[1] = off[2] = -1;
    if (!strcmp(ty, "Q4_1") || !strcmp(ty, "Q5_1") || !strcmp(ty, "Q4_K") || !strcmp(ty, "Q5_K")) off[0] = 0, off[1] = 2;
    else if (!strcmp(ty, "Q2_K")) off[0] = 80, off[1] = 82;
    else if (!strcmp(ty, "Q3_K")) off[0] = 108;
    else if (!strcmp(ty, "Q6_K")) off[0] = 208;
    else if (!strcmp(ty, "Q8_K")) off[0] = -1;
    else off[0] = 0;
}

static const uint16_t SPECIAL_F16[] = {0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE00, 0x0001, 0x8001, 0x03FF, 0x0400,
                                       0x7BFF, 0xFBFF, 0x0000, 0x8000, 0x3C00, 0xBC00, 0x1400};
static const uint32_t SPECIAL_F32[] = {0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001, 0x007FFFFF,
                                       0x7F7FFFFF, 0x00000000, 0x80000000, 0x3F800000, 0x3A000000};

static int python_numpy(void) {
    static int have = -1;
    if (have < 0) have = access("/usr/bin/python3", X_OK) == 0 && system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") == 0;
    return have;
}

static int same_bits(const void *a, const void *b, size_t es) {
    if (es == 4) {
        float x, y;
        memcpy(&x, a, 4), memcpy(&y, b, 4);
        if (isnan(x) && isnan(y)) return 1; /* NaN payloads depend on operand order in hardware */
    } else {
        uint16_t x, y;
        memcpy(&x, a, 2), memcpy(&y, b, 2);
        int e16 = (x & 0x7C00) == 0x7C00 && (x & 0x3FF) && (y & 0x7C00) == 0x7C00 && (y & 0x3FF);
        int eb = (x & 0x7F80) == 0x7F80 && (x & 0x7F) && (y & 0x7F80) == 0x7F80 && (y & 0x7F);
        if (e16 || eb) return 1;
    }
    return memcmp(a, b, es) == 0;
}

/* dequantizes src (whole, and block by block) into each output type and
 * compares with the reference's OUT.f32/.f16/.bf16 files. */
static int compare_with_ref(const char *ty, const uint8_t *src, size_t len, const char *prefix) {
    pagein_dtype d = pagein_dtype_from_name(ty, strlen(ty));
    const pagein_dtype_info *di = pagein_dtype_get(d);
    size_t bb = di->block_elems > 1 ? di->block_bytes : di->bits / 8, be = di->block_elems;
    size_t nel = len / bb * be;
    pagein_tensor t = {.name = ty, .name_len = strlen(ty), .dtype = d, .nbytes = len, .nelements = nel};
    static const pagein_dtype outs[3] = {PAGEIN_DTYPE_F32, PAGEIN_DTYPE_F16, PAGEIN_DTYPE_BF16};
    static const char *const ext[3] = {"f32", "f16", "bf16"};
    int bad = 0;
    for (int k = 0; k < 3; k++) {
        size_t es = k ? 2 : 4;
        char path[512];
        snprintf(path, sizeof path, "%s.%s", prefix, ext[k]);
        size_t rl = 0;
        uint8_t *ref = pt_read_file(path, &rl);
        uint8_t *got = malloc(nel * es + 1), *chunk = malloc(nel * es + 1);
        CHECK(ref && got && chunk);
        if (!ref || !got || !chunk) {
            free(ref), free(got), free(chunk);
            return 1;
        }
        CHECK_EQ(rl, nel * es);
        CHECK_OK(pagein_tensor_dequantize(&t, src, len, outs[k], got, nel * es));
        /* block by block gives the same */
        for (size_t o = 0; o < len; o += bb)
            CHECK_OK(pagein_tensor_dequantize(&t, src + o, bb, outs[k], chunk + o / bb * be * es, be * es));
        CHECK(memcmp(got, chunk, nel * es) == 0);
        for (size_t i = 0; i < nel && rl == nel * es; i++)
            if (!same_bits(got + i * es, ref + i * es, es)) {
                if (bad++ < 5) {
                    uint32_t g = 0, r = 0;
                    memcpy(&g, got + i * es, es), memcpy(&r, ref + i * es, es);
                    printf("    %s -> %s: element %zu (block %zu): pagein %#x, reference %#x\n", ty, ext[k], i, i / be, g,
                           r);
                }
            }
        free(ref), free(got), free(chunk);
    }
    if (bad) pt_failed = 1;
    return bad;
}

TEST(dequant_known_values) {
    /* Q8_0: d = 0.5, quants -128, -1, 0, 1, 127 */
    uint8_t q8[34] = {0x00, 0x38};
    int8_t qv[5] = {-128, -1, 0, 1, 127};
    memcpy(q8 + 2, qv, 5);
    pagein_tensor t = {.name = "q8", .name_len = 2, .dtype = PAGEIN_DTYPE_Q8_0, .nbytes = 34, .nelements = 32};
    float y[32];
    CHECK_OK(pagein_tensor_dequantize(&t, q8, 34, PAGEIN_DTYPE_F32, y, sizeof y));
    CHECK(y[0] == -64.0f && y[1] == -0.5f && y[2] == 0.0f && y[3] == 0.5f && y[4] == 63.5f && y[31] == 0.0f);
    /* Q4_1: d = 2, m = -1: low nibble 3 -> 5, high nibble 15 -> 29 (element j + 16) */
    uint8_t q41[20] = {0x00, 0x40, 0x00, 0xBC};
    memset(q41 + 4, 0xF3, 16);
    t.dtype = PAGEIN_DTYPE_Q4_1, t.nbytes = 20;
    CHECK_OK(pagein_tensor_dequantize(&t, q41, 20, PAGEIN_DTYPE_F32, y, sizeof y));
    CHECK(y[0] == 5.0f && y[15] == 5.0f && y[16] == 29.0f && y[31] == 29.0f);
    /* IQ4_NL: d = 1, index 0 -> -127, index 15 -> 113 */
    uint8_t iq[18] = {0x00, 0x3C};
    memset(iq + 2, 0xF0, 16);
    t.dtype = PAGEIN_DTYPE_IQ4_NL, t.nbytes = 18;
    CHECK_OK(pagein_tensor_dequantize(&t, iq, 18, PAGEIN_DTYPE_F32, y, sizeof y));
    CHECK(y[0] == -127.0f && y[16] == 113.0f);
    /* F16 out: 63.5 exact; a subnormal F16 scale stays exact through F32 */
    uint16_t h[32];
    t.dtype = PAGEIN_DTYPE_Q8_0, t.nbytes = 34;
    CHECK_OK(pagein_tensor_dequantize(&t, q8, 34, PAGEIN_DTYPE_F16, h, sizeof h));
    CHECK_EQ(h[4], 0x53F0); /* 63.5 */
    q8[0] = 0x01, q8[1] = 0x00; /* d = 2^-24 */
    CHECK_OK(pagein_tensor_dequantize(&t, q8, 34, PAGEIN_DTYPE_F32, y, sizeof y));
    CHECK(y[4] == 127.0f * 0x1p-24f);
    /* BF16 out rounds to nearest even: 1 + 2^-8 (a tie) -> 1.0; F32 in */
    float fin[2] = {1.0f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-9f};
    pagein_tensor tf = {.name = "f", .name_len = 1, .dtype = PAGEIN_DTYPE_F32, .nbytes = 8, .nelements = 2};
    CHECK_OK(pagein_tensor_dequantize(&tf, fin, 8, PAGEIN_DTYPE_BF16, h, 4));
    CHECK_EQ(h[0], 0x3F80);
    CHECK_EQ(h[1], 0x3F81);
    return PASS;
}

TEST(dequant_errors) {
    uint8_t b[292] = {0};
    float y[256];
    pagein_tensor t = {.name = "w", .name_len = 1, .dtype = PAGEIN_DTYPE_Q4_K, .nbytes = 144, .nelements = 256};
    CHECK_EQ(pagein_tensor_dequantize(&t, b, 100, PAGEIN_DTYPE_F32, y, sizeof y), PAGEIN_E_MISALIGNED_SLICE);
    CHECK(strstr(pagein_last_error_detail(), "'w'") != NULL);
    CHECK_EQ(pagein_tensor_dequantize(&t, b, 144, PAGEIN_DTYPE_F32, y, sizeof y - 4), PAGEIN_E_RANGE);
    CHECK_EQ(pagein_tensor_dequantize(&t, b, 288, PAGEIN_DTYPE_F32, y, sizeof y), PAGEIN_E_RANGE);
    CHECK_EQ(pagein_tensor_dequantize(&t, b, 144, PAGEIN_DTYPE_Q8_0, y, sizeof y), PAGEIN_E_INVALID);
    CHECK_EQ(pagein_tensor_dequantize(&t, b, 144, PAGEIN_DTYPE_F64, y, sizeof y), PAGEIN_E_INVALID);
    CHECK_EQ(pagein_tensor_dequantize(NULL, b, 144, PAGEIN_DTYPE_F32, y, sizeof y), PAGEIN_E_INVALID);
    CHECK_EQ(pagein_tensor_dequantize(&t, NULL, 144, PAGEIN_DTYPE_F32, y, sizeof y), PAGEIN_E_INVALID);
    t.dtype = PAGEIN_DTYPE_IQ2_XXS, t.nbytes = 66;
    CHECK_EQ(pagein_tensor_dequantize(&t, b, 66, PAGEIN_DTYPE_F32, y, sizeof y), PAGEIN_E_BAD_DTYPE);
    CHECK(strstr(pagein_last_error_detail(), "IQ2_XXS") != NULL);
    /* quantized data of a big-endian GGUF file: refused, named */
    t.dtype = PAGEIN_DTYPE_Q8_0, t.nbytes = 34, t.flags = PAGEIN_TENSOR_SWAPPED;
    CHECK_EQ(pagein_tensor_dequantize(&t, b, 34, PAGEIN_DTYPE_F32, y, sizeof y), PAGEIN_E_UNSUPPORTED);
    CHECK(strstr(pagein_last_error_detail(), "big-endian") != NULL);
    t.flags = PAGEIN_TENSOR_NONCONTIGUOUS, t.dtype = PAGEIN_DTYPE_F32, t.nbytes = 8;
    CHECK_EQ(pagein_tensor_dequantize(&t, b, 8, PAGEIN_DTYPE_F32, y, sizeof y), PAGEIN_E_UNSUPPORTED);
    /* empty input is fine */
    t.flags = 0;
    CHECK_OK(pagein_tensor_dequantize(&t, b, 0, PAGEIN_DTYPE_F32, y, 0));
    return PASS;
}

TEST(dequant_swapped_plain) {
    /* big-endian F32 2.5 and F16 -1.5: swapped to native, then converted */
    uint8_t be32[4] = {0x40, 0x20, 0x00, 0x00}, be16[2] = {0xBE, 0x00};
    pagein_tensor t = {.name = "s", .name_len = 1, .dtype = PAGEIN_DTYPE_F32, .nbytes = 4, .nelements = 1,
                       .flags = PAGEIN_TENSOR_SWAPPED};
    float y;
    uint16_t h;
    CHECK_OK(pagein_tensor_dequantize(&t, be32, 4, PAGEIN_DTYPE_F32, &y, 4));
    CHECK(y == 2.5f);
    CHECK_OK(pagein_tensor_dequantize(&t, be32, 4, PAGEIN_DTYPE_F16, &h, 2));
    CHECK_EQ(h, 0x4100);
    t.dtype = PAGEIN_DTYPE_F16, t.nbytes = 2;
    CHECK_OK(pagein_tensor_dequantize(&t, be16, 2, PAGEIN_DTYPE_F32, &y, 4));
    CHECK(y == -1.5f);
    CHECK_OK(pagein_tensor_dequantize(&t, be16, 2, PAGEIN_DTYPE_F16, &h, 2));
    CHECK_EQ(h, 0xBE00);
    return PASS;
}

/* Random blocks of every supported type, with extreme scales and quants,
 * against the reference. */
TEST(dequant_blocks_vs_reference) {
    if (!python_numpy()) SKIP_BECAUSE("/usr/bin/python3 with numpy is missing (Debian: python3-numpy)");
    uint64_t st = pt_seed();
    /* every type's blocks first, then one reference run over all of them
     * (a numpy start per type took most of the test's time) */
    enum { NT = sizeof QTYPES / sizeof *QTYPES + sizeof PTYPES / sizeof *PTYPES };
    uint8_t *bufs[NT] = {0};
    size_t lens[NT] = {0};
    char cmd[16384];
    size_t cl = (size_t)snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/dequant_ref.py blocks");
    for (size_t k = 0; k < NT; k++) {
        int quant = k < sizeof QTYPES / sizeof *QTYPES;
        const char *ty = quant ? QTYPES[k] : PTYPES[k - sizeof QTYPES / sizeof *QTYPES];
        const pagein_dtype_info *di = pagein_dtype_get(pagein_dtype_from_name(ty, strlen(ty)));
        size_t bb = quant ? di->block_bytes : di->bits / 8;
        size_t nblk = quant ? 96 : 512;
        uint8_t *buf = malloc(nblk * bb);
        CHECK(buf != NULL);
        if (!buf) return FAIL;
        for (size_t i = 0; i < nblk * bb; i += 8) {
            uint64_t r = pt_rand(&st);
            memcpy(buf + i, &r, nblk * bb - i < 8 ? nblk * bb - i : 8);
        }
        int off[3];
        scale_fields(ty, off);
        for (size_t bl = 0; bl < nblk && quant; bl++) {
            uint8_t *b = buf + bl * bb;
            if (bl % 3 == 1) memset(b, 0x00, bb); /* every quant at its minimum */
            if (bl % 3 == 2) memset(b, 0xFF, bb); /* every quant at its maximum */
            size_t ns = sizeof SPECIAL_F16 / sizeof *SPECIAL_F16;
            for (int f = 0; f < 3 && off[f] >= 0; f++) {
                uint16_t h = (uint16_t)(bl < 2 * ns ? SPECIAL_F16[(bl + (size_t)f * 5) % ns] : pt_rand(&st));
                if (bl >= 2 * ns && bl % 4 == 0) h = (uint16_t)((h & 0x83FF) | 0x3800); /* an ordinary scale */
                b[off[f]] = (uint8_t)h, b[off[f] + 1] = (uint8_t)(h >> 8);
            }
            if (!strcmp(ty, "Q8_K")) {
                size_t nf = sizeof SPECIAL_F32 / sizeof *SPECIAL_F32;
                uint32_t v = bl < 2 * nf ? SPECIAL_F32[bl % nf] : (uint32_t)pt_rand(&st);
                if (bl >= 2 * nf && bl % 4 == 0) v = (v & 0x807FFFFF) | 0x3C000000;
                memcpy(b, &v, 4);
            }
        }
        if (!quant && (!strcmp(ty, "F16") || !strcmp(ty, "BF16") || !strcmp(ty, "F32")))
            for (size_t i = 0; i < 16 && i * bb < nblk * bb; i++) { /* special values first */
                if (bb == 4) memcpy(buf + i * 4, &SPECIAL_F32[i % 10], 4);
                else memcpy(buf + i * 2, &SPECIAL_F16[i], 2);
            }
        char in[64], out[64];
        snprintf(in, sizeof in, "dq_in_%zu.bin", k);
        snprintf(out, sizeof out, "dq_out_%zu", k);
        CHECK(pt_write_file(pt_tmppath(in), buf, nblk * bb) == 0);
        if (cl < sizeof cmd)
            cl += (size_t)snprintf(cmd + cl, sizeof cmd - cl, " %s '%s' '%s'", ty, pt_tmppath(in), pt_tmppath(out));
        bufs[k] = buf, lens[k] = nblk * bb;
    }
    CHECK(cl < sizeof cmd);
    int rc = cl < sizeof cmd ? system(cmd) : -1;
    CHECK_EQ(rc, 0);
    for (size_t k = 0; k < NT; k++) {
        const char *ty = k < sizeof QTYPES / sizeof *QTYPES ? QTYPES[k] : PTYPES[k - sizeof QTYPES / sizeof *QTYPES];
        char out[64];
        snprintf(out, sizeof out, "dq_out_%zu", k);
        if (rc == 0 && compare_with_ref(ty, bufs[k], lens[k], pt_tmppath(out)))
            printf("    %s disagrees with tests/dequant_ref.py\n", ty);
        free(bufs[k]);
    }
    return PASS;
}

/* Every tensor of the real GGUF files whose type pagein can dequantize,
 * against the reference reading the same file on its own. */
TEST(dequant_real_files_vs_reference) {
    if (!pt_have_testdata()) SKIP_BECAUSE("tests/data/real is missing");
    if (!python_numpy()) SKIP_BECAUSE("/usr/bin/python3 with numpy is missing (Debian: python3-numpy)");
    static const char *const files[] = {"gguf/tinyllamas-stories-260k-q8_0.gguf", "gguf/llama-2-tiny-random.gguf",
                                        "gguf/zackshen-test-le-v3-align64.gguf"};
    size_t quantized = 0;
    for (size_t fi = 0; fi < sizeof files / sizeof *files; fi++) {
        const char *path = pt_testdata(files[fi]);
        char dir[256], cmd[1024], list[300];
        snprintf(dir, sizeof dir, "%s/dq%zu", pt_tmpdir(), fi);
        mkdir(dir, 0700);
        snprintf(list, sizeof list, "%s/list.txt", dir);
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/dequant_ref.py gguf '%s' '%s' > '%s'", path, dir, list);
        CHECK_EQ(system(cmd), 0);
        pagein_file *f = NULL;
        CHECK_OK(pagein_open(&f, path, NULL));
        if (!f) continue;
        FILE *l = fopen(list, "r");
        CHECK(l != NULL);
        char line[512];
        size_t seen = 0;
        while (l && fgets(line, sizeof line, l)) {
            int idx;
            char name[256], ty[32];
            if (sscanf(line, "%d\t%255s\t%31s", &idx, name, ty) != 3) continue;
            const pagein_tensor *t = pagein_tensor_get(f, name);
            CHECK(t != NULL);
            if (!t) continue;
            seen++;
            if (pagein_dtype_get(t->dtype)->flags & PAGEIN_DTYPE_F_QUANT) quantized++;
            size_t rl = 0;
            char rp[300];
            snprintf(rp, sizeof rp, "%s/%d.f32", dir, idx);
            float *ref = pt_read_file(rp, &rl);
            float *got = malloc(t->nelements * 4 + 1);
            CHECK(ref && got);
            CHECK_EQ(rl, t->nelements * 4);
            if (ref && got && rl == t->nelements * 4) {
                CHECK_OK(pagein_tensor_dequantize(t, t->data, t->nbytes, PAGEIN_DTYPE_F32, got, t->nelements * 4));
                size_t bad = 0;
                for (uint64_t i = 0; i < t->nelements; i++) bad += !same_bits(&got[i], &ref[i], 4);
                if (bad) printf("    %s %s: %zu of %llu values differ\n", files[fi], name, bad, (unsigned long long)t->nelements);
                CHECK_EQ(bad, 0);
            }
            free(ref), free(got);
        }
        if (l) fclose(l);
        CHECK(seen > 0);
        pagein_close(f);
    }
    CHECK(quantized > 0); /* tinyllamas is Q8_0 */
    return PASS;
}
