/* parquet_nest.c - the record shape of a Parquet schema (lists, structs,
 * maps at any depth, by LogicalTypes.md's nested-type rules and their
 * backward-compatibility forms) and the assembly of one row's value from
 * its leaves' definition and repetition levels (the Dremel encoding).
 * docs/FORMAT-PARQUET.md. No I/O, no allocation while assembling. */
#include "parquet.h"

#include <stdio.h>
#include <string.h>

/* ---- the node tree ---------------------------------------------------------- */

struct nb {
    struct pi_pq_file *f;
    int *leaf_of; /* schema element -> leaf, or -1 */
    size_t nn, nk, cap;
};

static int is_list_el(const struct pi_pq_schema *e) {
    return e->type < 0 && (e->converted == PI_PQ_CT_LIST || e->logical == PI_PQ_LT_LIST);
}

static int is_map_el(const struct pi_pq_schema *e) {
    return e->type < 0 && e->rep != PI_PQ_REPEATED &&
           (e->converted == PI_PQ_CT_MAP || e->converted == PI_PQ_CT_MAP_KEY_VALUE || e->logical == PI_PQ_LT_MAP);
}

/* The index after element si's subtree (the schema is pre-order with
 * num_children, already checked by the leaf walk). */
static size_t skip_el(const struct pi_pq_file *f, size_t si) {
    size_t j = si + 1;
    for (int32_t c = 0; c < f->schema[si].num_children && j < f->nschema; c++) j = skip_el(f, j);
    return j;
}

static int new_node(struct nb *b, int kind, int si, int dnull) {
    if (b->nn >= b->cap) return pi_err(PAGEIN_E_LIMIT, "schema: more record nodes than expected");
    struct pi_pq_node *n = &b->f->nodes[b->nn];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->schema = si;
    n->name = b->f->schema[si].name;
    n->dnull = dnull;
    n->leaf = -1;
    return (int)b->nn++;
}

static int mk(struct nb *b, size_t si, int dpar, int rpar, int depth);

/* Room for n children of node x; filled by the caller. */
static int kids_of(struct nb *b, int x, int n) {
    if (b->nk + (size_t)n > b->cap) return pi_err(PAGEIN_E_LIMIT, "schema: more record nodes than expected");
    b->f->nodes[x].kid0 = (int)b->nk;
    b->f->nodes[x].nkids = n;
    b->nk += (size_t)n;
    return 0;
}

static void span(struct nb *b, int x) {
    struct pi_pq_node *n = &b->f->nodes[x];
    if (n->kind == PI_PQ_N_LEAF) return;
    n->leaf0 = n->nkids ? b->f->nodes[b->f->kids[n->kid0]].leaf0 : 0;
    n->leaf1 = n->nkids ? b->f->nodes[b->f->kids[n->kid0 + n->nkids - 1]].leaf1 : 0;
}

static int mk_required(struct nb *b, size_t si, int d, int r, int depth);

/* A LIST or MAP node for element si (present at level d): its elements
 * at (d + 1, r + 1), by the rules for the repeated node c below it. */
static int mk_list(struct nb *b, size_t si, int d, int r, int depth) {
    const struct pi_pq_file *f = b->f;
    const struct pi_pq_schema *e = &f->schema[si], *ce = &f->schema[si + 1];
    int kind = is_list_el(e) ? PI_PQ_N_LIST : PI_PQ_N_MAP;
    /* a map whose entries have a key and no value: a list of the keys (as
     * the Rust and C++ readers have it) */
    int keys_only = kind == PI_PQ_N_MAP && ce->type < 0 && ce->num_children == 1;
    if (keys_only) kind = PI_PQ_N_LIST;
    int x = new_node(b, kind, (int)si, d);
    if (x < 0) return x;
    b->f->nodes[x].drep = d + 1;
    b->f->nodes[x].rep = r + 1;
    FORWARD_IF(kids_of(b, x, 1));
    size_t c = si + 1, len = strlen(e->name);
    int el;
    if (!keys_only && (kind == PI_PQ_N_MAP || ce->type >= 0 || ce->num_children != 1 || !strcmp(ce->name, "array") ||
                       (!strncmp(ce->name, e->name, len) && !strcmp(ce->name + len, "_tuple"))))
        /* the repeated node is the element: a primitive, a struct of its
         * fields (legacy two-level lists) or a list itself, a map's
         * key_value entry */
        el = mk_required(b, c, d + 1, r + 1, depth + 1);
    else /* three-level: the repeated group's one child is the element */
        el = mk(b, c + 1, d + 1, r + 1, depth + 2);
    if (el < 0) return el;
    b->f->kids[b->f->nodes[x].kid0] = el;
    span(b, x);
    return x;
}

/* Element si as a present value at levels (d, r): its own optional or
 * repeated level is already counted. */
static int mk_required(struct nb *b, size_t si, int d, int r, int depth) {
    const struct pi_pq_file *f = b->f;
    const struct pi_pq_schema *e = &f->schema[si];
    if (depth > PI_PQ_MAX_DEPTH) return pi_err(PAGEIN_E_LIMIT, "schema: nesting deeper than %d", PI_PQ_MAX_DEPTH);
    if (e->type >= 0) {
        int x = new_node(b, PI_PQ_N_LEAF, (int)si, d);
        if (x < 0) return x;
        int li = b->leaf_of[si];
        const struct pi_pq_leaf *L = li >= 0 ? &f->leaves[li] : NULL;
        if (!L || L->max_def != d || L->max_rep != r)
            return pi_err(PI_PQ_EFORMAT, "schema: %s has levels the record shape does not explain", e->name);
        b->f->nodes[x].leaf = li;
        b->f->nodes[x].leaf0 = li;
        b->f->nodes[x].leaf1 = li + 1;
        return x;
    }
    if ((is_list_el(e) || is_map_el(e)) && e->num_children == 1 && si + 1 < f->nschema &&
        f->schema[si + 1].rep == PI_PQ_REPEATED)
        return mk_list(b, si, d, r, depth);
    int x = new_node(b, PI_PQ_N_STRUCT, (int)si, d);
    if (x < 0) return x;
    FORWARD_IF(kids_of(b, x, e->num_children));
    size_t j = si + 1;
    for (int32_t c = 0; c < e->num_children; c++) {
        int k = mk(b, j, d, r, depth + 1);
        if (k < 0) return k;
        b->f->kids[b->f->nodes[x].kid0 + c] = k;
        j = skip_el(f, j);
    }
    span(b, x);
    return x;
}

static int mk(struct nb *b, size_t si, int dpar, int rpar, int depth) {
    const struct pi_pq_schema *e = &b->f->schema[si];
    if (depth > PI_PQ_MAX_DEPTH) return pi_err(PAGEIN_E_LIMIT, "schema: nesting deeper than %d", PI_PQ_MAX_DEPTH);
    if (e->rep == PI_PQ_REPEATED) {
        /* a repeated field outside a LIST/MAP: a list of required elements */
        int x = new_node(b, PI_PQ_N_LIST, (int)si, dpar);
        if (x < 0) return x;
        b->f->nodes[x].drep = dpar + 1;
        b->f->nodes[x].rep = rpar + 1;
        FORWARD_IF(kids_of(b, x, 1));
        int el = mk_required(b, si, dpar + 1, rpar + 1, depth + 1);
        if (el < 0) return el;
        b->f->kids[b->f->nodes[x].kid0] = el;
        span(b, x);
        return x;
    }
    int x = mk_required(b, si, dpar + (e->rep == PI_PQ_OPTIONAL), rpar, depth);
    if (x >= 0) b->f->nodes[x].nullable = e->rep == PI_PQ_OPTIONAL;
    return x;
}

int pi_pq_build_nodes(struct pi_pq_file *f) {
    struct nb b = {.f = f, .cap = 2 * f->nschema + 2};
    const struct pi_pq_schema *root = &f->schema[0];
    f->nodes = pi_calloc(b.cap, sizeof *f->nodes);
    f->kids = pi_calloc(b.cap, sizeof *f->kids);
    f->fields = pi_calloc(root->num_children > 0 ? (size_t)root->num_children : 1, sizeof *f->fields);
    b.leaf_of = pi_malloc(f->nschema * sizeof *b.leaf_of);
    int rc = f->nodes && f->kids && f->fields && b.leaf_of ? 0 : pi_err(-ENOMEM, "out of memory");
    if (rc == 0) {
        for (size_t i = 0; i < f->nschema; i++) b.leaf_of[i] = -1;
        for (size_t i = 0; i < f->nleaves; i++) b.leaf_of[f->leaves[i].schema] = (int)i;
    }
    size_t j = 1;
    for (int32_t c = 0; rc == 0 && c < root->num_children; c++) {
        int x = mk(&b, j, 0, 0, 1);
        if (x < 0) {
            rc = x;
            break;
        }
        f->fields[f->nfields++] = x;
        j = skip_el(f, j);
        /* how each leaf of the field is decoded */
        const struct pi_pq_node *T = &f->nodes[x];
        const struct pi_pq_node *E = T->kind == PI_PQ_N_LIST ? &f->nodes[f->kids[T->kid0]] : NULL;
        for (int l = T->leaf0; l < T->leaf1; l++) {
            struct pi_pq_leaf *L = &f->leaves[l];
            L->top = x;
            L->list_def = -1;
            if (T->kind == PI_PQ_N_LEAF) {
                L->kind = PI_PQ_SCALAR;
            } else if (E && E->kind == PI_PQ_N_LEAF && L->max_rep == 1) {
                L->kind = PI_PQ_LIST;
                L->list_def = T->drep - 1;
            } else {
                L->kind = PI_PQ_NESTED;
            }
        }
    }
    f->nnodes = b.nn;
    pi_free(b.leaf_of);
    return rc;
}

/* ---- one row's value ------------------------------------------------------------ */

static inline uint8_t lv(const uint8_t *a, uint64_t i) { return a ? a[i] : 0; }

void pi_pq_leaf_value(const struct pi_pq_leaf *L, const struct pi_pq_column *c, uint64_t i, struct pagein_field *x) {
    x->type = L->ftype;
    x->width = L->fwidth;
    x->logical = L->logical;
    x->unit = L->unit;
    x->utc = L->utc;
    x->precision = L->precision;
    x->scale = L->scale;
    if (L->ftype == PAGEIN_FIELD_NULL) {
        x->null = 1;
        return;
    }
    if (c->width) {
        x->data = c->values + i * c->width;
        x->nbytes = c->width;
    } else {
        x->data = c->bytes + c->voff[i];
        x->nbytes = c->voff[i + 1] - c->voff[i];
    }
}

/* The first column read under node N, or -1. */
static int first_col(const struct pi_pq_asm *a, const struct pi_pq_node *N) {
    for (int l = N->leaf0; l < N->leaf1; l++)
        if (a->kof[l] >= 0) return a->kof[l];
    return -1;
}

static int bad(const struct pi_pq_asm *a, const struct pi_pq_node *N, const char *what) {
    return pi_err(PI_PQ_EFORMAT, "%s: the levels of %s disagree (%s)", a->f->name, N->name, what);
}

/* Moves every column under N past one slot: N is null or an empty list there. */
static int skip_node(struct pi_pq_asm *a, const struct pi_pq_node *N, int below) {
    for (int l = N->leaf0; l < N->leaf1; l++) {
        int k = a->kof[l];
        if (k < 0) continue;
        const struct pi_pq_column *c = &a->cols[k];
        if (a->slot[k] >= a->end[k]) return bad(a, N, "a column ends early");
        if (lv(c->ldef, a->slot[k]) >= below) return bad(a, N, "a value where another column has none");
        a->slot[k]++;
    }
    return 0;
}

static void put(struct pi_pq_asm *a, size_t at, const struct pagein_field *x) {
    if (at < a->cap) a->out[at] = *x;
}

static int build(struct pi_pq_asm *a, int ni, size_t at, int depth) {
    const struct pi_pq_file *f = a->f;
    const struct pi_pq_node *N = &f->nodes[ni];
    int k = first_col(a, N);
    if (k < 0 || depth > PI_PQ_MAX_DEPTH + 2) return bad(a, N, "no column");
    const struct pi_pq_column *c = &a->cols[k];
    if (a->slot[k] >= a->end[k]) return bad(a, N, "a column ends early");
    unsigned d = lv(c->ldef, a->slot[k]);
    struct pagein_field x;
    memset(&x, 0, sizeof x);
    x.name = N->name;
    x.col = a->col;
    x.type = N->kind == PI_PQ_N_STRUCT ? PAGEIN_FIELD_STRUCT
             : N->kind == PI_PQ_N_LIST ? PAGEIN_FIELD_LIST
             : N->kind == PI_PQ_N_MAP  ? PAGEIN_FIELD_MAP
                                       : f->leaves[N->leaf].ftype;
    if (d < (unsigned)N->dnull) {
        if (N->kind == PI_PQ_N_LEAF) { /* the type of the value that is not there */
            pi_pq_leaf_value(&f->leaves[N->leaf], c, 0, &x);
            x.data = NULL;
            x.nbytes = 0;
        }
        x.null = 1;
        put(a, at, &x);
        return skip_node(a, N, N->dnull);
    }
    if (N->kind == PI_PQ_N_LEAF) {
        const struct pi_pq_leaf *L = &f->leaves[N->leaf];
        if (a->val[k] >= c->nelems) return bad(a, N, "more values than decoded");
        pi_pq_leaf_value(L, c, a->val[k], &x);
        a->val[k]++;
        a->slot[k]++;
        put(a, at, &x);
        return 0;
    }
    if (N->kind == PI_PQ_N_STRUCT) {
        uint32_t m = 0;
        for (int j = 0; j < N->nkids; j++) m += first_col(a, &f->nodes[f->kids[N->kid0 + j]]) >= 0;
        x.child = (uint32_t)a->n;
        x.nchild = m;
        put(a, at, &x);
        size_t base = a->n;
        a->n += m;
        for (int j = 0, o = 0; j < N->nkids; j++) {
            int kid = f->kids[N->kid0 + j];
            if (first_col(a, &f->nodes[kid]) < 0) continue;
            FORWARD_IF(build(a, kid, base + (size_t)o++, depth + 1));
        }
        return 0;
    }
    /* LIST / MAP */
    if (d < (unsigned)N->drep) { /* empty */
        x.child = (uint32_t)a->n;
        put(a, at, &x);
        return skip_node(a, N, N->drep);
    }
    uint64_t count = 1;
    for (uint64_t q = a->slot[k] + 1; q < a->end[k]; q++) {
        unsigned r = lv(c->lrep, q);
        if (r < (unsigned)N->rep) break;
        count += r == (unsigned)N->rep;
    }
    if (a->n + count > PI_PQ_MAX_NODES) return pi_err(PAGEIN_E_LIMIT, "%s: %s has too many elements", f->name, N->name);
    x.child = (uint32_t)a->n;
    x.nchild = (uint32_t)count;
    put(a, at, &x);
    size_t base = a->n;
    a->n += (size_t)count;
    int el = f->kids[N->kid0];
    for (uint64_t j = 0; j < count; j++) {
        if (j && (a->slot[k] >= a->end[k] || lv(c->lrep, a->slot[k]) != (unsigned)N->rep))
            return bad(a, N, "an element where none continues the list");
        FORWARD_IF(build(a, el, base + (size_t)j, depth + 1));
    }
    return 0;
}

int pi_pq_assemble(struct pi_pq_asm *a, int top, size_t at) {
    const struct pi_pq_node *T = &a->f->nodes[top];
    for (int l = T->leaf0; l < T->leaf1; l++) {
        int k = a->kof[l];
        if (k < 0) continue;
        const struct pi_pq_column *c = &a->cols[k];
        uint64_t r = a->row[k];
        if (c->kind != PI_PQ_NESTED || r >= c->nrows) return bad(a, T, "row past the decoded pages");
        a->slot[k] = c->rowslot[r];
        a->end[k] = c->rowslot[r + 1];
        a->val[k] = c->rowval[r];
    }
    FORWARD_IF(build(a, top, at, 0));
    for (int l = T->leaf0; l < T->leaf1; l++) {
        int k = a->kof[l];
        if (k >= 0 && a->slot[k] != a->end[k]) return bad(a, T, "a column has slots left in the row");
    }
    return 0;
}
