/* uri.c - byte sources by path or URL in the public API (pagein.h,
 * "Byte sources by path or URL"): what pagein.fsspec needs to put the
 * sources and the range engine under fsspec. A pagein_source is one open
 * pi_source; pagein_source_read_ranges is pagein_read_ranges' plan (sort,
 * drop contained requests, merge neighbours) run on the range engine over
 * any mix of local files and remote objects in one engine run; listing
 * goes through the source table's list op (sizes and identities as the
 * listing states them). */
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
 * outside the destination. pull refuses the same names. */
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
    pagein_list_entry_fn efn;
    void *arg;
    struct pi_buf b;
};

static int pub_entry(void *arg, const struct pi_list_entry *e) {
    struct pub_list *l = arg;
    size_t ul = strlen(l->uri), el = strlen(e->uri), rl = strlen(e->rel);
    /* rel without a leading '/' (a prefix named without its '/': "/a.bin"),
     * the '/' put back between the caller's URI and it */
    const char *rel = e->rel;
    int lead = rel[0] == '/';
    rel += lead, rl -= (size_t)lead;
    int sep = (lead || (el > rl && e->uri[el - rl - 1] == '/')) && ul && l->uri[ul - 1] != '/';
    l->b.n = 0;
    pi_buf_put(&l->b, l->uri, ul);
    if (sep) pi_buf_put(&l->b, "/", 1);
    pi_buf_put(&l->b, rel, rl + 1);
    if (l->b.oom) return pi_err(-ENOMEM, "%s: out of memory listing", l->uri);
    if (unsafe_name(l->b.p))
        return pi_err(PAGEIN_E_INVALID, "%s: unsafe name '%.300s' in the listing (a '..' component)", l->uri, e->rel);
    if (!l->efn) return l->fn(l->arg, l->b.p);
    pagein_list_entry pe = {l->b.p, rel, e->size == PI_SIZE_UNKNOWN ? PAGEIN_SIZE_UNKNOWN : e->size,
                            e->identity ? e->identity : "", e->mtime};
    return l->efn(l->arg, &pe);
}

static int pub_list(const char *uri, unsigned flags, struct pub_list *l) {
    pi_err_clear();
    RETURN_IF(!uri || (!l->fn && !l->efn), PAGEIN_E_INVALID, "pagein_source_list: NULL argument");
    RETURN_IF(flags & ~PAGEIN_LIST_DIRECT, PAGEIN_E_INVALID, "%s: unknown listing flags 0x%x", uri, flags);
    if (!pi_source_is_remote(uri)) {
        const char *schemes = pi_source_schemes();
        return pi_err(PAGEIN_E_UNSUPPORTED, "%s: not a remote prefix (remote sources in this build: %s)", uri,
                      schemes[0] ? schemes : "none, built without libcurl");
    }
    l->uri = uri;
    int rc = pi_source_list_opt(uri, flags & PAGEIN_LIST_DIRECT ? PI_LIST_DIRECT : 0, pub_entry, l);
    pi_buf_free(&l->b);
    return rc;
}

int pagein_source_list(const char *uri, pagein_list_fn fn, void *arg) {
    struct pub_list l = {.fn = fn, .arg = arg};
    return pub_list(uri, 0, &l);
}

int pagein_source_list_entries(const char *uri, unsigned flags, pagein_list_entry_fn fn, void *arg) {
    struct pub_list l = {.efn = fn, .arg = arg};
    return pub_list(uri, flags, &l);
}
