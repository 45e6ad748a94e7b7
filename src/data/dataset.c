/* dataset.c - a dataset is the shards of one or more files opened by rows
 * of the dataset-format table (dsformat.h): fixed records, Megatron, lines,
 * WebDataset, MDS, ... The generic open takes a file, a directory (with
 * an index file a row claims, like MDS's index.json, or the files whose
 * names a row claims), a glob, a brace pattern or a list, local or remote,
 * and detects the format. */
#include "data.h"
#include "dsformat.h"

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the dataset object -------------------------------------------------- */

void pagein_dataset_close(pagein_dataset *d) {
    if (!d) return;
    for (size_t i = 0; i < d->nfiles; i++) {
        if (d->shards) pi_ds_shard_close(d->shards[i]);
        pi_free(d->files[i].path);
    }
    pi_free(d->shards);
    pi_free(d->files);
    pi_free(d->gfirst);
    pi_free(d);
}

struct ds_build {
    pagein_dataset *d;
    size_t cap;
};

static int ds_add(struct ds_build *b, const struct pi_dsformat *fmt, const char *uri, const struct pi_dsopen *a) {
    pagein_dataset *d = b->d;
    if (d->nfiles == b->cap) {
        size_t c1 = b->cap, c2 = b->cap;
        FORWARD_IF(pi_grow((void **)&d->files, &c1, d->nfiles + 1, sizeof *d->files));
        FORWARD_IF(pi_grow((void **)&d->shards, &c2, d->nfiles + 1, sizeof *d->shards));
        b->cap = PI_MIN(c1, c2);
    }
    if (d->nfiles >= UINT32_MAX) return pi_err(PAGEIN_E_LIMIT, "dataset: more than 2^32 shards");
    struct pi_dsopen o = *a;
    o.uri = uri;
    struct pi_dsshard *sh = NULL;
    FORWARD_IF(pi_ds_shard_open(&sh, fmt, uri, &o));
    struct pi_ds_file *f = &d->files[d->nfiles];
    memset(f, 0, sizeof *f);
    f->path = pi_strndup(uri, strlen(uri));
    if (!f->path) {
        pi_ds_shard_close(sh);
        return pi_err(-ENOMEM, "%s: out of memory", uri);
    }
    d->shards[d->nfiles++] = sh;
    f->fd = sh->src->fd;
    f->size = sh->src->size;
    f->first = d->nsamples;
    f->count = sh->nsamples;
    if (pi_add_overflow(d->nsamples, sh->nsamples, &d->nsamples))
        return pi_err(PAGEIN_E_OVERFLOW, "dataset: sample count overflows");
    return 0;
}

static int ds_finish(pagein_dataset *d) {
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

size_t pi_ds_shard_of(const pagein_dataset *d, uint64_t id) {
    size_t lo = 0, hi = d->nfiles;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->files[mid].first <= id)
            lo = mid;
        else
            hi = mid;
    }
    while (lo < d->nfiles && (d->files[lo].count == 0 || id >= d->files[lo].first + d->files[lo].count)) lo++;
    return lo;
}

size_t pi_ds_shard_of_group(const pagein_dataset *d, uint64_t gg) {
    size_t lo = 0, hi = d->nfiles;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->gfirst[mid] <= gg)
            lo = mid;
        else
            hi = mid;
    }
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
    struct ds_build b = {d, 0};
    struct pi_dsopen a = {.record_bytes = record_bytes, .group_bytes = 16u << 20};
    int rc = 0;
    for (size_t i = 0; i < npaths && rc == 0; i++) {
        if (!paths[i]) rc = pi_err(PAGEIN_E_INVALID, "dataset: path %zu is NULL", i);
        else rc = ds_add(&b, &pi_dsformat_records, paths[i], &a);
    }
    if (rc == 0) rc = ds_finish(d);
    if (rc < 0) {
        pagein_dataset_close(d);
        return rc;
    }
    *out = d;
    return 0;
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
    struct ds_build b = {d, 0};
    struct pi_dsopen a = {.group_bytes = 16u << 20};
    rc = ds_add(&b, &pi_dsformat_megatron, p, &a);
    if (rc == 0) rc = ds_finish(d);
done:
    pi_free(p);
    if (rc < 0)
        pagein_dataset_close(d);
    else
        *out = d;
    return rc;
}

/* ---- the generic open ----------------------------------------------------- */

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static const struct pi_dsformat *by_suffix(const char *name) {
    for (size_t i = 0; pi_dsformats[i]; i++)
        for (const char *const *s = pi_dsformats[i]->suffixes; s && *s; s++)
            if (ends_with(name, *s)) return pi_dsformats[i];
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
    else if (!(*buf = pi_malloc(s->size + 1))) rc = pi_err(-ENOMEM, "%s: out of memory", uri);
    else if ((rc = pi_source_read(s, *buf, s->size, 0)) < 0) {
        pi_free(*buf);
        *buf = NULL;
    } else
        *len = (size_t)s->size;
    pi_source_close(s);
    return rc;
}

static char *join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    int slash = a && dir[a - 1] != '/';
    char *p = pi_malloc(a + slash + b + 1);
    if (!p) return NULL;
    memcpy(p, dir, a);
    if (slash) p[a] = '/';
    memcpy(p + a + slash, name, b + 1);
    return p;
}

/* Shard URIs of a Megatron name: PREFIX.idx or PREFIX -> PREFIX.bin. */
static char *megatron_bin(const char *uri) {
    size_t n = strlen(uri);
    if (ends_with(uri, ".idx") || ends_with(uri, ".bin")) n -= 4;
    char *p = pi_malloc(n + 5);
    if (!p) return NULL;
    memcpy(p, uri, n);
    memcpy(p + n, ".bin", 5);
    return p;
}

static int add_one(struct ds_build *b, const struct pi_dsformat *fmt, const char *uri, const struct pi_dsopen *a);

/* A directory: an index file a row claims, else every file a row's
 * suffix claims, in name order. */
static int add_dir(struct ds_build *b, const struct pi_dsformat *fmt, const char *dir, const struct pi_dsopen *a) {
    for (size_t i = 0; pi_dsformats[i]; i++) {
        const struct pi_dsformat *f = pi_dsformats[i];
        if ((fmt && f != fmt) || !f->index) continue;
        for (const char *const *n = f->index_names; n && *n; n++) {
            char *ip = join(dir, *n);
            if (!ip) return pi_err(-ENOMEM, "out of memory");
            struct stat st;
            if (stat(ip, &st) != 0) {
                pi_free(ip);
                continue;
            }
            uint8_t *buf = NULL;
            size_t len = 0;
            int rc = read_small(ip, &buf, &len);
            struct pi_dsindex ix = {0};
            if (rc == 0) rc = f->index(dir, buf, len, &ix);
            for (size_t k = 0; rc == 0 && k < ix.n; k++) {
                char *sp = join(dir, ix.names[k]);
                if (!sp) {
                    rc = pi_err(-ENOMEM, "out of memory");
                    break;
                }
                struct pi_dsopen o = *a;
                o.meta = ix.meta[k];
                rc = ds_add(b, f, sp, &o);
                pi_free(sp);
            }
            for (size_t k = 0; k < ix.n; k++) pi_free(ix.names[k]);
            pi_free(ix.names);
            pi_free(ix.meta);
            if (f->index_free) f->index_free(&ix);
            pi_free(buf);
            pi_free(ip);
            return rc;
        }
    }
    DIR *dh = opendir(dir);
    if (!dh) return pi_err(-errno, "%s: cannot list: %s", dir, strerror(errno));
    struct names nm = {0};
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(dh)) && rc == 0) {
        if (e->d_name[0] == '.') continue;
        const struct pi_dsformat *f = by_suffix(e->d_name);
        if (!f || (fmt && f != fmt)) continue;
        rc = names_add(&nm, e->d_name, strlen(e->d_name));
    }
    closedir(dh);
    if (rc == 0 && nm.n == 0)
        rc = pi_err(PAGEIN_E_NOT_FOUND, "%s: no dataset shards (no index.json, no .tar, .mds, .jsonl, .txt, .idx, ... files)", dir);
    if (rc == 0) qsort(nm.v, nm.n, sizeof *nm.v, str_cmp);
    for (size_t i = 0; i < nm.n && rc == 0; i++) {
        char *p = join(dir, nm.v[i]);
        if (!p) rc = pi_err(-ENOMEM, "out of memory");
        else rc = add_one(b, fmt, p, a);
        pi_free(p);
    }
    names_free(&nm);
    return rc;
}

static int add_one(struct ds_build *b, const struct pi_dsformat *fmt, const char *uri, const struct pi_dsopen *a) {
    if (is_dir(uri)) return add_dir(b, fmt, uri, a);
    const struct pi_dsformat *f = fmt;
    if (!f) {
        /* Megatron: the .idx names it; the .bin (or the prefix) is its data */
        char *idx = NULL;
        if (ends_with(uri, ".idx")) f = &pi_dsformat_megatron;
        else if (!pi_source_is_remote(uri) && (idx = pi_malloc(strlen(uri) + 5))) {
            size_t n = strlen(uri) - (ends_with(uri, ".bin") ? 4 : 0);
            memcpy(idx, uri, n);
            memcpy(idx + n, ".idx", 5);
            if (access(idx, R_OK) == 0) f = &pi_dsformat_megatron;
        }
        pi_free(idx);
    }
    if (f == &pi_dsformat_megatron) {
        char *bin = megatron_bin(uri);
        if (!bin) return pi_err(-ENOMEM, "out of memory");
        int rc = ds_add(b, f, bin, a);
        pi_free(bin);
        return rc;
    }
    return ds_add(b, f, uri, a);
}

/* One entry of a spec: braces, then a local glob, then the name itself. */
static int add_spec(struct ds_build *b, const struct pi_dsformat *fmt, const char *spec, const struct pi_dsopen *a) {
    struct names ex = {0};
    int rc = brace_expand(spec, &ex, 0);
    for (size_t i = 0; i < ex.n && rc == 0; i++) {
        const char *s = ex.v[i];
        if (!pi_source_is_remote(s) && strpbrk(s, "*?[")) {
            glob_t g;
            int gr = glob(s, 0, NULL, &g);
            if (gr == GLOB_NOMATCH) rc = pi_err(PAGEIN_E_NOT_FOUND, "%s: no file matches", s);
            else if (gr != 0) rc = pi_err(-EIO, "%s: glob failed", s);
            for (size_t k = 0; gr == 0 && k < g.gl_pathc && rc == 0; k++) {
                const char *p = g.gl_pathv[k];
                /* a glob over a Megatron pair names each dataset once */
                if (ends_with(p, ".bin") && !fmt) {
                    char idx[4096];
                    snprintf(idx, sizeof idx, "%.*s.idx", (int)strlen(p) - 4, p);
                    int listed = 0;
                    for (size_t q = 0; q < g.gl_pathc; q++) listed |= strcmp(g.gl_pathv[q], idx) == 0;
                    if (listed) continue;
                }
                rc = add_one(b, fmt, p, a);
            }
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
    if (opts) {
        RETURN_IF(opts->size < sizeof(size_t), PAGEIN_E_INVALID, "dataset: options size %zu", opts->size);
        memcpy(&o, opts, PI_MIN(opts->size, sizeof o));
    }
    const struct pi_dsformat *fmt = NULL;
    if (o.format && *o.format) {
        fmt = pi_dsformat_by_name(o.format);
        if (!fmt && (!strcmp(o.format, "jsonl") || !strcmp(o.format, "text"))) fmt = &pi_dsformat_lines;
        if (!fmt && (!strcmp(o.format, "tar") || !strcmp(o.format, "wds"))) fmt = &pi_dsformat_webdataset;
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
    struct ds_build b = {d, 0};
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
    if (rc == 0 && d->nfiles == 0) rc = pi_err(PAGEIN_E_NOT_FOUND, "dataset: '%s' names no shard", spec);
    if (rc == 0) rc = ds_finish(d);
    if (rc < 0) {
        pagein_dataset_close(d);
        return rc;
    }
    *out = d;
    return 0;
}

/* ---- accessors ---------------------------------------------------------- */

uint64_t pagein_dataset_count(const pagein_dataset *d) { return d ? d->nsamples : 0; }
size_t pagein_dataset_file_count(const pagein_dataset *d) { return d ? d->nfiles : 0; }
const char *pagein_dataset_path(const pagein_dataset *d, size_t i) { return d && i < d->nfiles ? d->files[i].path : NULL; }
int pagein_dataset_fd(const pagein_dataset *d, size_t i) { return d && i < d->nfiles ? d->files[i].fd : -1; }
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
