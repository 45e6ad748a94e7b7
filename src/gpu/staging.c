/*
 * staging.c - tensors into device memory through a ring of pinned buffers
 * (pagein.h "GPU staging", docs/GPU.md).
 *
 * The plan. The selected tensors, in layer order, are packed back to back
 * into "chunks" of buffer_bytes: a chunk is a list of pieces (tensor,
 * offset in the tensor, length, offset in the buffer); a large tensor spans
 * several chunks, small ones share one. Destinations are allocated once
 * (one device block, tensors in layer order, 256-byte aligned) unless the
 * caller gives them.
 *
 * The pipeline. A ring of nbuffers pinned buffers, each with its own
 * stream and event. `threads` reader threads take the next chunk in plan
 * order and a free buffer, read the chunk's pieces into it (the range
 * engine reads each run of pieces contiguous in a file;
 * pagein_tensor_copy for tensors that need gathering or byte-swapping),
 * queue one asynchronous copy per run of pieces contiguous on the device,
 * record the buffer's event and hand the buffer over. The completion
 * thread takes the buffers in chunk (plan) order and waits for their
 * events; when a buffer's copies are done each of its pieces is retired (a
 * tensor is ready when its last piece is) and the buffer goes back to the
 * free list. So at most nbuffers buffers exist, a buffer is never refilled
 * before its copies completed, reads overlap copies, and tensors become
 * ready exactly in layer order.
 *
 * The read side is the one function read_spans(): each chunk's runs go to
 * the range engine (src/engine/) as spans delivered into the pinned buffer
 * (PI_DELIVER_BUFFERS), with a request size and depth chosen once per load.
 *
 * Errors: the first failure (read, copy, event) stops the readers; the
 * completion thread still waits for every copy in flight before any buffer
 * is freed; every waiter wakes with the error, whose detail names the file
 * and tensor (and the CUDA call).
 */
#include "gpu.h"
#include "../engine/engine.h"
#include "../source/source.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_BUFFER_BYTES (8ull << 20)
#define DEFAULT_NBUFFERS 8u
#define DEV_ALIGN 256u

_Atomic uint64_t pi_gpu_pinned_live, pi_gpu_pinned_peak;

void pi_gpu_pinned_add(uint64_t n) {
    uint64_t now = atomic_fetch_add(&pi_gpu_pinned_live, n) + n;
    uint64_t peak = atomic_load(&pi_gpu_pinned_peak);
    while (now > peak && !atomic_compare_exchange_weak(&pi_gpu_pinned_peak, &peak, now)) {}
}

void pi_gpu_pinned_sub(uint64_t n) { atomic_fetch_sub(&pi_gpu_pinned_live, n); }

/* ---- the pinned-buffer cache ----------------------------------------------
 * Pinning memory is slow (cuMemHostAlloc locks every page), and a caller
 * that loads one tensor per call (safe_open(..., device="cuda") and
 * get_tensor in a loop, as transformers does) would pay it per tensor. So
 * the ring's buffers go back to a small process-wide cache when a load is
 * freed, and the next load on the same backend and device takes them
 * again. At most PI_POOL_SLOTS buffers and pool_cap bytes are kept
 * (PAGEIN_GPU_PINNED_CACHE, a size, default 64 MiB for CUDA; 0 disables;
 * the host backend caches only when a test sets a cap). This cache is
 * process-wide state (docs/GPU.md); pagein_gpu_trim() frees it. */
#define PI_POOL_SLOTS 32
struct pooled {
    const struct pi_dev_ops *ops;
    int device;
    size_t size;
    void *p;
};
static struct pooled pool[PI_POOL_SLOTS];
static size_t npool;
static uint64_t pool_bytes;
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
_Atomic uint64_t pi_gpu_pinned_allocs;
_Atomic long pi_test_pinned_cache_cap = -1;

static uint64_t pool_cap(const struct pi_dev *d) {
    long t = atomic_load(&pi_test_pinned_cache_cap);
    if (t >= 0) return (uint64_t)t;
    if (d->device == PAGEIN_DEVICE_HOST) return 0;
    return pi_env_size("PAGEIN_GPU_PINNED_CACHE", 64ull << 20);
}

/* A pinned buffer of at least n and at most max bytes (so that a load
 * never pins more than its ring): the smallest such buffer in the cache,
 * else a newly pinned one of n bytes. *got is its real size. */
static int pinned_get(struct pi_dev *d, size_t n, size_t max, void **p, size_t *got) {
    pthread_mutex_lock(&pool_mu);
    size_t best = npool;
    for (size_t i = 0; i < npool; i++)
        if (pool[i].ops == d->ops && pool[i].device == d->device && pool[i].size >= n && pool[i].size <= max &&
            (best == npool || pool[i].size < pool[best].size))
            best = i;
    if (best < npool) {
        *p = pool[best].p;
        *got = pool[best].size;
        pool_bytes -= pool[best].size;
        pool[best] = pool[--npool];
        pthread_mutex_unlock(&pool_mu);
        return 0;
    }
    pthread_mutex_unlock(&pool_mu);
    FORWARD_IF(d->ops->host_alloc_pinned(d, p, n));
    atomic_fetch_add(&pi_gpu_pinned_allocs, 1);
    *got = n;
    return 0;
}

static void pinned_put(struct pi_dev *d, void *p, size_t n) {
    if (!p) return;
    uint64_t cap = pool_cap(d);
    pthread_mutex_lock(&pool_mu);
    if (npool < PI_POOL_SLOTS && pool_bytes + n <= cap) {
        pool[npool++] = (struct pooled){d->ops, d->device, n, p};
        pool_bytes += n;
        p = NULL;
    }
    pthread_mutex_unlock(&pool_mu);
    if (p) d->ops->host_free(d, p);
}

void pagein_gpu_trim(void) {
    pthread_mutex_lock(&pool_mu);
    while (npool) {
        /* CUDA frees need the device's context current on this thread */
        struct pi_dev *d = NULL;
        int dev = pool[npool - 1].device;
        if (pi_dev_open(&d, dev) == 0) d->ops->bind(d);
        for (size_t i = npool; i-- > 0;)
            if (pool[i].device == dev) {
                pool[i].ops->host_free(d, pool[i].p);
                pool_bytes -= pool[i].size;
                pool[i] = pool[--npool];
            }
        pi_dev_close(d);
    }
    pthread_mutex_unlock(&pool_mu);
}

uint64_t pi_gpu_pinned_cached(void) {
    pthread_mutex_lock(&pool_mu);
    uint64_t b = pool_bytes;
    pthread_mutex_unlock(&pool_mu);
    return b;
}

int pi_dev_open(struct pi_dev **out, int device) {
    struct pi_dev *d = pi_calloc(1, sizeof *d);
    RETURN_IF(!d, -ENOMEM, "device: out of memory");
    int rc = device == PAGEIN_DEVICE_HOST ? pi_dev_host_open(d) : pi_dev_cuda_open(d, device);
    if (rc < 0) {
        pi_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

void pi_dev_close(struct pi_dev *d) {
    if (!d) return;
    if (d->ops) d->ops->close(d);
    pi_free(d);
}

/* ---- the load object ------------------------------------------------------ */

struct gt {
    const pagein_tensor *t;
    const pagein_file *f;
    const pagein_tensor *ft; /* t's record in f's own table (pagein_tensor_copy wants it) */
    uint32_t src;            /* index of f's source in the load's srcs */
    uint64_t bytes; /* staged bytes (row-major) */
    uint64_t dst;
    int gather;     /* read through pagein_tensor_copy (strided, swapped, memory files) */
    int built;      /* assembled from pieces (a DCP checkpoint's): copied from the model's memory */
    uint32_t pending;
    int ready;
    size_t rank; /* order in which it became ready (0 first) */
};

struct piece {
    uint32_t g;
    uint64_t toff, len, boff;
};

struct chunk {
    size_t p0, np;
};

struct slot {
    uint8_t *buf;
    size_t bufsize; /* bytes pinned (>= the chunk size when from the cache) */
    void *stream, *event;
    size_t chunk;
    int ok;        /* read and copies queued without error */
    int queued;    /* some copy may be in flight */
    int recorded;  /* event recorded after the last copy */
};

struct pagein_gpu_load {
    struct pi_dev *dev;
    pagein_model *m;            /* the model (it builds assembled tensors); NULL for a file */
    struct gt *g;
    size_t n;
    const pagein_tensor *tbase; /* the model's or file's tensor array */
    size_t tcount;
    int32_t *map;               /* tensor index -> g index, -1 */
    struct piece *pc;
    size_t npc;
    struct chunk *ch;
    size_t nch;
    struct slot *slots;
    unsigned nslots, nthreads;
    uint64_t bufbytes;
    struct pi_source **srcs;    /* per file index: its source (NULL: a memory file) */
    size_t nsrcs;
    uint64_t req_bytes;         /* the range engine's request size and depth, */
    unsigned depth;             /* chosen once per load */
    char io_why[160];
    _Atomic int cancel;         /* set on failure and free: reads in flight stop */

    pthread_mutex_t mu;
    pthread_cond_t cv;       /* free buffers, hand-over queue, readers done */
    pthread_cond_t cv_ready; /* tensors ready, errors, the end */
    unsigned *freelist, nfree;
    /* Hand-over table: handed[c % nslots] is the buffer holding chunk c once
     * its copies are queued, -1 before. Chunks are retired strictly in plan
     * order (next_retire), so at most nslots chunks, all in [next_retire,
     * next_retire + nslots), are ever taken and not yet retired. */
    int *handed;
    size_t next_retire;
    size_t next_chunk;
    unsigned readers_done;
    int stop, finished;
    int err;
    char detail[512];

    pthread_t *readers;
    unsigned nreaders;
    pthread_t completer;
    int completer_started;

    size_t ready_count, prefix_ready, first_k;
    double t0, t_first, t_all;
    uint64_t bytes_done;
    size_t copies;
    unsigned inuse, inuse_peak;
    uint64_t pinned;
    uint64_t dev_base, dev_bytes;
};

/* Records the first failure (caller holds mu; the detail is this thread's). */
static void fail_locked(pagein_gpu_load *l, int rc, const char *detail) {
    if (!l->err) {
        l->err = rc;
        snprintf(l->detail, sizeof l->detail, "%s", detail && *detail ? detail : pagein_strerror(rc));
    }
    l->stop = 1;
    atomic_store(&l->cancel, 1);
    pthread_cond_broadcast(&l->cv);
    pthread_cond_broadcast(&l->cv_ready);
}

static void fail(pagein_gpu_load *l, int rc) {
    char d[512];
    snprintf(d, sizeof d, "%s", pagein_last_error_detail());
    pthread_mutex_lock(&l->mu);
    fail_locked(l, rc, d);
    pthread_mutex_unlock(&l->mu);
}

static const char *fpath(const pagein_file *f) { return f->path ? f->path : "(memory)"; }

/* Prefixes the thread's detail with "FILE: tensor 'NAME'". */
static int tensor_err(int rc, const struct gt *g) {
    char p[512];
    snprintf(p, sizeof p, "tensor '%.*s'", (int)PI_MIN(g->t->name_len, 200), g->t->name);
    if (strstr(pagein_last_error_detail(), p)) return rc; /* already named */
    snprintf(p, sizeof p, "%s: tensor '%.*s'", fpath(g->f), (int)PI_MIN(g->t->name_len, 200), g->t->name);
    pi_err_prefix(p);
    return rc;
}

/* ---- the read side: one chunk into one pinned buffer ---------------------- */

/* The read side's one seam: the runs of one chunk (each a span: file
 * index, offset, length, destination in the chunk's pinned buffer) through
 * the range engine, which sizes the requests for the source, keeps `depth`
 * of them in flight (io_uring or threads for local files, the connection
 * pool for remote ones) and reads each straight into the pinned buffer. A
 * file that ends early gives PAGEIN_E_TRUNCATED. */
static int read_spans(pagein_gpu_load *l, const struct pi_span *sp, size_t n) {
    if (!n) return 0;
    struct pi_engine_opts eo = {
        .deliver = PI_DELIVER_BUFFERS,
        .request_bytes = l->req_bytes,
        .depth = l->depth,
        .max_gap = 0, /* runs are maximal already: never read bytes no tensor wants */
        .cancel = &l->cancel,
    };
    return pi_engine_run(l->srcs, l->nsrcs, sp, n, &eo, NULL);
}

/* The file's size now (it may have shrunk since open). */
static uint64_t size_now(const pagein_file *f) {
    struct stat st;
    if (f->fd >= 0 && fstat(f->fd, &st) == 0) return (uint64_t)st.st_size;
    return f->src ? f->src->size : f->len;
}

static int read_chunk(pagein_gpu_load *l, const struct chunk *c, uint8_t *buf) {
    struct pi_span *sp = pi_malloc((c->np ? c->np : 1) * sizeof *sp);
    RETURN_IF(!sp, -ENOMEM, "GPU load: out of memory");
    size_t ns = 0;
    int rc = 0;
    for (size_t i = 0; i < c->np && rc == 0; i++) {
        const struct piece *p = &l->pc[c->p0 + i];
        const struct gt *g = &l->g[p->g];
        uint64_t off = g->t->offset + p->toff;
        if (g->built) {
            /* built once in the model's memory (pagein_model_tensor_data
             * builds it from its pieces, under the model's build lock) */
            const void *d = NULL;
            rc = pagein_model_tensor_data(l->m, g->t, &d);
            if (rc == 0) memcpy(buf + p->boff, (const uint8_t *)d + p->toff, (size_t)p->len);
            else tensor_err(rc, g);
        } else if (g->gather) {
            rc = pagein_tensor_copy(g->f, g->ft, p->toff, buf + p->boff, (size_t)p->len);
            if (rc < 0) tensor_err(rc, g);
        } else if (ns && sp[ns - 1].src == g->src && sp[ns - 1].off + sp[ns - 1].len == off &&
                   (uint8_t *)sp[ns - 1].dst + sp[ns - 1].len == buf + p->boff) {
            sp[ns - 1].len += p->len;
        } else {
            sp[ns++] = (struct pi_span){g->src, off, p->len, buf + p->boff};
        }
    }
    if (rc == 0) rc = read_spans(l, sp, ns);
    pi_free(sp);
    if (rc == PAGEIN_E_TRUNCATED) {
        /* Name the first tensor of the chunk whose bytes are missing now. */
        for (size_t i = 0; i < c->np; i++) {
            const struct piece *p = &l->pc[c->p0 + i];
            const struct gt *g = &l->g[p->g];
            uint64_t size = size_now(g->f);
            if (g->gather || g->t->offset + p->toff + p->len <= size) continue;
            return pi_err(PAGEIN_E_TRUNCATED,
                          "%s: tensor '%.*s' (bytes [%llu, %llu) of the file): the file is now %llu bytes long; it "
                          "was truncated after it was opened",
                          fpath(g->f), (int)PI_MIN(g->t->name_len, 200), g->t->name,
                          (unsigned long long)g->t->offset, (unsigned long long)(g->t->offset + g->t->nbytes),
                          (unsigned long long)size);
        }
        return rc; /* the source's own detail */
    }
    if (rc < 0 && c->np) {
        /* a failed read: name the chunk's first tensor (the source's detail
         * names the file, offset and length) */
        const struct gt *g = &l->g[l->pc[c->p0].g];
        char pre[300];
        snprintf(pre, sizeof pre, "reading a buffer that starts with tensor '%.*s'", (int)PI_MIN(g->t->name_len, 200),
                 g->t->name);
        if (!strstr(pagein_last_error_detail(), "tensor '")) pi_err_prefix(pre);
    }
    return rc;
}

/* Queues the chunk's copies on the buffer's stream: one per run of pieces
 * contiguous on the device. */
static int queue_copies(pagein_gpu_load *l, struct slot *s, const struct chunk *c) {
    for (size_t i = 0; i < c->np;) {
        const struct piece *p = &l->pc[c->p0 + i];
        uint64_t dst = l->g[p->g].dst + p->toff, len = p->len;
        size_t j = i + 1;
        while (j < c->np) {
            const struct piece *q = &l->pc[c->p0 + j];
            if (l->g[q->g].dst + q->toff != dst + len || q->boff != p->boff + len) break;
            len += q->len;
            j++;
        }
        s->queued = 1;
        int rc = l->dev->ops->copy_async(l->dev, dst, s->buf + p->boff, (size_t)len, s->stream);
        if (rc < 0) return tensor_err(rc, &l->g[p->g]);
        pthread_mutex_lock(&l->mu);
        l->copies++;
        pthread_mutex_unlock(&l->mu);
        i = j;
    }
    return 0;
}

static void *reader_main(void *arg) {
    pagein_gpu_load *l = arg;
    int rc = l->dev->ops->bind(l->dev);
    if (rc < 0) fail(l, rc);
    for (;;) {
        pthread_mutex_lock(&l->mu);
        while (!l->stop && l->nfree == 0 && l->next_chunk < l->nch) pthread_cond_wait(&l->cv, &l->mu);
        if (l->stop || l->next_chunk >= l->nch) {
            pthread_mutex_unlock(&l->mu);
            break;
        }
        size_t c = l->next_chunk++;
        unsigned si = l->freelist[--l->nfree];
        if (++l->inuse > l->inuse_peak) l->inuse_peak = l->inuse;
        pthread_mutex_unlock(&l->mu);

        struct slot *s = &l->slots[si];
        s->chunk = c;
        s->ok = s->queued = s->recorded = 0;
        rc = read_chunk(l, &l->ch[c], s->buf);
        if (rc == 0) rc = queue_copies(l, s, &l->ch[c]);
        if (rc == 0 && (rc = l->dev->ops->record_ready(l->dev, s->event, s->stream)) < 0)
            tensor_err(rc, &l->g[l->pc[l->ch[c].p0].g]);
        char d[512];
        if (rc < 0) snprintf(d, sizeof d, "%s", pagein_last_error_detail());
        if (rc == 0) s->ok = s->recorded = 1;
        /* A copy failed half-way: still fence what was queued, so the
         * completion thread can wait for it before the buffer is reused. */
        else if (s->queued && l->dev->ops->record_ready(l->dev, s->event, s->stream) == 0) s->recorded = 1;

        pthread_mutex_lock(&l->mu);
        if (rc < 0) fail_locked(l, rc, d);
        l->handed[c % l->nslots] = (int)si;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
    }
    pthread_mutex_lock(&l->mu);
    l->readers_done++;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Marks the pieces of a completed chunk (caller holds mu). */
static void retire_locked(pagein_gpu_load *l, const struct chunk *c) {
    for (size_t i = 0; i < c->np; i++) {
        const struct piece *p = &l->pc[c->p0 + i];
        struct gt *g = &l->g[p->g];
        l->bytes_done += p->len;
        if (--g->pending == 0) {
            g->ready = 1;
            g->rank = l->ready_count++;
        }
    }
    while (l->prefix_ready < l->n && l->g[l->prefix_ready].ready) l->prefix_ready++;
    if (l->t_first < 0 && l->prefix_ready >= l->first_k) l->t_first = pi_now_s() - l->t0;
    pthread_cond_broadcast(&l->cv_ready);
}

static void *completer_main(void *arg) {
    pagein_gpu_load *l = arg;
    int bound = l->dev->ops->bind(l->dev);
    if (bound < 0) fail(l, bound);
    for (;;) {
        pthread_mutex_lock(&l->mu);
        /* The next chunk in plan order, once handed over; done when every
         * chunk the readers took is retired and they have all stopped. */
        while (l->handed[l->next_retire % l->nslots] < 0 &&
               !(l->readers_done == l->nreaders && l->next_retire >= l->next_chunk))
            pthread_cond_wait(&l->cv, &l->mu);
        if (l->handed[l->next_retire % l->nslots] < 0) {
            pthread_mutex_unlock(&l->mu);
            break;
        }
        unsigned si = (unsigned)l->handed[l->next_retire % l->nslots];
        l->handed[l->next_retire % l->nslots] = -1;
        l->next_retire++;
        pthread_mutex_unlock(&l->mu);

        struct slot *s = &l->slots[si];
        int rc = 0;
        /* Never free a buffer a copy may still read: wait for its event, or
         * for the whole device when the event could not be recorded. */
        if (s->recorded) rc = l->dev->ops->wait(l->dev, s->event);
        else if (s->queued) rc = l->dev->ops->synchronize(l->dev);
        if (rc < 0) tensor_err(rc, &l->g[l->pc[l->ch[s->chunk].p0].g]);
        char d[512];
        if (rc < 0) snprintf(d, sizeof d, "%s", pagein_last_error_detail());

        pthread_mutex_lock(&l->mu);
        if (rc < 0) fail_locked(l, rc, d);
        else if (s->ok) retire_locked(l, &l->ch[s->chunk]);
        l->freelist[l->nfree++] = si;
        l->inuse--;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
    }
    pthread_mutex_lock(&l->mu);
    if (!l->err && l->ready_count < l->n) fail_locked(l, PAGEIN_E_CANCELLED, "GPU load stopped before completion");
    l->t_all = pi_now_s() - l->t0;
    l->finished = 1;
    pthread_cond_broadcast(&l->cv_ready);
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* ---- setup and teardown ------------------------------------------------ */

uint64_t pagein_gpu_tensor_bytes(const pagein_tensor *t) {
    if (!t) return 0;
    if (t->flags & PAGEIN_TENSOR_NONCONTIGUOUS) {
        uint64_t n = 0;
        return pagein_dtype_nbytes(t->dtype, t->nelements, &n) == 0 ? n : 0;
    }
    return t->nbytes;
}

void pagein_gpu_load_free(pagein_gpu_load *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    atomic_store(&l->cancel, 1); /* reads in flight stop at their next request */
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    for (unsigned i = 0; i < l->nreaders; i++) pthread_join(l->readers[i], NULL);
    if (l->completer_started) pthread_join(l->completer, NULL);
    if (l->dev) {
        /* The completion thread waited for every copy it was handed; a
         * start that failed half-way may have handed none over, so drain
         * the device before any buffer goes. */
        if (l->dev->ops->bind(l->dev) == 0) l->dev->ops->synchronize(l->dev);
        for (unsigned i = 0; l->slots && i < l->nslots; i++) {
            struct slot *s = &l->slots[i];
            /* the stream first: the host backend's destroy drains its queue,
             * which may still name the event */
            if (s->stream) l->dev->ops->stream_destroy(l->dev, s->stream);
            if (s->event) l->dev->ops->event_destroy(l->dev, s->event);
            pinned_put(l->dev, s->buf, s->bufsize);
        }
        if (l->pinned) pi_gpu_pinned_sub(l->pinned);
        if (l->dev_base) l->dev->ops->free(l->dev, l->dev_base);
        pi_dev_close(l->dev);
    }
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    pthread_cond_destroy(&l->cv_ready);
    pi_free(l->slots);
    pi_free(l->readers);
    pi_free(l->freelist);
    pi_free(l->handed);
    pi_free(l->pc);
    pi_free(l->ch);
    pi_free(l->map);
    pi_free(l->srcs);
    pi_free(l->g);
    pi_free(l);
}

/* The tensor set, in layer order. get_layer(src, i) walks the source's
 * layer order; file_of maps a tensor to its file. */
struct srcv {
    const pagein_model *m;
    const pagein_file *f;
};

static size_t src_count(const struct srcv *s) {
    return s->m ? pagein_model_tensor_count(s->m) : pagein_tensor_count(s->f);
}
static const pagein_tensor *src_at(const struct srcv *s, size_t i) {
    return s->m ? pagein_model_tensor_at(s->m, i) : pagein_tensor_at(s->f, i);
}
static const pagein_tensor *src_by_layer(const struct srcv *s, size_t i) {
    return s->m ? pagein_model_tensor_by_layer(s->m, i) : pagein_tensor_by_layer(s->f, i);
}
static const pagein_file *src_file(const struct srcv *s, const pagein_tensor *t) {
    return s->m ? pagein_model_file(s->m, t->file) : s->f;
}

static int plan(pagein_gpu_load *l, const struct srcv *sv, const pagein_gpu_opts *o) {
    size_t tc = src_count(sv);
    l->tcount = tc;
    l->tbase = tc ? src_at(sv, 0) : NULL;
    l->map = pi_malloc((tc ? tc : 1) * sizeof *l->map);
    RETURN_IF(!l->map, -ENOMEM, "GPU load: out of memory");
    for (size_t i = 0; i < tc; i++) l->map[i] = -1;
    size_t n = o->tensors ? o->ntensors : tc;
    l->g = pi_calloc(n ? n : 1, sizeof *l->g);
    RETURN_IF(!l->g, -ENOMEM, "GPU load: out of memory");
    if (o->tensors) {
        /* Mark the requested tensors (checking they belong here), then
         * collect them by walking the layer order. */
        int32_t *want = pi_malloc((tc ? tc : 1) * sizeof *want);
        RETURN_IF(!want, -ENOMEM, "GPU load: out of memory");
        for (size_t i = 0; i < tc; i++) want[i] = -1;
        for (size_t i = 0; i < n; i++) {
            const pagein_tensor *t = o->tensors[i];
            if (!t || t < l->tbase || t >= l->tbase + tc) {
                pi_free(want);
                return pi_err(PAGEIN_E_INVALID, "GPU load: tensors[%zu] is not a tensor of this %s", i,
                              sv->m ? "model" : "file");
            }
            size_t ti = (size_t)(t - l->tbase);
            if (want[ti] >= 0) {
                pi_free(want);
                return pi_err(PAGEIN_E_INVALID, "GPU load: tensor '%.*s' is listed twice",
                              (int)PI_MIN(t->name_len, 200), t->name);
            }
            want[ti] = (int32_t)i;
        }
        size_t k = 0;
        for (size_t i = 0; i < tc; i++) {
            const pagein_tensor *t = src_by_layer(sv, i);
            size_t ti = (size_t)(t - l->tbase);
            if (want[ti] < 0) continue;
            l->g[k].t = t;
            l->g[k].dst = o->dst ? o->dst[want[ti]] : 0;
            l->map[ti] = (int32_t)k++;
        }
        pi_free(want);
    } else {
        for (size_t i = 0; i < tc; i++) {
            const pagein_tensor *t = src_by_layer(sv, i);
            l->g[i].t = t;
            l->map[t - l->tbase] = (int32_t)i;
        }
    }
    l->n = n;

    /* The files' sources, by file index, for the range engine. */
    l->nsrcs = sv->m ? pagein_model_file_count(sv->m) : 1;
    l->srcs = pi_calloc(l->nsrcs ? l->nsrcs : 1, sizeof *l->srcs);
    RETURN_IF(!l->srcs, -ENOMEM, "GPU load: out of memory");
    for (size_t i = 0; i < l->nsrcs; i++) l->srcs[i] = (sv->m ? pagein_model_file(sv->m, i) : sv->f)->src;

    /* Sizes, sources, pieces. */
    size_t npc_max = n;
    uint64_t total = 0;
    int32_t minl = -1;
    for (size_t i = 0; i < n; i++) {
        struct gt *g = &l->g[i];
        g->f = src_file(sv, g->t);
        /* A model's merged table holds copies of the files' records; the
         * per-file extras (PyTorch strides) are found from the file's own. */
        g->built = sv->m && (g->t->flags & PAGEIN_TENSOR_ASSEMBLED);
        g->ft = sv->m && !g->built ? pagein_tensor_find(g->f, g->t->name, g->t->name_len) : g->t;
        /* a directory format's files have no table of their own (a DCP
         * checkpoint's one-chunk tensors: the model's record is the file range) */
        if (!g->ft && pagein_tensor_count(g->f) == 0 && !(g->t->flags & PAGEIN_TENSOR_NONCONTIGUOUS)) g->ft = g->t;
        RETURN_IF(!g->ft, PAGEIN_E_NOT_FOUND, "%s: tensor '%.*s' is not in its file's table", fpath(g->f),
                  (int)PI_MIN(g->t->name_len, 200), g->t->name);
        g->bytes = pagein_gpu_tensor_bytes(g->t);
        RETURN_IF(g->t->nbytes && !g->bytes, PAGEIN_E_BAD_DTYPE,
                  "%s: tensor '%.*s': cannot size its %s data for the device", fpath(g->f),
                  (int)PI_MIN(g->t->name_len, 200), g->t->name, pagein_dtype_get(g->t->dtype)->name);
        g->src = sv->m ? g->t->file : 0;
        g->gather = g->built || !g->f->src || (g->t->flags & (PAGEIN_TENSOR_NONCONTIGUOUS | PAGEIN_TENSOR_SWAPPED));
        npc_max += (size_t)(g->bytes / l->bufbytes) + 1;
        total += pi_align_up(g->bytes, DEV_ALIGN);
        if (g->t->layer >= 0 && (minl < 0 || g->t->layer < minl)) minl = g->t->layer;
    }
    /* "First layer": everything up to the last tensor of the lowest
     * numbered layer (leading globals come before it in layer order). */
    l->first_k = n ? 1 : 0;
    for (size_t i = 0; minl >= 0 && i < n; i++)
        if (l->g[i].t->layer == minl) l->first_k = i + 1;

    l->pc = pi_malloc(npc_max * sizeof *l->pc);
    l->ch = pi_malloc((npc_max + 1) * sizeof *l->ch);
    RETURN_IF(!l->pc || !l->ch, -ENOMEM, "GPU load: out of memory for a plan of %zu pieces", npc_max);
    uint64_t boff = 0;
    size_t cstart = 0;
    for (size_t i = 0; i < n; i++) {
        struct gt *g = &l->g[i];
        if (g->bytes == 0) {
            g->ready = 1;
            g->rank = l->ready_count++;
            continue;
        }
        for (uint64_t off = 0; off < g->bytes;) {
            uint64_t take = PI_MIN(g->bytes - off, l->bufbytes - boff);
            l->pc[l->npc++] = (struct piece){(uint32_t)i, off, take, boff};
            g->pending++;
            off += take;
            boff += take;
            if (boff == l->bufbytes) {
                l->ch[l->nch++] = (struct chunk){cstart, l->npc - cstart};
                cstart = l->npc;
                boff = 0;
            }
        }
    }
    if (l->npc > cstart) l->ch[l->nch++] = (struct chunk){cstart, l->npc - cstart};
    while (l->prefix_ready < l->n && l->g[l->prefix_ready].ready) l->prefix_ready++;
    if (l->prefix_ready >= l->first_k) l->t_first = 0;

    /* Request size and depth, once for the load (from options, the
     * environment, the source's facts or a short probe: pi_engine_choose). */
    for (size_t i = 0; i < n; i++)
        if (!l->g[i].gather && l->g[i].bytes) {
            struct pi_engine_opts eo = {.deliver = PI_DELIVER_BUFFERS, .max_gap = 0};
            pi_engine_choose(l->srcs[l->g[i].src], &eo, 1, &l->req_bytes, &l->depth, l->io_why, sizeof l->io_why);
            break;
        }

    /* Destinations, once, in layer order. */
    if (!o->dst && total) {
        FORWARD_IF(l->dev->ops->alloc(l->dev, &l->dev_base, total));
        l->dev_bytes = total;
        uint64_t at = l->dev_base;
        for (size_t i = 0; i < n; i++) {
            l->g[i].dst = at;
            at += pi_align_up(l->g[i].bytes, DEV_ALIGN);
        }
    }
    for (size_t i = 0; i < n; i++)
        RETURN_IF(l->g[i].bytes && !l->g[i].dst, PAGEIN_E_INVALID, "GPU load: tensor '%.*s' has no destination",
                  (int)PI_MIN(l->g[i].t->name_len, 200), l->g[i].t->name);
    return 0;
}

static int start(pagein_gpu_load **out, const struct srcv *sv, const pagein_gpu_opts *opts) {
    RETURN_IF(!out, PAGEIN_E_INVALID, "GPU load: NULL output pointer");
    pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
    FORWARD_IF(pi_opts_in(&o, sizeof o, opts, "GPU load"));
    RETURN_IF(o.dst && !o.tensors, PAGEIN_E_INVALID, "GPU load: dst needs the tensors it belongs to");
    RETURN_IF(o.nbuffers == 1, PAGEIN_E_INVALID, "GPU load: the ring needs at least 2 buffers");
    RETURN_IF(o.buffer_bytes && o.buffer_bytes < 4096, PAGEIN_E_INVALID,
              "GPU load: buffer_bytes %llu is below 4096", (unsigned long long)o.buffer_bytes);
    if (!o.nbuffers) o.nbuffers = DEFAULT_NBUFFERS;
    if (!o.buffer_bytes) o.buffer_bytes = DEFAULT_BUFFER_BYTES;
    if (!o.threads) o.threads = PI_MAX(1u, o.nbuffers / 2);
    if (o.threads > o.nbuffers) o.threads = o.nbuffers;

    pagein_gpu_load *l = pi_calloc(1, sizeof *l);
    RETURN_IF(!l, -ENOMEM, "GPU load: out of memory");
    l->m = (pagein_model *)sv->m; /* building an assembled tensor changes the model, as its access calls do */
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    pthread_cond_init(&l->cv_ready, NULL);
    l->t0 = pi_now_s();
    l->t_first = -1;
    l->bufbytes = o.buffer_bytes;
    l->nslots = o.nbuffers;
    l->nthreads = o.threads;

    int rc = pi_dev_open(&l->dev, o.device);
    if (rc == 0) rc = plan(l, sv, &o);
    if (rc == 0) {
        /* Never more buffers than chunks: a small model pins little. */
        if (l->nch < l->nslots) l->nslots = (unsigned)PI_MAX(l->nch, (size_t)1);
        if (l->nthreads > l->nslots) l->nthreads = l->nslots;
        l->slots = pi_calloc(l->nslots, sizeof *l->slots);
        l->freelist = pi_malloc(l->nslots * sizeof *l->freelist);
        l->handed = pi_malloc(l->nslots * sizeof *l->handed);
        l->readers = pi_calloc(l->nthreads, sizeof *l->readers);
        if (!l->slots || !l->freelist || !l->handed || !l->readers) rc = pi_err(-ENOMEM, "GPU load: out of memory");
        for (unsigned i = 0; l->handed && i < l->nslots; i++) l->handed[i] = -1;
    }
    uint64_t bufsz = l->nch == 1 ? PI_MAX(l->ch[0].np ? l->pc[l->ch[0].p0 + l->ch[0].np - 1].boff +
                                                          l->pc[l->ch[0].p0 + l->ch[0].np - 1].len
                                                    : 0,
                                          (uint64_t)1)
                                 : l->bufbytes;
    for (unsigned i = 0; rc == 0 && i < l->nslots; i++) {
        struct slot *s = &l->slots[i];
        rc = pinned_get(l->dev, (size_t)bufsz, (size_t)l->bufbytes, (void **)&s->buf, &s->bufsize);
        if (rc == 0) {
            l->pinned += s->bufsize;
            pi_gpu_pinned_add(s->bufsize);
            rc = l->dev->ops->stream_create(l->dev, &s->stream);
        }
        if (rc == 0) rc = l->dev->ops->event_create(l->dev, &s->event);
        l->freelist[l->nfree++] = i;
    }
    if (rc == 0 && l->nch) {
        for (unsigned i = 0; i < l->nthreads; i++) {
            int e = pthread_create(&l->readers[i], NULL, reader_main, l);
            if (e) {
                rc = pi_err(-e, "GPU load: pthread_create: %s", strerror(e));
                break;
            }
            l->nreaders++;
        }
        if (rc == 0) {
            int e = pthread_create(&l->completer, NULL, completer_main, l);
            if (e) rc = pi_err(-e, "GPU load: pthread_create: %s", strerror(e));
            else l->completer_started = 1;
        }
    } else if (rc == 0) {
        l->finished = 1; /* nothing to copy: every tensor is empty */
        l->t_all = pi_now_s() - l->t0;
    }
    if (rc < 0) {
        char d[512];
        snprintf(d, sizeof d, "%s", pagein_last_error_detail());
        pagein_gpu_load_free(l);
        return pi_err(rc, "%s", d);
    }
    *out = l;
    return 0;
}

int pagein_gpu_load_model(pagein_gpu_load **l, const pagein_model *m, const pagein_gpu_opts *opts) {
    RETURN_IF(!m, PAGEIN_E_INVALID, "GPU load: NULL model");
    struct srcv sv = {m, NULL};
    return start(l, &sv, opts);
}

int pagein_gpu_load_file(pagein_gpu_load **l, const pagein_file *f, const pagein_gpu_opts *opts) {
    RETURN_IF(!f, PAGEIN_E_INVALID, "GPU load: NULL file");
    struct srcv sv = {NULL, f};
    return start(l, &sv, opts);
}

/* ---- readiness ------------------------------------------------------------ */

static struct gt *find(const pagein_gpu_load *l, const pagein_tensor *t) {
    if (!l || !t || t < l->tbase || t >= l->tbase + l->tcount) return NULL;
    int32_t k = l->map[t - l->tbase];
    return k < 0 ? NULL : &l->g[k];
}

static int not_found(const pagein_tensor *t) {
    return pi_err(PAGEIN_E_NOT_FOUND, "GPU load: tensor '%.*s' is not part of this load",
                  t ? (int)PI_MIN(t->name_len, 200) : 6, t ? t->name : "(null)");
}

int pagein_gpu_tensor_wait(pagein_gpu_load *l, const pagein_tensor *t) {
    RETURN_IF(!l, PAGEIN_E_INVALID, "GPU load: NULL");
    struct gt *g = find(l, t);
    if (!g) return not_found(t);
    pthread_mutex_lock(&l->mu);
    while (!g->ready && !l->err && !l->finished) pthread_cond_wait(&l->cv_ready, &l->mu);
    int rc = g->ready ? 0 : l->err ? l->err : PAGEIN_E_CANCELLED;
    if (rc < 0) rc = pi_err(rc, "%s", l->detail);
    pthread_mutex_unlock(&l->mu);
    return rc;
}

int pagein_gpu_tensor_query(pagein_gpu_load *l, const pagein_tensor *t) {
    RETURN_IF(!l, PAGEIN_E_INVALID, "GPU load: NULL");
    struct gt *g = find(l, t);
    if (!g) return not_found(t);
    pthread_mutex_lock(&l->mu);
    int rc = g->ready ? 1 : l->err ? l->err : 0;
    if (rc < 0) rc = pi_err(rc, "%s", l->detail);
    pthread_mutex_unlock(&l->mu);
    return rc;
}

long pi_gpu_ready_rank(pagein_gpu_load *l, const pagein_tensor *t) {
    struct gt *g = find(l, t);
    if (!g) return -1;
    pthread_mutex_lock(&l->mu);
    long r = g->ready ? (long)g->rank : -1;
    pthread_mutex_unlock(&l->mu);
    return r;
}

uint64_t pagein_gpu_tensor_ptr(const pagein_gpu_load *l, const pagein_tensor *t) {
    struct gt *g = find(l, t);
    return g ? g->dst : 0;
}

int pagein_gpu_load_wait(pagein_gpu_load *l) {
    RETURN_IF(!l, PAGEIN_E_INVALID, "GPU load: NULL");
    pthread_mutex_lock(&l->mu);
    while (l->ready_count < l->n && !l->err && !l->finished) pthread_cond_wait(&l->cv_ready, &l->mu);
    int rc = l->ready_count == l->n ? 0 : l->err ? l->err : PAGEIN_E_CANCELLED;
    if (rc < 0) rc = pi_err(rc, "%s", l->detail);
    pthread_mutex_unlock(&l->mu);
    return rc;
}

void pagein_gpu_load_stats(pagein_gpu_load *l, pagein_gpu_stats *st) {
    if (!st) return;
    memset(st, 0, sizeof *st);
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    st->bytes = l->bytes_done;
    st->tensors = l->n;
    st->ready = l->ready_count;
    st->copies = l->copies;
    st->seconds = l->finished ? l->t_all : pi_now_s() - l->t0;
    st->first_layer_seconds = l->t_first;
    st->ring_bytes = (uint64_t)l->nslots * l->bufbytes;
    st->pinned_peak = l->pinned;
    st->buffers_peak = l->inuse_peak;
    st->device_bytes = l->dev_bytes;
    snprintf(st->device_name, sizeof st->device_name, "%s", l->dev ? l->dev->name : "");
    st->request_bytes = l->req_bytes;
    st->depth = l->depth;
    snprintf(st->io_why, sizeof st->io_why, "%s", l->io_why);
    pthread_mutex_unlock(&l->mu);
}

int pagein_gpu_tensor_read_back(pagein_gpu_load *l, const pagein_tensor *t, void *dst, uint64_t off, size_t len) {
    FORWARD_IF(pagein_gpu_tensor_wait(l, t));
    struct gt *g = find(l, t);
    RETURN_IF(off > g->bytes || len > g->bytes - off, PAGEIN_E_RANGE,
              "tensor '%.*s': bytes [%llu, +%zu) outside its %llu bytes", (int)PI_MIN(t->name_len, 200), t->name,
              (unsigned long long)off, len, (unsigned long long)g->bytes);
    if (!len) return 0;
    FORWARD_IF(l->dev->ops->bind(l->dev));
    int rc = l->dev->ops->copy_to_host(l->dev, dst, g->dst + off, len);
    return rc < 0 ? tensor_err(rc, g) : 0;
}

int pagein_gpu_probe(int device, pagein_gpu_info *info) {
    struct pi_dev *d;
    FORWARD_IF(pi_dev_open(&d, device));
    if (info) {
        memset(info, 0, sizeof *info);
        snprintf(info->name, sizeof info->name, "%s", d->name);
        info->total_bytes = d->total_mem;
        uint64_t fr = 0, tot = 0;
        if (d->ops->bind(d) == 0 && d->ops->mem_info(d, &fr, &tot) == 0) info->free_bytes = fr;
    }
    pi_dev_close(d);
    return 0;
}

int pagein_gpu_copy_bench(int device, uint64_t bytes, unsigned streams, double *seconds) {
    RETURN_IF(!seconds || !bytes, PAGEIN_E_INVALID, "copy bench: nothing to copy");
    if (!streams) streams = 2;
    RETURN_IF(streams > 64, PAGEIN_E_INVALID, "copy bench: at most 64 streams");
    size_t chunk = (size_t)PI_MIN(bytes, (uint64_t)64 << 20);
    struct pi_dev *d = NULL;
    FORWARD_IF(pi_dev_open(&d, device));
    void *host = NULL, *st[64] = {0}, *ev[64] = {0};
    uint64_t dst = 0;
    int rc = d->ops->host_alloc_pinned(d, &host, chunk);
    if (rc == 0) {
        pi_gpu_pinned_add(chunk);
        memset(host, 0x5A, chunk);
        rc = d->ops->alloc(d, &dst, (uint64_t)chunk * streams);
    }
    for (unsigned i = 0; rc == 0 && i < streams; i++) {
        rc = d->ops->stream_create(d, &st[i]);
        if (rc == 0) rc = d->ops->event_create(d, &ev[i]);
    }
    if (rc == 0) rc = d->ops->copy_async(d, dst, host, chunk, st[0]); /* warm-up */
    if (rc == 0) rc = d->ops->record_ready(d, ev[0], st[0]);
    if (rc == 0) rc = d->ops->wait(d, ev[0]);
    double t0 = pi_now_s();
    uint64_t done = 0;
    for (unsigned i = 0; rc == 0 && done < bytes; i = (i + 1) % streams) {
        size_t n = (size_t)PI_MIN(bytes - done, (uint64_t)chunk);
        rc = d->ops->copy_async(d, dst + (uint64_t)i * chunk, host, n, st[i]);
        done += n;
    }
    for (unsigned i = 0; rc == 0 && i < streams; i++) rc = d->ops->record_ready(d, ev[i], st[i]);
    for (unsigned i = 0; rc == 0 && i < streams; i++) rc = d->ops->wait(d, ev[i]);
    *seconds = pi_now_s() - t0;
    d->ops->synchronize(d);
    for (unsigned i = 0; i < streams; i++) {
        if (ev[i]) d->ops->event_destroy(d, ev[i]);
        if (st[i]) d->ops->stream_destroy(d, st[i]);
    }
    if (dst) d->ops->free(d, dst);
    if (host) {
        d->ops->host_free(d, host);
        pi_gpu_pinned_sub(chunk);
    }
    pi_dev_close(d);
    return rc;
}
