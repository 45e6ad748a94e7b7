/* fuzz_dcp_meta.c - a torch DCP checkpoint's .metadata parser (untrusted
 * pickle through the restricted unpickler's DCP mode, then the checks of
 * items, chunks and storage entries). White-box: uses src/format/dcp.h. */
#include "../src/format/dcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct pi_dcp_meta m;
    pi_dcp_meta_init(&m);
    if (pi_dcp_meta_parse(data, size, "fuzz/.metadata", &m) == 0) {
        /* invariants of a successful parse */
        for (size_t i = 0; i < m.n; i++) {
            const struct pi_dcp_item *it = &m.items[i];
            if (pi_dcp_meta_find(&m, it->name, it->name_len) != it) __builtin_trap();
            uint64_t sum = 0;
            for (uint32_t j = 0; j < it->nchunks; j++) {
                const struct pi_dcp_chunk *c = &it->chunks[j];
                if (c->file >= m.nfiles) __builtin_trap();
                for (uint32_t d = 0; d < it->ndim; d++)
                    if (c->off[d] + c->len[d] > it->size[d]) __builtin_trap();
                sum += c->nelements;
            }
            if (!it->is_bytes && sum != it->nelements) __builtin_trap();
        }
        for (size_t i = 0; i < m.nfiles; i++)
            if (strchr(m.files[i], '/') || !strcmp(m.files[i], "..")) __builtin_trap();
        uint64_t sizes[64];
        if (m.nfiles <= 64) {
            for (size_t i = 0; i < m.nfiles; i++) sizes[i] = 1u << 20;
            (void)pi_dcp_meta_check_files(&m, "fuzz", sizes);
        }
    }
    pi_dcp_meta_free(&m);
    return 0;
}
