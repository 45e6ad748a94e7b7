/* dcp_conv.c - consolidation of a checkpoint of chunks into safetensors
 * through one range-engine run, for both DCP layouts (dcp_conv.h).
 *
 * The engine's consumer (a thread of ours) gathers each span whole, hands
 * it to the layout's piece function and, when a tensor is whole, hands it
 * to the writer, which runs on the caller's thread and asks for the bytes
 * in its own order; the plan is made in that order. While the writer
 * copies one tensor out, the engine keeps reading into its ring (double
 * buffering). Buffers are kept in a pool of two and reused, so that each
 * tensor does not fault in fresh pages. */
#include "dcp_conv.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct pi_dcpc {
    const struct pi_dcpc_plan *p;
    /* the engine's consumer */
    uint8_t *blob;  /* a span gathered over several pieces */
    uint8_t *tbuf;  /* the tensor being assembled */
    size_t cur;     /* its position in t */
    size_t filled;  /* spans of the current tensor done */
    /* the hand-off */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long ready; /* position in t of the tensor held for the writer, -1 none */
    uint8_t *ready_buf;
    /* buffers kept for the next tensor or span (fresh memory costs a page
     * fault per page): at most two, each with its capacity */
    uint8_t *pool[2];
    size_t pool_cap[2];
    size_t ready_cap, blob_cap, tbuf_cap;
    const uint8_t *ready_data;
    int done, prod_rc;
    char prod_err[1024];
    _Atomic int cancel;
    struct pi_engine_stats est;
};

struct cv_fill {
    struct pi_dcpc *c;
    size_t pos;
};

/* A buffer of at least need bytes from the pool (the biggest one, grown
 * when too small), its capacity in *cap; under c->mu or on one thread. */
static uint8_t *pool_get(struct pi_dcpc *c, size_t need, size_t *cap) {
    if (!need) need = 1;
    int k = c->pool_cap[1] > c->pool_cap[0];
    uint8_t *b = c->pool[k];
    size_t have = c->pool_cap[k];
    c->pool[k] = NULL, c->pool_cap[k] = 0;
    if (b && have >= need) {
        *cap = have;
        return b;
    }
    pi_free(b);
    b = pi_malloc(need);
    *cap = b ? need : 0;
    return b;
}

/* Gives b back to the pool (the smaller one is freed when both are held). */
static void pool_put(struct pi_dcpc *c, uint8_t *b, size_t cap) {
    if (!b) return;
    int k = c->pool[0] == NULL ? 0 : c->pool[1] == NULL ? 1 : (c->pool_cap[0] < c->pool_cap[1] ? 0 : 1);
    if (c->pool[k]) {
        if (c->pool_cap[k] >= cap) {
            pi_free(b);
            return;
        }
        pi_free(c->pool[k]);
    }
    c->pool[k] = b, c->pool_cap[k] = cap;
}

uint8_t *pi_dcpc_tbuf(struct pi_dcpc *c) {
    if (!c->tbuf) {
        const struct pi_dcpc_tensor *t = &c->p->t[c->cur];
        pthread_mutex_lock(&c->mu);
        c->tbuf = pool_get(c, (size_t)t->nbytes, &c->tbuf_cap);
        pthread_mutex_unlock(&c->mu);
        if (!c->tbuf)
            pi_err(-ENOMEM, "out of memory for '%s' (%llu bytes)", t->name, (unsigned long long)t->nbytes);
    }
    return c->tbuf;
}

/* Hands tensor pos (its bytes at data; buf, of capacity cap, goes back to
 * the pool when written; may be NULL) to the writer and waits until the
 * writer took it. */
static int hand_off(struct pi_dcpc *c, size_t pos, uint8_t *buf, size_t cap, const uint8_t *data) {
    pthread_mutex_lock(&c->mu);
    c->ready = (long)pos, c->ready_buf = buf, c->ready_cap = cap, c->ready_data = data;
    pthread_cond_broadcast(&c->cv);
    while (c->ready >= 0 && !c->cancel) pthread_cond_wait(&c->cv, &c->mu);
    int cancelled = c->ready >= 0;
    pthread_mutex_unlock(&c->mu);
    return cancelled ? pi_err(PAGEIN_E_CANCELLED, "the writer stopped") : 0;
}

/* One whole span: the layout copies its chunk into the tensor (or the span
 * is the tensor); the tensor handed off after its last span. blob_owned: p
 * is c->blob. */
static int cv_span(struct pi_dcpc *c, size_t span, const uint8_t *p, int blob_owned) {
    size_t pos = c->p->span_t[span];
    const struct pi_dcpc_tensor *t = &c->p->t[pos];
    int whole_ok = t->s1 - t->s0 == 1 && blob_owned && c->filled == 0 && !c->tbuf;
    const uint8_t *data = NULL;
    c->cur = pos;
    FORWARD_IF(c->p->piece(c->p->arg, c, span, p, whole_ok, &data));
    if (data && whole_ok) { /* the span is the tensor (no copy) */
        c->blob = NULL;
        return hand_off(c, pos, (uint8_t *)p, c->blob_cap, data);
    }
    RETURN_IF(!c->tbuf && t->nbytes, PAGEIN_E_INVALID, "'%s': a chunk copied nowhere", t->name);
    if (++c->filled < t->s1 - t->s0) return 0;
    if (!c->tbuf && !pi_dcpc_tbuf(c)) return -ENOMEM;
    uint8_t *tb = c->tbuf;
    c->tbuf = NULL, c->filled = 0;
    return hand_off(c, pos, tb, c->tbuf_cap, tb);
}

static int cv_consume(void *arg, size_t span, uint64_t off, const void *data, uint64_t len) {
    struct pi_dcpc *c = arg;
    if (c->cancel) return pi_err(PAGEIN_E_CANCELLED, "the writer stopped");
    const struct pi_dcpc_tensor *t = &c->p->t[c->p->span_t[span]];
    uint64_t total = c->p->spans[span].len;
    if (off == 0 && len == total && t->s1 - t->s0 > 1)
        return cv_span(c, span, data, 0); /* whole in one piece: copied from the ring */
    if (off == 0) {
        pthread_mutex_lock(&c->mu);
        pool_put(c, c->blob, c->blob_cap);
        c->blob = pool_get(c, (size_t)total, &c->blob_cap);
        pthread_mutex_unlock(&c->mu);
        RETURN_IF(!c->blob, -ENOMEM, "out of memory for a chunk of %llu bytes", (unsigned long long)total);
    }
    RETURN_IF(!c->blob, PAGEIN_E_INVALID, "engine: a piece before its span's start");
    memcpy(c->blob + off, data, (size_t)len);
    if (off + len < total) return 0;
    uint8_t *b = c->blob;
    int rc = cv_span(c, span, b, 1);
    if (c->blob == b) { /* not handed off as the tensor: kept for the next */
        pthread_mutex_lock(&c->mu);
        pool_put(c, c->blob, c->blob_cap);
        pthread_mutex_unlock(&c->mu);
        c->blob = NULL;
    }
    return rc;
}

/* The writer's fill: waits for its tensor, copies, frees it after the last byte. */
static int cv_fill(void *ctx, void *dst, uint64_t off, size_t len) {
    struct cv_fill *f = ctx;
    struct pi_dcpc *c = f->c;
    pthread_mutex_lock(&c->mu);
    while (c->ready != (long)f->pos && !c->done) pthread_cond_wait(&c->cv, &c->mu);
    int rc = 0;
    if (c->ready != (long)f->pos) {
        rc = c->prod_rc < 0 ? pi_err(c->prod_rc, "%s", c->prod_err)
                            : pi_err(PAGEIN_E_INVALID, "'%s': not produced", c->p->t[f->pos].name);
    } else {
        memcpy(dst, c->ready_data + off, len);
        if (off + len >= c->p->t[f->pos].nbytes) {
            pool_put(c, c->ready_buf, c->ready_cap);
            c->ready = -1, c->ready_buf = NULL, c->ready_data = NULL;
            pthread_cond_broadcast(&c->cv);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static void *cv_producer(void *arg) {
    struct pi_dcpc *c = arg;
    /* no gap bridged: the plan follows the writer's order, not the files', so a
     * bridge would read chunks that later requests read again (adjacent
     * chunks still coalesce) */
    struct pi_engine_opts o = {.deliver = PI_DELIVER_STREAM, .max_gap = 0, .in_order = 1,
                               .consume = cv_consume, .arg = c, .cancel = &c->cancel};
    int rc = pi_engine_run(c->p->srcs, c->p->nsrc, c->p->spans, c->p->nspans, &o, &c->est);
    pi_free(c->blob), pi_free(c->tbuf);
    c->blob = c->tbuf = NULL;
    pthread_mutex_lock(&c->mu);
    c->done = 1, c->prod_rc = rc;
    if (rc < 0) snprintf(c->prod_err, sizeof c->prod_err, "%s", pagein_last_error_detail());
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int pi_dcpc_convert(const struct pi_dcpc_plan *p, const char *out, pagein_write_tensor *w, const size_t *pos,
                    const size_t *ord, const uint32_t *shard, uint32_t nshards, const pagein_write_opts *wo,
                    uint64_t total, uint64_t bound, uint64_t max_out, struct pi_engine_stats *est) {
    struct pi_dcpc c = {.p = p, .ready = -1};
    struct cv_fill *fills = pi_calloc(p->nt ? p->nt : 1, sizeof *fills);
    RETURN_IF(!fills, -ENOMEM, "out of memory");
    for (size_t k = 0; k < p->nt; k++) {
        fills[k] = (struct cv_fill){&c, pos[k]};
        w[k].data = p->t[pos[k]].nbytes ? NULL : "", w[k].fill = cv_fill, w[k].fill_ctx = &fills[k];
    }
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    pthread_t tid;
    int started = 0, rc = 0;
    if (p->nspans == 0) c.done = 1;
    else if (pthread_create(&tid, NULL, cv_producer, &c) != 0) rc = pi_err(-EAGAIN, "cannot start the reader thread");
    else started = 1;
    if (rc == 0) rc = pi_convert_write_set(out, w, p->nt, ord, shard, nshards, wo, total, bound, max_out);
    if (started) {
        pthread_mutex_lock(&c.mu);
        c.cancel = 1;
        pthread_cond_broadcast(&c.cv);
        pthread_mutex_unlock(&c.mu);
        pthread_join(tid, NULL);
        pi_free(c.ready_buf);
        pi_free(c.pool[0]), pi_free(c.pool[1]);
        if (rc == 0 && c.prod_rc < 0) rc = pi_err(c.prod_rc, "%s", c.prod_err);
    }
    pthread_mutex_destroy(&c.mu);
    pthread_cond_destroy(&c.cv);
    pi_free(fills);
    if (est) *est = c.est;
    return rc;
}
