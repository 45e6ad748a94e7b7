/* mem.c - the one memory policy (mem.h): reuse first, fresh memory
 * populated ahead on its own threads, the page size measured. */
#include "../internal.h"
#include "mem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define MEM_ALIGN (2ull << 20)
#define FILL_CHUNK (4ull << 20)
#define KEEP_SLOTS 64 /* decoded columns keep several arrays each */
#define KEEP_SECONDS 60.0

/* ---- reuse: blocks given back, kept a little while ---------------------- */

static pthread_mutex_t keep_mu = PTHREAD_MUTEX_INITIALIZER;
static struct kept {
    void *p;
    size_t cap;
    double t;
} keep[KEEP_SLOTS];
static size_t nkeep;
static uint64_t kept_bytes;

static uint64_t keep_limit(void) {
    long pages = sysconf(_SC_PHYS_PAGES), ps = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && ps > 0 ? (uint64_t)pages * (uint64_t)ps : 0;
    uint64_t def = PI_MIN(ram / 16, 2ull << 30);
    return pi_env_size("PAGEIN_MEM_KEEP", def);
}

/* Drops blocks kept longer than KEEP_SECONDS (keep_mu held). */
static void expire_locked(double now) {
    size_t k = 0;
    for (size_t i = 0; i < nkeep; i++) {
        if (now - keep[i].t > KEEP_SECONDS) {
            munmap(keep[i].p, keep[i].cap);
            kept_bytes -= keep[i].cap;
        } else {
            keep[k++] = keep[i];
        }
    }
    nkeep = k;
}

/* fork() while another thread holds the list's lock (a DataLoader forking
 * its workers while a pipeline decodes) must not leave the child's copy
 * locked: the lock is taken around fork and released on both sides. */
static void keep_lock(void) { pthread_mutex_lock(&keep_mu); }
static void keep_unlock(void) { pthread_mutex_unlock(&keep_mu); }
static pthread_once_t keep_once = PTHREAD_ONCE_INIT;
static void keep_atfork(void) { pthread_atfork(keep_lock, keep_unlock, keep_unlock); }

/* A kept block of c bytes (a 2 MiB multiple) or a little more, taken off
 * the list; NULL if none fits. */
static void *take_kept(size_t c, size_t *cap) {
    pthread_once(&keep_once, keep_atfork);
    pthread_mutex_lock(&keep_mu);
    expire_locked(pi_now_s());
    size_t best = nkeep;
    for (size_t i = 0; i < nkeep; i++) /* the smallest block that fits, at most 1/4 larger */
        if (keep[i].cap >= c && keep[i].cap - c <= c / 4 && (best == nkeep || keep[i].cap < keep[best].cap))
            best = i;
    void *p = NULL;
    if (best < nkeep) {
        p = keep[best].p;
        *cap = keep[best].cap;
        kept_bytes -= keep[best].cap;
        keep[best] = keep[--nkeep];
    }
    pthread_mutex_unlock(&keep_mu);
    return p;
}

void *pi_mem_get(size_t len, size_t *cap, int noreserve, int *reused) {
    size_t c = (size_t)pi_align_up(len ? len : 1, MEM_ALIGN);
    if (reused) *reused = 0;
    if (!noreserve) {
        void *k = take_kept(c, cap);
        if (k) {
            if (reused) *reused = 1;
            return k;
        }
    }
    void *p = mmap(NULL, c, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (noreserve ? MAP_NORESERVE : 0),
                   -1, 0);
    if (p == MAP_FAILED) return NULL;
    *cap = c;
    return p;
}

void *pi_mem_get_read(size_t len, size_t *cap, int *reused, int *pool) {
    size_t c = (size_t)pi_align_up(len ? len : 1, MEM_ALIGN);
    *pool = 0;
    if (reused) *reused = 0;
    void *p = take_kept(c, cap);
    if (p) {
        if (reused) *reused = 1;
        return p;
    }
    const char *e = pi_env("PAGEIN_READ_HUGETLB");
    if (e && *e == '1') {
        /* the pool's pages are reserved at mmap (ENOMEM when it lacks
         * them: no fault can fail later); a huge page size other than 2
         * MiB refuses this length (EINVAL): either way, ordinary memory */
        p = mmap(NULL, c, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
        if (p != MAP_FAILED) {
            *cap = c;
            *pool = 1;
            return p;
        }
    }
    return pi_mem_get(len, cap, 0, reused);
}

void pi_mem_put(void *p, size_t cap) {
    if (!p) return;
    uint64_t lim = keep_limit();
    /* Kept pages stay resident (and backed by the host) for the next
     * pi_mem_get, but the kernel may take them under memory pressure
     * without writing them anywhere, so a kept block holds nothing the
     * machine needs. A block reused after that has zero pages where they
     * were taken (pi_mem_get's contract: stale or zero bytes). Advised
     * before the block is on the list: once there another thread may take
     * it and write it. */
    if (cap <= lim) madvise(p, cap, MADV_FREE);
    pthread_mutex_lock(&keep_mu);
    double now = pi_now_s();
    expire_locked(now);
    if (cap <= lim && nkeep < KEEP_SLOTS) {
        /* make room: the oldest first */
        while (nkeep && kept_bytes + cap > lim) {
            size_t o = 0;
            for (size_t i = 1; i < nkeep; i++)
                if (keep[i].t < keep[o].t) o = i;
            munmap(keep[o].p, keep[o].cap);
            kept_bytes -= keep[o].cap;
            keep[o] = keep[--nkeep];
        }
        keep[nkeep++] = (struct kept){p, cap, now};
        kept_bytes += cap;
        p = NULL;
    }
    pthread_mutex_unlock(&keep_mu);
    if (p) munmap(p, cap);
}

/* ---- growable arrays over the kept blocks ------------------------------ */

#if defined(__SANITIZE_ADDRESS__)
#define GROW_BIG SIZE_MAX /* under ASan every array stays on the heap, where overruns are caught */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GROW_BIG SIZE_MAX
#endif
#endif
#ifndef GROW_BIG
#define GROW_BIG ((size_t)256 << 10)
#endif

static _Atomic uint64_t grow_reused;

uint64_t pi_mem_grow_reused(void) { return atomic_load(&grow_reused); }

int pi_mem_grow_is_block(size_t bytes) { return bytes >= GROW_BIG; }

int pi_mem_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    if (!elem) elem = 1;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) {
        if (nc > SIZE_MAX / 2) return pi_err(-ENOMEM, "out of memory: %zu elements", need);
        nc *= 2;
    }
    if (nc > SIZE_MAX / elem) return pi_err(-ENOMEM, "out of memory: %zu elements of %zu bytes", nc, elem);
    size_t old = *cap * elem;
    if (nc * elem < GROW_BIG) { /* small arrays stay on the heap (old is smaller still) */
        void *np = pi_realloc(*p, nc * elem);
        if (!np) return pi_err(-ENOMEM, "out of memory: %zu elements of %zu bytes", nc, elem);
        *p = np;
        *cap = nc;
        return 0;
    }
    size_t bc;
    int reused;
    void *np = pi_mem_get(nc * elem, &bc, 0, &reused);
    if (!np) return pi_err(-ENOMEM, "out of memory: %zu elements of %zu bytes", nc, elem);
    if (reused) atomic_fetch_add(&grow_reused, (uint64_t)bc);
    if (*p && old) memcpy(np, *p, old);
    pi_mem_release(*p, *cap, elem);
    *p = np;
    *cap = bc / elem; /* bc is a multiple of 2 MiB; release rounds cap * elem back up to it */
    return 0;
}

void pi_mem_release(void *p, size_t cap, size_t elem) {
    if (!p) return;
    size_t b = cap * (elem ? elem : 1);
    if (b < GROW_BIG)
        pi_free(p);
    else
        pi_mem_put(p, (size_t)pi_align_up(b, MEM_ALIGN));
}

void pi_mem_trim(void) {
    pthread_mutex_lock(&keep_mu);
    for (size_t i = 0; i < nkeep; i++) munmap(keep[i].p, keep[i].cap);
    nkeep = 0;
    kept_bytes = 0;
    pthread_mutex_unlock(&keep_mu);
}

uint64_t pi_mem_kept(void) {
    pthread_mutex_lock(&keep_mu);
    uint64_t b = kept_bytes;
    pthread_mutex_unlock(&keep_mu);
    return b;
}

/* ---- the page size, measured ------------------------------------------- */

/* The last populate rate of each page size (bytes/s, 0 unknown) and when it
 * was measured, for the process: a fill starts from rates measured in the
 * last FRESH_S seconds. */
#define FRESH_S 2.0
#define FAST_BPS 1e9 /* a page size populating at least this fast is not re-probed */
#define PROBE_EVERY 16
static _Atomic double last_rate[2], last_t[2];

double pi_mem_small_rate(void) { return atomic_load(&last_rate[0]); }
void pi_mem_forget_rates(void) {
    for (int k = 0; k < 2; k++) {
        atomic_store(&last_rate[k], 0.0);
        atomic_store(&last_t[k], 0.0);
    }
}

/* PAGEIN_READ_HUGEPAGE=0|1 forces the size of measured blocks. */
static enum pi_mem_pages forced(enum pi_mem_pages pages) {
    if (pages != PI_MEM_PAGES_MEASURE) return pages;
    const char *hp = pi_env("PAGEIN_READ_HUGEPAGE");
    if (hp && (*hp == '0' || *hp == '1')) return *hp == '1' ? PI_MEM_PAGES_HUGE : PI_MEM_PAGES_SMALL;
    return PI_MEM_PAGES_MEASURE;
}

/* Populates and then writes every 4 KiB of [p, p + len) without changing a
 * byte. MADV_POPULATE_WRITE maps the pages without a fault each (Linux
 * 5.14 and later), but on a VM whose host took the memory back the host's
 * page comes in only at the first real access (measured: writing a byte
 * per 4 KiB after MADV_POPULATE_WRITE took 8.2 s per GiB, as long as
 * faulting it in): the write pays that here, off the I/O path. */
static void populate_range(uint8_t *p, size_t len) {
    madvise(p, len, MADV_POPULATE_WRITE); /* EINVAL before 5.14: the writes fault */
    for (size_t i = 0; i < len; i += 4096)
        __atomic_fetch_or(p + i, (uint8_t)0, __ATOMIC_RELAXED); /* a write that loses no concurrent one */
}

/* ---- the fill ----------------------------------------------------------- */

struct fregion {
    uint8_t *p;
    size_t len;
    size_t c0; /* index of its first chunk */
};

struct pi_mem_fill {
    struct fregion *r;
    size_t nr;
    size_t *by_addr; /* region indices sorted by address */
    size_t nchunks;
    uint8_t *done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t next, prefix;
    int stop;
    enum pi_mem_pages pages; /* after forced() */
    double rate[2];          /* MEASURE: this fill's rate per page size (0: small, 1: huge; 0 unknown) */
    double bytes[2], secs[2]; /* MEASURE: what the rates are made of */
    unsigned since_probe;    /* MEASURE: chunks since the slower size was last tried */
    pthread_t tids[8];
    unsigned nt;
    struct pi_mem_stats st;
};

static struct fregion *region_of_chunk(struct pi_mem_fill *f, size_t c) {
    size_t lo = 0, hi = f->nr;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (f->r[mid].c0 <= c) lo = mid;
        else hi = mid;
    }
    return &f->r[lo];
}

/* MEASURE: the page size of the next chunk (mu held). Huge pages first:
 * the buddy allocator hands out the 2 MiB blocks freed last, which the
 * host still backs, where 4 KiB pages come from whatever small free
 * pieces are left. Then the faster of the two, the slower one tried
 * again every PROBE_EVERY chunks while the faster is below FAST_BPS (the
 * first pages of either kind are often cheap and the rest not). */
static int choose_huge_locked(struct pi_mem_fill *f) {
    double h = f->rate[1], sm = f->rate[0];
    if (h <= 0) return 1;
    if (sm <= 0) return h >= FAST_BPS; /* 4 KiB pages tried once huge ones are slow */
    int best = h >= sm;
    double br = best ? h : sm;
    if (br < FAST_BPS && ++f->since_probe >= PROBE_EVERY) {
        f->since_probe = 0;
        return !best;
    }
    return best;
}

static void note_rate_locked(struct pi_mem_fill *f, int huge, double bytes, double secs) {
    /* over every chunk of this size in this fill: one chunk's time is
     * mostly the scheduler's on a loaded machine */
    f->bytes[huge] += bytes;
    f->secs[huge] += secs;
    f->rate[huge] = f->bytes[huge] / f->secs[huge];
    atomic_store(&last_rate[huge], f->rate[huge]);
    atomic_store(&last_t[huge], pi_now_s());
}

static void *fill_worker(void *arg) {
    struct pi_mem_fill *f = arg;
    pthread_mutex_lock(&f->mu);
    while (!f->stop && f->next < f->nchunks) {
        size_t c = f->next++;
        int huge = f->pages == PI_MEM_PAGES_HUGE || (f->pages == PI_MEM_PAGES_MEASURE && choose_huge_locked(f));
        struct fregion *g = region_of_chunk(f, c);
        size_t off = (c - g->c0) * FILL_CHUNK;
        size_t len = PI_MIN(FILL_CHUNK, g->len - off);
        pthread_mutex_unlock(&f->mu);
        double t0 = pi_now_s();
        if (f->pages == PI_MEM_PAGES_MEASURE) madvise(g->p + off, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
        populate_range(g->p + off, len);
        double dt = pi_now_s() - t0;
        pthread_mutex_lock(&f->mu);
        f->st.fault_s += dt;
        f->st.populated += len;
        if (huge) f->st.huge += len;
        if (f->pages == PI_MEM_PAGES_MEASURE && len == FILL_CHUNK && dt > 0) note_rate_locked(f, huge, (double)len, dt);
        f->done[c] = 1;
        while (f->prefix < f->nchunks && f->done[f->prefix]) f->prefix++;
        pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static int cmp_addr_ctx_less(const struct fregion *r, size_t a, size_t b) { return r[a].p < r[b].p; }

static struct pi_mem_fill *fill_new(void *const *p, const size_t *len, size_t n, enum pi_mem_pages pages) {
    struct pi_mem_fill *f = pi_calloc(1, sizeof *f);
    if (!f) return NULL;
    f->r = pi_calloc(n ? n : 1, sizeof *f->r);
    f->by_addr = pi_calloc(n ? n : 1, sizeof *f->by_addr);
    if (!f->r || !f->by_addr) goto fail;
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        if (!p[i] || !len[i]) continue;
        /* whole pages: populating does not change a byte, so the pages
         * shared with a neighbouring region (a tensor's) may be included */
        uintptr_t a = (uintptr_t)p[i] & ~(uintptr_t)4095;
        size_t l = (size_t)pi_align_up((uintptr_t)p[i] + len[i] - a, 4096);
        f->r[f->nr] = (struct fregion){(uint8_t *)a, l, c};
        c += (l + FILL_CHUNK - 1) / FILL_CHUNK;
        f->nr++;
    }
    if (!c) goto fail;
    f->nchunks = c;
    if (!(f->done = pi_calloc(c, 1))) goto fail;
    for (size_t i = 0; i < f->nr; i++) { /* insertion sort by address (few regions) */
        size_t j = i;
        while (j > 0 && cmp_addr_ctx_less(f->r, i, f->by_addr[j - 1])) {
            f->by_addr[j] = f->by_addr[j - 1];
            j--;
        }
        f->by_addr[j] = i;
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->pages = forced(pages);
    double now = pi_now_s();
    for (int k = 0; k < 2; k++)
        if (now - atomic_load(&last_t[k]) < FRESH_S) f->rate[k] = atomic_load(&last_rate[k]);
    if (f->pages == PI_MEM_PAGES_HUGE || f->pages == PI_MEM_PAGES_SMALL)
        for (size_t i = 0; i < f->nr; i++)
            madvise(f->r[i].p, f->r[i].len, f->pages == PI_MEM_PAGES_HUGE ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    return f;
fail:
    pi_free(f->r);
    pi_free(f->by_addr);
    pi_free(f);
    return NULL;
}

static void fill_free(struct pi_mem_fill *f) {
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    pi_free(f->done);
    pi_free(f->r);
    pi_free(f->by_addr);
    pi_free(f);
}

struct pi_mem_fill *pi_mem_fill_start(void *const *p, const size_t *len, size_t n, unsigned threads,
                                      enum pi_mem_pages pages) {
    /* as many threads as the caller asks (mem.h: READ asks for one only
     * where the issuing thread would otherwise fault the pages in) */
    threads = (unsigned)pi_env_long("PAGEIN_MEM_THREADS", (long)threads, 0, 8);
    if (!threads) return NULL; /* PAGEIN_MEM_THREADS=0: no populating ahead */
    if (threads > 8) threads = 8;
    struct pi_mem_fill *f = fill_new(p, len, n, pages);
    if (!f) return NULL;
    if (threads > f->nchunks) threads = (unsigned)f->nchunks;
    for (unsigned t = 0; t < threads; t++)
        if (pthread_create(&f->tids[f->nt], NULL, fill_worker, f) == 0) f->nt++;
    if (!f->nt) {
        fill_free(f);
        return NULL;
    }
    return f;
}

/* The index of the last chunk holding [p, p + len), or SIZE_MAX when p is
 * in none of the regions. */
static size_t last_chunk(const struct pi_mem_fill *f, const void *p, uint64_t len) {
    const uint8_t *a = p;
    size_t lo = 0, hi = f->nr; /* the last region starting at or before a */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (f->r[f->by_addr[mid]].p <= a) lo = mid + 1;
        else hi = mid;
    }
    if (!lo) return SIZE_MAX;
    const struct fregion *g = &f->r[f->by_addr[lo - 1]];
    if (a >= g->p + g->len) return SIZE_MAX;
    uint64_t end = PI_MIN((uint64_t)(a - g->p) + len, (uint64_t)g->len);
    return g->c0 + (size_t)((end - 1) / FILL_CHUNK);
}

int pi_mem_fill_ready(struct pi_mem_fill *f, const void *p, uint64_t len) {
    if (!f || !len) return 1;
    size_t last = last_chunk(f, p, len);
    if (last == SIZE_MAX) return 1;
    pthread_mutex_lock(&f->mu);
    int ok = f->prefix > last || f->stop;
    pthread_mutex_unlock(&f->mu);
    return ok;
}

void pi_mem_fill_wait(struct pi_mem_fill *f, const void *p, uint64_t len) {
    if (!f || !len) return;
    size_t last = last_chunk(f, p, len);
    if (last == SIZE_MAX) return;
    pthread_mutex_lock(&f->mu);
    if (f->prefix <= last) {
        double t0 = pi_now_s();
        while (f->prefix <= last && !f->stop) pthread_cond_wait(&f->cv, &f->mu);
        f->st.wait_s += pi_now_s() - t0;
    }
    pthread_mutex_unlock(&f->mu);
}

static _Atomic uint64_t populated_total;

uint64_t pi_mem_populated_total(void) { return atomic_load(&populated_total); }

void pi_mem_fill_end(struct pi_mem_fill *f, struct pi_mem_stats *st) {
    if (!f) return;
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    for (unsigned t = 0; t < f->nt; t++) pthread_join(f->tids[t], NULL);
    atomic_fetch_add(&populated_total, f->st.populated);
    if (st) {
        st->fault_s += f->st.fault_s;
        st->wait_s += f->st.wait_s;
        st->populated += f->st.populated;
        st->huge += f->st.huge;
        st->reused += f->st.reused;
    }
    fill_free(f);
}

void pi_mem_populate(void *p, size_t len, enum pi_mem_pages pages, struct pi_mem_stats *st) {
    struct pi_mem_fill *f = fill_new(&p, &len, 1, pages);
    if (!f) {
        if (p && len) populate_range(p, (size_t)pi_align_up(len, 4096));
        return;
    }
    fill_worker(f);
    pi_mem_fill_end(f, st);
}

void pi_mem_advise(void *p, size_t len, enum pi_mem_pages pages) {
    pages = forced(pages);
    if (!p || !len || pages == PI_MEM_PAGES_ASIS) return;
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095;
    madvise((void *)a, (size_t)pi_align_up((uintptr_t)p + len - a, 4096),
            pages == PI_MEM_PAGES_SMALL ? MADV_NOHUGEPAGE : MADV_HUGEPAGE);
}
