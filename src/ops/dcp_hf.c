/* dcp_hf.c - torch's safetensors flavour of a Distributed Checkpoint
 * (torch 2.7+: each rank's file a safetensors file whose "__metadata__"
 * holds DCP_SHARDING_INFO, where each saved chunk lies in its tensor),
 * opened as a whole: the files are opened (mapped) and validated, the
 * chunks of every tensor checked (format/dcp_hf.c), whole tensors
 * assembled, and the checkpoint consolidated into safetensors
 * (docs/FORMAT-DCP.md). */
#include "../format/dcp_hf.h"
#include "convert.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

#define MAX_FILES 65536

struct hf_piece {
    const char *name; /* the tensor's name in its file (borrowed) */
    size_t name_len;
    uint32_t file;
    const pagein_tensor *src;
    const uint64_t *off; /* saved offsets (borrowed from the file's info) */
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

static int ends_with_st(const char *s) {
    size_t l = strlen(s);
    return l > 12 && !strcmp(s + l - 12, ".safetensors");
}

static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The regular *.safetensors files of dir, sorted. */
static int list_dir(const char *dir, char ***out, size_t *n) {
    DIR *d = opendir(dir);
    if (!d) return pi_err(-errno, "%s: cannot open the directory", dir);
    char **v = NULL;
    size_t k = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || !ends_with_st(de->d_name)) continue;
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

static void free_names(char **v, size_t n) {
    for (size_t i = 0; i < n; i++) pi_free(v[i]);
    pi_free(v);
}

static const pagein_meta *sharding_meta(const pagein_file *f) {
    const pagein_meta *m = pagein_meta_find(f, PI_DCP_HF_KEY);
    return m && m->type == PAGEIN_META_STRING ? m : NULL;
}

/* 1 if dir's first *.safetensors file carries DCP_SHARDING_INFO, 0 if it
 * does not, -1 if dir holds no *.safetensors file. */
static int dir_has_info(const char *dir) {
    char **v = NULL;
    size_t n = 0;
    int ok = -1;
    if (list_dir(dir, &v, &n) == 0 && n) {
        char *p = pi_path_join(dir, v[0]);
        pagein_file *f = NULL;
        ok = p && pagein_open(&f, p, NULL) == 0 && sharding_meta(f) != NULL;
        pagein_close(f);
        pi_free(p);
    }
    free_names(v, n);
    pi_err_clear();
    return ok;
}

/* The directory holding the files: path itself, or path/sharded (where
 * torch's writer puts the ranks' files when it consolidates too) when path
 * holds no safetensors file (a consolidated model beside sharded/ is read
 * as that model). */
static char *resolve(const char *path) {
    struct stat st;
    if (!path || pagein_is_url(path) || stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return NULL;
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

/* File i: opened, its sharding info parsed and matched to its tensors
 * one to one (ndim agreeing); its pieces appended to h->p. */
static int open_file(pagein_dcp_hf *h, size_t i) {
    const char *fn = h->names[i];
    char *p = pi_path_join(h->dir, fn);
    RETURN_IF(!p, -ENOMEM, "out of memory");
    int rc = pagein_open(&h->f[i], p, NULL);
    pi_free(p);
    if (rc < 0) {
        pi_err_prefix(fn);
        return rc;
    }
    const pagein_meta *m = sharding_meta(h->f[i]);
    RETURN_IF(!m, PAGEIN_E_BAD_INDEX, "%s/%s: no DCP_SHARDING_INFO in its __metadata__ (not a file of this checkpoint)",
              h->dir, fn);
    FORWARD_IF(pi_dcp_hf_info_parse(m->str, m->str_len, fn, &h->info[i]));
    const struct pi_dcp_hf_info *in = &h->info[i];
    size_t nt = pagein_tensor_count(h->f[i]);
    for (size_t k = 0; k < nt; k++) {
        const pagein_tensor *t = pagein_tensor_at(h->f[i], k);
        const struct pi_dcp_hf_entry *e = pi_dcp_hf_info_find(in, t->name, t->name_len);
        RETURN_IF(!e, PAGEIN_E_BAD_INDEX, "%s: tensor '%s' has no entry in DCP_SHARDING_INFO", fn, t->name);
        RETURN_IF(e->ndim != t->ndim, PAGEIN_E_BAD_TENSOR_INFO,
                  "%s: tensor '%s' has %u dimensions but %u saved offsets", fn, t->name, t->ndim, e->ndim);
        RETURN_IF(t->nelements && !t->data, PAGEIN_E_UNSUPPORTED, "%s: tensor '%s' is not mapped", fn, t->name);
        h->p[h->np++] = (struct hf_piece){t->name, t->name_len, (uint32_t)i, t, e->off};
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
            cp[k - i] = (struct pi_dcp_hf_piece){h->names[h->p[k].file], s->dtype, s->ndim, h->p[k].off, s->shape};
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
    if (rc == 0) rc = list_dir(h->dir, &h->names, &h->nfiles);
    if (rc == 0) {
        h->f = pi_calloc(h->nfiles, sizeof *h->f), h->info = pi_calloc(h->nfiles, sizeof *h->info);
        if (!h->f || !h->info) rc = pi_err(-ENOMEM, "out of memory");
    }
    size_t cap = 0;
    for (size_t i = 0; rc == 0 && i < h->nfiles; i++) {
        pagein_file *f = NULL;
        char *p = pi_path_join(h->dir, h->names[i]);
        /* count first so that pieces are sized by what the files hold */
        if (!p) rc = pi_err(-ENOMEM, "out of memory");
        else if ((rc = pagein_open(&f, p, NULL)) < 0) pi_err_prefix(h->names[i]);
        else cap += pagein_tensor_count(f);
        pagein_close(f);
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

/* Copies piece p (row-major, its own shape) into the whole tensor t at dst. */
static void copy_piece(const struct hf_tensor *t, const struct hf_piece *p, uint8_t *dst, size_t esz) {
    const uint8_t *src = p->src->data;
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
    size_t run = (size_t)len[nd - 1] * esz;
    uint64_t rows = p->src->nelements / len[nd - 1];
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t at = p->off[nd - 1];
        for (uint32_t d = 0; d + 1 < nd; d++) at += (p->off[d] + idx[d]) * stride[d];
        memcpy(dst + at * esz, src + r * run, run);
        for (uint32_t d = nd - 1; d-- > 0;) { /* next row: odometer over dims 0..nd-2 */
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
    for (size_t k = 0; k < t->np; k++) copy_piece(t, &h->p[t->p0 + k], dst, esz);
    return 0;
}

struct hf_fill {
    pagein_dcp_hf *h;
    size_t i;
    uint8_t **buf;   /* shared: the tensor being written */
    size_t *cached;  /* which tensor buf holds (SIZE_MAX: none) */
};

static int hf_fill(void *ctx, void *dst, uint64_t off, size_t len) {
    struct hf_fill *c = ctx;
    const struct hf_tensor *t = &c->h->t[c->i];
    if (*c->cached != c->i) {
        uint8_t *nb = pi_realloc(*c->buf, t->nbytes ? t->nbytes : 1);
        RETURN_IF(!nb, -ENOMEM, "out of memory (%llu bytes for '%s')", (unsigned long long)t->nbytes, t->name);
        *c->buf = nb;
        FORWARD_IF(pagein_dcp_hf_read(c->h, c->i, nb, t->nbytes));
        *c->cached = c->i;
    }
    RETURN_IF(off > t->nbytes || len > t->nbytes - off, PAGEIN_E_RANGE, "'%s': fill past the end", t->name);
    memcpy(dst, *c->buf + off, len);
    return 0;
}

int pagein_dcp_hf_convert(const char *dir, const char *out, const pagein_convert_opts *opts,
                          pagein_dcp_convert_stats *stats) {
    pi_err_clear();
    if (!dir || !out) return pi_err(PAGEIN_E_INVALID, "pagein_dcp_hf_convert: NULL argument");
    pagein_convert_opts o = PAGEIN_CONVERT_OPTS_INIT;
    if (opts) memcpy(&o, opts, PI_MIN(opts->size ? opts->size : sizeof o, sizeof o));
    RETURN_IF(o.dtype != PAGEIN_DTYPE_INVALID || o.dequantize != PAGEIN_DTYPE_INVALID, PAGEIN_E_UNSUPPORTED,
              "%s: casting a torch Distributed Checkpoint is not supported", dir);
    pagein_dcp_hf *h;
    FORWARD_IF(pagein_dcp_hf_open(&h, dir));
    size_t nt = h->nt, a = nt ? nt : 1, cached = SIZE_MAX;
    uint8_t *buf = NULL;
    pagein_write_tensor *w = pi_calloc(a, sizeof *w);
    struct hf_fill *fc = pi_calloc(a, sizeof *fc);
    size_t *ord = pi_calloc(a, sizeof *ord);
    uint32_t *shard = pi_calloc(a, sizeof *shard), nshards = 1;
    uint64_t total = 0, bound = 4096 + 64, cur = 0, spans = 0;
    int rc = (!w || !fc || !ord || !shard) ? pi_err(-ENOMEM, "out of memory") : 0;
    for (size_t i = 0; rc == 0 && i < nt; i++) {
        const struct hf_tensor *t = &h->t[i];
        const struct hf_piece *p = &h->p[t->p0];
        fc[i] = (struct hf_fill){h, i, &buf, &cached};
        w[i] = (pagein_write_tensor){t->name, t->dtype, t->ndim, t->size, NULL, hf_fill, &fc[i]};
        if (t->np == 1) w[i].data = p->src->data; /* stored whole: written from the mapping */
        if (!w[i].data && !t->nbytes) w[i].data = "";
        ord[i] = i;
        /* shards in name order: a new one when the next tensor would overflow the current one */
        if (o.max_shard_bytes && cur && cur + t->nbytes > o.max_shard_bytes) nshards++, cur = 0;
        shard[i] = nshards - 1;
        cur += t->nbytes;
        spans += t->np;
        if (pi_add_overflow(total, t->nbytes, &total)) rc = pi_err(PAGEIN_E_OVERFLOW, "the output's size overflows");
        bound += 6 * strlen(t->name) + 96 + 24 * (uint64_t)t->ndim;
    }
    if (rc == 0 && pi_add_overflow(bound, total, &bound)) rc = pi_err(PAGEIN_E_OVERFLOW, "the output's size overflows");
    if (rc == 0) {
        const char *mk[1] = {"format"}, *mv[1] = {"pt"};
        pagein_write_opts wo = PAGEIN_WRITE_OPTS_INIT;
        wo.align = o.align, wo.meta_keys = mk, wo.meta_values = mv, wo.n_meta = 1;
        rc = pi_convert_write_set(out, w, nt, ord, shard, nshards, &wo, total, bound, o.max_output_bytes);
    }
    if (rc == 0 && stats) {
        memset(stats, 0, sizeof *stats);
        stats->tensors = nt;
        stats->tensor_bytes = total;
        stats->shards = nshards;
        stats->spans = spans;
        stats->bytes_read = total;
    }
    pi_free(buf), pi_free(w), pi_free(fc), pi_free(ord), pi_free(shard);
    pagein_dcp_hf_close(h);
    return rc;
}
