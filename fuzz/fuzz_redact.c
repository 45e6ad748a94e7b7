/* fuzz_redact.c - the URL redaction every error detail goes through
 * (src/source/redact.c): untrusted text (a server's Location, a listing's
 * key, a user's URL). Invariants: the output is NUL-terminated within its
 * buffer whatever its size, and redaction is idempotent (redacting twice
 * changes nothing more). White-box: uses
 * src/internal.h. */
#include "../src/internal.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 8192) return 0;
    char *in = malloc(size + 1);
    if (!in) return 0;
    memcpy(in, data, size);
    in[size] = 0;
    /* one URL into buffers of several sizes */
    size_t caps[] = {1, 7, 64, 4096, 3 * size + 16};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        char *out = malloc(caps[c]);
        if (!out) break;
        memset(out, 'Z', caps[c]);
        pi_url_redact(in, out, caps[c]);
        if (!memchr(out, 0, caps[c])) __builtin_trap();
        free(out);
    }
    /* text in place: twice gives the same as once */
    size_t cap = 2 * size + 64;
    char *t = malloc(cap), *t2 = malloc(cap);
    if (t && t2) {
        memcpy(t, in, size + 1);
        pi_redact_text(t, cap);
        if (!memchr(t, 0, cap)) __builtin_trap();
        memcpy(t2, t, cap);
        pi_redact_text(t2, cap);
        if (strcmp(t, t2) != 0) __builtin_trap();
    }
    free(t);
    free(t2);
    free(in);
    return 0;
}
