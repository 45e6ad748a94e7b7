/*
 * http_int.h - the HTTP object layer's private header (http.c, the row and
 * the objects; http_xfer.c, the transport: lanes, pools, one transfer and a
 * lane's readv and re-resolution, over http_loc.c; http_loc.c, the
 * object's location: the snapshot, redirects, the first party, a leaf).
 * Only these three files include it; calls go http.c -> http_xfer.c ->
 * http_loc.c, never back.
 */
#ifndef PAGEIN_HTTP_INT_H
#define PAGEIN_HTTP_INT_H

#include "remote.h"

#ifdef PAGEIN_HAVE_CURL

#include "curl_dl.h" /* libcurl, loaded on first use */
#include <pthread.h>
#include <stdatomic.h>

#define MAX_LANES 64
#define MAX_IDLE_HANDLES 128
#define MAX_HDRS 16

struct lane {
    CURLM *m;
    struct lane *next;
};

/* Where an object's requests go. Changed by a probe that was redirected
 * (single) and by a re-resolution (reresolve), read by every attempt of
 * every lane: all under loc_lock, read as one snapshot (loc_get) once per
 * attempt, so a URL never goes with another URL's first-party flag (the
 * credentials). URLs replaced are kept (retired) until the object is
 * freed: a snapshot's pointer stays valid for the attempt and its
 * messages. */
struct http_loc {
    pthread_mutex_t lock;
    char *url;       /* where requests go (the probe's effective URL) */
    int first_party; /* url has the configured origin (reached without leaving it) */
    int redirected;  /* url is not the configured one (a redirect's target) */
    int locate;      /* opened with no request (open_known): the first read asks where redirects lead */
    unsigned gen;    /* moves with each change of url and each re-resolution */
    char **retired;
    size_t nretired;
};

/* One attempt's view of the location. */
struct loc_snap {
    const char *url;
    int first_party, redirected;
    unsigned gen;
};

struct http_obj {
    struct http_loc loc;
    char *orig_url; /* as configured */
    char origin[300];  /* scheme://host:port of orig_url: the only one credentials go to */
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
    /* the process that made the handles above (fork_check); one
     * re-resolution of the location at a time (reresolve) */
    _Atomic int pid;
    pthread_mutex_t fork_lock, resolve_lock;
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
    /* where this request goes: the object's location, or a redirect's target */
    char *url;     /* malloc'd redirect target, NULL = at (the location's URL) */
    const char *at; /* the location's URL as this attempt's snapshot saw it */
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
    /* re-resolution of a refused redirect */
    unsigned gen;       /* the location's generation when this attempt started */
    int reresolved;     /* X_RANGE: this request already re-resolved its URL */
    pi_source_sink_fn sink; /* X_STREAM: where the body goes */
    void *sink_ctx;
};

/* The requests of one readv, claimed in order by its lanes (one per thread). */
struct vshare {
    struct pi_read_req *reqs;
    size_t n;
    _Atomic size_t next; /* the next request to claim */
    _Atomic int stop;    /* a lane failed or a done callback said stop */
};

/* ---- the transport (http_xfer.c) ---- */
/* The curl share object (DNS, TLS sessions) of o's lanes. */
CURLSH *pi_hx_share_new(struct http_obj *o);
/* In a child after fork: the parent's handles and lanes are left alone
 * (never used, never freed here) and new ones made. */
void pi_hx_fork_check(struct http_obj *o);
/* A lane (a multi handle with its connections) from o's pool, and back. */
struct lane *pi_hx_lane_get(struct http_obj *o);
void pi_hx_lane_put(struct http_obj *o, struct lane *l);
/* The requests of sh claimed one by one, up to depth in flight on ln. */
int pi_hx_readv_lane(struct http_obj *o, struct lane *ln, struct vshare *sh, unsigned depth, pi_read_done_fn done,
                     void *arg);
/* One X_PROBE, X_FETCH or X_STREAM transfer with its retries and redirects. */
int pi_hx_single(struct http_obj *o, struct xfer *x);
/* Two ETags that both are stated and differ (W/ and quotes aside). */
int pi_hx_etag_differs(const char *a, const char *b);
/* A redirect target refused (401/403): the configured URL asked again. */
int pi_hx_reresolve(struct http_obj *o, unsigned gen);
/* An object opened without a request: its first read locates it once. */
int pi_hx_known_locate(struct http_obj *o);

/* ---- the object's location (http_loc.c) ---- */
/* The location as one snapshot (under o->loc.lock): once per attempt. */
void pi_hx_loc_get(struct http_obj *o, struct loc_snap *sn);
/* A probe was redirected to url (malloc'd): 1 when taken. */
int pi_hx_loc_set(struct http_obj *o, char *url, int first_party);
/* The location's URL, for messages (valid until the object is freed). */
const char *pi_hx_loc_url(struct http_obj *o);
/* scheme://host:port of url, lower-case ("" when it does not parse). */
void pi_hx_url_origin(const char *url, char *out, size_t cap);
/* o->user, o->pass from the configured URL's userinfo. */
void pi_hx_url_userinfo(struct http_obj *o);
/* A 3xx: x's next target, checked; 2 to restart there, < 0 refused. */
int pi_hx_follow(struct http_obj *o, struct xfer *x, const char *rq);

#endif /* PAGEIN_HAVE_CURL */
#endif
