/*
 * resolve.c - which file of a remote prefix is the model (docs/REMOTE.md):
 * s3://bucket/model/, gs://..., hf://org/name[@rev] and http(s)://host/dir/
 * name a folder; the model is the one the format table's rule picks among
 * its files (format/pick.c, as for a local directory): its sharded index
 * (model.safetensors.index.json, else the one *.safetensors.index.json),
 * else model.safetensors or its one *.safetensors, else its one *.gguf or
 * the first of a split set, else its one PyTorch checkpoint.
 * Object stores and the Hub are listed (ListObjectsV2, the Hub's API); a
 * plain HTTP folder cannot be listed, so the usual names are tried.
 */
#include "load.h"
#include "../format/format.h"
#include "../source/remote.h"

#ifdef PAGEIN_HAVE_CURL

#include <stdio.h>
#include <strings.h>

/* Picks the model among n NUL-separated names (relative to the folder,
 * direct children only) by the format table's one rule (format/pick.c,
 * the rule of local directories too). Sets *best to the chosen name, or
 * NULL when none is a model file; an ambiguous folder is an error. */
static int choose(const char *uri, const char *names, size_t n, const char **best) {
    *best = NULL;
    const char **v = n ? pi_malloc(n * sizeof *v) : NULL;
    if (n && !v) return pi_err(-ENOMEM, "out of memory");
    size_t k = 0;
    const char *q = names;
    for (size_t i = 0; i < n; i++, q += strlen(q) + 1)
        if (q[0] && !strchr(q, '/') && pi_is_model_name(q)) v[k++] = q;
    size_t pick = 0;
    int index = 0, rc = k ? pi_model_pick(uri, v, k, 1, &pick, &index) : 0;
    if (rc == 0 && k) *best = v[pick];
    pi_free(v);
    return rc;
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
            rc = choose(uri, names, n, &pick);
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
            rc = choose(uri, names, n, &pick);
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
        rc = pi_err(PAGEIN_E_NOT_FOUND, "%s: no model here (no sharded index and no file a format claims by its suffix%s)",
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
