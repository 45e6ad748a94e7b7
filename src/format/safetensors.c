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
 * The header is walked once with the pull reader of json.c into a flat
 * array of entries (names point into the header, or into the reader's
 * decode buffer when they hold escapes), sorted by (begin, end), validated,
 * and handed to the tensor table in file order. Memory is proportional to
 * the header: one entry per tensor, one shape array for all dimensions. */
#include "../internal.h"

#include <stdlib.h>

#define ST_MAX_HEADER 100000000ull /* the crate's MAX_HEADER_SIZE */

struct st_entry {
    const char *name;
    size_t name_len;
    pagein_dtype dtype;
    uint32_t ndim;
    size_t shape_at; /* index into the shared dims array */
    uint64_t begin, end;
    uint32_t order;  /* position in the header, for deterministic ties */
};

struct st_parse {
    struct st_entry *e;
    size_t n, cap;
    uint64_t *dims;
    size_t ndims, dimcap;
    uint32_t *seen; /* open-addressing name set, hcap slots: entry + 1 */
    size_t hcap;
};

static void st_parse_free(struct st_parse *p) {
    pi_free(p->e);
    pi_free(p->dims);
    pi_free(p->seen);
}

static int grow(void **ptr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 64;
    while (nc < need) nc *= 2;
    void *np = pi_realloc(*ptr, nc * elem);
    if (!np) return pi_err(-ENOMEM, "out of memory reading the safetensors header");
    *ptr = np;
    *cap = nc;
    return 0;
}

/* Maps errors of value accessors onto the crate's categories: a value of
 * the wrong type or an integer that does not fit is a deserialization
 * error (serde), i.e. PAGEIN_E_BAD_JSON. */
static int as_schema_error(int rc, const char *name, const char *what) {
    if (rc == PAGEIN_E_BAD_TYPE || rc == PAGEIN_E_OVERFLOW)
        return pi_err(PAGEIN_E_BAD_JSON, "tensor '%s': %s", name, what);
    return rc;
}

/* Printable, truncated copy of a name for messages (names may hold NUL). */
static const char *shown(const char *s, size_t n, char *buf, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < cap; i++) buf[k++] = s[i] ? s[i] : '?';
    if (k + 4 >= cap && n > k) memcpy(buf + k, "...", 3), k += 3;
    buf[k] = 0;
    return buf;
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

/* One tensor entry {"dtype":..., "shape":[...], "data_offsets":[b,e]}. */
static int read_entry(struct pi_json *j, struct st_parse *p, const char *name, size_t name_len) {
    char nb[128];
    const char *nm = shown(name, name_len, nb, sizeof nb);
    int rc = pi_json_enter(j, PI_JSON_OBJECT);
    if (rc == PAGEIN_E_BAD_TYPE) return pi_err(PAGEIN_E_BAD_JSON, "tensor '%s': entry is not an object", nm);
    FORWARD_IF(rc);
    FORWARD_IF(grow((void **)&p->e, &p->cap, p->n + 1, sizeof *p->e));
    struct st_entry *e = &p->e[p->n];
    memset(e, 0, sizeof *e);
    e->name = name;
    e->name_len = name_len;
    e->order = (uint32_t)p->n;
    e->shape_at = p->ndims;
    bool have_dtype = false, have_shape = false, have_off = false;
    const char *k;
    size_t kl;
    while ((rc = pi_json_next(j, &k, &kl)) > 0) {
        if (key_is(k, kl, "dtype")) {
            if (have_dtype) return pi_err(PAGEIN_E_DUPLICATE, "tensor '%s': duplicate field 'dtype'", nm);
            have_dtype = true;
            const char *s;
            size_t sl;
            FORWARD_IF(as_schema_error(pi_json_string(j, &s, &sl), nm, "dtype is not a string"));
            pagein_dtype d = pagein_dtype_from_name(s, sl);
            const pagein_dtype_info *di = pagein_dtype_get(d);
            if (!di || !(di->flags & PAGEIN_DTYPE_F_SAFETENSORS)) {
                char db[64];
                return pi_err(PAGEIN_E_BAD_DTYPE, "tensor '%s': unknown dtype '%s'", nm,
                              shown(s, sl, db, sizeof db));
            }
            e->dtype = d;
        } else if (key_is(k, kl, "shape")) {
            if (have_shape) return pi_err(PAGEIN_E_DUPLICATE, "tensor '%s': duplicate field 'shape'", nm);
            have_shape = true;
            FORWARD_IF(as_schema_error(pi_json_enter(j, PI_JSON_ARRAY), nm, "shape is not an array"));
            e->shape_at = p->ndims;
            while ((rc = pi_json_next(j, NULL, NULL)) > 0) {
                uint64_t v;
                FORWARD_IF(as_schema_error(pi_json_u64(j, &v), nm,
                                           "shape element is not a non-negative 64-bit integer"));
                FORWARD_IF(grow((void **)&p->dims, &p->dimcap, p->ndims + 1, sizeof *p->dims));
                p->dims[p->ndims++] = v;
                e->ndim++;
                RETURN_IF(e->ndim > 1024, PAGEIN_E_LIMIT, "tensor '%s': more than 1024 dimensions", nm);
            }
            FORWARD_IF(rc);
        } else if (key_is(k, kl, "data_offsets")) {
            if (have_off) return pi_err(PAGEIN_E_DUPLICATE, "tensor '%s': duplicate field 'data_offsets'", nm);
            have_off = true;
            FORWARD_IF(as_schema_error(pi_json_enter(j, PI_JSON_ARRAY), nm, "data_offsets is not an array"));
            uint64_t v[2];
            int cnt = 0;
            while ((rc = pi_json_next(j, NULL, NULL)) > 0) {
                RETURN_IF(cnt == 2, PAGEIN_E_BAD_JSON, "tensor '%s': data_offsets has more than 2 elements", nm);
                FORWARD_IF(as_schema_error(pi_json_u64(j, &v[cnt]), nm,
                                           "data_offsets element is not a non-negative 64-bit integer"));
                cnt++;
            }
            FORWARD_IF(rc);
            RETURN_IF(cnt != 2, PAGEIN_E_BAD_JSON, "tensor '%s': data_offsets has %d elements, expected 2", nm, cnt);
            e->begin = v[0];
            e->end = v[1];
        } else {
            /* serde ignores unknown fields (no deny_unknown_fields) */
            FORWARD_IF(pi_json_skip(j));
        }
    }
    FORWARD_IF(rc);
    RETURN_IF(!have_dtype, PAGEIN_E_BAD_JSON, "tensor '%s': missing field 'dtype'", nm);
    RETURN_IF(!have_shape, PAGEIN_E_BAD_JSON, "tensor '%s': missing field 'shape'", nm);
    RETURN_IF(!have_off, PAGEIN_E_BAD_JSON, "tensor '%s': missing field 'data_offsets'", nm);
    p->n++;
    return 0;
}

static int entry_cmp(const void *a, const void *b) {
    const struct st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Rejects duplicate tensor names before validation, so a duplicate is
 * reported as such rather than as the overlap it usually causes. */
static int check_duplicates(struct st_parse *p) {
    p->hcap = 16;
    while (p->hcap < p->n * 2) p->hcap *= 2;
    p->seen = pi_calloc(p->hcap, sizeof *p->seen);
    if (!p->seen) return pi_err(-ENOMEM, "out of memory");
    for (size_t i = 0; i < p->n; i++) {
        const struct st_entry *e = &p->e[i];
        size_t s = pi_hash_bytes(e->name, e->name_len) & (p->hcap - 1);
        while (p->seen[s]) {
            const struct st_entry *o = &p->e[p->seen[s] - 1];
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
            FORWARD_IF(read_entry(j, p, k, kl));
        }
    }
    FORWARD_IF(rc);
    return pi_json_finish(j);
}

int pi_safetensors_parse(const uint8_t *buf, size_t len, uint32_t flags, struct pi_table *t) {
    /* 1-3: the length prefix */
    RETURN_IF(len < 8, PAGEIN_E_HEADER_TOO_SMALL, "file is %zu bytes, expected at least 8", len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | buf[i];
    RETURN_IF(n > ST_MAX_HEADER, PAGEIN_E_HEADER_TOO_LARGE, "header length %llu exceeds the limit of %llu",
              (unsigned long long)n, ST_MAX_HEADER);
    RETURN_IF(n > len - 8, PAGEIN_E_HEADER_LENGTH, "header length %llu needs %llu bytes, file has %zu",
              (unsigned long long)n, (unsigned long long)n + 8, len);
    const uint8_t *hdr = buf + 8;
    size_t hlen = (size_t)n;
    /* 4: UTF-8 over the whole header, before any JSON */
    size_t bad = 0;
    RETURN_IF(!pi_utf8_valid(hdr, hlen, &bad), PAGEIN_E_BAD_UTF8, "header byte %zu (file offset %zu) is not valid UTF-8",
              bad, bad + 8);

    /* 5: JSON into entries and metadata */
    struct pi_json j;
    struct st_parse p;
    memset(&p, 0, sizeof p);
    pi_json_init(&j, hdr, hlen, PI_JSON_MAX_DEPTH);
    j.utf8_checked = true;
    int rc = parse_header(&j, &p, t);
    if (rc < 0) goto out;
    rc = check_duplicates(&p);
    if (rc < 0) goto out;

    /* 6-7: sorted by (begin, end), contiguous from 0, sizes match dtype x shape */
    if (p.n > 1) qsort(p.e, p.n, sizeof *p.e, entry_cmp);
    uint64_t start = 0;
    for (size_t i = 0; i < p.n; i++) {
        const struct st_entry *e = &p.e[i];
        char nb[128];
        const char *nm = shown(e->name, e->name_len, nb, sizeof nb);
        if (e->begin != start || e->end < e->begin) {
            rc = pi_err(PAGEIN_E_BAD_OFFSET, "tensor '%s': data_offsets [%llu,%llu], expected to begin at %llu%s",
                        nm, (unsigned long long)e->begin, (unsigned long long)e->end,
                        (unsigned long long)start, e->end < e->begin ? " and end >= begin" : "");
            goto out;
        }
        start = e->end;
        const uint64_t *shape = e->ndim ? p.dims + e->shape_at : NULL;
        uint64_t ne = 1, nbits;
        const pagein_dtype_info *di = pagein_dtype_get(e->dtype);
        for (uint32_t d = 0; d < e->ndim; d++) {
            if (pi_mul_overflow(ne, shape[d], &ne)) {
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
        if (e->end - e->begin != nbits / 8) {
            rc = pi_err(PAGEIN_E_BAD_TENSOR_INFO,
                        "tensor '%s': data_offsets [%llu,%llu] cover %llu bytes, expected %llu (%s, %llu elements)",
                        nm, (unsigned long long)e->begin, (unsigned long long)e->end,
                        (unsigned long long)(e->end - e->begin), (unsigned long long)(nbits / 8), di->name,
                        (unsigned long long)ne);
            goto out;
        }
    }

    /* 8: the data ends exactly at the end of the file (lenient: within it) */
    uint64_t data_start = 8 + n, need;
    if (pi_add_overflow(start, data_start, &need) || need > len ||
        (!(flags & PAGEIN_OPEN_LENIENT) && need != len)) {
        rc = pi_err(PAGEIN_E_INCOMPLETE, "data ends at file offset %llu (data start %llu + %llu), file is %zu bytes%s",
                    (unsigned long long)(start + data_start), (unsigned long long)data_start,
                    (unsigned long long)start, len,
                    (flags & PAGEIN_OPEN_LENIENT) ? "" : "; strict mode needs them equal");
        goto out;
    }

    /* the table, in file order, with absolute offsets */
    t->data_start = data_start;
    t->header_len = n;
    for (size_t i = 0; i < p.n; i++) {
        const struct st_entry *e = &p.e[i];
        uint64_t off = data_start + e->begin;
        pagein_tensor *r = pi_table_add(t, e->name, e->name_len, e->dtype, e->ndim, e->ndim ? p.dims + e->shape_at : NULL, off,
                                        e->end - e->begin);
        if (!r) {
            rc = pi_err(-ENOMEM, "out of memory building the tensor table");
            goto out;
        }
        const pagein_dtype_info *di = pagein_dtype_get(e->dtype);
        uint64_t esz = di->bits >= 8 ? di->bits / 8 : 1;
        if (off % esz) r->flags |= PAGEIN_TENSOR_UNALIGNED;
    }
    rc = 0;
out:
    pi_json_free(&j);
    st_parse_free(&p);
    return rc;
}
