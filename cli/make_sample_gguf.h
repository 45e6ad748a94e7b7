/* make_sample_gguf.h - the GGUF branch of `pagein make-sample`
 * (cli/make_sample_gguf.c), called by cli/cmd_make_sample.c for
 * `--format gguf`. */
#ifndef PAGEIN_CLI_MAKE_SAMPLE_GGUF_H
#define PAGEIN_CLI_MAKE_SAMPLE_GGUF_H

#include "cli.h"

#include <string.h>

struct make_sample_gguf_args {
    uint64_t layers, hidden, vocab; /* 0 = choose from size */
    uint64_t size;                  /* target file size in bytes */
    uint64_t seed;
    pagein_dtype dtype;             /* F32, F16, BF16 or Q8_0 (norms stay F32) */
    int quiet;
};

/* Deterministic contents, shared by both writers of make-sample:
 * splitmix64's output function, f32 -> bf16 rounded to nearest even
 * (finite values), and f32 -> f16 (make_sample_f16, below). */
static inline uint64_t make_sample_mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint16_t make_sample_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* f32 -> f16 rounded to nearest even. subnormals: 1 rounds a value below
 * f16's normal range to a subnormal, 0 flushes it to (signed) zero (the
 * GGUF writer's rule: its files must stay as they were). */
static inline uint16_t make_sample_f16(float f, int subnormals) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t mant = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10 || !subnormals) return (uint16_t)sign;
        mant |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;
    return (uint16_t)half;
}

/* Writes a llama-shaped GGUF v3 model to out (atomically). Returns an exit
 * status (EXIT_OK, or EXIT_USAGE after printing the error). */
int make_sample_gguf(const char *out, const struct make_sample_gguf_args *a);

#endif
