/* ds_lines.c - the JSONL / text row: one sample per non-empty line ('\n'
 * separated, the newline excluded; a '\r' before it is kept, as
 * pagein.data's line datasets always did), one field "text" (binary: the
 * line's bytes, not validated as UTF-8). Plain files are indexed at open
 * by one sequential pass (8 + 8 bytes a line) and read by samples. .gz
 * and .zst files are streamed through the codec once at open, which keeps
 * no per-line index: only groups of whole lines, each at most the decode
 * budget of text (pi_ds_decode_budget: 64 MiB) and budget / 16 lines, 48
 * bytes a group. A group is read by decompressing the stream up to its
 * end through the shard's cursor (dscodec.c: in-order groups decompress
 * the stream once) and holds its text and 8 bytes a line: memory is the
 * budget, whatever the file expands to. */
#include "dsformat.h"
#include "../core/endian.h"
#include "../core/json.h"

#include <inttypes.h>

enum { Z_NONE, Z_GZIP, Z_ZSTD };

/* A group of a compressed shard: lines [first, first + count), whose text
 * is [t0, t1) of the decompressed stream; the index pass had consumed the
 * compressed bytes [0, cend) when it produced t1. Reading the group
 * fetches [the last group's cend, cend); the cursor reads what else it
 * needs (a read that starts over, a block that runs past cend) from the
 * source (dscodec.c). */
struct zgrp {
    uint64_t t0, t1, first, count, cend;
};

struct lines {
    uint64_t *off, *len; /* plain files: per line; offsets in the text */
    uint64_t n, cap;
    int z;
    uint64_t text_bytes; /* decompressed size (compressed shards) */
    struct zgrp *g;      /* compressed shards: the groups */
    size_t ng, gcap;
    struct pi_dszcur *cur;
    struct pi_dscol col;
};

struct lgroup {
    uint8_t *text;
    size_t len;
    uint32_t *start, *llen; /* per line of the group, in text */
};

static int lz_kind(const uint8_t *h, size_t nh) {
    if (nh >= 2 && h[0] == 0x1f && h[1] == 0x8b) return Z_GZIP;
    if (nh >= 4 && h[0] == 0x28 && h[1] == 0xb5 && h[2] == 0x2f && h[3] == 0xfd) return Z_ZSTD;
    return Z_NONE;
}

/* The row's one suffix list: what detect() claims, what a directory scan
 * picks up, what `read-samples --help` and pagein.data.formats() show. */
static const char *const lines_suffixes[] = {".jsonl", ".txt", ".ndjson", ".json", ".jsonl.gz", ".jsonl.zst",
                                             ".txt.gz", ".txt.zst", ".ndjson.gz", ".ndjson.zst", ".json.gz",
                                             ".json.zst", NULL};

static int lines_detect(const char *name, const uint8_t *h, size_t nh, const uint8_t *t, size_t nt, uint64_t size) {
    (void)t, (void)nt, (void)size, (void)h, (void)nh;
    for (const char *const *s = lines_suffixes; *s; s++)
        if (pi_ends_with(name, *s)) return 1;
    return 0;
}

static int push_line(struct lines *L, uint64_t off, uint64_t len) {
    if (L->n == L->cap) {
        size_t c1 = (size_t)L->cap, c2 = (size_t)L->cap;
        FORWARD_IF(pi_grow((void **)&L->off, &c1, (size_t)L->n + 1, 8));
        FORWARD_IF(pi_grow((void **)&L->len, &c2, (size_t)L->n + 1, 8));
        L->cap = PI_MIN(c1, c2);
    }
    L->off[L->n] = off;
    L->len[L->n] = len;
    L->n++;
    return 0;
}

/* Adds the lines of text[0, n) at base (offsets in the text). */
static int scan(struct pi_dsshard *sh, struct lines *L, const uint8_t *text, uint64_t n, uint64_t base,
                uint64_t *carry_start, int last) {
    uint64_t start = *carry_start; /* absolute offset where the current line began */
    const uint8_t *p = text, *e = text + n;
    while (p < e) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(e - p));
        if (!nl) break;
        uint64_t end = base + (uint64_t)(nl - text);
        if (end > start) FORWARD_IF(push_line(L, start, end - start));
        start = end + 1;
        p = nl + 1;
    }
    if (last && base + n > start) FORWARD_IF(push_line(L, start, base + n - start));
    *carry_start = start;
    (void)sh;
    return 0;
}

static void lines_free(struct lines *L) {
    if (!L) return;
    pi_free(L->off);
    pi_free(L->len);
    pi_free(L->g);
    pi_ds_zcur_free(L->cur);
    pi_free(L);
}

/* The index pass of a compressed file: the text streamed through the
 * codec's buffer (never held whole), its lines counted and cut into
 * groups of at most `budget` bytes and budget / 16 lines. The count is
 * held to pi_ds_zcount_check (an allowance, or 8 lines a compressed byte)
 * as it grows, so a bomb of empty-ish lines stops early. */
struct zscan {
    struct pi_dsshard *sh;
    struct lines *L;
    uint64_t base, start, budget, size, in_pos;
    struct zgrp cur; /* the group being filled (count 0: none) */
};

static int zgroup_close(struct zscan *z) {
    struct lines *L = z->L;
    if (!z->cur.count) return 0;
    FORWARD_IF(pi_grow((void **)&L->g, &L->gcap, L->ng + 1, sizeof *L->g));
    L->g[L->ng++] = z->cur;
    z->cur.count = 0;
    return 0;
}

/* One line [a, b) of the text (b: its newline, or the end). */
static int zline(struct zscan *z, uint64_t a, uint64_t b) {
    struct lines *L = z->L;
    if (b - a > z->budget)
        return pi_ds_err(z->sh, PAGEIN_E_LIMIT, UINT64_MAX, L->n, NULL,
                         "a line of %" PRIu64 " bytes at text offset %" PRIu64
                         ", more than the decode budget of %" PRIu64 " (PAGEIN_DS_DECODE_BUDGET)",
                         b - a, a, z->budget);
    if (z->cur.count && (b - z->cur.t0 > z->budget || z->cur.count >= z->budget / 16)) FORWARD_IF(zgroup_close(z));
    if (!z->cur.count) z->cur = (struct zgrp){.t0 = a, .first = L->n};
    z->cur.count++;
    z->cur.t1 = b;
    /* produced by now: the compressed bytes consumed so far */
    z->cur.cend = PI_MIN(z->size, z->in_pos);
    L->n++;
    if ((L->n & 0xfffff) == 0) return pi_ds_zcount_check(z->sh, L->n, z->size, "compressed lines");
    return 0;
}

static int zscan_piece(void *ctx, const uint8_t *p, size_t len) {
    struct zscan *z = ctx;
    const uint8_t *q = p, *e = p + len;
    while (q < e) {
        const uint8_t *nl = memchr(q, '\n', (size_t)(e - q));
        if (!nl) break;
        uint64_t end = z->base + (uint64_t)(nl - p);
        if (end > z->start) FORWARD_IF(zline(z, z->start, end));
        z->start = end + 1;
        q = nl + 1;
    }
    z->base += len;
    if (z->base - z->start > z->budget) /* an unfinished line already past the budget */
        return zline(z, z->start, z->base);
    return 0;
}

static int index_compressed(struct pi_dsshard *sh, struct lines *L, const uint8_t *in, uint64_t size) {
    struct zscan z = {.sh = sh, .L = L, .budget = pi_ds_decode_budget(), .size = size};
    FORWARD_IF(pi_ds_zcur_new(&L->cur, L->z == Z_GZIP ? 1 : 2, sh->name));
    sh->in_order = 1;
    /* the pass runs the cursor itself, piece by piece, so that cend is
     * what reading a group will need */
    uint8_t *piece = pi_malloc(1u << 17);
    if (!piece) return pi_err(-ENOMEM, "%s: out of memory", sh->name);
    int rc = 0;
    uint64_t at = 0, got = 0;
    for (;;) {
        rc = pi_ds_zcur_next(L->cur, in, (size_t)size, piece, 1u << 17, &got, &z.in_pos, sh->name);
        if (rc < 0 || got == 0) break;
        if ((rc = zscan_piece(&z, piece, (size_t)got)) < 0) break;
        at += got;
    }
    pi_free(piece);
    pi_ds_zcur_reset(L->cur);
    FORWARD_IF(rc);
    if (at > z.start) FORWARD_IF(zline(&z, z.start, at)); /* the last line, without a newline */
    FORWARD_IF(zgroup_close(&z));
    FORWARD_IF(pi_ds_zcount_check(sh, L->n, size, "compressed lines"));
    L->text_bytes = at;
    sh->ngroups = L->ng;
    return 0;
}

/* The cached line index: u32 z, u64 text bytes, u64 lines, then per line
 * u64 offset and u64 length. Checked like any input: ascending, inside the
 * text. 1 loaded, 0 not usable. */
#define LIX_MAGIC "PGLNIX01"

static int cache_load(const struct pi_dsshard *sh, struct lines *L, const char *path) {
    uint8_t *b;
    size_t n;
    if (pi_ds_cache_read(sh, path, LIX_MAGIC, &b, &n) <= 0) return 0;
    int ok = 0;
    if (n >= 20) {
        uint32_t z = b[0];
        uint64_t tb = pi_le64(b + 4), cnt = pi_le64(b + 12), span = z ? tb : sh->src->size, prev = 0;
        if (z == Z_NONE && cnt <= (n - 20) / 16 && cnt * 16 == n - 20 && (L->off = pi_malloc((size_t)(cnt ? cnt : 1) * 8)) &&
            (L->len = pi_malloc((size_t)(cnt ? cnt : 1) * 8))) {
            ok = 1;
            for (uint64_t i = 0; i < cnt && ok; i++) {
                uint64_t o = pi_le64(b + 20 + 16 * i), l = pi_le64(b + 28 + 16 * i);
                if (o < prev || l == 0 || l > span || o > span - l) ok = 0;
                L->off[i] = o, L->len[i] = l;
                prev = o + l;
            }
            if (ok) L->n = L->cap = cnt, L->z = (int)z, L->text_bytes = tb;
        }
    }
    pi_free(b);
    if (!ok) {
        pi_free(L->off), pi_free(L->len);
        L->off = L->len = NULL;
        L->n = L->cap = 0;
    }
    return ok;
}

static void cache_store(const struct pi_dsshard *sh, const struct lines *L, const char *path) {
    size_t n = 20 + (size_t)L->n * 16;
    uint8_t *b = pi_malloc(n);
    if (!b) return;
    memset(b, 0, 20);
    b[0] = (uint8_t)L->z;
    pi_st_le64(b + 4, L->text_bytes);
    pi_st_le64(b + 12, L->n);
    for (uint64_t k = 0; k < L->n; k++) {
        pi_st_le64(b + 20 + 16 * k, L->off[k]);
        pi_st_le64(b + 28 + 16 * k, L->len[k]);
    }
    pi_ds_cache_write(sh, path, LIX_MAGIC, b, n);
    pi_free(b);
}

/* A .json file holding one JSON array, or one value over several lines, is
 * not JSON Lines: read line by line it would give fragments, or the whole
 * array as one sample. Refused (PAGEIN_E_FORMAT naming the file) when it is
 * one line that opens an array (json.dump, pandas' to_json(orient="records")),
 * or when its first line (up to 1 MiB) opens an array or object that does
 * not end on that line; a first line longer than that is not judged. JSON
 * Lines under a .json name is read. Uncompressed files only (the others are
 * not held). */
static int refuse_json_document(struct pi_dsshard *sh, const struct lines *L) {
    if (L->z != Z_NONE || !L->n || !pi_ends_with(sh->name, ".json")) return 0;
    uint64_t n = PI_MIN(L->len[0], (uint64_t)1 << 20);
    uint8_t *b = pi_malloc(n ? n : 1);
    if (!b) return pi_err(-ENOMEM, "%s: out of memory", sh->name);
    int rc = pi_source_read(sh->src, b, n, L->off[0]);
    uint64_t i = 0;
    while (rc >= 0 && i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r')) i++;
    int open = rc >= 0 && i < n && (b[i] == '[' || b[i] == '{') ? b[i] : 0;
    if (open) {
        int whole = 1; /* a first line past 1 MiB: not judged */
        if (n == L->len[0]) {
            struct pi_json j;
            pi_json_init(&j, b + i, (size_t)(n - i), 0);
            whole = pi_json_skip(&j) >= 0 && pi_json_finish(&j) >= 0;
            pi_json_free(&j);
        }
        if (!whole || (open == '[' && L->n == 1))
            rc = pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL,
                           "a JSON %s, not JSON Lines (one JSON value per line): read it with a JSON parser, or "
                           "write one record per line (.jsonl)",
                           open == '[' ? "array" : "document over several lines");
    }
    pi_free(b);
    return rc < 0 ? rc : 0;
}

static int lines_open(struct pi_dsshard *sh, const struct pi_dsopen *a) {
    static const char *const only[] = {"text"};
    FORWARD_IF(pi_ds_col_flat(sh, a, only, 1, NULL));
    struct lines *L = pi_calloc(1, sizeof *L);
    if (!L) return pi_err(-ENOMEM, "%s: out of memory", sh->name);
    uint64_t size = sh->src->size;
    uint8_t head[4] = {0};
    int rc = 0;
    uint8_t *buf = NULL;
    char *cpath = NULL;
    if (size >= 4 && (rc = pi_source_read(sh->src, head, 4, 0)) < 0) goto fail;
    L->z = lz_kind(head, size >= 4 ? 4 : 0);
    /* small files are indexed faster than a cache is checked; a compressed
     * file's index is its groups, made by the one pass that checks it */
    cpath = size >= (1u << 20) && L->z == Z_NONE ? pi_ds_cache_path(sh, a, "lines") : NULL;
    int cached = cpath && cache_load(sh, L, cpath);
    if (!cached && L->z == Z_NONE) {
        /* one sequential pass in 4 MiB pieces */
        const uint64_t piece = 4u << 20;
        buf = pi_malloc(piece);
        if (!buf) {
            rc = pi_err(-ENOMEM, "%s: out of memory", sh->name);
            goto fail;
        }
        uint64_t carry = 0;
        for (uint64_t off = 0; off < size || off == 0; off += piece) {
            uint64_t n = PI_MIN(piece, size - off);
            if (n && (rc = pi_source_read(sh->src, buf, n, off)) < 0) goto fail;
            if ((rc = scan(sh, L, buf, n, off, &carry, off + n >= size)) < 0) goto fail;
            if (size == 0) break;
        }
    } else if (!cached) {
        if (size > PI_DS_MAX_DECODE) {
            rc = pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, UINT64_MAX, NULL,
                           "compressed file of %" PRIu64 " bytes (read whole: at most %llu)", size, PI_DS_MAX_DECODE);
            goto fail;
        }
        buf = pi_malloc(size ? size : 1);
        if (!buf) {
            rc = pi_err(-ENOMEM, "%s: out of memory for %" PRIu64 " bytes", sh->name, size);
            goto fail;
        }
        if ((rc = pi_source_read(sh->src, buf, size, 0)) < 0) goto fail;
        if ((rc = index_compressed(sh, L, buf, size)) < 0) goto fail;
    }
    if ((rc = refuse_json_document(sh, L)) < 0) goto fail;
    if (cpath && !cached) cache_store(sh, L, cpath);
    pi_free(cpath);
    cpath = NULL;
    pi_free(buf);
    L->col = (struct pi_dscol){.name = "text", .type = PI_DT_BINARY};
    pi_ds_shard_set(sh, L, &L->col, 1, L->n);
    return 0;
fail:
    pi_free(cpath);
    pi_free(buf);
    lines_free(L);
    return rc;
}

static void lines_close(struct pi_dsshard *sh) { lines_free(sh->impl); }

static int lines_locate(const struct pi_dsshard *sh, uint64_t i, uint64_t *off, uint64_t *len) {
    const struct lines *L = sh->impl;
    *off = L->off[i];
    *len = L->len[i];
    return 0;
}

static int lines_sample(const struct pi_dsshard *sh, uint64_t i, const uint8_t *p, uint64_t len, struct pi_dsfield *f,
                        size_t cap) {
    (void)sh, (void)i;
    if (cap >= 1) f[0] = (struct pi_dsfield){.name = "text", .type = PI_DT_BINARY, .data = p, .nbytes = len};
    return 1;
}

/* compressed shards: groups of whole lines, read through the cursor */
static int lines_group(const struct pi_dsshard *sh, uint64_t g, struct pi_dsgroupinfo *gi) {
    const struct lines *L = sh->impl;
    if (g >= L->ng) return pi_ds_err(sh, PAGEIN_E_RANGE, g, UINT64_MAX, NULL, "no such group");
    *gi = (struct pi_dsgroupinfo){L->g[g].first, L->g[g].count, L->g[g].cend};
    return 0;
}
static int lines_ranges(const struct pi_dsshard *sh, uint64_t g, struct pi_dsrange *r, size_t cap) {
    const struct lines *L = sh->impl;
    if (g >= L->ng) return pi_ds_err(sh, PAGEIN_E_RANGE, g, UINT64_MAX, NULL, "no such group");
    /* the group's own compressed bytes: read in order, the cursor goes on
     * from the last group's (anything else it reads from the source) */
    uint64_t c0 = g ? PI_MIN(L->g[g - 1].cend, L->g[g].cend) : 0;
    if (cap >= 1) r[0] = (struct pi_dsrange){c0, L->g[g].cend - c0};
    return 1;
}
static void lgroup_free(struct lgroup *G) {
    if (!G) return;
    pi_free(G->text);
    pi_free(G->start);
    pi_free(G->llen);
    pi_free(G);
}
static int lines_decode(const struct pi_dsshard *sh, struct pi_dsgroup *grp) {
    const struct lines *L = sh->impl;
    if (grp->nbufs != 1 || grp->g >= L->ng)
        return pi_ds_err(sh, PAGEIN_E_INVALID, grp->g, UINT64_MAX, NULL, "decode given %zu buffers", grp->nbufs);
    const struct zgrp *zg = &L->g[grp->g];
    struct lgroup *G = pi_calloc(1, sizeof *G);
    uint64_t tl = zg->t1 - zg->t0;
    if (G) {
        G->len = (size_t)tl;
        G->text = pi_malloc(tl ? tl : 1);
        G->start = pi_malloc(zg->count * sizeof *G->start);
        G->llen = pi_malloc(zg->count * sizeof *G->llen);
    }
    if (!G || !G->text || !G->start || !G->llen) {
        lgroup_free(G);
        return pi_err(-ENOMEM, "%s: out of memory for a group of %" PRIu64 " bytes", sh->name, tl);
    }
    uint64_t c0 = grp->g ? PI_MIN(L->g[grp->g - 1].cend, zg->cend) : 0;
    struct pi_dszin in = {grp->bufs[0].p, c0, (size_t)grp->bufs[0].len, sh->src->size, sh->src};
    int rc = pi_ds_zcur_read(L->cur, &in, zg->t0, G->text, tl, sh->name);
    /* the lines again: the same count, or the file is not what was indexed */
    uint64_t k = 0, at = 0;
    while (rc == 0 && at < tl) {
        const uint8_t *nl = memchr(G->text + at, '\n', (size_t)(tl - at));
        uint64_t end = nl ? (uint64_t)(nl - G->text) : tl;
        if (end > at) {
            if (k == zg->count) break;
            G->start[k] = (uint32_t)at;
            G->llen[k++] = (uint32_t)(end - at);
        }
        at = end + 1;
    }
    if (rc == 0 && k != zg->count)
        rc = pi_ds_err(sh, PAGEIN_E_CHANGED, grp->g, UINT64_MAX, NULL,
                       "holds %" PRIu64 " lines or more, %" PRIu64 " at open", k, zg->count);
    if (rc < 0) {
        lgroup_free(G);
        return rc;
    }
    grp->impl = G;
    return 0;
}
static int lines_fields(const struct pi_dsshard *sh, const struct pi_dsgroup *grp, uint64_t i, struct pi_dsfield *f,
                        size_t cap) {
    (void)sh;
    const struct lgroup *G = grp->impl;
    if (cap >= 1)
        f[0] = (struct pi_dsfield){.name = "text", .type = PI_DT_BINARY, .data = G->text + G->start[i],
                                   .nbytes = G->llen[i]};
    return 1;
}
static void lines_group_free(const struct pi_dsshard *sh, struct pi_dsgroup *grp) {
    (void)sh;
    lgroup_free(grp->impl);
}


static const char *const lines_aliases[] = {"jsonl", "text", "ndjson", "json-lines", NULL};

const struct pi_dsformat pi_dsformat_lines = {
    .name = "lines",
    .aliases = lines_aliases,
    .suffixes = lines_suffixes,
    .detect = lines_detect,
    .open = lines_open,
    .close = lines_close,
    .group = lines_group,
    .ranges = lines_ranges,
    .decode = lines_decode,
    .fields = lines_fields,
    .group_free = lines_group_free,
    .locate = lines_locate,
    .sample = lines_sample,
};
