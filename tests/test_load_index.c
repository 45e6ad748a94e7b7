/* test_load_index.c - the sharded index parser. White-box: includes
 * src/load/load.h. */
#include "test.h"

#include "../src/load/load.h"

static int parse(const char *s, struct pi_index *ix) {
    pi_index_init(ix);
    return pi_index_parse((const uint8_t *)s, strlen(s), ix);
}

TEST(load_index_parse) {
    struct pi_index ix;
    CHECK_OK(parse("{\"metadata\": {\"total_size\": 96, \"x\": [1, {\"y\": null}]},"
                   " \"weight_map\": {\"b\": \"m-00002-of-00002.safetensors\","
                   " \"a\": \"m-00001-of-00002.safetensors\", \"c\\u00e9\": \"m-00001-of-00002.safetensors\"},"
                   " \"other\": 1.5e3}",
                   &ix));
    CHECK_EQ(ix.nshards, 2);
    CHECK_STR(ix.shards[0], "m-00001-of-00002.safetensors");
    CHECK_STR(ix.shards[1], "m-00002-of-00002.safetensors");
    CHECK_EQ(ix.n, 3);
    CHECK_STR(ix.e[0].name, "b");
    CHECK_EQ(ix.e[0].shard, 1);
    CHECK_EQ(ix.e[1].shard, 0);
    CHECK_STR(ix.e[2].name, "c\xc3\xa9");
    CHECK_EQ(ix.e[2].name_len, 3);
    CHECK_EQ(ix.has_total_size, 1);
    CHECK_EQ(ix.total_size, 96);
    pi_index_free(&ix);

    /* a name with an escaped NUL keeps its length */
    CHECK_OK(parse("{\"weight_map\": {\"a\\u0000b\": \"s.safetensors\"}}", &ix));
    CHECK_EQ(ix.e[0].name_len, 3);
    pi_index_free(&ix);

    static const struct {
        const char *in;
        int rc;
    } bad[] = {
        {"", PAGEIN_E_BAD_JSON},
        {"[]", PAGEIN_E_BAD_JSON},
        {"{\"metadata\": {}}", PAGEIN_E_BAD_INDEX},
        {"{\"weight_map\": {\"a\": 5}}", PAGEIN_E_BAD_INDEX},
        {"{\"weight_map\": {\"a\": \"../x.safetensors\"}}", PAGEIN_E_BAD_INDEX},
        {"{\"weight_map\": {\"a\": \"/etc/passwd\"}}", PAGEIN_E_BAD_INDEX},
        {"{\"weight_map\": {\"a\": \"..\"}}", PAGEIN_E_BAD_INDEX},
        {"{\"weight_map\": {\"a\": \"\"}}", PAGEIN_E_BAD_INDEX},
        {"{\"weight_map\": {\"a\": \"x\\u0000y\"}}", PAGEIN_E_BAD_INDEX},
        {"{\"weight_map\": {\"a\": \"x\", \"a\": \"y\"}}", PAGEIN_E_DUPLICATE},
        {"{\"weight_map\": {}, \"weight_map\": {}}", PAGEIN_E_DUPLICATE},
        {"{\"weight_map\": {\"a\": \"x\"}} x", PAGEIN_E_BAD_JSON},
        {"{\"weight_map\": {\"a\": \"x\"}", PAGEIN_E_BAD_JSON},
        {"{\"weight_map\": {\"a\": \"\\ud800\"}}", PAGEIN_E_BAD_JSON}, /* lone surrogate */
        {"{\"weight_map\": {\"a\": \"\xff\"}}", PAGEIN_E_BAD_UTF8},
        {"{\"weight_map\": {\"a\": \"\xc0\x80\"}}", PAGEIN_E_BAD_UTF8},
        {"{\"weight_map\": {\"a\": \"x\ty\"}}", PAGEIN_E_BAD_JSON},
        {"{\"weight_map\": {\"a\": \"\\x\"}}", PAGEIN_E_BAD_JSON},
        {"{\"x\": 01, \"weight_map\": {}}", PAGEIN_E_BAD_JSON},
        {"{\"x\": tru, \"weight_map\": {}}", PAGEIN_E_BAD_JSON},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(bad[i].in, &ix);
        if (rc != bad[i].rc) printf("    input %zu: got %d (%s)\n", i, rc, pagein_last_error_detail());
        CHECK_EQ(rc, bad[i].rc);
        pi_index_free(&ix);
    }
    /* nesting limit */
    char deep[400];
    strcpy(deep, "{\"x\": ");
    for (int i = 0; i < 100; i++) strcat(deep, "[");
    CHECK_EQ(parse(deep, &ix), PAGEIN_E_LIMIT);
    pi_index_free(&ix);
    return PASS;
}
