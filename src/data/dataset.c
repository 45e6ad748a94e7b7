/* dataset.c - a dataset is the shards of one or more files opened by rows
 * of the dataset-format table (dsformat.h): fixed records, Megatron, lines,
 * WebDataset, MDS, ... The generic open takes a file, a directory (with
 * an index file a row claims, like MDS's index.json, or the files whose
 * names a row claims), a glob, a brace pattern or a list, local or remote,
 * and detects the format. */
#include "data.h"
#include "dsformat.h"
#include "dsopenset.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../source/source.h"

/* ---- the dataset object -------------------------------------------------- */

void pagein_dataset_close(pagein_dataset *d) {
    if (!d) return;
    for (size_t i = 0; i < d->nfiles; i++) {
        if (d->shards) pi_ds_shard_close(d->shards[i]);
        pi_free(d->files[i].path);
    }
    pi_free(d->shards);
    pi_dsopenset_free(d->openset); /* after every shard's source */
    pi_free(d->files);
    pi_free(d->gfirst);
    pi_free(d);
}

/* Shards are collected first and opened together: each open of a remote
 * shard costs a few round trips (the source, the head and tail the rows
 * detect by, the footer or index), so hundreds of shards are opened at
 * once, at the depth a model's files open at (pi_source_open_depth: 32 in
 * flight, 64 for remote shards, PAGEIN_OPEN_DEPTH=N overriding both). */
struct pending {
    const struct pi_dsformat *fmt;
    char *uri;
    struct pi_dsopen a;
    struct pi_dsshard *sh;
    int rc;
    char err[1024];
};

struct kept_index { /* an index whose meta pending shards point into */
    const struct pi_dsformat *f;
    struct pi_dsindex ix;
    uint8_t *buf;
};

struct ds_build {
    pagein_dataset *d;
    struct pending *p;
    size_t n, cap;
    struct kept_index *ki;
    size_t nki, kicap;
};

static void kept_index_free(struct kept_index *k) {
    for (size_t j = 0; j < k->ix.n; j++) pi_free(k->ix.names[j]);
    pi_free(k->ix.names);
    pi_free(k->ix.meta);
    if (k->f->index_free) k->f->index_free(&k->ix);
    pi_free(k->buf);
}

static int ds_add(struct ds_build *b, const struct pi_dsformat *fmt, const char *uri, const struct pi_dsopen *a) {
    if (b->n >= UINT32_MAX) return pi_err(PAGEIN_E_LIMIT, "dataset: more than 2^32 shards");
    FORWARD_IF(pi_grow((void **)&b->p, &b->cap, b->n + 1, sizeof *b->p));
    struct pending *e = &b->p[b->n];
    memset(e, 0, sizeof *e);
    e->fmt = fmt;
    e->a = *a;
    if (!(e->uri = pi_strndup(uri, strlen(uri)))) return pi_err(-ENOMEM, "%s: out of memory", uri);
    e->a.uri = e->uri;
    b->n++;
    return 0;
}

/* Drops what was collected and not made the dataset's: pending shards
 * (a failure before ds_finish) and the indexes they pointed into. */
static void ds_drop_pending(struct ds_build *b) {
    for (size_t i = 0; i < b->n; i++) {
        pi_ds_shard_close(b->p[i].sh);
        pi_free(b->p[i].uri);
    }
    pi_free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
    for (size_t i = 0; i < b->nki; i++) kept_index_free(&b->ki[i]);
    pi_free(b->ki);
    b->ki = NULL;
    b->nki = b->kicap = 0;
}

static int open_one(void *ctx, size_t i) {
    struct pending *e = &((struct ds_build *)ctx)->p[i];
    e->rc = pi_ds_shard_open(&e->sh, e->fmt, e->uri, &e->a);
    if (e->rc < 0) snprintf(e->err, sizeof e->err, "%s", pagein_last_error_detail());
    return 0; /* every shard is tried; the first failure in order is reported */
}

/* Opens the pending shards (in parallel when there are several) and makes
 * them the dataset's, in order. */
static int ds_open_pending(struct ds_build *b) {
    pagein_dataset *d = b->d;
    int rc = 0;
    /* at most a limit of open sources however many shards (dsopenset.h) */
    if (b->n && !d->openset && !(d->openset = pi_dsopenset_new(b->n, b->p[0].uri)))
        return pi_err(-ENOMEM, "dataset: out of memory");
    for (size_t i = 0; i < b->n; i++) b->p[i].a.openset = d->openset;
    if (b->n > 1)
        rc = pi_parallel((unsigned)PI_MIN(b->n, (size_t)pi_source_open_depth(b->p[0].uri)), b->n, open_one, b);
    else if (b->n == 1)
        open_one(b, 0);
    for (size_t i = 0; rc == 0 && i < b->n; i++)
        if (b->p[i].rc < 0) rc = pi_err(b->p[i].rc, "%s", b->p[i].err);
    if (rc == 0) {
        d->files = pi_calloc(b->n ? b->n : 1, sizeof *d->files);
        d->shards = pi_calloc(b->n ? b->n : 1, sizeof *d->shards);
        if (!d->files || !d->shards) rc = pi_err(-ENOMEM, "dataset: out of memory");
    }
    for (size_t i = 0; rc == 0 && i < b->n; i++) {
        struct pending *e = &b->p[i];
        struct pi_ds_file *f = &d->files[i];
        f->path = e->uri;
        e->uri = NULL;
        f->fd = e->sh->src->fd; /* -1 in a bounded set: pagein_dataset_fd opens it */
        f->size = e->sh->src->size;
        f->first = d->nsamples;
        f->count = e->sh->nsamples;
        d->shards[i] = e->sh;
        e->sh = NULL;
        d->nfiles++;
        if (pi_add_overflow(d->nsamples, f->count, &d->nsamples))
            rc = pi_err(PAGEIN_E_OVERFLOW, "dataset: sample count overflows");
        else if (d->shards[i]->in_order)
            rc = pi_ds_zcount_total(d->shards[i], &d->zexcess);
    }
    ds_drop_pending(b);
    return rc;
}

static int ds_finish(struct ds_build *b) {
    FORWARD_IF(ds_open_pending(b));
    pagein_dataset *d = b->d;
    d->gfirst = pi_malloc((d->nfiles + 1) * sizeof *d->gfirst);
    if (!d->gfirst) return pi_err(-ENOMEM, "dataset: out of memory");
    d->addressable = 1;
    uint64_t g = 0;
    for (size_t i = 0; i < d->nfiles; i++) {
        d->gfirst[i] = g;
        g += d->shards[i]->ngroups;
        if (d->shards[i]->nsamples && !d->shards[i]->gen) d->addressable = 0;
    }
    d->gfirst[d->nfiles] = g;
    d->ngroups = g;
    return 0;
}

/* The end of an open: finishes the build when rc is 0 and hands out the
 * dataset, or drops what was built (the dataset included) and returns rc. */
static int ds_done(struct ds_build *b, int rc, pagein_dataset **out) {
    if (rc == 0) rc = ds_finish(b);
    if (rc < 0) {
        ds_drop_pending(b);
        pagein_dataset_close(b->d);
        return rc;
    }
    *out = b->d;
    return 0;
}

size_t pi_ds_shard_of(const pagein_dataset *d, uint64_t id) {
    size_t lo = d->nfiles ? pi_last_le_by(&d->files[0].first, d->nfiles, sizeof d->files[0], id) : 0;
    while (lo < d->nfiles && (d->files[lo].count == 0 || id >= d->files[lo].first + d->files[lo].count)) lo++;
    return lo;
}

size_t pi_ds_shard_of_group(const pagein_dataset *d, uint64_t gg) {
    size_t lo = pi_last_le(d->gfirst, d->nfiles, gg);
    while (lo < d->nfiles && gg >= d->gfirst[lo + 1]) lo++;
    return lo;
}

static pagein_dataset *ds_new(int kind) {
    pagein_dataset *d = pi_calloc(1, sizeof *d);
    if (d) d->kind = kind;
    return d;
}

/* ---- the old constructors, now rows of the table ------------------------- */

int pagein_dataset_open_records(pagein_dataset **out, const char *const *paths, size_t npaths,
                                uint64_t record_bytes) {
    pi_err_clear();
    RETURN_IF(!out || (!paths && npaths), PAGEIN_E_INVALID, "dataset: NULL argument");
    RETURN_IF(npaths == 0, PAGEIN_E_INVALID, "dataset: no files");
    RETURN_IF(record_bytes == 0, PAGEIN_E_INVALID, "dataset: record size 0");
    RETURN_IF(npaths > UINT32_MAX, PAGEIN_E_LIMIT, "dataset: %zu files", npaths);
    pagein_dataset *d = ds_new(PI_DS_RECORDS);
    if (!d) return pi_err(-ENOMEM, "dataset: out of memory");
    struct ds_build b = {d, NULL, 0, 0, NULL, 0, 0};
    struct pi_dsopen a = {.record_bytes = record_bytes, .group_bytes = 16u << 20};
    int rc = 0;
    for (size_t i = 0; i < npaths && rc == 0; i++) {
        if (!paths[i]) rc = pi_err(PAGEIN_E_INVALID, "dataset: path %zu is NULL", i);
        else rc = ds_add(&b, &pi_dsformat_records, paths[i], &a);
    }
    return ds_done(&b, rc, out);
}

int pagein_dataset_open_megatron(pagein_dataset **out, const char *prefix) {
    pi_err_clear();
    RETURN_IF(!out || !prefix, PAGEIN_E_INVALID, "dataset: NULL argument");
    size_t pl = strlen(prefix);
    char *p = pi_malloc(pl + 5);
    pagein_dataset *d = ds_new(PI_DS_MEGATRON);
    int rc = 0;
    if (!p || !d) {
        rc = pi_err(-ENOMEM, "dataset: out of memory");
        goto done;
    }
    memcpy(p, prefix, pl);
    memcpy(p + pl, ".bin", 5);
    struct ds_build b = {d, NULL, 0, 0, NULL, 0, 0};
    struct pi_dsopen a = {.group_bytes = 16u << 20};
    rc = ds_add(&b, &pi_dsformat_megatron, p, &a);
    if (rc == 0) rc = ds_finish(&b);
    else ds_drop_pending(&b);
done:
    pi_free(p);
    if (rc < 0)
        pagein_dataset_close(d);
    else
        *out = d;
    return rc;
}

/* ---- the generic open ----------------------------------------------------- */

static const struct pi_dsformat *by_suffix(const char *name) {
    for (size_t i = 0; pi_dsformats[i]; i++)
        for (const char *const *s = pi_dsformats[i]->suffixes; s && *s; s++)
            if (pi_ends_with(name, *s)) return pi_dsformats[i];
    return NULL;
}

struct names {
    char **v;
    size_t n, cap;
};
static int names_add(struct names *nm, const char *s, size_t len) {
    FORWARD_IF(pi_grow((void **)&nm->v, &nm->cap, nm->n + 1, sizeof *nm->v));
    if (!(nm->v[nm->n] = pi_strndup(s, len))) return pi_err(-ENOMEM, "out of memory");
    nm->n++;
    return 0;
}
static void names_free(struct names *nm) {
    for (size_t i = 0; i < nm->n; i++) pi_free(nm->v[i]);
    pi_free(nm->v);
    memset(nm, 0, sizeof *nm);
}
static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A folder or prefix scanned without a forced format: .json names are JSON
 * Lines shards unless shards of another row are beside them (data.parquet
 * and its dataset_info.json, config.json: the dataset's metadata); beside
 * .jsonl or .txt shards, or alone, they are shards. */
static int is_json_name(const char *n) {
    return pi_ends_with(n, ".json") || pi_ends_with(n, ".json.gz") || pi_ends_with(n, ".json.zst");
}
static void drop_side_json(struct names *nm, const struct pi_dsformat *fmt) {
    size_t other = 0, k = 0;
    const struct pi_dsformat *json = NULL;
    if (fmt) return;
    for (size_t i = 0; i < nm->n && !json; i++)
        if (is_json_name(nm->v[i])) json = by_suffix(nm->v[i]);
    for (size_t i = 0; i < nm->n && json; i++) other += by_suffix(nm->v[i]) != json;
    if (!other) return;
    for (size_t i = 0; i < nm->n; i++) {
        if (is_json_name(nm->v[i]))
            pi_free(nm->v[i]);
        else
            nm->v[k++] = nm->v[i];
    }
    nm->n = k;
}

/* Expands the first {A..B} of s (numbers; the width of A when it has
 * leading zeros, as webdataset's braceexpand) into out, recursively. */
static int brace_expand(const char *s, struct names *out, int depth) {
    const char *o = strchr(s, '{'), *c = o ? strchr(o, '}') : NULL;
    const char *dd = o && c ? strstr(o, "..") : NULL;
    if (!o || !c || !dd || dd > c) return names_add(out, s, strlen(s));
    RETURN_IF(depth > 4, PAGEIN_E_LIMIT, "%s: more than 4 brace patterns", s);
    char *e1, *e2;
    unsigned long long a = strtoull(o + 1, &e1, 10), b = strtoull(dd + 2, &e2, 10);
    RETURN_IF(e1 != dd || e2 != c || e1 == o + 1 || e2 == dd + 2, PAGEIN_E_INVALID,
              "%s: brace pattern is not {FIRST..LAST} of numbers", s);
    RETURN_IF(b < a || b - a > 10000000ull, PAGEIN_E_LIMIT, "%s: brace range %llu..%llu", s, a, b);
    int width = (int)(dd - o - 1);
    size_t pre = (size_t)(o - s), sl = strlen(c + 1);
    char *buf = pi_malloc(pre + 32 + sl + 1);
    if (!buf) return pi_err(-ENOMEM, "out of memory");
    int rc = 0;
    for (unsigned long long v = a; v <= b && rc == 0; v++) {
        memcpy(buf, s, pre);
        int k = snprintf(buf + pre, 32, "%0*llu", o[1] == '0' ? width : 0, v);
        memcpy(buf + pre + k, c + 1, sl + 1);
        rc = brace_expand(buf, out, depth + 1);
    }
    pi_free(buf);
    return rc;
}

static int is_dir(const char *p) {
    struct stat st;
    return !pi_source_is_remote(p) && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Reads a whole small file (an index) through the source seam. */
static int read_small(const char *uri, uint8_t **buf, size_t *len) {
    struct pi_source *s = NULL;
    FORWARD_IF(pi_source_open(&s, uri, 0));
    int rc = 0;
    if (s->size > (64u << 20)) rc = pi_err(PAGEIN_E_LIMIT, "%s: %" PRIu64 " bytes (an index file, at most 64 MiB)", uri, s->size);
    else if ((rc = pi_source_read_all(s, uri, buf)) == 0)
        *len = (size_t)s->size;
    pi_source_close(s);
    return rc;
}

static int add_one(struct ds_build *b, const struct pi_dsformat *fmt, const char *uri, const struct pi_dsopen *a);

/* The shards an index file lists (MDS index.json), local or remote: read
 * whole through the source seam, parsed by the row, each shard opened as
 * DIR/NAME with its meta. */
static int add_index(struct ds_build *b, const struct pi_dsformat *f, const char *dir, const char *ip,
                     const struct pi_dsopen *a) {
    FORWARD_IF(pi_grow((void **)&b->ki, &b->kicap, b->nki + 1, sizeof *b->ki));
    struct kept_index *k = &b->ki[b->nki];
    memset(k, 0, sizeof *k);
    k->f = f;
    size_t len = 0;
    int rc = read_small(ip, &k->buf, &len);
    if (rc == 0) rc = f->index(dir, k->buf, len, &k->ix);
    b->nki++; /* kept until the shards are open: their meta points into it */
    for (size_t j = 0; rc == 0 && j < k->ix.n; j++) {
        char *sp = pi_path_join(dir, k->ix.names[j]);
        if (!sp) {
            rc = pi_err(-ENOMEM, "out of memory");
            break;
        }
        struct pi_dsopen o = *a;
        o.meta = k->ix.meta[j];
        rc = ds_add(b, f, sp, &o);
        pi_free(sp);
    }
    return rc;
}

/* The row whose index file is called like the last component of uri. */
static const struct pi_dsformat *index_row(const char *uri, const struct pi_dsformat *fmt) {
    const char *base = strrchr(uri, '/');
    base = base ? base + 1 : uri;
    for (size_t i = 0; pi_dsformats[i]; i++) {
        const struct pi_dsformat *f = pi_dsformats[i];
        if ((fmt && f != fmt) || !f->index) continue;
        for (const char *const *n = f->index_names; n && *n; n++)
            if (!strcmp(base, *n)) return f;
    }
    return NULL;
}

/* A directory: an index file a row claims, else every file whose name a
 * row claims, in name order. */
static int add_dir(struct ds_build *b, const struct pi_dsformat *fmt, const char *dir, const struct pi_dsopen *a) {
    for (size_t i = 0; pi_dsformats[i]; i++) {
        const struct pi_dsformat *f = pi_dsformats[i];
        if ((fmt && f != fmt) || !f->index) continue;
        for (const char *const *n = f->index_names; n && *n; n++) {
            char *ip = pi_path_join(dir, *n);
            if (!ip) return pi_err(-ENOMEM, "out of memory");
            struct stat st;
            int rc = stat(ip, &st) == 0 ? add_index(b, f, dir, ip, a) : 1;
            pi_free(ip);
            if (rc <= 0) return rc;
        }
    }
    DIR *dh = opendir(dir);
    if (!dh) return pi_err(-errno, "%s: cannot list: %s", dir, strerror(errno));
    struct names nm = {0};
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(dh)) && rc == 0) {
        if (e->d_name[0] == '.' || pi_ends_with(e->d_name, ".pagein-idx")) continue;
        const struct pi_dsformat *f = by_suffix(e->d_name);
        /* a row without suffixes (records) takes every file when named */
        if (fmt && !fmt->suffixes && e->d_type != DT_DIR) f = fmt;
        if (!f || (fmt && f != fmt)) continue;
        rc = names_add(&nm, e->d_name, strlen(e->d_name));
    }
    closedir(dh);
    drop_side_json(&nm, fmt);
    if (rc == 0 && nm.n == 0)
        rc = pi_err(PAGEIN_E_NOT_FOUND, "%s: no dataset shards (no index.json, no .tar, .mds, .jsonl, .txt, .idx, ... files)", dir);
    if (rc == 0) qsort(nm.v, nm.n, sizeof *nm.v, str_cmp);
    for (size_t i = 0; i < nm.n && rc == 0; i++) {
        char *p = pi_path_join(dir, nm.v[i]);
        if (!p) rc = pi_err(-ENOMEM, "out of memory");
        else rc = add_one(b, fmt, p, a);
        pi_free(p);
    }
    names_free(&nm);
    return rc;
}

/* A listing of a remote prefix, each object named as the listed prefix
 * (the caller's spelling) followed by its name relative to it. */
struct rlist {
    const char *dir;     /* the listed prefix as the caller wrote it, '/' added */
    const char *pattern; /* a glob over names relative to dir, or NULL */
    struct names nm;
    struct pi_buf u;
};

static int rlist_add(void *arg, const struct pi_list_entry *e) {
    struct rlist *l = arg;
    if (l->pattern && fnmatch(l->pattern, e->rel, FNM_PATHNAME) != 0) return 0;
    l->u.n = 0;
    pi_buf_str(&l->u, l->dir);
    pi_buf_put(&l->u, e->rel, strlen(e->rel) + 1);
    if (l->u.oom) return pi_err(-ENOMEM, "%s: out of memory listing", l->dir);
    return names_add(&l->nm, l->u.p, l->u.n - 1);
}

/* A remote prefix (a URI its source calls a prefix: s3://b/p/,
 * hf://datasets/org/name[/dir/], null://p/, ...) or a remote glob (a
 * prefix followed by a pattern: hf://datasets/org/name/data/ *.parquet):
 * the source's listing (pi_source_list_opt: what a prefix of that source
 * names, the Hub's subfolders included, an S3 folder's direct children),
 * an index file in it first, else every name a row claims (or the glob
 * matches), sorted. 1 when uri is not a listing. No scheme is known here. */
static int add_remote_listing(struct ds_build *b, const struct pi_dsformat *fmt, const char *uri,
                              const struct pi_dsopen *a) {
    size_t ul = strlen(uri);
    const char *g = strpbrk(uri, "*?[");
    if (!g && !pi_source_is_prefix(uri)) return 1;
    /* the folder listed: up to the glob's segment, or the prefix itself */
    const char *cut = g ? g : uri + ul;
    if (g)
        while (cut > uri && cut[-1] != '/') cut--;
    struct rlist l;
    memset(&l, 0, sizeof l);
    l.pattern = g ? cut : NULL;
    size_t dl = (size_t)(cut - uri);
    char *dir = pi_malloc(dl + 2);
    if (!dir) return pi_err(-ENOMEM, "out of memory");
    memcpy(dir, uri, dl);
    if (dl && dir[dl - 1] != '/') dir[dl++] = '/';
    dir[dl] = 0;
    l.dir = dir;
    /* a glob matches names of its own depth; a prefix takes what its source's prefix names */
    int rc = pi_source_list_opt(dir, g ? 0 : PI_LIST_AS_PREFIX, rlist_add, &l);
    struct names nm = {0};
    const char *idx = NULL;
    for (size_t i = 0; rc == 0 && i < l.nm.n; i++) {
        const char *u = l.nm.v[i];
        if (index_row(u, fmt)) {
            if (!idx || strcmp(u, idx) < 0) idx = u;
            continue;
        }
        const struct pi_dsformat *f = by_suffix(u);
        if (!f || (fmt && f != fmt)) continue;
        rc = names_add(&nm, u, strlen(u));
    }
    drop_side_json(&nm, fmt);
    if (rc == 0 && idx) {
        const char *sl = strrchr(idx, '/');
        char *idir = pi_strndup(idx, sl ? (size_t)(sl - idx) : 0);
        rc = idir ? add_index(b, index_row(idx, fmt), idir, idx, a) : pi_err(-ENOMEM, "out of memory");
        pi_free(idir);
    } else if (rc == 0) {
        if (nm.n == 0) rc = pi_err(PAGEIN_E_NOT_FOUND, "%s: no dataset shards under this prefix", uri);
        else qsort(nm.v, nm.n, sizeof *nm.v, str_cmp);
        for (size_t i = 0; i < nm.n && rc == 0; i++) rc = add_one(b, fmt, nm.v[i], a);
    }
    names_free(&nm);
    names_free(&l.nm);
    pi_buf_free(&l.u);
    pi_free(dir);
    return rc;
}

static int add_one(struct ds_build *b, const struct pi_dsformat *fmt, const char *uri, const struct pi_dsopen *a) {
    if (is_dir(uri)) return add_dir(b, fmt, uri, a);
    const struct pi_dsformat *ixf = index_row(uri, fmt);
    if (ixf) { /* an index file named directly (local or remote) */
        const char *sl = strrchr(uri, '/');
        char *dir = pi_strndup(uri, sl ? (size_t)(sl - uri) : 0);
        if (!dir) return pi_err(-ENOMEM, "out of memory");
        int rc = add_index(b, ixf, sl ? dir : ".", uri, a);
        pi_free(dir);
        return rc;
    }
    if (pi_source_is_remote(uri)) {
        int rc = add_remote_listing(b, fmt, uri, a);
        if (rc <= 0) return rc;
    }
    /* a row's companion files (Megatron: the .idx names it, the .bin is its shard) */
    const struct pi_dsformat *f = fmt;
    char *shard = NULL;
    int c = pi_ds_companion(fmt, uri, !pi_source_is_remote(uri), &f, &shard);
    if (c < 0) return c;
    int rc = ds_add(b, f, shard ? shard : uri, a);
    pi_free(shard);
    return rc;
}

/* A glob over a dataset named through companion files names it once:
 * the shards its matches name by themselves (Megatron: PREFIX.idx ->
 * PREFIX.bin), and whether match p is another name of one of them (the
 * PREFIX.bin beside a listed PREFIX.idx), which is then left out. */
struct gnamed {
    const struct pi_dsformat *row;
    char *shard;
};

static int glob_named(const struct pi_dsformat *fmt, const glob_t *g, struct gnamed **out, size_t *n) {
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    for (size_t k = 0; k < g->gl_pathc; k++) {
        const struct pi_dsformat *row = NULL;
        char *shard = NULL;
        int c = pi_ds_companion(fmt, g->gl_pathv[k], 0, &row, &shard);
        if (c == 2 && pi_grow((void **)out, &cap, *n + 1, sizeof **out) == 0) {
            (*out)[(*n)++] = (struct gnamed){row, shard};
            continue;
        }
        pi_free(shard);
        if (c < 0 || c == 2) return c < 0 ? c : pi_err(-ENOMEM, "out of memory");
    }
    return 0;
}

static int glob_named_elsewhere(const struct gnamed *nv, size_t n, const char *p) {
    const struct pi_dsformat *row = NULL, *r;
    char *mine = NULL;
    int c = 0, skip = 0;
    for (size_t i = 0; i < n && !skip; i++) {
        if (nv[i].row != row) {
            pi_free(mine);
            mine = NULL;
            row = nv[i].row;
            c = pi_ds_companion(row, p, 0, &r, &mine);
        }
        skip = c == 1 && mine && !strcmp(mine, nv[i].shard); /* 2: p names itself */
    }
    pi_free(mine);
    return skip;
}

static void glob_named_free(struct gnamed *nv, size_t n) {
    for (size_t i = 0; i < n; i++) pi_free(nv[i].shard);
    pi_free(nv);
}

/* One entry of a spec: braces, then a local glob, then the name itself. */
static int add_spec(struct ds_build *b, const struct pi_dsformat *fmt, const char *spec, const struct pi_dsopen *a) {
    struct names ex = {0};
    int rc = brace_expand(spec, &ex, 0);
    for (size_t i = 0; i < ex.n && rc == 0; i++) {
        const char *s = ex.v[i];
        if (pi_source_is_remote(s)) {
            rc = add_one(b, fmt, s, a);
        } else if (strpbrk(s, "*?[")) {
            glob_t g;
            int gr = glob(s, 0, NULL, &g);
            if (gr == GLOB_NOMATCH) rc = pi_err(PAGEIN_E_NOT_FOUND, "%s: no file matches", s);
            else if (gr != 0) rc = pi_err(-EIO, "%s: glob failed", s);
            struct gnamed *nv = NULL;
            size_t nn = 0;
            if (gr == 0 && rc == 0) rc = glob_named(fmt, &g, &nv, &nn);
            for (size_t k = 0; gr == 0 && k < g.gl_pathc && rc == 0; k++)
                if (!glob_named_elsewhere(nv, nn, g.gl_pathv[k])) rc = add_one(b, fmt, g.gl_pathv[k], a);
            glob_named_free(nv, nn);
            if (gr == 0) globfree(&g);
        } else {
            rc = add_one(b, fmt, s, a);
        }
    }
    names_free(&ex);
    return rc;
}

int pagein_dataset_open(pagein_dataset **out, const char *spec, const pagein_dataset_opts *opts) {
    pi_err_clear();
    RETURN_IF(!out || !spec, PAGEIN_E_INVALID, "dataset: NULL argument");
    pagein_dataset_opts o = PAGEIN_DATASET_OPTS_INIT;
    FORWARD_IF(pi_opts_in(&o, sizeof o, opts, "dataset"));
    const struct pi_dsformat *fmt = NULL;
    if (o.format && *o.format) {
        fmt = pi_dsformat_by_name(o.format);
        if (!fmt) {
            char known[256] = "";
            for (size_t i = 0; pi_dsformats[i]; i++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", pi_dsformats[i]->name);
            return pi_err(PAGEIN_E_UNSUPPORTED, "dataset: unknown format '%s' (known: %s)", o.format, known);
        }
    }
    RETURN_IF(fmt == &pi_dsformat_records && !o.record_bytes, PAGEIN_E_INVALID, "dataset: format records needs record_bytes");
    if (!fmt && o.record_bytes) fmt = &pi_dsformat_records;
    pagein_dataset *d = ds_new(fmt == &pi_dsformat_records ? PI_DS_RECORDS : PI_DS_TABLE);
    if (!d) return pi_err(-ENOMEM, "dataset: out of memory");
    struct ds_build b = {d, NULL, 0, 0, NULL, 0, 0};
    struct pi_dsopen a = {.columns = o.columns, .ncolumns = o.columns ? o.ncolumns : 0, .cache_dir = o.cache_dir,
                          .group_bytes = o.group_bytes ? o.group_bytes : (4u << 20), .record_bytes = o.record_bytes,
                          .flags = o.flags};
    int rc = 0;
    /* a list: entries separated by newlines */
    const char *p = spec;
    while (rc == 0 && *p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n) {
            char *e = pi_strndup(p, n);
            if (!e) rc = pi_err(-ENOMEM, "out of memory");
            else rc = add_spec(&b, fmt, e, &a);
            pi_free(e);
        }
        p += n + (nl ? 1 : 0);
    }
    if (rc == 0 && b.n == 0) rc = pi_err(PAGEIN_E_NOT_FOUND, "dataset: '%s' names no shard", spec);
    return ds_done(&b, rc, out);
}

/* ---- accessors ---------------------------------------------------------- */

uint64_t pagein_dataset_count(const pagein_dataset *d) { return d ? d->nsamples : 0; }
size_t pagein_dataset_file_count(const pagein_dataset *d) { return d ? d->nfiles : 0; }
const char *pagein_dataset_path(const pagein_dataset *d, size_t i) { return d && i < d->nfiles ? d->files[i].path : NULL; }
int pagein_dataset_fd(const pagein_dataset *d, size_t i) {
    if (!d || i >= d->nfiles) return -1;
    if (d->files[i].fd >= 0 || !d->openset || !pi_dsopenset_bounded(d->openset)) return d->files[i].fd;
    /* a bounded set closed it, or may: reopened (checked) and kept open for the caller */
    int fd = pi_dsopenset_fd(d->shards[i]->src);
    return fd >= 0 ? fd : -1;
}
uint64_t pagein_dataset_file_size(const pagein_dataset *d, size_t i) { return d && i < d->nfiles ? d->files[i].size : 0; }
const char *pagein_dataset_format(const pagein_dataset *d, size_t i) {
    return d && i < d->nfiles ? d->shards[i]->fmt->name : NULL;
}
uint64_t pagein_dataset_group_count(const pagein_dataset *d) { return d ? d->ngroups : 0; }

int pagein_dataset_locate(const pagein_dataset *d, uint64_t id, pagein_sample_loc *loc) {
    RETURN_IF(!d || !loc, PAGEIN_E_INVALID, "dataset: NULL argument");
    RETURN_IF(id >= d->nsamples, PAGEIN_E_RANGE, "dataset: sample %" PRIu64 " of %" PRIu64, id, d->nsamples);
    size_t s = pi_ds_shard_of(d, id);
    const struct pi_dsshard *sh = d->shards[s];
    RETURN_IF(!sh->gen, PAGEIN_E_UNSUPPORTED,
              "%s: %s shard: samples are not single byte ranges (read it with pagein_pipe)", sh->name, sh->fmt->name);
    loc->file = (uint32_t)s;
    return sh->fmt->locate(sh, id - d->files[s].first, &loc->offset, &loc->length);
}
