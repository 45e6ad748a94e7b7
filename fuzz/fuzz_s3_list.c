/* fuzz_s3_list.c - one page of an S3 ListObjectsV2 answer (untrusted XML
 * from the server) through the one page reader (src/source/s3_listing.c
 * pi_s3_page) and both record shapes built on it: the list op's entries
 * (URI, relative name, size, ETag) and the metadata cache's records (uri,
 * size, ETag; which it trusts to vouch for its entries). Invariants: every
 * name lies under the prefix, every string is NUL-terminated and no longer
 * than the input could give, the token fits. White-box: uses
 * src/source/remote.h. */
#include "../src/source/remote.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BASE "s3://bkt/"
#define PREFIX BASE "p/"

static int check(void *arg, const struct pi_list_entry *e) {
    (void)arg;
    size_t rl = strlen(e->rel), ul = strlen(e->uri);
    /* an object under the prefix, named relative to it; no "directory" marker */
    if (!rl || e->rel[rl - 1] == '/') __builtin_trap();
    if (ul != strlen(PREFIX) + rl || strncmp(e->uri, PREFIX, strlen(PREFIX)) != 0) __builtin_trap();
    if (strcmp(e->uri + strlen(PREFIX), e->rel) != 0) __builtin_trap();
    if (!e->identity) __builtin_trap();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    char *body = malloc(size + 1);
    if (!body) return 0;
    memcpy(body, data, size);
    body[size] = 0;
    (void)pi_s3_listing_parse(PREFIX, body, size, check, NULL);

    struct pi_stat_entry *v = NULL;
    size_t n = 0, cap = 0;
    char tok[64];
    int more = 0;
    int rc = pi_s3_stat_page(body, size, BASE, "", /* every key */ &v, &n, &cap, tok, sizeof tok, &more);
    if (rc < 0 && rc != -ENOMEM) __builtin_trap();
    if (!memchr(tok, 0, sizeof tok)) __builtin_trap();
    for (size_t i = 0; i < n; i++) {
        if (strncmp(v[i].uri, BASE, strlen(BASE)) != 0 || strlen(v[i].uri) > strlen(BASE) + size) __builtin_trap();
        if (!memchr(v[i].etag, 0, sizeof v[i].etag) || !v[i].etag[0] || v[i].size == PI_SIZE_UNKNOWN) __builtin_trap();
    }
    pi_stat_entries_free(v, n);
    free(body);
    return 0;
}
