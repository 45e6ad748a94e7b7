/* format.c - the format table and content detection. */
#include "format.h"

#include <stdio.h>

static int st_detect(const uint8_t *buf, size_t len, uint64_t size) {
    /* u64 header length N with 8 + N inside the file, then the JSON object
     * (the crate accepts leading whitespace before '{'). */
    if (len < 9) return 0;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | buf[i];
    if (n < 2 || n > size - 8) return 0;
    for (size_t i = 8; i < len && i < 8 + n; i++) {
        if (buf[i] == '{') return 1;
        if (buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\n' && buf[i] != '\r') return 0;
    }
    return 0;
}

static uint64_t st_header_size(const uint8_t *buf, size_t avail, uint64_t size) {
    if (avail < 8) return 0;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | buf[i];
    return n <= size - 8 ? 8 + n : 0; /* a bad length: the parser says so */
}

static int gguf_detect(const uint8_t *buf, size_t len, uint64_t size) {
    PI_UNUSED(size);
    return len >= 4 && memcmp(buf, "GGUF", 4) == 0;
}

static int torch_detect(const uint8_t *buf, size_t len, uint64_t size) {
    PI_UNUSED(size);
    if (len >= 4 && memcmp(buf, "PK\x03\x04", 4) == 0) return 1;
    /* torch.save's legacy (pre-1.6) format: a pickled magic number first
     * (PROTO 2, LONG1 of 10 bytes); torch.c refuses it with advice. */
    return len >= 4 && memcmp(buf, "\x80\x02\x8a\x0a", 4) == 0;
}

static const char *const st_suffixes[] = {".safetensors", NULL};
static const char *const gguf_suffixes[] = {".gguf", NULL};
static const char *const torch_suffixes[] = {".pt", ".pth", ".bin", ".ckpt", NULL};

static const struct pi_format fmt_gguf = {
    .id = PAGEIN_FORMAT_GGUF,
    .name = "gguf",
    .detect = gguf_detect,
    .parse = pi_gguf_parse,
    .header_size = NULL, /* known only by parsing */
    .suffixes = gguf_suffixes,
    .first_read = 0,
    .whole_file = 0,
    .header_read = PI_HEADER_GROW,
    .dir_rank = 20,
    .split_paths = pi_gguf_split_paths,
    .split_check = pi_gguf_split_check,
    .plural = "GGUF files",
};
static const struct pi_format fmt_torch = {
    .id = PAGEIN_FORMAT_TORCH,
    .name = "torch",
    .detect = torch_detect,
    .parse = pi_torch_parse,
    .header_size = NULL,
    .suffixes = torch_suffixes,
    .first_read = 0,
    .whole_file = 1, /* the zip directory is at the end */
    .header_read = PI_HEADER_AROUND,
    .dir_rank = 30,
    .plural = "PyTorch checkpoints",
};
static const struct pi_format fmt_st = {
    .id = PAGEIN_FORMAT_SAFETENSORS,
    .name = "safetensors",
    .detect = st_detect,
    .parse = pi_safetensors_parse,
    .header_size = st_header_size,
    .suffixes = st_suffixes,
    .first_read = 64u << 10,
    .whole_file = 0,
    .header_read = PI_HEADER_EXTENT,
    .dir_rank = 10,
    .plural = "safetensors files",
};

/* A row compiled into the unit-test runner only (tests/test_seams_format.c):
 * a new format is one file and one line; absent (NULL) everywhere else. */
extern const struct pi_format pi_format_test_fake __attribute__((weak, visibility("hidden")));

/* Detection order; NULL rows (an absent weak row) are skipped. */
const struct pi_format *const pi_formats[] = {&fmt_gguf, &fmt_torch, &fmt_st, &pi_format_test_fake};
const size_t pi_formats_n = PI_ARRAY_LEN(pi_formats);

const struct pi_format *pi_format_get(pagein_format id) {
    for (size_t i = 0; i < pi_formats_n; i++)
        if (pi_formats[i] && pi_formats[i]->id == id) return pi_formats[i];
    return NULL;
}

const char *pagein_format_name(pagein_format f) {
    const struct pi_format *x = pi_format_get(f);
    return x ? x->name : "unknown";
}

const struct pi_format *pi_format_by_suffix(const char *name) {
    for (size_t i = 0; i < pi_formats_n; i++)
        for (const char *const *s = pi_formats[i] ? pi_formats[i]->suffixes : NULL; s && *s; s++)
            if (pi_ends_with(name, *s)) return pi_formats[i];
    return NULL;
}

pagein_format pagein_format_of_name(const char *name) {
    const struct pi_format *x = name ? pi_format_by_suffix(name) : NULL;
    return x ? x->id : PAGEIN_FORMAT_UNKNOWN;
}

pagein_format pagein_detect_format(const void *buf, size_t len, uint64_t size) {
    if (!buf) return PAGEIN_FORMAT_UNKNOWN;
    if (size < len) size = len;
    for (size_t i = 0; i < pi_formats_n; i++)
        if (pi_formats[i] && pi_formats[i]->detect(buf, len, size)) return pi_formats[i]->id;
    return PAGEIN_FORMAT_UNKNOWN;
}

pagein_format pi_detect_format_named(const uint8_t *buf, size_t len, uint64_t size, const char *name) {
    pagein_format f = pagein_detect_format(buf, len, size);
    if (f != PAGEIN_FORMAT_UNKNOWN) return f;
    if (!name || pi_ends_with(name, ".safetensors")) return PAGEIN_FORMAT_SAFETENSORS;
    return PAGEIN_FORMAT_UNKNOWN;
}

pagein_format pi_detect_format(const uint8_t *buf, size_t len) {
    return pi_detect_format_named(buf, len, len, NULL);
}

int pi_format_not_model(const char *name, const uint8_t *buf, size_t len) {
    char shown[64];
    size_t k = 0;
    for (size_t i = 0; i < len && i < 16 && k + 5 < sizeof shown; i++) {
        uint8_t c = buf[i];
        if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') shown[k++] = (char)c;
        else if (c == '\n') { shown[k++] = '\\'; shown[k++] = 'n'; }
        else k += (size_t)snprintf(shown + k, sizeof shown - k, "\\x%02x", c);
    }
    shown[k] = 0;
    if (name && pi_ends_with(name, ".index.json"))
        return pi_err(PAGEIN_E_NOT_MODEL,
                      "a sharded-checkpoint index, not a model file: open the checkpoint with pagein_model_open "
                      "(Python: pagein.open_model; CLI: pagein plan / inspect the shards)");
    return pi_err(PAGEIN_E_NOT_MODEL, "not a safetensors, GGUF or PyTorch file: %s'%s'",
                  len ? "starts with " : "empty ", shown);
}
