/*
 * test_hostile.c - remote sources against hostile servers (the
 * rules in docs/SAFETY.md, "Remote sources"). White-box: includes
 * src/internal.h and src/source/remote.h. The servers are tools/hostile.py
 * instances on 127.0.0.1 and 127.0.0.2 (another host), started per test and
 * stopped at its end; the CLI side is tests/cli/hostile.test.sh.
 */
#include "../src/internal.h"
#include "../src/source/remote.h"
#include "test.h"

#include <stdlib.h>

/* The redaction every message goes through: userinfo and signature,
 * credential and token query parameters. */
TEST(redact_urls) {
    char out[512];
    CHECK_STR(pi_url_redact("https://user:pass@host:8443/a/b?x=1", out, sizeof out), "https://***@host:8443/a/b?x=1");
    CHECK_STR(pi_url_redact("http://tok@host/a", out, sizeof out), "http://***@host/a");
    CHECK_STR(pi_url_redact("https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F1"
                            "&X-Amz-Signature=abc&X-Amz-Security-Token=zzz&partNumber=2",
                            out, sizeof out),
              "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=REDACTED"
              "&X-Amz-Signature=REDACTED&X-Amz-Security-Token=REDACTED&partNumber=2");
    CHECK_STR(pi_url_redact("https://cdn/x?Expires=1&Signature=s1&Key-Pair-Id=k#frag", out, sizeof out),
              "https://cdn/x?Expires=1&Signature=REDACTED&Key-Pair-Id=REDACTED#frag");
    CHECK_STR(pi_url_redact("https://a.blob/x?sv=1&sig=s2&access_token=t&download=true", out, sizeof out),
              "https://a.blob/x?sv=1&sig=REDACTED&access_token=REDACTED&download=true");
    CHECK_STR(pi_url_redact("https://host/a@b/c?d", out, sizeof out), "https://host/a@b/c?d"); /* '@' in the path */
    CHECK_STR(pi_url_redact("s3://bucket/key", out, sizeof out), "s3://bucket/key");
    CHECK_STR(pi_url_redact("", out, sizeof out), "");
    /* truncation keeps the NUL */
    char small[8];
    CHECK_STR(pi_url_redact("https://user:pass@host/", small, sizeof small), "https:/");
    /* in text: every URL, nothing else */
    char t[400];
    snprintf(t, sizeof t, "hf://o/n: GET https://u:p@h/x?X-Amz-Signature=q (Range: bytes=0-9): HTTP 403, "
                          "redirected to http://h2/y?token=abc&a=b; key=value stays");
    CHECK_EQ(pi_redact_text(t, sizeof t), 1);
    CHECK_STR(t, "hf://o/n: GET https://***@h/x?X-Amz-Signature=REDACTED (Range: bytes=0-9): HTTP 403, "
                 "redirected to http://h2/y?token=REDACTED&a=b; key=value stays");
    snprintf(t, sizeof t, "no url here: user:pass@host");
    CHECK_EQ(pi_redact_text(t, sizeof t), 0);
    CHECK_STR(t, "no url here: user:pass@host");
    /* pi_err applies it */
    pi_err(PAGEIN_E_REMOTE, "GET %s: HTTP 403", "https://AKID:SECRET@h/k?X-Amz-Credential=AKID%2F2026");
    CHECK_STR(pagein_last_error_detail(), "GET https://***@h/k?X-Amz-Credential=REDACTED: HTTP 403");
    pi_err(PAGEIN_E_REMOTE, "HTTP 403");
    pi_err_prefix("https://x:y@h/f?sig=1");
    CHECK_STR(pagein_last_error_detail(), "https://***@h/f?sig=REDACTED: HTTP 403");
    pi_err_clear();
    return PASS;
}

/* Revisions are checked after percent-decoding, before they name anything
 * (refs/REV, snapshots/REV in the Hugging Face cache). */
TEST(hf_revision_checked) {
#ifndef PAGEIN_HAVE_CURL
    SKIP_BECAUSE("built without libcurl (Debian libcurl4-openssl-dev; mk/remote.mk)");
#else
    static const char *const ok[] = {"hf://o/n@main/x.bin", "hf://o/n@refs%2Fpr%2F1/x.bin",
                                     "hf://o/n@0123456789abcdef0123456789abcdef01234567/x.bin", "hf://o/n@v1.0-rc.2/x",
                                     "hf://datasets/o/n@my_branch"};
    static const char *const bad[] = {"hf://o/n@..%2F..%2F..%2Fx/f", "hf://o/n@%2E%2E/f", "hf://o/n@a%2F..%2Fb/f",
                                      "hf://o/n@%2Fabs/f", "hf://o/n@a%2F/f", "hf://o/n@a%2F%2Fb/f",
                                      "hf://o/n@x%00y/f", "hf://o/n@.hidden/f", "hf://o/n@a%2F.b/f",
                                      "hf://o/n@a..b/f", "hf://o/n@a%5Cb/f", "hf://o/n@a%0Ab/f", "hf://o/n@../f"};
    struct pi_hf_ref r;
    for (size_t i = 0; i < PI_ARRAY_LEN(ok); i++) {
        int rc = pi_hf_parse(ok[i], &r);
        if (rc != 0) printf("    %s: %s\n", ok[i], pagein_last_error_detail());
        CHECK_EQ(rc, 0);
        if (rc == 0) pi_hf_ref_free(&r);
    }
    for (size_t i = 0; i < PI_ARRAY_LEN(bad); i++) {
        int rc = pi_hf_parse(bad[i], &r);
        if (rc != PAGEIN_E_INVALID) printf("    %s: accepted\n", bad[i]);
        CHECK_EQ(rc, PAGEIN_E_INVALID);
        if (rc == 0) pi_hf_ref_free(&r);
        else CHECK(strstr(pagein_last_error_detail(), "revision") != NULL || strstr(bad[i], "@../") != NULL);
    }
#endif
    return PASS;
}
