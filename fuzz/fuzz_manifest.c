/* fuzz_manifest.c - the integrity-manifest parser on arbitrary bytes. */
#include <stddef.h>
#include <stdint.h>

#include "pagein.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    (void)pagein_manifest_validate(data, size, NULL);
    return 0;
}
