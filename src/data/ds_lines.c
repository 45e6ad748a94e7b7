/* ds_lines.c - the JSONL / text row: one sample per non-empty line ('\n'
 * separated, the newline excluded; a '\r' before it is kept, as
 * pagein.data's line datasets always did), one field "text" (binary: the
 * line's bytes, not validated as UTF-8). Plain files are indexed at open
 * by one sequential pass (8 + 8 bytes a line) and read by samples; .gz
 * and .zst files are decompressed once at open to build the same index
 * and read as one group, decompressed whole again when it is read
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

/* Adds the lines of text[0, n) at base (offsets in the text). */
static int scan(struct pi_dsshard *sh, struct lines *L, const uint8_t *text, uint64_t n, uint64_t base,
                uint64_t *carry_start, int last) {
    uint64_t start = *carry_start; /* absolute offset where the current line began */
    const uint8_t *p = text, *e = text + n;
    while (p < e) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(e - p));
        if (!nl) break;
        uint64_t end = base + (uint64_t)(nl - text);
        if (end > start) {
            if (L->n == L->cap) {
                size_t c1 = (size_t)L->cap, c2 = (size_t)L->cap;
                FORWARD_IF(pi_grow((void **)&L->off, &c1, (size_t)L->n + 1, 8));
                FORWARD_IF(pi_grow((void **)&L->len, &c2, (size_t)L->n + 1, 8));
                L->cap = PI_MIN(c1, c2);
            }
            L->off[L->n] = start;
            L->len[L->n] = end - start;
            L->n++;
        }
        start = end + 1;
        p = nl + 1;
    }
    if (last && base + n > start) {
        if (L->n == L->cap) {
            size_t c1 = (size_t)L->cap, c2 = (size_t)L->cap;
            FORWARD_IF(pi_grow((void **)&L->off, &c1, (size_t)L->n + 1, 8));
            FORWARD_IF(pi_grow((void **)&L->len, &c2, (size_t)L->n + 1, 8));
            L->cap = PI_MIN(c1, c2);
        }
        L->off[L->n] = start;
        L->len[L->n] = base + n - start;
        L->n++;
    }
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

static int lines_open(struct pi_dsshard *sh, const struct pi_dsopen *a) {
    for (size_t i = 0; i < a->ncolumns; i++)
        if (strcmp(a->columns[i], "text") != 0)
            return pi_ds_err(sh, PAGEIN_E_NOT_FOUND, UINT64_MAX, UINT64_MAX, a->columns[i],
                             "no such column (lines have one: text)");
    struct lines *L = pi_calloc(1, sizeof *L);
    if (!L) return pi_err(-ENOMEM, "%s: out of memory", sh->name);
    uint64_t size = sh->src->size;
    uint8_t head[4] = {0};
    int rc = 0;
    uint8_t *buf = NULL;
    if (size >= 4 && (rc = pi_source_read(sh->src, head, 4, 0)) < 0) goto fail;
    L->z = lz_kind(head, size >= 4 ? 4 : 0);
    if (L->z == Z_NONE) {
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
        uint8_t *text = NULL;
        size_t tl = 0;
        if ((rc = inflate_all(sh, L->z, buf, (size_t)size, PI_DS_MAX_DECODE, &text, &tl)) < 0) goto fail;
        uint64_t carry = 0;
        rc = scan(sh, L, text, tl, 0, &carry, 1);
        pi_free(text);
        if (rc < 0) goto fail;
        L->text_bytes = tl;
        sh->ngroups = L->n ? 1 : 0;
    }
    pi_free(buf);
    L->col = (struct pi_dscol){.name = "text", .type = PI_DT_BINARY};
    sh->impl = L;
    sh->cols = &L->col;
    sh->ncols = 1;
    sh->nsamples = L->n;
    return 0;
fail:
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
