/*
 * resolve.c - which file of a remote prefix is the model (docs/REMOTE.md):
 * s3://bucket/model/, gs://..., hf://org/name[@rev] and http(s)://host/dir/
 * name a folder; the model is its sharded index
 * (model.safetensors.index.json, else the one *.safetensors.index.json),
 * else its one *.safetensors, else a *.gguf (the first of a split set).
 * Object stores and the Hub are listed (ListObjectsV2, the Hub's API); a
 * plain HTTP folder cannot be listed, so the usual names are tried.
 */
#include "load.h"
#include "../source/remote.h"

#ifdef PAGEIN_HAVE_CURL

#include <stdio.h>
#include <strings.h>

static int ends_with(const char *s, size_t n, const char *suf) {
    size_t b = strlen(suf);
    return n >= b && memcmp(s + n - b, suf, b) == 0;
}

/* Picks the model among n NUL-separated names (relative to the folder,
 * direct children only). Returns the chosen name or NULL. */
static const char *choose(const char *names, size_t n) {
    const char *best = NULL;
    int best_rank = 100;
    const char *q = names;
    for (size_t i = 0; i < n; i++, q += strlen(q) + 1) {
        size_t l = strlen(q);
        if (!l || strchr(q, '/')) continue;
        int rank;
        if (!strcmp(q, "model.safetensors.index.json")) rank = 0;
        else if (ends_with(q, l, ".safetensors.index.json")) rank = 1;
        else if (!strcmp(q, "model.safetensors")) rank = 2;
        else if (ends_with(q, l, ".safetensors")) rank = 3;
        else if (ends_with(q, l, "-00001-of-00001.gguf")) rank = 4;
        else if (ends_with(q, l, ".gguf") && !strstr(q, "-of-")) rank = 5;
        else if (ends_with(q, l, ".gguf") && strstr(q, "-00001-of-")) rank = 6;
        else continue;
        /* two candidates of the same kind (rank 1, 3, 5): ambiguous unless
         * one is the conventional name; keep the first in listing order */
        if (rank < best_rank) best = q, best_rank = rank;
    }
    return best;
}

int pi_remote_model_uri(const char *uri, char *out, size_t cap) {
    size_t ul = strlen(uri);
    int s3 = strncasecmp(uri, "s3://", 5) == 0 || strncasecmp(uri, "gs://", 5) == 0;
    int hf = strncasecmp(uri, "hf://", 5) == 0;
    int http = strncasecmp(uri, "http://", 7) == 0 || strncasecmp(uri, "https://", 8) == 0;
    if (!s3 && !hf && !http) return pi_err(PAGEIN_E_INVALID, "%s: not a remote URL", uri);
    struct pi_hf_ref r = {0};
    int prefix;
    if (hf) {
        FORWARD_IF(pi_hf_parse(uri, &r));
        prefix = !r.path[0] || r.path[strlen(r.path) - 1] == '/';
    } else {
        prefix = ul && uri[ul - 1] == '/';
    }
    if (!prefix) {
        pi_hf_ref_free(&r);
        if (ul >= cap) return pi_err(PAGEIN_E_LIMIT, "%s: URL too long", uri);
        memcpy(out, uri, ul + 1);
        return 0;
    }
    int rc = 0;
    char *names = NULL;
    size_t n = 0;
    const char *pick = NULL;
    if (s3) {
        char *keys;
        size_t nk;
        rc = pi_s3_list(uri, &keys, &nk);
        if (rc == 0) {
            /* keys are full URIs: make them relative to the prefix in place */
            names = keys;
            char *w = keys;
            const char *q = keys;
            for (size_t i = 0; i < nk; i++) {
                size_t l = strlen(q);
                const char *rel = l >= ul && !strncmp(q, uri, ul) ? q + ul : "";
                size_t rl = strlen(rel);
                memmove(w, rel, rl + 1);
                w += rl + 1;
                q += l + 1;
            }
            n = nk;
            pick = choose(names, n);
        }
    } else if (hf) {
        rc = pi_hf_list(uri, &r, &names, &n);
        if (rc == 0) {
            /* keep the files directly in the asked folder, relative to it */
            size_t pl = strlen(r.path);
            char *w = names;
            const char *q = names;
            size_t kept = 0;
            for (size_t i = 0; i < n; i++) {
                size_t l = strlen(q);
                if (l > pl && !strncmp(q, r.path, pl)) {
                    memmove(w, q + pl, l - pl + 1);
                    w += l - pl + 1;
                    kept++;
                }
                q += l + 1;
            }
            n = kept;
            pick = choose(names, n);
        }
    } else {
        /* a plain HTTP folder: the usual names, one probe each (of 1 byte:
         * only whether the object is there matters here) */
        static const char *const tries[] = {"model.safetensors.index.json", "model.safetensors"};
        for (size_t i = 0; i < PI_ARRAY_LEN(tries) && !pick; i++) {
            char u[4096];
            snprintf(u, sizeof u, "%s%s", uri, tries[i]);
            struct pi_source *s;
            if (pi_remote_open(&s, u, PI_OPEN_PROBE_ONLY) == 0) {
                pi_remote_close(s);
                pick = tries[i];
            }
        }
        pi_err_clear();
    }
    if (rc == 0 && !pick)
        rc = pi_err(PAGEIN_E_NOT_FOUND, "%s: no model here (no *.safetensors.index.json, *.safetensors or *.gguf%s)",
                    uri, http ? "; a plain HTTP folder cannot be listed: name the file" : "");
    if (rc == 0) {
        int k;
        char erev[768] = ""; /* a '/' in the revision (refs/pr/1) would end it */
        if (hf) pi_url_encode(erev, sizeof erev, r.rev, 0);
        if (hf)
            k = snprintf(out, cap, "hf://%s%s@%s/%s%s", strcmp(r.kind, "datasets") ? "" : "datasets/", r.repo, erev,
                         r.path, pick);
        else k = snprintf(out, cap, "%s%s", uri, pick);
        if (k < 0 || (size_t)k >= cap) rc = pi_err(PAGEIN_E_LIMIT, "%s: URL too long", uri);
    }
    pi_free(names);
    pi_hf_ref_free(&r);
    return rc;
}

#endif /* PAGEIN_HAVE_CURL */
