/* ds_mds.c - the MosaicML Streaming MDS row (format version 2, as its
 * MDSWriter writes it). A directory holds index.json ({"shards": [{
 * "format": "mds", "column_names", "column_encodings", "column_sizes",
 * "compression", "raw_data": {"basename", "bytes"}, "zip_data": {...} or
 * null, "samples"}], "version": 2}). A shard file is: u32 n, u32
 * offsets[n + 1] (absolute, little endian), the writer's config as JSON
 * (the same column lists), then the samples; sample i is [offsets[i],
 * offsets[i+1]): one u32 size per variable-size column (in column order),
 * then every column's bytes in column order. `.mds.zstd` shards (zip_data)
 * are one zstd frame of the raw shard: only the header is decompressed at
 * open; the samples are read in groups of at most the decode budget
 * (pi_ds_decode_budget) through the shard's cursor (dscodec.c), never past
 * the raw size index.json declares.
 *
 * Encodings read: bytes, str, str_int, str_float, str_decimal, json (utf8
 * text), int (int64), int8..int64, uint8..uint64, float16/32/64, ndarray
 * in its four layouts (dtype and shape fixed in the encoding or stored per
 * sample), jpeg/png/pil (their bytes). pkl is refused (PAGEIN_E_UNSAFE):
 * unpickling runs code. */
#include "dsformat.h"
#include "../core/endian.h"
#include "../format/format.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

enum { E_BYTES, E_STR, E_NUM, E_NDARRAY };

struct mcol {
    char *name;
    int enc;            /* E_* */
    uint8_t type, width; /* E_NUM; E_NDARRAY when the dtype is fixed (width 0: per sample) */
    int fixed_size;     /* column_sizes[i] is a number */
    uint64_t size;
    int nd_shape_fixed;
    uint8_t ndim;
    uint64_t shape[PI_DS_MAX_DIMS];
};

struct mds {
    struct mcol *c;
    size_t nc;
    int *sel;           /* selected column -> mds column */
    struct pi_dscol *cols;
    size_t ncols;
    size_t nvar;        /* variable-size columns */
    uint32_t *offsets;  /* n + 1 (plain shards) */
    uint64_t n;
    int zstd;
    uint64_t raw_bytes;
    uint64_t *gfirst;   /* .mds.zstd: ngroups + 1 first samples */
    uint64_t ng;
    struct pi_dszcur *cur;
};

struct mds_meta { /* from index.json, per shard */
    uint64_t raw_bytes, samples;
    int zstd;
};


/* ndarray value dtype codes (MDS NDArray encoding) */
static int nd_code(unsigned code, uint8_t *type, uint8_t *width) {
    switch (code) {
    case 8: *type = PI_DT_UINT, *width = 1; return 0;
    case 9: *type = PI_DT_INT, *width = 1; return 0;
    case 16: *type = PI_DT_UINT, *width = 2; return 0;
    case 17: *type = PI_DT_INT, *width = 2; return 0;
    case 18: *type = PI_DT_FLOAT, *width = 2; return 0;
    case 32: *type = PI_DT_UINT, *width = 4; return 0;
    case 33: *type = PI_DT_INT, *width = 4; return 0;
    case 34: *type = PI_DT_FLOAT, *width = 4; return 0;
    case 64: *type = PI_DT_UINT, *width = 8; return 0;
    case 65: *type = PI_DT_INT, *width = 8; return 0;
    case 66: *type = PI_DT_FLOAT, *width = 8; return 0;
    }
    return -1;
}

static int dtype_name(const char *s, size_t n, uint8_t *type, uint8_t *width) {
    static const struct { const char *n; uint8_t t, w; } T[] = {
        {"uint8", PI_DT_UINT, 1}, {"uint16", PI_DT_UINT, 2}, {"uint32", PI_DT_UINT, 4}, {"uint64", PI_DT_UINT, 8},
        {"int8", PI_DT_INT, 1},   {"int16", PI_DT_INT, 2},   {"int32", PI_DT_INT, 4},   {"int64", PI_DT_INT, 8},
        {"float16", PI_DT_FLOAT, 2}, {"float32", PI_DT_FLOAT, 4}, {"float64", PI_DT_FLOAT, 8}};
    for (size_t i = 0; i < PI_ARRAY_LEN(T); i++)
        if (strlen(T[i].n) == n && memcmp(T[i].n, s, n) == 0) {
            *type = T[i].t, *width = T[i].w;
            return 0;
        }
    return -1;
}

/* Parses one encoding name into c. */
static int parse_encoding(const struct pi_dsshard *sh, struct mcol *c, const char *e, size_t n) {
    const char *colon = memchr(e, ':', n);
    size_t base = colon ? (size_t)(colon - e) : n;
#define IS(s) (base == strlen(s) && memcmp(e, s, base) == 0)
    if (IS("pkl"))
        return pi_ds_err(sh, PAGEIN_E_UNSAFE, UINT64_MAX, UINT64_MAX, c->name,
                         "encoding 'pkl' refused: unpickling runs code (re-encode the column as bytes, str or ndarray)");
    if (IS("bytes") || IS("jpeg") || IS("png") || IS("pil")) { c->enc = E_BYTES; return 0; }
    if (IS("str") || IS("str_int") || IS("str_float") || IS("str_decimal") || IS("json")) { c->enc = E_STR; return 0; }
    if (IS("int")) { c->enc = E_NUM, c->type = PI_DT_INT, c->width = 8; return 0; }
    if (!colon && dtype_name(e, n, &c->type, &c->width) == 0) { c->enc = E_NUM; return 0; }
    if (IS("ndarray")) {
        c->enc = E_NDARRAY;
        if (!colon) return 0;
        const char *a = colon + 1, *end = e + n;
        const char *c2 = memchr(a, ':', (size_t)(end - a));
        size_t dl = c2 ? (size_t)(c2 - a) : (size_t)(end - a);
        if (dl && dtype_name(a, dl, &c->type, &c->width) < 0)
            return pi_ds_err(sh, PAGEIN_E_UNSUPPORTED, UINT64_MAX, UINT64_MAX, c->name, "ndarray dtype '%.*s'", (int)dl, a);
        if (!c2) return 0;
        const char *s = c2 + 1;
        c->nd_shape_fixed = 1;
        while (s < end) {
            if (c->ndim >= PI_DS_MAX_DIMS)
                return pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, UINT64_MAX, c->name, "more than %d dimensions", PI_DS_MAX_DIMS);
            uint64_t v = 0;
            const char *q = s;
            while (q < end && *q >= '0' && *q <= '9' && v < (1ull << 40)) v = v * 10 + (uint64_t)(*q++ - '0');
            if (q == s || v == 0 || (q < end && *q != ','))
                return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, c->name, "bad ndarray shape '%.*s'",
                                 (int)(end - c2 - 1), c2 + 1);
            c->shape[c->ndim++] = v;
            s = q < end ? q + 1 : q;
        }
        if (!c->width)
            return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, c->name, "ndarray shape without a dtype");
        return 0;
    }
#undef IS
    return pi_ds_err(sh, PAGEIN_E_UNSUPPORTED, UINT64_MAX, UINT64_MAX, c->name, "MDS encoding '%.*s'", (int)n, e);
}

static void mds_free(struct mds *M) {
    if (!M) return;
    for (size_t i = 0; i < M->nc; i++) pi_free(M->c[i].name);
    pi_free(M->c);
    pi_free(M->sel);
    pi_free(M->cols);
    pi_free(M->offsets);
    pi_free(M->gfirst);
    pi_ds_zcur_free(M->cur);
    pi_free(M);
}

/* .mds.zstd: groups of consecutive samples of at most the decode budget of raw bytes. */
static int zgroups(struct pi_dsshard *sh, struct mds *M) {
    uint64_t budget = pi_ds_decode_budget(), ng = 0;
    size_t cap = 0;
    FORWARD_IF(pi_ds_zcur_new(&M->cur, 2, sh->name));
    sh->in_order = 1;
    for (uint64_t i = 0; i < M->n;) {
        if ((uint64_t)M->offsets[i + 1] - M->offsets[i] > budget)
            return pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, i, NULL,
                             "%" PRIu64 " bytes, more than the decode budget of %" PRIu64 " (PAGEIN_DS_DECODE_BUDGET)",
                             (uint64_t)M->offsets[i + 1] - M->offsets[i], budget);
        FORWARD_IF(pi_grow((void **)&M->gfirst, &cap, (size_t)ng + 2, sizeof *M->gfirst));
        M->gfirst[ng++] = i;
        uint64_t j = i + 1;
        while (j < M->n && (uint64_t)M->offsets[j + 1] - M->offsets[i] <= budget) j++;
        i = j;
    }
    if (ng) M->gfirst[ng] = M->n;
    M->ng = ng;
    sh->ngroups = ng;
    return 0;
}

/* The shard's own config JSON: column_names, column_encodings, column_sizes. */
static int parse_config(const struct pi_dsshard *sh, struct mds *M, const uint8_t *buf, size_t len) {
    struct pi_json j;
    pi_json_init(&j, buf, len, 16);
    const char *k;
    size_t kl;
    int rc = pi_json_enter(&j, PI_JSON_OBJECT);
    size_t nn = 0, ne = 0, ns = 0;
    struct mcol *c = NULL;
    char **enc = NULL; /* encoding texts, parsed once the names are known (messages name the column) */
    size_t cap = 0, ecap = 0, maxi = 0; /* maxi: entries of c and enc ever filled */
    while (rc >= 0 && (rc = pi_json_next(&j, &k, &kl)) > 0) {
        int which = kl == 12 && !memcmp(k, "column_names", 12) ? 0 : kl == 16 && !memcmp(k, "column_encodings", 16) ? 1
                  : kl == 12 && !memcmp(k, "column_sizes", 12) ? 2 : -1;
        if (which < 0) {
            rc = pi_json_skip(&j);
            continue;
        }
        if ((rc = pi_json_enter(&j, PI_JSON_ARRAY)) < 0) break;
        size_t i = 0;
        while ((rc = pi_json_next(&j, NULL, NULL)) > 0) {
            if (i >= PI_DS_MAX_COLS) {
                rc = pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, UINT64_MAX, NULL, "more than %u columns", PI_DS_MAX_COLS);
                break;
            }
            size_t have = cap;
            if ((rc = pi_grow((void **)&c, &cap, i + 1, sizeof *c)) < 0) break;
            if (cap > have) memset(c + have, 0, (cap - have) * sizeof *c);
            if (i + 1 > maxi) maxi = i + 1;
            size_t ehave = ecap;
            if ((rc = pi_grow((void **)&enc, &ecap, i + 1, sizeof *enc)) < 0) break;
            if (ecap > ehave) memset(enc + ehave, 0, (ecap - ehave) * sizeof *enc);
            if (which == 0 || which == 1) {
                const char *s;
                size_t sl;
                if ((rc = pi_json_string(&j, &s, &sl)) < 0) break;
                if (which == 0) {
                    if (sl > PI_DS_MAX_NAME || memchr(s, 0, sl)) { rc = pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL, "bad column name"); break; }
                    pi_free(c[i].name);
                    if (!(c[i].name = pi_strndup(s, sl))) { rc = pi_err(-ENOMEM, "out of memory"); break; }
                } else {
                    if (sl >= 256 || memchr(s, 0, sl)) { rc = pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL, "encoding of %zu bytes", sl); break; }
                    pi_free(enc[i]);
                    if (!(enc[i] = pi_strndup(s, sl))) { rc = pi_err(-ENOMEM, "out of memory"); break; }
                }
            } else {
                if (pi_json_peek(&j) == PI_JSON_NULL) {
                    rc = pi_json_null(&j);
                    c[i].fixed_size = 0;
                } else {
                    rc = pi_json_u64(&j, &c[i].size);
                    c[i].fixed_size = 1;
                }
                if (rc < 0) break;
            }
            i++;
        }
        if (rc < 0) break;
        if (which == 0) nn = i; else if (which == 1) ne = i; else ns = i;
        rc = 0;
    }
    if (rc == 0) rc = pi_json_finish(&j);
    pi_json_free(&j);
    size_t n = PI_MAX(nn, PI_MAX(ne, ns));
    if (rc >= 0 && (nn != ne || nn != ns || nn == 0))
        rc = pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL,
                       "config lists %zu column names, %zu encodings, %zu sizes", nn, ne, ns);
    if (rc < 0) n = maxi; /* free what was filled, wherever the parse stopped */
    for (size_t i = 0; rc >= 0 && i < n; i++)
        if (!c[i].name) rc = pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL, "column %zu has no name", i);
    for (size_t i = 0; i < n; i++) {
        char *e = enc[i];
        if (rc >= 0 && e) {
            rc = parse_encoding(sh, &c[i], e, strlen(e));
            if (rc >= 0 && c[i].enc == E_NUM && (!c[i].fixed_size || c[i].size != c[i].width))
                rc = pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, c[i].name, "%s column of size %" PRIu64,
                               pi_dstype_name(c[i].type, c[i].width), c[i].size);
        }
        pi_free(e);
    }
    pi_free(enc);
    M->c = c;
    M->nc = n;
    if (rc < 0) return rc;
    for (size_t i = 0; i < n; i++) M->nvar += !c[i].fixed_size;
    return 0;
}

/* Header and config of a raw shard image's first len bytes (whole header
 * available). Fills M->n, offsets, columns. */
static int parse_head(const struct pi_dsshard *sh, struct mds *M, const uint8_t *b, uint64_t avail, uint64_t total) {
    if (avail < 4) return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL, "shorter than its 4-byte sample count");
    uint64_t n = pi_le32(b), hl = 4 + 4 * (n + 1);
    if (hl > total)
        return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL,
                         "%" PRIu64 " samples need %" PRIu64 " bytes of offsets, the shard has %" PRIu64, n, hl, total);
    if (hl > avail) return PAGEIN_E_TRUNCATED;
    M->offsets = pi_malloc((size_t)(n + 1) * 4);
    if (!M->offsets) return pi_err(-ENOMEM, "%s: out of memory", sh->name);
    for (uint64_t i = 0; i <= n; i++) {
        M->offsets[i] = pi_le32(b + 4 + 4 * i);
        if (M->offsets[i] > total || (i && M->offsets[i] < M->offsets[i - 1]))
            return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, i ? i - 1 : 0, NULL,
                             "offset %" PRIu32 " (previous %" PRIu32 ", shard %" PRIu64 " bytes)", M->offsets[i],
                             i ? M->offsets[i - 1] : 0, total);
    }
    if (M->offsets[0] < hl)
        return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, 0, NULL, "first sample at %" PRIu32 ", inside the header (%" PRIu64 ")",
                         M->offsets[0], hl);
    if (M->offsets[0] > avail) return PAGEIN_E_TRUNCATED;
    M->n = n;
    return parse_config(sh, M, b + hl, M->offsets[0] - hl);
}

static int select_cols(const struct pi_dsshard *sh, struct mds *M, const struct pi_dsopen *a) {
    M->sel = pi_malloc((M->nc ? M->nc : 1) * sizeof *M->sel);
    M->cols = pi_calloc(M->nc ? M->nc : 1, sizeof *M->cols);
    const char **names = pi_calloc(M->nc ? M->nc : 1, sizeof *names);
    if (!M->sel || !M->cols || !names) {
        pi_free(names);
        return pi_err(-ENOMEM, "%s: out of memory", sh->name);
    }
    /* the one columns= rule (dscolumns.c): M->sel[0..want) the columns selected, in the shard's order */
    for (size_t i = 0; i < M->nc; i++) names[i] = M->c[i].name;
    int rc = pi_ds_col_flat(sh, a, names, M->nc, M->sel);
    pi_free(names);
    FORWARD_IF(rc);
    size_t want = (size_t)rc;
    for (size_t k = 0; k < want; k++) {
        size_t i = (size_t)M->sel[k];
        const struct mcol *c = &M->c[i];
        struct pi_dscol *d = &M->cols[k];
        d->name = c->name;
        switch (c->enc) {
        case E_BYTES: d->type = PI_DT_BINARY; break;
        case E_STR: d->type = PI_DT_UTF8; break;
        case E_NUM: d->type = c->type, d->width = c->width; break;
        default:
            d->type = c->width ? c->type : PI_DT_UINT; /* dtype per sample: known at decode */
            d->width = c->width;
            d->ndim = c->nd_shape_fixed ? c->ndim : 1;
            for (unsigned j = 0; j < d->ndim; j++) d->shape[j] = c->nd_shape_fixed ? (int64_t)c->shape[j] : -1;
        }
        M->sel[k] = (int)i;
    }
    M->ncols = want;
    return 0;
}

/* The header of a compressed shard, gathered from the streamed pieces:
 * the count, then the offsets, then up to the first sample (the config). */
struct zhead {
    uint8_t *b;
    uint64_t len, cap, need, raw, most; /* most: samples the compressed bytes may claim */
};

static uint64_t zhead_need(const struct zhead *h) {
    if (h->len < 4) return 4;
    uint64_t hl = 4 + 4 * ((uint64_t)pi_le32(h->b) + 1);
    if (h->len < hl) return hl;
    return PI_MAX(hl, (uint64_t)pi_le32(h->b + 4)); /* through the config, to the first sample */
}

static int zhead_piece(void *ctx, const uint8_t *p, size_t len) {
    struct zhead *h = ctx;
    uint64_t take = PI_MIN((uint64_t)len, h->raw - h->len);
    if (h->len + take > h->cap) {
        size_t c = (size_t)h->cap;
        FORWARD_IF(pi_grow((void **)&h->b, &c, (size_t)(h->len + take), 1));
        h->cap = c;
    }
    memcpy(h->b + h->len, p, (size_t)take);
    h->len += take;
    h->need = zhead_need(h);
    if (h->len >= 4 && pi_le32(h->b) > h->most) return 1; /* refused by the caller before the offsets are kept */
    return h->len >= h->need || h->need > h->raw ? 1 : 0; /* enough, or parse_head names what is wrong */
}

static int mds_open(struct pi_dsshard *sh, const struct pi_dsopen *a) {
    const struct mds_meta *meta = a->meta;
    struct mds *M = pi_calloc(1, sizeof *M);
    if (!M) return pi_err(-ENOMEM, "%s: out of memory", sh->name);
    uint64_t size = sh->src->size;
    int rc = 0;
    uint8_t *buf = NULL;
    uint8_t magic[4] = {0};
    if (size >= 4 && (rc = pi_source_read(sh->src, magic, 4, 0)) < 0) goto fail;
    M->zstd = (meta && meta->zstd) || (size >= 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd);
    if (!M->zstd) {
        /* the header: grow the read until offsets and config fit */
        uint64_t want = PI_MIN(size, (uint64_t)64 << 10);
        for (;;) {
            pi_free(buf);
            buf = pi_malloc(want ? want : 1);
            if (!buf) { rc = pi_err(-ENOMEM, "%s: out of memory", sh->name); goto fail; }
            if ((rc = pi_source_read(sh->src, buf, want, 0)) < 0) goto fail;
            pi_free(M->offsets);
            M->offsets = NULL;
            for (size_t i = 0; i < M->nc; i++) pi_free(M->c[i].name);
            pi_free(M->c);
            M->c = NULL, M->nc = 0, M->nvar = 0;
            rc = parse_head(sh, M, buf, want, size);
            if (rc != PAGEIN_E_TRUNCATED) break;
            if (want == size) { rc = pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL, "truncated header"); break; }
            uint64_t need = 4 + 4 * ((uint64_t)pi_le32(buf) + 1);
            if (M->offsets) need = M->offsets[0];
            want = PI_MIN(size, PI_MAX(want * 2, need));
        }
        if (rc < 0) goto fail;
        if (M->offsets[M->n] != size && M->offsets[M->n] > size) {
            rc = pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL, "samples end past the shard");
            goto fail;
        }
    } else {
        uint64_t raw = meta ? meta->raw_bytes : 0;
        if (size > PI_DS_MAX_DECODE) { rc = pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, UINT64_MAX, NULL, "compressed shard too large"); goto fail; }
        buf = pi_malloc(size ? size : 1);
        if (!buf) { rc = pi_err(-ENOMEM, "%s: out of memory", sh->name); goto fail; }
        if ((rc = pi_source_read(sh->src, buf, size, 0)) < 0) goto fail;
        if (!raw) {
            int64_t d = pi_ds_zstd_size(buf, (size_t)size);
            if (d < 0) { rc = pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL, "zstd frame without a content size, and no index.json raw_data.bytes"); goto fail; }
            raw = (uint64_t)d;
        }
        if (raw > PI_DS_MAX_DECODE) { rc = pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, UINT64_MAX, NULL, "raw shard of %" PRIu64 " bytes", raw); goto fail; }
        /* zstd expands at most 32768-fold (an RLE block: 4 bytes for 128 KiB):
         * a larger declared size is a lie, refused before it is allocated
         * (a 16-byte frame declaring 160 MB cost 0.5 s and 170 MB) */
        if (raw > (uint64_t)size * 32768) {
            rc = pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL,
                           "declares %" PRIu64 " raw bytes, more than %" PRIu64 " zstd bytes can hold", raw, size);
            goto fail;
        }
        /* only the header is decompressed at open (streamed: the raw shard
         * is allocated by decode, one group at a time), and its sample
         * count is held to the compressed bytes (dscount.c) */
        struct zhead h = {.raw = raw, .most = pi_ds_zcount_most(size)};
        uint64_t got = 0;
        rc = pi_ds_unzstd_each(buf, (size_t)size, raw, zhead_piece, &h, &got, sh->name);
        if (rc == 0 && h.len >= 4) rc = pi_ds_zcount_check(sh, pi_le32(h.b), size, "zstd-compressed shard");
        if (rc == 0 && h.len < h.need && h.need <= raw) rc = PAGEIN_E_TRUNCATED;
        if (rc == 0) rc = parse_head(sh, M, h.b, h.len, raw);
        pi_free(h.b);
        if (rc == PAGEIN_E_TRUNCATED) rc = pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL, "truncated header");
        if (rc < 0) goto fail;
        M->raw_bytes = raw;
        if (M->offsets[M->n] > raw) {
            rc = pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL, "samples end past the raw shard");
            goto fail;
        }
        if ((rc = zgroups(sh, M)) < 0) goto fail;
    }
    if (meta && meta->samples != M->n) {
        rc = pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL, "holds %" PRIu64 " samples, index.json says %" PRIu64,
                       M->n, meta->samples);
        goto fail;
    }
    if ((rc = select_cols(sh, M, a)) < 0) goto fail;
    pi_free(buf);
    pi_ds_shard_set(sh, M, M->cols, M->ncols, M->n);
    return 0;
fail:
    pi_free(buf);
    mds_free(M);
    return rc;
}

static void mds_close(struct pi_dsshard *sh) { mds_free(sh->impl); }

static int mds_locate(const struct pi_dsshard *sh, uint64_t i, uint64_t *off, uint64_t *len) {
    const struct mds *M = sh->impl;
    *off = M->offsets[i];
    *len = (uint64_t)M->offsets[i + 1] - M->offsets[i];
    return 0;
}

static int mds_sample(const struct pi_dsshard *sh, uint64_t id, const uint8_t *p, uint64_t len, struct pi_dsfield *f,
                      size_t cap) {
    const struct mds *M = sh->impl;
    uint64_t at = 4 * M->nvar, vi = 0;
    if (at > len) return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, id, NULL, "%" PRIu64 " bytes, shorter than its %zu sizes", len, M->nvar);
    /* the columns in order; k walks the selection (a subset, in the same order) */
    for (size_t i = 0; i < M->nc; i++) {
        const struct mcol *c = &M->c[i];
        uint64_t sz = c->fixed_size ? c->size : pi_le32(p + 4 * vi++);
        if (sz > len - at)
            return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, id, c->name, "%" PRIu64 " bytes at %" PRIu64 ", sample has %" PRIu64, sz, at, len);
        const uint8_t *v = p + at;
        at += sz;
        for (size_t k = 0; k < M->ncols; k++) {
            if (M->sel[k] != (int)i || k >= cap) continue;
            struct pi_dsfield *o = &f[k];
            *o = (struct pi_dsfield){.name = c->name, .col = (uint32_t)k, .data = v, .nbytes = sz};
            if (c->enc == E_BYTES) o->type = PI_DT_BINARY;
            else if (c->enc == E_STR) o->type = PI_DT_UTF8;
            else if (c->enc == E_NUM) o->type = c->type, o->width = c->width;
            else {
                uint64_t q = 0;
                uint8_t t = c->type, w = c->width;
                if (!w) {
                    if (q >= sz || nd_code(v[q], &t, &w) < 0)
                        return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, id, c->name, "bad ndarray dtype code %u", q < sz ? v[q] : 0);
                    q++;
                }
                uint64_t elems = 1;
                if (c->nd_shape_fixed) {
                    o->ndim = c->ndim;
                    for (unsigned d = 0; d < c->ndim; d++) o->shape[d] = c->shape[d], elems *= c->shape[d];
                } else {
                    if (q >= sz) return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, id, c->name, "ndarray without its shape byte");
                    unsigned nd = v[q] >> 2, sw = 1u << (v[q] & 3);
                    q++;
                    if (nd == 0 || nd > PI_DS_MAX_DIMS)
                        return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, id, c->name, "ndarray of %u dimensions", nd);
                    if ((uint64_t)nd * sw > sz - q)
                        return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, id, c->name, "ndarray shape past the value");
                    o->ndim = (uint8_t)nd;
                    for (unsigned d = 0; d < nd; d++) {
                        uint64_t x = 0;
                        for (unsigned b = 0; b < sw; b++) x |= (uint64_t)v[q + (uint64_t)d * sw + b] << (8 * b);
                        o->shape[d] = x;
                        if (pi_mul_overflow(elems, x, &elems))
                            return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, id, c->name, "ndarray shape overflows");
                    }
                    q += (uint64_t)nd * sw;
                }
                uint64_t nb;
                if (pi_mul_overflow(elems, w, &nb) || nb != sz - q)
                    return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, id, c->name,
                                     "ndarray of %" PRIu64 " %s elements in %" PRIu64 " bytes", elems,
                                     pi_dstype_name((enum pi_dstype)t, w), sz - q);
                o->type = t, o->width = w, o->data = v + q, o->nbytes = nb;
            }
        }
    }
    return (int)M->ncols;
}

/* .mds.zstd: groups read through the cursor (struct pi_dsraw,
 * dsformat.h: the group's samples, raw bytes [offsets[first], offsets[end])) */
static int mds_group(const struct pi_dsshard *sh, uint64_t g, struct pi_dsgroupinfo *gi) {
    const struct mds *M = sh->impl;
    return pi_ds_raw_group(sh, M->gfirst, M->ng, g, gi);
}
static int mds_decode(const struct pi_dsshard *sh, struct pi_dsgroup *grp) {
    const struct mds *M = sh->impl;
    if (grp->nbufs != 1 || grp->g >= M->ng)
        return pi_ds_err(sh, PAGEIN_E_INVALID, grp->g, UINT64_MAX, NULL, "decode given %zu buffers", grp->nbufs);
    uint64_t a = M->gfirst[grp->g], e = M->gfirst[grp->g + 1];
    uint64_t lo = M->offsets[a], len = (uint64_t)M->offsets[e] - lo;
    const uint8_t *in = grp->bufs[0].p;
    size_t n = (size_t)grp->bufs[0].len;
    int rc = 0;
    struct pi_dszin zin = {in, 0, n, n, NULL}; /* the whole compressed shard (pi_ds_whole_ranges) */
    /* a read from the start passes the header: the group's offsets must
     * still be those read at open (a read continuing in order is past it
     * and does not go back) */
    uint64_t ho = 4 + 4 * a, hl = 4 * (e - a + 1), pos = pi_ds_zcur_pos(M->cur);
    if (pos <= ho || pos > lo) {
        uint8_t *h = pi_malloc(hl);
        if (!h) rc = pi_err(-ENOMEM, "%s: out of memory", sh->name);
        else rc = pi_ds_zcur_read(M->cur, &zin, ho, h, hl, sh->name);
        for (uint64_t i = a; rc == 0 && i <= e; i++)
            if (pi_le32(h + 4 * (i - a)) != M->offsets[i])
                rc = pi_ds_err(sh, PAGEIN_E_CHANGED, grp->g, i, NULL, "offsets differ from those read at open");
        pi_free(h);
    }
    if (rc < 0) return rc;
    return pi_ds_raw_read(sh, M->cur, &zin, lo, len, grp);
}
static int mds_fields(const struct pi_dsshard *sh, const struct pi_dsgroup *grp, uint64_t i, struct pi_dsfield *f,
                      size_t cap) {
    const struct mds *M = sh->impl;
    const struct pi_dsraw *G = grp->impl;
    uint64_t id = grp->info.first + i;
    return mds_sample(sh, id, G->raw + (M->offsets[id] - G->base), (uint64_t)M->offsets[id + 1] - M->offsets[id], f,
                      cap);
}

/* ---- index.json ------------------------------------------------------------ */

struct mds_index {
    struct mds_meta *m;
    size_t n, cap;
};

static int mds_index(const char *dir, const uint8_t *buf, size_t len, struct pi_dsindex *ix) {
    struct mds_index *I = pi_calloc(1, sizeof *I);
    if (!I) return pi_err(-ENOMEM, "out of memory");
    ix->impl = I;
    struct pi_json j;
    pi_json_init(&j, buf, len, 16);
    const char *k;
    size_t kl;
    int rc = pi_json_enter(&j, PI_JSON_OBJECT);
    uint64_t version = 0;
    int have_shards = 0;
    /* names are added after the whole parse: meta pointers must not move */
    char **names = NULL;
    size_t nnames = 0, ncap = 0;
    while (rc >= 0 && (rc = pi_json_next(&j, &k, &kl)) > 0) {
        if (kl == 7 && !memcmp(k, "version", 7)) {
            rc = pi_json_u64(&j, &version);
            continue;
        }
        if (!(kl == 6 && !memcmp(k, "shards", 6))) {
            rc = pi_json_skip(&j);
            continue;
        }
        have_shards = 1;
        if ((rc = pi_json_enter(&j, PI_JSON_ARRAY)) < 0) break;
        while ((rc = pi_json_next(&j, NULL, NULL)) > 0) {
            if ((rc = pi_grow((void **)&I->m, &I->cap, I->n + 1, sizeof *I->m)) < 0) break;
            if ((rc = pi_grow((void **)&names, &ncap, nnames + 1, sizeof *names)) < 0) break;
            struct mds_meta *m = &I->m[I->n++];
            memset(m, 0, sizeof *m);
            names[nnames++] = NULL;
            char *raw_name = NULL, *zip_name = NULL;
            int fmt_ok = 0;
            if ((rc = pi_json_enter(&j, PI_JSON_OBJECT)) < 0) break;
            while ((rc = pi_json_next(&j, &k, &kl)) > 0) {
                if (kl == 6 && !memcmp(k, "format", 6)) {
                    const char *s; size_t sl;
                    if ((rc = pi_json_string(&j, &s, &sl)) < 0) break;
                    fmt_ok = sl == 3 && !memcmp(s, "mds", 3);
                } else if (kl == 7 && !memcmp(k, "samples", 7)) {
                    rc = pi_json_u64(&j, &m->samples);
                } else if (kl == 11 && !memcmp(k, "compression", 11)) {
                    if (pi_json_peek(&j) == PI_JSON_NULL) rc = pi_json_null(&j);
                    else {
                        const char *s; size_t sl;
                        if ((rc = pi_json_string(&j, &s, &sl)) < 0) break;
                        if (!(sl >= 4 && !memcmp(s, "zstd", 4) && (sl == 4 || s[4] == ':'))) {
                            rc = pi_err(PAGEIN_E_UNSUPPORTED, "%s/index.json: shard %zu: compression '%.*s' (pagein reads zstd)",
                                        dir, I->n - 1, (int)PI_MIN(sl, (size_t)40), s);
                            break;
                        }
                        m->zstd = 1;
                    }
                } else if ((kl == 8 && !memcmp(k, "raw_data", 8)) || (kl == 8 && !memcmp(k, "zip_data", 8))) {
                    int zip = k[0] == 'z';
                    if (pi_json_peek(&j) == PI_JSON_NULL) { rc = pi_json_null(&j); continue; }
                    if ((rc = pi_json_enter(&j, PI_JSON_OBJECT)) < 0) break;
                    const char *k2; size_t kl2;
                    while ((rc = pi_json_next(&j, &k2, &kl2)) > 0) {
                        if (kl2 == 8 && !memcmp(k2, "basename", 8)) {
                            const char *s; size_t sl;
                            if ((rc = pi_json_string(&j, &s, &sl)) < 0) break;
                            if (sl == 0 || sl > 1024 || memchr(s, 0, sl) || memchr(s, '/', sl) || (sl <= 2 && s[0] == '.')) {
                                rc = pi_err(PAGEIN_E_BAD_DATASET, "%s/index.json: shard %zu: bad basename", dir, I->n - 1);
                                break;
                            }
                            char *c = pi_strndup(s, sl);
                            if (!c) { rc = pi_err(-ENOMEM, "out of memory"); break; }
                            if (zip) { pi_free(zip_name); zip_name = c; } else { pi_free(raw_name); raw_name = c; }
                        } else if (kl2 == 5 && !memcmp(k2, "bytes", 5) && !zip) {
                            rc = pi_json_u64(&j, &m->raw_bytes);
                        } else {
                            rc = pi_json_skip(&j);
                        }
                        if (rc < 0) break;
                    }
                } else {
                    rc = pi_json_skip(&j);
                }
                if (rc < 0) break;
            }
            if (rc >= 0 && !fmt_ok)
                rc = pi_err(PAGEIN_E_UNSUPPORTED, "%s/index.json: shard %zu is not format 'mds'", dir, I->n - 1);
            if (rc >= 0 && m->zstd && !zip_name)
                rc = pi_err(PAGEIN_E_BAD_DATASET, "%s/index.json: shard %zu: compressed without zip_data", dir, I->n - 1);
            if (rc >= 0 && !m->zstd && !raw_name)
                rc = pi_err(PAGEIN_E_BAD_DATASET, "%s/index.json: shard %zu: no raw_data basename", dir, I->n - 1);
            names[nnames - 1] = m->zstd ? zip_name : raw_name;
            pi_free(m->zstd ? raw_name : zip_name);
            if (rc < 0) break;
        }
        if (rc < 0) break;
        rc = 0;
    }
    if (rc >= 0) rc = pi_json_finish(&j);
    pi_json_free(&j);
    if (rc >= 0 && version != 2) rc = pi_err(PAGEIN_E_BAD_VERSION, "%s/index.json: version %" PRIu64 ", expected 2", dir, version);
    if (rc >= 0 && !have_shards) rc = pi_err(PAGEIN_E_BAD_DATASET, "%s/index.json: no \"shards\"", dir);
    if (rc < 0 && rc > -4096) { /* keep */ }
    for (size_t i = 0; i < nnames; i++) {
        if (rc >= 0) rc = pi_dsindex_add(ix, names[i], strlen(names[i]), &I->m[i]);
        pi_free(names[i]);
    }
    pi_free(names);
    if (rc < 0 && (rc == PAGEIN_E_BAD_JSON || rc == PAGEIN_E_BAD_TYPE || rc == PAGEIN_E_BAD_UTF8 || rc == PAGEIN_E_OVERFLOW))
        pi_err_prefix("index.json");
    return rc < 0 ? rc : 0;
}

static void mds_index_free(struct pi_dsindex *ix) {
    struct mds_index *I = ix->impl;
    if (I) pi_free(I->m);
    pi_free(I);
    ix->impl = NULL;
}

static int mds_detect(const char *name, const uint8_t *h, size_t nh, const uint8_t *t, size_t nt, uint64_t size) {
    (void)t, (void)nt, (void)h, (void)nh, (void)size;
    size_t n = name ? strlen(name) : 0;
    if ((n >= 4 && strcmp(name + n - 4, ".mds") == 0) || (n >= 9 && strcmp(name + n - 9, ".mds.zstd") == 0)) return 2;
    return 0;
}

static const char *const mds_suffixes[] = {".mds", ".mds.zstd", NULL};
static const char *const mds_index_names[] = {"index.json", NULL};

const struct pi_dsformat pi_dsformat_mds = {
    .name = "mds",
    .suffixes = mds_suffixes,
    .detect = mds_detect,
    .index_names = mds_index_names,
    .index = mds_index,
    .index_free = mds_index_free,
    .open = mds_open,
    .close = mds_close,
    .group = mds_group,
    .ranges = pi_ds_whole_ranges,
    .decode = mds_decode,
    .fields = mds_fields,
    .group_free = pi_ds_raw_free,
    .locate = mds_locate,
    .sample = mds_sample,
};
