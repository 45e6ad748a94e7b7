/* order.h - the one place sample orders are made (order.c): the seeded
 * permutation and epoch seeds, the epoch's sequence (none, block, global)
 * over a dataset's groups, and its partition over ranks and workers. The
 * pipeline (pipeline.c), its resume states, the compatibility readers
 * (reader.c) and, through pagein_order_groups/pagein_pipe_part, Python all
 * take their orders from here. */
#ifndef PAGEIN_DATA_ORDER_H
#define PAGEIN_DATA_ORDER_H

#include "data.h"

struct pi_iv {
    uint64_t a, b; /* [a, b) of epoch positions */
};

/* Samples of group g and (first) its first sample id. */
typedef uint64_t (*pi_group_count_fn)(const void *ctx, uint64_t g, uint64_t *first);

struct pi_seq {
    int order;
    uint64_t n, G, W, nwin, es;
    uint64_t *perm;   /* global: N ids */
    uint64_t *gperm;  /* block: G groups */
    uint64_t *wstart; /* block/none: nwin + 1 epoch positions */
    pi_group_count_fn count;
    const void *ctx;
};

/* The sequence of epoch `epoch` over d's groups (or over G groups that
 * count describes, n samples in all); window: groups per window (>= 1). */
int pi_seq_make(struct pi_seq *q, pagein_dataset *d, int order, uint64_t seed, uint64_t epoch, uint64_t window);
int pi_seq_make_counted(struct pi_seq *q, uint64_t n, uint64_t G, pi_group_count_fn count, const void *ctx, int order,
                        uint64_t seed, uint64_t epoch, uint64_t window);
void pi_seq_free(struct pi_seq *q);
/* Window of epoch position p (block/none). */
uint64_t pi_seq_window(const struct pi_seq *q, uint64_t p);
/* A window's samples in sequence order: ids[0 .. n) (pi_malloc'd). */
int pi_seq_window_ids(const struct pi_seq *q, uint64_t w, uint64_t **out, uint64_t *nout);

/* The whole sequence into ids[0 .. q->n). */
int pi_seq_flatten(const struct pi_seq *q, uint64_t *ids);
/* opts with the defaults filled in and checked (window 8, batch 1, ...). */
int pi_pipe_opts_norm(pagein_pipe_opts *o, const pagein_pipe_opts *in);

/* a * b / c without overflow (c > 0). */
uint64_t pi_mul_div(uint64_t a, uint64_t b, uint64_t c);
/* Worker w of nw's part of a rank slice of L samples dealt in batches of B:
 * its offset and count. */
void pi_part_worker(uint64_t L, uint64_t B, uint32_t w, uint32_t nw, uint64_t *off, uint64_t *cnt);
/* Samples of worker w's part consumed when the rank's loop saw s samples. */
uint64_t pi_part_consumed(uint64_t L, uint64_t B, uint32_t w, uint32_t nw, uint64_t s);
/* Where a walk of pi_part_map over rem stands: interval i, whose first
 * remaining-space position is base. */
struct pi_part_cur {
    size_t i;
    uint64_t base;
};
/* Maps the remaining-space range [x, y) to epoch-position intervals,
 * appended to *out (n used, cap allocated). cur (NULL: from the start)
 * carries the walk between calls with ascending x (linear over all parts). */
int pi_part_map(const struct pi_iv *rem, size_t nrem, uint64_t x, uint64_t y, struct pi_iv **out, size_t *n,
                size_t *cap, struct pi_part_cur *cur);

#endif
