/*
 * choose.c - request size and depth for a source (engine.h).
 *
 * Order: explicit options, then PAGEIN_REQUEST_BYTES / PAGEIN_QUEUE_DEPTH,
 * then what the source declares (facts.request_bytes / facts.depth), then a
 * decision from measured facts (a short probe when the storage kind does
 * not already say how it behaves), then defaults by storage kind.
 *
 * The probe: a few small requests at depth 1 give the round-trip latency;
 * the same number of requests again at depth N give how much throughput
 * grows with depth. Storage where one request costs a round trip (FUSE,
 * NFS, object stores) wants many requests in flight: the depth that covers
 * the latency, as in Little's law. Storage that answers from memory
 * (warm page cache, tmpfs) is CPU bound: one request per CPU. A local
 * disk sits between: a few large requests.
 */
#include "engine.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MiB (1ull << 20)

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static unsigned ncpu(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 2 ? 2 : n > 64 ? 64 : (unsigned)n;
}


static const char *storage_name(enum pi_storage s) {
    switch (s) {
    case PI_STORAGE_LOCAL: return "local disk";
    case PI_STORAGE_MEMORY: return "memory";
    case PI_STORAGE_NETFS: return "network filesystem";
    case PI_STORAGE_FUSE: return "FUSE";
    case PI_STORAGE_REMOTE: return "remote";
    default: return "unknown storage";
    }
}

void pi_engine_decide(const struct pi_source_facts *f, const struct pi_engine_probe_result *pr, uint64_t *R,
                      unsigned *D, char *why, size_t len) {
    uint64_t lat = pr ? pr->lat1_ns : f->measured ? f->latency_ns : 0;
    double speedup = pr ? pr->speedup : 0;
    const char *kind = storage_name(f->storage);
    if (lat) {
        const char *src = pr ? "probe" : "measured";
        if (lat >= 150000) {
            /* round-trip bound: cover the latency with requests in flight;
             * 1 MiB is what FUSE and NFS send at most per request */
            *R = f->storage == PI_STORAGE_REMOTE ? 8 * MiB : MiB;
            *D = lat >= 500000 ? 32 : 16;
            if (pr)
                snprintf(why, len, "%s: %s, %.2f ms a request at depth 1, %.1fx at depth %u: latency-bound, many in flight",
                         src, kind, lat / 1e6, speedup, pr->n);
            else
                snprintf(why, len, "%s: %s, %.2f ms a request at depth 1: latency-bound, many in flight", src, kind,
                         lat / 1e6);
        } else if (lat < 40000 && (!pr || speedup < 3)) {
            *R = 4 * MiB;
            *D = ncpu();
            snprintf(why, len, "%s: %s, %.0f us a request: served from memory, one request per CPU", src, kind,
                     lat / 1e3);
        } else {
            *R = 8 * MiB;
            *D = 8;
            snprintf(why, len, "%s: %s, %.0f us a request at depth 1: a few large requests", src, kind, lat / 1e3);
        }
        return;
    }
    switch (f->storage) {
    case PI_STORAGE_MEMORY:
        *R = 4 * MiB;
        *D = ncpu();
        snprintf(why, len, "facts: memory (%s): CPU bound, one request per CPU", f->fs_type[0] ? f->fs_type : "?");
        break;
    case PI_STORAGE_LOCAL:
        if (f->rotational == 1) {
            *R = 16 * MiB;
            *D = 2;
            snprintf(why, len, "facts: rotating disk: few large requests");
        } else {
            *R = 8 * MiB;
            *D = 8;
            snprintf(why, len, "facts: local disk (%s): a few large requests keep the device busy",
                     f->fs_type[0] ? f->fs_type : "?");
        }
        break;
    case PI_STORAGE_NETFS:
    case PI_STORAGE_FUSE:
        *R = MiB;
        *D = 32;
        snprintf(why, len, "facts: %s (%s), not measured: 1 MiB requests, 32 in flight", kind,
                 f->fs_type[0] ? f->fs_type : "?");
        break;
    case PI_STORAGE_REMOTE:
        *R = 8 * MiB;
        *D = 16;
        snprintf(why, len, "facts: remote (%s), not measured: 8 MiB ranges, 16 in flight",
                 f->fs_type[0] ? f->fs_type : "?");
        break;
    default:
        *R = 4 * MiB;
        *D = 8;
        snprintf(why, len, "defaults: storage unknown");
        break;
    }
}

struct probe_th {
    struct pi_source *s;
    void *buf;
    uint64_t off, len;
    int rc;
    struct gate *go;
};

/* All depth-N probe reads start together: thread creation is not timed. */
struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
};

static void *probe_one(void *arg) {
    struct probe_th *t = arg;
    if (t->go) {
        pthread_mutex_lock(&t->go->mu);
        while (!t->go->open) pthread_cond_wait(&t->go->cv, &t->go->mu);
        pthread_mutex_unlock(&t->go->mu);
    }
    t->rc = t->s->ops->read(t->s, t->buf, t->len, t->off);
    return NULL;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int pi_engine_probe(struct pi_source *s, uint64_t q, unsigned n, struct pi_engine_probe_result *r) {
    enum { SERIAL = 3 };
    memset(r, 0, sizeof *r);
    if (n < 2) n = 2;
    if (n > 32) n = 32;
    uint64_t slots = s->size / q;
    RETURN_IF(slots < SERIAL + n, PAGEIN_E_RANGE, "%s: too small to probe (%" PRIu64 " bytes)", s->name, s->size);
    uint8_t *buf = pi_malloc((size_t)(q * n));
    struct probe_th *th = pi_calloc(n, sizeof *th);
    pthread_t *tid = pi_calloc(n, sizeof *tid);
    int rc = 0;
    if (!buf || !th || !tid) {
        rc = pi_err(-ENOMEM, "engine probe: out of memory");
        goto out;
    }
    /* offsets spread over the source, never the same twice, so each
     * request is cold if the source is; no readahead on a local descriptor
     * meanwhile (a 128 KiB read must cost one request, not a readahead
     * window of megabytes) */
    if (s->fd >= 0) posix_fadvise(s->fd, 0, 0, POSIX_FADV_RANDOM);
    uint64_t stride = slots / (SERIAL + n);
    uint64_t lat[SERIAL];
    for (unsigned i = 0; i < SERIAL; i++) {
        uint64_t t = now_ns();
        if ((rc = s->ops->read(s, buf, q, (i * stride + stride / 2) * q)) < 0) goto out;
        lat[i] = now_ns() - t;
    }
    qsort(lat, SERIAL, sizeof *lat, cmp_u64);
    r->lat1_ns = lat[SERIAL / 2] ? lat[SERIAL / 2] : 1;
    struct gate go = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    unsigned nt = 0;
    for (unsigned i = 0; i < n; i++)
        th[i] = (struct probe_th){s, buf + i * q, ((SERIAL + i) * stride + stride / 2) * q, q, 0, &go};
    for (; nt < n; nt++)
        if (pthread_create(&tid[nt], NULL, probe_one, &th[nt]) != 0) break;
    pthread_mutex_lock(&go.mu);
    go.open = 1;
    uint64_t t = now_ns();
    pthread_cond_broadcast(&go.cv);
    pthread_mutex_unlock(&go.mu);
    for (unsigned i = nt; i < n; i++) probe_one(&th[i]); /* threads that did not start: here */
    for (unsigned i = 0; i < nt; i++) pthread_join(tid[i], NULL);
    r->wallN_ns = now_ns() - t;
    if (!r->wallN_ns) r->wallN_ns = 1;
    for (unsigned i = 0; i < n && rc == 0; i++) rc = th[i].rc;
    if (rc < 0) goto out;
    r->n = n;
    r->probe_bytes = q;
    r->speedup = (double)n * (double)r->lat1_ns / (double)r->wallN_ns;
    pi_source_facts(s)->latency_ns = r->lat1_ns;
    pi_source_facts(s)->bandwidth = (uint64_t)((double)q * 1e9 / (double)r->lat1_ns);
    pi_source_facts(s)->measured = 1;
out:
    if (s->fd >= 0) posix_fadvise(s->fd, 0, 0, POSIX_FADV_NORMAL);
    pi_free(buf);
    pi_free(th);
    pi_free(tid);
    return rc;
}

/* ---- one probe a filesystem ------------------------------------------------
 * A dataset's shards (a model's safetensors files) sit on one filesystem:
 * probing each of them would cost each its round trips (11 requests, 1.4
 * MiB, 15-30 ms on FUSE at 1 ms) for the same answer. A probe's result is
 * kept for its filesystem (st_dev of the source's descriptor) for
 * PROBE_KEEP_NS; the next unmeasured source on it takes that result as its
 * own facts. */
#define PROBE_KEEP_NS (60ull * 1000000000ull)
#define PROBE_MEMO 8
static struct {
    dev_t dev;
    uint64_t at; /* 0: empty */
    struct pi_engine_probe_result r;
} probe_memo[PROBE_MEMO];
static pthread_mutex_t probe_memo_mu = PTHREAD_MUTEX_INITIALIZER;

static int source_dev(const struct pi_source *s, dev_t *dev) {
    struct stat st;
    if (s->fd < 0 || fstat(s->fd, &st) != 0) return 0;
    *dev = st.st_dev;
    return 1;
}

/* 1 and *r: a probe of dev's filesystem younger than PROBE_KEEP_NS. */
static int probe_memo_get(dev_t dev, struct pi_engine_probe_result *r) {
    uint64_t t = now_ns();
    int have = 0;
    pthread_mutex_lock(&probe_memo_mu);
    for (int i = 0; i < PROBE_MEMO && !have; i++)
        if (probe_memo[i].at && probe_memo[i].dev == dev && t - probe_memo[i].at < PROBE_KEEP_NS) {
            *r = probe_memo[i].r;
            have = 1;
        }
    pthread_mutex_unlock(&probe_memo_mu);
    return have;
}

/* Keeps r for dev: in dev's entry, an empty or expired one, else the oldest. */
static void probe_memo_put(dev_t dev, const struct pi_engine_probe_result *r) {
    uint64_t t = now_ns();
    pthread_mutex_lock(&probe_memo_mu);
    int k = 0;
    for (int i = 0; i < PROBE_MEMO; i++) {
        if (probe_memo[i].at && probe_memo[i].dev == dev) {
            k = i;
            break;
        }
        if (!probe_memo[i].at || t - probe_memo[i].at >= PROBE_KEEP_NS || probe_memo[i].at < probe_memo[k].at) k = i;
    }
    probe_memo[k].dev = dev;
    probe_memo[k].at = t ? t : 1;
    probe_memo[k].r = *r;
    pthread_mutex_unlock(&probe_memo_mu);
}

/* Probes s, or takes a recent probe of its filesystem: 1 and *pr, or 0. */
static int probe_or_recall(struct pi_source *s, struct pi_engine_probe_result *pr, int *recalled) {
    dev_t dev = 0;
    int keyed = source_dev(s, &dev);
    *recalled = 0;
    if (keyed && probe_memo_get(dev, pr)) {
        struct pi_source_facts *f = pi_source_facts(s);
        f->latency_ns = pr->lat1_ns;
        f->bandwidth = (uint64_t)((double)pr->probe_bytes * 1e9 / (double)pr->lat1_ns);
        f->measured = 1;
        *recalled = 1;
        return 1;
    }
    pi_err_clear();
    if (pi_engine_probe(s, 128u << 10, 8, pr) != 0) return 0;
    if (keyed) probe_memo_put(dev, pr);
    return 1;
}

void pi_engine_choose(struct pi_source *s, const struct pi_engine_opts *o, int probe, uint64_t *request_bytes,
                      unsigned *depth, char *why, size_t why_len) {
    uint64_t R = o ? o->request_bytes : 0;
    unsigned D = o ? o->depth : 0;
    const char *rsrc = R ? "option" : NULL, *dsrc = D ? "option" : NULL;
    if (!R && (R = pi_env_size("PAGEIN_REQUEST_BYTES", 0))) rsrc = "PAGEIN_REQUEST_BYTES";
    if (!D) {
        uint64_t d = pi_env_size("PAGEIN_QUEUE_DEPTH", 0);
        if (d) {
            D = d > 1024 ? 1024 : (unsigned)d;
            dsrc = "PAGEIN_QUEUE_DEPTH";
        }
    }
    if (!R && pi_source_facts(s)->request_bytes) R = pi_source_facts(s)->request_bytes, rsrc = "source";
    if (!D && pi_source_facts(s)->depth) D = pi_source_facts(s)->depth, dsrc = "source";
    char reason[128] = "";
    if (!R || !D) {
        struct pi_engine_probe_result pr;
        int have = 0, recalled = 0;
        /* a local disk or memory says how it behaves; anything else that
         * has not been measured is probed (once a filesystem) */
        if (probe && !pi_source_facts(s)->measured && pi_source_facts(s)->storage != PI_STORAGE_LOCAL &&
            pi_source_facts(s)->storage != PI_STORAGE_MEMORY && s->size >= 16 * (128u << 10))
            have = probe_or_recall(s, &pr, &recalled);
        uint64_t r2;
        unsigned d2;
        pi_engine_decide(pi_source_facts(s), have ? &pr : NULL, &r2, &d2, reason, sizeof reason);
        if (recalled) { /* "another file's probe: ..." */
            char rr[sizeof reason];
            snprintf(rr, sizeof rr, "another file's %s", reason);
            memcpy(reason, rr, sizeof reason);
        }
        if (!R) R = r2, rsrc = "chosen";
        if (!D) D = d2, dsrc = "chosen";
    }
    *request_bytes = R;
    *depth = D;
    if (why && why_len)
        snprintf(why, why_len, "request %" PRIu64 " KiB (%s), depth %u (%s)%s%s", R >> 10, rsrc, D, dsrc,
                 reason[0] ? ": " : "", reason);
}
