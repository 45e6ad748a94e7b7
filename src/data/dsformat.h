/*
 * dsformat.h - the dataset-format table: one row per training-data format
 * (fixed records, Megatron, JSONL/text, WebDataset tar, MDS, Arrow IPC,
 * Parquet). The one pipeline (pipeline.c: order, partition, epochs,
 * resume) and the generic open (dsopen.c: a file, a directory, a glob, a
 * list, a remote prefix) are written once against this table.
 *
 * ==== TO ROW AUTHORS (arrow, parquet, and whoever adds the next one) ====
 *
 *  - Adding a format = one file src/data/ds_NAME.c (plus any helper files
 *    of your own, e.g. arrow_fb.c, parquet_thrift.c) that defines
 *        const struct pi_dsformat pi_dsformat_NAME = { .name = "NAME", ... };
 *    with designated initializers (hooks you do not need stay NULL), and
 *    one line `&pi_dsformat_NAME,` in pi_dsformats[] (src/data/dsformat.c).
 *    If your branch has no dsformat.c yet, put that line in your report.
 *    Codec libraries: your own mk/ fragment adds -DPAGEIN_HAVE_X and the
 *    pkg-config flags (mk/dataformats.mk does zstd and zlib:
 *    PAGEIN_HAVE_ZSTD, PAGEIN_HAVE_ZLIB; pi_ds_zstd/pi_ds_gunzip below).
 *  - A row sees bytes, never files: open() reads its footer/index through
 *    the shard's pi_source (src/source/source.h: local files, http(s), s3,
 *    gs, hf alike) exactly once; everything after open is pure.
 *  - Unit of I/O = a group of consecutive samples: an Arrow record batch,
 *    a Parquet row group, a run of tar members, a run of MDS samples. The
 *    pipeline asks ranges(g) for the byte ranges of group g (only the
 *    selected columns' chunks), fetches them itself with large coalesced
 *    requests on the range engine, and hands them to decode(g). Sample
 *    access is then fields(group, i): no I/O, no allocation.
 *  - Every malformed input is an error, never a crash, a hang, an
 *    allocation sized by an unchecked field or a decompression past the
 *    declared size. Use pi_ds_err() (below): code PAGEIN_E_FORMAT, and the
 *    detail names the shard, the group, the sample and the field.
 *  - Every parser is a fuzz target: fuzz/fuzz_NAME.c with seeds in
 *    fuzz/corpus/NAME/; pi_ds_open_memory() (below) opens a shard over a
 *    buffer, so a fuzzer drives open + every group's decode + fields.
 *
 * ==== The contract ====
 *
 * Lifetimes and ownership
 *  - struct pi_dsshard is allocated and freed by the table code; the row
 *    fills nsamples, ngroups, cols/ncols and impl in open() and frees
 *    impl (and cols, names...) in close(). sh->src is opened and closed by
 *    the table code (after close()); the row only reads through it, and
 *    only inside open().
 *  - Column names (pi_dscol.name, pi_dsfield.name) are owned by the shard
 *    and valid until close().
 *  - struct pi_dsgroup is owned by the caller. The fetched buffers it
 *    points to (bufs[]) are the caller's and stay valid and unchanged
 *    until group_free(); decode() may therefore hand out pointers into
 *    them (zero copy for uncompressed data). What decode() allocates (in
 *    grp->impl) is the row's, freed by group_free().
 *  - pi_dsfield.data points into the group's fetched bytes or into what
 *    decode() allocated: valid until group_free() of that group. Several
 *    groups of one shard may be decoded and alive at the same time (the
 *    block order draws from a window of groups).
 *
 * Thread safety
 *  - detect() and index() are pure functions of their arguments.
 *  - open() and close() are called once per shard, never concurrently
 *    with anything else on that shard. open() of distinct shards runs on
 *    several threads at once (the table opens up to 16 shards together,
 *    remote ones cost round trips): keep no global mutable state.
 *  - After open() the shard is read-only: group(), ranges(), locate(),
 *    decode(), fields(), sample() and group_free() may be called from any
 *    number of threads at once, on distinct pi_dsgroup objects (the
 *    loader thread decodes group g+1 while the consumer reads fields of
 *    group g). Keep no mutable state in the shard after open (no caches
 *    without a lock, no "current group").
 *
 * What must not do I/O
 *  - Only open() reads (through sh->src or pi_source_open of a sibling:
 *    the Megatron .idx, a cached tar index). detect, index, group, ranges,
 *    locate, decode, fields, sample, group_free do no I/O, never block,
 *    and cost at most linear time in their input.
 *
 * Values
 *  - Numbers are little-endian, packed, possibly unaligned (Megatron
 *    tokens at an odd pointer): consumers memcpy. BOOL is one byte per
 *    value (0 or 1): a row whose file packs bits (Arrow, Parquet) unpacks
 *    them in decode. A struct column is flattened into fields "a.b". A
 *    list/array has ndim >= 1 and its shape; nested variable lists and
 *    lists of strings are not representable: refuse them at open with
 *    PAGEIN_E_UNSUPPORTED naming the column and its type, never misread.
 */
#ifndef PAGEIN_DSFORMAT_H
#define PAGEIN_DSFORMAT_H

#include "../internal.h"
#include "../source/source.h"

/* Limits every row enforces on untrusted input. */
#define PI_DS_MAX_DIMS 8                  /* array dimensions of one field */
#define PI_DS_MAX_COLS 4096u              /* columns of one shard (after flattening) */
#define PI_DS_MAX_DECODE (2ull << 30)     /* bytes one group may decode into */
#define PI_DS_MAX_FIELDS (1u << 24)       /* fields of one sample, nested values' children included */
#define PI_DS_MAX_NAME 4096u              /* bytes of a column name or tar member name */
#define PI_DS_ROWS_PER_BYTE 8u            /* rows a byte of a group's data may claim (dscount.c) */

/* ---- values -------------------------------------------------------------- */

/* Element types of a column / field: the public PAGEIN_FIELD_* values
 * (pagein.h), under the names the rows use. */
#define PI_DT_NULL PAGEIN_FIELD_NULL     /* no value (a column null everywhere, Arrow's null type) */
#define PI_DT_BOOL PAGEIN_FIELD_BOOL     /* width 1: 0 or 1 */
#define PI_DT_INT PAGEIN_FIELD_INT       /* signed, width 1, 2, 4 or 8 */
#define PI_DT_UINT PAGEIN_FIELD_UINT     /* unsigned, width 1, 2, 4 or 8 */
#define PI_DT_FLOAT PAGEIN_FIELD_FLOAT   /* IEEE, width 2 (half), 4 or 8 */
#define PI_DT_UTF8 PAGEIN_FIELD_UTF8     /* text (not NUL-terminated); width 0; ndim 0 */
#define PI_DT_BINARY PAGEIN_FIELD_BINARY /* bytes; width 0 (or the fixed size); ndim 0 */
#define PI_DT_LIST PAGEIN_FIELD_LIST     /* nested values: children in the same field array */
#define PI_DT_STRUCT PAGEIN_FIELD_STRUCT
#define PI_DT_MAP PAGEIN_FIELD_MAP
enum pi_dstype { PI_DT_LAST_ = PAGEIN_FIELD_MAP };
const char *pi_dstype_name(int t, unsigned width); /* "int32", "float16", "utf8", ... (static) */

/* One column of a shard's schema (the selected ones only when the shard
 * was opened with columns=): a top-level field. */
struct pi_dscol {
    const char *name; /* NUL-terminated; owned by the shard */
    uint8_t type;     /* PI_DT_* of the elements (LIST/STRUCT/MAP: a nested value) */
    uint8_t width;    /* bytes per element (0 for UTF8, BINARY, NULL) */
    uint8_t ndim;     /* 0 scalar (or one string/blob); >= 1 list/array */
    uint8_t nullable; /* 1 if some sample may have no value */
    int64_t shape[PI_DS_MAX_DIMS]; /* ndim entries: a fixed extent, or -1 varies per sample */
    uint8_t logical, unit, utc, precision; /* as pagein_field's */
    int32_t scale;
};

/* One field of one sample, as handed out by fields() / sample(): the
 * public struct itself (pagein.h), so the pipeline hands the rows' fields
 * out as they are. A nested value's children follow the top-level fields
 * in the same array (a row's fields() returns the count of all entries). */
#define pi_dsfield pagein_field

/* ---- shards ---------------------------------------------------------------- */

/* One byte range of a shard's source to fetch for a group. */
struct pi_dsrange {
    uint64_t off, len;
};

/* Fetched bytes handed to decode(): range k of ranges() is bufs[k]. */
struct pi_dsbuf {
    const uint8_t *p;
    uint64_t len;
};

/* Facts of group g (group()). Groups are consecutive: group 0 starts at
 * sample 0, group g+1 at first(g) + count(g), the last ends at nsamples. */
struct pi_dsgroupinfo {
    uint64_t first; /* first sample (shard-local id) */
    uint64_t count; /* samples (>= 1; 0 only for an empty shard's nothing) */
    uint64_t bytes; /* bytes ranges() asks for with the current column selection */
};

struct pi_dsformat;

struct pi_dsshard {
    const struct pi_dsformat *fmt;
    struct pi_source *src; /* the shard's data; opened/closed by the table code */
    const char *name;      /* path or URL for messages (== src->name) */
    /* filled by the row's open(): */
    uint64_t nsamples;
    uint64_t ngroups;
    struct pi_dscol *cols; /* ncols selected columns, in the order fields() gives them */
    size_t ncols;
    void *impl;            /* the row's */
    void *gen;             /* the table code's (groups built over locate()); rows leave it alone */
    int in_order;          /* set by open(): its groups decode through one cursor over a
                              compressed stream (dscodec.c), fastest in order; the pipeline
                              decodes them on one thread */
};

/* A decoded group; owned by the caller (see the contract). */
struct pi_dsgroup {
    uint64_t g;                  /* set by the caller */
    struct pi_dsgroupinfo info;  /* set by the caller (from group()) */
    const struct pi_dsbuf *bufs; /* the fetched ranges, set by the caller */
    size_t nbufs;
    void *impl;                  /* the row's decoded state; freed by group_free() */
    uint32_t part;               /* set by the caller: 1 when bufs are part()'s ranges and info
                                    the part's samples (fields' i counts from info.first) */
};

/* What open() gets. */
struct pi_dsopen {
    const char *uri;             /* the shard as named by the user or the index */
    const char *const *columns;  /* columns= selection (NULL: all); names as in the schema */
    size_t ncolumns;
    const void *meta;            /* from the row's index() for this shard (MDS: its entry), else NULL */
    const char *cache_dir;       /* where a row may cache derived indexes when the shard's
                                    directory is not writable or remote (NULL: none) */
    uint64_t group_bytes;        /* hint for rows that choose their own groups (records,
                                    tar runs, lines): about this many bytes a group */
    uint64_t record_bytes;       /* the records row only */
    uint32_t flags;              /* PI_DSOPEN_* */
    struct pi_dsopenset *openset; /* the dataset's bounded set of open sources (dsopenset.h), or NULL */
};
#define PI_DSOPEN_NO_CACHE 0x1u  /* do not read or write cached indexes */

/* A directory described by one file (MDS index.json, a save_to_disk
 * state.json): the shards it lists, in order, each with the meta its
 * open() gets. Filled by index() through pi_dsindex_add(). */
struct pi_dsindex {
    char **names;        /* shard names relative to the directory (or full URIs) */
    const void **meta;   /* per shard, pointing into impl */
    size_t n, cap;
    void *impl;          /* the row's parsed index; freed by its index_free() */
};
int pi_dsindex_add(struct pi_dsindex *ix, const char *name, size_t len, const void *meta);

/* ---- the row ---------------------------------------------------------------- */

struct pi_dsformat {
    const char *name;               /* "records", "megatron", "lines", "webdataset", "mds", "arrow", "parquet" */
    const char *const *aliases;     /* other format names users give for it ("jsonl", "wds"); NULL-terminated */
    const char *const *suffixes;    /* file names a directory scan picks up (".tar", ".arrow"); NULL-terminated */
    uint32_t head_bytes;            /* bytes detect() wants from the start of the file ... */
    uint32_t tail_bytes;            /* ... and from its end (Parquet "PAR1", an Arrow file's footer) */
    /* 0 not this format, 1 only the name suggests it, 2 the content proves
     * it. head/tail are the first/last bytes (fewer when the file is
     * shorter; tail NULL when tail_bytes is 0). Pure. */
    int (*detect)(const char *name, const uint8_t *head, size_t nhead, const uint8_t *tail, size_t ntail,
                  uint64_t size);

    /* Optional, directory level: names of files that describe a whole
     * directory ("index.json"); index() parses one (buf, len: its whole
     * content; dir: the directory or prefix, for messages) into ix. Pure. */
    const char *const *index_names;
    int (*index)(const char *dir, const uint8_t *buf, size_t len, struct pi_dsindex *ix);
    void (*index_free)(struct pi_dsindex *ix);

    /* Optional: companion files. A dataset of this row named through a
     * file that is not its shard (Megatron: PREFIX.idx, PREFIX or
     * PREFIX.bin all name the shard PREFIX.bin, whose index open() reads
     * beside it). Sets *shard (pi_malloc'd) to the shard the name opens as
     * this row, and returns 2 when the name alone says this row (PREFIX.idx),
     * 1 when exists() finds the companion that says it (exists NULL: not
     * asked, as for remote names), 0 when neither (*shard still set: the
     * shard when the format is forced), < 0 on error. No other I/O. */
    int (*companion)(const char *name, int (*exists)(const char *uri), char **shard);

    /* Opens one shard: reads its footer/index through sh->src (once),
     * validates it against sh->src->size, applies a->columns (an unknown
     * name: PAGEIN_E_NOT_FOUND naming it and the shard), fills nsamples,
     * ngroups, cols, ncols, impl. On failure frees what it allocated
     * (close() is not called). */
    int (*open)(struct pi_dsshard *sh, const struct pi_dsopen *a);
    void (*close)(struct pi_dsshard *sh);

    /* ---- the group path (columnar and compressed rows): open() sets
     * ngroups >= 1 when nsamples >= 1 ---- */
    /* Facts of group g < ngroups. */
    int (*group)(const struct pi_dsshard *sh, uint64_t g, struct pi_dsgroupinfo *gi);
    /* The byte ranges of group g for the selected columns, in the order
     * decode() wants them: writes min(n, cap) into r and returns n (call
     * again with more room when n > cap), or < 0. Every range lies inside
     * sh->src->size; ranges may be adjacent (the engine coalesces them). */
    int (*ranges)(const struct pi_dsshard *sh, uint64_t g, struct pi_dsrange *r, size_t cap);
    /* Decodes grp->bufs (the ranges' bytes) into grp->impl. Pure; never
     * allocates more than PI_DS_MAX_DECODE nor past a declared size. */
    int (*decode)(const struct pi_dsshard *sh, struct pi_dsgroup *grp);
    /* The fields of sample i (0 <= i < grp->info.count) of a decoded
     * group: writes min(n, cap) fields (one per selected column, in column
     * order) and returns n, or < 0. No I/O, no allocation. */
    int (*fields)(const struct pi_dsshard *sh, const struct pi_dsgroup *grp, uint64_t i, struct pi_dsfield *f,
                  size_t cap);
    void (*group_free)(const struct pi_dsshard *sh, struct pi_dsgroup *grp);
    /* Optional: the part of group g that holds its sample i (group-local)
     * and can be read alone (Parquet with a page index: the pages holding
     * the row). Sets *pi to the part's samples (first shard-local, count,
     * bytes) and writes its ranges as ranges() does; returns their number,
     * or 0 when the group has no parts (read it whole). A row offers parts
     * for every group of a shard or for none; parts of a group are
     * disjoint. The global order reads parts where they are offered:
     * decode() then gets grp->part = 1, grp->info = the part's facts and
     * the part's ranges. Pure, no I/O. */
    int (*part)(const struct pi_dsshard *sh, uint64_t g, uint64_t i, struct pi_dsgroupinfo *pi, struct pi_dsrange *r,
                size_t cap);

    /* ---- the sample path (rows where one sample is one byte extent) ----
     * Optional. A shard whose open() leaves ngroups at 0 (with nsamples >
     * 0) takes this path: the table code builds groups of consecutive
     * samples of about a->group_bytes over locate() and decodes them with
     * sample(); the hooks of the group path are then not called for it (a
     * row may take either path per shard: plain JSONL by samples, .zst by
     * groups). Such shards are also "addressable": the global order reads
     * single samples, and pagein_dataset_locate / pagein_reader_* work. */
    /* Where sample i (shard-local) lives in sh->src. */
    int (*locate)(const struct pi_dsshard *sh, uint64_t i, uint64_t *off, uint64_t *len);
    /* The fields of sample i from its len bytes at p (what locate() named):
     * as fields(). Pure; fields point into p. */
    int (*sample)(const struct pi_dsshard *sh, uint64_t i, const uint8_t *p, uint64_t len, struct pi_dsfield *f,
                  size_t cap);
};

/* The table (dsformat.c), NULL-terminated, in detection order. */
extern const struct pi_dsformat *const pi_dsformats[];
/* The rows written by the table's author (their files: ds_NAME.c). */
extern const struct pi_dsformat pi_dsformat_records, pi_dsformat_megatron, pi_dsformat_lines,
    pi_dsformat_webdataset, pi_dsformat_mds;
extern const struct pi_dsformat pi_dsformat_parquet;
/* The row called name or one of its aliases; NULL if unknown. */
const struct pi_dsformat *pi_dsformat_by_name(const char *name);
/* The row whose companion files claim name (only fmt when fmt is not
 * NULL; local: companions may be looked for beside it): its claim (2, 1,
 * as the companion hook; with fmt given, fmt's shard whatever the claim),
 * *row and *shard (pi_malloc'd) set when it returns > 0 or when fmt
 * forced it; 0 and *shard NULL when no row claims it; < 0 on error. */
int pi_ds_companion(const struct pi_dsformat *fmt, const char *name, int local, const struct pi_dsformat **row,
                    char **shard);
/* The row a name says before any byte is read: companion files (local:
 * looked for beside it), else the rows' detect() given the name alone.
 * Its score (2, 1) and *row; 0 when none. */
int pi_ds_detect_name(const char *name, int local, const struct pi_dsformat **row);

/* Errors: sets the detail "SHARD: group G, sample S, field 'F': MESSAGE"
 * (parts that are UINT64_MAX / NULL left out) and returns code. Use
 * PAGEIN_E_FORMAT for malformed input, PAGEIN_E_UNSUPPORTED for valid
 * input pagein does not read (a codec, a type: name it), PAGEIN_E_LIMIT for
 * a PI_DS_MAX_* limit, PAGEIN_E_NOT_FOUND for an unknown column. */
int pi_ds_err(const struct pi_dsshard *sh, int code, uint64_t group, uint64_t sample, const char *field,
              const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* The columns= rule of every row (dscolumns.c): a top-level name, or a
 * dotted path through struct members. pi_ds_col_hit: 1 when the member at
 * path have is selected by want (equal, or under it). pi_ds_col_missing:
 * PAGEIN_E_NOT_FOUND naming want and listing names. pi_ds_col_flat: a row
 * of flat columns names[0..n): the count m of columns selected (all n
 * without a->columns), idx[0..m) (room for n; may be NULL) their indexes
 * in the shard's order, each once; unknown and two-column names refused. */
int pi_ds_col_hit(const char *have, const char *want);
int pi_ds_col_missing(const struct pi_dsshard *sh, const char *want, const char *const *names, size_t n);
int pi_ds_col_flat(const struct pi_dsshard *sh, const struct pi_dsopen *a, const char *const *names, size_t n,
                   int *idx);

/* Count checks (dscount.c), called where a row validates its groups at
 * open: count rows claimed by `bytes` bytes of `what` (a group's column
 * chunks, a batch's message) is at most PI_DS_ROWS_PER_BYTE a byte
 * (PAGEIN_E_FORMAT naming the group otherwise); *sum += count unless it
 * overflows. */
int pi_ds_count_check(const struct pi_dsshard *sh, uint64_t group, uint64_t count, uint64_t bytes,
                      const char *what);
int pi_ds_count_add(const struct pi_dsshard *sh, uint64_t group, uint64_t *sum, uint64_t count);

/* The end of a row's open(): the shard's implementation, its columns
 * (borrowed from impl: they live as long as it) and its sample count. */
void pi_ds_shard_set(struct pi_dsshard *sh, void *impl, struct pi_dscol *cols, size_t ncols, uint64_t nsamples);

/* Opens a shard of format fmt over a memory image (fuzz targets, unit
 * tests): a pi_source over buf (not copied; must outlive the shard).
 * *out is set only on success; pi_ds_shard_close frees it. */
int pi_ds_open_memory(struct pi_dsshard **out, const struct pi_dsformat *fmt, const void *buf, size_t len,
                      const char *name, const struct pi_dsopen *a);
/* Detects the format of an open source from the rows' head/tail bytes and
 * the name: the row with the best detect() score (NULL when none claims
 * it; *score may be NULL). */
const struct pi_dsformat *pi_ds_detect(struct pi_source *src, const char *name, int *score);
/* Opens a shard of fmt (NULL: detect) at uri through pi_source_open. */
int pi_ds_shard_open(struct pi_dsshard **out, const struct pi_dsformat *fmt, const char *uri,
                     const struct pi_dsopen *a);
void pi_ds_shard_close(struct pi_dsshard *sh);
/* Group facts / ranges / decode of a shard whatever path its row takes
 * (the group path, or groups built over locate()+sample()). The table
 * code and the pipeline call only these. */
int pi_ds_group(const struct pi_dsshard *sh, uint64_t g, struct pi_dsgroupinfo *gi);
int pi_ds_ranges(const struct pi_dsshard *sh, uint64_t g, struct pi_dsrange *r, size_t cap);
int pi_ds_decode(const struct pi_dsshard *sh, struct pi_dsgroup *grp);
int pi_ds_fields(const struct pi_dsshard *sh, const struct pi_dsgroup *grp, uint64_t i, struct pi_dsfield *f,
                 size_t cap);
void pi_ds_group_free(const struct pi_dsshard *sh, struct pi_dsgroup *grp);
/* Reads every group of a shard in order and walks every field of every
 * sample (fuzz targets, `pagein read-samples --check`): 0 or the first
 * error. Fetches through sh->src. */
int pi_ds_walk(const struct pi_dsshard *sh);

/* ---- cached indexes (dsformat.c) -------------------------------------------
 * For rows that derive an index by reading a whole shard (tar, lines): the
 * cache file's path (beside the shard when its directory is writable, else
 * in a->cache_dir named by a hash of the URI and tag; NULL for none or
 * PI_DSOPEN_NO_CACHE; pi_free it), and a cache's payload read back only
 * when its magic (8 bytes), the source's identity and size match (*buf
 * pi_malloc'd; 1 found, 0 none, < 0 out of memory). The payload is still
 * untrusted input: check it. Writes are atomic (temporary + rename) and
 * best effort. */
char *pi_ds_cache_path(const struct pi_dsshard *sh, const struct pi_dsopen *a, const char *tag);
int pi_ds_cache_read(const struct pi_dsshard *sh, const char *path, const char magic[8], uint8_t **buf, size_t *len);
void pi_ds_cache_write(const struct pi_dsshard *sh, const char *path, const char magic[8], const void *payload,
                       size_t len);

/* ---- codecs (dscodec.c; present when built with the library) -------------
 * Decompress exactly `want` bytes: less or more output than declared is
 * PAGEIN_E_FORMAT (never written past out + want). `what` names the block
 * in the message ("shard.00000.mds.zstd"). Without the library:
 * PAGEIN_E_UNSUPPORTED naming it. */
int pi_ds_zstd(const uint8_t *in, size_t n, uint8_t *out, size_t want, const char *what);
/* The decompressed size a zstd frame declares, or -1 (unknown / not zstd). */
int64_t pi_ds_zstd_size(const uint8_t *in, size_t n);
/* Streaming decompression of a whole .gz / .zst file into a growing buffer
 * of at most max bytes (PAGEIN_E_LIMIT past it): *out pi_malloc'd. */
int pi_ds_gunzip_all(const uint8_t *in, size_t n, uint64_t max, uint8_t **out, size_t *outlen, const char *what);
int pi_ds_unzstd_all(const uint8_t *in, size_t n, uint64_t max, uint8_t **out, size_t *outlen, const char *what);
/* The same, streamed: each decompressed piece goes to fn (in a buffer of
 * the codec's own, at most 256 KiB; fn returns 0 to go on, 1 to stop
 * early, < 0 an error passed back); *total gets the bytes produced. The
 * memory is the codec's, whatever the output size. */
typedef int (*pi_ds_piece_fn)(void *ctx, const uint8_t *p, size_t len);
int pi_ds_unzstd_each(const uint8_t *in, size_t n, uint64_t max, pi_ds_piece_fn fn, void *ctx, uint64_t *total,
                      const char *what);
int pi_ds_gunzip_each(const uint8_t *in, size_t n, uint64_t max, pi_ds_piece_fn fn, void *ctx, uint64_t *total,
                      const char *what);

/* A cursor over one compressed stream (kind 1 gzip, 2 zstd; dscodec.c):
 * pi_ds_zcur_read writes the decompressed bytes [at, at + len) of the
 * stream into out, continuing from where the last read stopped when at is
 * not behind it (reads in order decompress the stream once), else from the
 * start. The compressed bytes come from in: its window p = [base, base + n)
 * of the stream (what the pipeline fetched for the group), and the bytes
 * outside the window from src, read 1 MiB at a time (a read that starts
 * over; the few bytes between one group's window and the next), so a
 * group whose window holds only its own compressed bytes costs reads in
 * proportion to them when groups are read in order. Its memory is the
 * codec's window, one 128 KiB piece and one 1 MiB input buffer.
 * Thread-safe (one read at a time). A stream that ends before at + len is
 * PAGEIN_E_CHANGED. */
struct pi_dszin {
    const uint8_t *p; /* [base, base + n) of the stream, or NULL */
    uint64_t base;
    size_t n;
    uint64_t total;         /* the compressed stream's size */
    struct pi_source *src;  /* the bytes outside the window; NULL: none */
};
struct pi_dszcur;
int pi_ds_zcur_new(struct pi_dszcur **out, int kind, const char *what);
void pi_ds_zcur_free(struct pi_dszcur *c);
int pi_ds_zcur_read(struct pi_dszcur *c, const struct pi_dszin *in, uint64_t at, uint8_t *out, uint64_t len,
                    const char *what);
/* The stream in order, one piece (at most cap bytes) a call: *got bytes
 * (0 at the end), *in_pos the compressed bytes consumed by then. pi_ds_zcur_reset frees the codec's state until the next read. */
int pi_ds_zcur_next(struct pi_dszcur *c, const uint8_t *in, size_t n, uint8_t *out, size_t cap, uint64_t *got,
                    uint64_t *in_pos, const char *what);
void pi_ds_zcur_reset(struct pi_dszcur *c);
/* The most decompressed bytes one group of a compressed shard holds
 * (PAGEIN_DS_DECODE_BUDGET, default 16 MiB, at least 1 MiB; the pipeline holds two units of `window` groups): a shard whose
 * text is larger is read in groups of at most this. */
uint64_t pi_ds_decode_budget(void);
/* Samples a compressed shard may hold whatever its compressed size
 * (PAGEIN_DS_SAMPLE_ALLOWANCE, default 2^22): a count above both this and
 * PI_DS_ROWS_PER_BYTE per compressed byte is refused (dscount.c). */
int pi_ds_zcount_check(const struct pi_dsshard *sh, uint64_t count, uint64_t bytes, const char *what);
uint64_t pi_ds_zcount_most(uint64_t bytes); /* what that check accepts */
/* The allowance over a dataset: adds what sh (a compressed shard) claims
 * beyond PI_DS_ROWS_PER_BYTE a compressed byte to *excess; PAGEIN_E_LIMIT
 * naming sh once the sum passes the allowance. */
int pi_ds_zcount_total(const struct pi_dsshard *sh, uint64_t *excess);
/* The earliest decompressed offset the cursor reads without starting over. */
uint64_t pi_ds_zcur_pos(struct pi_dszcur *c);
/* A group of a compressed shard read through the cursor (the tar and MDS
 * rows; dscodec.c): ranges() is pi_ds_whole_ranges (the whole shard is
 * fetched for each group: a position in the stream is not known without
 * decompressing up to it), decode() keeps the group's decompressed bytes
 * [lo, lo + len) in grp->impl, a struct pi_dsraw (pi_ds_raw_read), and
 * group_free() is pi_ds_raw_free. */
struct pi_dsraw {
    uint8_t *raw; /* the decompressed bytes [base, base + len) */
    uint64_t base, len;
};
/* Group g of such a shard: samples [gfirst[g], gfirst[g + 1]) of ng groups, the whole shard's bytes. */
int pi_ds_raw_group(const struct pi_dsshard *sh, const uint64_t *gfirst, uint64_t ng, uint64_t g,
                    struct pi_dsgroupinfo *gi);
int pi_ds_whole_ranges(const struct pi_dsshard *sh, uint64_t g, struct pi_dsrange *r, size_t cap);
int pi_ds_raw_read(const struct pi_dsshard *sh, struct pi_dszcur *cur, const struct pi_dszin *in, uint64_t lo,
                   uint64_t len, struct pi_dsgroup *grp);
void pi_ds_raw_free(const struct pi_dsshard *sh, struct pi_dsgroup *grp);

#endif
