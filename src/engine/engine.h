/*
 * engine.h - the one range engine (docs/ARCHITECTURE.md, docs/LOADING.md).
 *
 * Input: a plan of spans (source, offset, length), in the order the
 * consumer wants them (tensors in compute order, samples in reader order,
 * a whole file for warm/hash/pull). The engine coalesces neighbouring spans
 * (gap threshold), splits the result into requests sized for the source,
 * keeps a target number in flight (through pi_source_readv: io_uring or
 * threads for local files, the connection pool for remote ones) and
 * delivers the bytes:
 *
 *  - PI_DELIVER_BUFFERS: into each span's dst (caller buffers, anonymous
 *    memory). Every byte of every span is written exactly once.
 *  - PI_DELIVER_PAGECACHE: nothing is copied; the reads only make the
 *    pages resident (local files: the page cache behind the mapping).
 *  - PI_DELIVER_STREAM: into a bounded ring of `ring` buffers of
 *    `request_bytes` each (double-buffered when ring >= 2); for every
 *    filled piece consume(arg, span index, offset inside the span, data,
 *    len) is called on the engine's consumer thread while later requests
 *    are in flight; the buffer is reused when consume returns. With
 *    in_order set, pieces are consumed in plan order (hash, pull); else
 *    as they complete (GPU staging). Memory is bounded by
 *    ring * request_bytes whatever the plan's size.
 *
 * Request size and depth: explicit options win, then the environment
 * (PAGEIN_REQUEST_BYTES, PAGEIN_QUEUE_DEPTH), then the source's facts,
 * then a short probe of the first requests (pi_engine_choose), then the
 * defaults. pi_engine_stats records what was chosen and what happened.
 *
 * Errors: the first failing request stops the plan; the error names the
 * source, offset and length; no partial result is reported as success.
 * Cancellation: *cancel (may be NULL) non-zero stops at the next request
 * with PAGEIN_E_CANCELLED.
 */
#ifndef PAGEIN_ENGINE_H
#define PAGEIN_ENGINE_H

#include "../source/source.h"

#include <stdatomic.h>

enum pi_deliver { PI_DELIVER_BUFFERS = 0, PI_DELIVER_PAGECACHE, PI_DELIVER_STREAM };

struct pi_span {
    uint32_t src;  /* index into the sources array */
    uint64_t off, len;
    void *dst;     /* PI_DELIVER_BUFFERS: len bytes, caller-owned */
};

typedef int (*pi_consume_fn)(void *arg, size_t span, uint64_t span_off, const void *data, uint64_t len);

struct pi_engine_opts {
    enum pi_deliver deliver;
    uint64_t request_bytes; /* 0: chosen (see above) */
    unsigned depth;         /* 0: chosen */
    uint64_t max_gap;       /* coalesce spans whose gap is at most this; UINT64_MAX = default */
    unsigned ring;          /* STREAM: buffers in the ring (0 = depth + 1) */
    int in_order;           /* STREAM: consume in plan order */
    pi_consume_fn consume;  /* STREAM */
    void *arg;
    _Atomic int *cancel;
};

#define PI_ENGINE_HIST 16 /* request-size histogram: bucket i = [4 KiB << i, 4 KiB << (i+1)) */

struct pi_engine_stats {
    uint64_t requests, bytes, bytes_wasted;
    uint64_t request_bytes; /* chosen request size */
    unsigned depth;         /* chosen depth */
    char why[160];          /* how they were chosen ("env", "facts: fuse, 1.0 ms", "probe: ...") */
    uint64_t max_inflight;
    double mean_inflight;
    uint64_t lat_p50_ns, lat_p95_ns, lat_p99_ns;
    uint64_t size_hist[PI_ENGINE_HIST];
    double seconds;
};

/* Runs the plan. srcs[nsrc] are open sources; spans[n] index into them.
 * Returns 0 or the first failure. stats may be NULL. */
int pi_engine_run(struct pi_source *const *srcs, size_t nsrc, const struct pi_span *spans, size_t n,
                  const struct pi_engine_opts *o, struct pi_engine_stats *stats);

/* Request size and depth for a source from options, environment, facts and
 * (when probe is set and the facts say nothing) a short probe of reads at
 * depth 1 and depth N on the source. Writes the reason into why. */
void pi_engine_choose(struct pi_source *s, const struct pi_engine_opts *o, int probe, uint64_t *request_bytes,
                      unsigned *depth, char *why, size_t why_len);

#endif
