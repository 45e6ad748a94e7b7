/* bench_parquet.c - decoding Parquet column chunks against the limit of
 * the work: libsnappy's own decompression of the same pages, in the same
 * run (target: >= 0.7x its throughput). The file is read into memory first
 * (warm); the columns given (default: all) are decoded in every row group,
 * ITERS times after one untimed warm-up, and so is every page of them with
 * snappy_uncompress alone. White-box: includes src/data/parquet.h.
 *
 *   bench_parquet FILE [--iters N] [--json] [COLUMN...]
 *
 * bench/parquet.sh writes the file (npm parquet-wasm) and runs the peer. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#include "../src/data/parquet.h"
#ifdef PAGEIN_HAVE_SNAPPY
#include <snappy-c.h>
#endif

#include "bench.h"

static double cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int iters = 10, json = 0;
    const char *cols[64];
    int ncols = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (!path) path = argv[i];
        else if (ncols < 64) cols[ncols++] = argv[i];
    }
    if (!path || iters < 1) {
        fprintf(stderr, "usage: bench_parquet FILE [--iters N] [--json] [COLUMN...]\n");
        return 2;
    }
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        perror(path);
        return 2;
    }
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n);
    if (!buf || fread(buf, 1, (size_t)n, fp) != (size_t)n) return 2;
    fclose(fp);
    struct pi_pq_file *f;
    if (pi_pq_open(&f, buf, (size_t)n, (uint64_t)n, path) < 0) {
        fprintf(stderr, "%s\n", pagein_last_error_detail());
        return 1;
    }
    int sel[256];
    int nsel = 0;
    for (size_t c = 0; c < f->nleaves && nsel < 256; c++) {
        int want = ncols == 0;
        for (int k = 0; k < ncols; k++) want |= !strcmp(cols[k], f->leaves[c].field) || !strcmp(cols[k], f->leaves[c].path);
        if (want) sel[nsel++] = (int)c;
    }
    /* the pages of the selected chunks, for the libsnappy pass */
    uint64_t comp = 0, unc = 0, rows = 0, values = 0;
    size_t maxpage = 1;
    int snappy_only = 1;
    for (size_t g = 0; g < f->ngroups; g++) {
        rows += (uint64_t)f->groups[g].num_rows;
        for (int k = 0; k < nsel; k++) {
            const struct pi_pq_chunk *C = &f->groups[g].chunks[sel[k]];
            snappy_only &= C->codec == PI_PQ_SNAPPY;
            values += (uint64_t)C->num_values;
            for (uint64_t pos = 0; pos < C->len;) {
                struct pi_pq_page_info pi;
                if (pi_pq_page_info(buf + C->off + pos, (size_t)(C->len - pos), &pi) < 0) return 1;
                comp += (uint64_t)pi.csize;
                unc += (uint64_t)pi.usize;
                if ((size_t)pi.usize > maxpage) maxpage = (size_t)pi.usize;
                pos += pi.header_len + (uint64_t)pi.csize;
            }
        }
    }
    uint8_t *out = malloc(maxpage);
    double *td = calloc((size_t)iters, sizeof *td), *ts = calloc((size_t)iters, sizeof *ts), *tc = calloc((size_t)iters, sizeof *tc);
    double *tf = calloc((size_t)iters, sizeof *tf), *tfc = calloc((size_t)iters, sizeof *tfc), *tsc = calloc((size_t)iters, sizeof *tsc);
    double *tw = calloc((size_t)iters, sizeof *tw), *twc = calloc((size_t)iters, sizeof *twc);
    /* reused: one column a selected column and one scratch, decoded into
     * again and again (a reader that keeps its buffers); fresh: a new
     * column each time, its arrays from the memory policy (src/core/mem.c:
     * the arrays a freed column gave back, as in a pipeline's next group;
     * PAGEIN_MEM_KEEP=0 makes every one fresh, first-touch faults included) */
    struct pi_pq_column *rcol = calloc((size_t)(nsel ? nsel : 1), sizeof *rcol);
    struct pi_pq_scratch scr;
    memset(&scr, 0, sizeof scr);
    double first_f = 0, first_fc = 0; /* the first fresh decode: pages never touched before */
    for (int it = -1; it < iters; it++) {
        double f0 = bench_now(), fc0 = cpu();
        for (size_t g = 0; g < f->ngroups; g++)
            for (int k = 0; k < nsel; k++) {
                struct pi_pq_column col;
                const struct pi_pq_chunk *C = &f->groups[g].chunks[sel[k]];
                if (pi_pq_decode_chunk(f, g, (size_t)sel[k], buf + C->off, (size_t)C->len, &col) < 0) {
                    fprintf(stderr, "%s\n", pagein_last_error_detail());
                    return 1;
                }
                pi_pq_column_free(&col);
            }
        double t0 = bench_now(), c0 = cpu();
        for (size_t g = 0; g < f->ngroups; g++)
            for (int k = 0; k < nsel; k++) {
                const struct pi_pq_chunk *C = &f->groups[g].chunks[sel[k]];
                if (pi_pq_decode_chunk_into(f, g, (size_t)sel[k], buf + C->off, (size_t)C->len, &rcol[k], &scr) < 0) {
                    fprintf(stderr, "%s\n", pagein_last_error_detail());
                    return 1;
                }
            }
        double t1 = bench_now(), c1 = cpu();
#ifdef PAGEIN_HAVE_SNAPPY
        if (snappy_only)
            for (size_t g = 0; g < f->ngroups; g++)
                for (int k = 0; k < nsel; k++) {
                    const struct pi_pq_chunk *C = &f->groups[g].chunks[sel[k]];
                    for (uint64_t pos = 0; pos < C->len;) {
                        struct pi_pq_page_info pi;
                        pi_pq_page_info(buf + C->off + pos, (size_t)(C->len - pos), &pi);
                        const uint8_t *pg = buf + C->off + pos + pi.header_len;
                        size_t ol = (size_t)pi.usize - pi.lvl_len;
                        if (snappy_uncompress((const char *)pg + pi.lvl_len, (size_t)pi.csize - pi.lvl_len, (char *)out,
                                              &ol) != SNAPPY_OK)
                            return 1;
                        pos += pi.header_len + (uint64_t)pi.csize;
                    }
                }
#endif
        double t2 = bench_now(), c2 = cpu();
        /* the floor of the output: writing the decoded arrays once (memset of
         * the reused column's values, validity, offsets, strings) */
        for (int k = 0; k < nsel; k++) {
            struct pi_pq_column *c = &rcol[k];
            memset(c->values, 1, (size_t)(c->nelems * c->width));
            if (!c->all_valid) memset(c->elem_valid, 1, (size_t)c->nelems);
            if (c->kind == PI_PQ_LIST) memset(c->offsets, 1, (size_t)(c->nrows + 1) * sizeof *c->offsets);
            if (!c->width) {
                memset(c->voff, 1, (size_t)(c->nelems + 1) * sizeof *c->voff);
                memset(c->bytes, 1, (size_t)c->nbytes);
            }
        }
        double t3 = bench_now(), c3 = cpu();
        if (it < 0) {
            first_f = t0 - f0;
            first_fc = c0 - fc0;
        } else {
            tw[it] = t3 - t2;
            twc[it] = c3 - c2;
            td[it] = t1 - t0;
            tc[it] = c1 - c0;
            ts[it] = t2 - t1;
            tsc[it] = c2 - c1;
            tf[it] = t0 - f0;
            tfc[it] = c0 - fc0;
        }
    }
    for (int k = 0; k < nsel; k++) pi_pq_column_free(&rcol[k]);
    free(rcol);
    pi_pq_scratch_free(&scr);
    double *all[] = {td, ts, tc, tsc, tf, tfc, tw, twc};
    for (size_t k = 0; k < 8; k++) qsort(all[k], (size_t)iters, sizeof *td, cmpd);
    double d = td[iters / 2], s = ts[iters / 2], dc = tc[iters / 2], sc = tsc[iters / 2];
    struct utsname u;
    uname(&u);
    if (json) {
        printf("{\"file\":\"%s\",\"kernel\":\"%s\",\"iters\":%d,\"row_groups\":%zu,\"rows\":%llu,\"values\":%llu,"
               "\"compressed\":%llu,\"uncompressed\":%llu,\"decode_s\":%.6f,\"decode_cpu_s\":%.6f,\"snappy_s\":%.6f,"
               "\"snappy_cpu_s\":%.6f,\"write_s\":%.6f,\"write_cpu_s\":%.6f,\"ratio\":%.3f,\"ratio_cpu\":%.3f,\"fresh_decode_s\":%.6f,\"fresh_decode_cpu_s\":%.6f,"
               "\"first_fresh_decode_s\":%.6f,\"first_fresh_decode_cpu_s\":%.6f,\"decode_mb_s\":%.1f,\"snappy_mb_s\":%.1f}\n",
               path, u.release, iters, f->ngroups, (unsigned long long)rows, (unsigned long long)values,
               (unsigned long long)comp, (unsigned long long)unc, d, dc, s, sc, tw[iters / 2], twc[iters / 2], snappy_only && d > 0 ? s / d : 0.0,
               snappy_only && dc > 0 ? sc / dc : 0.0, tf[iters / 2], tfc[iters / 2], first_f, first_fc, (double)unc / d / 1e6,
               s > 0 ? (double)unc / s / 1e6 : 0.0);
    } else {
        printf("bench_parquet: %s, kernel %s, warm (file in memory), %d iterations, medians\n", path, u.release, iters);
        printf("  %zu row groups, %llu rows, %d columns, %llu values; pages %llu bytes compressed, %llu uncompressed\n",
               f->ngroups, (unsigned long long)rows, nsel, (unsigned long long)values, (unsigned long long)comp,
               (unsigned long long)unc);
        printf("  pagein decode, fresh columns each time:         %8.4f s  (CPU %.4f s)\n", tf[iters / 2], tfc[iters / 2]);
        printf("  the first of them (pages never touched before): %8.4f s  (CPU %.4f s)\n", first_f, first_fc);
        printf("  pagein decode, reused columns and scratch:      %8.4f s  (CPU %.4f s)  %8.1f MB/s of pages  %6.1f Mvalues/s\n", d,
               dc, (double)unc / d / 1e6, (double)values / d / 1e6);
        if (snappy_only && s > 0)
            printf("  libsnappy alone on the same pages:              %8.4f s  (CPU %.4f s)  %8.1f MB/s\n"
                   "  ratio (snappy time / reused decode time): wall %.2f, CPU %.2f (target >= 0.70)\n",
                   s, sc, (double)unc / s / 1e6, s / d, dc > 0 ? sc / dc : 0.0);
        else
            printf("  (not every chunk is SNAPPY: no libsnappy comparison)\n");
        printf("  writing the decoded arrays once (memset):       %8.4f s  (CPU %.4f s): the output's floor\n", tw[iters / 2],
               twc[iters / 2]);
    }
    free(out);
    for (size_t k = 0; k < 8; k++) free(all[k]);
    pi_pq_close(f);
    free(buf);
    return 0;
}
