/* safetensors.c - safetensors reader (placeholder: the foundation issue's parser replaces it). */
#include "../internal.h"

int pi_safetensors_parse(const uint8_t *buf, size_t len, uint32_t flags, struct pi_table *t) {
    PI_UNUSED(buf), PI_UNUSED(len), PI_UNUSED(flags), PI_UNUSED(t);
    return pi_err(PAGEIN_E_UNSUPPORTED, "safetensors parser not written yet");
}

int pagein_safetensors_write(const char *path, const pagein_write_tensor *tensors, size_t n,
                             const pagein_write_opts *opts) {
    PI_UNUSED(path), PI_UNUSED(tensors), PI_UNUSED(n), PI_UNUSED(opts);
    return pi_err(PAGEIN_E_UNSUPPORTED, "safetensors writer not written yet");
}
