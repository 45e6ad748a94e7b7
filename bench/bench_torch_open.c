/* bench_torch_open.c - is opening a torch checkpoint from disk linear in the
 * size of its pickle?
 *
 * Generates two torch-style zips (stored, archive/data.pkl + archive/version)
 * whose pickle is a list of N one-element tuples (N = --small, default
 * 100,000, and --large, default 400,000), opens each with pagein_open() from
 * a temporary file (the path that runs the parser under the truncation
 * guard and the allocation journal) and with pagein_open_memory(), and
 * reports the median time of --iters runs and the large/small ratio. Linear
 * cost gives a ratio near large/small (4); the journal's old linear search
 * in pi_free made it about its square (16: 1.5 s vs 13.7 s in the issue).
 * The parse ends in an error or an empty table either way: what is timed is
 * reading and freeing the pickle's objects.
 *
 *   build/bench/bench_torch_open [--small N] [--large N] [--iters N] [--json]
 *
 * Uses only pagein.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "pagein.h"

#include "bench.h"

static int dcmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint32_t crc32_of(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return ~c;
}

struct buf {
    uint8_t *p;
    size_t n, cap;
};

static void put(struct buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->n + n) nc *= 2;
        b->p = realloc(b->p, nc);
        if (!b->p) {
            perror("realloc");
            exit(2);
        }
        b->cap = nc;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void put16(struct buf *b, uint32_t v) {
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(b, x, 2);
}

static void put32(struct buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}

/* PROTO 2, EMPTY_LIST, then MARK (BININT i, TUPLE1)*1000 APPENDS ..., STOP:
 * what pickle.dumps([(i,) for i in range(n)], protocol=2) writes, less the
 * memo opcodes. */
static void make_pickle(struct buf *b, uint32_t n) {
    put(b, "\x80\x02]", 3);
    for (uint32_t i = 0; i < n;) {
        put(b, "(", 1);
        for (uint32_t k = 0; k < 1000 && i < n; k++, i++) {
            put(b, "J", 1);
            put32(b, i);
            put(b, "\x85", 1);
        }
        put(b, "e", 1);
    }
    put(b, ".", 1);
}

/* A stored zip of the given members. */
static void make_zip(struct buf *z, const char *const *names, struct buf *const *data, int n) {
    uint32_t off[8], crc[8];
    for (int i = 0; i < n; i++) {
        off[i] = (uint32_t)z->n;
        crc[i] = crc32_of(data[i]->p, data[i]->n);
        put32(z, 0x04034b50);
        put16(z, 20), put16(z, 0), put16(z, 0), put16(z, 0), put16(z, 0);
        put32(z, crc[i]), put32(z, (uint32_t)data[i]->n), put32(z, (uint32_t)data[i]->n);
        put16(z, (uint32_t)strlen(names[i])), put16(z, 0);
        put(z, names[i], strlen(names[i]));
        put(z, data[i]->p, data[i]->n);
    }
    uint32_t cd = (uint32_t)z->n;
    for (int i = 0; i < n; i++) {
        put32(z, 0x02014b50);
        put16(z, 20), put16(z, 20), put16(z, 0), put16(z, 0), put16(z, 0), put16(z, 0);
        put32(z, crc[i]), put32(z, (uint32_t)data[i]->n), put32(z, (uint32_t)data[i]->n);
        put16(z, (uint32_t)strlen(names[i])), put16(z, 0), put16(z, 0), put16(z, 0), put16(z, 0);
        put32(z, 0), put32(z, off[i]);
        put(z, names[i], strlen(names[i]));
    }
    uint32_t cdlen = (uint32_t)z->n - cd;
    put32(z, 0x06054b50);
    put16(z, 0), put16(z, 0), put16(z, (uint32_t)n), put16(z, (uint32_t)n);
    put32(z, cdlen), put32(z, cd), put16(z, 0);
}

struct result {
    uint32_t n;
    size_t bytes;
    int rc;
    double file_s, mem_s;
};

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, dcmp);
    return v[n / 2];
}

static int run(uint32_t n, int iters, struct result *r) {
    struct buf pk = {0}, ver = {0}, z = {0};
    make_pickle(&pk, n);
    put(&ver, "3\n", 2);
    const char *names[] = {"archive/data.pkl", "archive/version"};
    struct buf *data[] = {&pk, &ver};
    make_zip(&z, names, data, 2);
    const char *td = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_torch_open.XXXXXX", td && *td ? td : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, z.p, z.n) != (ssize_t)z.n) {
        perror(path);
        return -1;
    }
    close(fd);
    pagein_open_opts o = {0};
    o.format = PAGEIN_FORMAT_TORCH;
    double tf[64], tm[64];
    for (int i = 0; i < iters; i++) {
        pagein_file *f = NULL;
        double t0 = bench_now();
        r->rc = pagein_open(&f, path, &o);
        pagein_close(f);
        tf[i] = bench_now() - t0;
        t0 = bench_now();
        int rc = pagein_open_memory(&f, z.p, z.n, path, &o);
        pagein_close(f);
        tm[i] = bench_now() - t0;
        (void)rc;
    }
    unlink(path);
    r->n = n;
    r->bytes = z.n;
    r->file_s = median(tf, iters);
    r->mem_s = median(tm, iters);
    free(pk.p), free(ver.p), free(z.p);
    return 0;
}

int main(int argc, char **argv) {
    uint32_t small = 100000, large = 400000;
    int iters = 3, json = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--small") && v) small = (uint32_t)strtoul(v, NULL, 10), i++;
        else if (!strcmp(argv[i], "--large") && v) large = (uint32_t)strtoul(v, NULL, 10), i++;
        else if (!strcmp(argv[i], "--iters") && v) iters = atoi(v), i++;
        else if (!strcmp(argv[i], "--json")) json = 1;
        else {
            fprintf(stderr, "usage: %s [--small N] [--large N] [--iters N] [--json]\n", argv[0]);
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (iters < 1 || iters > 64 || !small || large < small) {
        fprintf(stderr, "bench_torch_open: need 1 <= iters <= 64 and 0 < small <= large\n");
        return 2;
    }
    struct result rs, rl;
    if (run(small, iters, &rs) || run(large, iters, &rl)) return 1;
    double ratio_n = (double)large / small;
    double rf = rs.file_s > 0 ? rl.file_s / rs.file_s : 0, rm = rs.mem_s > 0 ? rl.mem_s / rs.mem_s : 0;
    struct utsname u;
    uname(&u);
    if (json) {
        printf("{\"kernel\": \"%s\", \"iters\": %d, \"size_ratio\": %.3f, \"runs\": [", u.release, iters, ratio_n);
        for (int k = 0; k < 2; k++) {
            const struct result *r = k ? &rl : &rs;
            printf("%s{\"tuples\": %u, \"bytes\": %zu, \"open_rc\": %d, \"file_s\": %.6f, \"memory_s\": %.6f}",
                   k ? ", " : "", r->n, r->bytes, r->rc, r->file_s, r->mem_s);
        }
        printf("], \"file_ratio\": %.3f, \"memory_ratio\": %.3f}\n", rf, rm);
        return 0;
    }
    printf("bench_torch_open: kernel %s, page cache warm (files just written), median of %d\n", u.release, iters);
    printf("%10s %10s %12s %12s  %s\n", "tuples", "bytes", "from file", "from memory", "open result");
    for (int k = 0; k < 2; k++) {
        const struct result *r = k ? &rl : &rs;
        printf("%10u %10zu %10.3f s %10.3f s  %s\n", r->n, r->bytes, r->file_s, r->mem_s,
               r->rc ? pagein_strerror(r->rc) : "ok");
    }
    printf("time ratio %u/%u: from file %.2f, from memory %.2f (linear: about %.1f; quadratic: about %.1f)\n", large,
           small, rf, rm, ratio_n, ratio_n * ratio_n);
    return 0;
}
