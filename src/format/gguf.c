/* gguf.c - GGUF reader (placeholder until the GGUF issue lands). */
#include "../internal.h"

int pi_gguf_parse(const uint8_t *buf, size_t len, uint32_t flags, struct pi_table *t) {
    PI_UNUSED(buf), PI_UNUSED(len), PI_UNUSED(flags), PI_UNUSED(t);
    return pi_err(PAGEIN_E_UNSUPPORTED, "GGUF is not supported yet");
}
