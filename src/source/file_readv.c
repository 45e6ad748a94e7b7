/*
 * file_readv.c - many reads of a local file in flight (pi_source_ops.readv
 * of the local-file source).
 *
 * io_uring where present and requests wait (O_DIRECT descriptors, network
 * and FUSE filesystems; local buffered reads are copy-bound and go to
 * threads, see pi_file_readv): one thread, `depth` reads in flight, short
 * reads and EINTR/EAGAIN completions resubmitted for the rest. Buffered reads that
 * cannot complete without blocking (FUSE, NFS, a cold page cache) are
 * served by io_uring's worker threads, which the kernel caps at 4 per CPU
 * for regular files; the cap is raised to `depth` so that a latency-bound
 * filesystem really sees `depth` requests. Without liburing, where the
 * kernel refuses a ring (seccomp, io_uring_disabled) or with
 * PAGEIN_NO_URING=1, `depth` threads each pread (pi_pread_full) one request
 * at a time.
 *
 * Issuing can block: an O_DIRECT read on FUSE pins its destination pages
 * at issue, and pinning faults fresh anonymous memory in (zeroing it, and
 * in a virtual machine whose free memory the host took back, faulting the
 * host's page in too: measured 0.45-0.55 GB/s for huge pages on one CPU).
 * io_uring issues inline, on the one submitting thread, so a
 * blocking issue serialises the requests: the ring counts `depth`
 * submitted while the filesystem sees one at a time. The loop measures the
 * time spent inside io_uring_submit; when it is more than half the time
 * so far (after the first `depth` requests), the rest are flagged
 * IOSQE_ASYNC: the kernel's io-wq workers (up to `depth`, registered
 * below) issue them in parallel and the submitting thread only waits.
 * pi_file_readv_view reports this submit side (pi_readv_view).
 */
#include "file_readv.h"


#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* One blocking read of exactly len bytes at off (short reads and EINTR
 * resumed): the local source's read and each thread's request here. */
int pi_pread_full(int fd, void *buf, uint64_t len, uint64_t off) {
    uint8_t *p = buf;
    while (len) {
        size_t want = len > (1u << 30) ? (1u << 30) : (size_t)len;
        ssize_t got = pread(fd, p, want, (off_t)off);
        if (got < 0) {
            if (errno == EINTR) continue;
            return pi_err(-errno, "pread of %zu bytes at offset %" PRIu64 ": %s", want, off, strerror(errno));
        }
        if (got == 0)
            return pi_err(PAGEIN_E_TRUNCATED, "end of file at offset %" PRIu64 " with %" PRIu64 " bytes still to read",
                          off, len);
        p += got;
        off += (uint64_t)got;
        len -= (uint64_t)got;
    }
    return 0;
}

_Atomic int pi_test_readv_faults;
_Atomic int pi_test_readv_issue_delay_us;

static uint64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Time-weighted count of submitted, not completed requests. */
struct inflight_acc {
    uint64_t t0, last, cur, max;
    double area; /* request-nanoseconds */
};

static void acc_step(struct inflight_acc *a, int delta) {
    uint64_t t = mono_ns();
    a->area += (double)(t - a->last) * (double)a->cur;
    a->last = t;
    a->cur = (uint64_t)((int64_t)a->cur + delta);
    if (a->cur > a->max) a->max = a->cur;
}

static void acc_view(struct inflight_acc *a, struct pi_readv_view *v) {
    acc_step(a, 0);
    double wall = (double)(a->last - a->t0);
    v->mean_inflight = wall > 0 ? a->area / wall : 0;
    v->max_inflight = a->max;
    v->seconds = wall / 1e9;
}

static int eof_error(struct pi_source *s, uint64_t off, uint64_t left) {
    return pi_err(PAGEIN_E_TRUNCATED, "%s: end of file at offset %" PRIu64 " with %" PRIu64 " bytes still to read",
                  s->name ? s->name : "?", off, left);
}

/* A request past the source's size fails as pi_source_read does. */
static int out_of_range(struct pi_source *s, const struct pi_read_req *r) {
    uint64_t end;
    if (!pi_add_overflow(r->off, r->len, &end) && end <= s->size) return 0;
    return pi_err(PAGEIN_E_RANGE, "%s: read [%" PRIu64 ", +%" PRIu64 ") is past the end (%" PRIu64 " bytes)",
                  s->name ? s->name : "?", r->off, r->len, s->size);
}

static void cancel_rest(struct pi_read_req *reqs, size_t from, size_t n) {
    for (size_t i = from; i < n; i++) reqs[i].rc = PAGEIN_E_CANCELLED;
}

/* ---- threads ------------------------------------------------------------ */

struct tjob {
    struct pi_source *s;
    struct pi_read_req *reqs;
    size_t n;
    pi_read_done_fn done;
    void *arg;
    pthread_mutex_t mu;
    size_t next;
    int rc;
    char detail[512];
    struct inflight_acc acc;
};

static void *tworker(void *a) {
    struct tjob *j = a;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        if (j->rc != 0 || j->next >= j->n) {
            pthread_mutex_unlock(&j->mu);
            break;
        }
        size_t i = j->next++;
        acc_step(&j->acc, +1);
        pthread_mutex_unlock(&j->mu);
        struct pi_read_req *r = &j->reqs[i];
        pi_err_clear();
        int rc = out_of_range(j->s, r);
        if (rc == 0) rc = pi_pread_full(j->s->fd, r->buf, r->len, r->off);
        if (rc < 0 && rc != PAGEIN_E_RANGE) { /* name the file: pi_pread_full knows only the descriptor */
            char d[384];
            snprintf(d, sizeof d, "%s", pagein_last_error_detail());
            rc = pi_err(rc, "%s: %s", j->s->name ? j->s->name : "?", d);
        }
        r->rc = rc;
        pthread_mutex_lock(&j->mu);
        acc_step(&j->acc, -1);
        pthread_mutex_unlock(&j->mu);
        int stop = j->done ? j->done(j->arg, r) : 0;
        if (rc < 0 && !stop) stop = rc;
        if (stop) {
            pthread_mutex_lock(&j->mu);
            if (j->rc == 0) {
                j->rc = stop;
                snprintf(j->detail, sizeof j->detail, "%s", pagein_last_error_detail());
            }
            pthread_mutex_unlock(&j->mu);
        }
    }
    return NULL;
}

static int readv_threads(struct pi_source *s, struct pi_read_req *reqs, size_t n, unsigned depth,
                         pi_read_done_fn done, void *arg, struct pi_readv_view *view) {
    if (view) memset(view, 0, sizeof *view);
    if (n == 0) return 0;
    if (!depth) depth = pi_source_facts(s)->depth ? pi_source_facts(s)->depth : 16;
    if (depth > n) depth = (unsigned)n;
    if (depth > 256) depth = 256;
    struct tjob j = {.s = s, .reqs = reqs, .n = n, .done = done, .arg = arg};
    j.acc.t0 = j.acc.last = mono_ns();
    pthread_mutex_init(&j.mu, NULL);
    pthread_t tid[256];
    unsigned started = 0;
    for (unsigned t = 1; t < depth; t++) {
        if (pthread_create(&tid[started], NULL, tworker, &j) != 0) break;
        started++;
    }
    tworker(&j);
    for (unsigned t = 0; t < started; t++) pthread_join(tid[t], NULL);
    pthread_mutex_destroy(&j.mu);
    if (view) acc_view(&j.acc, view);
    cancel_rest(reqs, j.next, n);
    if (j.rc) return pi_err(j.rc, "%s", j.detail);
    return 0;
}

int pi_file_readv_threads(struct pi_source *s, struct pi_read_req *reqs, size_t n, unsigned depth,
                          pi_read_done_fn done, void *arg) {
    return readv_threads(s, reqs, n, depth, done, arg, NULL);
}

/* ---- io_uring ----------------------------------------------------------- */

#ifdef PAGEIN_HAVE_LIBURING
#include <liburing.h>

struct uop {
    uint64_t done;
    int faults; /* test hook: 2 = next completion counts as EINTR, 1 = ask for half */
};

static void submit(struct io_uring *ring, struct pi_source *s, struct pi_read_req *r, struct uop *op, size_t i,
                   int async) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring); /* never NULL: at most qd in flight */
    uint64_t left = r->len - op->done;
    if (op->faults == 1 && left > 1) left = left / 2; /* a short read to finish */
    unsigned len = left > (1u << 30) ? (1u << 30) : (unsigned)left;
    io_uring_prep_read(sqe, s->fd, (uint8_t *)r->buf + op->done, len, r->off + op->done);
    io_uring_sqe_set_data64(sqe, i);
    if (async) io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
}

int pi_file_readv(struct pi_source *s, struct pi_read_req *reqs, size_t n, unsigned depth, pi_read_done_fn done,
                  void *arg) {
    return pi_file_readv_view(s, reqs, n, depth, done, arg, NULL);
}

int pi_file_readv_view(struct pi_source *s, struct pi_read_req *reqs, size_t n, unsigned depth,
                       pi_read_done_fn done, void *arg, struct pi_readv_view *view) {
    if (view) memset(view, 0, sizeof *view);
    if (n == 0) return 0;
    const char *nu = getenv("PAGEIN_NO_URING");
    if (nu && *nu == '1') return readv_threads(s, reqs, n, depth, done, arg, view);
    /* Buffered reads from a local disk or memory are bound by the copy out
     * of the page cache: io_uring completes those inline on this one
     * thread, threads spread the copies over the CPUs (measured: 0.30-0.51
     * s against 0.37-0.90 s for 256 MiB on this machine's ext4). io_uring
     * keeps requests in flight without a thread each where requests wait:
     * O_DIRECT, network and FUSE filesystems. */
    int fl = fcntl(s->fd, F_GETFL);
    int direct_fd = fl >= 0 && (fl & O_DIRECT);
    if (!direct_fd && (pi_source_facts(s)->storage == PI_STORAGE_LOCAL || pi_source_facts(s)->storage == PI_STORAGE_MEMORY))
        return readv_threads(s, reqs, n, depth, done, arg, view);
    if (!depth) depth = pi_source_facts(s)->depth ? pi_source_facts(s)->depth : 16;
    unsigned qd = depth > n ? (unsigned)n : depth;
    if (qd > 4096) qd = 4096;
    struct io_uring ring;
    int e = io_uring_queue_init(qd, &ring, 0);
    if (e < 0) return readv_threads(s, reqs, n, depth, done, arg, view);
    unsigned workers[2] = {qd, qd}; /* bounded (regular files), unbounded */
    io_uring_register_iowq_max_workers(&ring, workers);
    struct uop *ops = pi_calloc(n, sizeof *ops);
    if (!ops) {
        io_uring_queue_exit(&ring);
        return pi_err(-ENOMEM, "%s: out of memory for %zu reads", s->name ? s->name : "?", n);
    }
    int faults = atomic_load(&pi_test_readv_faults);
    unsigned issue_delay = (unsigned)atomic_load(&pi_test_readv_issue_delay_us);
    const char *ae = getenv("PAGEIN_URING_ASYNC");
    int async_mode = ae && (*ae == '0' || *ae == '1') ? *ae - '0' : -1; /* -1: switch when issuing blocks */
    int async = async_mode == 1;
    size_t async_from = 0;
    uint64_t issue_ns = 0;
    struct inflight_acc acc = {0};
    acc.t0 = acc.last = mono_ns();
    size_t next = 0, inflight = 0;
    int rc = 0;
    char detail[512] = "";
    while (inflight > 0 || (rc == 0 && next < n)) {
        while (rc == 0 && next < n && inflight < qd) {
            if ((reqs[next].rc = out_of_range(s, &reqs[next])) < 0) {
                int stop = done ? done(arg, &reqs[next]) : 0;
                rc = stop ? stop : reqs[next].rc;
                snprintf(detail, sizeof detail, "%s", pagein_last_error_detail());
                next++;
                break;
            }
            ops[next].faults = faults ? 2 : 0;
            reqs[next].rc = 0;
            submit(&ring, s, &reqs[next], &ops[next], next, async);
            next++;
            inflight++;
            acc_step(&acc, +1);
        }
        uint64_t ti = mono_ns();
        if (issue_delay) {
            struct timespec d = {0, (long)issue_delay * 1000};
            nanosleep(&d, NULL);
        }
        io_uring_submit(&ring);
        uint64_t te = mono_ns();
        issue_ns += te - ti;
        if (!async && async_mode < 0 && next >= qd && next < n && issue_ns * 2 > te - acc.t0) {
            async = 1; /* issuing blocks this thread: let the kernel's workers issue */
            async_from = next;
        }
        if (inflight == 0) break;
        struct io_uring_cqe *cqe;
        e = io_uring_wait_cqe(&ring, &cqe);
        if (e < 0) {
            if (e == -EINTR) continue;
            if (rc == 0) {
                rc = e;
                snprintf(detail, sizeof detail, "%s: io_uring_wait_cqe: %s", s->name ? s->name : "?", strerror(-e));
            }
            break; /* cannot reap: the buffers stay the caller's problem, never freed under the kernel */
        }
        size_t i = (size_t)io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&ring, cqe);
        inflight--;
        acc_step(&acc, -1);
        struct pi_read_req *r = &reqs[i];
        struct uop *op = &ops[i];
        if (op->faults == 2) { /* test hook: pretend this completion was interrupted */
            op->faults = 1;
            res = -EINTR;
        } else if (op->faults == 1) {
            op->faults = 0;
        }
        if ((res == -EINTR || res == -EAGAIN) && rc == 0) {
            submit(&ring, s, r, op, i, async);
            inflight++;
            acc_step(&acc, +1);
            continue;
        }
        if (res > 0) {
            op->done += (uint64_t)res;
            if (op->done < r->len && rc == 0) { /* short read: ask for the rest */
                submit(&ring, s, r, op, i, async);
                inflight++;
                acc_step(&acc, +1);
                continue;
            }
        }
        if (op->done >= r->len) {
            r->rc = 0;
        } else if (rc != 0) {
            r->rc = PAGEIN_E_CANCELLED; /* stopped after an earlier failure */
        } else {
            r->rc = res < 0 ? pi_err(res, "%s: read of %" PRIu64 " bytes at offset %" PRIu64 ": %s",
                                     s->name ? s->name : "?", r->len - op->done, r->off + op->done, strerror(-res))
                            : eof_error(s, r->off + op->done, r->len - op->done);
        }
        int stop = done ? done(arg, r) : 0;
        if (r->rc < 0 && !stop && rc == 0) stop = r->rc;
        if (stop && rc == 0) {
            rc = stop;
            snprintf(detail, sizeof detail, "%s", pagein_last_error_detail());
        }
    }
    if (view) {
        acc_view(&acc, view);
        view->ring = 1;
        view->issue_seconds = (double)issue_ns / 1e9;
        view->async = async;
        view->async_from = async_from;
    }
    if (inflight == 0) pi_free(ops); /* else leaked on purpose: the kernel may still write */
    io_uring_queue_exit(&ring);
    cancel_rest(reqs, next, n);
    if (rc) return pi_err(rc, "%s", detail);
    return 0;
}

/* Whether the kernel gives this process a ring (pagein.h). */
int pagein_ranges_uring_available(void) {
    struct io_uring ring;
    if (io_uring_queue_init(2, &ring, 0) < 0) return 0;
    io_uring_queue_exit(&ring);
    return 1;
}

#else

int pagein_ranges_uring_available(void) { return 0; }

int pi_file_readv(struct pi_source *s, struct pi_read_req *reqs, size_t n, unsigned depth, pi_read_done_fn done,
                  void *arg) {
    return readv_threads(s, reqs, n, depth, done, arg, NULL);
}

int pi_file_readv_view(struct pi_source *s, struct pi_read_req *reqs, size_t n, unsigned depth,
                       pi_read_done_fn done, void *arg, struct pi_readv_view *view) {
    return readv_threads(s, reqs, n, depth, done, arg, view);
}

#endif
