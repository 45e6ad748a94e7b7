/* bench_readall.c - a full read of every tensor of a model file through
 * pagein (open, then touch every byte of every tensor through its mapped
 * data pointer, in file order) next to a plain read() of the whole file
 * into a buffer, with the page cache cold (posix_fadvise DONTNEED first)
 * and warm. The baseline `make demo` shows; later strategies (populate,
 * prefetch, parallel reads) are compared against these numbers.
 *
 *   build/bench/bench_readall FILE [--cache cold|warm|both] [--json]
 *
 * Uses only pagein.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "pagein.h"

#include "bench.h"

/* Drops the file's pages from the page cache. Returns 0 if the kernel
 * accepted the advice (pages mapped elsewhere may stay). */
static int evict(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    return rc;
}

static volatile uint64_t sink;

/* pagein: open + every byte of every tensor, file order. */
static int run_pagein(const char *path, double *secs, uint64_t *bytes) {
    double t0 = bench_now();
    pagein_file *f = NULL;
    int rc = pagein_open(&f, path, NULL);
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", path, pagein_strerror(rc), pagein_last_error_detail());
        return rc;
    }
    uint64_t sum = 0, total = 0;
    size_t n = pagein_tensor_count(f);
    for (size_t i = 0; i < n; i++) {
        const pagein_tensor *t = pagein_tensor_at(f, i);
        const uint8_t *p = t->data;
        uint64_t k = 0;
        for (; k + 8 <= t->nbytes; k += 8) {
            uint64_t w;
            memcpy(&w, p + k, 8);
            sum += w;
        }
        for (; k < t->nbytes; k++) sum += p[k];
        total += t->nbytes;
    }
    sink = sum;
    pagein_close(f);
    *secs = bench_now() - t0;
    *bytes = total;
    return 0;
}

/* plain read() of the whole file into a 16 MiB buffer, summed the same way. */
static int run_read(const char *path, double *secs, uint64_t *bytes) {
    double t0 = bench_now();
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        perror(path);
        return -1;
    }
    size_t cap = 16u << 20;
    uint8_t *buf = malloc(cap);
    uint64_t sum = 0, total = 0;
    for (;;) {
        ssize_t r = read(fd, buf, cap);
        if (r < 0) {
            perror("read");
            close(fd);
            free(buf);
            return -1;
        }
        if (r == 0) break;
        size_t k = 0;
        for (; k + 8 <= (size_t)r; k += 8) {
            uint64_t w;
            memcpy(&w, buf + k, 8);
            sum += w;
        }
        for (; k < (size_t)r; k++) sum += buf[k];
        total += (uint64_t)r;
    }
    sink = sum;
    close(fd);
    free(buf);
    *secs = bench_now() - t0;
    *bytes = total;
    return 0;
}

int main(int argc, char **argv) {
    const char *path = NULL, *cache = "both";
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cache") && i + 1 < argc) cache = argv[++i];
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (argv[i][0] != '-' && !path) path = argv[i];
        else {
            fprintf(stderr, "usage: bench_readall FILE [--cache cold|warm|both] [--json]\n");
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "usage: bench_readall FILE [--cache cold|warm|both] [--json]\n");
        return 2;
    }
    struct utsname u;
    uname(&u);
    struct statfs sf;
    unsigned long ftype = statfs(path, &sf) == 0 ? (unsigned long)sf.f_type : 0;
    int do_cold = strcmp(cache, "warm") != 0, do_warm = strcmp(cache, "cold") != 0;
    struct {
        const char *how, *cache;
        double secs;
        uint64_t bytes;
    } res[4];
    int nres = 0;
    for (int pass = 0; pass < 2; pass++) {
        int cold = pass == 0;
        if ((cold && !do_cold) || (!cold && !do_warm)) continue;
        for (int m = 0; m < 2; m++) {
            double s;
            uint64_t b;
            if (cold && evict(path) != 0) fprintf(stderr, "warning: posix_fadvise(DONTNEED) failed\n");
            if (!cold) { /* make sure it is warm */
                double s2;
                uint64_t b2;
                if (run_read(path, &s2, &b2) != 0) return 2;
            }
            int rc = m == 0 ? run_pagein(path, &s, &b) : run_read(path, &s, &b);
            if (rc) return 1;
            res[nres].how = m == 0 ? "pagein mmap, every tensor" : "plain read() of the file";
            res[nres].cache = cold ? "cold" : "warm";
            res[nres].secs = s;
            res[nres].bytes = b;
            nres++;
        }
    }
    if (json) {
        printf("{\"file\":\"%s\",\"kernel\":\"%s\",\"fs_magic\":\"0x%lx\",\"runs\":[", path, u.release, ftype);
        for (int i = 0; i < nres; i++)
            printf("%s{\"how\":\"%s\",\"cache\":\"%s\",\"seconds\":%.4f,\"bytes\":%" PRIu64 ",\"gb_per_s\":%.3f}",
                   i ? "," : "", res[i].how, res[i].cache, res[i].secs, res[i].bytes,
                   res[i].bytes / res[i].secs / 1e9);
        printf("]}\n");
    } else {
        printf("bench_readall: %s, kernel %s, fs magic 0x%lx\n", path, u.release, ftype);
        printf("%-28s %-5s %10s %12s %9s\n", "how", "cache", "seconds", "bytes", "GB/s");
        for (int i = 0; i < nres; i++)
            printf("%-28s %-5s %10.3f %12" PRIu64 " %9.2f\n", res[i].how, res[i].cache, res[i].secs, res[i].bytes,
                   res[i].bytes / res[i].secs / 1e9);
    }
    return 0;
}
