/* trace.c - see trace.h. */
#include "trace.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void trace_slowfs_stats_path(const char *path, char *out, size_t len) {
    out[0] = 0;
    char *real = realpath(path, NULL);
    if (!real) return;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", real);
    free(real);
    for (;;) {
        char *slash = strrchr(dir, '/');
        if (!slash) break;
        *slash = 0;
        char p[PATH_MAX + 32];
        snprintf(p, sizeof p, "%s/.slowfs-stats", dir[0] ? dir : "");
        if (access(p, R_OK) == 0) {
            snprintf(out, len, "%s", p);
            return;
        }
        if (!dir[0]) break;
    }
}

void trace_snap(const char *stats_path, struct trace_snap *s) {
    memset(s, 0, sizeof *s);
    if (!stats_path || !stats_path[0]) return;
    FILE *f = fopen(stats_path, "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        char key[64];
        uint64_t v;
        if (sscanf(line, "%63s %" SCNu64, key, &v) != 2) continue;
        unsigned long k;
        if (!strcmp(key, "requests")) s->requests = v;
        else if (!strcmp(key, "bytes")) s->bytes = v;
        else if (!strcmp(key, "busy_ns")) s->busy_ns = v;
        else if (!strcmp(key, "peak_inflight")) s->peak = v;
        else if (sscanf(key, "hist_le_%luk", &k) == 1) {
            int b = 0;
            while ((4ul << b) < k && b < TRACE_SIZES - 1) b++;
            s->hist[b] = v;
        } else if (sscanf(key, "hist_gt_%luk", &k) == 1) {
            int b = 0;
            while ((4ul << b) < k && b < TRACE_SIZES - 2) b++;
            s->hist[b + 1] = v;
        } else if (sscanf(key, "lat_le_%luus", &k) == 1) {
            int b = 0;
            while ((1ul << b) < k && b < TRACE_LAT - 1) b++;
            s->lat[b] = v;
        }
    }
    fclose(f);
    s->ok = 1;
}

static double pct(const uint64_t *d, uint64_t n, double q) {
    uint64_t want = (uint64_t)(q * (double)n + 0.5), acc = 0;
    if (want < 1) want = 1;
    for (int b = 0; b < TRACE_LAT; b++) {
        acc += d[b];
        if (acc >= want) return (double)(1ul << b);
    }
    return (double)(1ul << (TRACE_LAT - 1));
}

void trace_from_slowfs(const struct trace_snap *a, const struct trace_snap *b, double secs, struct trace *t) {
    memset(t, 0, sizeof *t);
    if (!a->ok || !b->ok) return;
    t->source = TRACE_SLOWFS;
    t->requests = (double)(b->requests - a->requests);
    t->bytes = (double)(b->bytes - a->bytes);
    for (int i = 0; i < TRACE_SIZES; i++) t->hist[i] = (double)(b->hist[i] - a->hist[i]);
    t->max_inflight = (double)b->peak;
    t->mean_inflight = secs > 0 ? (double)(b->busy_ns - a->busy_ns) / 1e9 / secs : 0;
    uint64_t d[TRACE_LAT], n = 0;
    for (int i = 0; i < TRACE_LAT; i++) n += d[i] = b->lat[i] - a->lat[i];
    if (n) {
        t->p50_us = pct(d, n, 0.50);
        t->p95_us = pct(d, n, 0.95);
        t->p99_us = pct(d, n, 0.99);
    }
}

void trace_from_engine(const pagein_io_stats *st, struct trace *t) {
    memset(t, 0, sizeof *t);
    t->source = TRACE_ENGINE;
    t->requests = (double)st->requests;
    t->bytes = (double)st->bytes;
    for (int i = 0; i < TRACE_SIZES && i < PAGEIN_IO_HIST; i++) t->hist[i] = (double)st->size_hist[i];
    t->max_inflight = (double)st->max_inflight;
    t->mean_inflight = st->mean_inflight;
    t->p50_us = st->lat_p50_ns / 1e3;
    t->p95_us = st->lat_p95_ns / 1e3;
    t->p99_us = st->lat_p99_ns / 1e3;
    t->engine_request_bytes = (double)st->request_bytes;
    t->engine_depth = st->depth;
    t->submit_view = st->submit_view;
    t->submit_mean_inflight = st->submit_mean_inflight;
    t->submit_max_inflight = (double)st->submit_max_inflight;
    t->issue_s = st->issue_seconds;
    t->issue_async = st->issue_async;
    t->mem_view = 1;
    t->mem_fault_s = st->mem_fault_seconds;
    t->mem_wait_s = st->mem_wait_seconds;
    t->mem_populated = (double)st->mem_bytes_populated;
    t->mem_huge = (double)st->mem_bytes_huge;
    t->mem_reused = (double)st->mem_bytes_reused;
    t->mem_pool = (double)st->mem_bytes_pool;
}

void trace_keep_engine(struct trace *t, const struct trace *eng) {
    t->engine_request_bytes = eng->engine_request_bytes;
    t->engine_depth = eng->engine_depth;
    t->submit_view = eng->submit_view;
    t->submit_mean_inflight = eng->submit_mean_inflight;
    t->submit_max_inflight = eng->submit_max_inflight;
    t->issue_s = eng->issue_s;
    t->issue_async = eng->issue_async;
    t->mem_view = eng->mem_view;
    t->mem_fault_s = eng->mem_fault_s;
    t->mem_wait_s = eng->mem_wait_s;
    t->mem_populated = eng->mem_populated;
    t->mem_huge = eng->mem_huge;
    t->mem_reused = eng->mem_reused;
}

void trace_json(FILE *o, const struct trace *t) {
    if (t->source == TRACE_NONE) {
        fprintf(o, "\"trace\": null");
        return;
    }
    int sl = t->source == TRACE_SLOWFS;
    fprintf(o,
            "\"trace\": {\"source\": \"%s\", \"requests\": %.0f, \"bytes\": %.0f, \"mean_request_bytes\": %.0f, "
            "\"max_inflight\": %.0f, \"mean_inflight\": %.2f, \"lat_p50_us\": %.1f, \"lat_p95_us\": %.1f, "
            "\"lat_p99_us\": %.1f, \"size_hist\": {",
            sl ? "slowfs" : "engine", t->requests, t->bytes, t->requests > 0 ? t->bytes / t->requests : 0,
            t->max_inflight, t->mean_inflight, t->p50_us, t->p95_us, t->p99_us);
    int first = 1;
    for (int i = 0; i < TRACE_SIZES; i++) {
        if (!t->hist[i]) continue;
        if (sl) {
            if (i < 11) fprintf(o, "%s\"<=%luK\": %.0f", first ? "" : ", ", 4ul << i, t->hist[i]);
            else fprintf(o, "%s\">4096K\": %.0f", first ? "" : ", ", t->hist[i]);
        } else {
            fprintf(o, "%s\"%luK-%luK\": %.0f", first ? "" : ", ", 4ul << i, 8ul << i, t->hist[i]);
        }
        first = 0;
    }
    fprintf(o, "}");
    if (t->source == TRACE_ENGINE || t->engine_depth > 0)
        fprintf(o, ", \"engine_request_bytes\": %.0f, \"engine_depth\": %.0f", t->engine_request_bytes, t->engine_depth);
    if (t->submit_view) /* the submit side: what the engine handed the kernel, against what storage saw above */
        fprintf(o,
                ", \"submitted_mean_inflight\": %.2f, \"submitted_max_inflight\": %.0f, \"issue_s\": %.4f, "
                "\"issue_async\": %s",
                t->submit_mean_inflight, t->submit_max_inflight, t->issue_s, t->issue_async ? "true" : "false");
    if (t->mem_view) /* the destination's pages: populated ahead (and how long), waited for, reused */
        fprintf(o,
                ", \"memory\": {\"populate_s\": %.4f, \"wait_s\": %.4f, \"bytes_populated\": %.0f, "
                "\"bytes_huge\": %.0f, \"bytes_reused\": %.0f, \"bytes_pool\": %.0f}",
                t->mem_fault_s, t->mem_wait_s, t->mem_populated, t->mem_huge, t->mem_reused, t->mem_pool);
    fprintf(o, "}");
}
