/* util.c - error details, environment, buffers, arena, version (the
 * allocation wrapper is alloc.c, below this file and redact.c). */
#include "../internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int pi_ends_with(const char *s, const char *suf) {
    if (!s) return 0;
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && memcmp(s + n - m, suf, m) == 0;
}

int pi_hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

size_t pi_last_le_by(const void *base, size_t n, size_t stride, uint64_t x) {
    const char *b = base;
    size_t lo = 0, hi = n; /* a[lo] <= x < a[hi] (a[n] read as infinite) */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (*(const uint64_t *)(const void *)(b + mid * stride) <= x)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

size_t pi_last_le(const uint64_t *a, size_t n, uint64_t x) { return pi_last_le_by(a, n, sizeof *a, x); }

int pi_opts_in(void *o, size_t n, const void *in, const char *what) {
    if (!in) return 0;
    size_t sz;
    memcpy(&sz, in, sizeof sz);
    RETURN_IF(sz < sizeof(size_t), PAGEIN_E_INVALID, "%s: options size %zu", what, sz);
    memcpy(o, in, PI_MIN(sz, n));
    memcpy(o, &n, sizeof n);
    return 0;
}

char *pi_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    while (a > 1 && dir[a - 1] == '/') a--;
    int slash = a > 0 && !(a == 1 && dir[0] == '/');
    char *p = pi_malloc(a + (size_t)slash + b + 1);
    if (!p) return NULL;
    memcpy(p, dir, a);
    if (slash) p[a] = '/';
    memcpy(p + a + slash, name, b + 1);
    return p;
}

double pi_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *pi_env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

long pi_env_long(const char *name, long def, long lo, long hi) {
    const char *v = pi_env(name);
    if (!v) return def;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) return def;
    return x;
}

uint64_t pi_env_size(const char *name, uint64_t def) {
    const char *e = pi_env(name);
    if (!e || *e < '0' || *e > '9') return def;
    char *end = NULL;
    unsigned long long v = strtoull(e, &end, 10);
    switch (*end) {
    case 'k': case 'K': v <<= 10; break;
    case 'm': case 'M': v <<= 20; break;
    case 'g': case 'G': v <<= 30; break;
    default: break;
    }
    return (uint64_t)v;
}

int pi_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) {
        if (nc > SIZE_MAX / 2) return pi_err(-ENOMEM, "out of memory: %zu elements", need);
        nc *= 2;
    }
    if (elem && nc > SIZE_MAX / elem) return pi_err(-ENOMEM, "out of memory: %zu elements of %zu bytes", nc, elem);
    void *np = pi_realloc(*p, nc * elem);
    if (!np) return pi_err(-ENOMEM, "out of memory: %zu elements of %zu bytes", nc, elem);
    *p = np;
    *cap = nc;
    return 0;
}

/* ---- growable byte buffer ------------------------------------------------ */

char *pi_buf_room(struct pi_buf *b, size_t k) {
    if (b->oom) return NULL;
    if (k + 1 > b->cap - b->n || !b->p) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc - b->n < k + 1) {
            if (nc > SIZE_MAX / 2) {
                b->oom = 1;
                return NULL;
            }
            nc *= 2;
        }
        char *np = pi_realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return NULL;
        }
        b->p = np;
        b->cap = nc;
    }
    return b->p + b->n;
}

void pi_buf_put(struct pi_buf *b, const void *s, size_t k) {
    char *d = pi_buf_room(b, k);
    if (!d) return;
    if (k) memcpy(d, s, k);
    b->n += k;
    b->p[b->n] = 0;
}

void pi_buf_printf(struct pi_buf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n <= 0) return;
    if ((size_t)n < sizeof tmp) {
        pi_buf_put(b, tmp, (size_t)n);
        return;
    }
    char *room = pi_buf_room(b, (size_t)n); /* longer: formatted again into the buffer (room keeps a NUL's byte) */
    if (!room) return;
    va_start(ap, fmt);
    vsnprintf(room, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

void pi_buf_free(struct pi_buf *b) {
    pi_free(b->p);
    memset(b, 0, sizeof *b);
}

int pi_buf_hand_out(struct pi_buf *b, char **out) {
    char *r = b->oom || !b->p ? NULL : malloc(b->n + 1);
    if (r) memcpy(r, b->p, b->n + 1);
    pi_buf_free(b);
    if (!r) return pi_err(-ENOMEM, "out of memory");
    *out = r;
    return 0;
}

/* ---- errors ------------------------------------------------------------- */

static _Thread_local char detail[1024];

int pi_err(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    pi_redact_text(detail, sizeof detail); /* no secret of a URL in any message */
    return code;
}

void pi_err_prefix(const char *prefix) {
    /* Build in a larger buffer (a long path plus a full detail), then keep
     * what fits. */
    char tmp[2 * sizeof detail + 8];
    if (!prefix || !*prefix) return;
    size_t pl = strnlen(prefix, sizeof detail);
    memcpy(tmp, prefix, pl);
    size_t n = pl;
    if (detail[0]) {
        memcpy(tmp + n, ": ", 2);
        n += 2;
        size_t dl = strnlen(detail, sizeof detail);
        memcpy(tmp + n, detail, dl);
        n += dl;
    }
    if (n >= sizeof detail) n = sizeof detail - 1;
    memcpy(detail, tmp, n);
    detail[n] = 0;
    pi_redact_text(detail, sizeof detail);
}

void pi_err_clear(void) { detail[0] = 0; }

const char *pagein_last_error_detail(void) { return detail; }

const char *pagein_strerror(int code) {
    switch (code) {
    case 0: return "success";
    case PAGEIN_E_TRUNCATED: return "truncated: input shorter than needed";
    case PAGEIN_E_BAD_MAGIC: return "unrecognised file format";
    case PAGEIN_E_HEADER_TOO_SMALL: return "header too small";
    case PAGEIN_E_HEADER_TOO_LARGE: return "header too large";
    case PAGEIN_E_HEADER_LENGTH: return "invalid header length";
    case PAGEIN_E_BAD_UTF8: return "invalid UTF-8";
    case PAGEIN_E_BAD_JSON: return "invalid header JSON";
    case PAGEIN_E_BAD_DTYPE: return "unknown or unsupported dtype";
    case PAGEIN_E_BAD_OFFSET: return "invalid tensor offsets";
    case PAGEIN_E_OVERFLOW: return "size overflow";
    case PAGEIN_E_BAD_TENSOR_INFO: return "tensor size disagrees with dtype and shape";
    case PAGEIN_E_MISALIGNED_SLICE: return "tensor is not a whole number of bytes";
    case PAGEIN_E_INCOMPLETE: return "data does not end at end of file";
    case PAGEIN_E_DUPLICATE: return "duplicate name";
    case PAGEIN_E_LIMIT: return "limit exceeded";
    case PAGEIN_E_NOT_FOUND: return "not found";
    case PAGEIN_E_BAD_VERSION: return "unsupported version";
    case PAGEIN_E_BAD_ALIGNMENT: return "invalid alignment";
    case PAGEIN_E_ENDIAN: return "unsupported byte order";
    case PAGEIN_E_BAD_TYPE: return "value has another type";
    case PAGEIN_E_UNSUPPORTED: return "unsupported feature";
    case PAGEIN_E_CHANGED: return "file changed since open";
    case PAGEIN_E_BAD_INDEX: return "inconsistent sharded index or split set";
    case PAGEIN_E_UNSAFE: return "refused: pickle global not allowlisted";
    case PAGEIN_E_BAD_ZIP: return "malformed zip container";
    case PAGEIN_E_BAD_PICKLE: return "malformed pickle";
    case PAGEIN_E_BAD_MANIFEST: return "malformed manifest";
    case PAGEIN_E_HASH_MISMATCH: return "data does not match manifest";
    case PAGEIN_E_MEMLOCK: return "mlock refused (RLIMIT_MEMLOCK)";
    case PAGEIN_E_BAD_DATASET: return "malformed dataset index";
    case PAGEIN_E_RANGE: return "request out of range";
    case PAGEIN_E_INVALID: return "invalid argument";
    case PAGEIN_E_CANCELLED: return "cancelled";
    case PAGEIN_E_REMOTE: return "remote source error";
    case PAGEIN_E_NO_CUDA: return "CUDA not available";
    case PAGEIN_E_CUDA: return "CUDA call failed";
    case PAGEIN_E_PEER: return "another rank failed or disagrees";
    case PAGEIN_E_FORKED: return "not usable after fork";
    case PAGEIN_E_NOT_MODEL: return "not a model file";
    case PAGEIN_E_FORMAT: return "malformed training-data file";
    default: break;
    }
    if (code < 0 && code > -4096) return strerror(-code);
    return "unknown error";
}

/* ---- arena -------------------------------------------------------------- */

struct pi_arena_chunk {
    struct pi_arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
};

void *pi_arena_alloc(struct pi_arena *a, size_t n) {
    n = (n + 7) & ~(size_t)7;
    struct pi_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        if (c && c->cap * 2 > cap && c->cap < (1u << 24)) cap = c->cap * 2;
        c = pi_malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
    }
    void *p = c->mem + c->used;
    c->used += n;
    return p;
}

char *pi_arena_strndup(struct pi_arena *a, const char *s, size_t n) {
    char *d = pi_arena_alloc(a, n + 1);
    if (!d) return NULL;
    if (n) memcpy(d, s, n);
    d[n] = 0;
    return d;
}

void pi_arena_free(struct pi_arena *a) {
    struct pi_arena_chunk *c = a->head;
    while (c) {
        struct pi_arena_chunk *n = c->next;
        pi_free(c);
        c = n;
    }
    a->head = NULL;
}

/* ---- version ------------------------------------------------------------ */

unsigned pagein_version(void) {
    return PAGEIN_VERSION_MAJOR * 10000 + PAGEIN_VERSION_MINOR * 100 + PAGEIN_VERSION_PATCH;
}

const char *pagein_version_string(void) { return PAGEIN_VERSION_STRING; }
