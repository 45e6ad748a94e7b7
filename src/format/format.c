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

static const struct pi_format fmt_gguf = {PAGEIN_FORMAT_GGUF, "gguf", gguf_detect, pi_gguf_parse, NULL, gguf_suffixes,
                                          0, 0};
static const struct pi_format fmt_torch = {PAGEIN_FORMAT_TORCH, "torch", torch_detect, pi_torch_parse, NULL,
                                           torch_suffixes, 0, 1};
static const struct pi_format fmt_st = {PAGEIN_FORMAT_SAFETENSORS, "safetensors", st_detect, pi_safetensors_parse, st_header_size,
                                        st_suffixes, 64u << 10, 0};

const struct pi_format *const pi_formats[] = {&fmt_gguf, &fmt_torch, &fmt_st, NULL};

const struct pi_format *pi_format_get(pagein_format id) {
    for (size_t i = 0; pi_formats[i]; i++)
        if (pi_formats[i]->id == id) return pi_formats[i];
    return NULL;
}

const char *pagein_format_name(pagein_format f) {
    const struct pi_format *x = pi_format_get(f);
    return x ? x->name : "unknown";
}

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && memcmp(s + n - m, suf, m) == 0;
}

const struct pi_format *pi_format_by_suffix(const char *name) {
    for (size_t i = 0; pi_formats[i]; i++)
        for (const char *const *s = pi_formats[i]->suffixes; s && *s; s++)
            if (ends_with(name, *s)) return pi_formats[i];
    return NULL;
}

pagein_format pi_detect_format_named(const uint8_t *buf, size_t len, uint64_t size, const char *name) {
    for (size_t i = 0; pi_formats[i]; i++)
        if (pi_formats[i]->detect(buf, len, size)) return pi_formats[i]->id;
    if (!name || ends_with(name, ".safetensors")) return PAGEIN_FORMAT_SAFETENSORS;
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
    if (name && ends_with(name, ".index.json"))
        return pi_err(PAGEIN_E_NOT_MODEL,
                      "a sharded-checkpoint index, not a model file: open the checkpoint with pagein_model_open "
                      "(Python: pagein.open_model; CLI: pagein plan / inspect the shards)");
    return pi_err(PAGEIN_E_NOT_MODEL, "not a safetensors, GGUF or PyTorch file: %s'%s'",
                  len ? "starts with " : "empty ", shown);
}
