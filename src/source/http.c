/*
 * http.c - the http:// and https:// source and the HTTP objects every
 * remote source opens (remote.h, docs/REMOTE.md): opening (the probe, or no
 * request when size and identity are known), the readv spread over lanes
 * on threads, header reads that grow a kept prefix, whole-object streams,
 * small fetches, the row. Needs libcurl (PAGEIN_HAVE_CURL, mk/remote.mk).
 * The object layer is three files over one private header (http_int.h):
 * this one; http_xfer.c, the transport (lanes, pools, one checked transfer
 * with retries, a lane's readv, re-resolution of a refused target);
 * http_loc.c, where requests go (the location, read as one snapshot under
 * a mutex per attempt; redirects; the configured origin, the only one
 * credentials go to). Calls go down that list, never back.
 *
 * Transport. A "lane" is a libcurl multi handle with its own connection
 * cache; a readv takes a lane from the source's pool, keeps up to depth
 * range GETs in flight on it (one connection each over HTTP/1.1, streams of
 * one connection over HTTP/2), and gives it back, so its connections stay
 * open for the next call. Concurrent callers take different lanes (libcurl
 * does not support one connection cache driven from several threads at
 * once); DNS and TLS sessions are shared by all lanes through a curl share
 * object.
 *
 * Every response is checked before its bytes are used: 206 with a
 * Content-Range that starts where asked; 200 only when the whole object was
 * asked for (else the server ignored Range: an error, not silently wrong
 * bytes); the ETag equal to the one seen at open (else the object changed
 * mid-download: PAGEIN_E_CHANGED, and If-Match makes servers that honour it
 * answer 412); exactly the asked length (short = truncated, retried from
 * where it stopped). Transient failures (connection errors, timeouts,
 * truncated bodies, 408, 429, 5xx) are retried PAGEIN_HTTP_RETRIES times
 * (default 4) with exponential backoff from PAGEIN_HTTP_BACKOFF_MS (default
 * 200 ms, capped at 5 s, jittered). A transfer under PAGEIN_HTTP_MIN_RATE
 * (default 1024 bytes/s) for PAGEIN_HTTP_TIMEOUT seconds (default 30) is a
 * timeout, and a request (retries and redirects included) ends by its
 * deadline, PAGEIN_HTTP_TIMEOUT + its bytes / PAGEIN_HTTP_MIN_RATE. Every
 * error names the method, the URL, the Range and what came back.
 *
 * Redirects are followed here, not by libcurl, which would send the
 * configured headers (a token) and a new SigV4 signature to any target:
 * credentials go only to the configured URL's (scheme, host, port), an
 * https -> http redirect is refused, and X-Linked-Etag / X-Repo-Commit are
 * taken from that origin's responses only (docs/SAFETY.md, "Remote
 * sources").
 */
#include "http_int.h"

#include <ctype.h>

#ifdef PAGEIN_HAVE_CURL

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

/* ---- objects ------------------------------------------------------------------ */
static void obj_free(struct http_obj *o) {
    if (!o) return;
    pi_hx_fork_check(o); /* a child frees only what it made */
    for (struct lane *l = o->lanes, *nx; l; l = nx) {
        nx = l->next;
        curl_multi_cleanup(l->m);
        pi_free(l);
    }
    for (unsigned i = 0; i < o->nidle; i++) curl_easy_cleanup(o->idle[i]);
    if (o->share) curl_share_cleanup(o->share);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_destroy(&o->share_lock[i]);
    pthread_mutex_destroy(&o->pool_lock);
    pthread_rwlock_destroy(&o->prefix_lock);
    pthread_mutex_destroy(&o->grow_lock);
    pthread_mutex_destroy(&o->fork_lock);
    pthread_mutex_destroy(&o->resolve_lock);
    for (size_t i = 0; i < o->loc.nretired; i++) pi_free(o->loc.retired[i]);
    pi_free(o->loc.retired);
    pthread_mutex_destroy(&o->loc.lock);
    curl_slist_free_all(o->hdrs);
    curl_slist_free_all(o->hdrs_match);
    curl_slist_free_all(o->match_only);
    pi_free(o->loc.url);
    pi_free(o->orig_url);
    pi_free(o->sigv4);
    pi_free(o->userpwd);
    pi_free(o->cainfo);
    pi_free(o->user);
    pi_free(o->pass);
    pi_free(o->prefix);
    pi_free(o);
}

static char *dupz(const char *s) { return s ? pi_strndup(s, strlen(s)) : NULL; }

/* Credentials for a plain http:// origin travel in clear: said once per
 * process on stderr (the only thing the library prints; a loopback
 * endpoint too, as the tests' servers are). */
static atomic_int plain_http_warned;
static void warn_plain_http(const struct http_obj *o, const struct pi_http_cfg *cfg) {
    if (strncmp(o->origin, "http://", 7) != 0) return;
    int creds = cfg->sigv4 != NULL;
    for (int i = 0; !creds && i < 8 && cfg->headers[i]; i++)
        creds = strncasecmp(cfg->headers[i], "authorization:", 14) == 0 ||
                strncasecmp(cfg->headers[i], "x-amz-security-token:", 21) == 0;
    const char *at = strchr(o->orig_url, '@'), *sl = strchr(o->orig_url + 7, '/');
    if (at && (!sl || at < sl)) creds = 1; /* user:pass@ */
    if (!creds || atomic_exchange(&plain_http_warned, 1)) return;
    fprintf(stderr, "pagein: warning: credentials (a token, a key's signature or a password) are sent in clear to %s "
                    "(plain http); use https\n", o->origin);
}

static int obj_new(struct http_obj **out, const struct pi_http_cfg *cfg, const char *name) {
    FORWARD_IF(pi_curl_load(name)); /* dlopen libcurl, curl_global_init: once per process */
    struct http_obj *o = pi_calloc(1, sizeof *o);
    if (!o) return pi_err(-ENOMEM, "%s: out of memory", name);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_init(&o->share_lock[i], NULL);
    pthread_mutex_init(&o->pool_lock, NULL);
    pthread_rwlock_init(&o->prefix_lock, NULL);
    pthread_mutex_init(&o->grow_lock, NULL);
    pthread_mutex_init(&o->fork_lock, NULL);
    pthread_mutex_init(&o->resolve_lock, NULL);
    pthread_mutex_init(&o->loc.lock, NULL);
    atomic_store(&o->pid, (int)getpid());
    o->name = name;
    o->loc.url = dupz(cfg->url);
    o->orig_url = dupz(cfg->url);
    const char *ca = cfg->cainfo;
    if (!ca || !*ca) ca = getenv("CURL_CA_BUNDLE");
    if (!ca || !*ca) ca = getenv("SSL_CERT_FILE");
    if (ca && *ca) o->cainfo = dupz(ca);
    if (cfg->sigv4) {
        o->sigv4 = dupz(cfg->sigv4);
        o->userpwd = dupz(cfg->userpwd ? cfg->userpwd : ":");
    }
    int bad = !o->loc.url || !o->orig_url || (ca && *ca && !o->cainfo) || (cfg->sigv4 && (!o->sigv4 || !o->userpwd));
    for (int i = 0; !bad && i < 8 && cfg->headers[i]; i++) {
        struct curl_slist *l = curl_slist_append(o->hdrs, cfg->headers[i]);
        if (!l) bad = 1;
        else o->hdrs = l;
    }
    o->share = pi_hx_share_new(o);
    if (bad || !o->share) {
        obj_free(o);
        return pi_err(-ENOMEM, "%s: out of memory", name);
    }
    o->conns = (unsigned)pi_env_long("PAGEIN_HTTP_CONNECTIONS", 16, 1, 256);
    o->retries = (int)pi_env_long("PAGEIN_HTTP_RETRIES", 4, 0, 100);
    o->backoff_ms = pi_env_long("PAGEIN_HTTP_BACKOFF_MS", 200, 0, 60000);
    o->timeout_s = pi_env_long("PAGEIN_HTTP_TIMEOUT", 30, 1, 3600);
    o->min_rate = pi_env_long("PAGEIN_HTTP_MIN_RATE", 1024, 1, 1L << 30);
    o->connect_timeout_s = PI_MIN(o->timeout_s, 10);
    pi_hx_url_origin(o->orig_url, o->origin, sizeof o->origin);
    pi_hx_url_userinfo(o);
    o->loc.first_party = 1;
    warn_plain_http(o, cfg);
    const char *hv = getenv("PAGEIN_HTTP_VERSION");
    o->http_version = (hv && strcmp(hv, "1.1") == 0) ? CURL_HTTP_VERSION_1_1 : CURL_HTTP_VERSION_2TLS;
    *out = o;
    return 0;
}

/* The headers a read sends once the ETag is known: the configured ones
 * plus If-Match (hdrs_match), and If-Match alone for another origin
 * (match_only; NULL: no If-Match there, the ETag check remains). */
static void set_if_match(struct http_obj *o) {
    char h[200];
    snprintf(h, sizeof h, "If-Match: %s", o->etag);
    struct curl_slist *l = NULL;
    for (struct curl_slist *i = o->hdrs; i; i = i->next) {
        struct curl_slist *t = curl_slist_append(l, i->data);
        if (!t) break;
        l = t;
    }
    struct curl_slist *t = curl_slist_append(l, h);
    if (t) o->hdrs_match = t;
    else curl_slist_free_all(l);
    o->match_only = curl_slist_append(NULL, h);
}

/* an open without a request (PI_OPEN_KNOWN, source.h):
 * the caller checked size and identity for many objects at once and has
 * the header. s->identity is the object's ETag (object stores: reads send
 * If-Match with it and compare each response's ETag), except for the Hub,
 * where it is the LFS sha256 (X-Linked-Etag) of a file at a pinned commit:
 * not what the CDN sends as ETag, so there no ETag is compared; the commit
 * pins the bytes and every response's Content-Range total is still checked
 * against the size. Facts are those of an unmeasured remote source. */
static int open_known(struct pi_source *s, const struct pi_http_cfg *cfg) {
    struct http_obj *o;
    FORWARD_IF(obj_new(&o, cfg, s->name));
    int hub = cfg->scheme && strcmp(cfg->scheme, "hf") == 0;
    o->prefix = pi_malloc(1); /* an empty prefix: header reads grow it (grow_prefix) */
    if (!o->prefix) {
        obj_free(o);
        return pi_err(-ENOMEM, "%s: out of memory", s->name);
    }
    o->size = s->size;
    o->loc.locate = hub; /* the Hub redirects every file to its CDN */
    if (hub) snprintf(o->linked_etag, sizeof o->linked_etag, "%s", s->identity);
    else snprintf(o->etag, sizeof o->etag, "%s", s->identity);
    if (o->etag[0] && strncmp(o->etag, "W/", 2) != 0) set_if_match(o);
    s->impl = o;
    s->fd = -1;
    s->facts.storage = PI_STORAGE_REMOTE;
    snprintf(s->facts.fs_type, sizeof s->facts.fs_type, "%s", cfg->scheme ? cfg->scheme : "http");
    s->facts.rotational = -1;
    s->facts.request_bytes = 8u << 20;
    s->facts.depth = o->conns;
    return 0;
}

/* An object for cfg and one transfer of the given mode into a new body
 * buffer of cap bytes, bmax of which it may fill (name: for the errors).
 * On failure nothing is left allocated. */
static int single_new(const struct pi_http_cfg *cfg, const char *name, enum xmode mode, size_t cap, size_t bmax,
                      struct http_obj **op, struct xfer **xp) {
    struct http_obj *o;
    FORWARD_IF(obj_new(&o, cfg, name));
    struct xfer *x = pi_calloc(1, sizeof *x);
    char *buf = pi_malloc(cap);
    if (!x || !buf) {
        pi_free(x);
        pi_free(buf);
        obj_free(o);
        return pi_err(-ENOMEM, "%s: out of memory", name);
    }
    x->mode = mode;
    x->body = buf;
    x->bmax = bmax;
    *op = o;
    *xp = x;
    return 0;
}

int pi_http_open_cfg(struct pi_source *s, const struct pi_http_cfg *cfg, uint32_t flags) {
    if (flags & PI_OPEN_KNOWN) return open_known(s, cfg);
    struct http_obj *o;
    struct xfer *x;
    size_t pre = flags & PI_OPEN_PROBE_ONLY ? PI_PROBE_CHECK_BYTES : PI_HTTP_PREFIX; /* the caller compares its header */
    FORWARD_IF(single_new(cfg, s->name, X_PROBE, pre, pre, &o, &x));
    uint8_t *buf = (uint8_t *)x->body;
    double t0 = pi_now_s();
    int rc = pi_hx_single(o, x);
    double t1 = pi_now_s();
    if (rc == 0) {
        if (x->status == 206 && x->have_cr) {
            o->size = x->cr_total;
        } else if (x->status == 416 && x->cr_unsat) {
            o->size = x->cr_total;
            x->blen = 0;
            if (o->size != 0)
                rc = pi_err(PAGEIN_E_REMOTE, "GET %s (Range: bytes=%s): HTTP 416 for a %llu-byte object", pi_hx_loc_url(o),
                            x->range, (unsigned long long)o->size);
        } else if (x->status == 200 && x->have_clen) {
            o->size = x->clen;
            if (x->blen < o->size) o->no_ranges = 1;
            else if (x->blen > o->size)
                rc = pi_err(PAGEIN_E_REMOTE, "GET %s: body longer than its Content-Length", pi_hx_loc_url(o));
        } else {
            rc = pi_err(PAGEIN_E_REMOTE, "GET %s (Range: bytes=%s): HTTP %ld without a usable Content-Range or "
                        "Content-Length%s", pi_hx_loc_url(o), x->range, x->status, x->status != 200 ? "" :
                        ": a generated page such as a folder listing, not a file? Plain HTTP cannot list folders: name "
                        "a file or a *.safetensors.index.json, or give plan/pull/open_model the folder ending in '/' "
                        "(they try the usual file names); s3:// and hf:// list prefixes (docs/REMOTE.md)");
        }
    }
    if (rc == 0 && x->blen > o->size)
        rc = pi_err(PAGEIN_E_REMOTE, "GET %s (Range: bytes=%s): %zu bytes for a %llu-byte object", pi_hx_loc_url(o), x->range,
                    x->blen, (unsigned long long)o->size);
    if (rc < 0) {
        pi_free(x);
        pi_free(buf);
        obj_free(o);
        return rc;
    }
    snprintf(o->etag, sizeof o->etag, "%s", x->etag);
    snprintf(o->linked_etag, sizeof o->linked_etag, "%s", x->linked_etag);
    snprintf(o->commit, sizeof o->commit, "%s", x->commit);
    snprintf(o->fp_etag, sizeof o->fp_etag, "%s", x->fp_etag);
    o->prefix = buf;
    o->prefix_len = x->blen;
    if (o->etag[0] && strncmp(o->etag, "W/", 2) != 0) set_if_match(o);
    pi_free(x);
    s->impl = o;
    s->size = o->size;
    s->fd = -1;
    /* identity: the Hub's sha256 (X-Linked-Etag) when stated, else the ETag */
    const char *id = o->linked_etag[0] ? o->linked_etag : o->etag;
    snprintf(s->identity, sizeof s->identity, "%s", id);
    s->facts.storage = PI_STORAGE_REMOTE;
    snprintf(s->facts.fs_type, sizeof s->facts.fs_type, "%s", cfg->scheme ? cfg->scheme : "http");
    s->facts.rotational = -1;
    s->facts.latency_ns = (uint64_t)((t1 - t0) * 1e9);
    s->facts.request_bytes = 8u << 20;
    s->facts.depth = o->conns;
    s->facts.measured = 0;
    return 0;
}


struct vlane {
    struct http_obj *o;
    struct vshare *sh;
    unsigned depth;
    pi_read_done_fn done;
    void *arg;
    int rc;
    char err[512]; /* the lane's error detail (pi_err's is per thread) */
};

static void vlane_run(struct vlane *v) {
    struct lane *ln = pi_hx_lane_get(v->o);
    if (!ln) {
        atomic_store(&v->sh->stop, 1);
        v->rc = pi_err(-ENOMEM, "%s: cannot create a libcurl multi handle", v->o->name);
    } else {
        v->rc = pi_hx_readv_lane(v->o, ln, v->sh, v->depth, v->done, v->arg);
        pi_hx_lane_put(v->o, ln);
    }
    if (v->rc < 0) snprintf(v->err, sizeof v->err, "%s", pagein_last_error_detail());
}

static void *vlane_thread(void *p) {
    vlane_run(p);
    return NULL;
}

/* Many requests are spread over several lanes, each driven by its own
 * thread (PAGEIN_HTTP_THREADS, default up to 4, one per 4 requests in
 * flight): one thread receiving every byte, copying it out and taking the
 * destination's first-touch page faults caps a readv at one core's rate,
 * as `pagein bench remote` showed (remote load 0.5x pull, whose 16
 * threads each drive one connection). */
int pi_http_readv(struct pi_source *s, struct pi_read_req *reqs, size_t n, unsigned depth, pi_read_done_fn done,
                  void *arg) {
    struct http_obj *o = s->impl;
    if (n == 0) return 0;
    pi_hx_fork_check(o);
    int lrc = pi_hx_known_locate(o);
    if (lrc < 0) {
        for (size_t i = 0; i < n; i++) reqs[i].rc = lrc;
        return lrc;
    }
    if (depth == 0) depth = o->conns;
    if (depth > 256) depth = 256;
    if (depth > n) depth = (unsigned)n;
    unsigned nt = (unsigned)pi_env_long("PAGEIN_HTTP_THREADS", 4, 1, 64);
    if (nt > (depth + 3) / 4) nt = (depth + 3) / 4;
    if (nt < 1) nt = 1;
    struct vshare sh = {.reqs = reqs, .n = n};
    struct vlane v[64];
    pthread_t tid[64];
    unsigned started = 0;
    for (unsigned t = 0; t < nt; t++)
        v[t] = (struct vlane){o, &sh, depth / nt + (t < depth % nt), done, arg, 0, ""};
    for (unsigned t = 1; t < nt; t++) {
        if (pthread_create(&tid[t], NULL, vlane_thread, &v[t]) != 0) break; /* run with fewer */
        started = t;
    }
    if (started + 1 < nt) /* the threads that did not start: their depth to this one */
        for (unsigned t = started + 1; t < nt; t++) v[0].depth += v[t].depth;
    vlane_run(&v[0]);
    for (unsigned t = 1; t <= started; t++) pthread_join(tid[t], NULL);
    /* the first real failure, else a stop (a done callback's value) */
    int rc = 0;
    const char *err = "";
    for (unsigned t = 0; t <= started; t++) {
        if (v[t].rc == 0) continue;
        if (rc == 0 || (rc == PAGEIN_E_CANCELLED && v[t].rc != PAGEIN_E_CANCELLED)) rc = v[t].rc, err = v[t].err;
    }
    for (size_t i = PI_MIN(atomic_load(&sh.next), n); i < n; i++) reqs[i].rc = PAGEIN_E_CANCELLED;
    if (rc < 0 && err[0]) pi_err(rc, "%s", err);
    return rc;
}

/* A header being read from the start (GGUF metadata, whose length only a
 * parse reveals; the reader grows its prefix and retries): a blocking read
 * that continues the kept prefix fetches up to 16 x the prefix (at most
 * PI_HTTP_PREFIX_MAX) in one request and keeps it, so the retries cost no
 * further requests. `pagein inspect URL` thus takes one request for headers
 * within 256 KiB and two up to 4 MiB. 1 if served, 0 if not applicable. */
#define PI_HTTP_PREFIX_MAX (16u << 20)
static int grow_prefix(struct pi_source *s, struct http_obj *o, void *buf, uint64_t len, uint64_t off, int *rc) {
    uint64_t end = off + len;
    pthread_mutex_lock(&o->grow_lock);
    size_t have = o->prefix_len;
    if (off > have || end <= have || end > PI_HTTP_PREFIX_MAX || o->no_ranges) {
        pthread_mutex_unlock(&o->grow_lock);
        return 0;
    }
    uint64_t want = PI_MAX(end, (uint64_t)have * 16);
    if (want > PI_HTTP_PREFIX_MAX) want = PI_MAX(end, PI_HTTP_PREFIX_MAX);
    if (want > o->size) want = o->size;
    uint8_t *nb = pi_malloc((size_t)want);
    if (!nb) {
        pthread_mutex_unlock(&o->grow_lock);
        return 0; /* a plain read will do */
    }
    memcpy(nb, o->prefix, have); /* only grow_lock holders write the prefix */
    struct pi_read_req r = {nb + have, have, want - have, 0, NULL};
    *rc = pi_http_readv(s, &r, 1, 1, NULL, NULL);
    if (*rc == 0) {
        memcpy(buf, nb + off, (size_t)len);
        pthread_rwlock_wrlock(&o->prefix_lock);
        uint8_t *old = o->prefix;
        o->prefix = nb;
        o->prefix_len = (size_t)want;
        pthread_rwlock_unlock(&o->prefix_lock);
        pi_free(old);
    } else {
        pi_free(nb);
    }
    pthread_mutex_unlock(&o->grow_lock);
    return 1;
}

int pi_http_read(struct pi_source *s, void *buf, uint64_t len, uint64_t off) {
    struct http_obj *o = s->impl;
    pi_hx_fork_check(o);
    int grc = 0;
    uint64_t gend;
    if (!pi_add_overflow(off, len, &gend) && gend <= o->size && grow_prefix(s, o, buf, len, off, &grc)) return grc;
    /* a large read is split into requests served in parallel */
    uint64_t chunk = s->facts.request_bytes ? s->facts.request_bytes : (8u << 20);
    if (len <= chunk) {
        struct pi_read_req r = {buf, off, len, 0, NULL};
        return pi_http_readv(s, &r, 1, 1, NULL, NULL);
    }
    size_t n = (size_t)((len + chunk - 1) / chunk);
    struct pi_read_req *r = pi_calloc(n, sizeof *r);
    if (!r) return pi_err(-ENOMEM, "%s: out of memory", o->name);
    for (size_t i = 0; i < n; i++) {
        r[i].buf = (uint8_t *)buf + i * chunk;
        r[i].off = off + i * chunk;
        r[i].len = PI_MIN(chunk, len - i * chunk);
    }
    int rc = pi_http_readv(s, r, n, 0, NULL, NULL);
    pi_free(r);
    return rc;
}

void pi_http_close(struct pi_source *s) {
    if (!s) return;
    obj_free(s->impl);
    s->impl = NULL;
}

const char *pi_http_etag(const struct pi_source *s) { return s && s->impl ? ((struct http_obj *)s->impl)->etag : ""; }
const char *pi_http_linked_etag(const struct pi_source *s) {
    return s && s->impl ? ((struct http_obj *)s->impl)->linked_etag : "";
}
const char *pi_http_repo_commit(const struct pi_source *s) {
    return s && s->impl ? ((struct http_obj *)s->impl)->commit : "";
}
const char *pi_http_url(const struct pi_source *s) { return s && s->impl ? pi_hx_loc_url(s->impl) : ""; }
int pi_http_no_ranges(const struct pi_source *s) { return s && s->impl ? ((struct http_obj *)s->impl)->no_ranges : 0; }

int pi_http_stream(struct pi_source *s, pi_source_sink_fn sink, void *ctx) {
    struct http_obj *o = s->impl;
    pi_hx_fork_check(o);
    struct xfer *x = pi_calloc(1, sizeof *x);
    if (!x) return pi_err(-ENOMEM, "%s: out of memory", o->name);
    x->mode = X_STREAM;
    x->sink = sink;
    x->sink_ctx = ctx;
    int rc = pi_hx_single(o, x);
    pi_free(x);
    return rc;
}

const char *pi_http_origin_etag(const struct pi_source *s) {
    return s && s->impl ? ((struct http_obj *)s->impl)->fp_etag : "";
}
void pi_http_counters(const struct pi_source *s, uint64_t *requests, uint64_t *retries) {
    struct http_obj *o = s ? s->impl : NULL;
    if (requests) *requests = o ? atomic_load(&o->requests) : 0;
    if (retries) *retries = o ? atomic_load(&o->retried) : 0;
}

int pi_http_fetch(const struct pi_http_cfg *cfg, char **body, size_t *len, size_t max, long *status) {
    struct http_obj *o;
    *body = NULL;
    *len = 0;
    struct xfer *x;
    FORWARD_IF(single_new(cfg, cfg->url, X_FETCH, max + 1, max, &o, &x));
    char *buf = x->body;
    int rc = pi_hx_single(o, x);
    if (rc == 0) {
        buf[x->blen] = 0;
        *body = buf;
        *len = x->blen;
        if (status) *status = x->status;
        if (x->status < 200 || x->status > 299) {
            /* the error body went to errbody: hand that back instead */
            size_t k = PI_MIN(x->errlen, max);
            memcpy(buf, x->errbody, k);
            buf[k] = 0;
            *len = k;
        }
    } else {
        pi_free(buf);
    }
    pi_free(x);
    obj_free(o);
    return rc;
}

/* ---- the http(s):// source ------------------------------------------------------ */
static int http_match(const char *uri) {
    return strncasecmp(uri, "http://", 7) == 0 || strncasecmp(uri, "https://", 8) == 0;
}

static int http_open(struct pi_source *s, const char *uri, uint32_t flags) {
    struct pi_http_cfg cfg = {0};
    cfg.url = uri;
    cfg.scheme = strncasecmp(uri, "https://", 8) == 0 ? "https" : "http";
    return pi_http_open_cfg(s, &cfg, flags);
}

int pi_hex_tag(const char *s, size_t n, char *out) {
    if (strncmp(s, "W/", 2) == 0) s += 2;
    if (*s == '"') s++;
    size_t l = strcspn(s, "\"");
    if (l != n || (s[l] && s[l + 1])) return 0;
    for (size_t i = 0; i < n; i++) {
        if (pi_hexval(s[i]) < 0) return 0;
        out[i] = (char)(s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 'a' : s[i]);
    }
    out[n] = 0;
    return 1;
}

int pi_http_checksum(struct pi_source *s, struct pi_checksum *c, int md5_etag) {
    if (pi_hex_tag(pi_http_linked_etag(s), 64, c->hex)) {
        snprintf(c->algo, sizeof c->algo, "sha256");
        return 1;
    }
    if (md5_etag && pi_hex_tag(pi_http_origin_etag(s), 32, c->hex)) {
        snprintf(c->algo, sizeof c->algo, "md5");
        return 1;
    }
    c->hex[0] = 0;
    return 0;
}

/* A folder: the path ends with '/' and there is no query or fragment. */
int pi_http_is_prefix(const char *uri) {
    size_t n = strlen(uri);
    return n && uri[n - 1] == '/' && !uri[strcspn(uri, "?#")];
}

static int http_checksum(struct pi_source *s, struct pi_checksum *c) { return pi_http_checksum(s, c, 0); }

const struct pi_source_ops pi_source_http = {
    .name = "http",
    .schemes = "http://, https://",
    .remote = 1,
    .match = http_match,
    .open = http_open,
    .readv = pi_http_readv,
    .read = pi_http_read,
    .close = pi_http_close,
    .is_prefix = pi_http_is_prefix,
    .list = NULL, /* HTTP has no listing: callers try the usual names */
    .object_name = NULL,
    .checksum = http_checksum,
    .cache_place = NULL,
    .counters = pi_http_counters,
    .ranges_ignored = pi_http_no_ranges,
    .stream = pi_http_stream,
};

/* Appends s percent-encoded (RFC 3986 unreserved kept; '/' kept when
 * keep_slash) to out (cap bytes, NUL-terminated). */
void pi_url_encode(char *out, size_t cap, const char *s, int keep_slash) {
    size_t o = strlen(out);
    for (; *s && o + 4 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~' || (keep_slash && ch == '/')) {
            out[o++] = (char)ch;
        } else {
            snprintf(out + o, cap - o, "%%%02X", ch);
            o += 3;
        }
    }
    out[o] = 0;
}

#endif /* PAGEIN_HAVE_CURL */
