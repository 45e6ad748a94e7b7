/* dequant.c - ggml block types (and every plain numeric type) to F32, F16
 * or BF16, with the values ggml's reference dequantization gives.
 *
 * Exactness: each block function does the float operations of ggml's
 * dequantize_row_* in the same order and at float precision (a product of a
 * float and an int converts the int first; sums are left to right), so the
 * results match bit for bit, NaN and infinity included. Contraction of
 * a*b+c into a fused multiply-add would change results, so it is switched
 * off for this file (gcc: the optimize pragma, checked to hold even under
 * -march=haswell -ffp-contract=fast; clang: the fp contract pragma, which
 * clang's own -ffp-contract=fast overrides, so do not build with that). F16 scales convert to float exactly (subnormals, inf
 * and NaN included); F16 and BF16 outputs round the float result to nearest
 * even. The block layouts are those of docs/FORMAT-GGUF.md; every multi-byte
 * field inside a block is little-endian. */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "../internal.h"
#include "../core/endian.h"
#include "dequant.h"

/* ---- scalar conversions ------------------------------------------------------ */

/* A float's bits and back (memcpy: no aliasing, no conversion). */
static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float pi_f16_to_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1F, m = h & 0x3FF, u;
    if (e == 0) {
        if (m == 0) {
            u = s;
        } else { /* subnormal: normalise */
            e = 127 - 15 + 1;
            while (!(m & 0x400)) m <<= 1, e--;
            u = s | e << 23 | (m & 0x3FF) << 13;
        }
    } else if (e == 31) {
        u = s | 0x7F800000u | m << 13;
    } else {
        u = s | (e + 127 - 15) << 23 | m << 13;
    }
    return bits_f32(u);
}

uint16_t pi_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint32_t s = (u >> 16) & 0x8000, e = (u >> 23) & 0xFF, m = u & 0x7FFFFF;
    if (e == 0xFF) return (uint16_t)(s | 0x7C00 | (m ? 0x200 | (m >> 13) : 0));
    int32_t ne = (int32_t)e - 127 + 15;
    if (ne >= 31) return (uint16_t)(s | 0x7C00);
    if (ne <= 0) {
        if (ne < -10) return (uint16_t)s;
        m |= 0x800000;
        uint32_t shift = (uint32_t)(14 - ne), r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(s | r);
    }
    uint32_t r = (uint32_t)ne << 10 | m >> 13, rem = m & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++; /* may carry into the exponent: correct */
    return (uint16_t)(s | r);
}

float pi_bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

uint16_t pi_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFF)) return (uint16_t)(u >> 16 | 0x40); /* quiet NaN */
    u += 0x7FFF + ((u >> 16) & 1); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

/* ---- block decoders: one block in, block_elems floats out --------------------- */

static inline float h16(const uint8_t *p) { return pi_f16_to_f32(pi_le16(p)); }

static const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static void blk_q4_0(const uint8_t *b, float *y) { /* d, qs[16] */
    const float d = h16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        const int x0 = (qs[j] & 0x0F) - 8, x1 = (qs[j] >> 4) - 8;
        y[j] = (float)x0 * d;
        y[j + 16] = (float)x1 * d;
    }
}

static void blk_q4_1(const uint8_t *b, float *y) { /* d, m, qs[16] */
    const float d = h16(b), m = h16(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(qs[j] & 0x0F) * d + m;
        y[j + 16] = (float)(qs[j] >> 4) * d + m;
    }
}


static void blk_q5_0(const uint8_t *b, float *y) { /* d, qh u32, qs[16] */
    const float d = h16(b);
    const uint32_t qh = pi_le32(b + 2);
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        const int x0 = (int)((qs[j] & 0x0F) | ((qh >> j) & 1) << 4) - 16;
        const int x1 = (int)((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - 16;
        y[j] = (float)x0 * d;
        y[j + 16] = (float)x1 * d;
    }
}

static void blk_q5_1(const uint8_t *b, float *y) { /* d, m, qh u32, qs[16] */
    const float d = h16(b), m = h16(b + 2);
    const uint32_t qh = pi_le32(b + 4);
    const uint8_t *qs = b + 8;
    for (int j = 0; j < 16; j++) {
        const int x0 = (int)((qs[j] & 0x0F) | ((qh >> j) & 1) << 4);
        const int x1 = (int)((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
        y[j] = (float)x0 * d + m;
        y[j + 16] = (float)x1 * d + m;
    }
}

static void blk_q8_0(const uint8_t *b, float *y) { /* d, qs[32] int8 */
    const float d = h16(b);
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

static void blk_q2_k(const uint8_t *b, float *y) { /* scales[16], qs[64], d, dmin */
    const uint8_t *sc = b, *q = b + 16;
    const float d = h16(b + 80), mn = h16(b + 82);
    int is = 0;
    for (int n = 0; n < 256; n += 128, q += 32)
        for (int shift = 0; shift < 8; shift += 2)
            for (int half = 0; half < 2; half++) { /* 16 values each: q[0..15], q[16..31] */
                const float dl = d * (float)(sc[is] & 0xF), ml = mn * (float)(sc[is] >> 4);
                is++;
                for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[l + 16 * half] >> shift) & 3) - ml;
            }
}

/* Q3_K's 16 six-bit scales: low 4 bits in bytes 0-7 (two per byte), high 2
 * bits in bytes 8-11 (four per byte); stored offset by 32. */
static int q3k_scale(const uint8_t *sc, int j) {
    int lo = j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4;
    int hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

static void blk_q3_k(const uint8_t *b, float *y) { /* hmask[32], qs[64], scales[12], d */
    const uint8_t *hm = b, *q = b + 32, *sc = b + 96;
    const float d = h16(b + 108);
    int is = 0;
    unsigned m = 1;
    for (int n = 0; n < 256; n += 128, q += 32)
        for (int shift = 0; shift < 8; shift += 2, m <<= 1)
            for (int half = 0; half < 2; half++) {
                const float dl = d * (float)q3k_scale(sc, is++);
                for (int l = 0; l < 16; l++) {
                    int v = (q[l + 16 * half] >> shift) & 3;
                    v -= (hm[l + 16 * half] & m) ? 0 : 4;
                    *y++ = dl * (float)v;
                }
            }
}

/* Q4_K / Q5_K: 8 six-bit scales and 8 six-bit mins packed in 12 bytes. */
static void k4_scale_min(int j, const uint8_t *q, unsigned *d, unsigned *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | (q[j - 4] >> 6) << 4;
        *m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
    }
}

static void blk_q4_k(const uint8_t *b, float *y) { /* d, dmin, scales[12], qs[128] */
    const float d = h16(b), mn = h16(b + 2);
    const uint8_t *sc = b + 4, *q = b + 16;
    for (int is = 0; is < 8; is += 2, q += 32) {
        unsigned s, m;
        k4_scale_min(is, sc, &s, &m);
        const float d1 = d * (float)s, m1 = mn * (float)m;
        k4_scale_min(is + 1, sc, &s, &m);
        const float d2 = d * (float)s, m2 = mn * (float)m;
        for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xF) - m1;
        for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
    }
}

static void blk_q5_k(const uint8_t *b, float *y) { /* d, dmin, scales[12], qh[32], qs[128] */
    const float d = h16(b), mn = h16(b + 2);
    const uint8_t *sc = b + 4, *qh = b + 16, *ql = b + 48;
    unsigned u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
        unsigned s, m;
        k4_scale_min(is, sc, &s, &m);
        const float d1 = d * (float)s, m1 = mn * (float)m;
        k4_scale_min(is + 1, sc, &s, &m);
        const float d2 = d * (float)s, m2 = mn * (float)m;
        for (int l = 0; l < 32; l++) *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++) *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
}

static void blk_q6_k(const uint8_t *b, float *y) { /* ql[128], qh[64], scales[16] int8, d */
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    const float d = h16(b + 208);
    for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8)
        for (int l = 0; l < 32; l++) {
            const int is = l / 16;
            const int q1 = (int)((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
            const int q2 = (int)((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
            const int q3 = (int)((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
            const int q4 = (int)((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
            y[l] = d * (float)sc[is] * (float)q1;
            y[l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
}

static void blk_q8_k(const uint8_t *b, float *y) { /* d f32, qs[256] int8, bsums[16] (unused) */
    float d = bits_f32(pi_le32(b));
    for (int j = 0; j < 256; j++) y[j] = d * (float)(int8_t)b[4 + j];
}

static void blk_iq4_nl(const uint8_t *b, float *y) { /* d, qs[16] indexes into the non-linear table */
    const float d = h16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)iq4nl_values[qs[j] & 0xF];
        y[j + 16] = d * (float)iq4nl_values[qs[j] >> 4];
    }
}

static void blk_iq4_xs(const uint8_t *b, float *y) { /* d, scales_h u16, scales_l[4], qs[128] */
    const float d = h16(b);
    const unsigned sh = (unsigned)(b[2] | b[3] << 8);
    const uint8_t *sl = b + 4, *qs = b + 8;
    for (int ib = 0; ib < 8; ib++, y += 32, qs += 16) {
        const int ls = (int)(((sl[ib / 2] >> 4 * (ib % 2)) & 0xF) | ((sh >> 2 * ib) & 3) << 4);
        const float dl = d * (float)(ls - 32);
        for (int j = 0; j < 16; j++) {
            y[j] = dl * (float)iq4nl_values[qs[j] & 0xF];
            y[j + 16] = dl * (float)iq4nl_values[qs[j] >> 4];
        }
    }
}

typedef void (*blk_fn)(const uint8_t *b, float *y);

static blk_fn block_fn(pagein_dtype d) {
    switch (d) {
    case PAGEIN_DTYPE_Q4_0: return blk_q4_0;
    case PAGEIN_DTYPE_Q4_1: return blk_q4_1;
    case PAGEIN_DTYPE_Q5_0: return blk_q5_0;
    case PAGEIN_DTYPE_Q5_1: return blk_q5_1;
    case PAGEIN_DTYPE_Q8_0: return blk_q8_0;
    case PAGEIN_DTYPE_Q2_K: return blk_q2_k;
    case PAGEIN_DTYPE_Q3_K: return blk_q3_k;
    case PAGEIN_DTYPE_Q4_K: return blk_q4_k;
    case PAGEIN_DTYPE_Q5_K: return blk_q5_k;
    case PAGEIN_DTYPE_Q6_K: return blk_q6_k;
    case PAGEIN_DTYPE_Q8_K: return blk_q8_k;
    case PAGEIN_DTYPE_IQ4_NL: return blk_iq4_nl;
    case PAGEIN_DTYPE_IQ4_XS: return blk_iq4_xs;
    default: return NULL;
    }
}

/* ---- plain element types ---------------------------------------------------- */

static void swap_bytes(uint8_t *p, unsigned n) {
    for (unsigned i = 0; i < n / 2; i++) {
        uint8_t t = p[i];
        p[i] = p[n - 1 - i], p[n - 1 - i] = t;
    }
}

/* One element of a plain type (already in native byte order) as a float. */
static float plain_to_f32(pagein_dtype d, const uint8_t *p) {
    union {
        uint8_t b[8];
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f;
        double x;
    } v;
    memcpy(v.b, p, 8); /* the caller passes an 8-byte buffer */
    switch (d) {
    case PAGEIN_DTYPE_F32: return v.f;
    case PAGEIN_DTYPE_F16: return pi_f16_to_f32(v.u16);
    case PAGEIN_DTYPE_BF16: return pi_bf16_to_f32(v.u16);
    case PAGEIN_DTYPE_F64: return (float)v.x;
    case PAGEIN_DTYPE_BOOL: return v.b[0] ? 1.0f : 0.0f;
    case PAGEIN_DTYPE_U8: return (float)v.b[0];
    case PAGEIN_DTYPE_I8: return (float)(int8_t)v.b[0];
    case PAGEIN_DTYPE_U16: return (float)v.u16;
    case PAGEIN_DTYPE_I16: return (float)v.i16;
    case PAGEIN_DTYPE_U32: return (float)v.u32;
    case PAGEIN_DTYPE_I32: return (float)v.i32;
    case PAGEIN_DTYPE_U64: return (float)v.u64;
    case PAGEIN_DTYPE_I64: return (float)v.i64;
    default: return 0.0f;
    }
}

static bool plain_ok(pagein_dtype d) {
    switch (d) {
    case PAGEIN_DTYPE_F32: case PAGEIN_DTYPE_F16: case PAGEIN_DTYPE_BF16: case PAGEIN_DTYPE_F64:
    case PAGEIN_DTYPE_BOOL: case PAGEIN_DTYPE_U8: case PAGEIN_DTYPE_I8: case PAGEIN_DTYPE_U16:
    case PAGEIN_DTYPE_I16: case PAGEIN_DTYPE_U32: case PAGEIN_DTYPE_I32: case PAGEIN_DTYPE_U64:
    case PAGEIN_DTYPE_I64:
        return true;
    default: return false;
    }
}

bool pi_dequant_supported(pagein_dtype d) { return block_fn(d) != NULL || plain_ok(d); }

static inline void store_out(pagein_dtype out, uint8_t *p, float f) {
    uint16_t h;
    switch (out) {
    case PAGEIN_DTYPE_F16: h = pi_f32_to_f16(f), memcpy(p, &h, 2); break;
    case PAGEIN_DTYPE_BF16: h = pi_f32_to_bf16(f), memcpy(p, &h, 2); break;
    default: memcpy(p, &f, 4); break;
    }
}

int pi_dequant(const char *name, pagein_dtype in, int swapped, const void *src, size_t src_len, pagein_dtype out,
               void *dst, size_t dst_len, uint64_t *nout) {
    const pagein_dtype_info *di = pagein_dtype_get(in);
    if (out != PAGEIN_DTYPE_F32 && out != PAGEIN_DTYPE_F16 && out != PAGEIN_DTYPE_BF16)
        return pi_err(PAGEIN_E_INVALID, "tensor '%s': output type must be F32, F16 or BF16", name);
    if (!di || !pi_dequant_supported(in))
        return pi_err(PAGEIN_E_BAD_DTYPE, "tensor '%s': cannot dequantize type %s (supported: Q4_0, Q4_1, Q5_0, Q5_1, "
                      "Q8_0, Q2_K-Q8_K, IQ4_NL, IQ4_XS and plain numeric types)", name, di ? di->name : "?");
    blk_fn fn = block_fn(in);
    size_t bb = fn ? di->block_bytes : di->bits / 8, be = fn ? di->block_elems : 1;
    size_t oes = out == PAGEIN_DTYPE_F32 ? 4 : 2;
    if (fn && swapped)
        return pi_err(PAGEIN_E_UNSUPPORTED, "tensor '%s': %s data in a big-endian GGUF file: ggml defines no big-endian "
                      "block layout, refused", name, di->name);
    if (src_len % bb)
        return pi_err(PAGEIN_E_MISALIGNED_SLICE, "tensor '%s': %zu bytes of %s is not a whole number of %s of %zu bytes",
                      name, src_len, di->name, fn ? "blocks" : "elements", bb);
    if (src_len && (!src || !dst)) return pi_err(PAGEIN_E_INVALID, "tensor '%s': NULL buffer", name);
    uint64_t n = (uint64_t)(src_len / bb) * be;
    if (n > SIZE_MAX / oes || n * oes > dst_len)
        return pi_err(PAGEIN_E_RANGE, "tensor '%s': %llu elements of output need %llu bytes, the buffer has %zu", name,
                      (unsigned long long)n, (unsigned long long)n * oes, dst_len);
    const uint8_t *s = src;
    uint8_t *o = dst;
    if (fn) {
        float tmp[256];
        for (size_t k = 0; k < src_len / bb; k++, s += bb) {
            fn(s, tmp);
            if (out == PAGEIN_DTYPE_F32) {
                memcpy(o, tmp, be * 4);
                o += be * 4;
            } else {
                for (size_t j = 0; j < be; j++, o += oes) store_out(out, o, tmp[j]);
            }
        }
    } else if (in == out && !swapped) {
        memcpy(o, s, src_len); /* same type: the bytes as they are (NaN payloads kept) */
    } else {
        uint8_t e[8] = {0};
        for (size_t k = 0; k < src_len / bb; k++, s += bb, o += oes) {
            memcpy(e, s, bb);
            if (swapped) swap_bytes(e, (unsigned)bb);
            if (in == out) memcpy(o, e, oes);
            else store_out(out, o, plain_to_f32(in, e));
        }
    }
    if (nout) *nout = n;
    return 0;
}

int pagein_tensor_dequantize(const pagein_tensor *t, const void *src, size_t src_len, pagein_dtype out, void *dst,
                             size_t dst_len) {
    pi_err_clear();
    if (!t) return pi_err(PAGEIN_E_INVALID, "pagein_tensor_dequantize: NULL tensor");
    const char *name = t->name ? t->name : "";
    if (t->flags & PAGEIN_TENSOR_NONCONTIGUOUS)
        return pi_err(PAGEIN_E_UNSUPPORTED, "tensor '%s' is strided: its storage bytes are not in row-major order "
                      "(read it with pagein_tensor_copy)", name);
    if (src_len > t->nbytes)
        return pi_err(PAGEIN_E_RANGE, "tensor '%s': %zu source bytes, but the tensor has %llu", name, src_len,
                      (unsigned long long)t->nbytes);
    return pi_dequant(name, t->dtype, (t->flags & PAGEIN_TENSOR_SWAPPED) != 0, src, src_len, out, dst, dst_len, NULL);
}
