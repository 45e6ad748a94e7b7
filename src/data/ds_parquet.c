/* ds_parquet.c - the Parquet row of the dataset-format table (dsformat.h):
 * groups are row groups, a group's ranges are the selected leaves' column
 * chunks, decode turns each chunk into a column (parquet_page.c) and
 * fields() hands out row i of each top-level field: scalars (numbers, bool
 * as one byte, strings as utf8, binaries, with their logical annotation:
 * decimals, timestamps, dates, times, INT96, UUID, ...), lists of numbers
 * as 1-d arrays read in place (a row whose list holds a null comes as a
 * LIST value instead), and every other shape (lists of strings, structs,
 * lists of structs, lists of lists, maps) as a nested value assembled from
 * the levels (parquet_nest.c). docs/FORMAT-PARQUET.md. */
#include "dsformat.h"
#include "parquet.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define PQ_TAIL (64u << 10) /* the first tail read; grown when the footer is larger */

/* ---- buffers kept between row groups ---------------------------------------
 * A decoded column's buffers are large (a list<int32> row group of 100 MB:
 * its values), so malloc maps fresh memory for each and the decode pays a
 * page fault a 4 KiB page of output (about 40% of a list column's decode).
 * Freed columns and decoder scratch go to a small pool instead, shared by
 * every Parquet shard of the process (block order interleaves shards) and
 * emptied when the last one closes: at most PQ_POOL_N columns and
 * PQ_POOL_BYTES held while idle. */
#define PQ_POOL_N 32
#define PQ_POOL_BYTES (512ull << 20)
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pi_pq_column pool_col[PQ_POOL_N];
static struct pi_pq_scratch pool_scr[4];
static size_t pool_ncol, pool_nscr, pool_users;
static uint64_t pool_bytes;

/* A column for leaf L: a pooled one of the same shape if any, else empty. */
static void pool_take_col(const struct pi_pq_leaf *L, struct pi_pq_column *c) {
    memset(c, 0, sizeof *c);
    pthread_mutex_lock(&pool_mu);
    size_t pick = pool_ncol;
    for (size_t i = pool_ncol; i-- > 0;) {
        const struct pi_pq_column *x = &pool_col[i];
        if (x->kind == L->kind && (x->width != 0) == (L->type != PI_PQ_BYTE_ARRAY)) {
            pick = i;
            break;
        }
    }
    if (pick == pool_ncol && pool_ncol) pick = pool_ncol - 1;
    if (pick < pool_ncol) {
        *c = pool_col[pick];
        pool_bytes -= pi_pq_column_held(c);
        pool_col[pick] = pool_col[--pool_ncol];
    }
    pthread_mutex_unlock(&pool_mu);
}

static void pool_put_col(struct pi_pq_column *c) {
    uint64_t held = pi_pq_column_held(c);
    pthread_mutex_lock(&pool_mu);
    int kept = pool_users && pool_ncol < PQ_POOL_N && pool_bytes + held <= PQ_POOL_BYTES;
    if (kept) {
        pool_col[pool_ncol++] = *c;
        pool_bytes += held;
    }
    pthread_mutex_unlock(&pool_mu);
    if (!kept) pi_pq_column_free(c);
    memset(c, 0, sizeof *c);
}

static void pool_take_scr(struct pi_pq_scratch *s) {
    memset(s, 0, sizeof *s);
    pthread_mutex_lock(&pool_mu);
    if (pool_nscr) *s = pool_scr[--pool_nscr];
    pthread_mutex_unlock(&pool_mu);
}

static void pool_put_scr(struct pi_pq_scratch *s) {
    pthread_mutex_lock(&pool_mu);
    int kept = pool_users && pool_nscr < PI_ARRAY_LEN(pool_scr) && pi_pq_scratch_held(s) <= (64u << 20);
    if (kept) pool_scr[pool_nscr++] = *s;
    pthread_mutex_unlock(&pool_mu);
    if (!kept) pi_pq_scratch_free(s);
}

/* fork() while another thread holds the pool's lock (a DataLoader forking
 * its workers while a pipe's loader decodes) must not leave the child's
 * copy locked forever: the lock is taken around fork and released on both
 * sides. */
static void pool_lock(void) { pthread_mutex_lock(&pool_mu); }
static void pool_unlock(void) { pthread_mutex_unlock(&pool_mu); }
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static void pool_atfork(void) { pthread_atfork(pool_lock, pool_unlock, pool_unlock); }

static void pool_use(int delta) {
    pthread_once(&pool_once, pool_atfork);
    struct pi_pq_column cols[PQ_POOL_N];
    struct pi_pq_scratch scr[PI_ARRAY_LEN(pool_scr)];
    size_t nc = 0, ns = 0;
    pthread_mutex_lock(&pool_mu);
    pool_users = (size_t)((ptrdiff_t)pool_users + delta);
    if (!pool_users) { /* the last shard closed: give the memory back */
        nc = pool_ncol;
        ns = pool_nscr;
        memcpy(cols, pool_col, nc * sizeof *cols);
        memcpy(scr, pool_scr, ns * sizeof *scr);
        pool_ncol = pool_nscr = 0;
        pool_bytes = 0;
    }
    pthread_mutex_unlock(&pool_mu);
    for (size_t i = 0; i < nc; i++) pi_pq_column_free(&cols[i]);
    for (size_t i = 0; i < ns; i++) pi_pq_scratch_free(&scr[i]);
}

struct pq_shard {
    struct pi_pq_file *f;
    size_t nsel;
    int *leaf;       /* nsel leaf indexes, in leaf order */
    int *kof;        /* per leaf of the file: its index in leaf[], or -1 */
    size_t nfld;
    int *fld;        /* nfld top-level nodes: the fields, in schema order */
    uint64_t *first; /* ngroups + 1 row prefix sums */
    /* the page index of the selected chunks (group g, column k at
     * g * nsel + k), when every one has an OffsetIndex: parts */
    struct pi_pq_page_loc **locs;
    size_t *nlocs;
};

struct pq_group {
    size_t n;
    struct pi_pq_column *cols;
    uint64_t *origin; /* per column: the group-local row its column starts at (a part's pages) */
    uint64_t first;   /* the group-local row of the group's (or part's) sample 0 */
    uint64_t *cur;    /* the assembly's cursors: row, slot, value, end (4 x n) */
};

static int pq_detect(const char *name, const uint8_t *head, size_t nhead, const uint8_t *tail, size_t ntail,
                     uint64_t size) {
    if (size >= 12 && nhead >= 4 && ntail >= 4 && !memcmp(head, "PAR1", 4) && !memcmp(tail + ntail - 4, "PAR1", 4))
        return 2;
    size_t l = name ? strlen(name) : 0;
    return l > 8 && !strcmp(name + l - 8, ".parquet") ? 1 : 0;
}

static void pq_free_impl(struct pq_shard *p) {
    if (!p) return;
    if (p->locs)
        for (size_t i = 0; i < p->f->ngroups * p->nsel; i++) pi_free(p->locs[i]);
    pi_free(p->locs);
    pi_free(p->nlocs);
    pi_pq_close(p->f);
    pi_free(p->leaf);
    pi_free(p->kof);
    pi_free(p->fld);
    pi_free(p->first);
    pi_free(p);
}

/* 1 when a top-level list of leaf L's values is handed out in place, as a
 * 1-d array of numbers */
static int flat_list(const struct pi_pq_leaf *L) {
    return L->kind == PI_PQ_LIST && L->fwidth && L->type != PI_PQ_INT96 && L->type != PI_PQ_FIXED && !L->logical &&
           L->ftype != PAGEIN_FIELD_NULL;
}

/* The table's description of top-level field node x, or an error naming
 * why one of its (selected) leaves cannot be read. */
static int field_col(const struct pi_dsshard *sh, const struct pq_shard *p, int x, struct pi_dscol *c) {
    const struct pi_pq_file *f = p->f;
    const struct pi_pq_node *T = &f->nodes[x];
    memset(c, 0, sizeof *c);
    c->name = T->name;
    c->nullable = T->dnull > 0 || T->kind != PI_PQ_N_LEAF;
    for (int l = T->leaf0; l < T->leaf1; l++)
        if (p->kof[l] >= 0 && f->leaves[l].unsupported)
            return pi_ds_err(sh, PAGEIN_E_UNSUPPORTED, UINT64_MAX, UINT64_MAX, f->leaves[l].path, "%s is not supported",
                             f->leaves[l].unsupported);
    const struct pi_pq_leaf *L = &f->leaves[T->leaf0];
    if (T->kind == PI_PQ_N_LEAF || flat_list(L)) {
        c->type = L->ftype;
        c->width = L->fwidth;
        c->logical = L->logical;
        c->unit = L->unit;
        c->utc = L->utc;
        c->precision = L->precision;
        c->scale = L->scale;
        if (T->kind != PI_PQ_N_LEAF) {
            c->ndim = 1;
            c->shape[0] = -1;
        }
        return 0;
    }
    c->type = T->kind == PI_PQ_N_STRUCT ? PI_DT_STRUCT : T->kind == PI_PQ_N_MAP ? PI_DT_MAP : PI_DT_LIST;
    return 0;
}

/* The "short" path of a leaf: the top-level field and struct members'
 * names, without the list and map wrappers ("messages.content" for
 * messages.list.element.content). Written into buf (cap bytes). */
static void short_path(const struct pi_pq_file *f, int x, int leaf, char *buf, size_t cap, size_t *len, int named) {
    const struct pi_pq_node *N = &f->nodes[x];
    if (named) {
        size_t l = strlen(N->name);
        if (*len && *len + 1 < cap) buf[(*len)++] = '.';
        if (*len + l < cap) memcpy(buf + *len, N->name, l), *len += l;
        buf[*len < cap ? *len : cap - 1] = 0;
    }
    for (int j = 0; j < N->nkids; j++) {
        int k = f->kids[N->kid0 + j];
        if (leaf >= f->nodes[k].leaf0 && leaf < f->nodes[k].leaf1) {
            short_path(f, k, leaf, buf, cap, len, N->kind == PI_PQ_N_STRUCT);
            return;
        }
    }
}

static int path_hit(const char *have, const char *want, size_t wl) {
    (void)wl;
    return pi_ds_col_hit(have, want); /* the one columns= rule (dscolumns.c) */
}

/* An unknown columns= name: the error lists the leaves' short paths. */
static int missing(struct pi_dsshard *sh, const struct pi_pq_file *f, const char *want) {
    char **names = pi_calloc(f->nleaves ? f->nleaves : 1, sizeof *names);
    if (!names) return pi_err(-ENOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < f->nleaves; i++) {
        char sp[512];
        size_t sl = 0;
        sp[0] = 0;
        short_path(f, f->leaves[i].top, (int)i, sp, sizeof sp, &sl, 1);
        if (!(names[n] = pi_strndup(sp, strlen(sp)))) break;
        n++;
    }
    int rc = pi_ds_col_missing(sh, want, (const char *const *)names, n);
    for (size_t i = 0; i < n; i++) pi_free(names[i]);
    pi_free(names);
    return rc;
}

/* columns=: a top-level field, or a nested field by its full path
 * (messages.list.element.content) or its short one (messages.content): the
 * leaves under it are read; the fields handed out are the top-level ones
 * holding a selected leaf, with only the selected members. */
static int select_cols(struct pi_dsshard *sh, struct pq_shard *p, const struct pi_dsopen *a) {
    const struct pi_pq_file *f = p->f;
    size_t nl = f->nleaves ? f->nleaves : 1;
    p->leaf = pi_calloc(nl, sizeof *p->leaf);
    p->kof = pi_calloc(nl, sizeof *p->kof);
    p->fld = pi_calloc(f->nfields ? f->nfields : 1, sizeof *p->fld);
    uint8_t *taken = pi_calloc(nl, 1);
    if (!p->leaf || !p->kof || !p->fld || !taken) {
        pi_free(taken);
        return pi_err(-ENOMEM, "out of memory");
    }
    for (size_t k = 0; a && a->columns && k < a->ncolumns; k++) {
        const char *want = a->columns[k];
        size_t wl = strlen(want);
        int hit = 0;
        for (size_t i = 0; i < f->nleaves; i++) {
            const struct pi_pq_leaf *L = &f->leaves[i];
            char sp[512];
            size_t sl = 0;
            sp[0] = 0;
            short_path(f, L->top, (int)i, sp, sizeof sp, &sl, 1);
            if (!path_hit(L->field, want, wl) && !path_hit(L->path, want, wl) && !path_hit(sp, want, wl)) continue;
            hit = 1;
            taken[i] = 1;
        }
        if (!hit) {
            pi_free(taken);
            return missing(sh, f, want);
        }
    }
    for (size_t i = 0; i < f->nleaves; i++) {
        p->kof[i] = -1;
        if (!a || !a->columns || taken[i]) {
            p->kof[i] = (int)p->nsel;
            p->leaf[p->nsel++] = (int)i;
        }
    }
    pi_free(taken);
    for (size_t j = 0; j < f->nfields; j++) {
        const struct pi_pq_node *T = &f->nodes[f->fields[j]];
        for (int l = T->leaf0; l < T->leaf1; l++)
            if (p->kof[l] >= 0) {
                p->fld[p->nfld++] = f->fields[j];
                break;
            }
    }
    return 0;
}

/* The page index of the selected chunks, when every one has an OffsetIndex:
 * from the tail already read when it lies there (writers put it just
 * before the footer), else one read of its span (at most PQ_INDEX_MAX).
 * Only a hint: a missing, far-flung or malformed index leaves the shard
 * without parts (global order then reads whole row groups). */
#define PQ_INDEX_MAX (16u << 20)
static int load_page_index(struct pi_dsshard *sh, struct pq_shard *p, const uint8_t *tail, uint64_t tl) {
    const struct pi_pq_file *f = p->f;
    size_t n = f->ngroups * p->nsel;
    uint64_t lo = UINT64_MAX, hi = 0;
    if (!n) return 0;
    for (size_t g = 0; g < f->ngroups; g++)
        for (size_t k = 0; k < p->nsel; k++) {
            const struct pi_pq_chunk *C = &f->groups[g].chunks[p->leaf[k]];
            if (C->offset_index_offset < 0 || C->offset_index_length <= 0) return 0;
            lo = PI_MIN(lo, (uint64_t)C->offset_index_offset);
            hi = PI_MAX(hi, (uint64_t)C->offset_index_offset + (uint64_t)C->offset_index_length);
        }
    if (hi - lo > PQ_INDEX_MAX || hi > f->file_size) return 0;
    uint64_t size = f->file_size;
    const uint8_t *span = NULL;
    uint8_t *own = NULL;
    if (lo >= size - tl) {
        span = tail + (lo - (size - tl));
    } else {
        own = pi_malloc((size_t)(hi - lo));
        if (!own) return pi_err(-ENOMEM, "out of memory");
        int rc = pi_source_read(sh->src, own, hi - lo, lo);
        if (rc < 0) {
            pi_free(own);
            return rc;
        }
        span = own;
    }
    p->locs = pi_calloc(n, sizeof *p->locs);
    p->nlocs = pi_calloc(n, sizeof *p->nlocs);
    int ok = p->locs && p->nlocs;
    for (size_t g = 0; ok && g < f->ngroups; g++)
        for (size_t k = 0; ok && k < p->nsel; k++) {
            const struct pi_pq_chunk *C = &f->groups[g].chunks[p->leaf[k]];
            size_t at = g * p->nsel + k;
            ok = pi_pq_offset_index(f, g, (size_t)p->leaf[k], span + ((uint64_t)C->offset_index_offset - lo),
                                    (size_t)C->offset_index_length, &p->locs[at], &p->nlocs[at]) == 0 &&
                 p->nlocs[at] > 0;
        }
    pi_free(own);
    pi_err_clear();
    if (!ok) { /* no parts */
        if (p->locs)
            for (size_t i = 0; i < n; i++) pi_free(p->locs[i]);
        pi_free(p->locs);
        pi_free(p->nlocs);
        p->locs = NULL;
        p->nlocs = NULL;
    }
    return 0;
}

/* Every row group's rows against the bytes of its column chunks (all
 * columns, selected or not), and their sum (dscount.c). */
static int pq_counts(const struct pi_dsshard *sh, const struct pi_pq_file *f) {
    uint64_t sum = 0;
    for (size_t g = 0; g < f->ngroups; g++) {
        uint64_t bytes = 0, rows = (uint64_t)f->groups[g].num_rows;
        for (size_t c = 0; c < f->nleaves; c++) bytes += f->groups[g].chunks[c].len; /* each inside the file */
        FORWARD_IF(pi_ds_count_check(sh, g, rows, bytes, "column chunks"));
        FORWARD_IF(pi_ds_count_add(sh, g, &sum, rows));
    }
    return 0;
}

static int pq_open(struct pi_dsshard *sh, const struct pi_dsopen *a) {
    uint64_t size = sh->src->size;
    struct pq_shard *p = pi_calloc(1, sizeof *p);
    if (!p) return pi_err(-ENOMEM, "out of memory");
    uint64_t tl = size < PQ_TAIL ? size : PQ_TAIL, need = 0;
    uint8_t *tail = pi_malloc(tl ? (size_t)tl : 1);
    int rc = tail ? 0 : pi_err(-ENOMEM, "out of memory");
    if (rc == 0) rc = pi_source_read(sh->src, tail, tl, size - tl);
    if (rc >= 0) rc = pi_pq_tail_need(tail, (size_t)tl, size, sh->name, &need);
    if (rc >= 0 && need > tl) {
        /* a footer larger than the first read: one more read of all of it */
        pi_free(tail);
        tl = need;
        tail = pi_malloc((size_t)tl);
        rc = tail ? pi_source_read(sh->src, tail, tl, size - tl) : pi_err(-ENOMEM, "out of memory");
    }
    if (rc >= 0) rc = pi_pq_open(&p->f, tail, (size_t)tl, size, sh->name);
    if (rc >= 0) rc = pq_counts(sh, p->f);
    if (rc >= 0) rc = select_cols(sh, p, a);
    if (rc >= 0) rc = load_page_index(sh, p, tail, tl);
    pi_free(tail);
    if (rc >= 0 && p->nsel > PI_DS_MAX_COLS)
        rc = pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, UINT64_MAX, NULL, "%zu columns, over the limit of %u", p->nsel,
                       PI_DS_MAX_COLS);
    if (rc >= 0) {
        sh->cols = pi_calloc(p->nfld ? p->nfld : 1, sizeof *sh->cols);
        p->first = pi_calloc(p->f->ngroups + 1, sizeof *p->first);
        if (!sh->cols || !p->first) rc = pi_err(-ENOMEM, "out of memory");
    }
    for (size_t k = 0; rc >= 0 && k < p->nfld; k++) rc = field_col(sh, p, p->fld[k], &sh->cols[k]);
    if (rc >= 0) {
        for (size_t g = 0; g < p->f->ngroups; g++) p->first[g + 1] = p->first[g] + (uint64_t)p->f->groups[g].num_rows;
        sh->ncols = p->nfld;
        sh->nsamples = p->first[p->f->ngroups];
        sh->ngroups = p->f->ngroups;
        sh->impl = p;
        pool_use(1);
        return 0;
    }
    pi_free(sh->cols);
    sh->cols = NULL;
    pq_free_impl(p);
    return rc < 0 ? rc : pi_err(PAGEIN_E_FORMAT, "%s: cannot open", sh->name);
}

static void pq_close(struct pi_dsshard *sh) {
    if (sh->impl) pool_use(-1);
    pq_free_impl(sh->impl);
    sh->impl = NULL;
    pi_free(sh->cols);
    sh->cols = NULL;
}

static int pq_group(const struct pi_dsshard *sh, uint64_t g, struct pi_dsgroupinfo *gi) {
    const struct pq_shard *p = sh->impl;
    if (g >= sh->ngroups) return pi_ds_err(sh, PAGEIN_E_RANGE, g, UINT64_MAX, NULL, "no such row group");
    gi->first = p->first[g];
    gi->count = p->first[g + 1] - p->first[g];
    gi->bytes = 0;
    for (size_t k = 0; k < p->nsel; k++) gi->bytes += p->f->groups[g].chunks[p->leaf[k]].len;
    return 0;
}

static int pq_ranges(const struct pi_dsshard *sh, uint64_t g, struct pi_dsrange *r, size_t cap) {
    const struct pq_shard *p = sh->impl;
    if (g >= sh->ngroups) return pi_ds_err(sh, PAGEIN_E_RANGE, g, UINT64_MAX, NULL, "no such row group");
    for (size_t k = 0; k < p->nsel && k < cap; k++) {
        r[k].off = p->f->groups[g].chunks[p->leaf[k]].off;
        r[k].len = p->f->groups[g].chunks[p->leaf[k]].len;
    }
    return (int)p->nsel;
}

static void pq_group_free(const struct pi_dsshard *sh, struct pi_dsgroup *grp) {
    struct pq_group *q = grp->impl;
    if (!q) return;
    for (size_t k = 0; k < q->n; k++) pool_put_col(&q->cols[k]);
    pi_free(q->cols);
    pi_free(q->origin);
    pi_free(q->cur);
    pi_free(q);
    grp->impl = NULL;
}

/* The page of column k of group g holding group-local row r: its index in
 * the OffsetIndex and its rows [*a, *b). */
static size_t page_of(const struct pq_shard *p, uint64_t g, size_t k, uint64_t r, uint64_t *a, uint64_t *b) {
    const struct pi_pq_page_loc *L = p->locs[g * p->nsel + k];
    size_t n = p->nlocs[g * p->nsel + k], lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uint64_t)L[mid].first_row <= r)
            lo = mid;
        else
            hi = mid;
    }
    *a = (uint64_t)L[lo].first_row;
    *b = lo + 1 < n ? (uint64_t)L[lo + 1].first_row : p->first[g + 1] - p->first[g];
    return lo;
}

/* A part: the rows of group g around group-local row i that every selected
 * column holds in one page, read as each column's dictionary (the chunk's
 * bytes before its first data page) and that page: ranges 2k and 2k + 1. */
static int pq_part(const struct pi_dsshard *sh, uint64_t g, uint64_t i, struct pi_dsgroupinfo *pi, struct pi_dsrange *r,
                   size_t cap) {
    const struct pq_shard *p = sh->impl;
    if (!p->locs) return 0;
    if (g >= sh->ngroups || i >= p->first[g + 1] - p->first[g])
        return pi_ds_err(sh, PAGEIN_E_RANGE, g, i, NULL, "no such row in the row group");
    uint64_t a = 0, b = p->first[g + 1] - p->first[g], bytes = 0;
    for (size_t k = 0; k < p->nsel; k++) {
        uint64_t ak, bk;
        size_t j = page_of(p, g, k, i, &ak, &bk);
        a = PI_MAX(a, ak);
        b = PI_MIN(b, bk);
        const struct pi_pq_chunk *C = &p->f->groups[g].chunks[p->leaf[k]];
        const struct pi_pq_page_loc *L = p->locs[g * p->nsel + k];
        struct pi_dsrange d = {C->off, (uint64_t)L[0].offset - C->off}, pg = {(uint64_t)L[j].offset, (uint64_t)L[j].size};
        if (2 * k < cap) r[2 * k] = d;
        if (2 * k + 1 < cap) r[2 * k + 1] = pg;
        bytes += d.len + pg.len;
    }
    pi->first = p->first[g] + a;
    pi->count = b - a;
    pi->bytes = bytes;
    return (int)(2 * p->nsel);
}

static int pq_decode(const struct pi_dsshard *sh, struct pi_dsgroup *grp) {
    const struct pq_shard *p = sh->impl;
    uint64_t g = grp->g;
    size_t per = grp->part ? 2 : 1;
    if (g >= sh->ngroups || grp->nbufs != per * p->nsel || (grp->part && !p->locs))
        return pi_ds_err(sh, PAGEIN_E_INVALID, g, UINT64_MAX, NULL, "%zu buffers for %zu columns", grp->nbufs, p->nsel);
    /* what the group may decode into, from the footer's declared sizes */
    uint64_t est = 0;
    for (size_t k = 0; k < p->nsel; k++) {
        const struct pi_pq_chunk *C = &p->f->groups[g].chunks[p->leaf[k]];
        est += (uint64_t)C->total_uncompressed + (uint64_t)C->num_values * 18u;
    }
    if (est > PI_DS_MAX_DECODE)
        return pi_ds_err(sh, PAGEIN_E_LIMIT, g, UINT64_MAX, NULL, "row group would decode to about %llu bytes, over %llu",
                         (unsigned long long)est, (unsigned long long)PI_DS_MAX_DECODE);
    struct pq_group *q = pi_calloc(1, sizeof *q);
    if (!q) return pi_err(-ENOMEM, "out of memory");
    q->cols = pi_calloc(p->nsel ? p->nsel : 1, sizeof *q->cols);
    q->origin = pi_calloc(p->nsel ? p->nsel : 1, sizeof *q->origin);
    q->cur = pi_calloc(4 * (p->nsel ? p->nsel : 1), sizeof *q->cur);
    grp->impl = q;
    if (!q->cols || !q->origin || !q->cur) {
        pq_group_free(sh, grp);
        return pi_err(-ENOMEM, "out of memory");
    }
    q->first = grp->part ? grp->info.first - p->first[g] : 0;
    struct pi_pq_scratch scr;
    pool_take_scr(&scr);
    int rc = 0;
    for (size_t k = 0; k < p->nsel && rc == 0; k++) {
        const struct pi_pq_leaf *L = &p->f->leaves[p->leaf[k]];
        q->n = k + 1;
        pool_take_col(L, &q->cols[k]);
        if (grp->part) { /* the page holding the part's rows, after the dictionary */
            uint64_t a, b;
            page_of(p, g, k, q->first, &a, &b);
            if (q->first + grp->info.count > b) {
                rc = pi_ds_err(sh, PAGEIN_E_INVALID, g, UINT64_MAX, L->field, "the part is not inside one page");
                break;
            }
            q->origin[k] = a;
            rc = pi_pq_decode_page_run_into(p->f, (size_t)g, (size_t)p->leaf[k], grp->bufs[2 * k].p,
                                            (size_t)grp->bufs[2 * k].len, grp->bufs[2 * k + 1].p,
                                            (size_t)grp->bufs[2 * k + 1].len, (int64_t)a, (int64_t)(b - a), &q->cols[k],
                                            &scr);
        } else {
            rc = pi_pq_decode_chunk_into(p->f, (size_t)g, (size_t)p->leaf[k], grp->bufs[k].p, (size_t)grp->bufs[k].len,
                                         &q->cols[k], &scr);
        }
        if (rc < 0) break; /* the detail names the file, row group, column and page */
    }
    pool_put_scr(&scr);
    if (rc < 0) pq_group_free(sh, grp);
    return rc;
}

/* Row ri of a top-level list column (the LIST kind) into out[at]: an
 * array of numbers in place, or a LIST value whose elements go to out[*n
 * ...] (strings, or a null element in this row). */
static void list_field(const struct pi_pq_file *f, const struct pi_pq_column *c, int x, uint64_t ri,
                       pagein_field *out, size_t cap, pagein_field *o, size_t *n) {
    const struct pi_pq_node *T = &f->nodes[x];
    const struct pi_pq_leaf *L = &f->leaves[T->leaf0];
    uint64_t b, e;
    if (!pi_pq_row(c, ri, &b, &e)) {
        o->null = 1;
        o->type = flat_list(L) ? L->ftype : PI_DT_LIST;
        o->width = flat_list(L) ? L->fwidth : 0;
        o->ndim = flat_list(L);
        return;
    }
    int flat = flat_list(L);
    if (flat && c->null_elems)
        for (uint64_t i = b; i < e && flat; i++) flat = pi_pq_elem_ok(c, i);
    if (flat) {
        o->type = L->ftype;
        o->width = L->fwidth;
        o->ndim = 1;
        o->shape[0] = e - b;
        o->data = c->values + b * c->width;
        o->nbytes = (e - b) * c->width;
        return;
    }
    o->type = PI_DT_LIST;
    o->child = (uint32_t)*n;
    o->nchild = (uint32_t)(e - b);
    const char *en = f->nodes[f->kids[T->kid0]].name;
    for (uint64_t i = b; i < e; i++, (*n)++) {
        if (*n >= cap) continue;
        pagein_field *y = &out[*n];
        memset(y, 0, sizeof *y);
        y->name = en;
        y->col = o->col;
        pi_pq_leaf_value(L, c, i, y);
        if (!pi_pq_elem_ok(c, i)) {
            y->null = 1;
            y->data = NULL;
            y->nbytes = 0;
        }
    }
}

static int pq_fields(const struct pi_dsshard *sh, const struct pi_dsgroup *grp, uint64_t i, struct pi_dsfield *f,
                     size_t cap) {
    const struct pq_shard *p = sh->impl;
    const struct pq_group *q = grp->impl;
    const struct pi_pq_file *F = p->f;
    if (!q || q->n != p->nsel || i >= grp->info.count)
        return pi_ds_err(sh, PAGEIN_E_INVALID, grp->g, i, NULL, "no such sample in the decoded row group");
    uint64_t *row = q->cur, *cur = q->cur + p->nsel;
    for (size_t k = 0; k < p->nsel; k++) {
        row[k] = q->first + i - q->origin[k]; /* the row in this column's decoded pages */
        if (row[k] >= q->cols[k].nrows)
            return pi_ds_err(sh, PAGEIN_E_INVALID, grp->g, i, F->leaves[p->leaf[k]].path, "row past the decoded pages");
    }
    size_t n = p->nfld; /* nested values' children go after the top-level fields */
    for (size_t j = 0; j < p->nfld; j++) {
        int x = p->fld[j];
        const struct pi_pq_node *T = &F->nodes[x];
        const struct pi_pq_leaf *L = &F->leaves[T->leaf0];
        pagein_field tmp, *o = j < cap ? &f[j] : &tmp;
        memset(o, 0, sizeof *o);
        o->name = T->name;
        o->col = (uint32_t)j;
        if (L->kind == PI_PQ_NESTED) {
            struct pi_pq_asm a = {.f = F, .kof = p->kof, .cols = q->cols, .row = row, .slot = cur,
                                  .val = cur + p->nsel, .end = cur + 2 * p->nsel, .out = f, .cap = cap, .n = n,
                                  .col = (uint32_t)j};
            int rc = pi_pq_assemble(&a, x, j);
            if (rc < 0) {
                char why[512];
                snprintf(why, sizeof why, "%s", pagein_last_error_detail());
                return pi_ds_err(sh, rc, grp->g, i, T->name, "%s", why);
            }
            n = a.n;
            continue;
        }
        int k = p->kof[T->leaf0];
        const struct pi_pq_column *c = &q->cols[k];
        if (L->kind == PI_PQ_LIST) {
            list_field(F, c, x, row[k], f, cap, o, &n);
            continue;
        }
        pi_pq_leaf_value(L, c, row[k], o);
        if (!pi_pq_elem_ok(c, row[k])) { /* a scalar: its row is its element */
            o->null = 1;
            o->data = NULL;
            o->nbytes = 0;
        }
    }
    if (n > INT32_MAX) return pi_ds_err(sh, PAGEIN_E_LIMIT, grp->g, i, NULL, "%zu fields", n);
    return (int)n;
}

static const char *const pq_suffixes[] = {".parquet", NULL};

const struct pi_dsformat pi_dsformat_parquet = {
    .name = "parquet",
    .suffixes = pq_suffixes,
    .head_bytes = 4,
    .tail_bytes = 4,
    .detect = pq_detect,
    .open = pq_open,
    .close = pq_close,
    .group = pq_group,
    .ranges = pq_ranges,
    .decode = pq_decode,
    .fields = pq_fields,
    .group_free = pq_group_free,
    .part = pq_part,
};
