/*
 * host.c - the host-memory device backend (gpu.h).
 *
 * "Device" memory and pinned buffers are ordinary heap blocks. What makes
 * this backend useful is that it is asynchronous like a GPU: each stream is
 * a worker thread that runs its queue of copies and event records in
 * order, so copy_async returns before the bytes move and an event
 * completes only when the worker reaches it. The staging pipeline therefore
 * runs here with the same overlap as on a GPU, and a pipeline that reused a
 * pinned buffer before its copy completed would corrupt the destination
 * (pi_test_host_copy_delay_us makes that window wide in tests).
 */
#include "gpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

_Atomic unsigned pi_test_host_copy_delay_us;

struct hevent {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t recorded, done; /* generations */
};

enum { OP_COPY, OP_RECORD, OP_STOP };

struct hop {
    int kind;
    void *dst;
    const void *src;
    size_t n;
    struct hevent *ev;
    uint64_t gen;
    struct hop *next;
};

struct hstream {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct hop *head, *tail;
    struct hop *stop; /* allocated at create, so that destroy cannot fail */
    pthread_t thread;
};

static void *stream_main(void *arg) {
    struct hstream *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->head) pthread_cond_wait(&s->cv, &s->mu);
        struct hop *op = s->head;
        s->head = op->next;
        if (!s->head) s->tail = NULL;
        pthread_mutex_unlock(&s->mu);
        int kind = op->kind;
        if (kind == OP_COPY) {
            unsigned us = atomic_load(&pi_test_host_copy_delay_us);
            if (us) nanosleep(&(struct timespec){us / 1000000, (long)(us % 1000000) * 1000}, NULL);
            memcpy(op->dst, op->src, op->n);
        } else if (kind == OP_RECORD) {
            pthread_mutex_lock(&op->ev->mu);
            if (op->gen > op->ev->done) op->ev->done = op->gen;
            pthread_cond_broadcast(&op->ev->cv);
            pthread_mutex_unlock(&op->ev->mu);
        }
        pi_free(op);
        if (kind == OP_STOP) return NULL;
    }
}

static int push(struct hstream *s, struct hop *op) {
    op->next = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->tail) s->tail->next = op;
    else s->head = op;
    s->tail = op;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static int h_bind(struct pi_dev *d) { return 0; }

static int h_alloc(struct pi_dev *d, uint64_t *ptr, uint64_t n) {
    void *p = pi_malloc(n ? (size_t)n : 1);
    RETURN_IF(!p, -ENOMEM, "host device memory: cannot allocate %llu bytes", (unsigned long long)n);
    *ptr = (uint64_t)(uintptr_t)p;
    return 0;
}

static void h_free(struct pi_dev *d, uint64_t ptr) { pi_free((void *)(uintptr_t)ptr); }

static int h_host_alloc(struct pi_dev *d, void **p, size_t n) {
    *p = pi_malloc(n ? n : 1);
    RETURN_IF(!*p, -ENOMEM, "pinned host memory: cannot allocate %zu bytes", n);
    memset(*p, 0, n); /* resident from the start, like page-locked memory */
    return 0;
}

static void h_host_free(struct pi_dev *d, void *p) { pi_free(p); }

static int h_stream_create(struct pi_dev *d, void **out) {
    struct hstream *s = pi_calloc(1, sizeof *s);
    RETURN_IF(!s, -ENOMEM, "host stream: out of memory");
    s->stop = pi_calloc(1, sizeof *s->stop);
    if (!s->stop) {
        pi_free(s);
        return pi_err(-ENOMEM, "host stream: out of memory");
    }
    s->stop->kind = OP_STOP;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    int e = pthread_create(&s->thread, NULL, stream_main, s);
    if (e) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        pi_free(s->stop);
        pi_free(s);
        return pi_err(-e, "host stream: pthread_create: %s", strerror(e));
    }
    *out = s;
    return 0;
}

static void h_stream_destroy(struct pi_dev *d, void *p) {
    struct hstream *s = p;
    if (!s) return;
    push(s, s->stop); /* runs after everything queued; the worker frees it */
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pi_free(s);
}

static int h_event_create(struct pi_dev *d, void **out) {
    struct hevent *e = pi_calloc(1, sizeof *e);
    RETURN_IF(!e, -ENOMEM, "host event: out of memory");
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    *out = e;
    return 0;
}

static void h_event_destroy(struct pi_dev *d, void *p) {
    struct hevent *e = p;
    if (!e) return;
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    pi_free(e);
}

static int h_copy_async(struct pi_dev *d, uint64_t dst, const void *src, size_t n, void *s) {
    struct hop *op = pi_calloc(1, sizeof *op);
    RETURN_IF(!op, -ENOMEM, "host copy: out of memory");
    op->kind = OP_COPY;
    op->dst = (void *)(uintptr_t)dst;
    op->src = src;
    op->n = n;
    return push(s, op);
}

static int h_record(struct pi_dev *d, void *ev, void *s) {
    struct hevent *e = ev;
    struct hop *op = pi_calloc(1, sizeof *op);
    RETURN_IF(!op, -ENOMEM, "host event record: out of memory");
    op->kind = OP_RECORD;
    op->ev = e;
    pthread_mutex_lock(&e->mu);
    op->gen = ++e->recorded;
    pthread_mutex_unlock(&e->mu);
    return push(s, op);
}

static int h_query(struct pi_dev *d, void *ev) {
    struct hevent *e = ev;
    pthread_mutex_lock(&e->mu);
    int r = e->done >= e->recorded;
    pthread_mutex_unlock(&e->mu);
    return r;
}

static int h_wait(struct pi_dev *d, void *ev) {
    struct hevent *e = ev;
    pthread_mutex_lock(&e->mu);
    uint64_t want = e->recorded;
    while (e->done < want) pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

/* The pipeline waits on its events before synchronize matters; streams are
 * drained by their own destroy. */
static int h_synchronize(struct pi_dev *d) { return 0; }

static int h_copy_to_host(struct pi_dev *d, void *dst, uint64_t src, size_t n) {
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return 0;
}

static int h_mem_info(struct pi_dev *d, uint64_t *free_bytes, uint64_t *total_bytes) {
    *free_bytes = *total_bytes = 0; /* heap memory: not tracked */
    return 0;
}

static void h_close(struct pi_dev *d) {}

const struct pi_dev_ops pi_dev_host = {
    .name = "host",
    .bind = h_bind,
    .alloc = h_alloc,
    .free = h_free,
    .host_alloc_pinned = h_host_alloc,
    .host_free = h_host_free,
    .stream_create = h_stream_create,
    .stream_destroy = h_stream_destroy,
    .event_create = h_event_create,
    .event_destroy = h_event_destroy,
    .copy_async = h_copy_async,
    .record_ready = h_record,
    .query = h_query,
    .wait = h_wait,
    .synchronize = h_synchronize,
    .mem_info = h_mem_info,
    .copy_to_host = h_copy_to_host,
    .close = h_close,
};

int pi_dev_host_open(struct pi_dev *d) {
    d->ops = &pi_dev_host;
    d->device = PAGEIN_DEVICE_HOST;
    snprintf(d->name, sizeof d->name, "host memory");
    return 0;
}
