/* read.c - the READ strategy: every file read into anonymous memory by the
 * range engine (src/engine/).
 *
 * Each file gets one anonymous mapping rounded to 2 MiB, advised
 * MADV_HUGEPAGE except in a VM that reports free memory to its host
 * (pi_free_page_reporting below); the plan is one span per file (the whole file into its
 * mapping), so every request goes straight into the destination (no copy
 * beyond the read itself, no bounce buffers: peak RSS is the model). The
 * engine chooses the request size and how many requests stay in flight
 * from the source's facts and a short probe (engine.h); opts.chunk_bytes
 * and opts.threads override them, then PAGEIN_REQUEST_BYTES and
 * PAGEIN_QUEUE_DEPTH. On a latency-bound filesystem (FUSE, NFS) that is
 * what turns 1 ms a request into throughput: 32 requests in flight instead
 * of one per thread of a small pool.
 *
 * O_DIRECT (PAGEIN_HINT_DIRECT, or chosen for a measured latency-bound
 * network or FUSE filesystem; PAGEIN_READ_DIRECT=0|1 overrides): the 4 KiB-aligned body of each file is read through
 * an O_DIRECT descriptor (requests at multiples of the request size, which
 * is a 4 KiB multiple; the buffer is page aligned), the unaligned tail
 * buffered. A filesystem that refuses O_DIRECT (at open or on the reads)
 * gets the whole file re-read buffered.
 */
#include "load.h"

#include "../engine/engine.h"

#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <sys/mman.h>
#include <dirent.h>
#include <unistd.h>

_Atomic int pi_test_direct_read_fails;
const char *pi_test_virtio_dir; /* tests: a stand-in for /sys/bus/virtio/devices, read on every call */

/* O_DIRECT sources for the aligned bodies; NULL entries where refused. */
static int read_direct(pagein_model *m, const struct pi_engine_opts *o, struct pi_engine_stats *st) {
    struct pi_source **ds = pi_calloc(m->nfiles, sizeof *ds);
    struct pi_span *sp = pi_calloc(m->nfiles, sizeof *sp);
    int rc = 0;
    if (!ds || !sp) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    size_t n = 0;
    for (size_t i = 0; i < m->nfiles; i++) {
        const pagein_file *f = m->files[i];
        uint64_t body = (uint64_t)f->len & ~4095ull;
        if (!body || f->fd < 0) continue;
        int fd = open(f->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (fd < 0) { /* refused at open: buffered */
            rc = -EINVAL;
            goto out;
        }
        if ((rc = pi_source_from_fd(&ds[i], fd, f->path, 1)) < 0) {
            close(fd);
            goto out;
        }
        ds[i]->size = body;
        sp[n++] = (struct pi_span){(uint32_t)i, 0, body, m->rbuf[i]};
    }
    if (atomic_load(&pi_test_direct_read_fails)) {
        rc = -EINVAL;
        goto out;
    }
    struct pi_engine_opts od = *o;
    if (!od.request_bytes) { /* choose from the buffered source, keep it 4 KiB aligned */
        unsigned d;
        char why[160];
        pi_engine_choose(m->files[0]->src, o, 1, &od.request_bytes, &d, why, sizeof why);
    }
    od.request_bytes = pi_align_up(od.request_bytes, 4096);
    rc = pi_engine_run(ds, m->nfiles, sp, n, &od, st);
out:
    if (ds)
        for (size_t i = 0; i < m->nfiles; i++) pi_source_close(ds[i]);
    pi_free(ds);
    pi_free(sp);
    return rc;
}

/* ---- the destination's pages ------------------------------------------- */

static int first_line(const char *path, char *buf, size_t len) {
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    return ok;
}

/* Whether this machine is a VM whose virtio-balloon reports free memory to
 * the host (VIRTIO_BALLOON_F_REPORTING, feature bit 5). The guest hands the
 * host every free block of page_reporting_order (2 MiB here) or more about
 * 2 s after it is freed, and the first write to such a block faults the
 * host's memory back in. A huge page is always such a block; 4 KiB pages
 * come from smaller free blocks first, which are never reported. Measured
 * on a 2-CPU VM: faulting in 1.3 GB took 9 s as huge pages
 * after an idle pause against 0.8-1.6 s as 4 KiB pages, and `read` of a
 * 1.3 GB model on slowfs 5.9-10.5 s against 0.7-1.0 s. Then READ's buffers
 * get 4 KiB pages. Read once per process. */
int pi_free_page_reporting(void) {
    static _Atomic int known = -1;
    const char *root = pi_test_virtio_dir;
    int k = root ? -1 : atomic_load(&known);
    if (k >= 0) return k;
    if (!root) root = "/sys/bus/virtio/devices";
    k = 0;
    DIR *d = opendir(root);
    struct dirent *e;
    while (d && !k && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[4096 + 300], v[160] = "";
        snprintf(p, sizeof p, "%s/%s/device", root, e->d_name);
        if (!first_line(p, v, sizeof v) || strtol(v, NULL, 0) != 5) continue; /* 5: balloon */
        snprintf(p, sizeof p, "%s/%s/features", root, e->d_name);
        k = first_line(p, v, sizeof v) && strlen(v) > 5 && v[5] == '1';
    }
    if (d) closedir(d);
    if (!pi_test_virtio_dir) atomic_store(&known, k);
    return k;
}

/* A local model whose files are less than 10% in the page cache: read
 * with O_DIRECT, so that the only fresh memory a cold load takes is the
 * destination (buffered, the page cache takes as much again first, and on
 * a VM whose host took free memory back every fresh page is expensive:
 * docs/BENCHMARKS.md, "Fresh memory"). A warm model stays buffered (a copy
 * out of the page cache). PAGEIN_READ_DIRECT=0|1 overrides. */
static int mostly_cold(const pagein_model *m) {
    uint64_t all = 0, res = 0;
    for (size_t i = 0; i < m->nfiles; i++) {
        pagein_residency r;
        if (!m->files[i]->base || pagein_file_residency(m->files[i], 0, m->files[i]->len, &r) < 0) return 0;
        all += r.bytes;
        res += r.resident_bytes;
    }
    return all >= (64u << 20) && res * 10 < all;
}

int pi_model_read_all(pagein_model *m) {
    m->rbuf = pi_calloc(m->nfiles, sizeof *m->rbuf);
    m->rlen = pi_calloc(m->nfiles, sizeof *m->rlen);
    if (!m->rbuf || !m->rlen) return pi_err(-ENOMEM, "out of memory");
    struct pi_source **srcs = pi_calloc(m->nfiles, sizeof *srcs);
    struct pi_span *sp = pi_calloc(m->nfiles, sizeof *sp);
    if (!srcs || !sp) {
        pi_free(srcs);
        pi_free(sp);
        return pi_err(-ENOMEM, "out of memory");
    }
    int rc = 0;
    size_t n = 0;
    struct pi_mem_fill *fill = NULL;
    void **fresh = pi_calloc(m->nfiles, sizeof *fresh);
    size_t *fresh_len = pi_calloc(m->nfiles, sizeof *fresh_len);
    if (!fresh || !fresh_len) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    m->rbuf_keep = 1;
    for (size_t i = 0; i < m->nfiles; i++) {
        pagein_file *f = m->files[i];
        size_t len = f->len, cap = 0;
        int reused = 0, pool = 0;
        void *b = pi_mem_get_read(len, &cap, &reused, &pool);
        if (!b) {
            rc = pi_err(-errno, "%s: cannot allocate %zu bytes: %s", f->path, (size_t)pi_align_up(len ? len : 1, 2u << 20),
                        strerror(errno));
            goto out;
        }
        m->rbuf[i] = b;
        m->rlen[i] = cap;
        if (reused) m->mem.reused += len;
        else if (pool) m->mem.pool += len; /* backed already, or paid once for the process's life */
        else fresh[i] = b, fresh_len[i] = len;
        srcs[i] = f->src;
        if (!f->src) {
            rc = pi_err(PAGEIN_E_UNSUPPORTED, "%s: no source to read from", f->path);
            goto out;
        }
        if (len) sp[n++] = (struct pi_span){(uint32_t)i, 0, len, b};
    }
    struct pi_engine_opts o = {.deliver = PI_DELIVER_BUFFERS,
                               .request_bytes = m->opts.chunk_bytes ? pi_align_up(m->opts.chunk_bytes, 4096) : 0,
                               .depth = m->threads_given,
                               .max_gap = 0,
                               .cancel = &m->cancel};
    rc = -EINVAL;
    int latency = 0; /* a latency-bound filesystem (the engine's probe) */
    int direct = (m->opts.hints & PAGEIN_HINT_DIRECT) != 0;
    const char *env = getenv("PAGEIN_READ_DIRECT");
    if (env && *env) direct = *env == '1';
    else if (!direct && m->files[0]->src && m->files[0]->fd >= 0) {
        /* Latency-bound filesystems (measured: the engine's probe) get
         * O_DIRECT: buffered reads there go out in pieces of the readahead
         * window (128 KiB on FUSE), direct ones as large as the filesystem
         * takes (1 MiB on FUSE, rsize on NFS), so a load pays 8x fewer
         * round trips; and the data is not cached twice (page cache and
         * this copy). Local disks and memory keep buffered reads. */
        struct pi_source *s0 = m->files[0]->src;
        uint64_t r0;
        unsigned d0;
        char w0[160];
        pi_engine_choose(s0, &o, 1, &r0, &d0, w0, sizeof w0);
        latency = pi_source_facts(s0)->measured && pi_source_facts(s0)->latency_ns >= PI_AUTO_RTT_NS &&
                  (pi_source_facts(s0)->storage == PI_STORAGE_FUSE || pi_source_facts(s0)->storage == PI_STORAGE_NETFS);
        direct = latency;
        if (!direct && pi_source_facts(s0)->storage == PI_STORAGE_LOCAL) direct = mostly_cold(m);
    }
    /* Fresh pages populated ahead of the reads, off the I/O path (core/mem.h).
     * One thread when the reads go O_DIRECT to a latency-bound filesystem:
     * there each request pins (faults in) its destination before the
     * filesystem sees it, on the one thread that issues, so fresh pages
     * otherwise keep requests from the wire (slowfs 1 ms: 3-5 in flight of
     * 32 without, 5-19 with; docs/BENCHMARKS.md, "`read` cold on slowfs:
     * destinations populated ahead"). Local disks answer faster than a
     * populating thread helps: none. O_DIRECT forced (PAGEIN_READ_DIRECT=1,
     * the DIRECT hint) skips the probe, so no fill there either.
     * PAGEIN_MEM_THREADS=N overrides. */
    fill = pi_mem_fill_start(fresh, fresh_len, m->nfiles, direct && latency ? 1 : 0, pi_read_pages(m));
    for (size_t i = 0; i < m->nfiles && !fill; i++) pi_mem_advise(fresh[i], fresh_len[i], pi_read_pages(m));
    o.fill = fill;
    if (direct) {
        rc = read_direct(m, &o, &m->io_stats);
        if (rc == 0) {
            /* the unaligned tails, buffered */
            size_t k = 0;
            for (size_t i = 0; i < n; i++) {
                uint64_t body = sp[i].len & ~4095ull;
                if (sp[i].len > body && m->files[sp[i].src]->fd >= 0)
                    sp[k++] = (struct pi_span){sp[i].src, body, sp[i].len - body, (uint8_t *)sp[i].dst + body};
                else if (m->files[sp[i].src]->fd < 0)
                    sp[k++] = sp[i]; /* not a local file: no O_DIRECT */
            }
            n = k;
            struct pi_engine_stats tail;
            rc = pi_engine_run(srcs, m->nfiles, sp, n, &o, &tail);
            m->io_stats.requests += tail.requests;
            m->io_stats.bytes += tail.bytes;
            for (int b = 0; b < PI_ENGINE_HIST; b++) m->io_stats.size_hist[b] += tail.size_hist[b];
            size_t w = strlen(m->io_stats.why);
            if (w + 12 < sizeof m->io_stats.why) snprintf(m->io_stats.why + w, sizeof m->io_stats.why - w, "; O_DIRECT");
        } else if (rc == PAGEIN_E_CANCELLED || rc == -ENOMEM) {
            goto out;
        }
    }
    int even = 0;
    char even_why[160] = "";
    if (rc == -EINVAL && !o.request_bytes && n && m->files[0]->src &&
        pi_source_facts(m->files[0]->src)->storage == PI_STORAGE_REMOTE) {
        /* remote: requests of about the chosen size, cut so that every
         * connection gets the same number (258 MiB at depth 16: 32 x 8.06
         * MiB in two rounds, not 33 x 8 MiB in three, the last with one
         * request in flight) */
        uint64_t R, total = 0;
        unsigned d;
        pi_engine_choose(m->files[0]->src, &o, 1, &R, &d, even_why, sizeof even_why);
        for (size_t i = 0; i < n; i++) total += sp[i].len;
        if (R && d && total > R) {
            uint64_t k = (total + (uint64_t)R * d / 2) / ((uint64_t)R * d);
            uint64_t nreq = (k ? k : 1) * d;
            o.request_bytes = pi_align_up((total + nreq - 1) / nreq, 64u << 10);
            o.depth = d;
            even = 1;
        }
    }
    if (rc == -EINVAL) { /* no O_DIRECT asked, or refused: buffered */
        rc = pi_engine_run(srcs, m->nfiles, sp, n, &o, &m->io_stats);
        if (even)
            snprintf(m->io_stats.why, sizeof m->io_stats.why, "%.100s; cut evenly: %llu KiB x depth %u",
                     even_why, (unsigned long long)(o.request_bytes >> 10), o.depth);
    }
    if (rc < 0) goto out;
    m->has_io_stats = 1;
    /* tensors now point into the copies */
    for (size_t k = 0; k < m->tab.n; k++) {
        pagein_tensor *t = &m->tab.t[k];
        t->data = m->rbuf[t->file] + t->offset;
    }
out:
    pi_mem_fill_end(fill, &m->mem);
    pi_free(fresh);
    pi_free(fresh_len);
    pi_free(srcs);
    pi_free(sp);
    return rc;
}

/* ---- facts and stats for callers (pagein.h) ----------------------------- */

static const char *storage_word(enum pi_storage s) {
    switch (s) {
    case PI_STORAGE_LOCAL: return "local";
    case PI_STORAGE_MEMORY: return "memory";
    case PI_STORAGE_NETFS: return "netfs";
    case PI_STORAGE_FUSE: return "fuse";
    case PI_STORAGE_REMOTE: return "remote";
    default: return "unknown";
    }
}

int pagein_model_io_facts(pagein_model *m, pagein_io_facts *f) {
    RETURN_IF(!m || !f, PAGEIN_E_INVALID, "pagein_model_io_facts: NULL argument");
    memset(f, 0, sizeof *f);
    RETURN_IF(!m->nfiles || !m->files[0]->src, PAGEIN_E_INVALID, "pagein_model_io_facts: model has no source");
    struct pi_source *s = m->files[0]->src;
    struct pi_auto_facts af;
    memset(&af, 0, sizeof af);
    pi_auto_measure(m, &af);
    snprintf(f->storage, sizeof f->storage, "%s", storage_word(pi_source_facts(s)->storage));
    snprintf(f->fs_type, sizeof f->fs_type, "%s", pi_source_facts(s)->fs_type);
    f->read_ahead_kb = pi_source_facts(s)->read_ahead_kb;
    f->rotational = pi_source_facts(s)->rotational;
    f->measured = af.measured;
    f->lat1_us = af.lat1_ns / 1e3;
    f->depth_speedup = af.speedup;
    f->probe_depth = af.probe_depth;
    struct pi_engine_opts o = {.request_bytes = m->opts.chunk_bytes ? pi_align_up(m->opts.chunk_bytes, 4096) : 0,
                               .depth = m->threads_given};
    pi_engine_choose(s, &o, 0, &f->request_bytes, &f->depth, f->engine_why, sizeof f->engine_why);
    return 0;
}

int pagein_model_io_stats(const pagein_model *m, pagein_io_stats *st) {
    RETURN_IF(!m || !st, PAGEIN_E_INVALID, "pagein_model_io_stats: NULL argument");
    memset(st, 0, sizeof *st);
    RETURN_IF(!m->has_io_stats && m->streamed, PAGEIN_E_UNSUPPORTED,
              "prefetch reads a model without a mapping layer by layer, one engine run each: no whole-model trace");
    RETURN_IF(!m->has_io_stats, PAGEIN_E_UNSUPPORTED, "%s pages in through the mapping: no engine trace",
              m->st ? m->st->name : "unknown");
    const struct pi_engine_stats *e = &m->io_stats;
    st->requests = e->requests;
    st->bytes = e->bytes;
    st->request_bytes = e->request_bytes;
    st->depth = e->depth;
    st->max_inflight = e->max_inflight;
    st->mean_inflight = e->mean_inflight;
    st->lat_p50_ns = e->lat_p50_ns;
    st->lat_p95_ns = e->lat_p95_ns;
    st->lat_p99_ns = e->lat_p99_ns;
    for (int i = 0; i < PAGEIN_IO_HIST && i < PI_ENGINE_HIST; i++) st->size_hist[i] = e->size_hist[i];
    st->seconds = e->seconds;
    snprintf(st->why, sizeof st->why, "%s", e->why);
    st->submit_view = e->submit_view;
    st->submit_mean_inflight = e->submit_mean_inflight;
    st->submit_max_inflight = e->submit_max_inflight;
    st->issue_seconds = e->issue_seconds;
    st->issue_async = e->issue_async;
    st->mem_fault_seconds = m->mem.fault_s;
    st->mem_wait_seconds = m->mem.wait_s;
    st->mem_bytes_populated = m->mem.populated;
    st->mem_bytes_huge = m->mem.huge;
    st->mem_bytes_reused = m->mem.reused;
    st->mem_bytes_pool = m->mem.pool;
    return 0;
}
