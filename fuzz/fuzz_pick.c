/* fuzz_pick.c - which file of a folder is the model (src/format/pick.c):
 * the names come from untrusted listings (an S3 bucket, the Hub's API).
 * Input: a first byte (bit 0: a remote listing, listed = 1), then names
 * separated by '\n' or NUL. Invariants: the answer is 0, NOT_FOUND or
 * INVALID (or -ENOMEM); on 0 the pick is one of the names, a name a folder
 * scan considers, and an index exactly when it says so. White-box: uses
 * src/format/format.h. */
#include "../src/format/format.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 65536) return 0;
    int listed = data[0] & 1;
    char *buf = malloc(size);
    const char **names = malloc(size * sizeof *names);
    if (!buf || !names) {
        free(buf);
        free(names);
        return 0;
    }
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    size_t n = 0;
    char *start = buf;
    for (size_t i = 0; i < size; i++) {
        if (i == size - 1 || buf[i] == '\n' || buf[i] == 0) {
            buf[i] = 0;
            if (*start) names[n++] = start;
            start = buf + i + 1;
        }
    }
    size_t pick = (size_t)-1;
    int index = -1;
    int rc = pi_model_pick("fuzz", names, n, listed, &pick, &index);
    if (rc == 0) {
        if (pick >= n || !pi_is_model_name(names[pick])) __builtin_trap();
        if (index != pi_ends_with(names[pick], ".safetensors.index.json")) __builtin_trap();
    } else if (rc != PAGEIN_E_NOT_FOUND && rc != PAGEIN_E_INVALID && rc != -ENOMEM) {
        __builtin_trap();
    }
    pi_err_clear();
    free(buf);
    free(names);
    return 0;
}
