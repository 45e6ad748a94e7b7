/* dcp_meta.c - a DCP checkpoint's `.metadata`: the pickle of torch's
 * Metadata dataclass, run by the restricted unpickler in its DCP mode
 * (nothing is called: the dataclasses are records of their pickled
 * fields), then read into items and chunks and validated as untrusted
 * input (docs/FORMAT-DCP.md). Buffer in, no I/O. */
#include "dcp.h"
#include "torch_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* Work bounds: pairs of chunks compared for overlap, and chunks looked up
 * without their index hint. */
#define MAX_PAIRS (1ull << 26)
#define MAX_PROBES (1ull << 26)

struct rd {
    const struct pk_state *st;
    const char *where;
    struct pi_dcp_meta *m;
    uint64_t probes;
    uint32_t *fh; /* file-name hash: slots of file index + 1 */
    size_t fhcap;
};

void pi_dcp_meta_init(struct pi_dcp_meta *m) { memset(m, 0, sizeof *m); }

void pi_dcp_meta_free(struct pi_dcp_meta *m) {
    if (!m) return;
    pi_free(m->items);
    pi_free(m->files);
    pi_free(m->ihash);
    pi_arena_free(&m->arena);
    memset(m, 0, sizeof *m);
}

static const struct pk_obj *obj(const struct rd *r, uint32_t id) { return &r->st->o[id]; }

static bool str_is(const struct pk_obj *o, const char *s) {
    size_t n = strlen(s);
    return o->kind == PK_STR && o->u.s.len == n && memcmp(o->u.s.p, s, n) == 0;
}

/* The DCP class of an instance, PKC_NONE for anything else. */
static int cls_of(const struct rd *r, uint32_t id) {
    const struct pk_obj *o = obj(r, id);
    if (o->kind != PK_INSTANCE || o->n < 1) return PKC_NONE;
    const struct pk_obj *c = obj(r, o->u.items[0]);
    if (c->kind != PK_GLOBAL || pk_globals[c->u.gid].kind != PKG_DCP_CLASS) return PKC_NONE;
    if (strncmp(pk_globals[c->u.gid].name, "torch.distributed.checkpoint.", 29) == 0) r->m->generation = 2;
    return pk_globals[c->u.gid].cls;
}

/* Field name of instance id (its BUILD state dict): the value's id, or
 * UINT32_MAX when absent (no state, a tuple state, no such key). */
static uint32_t field(const struct rd *r, uint32_t id, const char *name) {
    const struct pk_obj *o = obj(r, id);
    if (o->kind != PK_INSTANCE || o->n < 2) return UINT32_MAX;
    const struct pk_obj *d = obj(r, o->u.items[1]);
    if (d->kind != PK_DICT) return UINT32_MAX;
    for (uint32_t i = 0; i + 1 < d->n; i += 2)
        if (str_is(obj(r, d->u.items[i]), name)) return d->u.items[i + 1];
    return UINT32_MAX;
}

static int get_u64(const struct rd *r, uint32_t id, const char *what, const char *key, uint64_t *v) {
    const struct pk_obj *o = id == UINT32_MAX ? NULL : obj(r, id);
    RETURN_IF(!o || o->kind != PK_INT || o->u.i < 0, PAGEIN_E_BAD_INDEX, "%s: '%s': %s is %s, expected an integer >= 0",
              r->where, key, what, !o ? "missing" : o->kind == PK_INT ? "negative" : "not an integer");
    *v = (uint64_t)o->u.i;
    return 0;
}

/* A torch.Size (a tuple of ints) of exactly ndim entries (or any count when
 * *ndim is UINT32_MAX, which it then becomes), into arena memory. */
static int get_dims(struct rd *r, uint32_t id, const char *what, const char *key, uint32_t *ndim, uint64_t **out) {
    const struct pk_obj *o = id == UINT32_MAX ? NULL : obj(r, id);
    RETURN_IF(!o || (o->kind != PK_TUPLE && o->kind != PK_LIST), PAGEIN_E_BAD_INDEX, "%s: '%s': %s is %s, expected a torch.Size",
              r->where, key, what, o ? "not a sequence" : "missing");
    RETURN_IF(o->n > PI_DCP_MAX_NDIM, PAGEIN_E_LIMIT, "%s: '%s': %s has %u dimensions (limit %d)", r->where, key, what, o->n,
              PI_DCP_MAX_NDIM);
    RETURN_IF(*ndim != UINT32_MAX && o->n != *ndim, PAGEIN_E_BAD_INDEX, "%s: '%s': %s has %u dimensions, the tensor %u",
              r->where, key, what, o->n, *ndim);
    uint32_t n = o->n;
    const uint32_t *items = o->u.items;
    uint64_t *d = pi_arena_alloc(&r->m->arena, (n ? n : 1) * sizeof *d);
    RETURN_IF(!d, -ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++) FORWARD_IF(get_u64(r, items[i], what, key, &d[i]));
    *ndim = n;
    *out = d;
    return 0;
}

/* TensorProperties: the tuple TensorProperties.__getstate__ returns
 * (dtype, layout, requires_grad, memory format, pin_memory), or a dict of
 * fields. Only the dtype matters; a layout other than strided is refused. */
static int properties(struct rd *r, uint32_t id, const char *key, pagein_dtype *dt) {
    RETURN_IF(id == UINT32_MAX || cls_of(r, id) != PKC_PROPERTIES, PAGEIN_E_BAD_INDEX,
              "%s: '%s': properties are not a TensorProperties", r->where, key);
    const struct pk_obj *o = obj(r, id);
    uint32_t dtype = UINT32_MAX, layout = UINT32_MAX;
    if (o->n >= 2 && obj(r, o->u.items[1])->kind == PK_TUPLE) {
        const struct pk_obj *t = obj(r, o->u.items[1]);
        if (t->n >= 1) dtype = t->u.items[0];
        if (t->n >= 2) layout = t->u.items[1];
    } else {
        dtype = field(r, id, "dtype");
        layout = field(r, id, "layout");
    }
    const struct pk_obj *d = dtype == UINT32_MAX ? NULL : obj(r, dtype);
    RETURN_IF(!d || d->kind != PK_GLOBAL || pk_globals[d->u.gid].kind != PKG_DTYPE, PAGEIN_E_BAD_INDEX,
              "%s: '%s': TensorProperties without a dtype", r->where, key);
    RETURN_IF(pk_globals[d->u.gid].dtype == PAGEIN_DTYPE_INVALID, PAGEIN_E_BAD_DTYPE, "%s: '%s': dtype %s is not supported",
              r->where, key, pk_globals[d->u.gid].name);
    if (layout != UINT32_MAX && obj(r, layout)->kind != PK_NONE)
        RETURN_IF(!str_is(obj(r, layout), "torch.strided"), PAGEIN_E_UNSUPPORTED,
                  "%s: '%s': layout %.*s is not supported (only torch.strided: sparse tensors have no dense bytes)",
                  r->where, key, obj(r, layout)->kind == PK_STR ? (int)PI_MIN(obj(r, layout)->u.s.len, 64u) : 1,
                  obj(r, layout)->kind == PK_STR ? (const char *)obj(r, layout)->u.s.p : "?");
    *dt = pk_globals[d->u.gid].dtype;
    return 0;
}

static int add_item(struct rd *r, uint32_t key, uint32_t val, size_t i) {
    struct pi_dcp_item *it = &r->m->items[i];
    const struct pk_obj *k = obj(r, key);
    RETURN_IF(k->kind != PK_STR, PAGEIN_E_BAD_INDEX, "%s: state_dict_metadata key %zu is not a string", r->where, i);
    it->name = pi_arena_strndup(&r->m->arena, (const char *)k->u.s.p, k->u.s.len);
    RETURN_IF(!it->name, -ENOMEM, "out of memory");
    it->name_len = k->u.s.len;
    int c = cls_of(r, val);
    if (c == PKC_BYTES_SM) {
        it->is_bytes = 1;
        it->nchunks = 1;
        it->chunks = pi_arena_alloc(&r->m->arena, sizeof *it->chunks);
        RETURN_IF(!it->chunks, -ENOMEM, "out of memory");
        memset(it->chunks, 0, sizeof *it->chunks);
        it->chunks[0].file = UINT32_MAX;
        return 0;
    }
    RETURN_IF(c != PKC_TENSOR_SM, PAGEIN_E_BAD_INDEX,
              "%s: '%s' is neither a TensorStorageMetadata nor a BytesStorageMetadata", r->where, it->name);
    FORWARD_IF(properties(r, field(r, val, "properties"), it->name, &it->dtype));
    it->ndim = UINT32_MAX;
    FORWARD_IF(get_dims(r, field(r, val, "size"), "size", it->name, &it->ndim, &it->size));
    it->nelements = 1;
    for (uint32_t d = 0; d < it->ndim; d++)
        RETURN_IF(pi_mul_overflow(it->nelements, it->size[d], &it->nelements), PAGEIN_E_OVERFLOW,
                  "%s: '%s': size overflows", r->where, it->name);
    uint32_t ch = field(r, val, "chunks");
    const struct pk_obj *l = ch == UINT32_MAX ? NULL : obj(r, ch);
    RETURN_IF(!l || (l->kind != PK_LIST && l->kind != PK_TUPLE), PAGEIN_E_BAD_INDEX, "%s: '%s' has no chunk list",
              r->where, it->name);
    RETURN_IF(l->n == 0, PAGEIN_E_BAD_INDEX, "%s: '%s' has no chunks", r->where, it->name);
    uint32_t n = l->n;
    const uint32_t *items = l->u.items;
    it->nchunks = n;
    it->chunks = pi_arena_alloc(&r->m->arena, n * sizeof *it->chunks);
    RETURN_IF(!it->chunks, -ENOMEM, "out of memory");
    memset(it->chunks, 0, n * sizeof *it->chunks);
    for (uint32_t j = 0; j < n; j++) {
        struct pi_dcp_chunk *cc = &it->chunks[j];
        cc->file = UINT32_MAX;
        RETURN_IF(cls_of(r, items[j]) != PKC_CHUNK_SM, PAGEIN_E_BAD_INDEX,
                  "%s: '%s': chunk %u is not a ChunkStorageMetadata", r->where, it->name, j);
        uint32_t nd = it->ndim;
        FORWARD_IF(get_dims(r, field(r, items[j], "offsets"), "chunk offsets", it->name, &nd, &cc->off));
        FORWARD_IF(get_dims(r, field(r, items[j], "sizes"), "chunk sizes", it->name, &nd, &cc->len));
        cc->nelements = 1;
        for (uint32_t d = 0; d < it->ndim; d++) {
            uint64_t end;
            RETURN_IF(pi_add_overflow(cc->off[d], cc->len[d], &end) || end > it->size[d], PAGEIN_E_BAD_OFFSET,
                      "%s: '%s': chunk %u spans [%llu, %llu + %llu) in dimension %u, outside the tensor's %llu",
                      r->where, it->name, j, (unsigned long long)cc->off[d], (unsigned long long)cc->off[d],
                      (unsigned long long)cc->len[d], d, (unsigned long long)it->size[d]);
            cc->nelements *= cc->len[d]; /* <= the tensor's count: no overflow */
        }
    }
    return 0;
}

/* Chunks a and b of it share an element. */
static bool overlap(const struct pi_dcp_item *it, const struct pi_dcp_chunk *a, const struct pi_dcp_chunk *b) {
    if (!a->nelements || !b->nelements) return false;
    for (uint32_t d = 0; d < it->ndim; d++)
        if (a->off[d] >= b->off[d] + b->len[d] || b->off[d] >= a->off[d] + a->len[d]) return false;
    return true;
}

struct sweep {
    uint64_t key;
    uint32_t idx;
};
static int sweep_cmp(const void *x, const void *y) {
    uint64_t a = ((const struct sweep *)x)->key, b = ((const struct sweep *)y)->key;
    return a < b ? -1 : a > b;
}

/* Chunks inside the tensor (checked when read), not overlapping, and
 * covering it: the element counts add up to the tensor's. Overlap is
 * checked by a sweep along the dimension with the most distinct chunk
 * starts (rows for a row split, columns for a column split). */
static int check_cover(const struct rd *r, const struct pi_dcp_item *it) {
    uint64_t sum = 0;
    for (uint32_t j = 0; j < it->nchunks; j++) sum += it->chunks[j].nelements; /* each <= total */
    if (it->nchunks > 1 && it->ndim > 0) {
        uint32_t best = 0;
        uint64_t bestn = 0;
        for (uint32_t d = 0; d < it->ndim; d++) {
            uint64_t distinct = 0;
            for (uint32_t j = 0; j < it->nchunks && distinct <= it->nchunks; j++) distinct += it->chunks[j].off[d] != it->chunks[0].off[d];
            if (distinct > bestn) bestn = distinct, best = d;
        }
        struct sweep *ord = pi_malloc(it->nchunks * sizeof *ord);
        RETURN_IF(!ord, -ENOMEM, "out of memory");
        for (uint32_t j = 0; j < it->nchunks; j++) ord[j].key = it->chunks[j].off[best], ord[j].idx = j;
        qsort(ord, it->nchunks, sizeof *ord, sweep_cmp);
        uint64_t pairs = 0;
        int rc = 0;
        for (uint32_t x = 0; x < it->nchunks && rc == 0; x++) {
            const struct pi_dcp_chunk *a = &it->chunks[ord[x].idx];
            for (uint32_t y = x + 1; y < it->nchunks && rc == 0; y++) {
                const struct pi_dcp_chunk *b = &it->chunks[ord[y].idx];
                if (b->off[best] >= a->off[best] + a->len[best]) break;
                if (++pairs > MAX_PAIRS)
                    rc = pi_err(PAGEIN_E_LIMIT, "%s: '%s': %u chunks are too many to check for overlap", r->where,
                                it->name, it->nchunks);
                else if (overlap(it, a, b))
                    rc = pi_err(PAGEIN_E_BAD_OFFSET, "%s: '%s': chunks %u and %u overlap", r->where, it->name,
                                PI_MIN(ord[x].idx, ord[y].idx), PI_MAX(ord[x].idx, ord[y].idx));
            }
        }
        pi_free(ord);
        FORWARD_IF(rc);
    }
    RETURN_IF(sum > it->nelements, PAGEIN_E_BAD_OFFSET, "%s: '%s': chunks hold %llu elements, the tensor %llu", r->where,
              it->name, (unsigned long long)sum, (unsigned long long)it->nelements);
    RETURN_IF(sum < it->nelements, PAGEIN_E_BAD_OFFSET,
              "%s: '%s': chunks cover %llu of the tensor's %llu elements (a gap of %llu elements: no rank saved them)",
              r->where, it->name, (unsigned long long)sum, (unsigned long long)it->nelements,
              (unsigned long long)(it->nelements - sum));
    return 0;
}

/* relative_path: a plain file name inside the checkpoint directory. */
static int file_index(struct rd *r, uint32_t id, const char *key, uint32_t *out) {
    const struct pk_obj *o = id == UINT32_MAX ? NULL : obj(r, id);
    RETURN_IF(!o || o->kind != PK_STR, PAGEIN_E_BAD_INDEX, "%s: '%s': storage relative_path is not a string", r->where, key);
    const char *s = (const char *)o->u.s.p;
    size_t n = o->u.s.len;
    RETURN_IF(n == 0 || n > 255 || memchr(s, '/', n) || memchr(s, '\\', n) || memchr(s, 0, n) ||
                  (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.') ||
                  (n == strlen(PI_DCP_META_NAME) && !memcmp(s, PI_DCP_META_NAME, n)),
              PAGEIN_E_BAD_INDEX, "%s: '%s': relative_path '%.*s' is not a plain file name in the checkpoint directory",
              r->where, key, (int)PI_MIN(n, 200u), s);
    struct pi_dcp_meta *m = r->m;
    if ((m->nfiles + 1) * 2 > r->fhcap) {
        size_t nc = r->fhcap ? r->fhcap * 2 : 64;
        uint32_t *nh = pi_calloc(nc, sizeof *nh);
        RETURN_IF(!nh, -ENOMEM, "out of memory");
        for (size_t i = 0; i < m->nfiles; i++) {
            size_t h = pi_hash_bytes(m->files[i], strlen(m->files[i])) & (nc - 1);
            while (nh[h]) h = (h + 1) & (nc - 1);
            nh[h] = (uint32_t)i + 1;
        }
        pi_free(r->fh);
        r->fh = nh, r->fhcap = nc;
    }
    size_t h = pi_hash_bytes(s, n) & (r->fhcap - 1);
    for (; r->fh[h]; h = (h + 1) & (r->fhcap - 1)) {
        const char *f = m->files[r->fh[h] - 1];
        if (strlen(f) == n && !memcmp(f, s, n)) {
            *out = r->fh[h] - 1;
            return 0;
        }
    }
    char **nf = pi_realloc(m->files, (m->nfiles + 1) * sizeof *nf);
    RETURN_IF(!nf, -ENOMEM, "out of memory");
    m->files = nf;
    RETURN_IF(!(m->files[m->nfiles] = pi_arena_strndup(&m->arena, s, n)), -ENOMEM, "out of memory");
    r->fh[h] = (uint32_t)m->nfiles + 1;
    *out = (uint32_t)m->nfiles++;
    return 0;
}

/* Which chunk of it a MetadataIndex names: its offsets (and the index
 * hint, checked first). */
static int find_chunk(struct rd *r, struct pi_dcp_item *it, uint32_t mi, uint32_t *out) {
    if (it->is_bytes) {
        *out = 0;
        return 0;
    }
    uint32_t nd = it->ndim;
    uint64_t *off;
    FORWARD_IF(get_dims(r, field(r, mi, "offset"), "storage entry offset", it->name, &nd, &off));
    uint32_t hi = field(r, mi, "index");
    if (hi != UINT32_MAX && obj(r, hi)->kind == PK_INT && obj(r, hi)->u.i >= 0 && (uint64_t)obj(r, hi)->u.i < it->nchunks) {
        uint32_t j = (uint32_t)obj(r, hi)->u.i;
        if (!memcmp(it->chunks[j].off, off, nd * sizeof *off)) {
            *out = j;
            return 0;
        }
    }
    for (uint32_t j = 0; j < it->nchunks; j++) {
        RETURN_IF(++r->probes > MAX_PROBES, PAGEIN_E_LIMIT, "%s: '%s': too many storage entries without a right index hint",
                  r->where, it->name);
        if (!memcmp(it->chunks[j].off, off, nd * sizeof *off)) {
            *out = j;
            return 0;
        }
    }
    char at[96];
    int k = 0;
    for (uint32_t d = 0; d < nd && k < 80; d++) k += snprintf(at + k, sizeof at - (size_t)k, d ? ", %llu" : "%llu", (unsigned long long)off[d]);
    if (!nd) at[0] = 0;
    return pi_err(PAGEIN_E_BAD_INDEX, "%s: '%s': a storage entry at offsets (%s) matches no chunk", r->where, it->name, at);
}

/* storage_data: {MetadataIndex: _StorageInfo} */
static int storage(struct rd *r, uint32_t sd) {
    const struct pk_obj *d = sd == UINT32_MAX ? NULL : obj(r, sd);
    RETURN_IF(!d || d->kind != PK_DICT, PAGEIN_E_BAD_INDEX, "%s: storage_data is not a dict", r->where);
    struct pi_dcp_meta *m = r->m;
    for (uint32_t i = 0; i + 1 < d->n; i += 2) {
        uint32_t mi = d->u.items[i], si = d->u.items[i + 1];
        RETURN_IF(cls_of(r, mi) != PKC_INDEX, PAGEIN_E_BAD_INDEX, "%s: storage_data key %u is not a MetadataIndex",
                  r->where, i / 2);
        uint32_t fq = field(r, mi, "fqn");
        RETURN_IF(fq == UINT32_MAX || obj(r, fq)->kind != PK_STR, PAGEIN_E_BAD_INDEX,
                  "%s: storage_data key %u has no fqn", r->where, i / 2);
        struct pi_dcp_item *it = (struct pi_dcp_item *)pi_dcp_meta_find(m, (const char *)obj(r, fq)->u.s.p, obj(r, fq)->u.s.len);
        RETURN_IF(!it, PAGEIN_E_BAD_INDEX, "%s: storage_data names '%.*s', which state_dict_metadata does not list",
                  r->where, (int)PI_MIN(obj(r, fq)->u.s.len, 200u), (const char *)obj(r, fq)->u.s.p);
        RETURN_IF(cls_of(r, si) != PKC_STORAGE_INFO, PAGEIN_E_BAD_INDEX, "%s: '%s': storage entry is not a _StorageInfo",
                  r->where, it->name);
        uint32_t j = 0;
        FORWARD_IF(find_chunk(r, it, mi, &j));
        struct pi_dcp_chunk *c = &it->chunks[j];
        RETURN_IF(c->file != UINT32_MAX, PAGEIN_E_DUPLICATE, "%s: '%s': chunk %u has two storage entries", r->where,
                  it->name, j);
        uint32_t td = field(r, si, "transform_descriptors");
        if (td != UINT32_MAX) {
            const struct pk_obj *t = obj(r, td);
            RETURN_IF(t->kind != PK_NONE && !((t->kind == PK_LIST || t->kind == PK_TUPLE) && t->n == 0), PAGEIN_E_UNSUPPORTED,
                      "%s: '%s': chunk %u is stored through transforms (transform_descriptors, e.g. compression); "
                      "pagein reads plain torch.save blobs only",
                      r->where, it->name, j);
        }
        FORWARD_IF(file_index(r, field(r, si, "relative_path"), it->name, &c->file));
        FORWARD_IF(get_u64(r, field(r, si, "offset"), "storage offset", it->name, &c->at));
        FORWARD_IF(get_u64(r, field(r, si, "length"), "storage length", it->name, &c->nbytes));
        uint64_t end;
        RETURN_IF(pi_add_overflow(c->at, c->nbytes, &end), PAGEIN_E_OVERFLOW, "%s: '%s': storage offset + length overflow",
                  r->where, it->name);
    }
    for (size_t i = 0; i < m->n; i++)
        for (uint32_t j = 0; j < m->items[i].nchunks; j++)
            RETURN_IF(m->items[i].chunks[j].file == UINT32_MAX, PAGEIN_E_BAD_INDEX,
                      "%s: '%s': chunk %u has no storage entry (no file holds it)", r->where, m->items[i].name, j);
    return 0;
}

const struct pi_dcp_item *pi_dcp_meta_find(const struct pi_dcp_meta *m, const char *name, size_t len) {
    if (!m || !m->ihcap) return NULL;
    for (size_t h = pi_hash_bytes(name, len) & (m->ihcap - 1); m->ihash[h]; h = (h + 1) & (m->ihcap - 1)) {
        const struct pi_dcp_item *it = &m->items[m->ihash[h] - 1];
        if (it->name_len == len && !memcmp(it->name, name, len)) return it;
    }
    return NULL;
}

/* The name index: n items, every name once. */
static int index_names(struct rd *r, size_t n) {
    struct pi_dcp_meta *m = r->m;
    size_t cap = 64;
    while (cap < n * 2) cap *= 2;
    m->ihash = pi_calloc(cap, sizeof *m->ihash);
    RETURN_IF(!m->ihash, -ENOMEM, "out of memory");
    m->ihcap = cap;
    for (size_t i = 0; i < n; i++) {
        const struct pi_dcp_item *it = &m->items[i];
        RETURN_IF(pi_dcp_meta_find(m, it->name, it->name_len), PAGEIN_E_DUPLICATE, "%s: '%s' is listed twice", r->where,
                  it->name);
        size_t h = pi_hash_bytes(it->name, it->name_len) & (cap - 1);
        while (m->ihash[h]) h = (h + 1) & (cap - 1);
        m->ihash[h] = (uint32_t)i + 1;
    }
    return 0;
}

static int read_meta(struct rd *r) {
    struct pi_dcp_meta *m = r->m;
    uint32_t root = r->st->root;
    RETURN_IF(cls_of(r, root) != PKC_METADATA, PAGEIN_E_BAD_INDEX, "%s: the pickle is not a DCP Metadata object",
              r->where);
    uint32_t sdm = field(r, root, "state_dict_metadata");
    const struct pk_obj *d = sdm == UINT32_MAX ? NULL : obj(r, sdm);
    RETURN_IF(!d || d->kind != PK_DICT, PAGEIN_E_BAD_INDEX, "%s: state_dict_metadata is not a dict", r->where);
    size_t n = d->n / 2;
    m->items = pi_calloc(n ? n : 1, sizeof *m->items);
    RETURN_IF(!m->items, -ENOMEM, "out of memory");
    const uint32_t *kv = d->u.items;
    for (size_t i = 0; i < n; i++) {
        FORWARD_IF(add_item(r, kv[2 * i], kv[2 * i + 1], i));
        m->n = i + 1;
    }
    RETURN_IF(n > UINT32_MAX / 2, PAGEIN_E_LIMIT, "%s: %zu items", r->where, n);
    FORWARD_IF(index_names(r, n));
    for (size_t i = 0; i < n; i++)
        if (!m->items[i].is_bytes) FORWARD_IF(check_cover(r, &m->items[i]));
    return storage(r, field(r, root, "storage_data"));
}

int pi_dcp_meta_parse(const uint8_t *buf, size_t len, const char *where, struct pi_dcp_meta *m) {
    struct pk_state st;
    memset(&st, 0, sizeof st);
    st.dcp = 1;
    m->generation = 1;
    int rc = pk_load(buf, len, &st);
    if (rc < 0) {
        pi_err_prefix(where);
    } else {
        struct rd r = {&st, where, m, 0, NULL, 0};
        rc = read_meta(&r);
        pi_free(r.fh);
    }
    pk_free(&st);
    return rc;
}

int pi_dcp_meta_check_files(const struct pi_dcp_meta *m, const char *where, const uint64_t *sizes) {
    for (size_t i = 0; i < m->n; i++)
        for (uint32_t j = 0; j < m->items[i].nchunks; j++) {
            const struct pi_dcp_chunk *c = &m->items[i].chunks[j];
            RETURN_IF(c->at + c->nbytes > sizes[c->file], PAGEIN_E_BAD_OFFSET,
                      "%s: '%s': chunk %u is bytes [%llu, %llu) of %s, which has %llu bytes", where, m->items[i].name, j,
                      (unsigned long long)c->at, (unsigned long long)(c->at + c->nbytes), m->files[c->file],
                      (unsigned long long)sizes[c->file]);
        }
    return 0;
}
