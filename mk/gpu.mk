# mk/gpu.mk - GPU staging (src/gpu/, docs/GPU.md).
#
# Nothing to detect at build time: the CUDA driver is found at run time
# (dlopen "libcuda.so.1"), so libpagein links against libc, pthreads and
# libdl only (dlopen lives in libc since glibc 2.34; -ldl keeps older
# systems linking). Without a driver or a GPU, pagein_gpu_* return
# PAGEIN_E_NO_CUDA and the CUDA tests skip with the reason.
LDLIBS_CORE += -ldl
# The extension's GPU unit (mk/python.mk builds PY_SRCS with PY_DEFS).
PY_SRCS += python/src/gpu.c
PY_DEFS += -DPAGEIN_PY_GPU
MK_DEPS += mk/gpu.mk
