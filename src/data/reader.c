/* reader.c - the sample readers of the first training-data API, rebuilt on
 * the one pipeline (pipeline.c): global and ranges are the pipe's global
 * order (batches of `batch` samples fetched at once, coalesced by the range
 * engine), block its block order (windows of buffer_blocks - 1 groups; the
 * dataset's groups are the blocks), IN_ORDER its id order; each pagein_sample
 * is the first field of the pipe's item (records: the record; Megatron: the
 * tokens). mmap, the baseline, hands out pointers into a read-only mapping
 * in the same order (pagein_pipe_order). No order, thread or buffer of its
 * own: the orders are order.c's. */
#include "data.h"
#include "dsformat.h"
#include "order.h"

#include <inttypes.h>
#include <stdlib.h>
#include <sys/mman.h>

struct pagein_reader {
    pagein_dataset *d;
    pagein_reader_opts o;
    pagein_pipe_opts po;
    pagein_pipe *pipe;      /* global, ranges, block */
    pagein_reader_stats st;
    pagein_pipe_stats done; /* the counters of the pipes of earlier epochs */
    /* mmap */
    uint8_t **maps;
    uint64_t *order;
    uint64_t pos;
};

const char *pagein_reader_kind_name(pagein_reader_kind k) {
    switch (k) {
    case PAGEIN_READER_GLOBAL: return "global";
    case PAGEIN_READER_BLOCK: return "block";
    case PAGEIN_READER_RANGES: return "ranges";
    case PAGEIN_READER_MMAP: return "mmap";
    }
    return "unknown";
}

int pagein_reader_kind_from_name(const char *name) {
    if (!name) return PAGEIN_E_NOT_FOUND;
    for (int k = 0; k <= PAGEIN_READER_MMAP; k++)
        if (strcmp(name, pagein_reader_kind_name((pagein_reader_kind)k)) == 0) return k;
    return PAGEIN_E_NOT_FOUND;
}

static void add_pipe_stats(pagein_reader *r) {
    if (!r->pipe) return;
    pagein_pipe_stats ps;
    pagein_pipe_get_stats(r->pipe, &ps);
    r->done.requests += ps.requests;
    r->done.bytes_read += ps.bytes_read;
    r->done.groups += ps.groups;
    if (ps.memory_peak > r->done.memory_peak) r->done.memory_peak = ps.memory_peak;
}

static int start(pagein_reader *r, uint64_t epoch) {
    r->po.epoch = epoch;
    r->st.epochs_started++;
    if (r->o.kind == PAGEIN_READER_MMAP) {
        r->pos = 0;
        return pagein_pipe_order(r->d, &r->po, r->order, r->d->nsamples);
    }
    if (r->pipe) return pagein_pipe_set_epoch(r->pipe, epoch);
    return pagein_pipe_open(&r->pipe, r->d, &r->po);
}

/* The most bytes the pipe may hold: two units (the one consumed, the one
 * loading) of `window` groups (block, none) or `batch` samples (global),
 * each span of a unit starting 64-byte aligned in the unit's buffer; a
 * unit of 2 MiB or more is a block of the memory policy (pipeline.c:
 * rounded up to 2 MiB, and a kept block taken may be up to a quarter
 * larger), counted whole in memory_peak. */
static uint64_t bound_of(const pagein_reader *r) {
    uint64_t unit = 0, big = 0;
    if (r->po.order == PAGEIN_ORDER_GLOBAL && r->d->addressable) {
        for (uint64_t id = 0; id < r->d->nsamples; id++) {
            pagein_sample_loc l;
            if (pagein_dataset_locate(r->d, id, &l) == 0 && l.length > big) big = l.length;
        }
        unit = (pi_align_up(big, 64) + 64) * r->po.read_batch;
    } else {
        for (size_t s = 0; s < r->d->nfiles; s++)
            for (uint64_t g = 0; g < r->d->gfirst[s + 1] - r->d->gfirst[s]; g++) {
                struct pi_dsgroupinfo gi = {0, 0, 0};
                pi_ds_group(r->d->shards[s], g, &gi);
                if (gi.bytes > big) big = gi.bytes;
            }
        unit = (pi_align_up(big, 64) + 64) * (r->po.order == PAGEIN_ORDER_GLOBAL ? r->po.read_batch : r->po.window);
    }
    if (unit >= (2ull << 20)) unit = pi_align_up(unit, 2ull << 20) + pi_align_up(unit, 2ull << 20) / 4;
    return 2 * unit;
}

static int reader_init(pagein_reader *r) {
    pagein_dataset *d = r->d;
    const pagein_reader_opts *o = &r->o;
    r->po = (pagein_pipe_opts)PAGEIN_PIPE_OPTS_INIT;
    r->po.seed = o->seed;
    r->po.queue_depth = o->queue_depth ? o->queue_depth : 32;
    r->po.read_batch = o->batch ? o->batch : 256;
    r->po.window = o->buffer_blocks > 1 ? o->buffer_blocks - 1 : 1;
    if (o->flags & PAGEIN_READER_IN_ORDER) r->po.order = PAGEIN_ORDER_NONE;
    else r->po.order = o->kind == PAGEIN_READER_BLOCK ? PAGEIN_ORDER_BLOCK : PAGEIN_ORDER_GLOBAL;
    r->st.blocks = d->ngroups;
    if (o->kind != PAGEIN_READER_MMAP) {
        r->st.memory_bound = bound_of(r);
        return start(r, 0);
    }
    r->maps = pi_calloc(d->nfiles, sizeof *r->maps);
    r->order = pi_malloc(d->nsamples * sizeof *r->order);
    if (!r->maps || !r->order) return pi_err(-ENOMEM, "reader: out of memory for %" PRIu64 " samples", d->nsamples);
    for (size_t i = 0; i < d->nfiles; i++) {
        int fd = pagein_dataset_fd(d, i); /* a bounded set's shard: reopened (checked) and kept */
        RETURN_IF(fd < 0, PAGEIN_E_UNSUPPORTED, "%s: the mmap reader maps local files only", d->files[i].path);
        if (!d->files[i].size) continue;
        void *p = mmap(NULL, d->files[i].size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) return pi_err(-errno, "%s: mmap: %s", d->files[i].path, strerror(errno));
        r->maps[i] = p;
    }
    return start(r, 0);
}

void pagein_reader_close(pagein_reader *r) {
    if (!r) return;
    pagein_pipe_close(r->pipe);
    if (r->maps)
        for (size_t i = 0; i < r->d->nfiles; i++)
            if (r->maps[i]) munmap(r->maps[i], r->d->files[i].size);
    pi_free(r->maps);
    pi_free(r->order);
    pi_free(r);
}

int pagein_reader_open(pagein_reader **out, pagein_dataset *d, const pagein_reader_opts *opts) {
    pi_err_clear();
    RETURN_IF(!out || !d, PAGEIN_E_INVALID, "reader: NULL argument");
    pagein_reader_opts o = PAGEIN_READER_OPTS_INIT;
    FORWARD_IF(pi_opts_in(&o, sizeof o, opts, "reader"));
    RETURN_IF((unsigned)o.kind > PAGEIN_READER_MMAP, PAGEIN_E_INVALID, "reader: unknown kind %d", (int)o.kind);
    RETURN_IF(!d->nsamples, PAGEIN_E_INVALID, "reader: the dataset has no samples");
    pagein_reader *r = pi_calloc(1, sizeof *r);
    if (!r) return pi_err(-ENOMEM, "reader: out of memory");
    r->d = d;
    r->o = o;
    int rc = reader_init(r);
    if (rc < 0) {
        pagein_reader_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

int pagein_reader_next(pagein_reader *r, pagein_sample *s) {
    RETURN_IF(!r || !s, PAGEIN_E_INVALID, "reader: NULL argument");
    if (r->o.kind == PAGEIN_READER_MMAP) {
        if (r->pos >= r->d->nsamples) return 0;
        pagein_sample_loc loc;
        uint64_t id = r->order[r->pos];
        FORWARD_IF(pagein_dataset_locate(r->d, id, &loc));
        r->pos++;
        r->st.samples++;
        s->id = id;
        s->data = r->maps[loc.file] ? r->maps[loc.file] + loc.offset : (const void *)"";
        s->length = loc.length;
        return 1;
    }
    pagein_item it;
    int rc = pagein_pipe_next(r->pipe, &it);
    if (rc != 1) return rc;
    r->st.samples++;
    s->id = it.id;
    s->data = it.nfields ? it.fields[0].data : NULL;
    s->length = it.nfields ? it.fields[0].nbytes : 0;
    if (!s->data) s->data = "";
    return 1;
}

int pagein_reader_start_epoch(pagein_reader *r, uint64_t epoch) {
    RETURN_IF(!r, PAGEIN_E_INVALID, "reader: NULL argument");
    add_pipe_stats(r);
    if (r->pipe) {
        /* the pipe's counters start again with the epoch: keep its totals */
        pagein_pipe_close(r->pipe);
        r->pipe = NULL;
    }
    return start(r, epoch);
}

void pagein_reader_get_stats(const pagein_reader *r, pagein_reader_stats *st) {
    if (!st) return;
    memset(st, 0, sizeof *st);
    if (!r) return;
    *st = r->st;
    pagein_pipe_stats ps = r->done, cur = {0};
    if (r->pipe) pagein_pipe_get_stats(r->pipe, &cur);
    ps.requests += cur.requests;
    ps.bytes_read += cur.bytes_read;
    if (cur.memory_peak > ps.memory_peak) ps.memory_peak = cur.memory_peak;
    st->io.requests = ps.requests;
    st->io.reads = ps.requests;
    st->io.bytes_requested = ps.bytes_read;
    st->io.bytes_read = ps.bytes_read;
    st->memory_peak = ps.memory_peak;
}
