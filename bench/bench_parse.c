/* bench_parse.c - how long does it take to get from a safetensors file to a
 * usable tensor table?
 *
 *  1. parse: a synthetic llama-style header with N tensors (default 20,000)
 *     over a sparse file (no data blocks), parsed from the mapping with
 *     pagein_open_memory() and the table built (name index, layer order);
 *  2. open: pagein_open() + pagein_tensor_get() of every tensor by name +
 *     pagein_close() on a real file (--file, e.g. the 1.3 GB demo model),
 *     page cache warm (the header page), no tensor data touched.
 *
 * Reports min and median over --iters runs. Uses only pagein.h.
 *
 *   build/bench/bench_parse [--tensors N] [--iters N] [--file PATH] [--json]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "pagein.h"

#include "bench.h"

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long minflt(void) {
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_minflt;
}

static int dcmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct stats {
    double min, median;
};

static struct stats summarize(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, dcmp);
    struct stats s = {v[0], v[n / 2]};
    return s;
}

/* Appends to a growable buffer. */
struct buf {
    char *p;
    size_t n, cap;
};
static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct buf *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        b->cap = b->cap ? b->cap * 2 : 1 << 20;
        while (b->cap < b->n + (size_t)k + 1) b->cap *= 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
}

/* Builds a header of ntensors llama-style entries (hidden 1024, BF16) in
 * the official order; returns the header (padded) and the data size. */
static struct buf make_header(int ntensors, uint64_t *data_bytes) {
    struct buf b = {0};
    const uint64_t h = 1024, inter = 2816, kv = 256;
    static const char *const proj[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                       "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                       "mlp.down_proj",    "input_layernorm",  "post_attention_layernorm"};
    uint64_t off = 0;
    put(&b, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < ntensors; i++) {
        int layer = i / 9, j = i % 9;
        uint64_t d0, d1 = h;
        int nd = 2;
        switch (j) {
        case 0: case 3: d0 = h; break;
        case 1: case 2: d0 = kv; break;
        case 4: case 5: d0 = inter; break;
        case 6: d0 = h, d1 = inter; break;
        default: d0 = h, nd = 1; break;
        }
        uint64_t nb = d0 * (nd == 2 ? d1 : 1) * 2;
        if (nd == 2)
            put(&b, ",\"model.layers.%d.%s.weight\":{\"dtype\":\"BF16\",\"shape\":[%" PRIu64 ",%" PRIu64
                    "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
                layer, proj[j], d0, d1, off, off + nb);
        else
            put(&b, ",\"model.layers.%d.%s.weight\":{\"dtype\":\"BF16\",\"shape\":[%" PRIu64
                    "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
                layer, proj[j], d0, off, off + nb);
        off += nb;
    }
    put(&b, "}");
    while (b.n % 8) put(&b, " ");
    *data_bytes = off;
    return b;
}

static const char *fs_name(const char *path) {
    struct statfs s;
    if (statfs(path, &s) != 0) return "?";
    switch ((unsigned long)s.f_type) {
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x794c7630: return "overlayfs";
    case 0x6969: return "nfs";
    case 0x65735546: return "fuse";
    default: return "other";
    }
}

/* Parses the synthetic file image iters times; per-iteration wall and CPU
 * seconds into t and c, minor faults per iteration into *faults. */
static int parse_loop(const void *map, size_t total, int iters, double *t, double *c, size_t *found,
                      double *faults) {
    long flt0 = minflt();
    for (int it = 0; it < iters; it++) {
        double c0 = cpu_now(), t0 = bench_now();
        pagein_file *f = NULL;
        int rc = pagein_open_memory(&f, map, total, "synthetic", NULL);
        if (rc) {
            fprintf(stderr, "parse failed: %s: %s\n", pagein_strerror(rc), pagein_last_error_detail());
            return 1;
        }
        t[it] = bench_now() - t0;
        c[it] = cpu_now() - c0;
        *found = pagein_tensor_count(f);
        pagein_close(f);
    }
    *faults = (double)(minflt() - flt0) / iters;
    return 0;
}

int main(int argc, char **argv) {
    int ntensors = 20000, iters = 50, json = 0;
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tensors") && i + 1 < argc) ntensors = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--file") && i + 1 < argc) file = argv[++i];
        else if (!strcmp(argv[i], "--json")) json = 1;
        else {
            fprintf(stderr, "usage: bench_parse [--tensors N] [--iters N] [--file PATH] [--json]\n");
            return 2;
        }
    }
    if (ntensors < 0 || iters < 1) return 2;
    struct utsname u;
    uname(&u);

    /* 1. synthetic header over a sparse file */
    uint64_t data_bytes;
    struct buf hdr = make_header(ntensors, &data_bytes);
    const char *tmpdir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_parse-%d.safetensors", tmpdir, (int)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(path);
        return 2;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)hdr.n >> (8 * i));
    uint64_t total = 8 + hdr.n + data_bytes;
    if (pwrite(fd, len8, 8, 0) != 8 || pwrite(fd, hdr.p, hdr.n, 8) != (ssize_t)hdr.n || ftruncate(fd, (off_t)total) != 0) {
        perror("write");
        unlink(path);
        return 2;
    }
    void *map = mmap(NULL, total, PROT_READ, MAP_SHARED, fd, 0);
    unlink(path);
    close(fd);
    if (map == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    double *t = calloc((size_t)iters, sizeof *t), *c = calloc((size_t)iters, sizeof *c);
    size_t found = 0;
    /* 1a. as glibc behaves by default: memory freed by pagein_close goes back
     * to the kernel, so every parse first-touches fresh pages (page faults
     * dominate on a VM). */
    double faults;
    if (parse_loop(map, total, iters, t, c, &found, &faults)) return 1;
    struct stats sp = summarize(t, iters), spc = summarize(c, iters);
    /* 1b. steady state of a long-running process that keeps its heap: glibc
     * told not to trim or mmap (the library's work is the same; only the
     * allocator's policy differs). */
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    double kfaults;
    if (parse_loop(map, total, iters, t, c, &found, &kfaults)) return 1;
    struct stats sk = summarize(t, iters), skc = summarize(c, iters);
    munmap(map, total);

    /* 2. open a real file and look every tensor up */
    struct stats so = {0, 0}, soc = {0, 0};
    size_t nfile = 0;
    uint64_t fsize = 0;
    if (file) {
        for (int it = 0; it < iters; it++) {
            double c0 = cpu_now(), t0 = bench_now();
            pagein_file *f = NULL;
            int rc = pagein_open(&f, file, NULL);
            if (rc) {
                fprintf(stderr, "%s: %s: %s\n", file, pagein_strerror(rc), pagein_last_error_detail());
                return 1;
            }
            size_t n = pagein_tensor_count(f);
            size_t hits = 0;
            for (size_t i = 0; i < n; i++) hits += pagein_tensor_get(f, pagein_tensor_at(f, i)->name) != NULL;
            t[it] = bench_now() - t0;
            c[it] = cpu_now() - c0;
            if (hits != n) return 1;
            nfile = n;
            pagein_file_info info;
            pagein_file_get_info(f, &info);
            fsize = info.file_size;
            pagein_close(f);
        }
        so = summarize(t, iters);
        soc = summarize(c, iters);
    }
    free(t);
    free(c);

    if (json) {
        printf("{\"kernel\":\"%s\",\"synthetic\":{\"tensors\":%zu,\"header_bytes\":%zu,\"iters\":%d,"
               "\"min_ms\":%.3f,\"median_ms\":%.3f,\"cpu_min_ms\":%.3f,\"cpu_median_ms\":%.3f,\"page_faults\":%.1f,\"fs\":\"%s\","
               "\"heap_kept\":{\"min_ms\":%.3f,\"median_ms\":%.3f,\"cpu_min_ms\":%.3f,\"cpu_median_ms\":%.3f,\"page_faults\":%.1f}}",
               u.release, found, hdr.n, iters, sp.min * 1e3, sp.median * 1e3, spc.min * 1e3, spc.median * 1e3,
               faults, fs_name(tmpdir), sk.min * 1e3, sk.median * 1e3, skc.min * 1e3, skc.median * 1e3, kfaults);
        if (file)
            printf(",\"open\":{\"file\":\"%s\",\"file_size\":%" PRIu64 ",\"tensors\":%zu,\"cache\":\"warm\","
                   "\"min_ms\":%.3f,\"median_ms\":%.3f,\"cpu_min_ms\":%.3f,\"cpu_median_ms\":%.3f,\"fs\":\"%s\"}",
                   file, fsize, nfile, so.min * 1e3, so.median * 1e3, soc.min * 1e3, soc.median * 1e3, fs_name(file));
        printf("}\n");
    } else {
        printf("bench_parse: kernel %s, %d iterations, page cache warm\n", u.release, iters);
        printf("%-48s %9s %9s %9s %9s\n", "case", "wall min", "wall med", "cpu min", "cpu med");
        char label[128];
        snprintf(label, sizeof label, "parse+table, %zu tensors, %zu B header", found, hdr.n);
        printf("%-48s %9.3f %9.3f %9.3f %9.3f  ms  (%.0f page faults each)\n", label, sp.min * 1e3,
               sp.median * 1e3, spc.min * 1e3, spc.median * 1e3, faults);
        printf("%-48s %9.3f %9.3f %9.3f %9.3f  ms  (%.0f page faults each)\n", "  same, heap kept (long-running process)",
               sk.min * 1e3, sk.median * 1e3, skc.min * 1e3, skc.median * 1e3, kfaults);
        if (file) {
            snprintf(label, sizeof label, "open+lookup all, %zu tensors, %.2f GB (%s)", nfile, fsize / 1e9,
                     fs_name(file));
            printf("%-48s %9.3f %9.3f %9.3f %9.3f  ms\n", label, so.min * 1e3, so.median * 1e3, soc.min * 1e3,
                   soc.median * 1e3);
        } else {
            printf("(pass --file PATH to time opening a real file and looking up every tensor)\n");
        }
    }
    free(hdr.p);
    return 0;
}
