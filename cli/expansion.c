/* expansion.c - the warning `inspect` and `verify` give for tensors whose
 * materialised size dwarfs their storage: a PyTorch view with stride 0
 * (torch.zeros(1).expand(2**20, 2**20)) is a few bytes on disk and terabytes
 * once written out by `convert`. */
#include "cli.h"

#include <string.h>

size_t cli_warn_expansion(FILE *out, const char *cmd, const char *path, const pagein_file *f) {
    size_t n = pagein_tensor_count(f), warned = 0;
    for (size_t i = 0; i < n; i++) {
        const pagein_tensor *t = pagein_tensor_at(f, i);
        const pagein_dtype_info *di = pagein_dtype_get(t->dtype);
        if (!di || di->block_elems != 1 || di->bits < 8) continue;
        /* materialised bytes, saturating */
        uint64_t es = di->bits / 8, mat = t->nelements > UINT64_MAX / es ? UINT64_MAX : t->nelements * es;
        uint64_t stored = t->nbytes;
        pagein_torch_tensor_info ti;
        if (pagein_torch_tensor_get_info(f, t, &ti) == 0 && ti.storage_nbytes < stored) stored = ti.storage_nbytes;
        if (mat < CLI_EXPANSION_MIN_BYTES || mat / CLI_EXPANSION_FACTOR < (stored ? stored : 1)) continue;
        char a[32], b[32];
        fprintf(out, "pagein %s: warning: %s: tensor '%s' materialises to %s from %s of storage (x%llu, a stride-0 or "
                     "overlapping view): convert would write all of it\n",
                cmd, path, t->name, cli_human_bytes(mat, a, sizeof a), cli_human_bytes(stored, b, sizeof b),
                (unsigned long long)(mat / (stored ? stored : 1)));
        warned++;
    }
    return warned;
}
