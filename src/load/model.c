/* model.c - models: one tensor table over one or many files.
 *
 * pagein_model_open() resolves what the path names (a single file, a sharded
 * safetensors index, a GGUF split set, or a directory holding one of them),
 * opens and validates every file with pagein_open(), checks the index
 * against the shards, merges the tables into one (tensor.file = shard
 * index; layer order is computed over all shards by pi_table_finish), and
 * then applies the strategy (populate.c, pager.c, auto.c).
 */
#include "load.h"
#include "../format/format.h"
#include "../file/metacache.h"
#include "../io/io.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define INDEX_MAX_BYTES (256u << 20)

/* ---- path helpers ------------------------------------------------------- */

static char *dir_of(const char *path) {
    const char *s = strrchr(path, '/');
    if (!s) return pi_strndup(".", 1);
    if (s == path) return pi_strndup("/", 1);
    return pi_strndup(path, (size_t)(s - path));
}

/* A small file (an index) read whole through its source: local path or URL.
 * A remote index goes through the metadata cache like a header
 * (file/metacache.c): with an entry, the open fetches the first bytes to
 * check the object's ETag, size and content (pi_meta_bytes_match), and the
 * bytes come from the entry. */
static int read_small(const char *path, uint8_t **out, size_t *len, const struct pi_meta_vouch *v) {
    struct pi_meta me;
    char *key;
    int have = pi_meta_lookup(path, &key, &me);
    struct pi_source *src;
    int trusted = 0; /* a listing or a pinned commit (or the opt-in trust): no request */
    int trusted_or_listed = have && pi_meta_usable(v, path, &me, &trusted); /* else the probe's bytes are compared */
    int rc = trusted_or_listed ? pi_source_open_known(&src, path, 0, me.size, me.identity)
                               : pi_source_open(&src, path, have ? PI_OPEN_PROBE_ONLY : 0);
    if (rc < 0) {
        pi_free(me.hdr);
        pi_free(key);
        return rc;
    }
    uint8_t *buf = NULL;
    if (src->size > INDEX_MAX_BYTES) {
        rc = pi_err(PAGEIN_E_LIMIT, "%s: index of %llu bytes (limit %u)", path, (unsigned long long)src->size,
                    INDEX_MAX_BYTES);
        goto out;
    }
    int ok = key && pi_meta_identity_ok(src->identity);
    if (have && ok && me.size == src->size && me.len == src->size && !strcmp(me.identity, src->identity) &&
        (trusted_or_listed || pi_meta_bytes_match(src, me.hdr, me.len))) {
        buf = pi_realloc(me.hdr, (size_t)src->size + 1);
        if (buf) {
            me.hdr = NULL;
            if (!trusted) pi_meta_touch(key);
            goto done;
        }
    }
    if ((rc = pi_source_read_all(src, path, &buf)) < 0) goto out;
    if (ok) pi_meta_put(key, src->identity, src->size, PAGEIN_FORMAT_UNKNOWN, buf, (size_t)src->size);
done:
    buf[src->size] = 0; /* read_all's NUL; the cached header's realloc'd byte */
    *out = buf;
    *len = (size_t)src->size;
    buf = NULL;
out:
    pi_free(buf);
    pi_free(me.hdr);
    pi_free(key);
    pi_source_close(src);
    return rc;
}

/* ---- what a path names -------------------------------------------------- */

enum kind { K_SINGLE, K_INDEX, K_SPLIT, K_DIRFMT };

struct target {
    enum kind kind;
    char *path; /* the file to start from (index, single file, any shard of a split set; K_DIRFMT: the directory) */
    const struct pi_format *row; /* K_DIRFMT: the format whose dir_marker the directory holds */
};

/* The format row whose dir_marker (a DCP checkpoint's .metadata) the local
 * directory holds, or NULL. */
static const struct pi_format *dir_format(const char *dir) {
    for (size_t i = 0; i < pi_formats_n; i++) {
        const struct pi_format *x = pi_formats[i];
        if (!x || !x->dir_marker) continue;
        char *p = pi_path_join(dir, x->dir_marker);
        struct stat s;
        int ok = p && stat(p, &s) == 0 && S_ISREG(s.st_mode);
        pi_free(p);
        if (ok) return x;
    }
    return NULL;
}

/* path names a row's dir_marker (ckpt/.metadata): that row, else NULL. */
static const struct pi_format *marker_format(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    for (size_t i = 0; i < pi_formats_n; i++)
        if (pi_formats[i] && pi_formats[i]->dir_marker && !strcmp(b, pi_formats[i]->dir_marker)) return pi_formats[i];
    return NULL;
}

/* What kind of start a file path is: an index (.json), a member of a
 * format's split sets (GGUF), else a single file. */
static enum kind kind_of(const char *path) {
    const struct pi_format *x = pi_format_by_suffix(path);
    if (pi_ends_with(path, ".json")) return K_INDEX;
    return x && x->split_paths ? K_SPLIT : K_SINGLE;
}

/* A directory: the model the format table's one rule picks among its
 * names (format/pick.c: an index, else the highest-ranked format's file or
 * split set), as transformers and llama.cpp do when a folder holds
 * several. */
static int resolve_dir(const char *dir, struct target *t) {
    if ((t->row = dir_format(dir))) { /* a directory format (DCP): the directory is the model */
        t->kind = K_DIRFMT;
        t->path = pi_strndup(dir, strlen(dir));
        return t->path ? 0 : pi_err(-ENOMEM, "out of memory");
    }
    DIR *d = opendir(dir);
    if (!d) return pi_err(-errno, "%s: cannot open directory: %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0, pick = 0;
    int rc = 0, index = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!pi_is_model_name(e->d_name)) continue;
        if ((rc = pi_grow((void **)&names, &cap, n + 1, sizeof *names)) < 0) goto out;
        if (!(names[n] = pi_strndup(e->d_name, strlen(e->d_name)))) {
            rc = pi_err(-ENOMEM, "out of memory");
            goto out;
        }
        n++;
    }
    if ((rc = pi_model_pick(dir, (const char *const *)names, n, 0, &pick, &index)) < 0) goto out;
    t->path = pi_path_join(dir, names[pick]);
    if (!t->path) rc = pi_err(-ENOMEM, "out of memory");
    else t->kind = index ? K_INDEX : kind_of(t->path);
out:
    for (size_t i = 0; i < n; i++) pi_free(names[i]);
    pi_free(names);
    closedir(d);
    return rc;
}

static int resolve(const char *path, struct target *t) {
    struct stat s;
    if (pi_source_is_remote(path)) {
        /* a remote folder (s3://b/model/, hf://org/name, any source's
         * prefix): its index or single model file, found by listing
         * (src/load/resolve.c) */
        char *u = pi_malloc(8192);
        if (!u) return pi_err(-ENOMEM, "out of memory");
        int rc = pi_remote_model_uri(path, u, 8192);
        if (rc == 0 && strcmp(u, path) != 0) rc = resolve(u, t);
        else if (rc == 0) rc = 1;
        pi_free(u);
        if (rc <= 0) return rc;
    }
    if (pi_source_is_remote(path)) {
        /* a URL names one object: what it is follows from its name; a
         * directory format's marker (DCP's .metadata) names its prefix */
        if ((t->row = marker_format(path))) {
            t->kind = K_DIRFMT;
            t->path = dir_of(path);
            return t->path ? 0 : pi_err(-ENOMEM, "out of memory");
        }
    } else if (stat(path, &s) < 0) {
        return pi_err(-errno, "%s: %s", path, strerror(errno));
    } else if (S_ISDIR(s.st_mode)) {
        return resolve_dir(path, t);
    } else if (marker_format(path)) { /* ckpt/.metadata names its directory */
        char *dir = dir_of(path);
        if (!dir) return pi_err(-ENOMEM, "out of memory");
        int rc = resolve_dir(dir, t);
        pi_free(dir);
        return rc;
    }
    t->path = pi_strndup(path, strlen(path));
    if (!t->path) return pi_err(-ENOMEM, "out of memory");
    t->kind = kind_of(path);
    return 0;
}

/* ---- opening the files -------------------------------------------------- */

/* Opening N files (shards of an index, a split GGUF set) costs N round
 * trips of header reads on storage where a request waits (a network
 * filesystem, FUSE, a remote object store) when they go one after another.
 * They are opened at once instead: up to pi_source_open_depth opens in
 * flight on the pool (one rule for models, datasets and the cache
 * commands), each parsing its header as soon as its own bytes arrive; the
 * files keep the order of paths[]. One file is opened on the calling
 * thread. */
struct open_job {
    const char *const *paths;
    pagein_file **out;
    uint32_t flags;
    const struct pi_meta_vouch *vouch;
    pagein_format format; /* PAGEIN_FORMAT_UNKNOWN: detect */
};

static int open_item(void *ctx, size_t i) {
    struct open_job *j = ctx;
    pagein_open_opts o = PAGEIN_OPEN_OPTS_INIT;
    o.flags = j->flags;
    o.format = j->format;
    return pi_file_open_vouched(&j->out[i], j->paths[i], &o, j->vouch);
}

/* The metadata cache's entries of remote files are checked one request
 * each (a 1-byte conditional range: ETag and size), which leaves one round
 * of requests per 64 files: 1,000 shards at 20 ms took
 * 0.42-0.46 s warm. Where one request can check them all, it does
 * (pi_meta_vouch_dir: an S3/GCS listing of the folder, or a Hub commit
 * that pins the bytes), and the vouched files open with no request. Only
 * when the cache holds an entry for first (a warm open): a cold open would
 * pay for the listing and use none of it. */
static void vouch_for(const char *first, struct pi_meta_vouch *v) {
    memset(v, 0, sizeof *v);
    char *key;
    struct pi_meta me;
    int have = pi_meta_lookup(first, &key, &me);
    pi_free(key);
    pi_free(me.hdr);
    if (!have) return;
    char *dir = dir_of(first);
    if (dir) pi_meta_vouch_dir(dir, v);
    pi_free(dir);
}

static int add_files_v(pagein_model *m, const char *const *paths, size_t n, const struct pi_meta_vouch *v,
                       pagein_format format);

static int add_files(pagein_model *m, const char *const *paths, size_t n) {
    if (n < 2) return add_files_v(m, paths, n, NULL, PAGEIN_FORMAT_UNKNOWN);
    struct pi_meta_vouch v;
    vouch_for(paths[0], &v);
    int rc = add_files_v(m, paths, n, &v, PAGEIN_FORMAT_UNKNOWN);
    pi_meta_vouch_free(&v);
    return rc;
}

static int add_files_v(pagein_model *m, const char *const *paths, size_t n, const struct pi_meta_vouch *v,
                       pagein_format format) {
    if (n == 0) return 0;
    pagein_file **nf = pi_realloc(m->files, (m->nfiles + n) * sizeof *nf);
    if (!nf) return pi_err(-ENOMEM, "out of memory");
    m->files = nf;
    pagein_file **out = m->files + m->nfiles;
    memset(out, 0, n * sizeof *out);
    struct open_job j = {paths, out, m->opts.open_flags, v, format};
    unsigned depth = pi_source_open_depth(paths[0]);
    int rc = pi_parallel(n < depth ? (unsigned)n : depth, n, open_item, &j);
    if (rc < 0) {
        for (size_t i = 0; i < n; i++) pagein_close(out[i]);
        return rc;
    }
    m->nfiles += n;
    return 0;
}

static int add_file(pagein_model *m, const char *path) { return add_files(m, &path, 1); }

static int open_index(pagein_model *m, const char *path) {
    uint8_t *buf = NULL;
    size_t len = 0;
    struct pi_index ix;
    pi_index_init(&ix);
    char *dir = NULL, **sps = NULL;
    struct pi_meta_vouch v; /* one check for the index and every shard (a listing of their folder) */
    vouch_for(path, &v);
    int rc = read_small(path, &buf, &len, &v);
    if (rc < 0) goto out;
    rc = pi_index_parse(buf, len, &ix);
    if (rc < 0) {
        pi_err_prefix(path);
        goto out;
    }
    if (ix.nshards == 0) {
        rc = pi_err(PAGEIN_E_BAD_INDEX, "%s: weight_map is empty", path);
        goto out;
    }
    dir = dir_of(path);
    if (!dir) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    sps = pi_calloc(ix.nshards, sizeof *sps);
    if (!sps) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < ix.nshards; i++) {
        sps[i] = pi_path_join(dir, ix.shards[i]);
        if (!sps[i]) {
            rc = pi_err(-ENOMEM, "out of memory");
            goto out;
        }
    }
    rc = add_files_v(m, (const char *const *)sps, ix.nshards, &v, PAGEIN_FORMAT_UNKNOWN);
    if (rc < 0) goto out;
    /* every entry must exist in the shard it names */
    for (size_t i = 0; i < ix.n; i++) {
        const struct pi_index_entry *e = &ix.e[i];
        if (!pagein_tensor_find(m->files[e->shard], e->name, e->name_len)) {
            rc = pi_err(PAGEIN_E_BAD_INDEX, "%s: weight_map puts '%s' in %s, which has no such tensor", path,
                        e->name, ix.shards[e->shard]);
            goto out;
        }
    }
    /* and every tensor of a shard must be listed there (else the index and
     * the shards disagree about which file holds it) */
    size_t total = 0;
    for (size_t s = 0; s < m->nfiles; s++) total += pagein_tensor_count(m->files[s]);
    if (total != ix.n) {
        for (size_t s = 0; s < m->nfiles; s++)
            for (size_t k = 0; k < pagein_tensor_count(m->files[s]); k++) {
                const pagein_tensor *t = pagein_tensor_at(m->files[s], k);
                int found = 0;
                for (size_t i = 0; i < ix.n && !found; i++)
                    found = ix.e[i].shard == s && ix.e[i].name_len == t->name_len &&
                            memcmp(ix.e[i].name, t->name, t->name_len) == 0;
                if (!found) {
                    rc = pi_err(PAGEIN_E_BAD_INDEX, "%s: %s holds tensor '%s', which weight_map does not list there",
                                path, ix.shards[s], t->name);
                    goto out;
                }
            }
    }
out:
    if (sps)
        for (size_t i = 0; i < ix.nshards; i++) pi_free(sps[i]);
    pi_free(sps);
    pi_free(dir);
    pi_free(buf);
    pi_index_free(&ix);
    pi_meta_vouch_free(&v);
    return rc;
}

/* A member of a split set (the format's split_paths): the whole set. */
static int open_split(pagein_model *m, const char *path) {
    const struct pi_format *x = pi_format_by_suffix(path);
    char **paths = NULL;
    size_t n = 0;
    int rc = x->split_paths(path, &paths, &n);
    if (rc < 0) {
        pi_err_prefix(path);
        return rc;
    }
    if (rc == 0) return add_file(m, path);
    rc = add_files(m, (const char *const *)paths, n);
    for (size_t i = 0; i < n; i++) pi_free(paths[i]); /* split_paths' contract: pi_malloc'd */
    pi_free(paths);
    if (rc < 0) return rc;
    return x->split_check ? x->split_check((const pagein_file *const *)m->files, m->nfiles) : 0;
}

/* A directory format (DCP): the marker's bytes give the data files, which
 * open as the row's format (no table of their own); the row is given each
 * one's bytes under the truncation guard and the allocation journal, then
 * fills the model's table and the assembled tensors' pieces. */
struct dir_job {
    const struct pi_format *row;
    void *state;
    uint32_t file;
    const pagein_file *f;
    int returned;
};

static int dir_file(void *arg) {
    struct dir_job *j = arg;
    int rc = j->row->dir_file(j->state, j->file, j->f->mapped ? j->f->base : NULL, j->f->len);
    j->returned = 1;
    return rc;
}

static int open_dirfmt(pagein_model *m, const char *dir, const struct pi_format *row) {
    char *mp = pi_path_join(dir, row->dir_marker), **paths = NULL;
    uint8_t *buf = NULL;
    size_t len = 0, nf = 0;
    const char *const *names = NULL;
    void *state = NULL;
    int rc = mp ? read_small(mp, &buf, &len, NULL) : pi_err(-ENOMEM, "out of memory");
    if (rc == 0) rc = row->dir_open(buf, len, mp, &state, &names, &nf);
    pi_free(buf);
    if (rc == 0 && !(paths = pi_calloc(nf ? nf : 1, sizeof *paths))) rc = pi_err(-ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < nf; i++)
        if (!(paths[i] = pi_path_join(dir, names[i]))) rc = pi_err(-ENOMEM, "out of memory");
    if (rc == 0) rc = add_files_v(m, (const char *const *)paths, nf, NULL, row->id);
    for (uint32_t i = 0; rc == 0 && i < m->nfiles; i++) {
        const pagein_file *f = m->files[i];
        struct dir_job j = {row, state, i, f, 0};
        struct pi_journal jn;
        pi_journal_begin(&jn);
        rc = f->mapped ? pi_guard_call(f->base, f->len, f->path, 0, f->fd, dir_file, &j) : dir_file(&j);
        pi_journal_end(&jn, !j.returned);
    }
    if (rc == 0) rc = row->dir_table(state, &m->tab, &m->pieces);
    if (rc == 0) {
        m->tab.format = row->id;
        rc = pi_table_finish(&m->tab, NULL);
        if (rc < 0) pi_err_prefix(mp);
    }
    for (size_t i = 0; rc == 0 && i < m->tab.n; i++) {
        pagein_tensor *t = &m->tab.t[i];
        if (t->file >= m->nfiles) { /* the row's bug */
            rc = pi_err(PAGEIN_E_INVALID, "%s: tensor '%s' in no file", mp, t->name);
            break;
        }
        if (!(t->flags & PAGEIN_TENSOR_ASSEMBLED) && m->files[t->file]->base)
            t->data = m->files[t->file]->base + t->offset;
    }
    if (state) row->dir_free(state);
    for (size_t i = 0; paths && i < nf; i++) pi_free(paths[i]);
    pi_free(paths);
    pi_free(mp);
    return rc;
}

/* ---- one table over every file ------------------------------------------ */

static int merge(pagein_model *m) {
    struct pi_table *t = &m->tab;
    for (size_t s = 0; s < m->nfiles; s++) {
        const pagein_file *f = m->files[s];
        for (size_t k = 0; k < f->tab.n; k++) {
            const pagein_tensor *src = &f->tab.t[k];
            pagein_tensor *r = pi_table_add(t, src->name, src->name_len, src->dtype, src->ndim, src->shape,
                                            src->offset, src->nbytes);
            if (!r) return pi_err(-ENOMEM, "out of memory");
            r->nelements = src->nelements;
            r->flags = src->flags;
        }
    }
    t->format = m->nfiles ? m->files[0]->tab.format : PAGEIN_FORMAT_UNKNOWN;
    /* file index: tensors were added in shard order */
    int rc = pi_table_finish(t, NULL);
    if (rc < 0) return rc;
    size_t k = 0;
    for (size_t s = 0; s < m->nfiles; s++)
        for (size_t j = 0; j < m->files[s]->tab.n; j++, k++) {
            t->t[k].file = (uint32_t)s;
            t->t[k].data = m->files[s]->base ? m->files[s]->base + t->t[k].offset : NULL;
        }
    return 0;
}

/* Layer groups: g = layer + 1; g = 0 leading globals, 1..L numbered
 * layers, L + 1 trailing globals. by_layer already sorts by
 * (leading/numbered/trailing, layer, index). */
static int build_groups(pagein_model *m) {
    struct pi_table *t = &m->tab;
    int32_t L = 0;
    for (size_t i = 0; i < t->n; i++)
        if (t->t[i].layer >= 0 && t->t[i].layer + 1 > L) L = t->t[i].layer + 1;
    m->nlayers = L;
    size_t ng = (size_t)L + 2;
    m->lt = pi_malloc((t->n ? t->n : 1) * sizeof *m->lt);
    m->lstart = pi_calloc(ng + 1, sizeof *m->lstart);
    m->lbytes = pi_calloc(ng, sizeof *m->lbytes);
    m->tgroup = pi_malloc((t->n ? t->n : 1) * sizeof *m->tgroup);
    if (!m->lt || !m->lstart || !m->lbytes || !m->tgroup) return pi_err(-ENOMEM, "out of memory");
    size_t *count = pi_calloc(ng, sizeof *count);
    if (!count) return pi_err(-ENOMEM, "out of memory");
    /* each tensor's group once (names are parsed for globals), then a
     * counting sort into lt */
    for (size_t i = 0; i < t->n; i++) {
        const pagein_tensor *r = &t->t[i];
        size_t g;
        if (r->layer >= 0) {
            g = (size_t)r->layer + 1;
        } else {
            int tail = 0;
            pagein_layer_from_name(r->name, r->name_len, &tail);
            g = tail ? ng - 1 : 0;
        }
        m->tgroup[i] = (int32_t)g;
        count[g]++;
        m->lbytes[g] += r->nbytes;
    }
    for (size_t g = 0; g < ng; g++) m->lstart[g + 1] = m->lstart[g] + count[g];
    memset(count, 0, ng * sizeof *count);
    for (size_t i = 0; i < t->n; i++) {
        size_t k = t->by_layer[i], g = (size_t)m->tgroup[k];
        m->lt[m->lstart[g] + count[g]++] = &t->t[k];
    }
    pi_free(count);
    return 0;
}

/* ---- hints and mlock ---------------------------------------------------- */

static void apply_hints(pagein_model *m) {
    uint32_t h = m->opts.hints;
    for (size_t s = 0; s < m->nfiles; s++) {
        pagein_file *f = m->files[s];
        if (!f->mapped || !f->len) continue;
        void *b = (void *)f->base;
        if (h & PAGEIN_HINT_SEQUENTIAL) madvise(b, f->len, MADV_SEQUENTIAL);
        if (h & PAGEIN_HINT_RANDOM) madvise(b, f->len, MADV_RANDOM);
        if (h & PAGEIN_HINT_HUGEPAGE) madvise(b, f->len, MADV_HUGEPAGE);
        if (h & PAGEIN_HINT_WILLNEED) madvise(b, f->len, MADV_WILLNEED);
        /* The strategies that page whole 2 MiB blocks in (populate, and the
         * pager without a budget) advise MADV_HUGEPAGE too, unless the
         * caller chose an access pattern: each fault of MADV_POPULATE_READ
         * then reads exactly its aligned 2 MiB block as one folio, mapped by
         * one PMD, instead of a read-around window of read_ahead_kb centred
         * on it (8 MiB here, half of it behind the chunk: read already, or
         * queued ahead of the data the consumer waits for). On the sample
         * the prefetch pipeline's first output went from 44-70 ms to 24 ms
         * and populate from 0.27-0.30 s to 0.25-0.28 s (docs/BENCHMARKS.md,
         * load). The budgeted pager keeps its exact small-folio mode. */
        uint32_t fl = pi_model_flags(m);
        int blocks = (fl & PI_ST_BLOCKS) || ((fl & PI_ST_BLOCKS_UNBUDGETED) && !m->opts.budget_bytes);
        if (blocks && !(h & (PAGEIN_HINT_SEQUENTIAL | PAGEIN_HINT_RANDOM))) madvise(b, f->len, MADV_HUGEPAGE);
    }
}

#include <sys/resource.h>

static int lock_tensors(pagein_model *m) {
    long pg = sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < m->opts.n_mlock; i++) {
        const char *name = m->opts.mlock_tensors[i];
        if (!name) continue;
        const pagein_tensor *t = pi_table_find(&m->tab, name, strlen(name));
        RETURN_IF(!t, PAGEIN_E_NOT_FOUND, "mlock: no tensor named '%s'", name);
        if (!t->nbytes) continue;
        /* make it resident first, guarded, so mlock never faults a truncated page */
        const pagein_tensor *one[1] = {t};
        FORWARD_IF(pagein_model_load_tensors(m, one, 1));
        uintptr_t a = (uintptr_t)t->data & ~(uintptr_t)(pg - 1);
        uintptr_t e = ((uintptr_t)t->data + t->nbytes + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
        if (mlock((void *)a, e - a) < 0) {
            int err = errno;
            struct rlimit rl = {0, 0};
            getrlimit(RLIMIT_MEMLOCK, &rl);
            if (err == ENOMEM || err == EPERM || err == EAGAIN) {
                char lim[32];
                if (rl.rlim_cur == RLIM_INFINITY) snprintf(lim, sizeof lim, "unlimited");
                else snprintf(lim, sizeof lim, "%llu bytes", (unsigned long long)rl.rlim_cur);
                return pi_err(PAGEIN_E_MEMLOCK,
                              "mlock of tensor '%s' (%llu bytes) failed: %s; RLIMIT_MEMLOCK is %s "
                              "(raise it with `ulimit -l` or grant CAP_IPC_LOCK)",
                              name, (unsigned long long)(e - a), strerror(err), lim);
            }
            return pi_err(-err, "mlock of tensor '%s' failed: %s", name, strerror(err));
        }
    }
    return 0;
}

/* ---- open / close ------------------------------------------------------- */

int pagein_model_open(pagein_model **out, const char *path, const pagein_model_opts *opts) {
    pi_err_clear();
    if (!out || !path) return pi_err(PAGEIN_E_INVALID, "pagein_model_open: NULL argument");
    pagein_model *m = pi_calloc(1, sizeof *m);
    if (!m) return pi_err(-ENOMEM, "out of memory");
    pagein_model_opts def = PAGEIN_MODEL_OPTS_INIT;
    m->opts = def;
    if (opts) {
        size_t n = opts->size < sizeof def ? opts->size : sizeof def;
        if (n < sizeof(size_t)) {
            pi_free(m);
            return pi_err(PAGEIN_E_INVALID, "pagein_model_opts.size is %zu", opts->size);
        }
        memcpy(&m->opts, opts, n);
        m->opts.size = sizeof def;
    }
    pi_table_init(&m->tab);
    m->pop_method = pi_pop_method_from_env();
    /* Default pool: one thread per CPU, at least 2. Measured on the 1.3 GB
     * sample in a quiet moment (docs/BENCHMARKS.md, load): 2 threads paged
     * it in in 0.32-0.59 s, 8 threads (pi_default_threads) in 0.71-0.96 s;
     * each MADV_POPULATE_READ fault already reads around (read_ahead_kb), so
     * a few threads keep the device busy and more only interleave. */
    m->threads_given = m->opts.threads; /* READ: 0 = the range engine chooses the depth */
    if (!m->opts.threads) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        m->opts.threads = nc < 2 ? 2 : (unsigned)(nc > 32 ? 32 : nc);
    }
    struct target tg = {K_SINGLE, NULL, NULL};
    int rc = 0;
    if (!pi_strategy_get(m->opts.strategy)) {
        rc = pi_err(PAGEIN_E_INVALID, "unknown strategy %d", (int)m->opts.strategy);
        goto fail;
    }
    rc = resolve(path, &tg);
    if (rc < 0) goto fail;
    switch (tg.kind) {
    case K_INDEX: rc = open_index(m, tg.path); break;
    case K_SPLIT: rc = open_split(m, tg.path); break;
    case K_DIRFMT: rc = open_dirfmt(m, tg.path, tg.row); break;
    default: rc = add_file(m, tg.path); break;
    }
    if (rc < 0) goto fail;
    if (tg.kind != K_DIRFMT) rc = merge(m); /* a directory format's row filled the table */
    if (rc < 0) goto fail;
    rc = build_groups(m);
    if (rc < 0) goto fail;

    m->strategy = m->opts.strategy;
    size_t unmapped = 0;
    for (size_t i = 0; i < m->nfiles; i++) unmapped += !m->files[i]->mapped && m->files[i]->len;
    if (m->strategy == PAGEIN_STRATEGY_AUTO) {
        /* the one rule (auto.c), read by pagein_model_auto_plan too */
        uint64_t budget = 0;
        m->strategy = pi_auto_choose(m, m->opts.budget_bytes, &budget, m->why, sizeof m->why);
        if (budget && !m->opts.budget_bytes) m->opts.budget_bytes = budget;
    } else {
        snprintf(m->why, sizeof m->why, "%s was asked for", pagein_strategy_name(m->strategy));
    }

    const struct pi_strategy *st = m->st = pi_strategy_get(m->strategy);
    /* LAZY over unmapped (remote) files opens the tensor table from the
     * headers alone and fetches no data: records carry no data pointer,
     * pagein_tensor_copy reads through the source, and the calls that
     * promise resident bytes refuse (pi_model_no_data, populate.c). */
    if (st->needs_map && unmapped && !(st->flags & PI_ST_HEADERS_ONLY)) {
        rc = pi_err(PAGEIN_E_UNSUPPORTED, "%s: strategy %s needs a local, mapped file; use read, prefetch or auto",
                    m->files[0]->path, st->name);
        goto fail;
    }
    apply_hints(m);
    if (st->start && (rc = st->start(m)) < 0) goto fail;
    if ((rc = pi_assemble_start(m)) < 0) goto fail;
    if ((m->opts.hints & PAGEIN_HINT_PRELOAD) && !(st->flags & PI_ST_RESIDENT)) {
        rc = pagein_layer_wait(m, -1);
        if (rc >= 0 && m->nlayers > 0) rc = pagein_layer_wait(m, 0);
        if (rc < 0) goto fail;
    }
    rc = lock_tensors(m);
    if (rc < 0) goto fail;
    pi_free(tg.path);
    *out = m;
    return 0;
fail:
    pi_free(tg.path);
    pagein_model_close(m);
    return rc;
}

void pagein_model_close(pagein_model *m) {
    if (!m) return;
    pi_pager_stop(m);
    for (size_t i = 0; i < m->nfiles; i++) {
        if (m->rbuf && m->rbuf[i] && m->rbuf_keep) pi_mem_put(m->rbuf[i], m->rlen[i]);
        else if (m->rbuf && m->rbuf[i]) munmap(m->rbuf[i], m->rlen[i]);
        pagein_close(m->files[i]);
    }
    pi_free(m->rbuf);
    pi_free(m->rlen);
    pi_free(m->files);
    pi_table_free(&m->tab);
    pi_free(m->lt);
    pi_free(m->lstart);
    pi_free(m->lbytes);
    pi_free(m->tgroup);
    pi_assemble_free(m);
    pi_free(m);
}

/* ---- accessors ---------------------------------------------------------- */

size_t pagein_model_file_count(const pagein_model *m) { return m ? m->nfiles : 0; }

const pagein_file *pagein_model_file(const pagein_model *m, size_t i) {
    return m && i < m->nfiles ? m->files[i] : NULL;
}

size_t pagein_model_tensor_count(const pagein_model *m) { return m ? m->tab.n : 0; }

const pagein_tensor *pagein_model_tensor_at(const pagein_model *m, size_t i) {
    return m && i < m->tab.n ? &m->tab.t[i] : NULL;
}

const pagein_tensor *pagein_model_tensor_by_layer(const pagein_model *m, size_t i) {
    return m && i < m->tab.n ? m->lt[i] : NULL;
}

const pagein_tensor *pagein_model_tensor_get(const pagein_model *m, const char *name) {
    return m && name ? pi_table_find(&m->tab, name, strlen(name)) : NULL;
}

int32_t pagein_model_layer_count(const pagein_model *m) { return m ? m->nlayers : 0; }

size_t pagein_model_layer_tensors(const pagein_model *m, int32_t layer, const pagein_tensor *const **out) {
    if (out) *out = NULL;
    if (!m || layer < -1 || layer > m->nlayers) return 0;
    size_t g = (size_t)(layer + 1);
    if (out) *out = m->lt + m->lstart[g];
    return m->lstart[g + 1] - m->lstart[g];
}

pagein_strategy pagein_model_strategy(const pagein_model *m, const char **why) {
    if (why) *why = m ? m->why : "";
    return m ? m->strategy : PAGEIN_STRATEGY_AUTO;
}
