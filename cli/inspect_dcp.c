/* inspect_dcp.c - `pagein inspect CKPT_DIR` on a torch Distributed
 * Checkpoint (a .metadata beside __RANK_N.distcp files): its items, their
 * dtypes, shapes and chunks, through the library's pagein_dcp_* API. */
#include "cli.h"
#include "inspect.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int inspect_dcp(const char *path, int json) {
    pagein_dcp *d = NULL;
    int rc = pagein_dcp_open(&d, path);
    if (rc < 0) {
        cli_error("inspect", rc, "%s", path);
        return rc > -4096 || rc == PAGEIN_E_REMOTE ? EXIT_USAGE : EXIT_INVALID;
    }
    size_t n = pagein_dcp_item_count(d), nt = 0;
    uint64_t bytes = 0;
    if (json) {
        printf("{\"path\":");
        cli_json_str(stdout, path, strlen(path));
        printf(",\"format\":\"dcp\",\"items\":[");
    }
    else printf("checkpoint:  %s\nformat:      torch Distributed Checkpoint (DCP)\n\n%-32s %-6s %-20s %12s %6s\n", path,
                "NAME", "DTYPE", "SHAPE", "BYTES", "CHUNKS");
    for (size_t i = 0; i < n; i++) {
        pagein_dcp_item_info in;
        if ((rc = pagein_dcp_item(d, i, &in)) < 0) break;
        char shape[256];
        cli_shape_str(shape, sizeof shape, in.shape, in.ndim);
        const char *dt = in.is_bytes ? "object" : pagein_dtype_get(in.dtype)->name;
        if (!in.is_bytes) nt++, bytes += in.nbytes;
        if (json) {
            printf("%s{\"name\":", i ? "," : "");
            cli_json_str(stdout, in.name, strlen(in.name));
            printf(",\"dtype\":\"%s\",\"shape\":%s,\"bytes\":%" PRIu64 ",\"chunks\":%u}", dt,
                   in.is_bytes ? "null" : shape, in.nbytes, in.nchunks);
        } else
            printf("%-32s %-6s %-20s %12" PRIu64 " %6u\n", in.name, dt, in.is_bytes ? "-" : shape, in.nbytes, in.nchunks);
    }
    if (json) printf("],\"tensors\":%zu,\"tensor_bytes\":%" PRIu64 "}\n", nt, bytes);
    else printf("\n%zu tensors (%" PRIu64 " bytes), %zu non-tensor items; `pagein convert %s model.safetensors` "
                "consolidates it\n", nt, bytes, n - nt, path);
    pagein_dcp_close(d);
    if (rc < 0) {
        cli_error("inspect", rc, "%s", path);
        return EXIT_INVALID;
    }
    return EXIT_OK;
}
