/* bench_gguf.c - how long pagein_open takes on a GGUF with a large
 * vocabulary and many tensors (warm page cache): parse, validate, build the
 * name/metadata indexes, the string-array element index and the layer
 * order.
 *
 *   bench_gguf [--vocab N] [--tensors N] [--iters N] [--json] [--keep PATH]
 *
 * Defaults: 150,000 vocabulary strings (plus scores and token types, as in
 * a real llama vocabulary), 1,000 small tensors (blk.N.* names), 50 timed
 * opens after one untimed warm-up. Uses only <pagein.h>. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "pagein.h"

#include "bench.h"

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int make_file(const char *path, long vocab, long ntensors) {
    pagein_gguf_writer *w;
    int rc = pagein_gguf_writer_new(&w, NULL);
    if (rc) return rc;
    pagein_gguf_set_str(w, "general.architecture", "llama", 5);
    pagein_gguf_set_u32(w, "llama.block_count", (uint32_t)(ntensors / 9 + 1));
    pagein_gguf_set_str(w, "tokenizer.ggml.model", "llama", 5);
    char **toks = malloc((size_t)vocab * sizeof *toks);
    float *scores = malloc((size_t)vocab * sizeof *scores);
    int32_t *types = malloc((size_t)vocab * sizeof *types);
    for (long i = 0; i < vocab; i++) {
        char buf[32];
        /* lengths 3..12 like real BPE pieces */
        int n = snprintf(buf, sizeof buf, "tok%ld%.*s", i, (int)(i % 5), "abcde");
        toks[i] = strndup(buf, (size_t)n);
        scores[i] = -(float)i;
        types[i] = 1;
    }
    pagein_gguf_set_str_array(w, "tokenizer.ggml.tokens", (const char *const *)toks, NULL, (uint64_t)vocab);
    pagein_gguf_set_array(w, "tokenizer.ggml.scores", PAGEIN_META_F32, scores, (uint64_t)vocab);
    pagein_gguf_set_array(w, "tokenizer.ggml.token_type", PAGEIN_META_I32, types, (uint64_t)vocab);
    static const char *parts[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate",
                                  "ffn_up", "ffn_down", "attn_norm", "ffn_norm"};
    static float data[64];
    uint64_t shape[2] = {4, 16};
    for (long i = 0; i < ntensors && rc == 0; i++) {
        char name[64];
        if (i == 0) snprintf(name, sizeof name, "token_embd.weight");
        else if (i == ntensors - 1) snprintf(name, sizeof name, "output.weight");
        else snprintf(name, sizeof name, "blk.%ld.%s.weight", (i - 1) / 9, parts[(i - 1) % 9]);
        pagein_write_tensor t = {name, PAGEIN_DTYPE_F32, 2, shape, data, NULL, NULL};
        rc = pagein_gguf_add_tensor(w, &t);
    }
    if (rc == 0) rc = pagein_gguf_write(w, path);
    pagein_gguf_writer_free(w);
    for (long i = 0; i < vocab; i++) free(toks[i]);
    free(toks);
    free(scores);
    free(types);
    return rc;
}

int main(int argc, char **argv) {
    long vocab = 150000, ntensors = 1000, iters = 50;
    int json = 0;
    const char *keep = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--vocab") && i + 1 < argc) vocab = atol(argv[++i]);
        else if (!strcmp(argv[i], "--tensors") && i + 1 < argc) ntensors = atol(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atol(argv[++i]);
        else if (!strcmp(argv[i], "--keep") && i + 1 < argc) keep = argv[++i];
        else if (!strcmp(argv[i], "--json")) json = 1;
        else {
            fprintf(stderr, "usage: bench_gguf [--vocab N] [--tensors N] [--iters N] [--json] [--keep PATH]\n");
            return 2;
        }
    }
    if (ntensors < 2) ntensors = 2;
    if (iters < 1) iters = 1;
    char path[256];
    if (keep) snprintf(path, sizeof path, "%s", keep);
    else snprintf(path, sizeof path, "/tmp/bench_gguf_%d.gguf", (int)getpid());
    int rc = make_file(path, vocab, ntensors);
    if (rc) {
        fprintf(stderr, "bench_gguf: writing %s: %s: %s\n", path, pagein_strerror(rc), pagein_last_error_detail());
        return 1;
    }
    pagein_file *f;
    rc = pagein_open(&f, path, NULL); /* warm-up: page cache warm from the write */
    if (rc) {
        fprintf(stderr, "bench_gguf: %s: %s\n", pagein_strerror(rc), pagein_last_error_detail());
        return 1;
    }
    pagein_file_info in;
    pagein_file_get_info(f, &in);
    pagein_close(f);
    double *t = malloc((size_t)iters * sizeof *t);
    const char *s;
    size_t sl;
    for (long i = 0; i < iters; i++) {
        double t0 = bench_now();
        rc = pagein_open(&f, path, NULL);
        /* one lookup each so nothing is skipped */
        const pagein_meta *m;
        if (rc == 0 && pagein_meta_get_array(f, "tokenizer.ggml.tokens", &m) == 0)
            pagein_meta_array_str(f, m, m->count - 1, &s, &sl);
        if (rc == 0) pagein_close(f);
        t[i] = bench_now() - t0;
        if (rc) return 1;
    }
    qsort(t, (size_t)iters, sizeof *t, cmpd);
    struct utsname u;
    uname(&u);
    double med = t[iters / 2] * 1e3, mn = t[0] * 1e3, p90 = t[(size_t)(iters * 9 / 10)] * 1e3;
    if (json) {
        printf("{\"bench\": \"gguf_open\", \"vocab\": %ld, \"tensors\": %ld, \"file_bytes\": %llu, \"iters\": %ld, "
               "\"cache\": \"warm\", \"kernel\": \"%s\", \"min_ms\": %.3f, \"median_ms\": %.3f, \"p90_ms\": %.3f}\n",
               vocab, ntensors, (unsigned long long)in.file_size, iters, u.release, mn, med, p90);
    } else {
        printf("bench_gguf: pagein_open of a GGUF v3 file, page cache warm\n");
        printf("  kernel %s, file %s (%llu bytes), %ld vocabulary strings + scores + types, %ld tensors, %zu keys\n",
               u.release, path, (unsigned long long)in.file_size, vocab, ntensors, in.n_meta);
        printf("  %-10s %10s %10s %10s\n", "iters", "min ms", "median ms", "p90 ms");
        printf("  %-10ld %10.3f %10.3f %10.3f\n", iters, mn, med, p90);
    }
    free(t);
    if (!keep) unlink(path);
    return 0;
}
