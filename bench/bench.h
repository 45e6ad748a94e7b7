/* bench.h - what the bench/ programs share (each is one .c file built on
 * its own against the library): the monotonic clock they time with, and
 * where the build's tools are. */
#ifndef PAGEIN_BENCH_H
#define PAGEIN_BENCH_H

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Seconds on the monotonic clock. */
static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The build directory, where pagein and slowfs are: this program's
 * directory, or its parent when that is the build tree's bench/ ("." when
 * /proc/self/exe cannot be read). */
static inline void bench_tool_dir(char *out, size_t cap) {
    snprintf(out, cap, ".");
    ssize_t sl = readlink("/proc/self/exe", out, cap - 1);
    if (sl <= 0) return;
    out[sl] = 0;
    char *slash = strrchr(out, '/');
    if (slash) *slash = 0;
    slash = strrchr(out, '/');
    if (slash && !strcmp(slash + 1, "bench")) *slash = 0;
}

#endif
