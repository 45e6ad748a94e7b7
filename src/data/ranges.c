/* ranges.c - many (file, offset, length) requests turned into few large
 * reads: fsspec's merge_offset_ranges plan (sort, drop contained requests,
 * merge neighbours when the gap is at most max_gap and the merged read at
 * most max_block), the reads issued at a queue depth, and every request
 * sliced back out into its caller buffer. */
#include "data.h"

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

struct exec_ctx {
    const int *fds;
    const pagein_range *r;
    const struct pi_rplan *plan;
};

static int exec_block(void *arg, size_t b) {
    struct exec_ctx *x = arg;
    const struct pi_rblock *blk = &x->plan->blocks[b];
    int fd = x->fds[blk->file];
    if (blk->count == 1) /* one request that is the whole read: straight into its buffer */
        return pi_pread_full(fd, x->r[x->plan->order[blk->first]].dst, blk->len, blk->off);
    uint8_t *buf = pi_malloc(blk->len);
    if (!buf) return pi_err(-ENOMEM, "ranges: out of memory for a %" PRIu64 "-byte read", blk->len);
    int rc = pi_pread_full(fd, buf, blk->len, blk->off);
    if (rc == 0) {
        for (size_t j = blk->first; j < blk->first + blk->count; j++) {
            const pagein_range *q = &x->r[x->plan->order[j]];
            memcpy(q->dst, buf + (q->offset - blk->off), q->length);
        }
    }
    pi_free(buf);
    return rc;
}

int pi_ranges_exec(const int *fds, const pagein_range *r, struct pi_rplan *plan, struct pi_crew *crew, unsigned qd) {
    struct exec_ctx x = {fds, r, plan};
    if (crew) return pi_crew_run(crew, plan->nblocks, exec_block, &x);
    return pi_parallel(qd, plan->nblocks, exec_block, &x);
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
    rc = PAGEIN_E_UNSUPPORTED;
    if (opts && (opts->flags & PAGEIN_RANGES_URING)) rc = pi_ranges_exec_uring(fds, reqs, &plan, qd);
    /* without liburing, or where the kernel refuses a ring (seccomp,
     * io_uring_disabled), threads do the same work */
    if (rc == PAGEIN_E_UNSUPPORTED || rc == -ENOSYS || rc == -EPERM) rc = pi_ranges_exec(fds, reqs, &plan, NULL, qd);
    if (st) {
        st->requests = n;
        st->reads = plan.nblocks;
        st->bytes_requested = plan.bytes_requested;
        st->bytes_read = plan.bytes_read;
        st->bytes_wasted = plan.bytes_wasted;
    }
    pi_rplan_free(&plan);
done:
    pi_free(sizes);
    return rc;
}
