/* live.c - hot reload: versions of a model reference counted per version,
 * so that borrowers of a replaced version keep valid pointers until they
 * release it (pagein_live_*), and pagein_model_check. Built only on the
 * public model API. */
#include "../internal.h"

#include <pthread.h>
#include <stdio.h>

int pagein_model_check(const pagein_model *m) {
    pi_err_clear();
    if (!m) return pi_err(PAGEIN_E_INVALID, "pagein_model_check: NULL model");
    size_t n = pagein_model_file_count(m);
    for (size_t i = 0; i < n; i++) {
        int rc = pagein_file_check(pagein_model_file(m, i));
        if (rc < 0) return rc;
    }
    return 0;
}

struct version {
    pagein_model *m;
    uint64_t id;
    long refs; /* borrows, + 1 while current */
    struct version *next;
};

struct pagein_live {
    pthread_mutex_t lock;        /* cur, versions, refs, closed */
    pthread_mutex_t reload_lock; /* one reload at a time; never held by readers */
    char *path;
    pagein_model_opts opts;
    struct version *cur;
    struct version *old; /* replaced versions still borrowed */
    uint64_t next_id;
    int closed;
};

static struct version *version_new(pagein_model *m, uint64_t id) {
    struct version *v = pi_calloc(1, sizeof *v);
    if (!v) return NULL;
    v->m = m;
    v->id = id;
    v->refs = 1;
    return v;
}

static void live_free(pagein_live *l) {
    pthread_mutex_destroy(&l->lock);
    pthread_mutex_destroy(&l->reload_lock);
    pi_free(l->path);
    pi_free(l);
}

int pagein_live_open(pagein_live **out, const char *path, const pagein_model_opts *opts) {
    pi_err_clear();
    if (!out || !path) return pi_err(PAGEIN_E_INVALID, "pagein_live_open: NULL argument");
    pagein_live *l = pi_calloc(1, sizeof *l);
    if (!l) return pi_err(-ENOMEM, "out of memory");
    l->path = pi_strndup(path, strlen(path));
    if (!l->path) {
        pi_free(l);
        return pi_err(-ENOMEM, "out of memory");
    }
    pagein_model_opts d = PAGEIN_MODEL_OPTS_INIT;
    int rc = pi_opts_in(&d, sizeof d, opts, "pagein_live_open");
    if (rc < 0) {
        pi_free(l->path);
        pi_free(l);
        return rc;
    }
    l->opts = d;
    pthread_mutex_init(&l->lock, NULL);
    pthread_mutex_init(&l->reload_lock, NULL);
    pagein_model *m = NULL;
    rc = pagein_model_open(&m, path, &l->opts);
    if (rc < 0) {
        live_free(l);
        return rc;
    }
    l->cur = version_new(m, 1);
    if (!l->cur) {
        pagein_model_close(m);
        live_free(l);
        return pi_err(-ENOMEM, "out of memory");
    }
    l->next_id = 2;
    *out = l;
    return 0;
}

pagein_model *pagein_live_acquire(pagein_live *l) {
    if (!l) return NULL;
    pthread_mutex_lock(&l->lock);
    struct version *v = l->cur;
    if (v) v->refs++;
    pthread_mutex_unlock(&l->lock);
    return v ? v->m : NULL;
}

/* Drops one reference of v (lock held). Returns the model to close when it
 * was the last, unlinking v from the old list. */
static pagein_model *unref(pagein_live *l, struct version *v) {
    if (--v->refs > 0) return NULL;
    for (struct version **p = &l->old; *p; p = &(*p)->next) {
        if (*p == v) {
            *p = v->next;
            break;
        }
    }
    pagein_model *m = v->m;
    pi_free(v);
    return m;
}

void pagein_live_release(pagein_live *l, pagein_model *m) {
    if (!l || !m) return;
    pthread_mutex_lock(&l->lock);
    struct version *v = l->cur && l->cur->m == m ? l->cur : NULL;
    for (struct version *o = l->old; !v && o; o = o->next)
        if (o->m == m) v = o;
    pagein_model *to_close = v ? unref(l, v) : NULL;
    int free_live = l->closed && !l->cur && !l->old;
    pthread_mutex_unlock(&l->lock);
    /* closing can take a while (joining the pager, unmapping): outside the lock */
    pagein_model_close(to_close);
    if (free_live) live_free(l);
}

int pagein_live_reload(pagein_live *l, int force) {
    pi_err_clear();
    if (!l) return pi_err(PAGEIN_E_INVALID, "pagein_live_reload: NULL");
    pthread_mutex_lock(&l->reload_lock);
    int rc;
    if (l->closed) {
        rc = pi_err(PAGEIN_E_INVALID, "pagein_live_reload: closed");
        goto out;
    }
    /* cur only changes under reload_lock, which we hold */
    if (!force && pagein_model_check(l->cur->m) == 0) {
        rc = 0;
        goto out;
    }
    pagein_model *m = NULL;
    rc = pagein_model_open(&m, l->path, &l->opts);
    if (rc < 0) goto out;
    pthread_mutex_lock(&l->lock);
    struct version *v = version_new(m, l->next_id);
    pagein_model *to_close = NULL;
    if (v) {
        l->next_id++;
        struct version *prev = l->cur;
        l->cur = v;
        prev->next = l->old;
        l->old = prev;
        to_close = unref(l, prev); /* the "current" reference */
    }
    pthread_mutex_unlock(&l->lock);
    if (!v) {
        pagein_model_close(m);
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    pagein_model_close(to_close);
    rc = 1;
out:
    pthread_mutex_unlock(&l->reload_lock);
    return rc;
}

uint64_t pagein_live_version(pagein_live *l) {
    if (!l) return 0;
    pthread_mutex_lock(&l->lock);
    uint64_t id = l->cur ? l->cur->id : 0;
    pthread_mutex_unlock(&l->lock);
    return id;
}

void pagein_live_close(pagein_live *l) {
    if (!l) return;
    pthread_mutex_lock(&l->reload_lock);
    pthread_mutex_lock(&l->lock);
    l->closed = 1;
    struct version *v = l->cur;
    l->cur = NULL;
    pagein_model *to_close = NULL;
    if (v) {
        v->next = l->old;
        l->old = v;
        to_close = unref(l, v);
    }
    int free_live = !l->old;
    pthread_mutex_unlock(&l->lock);
    pthread_mutex_unlock(&l->reload_lock);
    pagein_model_close(to_close);
    if (free_live) live_free(l);
}
