/* parquet_page.c - a column chunk's pages into a column: page headers,
 * dictionary pages, data pages v1 and v2, repetition/definition levels and
 * the value encodings (Encodings.md), assembled into rows (scalars with
 * nulls, one level of lists). docs/FORMAT-PARQUET.md. */
#include "parquet.h"
#include "../core/endian.h"
#include "../core/mem.h"

#include <stdio.h>
#include <string.h>

#include "thrift.h"

#define FERR(...) pi_err(PI_PQ_EFORMAT, __VA_ARGS__)

struct page_hdr {
    int type;
    int32_t usize, csize;
    int32_t nvalues, nnulls, nrows;
    int32_t enc, def_enc, rep_enc;
    int32_t def_len, rep_len;
    int is_compressed;
    int have_sub;
};

static int rd_int(struct pi_thrift *t, int ft, int32_t *v) {
    if (ft != PI_TT_I32 && ft != PI_TT_I16 && ft != PI_TT_BYTE && ft != PI_TT_I64)
        return FERR("page header: integer expected, found thrift type %d", ft);
    int64_t x;
    FORWARD_IF(pi_thrift_int(t, ft, &x));
    if (x < INT32_MIN || x > INT32_MAX) return FERR("page header: value out of the i32 range");
    *v = (int32_t)x;
    return 0;
}

/* DataPageHeader (1 v1), DictionaryPageHeader (2), DataPageHeaderV2 (3) */
static int rd_sub(struct pi_thrift *t, struct page_hdr *h, int kind) {
    FORWARD_IF(pi_thrift_struct_begin(t));
    int16_t id = 0;
    int ft, b;
    for (;;) {
        FORWARD_IF(pi_thrift_field(t, &id, &ft));
        if (ft == PI_TT_STOP) break;
        int32_t *dst = NULL;
        if (kind == 1) {
            int32_t *m[] = {NULL, &h->nvalues, &h->enc, &h->def_enc, &h->rep_enc};
            if (id >= 1 && id <= 4) dst = m[id];
        } else if (kind == 2) {
            if (id == 1) dst = &h->nvalues;
            if (id == 2) dst = &h->enc;
        } else {
            int32_t *m[] = {NULL, &h->nvalues, &h->nnulls, &h->nrows, &h->enc, &h->def_len, &h->rep_len};
            if (id >= 1 && id <= 6) dst = m[id];
            if (id == 7) {
                FORWARD_IF(pi_thrift_bool(t, ft, 0, &b));
                h->is_compressed = b;
                continue;
            }
        }
        if (dst)
            FORWARD_IF(rd_int(t, ft, dst));
        else
            FORWARD_IF(pi_thrift_skip(t, ft));
    }
    pi_thrift_struct_end(t);
    return 0;
}

static int rd_page_header(const uint8_t *p, size_t len, struct page_hdr *h, size_t *used) {
    struct pi_thrift t;
    pi_thrift_init(&t, p, len);
    memset(h, 0, sizeof *h);
    h->type = -1;
    h->usize = h->csize = -1;
    h->nvalues = -1;
    h->is_compressed = 1;
    FORWARD_IF(pi_thrift_struct_begin(&t));
    int16_t id = 0;
    int ft;
    for (;;) {
        FORWARD_IF(pi_thrift_field(&t, &id, &ft));
        if (ft == PI_TT_STOP) break;
        switch (id) {
        case 1: FORWARD_IF(rd_int(&t, ft, &h->type)); break;
        case 2: FORWARD_IF(rd_int(&t, ft, &h->usize)); break;
        case 3: FORWARD_IF(rd_int(&t, ft, &h->csize)); break;
        case 5:
        case 7:
        case 8:
            if (ft != PI_TT_STRUCT) return FERR("page header: field %d is not a struct", id);
            if ((id == 5 && h->type == PI_PQ_DATA_PAGE) || (id == 7 && h->type == PI_PQ_DICTIONARY_PAGE) ||
                (id == 8 && h->type == PI_PQ_DATA_PAGE_V2)) {
                FORWARD_IF(rd_sub(&t, h, id == 5 ? 1 : id == 7 ? 2 : 3));
                h->have_sub = 1;
            } else {
                FORWARD_IF(pi_thrift_skip(&t, ft));
            }
            break;
        default: FORWARD_IF(pi_thrift_skip(&t, ft));
        }
    }
    pi_thrift_struct_end(&t);
    if (h->type < 0 || h->usize < 0 || h->csize < 0)
        return FERR("page header lacks its type or sizes (or they are negative)");
    *used = pi_thrift_pos(&t);
    return 0;
}

int pi_pq_page_info(const uint8_t *p, size_t len, struct pi_pq_page_info *pi) {
    struct page_hdr h;
    size_t hl = 0;
    FORWARD_IF(rd_page_header(p, len, &h, &hl));
    pi->type = h.type;
    pi->usize = h.usize;
    pi->csize = h.csize;
    pi->nvalues = h.nvalues;
    pi->header_len = hl;
    pi->lvl_len = h.type == PI_PQ_DATA_PAGE_V2 && h.def_len >= 0 && h.rep_len >= 0 ? (size_t)h.def_len + (size_t)h.rep_len : 0;
    return 0;
}

/* ---- the decoder state of one chunk ---------------------------------------- */

struct dec {
    const struct pi_pq_leaf *L;
    struct pi_pq_column *c;
    int codec;
    uint32_t width;
    /* dictionary (in the scratch's buffers) */
    int have_dict;
    uint32_t dict_n;
    uint8_t *dvals;  /* fixed width */
    uint64_t *doff;  /* BYTE_ARRAY: dict_n + 1 */
    uint8_t *dbytes;
    uint32_t dpad;   /* dvals is readable (zeros past dict_n) up to this many entries */
    struct pi_pq_scratch *s; /* buffers reused across pages (and chunks) */
    struct pi_mem_fill *fill; /* populating a fresh values array ahead (NULL: none) */
};

static uint32_t fixed_width(int type, int32_t type_length) {
    switch (type) {
    case PI_PQ_BOOLEAN: return 1;
    case PI_PQ_INT32:
    case PI_PQ_FLOAT: return 4;
    case PI_PQ_INT64:
    case PI_PQ_DOUBLE: return 8;
    case PI_PQ_INT96: return 12;
    case PI_PQ_FIXED: return (uint32_t)type_length;
    default: return 0;
    }
}

/* pi_mem_grow, and a block it newly mapped (256 KiB or more: the memory
 * policy's) asked for huge pages (PAGEIN_READ_HUGEPAGE=0: 4 KiB) over the
 * 2 MiB pieces that what was asked for reaches: a decoded column's first
 * touches then cost a fault a 2 MiB instead of one a 4 KiB, which on a VM
 * is most of a first decode's time (docs/BENCHMARKS.md, "Fresh memory";
 * a 400 KB text array in a huge page: 60% fewer faults in a block epoch,
 * for 70 MB more resident), and the capacity beyond that is not zeroed a
 * huge page at a time unless it is used. */
static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    void *old = *p;
    size_t oldcap = *cap, e = elem ? elem : 1;
    FORWARD_IF(pi_mem_grow(p, cap, need, elem));
    if (*p != old && *cap * e >= (256u << 10)) {
        /* the bytes copied from the old array are touched already */
        size_t from = (size_t)pi_align_up((uint64_t)oldcap * e, 2u << 20);
        size_t to = PI_MIN((size_t)pi_align_up((uint64_t)need * e, 2u << 20), *cap * e);
        if (from < to) pi_mem_advise((uint8_t *)*p + from, to - from, PI_MEM_PAGES_MEASURE);
    }
    return 0;
}

/* Appends byte-array values: grows bytes for extra bytes, voff for n more. */
static int grow_bytes(struct pi_pq_column *c, uint64_t extra) {
    if (extra > PI_PQ_MAX_PAGE * 4ull || c->nbytes + extra > (1ull << 40))
        return pi_err(PAGEIN_E_LIMIT, "byte-array data of the chunk is over the limit");
    return grow((void **)&c->bytes, &c->cap_bytes, (size_t)(c->nbytes + extra) + 1, 1); /* + 1: never NULL */
}

/* PLAIN values: n dense values at c's element e0 (fixed: values; bytes: voff
 * e0.. and bytes). The voff entry e0 must already be set. */
static int plain_decode(struct dec *d, const uint8_t *p, size_t len, size_t n, uint64_t e0, size_t *used) {
    struct pi_pq_column *c = d->c;
    if (d->L->type == PI_PQ_BOOLEAN) {
        if ((n + 7) / 8 > len) return FERR("PLAIN BOOLEAN: %zu values need %zu bytes, %zu left", n, (n + 7) / 8, len);
        uint8_t *o = c->values + e0;
        for (size_t i = 0; i < n; i++) o[i] = (p[i >> 3] >> (i & 7)) & 1;
        *used = (n + 7) / 8;
        return 0;
    }
    if (d->L->type == PI_PQ_BYTE_ARRAY) {
        const uint8_t *q = p, *end = p + len;
        uint64_t *vo = c->voff + e0;
        for (size_t i = 0; i < n; i++) {
            if (end - q < 4) return FERR("PLAIN BYTE_ARRAY value %zu: length past the end of the page", i);
            uint32_t l = pi_le32(q);
            q += 4;
            if (l > (size_t)(end - q)) return FERR("PLAIN BYTE_ARRAY value %zu: %u bytes, %zu left", i, l, (size_t)(end - q));
            q += l;
        }
        /* second pass: the total is known, grow once */
        FORWARD_IF(grow_bytes(c, (uint64_t)(q - p) - 4 * (uint64_t)n));
        q = p;
        uint64_t o = vo[0];
        for (size_t i = 0; i < n; i++) {
            uint32_t l = pi_le32(q);
            memcpy(c->bytes + o, q + 4, l);
            q += 4 + l;
            o += l;
            vo[i + 1] = o;
        }
        c->nbytes = o;
        *used = (size_t)(q - p);
        return 0;
    }
    uint64_t need = (uint64_t)n * d->width;
    if (need > len) return FERR("PLAIN %s: %zu values need %llu bytes, %zu left", pi_pq_type_name(d->L->type), n,
                                (unsigned long long)need, len);
    memcpy(c->values + e0 * d->width, p, (size_t)need);
    *used = (size_t)need;
    return 0;
}

static int decode_dict_page(struct dec *d, const uint8_t *p, size_t len, const struct page_hdr *h) {
    if (d->have_dict) return FERR("a second dictionary page");
    if (h->enc != PI_PQ_PLAIN && h->enc != PI_PQ_PLAIN_DICTIONARY)
        return pi_err(PAGEIN_E_UNSUPPORTED, "dictionary page encoding %s is not supported", pi_pq_encoding_name(h->enc));
    if (h->nvalues < 0) return FERR("dictionary page with %d values", (int)h->nvalues);
    uint64_t n = (uint64_t)h->nvalues;
    /* every value takes at least one bit (BOOLEAN) or one byte */
    uint64_t minb = d->L->type == PI_PQ_BOOLEAN ? (n + 7) / 8 : d->L->type == PI_PQ_BYTE_ARRAY ? 4 * n : n * d->width;
    if (minb > len) return FERR("dictionary of %llu values needs at least %llu bytes, the page has %zu",
                                (unsigned long long)n, (unsigned long long)minb, len);
    /* decode through a column over the scratch's dictionary buffers */
    struct pi_pq_scratch *sc = d->s;
    struct pi_pq_column tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.values = sc->dvals;
    tmp.cap_vals = sc->dvals_cap;
    tmp.voff = sc->doff;
    tmp.cap_voff = sc->doff_cap;
    tmp.bytes = sc->dbytes;
    tmp.cap_bytes = sc->dbytes_cap;
    struct pi_pq_column *save = d->c;
    d->c = &tmp;
    int rc;
    if (d->width) {
        rc = grow((void **)&tmp.values, &tmp.cap_vals, (size_t)((n + 1) * d->width), 1); /* + 1: entry 0 readable */
    } else {
        rc = grow((void **)&tmp.voff, &tmp.cap_voff, (size_t)(n + 1), sizeof *tmp.voff);
        if (rc == 0) tmp.voff[0] = 0;
    }
    size_t used;
    if (rc == 0) rc = plain_decode(d, p, len, (size_t)n, 0, &used);
    d->c = save;
    sc->dvals = tmp.values;
    sc->dvals_cap = tmp.cap_vals;
    sc->doff = tmp.voff;
    sc->doff_cap = tmp.cap_voff;
    sc->dbytes = tmp.bytes;
    sc->dbytes_cap = tmp.cap_bytes;
    if (rc < 0) return rc;
    d->dvals = tmp.values;
    d->doff = tmp.voff;
    d->dbytes = tmp.bytes;
    d->dict_n = (uint32_t)n;
    d->have_dict = 1;
    return 0;
}

/* Room for validity bytes of `rows` more rows and `elems` more elements. */
static int reserve_valid(struct pi_pq_column *c, size_t rows, size_t elems) {
    if (c->kind == PI_PQ_LIST) FORWARD_IF(grow((void **)&c->row_valid, &c->cap_rows, (size_t)c->nrows + rows + 1, 1));
    return grow((void **)&c->elem_valid, &c->cap_elems, (size_t)c->nelems + elems + 1, 1);
}

/* Reserves room for `rows` more rows and `elems` more elements (validity
 * bytes only once a null was seen: see valid_bytes). */
static int reserve(struct dec *d, size_t rows, size_t elems) {
    struct pi_pq_column *c = d->c;
    if (c->kind == PI_PQ_LIST)
        FORWARD_IF(grow((void **)&c->offsets, &c->cap_off, (size_t)c->nrows + rows + 1, sizeof *c->offsets));
    /* one spare element, so that the arrays exist even for no rows */
    if (!c->all_valid) FORWARD_IF(reserve_valid(c, rows, elems));
    if (d->width) {
        size_t need = (size_t)(c->nelems + elems + 1) * d->width;
        if (d->fill && need > c->cap_vals) { /* the array moves: the fill stops first */
            pi_mem_fill_end(d->fill, NULL);
            d->fill = NULL;
        }
        FORWARD_IF(grow((void **)&c->values, &c->cap_vals, need, 1));
        /* the page's values go where the fill has been (no write races it) */
        if (d->fill) pi_mem_fill_wait(d->fill, c->values + c->nelems * d->width, need - c->nelems * d->width);
    } else {
        FORWARD_IF(grow((void **)&c->voff, &c->cap_voff, (size_t)c->nelems + elems + 1, sizeof *c->voff));
    }
    return 0;
}

static int scratch32(uint32_t **p, size_t *cap, size_t n) { return grow((void **)p, cap, n ? n : 1, sizeof **p); }

/* Decodes the values of one data page (n non-null, dense at element e0). */
static int decode_values(struct dec *d, int enc, const uint8_t *p, size_t len, size_t n, uint64_t e0) {
    struct pi_pq_column *c = d->c;
    const struct pi_pq_leaf *L = d->L;
    size_t used;
    if (n == 0) return 0; /* an all-null page may carry no value bytes at all */
    switch (enc) {
    case PI_PQ_PLAIN: return plain_decode(d, p, len, n, e0, &used);
    case PI_PQ_PLAIN_DICTIONARY:
    case PI_PQ_RLE_DICTIONARY: {
        if (!d->have_dict) return FERR("%s data page without a dictionary page", pi_pq_encoding_name(enc));
        if (n == 0) return 0;
        if (len < 1) return FERR("dictionary indexes: no bit width byte");
        int bw = p[0];
        if (bw > 32) return FERR("dictionary index bit width %d", bw);
        if (d->width == 4 || d->width == 8) {
            /* indexes gathered as they are unpacked, from a dictionary
             * padded with zeros to 2^bw entries (up to 2^16, once a chunk):
             * then no index can read past it and none needs a check of its
             * own (the largest is checked after) */
            if (bw >= 1 && bw <= 16 && d->dpad < (1u << bw)) {
                size_t want = ((size_t)1 << bw) * d->width;
                FORWARD_IF(grow((void **)&d->s->dvals, &d->s->dvals_cap, want, 1));
                d->dvals = d->s->dvals;
                size_t from = (size_t)PI_MAX(d->dpad, d->dict_n) * d->width;
                if (want > from) memset(d->dvals + from, 0, want - from);
                d->dpad = 1u << bw;
            }
            return pi_pq_dict_gather(p + 1, len - 1, bw, d->dvals, d->dict_n, PI_MAX(d->dpad, d->dict_n), d->width,
                                     c->values + e0 * d->width, n);
        }
        FORWARD_IF(scratch32(&d->s->idx, &d->s->idx_cap, n));
        FORWARD_IF(pi_pq_rle_decode(p + 1, len - 1, bw, d->s->idx, n));
        uint32_t dn = d->dict_n;
        const uint32_t *ix = d->s->idx;
        for (size_t i = 0; i < n; i++)
            if (ix[i] >= dn) return FERR("dictionary index %u of a %u-entry dictionary", ix[i], dn);
        if (d->width) {
            uint8_t *o = c->values + e0 * d->width;
            {
                for (size_t i = 0; i < n; i++) memcpy(o + d->width * i, d->dvals + (size_t)d->width * ix[i], d->width);
            }
            return 0;
        }
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++) total += d->doff[ix[i] + 1] - d->doff[ix[i]];
        FORWARD_IF(grow_bytes(c, total));
        uint64_t o = c->voff[e0];
        for (size_t i = 0; i < n; i++) {
            uint64_t b = d->doff[ix[i]], l = d->doff[ix[i] + 1] - b;
            memcpy(c->bytes + o, d->dbytes + b, (size_t)l);
            o += l;
            c->voff[e0 + i + 1] = o;
        }
        c->nbytes = o;
        return 0;
    }
    case PI_PQ_RLE: {
        if (L->type != PI_PQ_BOOLEAN) return pi_err(PAGEIN_E_UNSUPPORTED, "RLE encoding of %s values", pi_pq_type_name(L->type));
        if (len < 4) return FERR("RLE booleans: no length prefix");
        uint32_t l = pi_le32(p);
        if (l > len - 4) return FERR("RLE booleans: %u bytes, %zu left", l, len - 4);
        FORWARD_IF(pi_pq_rle_decode8(p + 4, l, 1, c->values + e0, n, NULL));
        return 0;
    }
    case PI_PQ_DELTA_BINARY_PACKED:
        if (L->type != PI_PQ_INT32 && L->type != PI_PQ_INT64)
            return pi_err(PAGEIN_E_UNSUPPORTED, "DELTA_BINARY_PACKED encoding of %s values", pi_pq_type_name(L->type));
        return pi_pq_delta_decode(p, len, L->type == PI_PQ_INT32, c->values + e0 * d->width, n, &used);
    case PI_PQ_DELTA_LENGTH_BYTE_ARRAY:
    case PI_PQ_DELTA_BYTE_ARRAY: {
        if (L->type != PI_PQ_BYTE_ARRAY && !(enc == PI_PQ_DELTA_BYTE_ARRAY && L->type == PI_PQ_FIXED))
            return pi_err(PAGEIN_E_UNSUPPORTED, "%s encoding of %s values", pi_pq_encoding_name(enc),
                          pi_pq_type_name(L->type));
        const uint8_t *q = p, *end = p + len;
        int64_t *pre = NULL, *suf;
        FORWARD_IF(grow((void **)&d->s->lens, &d->s->lens_cap, 2 * n + 1, sizeof *d->s->lens));
        if (enc == PI_PQ_DELTA_BYTE_ARRAY) {
            pre = d->s->lens + n;
            FORWARD_IF(pi_pq_delta_decode(q, (size_t)(end - q), 0, pre, n, &used));
            q += used;
        }
        suf = d->s->lens;
        FORWARD_IF(pi_pq_delta_decode(q, (size_t)(end - q), 0, suf, n, &used));
        q += used;
        uint64_t sufbytes = 0, total = 0, prevlen = 0;
        for (size_t i = 0; i < n; i++) {
            if (suf[i] < 0 || (uint64_t)suf[i] > (uint64_t)(end - q) - sufbytes)
                return FERR("%s value %zu: length %lld, %zu bytes left", pi_pq_encoding_name(enc), i,
                            (long long)suf[i], (size_t)(end - q) - (size_t)sufbytes);
            sufbytes += (uint64_t)suf[i];
            uint64_t pl = 0;
            if (pre) {
                if (pre[i] < 0 || (uint64_t)pre[i] > prevlen)
                    return FERR("DELTA_BYTE_ARRAY value %zu: prefix %lld of a %llu-byte previous value", i,
                                (long long)pre[i], (unsigned long long)prevlen);
                pl = (uint64_t)pre[i];
            }
            prevlen = pl + (uint64_t)suf[i];
            if (L->type == PI_PQ_FIXED && prevlen != (uint64_t)L->type_length)
                return FERR("DELTA_BYTE_ARRAY value %zu has %llu bytes, FIXED_LEN_BYTE_ARRAY(%d)", i,
                            (unsigned long long)prevlen, (int)L->type_length);
            total += prevlen;
            /* prefixes can repeat bytes: bounded per page */
            if (total > PI_PQ_MAX_PAGE)
                return pi_err(PAGEIN_E_LIMIT, "DELTA_BYTE_ARRAY page expands past %u bytes", PI_PQ_MAX_PAGE);
        }
        if (L->type == PI_PQ_FIXED) {
            uint8_t *o = c->values + e0 * d->width;
            const uint8_t *prev = NULL;
            for (size_t i = 0; i < n; i++) {
                size_t pl = (size_t)pre[i];
                if (pl) memmove(o, prev, pl);
                memcpy(o + pl, q, (size_t)suf[i]);
                q += suf[i];
                prev = o;
                o += d->width;
            }
            return 0;
        }
        FORWARD_IF(grow_bytes(c, total));
        uint64_t o = c->voff[e0], prevoff = o;
        for (size_t i = 0; i < n; i++) {
            size_t pl = pre ? (size_t)pre[i] : 0;
            if (pl) memmove(c->bytes + o, c->bytes + prevoff, pl);
            memcpy(c->bytes + o + pl, q, (size_t)suf[i]);
            q += suf[i];
            prevoff = o;
            o += pl + (uint64_t)suf[i];
            c->voff[e0 + i + 1] = o;
        }
        c->nbytes = o;
        return 0;
    }
    case PI_PQ_BYTE_STREAM_SPLIT: {
        if (!d->width || L->type == PI_PQ_BOOLEAN || L->type == PI_PQ_INT96)
            return pi_err(PAGEIN_E_UNSUPPORTED, "BYTE_STREAM_SPLIT encoding of %s values", pi_pq_type_name(L->type));
        uint64_t need = (uint64_t)n * d->width;
        if (need > len) return FERR("BYTE_STREAM_SPLIT: %zu values need %llu bytes, %zu left", n, (unsigned long long)need, len);
        uint8_t *o = c->values + e0 * d->width;
        for (uint32_t k = 0; k < d->width; k++) {
            const uint8_t *s = p + (size_t)k * n;
            for (size_t i = 0; i < n; i++) o[i * d->width + k] = s[i];
        }
        return 0;
    }
    default:
        return pi_err(PAGEIN_E_UNSUPPORTED, "encoding %s (%d) is not supported", pi_pq_encoding_name(enc), enc);
    }
}

/* The page about to be assembled may hold nulls: the column's validity
 * bytes are written from here on, those of the rows and elements before
 * (all valid) first, with room for `rows` and `elems` more. */
static int valid_bytes(struct pi_pq_column *c, size_t rows, size_t elems) {
    if (!c->all_valid) return 0;
    FORWARD_IF(reserve_valid(c, rows, elems));
    if (c->kind == PI_PQ_LIST) memset(c->row_valid, 1, (size_t)c->nrows);
    memset(c->elem_valid, 1, (size_t)c->nelems);
    c->all_valid = 0;
    return 0;
}

/* Moves the nn dense values at e0 out to the page's nslots element slots,
 * leaving nulls zeroed (fixed width) or empty (byte arrays); from the back,
 * so nothing is overwritten before it is moved. */
static void spread(struct dec *d, uint64_t e0, size_t nslots, size_t nn) {
    struct pi_pq_column *c = d->c;
    const uint8_t *v = c->elem_valid + e0;
    size_t j = nn;
    if (d->width) {
        uint32_t w = d->width;
        uint8_t *b = c->values + e0 * w;
        for (size_t k = nslots; k-- > 0;) {
            if (v[k]) {
                j--;
                if (j != k) memcpy(b + k * w, b + j * w, w);
            } else {
                memset(b + k * w, 0, w);
            }
        }
    } else {
        uint64_t *o = c->voff + e0;
        for (size_t k = nslots; k-- > 0;) {
            o[k + 1] = o[j];
            if (v[k]) j--;
        }
    }
}

/* A page's encoded levels (the RLE/bit-packed hybrid) */
struct lvls {
    const uint8_t *p;
    size_t len;
};

static int bitwidth(int maxl) {
    int bw = 0;
    while ((1 << bw) <= maxl) bw++;
    return bw;
}

/* The level stream of a v1 page: [4-byte length][RLE hybrid] at *p
 * (advanced past it); BIT_PACKED refused. */
static int levels_v1(const uint8_t **p, const uint8_t *end, int enc, const char *what, struct lvls *lv) {
    if (enc != PI_PQ_RLE)
        return pi_err(PAGEIN_E_UNSUPPORTED, "%s levels in encoding %s are not supported", what, pi_pq_encoding_name(enc));
    if (end - *p < 4) return FERR("%s levels: no length prefix", what);
    uint32_t l;
    memcpy(&l, *p, 4);
    *p += 4;
    if (l > (size_t)(end - *p)) return FERR("%s levels: %u bytes, %zu left", what, l, (size_t)(end - *p));
    lv->p = *p;
    lv->len = l;
    *p += l;
    return 0;
}

/* A NESTED column's row index exists even with no rows. */
static int nested_init(struct pi_pq_column *c) {
    FORWARD_IF(grow((void **)&c->rowslot, &c->cap_rowslot, 2, sizeof *c->rowslot));
    FORWARD_IF(grow((void **)&c->rowval, &c->cap_rowval, 2, sizeof *c->rowval));
    c->rowslot[0] = c->rowval[0] = 0;
    return 0;
}

/* A NESTED leaf's data page of n slots: its levels kept as they are (one
 * byte each), the row starts recorded, the non-null values decoded dense. */
static int assemble_nested(struct dec *d, size_t n, int enc, const uint8_t *vp, size_t vlen, int64_t *rows_left,
                           int first, const struct lvls *rl, const struct lvls *dl) {
    struct pi_pq_column *c = d->c;
    const struct pi_pq_leaf *L = d->L;
    uint32_t maxd = (uint32_t)L->max_def;
    struct pi_pq_lvlstat ds = {255, 0, 0}, rs = {255, 0, 0};
    uint64_t s0 = c->nslots;
    /* both level arrays always filled (a pooled column may hold another
     * column's levels): zeros where the leaf has no such levels */
    FORWARD_IF(grow((void **)&c->ldef, &c->cap_ldef, (size_t)(s0 + n) + 1, 1));
    FORWARD_IF(grow((void **)&c->lrep, &c->cap_lrep, (size_t)(s0 + n) + 1, 1));
    if (L->max_def) {
        FORWARD_IF(pi_pq_rle_decode8(dl->p, dl->len, bitwidth(L->max_def), c->ldef + s0, n, &ds));
        if (n && ds.max > maxd) return FERR("definition level %u over the maximum %u", ds.max, maxd);
    } else {
        memset(c->ldef + s0, 0, n);
    }
    if (L->max_rep) {
        FORWARD_IF(pi_pq_rle_decode8(rl->p, rl->len, bitwidth(L->max_rep), c->lrep + s0, n, &rs));
        if (n && rs.max > (uint32_t)L->max_rep) return FERR("repetition level %u over the maximum %d", rs.max, L->max_rep);
        if (n && first && c->lrep[s0] != 0) return FERR("the chunk's first value continues a row");
    } else {
        memset(c->lrep + s0, 0, n);
    }
    size_t newrows = L->max_rep ? rs.zeros : n;
    if (*rows_left >= 0 && (int64_t)newrows > *rows_left)
        return FERR("pages hold more rows than the row group's %lld", (long long)(*rows_left + (int64_t)c->nrows));
    FORWARD_IF(grow((void **)&c->rowslot, &c->cap_rowslot, (size_t)(c->nrows + newrows) + 2, sizeof *c->rowslot));
    FORWARD_IF(grow((void **)&c->rowval, &c->cap_rowval, (size_t)(c->nrows + newrows) + 2, sizeof *c->rowval));
    const uint8_t *def = c->ldef + s0, *rep = c->lrep + s0;
    uint64_t nn = 0, r = c->nrows, e0 = c->nelems;
    for (size_t i = 0; i < n; i++) {
        if (rep[i] == 0) {
            c->rowslot[r] = s0 + i;
            c->rowval[r++] = e0 + nn;
        }
        nn += def[i] == maxd;
    }
    c->nrows = r;
    c->nslots = s0 + n;
    c->rowslot[r] = c->nslots;
    c->rowval[r] = e0 + nn;
    if (*rows_left >= 0) *rows_left -= (int64_t)newrows;
    FORWARD_IF(reserve(d, 0, (size_t)nn));
    if (!d->width) c->voff[e0] = c->nbytes;
    FORWARD_IF(decode_values(d, enc, vp, vlen, (size_t)nn, e0));
    c->nelems = e0 + nn;
    c->rowval[r] = c->nelems;
    return 0;
}

/* One data page of n values, its levels in rl/dl: assembles rows and
 * elements, then decodes the nn non-null values. A list page whose
 * definition levels are all the maximum (no null or empty list, no null
 * element: the common case) never stores its levels: the row starts are
 * written straight from the runs of the repetition levels. */
static int assemble(struct dec *d, size_t n, int enc, const uint8_t *vp, size_t vlen, int64_t *rows_left, int first,
                    const struct lvls *rl, const struct lvls *dl) {
    struct pi_pq_column *c = d->c;
    const struct pi_pq_leaf *L = d->L;
    if (L->kind == PI_PQ_NESTED) return assemble_nested(d, n, enc, vp, vlen, rows_left, first, rl, dl);
    uint32_t maxd = (uint32_t)L->max_def, maxr = (uint32_t)L->max_rep;
    int bwd = bitwidth(L->max_def), bwr = bitwidth(L->max_rep);
    struct pi_pq_lvlstat ds = {255, 0, 0}, rs = {255, 0, 0};
    size_t newrows = n, nn = 0;
    uint64_t e0 = c->nelems;
    if (L->max_rep && n) {
        FORWARD_IF(pi_pq_rle_scan8(dl->p, dl->len, bwd, n, &ds, 0, NULL));
        if (ds.min == maxd && ds.max == maxd) {
            FORWARD_IF(pi_pq_rle_scan8(rl->p, rl->len, bwr, n, &rs, 0, NULL));
            if (rs.max > maxr) return FERR("repetition level %u over the maximum %u", rs.max, maxr);
            newrows = rs.zeros;
            if (*rows_left >= 0 && (int64_t)newrows > *rows_left)
                return FERR("pages hold more rows than the row group's %lld", (long long)(*rows_left + (int64_t)c->nrows));
            FORWARD_IF(reserve(d, newrows, n));
            FORWARD_IF(pi_pq_rle_scan8(rl->p, rl->len, bwr, n, &rs, e0, c->offsets + c->nrows));
            if (first && (!newrows || c->offsets[c->nrows] != e0))
                return FERR("the chunk's first value continues a row (repetition level 1)");
            if (!c->all_valid) {
                memset(c->row_valid + c->nrows, 1, newrows);
                memset(c->elem_valid + e0, 1, n);
            }
            c->nrows += newrows;
            c->nelems = e0 + n;
            c->offsets[c->nrows] = c->nelems;
            nn = n;
            goto values;
        }
    }
    /* the levels stored, one byte each */
    const uint8_t *def = d->s->def, *rep = d->s->rep;
    if (L->max_rep) FORWARD_IF(pi_pq_rle_decode8(rl->p, rl->len, bwr, d->s->rep, n, &rs));
    if (L->max_def) FORWARD_IF(pi_pq_rle_decode8(dl->p, dl->len, bwd, d->s->def, n, &ds));
    /* level ranges and row starts, counted by the level decoder */
    uint8_t dmin = L->max_def ? ds.min : 255, dmax = L->max_def ? ds.max : 0, rmax = L->max_rep ? rs.max : 0;
    if (L->max_rep) newrows = rs.zeros;
    if (dmax > maxd || rmax > maxr)
        for (size_t i = 0; i < n; i++) {
            if (L->max_def && def[i] > maxd) return FERR("definition level %u over the maximum %u (value %zu)", def[i], maxd, i);
            if (L->max_rep && rep[i] > maxr) return FERR("repetition level %u over the maximum %u (value %zu)", rep[i], maxr, i);
        }
    if (L->max_rep && n && first && rep[0] != 0) return FERR("the chunk's first value continues a row (repetition level %u)", rep[0]);
    if (*rows_left >= 0 && (int64_t)newrows > *rows_left)
        return FERR("pages hold more rows than the row group's %lld", (long long)(*rows_left + (int64_t)c->nrows));
    FORWARD_IF(reserve(d, newrows, n));
    /* a page without a null level writes no validity bytes while the column has none */
    int nulls_here = L->max_def && n && dmin != maxd;
    if (nulls_here) FORWARD_IF(valid_bytes(c, newrows, n));
    if (!L->max_rep) {
        uint8_t *ev = c->elem_valid + e0;
        if (!nulls_here) {
            if (!c->all_valid) memset(ev, 1, n);
            nn = n;
        } else {
            for (size_t i = 0; i < n; i++) nn += (ev[i] = def[i] == maxd);
        }
        c->nrows += n;
        c->nelems += n;
    } else if (n && dmin == maxd) {
        /* no null or empty list and no null element in the page: every
         * value is an element, a row starts where rep is 0 */
        uint64_t ne = c->nelems, r = c->nrows;
        for (size_t i = 0; i < n; i++)
            if (rep[i] == 0) c->offsets[r++] = ne + i;
        if (!c->all_valid) {
            memset(c->row_valid + c->nrows, 1, (size_t)(r - c->nrows));
            memset(c->elem_valid + ne, 1, n);
        }
        c->nrows = r;
        c->nelems = ne + n;
        c->offsets[r] = c->nelems;
        nn = n;
    } else {
        uint32_t ld = (uint32_t)L->list_def;
        uint64_t ne = c->nelems, nulls = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t dv = L->max_def ? def[i] : 0;
            if (rep[i] == 0) {
                c->offsets[c->nrows] = ne;
                c->row_valid[c->nrows] = dv >= ld;
                c->nrows++;
                if (dv <= ld) continue; /* a null or empty list */
            } else if (dv <= ld) {
                return FERR("value %zu continues a list but says it is null or empty", i);
            }
            uint8_t ok = dv == maxd;
            c->elem_valid[ne++] = ok;
            nn += ok;
            nulls += !ok;
        }
        c->nelems = ne;
        c->offsets[c->nrows] = ne;
        c->null_elems += nulls;
    }
values:
    if (*rows_left >= 0) *rows_left -= (int64_t)newrows;
    size_t nslots = (size_t)(c->nelems - e0);
    if (!d->width) c->voff[e0] = c->nbytes;
    int rc = decode_values(d, enc, vp, vlen, nn, e0);
    if (rc < 0) {
        return rc;
    }
    if (nn < nslots) spread(d, e0, nslots, nn);
    return 0;
}

void pi_pq_scratch_free(struct pi_pq_scratch *s) {
    if (!s) return;
    /* grown with pi_mem_grow: large arrays go back to the kept blocks */
    pi_mem_release(s->ubuf, s->ubuf_cap, 1);
    pi_mem_release(s->def, s->def_cap, 1);
    pi_mem_release(s->rep, s->rep_cap, 1);
    pi_mem_release(s->dvals, s->dvals_cap, 1);
    pi_mem_release(s->dbytes, s->dbytes_cap, 1);
    pi_mem_release(s->doff, s->doff_cap, sizeof *s->doff);
    pi_mem_release(s->idx, s->idx_cap, sizeof *s->idx);
    pi_mem_release(s->lens, s->lens_cap, sizeof *s->lens);
    memset(s, 0, sizeof *s);
}

uint64_t pi_pq_scratch_held(const struct pi_pq_scratch *s) {
    return (uint64_t)s->ubuf_cap + s->def_cap + s->rep_cap + s->dvals_cap + s->dbytes_cap +
           (uint64_t)s->doff_cap * sizeof *s->doff + (uint64_t)s->idx_cap * sizeof *s->idx +
           (uint64_t)s->lens_cap * sizeof *s->lens;
}

uint64_t pi_pq_column_held(const struct pi_pq_column *c) {
    return (uint64_t)(c->row_valid != c->elem_valid ? c->cap_rows : 0) + (uint64_t)c->cap_off * sizeof *c->offsets +
           c->cap_elems + c->cap_vals + (uint64_t)c->cap_voff * sizeof *c->voff + c->cap_bytes + c->cap_ldef +
           c->cap_lrep + ((uint64_t)c->cap_rowslot + c->cap_rowval) * sizeof(uint64_t);
}

void pi_pq_column_free(struct pi_pq_column *c) {
    if (!c) return;
    if (c->row_valid != c->elem_valid) pi_mem_release(c->row_valid, c->cap_rows, 1);
    pi_mem_release(c->elem_valid, c->cap_elems, 1);
    pi_mem_release(c->offsets, c->cap_off, sizeof *c->offsets);
    pi_mem_release(c->values, c->cap_vals, 1);
    pi_mem_release(c->voff, c->cap_voff, sizeof *c->voff);
    pi_mem_release(c->bytes, c->cap_bytes, 1);
    pi_mem_release(c->ldef, c->cap_ldef, 1);
    pi_mem_release(c->lrep, c->cap_lrep, 1);
    pi_mem_release(c->rowslot, c->cap_rowslot, sizeof *c->rowslot);
    pi_mem_release(c->rowval, c->cap_rowval, sizeof *c->rowval);
    memset(c, 0, sizeof *c);
}

static int page_loop(struct dec *d, const uint8_t *buf, size_t len, int64_t num_values, int64_t num_rows, int *page_no,
                     size_t *page_off) {
    const struct pi_pq_leaf *L = d->L;
    struct pi_pq_column *c = d->c;
    size_t pos = 0;
    int64_t values = 0, rows_left = num_rows;
    int first = 1;
    *page_no = -1;
    while (pos < len && (num_values < 0 || values < num_values)) {
        struct page_hdr h;
        size_t hl = 0;
        *page_off = pos;
        (*page_no)++;
        FORWARD_IF(rd_page_header(buf + pos, len - pos, &h, &hl));
        pos += hl;
        if ((size_t)h.csize > len - pos)
            return FERR("page of %d bytes runs past the chunk's end (%zu bytes left)", (int)h.csize, len - pos);
        if ((uint32_t)h.usize > PI_PQ_MAX_PAGE)
            return pi_err(PAGEIN_E_LIMIT, "page of %d uncompressed bytes is over the %u-byte limit", (int)h.usize, PI_PQ_MAX_PAGE);
        const uint8_t *page = buf + pos;
        pos += (size_t)h.csize;
        if (h.type == PI_PQ_INDEX_PAGE) continue;
        if (h.type != PI_PQ_DATA_PAGE && h.type != PI_PQ_DATA_PAGE_V2 && h.type != PI_PQ_DICTIONARY_PAGE)
            return FERR("page type %d is unknown", (int)h.type);
        if (!h.have_sub) return FERR("page header lacks the header of its type %d", (int)h.type);
        /* the uncompressed bytes: levels of a v2 page are never compressed */
        size_t lvl = 0;
        int compressed = d->codec != PI_PQ_UNCOMPRESSED;
        if (h.type == PI_PQ_DATA_PAGE_V2) {
            if (h.def_len < 0 || h.rep_len < 0 || (uint64_t)h.def_len + (uint64_t)h.rep_len > (uint64_t)h.csize ||
                (uint64_t)h.def_len + (uint64_t)h.rep_len > (uint64_t)h.usize)
                return FERR("v2 page: level lengths %d + %d do not fit the page", (int)h.rep_len, (int)h.def_len);
            lvl = (size_t)h.rep_len + (size_t)h.def_len;
            if (!h.is_compressed) compressed = 0;
        }
        const uint8_t *u;
        if (!compressed) {
            if (h.csize != h.usize) return FERR("uncompressed page of %d bytes says %d", (int)h.csize, (int)h.usize);
            u = page;
        } else {
            FORWARD_IF(grow((void **)&d->s->ubuf, &d->s->ubuf_cap, (size_t)h.usize + 1, 1));
            memcpy(d->s->ubuf, page, lvl);
            /* a v2 page of only nulls may carry no compressed bytes at all */
            if (!((size_t)h.csize == lvl && (size_t)h.usize == lvl))
                FORWARD_IF(pi_pq_decompress(d->codec, page + lvl, (size_t)h.csize - lvl, d->s->ubuf + lvl,
                                            (size_t)h.usize - lvl));
            u = d->s->ubuf;
        }
        size_t ulen = (size_t)h.usize;
        if (h.type == PI_PQ_DICTIONARY_PAGE) {
            if (!first) return FERR("dictionary page after a data page");
            FORWARD_IF(decode_dict_page(d, u, ulen, &h));
            continue;
        }
        first = 0;
        if (h.nvalues < 0) return FERR("data page with %d values", (int)h.nvalues);
        if ((uint32_t)h.nvalues > PI_PQ_MAX_PAGE_VALUES)
            return pi_err(PAGEIN_E_LIMIT, "data page of %d values is over the limit of %u", (int)h.nvalues, PI_PQ_MAX_PAGE_VALUES);
        if (num_values >= 0 && h.nvalues > num_values - values)
            return FERR("pages hold more than the chunk's %lld values", (long long)num_values);
        size_t n = (size_t)h.nvalues;
        const uint8_t *p = u, *end = u + ulen;
        struct lvls rl = {p, 0}, dl = {p, 0};
        if (L->max_rep) FORWARD_IF(grow((void **)&d->s->rep, &d->s->rep_cap, n + 1, 1));
        if (L->max_def) FORWARD_IF(grow((void **)&d->s->def, &d->s->def_cap, n + 1, 1));
        if (h.type == PI_PQ_DATA_PAGE) {
            if (L->max_rep) FORWARD_IF(levels_v1(&p, end, h.rep_enc, "repetition", &rl));
            if (L->max_def) FORWARD_IF(levels_v1(&p, end, h.def_enc, "definition", &dl));
        } else {
            /* a column without repetition (or definition) levels may still
             * carry an encoded run of zeros for them (parquet-rs writes
             * one for rle_boolean_encoding.parquet): skipped */
            rl = (struct lvls){p, (size_t)h.rep_len};
            p += h.rep_len;
            dl = (struct lvls){p, (size_t)h.def_len};
            p += h.def_len;
        }
        FORWARD_IF(assemble(d, n, h.enc, p, (size_t)(end - p), &rows_left, values == 0, &rl, &dl));
        if (h.type == PI_PQ_DATA_PAGE_V2 && h.nnulls >= 0 && L->max_def && L->kind == PI_PQ_SCALAR) {
            /* cheap consistency check: v2 says how many nulls it holds */
            size_t nulls = 0;
            for (size_t i = 0; i < n; i++) nulls += d->s->def[i] != (uint8_t)L->max_def;
            if (nulls != (size_t)h.nnulls) return FERR("v2 page says %d nulls, its levels hold %zu", (int)h.nnulls, nulls);
        }
        values += h.nvalues;
    }
    *page_no = -1;
    if (num_values >= 0 && values != num_values)
        return FERR("pages hold %lld values, the chunk's metadata says %lld", (long long)values, (long long)num_values);
    if (rows_left > 0) return FERR("pages hold %lld rows, the row group has %lld", (long long)c->nrows, (long long)num_rows);
    return 0;
}

/* Empties a column for a decode of leaf L, keeping its buffers. */
static void col_reset(struct pi_pq_column *c, const struct pi_pq_leaf *L, uint32_t width) {
    if (c->row_valid == c->elem_valid) {
        c->row_valid = NULL; /* a scalar's alias */
        c->cap_rows = 0;
    }
    c->type = L->type;
    c->kind = L->kind;
    c->width = width;
    c->all_valid = 1;
    c->nrows = c->nelems = c->nbytes = c->null_elems = c->nslots = 0;
}

/* A scalar's row validity is its element validity. */
static void col_finish(struct pi_pq_column *c) {
    if (c->kind != PI_PQ_SCALAR) return;
    if (c->row_valid && c->row_valid != c->elem_valid) pi_mem_release(c->row_valid, c->cap_rows, 1); /* left from a list */
    c->row_valid = c->elem_valid;
    c->cap_rows = 0;
}

static int check_leaf(const struct pi_pq_leaf *L, const char *ctx) {
    if (L->unsupported)
        return pi_err(PAGEIN_E_UNSUPPORTED, "%s: column %s is %s, which is not supported", ctx, L->path ? L->path : "?",
                      L->unsupported);
    if (L->type < 0 || L->type > 7 || L->max_rep < 0 || L->max_rep > PI_PQ_MAX_DEPTH || L->max_def < 0 ||
        L->max_def > PI_PQ_MAX_DEPTH || L->max_rep > L->max_def || L->kind < PI_PQ_SCALAR || L->kind > PI_PQ_NESTED ||
        (L->kind == PI_PQ_SCALAR && L->max_rep) || (L->kind == PI_PQ_LIST) != (L->kind != PI_PQ_NESTED && L->max_rep == 1) ||
        (L->kind == PI_PQ_LIST && (L->list_def < 0 || L->list_def >= L->max_def)))
        return pi_err(PAGEIN_E_INVALID, "%s: inconsistent column description", ctx);
    if (L->type == PI_PQ_FIXED && (L->type_length <= 0 || L->type_length > (1 << 24)))
        return pi_err(PAGEIN_E_INVALID, "%s: FIXED_LEN_BYTE_ARRAY of length %d", ctx, (int)L->type_length);
    return 0;
}

/* Prefixes the error with ctx and the page (when one is known). */
static int page_err(int rc, const char *ctx, const char *part, int page_no, size_t page_off) {
    char pre[700];
    if (page_no >= 0 && part)
        snprintf(pre, sizeof pre, "%s, %s %d (byte %zu)", ctx, part, page_no, page_off);
    else if (page_no >= 0)
        snprintf(pre, sizeof pre, "%s, page %d (chunk byte %zu)", ctx, page_no, page_off);
    else
        snprintf(pre, sizeof pre, "%s", ctx);
    pi_err_prefix(pre);
    return rc;
}

/* Sets up a decode of one column chunk (or page run) into out: the
 * column reset, room for rows/values reserved, its first offsets set. */
static int dec_start(struct dec *d, const struct pi_pq_leaf *L, int codec, struct pi_pq_column *out,
                     struct pi_pq_scratch *s, size_t rows, size_t values, size_t in_len) {
    memset(d, 0, sizeof *d);
    d->L = L;
    d->c = out;
    d->codec = codec;
    d->width = fixed_width(L->type, L->type_length);
    d->s = s;
    col_reset(out, L, d->width);
    void *old = out->values;
    uint64_t reused = pi_mem_grow_reused();
    int rc = reserve(d, rows, values);
    /* a fresh values array of 8 MiB or more (sized from the chunk's
     * declared values): its pages are populated ahead on a thread of their
     * own while the pages decompress, each page's values waiting for their
     * bytes (reserve). The kernel zeroing fresh huge pages is most of a
     * process's first decode (docs/BENCHMARKS.md, "Parquet: the first decode
     * of a process"); PAGEIN_MEM_THREADS=0 turns this off. A reused block
     * (the counter moved: another thread's would only cost a fill) is
     * resident already. */
    /* Populated: at most what the chunk's bytes can back (32 bytes of
     * values a stored byte; a declared count beyond that is only address
     * space until the pages write it), and only a memory-policy block (the
     * fill works in whole pages; a heap array, as every array under ASan,
     * is left alone). */
    size_t vb = d->width ? (size_t)(values + 1) * d->width : 0;
    if (in_len <= SIZE_MAX / 32 && vb > 32 * in_len) vb = 32 * in_len;
    vb &= ~(size_t)4095; /* whole pages: values past it (more than declared) share none with the fill */
    if (rc == 0 && vb >= (8u << 20) && out->values != old && pi_mem_grow_reused() == reused &&
        pi_mem_grow_is_block(out->cap_vals)) {
        void *r = out->values;
        d->fill = pi_mem_fill_start(&r, &vb, 1, 1, PI_MEM_PAGES_ASIS);
    }
    if (rc == 0 && !d->width) out->voff[0] = 0;
    if (rc == 0 && L->kind == PI_PQ_LIST) out->offsets[0] = 0;
    if (rc == 0 && L->kind == PI_PQ_NESTED) rc = nested_init(out);
    return rc;
}

int pi_pq_decode_pages_into(const struct pi_pq_leaf *L, int codec, int64_t num_values, int64_t num_rows,
                            const void *buf, size_t len, const char *ctx, struct pi_pq_column *out,
                            struct pi_pq_scratch *sc) {
    FORWARD_IF(check_leaf(L, ctx));
    struct pi_pq_scratch local;
    memset(&local, 0, sizeof local);
    struct dec d;
    int page_no = -1;
    size_t page_off = 0;
    /* room for the values the chunk declares, bounded by what its bytes
     * could plausibly hold (8 values a byte), so a lying footer cannot
     * make this allocation large; pages grow it further when needed */
    uint64_t hint = (uint64_t)(num_values > 0 ? num_values : 0);
    if (hint > 8 * (uint64_t)len + 64) hint = 8 * (uint64_t)len + 64;
    uint64_t rhint = num_rows >= 0 && (uint64_t)num_rows < hint ? (uint64_t)num_rows : hint;
    int rc = dec_start(&d, L, codec, out, sc ? sc : &local, (size_t)rhint, (size_t)hint, len);
    if (rc == 0) rc = page_loop(&d, buf, len, num_values, num_rows, &page_no, &page_off);
    pi_mem_fill_end(d.fill, NULL);
    pi_pq_scratch_free(&local);
    if (rc < 0) return page_err(rc, ctx, NULL, page_no, page_off);
    col_finish(out);
    return 0;
}

int pi_pq_decode_pages(const struct pi_pq_leaf *L, int codec, int64_t num_values, int64_t num_rows, const void *buf,
                       size_t len, const char *ctx, struct pi_pq_column *out) {
    memset(out, 0, sizeof *out);
    int rc = pi_pq_decode_pages_into(L, codec, num_values, num_rows, buf, len, ctx, out, NULL);
    if (rc < 0) pi_pq_column_free(out);
    return rc;
}

int pi_pq_decode_chunk_into(const struct pi_pq_file *f, size_t rg, size_t col, const void *buf, size_t len,
                            struct pi_pq_column *out, struct pi_pq_scratch *s) {
    if (rg >= f->ngroups || col >= f->nleaves)
        return pi_err(PAGEIN_E_RANGE, "%s: no row group %zu column %zu", f->name, rg, col);
    const struct pi_pq_chunk *C = &f->groups[rg].chunks[col];
    const struct pi_pq_leaf *L = &f->leaves[col];
    char ctx[600];
    snprintf(ctx, sizeof ctx, "%s: row group %zu, column %s", f->name, rg, L->path);
    if (len != C->len)
        return pi_err(PAGEIN_E_INVALID, "%s: %zu bytes given, the chunk has %llu", ctx, len, (unsigned long long)C->len);
    /* byte-array values: their bytes reserved once from the chunk's
     * uncompressed size (PLAIN values hold less; a dictionary's may hold
     * more: those grow as before), bounded by 32x its stored bytes, instead
     * of a grow and copy into fresh pages at every doubling */
    if (!fixed_width(L->type, L->type_length) && C->total_uncompressed > 0) {
        uint64_t want = PI_MIN((uint64_t)C->total_uncompressed, 32 * (uint64_t)len + 64);
        if (want > out->cap_bytes) FORWARD_IF(grow((void **)&out->bytes, &out->cap_bytes, (size_t)want, 1));
    }
    /* a chunk of a row group holds exactly its rows */
    return pi_pq_decode_pages_into(L, C->codec, C->num_values, f->groups[rg].num_rows, buf, len, ctx, out, s);
}

int pi_pq_decode_chunk(const struct pi_pq_file *f, size_t rg, size_t col, const void *buf, size_t len,
                       struct pi_pq_column *out) {
    memset(out, 0, sizeof *out);
    int rc = pi_pq_decode_chunk_into(f, rg, col, buf, len, out, NULL);
    if (rc < 0) pi_pq_column_free(out);
    return rc;
}

int pi_pq_decode_page_run_into(const struct pi_pq_file *f, size_t rg, size_t col, const void *dict, size_t dict_len,
                               const void *pages, size_t pages_len, int64_t first_row, int64_t rows,
                               struct pi_pq_column *out, struct pi_pq_scratch *sc) {
    if (rg >= f->ngroups || col >= f->nleaves)
        return pi_err(PAGEIN_E_RANGE, "%s: no row group %zu column %zu", f->name, rg, col);
    const struct pi_pq_chunk *C = &f->groups[rg].chunks[col];
    const struct pi_pq_leaf *L = &f->leaves[col];
    char ctx[600];
    snprintf(ctx, sizeof ctx, "%s: row group %zu, column %s, rows from %lld", f->name, rg, L->path, (long long)first_row);
    FORWARD_IF(check_leaf(L, ctx));
    if (rows < 0 || first_row < 0 || first_row > f->groups[rg].num_rows || rows > f->groups[rg].num_rows - first_row)
        return pi_err(PAGEIN_E_RANGE, "%s: %lld rows are not in the row group's %lld", ctx, (long long)rows,
                      (long long)f->groups[rg].num_rows);
    struct pi_pq_scratch local;
    memset(&local, 0, sizeof local);
    struct dec d;
    int page_no = -1;
    size_t page_off = 0;
    const char *part = "dictionary page";
    int rc = dec_start(&d, L, C->codec, out, sc ? sc : &local,
                       (size_t)PI_MIN((uint64_t)rows, 8 * (uint64_t)pages_len + 64), 0, 0);
    /* the dictionary page (if any), then the data pages: exactly `rows` rows */
    if (rc == 0 && dict_len) rc = page_loop(&d, dict, dict_len, -1, -1, &page_no, &page_off);
    if (rc == 0 && out->nrows) rc = pi_err(PI_PQ_EFORMAT, "the bytes before the first data page hold data pages");
    if (rc == 0) {
        part = "pages page";
        rc = page_loop(&d, pages, pages_len, -1, rows, &page_no, &page_off);
    }
    if (rc == 0 && out->nrows != (uint64_t)rows)
        rc = pi_err(PI_PQ_EFORMAT, "the pages hold %llu rows, the offset index says %lld",
                    (unsigned long long)out->nrows, (long long)rows);
    pi_mem_fill_end(d.fill, NULL);
    pi_pq_scratch_free(&local);
    if (rc < 0) return page_err(rc, ctx, part, page_no, page_off);
    col_finish(out);
    return 0;
}

int pi_pq_decode_page_run(const struct pi_pq_file *f, size_t rg, size_t col, const void *dict, size_t dict_len,
                          const void *pages, size_t pages_len, int64_t first_row, int64_t rows,
                          struct pi_pq_column *out) {
    memset(out, 0, sizeof *out);
    int rc = pi_pq_decode_page_run_into(f, rg, col, dict, dict_len, pages, pages_len, first_row, rows, out, NULL);
    if (rc < 0) pi_pq_column_free(out);
    return rc;
}
