/* test_malformed.c - a catalogue of malformed inputs, one per way a file can
 * be wrong, each built in memory and asserted to fail with one exact code.
 * docs/MALFORMED.md is generated from this table:
 *
 *     PAGEIN_MALFORMED_MD=docs/MALFORMED.md build/tests/run malformed_inputs
 *
 * and the test fails when the committed table is stale, so every row of the
 * document is backed by an assertion. Public API only. */
#include "test.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>

struct mcase {
    const char *format;
    char what[160];
    int code;
    int got;
};

static struct mcase cases[256];
static size_t ncases;

/* Runs one case: parses buf as format and records the result. */
static void expect(const char *format, int code, const void *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void expect(const char *format, int code, const void *buf, size_t len, const char *fmt, ...) {
    if (ncases == sizeof cases / sizeof cases[0]) {
        printf("    too many cases\n");
        pt_failed = 1;
        return;
    }
    struct mcase *c = &cases[ncases++];
    c->format = format;
    c->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->what, sizeof c->what, fmt, ap);
    va_end(ap);
    /* exact-size heap copy so sanitizers see reads past the end */
    void *copy = malloc(len ? len : 1);
    if (len) memcpy(copy, buf, len);
    if (strcmp(format, "manifest") == 0) {
        long r = pagein_manifest_validate(copy, len);
        c->got = r < 0 ? (int)r : 0;
    } else {
        pagein_open_opts o = PAGEIN_OPEN_OPTS_INIT;
        if (strcmp(format, "safetensors") == 0) o.format = PAGEIN_FORMAT_SAFETENSORS;
        else if (strcmp(format, "gguf") == 0) o.format = PAGEIN_FORMAT_GGUF;
        pagein_file *f = NULL;
        c->got = pagein_open_memory(&f, copy, len, "case", &o);
        pagein_close(f);
    }
    free(copy);
    if (c->got != code) {
        printf("    %s: %s: got %d (%s), expected %d (%s): %s\n", format, c->what, c->got,
               pagein_strerror(c->got), code, pagein_strerror(code), pagein_last_error_detail());
        pt_failed = 1;
    }
}

static void expect_str(const char *format, int code, const char *text, const char *what) {
    expect(format, code, text, strlen(text), "%s", what);
}

/* ---- manifests ------------------------------------------------------------ */

#define HX "0123456789abcdef0123456789abcdef"
#define HEAD "pagein-manifest 1\nhash xxh3-128\n"
#define F0 "file 0 1000 100 " HX " m.safetensors\n"

static void manifest_cases(void) {
    const char *M = "manifest";
    expect_str(M, PAGEIN_E_BAD_MAGIC, "", "empty input");
    expect_str(M, PAGEIN_E_BAD_MAGIC, "{\"not\": \"a manifest\"}\n", "wrong first line (JSON)");
    expect_str(M, PAGEIN_E_BAD_VERSION, "pagein-manifest 2\n", "unknown version");
    expect_str(M, PAGEIN_E_UNSUPPORTED, "pagein-manifest 1\nhash sha256\n", "unknown hash algorithm");
    expect_str(M, PAGEIN_E_TRUNCATED, HEAD F0, "no 'end' line (truncated)");
    expect_str(M, PAGEIN_E_TRUNCATED, HEAD F0 "end 1 0", "last line without newline");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD "end 0 0\n", "no file record");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD "file 1 1000 100 " HX " m\nend 1 0\n", "file index out of order");
    expect_str(M, PAGEIN_E_DUPLICATE, HEAD F0 "file 0 1000 100 " HX " n\nend 2 0\n", "duplicate file index");
    expect_str(M, PAGEIN_E_BAD_OFFSET, HEAD "file 0 10 100 " HX " m\nend 1 0\n", "header longer than the file");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD "file 0 1000 100 " HX " ../etc/passwd\nend 1 0\n",
               "file name with a path ('../')");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD "file 0 1000 100 " HX " .\nend 1 0\n", "file name '.'");
    expect_str(M, PAGEIN_E_BAD_OFFSET, HEAD F0 "tensor 0 900 200 " HX " w\nend 1 1\n", "tensor past the end of its file");
    expect_str(M, PAGEIN_E_BAD_OFFSET, HEAD F0 "tensor 0 50 10 " HX " w\nend 1 1\n", "tensor inside the header");
    expect_str(M, PAGEIN_E_OVERFLOW, HEAD F0 "tensor 0 18446744073709551615 1 " HX " w\nend 1 1\n",
               "offset + size overflows 64 bits");
    expect_str(M, PAGEIN_E_OVERFLOW, HEAD "file 0 18446744073709551616 0 " HX " m\nend 1 0\n",
               "number above 2^64-1");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD "file 0 01000 100 " HX " m\nend 1 0\n", "number with a leading zero");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD "file 0 -1 0 " HX " m\nend 1 0\n", "negative number");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD "file 0 1000 100 0123456789ABCDEF0123456789ABCDEF m\nend 1 0\n",
               "hash in uppercase");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD "file 0 1000 100 0123 m\nend 1 0\n", "hash too short");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD F0 "tensor 0 100 4 " HX " w%G1\nend 1 1\n", "bad %-escape in a name");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD F0 "tensor 0 100 4 " HX " w%4\nend 1 1\n", "%-escape cut short");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD F0 "tensor 0 100 4 " HX " w\tx\nend 1 1\n", "raw control byte in a name");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD F0 "tensor 0 100 4 " HX " w x\nend 1 1\n", "extra field (raw space in a name)");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD F0 "tensor 0 100 " HX " w\nend 1 1\n", "missing field");
    expect_str(M, PAGEIN_E_DUPLICATE, HEAD F0 "tensor 0 100 4 " HX " w\ntensor 0 104 4 " HX " w\nend 1 2\n",
               "duplicate tensor name in one file");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD F0 "tensor 1 100 4 " HX " w\nend 1 1\n", "tensor names an undeclared file");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD F0 "tensor 0 100 4 " HX " w\n" "file 1 10 0 " HX " n\nend 2 1\n",
               "file record after a tensor record");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD F0 "end 1 5\n", "end line counts disagree");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD F0 "end 1 0\nfile 1 10 0 " HX " n\n", "records after the end line");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD F0 "blob 0 1 2\nend 1 0\n", "unknown record type");
    expect_str(M, PAGEIN_E_BAD_MANIFEST, HEAD F0 "\nend 1 0\n", "empty line");
    /* a 70,000-byte name: over the 65,536-byte limit */
    size_t big = 70000, hl = strlen(HEAD F0 "tensor 0 100 4 " HX " ");
    char *b = malloc(hl + big + 32);
    memcpy(b, HEAD F0 "tensor 0 100 4 " HX " ", hl);
    memset(b + hl, 'n', big);
    memcpy(b + hl + big, "\nend 1 1\n", 10);
    expect(M, PAGEIN_E_LIMIT, b, strlen(b), "name longer than 65,536 bytes");
    free(b);
}

/* The enum constant's name, for the table. */
static const char *err_name(int code) {
    static const char *const names[] = {
        "PAGEIN_E_TRUNCATED",
        "PAGEIN_E_BAD_MAGIC",
        "PAGEIN_E_HEADER_TOO_SMALL",
        "PAGEIN_E_HEADER_TOO_LARGE",
        "PAGEIN_E_HEADER_LENGTH",
        "PAGEIN_E_BAD_UTF8",
        "PAGEIN_E_BAD_JSON",
        "PAGEIN_E_BAD_DTYPE",
        "PAGEIN_E_BAD_OFFSET",
        "PAGEIN_E_OVERFLOW",
        "PAGEIN_E_BAD_TENSOR_INFO",
        "PAGEIN_E_MISALIGNED_SLICE",
        "PAGEIN_E_INCOMPLETE",
        "PAGEIN_E_DUPLICATE",
        "PAGEIN_E_LIMIT",
        "PAGEIN_E_NOT_FOUND",
        "PAGEIN_E_BAD_VERSION",
        "PAGEIN_E_BAD_ALIGNMENT",
        "PAGEIN_E_ENDIAN",
        "PAGEIN_E_BAD_TYPE",
        "PAGEIN_E_UNSUPPORTED",
        "PAGEIN_E_CHANGED",
        "PAGEIN_E_BAD_INDEX",
        "PAGEIN_E_UNSAFE",
        "PAGEIN_E_BAD_ZIP",
        "PAGEIN_E_BAD_PICKLE",
        "PAGEIN_E_BAD_MANIFEST",
        "PAGEIN_E_HASH_MISMATCH",
        "PAGEIN_E_MEMLOCK",
        "PAGEIN_E_BAD_DATASET",
        "PAGEIN_E_RANGE",
        "PAGEIN_E_INVALID",
        "PAGEIN_E_CANCELLED",
    };
    int i = PAGEIN_E_BASE - code;
    if (code == 0) return "0";
    if (code == -ENOMEM) return "-ENOMEM";
    if (i >= 0 && i < (int)(sizeof names / sizeof names[0])) return names[i];
    return "?";
}

/* ---- the table ------------------------------------------------------------ */

static char *render(void) {
    size_t cap = 1 << 16, n = 0;
    char *out = malloc(cap);
    n += (size_t)snprintf(out + n, cap - n,
        "# Malformed inputs and the errors they produce\n\n"
        "Generated by `tests/test_malformed.c`; every row is an assertion of the unit\n"
        "suite (`build/tests/run malformed_inputs` fails if this file is stale).\n"
        "Regenerate with\n\n"
        "    PAGEIN_MALFORMED_MD=docs/MALFORMED.md build/tests/run malformed_inputs\n\n"
        "Each input is built in memory and parsed from an exact-size buffer (so the\n"
        "sanitizer builds catch any read past its end); none of them allocates\n"
        "memory in proportion to a size it declares.\n\n"
        "| # | format | input | error |\n|---|---|---|---|\n");
    for (size_t i = 0; i < ncases; i++) {
        if (cap - n < 512) {
            cap *= 2;
            out = realloc(out, cap);
        }
        n += (size_t)snprintf(out + n, cap - n, "| %zu | %s | %s | `%s` (%d) |\n", i + 1, cases[i].format,
                              cases[i].what, err_name(cases[i].code), cases[i].code);
    }
    return out;
}

TEST(malformed_inputs) {
    ncases = 0;
    manifest_cases();
    printf("    %zu malformed inputs checked\n", ncases);
    char *md = render();
    const char *gen = getenv("PAGEIN_MALFORMED_MD");
    if (gen) {
        CHECK_EQ(pt_write_file(gen, md, strlen(md)), 0);
    } else {
        size_t len = 0;
        char *have = pt_read_file("docs/MALFORMED.md", &len);
        if (!have || len != strlen(md) || memcmp(have, md, len) != 0) {
            printf("    docs/MALFORMED.md is missing or stale: regenerate with\n"
                   "    PAGEIN_MALFORMED_MD=docs/MALFORMED.md build/tests/run malformed_inputs\n");
            pt_failed = 1;
        }
        free(have);
    }
    free(md);
    return PASS;
}
