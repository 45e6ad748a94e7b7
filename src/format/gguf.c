/* gguf.c - GGUF reader: versions 1-3, both byte orders, every metadata type
 * (nested arrays included) and every ggml tensor type.
 *
 * The parser follows ggml's gguf.cpp rules (../shared/specs/GGUF.md section
 * 1) with four documented differences (docs/FORMAT-GGUF.md): version 1 is
 * read, big-endian files are read (header byte-swapped, tensors flagged
 * PAGEIN_TENSOR_SWAPPED), nested arrays are accepted, and a tensor only
 * needs nelements (not ne[0]) to be a multiple of its block size, which is
 * the rule old ggml used and lets 2023 files with odd rows open with the
 * sizes their offsets were written with.
 *
 * Everything is zero-copy: strings and arrays point into the buffer. Every
 * read is bounded by the bytes that remain; counts are checked against the
 * remaining bytes before anything is allocated for them.
 */
#include "format.h"
#include "../core/endian.h"

#include <stdio.h>

struct rd {
    const uint8_t *buf;
    size_t len, pos;
    int v1; /* version 1: counts, lengths and dims are u32 */
    int be; /* big-endian file */
};

static inline size_t left(const struct rd *r) { return r->len - r->pos; }

static int need(const struct rd *r, uint64_t n, const char *what) {
    if (n > left(r))
        return pi_err(PAGEIN_E_TRUNCATED, "%s at offset %zu needs %llu bytes, only %zu remain", what,
                      r->pos, (unsigned long long)n, left(r));
    return 0;
}

static int rd_u32(struct rd *r, uint32_t *v, const char *what) {
    FORWARD_IF(need(r, 4, what));
    *v = pi_ld32(r->buf + r->pos, r->be);
    r->pos += 4;
    return 0;
}

static int rd_u64(struct rd *r, uint64_t *v, const char *what) {
    FORWARD_IF(need(r, 8, what));
    *v = pi_ld64(r->buf + r->pos, r->be);
    r->pos += 8;
    return 0;
}

/* A count, length or dimension: u32 in version 1, u64 after. */
static int rd_len(struct rd *r, uint64_t *v, const char *what) {
    if (!r->v1) return rd_u64(r, v, what);
    uint32_t x;
    FORWARD_IF(rd_u32(r, &x, what));
    *v = x;
    return 0;
}

static int rd_str(struct rd *r, const char **s, uint64_t *n, const char *what) {
    size_t at = r->pos;
    FORWARD_IF(rd_len(r, n, what));
    if (*n > PI_GGUF_MAX_STRING)
        return pi_err(PAGEIN_E_LIMIT, "%s at offset %zu has length %llu, above the 1 GiB limit", what, at,
                      (unsigned long long)*n);
    FORWARD_IF(need(r, *n, what));
    *s = (const char *)r->buf + r->pos;
    r->pos += (size_t)*n;
    return 0;
}

/* Skips (validating) one value of the given type. Arrays nest up to
 * PI_GGUF_MAX_DEPTH. */
static int skip_value(struct rd *r, uint32_t type, int depth);

/* Reads an array header and its elements. On success *elem_type, *count,
 * *raw_off (offset of the first element) are set; if idx is non-NULL and
 * the elements are strings or arrays, idx[i] receives the offset of
 * element i relative to *raw_off. idx must then hold *count entries: the
 * caller passes a callback-free allocation through alloc_idx. */
static int read_array(struct rd *r, int depth, uint32_t *elem_type, uint64_t *count, size_t *raw_off,
                      struct pi_arena *arena, const uint64_t **idx_out) {
    size_t at = r->pos;
    if (depth >= PI_GGUF_MAX_DEPTH)
        return pi_err(PAGEIN_E_LIMIT, "array at offset %zu nested deeper than %d", at, PI_GGUF_MAX_DEPTH);
    FORWARD_IF(rd_u32(r, elem_type, "array element type"));
    if (*elem_type >= 13)
        return pi_err(PAGEIN_E_BAD_TYPE, "array at offset %zu has invalid element type %u", at, *elem_type);
    FORWARD_IF(rd_len(r, count, "array count"));
    if (*count > PI_GGUF_MAX_ARRAY)
        return pi_err(PAGEIN_E_LIMIT, "array at offset %zu has %llu elements, above the 2^30 limit", at,
                      (unsigned long long)*count);
    *raw_off = r->pos;
    uint32_t es = pi_gguf_type_size(*elem_type);
    uint64_t lw = r->v1 ? 4 : 8;
    if (es) {
        FORWARD_IF(need(r, *count * es, "array elements"));
        r->pos += (size_t)(*count * es);
        return 0;
    }
    /* Variable-sized elements: each takes at least its length field (and a
     * nested array its type too), which bounds count before any work. */
    uint64_t minsz = *elem_type == PAGEIN_META_STRING ? lw : 4 + lw;
    FORWARD_IF(need(r, *count * minsz, "array elements"));
    uint64_t *idx = NULL;
    if (idx_out && *count) {
        idx = pi_arena_alloc(arena, (size_t)*count * sizeof *idx);
        if (!idx) return pi_err(-ENOMEM, "out of memory indexing an array of %llu elements",
                                (unsigned long long)*count);
    }
    if (*elem_type == PAGEIN_META_STRING) {
        /* The hot loop for vocabularies: 150,000 strings and more. */
        const uint8_t *b = r->buf;
        size_t pos = r->pos, len = r->len, base = *raw_off;
        for (uint64_t i = 0; i < *count; i++) {
            if (len - pos < lw) {
                r->pos = pos;
                return need(r, lw, "string array element length");
            }
            uint64_t n = r->v1 ? pi_ld32(b + pos, r->be) : pi_ld64(b + pos, r->be);
            if (idx) idx[i] = pos - base;
            pos += lw;
            if (n > PI_GGUF_MAX_STRING || n > len - pos) {
                r->pos = pos - lw;
                if (n > PI_GGUF_MAX_STRING)
                    return pi_err(PAGEIN_E_LIMIT, "string array element %llu at offset %zu has length %llu, above the 1 GiB limit",
                                  (unsigned long long)i, r->pos, (unsigned long long)n);
                return pi_err(PAGEIN_E_TRUNCATED, "string array element %llu at offset %zu has length %llu, only %zu bytes remain",
                              (unsigned long long)i, r->pos, (unsigned long long)n, len - pos);
            }
            pos += (size_t)n;
        }
        r->pos = pos;
    } else {
        for (uint64_t i = 0; i < *count; i++) {
            if (idx) idx[i] = r->pos - *raw_off;
            FORWARD_IF(skip_value(r, PAGEIN_META_ARRAY, depth + 1));
        }
    }
    if (idx_out) *idx_out = idx;
    return 0;
}

static int skip_value(struct rd *r, uint32_t type, int depth) {
    if (type >= 13) return pi_err(PAGEIN_E_BAD_TYPE, "invalid value type %u at offset %zu", type, r->pos);
    uint32_t ts = pi_gguf_type_size(type);
    if (ts) {
        FORWARD_IF(need(r, ts, "value"));
        r->pos += ts;
        return 0;
    }
    if (type == PAGEIN_META_STRING) {
        const char *s;
        uint64_t n;
        return rd_str(r, &s, &n, "string");
    }
    uint32_t et;
    uint64_t count;
    size_t raw;
    return read_array(r, depth, &et, &count, &raw, NULL, NULL);
}

/* Decodes a scalar at p into m->v. */
static void decode_scalar(pagein_meta *m, const uint8_t *p, int be) {
    switch (m->type) {
    case PAGEIN_META_U8: m->v.u = p[0]; break;
    case PAGEIN_META_I8: m->v.i = (int8_t)p[0]; break;
    case PAGEIN_META_U16: m->v.u = pi_ld16(p, be); break;
    case PAGEIN_META_I16: m->v.i = (int16_t)pi_ld16(p, be); break;
    case PAGEIN_META_U32: m->v.u = pi_ld32(p, be); break;
    case PAGEIN_META_I32: m->v.i = (int32_t)pi_ld32(p, be); break;
    case PAGEIN_META_U64: m->v.u = pi_ld64(p, be); break;
    case PAGEIN_META_I64: m->v.i = (int64_t)pi_ld64(p, be); break;
    case PAGEIN_META_BOOL: m->v.b = p[0] != 0; break; /* gguf.cpp: non-zero is true */
    case PAGEIN_META_F32: {
        uint32_t u = pi_ld32(p, be);
        float f;
        memcpy(&f, &u, 4);
        m->v.f = f;
        break;
    }
    case PAGEIN_META_F64: {
        uint64_t u = pi_ld64(p, be);
        memcpy(&m->v.f, &u, 8);
        break;
    }
    default: break;
    }
}

/* Prints a name for messages: at most 64 bytes, non-printables as '?'. */
static void name_for_msg(char *out, size_t cap, const char *s, size_t n) {
    size_t j = 0;
    for (size_t i = 0; i < n && j + 4 < cap && i < 64; i++)
        out[j++] = (s[i] >= 32 && s[i] < 127) ? s[i] : '?';
    if (n > 64 && j + 4 < cap) out[j++] = '.', out[j++] = '.', out[j++] = '.';
    out[j] = 0;
}

static int err_ctx(int rc, const char *kind, const char *s, size_t n) {
    char nm[80], pre[128];
    name_for_msg(nm, sizeof nm, s, n);
    snprintf(pre, sizeof pre, "%s '%s'", kind, nm);
    pi_err_prefix(pre);
    return rc;
}

static int parse_kv(struct rd *r, struct pi_table *t, uint64_t i) {
    const char *key;
    uint64_t klen;
    size_t at = r->pos;
    FORWARD_IF(rd_str(r, &key, &klen, "metadata key"));
    if (klen == 0) return pi_err(PAGEIN_E_LIMIT, "metadata entry %llu at offset %zu has an empty key",
                                 (unsigned long long)i, at);
    uint32_t type;
    int rc = rd_u32(r, &type, "value type");
    if (rc < 0) return err_ctx(rc, "metadata key", key, klen);
    if (type >= 13)
        return err_ctx(pi_err(PAGEIN_E_BAD_TYPE, "invalid value type %u at offset %zu", type, r->pos - 4),
                       "metadata key", key, klen);
    pagein_meta *m = pi_table_add_meta(t, key, (size_t)klen);
    if (!m) return pi_err(-ENOMEM, "out of memory");
    m->type = (pagein_meta_type)type;
    uint32_t ts = pi_gguf_type_size(type);
    if (ts) {
        rc = need(r, ts, "value");
        if (rc < 0) return err_ctx(rc, "metadata key", key, klen);
        decode_scalar(m, r->buf + r->pos, r->be);
        r->pos += ts;
    } else if (type == PAGEIN_META_STRING) {
        const char *s;
        uint64_t n;
        rc = rd_str(r, &s, &n, "string value");
        if (rc < 0) return err_ctx(rc, "metadata key", key, klen);
        m->str = s;
        m->str_len = n;
    } else {
        uint32_t et;
        uint64_t count;
        size_t raw;
        const uint64_t *idx = NULL;
        rc = read_array(r, 0, &et, &count, &raw, &t->arena, &idx);
        if (rc < 0) return err_ctx(rc, "metadata key", key, klen);
        m->elem_type = (pagein_meta_type)et;
        m->count = count;
        m->raw = r->buf + raw;
        m->raw_len = r->pos - raw;
        struct pi_gguf_ext *x = t->ext;
        if (x && i < x->n) x->elem_off[i] = idx;
    }
    return 0;
}

/* Parses one tensor info and adds it (offset relative to the data section
 * for now). *expect is the running padded sum. */
static int parse_tinfo(struct rd *r, struct pi_table *t, uint64_t i, uint32_t align, uint32_t flags,
                       uint64_t *expect) {
    const char *name;
    uint64_t nlen;
    size_t at = r->pos;
    FORWARD_IF(rd_str(r, &name, &nlen, "tensor name"));
    if (nlen >= PI_GGUF_MAX_NAME)
        return err_ctx(pi_err(PAGEIN_E_LIMIT, "tensor %llu at offset %zu: name of %llu bytes, the limit is %d",
                              (unsigned long long)i, at, (unsigned long long)nlen, PI_GGUF_MAX_NAME - 1),
                       "tensor", name, nlen);
    uint32_t nd;
    int rc = rd_u32(r, &nd, "n_dims");
    if (rc < 0) return err_ctx(rc, "tensor", name, nlen);
    if (nd > PI_GGUF_MAX_DIMS)
        return err_ctx(pi_err(PAGEIN_E_LIMIT, "n_dims %u at offset %zu, the limit is %d", nd, r->pos - 4,
                              PI_GGUF_MAX_DIMS),
                       "tensor", name, nlen);
    uint64_t ne[PI_GGUF_MAX_DIMS], shape[PI_GGUF_MAX_DIMS];
    uint64_t nel = 1;
    bool zero = false;
    for (uint32_t d = 0; d < nd; d++) {
        rc = rd_len(r, &ne[d], "dimension");
        if (rc < 0) return err_ctx(rc, "tensor", name, nlen);
        if (ne[d] > (uint64_t)INT64_MAX)
            return err_ctx(pi_err(PAGEIN_E_BAD_TENSOR_INFO, "dimension %u is negative (%lld)", d,
                                  (long long)ne[d]),
                           "tensor", name, nlen);
        if (ne[d] == 0) zero = true;
    }
    for (uint32_t d = 0; d < nd && !zero; d++)
        if (pi_mul_overflow(nel, ne[d], &nel) || nel > (uint64_t)INT64_MAX)
            return err_ctx(pi_err(PAGEIN_E_OVERFLOW, "element count overflows int64"), "tensor", name, nlen);
    if (zero) nel = 0;
    uint32_t gt;
    rc = rd_u32(r, &gt, "tensor type");
    if (rc < 0) return err_ctx(rc, "tensor", name, nlen);
    pagein_dtype dt = pagein_dtype_from_gguf(gt);
    if (dt == PAGEIN_DTYPE_INVALID)
        return err_ctx(pi_err(PAGEIN_E_BAD_DTYPE, "ggml type id %u at offset %zu is removed or unknown", gt,
                              r->pos - 4),
                       "tensor", name, nlen);
    const pagein_dtype_info *di = pagein_dtype_get(dt);
    uint64_t off;
    rc = rd_u64(r, &off, "tensor offset");
    if (rc < 0) return err_ctx(rc, "tensor", name, nlen);
    /* Size. ggml requires ne[0] % blck == 0 and sizes by rows; pagein needs
     * only nelements % blck == 0, which gives the same size whenever ggml
     * accepts the tensor and the old (pre-2024) size otherwise. */
    uint64_t nbytes;
    if (nel % di->block_elems)
        return err_ctx(pi_err(PAGEIN_E_BAD_TENSOR_INFO,
                              "%llu elements (ne[0] = %llu) are not a multiple of %s's block of %u",
                              (unsigned long long)nel, (unsigned long long)(nd ? ne[0] : 1), di->name,
                              di->block_elems),
                       "tensor", name, nlen);
    if (pi_mul_overflow(nel / di->block_elems, di->block_bytes, &nbytes))
        return err_ctx(pi_err(PAGEIN_E_OVERFLOW, "byte size of %llu %s elements overflows",
                              (unsigned long long)nel, di->name),
                       "tensor", name, nlen);
    PI_UNUSED(flags);
    if (off != *expect)
        return err_ctx(pi_err(PAGEIN_E_BAD_OFFSET,
                              "offset %llu, expected %llu (the running sum of the preceding tensors' sizes padded to %u)",
                              (unsigned long long)off, (unsigned long long)*expect, align),
                       "tensor", name, nlen);
    uint64_t padded = pi_align_up(nbytes, align);
    if (padded < nbytes || pi_add_overflow(*expect, padded, expect))
        return err_ctx(pi_err(PAGEIN_E_OVERFLOW, "data section size overflows"), "tensor", name, nlen);
    for (uint32_t d = 0; d < nd; d++) shape[d] = ne[nd - 1 - d];
    pagein_tensor *tr = pi_table_add(t, name, (size_t)nlen, dt, nd, shape, off, nbytes);
    if (!tr) return pi_err(-ENOMEM, "out of memory");
    tr->nelements = nel;
    if (r->be) tr->flags |= PAGEIN_TENSOR_SWAPPED;
    return 0;
}

int pi_gguf_parse(const uint8_t *buf, size_t avail, uint64_t size, uint32_t flags, struct pi_table *t) {
    /* The metadata and tensor infos are read from the avail bytes of buf
     * (reading past them is PAGEIN_E_TRUNCATED: the caller grows the
     * prefix); tensor extents are checked against the file size. */
    uint64_t len = size;
    struct rd r = {buf, avail, 0, 0, 0};
    if (avail < 4 || memcmp(buf, "GGUF", 4) != 0)
        return pi_err(avail < 4 ? PAGEIN_E_TRUNCATED : PAGEIN_E_BAD_MAGIC, "not a GGUF file (magic)");
    r.pos = 4;
    uint32_t version;
    FORWARD_IF(rd_u32(&r, &version, "version"));
    /* No byte-order flag exists: a version with its low 16 bits zero can
     * only be a small number written in the other byte order. */
    if (version && (version & 0xffffu) == 0) {
        r.be = 1;
        version = pi_ld32(buf + 4, 1);
    }
    if (version < 1 || version > 3)
        return pi_err(PAGEIN_E_BAD_VERSION, "GGUF version %u (pagein reads 1, 2 and 3)", version);
    r.v1 = version == 1;
    uint64_t n_tensors, n_kv;
    FORWARD_IF(rd_len(&r, &n_tensors, "tensor count"));
    FORWARD_IF(rd_len(&r, &n_kv, "metadata count"));
    /* Smallest possible entries: a key of one byte + type + 1-byte value;
     * a tensor info with a 1-byte name, no dims, type and offset. */
    uint64_t lw = r.v1 ? 4 : 8;
    uint64_t min_kv = lw + 1 + 4 + 1, min_ti = lw + 1 + 4 + 4 + 8;
    if (n_kv > left(&r) / min_kv)
        return pi_err(PAGEIN_E_TRUNCATED, "metadata count %llu cannot fit in the %zu bytes that remain",
                      (unsigned long long)n_kv, left(&r));
    if (n_tensors > left(&r) / min_ti || n_tensors > UINT32_MAX - 1)
        return pi_err(PAGEIN_E_TRUNCATED, "tensor count %llu cannot fit in the %zu bytes that remain",
                      (unsigned long long)n_tensors, left(&r));
    t->version = version;
    t->big_endian = r.be;
    t->alignment = PI_GGUF_DEFAULT_ALIGNMENT;
    if (n_kv) {
        struct pi_gguf_ext *x = pi_arena_alloc(&t->arena, sizeof *x);
        if (!x) return pi_err(-ENOMEM, "out of memory");
        x->elem_off = pi_arena_alloc(&t->arena, (size_t)n_kv * sizeof *x->elem_off);
        if (!x->elem_off) return pi_err(-ENOMEM, "out of memory");
        memset(x->elem_off, 0, (size_t)n_kv * sizeof *x->elem_off);
        x->n = (size_t)n_kv;
        t->ext = x;
        t->ext_free = NULL;
    }
    bool have_align = false;
    for (uint64_t i = 0; i < n_kv; i++) {
        FORWARD_IF(parse_kv(&r, t, i));
        const pagein_meta *m = &t->meta[t->nmeta - 1];
        if (m->key_len == 17 && memcmp(m->key, "general.alignment", 17) == 0) {
            if (have_align)
                return pi_err(PAGEIN_E_DUPLICATE, "duplicate metadata key 'general.alignment'");
            have_align = true;
            if (m->type != PAGEIN_META_U32)
                return pi_err(PAGEIN_E_BAD_ALIGNMENT, "general.alignment has type %s, must be u32",
                              pi_gguf_type_name(m->type));
            if (m->v.u == 0 || (m->v.u & (m->v.u - 1)))
                return pi_err(PAGEIN_E_BAD_ALIGNMENT, "general.alignment is %llu, must be a non-zero power of two",
                              (unsigned long long)m->v.u);
            t->alignment = (uint32_t)m->v.u;
        }
    }
    uint64_t expect = 0;
    for (uint64_t i = 0; i < n_tensors; i++) FORWARD_IF(parse_tinfo(&r, t, i, t->alignment, flags, &expect));
    /* gguf.cpp pads to the alignment only when there are tensors; vocab-only
     * files end right after the metadata. */
    uint64_t ds = r.pos;
    if (n_tensors) {
        ds = pi_align_up(r.pos, t->alignment);
        if (ds > len)
            return pi_err(PAGEIN_E_TRUNCATED, "data section starts at %llu, beyond the end of the file (%llu bytes)",
                          (unsigned long long)ds, (unsigned long long)len);
    }
    t->data_start = ds;
    t->header_len = ds;
    for (size_t i = 0; i < t->n; i++) {
        pagein_tensor *tr = &t->t[i];
        uint64_t abs, end;
        if (pi_add_overflow(ds, tr->offset, &abs) || pi_add_overflow(abs, tr->nbytes, &end) || end > len)
            return pi_err(PAGEIN_E_TRUNCATED, "tensor '%s': data [%llu, +%llu) ends beyond the end of the file (%llu bytes)",
                          tr->name, (unsigned long long)ds + tr->offset, (unsigned long long)tr->nbytes,
                          (unsigned long long)len);
        tr->offset = abs;
        const pagein_dtype_info *di = pagein_dtype_get(tr->dtype);
        if (di->bits > 8 && abs % (di->bits / 8)) tr->flags |= PAGEIN_TENSOR_UNALIGNED;
    }
    return 0;
}

/* ---- the format table's row ------------------------------------------------ */

static int gguf_detect(const uint8_t *buf, size_t len, uint64_t size) {
    PI_UNUSED(size);
    return len >= 4 && memcmp(buf, "GGUF", 4) == 0;
}

static const char *const gguf_suffixes[] = {".gguf", NULL};

const struct pi_format pi_format_gguf = {
    .id = PAGEIN_FORMAT_GGUF,
    .name = "gguf",
    .detect = gguf_detect,
    .parse = pi_gguf_parse,
    .header_size = NULL, /* known only by parsing */
    .suffixes = gguf_suffixes,
    .first_read = 0,
    .whole_file = 0,
    .header_read = PI_HEADER_GROW,
    .dir_rank = 20,
    .split_paths = pi_gguf_split_paths,
    .split_check = pi_gguf_split_check,
    .plural = "GGUF files",
    .title = "GGUF",
};
