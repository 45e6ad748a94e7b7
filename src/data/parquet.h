/* parquet.h - the Parquet reader (private; src/data/parquet*.c), written from
 * apache/parquet-format (parquet.thrift, Encodings.md, Compression.md,
 * LogicalTypes.md). docs/FORMAT-PARQUET.md says what is read and refused.
 *
 * Two steps, neither doing I/O:
 *  1. the footer: the caller reads the file's tail (say 64 KiB);
 *     pi_pq_tail_need says how many tail bytes the footer needs (re-read a
 *     larger tail when that is more than was read); pi_pq_open decodes the
 *     FileMetaData from them: the schema (flattened into leaf columns with
 *     their definition/repetition levels), the row groups with their row
 *     counts and, per column, the byte range of its chunk;
 *  2. a column chunk: the caller reads [off, off + len) of a chunk
 *     (pi_pq_chunk_range) and pi_pq_decode_chunk decodes its pages into a
 *     pi_pq_column: values + validity + list offsets, with per-row access.
 *
 * Errors: malformed input returns PI_PQ_EFORMAT with a detail naming the
 * file, row group, column and page (and the byte offset where it helps); a
 * codec, encoding or type the reader does not support returns
 * PAGEIN_E_UNSUPPORTED naming them too; a documented limit PAGEIN_E_LIMIT.
 * Every count and length is checked against the bytes there are before any
 * allocation; decompression never writes past the page's declared
 * uncompressed size. Thread safety: a pi_pq_file is read-only after open;
 * decode calls on one file may run on several threads at once. */
#ifndef PAGEIN_PARQUET_H
#define PAGEIN_PARQUET_H

#include <stddef.h>
#include <stdint.h>

#include "../internal.h"

/* the malformed-file code of the dataset-format table */
#define PI_PQ_EFORMAT PAGEIN_E_FORMAT

/* limits (PAGEIN_E_LIMIT beyond them) */
#define PI_PQ_MAX_FOOTER (256u << 20)      /* FileMetaData bytes */
#define PI_PQ_MAX_DEPTH 32                 /* schema nesting */
#define PI_PQ_MAX_PAGE (512u << 20)        /* a page's uncompressed size */
#define PI_PQ_MAX_PAGE_VALUES (1u << 26)   /* values (levels) in one page */
#define PI_PQ_MAX_CHUNK_VALUES (1ull << 34) /* values in a column chunk */
#define PI_PQ_MAX_NODES (1u << 24)         /* fields of one row's assembled value */

enum {
    PI_PQ_BOOLEAN = 0,
    PI_PQ_INT32 = 1,
    PI_PQ_INT64 = 2,
    PI_PQ_INT96 = 3,
    PI_PQ_FLOAT = 4,
    PI_PQ_DOUBLE = 5,
    PI_PQ_BYTE_ARRAY = 6,
    PI_PQ_FIXED = 7
};
enum { PI_PQ_REQUIRED = 0, PI_PQ_OPTIONAL = 1, PI_PQ_REPEATED = 2 };
enum {
    PI_PQ_UNCOMPRESSED = 0,
    PI_PQ_SNAPPY = 1,
    PI_PQ_GZIP = 2,
    PI_PQ_LZO = 3,
    PI_PQ_BROTLI = 4,
    PI_PQ_LZ4 = 5,
    PI_PQ_ZSTD = 6,
    PI_PQ_LZ4_RAW = 7
};
enum {
    PI_PQ_PLAIN = 0,
    PI_PQ_PLAIN_DICTIONARY = 2,
    PI_PQ_RLE = 3,
    PI_PQ_BIT_PACKED = 4,
    PI_PQ_DELTA_BINARY_PACKED = 5,
    PI_PQ_DELTA_LENGTH_BYTE_ARRAY = 6,
    PI_PQ_DELTA_BYTE_ARRAY = 7,
    PI_PQ_RLE_DICTIONARY = 8,
    PI_PQ_BYTE_STREAM_SPLIT = 9
};
enum { PI_PQ_DATA_PAGE = 0, PI_PQ_INDEX_PAGE = 1, PI_PQ_DICTIONARY_PAGE = 2, PI_PQ_DATA_PAGE_V2 = 3 };
/* ConvertedType values used here */
enum { PI_PQ_CT_UTF8 = 0, PI_PQ_CT_MAP = 1, PI_PQ_CT_MAP_KEY_VALUE = 2, PI_PQ_CT_LIST = 3, PI_PQ_CT_ENUM = 4,
       PI_PQ_CT_DECIMAL = 5, PI_PQ_CT_DATE = 6, PI_PQ_CT_TIME_MILLIS = 7, PI_PQ_CT_TIME_MICROS = 8,
       PI_PQ_CT_TIMESTAMP_MILLIS = 9, PI_PQ_CT_TIMESTAMP_MICROS = 10, PI_PQ_CT_UINT_8 = 11, PI_PQ_CT_UINT_64 = 14,
       PI_PQ_CT_JSON = 19, PI_PQ_CT_BSON = 20, PI_PQ_CT_INTERVAL = 21 };
/* LogicalType union field ids used here */
enum { PI_PQ_LT_STRING = 1, PI_PQ_LT_MAP = 2, PI_PQ_LT_LIST = 3, PI_PQ_LT_ENUM = 4, PI_PQ_LT_DECIMAL = 5,
       PI_PQ_LT_DATE = 6, PI_PQ_LT_TIME = 7, PI_PQ_LT_TIMESTAMP = 8, PI_PQ_LT_INTEGER = 10, PI_PQ_LT_UNKNOWN = 11,
       PI_PQ_LT_JSON = 12, PI_PQ_LT_BSON = 13, PI_PQ_LT_UUID = 14, PI_PQ_LT_FLOAT16 = 15, PI_PQ_LT_VARIANT = 16,
       PI_PQ_LT_GEOMETRY = 17, PI_PQ_LT_GEOGRAPHY = 18 };

const char *pi_pq_type_name(int type);
const char *pi_pq_codec_name(int codec);
const char *pi_pq_encoding_name(int enc);

struct pi_pq_schema {
    char *name;
    int type;           /* physical type, or -1 for a group */
    int32_t type_length;
    int rep;            /* PI_PQ_REQUIRED/OPTIONAL/REPEATED; the root may have -1 */
    int32_t num_children;
    int converted;      /* ConvertedType or -1 */
    int logical;        /* LogicalType union field id, or 0 */
    int32_t scale, precision;
    /* the LogicalType's parameters: TIME/TIMESTAMP unit (1 ms, 2 us, 3 ns)
     * and isAdjustedToUTC; INTEGER bit width and signedness; DECIMAL's
     * scale and precision go to the fields above */
    int lt_unit, lt_utc, lt_bits, lt_signed;
    int parent;         /* index of the parent element, -1 for the root */
};

enum { PI_PQ_SCALAR = 0, PI_PQ_LIST = 1, PI_PQ_NESTED = 2 };

/* A leaf column. Its kind says how its chunk is decoded: SCALAR, a
 * top-level primitive (values with validity); LIST, the only leaf of a
 * top-level list of primitives (one repeated level: the standard
 * three-level LIST, the legacy two-level forms, or a bare repeated
 * primitive; values with list offsets, the zero-copy path of lists of
 * numbers); NESTED, a leaf of any other shape (structs, lists of structs,
 * lists of lists, maps): its definition and repetition levels are kept and
 * the record is assembled from them (parquet_nest.c). */
struct pi_pq_leaf {
    char *path;        /* dotted path of the leaf (path_in_schema joined) */
    char *field;       /* the row's field: the path up to the list node (lists) or the leaf */
    int schema;        /* index into schema[] */
    int type;
    int32_t type_length;
    int kind;          /* PI_PQ_SCALAR / PI_PQ_LIST */
    int is_string;     /* BYTE_ARRAY annotated UTF8/STRING/ENUM/JSON */
    int max_def, max_rep;
    int list_def;      /* lists: the definition level of an empty list */
    const char *unsupported; /* why this column cannot be decoded, or NULL */
    int top;           /* the node of its top-level field (pi_pq_file.nodes) */
    /* the value as a field (pagein.h): PAGEIN_FIELD_* type and width,
     * logical annotation, unit, UTC flag, decimal precision and scale */
    uint8_t ftype, fwidth, logical, unit, utc, precision;
    int32_t scale;
};

/* The record shape, from the schema by LogicalTypes.md's rules (nested
 * types and their backward-compatibility forms): a tree of nodes over the
 * leaves. A node is present (not null) where a slot's definition level is
 * >= dnull; a LIST or MAP has elements where it is >= drep, and an element
 * after the first of one list starts at a slot whose repetition level is
 * rep. */
enum { PI_PQ_N_LEAF = 0, PI_PQ_N_STRUCT = 1, PI_PQ_N_LIST = 2, PI_PQ_N_MAP = 3 };
struct pi_pq_node {
    int kind;
    const char *name;   /* the schema element's name (borrowed) */
    int schema;         /* its schema element */
    int nullable;
    int dnull, drep, rep;
    int leaf;           /* LEAF: its leaf */
    int leaf0, leaf1;   /* the leaves under it: [leaf0, leaf1) */
    int kid0, nkids;    /* children: kids[kid0 .. kid0 + nkids) (LIST, MAP: one) */
};

struct pi_pq_chunk {
    int has_meta;
    int type, codec;
    int64_t num_values, total_uncompressed, total_compressed;
    int64_t data_page_offset, dictionary_page_offset; /* -1: none */
    int64_t offset_index_offset, column_index_offset; /* -1: none */
    int32_t offset_index_length, column_index_length;
    uint64_t off, len; /* the chunk's byte range in the file */
    uint32_t nencodings;
    uint8_t encodings[16];
};

struct pi_pq_group {
    int64_t num_rows, total_byte_size;
    struct pi_pq_chunk *chunks; /* nleaves of them */
};

struct pi_pq_file {
    char *name; /* for errors */
    uint64_t file_size, meta_off, meta_len;
    int32_t version;
    int64_t num_rows;
    char *created_by;
    size_t nschema, nleaves, ngroups, nkv;
    struct pi_pq_schema *schema;
    struct pi_pq_leaf *leaves;
    struct pi_pq_group *groups;
    struct pi_pq_kv {
        char *key, *val;
    } *kv; /* nkv of them */
    /* the record shape: nodes, their children, the top-level fields */
    size_t nnodes, nfields;
    struct pi_pq_node *nodes;
    int *kids;
    int *fields; /* nfields node indexes (the root's children) */
};

/* ---- the record shape and its assembly (parquet_nest.c) ------------------
 * pi_pq_build_nodes: the node tree of a file whose leaves are classified
 * (called by pi_pq_open); sets each leaf's kind, top and list_def. */
int pi_pq_build_nodes(struct pi_pq_file *f);
/* One row's value of a top-level field, from the decoded columns of (some
 * of) its leaves: kof[leaf] is the leaf's column in cols (-1: not read;
 * a struct member none of whose leaves was read is left out), row[k] the
 * row in column k's decoded pages. The value goes to out[at] (when at <
 * cap), its descendants to out[n ...] (n counted on past cap: the caller
 * asks again with room for n). slot/val/end are scratch of one entry a
 * column. col is stored in every field written. 0, or PI_PQ_EFORMAT when
 * the leaves' levels disagree. */
struct pi_pq_asm {
    const struct pi_pq_file *f;
    const int *kof;
    const struct pi_pq_column *cols;
    const uint64_t *row;
    uint64_t *slot, *val, *end;
    struct pagein_field *out;
    size_t cap, n;
    uint32_t col;
};
int pi_pq_assemble(struct pi_pq_asm *a, int top, size_t at);
/* A leaf's value (its decoded column c, element i) into one field. */
void pi_pq_leaf_value(const struct pi_pq_leaf *L, const struct pi_pq_column *c, uint64_t i, struct pagein_field *x);

/* The tail: the last len bytes of a file of file_size bytes. Sets *need to
 * the tail bytes the footer needs (footer + 8); 0, or PI_PQ_EFORMAT when
 * the tail does not end in PAR1 or the footer length cannot fit. */
int pi_pq_tail_need(const void *tail, size_t len, uint64_t file_size, const char *name, uint64_t *need);
/* Decodes the footer from a tail of at least *need bytes (above). *out set
 * only on success; free with pi_pq_close (NULL is a no-op). name (may be
 * NULL) names the file in errors; copied. */
int pi_pq_open(struct pi_pq_file **out, const void *tail, size_t len, uint64_t file_size, const char *name);
void pi_pq_close(struct pi_pq_file *f);
/* Leaf index of a dotted path or field name, or -1. */
int pi_pq_find_leaf(const struct pi_pq_file *f, const char *path);

/* A decoded column chunk. Scalars: one element per row (nelems == nrows,
 * offsets NULL). Lists: row r's elements are [offsets[r], offsets[r+1]).
 * Fixed-width values (BOOLEAN as one byte, INT32/FLOAT 4, INT64/DOUBLE 8,
 * INT96 12, FIXED type_length bytes, little-endian as stored) sit at
 * values + i * width, a null's slot zeroed; BYTE_ARRAY element i is
 * bytes[voff[i] .. voff[i+1]) (a null is empty). */
struct pi_pq_column {
    int type, kind;
    uint32_t width;       /* bytes per fixed-width value; 0 for BYTE_ARRAY */
    uint64_t nrows, nelems;
    /* all_valid: no row and no element is null, and row_valid/elem_valid
     * are not written (a column without nulls costs no validity bytes);
     * read validity with pi_pq_row and pi_pq_elem_ok */
    int all_valid;
    uint8_t *row_valid;   /* nrows: the row's value (scalar) or list (list) is not null */
    uint64_t *offsets;    /* lists: nrows + 1 */
    uint8_t *elem_valid;  /* nelems (for scalars the same array as row_valid) */
    uint8_t *values;      /* fixed width: nelems * width */
    uint64_t *voff;       /* BYTE_ARRAY: nelems + 1 */
    uint8_t *bytes;
    uint64_t nbytes;
    uint64_t null_elems;  /* lists: null elements inside non-null lists */
    /* NESTED: the levels of every slot (a value, a null or an empty list
     * at some level), the slot and the dense value where each row starts
     * (nrows + 1 of each); values and voff/bytes then hold only the
     * non-null leaf values, nelems of them */
    uint8_t *ldef, *lrep;
    uint64_t nslots;
    uint64_t *rowslot, *rowval;
    size_t cap_ldef, cap_lrep, cap_rowslot, cap_rowval;
    /* capacities (internal) */
    size_t cap_rows, cap_off, cap_elems, cap_vals, cap_voff, cap_bytes;
};

/* Per-row access (SCALAR and LIST): 1 when row r is not null, and its element range. */
static inline int pi_pq_row(const struct pi_pq_column *c, uint64_t r, uint64_t *b, uint64_t *e) {
    if (c->kind == PI_PQ_LIST) {
        *b = c->offsets[r];
        *e = c->offsets[r + 1];
    } else {
        *b = r;
        *e = r + 1;
    }
    return c->all_valid || c->row_valid[r];
}

/* 1 when element i of a SCALAR or LIST column is not null. */
static inline int pi_pq_elem_ok(const struct pi_pq_column *c, uint64_t i) { return c->all_valid || c->elem_valid[i]; }

/* The byte range [*off, *off + *len) of column col's chunk in row group rg. */
int pi_pq_chunk_range(const struct pi_pq_file *f, size_t rg, size_t col, uint64_t *off, uint64_t *len);
/* Decodes a chunk from its bytes (buf = the file's bytes at the range
 * above). out is set on success (free with pi_pq_column_free); on failure
 * out holds nothing to free. */
int pi_pq_decode_chunk(const struct pi_pq_file *f, size_t rg, size_t col, const void *buf, size_t len,
                       struct pi_pq_column *out);
void pi_pq_column_free(struct pi_pq_column *c);

/* Reuse: a column decoded once may be decoded into again (its buffers are
 * kept and grown, never shrunk, so that a reader that decodes chunk after
 * chunk touches no fresh memory), and the scratch of the decoder (a
 * decompressed page, levels, indexes, the dictionary) kept between chunks.
 * Zero both before their first use; free with pi_pq_column_free and
 * pi_pq_scratch_free. On failure the column still owns its buffers (its
 * contents are undefined). */
struct pi_pq_scratch {
    uint8_t *ubuf, *def, *rep, *dvals, *dbytes;
    uint64_t *doff;
    uint32_t *idx;
    int64_t *lens;
    size_t ubuf_cap, def_cap, rep_cap, dvals_cap, dbytes_cap, doff_cap, idx_cap, lens_cap;
};
void pi_pq_scratch_free(struct pi_pq_scratch *s);
/* Bytes a column's / a scratch's buffers hold (their capacities). */
uint64_t pi_pq_column_held(const struct pi_pq_column *c);
uint64_t pi_pq_scratch_held(const struct pi_pq_scratch *s);
/* pi_pq_decode_chunk into a reused column with reused scratch (s may be NULL). */
int pi_pq_decode_chunk_into(const struct pi_pq_file *f, size_t rg, size_t col, const void *buf, size_t len,
                            struct pi_pq_column *out, struct pi_pq_scratch *s);

/* ---- the page index (PageIndex.md): single pages ------------------------
 * A chunk's OffsetIndex (ColumnChunk.offset_index_offset/_length: read
 * those bytes) lists its data pages: where each starts, its size with
 * header, its first row. pi_pq_offset_index checks every page against the
 * chunk's range and the row group's rows (increasing, the first at row 0)
 * and returns them in *locs (pi_free). */
struct pi_pq_page_loc {
    int64_t offset;     /* in the file */
    int32_t size;       /* header + compressed page */
    int64_t first_row;  /* within the row group */
};
int pi_pq_offset_index(const struct pi_pq_file *f, size_t rg, size_t col, const void *buf, size_t len,
                       struct pi_pq_page_loc **locs, size_t *n);
/* Decodes a run of whole data pages holding rows [first_row, first_row +
 * rows) of a chunk: dict = the chunk's bytes before its first data page
 * (its dictionary page; dict_len 0 when the chunk has none), pages = the
 * file's bytes from the run's first page to the end of its last. The
 * column holds exactly those rows. */
int pi_pq_decode_page_run(const struct pi_pq_file *f, size_t rg, size_t col, const void *dict, size_t dict_len,
                          const void *pages, size_t pages_len, int64_t first_row, int64_t rows,
                          struct pi_pq_column *out);
/* The same into a reused column with reused scratch (s may be NULL). */
int pi_pq_decode_page_run_into(const struct pi_pq_file *f, size_t rg, size_t col, const void *dict, size_t dict_len,
                               const void *pages, size_t pages_len, int64_t first_row, int64_t rows,
                               struct pi_pq_column *out, struct pi_pq_scratch *s);

/* The page loop itself, for a leaf described by the caller (the fuzz target
 * and the hand-built-page tests): pages of one chunk in buf, codec, at most
 * num_values values and exactly num_rows rows (num_rows < 0: any). ctx
 * names the chunk in errors ("file: row group 0, column x"). */
int pi_pq_decode_pages(const struct pi_pq_leaf *leaf, int codec, int64_t num_values, int64_t num_rows,
                       const void *buf, size_t len, const char *ctx, struct pi_pq_column *out);
/* The same into a reused column with reused scratch (s may be NULL). */
int pi_pq_decode_pages_into(const struct pi_pq_leaf *leaf, int codec, int64_t num_values, int64_t num_rows,
                            const void *buf, size_t len, const char *ctx, struct pi_pq_column *out,
                            struct pi_pq_scratch *s);

/* One page header at p (the benchmark's walk over pages): its type, sizes
 * and header length; for a v2 data page lvl_len is the bytes of levels
 * before the compressed values (0 otherwise). */
struct pi_pq_page_info {
    int type;
    int32_t usize, csize, nvalues;
    size_t header_len, lvl_len;
};
int pi_pq_page_info(const uint8_t *p, size_t len, struct pi_pq_page_info *pi);

/* ---- encodings (parquet_enc.c) -------------------------------------------
 * Each returns 0 or a negative code with the detail set (the caller prefixes
 * the page). */
/* RLE/bit-packed hybrid: n values of bit width bw (0..32) from [p, end). */
int pi_pq_rle_decode(const uint8_t *p, size_t len, int bw, uint32_t *out, size_t n);
/* The same for levels: bit width 0..8, one byte per value; st (may be
 * NULL) gets the smallest and largest level and the count of zeros
 * (min 255, max 0 for n == 0). */
struct pi_pq_lvlstat {
    uint8_t min, max;
    size_t zeros;
};
int pi_pq_rle_decode8(const uint8_t *p, size_t len, int bw, uint8_t *out, size_t n, struct pi_pq_lvlstat *st);
/* The same levels scanned without storing them: *st as above; with zpos
 * (room for st->zeros of them: scan once without to count) the positions
 * base + i of the zeros (a list's row starts), run by run. */
int pi_pq_rle_scan8(const uint8_t *p, size_t len, int bw, size_t n, struct pi_pq_lvlstat *st, uint64_t base,
                    uint64_t *zpos);
/* Dictionary indexes (the hybrid, bit width bw) of n values gathered from
 * dict (dn entries of width 4 or 8, readable up to dcap entries: when that
 * is 2^bw or more, bit-packed indexes are gathered straight from their
 * bits, else a few hundred at a time) into out; an index >= dn is
 * PI_PQ_EFORMAT naming it. */
int pi_pq_dict_gather(const uint8_t *p, size_t len, int bw, const void *dict, uint32_t dn, uint64_t dcap,
                      unsigned width, void *out, size_t n);
/* DELTA_BINARY_PACKED: exactly n values (32-bit when is32: wrapping int32
 * arithmetic) into out (int32_t or int64_t); *used = bytes consumed. */
int pi_pq_delta_decode(const uint8_t *p, size_t len, int is32, void *out, size_t n, size_t *used);
/* The header's value count of a DELTA_BINARY_PACKED stream. */
int pi_pq_delta_count(const uint8_t *p, size_t len, uint64_t *count);

/* ---- codecs (parquet_codec.c) --------------------------------------------
 * Decompresses src into exactly dst_len bytes of dst (the page's declared
 * size): fewer or more is PI_PQ_EFORMAT; an unknown or unbuilt codec
 * PAGEIN_E_UNSUPPORTED. */
int pi_pq_decompress(int codec, const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len);

#endif
