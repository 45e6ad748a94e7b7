/*
 * http.c - the http:// and https:// source, and the HTTP transport every
 * remote source uses (remote.h, docs/REMOTE.md). Needs libcurl
 * (PAGEIN_HAVE_CURL, mk/remote.mk).
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
#include "remote.h"

#include <ctype.h>

#ifdef PAGEIN_HAVE_CURL

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define MAX_LANES 64
#define MAX_IDLE_HANDLES 128
#define MAX_HDRS 16

struct lane {
    CURLM *m;
    struct lane *next;
};

struct http_obj {
    char *url;      /* where requests go (the probe's effective URL) */
    char *orig_url; /* as configured */
    char origin[300];  /* scheme://host:port of orig_url: the only one credentials go to */
    _Atomic int first_party;   /* url has that origin (reached without leaving it) */
    struct curl_slist *hdrs;       /* configured headers */
    struct curl_slist *hdrs_match; /* + If-Match: ETag */
    struct curl_slist *match_only; /* If-Match alone: for another origin */
    char *sigv4, *userpwd, *cainfo;
    char *user, *pass; /* the configured URL's userinfo (decoded), or NULL */
    char etag[160], linked_etag[160], commit[96];
    char fp_etag[160]; /* the ETag the first party (origin) sent, or "" */
    uint8_t *prefix; /* the object's first prefix_len bytes (grown by header reads) */
    size_t prefix_len;
    pthread_rwlock_t prefix_lock; /* readers copy out, a header read swaps in a longer prefix */
    pthread_mutex_t grow_lock;    /* one prefix growth at a time */
    int no_ranges; /* the probe got 200 with the whole object */
    uint64_t size;
    const char *name; /* the source's name, for messages */
    unsigned conns;
    int retries;
    long backoff_ms, timeout_s, connect_timeout_s;
    long min_rate; /* bytes/s: slower for timeout_s is a timeout (PAGEIN_HTTP_MIN_RATE) */
    long http_version;
    CURLSH *share;
    pthread_mutex_t share_lock[CURL_LOCK_DATA_LAST];
    pthread_mutex_t pool_lock;
    struct lane *lanes;
    unsigned nlanes;
    CURL *idle[MAX_IDLE_HANDLES];
    unsigned nidle;
    _Atomic uint64_t requests, retried;
    /* issue 27: the process that made the handles above (fork_check), and
     * the URL's re-resolution after a redirect target refused (reresolve):
     * url_gen moves by 2 with each change of url (odd during one), replaced URLs are kept in retired
     * until obj_free (a message may still be formatting one) */
    _Atomic int pid;
    pthread_mutex_t fork_lock, resolve_lock;
    _Atomic int redirected; /* written by reresolve under resolve_lock, read by every lane */
    _Atomic unsigned url_gen;
    char **retired;
    size_t nretired;
    _Atomic int locate; /* issue 28: opened with no request (open_known); the first read asks where redirects lead */
};

enum xmode { X_RANGE, X_PROBE, X_FETCH, X_STREAM };

struct xfer {
    struct http_obj *o;
    enum xmode mode;
    CURL *e;
    struct pi_read_req *req; /* X_RANGE */
    uint64_t got;            /* X_RANGE: bytes of req delivered */
    uint64_t start;          /* first byte asked for by the current attempt */
    char *body;              /* X_PROBE, X_FETCH */
    size_t blen, bmax;
    int enough;              /* X_PROBE: stopped on purpose after bmax bytes */
    /* the current response (reset at each status line) */
    long status;
    int have_cr, cr_unsat;
    uint64_t cr_start, cr_end, cr_total;
    uint64_t clen;
    int have_clen;
    char etag[160], linked_etag[160], commit[96];
    char fp_etag[160]; /* ETag of the last first-party response */
    uint64_t linked_size;
    /* where this request goes: o->url, or a redirect's target */
    char *url;     /* malloc'd redirect target, NULL = o->url */
    int third;     /* the target is not the configured origin (or a redirect left it): no credentials */
    int redirects;
    double deadline; /* wall clock (now_s) by which the request, retries included, ends; 0 = not set */
    double t_attempt;  /* when the current attempt started */
    uint64_t abytes;   /* body bytes the current attempt received */
    char errbody[600];
    size_t errlen;
    int checked;   /* the response's headers were checked (first body byte) */
    int fail;      /* our own abort: the code */
    char failmsg[320];
    char range[64];
    char curlerr[CURL_ERROR_SIZE];
    int attempt;
    double retry_at;
    int state; /* 0 idle, 1 running, 2 waiting for a retry */
    /* issue 27 */
    unsigned gen;       /* o->url_gen when this attempt started */
    int reresolved;     /* X_RANGE: this request already re-resolved its URL */
    pi_source_sink_fn sink; /* X_STREAM: where the body goes */
    void *sink_ctx;
};

/* ---- global init ---------------------------------------------------------- */
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }


static const char *reason(long st) {
    switch (st) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 410: return "Gone";
    case 412: return "Precondition Failed";
    case 416: return "Range Not Satisfiable";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "";
    }
}

/* ---- share locks and the handle/lane pools -------------------------------- */
static void share_lock(CURL *h, curl_lock_data d, curl_lock_access a, void *u) {
    struct http_obj *o = u;
    if ((int)d >= 0 && d < CURL_LOCK_DATA_LAST) pthread_mutex_lock(&o->share_lock[d]);
}
static void share_unlock(CURL *h, curl_lock_data d, void *u) {
    struct http_obj *o = u;
    if ((int)d >= 0 && d < CURL_LOCK_DATA_LAST) pthread_mutex_unlock(&o->share_lock[d]);
}

static size_t on_header(char *p, size_t sz, size_t nm, void *u);
static size_t on_body(char *p, size_t sz, size_t nm, void *u);

/* Where requests go now (reresolve may replace it on another thread; a
 * replaced string stays allocated until obj_free). */
static const char *url_now(const struct http_obj *o) { return __atomic_load_n(&o->url, __ATOMIC_ACQUIRE); }

static CURLSH *share_new(struct http_obj *o) {
    CURLSH *sh = curl_share_init();
    if (!sh) return NULL;
    curl_share_setopt(sh, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(sh, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(sh, CURLSHOPT_USERDATA, o);
    curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    return sh;
}

/* After fork(): a child must not use the parent's kept-alive connections
 * (both would send on the same sockets and read each other's responses)
 * nor clean them up (a TLS close_notify or an HTTP/2 GOAWAY would go out on
 * the parent's socket). The first call in a child forgets the parent's
 * lanes, idle handles and share object, leaving their memory and its
 * copies of the sockets unused until the child exits, and starts its own;
 * the locks, which a parent thread may have held at the fork, are made
 * anew. Called at every entry that uses the pools (readv, read, stream,
 * close). */
static void fork_check(struct http_obj *o) {
    int me = (int)getpid();
    if (atomic_load(&o->pid) == me) return;
    pthread_mutex_lock(&o->fork_lock);
    if (atomic_load(&o->pid) != me) {
        for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_init(&o->share_lock[i], NULL);
        pthread_mutex_init(&o->pool_lock, NULL);
        pthread_mutex_init(&o->resolve_lock, NULL);
        pthread_mutex_init(&o->grow_lock, NULL);
        pthread_rwlock_init(&o->prefix_lock, NULL);
        o->lanes = NULL;
        o->nlanes = 0;
        o->nidle = 0;
        o->share = share_new(o); /* NULL: the handles share nothing */
        atomic_store(&o->pid, me);
    }
    pthread_mutex_unlock(&o->fork_lock);
}

static CURL *handle_get(struct http_obj *o) {
    CURL *e = NULL;
    pthread_mutex_lock(&o->pool_lock);
    if (o->nidle) e = o->idle[--o->nidle];
    pthread_mutex_unlock(&o->pool_lock);
    if (e) return e;
    e = curl_easy_init();
    if (!e) return NULL;
    if (o->share) curl_easy_setopt(e, CURLOPT_SHARE, o->share);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    /* redirects are followed by xfer_finish, not libcurl: libcurl sends
     * CURLOPT_HTTPHEADER (a token, x-amz-security-token) and re-signs
     * SigV4 for any target; credentials go to the configured origin only */
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, o->http_version);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "pagein/" PAGEIN_VERSION_STRING);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, o->connect_timeout_s);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, o->min_rate);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, o->timeout_s);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 512L * 1024);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    if (o->cainfo) curl_easy_setopt(e, CURLOPT_CAINFO, o->cainfo);
    return e; /* SigV4 and credentials: per request, xfer_start */
}

static void handle_put(struct http_obj *o, CURL *e) {
    if (!e) return;
    pthread_mutex_lock(&o->pool_lock);
    if (o->nidle < MAX_IDLE_HANDLES) {
        o->idle[o->nidle++] = e;
        e = NULL;
    }
    pthread_mutex_unlock(&o->pool_lock);
    if (e) curl_easy_cleanup(e);
}

static struct lane *lane_get(struct http_obj *o) {
    struct lane *l = NULL;
    pthread_mutex_lock(&o->pool_lock);
    if (o->lanes) {
        l = o->lanes;
        o->lanes = l->next;
        o->nlanes--;
    }
    pthread_mutex_unlock(&o->pool_lock);
    if (l) return l;
    l = pi_calloc(1, sizeof *l);
    if (!l) return NULL;
    l->m = curl_multi_init();
    if (!l->m) {
        pi_free(l);
        return NULL;
    }
    curl_multi_setopt(l->m, CURLMOPT_MAXCONNECTS, 256L);
    return l;
}

static void lane_put(struct http_obj *o, struct lane *l) {
    if (!l) return;
    pthread_mutex_lock(&o->pool_lock);
    if (o->nlanes < MAX_LANES) {
        l->next = o->lanes;
        o->lanes = l;
        o->nlanes++;
        l = NULL;
    }
    pthread_mutex_unlock(&o->pool_lock);
    if (l) {
        curl_multi_cleanup(l->m);
        pi_free(l);
    }
}

/* ---- response parsing ------------------------------------------------------ */
static void copy_hval(char *dst, size_t cap, const char *v, size_t n) {
    while (n && (*v == ' ' || *v == '\t')) v++, n--;
    while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
    if (n >= cap) n = cap - 1;
    memcpy(dst, v, n);
    dst[n] = 0;
}

static int hname(const char *p, size_t n, const char *name, const char **val, size_t *vlen) {
    size_t k = strlen(name);
    if (n <= k || p[k] != ':' || strncasecmp(p, name, k) != 0) return 0;
    *val = p + k + 1;
    *vlen = n - k - 1;
    return 1;
}

static size_t on_header(char *p, size_t sz, size_t nm, void *u) {
    struct xfer *x = u;
    size_t n = sz * nm;
    const char *v;
    size_t vl;
    char tmp[200];
    if (n >= 5 && memcmp(p, "HTTP/", 5) == 0) {
        /* a new response (1xx come first): reset what describes one
         * response; the Hub's X-Linked-* and X-Repo-Commit arrive on its
         * redirect and are kept across the redirect's next request */
        x->status = 0;
        x->have_cr = x->cr_unsat = 0;
        x->have_clen = 0;
        x->etag[0] = 0;
        x->errlen = 0;
        x->checked = 0;
        const char *sp = memchr(p, ' ', n);
        if (sp) x->status = strtol(sp + 1, NULL, 10);
    } else if (hname(p, n, "content-range", &v, &vl)) {
        copy_hval(tmp, sizeof tmp, v, vl);
        unsigned long long a, b, t;
        if (sscanf(tmp, "bytes %llu-%llu/%llu", &a, &b, &t) == 3) {
            x->have_cr = 1;
            x->cr_start = a;
            x->cr_end = b;
            x->cr_total = t;
        } else if (sscanf(tmp, "bytes */%llu", &t) == 1) {
            x->cr_unsat = 1;
            x->cr_total = t;
        }
    } else if (hname(p, n, "content-length", &v, &vl)) {
        copy_hval(tmp, sizeof tmp, v, vl);
        x->clen = strtoull(tmp, NULL, 10);
        x->have_clen = 1;
    } else if (hname(p, n, "etag", &v, &vl)) {
        copy_hval(x->etag, sizeof x->etag, v, vl);
        if (!x->third) copy_hval(x->fp_etag, sizeof x->fp_etag, v, vl);
    } else if (x->third) {
        /* identity and checksums come from the configured origin only: a
         * redirect target cannot name the blob or state its own sha256 */
    } else if (hname(p, n, "x-linked-etag", &v, &vl)) {
        copy_hval(x->linked_etag, sizeof x->linked_etag, v, vl);
    } else if (hname(p, n, "x-linked-size", &v, &vl)) {
        copy_hval(tmp, sizeof tmp, v, vl);
        x->linked_size = strtoull(tmp, NULL, 10);
    } else if (hname(p, n, "x-repo-commit", &v, &vl)) {
        copy_hval(x->commit, sizeof x->commit, v, vl);
    }
    return n;
}

static size_t xfail(struct xfer *x, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static size_t xfail(struct xfer *x, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->failmsg, sizeof x->failmsg, fmt, ap);
    va_end(ap);
    x->fail = code;
    return 0; /* makes libcurl abort the transfer */
}

static int etag_differs(const char *a, const char *b) {
    if (!a[0] || !b[0]) return 0;
    /* weak and strong forms of the same tag are the same version here */
    if (strncmp(a, "W/", 2) == 0) a += 2;
    if (strncmp(b, "W/", 2) == 0) b += 2;
    return strcmp(a, b) != 0;
}


static size_t on_body(char *p, size_t sz, size_t nm, void *u) {
    struct xfer *x = u;
    struct http_obj *o = x->o;
    size_t n = sz * nm;
    x->abytes += n;
    if (x->status < 200 || x->status > 299) {
        /* an error page: keep its start for the message */
        size_t k = PI_MIN(n, sizeof x->errbody - 1 - x->errlen);
        memcpy(x->errbody + x->errlen, p, k);
        x->errlen += k;
        x->errbody[x->errlen] = 0;
        return n;
    }
    if (x->mode == X_RANGE) {
        struct pi_read_req *r = x->req;
        uint64_t want = r->len - x->got;
        if (!x->checked) {
            x->checked = 1;
            if (x->status == 206) {
                if (!x->have_cr || x->cr_start != x->start)
                    return xfail(x, PAGEIN_E_REMOTE, "answered 206 with Content-Range %s%llu-%llu, expected bytes %llu-",
                                 x->have_cr ? "bytes " : "(missing) ", (unsigned long long)x->cr_start,
                                 (unsigned long long)x->cr_end, (unsigned long long)x->start);
                if (o->size && x->cr_total != o->size)
                    return xfail(x, PAGEIN_E_CHANGED, "object changed: it is now %llu bytes, was %llu at open",
                                 (unsigned long long)x->cr_total, (unsigned long long)o->size);
            } else if (x->status == 200) {
                if (!(x->start == 0 && want == o->size))
                    return xfail(x, PAGEIN_E_REMOTE, "the server ignored Range (answered 200 with the whole object)");
            } else {
                return xfail(x, PAGEIN_E_REMOTE, "unexpected status %ld", x->status);
            }
            if (etag_differs(x->etag, o->etag))
                return xfail(x, PAGEIN_E_CHANGED, "object changed during the download: ETag %s, was %s at open",
                             x->etag, o->etag);
        }
        if (n > want)
            return xfail(x, PAGEIN_E_REMOTE, "the server sent more than the %llu bytes asked",
                         (unsigned long long)(r->len - x->got + 0));
        memcpy((uint8_t *)r->buf + x->got, p, n);
        x->got += n;
        return n;
    }
    if (x->mode == X_STREAM) {
        if (!x->checked) {
            x->checked = 1;
            if (x->status != 200) return xfail(x, PAGEIN_E_REMOTE, "unexpected status %ld", x->status);
            if (x->have_clen && x->clen != o->size)
                return xfail(x, PAGEIN_E_CHANGED, "object changed: it is now %llu bytes, was %llu at open",
                             (unsigned long long)x->clen, (unsigned long long)o->size);
            if (etag_differs(x->etag, o->etag))
                return xfail(x, PAGEIN_E_CHANGED, "object changed during the download: ETag %s, was %s at open",
                             x->etag, o->etag);
        }
        if (n > o->size - x->got)
            return xfail(x, PAGEIN_E_REMOTE, "the server sent more than the %llu-byte object",
                         (unsigned long long)o->size);
        int s = x->sink(x->sink_ctx, p, n, x->got);
        if (s < 0) return xfail(x, s, "%s", pagein_last_error_detail());
        x->got += n;
        return n;
    }
    /* X_PROBE, X_FETCH */
    size_t room = x->bmax - x->blen;
    if (n > room) {
        if (x->mode == X_PROBE) {
            memcpy(x->body + x->blen, p, room);
            x->blen += room;
            x->enough = 1;
            return 0;
        }
        return xfail(x, PAGEIN_E_LIMIT, "the body is larger than %zu bytes", x->bmax);
    }
    memcpy(x->body + x->blen, p, n);
    x->blen += n;
    return n;
}

/* ---- one transfer ------------------------------------------------------------ */
static int transient_curl(CURLcode c) {
    switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
        return 1;
    default:
        return 0;
    }
}
static int transient_status(long st) { return st == 408 || st == 429 || (st >= 500 && st <= 599); }

/* Configures x->e for the next attempt of x and adds it to the lane. */
static int xfer_start(struct http_obj *o, CURLM *m, struct xfer *x) {
    if (!x->e) x->e = handle_get(o);
    if (!x->e) return pi_err(-ENOMEM, "%s: cannot create a libcurl handle", o->url);
    x->gen = atomic_load(&o->url_gen);
    CURL *e = x->e;
    x->status = 0;
    x->have_cr = x->cr_unsat = x->have_clen = 0;
    x->etag[0] = 0;
    x->errlen = 0;
    x->checked = 0;
    x->fail = 0;
    x->failmsg[0] = 0;
    x->curlerr[0] = 0;
    x->enough = 0;
    /* the target: a redirect's (x->url, x->third), else o->url, which is
     * another origin when the probe was redirected away from it; o->url and
     * o->first_party read as one pair (single() changes them with url_gen
     * odd), so an old URL never goes with a newer URL's credentials */
    const char *target = x->url;
    for (int paired = x->url != NULL; !paired;) {
        unsigned g = atomic_load(&o->url_gen);
        const char *u = url_now(o);
        int fp = atomic_load(&o->first_party);
        if (!(g & 1) && atomic_load(&o->url_gen) == g) {
            target = u;
            x->third = !fp;
            paired = 1;
        }
    }
    int third = x->third;
    if (x->mode == X_RANGE) {
        x->start = x->req->off + x->got;
        uint64_t end = x->req->off + x->req->len - 1;
        snprintf(x->range, sizeof x->range, "%llu-%llu", (unsigned long long)x->start, (unsigned long long)end);
        curl_easy_setopt(e, CURLOPT_RANGE, x->range);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, third ? o->match_only : o->hdrs_match ? o->hdrs_match : o->hdrs);
    } else if (x->mode == X_PROBE) {
        x->blen = 0;
        x->start = 0;
        snprintf(x->range, sizeof x->range, "0-%llu", (unsigned long long)x->bmax - 1);
        curl_easy_setopt(e, CURLOPT_RANGE, x->range);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, third ? NULL : o->hdrs);
    } else if (x->mode == X_STREAM) {
        x->got = 0; /* a retry starts over: the server cannot resume */
        x->start = 0;
        x->range[0] = 0;
        curl_easy_setopt(e, CURLOPT_RANGE, NULL);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, third ? o->match_only : o->hdrs_match ? o->hdrs_match : o->hdrs);
    } else {
        x->blen = 0;
        x->range[0] = 0;
        curl_easy_setopt(e, CURLOPT_RANGE, NULL);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, third ? NULL : o->hdrs);
    }
    /* credentials: to the configured origin only */
    if (o->sigv4 && !third) {
        curl_easy_setopt(e, CURLOPT_AWS_SIGV4, o->sigv4);
        curl_easy_setopt(e, CURLOPT_USERPWD, o->userpwd);
    } else {
        curl_easy_setopt(e, CURLOPT_AWS_SIGV4, NULL);
        curl_easy_setopt(e, CURLOPT_USERPWD, NULL);
        curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        if (o->user && !third) { /* user:pass@ of the configured URL, also after a same-origin redirect */
            curl_easy_setopt(e, CURLOPT_USERNAME, o->user);
            curl_easy_setopt(e, CURLOPT_PASSWORD, o->pass ? o->pass : "");
        }
    }
    /* the deadline: PAGEIN_HTTP_TIMEOUT plus the asked bytes at the
     * minimum rate, for all attempts and redirects of the request */
    double now = pi_now_s();
    if (x->deadline == 0) {
        uint64_t want = x->mode == X_RANGE ? x->req->len : x->mode == X_PROBE ? x->bmax : x->mode == X_STREAM ? o->size : PI_MIN(x->bmax, 4u << 20);
        x->deadline = now + (double)o->timeout_s + (double)want / (double)o->min_rate;
    }
    double left = x->deadline - now;
    x->t_attempt = now;
    x->abytes = 0;
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, left > 0.001 ? (long)(left * 1000) + 1 : 1L);
    curl_easy_setopt(e, CURLOPT_URL, target);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->curlerr);
    atomic_fetch_add(&o->requests, 1);
    if (curl_multi_add_handle(m, e) != CURLM_OK) return pi_err(PAGEIN_E_REMOTE, "%s: curl_multi_add_handle failed", o->url);
    x->state = 1;
    return 0;
}

/* The request as a message prefix: "GET URL (Range: bytes=A-B)". */
static void req_desc(const struct http_obj *o, const struct xfer *x, char *buf, size_t cap) {
    char to[1100] = "";
    if (x->url) snprintf(to, sizeof to, ", redirected to %s", x->url);
    if (x->range[0]) snprintf(buf, cap, "GET %s%s (Range: bytes=%s)", url_now(o), to, x->range);
    else snprintf(buf, cap, "GET %s%s", url_now(o), to);
}

/* What an S3/GCS error body says: "<Code>: <Message>", else the body's
 * first line. */
static void body_summary(const char *b, char *out, size_t cap) {
    out[0] = 0;
    const char *c = strstr(b, "<Code>"), *m = strstr(b, "<Message>");
    if (c) {
        c += 6;
        const char *ce = strstr(c, "</Code>");
        int cl = ce ? (int)(ce - c) : 0;
        int ml = 0;
        if (m) {
            m += 9;
            const char *me = strstr(m, "</Message>");
            ml = me ? (int)(me - m) : 0;
        }
        snprintf(out, cap, ": %.*s%s%.*s", cl, c, ml ? ": " : "", ml, m ? m : "");
        return;
    }
    if (!strncasecmp(b, "<html", 5) || !strncasecmp(b, "<!doctype", 9)) return; /* an error page: the status says it */
    size_t n = strcspn(b, "\r\n");
    while (n && (b[n - 1] == ' ')) n--;
    if (n) snprintf(out, cap, ": %.*s", (int)PI_MIN(n, 200), b);
}

/* scheme://host:port of url, lower-case, into out ("" when it does not
 * parse: then it matches no origin and gets no credentials). */
static void url_origin(const char *url, char *out, size_t cap) {
    out[0] = 0;
    CURLU *h = curl_url();
    char *sc = NULL, *host = NULL, *port = NULL;
    if (h && curl_url_set(h, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(h, CURLUPART_SCHEME, &sc, 0) == CURLUE_OK && curl_url_get(h, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(h, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
        snprintf(out, cap, "%s://%s:%s", sc, host, port);
        for (char *c = out; *c; c++) *c = (char)tolower((unsigned char)*c);
    }
    curl_free(sc);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(h);
}

/* o->user, o->pass: the configured URL's userinfo, percent-decoded. */
static void url_userinfo(struct http_obj *o) {
    CURLU *h = curl_url();
    char *u = NULL, *p = NULL;
    if (h && curl_url_set(h, CURLUPART_URL, o->orig_url, 0) == CURLUE_OK) {
        if (curl_url_get(h, CURLUPART_USER, &u, CURLU_URLDECODE) == CURLUE_OK && u) o->user = pi_strndup(u, strlen(u));
        if (curl_url_get(h, CURLUPART_PASSWORD, &p, CURLU_URLDECODE) == CURLUE_OK && p) o->pass = pi_strndup(p, strlen(p));
    }
    curl_free(u);
    curl_free(p);
    curl_url_cleanup(h);
}

static int same_origin(const struct http_obj *o, const char *url) {
    char org[300];
    url_origin(url, org, sizeof org);
    return o->origin[0] && strcmp(org, o->origin) == 0;
}

/* A 3xx with a Location: the next target of x, checked (http or https
 * only, never from https down to http, at most 10). 2 to restart x there
 * at once, < 0 refused (detail set). A target of another origin, and every
 * hop after it, gets no credentials. */
static int follow(struct http_obj *o, struct xfer *x, const char *rq) {
    char *loc = NULL;
    curl_easy_getinfo(x->e, CURLINFO_REDIRECT_URL, &loc);
    if (!loc || !*loc) return pi_err(PAGEIN_E_REMOTE, "%s: HTTP %ld without a Location", rq, x->status);
    if (x->redirects >= 10) return pi_err(PAGEIN_E_REMOTE, "%s: more than 10 redirects", rq);
    const char *cur = x->url ? x->url : o->url;
    int https = strncasecmp(cur, "https://", 8) == 0;
    if (strncasecmp(loc, "https://", 8) != 0 && strncasecmp(loc, "http://", 7) != 0)
        return pi_err(PAGEIN_E_REMOTE, "%s: HTTP %ld redirects to %.300s: only http:// and https:// are followed", rq,
                      x->status, loc);
    if (https && strncasecmp(loc, "http://", 7) == 0)
        return pi_err(PAGEIN_E_REMOTE,
                      "%s: HTTP %ld redirects from https to plain http (%.300s): refused (a downgrade would expose the "
                      "request and the data)", rq, x->status, loc);
    char *nu = pi_strndup(loc, strlen(loc));
    if (!nu) return pi_err(-ENOMEM, "%s: out of memory", rq);
    x->third = x->third || !same_origin(o, nu);
    pi_free(x->url);
    x->url = nu;
    x->redirects++;
    return 2;
}

/* Classifies a finished attempt: 0 done, 1 retry, 2 restart at once at a
 * redirect's target, 3 re-resolve the URL and retry (reresolve), < 0
 * failed (detail set). */
static int xfer_finish(struct http_obj *o, struct xfer *x, CURLcode res) {
    char rq[2600], sum[300];
    req_desc(o, x, rq, sizeof rq);
    /* no retry starts past the request's deadline */
    int retry_left = x->attempt < o->retries && pi_now_s() < x->deadline;
    if (x->fail) {
        /* our own checks stopped the transfer: not transient */
        return pi_err(x->fail, "%s: %s", rq, x->failmsg);
    }
    if (x->mode == X_PROBE && x->enough) return 0;
    if (res != CURLE_OK) {
        /* a server that sends, but slower than the minimum rate on
         * average, is not retried: it would only hold the caller longer (a
         * dribble of 2 bytes/s); a stall (nothing came) may be a dead
         * connection and is */
        double took = pi_now_s() - x->t_attempt;
        int slow = res == CURLE_OPERATION_TIMEDOUT && x->abytes > 0 && took > 0 &&
                   (double)x->abytes / took < (double)o->min_rate;
        if (transient_curl(res) && retry_left && !slow) return 1;
        const char *what = x->curlerr[0] ? x->curlerr : curl_easy_strerror(res);
        if (res == CURLE_OPERATION_TIMEDOUT)
            return pi_err(PAGEIN_E_REMOTE,
                          "%s: timed out (%s; under %ld bytes/s for %ld s (PAGEIN_HTTP_MIN_RATE, PAGEIN_HTTP_TIMEOUT), "
                          "or past the request's deadline) after %d attempt(s)",
                          rq, what, o->min_rate, o->timeout_s, x->attempt + 1);
        if (res == CURLE_PARTIAL_FILE)
            return pi_err(PAGEIN_E_TRUNCATED, "%s: truncated body (%s) after %d attempt(s)", rq, what, x->attempt + 1);
        return pi_err(PAGEIN_E_REMOTE, "%s: %s (curl error %d) after %d attempt(s)", rq, what, (int)res, x->attempt + 1);
    }
    long st = x->status;
    if (st == 301 || st == 302 || st == 303 || st == 307 || st == 308) return follow(o, x, rq);
    if (st >= 200 && st <= 299) {
        if (x->mode == X_STREAM) {
            if (x->got == o->size) return 0;
            if (retry_left) return 1;
            return pi_err(PAGEIN_E_TRUNCATED, "%s: truncated body: %llu of %llu bytes after %d attempt(s)", rq,
                          (unsigned long long)x->got, (unsigned long long)o->size, x->attempt + 1);
        }
        if (x->mode == X_RANGE) {
            if (x->got == x->req->len) return 0;
            if (retry_left) return 1;
            return pi_err(PAGEIN_E_TRUNCATED, "%s: truncated body: %llu of %llu bytes after %d attempt(s)", rq,
                          (unsigned long long)x->got, (unsigned long long)x->req->len, x->attempt + 1);
        }
        if (x->mode == X_PROBE && x->status == 206 && (!x->have_cr || x->cr_start != 0))
            return pi_err(PAGEIN_E_REMOTE, "%s: answered 206 with Content-Range %s%llu-%llu, expected bytes 0-", rq,
                          x->have_cr ? "bytes " : "(missing) ", (unsigned long long)x->cr_start,
                          (unsigned long long)x->cr_end);
        if (x->mode == X_PROBE && x->status == 206 && x->have_clen && x->blen < x->clen) {
            if (retry_left) return 1;
            return pi_err(PAGEIN_E_TRUNCATED, "%s: truncated body: %zu of %llu bytes", rq, x->blen,
                          (unsigned long long)x->clen);
        }
        return 0;
    }
    if (x->mode == X_PROBE && st == 416) return 0; /* empty object: caller reads cr_total */
    if (x->mode == X_FETCH) return 0;             /* the caller judges the status */
    body_summary(x->errbody, sum, sizeof sum);
    if (transient_status(st) && retry_left) return 1;
    /* a redirect's target that refuses (an expired presigned URL): the
     * configured URL is asked again for a fresh target, once per request */
    if ((st == 401 || st == 403) && (x->mode == X_RANGE || x->mode == X_STREAM) && !x->reresolved && o->redirected)
        return 3;
    if (st == 412)
        return pi_err(PAGEIN_E_CHANGED, "%s: HTTP 412 Precondition Failed: the object changed since open (If-Match %s)",
                      rq, o->etag);
    if (st == 416) return pi_err(PAGEIN_E_RANGE, "%s: HTTP 416 Range Not Satisfiable%s", rq, sum);
    return pi_err(PAGEIN_E_REMOTE, "%s: HTTP %ld %s%s%s", rq, st, reason(st), sum,
                  transient_status(st) ? " (after retries)" : "");
}

static double backoff_s(const struct http_obj *o, int attempt) {
    double b = (double)o->backoff_ms / 1000.0;
    for (int i = 0; i < attempt && b < 5.0; i++) b *= 2;
    if (b > 5.0) b = 5.0;
    /* +-25% jitter so that many connections do not retry in step */
    double j = (double)(rand() % 1000) / 1000.0 * 0.5 + 0.75;
    return b * j;
}

/* ---- readv: up to depth requests in flight on one lane ---------------------- */
/* The requests of one readv, claimed in order by its lanes (one per thread). */
struct vshare {
    struct pi_read_req *reqs;
    size_t n;
    _Atomic size_t next; /* the next request to claim */
    _Atomic int stop;    /* a lane failed or a done callback said stop */
};

static struct pi_read_req *claim(struct vshare *sh) {
    if (atomic_load(&sh->stop) || atomic_load(&sh->next) >= sh->n) return NULL;
    size_t k = atomic_fetch_add(&sh->next, 1);
    return k < sh->n ? &sh->reqs[k] : NULL;
}

static int reresolve(struct http_obj *o, unsigned gen);

static int readv_lane(struct http_obj *o, struct lane *ln, struct vshare *sh, unsigned depth, pi_read_done_fn done,
                      void *arg) {
    CURLM *m = ln->m;
    struct xfer *slots = pi_calloc(depth, sizeof *slots);
    if (!slots) {
        atomic_store(&sh->stop, 1);
        return pi_err(-ENOMEM, "%s: out of memory", o->url);
    }
    int rc = 0, stop = 0, more = 1;
    for (;;) {
        if (!stop && atomic_load(&sh->stop)) stop = 1; /* another lane failed */
        /* start requests into idle slots */
        for (unsigned i = 0; i < depth && !stop && more; i++) {
            struct xfer *x = &slots[i];
            if (x->state != 0) continue;
            while (!stop) {
                struct pi_read_req *r = claim(sh);
                if (!r) {
                    more = 0;
                    break;
                }
                uint64_t end;
                if (pi_add_overflow(r->off, r->len, &end) || end > o->size) {
                    r->rc = rc = pi_err(PAGEIN_E_RANGE, "%s: read of %llu bytes at %llu is outside the %llu-byte object",
                                        o->name, (unsigned long long)r->len, (unsigned long long)r->off,
                                        (unsigned long long)o->size);
                    stop = 1;
                    break;
                }
                int cached = r->len == 0;
                if (!cached) {
                    pthread_rwlock_rdlock(&o->prefix_lock);
                    if (end <= o->prefix_len) {
                        memcpy(r->buf, o->prefix + r->off, r->len);
                        cached = 1;
                    }
                    pthread_rwlock_unlock(&o->prefix_lock);
                }
                if (cached) {
                    r->rc = 0;
                    int d = done ? done(arg, r) : 0;
                    if (d) rc = d, stop = 1;
                    continue;
                }
                if (o->no_ranges && !(r->off == 0 && r->len == o->size)) {
                    r->rc = rc = pi_err(PAGEIN_E_REMOTE,
                                        "GET %s (Range: bytes=%llu-%llu): the server ignored Range (it answered 200 "
                                        "with the whole object at open)",
                                        o->url, (unsigned long long)r->off, (unsigned long long)(end - 1));
                    stop = 1;
                    break;
                }
                x->o = o;
                x->mode = X_RANGE;
                x->req = r;
                x->got = 0;
                x->attempt = 0;
                x->reresolved = 0;
                pi_free(x->url); /* a new request starts at o->url */
                x->url = NULL;
                x->third = 0;
                x->redirects = 0;
                x->deadline = 0;
                int s = xfer_start(o, m, x);
                if (s < 0) r->rc = rc = s, stop = 1;
                break;
            }
        }
        unsigned busy = 0;
        double next_retry = 0;
        if (stop) atomic_store(&sh->stop, 1);
        for (unsigned i = 0; i < depth; i++) {
            if (slots[i].state) busy++;
            if (slots[i].state == 2 && (next_retry == 0 || slots[i].retry_at < next_retry)) next_retry = slots[i].retry_at;
        }
        if (!busy) break;
        int running = 0, finished = 0;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            finished++;
            struct xfer *x = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            CURLcode res = msg->data.result;
            curl_multi_remove_handle(m, msg->easy_handle);
            if (!x) continue;
            if (stop) {
                x->req->rc = PAGEIN_E_CANCELLED;
                x->state = 0;
                continue;
            }
            int v = xfer_finish(o, x, res);
            if (v == 0) {
                x->req->rc = 0;
                x->state = 0;
                int d = done ? done(arg, x->req) : 0;
                if (d) rc = d, stop = 1;
            } else if (v == 1) {
                atomic_fetch_add(&o->retried, 1);
                x->retry_at = pi_now_s() + backoff_s(o, x->attempt);
                x->attempt++;
                x->state = 2;
            } else if (v == 3) {
                /* the redirect's target refused: a fresh one, then again at once */
                int r2 = reresolve(o, x->gen);
                x->reresolved = r2 == 1;
                atomic_fetch_add(&o->retried, 1);
                if (r2 < 0) {
                    x->req->rc = r2;
                    x->state = 0;
                    if (!rc) rc = r2;
                    stop = 1;
                } else {
                    pi_free(x->url); /* again from the fresh o->url */
                    x->url = NULL;
                    x->third = 0;
                    x->redirects = 0;
                    x->retry_at = pi_now_s();
                    x->state = 2;
                }
            } else if (v == 2) {
                x->retry_at = pi_now_s(); /* a redirect: its target at once */
                x->state = 2;
            } else {
                x->req->rc = v;
                x->state = 0;
                if (!rc) rc = v;
                stop = 1;
            }
        }
        if (stop) {
            /* abandon what is still in flight or waiting */
            for (unsigned i = 0; i < depth; i++) {
                struct xfer *x = &slots[i];
                if (x->state == 1) curl_multi_remove_handle(m, x->e);
                if (x->state) x->req->rc = PAGEIN_E_CANCELLED;
                x->state = 0;
            }
            break;
        }
        double t = pi_now_s();
        long wait_ms = 100;
        for (unsigned i = 0; i < depth; i++) {
            struct xfer *x = &slots[i];
            if (x->state != 2) continue;
            if (x->retry_at <= t) {
                int s = xfer_start(o, m, x);
                if (s < 0) {
                    x->req->rc = rc = s;
                    x->state = 0;
                    stop = 1;
                }
            } else {
                long w = (long)((x->retry_at - t) * 1000) + 1;
                if (w < wait_ms) wait_ms = w;
            }
        }
        (void)next_retry;
        if (stop) continue;
        /* a transfer ended: start the next one, or return, at once (polling
         * here first would idle the connection up to wait_ms per request) */
        if (finished) continue;
        if (running || busy) curl_multi_poll(m, NULL, 0, (int)wait_ms, NULL);
    }
    if (stop) atomic_store(&sh->stop, 1);
    for (unsigned i = 0; i < depth; i++) handle_put(o, slots[i].e), pi_free(slots[i].url);
    pi_free(slots);
    return rc;
}

/* One X_PROBE or X_FETCH transfer with retries on a lane. */
static int single(struct http_obj *o, struct xfer *x) {
    struct lane *ln = lane_get(o);
    if (!ln) return pi_err(-ENOMEM, "%s: cannot create a libcurl multi handle", o->url);
    int rc;
    x->o = o;
    x->deadline = 0;
    for (x->attempt = 0;; x->attempt++) {
        rc = xfer_start(o, ln->m, x);
        if (rc < 0) break;
        int running = 1;
        CURLcode res = CURLE_OK;
        int finished = 0;
        while (!finished) {
            curl_multi_perform(ln->m, &running);
            CURLMsg *msg;
            int left;
            while ((msg = curl_multi_info_read(ln->m, &left))) {
                if (msg->msg == CURLMSG_DONE) {
                    res = msg->data.result;
                    finished = 1;
                }
            }
            if (!finished) curl_multi_poll(ln->m, NULL, 0, 100, NULL);
        }
        curl_multi_remove_handle(ln->m, x->e);
        rc = xfer_finish(o, x, res);
        if (rc == 3) {
            /* a stream whose redirect target refused: a fresh target, once */
            handle_put(o, x->e);
            x->e = NULL;
            lane_put(o, ln);
            ln = NULL;
            rc = reresolve(o, x->gen);
            x->reresolved = rc == 1;
            atomic_fetch_add(&o->retried, 1);
            if (rc > 0) rc = 0;
            if (rc == 0) ln = lane_get(o);
            if (rc == 0 && !ln) rc = pi_err(-ENOMEM, "%s: cannot create a libcurl multi handle", o->url);
            if (rc < 0) return rc;
            pi_free(x->url); /* again from the fresh o->url */
            x->url = NULL;
            x->third = 0;
            x->redirects = 0;
            x->attempt--; /* not a failed attempt: the loop's ++ gives it back */
            continue;
        }
        if (rc == 2) {
            x->attempt--; /* a redirect is not a retry */
            continue;
        }
        if (rc != 1) break;
        atomic_fetch_add(&o->retried, 1);
        struct timespec ts;
        double b = backoff_s(o, x->attempt);
        ts.tv_sec = (time_t)b;
        ts.tv_nsec = (long)((b - (double)ts.tv_sec) * 1e9);
        nanosleep(&ts, NULL);
    }
    if (rc == 0 && x->url) {
        /* later requests go to where the redirects led, with credentials
         * only if that is still the configured origin; the old string stays
         * valid (another thread may be using it: reresolve runs during
         * reads) until obj_free */
        char **r = pi_realloc(o->retired, (o->nretired + 1) * sizeof *r);
        if (r) {
            o->retired = r;
            o->retired[o->nretired++] = (char *)url_now(o);
            /* url_gen odd while url and first_party change together:
             * xfer_start reads them as a pair (credentials go with the
             * configured origin only, never with an old URL's flag) */
            atomic_fetch_add(&o->url_gen, 1);
            o->first_party = !x->third;
            o->redirected = strcmp(x->url, o->orig_url) != 0;
            __atomic_store_n(&o->url, x->url, __ATOMIC_RELEASE);
            atomic_fetch_add(&o->url_gen, 1);
            x->url = NULL;
        }
    }
    pi_free(x->url);
    x->url = NULL;
    handle_put(o, x->e);
    x->e = NULL;
    lane_put(o, ln);
    return rc;
}

/* A request to the redirect's target got 401/403 (a presigned URL that
 * expired): asks the configured URL again (one byte, following redirects)
 * for a fresh target, unless another request already did since this one
 * started (gen). The object must be the one opened: same size, ETag and
 * X-Linked-Etag, else PAGEIN_E_CHANGED. 1 when it asked, 0 when another
 * request had (this one's single re-resolution is then still to come: a
 * target refreshed by another request may expire again before this one's
 * retry reaches it), < 0 failed. */
static int reresolve(struct http_obj *o, unsigned gen) {
    pthread_mutex_lock(&o->resolve_lock);
    int rc = 0;
    if (atomic_load(&o->url_gen) == gen) {
        struct xfer *x = pi_calloc(1, sizeof *x);
        char *b = pi_malloc(1);
        if (!x || !b) {
            rc = pi_err(-ENOMEM, "%s: out of memory", o->orig_url);
        } else {
            x->mode = X_PROBE;
            x->body = b;
            x->bmax = 1;
            x->url = pi_strndup(o->orig_url, strlen(o->orig_url)); /* the configured origin: its credentials */
            rc = x->url ? single(o, x) : pi_err(-ENOMEM, "%s: out of memory", o->orig_url);
            uint64_t size = x->status == 206 && x->have_cr ? x->cr_total : x->status == 200 && x->have_clen ? x->clen : o->size;
            if (rc == 0 && x->status != 206 && x->status != 200)
                rc = pi_err(PAGEIN_E_REMOTE, "GET %s (Range: bytes=0-0): HTTP %ld when asked again for the object's location",
                            o->orig_url, x->status);
            else if (rc == 0 && (size != o->size || etag_differs(x->etag, o->etag) ||
                                 etag_differs(x->linked_etag, o->linked_etag)))
                rc = pi_err(PAGEIN_E_CHANGED, "%s: the object changed: asked again for its location, it is %llu bytes, "
                            "ETag %s (was %llu, %s at open)", o->orig_url, (unsigned long long)size, x->etag,
                            (unsigned long long)o->size, o->etag);
            if (rc == 0) {
                atomic_store(&o->locate, 0); /* located (open_known): before the generation moves */
                atomic_fetch_add(&o->url_gen, 2); /* the others waiting here just retry (even: see single) */
            }
            if (rc == 0) rc = 1;
        }
        pi_free(x);
        pi_free(b);
    }
    pthread_mutex_unlock(&o->resolve_lock);
    return rc;
}

/* ---- objects ------------------------------------------------------------------ */
static void obj_free(struct http_obj *o) {
    if (!o) return;
    fork_check(o); /* a child frees only what it made */
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
    for (size_t i = 0; i < o->nretired; i++) pi_free(o->retired[i]);
    pi_free(o->retired);
    curl_slist_free_all(o->hdrs);
    curl_slist_free_all(o->hdrs_match);
    curl_slist_free_all(o->match_only);
    pi_free(o->url);
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
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) return pi_err(PAGEIN_E_REMOTE, "%s: curl_global_init failed", name);
    struct http_obj *o = pi_calloc(1, sizeof *o);
    if (!o) return pi_err(-ENOMEM, "%s: out of memory", name);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_init(&o->share_lock[i], NULL);
    pthread_mutex_init(&o->pool_lock, NULL);
    pthread_rwlock_init(&o->prefix_lock, NULL);
    pthread_mutex_init(&o->grow_lock, NULL);
    pthread_mutex_init(&o->fork_lock, NULL);
    pthread_mutex_init(&o->resolve_lock, NULL);
    atomic_store(&o->pid, (int)getpid());
    o->name = name;
    o->url = dupz(cfg->url);
    o->orig_url = dupz(cfg->url);
    const char *ca = cfg->cainfo;
    if (!ca || !*ca) ca = getenv("CURL_CA_BUNDLE");
    if (!ca || !*ca) ca = getenv("SSL_CERT_FILE");
    if (ca && *ca) o->cainfo = dupz(ca);
    if (cfg->sigv4) {
        o->sigv4 = dupz(cfg->sigv4);
        o->userpwd = dupz(cfg->userpwd ? cfg->userpwd : ":");
    }
    int bad = !o->url || !o->orig_url || (ca && *ca && !o->cainfo) || (cfg->sigv4 && (!o->sigv4 || !o->userpwd));
    for (int i = 0; !bad && i < 8 && cfg->headers[i]; i++) {
        struct curl_slist *l = curl_slist_append(o->hdrs, cfg->headers[i]);
        if (!l) bad = 1;
        else o->hdrs = l;
    }
    o->share = share_new(o);
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
    url_origin(o->orig_url, o->origin, sizeof o->origin);
    url_userinfo(o);
    o->first_party = 1;
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

/* issue 28 (meta28): an open without a request (PI_OPEN_KNOWN, source.h):
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
    atomic_store(&o->locate, hub); /* the Hub redirects every file to its CDN */
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

int pi_http_open_cfg(struct pi_source *s, const struct pi_http_cfg *cfg, uint32_t flags) {
    if (flags & PI_OPEN_KNOWN) return open_known(s, cfg);
    struct http_obj *o;
    FORWARD_IF(obj_new(&o, cfg, s->name));
    struct xfer *x = pi_calloc(1, sizeof *x);
    size_t pre = flags & PI_OPEN_PROBE_ONLY ? 1 : PI_HTTP_PREFIX; /* 1: the caller has the header */
    uint8_t *buf = pi_malloc(pre);
    if (!x || !buf) {
        pi_free(x);
        pi_free(buf);
        obj_free(o);
        return pi_err(-ENOMEM, "%s: out of memory", s->name);
    }
    x->mode = X_PROBE;
    x->body = (char *)buf;
    x->bmax = pre;
    double t0 = pi_now_s();
    int rc = single(o, x);
    double t1 = pi_now_s();
    if (rc == 0) {
        if (x->status == 206 && x->have_cr) {
            o->size = x->cr_total;
        } else if (x->status == 416 && x->cr_unsat) {
            o->size = x->cr_total;
            x->blen = 0;
            if (o->size != 0)
                rc = pi_err(PAGEIN_E_REMOTE, "GET %s (Range: bytes=%s): HTTP 416 for a %llu-byte object", o->url,
                            x->range, (unsigned long long)o->size);
        } else if (x->status == 200 && x->have_clen) {
            o->size = x->clen;
            if (x->blen < o->size) o->no_ranges = 1;
            else if (x->blen > o->size)
                rc = pi_err(PAGEIN_E_REMOTE, "GET %s: body longer than its Content-Length", o->url);
        } else {
            rc = pi_err(PAGEIN_E_REMOTE, "GET %s (Range: bytes=%s): HTTP %ld without a usable Content-Range or "
                        "Content-Length%s", o->url, x->range, x->status, x->status != 200 ? "" :
                        ": a generated page such as a folder listing, not a file? Plain HTTP cannot list folders: name "
                        "a file or a *.safetensors.index.json, or give plan/pull/open_model the folder ending in '/' "
                        "(they try the usual file names); s3:// and hf:// list prefixes (docs/REMOTE.md)");
        }
    }
    if (rc == 0 && x->blen > o->size)
        rc = pi_err(PAGEIN_E_REMOTE, "GET %s (Range: bytes=%s): %zu bytes for a %llu-byte object", o->url, x->range,
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

/* issue 28 (meta28): a source opened with no request (open_known) whose
 * origin redirects (the Hub) would send every read to the origin and
 * follow the redirect again; the first read instead asks once, as a
 * redirect target that expired is asked again (reresolve: 1 byte,
 * following redirects, the size and X-Linked-Etag checked against the
 * ones known), and later reads go straight to the target. 0 or < 0. */
static int known_locate(struct http_obj *o) {
    /* the generation first: a read that sees the URL another read just
     * located also sees locate cleared (reresolve clears it before it
     * moves the generation), so the object is located once, not once per
     * concurrent first read */
    unsigned gen = atomic_load(&o->url_gen);
    if (!atomic_load(&o->locate)) return 0;
    int rc = reresolve(o, gen);
    if (rc >= 0) atomic_store(&o->locate, 0);
    return rc < 0 ? rc : 0;
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
    struct lane *ln = lane_get(v->o);
    if (!ln) {
        atomic_store(&v->sh->stop, 1);
        v->rc = pi_err(-ENOMEM, "%s: cannot create a libcurl multi handle", v->o->url);
    } else {
        v->rc = readv_lane(v->o, ln, v->sh, v->depth, v->done, v->arg);
        lane_put(v->o, ln);
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
    fork_check(o);
    int lrc = known_locate(o);
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
    fork_check(o);
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
    if (!r) return pi_err(-ENOMEM, "%s: out of memory", o->url);
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
const char *pi_http_url(const struct pi_source *s) { return s && s->impl ? ((struct http_obj *)s->impl)->url : ""; }
int pi_http_no_ranges(const struct pi_source *s) { return s && s->impl ? ((struct http_obj *)s->impl)->no_ranges : 0; }

int pi_http_stream(struct pi_source *s, pi_source_sink_fn sink, void *ctx) {
    struct http_obj *o = s->impl;
    fork_check(o);
    struct xfer *x = pi_calloc(1, sizeof *x);
    if (!x) return pi_err(-ENOMEM, "%s: out of memory", o->name);
    x->mode = X_STREAM;
    x->sink = sink;
    x->sink_ctx = ctx;
    int rc = single(o, x);
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
    FORWARD_IF(obj_new(&o, cfg, cfg->url));
    struct xfer *x = pi_calloc(1, sizeof *x);
    char *buf = pi_malloc(max + 1);
    if (!x || !buf) {
        pi_free(x);
        pi_free(buf);
        obj_free(o);
        return pi_err(-ENOMEM, "%s: out of memory", cfg->url);
    }
    x->mode = X_FETCH;
    x->body = buf;
    x->bmax = max;
    int rc = single(o, x);
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

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int pi_hex_tag(const char *s, size_t n, char *out) {
    if (strncmp(s, "W/", 2) == 0) s += 2;
    if (*s == '"') s++;
    size_t l = strcspn(s, "\"");
    if (l != n || (s[l] && s[l + 1])) return 0;
    for (size_t i = 0; i < n; i++) {
        if (hexval(s[i]) < 0) return 0;
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

int pi_remote_open(struct pi_source **out, const char *uri, uint32_t flags) {
    if (!pi_source_is_remote(uri))
        return pi_err(PAGEIN_E_INVALID, "%s: not a remote URL (%s)", uri, pi_source_schemes());
    return pi_source_open(out, uri, flags);
}

void pi_remote_close(struct pi_source *s) { pi_source_close(s); }

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
