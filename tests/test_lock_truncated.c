/* test_lock_truncated.c - locking the tensors of a file that was truncated
 * after it was opened reports the truncation (PAGEIN_E_TRUNCATED naming
 * the file and the offset), not an RLIMIT_MEMLOCK refusal: mlock of pages
 * past the end of the file fails with ENOMEM, which otherwise reads as
 * "over the limit". The check runs before mlock, so the
 * test means the same under AddressSanitizer (whose mlock is a no-op). */
#include "test.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TENSOR_BYTES (256u * 1024u)

/* A safetensors file of three U8 tensors of 256 KiB: embed, layer 0, head. */
static int write_small(const char *path) {
    char hdr[512];
    int h = snprintf(hdr, sizeof hdr,
                     "{\"embed.weight\":{\"dtype\":\"U8\",\"shape\":[%u],\"data_offsets\":[0,%u]},"
                     "\"model.layers.0.w\":{\"dtype\":\"U8\",\"shape\":[%u],\"data_offsets\":[%u,%u]},"
                     "\"lm_head.weight\":{\"dtype\":\"U8\",\"shape\":[%u],\"data_offsets\":[%u,%u]}}",
                     TENSOR_BYTES, TENSOR_BYTES, TENSOR_BYTES, TENSOR_BYTES, 2 * TENSOR_BYTES, TENSOR_BYTES,
                     2 * TENSOR_BYTES, 3 * TENSOR_BYTES);
    while (h % 8) hdr[h++] = ' ';
    size_t len = 8 + (size_t)h + 3 * TENSOR_BYTES;
    unsigned char *buf = calloc(1, len);
    if (!buf) return -1;
    uint64_t n = (uint64_t)h;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(n >> (8 * i));
    memcpy(buf + 8, hdr, (size_t)h);
    for (size_t i = 8 + (size_t)h; i < len; i++) buf[i] = (unsigned char)(i * 7);
    int rc = pt_write_file(path, buf, len);
    free(buf);
    return rc;
}

TEST(lock_truncated_says_truncated) {
    const char *p = pt_tmppath("lock-trunc.safetensors");
    CHECK_OK(write_small(p));
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_LAZY;
    pagein_model *m = NULL;
    CHECK_OK(pagein_model_open(&m, p, &o));
    if (!m) return FAIL;
    /* cut the file in the middle of layer 0 */
    CHECK_OK(truncate(p, 8 + 1024 + TENSOR_BYTES + 1000));
    int rc = pagein_model_lock_tensors(m, NULL, 0);
    CHECK_EQ(rc, PAGEIN_E_TRUNCATED);
    const char *d = pagein_last_error_detail();
    printf("    detail: %s\n", d);
    CHECK(strstr(d, p) != NULL);
    CHECK(strstr(d, "offset") != NULL);
    CHECK(strstr(d, "truncated") != NULL);
    CHECK(strstr(d, "MEMLOCK") == NULL);
    /* a layer wholly past the new end: the same */
    CHECK_EQ(pagein_model_lock_layers(m, 1, 1), PAGEIN_E_TRUNCATED);
    /* the leading globals are still all there: locking them works (or, if
     * RLIMIT_MEMLOCK is tiny, says so) */
    rc = pagein_model_lock_layers(m, -1, -1);
    CHECK(rc == 0 || rc == PAGEIN_E_MEMLOCK);
    if (rc == 0) CHECK_OK(pagein_model_unlock_layers(m, -1, -1));
    /* the same through the per-file call */
    CHECK_EQ(pagein_file_lock(pagein_model_file(m, 0), 0, 0), PAGEIN_E_TRUNCATED);
    pagein_model_close(m);
    return PASS;
}
