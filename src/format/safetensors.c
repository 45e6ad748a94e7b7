/* safetensors.c - the safetensors header parser.
 *
 * Implements every reader rule of ../shared/specs/SAFETENSORS.md section 2
 * in the Rust crate's order (SafeTensors::read_metadata, then
 * Metadata::validate), so that each malformed file gets the error the
 * crate gives, mapped to a PAGEIN_E_* code (docs/FORMAT-SAFETENSORS.md has
 * the table). On top of the crate: duplicate keys are rejected, nesting and
 * sizes are limited, and PAGEIN_OPEN_LENIENT allows trailing bytes after
 * the data (fastsafetensors' rule).
 *
 * The header is walked once with the pull reader of json.c. A fast path
 * takes the compact entry official writers emit; anything else goes
 * through the general reader, which accepts exactly the same language
 * (tests/test_safetensors.c checks that they agree). Records go straight
 * into the tensor table (names copied to its arena), then are sorted by
 * (begin, end) unless already in order, validated, and turned into
 * absolute offsets. Memory is proportional to the header: one record per
 * tensor (the count of '{' bounds it, so the array is allocated once). */
#include "format.h"
#include "../core/endian.h"

#include <stdlib.h>

#define ST_MAX_HEADER 100000000ull /* the crate's MAX_HEADER_SIZE */

/* While parsing, each tensor record of the table holds its relative
 * data_offsets: `offset` = BEGIN, `nbytes` = END, `index` = position in the
 * header. After sorting and validation they become absolute offset and byte
 * length. Parsing straight into the table keeps memory at one record per
 * tensor (no intermediate entry array). */
struct st_parse {
    uint64_t *dims; /* the current entry's shape (reused) */
    size_t dimcap;
    uint32_t *seen; /* open-addressing name set, hcap slots: record + 1 */
    size_t hcap;
};

static void st_parse_free(struct st_parse *p) {
    pi_free(p->dims);
    pi_free(p->seen);
}

/* Printable, truncated copy of a name for messages (names may hold NUL). */
static const char *shown(const char *s, size_t n, char *buf, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < cap; i++) buf[k++] = s[i] ? s[i] : '?';
    if (k + 4 >= cap && n > k) memcpy(buf + k, "...", 3), k += 3;
    buf[k] = 0;
    return buf;
}

/* Maps errors of value accessors onto the crate's categories: a value of
 * the wrong type or an integer that does not fit is a deserialization
 * error (serde), i.e. PAGEIN_E_BAD_JSON. */
static int as_schema_error(int rc, const char *name, size_t name_len, const char *what) {
    if (rc == PAGEIN_E_BAD_TYPE || rc == PAGEIN_E_OVERFLOW) {
        char nb[128];
        return pi_err(PAGEIN_E_BAD_JSON, "tensor '%s': %s", shown(name, name_len, nb, sizeof nb), what);
    }
    return rc;
}

static int read_metadata(struct pi_json *j, struct pi_table *t) {
    int type = pi_json_peek(j);
    if (type < 0) return type;
    if (type == PI_JSON_NULL) return pi_json_null(j); /* Option<HashMap>: null = absent */
    if (type != PI_JSON_OBJECT)
        return pi_err(PAGEIN_E_BAD_JSON, "__metadata__ must be an object of strings or null");
    FORWARD_IF(pi_json_enter(j, PI_JSON_OBJECT));
    const char *k;
    size_t kl;
    int rc;
    while ((rc = pi_json_next(j, &k, &kl)) > 0) {
        const char *v;
        size_t vl;
        rc = pi_json_string(j, &v, &vl);
        if (rc == PAGEIN_E_BAD_TYPE) {
            char b[128];
            return pi_err(PAGEIN_E_BAD_JSON, "__metadata__ value of '%s' is not a string",
                          shown(k, kl, b, sizeof b));
        }
        FORWARD_IF(rc);
        pagein_meta *m = pi_table_add_meta(t, k, kl);
        if (!m) return pi_err(-ENOMEM, "out of memory");
        char *copy = pi_arena_strndup(&t->arena, v, vl);
        if (!copy) return pi_err(-ENOMEM, "out of memory");
        m->type = PAGEIN_META_STRING;
        m->str = copy;
        m->str_len = vl;
    }
    return rc;
}

static bool key_is(const char *k, size_t kl, const char *lit) {
    size_t n = strlen(lit);
    return kl == n && memcmp(k, lit, n) == 0;
}

/* safetensors dtype names with their lengths, for a lookup without strlen
 * (names as in the Rust crate; the table test checks them against dtype.c). */
static const struct {
    const char *name;
    uint8_t len;
    pagein_dtype d;
} st_names[] = {
#define N(x) {#x, sizeof(#x) - 1, PAGEIN_DTYPE_##x}
    N(F32), N(BF16), N(F16), N(I64), N(I32), N(U8), N(I8), N(BOOL), N(F64), N(U16), N(I16), N(U32), N(U64),
    N(C64), N(F8_E4M3), N(F8_E5M2), N(F8_E8M0), N(F8_E4M3FNUZ), N(F8_E5M2FNUZ), N(F4), N(F6_E2M3), N(F6_E3M2),
#undef N
};

static pagein_dtype st_dtype(const char *s, size_t n) {
    for (size_t i = 0; i < sizeof st_names / sizeof st_names[0]; i++)
        if (st_names[i].len == n && memcmp(st_names[i].name, s, n) == 0) return st_names[i].d;
    return PAGEIN_DTYPE_INVALID;
}

static bool lit(const uint8_t *p, size_t *i, size_t n, const char *l, size_t ll) {
    if (n - *i < ll || memcmp(p + *i, l, ll) != 0) return false;
    *i += ll;
    return true;
}
#define LIT(s_) lit(p, &i, n, s_, sizeof(s_) - 1)

/* At most 19 digits (so no overflow), no leading zeros. */
static inline bool fast_u64(const uint8_t *p, size_t *ip, size_t n, uint64_t *v) {
    size_t i = *ip, s = i;
    uint64_t x = 0;
    while (i < n) {
        unsigned d = (unsigned)p[i] - '0';
        if (d > 9) break;
        x = x * 10 + d;
        i++;
    }
    if (i == s || i - s > 19 || (p[s] == '0' && i - s > 1)) return false;
    *ip = i;
    *v = x;
    return true;
}

/* Fast path for the compact form official writers emit:
 *     {"dtype":"X","shape":[d,...],"data_offsets":[b,e]}
 * Anything else (whitespace, another key order, escapes, unknown fields,
 * long numbers, unknown dtypes) returns false having consumed nothing, and
 * the general pull-reader path parses (or rejects) the entry. */
static bool fast_entry(struct pi_json *j, struct st_parse *p_, pagein_dtype *dtype, uint32_t *ndim, uint64_t off[2]) {
    const uint8_t *p = j->buf;
    size_t i = j->pos, n = j->len;
    if (!LIT("{\"dtype\":\"")) return false;
    size_t ds = i;
    while (i < n && i - ds < 16 && ((p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '_')) i++;
    pagein_dtype d = st_dtype((const char *)p + ds, i - ds);
    if (d == PAGEIN_DTYPE_INVALID || !LIT("\",\"shape\":[")) return false;
    uint32_t nd = 0;
    if (!LIT("]")) {
        for (;;) {
            uint64_t v;
            if (nd >= 1024 || !fast_u64(p, &i, n, &v)) return false;
            if (nd >= p_->dimcap && pi_grow((void **)&p_->dims, &p_->dimcap, nd + 1, sizeof *p_->dims) < 0) return false;
            p_->dims[nd++] = v;
            if (LIT("]")) break;
            if (!LIT(",")) return false;
        }
    }
    if (!LIT(",\"data_offsets\":[") || !fast_u64(p, &i, n, &off[0]) || !LIT(",") || !fast_u64(p, &i, n, &off[1]) ||
        !LIT("]}"))
        return false;
    j->pos = i;
    *dtype = d;
    *ndim = nd;
    return true;
}
#undef LIT

/* One tensor entry {"dtype":..., "shape":[...], "data_offsets":[b,e]}. */
static int read_entry(struct pi_json *j, struct st_parse *p, struct pi_table *t, const char *name,
                      size_t name_len) {
    char nb[128];
#define nm shown(name, name_len, nb, sizeof nb) /* only formatted on errors */
    pagein_dtype dtype = PAGEIN_DTYPE_INVALID;
    uint32_t ndim = 0;
    uint64_t off[2] = {0, 0};
    int rc;
    if (fast_entry(j, p, &dtype, &ndim, off)) goto add;
    rc = pi_json_enter(j, PI_JSON_OBJECT);
    if (rc == PAGEIN_E_BAD_TYPE) return pi_err(PAGEIN_E_BAD_JSON, "tensor '%s': entry is not an object", nm);
    FORWARD_IF(rc);
    bool have_dtype = false, have_shape = false, have_off = false;
    const char *k;
    size_t kl;
    while ((rc = pi_json_next(j, &k, &kl)) > 0) {
        if (key_is(k, kl, "dtype")) {
            if (have_dtype) return pi_err(PAGEIN_E_DUPLICATE, "tensor '%s': duplicate field 'dtype'", nm);
            have_dtype = true;
            const char *s;
            size_t sl;
            FORWARD_IF(as_schema_error(pi_json_string(j, &s, &sl), name, name_len, "dtype is not a string"));
            dtype = st_dtype(s, sl);
            const pagein_dtype_info *di = pagein_dtype_get(dtype);
            if (!di || !(di->flags & PAGEIN_DTYPE_F_SAFETENSORS)) {
                char db[64];
                return pi_err(PAGEIN_E_BAD_DTYPE, "tensor '%s': unknown dtype '%s'", nm,
                              shown(s, sl, db, sizeof db));
            }
        } else if (key_is(k, kl, "shape")) {
            if (have_shape) return pi_err(PAGEIN_E_DUPLICATE, "tensor '%s': duplicate field 'shape'", nm);
            have_shape = true;
            FORWARD_IF(as_schema_error(pi_json_enter(j, PI_JSON_ARRAY), name, name_len, "shape is not an array"));
            while ((rc = pi_json_next(j, NULL, NULL)) > 0) {
                uint64_t v;
                FORWARD_IF(as_schema_error(pi_json_u64(j, &v), name, name_len,
                                           "shape element is not a non-negative 64-bit integer"));
                RETURN_IF(ndim >= 1024, PAGEIN_E_LIMIT, "tensor '%s': more than 1024 dimensions", nm);
                FORWARD_IF(pi_grow((void **)&p->dims, &p->dimcap, ndim + 1, sizeof *p->dims));
                p->dims[ndim++] = v;
            }
            FORWARD_IF(rc);
        } else if (key_is(k, kl, "data_offsets")) {
            if (have_off) return pi_err(PAGEIN_E_DUPLICATE, "tensor '%s': duplicate field 'data_offsets'", nm);
            have_off = true;
            FORWARD_IF(as_schema_error(pi_json_enter(j, PI_JSON_ARRAY), name, name_len, "data_offsets is not an array"));
            int cnt = 0;
            while ((rc = pi_json_next(j, NULL, NULL)) > 0) {
                RETURN_IF(cnt == 2, PAGEIN_E_BAD_JSON, "tensor '%s': data_offsets has more than 2 elements", nm);
                FORWARD_IF(as_schema_error(pi_json_u64(j, &off[cnt]), name, name_len,
                                           "data_offsets element is not a non-negative 64-bit integer"));
                cnt++;
            }
            FORWARD_IF(rc);
            RETURN_IF(cnt != 2, PAGEIN_E_BAD_JSON, "tensor '%s': data_offsets has %d elements, expected 2", nm, cnt);
        } else {
            /* serde ignores unknown fields (no deny_unknown_fields) */
            FORWARD_IF(pi_json_skip(j));
        }
    }
    FORWARD_IF(rc);
    RETURN_IF(!have_dtype, PAGEIN_E_BAD_JSON, "tensor '%s': missing field 'dtype'", nm);
    RETURN_IF(!have_shape, PAGEIN_E_BAD_JSON, "tensor '%s': missing field 'shape'", nm);
    RETURN_IF(!have_off, PAGEIN_E_BAD_JSON, "tensor '%s': missing field 'data_offsets'", nm);
add:
    RETURN_IF(t->n >= UINT32_MAX - 1, PAGEIN_E_LIMIT, "more than 2^32 tensors");
    uint32_t order = (uint32_t)t->n;
    pagein_tensor *r = pi_table_add(t, name, name_len, dtype, ndim, ndim ? p->dims : NULL, off[0], off[1]);
    if (!r) return pi_err(-ENOMEM, "out of memory building the tensor table");
    r->index = order;
    return 0;
#undef nm
}

/* (BEGIN, END, header position): BEGIN/END live in offset/nbytes while parsing. */
static int entry_cmp(const void *a, const void *b) {
    const pagein_tensor *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Rejects duplicate tensor names before validation, so a duplicate is
 * reported as such rather than as the overlap it usually causes. */
static int check_duplicates(struct st_parse *p, const struct pi_table *t) {
    p->hcap = 16;
    while (p->hcap < t->n * 2) p->hcap *= 2;
    p->seen = pi_calloc(p->hcap, sizeof *p->seen);
    if (!p->seen) return pi_err(-ENOMEM, "out of memory");
    for (size_t i = 0; i < t->n; i++) {
        const pagein_tensor *e = &t->t[i];
        size_t s = pi_hash_bytes(e->name, e->name_len) & (p->hcap - 1);
        while (p->seen[s]) {
            const pagein_tensor *o = &t->t[p->seen[s] - 1];
            if (o->name_len == e->name_len && memcmp(o->name, e->name, e->name_len) == 0) {
                char nb[128];
                return pi_err(PAGEIN_E_DUPLICATE, "duplicate tensor name '%s'",
                              shown(e->name, e->name_len, nb, sizeof nb));
            }
            s = (s + 1) & (p->hcap - 1);
        }
        p->seen[s] = (uint32_t)i + 1;
    }
    return 0;
}

static int parse_header(struct pi_json *j, struct st_parse *p, struct pi_table *t) {
    int rc = pi_json_enter(j, PI_JSON_OBJECT);
    if (rc == PAGEIN_E_BAD_TYPE) return pi_err(PAGEIN_E_BAD_JSON, "header is not a JSON object");
    FORWARD_IF(rc);
    bool have_meta = false;
    const char *k;
    size_t kl;
    while ((rc = pi_json_next(j, &k, &kl)) > 0) {
        if (key_is(k, kl, "__metadata__")) {
            RETURN_IF(have_meta, PAGEIN_E_DUPLICATE, "duplicate key '__metadata__'");
            have_meta = true;
            FORWARD_IF(read_metadata(j, t));
        } else {
            FORWARD_IF(read_entry(j, p, t, k, kl));
        }
    }
    FORWARD_IF(rc);
    return pi_json_finish(j);
}

int pi_safetensors_parse(const uint8_t *buf, size_t avail, uint64_t size, uint32_t flags, struct pi_table *t) {
    /* avail bytes of the file are in buf; the file has size bytes. Only the
     * header is read: with avail < 8 + N the caller grows the prefix
     * (PAGEIN_E_TRUNCATED) and calls again. */
    uint64_t len = size;
    /* 1-3: the length prefix */
    RETURN_IF(len < 8, PAGEIN_E_HEADER_TOO_SMALL, "file is %llu bytes, expected at least 8", (unsigned long long)len);
    RETURN_IF(avail < 8, PAGEIN_E_TRUNCATED, "header prefix: %zu of 8 bytes available", avail);
    uint64_t n = pi_le64(buf);
    RETURN_IF(n > ST_MAX_HEADER, PAGEIN_E_HEADER_TOO_LARGE, "header length %llu exceeds the limit of %llu",
              (unsigned long long)n, ST_MAX_HEADER);
    RETURN_IF(n > len - 8, PAGEIN_E_HEADER_LENGTH, "header length %llu needs %llu bytes, file has %llu",
              (unsigned long long)n, (unsigned long long)n + 8, (unsigned long long)len);
    RETURN_IF(n > avail - 8, PAGEIN_E_TRUNCATED, "header prefix: %zu of %llu bytes available", avail,
              (unsigned long long)n + 8);
    const uint8_t *hdr = buf + 8;
    size_t hlen = (size_t)n;
    /* 4: UTF-8 over the whole header, before any JSON */
    size_t bad = 0;
    RETURN_IF(!pi_utf8_valid(hdr, hlen, &bad), PAGEIN_E_BAD_UTF8, "header byte %zu (file offset %zu) is not valid UTF-8",
              bad, bad + 8);

    /* 5: JSON into table records and metadata. The number of '{' bounds
     * the number of tensors, so the record array is allocated once. */
    struct pi_json j;
    struct st_parse p;
    memset(&p, 0, sizeof p);
    pi_json_init(&j, hdr, hlen, PI_JSON_MAX_DEPTH);
    j.utf8_checked = true;
    int rc = 0;
    bool parsed = false;
    size_t braces = 0;
    for (const uint8_t *q = hdr, *e = hdr + hlen; (q = memchr(q, '{', (size_t)(e - q))) != NULL; q++) braces++;
    if (braces > t->cap) {
        pagein_tensor *nt = pi_realloc(t->t, braces * sizeof *nt);
        if (!nt) {
            rc = pi_err(-ENOMEM, "out of memory building the tensor table");
            goto out;
        }
        t->t = nt;
        t->cap = braces;
    }
    rc = parse_header(&j, &p, t);
    if (rc < 0) goto out;
    parsed = true;

    /* 6-7: sorted by (begin, end), contiguous from 0, sizes match dtype x
     * shape. Official files are already in offset order: skip the sort. */
    bool sorted = true;
    for (size_t i = 1; i < t->n && sorted; i++) sorted = entry_cmp(&t->t[i - 1], &t->t[i]) < 0;
    if (!sorted) qsort(t->t, t->n, sizeof *t->t, entry_cmp);
    uint64_t start = 0;
    for (size_t i = 0; i < t->n; i++) {
        const pagein_tensor *e = &t->t[i];
        uint64_t begin = e->offset, end = e->nbytes;
        char nb[128];
#define nm shown(e->name, e->name_len, nb, sizeof nb)
        if (begin != start || end < begin) {
            rc = pi_err(PAGEIN_E_BAD_OFFSET, "tensor '%s': data_offsets [%llu,%llu], expected to begin at %llu%s",
                        nm, (unsigned long long)begin, (unsigned long long)end, (unsigned long long)start,
                        end < begin ? " and end >= begin" : "");
            goto out;
        }
        start = end;
        uint64_t ne = 1, nbits;
        const pagein_dtype_info *di = pagein_dtype_get(e->dtype);
        for (uint32_t d = 0; d < e->ndim; d++) {
            if (pi_mul_overflow(ne, e->shape[d], &ne)) {
                rc = pi_err(PAGEIN_E_OVERFLOW, "tensor '%s': element count overflows 64 bits at dimension %u",
                            nm, d);
                goto out;
            }
        }
        if (pi_mul_overflow(ne, di->bits, &nbits)) {
            rc = pi_err(PAGEIN_E_OVERFLOW, "tensor '%s': %llu elements of %s overflow 64 bits", nm,
                        (unsigned long long)ne, di->name);
            goto out;
        }
        if (nbits % 8) {
            rc = pi_err(PAGEIN_E_MISALIGNED_SLICE, "tensor '%s': %llu elements of %s are %llu bits, not whole bytes",
                        nm, (unsigned long long)ne, di->name, (unsigned long long)nbits);
            goto out;
        }
        if (end - begin != nbits / 8) {
            rc = pi_err(PAGEIN_E_BAD_TENSOR_INFO,
                        "tensor '%s': data_offsets [%llu,%llu] cover %llu bytes, expected %llu (%s, %llu elements)",
                        nm, (unsigned long long)begin, (unsigned long long)end, (unsigned long long)(end - begin),
                        (unsigned long long)(nbits / 8), di->name, (unsigned long long)ne);
            goto out;
        }
#undef nm
    }

    /* 8: the data ends exactly at the end of the file (lenient: within it) */
    uint64_t data_start = 8 + n, need;
    if (pi_add_overflow(start, data_start, &need) || need > len ||
        (!(flags & PAGEIN_OPEN_LENIENT) && need != len)) {
        rc = pi_err(PAGEIN_E_INCOMPLETE, "data ends at file offset %llu (data start %llu + %llu), file is %llu bytes%s",
                    (unsigned long long)(start + data_start), (unsigned long long)data_start,
                    (unsigned long long)start, (unsigned long long)len,
                    (flags & PAGEIN_OPEN_LENIENT) ? "" : "; strict mode needs them equal");
        goto out;
    }

    /* relative [begin, end) -> absolute offset and length, in file order */
    t->data_start = data_start;
    t->header_len = n;
    for (size_t i = 0; i < t->n; i++) {
        pagein_tensor *r = &t->t[i];
        r->nbytes -= r->offset;
        r->offset += data_start;
        const pagein_dtype_info *di = pagein_dtype_get(r->dtype);
        uint64_t esz = di->bits >= 8 ? di->bits / 8 : 1;
        if (r->offset % esz) r->flags |= PAGEIN_TENSOR_UNALIGNED;
    }
    rc = 0;
out:
    /* Duplicate names are reported as such, before any error they cause
     * (an overlap, a gap). Checked only on failure: on success
     * pi_table_finish() rejects duplicates with the same code. */
    if (rc < 0 && rc != -ENOMEM && parsed) {
        int drc = check_duplicates(&p, t);
        if (drc < 0) rc = drc;
    }
    pi_json_free(&j);
    st_parse_free(&p);
    return rc;
}

/* ---- the format table's row ------------------------------------------------ */

static int st_detect(const uint8_t *buf, size_t len, uint64_t size) {
    /* u64 header length N with 8 + N inside the file, then the JSON object
     * (the crate accepts leading whitespace before '{'). */
    if (len < 9) return 0;
    uint64_t n = pi_le64(buf);
    if (n < 2 || n > size - 8) return 0;
    for (size_t i = 8; i < len && i < 8 + n; i++) {
        if (buf[i] == '{') return 1;
        if (buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\n' && buf[i] != '\r') return 0;
    }
    return 0;
}

static uint64_t st_header_size(const uint8_t *buf, size_t avail, uint64_t size) {
    if (avail < 8) return 0;
    uint64_t n = pi_le64(buf);
    return n <= size - 8 ? 8 + n : 0; /* a bad length: the parser says so */
}

static const char *const st_suffixes[] = {".safetensors", NULL};

const struct pi_format pi_format_safetensors = {
    .id = PAGEIN_FORMAT_SAFETENSORS,
    .name = "safetensors",
    .detect = st_detect,
    .parse = pi_safetensors_parse,
    .header_size = st_header_size,
    .suffixes = st_suffixes,
    .first_read = 64u << 10,
    .whole_file = 0,
    .header_read = PI_HEADER_EXTENT,
    .dir_rank = 10,
    .plural = "safetensors files",
    .title = "safetensors",
    .fallback = 1,
};
