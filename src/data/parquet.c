/* parquet.c - the Parquet footer: PAR1 magic, the FileMetaData (Thrift
 * compact protocol, parquet.thrift) and the schema flattened into leaf
 * columns (LogicalTypes.md's nested encoding). No I/O: the caller hands in
 * the file's tail. docs/FORMAT-PARQUET.md. */
#include "parquet.h"
#include "../core/endian.h"

#include <stdio.h>
#include <string.h>

#include "thrift.h"

const char *pi_pq_type_name(int t) {
    static const char *n[] = {"BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY",
                              "FIXED_LEN_BYTE_ARRAY"};
    return t >= 0 && t < 8 ? n[t] : "unknown type";
}

const char *pi_pq_codec_name(int c) {
    static const char *n[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
    return c >= 0 && c < 8 ? n[c] : "unknown codec";
}

const char *pi_pq_encoding_name(int e) {
    static const char *n[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED",
                              "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
                              "RLE_DICTIONARY", "BYTE_STREAM_SPLIT", "ALP"};
    return e >= 0 && e < 11 ? n[e] : "unknown encoding";
}


int pi_pq_tail_need(const void *tail, size_t len, uint64_t file_size, const char *name, uint64_t *need) {
    const uint8_t *t = tail;
    const char *nm = name ? name : "parquet";
    if (len > file_size) return pi_err(PAGEIN_E_INVALID, "%s: tail of %zu bytes is longer than the file", nm, len);
    if (file_size < 12 || len < 8)
        return pi_err(PI_PQ_EFORMAT, "%s: %llu bytes are too few for a Parquet file", nm, (unsigned long long)file_size);
    if (memcmp(t + len - 4, "PAR1", 4)) {
        if (!memcmp(t + len - 4, "PARE", 4))
            return pi_err(PAGEIN_E_UNSUPPORTED, "%s: encrypted Parquet footer (PARE) is not supported", nm);
        return pi_err(PAGEIN_E_BAD_MAGIC, "%s: no PAR1 magic at the end of the file", nm);
    }
    uint64_t flen = pi_le32(t + len - 8);
    if (flen + 12 > file_size)
        return pi_err(PI_PQ_EFORMAT, "%s: footer of %llu bytes does not fit in a file of %llu bytes", nm,
                      (unsigned long long)flen, (unsigned long long)file_size);
    if (flen > PI_PQ_MAX_FOOTER)
        return pi_err(PAGEIN_E_LIMIT, "%s: footer of %llu bytes is over the %u-byte limit", nm,
                      (unsigned long long)flen, PI_PQ_MAX_FOOTER);
    *need = flen + 8;
    return 0;
}

/* ---- the FileMetaData ----------------------------------------------------- */

struct mp {
    struct pi_thrift t;
    struct pi_pq_file *f;
    const char *where; /* what is being decoded, for errors */
};

#define MERR(m, ...) pi_err(PI_PQ_EFORMAT, __VA_ARGS__)

static int need_type(struct mp *m, int type, int want, const char *field) {
    int ok = type == want || (want == PI_TT_I32 && (type == PI_TT_I16 || type == PI_TT_BYTE)) ||
             (want == PI_TT_I64 && (type == PI_TT_I32 || type == PI_TT_I16)) ||
             (want == PI_TT_TRUE && type == PI_TT_FALSE);
    if (!ok)
        return MERR(m, "%s.%s has thrift type %d, expected %d (byte %zu)", m->where, field, type, want,
                    pi_thrift_pos(&m->t));
    return 0;
}

static int rd_i32(struct mp *m, int type, const char *field, int32_t *v) {
    FORWARD_IF(need_type(m, type, PI_TT_I32, field));
    int64_t x;
    FORWARD_IF(pi_thrift_int(&m->t, type, &x));
    if (x < INT32_MIN || x > INT32_MAX) return MERR(m, "%s.%s out of the i32 range", m->where, field);
    *v = (int32_t)x;
    return 0;
}

static int rd_i64(struct mp *m, int type, const char *field, int64_t *v) {
    FORWARD_IF(need_type(m, type, PI_TT_I64, field));
    return pi_thrift_int(&m->t, type, v);
}

static int rd_str(struct mp *m, int type, const char *field, char **out) {
    FORWARD_IF(need_type(m, type, PI_TT_BINARY, field));
    const uint8_t *p;
    uint32_t n;
    FORWARD_IF(pi_thrift_binary(&m->t, &p, &n));
    char *s = pi_strndup((const char *)p, n);
    if (!s) return pi_err(-ENOMEM, "out of memory");
    if (strlen(s) != n) {
        pi_free(s);
        return MERR(m, "%s.%s holds a NUL byte", m->where, field);
    }
    pi_free(*out);
    *out = s;
    return 0;
}

/* Starts a list field: its elements must be of elem type, its count is
 * bounded by the bytes left (pi_thrift_list). */
static int rd_list(struct mp *m, int type, const char *field, int elem, uint32_t *n) {
    FORWARD_IF(need_type(m, type, PI_TT_LIST, field));
    int et;
    FORWARD_IF(pi_thrift_list(&m->t, &et, n));
    if (*n && et != elem && !(elem == PI_TT_I32 && (et == PI_TT_I16 || et == PI_TT_BYTE)))
        return MERR(m, "%s.%s is a list of thrift type %d, expected %d", m->where, field, et, elem);
    return 0;
}

/* Walks a struct's fields, calling fn for each: fn returns 0 when it read
 * the field, 1 to have it skipped, < 0 on error. m->where names the struct
 * in errors (set again before every field: a nested struct changes it). */
typedef int (*field_fn)(struct mp *m, int16_t id, int ft, void *arg);
static int rd_struct(struct mp *m, const char *where, field_fn fn, void *arg) {
    FORWARD_IF(pi_thrift_struct_begin(&m->t));
    int16_t id = 0;
    int ft;
    for (;;) {
        m->where = where;
        FORWARD_IF(pi_thrift_field(&m->t, &id, &ft));
        if (ft == PI_TT_STOP) break;
        int rc = fn(m, id, ft, arg);
        if (rc < 0) return rc;
        if (rc > 0) FORWARD_IF(pi_thrift_skip(&m->t, ft));
    }
    pi_thrift_struct_end(&m->t);
    m->where = where;
    return 0;
}

/* A list of structs: *arr gets n zeroed elements of sz bytes (a list given
 * twice is an error) and *count follows the elements read (so that a close
 * after an error frees what was read); element i is read by el(m, i, arg);
 * its error is prefixed "PREFIX i" when prefix is not NULL. *n gets the
 * list's length. */
typedef int (*elem_fn)(struct mp *m, size_t i, void *arg);
static int rd_structs(struct mp *m, int ft, const char *field, void **arr, size_t sz, size_t *count, uint32_t *n,
                      elem_fn el, void *arg, const char *prefix) {
    FORWARD_IF(rd_list(m, ft, field, PI_TT_STRUCT, n));
    if (*arr) return MERR(m, "%s.%s given twice", m->where, field);
    *arr = pi_calloc(*n ? *n : 1, sz);
    if (!*arr) return pi_err(-ENOMEM, "out of memory");
    for (uint32_t i = 0; i < *n; i++) {
        if (count) *count = i + 1;
        int rc = el(m, i, arg);
        if (rc < 0) {
            if (prefix) {
                char pre[64];
                snprintf(pre, sizeof pre, "%s %u", prefix, (unsigned)i);
                pi_err_prefix(pre);
            }
            return rc;
        }
    }
    return 0;
}

/* LogicalType: a union; its field id is what we keep, with the parameters
 * of TIME/TIMESTAMP (isAdjustedToUTC, unit), INTEGER (bitWidth, isSigned)
 * and DECIMAL (scale, precision). */
static int unit_field(struct mp *m, int16_t id, int ft, void *arg) {
    if (ft == PI_TT_STRUCT && id >= 1 && id <= 3) *(int *)arg = id;
    return 1;
}

static int lt_param(struct mp *m, int16_t id, int ft, void *arg) {
    struct pi_pq_schema *e = arg;
    int b;
    switch (e->logical * 16 + id) {
    case PI_PQ_LT_DECIMAL * 16 + 1: return rd_i32(m, ft, "DecimalType.scale", &e->scale);
    case PI_PQ_LT_DECIMAL * 16 + 2: return rd_i32(m, ft, "DecimalType.precision", &e->precision);
    case PI_PQ_LT_TIME * 16 + 1:
    case PI_PQ_LT_TIMESTAMP * 16 + 1:
    case PI_PQ_LT_INTEGER * 16 + 2:
        if (ft != PI_TT_TRUE && ft != PI_TT_FALSE) return 1;
        FORWARD_IF(pi_thrift_bool(&m->t, ft, 0, &b));
        if (id == 1)
            e->lt_utc = b;
        else
            e->lt_signed = b;
        return 0;
    case PI_PQ_LT_TIME * 16 + 2:
    case PI_PQ_LT_TIMESTAMP * 16 + 2:
        if (ft != PI_TT_STRUCT) return 1;
        return rd_struct(m, "TimeUnit", unit_field, &e->lt_unit);
    case PI_PQ_LT_INTEGER * 16 + 1: {
        int32_t v;
        FORWARD_IF(rd_i32(m, ft, "IntType.bitWidth", &v));
        e->lt_bits = v;
        return 0;
    }
    default: return 1;
    }
}

static int logical_field(struct mp *m, int16_t id, int ft, void *arg) {
    struct pi_pq_schema *e = arg;
    if (ft != PI_TT_STRUCT || id <= 0) return 1;
    e->logical = id;
    return rd_struct(m, "LogicalType", lt_param, e);
}

struct schema_rd {
    struct pi_pq_schema *e;
    int have_name;
};

static int schema_field(struct mp *m, int16_t id, int ft, void *arg) {
    struct schema_rd *r = arg;
    struct pi_pq_schema *e = r->e;
    int32_t v;
    switch (id) {
    case 1:
        FORWARD_IF(rd_i32(m, ft, "type", &v));
        if (v < 0 || v > 7) return MERR(m, "SchemaElement.type %d is not a Parquet type", (int)v);
        e->type = v;
        return 0;
    case 2: return rd_i32(m, ft, "type_length", &e->type_length);
    case 3:
        FORWARD_IF(rd_i32(m, ft, "repetition_type", &v));
        if (v < 0 || v > 2) return MERR(m, "SchemaElement.repetition_type %d is invalid", (int)v);
        e->rep = v;
        return 0;
    case 4:
        r->have_name = 1;
        return rd_str(m, ft, "name", &e->name);
    case 5: return rd_i32(m, ft, "num_children", &e->num_children);
    case 6:
        FORWARD_IF(rd_i32(m, ft, "converted_type", &v));
        e->converted = v;
        return 0;
    case 7: return rd_i32(m, ft, "scale", &e->scale);
    case 8: return rd_i32(m, ft, "precision", &e->precision);
    case 10:
        FORWARD_IF(need_type(m, ft, PI_TT_STRUCT, "logicalType"));
        FORWARD_IF(rd_struct(m, "LogicalType", logical_field, e));
        return 0;
    default: return 1;
    }
}

static int rd_schema_el(struct mp *m, size_t i, void *arg) {
    struct pi_pq_schema *e = &m->f->schema[i];
    memset(e, 0, sizeof *e);
    e->type = -1;
    e->rep = -1;
    e->converted = -1;
    e->parent = -1;
    struct schema_rd r = {e, 0};
    FORWARD_IF(rd_struct(m, "SchemaElement", schema_field, &r));
    if (!r.have_name) return MERR(m, "SchemaElement without a name (byte %zu)", pi_thrift_pos(&m->t));
    return 0;
}

static int kv_field(struct mp *m, int16_t id, int ft, void *arg) {
    struct pi_pq_kv *kv = arg;
    if (id == 1) return rd_str(m, ft, "key", &kv->key);
    if (id == 2) return rd_str(m, ft, "value", &kv->val);
    return 1;
}

static int rd_kv(struct mp *m, size_t i, void *arg) {
    struct pi_pq_kv *kv = &m->f->kv[i];
    FORWARD_IF(rd_struct(m, "KeyValue", kv_field, kv));
    if (!kv->key) return MERR(m, "KeyValue without a key");
    return 0;
}

struct colmeta_rd {
    struct pi_pq_chunk *c;
    unsigned seen;
};

static int colmeta_field(struct mp *m, int16_t id, int ft, void *arg) {
    struct colmeta_rd *r = arg;
    struct pi_pq_chunk *c = r->c;
    int32_t v;
    switch (id) {
    case 1:
        FORWARD_IF(rd_i32(m, ft, "type", &v));
        if (v < 0 || v > 7) return MERR(m, "ColumnMetaData.type %d is not a Parquet type", (int)v);
        c->type = v;
        r->seen |= 1;
        return 0;
    case 2: {
        uint32_t n;
        FORWARD_IF(rd_list(m, ft, "encodings", PI_TT_I32, &n));
        for (uint32_t i = 0; i < n; i++) {
            int64_t e;
            FORWARD_IF(pi_thrift_int(&m->t, PI_TT_I32, &e));
            if (c->nencodings < PI_ARRAY_LEN(c->encodings) && e >= 0 && e < 256) c->encodings[c->nencodings++] = (uint8_t)e;
        }
        return 0;
    }
    case 4:
        FORWARD_IF(rd_i32(m, ft, "codec", &v));
        c->codec = v;
        r->seen |= 2;
        return 0;
    case 5: r->seen |= 4; return rd_i64(m, ft, "num_values", &c->num_values);
    case 6: return rd_i64(m, ft, "total_uncompressed_size", &c->total_uncompressed);
    case 7: r->seen |= 8; return rd_i64(m, ft, "total_compressed_size", &c->total_compressed);
    case 9: r->seen |= 16; return rd_i64(m, ft, "data_page_offset", &c->data_page_offset);
    case 11: return rd_i64(m, ft, "dictionary_page_offset", &c->dictionary_page_offset);
    default: return 1; /* path_in_schema is checked by position */
    }
}

static int chunk_field(struct mp *m, int16_t id, int ft, void *arg) {
    struct pi_pq_chunk *c = arg;
    int64_t dummy;
    switch (id) {
    case 1: return pi_err(PAGEIN_E_UNSUPPORTED, "a column chunk in another file (ColumnChunk.file_path) is not supported");
    case 2: return rd_i64(m, ft, "file_offset", &dummy);
    case 3: {
        FORWARD_IF(need_type(m, ft, PI_TT_STRUCT, "meta_data"));
        struct colmeta_rd r = {c, 0};
        FORWARD_IF(rd_struct(m, "ColumnMetaData", colmeta_field, &r));
        if (r.seen != 31) return MERR(m, "ColumnMetaData lacks a required field (type, codec, num_values, sizes, offset)");
        c->has_meta = 1;
        return 0;
    }
    case 4: return rd_i64(m, ft, "offset_index_offset", &c->offset_index_offset);
    case 5: return rd_i32(m, ft, "offset_index_length", &c->offset_index_length);
    case 6: return rd_i64(m, ft, "column_index_offset", &c->column_index_offset);
    case 7: return rd_i32(m, ft, "column_index_length", &c->column_index_length);
    case 8:
    case 9: return pi_err(PAGEIN_E_UNSUPPORTED, "encrypted column chunks are not supported");
    default: return 1;
    }
}

static int rd_chunk(struct mp *m, size_t i, void *arg) {
    struct pi_pq_chunk *c = &((struct pi_pq_group *)arg)->chunks[i];
    memset(c, 0, sizeof *c);
    c->dictionary_page_offset = c->offset_index_offset = c->column_index_offset = -1;
    FORWARD_IF(rd_struct(m, "ColumnChunk", chunk_field, c));
    if (!c->has_meta) return MERR(m, "ColumnChunk without meta_data");
    return 0;
}

struct group_rd {
    struct pi_pq_group *g;
    unsigned seen;
};

static int group_field(struct mp *m, int16_t id, int ft, void *arg) {
    struct group_rd *r = arg;
    struct pi_pq_group *g = r->g;
    switch (id) {
    case 1: {
        uint32_t n;
        FORWARD_IF(rd_structs(m, ft, "columns", (void **)&g->chunks, sizeof *g->chunks, NULL, &n, rd_chunk, g, "column"));
        if (n != m->f->nleaves)
            return MERR(m, "row group has %u column chunks, the schema has %zu columns", (unsigned)n, m->f->nleaves);
        r->seen |= 1;
        return 0;
    }
    case 2: return rd_i64(m, ft, "total_byte_size", &g->total_byte_size);
    case 3: r->seen |= 2; return rd_i64(m, ft, "num_rows", &g->num_rows);
    default: return 1;
    }
}

static int rd_group(struct mp *m, size_t i, void *arg) {
    struct group_rd r = {&m->f->groups[i], 0};
    FORWARD_IF(rd_struct(m, "RowGroup", group_field, &r));
    if (r.seen != 3) return MERR(m, "RowGroup lacks its columns or num_rows");
    if (r.g->num_rows < 0) return MERR(m, "RowGroup.num_rows is negative");
    return 0;
}

/* ---- the schema tree -> leaf columns --------------------------------------- */

static int is_string_el(const struct pi_pq_schema *e) {
    return e->type == PI_PQ_BYTE_ARRAY &&
           (e->converted == PI_PQ_CT_UTF8 || e->converted == PI_PQ_CT_ENUM || e->converted == PI_PQ_CT_JSON ||
            e->logical == PI_PQ_LT_STRING || e->logical == PI_PQ_LT_ENUM || e->logical == PI_PQ_LT_JSON);
}

static char *join_path(const struct pi_pq_schema *s, const int *chain, int from, int to) {
    size_t n = 1;
    for (int i = from; i <= to; i++) n += strlen(s[chain[i]].name) + 1;
    char *p = pi_malloc(n), *q = p;
    if (!p) return NULL;
    for (int i = from; i <= to; i++) {
        size_t l = strlen(s[chain[i]].name);
        if (i > from) *q++ = '.';
        memcpy(q, s[chain[i]].name, l);
        q += l;
    }
    *q = 0;
    return p;
}

/* The value type of a leaf as a field (pagein.h): physical type and its
 * annotations (ConvertedType, or the LogicalType that supersedes it). */
static void leaf_type(struct pi_pq_leaf *L, const struct pi_pq_schema *e) {
    int conv = e->converted, lt = e->logical;
    uint8_t t = PAGEIN_FIELD_BINARY, w = 0, lg = 0, unit = 0;
    int dec = conv == PI_PQ_CT_DECIMAL || lt == PI_PQ_LT_DECIMAL;
    switch (e->type) {
    case PI_PQ_BOOLEAN: t = PAGEIN_FIELD_BOOL, w = 1; break;
    case PI_PQ_INT32:
    case PI_PQ_INT64:
        w = e->type == PI_PQ_INT32 ? 4 : 8;
        t = (conv >= PI_PQ_CT_UINT_8 && conv <= PI_PQ_CT_UINT_64) || (lt == PI_PQ_LT_INTEGER && !e->lt_signed)
                ? PAGEIN_FIELD_UINT
                : PAGEIN_FIELD_INT;
        if (dec) {
            lg = PAGEIN_LOGICAL_DECIMAL;
        } else if (conv == PI_PQ_CT_DATE || lt == PI_PQ_LT_DATE) {
            lg = PAGEIN_LOGICAL_DATE, unit = PAGEIN_UNIT_DAY;
        } else if (lt == PI_PQ_LT_TIME || lt == PI_PQ_LT_TIMESTAMP) {
            lg = lt == PI_PQ_LT_TIME ? PAGEIN_LOGICAL_TIME : PAGEIN_LOGICAL_TIMESTAMP;
            unit = e->lt_unit == 1 ? PAGEIN_UNIT_MS : e->lt_unit == 2 ? PAGEIN_UNIT_US : e->lt_unit == 3 ? PAGEIN_UNIT_NS : 0;
            L->utc = (uint8_t)e->lt_utc;
        } else if (conv >= PI_PQ_CT_TIME_MILLIS && conv <= PI_PQ_CT_TIMESTAMP_MICROS) {
            /* the converted types are the UTC-adjusted forms */
            lg = conv <= PI_PQ_CT_TIME_MICROS ? PAGEIN_LOGICAL_TIME : PAGEIN_LOGICAL_TIMESTAMP;
            unit = conv == PI_PQ_CT_TIME_MILLIS || conv == PI_PQ_CT_TIMESTAMP_MILLIS ? PAGEIN_UNIT_MS : PAGEIN_UNIT_US;
            L->utc = 1;
        }
        break;
    case PI_PQ_INT96: lg = PAGEIN_LOGICAL_INT96; break;
    case PI_PQ_FLOAT: t = PAGEIN_FIELD_FLOAT, w = 4; break;
    case PI_PQ_DOUBLE: t = PAGEIN_FIELD_FLOAT, w = 8; break;
    case PI_PQ_BYTE_ARRAY:
        if (L->is_string) t = PAGEIN_FIELD_UTF8;
        if (conv == PI_PQ_CT_ENUM || lt == PI_PQ_LT_ENUM) lg = PAGEIN_LOGICAL_ENUM;
        if (conv == PI_PQ_CT_JSON || lt == PI_PQ_LT_JSON) lg = PAGEIN_LOGICAL_JSON;
        if (conv == PI_PQ_CT_BSON || lt == PI_PQ_LT_BSON) lg = PAGEIN_LOGICAL_BSON;
        if (dec) t = PAGEIN_FIELD_BINARY, lg = PAGEIN_LOGICAL_DECIMAL;
        break;
    default: /* FIXED_LEN_BYTE_ARRAY */
        if (lt == PI_PQ_LT_FLOAT16 && e->type_length == 2) t = PAGEIN_FIELD_FLOAT, w = 2;
        if (lt == PI_PQ_LT_UUID) lg = PAGEIN_LOGICAL_UUID;
        if (dec) lg = PAGEIN_LOGICAL_DECIMAL;
        break;
    }
    if (lt == PI_PQ_LT_UNKNOWN) t = PAGEIN_FIELD_NULL, w = 0, lg = 0;
    if (lg == PAGEIN_LOGICAL_DECIMAL) {
        L->precision = (uint8_t)(e->precision > 0 && e->precision < 256 ? e->precision : 0);
        L->scale = e->scale;
    }
    L->ftype = t;
    L->fwidth = w;
    L->logical = lg;
    L->unit = unit;
}

/* Classifies one leaf, given its chain of schema indexes from the root's
 * child (chain[0]) to the leaf (chain[depth - 1]): its levels, path, value
 * type. Its kind and field come from the record shape (parquet_nest.c). */
static int classify(struct pi_pq_file *f, struct pi_pq_leaf *L, const int *chain, int depth) {
    const struct pi_pq_schema *s = f->schema;
    const struct pi_pq_schema *leaf = &s[chain[depth - 1]];
    int def = 0, rep = 0;
    for (int i = 0; i < depth; i++) {
        const struct pi_pq_schema *e = &s[chain[i]];
        def += e->rep == PI_PQ_OPTIONAL || e->rep == PI_PQ_REPEATED;
        rep += e->rep == PI_PQ_REPEATED;
    }
    L->max_def = def;
    L->max_rep = rep;
    L->type = leaf->type;
    L->type_length = leaf->type_length;
    L->is_string = is_string_el(leaf);
    L->kind = PI_PQ_SCALAR;
    L->list_def = -1;
    if (leaf->converted == PI_PQ_CT_INTERVAL)
        L->unsupported = "INTERVAL";
    else if (leaf->logical == PI_PQ_LT_VARIANT)
        L->unsupported = "VARIANT";
    else if (leaf->logical == PI_PQ_LT_GEOMETRY || leaf->logical == PI_PQ_LT_GEOGRAPHY)
        L->unsupported = "a geospatial type";
    leaf_type(L, leaf);
    /* the leaf's field path: up to its first list (the LIST-annotated
     * group, else the repeated node), or the whole path */
    int field_end = depth - 1;
    for (int i = 0; i < depth; i++)
        if (s[chain[i]].rep == PI_PQ_REPEATED) {
            field_end = i > 0 && (s[chain[i - 1]].converted == PI_PQ_CT_LIST || s[chain[i - 1]].logical == PI_PQ_LT_LIST)
                            ? i - 1
                            : i;
            break;
        }
    L->path = join_path(s, chain, 0, depth - 1);
    L->field = join_path(s, chain, 0, field_end);
    if (!L->path || !L->field) return pi_err(-ENOMEM, "out of memory");
    return 0;
}

/* Walks the flattened schema (pre-order, num_children) from element *pos. */
static int walk(struct pi_pq_file *f, size_t *pos, int parent, int *chain, int depth, size_t *nleaves) {
    if (*pos >= f->nschema) return pi_err(PI_PQ_EFORMAT, "schema: num_children runs past the %zu elements", f->nschema);
    size_t me = (*pos)++;
    struct pi_pq_schema *e = &f->schema[me];
    e->parent = parent;
    if (depth > PI_PQ_MAX_DEPTH) return pi_err(PAGEIN_E_LIMIT, "schema: nesting deeper than %d at %s", PI_PQ_MAX_DEPTH, e->name);
    if (parent >= 0) {
        if (e->rep < 0) return pi_err(PI_PQ_EFORMAT, "schema: %s has no repetition_type", e->name);
        chain[depth - 1] = (int)me;
    }
    if (e->num_children < 0) return pi_err(PI_PQ_EFORMAT, "schema: %s has a negative num_children", e->name);
    if (e->type >= 0 && e->num_children > 0)
        return pi_err(PI_PQ_EFORMAT, "schema: primitive %s has children", e->name);
    if (e->type < 0 && parent >= 0 && e->num_children == 0)
        return pi_err(PAGEIN_E_UNSUPPORTED, "schema: %s is a group without children (an empty struct)", e->name);
    if (e->type == PI_PQ_FIXED && (e->type_length <= 0 || e->type_length > (1 << 24)))
        return pi_err(PI_PQ_EFORMAT, "schema: %s is FIXED_LEN_BYTE_ARRAY of length %d", e->name, (int)e->type_length);
    if (e->type >= 0 && parent >= 0) {
        if (*nleaves >= f->nleaves) return pi_err(PI_PQ_EFORMAT, "schema: more leaves than elements");
        struct pi_pq_leaf *L = &f->leaves[(*nleaves)++];
        L->schema = (int)me;
        return classify(f, L, chain, depth);
    }
    if (parent < 0 && e->type >= 0) return pi_err(PI_PQ_EFORMAT, "schema: the root %s is not a group", e->name);
    for (int32_t i = 0; i < e->num_children; i++) FORWARD_IF(walk(f, pos, (int)me, chain, depth + 1, nleaves));
    return 0;
}

static int build_leaves(struct pi_pq_file *f) {
    if (f->nschema == 0) return pi_err(PI_PQ_EFORMAT, "schema: no elements");
    size_t prim = 0;
    for (size_t i = 0; i < f->nschema; i++) prim += f->schema[i].type >= 0;
    f->nleaves = prim;
    f->leaves = pi_calloc(prim ? prim : 1, sizeof *f->leaves);
    if (!f->leaves) return pi_err(-ENOMEM, "out of memory");
    int chain[PI_PQ_MAX_DEPTH + 2];
    size_t pos = 0, n = 0;
    FORWARD_IF(walk(f, &pos, -1, chain, 0, &n));
    if (pos != f->nschema)
        return pi_err(PI_PQ_EFORMAT, "schema: %zu elements after the root's tree", f->nschema - pos);
    f->nleaves = n;
    return pi_pq_build_nodes(f);
}

/* ---- open ------------------------------------------------------------------ */

static int filemeta_field(struct mp *m, int16_t id, int ft, void *arg) {
    struct pi_pq_file *f = m->f;
    unsigned *seen = arg;
    uint32_t n;
    switch (id) {
    case 1: return rd_i32(m, ft, "version", &f->version);
    case 2:
        FORWARD_IF(rd_structs(m, ft, "schema", (void **)&f->schema, sizeof *f->schema, &f->nschema, &n, rd_schema_el,
                              NULL, NULL));
        *seen |= 1;
        return build_leaves(f);
    case 3: return rd_i64(m, ft, "num_rows", &f->num_rows);
    case 4:
        if (!(*seen & 1)) return MERR(m, "FileMetaData.row_groups come before the schema");
        FORWARD_IF(rd_structs(m, ft, "row_groups", (void **)&f->groups, sizeof *f->groups, &f->ngroups, &n, rd_group,
                              NULL, "row group"));
        *seen |= 2;
        return 0;
    case 5:
        return rd_structs(m, ft, "key_value_metadata", (void **)&f->kv, sizeof *f->kv, &f->nkv, &n, rd_kv, NULL, NULL);
    case 6: return rd_str(m, ft, "created_by", &f->created_by);
    case 8: return pi_err(PAGEIN_E_UNSUPPORTED, "encrypted Parquet files are not supported");
    default: return 1;
    }
}

static int rd_filemeta(struct mp *m) {
    unsigned seen = 0;
    FORWARD_IF(rd_struct(m, "FileMetaData", filemeta_field, &seen));
    if (seen != 3) return MERR(m, "FileMetaData lacks its schema or row groups");
    return 0;
}

/* Checks each chunk against the schema and the file, and sets its range. */
static int check_chunks(struct pi_pq_file *f) {
    uint64_t rows = 0;
    for (size_t g = 0; g < f->ngroups; g++) {
        struct pi_pq_group *G = &f->groups[g];
        rows += (uint64_t)G->num_rows;
        for (size_t c = 0; c < f->nleaves; c++) {
            struct pi_pq_chunk *C = &G->chunks[c];
            const struct pi_pq_leaf *L = &f->leaves[c];
#define CERR(...)                                                                                     \
    do {                                                                                              \
        pi_err(PI_PQ_EFORMAT, __VA_ARGS__);                                                           \
        char pre_[512];                                                                               \
        snprintf(pre_, sizeof pre_, "row group %zu, column %s", g, L->path);                          \
        pi_err_prefix(pre_);                                                                          \
        return PI_PQ_EFORMAT;                                                                         \
    } while (0)
            if (C->type != L->type)
                CERR("chunk type %s, the schema says %s", pi_pq_type_name(C->type), pi_pq_type_name(L->type));
            if (C->num_values < 0 || (uint64_t)C->num_values > PI_PQ_MAX_CHUNK_VALUES)
                CERR("num_values %lld out of range", (long long)C->num_values);
            /* the chunk starts at its first page: the lower of the two page
             * offsets that can hold one (a page cannot start inside the
             * leading magic; some writers leave data_page_offset 0 and put
             * the first page's offset in dictionary_page_offset, as in
             * parquet-testing's column_chunk_key_value_metadata.parquet) */
            int64_t start = C->data_page_offset;
            if (C->dictionary_page_offset >= 4 && (start < 4 || C->dictionary_page_offset < start))
                start = C->dictionary_page_offset;
            if (start < 4 || C->total_compressed < 0 || (uint64_t)start > f->meta_off ||
                (uint64_t)C->total_compressed > f->meta_off - (uint64_t)start)
                CERR("chunk [%lld, +%lld) is outside the data of the file (4 .. %llu)", (long long)start,
                     (long long)C->total_compressed, (unsigned long long)f->meta_off);
            C->off = (uint64_t)start;
            C->len = (uint64_t)C->total_compressed;
            if (C->offset_index_offset >= 0 &&
                (C->offset_index_length < 0 || (uint64_t)C->offset_index_offset > f->meta_off ||
                 (uint64_t)C->offset_index_length > f->meta_off - (uint64_t)C->offset_index_offset))
                C->offset_index_offset = -1; /* ignored: only a hint */
            if (C->column_index_offset >= 0 &&
                (C->column_index_length < 0 || (uint64_t)C->column_index_offset > f->meta_off ||
                 (uint64_t)C->column_index_length > f->meta_off - (uint64_t)C->column_index_offset))
                C->column_index_offset = -1;
#undef CERR
        }
    }
    /* FileMetaData.num_rows only sums the row groups' counts, each of
     * which is checked against its pages when decoded and bounded by its
     * bytes when a dataset opens; some writers leave it 0 (parquet-testing's
     * repeated_no_annotation.parquet): the row groups' sum is used then.
     * Any other disagreement is refused. */
    if (f->num_rows == 0 && rows > 0 && rows <= (uint64_t)INT64_MAX) f->num_rows = (int64_t)rows;
    if (f->num_rows >= 0 && rows != (uint64_t)f->num_rows)
        return pi_err(PI_PQ_EFORMAT, "row groups hold %llu rows, FileMetaData.num_rows says %lld",
                      (unsigned long long)rows, (long long)f->num_rows);
    return 0;
}

int pi_pq_open(struct pi_pq_file **out, const void *tail, size_t len, uint64_t file_size, const char *name) {
    uint64_t need;
    const char *nm = name ? name : "parquet";
    FORWARD_IF(pi_pq_tail_need(tail, len, file_size, name, &need));
    if (need > len)
        return pi_err(PAGEIN_E_TRUNCATED, "%s: the footer needs the last %llu bytes, %zu were given", nm,
                      (unsigned long long)need, len);
    struct pi_pq_file *f = pi_calloc(1, sizeof *f);
    if (!f) return pi_err(-ENOMEM, "out of memory");
    f->name = pi_strndup(nm, strlen(nm));
    f->file_size = file_size;
    f->meta_len = need - 8;
    f->meta_off = file_size - need;
    f->num_rows = -1;
    int rc = f->name ? 0 : pi_err(-ENOMEM, "out of memory");
    if (rc == 0) {
        struct mp m = {.f = f, .where = "FileMetaData"};
        const uint8_t *meta = (const uint8_t *)tail + len - need;
        pi_thrift_init(&m.t, meta, (size_t)f->meta_len);
        rc = rd_filemeta(&m);
        if (rc == 0) rc = check_chunks(f);
    }
    if (rc < 0) {
        char pre[600];
        snprintf(pre, sizeof pre, "%s: footer", nm);
        pi_err_prefix(pre);
        pi_pq_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

void pi_pq_close(struct pi_pq_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->nschema; i++) pi_free(f->schema[i].name);
    pi_free(f->schema);
    if (f->leaves)
        for (size_t i = 0; i < f->nleaves; i++) {
            pi_free(f->leaves[i].path);
            pi_free(f->leaves[i].field);
        }
    pi_free(f->leaves);
    for (size_t g = 0; g < f->ngroups; g++) pi_free(f->groups[g].chunks);
    pi_free(f->groups);
    for (size_t i = 0; i < f->nkv; i++) {
        pi_free(f->kv[i].key);
        pi_free(f->kv[i].val);
    }
    pi_free(f->kv);
    pi_free(f->nodes);
    pi_free(f->kids);
    pi_free(f->fields);
    pi_free(f->created_by);
    pi_free(f->name);
    pi_free(f);
}

int pi_pq_find_leaf(const struct pi_pq_file *f, const char *path) {
    for (size_t i = 0; i < f->nleaves; i++)
        if (!strcmp(f->leaves[i].path, path)) return (int)i;
    for (size_t i = 0; i < f->nleaves; i++)
        if (!strcmp(f->leaves[i].field, path)) return (int)i;
    return -1;
}

int pi_pq_chunk_range(const struct pi_pq_file *f, size_t rg, size_t col, uint64_t *off, uint64_t *len) {
    if (rg >= f->ngroups || col >= f->nleaves)
        return pi_err(PAGEIN_E_RANGE, "%s: no row group %zu column %zu", f->name, rg, col);
    *off = f->groups[rg].chunks[col].off;
    *len = f->groups[rg].chunks[col].len;
    return 0;
}

/* ---- OffsetIndex ------------------------------------------------------------ */

struct oi_rd {
    struct pi_pq_page_loc *v;
    size_t n;
    const struct pi_pq_chunk *C;
    int64_t nrows;
};

static int loc_field(struct mp *m, int16_t id, int ft, void *arg) {
    struct pi_pq_page_loc *L = arg;
    if (id == 1) return rd_i64(m, ft, "offset", &L->offset);
    if (id == 2) return rd_i32(m, ft, "compressed_page_size", &L->size);
    if (id == 3) return rd_i64(m, ft, "first_row_index", &L->first_row);
    return 1;
}

/* PageLocation i: read, then checked against the previous one and the chunk. */
static int rd_loc(struct mp *m, size_t i, void *arg) {
    struct oi_rd *r = arg;
    struct pi_pq_page_loc *L = &r->v[i], *v = r->v;
    const struct pi_pq_chunk *C = r->C;
    L->offset = L->first_row = -1;
    L->size = -1;
    FORWARD_IF(rd_struct(m, "PageLocation", loc_field, L));
    int64_t prev_row = i ? v[i - 1].first_row : -1;
    int64_t prev_end = i ? v[i - 1].offset + v[i - 1].size : (int64_t)C->off;
    if (L->offset < prev_end || L->size <= 0 || (uint64_t)L->offset + (uint64_t)L->size > C->off + C->len)
        return pi_err(PI_PQ_EFORMAT, "page %zu at [%lld, +%d) is outside its chunk [%llu, +%llu) or overlaps", i,
                      (long long)L->offset, (int)L->size, (unsigned long long)C->off, (unsigned long long)C->len);
    if (L->first_row <= prev_row || L->first_row >= (r->nrows > 0 ? r->nrows : 1) || (i == 0 && L->first_row != 0))
        return pi_err(PI_PQ_EFORMAT, "page %zu starts at row %lld (previous %lld, %lld rows)", i,
                      (long long)L->first_row, (long long)prev_row, (long long)r->nrows);
    return 0;
}

static int oi_field(struct mp *m, int16_t id, int ft, void *arg) {
    struct oi_rd *r = arg;
    if (id != 1 || r->v) return 1; /* page_locations once; the rest skipped */
    uint32_t n;
    size_t cnt = 0;
    int rc = rd_structs(m, ft, "page_locations", (void **)&r->v, sizeof *r->v, &cnt, &n, rd_loc, r, NULL);
    r->n = rc < 0 ? 0 : n;
    return rc;
}

int pi_pq_offset_index(const struct pi_pq_file *f, size_t rg, size_t col, const void *buf, size_t len,
                       struct pi_pq_page_loc **locs, size_t *n) {
    if (rg >= f->ngroups || col >= f->nleaves)
        return pi_err(PAGEIN_E_RANGE, "%s: no row group %zu column %zu", f->name, rg, col);
    const struct pi_pq_chunk *C = &f->groups[rg].chunks[col];
    int64_t nrows = f->groups[rg].num_rows;
    struct mp m = {.f = (struct pi_pq_file *)f, .where = "OffsetIndex"};
    pi_thrift_init(&m.t, buf, len);
    struct oi_rd r = {NULL, 0, C, nrows};
    int rc = rd_struct(&m, "OffsetIndex", oi_field, &r);
    struct pi_pq_page_loc *v = r.v;
    size_t nv = r.n;
    if (rc == 0 && !v) rc = pi_err(PI_PQ_EFORMAT, "OffsetIndex without page_locations");
    if (rc < 0) {
        pi_free(v);
        char pre[600];
        snprintf(pre, sizeof pre, "%s: row group %zu, column %s, offset index", f->name, rg, f->leaves[col].path);
        pi_err_prefix(pre);
        return rc;
    }
    *locs = v;
    *n = nv;
    return 0;
}
