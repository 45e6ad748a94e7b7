/* alloc.c - the one allocation wrapper (every allocation goes
 * through it): failure injection for tests and the per-thread journal that
 * frees what a failed parse allocated. A leaf of core: it calls nothing of
 * pagein, so error details (util.c) and redaction (redact.c) sit above it. */
#include "../internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- allocation --------------------------------------------------------- */

/* Failure injection for tests: the only process-wide mutable state besides
 * the signal-handler registration; atomics so concurrent use is defined. */
static _Atomic long fail_after = -1;
static _Atomic long alloc_count = 0;

void pi_alloc_fail_after(long n) { atomic_store(&fail_after, n); }
long pi_alloc_count(void) { return atomic_load(&alloc_count); }

static bool should_fail(void) {
    atomic_fetch_add(&alloc_count, 1);
    long f = atomic_load(&fail_after);
    if (f < 0) return false;
    if (f == 0) return true; /* stays failing until reset */
    atomic_fetch_sub(&fail_after, 1);
    return false;
}

/* The journal of the innermost pi_journal_begin on this thread, if any.
 * It is a set of pointers: an open-addressing hash table (linear probing,
 * deletion by backward shift, so no tombstones) kept at most half full.
 * Every operation is O(1) expected whatever order blocks are freed in: a
 * list searched on each free made a parse that frees oldest-first
 * (pk_free) quadratic in the number of blocks (800,000 pickle
 * tuples took 68 s to open from disk). */
static _Thread_local struct pi_journal *journal;
static _Thread_local uint64_t probes; /* slots looked at, for tests */

uint64_t pi_journal_probes(void) { return probes; }

/* Test hook (fuzz_open_file): called once when the journal records its
 * n-th block on this thread. */
static _Thread_local void (*hook_fn)(void *);
static _Thread_local void *hook_ctx;
static _Thread_local long hook_left;

void pi_journal_hook(long n, void (*fn)(void *), void *ctx) {
    hook_fn = n > 0 ? fn : NULL;
    hook_ctx = ctx;
    hook_left = n;
}

static size_t j_slot(const void *p, size_t cap) {
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

/* Inserts p (not present) into a table with room. */
static void j_put(void **t, size_t cap, void *p) {
    size_t i = j_slot(p, cap);
    probes++;
    while (t[i]) {
        i = (i + 1) & (cap - 1);
        probes++;
    }
    t[i] = p;
}

static void j_add(void *p) {
    struct pi_journal *j = journal;
    if ((j->n + 1) * 2 > j->cap) {
        size_t nc = j->cap ? j->cap * 2 : 64;
        void **nt = calloc(nc, sizeof *nt); /* not pi_calloc: no injection, no recursion */
        if (!nt) {
            j->lost = 1;
            return;
        }
        for (size_t i = 0; i < j->cap; i++)
            if (j->p[i]) j_put(nt, nc, j->p[i]);
        free(j->p);
        j->p = nt;
        j->cap = nc;
    }
    j_put(j->p, j->cap, p);
    j->n++;
    if (hook_fn && --hook_left == 0) {
        void (*fn)(void *) = hook_fn;
        hook_fn = NULL;
        fn(hook_ctx);
    }
}

/* Slot of p in the journal, or SIZE_MAX. */
static size_t j_find(const void *p) {
    struct pi_journal *j = journal;
    if (!j->n) return SIZE_MAX;
    for (size_t i = j_slot(p, j->cap);; i = (i + 1) & (j->cap - 1)) {
        probes++;
        if (j->p[i] == p) return i;
        if (!j->p[i]) return SIZE_MAX;
    }
}

/* Empties slot i, moving later entries of its probe run back so that every
 * entry stays reachable from its home slot. */
static void j_del(size_t i) {
    struct pi_journal *j = journal;
    size_t mask = j->cap - 1;
    j->p[i] = NULL;
    j->n--;
    for (size_t k = (i + 1) & mask; j->p[k]; k = (k + 1) & mask) {
        size_t h = j_slot(j->p[k], j->cap);
        /* k's entry may move to i when its home is not in (i, k] cyclically */
        if (((k - h) & mask) >= ((k - i) & mask)) {
            j->p[i] = j->p[k];
            j->p[k] = NULL;
            i = k;
        }
    }
}

void pi_journal_begin(struct pi_journal *j) {
    memset(j, 0, sizeof *j);
    j->prev = journal;
    journal = j;
}

void pi_journal_end(struct pi_journal *j, int free_all) {
    journal = j->prev;
    if (free_all) {
        for (size_t i = 0; i < j->cap; i++) free(j->p[i]);
    } else if (journal) {
        for (size_t i = 0; i < j->cap; i++)
            if (j->p[i]) j_add(j->p[i]);
        journal->lost |= j->lost;
    }
    free(j->p);
    memset(j, 0, sizeof *j);
}

void *pi_malloc(size_t n) {
    if (should_fail()) return NULL;
    void *p = malloc(n ? n : 1);
    if (p && journal) j_add(p);
    return p;
}

void *pi_calloc(size_t n, size_t size) {
    if (should_fail()) return NULL;
    void *p = n == 0 || size == 0 ? calloc(1, 1) : calloc(n, size);
    if (p && journal) j_add(p);
    return p;
}

void *pi_realloc(void *p, size_t n) {
    if (should_fail()) return NULL;
    /* looked up before realloc, which may free p; a block from before the
     * journal began stays untracked */
    size_t i = p && journal ? j_find(p) : SIZE_MAX;
    void *np = realloc(p, n ? n : 1);
    if (np && journal) {
        if (i != SIZE_MAX) {
            j_del(i);
            j_add(np);
        } else if (!p) {
            j_add(np);
        }
    }
    return np;
}

void pi_free(void *p) {
    if (p && journal) {
        size_t i = j_find(p);
        if (i != SIZE_MAX) j_del(i);
    }
    free(p);
}

char *pi_strndup(const char *s, size_t n) {
    char *d = pi_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}
