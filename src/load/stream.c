/* stream.c - anonymous model buffers read through the range engine: the
 * buffers' fill row (pi_fill_buffers, at the end), which the prefetch pager
 * runs over files that have no mapping (remote sources), and the page size
 * of READ's and PREFETCH's buffers. Calls only range.c below it.
 *
 * The memory is READ's (read.c): one anonymous mapping per file, rounded to
 * 2 MiB, tensor data pointing into it; but nothing is read at open. The
 * pager (pager.c) loads each layer group by reading exactly that group's
 * tensor ranges (sorted by offset, coalesced by the engine) into the
 * buffer, one group after another in cursor order, so the consumer
 * computes on layer i while layer i + 1 arrives (double buffering; up to
 * `ahead` groups in front of the cursor). A released group (budget) gets
 * MADV_DONTNEED on the page-aligned interior of each of its tensors: a page
 * holding bytes of another tensor is never dropped, so only whole pages of
 * this group's tensors return to zero, and a later wait reads them again.
 *
 * Anonymous memory that was never read (or was released) reads as zeros,
 * where a mapping would fault the file's bytes in. So every accessor that
 * hands out tensor bytes first makes them valid (pi_pager_ensure_tensor):
 * pagein_model_tensor_data, pagein_tensor_copy (through the file's ensure
 * hook), pagein_model_load_tensors, the Python views.
 *
 * With a budget the buffers are MADV_NOHUGEPAGE, so that what is resident
 * is what was read (a 2 MiB folio would bring in neighbouring groups'
 * zeros and could not be partly dropped without a split); without one
 * huge pages, as READ's (core/mem.h; PAGEIN_READ_HUGEPAGE=0 forces 4 KiB).
 * With PAGEIN_MEM_THREADS=N each group's destinations are populated ahead
 * of its reads on the memory policy's threads.
 *
 * Request size: each group is one engine run; its requests are cut so the
 * group fills the engine's depth (a 24 MiB group at depth 16 is read as
 * 16 x 1.5 MiB ranges, not 3 x 8 MiB), at least 1 MiB, at most what the
 * engine would choose for the source. opts.chunk_bytes and opts.threads
 * override size and depth, as for READ.
 */
#include "load.h"

#include "../engine/engine.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* The page size of READ's and PREFETCH's buffers: measured (core/mem.h)
 * unless PAGEIN_READ_HUGEPAGE forces it or the HUGEPAGE hint asks. */
enum pi_mem_pages pi_read_pages(const pagein_model *m) {
    const char *hp = getenv("PAGEIN_READ_HUGEPAGE");
    if (hp && (*hp == '0' || *hp == '1')) return *hp == '1' ? PI_MEM_PAGES_HUGE : PI_MEM_PAGES_SMALL;
    return (m->opts.hints & PAGEIN_HINT_HUGEPAGE) ? PI_MEM_PAGES_HUGE : PI_MEM_PAGES_MEASURE;
}

int pi_stream_init(pagein_model *m) {
    m->rbuf = pi_calloc(m->nfiles, sizeof *m->rbuf);
    m->rlen = pi_calloc(m->nfiles, sizeof *m->rlen);
    if (!m->rbuf || !m->rlen) return pi_err(-ENOMEM, "out of memory");
    for (size_t i = 0; i < m->nfiles; i++) {
        pagein_file *f = m->files[i];
        RETURN_IF(!f->src, PAGEIN_E_UNSUPPORTED, "%s: no source to read from", f->path);
        size_t cap = (size_t)pi_align_up(f->len ? f->len : 1, 2u << 20);
        /* MAP_NORESERVE: a model larger than memory (what a budget is for;
         * auto picks this then) must get its address range; only what the
         * budget lets in is ever touched */
        int reused;
        void *b = pi_mem_get(f->len, &cap, 1, &reused);
        if (!b)
            return pi_err(-errno, "%s: cannot reserve %zu bytes of address space: %s (vm.overcommit_memory=2 counts "
                                  "it all; use strategy read on a model that fits, or allow overcommit)",
                          f->path, cap, strerror(errno));
        madvise(b, cap, !m->opts.budget_bytes && pi_read_pages(m) != PI_MEM_PAGES_SMALL ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
        m->rbuf[i] = b;
        m->rlen[i] = cap;
    }
    for (size_t k = 0; k < m->tab.n; k++) {
        pagein_tensor *t = &m->tab.t[k];
        t->data = m->rbuf[t->file] + t->offset;
    }
    m->streamed = 1;
    return 0;
}

int pi_stream_read(pagein_model *m, struct pi_range *r, size_t n) {
    qsort(r, n, sizeof *r, pi_range_cmp);
    struct pi_source **srcs = pi_calloc(m->nfiles, sizeof *srcs);
    struct pi_span *sp = pi_malloc((n ? n : 1) * sizeof *sp);
    int rc = 0;
    if (!srcs || !sp) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < m->nfiles; i++) srcs[i] = m->files[i]->src;
    size_t k = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!r[i].len) continue;
        sp[k++] = (struct pi_span){r[i].file, r[i].off, r[i].len, m->rbuf[r[i].file] + r[i].off};
        total += r[i].len;
    }
    if (!k) goto out;
    struct pi_engine_opts o = {.deliver = PI_DELIVER_BUFFERS,
                               .request_bytes = m->opts.chunk_bytes ? pi_align_up(m->opts.chunk_bytes, 4096) : 0,
                               .depth = m->threads_given,
                               .max_gap = UINT64_MAX,
                               .cancel = &m->cancel};
    unsigned share = atomic_load(&m->stream_share);
    if (!o.depth && share > 1) { /* groups read at once share the source's connections */
        uint64_t rb0;
        unsigned d0;
        char why0[160];
        pi_engine_choose(srcs[sp[0].src], &o, 0, &rb0, &d0, why0, sizeof why0);
        o.depth = d0 / share ? d0 / share : 1;
    }
    if (!o.request_bytes) {
        uint64_t rb;
        unsigned d;
        char why[160];
        pi_engine_choose(srcs[sp[0].src], &o, 0, &rb, &d, why, sizeof why);
        uint64_t want = d ? pi_align_up((total + d - 1) / d, 1u << 20) : rb;
        o.request_bytes = want < rb ? want : rb;
        if (o.request_bytes < (1u << 20)) o.request_bytes = 1u << 20;
    }
    /* the group's destinations populated ahead of the reads (core/mem.h):
     * a remote read's copy into a fresh page would take the page fault */
    void **dp = pi_malloc(k * sizeof *dp);
    size_t *dl = pi_malloc(k * sizeof *dl);
    struct pi_mem_fill *fill = NULL;
    if (dp && dl) {
        for (size_t i = 0; i < k; i++) dp[i] = sp[i].dst, dl[i] = sp[i].len;
        fill = pi_mem_fill_start(dp, dl, k, 0, PI_MEM_PAGES_ASIS);
    }
    o.fill = fill;
    rc = pi_engine_run(srcs, m->nfiles, sp, k, &o, NULL);
    pi_mem_fill_end(fill, &m->mem);
    pi_free(dp);
    pi_free(dl);
out:
    pi_free(srcs);
    pi_free(sp);
    return rc;
}

void pi_stream_release_group(pagein_model *m, int32_t g) {
    uint64_t ps = (uint64_t)sysconf(_SC_PAGESIZE);
    for (size_t i = m->lstart[g]; i < m->lstart[g + 1]; i++) {
        const pagein_tensor *t = m->lt[i];
        /* rbuf is page aligned, so file offsets and buffer offsets share
         * their page boundaries: whole pages inside the tensor only */
        uint64_t a = pi_align_up(t->offset, ps);
        uint64_t e = (t->offset + t->nbytes) & ~(ps - 1);
        if (e > a) madvise(m->rbuf[t->file] + a, e - a, MADV_DONTNEED);
    }
}

/* ---- the buffers' fill row (the pager) ---------------------------------- */

static int buf_prepare(pagein_model *m, uint64_t budget) {
    (void)budget;
    return pi_stream_init(m);
}

static int buf_load(pagein_model *m, struct pi_range *r, size_t n, uint64_t budget) {
    (void)budget;
    return pi_stream_read(m, r, n);
}

/* One item per group of a pass, on its own thread, so the groups of the
 * window are read concurrently (each group's requests fill the engine's
 * depth; up to 4 groups are read at once, lowest first, and their runs
 * split the depth: stream_share). A group the cursor passed before its
 * read started is given back unread. */
struct buf_pass {
    pagein_model *m;
    const int32_t *groups;
    _Atomic int32_t *cursor;
    const struct pi_group_hooks *h;
};

static int buf_item(void *ctx, size_t i) {
    struct buf_pass *bp = ctx;
    pagein_model *m = bp->m;
    int32_t g = bp->groups[i];
    int rc = PAGEIN_E_CANCELLED;
    if (!atomic_load(&m->cancel) && (!bp->cursor || g >= atomic_load(bp->cursor)))
        rc = pi_fill_group(&pi_fill_buffers, m, g, 0);
    bp->h->done(bp->h->arg, g, rc);
    return 0;
}

static int buf_pass(pagein_model *m, const int32_t *groups, size_t ng, uint64_t budget, _Atomic int32_t *cursor,
                    const struct pi_group_hooks *h) {
    (void)budget;
    struct buf_pass bp = {m, groups, cursor, h};
    unsigned share = ng < 4 ? (unsigned)ng : 4;
    atomic_store(&m->stream_share, share);
    pi_parallel(share, ng, buf_item, &bp);
    atomic_store(&m->stream_share, 1);
    return 0;
}

const struct pi_fill pi_fill_buffers = {
    .name = "buffers",
    .prepare = buf_prepare,
    .load = buf_load,
    .pass = buf_pass,
    .release = pi_stream_release_group,
    .buffers = 1,
};
