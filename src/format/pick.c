/* pick.c - which file of a folder is the model: the one rule for local
 * directories (load/model.c), remote prefixes (load/resolve.c) and the
 * cache commands (pagein_is_model_name), read off the format table. */
#include "format.h"

#include <stdio.h>

#define INDEX_SUFFIX ".safetensors.index.json"
#define INDEX_NAME "model" INDEX_SUFFIX

int pi_is_model_name(const char *name) {
    return name && name[0] != '.' && (pi_ends_with(name, INDEX_SUFFIX) || pi_format_by_suffix(name) != NULL);
}

int pagein_is_model_name(const char *name) { return pi_is_model_name(name); }

/* 1 if name is PREFIX-NNNNN-of-NNNNN<suf> with a non-empty prefix. */
static int split_name(const char *name, const char *suf) {
    size_t l = strlen(name), s = strlen(suf);
    if (l <= s + 15) return 0;
    const char *p = name + l - s - 15; /* "-00001-of-00003" */
    if (p[0] != '-' || memcmp(p + 6, "-of-", 4) != 0) return 0;
    for (int i = 1; i < 15; i++)
        if ((i < 6 || i > 9) && (p[i] < '0' || p[i] > '9')) return 0;
    return 1;
}

/* The suffix of format x that name ends with, or NULL. */
static const char *suffix_of(const struct pi_format *x, const char *name) {
    for (const char *const *s = x->suffixes; s && *s; s++)
        if (pi_ends_with(name, *s)) return *s;
    return NULL;
}

int pi_model_pick(const char *where, const char *const *names, size_t n, int listed, size_t *pick, int *index) {
    *index = 0;
    /* a sharded index first */
    size_t nidx = 0, idx = 0;
    for (size_t i = 0; i < n; i++) {
        if (names[i][0] == '.' || !pi_ends_with(names[i], INDEX_SUFFIX)) continue;
        if (listed && strcmp(names[i], INDEX_NAME) == 0) {
            *pick = i, *index = 1;
            return 0;
        }
        if (nidx++ == 0) idx = i;
        else if (!listed && strcmp(names[i], names[idx]) < 0) idx = i;
    }
    if (nidx > 1 && !listed) return pi_err(PAGEIN_E_INVALID, "%s: holds %zu sharded indexes; name one", where, nidx);
    if (nidx >= 1) {
        *pick = idx, *index = 1;
        return 0;
    }
    /* else the format of lowest rank that has files */
    const struct pi_format *best = NULL;
    for (size_t i = 0; i < n; i++) {
        if (names[i][0] == '.') continue;
        const struct pi_format *x = pi_format_by_suffix(names[i]);
        if (x && (!best || x->dir_rank < best->dir_rank)) best = x;
    }
    if (!best) {
        /* the suffixes the table knows, for the message */
        char known[256];
        size_t k = (size_t)snprintf(known, sizeof known, "%s", INDEX_SUFFIX);
        for (size_t f = 0; f < pi_formats_n; f++)
            for (const char *const *s = pi_formats[f] ? pi_formats[f]->suffixes : NULL; s && *s; s++)
                if (k < sizeof known) k += (size_t)snprintf(known + k, sizeof known - k, ", %s", *s);
        return pi_err(PAGEIN_E_NOT_FOUND, "%s: no model file (%s)", where, known);
    }
    /* among that format's files: cnt in all, nsplit of them shards of a
     * split set (first_split: the smallest such name, shard 00001 of its
     * set), first_single: the first other one in the order given */
    size_t cnt = 0, nsplit = 0, first = 0, first_split = 0, first_single = 0, nsingle = 0;
    for (size_t i = 0; i < n; i++) {
        if (names[i][0] == '.') continue;
        const char *suf = pi_format_by_suffix(names[i]) == best ? suffix_of(best, names[i]) : NULL;
        if (!suf) continue;
        /* a listing: the conventional name (model.safetensors) wins */
        size_t sl = strlen(suf);
        if (listed && strlen(names[i]) == 5 + sl && memcmp(names[i], "model", 5) == 0) {
            *pick = i;
            return 0;
        }
        if (best->split_paths && split_name(names[i], suf)) {
            if (nsplit++ == 0 || strcmp(names[i], names[first_split]) < 0) first_split = i;
        } else if (nsingle++ == 0) {
            first_single = i;
        }
        if (cnt++ == 0 || strcmp(names[i], names[first]) < 0) first = i;
    }
    if (cnt == 1 || (best->split_paths && nsplit == cnt)) {
        *pick = first;
        return 0;
    }
    if (listed) { /* a folder one did not write: the first of its kind */
        *pick = nsingle ? first_single : first_split;
        return 0;
    }
    return pi_err(PAGEIN_E_INVALID, "%s: holds %zu %s%s; name one", where, cnt, best->plural,
                  best->split_paths ? " that are not one split set" : " and no index");
}
