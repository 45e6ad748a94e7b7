/* trace.h - the access trace of one benchmark run (requests, their sizes,
 * requests in flight, latency): from slowfs's counters when the data lives
 * on a slowfs mount, from the range engine's own accounting otherwise
 * (pagein_model_io_stats), or nothing (local page faults: only major
 * faults tell). Shared by bench load and bench shuffle. */
#ifndef PAGEIN_CLI_TRACE_H
#define PAGEIN_CLI_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "pagein.h"

#define TRACE_SIZES 16 /* size histogram buckets */
#define TRACE_LAT 24   /* slowfs latency buckets: <= 1 us << i */

enum { TRACE_NONE = 0, TRACE_SLOWFS, TRACE_ENGINE };

struct trace_snap {
    int ok;
    uint64_t requests, bytes, busy_ns, peak;
    uint64_t hist[TRACE_SIZES], lat[TRACE_LAT];
};

struct trace {
    int source;
    double requests, bytes, max_inflight, mean_inflight, p50_us, p95_us, p99_us;
    double hist[TRACE_SIZES]; /* slowfs: <= 4 KiB << i (last: more); engine: [4 KiB << i, 4 KiB << (i+1)) */
    double engine_request_bytes, engine_depth;
    /* the submit side (engine, pagein_io_stats): submitted, not completed */
    int submit_view;
    double submit_mean_inflight, submit_max_inflight, issue_s;
    int issue_async;
    /* the memory the data went into (engine: pagein_io_stats.mem_*) */
    int mem_view;
    double mem_fault_s, mem_wait_s, mem_populated, mem_huge, mem_reused, mem_pool;
};

/* The .slowfs-stats file of the slowfs mount holding path, or "" (not on slowfs). */
void trace_slowfs_stats_path(const char *path, char *out, size_t len);
/* Reads the counters (opening the file also starts a new peak window). */
void trace_snap(const char *stats_path, struct trace_snap *s);
/* The run between a and b, which took secs. */
void trace_from_slowfs(const struct trace_snap *a, const struct trace_snap *b, double secs, struct trace *t);
void trace_from_engine(const pagein_io_stats *st, struct trace *t);
/* Keeps the engine's choice and submit side in t (a slowfs trace of the same run). */
void trace_keep_engine(struct trace *t, const struct trace *eng);
/* Prints `"trace": {...}` (or null) without a leading comma. */
void trace_json(FILE *o, const struct trace *t);

#endif
