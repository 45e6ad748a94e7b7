/*
 * pagein.h - get model weights and training data from files into memory,
 * fast and safely.
 *
 * This is the only installed header of libpagein. Everything a program can
 * do with the library is declared here; src/internal.h is never installed.
 *
 * Conventions used by every function below (see docs/ARCHITECTURE.md):
 *
 *  - Errors. Every fallible function returns int: 0 (or a count) on success,
 *    a negative value on failure. Failures reported by the operating system
 *    are -errno (e.g. -ENOENT). Format and validation failures are the
 *    PAGEIN_E_* codes below, a range far below any errno value.
 *    pagein_strerror() names any of them. The human detail of the most
 *    recent failure on the calling thread (which tensor, which offset, what
 *    was expected) is returned by pagein_last_error_detail(). The library
 *    never prints, never exits and never relies on errno.
 *
 *  - Ownership. Constructors take an out-pointer and set it only on success
 *    (pagein_open(&f, ...)). Destructors accept NULL. Every pointer returned
 *    by an accessor is borrowed from the object it was obtained from and is
 *    valid until that object is closed, unless the accessor says otherwise.
 *
 *  - Options. Option structs start with a `size` field that the caller sets
 *    to sizeof(the struct) (the PAGEIN_*_OPTS_INIT macros do this), so that
 *    fields can be appended in later versions without breaking the ABI.
 *    A NULL options pointer means all defaults; a shorter (older) struct
 *    keeps the defaults of the fields it lacks; a size below
 *    sizeof(size_t) (a zeroed struct) is PAGEIN_E_INVALID ("...: options
 *    size 0"), the one rule of every call that takes options.
 *
 *  - Threads. Distinct objects may be used from distinct threads freely.
 *    Read-only accessors on one object may be called from many threads at
 *    once. Calls that change an object (close, reload) need exclusive access.
 *
 *  - Verb pairs. One pair per kind of object: open/close for an object
 *    that holds files, a source or threads (pagein_open, pagein_model_open,
 *    pagein_cache_open, pagein_live_open, and the experimental
 *    pagein_dataset_open, pagein_reader_open, pagein_pipe_open,
 *    pagein_source_open), new/free for one built in memory
 *    (pagein_gguf_writer_new, pagein_dist_plan_new). One exception, in the
 *    experimental part: a GPU load starts with the verb that names what it
 *    loads (pagein_gpu_load_model, pagein_gpu_load_file) and ends with
 *    pagein_gpu_load_free; it becomes an open/close pair when it is stable.
 *
 *  - Stability. Everything outside `#ifdef PAGEIN_EXPERIMENTAL` is the
 *    stable core: files, models, strategies, errors, dtypes, metadata, the
 *    writers, conversion, checkpoint safety and the page-cache tools; it
 *    changes only compatibly (appended fields, new functions). The young
 *    parts are fenced: training data (datasets, readers, the pipeline,
 *    ranges, Parquet), pull, byte sources by URL, storage facts and the
 *    range engine's counters, GPU staging and distributed plans. Their
 *    names, structs and behaviour may still change in any release (they
 *    grew over the last few issues and are still being reshaped), so a
 *    program sees them only when it says so, as zstd's
 *    ZSTD_STATIC_LINKING_ONLY does:
 *
 *        #define PAGEIN_EXPERIMENTAL
 *        #include <pagein.h>
 *
 *    The library, the pagein tool, the tests, benchmarks, fuzzers and the
 *    Python module define it (mk/api.mk). The library exports every
 *    function either way: the fence is at compile time only.
 */
#ifndef PAGEIN_H
#define PAGEIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define PAGEIN_API __attribute__((visibility("default")))
#else
#define PAGEIN_API
#endif

#define PAGEIN_VERSION_MAJOR 0
#define PAGEIN_VERSION_MINOR 2
#define PAGEIN_VERSION_PATCH 0
#define PAGEIN_VERSION_STRING "0.2.0"

/* Returns the library version as MAJOR*10000 + MINOR*100 + PATCH. */
PAGEIN_API unsigned pagein_version(void);
/* Returns the library version as a static string, e.g. "0.1.0". */
PAGEIN_API const char *pagein_version_string(void);

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * Library error codes. OS errors are returned as -errno and never collide
 * with these (errno values are below 4096). The numeric values are part of
 * the ABI and never change; new codes are appended.
 */
enum pagein_error {
    PAGEIN_E_BASE = -30000,
    PAGEIN_E_TRUNCATED = -30000,        /* input or file shorter than needed, or shrank */
    PAGEIN_E_BAD_MAGIC = -30001,        /* not the expected format / unrecognised file */
    PAGEIN_E_HEADER_TOO_SMALL = -30002, /* safetensors: fewer than 8 bytes */
    PAGEIN_E_HEADER_TOO_LARGE = -30003, /* safetensors: header length > 100,000,000 */
    PAGEIN_E_HEADER_LENGTH = -30004,    /* safetensors: 8 + N beyond end of file */
    PAGEIN_E_BAD_UTF8 = -30005,         /* invalid UTF-8 in a header string */
    PAGEIN_E_BAD_JSON = -30006,         /* JSON syntax or schema error */
    PAGEIN_E_BAD_DTYPE = -30007,        /* unknown, removed or unsupported dtype / type id */
    PAGEIN_E_BAD_OFFSET = -30008,       /* tensor offsets not contiguous / overlapping / out of bounds */
    PAGEIN_E_OVERFLOW = -30009,         /* arithmetic overflow on element counts or sizes */
    PAGEIN_E_BAD_TENSOR_INFO = -30010,  /* byte length disagrees with dtype and shape */
    PAGEIN_E_MISALIGNED_SLICE = -30011, /* sub-byte dtype whose size is not whole bytes */
    PAGEIN_E_INCOMPLETE = -30012,       /* data section does not end exactly at end of file */
    PAGEIN_E_DUPLICATE = -30013,        /* duplicate key or tensor name */
    PAGEIN_E_LIMIT = -30014,            /* a documented limit (depth, length, count) exceeded */
    PAGEIN_E_NOT_FOUND = -30015,        /* no such tensor / key / layer */
    PAGEIN_E_BAD_VERSION = -30016,      /* unsupported format version */
    PAGEIN_E_BAD_ALIGNMENT = -30017,    /* alignment value invalid */
    PAGEIN_E_ENDIAN = -30018,           /* byte order not supported */
    PAGEIN_E_BAD_TYPE = -30019,         /* value has another type than requested */
    PAGEIN_E_UNSUPPORTED = -30020,      /* valid input using a feature pagein does not support */
    PAGEIN_E_CHANGED = -30021,          /* file replaced (inode changed) since open */
    PAGEIN_E_BAD_INDEX = -30022,        /* sharded index or split set inconsistent */
    PAGEIN_E_UNSAFE = -30023,           /* pickle asks for a global that is not allowlisted */
    PAGEIN_E_BAD_ZIP = -30024,          /* zip container malformed */
    PAGEIN_E_BAD_PICKLE = -30025,       /* pickle stream malformed */
    PAGEIN_E_BAD_MANIFEST = -30026,     /* integrity manifest malformed */
    PAGEIN_E_HASH_MISMATCH = -30027,    /* data does not match its manifest */
    PAGEIN_E_MEMLOCK = -30028,          /* mlock refused: RLIMIT_MEMLOCK too low */
    PAGEIN_E_BAD_DATASET = -30029,      /* training-data index malformed */
    PAGEIN_E_RANGE = -30030,            /* request outside the file or object */
    PAGEIN_E_INVALID = -30031,          /* invalid argument or state */
    PAGEIN_E_CANCELLED = -30032,        /* operation stopped before completion */
    PAGEIN_E_REMOTE = -30033,           /* remote source: HTTP status, network or protocol failure */
    PAGEIN_E_NO_CUDA = -30034,          /* no CUDA driver/runtime or no such device */
    PAGEIN_E_CUDA = -30035,             /* a CUDA call failed (detail names the call and tensor) */
    PAGEIN_E_PEER = -30036,             /* another rank failed, timed out or disagrees (distributed) */
    PAGEIN_E_FORKED = -30037,           /* object used in a child after fork() where it cannot work */
    PAGEIN_E_NOT_MODEL = -30038,        /* the file is not a model in any format pagein knows */
    PAGEIN_E_FORMAT = -30039,           /* training-data file malformed (dataset-format table: shard, group, sample, field) */
    PAGEIN_E_LAST = -30099
};

/* Returns a static, human-readable name for any return code: 0, -errno or
 * PAGEIN_E_*. Never NULL. Thread-safe. */
PAGEIN_API const char *pagein_strerror(int code);

/* Returns the detail message of the most recent failure on the calling
 * thread, e.g. "model.safetensors: tensor 'lm_head.weight': data_offsets
 * [0,24] cover 24 bytes, expected 32 (F32 [2,4])". Empty string if none.
 * The pointer is valid until the next pagein call on this thread. */
PAGEIN_API const char *pagein_last_error_detail(void);

/* ------------------------------------------------------------------------ */
/* Data types                                                               */
/* ------------------------------------------------------------------------ */

/*
 * One enum for every element type of every supported format. The first
 * block follows the declaration order of the safetensors Rust crate's Dtype
 * enum; the official writer sorts tensors by that order, descending. The
 * second block holds ggml's block-quantized types (GGUF).
 */
typedef enum pagein_dtype {
    PAGEIN_DTYPE_INVALID = 0,
    PAGEIN_DTYPE_BOOL,
    PAGEIN_DTYPE_F4,
    PAGEIN_DTYPE_F6_E2M3,
    PAGEIN_DTYPE_F6_E3M2,
    PAGEIN_DTYPE_U8,
    PAGEIN_DTYPE_I8,
    PAGEIN_DTYPE_F8_E5M2,
    PAGEIN_DTYPE_F8_E4M3,
    PAGEIN_DTYPE_F8_E8M0,
    PAGEIN_DTYPE_F8_E4M3FNUZ,
    PAGEIN_DTYPE_F8_E5M2FNUZ,
    PAGEIN_DTYPE_I16,
    PAGEIN_DTYPE_U16,
    PAGEIN_DTYPE_F16,
    PAGEIN_DTYPE_BF16,
    PAGEIN_DTYPE_I32,
    PAGEIN_DTYPE_U32,
    PAGEIN_DTYPE_F32,
    PAGEIN_DTYPE_C64,
    PAGEIN_DTYPE_F64,
    PAGEIN_DTYPE_I64,
    PAGEIN_DTYPE_U64,
    /* ggml block-quantized types (GGUF). */
    PAGEIN_DTYPE_Q4_0,
    PAGEIN_DTYPE_Q4_1,
    PAGEIN_DTYPE_Q5_0,
    PAGEIN_DTYPE_Q5_1,
    PAGEIN_DTYPE_Q8_0,
    PAGEIN_DTYPE_Q8_1,
    PAGEIN_DTYPE_Q2_K,
    PAGEIN_DTYPE_Q3_K,
    PAGEIN_DTYPE_Q4_K,
    PAGEIN_DTYPE_Q5_K,
    PAGEIN_DTYPE_Q6_K,
    PAGEIN_DTYPE_Q8_K,
    PAGEIN_DTYPE_IQ2_XXS,
    PAGEIN_DTYPE_IQ2_XS,
    PAGEIN_DTYPE_IQ3_XXS,
    PAGEIN_DTYPE_IQ1_S,
    PAGEIN_DTYPE_IQ4_NL,
    PAGEIN_DTYPE_IQ3_S,
    PAGEIN_DTYPE_IQ2_S,
    PAGEIN_DTYPE_IQ4_XS,
    PAGEIN_DTYPE_IQ1_M,
    PAGEIN_DTYPE_TQ1_0,
    PAGEIN_DTYPE_TQ2_0,
    PAGEIN_DTYPE_MXFP4,
    PAGEIN_DTYPE_NVFP4,
    PAGEIN_DTYPE_Q1_0,
    PAGEIN_DTYPE_Q2_0,
    PAGEIN_DTYPE_COUNT
} pagein_dtype;

/* Static description of a dtype. Sizes are given as blocks: a tensor of n
 * elements (n a multiple of block_elems) takes n / block_elems * block_bytes
 * bytes. Plain types have block_elems 1; F4 is 2 elements per byte, F6 is 4
 * elements per 3 bytes. */
typedef struct pagein_dtype_info {
    const char *name;     /* the formats' own name: "BF16", "F8_E4M3", "Q8_0" */
    uint32_t bits;        /* bits per element; 0 for block-quantized types */
    uint32_t block_elems; /* elements per block */
    uint32_t block_bytes; /* bytes per block */
    int32_t gguf_id;      /* ggml_type id, or -1 when GGUF has no such type */
    uint32_t flags;       /* PAGEIN_DTYPE_F_* */
    uint32_t st_order;    /* safetensors types: position in the safetensors crate's
                             Dtype enum (1-based), the order its writer sorts tensors
                             by; 0 for other types. New dtypes get new values here, so
                             written bytes never depend on this enum's numbering. */
} pagein_dtype_info;

#define PAGEIN_DTYPE_F_FLOAT 0x1u   /* floating point (incl. F8, F6, F4, C64) */
#define PAGEIN_DTYPE_F_SIGNED 0x2u  /* signed integer */
#define PAGEIN_DTYPE_F_QUANT 0x4u   /* ggml block-quantized */
#define PAGEIN_DTYPE_F_SAFETENSORS 0x8u /* representable in safetensors */

/* Returns the description of d, or NULL if d is not a valid dtype. The
 * returned pointer is static. */
PAGEIN_API const pagein_dtype_info *pagein_dtype_get(pagein_dtype d);
/* Looks a dtype up by its exact (case-sensitive) name; len bytes of name
 * are compared. Returns PAGEIN_DTYPE_INVALID if unknown. */
PAGEIN_API pagein_dtype pagein_dtype_from_name(const char *name, size_t len);
/* Maps a ggml type id to a dtype; PAGEIN_DTYPE_INVALID for removed/unknown. */
PAGEIN_API pagein_dtype pagein_dtype_from_gguf(uint32_t ggml_type);
/* Byte size of nelements of d into *nbytes. Returns 0, PAGEIN_E_OVERFLOW,
 * PAGEIN_E_MISALIGNED_SLICE (not a whole number of bytes / blocks) or
 * PAGEIN_E_BAD_DTYPE. */
PAGEIN_API int pagein_dtype_nbytes(pagein_dtype d, uint64_t nelements, uint64_t *nbytes);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                  */
/* ------------------------------------------------------------------------ */

/* Flags of a tensor record. */
#define PAGEIN_TENSOR_SWAPPED 0x1u       /* data is in non-native byte order */
#define PAGEIN_TENSOR_NONCONTIGUOUS 0x2u /* strided view (PyTorch checkpoints) */
#define PAGEIN_TENSOR_VIEW 0x4u          /* shares storage with another tensor */
#define PAGEIN_TENSOR_UNALIGNED 0x8u     /* data not aligned to its element size */
/* A model's tensor whose bytes are built from several stored pieces (a
 * torch Distributed Checkpoint's tensor saved in several chunks, or as a
 * strided view): data points into the model's own memory, filled when the
 * tensor is made resident (pagein_tensor_wait, pagein_layer_wait,
 * pagein_model_tensor_data, pagein_model_load_tensors; at open for populate
 * and read; until then its bytes read as zeros); offset/nbytes are not a
 * range of its file. */
#define PAGEIN_TENSOR_ASSEMBLED 0x10u
/* Not a tensor: a stored object's bytes (a DCP BytesStorageMetadata item:
 * the torch.save bytes of the object, never unpickled), dtype U8. */
#define PAGEIN_TENSOR_BYTES 0x20u

/*
 * One tensor, in any format. Records are owned by the file or model they
 * came from and valid until it is closed; every pointer inside is borrowed
 * from it. Fields may be appended in later versions (records are only ever
 * handed out by pointer).
 */
typedef struct pagein_tensor {
    const char *name;       /* NUL-terminated (may contain NUL: use name_len) */
    size_t name_len;
    pagein_dtype dtype;
    uint32_t ndim;
    const uint64_t *shape;  /* ndim dimensions, outermost first (row-major) */
    uint64_t offset;        /* absolute byte offset of the data in its file */
    uint64_t nbytes;        /* byte length of the data */
    uint64_t nelements;
    int32_t layer;          /* layer index from the name, -1 for globals */
    uint32_t file;          /* index of the file holding it (0 for single files) */
    uint32_t index;         /* position in file order */
    uint32_t flags;         /* PAGEIN_TENSOR_* */
    const void *data;       /* borrowed pointer to nbytes of data: into the
                               mapping, or into memory filled by explicit
                               reads. Reading through it is the caller's
                               access, not guarded against truncation. */
} pagein_tensor;

/* ------------------------------------------------------------------------ */
/* Metadata                                                                 */
/* ------------------------------------------------------------------------ */

/* Metadata value types. Values 0-12 equal GGUF's gguf_type ids. */
typedef enum pagein_meta_type {
    PAGEIN_META_U8 = 0,
    PAGEIN_META_I8 = 1,
    PAGEIN_META_U16 = 2,
    PAGEIN_META_I16 = 3,
    PAGEIN_META_U32 = 4,
    PAGEIN_META_I32 = 5,
    PAGEIN_META_F32 = 6,
    PAGEIN_META_BOOL = 7,
    PAGEIN_META_STRING = 8,
    PAGEIN_META_ARRAY = 9,
    PAGEIN_META_U64 = 10,
    PAGEIN_META_I64 = 11,
    PAGEIN_META_F64 = 12
} pagein_meta_type;

/*
 * One metadata entry. safetensors `__metadata__` entries are all STRING.
 * Scalars are decoded into the union; strings point at str/str_len (for
 * safetensors a decoded, NUL-terminated copy; for GGUF a pointer into the
 * mapping that is NOT NUL-terminated). Arrays give elem_type, count and a
 * zero-copy pointer to the raw packed elements in file byte order (numeric
 * elements may be unaligned: memcpy them, or use pagein_meta_array_*).
 */
typedef struct pagein_meta {
    const char *key;        /* NUL-terminated copy */
    size_t key_len;
    pagein_meta_type type;
    pagein_meta_type elem_type; /* for ARRAY */
    uint64_t count;             /* for ARRAY: number of elements */
    const void *raw;            /* for ARRAY: first element's bytes */
    uint64_t raw_len;           /* for ARRAY: bytes spanned by the elements */
    const char *str;            /* for STRING */
    uint64_t str_len;
    union {
        uint64_t u;
        int64_t i;
        double f;
        int b;
    } v;                        /* scalar value (integers widened) */
} pagein_meta;

/* ------------------------------------------------------------------------ */
/* Single files                                                             */
/* ------------------------------------------------------------------------ */

typedef struct pagein_file pagein_file;

typedef enum pagein_format {
    PAGEIN_FORMAT_UNKNOWN = 0,
    PAGEIN_FORMAT_SAFETENSORS = 1,
    PAGEIN_FORMAT_GGUF = 2,
    PAGEIN_FORMAT_TORCH = 3,
    PAGEIN_FORMAT_DCP = 4 /* a torch Distributed Checkpoint directory (docs/FORMAT-DCP.md) */
} pagein_format;

/* Name of a format: "safetensors", "gguf", "torch"; "unknown" for
 * PAGEIN_FORMAT_UNKNOWN and any value pagein does not know (the rule for
 * every *_name function: never NULL). Static string. Thread-safe. */
PAGEIN_API const char *pagein_format_name(pagein_format f);

/* ---- format table look-ups (the CLI's cache commands ask the
 * table instead of keeping their own rules) ---------------------------- */
/* The format whose file-name suffix name carries (.safetensors, .gguf,
 * .pt/.pth/.bin/.ckpt: the format table's suffixes), or
 * PAGEIN_FORMAT_UNKNOWN. Does no I/O. */
PAGEIN_API pagein_format pagein_format_of_name(const char *name);
/* The format the first len bytes of a file of size bytes show (content
 * only, the detection pagein_open runs), or PAGEIN_FORMAT_UNKNOWN. */
PAGEIN_API pagein_format pagein_detect_format(const void *buf, size_t len, uint64_t size);
/* 1 if a folder scan (pagein_model_open on a directory or a remote prefix)
 * considers a file of this name: a format's suffix or a sharded index
 * (*.safetensors.index.json); 0 otherwise (also for hidden names). */
PAGEIN_API int pagein_is_model_name(const char *name);
/* ---- end of format table look-ups ------------------------------------- */

/* Open flags. */
#define PAGEIN_OPEN_LENIENT 0x1u  /* safetensors: allow trailing bytes after the
                                     data (fastsafetensors' rule); GGUF: no
                                     effect (old files sized nelements*bytes/blck
                                     are accepted by default: docs/FORMAT-GGUF.md). */
#define PAGEIN_OPEN_PRIVATE 0x2u  /* map copy-on-write (MAP_PRIVATE, PROT_READ |
                                     PROT_WRITE): tensor memory may be written
                                     in place; a written page becomes a private
                                     copy of this process and never reaches the
                                     file; unwritten pages still share the page
                                     cache with every other reader. */

typedef struct pagein_open_opts {
    size_t size;          /* sizeof(pagein_open_opts) */
    uint32_t flags;       /* PAGEIN_OPEN_* */
    pagein_format format; /* PAGEIN_FORMAT_UNKNOWN = detect from content */
} pagein_open_opts;

#define PAGEIN_OPEN_OPTS_INIT { sizeof(pagein_open_opts), 0, PAGEIN_FORMAT_UNKNOWN }

/*
 * Opens path read-only, maps the whole file MAP_SHARED, detects its format
 * from its first bytes and parses and validates the header from the mapping.
 * No tensor byte is read. On success sets *f and returns 0. On failure
 * returns -errno or PAGEIN_E_* and leaves *f untouched; the detail names the
 * file, the tensor or offset, and what was expected.
 */
PAGEIN_API int pagein_open(pagein_file **f, const char *path, const pagein_open_opts *opts);

/*
 * Parses a file image already in memory (len bytes at buf). The buffer is
 * borrowed and must outlive the file object; tensor data pointers point into
 * it. name is used in messages (may be NULL). Does no I/O.
 */
PAGEIN_API int pagein_open_memory(pagein_file **f, const void *buf, size_t len,
                                  const char *name, const pagein_open_opts *opts);

/* Unmaps and frees. Every pointer obtained from f becomes invalid. NULL ok. */
PAGEIN_API void pagein_close(pagein_file *f);

/* Facts about an open file. Pointers borrowed from f. */
typedef struct pagein_file_info {
    const char *path;     /* as given to open, or the name given to open_memory */
    pagein_format format;
    uint64_t file_size;
    uint64_t data_start;  /* absolute offset of the data section */
    uint64_t header_len;  /* safetensors: N; GGUF: bytes before data_start */
    uint32_t version;     /* GGUF version; 0 for safetensors */
    uint32_t alignment;   /* GGUF alignment; 0 for safetensors */
    size_t n_tensors;
    size_t n_meta;
    int big_endian;       /* GGUF big-endian file (see docs/FORMAT-GGUF.md) */
    const void *base;     /* start of the mapping (file offset 0) */
} pagein_file_info;

PAGEIN_API void pagein_file_get_info(const pagein_file *f, pagein_file_info *info);

/* Number of tensors. */
PAGEIN_API size_t pagein_tensor_count(const pagein_file *f);
/* i-th tensor in file order (ascending offset), or NULL if i is out of range. */
PAGEIN_API const pagein_tensor *pagein_tensor_at(const pagein_file *f, size_t i);
/* i-th tensor in layer order: globals such as embeddings first, then layers
 * in numeric order, then final norms and the head; ties in file order. */
PAGEIN_API const pagein_tensor *pagein_tensor_by_layer(const pagein_file *f, size_t i);
/* O(1) lookup by name (len bytes, may contain NUL). NULL if absent. */
PAGEIN_API const pagein_tensor *pagein_tensor_find(const pagein_file *f, const char *name, size_t len);
/* Convenience: lookup by NUL-terminated name. */
PAGEIN_API const pagein_tensor *pagein_tensor_get(const pagein_file *f, const char *name);

/* Number of metadata entries; i-th entry in file order (NULL if out of range);
 * lookup by NUL-terminated key (NULL if absent). */
PAGEIN_API size_t pagein_meta_count(const pagein_file *f);
PAGEIN_API const pagein_meta *pagein_meta_at(const pagein_file *f, size_t i);
PAGEIN_API const pagein_meta *pagein_meta_find(const pagein_file *f, const char *key);

/*
 * Layer index derived from a tensor name (docs/ARCHITECTURE.md lists the
 * conventions: `model.layers.N.`, `h.N.`, `blocks.N.`, `blk.N.`, ...).
 * Returns -1 for globals. *tail (may be NULL) is set to 1 for globals that
 * belong after the last layer (final norms, the head), 0 otherwise.
 */
PAGEIN_API int32_t pagein_layer_from_name(const char *name, size_t len, int *tail);

/* ------------------------------------------------------------------------ */
/* GGUF metadata                                                            */
/* ------------------------------------------------------------------------ */

/*
 * Typed access to metadata entries (docs/FORMAT-GGUF.md). GGUF writers
 * disagree on integer widths (token ids are u32 in one file and i32 or u64
 * in another; split.no is u16), so every integer getter accepts a value of
 * any integer type (and BOOL as 0/1) and checks that it fits the requested
 * type. Values of safetensors files are all strings; only
 * pagein_meta_get_str applies to them.
 *
 * Common parameters and returns:
 *   f    the file the key is looked up in (NULL gives PAGEIN_E_INVALID).
 *   key  NUL-terminated key, e.g. "llama.block_count".
 *   out  receives the value only on success.
 * Returns 0, PAGEIN_E_NOT_FOUND (no such key), PAGEIN_E_BAD_TYPE (the value
 * is not of a compatible type, e.g. a string asked for as u32) or
 * PAGEIN_E_OVERFLOW (an integer that does not fit, e.g. -1 asked for as
 * u64 or 2^40 as u32). The detail names the key, its type and its value.
 * Read-only: thread-safe on one file.
 */
PAGEIN_API int pagein_meta_get_u32(const pagein_file *f, const char *key, uint32_t *out);
PAGEIN_API int pagein_meta_get_u64(const pagein_file *f, const char *key, uint64_t *out);
PAGEIN_API int pagein_meta_get_i64(const pagein_file *f, const char *key, int64_t *out);
/* Any float or integer type, converted to double (u64/i64 may round). */
PAGEIN_API int pagein_meta_get_f64(const pagein_file *f, const char *key, double *out);
/* BOOL (any non-zero byte is true, as in ggml), or any integer (non-zero). */
PAGEIN_API int pagein_meta_get_bool(const pagein_file *f, const char *key, int *out);
/*
 * A STRING value: *s points at *len bytes, borrowed from f until it is
 * closed. For GGUF the bytes are in the mapping and NOT NUL-terminated
 * (print with "%.*s"); for safetensors they are a NUL-terminated copy.
 * len may be NULL.
 */
PAGEIN_API int pagein_meta_get_str(const pagein_file *f, const char *key, const char **s, size_t *len);
/*
 * An ARRAY value: sets *m to its record (m->elem_type, m->count; m->raw is
 * the zero-copy packed elements in file byte order). Errors as above
 * (PAGEIN_E_BAD_TYPE when the value is not an array).
 */
PAGEIN_API int pagein_meta_get_array(const pagein_file *f, const char *key, const pagein_meta **m);

/*
 * Element i of an array record m. m must come from f (pagein_meta_at,
 * pagein_meta_find or pagein_meta_get_array on f) or be filled by
 * pagein_meta_array_at on f: the file supplies the byte order and the
 * version's length width. Numeric elements are decoded with memcpy (they
 * may be unaligned) and byte-swapped for big-endian files.
 *
 * _u64/_i64: any integer or BOOL element type, range-checked.
 * _f64: any float or integer element type.
 * _str: STRING elements; *s points at *len bytes in the mapping, NOT
 *       NUL-terminated, borrowed until f is closed. O(1) for arrays of f's
 *       table (an index is built at open), O(i) for nested ones.
 * _at:  ARRAY elements (nested arrays): fills *out (caller-owned) with a
 *       record of the inner array (key NULL, type ARRAY, elem_type, count,
 *       raw, raw_len), which can be passed back to these functions.
 * Returns 0, PAGEIN_E_INVALID (NULL argument or m not an array),
 * PAGEIN_E_RANGE (i >= m->count), PAGEIN_E_BAD_TYPE (element type not
 * compatible) or PAGEIN_E_OVERFLOW (integer does not fit). Thread-safe.
 */
PAGEIN_API int pagein_meta_array_u64(const pagein_file *f, const pagein_meta *m, uint64_t i, uint64_t *out);
PAGEIN_API int pagein_meta_array_i64(const pagein_file *f, const pagein_meta *m, uint64_t i, int64_t *out);
PAGEIN_API int pagein_meta_array_f64(const pagein_file *f, const pagein_meta *m, uint64_t i, double *out);
PAGEIN_API int pagein_meta_array_str(const pagein_file *f, const pagein_meta *m, uint64_t i, const char **s,
                                     size_t *len);
PAGEIN_API int pagein_meta_array_at(const pagein_file *f, const pagein_meta *m, uint64_t i, pagein_meta *out);

/* Name of a metadata type as GGUF tools print it: "u8", "i32", "f32",
 * "bool", "string", "array", "u64", ...; "unknown" for invalid values (the
 * rule for every *_name function: never NULL). Static. Thread-safe. */
PAGEIN_API const char *pagein_meta_type_name(pagein_meta_type t);

/*
 * The dimensions of t in GGUF/ggml order: ne[0] is the innermost
 * (contiguous) dimension, i.e. the reverse of t->shape. Fills ne[0..3],
 * with 1 for the dimensions t does not have, and returns t->ndim. For
 * tensors with more than 4 dimensions (not GGUF) only the 4 innermost are
 * filled. Never fails; t must not be NULL.
 */
PAGEIN_API uint32_t pagein_tensor_ggml_ne(const pagein_tensor *t, uint64_t ne[4]);

/* ------------------------------------------------------------------------ */
/* Writing safetensors                                                      */
/* ------------------------------------------------------------------------ */

/* Fills len bytes of a tensor's data, starting at byte off of that tensor,
 * into dst. Returns 0 or a negative code (which aborts the write). */
typedef int (*pagein_fill_fn)(void *ctx, void *dst, uint64_t off, size_t len);

typedef struct pagein_write_tensor {
    const char *name;      /* NUL-terminated */
    pagein_dtype dtype;
    uint32_t ndim;
    const uint64_t *shape; /* outermost first */
    const void *data;      /* the bytes, or NULL to use fill */
    pagein_fill_fn fill;
    void *fill_ctx;
} pagein_write_tensor;

typedef struct pagein_write_opts {
    size_t size;                  /* sizeof(pagein_write_opts) */
    const char *const *meta_keys; /* __metadata__ string map, n_meta entries */
    const char *const *meta_values;
    size_t n_meta;
    uint64_t align;               /* data start alignment: 0 = 8 (official);
                                     4096 pads the header for O_DIRECT */
} pagein_write_opts;

#define PAGEIN_WRITE_OPTS_INIT { sizeof(pagein_write_opts), NULL, NULL, 0, 0 }

/*
 * Writes a safetensors file with exactly the official writer's layout:
 * tensors ordered by dtype (descending, Rust enum order) then name, compact
 * JSON with __metadata__ first, header padded with spaces. The file is
 * written to a temporary file in path's directory, fsynced, renamed over
 * path and the directory fsynced: readers never see a partial file and an
 * existing file at path is never truncated. On failure nothing is left.
 *
 * tensors[i].data (tensor bytes, borrowed for the call) or, when data is
 * NULL, tensors[i].fill is called with ascending chunks of at most 4 MiB; a
 * negative return from fill aborts the write with that code. Names must be
 * unique and not "__metadata__"; metadata keys unique. opts may be NULL.
 * Returns 0, or: PAGEIN_E_INVALID (NULL name/shape/data, reserved name),
 * PAGEIN_E_DUPLICATE, PAGEIN_E_BAD_DTYPE (not a safetensors dtype),
 * PAGEIN_E_MISALIGNED_SLICE (F4/F6 element count not whole bytes),
 * PAGEIN_E_OVERFLOW, PAGEIN_E_BAD_ALIGNMENT (align not a power of two in
 * [8, 2^30]), PAGEIN_E_HEADER_TOO_LARGE (header over 100,000,000 bytes),
 * -errno from the filesystem, or fill's code. Thread-safe (no shared state);
 * two concurrent writes to the same path leave one complete file.
 * docs/FORMAT-SAFETENSORS.md describes the exact layout.
 */
PAGEIN_API int pagein_safetensors_write(const char *path, const pagein_write_tensor *tensors,
                                        size_t n, const pagein_write_opts *opts);

/* ------------------------------------------------------------------------ */
/* Writing GGUF                                                             */
/* ------------------------------------------------------------------------ */

/*
 * A GGUF writer: collect metadata and tensors, then write the file in one
 * go. Files it writes follow ggml's rules exactly: metadata in the order it
 * was set, tensors in the order they were added, each tensor's offset the
 * running sum of the preceding sizes padded to the alignment, the data
 * section padded after every tensor (so the file ends aligned). They read
 * back identically with pagein_open and are accepted by ggml's gguf.cpp
 * (which also needs ne[0], the innermost dimension, to be a multiple of
 * the block size of quantized types: the writer checks it).
 *
 * Not thread-safe: one writer is used by one thread at a time.
 */
typedef struct pagein_gguf_writer pagein_gguf_writer;

typedef struct pagein_gguf_write_opts {
    size_t size;        /* sizeof(pagein_gguf_write_opts) */
    uint32_t alignment; /* 0: general.alignment if set, else 32. Non-zero:
                           must be a power of two; general.alignment (u32)
                           is added when not set (and must agree if set). */
    uint32_t flags;     /* PAGEIN_GGUF_WRITE_* */
} pagein_gguf_write_opts;

/* Accept a quantized tensor whose innermost dimension is not a whole number
 * of blocks when its element count is (sized nelements / block * bytes, the
 * layout of old files such as tinyllamas-stories-260k-q8_0.gguf, which
 * gguf.cpp refuses): how a converter copies such a file as it is. */
#define PAGEIN_GGUF_WRITE_WHOLE_BLOCKS 0x1u

#define PAGEIN_GGUF_WRITE_OPTS_INIT { sizeof(pagein_gguf_write_opts), 0, 0 }

/* Creates a writer. Returns 0, -ENOMEM or PAGEIN_E_INVALID (bad options);
 * sets *w only on success. */
PAGEIN_API int pagein_gguf_writer_new(pagein_gguf_writer **w, const pagein_gguf_write_opts *opts);
/* Frees the writer and everything it copied. NULL ok. */
PAGEIN_API void pagein_gguf_writer_free(pagein_gguf_writer *w);

/*
 * Metadata setters. key is NUL-terminated, non-empty and copied. Each key
 * may be set once (PAGEIN_E_DUPLICATE otherwise); general.alignment must
 * be u32 and a non-zero power of two (PAGEIN_E_BAD_ALIGNMENT). Values are
 * copied. Returns 0, -ENOMEM or PAGEIN_E_*.
 *
 * pagein_gguf_set_scalar: type is any scalar type (not STRING or ARRAY);
 *   value points at one value of that type in native byte order (uint8_t
 *   for U8 and BOOL, int16_t for I16, float for F32, double for F64, ...).
 * pagein_gguf_set_str: len bytes of s (may contain NUL).
 * pagein_gguf_set_array: count packed native values of a scalar elem_type.
 * pagein_gguf_set_str_array: count strings; lens may be NULL (strlen).
 * pagein_gguf_set_raw: a value of any type given as its encoded bytes
 *   (for ARRAY: elem_type u32, count, elements) in the layout the writer
 *   writes (its version's length width and byte order); the writer checks
 *   that the bytes are exactly one valid value. This is how nested arrays
 *   are written, and how values are copied from an open file of the same
 *   layout (pagein_meta.raw of an array is its elements: prefix them).
 */
PAGEIN_API int pagein_gguf_set_scalar(pagein_gguf_writer *w, const char *key, pagein_meta_type type,
                                      const void *value);
PAGEIN_API int pagein_gguf_set_u32(pagein_gguf_writer *w, const char *key, uint32_t v);
PAGEIN_API int pagein_gguf_set_i32(pagein_gguf_writer *w, const char *key, int32_t v);
PAGEIN_API int pagein_gguf_set_u64(pagein_gguf_writer *w, const char *key, uint64_t v);
PAGEIN_API int pagein_gguf_set_f32(pagein_gguf_writer *w, const char *key, float v);
PAGEIN_API int pagein_gguf_set_bool(pagein_gguf_writer *w, const char *key, int v);
PAGEIN_API int pagein_gguf_set_str(pagein_gguf_writer *w, const char *key, const char *s, size_t len);
PAGEIN_API int pagein_gguf_set_array(pagein_gguf_writer *w, const char *key, pagein_meta_type elem_type,
                                     const void *elems, uint64_t count);
PAGEIN_API int pagein_gguf_set_str_array(pagein_gguf_writer *w, const char *key, const char *const *s,
                                         const size_t *lens, uint64_t count);
PAGEIN_API int pagein_gguf_set_raw(pagein_gguf_writer *w, const char *key, pagein_meta_type type,
                                   const void *bytes, size_t len);

/*
 * Copies metadata record m of the open file f (any GGUF version and byte
 * order, or a safetensors string) under key (NULL = m->key, byte for byte
 * even if it holds a NUL), re-encoding it in the writer's layout: scalars,
 * strings, arrays of every element type, nested arrays. This is how a
 * converter carries a file's metadata over. Errors as for the setters, plus
 * PAGEIN_E_INVALID for a NULL argument.
 */
PAGEIN_API int pagein_gguf_set_meta(pagein_gguf_writer *w, const char *key, const pagein_file *f,
                                    const pagein_meta *m);

/*
 * Adds a tensor (shape outermost first, as everywhere in pagein; the file
 * stores it reversed). t->name (< 64 bytes), t->shape (<= 4 dims) are
 * copied; t->data (or t->fill with t->fill_ctx) must stay valid until
 * pagein_gguf_write returns. dtype must exist in GGUF (gguf_id >= 0).
 * Returns 0, -ENOMEM, PAGEIN_E_DUPLICATE, PAGEIN_E_LIMIT (name, dims),
 * PAGEIN_E_BAD_DTYPE, PAGEIN_E_BAD_TENSOR_INFO (innermost dimension not a
 * multiple of the block size), PAGEIN_E_OVERFLOW or PAGEIN_E_INVALID.
 */
PAGEIN_API int pagein_gguf_add_tensor(pagein_gguf_writer *w, const pagein_write_tensor *t);

/*
 * Writes the file atomically: to a temporary file in path's directory,
 * fsynced, renamed over path, directory fsynced. Readers never see a
 * partial file; on failure nothing is left and an existing file at path is
 * untouched. The writer may be written again or freed afterwards. Returns
 * 0, -errno, or the negative code returned by a fill callback.
 */
PAGEIN_API int pagein_gguf_write(pagein_gguf_writer *w, const char *path);

/* ------------------------------------------------------------------------ */
/* Models: one tensor table over one or many files, and load strategies     */
/* ------------------------------------------------------------------------ */

typedef struct pagein_model pagein_model;

/* When and how pages arrive (docs/LOADING.md explains each). */
typedef enum pagein_strategy {
    PAGEIN_STRATEGY_AUTO = 0,     /* choose from filesystem, disk, size, memory */
    PAGEIN_STRATEGY_LAZY = 1,     /* map; pages fault in on first touch. Remote files (no mapping):
                                     headers only, no data pointers; read tensors with
                                     pagein_tensor_copy (waits and loads: PAGEIN_E_UNSUPPORTED) */
    PAGEIN_STRATEGY_POPULATE = 2, /* map and make everything resident at open, in parallel */
    PAGEIN_STRATEGY_PREFETCH = 3, /* a background pager keeps layers ahead of a cursor (mapped files:
                                     pages the mapping in; remote: reads layers into memory) */
    PAGEIN_STRATEGY_READ = 4      /* explicit parallel reads into anonymous memory */
} pagein_strategy;

/* Hints (pagein_model_opts.hints). */
#define PAGEIN_HINT_SEQUENTIAL 0x1u  /* madvise(MADV_SEQUENTIAL) on mappings */
#define PAGEIN_HINT_RANDOM 0x2u      /* madvise(MADV_RANDOM) */
#define PAGEIN_HINT_HUGEPAGE 0x4u    /* madvise(MADV_HUGEPAGE) */
#define PAGEIN_HINT_WILLNEED 0x8u    /* madvise(MADV_WILLNEED) on open */
#define PAGEIN_HINT_DIRECT 0x10u     /* read strategy: O_DIRECT, falling back to buffered */
#define PAGEIN_HINT_PRELOAD 0x20u    /* page in leading globals and layer 0 before open returns */

typedef struct pagein_model_opts {
    size_t size;                /* sizeof(pagein_model_opts) */
    pagein_strategy strategy;   /* default AUTO */
    uint32_t open_flags;        /* PAGEIN_OPEN_* for every file */
    uint32_t hints;             /* PAGEIN_HINT_* */
    unsigned threads;           /* I/O threads; 0 = default */
    uint64_t chunk_bytes;       /* parallel I/O chunk; 0 = default */
    unsigned prefetch_ahead;    /* prefetch: layers kept resident ahead of the cursor; 0 = 2; values
                                   above the layer count (up to UINT_MAX) mean all layers */
    uint64_t budget_bytes;      /* prefetch: residency budget; 0 = unlimited */
    const char *const *mlock_tensors; /* names to mlock after open (NULL = none) */
    size_t n_mlock;
} pagein_model_opts;

#define PAGEIN_MODEL_OPTS_INIT { sizeof(pagein_model_opts), PAGEIN_STRATEGY_AUTO, 0, 0, 0, 0, 0, 0, NULL, 0 }

/*
 * Opens a model: a single safetensors or GGUF file, a sharded safetensors
 * checkpoint (`*.safetensors.index.json`, or a directory holding one), a GGUF
 * split set (any shard names the set), or a directory holding one model.
 * Every file is validated; every index entry must exist in the shard it
 * names. Tensors from all files form one table. Sets *m only on success.
 */
PAGEIN_API int pagein_model_open(pagein_model **m, const char *path, const pagein_model_opts *opts);
/* Stops the pager, unmaps and frees. Pointers from m become invalid. NULL ok. */
PAGEIN_API void pagein_model_close(pagein_model *m);

/* Files of the model, in shard order. The file objects are owned by m. */
PAGEIN_API size_t pagein_model_file_count(const pagein_model *m);
PAGEIN_API const pagein_file *pagein_model_file(const pagein_model *m, size_t i);

/* All tensors: in model order (shard order, then file order), in layer
 * order across shards, or by name (O(1)). Records owned by m; their `file`
 * field indexes pagein_model_file(). NULL when out of range or absent. */
PAGEIN_API size_t pagein_model_tensor_count(const pagein_model *m);
PAGEIN_API const pagein_tensor *pagein_model_tensor_at(const pagein_model *m, size_t i);
PAGEIN_API const pagein_tensor *pagein_model_tensor_by_layer(const pagein_model *m, size_t i);
PAGEIN_API const pagein_tensor *pagein_model_tensor_get(const pagein_model *m, const char *name);

/* Number of numbered layers L (max layer index + 1; 0 if none). */
PAGEIN_API int32_t pagein_model_layer_count(const pagein_model *m);
/* Tensors of one layer in layer order: layer -1 = leading globals
 * (embeddings), 0..L-1 = the numbered layers, L = trailing globals (final
 * norms, head). Sets *out to an array owned by m; returns the count. */
PAGEIN_API size_t pagein_model_layer_tensors(const pagein_model *m, int32_t layer,
                                             const pagein_tensor *const **out);

/* The strategy in effect and, in *why (may be NULL), a sentence saying why
 * (for AUTO: which fact decided, e.g. "auto: nfs is a network or FUSE
 * filesystem ..."). The sentence is owned by m and valid until it is closed. */
PAGEIN_API pagein_strategy pagein_model_strategy(const pagein_model *m, const char **why);
PAGEIN_API const char *pagein_strategy_name(pagein_strategy s);
/* Number of strategies (ids 0 .. count-1, PAGEIN_STRATEGY_AUTO first), and
 * a one-line summary of each ("unknown" for other values): for tools that
 * list every strategy without hard-coding names. Thread-safe. */
PAGEIN_API size_t pagein_strategy_count(void);
PAGEIN_API const char *pagein_strategy_summary(pagein_strategy s);
/* Parses "auto", "lazy", "populate", "prefetch", "read"; PAGEIN_E_NOT_FOUND
 * (negative) if unknown or NULL. */
PAGEIN_API int pagein_strategy_from_name(const char *name);

/* Makes the given tensors (or, with t == NULL, every tensor) resident now,
 * in parallel chunks, whatever the strategy. Guarded: a file truncated
 * underneath gives PAGEIN_E_TRUNCATED, not SIGBUS. A model opened LAZY over
 * remote files (headers only) has nothing to page in: PAGEIN_E_UNSUPPORTED
 * naming the tensor (read it with pagein_tensor_copy); the same for
 * pagein_layer_wait and pagein_tensor_wait below. */
PAGEIN_API int pagein_model_load_tensors(pagein_model *m, const pagein_tensor *const *t, size_t n);
/* Same for the layers first..last inclusive (-1 and L as above). */
PAGEIN_API int pagein_model_load_layers(pagein_model *m, int32_t first, int32_t last);

/*
 * Thread safety of the cursor calls below (pagein_layer_wait,
 * pagein_layer_done, pagein_tensor_wait): they may be called from any
 * thread, also concurrently, and block only the calling thread (the
 * Python binding calls them with the GIL released). There is one cursor
 * per model: with several consumers it follows the most recent call, so a
 * layer another thread still uses may be released under a budget; one
 * consuming thread per model is the intended use. They must not race with
 * pagein_model_close on the same model. In a child process after fork()
 * the pager thread does not exist (docs/SAFETY.md says what happens).
 */
/* Prefetch cursor: returns when layer i is resident (starting it at once if
 * the pager is behind). Works with every strategy (a no-op wait when the
 * data is already in memory). */
PAGEIN_API int pagein_layer_wait(pagein_model *m, int32_t layer);
/* Marks layer i consumed: the pager moves on and, with a budget, releases
 * layers behind the cursor. Thread safety: see above. */
PAGEIN_API int pagein_layer_done(pagein_model *m, int32_t layer);
/* Finer than pagein_layer_wait: returns as soon as tensor t (from m) is
 * resident, while the rest of its layer may still be arriving, so a
 * consumer can compute on a layer's first tensors while its last ones are
 * read. Moves the cursor to t's layer like pagein_layer_wait. PREFETCH:
 * waits for the pager (which pages chunks in file order); LAZY: pages t in
 * now, in parallel; POPULATE, READ: returns at once. */
PAGEIN_API int pagein_tensor_wait(pagein_model *m, const pagein_tensor *t); /* thread safety: see above */

/*
 * PREFETCH over a source without a mapping (http(s)://, s3://, gs://,
 * hf://): the pager reads each layer's tensor ranges through the range
 * engine into anonymous memory, `prefetch_ahead` layers in front of the
 * cursor, and with budget_bytes gives a layer's memory back
 * (MADV_DONTNEED on the whole pages inside each of its tensors) at
 * pagein_layer_done. Anonymous memory that was never read, or was given
 * back, reads as ZEROS (a mapping would fault the file's bytes in), so for
 * such a model:
 *  - t->data (a pointer into that memory) is valid to read only after
 *    pagein_layer_wait / pagein_tensor_wait for t's layer returned 0,
 *    pagein_model_load_tensors covered t, or pagein_model_tensor_data gave
 *    it; and, with budget_bytes, only until pagein_layer_done for t's
 *    layer: a raw pointer kept past that reads zeros until the layer is
 *    waited for again (copy what you keep, or open without a budget);
 *  - pagein_model_tensor_data and pagein_tensor_copy (with the model's
 *    file, pagein_model_file(m, t->file)) read t first if it is not there,
 *    so they never return bytes that were not read; a failed read is their
 *    error, naming the URL. With budget_bytes, a pagein_layer_done for t's
 *    layer on another thread while they copy is the caller's race (the
 *    release can zero what they are copying): finish with a layer's
 *    tensors before marking it done.
 * A read failure in the pager surfaces from the wait for that layer
 * (naming the URL, offset and length); a later wait retries. After fork()
 * such a model cannot load layers in the child (PAGEIN_E_FORKED).
 */
/* Sets *data to t's bytes (t from m), readable: for a model whose memory
 * is filled by reads (above) t is read first unless its layer is resident
 * (waits while it is being read; does not move the cursor); for every
 * other model *data = t->data at once. Returns 0, PAGEIN_E_INVALID (NULL
 * argument, t not from m), PAGEIN_E_UNSUPPORTED for a model opened LAZY
 * over remote files (headers only: nothing to point at; use
 * pagein_tensor_copy), or the read's failure (*data NULL). Borrowed:
 * valid until pagein_model_close, and with a budget as described above.
 * Thread safety: as the cursor calls. */
PAGEIN_API int pagein_model_tensor_data(pagein_model *m, const pagein_tensor *t, const void **data);

/* Copies the box [start, start + count) of tensor t (t from m; start and
 * count: t->ndim values each, NULL for a 0-d tensor) into dst (len bytes,
 * at least the box's elements times the element size), row-major. An
 * assembled tensor (PAGEIN_TENSOR_ASSEMBLED) is read from the stored
 * pieces the box overlaps only, whether or not it is resident; any other
 * tensor from its bytes (made valid first as pagein_model_tensor_data
 * does). Returns 0, PAGEIN_E_RANGE (the box outside the tensor),
 * PAGEIN_E_INVALID (NULL, len too small, t not from m, a block-quantized
 * or byte-swapped dtype, a PAGEIN_TENSOR_BYTES item or a strided view not
 * assembled), PAGEIN_E_TRUNCATED (a file shrank), or the read's failure.
 * Thread-safe with the other access calls. */
PAGEIN_API int pagein_model_read_slice(pagein_model *m, const pagein_tensor *t, const uint64_t *start,
                                       const uint64_t *count, void *dst, size_t len);

/*
 * What AUTO would choose for m, whatever strategy m was opened with (open
 * it LAZY to ask without loading anything): the filesystem (statfs magic,
 * /proc/self/mountinfo type incl. FUSE subtypes), whether the disk rotates,
 * the model size and MemAvailable decide (docs/LOADING.md lists the rules).
 * Writes the reason into why (len bytes, may be NULL) and, when it would
 * choose PREFETCH for a model larger than memory, the budget it would use
 * into *budget (may be NULL; 0 otherwise). Does no I/O on the model's data.
 * Thread-safe for distinct models.
 */
PAGEIN_API pagein_strategy pagein_model_auto_plan(const pagein_model *m, uint64_t *budget, char *why, size_t len);


#ifdef PAGEIN_EXPERIMENTAL /* training data (see Stability above) */
/* ======================================================================== */
/* Training data (src/data/, docs/TRAINING-DATA.md)                         */
/* ======================================================================== */
/*
 * Sample readers for training data that never turn a shuffled order into
 * one remote request per page. A dataset (pagein_dataset) names where each
 * sample lives: (file, offset, length). A reader (pagein_reader) yields every
 * sample of the dataset exactly once per epoch in a seeded order, using one
 * of four access patterns:
 *
 *   GLOBAL  a seeded full permutation; each batch of sample ids is read by
 *           positioned reads (pread) with queue_depth of them in flight.
 *   RANGES  the same permutation; each batch's requests are sorted, merged
 *           when close (pagein_read_ranges) and read at queue_depth.
 *   BLOCK   large contiguous blocks in a seeded shuffled order, each read by
 *           big sequential reads in a background thread, samples drawn at
 *           random from a bounded buffer of a few blocks (WebDataset /
 *           MosaicML style). Memory bound: buffer_blocks x the largest block.
 *   MMAP    the baseline: samples handed out as pointers into a mapping, in
 *           the given order; the caller's first touch faults them in.
 *
 * pagein_read_ranges() is the general engine for arbitrary (file, offset,
 * length) requests (checkpoint consolidation, columnar pages).
 * pagein_shuffle_quality() scores any order against a full permutation.
 */

/* ---- datasets ---------------------------------------------------------- */

typedef struct pagein_dataset pagein_dataset;

/* Where one sample lives. */
typedef struct pagein_sample_loc {
    uint32_t file;   /* index of the file in the dataset (pagein_dataset_path) */
    uint64_t offset; /* byte offset in that file */
    uint64_t length; /* byte length (may be 0 for an empty Megatron sequence) */
} pagein_sample_loc;

/*
 * Opens a dataset of fixed-size records spread over npaths shard files, in
 * the given order: sample ids 0..n0-1 are the records of paths[0], then
 * those of paths[1], and so on. Every file must hold a whole number of
 * records (else PAGEIN_E_BAD_DATASET, naming the file); empty files are
 * allowed. record_bytes must be > 0 (else PAGEIN_E_INVALID). The files are
 * opened read-only and kept open until pagein_dataset_close; nothing is
 * read or mapped. Sets *d only on success. Errors: -errno (open, fstat),
 * PAGEIN_E_INVALID, PAGEIN_E_BAD_DATASET, PAGEIN_E_OVERFLOW.
 */
PAGEIN_API int pagein_dataset_open_records(pagein_dataset **d, const char *const *paths, size_t npaths,
                                           uint64_t record_bytes);

/*
 * Opens a Megatron-LM indexed dataset: PREFIX.idx (read whole and validated
 * as untrusted input with pagein_megatron_validate) and PREFIX.bin (kept
 * open, never read at open). Sample i is sequence i: lengths[i] elements of
 * the index's dtype at byte pointers[i] of the .bin file. Sets *d only on
 * success. Errors: -errno, PAGEIN_E_BAD_MAGIC, PAGEIN_E_BAD_VERSION,
 * PAGEIN_E_BAD_DTYPE, PAGEIN_E_TRUNCATED, PAGEIN_E_BAD_DATASET,
 * PAGEIN_E_RANGE (a sequence past the end of .bin), PAGEIN_E_OVERFLOW.
 */
PAGEIN_API int pagein_dataset_open_megatron(pagein_dataset **d, const char *prefix);

/* Facts from a Megatron .idx header. */
typedef struct pagein_megatron_info {
    uint8_t dtype_code;      /* Megatron DType: 1 u8, 2 i8, 3 i16, 4 i32, 5 i64, 6 f64, 7 f32, 8 u16 */
    uint32_t elem_bytes;     /* bytes per token of that dtype */
    uint64_t sequences;      /* sequence (sample) count */
    uint64_t documents;      /* entries of the document index (documents + 1) */
    uint64_t tokens;         /* sum of the sequence lengths */
    int multimodal;          /* 1 if the per-sequence mode bytes follow */
} pagein_megatron_info;

/*
 * Validates a Megatron .idx image (len bytes at idx; no I/O) against a .bin
 * of bin_size bytes, and fills *info (may be NULL). Checks: magic
 * "MMIDIDX\0\0", version 1, a known dtype code, that the file size equals
 * exactly what the counts imply (optionally plus one mode byte per sequence),
 * non-negative lengths, every sequence [pointer, pointer + length x
 * elem_bytes) inside the .bin, and a document index that starts at 0, never
 * decreases and ends at the sequence count. Returns 0, PAGEIN_E_TRUNCATED,
 * PAGEIN_E_BAD_MAGIC, PAGEIN_E_BAD_VERSION, PAGEIN_E_BAD_DTYPE,
 * PAGEIN_E_BAD_DATASET, PAGEIN_E_RANGE or PAGEIN_E_OVERFLOW, with the
 * offending entry in the detail. Thread-safe.
 */
PAGEIN_API int pagein_megatron_validate(const void *idx, size_t len, uint64_t bin_size,
                                        pagein_megatron_info *info);

/* Closes the files and frees. NULL ok. Readers of d must be closed first. */
PAGEIN_API void pagein_dataset_close(pagein_dataset *d);
/* Number of samples. */
PAGEIN_API uint64_t pagein_dataset_count(const pagein_dataset *d);
/* Location of sample id: 0, or PAGEIN_E_RANGE if id >= count. */
PAGEIN_API int pagein_dataset_locate(const pagein_dataset *d, uint64_t id, pagein_sample_loc *loc);
/* Files of the dataset: count, path (borrowed, valid until close), the open
 * read-only descriptor (owned by d: do not close it) and size in bytes.
 * Out-of-range i gives NULL / -1 / 0. */
PAGEIN_API size_t pagein_dataset_file_count(const pagein_dataset *d);
PAGEIN_API const char *pagein_dataset_path(const pagein_dataset *d, size_t i);
PAGEIN_API int pagein_dataset_fd(const pagein_dataset *d, size_t i);
PAGEIN_API uint64_t pagein_dataset_file_size(const pagein_dataset *d, size_t i);

/* ==== BEGIN dataset formats and the one pipeline (src/data/dsformat.h,
 * src/data/pipeline.c, docs/TRAINING-DATA.md) ==== */

/*
 * Opens a dataset in any format of the dataset-format table (records,
 * megatron, lines = JSONL/text incl. .gz/.zst, webdataset = .tar shards,
 * mds, and the columnar rows), local or remote (http(s)://, s3://, gs://,
 * hf://). spec: a file, a directory (an index file a row claims, such as
 * MDS's index.json, else every file whose name a row claims, in name
 * order), a local glob ("shards/STAR.tar", STAR = an asterisk), a brace pattern
 * ("shard-{000000..000099}.tar"), or several of those separated by
 * newlines. The format is detected per shard (content, then name) unless
 * opts->format names it. Footers and indexes are read once, here.
 * Errors: -errno, PAGEIN_E_NOT_FOUND (nothing matches, unknown column),
 * PAGEIN_E_FORMAT (malformed shard: the detail names the file, sample and
 * field), PAGEIN_E_UNSUPPORTED, PAGEIN_E_UNSAFE (MDS pickle columns), ...
 */
typedef struct pagein_dataset_opts {
    size_t size;                 /* sizeof(pagein_dataset_opts) */
    const char *format;          /* "records", "megatron", "lines", "webdataset", "mds", ...; NULL detect */
    uint64_t record_bytes;       /* records: bytes per record (implies format records) */
    const char *const *columns;  /* read only these fields (NULL: all) */
    size_t ncolumns;
    uint64_t group_bytes;        /* sample-addressable shards: bytes per group of
                                    consecutive samples (the unit of block reads); 0 = 4 MiB */
    const char *cache_dir;       /* where derived indexes may be cached; NULL none */
    uint32_t flags;
} pagein_dataset_opts;
#define PAGEIN_DATASET_OPTS_INIT { sizeof(pagein_dataset_opts), NULL, 0, NULL, 0, 0, NULL, 0 }

PAGEIN_API int pagein_dataset_open(pagein_dataset **d, const char *spec, const pagein_dataset_opts *opts);
/* The row name of shard i ("webdataset", ...); NULL if out of range. */
PAGEIN_API const char *pagein_dataset_format(const pagein_dataset *d, size_t i);
/* The dataset format of one file (a path or URL) as pagein_dataset_open
 * detects it, from the table's rows: their head/tail bytes first, then the
 * name (a Feather v2 file or an Arrow stream under any name, a Parquet
 * file by its PAR1 magic). Writes the row's name ("parquet", "arrow", ...)
 * into name (cap bytes, NUL-terminated) and returns 2 when the content
 * proves it, 1 when only the name suggests it, 0 when no row claims the
 * file, or < 0 (-errno, ...) when it cannot be opened. */
PAGEIN_API int pagein_dataset_detect(const char *uri, char *name, size_t cap);
/* The dataset format a name says before any byte is read, as
 * pagein_dataset_open resolves names: a row's companion files (Megatron:
 * PREFIX.idx, or PREFIX / PREFIX.bin beside a PREFIX.idx, looked for on
 * local names only), else the rows' name rules (".jsonl", ".tar", ...).
 * Writes the row's name into row (cap bytes, NUL-terminated; "" for
 * none) and returns 1 when a row claims the name, 0 when none does. */
PAGEIN_API int pagein_dataset_detect_name(const char *name, char *row, size_t cap);
/* The dataset-format table, for tools and bindings that list its rows
 * without hard-coding them: the number of rows, and row i's facts (lists
 * NULL-terminated, owned by the library, valid for ever). */
typedef struct pagein_dataset_format_info {
    const char *name;                /* "webdataset", ... (what pagein_dataset_format says) */
    const char *const *aliases;      /* other names pagein_dataset_opts.format takes ("tar", "wds") */
    const char *const *suffixes;     /* file names a directory scan picks up (".tar", ".tar.gz") */
    const char *const *index_names;  /* files describing a whole directory ("index.json") */
    int content;                     /* 1: detected by its bytes (magic, footer), not only by name */
    int companion;                   /* 1: named through companion files (Megatron .idx/.bin) */
} pagein_dataset_format_info;
PAGEIN_API size_t pagein_dataset_format_count(void);
/* 0, or PAGEIN_E_RANGE when i >= pagein_dataset_format_count(). */
PAGEIN_API int pagein_dataset_format_get(size_t i, pagein_dataset_format_info *info);
/* Groups (units of block reads) over all shards. */
PAGEIN_API uint64_t pagein_dataset_group_count(const pagein_dataset *d);
/* Describes a dataset opened by pagein_dataset_open (`pagein inspect` on a
 * shard or a folder of shards; nothing is read): formats, shards, samples,
 * groups (fewest/most samples and bytes), the fields of the first shard
 * with samples (name, type, shape with -1/null/'*' where it varies,
 * nullable) and whether every shard has the same, each shard's codec and
 * what open() reads to index each format. Text for people, or with
 * PAGEIN_DESCRIBE_JSON one JSON object and a newline:
 *   {"formats", "shards", "samples", "groups", "bytes", "addressable",
 *    "group_samples": {"min", "max"}, "group_bytes": {"min", "max", "total"},
 *    "schema_consistent", "schema": [{"name", "type", "shape", "nullable"}],
 *    "index": {FORMAT: what open reads}, "files": [{"path", "format",
 *    "bytes", "samples", "groups", "codec" (null: per column chunk)}]}
 * The first 64 shards are listed, then a {"...truncated": {"count",
 * "shown"}} object, unless PAGEIN_DESCRIBE_ALL. *out is malloc'd (free()).
 * Returns 0, PAGEIN_E_INVALID, PAGEIN_E_UNSUPPORTED (a dataset opened by
 * pagein_dataset_open_records/_megatron), -ENOMEM. */
#define PAGEIN_DESCRIBE_JSON 1u
#define PAGEIN_DESCRIBE_ALL 2u
PAGEIN_API int pagein_dataset_describe(const pagein_dataset *d, unsigned flags, char **out);

/* Field value types (pagein_field.type): the one set of element types of
 * every dataset format, from this header down (the formats' own code uses
 * these values). */
enum { PAGEIN_FIELD_NULL = 0, PAGEIN_FIELD_BOOL, PAGEIN_FIELD_INT, PAGEIN_FIELD_UINT, PAGEIN_FIELD_FLOAT,
       PAGEIN_FIELD_UTF8, PAGEIN_FIELD_BINARY,
       PAGEIN_FIELD_LIST,    /* nchild elements: fields[child .. child + nchild) */
       PAGEIN_FIELD_STRUCT,  /* nchild members, each named */
       PAGEIN_FIELD_MAP };   /* nchild entries, each a STRUCT of two members: key, value */

/* Logical annotations (pagein_field.logical) over the physical value:
 *  DECIMAL    INT (width 4 or 8) or BINARY (big-endian two's complement):
 *             the unscaled integer; value = unscaled x 10^-scale (precision digits)
 *  TIMESTAMP  INT width 8: units (unit) since 1970-01-01; utc 1 when
 *             adjusted to UTC (an instant), 0 a local wall-clock time
 *  DATE       INT width 4: days since 1970-01-01 (unit DAY), or width 8:
 *             milliseconds (unit MS; Arrow's Date64)
 *  TIME       INT width 4 or 8: units since midnight
 *  INT96      BINARY of 12 bytes: nanoseconds of the day (8, little-endian)
 *             then the Julian day (4): Impala/Spark timestamps
 *  DURATION   INT width 8: a span of units
 *  UUID, JSON, ENUM, BSON: the physical value (BINARY of 16, UTF8, UTF8, BINARY)
 *             with the annotation kept */
enum { PAGEIN_LOGICAL_NONE = 0, PAGEIN_LOGICAL_DECIMAL, PAGEIN_LOGICAL_TIMESTAMP, PAGEIN_LOGICAL_DATE,
       PAGEIN_LOGICAL_TIME, PAGEIN_LOGICAL_INT96, PAGEIN_LOGICAL_DURATION, PAGEIN_LOGICAL_UUID,
       PAGEIN_LOGICAL_JSON, PAGEIN_LOGICAL_ENUM, PAGEIN_LOGICAL_BSON };
/* Units (pagein_field.unit) of TIMESTAMP, DATE, TIME, DURATION. */
enum { PAGEIN_UNIT_NONE = 0, PAGEIN_UNIT_DAY, PAGEIN_UNIT_S, PAGEIN_UNIT_MS, PAGEIN_UNIT_US, PAGEIN_UNIT_NS };

/* One field of a sample: a scalar (ndim 0, width bytes), a string/blob
 * (UTF8/BINARY, nbytes), an array of width-byte elements with shape (a
 * list of numbers read without a copy), or a nested value (LIST, STRUCT,
 * MAP) whose children are the fields child .. child + nchild - 1 of the
 * same array (pagein_item.fields): the item's first nfields entries are
 * its top-level fields, their descendants follow. A child's name is its
 * member name (STRUCT), or the list's element name. null 1: no value at
 * this level (a null list is not an empty one: that is nchild 0).
 * Little-endian, possibly unaligned. Borrowed: valid until the next call
 * of pagein_pipe_next / set_epoch / close on the pipe that gave it. */
typedef struct pagein_field {
    const char *name;
    uint32_t col;          /* the top-level field (column) it belongs to */
    uint8_t type, width, ndim, null;
    uint64_t shape[8];
    const void *data;
    uint64_t nbytes;
    uint32_t child, nchild; /* LIST, STRUCT, MAP: the children (see above) */
    uint8_t logical;       /* PAGEIN_LOGICAL_* */
    uint8_t unit;          /* PAGEIN_UNIT_* */
    uint8_t utc;           /* TIMESTAMP: adjusted to UTC */
    uint8_t precision;     /* DECIMAL: digits */
    int32_t scale;         /* DECIMAL: digits after the point */
} pagein_field;

typedef struct pagein_item {
    uint64_t id;                /* sample id in the dataset */
    size_t nfields;             /* top-level fields: fields[0 .. nfields) */
    const pagein_field *fields; /* borrowed, as the fields' data */
    size_t nnodes;              /* all entries of fields (nested values' children included) */
} pagein_item;

typedef enum pagein_order {
    PAGEIN_ORDER_NONE = 0,   /* sample id order */
    PAGEIN_ORDER_BLOCK = 1,  /* groups in a seeded order, the samples of each window of
                                `window` consecutive groups shuffled together; reads
                                whole groups with large coalesced requests */
    PAGEIN_ORDER_GLOBAL = 2  /* a seeded permutation of all samples (pagein_permutation);
                                reads single samples where a sample is one byte range,
                                the pages holding it where the format offers parts
                                (Parquet with a page index), else its whole group */
} pagein_order;

typedef struct pagein_pipe_opts {
    size_t size;             /* sizeof(pagein_pipe_opts) */
    pagein_order order;
    uint64_t seed;           /* the order of epoch e depends only on (seed, e) and the groups */
    uint64_t epoch;
    uint32_t rank, world_size;     /* this rank of world_size (0, 0 = 0 of 1) */
    uint32_t worker, num_workers;  /* this DataLoader worker (0, 0 = 0 of 1) */
    uint32_t batch;          /* the loader's batch size: a rank's samples are dealt to
                                its workers in whole batches; 0 = 1 */
    uint32_t window;         /* block: groups shuffled together; 0 = 8 */
    uint32_t read_batch;     /* global: samples fetched at once; 0 = 256 where samples are
                                single byte ranges or over more than 256 groups, else
                                window x the mean samples of a group (each sample
                                brings its whole group) */
    unsigned queue_depth;    /* requests in flight; 0 = the source's preference */
    const char *state;       /* resume: a state from pagein_pipe_state (any world
                                size), or NULL to start epoch `epoch` at its beginning */
} pagein_pipe_opts;
#define PAGEIN_PIPE_OPTS_INIT { sizeof(pagein_pipe_opts), PAGEIN_ORDER_BLOCK, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL }

typedef struct pagein_pipe pagein_pipe;

typedef struct pagein_pipe_stats {
    uint64_t samples;      /* handed out */
    uint64_t units;        /* windows (block, none) or batches (global) read */
    uint64_t groups;       /* groups fetched and decoded */
    uint64_t requests;     /* requests issued by the range engine */
    uint64_t bytes_read;   /* bytes fetched */
    uint64_t memory_peak;  /* most bytes the two units' fetch buffers held at once (a
                              memory-policy block counted whole; what a row decodes into
                              memory of its own, e.g. Parquet columns, not counted) */
} pagein_pipe_stats;

/*
 * Opens this (rank, worker)'s pipe over d (which must outlive it): the
 * epoch's sequence of samples (a function of the seed, the epoch, the order
 * and d's groups, the same for every world size) minus what a resume state
 * says was consumed is split into world_size contiguous rank slices
 * (floor/ceil of the rest), each rank slice into its workers' parts by whole
 * batches dealt round-robin (worker w gets batches w, w + num_workers, ...
 * of the rank slice, as a DataLoader hands them out; its part is the
 * contiguous run of those samples). Every sample comes out exactly once over
 * all ranks and workers. A background thread fetches and decodes the next
 * unit (a window of groups, or a batch: read_batch samples, with the groups
 * they fall in where samples are not single byte ranges) while the current
 * one is consumed: memory is two units. Sets *p only on success.
 */
PAGEIN_API int pagein_pipe_open(pagein_pipe **p, pagein_dataset *d, const pagein_pipe_opts *opts);
/* 1 with the next sample, 0 at the end of this consumer's part of the epoch,
 * < 0 on error (the detail names the shard, group, sample and field). One
 * consumer per pipe. */
PAGEIN_API int pagein_pipe_next(pagein_pipe *p, pagein_item *it);
/* Samples this consumer yields in the current epoch (all of them). */
PAGEIN_API uint64_t pagein_pipe_length(const pagein_pipe *p);
/* Starts epoch `epoch` from its beginning (drops a resume state). */
PAGEIN_API int pagein_pipe_set_epoch(pagein_pipe *p, uint64_t epoch);
/* Counters so far; from the consumer's thread (samples is its count). */
PAGEIN_API void pagein_pipe_get_stats(const pagein_pipe *p, pagein_pipe_stats *st);
PAGEIN_API void pagein_pipe_close(pagein_pipe *p);
/*
 * The resume state after every rank's training loop consumed samples_seen
 * samples of its part (synchronous data parallelism; a rank with fewer
 * counts as done) of the epoch that opts describe (opts->state: the state it
 * started from): a short text naming the order, seed, epoch, sample and
 * group counts, window and the epoch positions not yet consumed. Loadable
 * onto any world size and worker count. Writes at most cap bytes (NUL
 * included) and returns the length it needs (without the NUL), or < 0.
 */
PAGEIN_API int pagein_pipe_state(pagein_dataset *d, const pagein_pipe_opts *opts, uint64_t samples_seen, char *buf,
                                 size_t cap);
/* What a state from pagein_pipe_state says, parsed and checked as
 * pagein_pipe_open parses it (not against a dataset: pagein_pipe_state
 * with opts->state does that): for bindings and tools, which keep no
 * parser of their own. PAGEIN_E_INVALID naming what is wrong. */
typedef struct pagein_pipe_state_info {
    pagein_order order;
    uint64_t seed, epoch;
    uint64_t samples;    /* the dataset's samples */
    uint64_t groups;     /* the dataset's groups */
    uint32_t window;
    uint64_t remaining;  /* epoch positions not yet consumed */
} pagein_pipe_state_info;
PAGEIN_API int pagein_pipe_state_parse(const char *state, pagein_pipe_state_info *info);
/* The whole epoch sequence (world size 1, no resume) into ids[0..n-1],
 * n = pagein_dataset_count(d). For tests and tools. */
PAGEIN_API int pagein_pipe_order(pagein_dataset *d, const pagein_pipe_opts *opts, uint64_t *ids, uint64_t n);
/* This (rank, worker)'s ids in the order pagein_pipe_next would yield them
 * (opts as for pagein_pipe_open, state included), without reading: *n is
 * their count; ids (room for cap) may be NULL with cap 0 to ask it. For
 * tests and tools. PAGEIN_E_LIMIT when cap is too small. */
PAGEIN_API int pagein_pipe_ids(pagein_dataset *d, const pagein_pipe_opts *opts, uint64_t *ids, uint64_t cap,
                               uint64_t *n);
/* The epoch sequence over n samples held in groups of group_samples
 * consecutive ids (the last one shorter): what pagein_pipe_order gives for a
 * dataset with such groups (opts: order, seed, epoch, window). The orders'
 * one implementation, for bindings and tools without a dataset. */
PAGEIN_API int pagein_order_groups(uint64_t n, uint64_t group_samples, const pagein_pipe_opts *opts, uint64_t *ids);
/* The partition: this (rank, worker)'s part of m remaining positions (opts:
 * rank, world_size, worker, num_workers, batch) is [*off, *off + *cnt). */
PAGEIN_API int pagein_pipe_part(uint64_t m, const pagein_pipe_opts *opts, uint64_t *off, uint64_t *cnt);
PAGEIN_API const char *pagein_order_name(pagein_order o);   /* "none", "block", "global" */
PAGEIN_API int pagein_order_from_name(const char *name);     /* -1 if unknown */

/* ==== END dataset formats and the one pipeline ==== */

/* ---- arbitrary ranges: sort, merge, read, slice back ------------------- */

/* One request: length bytes at offset of file fds[file], into dst. */
typedef struct pagein_range {
    uint32_t file;
    uint64_t offset;
    uint64_t length;
    void *dst; /* caller-owned, at least length bytes */
} pagein_range;

#define PAGEIN_RANGES_DEFAULT_MAX_GAP (64u << 10)   /* 64 KiB */
#define PAGEIN_RANGES_DEFAULT_MAX_BLOCK (8u << 20)  /* 8 MiB */
#define PAGEIN_RANGES_DEFAULT_QUEUE_DEPTH 32u

/* Flags of pagein_ranges_opts. */
#define PAGEIN_RANGES_NO_MERGE 0x1u /* one read per distinct request (still
                                       drops duplicates and contained ones) */
#define PAGEIN_RANGES_URING 0x2u    /* use io_uring (queue_depth entries, one
                                       thread) if the library was built with
                                       liburing and the kernel allows a ring;
                                       threads otherwise */

typedef struct pagein_ranges_opts {
    size_t size;         /* sizeof(pagein_ranges_opts) */
    uint64_t max_gap;    /* merge neighbours at most this far apart; 0 = 64 KiB.
                            Use PAGEIN_RANGES_NO_MERGE for no merging. */
    uint64_t max_block;  /* never merge into a read longer than this; 0 = 8 MiB.
                            A single request longer than this is one read. */
    unsigned queue_depth;/* reads in flight (threads or io_uring entries); 0 = 32 */
    uint32_t flags;      /* PAGEIN_RANGES_* */
} pagein_ranges_opts;

#define PAGEIN_RANGES_OPTS_INIT { sizeof(pagein_ranges_opts), 0, 0, 0, 0 }

/* Counters of a ranges call or of a reader. */
typedef struct pagein_ranges_stats {
    uint64_t requests;        /* requests in */
    uint64_t reads;           /* reads issued after merging (pread calls may
                                 be more when the kernel returns short reads) */
    uint64_t bytes_requested; /* sum of request lengths */
    uint64_t bytes_read;      /* sum of the merged reads' lengths */
    uint64_t bytes_wasted;    /* bytes read that no request needed (gaps) */
} pagein_ranges_stats;

/*
 * Reads n requests from the files fds[0..nfds-1] (fsspec's
 * merge_offset_ranges plan): sorts them by (file, offset), drops requests
 * contained in another (they are sliced from it), merges neighbours whose
 * gap is at most max_gap while the merged read stays within max_block,
 * issues the merged reads with queue_depth in flight, and copies each
 * request's bytes into its dst. Requests may overlap or repeat.
 *
 * Every request is checked before any I/O: a zero length gives
 * PAGEIN_E_INVALID, a file index >= nfds PAGEIN_E_INVALID, and a range past
 * the end of its file (fstat) PAGEIN_E_RANGE; the detail names the request
 * index, its file, offset and length. Other errors: -errno from pread, -ENOMEM,
 * PAGEIN_E_TRUNCATED if a file shrank during the call. On error the contents
 * of the dst buffers are unspecified. st (may be NULL) receives the counts.
 * Thread-safe (each call uses its own threads, created and joined inside).
 */
PAGEIN_API int pagein_read_ranges(const int *fds, size_t nfds, const pagein_range *reqs, size_t n,
                                  const pagein_ranges_opts *opts, pagein_ranges_stats *st);

/* 1 if PAGEIN_RANGES_URING really uses io_uring here (built with liburing
 * and the kernel grants a ring), else 0. Thread-safe. */
PAGEIN_API int pagein_ranges_uring_available(void);

/* ---- sample readers ----------------------------------------------------
 * The first training-data API, kept for its callers and run on the one
 * pipeline (pagein_pipe_*; docs/TRAINING-DATA.md "Readers"): its orders are
 * the pipe's, its sample the first field of the pipe's item. New code: use
 * pagein_pipe_open. */

typedef struct pagein_reader pagein_reader;

typedef enum pagein_reader_kind {
    PAGEIN_READER_GLOBAL = 0, /* the pipe's global order: full permutation, each unit of
                                 `batch` samples read at queue depth N */
    PAGEIN_READER_BLOCK = 1,  /* the pipe's block order over the dataset's groups */
    PAGEIN_READER_RANGES = 2, /* the same as GLOBAL (kept for its callers) */
    PAGEIN_READER_MMAP = 3    /* pointers into a mapping (baseline) */
} pagein_reader_kind;

/* Flags of pagein_reader_opts. */
#define PAGEIN_READER_IN_ORDER 0x1u /* no shuffle: ids in ascending order
                                       (block: blocks in order, samples in order) */

typedef struct pagein_reader_opts {
    size_t size;              /* sizeof(pagein_reader_opts) */
    pagein_reader_kind kind;
    uint64_t seed;            /* the order of epoch e depends only on (seed, e) */
    uint32_t flags;           /* PAGEIN_READER_* */
    unsigned queue_depth;     /* global/ranges: reads in flight; 0 = 32 */
    unsigned batch;           /* global/ranges: samples read per batch; 0 = 256 */
    uint64_t block_bytes;     /* no longer read: the dataset's groups are the blocks */
    unsigned buffer_blocks;   /* block: the pipe's window is buffer_blocks - 1
                                 groups (min 1); 0 = 8 */
    uint64_t max_gap;         /* no longer read (the range engine coalesces) */
    uint64_t max_block;       /* no longer read */
    unsigned block_threads;   /* no longer read */
} pagein_reader_opts;

#define PAGEIN_READER_OPTS_INIT { sizeof(pagein_reader_opts), PAGEIN_READER_GLOBAL, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/* One sample handed out by pagein_reader_next. */
typedef struct pagein_sample {
    uint64_t id;      /* sample id in the dataset */
    const void *data; /* length bytes; borrowed: valid until the next call of
                         pagein_reader_next/start_epoch/close on this reader.
                         For MMAP it points into a shared read-only mapping:
                         not guarded, so touching it after the file was
                         truncated underneath raises SIGBUS, as with any
                         mapping; the other kinds copy into reader memory. */
    uint64_t length;
} pagein_sample;

/* Counters of a reader since it was opened. */
typedef struct pagein_reader_stats {
    uint64_t samples;          /* samples handed out */
    uint64_t epochs_started;
    pagein_ranges_stats io;    /* explicit reads (all zero for MMAP) */
    uint64_t memory_bound;     /* bytes the pipe may hold: two units (mmap: 0) */
    uint64_t memory_peak;      /* the pipe's memory_peak (its fetch buffers) */
    uint64_t blocks;           /* the dataset's groups */
} pagein_reader_stats;

/*
 * Opens a reader over d (which must outlive it) and starts epoch 0: a pipe
 * (pagein_pipe_open, whose loader thread is joined by pagein_reader_close),
 * or for MMAP a read-only mapping of every file. Sets *r only on success.
 * Errors: PAGEIN_E_INVALID (bad kind, empty dataset), the pipe's errors,
 * -ENOMEM, -errno (mmap).
 */
PAGEIN_API int pagein_reader_open(pagein_reader **r, pagein_dataset *d, const pagein_reader_opts *opts);

/*
 * Hands out the next sample of the current epoch into *s. Returns 1 with a
 * sample, 0 at the end of the epoch (every sample handed out exactly once),
 * or a negative error (-errno from a read, PAGEIN_E_TRUNCATED if a file
 * shrank); after an error, start a new epoch or close. Not thread-safe: one
 * consumer per reader.
 */
PAGEIN_API int pagein_reader_next(pagein_reader *r, pagein_sample *s);

/*
 * Abandons the current epoch and starts epoch number `epoch` (a fresh
 * order derived from (seed, epoch); for BLOCK the blocks are reshuffled and
 * the buffer refilled). Returns 0 or a negative error.
 */
PAGEIN_API int pagein_reader_start_epoch(pagein_reader *r, uint64_t epoch);

/* Counters since open. */
PAGEIN_API void pagein_reader_get_stats(const pagein_reader *r, pagein_reader_stats *st);

/* Stops and joins the loader thread, unmaps, frees. NULL ok. */
PAGEIN_API void pagein_reader_close(pagein_reader *r);

/* "global", "block", "ranges", "mmap"; "unknown" for any other value.
 * Static. Thread-safe. */
PAGEIN_API const char *pagein_reader_kind_name(pagein_reader_kind k);
/* Parses a kind name; PAGEIN_E_NOT_FOUND (negative) if unknown or NULL. */
PAGEIN_API int pagein_reader_kind_from_name(const char *name);

/* ---- orders and shuffle quality ---------------------------------------- */

/* Fills ids[0..n-1] with a seeded uniformly random permutation of 0..n-1
 * (Fisher-Yates driven by splitmix64; the same (n, seed) always gives the
 * same order, on every platform). The GLOBAL and RANGES readers use exactly
 * this order for epoch e with seed pagein_epoch_seed(seed, e). */
PAGEIN_API void pagein_permutation(uint64_t *ids, uint64_t n, uint64_t seed);
/* The seed of epoch e derived from a reader seed. */
PAGEIN_API uint64_t pagein_epoch_seed(uint64_t seed, uint64_t epoch);

/*
 * Shannon entropy, in bits, of the distribution of the gaps between
 * consecutive ids (ids[i+1] - ids[i], signed), the measure MosaicML
 * streaming uses, into *bits: 0 for a sequential order; about log2(n) for
 * a uniformly random permutation. Returns 0, PAGEIN_E_INVALID for n < 2
 * (no gap) or NULL arguments, or -ENOMEM. Thread-safe.
 */
PAGEIN_API int pagein_order_entropy(const uint64_t *ids, size_t n, double *bits);

/*
 * Shuffle quality of an order into *q: pagein_order_entropy(ids, n) divided
 * by the entropy of a seeded full permutation of the same length (the
 * reference, which scores 1.0). Sequential reading scores 0; values are in
 * about [0, 1.05] (a given order can beat the reference by chance).
 * Returns 0, PAGEIN_E_INVALID for n < 3 or NULL arguments, or -ENOMEM.
 * Thread-safe.
 */
PAGEIN_API int pagein_shuffle_quality(const uint64_t *ids, size_t n, double *q);

/* ---- Parquet: a file's footer, described (docs/FORMAT-PARQUET.md) ------- */
/*
 * Reads the footer of the Parquet file at uri (a path or a URL of any
 * source: the last 64 KiB in one read, one more read when the footer is
 * larger) and writes a description to *out, NUL-terminated, allocated with
 * malloc (the caller frees it with free()): text for people, or with
 * PAGEIN_PARQUET_JSON one JSON object and a newline:
 *   {"file", "size", "version", "num_rows", "footer_bytes", "created_by",
 *    "columns": [{"path", "field", "type", "type_length" (FIXED only),
 *                 "repetition", "kind": "scalar"|"list", "max_def",
 *                 "max_rep", "logical" (annotation or null),
 *                 "unsupported" (why pagein cannot decode it, or null)}],
 *    "row_groups": [{"num_rows", "total_byte_size", "chunks": [{"column",
 *                    "codec", "encodings": [...], "num_values", "offset",
 *                    "compressed", "uncompressed", "dictionary",
 *                    "offset_index": [off, len], "column_index": [off, len]
 *                    (both only when present)}]}],
 *    "key_value": {key: value}}
 * Returns 0; PAGEIN_E_BAD_MAGIC (no PAR1 at the end), PAGEIN_E_FORMAT
 * (malformed footer), PAGEIN_E_UNSUPPORTED
 * (encrypted), PAGEIN_E_LIMIT, the source's errors, -ENOMEM; *out is set
 * only on success. Thread-safe.
 */
#define PAGEIN_PARQUET_JSON 1u
PAGEIN_API int pagein_parquet_describe(const char *uri, unsigned flags, char **out);

#endif /* PAGEIN_EXPERIMENTAL: training data */

/* ------------------------------------------------------------------------ */
/* Page cache: residency, warm, evict, lock (docs/PAGE-CACHE.md)            */
/* ------------------------------------------------------------------------ */

/*
 * How much of a byte range is in the page cache. Residency is sampled with
 * mincore() on a mapping of the file, so it is a snapshot: pages can arrive
 * or be reclaimed at any moment afterwards.
 *
 * bytes / resident_bytes count BYTES OF THE RANGE, not whole pages: a page
 * that is resident contributes only the bytes of it that lie inside the
 * range. A page shared by two tensors therefore counts once in total: each
 * tensor gets the part of the page it covers, and per-tensor, per-layer and
 * per-file sums add up exactly. pages / resident_pages count every page the
 * range touches (a shared page is counted by each range that touches it);
 * that is what vmtouch reports.
 */
typedef struct pagein_residency {
    uint64_t bytes;          /* bytes in the range (clipped to the file) */
    uint64_t resident_bytes; /* of those, bytes on resident pages */
    uint64_t pages;          /* pages the range touches */
    uint64_t resident_pages; /* of those, resident */
} pagein_residency;

/* Adds b into a (all four fields). */
PAGEIN_API void pagein_residency_add(pagein_residency *a, const pagein_residency *b);

/* Page size used by the functions below (sysconf(_SC_PAGESIZE)). */
PAGEIN_API size_t pagein_page_size(void);

/*
 * Residency of len bytes of memory at addr, which must lie inside one
 * mapping (a file mapping for page-cache residency; anonymous memory
 * reports whether it is populated). addr need not be page aligned.
 * Fills *r. Returns 0, or -ENOMEM when part of the range is not mapped.
 * Thread-safe.
 */
PAGEIN_API int pagein_range_residency(const void *addr, uint64_t len, pagein_residency *r);

/*
 * mlock()s / munlock()s len bytes at addr (rounded out to whole pages).
 * mlock faults every page in and keeps it resident until unlocked or
 * unmapped. Returns 0; PAGEIN_E_MEMLOCK when RLIMIT_MEMLOCK (plus what the
 * process has locked already) is too low, the detail giving the request,
 * the soft and hard limits and how to raise them (`ulimit -l`, limits.conf
 * `memlock`, systemd `LimitMEMLOCK=`, docker `--ulimit memlock=-1`, or
 * CAP_IPC_LOCK); -EAGAIN when some pages could not be locked; -ENOMEM when
 * the range is not mapped. Locks do not nest: one munlock undoes any number
 * of mlocks of a page. Thread-safe.
 */
PAGEIN_API int pagein_range_lock(const void *addr, uint64_t len);
PAGEIN_API int pagein_range_unlock(const void *addr, uint64_t len);

/*
 * Byte ranges of an open pagein_file (its MAP_SHARED mapping; see
 * pagein_file_get_info). off/len are clipped to the file; len 0 means "to
 * the end of the file". Files opened with pagein_open_memory have no file
 * descriptor: residency works on their buffer, evict returns
 * PAGEIN_E_UNSUPPORTED.
 *
 * pagein_file_residency: fills *r (see pagein_residency).
 * pagein_file_evict: drops the range from the page cache: first
 *   madvise(MADV_DONTNEED) on this file's own mapping (so pages it mapped
 *   no longer pin them; the data refaults on the next access), then
 *   posix_fadvise(POSIX_FADV_DONTNEED). The range is rounded OUT to whole
 *   pages, so a page shared with a neighbouring tensor goes too; when the
 *   kernel caches the file in large folios and one straddles an edge of
 *   the range, that edge is widened to 2 MiB so the folio can go. Pages
 *   that other processes (or other mappings in this one) have mapped,
 *   dirty pages, locked pages and reads still in flight (readahead started
 *   just before; retried once after 2 ms) stay: evict is advice, check
 *   with residency.
 * pagein_file_lock / _unlock: pagein_range_lock on the range of the mapping.
 * Return 0 or a negative code as above. Thread-safe for distinct ranges.
 */
PAGEIN_API int pagein_file_residency(const pagein_file *f, uint64_t off, uint64_t len, pagein_residency *r);
PAGEIN_API int pagein_file_evict(const pagein_file *f, uint64_t off, uint64_t len);
PAGEIN_API int pagein_file_lock(const pagein_file *f, uint64_t off, uint64_t len);
PAGEIN_API int pagein_file_unlock(const pagein_file *f, uint64_t off, uint64_t len);

/*
 * Any file, whatever its content (the page-cache tools' fallback for paths
 * that are not models, like vmtouch): opened read-only and mapped
 * MAP_SHARED whole, nothing parsed. Sets *c only on success; returns 0 or
 * -errno (detail names the path). Empty files are fine (every range is
 * empty). pagein_cache_close unmaps (which also drops its locks); NULL ok.
 */
typedef struct pagein_cache_file pagein_cache_file;
PAGEIN_API int pagein_cache_open(pagein_cache_file **c, const char *path);
PAGEIN_API void pagein_cache_close(pagein_cache_file *c);
/* ---- many plain files at once ---- */
/*
 * pagein_cache_open of paths[0, n) with up to 32 opens in flight
 * (PAGEIN_OPEN_DEPTH=N overrides, 1..256): on network and FUSE
 * filesystems each open is a round trip, so a folder of many files opens
 * in about one. Sets out[i] (NULL on failure) and rcs[i] (0 or -errno) for
 * every i, and returns how many failed. A failure's detail is not kept
 * (each open ran on its own thread): open that path alone with
 * pagein_cache_open to learn why. Close each out[i] with
 * pagein_cache_close.
 */
PAGEIN_API size_t pagein_cache_open_many(pagein_cache_file **out, const char *const *paths, size_t n, int *rcs);
/*
 * pagein_cache_warm(cs[i], off, len, threads) for every i, as one run of
 * the range engine: the requests of all the files share one queue with
 * `threads` in flight (0 = chosen from the storage), so many small files on
 * a network or FUSE filesystem are read in about files / depth round
 * trips, not one each. Returns 0 or the first failure (the detail names
 * the file); the others may have been warmed or not.
 */
PAGEIN_API int pagein_cache_warm_many(const pagein_cache_file *const *cs, size_t n, uint64_t off, uint64_t len,
                                      unsigned threads);
/* ---- end ---- */
/* Size of the file at open. */
PAGEIN_API uint64_t pagein_cache_size(const pagein_cache_file *c);
/* Same contracts as the pagein_file_* functions above. */
PAGEIN_API int pagein_cache_residency(const pagein_cache_file *c, uint64_t off, uint64_t len, pagein_residency *r);
PAGEIN_API int pagein_cache_evict(const pagein_cache_file *c, uint64_t off, uint64_t len);
PAGEIN_API int pagein_cache_lock(const pagein_cache_file *c, uint64_t off, uint64_t len);
PAGEIN_API int pagein_cache_unlock(const pagein_cache_file *c, uint64_t off, uint64_t len);
/*
 * Reads the range into the page cache with `threads` parallel buffered
 * pread()s of 4 MiB chunks (0 = default thread count), maps nothing and
 * copies into a small per-thread buffer. Safe when the file shrinks
 * underneath (the missing part is simply not read). Returns 0 or -errno.
 */
PAGEIN_API int pagein_cache_warm(const pagein_cache_file *c, uint64_t off, uint64_t len, unsigned threads);

/*
 * Models (pagein_model_open). Every function works on the tensors' bytes
 * in their files' page cache, whatever the strategy (for `read`, that is
 * the page cache behind the private copy, not the copy).
 *
 * pagein_model_tensor_residency: residency of one tensor's bytes.
 * pagein_model_layer_residency: sum over the tensors of one layer (-1 =
 *   leading globals, 0..L-1, L = trailing globals as in
 *   pagein_model_layer_tensors).
 * pagein_model_residency: sum over every tensor (tensor data only: headers
 *   are not counted). 
 * pagein_model_evict_tensors / _layers: pagein_file_evict of each tensor's
 *   range, adjacent tensors merged into one range first (t NULL: all).
 * pagein_model_lock_tensors / _layers: mlock each tensor's range (merged as
 *   above); stays locked until unlocked or the model is closed. On failure
 *   what was locked by this call is unlocked again.
 * pagein_model_unlock_tensors / _layers: munlock.
 * Return 0 or a negative code; errors as for the pagein_file_* functions.
 */
PAGEIN_API int pagein_model_tensor_residency(const pagein_model *m, const pagein_tensor *t, pagein_residency *r);
/* Experimental. A model whose tensors are built from pieces in several
 * files (a torch Distributed Checkpoint: PAGEIN_TENSOR_ASSEMBLED) has
 * tensors whose bytes lie in files other than t->file:
 * pagein_model_tensor_file_residency: residency of the part of t stored in
 *   file `file` (index as for pagein_model_file; zeros when none is).
 * pagein_model_file_tensors: how many tensors have bytes stored in file
 *   `file` (a tensor in pieces counts once in each file holding one), and
 *   in *bytes (may be NULL) those bytes: what a file "holds" in plan and
 *   resident. */
PAGEIN_API int pagein_model_tensor_file_residency(const pagein_model *m, const pagein_tensor *t, size_t file,
                                                  pagein_residency *r);
PAGEIN_API size_t pagein_model_file_tensors(const pagein_model *m, size_t file, uint64_t *bytes);
PAGEIN_API int pagein_model_layer_residency(const pagein_model *m, int32_t layer, pagein_residency *r);
PAGEIN_API int pagein_model_residency(const pagein_model *m, pagein_residency *r);
PAGEIN_API int pagein_model_evict_tensors(const pagein_model *m, const pagein_tensor *const *t, size_t n);
PAGEIN_API int pagein_model_evict_layers(const pagein_model *m, int32_t first, int32_t last);
PAGEIN_API int pagein_model_lock_tensors(const pagein_model *m, const pagein_tensor *const *t, size_t n);
PAGEIN_API int pagein_model_lock_layers(const pagein_model *m, int32_t first, int32_t last);
PAGEIN_API int pagein_model_unlock_tensors(const pagein_model *m, const pagein_tensor *const *t, size_t n);
PAGEIN_API int pagein_model_unlock_layers(const pagein_model *m, int32_t first, int32_t last);

/* ------------------------------------------------------------------------ */
/* Safety: files that change under readers, integrity, atomic install       */
/* ------------------------------------------------------------------------ */

/*
 * What is protected (docs/SAFETY.md has the full list). Every read the
 * library itself performs through a mapping - populating, prefetching,
 * hashing, the copy-out below - is guarded: if the file shrinks underneath,
 * the call returns PAGEIN_E_TRUNCATED naming the file and the offset instead
 * of the process dying of SIGBUS. Reads through pagein_tensor.data and other
 * borrowed pointers are the caller's and are NOT guarded; use
 * pagein_tensor_copy() or check the file with pagein_file_check() when the
 * file may change.
 *
 * Process-wide state: on first use of a guarded read the library installs
 * one SIGBUS handler (sigaction, SA_SIGINFO|SA_NODEFER). A SIGBUS
 * that does not come from a guarded read is passed to the handler that was
 * installed before (called, or the default action / ignore it requested), so
 * a program's own SIGBUS handling keeps working if it was installed before
 * pagein's first guarded read. A handler installed later replaces pagein's
 * and must chain to it for the guard to keep working.
 */

/*
 * The one tensor-copy function: copies bytes [off, off+len) of tensor t's
 * row-major, native-byte-order representation into dst, for any format
 * and any source. Contiguous tensors are copied from the mapping under the
 * truncation guard (or read through the source when the file is not
 * mapped, e.g. a remote object); PyTorch tensors flagged NONCONTIGUOUS are
 * gathered through their strides and SWAPPED ones are byte-swapped (then
 * the logical size is nelements * element size); SWAPPED block-quantized
 * GGUF tensors are copied as stored (ggml defines no big-endian block
 * layout to swap into). off and len need not be
 * multiples of the element size, so this serves as a pagein_fill_fn for
 * pagein_safetensors_write(). f is the file t belongs to
 * (pagein_model_file(m, t->file) for models); it may be NULL for
 * contiguous tensors (then the message cannot name the file).
 * Returns 0, PAGEIN_E_RANGE if [off, off+len) is not inside the tensor,
 * PAGEIN_E_INVALID for NULL arguments or a tensor without data,
 * PAGEIN_E_BAD_DTYPE (strided sub-byte type), or PAGEIN_E_TRUNCATED if the
 * file shrank under the mapping (the detail names the file and the file
 * offset of the first missing byte; dst then holds a partial copy).
 * Thread-safe (read-only on f); never raises SIGBUS.
 */
PAGEIN_API int pagein_tensor_copy(const pagein_file *f, const pagein_tensor *t, uint64_t off,
                                  void *dst, size_t len);

/*
 * Checks whether the file behind f changed since it was opened: returns 0 if
 * not, PAGEIN_E_TRUNCATED if it is now shorter than the mapping (reads past
 * the new end would raise SIGBUS), PAGEIN_E_CHANGED if its path now names
 * another file (replaced, e.g. by an atomic rename) or no file at all. Files
 * from pagein_open_memory always return 0. Costs two stat calls; thread-safe.
 * A file rewritten in place without changing size is not detected (use
 * pagein_manifest_verify for content).
 */
PAGEIN_API int pagein_file_check(const pagein_file *f);

/*
 * Checks every file of m like pagein_file_check(): returns 0,
 * PAGEIN_E_TRUNCATED (a file shrank: reads past its new end would fault;
 * guarded reads return errors) or PAGEIN_E_CHANGED (a path now names another
 * file, e.g. after an atomic replacement); the detail names the file.
 * Thread-safe; cheap (two stat calls per file).
 */
PAGEIN_API int pagein_model_check(const pagein_model *m);

/*
 * Hot reload. A pagein_live holds the current version of a model that may be
 * replaced on disk (atomically, e.g. with pagein_install). Readers borrow
 * the current version with pagein_live_acquire and give it back with
 * pagein_live_release; pagein_live_reload opens the new version and makes it
 * current while borrowers of the old one keep using it: each version is
 * reference counted and closed when its last borrower releases it. So a
 * reader sees one complete version from acquire to release, never a mix.
 *
 *     pagein_live *l;
 *     pagein_live_open(&l, "model.safetensors", NULL);
 *     // reader threads, per request:
 *     pagein_model *m = pagein_live_acquire(l);
 *     ... use m, its tensors and data pointers ...
 *     pagein_live_release(l, m);
 *     // a watcher thread, now and then or on inotify:
 *     if (pagein_live_reload(l, 0) == 1) puts("new version");
 *     pagein_live_close(l);
 */
typedef struct pagein_live pagein_live;

/* Opens path (anything pagein_model_open accepts) as version 1. opts (may
 * be NULL) is copied and used for every version; its pointer fields must
 * stay valid until close. Sets *l only on success. */
PAGEIN_API int pagein_live_open(pagein_live **l, const char *path, const pagein_model_opts *opts);

/* Borrows the current version: the returned model and every pointer obtained
 * from it stay valid until the matching pagein_live_release, whatever
 * reloads happen meanwhile. Never NULL before close. Thread-safe (a mutex
 * held for a few instructions). Each acquire needs exactly one release. */
PAGEIN_API pagein_model *pagein_live_acquire(pagein_live *l);

/* Gives back a model obtained from pagein_live_acquire on l. When it was
 * the last borrow of a replaced version, that version is closed here, on
 * the releasing thread. Thread-safe. */
PAGEIN_API void pagein_live_release(pagein_live *l, pagein_model *m);

/*
 * If force is non-zero, or pagein_model_check() says a file of the current
 * version was replaced or truncated, opens the path again and makes the new
 * model current. Returns 1 if a new version became current, 0 if nothing
 * changed, or the open error (the current version stays current). One
 * reload runs at a time (concurrent calls wait); readers are never blocked
 * by the open.
 */
PAGEIN_API int pagein_live_reload(pagein_live *l, int force);

/* Number of the current version: 1 after open, +1 per successful reload. */
PAGEIN_API uint64_t pagein_live_version(pagein_live *l);

/* Closes l. Versions still borrowed stay open until released; l itself is
 * freed with the last of them (release remains valid after close; acquire
 * and reload are not). NULL ok. */
PAGEIN_API void pagein_live_close(pagein_live *l);

/* Install flags. */
#define PAGEIN_INSTALL_VALIDATE 0x1u /* open the copy with pagein_open (full header
                                        validation) before it replaces DEST */
#define PAGEIN_INSTALL_NO_SYNC 0x2u  /* skip the fsyncs: for scratch filesystems (tmpfs) where
                                        durability across a crash is not wanted (`install --no-sync`) */

typedef struct pagein_install_opts {
    size_t size;             /* sizeof(pagein_install_opts) */
    uint32_t flags;          /* PAGEIN_INSTALL_* */
    uint64_t max_rate;       /* copy at most this many bytes per second; 0 = unlimited */
} pagein_install_opts;

#define PAGEIN_INSTALL_OPTS_INIT { sizeof(pagein_install_opts), 0, 0 }

/*
 * Copies the file src into place at dest atomically: the bytes go to a new
 * file in dest's directory (an unnamed O_TMPFILE where the filesystem allows,
 * else a hidden ".NAME.tmp-XXXXXXXX"), which is fsynced, renamed over dest,
 * and the directory fsynced. A file already at dest is never opened for
 * writing or truncated, so processes that have it mapped keep reading the
 * old, complete version (and see the new one when they reopen; see
 * pagein_file_check). Killed at any moment, the call leaves either the old
 * dest or the new one, never a mixture; at worst a hidden temporary file
 * remains if killed between linking and renaming it.
 * If dest is an existing directory, installs to dest/basename(src). The new
 * file gets dest's old permission bits, or src's when dest is new.
 * Returns 0, -errno, PAGEIN_E_INVALID (src and dest are the same file, or
 * src is not a regular file), PAGEIN_E_TRUNCATED (src shrank during the
 * copy) or, with PAGEIN_INSTALL_VALIDATE, the error pagein_open gave for the
 * copy; on failure dest is untouched and the temporary file removed.
 */
PAGEIN_API int pagein_install(const char *src, const char *dest, const pagein_install_opts *opts);

/*
 * Integrity manifests. `pagein_manifest_write` hashes every tensor of a
 * model (XXH3-128 of its bytes) and the header bytes of every file, in
 * parallel, reading through the mappings under the truncation guard, and
 * writes a text manifest (docs/FORMAT-MANIFEST.md), atomically (temporary
 * file + rename). `pagein_manifest_verify` hashes again and compares: data,
 * not only headers. Hashing needs libxxhash at build time; without it these
 * two return PAGEIN_E_UNSUPPORTED (pagein_hash_available() says which).
 * The default sidecar path used by the CLI is MODEL + ".pagein-manifest".
 */

/* Called by verify once per mismatch, from the calling thread, in manifest
 * order. file: the model file's name; tensor: the tensor name (tensor_len
 * bytes, NULL for a file-level mismatch); what: a static sentence. */
typedef void (*pagein_mismatch_fn)(void *ctx, const char *file, const char *tensor, size_t tensor_len,
                                   const char *what);

typedef struct pagein_hash_opts {
    size_t size;                    /* sizeof(pagein_hash_opts) */
    unsigned threads;               /* hashing threads; 0 = default */
    pagein_mismatch_fn on_mismatch; /* verify: report each mismatch (may be NULL) */
    void *ctx;                      /* passed to on_mismatch */
} pagein_hash_opts;

#define PAGEIN_HASH_OPTS_INIT { sizeof(pagein_hash_opts), 0, NULL, NULL }

typedef struct pagein_hash_stats {
    uint64_t bytes;     /* bytes hashed */
    double seconds;     /* wall time spent hashing */
    size_t files;
    size_t tensors;
    size_t mismatches;  /* verify: tensors or files that differ */
} pagein_hash_stats;

/* 1 if this build can hash (libxxhash was present), 0 otherwise. */
PAGEIN_API int pagein_hash_available(void);

/*
 * Hashes the model at model_path (what pagein_open accepts) and writes the
 * manifest to manifest_path. stats (may be NULL) receives what was done.
 * Returns 0, an open error, PAGEIN_E_TRUNCATED (a file shrank while being
 * hashed), -errno writing the manifest, or PAGEIN_E_UNSUPPORTED.
 */
PAGEIN_API int pagein_manifest_write(const char *model_path, const char *manifest_path,
                                     const pagein_hash_opts *opts, pagein_hash_stats *stats);

/*
 * Checks the model at model_path against the manifest: same files (name,
 * size, header bytes), same tensors (name, offset, size) and the same hash of
 * every tensor's bytes. Returns 0 if everything matches,
 * PAGEIN_E_HASH_MISMATCH if anything differs (stats->mismatches counts them,
 * opts->on_mismatch reports each, the detail names the first), a manifest
 * parse error (PAGEIN_E_BAD_MANIFEST & co), an open error, or
 * PAGEIN_E_TRUNCATED / PAGEIN_E_UNSUPPORTED.
 */
PAGEIN_API int pagein_manifest_verify(const char *model_path, const char *manifest_path,
                                      const pagein_hash_opts *opts, pagein_hash_stats *stats);

/*
 * Parses a manifest held in memory (untrusted input; no I/O). Returns 0 and
 * the number of tensor records in *n_tensors (may be NULL), or the parse
 * error (docs/MALFORMED.md lists them). Available with or without
 * libxxhash. Thread-safe.
 */
PAGEIN_API int pagein_manifest_validate(const void *buf, size_t len, size_t *n_tensors);

/* ------------------------------------------------------------------------ */
/* PyTorch checkpoints (torch.save zip format)                              */
/* ------------------------------------------------------------------------ */

/*
 * pagein_open() reads `torch.save` checkpoints (.pt/.pth/.bin, the zip
 * format of torch >= 1.6) without Python: the pickle is run by a restricted
 * unpickler that accepts exactly what torch.load(weights_only=True) of
 * torch 1.13 accepts (docs/FORMAT-TORCH.md) and refuses any other global
 * with PAGEIN_E_UNSAFE, naming it; nothing is ever executed. Each tensor
 * becomes a pagein_tensor whose offset points at its first element inside
 * its storage record. Nested dicts and lists become dotted names
 * ("model.layers.0.weight", "optimizer.state.0.exp_avg"); a tensor saved
 * on its own is named "tensor". Values that are not tensors (ints, floats,
 * bools, strings) become metadata entries under their dotted name with
 * their own type (I64, F64, BOOL, STRING); anything else without a tensor
 * inside (None, tuples, torch dtypes) becomes a STRING holding its Python
 * repr. Tensors are listed in file order (ascending offset).
 *
 * Flags on torch tensors:
 *  - PAGEIN_TENSOR_VIEW: the storage is shared with another tensor (tied
 *    weights, views, slices). n_sharing below says by how many.
 *  - PAGEIN_TENSOR_NONCONTIGUOUS: the strides are not row-major (a
 *    transpose, a strided slice, an expand). Then offset/nbytes give the
 *    span of storage bytes the tensor touches, NOT nelements*size bytes of
 *    row-major data: read it with pagein_tensor_copy().
 *  - PAGEIN_TENSOR_SWAPPED: the archive's byteorder record says "big".
 *  - PAGEIN_TENSOR_UNALIGNED: the data is not aligned to its element size
 *    in the file (torch aligns records to 64 bytes; crafted files may not).
 */

/* Storage identity and layout of one tensor of a PyTorch checkpoint.
 * Pointers are borrowed from the file and valid until it is closed. */
typedef struct pagein_torch_tensor_info {
    uint32_t storage;        /* storage identity: equal for tensors sharing bytes */
    const char *storage_key; /* the record key ("<archive>/data/KEY"), NUL-terminated */
    uint64_t storage_offset; /* absolute file offset of the storage record's data */
    uint64_t storage_nbytes; /* bytes of the storage (numel * element size) */
    uint64_t elem_offset;    /* torch's storage_offset(), in elements */
    const int64_t *strides;  /* ndim strides in elements (NULL when ndim is 0) */
    uint32_t n_sharing;      /* tensors of this file using the same storage (>= 1) */
    int requires_grad;       /* as saved */
    int is_parameter;        /* saved as torch.nn.Parameter */
} pagein_torch_tensor_info;

/*
 * Fills *out for tensor t of f (t must come from f). Returns 0, or
 * PAGEIN_E_BAD_TYPE when f is not a PyTorch checkpoint, or PAGEIN_E_INVALID
 * for NULL arguments. Thread-safe (read-only).
 */
PAGEIN_API int pagein_torch_tensor_get_info(const pagein_file *f, const pagein_tensor *t,
                                            pagein_torch_tensor_info *out);

/* Number of distinct storage records the tensors of f use (0 for other
 * formats). Fewer than the tensor count means some tensors share storage. */
PAGEIN_API size_t pagein_torch_storage_count(const pagein_file *f);

/* ------------------------------------------------------------------------ */
/* Dequantizing                                                             */
/* ------------------------------------------------------------------------ */

/*
 * Converts a tensor's data to PAGEIN_DTYPE_F32, PAGEIN_DTYPE_F16 or
 * PAGEIN_DTYPE_BF16, with exactly the values of ggml's reference
 * dequantization (dequantize_row_*): the same float operations in the same
 * order; F16 scales are converted exactly (subnormals, inf and NaN
 * included); F16/BF16 output rounds the float result to nearest even.
 *
 * Types: the ggml block types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
 * Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS, and the plain types F32, F16,
 * BF16, F64 (rounded to float first), BOOL, U8, I8, U16, I16, U32, I32,
 * U64, I64 (converted as C converts integers to float). Same type in and
 * out copies the bytes unchanged.
 *
 *   t        the tensor record (its dtype, flags and name are used).
 *   src      the tensor's stored bytes, as t->data holds them (file byte
 *            order): the whole tensor (src_len == t->nbytes), or a chunk
 *            that starts at a block boundary and is a whole number of
 *            blocks (elements for plain types), so that large tensors can
 *            be converted piece by piece.
 *   out      PAGEIN_DTYPE_F32, _F16 or _BF16.
 *   dst      receives src_len / block_bytes * block_elems elements of out,
 *            row-major; dst_len must be at least that many bytes.
 *
 * Byte-swapped tensors (PAGEIN_TENSOR_SWAPPED, from big-endian GGUF files)
 * of plain types are swapped; quantized blocks in a big-endian file are
 * refused (ggml defines no big-endian block layout): PAGEIN_E_UNSUPPORTED.
 * Strided tensors (PAGEIN_TENSOR_NONCONTIGUOUS) are refused too
 * (PAGEIN_E_UNSUPPORTED): their stored bytes are not row-major.
 * Returns 0, or PAGEIN_E_INVALID (NULL argument, out not F32/F16/BF16),
 * PAGEIN_E_BAD_DTYPE (a type not listed above, e.g. IQ2_XXS),
 * PAGEIN_E_MISALIGNED_SLICE (src_len not whole blocks), PAGEIN_E_RANGE
 * (src_len > t->nbytes, or dst too small), PAGEIN_E_UNSUPPORTED. The
 * detail names the tensor. No allocation; thread-safe.
 */
PAGEIN_API int pagein_tensor_dequantize(const pagein_tensor *t, const void *src, size_t src_len, pagein_dtype out,
                                        void *dst, size_t dst_len);

/* ------------------------------------------------------------------------ */
/* Converting to safetensors                                                */
/* ------------------------------------------------------------------------ */

/* Progress of a conversion: bytes of tensor data written so far, of total. */
typedef void (*pagein_progress_fn)(void *ctx, uint64_t done, uint64_t total);

typedef struct pagein_convert_opts {
    size_t size;               /* sizeof(pagein_convert_opts) */
    pagein_dtype dtype;        /* INVALID = keep every type; F32, F16 or BF16:
                                  cast F64/F32/F16/BF16 tensors to it (round
                                  to nearest even); other types are kept */
    uint64_t max_shard_bytes;  /* 0 = one file; else shards of at most this
                                  many tensor bytes (a larger tensor gets a
                                  shard of its own) and an index */
    uint64_t align;            /* data alignment of each output file: 0 = 8
                                  (official); 4096 for O_DIRECT / GPU direct */
    pagein_progress_fn progress; /* may be NULL; called on the calling thread */
    void *progress_ctx;
    /* Fields below were added later (size tells which a caller knows). */
    pagein_dtype dequantize;   /* INVALID = block-quantized GGUF tensors are
                                  refused for safetensors (kept for GGUF);
                                  F32, F16 or BF16: they are dequantized to
                                  it (pagein_tensor_dequantize's values) */
    uint64_t max_output_bytes; /* refuse, before writing anything, when the
                                  output (tensor bytes plus a bound on the
                                  headers) exceeds this: 0 = the free space
                                  of the target's filesystem (statvfs);
                                  UINT64_MAX = no check at all */
    /* Called for every metadata entry of f that is not written to the output,
     * with a short reason (may be NULL). key is key_len bytes. */
    void (*on_skip)(void *ctx, const char *key, size_t key_len, const char *why);
    void *skip_ctx;
} pagein_convert_opts;

#define PAGEIN_CONVERT_OPTS_INIT                                                                    \
    { sizeof(pagein_convert_opts), PAGEIN_DTYPE_INVALID, 0, 0, NULL, NULL, PAGEIN_DTYPE_INVALID, 0, NULL, NULL }

/* What a conversion did. */
typedef struct pagein_convert_stats {
    size_t tensors;       /* tensors written */
    size_t shared;        /* of which shared storage in the input (written in full) */
    size_t materialised;  /* of which were strided and gathered */
    size_t cast;          /* of which were cast to opts.dtype */
    uint32_t shards;      /* files written (1 = no index) */
    uint64_t bytes;       /* tensor bytes written */
    size_t dequantized;   /* of which were dequantized (opts.dequantize) */
    uint64_t output_bound;/* bytes checked against the free space / cap */
} pagein_convert_stats;

/*
 * Writes every tensor of f (any format: a PyTorch checkpoint, a GGUF file,
 * a safetensors file) to safetensors at out, each name with its own bytes
 * in row-major native order: tensors sharing storage are written in full,
 * strided ones gathered, byte-swapped ones swapped, quantized GGUF ones
 * dequantized when opts->dequantize is set. __metadata__ is
 * {"format": "pt"} for PyTorch input (the checkpoint's non-tensor values are
 * skipped), the input's own string metadata for safetensors input, and
 * every key of GGUF input as a string (non-strings JSON-encoded, arrays as
 * JSON arrays); entries that cannot be carried (not UTF-8, NUL bytes) are
 * reported to opts->on_skip.
 * With opts->max_shard_bytes the output is split into
 * "<stem>-00001-of-0000N.safetensors" next to out plus "<out>.index.json"
 * ({"metadata": {"total_size": N}, "weight_map": {...}}, like Hugging Face's
 * writer; out = ".../model.safetensors" gives the usual names). Tensors go
 * to shards in state-dict order (a checkpoint's pickle order, file order
 * otherwise), a numbered layer starting a new shard when it fits in one but
 * not in the rest of the current one. The set is all or nothing: written
 * into a temporary directory next to out, moved into place index last, old
 * files restored if a move fails; afterwards stale shards of an earlier set
 * with the same stem, and a single file at out, are removed. A single file
 * is written atomically (temporary file, fsync, rename). Before writing,
 * the output size is checked against opts->max_output_bytes or the free
 * space of out's filesystem. Source pages are dropped from the caller's
 * resident set as they are consumed.
 * Returns 0 and fills *stats (may be NULL), or PAGEIN_E_BAD_DTYPE (a type
 * safetensors cannot hold, e.g. a quantized GGUF type without
 * opts->dequantize), PAGEIN_E_UNSUPPORTED (quantized data of a big-endian
 * file), PAGEIN_E_LIMIT (over max_output_bytes), -ENOSPC (does not fit the
 * free space; nothing written), PAGEIN_E_INVALID, the writer's errors or
 * -errno. Not thread-safe with respect to f's mapping advice; f itself is
 * only read.
 */
PAGEIN_API int pagein_convert_safetensors(const pagein_file *f, const char *out, const pagein_convert_opts *opts,
                                          pagein_convert_stats *stats);

/*
 * Writes every tensor of f to a GGUF v3 file at out (atomically, with the
 * GGUF writer): same names, shapes and bytes (strided tensors gathered,
 * byte-swapped ones swapped, opts->dtype casts as above), opts->align as
 * the GGUF alignment (0 = 32), opts->dequantize for quantized tensors.
 * Metadata carried over: every key of GGUF input with its type and value
 * (arrays and nested arrays included; general.alignment is replaced when
 * opts->align is set), safetensors __metadata__ strings, PyTorch non-tensor
 * ints/floats/bools/strings; anything else is reported to opts->on_skip.
 * BOOL and C64 tensors, tensors with more than 4 dimensions and names of 64
 * bytes or more are refused (GGUF cannot hold them): PAGEIN_E_BAD_DTYPE,
 * PAGEIN_E_LIMIT. max_shard_bytes is refused (PAGEIN_E_UNSUPPORTED). The
 * output size is checked as for pagein_convert_safetensors.
 */
PAGEIN_API int pagein_convert_gguf(const pagein_file *f, const char *out, const pagein_convert_opts *opts,
                                   pagein_convert_stats *stats);

#ifdef PAGEIN_EXPERIMENTAL /* pull (see Stability above) */
/*
 * Remote pull (src/ops/pull.c, docs/REMOTE.md). Needs libcurl at build
 * time (pagein_remote_available() says whether it was there; without it
 * pagein_pull returns PAGEIN_E_UNSUPPORTED).
 *
 * pagein_pull copies src (http://, https://, s3://BUCKET/KEY, gs://,
 * hf://ORG/NAME[@REV][/PATH]) to local storage at the link's limit: each
 * file in chunks over `connections` parallel range requests; resumable
 * (killed at any point, a second call with the same object fetches only
 * the chunks that were not complete, at most one per connection again);
 * verified (sha256 when the server states it, e.g. the Hub's LFS oid in
 * X-Linked-Etag; the MD5 ETag of a single-part S3/GCS object; else size
 * and ETag); installed atomically (temporary name, fsync, rename: the final
 * path holds the complete file or nothing).
 *
 * Which files: one object; every object under a prefix its source lists
 * (an s3:// or gs:// prefix ending in '/'; an hf://ORG/NAME[@REV]
 * repository, or a folder of it ending in '/'); for a folder its source
 * cannot list (http(s)://HOST/DIR/), the model in it by the usual names; a
 * `*.index.json` brings the shards it names.
 * Where: opts->stage_dir (relative paths kept), else dest (a file for a
 * single file unless it is a directory or ends in '/'; a directory
 * otherwise), else for hf:// the Hugging Face cache (opts->cache_dir, else
 * HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub; layout
 * models--ORG--NAME/{blobs,snapshots,refs}), else the current directory.
 * Returns 0 and fills *stats (may be NULL), or PAGEIN_E_REMOTE (HTTP or
 * network failure, detail names the URL and request), PAGEIN_E_CHANGED (the
 * object changed during the download), PAGEIN_E_HASH_MISMATCH,
 * PAGEIN_E_TRUNCATED, PAGEIN_E_INVALID, -errno. Blocking; opts->progress is
 * called from worker threads, one call at a time.
 */
#define PAGEIN_PULL_NO_SYNC 0x1u /* skip the fsyncs (tests, tmpfs) */

typedef void (*pagein_pull_progress_fn)(void *ctx, const char *file, uint64_t done, uint64_t total);

typedef struct pagein_pull_opts {
    size_t size;             /* sizeof(pagein_pull_opts) */
    unsigned connections;    /* parallel requests per file; 0 = PAGEIN_HTTP_CONNECTIONS or 16 */
    uint64_t chunk_bytes;    /* bytes per request; 0 = 8 MiB (smaller for small files, >= 1 MiB) */
    const char *stage_dir;   /* stage into this directory (training shards); NULL = see above */
    const char *cache_dir;   /* Hugging Face cache root for hf://; NULL = the environment's */
    uint32_t flags;          /* PAGEIN_PULL_* */
    pagein_pull_progress_fn progress; /* may be NULL */
    void *ctx;
    /* ---- read only when size covers it -------------------------- */
    /* NULL, or told (with ctx and the file's URL) what a user should know and
     * the pull still does, one line without a newline: a server that ignores
     * Range is read as one plain stream, not resumable. */
    void (*note)(void *ctx, const char *file, const char *message);
} pagein_pull_opts;

#define PAGEIN_PULL_OPTS_INIT { sizeof(pagein_pull_opts), 0, 0, NULL, NULL, 0, NULL, NULL, NULL }

typedef struct pagein_pull_stats {
    size_t files;
    uint64_t bytes;          /* total size of the files */
    uint64_t fetched;        /* bytes downloaded by this call */
    uint64_t resumed;        /* bytes kept from an interrupted earlier call */
    uint64_t cached;         /* bytes already in the cache (same blob) */
    uint64_t requests, retries;
    double seconds;
    char verified[48];       /* how the files were verified: "sha256", "md5", "size+etag", "manifest"
                                (a pagein manifest next to the source), "sha256+manifest",
                                "md5+manifest"; files verified differently: the distinct methods,
                                comma-separated, in the order first seen ("size+etag,manifest") */
    char path[4096];         /* the installed file, or the directory / snapshot holding the files */
} pagein_pull_stats;

PAGEIN_API int pagein_pull(const char *src, const char *dest, const pagein_pull_opts *opts, pagein_pull_stats *stats);
#endif /* PAGEIN_EXPERIMENTAL: pull */

#ifdef PAGEIN_EXPERIMENTAL /* atomic files (see Stability above) */
/*
 * Writes len bytes of buf to path the way the writers and pagein_install
 * do (src/io/atomic.c): a temporary file next to path (mode 0666 & ~umask),
 * fsynced, renamed over path, directory fsynced; on failure path is
 * untouched and nothing is left. 0, or -errno with a detail naming path.
 */
PAGEIN_API int pagein_write_atomic(const char *path, const void *buf, size_t len);
#endif /* PAGEIN_EXPERIMENTAL: atomic files */

#ifdef PAGEIN_EXPERIMENTAL /* torch Distributed Checkpoints (see Stability above) */
/*
 * A torch Distributed Checkpoint (DCP) directory: `.metadata` (a pickle,
 * read by the restricted unpickler's DCP allowlist, nothing run) and the
 * `__RANK_N.distcp` files. Items are tensors, assembled from their chunks
 * in any dimension, or non-tensor items (their stored bytes: a torch.save
 * blob). dir may be a local directory or a source URL prefix (files are
 * then read blob by blob). docs/FORMAT-DCP.md lists the checks and
 * refusals; errors name the .metadata path and the key.
 */
typedef struct pagein_dcp pagein_dcp;

typedef struct pagein_dcp_item_info {
    const char *name;      /* the state-dict key (borrowed from d) */
    int is_bytes;          /* a non-tensor item */
    pagein_dtype dtype;    /* U8 for non-tensor items */
    uint32_t ndim;
    const uint64_t *shape; /* ndim, outermost first (borrowed) */
    uint64_t nbytes;       /* row-major tensor bytes, or the item's stored bytes */
    uint32_t nchunks;      /* chunks the tensor is stored in */
} pagein_dcp_item_info;

typedef struct pagein_dcp_convert_stats {
    uint64_t tensors;       /* written */
    uint64_t tensor_bytes;
    uint64_t skipped_items; /* non-tensor items (safetensors holds tensors only) */
    uint32_t shards;        /* files written (1 = no index) */
    uint64_t spans;         /* chunk blobs in the plan */
    uint64_t bytes_read;    /* bytes the range engine read */
    uint64_t requests;      /* the engine's requests */
} pagein_dcp_convert_stats;

/* 1 if path is a local directory holding a `.metadata` file, or a source
 * URL without a file suffix under which `.metadata` exists (one request). */
PAGEIN_API int pagein_is_dcp_dir(const char *path);
PAGEIN_API int pagein_dcp_open(pagein_dcp **out, const char *dir);
PAGEIN_API void pagein_dcp_close(pagein_dcp *d);
PAGEIN_API size_t pagein_dcp_item_count(const pagein_dcp *d);
PAGEIN_API int pagein_dcp_item(const pagein_dcp *d, size_t i, pagein_dcp_item_info *info);
/* Chunks of item i (*n), and chunk j's place: ndim, offsets and sizes in
 * the tensor (borrowed from d). */
PAGEIN_API int pagein_dcp_chunk_count(const pagein_dcp *d, size_t i, uint32_t *n);
PAGEIN_API int pagein_dcp_chunk(const pagein_dcp *d, size_t i, uint32_t j, uint32_t *ndim, const uint64_t **offsets,
                                const uint64_t **sizes);
/* Index of the item named name, or PAGEIN_E_NOT_FOUND. */
PAGEIN_API int pagein_dcp_find(const pagein_dcp *d, const char *name);
/* The whole item into dst (len >= its nbytes): a tensor row-major, a
 * non-tensor item as its bytes. */
PAGEIN_API int pagein_dcp_read(pagein_dcp *d, size_t i, void *dst, size_t len);
/* A tensor stored in one row-major chunk of a local (mapped) file: *data
 * points at its bytes inside the blob, valid until pagein_dcp_close (no
 * copy). PAGEIN_E_UNSUPPORTED when it is stored in several chunks, as a
 * strided view, or remotely (read it with pagein_dcp_read). */
PAGEIN_API int pagein_dcp_view(pagein_dcp *d, size_t i, const void **data);
/* The box [start, start + count) of tensor i, row-major, into dst; reads
 * only the chunks the box overlaps. */
PAGEIN_API int pagein_dcp_read_slice(pagein_dcp *d, size_t i, const uint64_t *start, const uint64_t *count,
                                     void *dst, size_t len);
/* Consolidates the checkpoint into one safetensors file at out, written
 * atomically (pagein_safetensors_write); one tensor is held in memory at a
 * time. Non-tensor items are skipped (counted in stats, which may be NULL). */
PAGEIN_API int pagein_dcp_convert_safetensors(const char *dir, const char *out, pagein_dcp_convert_stats *stats);
/* The same with options: opts->max_shard_bytes writes Hugging Face shards
 * ("model-00001-of-00003.safetensors") plus out's ".index.json", all or
 * nothing, as pagein_convert_safetensors does; align and max_output_bytes
 * as there; dtype and dequantize are refused (PAGEIN_E_UNSUPPORTED). Every
 * chunk blob of every tensor goes through one run of the range engine
 * (coalesced, many requests in flight, double-buffered against the copies),
 * for local directories and source URLs alike; each blob's header is
 * parsed once. Memory: the tensor being written, one blob, the engine's
 * ring. */
PAGEIN_API int pagein_dcp_convert(const char *dir, const char *out, const pagein_convert_opts *opts,
                                  pagein_dcp_convert_stats *stats);
/* One request of a batch read: the box [start, start + count) of tensor
 * item `item` (start/count: its ndim values; both NULL: the whole tensor),
 * row-major into dst (len >= the box's bytes), or a non-tensor item's
 * stored bytes (start/count ignored). */
typedef struct pagein_dcp_request {
    size_t item;
    const uint64_t *start, *count;
    void *dst;
    size_t len;
} pagein_dcp_request;

typedef struct pagein_dcp_read_stats {
    uint64_t runs;         /* range-engine runs (1, or 0 when nothing was to read) */
    uint64_t spans;        /* byte ranges planned (one per request and chunk it overlaps) */
    uint64_t requests;     /* the engine's requests (after coalescing) */
    uint64_t bytes_read;   /* bytes the engine read */
    uint64_t bytes_needed; /* bytes of the requests' boxes */
} pagein_dcp_read_stats;

/* Reads every request in ONE run of the range engine (a torch DCP load
 * plan: coalesced, many in flight), local or remote alike. A chunk whose
 * blob header is known (cached from an earlier read, or parsed from a
 * local file's mapping) is read as the box's bytes only (one span per run
 * of rows contiguous in blob and destination); else its whole blob is
 * read, once however many requests need it, and its header parsed (and
 * cached). All or nothing: the first error stops the run. stats may be
 * NULL. */
PAGEIN_API int pagein_dcp_read_many(pagein_dcp *d, const pagein_dcp_request *reqs, size_t n,
                                    pagein_dcp_read_stats *stats);
/* pagein_dcp_read_many into strided destinations: dst_strides[k] (NULL, or
 * NULL entries: the box row-major) gives request k's destination strides
 * in elements, one per dimension (a view of a larger tensor: a column
 * slice of a row-major [R, C] tensor has strides {C, 1}); its len must
 * reach the box's last element. Tensor requests only. */
PAGEIN_API int pagein_dcp_read_many_strided(pagein_dcp *d, const pagein_dcp_request *reqs, size_t n,
                                            const uint64_t *const *dst_strides, pagein_dcp_read_stats *stats);
#endif /* PAGEIN_EXPERIMENTAL: torch Distributed Checkpoints */
#ifdef PAGEIN_EXPERIMENTAL /* torch's safetensors flavour of DCP (see Stability above) */
/*
 * torch 2.7+'s safetensors flavour of a Distributed Checkpoint: a
 * directory, local or a source URL (or its "sharded/" subdirectory), of
 * safetensors files, one per rank, whose "__metadata__" holds
 * DCP_SHARDING_INFO (JSON: each chunk's "saved_offsets" in the whole
 * tensor; Hugging Face transformers' chunk layout also names the tensor,
 * "fqn", and its shape, "shape"). Whole tensors are the union of
 * their chunks (shape: max(offset + size)); chunks are checked not to
 * overlap, to cover the tensor and to agree on dtype and ndim; errors name
 * the tensor and the file. Tensors are listed in name order.
 */
typedef struct pagein_dcp_hf pagein_dcp_hf;
typedef struct pagein_dcp_hf_info {
    const char *name;      /* borrowed from h */
    pagein_dtype dtype;
    uint32_t ndim;
    const uint64_t *shape; /* the whole tensor's (borrowed) */
    uint64_t nbytes;
    uint32_t nchunks;
} pagein_dcp_hf_info;
/* 1 if path is a directory (local, or a source URL whose last part has no
 * suffix: listed, or torch's shard names probed where the source cannot
 * list) whose (or whose "sharded/" subdirectory's) first *.safetensors
 * file carries DCP_SHARDING_INFO. */
PAGEIN_API int pagein_is_dcp_hf_dir(const char *path);
PAGEIN_API int pagein_dcp_hf_open(pagein_dcp_hf **out, const char *dir);
PAGEIN_API void pagein_dcp_hf_close(pagein_dcp_hf *h);
/* The directory the files were found in. */
PAGEIN_API const char *pagein_dcp_hf_dir(const pagein_dcp_hf *h);
PAGEIN_API size_t pagein_dcp_hf_count(const pagein_dcp_hf *h);
PAGEIN_API int pagein_dcp_hf_tensor(const pagein_dcp_hf *h, size_t i, pagein_dcp_hf_info *info);
/* Whole tensor i, row-major, into dst (len >= its nbytes). */
PAGEIN_API int pagein_dcp_hf_read(pagein_dcp_hf *h, size_t i, void *dst, size_t len);
/* Consolidates into one safetensors file, or with opts->max_shard_bytes
 * Hugging Face shards plus out's ".index.json" (as pagein_dcp_convert):
 * every chunk read once in one range-engine run, one tensor assembled in
 * memory at a time. stats->bytes_read and ->requests are the engine's. */
PAGEIN_API int pagein_dcp_hf_convert(const char *dir, const char *out, const pagein_convert_opts *opts,
                                     pagein_dcp_convert_stats *stats);
#endif /* PAGEIN_EXPERIMENTAL: torch's safetensors flavour of DCP */
/* 1 if this build has the remote sources (libcurl), else 0. */
PAGEIN_API int pagein_remote_available(void);
/* 1 if path is a URL one of this build's remote sources takes (the
 * source table's answer: http://, https://, s3://, gs://, hf:// with
 * libcurl), else 0: such a path names no local file, so callers skip their
 * stat() checks for it. */
PAGEIN_API int pagein_is_url(const char *path);
/* --- secrets in output --- */
/* text (a URL, or any text holding URLs) with the URLs' secrets replaced,
 * written into out (cap bytes, always NUL-terminated when cap > 0,
 * truncated to fit; out may be text itself): each URL's userinfo
 * ("user:pass@" -> "***@") and the values of its query parameters that
 * carry credentials or signatures (X-Amz-Signature, X-Amz-Credential,
 * X-Amz-Security-Token, Signature, sig, token, ... -> "REDACTED"). Text
 * without "scheme://" comes back unchanged. Returns out. Every error
 * detail the library sets is already redacted; callers use this for the
 * URLs they print themselves. Thread-safe. */
PAGEIN_API char *pagein_url_redact(const char *text, char *out, size_t cap);
/* --- end --- */

#ifdef PAGEIN_EXPERIMENTAL /* byte sources, storage facts and the range engine's counters, GPU staging,
                              distributed plans (see Stability above) */
/* ---- byte sources by path or URL (pagein.fsspec; docs/PYTHON.md) ------- */
/* A source is one local file or remote object (http(s)://, s3://, gs://,
 * hf://ORG/NAME[@REV]/PATH) opened for range reads, without parsing any
 * format: the layer pagein.fsspec puts under fsspec. */
typedef struct pagein_source pagein_source;
/* Opens uri (a path or URL) as a byte source: a local regular file (FIFOs
 * and sockets are refused before any open), or a remote object (one GET of
 * its first bytes gives its size and ETag). Sets *s only on success;
 * errors name the path or URL (-ENOENT for a missing local file,
 * PAGEIN_E_NOT_FOUND for a 404). */
PAGEIN_API int pagein_source_open(pagein_source **s, const char *uri);
PAGEIN_API void pagein_source_close(pagein_source *s); /* NULL ok */
/* Size in bytes; identity ("dev:ino:size:mtime_ns" for local files, the
 * ETag or sha256 for remote ones; borrowed); 1 if a local file. */
PAGEIN_API uint64_t pagein_source_size(const pagein_source *s);
PAGEIN_API const char *pagein_source_identity(const pagein_source *s);
PAGEIN_API int pagein_source_is_local(const pagein_source *s);
/* pagein_read_ranges over sources (reqs[i].file indexes srcs): the same
 * plan (sorted, contained requests dropped, neighbours within max_gap
 * merged up to max_block), every block of every source read in one run of
 * the range engine with queue_depth requests in flight (remote sources:
 * that many connections), each request sliced back into its dst. Errors
 * as pagein_read_ranges, a failed remote read naming the URL, offset and
 * status. Thread-safe for distinct calls (sources may be shared). */
PAGEIN_API int pagein_source_read_ranges(pagein_source *const *srcs, size_t nsrcs, const pagein_range *reqs,
                                         size_t n, const pagein_ranges_opts *opts, pagein_ranges_stats *st);
/* Lists the objects under a remote prefix, through the source that reads
 * uri (its row's list operation; every remote source that has one, a
 * test-only null:// included). Those built in: s3://BUCKET/PREFIX and
 * gs://BUCKET/PREFIX (every key starting with PREFIX, all pages of
 * ListObjectsV2; folder markers, keys ending in '/', left out) and
 * hf://ORG/NAME[@REV][/PATH] (every file of the repository under PATH,
 * each as hf://ORG/NAME[@REV]/PATH..., the revision only when uri names
 * one). fn(arg, uri) is called with each object's full URI (borrowed for
 * the call); a non-zero return stops the listing and is returned.
 * PAGEIN_E_UNSUPPORTED for a source without a list operation (HTTP), for
 * a local path, and in builds without libcurl. */
typedef int (*pagein_list_fn)(void *arg, const char *uri);
PAGEIN_API int pagein_source_list(const char *uri, pagein_list_fn fn, void *arg);
/* One object of a detailed listing (pagein_source_list_entries); strings
 * borrowed for the call. */
typedef struct pagein_list_entry {
    const char *uri;      /* the object's URI, named as pagein_source_list names it */
    const char *rel;      /* its name relative to the listed prefix ("sub/a.bin") */
    uint64_t size;        /* bytes as listed; PAGEIN_SIZE_UNKNOWN when the listing does not say */
    const char *identity; /* ETag (quotes included), version or content id (the Hub: LFS sha256 or git
                             blob id) as listed; "" when the listing does not say */
    int64_t mtime;        /* last modified, seconds since the epoch, as listed; 0 unknown */
} pagein_list_entry;
#define PAGEIN_SIZE_UNKNOWN UINT64_MAX
#define PAGEIN_LIST_DIRECT 1u /* only the prefix's direct children (rel without a '/') */
typedef int (*pagein_list_entry_fn)(void *arg, const pagein_list_entry *e);
/* pagein_source_list with what the listing states of each object (one
 * listing, no request per object: S3/GCS's ListObjectsV2 gives size and
 * ETag, the Hub's listing size and LFS sha256). flags: 0 or
 * PAGEIN_LIST_DIRECT. Errors as pagein_source_list. */
PAGEIN_API int pagein_source_list_entries(const char *uri, unsigned flags, pagein_list_entry_fn fn, void *arg);
/* ---- end of byte sources by path or URL -------------------------------- */

/* ------------------------------------------------------------------------ */
/* Storage facts and the range engine                                       */
/* ------------------------------------------------------------------------ */

/* ---- storage facts and the range engine (docs/LOADING.md, "range engine") */

/* What pagein knows and measured about where a model's first file lives,
 * and what the range engine would choose for it. */
typedef struct pagein_io_facts {
    char storage[24];        /* "local", "memory", "netfs", "fuse", "remote", "unknown" */
    char fs_type[64];        /* mountinfo type ("ext4", "fuse.slowfs") or URL scheme */
    uint32_t read_ahead_kb;  /* the mount's readahead window, 0 unknown */
    int rotational;          /* 1, 0, -1 unknown */
    int measured;            /* the probe below ran */
    double lat1_us;          /* one 128 KiB request at depth 1 */
    double depth_speedup;    /* throughput at depth probe_depth / at depth 1 */
    unsigned probe_depth;
    uint64_t request_bytes;  /* what the engine would use for READ */
    unsigned depth;
    char engine_why[160];    /* how request_bytes and depth were chosen */
} pagein_io_facts;

/* Fills *f for m (probing the first file once per model if nothing was
 * measured yet: a few 128 KiB reads). 0, PAGEIN_E_INVALID. Not thread-safe
 * for one model. */
PAGEIN_API int pagein_model_io_facts(pagein_model *m, pagein_io_facts *f);

#define PAGEIN_IO_HIST 16 /* request-size histogram: bucket i = [4 KiB << i, 4 KiB << (i+1)) */

/* What the range engine did for a model opened with READ (the access
 * trace): requests, their sizes, requests in flight and latency. */
typedef struct pagein_io_stats {
    uint64_t requests, bytes, request_bytes;
    unsigned depth;
    uint64_t max_inflight;
    double mean_inflight;   /* time-weighted (Little's law: sum of latencies / wall time) */
    uint64_t lat_p50_ns, lat_p95_ns, lat_p99_ns;
    uint64_t size_hist[PAGEIN_IO_HIST];
    double seconds;
    char why[160];
    /* ---- the submit side --------------------------
     * Requests handed to the kernel and not yet completed (the local
     * readv's io_uring ring or threads), time-weighted mean and most;
     * the seconds the issuing thread spent blocked in submission; 1 if the
     * ring moved issuing to the kernel's workers because it blocked.
     * submit_view is 0 where the source does not report it (remote). */
    int submit_view;
    double submit_mean_inflight;
    uint64_t submit_max_inflight;
    double issue_seconds;
    int issue_async;
    /* ---- end of the submit side ---- */
    /* ---- addition: the memory the data went into ---------------------
     * Fresh pages are populated ahead of the reads on their own threads
     * (seconds summed over those threads), the reads wait for them where
     * they catch up; bytes populated (of which as huge pages) and bytes
     * that went into memory reused from an earlier model (docs/LOADING.md,
     * "Memory"). */
    double mem_fault_seconds;
    double mem_wait_seconds;
    uint64_t mem_bytes_populated, mem_bytes_huge, mem_bytes_reused;
    /* bytes that went into pages of the hugetlb pool (PAGEIN_READ_HUGETLB=1) */
    uint64_t mem_bytes_pool;
} pagein_io_stats;

/* 0 and *st for a model whose data the range engine read (READ, or AUTO
 * that chose it); PAGEIN_E_UNSUPPORTED for strategies that page in through
 * the mapping (their requests are the kernel's). */
PAGEIN_API int pagein_model_io_stats(const pagein_model *m, pagein_io_stats *st);


/* ------------------------------------------------------------------------ */
/* GPU staging: tensors into device memory (src/gpu/, docs/GPU.md)          */
/* ------------------------------------------------------------------------ */

/*
 * Loads a model's tensors into CUDA device memory without ever handing file
 * pages to the GPU: the files are read (pread, or a guarded copy for
 * tensors that need gathering) into a small ring of pinned host buffers,
 * and each filled buffer is copied to the device asynchronously on its own
 * stream while the next ones are read. Destinations are allocated once, in
 * compute (layer) order; a tensor is ready when the last copy holding its
 * bytes has completed, so layer 0 is usable long before the load ends.
 * Pinned memory is bounded by nbuffers * buffer_bytes whatever the model
 * size.
 *
 * CUDA is found at run time (dlopen of "libcuda.so.1", or the file named by
 * the environment variable PAGEIN_CUDA_LIBRARY): libpagein has no link-time
 * dependency on it. Without a driver or device the calls below return
 * PAGEIN_E_NO_CUDA with a detail saying what is missing. A failing CUDA
 * call gives PAGEIN_E_CUDA; the detail names the call, the CUDA error and,
 * where one is concerned, the tensor.
 *
 * device PAGEIN_DEVICE_HOST runs the same pipeline with host memory as the
 * "device" (plain heap buffers, asynchronous copies on worker threads):
 * what tests and machines without a GPU use.
 *
 * Tensors are delivered as their row-major, native-byte-order bytes (what
 * pagein_tensor_copy gives): byte-swapped and strided PyTorch tensors are
 * converted on the way, GGUF quantized blocks are copied raw.
 */

#define PAGEIN_DEVICE_HOST (-1)

typedef struct pagein_gpu_load pagein_gpu_load;

typedef struct pagein_gpu_opts {
    size_t size;              /* sizeof(pagein_gpu_opts) */
    int device;               /* CUDA device ordinal, or PAGEIN_DEVICE_HOST */
    uint64_t buffer_bytes;    /* bytes of each pinned staging buffer; 0 = 8 MiB */
    unsigned nbuffers;        /* buffers in the ring (>= 2); 0 = 8 */
    unsigned threads;         /* reading threads (<= nbuffers); 0 = nbuffers / 2 */
    /* Which tensors: NULL = every tensor of the model or file, in layer
     * order. Else ntensors records from that model or file (any order:
     * they are loaded in layer order; no duplicates). */
    const pagein_tensor *const *tensors;
    size_t ntensors;
    /* Destinations: NULL = the library allocates device memory once, one
     * block for all tensors in layer order (each tensor 256-byte aligned),
     * freed by pagein_gpu_load_free. Else one device address per entry of
     * `tensors` (required then), each with room for
     * pagein_gpu_tensor_bytes() bytes, owned by the caller (e.g. from
     * PyTorch's caching allocator on the same device). */
    const uint64_t *dst;
} pagein_gpu_opts;

#define PAGEIN_GPU_OPTS_INIT { sizeof(pagein_gpu_opts), 0, 0, 0, 0, NULL, 0, NULL }

/* What a load did (pagein_gpu_load_stats). Times are seconds since the
 * load started. */
typedef struct pagein_gpu_stats {
    uint64_t bytes;           /* tensor bytes delivered so far */
    size_t tensors, ready;    /* tensors in the load; of which ready */
    size_t copies;            /* asynchronous copies issued */
    double seconds;           /* until every tensor was ready (or so far) */
    double first_layer_seconds; /* until the leading globals and layer 0 were
                                   ready (the first tensor when there are no
                                   layers); < 0 not yet */
    uint64_t ring_bytes;      /* nbuffers * buffer_bytes */
    uint64_t pinned_peak;     /* most pinned bytes the load held at once */
    unsigned buffers_peak;    /* most ring buffers in use at once */
    uint64_t device_bytes;    /* device memory the library allocated (0 with opts.dst) */
    char device_name[128];    /* "NVIDIA H200", "host memory" */
    uint64_t request_bytes;   /* the range engine's read size and depth per reader, */
    unsigned depth;           /* and why they were chosen */
    char io_why[160];
} pagein_gpu_stats;

/* Information about a device, from pagein_gpu_probe. */
typedef struct pagein_gpu_info {
    char name[128];
    uint64_t total_bytes;     /* device memory (0 for the host backend) */
    uint64_t free_bytes;      /* of which free now (cuMemGetInfo; 0 for the host backend) */
} pagein_gpu_info;

/*
 * Checks that device (an ordinal or PAGEIN_DEVICE_HOST) can be used: loads
 * the driver, initialises it, opens the device's primary context. Returns
 * 0 and fills *info (may be NULL), or PAGEIN_E_NO_CUDA (the detail says
 * why: no libcuda.so.1, cuInit failed, no such device). Thread-safe.
 */
PAGEIN_API int pagein_gpu_probe(int device, pagein_gpu_info *info);

/*
 * Starts loading tensors of m (pagein_gpu_load_model) or f
 * (pagein_gpu_load_file) into device memory, on background threads owned
 * by *l, and returns at once; sets *l only on success. m or f must stay
 * open until pagein_gpu_load_free. Open the model with
 * PAGEIN_STRATEGY_LAZY: the staging reads the files itself and a strategy
 * that reads at open would read everything twice.
 * Returns 0, PAGEIN_E_NO_CUDA, PAGEIN_E_CUDA (allocation failed; names the
 * call), PAGEIN_E_INVALID (bad options: a tensor of another model, a
 * duplicate, dst without tensors, nbuffers < 2), -ENOMEM. Errors during
 * the load are returned by the waits below.
 */
PAGEIN_API int pagein_gpu_load_model(pagein_gpu_load **l, const pagein_model *m, const pagein_gpu_opts *opts);
PAGEIN_API int pagein_gpu_load_file(pagein_gpu_load **l, const pagein_file *f, const pagein_gpu_opts *opts);

/* Returns once tensor t is on the device: 0, or the load's error
 * (PAGEIN_E_TRUNCATED naming the file and tensor when a file shrank,
 * PAGEIN_E_CUDA naming the call and tensor, -errno reading), or
 * PAGEIN_E_NOT_FOUND when t is not part of the load. A tensor already
 * ready when a later one failed still returns 0. Thread-safe. */
PAGEIN_API int pagein_gpu_tensor_wait(pagein_gpu_load *l, const pagein_tensor *t);
/* Non-blocking: 1 ready, 0 not yet, or an error as above. Thread-safe. */
PAGEIN_API int pagein_gpu_tensor_query(pagein_gpu_load *l, const pagein_tensor *t);
/* Device address of t's bytes (valid once ready; until
 * pagein_gpu_load_free for library-allocated memory), or 0 when t is not
 * part of the load. For PAGEIN_DEVICE_HOST it is a host pointer. */
PAGEIN_API uint64_t pagein_gpu_tensor_ptr(const pagein_gpu_load *l, const pagein_tensor *t);
/* Bytes t occupies on the device: nelements * element size (ggml blocks:
 * whole blocks), which is t->nbytes except for strided checkpoint tensors. */
PAGEIN_API uint64_t pagein_gpu_tensor_bytes(const pagein_tensor *t);
/* Waits for every tensor: 0 or the load's first error. Thread-safe. */
PAGEIN_API int pagein_gpu_load_wait(pagein_gpu_load *l);
/* Copies the progress so far into *st. Thread-safe. */
PAGEIN_API void pagein_gpu_load_stats(pagein_gpu_load *l, pagein_gpu_stats *st);
/* Copies len bytes of t's device copy from offset off back into host
 * memory (waits for t first): for verification. 0 or an error. */
PAGEIN_API int pagein_gpu_tensor_read_back(pagein_gpu_load *l, const pagein_tensor *t, void *dst, uint64_t off,
                                           size_t len);
/* The host-to-device limit: copies `bytes` in total from one pinned
 * buffer (at most 64 MiB) to device memory in asynchronous copies spread
 * over `streams` streams (0 = 2), after one warm-up copy, and stores the
 * wall time in *seconds. For benchmarks (`pagein bench gpu`). 0,
 * PAGEIN_E_NO_CUDA, PAGEIN_E_CUDA or -ENOMEM. */
PAGEIN_API int pagein_gpu_copy_bench(int device, uint64_t bytes, unsigned streams, double *seconds);
/* Frees the pinned buffers kept for reuse. A freed load's ring goes to a
 * small process-wide cache (at most 64 MiB by default; the environment
 * variable PAGEIN_GPU_PINNED_CACHE sets the cap, e.g. "0" or "256M") so
 * that the next load skips pinning memory again: loading tensor by tensor
 * stays cheap. Thread-safe; call it when no load will follow. */
PAGEIN_API void pagein_gpu_trim(void);
/* Stops the load if still running (waiting for copies in flight), joins
 * its threads, frees the pinned ring and the device memory the library
 * allocated (never caller-provided destinations). NULL ok. */
PAGEIN_API void pagein_gpu_load_free(pagein_gpu_load *l);

/* ======================================================================== */
/* Distributed plans: weights read once across ranks (src/dist/,            */
/* docs/DISTRIBUTED.md)                                                     */
/* ======================================================================== */
/*
 * A plan says, for one rank of a group of `world` ranks loading one model,
 * which byte ranges of the model's files each rank reads from storage and
 * which tensors (or slices of tensors) this rank ends with. It does no I/O
 * and knows no transport: the caller reads its ranges (pagein_read_ranges)
 * and exchanges the shared ones with its own collectives (pagein.distributed
 * uses torch.distributed broadcasts). Every rank computes the same plan from
 * the same files, so no plan is ever sent.
 *
 *   REPLICATED  every rank ends with every tensor. The bytes of all tensors,
 *               taken in model order, are cut into `world` contiguous parts
 *               balanced by bytes (cut points rounded to `align` bytes of
 *               that stream); rank r reads part r and broadcasts it; storage
 *               serves each byte once.
 *   TP          tensors matched by a split rule are cut along one dimension
 *               (ROWS: dimension 0, the output rows of a linear layer's
 *               [out, in] weight; COLS: the last dimension, its input
 *               columns); rank r keeps elements [r*D/W, (r+1)*D/W) of that
 *               dimension of size D. A ROWS slice is one range: its rank
 *               reads it. A COLS slice is a strided set of short pieces,
 *               narrower than a page for most models, so reading it directly
 *               would fetch whole pages shared with the other ranks' slices;
 *               instead each rank reads 1/W of the tensor's rows (whole rows,
 *               contiguous) and the ranks exchange the column blocks
 *               (an all-to-all), unless PAGEIN_DIST_COLS_DIRECT asks for the
 *               direct strided reads. Every other tensor is replicated as
 *               above.
 */

typedef enum pagein_dist_mode {
    PAGEIN_DIST_REPLICATED = 0,
    PAGEIN_DIST_TP = 1
} pagein_dist_mode;

typedef enum pagein_split {
    PAGEIN_SPLIT_NONE = 0, /* replicated */
    PAGEIN_SPLIT_ROWS = 1, /* dimension 0 */
    PAGEIN_SPLIT_COLS = 2  /* the last dimension (1-D tensors: replicated) */
} pagein_split;

/* One split rule: tensors whose whole name matches the fnmatch(3) pattern
 * (no flags: '*' also matches '.') are split as given. The first matching
 * rule wins; a tensor no rule matches is replicated. */
typedef struct pagein_dist_rule {
    const char *pattern;
    pagein_split split;
} pagein_dist_rule;

/*
 * The default rules for llama-style checkpoints (Hugging Face and GGUF
 * names): q/k/v/gate/up projections (weights and biases) by ROWS, o/down
 * projections by COLS, token embeddings and the LM head by ROWS (vocabulary
 * rows); norms and everything else replicated. Sets *n; the array is static.
 */
PAGEIN_API const pagein_dist_rule *pagein_dist_default_rules(size_t *n);

/* What happens to a read's bytes (pagein_dist_read.shared). */
#define PAGEIN_DIST_PRIVATE 0u   /* only the owner needs them: its own TP slice */
#define PAGEIN_DIST_BROADCAST 1u /* every rank needs them: the owner broadcasts */
#define PAGEIN_DIST_EXCHANGE 2u  /* whole rows [row_start, row_stop) of a COLS
                                    tensor (rows = elements / last dimension):
                                    the owner reads them and sends each rank
                                    its columns of those rows (all-to-all) */

/* One read of the plan: `count` chunks of `length` bytes, the first at
 * absolute `offset` of model file `file`, each next one `stride` bytes
 * further (count 1: one contiguous range). The chunks go, packed one after
 * another, to byte `dst_offset` of the receiving rank's buffer for tensor
 * `tensor` (index in pagein_model_tensor_at order); for EXCHANGE reads,
 * to the owner's staging buffer of those rows (dst_offset 0). `owner` reads
 * it; `shared` is one of PAGEIN_DIST_PRIVATE/BROADCAST/EXCHANGE. */
typedef struct pagein_dist_read {
    uint32_t owner;
    uint32_t shared;
    uint32_t tensor;
    uint32_t file;
    uint64_t offset;
    uint64_t length;
    uint64_t stride;
    uint64_t count;
    uint64_t dst_offset;
    uint64_t row_start, row_stop; /* EXCHANGE: the rows read; else 0, 0 */
} pagein_dist_read;

/* One tensor this rank ends with: elements [start, stop) of dimension
 * `dim` (0 for ROWS, ndim-1 for COLS; for NONE the whole of dimension 0, or
 * [0, 1) for a scalar), nbytes bytes in row-major order. */
typedef struct pagein_dist_piece {
    uint32_t tensor;
    pagein_split split;
    uint32_t dim;
    uint64_t start, stop;
    uint64_t nbytes;
} pagein_dist_piece;

typedef struct pagein_dist_plan pagein_dist_plan;

#define PAGEIN_DIST_COLS_DIRECT 0x1u /* TP: each rank reads its COLS slices
                                        itself (strided), no exchange */

typedef struct pagein_dist_opts {
    size_t size;                   /* sizeof(pagein_dist_opts) */
    pagein_dist_mode mode;
    const pagein_dist_rule *rules; /* TP: NULL = pagein_dist_default_rules */
    size_t nrules;
    uint64_t align;                /* REPLICATED cut points: multiple of this; 0 = 4096 */
    uint32_t flags;                /* PAGEIN_DIST_* */
} pagein_dist_opts;

#define PAGEIN_DIST_OPTS_INIT { sizeof(pagein_dist_opts), PAGEIN_DIST_REPLICATED, NULL, 0, 0, 0 }

/*
 * Computes the plan of rank `rank` of `world` for model m. m is only read
 * during the call (the plan holds no pointer into it; its tensor indexes
 * are those of pagein_model_tensor_at on m). The reads listed are every
 * BROADCAST read, then every EXCHANGE read (of every owner, in the same
 * order on every rank: the order of the collectives), then this rank's
 * PRIVATE reads; the pieces are the
 * tensors this rank ends with, in model order. Sets *p only on success.
 * Errors: PAGEIN_E_INVALID (world 0, rank >= world, unknown mode or split),
 * PAGEIN_E_UNSUPPORTED (a split tensor whose dtype is block-quantized or
 * sub-byte, or a tensor stored non-contiguous or byte-swapped), -ENOMEM.
 * The detail names the tensor. Thread-safe.
 */
PAGEIN_API int pagein_dist_plan_new(pagein_dist_plan **p, const pagein_model *m, unsigned rank, unsigned world,
                                    const pagein_dist_opts *opts);
PAGEIN_API void pagein_dist_plan_free(pagein_dist_plan *p); /* NULL ok */
/* The reads and the pieces; pointers owned by p, valid until free. */
PAGEIN_API size_t pagein_dist_plan_read_count(const pagein_dist_plan *p);
PAGEIN_API const pagein_dist_read *pagein_dist_plan_read_at(const pagein_dist_plan *p, size_t i);
PAGEIN_API size_t pagein_dist_plan_piece_count(const pagein_dist_plan *p);
PAGEIN_API const pagein_dist_piece *pagein_dist_plan_piece_at(const pagein_dist_plan *p, size_t i);
/* Bytes this rank reads from storage (its shared and private reads). */
PAGEIN_API uint64_t pagein_dist_plan_read_bytes(const pagein_dist_plan *p);

#endif /* PAGEIN_EXPERIMENTAL: byte sources ... distributed plans */

/* ---- temporary files and signals ---------------------------------------- */

/*
 * Removes the named temporary files of writes in progress in this process:
 * every writer (safetensors, GGUF, convert, manifests) writes into an
 * unnamed O_TMPFILE inode where the filesystem has them, which leaves
 * nothing behind when the process dies, and names it only between
 * linkat() and rename() at commit; elsewhere it writes a hidden
 * ".NAME.tmp-XXXXXXXX" next to the target. Those names are what this
 * removes. Async-signal-safe (unlink only, no locks, no allocation): call
 * it from a SIGINT/SIGTERM handler, then restore the default action and
 * re-raise the signal, as the pagein tool does. Writes still running on
 * other threads then fail; their targets are untouched. Temporary files of
 * a parent process are left alone in a forked child.
 */
PAGEIN_API void pagein_temp_cleanup(void);

#ifdef __cplusplus
}
#endif
#endif /* PAGEIN_H */
