/* crew.c - a persistent crew of threads owned by one reader: pi_parallel()
 * semantics (items handed out from a shared counter, first error wins and
 * carries its detail) without creating threads on every batch. */
#include "data.h"

#include <stdio.h>

static void crew_work(struct pi_crew *c) {
    for (;;) {
        if (atomic_load(&c->rc) < 0) break;
        size_t i = atomic_fetch_add(&c->next, 1);
        if (i >= c->nitems) break;
        int rc = c->fn(c->ctx, i);
        if (rc < 0) {
            int zero = 0;
            if (atomic_compare_exchange_strong(&c->rc, &zero, rc))
                snprintf(c->detail, sizeof c->detail, "%s", pagein_last_error_detail());
        }
    }
}

static void *crew_main(void *arg) {
    struct pi_crew *c = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->stop && c->gen == seen) pthread_cond_wait(&c->go, &c->mu);
        if (c->stop) break;
        seen = c->gen;
        pthread_mutex_unlock(&c->mu);
        crew_work(c);
        pthread_mutex_lock(&c->mu);
        if (--c->busy == 0) pthread_cond_signal(&c->done);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int pi_crew_start(struct pi_crew *c, unsigned nthreads) {
    memset(c, 0, sizeof *c);
    if (nthreads < 1) nthreads = 1;
    if (nthreads > 256) nthreads = 256;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->go, NULL);
    pthread_cond_init(&c->done, NULL);
    atomic_init(&c->next, 0);
    atomic_init(&c->rc, 0);
    if (nthreads > 1) {
        c->tids = pi_calloc(nthreads - 1, sizeof *c->tids);
        if (!c->tids) {
            pi_crew_stop(c);
            return pi_err(-ENOMEM, "out of memory for %u threads", nthreads);
        }
    }
    for (unsigned t = 0; t + 1 < nthreads; t++) {
        int e = pthread_create(&c->tids[c->n], NULL, crew_main, c);
        if (e) {
            if (c->n == 0) {
                pi_crew_stop(c);
                return pi_err(-e, "cannot start a reader thread: %s", strerror(e));
            }
            break; /* run with fewer */
        }
        c->n++;
    }
    return 0;
}

int pi_crew_run(struct pi_crew *c, size_t n, pi_item_fn fn, void *ctx) {
    if (n == 0) return 0;
    pthread_mutex_lock(&c->mu);
    c->fn = fn;
    c->ctx = ctx;
    c->nitems = n;
    atomic_store(&c->next, 0);
    atomic_store(&c->rc, 0);
    c->detail[0] = 0;
    c->busy = c->n;
    c->gen++;
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->mu);
    crew_work(c);
    pthread_mutex_lock(&c->mu);
    while (c->busy) pthread_cond_wait(&c->done, &c->mu);
    pthread_mutex_unlock(&c->mu);
    int rc = atomic_load(&c->rc);
    if (rc < 0) pi_err(rc, "%s", c->detail);
    return rc;
}

void pi_crew_stop(struct pi_crew *c) {
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->mu);
    for (unsigned t = 0; t < c->n; t++) pthread_join(c->tids[t], NULL);
    pi_free(c->tids);
    c->tids = NULL;
    c->n = 0;
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->go);
    pthread_cond_destroy(&c->done);
}
