/*
 * lazy.h - a library loaded on first use (dlopen), once, retried after a
 * failure: libcurl (source/curl_dl.c) and libcrypto (core/digest.c).
 */
#ifndef PAGEIN_CORE_LAZY_H
#define PAGEIN_CORE_LAZY_H

#include <stdatomic.h>

/* Runs load(name) unless *done is set, then sets *done when it returned 0;
 * callers racing wait for the one loading. One mutex serves every lazy
 * load, and fork waits for a load in progress (pthread_atfork): a child
 * never inherits the mutex locked with nothing loaded. load must not call
 * pi_lazy_load. Returns load's result (0 when already loaded). */
int pi_lazy_load(atomic_int *done, int (*load)(const char *name), const char *name);

#endif
