/*
 * internal.h - shared internals of libpagein. Never installed.
 *
 * This header is the core every layer shares: allocation, errors, the
 * growable buffer and arena, the tensor table, the file record and the
 * thread pool. Each layer adds its own header (docs/ARCHITECTURE.md):
 * source/source.h, io/io.h (guards, atomic files), format/format.h
 * (format table, parsers, JSON, manifests, GGUF), engine/engine.h,
 * load/load.h, data/data.h. Every allocation goes through pi_malloc & co
 * so that tests can inject failures.
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
#include <pthread.h>
#include <stdatomic.h>

/* The library uses the whole API, the experimental section too
 * (pagein.h, "Stability"); so do the white-box tests and fuzzers. */
#ifndef PAGEIN_EXPERIMENTAL
#define PAGEIN_EXPERIMENTAL
#endif
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
/* 1 if s ends with suf (byte comparison); 0 for a NULL s. */
int pi_ends_with(const char *s, const char *suf);
/* The last i < n with a[i] <= x in the ascending a[0..n) (0 when none or
 * n == 0): the bisection every "which shard / window / interval holds
 * position x" asks, over a table of first positions. */
size_t pi_last_le(const uint64_t *a, size_t n, uint64_t x);
/* The same over a field of an array of structs: a[i] is the uint64_t at
 * base + i * stride (pi_last_le_by(&v[0].first, n, sizeof v[0], x)). */
size_t pi_last_le_by(const void *base, size_t n, size_t stride, uint64_t x);
/* A caller's options over the defaults in o (n bytes): the public option
 * structs start with `size_t size`, the bytes the caller's version holds,
 * so an older caller's struct copies only what it has. NULL in keeps the
 * defaults; a size below sizeof(size_t) is PAGEIN_E_INVALID ("WHAT:
 * options size N"). o's size becomes n. */
int pi_opts_in(void *o, size_t n, const void *in, const char *what);
/* The value of hex digit c (either case), or -1. */
int pi_hexval(int c);
/* dir/name (malloc'd, NULL without memory), with one slash however many dir
 * ends with ("d/" + "x" is "d/x"; "/" + "x" is "/x"; "" + "x" is "x").
 * Paths and URLs alike ("s3://b/p/" + "k" is "s3://b/p/k"). */
char *pi_path_join(const char *dir, const char *name);
/* Seconds on the monotonic clock (for durations, rates and deadlines). */
double pi_now_s(void);
/* The environment variable name, or NULL when unset or empty. */
const char *pi_env(const char *name);
/* name as a decimal integer in [lo, hi]; def when unset, empty, not a
 * whole number or out of range. */
long pi_env_long(const char *name, long def, long lo, long hi);
/* name as a byte count ("1048576", "512K", "4M", "1G", "4MiB", "4MB");
 * def when unset, empty or not starting with a digit. */
uint64_t pi_env_size(const char *name, uint64_t def);
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
    void **p;      /* hash set of the blocks (NULL: empty slot), cap slots */
    size_t n, cap; /* n blocks; cap a power of two, or 0 */
    int lost; /* the journal itself could not grow: some blocks untracked */
    struct pi_journal *prev;
};
void pi_journal_begin(struct pi_journal *j);
void pi_journal_end(struct pi_journal *j, int free_all);
/* Hash-set slots this thread's journals have looked at so far (tests check
 * that recording and forgetting n blocks costs O(n) in any order). */
uint64_t pi_journal_probes(void);
/* Test hook: fn(ctx) runs once, on this thread, when a journal records its
 * n-th block from now (n <= 0 clears it). fuzz_open_file truncates the
 * file there, so the parse faults mid-way, deterministically. */
void pi_journal_hook(long n, void (*fn)(void *), void *ctx);

/* ---- errors (util.c) ---------------------------------------------------- */
/* Sets the thread's detail message and returns code. */
int pi_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the current detail with "prefix: " (e.g. the file name). */
void pi_err_prefix(const char *prefix);
/* Clears the detail. */
void pi_err_clear(void);

/* ---- secrets in output (src/core/redact.c) ------------------------------ */
/* url with its secrets replaced, into out (cap bytes, NUL-terminated,
 * truncated to fit): the userinfo (user:pass@ -> ***@) and the values of
 * query parameters that carry credentials or signatures (X-Amz-Signature,
 * X-Amz-Credential, X-Amz-Security-Token, Signature, sig, token, ... ->
 * REDACTED). Returns out. Every URL that reaches a message, --json, a log
 * or a file pagein writes goes through it. */
char *pi_url_redact(const char *url, char *out, size_t cap);
/* Redacts, in place, every scheme://... inside the NUL-terminated text
 * (cap bytes of room). 1 if it changed, else 0. pi_err and pi_err_prefix
 * apply it to every detail. */
int pi_redact_text(char *text, size_t cap);

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

/* ---- growable byte buffer (util.c) -------------------------------------- */
/* The one growable buffer of the library (text being formatted, images
 * being written). After an allocation failure oom is set and further
 * writes are ignored, so builders check once at the end. The content is
 * always NUL-terminated when p is not NULL (room for it is kept). */
struct pi_buf {
    char *p;
    size_t n, cap;
    int oom;
};
/* Room for k more bytes at p + n (n not advanced); NULL after OOM. */
char *pi_buf_room(struct pi_buf *b, size_t k);
void pi_buf_put(struct pi_buf *b, const void *s, size_t k);
static inline void pi_buf_str(struct pi_buf *b, const char *s) { pi_buf_put(b, s, strlen(s)); }
/* printf onto the buffer (any length: formatted in place). */
void pi_buf_printf(struct pi_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pi_buf_free(struct pi_buf *b);
/* Hands b's text to a caller of the public API, who frees it with free()
 * (malloc'd, not pi_malloc'd); b is freed either way. 0, or -ENOMEM ("out
 * of memory") when b ran out of memory or the copy cannot be made. */
int pi_buf_hand_out(struct pi_buf *b, char **out);

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
    /* Format-specific data, its type known to its format only (PyTorch:
     * strides and storage identity per tensor, src/format/torch.c; GGUF:
     * struct pi_gguf_ext, src/format/format.h), freed by ext_free in
     * pi_table_free when set (GGUF's lives in the arena). */
    void *ext;
    void (*ext_free)(void *ext);
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

/* ---- files (file/file.c) ------------------------------------------------ */
struct pi_source;
struct pagein_file {
    char *path;
    struct pi_source *src; /* where the bytes come from (NULL for open_memory) */
    int fd;              /* src->fd: the local descriptor, -1 for open_memory and remote sources */
    const uint8_t *base; /* the mapping (or caller buffer); NULL for unmapped (remote) sources */
    size_t len;          /* file size (bytes mapped when mapped) */
    int mapped;          /* base is our mmap */
    uint8_t *hdr;        /* unmapped sources: the header bytes the table's strings point into (GGUF metadata) */
    dev_t dev;
    ino_t ino;
    struct pi_table tab;
    /* Set by a model whose tensor memory is filled by reads (prefetch over
     * a source, src/load/stream.c): pagein_tensor_copy calls it first so it
     * never copies bytes that were not read yet. NULL otherwise. */
    int (*ensure)(void *ctx, const pagein_tensor *t);
    void *ensure_ctx;
};

/* ---- thread pool (core/pool.c) -------------------------------------------- */
/*
 * Runs fn(ctx, i) for i in [0, n) on up to nthreads threads (the calling
 * thread is one of them), handing out items in order from a shared counter.
 * Stops handing out items after the first negative return and returns it;
 * 0 if all succeeded. nthreads 0 = pi_default_threads().
 */
typedef int (*pi_item_fn)(void *ctx, size_t i);
int pi_parallel(unsigned nthreads, size_t n, pi_item_fn fn, void *ctx);
unsigned pi_default_threads(void);

/* The same workers kept for the life of an object (a crew): pi_parallel()
 * semantics without creating threads on every batch. Owned by one object,
 * stopped and joined by pi_crew_stop. */
struct pi_job {
    pi_item_fn fn;
    void *ctx;
    size_t n;
    _Atomic size_t next;
    _Atomic int rc;
    char detail[1024]; /* the first failing item's detail, carried to the caller's thread */
};
struct pi_crew {
    pthread_t *tids;
    unsigned n; /* worker threads (the caller of run is one more) */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;
    unsigned busy;
    int stop;
    struct pi_job job;
};
/* Starts nthreads-1 workers (the calling thread of run is the last). */
int pi_crew_start(struct pi_crew *c, unsigned nthreads);
/* Runs fn(ctx, i) for i in [0, n); returns 0 or the first negative rc
 * (its detail carried over). */
int pi_crew_run(struct pi_crew *c, size_t n, pi_item_fn fn, void *ctx);
void pi_crew_stop(struct pi_crew *c);

#endif /* PAGEIN_INTERNAL_H */
