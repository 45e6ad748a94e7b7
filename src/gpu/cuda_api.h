/*
 * cuda_api.h - the few CUDA driver API entry points pagein calls, declared
 * from the driver API's public documentation (CUDA Driver API reference,
 * "Modules": Initialization, Device Management, Primary Context Management,
 * Context Management, Memory Management, Stream Management, Event
 * Management, Error Handling). No CUDA header is needed to build pagein;
 * libcuda.so.1 is opened at run time (cuda.c).
 *
 * The versioned symbol names are the ones cuda.h maps the plain names to
 * on 64-bit platforms since CUDA 3.2/11 (cuMemAlloc -> cuMemAlloc_v2, ...).
 * tools/cuda_decls_check.c compiles this file against a real cuda.h with
 * the pi_cu_* types mapped to CUDA's and checks every pointer type with
 * __builtin_types_compatible_p (tests/cli/gpu.test.sh runs it when cuda.h
 * is installed; it is never a build dependency).
 */
#ifndef PAGEIN_CUDA_API_H
#define PAGEIN_CUDA_API_H

#include <stddef.h>

#ifndef PI_CUDA_TYPES_FROM_CUDA_H
typedef int pi_cu_result;                  /* CUresult: an enum, int-sized */
typedef int pi_cu_device;                  /* CUdevice */
typedef struct pi_cu_ctx_st *pi_cu_context; /* CUcontext */
typedef struct pi_cu_stream_st *pi_cu_stream;
typedef struct pi_cu_event_st *pi_cu_event;
typedef unsigned long long pi_cu_deviceptr; /* CUdeviceptr (64-bit) */
#endif

#define PI_CUDA_SUCCESS 0
#define PI_CUDA_ERROR_NOT_READY 600
#define PI_CUDA_ERROR_NO_DEVICE 100
#define PI_CU_EVENT_BLOCKING_SYNC 0x1u
#define PI_CU_EVENT_DISABLE_TIMING 0x2u
#define PI_CU_STREAM_NON_BLOCKING 0x1u
#define PI_CU_MEMHOSTALLOC_PORTABLE 0x1u

/* X(symbol, return, parameters) for every entry point. */
#define PI_CUDA_ENTRY_POINTS(X)                                                              \
    X(cuInit, pi_cu_result, (unsigned int flags))                                            \
    X(cuDriverGetVersion, pi_cu_result, (int *version))                                      \
    X(cuDeviceGetCount, pi_cu_result, (int *count))                                          \
    X(cuDeviceGet, pi_cu_result, (pi_cu_device * device, int ordinal))                       \
    X(cuDeviceGetName, pi_cu_result, (char *name, int len, pi_cu_device dev))                \
    X(cuDeviceTotalMem_v2, pi_cu_result, (size_t * bytes, pi_cu_device dev))                 \
    X(cuDevicePrimaryCtxRetain, pi_cu_result, (pi_cu_context * pctx, pi_cu_device dev))      \
    X(cuCtxSetCurrent, pi_cu_result, (pi_cu_context ctx))                                    \
    X(cuCtxSynchronize, pi_cu_result, (void))                                                \
    X(cuMemAlloc_v2, pi_cu_result, (pi_cu_deviceptr * dptr, size_t bytesize))                \
    X(cuMemGetInfo_v2, pi_cu_result, (size_t * free_bytes, size_t * total_bytes))            \
    X(cuMemFree_v2, pi_cu_result, (pi_cu_deviceptr dptr))                                    \
    X(cuMemHostAlloc, pi_cu_result, (void **pp, size_t bytesize, unsigned int flags))        \
    X(cuMemFreeHost, pi_cu_result, (void *p))                                                \
    X(cuMemcpyHtoDAsync_v2, pi_cu_result,                                                    \
      (pi_cu_deviceptr dst, const void *src, size_t bytes, pi_cu_stream stream))            \
    X(cuMemcpyDtoH_v2, pi_cu_result, (void *dst, pi_cu_deviceptr src, size_t bytes))        \
    X(cuStreamCreate, pi_cu_result, (pi_cu_stream * stream, unsigned int flags))             \
    X(cuStreamDestroy_v2, pi_cu_result, (pi_cu_stream stream))                               \
    X(cuEventCreate, pi_cu_result, (pi_cu_event * event, unsigned int flags))                \
    X(cuEventDestroy_v2, pi_cu_result, (pi_cu_event event))                                  \
    X(cuEventRecord, pi_cu_result, (pi_cu_event event, pi_cu_stream stream))                 \
    X(cuEventQuery, pi_cu_result, (pi_cu_event event))                                       \
    X(cuEventSynchronize, pi_cu_result, (pi_cu_event event))                                 \
    X(cuGetErrorName, pi_cu_result, (pi_cu_result error, const char **str))                  \
    X(cuGetErrorString, pi_cu_result, (pi_cu_result error, const char **str))

#define PI_CUDA_TYPEDEF(sym, ret, params) typedef ret(*pfn_##sym) params;
PI_CUDA_ENTRY_POINTS(PI_CUDA_TYPEDEF)
#undef PI_CUDA_TYPEDEF

#endif
