/*
 * cuda_decls_check.c - checks src/gpu/cuda_api.h against a real cuda.h.
 * Never part of the build: tests/cli/gpu.test.sh compiles it with
 * `cc -fsyntax-only -I<cuda>/include` when cuda.h is installed. A
 * declaration that disagrees with the driver's prototype fails to compile.
 */
#include <cuda.h>

#define PI_CUDA_TYPES_FROM_CUDA_H 1
typedef CUresult pi_cu_result;
typedef CUdevice pi_cu_device;
typedef CUcontext pi_cu_context;
typedef CUstream pi_cu_stream;
typedef CUevent pi_cu_event;
typedef CUdeviceptr pi_cu_deviceptr;
#include "../src/gpu/cuda_api.h"

#define PI_CHECK(sym, ret, params)                                                    \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&sym), pfn_##sym), #sym); \
    _Static_assert(sizeof(ret) == sizeof(int), #sym " returns an int-sized CUresult");
PI_CUDA_ENTRY_POINTS(PI_CHECK)

_Static_assert(PI_CUDA_SUCCESS == CUDA_SUCCESS, "CUDA_SUCCESS");
_Static_assert(PI_CUDA_ERROR_NOT_READY == CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY");
_Static_assert(PI_CUDA_ERROR_NO_DEVICE == CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE");
_Static_assert(PI_CU_EVENT_BLOCKING_SYNC == CU_EVENT_BLOCKING_SYNC, "CU_EVENT_BLOCKING_SYNC");
_Static_assert(PI_CU_EVENT_DISABLE_TIMING == CU_EVENT_DISABLE_TIMING, "CU_EVENT_DISABLE_TIMING");
_Static_assert(PI_CU_STREAM_NON_BLOCKING == CU_STREAM_NON_BLOCKING, "CU_STREAM_NON_BLOCKING");
_Static_assert(PI_CU_MEMHOSTALLOC_PORTABLE == CU_MEMHOSTALLOC_PORTABLE, "CU_MEMHOSTALLOC_PORTABLE");
_Static_assert(sizeof(CUdeviceptr) == sizeof(unsigned long long), "CUdeviceptr is 64-bit");
_Static_assert(sizeof(CUdevice) == sizeof(int), "CUdevice is an int");

int main(void) { return 0; }
