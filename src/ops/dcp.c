/* dcp.c - torch Distributed Checkpoints (DCP) opened as a whole: the
 * .metadata (format/dcp_meta.c), every `__RANK_N.distcp` file through the
 * source seam (local files mapped, remote objects read blob by blob), items
 * listed, tensors assembled from their chunks in any dimension, slices that
 * read only the chunks they overlap, non-tensor items as their bytes, and
 * consolidation into one safetensors file (docs/FORMAT-DCP.md). */
#include "../format/dcp.h"
#include "../internal.h"
#include "../source/source.h"
#include "../io/io.h"
#include "../engine/engine.h"
#include "convert.h"
#include "dcp_conv.h"

#include <fcntl.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define META_MAX_BYTES (1ull << 30)

struct dfile {
    struct pi_source *src;
    const uint8_t *map; /* local files: the whole file mapped */
    size_t len;
};

/* A chunk's blob header, parsed once (the read and slice paths). */
struct bcache {
    int ready;
    int contiguous;
    uint64_t data_off, span;
    int64_t *strides; /* ndim (arena) */
};

struct pagein_dcp {
    char *dir;
    char *meta_path;
    struct pi_dcp_meta m;
    struct dfile *f;
    struct bcache *bc; /* one per chunk: bc[bbase[item] + chunk] */
    size_t *bbase;
    struct pi_arena arena;
    pthread_mutex_t mu; /* bc and arena */
};

/* A source URL names a checkpoint when its last part has no file suffix
 * and `<url>/.metadata` exists (one request). */
static int is_dcp_url(const char *path) {
    size_t l = strlen(path);
    while (l > 0 && path[l - 1] == '/') l--;
    const char *last = path + l;
    while (last > path && last[-1] != '/') last--;
    if (memchr(last, '.', (size_t)(path + l - last)) || l == 0) return 0;
    char *p = pi_path_join(path, PI_DCP_META_NAME);
    struct pi_source *s = NULL;
    int ok = p && pi_source_open(&s, p, 0) == 0;
    pi_source_close(s);
    pi_free(p);
    pi_err_clear();
    return ok;
}

int pagein_is_dcp_dir(const char *path) {
    if (!path) return 0;
    if (pi_source_is_remote(path)) return is_dcp_url(path);
    struct stat s;
    if (stat(path, &s) < 0 || !S_ISDIR(s.st_mode)) return 0;
    char *p = pi_path_join(path, PI_DCP_META_NAME);
    int ok = p && stat(p, &s) == 0 && S_ISREG(s.st_mode);
    pi_free(p);
    return ok;
}

void pagein_dcp_close(pagein_dcp *d) {
    if (!d) return;
    for (size_t i = 0; d->f && i < d->m.nfiles; i++) {
        if (d->f[i].map) munmap((void *)d->f[i].map, d->f[i].len);
        pi_source_close(d->f[i].src);
    }
    pi_free(d->f);
    pi_free(d->bc), pi_free(d->bbase);
    pi_arena_free(&d->arena);
    pthread_mutex_destroy(&d->mu);
    pi_dcp_meta_free(&d->m);
    pi_free(d->meta_path);
    pi_free(d->dir);
    pi_free(d);
}

static int read_meta(pagein_dcp *d) {
    struct pi_source *s;
    FORWARD_IF(pi_source_open(&s, d->meta_path, 0));
    int rc = 0;
    uint8_t *buf = NULL;
    if (s->size > META_MAX_BYTES) {
        rc = pi_err(PAGEIN_E_LIMIT, "%s: %llu bytes (limit %llu)", d->meta_path, (unsigned long long)s->size,
                    META_MAX_BYTES);
    } else if (!(buf = pi_malloc(s->size ? (size_t)s->size : 1))) {
        rc = pi_err(-ENOMEM, "%s: out of memory", d->meta_path);
    } else if ((rc = pi_source_read(s, buf, s->size, 0)) >= 0) {
        rc = pi_dcp_meta_parse(buf, (size_t)s->size, d->meta_path, &d->m);
    }
    pi_free(buf);
    pi_source_close(s);
    return rc < 0 ? rc : 0;
}

/* File i opened through its source (local files mapped, MADV_RANDOM). */
static int open_one(void *ctx, size_t i) {
    pagein_dcp *d = ctx;
    char *p = pi_path_join(d->dir, d->m.files[i]);
    RETURN_IF(!p, -ENOMEM, "out of memory");
    int rc = pi_source_open(&d->f[i].src, p, 0);
    pi_free(p);
    FORWARD_IF(rc);
    uint64_t size = d->f[i].src->size;
    if (d->f[i].src->fd >= 0 && size > 0) {
        void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, d->f[i].src->fd, 0);
        RETURN_IF(m == MAP_FAILED, -errno, "%s/%s: mmap: %s", d->dir, d->m.files[i], strerror(errno));
        d->f[i].map = m, d->f[i].len = (size_t)size;
        /* reads ask for their bytes (will_need): no read-around */
        (void)madvise(m, (size_t)size, MADV_RANDOM);
        /* the same for the range engine's reads (pagein_dcp_read_many):
         * no readahead past the spans asked for */
        (void)posix_fadvise(d->f[i].src->fd, 0, 0, POSIX_FADV_RANDOM);
    }
    return 0;
}

/* Every file opened: remote ones at once (each open is a round trip,
 * which one after the other would add up before the first byte). */
static int open_files(pagein_dcp *d) {
    d->f = pi_calloc(d->m.nfiles ? d->m.nfiles : 1, sizeof *d->f);
    uint64_t *sizes = pi_calloc(d->m.nfiles ? d->m.nfiles : 1, sizeof *sizes);
    int rc = 0;
    if (!d->f || !sizes) rc = pi_err(-ENOMEM, "out of memory");
    unsigned nt = pi_source_is_remote(d->dir) ? (unsigned)PI_MIN(d->m.nfiles, 16) : 1;
    if (rc == 0) rc = pi_parallel(nt ? nt : 1, d->m.nfiles, open_one, d);
    for (size_t i = 0; rc == 0 && i < d->m.nfiles; i++) sizes[i] = d->f[i].src->size;
    if (rc == 0) rc = pi_dcp_meta_check_files(&d->m, d->meta_path, sizes);
    pi_free(sizes);
    return rc;
}

int pagein_dcp_open(pagein_dcp **out, const char *dir) {
    pi_err_clear();
    if (!out || !dir) return pi_err(PAGEIN_E_INVALID, "pagein_dcp_open: NULL argument");
    pagein_dcp *d = pi_calloc(1, sizeof *d);
    if (!d) return pi_err(-ENOMEM, "out of memory");
    pi_dcp_meta_init(&d->m);
    pthread_mutex_init(&d->mu, NULL);
    int rc = 0;
    if (!(d->dir = pi_strndup(dir, strlen(dir))) || !(d->meta_path = pi_path_join(dir, PI_DCP_META_NAME)))
        rc = pi_err(-ENOMEM, "out of memory");
    if (rc == 0) rc = read_meta(d);
    if (rc == 0) rc = open_files(d);
    if (rc == 0) {
        size_t nc = 0;
        if (!(d->bbase = pi_calloc(d->m.n ? d->m.n : 1, sizeof *d->bbase))) rc = pi_err(-ENOMEM, "out of memory");
        for (size_t i = 0; rc == 0 && i < d->m.n; i++) d->bbase[i] = nc, nc += d->m.items[i].nchunks;
        if (rc == 0 && !(d->bc = pi_calloc(nc ? nc : 1, sizeof *d->bc))) rc = pi_err(-ENOMEM, "out of memory");
    }
    if (rc < 0) {
        pagein_dcp_close(d);
        return rc;
    }
    *out = d;
    return 0;
}

size_t pagein_dcp_item_count(const pagein_dcp *d) { return d ? d->m.n : 0; }

static uint64_t item_bytes(const struct pi_dcp_item *it) {
    if (it->is_bytes) return it->chunks[0].nbytes;
    return it->nelements * (pagein_dtype_get(it->dtype)->bits / 8); /* checked in pagein_dcp_item */
}

int pagein_dcp_item(const pagein_dcp *d, size_t i, pagein_dcp_item_info *info) {
    if (!d || !info || i >= d->m.n) return pi_err(PAGEIN_E_INVALID, "pagein_dcp_item: no item %zu", i);
    const struct pi_dcp_item *it = &d->m.items[i];
    memset(info, 0, sizeof *info);
    info->name = it->name;
    info->is_bytes = it->is_bytes;
    info->dtype = it->is_bytes ? PAGEIN_DTYPE_U8 : it->dtype;
    info->ndim = it->ndim;
    info->shape = it->size;
    info->nchunks = it->nchunks;
    if (!it->is_bytes) {
        uint64_t nb;
        FORWARD_IF(pagein_dtype_nbytes(it->dtype, it->nelements, &nb));
    }
    info->nbytes = item_bytes(it);
    return 0;
}

int pagein_dcp_chunk_count(const pagein_dcp *d, size_t i, uint32_t *n) {
    if (!d || !n || i >= d->m.n) return pi_err(PAGEIN_E_INVALID, "pagein_dcp_chunk_count: no item %zu", i);
    *n = d->m.items[i].nchunks;
    return 0;
}

int pagein_dcp_chunk(const pagein_dcp *d, size_t i, uint32_t j, uint32_t *ndim, const uint64_t **offsets,
                     const uint64_t **sizes) {
    if (!d || i >= d->m.n || j >= d->m.items[i].nchunks || !ndim || !offsets || !sizes)
        return pi_err(PAGEIN_E_INVALID, "pagein_dcp_chunk: no chunk %u of item %zu", j, i);
    *ndim = d->m.items[i].ndim;
    *offsets = d->m.items[i].chunks[j].off;
    *sizes = d->m.items[i].chunks[j].len;
    return 0;
}

int pagein_dcp_find(const pagein_dcp *d, const char *name) {
    const struct pi_dcp_item *it = d && name ? pi_dcp_meta_find(&d->m, name, strlen(name)) : NULL;
    if (!it) return pi_err(PAGEIN_E_NOT_FOUND, "no item '%s' in the checkpoint", name ? name : "(null)");
    return (int)(it - d->m.items);
}

/* The blob's bytes: a view of the mapping, or (remote) a copy read through
 * the source into *tmp (freed by the caller). */
static int blob_bytes(pagein_dcp *d, const struct pi_dcp_chunk *c, const uint8_t **p, uint8_t **tmp) {
    struct dfile *f = &d->f[c->file];
    *tmp = NULL;
    if (f->map) {
        *p = f->map + c->at;
        return 0;
    }
    RETURN_IF(c->nbytes > SIZE_MAX / 2, PAGEIN_E_LIMIT, "blob of %llu bytes", (unsigned long long)c->nbytes);
    *tmp = pi_malloc(c->nbytes ? (size_t)c->nbytes : 1);
    RETURN_IF(!*tmp, -ENOMEM, "out of memory for a blob of %llu bytes", (unsigned long long)c->nbytes);
    int rc = pi_source_read(f->src, *tmp, c->nbytes, c->at);
    if (rc < 0) {
        pi_free(*tmp);
        *tmp = NULL;
        return rc;
    }
    *p = *tmp;
    return 0;
}

/* The innermost dimensions of a box [lo, hi) that one memcpy can take:
 * dims m..nd-1 merge while each lower one steps exactly the run so far in
 * the source (sstride, elements) and in the destination (dstride); returns
 * m and the run's elements in *run. Source rows not stored contiguously
 * (a strided view) merge nothing. */
static uint32_t merge_run(uint32_t nd, const uint64_t *lo, const uint64_t *hi, const int64_t *sstride,
                          const uint64_t *dstride, uint64_t *run) {
    uint32_t m = nd - 1;
    *run = hi[m] - lo[m];
    if (sstride[m] != 1 || dstride[m] != 1) return m;
    while (m > 0 && (uint64_t)sstride[m - 1] == *run && dstride[m - 1] == *run) {
        *run *= hi[m - 1] - lo[m - 1];
        m--;
    }
    return m;
}

/* Copies the part of chunk c inside the box [start, start + count) of the
 * tensor into dst (the box, row-major): one memcpy per run of rows that
 * are contiguous in both the blob and dst (merge_run), not per row. */
static void copy_box(const struct pi_dcp_item *it, const struct pi_dcp_chunk *c, const struct pi_dcp_blob *b,
                     const uint8_t *data, uint64_t base, const uint64_t *start, const uint64_t *count, uint8_t *dst,
                     const uint64_t *dst_stride) {
    uint32_t nd = it->ndim, es = pagein_dtype_get(it->dtype)->bits / 8;
    if (nd == 0) {
        memcpy(dst, data, es);
        return;
    }
    uint64_t lo[PI_DCP_MAX_NDIM], hi[PI_DCP_MAX_NDIM], idx[PI_DCP_MAX_NDIM], dstride[PI_DCP_MAX_NDIM];
    for (uint32_t k = 0; k < nd; k++) {
        lo[k] = PI_MAX(start[k], c->off[k]);
        hi[k] = PI_MIN(start[k] + count[k], c->off[k] + c->len[k]);
        if (lo[k] >= hi[k]) return;
        idx[k] = lo[k];
    }
    dstride[nd - 1] = 1;
    for (uint32_t k = nd - 1; k-- > 0;) dstride[k] = dstride[k + 1] * count[k + 1];
    if (dst_stride) memcpy(dstride, dst_stride, nd * sizeof *dstride); /* a strided destination */
    uint64_t run;
    uint32_t m = merge_run(nd, lo, hi, b->strides, dstride, &run);
    for (;;) {
        uint64_t so = 0, doff = 0;
        for (uint32_t k = 0; k < nd; k++) {
            so += (idx[k] - c->off[k]) * (uint64_t)b->strides[k];
            doff += (idx[k] - start[k]) * dstride[k];
        }
        so -= base; /* data holds the chunk's elements from `base` on */
        if (b->strides[nd - 1] == 1 && dstride[nd - 1] == 1) {
            memcpy(dst + doff * es, data + so * es, run * es);
        } else {
            for (uint64_t e = 0; e < run; e++)
                memcpy(dst + (doff + e * dstride[nd - 1]) * es, data + (so + e * (uint64_t)b->strides[nd - 1]) * es, es);
        }
        uint32_t k = m; /* the odometer over the dims outside the run */
        while (k-- > 0) {
            if (++idx[k] < hi[k]) break;
            idx[k] = lo[k];
        }
        if (k == UINT32_MAX) return;
    }
}

struct chunk_job {
    pagein_dcp *d;
    const struct pi_dcp_item *it;
    const struct pi_dcp_chunk *c;
    const uint8_t *p;
    const uint64_t *start, *count;
    void *dst;
    int returned;
    int cached; /* b came from the cache: not parsed again */
    int mapped; /* p points into a file's mapping */
    struct pi_dcp_blob b;
};

/* Mapped files: asks the kernel for exactly the bytes of the chunk that
 * the box [start, start + count) reaches (from its first element to its
 * last), since the mapping is MADV_RANDOM (a fault reads one page, not the
 * device's read-around window): a slice reads what it needs, not the
 * other ranks' rows around it. */
static void will_need(const struct pi_dcp_item *it, const struct pi_dcp_chunk *c, const struct pi_dcp_blob *b,
                      const uint8_t *data, const uint64_t *start, const uint64_t *count) {
    uint64_t first = 0, last = 0, es = pagein_dtype_get(it->dtype)->bits / 8;
    for (uint32_t k = 0; k < it->ndim; k++) {
        uint64_t lo = PI_MAX(start[k], c->off[k]), hi = PI_MIN(start[k] + count[k], c->off[k] + c->len[k]);
        if (lo >= hi) return;
        first += (lo - c->off[k]) * (uint64_t)b->strides[k];
        last += (hi - 1 - c->off[k]) * (uint64_t)b->strides[k];
    }
    uintptr_t page = 4096, a = (uintptr_t)(data + first * es) & ~(page - 1);
    uintptr_t e = (uintptr_t)(data + (last + 1) * es);
    uint32_t nd = it->ndim;
    uint64_t run = nd ? PI_MIN(start[nd - 1] + count[nd - 1], c->off[nd - 1] + c->len[nd - 1]) -
                            PI_MAX(start[nd - 1], c->off[nd - 1])
                      : 1;
    if (nd < 2 || b->strides[nd - 1] != 1 || (uint64_t)b->strides[nd - 2] * es < 2 * page ||
        run * es * 2 > (uint64_t)b->strides[nd - 2] * es) {
        (void)madvise((void *)a, (size_t)(e - a), MADV_WILLNEED);
        return;
    }
    /* rows much longer than the part of them the box needs (a column
     * slice of row-major rows): each row's part alone, page-rounded */
    uint64_t lo[PI_DCP_MAX_NDIM], hi[PI_DCP_MAX_NDIM], idx[PI_DCP_MAX_NDIM];
    for (uint32_t k = 0; k < nd; k++) {
        lo[k] = PI_MAX(start[k], c->off[k]);
        hi[k] = PI_MIN(start[k] + count[k], c->off[k] + c->len[k]);
        idx[k] = lo[k];
    }
    for (;;) {
        uint64_t so = 0;
        for (uint32_t k = 0; k < nd; k++) so += (idx[k] - c->off[k]) * (uint64_t)b->strides[k];
        uintptr_t ra = (uintptr_t)(data + so * es) & ~(page - 1), re = (uintptr_t)(data + (so + run) * es);
        (void)madvise((void *)ra, (size_t)(re - ra), MADV_WILLNEED);
        uint32_t k = nd - 1;
        while (k-- > 0) {
            if (++idx[k] < hi[k]) break;
            idx[k] = lo[k];
        }
        if (k == UINT32_MAX) return;
    }
}

static int chunk_copy(void *ctx) {
    struct chunk_job *j = ctx;
    int rc = j->cached ? 0 : pi_dcp_blob_parse(j->p, (size_t)j->c->nbytes, &j->d->m, j->it, j->c, j->d->meta_path, &j->b);
    if (rc == 0 && j->dst && j->mapped) will_need(j->it, j->c, &j->b, j->p + j->b.data_off, j->start, j->count);
    if (rc == 0 && j->dst) copy_box(j->it, j->c, &j->b, j->p + j->b.data_off, 0, j->start, j->count, j->dst, NULL);
    j->returned = 1;
    return rc;
}

/* The cached header of item i's chunk k into b (1), or 0. */
static int cache_get(pagein_dcp *d, size_t i, uint32_t k, struct pi_dcp_blob *b) {
    const struct pi_dcp_item *it = &d->m.items[i];
    pthread_mutex_lock(&d->mu);
    const struct bcache *e = &d->bc[d->bbase[i] + k];
    int ok = e->ready;
    if (ok) {
        memset(b, 0, sizeof *b);
        b->dtype = it->dtype, b->ndim = it->ndim;
        for (uint32_t x = 0; x < it->ndim; x++) b->shape[x] = it->chunks[k].len[x], b->strides[x] = e->strides[x];
        b->data_off = e->data_off, b->span = e->span, b->contiguous = e->contiguous;
    }
    pthread_mutex_unlock(&d->mu);
    return ok;
}

/* Keeps a parsed header (outside any truncation guard: the arena grows). */
static void cache_put(pagein_dcp *d, size_t i, uint32_t k, const struct pi_dcp_blob *b) {
    const struct pi_dcp_item *it = &d->m.items[i];
    pthread_mutex_lock(&d->mu);
    struct bcache *e = &d->bc[d->bbase[i] + k];
    if (!e->ready) {
        int64_t *st = pi_arena_alloc(&d->arena, (it->ndim ? it->ndim : 1) * sizeof *st);
        if (st) { /* out of memory: the next read parses again */
            for (uint32_t x = 0; x < it->ndim; x++) st[x] = b->strides[x];
            e->strides = st, e->data_off = b->data_off, e->span = b->span, e->contiguous = b->contiguous;
            e->ready = 1;
        }
    }
    pthread_mutex_unlock(&d->mu);
}

int pagein_dcp_read_slice(pagein_dcp *d, size_t i, const uint64_t *start, const uint64_t *count, void *dst, size_t len) {
    pi_err_clear();
    if (!d || i >= d->m.n || !dst) return pi_err(PAGEIN_E_INVALID, "pagein_dcp_read_slice: bad argument");
    const struct pi_dcp_item *it = &d->m.items[i];
    RETURN_IF(it->is_bytes, PAGEIN_E_BAD_TYPE, "'%s' is a non-tensor item: read it with pagein_dcp_read", it->name);
    uint64_t n = 1, es = pagein_dtype_get(it->dtype)->bits / 8;
    RETURN_IF(!es, PAGEIN_E_BAD_DTYPE, "'%s': sub-byte dtype", it->name);
    for (uint32_t k = 0; k < it->ndim; k++) {
        RETURN_IF(!start || !count || start[k] > it->size[k] || count[k] > it->size[k] - start[k], PAGEIN_E_RANGE,
                  "'%s': slice outside dimension %u (size %llu)", it->name, k, (unsigned long long)it->size[k]);
        n *= count[k];
    }
    RETURN_IF(len < n * es, PAGEIN_E_RANGE, "'%s': the slice needs %llu bytes, the buffer has %zu", it->name,
              (unsigned long long)(n * es), len);
    if (n == 0) return 0;
    for (uint32_t j = 0; j < it->nchunks; j++) {
        const struct pi_dcp_chunk *c = &it->chunks[j];
        bool hit = c->nelements > 0;
        for (uint32_t k = 0; k < it->ndim && hit; k++)
            hit = c->off[k] < start[k] + count[k] && start[k] < c->off[k] + c->len[k];
        if (!hit) continue; /* only the chunks the slice overlaps are read */
        const uint8_t *p;
        uint8_t *tmp;
        FORWARD_IF(blob_bytes(d, c, &p, &tmp));
        struct chunk_job cj = {d, it, c, p, start, count, dst, 0, 0, !tmp, {0}};
        cj.cached = cache_get(d, i, j, &cj.b);
        int rc;
        if (tmp) {
            rc = chunk_copy(&cj);
        } else {
            /* a file truncated under the mapping raises SIGBUS in the parse
             * or the copy: both run under the truncation guard, and the
             * allocation journal frees what an abandoned parse made
             * (docs/SAFETY.md), as file/file.c does for headers */
            struct dfile *f = &d->f[c->file];
            struct pi_journal jn;
            pi_journal_begin(&jn);
            rc = pi_guard_call(f->map, f->len, f->src->name, 0, f->src->fd, chunk_copy, &cj);
            pi_journal_end(&jn, !cj.returned);
        }
        pi_free(tmp);
        FORWARD_IF(rc);
        if (!cj.cached) cache_put(d, i, j, &cj.b);
    }
    return 0;
}

int pagein_dcp_view(pagein_dcp *d, size_t i, const void **data) {
    pi_err_clear();
    if (!d || i >= d->m.n || !data) return pi_err(PAGEIN_E_INVALID, "pagein_dcp_view: bad argument");
    const struct pi_dcp_item *it = &d->m.items[i];
    RETURN_IF(it->is_bytes, PAGEIN_E_BAD_TYPE, "'%s' is a non-tensor item: read it with pagein_dcp_read", it->name);
    const struct pi_dcp_chunk *c = &it->chunks[0];
    struct dfile *f = it->nchunks == 1 ? &d->f[c->file] : NULL;
    RETURN_IF(!f || !f->map, PAGEIN_E_UNSUPPORTED, "'%s': %s: read it with pagein_dcp_read", it->name,
              f ? "its file is not mapped (a source URL)" : "stored in several chunks");
    struct chunk_job cj = {d, it, c, f->map + c->at, NULL, NULL, NULL, 0, 0, 1, {0}};
    cj.cached = cache_get(d, i, 0, &cj.b);
    if (!cj.cached) {
        struct pi_journal jn;
        pi_journal_begin(&jn);
        int rc = pi_guard_call(f->map, f->len, f->src->name, 0, f->src->fd, chunk_copy, &cj);
        pi_journal_end(&jn, !cj.returned);
        FORWARD_IF(rc);
        cache_put(d, i, 0, &cj.b);
    }
    RETURN_IF(!cj.b.contiguous, PAGEIN_E_UNSUPPORTED, "'%s': stored as a strided view: read it with pagein_dcp_read",
              it->name);
    *data = f->map + c->at + cj.b.data_off;
    return 0;
}

int pagein_dcp_read(pagein_dcp *d, size_t i, void *dst, size_t len) {
    if (!d || i >= d->m.n || !dst) return pi_err(PAGEIN_E_INVALID, "pagein_dcp_read: bad argument");
    const struct pi_dcp_item *it = &d->m.items[i];
    if (it->is_bytes) {
        const struct pi_dcp_chunk *c = &it->chunks[0];
        RETURN_IF(len < c->nbytes, PAGEIN_E_RANGE, "'%s': %llu bytes, the buffer has %zu", it->name,
                  (unsigned long long)c->nbytes, len);
        const uint8_t *p;
        uint8_t *tmp;
        FORWARD_IF(blob_bytes(d, c, &p, &tmp));
        int rc = 0;
        if (tmp) memcpy(dst, p, (size_t)c->nbytes);
        else rc = pi_guard_copy(dst, p, (size_t)c->nbytes, d->f[c->file].src->name, c->at, d->f[c->file].src->fd);
        pi_free(tmp);
        return rc;
    }
    uint64_t zero[PI_DCP_MAX_NDIM] = {0};
    return pagein_dcp_read_slice(d, i, zero, it->size, dst, len);
}

/* ---- many reads of one plan, one engine run ------------------------------
 *
 * Every (request, chunk it overlaps) pair is one span; spans are sorted by
 * file and offset so that neighbours coalesce, and the engine streams them
 * (many in flight) to a consumer that copies each span's part of its box
 * into the caller's buffer. A span larger than one engine request comes in
 * pieces and is gathered first. */

enum { RM_BYTES, RM_BOX, RM_BLOB, RM_ROW };
#define RM_POOL 24

struct rm_ent {
    struct pi_span sp;
    size_t req;
    uint32_t chunk;
    int kind;      /* RM_BYTES: a non-tensor item; RM_BOX: the box's bytes (header cached); RM_BLOB: the whole blob;
                      RM_ROW: one row of the box, stored contiguously, at dst + base */
    uint64_t base; /* RM_BOX: the chunk's element at the span's first byte; RM_ROW: the row's byte offset in dst */
    uint8_t *g;    /* pieces gathered */
    uint64_t got;
    int dup;       /* RM_BLOB or RM_BYTES of a later request for the same blob: copied from its leader's read */
};

struct rmany {
    pagein_dcp *d;
    const pagein_dcp_request *reqs;
    const uint64_t **st, **ct; /* per request: the box (NULL args made whole) */
    const uint64_t *const *ds; /* per request: destination strides (NULL: the box row-major) */
    struct rm_ent *e;
    size_t ne, cap;
    size_t *lead; /* engine span -> its entry in e (followers, dup, right after it) */
    /* gather buffers kept for the next blob (the consumer is one thread):
     * fresh memory costs a page fault per page, which on a busy machine
     * took longer than the network did */
    uint8_t *free_g[RM_POOL];
    size_t free_cap[RM_POOL], nfree;
    size_t *gcap; /* per entry: its g's capacity */
};

static uint8_t *rm_gbuf(struct rmany *r, size_t need, size_t *cap) {
    for (size_t k = 0; k < r->nfree; k++)
        if (r->free_cap[k] >= need) {
            uint8_t *b = r->free_g[k];
            *cap = r->free_cap[k];
            r->free_g[k] = r->free_g[--r->nfree], r->free_cap[k] = r->free_cap[r->nfree];
            return b;
        }
    uint8_t *b = pi_malloc(need ? need : 1);
    *cap = b ? need : 0;
    return b;
}

static void rm_gput(struct rmany *r, uint8_t *b, size_t cap) {
    if (!b) return;
    if (r->nfree == RM_POOL) { /* full: the smallest goes */
        size_t m = 0;
        for (size_t k = 1; k < r->nfree; k++)
            if (r->free_cap[k] < r->free_cap[m]) m = k;
        if (r->free_cap[m] >= cap) {
            pi_free(b);
            return;
        }
        pi_free(r->free_g[m]);
        r->free_g[m] = b, r->free_cap[m] = cap;
        return;
    }
    r->free_g[r->nfree] = b, r->free_cap[r->nfree++] = cap;
}

static struct rm_ent *rm_push(struct rmany *r) {
    if (r->ne == r->cap) {
        size_t c = r->cap ? r->cap * 2 : 64;
        struct rm_ent *e = c > SIZE_MAX / sizeof *e ? NULL : pi_realloc(r->e, c * sizeof *e);
        if (!e) return NULL;
        r->e = e, r->cap = c;
    }
    memset(&r->e[r->ne], 0, sizeof *r->e);
    return &r->e[r->ne++];
}

static int rm_copy(struct rmany *r, struct rm_ent *x, const uint8_t *p) {
    const pagein_dcp_request *q = &r->reqs[x->req];
    const struct pi_dcp_item *it = &r->d->m.items[q->item];
    const struct pi_dcp_chunk *c = &it->chunks[x->chunk];
    struct pi_dcp_blob b;
    if (x->kind == RM_BLOB) {
        FORWARD_IF(pi_dcp_blob_parse(p, (size_t)c->nbytes, &r->d->m, it, c, r->d->meta_path, &b));
        cache_put(r->d, q->item, x->chunk, &b);
        copy_box(it, c, &b, p + b.data_off, 0, r->st[x->req], r->ct[x->req], q->dst, r->ds ? r->ds[x->req] : NULL);
        return 0;
    }
    RETURN_IF(!cache_get(r->d, q->item, x->chunk, &b), PAGEIN_E_INVALID, "'%s': chunk %u: header not cached",
              it->name, x->chunk);
    copy_box(it, c, &b, p, x->base, r->st[x->req], r->ct[x->req], q->dst, r->ds ? r->ds[x->req] : NULL);
    return 0;
}

static int rm_consume(void *arg, size_t s, uint64_t off, const void *data, uint64_t len) {
    struct rmany *r = arg;
    size_t k = r->lead[s];
    struct rm_ent *x = &r->e[k];
    uint64_t total = x->sp.len;
    if (x->kind == RM_BYTES || x->kind == RM_ROW) {
        for (size_t j = k; j < r->ne && (j == k || r->e[j].dup); j++) /* a bytes item asked for twice: read once */
            memcpy((uint8_t *)r->reqs[r->e[j].req].dst + (x->kind == RM_ROW ? x->base : 0) + off, data, (size_t)len);
        return 0;
    }
    const uint8_t *p = data;
    if (off != 0 || len != total) {
        if (!x->g && !(x->g = rm_gbuf(r, (size_t)total, &r->gcap[k])))
            return pi_err(-ENOMEM, "out of memory for %llu bytes", (unsigned long long)total);
        memcpy(x->g + off, data, (size_t)len);
        if ((x->got += len) < total) return 0;
        p = x->g;
    }
    int rc = rm_copy(r, x, p);
    for (size_t j = k + 1; rc == 0 && j < r->ne && r->e[j].dup; j++) rc = rm_copy(r, &r->e[j], p); /* same blob */
    rm_gput(r, x->g, r->gcap[k]);
    x->g = NULL;
    return rc;
}

static int rm_cmp(const void *a, const void *b) {
    const struct rm_ent *ea = a, *eb = b;
    const struct pi_span *x = &ea->sp, *y = &eb->sp;
    if (x->src != y->src) return x->src < y->src ? -1 : 1;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return (ea->req > eb->req) - (ea->req < eb->req);
}

/* The spans of chunk j for request k's box: of a chunk whose header is
 * known (a local file's header parsed here from the mapping), the box's
 * bytes only: one span per run of rows contiguous in both the blob and
 * the destination (merge_run: a row split or whole chunk is one span, a
 * column split one per row, a box of a 3-D or 4-D chunk one per run of
 * whole rows), or from its first byte to its last for a strided view or
 * more than RM_MAX_ROWS runs; else the whole blob. */
#define RM_MAX_ROWS (1u << 20)
static int rm_span(struct rmany *r, size_t k, uint32_t j) {
    pagein_dcp *d = r->d;
    size_t item = r->reqs[k].item;
    const uint64_t *start = r->st[k], *count = r->ct[k];
    const struct pi_dcp_item *it = &d->m.items[item];
    const struct pi_dcp_chunk *c = &it->chunks[j];
    struct dfile *f = &d->f[c->file];
    struct pi_dcp_blob b;
    int known = cache_get(d, item, j, &b);
    if (!known && f->map) {
        struct chunk_job cj = {d, it, c, f->map + c->at, NULL, NULL, NULL, 0, 0, 1, {0}};
        struct pi_journal jn;
        pi_journal_begin(&jn);
        int rc = pi_guard_call(f->map, f->len, f->src->name, 0, f->src->fd, chunk_copy, &cj);
        pi_journal_end(&jn, !cj.returned);
        FORWARD_IF(rc);
        cache_put(d, item, j, &cj.b);
        known = cache_get(d, item, j, &b);
    }
    struct rm_ent *x;
    if (!known) {
        RETURN_IF(!(x = rm_push(r)), -ENOMEM, "out of memory for the plan");
        *x = (struct rm_ent){{c->file, c->at, c->nbytes, NULL}, k, j, RM_BLOB, 0, NULL, 0, 0};
        return 0;
    }
    uint32_t nd = it->ndim;
    uint64_t first = 0, last = 0, es = pagein_dtype_get(it->dtype)->bits / 8, rows = 1;
    uint64_t lo[PI_DCP_MAX_NDIM], hi[PI_DCP_MAX_NDIM], idx[PI_DCP_MAX_NDIM], dstride[PI_DCP_MAX_NDIM];
    for (uint32_t a = 0; a < nd; a++) {
        lo[a] = PI_MAX(start[a], c->off[a]), hi[a] = PI_MIN(start[a] + count[a], c->off[a] + c->len[a]);
        idx[a] = lo[a];
        first += (lo[a] - c->off[a]) * (uint64_t)b.strides[a];
        last += (hi[a] - 1 - c->off[a]) * (uint64_t)b.strides[a];
    }
    uint64_t run = 0;
    uint32_t m = 0;
    if (nd > 0) {
        dstride[nd - 1] = 1;
        for (uint32_t a = nd - 1; a-- > 0;) dstride[a] = dstride[a + 1] * count[a + 1];
        if (r->ds && r->ds[k]) memcpy(dstride, r->ds[k], nd * sizeof *dstride);
        m = merge_run(nd, lo, hi, b.strides, dstride, &run);
        rows = 1;
        for (uint32_t a = 0; a < m; a++) rows *= hi[a] - lo[a];
        run *= es;
    }
    if (nd == 0 || !b.contiguous || rows > RM_MAX_ROWS || dstride[nd - 1] != 1) {
        RETURN_IF(!(x = rm_push(r)), -ENOMEM, "out of memory for the plan");
        *x = (struct rm_ent){{c->file, c->at + b.data_off + first * es, (last - first + 1) * es, NULL}, k, j, RM_BOX,
                             first, NULL, 0, 0};
        return 0;
    }
    for (;;) {
        uint64_t so = 0, doff = 0;
        for (uint32_t a = 0; a < nd; a++) {
            so += (idx[a] - c->off[a]) * (uint64_t)b.strides[a];
            doff += (idx[a] - start[a]) * dstride[a];
        }
        RETURN_IF(!(x = rm_push(r)), -ENOMEM, "out of memory for the plan");
        *x = (struct rm_ent){{c->file, c->at + b.data_off + so * es, run, NULL}, k, j, RM_ROW, doff * es, NULL, 0, 0};
        uint32_t a = m; /* the odometer over the dims outside the run */
        while (a-- > 0) {
            if (++idx[a] < hi[a]) break;
            idx[a] = lo[a];
        }
        if (a == UINT32_MAX) return 0;
    }
}

/* Checks request q; its box's bytes into *need, the spans it makes into *ns. */
static int rm_check(pagein_dcp *d, const pagein_dcp_request *q, size_t k, const uint64_t *ds, const uint64_t **st,
                    const uint64_t **ct, uint64_t *need) {
    static const uint64_t zero[PI_DCP_MAX_NDIM];
    RETURN_IF(q->item >= d->m.n, PAGEIN_E_INVALID, "pagein_dcp_read_many: request %zu: no item %zu", k, q->item);
    const struct pi_dcp_item *it = &d->m.items[q->item];
    if (it->is_bytes) {
        *need = it->chunks[0].nbytes;
        RETURN_IF(q->len < *need, PAGEIN_E_RANGE, "'%s': %llu bytes, the buffer has %zu", it->name,
                  (unsigned long long)*need, q->len);
        RETURN_IF(*need && !q->dst, PAGEIN_E_INVALID, "'%s': no buffer", it->name);
        return 0;
    }
    const uint64_t *start = q->start ? q->start : zero, *count = q->count ? q->count : it->size;
    RETURN_IF(!q->start != !q->count, PAGEIN_E_INVALID, "'%s': start and count go together", it->name);
    uint64_t n = 1, es = pagein_dtype_get(it->dtype)->bits / 8;
    RETURN_IF(!es, PAGEIN_E_BAD_DTYPE, "'%s': sub-byte dtype", it->name);
    for (uint32_t a = 0; a < it->ndim; a++) {
        RETURN_IF(start[a] > it->size[a] || count[a] > it->size[a] - start[a], PAGEIN_E_RANGE,
                  "'%s': slice outside dimension %u (size %llu)", it->name, a, (unsigned long long)it->size[a]);
        n *= count[a];
    }
    *need = n * es;
    uint64_t reach = *need; /* the destination's bytes up to the box's last element */
    if (ds && n) {
        uint64_t last = 0;
        for (uint32_t a = 0; a < it->ndim; a++) {
            uint64_t t;
            RETURN_IF(pi_mul_overflow(count[a] - 1, ds[a], &t) || pi_add_overflow(last, t, &last), PAGEIN_E_OVERFLOW,
                      "'%s': destination strides overflow", it->name);
        }
        RETURN_IF(pi_add_overflow(last, 1, &last) || pi_mul_overflow(last, es, &reach), PAGEIN_E_OVERFLOW,
                  "'%s': destination strides overflow", it->name);
    }
    RETURN_IF(q->len < reach, PAGEIN_E_RANGE, "'%s': the slice needs %llu bytes, the buffer has %zu", it->name,
              (unsigned long long)reach, q->len);
    RETURN_IF(*need && !q->dst, PAGEIN_E_INVALID, "'%s': no buffer", it->name);
    *st = start, *ct = count;
    return 0;
}

int pagein_dcp_read_many(pagein_dcp *d, const pagein_dcp_request *reqs, size_t n, pagein_dcp_read_stats *stats) {
    return pagein_dcp_read_many_strided(d, reqs, n, NULL, stats);
}

int pagein_dcp_read_many_strided(pagein_dcp *d, const pagein_dcp_request *reqs, size_t n,
                                 const uint64_t *const *ds, pagein_dcp_read_stats *stats) {
    pi_err_clear();
    if (stats) memset(stats, 0, sizeof *stats);
    if (!d || (n && !reqs)) return pi_err(PAGEIN_E_INVALID, "pagein_dcp_read_many: NULL argument");
    struct rmany r = {.d = d, .reqs = reqs, .st = pi_calloc(n ? n : 1, sizeof *r.st), .ct = pi_calloc(n ? n : 1, sizeof *r.ct),
                      .ds = ds};
    uint64_t need = 0;
    int rc = !r.st || !r.ct ? pi_err(-ENOMEM, "out of memory") : 0;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        uint64_t nb = 0;
        rc = rm_check(d, &reqs[k], k, ds ? ds[k] : NULL, &r.st[k], &r.ct[k], &nb);
        if (rc == 0 && pi_add_overflow(need, nb, &need))
            rc = pi_err(PAGEIN_E_OVERFLOW, "pagein_dcp_read_many: too many bytes");
    }
    for (size_t k = 0; rc == 0 && k < n; k++) {
        const struct pi_dcp_item *it = &d->m.items[reqs[k].item];
        if (it->is_bytes) {
            const struct pi_dcp_chunk *c = &it->chunks[0];
            struct rm_ent *x = c->nbytes ? rm_push(&r) : NULL;
            if (c->nbytes && !x) rc = pi_err(-ENOMEM, "out of memory for the plan");
            else if (x) *x = (struct rm_ent){{c->file, c->at, c->nbytes, NULL}, k, 0, RM_BYTES, 0, NULL, 0, 0};
            continue;
        }
        const uint64_t *start = r.st[k], *count = r.ct[k];
        for (uint32_t j = 0; rc == 0 && j < it->nchunks; j++) {
            const struct pi_dcp_chunk *c = &it->chunks[j];
            bool hit = c->nelements > 0;
            for (uint32_t a = 0; a < it->ndim && hit; a++)
                hit = count[a] && c->off[a] < start[a] + count[a] && start[a] < c->off[a] + c->len[a];
            if (hit) rc = rm_span(&r, k, j);
        }
    }
    size_t s = 0;
    struct pi_span *spans = NULL;
    struct pi_source **srcs = NULL;
    if (rc == 0 && (!(spans = pi_calloc(r.ne ? r.ne : 1, sizeof *spans)) || !(r.lead = pi_calloc(r.ne ? r.ne : 1, sizeof *r.lead)) ||
                    !(r.gcap = pi_calloc(r.ne ? r.ne : 1, sizeof *r.gcap)) ||
                    !(srcs = pi_calloc(d->m.nfiles ? d->m.nfiles : 1, sizeof *srcs))))
        rc = pi_err(-ENOMEM, "out of memory for %zu spans", r.ne);
    struct pi_engine_stats est = {0};
    if (rc == 0 && r.ne) {
        qsort(r.e, r.ne, sizeof *r.e, rm_cmp);
        /* a whole blob (a header not known yet) or a bytes item that several
         * requests need is read once: the later ones follow the first */
        for (size_t k = 0; k < r.ne; k++) {
            const struct rm_ent *x = &r.e[k], *pv = k ? &r.e[k - 1] : NULL;
            if (pv && (x->kind == RM_BLOB || x->kind == RM_BYTES) && pv->kind == x->kind && pv->sp.src == x->sp.src &&
                pv->sp.off == x->sp.off && pv->sp.len == x->sp.len) {
                r.e[k].dup = 1;
                continue;
            }
            r.lead[s] = k;
            spans[s++] = x->sp;
        }
        for (size_t f = 0; f < d->m.nfiles; f++) srcs[f] = d->f[f].src;
        /* gaps up to a page bridged: the zip headers between neighbouring
         * blobs, not the other ranks' parts of split rows */
        struct pi_engine_opts o = {.deliver = PI_DELIVER_STREAM, .max_gap = 4096, .consume = rm_consume, .arg = &r};
        rc = pi_engine_run(srcs, d->m.nfiles, spans, s, &o, &est);
    }
    for (size_t k = 0; k < r.ne; k++) pi_free(r.e[k].g);
    if (rc == 0 && stats) {
        stats->runs = s > 0, stats->spans = s, stats->requests = est.requests;
        stats->bytes_read = est.bytes, stats->bytes_needed = need;
    }
    for (size_t k = 0; k < r.nfree; k++) pi_free(r.free_g[k]);
    pi_free(r.st), pi_free(r.ct), pi_free(r.e), pi_free(r.lead), pi_free(r.gcap), pi_free(spans), pi_free(srcs);
    return rc;
}

/* ---- consolidation into safetensors, through the range engine ------------
 *
 * Every blob of every tensor is one span of one engine run (ops/dcp_conv.c:
 * coalesced, many requests in flight, a bounded ring, double-buffered
 * against the writer); the piece function below parses each blob's header
 * once and copies its chunk into the tensor, or hands a tensor stored in
 * one row-major chunk over as its blob. */

struct cv_t {
    const struct pi_dcp_item *it;
    size_t item;
    uint64_t nbytes;
    size_t s0, s1; /* its spans in the plan: [s0, s1) */
};

struct conv {
    pagein_dcp *d;
    const struct cv_t *t; /* in the writer's order */
    const size_t *span_t;   /* span -> position in t */
    const uint32_t *span_c; /* span -> chunk index */
};

/* The writer's order within a file (safetensors_write.c): dtype by the
 * crate's order descending, then the name bytewise. */
static int wr_cmp(const void *a, const void *b) {
    const struct pi_dcp_item *x = ((const struct cv_t *)a)->it, *y = ((const struct cv_t *)b)->it;
    uint32_t ox = pagein_dtype_get(x->dtype)->st_order, oy = pagein_dtype_get(y->dtype)->st_order;
    if (ox != oy) return ox > oy ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* One whole blob: parsed once, its chunk copied into the tensor (or, when
 * whole_ok and stored row-major, the blob is the tensor). */
static int cv_piece(void *arg, struct pi_dcpc *g, size_t span, const uint8_t *p, int whole_ok, const uint8_t **data) {
    struct conv *c = arg;
    pagein_dcp *d = c->d;
    const struct cv_t *t = &c->t[c->span_t[span]];
    const struct pi_dcp_item *it = &d->m.items[t->item];
    const struct pi_dcp_chunk *ch = &it->chunks[c->span_c[span]];
    struct pi_dcp_blob b;
    FORWARD_IF(pi_dcp_blob_parse(p, (size_t)ch->nbytes, &d->m, it, ch, d->meta_path, &b));
    if (whole_ok && b.contiguous) {
        *data = p + b.data_off;
        return 0;
    }
    uint8_t *tb = pi_dcpc_tbuf(g);
    if (!tb) return -ENOMEM;
    uint64_t zero[PI_DCP_MAX_NDIM] = {0};
    copy_box(it, ch, &b, p + b.data_off, 0, zero, it->size, tb, NULL);
    return 0;
}

/* Shards in state-dict order: a new one when the next tensor would
 * overflow the current one (a bigger tensor gets one of its own). */
static uint32_t dcp_shards(const struct cv_t *t, size_t nt, uint64_t max, uint32_t *shard) {
    uint32_t k = 0;
    uint64_t cur = 0;
    for (size_t i = 0; i < nt; i++) {
        if (max && cur && cur + t[i].nbytes > max) k++, cur = 0;
        shard[i] = k;
        cur += t[i].nbytes;
    }
    return k + 1;
}

struct cv_state {
    struct cv_t *sd;       /* tensors in state-dict order */
    struct cv_t *t;        /* in the writer's order */
    uint32_t *shard;       /* per sd */
    size_t *ord;
    pagein_write_tensor *w;
    size_t *pos; /* per sd: its position in t */
    struct pi_span *spans;
    size_t *span_t;
    uint32_t *span_c;
    struct pi_source **srcs;
};

static void cv_state_free(struct cv_state *s) {
    pi_free(s->sd), pi_free(s->t), pi_free(s->shard), pi_free(s->ord), pi_free(s->w), pi_free(s->pos);
    pi_free(s->spans), pi_free(s->span_t), pi_free(s->span_c), pi_free(s->srcs);
}

/* The tensors, their shards, the writer's order and the plan. */
static int cv_prepare(pagein_dcp *d, uint64_t max_shard, struct cv_state *s, size_t *ntp, uint32_t *nshardsp,
                      size_t *nspansp, uint64_t *total, uint64_t *bound) {
    size_t n = d->m.n, nt = 0, nchunks = 0;
    for (size_t i = 0; i < n; i++)
        if (!d->m.items[i].is_bytes) nt++, nchunks += d->m.items[i].nchunks;
    size_t a = nt ? nt : 1;
    s->sd = pi_calloc(a, sizeof *s->sd), s->t = pi_calloc(a, sizeof *s->t), s->shard = pi_calloc(a, sizeof *s->shard);
    s->ord = pi_calloc(a, sizeof *s->ord), s->w = pi_calloc(a, sizeof *s->w), s->pos = pi_calloc(a, sizeof *s->pos);
    s->spans = pi_calloc(nchunks ? nchunks : 1, sizeof *s->spans);
    s->span_t = pi_calloc(nchunks ? nchunks : 1, sizeof *s->span_t);
    s->span_c = pi_calloc(nchunks ? nchunks : 1, sizeof *s->span_c);
    s->srcs = pi_calloc(d->m.nfiles ? d->m.nfiles : 1, sizeof *s->srcs);
    RETURN_IF(!s->sd || !s->t || !s->shard || !s->ord || !s->w || !s->pos || !s->spans || !s->span_t || !s->span_c ||
                  !s->srcs,
              -ENOMEM, "out of memory");
    for (size_t f = 0; f < d->m.nfiles; f++) s->srcs[f] = d->f[f].src;
    *total = 0, *bound = 4096 + 64;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const struct pi_dcp_item *it = &d->m.items[i];
        if (it->is_bytes) continue;
        const pagein_dtype_info *di = pagein_dtype_get(it->dtype);
        RETURN_IF(!di || !(di->flags & PAGEIN_DTYPE_F_SAFETENSORS) || di->bits % 8, PAGEIN_E_BAD_DTYPE,
                  "%s: '%s' has type %s, which safetensors cannot hold", d->meta_path, it->name, di ? di->name : "?");
        uint64_t nb;
        FORWARD_IF(pagein_dtype_nbytes(it->dtype, it->nelements, &nb));
        RETURN_IF(nb > SIZE_MAX / 2, PAGEIN_E_LIMIT, "'%s': %llu bytes", it->name, (unsigned long long)nb);
        s->sd[k] = (struct cv_t){it, i, nb, 0, 0};
        s->ord[k] = k;
        RETURN_IF(pi_add_overflow(*total, nb, total), PAGEIN_E_OVERFLOW, "the output's size overflows 64 bits");
        *bound += 6 * it->name_len + 96 + 24 * (uint64_t)it->ndim;
        k++;
    }
    RETURN_IF(pi_add_overflow(*bound, *total, bound), PAGEIN_E_OVERFLOW, "the output's size overflows 64 bits");
    uint32_t nshards = dcp_shards(s->sd, nt, max_shard, s->shard);
    /* the writer's order: shard by shard, each sorted as the writer sorts */
    size_t p = 0;
    for (uint32_t sh = 0; sh < nshards; sh++) {
        size_t p0 = p;
        for (size_t i = 0; i < nt; i++)
            if (s->shard[i] == sh) s->t[p++] = s->sd[i];
        qsort(s->t + p0, p - p0, sizeof *s->t, wr_cmp);
    }
    size_t ns = 0;
    for (size_t q = 0; q < nt; q++) {
        const struct pi_dcp_item *it = &d->m.items[s->t[q].item];
        s->t[q].s0 = ns;
        for (uint32_t j = 0; j < it->nchunks && s->t[q].nbytes; j++) {
            const struct pi_dcp_chunk *ch = &it->chunks[j];
            if (!ch->nelements) continue;
            s->spans[ns] = (struct pi_span){ch->file, ch->at, ch->nbytes, NULL};
            s->span_t[ns] = q, s->span_c[ns] = j;
            ns++;
        }
        s->t[q].s1 = ns;
    }
    *ntp = nt, *nshardsp = nshards, *nspansp = ns;
    return 0;
}

int pagein_dcp_convert(const char *dir, const char *out, const pagein_convert_opts *opts,
                       pagein_dcp_convert_stats *stats) {
    pi_err_clear();
    if (!dir || !out) return pi_err(PAGEIN_E_INVALID, "pagein_dcp_convert: NULL argument");
    pagein_convert_opts o = PAGEIN_CONVERT_OPTS_INIT;
    FORWARD_IF(pi_opts_in(&o, sizeof o, opts, "pagein_dcp_convert"));
    RETURN_IF(o.dtype != PAGEIN_DTYPE_INVALID || o.dequantize != PAGEIN_DTYPE_INVALID, PAGEIN_E_UNSUPPORTED,
              "%s: casting a torch Distributed Checkpoint is not supported", dir);
    pagein_dcp *d;
    FORWARD_IF(pagein_dcp_open(&d, dir));
    struct cv_state s = {0};
    size_t nt = 0, ns = 0;
    uint32_t nshards = 1;
    uint64_t total = 0, bound = 0;
    struct pi_engine_stats est = {0};
    struct pi_dcpc_tensor *gt = NULL;
    int rc = cv_prepare(d, o.max_shard_bytes, &s, &nt, &nshards, &ns, &total, &bound);
    if (rc == 0 && !(gt = pi_calloc(nt ? nt : 1, sizeof *gt))) rc = pi_err(-ENOMEM, "out of memory");
    if (rc < 0) goto out;
    /* the writer's records in state-dict order, each filled from its position in t */
    for (size_t q = 0; q < nt; q++) {
        size_t k = 0;
        while (s.sd[k].item != s.t[q].item) k++; /* nt^2 / 2 compares at most */
        const struct pi_dcp_item *it = &d->m.items[s.t[q].item];
        s.pos[k] = q;
        s.w[k] = (pagein_write_tensor){it->name, it->dtype, it->ndim, it->size, NULL, NULL, NULL};
        gt[q] = (struct pi_dcpc_tensor){it->name, s.t[q].nbytes, s.t[q].s0, s.t[q].s1};
    }
    struct conv c = {d, s.t, s.span_t, s.span_c};
    struct pi_dcpc_plan plan = {s.srcs, d->m.nfiles, s.spans, ns, s.span_t, gt, nt, cv_piece, &c};
    const char *mk[1] = {"format"}, *mv[1] = {"pt"};
    pagein_write_opts wo = PAGEIN_WRITE_OPTS_INIT;
    wo.align = o.align, wo.meta_keys = mk, wo.meta_values = mv, wo.n_meta = 1;
    rc = pi_dcpc_convert(&plan, out, s.w, s.pos, s.ord, s.shard, nshards, &wo, total, bound, o.max_output_bytes, &est);
    if (rc == 0 && stats) {
        memset(stats, 0, sizeof *stats);
        stats->tensors = nt;
        stats->tensor_bytes = total;
        stats->skipped_items = d->m.n - nt;
        stats->shards = nshards;
        stats->bytes_read = est.bytes;
        stats->requests = est.requests;
        stats->spans = ns;
    }
out:
    pi_free(gt);
    cv_state_free(&s);
    pagein_dcp_close(d);
    return rc;
}

int pagein_dcp_convert_safetensors(const char *dir, const char *out, pagein_dcp_convert_stats *stats) {
    return pagein_dcp_convert(dir, out, NULL, stats);
}
