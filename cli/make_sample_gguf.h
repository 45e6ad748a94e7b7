/* make_sample_gguf.h - the GGUF branch of `pagein make-sample`
 * (cli/make_sample_gguf.c), called by cli/cmd_make_sample.c for
 * `--format gguf`. */
#ifndef PAGEIN_CLI_MAKE_SAMPLE_GGUF_H
#define PAGEIN_CLI_MAKE_SAMPLE_GGUF_H

#include "cli.h"

struct make_sample_gguf_args {
    uint64_t layers, hidden, vocab; /* 0 = choose from size */
    uint64_t size;                  /* target file size in bytes */
    uint64_t seed;
    pagein_dtype dtype;             /* F32, F16, BF16 or Q8_0 (norms stay F32) */
    int quiet;
};

/* Writes a llama-shaped GGUF v3 model to out (atomically). Returns an exit
 * status (EXIT_OK, or EXIT_USAGE after printing the error). */
int make_sample_gguf(const char *out, const struct make_sample_gguf_args *a);

#endif
