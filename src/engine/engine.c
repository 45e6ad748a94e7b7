/*
 * engine.c - the one range engine (engine.h): a plan of spans is coalesced
 * and cut into requests, the requests are read keeping `depth` in flight,
 * and the bytes are delivered into caller buffers, the page cache, or a
 * bounded ring consumed on the caller's thread.
 *
 * Two ways to keep requests in flight:
 *  - batch: when every request goes straight into a caller buffer (the
 *    READ strategy's whole files into anonymous memory) and the source has
 *    a readv, the whole plan is one readv per source (io_uring for local
 *    files, the connection pool for remote ones). Per-request latency is
 *    then derived from completion times: readv starts requests in order as
 *    slots free, so request i (i >= depth) starts when the (i - depth)-th
 *    completion arrives.
 *  - workers: otherwise `depth` threads (started for the run, or the
 *    caller's crew, o->crew) each claim the next request, read
 *    it with the source's read (into the caller buffer, a per-thread
 *    scratch buffer, or a ring slot) and deliver it. The ring bounds
 *    STREAM's memory to ring * request_bytes whatever the plan's size.
 *
 * PAGECACHE reads each request into a per-thread scratch buffer and drops
 * it (buffered reads fill the page cache; the copy costs little next to the
 * I/O and, unlike touching a mapping, never SIGBUSes on a shrunk file).
 *
 * The first failure stops the plan: no request is started after it, the
 * ones in flight finish, and the error names the source, offset and length.
 *
 * pi_engine_run may probe its first source (pi_engine_choose) when neither
 * size nor depth is given; that writes the source's facts, so callers that
 * run plans on one source from several threads at once pass both.
 */
#include "engine.h"

#include "../core/mem.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* BUFFERS with a fill (pi_engine_opts.fill): each batch handed to the
 * local readv is at least this many bytes of populated destinations, and
 * then as many more as are populated already. */
#define FILL_WINDOW (8ull << 20)

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* ---- planning ----------------------------------------------------------- */

void pi_engine_plan_free(struct pi_engine_plan *p) {
    if (!p) return;
    pi_free(p->req);
    pi_free(p->piece);
    memset(p, 0, sizeof *p);
}

struct erun {
    uint32_t src;
    uint64_t start, end;
    size_t q0; /* first request */
};

static size_t nreq_of(uint64_t a, uint64_t e, uint64_t R) { return (size_t)((e - 1) / R - a / R + 1); }

int pi_engine_plan_make(struct pi_source *const *srcs, size_t nsrc, const struct pi_span *spans, size_t n,
                        enum pi_deliver deliver, uint64_t R, uint64_t max_gap, struct pi_engine_plan *p) {
    memset(p, 0, sizeof *p);
    RETURN_IF(!spans && n, PAGEIN_E_INVALID, "engine: NULL span array");
    RETURN_IF(R == 0, PAGEIN_E_INVALID, "engine: request size 0");
    if (max_gap == UINT64_MAX) max_gap = PI_ENGINE_DEFAULT_GAP;
    for (size_t i = 0; i < n; i++) {
        const struct pi_span *s = &spans[i];
        RETURN_IF(s->src >= nsrc || !srcs[s->src], PAGEIN_E_INVALID, "engine: span %zu names source %" PRIu32 " of %zu",
                  i, s->src, nsrc);
        uint64_t end;
        RETURN_IF(pi_add_overflow(s->off, s->len, &end) || end > srcs[s->src]->size, PAGEIN_E_RANGE,
                  "%s: span %zu [%" PRIu64 ", +%" PRIu64 ") is past the end (%" PRIu64 " bytes)",
                  srcs[s->src]->name ? srcs[s->src]->name : "?", i, s->off, s->len, srcs[s->src]->size);
        RETURN_IF(deliver == PI_DELIVER_BUFFERS && s->len && !s->dst, PAGEIN_E_INVALID,
                  "engine: span %zu has no destination buffer", i);
    }
    struct erun *runs = pi_malloc((n ? n : 1) * sizeof *runs);
    size_t *run_of = pi_malloc((n ? n : 1) * sizeof *run_of);
    size_t *cnt = NULL;
    int rc = 0;
    if (!runs || !run_of) {
        rc = pi_err(-ENOMEM, "engine: out of memory planning %zu spans", n);
        goto out;
    }
    /* runs: consecutive spans of one source, each starting at or after the
     * end of the one before (an overlapping or backward span starts a new
     * run: then requests stay in plan order and pieces never overlap), gaps
     * at most max_gap */
    size_t nr = 0, nreq = 0, npiece = 0;
    for (size_t i = 0; i < n; i++) {
        const struct pi_span *s = &spans[i];
        if (!s->len) {
            run_of[i] = SIZE_MAX;
            continue;
        }
        struct erun *cur = nr ? &runs[nr - 1] : NULL;
        if (cur && cur->src == s->src && s->off >= cur->end && s->off - cur->end <= max_gap)
            cur->end = s->off + s->len;
        else
            runs[nr++] = (struct erun){s->src, s->off, s->off + s->len, 0};
        run_of[i] = nr - 1;
    }
    for (size_t r = 0; r < nr; r++) {
        runs[r].q0 = nreq;
        nreq += nreq_of(runs[r].start, runs[r].end, R);
    }
    for (size_t i = 0; i < n; i++)
        if (run_of[i] != SIZE_MAX) npiece += nreq_of(spans[i].off, spans[i].off + spans[i].len, R);
    p->req = pi_calloc(nreq ? nreq : 1, sizeof *p->req);
    p->piece = pi_malloc((npiece ? npiece : 1) * sizeof *p->piece);
    cnt = pi_calloc(nreq ? nreq : 1, sizeof *cnt);
    if (!p->req || !p->piece || !cnt) {
        rc = pi_err(-ENOMEM, "engine: out of memory for %zu requests", nreq);
        goto out;
    }
    p->nreq = nreq;
    p->npiece = npiece;
    for (size_t r = 0; r < nr; r++) {
        uint64_t o = runs[r].start;
        for (size_t k = runs[r].q0; o < runs[r].end; k++) {
            uint64_t e = (o / R + 1) * R;
            if (e > runs[r].end || e < o) e = runs[r].end;
            p->req[k] = (struct pi_engine_req){runs[r].src, o, e - o, 0, 0, 0};
            p->bytes += e - o;
            o = e;
        }
    }
    /* pieces per request, in plan order */
    for (size_t i = 0; i < n; i++) {
        if (run_of[i] == SIZE_MAX) continue;
        const struct erun *ru = &runs[run_of[i]];
        size_t k0 = ru->q0 + (size_t)(spans[i].off / R - ru->start / R);
        size_t m = nreq_of(spans[i].off, spans[i].off + spans[i].len, R);
        for (size_t k = k0; k < k0 + m; k++) cnt[k]++;
    }
    size_t acc = 0;
    for (size_t k = 0; k < nreq; k++) {
        p->req[k].p0 = acc;
        acc += cnt[k];
        p->req[k].p1 = acc;
        cnt[k] = p->req[k].p0; /* now the fill cursor */
    }
    for (size_t i = 0; i < n; i++) {
        if (run_of[i] == SIZE_MAX) continue;
        const struct erun *ru = &runs[run_of[i]];
        uint64_t so = spans[i].off, se = spans[i].off + spans[i].len;
        size_t k = ru->q0 + (size_t)(so / R - ru->start / R);
        for (uint64_t o = so; o < se; k++) {
            const struct pi_engine_req *q = &p->req[k];
            uint64_t e = PI_MIN(se, q->off + q->len);
            p->piece[cnt[k]++] = (struct pi_engine_piece){i, o - so, o - q->off, e - o};
            o = e;
        }
    }
    /* direct requests and wasted bytes (pieces of a request are disjoint) */
    for (size_t k = 0; k < nreq; k++) {
        struct pi_engine_req *q = &p->req[k];
        const struct pi_engine_piece *a = &p->piece[q->p0];
        q->direct = deliver == PI_DELIVER_BUFFERS && q->p1 - q->p0 == 1 && a->len == q->len;
        uint64_t covered = 0;
        for (size_t j = q->p0; j < q->p1; j++) covered += p->piece[j].len;
        p->bytes_wasted += q->len - covered;
    }
out:
    pi_free(runs);
    pi_free(run_of);
    pi_free(cnt);
    if (rc < 0) pi_engine_plan_free(p);
    return rc;
}

/* ---- running ------------------------------------------------------------ */

enum { RQ_PENDING = 0, RQ_READING, RQ_READY, RQ_DONE };

struct erunner {
    struct pi_source *const *srcs;
    const struct pi_span *spans;
    const struct pi_engine_opts *o;
    struct pi_engine_plan *p;
    uint64_t R;
    unsigned depth;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t next;          /* next request to claim */
    int rc;               /* first failure */
    char detail[768];
    uint64_t *lat;        /* per request, ns */
    uint64_t inflight, max_inflight;
    /* STREAM */
    uint8_t **ring;
    size_t nring, *free_slots, nfree;
    uint8_t *state;
    size_t *slot_of;
    size_t *ready_q, ready_head, ready_tail;
    /* batch */
    uint64_t t_batch, *done_t;
    size_t ndone;
    /* the submit side of the batch readvs (pi_readv_view), summed */
    int view;
    double sub_area_s; /* requests x seconds */
    uint64_t sub_max;
    double issue_s;
    int issue_async;
};

static int cancelled(const struct erunner *x) { return x->o->cancel && atomic_load(x->o->cancel); }

/* Records the first failure (under mu). */
static void fail_locked(struct erunner *x, int rc, const char *detail) {
    if (x->rc < 0) return;
    x->rc = rc;
    snprintf(x->detail, sizeof x->detail, "%s", detail);
    pthread_cond_broadcast(&x->cv);
}

static void fail_req_locked(struct erunner *x, const struct pi_engine_req *q, int rc, const char *why) {
    if (x->rc < 0) return;
    char d[768];
    const struct pi_source *s = x->srcs[q->src];
    snprintf(d, sizeof d, "%s: read of %" PRIu64 " bytes at offset %" PRIu64 " failed: %s", s->name ? s->name : "?",
             q->len, q->off, why && *why ? why : pagein_strerror(rc));
    fail_locked(x, rc, d);
}

static void deliver_copy(struct erunner *x, const struct pi_engine_req *q, const uint8_t *buf) {
    for (size_t j = q->p0; j < q->p1; j++) {
        const struct pi_engine_piece *pc = &x->p->piece[j];
        memcpy((uint8_t *)x->spans[pc->span].dst + pc->span_off, buf + pc->req_off, pc->len);
    }
}

static void *worker(void *arg) {
    struct erunner *x = arg;
    const int stream = x->o->deliver == PI_DELIVER_STREAM;
    uint8_t *scratch = NULL;
    for (;;) {
        pthread_mutex_lock(&x->mu);
        size_t slot = 0;
        if (stream)
            while (x->rc == 0 && x->next < x->p->nreq && x->nfree == 0) pthread_cond_wait(&x->cv, &x->mu);
        if (x->rc < 0 || x->next >= x->p->nreq) {
            pthread_mutex_unlock(&x->mu);
            break;
        }
        if (cancelled(x)) {
            fail_locked(x, PAGEIN_E_CANCELLED, "engine: cancelled");
            pthread_mutex_unlock(&x->mu);
            break;
        }
        if (stream) slot = x->free_slots[--x->nfree];
        size_t k = x->next++;
        if (++x->inflight > x->max_inflight) x->max_inflight = x->inflight;
        if (stream) x->state[k] = RQ_READING;
        pthread_mutex_unlock(&x->mu);

        const struct pi_engine_req *q = &x->p->req[k];
        struct pi_source *s = x->srcs[q->src];
        uint8_t *buf;
        if (q->direct) {
            const struct pi_engine_piece *pc = &x->p->piece[q->p0];
            buf = (uint8_t *)x->spans[pc->span].dst + pc->span_off;
        } else if (stream) {
            buf = x->ring[slot];
        } else {
            if (!scratch && !(scratch = pi_malloc(x->R))) {
                pthread_mutex_lock(&x->mu);
                x->inflight--;
                fail_locked(x, -ENOMEM, "engine: out of memory for a request buffer");
                pthread_mutex_unlock(&x->mu);
                break;
            }
            buf = scratch;
        }
        if (x->o->fill && x->o->deliver == PI_DELIVER_BUFFERS)
            for (size_t j = q->p0; j < q->p1; j++) {
                const struct pi_engine_piece *pj = &x->p->piece[j];
                pi_mem_fill_wait(x->o->fill, (uint8_t *)x->spans[pj->span].dst + pj->span_off, pj->len);
            }
        uint64_t t = now_ns();
        pi_err_clear();
        int rc = s->ops->read(s, buf, q->len, q->off);
        x->lat[k] = now_ns() - t;
        if (rc == 0 && !stream && !q->direct && x->o->deliver == PI_DELIVER_BUFFERS) deliver_copy(x, q, buf);
        pthread_mutex_lock(&x->mu);
        x->inflight--;
        if (rc < 0) {
            fail_req_locked(x, q, rc, pagein_last_error_detail());
        } else if (stream) {
            x->state[k] = RQ_READY;
            x->slot_of[k] = slot;
            x->ready_q[x->ready_tail++] = k;
            pthread_cond_broadcast(&x->cv);
        }
        pthread_mutex_unlock(&x->mu);
    }
    pi_free(scratch);
    return NULL;
}

/* STREAM: the caller's thread consumes ready requests. */
static void consume_loop(struct erunner *x) {
    size_t c = 0; /* in order: next request to consume */
    for (size_t done = 0; done < x->p->nreq; done++) {
        pthread_mutex_lock(&x->mu);
        size_t k;
        for (;;) {
            if (x->rc < 0) break;
            if (x->o->in_order) {
                if (x->state[c] == RQ_READY) break;
            } else if (x->ready_head < x->ready_tail) {
                break;
            }
            pthread_cond_wait(&x->cv, &x->mu);
        }
        if (x->rc < 0) {
            pthread_mutex_unlock(&x->mu);
            return;
        }
        k = x->o->in_order ? c++ : x->ready_q[x->ready_head++];
        size_t slot = x->slot_of[k];
        pthread_mutex_unlock(&x->mu);
        const struct pi_engine_req *q = &x->p->req[k];
        int rc = 0;
        for (size_t j = q->p0; j < q->p1 && rc == 0; j++) {
            const struct pi_engine_piece *pc = &x->p->piece[j];
            rc = x->o->consume(x->o->arg, pc->span, pc->span_off, x->ring[slot] + pc->req_off, pc->len);
        }
        pthread_mutex_lock(&x->mu);
        x->state[k] = RQ_DONE;
        x->free_slots[x->nfree++] = slot;
        if (rc != 0) {
            char d[256];
            snprintf(d, sizeof d, "engine: consumer stopped at span %zu: %s", x->p->piece[q->p0].span,
                     rc < 0 ? pagein_last_error_detail() : "cancelled");
            fail_locked(x, rc < 0 ? rc : PAGEIN_E_CANCELLED, d);
        }
        pthread_cond_broadcast(&x->cv);
        pthread_mutex_unlock(&x->mu);
    }
}

/* One crew item: a worker that claims requests until none are left. */
static int crew_worker(void *arg, size_t i) {
    (void)i;
    worker(arg);
    return 0;
}

static int run_workers(struct erunner *x) {
    const int stream = x->o->deliver == PI_DELIVER_STREAM;
    unsigned nt = x->depth;
    if (nt > x->p->nreq) nt = (unsigned)x->p->nreq;
    if (!stream && x->o->crew) { /* the caller's kept workers, the caller among them */
        int rc = pi_crew_run(x->o->crew, nt, crew_worker, x);
        return rc < 0 ? rc : x->rc;
    }
    if (stream) {
        x->nring = x->o->ring ? x->o->ring : x->depth + 1;
        if (x->nring > x->p->nreq) x->nring = x->p->nreq;
        if (nt > x->nring) nt = (unsigned)x->nring;
        x->ring = pi_calloc(x->nring, sizeof *x->ring);
        x->free_slots = pi_malloc(x->nring * sizeof *x->free_slots);
        x->state = pi_calloc(x->p->nreq, 1);
        x->slot_of = pi_malloc(x->p->nreq * sizeof *x->slot_of);
        x->ready_q = pi_malloc(x->p->nreq * sizeof *x->ready_q);
        if (!x->ring || !x->free_slots || !x->state || !x->slot_of || !x->ready_q)
            return pi_err(-ENOMEM, "engine: out of memory for a %zu-buffer ring", x->nring);
        for (size_t i = 0; i < x->nring; i++) {
            if (!(x->ring[i] = pi_malloc(x->R)))
                return pi_err(-ENOMEM, "engine: out of memory for a %zu x %" PRIu64 "-byte ring", x->nring, x->R);
            x->free_slots[x->nfree++] = x->nring - 1 - i;
        }
    }
    pthread_t *tid = pi_malloc((nt ? nt : 1) * sizeof *tid);
    if (!tid) return pi_err(-ENOMEM, "engine: out of memory");
    unsigned started = 0;
    /* STREAM: every worker is a thread and the caller consumes; otherwise
     * the caller is one of the workers */
    for (unsigned t = stream ? 0 : 1; t < nt; t++) {
        if (pthread_create(&tid[started], NULL, worker, x) != 0) break; /* run with fewer */
        started++;
    }
    if (stream) {
        if (started == 0) {
            pi_free(tid);
            return pi_err(-EAGAIN, "engine: cannot start a reader thread");
        }
        consume_loop(x);
    } else {
        worker(x);
    }
    for (unsigned t = 0; t < started; t++) pthread_join(tid[t], NULL);
    pi_free(tid);
    return x->rc;
}

/* batch: one readv per source */
struct bctx {
    struct erunner *x;
    size_t base; /* plan index of this batch's first request */
};

static int batch_done(void *arg, struct pi_read_req *r) {
    struct bctx *b = arg;
    struct erunner *x = b->x;
    size_t k = (size_t)(uintptr_t)r->user;
    uint64_t t = now_ns();
    pthread_mutex_lock(&x->mu);
    x->done_t[x->ndone++] = t;
    int stop = 0;
    if (r->rc < 0) {
        fail_req_locked(x, &x->p->req[k], r->rc, pagein_last_error_detail());
        stop = r->rc;
    } else if (cancelled(x)) {
        fail_locked(x, PAGEIN_E_CANCELLED, "engine: cancelled");
        stop = PAGEIN_E_CANCELLED;
    }
    pthread_mutex_unlock(&x->mu);
    return stop;
}

static int run_batch(struct erunner *x) {
    x->done_t = pi_malloc((x->p->nreq ? x->p->nreq : 1) * sizeof *x->done_t);
    struct pi_read_req *rq = pi_calloc(x->p->nreq ? x->p->nreq : 1, sizeof *rq);
    if (!x->done_t || !rq) {
        pi_free(rq);
        return pi_err(-ENOMEM, "engine: out of memory for %zu requests", x->p->nreq);
    }
    size_t k = 0;
    while (k < x->p->nreq && x->rc == 0) {
        uint32_t src = x->p->req[k].src;
        size_t a = k;
        uint64_t wbytes = 0;
        while (k < x->p->nreq && x->p->req[k].src == src) {
            const struct pi_engine_req *q = &x->p->req[k];
            const struct pi_engine_piece *pc = &x->p->piece[q->p0];
            uint8_t *dst = (uint8_t *)x->spans[pc->span].dst + pc->span_off;
            if (x->o->fill) { /* a window of destinations already populated, at least FILL_WINDOW bytes */
                if (k == a || wbytes < FILL_WINDOW) pi_mem_fill_wait(x->o->fill, dst, q->len);
                else if (!pi_mem_fill_ready(x->o->fill, dst, q->len)) break;
            }
            rq[k] = (struct pi_read_req){dst, q->off, q->len, 0, (void *)(uintptr_t)k};
            wbytes += q->len;
            k++;
        }
        struct bctx b = {x, a};
        struct pi_source *s = x->srcs[src];
        pthread_mutex_lock(&x->mu);
        size_t nd0 = x->ndone;
        pthread_mutex_unlock(&x->mu);
        x->t_batch = now_ns();
        pi_err_clear();
        int rc;
        if (s->ops->readv_view) { /* a readv that reports its submit side (local files) */
            struct pi_readv_view v;
            memset(&v, 0, sizeof v);
            rc = s->ops->readv_view(s, rq + a, k - a, x->depth, batch_done, &b, &v);
            x->view = 1;
            x->sub_area_s += v.mean_inflight * v.seconds;
            if (v.max_inflight > x->sub_max) x->sub_max = v.max_inflight;
            x->issue_s += v.issue_seconds;
            x->issue_async |= v.async;
        } else {
            rc = s->ops->readv(s, rq + a, k - a, x->depth, batch_done, &b);
        }
        if (rc < 0) {
            pthread_mutex_lock(&x->mu);
            if (x->rc == 0) { /* the source failed without a failing request (setup) */
                char d[512];
                snprintf(d, sizeof d, "%s: %s", s->name ? s->name : "?", pagein_last_error_detail());
                fail_locked(x, rc, d);
            }
            pthread_mutex_unlock(&x->mu);
        }
        /* latencies: completion j of this batch (in time order) ended at
         * done_t[nd0 + j]; the request that completed j-th started at
         * max(batch start, completion j - depth); approximated per request
         * by completion order */
        size_t nb = x->ndone - nd0;
        for (size_t j = 0; j < nb; j++) {
            uint64_t st = j >= x->depth ? x->done_t[nd0 + j - x->depth] : x->t_batch;
            x->lat[a + j] = x->done_t[nd0 + j] > st ? x->done_t[nd0 + j] - st : 0;
        }
        uint64_t inflight = PI_MIN((uint64_t)x->depth, (uint64_t)(k - a));
        if (inflight > x->max_inflight) x->max_inflight = inflight;
    }
    pi_free(rq);
    return x->rc;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void fill_stats(struct erunner *x, struct pi_engine_stats *st, size_t nrun, double secs) {
    st->requests = nrun;
    st->bytes = 0;
    for (size_t k = 0; k < nrun; k++) {
        uint64_t len = x->p->req[k].len;
        st->bytes += len;
        unsigned b = 0;
        while (b + 1 < PI_ENGINE_HIST && len >= (4096ull << (b + 1))) b++;
        st->size_hist[b]++;
    }
    st->bytes_wasted = x->p->bytes_wasted;
    st->max_inflight = x->max_inflight;
    st->seconds = secs;
    double area = 0;
    for (size_t k = 0; k < nrun; k++) area += (double)x->lat[k];
    st->mean_inflight = secs > 0 ? area / 1e9 / secs : 0;
    if (x->view) { /* batch over the local readv: what it measured, not the estimate from completions */
        st->submit_view = 1;
        st->submit_mean_inflight = secs > 0 ? x->sub_area_s / secs : 0;
        st->submit_max_inflight = x->sub_max;
        st->issue_seconds = x->issue_s;
        st->issue_async = x->issue_async;
        st->mean_inflight = st->submit_mean_inflight;
        st->max_inflight = st->submit_max_inflight;
    } else if (!x->done_t) { /* workers: a request is in flight while a worker reads it */
        st->submit_view = 1;
        st->submit_mean_inflight = st->mean_inflight;
        st->submit_max_inflight = st->max_inflight;
    }
    if (nrun) {
        qsort(x->lat, nrun, sizeof *x->lat, cmp_u64);
        st->lat_p50_ns = x->lat[(nrun - 1) * 50 / 100];
        st->lat_p95_ns = x->lat[(nrun - 1) * 95 / 100];
        st->lat_p99_ns = x->lat[(nrun - 1) * 99 / 100];
    }
}

int pi_engine_run(struct pi_source *const *srcs, size_t nsrc, const struct pi_span *spans, size_t n,
                  const struct pi_engine_opts *o, struct pi_engine_stats *stats) {
    struct pi_engine_opts dflt = {.max_gap = UINT64_MAX};
    if (!o) o = &dflt;
    if (stats) memset(stats, 0, sizeof *stats);
    RETURN_IF(!srcs && nsrc, PAGEIN_E_INVALID, "engine: NULL source array");
    RETURN_IF(o->deliver == PI_DELIVER_STREAM && !o->consume, PAGEIN_E_INVALID, "engine: STREAM without consume");
    RETURN_IF(o->deliver > PI_DELIVER_STREAM, PAGEIN_E_INVALID, "engine: unknown delivery %d", (int)o->deliver);
    uint64_t R = o->request_bytes;
    unsigned depth = o->depth;
    char why[160] = "";
    if (!R || !depth) {
        /* the first source that the plan reads decides */
        struct pi_source *s0 = NULL;
        for (size_t i = 0; i < n && !s0; i++)
            if (spans[i].len && spans[i].src < nsrc) s0 = srcs[spans[i].src];
        if (!s0 && nsrc) s0 = srcs[0];
        if (s0) {
            pi_engine_choose(s0, o, 1, &R, &depth, why, sizeof why);
        } else {
            R = R ? R : 4u << 20;
            depth = depth ? depth : 8;
        }
    } else {
        snprintf(why, sizeof why, "options");
    }
    if (stats) {
        stats->request_bytes = R;
        stats->depth = depth;
        snprintf(stats->why, sizeof stats->why, "%s", why);
    }
    struct erunner x = {.srcs = srcs, .spans = spans, .o = o, .R = R, .depth = depth};
    struct pi_engine_plan plan;
    int rc = pi_engine_plan_make(srcs, nsrc, spans, n, o->deliver, R, o->max_gap, &plan);
    if (rc < 0) return rc;
    x.p = &plan;
    pthread_mutex_init(&x.mu, NULL);
    pthread_cond_init(&x.cv, NULL);
    uint64_t t0 = now_ns();
    if (!(x.lat = pi_calloc(plan.nreq ? plan.nreq : 1, sizeof *x.lat))) {
        rc = pi_err(-ENOMEM, "engine: out of memory");
        goto out;
    }
    if (plan.nreq == 0) goto out;
    int batch = o->deliver == PI_DELIVER_BUFFERS;
    for (size_t k = 0; k < plan.nreq && batch; k++) batch = plan.req[k].direct && srcs[plan.req[k].src]->ops->readv;
    /* a caller's kept workers read local buffered files as the local readv's
     * threads would (one pread a request), without starting threads for
     * every run: a training-data unit is a run, and starting 7 threads took
     * 0.3 ms each here, more than the copies of a small unit */
    if (batch && o->crew) {
        int local = 1;
        for (size_t k = 0; k < plan.nreq && local; k++) {
            enum pi_storage st = pi_source_facts(srcs[plan.req[k].src])->storage;
            local = st == PI_STORAGE_LOCAL || st == PI_STORAGE_MEMORY;
        }
        batch = !local;
    }
    if (batch && !(o->cancel && atomic_load(o->cancel)))
        rc = run_batch(&x);
    else
        rc = run_workers(&x);
    if (rc < 0 && x.rc == 0) x.rc = rc; /* setup failure (detail already set) */
    else if (x.rc < 0)
        rc = pi_err(x.rc, "%s", x.detail);
out:;
    double secs = (double)(now_ns() - t0) / 1e9;
    if (stats && x.lat) {
        /* requests that ran: all on success, the claimed ones otherwise */
        size_t nrun = rc == 0 ? plan.nreq : PI_MIN(x.next ? x.next : x.ndone, plan.nreq);
        fill_stats(&x, stats, nrun, secs);
    }
    if (x.ring)
        for (size_t i = 0; i < x.nring; i++) pi_free(x.ring[i]);
    pi_free(x.ring);
    pi_free(x.free_slots);
    pi_free(x.state);
    pi_free(x.slot_of);
    pi_free(x.ready_q);
    pi_free(x.done_t);
    pi_free(x.lat);
    pthread_mutex_destroy(&x.mu);
    pthread_cond_destroy(&x.cv);
    pi_engine_plan_free(&plan);
    return rc;
}

int pi_engine_stats_json(const struct pi_engine_stats *st, char *buf, size_t len) {
    int n = snprintf(buf, len,
                     "{\"requests\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"bytes_wasted\": %" PRIu64
                     ", \"request_bytes\": %" PRIu64 ", \"depth\": %u, \"max_inflight\": %" PRIu64
                     ", \"mean_inflight\": %.2f, \"lat_p50_us\": %.1f, \"lat_p95_us\": %.1f, \"lat_p99_us\": %.1f"
                     ", \"seconds\": %.4f, \"issue_s\": %.4f, \"issue_async\": %s, \"size_hist\": {",
                     st->requests, st->bytes, st->bytes_wasted, st->request_bytes, st->depth, st->max_inflight,
                     st->mean_inflight, st->lat_p50_ns / 1e3, st->lat_p95_ns / 1e3, st->lat_p99_ns / 1e3,
                     st->seconds, st->issue_seconds, st->issue_async ? "true" : "false");
    int first = 1;
    for (int b = 0; b < PI_ENGINE_HIST; b++) {
        if (!st->size_hist[b]) continue;
        if (n < 0 || (size_t)n >= len) break;
        n += snprintf(buf + n, len - (size_t)n, "%s\"%lluK\": %" PRIu64, first ? "" : ", ", 4ull << b,
                      st->size_hist[b]);
        first = 0;
    }
    if (n >= 0 && (size_t)n < len) n += snprintf(buf + n, len - (size_t)n, "}, \"why\": \"");
    for (const char *c = st->why; *c && n >= 0 && (size_t)n + 3 < len; c++) {
        if (*c == '"' || *c == '\\') buf[n++] = '\\';
        buf[n++] = (*c >= 32) ? *c : ' ';
    }
    if (n >= 0 && (size_t)n < len) n += snprintf(buf + n, len - (size_t)n, "\"}");
    return n;
}
