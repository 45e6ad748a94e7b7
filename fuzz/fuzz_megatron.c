/* fuzz_megatron.c - the Megatron-LM .idx validator on untrusted bytes. The
 * first 8 bytes of the input give the .bin size; the rest is the .idx. */
#include <stdint.h>
#include <string.h>

#ifndef PAGEIN_EXPERIMENTAL /* the Megatron reader is in the experimental section */
#define PAGEIN_EXPERIMENTAL
#endif
#include "pagein.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint64_t bin = 0;
    if (size >= 8) {
        memcpy(&bin, data, 8);
        data += 8;
        size -= 8;
    }
    pagein_megatron_info info;
    int rc = pagein_megatron_validate(data, size, bin, &info);
    if (rc == 0 && info.elem_bytes == 0) __builtin_trap(); /* validated => a known dtype */
    return 0;
}
