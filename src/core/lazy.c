/*
 * lazy.c - see lazy.h.
 */
#include "lazy.h"

#include <pthread.h>

static pthread_mutex_t lazy_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t lazy_atfork_once = PTHREAD_ONCE_INIT;

static void lazy_lock(void) { pthread_mutex_lock(&lazy_mu); }
static void lazy_unlock(void) { pthread_mutex_unlock(&lazy_mu); }
static void lazy_atfork(void) { pthread_atfork(lazy_lock, lazy_unlock, lazy_unlock); }

int pi_lazy_load(atomic_int *done, int (*load)(const char *name), const char *name) {
    if (atomic_load_explicit(done, memory_order_acquire)) return 0;
    pthread_once(&lazy_atfork_once, lazy_atfork);
    pthread_mutex_lock(&lazy_mu);
    int rc = 0;
    if (!atomic_load_explicit(done, memory_order_relaxed)) {
        rc = load(name);
        if (rc == 0) atomic_store_explicit(done, 1, memory_order_release);
    }
    pthread_mutex_unlock(&lazy_mu);
    return rc;
}
