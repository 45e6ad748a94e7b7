/*
 * test_digest.c - core/digest.c: sha256 and MD5 over libcrypto loaded on
 * the first digest (FIPS 180-2's and RFC 1321's test vectors), in pieces
 * and at once, and the refusals.
 */
#include "test.h"

#include "../src/core/digest.h"

#include <stdlib.h>

TEST(digest_vectors_sha256_md5) {
#ifndef PAGEIN_HAVE_LIBCRYPTO
    SKIP_BECAUSE("built without libcrypto (libssl-dev; mk/remote.mk)");
#else
    char hex[PI_DIGEST_HEX_CAP];
    CHECK_OK(pi_digest_buf("sha256", "abc", 3, hex, "abc"));
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK_OK(pi_digest_buf("md5", "abc", 3, hex, "abc"));
    CHECK_STR(hex, "900150983cd24fb0d6963f7d28e17f72");
    CHECK_OK(pi_digest_buf("sha256", "", 0, hex, "empty"));
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    /* a million 'a's in uneven pieces */
    struct pi_digest *d = NULL;
    CHECK_OK(pi_digest_new(&d, "sha256", "million"));
    char a[1000];
    memset(a, 'a', sizeof a);
    for (size_t done = 0, k = 1; done < 1000000; done += k, k = k % 997 + 1) {
        if (k > 1000000 - done) k = 1000000 - done;
        pi_digest_update(d, a, k);
    }
    CHECK_OK(pi_digest_final(d, hex));
    pi_digest_free(d);
    CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* not a digest pagein computes: refused, naming it */
    d = NULL;
    CHECK_EQ(pi_digest_new(&d, "sha1", "x.bin"), PAGEIN_E_UNSUPPORTED);
    CHECK(d == NULL);
    CHECK(strstr(pagein_last_error_detail(), "sha1") && strstr(pagein_last_error_detail(), "x.bin"));
    pi_digest_free(NULL);
    return PASS;
#endif
}
