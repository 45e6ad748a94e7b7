/* fuzz_mds.c - the mds row of the dataset-format table (src/data/) on
 * untrusted bytes, from memory: open (the index pass / header parse), then
 * every group fetched, decoded and every field of every sample touched. */
#include <stdint.h>
#include <string.h>

#include "../src/data/dsformat.h"

/* The first byte picks the parser: even = a shard (plain or .mds.zstd),
 * odd = an index.json (whose shard list is then dropped). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int index = data[0] & 1;
    data++, size--;
    if (index) {
        struct pi_dsindex ix;
        memset(&ix, 0, sizeof ix);
        (void)pi_dsformat_mds.index("fuzz", data, size, &ix);
        for (size_t i = 0; i < ix.n; i++) pi_free(ix.names[i]);
        pi_free(ix.names);
        pi_free(ix.meta);
        pi_dsformat_mds.index_free(&ix);
        return 0;
    }
    struct pi_dsshard *sh = NULL;
    struct pi_dsopen a = {.group_bytes = 512};
    if (pi_ds_open_memory(&sh, &pi_dsformat_mds, data, size, "fuzz.mds", &a) == 0) {
        (void)pi_ds_walk(sh);
        pi_ds_shard_close(sh);
    }
    return 0;
}
