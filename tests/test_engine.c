/* test_engine.c - the range engine (src/engine/): plans, delivery, faults,
 * cancellation, the request-size/depth decision, and the local readv.
 * White-box: includes src/engine/engine.h and a test double of a source
 * (struct pi_source_ops over a memory buffer with injectable faults).
 * Under valgrind: PAGEIN_NO_URING=1 valgrind build/tests/run engine_...
 * (valgrind does not see the kernel write io_uring's buffers). */
#include "test.h"

#include "../src/engine/engine.h"
#include "../src/load/load.h"
#include "../src/source/file_readv.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* ---- the test double ---------------------------------------------------- */
struct msrc {
    const uint8_t *data;
    uint64_t fail_off;       /* a read covering this offset fails with fail_rc */
    int fail_rc;
    unsigned delay_us;       /* per read */
    uint64_t lat_ns;         /* probe: sleep per read, regardless of depth */
    _Atomic int inflight, max_inflight, reads;
    _Atomic int *cancel_after; /* set *cancel_flag after this many reads */
    _Atomic int *cancel_flag;
};

static int m_read(struct pi_source *s, void *buf, uint64_t len, uint64_t off) {
    struct msrc *m = s->impl;
    int now = atomic_fetch_add(&m->inflight, 1) + 1;
    int mx = atomic_load(&m->max_inflight);
    while (now > mx && !atomic_compare_exchange_weak(&m->max_inflight, &mx, now)) {}
    int k = atomic_fetch_add(&m->reads, 1) + 1;
    if (m->cancel_after && k >= atomic_load(m->cancel_after)) atomic_store(m->cancel_flag, 1);
    if (m->delay_us) usleep(m->delay_us);
    /* reads past the failing one take longer, so that a loaded machine's
     * engine sees the failure before it could have issued the whole plan */
    if (m->fail_rc && m->delay_us && off > m->fail_off) usleep(20 * m->delay_us);
    if (m->lat_ns) {
        struct timespec ts = {0, (long)m->lat_ns};
        nanosleep(&ts, NULL);
    }
    int rc = 0;
    if (off + len > s->size)
        rc = pi_err(PAGEIN_E_TRUNCATED, "memory source: read past the end");
    else if (m->fail_rc && m->fail_off >= off && m->fail_off < off + len)
        rc = pi_err(m->fail_rc, "memory source: injected failure");
    else
        memcpy(buf, m->data + off, len);
    atomic_fetch_sub(&m->inflight, 1);
    return rc;
}

static const struct pi_source_ops msrc_ops = {.name = "memory-test", .read = m_read};

/* The same with a readv (one request at a time, in order), so plans whose
 * requests all go straight into caller buffers take the engine's batch
 * path. */
static int m_readv(struct pi_source *s, struct pi_read_req *reqs, size_t n, unsigned depth, pi_read_done_fn done,
                   void *arg) {
    (void)depth;
    int rc = 0;
    size_t i = 0;
    for (; i < n && rc == 0; i++) {
        reqs[i].rc = m_read(s, reqs[i].buf, reqs[i].len, reqs[i].off);
        int stop = done ? done(arg, &reqs[i]) : 0;
        rc = reqs[i].rc < 0 ? reqs[i].rc : stop;
    }
    for (; i < n; i++) reqs[i].rc = PAGEIN_E_CANCELLED;
    return rc;
}

static const struct pi_source_ops msrc_ops_v = {.name = "memory-test-readv", .read = m_read, .readv = m_readv};

static void msrc_init(struct pi_source *s, struct msrc *m, const uint8_t *data, uint64_t size, const char *name) {
    memset(s, 0, sizeof *s);
    memset(m, 0, sizeof *m);
    m->data = data;
    s->ops = &msrc_ops;
    s->name = (char *)name;
    s->size = size;
    s->fd = -1;
    s->impl = m;
}

static uint8_t pattern(uint32_t src, uint64_t off) { return (uint8_t)((off * 2654435761u >> 7) ^ (src * 97)); }

/* ---- planning ----------------------------------------------------------- */

TEST(engine_plan_exact) {
    uint8_t d[1];
    struct pi_source a, b;
    struct msrc ma, mb;
    msrc_init(&a, &ma, d, 1000, "a");
    msrc_init(&b, &mb, d, 1000, "b");
    struct pi_source *srcs[] = {&a, &b};
    uint8_t buf[2000];
    /* two spans 10 bytes apart (coalesced with gap 16), a third in another
     * source, a fourth going backwards (new run), one empty */
    struct pi_span sp[] = {
        {0, 100, 50, buf}, {0, 160, 90, buf + 100}, {1, 0, 64, buf + 200}, {0, 10, 20, buf + 300}, {0, 5, 0, NULL},
    };
    struct pi_engine_plan p;
    CHECK_OK(pi_engine_plan_make(srcs, 2, sp, 5, PI_DELIVER_BUFFERS, 64, 16, &p));
    /* run 1: [100, 250) cut at 64: [100,128) [128,192) [192,250); run 2:
     * b [0,64); run 3: [10,30) */
    CHECK_EQ(p.nreq, 5);
    CHECK_EQ(p.req[0].off, 100);
    CHECK_EQ(p.req[0].len, 28);
    CHECK_EQ(p.req[1].off, 128);
    CHECK_EQ(p.req[1].len, 64);
    CHECK_EQ(p.req[2].off, 192);
    CHECK_EQ(p.req[2].len, 58);
    CHECK_EQ(p.req[3].src, 1);
    CHECK_EQ(p.req[3].direct, 1);
    CHECK_EQ(p.req[4].off, 10);
    CHECK_EQ(p.req[4].direct, 1);
    CHECK_EQ(p.bytes, 150 + 64 + 20);
    CHECK_EQ(p.bytes_wasted, 10);
    /* request 1 = [128,150) of span 0 and [160,192) of span 1 */
    CHECK_EQ(p.req[1].p1 - p.req[1].p0, 2);
    CHECK_EQ(p.piece[p.req[1].p0].span, 0);
    CHECK_EQ(p.piece[p.req[1].p0].span_off, 28);
    CHECK_EQ(p.piece[p.req[1].p0 + 1].span, 1);
    CHECK_EQ(p.piece[p.req[1].p0 + 1].req_off, 32);
    CHECK_EQ(p.req[1].direct, 0);
    pi_engine_plan_free(&p);
    /* gap 0: the two spans are separate runs */
    CHECK_OK(pi_engine_plan_make(srcs, 2, sp, 2, PI_DELIVER_BUFFERS, 64, 0, &p));
    CHECK_EQ(p.bytes_wasted, 0);
    CHECK_EQ(p.nreq, 4); /* [100,128) [128,150) | [160,192) [192,250) */
    pi_engine_plan_free(&p);
    /* bad spans name what is wrong */
    struct pi_span bad = {0, 990, 20, buf};
    CHECK_EQ(pi_engine_plan_make(srcs, 2, &bad, 1, PI_DELIVER_BUFFERS, 64, 0, &p), PAGEIN_E_RANGE);
    CHECK(strstr(pagein_last_error_detail(), "990") != NULL);
    struct pi_span bad2 = {2, 0, 20, buf};
    CHECK_EQ(pi_engine_plan_make(srcs, 2, &bad2, 1, PI_DELIVER_BUFFERS, 64, 0, &p), PAGEIN_E_INVALID);
    struct pi_span bad3 = {0, 0, 20, NULL};
    CHECK_EQ(pi_engine_plan_make(srcs, 2, &bad3, 1, PI_DELIVER_BUFFERS, 64, 0, &p), PAGEIN_E_INVALID);
    CHECK_OK(pi_engine_plan_make(srcs, 2, &bad3, 1, PI_DELIVER_PAGECACHE, 64, 0, &p));
    pi_engine_plan_free(&p);
    struct pi_span ovf = {0, UINT64_MAX - 4, 10, buf};
    CHECK_EQ(pi_engine_plan_make(srcs, 2, &ovf, 1, PI_DELIVER_BUFFERS, 64, 0, &p), PAGEIN_E_RANGE);
    return PASS;
}

/* ---- property test: random plans, every byte once, in bounds ----------- */

struct collect {
    const struct pi_span *sp;
    uint8_t **got;      /* per span: received bytes */
    uint8_t **count;    /* per span: times each byte was delivered */
    size_t last_span;
    uint64_t last_off;
    int order_ok;
    int in_order;
    pthread_t consumer;
    int thread_ok;
};

static int collect_fn(void *arg, size_t span, uint64_t off, const void *data, uint64_t len) {
    struct collect *c = arg;
    if (!pthread_equal(pthread_self(), c->consumer)) c->thread_ok = 0;
    if (off + len > c->sp[span].len) {
        c->thread_ok = 0; /* out of bounds: reported as a failure below */
        return 0;
    }
    memcpy(c->got[span] + off, data, len);
    for (uint64_t i = 0; i < len; i++) c->count[span][off + i]++;
    if (c->in_order) {
        if (span < c->last_span || (span == c->last_span && off < c->last_off)) c->order_ok = 0;
        c->last_span = span;
        c->last_off = off + len;
    }
    return 0;
}

TEST(engine_random_plans) {
    uint64_t st = pt_seed();
    enum { NSRC = 3, SZ = 200000 };
    uint8_t *data[NSRC];
    struct pi_source s[NSRC];
    struct msrc m[NSRC];
    struct pi_source *srcs[NSRC];
    for (int i = 0; i < NSRC; i++) {
        data[i] = malloc(SZ);
        for (uint64_t o = 0; o < SZ; o++) data[i][o] = pattern((uint32_t)i, o);
        msrc_init(&s[i], &m[i], data[i], SZ, "mem");
        if (i % 2) s[i].ops = &msrc_ops_v; /* batch path where every request is direct */
        srcs[i] = &s[i];
    }
    for (int iter = 0; iter < 60 && !pt_failed; iter++) {
        size_t n = 1 + pt_rand(&st) % 40;
        struct pi_span *sp = calloc(n, sizeof *sp);
        uint8_t *guard = NULL;
        size_t total = 0;
        uint64_t off = pt_rand(&st) % 1000;
        uint32_t src = 0;
        int overlap = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t r = pt_rand(&st) % 10;
            if (r == 0) src = (uint32_t)(pt_rand(&st) % NSRC), off = pt_rand(&st) % (SZ / 2);
            else if (r == 1) off = pt_rand(&st) % (SZ / 2);                  /* backwards or far */
            else if (r < 5) off += pt_rand(&st) % 5000;                        /* a gap */
            uint64_t len = pt_rand(&st) % 9 == 0 ? 0 : 1 + pt_rand(&st) % 20000;
            if (r == 9 && i > 0) off = sp[i - 1].off, overlap = 1;            /* overlap */
            if (off + len > SZ) off = SZ - len;
            sp[i] = (struct pi_span){src, off, len, NULL};
            total += len;
            off += len;
        }
        /* destinations: one allocation with a canary byte after each span */
        guard = malloc(total + n);
        memset(guard, 0xA5, total + n);
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            sp[i].dst = guard + at;
            at += sp[i].len + 1;
        }
        struct pi_engine_opts o = {.deliver = (enum pi_deliver)(pt_rand(&st) % 3),
                                   .request_bytes = 1 + pt_rand(&st) % 9000,
                                   .depth = 1 + (unsigned)(pt_rand(&st) % 6),
                                   .max_gap = pt_rand(&st) % 3 == 0 ? UINT64_MAX : pt_rand(&st) % 8000,
                                   .ring = (unsigned)(pt_rand(&st) % 4),
                                   .in_order = (int)(pt_rand(&st) % 2)};
        if (o.deliver == PI_DELIVER_PAGECACHE) o.deliver = PI_DELIVER_BUFFERS + (pt_rand(&st) % 2 ? 0 : 2);
        struct collect c = {.sp = sp, .order_ok = 1, .in_order = o.in_order, .consumer = pthread_self(),
                            .thread_ok = 1};
        c.got = calloc(n, sizeof *c.got);
        c.count = calloc(n, sizeof *c.count);
        for (size_t i = 0; i < n; i++) {
            c.got[i] = calloc(sp[i].len + 1, 1);
            c.count[i] = calloc(sp[i].len + 1, 1);
        }
        o.consume = collect_fn;
        o.arg = &c;
        /* the plan itself: every piece maps a span byte to the same source
         * byte inside its request, and covers each span exactly */
        struct pi_engine_plan pl;
        CHECK_OK(pi_engine_plan_make(srcs, NSRC, sp, n, o.deliver, o.request_bytes, o.max_gap, &pl));
        uint64_t *cov = calloc(n, sizeof *cov);
        int pbad = 0;
        for (size_t k = 0; k < pl.nreq; k++) {
            const struct pi_engine_req *q = &pl.req[k];
            if (!q->len || q->len > o.request_bytes) pbad = 1;
            for (size_t j = q->p0; j < q->p1; j++) {
                const struct pi_engine_piece *pc = &pl.piece[j];
                if (sp[pc->span].src != q->src || pc->req_off + pc->len > q->len ||
                    q->off + pc->req_off != sp[pc->span].off + pc->span_off || pc->span_off + pc->len > sp[pc->span].len)
                    pbad = 2;
                cov[pc->span] += pc->len;
            }
        }
        for (size_t i = 0; i < n; i++)
            if (cov[i] != sp[i].len) pbad = 3;
        if (pbad) printf("    iter %d: plan check %d failed\n", iter, pbad);
        CHECK(!pbad);
        free(cov);
        pi_engine_plan_free(&pl);
        struct pi_engine_stats es;
        int rc = pi_engine_run(srcs, NSRC, sp, n, &o, &es);
        CHECK_OK(rc);
        int bad = 0;
        for (size_t i = 0; i < n && !bad; i++) {
            const uint8_t *got = o.deliver == PI_DELIVER_BUFFERS ? sp[i].dst : c.got[i];
            for (uint64_t b = 0; b < sp[i].len && !bad; b++) {
                if (got[b] != pattern(sp[i].src, sp[i].off + b)) bad = 1;
                if (o.deliver == PI_DELIVER_STREAM && c.count[i][b] != 1) bad = 2;
            }
            if (((uint8_t *)sp[i].dst)[sp[i].len] != 0xA5) bad = 3; /* canary */
        }
        if (bad)
            printf("    iter %d: %s (deliver %d, R %llu, depth %u, gap %llu, n %zu)\n", iter,
                   bad == 1 ? "wrong bytes" : bad == 2 ? "byte not delivered once" : "wrote past a span", o.deliver,
                   (unsigned long long)o.request_bytes, o.depth, (unsigned long long)o.max_gap, n);
        CHECK(!bad);
        CHECK(c.order_ok);
        (void)overlap;
        CHECK(c.thread_ok);
        CHECK(es.max_inflight <= o.depth);
        CHECK_EQ(es.request_bytes, o.request_bytes);
        uint64_t hist = 0;
        for (int b = 0; b < PI_ENGINE_HIST; b++) hist += es.size_hist[b];
        CHECK_EQ(hist, es.requests);
        for (size_t i = 0; i < n; i++) {
            free(c.got[i]);
            free(c.count[i]);
        }
        free(c.got);
        free(c.count);
        free(guard);
        free(sp);
    }
    for (int i = 0; i < NSRC; i++) free(data[i]);
    return PASS;
}

/* ---- faults ------------------------------------------------------------- */

TEST(engine_eio_mid_plan) {
    enum { SZ = 1 << 20 };
    uint8_t *data = malloc(SZ), *dst = malloc(SZ);
    for (uint64_t o = 0; o < SZ; o++) data[o] = pattern(0, o);
    for (int deliver = 0; deliver < 4; deliver++) { /* 3: BUFFERS through the batch (readv) path */
        struct pi_source s;
        struct msrc m;
        msrc_init(&s, &m, data, SZ, "/models/weights.bin");
        if (deliver == 3) s.ops = &msrc_ops_v;
        m.fail_off = 600000;
        m.fail_rc = -EIO;
        /* each read takes a moment, as on storage: without it a fast machine
         * can issue all 16 requests before the failure is seen (flaky) */
        m.delay_us = 1000;
        struct pi_source *srcs[] = {&s};
        struct pi_span sp = {0, 0, SZ, dst};
        struct collect c = {.sp = &sp, .order_ok = 1, .consumer = pthread_self(), .thread_ok = 1};
        uint8_t *got = calloc(SZ, 1), *cnt = calloc(SZ, 1);
        c.got = &got;
        c.count = &cnt;
        struct pi_engine_opts o = {.deliver = (enum pi_deliver)(deliver % 3), .request_bytes = 65536, .depth = 4,
                                   .max_gap = 0, .consume = collect_fn, .arg = &c, .in_order = 1};
        struct pi_engine_stats es;
        int rc = pi_engine_run(srcs, 1, &sp, 1, &o, &es);
        CHECK_EQ(rc, -EIO);
        const char *d = pagein_last_error_detail();
        CHECK(strstr(d, "/models/weights.bin") != NULL);
        CHECK(strstr(d, "offset 589824") != NULL); /* the failing request: 9 * 65536 */
        CHECK(strstr(d, "injected failure") != NULL);
        /* it stopped: not every request ran */
        CHECK(atomic_load(&m.reads) < SZ / 65536);
        free(got);
        free(cnt);
    }
    free(data);
    free(dst);
    return PASS;
}

static _Atomic int stop_flag;
static int stop_after_two(void *arg, size_t span, uint64_t off, const void *data, uint64_t len) {
    (void)span, (void)data, (void)len, (void)off;
    int *k = arg;
    return ++*k == 2 ? 1 : 0;
}

TEST(engine_cancel) {
    enum { SZ = 4 << 20 };
    uint8_t *data = calloc(SZ, 1), *dst = malloc(SZ);
    struct pi_source s;
    struct msrc m;
    msrc_init(&s, &m, data, SZ, "slow");
    m.delay_us = 200;
    _Atomic int after = 5;
    atomic_store(&stop_flag, 0);
    m.cancel_after = &after;
    m.cancel_flag = &stop_flag;
    struct pi_source *srcs[] = {&s};
    struct pi_span sp = {0, 0, SZ, dst};
    for (int deliver = 0; deliver < 4; deliver++) { /* 3: BUFFERS through the batch (readv) path */
        atomic_store(&stop_flag, 0);
        atomic_store(&m.reads, 0);
        s.ops = deliver == 3 ? &msrc_ops_v : &msrc_ops;
        int k = 0;
        struct pi_engine_opts o = {.deliver = (enum pi_deliver)(deliver % 3), .request_bytes = 4096, .depth = 2,
                                   .max_gap = 0, .cancel = &stop_flag, .consume = stop_after_two, .arg = &k};
        int rc = pi_engine_run(srcs, 1, &sp, 1, &o, NULL);
        CHECK_EQ(rc, PAGEIN_E_CANCELLED);
        CHECK(atomic_load(&m.reads) < 64); /* of 1024 */
    }
    s.ops = &msrc_ops;
    /* a consumer that returns non-zero stops the stream (no cancel flag) */
    int k = 0;
    atomic_store(&m.reads, 0);
    m.cancel_after = NULL;
    struct pi_engine_opts o = {.deliver = PI_DELIVER_STREAM, .request_bytes = 4096, .depth = 2, .max_gap = 0,
                               .consume = stop_after_two, .arg = &k, .in_order = 1};
    CHECK_EQ(pi_engine_run(srcs, 1, &sp, 1, &o, NULL), PAGEIN_E_CANCELLED);
    CHECK_EQ(k, 2);
    CHECK(atomic_load(&m.reads) < 64);
    free(data);
    free(dst);
    return PASS;
}

/* STREAM memory is bounded by the ring whatever the plan's size, and the
 * requests in flight reach the depth asked for. */
TEST(engine_stream_ring_bounded) {
    enum { SZ = 2 << 20 };
    uint8_t *data = malloc(SZ);
    for (uint64_t o = 0; o < SZ; o++) data[o] = pattern(0, o);
    struct pi_source s;
    struct msrc m;
    msrc_init(&s, &m, data, SZ, "mem");
    m.delay_us = 300;
    struct pi_source *srcs[] = {&s};
    struct pi_span sp = {0, 0, SZ, NULL};
    uint8_t *got = calloc(SZ, 1), *cnt = calloc(SZ, 1);
    struct collect c = {.sp = &sp, .order_ok = 1, .in_order = 1, .consumer = pthread_self(), .thread_ok = 1,
                        .got = &got, .count = &cnt};
    struct pi_engine_opts o = {.deliver = PI_DELIVER_STREAM, .request_bytes = 32768, .depth = 4, .ring = 6,
                               .max_gap = 0, .in_order = 1, .consume = collect_fn, .arg = &c};
    struct pi_engine_stats es;
    CHECK_OK(pi_engine_run(srcs, 1, &sp, 1, &o, &es));
    CHECK(memcmp(got, data, SZ) == 0);
    CHECK(c.order_ok);
    CHECK_EQ(es.requests, SZ / 32768);
    CHECK(atomic_load(&m.max_inflight) <= 4);
    CHECK(atomic_load(&m.max_inflight) >= 2);
    CHECK(es.max_inflight <= 4);
    CHECK(es.lat_p50_ns >= 300000);
    CHECK(es.size_hist[3] == SZ / 32768); /* [32K, 64K) */
    free(got);
    free(cnt);
    free(data);
    return PASS;
}

/* ---- the decision from injected facts ----------------------------------- */

TEST(engine_decide_from_facts) {
    struct pi_source_facts f = {0};
    uint64_t R;
    unsigned D;
    char why[160];
    /* latency-bound (1 ms, depth helps): many in flight */
    struct pi_engine_probe_result pr = {.lat1_ns = 1000000, .wallN_ns = 1100000, .n = 8, .speedup = 7.3};
    f.storage = PI_STORAGE_FUSE;
    pi_engine_decide(&f, &pr, &R, &D, why, sizeof why);
    CHECK_EQ(D, 32);
    CHECK_EQ(R, 1 << 20);
    CHECK(strstr(why, "latency-bound") != NULL);
    pr.lat1_ns = 200000;
    pi_engine_decide(&f, &pr, &R, &D, why, sizeof why);
    CHECK_EQ(D, 16);
    /* answered from memory (warm cache on the same FUSE mount) */
    pr = (struct pi_engine_probe_result){.lat1_ns = 20000, .wallN_ns = 150000, .n = 8, .speedup = 1.1};
    pi_engine_decide(&f, &pr, &R, &D, why, sizeof why);
    CHECK(D >= 2 && D <= 64);
    CHECK_EQ(R, 4 << 20);
    CHECK(strstr(why, "memory") != NULL);
    /* in between: a local-disk-like device */
    pr = (struct pi_engine_probe_result){.lat1_ns = 90000, .wallN_ns = 200000, .n = 8, .speedup = 3.6};
    pi_engine_decide(&f, &pr, &R, &D, why, sizeof why);
    CHECK_EQ(D, 8);
    CHECK_EQ(R, 8 << 20);
    /* no probe: by storage kind */
    f.storage = PI_STORAGE_LOCAL;
    f.rotational = 1;
    pi_engine_decide(&f, NULL, &R, &D, why, sizeof why);
    CHECK_EQ(D, 2);
    f.rotational = 0;
    pi_engine_decide(&f, NULL, &R, &D, why, sizeof why);
    CHECK_EQ(D, 8);
    f.storage = PI_STORAGE_NETFS;
    pi_engine_decide(&f, NULL, &R, &D, why, sizeof why);
    CHECK_EQ(D, 32);
    /* measured facts written back by an earlier probe count as a probe */
    f.measured = 1;
    f.latency_ns = 600000;
    pi_engine_decide(&f, NULL, &R, &D, why, sizeof why);
    CHECK_EQ(D, 32);
    CHECK(strstr(why, "measured") != NULL);
    return PASS;
}

TEST(engine_choose_order) {
    uint8_t d[1];
    struct pi_source s;
    struct msrc m;
    msrc_init(&s, &m, d, 1, "x");
    s.facts.storage = PI_STORAGE_LOCAL;
    uint64_t R;
    unsigned D;
    char why[160];
    unsetenv("PAGEIN_REQUEST_BYTES");
    unsetenv("PAGEIN_QUEUE_DEPTH");
    pi_engine_choose(&s, NULL, 0, &R, &D, why, sizeof why);
    CHECK_EQ(R, 8 << 20);
    CHECK_EQ(D, 8);
    s.facts.depth = 5;
    pi_engine_choose(&s, NULL, 0, &R, &D, why, sizeof why);
    CHECK_EQ(D, 5);
    CHECK(strstr(why, "depth 5 (source)") != NULL);
    setenv("PAGEIN_REQUEST_BYTES", "256K", 1);
    setenv("PAGEIN_QUEUE_DEPTH", "3", 1);
    pi_engine_choose(&s, NULL, 0, &R, &D, why, sizeof why);
    CHECK_EQ(R, 256 << 10);
    CHECK_EQ(D, 3);
    CHECK(strstr(why, "PAGEIN_QUEUE_DEPTH") != NULL);
    struct pi_engine_opts o = {.request_bytes = 1 << 20, .depth = 7};
    pi_engine_choose(&s, &o, 0, &R, &D, why, sizeof why);
    CHECK_EQ(R, 1 << 20);
    CHECK_EQ(D, 7);
    unsetenv("PAGEIN_REQUEST_BYTES");
    unsetenv("PAGEIN_QUEUE_DEPTH");
    return PASS;
}

/* The probe measures the injected latency and the decision follows. */
TEST(engine_probe_latency) {
    enum { SZ = 8 << 20 };
    uint8_t *data = calloc(SZ, 1);
    struct pi_source s;
    struct msrc m;
    msrc_init(&s, &m, data, SZ, "fake-remote");
    s.facts.storage = PI_STORAGE_UNKNOWN;
    m.lat_ns = 2000000; /* 2 ms a request, whatever the depth */
    uint64_t R;
    unsigned D;
    char why[160];
    unsetenv("PAGEIN_REQUEST_BYTES");
    unsetenv("PAGEIN_QUEUE_DEPTH");
    pi_engine_choose(&s, NULL, 1, &R, &D, why, sizeof why);
    CHECK(s.facts.measured);
    CHECK(s.facts.latency_ns >= 2000000);
    CHECK_EQ(D, 32);
    CHECK(strstr(why, "probe") != NULL);
    int reads = atomic_load(&m.reads);
    CHECK(reads > 0 && reads <= 16);
    /* measured once: a second choice does not probe again */
    pi_engine_choose(&s, NULL, 1, &R, &D, why, sizeof why);
    CHECK_EQ(atomic_load(&m.reads), reads);
    free(data);
    return PASS;
}

/* Two files of one filesystem: the first is probed, the second takes that
 * probe (no read of its own) and says so; a source without a descriptor
 * is probed itself. */
TEST(engine_probe_once_a_filesystem) {
    enum { SZ = 8 << 20 };
    uint8_t *data = calloc(SZ, 1);
    struct pi_source a, b, c;
    struct msrc ma, mb, mc;
    msrc_init(&a, &ma, data, SZ, "fs-a");
    msrc_init(&b, &mb, data, SZ, "fs-b");
    msrc_init(&c, &mc, data, SZ, "no-fd");
    const char *pa = pt_tmppath("probe_a.bin"), *pb = pt_tmppath("probe_b.bin");
    CHECK(pt_write_file(pa, data, 4096) == 0);
    CHECK(pt_write_file(pb, data, 4096) == 0);
    a.fd = open(pa, O_RDONLY | O_CLOEXEC); /* their filesystem: the key (the reads stay the fake's) */
    b.fd = open(pb, O_RDONLY | O_CLOEXEC);
    CHECK(a.fd >= 0 && b.fd >= 0);
    a.facts.storage = b.facts.storage = c.facts.storage = PI_STORAGE_UNKNOWN;
    ma.lat_ns = mb.lat_ns = mc.lat_ns = 1000000;
    uint64_t R;
    unsigned D;
    char why[160];
    unsetenv("PAGEIN_REQUEST_BYTES");
    unsetenv("PAGEIN_QUEUE_DEPTH");
    pi_engine_choose(&a, NULL, 1, &R, &D, why, sizeof why);
    CHECK(atomic_load(&ma.reads) > 0);
    CHECK(strstr(why, "another file") == NULL);
    pi_engine_choose(&b, NULL, 1, &R, &D, why, sizeof why);
    CHECK_EQ(atomic_load(&mb.reads), 0);
    CHECK(b.facts.measured);
    CHECK_EQ(b.facts.latency_ns, a.facts.latency_ns);
    CHECK_EQ(D, 32);
    CHECK(strstr(why, "another file") != NULL);
    pi_engine_choose(&c, NULL, 1, &R, &D, why, sizeof why);
    CHECK(atomic_load(&mc.reads) > 0);
    close(a.fd);
    close(b.fd);
    unlink(pa);
    unlink(pb);
    free(data);
    return PASS;
}

/* ---- the local readv (io_uring or threads) ------------------------------ */

static int file_src(struct pi_source *s, const char *path, uint64_t size) {
    memset(s, 0, sizeof *s);
    static const struct pi_source_ops ops = {.name = "file-test", .readv = pi_file_readv, .readv_view = pi_file_readv_view};
    s->ops = &ops;
    s->name = (char *)path;
    s->size = size;
    s->fd = open(path, O_RDONLY | O_CLOEXEC);
    return s->fd;
}

struct seen {
    _Atomic int n, fails;
};
static int count_done(void *arg, struct pi_read_req *r) {
    struct seen *sn = arg;
    atomic_fetch_add(&sn->n, 1);
    if (r->rc < 0) atomic_fetch_add(&sn->fails, 1);
    return 0;
}

static int readv_case(int threads, int faults) {
    enum { SZ = 3 << 20 };
    const char *path = pt_tmppath("engine_readv.bin");
    uint8_t *data = malloc(SZ);
    for (uint64_t o = 0; o < SZ; o++) data[o] = pattern(1, o);
    CHECK(pt_write_file(path, data, SZ) == 0);
    struct pi_source s;
    CHECK(file_src(&s, path, SZ) >= 0);
    enum { N = 40 };
    struct pi_read_req rq[N];
    uint8_t *buf = malloc((size_t)N * 70000);
    uint64_t st = pt_seed() + (uint64_t)threads * 7 + (uint64_t)faults;
    for (int i = 0; i < N; i++) {
        uint64_t len = 1 + pt_rand(&st) % 70000;
        rq[i] = (struct pi_read_req){buf + (size_t)i * 70000, pt_rand(&st) % (SZ - len), len, 1, NULL};
    }
    atomic_store(&pi_test_readv_faults, faults);
    struct seen sn = {0};
    int rc = threads ? pi_file_readv_threads(&s, rq, N, 5, count_done, &sn) : pi_file_readv(&s, rq, N, 5, count_done, &sn);
    atomic_store(&pi_test_readv_faults, 0);
    CHECK_OK(rc);
    CHECK_EQ(atomic_load(&sn.n), N);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(rq[i].rc, 0);
        CHECK(memcmp(rq[i].buf, data + rq[i].off, rq[i].len) == 0);
    }
    /* a read past the end: truncated, naming the file and offset; the
     * requests after it are not started or are reported */
    struct pi_read_req past[3] = {{buf, 0, 4096, 1, NULL}, {buf + 8192, SZ - 100, 4096, 1, NULL},
                                  {buf + 16384, 4096, 4096, 1, NULL}};
    s.size = SZ + 4096; /* the file shrank underneath */
    rc = threads ? pi_file_readv_threads(&s, past, 3, 1, NULL, NULL) : pi_file_readv(&s, past, 3, 1, NULL, NULL);
    CHECK_EQ(rc, PAGEIN_E_TRUNCATED);
    CHECK(strstr(pagein_last_error_detail(), "engine_readv.bin") != NULL);
    CHECK(strstr(pagein_last_error_detail(), "3145728") != NULL); /* where the file ends */
    CHECK_EQ(past[0].rc, 0);
    CHECK_EQ(past[1].rc, PAGEIN_E_TRUNCATED);
    CHECK_EQ(past[2].rc, PAGEIN_E_CANCELLED);
    close(s.fd);
    free(buf);
    free(data);
    unlink(path);
    return PASS;
}

TEST(engine_file_readv_uring) {
    /* io_uring fills the buffers from the kernel, which memcheck cannot see:
     * every later check of them would be "uninitialised" (and valgrind's
     * error count, inherited by forked children, would fail them too) */
    if (getenv("PAGEIN_UNDER_VALGRIND")) SKIP_BECAUSE("io_uring writes are invisible to valgrind memcheck");
    int rc = readv_case(0, 0);
    return rc != PASS ? rc : readv_case(0, 1); /* short reads and EINTR completions */
}

TEST(engine_file_readv_threads) { return readv_case(1, 0); }

/* The engine over the local readv: whole file into a buffer (batch path)
 * and through a ring. */
TEST(engine_file_whole) {
    enum { SZ = (5 << 20) + 123 };
    const char *path = pt_tmppath("engine_whole.bin");
    uint8_t *data = malloc(SZ), *dst = malloc(SZ);
    for (uint64_t o = 0; o < SZ; o++) data[o] = pattern(2, o);
    CHECK(pt_write_file(path, data, SZ) == 0);
    struct pi_source s;
    CHECK(file_src(&s, path, SZ) >= 0);
    struct pi_source *srcs[] = {&s};
    struct pi_span sp = {0, 0, SZ, dst};
    struct pi_engine_opts o = {.deliver = PI_DELIVER_BUFFERS, .request_bytes = 1 << 20, .depth = 4,
                               .max_gap = UINT64_MAX};
    struct pi_engine_stats es;
    CHECK_OK(pi_engine_run(srcs, 1, &sp, 1, &o, &es));
    CHECK(memcmp(dst, data, SZ) == 0);
    CHECK_EQ(es.requests, 6);
    CHECK_EQ(es.bytes, SZ);
    char js[1024];
    pi_engine_stats_json(&es, js, sizeof js);
    CHECK(strstr(js, "\"requests\": 6") != NULL);
    close(s.fd);
    unlink(path);
    free(data);
    free(dst);
    return PASS;
}

/* ---- auto from measured behaviour (src/load/auto.c) ---------------------- */

TEST(engine_auto_measured) {
    char why[256];
    uint64_t budget;
    /* slowfs-like: 1.2 ms a request, 4x at depth 8, 128 KiB readahead, and
     * the name says FUSE: read, for the measured reason */
    struct pi_auto_facts f = {.fs_magic = 0x65735546u, .fs_type = "fuse.slowfs", .rotational = -1,
                              .model_bytes = 256u << 20, .mem_available = 8ull << 30, .measured = 1,
                              .lat1_ns = 1200000, .speedup = 4.0, .probe_depth = 8, .read_ahead_kb = 128,
                              .storage = PI_STORAGE_FUSE};
    CHECK_EQ(pi_auto_decide(&f, why, sizeof why, &budget), PAGEIN_STRATEGY_READ);
    CHECK(strstr(why, "measured 1.20 ms") != NULL);
    CHECK(strstr(why, "readahead 128 KiB") != NULL);
    /* the same mount with a warm cache answers in 30 us: populate, whatever
     * the filesystem's name */
    struct pi_auto_facts w = f;
    w.lat1_ns = 30000;
    w.speedup = 0.8;
    CHECK_EQ(pi_auto_decide(&w, why, sizeof why, &budget), PAGEIN_STRATEGY_POPULATE);
    CHECK(strstr(why, "not latency-bound") != NULL);
    /* latency-bound but a large readahead (page faults read big pieces) */
    struct pi_auto_facts r = f;
    r.read_ahead_kb = 8192;
    CHECK_EQ(pi_auto_decide(&r, why, sizeof why, &budget), PAGEIN_STRATEGY_POPULATE);
    /* slow but depth does not help on a local disk (a loaded host): populate */
    struct pi_auto_facts d = f;
    d.speedup = 1.1;
    d.storage = PI_STORAGE_LOCAL;
    d.fs_magic = 0xEF53;
    snprintf(d.fs_type, sizeof d.fs_type, "ext4");
    CHECK_EQ(pi_auto_decide(&d, why, sizeof why, &budget), PAGEIN_STRATEGY_POPULATE);
    /* an unknown, unmeasured 4 KiB-readahead local path: the old rules */
    struct pi_auto_facts u = d;
    u.measured = 0;
    CHECK_EQ(pi_auto_decide(&u, why, sizeof why, &budget), PAGEIN_STRATEGY_POPULATE);
    u.fs_magic = 0x6969;
    snprintf(u.fs_type, sizeof u.fs_type, "nfs4");
    CHECK_EQ(pi_auto_decide(&u, why, sizeof why, &budget), PAGEIN_STRATEGY_READ);
    /* too big for memory: prefetch with a budget even when latency-bound */
    struct pi_auto_facts b = f;
    b.mem_available = 128u << 20;
    CHECK_EQ(pi_auto_decide(&b, why, sizeof why, &budget), PAGEIN_STRATEGY_PREFETCH);
    return PASS;
}

/* ---- runs on a caller's crew (pi_engine_opts.crew) ------------------------ */

/* Many runs of random plans on one kept crew: every byte of every span is
 * delivered exactly once (BUFFERS) and the reads keep up to depth in flight
 * on the crew's threads; a failing read mid-plan stops the run with the
 * source and offset named, and the crew still serves the next run. */
TEST(engine_crew_runs) {
    enum { SZ = 1 << 20, NSP = 64, RUNS = 40, DEPTH = 6 };
    uint64_t seed = pt_seed();
    uint8_t *data = malloc(SZ), *dst = malloc(SZ);
    CHECK(data && dst);
    for (uint64_t o = 0; o < SZ; o++) data[o] = pattern(0, o);
    struct pi_crew crew;
    CHECK_OK(pi_crew_start(&crew, DEPTH));
    struct pi_source s;
    struct msrc m;
    msrc_init(&s, &m, data, SZ, "/data/shard-0.bin");
    m.delay_us = 200; /* so that requests overlap */
    struct pi_source *srcs[] = {&s};
    int overlapped = 0; /* runs that had more than one request in flight */
    for (int run = 0; run < RUNS; run++) {
        /* NSP disjoint spans at random offsets, in random order, each into
         * its own slice of dst at the same offset */
        struct pi_span sp[NSP];
        uint64_t slot = SZ / NSP;
        for (int i = 0; i < NSP; i++) {
            uint64_t len = 1 + pt_rand(&seed) % slot;
            uint64_t off = (uint64_t)i * slot + pt_rand(&seed) % (slot - len + 1);
            sp[i] = (struct pi_span){0, off, len, dst + off};
        }
        for (int i = NSP - 1; i > 0; i--) {
            int j = (int)(pt_rand(&seed) % (uint64_t)(i + 1));
            struct pi_span t = sp[i];
            sp[i] = sp[j];
            sp[j] = t;
        }
        memset(dst, 0xEE, SZ);
        int fail = run % 10 == 9;
        m.fail_rc = fail ? -EIO : 0;
        m.fail_off = sp[NSP / 2].off;
        atomic_store(&m.max_inflight, 0);
        struct pi_engine_opts o = {.deliver = PI_DELIVER_BUFFERS, .request_bytes = 4096 * (1 + run % 4),
                                   .depth = DEPTH, .max_gap = run % 2 ? 8192 : 0, .crew = &crew};
        int rc = pi_engine_run(srcs, 1, sp, NSP, &o, NULL);
        if (fail) {
            CHECK_EQ(rc, -EIO);
            CHECK(strstr(pagein_last_error_detail(), "/data/shard-0.bin") != NULL);
            CHECK(strstr(pagein_last_error_detail(), "offset") != NULL);
            continue;
        }
        CHECK_OK(rc);
        int bad = 0;
        for (int i = 0; i < NSP && !bad; i++)
            for (uint64_t k = 0; k < sp[i].len && !bad; k++) bad = dst[sp[i].off + k] != pattern(0, sp[i].off + k);
        CHECK(!bad);
        /* bytes outside every span are untouched (delivered only where asked) */
        uint64_t untouched = 0, covered = 0;
        for (int i = 0; i < NSP; i++) covered += sp[i].len;
        for (uint64_t k = 0; k < SZ; k++) untouched += dst[k] == 0xEE;
        CHECK(untouched >= SZ - covered);
        /* overlap is asked of the runs together, not of each: under
         * valgrind (one thread at a time) a run of a few requests may not
         * overlap at all, and that says nothing about the crew */
        int mx = atomic_load(&m.max_inflight);
        overlapped += mx > 1;
        CHECK(mx <= DEPTH);
    }
    CHECK(overlapped > 0);
    pi_crew_stop(&crew);
    free(data);
    free(dst);
    return PASS;
}
