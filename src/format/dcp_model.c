/* dcp_model.c - a torch Distributed Checkpoint directory as a model: the
 * format table's row for DCP (docs/FORMAT-DCP.md). The directory's
 * `.metadata` (dcp_meta.c) names the `__RANK_N.distcp` data files; each
 * chunk's torch.save blob is parsed from its file's bytes (dcp.c), and the
 * model's table gets one record per item: a tensor stored in one row-major
 * chunk points into its blob (zero copy); a tensor stored in several
 * chunks, or as a strided view, is PAGEIN_TENSOR_ASSEMBLED from one piece
 * per chunk; a non-tensor item is its stored bytes (PAGEIN_TENSOR_BYTES,
 * U8). Buffers in, no I/O. */
#include "dcp.h"

#include <stdio.h>
#include <stdlib.h>

/* What the row keeps between dir_open and dir_free. */
struct dcp_state {
    struct pi_dcp_meta m;
    char *where;           /* the .metadata's path */
    size_t nchunks;
    size_t *base;          /* per item: index of its first chunk in the arrays below */
    uint64_t *data_off;    /* per chunk: the blob's first element, from the blob's start */
    uint64_t *span;        /* per chunk: bytes the strides reach */
    uint8_t *contiguous;   /* per chunk */
    int64_t *strides;      /* per chunk: ndim strides at sbase[chunk] */
    size_t *sbase;
    uint32_t *fstart;      /* per file + 1: the chunks of file f are fchunk[fstart[f] .. fstart[f + 1]) */
    uint32_t *fitem;       /* per position: the item ... */
    uint32_t *fchunk;      /* ... and its chunk */
};

static int is_meta(const uint8_t *buf, size_t len) {
    if (len < 2 || buf[0] != 0x80 || buf[1] < 2 || buf[1] > 5) return 0;
    size_t n = len < 256 ? len : 256;
    static const char m1[] = "checkpoint.metadata";
    for (size_t i = 0; i + sizeof m1 - 1 <= n; i++)
        if (!memcmp(buf + i, m1, sizeof m1 - 1)) return 1;
    return 0;
}

static int dcp_detect(const uint8_t *buf, size_t len, uint64_t size) {
    (void)size;
    return is_meta(buf, len);
}

/* A file opened as this format: a rank's data file holds no table of its
 * own (the .metadata says what is where), so the table stays empty; the
 * .metadata itself is no model file. */
static int dcp_parse(const uint8_t *buf, size_t avail, uint64_t size, uint32_t flags, struct pi_table *t) {
    (void)size, (void)flags, (void)t;
    if (is_meta(buf, avail))
        return pi_err(PAGEIN_E_NOT_MODEL,
                      "a torch Distributed Checkpoint's .metadata, not a model file: open its directory "
                      "(pagein_model_open; CLI: pagein plan DIR, pagein inspect DIR)");
    return 0;
}

static void dcp_free(void *state) {
    struct dcp_state *s = state;
    if (!s) return;
    pi_dcp_meta_free(&s->m);
    pi_free(s->where);
    pi_free(s->base), pi_free(s->data_off), pi_free(s->span), pi_free(s->contiguous);
    pi_free(s->strides), pi_free(s->sbase), pi_free(s->fstart), pi_free(s->fchunk), pi_free(s->fitem);
    pi_free(s);
}

/* Per-chunk arrays, and each file's chunks (a counting sort by file). The
 * counts are the parsed metadata's: its arrays of the same sizes exist. */
static int index_chunks(struct dcp_state *s) {
    const struct pi_dcp_meta *m = &s->m;
    size_t nc = 0, ns = 0;
    for (size_t i = 0; i < m->n; i++) {
        nc += m->items[i].nchunks;
        ns += (size_t)m->items[i].nchunks * m->items[i].ndim;
    }
    RETURN_IF(nc > UINT32_MAX, PAGEIN_E_LIMIT, "%s: %zu chunks", s->where, nc);
    s->nchunks = nc;
    s->base = pi_calloc(m->n ? m->n : 1, sizeof *s->base);
    s->data_off = pi_calloc(nc ? nc : 1, sizeof *s->data_off);
    s->span = pi_calloc(nc ? nc : 1, sizeof *s->span);
    s->contiguous = pi_calloc(nc ? nc : 1, 1);
    s->sbase = pi_calloc(nc ? nc : 1, sizeof *s->sbase);
    s->strides = pi_calloc(ns ? ns : 1, sizeof *s->strides);
    s->fstart = pi_calloc(m->nfiles + 1, sizeof *s->fstart);
    s->fchunk = pi_calloc(nc ? nc : 1, sizeof *s->fchunk);
    s->fitem = pi_calloc(nc ? nc : 1, sizeof *s->fitem);
    if (!s->base || !s->data_off || !s->span || !s->contiguous || !s->sbase || !s->strides || !s->fstart ||
        !s->fchunk || !s->fitem)
        return pi_err(-ENOMEM, "%s: out of memory for %zu chunks", s->where, nc);
    size_t k = 0, sk = 0;
    for (size_t i = 0; i < m->n; i++) {
        s->base[i] = k;
        for (uint32_t j = 0; j < m->items[i].nchunks; j++, k++) {
            s->sbase[k] = sk;
            sk += m->items[i].ndim;
            s->fstart[m->items[i].chunks[j].file + 1]++;
        }
    }
    for (size_t f = 0; f < m->nfiles; f++) s->fstart[f + 1] += s->fstart[f];
    uint32_t *fill = pi_calloc(m->nfiles ? m->nfiles : 1, sizeof *fill);
    if (!fill) return pi_err(-ENOMEM, "out of memory");
    for (size_t i = 0; i < m->n; i++)
        for (uint32_t j = 0; j < m->items[i].nchunks; j++) {
            uint32_t f = m->items[i].chunks[j].file, at = s->fstart[f] + fill[f]++;
            s->fitem[at] = (uint32_t)i;
            s->fchunk[at] = j;
        }
    pi_free(fill);
    return 0;
}

static int dcp_open(const uint8_t *buf, size_t len, const char *where, void **state, const char *const **files,
                    size_t *nfiles) {
    struct dcp_state *s = pi_calloc(1, sizeof *s);
    if (!s) return pi_err(-ENOMEM, "out of memory");
    pi_dcp_meta_init(&s->m);
    int rc = (s->where = pi_strndup(where, strlen(where))) ? 0 : pi_err(-ENOMEM, "out of memory");
    if (rc == 0) rc = pi_dcp_meta_parse(buf, len, where, &s->m);
    if (rc == 0) rc = index_chunks(s);
    if (rc < 0) {
        dcp_free(s);
        return rc;
    }
    *state = s;
    *files = (const char *const *)s->m.files;
    *nfiles = s->m.nfiles;
    return 0;
}

struct span_at {
    uint64_t at, end;
    uint32_t k; /* position in fitem/fchunk */
};

static int span_cmp(const void *a, const void *b) {
    const struct span_at *x = a, *y = b;
    return x->at < y->at ? -1 : x->at > y->at ? 1 : x->end < y->end ? -1 : x->end > y->end;
}

/* No two entries of file f share a byte: a blob read as two items (or two
 * chunks) would be one tensor's bytes under two names, and a built
 * tensor's pieces are given back (release_pieces, assemble.c), which under
 * READ would zero the other's. Entries are inside the file already. */
static int entries_disjoint(struct dcp_state *s, uint32_t f) {
    const struct pi_dcp_meta *m = &s->m;
    size_t n = s->fstart[f + 1] - s->fstart[f];
    if (n < 2) return 0;
    struct span_at *v = pi_calloc(n, sizeof *v);
    if (!v) return pi_err(-ENOMEM, "%s: out of memory for %zu entries", s->where, n);
    size_t k = 0;
    for (uint32_t x = s->fstart[f]; x < s->fstart[f + 1]; x++) {
        const struct pi_dcp_chunk *c = &m->items[s->fitem[x]].chunks[s->fchunk[x]];
        if (c->nbytes) v[k++] = (struct span_at){c->at, c->at + c->nbytes, x};
    }
    qsort(v, k, sizeof *v, span_cmp);
    int rc = 0;
    for (size_t i = 1; i < k && rc == 0; i++)
        if (v[i].at < v[i - 1].end)
            rc = pi_err(PAGEIN_E_BAD_OFFSET, "%s: '%s' (bytes [%llu, %llu)) and '%s' (bytes [%llu, %llu)) overlap in %s",
                        s->where, m->items[s->fitem[v[i - 1].k]].name, (unsigned long long)v[i - 1].at,
                        (unsigned long long)v[i - 1].end, m->items[s->fitem[v[i].k]].name,
                        (unsigned long long)v[i].at, (unsigned long long)v[i].end, m->files[f]);
    pi_free(v);
    return rc;
}

/* Every entry of data file f inside it, then each tensor chunk's blob
 * parsed (zip and pickle of one tensor, checked against its chunk). */
static int dcp_file(void *state, uint32_t f, const uint8_t *base, uint64_t size) {
    struct dcp_state *s = state;
    const struct pi_dcp_meta *m = &s->m;
    RETURN_IF(f >= m->nfiles, PAGEIN_E_INVALID, "%s: no data file %u", s->where, f);
    for (uint32_t k = s->fstart[f]; k < s->fstart[f + 1]; k++) {
        const struct pi_dcp_item *it = &m->items[s->fitem[k]];
        const struct pi_dcp_chunk *c = &it->chunks[s->fchunk[k]];
        RETURN_IF(c->at > size || c->nbytes > size - c->at, PAGEIN_E_BAD_OFFSET,
                  "%s: '%s': chunk %u is bytes [%llu, %llu) of %s, which has %llu bytes", s->where, it->name,
                  s->fchunk[k], (unsigned long long)c->at, (unsigned long long)(c->at + c->nbytes), m->files[f],
                  (unsigned long long)size);
    }
    FORWARD_IF(entries_disjoint(s, f));
    RETURN_IF(!base && s->fstart[f + 1] > s->fstart[f], PAGEIN_E_UNSUPPORTED,
              "%s: %s is not mapped: a checkpoint over a URL is read by `pagein convert` and pagein.dcp, not opened "
              "as a model",
              s->where, m->files[f]);
    for (uint32_t k = s->fstart[f]; k < s->fstart[f + 1]; k++) {
        const struct pi_dcp_item *it = &m->items[s->fitem[k]];
        if (it->is_bytes) continue;
        const struct pi_dcp_chunk *c = &it->chunks[s->fchunk[k]];
        struct pi_dcp_blob b;
        FORWARD_IF(pi_dcp_blob_parse(base + c->at, (size_t)c->nbytes, m, it, c, s->where, &b));
        size_t x = s->base[s->fitem[k]] + s->fchunk[k];
        s->data_off[x] = b.data_off;
        s->span[x] = b.span;
        s->contiguous[x] = (uint8_t)b.contiguous;
        for (uint32_t d = 0; d < it->ndim; d++) s->strides[s->sbase[x] + d] = b.strides[d];
    }
    return 0;
}

/* One record per item, in the state dict's order. */
static int dcp_table(void *state, struct pi_table *t, struct pi_pieces *p) {
    struct dcp_state *s = state;
    const struct pi_dcp_meta *m = &s->m;
    size_t np = 0;
    for (size_t i = 0; i < m->n; i++) {
        const struct pi_dcp_item *it = &m->items[i];
        if (!it->is_bytes && (it->nchunks > 1 || (it->nchunks == 1 && !s->contiguous[s->base[i]]))) np += it->nchunks;
    }
    p->first = pi_arena_alloc(&p->arena, (m->n + 1) * sizeof *p->first);
    p->p = pi_arena_alloc(&p->arena, (np ? np : 1) * sizeof *p->p);
    if (!p->first || !p->p) return pi_err(-ENOMEM, "out of memory");
    p->np = 0;
    for (size_t i = 0; i < m->n; i++) {
        const struct pi_dcp_item *it = &m->items[i];
        p->first[i] = (uint32_t)p->np;
        if (it->is_bytes) {
            const struct pi_dcp_chunk *c = &it->chunks[0];
            uint64_t shape[1] = {c->nbytes};
            pagein_tensor *r = pi_table_add(t, it->name, it->name_len, PAGEIN_DTYPE_U8, 1, shape, c->at, c->nbytes);
            if (!r) return pi_err(-ENOMEM, "out of memory");
            r->file = c->file;
            r->flags |= PAGEIN_TENSOR_BYTES;
            continue;
        }
        uint64_t nb;
        int rc = pagein_dtype_nbytes(it->dtype, it->nelements, &nb);
        if (rc < 0) {
            char pre[768];
            snprintf(pre, sizeof pre, "%s: '%s'", s->where, it->name);
            pi_err_prefix(pre);
            return rc;
        }
        size_t x = s->base[i];
        const struct pi_dcp_chunk *c0 = it->nchunks ? &it->chunks[0] : NULL;
        int view = it->nchunks == 1 && s->contiguous[x];
        uint64_t off = view ? c0->at + s->data_off[x] : c0 ? c0->at : 0;
        pagein_tensor *r = pi_table_add(t, it->name, it->name_len, it->dtype, it->ndim, it->size, off, nb);
        if (!r) return pi_err(-ENOMEM, "out of memory");
        r->file = c0 ? c0->file : 0;
        if (view || !c0) continue;
        r->flags |= PAGEIN_TENSOR_ASSEMBLED;
        for (uint32_t j = 0; j < it->nchunks; j++) {
            const struct pi_dcp_chunk *c = &it->chunks[j];
            struct pi_piece *q = &p->p[p->np++];
            q->file = c->file;
            q->off = c->at + s->data_off[x + j];
            q->span = s->span[x + j];
            /* the model keeps the pieces past dir_free: copies in its arena */
            uint64_t *at = pi_arena_alloc(&p->arena, (it->ndim ? it->ndim : 1) * 3 * sizeof *at);
            if (!at) return pi_err(-ENOMEM, "out of memory");
            int64_t *st = (int64_t *)(at + 2 * it->ndim);
            for (uint32_t d = 0; d < it->ndim; d++) {
                at[d] = c->off[d];
                at[it->ndim + d] = c->len[d];
                st[d] = s->strides[s->sbase[x + j] + d];
            }
            q->at = at;
            q->len = at + it->ndim;
            q->strides = st;
        }
    }
    p->first[m->n] = (uint32_t)p->np;
    return 0;
}

static const char *const dcp_suffixes[] = {NULL};

const struct pi_format pi_format_dcp = {
    .id = PAGEIN_FORMAT_DCP,
    .name = "dcp",
    .detect = dcp_detect,
    .parse = dcp_parse,
    .suffixes = dcp_suffixes,
    .header_read = PI_HEADER_EXTENT, /* no header_size: a data file's open reads nothing */
    .dir_rank = 40,
    .plural = "torch Distributed Checkpoints",
    .dir_marker = PI_DCP_META_NAME,
    .dir_open = dcp_open,
    .dir_file = dcp_file,
    .dir_table = dcp_table,
    .dir_free = dcp_free,
};
