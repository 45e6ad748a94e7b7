/* ds_arrow.c - the Arrow IPC row of the dataset-format table (dsformat.h):
 * .arrow streams and files (the parser: arrow.c, docs/FORMAT-ARROW.md) and
 * Hugging Face `datasets` save_to_disk directories (state.json).
 *
 * Groups are record batches (empty batches are skipped). open() reads the
 * schema and the batch index once (a file's footer, or one pass over a
 * stream's message headers) and keeps each batch's metadata, so ranges()
 * knows, without I/O, the body bytes of the selected columns of a batch:
 * one range per run of adjacent column spans. decode() checks and inflates
 * those columns (arrow.c); fields() hands out pointers into them.
 *
 * Columns map onto fields: scalars are one value; a list of numbers is
 * ndim 1 (shape -1); FixedSizeList nests into fixed dimensions, under at
 * most one variable-length list (shape [-1, n, m]), handed out in place
 * (booleans unpacked to one byte each in decode). Every other column (a
 * struct, a map, lists of strings, lists of lists, lists of structs,
 * decimals, dates, times, timestamps, durations, fixed-size binaries) is
 * one nested or annotated value built from the columns at fields() time
 * (tree_value), the same shapes as the Parquet row's; so is a row of an
 * in-place list that holds a null element. */
#include "arrow.h"
#include "dsformat.h"

#include <stdio.h>

struct afield {
    uint32_t top;           /* top-level column */
    uint32_t depth;         /* struct levels below the top column */
    uint32_t *path;         /* depth child indexes down to the leaf */
    int var;                /* 1: the leaf is a (Large)List (dimension 0 varies) */
    uint32_t nfixed;        /* FixedSizeList levels below (or at) the leaf */
    uint64_t inner;         /* elements per outer element (product of the fixed sizes) */
    uint8_t kind;           /* element kind (arrow) */
    int tree;               /* 1: the column is built as a nested value (tree_value) */
};

struct ashard {
    struct pi_arrow a;
    struct afield *f;       /* sh->ncols */
    uint32_t *sel;          /* selected top-level columns, in schema order */
    size_t nsel;
    size_t *gb;             /* group -> batch (non-empty batches) */
    size_t fcap;            /* of f */
    struct pi_arena arena;
};

struct agroup {
    struct pi_arrow_batch b;
    size_t bi;
    const struct pi_arrow_col **leaf;  /* per field: the leaf column */
    const struct pi_arrow_col **elem;  /* per field: the column of the values (innermost) */
    const struct pi_arrow_col ***chain; /* per field: depth + 1 columns, top to leaf */
    uint8_t **bools;                    /* per bool field: one byte per value of elem */
};

/* ---- open ------------------------------------------------------------------ */
/* Reads through the shard's source with a small read-ahead block: a stream
 * is indexed with one request per message (its prefix and metadata). */
struct rdctx {
    struct pi_source *src;
    uint8_t *blk;
    uint64_t off, len, cap;
};
static int rd(void *ctx, uint64_t off, void *dst, size_t len) {
    struct rdctx *c = ctx;
    if (c->blk && off >= c->off && len <= c->len && off - c->off <= c->len - len) {
        memcpy(dst, c->blk + (off - c->off), len);
        return 0;
    }
    if (len >= c->cap || !c->blk) return pi_source_read(c->src, dst, len, off);
    if (off > c->src->size || c->src->size - off < len)
        return pi_err(PAGEIN_E_TRUNCATED, "%s: %zu bytes at %llu past the end", c->src->name, len, (unsigned long long)off);
    uint64_t n = PI_MIN(c->cap, c->src->size - off);
    FORWARD_IF(pi_source_read(c->src, c->blk, n, off));
    c->off = off;
    c->len = n;
    memcpy(dst, c->blk, len);
    return 0;
}

static int dstype(const struct pi_arrow_field *f, uint8_t *type, uint8_t *width) {
    switch (f->kind) {
    case PI_ARROW_NULL: *type = PI_DT_NULL, *width = 0; return 0;
    case PI_ARROW_BOOL: *type = PI_DT_BOOL, *width = 1; return 0;
    case PI_ARROW_INT: *type = f->is_signed ? PI_DT_INT : PI_DT_UINT, *width = f->bits / 8; return 0;
    case PI_ARROW_FLOAT: *type = PI_DT_FLOAT, *width = f->bits / 8; return 0;
    case PI_ARROW_UTF8:
    case PI_ARROW_LARGE_UTF8: *type = PI_DT_UTF8, *width = 0; return 0;
    case PI_ARROW_BINARY:
    case PI_ARROW_LARGE_BINARY: *type = PI_DT_BINARY, *width = 0; return 0;
    }
    return -1;
}

static int unsupported(struct pi_dsshard *sh, const struct pi_arrow_field *top, const struct pi_arrow_field *f,
                       const char *why) {
    return pi_ds_err(sh, PAGEIN_E_UNSUPPORTED, UINT64_MAX, UINT64_MAX, top->path, "%s %s: %s",
                     f == top ? "type" : "element", pi_arrow_kind_name(f->kind, f->bits, f->is_signed), why);
}

/* Adds the fields of column f (path so far in pth/depth) to the shard. */
/* 1 when column f is handed out in place: a scalar number, boolean, string
 * or binary, or (Large)List / FixedSizeList nests of numbers. */
static int in_place(const struct pi_arrow_field *f) {
    const struct pi_arrow_field *e = f;
    int list = 0;
    if (e->kind == PI_ARROW_LIST || e->kind == PI_ARROW_LARGE_LIST) e = &e->children[0], list = 1;
    while (e->kind == PI_ARROW_FIXED_LIST) e = &e->children[0], list = 1;
    if (e->logical || (e->kind == PI_ARROW_INT && e->bits > 64)) return 0;
    switch (e->kind) {
    case PI_ARROW_BOOL:
    case PI_ARROW_INT:
    case PI_ARROW_FLOAT: return 1;
    case PI_ARROW_NULL:
    case PI_ARROW_UTF8:
    case PI_ARROW_BINARY:
    case PI_ARROW_LARGE_UTF8:
    case PI_ARROW_LARGE_BINARY: return !list;
    }
    return 0;
}

/* The next column of the shard (sh->cols and A->f grow together) for
 * field f of top-level field top: zeroed, named by f's path, nullable;
 * counted in sh->ncols by the caller once it is complete. */
static int new_col(struct pi_dsshard *sh, struct ashard *A, uint32_t top, const struct pi_arrow_field *f, size_t *cap,
                   struct pi_dscol **c, struct afield **af) {
    if (sh->ncols >= PI_DS_MAX_COLS)
        return pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, UINT64_MAX, NULL, "more than %u fields", PI_DS_MAX_COLS);
    if (pi_grow((void **)&sh->cols, cap, sh->ncols + 1, sizeof *sh->cols) < 0 ||
        pi_grow((void **)&A->f, &A->fcap, sh->ncols + 1, sizeof *A->f) < 0)
        return pi_err(-ENOMEM, "%s: out of memory", sh->name);
    *c = &sh->cols[sh->ncols];
    *af = &A->f[sh->ncols];
    memset(*c, 0, sizeof **c);
    memset(*af, 0, sizeof **af);
    (*c)->name = f->path;
    (*c)->nullable = 1;
    (*af)->top = top;
    return 0;
}

static int add_fields(struct pi_dsshard *sh, struct ashard *A, uint32_t top, const struct pi_arrow_field *f,
                      uint32_t *pth, uint32_t depth, size_t *cap) {
    const struct pi_arrow_field *topf = &A->a.schema.fields[top];
    struct pi_dscol *c;
    struct afield *af;
    if (depth == 0 && !in_place(f)) { /* one nested or annotated value */
        FORWARD_IF(new_col(sh, A, top, f, cap, &c, &af));
        const struct pi_arrow_field *v = f; /* the values' type: a dictionary's, a union's first member's */
        for (int k = 0; k < PI_ARROW_MAX_DEPTH && (v->kind == PI_ARROW_DICT || (v->kind == PI_ARROW_UNION && v->nchildren));
             k++)
            v = v->kind == PI_ARROW_DICT ? v->dict_value : &v->children[0];
        if (dstype(v, &c->type, &c->width) < 0)
            c->type = v->kind == PI_ARROW_STRUCT || v->kind == PI_ARROW_INTERVAL ? PI_DT_STRUCT
                      : v->kind == PI_ARROW_MAP ? PI_DT_MAP
                      : (v->kind == PI_ARROW_LIST || v->kind == PI_ARROW_LARGE_LIST || v->kind == PI_ARROW_FIXED_LIST)
                          ? PI_DT_LIST
                          : PI_DT_BINARY;
        c->logical = v->logical, c->unit = v->unit, c->utc = v->utc, c->precision = v->precision, c->scale = v->scale;
        af->tree = 1;
        af->kind = f->kind;
        sh->ncols++;
        return 0;
    }
    if (f->kind == PI_ARROW_STRUCT) {
        if (depth >= PI_ARROW_MAX_DEPTH) return unsupported(sh, topf, f, "nested too deep");
        for (uint32_t i = 0; i < f->nchildren; i++) {
            pth[depth] = i;
            FORWARD_IF(add_fields(sh, A, top, &f->children[i], pth, depth + 1, cap));
        }
        return 0;
    }
    FORWARD_IF(new_col(sh, A, top, f, cap, &c, &af));
    af->depth = depth;
    if (depth) {
        af->path = pi_arena_alloc(&A->arena, depth * sizeof *af->path);
        if (!af->path) return pi_err(-ENOMEM, "%s: out of memory", sh->name);
        memcpy(af->path, pth, depth * sizeof *af->path);
    }
    const struct pi_arrow_field *e = f;
    af->inner = 1;
    if (e->kind == PI_ARROW_LIST || e->kind == PI_ARROW_LARGE_LIST) {
        af->var = 1;
        c->shape[c->ndim++] = -1;
        e = &e->children[0];
    }
    while (e->kind == PI_ARROW_FIXED_LIST) {
        if (c->ndim >= PI_DS_MAX_DIMS) return unsupported(sh, topf, f, "more than 8 dimensions");
        c->shape[c->ndim++] = e->list_size;
        af->nfixed++;
        if (pi_mul_overflow(af->inner, (uint64_t)e->list_size, &af->inner))
            return unsupported(sh, topf, f, "too many elements");
        e = &e->children[0];
    }
    if (dstype(e, &c->type, &c->width) < 0 || (c->ndim && (c->type == PI_DT_UTF8 || c->type == PI_DT_BINARY ||
                                                            c->type == PI_DT_NULL)))
        return unsupported(sh, topf, e, c->ndim ? "lists of this type are not representable as an array"
                                                : "not representable as a field");
    af->kind = e->kind;
    sh->ncols++;
    return 0;
}

/* Frees a shard's implementation and its columns (open's failure path, close). */
static void ashard_free(struct pi_dsshard *sh, struct ashard *A) {
    pi_free(sh->cols);
    sh->cols = NULL;
    pi_free(A->f);
    pi_free(A->sel);
    pi_free(A->gb);
    pi_arena_free(&A->arena);
    pi_arrow_close(&A->a);
    pi_free(A);
}

/* Every batch's rows against the bytes of its message (metadata and body:
 * a batch of Null columns has no body), and their sum (dscount.c). */
static int arrow_counts(const struct pi_dsshard *sh, const struct pi_arrow *a) {
    uint64_t sum = 0;
    for (size_t i = 0; i < a->nbatches; i++) {
        const struct pi_arrow_batch_ref *r = &a->batches[i];
        FORWARD_IF(pi_ds_count_check(sh, i, r->rows, r->meta_len + r->body_len, "its record batch message"));
        FORWARD_IF(pi_ds_count_add(sh, i, &sum, r->rows));
    }
    return 0;
}

/* Marks the fields name selects under f (short path sp: the names of
 * struct members, list and map levels left out): 2 on the field it names
 * (its short or full path), 1 on the fields above it. 1 if any. */
static int mark(struct pi_arrow_field *f, const char *sp, const char *name, int depth) {
    if (!strcmp(sp, name) || !strcmp(f->path, name)) {
        f->sel = 2;
        return 1;
    }
    if (f->kind == PI_ARROW_DICT || depth > PI_ARROW_MAX_DEPTH) return 0;
    int hit = 0;
    for (uint32_t i = 0; i < f->nchildren; i++) {
        const struct pi_arrow_field *c = &f->children[i];
        char *csp = f->kind == PI_ARROW_STRUCT ? pi_malloc(strlen(sp) + c->name_len + 2) : NULL;
        if (csp) sprintf(csp, "%s.%s", sp, c->name);
        hit |= mark(&f->children[i], csp ? csp : sp, name, depth + 1);
        pi_free(csp);
    }
    if (hit && !f->sel) f->sel = 1;
    return hit;
}

/* The short paths of f and the struct members under it, for an error. */
static void names_of(const struct pi_arrow_field *f, const char *sp, char ***v, size_t *n, size_t *cap, int depth) {
    if (*n < 4096 && pi_grow((void **)v, cap, *n + 1, sizeof **v) == 0 && ((*v)[*n] = pi_strndup(sp, strlen(sp))))
        (*n)++;
    if (f->kind == PI_ARROW_DICT || depth > 8) return;
    for (uint32_t i = 0; i < f->nchildren; i++) {
        const struct pi_arrow_field *c = &f->children[i];
        char *csp = f->kind == PI_ARROW_STRUCT ? pi_malloc(strlen(sp) + c->name_len + 2) : NULL;
        if (csp) sprintf(csp, "%s.%s", sp, c->name);
        if (csp || f->kind != PI_ARROW_STRUCT) names_of(c, csp ? csp : sp, v, n, cap, depth + 1);
        pi_free(csp);
    }
}

static int select_name(struct pi_dsshard *sh, struct pi_arrow_schema *s, const char *name) {
    int first = -1, hit = 0;
    for (uint32_t i = 0; i < s->nfields; i++) {
        if (strcmp(s->fields[i].name, name) != 0) continue;
        if (first >= 0) /* two columns of one name: which one is meant cannot be said by name */
            return pi_ds_err(sh, PAGEIN_E_INVALID, UINT64_MAX, UINT64_MAX, name,
                             "names two columns (%d and %u): select by a name that is one column's", first, i);
        first = (int)i;
    }
    for (uint32_t i = 0; i < s->nfields; i++) hit |= mark(&s->fields[i], s->fields[i].name, name, 0);
    if (hit) return 0;
    char **v = NULL;
    size_t n = 0, cap = 0;
    for (uint32_t i = 0; i < s->nfields; i++) names_of(&s->fields[i], s->fields[i].name, &v, &n, &cap, 0);
    int rc = pi_ds_col_missing(sh, name, (const char *const *)v, n);
    for (size_t i = 0; i < n; i++) pi_free(v[i]);
    pi_free(v);
    return rc;
}

static int arrow_open(struct pi_dsshard *sh, const struct pi_dsopen *o) {
    struct ashard *A = pi_calloc(1, sizeof *A);
    if (!A) return pi_err(-ENOMEM, "%s: out of memory", sh->name);
    struct rdctx rc_ = {.src = sh->src, .cap = 1 << 16};
    rc_.blk = pi_malloc(rc_.cap);
    int rc = rc_.blk ? pi_arrow_open(&A->a, sh->name, sh->src->size, rd, &rc_) : -ENOMEM;
    pi_free(rc_.blk);
    if (rc >= 0) rc = arrow_counts(sh, &A->a);
    if (rc < 0) goto fail;
    A->a.max_batch_bytes = PI_DS_MAX_DECODE;
    /* columns=: the one rule (dscolumns.c): a top-level name, or a dotted
     * path through struct members (or the full path with list levels) */
    struct pi_arrow_schema *s = &A->a.schema;
    for (size_t k = 0; rc == 0 && o->columns && k < o->ncolumns; k++) rc = select_name(sh, s, o->columns[k]);
    size_t cap = 0;
    uint32_t pth[PI_ARROW_MAX_DEPTH + 1];
    A->sel = rc == 0 ? pi_calloc(s->nfields ? s->nfields : 1, sizeof *A->sel) : NULL;
    if (rc == 0 && !A->sel) rc = pi_err(-ENOMEM, "%s: out of memory", sh->name);
    for (uint32_t i = 0; rc == 0 && i < s->nfields; i++) {
        if (o->columns && !s->fields[i].sel) continue;
        rc = add_fields(sh, A, i, &s->fields[i], pth, 0, &cap);
        if (rc == 0) A->sel[A->nsel++] = i;
    }
    if (rc < 0) goto fail;
    A->gb = pi_calloc(A->a.nbatches ? A->a.nbatches : 1, sizeof *A->gb);
    if (!A->gb) {
        rc = pi_err(-ENOMEM, "%s: out of memory", sh->name);
        goto fail;
    }
    for (size_t i = 0; i < A->a.nbatches; i++)
        if (A->a.batches[i].rows) A->gb[sh->ngroups++] = i;
    pi_ds_shard_set(sh, A, sh->cols, sh->ncols, A->a.nrows);
    return 0;
fail:
    ashard_free(sh, A);
    sh->ncols = 0;
    sh->ngroups = 0;
    return rc;
}

static void arrow_close(struct pi_dsshard *sh) {
    if (!sh->impl) return;
    ashard_free(sh, sh->impl);
    sh->impl = NULL;
}

/* ---- groups ------------------------------------------------------------------ */
/* The body pieces of group g: the selected columns' spans, adjacent ones
 * (at most 64 bytes apart: padding) merged. Writes min(n, cap), returns n.
 * off is relative to the body. */
static int spans(const struct pi_dsshard *sh, uint64_t g, struct pi_dsrange *r, size_t cap) {
    const struct ashard *A = sh->impl;
    if (g >= sh->ngroups) return pi_ds_err(sh, PAGEIN_E_RANGE, g, UINT64_MAX, NULL, "no such group");
    size_t bi = A->gb[g], n = 0;
    struct pi_dsrange cur = {0, 0};
    int have = 0;
    for (size_t k = 0; k < A->nsel; k++) {
        uint64_t off, len;
        int rc = pi_arrow_col_span(&A->a, bi, A->sel[k], &off, &len);
        if (rc < 0) return rc;
        if (!len) continue;
        if (have && off >= cur.off && off <= cur.off + cur.len + 64) {
            cur.len = PI_MAX(cur.len, off + len - cur.off);
            continue;
        }
        if (have) {
            if (n < cap) r[n] = cur;
            n++;
        }
        cur = (struct pi_dsrange){off, len};
        have = 1;
    }
    if (have) {
        if (n < cap) r[n] = cur;
        n++;
    }
    return (int)n;
}

static int arrow_group(const struct pi_dsshard *sh, uint64_t g, struct pi_dsgroupinfo *gi) {
    const struct ashard *A = sh->impl;
    if (g >= sh->ngroups) return pi_ds_err(sh, PAGEIN_E_RANGE, g, UINT64_MAX, NULL, "no such group");
    const struct pi_arrow_batch_ref *r = &A->a.batches[A->gb[g]];
    gi->first = r->first_row;
    gi->count = r->rows;
    gi->bytes = 0;
    struct pi_dsrange rr[16];
    int n = spans(sh, g, rr, PI_ARRAY_LEN(rr));
    if (n < 0) return n;
    if ((size_t)n <= PI_ARRAY_LEN(rr)) {
        for (int k = 0; k < n; k++) gi->bytes += rr[k].len;
    } else {
        gi->bytes = r->body_len; /* an upper bound; ranges() has the exact list */
    }
    return 0;
}

static int arrow_ranges(const struct pi_dsshard *sh, uint64_t g, struct pi_dsrange *r, size_t cap) {
    const struct ashard *A = sh->impl;
    int n = spans(sh, g, r, cap);
    if (n < 0) return n;
    const struct pi_arrow_batch_ref *b = &A->a.batches[A->gb[g]];
    for (size_t k = 0; k < (size_t)n && k < cap; k++) r[k].off += b->offset + b->meta_len;
    return n;
}

static void agroup_free(struct agroup *G, size_t nf) {
    if (!G) return;
    pi_arrow_batch_free(&G->b);
    if (G->bools)
        for (size_t k = 0; k < nf; k++) pi_free(G->bools[k]);
    pi_free(G->bools);
    pi_free(G->leaf);
    pi_free(G->elem);
    if (G->chain)
        for (size_t k = 0; k < nf; k++) pi_free(G->chain[k]);
    pi_free(G->chain);
    pi_free(G);
}

static int arrow_decode(const struct pi_dsshard *sh, struct pi_dsgroup *grp) {
    const struct ashard *A = sh->impl;
    uint64_t g = grp->g;
    int n = spans(sh, g, NULL, 0);
    if (n < 0) return n;
    if ((size_t)n != grp->nbufs)
        return pi_ds_err(sh, PAGEIN_E_INVALID, g, UINT64_MAX, NULL, "%zu buffers for %d ranges", grp->nbufs, n);
    struct pi_dsrange *rr = pi_calloc((size_t)n + 1, sizeof *rr);
    struct pi_arrow_seg *seg = pi_calloc((size_t)n + 1, sizeof *seg);
    struct agroup *G = pi_calloc(1, sizeof *G);
    size_t nf = sh->ncols;
    int rc = 0;
    if (!rr || !seg || !G) {
        rc = pi_err(-ENOMEM, "%s: out of memory", sh->name);
        goto done;
    }
    spans(sh, g, rr, (size_t)n);
    for (int k = 0; k < n; k++) {
        if (grp->bufs[k].len != rr[k].len) {
            rc = pi_ds_err(sh, PAGEIN_E_INVALID, g, UINT64_MAX, NULL, "buffer %d has %llu bytes, range %llu", k,
                           (unsigned long long)grp->bufs[k].len, (unsigned long long)rr[k].len);
            goto done;
        }
        seg[k] = (struct pi_arrow_seg){rr[k].off, rr[k].len, grp->bufs[k].p};
    }
    G->bi = A->gb[g];
    rc = pi_arrow_decode_segs(&A->a, G->bi, seg, (size_t)n, A->sel, A->nsel, &G->b);
    if (rc < 0) goto done;
    G->leaf = pi_calloc(nf ? nf : 1, sizeof *G->leaf);
    G->elem = pi_calloc(nf ? nf : 1, sizeof *G->elem);
    G->chain = pi_calloc(nf ? nf : 1, sizeof *G->chain);
    G->bools = pi_calloc(nf ? nf : 1, sizeof *G->bools);
    if (!G->leaf || !G->elem || !G->chain || !G->bools) {
        rc = pi_err(-ENOMEM, "%s: out of memory", sh->name);
        goto done;
    }
    uint64_t unpacked = 0;
    for (size_t k = 0; k < nf; k++) {
        const struct afield *af = &A->f[k];
        const struct pi_arrow_col *c = &G->b.cols[af->top];
        G->chain[k] = pi_malloc((af->depth + 1) * sizeof **G->chain);
        if (!G->chain[k]) {
            rc = pi_err(-ENOMEM, "%s: out of memory", sh->name);
            goto done;
        }
        G->chain[k][0] = c;
        G->leaf[k] = c;
        if (af->tree) continue; /* built from the columns at fields() time */
        for (uint32_t d = 0; d < af->depth; d++) G->chain[k][d + 1] = c = &c->children[af->path[d]];
        G->leaf[k] = c;
        if (af->var) c = &c->children[0];
        for (uint32_t d = 0; d < af->nfixed; d++) c = &c->children[0];
        G->elem[k] = c;
        if (af->kind == PI_ARROW_BOOL) {
            if (c->length > PI_DS_MAX_DECODE - unpacked) {
                rc = pi_ds_err(sh, PAGEIN_E_LIMIT, g, UINT64_MAX, sh->cols[k].name, "%llu booleans",
                               (unsigned long long)c->length);
                goto done;
            }
            unpacked += c->length;
            G->bools[k] = pi_malloc(c->length ? c->length : 1);
            if (!G->bools[k]) {
                rc = pi_err(-ENOMEM, "%s: out of memory", sh->name);
                goto done;
            }
            for (uint64_t i = 0; i < c->length; i++) G->bools[k][i] = (c->values[i >> 3] >> (i & 7)) & 1;
        }
    }
done:
    pi_free(rr);
    pi_free(seg);
    if (rc < 0) {
        agroup_free(G, nf);
        return rc;
    }
    grp->impl = G;
    return 0;
}

/* An Interval value at p (unit 0 YEAR_MONTH, 1 DAY_TIME, 2
 * MONTH_DAY_NANO) as the STRUCT x of its members, written at out[*n ...]. */
static void interval_value(unsigned unit, const uint8_t *p, uint32_t col, pagein_field *out, size_t cap,
                           pagein_field *x, size_t *n) {
    static const char *const names[3][3] = {{"months"}, {"days", "milliseconds"}, {"months", "days", "nanoseconds"}};
    static const uint8_t widths[3][3] = {{4}, {4, 4}, {4, 4, 8}};
    unsigned nm = unit == 0 ? 1 : unit == 1 ? 2 : 3;
    x->child = (uint32_t)*n, x->nchild = nm;
    for (unsigned k = 0, off = 0; k < nm; off += widths[unit][k], k++) {
        pagein_field m;
        memset(&m, 0, sizeof m);
        m.name = names[unit][k], m.col = col, m.type = PI_DT_INT, m.width = widths[unit][k];
        m.data = p + off, m.nbytes = m.width;
        if (*n + k < cap) out[*n + k] = m;
    }
    *n += nm;
}

/* The value of column c at row into out[at] (when at < cap), its children
 * at out[*n ...] (counted past cap). */
static void tree_value(const struct pi_arrow_col *c, uint64_t row, const char *name, uint32_t col, pagein_field *out,
                       size_t cap, size_t at, size_t *n, int depth, int whole) {
    static const uint8_t bools[2] = {0, 1};
    const struct pi_arrow_field *f = c->f;
    whole |= f->sel != 1; /* columns= named this field, or nothing below it */
    pagein_field x;
    memset(&x, 0, sizeof x);
    x.name = name;
    x.col = col;
    x.logical = f->logical, x.unit = f->unit, x.utc = f->utc, x.precision = f->precision, x.scale = f->scale;
    struct pi_arrow_val v;
    int null = pi_arrow_get(c, row, &v) < 0 || v.null || depth > PI_ARROW_MAX_DEPTH + 2;
    switch (f->kind) {
    case PI_ARROW_NULL: x.type = PI_DT_NULL, null = 1; break;
    case PI_ARROW_BOOL: x.type = PI_DT_BOOL, x.width = 1, x.data = &bools[v.i & 1], x.nbytes = 1; break;
    case PI_ARROW_INT:
        x.type = f->is_signed ? PI_DT_INT : PI_DT_UINT, x.width = f->bits / 8;
        x.data = c->values + row * x.width, x.nbytes = x.width;
        break;
    case PI_ARROW_FLOAT:
        x.type = PI_DT_FLOAT, x.width = f->bits / 8, x.data = c->values + row * x.width, x.nbytes = x.width;
        break;
    case PI_ARROW_UTF8:
    case PI_ARROW_LARGE_UTF8: x.type = PI_DT_UTF8, x.data = v.n ? v.p : (const void *)"", x.nbytes = v.n; break;
    case PI_ARROW_BINARY:
    case PI_ARROW_LARGE_BINARY:
    case PI_ARROW_FIXED_BINARY: x.type = PI_DT_BINARY, x.data = v.n ? v.p : (const void *)"", x.nbytes = v.n; break;
    case PI_ARROW_STRUCT: { /* its members, or those columns= selected */
        x.type = PI_DT_STRUCT;
        if (null) break;
        uint32_t m = 0;
        for (uint32_t k = 0; k < f->nchildren; k++) m += whole || f->children[k].sel;
        x.child = (uint32_t)*n, x.nchild = m;
        *n += m;
        for (uint32_t k = 0, j = 0; k < f->nchildren; k++)
            if (whole || f->children[k].sel)
                tree_value(&c->children[k], row, f->children[k].name, col, out, cap, x.child + j++, n, depth + 1, whole);
        break;
    }
    case PI_ARROW_DICT:
    case PI_ARROW_UNION: { /* the value the index or the type id names */
        const struct pi_arrow_col *vc;
        uint64_t vr;
        if (null || pi_arrow_resolve(c, row, &vc, &vr) < 0) {
            x.type = PI_DT_NULL, null = 1;
            break;
        }
        tree_value(vc, vr, name, col, out, cap, at, n, depth + 1, 1);
        return;
    }
    case PI_ARROW_INTERVAL: /* a STRUCT of its int members */
        x.type = PI_DT_STRUCT;
        if (null) break;
        interval_value(f->unit, v.p, col, out, cap, &x, n);
        break;
    default: /* lists and maps */
        x.type = f->kind == PI_ARROW_MAP ? PI_DT_MAP : PI_DT_LIST;
        if (null || !v.child) break;
        x.child = (uint32_t)*n, x.nchild = (uint32_t)v.n;
        *n += v.n;
        for (uint64_t k = 0; k < v.n; k++)
            tree_value(v.child, v.first + k, v.child->f->name, col, out, cap, x.child + k, n, depth + 1, whole);
        break;
    }
    if (null) x.null = 1, x.data = NULL, x.nbytes = 0, x.nchild = 0;
    if (at < cap) out[at] = x;
}

static int arrow_fields(const struct pi_dsshard *sh, const struct pi_dsgroup *grp, uint64_t i, struct pi_dsfield *f,
                        size_t cap) {
    const struct ashard *A = sh->impl;
    const struct agroup *G = grp->impl;
    if (i >= G->b.rows) return pi_ds_err(sh, PAGEIN_E_RANGE, grp->g, i, NULL, "sample of %llu", (unsigned long long)G->b.rows);
    size_t n = sh->ncols; /* nested values' children go after the top-level fields */
    for (size_t k = 0; k < sh->ncols; k++) {
        const struct afield *af = &A->f[k];
        const struct pi_dscol *c = &sh->cols[k];
        pagein_field tmp, *o = k < cap ? &f[k] : &tmp;
        if (af->tree) {
        tree:
            tree_value(G->leaf[k], i, c->name, (uint32_t)k, f, cap, k, &n, 0, 0);
            continue;
        }
        memset(o, 0, sizeof *o);
        o->name = c->name;
        o->col = (uint32_t)k;
        o->type = c->type;
        o->width = c->width;
        o->ndim = c->ndim;
        int null = 0;
        for (uint32_t d = 0; d <= af->depth && !null; d++) null = pi_arrow_is_null(G->chain[k][d], i);
        if (null) {
            o->null = 1;
            continue;
        }
        const struct pi_arrow_col *leaf = G->leaf[k], *e = G->elem[k];
        uint64_t first, count; /* in elements of e */
        if (c->ndim == 0) {
            first = i;
            count = 1;
            if (c->type == PI_DT_UTF8 || c->type == PI_DT_BINARY) {
                struct pi_arrow_val v;
                pi_arrow_get(leaf, i, &v);
                o->data = v.n ? v.p : (const void *)"";
                o->nbytes = v.n;
                continue;
            }
        } else {
            /* [first, first + count) of column cc at each level, from the
             * list's offsets (or this row) down through the fixed sizes;
             * a null element at any level below the row has no value */
            const struct pi_arrow_col *cc = leaf;
            int check = af->var;
            if (af->var) {
                struct pi_arrow_val v;
                pi_arrow_get(leaf, i, &v);
                first = v.first;
                count = v.n;
                o->shape[0] = v.n;
                cc = v.child;
            } else {
                first = i;
                count = 1;
            }
            for (uint32_t d = (uint32_t)af->var; d < c->ndim; d++) o->shape[d] = (uint64_t)c->shape[d];
            for (uint32_t lv = 0;; lv++) {
                if (check && cc->validity)
                    for (uint64_t j = 0; j < count; j++)
                        if (pi_arrow_is_null(cc, first + j)) goto tree; /* this row as a nested value */
                if (lv == af->nfixed) break;
                check = 1;
                first *= (uint64_t)cc->f->list_size;
                count *= (uint64_t)cc->f->list_size;
                cc = &cc->children[0];
            }
        }
        if (e->f->kind == PI_ARROW_NULL) {
            o->null = 1;
            continue;
        }
        o->data = e->f->kind == PI_ARROW_BOOL ? G->bools[k] + first : e->values + first * c->width;
        o->nbytes = count * c->width;
    }
    if (n > INT32_MAX) return pi_ds_err(sh, PAGEIN_E_LIMIT, grp->g, i, NULL, "%zu fields", n);
    return (int)n;
}

static void arrow_group_free(const struct pi_dsshard *sh, struct pi_dsgroup *grp) {
    agroup_free(grp->impl, sh->ncols);
    grp->impl = NULL;
}

/* ---- detection and save_to_disk directories ------------------------------ */
/* Names an Arrow IPC file or stream goes by (Feather v2 is the file format). */
static const char *const arrow_suffixes[] = {".arrow", ".arrows", ".feather", ".ipc", ".stream", NULL};

static int arrow_detect(const char *name, const uint8_t *h, size_t nh, const uint8_t *t, size_t nt, uint64_t size) {
    if (nh >= 6 && memcmp(h, "ARROW1", 6) == 0) return (nt >= 6 && memcmp(t + nt - 6, "ARROW1", 6) == 0) ? 2 : 1;
    if (nh >= 8 && pi_fb_ld32(h) == 0xFFFFFFFFu && pi_fb_ld32(h + 4) > 0 && pi_fb_ld32(h + 4) <= PI_ARROW_MAX_META &&
        pi_fb_ld32(h + 4) <= size)
        return 2;
    for (size_t k = 0; name && arrow_suffixes[k]; k++)
        if (pi_ends_with(name, arrow_suffixes[k])) return 1;
    return 0;
}

static int arrow_index(const char *dir, const uint8_t *buf, size_t len, struct pi_dsindex *ix) {
    char **files;
    size_t n;
    char nm[4200];
    snprintf(nm, sizeof nm, "%s/state.json", dir ? dir : ".");
    int rc = pi_arrow_state_files((const char *)buf, len, nm, &files, &n);
    if (rc < 0) return rc;
    for (size_t i = 0; i < n && rc == 0; i++) rc = pi_dsindex_add(ix, files[i], strlen(files[i]), NULL);
    pi_arrow_names_free(files, n);
    return rc;
}

static void arrow_index_free(struct pi_dsindex *ix) { (void)ix; }

static const char *const arrow_index_names[] = {"state.json", NULL};
static const char *const arrow_aliases[] = {"feather", "ipc", NULL};

/* The codec of a shard's compressed batches ("none" when none is): for
 * pagein_dataset_describe (ds_describe.c). */
const char *pi_ds_arrow_codec(const struct pi_dsshard *sh);
const char *pi_ds_arrow_codec(const struct pi_dsshard *sh) {
    const struct ashard *A = sh->impl;
    int c = A ? A->a.compressed : 0;
    return c == 1 ? "lz4_frame" : c == 2 ? "zstd" : "none";
}

const struct pi_dsformat pi_dsformat_arrow = {
    .name = "arrow",
    .aliases = arrow_aliases,
    .suffixes = arrow_suffixes,
    .head_bytes = 8,
    .tail_bytes = 6,
    .detect = arrow_detect,
    .index_names = arrow_index_names,
    .index = arrow_index,
    .index_free = arrow_index_free,
    .open = arrow_open,
    .close = arrow_close,
    .group = arrow_group,
    .ranges = arrow_ranges,
    .decode = arrow_decode,
    .fields = arrow_fields,
    .group_free = arrow_group_free,
};
