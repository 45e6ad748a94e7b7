/* dsopenset.c - a dataset's bounded set of open shard sources: stand-in
 * sources that open the real one on demand and close the least recently
 * used one past the limit (dsopenset.h). */
#include "dsopenset.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>

struct lazy;

struct pi_dsopenset {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t limit, nopen, most;
    int bounded;
    uint64_t opens, closes;
    struct lazy *head, *tail; /* open, unreferenced-or-not, not kept: most recent first */
};

struct lazy {
    struct pi_dsopenset *set;
    struct pi_source *self;
    struct pi_source_ops ops;
    char *uri;
    struct pi_source *in; /* the real source, NULL when closed (under set->mu) */
    int refs, opening, kept, listed;
    struct lazy *prev, *next;
    /* what the first open saw, checked at every reopen */
    uint64_t size;
    char identity[sizeof ((struct pi_source *)0)->identity];
    int have_ctime;
    struct timespec ctime;
};

static size_t default_limit(const char *first) {
    struct rlimit rl;
    uint64_t nofile = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) nofile = (uint64_t)rl.rlim_cur;
    uint64_t n = nofile / (first && pi_source_is_remote(first) ? 16 : 4);
    if (n < 8) n = 8;
    if (n > (1u << 20)) n = 1u << 20;
    return (size_t)pi_env_long("PAGEIN_MAX_OPEN_SHARDS", (long)n, 1, 1L << 20);
}

struct pi_dsopenset *pi_dsopenset_new(size_t nshards, const char *first) {
    struct pi_dsopenset *set = pi_calloc(1, sizeof *set);
    if (!set) return NULL;
    pthread_mutex_init(&set->mu, NULL);
    pthread_cond_init(&set->cv, NULL);
    set->limit = default_limit(first);
    set->bounded = nshards > set->limit;
    return set;
}

void pi_dsopenset_free(struct pi_dsopenset *set) {
    if (!set) return;
    pthread_mutex_destroy(&set->mu);
    pthread_cond_destroy(&set->cv);
    pi_free(set);
}

size_t pi_dsopenset_limit(const struct pi_dsopenset *set) { return set ? set->limit : 0; }
int pi_dsopenset_bounded(const struct pi_dsopenset *set) { return set && set->bounded; }

void pi_dsopenset_counts(const struct pi_dsopenset *set, uint64_t *opens, uint64_t *closes, size_t *most_open) {
    struct pi_dsopenset *s = (struct pi_dsopenset *)set;
    pthread_mutex_lock(&s->mu);
    if (opens) *opens = s->opens;
    if (closes) *closes = s->closes;
    if (most_open) *most_open = s->most;
    pthread_mutex_unlock(&s->mu);
}

/* ---- the recency list (under set->mu) ---- */

static void unlist(struct lazy *L) {
    struct pi_dsopenset *s = L->set;
    if (!L->listed) return;
    if (L->prev) L->prev->next = L->next;
    else s->head = L->next;
    if (L->next) L->next->prev = L->prev;
    else s->tail = L->prev;
    L->prev = L->next = NULL;
    L->listed = 0;
}

static void list_front(struct lazy *L) {
    struct pi_dsopenset *s = L->set;
    unlist(L);
    if (L->kept) return; /* never closed: not a candidate */
    L->next = s->head;
    if (s->head) s->head->prev = L;
    s->head = L;
    if (!s->tail) s->tail = L;
    L->listed = 1;
}

/* Detaches the least recently used unreferenced sources while more than
 * room are open; the caller closes them outside the lock. */
static size_t evict_locked(struct pi_dsopenset *s, size_t room, struct pi_source **out, size_t cap) {
    size_t n = 0;
    for (struct lazy *L = s->tail; L && s->nopen > room && n < cap;) {
        struct lazy *prev = L->prev;
        if (L->refs == 0 && L->in && !L->opening) {
            out[n++] = L->in;
            L->in = NULL;
            unlist(L);
            s->nopen--;
            s->closes++;
            /* the stand-in's fd is -1 already (pi_dsopenset_opened): loader
             * threads read it unlocked (pi_source_facts) */
        }
        L = prev;
    }
    return n;
}

static void close_all(struct pi_source **v, size_t n) {
    for (size_t i = 0; i < n; i++) pi_source_close(v[i]);
}

/* ---- open, check, acquire, release ---- */

static int same_object(struct lazy *L, struct pi_source *in) {
    struct stat st;
    int ctime_ok = 1;
    if (L->have_ctime && in->fd >= 0 && fstat(in->fd, &st) == 0)
        ctime_ok = st.st_ctim.tv_sec == L->ctime.tv_sec && st.st_ctim.tv_nsec == L->ctime.tv_nsec;
    if (in->size == L->size && strcmp(in->identity, L->identity) == 0 && ctime_ok) return 0;
    return pi_err(PAGEIN_E_CHANGED,
                  "%s: changed since the dataset was opened (%" PRIu64 " bytes, identity %s; now %" PRIu64
                  " bytes, identity %s%s): reopened to read it after closing it to bound the open shards",
                  L->uri, L->size, L->identity[0] ? L->identity : "none", in->size,
                  in->identity[0] ? in->identity : "none", ctime_ok ? "" : ", another ctime");
}

/* The real source, opened if need be, referenced until release(). */
static int acquire(struct lazy *L, struct pi_source **in) {
    struct pi_dsopenset *s = L->set;
    pthread_mutex_lock(&s->mu);
    while (L->opening) pthread_cond_wait(&s->cv, &s->mu);
    if (L->in) {
        L->refs++;
        list_front(L);
        *in = L->in;
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    L->opening = 1;
    struct pi_source *ev[8];
    size_t nev = evict_locked(s, s->limit ? s->limit - 1 : 0, ev, PI_ARRAY_LEN(ev));
    pthread_mutex_unlock(&s->mu);
    close_all(ev, nev);
    struct pi_source *src = NULL;
    int rc = pi_source_open(&src, L->uri, 0);
    if (rc == 0 && (rc = same_object(L, src)) < 0) {
        pi_source_close(src);
        src = NULL;
    }
    pthread_mutex_lock(&s->mu);
    L->opening = 0;
    if (rc == 0) {
        L->in = src;
        L->refs++;
        s->nopen++;
        s->opens++;
        if (s->nopen > s->most) s->most = s->nopen;
        list_front(L);
        *in = src;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static void release(struct lazy *L) {
    struct pi_dsopenset *s = L->set;
    struct pi_source *ev[8];
    pthread_mutex_lock(&s->mu);
    L->refs--;
    /* more than the limit were open while all were referenced: back to it */
    size_t nev = s->nopen > s->limit ? evict_locked(s, s->limit, ev, PI_ARRAY_LEN(ev)) : 0;
    pthread_mutex_unlock(&s->mu);
    close_all(ev, nev);
}

/* ---- the stand-in's ops ---- */

static int lz_read(struct pi_source *self, void *buf, uint64_t len, uint64_t off) {
    struct lazy *L = self->impl;
    struct pi_source *in;
    FORWARD_IF(acquire(L, &in));
    int rc = pi_source_read(in, buf, len, off);
    release(L);
    return rc;
}

static int fail_all(struct pi_read_req *reqs, size_t n, int rc) {
    for (size_t i = 0; i < n; i++) reqs[i].rc = rc;
    return rc;
}

static int lz_readv(struct pi_source *self, struct pi_read_req *reqs, size_t n, unsigned depth, pi_read_done_fn done,
                    void *arg) {
    struct lazy *L = self->impl;
    struct pi_source *in;
    int rc = acquire(L, &in);
    if (rc < 0) return fail_all(reqs, n, rc);
    rc = in->ops->readv(in, reqs, n, depth, done, arg);
    release(L);
    return rc;
}

static int lz_readv_view(struct pi_source *self, struct pi_read_req *reqs, size_t n, unsigned depth,
                         pi_read_done_fn done, void *arg, struct pi_readv_view *v) {
    struct lazy *L = self->impl;
    struct pi_source *in;
    int rc = acquire(L, &in);
    if (rc < 0) {
        memset(v, 0, sizeof *v);
        return fail_all(reqs, n, rc);
    }
    rc = in->ops->readv_view(in, reqs, n, depth, done, arg, v);
    release(L);
    return rc;
}

static void lz_close(struct pi_source *self) {
    struct lazy *L = self->impl;
    if (!L) return;
    struct pi_dsopenset *s = L->set;
    pthread_mutex_lock(&s->mu);
    struct pi_source *in = L->in;
    if (in) {
        s->nopen--;
        s->closes++;
    }
    unlist(L);
    L->in = NULL;
    pthread_mutex_unlock(&s->mu);
    pi_source_close(in);
    pi_free(L->uri);
    pi_free(L);
    self->impl = NULL;
}

int pi_dsopenset_source(struct pi_source **out, struct pi_dsopenset *set, const char *uri) {
    struct pi_source *in = NULL;
    FORWARD_IF(pi_source_open(&in, uri, 0));
    struct pi_source *self = pi_calloc(1, sizeof *self);
    struct lazy *L = pi_calloc(1, sizeof *L);
    char *name = pi_strndup(in->name, strlen(in->name)), *u = pi_strndup(uri, strlen(uri));
    if (!self || !L || !name || !u) {
        pi_source_close(in);
        pi_free(self), pi_free(L), pi_free(name), pi_free(u);
        return pi_err(-ENOMEM, "%s: out of memory", uri);
    }
    L->set = set;
    L->self = self;
    L->uri = u;
    L->size = in->size;
    snprintf(L->identity, sizeof L->identity, "%s", in->identity);
    struct stat st;
    if (in->fd >= 0 && fstat(in->fd, &st) == 0) L->have_ctime = 1, L->ctime = st.st_ctim;
    /* what describes a source is the real one's; what reads goes through the stand-in */
    L->ops = (struct pi_source_ops){.name = in->ops->name, .match = in->ops->match, .remote = in->ops->remote,
                                    .schemes = in->ops->schemes, .is_prefix = in->ops->is_prefix,
                                    .read = lz_read, .close = lz_close};
    if (in->ops->readv) L->ops.readv = lz_readv;
    if (in->ops->readv_view) L->ops.readv_view = lz_readv_view;
    self->ops = &L->ops;
    self->name = name;
    self->size = in->size;
    memcpy(self->identity, in->identity, sizeof self->identity);
    self->fd = in->fd;
    int gather = atomic_load(&in->facts_state) != 0;
    if (!gather) self->facts = in->facts;
    else self->facts.rotational = -1;
    atomic_store(&self->facts_state, gather); /* local files: gathered by path when asked */
    self->impl = L;
    pthread_mutex_lock(&set->mu);
    L->in = in;
    L->refs = 1; /* held for the shard's open */
    set->nopen++;
    set->opens++;
    if (set->nopen > set->most) set->most = set->nopen;
    list_front(L);
    pthread_mutex_unlock(&set->mu);
    *out = self;
    return 0;
}

void pi_dsopenset_opened(struct pi_source *s) {
    struct lazy *L = s->impl;
    if (!L->set->bounded) {
        pthread_mutex_lock(&L->set->mu);
        L->kept = 1;
        unlist(L);
        pthread_mutex_unlock(&L->set->mu);
        return; /* the reference stays: never closed */
    }
    s->fd = -1;
    release(L);
}

int pi_dsopenset_fd(struct pi_source *s) {
    struct lazy *L = s->impl;
    pthread_mutex_lock(&L->set->mu);
    int kept = L->kept && L->in;
    int fd = kept ? L->in->fd : -1;
    pthread_mutex_unlock(&L->set->mu);
    if (kept) return fd;
    struct pi_source *in;
    FORWARD_IF(acquire(L, &in)); /* the reference stays: the caller holds the descriptor */
    pthread_mutex_lock(&L->set->mu);
    L->kept = 1;
    unlist(L);
    pthread_mutex_unlock(&L->set->mu);
    return in->fd;
}
