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
 * JSON is read with the shared pull reader (core/json.c): strict syntax
 * and UTF-8, every escape, iterative skipping with a depth limit.
 */
#include "load.h"
#include "../format/format.h"

#include <stdlib.h>

#define INDEX_MAX_DEPTH 64
#define INDEX_MAX_SHARDS 100000u

/* Copies a string the JSON reader returned (valid only until pi_json_free)
 * into the index's arena, NUL-terminated; it may contain NUL bytes. */
static int keep(struct pi_index *ix, const char *s, size_t n, char **out) {
    *out = pi_arena_strndup(&ix->arena, s, n);
    return *out ? 0 : pi_err(-ENOMEM, "index: out of memory");
}

/* Enters an object that the schema requires: anything else is malformed. */
static int enter_object(struct pi_json *j, const char *what) {
    int rc = pi_json_enter(j, PI_JSON_OBJECT);
    if (rc == PAGEIN_E_BAD_TYPE)
        return pi_err(PAGEIN_E_BAD_JSON, "index: %s is not an object (byte %zu)", what, pi_json_offset(j));
    return rc;
}

struct ictx {
    struct pi_index *ix;
    size_t cap;
    char **raw_shard; /* per entry, the shard name before dedup */
    int seen_meta, seen_map;
};

/* "metadata": null, or an object whose "total_size" (a u64) is kept and
 * whose other members are skipped. */
static int parse_metadata(struct pi_json *j, struct ictx *c) {
    if (pi_json_peek(j) == PI_JSON_NULL) return pi_json_null(j);
    FORWARD_IF(enter_object(j, "metadata"));
    const char *key;
    size_t klen;
    int rc;
    while ((rc = pi_json_next(j, &key, &klen)) > 0) {
        if (klen == 10 && memcmp(key, "total_size", 10) == 0 && pi_json_peek(j) == PI_JSON_NUMBER) {
            uint64_t u;
            rc = pi_json_u64(j, &u);
            if (rc == 0) {
                c->ix->total_size = u;
                c->ix->has_total_size = 1;
            } else if (rc == PAGEIN_E_BAD_TYPE || rc == PAGEIN_E_OVERFLOW) {
                rc = pi_json_skip(j); /* a float or huge total is informational only */
            }
        } else {
            rc = pi_json_skip(j);
        }
        FORWARD_IF(rc);
    }
    return rc;
}

static int add_entry(struct ictx *c, const char *key, size_t klen, const char *shard, size_t slen) {
    struct pi_index *ix = c->ix;
    char *name, *sh;
    FORWARD_IF(keep(ix, key, klen, &name));
    if (slen == 0 || memchr(shard, '/', slen) || memchr(shard, 0, slen) || (slen == 1 && shard[0] == '.') ||
        (slen == 2 && memcmp(shard, "..", 2) == 0))
        return pi_err(PAGEIN_E_BAD_INDEX, "index: tensor '%s': shard name '%.*s' is not a plain file name", name,
                      (int)PI_MIN(slen, 200), shard);
    FORWARD_IF(keep(ix, shard, slen, &sh));
    if (ix->n == c->cap) { /* two arrays, one capacity: cap is the smaller */
        size_t ce = c->cap, cr = c->cap;
        FORWARD_IF(pi_grow((void **)&ix->e, &ce, ix->n + 1, sizeof *ix->e));
        FORWARD_IF(pi_grow((void **)&c->raw_shard, &cr, ix->n + 1, sizeof *c->raw_shard));
        c->cap = PI_MIN(ce, cr);
    }
    ix->e[ix->n].name = name;
    ix->e[ix->n].name_len = klen;
    ix->e[ix->n].shard = 0;
    c->raw_shard[ix->n] = sh;
    ix->n++;
    return 0;
}

/* "weight_map": {"tensor": "shard file", ...} */
static int parse_weight_map(struct pi_json *j, struct ictx *c) {
    FORWARD_IF(enter_object(j, "weight_map"));
    const char *key, *shard;
    size_t klen, slen;
    int rc;
    while ((rc = pi_json_next(j, &key, &klen)) > 0) {
        if (pi_json_peek(j) != PI_JSON_STRING)
            return pi_err(PAGEIN_E_BAD_INDEX, "index: weight_map value for '%.*s' is not a string",
                          (int)PI_MIN(klen, 200), key);
        FORWARD_IF(pi_json_string(j, &shard, &slen));
        FORWARD_IF(add_entry(c, key, klen, shard, slen));
    }
    return rc;
}

/* The top-level object; unknown keys are skipped (iteratively, depth-limited). */
static int parse_top(struct pi_json *j, struct ictx *c) {
    FORWARD_IF(enter_object(j, "the document"));
    const char *key;
    size_t klen;
    int rc;
    while ((rc = pi_json_next(j, &key, &klen)) > 0) {
        if (klen == 8 && memcmp(key, "metadata", 8) == 0) {
            if (c->seen_meta++) return pi_err(PAGEIN_E_DUPLICATE, "index: duplicate key 'metadata'");
            rc = parse_metadata(j, c);
        } else if (klen == 10 && memcmp(key, "weight_map", 10) == 0) {
            if (c->seen_map++) return pi_err(PAGEIN_E_DUPLICATE, "index: duplicate key 'weight_map'");
            rc = parse_weight_map(j, c);
        } else {
            rc = pi_json_skip(j);
        }
        FORWARD_IF(rc);
    }
    FORWARD_IF(rc);
    return pi_json_finish(j);
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
    struct pi_json j;
    pi_json_init(&j, buf, len, INDEX_MAX_DEPTH);
    struct ictx c = {.ix = ix};
    int rc = parse_top(&j, &c);
    pi_json_free(&j);
    if (rc < 0) {
        if (strncmp(pagein_last_error_detail(), "index:", 6) != 0) pi_err_prefix("index"); /* reader errors */
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
