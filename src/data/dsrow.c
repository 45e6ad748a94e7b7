/* dsrow.c - what the dataset-format rows call (dsformat.h): type names,
 * a shard's columns, errors naming shard/group/sample/field, a name
 * index, and the cached index files. Below the table (dsformat.c), which
 * names every row: a row calls down here, never up into the table. */
#include "dsformat.h"
#include "../core/endian.h"
#include "../io/io.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

const char *pi_dstype_name(int t, unsigned w) {
    switch (t) {
    case PI_DT_NULL: return "null";
    case PI_DT_BOOL: return "bool";
    case PI_DT_INT: return w == 1 ? "int8" : w == 2 ? "int16" : w == 4 ? "int32" : w == 8 ? "int64" : "int?";
    case PI_DT_UINT: return w == 1 ? "uint8" : w == 2 ? "uint16" : w == 4 ? "uint32" : w == 8 ? "uint64" : "uint?";
    case PI_DT_FLOAT: return w == 2 ? "float16" : w == 4 ? "float32" : w == 8 ? "float64" : "float?";
    case PI_DT_UTF8: return "utf8";
    case PI_DT_BINARY: return "binary";
    case PI_DT_LIST: return "list";
    case PI_DT_STRUCT: return "struct";
    case PI_DT_MAP: return "map";
    }
    return "unknown";
}

void pi_ds_shard_set(struct pi_dsshard *sh, void *impl, struct pi_dscol *cols, size_t ncols, uint64_t nsamples) {
    sh->impl = impl;
    sh->cols = cols;
    sh->ncols = ncols;
    sh->nsamples = nsamples;
}

int pi_ds_err(const struct pi_dsshard *sh, int code, uint64_t group, uint64_t sample, const char *field,
              const char *fmt, ...) {
    char msg[768], where[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t n = 0;
    where[0] = 0;
    if (group != UINT64_MAX) n += (size_t)snprintf(where + n, sizeof where - n, ", group %" PRIu64, group);
    if (sample != UINT64_MAX && n < sizeof where)
        n += (size_t)snprintf(where + n, sizeof where - n, ", sample %" PRIu64, sample);
    if (field && n < sizeof where) snprintf(where + n, sizeof where - n, ", field '%.100s'", field);
    return pi_err(code, "%s%s: %s", sh && sh->name ? sh->name : "dataset", where, msg);
}

int pi_dsindex_add(struct pi_dsindex *ix, const char *name, size_t len, const void *meta) {
    if (ix->n == ix->cap) {
        size_t cap = ix->cap;
        FORWARD_IF(pi_grow((void **)&ix->names, &cap, ix->n + 1, sizeof *ix->names));
        size_t cap2 = ix->cap;
        if (pi_grow((void **)&ix->meta, &cap2, ix->n + 1, sizeof *ix->meta) < 0) {
            /* names grew, meta did not: keep cap at the old value */
            return -ENOMEM;
        }
        ix->cap = PI_MIN(cap, cap2);
    }
    char *s = pi_strndup(name, len);
    if (!s) return pi_err(-ENOMEM, "out of memory");
    ix->names[ix->n] = s;
    ix->meta[ix->n] = meta;
    ix->n++;
    return 0;
}

/* ---- cached indexes ---------------------------------------------------------
 * File: magic (8), u32 identity length, identity, u64 source size, u64
 * probe, payload. The identity of a local file is (device, inode, size,
 * mtime), which an in-place rewrite with its mtime restored keeps: the probe
 * adds the file's ctime (which no user can set back) and a hash of 16
 * pieces of 4 KiB spread over the shard (its first and last bytes among
 * them), read at every open that uses the cache (64 KiB: an index is
 * cached for shards of 1 MiB and more). */
static uint64_t cache_probe(const struct pi_dsshard *sh) {
    uint64_t h = 0xcbf29ce484222325ull, size = sh->src->size;
    struct stat st;
    if (sh->src->fd >= 0 && fstat(sh->src->fd, &st) == 0) {
        int64_t c[2] = {(int64_t)st.st_ctim.tv_sec, (int64_t)st.st_ctim.tv_nsec};
        const uint8_t *b = (const uint8_t *)c;
        for (size_t i = 0; i < sizeof c; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    }
    uint8_t piece[4096];
    const uint64_t np = 16, pl = PI_MIN((uint64_t)sizeof piece, size);
    for (uint64_t k = 0; k < np && pl; k++) {
        uint64_t off = (size - pl) / (np - 1) * k;
        if (k == np - 1) off = size - pl;
        if (pi_source_read(sh->src, piece, pl, off) < 0) return h ^ 1; /* no match: rebuilt */
        for (uint64_t i = 0; i < pl; i++) h = (h ^ piece[i]) * 0x100000001b3ull;
    }
    return h;
}

char *pi_ds_cache_path(const struct pi_dsshard *sh, const struct pi_dsopen *a, const char *tag) {
    if (a->flags & PI_DSOPEN_NO_CACHE) return NULL;
    const char *u = a->uri ? a->uri : sh->name;
    size_t n = strlen(u);
    char *p = NULL;
    if (!pi_source_is_remote(u) && sh->src->fd >= 0) {
        const char *slash = strrchr(u, '/');
        char dir[4096];
        if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - u), u);
        else snprintf(dir, sizeof dir, ".");
        if (access(dir[0] ? dir : "/", W_OK) == 0 && (p = pi_malloc(n + 12))) {
            memcpy(p, u, n);
            memcpy(p + n, ".pagein-idx", 12);
            return p;
        }
    }
    if (!a->cache_dir) return NULL;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)u[i]) * 0x100000001b3ull;
    size_t cl = strlen(a->cache_dir) + strlen(tag) + 48;
    if ((p = pi_malloc(cl))) snprintf(p, cl, "%s/%s-%016" PRIx64 ".pagein-idx", a->cache_dir, tag, h);
    return p;
}

int pi_ds_cache_read(const struct pi_dsshard *sh, const char *path, const char magic[8], uint8_t **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    const char *id = sh->src->identity;
    size_t il = strlen(id), head = 8 + 4 + il + 8 + 8;
    uint8_t *b = NULL;
    int rc = 0;
    /* Trusted only when it is ours or the shard owner's and nobody else can
     * write it: an index planted or edited by another user of a shared
     * directory would move sample boundaries (it is rebuilt and replaced). */
    struct stat ss;
    int owner_ok = 0;
    if (fstat(fd, &st) == 0)
        owner_ok = (st.st_uid == geteuid() || (sh->src->fd >= 0 && fstat(sh->src->fd, &ss) == 0 && st.st_uid == ss.st_uid)) &&
                   !(st.st_mode & 022);
    if (il && owner_ok && S_ISREG(st.st_mode) && (uint64_t)st.st_size >= head && (uint64_t)st.st_size <= (8ull << 30)) {
        if (!(b = pi_malloc((size_t)st.st_size))) rc = pi_err(-ENOMEM, "%s: out of memory", path);
        else if (pi_pread_full(fd, b, (uint64_t)st.st_size, 0) == 0) {
            uint32_t l = pi_le32(b + 8);
            uint64_t sz = pi_le64(b + 12 + il), pr = pi_le64(b + 20 + il);
            if (!memcmp(b, magic, 8) && l == il && !memcmp(b + 12, id, il) && sz == sh->src->size &&
                pr == cache_probe(sh)) {
                memmove(b, b + head, (size_t)st.st_size - head);
                *buf = b;
                *len = (size_t)st.st_size - head;
                b = NULL;
                rc = 1;
            }
        }
    }
    pi_free(b);
    close(fd);
    return rc;
}

void pi_ds_cache_write(const struct pi_dsshard *sh, const char *path, const char magic[8], const void *payload,
                       size_t len) {
    const char *id = sh->src->identity;
    size_t il = strlen(id);
    if (!il) return;
    /* The index holds the shard's sample keys: no more readable than the
     * shard (a remote one's: the owner only). A new file of our own, never
     * through a link planted at the temporary name (the shard's directory
     * may be shared): io/atomic.c's temporary is created O_EXCL. */
    struct stat st;
    mode_t mode = sh->src->fd >= 0 && fstat(sh->src->fd, &st) == 0 ? (st.st_mode & 0644) | 0600 : 0600;
    uint8_t h[12];
    memcpy(h, magic, 8);
    pi_st_le32(h + 8, (uint32_t)il);
    uint8_t sz[16];
    pi_st_le64(sz, sh->src->size);
    pi_st_le64(sz + 8, cache_probe(sh));
    struct iovec parts[4] = {{h, 12}, {(void *)id, il}, {sz, 16}, {(void *)payload, len}};
    (void)pi_atomic_put(AT_FDCWD, path, mode, parts, 4); /* a cache: no fsync, no error */
}
