/* ranges.c - many (file, offset, length) requests turned into few large
 * reads: fsspec's merge_offset_ranges plan (sort, drop contained requests,
 * merge neighbours when the gap is at most max_gap and the merged read at
 * most max_block), the reads issued at a queue depth, and every request
 * sliced back out into its caller buffer. */
#include "data.h"
#include "../engine/engine.h"

#include <stdio.h>

#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

struct rkey {
    uint32_t file;
    uint64_t off, end;
    size_t idx;
};

static int rkey_cmp(const void *a, const void *b) {
    const struct rkey *x = a, *y = b;
    if (x->file != y->file) return x->file < y->file ? -1 : 1;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    if (x->end != y->end) return x->end > y->end ? -1 : 1; /* longest first: the rest are contained */
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

void pi_rplan_stats(const struct pi_rplan *plan, size_t n, pagein_ranges_stats *st) {
    if (!st) return;
    st->requests = n;
    st->reads = plan->nblocks;
    st->bytes_requested = plan->bytes_requested;
    st->bytes_read = plan->bytes_read;
    st->bytes_wasted = plan->bytes_wasted;
}

void pi_rplan_free(struct pi_rplan *plan) {
    pi_free(plan->order);
    pi_free(plan->blocks);
    memset(plan, 0, sizeof *plan);
}

int pi_ranges_plan(const pagein_range *r, size_t n, size_t nfds, const uint64_t *sizes, uint64_t max_gap,
                   uint64_t max_block, int no_merge, struct pi_rplan *plan) {
    memset(plan, 0, sizeof *plan);
    RETURN_IF(!r && n, PAGEIN_E_INVALID, "ranges: NULL request array");
    for (size_t i = 0; i < n; i++) {
        RETURN_IF(r[i].length == 0, PAGEIN_E_INVALID, "ranges: request %zu (file %" PRIu32 ", offset %" PRIu64
                  ") has zero length", i, r[i].file, r[i].offset);
        RETURN_IF(r[i].file >= nfds, PAGEIN_E_INVALID, "ranges: request %zu names file %" PRIu32 " of %zu", i,
                  r[i].file, nfds);
        RETURN_IF(!r[i].dst, PAGEIN_E_INVALID, "ranges: request %zu has no destination buffer", i);
        uint64_t end;
        RETURN_IF(pi_add_overflow(r[i].offset, r[i].length, &end) || end > sizes[r[i].file], PAGEIN_E_RANGE,
                  "ranges: request %zu [%" PRIu64 ", +%" PRIu64 ") is past the end of file %" PRIu32 " (%" PRIu64
                  " bytes)", i, r[i].offset, r[i].length, r[i].file, sizes[r[i].file]);
    }
    if (n == 0) return 0;
    struct rkey *k = pi_malloc(n * sizeof *k);
    plan->order = pi_malloc(n * sizeof *plan->order);
    plan->blocks = pi_malloc(n * sizeof *plan->blocks);
    if (!k || !plan->order || !plan->blocks) {
        pi_free(k);
        pi_rplan_free(plan);
        return pi_err(-ENOMEM, "ranges: out of memory for %zu requests", n);
    }
    for (size_t i = 0; i < n; i++) k[i] = (struct rkey){r[i].file, r[i].offset, r[i].offset + r[i].length, i};
    qsort(k, n, sizeof *k, rkey_cmp);
    struct pi_rblock *cur = NULL;
    uint64_t cur_end = 0, covered = 0;
    for (size_t j = 0; j < n; j++) {
        plan->order[j] = k[j].idx;
        plan->bytes_requested += k[j].end - k[j].off;
        if (cur && k[j].file == cur->file) {
            if (k[j].end <= cur_end) { /* contained in (or equal to) what the block reads */
                cur->count++;
                continue;
            }
            uint64_t gap = k[j].off > cur_end ? k[j].off - cur_end : 0;
            int overlap = k[j].off < cur_end;
            int fits = k[j].end - cur->off <= max_block;
            if ((!no_merge && gap <= max_gap && fits) || (no_merge && overlap && fits)) {
                covered += k[j].end - (k[j].off > cur_end ? k[j].off : cur_end);
                cur_end = k[j].end;
                cur->len = cur_end - cur->off;
                cur->count++;
                continue;
            }
        }
        if (cur) plan->bytes_wasted += cur->len - covered;
        cur = &plan->blocks[plan->nblocks++];
        *cur = (struct pi_rblock){k[j].file, k[j].off, k[j].end - k[j].off, j, 1};
        cur_end = k[j].end;
        covered = cur->len;
    }
    plan->bytes_wasted += cur->len - covered;
    for (size_t b = 0; b < plan->nblocks; b++) plan->bytes_read += plan->blocks[b].len;
    pi_free(k);
    return 0;
}

/* ---- pagein_read_ranges: the plan's blocks on the range engine ----------- */

struct scatter {
    const pagein_range *r;
    const struct pi_rplan *plan;
};

/* A piece [boff, boff + len) of block b arrived: copy what each request of
 * the block wants out of it. */
static int scatter_piece(void *arg, size_t b, uint64_t boff, const void *data, uint64_t len) {
    const struct scatter *x = arg;
    const struct pi_rblock *blk = &x->plan->blocks[b];
    uint64_t lo = blk->off + boff, hi = lo + len;
    for (size_t j = blk->first; j < blk->first + blk->count; j++) {
        const pagein_range *q = &x->r[x->plan->order[j]];
        uint64_t a = PI_MAX(q->offset, lo), e = PI_MIN(q->offset + q->length, hi);
        if (a < e) memcpy((uint8_t *)q->dst + (a - q->offset), (const uint8_t *)data + (a - lo), (size_t)(e - a));
    }
    return 0;
}

int pi_fdsrcs_init(struct pi_fdsrcs *f, const int *fds, size_t n, const uint64_t *sizes, char *const *paths,
                   int readv) {
    memset(f, 0, sizeof *f);
    f->ops = (struct pi_source_ops){.name = "file", .read = pi_source_file.read, .readv = readv ? pi_source_file.readv : NULL};
    f->n = n;
    f->src = pi_calloc(n ? n : 1, sizeof *f->src);
    f->srcs = pi_calloc(n ? n : 1, sizeof *f->srcs);
    f->names = paths ? NULL : pi_calloc(n ? n : 1, sizeof *f->names);
    if (!f->src || !f->srcs || (!paths && !f->names)) {
        pi_fdsrcs_free(f);
        return pi_err(-ENOMEM, "ranges: out of memory for %zu files", n);
    }
    for (size_t i = 0; i < n; i++) {
        char *name = paths ? paths[i] : f->names[i];
        if (!paths) snprintf(f->names[i], sizeof f->names[i], "file %zu (fd %d)", i, fds[i]);
        f->src[i] = (struct pi_source){.ops = &f->ops, .name = name, .size = sizes[i], .fd = fds[i]};
        f->src[i].facts.rotational = -1;
        if (paths) pi_local_facts(fds[i], paths[i], &f->src[i].facts);
        f->srcs[i] = &f->src[i];
    }
    return 0;
}

void pi_fdsrcs_free(struct pi_fdsrcs *f) {
    pi_free(f->src);
    pi_free(f->srcs);
    pi_free(f->names);
    memset(f, 0, sizeof *f);
}

/* Every block of the plan is one span: read straight into the request's
 * buffer when the block is exactly one request (BUFFERS, one readv per
 * file), else streamed through a ring and scattered into the requests it
 * serves on this thread. */
int pi_ranges_exec(const struct pi_fdsrcs *f, const pagein_range *r, const struct pi_rplan *plan, unsigned qd,
                   struct pi_crew *crew, struct pi_rscratch *scratch) {
    if (plan->nblocks == 0) return 0;
    /* Merged blocks are read into a scratch buffer (the reader's kept one,
     * or one for this call) so that every block is a caller-buffer span:
     * the engine then reads the whole plan as one readv per file (io_uring
     * where the source has it) instead of starting threads for a ring on
     * every call (a 1.3x slower ranges mode in bench shuffle). */
    struct pi_rscratch own = {NULL, 0};
    if (!scratch) scratch = &own;
    uint64_t merged = 0;
    {
        for (size_t b = 0; b < plan->nblocks; b++)
            if (plan->blocks[b].count != 1) merged += pi_align_up(plan->blocks[b].len, 64);
        if (merged > scratch->cap) {
            uint8_t *np = pi_realloc(scratch->p, merged);
            if (!np) return pi_err(-ENOMEM, "ranges: out of memory for %" PRIu64 " bytes of merged reads", merged);
            scratch->p = np;
            scratch->cap = merged;
        }
    }
    struct pi_span *sp = pi_calloc(plan->nblocks, sizeof *sp);
    if (!sp) {
        pi_free(own.p);
        return pi_err(-ENOMEM, "ranges: out of memory for %zu reads", plan->nblocks);
    }
    int direct = 1;
    uint64_t biggest = 0, at = 0;
    for (size_t b = 0; b < plan->nblocks; b++) {
        const struct pi_rblock *blk = &plan->blocks[b];
        void *dst = blk->count == 1 ? r[plan->order[blk->first]].dst : NULL;
        if (!dst) {
            dst = scratch->p + at;
            at += pi_align_up(blk->len, 64);
        }
        direct &= dst != NULL;
        sp[b] = (struct pi_span){blk->file, blk->off, blk->len, dst};
        if (blk->len > biggest) biggest = blk->len;
    }
    struct scatter x = {r, plan};
    struct pi_engine_opts o = {.deliver = direct ? PI_DELIVER_BUFFERS : PI_DELIVER_STREAM,
                               .request_bytes = pi_align_up(biggest, 4096),
                               .depth = qd,
                               .max_gap = 0,
                               .consume = scatter_piece,
                               .arg = &x,
                               .crew = crew};
    int rc = pi_engine_run(f->srcs, f->n, sp, plan->nblocks, &o, NULL);
    if (rc == 0 && direct) /* merged blocks were read into scratch: slice them out */
        for (size_t b = 0; b < plan->nblocks; b++)
            if (plan->blocks[b].count != 1) scatter_piece(&x, b, 0, sp[b].dst, sp[b].len);
    pi_free(sp);
    pi_free(own.p);
    return rc;
}

int pagein_read_ranges(const int *fds, size_t nfds, const pagein_range *reqs, size_t n,
                       const pagein_ranges_opts *opts, pagein_ranges_stats *st) {
    pi_err_clear();
    if (st) memset(st, 0, sizeof *st);
    RETURN_IF(!fds && nfds, PAGEIN_E_INVALID, "ranges: NULL descriptor array");
    uint64_t max_gap = opts && opts->max_gap ? opts->max_gap : PAGEIN_RANGES_DEFAULT_MAX_GAP;
    uint64_t max_block = opts && opts->max_block ? opts->max_block : PAGEIN_RANGES_DEFAULT_MAX_BLOCK;
    unsigned qd = opts && opts->queue_depth ? opts->queue_depth : PAGEIN_RANGES_DEFAULT_QUEUE_DEPTH;
    int no_merge = opts && (opts->flags & PAGEIN_RANGES_NO_MERGE);
    uint64_t *sizes = pi_calloc(nfds ? nfds : 1, sizeof *sizes);
    if (!sizes) return pi_err(-ENOMEM, "ranges: out of memory");
    int rc = 0;
    for (size_t i = 0; i < nfds; i++) {
        struct stat sb;
        if (fstat(fds[i], &sb) < 0) {
            rc = pi_err(-errno, "ranges: fstat of file %zu (fd %d): %s", i, fds[i], strerror(errno));
            goto done;
        }
        sizes[i] = (uint64_t)sb.st_size;
    }
    struct pi_rplan plan;
    if ((rc = pi_ranges_plan(reqs, n, nfds, sizes, max_gap, max_block, no_merge, &plan)) < 0) goto done;
    /* the range engine reads the plan's blocks: io_uring with the flag (the
     * local readv falls back to threads without liburing or where the
     * kernel refuses a ring), threads otherwise */
    struct pi_fdsrcs f;
    rc = pi_fdsrcs_init(&f, fds, nfds, sizes, NULL, opts && (opts->flags & PAGEIN_RANGES_URING));
    if (rc == 0) rc = pi_ranges_exec(&f, reqs, &plan, qd, NULL, NULL);
    pi_fdsrcs_free(&f);
    pi_rplan_stats(&plan, n, st);
    pi_rplan_free(&plan);
done:
    pi_free(sizes);
    return rc;
}
