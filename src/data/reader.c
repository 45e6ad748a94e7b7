/* reader.c - sample readers: global (full permutation, pread at a queue
 * depth), ranges (the same order, each batch merged by ranges.c), block
 * (shuffled large blocks read sequentially by a background thread, samples
 * drawn at random from a bounded buffer of blocks) and mmap (the baseline).
 * The permutation and epoch seeds they use are order.c's. */
#include "data.h"
#include "order.h"
#include "../engine/engine.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <math.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the reader object -------------------------------------------------- */

enum { SLOT_FREE, SLOT_LOADING, SLOT_READY, SLOT_DRAINED };

struct slot {
    uint8_t *buf;
    int state;
    size_t block;
    size_t seq;     /* position of the block in this epoch's block order */
    uint32_t *left; /* sample offsets within the block not yet handed out */
    uint32_t nleft;
};

struct dblock {
    uint32_t file;
    uint64_t off, len;
    uint64_t first;
    uint32_t count;
};

struct pagein_reader {
    pagein_dataset *d;
    pagein_reader_opts o;
    uint64_t epoch;
    pagein_reader_stats st;
    int *fds;            /* the reader's own descriptors (hints are per open file) */
    uint64_t *sizes;
    uint64_t max_len;    /* longest sample */
    /* global / ranges / mmap: the epoch's order */
    uint64_t *perm;      /* NULL = ascending */
    uint64_t pos;        /* next position in the order */
    /* global / ranges: the current batch */
    size_t bn, bi;
    uint64_t *bids;
    uint8_t **bbuf;
    uint64_t *bcap;
    pagein_range *breq;
    pagein_sample_loc *bloc;
    struct pi_fdsrcs fsrc; /* fds as range-engine sources (global, ranges, block) */
    struct pi_crew crew;   /* the engine's workers, kept between batches */
    struct pi_rscratch scratch; /* ranges: merged reads of a batch */
    int crew_on;
    /* mmap */
    uint8_t **maps;
    /* block */
    struct dblock *blocks;
    size_t nblocks;
    size_t *border;
    size_t load_pos, consumed, window_end;
    struct slot *slots;
    struct slot **win; /* scratch: the window's slots in order */
    unsigned K;
    uint64_t slot_cap;
    uint32_t max_count;
    uint64_t rng;
    pthread_t loader;
    int loader_on, sync_on;
    pthread_mutex_t mu;
    pthread_cond_t cv_load, cv_cons;
    int quit;
    uint64_t gen;
    int err;
    char err_detail[1024];
    int release; /* slot drained by the previous call, freed at the next; -1 none */
    unsigned ready;
};

const char *pagein_reader_kind_name(pagein_reader_kind k) {
    switch (k) {
    case PAGEIN_READER_GLOBAL: return "global";
    case PAGEIN_READER_BLOCK: return "block";
    case PAGEIN_READER_RANGES: return "ranges";
    case PAGEIN_READER_MMAP: return "mmap";
    }
    return "unknown";
}

int pagein_reader_kind_from_name(const char *name) {
    if (!name) return PAGEIN_E_NOT_FOUND;
    for (int k = 0; k <= PAGEIN_READER_MMAP; k++)
        if (strcmp(name, pagein_reader_kind_name((pagein_reader_kind)k)) == 0) return k;
    return PAGEIN_E_NOT_FOUND;
}

/* Opens the dataset's files again so that access hints (random, sequential)
 * apply to this reader only; refuses files replaced since the dataset
 * was opened. */
static int reopen_files(pagein_reader *r, int advice) {
    size_t nf = r->d->nfiles;
    r->fds = pi_malloc(nf * sizeof *r->fds);
    if (!r->fds) return pi_err(-ENOMEM, "reader: out of memory");
    for (size_t i = 0; i < nf; i++) r->fds[i] = -1;
    for (size_t i = 0; i < nf; i++) {
        const struct pi_ds_file *f = &r->d->files[i];
        r->fds[i] = open(f->path, O_RDONLY | O_CLOEXEC);
        if (r->fds[i] < 0) return pi_err(-errno, "%s: cannot open: %s", f->path, strerror(errno));
        struct stat a, b;
        if (fstat(r->fds[i], &a) < 0 || fstat(f->fd, &b) < 0) return pi_err(-errno, "%s: fstat", f->path);
        RETURN_IF(a.st_dev != b.st_dev || a.st_ino != b.st_ino, PAGEIN_E_CHANGED,
                  "%s: replaced since the dataset was opened", f->path);
        (void)posix_fadvise(r->fds[i], 0, 0, advice);
    }
    return 0;
}

/* The reader's descriptors as range-engine sources, named by their paths
 * (errors name the file) with their storage facts (io_uring where requests
 * wait, threads on local disks). */
static int engine_sources(pagein_reader *r) {
    size_t nf = r->d->nfiles;
    char **paths = pi_malloc((nf ? nf : 1) * sizeof *paths);
    if (!paths) return pi_err(-ENOMEM, "reader: out of memory");
    for (size_t i = 0; i < nf; i++) paths[i] = r->d->files[i].path;
    int rc = pi_fdsrcs_init(&r->fsrc, r->fds, nf, r->sizes, paths, 0);
    pi_free(paths);
    return rc;
}

static int start_order(pagein_reader *r) {
    r->pos = 0;
    r->bn = r->bi = 0;
    if (r->o.flags & PAGEIN_READER_IN_ORDER) return 0;
    if (!r->perm) {
        r->perm = pi_malloc(r->d->nsamples * sizeof *r->perm);
        if (!r->perm) return pi_err(-ENOMEM, "reader: out of memory for the order of %" PRIu64 " samples",
                                    r->d->nsamples);
    }
    pagein_permutation(r->perm, r->d->nsamples, pagein_epoch_seed(r->o.seed, r->epoch));
    return 0;
}

static uint64_t order_at(const pagein_reader *r, uint64_t pos) { return r->perm ? r->perm[pos] : pos; }

/* ---- global / ranges ---------------------------------------------------- */

static int fill_batch(pagein_reader *r) {
    uint64_t n = r->d->nsamples - r->pos;
    size_t bn = n < r->o.batch ? (size_t)n : r->o.batch;
    size_t nreq = 0;
    for (size_t i = 0; i < bn; i++) {
        uint64_t id = order_at(r, r->pos + i);
        r->bids[i] = id;
        FORWARD_IF(pagein_dataset_locate(r->d, id, &r->bloc[i]));
        uint64_t len = r->bloc[i].length;
        if (len > r->bcap[i]) {
            uint8_t *nb = pi_realloc(r->bbuf[i], len);
            if (!nb) return pi_err(-ENOMEM, "reader: out of memory for a %" PRIu64 "-byte sample", len);
            r->st.memory_peak += len - r->bcap[i];
            r->bbuf[i] = nb;
            r->bcap[i] = len;
        }
        if (len) r->breq[nreq++] = (pagein_range){r->bloc[i].file, r->bloc[i].offset, len, r->bbuf[i]};
    }
    struct pi_rplan plan;
    int ranges = r->o.kind == PAGEIN_READER_RANGES;
    FORWARD_IF(pi_ranges_plan(r->breq, nreq, r->d->nfiles, r->sizes, r->o.max_gap, r->o.max_block, !ranges, &plan));
    uint64_t cap0 = r->scratch.cap;
    int rc = pi_ranges_exec(&r->fsrc, r->breq, &plan, r->o.queue_depth, &r->crew, &r->scratch);
    r->st.memory_peak += r->scratch.cap - cap0;
    r->st.io.requests += nreq;
    r->st.io.reads += plan.nblocks;
    r->st.io.bytes_requested += plan.bytes_requested;
    r->st.io.bytes_read += plan.bytes_read;
    r->st.io.bytes_wasted += plan.bytes_wasted;
    pi_rplan_free(&plan);
    FORWARD_IF(rc);
    r->pos += bn;
    r->bn = bn;
    r->bi = 0;
    return 0;
}

static int next_batched(pagein_reader *r, pagein_sample *s) {
    if (r->bi == r->bn) {
        if (r->pos >= r->d->nsamples) return 0;
        FORWARD_IF(fill_batch(r));
    }
    size_t i = r->bi++;
    s->id = r->bids[i];
    s->data = r->bbuf[i];
    s->length = r->bloc[i].length;
    return 1;
}

static int next_mmap(pagein_reader *r, pagein_sample *s) {
    if (r->pos >= r->d->nsamples) return 0;
    pagein_sample_loc loc;
    uint64_t id = order_at(r, r->pos);
    FORWARD_IF(pagein_dataset_locate(r->d, id, &loc));
    r->pos++;
    s->id = id;
    s->data = r->maps[loc.file] ? r->maps[loc.file] + loc.offset : (const void *)"";
    s->length = loc.length;
    return 1;
}

/* ---- block -------------------------------------------------------------- */

static int build_blocks(pagein_reader *r) {
    uint64_t n = r->d->nsamples, bb = r->o.block_bytes;
    r->blocks = pi_malloc(sizeof *r->blocks * (size_t)(n < 1024 ? n : 1024));
    size_t cap = n < 1024 ? (size_t)n : 1024;
    if (!r->blocks) return pi_err(-ENOMEM, "reader: out of memory");
    struct dblock *cur = NULL;
    uint64_t lo = 0, hi = 0;
    for (uint64_t id = 0; id < n; id++) {
        pagein_sample_loc l;
        FORWARD_IF(pagein_dataset_locate(r->d, id, &l));
        uint64_t end = l.offset + l.length;
        if (cur && cur->file == l.file && cur->count < UINT32_MAX) {
            uint64_t nlo = l.length ? PI_MIN(lo, l.offset) : lo, nhi = l.length ? PI_MAX(hi, end) : hi;
            if (nhi - nlo <= bb || (cur->len == 0 && l.length == 0)) {
                lo = nlo, hi = nhi;
                cur->off = lo;
                cur->len = hi - lo;
                cur->count++;
                continue;
            }
        }
        if (r->nblocks == cap) {
            struct dblock *nb = pi_realloc(r->blocks, 2 * cap * sizeof *nb);
            if (!nb) return pi_err(-ENOMEM, "reader: out of memory");
            r->blocks = nb;
            cap *= 2;
        }
        cur = &r->blocks[r->nblocks++];
        lo = l.length ? l.offset : 0;
        hi = l.length ? end : 0;
        *cur = (struct dblock){l.file, lo, hi - lo, id, 1};
    }
    for (size_t b = 0; b < r->nblocks; b++) {
        r->slot_cap = PI_MAX(r->slot_cap, r->blocks[b].len);
        r->max_count = PI_MAX(r->max_count, r->blocks[b].count);
    }
    r->border = pi_malloc(r->nblocks * sizeof *r->border);
    if (!r->border) return pi_err(-ENOMEM, "reader: out of memory");
    r->st.blocks = r->nblocks;
    return 0;
}

/* A block is read as a few large chunks at once on the range engine: one
 * buffered stream is limited by readahead, a handful keep the device (or a
 * remote server) busy. Chunks are at least 512 KiB, so every read stays
 * large. */
static int read_block(pagein_reader *r, const struct dblock *blk, uint8_t *buf) {
    if (!blk->len) return 0;
    uint64_t chunk = PI_MAX((uint64_t)512 << 10, (blk->len + r->o.block_threads - 1) / r->o.block_threads);
    chunk = pi_align_up(chunk, 4096);
    struct pi_span sp = {blk->file, blk->off, blk->len, buf};
    struct pi_engine_opts o = {.deliver = PI_DELIVER_BUFFERS, .request_bytes = chunk, .depth = r->o.block_threads,
                               .max_gap = 0, .crew = &r->crew};
    return pi_engine_run(r->fsrc.srcs, r->fsrc.n, &sp, 1, &o, NULL);
}

static void *loader_main(void *arg) {
    pagein_reader *r = arg;
    pthread_mutex_lock(&r->mu);
    while (!r->quit) {
        int s = -1;
        if (!r->err && r->load_pos < r->nblocks)
            for (unsigned k = 0; k < r->K; k++)
                if (r->slots[k].state == SLOT_FREE) {
                    s = (int)k;
                    break;
                }
        if (s < 0) {
            pthread_cond_wait(&r->cv_load, &r->mu);
            continue;
        }
        struct slot *sl = &r->slots[s];
        size_t b = r->border[r->load_pos++];
        const struct dblock *blk = &r->blocks[b];
        sl->state = SLOT_LOADING;
        sl->seq = r->load_pos - 1;
        sl->block = b;
        uint64_t gen = r->gen;
        pthread_mutex_unlock(&r->mu);
        int rc = read_block(r, blk, sl->buf);
        pthread_mutex_lock(&r->mu);
        if (gen != r->gen) { /* the epoch was restarted meanwhile */
            sl->state = SLOT_FREE;
            continue;
        }
        if (rc < 0) {
            r->err = rc;
            snprintf(r->err_detail, sizeof r->err_detail, "%s", pagein_last_error_detail());
            sl->state = SLOT_FREE;
        } else {
            /* stored descending so that popping from the end is ascending */
            for (uint32_t j = 0; j < blk->count; j++) sl->left[j] = blk->count - 1 - j;
            sl->nleft = blk->count;
            sl->state = SLOT_READY;
            r->ready++;
            r->st.io.requests += blk->count;
            r->st.io.reads++;
            r->st.io.bytes_read += blk->len;
            r->st.io.bytes_requested += blk->len;
        }
        pthread_cond_broadcast(&r->cv_cons);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static void release_pending(pagein_reader *r) {
    if (r->release >= 0) {
        r->slots[r->release].state = SLOT_FREE;
        r->release = -1;
        pthread_cond_signal(&r->cv_load);
    }
}

static int start_blocks(pagein_reader *r) {
    pthread_mutex_lock(&r->mu);
    r->gen++;
    r->release = -1;
    for (unsigned k = 0; k < r->K; k++)
        if (r->slots[k].state != SLOT_LOADING) r->slots[k].state = SLOT_FREE;
    r->ready = 0;
    r->err = 0;
    r->load_pos = r->consumed = 0;
    /* The draw window: blocks at order positions < window_end that are not
     * drained, W = K-1 of them (1 in order), leaving one slot for the
     * loader to work ahead. Drawing only from this window, never from
     * whatever happens to be loaded, keeps the order a function of the
     * seed alone. */
    size_t w = (r->o.flags & PAGEIN_READER_IN_ORDER) || r->K == 1 ? 1 : r->K - 1;
    r->window_end = PI_MIN(w, r->nblocks);
    for (size_t b = 0; b < r->nblocks; b++) r->border[b] = b;
    uint64_t s = pagein_epoch_seed(r->o.seed, r->epoch);
    if (!(r->o.flags & PAGEIN_READER_IN_ORDER))
        for (size_t i = r->nblocks; i > 1; i--) {
            size_t j = (size_t)pi_rand_below(&s, i), t = r->border[i - 1];
            r->border[i - 1] = r->border[j];
            r->border[j] = t;
        }
    r->rng = s ^ 0xb10cb10cb10cull;
    pthread_cond_signal(&r->cv_load);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

static int next_block(pagein_reader *r, pagein_sample *s) {
    int in_order = (r->o.flags & PAGEIN_READER_IN_ORDER) != 0;
    pthread_mutex_lock(&r->mu);
    release_pending(r);
    struct slot *sl = NULL;
    int rc = 0;
    for (;;) {
        if (r->err) {
            rc = pi_err(r->err, "%s", r->err_detail);
            break;
        }
        if (r->consumed == r->nblocks) break; /* end of epoch */
        /* every block of the window must be loaded before a draw; the
         * window is walked in block-order position (not slot) order, as
         * which slot a block lands in depends on timing */
        size_t in_window = r->window_end - r->consumed, ready = 0;
        uint64_t total = 0;
        for (unsigned k = 0; k < r->K; k++)
            if (r->slots[k].state == SLOT_READY && r->slots[k].seq < r->window_end) {
                r->win[ready++] = &r->slots[k];
                total += r->slots[k].nleft;
            }
        if (ready == in_window) {
            for (size_t a = 1; a < ready; a++) /* insertion sort: K is small */
                for (size_t b = a; b > 0 && r->win[b - 1]->seq > r->win[b]->seq; b--) {
                    struct slot *t = r->win[b];
                    r->win[b] = r->win[b - 1];
                    r->win[b - 1] = t;
                }
            uint64_t x = in_order ? 0 : pi_rand_below(&r->rng, total);
            for (size_t a = 0; a < ready; a++) {
                struct slot *c = r->win[a];
                if (x < c->nleft) {
                    sl = c;
                    /* move the drawn entry to the end, where it is popped */
                    uint32_t t = c->left[c->nleft - 1 - x];
                    c->left[c->nleft - 1 - x] = c->left[c->nleft - 1];
                    c->left[c->nleft - 1] = t;
                    break;
                }
                x -= c->nleft;
            }
            break;
        }
        if (!r->loader_on) {
            rc = pi_err(PAGEIN_E_INVALID, "reader: loader not running");
            break;
        }
        pthread_cond_wait(&r->cv_cons, &r->mu);
    }
    if (sl) {
        const struct dblock *blk = &r->blocks[sl->block];
        uint32_t j = sl->left[--sl->nleft];
        pagein_sample_loc l;
        rc = pagein_dataset_locate(r->d, blk->first + j, &l);
        if (rc == 0) {
            s->id = blk->first + j;
            s->length = l.length;
            s->data = l.length ? sl->buf + (l.offset - blk->off) : sl->buf;
            rc = 1;
        }
        if (sl->nleft == 0) {
            sl->state = SLOT_DRAINED;
            r->release = (int)(sl - r->slots);
            r->ready--;
            r->consumed++;
            if (r->window_end < r->nblocks) r->window_end++;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* ---- open / next / close ------------------------------------------------ */

void pagein_reader_close(pagein_reader *r) {
    if (!r) return;
    if (r->loader_on) {
        pthread_mutex_lock(&r->mu);
        r->quit = 1;
        pthread_cond_broadcast(&r->cv_load);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->loader, NULL);
    }
    if (r->sync_on) {
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv_load);
        pthread_cond_destroy(&r->cv_cons);
    }
    if (r->crew_on) pi_crew_stop(&r->crew);
    pi_free(r->scratch.p);
    pi_fdsrcs_free(&r->fsrc);
    if (r->slots)
        for (unsigned k = 0; k < r->K; k++) {
            pi_free(r->slots[k].buf);
            pi_free(r->slots[k].left);
        }
    pi_free(r->slots);
    pi_free(r->win);
    pi_free(r->blocks);
    pi_free(r->border);
    if (r->maps) {
        for (size_t i = 0; i < r->d->nfiles; i++)
            if (r->maps[i]) munmap(r->maps[i], r->d->files[i].size);
        pi_free(r->maps);
    }
    if (r->bbuf)
        for (size_t i = 0; i < r->o.batch; i++) pi_free(r->bbuf[i]);
    pi_free(r->bbuf);
    pi_free(r->bcap);
    pi_free(r->bids);
    pi_free(r->breq);
    pi_free(r->bloc);
    pi_free(r->perm);
    if (r->fds) {
        for (size_t i = 0; i < r->d->nfiles; i++)
            if (r->fds[i] >= 0) close(r->fds[i]);
        pi_free(r->fds);
    }
    pi_free(r->sizes);
    pi_free(r);
}

static int reader_init(pagein_reader *r) {
    pagein_dataset *d = r->d;
    pagein_reader_opts *o = &r->o;
    r->sizes = pi_malloc(d->nfiles * sizeof *r->sizes);
    if (!r->sizes) return pi_err(-ENOMEM, "reader: out of memory");
    for (size_t i = 0; i < d->nfiles; i++) r->sizes[i] = d->files[i].size;
    for (uint64_t id = 0; id < d->nsamples; id++) {
        pagein_sample_loc l;
        FORWARD_IF(pagein_dataset_locate(d, id, &l));
        r->max_len = PI_MAX(r->max_len, l.length);
        if (d->kind == PI_DS_RECORDS) break; /* all the same size */
    }
    switch (o->kind) {
    case PAGEIN_READER_GLOBAL:
    case PAGEIN_READER_RANGES: {
        FORWARD_IF(reopen_files(r, o->kind == PAGEIN_READER_GLOBAL ? POSIX_FADV_RANDOM : POSIX_FADV_NORMAL));
        size_t b = o->batch;
        r->bids = pi_calloc(b, sizeof *r->bids);
        r->bbuf = pi_calloc(b, sizeof *r->bbuf);
        r->bcap = pi_calloc(b, sizeof *r->bcap);
        r->breq = pi_calloc(b, sizeof *r->breq);
        r->bloc = pi_calloc(b, sizeof *r->bloc);
        if (!r->bids || !r->bbuf || !r->bcap || !r->breq || !r->bloc) return pi_err(-ENOMEM, "reader: out of memory");
        uint64_t bound;
        if (pi_mul_overflow(b, r->max_len, &bound)) bound = UINT64_MAX;
        r->st.memory_bound = bound;
        FORWARD_IF(engine_sources(r));
        FORWARD_IF(pi_crew_start(&r->crew, o->queue_depth));
        r->crew_on = 1;
        return start_order(r);
    }
    case PAGEIN_READER_MMAP:
        r->maps = pi_calloc(d->nfiles, sizeof *r->maps);
        if (!r->maps) return pi_err(-ENOMEM, "reader: out of memory");
        for (size_t i = 0; i < d->nfiles; i++) {
            if (!d->files[i].size) continue;
            void *p = mmap(NULL, d->files[i].size, PROT_READ, MAP_SHARED, d->files[i].fd, 0);
            if (p == MAP_FAILED) return pi_err(-errno, "%s: mmap: %s", d->files[i].path, strerror(errno));
            r->maps[i] = p;
        }
        return start_order(r);
    case PAGEIN_READER_BLOCK: {
        FORWARD_IF(reopen_files(r, POSIX_FADV_SEQUENTIAL));
        FORWARD_IF(build_blocks(r));
        r->K = o->buffer_blocks;
        uint64_t bound;
        RETURN_IF(pi_mul_overflow(r->K, r->slot_cap, &bound) || bound > SIZE_MAX / 2, PAGEIN_E_LIMIT,
                  "reader: %u blocks of %" PRIu64 " bytes do not fit in memory", r->K, r->slot_cap);
        r->slots = pi_calloc(r->K, sizeof *r->slots);
        r->win = pi_calloc(r->K, sizeof *r->win);
        if (!r->slots || !r->win) return pi_err(-ENOMEM, "reader: out of memory");
        for (unsigned k = 0; k < r->K; k++) {
            r->slots[k].buf = pi_malloc(r->slot_cap ? r->slot_cap : 1);
            r->slots[k].left = pi_malloc((size_t)r->max_count * sizeof(uint32_t));
            if (!r->slots[k].buf || !r->slots[k].left)
                return pi_err(-ENOMEM, "reader: out of memory for %u blocks of %" PRIu64 " bytes", r->K, r->slot_cap);
        }
        r->st.memory_bound = bound;
        r->st.memory_peak = bound;
        r->release = -1;
        FORWARD_IF(engine_sources(r));
        FORWARD_IF(pi_crew_start(&r->crew, o->block_threads));
        r->crew_on = 1;
        pthread_mutex_init(&r->mu, NULL);
        pthread_cond_init(&r->cv_load, NULL);
        pthread_cond_init(&r->cv_cons, NULL);
        r->sync_on = 1;
        FORWARD_IF(start_blocks(r));
        int e = pthread_create(&r->loader, NULL, loader_main, r);
        RETURN_IF(e, -e, "reader: cannot start the block loader thread: %s", strerror(e));
        r->loader_on = 1;
        return 0;
    }
    }
    return pi_err(PAGEIN_E_INVALID, "reader: unknown kind %d", (int)o->kind);
}

int pagein_reader_open(pagein_reader **out, pagein_dataset *d, const pagein_reader_opts *opts) {
    pi_err_clear();
    RETURN_IF(!out || !d, PAGEIN_E_INVALID, "reader: NULL argument");
    RETURN_IF(d->nsamples == 0, PAGEIN_E_INVALID, "reader: the dataset has no samples");
    for (size_t i = 0; i < d->nfiles; i++)
        RETURN_IF(d->files[i].count && (d->files[i].fd < 0 || !d->addressable), PAGEIN_E_UNSUPPORTED,
                  "reader: %s: %s shard that is remote, compressed or columnar: read it with pagein_pipe", d->files[i].path,
                  pagein_dataset_format(d, i));
    pagein_reader_opts o = PAGEIN_READER_OPTS_INIT;
    if (opts) {
        RETURN_IF(opts->size < sizeof(size_t), PAGEIN_E_INVALID, "reader: options size %zu", opts->size);
        memcpy(&o, opts, PI_MIN(opts->size, sizeof o));
        o.size = sizeof o;
    }
    RETURN_IF((unsigned)o.kind > PAGEIN_READER_MMAP, PAGEIN_E_INVALID, "reader: unknown kind %d", (int)o.kind);
    if (!o.queue_depth) o.queue_depth = PAGEIN_RANGES_DEFAULT_QUEUE_DEPTH;
    if (!o.batch) o.batch = 256;
    if (!o.block_bytes) o.block_bytes = 16u << 20;
    if (!o.buffer_blocks) o.buffer_blocks = 8;
    if (!o.block_threads) o.block_threads = 4;
    if (!o.max_gap) o.max_gap = PAGEIN_RANGES_DEFAULT_MAX_GAP;
    if (!o.max_block) o.max_block = PAGEIN_RANGES_DEFAULT_MAX_BLOCK;
    RETURN_IF(o.block_threads > 64, PAGEIN_E_LIMIT, "reader: %u block threads (at most 64)", o.block_threads);
    RETURN_IF(o.queue_depth > 256, PAGEIN_E_LIMIT, "reader: queue depth %u (at most 256)", o.queue_depth);
    RETURN_IF(o.buffer_blocks > 1024, PAGEIN_E_LIMIT, "reader: %u buffer blocks (at most 1024)", o.buffer_blocks);
    pagein_reader *r = pi_calloc(1, sizeof *r);
    if (!r) return pi_err(-ENOMEM, "reader: out of memory");
    r->d = d;
    r->o = o;
    r->release = -1;
    r->st.epochs_started = 1;
    int rc = reader_init(r);
    if (rc < 0) {
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", pagein_last_error_detail());
        pagein_reader_close(r);
        return pi_err(rc, "%s", keep);
    }
    *out = r;
    return 0;
}

int pagein_reader_next(pagein_reader *r, pagein_sample *s) {
    RETURN_IF(!r || !s, PAGEIN_E_INVALID, "reader: NULL argument");
    int rc;
    switch (r->o.kind) {
    case PAGEIN_READER_BLOCK: rc = next_block(r, s); break;
    case PAGEIN_READER_MMAP: rc = next_mmap(r, s); break;
    default: rc = next_batched(r, s); break;
    }
    if (rc > 0) r->st.samples++;
    return rc;
}

int pagein_reader_start_epoch(pagein_reader *r, uint64_t epoch) {
    RETURN_IF(!r, PAGEIN_E_INVALID, "reader: NULL argument");
    r->epoch = epoch;
    r->st.epochs_started++;
    if (r->o.kind == PAGEIN_READER_BLOCK) return start_blocks(r);
    return start_order(r);
}

void pagein_reader_get_stats(const pagein_reader *r, pagein_reader_stats *st) {
    if (!r || !st) return;
    pagein_reader *w = (pagein_reader *)r; /* the loader updates counters under the lock */
    if (w->sync_on) pthread_mutex_lock(&w->mu);
    *st = r->st;
    if (w->sync_on) pthread_mutex_unlock(&w->mu);
}
