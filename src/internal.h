/*
 * internal.h - shared internals of libpagein. Never installed.
 *
 * Layers (docs/ARCHITECTURE.md): io/ (sources: mappings, explicit reads,
 * thread pool, residency, guards) -> format/ (parsers: buffer in, tensor
 * table out, no I/O) -> load/ (models and strategies) -> data/ (training
 * data readers). Every allocation goes through pi_malloc & co so that tests
 * can inject failures.
 */
#ifndef PAGEIN_INTERNAL_H
#define PAGEIN_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "pagein.h"

#define PI_UNUSED(x) ((void)(x))
#define PI_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define PI_MIN(a, b) ((a) < (b) ? (a) : (b))
#define PI_MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- allocation (util.c) ------------------------------------------------ */
/* All library allocations go through these. pi_alloc_fail_after(n) makes
 * the (n+1)-th following allocation fail (test hook; -1 disables). */
void *pi_malloc(size_t n);
void *pi_calloc(size_t n, size_t size);
void *pi_realloc(void *p, size_t n);
void pi_free(void *p);
char *pi_strndup(const char *s, size_t n);
/* Grows the array *p of *cap elements of elem bytes (doubling, from 16) so
 * that it holds at least need; 0, or -ENOMEM (with a detail) leaving *p and
 * *cap untouched. */
int pi_grow(void **p, size_t *cap, size_t need, size_t elem);
void pi_alloc_fail_after(long n);
long pi_alloc_count(void); /* allocations since start */

/* Allocation journal: between pi_journal_begin and pi_journal_end, every
 * block this thread allocates through the functions above and has not
 * freed is recorded. pi_journal_end(j, 1) frees them all: for code that
 * was abandoned mid-way (a parser stopped by the truncation guard's
 * siglongjmp, which runs no cleanup). pi_journal_end(j, 0) keeps them (and
 * hands them to an enclosing journal). Journals nest per thread. */
struct pi_journal {
    void **p;
    size_t n, cap;
    int lost; /* the journal itself could not grow: some blocks untracked */
    struct pi_journal *prev;
};
void pi_journal_begin(struct pi_journal *j);
void pi_journal_end(struct pi_journal *j, int free_all);

/* ---- errors (util.c) ---------------------------------------------------- */
/* Sets the thread's detail message and returns code. */
int pi_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the current detail with "prefix: " (e.g. the file name). */
void pi_err_prefix(const char *prefix);
/* Clears the detail. */
void pi_err_clear(void);

#define RETURN_IF(cond, code, ...)                                  \
    do {                                                            \
        if (cond) return pi_err((code), __VA_ARGS__);               \
    } while (0)
#define FORWARD_IF(rc)                                              \
    do {                                                            \
        int rc_ = (rc);                                             \
        if (rc_ < 0) return rc_;                                    \
    } while (0)

/* Checked arithmetic. Return true on overflow. */
static inline bool pi_mul_overflow(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_mul_overflow(a, b, out);
}
static inline bool pi_add_overflow(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_add_overflow(a, b, out);
}
static inline uint64_t pi_align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

/* ---- arena: many small allocations freed together (util.c) ------------- */
struct pi_arena {
    struct pi_arena_chunk *head;
};
void *pi_arena_alloc(struct pi_arena *a, size_t n); /* 8-byte aligned; NULL on OOM */
char *pi_arena_strndup(struct pi_arena *a, const char *s, size_t n);
void pi_arena_free(struct pi_arena *a);

/* ---- tensor tables (table.c) -------------------------------------------- */
/*
 * The one tensor table every format parser fills and every consumer reads.
 * Parsers call pi_table_add_* in file order, then pi_table_finish(), which
 * assigns indexes, builds the O(1) name index (rejecting duplicates), the
 * layer index of each tensor and the layer order, and sets data pointers
 * from the base address.
 */
struct pi_table {
    pagein_tensor *t;
    size_t n, cap;
    pagein_meta *meta;
    size_t nmeta, metacap;
    uint32_t *by_layer;  /* n indexes in layer order */
    uint32_t *hash;      /* hcap slots: tensor index + 1, 0 = empty */
    size_t hcap;
    uint32_t *mhash;     /* metadata key index, same scheme */
    size_t mhcap;
    struct pi_arena arena;
    /* format facts */
    pagein_format format;
    uint64_t data_start;
    uint64_t header_len;
    uint32_t version;
    uint32_t alignment;
    int big_endian;
    /* Format-specific data (PyTorch: strides and storage identity per
     * tensor, src/format/torch.c), freed by ext_free in pi_table_free. */
    void *ext;
    void (*ext_free)(void *ext);
    /* GGUF: per metadata entry (same index as meta[]), the byte offsets of
     * the elements of a string or nested array relative to pagein_meta.raw,
     * for O(1) element access; NULL for other entries. Arena-owned. */
    const uint64_t **gguf_elem_off;
    size_t gguf_nelem_off;
};

void pi_table_init(struct pi_table *t);
void pi_table_free(struct pi_table *t);
/* Adds a tensor (name copied, shape copied). offset is absolute. Returns the
 * new record (to set flags etc.) or NULL on OOM. */
pagein_tensor *pi_table_add(struct pi_table *t, const char *name, size_t name_len, pagein_dtype dtype,
                            uint32_t ndim, const uint64_t *shape, uint64_t offset, uint64_t nbytes);
/* Adds a metadata entry; key copied. Returns the record or NULL on OOM. */
pagein_meta *pi_table_add_meta(struct pi_table *t, const char *key, size_t key_len);
/* Finishes the table. base may be NULL (no data pointers). Returns 0,
 * PAGEIN_E_DUPLICATE (detail names the tensor or key) or -ENOMEM. */
int pi_table_finish(struct pi_table *t, const void *base);
const pagein_tensor *pi_table_find(const struct pi_table *t, const char *name, size_t len);
const pagein_meta *pi_table_find_meta(const struct pi_table *t, const char *key, size_t len);
uint64_t pi_hash_bytes(const void *p, size_t n);

/* ---- format parsers: src/format/format.h (the format table) ------------- */
/* Detects the format from the first bytes (content only). */
pagein_format pi_detect_format(const uint8_t *buf, size_t len);

/* ---- files (io/file.c) -------------------------------------------------- */
struct pi_source;
struct pagein_file {
    char *path;
    struct pi_source *src; /* where the bytes come from (NULL for open_memory) */
    int fd;              /* src->fd: the local descriptor, -1 for open_memory and remote sources */
    const uint8_t *base; /* the mapping (or caller buffer); NULL for unmapped (remote) sources */
    size_t len;          /* file size (bytes mapped when mapped) */
    int mapped;          /* base is our mmap */
    dev_t dev;
    ino_t ino;
    struct pi_table tab;
};

/* ---- thread pool (io/pool.c) -------------------------------------------- */
/*
 * Runs fn(ctx, i) for i in [0, n) on up to nthreads threads (the calling
 * thread is one of them), handing out items in order from a shared counter.
 * Stops handing out items after the first negative return and returns it;
 * 0 if all succeeded. nthreads 0 = pi_default_threads().
 */
typedef int (*pi_item_fn)(void *ctx, size_t i);
int pi_parallel(unsigned nthreads, size_t n, pi_item_fn fn, void *ctx);
unsigned pi_default_threads(void);

/* ---- guards (io/guard.c) ------------------------------------------------ */
/*
 * Reads the library performs through a file mapping must not kill the
 * process when the file shrinks underneath (SIGBUS). Two tools:
 *
 *  - pi_guard_populate() uses madvise(MADV_POPULATE_READ), which returns an
 *    error (EFAULT) instead of raising SIGBUS; use it to make ranges
 *    resident (populate, prefetch, warm).
 *  - Where bytes must actually be loaded (copies, checksums, touching pages
 *    on kernels without MADV_POPULATE_READ), pi_guard_call() runs a function
 *    under a per-thread sigsetjmp guard. A SIGBUS whose fault address lies
 *    inside the guarded range jumps back and becomes PAGEIN_E_TRUNCATED
 *    naming the file and the file offset of the fault.
 *
 * The SIGBUS handler is registered once per process, on first use of any
 * guard (the one piece of process-wide state besides the allocation test
 * hook; docs/SAFETY.md). It remembers the handler that was installed before
 * it and passes every SIGBUS outside a guarded range on to it (calling it,
 * ignoring or re-raising with the default action as that handler says), so
 * the program's own handling is unchanged. Guards nest and are per thread.
 *
 * Names and offsets are only used in messages: name is the file path,
 * file_off the file offset of addr, fd (or -1) lets the message say how
 * large the file is now.
 */
/* Makes [addr, addr+len) of a read-only file mapping resident. addr need not
 * be page aligned. Returns 0, PAGEIN_E_TRUNCATED or -errno (-ENOMEM when the
 * range is not mapped). Falls back to a guarded touch of one byte per page
 * when the kernel lacks MADV_POPULATE_READ. */
int pi_guard_populate(const void *addr, size_t len, const char *name, uint64_t file_off, int fd);
/* Loads one byte per page of [addr, addr+len) under a guard. */
int pi_guard_touch(const void *addr, size_t len, const char *name, uint64_t file_off, int fd);
/* memcpy(dst, src, len) under a guard over the source range. */
int pi_guard_copy(void *dst, const void *src, size_t len, const char *name, uint64_t file_off, int fd);
/*
 * Runs fn(ctx) with [addr, addr+len) guarded and returns its result, or
 * PAGEIN_E_TRUNCATED if it faulted inside the range. fn is abandoned at the
 * faulting load (siglongjmp), so while guarded it must not allocate, take
 * locks or otherwise leave state that needs undoing: it should only read the
 * range and write into memory its caller owns.
 */
typedef int (*pi_guard_fn)(void *ctx);
int pi_guard_call(const void *addr, size_t len, const char *name, uint64_t file_off, int fd,
                  pi_guard_fn fn, void *ctx);
/* Registers the SIGBUS handler now (it is otherwise registered on first
 * use). Returns 0 or -errno. Idempotent, thread-safe. */
int pi_guard_install(void);
/* Test hook: restores the handler that was in place before pi_guard_install
 * so that a forked child can register again. Not thread-safe. */
void pi_guard_uninstall(void);

/* ---- integrity manifests (format/manifest.c, io/hash.c) ----------------- */
/*
 * A manifest lists, for every file of a model, its size and a hash of its
 * header bytes, and for every tensor its place and the XXH3-128 hash of its
 * bytes. Text, one record a line (docs/FORMAT-MANIFEST.md). The parser
 * treats the buffer as untrusted input and does no I/O.
 */
#define PI_MANIFEST_MAX_NAME 65536u      /* bytes of a decoded name */
#define PI_MANIFEST_MAX_FILES 65536u
#define PI_MANIFEST_MAX_TENSORS (1u << 24)

struct pi_manifest_file {
    const char *name; /* decoded, NUL-terminated (arena) */
    size_t name_len;
    uint64_t size;         /* file size */
    uint64_t header_bytes; /* bytes [0, header_bytes) hashed as the header */
    uint8_t header_hash[16];
};

struct pi_manifest_tensor {
    uint32_t file;
    const char *name; /* decoded, NUL-terminated (arena); may contain NUL */
    size_t name_len;
    uint64_t offset, nbytes;
    uint8_t hash[16]; /* canonical (big-endian) XXH3-128 */
};

struct pi_manifest {
    struct pi_manifest_file *files;
    size_t nfiles, fcap;
    struct pi_manifest_tensor *t;
    size_t n, cap;
    uint32_t *index; /* icap slots: tensor index + 1, keyed by (file, name) */
    size_t icap;
    struct pi_arena arena;
};

void pi_manifest_init(struct pi_manifest *m);
void pi_manifest_free(struct pi_manifest *m);
/* Parses buf. Returns 0 or PAGEIN_E_BAD_MANIFEST, _BAD_MAGIC, _BAD_VERSION,
 * _UNSUPPORTED (another hash), _TRUNCATED (no final "end" line), _OVERFLOW,
 * _BAD_OFFSET, _DUPLICATE, _LIMIT, -ENOMEM; the detail names the line.
 * m is initialised by the caller and freed by the caller on error too. */
int pi_manifest_parse(const uint8_t *buf, size_t len, struct pi_manifest *m);
/* Entry for (file, name) or NULL. */
const struct pi_manifest_tensor *pi_manifest_find(const struct pi_manifest *m, uint32_t file,
                                                  const char *name, size_t len);
/* Appends records to m (building a manifest to write). Return 0 or -ENOMEM. */
int pi_manifest_add_file(struct pi_manifest *m, const char *name, size_t name_len, uint64_t size,
                         uint64_t header_bytes, const uint8_t hash[16]);
int pi_manifest_add_tensor(struct pi_manifest *m, uint32_t file, const char *name, size_t name_len,
                           uint64_t offset, uint64_t nbytes, const uint8_t hash[16]);
/* Serialises m into a pi_malloc'd buffer (*out, *len). 0 or -ENOMEM. */
int pi_manifest_format(const struct pi_manifest *m, char **out, size_t *len);

/* ==== JSON (format/json.c) =============================================== */
/*
 * A pull reader for JSON over (buf, len): no DOM, no recursion (nesting is
 * tracked in a fixed stack, so input cannot drive the C stack deep), strict
 * RFC 8259 syntax, strict UTF-8, every string escape including \uXXXX
 * surrogate pairs (lone surrogates are rejected). Used by the safetensors
 * header, the sharded `*.index.json` and integrity manifests.
 *
 * Walk a document like this:
 *
 *     struct pi_json j;
 *     pi_json_init(&j, buf, len, 0);
 *     rc = pi_json_enter(&j, PI_JSON_OBJECT);          // consumes '{'
 *     while ((rc = pi_json_next(&j, &key, &klen)) > 0) { // 1: a member follows
 *         if (klen == 4 && !memcmp(key, "name", 4)) rc = pi_json_string(&j, &s, &n);
 *         else rc = pi_json_skip(&j);                   // any value, iteratively
 *         if (rc < 0) break;
 *     }                                                 // 0: '}' consumed
 *     if (rc == 0) rc = pi_json_finish(&j);             // only whitespace left
 *     pi_json_free(&j);
 *
 * Errors (negative returns, detail says the byte offset): PAGEIN_E_BAD_JSON
 * (syntax, unexpected end, lone surrogate, control character in a string),
 * PAGEIN_E_BAD_UTF8, PAGEIN_E_LIMIT (nesting deeper than max_depth),
 * PAGEIN_E_BAD_TYPE (the value is not of the requested type; nothing is
 * consumed), PAGEIN_E_OVERFLOW (integer does not fit uint64), -ENOMEM.
 * After an error the reader must not be used again except for pi_json_free.
 *
 * Strings and keys are returned as (pointer, length): the decoded text may
 * contain NUL bytes. A string without escapes points into buf; one with
 * escapes is decoded into a buffer owned by the reader (allocated once, at
 * most len + 1 bytes, on the first escape) and NUL-terminated. Either way
 * the pointer stays valid until pi_json_free() (and buf outlives it).
 */
#define PI_JSON_MAX_DEPTH 128

enum pi_json_type {
    PI_JSON_OBJECT = 1,
    PI_JSON_ARRAY,
    PI_JSON_STRING,
    PI_JSON_NUMBER,
    PI_JSON_TRUE,
    PI_JSON_FALSE,
    PI_JSON_NULL
};

struct pi_json {
    const uint8_t *buf;
    size_t len, pos;
    uint32_t depth, max_depth;
    bool utf8_checked;  /* caller validated all of buf: skip per-string UTF-8 checks */
    char *dec;          /* decoded strings (NULL until the first escape) */
    size_t dec_used;
    uint8_t kind[PI_JSON_MAX_DEPTH];  /* '{' or '[' per open container */
    uint8_t first[PI_JSON_MAX_DEPTH]; /* 1 until the container's first member */
};

/* Starts reading buf. max_depth 0 or > PI_JSON_MAX_DEPTH means PI_JSON_MAX_DEPTH. */
void pi_json_init(struct pi_json *j, const void *buf, size_t len, uint32_t max_depth);
void pi_json_free(struct pi_json *j);
/* Type of the next value (skips whitespace, consumes nothing): a
 * PI_JSON_* >= 1, or PAGEIN_E_BAD_JSON (end of input / not a value). */
int pi_json_peek(struct pi_json *j);
/* Consumes '{' (type PI_JSON_OBJECT) or '[' (PI_JSON_ARRAY). */
int pi_json_enter(struct pi_json *j, int type);
/* In the innermost open container: returns 1 if a member follows (for an
 * object its key is decoded into key/klen, either may be NULL, and the
 * ':' consumed; the caller must then consume the value), 0 if the
 * container ended (its closing bracket consumed), or an error. */
int pi_json_next(struct pi_json *j, const char **key, size_t *klen);
int pi_json_string(struct pi_json *j, const char **s, size_t *len);
/* A non-negative integer without fraction or exponent. Negative numbers,
 * fractions and exponents give PAGEIN_E_BAD_TYPE. */
int pi_json_u64(struct pi_json *j, uint64_t *v);
/* Any number: its validated text (points into buf). */
int pi_json_number(struct pi_json *j, const char **text, size_t *len);
int pi_json_bool(struct pi_json *j, bool *v);
int pi_json_null(struct pi_json *j);
/* Consumes the next value whatever it is (objects and arrays iteratively,
 * still validating syntax, UTF-8 and the depth limit). */
int pi_json_skip(struct pi_json *j);
/* After the top-level value: only JSON whitespace may remain. */
int pi_json_finish(struct pi_json *j);
/* Current byte offset (for messages). */
static inline size_t pi_json_offset(const struct pi_json *j) { return j->pos; }
/* True if s[0..n) is valid UTF-8 (no overlongs, surrogates or code points
 * above U+10FFFF); otherwise false and *bad (may be NULL) = first bad byte. */
bool pi_utf8_valid(const uint8_t *s, size_t n, size_t *bad);
/* Appends s[0..n) as a JSON string literal with serde_json's escaping
 * (\" \\ \b \f \n \r \t, other control bytes as \u00xx, everything
 * else verbatim) to dst, which must have room for pi_json_quoted_len(s, n). */
size_t pi_json_quoted_len(const char *s, size_t n);
char *pi_json_quote(char *dst, const char *s, size_t n);
/* ==== end JSON ============================================================ */

/* ==== atomic files (io/atomic.c) ========================================= */
/*
 * Writing a file so that readers see either the old file or the complete
 * new one, never a partial one, and a crash never truncates the old one:
 * create a temporary file in the target's directory (same filesystem, so
 * rename is atomic), write, fsync it, rename it over the target, fsync the
 * directory so the rename is durable. On any failure the temporary file is
 * unlinked and the target is untouched. Used by the safetensors and GGUF
 * writers, converters and `pagein install`.
 *
 *     struct pi_atomic_file a;
 *     rc = pi_atomic_open(&a, path);            // temp created, mode 0666 & ~umask
 *     if (rc == 0) rc = pi_atomic_write(&a, buf, n);   // as often as needed
 *     if (rc == 0) rc = pi_atomic_commit(&a);   // fsync, rename, fsync dir
 *     else pi_atomic_abort(&a);                 // unlink temp (commit cleans up itself)
 *
 * Errors are -errno with a detail naming the path. Not thread-safe per
 * object; distinct objects are independent.
 */
struct pi_atomic_file {
    int fd;        /* the temporary file, -1 when closed */
    char *path;    /* final path (copy) */
    char *tmp;     /* temporary path (copy) */
    uint64_t written;
};
int pi_atomic_open(struct pi_atomic_file *a, const char *path);
/* Writes all len bytes at the current end (retries short writes and EINTR). */
int pi_atomic_write(struct pi_atomic_file *a, const void *buf, size_t len);
/* fsyncs, renames the temp over path, fsyncs the directory, frees a. On
 * failure the temp is unlinked and a freed as well. Every failure except a
 * failing directory fsync happens before the rename, so the target is then
 * untouched; after a directory fsync error the new file is in place but
 * its rename may not survive a crash. */
int pi_atomic_commit(struct pi_atomic_file *a);
/* Closes and unlinks the temp file and frees a. Safe after a failed open. */
void pi_atomic_abort(struct pi_atomic_file *a);
/* ==== end atomic files ==================================================== */

/* ---- GGUF (format/gguf*.c) --------------------------------------------- */
/* Limits, as in ggml's gguf.cpp (specs/GGUF.md 1.2-1.6). */
#define PI_GGUF_MAX_STRING (1ull << 30)   /* GGUF_MAX_STRING_LENGTH */
#define PI_GGUF_MAX_ARRAY (1ull << 30)    /* GGUF_MAX_ARRAY_ELEMENTS */
#define PI_GGUF_MAX_NAME 64               /* GGML_MAX_NAME: names < 64 bytes */
#define PI_GGUF_MAX_DIMS 4                /* GGML_MAX_DIMS */
#define PI_GGUF_MAX_DEPTH 8               /* nested arrays: pagein's own limit */
#define PI_GGUF_DEFAULT_ALIGNMENT 32

/* Byte size of one element of a scalar GGUF value type (0 for STRING and
 * ARRAY, which are variable-sized; 0 for invalid ids). */
uint32_t pi_gguf_type_size(uint32_t type);
/* Name of a GGUF value type ("u32", "string", ...); "?" if invalid. */
const char *pi_gguf_type_name(uint32_t type);

/* ---- GGUF split ----------------------------------------------------------- */
/*
 * Split (sharded) GGUF sets: files named PREFIX-%05d-of-%05d.gguf numbered
 * from 00001, each a complete GGUF with split.no (0-based), split.count and
 * split.tensors.count (any integer width accepted).
 *
 * pi_gguf_split_paths: if path's file name matches the split pattern,
 * sets *paths to a pi_malloc'd array of *n pi_malloc'd shard paths in shard
 * order (same directory, same prefix, 00001..count) and returns 1; if it
 * does not match, sets *paths = NULL, *n = 0 and returns 0 (a single file).
 * Does no I/O (shards are not checked to exist). Free with
 * pi_gguf_split_free_paths. Errors: -ENOMEM, PAGEIN_E_BAD_INDEX (the name
 * says shard i of n with i == 0, i > n or n > 99999).
 *
 * pi_gguf_split_check: given the n open files of a set in shard order,
 * checks that each has split.no == its position, split.count == n (both
 * present in every shard when n > 1), that split.tensors.count is the same
 * everywhere and equals the sum of the shards' tensor counts, and that no
 * tensor name appears in two shards. A set of one file without split keys
 * passes. Returns 0 or PAGEIN_E_BAD_INDEX / PAGEIN_E_DUPLICATE with a
 * detail naming the shard and the key.
 */
int pi_gguf_split_paths(const char *path, char ***paths, size_t *n);
void pi_gguf_split_free_paths(char **paths, size_t n);
int pi_gguf_split_check(const pagein_file *const *files, size_t n);

#endif /* PAGEIN_INTERNAL_H */
