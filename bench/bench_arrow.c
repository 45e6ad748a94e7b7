/* bench_arrow.c - the Arrow IPC reader (src/data/arrow.c) measured on an
 * Arrow stream or file (bench/arrow_shuffle.sh writes one with npm
 * apache-arrow). White-box: includes the private header.
 *
 *   bench_arrow decode FILE [--iters N] [--json]
 *       the file read into memory once; then N times: every batch decoded
 *       (all columns, every buffer and offset checked) and every cell read
 *       (strings' bytes, lists' values summed), against a memcpy of the same
 *       batch bytes. Prints GB/s of both and the ratio.
 *   bench_arrow mmap-random FILE [--rows N] [--seed S] [--json]
 *       what `datasets` does after .shuffle(): the file mapped, N rows in a
 *       seeded random order, each read through the mapping (a batch's
 *       columns decoded from the mapping the first time a row of it is
 *       asked for, then only the row's offsets and bytes touched). The page
 *       cache of FILE is dropped first (posix_fadvise DONTNEED). Prints
 *       rows/s.
 *   bench_arrow pipe FILE [--order none|block|global] [--read-batch N]
 *                     [--window N] [--json]
 *       one epoch through the dataset-format table's pipeline (the public
 *       pagein_pipe API, what `read-samples --dataset` runs), every field's
 *       bytes touched; the page cache of FILE dropped first. Prints rows/s
 *       and the bytes the pipeline fetched.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../src/data/arrow.h"

#include "bench.h"

static volatile uint64_t sink;

static uint64_t touch(const struct pi_arrow_col *c, uint64_t row) {
    struct pi_arrow_val v;
    if (pi_arrow_get(c, row, &v) || v.null) return 0;
    uint64_t s = 0;
    switch (c->f->kind) {
    case PI_ARROW_UTF8:
    case PI_ARROW_BINARY:
    case PI_ARROW_LARGE_UTF8:
    case PI_ARROW_LARGE_BINARY:
        for (uint64_t i = 0; i < v.n; i += 8) s += v.p[i];
        return s + v.n;
    case PI_ARROW_LIST:
    case PI_ARROW_LARGE_LIST:
    case PI_ARROW_FIXED_LIST:
        if (v.p) {
            unsigned w = v.child->f->bits / 8;
            for (uint64_t i = 0; i < v.n; i++) s += v.p[i * w];
            return s;
        }
        for (uint64_t i = 0; i < v.n; i++) s += touch(v.child, v.first + i);
        return s;
    default: return v.u;
    }
}

static int usage(void) {
    fprintf(stderr, "usage: bench_arrow decode FILE [--iters N] [--json]\n"
                    "       bench_arrow mmap-random FILE [--rows N] [--seed S] [--json]\n"
                    "       bench_arrow pipe FILE [--order none|block|global] [--read-batch N] [--window N] [--json]\n");
    return 2;
}

static int pipe_mode(const char *path, int order, unsigned read_batch, unsigned window, int json) {
    int fd = open(path, O_RDONLY);
    if (fd >= 0) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), close(fd);
    double t0 = bench_now();
    pagein_dataset *d = NULL;
    pagein_pipe *p = NULL;
    pagein_pipe_opts po = PAGEIN_PIPE_OPTS_INIT;
    po.order = (pagein_order)order;
    po.seed = 1;
    po.read_batch = read_batch;
    po.window = window;
    int rc = pagein_dataset_open(&d, path, NULL);
    if (rc == 0) rc = pagein_pipe_open(&p, d, &po);
    uint64_t n = 0, bytes = 0;
    pagein_item it;
    while (rc == 0 && (rc = pagein_pipe_next(p, &it)) == 1) {
        rc = 0;
        n++;
        for (size_t k = 0; k < it.nfields; k++) {
            const uint8_t *q = it.fields[k].data;
            for (uint64_t i = 0; q && i < it.fields[k].nbytes; i += 64) sink += q[i];
            bytes += it.fields[k].nbytes;
        }
    }
    double t1 = bench_now();
    if (rc < 0) {
        fprintf(stderr, "%s\n", pagein_last_error_detail());
        return 1;
    }
    pagein_pipe_stats st = {0};
    pagein_pipe_get_stats(p, &st);
    if (json)
        printf("{\"mode\": \"pipe\", \"order\": \"%s\", \"read_batch\": %u, \"rows\": %llu, \"seconds\": %.6f, "
               "\"rows_per_second\": %.1f, \"field_bytes\": %llu, \"bytes_read\": %llu, \"requests\": %llu}\n",
               pagein_order_name((pagein_order)order), read_batch, (unsigned long long)n, t1 - t0, (double)n / (t1 - t0),
               (unsigned long long)bytes, (unsigned long long)st.bytes_read, (unsigned long long)st.requests);
    else
        printf("%s: order %s (read batch %u): %llu rows in %.3f s, %.0f rows/s, %llu bytes fetched for %llu field bytes\n",
               path, pagein_order_name((pagein_order)order), read_batch, (unsigned long long)n, t1 - t0,
               (double)n / (t1 - t0), (unsigned long long)st.bytes_read, (unsigned long long)bytes);
    pagein_pipe_close(p);
    pagein_dataset_close(d);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) return usage();
    const char *mode = argv[1], *path = argv[2];
    long iters = 5, rows = 10000;
    int order = PAGEIN_ORDER_GLOBAL;
    unsigned read_batch = 0, window = 0;
    uint64_t seed = 1;
    int json = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atol(argv[++i]);
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = atol(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--order") && i + 1 < argc) order = pagein_order_from_name(argv[++i]);
        else if (!strcmp(argv[i], "--read-batch") && i + 1 < argc) read_batch = (unsigned)atol(argv[++i]);
        else if (!strcmp(argv[i], "--window") && i + 1 < argc) window = (unsigned)atol(argv[++i]);
        else return usage();
    }
    if (!strcmp(mode, "pipe")) return order < 0 ? usage() : pipe_mode(path, order, read_batch, window, json);
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        perror(path);
        return 2;
    }
    size_t n = (size_t)st.st_size;
    struct pi_arrow a;
    if (!strcmp(mode, "decode")) {
        uint8_t *buf = malloc(n ? n : 1), *dst = malloc(n ? n : 1);
        if (!buf || !dst || pread(fd, buf, n, 0) != (ssize_t)n) {
            fprintf(stderr, "%s: read failed\n", path);
            return 2;
        }
        memset(dst, 0, n);
        if (pi_arrow_open_mem(&a, path, buf, n)) {
            fprintf(stderr, "%s\n", pagein_last_error_detail());
            return 1;
        }
        uint64_t bytes = 0, cells = 0;
        for (size_t b = 0; b < a.nbatches; b++) bytes += a.batches[b].meta_len + a.batches[b].body_len;
        double best_dec = 1e30, best_cpy = 1e30;
        for (long it = 0; it < iters; it++) {
            double t0 = bench_now();
            for (size_t b = 0; b < a.nbatches; b++) {
                const struct pi_arrow_batch_ref *r = &a.batches[b];
                memcpy(dst + r->offset, buf + r->offset, r->meta_len + r->body_len);
            }
            sink += dst[n / 2];
            double t1 = bench_now();
            cells = 0;
            for (size_t b = 0; b < a.nbatches; b++) {
                const struct pi_arrow_batch_ref *r = &a.batches[b];
                struct pi_arrow_batch bt;
                if (pi_arrow_decode(&a, b, buf + r->offset, r->meta_len + r->body_len, NULL, 0, &bt)) {
                    fprintf(stderr, "%s\n", pagein_last_error_detail());
                    return 1;
                }
                for (uint32_t c = 0; c < bt.ncols; c++)
                    for (uint64_t row = 0; row < bt.rows; row++) sink += touch(&bt.cols[c], row), cells++;
                pi_arrow_batch_free(&bt);
            }
            double t2 = bench_now();
            if (t1 - t0 < best_cpy) best_cpy = t1 - t0;
            if (t2 - t1 < best_dec) best_dec = t2 - t1;
        }
        double gd = (double)bytes / best_dec / 1e9, gc = (double)bytes / best_cpy / 1e9;
        if (json)
            printf("{\"mode\": \"decode\", \"file\": \"%s\", \"bytes\": %llu, \"batches\": %zu, \"rows\": %llu, \"cells\": %llu, "
                   "\"iters\": %ld, \"decode_seconds\": %.6f, \"memcpy_seconds\": %.6f, \"decode_gbps\": %.3f, "
                   "\"memcpy_gbps\": %.3f, \"ratio\": %.3f}\n",
                   path, (unsigned long long)bytes, a.nbatches, (unsigned long long)a.nrows, (unsigned long long)cells,
                   iters, best_dec, best_cpy, gd, gc, best_cpy / best_dec);
        else
            printf("%s: %llu bytes, %zu batches, %llu rows, %llu cells (best of %ld)\n"
                   "  decode + read every cell  %8.3f s  %7.2f GB/s\n"
                   "  memcpy of the same bytes  %8.3f s  %7.2f GB/s\n"
                   "  decode / memcpy speed     %8.3f\n",
                   path, (unsigned long long)bytes, a.nbatches, (unsigned long long)a.nrows, (unsigned long long)cells,
                   iters, best_dec, gd, best_cpy, gc, best_cpy / best_dec);
        pi_arrow_close(&a);
        free(buf);
        free(dst);
        return 0;
    }
    if (strcmp(mode, "mmap-random") != 0) return usage();
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    double t0 = bench_now();
    const uint8_t *m = mmap(NULL, n ? n : 1, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    /* the index from the mapping: the schema and every batch's metadata */
    if (pi_arrow_open_mem(&a, path, m, n)) {
        fprintf(stderr, "%s\n", pagein_last_error_detail());
        return 1;
    }
    double t1 = bench_now();
    struct pi_arrow_batch *bt = calloc(a.nbatches ? a.nbatches : 1, sizeof *bt);
    uint8_t *have = calloc(a.nbatches ? a.nbatches : 1, 1);
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (long i = 0; i < rows && a.nrows; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t id = (uint64_t)(((unsigned __int128)(s >> 1) * a.nrows) >> 63);
        size_t lo = 0, hi = a.nbatches;
        while (hi - lo > 1) { /* last batch with first_row <= id */
            size_t mid = (lo + hi) / 2;
            if (a.batches[mid].first_row <= id) lo = mid;
            else hi = mid;
        }
        const struct pi_arrow_batch_ref *r = &a.batches[lo];
        if (!have[lo]) {
            /* zero copy over the mapping; decode walks the offsets (a few
             * pages per column), as pyarrow's validation would */
            if (pi_arrow_decode(&a, lo, m + r->offset, r->meta_len + r->body_len, NULL, 0, &bt[lo])) {
                fprintf(stderr, "%s\n", pagein_last_error_detail());
                return 1;
            }
            have[lo] = 1;
        }
        for (uint32_t c = 0; c < bt[lo].ncols; c++) sink += touch(&bt[lo].cols[c], id - r->first_row);
    }
    double t2 = bench_now();
    if (json)
        printf("{\"mode\": \"mmap-random\", \"file\": \"%s\", \"rows\": %ld, \"dataset_rows\": %llu, \"open_seconds\": %.6f, "
               "\"seconds\": %.6f, \"rows_per_second\": %.1f}\n",
               path, rows, (unsigned long long)a.nrows, t1 - t0, t2 - t0, (double)rows / (t2 - t0));
    else
        printf("%s: %ld random rows of %llu through a mapping: %.3f s (index %.3f s), %.1f rows/s\n", path, rows,
               (unsigned long long)a.nrows, t2 - t0, t1 - t0, (double)rows / (t2 - t0));
    for (size_t b = 0; b < a.nbatches; b++) pi_arrow_batch_free(&bt[b]);
    free(bt);
    free(have);
    pi_arrow_close(&a);
    munmap((void *)m, n ? n : 1);
    close(fd);
    return 0;
}
