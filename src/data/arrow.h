/* arrow.h - private API of the Arrow IPC reader (src/data/arrow*.c).
 * Never installed. docs/FORMAT-ARROW.md says what is read and refused.
 *
 * Written from the specification (Columnar.rst, Schema.fbs, Message.fbs,
 * File.fbs of apache/arrow); Debian ships no Arrow C library. Parsing only:
 * every byte comes from the caller, through buffers or a read callback, so
 * the same code reads local files, mappings and remote sources.
 *
 * Use:
 *     struct pi_arrow a;
 *     pi_arrow_open(&a, "x.arrow", size, read_cb, ctx);  // schema + batch index
 *     a.batches[i]: {offset, meta_len, body_len, rows, first_row}: batch i is
 *         the bytes [offset, offset + meta_len + body_len) of the file
 *     pi_arrow_decode(&a, i, bytes, n, cols, ncols, &batch);  // validated columns
 *     pi_arrow_get(&batch.cols[c], row, &v);                   // one cell
 *     pi_arrow_batch_free(&batch); pi_arrow_close(&a);
 *
 * Errors: PI_ARROW_E_FORMAT (malformed; the detail names the file, the
 * message or batch and the field), PAGEIN_E_UNSUPPORTED (valid Arrow this
 * reader does not read: a dictionary replaced (not extended by a delta)
 * mid-stream, types outside the list below, views, unknown codecs; the detail names the column and type),
 * PAGEIN_E_ENDIAN (big-endian bodies), PAGEIN_E_BAD_VERSION (metadata
 * before V4), PAGEIN_E_BAD_MAGIC (not Arrow IPC), PAGEIN_E_LIMIT (a bound
 * below), PAGEIN_E_NOT_FOUND (no such column), -ENOMEM, or what the read
 * callback returns. Cost is linear in the bytes given; nothing is
 * allocated from a count before the count is checked against the bytes
 * that must hold it. */
#ifndef PAGEIN_ARROW_H
#define PAGEIN_ARROW_H

#include "../internal.h"
#include "../core/endian.h"

/* The error code for malformed Arrow input: the dataset table's. */
#define PI_ARROW_E_FORMAT PAGEIN_E_FORMAT

#define PI_ARROW_MAX_DEPTH 48                  /* nesting of fields */
#define PI_ARROW_MAX_META (64u << 20)          /* one message's metadata (flatbuffer) */
#define PI_ARROW_MAX_FIELDS 65536              /* fields of a schema, all levels */
#define PI_ARROW_DEFAULT_BATCH_BYTES (4ull << 30) /* decompressed bytes of one batch */
#define PI_ARROW_MAX_ROWS 0x7fffffffll         /* rows of one batch (Null and Struct columns need no bytes) */

enum pi_arrow_kind {
    PI_ARROW_NULL = 1,
    PI_ARROW_BOOL,
    PI_ARROW_INT,          /* bits 8/16/32/64, is_signed */
    PI_ARROW_FLOAT,        /* bits 16/32/64 */
    PI_ARROW_UTF8,         /* int32 offsets */
    PI_ARROW_BINARY,
    PI_ARROW_LARGE_UTF8,   /* int64 offsets */
    PI_ARROW_LARGE_BINARY,
    PI_ARROW_LIST,         /* int32 offsets, one child */
    PI_ARROW_LARGE_LIST,   /* int64 offsets, one child */
    PI_ARROW_FIXED_LIST,   /* list_size, one child */
    PI_ARROW_STRUCT,
    PI_ARROW_FIXED_BINARY, /* byte_width bytes a value */
    PI_ARROW_MAP,          /* int32 offsets, one Struct child (key, value) */
    PI_ARROW_DICT,         /* dictionary-encoded: Int indexes (bits, is_signed) into dict_value's dictionary */
    PI_ARROW_INTERVAL,     /* unit 0 YEAR_MONTH (int32 months), 1 DAY_TIME (int32 days, ms), 2 MONTH_DAY_NANO
                              (int32 months, days, int64 ns): byte_width 4, 8 or 16 */
    PI_ARROW_UNION,        /* union_mode 0 sparse (type ids), 1 dense (type ids, int32 offsets) */
};
/* "Int32", "LargeList", ... */
const char *pi_arrow_kind_name(int kind, int bits, int is_signed);

struct pi_arrow_batch;
struct pi_arrow_field {
    const char *name;     /* NUL-terminated copy (name_len bytes, may hold NUL) */
    uint32_t name_len;
    const char *path;     /* "st.c.item": for messages */
    uint8_t kind, is_signed, nullable, union_mode;
    uint16_t bits;        /* INT (Decimal: 32..256), FLOAT; DICT: the index's */
    int32_t list_size;    /* FIXED_LIST */
    uint32_t nchildren;
    struct pi_arrow_field *children;
    uint32_t node;        /* its FieldNode: index in the pre-order walk */
    uint32_t buf;         /* its first buffer in the pre-order buffer list */
    uint32_t nbufs;       /* its own buffers */
    uint32_t tree_bufs;   /* its and its descendants' buffers: [buf, buf + tree_bufs) */
    /* Decimal, Date, Time, Timestamp, Duration are INT of bits 32..256
     * with an annotation (pagein.h's PAGEIN_LOGICAL_* and PAGEIN_UNIT_*;
     * utc: a Timestamp with a time zone) */
    uint8_t logical, unit, utc, precision;
    int32_t scale;
    int32_t byte_width;   /* FIXED_BINARY, INTERVAL */
    int64_t dict_id;      /* DICT: the dictionary's id */
    struct pi_arrow_field *dict_value; /* DICT: the values' field tree, numbered within the DictionaryBatch */
    uint8_t *type_child;  /* UNION: 128 entries, the member of each type id (0xFF: none) */
    uint8_t sel;          /* the reader's columns= marks (ds_arrow.c): 0, 1 on a selected path, 2 selected */
};

/* One dictionary (DictionaryBatch messages of one id): the pieces, the
 * first batch and each delta after it, in order; index k is row
 * k - start of the piece holding it. */
struct pi_arrow_dpiece {
    struct pi_arrow_batch *b; /* cols[0]: the values */
    uint8_t *bytes;           /* the body the batch points into */
    uint64_t start;
};
struct pi_arrow_dict {
    int64_t id;
    const struct pi_arrow_field *value;
    uint32_t nnodes, nbufs;   /* of the value tree */
    struct pi_arrow_dpiece *pieces;
    size_t npieces, cap;
    uint64_t length;          /* values over all pieces */
};

struct pi_arrow_schema {
    uint32_t nfields;     /* top-level columns */
    struct pi_arrow_field *fields;
    uint32_t nnodes, nbufs; /* all levels, pre-order */
    struct pi_arena arena;
    struct pi_arrow_dict *dicts; /* one per dictionary id, in the order met */
    size_t ndicts, dcap;
    uint64_t dict_bytes;  /* dictionary bodies held (read at open) */
};

/* One record batch: the message starts at offset (its continuation marker
 * or legacy length), its body at offset + meta_len. fb is a copy of its
 * Message flatbuffer, kept from open so that a batch's column extents are
 * known before anything of it is read again. */
struct pi_arrow_batch_ref {
    uint64_t offset, meta_len, body_len;
    uint64_t rows, first_row;
    const uint8_t *fb;
    uint32_t fb_len;
};

enum { PI_ARROW_STREAM = 1, PI_ARROW_FILE = 2 };

struct pi_arrow {
    char *name;           /* for messages */
    int kind;             /* PI_ARROW_STREAM or PI_ARROW_FILE */
    uint64_t size;
    struct pi_arrow_schema schema;
    struct pi_arrow_batch_ref *batches;
    size_t nbatches;
    struct pi_arena meta;  /* the batches' fb copies */
    uint64_t nrows;
    int compressed;       /* 0, or 1 + codec (LZ4_FRAME 0, ZSTD 1) of the first compressed batch seen */
    uint64_t max_batch_bytes; /* decompressed bytes one batch may allocate; set before decode */
};

/* Reads len bytes at off into dst: 0 or a negative error (detail set). */
typedef int (*pi_arrow_read_fn)(void *ctx, uint64_t off, void *dst, size_t len);

/* Opens an Arrow IPC file (magic "ARROW1": schema and blocks from the
 * footer, then each batch's metadata for its row count) or stream (one
 * sequential pass over the message headers, skipping the bodies) of size
 * bytes. name is copied. On failure *a is left empty (closing is a no-op). */
int pi_arrow_open(struct pi_arrow *a, const char *name, uint64_t size, pi_arrow_read_fn rd, void *ctx);
/* The same over a buffer held by the caller. */
int pi_arrow_open_mem(struct pi_arrow *a, const char *name, const void *buf, size_t len);
void pi_arrow_close(struct pi_arrow *a);
/* Index of the top-level column called name, or PAGEIN_E_NOT_FOUND. */
int pi_arrow_column(const struct pi_arrow *a, const char *name, size_t len);

/* ---- decoded record batches --------------------------------------------- */
struct pi_arrow_col {
    const struct pi_arrow_field *f; /* NULL: column not selected */
    uint64_t length, null_count;
    const uint8_t *validity;  /* NULL: no nulls */
    const uint8_t *offsets;   /* (LARGE_)UTF8/BINARY/LIST: length + 1 int32 or int64 */
    const uint8_t *values;    /* INT/FLOAT data, BOOL bitmap, string and binary bytes */
    uint64_t values_len;
    struct pi_arrow_col *children; /* f->nchildren */
    const struct pi_arrow_dict *dict; /* DICT: its dictionary (indexes checked against its length) */
    const uint8_t *types;     /* UNION: one int8 type id a value (each names a member) */
};

struct pi_arrow_batch {
    size_t index;
    uint64_t rows;
    uint32_t ncols;           /* the schema's top-level columns */
    struct pi_arrow_col *cols;
    struct pi_arena arena;
    uint8_t **owned;          /* decompressed buffers */
    size_t nowned, owncap;
    uint64_t inflated;        /* bytes decompressed */
};

/* Decodes batch bi from msg[0, n), the bytes [offset, offset + meta_len +
 * body_len) of the file, for the top-level columns sel[0..nsel) (indexes;
 * sel NULL = all). Every buffer of those columns is checked against the
 * body, every offset, length and null count against its buffers; compressed
 * buffers (LZ4 frame, ZSTD) are inflated to exactly their declared length,
 * within a->max_batch_bytes. Uncompressed columns point into msg, which
 * must outlive *out. */
int pi_arrow_decode(const struct pi_arrow *a, size_t bi, const uint8_t *msg, size_t n, const uint32_t *sel,
                    size_t nsel, struct pi_arrow_batch *out);

/* Pieces of a batch's body: [off, off + len) of the body at p. */
struct pi_arrow_seg {
    uint64_t off, len;
    const uint8_t *p;
};
/* The body bytes of top-level column col in batch bi: [*off, *off + *len)
 * relative to the body (add offset + meta_len for the file), the smallest
 * span holding all its buffers (writers lay a column's buffers out
 * together), checked against the body. *len may be 0. */
int pi_arrow_col_span(const struct pi_arrow *a, size_t bi, uint32_t col, uint64_t *off, uint64_t *len);
/* As pi_arrow_decode, from pieces of the body only (e.g. the spans of the
 * selected columns): a buffer outside every piece is an error. */
int pi_arrow_decode_segs(const struct pi_arrow *a, size_t bi, const struct pi_arrow_seg *segs, size_t nsegs,
                         const uint32_t *sel, size_t nsel, struct pi_arrow_batch *out);
void pi_arrow_batch_free(struct pi_arrow_batch *b);
/* 1 if batches compressed with codec (0 LZ4_FRAME, 1 ZSTD; -1 none) can
 * be decoded by this build (mk/arrow.mk). */
int pi_arrow_have_codec(int codec);

/* One cell. INT: i (signed) or u (unsigned) and both; FLOAT: f (Float16
 * converted), u the raw bits; BOOL: i 0/1; UTF8/BINARY: p, n bytes;
 * lists: child, first (its row of the first element), n elements, and p =
 * the child's values at first when the child is INT or FLOAT (else NULL);
 * STRUCT: nothing but null (read children[k] at the same row). */
struct pi_arrow_val {
    int null;
    int64_t i;
    uint64_t u;
    double f;
    const uint8_t *p;
    uint64_t n;
    uint64_t first;
    const struct pi_arrow_col *child;
};
static inline int pi_arrow_is_null(const struct pi_arrow_col *c, uint64_t row) {
    if (c->f->kind == PI_ARROW_NULL) return 1;
    if (c->f->kind == PI_ARROW_UNION) return 0; /* a union has no validity: its child's value may be null */
    return c->validity && !((c->validity[row >> 3] >> (row & 7)) & 1);
}
/* DICT: the dictionary's column and row that row's index names; UNION:
 * the child column and row of that row's value. 0, or PAGEIN_E_RANGE. */
int pi_arrow_resolve(const struct pi_arrow_col *c, uint64_t row, const struct pi_arrow_col **vc, uint64_t *vrow);
/* 0, or PAGEIN_E_RANGE when row >= c->length. */
int pi_arrow_get(const struct pi_arrow_col *c, uint64_t row, struct pi_arrow_val *v);

/* ---- Hugging Face `datasets` save_to_disk directories ------------------- */
/* Parses state.json (json[0, len), name for messages): the data files of
 * "_data_files" in order, as a pi_malloc'd array of *n pi_malloc'd names
 * (free with pi_arrow_names_free). Names with '/' or that are "." or ".."
 * are refused: a directory's files stay in it. */
int pi_arrow_state_files(const char *json, size_t len, const char *name, char ***files, size_t *n);
void pi_arrow_names_free(char **files, size_t n);

/* ---- flatbuffers (arrow_fb.c): bounds-checked reads ---------------------- */
struct pi_fb {
    const uint8_t *p;
    uint32_t n;
};
struct pi_fbt { /* a table */
    const struct pi_fb *b;
    uint32_t pos, vt;
    uint16_t vtlen, tlen;
};
/* Errors are PI_ARROW_E_FORMAT with a "flatbuffer: ..." detail. */
int pi_fb_root(const struct pi_fb *b, struct pi_fbt *t);
/* Scalars: *v = the field, or def when absent. */
int pi_fb_i64(const struct pi_fbt *t, unsigned slot, int64_t def, int64_t *v);
int pi_fb_i32(const struct pi_fbt *t, unsigned slot, int32_t def, int32_t *v);
int pi_fb_i16(const struct pi_fbt *t, unsigned slot, int16_t def, int16_t *v);
int pi_fb_u8(const struct pi_fbt *t, unsigned slot, uint8_t def, uint8_t *v);
/* Sub-table: 1 present (*sub set), 0 absent, or an error. */
int pi_fb_table(const struct pi_fbt *t, unsigned slot, struct pi_fbt *sub);
/* Vector of elem-byte elements: 1 present (*data = position of element
 * 0, *count; count * elem checked against the buffer), 0 absent (count 0). */
int pi_fb_vector(const struct pi_fbt *t, unsigned slot, uint32_t elem, uint32_t *data, uint32_t *count);
/* Element i of a vector of tables at data. */
int pi_fb_vec_table(const struct pi_fb *b, uint32_t data, uint32_t i, struct pi_fbt *sub);
/* String: 1 present (*s, *len; not NUL-terminated), 0 absent. */
int pi_fb_string(const struct pi_fbt *t, unsigned slot, const char **s, uint32_t *len);
/* flatbuffers and Arrow IPC are little-endian (core/endian.h) */
static inline int64_t pi_fb_ld64(const uint8_t *p) { return (int64_t)pi_le64(p); }
static inline uint32_t pi_fb_ld32(const uint8_t *p) { return pi_le32(p); }

#endif
