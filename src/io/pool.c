/* pool.c - run independent items on a few threads. Threads live only for the
 * duration of one pi_parallel() call and are always joined before it
 * returns: no thread outlives the object that started it. */
#include "../internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

struct job {
    pi_item_fn fn;
    void *ctx;
    size_t n;
    _Atomic size_t next;
    _Atomic int rc;
    char detail[1024]; /* the first failing item's detail, carried to the caller's thread */
};

static void *worker(void *arg) {
    struct job *j = arg;
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
    struct job j = {.fn = fn, .ctx = ctx, .n = n, .detail = ""};
    atomic_init(&j.next, 0);
    atomic_init(&j.rc, 0);
    pthread_t tids[64];
    if (nthreads > 64) nthreads = 64;
    unsigned started = 0;
    for (unsigned t = 1; t < nthreads; t++) {
        if (pthread_create(&tids[started], NULL, worker, &j) != 0) break; /* run with fewer */
        started++;
    }
    worker(&j);
    for (unsigned t = 0; t < started; t++) pthread_join(tids[t], NULL);
    int rc = atomic_load(&j.rc);
    if (rc < 0) pi_err(rc, "%s", j.detail);
    return rc;
}
