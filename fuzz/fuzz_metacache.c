/* fuzz_metacache.c - the metadata cache's entry decoder (src/file/
 * metacache.c pi_meta_decode): an entry is read back from disk, where it
 * may be truncated, damaged or planted. Each input is decoded as it is and
 * again with its last 8 bytes replaced by the right checksum, so the length
 * checks behind the checksum are reached too. Invariants: a decoded entry's
 * header lies inside the input and its identity is NUL-terminated.
 * White-box: uses src/file/metacache.h. */
#include "../src/file/metacache.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *b, size_t n, const char *key) {
    struct pi_meta m;
    int r = pi_meta_decode(b, n, key, &m);
    if (r == 1) {
        if (m.hdr < b || m.len > n || m.hdr + m.len > b + n) __builtin_trap();
        if (!memchr(m.identity, 0, sizeof m.identity)) __builtin_trap();
    } else if (r != 0 && r != -1) {
        __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    uint8_t *b = malloc(size ? size : 1);
    if (!b) return 0;
    memcpy(b, data, size);
    static const char *const keys[] = {"url http://127.0.0.1/m.safetensors", "", "k"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) check(b, size, keys[k]);
    if (size >= 8) {
        uint64_t s = pi_meta_sum(b, size - 8);
        memcpy(b + size - 8, &s, 8);
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) check(b, size, keys[k]);
    }
    free(b);
    return 0;
}
