/* inspect_dcp_hf.c - `pagein inspect DIR` on torch's safetensors flavour
 * of a Distributed Checkpoint (safetensors files with DCP_SHARDING_INFO):
 * the whole tensors, their dtypes, shapes and chunk counts, through the
 * library's pagein_dcp_hf_* API. */
#include "cli.h"
#include "inspect.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int inspect_dcp_hf(const char *path, int json) {
    pagein_dcp_hf *h = NULL;
    int rc = pagein_dcp_hf_open(&h, path);
    if (rc < 0) {
        cli_error("inspect", rc, "%s", path);
        return rc > -4096 ? EXIT_USAGE : EXIT_INVALID;
    }
    size_t n = pagein_dcp_hf_count(h);
    uint64_t bytes = 0;
    if (json) {
        printf("{\"path\":");
        cli_json_str(stdout, path, strlen(path));
        printf(",\"format\":\"dcp-safetensors\",\"files_dir\":");
        cli_json_str(stdout, pagein_dcp_hf_dir(h), strlen(pagein_dcp_hf_dir(h)));
        printf(",\"tensors\":[");
    } else
        printf("checkpoint:  %s\nformat:      torch Distributed Checkpoint, safetensors shards (DCP_SHARDING_INFO)\n"
               "files in:    %s\n\n%-32s %-6s %-20s %12s %6s\n",
               path, pagein_dcp_hf_dir(h), "NAME", "DTYPE", "SHAPE", "BYTES", "CHUNKS");
    for (size_t i = 0; i < n; i++) {
        pagein_dcp_hf_info in;
        if ((rc = pagein_dcp_hf_tensor(h, i, &in)) < 0) break;
        char shape[256];
        cli_shape_str(shape, sizeof shape, in.shape, in.ndim);
        const char *dt = pagein_dtype_get(in.dtype)->name;
        bytes += in.nbytes;
        if (json) {
            printf("%s{\"name\":", i ? "," : "");
            cli_json_str(stdout, in.name, strlen(in.name));
            printf(",\"dtype\":\"%s\",\"shape\":%s,\"bytes\":%" PRIu64 ",\"chunks\":%u}", dt, shape, in.nbytes,
                   in.nchunks);
        } else
            printf("%-32s %-6s %-20s %12" PRIu64 " %6u\n", in.name, dt, shape, in.nbytes, in.nchunks);
    }
    if (json) printf("],\"count\":%zu,\"tensor_bytes\":%" PRIu64 "}\n", n, bytes);
    else printf("\n%zu tensors (%" PRIu64 " bytes); `pagein convert %s model.safetensors` consolidates it\n", n, bytes,
                path);
    pagein_dcp_hf_close(h);
    if (rc < 0) {
        cli_error("inspect", rc, "%s", path);
        return EXIT_INVALID;
    }
    return EXIT_OK;
}
