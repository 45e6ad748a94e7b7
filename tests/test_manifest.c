/* test_manifest.c - the integrity manifest format: round trip of odd names,
 * the parser's checks. White-box (src/internal.h) for the formatter. */
#include "test.h"
#include "../src/format/format.h"
#include "../src/io/io.h"

#include <stdlib.h>

static const uint8_t H1[16] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0, 1, 2, 3, 4, 5, 6, 0xff};

TEST(manifest_round_trip) {
    struct pi_manifest m, back;
    pi_manifest_init(&m);
    pi_manifest_init(&back);
    CHECK_OK(pi_manifest_add_file(&m, "model-00001-of-00002.safetensors", 32, 1000, 100, H1));
    CHECK_OK(pi_manifest_add_file(&m, "caf\xc3\xa9 %.bin", 11, 50, 8, H1));
    static const char odd[] = "a b\n%c\0" "d\x7f\xe2\x82\xac";
    CHECK_OK(pi_manifest_add_tensor(&m, 0, "model.embed_tokens.weight", 25, 100, 400, H1));
    CHECK_OK(pi_manifest_add_tensor(&m, 0, odd, sizeof odd - 1, 500, 500, H1));
    CHECK_OK(pi_manifest_add_tensor(&m, 1, "", 0, 8, 0, H1));
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(pi_manifest_format(&m, &text, &len));
    CHECK(text && strstr(text, "tensor 0 500 500 0123456789abcdef00010203040506ff a%20b%0A%25c%00d%7F\xe2\x82\xac" "\n"));
    CHECK(text && strstr(text, "file 1 50 8 0123456789abcdef00010203040506ff caf\xc3\xa9" "%20%25.bin\n"));
    CHECK(text && strstr(text, "end 2 3\n"));
    CHECK_OK(pi_manifest_parse((const uint8_t *)text, len, &back));
    CHECK_EQ(back.nfiles, 2);
    CHECK_EQ(back.n, 3);
    const struct pi_manifest_tensor *t = pi_manifest_find(&back, 0, odd, sizeof odd - 1);
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ(t->offset, 500);
        CHECK(memcmp(t->hash, H1, 16) == 0);
    }
    CHECK(pi_manifest_find(&back, 1, "", 0) != NULL);
    CHECK(pi_manifest_find(&back, 1, "model.embed_tokens.weight", 25) == NULL);
    CHECK_STR(back.files[1].name, "caf\xc3\xa9 %.bin");
    {
        size_t nt = 0;
        CHECK_EQ(pagein_manifest_validate(text, len, &nt), 0);
        CHECK_EQ(nt, 3);
    }
    free(text);
    pi_manifest_free(&m);
    pi_manifest_free(&back);
    return PASS;
}
