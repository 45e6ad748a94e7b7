/* gguf_meta.c - typed metadata getters and array element access.
 *
 * Writers disagree on integer widths, so integer getters accept any integer
 * type and range-check. Arrays stay zero-copy: elements are decoded from the
 * mapping on each call (byte-swapped for big-endian files); string and
 * nested arrays of the file's own table have an element index built at
 * open, so element i is O(1). */
#include "format.h"
#include "../core/endian.h"

/* The value types' sizes (0: variable) and names: here, below the parser
 * (gguf.c), which reads them through these two calls. */
static const uint8_t type_size[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const type_names[13] = {"u8",  "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                           "bool", "string", "array", "u64", "i64", "f64"};

uint32_t pi_gguf_type_size(uint32_t type) { return type < 13 ? type_size[type] : 0; }
const char *pi_gguf_type_name(uint32_t type) { return type < 13 ? type_names[type] : "?"; }

const char *pagein_meta_type_name(pagein_meta_type t) {
    const char *n = pi_gguf_type_name((uint32_t)t);
    return strcmp(n, "?") == 0 ? "unknown" : n;
}

uint32_t pagein_tensor_ggml_ne(const pagein_tensor *t, uint64_t ne[4]) {
    for (int d = 0; d < 4; d++) ne[d] = 1;
    for (uint32_t d = 0; d < t->ndim && d < 4; d++) ne[d] = t->shape[t->ndim - 1 - d];
    return t->ndim;
}

static bool is_int(pagein_meta_type t) {
    switch (t) {
    case PAGEIN_META_U8: case PAGEIN_META_I8: case PAGEIN_META_U16: case PAGEIN_META_I16:
    case PAGEIN_META_U32: case PAGEIN_META_I32: case PAGEIN_META_U64: case PAGEIN_META_I64:
    case PAGEIN_META_BOOL: return true;
    default: return false;
    }
}
static bool is_signed(pagein_meta_type t) {
    return t == PAGEIN_META_I8 || t == PAGEIN_META_I16 || t == PAGEIN_META_I32 || t == PAGEIN_META_I64;
}

/* An integer value as (negative?, magnitude-ish) pair: signed values in *i
 * with *neg set when below zero, otherwise the value in *u. */
struct ival {
    bool neg;
    uint64_t u;
    int64_t i;
};

static struct ival scalar_ival(const pagein_meta *m) {
    struct ival v = {false, 0, 0};
    if (m->type == PAGEIN_META_BOOL) {
        v.u = m->v.b ? 1 : 0;
        v.i = (int64_t)v.u;
    } else if (is_signed(m->type)) {
        v.i = m->v.i;
        v.neg = v.i < 0;
        v.u = (uint64_t)v.i;
    } else {
        v.u = m->v.u;
        v.i = (int64_t)v.u;
    }
    return v;
}

static const char *kname(const pagein_meta *m) { return m->key ? m->key : "(array element)"; }

static int to_u64(const pagein_meta *m, struct ival v, uint64_t max, uint64_t *out) {
    if (v.neg)
        return pi_err(PAGEIN_E_OVERFLOW, "'%s' (%s) is %lld, below zero", kname(m),
                      pi_gguf_type_name(m->type), (long long)v.i);
    if (v.u > max)
        return pi_err(PAGEIN_E_OVERFLOW, "'%s' (%s) is %llu, above %llu", kname(m), pi_gguf_type_name(m->type),
                      (unsigned long long)v.u, (unsigned long long)max);
    *out = v.u;
    return 0;
}

static int to_i64(const pagein_meta *m, struct ival v, bool is_s, int64_t *out) {
    if (!is_s && v.u > (uint64_t)INT64_MAX)
        return pi_err(PAGEIN_E_OVERFLOW, "'%s' (%s) is %llu, above INT64_MAX", kname(m),
                      pi_gguf_type_name(m->type), (unsigned long long)v.u);
    *out = is_s ? v.i : (int64_t)v.u;
    return 0;
}

static int lookup(const pagein_file *f, const char *key, const pagein_meta **m) {
    if (!f || !key) return pi_err(PAGEIN_E_INVALID, "NULL file or key");
    *m = pi_table_find_meta(&f->tab, key, strlen(key));
    if (!*m) return pi_err(PAGEIN_E_NOT_FOUND, "no metadata key '%s'", key);
    return 0;
}

static int bad_type(const pagein_meta *m, const char *want) {
    return pi_err(PAGEIN_E_BAD_TYPE, "'%s' has type %s, not %s", kname(m), pi_gguf_type_name(m->type), want);
}

int pagein_meta_get_u64(const pagein_file *f, const char *key, uint64_t *out) {
    const pagein_meta *m;
    FORWARD_IF(lookup(f, key, &m));
    if (!is_int(m->type)) return bad_type(m, "an integer");
    return to_u64(m, scalar_ival(m), UINT64_MAX, out);
}

int pagein_meta_get_u32(const pagein_file *f, const char *key, uint32_t *out) {
    const pagein_meta *m;
    FORWARD_IF(lookup(f, key, &m));
    if (!is_int(m->type)) return bad_type(m, "an integer");
    uint64_t v;
    FORWARD_IF(to_u64(m, scalar_ival(m), UINT32_MAX, &v));
    *out = (uint32_t)v;
    return 0;
}

int pagein_meta_get_i64(const pagein_file *f, const char *key, int64_t *out) {
    const pagein_meta *m;
    FORWARD_IF(lookup(f, key, &m));
    if (!is_int(m->type)) return bad_type(m, "an integer");
    return to_i64(m, scalar_ival(m), is_signed(m->type), out);
}

int pagein_meta_get_f64(const pagein_file *f, const char *key, double *out) {
    const pagein_meta *m;
    FORWARD_IF(lookup(f, key, &m));
    if (m->type == PAGEIN_META_F32 || m->type == PAGEIN_META_F64) {
        *out = m->v.f;
        return 0;
    }
    if (!is_int(m->type)) return bad_type(m, "a number");
    struct ival v = scalar_ival(m);
    *out = is_signed(m->type) ? (double)v.i : (double)v.u;
    return 0;
}

int pagein_meta_get_bool(const pagein_file *f, const char *key, int *out) {
    const pagein_meta *m;
    FORWARD_IF(lookup(f, key, &m));
    if (!is_int(m->type)) return bad_type(m, "bool");
    *out = scalar_ival(m).u != 0;
    return 0;
}

int pagein_meta_get_str(const pagein_file *f, const char *key, const char **s, size_t *len) {
    const pagein_meta *m;
    FORWARD_IF(lookup(f, key, &m));
    if (m->type != PAGEIN_META_STRING) return bad_type(m, "string");
    *s = m->str;
    if (len) *len = (size_t)m->str_len;
    return 0;
}

int pagein_meta_get_array(const pagein_file *f, const char *key, const pagein_meta **out) {
    const pagein_meta *m;
    FORWARD_IF(lookup(f, key, &m));
    if (m->type != PAGEIN_META_ARRAY) return bad_type(m, "array");
    *out = m;
    return 0;
}

/* ---- array elements --------------------------------------------------- */

static int check_arr(const pagein_file *f, const pagein_meta *m, uint64_t i) {
    if (!f || !m) return pi_err(PAGEIN_E_INVALID, "NULL file or record");
    if (m->type != PAGEIN_META_ARRAY) return pi_err(PAGEIN_E_INVALID, "'%s' is not an array", kname(m));
    if (i >= m->count)
        return pi_err(PAGEIN_E_RANGE, "'%s': element %llu of %llu", kname(m), (unsigned long long)i,
                      (unsigned long long)m->count);
    return 0;
}

/* Decodes numeric element i into a scratch record (type = elem_type). */
static void elem_scalar(const pagein_file *f, const pagein_meta *m, uint64_t i, pagein_meta *e) {
    const uint8_t *p = (const uint8_t *)m->raw + i * pi_gguf_type_size(m->elem_type);
    int be = f->tab.big_endian;
    memset(e, 0, sizeof *e);
    e->key = m->key;
    e->type = m->elem_type;
    uint64_t u = 0;
    switch (pi_gguf_type_size(m->elem_type)) {
    case 1: u = p[0]; break;
    case 2: u = pi_ld16(p, be); break;
    case 4: u = pi_ld32(p, be); break;
    case 8: u = pi_ld64(p, be); break;
    default: break;
    }
    switch (m->elem_type) {
    case PAGEIN_META_I8: e->v.i = (int8_t)u; break;
    case PAGEIN_META_I16: e->v.i = (int16_t)u; break;
    case PAGEIN_META_I32: e->v.i = (int32_t)u; break;
    case PAGEIN_META_I64: e->v.i = (int64_t)u; break;
    case PAGEIN_META_BOOL: e->v.b = u != 0; break;
    case PAGEIN_META_F32: { uint32_t x = (uint32_t)u; float fl; memcpy(&fl, &x, 4); e->v.f = fl; break; }
    case PAGEIN_META_F64: memcpy(&e->v.f, &u, 8); break;
    default: e->v.u = u; break;
    }
}

/* Element i of an array of integers, as a scalar. */
static int int_elem(const pagein_file *f, const pagein_meta *m, uint64_t i, pagein_meta *e) {
    FORWARD_IF(check_arr(f, m, i));
    if (!is_int(m->elem_type))
        return pi_err(PAGEIN_E_BAD_TYPE, "'%s' is an array of %s, not of integers", kname(m),
                      pi_gguf_type_name(m->elem_type));
    elem_scalar(f, m, i, e);
    return 0;
}

int pagein_meta_array_u64(const pagein_file *f, const pagein_meta *m, uint64_t i, uint64_t *out) {
    pagein_meta e;
    FORWARD_IF(int_elem(f, m, i, &e));
    return to_u64(&e, scalar_ival(&e), UINT64_MAX, out);
}

int pagein_meta_array_i64(const pagein_file *f, const pagein_meta *m, uint64_t i, int64_t *out) {
    pagein_meta e;
    FORWARD_IF(int_elem(f, m, i, &e));
    return to_i64(&e, scalar_ival(&e), is_signed(e.type), out);
}

int pagein_meta_array_f64(const pagein_file *f, const pagein_meta *m, uint64_t i, double *out) {
    FORWARD_IF(check_arr(f, m, i));
    pagein_meta e;
    if (m->elem_type == PAGEIN_META_F32 || m->elem_type == PAGEIN_META_F64) {
        elem_scalar(f, m, i, &e);
        *out = e.v.f;
        return 0;
    }
    if (!is_int(m->elem_type))
        return pi_err(PAGEIN_E_BAD_TYPE, "'%s' is an array of %s, not of numbers", kname(m),
                      pi_gguf_type_name(m->elem_type));
    elem_scalar(f, m, i, &e);
    struct ival v = scalar_ival(&e);
    *out = is_signed(e.type) ? (double)v.i : (double)v.u;
    return 0;
}

/* Offset of variable-sized element i relative to m->raw: from the open-time
 * index when m is a record of f's table, else by walking (nested arrays).
 * The walk trusts the bytes: they were validated at open. */
static uint64_t lenw(const pagein_file *f) { return f->tab.version == 1 ? 4 : 8; }

static uint64_t rd_lenfield(const pagein_file *f, const uint8_t *p) {
    return f->tab.version == 1 ? pi_ld32(p, f->tab.big_endian) : pi_ld64(p, f->tab.big_endian);
}

/* Byte size of the variable-sized element at p. */
static uint64_t var_elem_size(const pagein_file *f, uint32_t type, const uint8_t *p) {
    uint64_t lw = lenw(f);
    if (type == PAGEIN_META_STRING) return lw + rd_lenfield(f, p);
    /* nested array: elem_type u32, count, elements */
    uint32_t et = pi_ld32(p, f->tab.big_endian);
    uint64_t count = rd_lenfield(f, p + 4), sz = 4 + lw;
    uint32_t es = pi_gguf_type_size(et);
    if (es) return sz + count * es;
    for (uint64_t k = 0; k < count; k++) sz += var_elem_size(f, et, p + sz);
    return sz;
}

static uint64_t elem_off(const pagein_file *f, const pagein_meta *m, uint64_t i) {
    const struct pi_table *t = &f->tab;
    const struct pi_gguf_ext *x = t->format == PAGEIN_FORMAT_GGUF ? t->ext : NULL;
    if (x && m >= t->meta && m < t->meta + t->nmeta) {
        size_t mi = (size_t)(m - t->meta);
        if (mi < x->n && x->elem_off[mi]) return x->elem_off[mi][i];
    }
    uint64_t off = 0;
    for (uint64_t k = 0; k < i; k++) off += var_elem_size(f, m->elem_type, (const uint8_t *)m->raw + off);
    return off;
}

int pagein_meta_array_str(const pagein_file *f, const pagein_meta *m, uint64_t i, const char **s, size_t *len) {
    FORWARD_IF(check_arr(f, m, i));
    if (m->elem_type != PAGEIN_META_STRING)
        return pi_err(PAGEIN_E_BAD_TYPE, "'%s' is an array of %s, not of strings", kname(m),
                      pi_gguf_type_name(m->elem_type));
    const uint8_t *p = (const uint8_t *)m->raw + elem_off(f, m, i);
    uint64_t n = rd_lenfield(f, p);
    *s = (const char *)p + lenw(f);
    if (len) *len = (size_t)n;
    return 0;
}

int pagein_meta_array_at(const pagein_file *f, const pagein_meta *m, uint64_t i, pagein_meta *out) {
    FORWARD_IF(check_arr(f, m, i));
    if (m->elem_type != PAGEIN_META_ARRAY)
        return pi_err(PAGEIN_E_BAD_TYPE, "'%s' is an array of %s, not of arrays", kname(m),
                      pi_gguf_type_name(m->elem_type));
    const uint8_t *p = (const uint8_t *)m->raw + elem_off(f, m, i);
    uint64_t sz = var_elem_size(f, PAGEIN_META_ARRAY, p);
    memset(out, 0, sizeof *out);
    uint32_t et = pi_ld32(p, f->tab.big_endian);
    out->type = PAGEIN_META_ARRAY;
    out->elem_type = (pagein_meta_type)et;
    out->count = rd_lenfield(f, p + 4);
    out->raw = p + 4 + lenw(f);
    out->raw_len = sz - 4 - lenw(f);
    return 0;
}
