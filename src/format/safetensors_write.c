/* safetensors_write.c - the safetensors writer (official layout). */
#include "../internal.h"

int pagein_safetensors_write(const char *path, const pagein_write_tensor *tensors, size_t n,
                             const pagein_write_opts *opts) {
    PI_UNUSED(path), PI_UNUSED(tensors), PI_UNUSED(n), PI_UNUSED(opts);
    return pi_err(PAGEIN_E_UNSUPPORTED, "safetensors writer not written yet");
}
