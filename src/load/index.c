/* index.c - the sharded safetensors index (`*.safetensors.index.json`).
 *
 * The index is untrusted input: it names the files we are about to open. The
 * parser takes a buffer, does no I/O, and accepts exactly
 *
 *   {"metadata": {...anything..., "total_size": N}, "weight_map": {"tensor": "shard", ...}, ...}
 *
 * Unknown top-level keys and metadata values are skipped (depth-limited).
 * weight_map is required; its keys must be unique and its values must be
 * plain file names (no '/', no NUL, not "." or ".."), so an index can never
 * make us open a file outside its own directory. Shards are returned sorted
 * by name, which is shard order for the `-0000i-of-0000n` convention.
 *
 * JSON strings are decoded fully (escapes, \uXXXX with surrogate pairs) and
 * their raw bytes must be valid UTF-8.
 */
#include "load.h"

#include <stdlib.h>

#define INDEX_MAX_DEPTH 64
#define INDEX_MAX_SHARDS 100000u

struct jp {
    const uint8_t *p, *end, *start;
    struct pi_arena *arena;
};

static void ws(struct jp *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int bad(struct jp *j, const char *what) {
    return pi_err(PAGEIN_E_BAD_JSON, "index: %s at byte %zu", what, (size_t)(j->p - j->start));
}

/* Length of a valid UTF-8 sequence at p (max n bytes), 0 if invalid. */
static size_t utf8_len(const uint8_t *p, size_t n) {
    uint8_t c = p[0];
    if (c < 0x80) return 1;
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    return len;
}

static int hex4(const uint8_t *p, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(uint8_t *d, uint32_t cp) {
    if (cp < 0x80) { d[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { d[0] = (uint8_t)(0xC0 | (cp >> 6)); d[1] = (uint8_t)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        d[0] = (uint8_t)(0xE0 | (cp >> 12));
        d[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (uint8_t)(0xF0 | (cp >> 18));
    d[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    d[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    d[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* Parses a string at j->p (which must be '"'). With out != NULL the decoded
 * bytes are copied into the arena (NUL-terminated, may contain NUL). */
static int jstring(struct jp *j, char **out, size_t *out_len) {
    if (j->p >= j->end || *j->p != '"') return bad(j, "expected a string");
    j->p++;
    const uint8_t *s = j->p;
    /* first pass: find the end, validate; decoded length <= raw length */
    while (j->p < j->end && *j->p != '"') {
        uint8_t c = *j->p;
        if (c < 0x20) return bad(j, "control character in string");
        if (c == '\\') {
            if (j->end - j->p < 2) return bad(j, "truncated escape");
            j->p += 2;
            continue;
        }
        size_t l = utf8_len(j->p, (size_t)(j->end - j->p));
        if (!l) return pi_err(PAGEIN_E_BAD_UTF8, "index: invalid UTF-8 at byte %zu", (size_t)(j->p - j->start));
        j->p += l;
    }
    if (j->p >= j->end) return bad(j, "unterminated string");
    const uint8_t *e = j->p;
    j->p++; /* closing quote */
    uint8_t *d = NULL;
    if (out) {
        d = pi_arena_alloc(j->arena, (size_t)(e - s) + 1);
        if (!d) return pi_err(-ENOMEM, "index: out of memory");
    }
    size_t n = 0;
    for (const uint8_t *q = s; q < e;) {
        if (*q != '\\') {
            if (d) d[n] = *q;
            n++, q++;
            continue;
        }
        uint8_t c = q[1];
        q += 2;
        uint8_t lit;
        switch (c) {
        case '"': lit = '"'; break;
        case '\\': lit = '\\'; break;
        case '/': lit = '/'; break;
        case 'b': lit = '\b'; break;
        case 'f': lit = '\f'; break;
        case 'n': lit = '\n'; break;
        case 'r': lit = '\r'; break;
        case 't': lit = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (e - q < 4 || hex4(q, &cp) < 0) return bad(j, "bad \\u escape");
            q += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (e - q < 6 || q[0] != '\\' || q[1] != 'u' || hex4(q + 2, &lo) < 0 || lo < 0xDC00 ||
                    lo > 0xDFFF)
                    return pi_err(PAGEIN_E_BAD_UTF8, "index: unpaired surrogate in string");
                q += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return pi_err(PAGEIN_E_BAD_UTF8, "index: unpaired surrogate in string");
            }
            uint8_t tmp[4];
            size_t l = put_utf8(tmp, cp);
            if (d) memcpy(d + n, tmp, l);
            n += l;
            continue;
        }
        default: return bad(j, "bad escape");
        }
        if (d) d[n] = lit;
        n++;
    }
    if (d) d[n] = 0;
    if (out) *out = (char *)d;
    if (out_len) *out_len = n;
    return 0;
}

/* Parses a JSON number; *is_uint set when it is a plain non-negative
 * integer that fits in u64. */
static int jnumber(struct jp *j, uint64_t *u, int *is_uint) {
    const uint8_t *s = j->p;
    int neg = 0, frac = 0;
    uint64_t v = 0;
    int ovf = 0;
    if (j->p < j->end && *j->p == '-') neg = 1, j->p++;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') return bad(j, "bad number");
    if (*j->p == '0') {
        j->p++;
    } else {
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
            if (pi_mul_overflow(v, 10, &v) || pi_add_overflow(v, (uint64_t)(*j->p - '0'), &v)) ovf = 1;
            j->p++;
        }
    }
    if (j->p < j->end && *j->p == '.') {
        frac = 1;
        j->p++;
        if (j->p >= j->end || *j->p < '0' || *j->p > '9') return bad(j, "bad number");
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        frac = 1;
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
        if (j->p >= j->end || *j->p < '0' || *j->p > '9') return bad(j, "bad number");
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    }
    (void)s;
    *u = v;
    *is_uint = !neg && !frac && !ovf;
    return 0;
}

static int jlit(struct jp *j, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0) return bad(j, "unexpected token");
    j->p += n;
    return 0;
}

/* Skips any value. */
static int jskip(struct jp *j, int depth) {
    if (depth > INDEX_MAX_DEPTH) return pi_err(PAGEIN_E_LIMIT, "index: nesting deeper than %d", INDEX_MAX_DEPTH);
    ws(j);
    if (j->p >= j->end) return bad(j, "unexpected end");
    uint64_t u;
    int isu;
    switch (*j->p) {
    case '"': return jstring(j, NULL, NULL);
    case 't': return jlit(j, "true");
    case 'f': return jlit(j, "false");
    case 'n': return jlit(j, "null");
    case '[':
        j->p++;
        ws(j);
        if (j->p < j->end && *j->p == ']') { j->p++; return 0; }
        for (;;) {
            FORWARD_IF(jskip(j, depth + 1));
            ws(j);
            if (j->p < j->end && *j->p == ',') { j->p++; continue; }
            if (j->p < j->end && *j->p == ']') { j->p++; return 0; }
            return bad(j, "expected ',' or ']'");
        }
    case '{':
        j->p++;
        ws(j);
        if (j->p < j->end && *j->p == '}') { j->p++; return 0; }
        for (;;) {
            ws(j);
            FORWARD_IF(jstring(j, NULL, NULL));
            ws(j);
            if (j->p >= j->end || *j->p != ':') return bad(j, "expected ':'");
            j->p++;
            FORWARD_IF(jskip(j, depth + 1));
            ws(j);
            if (j->p < j->end && *j->p == ',') { j->p++; continue; }
            if (j->p < j->end && *j->p == '}') { j->p++; return 0; }
            return bad(j, "expected ',' or '}'");
        }
    default: return jnumber(j, &u, &isu);
    }
}

/* Iterates the members of an object: cb(ctx, key, key_len) is called with
 * j->p at the value and must consume it. */
typedef int (*member_fn)(struct jp *j, void *ctx, const char *key, size_t key_len);

static int jobject(struct jp *j, member_fn cb, void *ctx) {
    ws(j);
    if (j->p >= j->end || *j->p != '{') return bad(j, "expected an object");
    j->p++;
    ws(j);
    if (j->p < j->end && *j->p == '}') { j->p++; return 0; }
    for (;;) {
        ws(j);
        char *key;
        size_t klen;
        FORWARD_IF(jstring(j, &key, &klen));
        ws(j);
        if (j->p >= j->end || *j->p != ':') return bad(j, "expected ':'");
        j->p++;
        ws(j);
        FORWARD_IF(cb(j, ctx, key, klen));
        ws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if (j->p < j->end && *j->p == '}') { j->p++; return 0; }
        return bad(j, "expected ',' or '}'");
    }
}

struct ictx {
    struct pi_index *ix;
    size_t cap;
    char **raw_shard; /* per entry, the shard name before dedup */
    int seen_meta, seen_map;
};

static int meta_member(struct jp *j, void *ctx, const char *key, size_t klen) {
    struct ictx *c = ctx;
    if (klen == 10 && memcmp(key, "total_size", 10) == 0 && j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        uint64_t u;
        int isu;
        FORWARD_IF(jnumber(j, &u, &isu));
        if (isu) {
            c->ix->total_size = u;
            c->ix->has_total_size = 1;
        }
        return 0;
    }
    return jskip(j, 2);
}

static int map_member(struct jp *j, void *ctx, const char *key, size_t klen) {
    struct ictx *c = ctx;
    struct pi_index *ix = c->ix;
    char *shard;
    size_t slen;
    if (j->p >= j->end || *j->p != '"')
        return pi_err(PAGEIN_E_BAD_INDEX, "index: weight_map value for '%s' is not a string", key);
    FORWARD_IF(jstring(j, &shard, &slen));
    if (slen == 0 || memchr(shard, '/', slen) || memchr(shard, 0, slen) || strcmp(shard, ".") == 0 ||
        strcmp(shard, "..") == 0)
        return pi_err(PAGEIN_E_BAD_INDEX, "index: tensor '%s': shard name '%s' is not a plain file name", key, shard);
    if (ix->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 64;
        struct pi_index_entry *ne = pi_realloc(ix->e, nc * sizeof *ne);
        if (!ne) return pi_err(-ENOMEM, "index: out of memory");
        ix->e = ne;
        char **nr = pi_realloc(c->raw_shard, nc * sizeof *nr);
        if (!nr) return pi_err(-ENOMEM, "index: out of memory");
        c->raw_shard = nr;
        c->cap = nc;
    }
    ix->e[ix->n].name = key;
    ix->e[ix->n].name_len = klen;
    ix->e[ix->n].shard = 0;
    c->raw_shard[ix->n] = shard;
    ix->n++;
    return 0;
}

static int top_member(struct jp *j, void *ctx, const char *key, size_t klen) {
    struct ictx *c = ctx;
    if (klen == 8 && memcmp(key, "metadata", 8) == 0) {
        if (c->seen_meta++) return pi_err(PAGEIN_E_DUPLICATE, "index: duplicate key 'metadata'");
        if (j->p < j->end && *j->p == 'n') return jlit(j, "null");
        return jobject(j, meta_member, c);
    }
    if (klen == 10 && memcmp(key, "weight_map", 10) == 0) {
        if (c->seen_map++) return pi_err(PAGEIN_E_DUPLICATE, "index: duplicate key 'weight_map'");
        return jobject(j, map_member, c);
    }
    return jskip(j, 1);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Entry order for duplicate detection: by name bytes. */
static int cmp_entry(const void *a, const void *b) {
    const struct pi_index_entry *x = a, *y = b;
    size_t n = PI_MIN(x->name_len, y->name_len);
    int c = memcmp(x->name, y->name, n);
    if (c) return c;
    return x->name_len < y->name_len ? -1 : x->name_len > y->name_len;
}

void pi_index_init(struct pi_index *ix) { memset(ix, 0, sizeof *ix); }

void pi_index_free(struct pi_index *ix) {
    if (!ix) return;
    pi_free(ix->e);
    pi_free(ix->shards);
    pi_arena_free(&ix->arena);
    memset(ix, 0, sizeof *ix);
}

int pi_index_parse(const uint8_t *buf, size_t len, struct pi_index *ix) {
    struct jp j = {buf, buf + len, buf, &ix->arena};
    struct ictx c = {.ix = ix};
    int rc = jobject(&j, top_member, &c);
    if (rc < 0) goto out;
    ws(&j);
    if (j.p != j.end) {
        rc = bad(&j, "trailing bytes after the object");
        goto out;
    }
    if (!c.seen_map) {
        rc = pi_err(PAGEIN_E_BAD_INDEX, "index: no \"weight_map\" object");
        goto out;
    }
    /* unique shard names, sorted */
    if (ix->n) {
        char **names = pi_malloc(ix->n * sizeof *names);
        if (!names) {
            rc = pi_err(-ENOMEM, "index: out of memory");
            goto out;
        }
        memcpy(names, c.raw_shard, ix->n * sizeof *names);
        qsort(names, ix->n, sizeof *names, cmp_str);
        size_t u = 0;
        for (size_t i = 0; i < ix->n; i++)
            if (u == 0 || strcmp(names[u - 1], names[i]) != 0) names[u++] = names[i];
        if (u > INDEX_MAX_SHARDS) {
            pi_free(names);
            rc = pi_err(PAGEIN_E_LIMIT, "index: %zu shards (limit %u)", u, INDEX_MAX_SHARDS);
            goto out;
        }
        ix->shards = names;
        ix->nshards = u;
        for (size_t i = 0; i < ix->n; i++) {
            char **hit = bsearch(&c.raw_shard[i], names, u, sizeof *names, cmp_str);
            ix->e[i].shard = (uint32_t)(hit - names);
        }
        /* duplicate tensor names */
        struct pi_index_entry *sorted = pi_malloc(ix->n * sizeof *sorted);
        if (!sorted) {
            rc = pi_err(-ENOMEM, "index: out of memory");
            goto out;
        }
        memcpy(sorted, ix->e, ix->n * sizeof *sorted);
        qsort(sorted, ix->n, sizeof *sorted, cmp_entry);
        for (size_t i = 1; i < ix->n; i++)
            if (cmp_entry(&sorted[i - 1], &sorted[i]) == 0) {
                rc = pi_err(PAGEIN_E_DUPLICATE, "index: tensor '%s' listed twice in weight_map", sorted[i].name);
                break;
            }
        pi_free(sorted);
    }
out:
    pi_free(c.raw_shard);
    return rc;
}
