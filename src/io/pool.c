/* pool.c - the one thread pool: independent items handed out from a shared
 * counter, the first error wins and carries its detail to the caller's
 * thread. pi_parallel() creates its threads and joins them before it
 * returns, so no thread outlives the call. (Readers that issue many small
 * batches use the range engine, src/engine/.) */
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
