/* registry.c - the table of sources and the calls every reader uses.
 * Adding a source: its file under src/source/ and one line in pi_sources[]
 * (before "file", which takes every path without a known scheme). Callers
 * above the sources ask these functions, never a scheme. */
#include "source.h"
#include "remote.h"

#include <stdatomic.h>
#include <stdio.h>

extern const struct pi_source_ops pi_source_test_null __attribute__((weak, visibility("hidden")));

/* Tried in order; NULL rows (an absent weak row) are skipped. */
const struct pi_source_ops *const pi_sources[] = {
#ifdef PAGEIN_HAVE_CURL
    &pi_source_http, /* http://, https:// */
    &pi_source_s3,   /* s3://, gs:// */
    &pi_source_hf,   /* hf:// */
#endif
    &pi_source_test_null, /* null:// (tests/test_seams_source.c; NULL outside the unit-test runner) */
    &pi_source_file,
};
const size_t pi_nsources = PI_ARRAY_LEN(pi_sources);

const struct pi_source_ops *pi_source_find(const char *uri) {
    for (size_t i = 0; uri && i < pi_nsources; i++)
        if (pi_sources[i] && pi_sources[i]->match(uri)) return pi_sources[i];
    return NULL;
}

int pi_source_is_remote(const char *uri) {
    const struct pi_source_ops *o = pi_source_find(uri);
    return o && o->remote;
}

unsigned pi_source_open_depth(const char *first) {
    long v = pi_env_long("PAGEIN_OPEN_DEPTH", 0, 1, 256);
    if (v) return (unsigned)v;
    return first && pi_source_is_remote(first) ? 64u : 32u;
}

int pi_source_stat_dir(const char *uri, int max_pages, struct pi_stat_entry **out, size_t *n) {
    *out = NULL;
    *n = 0;
    const struct pi_source_ops *o = uri ? pi_source_find(uri) : NULL;
    if (!o || !o->stat_dir) return pi_err(PAGEIN_E_UNSUPPORTED, "%s: its source cannot list sizes and ETags", uri ? uri : "");
    return o->stat_dir(uri, max_pages, out, n);
}

int pi_source_pinned(const char *uri) {
    const struct pi_source_ops *o = uri ? pi_source_find(uri) : NULL;
    return o && o->pinned ? o->pinned(uri) : 0;
}

void pi_source_origin(const char *uri, char *out, size_t cap) {
    if (!cap) return;
    out[0] = 0;
    const struct pi_source_ops *o = uri ? pi_source_find(uri) : NULL;
    if (o && o->origin) o->origin(uri, out, cap);
}

const char *pi_source_schemes(void) {
    static char buf[256];
    static _Atomic int done;
    if (atomic_load(&done)) return buf;
    char b[256] = "";
    for (size_t i = 0; i < pi_nsources; i++) {
        const struct pi_source_ops *o = pi_sources[i];
        if (!o || !o->remote || !o->schemes) continue;
        size_t l = strlen(b);
        snprintf(b + l, sizeof b - l, "%s%s", l ? ", " : "", o->schemes);
    }
    memcpy(buf, b, sizeof buf); /* the same bytes from any thread */
    atomic_store(&done, 1);
    return buf;
}

int pi_source_is_prefix(const char *uri) {
    const struct pi_source_ops *o = pi_source_find(uri);
    return o && o->is_prefix && o->is_prefix(uri);
}

int pi_source_list(const char *uri, pi_list_fn fn, void *arg) {
    if (!uri || !fn) return pi_err(PAGEIN_E_INVALID, "pi_source_list: NULL argument");
    const struct pi_source_ops *o = pi_source_find(uri);
    if (!o || !o->list)
        return pi_err(PAGEIN_E_UNSUPPORTED, "%s: the %s source cannot list a folder", uri, o ? o->name : "(none)");
    return o->list(uri, fn, arg);
}

struct list_opt {
    unsigned direct;
    pi_list_fn fn;
    void *arg;
};

static int list_opt_entry(void *arg, const struct pi_list_entry *e) {
    struct list_opt *l = arg;
    /* in a subfolder (a prefix without its '/' names its objects "/a.bin") */
    if (l->direct && strchr(e->rel + (e->rel[0] == '/'), '/')) return 0;
    return l->fn(l->arg, e);
}

int pi_source_list_opt(const char *uri, unsigned flags, pi_list_fn fn, void *arg) {
    if (!uri || !fn) return pi_err(PAGEIN_E_INVALID, "pi_source_list: NULL argument");
    const struct pi_source_ops *o = pi_source_find(uri);
    unsigned direct = (flags & PI_LIST_DIRECT) || ((flags & PI_LIST_AS_PREFIX) && o && !o->deep_prefix);
    if (!direct) return pi_source_list(uri, fn, arg);
    struct list_opt l = {1, fn, arg};
    return pi_source_list(uri, list_opt_entry, &l);
}

int pi_source_checksum(struct pi_source *s, struct pi_checksum *c) {
    memset(c, 0, sizeof *c);
    return s && s->ops->checksum ? s->ops->checksum(s, c) : 0;
}

void pi_source_counters(const struct pi_source *s, uint64_t *requests, uint64_t *retries) {
    if (requests) *requests = 0;
    if (retries) *retries = 0;
    if (s && s->ops->counters) s->ops->counters(s, requests, retries);
}

int pi_source_ranges_ignored(const struct pi_source *s) {
    return s && s->ops->ranges_ignored ? s->ops->ranges_ignored(s) : 0;
}

int pi_source_stream(struct pi_source *s, pi_source_sink_fn sink, void *ctx) {
    if (!s->ops->stream) return pi_err(PAGEIN_E_UNSUPPORTED, "%s: the %s source has no whole-object stream", s->name, s->ops->name);
    return s->ops->stream(s, sink, ctx);
}

static int open_preset(struct pi_source **out, const char *uri, uint32_t flags, uint64_t size, const char *identity);

int pi_source_open(struct pi_source **out, const char *uri, uint32_t flags) {
    return open_preset(out, uri, flags & ~PI_OPEN_KNOWN, 0, NULL);
}

/* See source.h. Only remote sources honour the flag;
 * a local file is opened (and checked) as usual. */
int pi_source_open_known(struct pi_source **out, const char *uri, uint32_t flags, uint64_t size,
                         const char *identity) {
    if (!identity || !pi_source_is_remote(uri)) return pi_source_open(out, uri, flags);
    return open_preset(out, uri, flags | PI_OPEN_KNOWN, size, identity);
}

static int open_preset(struct pi_source **out, const char *uri, uint32_t flags, uint64_t size, const char *identity) {
    if (!out || !uri) return pi_err(PAGEIN_E_INVALID, "pi_source_open: NULL argument");
    const struct pi_source_ops *o = pi_source_find(uri);
    if (!o) return pi_err(PAGEIN_E_UNSUPPORTED, "%s: no source handles this URL (built without libcurl?)", uri);
    struct pi_source *s = pi_calloc(1, sizeof *s);
    if (!s) return pi_err(-ENOMEM, "%s: out of memory", uri);
    s->ops = o;
    s->fd = -1;
    s->facts.rotational = -1;
    s->name = pi_strndup(uri, strlen(uri));
    if (!s->name) {
        pi_free(s);
        return pi_err(-ENOMEM, "%s: out of memory", uri);
    }
    if (identity) {
        s->size = size;
        snprintf(s->identity, sizeof s->identity, "%s", identity);
    }
    int rc = o->open(s, uri, flags);
    if (rc < 0) {
        pi_free(s->name);
        pi_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void pi_source_close(struct pi_source *s) {
    if (!s) return;
    if (s->ops && s->ops->close) s->ops->close(s);
    pi_free(s->name);
    pi_free(s);
}

int pi_source_read(struct pi_source *s, void *buf, uint64_t len, uint64_t off) {
    uint64_t end;
    if (pi_add_overflow(off, len, &end) || end > s->size)
        return pi_err(PAGEIN_E_RANGE, "%s: read [%llu, +%llu) is past the end (%llu bytes)", s->name,
                      (unsigned long long)off, (unsigned long long)len, (unsigned long long)s->size);
    if (len == 0) return 0;
    return s->ops->read(s, buf, len, off);
}

int pi_source_read_all(struct pi_source *s, const char *name, uint8_t **out) {
    uint8_t *buf = pi_malloc((size_t)s->size + 1);
    if (!buf) return pi_err(-ENOMEM, "%s: out of memory", name);
    int rc = pi_source_read(s, buf, s->size, 0);
    if (rc < 0) {
        pi_free(buf);
        return rc;
    }
    buf[s->size] = 0;
    *out = buf;
    return rc;
}

/* The generic readv: ops->read on pool threads, depth at a time. */
struct gen_ctx {
    struct pi_source *s;
    struct pi_read_req *r;
    pi_read_done_fn done;
    void *arg;
};

static int gen_item(void *arg, size_t i) {
    struct gen_ctx *c = arg;
    struct pi_read_req *r = &c->r[i];
    r->rc = pi_source_read(c->s, r->buf, r->len, r->off);
    int rc = r->rc;
    if (c->done) {
        int d = c->done(c->arg, r);
        if (rc == 0 && d != 0) rc = d < 0 ? d : pi_err(PAGEIN_E_CANCELLED, "%s: reads stopped by the consumer", c->s->name);
    }
    return rc;
}

#define PENDING 1

int pi_source_readv(struct pi_source *s, struct pi_read_req *reqs, size_t n, unsigned depth, pi_read_done_fn done,
                    void *arg) {
    if (n == 0) return 0;
    if (!reqs) return pi_err(PAGEIN_E_INVALID, "pi_source_readv: NULL requests");
    if (depth == 0) depth = pi_source_facts(s)->depth ? pi_source_facts(s)->depth : pi_default_threads();
    for (size_t i = 0; i < n; i++) reqs[i].rc = PENDING;
    int rc;
    if (s->ops->readv) {
        rc = s->ops->readv(s, reqs, n, depth, done, arg);
    } else {
        struct gen_ctx c = {s, reqs, done, arg};
        rc = pi_parallel(depth, n, gen_item, &c);
    }
    for (size_t i = 0; i < n; i++)
        if (reqs[i].rc == PENDING) reqs[i].rc = PAGEIN_E_CANCELLED;
    return rc;
}

/* A remote URL opened through the table (remote.h). */
int pi_remote_open(struct pi_source **out, const char *uri, uint32_t flags) {
    if (!pi_source_is_remote(uri))
        return pi_err(PAGEIN_E_INVALID, "%s: not a remote URL (%s)", uri, pi_source_schemes());
    return pi_source_open(out, uri, flags);
}

void pi_remote_close(struct pi_source *s) { pi_source_close(s); }
