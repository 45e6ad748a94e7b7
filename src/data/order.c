/* order.c - the sample orders, in one file: the seeded permutation and
 * epoch seeds (pagein_permutation, pagein_epoch_seed), the shuffle-quality
 * figure, the epoch's sequence over groups (none, block, global) and its
 * partition over ranks and workers (order.h). */
#include "order.h"
#include "dsformat.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

/* ---- permutations ------------------------------------------------------------- */

uint64_t pagein_epoch_seed(uint64_t seed, uint64_t epoch) {
    uint64_t s = seed ^ (0x632be59bd9b4e019ull * (epoch + 1));
    return pi_splitmix64(&s);
}

void pagein_permutation(uint64_t *ids, uint64_t n, uint64_t seed) {
    uint64_t s = seed;
    for (uint64_t i = 0; i < n; i++) ids[i] = i;
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = pi_rand_below(&s, i);
        uint64_t t = ids[i - 1];
        ids[i - 1] = ids[j];
        ids[j] = t;
    }
}

static int i64_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int pagein_order_entropy(const uint64_t *ids, size_t n, double *bits) {
    if (!ids || !bits) return pi_err(PAGEIN_E_INVALID, "pagein_order_entropy: NULL argument");
    if (n < 2) return pi_err(PAGEIN_E_INVALID, "pagein_order_entropy: %zu ids have no gap", n);
    size_t m = n - 1;
    int64_t *g = pi_malloc(m * sizeof *g);
    if (!g) return pi_err(-ENOMEM, "out of memory for %zu gaps", m);
    for (size_t i = 0; i < m; i++) g[i] = (int64_t)(ids[i + 1] - ids[i]);
    qsort(g, m, sizeof *g, i64_cmp);
    double h = 0;
    for (size_t i = 0; i < m;) {
        size_t j = i;
        while (j < m && g[j] == g[i]) j++;
        double p = (double)(j - i) / (double)m;
        h -= p * log2(p);
        i = j;
    }
    pi_free(g);
    *bits = h;
    return 0;
}

int pagein_shuffle_quality(const uint64_t *ids, size_t n, double *q) {
    if (!ids || !q) return pi_err(PAGEIN_E_INVALID, "pagein_shuffle_quality: NULL argument");
    if (n < 3) return pi_err(PAGEIN_E_INVALID, "pagein_shuffle_quality: needs at least 3 ids, got %zu", n);
    uint64_t *ref = pi_malloc(n * sizeof *ref);
    if (!ref) return pi_err(-ENOMEM, "out of memory for %zu ids", n);
    pagein_permutation(ref, n, 0x5eed5eed5eedull);
    double href = 0, h = 0;
    int rc = pagein_order_entropy(ref, n, &href);
    pi_free(ref);
    if (rc == 0) rc = pagein_order_entropy(ids, n, &h);
    if (rc < 0) return rc;
    *q = href > 0 ? h / href : 0.0;
    return 0;
}

/* ---- the epoch's sequence ---------------------------------------------------
 * none: id order. global: pagein_permutation(N, es). block: the groups in
 * the order pagein_permutation(G, es); windows of `window` consecutive
 * groups in that order; a window's samples (its groups in window order,
 * each ascending) permuted by pagein_permutation(n_w, epoch_seed(es, w+1)). */

void pi_seq_free(struct pi_seq *q) {
    pi_free(q->perm);
    pi_free(q->gperm);
    pi_free(q->wstart);
    memset(q, 0, sizeof *q);
}

static uint64_t ds_group_count(const void *ctx, uint64_t gg, uint64_t *first) {
    const pagein_dataset *d = ctx;
    size_t s = pi_ds_shard_of_group(d, gg);
    struct pi_dsgroupinfo gi = {0, 0, 0};
    pi_ds_group(d->shards[s], gg - d->gfirst[s], &gi);
    if (first) *first = d->files[s].first + gi.first;
    return gi.count;
}

int pi_seq_make_counted(struct pi_seq *q, uint64_t n, uint64_t G, pi_group_count_fn count, const void *ctx, int order,
                        uint64_t seed, uint64_t epoch, uint64_t window) {
    memset(q, 0, sizeof *q);
    q->order = order;
    q->n = n;
    q->G = G;
    q->count = count;
    q->ctx = ctx;
    q->es = pagein_epoch_seed(seed, epoch);
    if (order == PAGEIN_ORDER_GLOBAL) {
        q->perm = pi_malloc((q->n ? q->n : 1) * sizeof *q->perm);
        if (!q->perm) return pi_err(-ENOMEM, "pipe: out of memory for the order of %" PRIu64 " samples", q->n);
        pagein_permutation(q->perm, q->n, q->es);
        return 0;
    }
    q->W = window; /* none: windows of groups in order, read as units; the sequence is id order */
    q->nwin = (q->G + q->W - 1) / q->W;
    q->gperm = pi_malloc((q->G ? q->G : 1) * sizeof *q->gperm);
    q->wstart = pi_malloc((q->nwin + 1) * sizeof *q->wstart);
    if (!q->gperm || !q->wstart) return pi_err(-ENOMEM, "pipe: out of memory for %" PRIu64 " groups", q->G);
    if (order == PAGEIN_ORDER_NONE)
        for (uint64_t g = 0; g < q->G; g++) q->gperm[g] = g;
    else
        pagein_permutation(q->gperm, q->G, q->es);
    uint64_t pos = 0;
    for (uint64_t w = 0; w < q->nwin; w++) {
        q->wstart[w] = pos;
        for (uint64_t k = w * q->W; k < PI_MIN(q->G, (w + 1) * q->W); k++) pos += count(ctx, q->gperm[k], NULL);
    }
    q->wstart[q->nwin] = pos;
    if (pos != q->n) return pi_err(PAGEIN_E_INVALID, "pipe: groups hold %" PRIu64 " samples, dataset %" PRIu64, pos, q->n);
    return 0;
}

int pi_seq_make(struct pi_seq *q, pagein_dataset *d, int order, uint64_t seed, uint64_t epoch, uint64_t window) {
    return pi_seq_make_counted(q, d->nsamples, d->ngroups, ds_group_count, d, order, seed, epoch, window);
}

/* Window of epoch position p (block/none). */
uint64_t pi_seq_window(const struct pi_seq *q, uint64_t p) { return pi_last_le(q->wstart, (size_t)q->nwin, p); }

/* A window's samples in sequence order: ids[0 .. n) (pi_malloc'd). */
int pi_seq_window_ids(const struct pi_seq *q, uint64_t w, uint64_t **out, uint64_t *nout) {
    uint64_t n = q->wstart[w + 1] - q->wstart[w];
    uint64_t *L = pi_malloc((n ? n : 1) * sizeof *L), *ids = pi_malloc((n ? n : 1) * sizeof *ids);
    if (!L || !ids) {
        pi_free(L);
        pi_free(ids);
        return pi_err(-ENOMEM, "pipe: out of memory for a window of %" PRIu64 " samples", n);
    }
    uint64_t k = 0;
    for (uint64_t j = w * q->W; j < PI_MIN(q->G, (w + 1) * q->W); j++) {
        uint64_t first, c = q->count(q->ctx, q->gperm[j], &first);
        for (uint64_t i = 0; i < c; i++) L[k++] = first + i;
    }
    if (q->order == PAGEIN_ORDER_NONE) {
        memcpy(ids, L, n * sizeof *ids);
    } else {
        pagein_permutation(ids, n, pagein_epoch_seed(q->es, w + 1));
        for (uint64_t i = 0; i < n; i++) ids[i] = L[ids[i]];
    }
    pi_free(L);
    *out = ids;
    *nout = n;
    return 0;
}

/* ---- partition ------------------------------------------------------------
 * The remaining positions (intervals, ascending, total M) form a space
 * [0, M); rank r takes [r M / W, (r+1) M / W); within it, batches of B
 * are dealt round-robin to the workers, worker w's part being the
 * contiguous run of its batches' count. */

uint64_t pi_mul_div(uint64_t a, uint64_t b, uint64_t c) { return (uint64_t)(((unsigned __int128)a * b) / c); }

/* Samples of a rank slice of length L that worker w of nw gets, and the
 * offset of its part. */
void pi_part_worker(uint64_t L, uint64_t B, uint32_t w, uint32_t nw, uint64_t *off, uint64_t *cnt) {
    uint64_t nb = (L + B - 1) / B, o = 0, c = 0;
    for (uint32_t v = 0; v <= w; v++) {
        uint64_t k = nb > v ? (nb - v + nw - 1) / nw : 0; /* batches v, v+nw, ... < nb */
        uint64_t s = k * B;
        if (k && (nb - 1) % nw == v) s -= nb * B - L; /* it owns the last, partial batch */
        if (v < w) o += s;
        else c = s;
    }
    *off = o;
    *cnt = c;
}

/* Samples of worker w's part consumed when the rank's loop saw s samples
 * (batches come round-robin from the workers). */
uint64_t pi_part_consumed(uint64_t L, uint64_t B, uint32_t w, uint32_t nw, uint64_t s) {
    if (s >= L) s = L;
    uint64_t full = s / B, part = s % B, nb = (L + B - 1) / B;
    uint64_t k = full > w ? (full - w + nw - 1) / nw : 0, c = k * B;
    if (k && full == nb && (nb - 1) % nw == w) c -= nb * B - L;
    if (part && full % nw == w) c += part;
    return c;
}

/* Maps the remaining-space range [x, y) to epoch-position intervals. cur
 * (NULL: from the start) carries the interval and its base position between
 * calls with ascending x, so mapping every (rank, worker) part of a state
 * is one pass over the intervals, not one per part. */
int pi_part_map(const struct pi_iv *rem, size_t nrem, uint64_t x, uint64_t y, struct pi_iv **out, size_t *n,
                size_t *cap, struct pi_part_cur *cur) {
    struct pi_part_cur c0 = {0, 0}, *c = cur ? cur : &c0;
    if (x < c->base) *c = c0;
    for (; c->i < nrem && x < y; c->i++) {
        uint64_t len = rem[c->i].b - rem[c->i].a;
        if (x < c->base + len) {
            uint64_t a = rem[c->i].a + (x - c->base), b = rem[c->i].a + (PI_MIN(y, c->base + len) - c->base);
            if (*n && (*out)[*n - 1].b == a)
                (*out)[*n - 1].b = b;
            else {
                FORWARD_IF(pi_grow((void **)out, cap, *n + 1, sizeof **out));
                (*out)[(*n)++] = (struct pi_iv){a, b};
            }
            if (c->base + len > y) break; /* the next part may start inside this interval */
            x = c->base + len;
        }
        c->base += len;
    }
    return 0;
}

/* ---- options and the public entry points --------------------------------- */

int pi_pipe_opts_norm(pagein_pipe_opts *o, const pagein_pipe_opts *in) {
    *o = (pagein_pipe_opts)PAGEIN_PIPE_OPTS_INIT;
    FORWARD_IF(pi_opts_in(o, sizeof *o, in, "pipe"));
    RETURN_IF((unsigned)o->order > PAGEIN_ORDER_GLOBAL, PAGEIN_E_INVALID, "pipe: unknown order %d", (int)o->order);
    if (!o->world_size) o->world_size = 1;
    if (!o->num_workers) o->num_workers = 1;
    if (!o->batch) o->batch = 1;
    if (!o->window) o->window = 8;
    RETURN_IF(o->rank >= o->world_size, PAGEIN_E_INVALID, "pipe: rank %u of world size %u", o->rank, o->world_size);
    RETURN_IF(o->worker >= o->num_workers, PAGEIN_E_INVALID, "pipe: worker %u of %u", o->worker, o->num_workers);
    RETURN_IF(o->queue_depth > 256, PAGEIN_E_LIMIT, "pipe: queue depth %u (at most 256)", o->queue_depth);
    return 0;
}

/* The whole sequence into ids[0 .. q->n). */
int pi_seq_flatten(const struct pi_seq *q, uint64_t *ids) {
    if (q->order == PAGEIN_ORDER_GLOBAL) {
        memcpy(ids, q->perm, q->n * sizeof *ids);
        return 0;
    }
    for (uint64_t w = 0; w < q->nwin; w++) {
        uint64_t *wids, nw;
        FORWARD_IF(pi_seq_window_ids(q, w, &wids, &nw));
        memcpy(ids + q->wstart[w], wids, nw * sizeof *ids);
        pi_free(wids);
    }
    return 0;
}

struct uniform {
    uint64_t n, per;
};

static uint64_t uniform_count(const void *ctx, uint64_t g, uint64_t *first) {
    const struct uniform *u = ctx;
    uint64_t a = g * u->per, b = PI_MIN(u->n, a + u->per);
    if (first) *first = a;
    return b - a;
}

int pagein_order_groups(uint64_t n, uint64_t group_samples, const pagein_pipe_opts *opts, uint64_t *ids) {
    pi_err_clear();
    RETURN_IF(!ids && n, PAGEIN_E_INVALID, "order: NULL ids");
    RETURN_IF(!group_samples, PAGEIN_E_INVALID, "order: groups of 0 samples");
    pagein_pipe_opts o;
    FORWARD_IF(pi_pipe_opts_norm(&o, opts));
    struct uniform u = {n, group_samples};
    struct pi_seq q;
    int rc = pi_seq_make_counted(&q, n, n / group_samples + (n % group_samples != 0), uniform_count, &u, o.order, o.seed,
                                 o.epoch, o.window);
    if (rc == 0) rc = pi_seq_flatten(&q, ids);
    pi_seq_free(&q);
    return rc;
}

int pagein_pipe_part(uint64_t m, const pagein_pipe_opts *opts, uint64_t *off, uint64_t *cnt) {
    pi_err_clear();
    RETURN_IF(!off || !cnt, PAGEIN_E_INVALID, "pipe: NULL argument");
    pagein_pipe_opts o;
    FORWARD_IF(pi_pipe_opts_norm(&o, opts));
    uint64_t rs = pi_mul_div(m, o.rank, o.world_size), re = pi_mul_div(m, o.rank + 1, o.world_size);
    pi_part_worker(re - rs, o.batch, o.worker, o.num_workers, off, cnt);
    *off += rs;
    return 0;
}
