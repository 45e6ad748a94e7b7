/* bench_pipe_epochs.c - several epochs of one pipeline in one process, the
 * page cache of the given files dropped before each: the first epoch of a
 * process pays for its fresh memory (fetch buffers, decoded columns), the
 * later ones reuse it, as a training run's epochs after the first do.
 * bench/parquet_epoch.sh runs it ("later" in its slowfs part).
 *
 *   bench_pipe_epochs SPEC ORDER EPOCHS [FILE...]
 *
 * SPEC: a dataset spec (pagein_dataset_open); ORDER: none, block or global;
 * FILE...: files whose page cache is dropped (posix_fadvise DONTNEED) before
 * the open and before each epoch (the shards and, on a FUSE mount, the
 * files behind it; none: every epoch warm, as bench/parquet.sh runs it).
 * Prints one line per epoch: "epoch E SAMPLES SECONDS CPU_SECONDS" (the
 * process's CPU time over the epoch, all its threads; epoch 0's figures
 * include the dataset's open). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "pagein.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void drop(int n, char **files) {
    for (int i = 0; i < n; i++) {
        int fd = open(files[i], O_RDONLY);
        if (fd < 0) continue;
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: bench_pipe_epochs SPEC ORDER EPOCHS [FILE...]\n");
        return 2;
    }
    int order = pagein_order_from_name(argv[2]);
    long epochs = strtol(argv[3], NULL, 10);
    if (order < 0 || epochs < 1 || epochs > 1000) {
        fprintf(stderr, "bench_pipe_epochs: bad order '%s' or epochs '%s'\n", argv[2], argv[3]);
        return 2;
    }
    int nf = argc - 4;
    char **files = argv + 4;
    drop(nf, files);
    double t0 = now(), c0 = cpu();
    pagein_dataset *d = NULL;
    if (pagein_dataset_open(&d, argv[1], NULL) < 0) {
        fprintf(stderr, "bench_pipe_epochs: %s\n", pagein_last_error_detail());
        return 1;
    }
    pagein_pipe_opts o = PAGEIN_PIPE_OPTS_INIT;
    o.order = (pagein_order)order;
    pagein_pipe *p = NULL;
    int rc = 0, status = 0;
    for (long e = 0; e < epochs && rc >= 0; e++) {
        if (e) {
            drop(nf, files);
            t0 = now();
            c0 = cpu();
        }
        rc = e ? pagein_pipe_set_epoch(p, (uint64_t)e) : pagein_pipe_open(&p, d, &o);
        uint64_t n = 0;
        pagein_item it;
        while (rc >= 0 && (rc = pagein_pipe_next(p, &it)) == 1) n++;
        if (rc < 0) {
            fprintf(stderr, "bench_pipe_epochs: epoch %ld: %s\n", e, pagein_last_error_detail());
            status = 1;
            break;
        }
        double t1 = now(), c1 = cpu();
        printf("epoch %ld %" PRIu64 " %.6f %.6f\n", e, n, t1 - t0, c1 - c0);
        fflush(stdout);
    }
    pagein_pipe_close(p);
    pagein_dataset_close(d);
    return status;
}
