/* dcp.c - torch Distributed Checkpoints (DCP) opened as a whole: the
 * .metadata (format/dcp_meta.c), every `__RANK_N.distcp` file through the
 * source seam (local files mapped, remote objects read blob by blob), items
 * listed, tensors assembled from their chunks in any dimension, slices that
 * read only the chunks they overlap, non-tensor items as their bytes, and
 * consolidation into one safetensors file (docs/FORMAT-DCP.md). */
#include "../format/dcp.h"
#include "../source/source.h"
#include "../io/io.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define META_MAX_BYTES (1ull << 30)

struct dfile {
    struct pi_source *src;
    const uint8_t *map; /* local files: the whole file mapped */
    size_t len;
};

struct pagein_dcp {
    char *dir;
    char *meta_path;
    struct pi_dcp_meta m;
    struct dfile *f;
};

int pagein_is_dcp_dir(const char *path) {
    if (!path) return 0;
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

static int open_files(pagein_dcp *d) {
    d->f = pi_calloc(d->m.nfiles ? d->m.nfiles : 1, sizeof *d->f);
    uint64_t *sizes = pi_calloc(d->m.nfiles ? d->m.nfiles : 1, sizeof *sizes);
    int rc = 0;
    if (!d->f || !sizes) rc = pi_err(-ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < d->m.nfiles; i++) {
        char *p = pi_path_join(d->dir, d->m.files[i]);
        if (!p) {
            rc = pi_err(-ENOMEM, "out of memory");
            break;
        }
        rc = pi_source_open(&d->f[i].src, p, 0);
        pi_free(p);
        if (rc < 0) break;
        sizes[i] = d->f[i].src->size;
        if (d->f[i].src->fd >= 0 && sizes[i] > 0) {
            void *m = mmap(NULL, (size_t)sizes[i], PROT_READ, MAP_SHARED, d->f[i].src->fd, 0);
            if (m == MAP_FAILED) rc = pi_err(-errno, "%s/%s: mmap: %s", d->dir, d->m.files[i], strerror(errno));
            else d->f[i].map = m, d->f[i].len = (size_t)sizes[i];
        }
    }
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
    int rc = 0;
    if (!(d->dir = pi_strndup(dir, strlen(dir))) || !(d->meta_path = pi_path_join(dir, PI_DCP_META_NAME)))
        rc = pi_err(-ENOMEM, "out of memory");
    if (rc == 0) rc = read_meta(d);
    if (rc == 0) rc = open_files(d);
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

/* Copies the part of chunk c inside the box [start, start + count) of the
 * tensor into dst (the box, row-major). */
static void copy_box(const struct pi_dcp_item *it, const struct pi_dcp_chunk *c, const struct pi_dcp_blob *b,
                     const uint8_t *data, const uint64_t *start, const uint64_t *count, uint8_t *dst) {
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
    uint64_t run = hi[nd - 1] - lo[nd - 1];
    for (;;) {
        uint64_t so = 0, doff = 0;
        for (uint32_t k = 0; k < nd; k++) {
            so += (idx[k] - c->off[k]) * (uint64_t)b->strides[k];
            doff += (idx[k] - start[k]) * dstride[k];
        }
        if (b->strides[nd - 1] == 1) {
            memcpy(dst + doff * es, data + so * es, run * es);
        } else {
            for (uint64_t e = 0; e < run; e++)
                memcpy(dst + (doff + e) * es, data + (so + e * (uint64_t)b->strides[nd - 1]) * es, es);
        }
        uint32_t k = nd - 1;
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
};

static int chunk_copy(void *ctx) {
    struct chunk_job *j = ctx;
    struct pi_dcp_blob b;
    int rc = pi_dcp_blob_parse(j->p, (size_t)j->c->nbytes, &j->d->m, j->it, j->c, j->d->meta_path, &b);
    if (rc == 0) copy_box(j->it, j->c, &b, j->p + b.data_off, j->start, j->count, j->dst);
    j->returned = 1;
    return rc;
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
        struct chunk_job cj = {d, it, c, p, start, count, dst, 0};
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
    }
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

/* ---- consolidation into safetensors ------------------------------------ */

struct cjob {
    pagein_dcp *d;
    size_t item;
    uint8_t *buf; /* the assembled tensor while the writer asks for its bytes */
    uint64_t nbytes;
};

/* The writer asks for each tensor's bytes in ascending chunks: the tensor
 * is assembled on the first and freed after the last, so at most one
 * tensor is held at a time. */
static int cfill(void *ctx, void *dst, uint64_t off, size_t len) {
    struct cjob *j = ctx;
    if (!j->buf) {
        j->buf = pi_malloc(j->nbytes ? (size_t)j->nbytes : 1);
        RETURN_IF(!j->buf, -ENOMEM, "out of memory for '%s' (%llu bytes)", j->d->m.items[j->item].name,
                  (unsigned long long)j->nbytes);
        int rc = pagein_dcp_read(j->d, j->item, j->buf, (size_t)j->nbytes);
        if (rc < 0) {
            pi_free(j->buf);
            j->buf = NULL;
            return rc;
        }
    }
    memcpy(dst, j->buf + off, len);
    if (off + len >= j->nbytes) {
        pi_free(j->buf);
        j->buf = NULL;
    }
    return 0;
}

int pagein_dcp_convert_safetensors(const char *dir, const char *out, pagein_dcp_convert_stats *stats) {
    pi_err_clear();
    if (!dir || !out) return pi_err(PAGEIN_E_INVALID, "pagein_dcp_convert_safetensors: NULL argument");
    pagein_dcp *d;
    FORWARD_IF(pagein_dcp_open(&d, dir));
    size_t n = d->m.n, nt = 0;
    pagein_write_tensor *w = pi_calloc(n ? n : 1, sizeof *w);
    struct cjob *jobs = pi_calloc(n ? n : 1, sizeof *jobs);
    int rc = w && jobs ? 0 : pi_err(-ENOMEM, "out of memory");
    uint64_t bytes = 0, skipped = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const struct pi_dcp_item *it = &d->m.items[i];
        if (it->is_bytes) {
            skipped++;
            continue;
        }
        jobs[nt] = (struct cjob){d, i, NULL, item_bytes(it)};
        w[nt] = (pagein_write_tensor){it->name, it->dtype, it->ndim, it->size, NULL, cfill, &jobs[nt]};
        bytes += jobs[nt].nbytes;
        nt++;
    }
    if (rc == 0) rc = pagein_safetensors_write(out, w, nt, NULL);
    for (size_t i = 0; jobs && i < nt; i++) pi_free(jobs[i].buf);
    if (rc == 0 && stats) {
        memset(stats, 0, sizeof *stats);
        stats->tensors = nt;
        stats->tensor_bytes = bytes;
        stats->skipped_items = skipped;
    }
    pi_free(w);
    pi_free(jobs);
    pagein_dcp_close(d);
    return rc;
}
