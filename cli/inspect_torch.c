/* inspect_torch.c - `pagein inspect` on PyTorch checkpoints: storages,
 * shared and strided tensors, and per-tensor storage, strides and
 * parameter flags in JSON (cli/inspect.h). */
#include "inspect.h"

#include <string.h>

static void torch_summary(const pagein_file *f, FILE *out) {
    size_t n = pagein_tensor_count(f), views = 0, strided = 0, params = 0;
    for (size_t i = 0; i < n; i++) {
        const pagein_tensor *t = pagein_tensor_at(f, i);
        pagein_torch_tensor_info ti;
        views += (t->flags & PAGEIN_TENSOR_VIEW) != 0;
        strided += (t->flags & PAGEIN_TENSOR_NONCONTIGUOUS) != 0;
        if (pagein_torch_tensor_get_info(f, t, &ti) == 0) params += ti.is_parameter != 0;
    }
    size_t ns = pagein_torch_storage_count(f);
    fprintf(out, "torch:       %zu storage%s; %zu tensor%s share%s storage, %zu strided, %zu parameter%s\n", ns,
            ns == 1 ? "" : "s", views, views == 1 ? "" : "s", views == 1 ? "s" : "", strided, params,
            params == 1 ? "" : "s");
    fprintf(out, "             (pickle checked against torch.load(weights_only=True)'s allowlist; nothing was run)\n");
}

static void torch_json(const pagein_file *f, FILE *out) {
    fprintf(out, ",\"torch_storages\":%zu", pagein_torch_storage_count(f));
}

static void torch_tensor_json(const pagein_file *f, const pagein_tensor *t, FILE *out) {
    pagein_torch_tensor_info ti;
    if (pagein_torch_tensor_get_info(f, t, &ti) != 0) return;
    fprintf(out, ",\"storage\":%u,\"storage_key\":", ti.storage);
    cli_json_str(out, ti.storage_key, strlen(ti.storage_key));
    fprintf(out, ",\"storage_offset\":%llu,\"stride\":[", (unsigned long long)ti.elem_offset);
    for (uint32_t d = 0; d < t->ndim; d++) fprintf(out, "%s%lld", d ? "," : "", (long long)ti.strides[d]);
    /* nbytes is the span of storage the tensor reads; own_nbytes what its
     * elements take (smaller for a view or a strided tensor) */
    uint64_t own = 0;
    if (pagein_dtype_nbytes(t->dtype, t->nelements, &own) == 0)
        fprintf(out, "],\"own_nbytes\":%llu", (unsigned long long)own);
    else
        fputs("],\"own_nbytes\":null", out);
    fprintf(out, ",\"view\":%s,\"noncontiguous\":%s,\"parameter\":%s,\"requires_grad\":%s",
            t->flags & PAGEIN_TENSOR_VIEW ? "true" : "false", t->flags & PAGEIN_TENSOR_NONCONTIGUOUS ? "true" : "false",
            ti.is_parameter ? "true" : "false", ti.requires_grad ? "true" : "false");
}

INSPECT_HOOK(torch, PAGEIN_FORMAT_TORCH, "torch", torch_summary, torch_json, torch_tensor_json, NULL)
