/* fuzz_dcp_hf.c - the DCP_SHARDING_INFO string of torch's safetensors
 * flavour of a Distributed Checkpoint (untrusted JSON), then the chunk
 * checks on what it parsed: each entry's offsets taken as a chunk of size
 * 1..3 in every dimension of one tensor. White-box: uses
 * src/format/dcp_hf.h. */
#include "../src/format/dcp_hf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct pi_dcp_hf_info in;
    memset(&in, 0, sizeof in);
    if (pi_dcp_hf_info_parse((const char *)data, size, "fuzz.safetensors", &in) == 0) {
        static const uint64_t lens[PI_DCP_MAX_NDIM] = {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1,
                                                       2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2,
                                                       3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3,
                                                       1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1};
        struct pi_dcp_hf_piece p[64];
        size_t np = in.n < 64 ? in.n : 64;
        for (size_t i = 0; i < in.n; i++) {
            const struct pi_dcp_hf_entry *e = &in.e[i];
            if (pi_dcp_hf_info_find(&in, e->name, e->name_len) != e) __builtin_trap();
            if (e->ndim > PI_DCP_MAX_NDIM || (e->ndim && !e->off)) __builtin_trap();
            if (i > 0 && e[-1].name_len == e->name_len && !memcmp(e[-1].name, e->name, e->name_len)) __builtin_trap();
            if (i < np)
                p[i] = (struct pi_dcp_hf_piece){"fuzz.safetensors", PAGEIN_DTYPE_F32, e->ndim, e->off, lens, e->shape,
                                                e->shape_ndim};
        }
        uint64_t shape[PI_DCP_MAX_NDIM], ne;
        uint32_t nd;
        if (np && pi_dcp_hf_check("t", p, np, &nd, shape, &ne) == 0) {
            uint64_t prod = 1;
            for (uint32_t d = 0; d < nd; d++) prod *= shape[d];
            if (prod != ne) __builtin_trap();
        }
    }
    pi_dcp_hf_info_free(&in);
    return 0;
}
