/* uri.c - byte sources by path or URL in the public API (pagein.h,
 * "Byte sources by path or URL"): what pagein.fsspec needs to put the
 * sources and the range engine under fsspec. A pagein_source is one open
 * pi_source; pagein_source_read_ranges is pagein_read_ranges' plan (sort,
 * drop contained requests, merge neighbours) run on the range engine over
 * any mix of local files and remote objects in one engine run; listing
 * goes through the source registry (pi_source_list), as pull's does. */
#include "data.h"
#include "../source/source.h"

#include <inttypes.h>
#include <stdio.h>
#include <strings.h>

struct pagein_source {
    struct pi_source *src;
};

int pagein_source_open(pagein_source **out, const char *uri) {
    pi_err_clear();
    RETURN_IF(!out || !uri, PAGEIN_E_INVALID, "pagein_source_open: NULL argument");
    pagein_source *s = pi_calloc(1, sizeof *s);
    if (!s) return pi_err(-ENOMEM, "%s: out of memory", uri);
    int rc = pi_source_open(&s->src, uri, 0);
    if (rc < 0) {
        pi_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void pagein_source_close(pagein_source *s) {
    if (!s) return;
    pi_source_close(s->src);
    pi_free(s);
}

uint64_t pagein_source_size(const pagein_source *s) { return s ? s->src->size : 0; }

const char *pagein_source_identity(const pagein_source *s) { return s ? s->src->identity : ""; }

int pagein_source_is_local(const pagein_source *s) { return s && s->src->fd >= 0; }

int pagein_source_read_ranges(pagein_source *const *srcs, size_t nsrcs, const pagein_range *reqs, size_t n,
                              const pagein_ranges_opts *opts, pagein_ranges_stats *st) {
    pi_err_clear();
    if (st) memset(st, 0, sizeof *st);
    RETURN_IF(!srcs && nsrcs, PAGEIN_E_INVALID, "ranges: NULL source array");
    for (size_t i = 0; i < nsrcs; i++) RETURN_IF(!srcs[i], PAGEIN_E_INVALID, "ranges: source %zu is NULL", i);
    uint64_t max_gap = opts && opts->max_gap ? opts->max_gap : PAGEIN_RANGES_DEFAULT_MAX_GAP;
    uint64_t max_block = opts && opts->max_block ? opts->max_block : PAGEIN_RANGES_DEFAULT_MAX_BLOCK;
    unsigned qd = opts && opts->queue_depth ? opts->queue_depth : PAGEIN_RANGES_DEFAULT_QUEUE_DEPTH;
    int no_merge = opts && (opts->flags & PAGEIN_RANGES_NO_MERGE);
    uint64_t *sizes = pi_calloc(nsrcs ? nsrcs : 1, sizeof *sizes);
    struct pi_source **ps = pi_calloc(nsrcs ? nsrcs : 1, sizeof *ps);
    int rc = 0;
    if (!sizes || !ps) {
        rc = pi_err(-ENOMEM, "ranges: out of memory for %zu sources", nsrcs);
        goto done;
    }
    for (size_t i = 0; i < nsrcs; i++) {
        sizes[i] = srcs[i]->src->size;
        ps[i] = srcs[i]->src;
    }
    struct pi_rplan plan;
    if ((rc = pi_ranges_plan(reqs, n, nsrcs, sizes, max_gap, max_block, no_merge, &plan)) < 0) goto done;
    /* the executor only reads the source array and its length */
    struct pi_fdsrcs f;
    memset(&f, 0, sizeof f);
    f.srcs = ps;
    f.n = nsrcs;
    rc = pi_ranges_exec(&f, reqs, &plan, qd, NULL, NULL);
    pi_rplan_stats(&plan, n, st);
    pi_rplan_free(&plan);
done:
    pi_free(sizes);
    pi_free(ps);
    return rc;
}

/* 1 when a listed name has a ".." path component after its
 * scheme and bucket/org: a listing is the server's word, and callers
 * (pagein.fsspec's get, through fsspec's other_paths) turn names into
 * local paths by replacing the listed prefix, so "p/../../x" would land
 * outside the destination. pull refuses the same names (issue 27). */
static int unsafe_name(const char *name) {
    const char *p = strstr(name, "://");
    p = p ? p + 3 : name;
    p += strcspn(p, "/"); /* the bucket or org */
    while (*p) {
        p += strspn(p, "/");
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') return 1;
        p += n;
    }
    return 0;
}

/* pagein_source_list through the source table's list op: each entry
 * named as the caller's URI followed by its name relative to it (so the
 * names start with the URI that was listed: the revision of an hf:// URI
 * only where the caller named one). */
struct pub_list {
    const char *uri;
    pagein_list_fn fn;
    void *arg;
    struct pi_buf b;
};

static int pub_entry(void *arg, const struct pi_list_entry *e) {
    struct pub_list *l = arg;
    size_t ul = strlen(l->uri), el = strlen(e->uri), rl = strlen(e->rel);
    /* the source's own prefix ends in '/' where the caller's does not ("s3://b", "hf://o/n") */
    int sep = el > rl && e->uri[el - rl - 1] == '/' && ul && l->uri[ul - 1] != '/';
    l->b.n = 0;
    pi_buf_put(&l->b, l->uri, ul);
    if (sep) pi_buf_put(&l->b, "/", 1);
    pi_buf_put(&l->b, e->rel, rl + 1);
    if (l->b.oom) return pi_err(-ENOMEM, "%s: out of memory listing", l->uri);
    if (unsafe_name(l->b.p))
        return pi_err(PAGEIN_E_INVALID, "%s: unsafe name '%.300s' in the listing (a '..' component)", l->uri, e->rel);
    return l->fn(l->arg, l->b.p);
}

int pagein_source_list(const char *uri, pagein_list_fn fn, void *arg) {
    pi_err_clear();
    RETURN_IF(!uri || !fn, PAGEIN_E_INVALID, "pagein_source_list: NULL argument");
    if (!pi_source_is_remote(uri)) {
        const char *schemes = pi_source_schemes();
        return pi_err(PAGEIN_E_UNSUPPORTED, "%s: not a remote prefix (remote sources in this build: %s)", uri,
                      schemes[0] ? schemes : "none, built without libcurl");
    }
    struct pub_list l = {.uri = uri, .fn = fn, .arg = arg};
    int rc = pi_source_list(uri, pub_entry, &l);
    pi_buf_free(&l.b);
    return rc;
}
