/*
 * cuda.c - the CUDA device backend (gpu.h), over the driver API found at
 * run time.
 *
 * libpagein has no link-time dependency on CUDA: the first CUDA load
 * dlopen()s "libcuda.so.1" (the driver's soname; PAGEIN_CUDA_LIBRARY
 * names another file, e.g. for tests) and looks up the entry points of
 * cuda_api.h with dlsym. A process without a driver gets PAGEIN_E_NO_CUDA
 * with a detail saying what was missing; nothing else in the library
 * notices.
 *
 * Process-wide state: the table of driver entry points, filled once under
 * a mutex on the first successful open and never unloaded (the driver
 * keeps its own global state; dlclose of libcuda is unsafe). Failed
 * attempts leave nothing behind, so a later call may try again.
 *
 * Contexts: each device uses its primary context (the one the CUDA runtime
 * and PyTorch use), so device pointers are shared with them; it is
 * retained on first use and kept (cu_ctx below). bind() makes it current
 * on the calling thread, which every pipeline thread does first.
 */
#include "gpu.h"
#include "cuda_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static struct {
#define PI_CUDA_FIELD(sym, ret, params) pfn_##sym sym;
    PI_CUDA_ENTRY_POINTS(PI_CUDA_FIELD)
#undef PI_CUDA_FIELD
} cu;
static int cu_loaded;
static pthread_mutex_t cu_mu = PTHREAD_MUTEX_INITIALIZER;
/* Each device's primary context, retained on first use and kept for the
 * life of the process (as the CUDA runtime and PyTorch do): releasing it
 * with the last load would destroy it, and the next load would pay for a
 * new context (tens to hundreds of milliseconds) again. */
#define PI_CUDA_MAX_DEVICES 64
static pi_cu_context cu_ctx[PI_CUDA_MAX_DEVICES];

static const char *cu_name(pi_cu_result r) {
    const char *s = NULL;
    if (cu.cuGetErrorName && cu.cuGetErrorName(r, &s) == PI_CUDA_SUCCESS && s) return s;
    return "CUDA_ERROR_UNKNOWN";
}

static const char *cu_string(pi_cu_result r) {
    const char *s = NULL;
    if (cu.cuGetErrorString && cu.cuGetErrorString(r, &s) == PI_CUDA_SUCCESS && s) return s;
    return "no description";
}

/* PAGEIN_E_CUDA with "call: CUDA_ERROR_X (text)". */
static int cu_fail(int code, pi_cu_result r, const char *call) {
    return pi_err(code, "%s: %s (%s, error %d)", call, cu_name(r), cu_string(r), (int)r);
}

#define CU_CALL(call, args)                                        \
    do {                                                           \
        pi_cu_result r_ = cu.call args;                            \
        if (r_ != PI_CUDA_SUCCESS) return cu_fail(PAGEIN_E_CUDA, r_, #call); \
    } while (0)

static int load_driver(void) {
    pthread_mutex_lock(&cu_mu);
    if (cu_loaded) {
        pthread_mutex_unlock(&cu_mu);
        return 0;
    }
    const char *lib = getenv("PAGEIN_CUDA_LIBRARY");
    if (!lib || !*lib) lib = "libcuda.so.1";
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        pthread_mutex_unlock(&cu_mu);
        return pi_err(PAGEIN_E_NO_CUDA, "no CUDA driver: dlopen(\"%s\") failed: %s", lib, why ? why : "?");
    }
#define PI_CUDA_SYM(sym, ret, params)                                                          \
    *(void **)&cu.sym = dlsym(h, #sym);                                                        \
    if (!cu.sym) {                                                                             \
        memset(&cu, 0, sizeof cu);                                                             \
        dlclose(h);                                                                            \
        pthread_mutex_unlock(&cu_mu);                                                          \
        return pi_err(PAGEIN_E_NO_CUDA, "CUDA driver %s has no entry point %s (driver too old?)", lib, #sym); \
    }
    PI_CUDA_ENTRY_POINTS(PI_CUDA_SYM)
#undef PI_CUDA_SYM
    pi_cu_result r = cu.cuInit(0);
    if (r != PI_CUDA_SUCCESS) {
        int rc = cu_fail(PAGEIN_E_NO_CUDA, r, "cuInit");
        memset(&cu, 0, sizeof cu);
        dlclose(h);
        pthread_mutex_unlock(&cu_mu);
        pi_err_prefix(lib);
        return rc;
    }
    cu_loaded = 1; /* h stays loaded for the life of the process */
    pthread_mutex_unlock(&cu_mu);
    return 0;
}

struct cdev {
    pi_cu_device dev;
    pi_cu_context ctx;
};

static int c_bind(struct pi_dev *d) {
    struct cdev *c = d->impl;
    CU_CALL(cuCtxSetCurrent, (c->ctx));
    return 0;
}

static int c_alloc(struct pi_dev *d, uint64_t *ptr, uint64_t n) {
    pi_cu_deviceptr p = 0;
    pi_cu_result r = cu.cuMemAlloc_v2(&p, (size_t)(n ? n : 1));
    if (r != PI_CUDA_SUCCESS) {
        char call[64];
        snprintf(call, sizeof call, "cuMemAlloc(%llu bytes)", (unsigned long long)n);
        return cu_fail(PAGEIN_E_CUDA, r, call);
    }
    *ptr = p;
    return 0;
}

static void c_free(struct pi_dev *d, uint64_t ptr) {
    if (ptr) cu.cuMemFree_v2((pi_cu_deviceptr)ptr);
}

static int c_host_alloc(struct pi_dev *d, void **p, size_t n) {
    pi_cu_result r = cu.cuMemHostAlloc(p, n ? n : 1, PI_CU_MEMHOSTALLOC_PORTABLE);
    if (r != PI_CUDA_SUCCESS) {
        char call[64];
        snprintf(call, sizeof call, "cuMemHostAlloc(%zu bytes)", n);
        return cu_fail(PAGEIN_E_CUDA, r, call);
    }
    return 0;
}

static void c_host_free(struct pi_dev *d, void *p) {
    if (p) cu.cuMemFreeHost(p);
}

static int c_stream_create(struct pi_dev *d, void **s) {
    pi_cu_stream st = NULL;
    CU_CALL(cuStreamCreate, (&st, PI_CU_STREAM_NON_BLOCKING));
    *s = st;
    return 0;
}

static void c_stream_destroy(struct pi_dev *d, void *s) {
    if (s) cu.cuStreamDestroy_v2((pi_cu_stream)s);
}

static int c_event_create(struct pi_dev *d, void **e) {
    pi_cu_event ev = NULL;
    /* Blocking sync: the completion thread sleeps instead of spinning a
     * core while a copy runs. */
    CU_CALL(cuEventCreate, (&ev, PI_CU_EVENT_BLOCKING_SYNC | PI_CU_EVENT_DISABLE_TIMING));
    *e = ev;
    return 0;
}

static void c_event_destroy(struct pi_dev *d, void *e) {
    if (e) cu.cuEventDestroy_v2((pi_cu_event)e);
}

static int c_copy_async(struct pi_dev *d, uint64_t dst, const void *src, size_t n, void *s) {
    CU_CALL(cuMemcpyHtoDAsync_v2, ((pi_cu_deviceptr)dst, src, n, (pi_cu_stream)s));
    return 0;
}

static int c_record(struct pi_dev *d, void *e, void *s) {
    CU_CALL(cuEventRecord, ((pi_cu_event)e, (pi_cu_stream)s));
    return 0;
}

static int c_query(struct pi_dev *d, void *e) {
    pi_cu_result r = cu.cuEventQuery((pi_cu_event)e);
    if (r == PI_CUDA_SUCCESS) return 1;
    if (r == PI_CUDA_ERROR_NOT_READY) return 0;
    return cu_fail(PAGEIN_E_CUDA, r, "cuEventQuery");
}

static int c_wait(struct pi_dev *d, void *e) {
    CU_CALL(cuEventSynchronize, ((pi_cu_event)e));
    return 0;
}

static int c_synchronize(struct pi_dev *d) {
    CU_CALL(cuCtxSynchronize, ());
    return 0;
}

static int c_copy_to_host(struct pi_dev *d, void *dst, uint64_t src, size_t n) {
    CU_CALL(cuMemcpyDtoH_v2, (dst, (pi_cu_deviceptr)src, n));
    return 0;
}

static int c_mem_info(struct pi_dev *d, uint64_t *free_bytes, uint64_t *total_bytes) {
    size_t f = 0, t = 0;
    CU_CALL(cuMemGetInfo_v2, (&f, &t));
    *free_bytes = f;
    *total_bytes = t;
    return 0;
}

static void c_close(struct pi_dev *d) {
    struct cdev *c = d->impl;
    if (!c) return;
    pi_free(c); /* the primary context stays retained (cu_ctx) */
    d->impl = NULL;
}

static const struct pi_dev_ops pi_dev_cuda = {
    .name = "cuda",
    .bind = c_bind,
    .alloc = c_alloc,
    .free = c_free,
    .host_alloc_pinned = c_host_alloc,
    .host_free = c_host_free,
    .stream_create = c_stream_create,
    .stream_destroy = c_stream_destroy,
    .event_create = c_event_create,
    .event_destroy = c_event_destroy,
    .copy_async = c_copy_async,
    .record_ready = c_record,
    .query = c_query,
    .wait = c_wait,
    .synchronize = c_synchronize,
    .mem_info = c_mem_info,
    .copy_to_host = c_copy_to_host,
    .close = c_close,
};

int pi_dev_cuda_open(struct pi_dev *d, int device) {
    RETURN_IF(device < 0, PAGEIN_E_INVALID, "CUDA device %d: ordinals start at 0", device);
    FORWARD_IF(load_driver());
    int count = 0;
    pi_cu_result r = cu.cuDeviceGetCount(&count);
    if (r != PI_CUDA_SUCCESS) return cu_fail(PAGEIN_E_NO_CUDA, r, "cuDeviceGetCount");
    RETURN_IF(device >= PI_CUDA_MAX_DEVICES, PAGEIN_E_NO_CUDA, "CUDA device %d: pagein handles devices 0-%d",
              device, PI_CUDA_MAX_DEVICES - 1);
    RETURN_IF(device >= count, PAGEIN_E_NO_CUDA, "CUDA device %d: this machine has %d CUDA device%s", device,
              count, count == 1 ? "" : "s");
    struct cdev *c = pi_calloc(1, sizeof *c);
    RETURN_IF(!c, -ENOMEM, "CUDA device %d: out of memory", device);
    r = cu.cuDeviceGet(&c->dev, device);
    if (r == PI_CUDA_SUCCESS) {
        pthread_mutex_lock(&cu_mu);
        if (!cu_ctx[device]) r = cu.cuDevicePrimaryCtxRetain(&cu_ctx[device], c->dev);
        c->ctx = cu_ctx[device];
        pthread_mutex_unlock(&cu_mu);
    }
    if (r != PI_CUDA_SUCCESS) {
        pi_free(c);
        return cu_fail(PAGEIN_E_NO_CUDA, r, "cuDevicePrimaryCtxRetain");
    }
    d->ops = &pi_dev_cuda;
    d->device = device;
    d->impl = c;
    if (cu.cuDeviceGetName(d->name, (int)sizeof d->name, c->dev) != PI_CUDA_SUCCESS)
        snprintf(d->name, sizeof d->name, "CUDA device %d", device);
    size_t total = 0;
    if (cu.cuDeviceTotalMem_v2(&total, c->dev) == PI_CUDA_SUCCESS) d->total_mem = total;
    int rc = c_bind(d);
    if (rc < 0) {
        c_close(d);
        return rc;
    }
    return 0;
}
