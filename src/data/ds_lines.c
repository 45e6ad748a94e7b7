/* ds_lines.c - the JSONL / text row: one sample per non-empty line ('\n'
 * separated, the newline excluded; a '\r' before it is kept, as
 * pagein.data's line datasets always did), one field "text" (binary: the
 * line's bytes, not validated as UTF-8). Plain files are indexed at open
 * by one sequential pass (8 + 8 bytes a line) and read by samples; .gz
 * and .zst files are streamed through the codec once at open to build
 * the same index (at most PI_DS_ROWS_PER_BYTE lines a compressed byte:
 * dscount.c) and read as one group, decompressed whole when it is read
 * (sequential only: memory is the decompressed file). */
#include "dsformat.h"

#include <inttypes.h>

enum { Z_NONE, Z_GZIP, Z_ZSTD };

struct lines {
    uint64_t *off, *len; /* per line; offsets in the (decompressed) text */
    uint64_t n, cap;
    int z;
    uint64_t text_bytes; /* decompressed size (compressed shards) */
    struct pi_dscol col;
};

struct lgroup {
    uint8_t *text;
    size_t len;
};

static int lz_kind(const uint8_t *h, size_t nh) {
    if (nh >= 2 && h[0] == 0x1f && h[1] == 0x8b) return Z_GZIP;
    if (nh >= 4 && h[0] == 0x28 && h[1] == 0xb5 && h[2] == 0x2f && h[3] == 0xfd) return Z_ZSTD;
    return Z_NONE;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = s ? strlen(s) : 0, b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int lines_detect(const char *name, const uint8_t *h, size_t nh, const uint8_t *t, size_t nt, uint64_t size) {
    (void)t, (void)nt, (void)size, (void)h, (void)nh;
    static const char *const sfx[] = {".jsonl", ".txt", ".json", ".jsonl.gz", ".jsonl.zst", ".txt.gz", ".txt.zst",
                                      ".json.gz", ".json.zst", ".ndjson", ".ndjson.gz", ".ndjson.zst"};
    for (size_t i = 0; i < PI_ARRAY_LEN(sfx); i++)
        if (ends_with(name, sfx[i])) return 1;
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
    pi_free(L);
}

static int inflate_all(const struct pi_dsshard *sh, int z, const uint8_t *in, size_t n, uint64_t max, uint8_t **out,
                       size_t *olen) {
    return z == Z_GZIP ? pi_ds_gunzip_all(in, n, max, out, olen, sh->name)
                       : pi_ds_unzstd_all(in, n, max, out, olen, sh->name);
}

/* The index pass of a compressed file: the text streamed through the
 * codec's buffer (never held whole at open), and the lines counted against
 * the compressed bytes as they come: at most PI_DS_ROWS_PER_BYTE lines a
 * compressed byte (dscount.c), so the index (16 bytes a line) stays within
 * 128 bytes per input byte, however far the text expands. */
struct zscan {
    struct pi_dsshard *sh;
    struct lines *L;
    uint64_t base, carry, most, size;
};

static int zscan_piece(void *ctx, const uint8_t *p, size_t len) {
    struct zscan *z = ctx;
    FORWARD_IF(scan(z->sh, z->L, p, len, z->base, &z->carry, 0));
    z->base += len;
    if (z->L->n > z->most) return pi_ds_count_check(z->sh, 0, z->L->n, z->size, "compressed lines");
    return 0;
}

static int index_compressed(struct pi_dsshard *sh, struct lines *L, const uint8_t *in, uint64_t size) {
    struct zscan z = {sh, L, 0, 0, size * PI_DS_ROWS_PER_BYTE, size};
    uint64_t total = 0;
    int rc = L->z == Z_GZIP ? pi_ds_gunzip_each(in, (size_t)size, PI_DS_MAX_DECODE, zscan_piece, &z, &total, sh->name)
                            : pi_ds_unzstd_each(in, (size_t)size, PI_DS_MAX_DECODE, zscan_piece, &z, &total, sh->name);
    FORWARD_IF(rc);
    static const uint8_t none[1];
    FORWARD_IF(scan(sh, L, none, 0, total, &z.carry, 1)); /* the last line, without a newline */
    FORWARD_IF(pi_ds_count_check(sh, 0, L->n, size, "compressed lines"));
    L->text_bytes = total;
    return 0;
}

/* The cached line index: u32 z, u64 text bytes, u64 lines, then per line
 * u64 offset and u64 length. Checked like any input: ascending, inside the
 * text. 1 loaded, 0 not usable. */
#define LIX_MAGIC "PGLNIX01"

static uint64_t ld64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static int cache_load(const struct pi_dsshard *sh, struct lines *L, const char *path) {
    uint8_t *b;
    size_t n;
    if (pi_ds_cache_read(sh, path, LIX_MAGIC, &b, &n) <= 0) return 0;
    int ok = 0;
    if (n >= 20) {
        uint32_t z = b[0];
        uint64_t tb = ld64(b + 4), cnt = ld64(b + 12), span = z ? tb : sh->src->size, prev = 0;
        if (z <= Z_ZSTD && cnt <= (n - 20) / 16 && cnt * 16 == n - 20 && (L->off = pi_malloc((size_t)(cnt ? cnt : 1) * 8)) &&
            (L->len = pi_malloc((size_t)(cnt ? cnt : 1) * 8))) {
            ok = 1;
            for (uint64_t i = 0; i < cnt && ok; i++) {
                uint64_t o = ld64(b + 20 + 16 * i), l = ld64(b + 28 + 16 * i);
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
    for (int i = 0; i < 8; i++) b[4 + i] = (uint8_t)(L->text_bytes >> (8 * i)), b[12 + i] = (uint8_t)(L->n >> (8 * i));
    for (uint64_t k = 0; k < L->n; k++)
        for (int i = 0; i < 8; i++) {
            b[20 + 16 * k + (uint64_t)i] = (uint8_t)(L->off[k] >> (8 * i));
            b[28 + 16 * k + (uint64_t)i] = (uint8_t)(L->len[k] >> (8 * i));
        }
    pi_ds_cache_write(sh, path, LIX_MAGIC, b, n);
    pi_free(b);
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
    /* small files are indexed faster than a cache is checked */
    cpath = size >= (1u << 20) ? pi_ds_cache_path(sh, a, "lines") : NULL;
    int cached = cpath && cache_load(sh, L, cpath) && L->z == lz_kind(head, size >= 4 ? 4 : 0);
    if (cached) {
        if (L->z != Z_NONE) sh->ngroups = L->n ? 1 : 0;
    } else if (L->z == Z_NONE) {
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
    } else {
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
        sh->ngroups = L->n ? 1 : 0;
    }
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

/* compressed shards: one group, the whole file */
static int lines_group(const struct pi_dsshard *sh, uint64_t g, struct pi_dsgroupinfo *gi) {
    (void)g;
    *gi = (struct pi_dsgroupinfo){0, sh->nsamples, sh->src->size};
    return 0;
}
static int lines_ranges(const struct pi_dsshard *sh, uint64_t g, struct pi_dsrange *r, size_t cap) {
    (void)g;
    if (cap >= 1) r[0] = (struct pi_dsrange){0, sh->src->size};
    return 1;
}
static int lines_decode(const struct pi_dsshard *sh, struct pi_dsgroup *grp) {
    const struct lines *L = sh->impl;
    if (grp->nbufs != 1) return pi_ds_err(sh, PAGEIN_E_INVALID, grp->g, UINT64_MAX, NULL, "decode given %zu buffers", grp->nbufs);
    struct lgroup *G = pi_calloc(1, sizeof *G);
    if (!G) return pi_err(-ENOMEM, "%s: out of memory", sh->name);
    int rc = inflate_all(sh, L->z, grp->bufs[0].p, (size_t)grp->bufs[0].len, L->text_bytes, &G->text, &G->len);
    if (rc == 0 && G->len != L->text_bytes)
        rc = pi_ds_err(sh, PAGEIN_E_CHANGED, grp->g, UINT64_MAX, NULL,
                       "decompresses to %zu bytes, %" PRIu64 " at open", G->len, L->text_bytes);
    if (rc < 0) {
        pi_free(G->text);
        pi_free(G);
        return rc;
    }
    grp->impl = G;
    return 0;
}
static int lines_fields(const struct pi_dsshard *sh, const struct pi_dsgroup *grp, uint64_t i, struct pi_dsfield *f,
                        size_t cap) {
    const struct lines *L = sh->impl;
    const struct lgroup *G = grp->impl;
    uint64_t id = grp->info.first + i;
    if (cap >= 1)
        f[0] = (struct pi_dsfield){.name = "text", .type = PI_DT_BINARY, .data = G->text + L->off[id],
                                   .nbytes = L->len[id]};
    return 1;
}
static void lines_group_free(const struct pi_dsshard *sh, struct pi_dsgroup *grp) {
    (void)sh;
    struct lgroup *G = grp->impl;
    pi_free(G->text);
    pi_free(G);
}

static const char *const lines_suffixes[] = {".jsonl", ".txt", ".ndjson", ".jsonl.gz", ".jsonl.zst", ".txt.gz",
                                             ".txt.zst", ".ndjson.gz", ".ndjson.zst", NULL};

const struct pi_dsformat pi_dsformat_lines = {
    .name = "lines",
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
