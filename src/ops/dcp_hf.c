/* dcp_hf.c - torch's safetensors flavour of a Distributed Checkpoint
 * (torch 2.7+: each rank's file a safetensors file whose "__metadata__"
 * holds DCP_SHARDING_INFO, where each saved chunk lies in its tensor),
 * opened as a whole, from a local directory or any source URL: the files
 * found (a listing, or torch's file names where the source cannot list),
 * opened once each (local files mapped) and validated, the chunks of every
 * tensor checked (format/dcp_hf.c), whole tensors assembled, and the
 * checkpoint consolidated into safetensors through one range-engine run
 * (ops/dcp_conv.c; docs/FORMAT-DCP.md). */
#include "../format/dcp_hf.h"
#include "../internal.h"
#include "convert.h"
#include "dcp_conv.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define MAX_FILES 65536

struct hf_piece {
    const char *name; /* the tensor's name: the entry's fqn, else its key in the file (borrowed) */
    size_t name_len;
    uint32_t file;
    const pagein_tensor *src;
    const struct pi_dcp_hf_entry *e; /* its DCP_SHARDING_INFO entry (borrowed from the file's info) */
    const uint64_t *off;             /* e->off */
};

struct hf_tensor {
    const char *name;
    pagein_dtype dtype;
    uint32_t ndim;
    uint64_t size[PI_DCP_MAX_NDIM];
    uint64_t nelements, nbytes;
    size_t p0, np; /* pieces[p0 .. p0 + np) */
};

struct pagein_dcp_hf {
    char *dir;                  /* the directory holding the files */
    char **names;               /* file names */
    pagein_file **f;
    struct pi_dcp_hf_info *info; /* per file */
    size_t nfiles;
    struct hf_piece *p;
    size_t np;
    struct hf_tensor *t;
    size_t nt;
};

static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The regular *.safetensors files of a local dir, sorted. */
static int list_local(const char *dir, char ***out, size_t *n) {
    DIR *d = opendir(dir);
    if (!d) return pi_err(-errno, "%s: cannot open the directory", dir);
    char **v = NULL;
    size_t k = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || !pi_ends_with(de->d_name, ".safetensors")) continue;
        char *p = pi_path_join(dir, de->d_name);
        struct stat st;
        int reg = p && stat(p, &st) == 0 && S_ISREG(st.st_mode);
        pi_free(p);
        if (!reg) continue;
        if (k == MAX_FILES) {
            rc = pi_err(PAGEIN_E_LIMIT, "%s: more than %d safetensors files", dir, MAX_FILES);
            break;
        }
        if (k == cap) {
            size_t nc = cap ? cap * 2 : 16;
            char **nv = pi_realloc(v, nc * sizeof *nv);
            if (!nv) {
                rc = pi_err(-ENOMEM, "out of memory");
                break;
            }
            v = nv, cap = nc;
        }
        if (!(v[k] = pi_strndup(de->d_name, strlen(de->d_name)))) {
            rc = pi_err(-ENOMEM, "out of memory");
            break;
        }
        k++;
    }
    closedir(d);
    if (k) qsort(v, k, sizeof *v, str_cmp);
    *out = v, *n = k;
    return rc;
}

struct lacc {
    char **v;
    size_t n, cap;
};

static int list_cb(void *arg, const struct pi_list_entry *e) {
    struct lacc *a = arg;
    const char *rel = e->rel ? e->rel + (e->rel[0] == '/') : NULL; /* a prefix without its '/' names "/a" */
    if (!rel || strchr(rel, '/') || rel[0] == '.' || !pi_ends_with(rel, ".safetensors")) return 0;
    RETURN_IF(a->n == MAX_FILES, PAGEIN_E_LIMIT, "more than %d safetensors files", MAX_FILES);
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 16;
        char **nv = pi_realloc(a->v, nc * sizeof *nv);
        RETURN_IF(!nv, -ENOMEM, "out of memory");
        a->v = nv, a->cap = nc;
    }
    RETURN_IF(!(a->v[a->n] = pi_strndup(rel, strlen(rel))), -ENOMEM, "out of memory");
    a->n++;
    return 0;
}

/* A missing object (the end of a probe), not a failing one. */
static int not_found(int rc) {
    return rc == PAGEIN_E_NOT_FOUND || rc == -ENOENT || (rc == PAGEIN_E_REMOTE && strstr(pagein_last_error_detail(), " 404"));
}

/* The files of a source URL that cannot list (plain HTTP): torch's sharded
 * names (_hf_utils.py SHARDED_FILE_NAME, one logical file: shard N of
 * rank N - 1, model 1 of 1), opened while they exist; *f gets the opened
 * files (the probe is the open). */
static int probe_names(const char *dir, size_t max, char ***out, pagein_file ***f, size_t *n) {
    char **v = NULL;
    pagein_file **fs = NULL;
    size_t k = 0, cap = 0;
    int rc = 0;
    for (; k < max; k++) {
        char nm[64];
        snprintf(nm, sizeof nm, "shard-%05zu-model-00001-of-00001.safetensors", k + 1);
        char *p = pi_path_join(dir, nm);
        pagein_file *x = NULL;
        if (!p) rc = pi_err(-ENOMEM, "out of memory");
        else rc = pagein_open(&x, p, NULL);
        pi_free(p);
        if (rc < 0) {
            if (not_found(rc)) rc = 0, pi_err_clear();
            else pi_err_prefix(nm);
            break;
        }
        if (k == cap) {
            size_t nc = cap ? cap * 2 : 8;
            char **nv = pi_realloc(v, nc * sizeof *nv);
            pagein_file **nf = nv ? pi_realloc(fs, nc * sizeof *nf) : NULL;
            if (nv) v = nv;
            if (nf) fs = nf;
            if (!nv || !nf) {
                pagein_close(x);
                rc = pi_err(-ENOMEM, "out of memory");
                break;
            }
            cap = nc;
        }
        fs[k] = x;
        if (!(v[k] = pi_strndup(nm, strlen(nm)))) {
            pagein_close(x);
            rc = pi_err(-ENOMEM, "out of memory");
            break;
        }
    }
    *out = v, *f = fs, *n = k;
    return rc;
}

/* The *.safetensors files of dir (local or a source URL), sorted; for a
 * source that cannot list, torch's names probed (at most max) and *f their
 * opened files (else *f NULL). */
static int list_dir(const char *dir, size_t max, char ***out, pagein_file ***f, size_t *n) {
    *out = NULL, *f = NULL, *n = 0;
    if (!pi_source_is_remote(dir)) return list_local(dir, out, n);
    struct lacc a = {0};
    size_t dl = strlen(dir);
    char *pre = pi_malloc(dl + 2); /* the folder's prefix, '/' ended */
    RETURN_IF(!pre, -ENOMEM, "out of memory");
    memcpy(pre, dir, dl);
    if (!dl || pre[dl - 1] != '/') pre[dl++] = '/';
    pre[dl] = 0;
    int rc = pi_source_list_opt(pre, PI_LIST_DIRECT, list_cb, &a);
    pi_free(pre);
    if (rc == PAGEIN_E_UNSUPPORTED) {
        pi_err_clear();
        return probe_names(dir, max, out, f, n);
    }
    if (a.n) qsort(a.v, a.n, sizeof *a.v, str_cmp);
    *out = a.v, *n = a.n;
    return rc < 0 ? rc : 0;
}

static void free_names(char **v, size_t n) {
    for (size_t i = 0; i < n; i++) pi_free(v[i]);
    pi_free(v);
}

static void free_files(pagein_file **f, size_t n) {
    for (size_t i = 0; f && i < n; i++) pagein_close(f[i]);
    pi_free(f);
}

static const pagein_meta *sharding_meta(const pagein_file *f) {
    const pagein_meta *m = pagein_meta_find(f, PI_DCP_HF_KEY);
    return m && m->type == PAGEIN_META_STRING ? m : NULL;
}

/* 1 if dir's first *.safetensors file carries DCP_SHARDING_INFO, 0 if it
 * does not, -1 if dir holds no *.safetensors file. */
static int dir_has_info(const char *dir) {
    char **v = NULL;
    pagein_file **fs = NULL;
    size_t n = 0;
    int ok = -1;
    if (list_dir(dir, 1, &v, &fs, &n) == 0 && n) {
        char *p = fs ? NULL : pi_path_join(dir, v[0]);
        pagein_file *f = fs ? fs[0] : NULL;
        ok = (f || (p && pagein_open(&f, p, NULL) == 0)) && sharding_meta(f) != NULL;
        if (!fs) pagein_close(f);
        pi_free(p);
    }
    free_names(v, n);
    free_files(fs, n);
    pi_err_clear();
    return ok;
}

/* The directory holding the files: path itself, or path/sharded (where
 * torch's writer puts the ranks' files when it consolidates too) when path
 * holds no safetensors file (a consolidated model beside sharded/ is read
 * as that model). A source URL names a directory when its last part has no
 * file suffix. */
static char *resolve(const char *path) {
    struct stat st;
    if (!path) return NULL;
    if (pi_source_is_remote(path)) {
        size_t l = strlen(path);
        while (l > 0 && path[l - 1] == '/') l--;
        const char *last = path + l;
        while (last > path && last[-1] != '/') last--;
        if (l == 0 || memchr(last, '.', (size_t)(path + l - last))) return NULL;
    } else if (pagein_is_url(path) || stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        return NULL;
    }
    int top = dir_has_info(path);
    if (top == 1) return pi_strndup(path, strlen(path));
    if (top == 0) return NULL;
    char *s = pi_path_join(path, "sharded");
    if (s && dir_has_info(s) == 1) return s;
    pi_free(s);
    return NULL;
}

int pagein_is_dcp_hf_dir(const char *path) {
    char *d = resolve(path);
    pi_free(d);
    return d != NULL;
}

void pagein_dcp_hf_close(pagein_dcp_hf *h) {
    if (!h) return;
    for (size_t i = 0; i < h->nfiles; i++) {
        if (h->f) pagein_close(h->f[i]);
        if (h->info) pi_dcp_hf_info_free(&h->info[i]);
    }
    free_names(h->names, h->nfiles);
    pi_free(h->f), pi_free(h->info), pi_free(h->p), pi_free(h->t), pi_free(h->dir);
    pi_free(h);
}

/* File i (open): its sharding info parsed and matched to its tensors one
 * to one (ndim agreeing); its pieces appended to h->p. */
static int open_file(pagein_dcp_hf *h, size_t i) {
    const char *fn = h->names[i];
    const pagein_meta *m = sharding_meta(h->f[i]);
    RETURN_IF(!m, PAGEIN_E_BAD_INDEX, "%s/%s: no DCP_SHARDING_INFO in its __metadata__ (not a file of this checkpoint)",
              h->dir, fn);
    /* Hugging Face transformers' chunk layout says its version */
    const pagein_meta *cv = pagein_meta_find(h->f[i], "transformers_dcp_chunk_version");
    RETURN_IF(cv && !(cv->type == PAGEIN_META_STRING && cv->str_len == 1 && cv->str[0] == '1'), PAGEIN_E_UNSUPPORTED,
              "%s/%s: transformers_dcp_chunk_version is not \"1\"", h->dir, fn);
    FORWARD_IF(pi_dcp_hf_info_parse(m->str, m->str_len, fn, &h->info[i]));
    const struct pi_dcp_hf_info *in = &h->info[i];
    size_t nt = pagein_tensor_count(h->f[i]);
    for (size_t k = 0; k < nt; k++) {
        const pagein_tensor *t = pagein_tensor_at(h->f[i], k);
        const struct pi_dcp_hf_entry *e = pi_dcp_hf_info_find(in, t->name, t->name_len);
        RETURN_IF(!e, PAGEIN_E_BAD_INDEX, "%s: tensor '%s' has no entry in DCP_SHARDING_INFO", fn, t->name);
        RETURN_IF(e->ndim != t->ndim, PAGEIN_E_BAD_TENSOR_INFO,
                  "%s: tensor '%s' has %u dimensions but %u saved offsets", fn, t->name, t->ndim, e->ndim);
        RETURN_IF(e->shape && e->shape_ndim != t->ndim, PAGEIN_E_BAD_TENSOR_INFO,
                  "%s: tensor '%s' has %u dimensions but its whole shape %u", fn, t->name, t->ndim, e->shape_ndim);
        h->p[h->np++] = (struct hf_piece){e->fqn ? e->fqn : t->name, e->fqn ? e->fqn_len : t->name_len, (uint32_t)i, t,
                                          e, e->off};
    }
    for (size_t k = 0; k < in->n; k++)
        RETURN_IF(!pagein_tensor_get(h->f[i], in->e[k].name) || in->e[k].name_len != strlen(in->e[k].name),
                  PAGEIN_E_BAD_INDEX, "%s: DCP_SHARDING_INFO names '%s', which the file does not hold", fn,
                  in->e[k].name);
    return 0;
}

static int piece_cmp(const void *x, const void *y) {
    const struct hf_piece *a = x, *b = y;
    int c = memcmp(a->name, b->name, a->name_len < b->name_len ? a->name_len : b->name_len);
    if (c) return c;
    if (a->name_len != b->name_len) return a->name_len < b->name_len ? -1 : 1;
    return (a->file > b->file) - (a->file < b->file);
}

/* Groups the pieces by name into whole tensors, each checked. */
static int build_tensors(pagein_dcp_hf *h) {
    qsort(h->p, h->np, sizeof *h->p, piece_cmp);
    h->t = pi_calloc(h->np ? h->np : 1, sizeof *h->t);
    struct pi_dcp_hf_piece *cp = pi_calloc(h->np ? h->np : 1, sizeof *cp);
    int rc = (!h->t || !cp) ? pi_err(-ENOMEM, "out of memory") : 0;
    for (size_t i = 0; rc == 0 && i < h->np;) {
        size_t j = i;
        while (j < h->np && h->p[j].name_len == h->p[i].name_len && !memcmp(h->p[j].name, h->p[i].name, h->p[i].name_len))
            j++;
        for (size_t k = i; k < j; k++) {
            const pagein_tensor *s = h->p[k].src;
            const struct pi_dcp_hf_entry *e = h->p[k].e;
            cp[k - i] = (struct pi_dcp_hf_piece){h->names[h->p[k].file], s->dtype, s->ndim, h->p[k].off, s->shape,
                                                 e->shape, e->shape_ndim};
        }
        struct hf_tensor *t = &h->t[h->nt];
        t->name = h->p[i].name, t->dtype = h->p[i].src->dtype, t->p0 = i, t->np = j - i;
        rc = pi_dcp_hf_check(t->name, cp, j - i, &t->ndim, t->size, &t->nelements);
        const pagein_dtype_info *di = pagein_dtype_get(t->dtype);
        if (rc == 0 && (!di || di->bits % 8))
            rc = pi_err(PAGEIN_E_BAD_DTYPE, "'%s' in %s: type %s is not whole bytes", t->name, cp[0].file,
                        di ? di->name : "?");
        if (rc == 0) rc = pagein_dtype_nbytes(t->dtype, t->nelements, &t->nbytes);
        if (rc == 0 && t->nbytes > SIZE_MAX / 2)
            rc = pi_err(PAGEIN_E_LIMIT, "'%s': %llu bytes", t->name, (unsigned long long)t->nbytes);
        h->nt++;
        i = j;
    }
    pi_free(cp);
    return rc;
}

int pagein_dcp_hf_open(pagein_dcp_hf **out, const char *dir) {
    pi_err_clear();
    if (!out || !dir) return pi_err(PAGEIN_E_INVALID, "pagein_dcp_hf_open: NULL argument");
    *out = NULL;
    pagein_dcp_hf *h = pi_calloc(1, sizeof *h);
    RETURN_IF(!h, -ENOMEM, "out of memory");
    int rc = 0;
    if (!(h->dir = resolve(dir))) rc = pi_err(PAGEIN_E_FORMAT, "%s: no safetensors files with DCP_SHARDING_INFO", dir);
    if (rc == 0) rc = list_dir(h->dir, MAX_FILES, &h->names, &h->f, &h->nfiles);
    if (rc == 0 && !h->f && !(h->f = pi_calloc(h->nfiles ? h->nfiles : 1, sizeof *h->f)))
        rc = pi_err(-ENOMEM, "out of memory");
    if (rc == 0 && !(h->info = pi_calloc(h->nfiles ? h->nfiles : 1, sizeof *h->info))) rc = pi_err(-ENOMEM, "out of memory");
    size_t cap = 0;
    for (size_t i = 0; rc == 0 && i < h->nfiles; i++) { /* each file opened once (a probe's kept) */
        char *p = h->f[i] ? NULL : pi_path_join(h->dir, h->names[i]);
        if (!h->f[i] && !p) rc = pi_err(-ENOMEM, "out of memory");
        else if (!h->f[i] && (rc = pagein_open(&h->f[i], p, NULL)) < 0) pi_err_prefix(h->names[i]);
        else cap += pagein_tensor_count(h->f[i]); /* pieces are sized by what the files hold */
        pi_free(p);
    }
    if (rc == 0 && !(h->p = pi_calloc(cap ? cap : 1, sizeof *h->p))) rc = pi_err(-ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < h->nfiles; i++) rc = open_file(h, i);
    if (rc == 0 && (rc = build_tensors(h)) < 0) pi_err_prefix(h->dir);
    if (rc < 0) {
        pagein_dcp_hf_close(h);
        return rc;
    }
    *out = h;
    return 0;
}

size_t pagein_dcp_hf_count(const pagein_dcp_hf *h) { return h ? h->nt : 0; }

int pagein_dcp_hf_tensor(const pagein_dcp_hf *h, size_t i, pagein_dcp_hf_info *info) {
    if (!h || !info || i >= h->nt) return pi_err(PAGEIN_E_INVALID, "pagein_dcp_hf_tensor: bad argument");
    const struct hf_tensor *t = &h->t[i];
    *info = (pagein_dcp_hf_info){t->name, t->dtype, t->ndim, t->size, t->nbytes, (uint32_t)t->np};
    return 0;
}

const char *pagein_dcp_hf_dir(const pagein_dcp_hf *h) { return h ? h->dir : NULL; }

/* Copies piece p's bytes src (row-major, its own shape) into the whole
 * tensor t at dst: one memcpy per run of rows contiguous in both (the
 * dimensions inside the piece's lowest partial one merged), not per row. */
static void copy_piece(const struct hf_tensor *t, const struct hf_piece *p, const uint8_t *src, uint8_t *dst,
                       size_t esz) {
    uint32_t nd = t->ndim;
    if (!p->src->nelements) return;
    if (nd == 0) {
        memcpy(dst, src, esz);
        return;
    }
    const uint64_t *len = p->src->shape;
    uint64_t stride[PI_DCP_MAX_NDIM], idx[PI_DCP_MAX_NDIM] = {0};
    stride[nd - 1] = 1;
    for (uint32_t d = nd - 1; d > 0; d--) stride[d - 1] = stride[d] * t->size[d];
    uint32_t m = nd - 1; /* dims m..nd-1 are one run */
    uint64_t run_el = len[m];
    while (m > 0 && len[m] == t->size[m]) run_el *= len[m - 1], m--;
    size_t run = (size_t)run_el * esz;
    uint64_t rows = p->src->nelements / run_el, base = 0;
    for (uint32_t d = m; d < nd; d++) base += p->off[d] * stride[d];
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t at = base;
        for (uint32_t d = 0; d < m; d++) at += (p->off[d] + idx[d]) * stride[d];
        memcpy(dst + at * esz, src + r * run, run);
        for (uint32_t d = m; d-- > 0;) { /* next run: odometer over dims 0..m-1 */
            if (++idx[d] < len[d]) break;
            idx[d] = 0;
        }
    }
}

int pagein_dcp_hf_read(pagein_dcp_hf *h, size_t i, void *dst, size_t len) {
    if (!h || !dst || i >= h->nt) return pi_err(PAGEIN_E_INVALID, "pagein_dcp_hf_read: bad argument");
    const struct hf_tensor *t = &h->t[i];
    RETURN_IF(len < t->nbytes, PAGEIN_E_RANGE, "'%s': %llu bytes do not fit in %zu", t->name,
              (unsigned long long)t->nbytes, len);
    size_t esz = pagein_dtype_get(t->dtype)->bits / 8;
    for (size_t k = 0; k < t->np; k++) {
        const struct hf_piece *p = &h->p[t->p0 + k];
        const pagein_tensor *s = p->src;
        if (s->data || !s->nbytes) { /* mapped */
            copy_piece(t, p, s->data, dst, esz);
            continue;
        }
        /* a source URL: the chunk's bytes read through its file's source */
        RETURN_IF(s->nbytes > SIZE_MAX / 2, PAGEIN_E_LIMIT, "'%s': a chunk of %llu bytes", t->name,
                  (unsigned long long)s->nbytes);
        uint8_t *tmp = pi_malloc((size_t)s->nbytes);
        RETURN_IF(!tmp, -ENOMEM, "out of memory for a chunk of '%s' (%llu bytes)", t->name,
                  (unsigned long long)s->nbytes);
        int rc = pi_source_read(h->f[p->file]->src, tmp, s->nbytes, s->offset);
        if (rc >= 0) copy_piece(t, p, tmp, dst, esz);
        pi_free(tmp);
        if (rc < 0) {
            pi_err_prefix(h->names[p->file]);
            return rc;
        }
    }
    return 0;
}

/* ---- consolidation through one range-engine run (ops/dcp_conv.c) ---- */

struct hf_conv {
    pagein_dcp_hf *h;
    const size_t *span_t;  /* span -> position in the writer's order */
    const size_t *span_p;  /* span -> piece */
    const size_t *wt;      /* writer's position -> tensor */
};

/* One chunk's bytes p: the tensor itself when it is the only chunk (chunks
 * cover their tensor), else copied into its place. */
static int hf_piece_fn(void *arg, struct pi_dcpc *g, size_t span, const uint8_t *p, int whole_ok, const uint8_t **data) {
    struct hf_conv *c = arg;
    const struct hf_tensor *t = &c->h->t[c->wt[c->span_t[span]]];
    if (whole_ok && t->np == 1) {
        *data = p;
        return 0;
    }
    uint8_t *tb = pi_dcpc_tbuf(g);
    if (!tb) return -ENOMEM;
    copy_piece(t, &c->h->p[c->span_p[span]], p, tb, pagein_dtype_get(t->dtype)->bits / 8);
    return 0;
}

/* The writer's order within a file (safetensors_write.c): dtype by the
 * crate's order descending, then the name bytewise. */
static int hf_wr_cmp(const void *a, const void *b) {
    const struct hf_tensor *x = *(const struct hf_tensor *const *)a, *y = *(const struct hf_tensor *const *)b;
    uint32_t ox = pagein_dtype_get(x->dtype)->st_order, oy = pagein_dtype_get(y->dtype)->st_order;
    if (ox != oy) return ox > oy ? -1 : 1;
    return strcmp(x->name, y->name);
}

struct hf_plan {
    pagein_write_tensor *w;
    size_t *ord, *pos, *wt, *span_t, *span_p;
    uint32_t *shard;
    struct pi_dcpc_tensor *gt;
    struct pi_span *spans;
    struct pi_source **srcs;
};

static void hf_plan_free(struct hf_plan *q) {
    pi_free(q->w), pi_free(q->ord), pi_free(q->pos), pi_free(q->wt), pi_free(q->span_t), pi_free(q->span_p);
    pi_free(q->shard), pi_free(q->gt), pi_free(q->spans), pi_free(q->srcs);
}

/* Shards in name order (a new one when the next tensor would overflow the
 * current one), the writer's order shard by shard, and one span per chunk
 * in that order. */
static int hf_prepare(pagein_dcp_hf *h, uint64_t max_shard, struct hf_plan *q, uint32_t *nshards, size_t *nspans,
                      uint64_t *total, uint64_t *bound) {
    size_t nt = h->nt, a = nt ? nt : 1, np = h->np ? h->np : 1;
    q->w = pi_calloc(a, sizeof *q->w), q->ord = pi_calloc(a, sizeof *q->ord), q->pos = pi_calloc(a, sizeof *q->pos);
    q->wt = pi_calloc(a, sizeof *q->wt), q->shard = pi_calloc(a, sizeof *q->shard), q->gt = pi_calloc(a, sizeof *q->gt);
    q->span_t = pi_calloc(np, sizeof *q->span_t), q->span_p = pi_calloc(np, sizeof *q->span_p);
    q->spans = pi_calloc(np, sizeof *q->spans), q->srcs = pi_calloc(h->nfiles ? h->nfiles : 1, sizeof *q->srcs);
    RETURN_IF(!q->w || !q->ord || !q->pos || !q->wt || !q->shard || !q->gt || !q->span_t || !q->span_p || !q->spans ||
                  !q->srcs,
              -ENOMEM, "out of memory");
    for (size_t f = 0; f < h->nfiles; f++) q->srcs[f] = h->f[f]->src;
    uint64_t cur = 0;
    uint32_t k = 0;
    *total = 0, *bound = 4096 + 64;
    for (size_t i = 0; i < nt; i++) {
        const struct hf_tensor *t = &h->t[i];
        if (max_shard && cur && cur + t->nbytes > max_shard) k++, cur = 0;
        q->shard[i] = k, cur += t->nbytes, q->ord[i] = i, q->wt[i] = i;
        q->w[i] = (pagein_write_tensor){t->name, t->dtype, t->ndim, t->size, NULL, NULL, NULL};
        RETURN_IF(pi_add_overflow(*total, t->nbytes, total), PAGEIN_E_OVERFLOW, "the output's size overflows");
        *bound += 6 * strlen(t->name) + 96 + 24 * (uint64_t)t->ndim;
    }
    RETURN_IF(pi_add_overflow(*bound, *total, bound), PAGEIN_E_OVERFLOW, "the output's size overflows");
    *nshards = k + 1;
    /* shards are runs of name order: sort each run as the writer does */
    const struct hf_tensor **tp = pi_calloc(a, sizeof *tp);
    RETURN_IF(!tp, -ENOMEM, "out of memory");
    for (size_t i = 0; i < nt; i++) tp[i] = &h->t[i];
    for (size_t i = 0; i < nt;) {
        size_t j = i;
        while (j < nt && q->shard[j] == q->shard[i]) j++;
        qsort(tp + i, j - i, sizeof *tp, hf_wr_cmp);
        i = j;
    }
    for (size_t i = 0; i < nt; i++) q->wt[i] = (size_t)(tp[i] - h->t);
    pi_free(tp);
    size_t ns = 0;
    for (size_t x = 0; x < nt; x++) {
        const struct hf_tensor *t = &h->t[q->wt[x]];
        q->pos[q->wt[x]] = x;
        q->gt[x] = (struct pi_dcpc_tensor){t->name, t->nbytes, ns, ns};
        for (size_t c = 0; c < t->np && t->nbytes; c++) {
            const struct hf_piece *p = &h->p[t->p0 + c];
            if (!p->src->nbytes) continue;
            q->spans[ns] = (struct pi_span){p->file, p->src->offset, p->src->nbytes, NULL};
            q->span_t[ns] = x, q->span_p[ns] = t->p0 + c;
            ns++;
        }
        q->gt[x].s1 = ns;
    }
    *nspans = ns;
    return 0;
}

int pagein_dcp_hf_convert(const char *dir, const char *out, const pagein_convert_opts *opts,
                          pagein_dcp_convert_stats *stats) {
    pi_err_clear();
    if (!dir || !out) return pi_err(PAGEIN_E_INVALID, "pagein_dcp_hf_convert: NULL argument");
    pagein_convert_opts o = PAGEIN_CONVERT_OPTS_INIT;
    FORWARD_IF(pi_opts_in(&o, sizeof o, opts, "pagein_dcp_hf_convert"));
    RETURN_IF(o.dtype != PAGEIN_DTYPE_INVALID || o.dequantize != PAGEIN_DTYPE_INVALID, PAGEIN_E_UNSUPPORTED,
              "%s: casting a torch Distributed Checkpoint is not supported", dir);
    pagein_dcp_hf *h;
    FORWARD_IF(pagein_dcp_hf_open(&h, dir));
    struct hf_plan q = {0};
    uint32_t nshards = 1;
    size_t ns = 0;
    uint64_t total = 0, bound = 0;
    struct pi_engine_stats est = {0};
    int rc = hf_prepare(h, o.max_shard_bytes, &q, &nshards, &ns, &total, &bound);
    if (rc == 0) {
        struct hf_conv c = {h, q.span_t, q.span_p, q.wt};
        struct pi_dcpc_plan plan = {q.srcs, h->nfiles, q.spans, ns, q.span_t, q.gt, h->nt, hf_piece_fn, &c};
        const char *mk[1] = {"format"}, *mv[1] = {"pt"};
        pagein_write_opts wo = PAGEIN_WRITE_OPTS_INIT;
        wo.align = o.align, wo.meta_keys = mk, wo.meta_values = mv, wo.n_meta = 1;
        rc = pi_dcpc_convert(&plan, out, q.w, q.pos, q.ord, q.shard, nshards, &wo, total, bound, o.max_output_bytes,
                             &est);
    }
    if (rc == 0 && stats) {
        memset(stats, 0, sizeof *stats);
        stats->tensors = h->nt;
        stats->tensor_bytes = total;
        stats->shards = nshards;
        stats->spans = ns;
        stats->bytes_read = est.bytes;
        stats->requests = est.requests;
    }
    hf_plan_free(&q);
    pagein_dcp_hf_close(h);
    return rc;
}
