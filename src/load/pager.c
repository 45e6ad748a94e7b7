/* pager.c - the prefetch pager and the layer cursor.
 *
 * Layers are walked as groups g = layer + 1: g = 0 leading globals
 * (embeddings), 1..L the numbered layers, L + 1 trailing globals (final
 * norm, head). One background thread, owned by the model and joined in
 * pagein_model_close(), keeps groups [cursor, cursor + ahead] resident,
 * lowest first, loading each with the parallel chunked populate so the
 * device sees a deep queue even though groups are taken one at a time.
 *
 * The consumer moves the cursor: pagein_layer_wait(i) sets it to at least
 * i's group and returns once that group is resident. The pager always works
 * on the lowest missing group at or after the cursor, and abandons a group
 * as soon as the cursor moves past it (its remaining chunks are skipped), so
 * a wait for the cursor group starts it at once. A wait for a group behind
 * the cursor (re-reading a released layer) is loaded by the waiting thread
 * itself. pagein_layer_done(i) moves the cursor past i and, with a budget,
 * releases i's pages (pi_model_release_group).
 *
 * Budget: the pager does not start a group ahead of the cursor while
 * resident + group bytes would exceed the budget; the cursor group itself is
 * never refused (the consumer is waiting for it). So the bytes it holds
 * never exceed budget + one group.
 *
 * Without a budget the pager pages groups in like populate does (parallel
 * MADV_POPULATE_READ; read-around may bring in a little more, and large
 * folios map fast). With a budget residency must be exact: the mappings
 * get MADV_RANDOM (no read-around on faults, no async readahead), the pager
 * asks for exactly the groups' ranges with readahead() + MADV_POPULATE_READ,
 * and pages of the data sections that nobody maps are dropped after every
 * group (trim()). Exact mode is slower on this machine (small folios).
 *
 * One machine for both kinds of memory: the pager runs over a fill row
 * (load.h, struct pi_fill) chosen once at start and never asks which it is:
 * pi_fill_mapping (populate.c) pages the mapping in as above;
 * pi_fill_buffers (stream.c), for files without a mapping (remote sources),
 * reads each group's tensor ranges through the range engine into
 * anonymous memory, up to 4 groups of the window at once; a group the
 * cursor passed before its read started is skipped (a read in progress
 * finishes). Releasing drops the pages of the group's tensors; a later
 * wait reads them again. The public calls over the pager (waits, done,
 * data pointers) are in access.c, above it.
 *
 * fork(): only the forking thread survives in the child, so the pager
 * thread is gone and mu/cv may be held by a thread that no longer exists.
 * Every entry point first compares the process id the pager was started in
 * with getpid(); in a child the first call re-initialises mu and cv, puts
 * groups that were being paged in back to "missing" and starts a new pager
 * thread, so layers() and waits work in the child as in the parent (which
 * keeps its own pager). Close in a child does not join the parent's thread.
 * A streamed model is not restarted in a child (its remote sources' pooled
 * connections belong to the parent): waits there fail with
 * PAGEIN_E_FORKED.
 */
#include "load.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* G_RELEASING: pagein_layer_done is giving the group's memory back; nobody
 * may read it again until that is over (G_RELEASED), or the release would
 * zero bytes just read (anonymous memory of a streamed model: seen as
 * pagein_tensor_copy returning zeros when the pager re-read the final
 * group between done's state change and its MADV_DONTNEED). */
enum { G_NONE = 0, G_LOADING, G_RESIDENT, G_RELEASED, G_FAILED, G_RELEASING };

struct pi_pager {
    pthread_t tid;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    int32_t ng;
    uint8_t *state;
    int *gerr;
    _Atomic int32_t cursor; /* written under mu; read without it by populate */
    unsigned ahead;
    uint64_t budget, resident;
    char errmsg[512];
    const struct pi_fill *fill; /* how groups come into memory: the mapping, or buffers read through the sources */
    uint64_t *gbytes;
    /* per group while loading: everything before (wm_file, wm_end) in
     * (file, offset) order is resident (tensor waits) */
    uint32_t *wm_file;
    uint64_t *wm_end;
    /* CPU sharing: consumer threads blocked in a wait, pool threads working
     * ahead of the cursor, and how many may while nobody waits */
    unsigned waiting, ahead_running, ahead_limit;
    /* the process the pager thread runs in; ready_pid: restart done */
    _Atomic pid_t pid, ready_pid;
    int fork_err; /* the restart after fork failed: every later wait fails */
    /* pi_pager_settle: gen counts settle requests; idle_gen is the newest
     * one the pager thread had seen when it last found nothing to load */
    uint64_t gen, idle_gen;
};

static void finish(struct pi_pager *p, int32_t g, int rc) {
    pthread_mutex_lock(&p->mu);
    if (rc == PAGEIN_E_CANCELLED) {
        p->state[g] = G_NONE;
        p->resident -= p->gbytes[g];
    } else if (rc < 0) {
        p->state[g] = G_FAILED;
        p->gerr[g] = rc;
        p->resident -= p->gbytes[g];
        snprintf(p->errmsg, sizeof p->errmsg, "%s", pagein_last_error_detail());
    } else {
        p->state[g] = G_RESIDENT;
    }
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void group_done(void *arg, int32_t g, int rc) {
    pagein_model *m = arg;
    finish(m->pager, g, rc);
}

/* The consumer computes on the same CPUs the pool pages in with (on a VM or
 * a host-cached disk paging in costs CPU, not just device time). While it
 * waits, every pool thread works; while it computes, work ahead of the
 * cursor runs on all but one thread, so paging in layer i + 1 never halves
 * the speed of computing layer i. */
static int gate_enter(void *arg, int32_t g) {
    pagein_model *m = arg;
    struct pi_pager *p = m->pager;
    pthread_mutex_lock(&p->mu);
    while (!p->stop && !atomic_load(&m->cancel) && g > atomic_load(&p->cursor) && !p->waiting &&
           p->ahead_running >= p->ahead_limit)
        pthread_cond_wait(&p->cv, &p->mu);
    int token = g > atomic_load(&p->cursor);
    if (token) p->ahead_running++;
    pthread_mutex_unlock(&p->mu);
    return token;
}

static void gate_leave(void *arg, int32_t g, int token) {
    (void)g;
    if (!token) return;
    pagein_model *m = arg;
    struct pi_pager *p = m->pager;
    pthread_mutex_lock(&p->mu);
    p->ahead_running--;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void group_progress(void *arg, int32_t g, uint32_t file, uint64_t end) {
    pagein_model *m = arg;
    struct pi_pager *p = m->pager;
    pthread_mutex_lock(&p->mu);
    if (file > p->wm_file[g] || (file == p->wm_file[g] && end > p->wm_end[g])) {
        p->wm_file[g] = file;
        p->wm_end[g] = end;
        if (p->waiting) pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
}

/* Waits on the pager's condition variable as a consumer (mu held). */
static void consumer_wait(struct pi_pager *p) {
    if (p->waiting++ == 0) pthread_cond_broadcast(&p->cv); /* open the gate */
    pthread_cond_wait(&p->cv, &p->mu);
    p->waiting--;
}

/* Takes every missing group of the window [cursor, cursor + ahead] that the
 * budget allows (the cursor group always) and pages them in one parallel
 * pass, chunks in group order, so the device queue stays deep across group
 * boundaries and each group is announced as soon as its own chunks are in. */
static void *pager_main(void *arg) {
    pagein_model *m = arg;
    struct pi_pager *p = m->pager;
    int32_t batch[64];
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        uint64_t gen = p->gen;
        int32_t cur = atomic_load(&p->cursor);
        /* in 64 bits: cursor + ahead overflowed int32 for ahead >= 2^31,
         * went negative and nothing was ever loaded */
        int64_t hi64 = (int64_t)cur + (int64_t)p->ahead;
        int32_t hi = hi64 > p->ng - 1 ? p->ng - 1 : (int32_t)hi64;
        size_t nb = 0;
        uint64_t add = 0;
        for (int32_t k = cur; k <= hi && nb < PI_ARRAY_LEN(batch); k++) {
            /* not G_RELEASED: a released group at or after the cursor is
             * the last one, done with (done moves the cursor past any
             * other); reading it again is for a wait to ask */
            if (p->state[k] != G_NONE) continue;
            if (p->budget && k != cur && p->resident + add + p->gbytes[k] > p->budget) break;
            batch[nb++] = k;
            add += p->gbytes[k];
        }
        if (nb == 0) {
            if (p->idle_gen != gen) {
                p->idle_gen = gen;
                pthread_cond_broadcast(&p->cv); /* pi_pager_settle */
            }
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        for (size_t i = 0; i < nb; i++) {
            p->state[batch[i]] = G_LOADING;
            p->wm_file[batch[i]] = 0;
            p->wm_end[batch[i]] = 0;
        }
        p->resident += add;
        pthread_mutex_unlock(&p->mu);
        const struct pi_group_hooks h = {m, gate_enter, gate_leave, group_progress, group_done};
        int rc = p->fill->pass(m, batch, nb, p->budget, &p->cursor, &h);
        if (rc < 0)
            for (size_t i = 0; i < nb; i++) finish(p, batch[i], rc);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* The files' ensure hook (pagein_tensor_copy) while the model's memory is
 * the buffers' (filled by reads): the model's own records are made valid
 * first; a file's own table has no data pointer and is read through the
 * source. */
static int ensure_hook(void *ctx, const pagein_tensor *t) {
    pagein_model *m = ctx;
    uintptr_t a = (uintptr_t)m->tab.t, x = (uintptr_t)t;
    if (x < a || x >= a + m->tab.n * sizeof *t || (x - a) % sizeof *t) return 0;
    return pi_pager_ensure_tensor(m, t);
}

int pi_pager_start(pagein_model *m) {
    struct pi_pager *p = pi_calloc(1, sizeof *p);
    if (!p) return pi_err(-ENOMEM, "out of memory");
    p->ng = m->nlayers + 2;
    p->state = pi_calloc((size_t)p->ng, 1);
    p->gerr = pi_calloc((size_t)p->ng, sizeof *p->gerr);
    p->wm_file = pi_calloc((size_t)p->ng, sizeof *p->wm_file);
    p->wm_end = pi_calloc((size_t)p->ng, sizeof *p->wm_end);
    p->gbytes = m->lbytes;
    p->ahead = m->opts.prefetch_ahead ? m->opts.prefetch_ahead : 2;
    /* more than every group ahead means all of them: any unsigned value
     * (UINT_MAX included) is valid and behaves like the layer count */
    if (p->ahead > (unsigned)p->ng) p->ahead = (unsigned)p->ng;
    p->budget = m->opts.budget_bytes;
    atomic_init(&p->cursor, 0);
    if (!p->state || !p->gerr || !p->wm_file || !p->wm_end) {
        pi_free(p->state);
        pi_free(p->gerr);
        pi_free(p->wm_file);
        pi_free(p->wm_end);
        pi_free(p);
        return pi_err(-ENOMEM, "out of memory");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    atomic_init(&p->pid, getpid());
    atomic_init(&p->ready_pid, getpid());
    m->pager = p;
    /* The consumer computes while the pager reads: the pool is one thread
     * per CPU (at least 2; pagein_model_open sets that default for every
     * pool), leaving CPU time to the consumer. On the 2-CPU development
     * machine 2 threads instead of 8 took the pipeline's first output from
     * 0.35 s to 0.12 s and its total from 2.8 s to 1.4 s (each fault still
     * reads around, so the queue stays deep). pager_threads only applies
     * when no default was set. */
    if (!m->opts.threads) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        m->pager_threads = nc < 2 ? 2 : (unsigned)nc;
    }
    unsigned nt = m->pager_threads ? m->pager_threads : m->opts.threads;
    p->ahead_limit = nt > 1 ? nt - 1 : 1;
    /* the one choice between the two kinds of memory: a file without a
     * mapping (remote) has every group read through the sources into
     * anonymous buffers (stream.c), else the mapping is paged in
     * (populate.c) */
    int unmapped = 0;
    for (size_t i = 0; i < m->nfiles; i++) unmapped |= !m->files[i]->mapped && m->files[i]->len;
    p->fill = unmapped ? &pi_fill_buffers : &pi_fill_mapping;
    int rc = p->fill->prepare(m, p->budget);
    if (rc < 0) return rc; /* the pager is freed by close */
    for (size_t i = 0; i < m->nfiles && p->fill->buffers; i++) {
        m->files[i]->ensure = ensure_hook;
        m->files[i]->ensure_ctx = m;
    }
    int e = pthread_create(&p->tid, NULL, pager_main, m);
    if (e) return pi_err(-e, "cannot start the prefetch thread: %s", strerror(e));
    p->started = 1;
    return 0;
}

/* In a child of fork(): makes the pager usable again (see the top of the
 * file). The first thread of the child to get here does the work; others
 * wait for it. With restart 0 (close) no new thread is started. */
static int after_fork(pagein_model *m, int restart) {
    struct pi_pager *p = m->pager;
    pid_t me = getpid(), old = atomic_load(&p->pid);
    if (old != me && atomic_compare_exchange_strong(&p->pid, &old, me)) {
        /* this thread restarts; fall through */
    } else {
        while (atomic_load(&p->ready_pid) != me) sched_yield(); /* another thread is restarting */
        if (restart && p->fork_err)
            return pi_err(PAGEIN_E_FORKED, "the prefetch thread could not be restarted after fork()");
        return 0;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->started = 0;
    p->waiting = p->ahead_running = 0;
    for (int32_t g = 0; g < p->ng; g++)
        if (p->state[g] == G_LOADING) {
            /* its loader did not survive; what it brought in stays resident */
            p->state[g] = G_NONE;
            p->resident -= p->gbytes[g];
        } else if (p->state[g] == G_RELEASING) { /* so did its releaser: read it again when asked */
            p->state[g] = G_RELEASED;
            p->resident -= p->gbytes[g];
        }
    int rc = 0;
    if (restart && !p->stop && p->fill->buffers) {
        rc = p->fork_err = pi_err(PAGEIN_E_FORKED, "%s: a model read through a remote source cannot load layers in a "
                                  "child of fork() (its connections belong to the parent); open it in the child",
                                  m->files[0]->path);
    } else if (restart && !p->stop) {
        int e = pthread_create(&p->tid, NULL, pager_main, m);
        if (e)
            rc = p->fork_err = pi_err(PAGEIN_E_FORKED, "cannot restart the prefetch thread in the child of fork(): %s",
                        strerror(e));
        else
            p->started = 1;
    }
    atomic_store(&p->ready_pid, me);
    return rc;
}

void pi_pager_stop(pagein_model *m) {
    struct pi_pager *p = m->pager;
    if (!p) return;
    after_fork(m, 0);
    atomic_store(&m->cancel, 1);
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (p->started) pthread_join(p->tid, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    pi_free(p->state);
    pi_free(p->gerr);
    pi_free(p->wm_file);
    pi_free(p->wm_end);
    pi_free(p);
    m->pager = NULL;
}

/* Waits until group g is resident or, with t, until tensor t of group g
 * is (the group's finished prefix covers it). */
static int wait_for(pagein_model *m, int32_t g, const pagein_tensor *t) {
    struct pi_pager *p = m->pager;
    FORWARD_IF(after_fork(m, 1));
    pthread_mutex_lock(&p->mu);
    if (g > atomic_load(&p->cursor)) {
        atomic_store(&p->cursor, g);
        pthread_cond_broadcast(&p->cv);
    }
    for (;;) {
        uint8_t s = p->state[g];
        if (s == G_RESIDENT) break;
        if (t && s == G_LOADING &&
            (p->wm_file[g] > t->file || (p->wm_file[g] == t->file && p->wm_end[g] >= t->offset + t->nbytes)))
            break;
        if (s == G_FAILED) {
            int rc = p->gerr[g];
            char msg[sizeof p->errmsg];
            memcpy(msg, p->errmsg, sizeof msg); /* under mu: another group's failure may rewrite it */
            p->state[g] = G_NONE; /* a later wait retries */
            pthread_mutex_unlock(&p->mu);
            return pi_err(rc, "%s", msg);
        }
        if (s == G_LOADING || s == G_RELEASING || (s != G_RELEASED && g >= atomic_load(&p->cursor) && !p->stop)) {
            /* the pager is on it, or will take it next (it is the lowest
             * missing group at the cursor) */
            consumer_wait(p);
            continue;
        }
        if (t) {
            /* behind the cursor: page just this tensor in on this thread */
            pthread_mutex_unlock(&p->mu);
            struct pi_range r = {t->file, t->offset, t->nbytes};
            return p->fill->load(m, &r, 1, p->budget);
        }
        /* behind the cursor, or the released last group: load it on this
         * thread */
        p->state[g] = G_LOADING;
        p->resident += p->gbytes[g];
        pthread_mutex_unlock(&p->mu);
        finish(p, g, pi_fill_group(p->fill, m, g, p->budget));
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return 0;
}

int pi_pager_wait(pagein_model *m, int32_t g) { return wait_for(m, g, NULL); }

int pi_pager_wait_tensor(pagein_model *m, int32_t g, const pagein_tensor *t) { return wait_for(m, g, t); }

int pi_pager_ensure_tensor(pagein_model *m, const pagein_tensor *t) { return pi_pager_ensure_tensors(m, &t, 1); }

int pi_pager_ensure_tensors(pagein_model *m, const pagein_tensor *const *t, size_t n) {
    struct pi_pager *p = m->pager;
    if (!p || !p->fill->buffers || !n) return 0;
    FORWARD_IF(after_fork(m, 1));
    struct pi_range one, *r = n == 1 ? &one : pi_malloc(n * sizeof *r);
    if (!r) return pi_err(-ENOMEM, "out of memory for %zu tensors", n);
    size_t k = 0;
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < n; i++) {
        if (!t[i]->nbytes) continue;
        int32_t g = m->tgroup[t[i] - m->tab.t];
        /* a group being read (by the pager or a waiting thread) is complete
         * when its state changes; the tensor alone is not announced */
        while ((p->state[g] == G_LOADING || p->state[g] == G_RELEASING) && !p->stop) consumer_wait(p);
        if (p->state[g] != G_RESIDENT) r[k++] = (struct pi_range){t[i]->file, t[i]->offset, t[i]->nbytes};
    }
    pthread_mutex_unlock(&p->mu);
    /* not read (ahead of the window, released, failed): these tensors, in
     * one engine run on this thread, without moving the cursor or counting
     * them */
    int rc = k ? p->fill->load(m, r, k, p->budget) : 0;
    if (r != &one) pi_free(r);
    return rc;
}

int pi_pager_settle(pagein_model *m, unsigned timeout_ms) {
    struct pi_pager *p = m->pager;
    if (!p || !p->started) return 0;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&p->mu);
    uint64_t g = ++p->gen;
    p->waiting++; /* a waiting consumer: every pool thread may work */
    pthread_cond_broadcast(&p->cv);
    int rc = 0;
    while (!p->stop && p->idle_gen < g && rc == 0) rc = pthread_cond_timedwait(&p->cv, &p->mu, &dl);
    p->waiting--;
    int idle = p->stop || p->idle_gen >= g;
    pthread_mutex_unlock(&p->mu);
    return idle ? 0 : pi_err(-ETIMEDOUT, "pager: still loading after %u ms", timeout_ms);
}

uint64_t pi_pager_resident(pagein_model *m) {
    struct pi_pager *p = m->pager;
    if (!p) return 0;
    pthread_mutex_lock(&p->mu);
    uint64_t r = p->resident;
    pthread_mutex_unlock(&p->mu);
    return r;
}

int pi_pager_done(pagein_model *m, int32_t g) {
    struct pi_pager *p = m->pager;
    FORWARD_IF(after_fork(m, 1));
    pthread_mutex_lock(&p->mu);
    /* With a budget, a group still being paged in (a consumer that waited
     * per tensor can finish with a layer before the pass has announced the
     * whole group) is let finish before the cursor moves past it, so that
     * it is released now rather than left resident and uncounted. */
    while (p->budget && p->state[g] == G_LOADING && !p->stop) consumer_wait(p);
    int32_t next = g + 1 < p->ng ? g + 1 : p->ng - 1;
    if (next > atomic_load(&p->cursor)) atomic_store(&p->cursor, next);
    /* streamed: a group the consumer read tensor by tensor behind the
     * cursor (pagein_tensor_wait, the accessors' ensure) is not RESIDENT
     * nor counted, yet holds anonymous memory that nothing else would
     * give back: release it too (MADV_DONTNEED on dropped pages is
     * harmless), only the counted bytes leave the count */
    int counted = p->state[g] == G_RESIDENT;
    int release = p->budget && (counted || (p->fill->buffers && p->state[g] != G_LOADING && p->state[g] != G_RELEASING));
    if (release) p->state[g] = G_RELEASING; /* bytes still counted until released */
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (release) {
        p->fill->release(m, g);
        pthread_mutex_lock(&p->mu);
        p->state[g] = G_RELEASED;
        if (counted) p->resident -= p->gbytes[g];
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    return 0;
}
