/* test_json.c - WHITE-BOX test of the internal JSON pull reader
 * (src/core/json.c); includes src/internal.h. */
#include "test.h"

#include "../src/format/format.h"
#include "../src/io/io.h"

/* Walks a whole document with skip() only; returns the code. */
static int skip_all(const char *s) {
    struct pi_json j;
    pi_json_init(&j, s, strlen(s), 0);
    int rc = pi_json_skip(&j);
    if (rc == 0) rc = pi_json_finish(&j);
    pi_json_free(&j);
    return rc;
}

TEST(json_walk) {
    const char *doc = " {\"metadata\": {\"total_size\": 5338513408, \"f\": -1.5e3},"
                      " \"weight_map\": {\"a\\u00e9\": \"m-1.safetensors\", \"b\": \"m-2\"},"
                      " \"flags\": [true, false, null], \"big\": 18446744073709551615} ";
    struct pi_json j;
    pi_json_init(&j, doc, strlen(doc), 0);
    CHECK_EQ(pi_json_peek(&j), PI_JSON_OBJECT);
    CHECK_OK(pi_json_enter(&j, PI_JSON_OBJECT));
    const char *k, *s;
    size_t kl, sl;
    int n = 0, rc;
    while ((rc = pi_json_next(&j, &k, &kl)) > 0) {
        n++;
        if (kl == 8 && !memcmp(k, "metadata", 8)) {
            CHECK_OK(pi_json_enter(&j, PI_JSON_OBJECT));
            CHECK_EQ(pi_json_next(&j, &k, &kl), 1);
            uint64_t v = 0;
            CHECK_OK(pi_json_u64(&j, &v));
            CHECK(v == 5338513408ull);
            CHECK_EQ(pi_json_next(&j, &k, &kl), 1);
            CHECK_EQ(pi_json_u64(&j, &v), PAGEIN_E_BAD_TYPE); /* negative: nothing consumed */
            const char *num;
            size_t nl;
            CHECK_OK(pi_json_number(&j, &num, &nl));
            CHECK(nl == 6 && !memcmp(num, "-1.5e3", 6));
            CHECK_EQ(pi_json_next(&j, &k, &kl), 0);
        } else if (kl == 10 && !memcmp(k, "weight_map", 10)) {
            CHECK_OK(pi_json_enter(&j, PI_JSON_OBJECT));
            CHECK_EQ(pi_json_next(&j, &k, &kl), 1);
            CHECK(kl == 3 && !memcmp(k, "a\xc3\xa9", 3));
            CHECK_OK(pi_json_string(&j, &s, &sl));
            CHECK(sl == 15 && !memcmp(s, "m-1.safetensors", 15));
            CHECK_EQ(pi_json_next(&j, &k, &kl), 1);
            CHECK(kl == 1 && k[0] == 'b');
            /* the decoded key of the previous member is still valid */
            CHECK_OK(pi_json_skip(&j));
            CHECK_EQ(pi_json_next(&j, &k, &kl), 0);
        } else if (kl == 5 && !memcmp(k, "flags", 5)) {
            bool b = false;
            CHECK_OK(pi_json_enter(&j, PI_JSON_ARRAY));
            CHECK_EQ(pi_json_next(&j, NULL, NULL), 1);
            CHECK_OK(pi_json_bool(&j, &b));
            CHECK(b);
            CHECK_EQ(pi_json_next(&j, NULL, NULL), 1);
            CHECK_OK(pi_json_bool(&j, &b));
            CHECK(!b);
            CHECK_EQ(pi_json_next(&j, NULL, NULL), 1);
            CHECK_EQ(pi_json_bool(&j, &b), PAGEIN_E_BAD_TYPE);
            CHECK_OK(pi_json_null(&j));
            CHECK_EQ(pi_json_next(&j, NULL, NULL), 0);
        } else {
            uint64_t v = 0;
            CHECK_OK(pi_json_u64(&j, &v));
            CHECK(v == UINT64_MAX);
        }
    }
    CHECK_EQ(rc, 0);
    CHECK_EQ(n, 4);
    CHECK_OK(pi_json_finish(&j));
    pi_json_free(&j);
    return PASS;
}

TEST(json_syntax) {
    CHECK_OK(skip_all("[]"));
    CHECK_OK(skip_all("{\"a\":[1,{\"b\":[]},\"x\",0,-0,0.5,1e5,1E-5,true,false,null]}"));
    CHECK_OK(skip_all("\"\\ud83d\\ude00\""));
    CHECK_EQ(skip_all("[1,]"), PAGEIN_E_BAD_JSON);
    CHECK_EQ(skip_all("{\"a\":1,}"), PAGEIN_E_BAD_JSON);
    CHECK_EQ(skip_all("{\"a\" 1}"), PAGEIN_E_BAD_JSON);
    CHECK_EQ(skip_all("{1:1}"), PAGEIN_E_BAD_JSON);
    CHECK_EQ(skip_all("[01]"), PAGEIN_E_BAD_JSON);
    CHECK_EQ(skip_all("[1.]"), PAGEIN_E_BAD_JSON);
    CHECK_EQ(skip_all("[1e]"), PAGEIN_E_BAD_JSON);
    CHECK_EQ(skip_all("[-]"), PAGEIN_E_BAD_JSON);
    CHECK_EQ(skip_all("[tru]"), PAGEIN_E_BAD_JSON);
    CHECK_EQ(skip_all("[nul"), PAGEIN_E_BAD_JSON);
    CHECK_EQ(skip_all("[1 2]"), PAGEIN_E_BAD_JSON);
    CHECK_EQ(skip_all("\"abc"), PAGEIN_E_BAD_JSON);
    CHECK_EQ(skip_all("\"\\"), PAGEIN_E_BAD_JSON);
    CHECK_EQ(skip_all("\"\\u12\""), PAGEIN_E_BAD_JSON);
    CHECK_EQ(skip_all("\"\xff\""), PAGEIN_E_BAD_UTF8);
    CHECK_EQ(skip_all("1 1"), PAGEIN_E_BAD_JSON);
    CHECK_EQ(skip_all(""), PAGEIN_E_BAD_JSON);
    CHECK_EQ(skip_all("]"), PAGEIN_E_BAD_JSON);
    /* depth: exactly the limit is fine, one more is not */
    char deep[2 * PI_JSON_MAX_DEPTH + 3];
    for (int i = 0; i < PI_JSON_MAX_DEPTH; i++) deep[i] = '[', deep[2 * PI_JSON_MAX_DEPTH - 1 - i] = ']';
    deep[2 * PI_JSON_MAX_DEPTH] = 0;
    CHECK_OK(skip_all(deep));
    char deeper[2 * PI_JSON_MAX_DEPTH + 3];
    for (int i = 0; i <= PI_JSON_MAX_DEPTH; i++) deeper[i] = '[', deeper[2 * PI_JSON_MAX_DEPTH + 1 - i] = ']';
    deeper[2 * PI_JSON_MAX_DEPTH + 2] = 0;
    CHECK_EQ(skip_all(deeper), PAGEIN_E_LIMIT);
    return PASS;
}

TEST(json_u64_and_quote) {
    struct pi_json j;
    const char *s = "[18446744073709551616, 1.0, 7]";
    pi_json_init(&j, s, strlen(s), 0);
    uint64_t v;
    CHECK_OK(pi_json_enter(&j, PI_JSON_ARRAY));
    CHECK_EQ(pi_json_next(&j, NULL, NULL), 1);
    CHECK_EQ(pi_json_u64(&j, &v), PAGEIN_E_OVERFLOW);
    CHECK_OK(pi_json_skip(&j));
    CHECK_EQ(pi_json_next(&j, NULL, NULL), 1);
    CHECK_EQ(pi_json_u64(&j, &v), PAGEIN_E_BAD_TYPE);
    CHECK_OK(pi_json_skip(&j));
    CHECK_EQ(pi_json_next(&j, NULL, NULL), 1);
    CHECK_OK(pi_json_u64(&j, &v));
    CHECK_EQ(v, 7);
    CHECK_EQ(pi_json_next(&j, NULL, NULL), 0);
    CHECK_OK(pi_json_finish(&j));
    pi_json_free(&j);
    /* quoting matches serde_json and round-trips through the reader */
    const char raw[] = "a\"\\\n\x01\x7f\xc3\xa9/\0";
    size_t n = sizeof raw - 1;
    char out[64];
    size_t ql = pi_json_quoted_len(raw, n);
    char *e = pi_json_quote(out, raw, n);
    CHECK_EQ((size_t)(e - out), ql);
    const char want[] = "\"a\\\"\\\\\\n\\u0001\x7f\xc3\xa9/\\u0000\"";
    CHECK(ql == sizeof want - 1 && memcmp(out, want, ql) == 0);
    pi_json_init(&j, out, ql, 0);
    const char *d;
    size_t dl;
    CHECK_OK(pi_json_string(&j, &d, &dl));
    CHECK(dl == n && memcmp(d, raw, n) == 0);
    pi_json_free(&j);
    /* utf8 */
    CHECK(pi_utf8_valid((const uint8_t *)"plain ascii text, long enough", 29, NULL));
    size_t bad = 0;
    CHECK(!pi_utf8_valid((const uint8_t *)"abcdefgh\xe0\x80\x80", 11, &bad));
    CHECK_EQ(bad, 8);
    return PASS;
}
