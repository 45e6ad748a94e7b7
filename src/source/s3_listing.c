/* s3_listing.c - the one reader of an S3 ListObjectsV2 page (the server's
 * XML: untrusted), and the two record shapes built on it: the list op's
 * entries (pi_s3_list_key: URI, name relative to the prefix, size, ETag,
 * LastModified)
 * and the metadata cache's (key, size, ETag) records (pi_s3_stat_add;
 * file/metacache.c checks its entries against them). s3.c does the
 * requests (s3_walk). Apart from s3.c and outside its libcurl guard, so
 * that fuzz/fuzz_s3_list.c drives it in every build. Bounded by the body's
 * length (NUL bytes inside it included), linear in it, and keys outside
 * the listed prefix (a listing that lies) are left out. */
#include "remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>

/* Decodes the five XML entities of s[0, n) into out (n + 1 bytes). */
static size_t ent_decode(const char *s, size_t n, char *out) {
    static const struct {
        const char *e;
        char c;
    } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        int hit = 0;
        if (s[i] == '&')
            for (size_t k = 0; k < PI_ARRAY_LEN(ents) && !hit; k++) {
                size_t l = strlen(ents[k].e);
                if (i + l <= n && memcmp(s + i, ents[k].e, l) == 0) {
                    out[o++] = ents[k].c;
                    i += l;
                    hit = 1;
                }
            }
        if (!hit) out[o++] = s[i++];
    }
    out[o] = 0;
    return o;
}

/* The raw text [*a, *b) of the first <tag>...</tag> inside [p, end): 1, else 0. */
static int xml_span(const char *p, const char *end, const char *tag, const char **a, const char **b) {
    char open[32], close[32];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *s = memmem(p, (size_t)(end - p), open, strlen(open));
    if (!s) return 0;
    s += strlen(open);
    const char *e = memmem(s, (size_t)(end - s), close, strlen(close));
    if (!e) return 0;
    *a = s;
    *b = e;
    return 1;
}

/* The decoded text of <tag> inside [p, end) into out (cap bytes): 1, else
 * 0 (absent, too long, or holding a NUL byte). */
static int xml_field(const char *p, const char *end, const char *tag, char *out, size_t cap) {
    const char *a, *b;
    if (!xml_span(p, end, tag, &a, &b) || (size_t)(b - a) >= cap) return 0; /* decoding only shrinks */
    return ent_decode(a, (size_t)(b - a), out) == strlen(out);
}

/* An ISO 8601 UTC time as ListObjectsV2 states it ("2009-10-12T17:50:30.000Z")
 * in seconds since the epoch; 0 when it is not one. */
static int64_t iso_time(const char *t) {
    int y, mo, d, h, mi, se, n = 0;
    if (sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &n) != 6 || n != 19) return 0;
    if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60 || h < 0 ||
        mi < 0 || se < 0)
        return 0;
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi, .tm_sec = se};
    time_t v = timegm(&tm);
    return v > 0 ? (int64_t)v : 0;
}

int pi_s3_page(const char *body, size_t blen, const char *prefix, pi_s3_key_fn fn, void *arg, char *tok, size_t tokcap,
               int *more) {
    const char *p = body, *bend = body + blen;
    size_t pl = strlen(prefix), kcap = 0;
    char *key = NULL;
    int rc = 0;
    while (rc == 0 && p < bend && (p = memmem(p, (size_t)(bend - p), "<Contents>", 10))) {
        const char *e = memmem(p, (size_t)(bend - p), "</Contents>", 11);
        if (!e) break;
        const char *ka, *kb;
        if (xml_span(p, e, "Key", &ka, &kb)) {
            if ((rc = pi_grow((void **)&key, &kcap, (size_t)(kb - ka) + 1, 1)) < 0) break;
            size_t kl = ent_decode(ka, (size_t)(kb - ka), key);
            if (kl == strlen(key) && strncmp(key, prefix, pl) == 0) {
                char sz[32], etag[sizeof ((struct pi_stat_entry *)0)->etag], *end;
                uint64_t size = PI_SIZE_UNKNOWN;
                if (xml_field(p, e, "Size", sz, sizeof sz) && sz[0] >= '0' && sz[0] <= '9') {
                    errno = 0;
                    unsigned long long v = strtoull(sz, &end, 10);
                    if (!*end && errno == 0) size = v;
                }
                if (!xml_field(p, e, "ETag", etag, sizeof etag)) etag[0] = 0;
                char lm[40];
                int64_t mtime = xml_field(p, e, "LastModified", lm, sizeof lm) ? iso_time(lm) : 0;
                rc = fn(arg, key, size, etag, mtime);
            }
        }
        p = e + 11;
    }
    pi_free(key);
    tok[0] = 0;
    *more = memmem(body, blen, "<IsTruncated>true</IsTruncated>", 31) != NULL;
    const char *ta, *tb;
    if (*more && xml_span(body, bend, "NextContinuationToken", &ta, &tb) && (size_t)(tb - ta) < tokcap)
        ent_decode(ta, (size_t)(tb - ta), tok);
    return rc;
}

const char *pi_s3_split(const char *uri, char *base, size_t cap) {
    if (strncasecmp(uri, "s3://", 5) != 0 && strncasecmp(uri, "gs://", 5) != 0) return NULL;
    size_t bl = strcspn(uri + 5, "/");
    if (bl == 0 || 5 + bl + 2 > cap) return NULL;
    snprintf(base, cap, "%s://%.*s/", strncasecmp(uri, "gs://", 5) == 0 ? "gs" : "s3", (int)bl, uri + 5);
    return uri[5 + bl] == '/' ? uri + 5 + bl + 1 : uri + 5 + bl;
}

/* ---- the list op's entries -------------------------------------------------------- */
int pi_s3_list_key(void *arg, const char *key, uint64_t size, const char *etag, int64_t mtime) {
    struct pi_s3_lister *l = arg;
    size_t pl = strlen(l->prefix), kl = strlen(key);
    /* the prefix itself and "directory" markers (keys ending in '/') are not objects */
    if (kl <= pl || key[kl - 1] == '/') return 0;
    l->u.n = 0;
    pi_buf_put(&l->u, l->base, strlen(l->base));
    pi_buf_put(&l->u, key, kl + 1);
    if (l->u.oom) return pi_err(-ENOMEM, "%s: out of memory listing", l->uri);
    struct pi_list_entry ent = {.uri = l->u.p, .rel = key + pl, .size = size, .identity = etag, .mtime = mtime};
    return l->fn(l->arg, &ent);
}

int pi_s3_listing_parse(const char *uri, const char *body, size_t len, pi_list_fn fn, void *arg) {
    char base[600], tok[2048];
    const char *prefix = pi_s3_split(uri, base, sizeof base);
    if (!prefix) return pi_err(PAGEIN_E_INVALID, "%s: expected s3://BUCKET/PREFIX or gs://BUCKET/PREFIX", uri);
    struct pi_s3_lister l = {.fn = fn, .arg = arg, .uri = uri, .base = base, .prefix = prefix};
    int more = 0;
    int rc = pi_s3_page(body, len, prefix, pi_s3_list_key, &l, tok, sizeof tok, &more);
    pi_free(l.u.p);
    return rc;
}

/* ---- the metadata cache's records --------------------------------------------------- */
int pi_s3_stat_add(void *arg, const char *key, uint64_t size, const char *etag, int64_t mtime) {
    (void)mtime;
    struct pi_s3_stats *st = arg;
    if (size == PI_SIZE_UNKNOWN || !etag[0]) return 0; /* nothing to vouch with */
    FORWARD_IF(pi_grow((void **)&st->v, &st->cap, st->n + 1, sizeof *st->v));
    struct pi_stat_entry s;
    memset(&s, 0, sizeof s);
    size_t bl = strlen(st->base), kl = strlen(key);
    s.uri = pi_malloc(bl + kl + 1);
    if (!s.uri) return pi_err(-ENOMEM, "ListObjectsV2: out of memory");
    memcpy(s.uri, st->base, bl);
    memcpy(s.uri + bl, key, kl + 1);
    s.size = size;
    snprintf(s.etag, sizeof s.etag, "%s", etag);
    st->v[st->n++] = s;
    return 0;
}

/* Frees what a stat_dir op returned (these records: a listing's). */
void pi_stat_entries_free(struct pi_stat_entry *v, size_t n) {
    for (size_t i = 0; v && i < n; i++) pi_free(v[i].uri);
    pi_free(v);
}

int pi_s3_stat_page(const char *body, size_t blen, const char *base, const char *prefix, struct pi_stat_entry **v,
                    size_t *n, size_t *cap, char *tok, size_t tokcap, int *more) {
    struct pi_s3_stats st = {.base = base, .v = *v, .n = *n, .cap = *cap};
    int rc = pi_s3_page(body, blen, prefix, pi_s3_stat_add, &st, tok, tokcap, more);
    *v = st.v;
    *n = st.n;
    *cap = st.cap;
    return rc;
}

