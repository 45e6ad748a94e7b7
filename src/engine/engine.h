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
    /* Addition (training-data readers): workers kept between runs (core/pool.c
     * crew, owned by the caller, not used by anyone else during the run).
     * NULL: the engine starts its threads for each run, which costs more
     * than the reads themselves for a batch of small samples from the page
     * cache. Used by the worker path (BUFFERS, PAGECACHE); STREAM starts
     * its own threads. */
    struct pi_crew *crew;
    /* Addition: BUFFERS destinations being populated ahead (core/mem.h,
     * pi_mem_fill_start; NULL: none). A request is issued only once its
     * destination's pages are populated, so the reads never take the
     * slow page faults themselves; the batch path hands the local readv
     * windows of populated destinations (at least 8 MiB, then whatever
     * is ready). */
    struct pi_mem_fill *fill;
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
    /* The submit side: requests handed to the kernel (the local
     * readv's ring or threads, the workers' reads) and not yet completed,
     * time-weighted over the run and at most; the seconds the issuing
     * thread spent blocked inside submission; 1 if the ring moved issuing
     * to the kernel's workers because issuing blocked. submit_view is 0
     * where the source's readv does not report (remote sources). */
    int submit_view;
    double submit_mean_inflight;
    uint64_t submit_max_inflight;
    double issue_seconds;
    int issue_async;
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

/* ---- additions by the engine's implementation (src/engine/) -------------
 * The plan the engine runs, exposed so tests can check it exactly and
 * callers (plan, bench) can print it. */

/* Default gap: spans closer than this are read as one request. */
#define PI_ENGINE_DEFAULT_GAP (64ull << 10)

/* The part of request r that belongs to span `span`: bytes
 * [req_off, req_off + len) of the request are bytes [span_off, span_off +
 * len) of the span. */
struct pi_engine_piece {
    size_t span;
    uint64_t span_off, req_off, len;
};

/* One read: [off, off + len) of srcs[src]. pieces [p0, p1) of the plan are
 * the spans it serves. direct: BUFFERS and the request is exactly one
 * piece, so it is read straight into that span's dst (no copy). */
struct pi_engine_req {
    uint32_t src;
    uint64_t off, len;
    size_t p0, p1;
    int direct;
};

struct pi_engine_plan {
    struct pi_engine_req *req;
    size_t nreq;
    struct pi_engine_piece *piece;
    size_t npiece;
    uint64_t bytes;        /* bytes read */
    uint64_t bytes_wasted; /* read but in no span (gaps bridged) */
};

/* Plans spans: validates them (source index, bounds, dst for BUFFERS),
 * coalesces consecutive spans of one source in plan order, each starting
 * at or after the end of the one before with a gap of at most max_gap, and
 * cuts each run into requests at multiples of request_bytes. Requests (and
 * STREAM's pieces) come in plan order.
 * 0, PAGEIN_E_INVALID / PAGEIN_E_RANGE naming the span, or -ENOMEM. */
int pi_engine_plan_make(struct pi_source *const *srcs, size_t nsrc, const struct pi_span *spans, size_t n,
                        enum pi_deliver deliver, uint64_t request_bytes, uint64_t max_gap, struct pi_engine_plan *p);
void pi_engine_plan_free(struct pi_engine_plan *p);

/* What a short probe measured (pi_engine_probe) and what it concluded. */
struct pi_engine_probe_result {
    uint64_t lat1_ns;      /* median latency of one request at depth 1 */
    uint64_t wallN_ns;     /* time for N requests at depth N */
    unsigned n;            /* N */
    uint64_t probe_bytes;  /* size of each probe request */
    double speedup;        /* throughput at depth N / at depth 1 */
};

/* Reads a few probe_bytes requests at depth 1, then n at depth n, spread
 * over the source. 0 or the read's failure. Writes latency_ns, bandwidth and
 * measured into s->facts. */
int pi_engine_probe(struct pi_source *s, uint64_t probe_bytes, unsigned n, struct pi_engine_probe_result *r);

/* The decision alone, from facts (tests inject them): request size and
 * depth for a source whose facts are f; why gets the reason. */
void pi_engine_decide(const struct pi_source_facts *f, const struct pi_engine_probe_result *probe,
                      uint64_t *request_bytes, unsigned *depth, char *why, size_t why_len);

/* Stats into a JSON object (no braces' trailing newline): fields requests,
 * bytes, request_bytes, depth, why, max_inflight, mean_inflight, latency
 * percentiles (ns), size histogram. Returns the length written (snprintf). */
int pi_engine_stats_json(const struct pi_engine_stats *st, char *buf, size_t len);

#endif
