/* format.c - the format table and content detection. Each row and its
 * detector live with the format's parser (safetensors.c, gguf.c, torch.c);
 * a new format is its file and one line in pi_formats[]. */
#include "format.h"

#include <stdio.h>

/* A row compiled into the unit-test runner only (tests/test_seams_format.c):
 * a new format is one file and one line; absent (NULL) everywhere else. */
extern const struct pi_format pi_format_test_fake __attribute__((weak, visibility("hidden")));

/* Detection order; NULL rows (an absent weak row) are skipped. */
const struct pi_format *const pi_formats[] = {
    &pi_format_gguf,
    &pi_format_torch,
    &pi_format_dcp,
    &pi_format_safetensors,
    &pi_format_test_fake,
};
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
    for (size_t i = 0; i < pi_formats_n; i++) {
        const struct pi_format *x = pi_formats[i];
        if (!x || !x->fallback) continue;
        if (!name) return x->id;
        for (const char *const *s = x->suffixes; s && *s; s++)
            if (pi_ends_with(name, *s)) return x->id;
    }
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
    /* the rows' titles by dir_rank, the last after "or": "safetensors, GGUF or PyTorch" */
    const struct pi_format *t[16];
    size_t nt = 0;
    for (size_t i = 0; i < pi_formats_n && nt < PI_ARRAY_LEN(t); i++) {
        const struct pi_format *x = pi_formats[i];
        if (!x || !x->title) continue;
        size_t j = nt++;
        for (; j > 0 && t[j - 1]->dir_rank > x->dir_rank; j--) t[j] = t[j - 1];
        t[j] = x;
    }
    char kinds[256];
    size_t kl = 0;
    kinds[0] = 0;
    for (size_t i = 0; i < nt && kl < sizeof kinds; i++)
        kl += (size_t)snprintf(kinds + kl, sizeof kinds - kl, "%s%s", i == 0 ? "" : i + 1 == nt ? " or " : ", ", t[i]->title);
    return pi_err(PAGEIN_E_NOT_MODEL, "not a %s file: %s'%s'", nt ? kinds : "model", len ? "starts with " : "empty ",
                  shown);
}
