/* s3_listing.c - one page of an S3 ListObjectsV2 answer read into
 * (key, size, ETag) records: what the metadata cache checks its entries
 * against (file/metacache.c, pi_meta_vouch_dir; s3.c pi_s3_list_stat does
 * the requests). Apart from s3.c and outside its libcurl guard, so that
 * fuzz/fuzz_s3list.c drives it in every build. Untrusted input: the
 * server's XML, read by tag, bounded by the body's length. */
#include "remote.h"

#include <stdio.h>
#include <stdlib.h>

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
            for (size_t k = 0; k < sizeof ents / sizeof ents[0] && !hit; k++) {
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

/* The text of the first <tag>...</tag> inside [p, end), decoded into out
 * (cap bytes): 1, else 0. */
static int xml_field(const char *p, const char *end, const char *tag, char *out, size_t cap) {
    char open[32], close[32];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *a = memmem(p, (size_t)(end - p), open, strlen(open));
    if (!a) return 0;
    a += strlen(open);
    const char *b = memmem(a, (size_t)(end - a), close, strlen(close));
    if (!b || (size_t)(b - a) >= cap) return 0; /* decoding only shrinks */
    ent_decode(a, (size_t)(b - a), out);
    return 1;
}

/* One ListObjectsV2 page: each <Contents> with a Key, a decimal Size and
 * an ETag appended to *v (base + key as its uri; others skipped), the next
 * continuation token into tok (tokcap bytes, "" if none) and whether the
 * listing goes on. 0, or -ENOMEM. The parser fuzz/fuzz_s3list.c drives:
 * the body is the server's, untrusted. */
int pi_s3_stat_page(const char *body, size_t blen, const char *base, struct pi_s3_stat **v, size_t *n, size_t *cap,
                    char *tok, size_t tokcap, int *more) {
    const char *p = body, *bend = body + blen;
    size_t bl = strlen(base);
    int rc = 0;
    char *key = pi_malloc(4096);
    if (!key) return pi_err(-ENOMEM, "ListObjectsV2: out of memory");
    while (p < bend && (p = memmem(p, (size_t)(bend - p), "<Contents>", 10))) {
        const char *e = memmem(p, (size_t)(bend - p), "</Contents>", 11);
        if (!e) break;
        char sz[32], *end;
        struct pi_s3_stat s;
        memset(&s, 0, sizeof s);
        if (xml_field(p, e, "Key", key, 4096) && xml_field(p, e, "Size", sz, sizeof sz) &&
            xml_field(p, e, "ETag", s.etag, sizeof s.etag) && sz[0] >= '0' && sz[0] <= '9') {
            errno = 0;
            s.size = strtoull(sz, &end, 10);
            if (!*end && errno == 0) {
                if ((rc = pi_grow((void **)v, cap, *n + 1, sizeof **v)) < 0) break;
                size_t kl = strlen(key);
                s.uri = pi_malloc(bl + kl + 1);
                if (!s.uri) {
                    rc = pi_err(-ENOMEM, "ListObjectsV2: out of memory");
                    break;
                }
                memcpy(s.uri, base, bl);
                memcpy(s.uri + bl, key, kl + 1);
                (*v)[(*n)++] = s;
            }
        }
        p = e + 11;
    }
    pi_free(key);
    tok[0] = 0;
    *more = memmem(body, blen, "<IsTruncated>true</IsTruncated>", 31) != NULL;
    const char *t = memmem(body, blen, "<NextContinuationToken>", 23);
    if (*more && t) {
        t += 23;
        const char *e = memmem(t, (size_t)(bend - t), "</NextContinuationToken>", 24);
        if (e && (size_t)(e - t) < tokcap) ent_decode(t, (size_t)(e - t), tok);
    }
    return rc;
}

void pi_s3_stat_free(struct pi_s3_stat *v, size_t n) {
    for (size_t i = 0; v && i < n; i++) pi_free(v[i].uri);
    pi_free(v);
}
