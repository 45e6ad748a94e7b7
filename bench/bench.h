/* bench.h - what the bench/ programs share (each is one .c file built on
 * its own against the library): the monotonic clock they time with. */
#ifndef PAGEIN_BENCH_H
#define PAGEIN_BENCH_H

#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
