/* pipeline.c - the one pipeline over the dataset-format table: the epoch's
 * sequence and its partition (order.c), resume states that load onto any
 * world size, and the
 * reading: units (a window of groups, or a batch of samples) fetched with
 * coalesced requests on the range engine and decoded by a background
 * thread one unit ahead of the consumer. */
#include "data.h"
#include "dsformat.h"
#include "order.h"
#include "../engine/engine.h"
#include "../core/mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- states ------------------------------------------------------------------ */

struct pstate {
    int order;
    uint64_t seed, epoch, n, G, window;
    uint64_t data, sum; /* the dataset's fingerprint; the remaining text's hash */
    struct pi_iv *rem;
    size_t nrem;
};

/* FNV-1a 64, continued from h. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV0 0xcbf29ce484222325ull

/* The dataset a state belongs to: each shard's base name, size and
 * sample count, in order (a state saved on [A, B] is refused on [B, A]). */
static uint64_t data_fingerprint(const pagein_dataset *d) {
    uint64_t h = FNV0;
    for (size_t i = 0; i < d->nfiles; i++) {
        const char *nm = d->files[i].path ? d->files[i].path : "";
        const char *sl = strrchr(nm, '/');
        nm = sl ? sl + 1 : nm;
        uint64_t v[2] = {d->files[i].size, d->files[i].count};
        h = fnv(h, nm, strlen(nm) + 1);
        h = fnv(h, v, sizeof v);
    }
    return h;
}

/* Each key once; a state that does not parse whole (cut, edited) is
 * refused: sum= is the hash of the remaining= text. */
static const char *const state_keys[] = {"order", "remaining", "seed", "epoch", "n", "groups", "window", "data", "sum"};

static int state_key(const char *p, size_t kl) {
    for (size_t k = 0; k < PI_ARRAY_LEN(state_keys); k++)
        if (strlen(state_keys[k]) == kl && !memcmp(p, state_keys[k], kl)) return (int)k;
    return -1;
}

static int state_parse(const char *s, struct pstate *st) {
    memset(st, 0, sizeof *st);
    RETURN_IF(strncmp(s, "pagein-pipe/", 12) == 0 && strncmp(s, "pagein-pipe/2 ", 14) != 0, PAGEIN_E_INVALID,
              "pipe state: %.14s is an older state without its dataset and check (save it again)", s);
    RETURN_IF(strncmp(s, "pagein-pipe/2 ", 14) != 0, PAGEIN_E_INVALID, "pipe state: not a pagein-pipe/2 state");
    const char *p = s + 14, *rtext = NULL;
    size_t cap = 0, rlen = 0;
    unsigned have = 0;
    int rc = 0;
    while (*p && rc == 0) {
        while (*p == ' ') p++;
        if (!*p) break;
        const char *eq = strchr(p, '=');
        size_t kl = eq ? (size_t)(eq - p) : 0;
        int k = eq ? state_key(p, kl) : -1;
        if (k < 0) {
            rc = pi_err(PAGEIN_E_INVALID, "pipe state: unknown or bad item at '%.20s'", p);
            break;
        }
        if (have & (1u << k)) {
            rc = pi_err(PAGEIN_E_INVALID, "pipe state: '%s=' given twice", state_keys[k]);
            break;
        }
        have |= 1u << k;
        const char *v = eq + 1;
        char *end;
        if (k == 0) { /* order */
            size_t vl = strcspn(v, " ");
            char nm[16];
            snprintf(nm, sizeof nm, "%.*s", (int)PI_MIN(vl, (size_t)15), v);
            st->order = pagein_order_from_name(nm);
            if (st->order < 0 || vl > 15) rc = pi_err(PAGEIN_E_INVALID, "pipe state: order '%s'", nm);
            p = v + vl;
            continue;
        }
        if (k == 1) { /* remaining */
            rtext = v;
            rlen = strcspn(v, " ");
            p = v;
            while (rc == 0 && *p && *p != ' ') {
                uint64_t a = strtoull(p, &end, 10);
                if (end == p || *end != '-') {
                    rc = pi_err(PAGEIN_E_INVALID, "pipe state: bad interval");
                    break;
                }
                p = end + 1;
                uint64_t b = strtoull(p, &end, 10);
                if (end == p || b <= a || (st->nrem && a < st->rem[st->nrem - 1].b)) {
                    rc = pi_err(PAGEIN_E_INVALID, "pipe state: bad interval %" PRIu64 "-%" PRIu64, a, b);
                    break;
                }
                if (st->nrem && a == st->rem[st->nrem - 1].b) {
                    st->rem[st->nrem - 1].b = b; /* adjacent: one interval */
                } else {
                    if (pi_grow((void **)&st->rem, &cap, st->nrem + 1, sizeof *st->rem) < 0) {
                        rc = -ENOMEM;
                        break;
                    }
                    st->rem[st->nrem++] = (struct pi_iv){a, b};
                }
                p = end;
                if (*p == ',') p++;
            }
            continue;
        }
        uint64_t x = k >= 7 ? strtoull(v, &end, 16) : strtoull(v, &end, 10);
        if (end == v || (*end && *end != ' ')) {
            rc = pi_err(PAGEIN_E_INVALID, "pipe state: bad number for '%s'", state_keys[k]);
            break;
        }
        if (k == 2) st->seed = x;
        else if (k == 3) st->epoch = x;
        else if (k == 4) st->n = x;
        else if (k == 5) st->G = x;
        else if (k == 6) st->window = x;
        else if (k == 7) st->data = x;
        else st->sum = x;
        p = end;
    }
    if (rc == 0 && have != (1u << PI_ARRAY_LEN(state_keys)) - 1)
        rc = pi_err(PAGEIN_E_INVALID, "pipe state: incomplete (an item is missing: cut short?)");
    if (rc == 0 && fnv(FNV0, rtext, rlen) != st->sum)
        rc = pi_err(PAGEIN_E_INVALID, "pipe state: its check does not match its remaining positions (cut or edited)");
    if (rc < 0) {
        pi_free(st->rem);
        st->rem = NULL;
        st->nrem = 0;
    }
    return rc;
}

/* ---- units ------------------------------------------------------------------ */

struct ugroup {
    size_t shard;
    uint64_t first;  /* global id of its sample 0 */
    uint64_t gfirst; /* a part's: its group's first sample (shard-local) */
    struct pi_dsgroup grp;
    struct pi_dsbuf *bufs;
};

struct usample { /* global order over addressable shards */
    size_t shard;
    uint64_t local;
    const uint8_t *p;
    uint64_t len;
};

struct unit {
    uint64_t *ids;
    uint64_t nids, idcap;
    struct ugroup *g; /* sorted by first */
    size_t ng, gcap;
    struct usample *s; /* parallel to ids when per-sample */
    size_t scap;
    uint8_t *mem;
    uint64_t memcap; /* the most bytes a fetch needed */
    size_t blk;      /* mem is a pi_mem_get block of blk bytes (0: from the heap) */
    uint64_t bytes;
    /* the fetch's progress, under the pipe's mu: groups [0, nready) have
     * their bytes; fetched once the loader is done with the unit (frc < 0:
     * its fetch failed) */
    size_t nready;
    int fetched, frc;
};

/* A slot: free, being fetched (the loader), fetched and waiting for its
 * decode or being decoded (the decoder), ready for the consumer, or
 * failed. The loader and the decoder are two threads, so that the next
 * unit's bytes arrive while this one decodes. */
enum { U_FREE, U_LOADING, U_FETCHED, U_DECODING, U_READY, U_FAILED };

struct pagein_pipe {
    pagein_dataset *d;
    pagein_pipe_opts o;
    uint64_t epoch;
    struct pi_seq q;
    struct pi_iv *mine; /* this consumer's epoch positions */
    size_t nmine, minecap;
    uint64_t *minepre; /* nmine + 1: positions before each interval of mine */
    uint64_t mylen;
    /* the unit plan: unit k covers positions [ustart[k], ustart[k+1]) of
     * the consumer's list (as indexes into the flattened mine) */
    uint64_t *ustart;
    size_t nunits, ucap;
    /* slots */
    struct unit slot[2];
    int sstate[2];
    uint64_t sunit[2];
    int serr[2];
    char sdetail[2][1024];
    size_t load_next;   /* next unit the loader fills */
    size_t cur_unit;    /* unit the consumer reads */
    uint64_t cur_pos;   /* index in the unit's ids */
    int cur_slot;       /* -1 none */
    pthread_t th, dth; /* the loader (fetches) and the decoder */
    int th_on, dth_on, quit;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pagein_pipe_stats st; /* the loader's counters, under mu */
    uint64_t samples;     /* the consumer's */
    uint64_t held;
    pagein_field *fields; /* the consumer's item: top-level fields, then nested values' children;
                           * room for the widest shard's columns from open (its limit), grown for nested values */
    size_t fields_cap;
    struct pi_source **srcs;
    /* kept workers, started on first use and stopped at close: the
     * loader's for local reads (the engine's workers), the decoder's for
     * a unit's groups; one thread each per unit cost more than a small
     * unit's reads */
    struct pi_crew fcrew, dcrew;
    int fcrew_on, dcrew_on;
};


static void unit_clear(pagein_pipe *p, struct unit *u) {
    for (size_t i = 0; i < u->ng; i++) {
        pi_ds_group_free(p->d->shards[u->g[i].shard], &u->g[i].grp);
        pi_free(u->g[i].bufs);
    }
    u->ng = 0;
    u->nids = 0;
    u->bytes = 0;
}

static void unit_free(pagein_pipe *p, struct unit *u) {
    unit_clear(p, u);
    pi_free(u->ids);
    pi_free(u->g);
    pi_free(u->s);
    if (u->blk)
        pi_mem_put(u->mem, u->blk);
    else
        pi_free(u->mem);
    memset(u, 0, sizeof *u);
}

/* Position index k of the consumer's list -> epoch position. */
static uint64_t mine_at(const pagein_pipe *p, uint64_t k) {
    if (!p->nmine || k >= p->minepre[p->nmine]) return UINT64_MAX;
    size_t lo = pi_last_le(p->minepre, p->nmine, k); /* minepre[lo] <= k < minepre[lo + 1] */
    return p->mine[lo].a + (k - p->minepre[lo]);
}

static int ug_cmp(const void *a, const void *b) {
    const struct ugroup *x = a, *y = b;
    return (x->first > y->first) - (x->first < y->first);
}

/* The ranges of a unit's group, or of its part. */
static int ug_ranges(const struct pi_dsshard *sh, const struct ugroup *ug, struct pi_dsrange *r, size_t cap) {
    if (!ug->grp.part) return pi_ds_ranges(sh, ug->grp.g, r, cap);
    struct pi_dsgroupinfo pi;
    return sh->fmt->part(sh, ug->grp.g, ug->grp.info.first - ug->gfirst, &pi, r, cap);
}

/* Room for a unit's fetched bytes (the old ones are not kept). Large units
 * take a block of the memory policy (src/core/mem.c): one the process
 * released before (already resident) or a fresh one with huge pages
 * (PAGEIN_READ_HUGEPAGE=0: 4 KiB pages), whose first touches cost a fault a
 * 2 MiB instead of one a 4 KiB on a VM (docs/BENCHMARKS.md, "Fresh
 * memory"); small ones stay on the heap. */
#define UNIT_BLOCK_MIN (2ull << 20)
static int ensure_mem(struct unit *u, uint64_t need) {
    if (need <= u->memcap) return 0;
    if (need > (uint64_t)SIZE_MAX / 2) return pi_err(-ENOMEM, "pipe: out of memory for %" PRIu64 " bytes", need);
    if (need <= u->blk) {
        u->memcap = need;
        return 0;
    }
    if (need < UNIT_BLOCK_MIN) {
        uint8_t *m = pi_realloc(u->mem, need);
        if (!m) return pi_err(-ENOMEM, "pipe: out of memory for %" PRIu64 " bytes", need);
        u->mem = m;
        u->memcap = need;
        return 0;
    }
    size_t cap = 0;
    int reused = 0;
    uint8_t *m = pi_mem_get((size_t)need, &cap, 0, &reused);
    if (!m) return pi_err(-ENOMEM, "pipe: out of memory for %" PRIu64 " bytes", need);
    size_t whole = (size_t)need & ~(size_t)(UNIT_BLOCK_MIN - 1); /* the tail past the last whole 2 MiB: 4 KiB pages */
    if (!reused && whole) pi_mem_advise(m, whole, PI_MEM_PAGES_MEASURE);
    if (u->blk)
        pi_mem_put(u->mem, u->blk);
    else
        pi_free(u->mem);
    u->mem = m;
    u->blk = cap;
    u->memcap = need;
    return 0;
}

/* The bytes a unit's fetch buffer holds: a block of the memory policy
 * whole (pi_mem_get rounds up to 2 MiB, and a kept block may be larger),
 * else what the heap gave. The decoded groups' own memory is the rows'
 * (decode()'s impl) and not counted. */
static uint64_t unit_held(const struct unit *u) { return u->blk ? (uint64_t)u->blk : u->memcap; }

/* One source's spans of a unit, read on a thread of their own (fetch). */
struct fetch_job {
    pagein_pipe *p;
    struct pi_span *sp;
    size_t n;
    struct pi_engine_opts eo; /* eo.cancel: shared, set by the first to fail */
    uint64_t requests;
    int rc;
    char detail[1024];
};

static void *fetch_job_main(void *arg) {
    struct fetch_job *j = arg;
    struct pi_engine_stats es;
    memset(&es, 0, sizeof es);
    j->rc = pi_engine_run(j->p->srcs, j->p->d->nfiles, j->sp, j->n, &j->eo, &es);
    j->requests = es.requests;
    if (j->rc < 0) {
        snprintf(j->detail, sizeof j->detail, "%s", pagein_last_error_detail());
        atomic_store(j->eo.cancel, 1); /* the other sources stop at their next request */
    }
    return NULL;
}

/* Remote or FUSE spans of several sources (a block unit's groups come from
 * several shards): the engine reads a plan source after source (one readv each), so
 * a unit of four shards would wait four round trips with a quarter of its
 * requests in flight; each source's spans run on a thread of their own
 * instead, all of the unit's requests in flight at once (each source has
 * its own connection pool). sp is sorted by source. */
static int fetch_sources(pagein_pipe *p, struct pi_span *sp, size_t n, const struct pi_engine_opts *eo,
                         uint64_t *requests) {
    size_t nj = 0;
    for (size_t i = 0; i < n; i++) nj += !i || sp[i].src != sp[i - 1].src;
    struct fetch_job *jb = pi_calloc(nj, sizeof *jb);
    pthread_t *tid = pi_calloc(nj, sizeof *tid);
    unsigned char *on = pi_calloc(nj, 1);
    int rc = 0;
    _Atomic int cancel;
    atomic_init(&cancel, 0);
    if (!jb || !tid || !on) {
        rc = pi_err(-ENOMEM, "pipe: out of memory");
        goto out;
    }
    for (size_t i = 0, k = 0; i < n; k++) {
        size_t a = i;
        while (i < n && sp[i].src == sp[a].src) i++;
        jb[k] = (struct fetch_job){.p = p, .sp = sp + a, .n = i - a, .eo = *eo};
        jb[k].eo.cancel = &cancel;
    }
    for (size_t k = 1; k < nj; k++) /* the first runs on this thread; one that cannot start, after it */
        on[k] = pthread_create(&tid[k], NULL, fetch_job_main, &jb[k]) == 0;
    fetch_job_main(&jb[0]);
    for (size_t k = 1; k < nj; k++) {
        if (on[k])
            pthread_join(tid[k], NULL);
        else
            fetch_job_main(&jb[k]);
    }
    /* the first failure in source order that is not another's cancellation */
    size_t bad = nj;
    for (size_t k = 0; k < nj; k++) {
        *requests += jb[k].requests;
        if (jb[k].rc < 0 && (bad == nj || (jb[bad].rc == PAGEIN_E_CANCELLED && jb[k].rc != PAGEIN_E_CANCELLED)))
            bad = k;
    }
    if (bad < nj) rc = pi_err(jb[bad].rc, "%s", jb[bad].detail);
out:
    pi_free(jb);
    pi_free(tid);
    pi_free(on);
    return rc;
}

static int fetch(pagein_pipe *p, struct pi_span *sp, size_t n, uint64_t *requests) {
    if (!n) return 0;
    /* large requests, several in flight: 1 MiB x 8 on local disks (a group
     * is one read of a few MiB: one request would be read at depth 1);
     * network and FUSE filesystems: their facts (1 MiB x 32); remote: the
     * unit over 16 connections */
    struct pi_source_facts *f = pi_source_facts(p->srcs[sp[0].src]);
    int disk = f->storage == PI_STORAGE_LOCAL || f->storage == PI_STORAGE_MEMORY;
    uint64_t req = disk ? (1u << 20) : 0, total = 0;
    unsigned depth = p->o.queue_depth ? p->o.queue_depth : disk ? 8 : 0;
    if (disk && !p->o.queue_depth) {
        /* a local read starts depth - 1 threads for its copies: on a small
         * unit (tiny row groups in block order, several spans) they cost more
         * than the copies (20-40 times the time of none, whose unit is one
         * span); one thread copies 2 MiB from the page cache in well under
         * a millisecond */
        for (size_t i = 0; i < n; i++) total += sp[i].len;
        if (total < (2u << 20)) depth = 1;
        /* spans of 1 MiB or more (a unit's groups) are read ahead by the
         * kernel as they go: what the threads add is copies out of the page
         * cache, which more threads than half the CPUs only contend for (a
         * cold block epoch of MDS, 4 MiB groups, on 2 CPUs: 0.038 s and
         * 0.023 s of CPU at depth 1, 0.049 s and 0.038 s at 8); single
         * samples (the global order) keep 8 in flight */
        else if (total / n >= (1u << 20)) {
            long nc = sysconf(_SC_NPROCESSORS_ONLN);
            depth = nc >= 16 ? 8 : nc >= 4 ? (unsigned)(nc / 2) : 1;
        }
        total = 0;
    }
    if (f->storage == PI_STORAGE_FUSE) {
        /* a buffered read on FUSE goes to the daemon a readahead window at
         * a time (its requests are at most max_pages, 128 KiB by default),
         * each window a round trip: a 1 MiB request waits its windows one
         * after the other, and a batch of a few MiB has only a few such
         * requests to keep in flight. Requests of one window (128 KiB when
         * unknown, at most 1 MiB) put all of a batch's round trips in
         * flight at once (the depth: chosen, a probe of the filesystem).
         * Slowfs 1 ms, readahead 128 KiB, block epoch of 63 MB: 0.27 s
         * against 0.37 s. (NFS reads rsize, 1 MiB, a request: not here.) */
        if (!pi_env_size("PAGEIN_REQUEST_BYTES", 0)) {
            uint64_t win = f->read_ahead_kb ? (uint64_t)f->read_ahead_kb << 10 : 128u << 10;
            req = PI_MIN((uint64_t)1 << 20, PI_MAX((uint64_t)64 << 10, win));
        }
        /* the engine reads a plan's sources one after the other, each
         * readv waiting for its last request: a batch of groups from
         * several shards runs each shard's on a thread of its own (as
         * remote sources do), all in flight at once, at the size and depth
         * chosen for the first (here, once: the threads must not probe) */
        if (sp[n - 1].src != sp[0].src) {
            if (!req || !depth) {
                struct pi_engine_opts c = {.request_bytes = req, .depth = depth};
                char why[160];
                pi_engine_choose(p->srcs[sp[0].src], &c, 1, &req, &depth, why, sizeof why);
            }
            struct pi_engine_opts eo = {.deliver = PI_DELIVER_BUFFERS, .request_bytes = req, .depth = depth, .max_gap = 0};
            return fetch_sources(p, sp, n, &eo, requests);
        }
    }
    if (f->storage == PI_STORAGE_REMOTE) {
        /* a unit's bytes spread over 16 connections: 1-8 MiB ranges (one
         * 8 MiB range a connection left 12 of them idle for a 32 MiB unit) */
        for (size_t i = 0; i < n; i++) total += sp[i].len;
        req = PI_MAX((uint64_t)1 << 20, PI_MIN((uint64_t)8 << 20, pi_align_up(total / 16, 1u << 20)));
        /* single samples (global order): latency-bound, many in flight */
        if (!p->o.queue_depth) depth = total / n < ((uint64_t)1 << 20) ? 64 : 16;
        if (sp[n - 1].src != sp[0].src) {
            struct pi_engine_opts eo = {.deliver = PI_DELIVER_BUFFERS, .request_bytes = req, .depth = depth, .max_gap = 0};
            return fetch_sources(p, sp, n, &eo, requests);
        }
    }
    struct pi_engine_opts eo = {.deliver = PI_DELIVER_BUFFERS, .request_bytes = req, .depth = depth, .max_gap = 0};
    if (disk && depth > 1) { /* the loader's workers, started once */
        if (!p->fcrew_on) p->fcrew_on = pi_crew_start(&p->fcrew, PI_MIN(depth, 64u)) == 0;
        if (p->fcrew_on) eo.crew = &p->fcrew;
    }
    struct pi_engine_stats es;
    memset(&es, 0, sizeof es);
    int rc = pi_engine_run(p->srcs, p->d->nfiles, sp, n, &eo, &es);
    *requests += es.requests;
    return rc;
}

/* What a unit wants read: len bytes at off of source src, whose address
 * goes to *out. */
struct want {
    uint32_t src;
    uint64_t off, len;
    const uint8_t **out;
    uint32_t batch; /* fetched in batch order (groups: their index / per batch) */
};

static int want_cmp(const void *a, const void *b) {
    const struct want *x = a, *y = b;
    if (x->batch != y->batch) return x->batch < y->batch ? -1 : 1;
    if (x->src != y->src) return x->src < y->src ? -1 : 1;
    return (x->off > y->off) - (x->off < y->off);
}

/* Groups [0, n) of u have their bytes: the decoder may take them. */
static void publish(pagein_pipe *p, struct unit *u, size_t n) {
    pthread_mutex_lock(&p->mu);
    u->nready = n;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Reads every want into u->mem: sorted by (batch, source, offset),
 * neighbours in the file laid out as neighbours in memory and read as one
 * span, so that every request of the engine lands straight in its place.
 * Batch after batch: once batch b is read, groups [0, (b + 1) * per) are
 * published to the decoder (per 0: no groups to publish). */
static int fetch_wants(pagein_pipe *p, struct unit *u, struct want *w, size_t n, size_t per, uint64_t *requests) {
    qsort(w, n, sizeof *w, want_cmp);
    struct pi_span *sp = pi_malloc((n ? n : 1) * sizeof *sp);
    uint32_t nb = n ? w[n - 1].batch + 1 : 1;
    size_t *sb = pi_calloc((size_t)nb + 1, sizeof *sb); /* batch b's spans: [sb[b], sb[b + 1]) */
    if (!sp || !sb) {
        pi_free(sp);
        pi_free(sb);
        return pi_err(-ENOMEM, "pipe: out of memory");
    }
    uint64_t at = 0, fetched = 0; /* fetched: the source's bytes, without the buffer's padding */
    size_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        if (!w[i].len) continue;
        if (i && w[i - 1].len == w[i].len && w[i - 1].off == w[i].off && w[i - 1].src == w[i].src) {
            *w[i].out = *w[i - 1].out; /* the same bytes (a dictionary page two parts need): read once */
            continue;
        }
        struct pi_span *last = ns ? &sp[ns - 1] : NULL;
        if (last && last->src == w[i].src && last->off + last->len == w[i].off && ns > sb[w[i].batch]) {
            last->len += w[i].len; /* adjacent (and of the same batch): no padding between them */
            at += w[i].len;
            fetched += w[i].len;
        } else {
            if (!ns || ns == sb[w[i].batch]) sb[w[i].batch] = ns; /* the batch's first span */
            at = pi_align_up(at, 64);
            sp[ns++] = (struct pi_span){w[i].src, w[i].off, w[i].len, (void *)(uintptr_t)at};
            at += w[i].len;
            fetched += w[i].len;
        }
        for (uint32_t b = w[i].batch + 1; b <= nb; b++) sb[b] = ns;
        *w[i].out = (const uint8_t *)(uintptr_t)(at - w[i].len); /* an offset until the buffer exists */
    }
    int rc = ensure_mem(u, at ? at : 1);
    for (size_t i = 0; i < n; i++) *w[i].out = w[i].len ? u->mem + (uintptr_t)*w[i].out : (const uint8_t *)"";
    for (size_t i = 0; i < ns; i++) sp[i].dst = u->mem + (uintptr_t)sp[i].dst;
    u->bytes = fetched;
    for (uint32_t b = 0; b < nb && rc == 0; b++) {
        rc = fetch(p, sp + sb[b], sb[b + 1] - sb[b], requests);
        if (rc == 0 && per && b + 1 < nb) publish(p, u, PI_MIN(u->ng, (size_t)(b + 1) * per));
    }
    pi_free(sp);
    pi_free(sb);
    return rc;
}

/* The sample ids of unit k, in the consumer's order, into ids[0 .. its size). */
static int unit_ids(const pagein_pipe *p, size_t k, uint64_t *ids) {
    uint64_t a = p->ustart[k], n = p->ustart[k + 1] - a;
    if (p->q.order == PAGEIN_ORDER_GLOBAL) {
        for (uint64_t i = 0; i < n; i++) ids[i] = p->q.perm[mine_at(p, a + i)];
        return 0;
    }
    uint64_t pos0 = mine_at(p, a), w = pi_seq_window(&p->q, pos0), *wids, nw;
    FORWARD_IF(pi_seq_window_ids(&p->q, w, &wids, &nw));
    for (uint64_t i = 0; i < n; i++) ids[i] = wids[mine_at(p, a + i) - p->q.wstart[w]];
    pi_free(wids);
    return 0;
}

/* ---- decoding a unit's groups on several threads --------------------------
 * A format's decode() may run on any number of threads at once on distinct
 * groups (dsformat.h), so a unit's groups are decoded in parallel: up to
 * PAGEIN_DECODE_THREADS threads (default: the CPUs, at most 8; 1 decodes on
 * the loader thread alone, as does a unit of less than 2 MiB fetched and a
 * unit of groups a compressed stream's cursor decodes in order),
 * each taking the next group not yet taken. An
 * error stops the taking; the first failing group's (in unit order) error
 * is the unit's, and the groups not decoded are left with nothing to free. */
struct dec_job {
    pagein_pipe *p;
    const pagein_dataset *d;
    struct unit *u;
    atomic_size_t next;
    atomic_int stop;
    int *rc; /* per group: 1 not tried, 0 decoded, < 0 failed */
    char (*msg)[256];
};

/* Waits until group j of u has its bytes: 1, or 0 when it never will (the
 * fetch failed, or the pipe stops). */
static int wait_ready(pagein_pipe *p, const struct unit *u, size_t j) {
    pthread_mutex_lock(&p->mu);
    while (j >= u->nready && !u->fetched && !p->quit) pthread_cond_wait(&p->cv, &p->mu);
    int ok = j < u->nready;
    pthread_mutex_unlock(&p->mu);
    return ok;
}

static void *dec_job_main(void *arg) {
    struct dec_job *J = arg;
    for (;;) {
        if (atomic_load(&J->stop)) break;
        size_t j = atomic_fetch_add(&J->next, 1);
        if (j >= J->u->ng) break;
        if (!wait_ready(J->p, J->u, j)) {
            atomic_store(&J->stop, 1);
            break;
        }
        struct ugroup *ug = &J->u->g[j];
        int rc = pi_ds_decode(J->d->shards[ug->shard], &ug->grp);
        if (rc < 0) {
            snprintf(J->msg[j], sizeof J->msg[j], "%s", pagein_last_error_detail());
            atomic_store(&J->stop, 1);
        }
        J->rc[j] = rc < 0 ? rc : 0;
    }
    return NULL;
}

static unsigned decode_threads_max(void) {
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    return (unsigned)pi_env_long("PAGEIN_DECODE_THREADS", nc > 0 ? (nc < 8 ? nc : 8) : 1, 1, 64);
}

static unsigned decode_threads(const pagein_dataset *d, const struct unit *u) {
    size_t ng = u->ng;
    if (u->bytes < (2u << 20)) return 1; /* a small unit: handing groups out would cost more than it saves */
    for (size_t j = 0; j < ng; j++) /* one cursor's groups: out of order they would start it over */
        if (d->shards[u->g[j].shard]->in_order) return 1;
    unsigned t = decode_threads_max();
    return (unsigned)((size_t)t < ng ? (size_t)t : ng);
}

static int dec_item(void *arg, size_t i) {
    (void)i;
    dec_job_main(arg);
    return 0;
}

/* Decodes u's groups as their bytes arrive; 0, the first failure, or
 * PAGEIN_E_CANCELLED where bytes never came (the fetch's own error is the
 * unit's then: the decoder's caller). */
static int decode_groups(pagein_pipe *p, struct unit *u) {
    const pagein_dataset *d = p->d;
    unsigned nt = decode_threads(d, u);
    int *rcs = nt > 1 ? pi_malloc(u->ng * sizeof *rcs) : NULL;
    char(*msg)[256] = nt > 1 ? pi_malloc(u->ng * sizeof *msg) : NULL;
    if (!rcs || !msg) { /* one thread (or no memory for more): in order, on this thread */
        pi_free(rcs);
        pi_free(msg);
        for (size_t j = 0; j < u->ng; j++) {
            int rc = wait_ready(p, u, j) ? pi_ds_decode(d->shards[u->g[j].shard], &u->g[j].grp)
                                         : pi_err(PAGEIN_E_CANCELLED, "pipe: the unit's bytes did not arrive");
            if (rc < 0) { /* not decoded: nothing to free */
                for (size_t k2 = j; k2 < u->ng; k2++) u->g[k2].grp.impl = NULL;
                return rc;
            }
        }
        return 0;
    }
    struct dec_job J = {.p = p, .d = d, .u = u, .rc = rcs, .msg = msg};
    atomic_init(&J.next, 0);
    atomic_init(&J.stop, 0);
    for (size_t j = 0; j < u->ng; j++) rcs[j] = 1;
    if (!p->dcrew_on) p->dcrew_on = pi_crew_start(&p->dcrew, decode_threads_max()) == 0;
    if (p->dcrew_on)
        pi_crew_run(&p->dcrew, nt, dec_item, &J); /* this thread takes groups too */
    else
        dec_job_main(&J);
    int rc = 0;
    for (size_t j = 0; j < u->ng; j++) {
        if (rcs[j] < 0 && rc == 0) rc = pi_err(rcs[j], "%s", msg[j]);
        if (rcs[j] == 1 && rc == 0) rc = pi_err(PAGEIN_E_CANCELLED, "pipe: the unit's bytes did not arrive");
        if (rcs[j] != 0) u->g[j].grp.impl = NULL; /* failed or not tried: nothing to free */
    }
    pi_free(rcs);
    pi_free(msg);
    return rc;
}

/* Loads unit k into u: its ids, then what they need, fetched (the decoder
 * decodes the groups as they arrive: unit_decode). */
#define FETCH_BATCHES 4
static int unit_load(pagein_pipe *p, size_t k, struct unit *u, uint64_t *requests) {
    pagein_dataset *d = p->d;
    unit_clear(p, u);
    uint64_t a = p->ustart[k], b = p->ustart[k + 1], n = b - a;
    if (n > u->idcap) {
        uint64_t *ni = pi_realloc(u->ids, n * sizeof *ni);
        if (!ni) return pi_err(-ENOMEM, "pipe: out of memory");
        u->ids = ni;
        u->idcap = n;
    }
    u->nids = n;
    FORWARD_IF(unit_ids(p, k, u->ids));
    int per_sample = p->q.order == PAGEIN_ORDER_GLOBAL && d->addressable;
    if (per_sample) {
        if (n > u->scap) {
            struct usample *ns = pi_realloc(u->s, n * sizeof *ns);
            if (!ns) return pi_err(-ENOMEM, "pipe: out of memory");
            u->s = ns;
            u->scap = n;
        }
        struct want *w = pi_malloc((n ? n : 1) * sizeof *w);
        if (!w) return pi_err(-ENOMEM, "pipe: out of memory");
        int rc = 0;
        for (uint64_t i = 0; i < n && rc == 0; i++) {
            size_t sh = pi_ds_shard_of(d, u->ids[i]);
            struct usample *us = &u->s[i];
            us->shard = sh;
            us->local = u->ids[i] - d->files[sh].first;
            uint64_t off = 0;
            rc = d->shards[sh]->fmt->locate(d->shards[sh], us->local, &off, &us->len);
            w[i] = (struct want){(uint32_t)sh, off, us->len, &us->p, 0};
        }
        if (rc == 0) rc = fetch_wants(p, u, w, (size_t)n, 0, requests);
        pi_free(w);
        return rc;
    }
    /* groups: the distinct groups the ids fall in */
    for (uint64_t i = 0; i < n; i++) {
        size_t s = pi_ds_shard_of(d, u->ids[i]);
        const struct pi_dsshard *sh = d->shards[s];
        uint64_t local = u->ids[i] - d->files[s].first;
        /* find the group of local (groups are consecutive): binary search */
        uint64_t lo = 0, hi = sh->ngroups;
        struct pi_dsgroupinfo gi;
        while (hi - lo > 1) {
            uint64_t mid = lo + (hi - lo) / 2;
            FORWARD_IF(pi_ds_group(sh, mid, &gi));
            if (gi.first <= local)
                lo = mid;
            else
                hi = mid;
        }
        FORWARD_IF(pi_ds_group(sh, lo, &gi));
        /* global order: only the part of the group that holds the sample,
         * where the row offers parts */
        struct pi_dsgroupinfo ui = gi;
        int nr = 0;
        if (p->q.order == PAGEIN_ORDER_GLOBAL && sh->fmt->part) {
            FORWARD_IF(nr = sh->fmt->part(sh, lo, local - gi.first, &ui, NULL, 0));
            if (!nr) ui = gi;
        }
        uint64_t first = d->files[s].first + ui.first;
        int seen = 0;
        for (size_t j = 0; j < u->ng && !seen; j++) seen = u->g[j].first == first && u->g[j].shard == s;
        if (seen) continue;
        FORWARD_IF(pi_grow((void **)&u->g, &u->gcap, u->ng + 1, sizeof *u->g));
        struct ugroup *ug = &u->g[u->ng++];
        memset(ug, 0, sizeof *ug);
        ug->shard = s;
        ug->first = first;
        ug->gfirst = gi.first;
        ug->grp.g = lo;
        ug->grp.info = ui;
        ug->grp.part = nr > 0;
    }
    qsort(u->g, u->ng, sizeof *u->g, ug_cmp);
    /* ranges of every group, read in up to FETCH_BATCHES batches of groups
     * in unit order, so that the first groups decode while the others are
     * read (one batch: a remote source, whose every batch would wait a
     * round trip, and the global order's parts) */
    size_t per = u->ng ? u->ng : 1;
    if (u->ng && p->q.order != PAGEIN_ORDER_GLOBAL && pi_source_facts(p->srcs[u->g[0].shard])->storage != PI_STORAGE_REMOTE)
        per = (u->ng + FETCH_BATCHES - 1) / FETCH_BATCHES;
    struct want *w = NULL;
    size_t nw = 0, wcap = 0;
    int rc = 0;
    for (size_t j = 0; j < u->ng && rc == 0; j++) {
        struct ugroup *ug = &u->g[j];
        const struct pi_dsshard *sh = d->shards[ug->shard];
        struct pi_dsrange rr[16], *r = rr;
        int nr = ug_ranges(sh, ug, rr, PI_ARRAY_LEN(rr));
        if (nr < 0) {
            rc = nr;
            break;
        }
        if ((size_t)nr > PI_ARRAY_LEN(rr)) {
            r = pi_malloc((size_t)nr * sizeof *r);
            if (!r) {
                rc = pi_err(-ENOMEM, "pipe: out of memory");
                break;
            }
            int nr2 = ug_ranges(sh, ug, r, (size_t)nr);
            if (nr2 != nr) rc = pi_ds_err(sh, PAGEIN_E_INVALID, ug->grp.g, UINT64_MAX, NULL, "ranges changed");
        }
        ug->bufs = pi_calloc((size_t)(nr ? nr : 1), sizeof *ug->bufs);
        if (!ug->bufs && rc == 0) rc = pi_err(-ENOMEM, "pipe: out of memory");
        for (int i = 0; i < nr && rc == 0; i++) {
            if (r[i].off > sh->src->size || r[i].len > sh->src->size - r[i].off) {
                rc = pi_ds_err(sh, PAGEIN_E_FORMAT, ug->grp.g, UINT64_MAX, NULL, "range past the end of the shard");
                break;
            }
            if ((rc = pi_grow((void **)&w, &wcap, nw + 1, sizeof *w)) < 0) break;
            ug->bufs[i].len = r[i].len;
            w[nw++] = (struct want){(uint32_t)ug->shard, r[i].off, r[i].len, &ug->bufs[i].p, (uint32_t)(j / per)};
        }
        ug->grp.nbufs = (size_t)nr;
        ug->grp.bufs = ug->bufs;
        if (r != rr) pi_free(r);
    }
    if (rc == 0) rc = fetch_wants(p, u, w, nw, per, requests);
    pi_free(w);
    return rc;
}

/* Decodes a fetched unit's groups (none for a per-sample unit). */
static int unit_decode(pagein_pipe *p, struct unit *u) { return u->ng ? decode_groups(p, u) : 0; }

/* ---- the loader thread ---------------------------------------------------- */

/* A slot's end: failed with rc (detail: the error's, NULL: this thread's
 * last), or ready (mu held). */
static void slot_done(pagein_pipe *p, int s, int rc, const char *detail) {
    if (rc < 0) {
        p->serr[s] = rc;
        if (detail != p->sdetail[s])
            snprintf(p->sdetail[s], sizeof p->sdetail[s], "%s", detail ? detail : pagein_last_error_detail());
        p->sstate[s] = U_FAILED;
    } else {
        p->sstate[s] = U_READY;
        p->st.units++;
        p->st.groups += p->slot[s].ng;
        p->st.bytes_read += p->slot[s].bytes;
    }
    pthread_cond_broadcast(&p->cv);
}

/* The loader: fetches the next unit into a free slot, then hands it to the
 * decoder and goes on to the next, so that a unit's fetch overlaps the
 * previous unit's decode. */
static void *loader_main(void *arg) {
    pagein_pipe *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->quit) {
        int s = -1;
        if (p->load_next < p->nunits)
            for (int k = 0; k < 2; k++)
                if (p->sstate[k] == U_FREE) {
                    s = k;
                    break;
                }
        if (s < 0) {
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        size_t k = p->load_next++;
        p->sstate[s] = U_LOADING;
        p->sunit[s] = k;
        p->slot[s].nready = 0;
        p->slot[s].fetched = 0;
        p->slot[s].frc = 0;
        pthread_mutex_unlock(&p->mu);
        uint64_t req = 0;
        int rc = unit_load(p, k, &p->slot[s], &req);
        pthread_mutex_lock(&p->mu);
        p->st.requests += req;
        uint64_t held = unit_held(&p->slot[0]) + unit_held(&p->slot[1]); /* only this thread grows them */
        if (held > p->st.memory_peak) p->st.memory_peak = held;
        struct unit *u = &p->slot[s];
        u->fetched = 1;
        if (rc < 0) {
            u->frc = rc;
            snprintf(p->sdetail[s], sizeof p->sdetail[s], "%s", pagein_last_error_detail());
            if (p->sstate[s] == U_LOADING) slot_done(p, s, rc, p->sdetail[s]); /* else the decoder reports it */
        } else {
            u->nready = u->ng;
            if (p->sstate[s] == U_LOADING) p->sstate[s] = U_FETCHED; /* else the decoder took its first groups */
        }
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* The decoder: decodes fetched units in unit order (the loader fetches in
 * that order; a compressed stream's cursor needs it). */
static void *decoder_main(void *arg) {
    pagein_pipe *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->quit) {
        int s = -1; /* the first unit (in unit order) fetched or with its first groups fetched */
        for (int k = 0; k < 2; k++)
            if ((p->sstate[k] == U_FETCHED || (p->sstate[k] == U_LOADING && p->slot[k].nready)) &&
                (s < 0 || p->sunit[k] < p->sunit[s]))
                s = k;
        if (s < 0) {
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        p->sstate[s] = U_DECODING;
        pthread_mutex_unlock(&p->mu);
        struct unit *u = &p->slot[s];
        int rc = unit_decode(p, u);
        pthread_mutex_lock(&p->mu);
        while (!u->fetched && !p->quit) pthread_cond_wait(&p->cv, &p->mu); /* the loader's last word on it */
        if (u->frc < 0)
            slot_done(p, s, u->frc, p->sdetail[s]); /* the fetch's error, not the decode it cut short */
        else
            slot_done(p, s, rc, NULL);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void stop_loader(pagein_pipe *p) {
    if (!p->th_on && !p->dth_on) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (p->th_on) pthread_join(p->th, NULL);
    if (p->dth_on) pthread_join(p->dth, NULL);
    p->th_on = p->dth_on = 0;
    p->quit = 0;
}

/* ---- plan: this consumer's positions and its units ------------------------ */

/* Samples a unit of the global order holds. Single-extent samples: read_batch
 * (256). Samples that are not single extents (columnar, compressed rows)
 * bring their whole group, so a unit of R random samples fetches up to
 * min(R, G) groups for R samples. The default keeps that at most
 * PI_GLOBAL_MAX_GROUPS groups (R = 256 over more groups): over a dataset of
 * at most that many groups, whose every group a unit may hold anyway, R =
 * window x the mean samples of a group, so that a unit fetches about
 * `window` groups' worth of samples (an Arrow epoch of 100 batches of 1,000
 * rows fetched 25x its bytes with R = 4096, 360x with R = 256); over more
 * groups a larger R would hold up to R groups (an Arrow dataset of 10,000
 * batches of 1,000 rows: 8,000 batches in a unit) for little gain, each
 * sample costing its group either way. An explicit read_batch wins. */
#define PI_GLOBAL_MAX_GROUPS 256
static uint64_t global_read_batch(const pagein_dataset *d, const pagein_pipe_opts *o) {
    if (o->read_batch) return o->read_batch;
    if (d->addressable || !d->ngroups || d->ngroups > PI_GLOBAL_MAX_GROUPS) return 256;
    uint64_t per_group = (d->nsamples + d->ngroups - 1) / d->ngroups;
    return PI_MAX((uint64_t)256, PI_MIN((uint64_t)1 << 20, per_group * o->window));
}

static int plan(pagein_pipe *p, const struct pi_iv *rem, size_t nrem) {
    pagein_pipe_opts *o = &p->o;
    uint64_t M = 0;
    for (size_t i = 0; i < nrem; i++) M += rem[i].b - rem[i].a;
    uint64_t rs = pi_mul_div(M, o->rank, o->world_size), re = pi_mul_div(M, o->rank + 1, o->world_size);
    uint64_t off, cnt;
    pi_part_worker(re - rs, o->batch, o->worker, o->num_workers, &off, &cnt);
    p->nmine = 0;
    FORWARD_IF(pi_part_map(rem, nrem, rs + off, rs + off + cnt, &p->mine, &p->nmine, &p->minecap, NULL));
    p->mylen = cnt;
    /* prefix sums of mine: mine_at is a binary search, not a walk */
    pi_free(p->minepre);
    p->minepre = pi_malloc((p->nmine + 1) * sizeof *p->minepre);
    if (!p->minepre) return pi_err(-ENOMEM, "pipe: out of memory for %zu intervals", p->nmine);
    p->minepre[0] = 0;
    for (size_t i = 0; i < p->nmine; i++) p->minepre[i + 1] = p->minepre[i] + (p->mine[i].b - p->mine[i].a);
    /* units: global, read_batch positions each; block/none, one per window touched */
    p->nunits = 0;
    FORWARD_IF(pi_grow((void **)&p->ustart, &p->ucap, 1, sizeof *p->ustart));
    p->ustart[0] = 0;
    if (p->q.order == PAGEIN_ORDER_GLOBAL) {
        uint64_t rb = global_read_batch(p->d, o);
        for (uint64_t k = 0; k < cnt; k += rb) {
            FORWARD_IF(pi_grow((void **)&p->ustart, &p->ucap, p->nunits + 2, sizeof *p->ustart));
            p->ustart[p->nunits + 1] = PI_MIN(cnt, k + rb);
            p->nunits++;
        }
        return 0;
    }
    uint64_t last_w = UINT64_MAX;
    for (size_t i = 0; i < p->nmine; i++) {
        uint64_t a = p->mine[i].a, b = p->mine[i].b;
        while (a < b) {
            uint64_t w = pi_seq_window(&p->q, a), e = PI_MIN(b, p->q.wstart[w + 1]);
            if (w == last_w) {
                p->ustart[p->nunits] += e - a;
            } else {
                FORWARD_IF(pi_grow((void **)&p->ustart, &p->ucap, p->nunits + 2, sizeof *p->ustart));
                p->ustart[p->nunits + 1] = p->ustart[p->nunits] + (e - a);
                p->nunits++;
                last_w = w;
            }
            a = e;
        }
    }
    return 0;
}

static int start(pagein_pipe *p, const struct pi_iv *rem, size_t nrem) {
    stop_loader(p);
    for (int k = 0; k < 2; k++) {
        unit_clear(p, &p->slot[k]);
        p->sstate[k] = U_FREE;
    }
    pi_seq_free(&p->q);
    FORWARD_IF(pi_seq_make(&p->q, p->d, p->o.order, p->o.seed, p->epoch, p->o.window));
    FORWARD_IF(plan(p, rem, nrem));
    p->load_next = 0;
    p->cur_unit = 0;
    p->cur_pos = 0;
    p->cur_slot = -1;
    int e = pthread_create(&p->dth, NULL, decoder_main, p);
    RETURN_IF(e, -e, "pipe: cannot start the decoder thread: %s", strerror(e));
    p->dth_on = 1;
    e = pthread_create(&p->th, NULL, loader_main, p);
    if (e) stop_loader(p);
    RETURN_IF(e, -e, "pipe: cannot start the loader thread: %s", strerror(e));
    p->th_on = 1;
    return 0;
}

/* The remaining intervals a state (or a fresh epoch) gives. */
static int initial_rem(pagein_dataset *d, pagein_pipe_opts *o, struct pi_iv **rem, size_t *nrem, uint64_t *epoch) {
    *rem = NULL;
    *nrem = 0;
    *epoch = o->epoch;
    if (!o->state) {
        if (!d->nsamples) return 0;
        *rem = pi_malloc(sizeof **rem);
        if (!*rem) return pi_err(-ENOMEM, "pipe: out of memory");
        (*rem)[0] = (struct pi_iv){0, d->nsamples};
        *nrem = 1;
        return 0;
    }
    struct pstate st;
    int rc = state_parse(o->state, &st);
    if (rc == 0 && st.n != d->nsamples)
        rc = pi_err(PAGEIN_E_INVALID, "pipe state: for %" PRIu64 " samples, the dataset has %" PRIu64, st.n, d->nsamples);
    if (rc == 0 && st.data != data_fingerprint(d))
        rc = pi_err(PAGEIN_E_INVALID, "pipe state: saved on another dataset (its shards, their order, sizes or counts differ)");
    if (rc == 0 && st.order != (int)o->order)
        rc = pi_err(PAGEIN_E_INVALID, "pipe state: order %s, the pipe's %s", pagein_order_name((pagein_order)st.order),
                    pagein_order_name(o->order));
    if (rc == 0 && st.seed != o->seed)
        rc = pi_err(PAGEIN_E_INVALID, "pipe state: seed %" PRIu64 ", the pipe's %" PRIu64, st.seed, o->seed);
    if (rc == 0 && o->order == PAGEIN_ORDER_BLOCK && (st.G != d->ngroups || st.window != o->window))
        rc = pi_err(PAGEIN_E_INVALID, "pipe state: %" PRIu64 " groups in windows of %" PRIu64 ", the pipe %" PRIu64 " of %u",
                    st.G, st.window, d->ngroups, o->window);
    if (rc == 0 && st.nrem && st.rem[st.nrem - 1].b > d->nsamples)
        rc = pi_err(PAGEIN_E_INVALID, "pipe state: positions past %" PRIu64, d->nsamples);
    if (rc < 0) {
        pi_free(st.rem);
        return rc;
    }
    *rem = st.rem;
    *nrem = st.nrem;
    *epoch = st.epoch;
    return 0;
}

int pagein_pipe_open(pagein_pipe **out, pagein_dataset *d, const pagein_pipe_opts *opts) {
    pi_err_clear();
    RETURN_IF(!out || !d, PAGEIN_E_INVALID, "pipe: NULL argument");
    pagein_pipe *p = pi_calloc(1, sizeof *p);
    if (!p) return pi_err(-ENOMEM, "pipe: out of memory");
    p->d = d;
    p->cur_slot = -1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    struct pi_iv *rem = NULL;
    size_t nrem = 0;
    int rc = pi_pipe_opts_norm(&p->o, opts);
    if (rc == 0) rc = initial_rem(d, &p->o, &rem, &nrem, &p->epoch);
    if (rc == 0) {
        p->srcs = pi_malloc((d->nfiles ? d->nfiles : 1) * sizeof *p->srcs);
        if (!p->srcs) rc = pi_err(-ENOMEM, "pipe: out of memory");
        for (size_t i = 0; rc == 0 && i < d->nfiles; i++) p->srcs[i] = d->shards[i]->src;
    }
    /* one field limit, the one at open (PI_DS_MAX_COLS): a sample has as
     * many fields as its shard has columns */
    for (size_t i = 0; rc == 0 && i < d->nfiles; i++) p->fields_cap = PI_MAX(p->fields_cap, d->shards[i]->ncols);
    if (rc == 0 && p->fields_cap < 256) p->fields_cap = 256;
    if (rc == 0 && !(p->fields = pi_calloc(p->fields_cap, sizeof *p->fields)))
        rc = pi_err(-ENOMEM, "pipe: out of memory for %zu fields", p->fields_cap);
    if (rc == 0) rc = start(p, rem, nrem);
    pi_free(rem);
    p->o.state = NULL; /* not kept: the caller's string */
    if (rc < 0) {
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", pagein_last_error_detail());
        pagein_pipe_close(p);
        return pi_err(rc, "%s", keep);
    }
    *out = p;
    return 0;
}

void pagein_pipe_close(pagein_pipe *p) {
    if (!p) return;
    stop_loader(p);
    if (p->fcrew_on) pi_crew_stop(&p->fcrew);
    if (p->dcrew_on) pi_crew_stop(&p->dcrew);
    for (int k = 0; k < 2; k++) unit_free(p, &p->slot[k]);
    pi_seq_free(&p->q);
    pi_free(p->mine);
    pi_free(p->minepre);
    pi_free(p->ustart);
    pi_free(p->srcs);
    pi_free(p->fields);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    pi_free(p);
}

int pagein_pipe_set_epoch(pagein_pipe *p, uint64_t epoch) {
    RETURN_IF(!p, PAGEIN_E_INVALID, "pipe: NULL argument");
    p->epoch = epoch;
    struct pi_iv all = {0, p->d->nsamples};
    return start(p, &all, p->d->nsamples ? 1 : 0);
}

uint64_t pagein_pipe_length(const pagein_pipe *p) { return p ? p->mylen : 0; }

void pagein_pipe_get_stats(const pagein_pipe *p, pagein_pipe_stats *st) {
    if (!p || !st) return;
    pagein_pipe *w = (pagein_pipe *)p;
    pthread_mutex_lock(&w->mu);
    *st = p->st;
    pthread_mutex_unlock(&w->mu);
    st->samples = p->samples; /* written by the consumer: read it from the consumer's thread */
}

/* The fields of sample id (item i of unit u) into p->fields, grown while a
 * row asks for more room (nested values): their count, or < 0. */
static int item_fields(pagein_pipe *p, const struct unit *u, uint64_t i, uint64_t id, size_t *ntop) {
    for (;;) {
        if (!p->fields) {
            p->fields = pi_calloc(256, sizeof *p->fields);
            if (!p->fields) return pi_err(-ENOMEM, "pipe: out of memory for fields");
            p->fields_cap = 256;
        }
        size_t cap = p->fields_cap;
        int nf;
        if (u->s && p->q.order == PAGEIN_ORDER_GLOBAL && p->d->addressable) {
            const struct usample *us = &u->s[i];
            const struct pi_dsshard *sh = p->d->shards[us->shard];
            nf = sh->fmt->sample(sh, us->local, us->p, us->len, p->fields, cap);
            *ntop = sh->ncols;
        } else {
            const struct ugroup *ug = &u->g[pi_last_le_by(&u->g[0].first, u->ng, sizeof u->g[0], id)];
            nf = pi_ds_fields(p->d->shards[ug->shard], &ug->grp, id - ug->first, p->fields, cap);
            *ntop = p->d->shards[ug->shard]->ncols;
        }
        if (nf < 0 || (size_t)nf <= cap) return nf;
        if ((size_t)nf > PI_DS_MAX_FIELDS)
            return pi_err(PAGEIN_E_LIMIT, "pipe: sample %" PRIu64 " has %d fields and values (at most %u)", id, nf,
                          PI_DS_MAX_FIELDS);
        pagein_field *g = pi_realloc(p->fields, (size_t)nf * sizeof *g);
        if (!g) return pi_err(-ENOMEM, "pipe: out of memory for %d fields", nf);
        p->fields = g;
        p->fields_cap = (size_t)nf;
    }
}

int pagein_pipe_next(pagein_pipe *p, pagein_item *it) {
    RETURN_IF(!p || !it, PAGEIN_E_INVALID, "pipe: NULL argument");
    for (;;) {
        if (p->cur_unit >= p->nunits) return 0;
        if (p->cur_slot < 0) {
            pthread_mutex_lock(&p->mu);
            int s = -1;
            for (;;) {
                for (int k = 0; k < 2; k++)
                    if ((p->sstate[k] == U_READY || p->sstate[k] == U_FAILED) && p->sunit[k] == p->cur_unit) s = k;
                if (s >= 0) break;
                pthread_cond_wait(&p->cv, &p->mu);
            }
            if (p->sstate[s] == U_FAILED) {
                int rc = p->serr[s];
                char keep[1024];
                snprintf(keep, sizeof keep, "%s", p->sdetail[s]);
                pthread_mutex_unlock(&p->mu);
                return pi_err(rc, "%s", keep);
            }
            pthread_mutex_unlock(&p->mu);
            p->cur_slot = s;
            p->cur_pos = 0;
        }
        struct unit *u = &p->slot[p->cur_slot];
        if (p->cur_pos >= u->nids) {
            /* release the drained unit to the loader */
            pthread_mutex_lock(&p->mu);
            p->sstate[p->cur_slot] = U_FREE;
            pthread_cond_broadcast(&p->cv);
            pthread_mutex_unlock(&p->mu);
            p->cur_slot = -1;
            p->cur_unit++;
            continue;
        }
        uint64_t i = p->cur_pos++, id = u->ids[i];
        size_t ntop = 0;
        int nf = item_fields(p, u, i, id, &ntop);
        if (nf < 0) return nf;
        it->id = id;
        it->nnodes = (size_t)nf;
        it->nfields = PI_MIN(ntop, (size_t)nf); /* the top-level fields; their children follow */
        it->fields = p->fields;
        p->samples++;
        return 1;
    }
}

/* ---- states and orders ---------------------------------------------------- */

const char *pagein_order_name(pagein_order o) {
    switch (o) {
    case PAGEIN_ORDER_NONE: return "none";
    case PAGEIN_ORDER_BLOCK: return "block";
    case PAGEIN_ORDER_GLOBAL: return "global";
    }
    return "unknown";
}

int pagein_order_from_name(const char *n) {
    if (!n) return -1;
    for (int k = 0; k <= PAGEIN_ORDER_GLOBAL; k++)
        if (!strcmp(n, pagein_order_name((pagein_order)k))) return k;
    return -1;
}

int pagein_pipe_state(pagein_dataset *d, const pagein_pipe_opts *opts, uint64_t seen, char *buf, size_t cap) {
    pi_err_clear();
    RETURN_IF(!d, PAGEIN_E_INVALID, "pipe: NULL dataset");
    pagein_pipe_opts o;
    FORWARD_IF(pi_pipe_opts_norm(&o, opts));
    struct pi_iv *rem = NULL, *out = NULL;
    size_t nrem = 0, nout = 0, ocap = 0;
    uint64_t epoch;
    FORWARD_IF(initial_rem(d, &o, &rem, &nrem, &epoch));
    uint64_t M = 0;
    for (size_t i = 0; i < nrem; i++) M += rem[i].b - rem[i].a;
    int rc = 0;
    struct pi_part_cur cur = {0, 0};
    for (uint32_t r = 0; r < o.world_size && rc == 0; r++) {
        uint64_t rs = pi_mul_div(M, r, o.world_size), re = pi_mul_div(M, r + 1, o.world_size), L = re - rs;
        for (uint32_t w = 0; w < o.num_workers && rc == 0; w++) {
            uint64_t off, cnt, c = pi_part_consumed(L, o.batch, w, o.num_workers, seen);
            pi_part_worker(L, o.batch, w, o.num_workers, &off, &cnt);
            if (c < cnt) rc = pi_part_map(rem, nrem, rs + off + c, rs + off + cnt, &out, &nout, &ocap, &cur);
        }
    }
    pi_free(rem);
    if (rc < 0) {
        pi_free(out);
        return rc;
    }
    struct pi_buf r = {0}, b = {0};
    char tmp[256];
    for (size_t i = 0; i < nout; i++) {
        snprintf(tmp, sizeof tmp, "%s%" PRIu64 "-%" PRIu64, i ? "," : "", out[i].a, out[i].b);
        pi_buf_str(&r, tmp);
    }
    snprintf(tmp, sizeof tmp,
             "pagein-pipe/2 order=%s seed=%" PRIu64 " epoch=%" PRIu64 " n=%" PRIu64 " groups=%" PRIu64
             " window=%u data=%016" PRIx64 " sum=%016" PRIx64 " remaining=",
             pagein_order_name(o.order), o.seed, epoch, d->nsamples, d->ngroups, o.window, data_fingerprint(d),
             fnv(FNV0, r.p, r.n));
    pi_buf_str(&b, tmp);
    if (r.n) pi_buf_put(&b, r.p, r.n);
    b.oom |= r.oom;
    pi_buf_free(&r);
    pi_free(out);
    if (b.oom) {
        pi_buf_free(&b);
        return pi_err(-ENOMEM, "pipe: out of memory");
    }
    size_t n = b.n;
    if (buf && cap) {
        size_t k = PI_MIN(n, cap - 1);
        memcpy(buf, b.p, k);
        buf[k] = 0;
    }
    pi_buf_free(&b);
    return n > INT32_MAX ? pi_err(PAGEIN_E_LIMIT, "pipe: state too long") : (int)n;
}

int pagein_pipe_state_parse(const char *state, pagein_pipe_state_info *info) {
    pi_err_clear();
    RETURN_IF(!state || !info, PAGEIN_E_INVALID, "pipe state: NULL argument");
    struct pstate st;
    FORWARD_IF(state_parse(state, &st));
    uint64_t rest = 0, end = st.nrem ? st.rem[st.nrem - 1].b : 0;
    for (size_t i = 0; i < st.nrem; i++) rest += st.rem[i].b - st.rem[i].a;
    pi_free(st.rem);
    RETURN_IF(end > st.n, PAGEIN_E_INVALID, "pipe state: positions past its %" PRIu64 " samples", st.n);
    RETURN_IF(st.window > UINT32_MAX, PAGEIN_E_INVALID, "pipe state: window %" PRIu64, st.window);
    *info = (pagein_pipe_state_info){(pagein_order)st.order, st.seed, st.epoch, st.n, st.G, (uint32_t)st.window, rest};
    return 0;
}

int pagein_pipe_order(pagein_dataset *d, const pagein_pipe_opts *opts, uint64_t *ids, uint64_t n) {
    pi_err_clear();
    RETURN_IF(!d || (!ids && n), PAGEIN_E_INVALID, "pipe: NULL argument");
    RETURN_IF(n != d->nsamples, PAGEIN_E_INVALID, "pipe: order of %" PRIu64 " ids for %" PRIu64 " samples", n, d->nsamples);
    pagein_pipe_opts o;
    FORWARD_IF(pi_pipe_opts_norm(&o, opts));
    struct pi_seq q;
    int rc = pi_seq_make(&q, d, o.order, o.seed, o.epoch, o.window);
    if (rc == 0) rc = pi_seq_flatten(&q, ids);
    pi_seq_free(&q);
    return rc;
}

int pagein_pipe_ids(pagein_dataset *d, const pagein_pipe_opts *opts, uint64_t *ids, uint64_t cap, uint64_t *n) {
    pi_err_clear();
    RETURN_IF(!d || !n || (!ids && cap), PAGEIN_E_INVALID, "pipe: NULL argument");
    pagein_pipe *p = pi_calloc(1, sizeof *p);
    if (!p) return pi_err(-ENOMEM, "pipe: out of memory");
    p->d = d;
    struct pi_iv *rem = NULL;
    size_t nrem = 0;
    int rc = pi_pipe_opts_norm(&p->o, opts);
    if (rc == 0) rc = initial_rem(d, &p->o, &rem, &nrem, &p->epoch);
    if (rc == 0) rc = pi_seq_make(&p->q, d, p->o.order, p->o.seed, p->epoch, p->o.window);
    if (rc == 0) rc = plan(p, rem, nrem);
    if (rc == 0) *n = p->mylen;
    for (size_t k = 0; rc == 0 && k < p->nunits && p->ustart[k + 1] <= cap; k++) rc = unit_ids(p, k, ids + p->ustart[k]);
    if (rc == 0 && cap && cap < p->mylen)
        rc = pi_err(PAGEIN_E_LIMIT, "pipe: %" PRIu64 " ids, room for %" PRIu64, p->mylen, cap);
    pi_free(rem);
    pi_seq_free(&p->q);
    pi_free(p->mine);
    pi_free(p->minepre);
    pi_free(p->ustart);
    pi_free(p);
    return rc;
}
