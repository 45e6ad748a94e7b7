/*
 * http_xfer.c - the HTTP transport (http_int.h): curl's global init, the
 * share object, the pools of handles and lanes (a lane is a multi handle
 * with its own connections), response parsing and checking, one transfer
 * with its retries and deadline, the readv of one lane, and re-resolution
 * (a transfer re-resolves, and re-resolving is a transfer: both here, over
 * http_loc.c's location).
 */
#include "http_int.h"

#ifdef PAGEIN_HAVE_CURL

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

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


CURLSH *pi_hx_share_new(struct http_obj *o) {
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
void pi_hx_fork_check(struct http_obj *o) {
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
        o->share = pi_hx_share_new(o); /* NULL: the handles share nothing */
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

struct lane *pi_hx_lane_get(struct http_obj *o) {
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

void pi_hx_lane_put(struct http_obj *o, struct lane *l) {
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

int pi_hx_etag_differs(const char *a, const char *b) {
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
            if (pi_hx_etag_differs(x->etag, o->etag))
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
            if (pi_hx_etag_differs(x->etag, o->etag))
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
    if (!x->e) return pi_err(-ENOMEM, "%s: cannot create a libcurl handle", o->name);
    /* the location, once for this attempt: the URL and its first-party
     * flag as one pair, so an old URL never goes with a newer URL's
     * credentials */
    struct loc_snap sn;
    pi_hx_loc_get(o, &sn);
    x->gen = sn.gen;
    x->at = sn.url;
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
    /* the target: a redirect's (x->url, x->third), else the location's
     * URL, which is another origin when the probe was redirected away */
    const char *target = x->url;
    if (!target) {
        target = sn.url;
        x->third = !sn.first_party;
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
    if (curl_multi_add_handle(m, e) != CURLM_OK) return pi_err(PAGEIN_E_REMOTE, "%s: curl_multi_add_handle failed", target);
    x->state = 1;
    return 0;
}

/* The request as a message prefix: "GET URL (Range: bytes=A-B)". */
static void req_desc(const struct http_obj *o, const struct xfer *x, char *buf, size_t cap) {
    char to[1100] = "";
    const char *at = x->at ? x->at : o->orig_url;
    if (x->url) snprintf(to, sizeof to, ", redirected to %s", x->url);
    if (x->range[0]) snprintf(buf, cap, "GET %s%s (Range: bytes=%s)", at, to, x->range);
    else snprintf(buf, cap, "GET %s%s", at, to);
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
    if (st == 301 || st == 302 || st == 303 || st == 307 || st == 308) return pi_hx_follow(o, x, rq);
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
    if ((st == 401 || st == 403) && (x->mode == X_RANGE || x->mode == X_STREAM) && !x->reresolved) {
        struct loc_snap sn;
        pi_hx_loc_get(o, &sn);
        if (sn.redirected) return 3;
    }
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

static struct pi_read_req *claim(struct vshare *sh) {
    if (atomic_load(&sh->stop) || atomic_load(&sh->next) >= sh->n) return NULL;
    size_t k = atomic_fetch_add(&sh->next, 1);
    return k < sh->n ? &sh->reqs[k] : NULL;
}

int pi_hx_readv_lane(struct http_obj *o, struct lane *ln, struct vshare *sh, unsigned depth, pi_read_done_fn done,
                      void *arg) {
    CURLM *m = ln->m;
    struct xfer *slots = pi_calloc(depth, sizeof *slots);
    if (!slots) {
        atomic_store(&sh->stop, 1);
        return pi_err(-ENOMEM, "%s: out of memory", o->name);
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
                                        pi_hx_loc_url(o), (unsigned long long)r->off, (unsigned long long)(end - 1));
                    stop = 1;
                    break;
                }
                x->o = o;
                x->mode = X_RANGE;
                x->req = r;
                x->got = 0;
                x->attempt = 0;
                x->reresolved = 0;
                pi_free(x->url); /* a new request starts at the location */
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
                int r2 = pi_hx_reresolve(o, x->gen);
                x->reresolved = r2 == 1;
                atomic_fetch_add(&o->retried, 1);
                if (r2 < 0) {
                    x->req->rc = r2;
                    x->state = 0;
                    if (!rc) rc = r2;
                    stop = 1;
                } else {
                    pi_free(x->url); /* again from the fresh location */
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
int pi_hx_single(struct http_obj *o, struct xfer *x) {
    struct lane *ln = pi_hx_lane_get(o);
    if (!ln) return pi_err(-ENOMEM, "%s: cannot create a libcurl multi handle", o->name);
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
            pi_hx_lane_put(o, ln);
            ln = NULL;
            rc = pi_hx_reresolve(o, x->gen);
            x->reresolved = rc == 1;
            atomic_fetch_add(&o->retried, 1);
            if (rc > 0) rc = 0;
            if (rc == 0) ln = pi_hx_lane_get(o);
            if (rc == 0 && !ln) rc = pi_err(-ENOMEM, "%s: cannot create a libcurl multi handle", o->name);
            if (rc < 0) return rc;
            pi_free(x->url); /* again from the fresh location */
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
        if (pi_hx_loc_set(o, x->url, !x->third)) x->url = NULL; /* taken */
    }
    pi_free(x->url);
    x->url = NULL;
    handle_put(o, x->e);
    x->e = NULL;
    pi_hx_lane_put(o, ln);
    return rc;
}

/* ---- re-resolution ------------------------------------------------------- */

/* A request to the redirect's target got 401/403 (a presigned URL that
 * expired): asks the configured URL again (one byte, following redirects)
 * for a fresh target, unless another request already did since this one
 * started (gen). The object must be the one opened: same size, ETag and
 * X-Linked-Etag, else PAGEIN_E_CHANGED. 1 when it asked, 0 when another
 * request had (this one's single re-resolution is then still to come: a
 * target refreshed by another request may expire again before this one's
 * retry reaches it), < 0 failed. */
int pi_hx_reresolve(struct http_obj *o, unsigned gen) {
    pthread_mutex_lock(&o->resolve_lock);
    int rc = 0;
    struct loc_snap sn;
    pi_hx_loc_get(o, &sn);
    if (sn.gen == gen) {
        struct xfer *x = pi_calloc(1, sizeof *x);
        char *b = pi_malloc(1);
        if (!x || !b) {
            rc = pi_err(-ENOMEM, "%s: out of memory", o->orig_url);
        } else {
            x->mode = X_PROBE;
            x->body = b;
            x->bmax = 1;
            x->url = pi_strndup(o->orig_url, strlen(o->orig_url)); /* the configured origin: its credentials */
            rc = x->url ? pi_hx_single(o, x) : pi_err(-ENOMEM, "%s: out of memory", o->orig_url);
            uint64_t size = x->status == 206 && x->have_cr ? x->cr_total : x->status == 200 && x->have_clen ? x->clen : o->size;
            if (rc == 0 && x->status != 206 && x->status != 200)
                rc = pi_err(PAGEIN_E_REMOTE, "GET %s (Range: bytes=0-0): HTTP %ld when asked again for the object's location",
                            o->orig_url, x->status);
            else if (rc == 0 && (size != o->size || pi_hx_etag_differs(x->etag, o->etag) ||
                                 pi_hx_etag_differs(x->linked_etag, o->linked_etag)))
                rc = pi_err(PAGEIN_E_CHANGED, "%s: the object changed: asked again for its location, it is %llu bytes, "
                            "ETag %s (was %llu, %s at open)", o->orig_url, (unsigned long long)size, x->etag,
                            (unsigned long long)o->size, o->etag);
            if (rc == 0) { /* located (open_known); the others waiting here just retry */
                pthread_mutex_lock(&o->loc.lock);
                o->loc.locate = 0;
                o->loc.gen++;
                pthread_mutex_unlock(&o->loc.lock);
            }
            if (rc == 0) rc = 1;
        }
        pi_free(x);
        pi_free(b);
    }
    pthread_mutex_unlock(&o->resolve_lock);
    return rc;
}


/* a source opened with no request (open_known) whose
 * origin redirects (the Hub) would send every read to the origin and
 * follow the redirect again; the first read instead asks once, as a
 * redirect target that expired is asked again (reresolve: 1 byte,
 * following redirects, the size and X-Linked-Etag checked against the
 * ones known), and later reads go straight to the target. 0 or < 0. */
int pi_hx_known_locate(struct http_obj *o) {
    /* the generation and the flag in one snapshot: a read that sees the
     * URL another read just located also sees locate cleared (reresolve
     * changes both at once), so the object is located once, not once per
     * concurrent first read */
    pthread_mutex_lock(&o->loc.lock);
    unsigned gen = o->loc.gen;
    int locate = o->loc.locate;
    pthread_mutex_unlock(&o->loc.lock);
    if (!locate) return 0;
    int rc = pi_hx_reresolve(o, gen);
    if (rc >= 0) { /* located, by this read or by another since the snapshot */
        pthread_mutex_lock(&o->loc.lock);
        o->loc.locate = 0;
        pthread_mutex_unlock(&o->loc.lock);
    }
    return rc < 0 ? rc : 0;
}

#endif /* PAGEIN_HAVE_CURL */
