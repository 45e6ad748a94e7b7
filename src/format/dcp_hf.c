/* dcp_hf.c - the DCP_SHARDING_INFO string of torch's safetensors flavour
 * of a Distributed Checkpoint, and the checks of one tensor's chunks
 * (overlap, cover, dtype, ndim), as untrusted input. Buffer in, no I/O
 * (docs/FORMAT-DCP.md). */
#include "dcp_hf.h"
#include "../core/json.h"

#include <stdlib.h>

/* Work bound: pairs of chunks compared for overlap, per tensor. */
#define MAX_PAIRS (1ull << 26)

void pi_dcp_hf_info_free(struct pi_dcp_hf_info *in) {
    if (!in) return;
    for (size_t i = 0; i < in->n; i++)
        pi_free(in->e[i].name), pi_free(in->e[i].off), pi_free(in->e[i].fqn), pi_free(in->e[i].shape);
    pi_free(in->e);
    memset(in, 0, sizeof *in);
}

static int name_cmp(const char *a, size_t al, const char *b, size_t bl) {
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static int entry_cmp(const void *x, const void *y) {
    const struct pi_dcp_hf_entry *a = x, *b = y;
    return name_cmp(a->name, a->name_len, b->name, b->name_len);
}

/* An array of at most PI_DCP_MAX_NDIM u64 (member what of e) into *v, *n. */
static int read_dims(struct pi_json *j, const char *file, const struct pi_dcp_hf_entry *e, const char *what,
                     uint64_t **v, uint32_t *n) {
    RETURN_IF(*v, PAGEIN_E_DUPLICATE, "%s: DCP_SHARDING_INFO: '%s' has %s twice", file, e->name, what);
    int rc = pi_json_enter(j, PI_JSON_ARRAY);
    RETURN_IF(rc < 0, rc, "%s: DCP_SHARDING_INFO: '%s': %s is not an array", file, e->name, what);
    *v = pi_calloc(PI_DCP_MAX_NDIM, sizeof **v);
    RETURN_IF(!*v, -ENOMEM, "out of memory");
    while ((rc = pi_json_next(j, NULL, NULL)) > 0) {
        RETURN_IF(*n == PI_DCP_MAX_NDIM, PAGEIN_E_LIMIT, "%s: DCP_SHARDING_INFO: '%s': %s has more than %d entries",
                  file, e->name, what, PI_DCP_MAX_NDIM);
        rc = pi_json_u64(j, &(*v)[*n]);
        RETURN_IF(rc < 0, rc, "%s: DCP_SHARDING_INFO: '%s': %s entry %u is not a non-negative integer", file,
                  e->name, what, *n);
        (*n)++;
    }
    RETURN_IF(rc < 0, rc, "%s: DCP_SHARDING_INFO: '%s': bad %s", file, e->name, what);
    return 0;
}

/* {"saved_offsets": [u64, ...], "fqn": "...", "shape": [u64, ...], ...} into e. */
static int read_entry(struct pi_json *j, const char *file, struct pi_dcp_hf_entry *e) {
    int rc = pi_json_enter(j, PI_JSON_OBJECT);
    RETURN_IF(rc < 0, rc, "%s: DCP_SHARDING_INFO: '%s' is not an object", file, e->name);
    const char *k;
    size_t kl;
    while ((rc = pi_json_next(j, &k, &kl)) > 0) {
        if (kl == 13 && !memcmp(k, "saved_offsets", 13)) {
            FORWARD_IF(read_dims(j, file, e, "saved_offsets", &e->off, &e->ndim));
        } else if (kl == 5 && !memcmp(k, "shape", 5)) {
            FORWARD_IF(read_dims(j, file, e, "shape", &e->shape, &e->shape_ndim));
        } else if (kl == 3 && !memcmp(k, "fqn", 3)) {
            const char *v;
            size_t vl;
            RETURN_IF(e->fqn, PAGEIN_E_DUPLICATE, "%s: DCP_SHARDING_INFO: '%s' has fqn twice", file, e->name);
            rc = pi_json_string(j, &v, &vl);
            RETURN_IF(rc < 0, rc, "%s: DCP_SHARDING_INFO: '%s': fqn is not a string", file, e->name);
            RETURN_IF(!(e->fqn = pi_strndup(v, vl)), -ENOMEM, "out of memory");
            e->fqn_len = vl;
        } else if ((rc = pi_json_skip(j)) < 0) {
            return pi_err(rc, "%s: DCP_SHARDING_INFO: '%s': bad member", file, e->name);
        }
    }
    RETURN_IF(rc < 0, rc, "%s: DCP_SHARDING_INFO: '%s': bad object", file, e->name);
    RETURN_IF(!e->off, PAGEIN_E_BAD_INDEX, "%s: DCP_SHARDING_INFO: '%s' has no saved_offsets", file, e->name);
    return 0;
}

int pi_dcp_hf_info_parse(const char *s, size_t len, const char *file, struct pi_dcp_hf_info *in) {
    struct pi_json j;
    pi_json_init(&j, s, len, 16);
    int rc = pi_json_enter(&j, PI_JSON_OBJECT);
    if (rc < 0) {
        rc = pi_err(rc, "%s: DCP_SHARDING_INFO is not a JSON object (byte %zu)", file, pi_json_offset(&j));
        goto out;
    }
    const char *k;
    size_t kl;
    while ((rc = pi_json_next(&j, &k, &kl)) > 0) {
        if (in->n == in->cap) { /* grows with the input: each member takes bytes of s */
            size_t nc = in->cap ? in->cap * 2 : 8;
            struct pi_dcp_hf_entry *ne = pi_realloc(in->e, nc * sizeof *ne);
            if (!ne) {
                rc = pi_err(-ENOMEM, "out of memory");
                goto out;
            }
            in->e = ne, in->cap = nc;
        }
        struct pi_dcp_hf_entry *e = &in->e[in->n];
        memset(e, 0, sizeof *e);
        e->name = pi_strndup(k, kl);
        if (!e->name) {
            rc = pi_err(-ENOMEM, "out of memory");
            goto out;
        }
        e->name_len = kl;
        in->n++;
        if ((rc = read_entry(&j, file, e)) < 0) goto out;
    }
    if (rc == 0 && (rc = pi_json_finish(&j)) < 0) rc = pi_err(rc, "%s: DCP_SHARDING_INFO: trailing bytes", file);
    if (rc < 0) {
        if (rc != -ENOMEM) rc = pi_err(rc, "%s: DCP_SHARDING_INFO is not valid JSON (byte %zu)", file, pi_json_offset(&j));
        goto out;
    }
    if (in->n) qsort(in->e, in->n, sizeof *in->e, entry_cmp);
    for (size_t i = 1; i < in->n; i++)
        if (!entry_cmp(&in->e[i - 1], &in->e[i])) {
            rc = pi_err(PAGEIN_E_DUPLICATE, "%s: DCP_SHARDING_INFO names '%s' twice", file, in->e[i].name);
            goto out;
        }
out:
    pi_json_free(&j);
    return rc < 0 ? rc : 0;
}

const struct pi_dcp_hf_entry *pi_dcp_hf_info_find(const struct pi_dcp_hf_info *in, const char *name, size_t len) {
    size_t lo = 0, hi = in->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = name_cmp(in->e[mid].name, in->e[mid].name_len, name, len);
        if (!c) return &in->e[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static bool boxes_overlap(uint32_t ndim, const struct pi_dcp_hf_piece *a, const struct pi_dcp_hf_piece *b) {
    for (uint32_t d = 0; d < ndim; d++)
        if (a->off[d] >= b->off[d] + b->len[d] || b->off[d] >= a->off[d] + a->len[d]) return false;
    return true;
}

int pi_dcp_hf_check(const char *name, const struct pi_dcp_hf_piece *p, size_t np, uint32_t *ndim, uint64_t *size,
                    uint64_t *nelements) {
    RETURN_IF(np == 0, PAGEIN_E_BAD_INDEX, "'%s': no chunks", name);
    uint32_t nd = p[0].ndim;
    RETURN_IF(nd > PI_DCP_MAX_NDIM, PAGEIN_E_LIMIT, "'%s' in %s: more than %d dimensions", name, p[0].file,
              PI_DCP_MAX_NDIM);
    for (uint32_t d = 0; d < nd; d++) size[d] = 0;
    uint64_t sum = 0;
    for (size_t i = 0; i < np; i++) {
        RETURN_IF(p[i].ndim != nd, PAGEIN_E_BAD_TENSOR_INFO, "'%s': its chunk in %s has %u dimensions, the one in %s %u",
                  name, p[i].file, p[i].ndim, p[0].file, nd);
        RETURN_IF(p[i].dtype != p[0].dtype, PAGEIN_E_BAD_DTYPE, "'%s': its chunk in %s is %s, the one in %s %s", name,
                  p[i].file, pagein_dtype_get(p[i].dtype)->name, p[0].file, pagein_dtype_get(p[0].dtype)->name);
        uint64_t ne = 1;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t end;
            RETURN_IF(pi_add_overflow(p[i].off[d], p[i].len[d], &end), PAGEIN_E_BAD_OFFSET,
                      "'%s' in %s: offset %llu + size %llu overflows in dimension %u", name, p[i].file,
                      (unsigned long long)p[i].off[d], (unsigned long long)p[i].len[d], d);
            if (end > size[d]) size[d] = end;
            RETURN_IF(pi_mul_overflow(ne, p[i].len[d], &ne), PAGEIN_E_OVERFLOW, "'%s' in %s: element count overflows",
                      name, p[i].file);
        }
        RETURN_IF(pi_add_overflow(sum, ne, &sum), PAGEIN_E_OVERFLOW, "'%s': element count overflows", name);
    }
    uint64_t total = 1;
    for (uint32_t d = 0; d < nd; d++)
        RETURN_IF(pi_mul_overflow(total, size[d], &total), PAGEIN_E_OVERFLOW, "'%s': element count overflows", name);
    RETURN_IF((uint64_t)np * (np - 1) / 2 > MAX_PAIRS, PAGEIN_E_LIMIT, "'%s': %zu chunks: too many to check", name, np);
    for (size_t i = 0; i < np; i++)
        for (size_t k = i + 1; k < np; k++)
            RETURN_IF(boxes_overlap(nd, &p[i], &p[k]), PAGEIN_E_BAD_OFFSET,
                      "'%s': its chunks in %s and %s overlap", name, p[i].file, p[k].file);
    RETURN_IF(sum < total, PAGEIN_E_BAD_OFFSET, "'%s': its chunks leave a gap of %llu elements (of %llu)", name,
              (unsigned long long)(total - sum), (unsigned long long)total);
    for (size_t i = 0; i < np; i++) { /* a stated whole shape must be the one the chunks make */
        if (!p[i].shape) continue;
        bool same = p[i].shape_ndim == nd;
        for (uint32_t d = 0; same && d < nd; d++) same = p[i].shape[d] == size[d];
        RETURN_IF(!same, PAGEIN_E_BAD_OFFSET,
                  "'%s': DCP_SHARDING_INFO in %s gives a shape of %u dimensions that its chunks do not make "
                  "(dimension 0: %llu, the chunks reach %llu)",
                  name, p[i].file, p[i].shape_ndim, (unsigned long long)(p[i].shape_ndim ? p[i].shape[0] : 0),
                  (unsigned long long)(nd ? size[0] : 0));
    }
    *ndim = nd, *nelements = total;
    return 0;
}
