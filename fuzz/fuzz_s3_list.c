/* fuzz_s3_list.c - one page of an S3 ListObjectsV2 answer (untrusted XML
 * from the server) through the s3 source's list op: the keys, their Size
 * and ETag, the continuation token. White-box: uses src/source/remote.h
 * (builds without libcurl have no s3 source: the parse returns at once). */
#include "../src/source/remote.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PREFIX "s3://bkt/p/"

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
    char *body = malloc(size + 1);
    if (!body) return 0;
    memcpy(body, data, size);
    body[size] = 0;
    (void)pi_s3_listing_parse(PREFIX, body, size, check, NULL);
    free(body);
    return 0;
}
