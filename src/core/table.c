/* table.c - the tensor table shared by all formats: name index, layer index
 * and layer order. */
#include "../internal.h"

#include <stdlib.h>

void pi_table_init(struct pi_table *t) { memset(t, 0, sizeof *t); }

void pi_table_free(struct pi_table *t) {
    if (!t) return;
    pi_free(t->t);
    pi_free(t->meta);
    pi_free(t->by_layer);
    pi_free(t->hash);
    pi_free(t->mhash);
    if (t->ext && t->ext_free) t->ext_free(t->ext);
    pi_arena_free(&t->arena);
    memset(t, 0, sizeof *t);
}

pagein_tensor *pi_table_add(struct pi_table *t, const char *name, size_t name_len, pagein_dtype dtype,
                            uint32_t ndim, const uint64_t *shape, uint64_t offset, uint64_t nbytes) {
    if (pi_grow((void **)&t->t, &t->cap, t->n + 1, sizeof *t->t) < 0) return NULL;
    pagein_tensor *r = &t->t[t->n];
    memset(r, 0, sizeof *r);
    r->name = pi_arena_strndup(&t->arena, name, name_len);
    if (!r->name) return NULL;
    r->name_len = name_len;
    uint64_t *sh = NULL;
    if (ndim) {
        sh = pi_arena_alloc(&t->arena, ndim * sizeof *sh);
        if (!sh) return NULL;
        memcpy(sh, shape, ndim * sizeof *sh);
    }
    uint64_t ne = 1;
    for (uint32_t i = 0; i < ndim; i++)
        if (pi_mul_overflow(ne, shape[i], &ne)) ne = UINT64_MAX;
    r->shape = sh;
    r->ndim = ndim;
    r->dtype = dtype;
    r->offset = offset;
    r->nbytes = nbytes;
    r->nelements = ne;
    r->layer = -1;
    t->n++;
    return r;
}

pagein_meta *pi_table_add_meta(struct pi_table *t, const char *key, size_t key_len) {
    if (pi_grow((void **)&t->meta, &t->metacap, t->nmeta + 1, sizeof *t->meta) < 0) return NULL;
    pagein_meta *m = &t->meta[t->nmeta];
    memset(m, 0, sizeof *m);
    m->key = pi_arena_strndup(&t->arena, key, key_len);
    if (!m->key) return NULL;
    m->key_len = key_len;
    t->nmeta++;
    return m;
}

/* FNV-1a, 64-bit. Names are short; this is not the bottleneck. */
uint64_t pi_hash_bytes(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static size_t hash_cap(size_t n) {
    size_t c = 16;
    while (c < n * 2) c *= 2;
    return c;
}

/* ---- layer index from names --------------------------------------------- */

/* Containers after which `.N.` is a layer number (specs/SAFETENSORS.md 6,
 * specs/GGUF.md 4). */
static const char *const containers[] = {"layers", "h", "blocks", "block", "layer", "blk"};

static bool has_word(const char *s, size_t n, const char *w) {
    size_t wl = strlen(w);
    for (size_t i = 0; i + wl <= n; i++)
        if (memcmp(s + i, w, wl) == 0) return true;
    return false;
}

int32_t pagein_layer_from_name(const char *name, size_t len, int *tail) {
    if (tail) *tail = 0;
    if (!name) return -1;
    size_t seg = 0; /* start of current segment */
    while (seg < len) {
        size_t end = seg;
        while (end < len && name[end] != '.') end++;
        /* segment [seg, end) followed by '.', then digits, then '.' or end */
        if (end < len) {
            for (size_t c = 0; c < PI_ARRAY_LEN(containers); c++) {
                size_t cl = strlen(containers[c]);
                if (end - seg != cl || memcmp(name + seg, containers[c], cl) != 0) continue;
                size_t d = end + 1, de = d;
                uint64_t v = 0;
                while (de < len && name[de] >= '0' && name[de] <= '9' && v < 100000000) {
                    v = v * 10 + (uint64_t)(name[de] - '0');
                    de++;
                }
                if (de > d && (de == len || name[de] == '.') && v <= INT32_MAX) return (int32_t)v;
            }
        }
        seg = end + 1;
    }
    if (tail) {
        /* Globals: embeddings go first, final norms and heads last. */
        bool front = has_word(name, len, "embed") || has_word(name, len, "embd") || has_word(name, len, "wte") ||
                     has_word(name, len, "wpe") || has_word(name, len, "tok_") ||
                     has_word(name, len, "token_types") || has_word(name, len, "shared");
        bool back = has_word(name, len, "norm") || has_word(name, len, "ln_f") ||
                    has_word(name, len, "head") || has_word(name, len, "output") ||
                    has_word(name, len, "classifier") || has_word(name, len, "pooler") ||
                    has_word(name, len, "cls") || has_word(name, len, "final");
        *tail = back && !front;
    }
    return -1;
}

/* Layer-order sort key: (group, layer, file index). */
struct lkey {
    int group;
    int32_t layer;
    uint32_t idx;
};

static int lkey_cmp(const void *a, const void *b) {
    const struct lkey *x = a, *y = b;
    if (x->group != y->group) return x->group < y->group ? -1 : 1;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* The two name indexes (tensor names, metadata keys): open addressing over
 * cap slots (a power of two) holding entry + 1, 0 empty; name() gives
 * entry i's name. The slot holding s, or the empty slot where it goes. */
typedef const char *(*name_fn)(const struct pi_table *t, size_t i, size_t *len);
static const char *tensor_name(const struct pi_table *t, size_t i, size_t *len) {
    *len = t->t[i].name_len;
    return t->t[i].name;
}
static const char *meta_key(const struct pi_table *t, size_t i, size_t *len) {
    *len = t->meta[i].key_len;
    return t->meta[i].key;
}
static size_t name_slot(const struct pi_table *t, const uint32_t *hash, size_t cap, name_fn name, const char *s,
                        size_t len) {
    size_t k = pi_hash_bytes(s, len) & (cap - 1);
    while (hash[k]) {
        size_t ol;
        const char *o = name(t, hash[k] - 1, &ol);
        if (ol == len && memcmp(o, s, len) == 0) break;
        k = (k + 1) & (cap - 1);
    }
    return k;
}

int pi_table_finish(struct pi_table *t, const void *base) {
    /* name index */
    pi_free(t->hash);
    t->hcap = hash_cap(t->n);
    t->hash = pi_calloc(t->hcap, sizeof *t->hash);
    if (!t->hash) return -ENOMEM;
    for (size_t i = 0; i < t->n; i++) {
        pagein_tensor *r = &t->t[i];
        r->index = (uint32_t)i;
        if (base) r->data = (const uint8_t *)base + r->offset;
        size_t s = name_slot(t, t->hash, t->hcap, tensor_name, r->name, r->name_len);
        if (t->hash[s]) return pi_err(PAGEIN_E_DUPLICATE, "duplicate tensor name '%s'", r->name);
        t->hash[s] = (uint32_t)i + 1;
    }
    /* metadata index */
    pi_free(t->mhash);
    t->mhcap = hash_cap(t->nmeta);
    t->mhash = pi_calloc(t->mhcap, sizeof *t->mhash);
    if (!t->mhash) return -ENOMEM;
    for (size_t i = 0; i < t->nmeta; i++) {
        const pagein_meta *m = &t->meta[i];
        size_t s = name_slot(t, t->mhash, t->mhcap, meta_key, m->key, m->key_len);
        if (t->mhash[s]) return pi_err(PAGEIN_E_DUPLICATE, "duplicate metadata key '%s'", m->key);
        t->mhash[s] = (uint32_t)i + 1;
    }
    /* layers and layer order */
    pi_free(t->by_layer);
    t->by_layer = pi_malloc((t->n ? t->n : 1) * sizeof *t->by_layer);
    struct lkey *keys = pi_malloc((t->n ? t->n : 1) * sizeof *keys);
    if (!t->by_layer || !keys) {
        pi_free(keys);
        return -ENOMEM;
    }
    int32_t maxl = -1;
    bool sorted = true;
    for (size_t i = 0; i < t->n; i++) {
        int tail = 0;
        pagein_tensor *r = &t->t[i];
        r->layer = pagein_layer_from_name(r->name, r->name_len, &tail);
        keys[i].group = r->layer >= 0 ? 1 : (tail ? 2 : 0);
        keys[i].layer = r->layer;
        keys[i].idx = (uint32_t)i;
        if (r->layer > maxl) maxl = r->layer;
        if (i && sorted) sorted = lkey_cmp(&keys[i - 1], &keys[i]) <= 0;
    }
    /* Layer order: (group, layer) buckets are few and dense, so a stable
     * counting sort is O(n); fall back to qsort when layer numbers are
     * sparse enough that the buckets would not be proportional to n. */
    uint32_t *cnt = NULL;
    size_t nb = (size_t)maxl + 3; /* group 0, layers 0..maxl, group 2 */
    if (!sorted && nb <= 4 * t->n + 1024) cnt = pi_calloc(nb + 1, sizeof *cnt);
    if (sorted) {
        for (size_t i = 0; i < t->n; i++) t->by_layer[i] = (uint32_t)i;
    } else if (cnt) {
#define BUCKET(k) ((k).group == 0 ? 0 : (k).group == 2 ? nb - 1 : (size_t)(k).layer + 1)
        for (size_t i = 0; i < t->n; i++) cnt[BUCKET(keys[i]) + 1]++;
        for (size_t b = 1; b <= nb; b++) cnt[b] += cnt[b - 1];
        for (size_t i = 0; i < t->n; i++) t->by_layer[cnt[BUCKET(keys[i])]++] = (uint32_t)i;
#undef BUCKET
        pi_free(cnt);
    } else {
        qsort(keys, t->n, sizeof *keys, lkey_cmp);
        for (size_t i = 0; i < t->n; i++) t->by_layer[i] = keys[i].idx;
    }
    pi_free(keys);
    return 0;
}

const pagein_tensor *pi_table_find(const struct pi_table *t, const char *name, size_t len) {
    if (!t->hcap || !name) return NULL;
    size_t s = name_slot(t, t->hash, t->hcap, tensor_name, name, len);
    return t->hash[s] ? &t->t[t->hash[s] - 1] : NULL;
}

const pagein_meta *pi_table_find_meta(const struct pi_table *t, const char *key, size_t len) {
    if (!t->mhcap || !key) return NULL;
    size_t s = name_slot(t, t->mhash, t->mhcap, meta_key, key, len);
    return t->mhash[s] ? &t->meta[t->mhash[s] - 1] : NULL;
}
