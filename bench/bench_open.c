/* bench_open.c - how long does opening a (sharded) model take?
 *
 * Times pagein_model_open(PATH, lazy) + close, once ("first": on a fresh
 * mount that is the cold open) and then --iters more times ("warm", the
 * median), in this process. bench/open_many.sh runs it on slowfs with the
 * shards opened at once and one after another (PAGEIN_OPEN_DEPTH=1).
 * Uses only pagein.h.
 *
 *   build/bench/bench_open PATH [--iters N] [--lookups]
 * prints: first_ms F warm_median_ms W files N
 * With --lookups each timed open also looks every tensor up by name
 * (pagein_model_tensor_get) before the close: the "warm open +
 * every lookup" of a single local file.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pagein.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int lookups;

static int open_once(const char *path, double *ms, size_t *files) {
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_LAZY;
    pagein_model *m = NULL;
    double t0 = now_ms();
    int rc = pagein_model_open(&m, path, &o);
    size_t found = 0, n = rc == 0 && lookups ? pagein_model_tensor_count(m) : 0;
    for (size_t i = 0; i < n; i++) found += pagein_model_tensor_get(m, pagein_model_tensor_at(m, i)->name) != NULL;
    *ms = now_ms() - t0;
    if (rc < 0) {
        fprintf(stderr, "bench_open: %s: %s\n", path, pagein_last_error_detail());
        return rc;
    }
    if (found != n) {
        fprintf(stderr, "bench_open: %s: %zu of %zu tensors found by name\n", path, found, n);
        pagein_model_close(m);
        return -1;
    }
    *files = pagein_model_file_count(m);
    pagein_model_close(m);
    return 0;
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int iters = 9;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--lookups")) lookups = 1;
        else if (argv[i][0] != '-' && !path) path = argv[i];
        else {
            fprintf(stderr, "usage: bench_open PATH [--iters N] [--lookups]\n");
            return 2;
        }
    }
    if (!path || iters < 1 || iters > 10000) {
        fprintf(stderr, "usage: bench_open PATH [--iters N] [--lookups]\n");
        return 2;
    }
    double first, *w = malloc((size_t)iters * sizeof *w);
    size_t files = 0;
    if (!w || open_once(path, &first, &files) < 0) return 1;
    for (int i = 0; i < iters; i++)
        if (open_once(path, &w[i], &files) < 0) return 1;
    qsort(w, (size_t)iters, sizeof *w, cmpd);
    printf("first_ms %.2f warm_median_ms %.2f files %zu\n", first, w[iters / 2], files);
    free(w);
    return 0;
}
