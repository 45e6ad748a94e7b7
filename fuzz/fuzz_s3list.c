/* fuzz_s3list.c - one page of an S3 ListObjectsV2 answer (src/source/
 * s3_listing.c pi_s3_stat_page): the server's XML, which the metadata
 * cache trusts for ETags and sizes. Invariants: every record's uri starts
 * with the base and holds no more than the input could give, its ETag is
 * NUL-terminated, and the token fits. White-box: uses src/source/remote.h. */
#include "../src/source/remote.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    char *b = malloc(size + 1);
    if (!b) return 0;
    memcpy(b, data, size);
    b[size] = 0;
    static const char base[] = "s3://bkt/";
    struct pi_s3_stat *v = NULL;
    size_t n = 0, cap = 0;
    char tok[64];
    int more = 0;
    int rc = pi_s3_stat_page(b, size, base, &v, &n, &cap, tok, sizeof tok, &more);
    if (rc < 0 && rc != -ENOMEM) __builtin_trap();
    if (!memchr(tok, 0, sizeof tok)) __builtin_trap();
    for (size_t i = 0; i < n; i++) {
        if (strncmp(v[i].uri, base, sizeof base - 1) != 0 || strlen(v[i].uri) > sizeof base + size) __builtin_trap();
        if (!memchr(v[i].etag, 0, sizeof v[i].etag)) __builtin_trap();
    }
    pi_s3_stat_free(v, n);
    free(b);
    return 0;
}
