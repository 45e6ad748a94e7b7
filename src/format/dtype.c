/* dtype.c - the one dtype table shared by every format. */
#include "../internal.h"

#define FL PAGEIN_DTYPE_F_FLOAT
#define SG PAGEIN_DTYPE_F_SIGNED
#define QT PAGEIN_DTYPE_F_QUANT
#define ST PAGEIN_DTYPE_F_SAFETENSORS

/* Block sizes of the ggml types: ../shared/specs/GGUF.md section 2. The
 * last column of safetensors types is st_order: their position in the
 * safetensors crate's Dtype enum, the key its writer sorts by. */
static const pagein_dtype_info table[PAGEIN_DTYPE_COUNT] = {
    [PAGEIN_DTYPE_INVALID] = {"INVALID", 0, 0, 0, -1, 0, 0},
    [PAGEIN_DTYPE_BOOL] = {"BOOL", 8, 1, 1, -1, ST, 1},
    [PAGEIN_DTYPE_F4] = {"F4", 4, 2, 1, -1, FL | ST, 2},
    [PAGEIN_DTYPE_F6_E2M3] = {"F6_E2M3", 6, 4, 3, -1, FL | ST, 3},
    [PAGEIN_DTYPE_F6_E3M2] = {"F6_E3M2", 6, 4, 3, -1, FL | ST, 4},
    [PAGEIN_DTYPE_U8] = {"U8", 8, 1, 1, -1, ST, 5},
    [PAGEIN_DTYPE_I8] = {"I8", 8, 1, 1, 24, SG | ST, 6},
    [PAGEIN_DTYPE_F8_E5M2] = {"F8_E5M2", 8, 1, 1, -1, FL | ST, 7},
    [PAGEIN_DTYPE_F8_E4M3] = {"F8_E4M3", 8, 1, 1, -1, FL | ST, 8},
    [PAGEIN_DTYPE_F8_E8M0] = {"F8_E8M0", 8, 1, 1, -1, FL | ST, 9},
    [PAGEIN_DTYPE_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8, 1, 1, -1, FL | ST, 10},
    [PAGEIN_DTYPE_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8, 1, 1, -1, FL | ST, 11},
    [PAGEIN_DTYPE_I16] = {"I16", 16, 1, 2, 25, SG | ST, 12},
    [PAGEIN_DTYPE_U16] = {"U16", 16, 1, 2, -1, ST, 13},
    [PAGEIN_DTYPE_F16] = {"F16", 16, 1, 2, 1, FL | ST, 14},
    [PAGEIN_DTYPE_BF16] = {"BF16", 16, 1, 2, 30, FL | ST, 15},
    [PAGEIN_DTYPE_I32] = {"I32", 32, 1, 4, 26, SG | ST, 16},
    [PAGEIN_DTYPE_U32] = {"U32", 32, 1, 4, -1, ST, 17},
    [PAGEIN_DTYPE_F32] = {"F32", 32, 1, 4, 0, FL | ST, 18},
    [PAGEIN_DTYPE_C64] = {"C64", 64, 1, 8, -1, FL | ST, 19},
    [PAGEIN_DTYPE_F64] = {"F64", 64, 1, 8, 28, FL | ST, 20},
    [PAGEIN_DTYPE_I64] = {"I64", 64, 1, 8, 27, SG | ST, 21},
    [PAGEIN_DTYPE_U64] = {"U64", 64, 1, 8, -1, ST, 22},
    [PAGEIN_DTYPE_Q4_0] = {"Q4_0", 0, 32, 18, 2, QT, 0},
    [PAGEIN_DTYPE_Q4_1] = {"Q4_1", 0, 32, 20, 3, QT, 0},
    [PAGEIN_DTYPE_Q5_0] = {"Q5_0", 0, 32, 22, 6, QT, 0},
    [PAGEIN_DTYPE_Q5_1] = {"Q5_1", 0, 32, 24, 7, QT, 0},
    [PAGEIN_DTYPE_Q8_0] = {"Q8_0", 0, 32, 34, 8, QT, 0},
    [PAGEIN_DTYPE_Q8_1] = {"Q8_1", 0, 32, 36, 9, QT, 0},
    [PAGEIN_DTYPE_Q2_K] = {"Q2_K", 0, 256, 84, 10, QT, 0},
    [PAGEIN_DTYPE_Q3_K] = {"Q3_K", 0, 256, 110, 11, QT, 0},
    [PAGEIN_DTYPE_Q4_K] = {"Q4_K", 0, 256, 144, 12, QT, 0},
    [PAGEIN_DTYPE_Q5_K] = {"Q5_K", 0, 256, 176, 13, QT, 0},
    [PAGEIN_DTYPE_Q6_K] = {"Q6_K", 0, 256, 210, 14, QT, 0},
    [PAGEIN_DTYPE_Q8_K] = {"Q8_K", 0, 256, 292, 15, QT, 0},
    [PAGEIN_DTYPE_IQ2_XXS] = {"IQ2_XXS", 0, 256, 66, 16, QT, 0},
    [PAGEIN_DTYPE_IQ2_XS] = {"IQ2_XS", 0, 256, 74, 17, QT, 0},
    [PAGEIN_DTYPE_IQ3_XXS] = {"IQ3_XXS", 0, 256, 98, 18, QT, 0},
    [PAGEIN_DTYPE_IQ1_S] = {"IQ1_S", 0, 256, 50, 19, QT, 0},
    [PAGEIN_DTYPE_IQ4_NL] = {"IQ4_NL", 0, 32, 18, 20, QT, 0},
    [PAGEIN_DTYPE_IQ3_S] = {"IQ3_S", 0, 256, 110, 21, QT, 0},
    [PAGEIN_DTYPE_IQ2_S] = {"IQ2_S", 0, 256, 82, 22, QT, 0},
    [PAGEIN_DTYPE_IQ4_XS] = {"IQ4_XS", 0, 256, 136, 23, QT, 0},
    [PAGEIN_DTYPE_IQ1_M] = {"IQ1_M", 0, 256, 56, 29, QT, 0},
    [PAGEIN_DTYPE_TQ1_0] = {"TQ1_0", 0, 256, 54, 34, QT, 0},
    [PAGEIN_DTYPE_TQ2_0] = {"TQ2_0", 0, 256, 66, 35, QT, 0},
    [PAGEIN_DTYPE_MXFP4] = {"MXFP4", 0, 32, 17, 39, QT, 0},
    [PAGEIN_DTYPE_NVFP4] = {"NVFP4", 0, 64, 36, 40, QT, 0},
    [PAGEIN_DTYPE_Q1_0] = {"Q1_0", 0, 128, 18, 41, QT, 0},
    [PAGEIN_DTYPE_Q2_0] = {"Q2_0", 0, 64, 18, 42, QT, 0},
};

const pagein_dtype_info *pagein_dtype_get(pagein_dtype d) {
    if ((int)d <= PAGEIN_DTYPE_INVALID || d >= PAGEIN_DTYPE_COUNT) return NULL;
    return &table[d];
}

pagein_dtype pagein_dtype_from_name(const char *name, size_t len) {
    if (!name) return PAGEIN_DTYPE_INVALID;
    for (int d = 1; d < PAGEIN_DTYPE_COUNT; d++) {
        const char *n = table[d].name;
        if (strlen(n) == len && memcmp(n, name, len) == 0) return (pagein_dtype)d;
    }
    return PAGEIN_DTYPE_INVALID;
}

pagein_dtype pagein_dtype_from_gguf(uint32_t id) {
    for (int d = 1; d < PAGEIN_DTYPE_COUNT; d++)
        if (table[d].gguf_id >= 0 && (uint32_t)table[d].gguf_id == id) return (pagein_dtype)d;
    return PAGEIN_DTYPE_INVALID;
}

int pagein_dtype_nbytes(pagein_dtype d, uint64_t nelements, uint64_t *nbytes) {
    const pagein_dtype_info *di = pagein_dtype_get(d);
    if (!di) return pi_err(PAGEIN_E_BAD_DTYPE, "invalid dtype %d", (int)d);
    if (di->bits) {
        uint64_t nbits;
        if (pi_mul_overflow(nelements, di->bits, &nbits))
            return pi_err(PAGEIN_E_OVERFLOW, "%llu elements of %s overflow",
                          (unsigned long long)nelements, di->name);
        if (nbits % 8)
            return pi_err(PAGEIN_E_MISALIGNED_SLICE, "%llu elements of %s are %llu bits, not whole bytes",
                          (unsigned long long)nelements, di->name, (unsigned long long)nbits);
        *nbytes = nbits / 8;
        return 0;
    }
    if (nelements % di->block_elems)
        return pi_err(PAGEIN_E_MISALIGNED_SLICE, "%llu elements is not a multiple of %s's block of %u",
                      (unsigned long long)nelements, di->name, di->block_elems);
    uint64_t n;
    if (pi_mul_overflow(nelements / di->block_elems, di->block_bytes, &n))
        return pi_err(PAGEIN_E_OVERFLOW, "%llu elements of %s overflow", (unsigned long long)nelements,
                      di->name);
    *nbytes = n;
    return 0;
}
