/* fuzz_lines.c - the lines row of the dataset-format table (src/data/) on
 * untrusted bytes, from memory: open (the index pass / header parse), then
 * every group fetched, decoded and every field of every sample touched. */
#include <stdint.h>
#include <string.h>

#include "../src/data/dsformat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct pi_dsshard *sh = NULL;
    struct pi_dsopen a = {.group_bytes = 256};
    if (pi_ds_open_memory(&sh, &pi_dsformat_lines, data, size, "fuzz.jsonl", &a) == 0) {
        (void)pi_ds_walk(sh);
        pi_ds_shard_close(sh);
    }
    return 0;
}
