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
void pi_alloc_fail_after(long n);
long pi_alloc_count(void); /* allocations since start */

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
    /* PyTorch checkpoints: strides and storage identity per tensor
     * (src/format/torch.c); freed by pi_table_free. */
    struct pi_torch_ext *torch;
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

/* ---- format parsers (format/) ------------------------------------------- */
/* Each takes the whole file image (buf, len), does no I/O and fills *t
 * (initialised by the caller, freed by the caller on error too). flags are
 * PAGEIN_OPEN_*. */
int pi_safetensors_parse(const uint8_t *buf, size_t len, uint32_t flags, struct pi_table *t);
int pi_gguf_parse(const uint8_t *buf, size_t len, uint32_t flags, struct pi_table *t);
int pi_torch_parse(const uint8_t *buf, size_t len, uint32_t flags, struct pi_table *t);
/* Frees a PyTorch table extension (torch.c); NULL ok. */
void pi_torch_ext_free(struct pi_torch_ext *x);
/* Detects the format from the first bytes. */
pagein_format pi_detect_format(const uint8_t *buf, size_t len);

/* ---- files (io/file.c) -------------------------------------------------- */
struct pagein_file {
    char *path;
    int fd;              /* -1 for open_memory */
    const uint8_t *base; /* the mapping (or caller buffer) */
    size_t len;          /* bytes mapped */
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

#endif /* PAGEIN_INTERNAL_H */
