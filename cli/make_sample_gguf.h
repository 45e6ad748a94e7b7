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
 * splitmix64's output function, and f32 -> bf16 rounded to nearest even
 * (finite values). */
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

/* Writes a llama-shaped GGUF v3 model to out (atomically). Returns an exit
 * status (EXIT_OK, or EXIT_USAGE after printing the error). */
int make_sample_gguf(const char *out, const struct make_sample_gguf_args *a);

#endif
