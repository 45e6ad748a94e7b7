/*
 * resolve.c - which file of a remote prefix is the model (docs/REMOTE.md):
 * a URI whose source calls it a prefix (s3://bucket/model/, gs://...,
 * hf://org/name[@rev], http(s)://host/dir/, any registered source's
 * folder) names a folder; the model is the one the format table's rule
 * picks among its files (format/pick.c, as for a local directory): its
 * sharded index (model.safetensors.index.json, else the one
 * *.safetensors.index.json), else model.safetensors or its one
 * *.safetensors, else its one *.gguf or the first of a split set, else its
 * one PyTorch checkpoint. A source that lists (pi_source_ops.list: object
 * stores, the Hub) is listed; one that cannot (plain HTTP) is asked for the
 * usual names. No scheme is known here.
 */
#include "load.h"
#include "../format/format.h"

#include <stdio.h>

/* Picks the model among n NUL-separated names (relative to the folder,
 * direct children only) by the format table's one rule (format/pick.c,
 * the rule of local directories too). Sets *best to the index of the
 * chosen name, or -1 when none is a model file; an ambiguous folder is an
 * error. */
static int choose(const char *uri, const char *names, size_t n, long *best) {
    *best = -1;
    const char **v = n ? pi_malloc(n * sizeof *v) : NULL;
    size_t *at = n ? pi_malloc(n * sizeof *at) : NULL;
    if (n && (!v || !at)) {
        pi_free(v);
        pi_free(at);
        return pi_err(-ENOMEM, "out of memory");
    }
    size_t k = 0;
    const char *q = names;
    for (size_t i = 0; i < n; i++, q += strlen(q) + 1)
        if (q[0] && !strchr(q, '/') && pi_is_model_name(q)) v[k] = q, at[k++] = i;
    size_t pick = 0;
    int index = 0, rc = k ? pi_model_pick(uri, v, k, 1, &pick, &index) : 0;
    if (rc == 0 && k) *best = (long)at[pick];
    pi_free(v);
    pi_free(at);
    return rc;
}

/* The listing as two NUL-separated lists: names relative to the prefix
 * and the objects' URIs, in the same order. */
struct listing {
    struct pi_buf rel, uri;
    size_t n;
};

static int add_entry(void *arg, const struct pi_list_entry *e) {
    struct listing *l = arg;
    pi_buf_put(&l->rel, e->rel, strlen(e->rel) + 1);
    pi_buf_put(&l->uri, e->uri, strlen(e->uri) + 1);
    l->n++;
    return l->rel.oom || l->uri.oom ? pi_err(-ENOMEM, "out of memory listing") : 0;
}

/* The index of the name that is a directory format's marker file (a DCP
 * checkpoint's .metadata) among n NUL-separated names, or -1. */
static long dir_marker_at(const char *names, size_t n) {
    const char *q = names;
    for (size_t i = 0; i < n; i++, q += strlen(q) + 1)
        for (size_t f = 0; f < pi_formats_n; f++)
            if (pi_formats[f] && pi_formats[f]->dir_marker && !strcmp(q, pi_formats[f]->dir_marker)) return (long)i;
    return -1;
}

static const char *nth(const char *list, long i) {
    while (i-- > 0) list += strlen(list) + 1;
    return list;
}

int pi_remote_model_uri(const char *uri, char *out, size_t cap) {
    const struct pi_source_ops *ops = pi_source_find(uri);
    if (!ops || !ops->remote) return pi_err(PAGEIN_E_INVALID, "%s: not a remote URL", uri);
    size_t ul = strlen(uri);
    if (!pi_source_is_prefix(uri)) {
        if (ul >= cap) return pi_err(PAGEIN_E_LIMIT, "%s: URL too long", uri);
        memcpy(out, uri, ul + 1);
        return 0;
    }
    int rc = 0, k = 0;
    if (ops->list) {
        struct listing l;
        memset(&l, 0, sizeof l);
        long pick = -1;
        rc = ops->list(uri, add_entry, &l);
        if (rc == 0) rc = choose(uri, l.rel.p, l.n, &pick);
        if (rc == 0 && pick < 0) pick = dir_marker_at(l.rel.p, l.n); /* a DCP checkpoint: its .metadata */
        if (rc == 0 && pick < 0)
            rc = pi_err(PAGEIN_E_NOT_FOUND,
                        "%s: no model here (no sharded index and no file a format claims by its suffix)", uri);
        if (rc == 0) k = snprintf(out, cap, "%s", nth(l.uri.p, pick));
        pi_buf_free(&l.rel);
        pi_buf_free(&l.uri);
    } else {
        /* a folder that cannot be listed: the usual names, one probe each
         * (of 1 byte: only whether the object is there matters here) */
        static const char *const tries[] = {"model.safetensors.index.json", "model.safetensors", ".metadata"};
        const char *pick = NULL;
        for (size_t i = 0; i < PI_ARRAY_LEN(tries) && !pick; i++) {
            char u[4096];
            snprintf(u, sizeof u, "%s%s", uri, tries[i]);
            struct pi_source *s;
            if (pi_source_open(&s, u, PI_OPEN_PROBE_ONLY) == 0) {
                pi_source_close(s);
                pick = tries[i];
            }
        }
        pi_err_clear();
        if (!pick)
            return pi_err(PAGEIN_E_NOT_FOUND, "%s: no model here (no sharded index and no file a format claims by its "
                          "suffix; %s folders cannot be listed: name the file)", uri, ops->name);
        k = snprintf(out, cap, "%s%s", uri, pick);
    }
    if (rc == 0 && (k < 0 || (size_t)k >= cap)) rc = pi_err(PAGEIN_E_LIMIT, "%s: URL too long", uri);
    return rc;
}
