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
    if (strcmp(format, "index") == 0) {
        /* a sharded index next to two valid shards (see index_cases) */
        const char *ip = pt_tmppath("mal.safetensors.index.json");
        pagein_model *m = NULL;
        c->got = pt_write_file(ip, copy, len) == 0 ? pagein_model_open(&m, ip, NULL) : -EIO;
        pagein_model_close(m);
    } else if (strcmp(format, "manifest") == 0) {
        c->got = pagein_manifest_validate(copy, len, NULL);
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

/* ---- safetensors ---------------------------------------------------------- */

/* 8-byte little-endian header length N, N bytes of header, data_len zero
 * bytes of data. n_override replaces N when not ~0. */
static void st_case(int code, const char *hdr, size_t hdr_len, size_t data_len, uint64_t n_override,
                    const char *what) {
    size_t len = 8 + hdr_len + data_len;
    uint8_t *b = calloc(1, len);
    uint64_t n = n_override != ~0ull ? n_override : hdr_len;
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(n >> (8 * i));
    memcpy(b + 8, hdr, hdr_len);
    expect("safetensors", code, b, len, "%s", what);
    free(b);
}

static void st_json(int code, const char *hdr, size_t data_len, const char *what) {
    st_case(code, hdr, strlen(hdr), data_len, ~0ull, what);
}

static void safetensors_cases(void) {
    const char *S = "safetensors";
    expect(S, PAGEIN_E_HEADER_TOO_SMALL, "", 0, "empty file");
    expect(S, PAGEIN_E_HEADER_TOO_SMALL, "\x02\0\0\0\0\0\0", 7, "7 bytes: header length cut short");
    st_case(PAGEIN_E_HEADER_TOO_LARGE, "{}", 2, 0, 100000001, "header length 100,000,001 (over the limit)");
    st_case(PAGEIN_E_HEADER_TOO_LARGE, "{}", 2, 0, 1ull << 63, "header length 2^63 (must not be allocated)");
    st_case(PAGEIN_E_HEADER_LENGTH, "{}", 2, 0, 100, "header length past the end of the file");
    st_json(PAGEIN_E_BAD_UTF8, "{\"a\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
            "invalid UTF-8 byte 0xFF in a name");
    st_json(PAGEIN_E_BAD_UTF8, "{\"a\xc0\xaf\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
            "overlong UTF-8 encoding");
    st_json(PAGEIN_E_BAD_UTF8, "{\"a\xed\xa0\x80\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
            "UTF-8-encoded surrogate");
    st_json(PAGEIN_E_BAD_UTF8, "{\"a\xe2\x82\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
            "UTF-8 sequence cut short");
    st_json(PAGEIN_E_BAD_JSON, "hello", 0, "header is not JSON");
    st_json(PAGEIN_E_BAD_JSON, "[1,2]", 0, "header is a JSON array");
    st_json(PAGEIN_E_BAD_JSON, "{\"a\":", 0, "header JSON cut short");
    st_json(PAGEIN_E_BAD_JSON, "", 0, "header length 0");
    st_json(PAGEIN_E_BAD_JSON, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}} x", 1,
            "text after the JSON object");
    st_json(PAGEIN_E_BAD_JSON, "{\"a\tb\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
            "raw control character in a string");
    st_json(PAGEIN_E_BAD_JSON, "{\"a\\x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
            "invalid escape \\x in a string");
    st_json(PAGEIN_E_BAD_DTYPE, "{\"a\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,16]}}", 16,
            "unknown dtype F128");
    st_json(PAGEIN_E_BAD_DTYPE, "{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
            "dtype in lowercase");
    st_json(PAGEIN_E_BAD_DTYPE, "{\"a\":{\"dtype\":\"Q8_0\",\"shape\":[32],\"data_offsets\":[0,34]}}", 34,
            "GGUF-only dtype in safetensors");
    st_json(PAGEIN_E_BAD_JSON, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, "missing data_offsets");
    st_json(PAGEIN_E_BAD_JSON, "{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1, "missing shape");
    st_json(PAGEIN_E_BAD_JSON, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 2,
            "data_offsets with 3 elements");
    st_json(PAGEIN_E_BAD_JSON, "{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1,
            "negative dimension");
    st_json(PAGEIN_E_BAD_JSON, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}}", 1,
            "fractional dimension");
    st_json(PAGEIN_E_BAD_JSON, "{\"a\":7}", 0, "tensor entry is not an object");
    st_json(PAGEIN_E_BAD_OFFSET, "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}", 8,
            "first tensor does not start at 0 (gap)");
    st_json(PAGEIN_E_BAD_OFFSET,
            "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
            "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}", 6, "overlapping tensors");
    st_json(PAGEIN_E_BAD_OFFSET, "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4,
            "data_offsets end before begin");
    st_json(PAGEIN_E_INCOMPLETE, "{\"a\":{\"dtype\":\"U8\",\"shape\":[64],\"data_offsets\":[0,64]}}", 8,
            "tensor past the end of the file");
    st_json(PAGEIN_E_INCOMPLETE, "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 6,
            "trailing bytes after the data (strict mode)");
    st_json(PAGEIN_E_OVERFLOW,
            "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,4]}}", 4,
            "element count overflows 64 bits");
    st_json(PAGEIN_E_BAD_TENSOR_INFO,
            "{\"a\":{\"dtype\":\"F32\",\"shape\":[1000000000000000],\"data_offsets\":[0,4]}}", 4,
            "huge shape over 4 bytes of data (must not be allocated)");
    st_json(PAGEIN_E_BAD_TENSOR_INFO, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
            "byte length disagrees with dtype and shape");
    st_json(PAGEIN_E_MISALIGNED_SLICE, "{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2,
            "F4 tensor of an odd element count (half a byte)");
    st_json(PAGEIN_E_DUPLICATE,
            "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
            "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2, "duplicate tensor name");
    st_json(PAGEIN_E_DUPLICATE, "{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
            "duplicate field in a tensor entry");
    st_json(PAGEIN_E_DUPLICATE, "{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate __metadata__");
    st_json(PAGEIN_E_BAD_JSON, "{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ value not a string");
    {
        /* 1025 dimensions of 1 */
        char *h = malloc(8000);
        size_t n = (size_t)sprintf(h, "{\"a\":{\"dtype\":\"U8\",\"shape\":[");
        for (int i = 0; i < 1025; i++) n += (size_t)sprintf(h + n, i ? ",1" : "1");
        sprintf(h + n, "],\"data_offsets\":[0,1]}}");
        st_json(PAGEIN_E_LIMIT, h, 1, "1025 dimensions");
        free(h);
    }
    {
        /* 100,000 nested arrays */
        size_t depth = 100000;
        char *h = malloc(2 * depth + 128);
        size_t n = (size_t)sprintf(h, "{\"__metadata__\":null,\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"y\":");
        memset(h + n, '[', depth);
        memset(h + n + depth, ']', depth);
        strcpy(h + n + 2 * depth, "}}");
        st_json(PAGEIN_E_LIMIT, h, 0, "JSON nested 100,000 deep");
        free(h);
    }
}

/* ---- GGUF ------------------------------------------------------------------- */

/* A little-endian GGUF image under construction. */
struct gb {
    uint8_t b[4096];
    size_t n;
};

static void gb_u32(struct gb *g, uint32_t v) {
    for (int i = 0; i < 4; i++) g->b[g->n++] = (uint8_t)(v >> (8 * i));
}
static void gb_u64(struct gb *g, uint64_t v) {
    for (int i = 0; i < 8; i++) g->b[g->n++] = (uint8_t)(v >> (8 * i));
}
static void gb_bytes(struct gb *g, const void *p, size_t n) {
    memcpy(g->b + g->n, p, n);
    g->n += n;
}
static void gb_str(struct gb *g, const char *s) {
    gb_u64(g, strlen(s));
    gb_bytes(g, s, strlen(s));
}
/* header: magic, version, tensor count, metadata count */
static void gb_head(struct gb *g, uint32_t version, uint64_t nt, uint64_t nkv) {
    g->n = 0;
    gb_bytes(g, "GGUF", 4);
    gb_u32(g, version);
    gb_u64(g, nt);
    gb_u64(g, nkv);
}
/* key, u32 type, u32 value */
static void gb_kv_u32(struct gb *g, const char *key, uint32_t v) {
    gb_str(g, key);
    gb_u32(g, 4);
    gb_u32(g, v);
}
/* tensor info: name, dims (ne[0] first), ggml type, offset */
static void gb_tinfo(struct gb *g, const char *name, uint32_t nd, const uint64_t *ne, uint32_t type, uint64_t off) {
    gb_str(g, name);
    gb_u32(g, nd);
    for (uint32_t d = 0; d < nd; d++) gb_u64(g, ne[d]);
    gb_u32(g, type);
    gb_u64(g, off);
}
/* pads to 32 and appends n zero bytes of data */
static void gb_data(struct gb *g, size_t n) {
    while (g->n % 32) g->b[g->n++] = 0;
    memset(g->b + g->n, 0, n);
    g->n += n;
}

static void gguf_cases(void) {
    const char *G = "gguf";
    struct gb g;
    uint64_t ne4[1] = {4}, ne33[1] = {33};
    expect(G, PAGEIN_E_TRUNCATED, "GGU", 3, "3 bytes: magic cut short");
    gb_head(&g, 3, 0, 0);
    memcpy(g.b, "GGUX", 4);
    expect(G, PAGEIN_E_BAD_MAGIC, g.b, g.n, "wrong magic");
    gb_head(&g, 3, 0, 0);
    expect(G, PAGEIN_E_TRUNCATED, g.b, 6, "version cut short");
    expect(G, PAGEIN_E_TRUNCATED, g.b, 12, "tensor count cut short");
    gb_head(&g, 4, 0, 0);
    expect(G, PAGEIN_E_BAD_VERSION, g.b, g.n, "version 4");
    gb_head(&g, 0, 0, 0);
    expect(G, PAGEIN_E_BAD_VERSION, g.b, g.n, "version 0");
    gb_head(&g, 3, 0, 1ull << 60);
    expect(G, PAGEIN_E_TRUNCATED, g.b, g.n, "metadata count 2^60 (must not be allocated)");
    gb_head(&g, 3, 1ull << 60, 0);
    expect(G, PAGEIN_E_TRUNCATED, g.b, g.n, "tensor count 2^60 (must not be allocated)");
    gb_head(&g, 3, 0, 1);
    gb_u64(&g, 1ull << 40);
    gb_bytes(&g, "key....xxxxxxxxxx", 17);
    expect(G, PAGEIN_E_LIMIT, g.b, g.n, "key length 2^40 (over the 1 GiB string limit)");
    gb_head(&g, 3, 0, 1);
    gb_u64(&g, 100);
    gb_bytes(&g, "key..xxxxxxxx", 13);
    expect(G, PAGEIN_E_TRUNCATED, g.b, g.n, "key length past the end of the file");
    gb_head(&g, 3, 0, 1);
    gb_kv_u32(&g, "", 1);
    expect(G, PAGEIN_E_LIMIT, g.b, g.n, "empty metadata key");
    gb_head(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, 13);
    gb_u32(&g, 0);
    expect(G, PAGEIN_E_BAD_TYPE, g.b, g.n, "unknown metadata value type 13");
    gb_head(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, 8);
    gb_u64(&g, 50);
    gb_bytes(&g, "short", 5);
    expect(G, PAGEIN_E_TRUNCATED, g.b, g.n, "string value cut short");
    gb_head(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, 9);
    gb_u32(&g, 0);
    gb_u64(&g, 1ull << 31);
    gb_bytes(&g, "xxxxxxxxxxxxxxxx", 16);
    expect(G, PAGEIN_E_LIMIT, g.b, g.n, "array of 2^31 elements (over the 2^30 limit)");
    gb_head(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, 9);
    gb_u32(&g, 77);
    gb_u64(&g, 1);
    gb_u32(&g, 0);
    expect(G, PAGEIN_E_BAD_TYPE, g.b, g.n, "array of an unknown element type");
    gb_head(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, 9);
    for (int d = 0; d < 12; d++) {
        gb_u32(&g, 9);
        gb_u64(&g, 1);
    }
    gb_u32(&g, 4);
    gb_u64(&g, 1);
    gb_u32(&g, 0);
    expect(G, PAGEIN_E_LIMIT, g.b, g.n, "arrays nested 12 deep");
    gb_head(&g, 3, 0, 1);
    gb_kv_u32(&g, "general.alignment", 0);
    expect(G, PAGEIN_E_BAD_ALIGNMENT, g.b, g.n, "general.alignment 0");
    gb_head(&g, 3, 0, 1);
    gb_kv_u32(&g, "general.alignment", 48);
    expect(G, PAGEIN_E_BAD_ALIGNMENT, g.b, g.n, "general.alignment 48 (not a power of two)");
    gb_head(&g, 3, 0, 1);
    gb_str(&g, "general.alignment");
    gb_u32(&g, 10);
    gb_u64(&g, 32);
    expect(G, PAGEIN_E_BAD_ALIGNMENT, g.b, g.n, "general.alignment stored as u64");
    gb_head(&g, 3, 0, 2);
    gb_kv_u32(&g, "general.alignment", 32);
    gb_kv_u32(&g, "general.alignment", 64);
    expect(G, PAGEIN_E_DUPLICATE, g.b, g.n, "general.alignment twice");
    gb_head(&g, 3, 0, 2);
    gb_kv_u32(&g, "a.b", 1);
    gb_kv_u32(&g, "a.b", 2);
    expect(G, PAGEIN_E_DUPLICATE, g.b, g.n, "duplicate metadata key");
    gb_head(&g, 3, 1, 0);
    gb_tinfo(&g, "a_tensor_name_of_exactly_sixty_four_bytes_which_ggml_cannot_hold", 1, ne4, 0, 0);
    gb_data(&g, 16);
    expect(G, PAGEIN_E_LIMIT, g.b, g.n, "tensor name of 64 bytes (GGML_MAX_NAME)");
    {
        uint64_t ne5[5] = {1, 1, 1, 1, 4};
        gb_head(&g, 3, 1, 0);
        gb_tinfo(&g, "t", 5, ne5, 0, 0);
        gb_data(&g, 16);
        expect(G, PAGEIN_E_LIMIT, g.b, g.n, "5 dimensions (GGML_MAX_DIMS is 4)");
        uint64_t neg[2] = {4, (uint64_t)-2};
        gb_head(&g, 3, 1, 0);
        gb_tinfo(&g, "t", 2, neg, 0, 0);
        gb_data(&g, 16);
        expect(G, PAGEIN_E_BAD_TENSOR_INFO, g.b, g.n, "negative dimension");
        uint64_t big[2] = {1ull << 40, 1ull << 40};
        gb_head(&g, 3, 1, 0);
        gb_tinfo(&g, "t", 2, big, 0, 0);
        gb_data(&g, 16);
        expect(G, PAGEIN_E_OVERFLOW, g.b, g.n, "element count overflows int64");
    }
    gb_head(&g, 3, 1, 0);
    gb_tinfo(&g, "t", 1, ne4, 4, 0);
    gb_data(&g, 16);
    expect(G, PAGEIN_E_BAD_DTYPE, g.b, g.n, "removed ggml type 4 (Q4_2)");
    gb_head(&g, 3, 1, 0);
    gb_tinfo(&g, "t", 1, ne4, 99, 0);
    gb_data(&g, 16);
    expect(G, PAGEIN_E_BAD_DTYPE, g.b, g.n, "unknown ggml type 99");
    gb_head(&g, 3, 1, 0);
    gb_tinfo(&g, "t", 1, ne33, 8, 0);
    gb_data(&g, 64);
    expect(G, PAGEIN_E_BAD_TENSOR_INFO, g.b, g.n, "Q8_0 tensor of 33 elements (not whole blocks)");
    gb_head(&g, 3, 2, 0);
    gb_tinfo(&g, "a", 1, ne4, 0, 0);
    gb_tinfo(&g, "b", 1, ne4, 0, 16);
    gb_data(&g, 64);
    expect(G, PAGEIN_E_BAD_OFFSET, g.b, g.n, "tensor offset not on the 32-byte alignment");
    gb_head(&g, 3, 2, 0);
    gb_tinfo(&g, "a", 1, ne4, 0, 0);
    gb_tinfo(&g, "b", 1, ne4, 0, 0);
    gb_data(&g, 64);
    expect(G, PAGEIN_E_BAD_OFFSET, g.b, g.n, "two tensors at the same offset (overlap)");
    gb_head(&g, 3, 2, 0);
    gb_tinfo(&g, "a", 1, ne4, 0, 0);
    gb_tinfo(&g, "a", 1, ne4, 0, 32);
    gb_data(&g, 64);
    expect(G, PAGEIN_E_DUPLICATE, g.b, g.n, "duplicate tensor name");
    gb_head(&g, 3, 1, 0);
    gb_tinfo(&g, "t", 1, ne4, 0, 0);
    gb_data(&g, 8);
    expect(G, PAGEIN_E_TRUNCATED, g.b, g.n, "tensor data past the end of the file");
    gb_head(&g, 3, 1, 0);
    gb_tinfo(&g, "t", 1, ne4, 0, 0);
    expect(G, PAGEIN_E_TRUNCATED, g.b, g.n, "file ends before the data section");
    gb_head(&g, 3, 1, 0);
    gb_tinfo(&g, "t", 1, ne4, 0, 0);
    expect(G, PAGEIN_E_TRUNCATED, g.b, g.n - 5, "tensor info cut short");
}

/* ---- sharded safetensors index ---------------------------------------------- */

static void index_cases(void) {
    const char *I = "index";
    static uint8_t d[16];
    uint64_t sh[1] = {4};
    pagein_write_tensor a = {"model.layers.0.w", PAGEIN_DTYPE_F32, 1, sh, d, NULL, NULL};
    pagein_write_tensor b = {"model.layers.1.w", PAGEIN_DTYPE_F32, 1, sh, d, NULL, NULL};
    pagein_write_tensor ab[2] = {a, b};
    if (pagein_safetensors_write(pt_tmppath("mal-12.safetensors"), ab, 2, NULL) ||
        pagein_safetensors_write(pt_tmppath("mal-1.safetensors"), &a, 1, NULL) ||
        pagein_safetensors_write(pt_tmppath("mal-2.safetensors"), &b, 1, NULL)) {
        printf("    cannot write the shards\n");
        pt_failed = 1;
        return;
    }
#define W0 "\"model.layers.0.w\":\"mal-1.safetensors\""
#define W1 "\"model.layers.1.w\":\"mal-2.safetensors\""
    expect_str(I, 0, "{\"metadata\":{\"total_size\":32},\"weight_map\":{" W0 "," W1 "}}", "(valid: the base of the cases below)");
    ncases--; /* not a malformed case */
    expect_str(I, PAGEIN_E_BAD_JSON, "{\"weight_map\":{" W0 "," W1 "}", "index JSON cut short");
    expect_str(I, PAGEIN_E_BAD_INDEX, "{\"metadata\":{}}", "no weight_map");
    expect_str(I, PAGEIN_E_BAD_INDEX, "{\"weight_map\":{}}", "empty weight_map");
    expect_str(I, PAGEIN_E_BAD_INDEX, "{\"weight_map\":{\"model.layers.0.w\":7}}", "weight_map value not a string");
    expect_str(I, PAGEIN_E_BAD_INDEX, "{\"weight_map\":{\"model.layers.0.w\":\"../mal-1.safetensors\"}}",
               "shard name with a path ('../')");
    expect_str(I, PAGEIN_E_BAD_INDEX, "{\"weight_map\":{\"model.layers.0.w\":\"/etc/passwd\"}}",
               "absolute shard path");
    expect_str(I, PAGEIN_E_DUPLICATE, "{\"weight_map\":{" W0 "," W0 "," W1 "}}", "tensor listed twice");
    expect_str(I, PAGEIN_E_DUPLICATE, "{\"weight_map\":{" W0 "},\"weight_map\":{" W1 "}}", "duplicate weight_map key");
    expect_str(I, PAGEIN_E_BAD_INDEX, "{\"weight_map\":{" W0 ",\"model.layers.1.w\":\"mal-1.safetensors\"}}",
               "tensor assigned to a shard that lacks it");
    expect_str(I, PAGEIN_E_BAD_INDEX, "{\"weight_map\":{\"model.layers.0.w\":\"mal-12.safetensors\"," W1 "}}",
               "shard holds a tensor the index puts elsewhere");
    expect_str(I, -ENOENT, "{\"weight_map\":{" W0 ",\"model.layers.1.w\":\"mal-3.safetensors\"}}",
               "shard file missing");
    expect_str(I, PAGEIN_E_BAD_UTF8, "{\"weight_map\":{\"model.layers.0.w\xff\":\"mal-1.safetensors\"}}",
               "invalid UTF-8 in a tensor name");
    expect_str(I, PAGEIN_E_BAD_JSON, "{\"weight_map\":{\"\\ud800\":\"mal-1.safetensors\"}}", "unpaired surrogate escape");
    {
        size_t depth = 5000;
        char *h = malloc(2 * depth + 64);
        size_t n = (size_t)sprintf(h, "{\"metadata\":{\"x\":");
        memset(h + n, '[', depth);
        memset(h + n + depth, ']', depth);
        strcpy(h + n + 2 * depth, "}}");
        expect_str(I, PAGEIN_E_LIMIT, h, "JSON nested 5,000 deep");
        free(h);
    }
#undef W0
#undef W1
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
        "Formats: safetensors files, GGUF files, sharded safetensors indexes (opened\n"
        "with pagein_model_open next to valid shards) and integrity manifests\n"
        "(docs/FORMAT-MANIFEST.md). Each input is built in memory and parsed from\n"
        "an exact-size buffer, so the sanitizer builds catch any read past its\n"
        "end; none of them makes the parser allocate memory in proportion to a\n"
        "size it declares.\n\n"
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
    safetensors_cases();
    gguf_cases();
    index_cases();
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
