/*
 * gpu.h - device backends for GPU staging (src/gpu/, docs/GPU.md).
 *
 * The staging pipeline (staging.c) talks to a device only through this
 * table of operations, like fio's I/O engines. Two rows:
 *
 *  - cuda.c: the CUDA driver API, found at run time with
 *    dlopen("libcuda.so.1") (PAGEIN_CUDA_LIBRARY overrides the name). No
 *    CUDA header and no link-time dependency: the function-pointer types are
 *    declared there from the driver API's documentation.
 *  - host.c: plain memory as the "device". Copies run asynchronously on one
 *    worker thread per stream, events complete when the worker reaches
 *    them, so the pipeline's ring discipline and readiness logic run here
 *    exactly as they do against a GPU (tests, `pagein bench gpu` without a
 *    GPU, PAGEIN_DEVICE_HOST).
 *
 * Device addresses are uint64_t (CUdeviceptr is an unsigned 64-bit integer;
 * the host backend stores a pointer). Streams and events are opaque
 * pointers owned by the backend. Every operation returns 0 or a negative
 * code with a detail naming the call (PAGEIN_E_CUDA: "cuMemAlloc(4096):
 * CUDA_ERROR_OUT_OF_MEMORY: out of memory").
 *
 * Threads: after open, every operation may be called from any thread once
 * that thread called bind() (CUDA: makes the primary context current).
 */
#ifndef PAGEIN_GPU_H
#define PAGEIN_GPU_H

#include "../internal.h"

#include <stdatomic.h>

struct pi_dev;

struct pi_dev_ops {
    const char *name; /* "cuda", "host" */
    int (*bind)(struct pi_dev *d);
    int (*alloc)(struct pi_dev *d, uint64_t *ptr, uint64_t n);
    void (*free)(struct pi_dev *d, uint64_t ptr);
    int (*host_alloc_pinned)(struct pi_dev *d, void **p, size_t n);
    /* d may be NULL (the pinned cache frees without a device object; the
     * calling thread has the device's context current). */
    void (*host_free)(struct pi_dev *d, void *p);
    int (*stream_create)(struct pi_dev *d, void **s);
    void (*stream_destroy)(struct pi_dev *d, void *s);
    int (*event_create)(struct pi_dev *d, void **e);
    void (*event_destroy)(struct pi_dev *d, void *e);
    /* Queues a copy of n bytes from pinned host memory to dst on stream s;
     * src must stay untouched until an event recorded after it completes. */
    int (*copy_async)(struct pi_dev *d, uint64_t dst, const void *src, size_t n, void *s);
    /* Records e on s: e completes when everything queued before on s has. */
    int (*record_ready)(struct pi_dev *d, void *e, void *s);
    int (*query)(struct pi_dev *d, void *e); /* 1 complete, 0 pending, < 0 error */
    int (*wait)(struct pi_dev *d, void *e);  /* blocks until e completes */
    int (*synchronize)(struct pi_dev *d);    /* every queued operation */
    /* Free and total device memory now (0 and 0 when unknown). */
    int (*mem_info)(struct pi_dev *d, uint64_t *free_bytes, uint64_t *total_bytes);
    /* Blocking device-to-host copy (verification, tests, benchmarks). */
    int (*copy_to_host)(struct pi_dev *d, void *dst, uint64_t src, size_t n);
    void (*close)(struct pi_dev *d);
};

struct pi_dev {
    const struct pi_dev_ops *ops;
    int device;          /* CUDA ordinal, or PAGEIN_DEVICE_HOST */
    char name[128];      /* "NVIDIA H200" or "host memory" */
    uint64_t total_mem;  /* device memory in bytes (0 unknown) */
    void *impl;
};

/* Opens a backend: PAGEIN_DEVICE_HOST gives the host backend, a device
 * ordinal >= 0 the CUDA one. 0, PAGEIN_E_NO_CUDA (no driver library, no
 * such device, cuInit failed: the detail says which) or -ENOMEM. */
int pi_dev_open(struct pi_dev **out, int device);
void pi_dev_close(struct pi_dev *d); /* NULL ok */

extern const struct pi_dev_ops pi_dev_host;
int pi_dev_host_open(struct pi_dev *d);
int pi_dev_cuda_open(struct pi_dev *d, int device);

/* Pinned host memory in use across every backend of the process (bytes),
 * and its high-water mark: tests check that the ring bounds it and that
 * loads in a loop give it all back. */
extern _Atomic uint64_t pi_gpu_pinned_live, pi_gpu_pinned_peak;
void pi_gpu_pinned_add(uint64_t n);
void pi_gpu_pinned_sub(uint64_t n);

/* Test hook: the order in which tensor t of load l became ready (0 =
 * first), or -1 when it is not ready or not part of l. */
long pi_gpu_ready_rank(pagein_gpu_load *l, const pagein_tensor *t);

/* The pinned-buffer cache (staging.c): buffers newly pinned since start,
 * bytes held in the cache now, and a test override of its cap (-1: the
 * default rule; the host backend caches nothing by default). */
extern _Atomic uint64_t pi_gpu_pinned_allocs;
uint64_t pi_gpu_pinned_cached(void);
extern _Atomic long pi_test_pinned_cache_cap;

/* Test hook: the host backend sleeps this many microseconds before each
 * copy, so a pipeline that reused a buffer before its copy completed would
 * be caught by the byte comparison. */
extern _Atomic unsigned pi_test_host_copy_delay_us;

#endif
