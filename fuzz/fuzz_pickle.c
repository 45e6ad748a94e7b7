/* fuzz_pickle.c - the restricted unpickler alone: the input is a data.pkl
 * record, wrapped here in a minimal torch zip (stored, zip32) with one
 * 4 KiB storage record "0" so that tensors can resolve. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pagein.h"

static uint8_t *put(uint8_t *p, const void *s, size_t n) { memcpy(p, s, n); return p + n; }
static uint8_t *u16(uint8_t *p, unsigned v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); return p + 2; }
static uint8_t *u32(uint8_t *p, uint32_t v) { return u16(u16(p, v & 0xFFFF), v >> 16); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    static uint8_t storage[4096];
    const char *names[3] = {"a/data.pkl", "a/data/0", "a/version"};
    const uint8_t *bodies[3] = {data, storage, (const uint8_t *)"3\n"};
    size_t lens[3] = {size, sizeof storage, 2};
    uint8_t *z = malloc(size + sizeof storage + 512), *p = z;
    uint32_t lho[3];
    for (int i = 0; i < 3; i++) {
        lho[i] = (uint32_t)(p - z);
        p = put(p, "PK\x03\x04", 4);
        p = u16(u16(u16(u16(u16(p, 20), 0), 0), 0), 0);
        p = u32(u32(u32(p, 0), (uint32_t)lens[i]), (uint32_t)lens[i]);
        p = u16(u16(p, (unsigned)strlen(names[i])), 0);
        p = put(p, names[i], strlen(names[i]));
        p = put(p, bodies[i], lens[i]);
    }
    uint32_t cd = (uint32_t)(p - z);
    for (int i = 0; i < 3; i++) {
        p = put(p, "PK\x01\x02", 4);
        p = u16(u16(u16(u16(u16(u16(p, 20), 20), 0), 0), 0), 0);
        p = u32(u32(u32(p, 0), (uint32_t)lens[i]), (uint32_t)lens[i]);
        p = u16(u16(u16(u16(u16(p, (unsigned)strlen(names[i])), 0), 0), 0), 0);
        p = u32(u32(p, 0), lho[i]);
        p = put(p, names[i], strlen(names[i]));
    }
    uint32_t cdlen = (uint32_t)(p - z) - cd;
    p = put(p, "PK\x05\x06", 4);
    p = u16(u16(u16(u16(p, 0), 0), 3), 3);
    p = u32(u32(p, cdlen), cd);
    p = u16(p, 0);
    pagein_file *f = NULL;
    if (pagein_open_memory(&f, z, (size_t)(p - z), "fuzz.pkl", NULL) == 0) {
        uint8_t buf[64];
        for (size_t i = 0; i < pagein_tensor_count(f); i++) {
            const pagein_tensor *t = pagein_tensor_at(f, i);
            if (t->nelements && pagein_dtype_get(t->dtype)) pagein_tensor_copy(f, t, 0, buf, 1);
        }
        pagein_close(f);
    }
    free(z);
    return 0;
}
