/* fuzz_tar.c - the tar row of the dataset-format table (src/data/) on
 * untrusted bytes, from memory: open (the index pass / header parse), then
 * every group fetched, decoded and every field of every sample touched. */
#include <stdint.h>
#include <string.h>

#include "../src/data/dsformat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct pi_dsshard *sh = NULL;
    struct pi_dsopen a = {.group_bytes = 4096, .flags = PI_DSOPEN_NO_CACHE};
    if (pi_ds_open_memory(&sh, &pi_dsformat_webdataset, data, size, "fuzz.tar", &a) == 0) {
        (void)pi_ds_walk(sh);
        pi_ds_shard_close(sh);
    }
    return 0;
}
