# mk/gpu.mk - GPU staging (src/gpu/, docs/GPU.md).
#
# Nothing to detect at build time: the CUDA driver is found at run time
# (dlopen "libcuda.so.1"), so libpagein links against libc, pthreads and
# libdl only (dlopen lives in libc since glibc 2.34; -ldl keeps older
# systems linking). Without a driver or a GPU, pagein_gpu_* return
# PAGEIN_E_NO_CUDA and the CUDA tests skip with the reason.
LDLIBS_CORE += -ldl
# The extension includes python/src/gpu.c.
$(BUILD)/obj/python/_pagein.o: python/src/gpu.c
MK_DEPS += mk/gpu.mk
