/* pool.c - the one thread pool: independent items handed out from a shared
 * counter, the first error wins and carries its detail to the caller's
 * thread. Two lifetimes of the same workers: pi_parallel() creates its
 * threads and joins them before it returns; a crew (pi_crew_*) keeps them
 * for the life of the object that owns it (a reader issuing thousands of
 * small batches on the range engine, pi_engine_opts.crew), and joins them
 * in pi_crew_stop. No thread outlives the
 * object that started it. */
#include "../internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

static void job_reset(struct pi_job *j, pi_item_fn fn, void *ctx, size_t n) {
    j->fn = fn;
    j->ctx = ctx;
    j->n = n;
    atomic_store(&j->next, 0);
    atomic_store(&j->rc, 0);
    j->detail[0] = 0;
}

static void job_work(struct pi_job *j) {
    for (;;) {
        if (atomic_load(&j->rc) < 0) break;
        size_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n) break;
        int rc = j->fn(j->ctx, i);
        if (rc < 0) {
            int zero = 0;
            if (atomic_compare_exchange_strong(&j->rc, &zero, rc))
                snprintf(j->detail, sizeof j->detail, "%s", pagein_last_error_detail());
        }
    }
}

static int job_result(struct pi_job *j) {
    int rc = atomic_load(&j->rc);
    if (rc < 0) pi_err(rc, "%s", j->detail);
    return rc;
}

static void *worker(void *arg) {
    job_work(arg);
    return NULL;
}

unsigned pi_default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    /* I/O-bound work wants more requests in flight than cores. */
    n *= 4;
    if (n < 8) n = 8;
    if (n > 32) n = 32;
    return (unsigned)n;
}

int pi_parallel(unsigned nthreads, size_t n, pi_item_fn fn, void *ctx) {
    if (n == 0) return 0;
    if (nthreads == 0) nthreads = pi_default_threads();
    if (nthreads > n) nthreads = (unsigned)n;
    struct pi_job j;
    atomic_init(&j.next, 0);
    atomic_init(&j.rc, 0);
    job_reset(&j, fn, ctx, n);
    pthread_t tids[64];
    if (nthreads > 64) nthreads = 64;
    unsigned started = 0;
    for (unsigned t = 1; t < nthreads; t++) {
        if (pthread_create(&tids[started], NULL, worker, &j) != 0) break; /* run with fewer */
        started++;
    }
    job_work(&j);
    for (unsigned t = 0; t < started; t++) pthread_join(tids[t], NULL);
    return job_result(&j);
}

/* ---- crews: the same workers, kept between batches ---------------------- */

static void *crew_main(void *arg) {
    struct pi_crew *c = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->stop && c->gen == seen) pthread_cond_wait(&c->go, &c->mu);
        if (c->stop) break;
        seen = c->gen;
        pthread_mutex_unlock(&c->mu);
        job_work(&c->job);
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
    atomic_init(&c->job.next, 0);
    atomic_init(&c->job.rc, 0);
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
    job_reset(&c->job, fn, ctx, n);
    c->busy = c->n;
    c->gen++;
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->mu);
    job_work(&c->job);
    pthread_mutex_lock(&c->mu);
    while (c->busy) pthread_cond_wait(&c->done, &c->mu);
    pthread_mutex_unlock(&c->mu);
    return job_result(&c->job);
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
