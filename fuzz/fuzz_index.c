/* fuzz_index.c - the sharded safetensors index parser (untrusted JSON that
 * names files to open). White-box: uses src/load/load.h. */
#include "../src/load/load.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct pi_index ix;
    pi_index_init(&ix);
    int rc = pi_index_parse(data, size, &ix);
    if (rc == 0) {
        /* invariants of a successful parse */
        for (size_t i = 0; i < ix.n; i++) {
            if (ix.e[i].shard >= ix.nshards) __builtin_trap();
            if (!ix.e[i].name) __builtin_trap();
        }
        for (size_t i = 0; i < ix.nshards; i++) {
            if (strchr(ix.shards[i], '/')) __builtin_trap();
            if (i && strcmp(ix.shards[i - 1], ix.shards[i]) >= 0) __builtin_trap();
        }
    }
    pi_index_free(&ix);
    return 0;
}
