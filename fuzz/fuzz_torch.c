/* fuzz_torch.c - the PyTorch checkpoint reader end to end: zip container,
 * restricted unpickler, tensor records; then every tensor is read back
 * through pagein_tensor_copy (strided gather, byte swap). */
#include <stdint.h>
#include <stdlib.h>

#include "pagein.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pagein_file *f = NULL;
    pagein_open_opts o = PAGEIN_OPEN_OPTS_INIT;
    o.format = PAGEIN_FORMAT_TORCH;
    if (pagein_open_memory(&f, data, size, "fuzz.pt", &o) != 0) return 0;
    uint8_t buf[256];
    for (size_t i = 0; i < pagein_tensor_count(f); i++) {
        const pagein_tensor *t = pagein_tensor_at(f, i);
        pagein_torch_tensor_info ti;
        pagein_torch_tensor_get_info(f, t, &ti);
        const pagein_dtype_info *di = pagein_dtype_get(t->dtype);
        uint64_t total = t->nelements * (di ? di->bits / 8 : 0);
        for (uint64_t off = 0; off < total && off < 4096; off += sizeof buf - 3) {
            size_t n = total - off < sizeof buf ? (size_t)(total - off) : sizeof buf;
            pagein_tensor_copy(f, t, off, buf, n);
        }
    }
    for (size_t i = 0; i < pagein_meta_count(f); i++) (void)pagein_meta_at(f, i);
    pagein_close(f);
    return 0;
}
