/* ranges_uring.c - the merged reads of a ranges plan issued through
 * io_uring: queue_depth reads in flight from one thread, no thread per
 * request. Built only when liburing is present (mk/data.mk defines
 * PAGEIN_HAVE_LIBURING); otherwise pi_ranges_exec_uring reports that it is
 * unavailable and callers use threads. */
#include "data.h"

#include <inttypes.h>

#ifdef PAGEIN_HAVE_LIBURING
#include <liburing.h>

struct uop {
    uint8_t *buf;
    uint64_t done;
    int own;
};

static void submit(struct io_uring *ring, const int *fds, const struct pi_rblock *b, struct uop *op, size_t i) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring); /* never NULL: at most qd in flight */
    uint64_t left = b->len - op->done;
    unsigned n = left > (1u << 30) ? (1u << 30) : (unsigned)left;
    io_uring_prep_read(sqe, fds[b->file], op->buf + op->done, n, b->off + op->done);
    io_uring_sqe_set_data64(sqe, i);
}

int pi_ranges_exec_uring(const int *fds, const pagein_range *r, struct pi_rplan *plan, unsigned qd) {
    if (plan->nblocks == 0) return 0;
    if (qd > plan->nblocks) qd = (unsigned)plan->nblocks;
    struct io_uring ring;
    int e = io_uring_queue_init(qd, &ring, 0);
    if (e < 0) return pi_err(e, "io_uring_queue_init(%u): %s", qd, strerror(-e));
    struct uop *ops = pi_calloc(plan->nblocks, sizeof *ops);
    if (!ops) {
        io_uring_queue_exit(&ring);
        return pi_err(-ENOMEM, "ranges: out of memory");
    }
    size_t next = 0, inflight = 0;
    int rc = 0;
    while (inflight > 0 || (rc == 0 && next < plan->nblocks)) {
        while (rc == 0 && next < plan->nblocks && inflight < qd) {
            const struct pi_rblock *b = &plan->blocks[next];
            struct uop *op = &ops[next];
            if (b->count == 1) {
                op->buf = r[plan->order[b->first]].dst; /* the whole read is one request */
            } else {
                op->buf = pi_malloc(b->len);
                if (!op->buf) {
                    rc = pi_err(-ENOMEM, "ranges: out of memory for a %" PRIu64 "-byte read", b->len);
                    break;
                }
                op->own = 1;
            }
            submit(&ring, fds, b, op, next);
            next++;
            inflight++;
        }
        io_uring_submit(&ring);
        if (inflight == 0) break;
        struct io_uring_cqe *cqe;
        e = io_uring_wait_cqe(&ring, &cqe);
        if (e < 0) {
            if (e == -EINTR) continue;
            rc = rc ? rc : pi_err(e, "io_uring_wait_cqe: %s", strerror(-e));
            break; /* cannot reap: leaked buffers are better than freeing memory in use */
        }
        size_t i = (size_t)io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&ring, cqe);
        inflight--;
        const struct pi_rblock *b = &plan->blocks[i];
        struct uop *op = &ops[i];
        if (res == -EINTR || res == -EAGAIN) {
            if (rc == 0) {
                submit(&ring, fds, b, op, i);
                inflight++;
            }
            continue;
        }
        if (res < 0) {
            if (rc == 0)
                rc = pi_err(res, "read of %" PRIu64 " bytes at offset %" PRIu64 " of file %" PRIu32 ": %s", b->len,
                            b->off, b->file, strerror(-res));
        } else if (res == 0) {
            if (rc == 0)
                rc = pi_err(PAGEIN_E_TRUNCATED, "end of file %" PRIu32 " at offset %" PRIu64 " with %" PRIu64
                            " bytes still to read", b->file, b->off + op->done, b->len - op->done);
        } else {
            op->done += (uint64_t)res;
            if (op->done < b->len && rc == 0) { /* short read: ask for the rest */
                submit(&ring, fds, b, op, i);
                inflight++;
                continue;
            }
            if (rc == 0 && op->own)
                for (size_t j = b->first; j < b->first + b->count; j++) {
                    const pagein_range *q = &r[plan->order[j]];
                    memcpy(q->dst, op->buf + (q->offset - b->off), q->length);
                }
        }
        if (op->own) {
            pi_free(op->buf);
            op->buf = NULL;
            op->own = 0;
        }
    }
    if (inflight == 0)
        for (size_t i = 0; i < plan->nblocks; i++)
            if (ops[i].own) pi_free(ops[i].buf);
    pi_free(ops);
    io_uring_queue_exit(&ring);
    return rc;
}

int pagein_ranges_uring_available(void) {
    struct io_uring ring;
    if (io_uring_queue_init(2, &ring, 0) < 0) return 0;
    io_uring_queue_exit(&ring);
    return 1;
}

#else

int pi_ranges_exec_uring(const int *fds, const pagein_range *r, struct pi_rplan *plan, unsigned qd) {
    (void)fds, (void)r, (void)plan, (void)qd;
    return pi_err(PAGEIN_E_UNSUPPORTED, "built without liburing");
}

int pagein_ranges_uring_available(void) { return 0; }

#endif
