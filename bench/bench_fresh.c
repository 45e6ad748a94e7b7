/* bench_fresh.c - what fresh memory costs on this machine, apart from any
 * library code (docs/BENCHMARKS.md, "Fresh memory").
 *
 *   build/bench/bench_fresh touch MiB huge|small touch|populate
 *       maps MiB of anonymous memory with that page size and faults it in
 *       by a write per 4 KiB (touch) or MADV_POPULATE_WRITE (populate),
 *       then writes every 4 KiB again: seconds of each pass.
 *   build/bench/bench_fresh read FILE direct|direct-small|populate|copy|copy-small [MiB]
 *       drops FILE from the page cache, then gets it into memory:
 *       direct: O_DIRECT preads of MiB (default 8) into fresh huge pages
 *       (what `read` does on a cold local model); direct-small: the same
 *       into 4 KiB pages; populate: a shared mapping and
 *       MADV_POPULATE_READ (what `populate` does); copy, copy-small: the
 *       file's pages read ahead chunk by chunk into the page cache, copied
 *       into fresh memory and dropped behind (so the destination could
 *       take the pages just freed). Then reads a byte per 4 KiB of the
 *       result, as a consumer of every tensor would: seconds of each part.
 * A benchmark, not a test: run it alternated, with the load (uptime). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define HUGE_SZ ((size_t)2 << 20)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* len bytes of anonymous memory at a 2 MiB boundary, advised huge or not. */
static uint8_t *fresh(size_t len, int huge) {
    uint8_t *raw = mmap(NULL, len + HUGE_SZ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uint8_t *p = (uint8_t *)(((uintptr_t)raw + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1));
    madvise(p, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    return p;
}

static volatile uint64_t sink;

static double read_pages(const uint8_t *p, size_t len) {
    double t = now();
    uint64_t s = 0;
    for (size_t i = 0; i < len; i += 4096) s += ((const volatile uint8_t *)p)[i];
    sink += s;
    return now() - t;
}

static int touch_main(int argc, char **argv) {
    if (argc < 5) return 2;
    size_t len = (size_t)atol(argv[2]) << 20;
    int huge = strcmp(argv[3], "huge") == 0, pop = strcmp(argv[4], "populate") == 0;
    uint8_t *p = fresh(len, huge);
    if (!p) return 1;
    double t0 = now();
    if (pop) madvise(p, len, MADV_POPULATE_WRITE);
    else
        for (size_t i = 0; i < len; i += 4096) p[i] = 1;
    double t1 = now();
    for (size_t i = 0; i < len; i += 4096) p[i] = 2;
    double t2 = now();
    printf("%s pages, %s, %zu MiB: first %.3f s (%.2f GB/s), again %.3f s\n", huge ? "huge" : "4 KiB",
           pop ? "populate" : "touch", len >> 20, t1 - t0, (double)len / 1e9 / (t1 - t0), t2 - t1);
    return 0;
}

static int read_main(int argc, char **argv) {
    if (argc < 4) return 2;
    const char *path = argv[2], *how = argv[3];
    size_t chunk = (size_t)(argc > 4 ? atol(argv[4]) : 8) << 20;
    int fd = open(path, O_RDONLY);
    if (fd < 0 || !chunk) return 1;
    off_t end = lseek(fd, 0, SEEK_END);
    if (end <= 0) return 1;
    size_t len = (size_t)end;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    double t0 = now();
    const uint8_t *res;
    if (strcmp(how, "populate") == 0) {
        uint8_t *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) return 1;
        madvise(m, len, MADV_POPULATE_READ);
        res = m;
    } else {
        int small = strstr(how, "small") != NULL;
        uint8_t *p = fresh((len + 4095) & ~(size_t)4095, !small);
        if (!p) return 1;
        if (strncmp(how, "direct", 6) == 0) {
            int dfd = open(path, O_RDONLY | O_DIRECT);
            if (dfd < 0) return 1;
            for (size_t o = 0; o < len; o += chunk) { /* O_DIRECT: whole 4 KiB pages, inside the block */
                size_t n = len - o < chunk ? ((len - o) + 4095) & ~(size_t)4095 : chunk;
                if (pread(dfd, p + o, n, (off_t)o) <= 0) break;
            }
            close(dfd);
        } else { /* copy: read ahead into the page cache, copy, drop behind */
            uint8_t *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
            if (m == MAP_FAILED) return 1;
            madvise(m, chunk < len ? chunk : len, MADV_POPULATE_READ);
            for (size_t o = 0; o < len; o += chunk) {
                size_t n = len - o < chunk ? len - o : chunk;
                if (o + n < len) madvise(m + o + n, len - o - n < chunk ? len - o - n : chunk, MADV_POPULATE_READ);
                memcpy(p + o, m + o, n);
                madvise(m + o, n, MADV_DONTNEED);
                posix_fadvise(fd, (off_t)o, (off_t)n, POSIX_FADV_DONTNEED);
            }
            munmap(m, len);
        }
        res = p;
    }
    double t1 = now(), tr = read_pages(res, len);
    printf("%s: into memory %.3f s, then a read per 4 KiB %.3f s, total %.3f s\n", how, t1 - t0, tr, t1 - t0 + tr);
    close(fd);
    return 0;
}

int main(int argc, char **argv) {
    int rc = 2;
    if (argc > 1 && strcmp(argv[1], "touch") == 0) rc = touch_main(argc, argv);
    else if (argc > 1 && strcmp(argv[1], "read") == 0) rc = read_main(argc, argv);
    if (rc == 2)
        fprintf(stderr, "usage: bench_fresh touch MiB huge|small touch|populate\n"
                        "       bench_fresh read FILE direct|direct-small|populate|copy|copy-small [MiB]\n");
    return rc;
}
