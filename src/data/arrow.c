/* arrow.c - Arrow IPC stream and file reader (see arrow.h and
 * docs/FORMAT-ARROW.md), written from Columnar.rst and the .fbs schemas.
 *
 * Open builds the index: the schema (fields flattened in pre-order, each
 * with its FieldNode and first buffer index) and, per record batch, the
 * byte extent and row count. File format: the footer lists the blocks and
 * each block's metadata gives the rows. Stream format: one pass over the
 * message prefixes and metadata, bodies skipped. Decode validates one
 * batch's selected columns completely, so that cell access cannot go out
 * of bounds and needs no checks beyond the row. */
#include "arrow.h"

#include <stdio.h>
#include <stdlib.h>
#ifdef PAGEIN_HAVE_LZ4
#include <lz4frame.h>
#endif
#ifdef PAGEIN_HAVE_ZSTD
#include <zstd.h>
#endif

/* Message.fbs / Schema.fbs / File.fbs vtable slots (a union takes two:
 * its type, then its value). */
enum { MSG_VERSION = 0, MSG_HEADER_TYPE = 1, MSG_HEADER = 2, MSG_BODY_LENGTH = 3 };
enum { HDR_SCHEMA = 1, HDR_DICTIONARY = 2, HDR_RECORD_BATCH = 3, HDR_TENSOR = 4, HDR_SPARSE_TENSOR = 5 };
enum { SCH_ENDIANNESS = 0, SCH_FIELDS = 1 };
enum { FLD_NAME = 0, FLD_NULLABLE = 1, FLD_TYPE_TYPE = 2, FLD_TYPE = 3, FLD_DICTIONARY = 4, FLD_CHILDREN = 5 };
enum { RB_LENGTH = 0, RB_NODES = 1, RB_BUFFERS = 2, RB_COMPRESSION = 3, RB_VARIADIC = 4 };
enum { FOOT_SCHEMA = 1, FOOT_DICTIONARIES = 2, FOOT_BATCHES = 3 };
enum { V4 = 3, V5 = 4 }; /* MetadataVersion */

static const char *const type_names[] = {
    "NONE", "Null", "Int", "FloatingPoint", "Binary", "Utf8", "Bool", "Decimal", "Date", "Time",
    "Timestamp", "Interval", "List", "Struct", "Union", "FixedSizeBinary", "FixedSizeList", "Map",
    "Duration", "LargeBinary", "LargeUtf8", "LargeList", "RunEndEncoded", "BinaryView", "Utf8View",
    "ListView", "LargeListView"};

const char *pi_arrow_kind_name(int kind, int bits, int is_signed) {
    static const char *const ints[2][4] = {{"UInt8", "UInt16", "UInt32", "UInt64"}, {"Int8", "Int16", "Int32", "Int64"}};
    switch (kind) {
    case PI_ARROW_NULL: return "Null";
    case PI_ARROW_BOOL: return "Bool";
    case PI_ARROW_INT: return ints[is_signed ? 1 : 0][bits == 8 ? 0 : bits == 16 ? 1 : bits == 32 ? 2 : 3];
    case PI_ARROW_FLOAT: return bits == 16 ? "Float16" : bits == 32 ? "Float32" : "Float64";
    case PI_ARROW_UTF8: return "Utf8";
    case PI_ARROW_BINARY: return "Binary";
    case PI_ARROW_LARGE_UTF8: return "LargeUtf8";
    case PI_ARROW_LARGE_BINARY: return "LargeBinary";
    case PI_ARROW_LIST: return "List";
    case PI_ARROW_LARGE_LIST: return "LargeList";
    case PI_ARROW_FIXED_LIST: return "FixedSizeList";
    case PI_ARROW_STRUCT: return "Struct";
    case PI_ARROW_FIXED_BINARY: return "FixedSizeBinary";
    case PI_ARROW_MAP: return "Map";
    case PI_ARROW_DICT: return "Dictionary";
    case PI_ARROW_INTERVAL: return "Interval";
    case PI_ARROW_UNION: return "Union";
    }
    return "?";
}

/* ---- schema -------------------------------------------------------------- */
struct sch_parse {
    struct pi_arrow_schema *s;
    uint32_t budget; /* fields still allowed: bounds a schema whose vectors share tables */
    uint32_t *nnodes, *nbufs; /* the numbering in use: the record batches' or a dictionary's */
    int version;     /* V4 or V5 */
};

static int parse_field(struct sch_parse *sp, const struct pi_fbt *ft, const char *parent, uint32_t depth,
                       struct pi_arrow_field *f, int values);

/* The type of field f (type tt, its table type when has_type): kind, widths,
 * annotations; *need_children: the children it must have (-1 any). */
static int parse_type(struct sch_parse *sp, uint8_t tt, const struct pi_fbt *ty, int has_type, const char *path,
                      struct pi_arrow_field *f, int *need_children) {
    struct pi_fbt type = has_type ? *ty : (struct pi_fbt){0};
    const char *tn = tt < PI_ARRAY_LEN(type_names) ? type_names[tt] : "unknown";
    *need_children = 0;
    switch (tt) {
    case 1: f->kind = PI_ARROW_NULL; break;
    case 2: {
        int32_t bw = 0;
        uint8_t sg = 0;
        if (has_type) {
            FORWARD_IF(pi_fb_i32(&type, 0, 0, &bw));
            FORWARD_IF(pi_fb_u8(&type, 1, 0, &sg));
        }
        if (bw != 8 && bw != 16 && bw != 32 && bw != 64)
            return pi_err(PI_ARROW_E_FORMAT, "field '%s': Int of %d bits", path, (int)bw);
        f->kind = PI_ARROW_INT;
        f->bits = (uint16_t)bw;
        f->is_signed = sg != 0;
        break;
    }
    case 3: {
        int16_t pr = 0;
        if (has_type) FORWARD_IF(pi_fb_i16(&type, 0, 0, &pr));
        if (pr < 0 || pr > 2) return pi_err(PI_ARROW_E_FORMAT, "field '%s': FloatingPoint precision %d", path, pr);
        f->kind = PI_ARROW_FLOAT;
        f->bits = (uint16_t)(16 << pr);
        break;
    }
    case 4: f->kind = PI_ARROW_BINARY; break;
    case 5: f->kind = PI_ARROW_UTF8; break;
    case 6: f->kind = PI_ARROW_BOOL; break;
    case 12: f->kind = PI_ARROW_LIST; *need_children = 1; break;
    case 13: f->kind = PI_ARROW_STRUCT; *need_children = -1; break;
    case 16: {
        int32_t ls = 0;
        if (has_type) FORWARD_IF(pi_fb_i32(&type, 0, 0, &ls));
        if (ls < 0) return pi_err(PI_ARROW_E_FORMAT, "field '%s': FixedSizeList of size %d", path, (int)ls);
        f->kind = PI_ARROW_FIXED_LIST;
        f->list_size = ls;
        *need_children = 1;
        break;
    }
    case 7: { /* Decimal: precision, scale, bitWidth (128 unless said) */
        int32_t pr = 0, sc = 0, bw = 128;
        if (has_type) {
            FORWARD_IF(pi_fb_i32(&type, 0, 0, &pr));
            FORWARD_IF(pi_fb_i32(&type, 1, 0, &sc));
            FORWARD_IF(pi_fb_i32(&type, 2, 128, &bw));
        }
        if ((bw != 32 && bw != 64 && bw != 128 && bw != 256) || pr < 0 || pr > 255)
            return pi_err(PI_ARROW_E_FORMAT, "field '%s': Decimal(%d, %d) of %d bits", path, (int)pr, (int)sc, (int)bw);
        f->kind = PI_ARROW_INT, f->bits = (uint16_t)bw, f->is_signed = 1;
        f->logical = PAGEIN_LOGICAL_DECIMAL, f->precision = (uint8_t)pr, f->scale = sc;
        break;
    }
    case 8: { /* Date: DAY (int32) or MILLISECOND (int64, the default) */
        int16_t u = 1;
        if (has_type) FORWARD_IF(pi_fb_i16(&type, 0, 1, &u));
        if (u != 0 && u != 1) return pi_err(PI_ARROW_E_FORMAT, "field '%s': Date unit %d", path, u);
        f->kind = PI_ARROW_INT, f->bits = u ? 64 : 32, f->is_signed = 1;
        f->logical = PAGEIN_LOGICAL_DATE, f->unit = u ? PAGEIN_UNIT_MS : PAGEIN_UNIT_DAY;
        break;
    }
    case 9:    /* Time: unit (MILLISECOND), bitWidth (32) */
    case 10:   /* Timestamp: unit (SECOND), timezone */
    case 18: { /* Duration: unit (MILLISECOND) */
        int16_t u = tt == 10 ? 0 : 1;
        int32_t bw = tt == 9 ? 32 : 64;
        if (has_type) {
            FORWARD_IF(pi_fb_i16(&type, 0, u, &u));
            if (tt == 9) FORWARD_IF(pi_fb_i32(&type, 1, 32, &bw));
            const char *tz;
            uint32_t tzl;
            if (tt == 10 && pi_fb_string(&type, 1, &tz, &tzl) == 1 && tzl) f->utc = 1;
        }
        if (u < 0 || u > 3 || (bw != 32 && bw != 64))
            return pi_err(PI_ARROW_E_FORMAT, "field '%s': %s unit %d, %d bits", path, tn, u, (int)bw);
        f->kind = PI_ARROW_INT, f->bits = (uint16_t)bw, f->is_signed = 1;
        f->logical = tt == 9 ? PAGEIN_LOGICAL_TIME : tt == 10 ? PAGEIN_LOGICAL_TIMESTAMP : PAGEIN_LOGICAL_DURATION;
        f->unit = (uint8_t)(PAGEIN_UNIT_S + u);
        break;
    }
    case 11: { /* Interval: unit (YEAR_MONTH) */
        int16_t u = 0;
        if (has_type) FORWARD_IF(pi_fb_i16(&type, 0, 0, &u));
        if (u < 0 || u > 2) return pi_err(PI_ARROW_E_FORMAT, "field '%s': Interval unit %d", path, u);
        f->kind = PI_ARROW_INTERVAL, f->unit = (uint8_t)u, f->byte_width = u == 0 ? 4 : u == 1 ? 8 : 16;
        break;
    }
    case 14: { /* Union: mode (Sparse), typeIds (0, 1, ... unless said) */
        int16_t mode = 0;
        if (has_type) FORWARD_IF(pi_fb_i16(&type, 0, 0, &mode));
        if (mode != 0 && mode != 1) return pi_err(PI_ARROW_E_FORMAT, "field '%s': Union mode %d", path, mode);
        if (sp->version != V5)
            return pi_err(PAGEIN_E_UNSUPPORTED, "column '%s': a Union in V4 metadata (Arrow before 1.0) is not supported",
                          path);
        f->kind = PI_ARROW_UNION, f->union_mode = (uint8_t)mode;
        *need_children = -1;
        f->type_child = pi_arena_alloc(&sp->s->arena, 128);
        if (!f->type_child) return pi_err(-ENOMEM, "out of memory for the schema");
        memset(f->type_child, 0xFF, 128);
        uint32_t data = 0, n = 0;
        if (has_type) FORWARD_IF(pi_fb_vector(&type, 1, 4, &data, &n));
        f->byte_width = n ? (int32_t)n : -1; /* -1: ids are the child indexes */
        for (uint32_t i = 0; i < n; i++) {
            int32_t id = (int32_t)pi_fb_ld32(type.b->p + data + 4ull * i);
            if (id < 0 || id > 127 || f->type_child[id] != 0xFF)
                return pi_err(PI_ARROW_E_FORMAT, "field '%s': Union type id %d (ids are 0..127, each once)", path, (int)id);
            f->type_child[id] = (uint8_t)i;
        }
        break;
    }
    case 15: {
        int32_t bw = 0;
        if (has_type) FORWARD_IF(pi_fb_i32(&type, 0, 0, &bw));
        if (bw < 0) return pi_err(PI_ARROW_E_FORMAT, "field '%s': FixedSizeBinary of %d bytes", path, (int)bw);
        f->kind = PI_ARROW_FIXED_BINARY;
        f->byte_width = bw;
        break;
    }
    case 17: f->kind = PI_ARROW_MAP; *need_children = 1; break;
    case 19: f->kind = PI_ARROW_LARGE_BINARY; break;
    case 20: f->kind = PI_ARROW_LARGE_UTF8; break;
    case 21: f->kind = PI_ARROW_LARGE_LIST; *need_children = 1; break;
    case 0: return pi_err(PI_ARROW_E_FORMAT, "field '%s': no type", path);
    default: return pi_err(PAGEIN_E_UNSUPPORTED, "column '%s': type %s is not supported", path, tn);
    }
    return 0;
}

/* A dictionary-encoded field: its indexes here (one node, two buffers),
 * its values' field tree numbered within the DictionaryBatch messages
 * of its id (registered in the schema's dictionaries). */
static int parse_dict(struct sch_parse *sp, const struct pi_fbt *ft, const struct pi_fbt *enc, const char *parent,
                      uint32_t depth, struct pi_arrow_field *f) {
    struct pi_arrow_schema *s = sp->s;
    int64_t id = 0;
    FORWARD_IF(pi_fb_i64(enc, 0, 0, &id));
    struct pi_fbt it;
    int32_t bw = 32;
    uint8_t sg = 1;
    int rc = pi_fb_table(enc, 1, &it);
    FORWARD_IF(rc);
    if (rc == 1) {
        FORWARD_IF(pi_fb_i32(&it, 0, 0, &bw));
        FORWARD_IF(pi_fb_u8(&it, 1, 0, &sg));
    }
    if (bw != 8 && bw != 16 && bw != 32 && bw != 64)
        return pi_err(PI_ARROW_E_FORMAT, "field '%s': dictionary index of %d bits", f->path, (int)bw);
    f->kind = PI_ARROW_DICT, f->bits = (uint16_t)bw, f->is_signed = sg != 0, f->dict_id = id;
    f->nbufs = 2;
    *sp->nbufs += 2;
    f->tree_bufs = 2;
    f->dict_value = pi_arena_alloc(&s->arena, sizeof *f->dict_value);
    if (!f->dict_value) return pi_err(-ENOMEM, "out of memory for the schema");
    uint32_t vn = 0, vb = 0, *on = sp->nnodes, *ob = sp->nbufs;
    sp->nnodes = &vn, sp->nbufs = &vb;
    rc = parse_field(sp, ft, parent, depth + 1, f->dict_value, 1);
    sp->nnodes = on, sp->nbufs = ob;
    FORWARD_IF(rc);
    for (size_t i = 0; i < s->ndicts; i++) {
        if (s->dicts[i].id != id) continue;
        if (s->dicts[i].nnodes != vn || s->dicts[i].nbufs != vb || s->dicts[i].value->kind != f->dict_value->kind)
            return pi_err(PI_ARROW_E_FORMAT, "field '%s': dictionary %lld is shared by fields of different types",
                          f->path, (long long)id);
        return 0;
    }
    if (s->ndicts >= 4096) return pi_err(PAGEIN_E_LIMIT, "more than 4096 dictionaries");
    FORWARD_IF(pi_grow((void **)&s->dicts, &s->dcap, s->ndicts + 1, sizeof *s->dicts));
    struct pi_arrow_dict *d = &s->dicts[s->ndicts++];
    memset(d, 0, sizeof *d);
    d->id = id, d->value = f->dict_value, d->nnodes = vn, d->nbufs = vb;
    return 0;
}

/* values: the value tree of a dictionary-encoded field (its encoding read
 * already). */
static int parse_field(struct sch_parse *sp, const struct pi_fbt *ft, const char *parent, uint32_t depth,
                       struct pi_arrow_field *f, int values) {
    struct pi_arrow_schema *s = sp->s;
    memset(f, 0, sizeof *f);
    if (depth > PI_ARROW_MAX_DEPTH)
        return pi_err(PAGEIN_E_LIMIT, "field '%s': nested deeper than %d levels", parent, PI_ARROW_MAX_DEPTH);
    if (sp->budget == 0)
        return pi_err(PAGEIN_E_LIMIT, "more fields than the metadata can hold (or than %d)", PI_ARROW_MAX_FIELDS);
    sp->budget--;
    const char *nm = "";
    uint32_t nl = 0;
    FORWARD_IF(pi_fb_string(ft, FLD_NAME, &nm, &nl));
    char *name = pi_arena_strndup(&s->arena, nm, nl);
    size_t pl = strlen(parent);
    char *path = pi_arena_alloc(&s->arena, pl + 1 + nl + 1);
    if (!name || !path) return pi_err(-ENOMEM, "out of memory for the schema");
    if (pl) {
        memcpy(path, parent, pl);
        path[pl++] = '.';
    }
    for (uint32_t i = 0; i < nl; i++) path[pl + i] = nm[i] ? nm[i] : '?';
    path[pl + nl] = 0;
    f->name = name;
    f->name_len = nl;
    f->path = path;
    f->node = (*sp->nnodes)++;
    f->buf = *sp->nbufs;
    uint8_t nullable = 0, tt = 0;
    FORWARD_IF(pi_fb_u8(ft, FLD_NULLABLE, 0, &nullable));
    f->nullable = nullable != 0;
    FORWARD_IF(pi_fb_u8(ft, FLD_TYPE_TYPE, 0, &tt));
    struct pi_fbt dict, type;
    int rc = values ? 0 : pi_fb_table(ft, FLD_DICTIONARY, &dict);
    FORWARD_IF(rc);
    if (rc == 1) return parse_dict(sp, ft, &dict, parent, depth, f);
    int has_type = pi_fb_table(ft, FLD_TYPE, &type);
    FORWARD_IF(has_type);
    int need_children = 0; /* -1: any number */
    FORWARD_IF(parse_type(sp, tt, &type, has_type, path, f, &need_children));
    static const uint8_t nbufs[] = {0, 0, 2, 2, 2, 3, 3, 3, 3, 2, 2, 1, 1, 2, 2, 2, 2, 1};
    f->nbufs = f->kind == PI_ARROW_UNION ? 1u + f->union_mode : nbufs[f->kind];
    *sp->nbufs += f->nbufs;
    uint32_t first_buf = f->buf;
    uint32_t cdata = 0, nc = 0;
    FORWARD_IF(pi_fb_vector(ft, FLD_CHILDREN, 4, &cdata, &nc));
    if (need_children >= 0 && nc != (uint32_t)need_children)
        return pi_err(PI_ARROW_E_FORMAT, "field '%s': %s with %u children", path,
                      pi_arrow_kind_name(f->kind, f->bits, f->is_signed), nc);
    if (f->kind == PI_ARROW_UNION) {
        if (nc > 127) return pi_err(PAGEIN_E_LIMIT, "field '%s': a Union of %u members", path, nc);
        if (f->byte_width < 0) /* no typeIds: a member's id is its index */
            for (uint32_t i = 0; i < nc; i++) f->type_child[i] = (uint8_t)i;
        else if ((uint32_t)f->byte_width != nc)
            return pi_err(PI_ARROW_E_FORMAT, "field '%s': %d type ids for %u members", path, (int)f->byte_width, nc);
        f->byte_width = 0;
    }
    if (nc > sp->budget)
        return pi_err(PAGEIN_E_LIMIT, "field '%s': more fields than the metadata can hold", path);
    if (nc) {
        f->children = pi_arena_alloc(&s->arena, (size_t)nc * sizeof *f->children);
        if (!f->children) return pi_err(-ENOMEM, "out of memory for the schema");
        f->nchildren = nc;
        for (uint32_t i = 0; i < nc; i++) {
            struct pi_fbt ct;
            FORWARD_IF(pi_fb_vec_table(ft->b, cdata, i, &ct));
            FORWARD_IF(parse_field(sp, &ct, path, depth + 1, &f->children[i], 0));
        }
    }
    f->tree_bufs = *sp->nbufs - first_buf;
    return 0;
}

static int parse_schema(const struct pi_fbt *st, uint32_t meta_len, int version, struct pi_arrow_schema *s) {
    int16_t endian = 0;
    FORWARD_IF(pi_fb_i16(st, SCH_ENDIANNESS, 0, &endian));
    if (endian != 0) return pi_err(PAGEIN_E_ENDIAN, "schema: big-endian bodies are not supported");
    uint32_t data = 0, n = 0;
    FORWARD_IF(pi_fb_vector(st, SCH_FIELDS, 4, &data, &n));
    struct sch_parse sp = {s, PI_MIN(meta_len / 4, (uint32_t)PI_ARROW_MAX_FIELDS), &s->nnodes, &s->nbufs, version};
    if (n > sp.budget) return pi_err(PAGEIN_E_LIMIT, "schema: %u columns", n);
    if (n) {
        s->fields = pi_arena_alloc(&s->arena, (size_t)n * sizeof *s->fields);
        if (!s->fields) return pi_err(-ENOMEM, "out of memory for the schema");
    }
    s->nfields = n;
    for (uint32_t i = 0; i < n; i++) {
        struct pi_fbt ft;
        FORWARD_IF(pi_fb_vec_table(st->b, data, i, &ft));
        FORWARD_IF(parse_field(&sp, &ft, "", 0, &s->fields[i], 0));
    }
    return 0;
}

/* ---- messages ------------------------------------------------------------ */
struct msg {
    uint8_t type;
    int16_t version;
    int64_t body_len;
    struct pi_fbt hdr;
};

/* Parses a Message flatbuffer. */
static int parse_message(const struct pi_fb *fb, struct msg *m) {
    struct pi_fbt root;
    FORWARD_IF(pi_fb_root(fb, &root));
    int16_t ver = 0;
    FORWARD_IF(pi_fb_i16(&root, MSG_VERSION, 0, &ver));
    if (ver != V4 && ver != V5)
        return pi_err(PAGEIN_E_BAD_VERSION, "metadata version V%d (Arrow before 0.15/1.0 or unknown): V4 and V5 are read", ver + 1);
    m->version = ver;
    FORWARD_IF(pi_fb_u8(&root, MSG_HEADER_TYPE, 0, &m->type));
    FORWARD_IF(pi_fb_i64(&root, MSG_BODY_LENGTH, 0, &m->body_len));
    if (m->body_len < 0) return pi_err(PI_ARROW_E_FORMAT, "negative bodyLength %lld", (long long)m->body_len);
    int rc = pi_fb_table(&root, MSG_HEADER, &m->hdr);
    FORWARD_IF(rc);
    if (rc == 0) return pi_err(PI_ARROW_E_FORMAT, "message without a header");
    return 0;
}

/* The encapsulation prefix at p[0, avail): *pre (4 legacy, 8 with the
 * continuation marker) and *meta (0 = end of stream). */
static int parse_prefix(const uint8_t *p, size_t avail, uint32_t *pre, uint32_t *meta) {
    if (avail < 4) return pi_err(PAGEIN_E_TRUNCATED, "message prefix cut short");
    uint32_t w = pi_fb_ld32(p);
    if (w == 0xFFFFFFFFu) {
        if (avail < 8) return pi_err(PAGEIN_E_TRUNCATED, "message prefix cut short");
        *pre = 8;
        w = pi_fb_ld32(p + 4);
    } else {
        *pre = 4; /* pre-0.15 streams: the length alone */
    }
    if (w > PI_ARROW_MAX_META)
        return pi_err(w >= 0x80000000u ? PI_ARROW_E_FORMAT : PAGEIN_E_LIMIT, "message metadata of %u bytes", w);
    *meta = w;
    return 0;
}

/* Checks a RecordBatch header against the schema (the cheap, whole-batch
 * facts; decode checks the rest) and returns its rows. */
static int check_rb(const struct pi_fbt *rb, uint32_t want_nodes, uint32_t want_bufs, int64_t *rows, int *codec);
static int check_batch_header(const struct pi_arrow *a, const struct pi_fbt *rb, int64_t *rows, int *codec) {
    return check_rb(rb, a->schema.nnodes, a->schema.nbufs, rows, codec);
}

/* A RecordBatch table (of a record batch, or a dictionary's) against the
 * nodes and buffers its fields need. */
static int check_rb(const struct pi_fbt *rb, uint32_t want_nodes, uint32_t want_bufs, int64_t *rows, int *codec) {
    FORWARD_IF(pi_fb_i64(rb, RB_LENGTH, 0, rows));
    if (*rows < 0) return pi_err(PI_ARROW_E_FORMAT, "negative length %lld", (long long)*rows);
    if (*rows > PI_ARROW_MAX_ROWS) return pi_err(PAGEIN_E_LIMIT, "%lld rows in one batch", (long long)*rows);
    uint32_t d, nn, nb, nv;
    FORWARD_IF(pi_fb_vector(rb, RB_NODES, 16, &d, &nn));
    FORWARD_IF(pi_fb_vector(rb, RB_BUFFERS, 16, &d, &nb));
    FORWARD_IF(pi_fb_vector(rb, RB_VARIADIC, 8, &d, &nv));
    if (nn != want_nodes)
        return pi_err(PI_ARROW_E_FORMAT, "%u field nodes where the schema has %u fields", nn, want_nodes);
    if (nb != want_bufs)
        return pi_err(PI_ARROW_E_FORMAT, "%u buffers where the schema needs %u", nb, want_bufs);
    if (nv) return pi_err(PI_ARROW_E_FORMAT, "variadic buffer counts without a view column");
    struct pi_fbt comp;
    int rc = pi_fb_table(rb, RB_COMPRESSION, &comp);
    FORWARD_IF(rc);
    *codec = -1;
    if (rc == 1) {
        uint8_t c = 0, m = 0;
        FORWARD_IF(pi_fb_u8(&comp, 0, 0, &c));
        FORWARD_IF(pi_fb_u8(&comp, 1, 0, &m));
        if (c > 1) return pi_err(PAGEIN_E_UNSUPPORTED, "body compression codec %u (LZ4_FRAME and ZSTD are read)", c);
        if (m != 0) return pi_err(PAGEIN_E_UNSUPPORTED, "body compression method %u (BUFFER is read)", m);
        *codec = c;
    }
    return 0;
}

static int add_batch(struct pi_arrow *a, size_t *cap, uint64_t off, uint64_t meta, uint64_t body, int64_t rows,
                     const struct pi_fb *fb) {
    FORWARD_IF(pi_grow((void **)&a->batches, cap, a->nbatches + 1, sizeof *a->batches));
    uint8_t *copy = pi_arena_alloc(&a->meta, fb->n);
    if (!copy) return pi_err(-ENOMEM, "out of memory for batch metadata");
    memcpy(copy, fb->p, fb->n);
    struct pi_arrow_batch_ref *r = &a->batches[a->nbatches++];
    r->fb = copy;
    r->fb_len = fb->n;
    r->offset = off;
    r->meta_len = meta;
    r->body_len = body;
    r->rows = (uint64_t)rows;
    r->first_row = a->nrows;
    if (pi_add_overflow(a->nrows, (uint64_t)rows, &a->nrows))
        return pi_err(PI_ARROW_E_FORMAT, "row count overflows");
    return 0;
}

static const char *hdr_name(uint8_t t) {
    static const char *const n[] = {"NONE", "Schema", "DictionaryBatch", "RecordBatch", "Tensor", "SparseTensor"};
    return t < PI_ARRAY_LEN(n) ? n[t] : "unknown";
}

/* Reads the metadata of the message at off (len bytes after the prefix). */
static int read_meta(pi_arrow_read_fn rd, void *ctx, uint64_t off, uint32_t len, uint8_t **buf, size_t *cap) {
    if (len > *cap) {
        uint8_t *n = pi_malloc(len);
        if (!n) return pi_err(-ENOMEM, "out of memory for %u bytes of metadata", len);
        pi_free(*buf);
        *buf = n;
        *cap = len;
    }
    return rd(ctx, off, *buf, len);
}

static int load_dict(struct pi_arrow *a, const struct pi_fbt *hdr, uint8_t *owned, const uint8_t *body,
                     uint64_t body_len);

/* n more bytes of dictionaries held from open. */
static int dict_budget(struct pi_arrow *a, uint64_t n) {
    if (n > PI_ARROW_DEFAULT_BATCH_BYTES - a->schema.dict_bytes)
        return pi_err(PAGEIN_E_LIMIT, "dictionaries of more than %llu bytes", (unsigned long long)PI_ARROW_DEFAULT_BATCH_BYTES);
    a->schema.dict_bytes += n;
    return 0;
}

/* One Block of the footer at b (int64 offset, int32 metaDataLength, 4
 * padding, int64 bodyLength), checked to lie inside the data (foot). */
static int footer_block(const uint8_t *b, uint64_t foot, int64_t *off, int32_t *ml, int64_t *body) {
    *off = pi_fb_ld64(b), *body = pi_fb_ld64(b + 16);
    memcpy(ml, b + 8, 4);
    uint64_t end;
    if (*off < 8 || *ml < 8 || *body < 0 || (uint64_t)*off > foot || (uint64_t)*ml > foot - (uint64_t)*off ||
        pi_add_overflow((uint64_t)*off + (uint64_t)*ml, (uint64_t)*body, &end) || end > foot)
        return pi_err(PI_ARROW_E_FORMAT, "block (offset %lld, metaDataLength %d, bodyLength %lld) outside the data",
                      (long long)*off, (int)*ml, (long long)*body);
    if ((uint32_t)*ml > PI_ARROW_MAX_META + 8) return pi_err(PAGEIN_E_LIMIT, "metadata of %d bytes", (int)*ml);
    return 0;
}

/* The message of a footer Block from its ml metadata bytes at p: a
 * message of type want whose bodyLength is the footer's body; *mfb its
 * flatbuffer. */
static int block_message(const uint8_t *p, int32_t ml, int64_t body, uint8_t want, struct pi_fb *mfb, struct msg *m) {
    uint32_t pre = 0, mlen = 0;
    FORWARD_IF(parse_prefix(p, (uint32_t)ml, &pre, &mlen));
    if (mlen == 0 || mlen > (uint32_t)ml - pre)
        return pi_err(PI_ARROW_E_FORMAT, "metadata of %u bytes in a block of %d", mlen, (int)ml);
    *mfb = (struct pi_fb){p + pre, mlen};
    FORWARD_IF(parse_message(mfb, m));
    if (m->type != want)
        return pi_err(PI_ARROW_E_FORMAT, "block holds a %s, not a %s", hdr_name(m->type), hdr_name(want));
    if (m->body_len != body)
        return pi_err(PI_ARROW_E_FORMAT, "bodyLength %lld where the footer says %lld", (long long)m->body_len,
                      (long long)body);
    return 0;
}

/* The file's dictionary blocks (footer vector at dd, nd entries of 24
 * bytes in fb), each read whole and loaded. */
static int open_file_dicts(struct pi_arrow *a, pi_arrow_read_fn rd, void *ctx, const uint8_t *fb, uint32_t dd,
                           uint32_t nd, uint64_t foot) {
    for (uint32_t i = 0; i < nd; i++) {
        int64_t off, body;
        int32_t ml;
        int rc;
        if ((rc = footer_block(fb + dd + 24ull * i, foot, &off, &ml, &body)) < 0) goto err;
        if ((rc = dict_budget(a, (uint64_t)ml + (uint64_t)body)) < 0) goto err;
        uint8_t *buf = pi_malloc((size_t)ml + (size_t)body);
        if (!buf) return pi_err(-ENOMEM, "out of memory for a dictionary of %lld bytes", (long long)body);
        if ((rc = rd(ctx, (uint64_t)off, buf, (size_t)ml + (size_t)body)) < 0) {
            pi_free(buf);
            return rc;
        }
        struct pi_fb mfb;
        struct msg m;
        if ((rc = block_message(buf, ml, body, HDR_DICTIONARY, &mfb, &m)) < 0) {
            pi_free(buf);
            goto err;
        }
        if ((rc = load_dict(a, &m.hdr, buf, buf + ml, (uint64_t)body)) < 0) goto err;
        continue;
    err: {
        char p[48];
        snprintf(p, sizeof p, "dictionary block %u", i);
        pi_err_prefix(p);
        return rc;
    }
    }
    return 0;
}

static int open_stream(struct pi_arrow *a, pi_arrow_read_fn rd, void *ctx) {
    uint8_t *mb = NULL;
    size_t mcap = 0, bcap = 0;
    uint64_t pos = 0;
    int rc = 0, have_schema = 0;
    for (size_t k = 0;; k++) {
        if (pos == a->size) break; /* end without the end-of-stream marker: allowed */
        uint8_t pb[8];
        size_t avail = (size_t)PI_MIN(a->size - pos, 8);
        if ((rc = rd(ctx, pos, pb, avail)) < 0) break;
        uint32_t pre, ml;
        if ((rc = parse_prefix(pb, avail, &pre, &ml)) < 0) goto at;
        if (ml == 0) break; /* end of stream */
        if (ml > a->size - pos - pre) {
            rc = pi_err(PAGEIN_E_TRUNCATED, "metadata of %u bytes runs past the end", ml);
            goto at;
        }
        if ((rc = read_meta(rd, ctx, pos + pre, ml, &mb, &mcap)) < 0) break;
        struct pi_fb fb = {mb, ml};
        struct msg m;
        if ((rc = parse_message(&fb, &m)) < 0) goto at;
        uint64_t after = pos + pre + ml;
        if ((uint64_t)m.body_len > a->size - after) {
            rc = pi_err(PAGEIN_E_TRUNCATED, "body of %lld bytes runs past the end", (long long)m.body_len);
            goto at;
        }
        if (!have_schema) {
            if (m.type != HDR_SCHEMA) {
                rc = pi_err(PI_ARROW_E_FORMAT, "first message is a %s, not the Schema", hdr_name(m.type));
                goto at;
            }
            if ((rc = parse_schema(&m.hdr, ml, m.version, &a->schema)) < 0) goto at;
            have_schema = 1;
        } else if (m.type == HDR_RECORD_BATCH) {
            int64_t rows;
            int codec;
            if ((rc = check_batch_header(a, &m.hdr, &rows, &codec)) < 0) {
                char p[48];
                snprintf(p, sizeof p, "batch %zu", a->nbatches);
                pi_err_prefix(p);
                goto at;
            }
            if (codec >= 0 && !a->compressed) a->compressed = 1 + codec;
            if ((rc = add_batch(a, &bcap, pos, pre + (uint64_t)ml, (uint64_t)m.body_len, rows, &fb)) < 0) goto at;
        } else if (m.type == HDR_DICTIONARY) {
            uint8_t *body = NULL;
            if ((rc = dict_budget(a, (uint64_t)m.body_len)) < 0) goto at;
            if (m.body_len && !(body = pi_malloc((size_t)m.body_len))) {
                rc = pi_err(-ENOMEM, "out of memory for a dictionary of %lld bytes", (long long)m.body_len);
                goto at;
            }
            if (body && (rc = rd(ctx, after, body, (size_t)m.body_len)) < 0) {
                pi_free(body);
                break;
            }
            if ((rc = load_dict(a, &m.hdr, body, body, (uint64_t)m.body_len)) < 0) goto at;
        } else {
            rc = pi_err(PI_ARROW_E_FORMAT, "unexpected %s message", hdr_name(m.type));
            goto at;
        }
        pos = after + (uint64_t)m.body_len;
        continue;
    at: {
        char p[80];
        snprintf(p, sizeof p, "message %zu at byte %llu", k, (unsigned long long)pos);
        pi_err_prefix(p);
        break;
    }
    }
    pi_free(mb);
    if (rc == 0 && !have_schema) rc = pi_err(PI_ARROW_E_FORMAT, "stream without a Schema message");
    return rc;
}

static int open_file(struct pi_arrow *a, pi_arrow_read_fn rd, void *ctx) {
    /* "ARROW1" + 2 padding bytes, the stream, the footer, int32 footer
     * length, "ARROW1". */
    if (a->size < 8 + 10) return pi_err(PAGEIN_E_TRUNCATED, "file of %llu bytes", (unsigned long long)a->size);
    uint8_t tail[10];
    FORWARD_IF(rd(ctx, a->size - 10, tail, 10));
    if (memcmp(tail + 4, "ARROW1", 6) != 0) return pi_err(PI_ARROW_E_FORMAT, "no ARROW1 magic at the end (truncated?)");
    uint32_t fl = pi_fb_ld32(tail);
    if (fl == 0 || fl > a->size - 18)
        return pi_err(PI_ARROW_E_FORMAT, "footer of %u bytes in a file of %llu", fl, (unsigned long long)a->size);
    if (fl > PI_ARROW_MAX_META) return pi_err(PAGEIN_E_LIMIT, "footer of %u bytes", fl);
    uint64_t foot = a->size - 10 - fl;
    uint8_t *fb_bytes = NULL, *mb = NULL;
    size_t fcap = 0, mcap = 0, bcap = 0;
    int rc = read_meta(rd, ctx, foot, fl, &fb_bytes, &fcap);
    if (rc < 0) goto done;
    struct pi_fb fb = {fb_bytes, fl};
    struct pi_fbt root, st;
    if ((rc = pi_fb_root(&fb, &root)) < 0) goto foot_err;
    if ((rc = pi_fb_table(&root, FOOT_SCHEMA, &st)) < 0) goto foot_err;
    if (rc == 0) {
        rc = pi_err(PI_ARROW_E_FORMAT, "no schema");
        goto foot_err;
    }
    int16_t fver = V5;
    if ((rc = pi_fb_i16(&root, 0, V5, &fver)) < 0) goto foot_err;
    if ((rc = parse_schema(&st, fl, fver, &a->schema)) < 0) goto foot_err;
    uint32_t dd, nd, bd, nb;
    if ((rc = pi_fb_vector(&root, FOOT_DICTIONARIES, 24, &dd, &nd)) < 0) goto foot_err;
    if (nd && (rc = open_file_dicts(a, rd, ctx, fb_bytes, dd, nd, foot)) < 0) goto done;
    if ((rc = pi_fb_vector(&root, FOOT_BATCHES, 24, &bd, &nb)) < 0) goto foot_err;
    for (uint32_t i = 0; i < nb; i++) {
        int64_t off, body;
        int32_t ml;
        if ((rc = footer_block(fb_bytes + bd + 24ull * i, foot, &off, &ml, &body)) < 0) goto batch_err;
        if ((rc = read_meta(rd, ctx, (uint64_t)off, (uint32_t)ml, &mb, &mcap)) < 0) goto done;
        struct pi_fb mfb;
        struct msg m;
        int64_t rows;
        int codec;
        if ((rc = block_message(mb, ml, body, HDR_RECORD_BATCH, &mfb, &m)) < 0) goto batch_err;
        if ((rc = check_batch_header(a, &m.hdr, &rows, &codec)) < 0) goto batch_err;
        if (codec >= 0 && !a->compressed) a->compressed = 1 + codec;
        if ((rc = add_batch(a, &bcap, (uint64_t)off, (uint64_t)ml, (uint64_t)body, rows, &mfb)) < 0) goto done;
        continue;
    batch_err: {
        char p[48];
        snprintf(p, sizeof p, "batch %u", i);
        pi_err_prefix(p);
        goto done;
    }
    }
    goto done;
foot_err:
    pi_err_prefix("footer");
done:
    pi_free(fb_bytes);
    pi_free(mb);
    return rc;
}

int pi_arrow_open(struct pi_arrow *a, const char *name, uint64_t size, pi_arrow_read_fn rd, void *ctx) {
    memset(a, 0, sizeof *a);
    a->size = size;
    a->max_batch_bytes = PI_ARROW_DEFAULT_BATCH_BYTES;
    a->name = pi_strndup(name ? name : "arrow", strlen(name ? name : "arrow"));
    if (!a->name) return pi_err(-ENOMEM, "out of memory");
    uint8_t head[8] = {0};
    int rc = 0;
    if (size < 4) {
        rc = pi_err(PAGEIN_E_BAD_MAGIC, "%llu bytes: not Arrow IPC", (unsigned long long)size);
    } else if ((rc = rd(ctx, 0, head, (size_t)PI_MIN(size, 8))) >= 0) {
        if (size >= 6 && memcmp(head, "ARROW1", 6) == 0) {
            a->kind = PI_ARROW_FILE;
            rc = open_file(a, rd, ctx);
        } else if (pi_fb_ld32(head) == 0xFFFFFFFFu || (pi_fb_ld32(head) > 0 && pi_fb_ld32(head) < PI_ARROW_MAX_META)) {
            a->kind = PI_ARROW_STREAM;
            rc = open_stream(a, rd, ctx);
        } else {
            rc = pi_err(PAGEIN_E_BAD_MAGIC, "neither an Arrow IPC file (ARROW1) nor a stream");
        }
    }
    if (rc < 0) {
        pi_err_prefix(a->name);
        pi_arrow_close(a);
        return rc;
    }
    return 0;
}

struct mem_src {
    const uint8_t *p;
    size_t n;
};
static int mem_read(void *ctx, uint64_t off, void *dst, size_t len) {
    const struct mem_src *m = ctx;
    if (off > m->n || len > m->n - off) return pi_err(PAGEIN_E_TRUNCATED, "read past the end");
    memcpy(dst, m->p + off, len);
    return 0;
}

int pi_arrow_open_mem(struct pi_arrow *a, const char *name, const void *buf, size_t len) {
    struct mem_src m = {buf, len};
    return pi_arrow_open(a, name, len, mem_read, &m);
}

void pi_arrow_close(struct pi_arrow *a) {
    if (!a) return;
    for (size_t i = 0; i < a->schema.ndicts; i++) {
        struct pi_arrow_dict *d = &a->schema.dicts[i];
        for (size_t k = 0; k < d->npieces; k++) {
            pi_arrow_batch_free(d->pieces[k].b);
            pi_free(d->pieces[k].b);
            pi_free(d->pieces[k].bytes);
        }
        pi_free(d->pieces);
    }
    pi_free(a->schema.dicts);
    pi_arena_free(&a->schema.arena);
    pi_arena_free(&a->meta);
    pi_free(a->batches);
    pi_free(a->name);
    memset(a, 0, sizeof *a);
}

int pi_arrow_column(const struct pi_arrow *a, const char *name, size_t len) {
    for (uint32_t i = 0; i < a->schema.nfields; i++)
        if (a->schema.fields[i].name_len == len && memcmp(a->schema.fields[i].name, name, len) == 0) return (int)i;
    return pi_err(PAGEIN_E_NOT_FOUND, "%s: no column '%.*s'", a->name, (int)PI_MIN(len, 200), name);
}

/* ---- decode -------------------------------------------------------------- */
struct dec {
    const struct pi_arrow *a;
    struct pi_arrow_batch *b;
    const uint8_t *nodes, *bufs; /* FieldNode / Buffer vectors (16 bytes each) */
    const struct pi_arrow_seg *segs;
    size_t nsegs;
    uint64_t body_len;
    int codec; /* -1 uncompressed */
#ifdef PAGEIN_HAVE_ZSTD
    ZSTD_DCtx *zd;
#endif
#ifdef PAGEIN_HAVE_LZ4
    LZ4F_dctx *ld;
#endif
};

static void dec_free(struct dec *d) {
#ifdef PAGEIN_HAVE_ZSTD
    ZSTD_freeDCtx(d->zd);
#endif
#ifdef PAGEIN_HAVE_LZ4
    if (d->ld) LZ4F_freeDecompressionContext(d->ld);
#endif
    (void)d;
}

int pi_arrow_have_codec(int codec) {
#ifdef PAGEIN_HAVE_LZ4
    if (codec == 0) return 1;
#endif
#ifdef PAGEIN_HAVE_ZSTD
    if (codec == 1) return 1;
#endif
    return codec < 0;
}

static const uint8_t empty_buf[8];

static int own(struct pi_arrow_batch *b, uint8_t *p) {
    if (pi_grow((void **)&b->owned, &b->owncap, b->nowned + 1, sizeof *b->owned) < 0) {
        pi_free(p);
        return -ENOMEM;
    }
    b->owned[b->nowned++] = p;
    return 0;
}

static int inflate(struct dec *d, const uint8_t *src, size_t n, uint8_t *dst, size_t ulen) {
#ifdef PAGEIN_HAVE_ZSTD
    if (d->codec == 1) {
        if (!d->zd && !(d->zd = ZSTD_createDCtx())) return pi_err(-ENOMEM, "out of memory for zstd");
        size_t r = ZSTD_decompressDCtx(d->zd, dst, ulen, src, n);
        if (ZSTD_isError(r)) return pi_err(PI_ARROW_E_FORMAT, "zstd: %s (declared %zu bytes)", ZSTD_getErrorName(r), ulen);
        if (r != ulen) return pi_err(PI_ARROW_E_FORMAT, "zstd gave %zu bytes, declared %zu", r, ulen);
        return 0;
    }
#endif
#ifdef PAGEIN_HAVE_LZ4
    if (d->codec != 0) return pi_err(PAGEIN_E_UNSUPPORTED, "codec %d", d->codec);
    if (!d->ld) {
        if (LZ4F_isError(LZ4F_createDecompressionContext(&d->ld, LZ4F_VERSION)))
            return pi_err(-ENOMEM, "out of memory for lz4");
    } else {
        LZ4F_resetDecompressionContext(d->ld);
    }
    size_t sp = 0, dp = 0;
    for (;;) {
        size_t sn = n - sp, dn = ulen - dp;
        size_t r = LZ4F_decompress(d->ld, dst + dp, &dn, src + sp, &sn, NULL);
        if (LZ4F_isError(r)) return pi_err(PI_ARROW_E_FORMAT, "lz4: %s", LZ4F_getErrorName(r));
        sp += sn;
        dp += dn;
        if (r == 0) break; /* frame complete */
        if (sn == 0 && dn == 0) {
            if (dp == ulen && sp < n)
                return pi_err(PI_ARROW_E_FORMAT, "lz4 frame holds more than the declared %zu bytes", ulen);
            return pi_err(PI_ARROW_E_FORMAT, "lz4 frame cut short (%zu of %zu bytes)", dp, ulen);
        }
    }
    if (dp != ulen) return pi_err(PI_ARROW_E_FORMAT, "lz4 frame gave %zu bytes, declared %zu", dp, ulen);
    if (sp != n) return pi_err(PI_ARROW_E_FORMAT, "%zu bytes after the lz4 frame", n - sp);
    return 0;
#else
    (void)src, (void)n, (void)dst, (void)ulen;
    return pi_err(PAGEIN_E_UNSUPPORTED, "codec %d", d->codec);
#endif
}

/* Buffer k of the batch: its bytes (inflated when compressed). */
static int get_buf(struct dec *d, uint32_t k, const uint8_t **p, uint64_t *len) {
    int64_t off = pi_fb_ld64(d->bufs + 16ull * k), n = pi_fb_ld64(d->bufs + 16ull * k + 8);
    if (off < 0 || n < 0 || (uint64_t)off > d->body_len || (uint64_t)n > d->body_len - (uint64_t)off)
        return pi_err(PI_ARROW_E_FORMAT, "buffer %u (offset %lld, length %lld) outside the body of %llu bytes", k,
                      (long long)off, (long long)n, (unsigned long long)d->body_len);
    const uint8_t *s = NULL;
    for (size_t i = 0; i < d->nsegs && n; i++) {
        const struct pi_arrow_seg *g = &d->segs[i];
        if ((uint64_t)off >= g->off && (uint64_t)off - g->off <= g->len && (uint64_t)n <= g->len - ((uint64_t)off - g->off)) {
            s = g->p + ((uint64_t)off - g->off);
            break;
        }
    }
    if (n && !s)
        return pi_err(PAGEIN_E_INVALID, "buffer %u (offset %lld, length %lld) is not in the bytes given", k,
                      (long long)off, (long long)n);
    if (d->codec < 0 || n == 0) { /* compressed bodies may write an empty buffer without its length */
        *p = n ? s : empty_buf;
        *len = (uint64_t)n;
        return 0;
    }
    if (n < 8) return pi_err(PI_ARROW_E_FORMAT, "compressed buffer %u of %lld bytes has no length", k, (long long)n);
    int64_t ulen = pi_fb_ld64(s);
    if (ulen == -1) {
        *p = n > 8 ? s + 8 : empty_buf;
        *len = (uint64_t)n - 8;
        return 0;
    }
    if (ulen < 0) return pi_err(PI_ARROW_E_FORMAT, "compressed buffer %u: length %lld", k, (long long)ulen);
    if ((uint64_t)ulen > d->a->max_batch_bytes - d->b->inflated)
        return pi_err(PAGEIN_E_LIMIT, "compressed buffer %u declares %lld bytes: the batch would inflate past %llu",
                      k, (long long)ulen, (unsigned long long)d->a->max_batch_bytes);
    if (ulen == 0) {
        *p = empty_buf;
        *len = 0;
        return 0;
    }
    uint8_t *dst = pi_malloc((size_t)ulen);
    if (!dst) return pi_err(-ENOMEM, "out of memory for %lld bytes of buffer %u", (long long)ulen, k);
    FORWARD_IF(own(d->b, dst));
    d->b->inflated += (uint64_t)ulen;
    int rc = inflate(d, s + 8, (size_t)n - 8, dst, (size_t)ulen);
    if (rc < 0) {
        char pfx[48];
        snprintf(pfx, sizeof pfx, "buffer %u", k);
        pi_err_prefix(pfx);
        return rc;
    }
    *p = dst;
    *len = (uint64_t)ulen;
    return 0;
}

static uint64_t count_zero_bits(const uint8_t *v, uint64_t len) {
    uint64_t ones = 0, full = len / 8;
    uint64_t i = 0;
    for (; i + 8 <= full; i += 8) {
        uint64_t w;
        memcpy(&w, v + i, 8);
        ones += (uint64_t)__builtin_popcountll(w);
    }
    for (; i < full; i++) ones += (uint64_t)__builtin_popcount(v[i]);
    if (len & 7) ones += (uint64_t)__builtin_popcount(v[full] & ((1u << (len & 7)) - 1));
    return len - ones;
}

/* An integer column's value or a dictionary's index (bits 8, 16, 32 or 64;
 * little-endian, any alignment), sign-extended when is_signed: the one
 * integer load of this file. A uint64 past INT64_MAX reads negative (a
 * dictionary index then fails its range check). */
static int64_t load_int(const uint8_t *p, unsigned bits, int is_signed) {
    switch (bits) {
    case 8: return is_signed ? (int8_t)p[0] : p[0];
    case 16: return is_signed ? (int16_t)pi_le16(p) : pi_le16(p);
    case 32: return is_signed ? (int32_t)pi_le32(p) : (int64_t)pi_le32(p);
    }
    return (int64_t)pi_le64(p);
}

/* Offsets (w = 4 or 8 bytes) of a length-element column: monotone, from
 * >= 0, last <= limit; *last = the last offset. */
static int check_offsets(const uint8_t *o, uint64_t len, int w, uint64_t limit, uint64_t *last) {
    int64_t prev = 0;
    for (uint64_t i = 0; i <= len; i++) {
        int64_t v = load_int(o + (uint64_t)w * i, 8 * (unsigned)w, 1);
        if (v < prev || (i == 0 && v < 0))
            return pi_err(PI_ARROW_E_FORMAT, "offset %llu (%lld) below the one before (%lld)", (unsigned long long)i,
                          (long long)v, (long long)prev);
        prev = v;
    }
    if ((uint64_t)prev > limit)
        return pi_err(PI_ARROW_E_FORMAT, "last offset %lld past the %llu values", (long long)prev,
                      (unsigned long long)limit);
    *last = (uint64_t)prev;
    return 0;
}

static int decode_col(struct dec *d, const struct pi_arrow_field *f, uint64_t need, struct pi_arrow_col *c);

/* A dictionary-encoded column's indexes (values buffer vals, vl bytes):
 * every non-null one inside its dictionary. */
static int check_dict(struct dec *d, const struct pi_arrow_field *f, const uint8_t *vals, uint64_t vl,
                      struct pi_arrow_col *c) {
    const struct pi_arrow_schema *s = &d->a->schema;
    const struct pi_arrow_dict *dict = NULL;
    for (size_t i = 0; i < s->ndicts && !dict; i++)
        if (s->dicts[i].id == f->dict_id) dict = &s->dicts[i];
    if (!dict) return pi_err(PI_ARROW_E_FORMAT, "dictionary %lld is not in the schema", (long long)f->dict_id);
    unsigned w = f->bits / 8;
    if (vl / w < c->length)
        return pi_err(PI_ARROW_E_FORMAT, "indexes buffer of %llu bytes for %llu values", (unsigned long long)vl,
                      (unsigned long long)c->length);
    for (uint64_t i = 0; i < c->length; i++) {
        if (c->validity && !((c->validity[i >> 3] >> (i & 7)) & 1)) continue;
        int64_t k = load_int(vals + i * w, f->bits, f->is_signed);
        if (k < 0 || (uint64_t)k >= dict->length)
            return pi_err(PI_ARROW_E_FORMAT, "index %lld at %llu outside dictionary %lld of %llu values", (long long)k,
                          (unsigned long long)i, (long long)f->dict_id, (unsigned long long)dict->length);
    }
    c->dict = dict;
    return 0;
}

/* A union (no validity bitmap since V5): type ids, each naming a member;
 * dense: int32 offsets, each inside its member. */
static int decode_union(struct dec *d, const struct pi_arrow_field *f, const uint8_t **bp, const uint64_t *bl,
                        struct pi_arrow_col *c) {
    if (bl[0] < c->length)
        return pi_err(PI_ARROW_E_FORMAT, "type ids buffer of %llu bytes for %llu values", (unsigned long long)bl[0],
                      (unsigned long long)c->length);
    int dense = f->union_mode == 1;
    if (dense && bl[1] / 4 < c->length)
        return pi_err(PI_ARROW_E_FORMAT, "offsets buffer of %llu bytes for %llu values", (unsigned long long)bl[1],
                      (unsigned long long)c->length);
    c->types = bp[0];
    c->offsets = dense ? bp[1] : NULL;
    if (f->nchildren) {
        c->children = pi_arena_alloc(&d->b->arena, (size_t)f->nchildren * sizeof *c->children);
        if (!c->children) return pi_err(-ENOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < f->nchildren; i++)
        FORWARD_IF(decode_col(d, &f->children[i], dense ? 0 : c->length, &c->children[i]));
    for (uint64_t i = 0; i < c->length; i++) {
        uint8_t t = c->types[i];
        if (t > 127 || f->type_child[t] == 0xFF)
            return pi_err(PI_ARROW_E_FORMAT, "type id %d at %llu names no member", (int)(int8_t)t, (unsigned long long)i);
        if (!dense) continue;
        int32_t o = (int32_t)pi_le32(c->offsets + 4 * i);
        if (o < 0 || (uint64_t)o >= c->children[f->type_child[t]].length)
            return pi_err(PI_ARROW_E_FORMAT, "offset %d at %llu outside member '%s'", (int)o, (unsigned long long)i,
                          f->children[f->type_child[t]].name);
    }
    return 0;
}

static int decode_col_inner(struct dec *d, const struct pi_arrow_field *f, uint64_t need, struct pi_arrow_col *c) {
    const uint8_t *nd = d->nodes + 16ull * f->node;
    int64_t len = pi_fb_ld64(nd), nulls = pi_fb_ld64(nd + 8);
    memset(c, 0, sizeof *c);
    c->f = f;
    if (len < 0 || nulls < 0 || nulls > len)
        return pi_err(PI_ARROW_E_FORMAT, "length %lld with %lld nulls", (long long)len, (long long)nulls);
    if ((uint64_t)len < need)
        return pi_err(PI_ARROW_E_FORMAT, "%lld values where %llu are needed", (long long)len, (unsigned long long)need);
    c->length = (uint64_t)len;
    c->null_count = (uint64_t)nulls;
    uint64_t bits_bytes = (c->length + 7) / 8;
    const uint8_t *bp[3] = {0};
    uint64_t bl[3] = {0};
    for (uint32_t k = 0; k < f->nbufs; k++) FORWARD_IF(get_buf(d, f->buf + k, &bp[k], &bl[k]));
    if (f->kind == PI_ARROW_NULL) return 0;
    if (f->kind == PI_ARROW_UNION) return decode_union(d, f, bp, bl, c);
    /* buffer 0: validity (every supported kind but Null has one) */
    if (c->null_count) {
        if (bl[0] < bits_bytes)
            return pi_err(PI_ARROW_E_FORMAT, "validity bitmap of %llu bytes for %llu values",
                          (unsigned long long)bl[0], (unsigned long long)c->length);
        uint64_t z = count_zero_bits(bp[0], c->length);
        if (z != c->null_count)
            return pi_err(PI_ARROW_E_FORMAT, "null count %llu, validity bitmap has %llu", (unsigned long long)c->null_count,
                          (unsigned long long)z);
        c->validity = bp[0];
    }
    uint64_t last = 0, need_bytes;
    int w;
    switch (f->kind) {
    case PI_ARROW_BOOL:
        need_bytes = bits_bytes;
        goto values;
    case PI_ARROW_DICT:
        FORWARD_IF(check_dict(d, f, bp[1], bl[1], c));
        need_bytes = c->length * (f->bits / 8);
        goto values;
    case PI_ARROW_FIXED_BINARY:
    case PI_ARROW_INTERVAL:
        if (pi_mul_overflow(c->length, (uint64_t)f->byte_width, &need_bytes))
            return pi_err(PI_ARROW_E_FORMAT, "%llu values of %d bytes overflow", (unsigned long long)c->length,
                          (int)f->byte_width);
        goto values;
    case PI_ARROW_INT:
    case PI_ARROW_FLOAT:
        if (pi_mul_overflow(c->length, (uint64_t)(f->bits / 8), &need_bytes))
            return pi_err(PI_ARROW_E_FORMAT, "%llu values overflow", (unsigned long long)c->length);
    values:
        if (bl[1] < need_bytes)
            return pi_err(PI_ARROW_E_FORMAT, "values buffer of %llu bytes for %llu %s values", (unsigned long long)bl[1],
                          (unsigned long long)c->length, pi_arrow_kind_name(f->kind, f->bits, f->is_signed));
        c->values = bp[1];
        c->values_len = bl[1];
        return 0;
    case PI_ARROW_UTF8:
    case PI_ARROW_BINARY:
    case PI_ARROW_LARGE_UTF8:
    case PI_ARROW_LARGE_BINARY:
    case PI_ARROW_LIST:
    case PI_ARROW_LARGE_LIST:
    case PI_ARROW_MAP:
        w = (f->kind == PI_ARROW_UTF8 || f->kind == PI_ARROW_BINARY || f->kind == PI_ARROW_LIST ||
             f->kind == PI_ARROW_MAP) ? 4 : 8;
        if (c->length == 0 && bl[1] == 0) { /* writers may leave out the single offset of an empty column */
            c->offsets = empty_buf;
        } else {
            if (c->length >= bl[1] / (uint64_t)w)
                return pi_err(PI_ARROW_E_FORMAT, "offsets buffer of %llu bytes for %llu values", (unsigned long long)bl[1],
                              (unsigned long long)c->length);
            c->offsets = bp[1];
        }
        if (f->kind == PI_ARROW_LIST || f->kind == PI_ARROW_LARGE_LIST || f->kind == PI_ARROW_MAP) {
            /* the child's length bounds the offsets: read its node first */
            int64_t clen = pi_fb_ld64(d->nodes + 16ull * f->children[0].node);
            if (clen < 0) clen = 0;
            FORWARD_IF(check_offsets(c->offsets, c->length, w, (uint64_t)clen, &last));
            c->children = pi_arena_alloc(&d->b->arena, sizeof *c->children);
            if (!c->children) return pi_err(-ENOMEM, "out of memory");
            return decode_col(d, &f->children[0], last, &c->children[0]);
        }
        FORWARD_IF(check_offsets(c->offsets, c->length, w, bl[2], &last));
        c->values = bp[2];
        c->values_len = bl[2];
        return 0;
    case PI_ARROW_FIXED_LIST: {
        uint64_t n;
        if (pi_mul_overflow(c->length, (uint64_t)f->list_size, &n))
            return pi_err(PI_ARROW_E_FORMAT, "%llu lists of %d overflow", (unsigned long long)c->length, f->list_size);
        c->children = pi_arena_alloc(&d->b->arena, sizeof *c->children);
        if (!c->children) return pi_err(-ENOMEM, "out of memory");
        return decode_col(d, &f->children[0], n, &c->children[0]);
    }
    case PI_ARROW_STRUCT:
        if (f->nchildren) {
            c->children = pi_arena_alloc(&d->b->arena, (size_t)f->nchildren * sizeof *c->children);
            if (!c->children) return pi_err(-ENOMEM, "out of memory");
        }
        for (uint32_t i = 0; i < f->nchildren; i++) FORWARD_IF(decode_col(d, &f->children[i], c->length, &c->children[i]));
        return 0;
    }
    return pi_err(PI_ARROW_E_FORMAT, "kind %d", f->kind);
}

static int decode_col(struct dec *d, const struct pi_arrow_field *f, uint64_t need, struct pi_arrow_col *c) {
    int rc = decode_col_inner(d, f, need, c);
    if (rc < 0 && rc != -ENOMEM && !strstr(pagein_last_error_detail(), "field '")) {
        char *p = pi_malloc(strlen(f->path) + 16);
        if (p) {
            sprintf(p, "field '%s'", f->path);
            pi_err_prefix(p);
            pi_free(p);
        }
    }
    return rc;
}

/* A DictionaryBatch (hdr) with its body: decoded whole into a new piece
 * of its dictionary (a delta, or the first of its id). owned (the bytes
 * the body lies in) is kept with the piece, or freed on failure. */
static int load_dict(struct pi_arrow *a, const struct pi_fbt *hdr, uint8_t *owned, const uint8_t *body,
                     uint64_t body_len) {
    int64_t id = 0, rows = 0;
    uint8_t delta = 0;
    struct pi_fbt rb;
    struct pi_arrow_dict *dict = NULL;
    struct pi_arrow_batch *b = NULL;
    int rc = pi_fb_i64(hdr, 0, 0, &id);
    if (rc == 0) rc = pi_fb_u8(hdr, 2, 0, &delta);
    if (rc == 0 && (rc = pi_fb_table(hdr, 1, &rb)) == 0) rc = pi_err(PI_ARROW_E_FORMAT, "DictionaryBatch without data");
    if (rc < 0) goto fail;
    for (size_t i = 0; i < a->schema.ndicts && !dict; i++)
        if (a->schema.dicts[i].id == id) dict = &a->schema.dicts[i];
    if (!dict) {
        rc = pi_err(PI_ARROW_E_FORMAT, "DictionaryBatch for id %lld, which no field uses", (long long)id);
        goto fail;
    }
    if (dict->npieces && !delta) {
        rc = pi_err(PAGEIN_E_UNSUPPORTED, "dictionary %lld (field '%s') replaced after its first batch: only deltas are read",
                    (long long)id, dict->value->path);
        goto fail;
    }
    struct dec d = {.a = a, .codec = -1, .body_len = body_len};
    struct pi_arrow_seg seg = {0, body_len, body};
    d.segs = &seg, d.nsegs = 1;
    if ((rc = check_rb(&rb, dict->nnodes, dict->nbufs, &rows, &d.codec)) < 0) goto fail;
    if (!pi_arrow_have_codec(d.codec)) {
        rc = pi_err(PAGEIN_E_UNSUPPORTED, "compressed dictionary: pagein was built without its codec");
        goto fail;
    }
    uint32_t dn, db, nn, nb;
    if ((rc = pi_fb_vector(&rb, RB_NODES, 16, &dn, &nn)) < 0 || (rc = pi_fb_vector(&rb, RB_BUFFERS, 16, &db, &nb)) < 0)
        goto fail;
    d.nodes = rb.b->p + dn, d.bufs = rb.b->p + db;
    if ((rc = pi_grow((void **)&dict->pieces, &dict->cap, dict->npieces + 1, sizeof *dict->pieces)) < 0) goto fail;
    if (!(b = pi_calloc(1, sizeof *b)) || !(b->cols = pi_arena_alloc(&b->arena, sizeof *b->cols))) {
        rc = pi_err(-ENOMEM, "out of memory for a dictionary");
        goto fail;
    }
    d.b = b;
    b->ncols = 1, b->rows = (uint64_t)rows;
    rc = decode_col(&d, dict->value, (uint64_t)rows, &b->cols[0]);
    dec_free(&d);
    if (rc == 0 && b->cols[0].length != (uint64_t)rows)
        rc = pi_err(PI_ARROW_E_FORMAT, "%llu values in a dictionary batch of %lld", (unsigned long long)b->cols[0].length,
                    (long long)rows);
    if (rc < 0) goto fail;
    dict->pieces[dict->npieces++] = (struct pi_arrow_dpiece){b, owned, dict->length};
    dict->length += (uint64_t)rows;
    return 0;
fail:
    if (b) {
        pi_arrow_batch_free(b);
        pi_free(b);
    }
    pi_free(owned);
    char p[64];
    snprintf(p, sizeof p, "dictionary %lld", (long long)id);
    pi_err_prefix(p);
    return rc;
}

int pi_arrow_resolve(const struct pi_arrow_col *c, uint64_t row, const struct pi_arrow_col **vc, uint64_t *vrow) {
    const struct pi_arrow_field *f = c->f;
    if (row >= c->length) return pi_err(PAGEIN_E_RANGE, "row %llu of %llu", (unsigned long long)row, (unsigned long long)c->length);
    if (f->kind == PI_ARROW_DICT && c->dict) {
        uint64_t k = (uint64_t)load_int(c->values + row * (f->bits / 8), f->bits, f->is_signed);
        const struct pi_arrow_dict *dict = c->dict;
        size_t lo = 0, hi = dict->npieces; /* the last piece starting at or before k */
        while (hi - lo > 1) {
            size_t mid = lo + (hi - lo) / 2;
            if (dict->pieces[mid].start <= k) lo = mid; else hi = mid;
        }
        if (k >= dict->length || !dict->npieces) return pi_err(PAGEIN_E_RANGE, "index %llu", (unsigned long long)k);
        *vc = &dict->pieces[lo].b->cols[0];
        *vrow = k - dict->pieces[lo].start;
        return 0;
    }
    if (f->kind == PI_ARROW_UNION) {
        uint8_t t = c->types[row];
        *vc = &c->children[f->type_child[t & 127]];
        if (c->offsets) {
            *vrow = (uint64_t)(int32_t)pi_le32(c->offsets + 4 * row);
        } else {
            *vrow = row;
        }
        return 0;
    }
    return pi_err(PAGEIN_E_INVALID, "field '%s' is neither a dictionary nor a union", f->path);
}

/* The stored Message of batch bi: its RecordBatch table. */
static int batch_header(const struct pi_arrow *a, size_t bi, struct pi_fb *fb, struct msg *m) {
    const struct pi_arrow_batch_ref *r = &a->batches[bi];
    fb->p = r->fb;
    fb->n = r->fb_len;
    return parse_message(fb, m); /* validated at open: cannot fail but for memory corruption */
}

int pi_arrow_col_span(const struct pi_arrow *a, size_t bi, uint32_t col, uint64_t *off, uint64_t *len) {
    *off = *len = 0;
    if (bi >= a->nbatches || col >= a->schema.nfields)
        return pi_err(PAGEIN_E_RANGE, "%s: batch %zu column %u", a->name, bi, col);
    struct pi_fb fb;
    struct msg m;
    FORWARD_IF(batch_header(a, bi, &fb, &m));
    uint32_t db, nb;
    FORWARD_IF(pi_fb_vector(&m.hdr, RB_BUFFERS, 16, &db, &nb));
    const struct pi_arrow_field *f = &a->schema.fields[col];
    uint64_t lo = UINT64_MAX, hi = 0, body = a->batches[bi].body_len;
    for (uint32_t k = f->buf; k < f->buf + f->tree_bufs; k++) {
        int64_t o = pi_fb_ld64(fb.p + db + 16ull * k), n = pi_fb_ld64(fb.p + db + 16ull * k + 8);
        if (o < 0 || n < 0 || (uint64_t)o > body || (uint64_t)n > body - (uint64_t)o)
            return pi_err(PI_ARROW_E_FORMAT, "%s: batch %zu: field '%s': buffer %u (offset %lld, length %lld) outside the body of %llu bytes",
                          a->name, bi, f->path, k, (long long)o, (long long)n, (unsigned long long)body);
        if (n == 0) continue;
        lo = PI_MIN(lo, (uint64_t)o);
        hi = PI_MAX(hi, (uint64_t)o + (uint64_t)n);
    }
    if (lo != UINT64_MAX) {
        *off = lo;
        *len = hi - lo;
    }
    return 0;
}

int pi_arrow_decode_segs(const struct pi_arrow *a, size_t bi, const struct pi_arrow_seg *segs, size_t nsegs,
                         const uint32_t *sel, size_t nsel, struct pi_arrow_batch *out) {
    memset(out, 0, sizeof *out);
    if (bi >= a->nbatches) return pi_err(PAGEIN_E_RANGE, "%s: batch %zu of %zu", a->name, bi, a->nbatches);
    const struct pi_arrow_batch_ref *r = &a->batches[bi];
    struct dec d = {.a = a, .b = out, .codec = -1, .segs = segs, .nsegs = nsegs, .body_len = r->body_len};
    int rc = 0;
    out->index = bi;
    out->rows = r->rows;
    out->ncols = a->schema.nfields;
    struct pi_fb fb;
    struct msg m;
    int64_t rows;
    if ((rc = batch_header(a, bi, &fb, &m)) < 0) goto fail;
    if ((rc = check_batch_header(a, &m.hdr, &rows, &d.codec)) < 0) goto fail;
    if (!pi_arrow_have_codec(d.codec)) {
        rc = pi_err(PAGEIN_E_UNSUPPORTED, "%s-compressed body: pagein was built without %s", d.codec ? "ZSTD" : "LZ4_FRAME",
                    d.codec ? "libzstd" : "liblz4");
        goto fail;
    }
    uint32_t dn, db, nd, nb; /* counts checked against the schema above */
    if ((rc = pi_fb_vector(&m.hdr, RB_NODES, 16, &dn, &nd)) < 0) goto fail;
    if ((rc = pi_fb_vector(&m.hdr, RB_BUFFERS, 16, &db, &nb)) < 0) goto fail;
    d.nodes = fb.p + dn;
    d.bufs = fb.p + db;
    if (a->schema.nfields) {
        out->cols = pi_arena_alloc(&out->arena, (size_t)a->schema.nfields * sizeof *out->cols);
        if (!out->cols) {
            rc = pi_err(-ENOMEM, "out of memory");
            goto fail;
        }
        memset(out->cols, 0, (size_t)a->schema.nfields * sizeof *out->cols);
    }
    size_t cnt = sel ? nsel : a->schema.nfields;
    for (size_t i = 0; i < cnt; i++) {
        uint32_t ci = sel ? sel[i] : (uint32_t)i;
        if (ci >= a->schema.nfields) {
            rc = pi_err(PAGEIN_E_INVALID, "column %u of %u", ci, a->schema.nfields);
            goto fail;
        }
        if (out->cols[ci].f) continue; /* selected twice */
        const struct pi_arrow_field *f = &a->schema.fields[ci];
        if ((rc = decode_col(&d, f, r->rows, &out->cols[ci])) < 0) goto fail;
        /* a top-level column has the batch's length */
        if (out->cols[ci].length != r->rows) {
            rc = pi_err(PI_ARROW_E_FORMAT, "field '%s': %llu values in a batch of %llu rows", f->path,
                        (unsigned long long)out->cols[ci].length, (unsigned long long)r->rows);
            goto fail;
        }
    }
    dec_free(&d);
    return 0;
fail:
    dec_free(&d);
    {
        char p[64];
        snprintf(p, sizeof p, "batch %zu", bi);
        pi_err_prefix(p);
        pi_err_prefix(a->name);
    }
    pi_arrow_batch_free(out);
    return rc;
}

int pi_arrow_decode(const struct pi_arrow *a, size_t bi, const uint8_t *msg, size_t n, const uint32_t *sel,
                    size_t nsel, struct pi_arrow_batch *out) {
    memset(out, 0, sizeof *out);
    if (bi >= a->nbatches) return pi_err(PAGEIN_E_RANGE, "%s: batch %zu of %zu", a->name, bi, a->nbatches);
    const struct pi_arrow_batch_ref *r = &a->batches[bi];
    if (n != r->meta_len + r->body_len)
        return pi_err(PAGEIN_E_INVALID, "%s: batch %zu: %zu bytes given for a message of %llu", a->name, bi, n,
                      (unsigned long long)(r->meta_len + r->body_len));
    /* the metadata was read and kept at open; msg must still hold the
     * same message (a file replaced since is caught here) */
    uint32_t pre = 0, ml = 0;
    if (parse_prefix(msg, (size_t)r->meta_len, &pre, &ml) < 0 || ml != r->fb_len ||
        memcmp(msg + pre, r->fb, ml) != 0)
        return pi_err(PAGEIN_E_CHANGED, "%s: batch %zu: the message differs from the one read at open", a->name, bi);
    struct pi_arrow_seg seg = {0, r->body_len, msg + r->meta_len};
    return pi_arrow_decode_segs(a, bi, &seg, 1, sel, nsel, out);
}

void pi_arrow_batch_free(struct pi_arrow_batch *b) {
    if (!b) return;
    for (size_t i = 0; i < b->nowned; i++) pi_free(b->owned[i]);
    pi_free(b->owned);
    pi_arena_free(&b->arena);
    memset(b, 0, sizeof *b);
}

/* IEEE half to double, through the float bit pattern (no libm). */
static double half_to_double(uint16_t h) {
    uint32_t e = (h >> 10) & 31, m = h & 1023, bits;
    float v;
    if (e == 0) {
        v = (float)m / 16777216.0f; /* subnormal: m * 2^-24, exact */
        return (h & 0x8000) ? -(double)v : (double)v;
    }
    bits = (e == 31) ? (0x7F800000u | (m << 13)) : (((e + 112u) << 23) | (m << 13));
    bits |= (uint32_t)(h & 0x8000) << 16;
    memcpy(&v, &bits, 4);
    return v;
}

int pi_arrow_get(const struct pi_arrow_col *c, uint64_t row, struct pi_arrow_val *v) {
    memset(v, 0, sizeof *v);
    if (row >= c->length) return pi_err(PAGEIN_E_RANGE, "row %llu of %llu", (unsigned long long)row, (unsigned long long)c->length);
    const struct pi_arrow_field *f = c->f;
    v->null = pi_arrow_is_null(c, row);
    if (v->null) return 0;
    switch (f->kind) {
    case PI_ARROW_BOOL:
        v->i = (c->values[row >> 3] >> (row & 7)) & 1;
        v->u = (uint64_t)v->i;
        break;
    case PI_ARROW_INT: {
        v->i = load_int(c->values + row * (f->bits / 8), f->bits, f->is_signed);
        v->u = (uint64_t)v->i;
        v->f = f->is_signed ? (double)v->i : (double)v->u;
        break;
    }
    case PI_ARROW_FLOAT: {
        const uint8_t *p = c->values + row * (f->bits / 8);
        v->u = (uint64_t)load_int(p, f->bits, 0); /* the bits */
        if (f->bits == 16) {
            v->f = half_to_double((uint16_t)v->u);
        } else if (f->bits == 32) {
            uint32_t b = (uint32_t)v->u;
            float x;
            memcpy(&x, &b, 4);
            v->f = x;
        } else {
            memcpy(&v->f, &v->u, 8);
        }
        break;
    }
    case PI_ARROW_DICT:
        v->i = load_int(c->values + row * (f->bits / 8), f->bits, f->is_signed);
        v->u = (uint64_t)v->i;
        break;
    case PI_ARROW_FIXED_BINARY:
    case PI_ARROW_INTERVAL:
        v->p = c->values + row * (uint64_t)f->byte_width;
        v->n = (uint64_t)f->byte_width;
        return 0;
    case PI_ARROW_UTF8:
    case PI_ARROW_BINARY:
    case PI_ARROW_MAP:
    case PI_ARROW_LIST: {
        int32_t o[2];
        memcpy(o, c->offsets + 4 * row, 8);
        v->first = (uint64_t)o[0];
        v->n = (uint64_t)(o[1] - o[0]);
        goto var;
    }
    case PI_ARROW_LARGE_UTF8:
    case PI_ARROW_LARGE_BINARY:
    case PI_ARROW_LARGE_LIST: {
        int64_t o[2];
        memcpy(o, c->offsets + 8 * row, 16);
        v->first = (uint64_t)o[0];
        v->n = (uint64_t)(o[1] - o[0]);
        goto var;
    }
    case PI_ARROW_FIXED_LIST:
        v->first = row * (uint64_t)f->list_size;
        v->n = (uint64_t)f->list_size;
        goto var;
    }
    return 0;
var:
    if (f->kind == PI_ARROW_LIST || f->kind == PI_ARROW_LARGE_LIST || f->kind == PI_ARROW_FIXED_LIST ||
        f->kind == PI_ARROW_MAP) {
        v->child = &c->children[0];
        const struct pi_arrow_field *cf = v->child->f;
        if (cf->kind == PI_ARROW_INT || cf->kind == PI_ARROW_FLOAT) v->p = v->child->values + v->first * (cf->bits / 8);
    } else {
        v->p = c->values + v->first;
    }
    return 0;
}

/* ---- save_to_disk directories ---------------------------------------------- */
#include "../format/format.h"

void pi_arrow_names_free(char **files, size_t n) {
    if (!files) return;
    for (size_t i = 0; i < n; i++) pi_free(files[i]);
    pi_free(files);
}

int pi_arrow_state_files(const char *json, size_t len, const char *name, char ***files, size_t *n) {
    struct pi_json j;
    char **out = NULL;
    size_t cnt = 0, cap = 0;
    const char *key, *s;
    size_t kl, sl;
    int rc, seen = 0;
    *files = NULL;
    *n = 0;
    pi_json_init(&j, json, len, 8);
    if ((rc = pi_json_enter(&j, PI_JSON_OBJECT)) < 0) goto done;
    while ((rc = pi_json_next(&j, &key, &kl)) > 0) {
        if (kl != 11 || memcmp(key, "_data_files", 11) != 0) {
            if ((rc = pi_json_skip(&j)) < 0) goto done;
            continue;
        }
        seen = 1;
        if ((rc = pi_json_enter(&j, PI_JSON_ARRAY)) < 0) goto done;
        while ((rc = pi_json_next(&j, NULL, NULL)) > 0) {
            char *fname = NULL;
            if ((rc = pi_json_enter(&j, PI_JSON_OBJECT)) < 0) goto done;
            while ((rc = pi_json_next(&j, &key, &kl)) > 0) {
                if (kl == 8 && memcmp(key, "filename", 8) == 0 && !fname) {
                    if ((rc = pi_json_string(&j, &s, &sl)) < 0) goto done;
                    if (sl == 0 || memchr(s, '/', sl) || memchr(s, 0, sl) || (sl == 1 && s[0] == '.') ||
                        (sl == 2 && s[0] == '.' && s[1] == '.')) {
                        rc = pi_err(PI_ARROW_E_FORMAT, "_data_files[%zu]: '%.*s' is not a file name in the directory",
                                    cnt, (int)PI_MIN(sl, 200), s);
                        goto done;
                    }
                    if (!(fname = pi_strndup(s, sl))) {
                        rc = pi_err(-ENOMEM, "out of memory");
                        goto done;
                    }
                } else if ((rc = pi_json_skip(&j)) < 0) {
                    pi_free(fname);
                    goto done;
                }
            }
            if (rc < 0 || !fname) {
                pi_free(fname);
                if (rc == 0) rc = pi_err(PI_ARROW_E_FORMAT, "_data_files[%zu] has no filename", cnt);
                goto done;
            }
            if ((rc = pi_grow((void **)&out, &cap, cnt + 1, sizeof *out)) < 0) {
                pi_free(fname);
                goto done;
            }
            out[cnt++] = fname;
        }
        if (rc < 0) goto done;
    }
    if (rc == 0) rc = pi_json_finish(&j);
    if (rc == 0 && (!seen || cnt == 0)) rc = pi_err(PI_ARROW_E_FORMAT, "no _data_files");
done:
    pi_json_free(&j);
    if (rc < 0) {
        pi_err_prefix(name ? name : "state.json");
        pi_arrow_names_free(out, cnt);
        return rc;
    }
    *files = out;
    *n = cnt;
    return 0;
}
