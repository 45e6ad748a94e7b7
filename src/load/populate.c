/* populate.c - making byte ranges of a model resident, in parallel.
 *
 * One cold stream (a single thread faulting or read()ing) keeps one request
 * in flight and runs at a third of what the disk delivers
 * (specs/LINUX-IO.md). So ranges are merged, cut into chunks of a few MiB
 * and handed to pi_parallel() threads, each of which pages its chunk in with
 * one of three methods (PAGEIN_POPULATE_METHOD=madvise|pread|readahead;
 * `pagein bench load` measures them, docs/LOADING.md records the choice):
 *
 *  - madvise:   MADV_POPULATE_READ on the mapping. Faults the pages in and
 *               maps them; beyond end of file it returns EFAULT instead of
 *               raising SIGBUS, so a file truncated underneath is reported
 *               as PAGEIN_E_TRUNCATED.
 *  - pread:     pread() into a per-thread scratch buffer (fills the page
 *               cache with one large request), then MADV_POPULATE_READ maps
 *               the now cached pages.
 *  - readahead: readahead() of the chunk (queues the whole chunk at once),
 *               then MADV_POPULATE_READ waits for and maps it.
 *
 * Nothing here ever touches a mapped page directly, so no path can SIGBUS.
 *
 * The mapping's fill row (pi_fill_mapping, at the end) is what the prefetch
 * pager and the lazy waits page a mapped model in with; this file calls
 * only range.c below it. The READ strategy (pi_model_read_all) is in
 * read.c, on the range engine.
 */
#include "load.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

#define POP_CHUNK_DEFAULT (4ull << 20)
#define MAX_SLOTS 64

static uint64_t page_size(void) {
    static _Atomic uint64_t ps;
    uint64_t p = atomic_load(&ps);
    if (!p) {
        long v = sysconf(_SC_PAGESIZE);
        p = v > 0 ? (uint64_t)v : 4096;
        atomic_store(&ps, p);
    }
    return p;
}

enum pi_pop_method pi_pop_method_from_env(void) {
    const char *e = getenv("PAGEIN_POPULATE_METHOD");
    if (e && strcmp(e, "pread") == 0) return PI_POP_PREAD;
    if (e && strcmp(e, "readahead") == 0) return PI_POP_READAHEAD;
    return PI_POP_MADVISE;
}

struct pop {
    pagein_model *m;
    struct pi_range *c;
    size_t n;
    enum pi_pop_method method;
    uint64_t chunk;
    /* pread scratch buffers, one per concurrently running item */
    uint8_t *scratch[MAX_SLOTS];
    _Atomic int busy[MAX_SLOTS];
    _Atomic int32_t *cursor; /* pager: stop once the cursor passes group */
    int32_t group;
};

static int truncated(const pagein_file *f, uint64_t off, int err) {
    struct stat st;
    long long now = f->fd >= 0 && fstat(f->fd, &st) == 0 ? (long long)st.st_size : -1;
    return pi_err(PAGEIN_E_TRUNCATED, "%s: paging in offset %llu failed (%s): file is now %lld bytes, was %zu",
                  f->path, (unsigned long long)off, strerror(err), now, f->len);
}

/* pread the whole of [off, off+len) into buf (pi_pread_full, the one
 * read-until-done loop); end of file = truncated, naming the file. */
static int pread_full(const pagein_file *f, int fd, uint8_t *buf, uint64_t off, uint64_t len) {
    int rc = pi_pread_full(fd, buf, len, off);
    if (rc == PAGEIN_E_TRUNCATED) return truncated(f, off, EIO);
    if (rc < 0) pi_err_prefix(f->path);
    return rc;
}

static int populate_map(const pagein_file *f, uint64_t off, uint64_t len, int *unsupported) {
    uint64_t ps = page_size();
    uint64_t a = off & ~(ps - 1);
    uint64_t e = pi_align_up(off + len, ps);
    uint64_t maplen = pi_align_up(f->len, ps);
    if (e > maplen) e = maplen;
    if (e <= a) return 0;
    if (madvise((void *)(f->base + a), e - a, MADV_POPULATE_READ) == 0) return 0;
    int err = errno;
    if (err == EINVAL) {
        *unsupported = 1;
        return 0;
    }
    if (err == EFAULT || err == EIO) return truncated(f, a, err);
    if (err == EINTR || err == EAGAIN) return pi_err(-err, "%s: paging in interrupted", f->path);
    return pi_err(-err, "%s: MADV_POPULATE_READ at offset %llu: %s", f->path, (unsigned long long)a, strerror(err));
}

static int pop_item(void *ctx, size_t i) {
    struct pop *p = ctx;
    pagein_model *m = p->m;
    if (atomic_load(&m->cancel) || (p->cursor && atomic_load(p->cursor) > p->group))
        return pi_err(PAGEIN_E_CANCELLED, "paging cancelled");
    const struct pi_range *r = &p->c[i];
    const pagein_file *f = m->files[r->file];
    if (!f->mapped) return 0;
    int unsupported = 0;
    if (p->method == PI_POP_READAHEAD) readahead(f->fd, (off64_t)r->off, (size_t)r->len);
    if (p->method == PI_POP_PREAD) {
        int slot = -1;
        for (int s = 0; s < MAX_SLOTS && slot < 0; s++) {
            int z = 0;
            if (atomic_compare_exchange_strong(&p->busy[s], &z, 1)) slot = s;
        }
        if (slot < 0) return pi_err(PAGEIN_E_LIMIT, "populate: more than %d threads", MAX_SLOTS);
        if (!p->scratch[slot]) p->scratch[slot] = pi_malloc(p->chunk);
        int rc = p->scratch[slot] ? pread_full(f, f->fd, p->scratch[slot], r->off, r->len)
                                  : pi_err(-ENOMEM, "out of memory");
        atomic_store(&p->busy[slot], 0);
        FORWARD_IF(rc);
    }
    FORWARD_IF(populate_map(f, r->off, r->len, &unsupported));
    if (unsupported) {
        /* kernel before 5.14: fill the page cache with pread; pages then
         * arrive with minor faults on first touch. */
        uint8_t *tmp = pi_malloc(r->len);
        if (!tmp) return pi_err(-ENOMEM, "out of memory");
        int rc = pread_full(f, f->fd, tmp, r->off, r->len);
        pi_free(tmp);
        FORWARD_IF(rc);
    }
    return 0;
}

/* Sorts, merges (touching or within one page) and cuts into chunks. With
 * m given, ranges are first widened to whole 2 MiB blocks of the file
 * (clamped to its size) and chunks cut at file offsets that are multiples
 * of chunk: then every 2 MiB block is paged in by one thread and large
 * folios get mapped whole (one PMD) instead of by 512 PTEs, which makes
 * every later access cheaper (on this machine, touching 1.3 GB of
 * PTE-mapped pages takes seconds, PMD-mapped a tenth of a second). */
static int make_chunks(struct pi_range *r, size_t n, uint64_t chunk, struct pi_range **out, size_t *nout,
                       const pagein_model *m) {
    const uint64_t blk = 2u << 20;
    if (m)
        for (size_t i = 0; i < n; i++) {
            if (!r[i].len) continue;
            uint64_t flen = m->files[r[i].file]->len;
            uint64_t a = r[i].off & ~(blk - 1), e = pi_align_up(r[i].off + r[i].len, blk);
            if (e > flen) e = flen;
            r[i].off = a;
            r[i].len = e > a ? e - a : 0;
        }
    qsort(r, n, sizeof *r, pi_range_cmp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!r[i].len) continue;
        if (k && r[k - 1].file == r[i].file && r[i].off <= r[k - 1].off + r[k - 1].len + page_size()) {
            uint64_t e = PI_MAX(r[k - 1].off + r[k - 1].len, r[i].off + r[i].len);
            r[k - 1].len = e - r[k - 1].off;
        } else {
            r[k++] = r[i];
        }
    }
    /* cut at absolute multiples of chunk (aligned ranges stay aligned) */
    size_t total = 0;
    for (size_t i = 0; i < k; i++) total += (size_t)((r[i].len + chunk - 1) / chunk) + 1;
    struct pi_range *c = pi_malloc((total ? total : 1) * sizeof *c);
    if (!c) return pi_err(-ENOMEM, "out of memory");
    size_t j = 0;
    for (size_t i = 0; i < k; i++) {
        uint64_t o = r[i].off, e = r[i].off + r[i].len;
        while (o < e) {
            uint64_t next = (o / chunk + 1) * chunk;
            if (next > e) next = e;
            c[j].file = r[i].file;
            c[j].off = o;
            c[j].len = next - o;
            j++;
            o = next;
        }
    }
    *out = c;
    *nout = j;
    return 0;
}

int pi_model_populate(pagein_model *m, struct pi_range *r, size_t n) {
    return pi_model_populate_with(m, r, n, m->pop_method);
}

int pi_model_populate_all(pagein_model *m) {
    struct pi_range *r = pi_malloc((m->nfiles ? m->nfiles : 1) * sizeof *r);
    if (!r) return pi_err(-ENOMEM, "out of memory");
    for (size_t i = 0; i < m->nfiles; i++) r[i] = (struct pi_range){(uint32_t)i, 0, m->files[i]->len};
    int rc = pi_model_populate(m, r, m->nfiles);
    pi_free(r);
    return rc;
}

int pi_model_populate_with(pagein_model *m, struct pi_range *r, size_t n, enum pi_pop_method method) {
    return pi_model_populate_group(m, r, n, method, NULL, 0);
}

int pi_model_populate_group(pagein_model *m, struct pi_range *r, size_t n, enum pi_pop_method method,
                            _Atomic int32_t *cursor, int32_t group) {
    uint32_t fl = pi_model_flags(m);
    if (fl & PI_ST_PRIVATE) return 0; /* already in anonymous memory */
    /* a header-only model (lazy, remote): nothing to page in, and saying
     * "resident" would hand the caller NULL data pointers */
    for (size_t i = 0; (fl & PI_ST_HEADERS_ONLY) && i < n; i++)
        if (r[i].len && r[i].file < m->nfiles && !m->files[r[i].file]->mapped)
            return pi_model_no_data(m, r[i].file, r[i].off);
    struct pop *p = pi_calloc(1, sizeof *p);
    if (!p) return pi_err(-ENOMEM, "out of memory");
    p->m = m;
    p->method = method;
    p->cursor = cursor;
    p->group = group;
    p->chunk = m->opts.chunk_bytes ? pi_align_up(m->opts.chunk_bytes, 2u << 20) : POP_CHUNK_DEFAULT;
    int rc = make_chunks(r, n, p->chunk, &p->c, &p->n, method == PI_POP_READAHEAD ? NULL : m);
    if (rc == 0) rc = pi_parallel(m->opts.threads, p->n, pop_item, p);
    for (int s = 0; s < MAX_SLOTS; s++) pi_free(p->scratch[s]);
    pi_free(p->c);
    pi_free(p);
    return rc;
}

/* ---- several groups in one parallel pass (the pager) ------------------- */

struct gpop {
    struct pop pop;          /* chunks of every group, group by group */
    uint32_t *tag;           /* chunk -> position in groups[] */
    const int32_t *groups;
    _Atomic size_t *left;    /* chunks still to finish, per group */
    _Atomic int *rc;         /* first failure, per group */
    char (*detail)[256];
    _Atomic int32_t *cursor;
    const struct pi_group_hooks *h;
    /* progress: chunks finished, and per group the first chunk and the
     * length of the finished prefix (under mu) */
    uint8_t *fin;
    size_t *first, *prefix;
    pthread_mutex_t mu;
};

static void group_finished(struct gpop *gp, size_t k) {
    int rc = atomic_load(&gp->rc[k]);
    if (rc < 0) pi_err(rc, "%s", gp->detail[k]);
    gp->h->done(gp->h->arg, gp->groups[k], rc);
}

/* Chunk i of group k is in: advance k's finished prefix and report where it
 * ends. Reports may arrive out of order between threads; the receiver keeps
 * the furthest. */
static void chunk_finished(struct gpop *gp, size_t k, size_t i) {
    if (!gp->h->progress) return;
    pthread_mutex_lock(&gp->mu);
    gp->fin[i] = 1;
    size_t p0 = gp->prefix[k], n = gp->first[k] + gp->prefix[k];
    while (n < gp->pop.n && gp->tag[n] == k && gp->fin[n]) n++;
    size_t p1 = gp->prefix[k] = n - gp->first[k];
    pthread_mutex_unlock(&gp->mu);
    if (p1 > p0) {
        const struct pi_range *c = &gp->pop.c[n - 1];
        gp->h->progress(gp->h->arg, gp->groups[k], c->file, c->off + c->len);
    }
}

static int grp_item(void *ctx, size_t i) {
    struct gpop *gp = ctx;
    size_t k = gp->tag[i];
    int32_t g = gp->groups[k];
    int rc = 0;
    int token = gp->h->enter ? gp->h->enter(gp->h->arg, g) : 0;
    if (atomic_load(&gp->pop.m->cancel) || (gp->cursor && atomic_load(gp->cursor) > g))
        rc = pi_err(PAGEIN_E_CANCELLED, "paging cancelled");
    else if (atomic_load(&gp->rc[k]) >= 0)
        rc = pop_item(&gp->pop, i);
    if (gp->h->leave) gp->h->leave(gp->h->arg, g, token);
    if (rc < 0) {
        int z = 0;
        if (atomic_compare_exchange_strong(&gp->rc[k], &z, rc))
            snprintf(gp->detail[k], sizeof gp->detail[k], "%s", pagein_last_error_detail());
    } else {
        chunk_finished(gp, k, i);
    }
    if (atomic_fetch_sub(&gp->left[k], 1) == 1) group_finished(gp, k);
    return 0; /* one group's failure never stops the others */
}

int pi_model_populate_groups(pagein_model *m, const int32_t *groups, size_t ng, enum pi_pop_method method,
                             _Atomic int32_t *cursor, const struct pi_group_hooks *h) {
    struct gpop *gp = pi_calloc(1, sizeof *gp);
    if (!gp) return pi_err(-ENOMEM, "out of memory");
    gp->pop.m = m;
    gp->pop.method = method;
    gp->pop.chunk = m->opts.chunk_bytes ? pi_align_up(m->opts.chunk_bytes, 2u << 20) : POP_CHUNK_DEFAULT;
    gp->groups = groups;
    gp->cursor = cursor;
    gp->h = h;
    pthread_mutex_init(&gp->mu, NULL);
    gp->left = pi_calloc(ng ? ng : 1, sizeof *gp->left);
    gp->rc = pi_calloc(ng ? ng : 1, sizeof *gp->rc);
    gp->detail = pi_calloc(ng ? ng : 1, sizeof *gp->detail);
    gp->first = pi_calloc(ng ? ng : 1, sizeof *gp->first);
    gp->prefix = pi_calloc(ng ? ng : 1, sizeof *gp->prefix);
    int rc = 0;
    size_t cap = 0;
    if (!gp->left || !gp->rc || !gp->detail || !gp->first || !gp->prefix) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < ng && rc == 0; k++) {
        int32_t g = groups[k];
        size_t nt = pi_group_nranges(m, g);
        struct pi_range *r = pi_malloc((nt ? nt : 1) * sizeof *r), *c = NULL;
        size_t nc = 0;
        if (!r) {
            rc = pi_err(-ENOMEM, "out of memory");
            break;
        }
        rc = make_chunks(r, pi_model_group_ranges(m, g, r), gp->pop.chunk, &c, &nc,
                         method == PI_POP_READAHEAD ? NULL : m);
        pi_free(r);
        if (rc < 0) break;
        if (gp->pop.n + nc > cap) {
            size_t ncap = (gp->pop.n + nc) * 2;
            struct pi_range *nr = pi_realloc(gp->pop.c, ncap * sizeof *nr);
            uint32_t *nt2 = pi_realloc(gp->tag, ncap * sizeof *nt2);
            if (nr) gp->pop.c = nr;
            if (nt2) gp->tag = nt2;
            if (!nr || !nt2) {
                pi_free(c);
                rc = pi_err(-ENOMEM, "out of memory");
                break;
            }
            cap = ncap;
        }
        if (nc) memcpy(gp->pop.c + gp->pop.n, c, nc * sizeof *c); /* gp->pop.c may still be NULL */
        for (size_t j = 0; j < nc; j++) gp->tag[gp->pop.n + j] = (uint32_t)k;
        gp->first[k] = gp->pop.n;
        gp->pop.n += nc;
        atomic_init(&gp->left[k], nc);
        atomic_init(&gp->rc[k], 0);
        pi_free(c);
    }
    if (rc == 0 && !(gp->fin = pi_calloc(gp->pop.n ? gp->pop.n : 1, 1))) rc = pi_err(-ENOMEM, "out of memory");
    if (rc < 0) goto out;
    for (size_t k = 0; k < ng; k++)
        if (atomic_load(&gp->left[k]) == 0) group_finished(gp, k); /* nothing to read */
    pi_parallel(m->pager_threads ? m->pager_threads : m->opts.threads, gp->pop.n, grp_item, gp);
out:
    for (int s2 = 0; s2 < MAX_SLOTS; s2++) pi_free(gp->pop.scratch[s2]);
    pi_free(gp->pop.c);
    pi_free(gp->tag);
    pi_free(gp->fin);
    pi_free(gp->first);
    pi_free(gp->prefix);
    pi_free((void *)gp->left);
    pi_free((void *)gp->rc);
    pi_free(gp->detail);
    pthread_mutex_destroy(&gp->mu);
    pi_free(gp);
    return rc;
}

void pi_model_release_group(pagein_model *m, int32_t g) {
    if (pi_model_flags(m) & PI_ST_PRIVATE) return;
    uint64_t ps = page_size();
    for (size_t i = m->lstart[g]; i < m->lstart[g + 1]; i++) {
        const pagein_tensor *t = m->lt[i];
        struct pi_range r;
        if (pi_tensor_nranges(m, t) != 1) continue; /* assembled: its pieces' pages stay */
        pi_tensor_ranges(m, t, &r);
        const pagein_file *f = m->files[r.file];
        if (!f->mapped) continue;
        /* only whole pages inside the tensor: a page shared with a
         * neighbouring tensor of another layer stays */
        uint64_t a = pi_align_up(r.off, ps);
        uint64_t e = (r.off + r.len) & ~(ps - 1);
        if (e <= a) continue;
        /* Unmap our view (the data stays in the file), then drop the clean,
         * now unmapped pages from the page cache. */
        madvise((void *)(f->base + a), e - a, MADV_DONTNEED);
        posix_fadvise(f->fd, (off_t)a, (off_t)(e - a), POSIX_FADV_DONTNEED);
    }
}

/* ---- the mapping's fill row (the pager, lazy waits) -------------------- */

/* With a budget, pages of the data sections that nobody maps are dropped
 * (after every pass of the pager: residency stays exact). */
static void trim(pagein_model *m) {
    uint64_t ps = page_size();
    for (size_t i = 0; i < m->nfiles; i++) {
        pagein_file *f = m->files[i];
        uint64_t a = pi_align_up(f->tab.data_start, ps);
        if (f->mapped && a < f->len) posix_fadvise(f->fd, (off_t)a, (off_t)(f->len - a), POSIX_FADV_DONTNEED);
    }
}

/* With a budget residency must be exact: MADV_RANDOM (no read-around on
 * faults, no async readahead) unless the caller asked for sequential
 * access, and the data sections start out dropped. */
static int map_prepare(pagein_model *m, uint64_t budget) {
    if (!budget) return 0;
    for (size_t i = 0; i < m->nfiles; i++) {
        pagein_file *f = m->files[i];
        if (!f->mapped || !f->len) continue;
        if (!(m->opts.hints & PAGEIN_HINT_SEQUENTIAL)) {
            madvise((void *)f->base, f->len, MADV_RANDOM);
            posix_fadvise(f->fd, 0, 0, POSIX_FADV_RANDOM);
        }
        uint64_t a = pi_align_up(f->tab.data_start, page_size());
        if (a < f->len) madvise((void *)(f->base + a), f->len - a, MADV_DONTNEED);
    }
    trim(m);
    return 0;
}

/* With a budget, exactly the ranges asked for (readahead() +
 * MADV_POPULATE_READ on the MADV_RANDOM mapping); else the model's method. */
static enum pi_pop_method map_method(const pagein_model *m, uint64_t budget) {
    return budget ? PI_POP_READAHEAD : m->pop_method;
}

static int map_load(pagein_model *m, struct pi_range *r, size_t n, uint64_t budget) {
    return pi_model_populate_with(m, r, n, map_method(m, budget));
}

static int map_pass(pagein_model *m, const int32_t *groups, size_t ng, uint64_t budget, _Atomic int32_t *cursor,
                    const struct pi_group_hooks *h) {
    int rc = pi_model_populate_groups(m, groups, ng, map_method(m, budget), cursor, h);
    if (budget) trim(m);
    return rc;
}

const struct pi_fill pi_fill_mapping = {
    .name = "mapping",
    .prepare = map_prepare,
    .load = map_load,
    .pass = map_pass,
    .release = pi_model_release_group,
};
