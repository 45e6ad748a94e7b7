/* fuzz_dequant.c - pagein_tensor_dequantize on arbitrary blocks. Byte 0
 * picks the input type (every dtype, supported or not), byte 1 the output
 * type and the byte-swapped flag, the rest is the tensor's data. Whole-call
 * and block-by-block results must agree and the output must be exactly
 * the promised size (the buffer is sized to it, so ASan catches overruns).
 * A disagreement traps. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pagein.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    pagein_dtype in = (pagein_dtype)(data[0] % PAGEIN_DTYPE_COUNT);
    static const pagein_dtype outs[4] = {PAGEIN_DTYPE_F32, PAGEIN_DTYPE_F16, PAGEIN_DTYPE_BF16, PAGEIN_DTYPE_Q8_0};
    pagein_dtype out = outs[data[1] & 3];
    const uint8_t *src = data + 2;
    size_t len = size - 2;
    const pagein_dtype_info *di = pagein_dtype_get(in);
    pagein_tensor t = {.name = "fuzz", .name_len = 4, .dtype = in, .nbytes = len,
                       .flags = (data[1] & 4) ? PAGEIN_TENSOR_SWAPPED : 0};
    size_t ub = di ? (di->block_elems > 1 ? di->block_bytes : di->bits / 8) : 0;
    size_t ue = di ? di->block_elems : 1, oes = out == PAGEIN_DTYPE_F32 ? 4 : 2;
    size_t want = ub ? len / ub * ue * oes : 0;
    uint8_t *a = malloc(want ? want : 1), *b = malloc(want ? want : 1);
    if (!a || !b) {
        free(a), free(b);
        return 0;
    }
    int rc = pagein_tensor_dequantize(&t, src, len, out, a, want);
    if (rc == 0 && ub) {
        /* the same, one unit at a time */
        for (size_t o = 0; o < len; o += ub)
            if (pagein_tensor_dequantize(&t, src + o, ub, out, b + o / ub * ue * oes, ue * oes) != 0) __builtin_trap();
        if (want && memcmp(a, b, want) != 0) __builtin_trap();
    }
    /* too small a destination is refused, never overrun */
    if (want && pagein_tensor_dequantize(&t, src, len, out, a, want - 1) == 0) __builtin_trap();
    free(a), free(b);
    return 0;
}
