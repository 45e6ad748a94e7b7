/* file_readv.h - the local-file source's readv (file_readv.c): io_uring where
 * the kernel gives a ring, threads otherwise. Set as `.readv` of
 * pi_source_file; usable on any pi_source with fd >= 0. */
#ifndef PAGEIN_FILE_READV_H
#define PAGEIN_FILE_READV_H

#include "source.h"

#include <stdatomic.h>

/* See pi_source_ops.readv. s->fd must be open for reading. */
int pi_file_readv(struct pi_source *s, struct pi_read_req *reqs, size_t n, unsigned depth, pi_read_done_fn done,
                  void *arg);
/* The same with threads only (pread on `depth` threads); the fallback when
 * io_uring is missing or refused, and what PAGEIN_NO_URING=1 forces. */
int pi_file_readv_threads(struct pi_source *s, struct pi_read_req *reqs, size_t n, unsigned depth,
                          pi_read_done_fn done, void *arg);

/* pi_file_readv, also filling *view (may be NULL). PAGEIN_URING_ASYNC=1
 * issues every request through the kernel's workers, =0 never (default:
 * switch when issuing takes more than half the time, see file_readv.c). */
int pi_file_readv_view(struct pi_source *s, struct pi_read_req *reqs, size_t n, unsigned depth,
                       pi_read_done_fn done, void *arg, struct pi_readv_view *view);

/* Test hook: microseconds each io_uring_submit call sleeps before it
 * submits (an issue that blocks, as faulting a cold destination does). */
extern _Atomic int pi_test_readv_issue_delay_us;

/* Test hook: when non-zero, the io_uring path first asks for half of every
 * request (a short read the loop must finish) and treats the first
 * completion of each request as interrupted (EINTR). */
extern _Atomic int pi_test_readv_faults;

#endif
