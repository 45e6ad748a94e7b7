/* gguf_split_stub.c - temporary stand-in for the GGUF split helper until
 * the GGUF branch is merged (then this file is deleted). Treats every path
 * as a single file. */
#include "load.h"

int pi_gguf_split_paths(const char *path, char ***paths, size_t *n) {
    PI_UNUSED(path);
    *paths = NULL;
    *n = 0;
    return 0;
}

void pi_gguf_split_free_paths(char **paths, size_t n) {
    for (size_t i = 0; i < n; i++) pi_free(paths[i]);
    pi_free(paths);
}

int pi_gguf_split_check(const pagein_file *const *files, size_t n) {
    PI_UNUSED(files), PI_UNUSED(n);
    return 0;
}
