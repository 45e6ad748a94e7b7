/*
 * remote.h - the HTTP machinery shared by the remote sources (http.c, s3.c,
 * hf.c; docs/REMOTE.md). Only built with libcurl (PAGEIN_HAVE_CURL).
 *
 * http.c owns the transport: a libcurl multi loop per readv call, easy
 * handles pooled per source, one connection cache shared by every handle of
 * the source (curl share interface, so connections are reused across calls
 * and threads), HTTP/2 where TLS offers it, redirects followed (by http.c:
 * credentials go to the configured origin only, docs/SAFETY.md), bounded
 * retries with backoff for transient failures, and checks on every response
 * (status, Content-Range, ETag, length). s3.c and hf.c only turn their URL
 * into an HTTP request description (struct pi_http_cfg) and call
 * pi_http_open_cfg.
 *
 * open = one GET of the object's first PI_HTTP_PREFIX bytes (Range:
 * bytes=0-N): its Content-Range gives the size, its ETag the identity, and
 * the bytes are kept, so a format header that fits in them costs no further
 * request (`pagein inspect URL`: one request, two when the header is
 * larger).
 */
#ifndef PAGEIN_SOURCE_REMOTE_H
#define PAGEIN_SOURCE_REMOTE_H

#include "source.h"

#define PI_HTTP_PREFIX (256u * 1024u) /* bytes fetched and kept at open */

/* How to reach one object. Strings are copied by pi_http_open_cfg. */
struct pi_http_cfg {
    const char *url;          /* http(s) URL of the object */
    const char *scheme;       /* facts.fs_type ("https", "s3", "gs", "hf") */
    const char *headers[8];   /* extra request headers ("Name: value"), NULL-terminated */
    const char *sigv4;        /* CURLOPT_AWS_SIGV4 ("aws:amz:REGION:s3"), NULL = unsigned */
    const char *userpwd;      /* "KEY:SECRET" for sigv4 */
    const char *cainfo;       /* CA bundle, NULL = CURL_CA_BUNDLE / SSL_CERT_FILE / system */
};

/* Opens s (name already set) as the object cfg describes. 0 or < 0 with a
 * detail naming the URL and the request. */
int pi_http_open_cfg(struct pi_source *s, const struct pi_http_cfg *cfg, uint32_t flags);
int pi_http_readv(struct pi_source *s, struct pi_read_req *reqs, size_t n, unsigned depth,
                  pi_read_done_fn done, void *arg);
int pi_http_read(struct pi_source *s, void *buf, uint64_t len, uint64_t off);
void pi_http_close(struct pi_source *s);

/* Facts about an opened remote object beyond pi_source's (NULL-safe
 * getters; strings valid until close). */
const char *pi_http_etag(const struct pi_source *s);        /* ETag as sent, quotes included, or "" */
const char *pi_http_linked_etag(const struct pi_source *s); /* X-Linked-Etag (Hub: LFS sha256), or "" */
const char *pi_http_repo_commit(const struct pi_source *s); /* X-Repo-Commit (Hub), or "" */
const char *pi_http_url(const struct pi_source *s);         /* the URL requests go to (after redirects) */
/* The ETag the configured origin itself sent (on its redirect, or its
 * answer), or "": what may name or check the object (a redirect target's
 * ETag, X-Linked-Etag and X-Repo-Commit are never used for that). */
const char *pi_http_origin_etag(const struct pi_source *s);
/* Requests made and retried since open (all threads). */
void pi_http_counters(const struct pi_source *s, uint64_t *requests, uint64_t *retries);
/* 1 when the server ignored the open's Range (200 with the whole object,
 * larger than the kept prefix): only a whole-object read works. */
int pi_http_no_ranges(const struct pi_source *s);
/* The whole object in one GET without Range (for servers that ignore
 * Range): sink gets the body in order (off = bytes before p) and returns 0
 * or a negative code (its detail set) to stop. The response is checked as
 * a range's is (status 200, the size and ETag seen at open, no byte more);
 * a transient failure starts over from byte 0 (PAGEIN_HTTP_RETRIES). */
int pi_http_stream(struct pi_source *s, pi_source_sink_fn sink, void *ctx);
/* The checksum op of the remote sources: the Hub's X-Linked-Etag (LFS
 * sha256), else when md5_etag (S3, GCS) the origin's ETag when it is 32
 * hex digits (a single-part upload's MD5). */
int pi_http_checksum(struct pi_source *s, struct pi_checksum *c, int md5_etag);
/* is_prefix of http(s) URLs: the URL ends with '/', with no query or
 * fragment. */
int pi_http_is_prefix(const char *uri);
/* s (quotes and W/ stripped) is exactly n hex digits: copies it
 * lower-case into out (n + 1 bytes) and returns 1; else 0. */
int pi_hex_tag(const char *s, size_t n, char *out);

/* One GET of a whole small resource (an index, a listing) with the same
 * configuration, into a malloc'd NUL-terminated buffer of at most max
 * bytes. *status gets the HTTP status (the body is returned for any
 * status; < 0 only for transport failures and oversize bodies, after
 * retries). */
int pi_http_fetch(const struct pi_http_cfg *cfg, char **body, size_t *len, size_t max, long *status);

/* pi_source_open of a URL a remote source takes (the tests' lookup);
 * PAGEIN_E_INVALID for anything else (a local path, a scheme no remote
 * row takes). */
int pi_remote_open(struct pi_source **out, const char *uri, uint32_t flags);
void pi_remote_close(struct pi_source *s); /* NULL ok; for pi_remote_open's sources */
/* Appends s percent-encoded (RFC 3986 unreserved kept; '/' kept when
 * keep_slash) to the NUL-terminated out of cap bytes. */
void pi_url_encode(char *out, size_t cap, const char *s, int keep_slash);

/* ---- the one ListObjectsV2 page reader (s3_listing.c) ---- */
/* One listed object: its decoded key (under the prefix), its size
 * (PI_SIZE_UNKNOWN when the page does not say), ETag ("" likewise) and
 * LastModified in seconds since the epoch (0 likewise). */
typedef int (*pi_s3_key_fn)(void *arg, const char *key, uint64_t size, const char *etag, int64_t mtime);
/* One page (body: blen bytes): fn per <Contents> whose key starts with
 * prefix (others left out), the continuation token into tok (tokcap
 * bytes, "" none) and *more. 0, or fn's or pi_grow's error. */
int pi_s3_page(const char *body, size_t blen, const char *prefix, pi_s3_key_fn fn, void *arg, char *tok, size_t tokcap,
               int *more);
/* s3://bucket/prefix (or gs://): "s3://bucket/" into base (cap bytes) and
 * the key prefix returned (a pointer into uri); NULL when not such a URI. */
const char *pi_s3_split(const char *uri, char *base, size_t cap);
/* The list op's rule (arg: struct pi_s3_lister): each object under the
 * prefix as a pi_list_entry; the prefix itself and keys ending in '/' left out. */
struct pi_s3_lister {
    pi_list_fn fn;
    void *arg;
    const char *uri, *base, *prefix;
    struct pi_buf u;
};
int pi_s3_list_key(void *arg, const char *key, uint64_t size, const char *etag, int64_t mtime);
/* The metadata cache's rule (arg: struct pi_s3_stats): each key with a
 * size and an ETag appended as base + key. */
struct pi_s3_stats {
    const char *base;
    struct pi_stat_entry *v;
    size_t n, cap;
};
int pi_s3_stat_add(void *arg, const char *key, uint64_t size, const char *etag, int64_t mtime);
/* One page into *v (*n of *cap) through pi_s3_stat_add. */
int pi_s3_stat_page(const char *body, size_t blen, const char *base, const char *prefix, struct pi_stat_entry **v,
                    size_t *n, size_t *cap, char *tok, size_t tokcap, int *more);
/* One page through the list op's rule for prefix uri: fn per object under
 * it. For fuzz/fuzz_s3_list.c. */
int pi_s3_listing_parse(const char *uri, const char *body, size_t len, pi_list_fn fn, void *arg);
/* ---- end ListObjectsV2 page reader ---- */
/* hf://org/name[@rev][/path] split into parts (malloc'd strings, free with
 * pi_free); path may be "". kind is "models" or "datasets". */
struct pi_hf_ref {
    char *kind, *repo, *rev, *path;
};
int pi_hf_parse(const char *uri, struct pi_hf_ref *r);
void pi_hf_ref_free(struct pi_hf_ref *r);
/* The resolve URL of another file of the same repository. */
int pi_hf_file_url(const struct pi_hf_ref *r, const char *path, char *url, size_t cap);

extern const struct pi_source_ops pi_source_http;
extern const struct pi_source_ops pi_source_s3;
extern const struct pi_source_ops pi_source_hf;

#endif
