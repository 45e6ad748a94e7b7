/* hash.c - per-tensor XXH3-128 hashes of a model, written to and checked
 * against an integrity manifest (src/format/manifest.c). Hashing runs on
 * pi_parallel threads, every read under the truncation guard.
 *
 * libxxhash is optional: mk/safety.mk defines PAGEIN_HAVE_XXHASH when its
 * header is installed, and xxhash is compiled inline (XXH_INLINE_ALL), so
 * the library gains no run-time dependency either way. */
#include "../engine/engine.h"
#include "../format/format.h"
#include "../io/io.h"
#include "../load/load.h"
#include "../source/source.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef PAGEIN_HAVE_XXHASH
#define XXH_INLINE_ALL
#include <xxhash.h>
#endif

int pagein_manifest_validate(const void *buf, size_t len, size_t *n_tensors) {
    pi_err_clear();
    if (!buf && len) return pi_err(PAGEIN_E_INVALID, "pagein_manifest_validate: NULL buffer");
    struct pi_manifest m;
    pi_manifest_init(&m);
    int rc = pi_manifest_parse(buf ? buf : (const void *)"", len, &m);
    if (rc == 0 && n_tensors) *n_tensors = m.n;
    pi_manifest_free(&m);
    return rc < 0 ? rc : 0;
}

#ifndef PAGEIN_HAVE_XXHASH

int pagein_hash_available(void) { return 0; }

int pagein_manifest_write(const char *model_path, const char *manifest_path, const pagein_hash_opts *opts,
                          pagein_hash_stats *stats) {
    PI_UNUSED(model_path), PI_UNUSED(manifest_path), PI_UNUSED(opts), PI_UNUSED(stats);
    return pi_err(PAGEIN_E_UNSUPPORTED, "built without libxxhash (install libxxhash-dev and rebuild)");
}

int pagein_manifest_verify(const char *model_path, const char *manifest_path, const pagein_hash_opts *opts,
                           pagein_hash_stats *stats) {
    PI_UNUSED(model_path), PI_UNUSED(manifest_path), PI_UNUSED(opts), PI_UNUSED(stats);
    return pi_err(PAGEIN_E_UNSUPPORTED, "built without libxxhash (install libxxhash-dev and rebuild)");
}

#else

int pagein_hash_available(void) { return 1; }

/* ---- the model being hashed --------------------------------------------- */

/* The files of a model: a single file, a sharded checkpoint, a GGUF split
 * set or a directory, opened LAZY (hashing reads through the mappings
 * itself, under the guard; nothing is loaded first). */
struct model_files {
    pagein_model *m;
    const pagein_file **files;
    size_t n;
    /* what is hashed in each file: its table's tensors, or for a model
     * whose files hold no table (a torch Distributed Checkpoint) the model's
     * tensors where they lie, one entry per piece of an assembled tensor
     * ("NAME@O0,O1": its place in the tensor); by file, then table order */
    struct entry {
        uint32_t file;
        const char *name;
        size_t name_len;
        uint64_t off, len;
    } *e;
    size_t ne;
    struct pi_arena names;
};

/* "NAME@O0,O1,..." for piece q of a tensor named name, in mf's arena. */
static const char *piece_name(struct model_files *mf, const pagein_tensor *t, const struct pi_piece *q, size_t *len) {
    size_t cap = t->name_len + 2 + (size_t)t->ndim * 21;
    char *b = pi_arena_alloc(&mf->names, cap);
    if (!b) return NULL;
    int n = snprintf(b, cap, "%.*s@", (int)t->name_len, t->name);
    for (uint32_t d = 0; d < t->ndim && n > 0 && (size_t)n < cap; d++)
        n += snprintf(b + n, cap - (size_t)n, "%s%llu", d ? "," : "", (unsigned long long)q->at[d]);
    *len = n > 0 && (size_t)n < cap ? (size_t)n : 0;
    return b;
}

static int list_entries(struct model_files *mf) {
    const pagein_model *m = mf->m;
    size_t own = 0, ne = 0;
    for (size_t i = 0; i < mf->n; i++) own += mf->files[i]->tab.n;
    int from_model = own == 0 && m->tab.n > 0;
    if (!from_model) ne = own;
    else
        for (size_t i = 0; i < m->tab.n; i++) ne += pi_tensor_nranges(m, &m->tab.t[i]);
    mf->e = pi_calloc(ne ? ne : 1, sizeof *mf->e);
    if (!mf->e) return pi_err(-ENOMEM, "out of memory");
    for (uint32_t f = 0; f < mf->n; f++) {
        if (!from_model) {
            const struct pi_table *t = &mf->files[f]->tab;
            for (size_t j = 0; j < t->n; j++)
                mf->e[mf->ne++] = (struct entry){f, t->t[j].name, t->t[j].name_len, t->t[j].offset, t->t[j].nbytes};
            continue;
        }
        for (size_t i = 0; i < m->tab.n; i++) {
            const pagein_tensor *t = &m->tab.t[i];
            if (!(t->flags & PAGEIN_TENSOR_ASSEMBLED)) {
                if (t->file == f) mf->e[mf->ne++] = (struct entry){f, t->name, t->name_len, t->offset, t->nbytes};
                continue;
            }
            for (uint32_t k = m->pieces.first[i]; k < m->pieces.first[i + 1]; k++) {
                const struct pi_piece *q = &m->pieces.p[k];
                if (q->file != f) continue;
                size_t nl = 0;
                const char *name = piece_name(mf, t, q, &nl);
                struct entry *e = &mf->e[mf->ne++];
                *e = (struct entry){f, name, nl, q->off, q->span};
                if (!e->name || !e->name_len) return pi_err(-ENOMEM, "out of memory");
            }
        }
    }
    return 0;
}

static int open_files(const char *path, struct model_files *mf) {
    memset(mf, 0, sizeof *mf);
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_LAZY;
    int rc = pagein_model_open(&mf->m, path, &o);
    if (rc < 0) return rc;
    mf->n = pagein_model_file_count(mf->m);
    mf->files = pi_calloc(mf->n, sizeof *mf->files);
    if (!mf->files) {
        pagein_model_close(mf->m);
        mf->m = NULL;
        return pi_err(-ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < mf->n; i++) mf->files[i] = pagein_model_file(mf->m, i);
    return list_entries(mf);
}

static void close_files(struct model_files *mf) {
    pagein_model_close(mf->m);
    pi_free(mf->files);
    pi_free(mf->e);
    pi_arena_free(&mf->names);
    memset(mf, 0, sizeof *mf);
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* ---- parallel hashing ---------------------------------------------------- */

struct item {
    const pagein_file *f;
    uint64_t off, len;
    uint8_t hash[16];
    const char *what; /* tensor name, or NULL for the header */
};

struct hash_ctx {
    struct item **order; /* largest first, so the long ones start early */
};

struct hash_call {
    const uint8_t *p;
    size_t len;
    XXH128_hash_t h;
    XXH3_state_t *state; /* streaming over chunks */
};

#define HASH_CHUNK (4u << 20)

/* Run under the guard: read only the range, write only *c / its state. */
static int hash_guarded(void *arg) {
    struct hash_call *c = arg;
    c->h = XXH3_128bits(c->p, c->len);
    return 0;
}

static int hash_update_guarded(void *arg) {
    struct hash_call *c = arg;
    XXH3_128bits_update(c->state, c->p, c->len);
    return 0;
}

static int hash_consume(void *arg, size_t span, uint64_t off, const void *data, uint64_t len) {
    PI_UNUSED(span);
    PI_UNUSED(off);
    XXH3_128bits_update(arg, data, (size_t)len);
    return 0;
}

static int hash_item(void *arg, size_t i) {
    struct hash_ctx *hc = arg;
    struct item *it = hc->order[i];
    const pagein_file *f = it->f;
    if (it->off > f->len || it->len > f->len - it->off)
        return pi_err(PAGEIN_E_RANGE, "%s: bytes [%llu, +%llu) beyond the %zu-byte mapping", f->path,
                      (unsigned long long)it->off, (unsigned long long)it->len, f->len);
    struct hash_call c = {f->base + it->off, (size_t)it->len, {0, 0}, NULL};
    int rc;
    if (f->mapped) {
        /* Map the pages in bulk first (MADV_POPULATE_READ: one call per
         * chunk instead of a page fault per 4 KiB, and an error instead of
         * SIGBUS), then hash under the guard, chunk by chunk. */
        XXH3_state_t st;
        XXH3_128bits_reset(&st);
        c.state = &st;
        for (uint64_t done = 0; done < it->len;) {
            size_t n = (size_t)PI_MIN((uint64_t)HASH_CHUNK, it->len - done);
            FORWARD_IF(pi_guard_populate(f->base + it->off + done, n, f->path, it->off + done, f->fd));
            c.p = f->base + it->off + done;
            c.len = n;
            rc = pi_guard_call(c.p, c.len, f->path, it->off + done, f->fd, hash_update_guarded, &c);
            if (rc < 0) return rc;
            done += n;
        }
        c.h = XXH3_128bits_digest(&st);
    } else if (f->src && (!f->base || f->fd < 0)) {
        /* not mapped (a remote source): stream the bytes through the range
         * engine, in order, into the hash state; memory stays bounded */
        XXH3_state_t st;
        XXH3_128bits_reset(&st);
        struct pi_source *src = f->src;
        struct pi_span sp = {0, it->off, it->len, NULL};
        /* request size and depth fixed here: items run on many threads at
         * once, and a per-call choice could probe the source from each */
        struct pi_engine_opts o = {.deliver = PI_DELIVER_STREAM, .in_order = 1, .max_gap = UINT64_MAX,
                                   .request_bytes = 4u << 20, .depth = 4, .consume = hash_consume, .arg = &st};
        rc = it->len ? pi_engine_run(&src, 1, &sp, 1, &o, NULL) : 0;
        if (rc < 0) return rc;
        c.h = XXH3_128bits_digest(&st);
    } else {
        rc = hash_guarded(&c);
        if (rc < 0) return rc;
    }
    XXH128_canonical_t can;
    XXH128_canonicalFromHash(&can, c.h);
    memcpy(it->hash, can.digest, 16);
    return 0;
}

static int cmp_len_desc(const void *a, const void *b) {
    const struct item *x = *(struct item *const *)a, *y = *(struct item *const *)b;
    return x->len < y->len ? 1 : x->len > y->len ? -1 : 0;
}

/* Hashes every file header and tensor of mf. items[0..nfiles) are the
 * headers, then the tensors in model order. */
static int hash_all(const struct model_files *mf, unsigned threads, struct item **out, size_t *nout,
                    pagein_hash_stats *st) {
    size_t n = mf->n + mf->ne;
    struct item *items = pi_calloc(n, sizeof *items);
    struct item **order = pi_calloc(n, sizeof *order);
    if (!items || !order) {
        pi_free(items);
        pi_free(order);
        return pi_err(-ENOMEM, "out of memory");
    }
    size_t k = mf->n;
    uint64_t bytes = 0;
    for (size_t i = 0; i < mf->n; i++) {
        const pagein_file *f = mf->files[i];
        items[i].f = f;
        items[i].off = 0;
        items[i].len = f->tab.data_start;
        bytes += items[i].len;
    }
    for (size_t j = 0; j < mf->ne; j++, k++) {
        items[k].f = mf->files[mf->e[j].file];
        items[k].off = mf->e[j].off;
        items[k].len = mf->e[j].len;
        items[k].what = mf->e[j].name;
        bytes += items[k].len;
    }
    for (size_t i = 0; i < n; i++) order[i] = &items[i];
    qsort(order, n, sizeof *order, cmp_len_desc);
    struct hash_ctx hc = {order};
    double t0 = pi_now_s();
    int rc = pi_parallel(threads, n, hash_item, &hc);
    double t1 = pi_now_s();
    pi_free(order);
    if (rc < 0) {
        pi_free(items);
        return rc;
    }
    if (st) {
        st->bytes = bytes;
        st->seconds = t1 - t0;
        st->files = mf->n;
        st->tensors = n - mf->n;
    }
    *out = items;
    *nout = n;
    return 0;
}

/* ---- writing -------------------------------------------------------------- */

/* Readers never see half a manifest: temporary file, fsync, rename. */
static int write_atomic(const char *path, const char *buf, size_t len) {
    struct pi_atomic_file a;
    int rc = pi_atomic_open(&a, path);
    if (rc < 0) return rc;
    rc = pi_atomic_write(&a, buf, len);
    if (rc < 0) {
        pi_atomic_abort(&a);
        return rc;
    }
    return pi_atomic_commit(&a);
}

/* What writing and verifying a manifest check first (fn names it in the
 * message): both paths given; the stats start at zero. */
static int manifest_start(const char *fn, const char *model_path, const char *manifest_path, pagein_hash_stats *stats) {
    pi_err_clear();
    if (!model_path || !manifest_path) return pi_err(PAGEIN_E_INVALID, "%s: NULL path", fn);
    if (stats) memset(stats, 0, sizeof *stats);
    return 0;
}

int pagein_manifest_write(const char *model_path, const char *manifest_path, const pagein_hash_opts *opts,
                          pagein_hash_stats *stats) {
    FORWARD_IF(manifest_start("pagein_manifest_write", model_path, manifest_path, stats));
    struct model_files mf;
    int rc = open_files(model_path, &mf);
    if (rc < 0) return rc;
    struct item *items = NULL;
    size_t n = 0;
    struct pi_manifest m;
    pi_manifest_init(&m);
    char *text = NULL;
    size_t tlen = 0;
    rc = hash_all(&mf, opts ? opts->threads : 0, &items, &n, stats);
    if (rc < 0) goto out;
    for (size_t i = 0; i < mf.n && rc == 0; i++) {
        const pagein_file *f = mf.files[i];
        const char *b = base_name(f->path);
        rc = pi_manifest_add_file(&m, b, strlen(b), f->len, items[i].len, items[i].hash);
    }
    for (size_t j = 0; j < mf.ne && rc == 0; j++)
        rc = pi_manifest_add_tensor(&m, mf.e[j].file, mf.e[j].name, mf.e[j].name_len, items[mf.n + j].off,
                                    items[mf.n + j].len, items[mf.n + j].hash);
    if (rc == 0) rc = pi_manifest_format(&m, &text, &tlen);
    if (rc < 0) {
        rc = pi_err(rc, "out of memory");
        goto out;
    }
    rc = write_atomic(manifest_path, text, tlen);
out:
    pi_free(text);
    pi_manifest_free(&m);
    pi_free(items);
    close_files(&mf);
    return rc;
}

/* ---- verifying ------------------------------------------------------------ */

struct verify_state {
    const pagein_hash_opts *opts;
    size_t mismatches;
};

static void mismatch(struct verify_state *vs, const char *file, const char *tensor, size_t tlen, const char *what) {
    if (vs->mismatches == 0) {
        if (tensor)
            pi_err(PAGEIN_E_HASH_MISMATCH, "%s: tensor '%.*s': %s", file, (int)PI_MIN(tlen, 200), tensor, what);
        else
            pi_err(PAGEIN_E_HASH_MISMATCH, "%s: %s", file, what);
    }
    vs->mismatches++;
    if (vs->opts && vs->opts->on_mismatch) vs->opts->on_mismatch(vs->opts->ctx, file, tensor, tlen, what);
}

int pagein_manifest_verify(const char *model_path, const char *manifest_path, const pagein_hash_opts *opts,
                           pagein_hash_stats *stats) {
    FORWARD_IF(manifest_start("pagein_manifest_verify", model_path, manifest_path, stats));
    struct pi_manifest m;
    pi_manifest_init(&m);
    struct model_files mf;
    memset(&mf, 0, sizeof mf);
    struct item *items = NULL;
    size_t n = 0;
    uint8_t *text = NULL;
    int rc = 0;

    /* read the manifest (bounded: a manifest is text, a few hundred bytes a tensor) */
    /* a FIFO named as the manifest must not block the open */
    int fd;
    struct stat st;
    rc = pi_open_regular(manifest_path, &fd, &st);
    if (rc < 0) return rc == -EINVAL ? PAGEIN_E_INVALID : rc;
    if (st.st_size > (off_t)1 << 32) {
        close(fd);
        return pi_err(PAGEIN_E_LIMIT, "%s: manifest of %lld bytes exceeds 4 GiB", manifest_path, (long long)st.st_size);
    }
    size_t len = (size_t)st.st_size;
    text = pi_malloc(len ? len : 1);
    if (!text) {
        close(fd);
        return pi_err(-ENOMEM, "out of memory");
    }
    rc = pi_pread_full(fd, text, len, 0);
    close(fd);
    if (rc < 0) {
        pi_free(text);
        pi_err_prefix(manifest_path);
        return rc;
    }
    rc = pi_manifest_parse(text, len, &m);
    pi_free(text);
    if (rc < 0) {
        pi_err_prefix(manifest_path);
        goto out;
    }

    rc = open_files(model_path, &mf);
    if (rc < 0) goto out;
    struct verify_state vs = {opts, 0};
    if (m.nfiles != mf.n) {
        char what[128];
        snprintf(what, sizeof what, "model has %zu files, manifest %zu", mf.n, m.nfiles);
        mismatch(&vs, model_path, NULL, 0, what);
        goto done;
    }
    rc = hash_all(&mf, opts ? opts->threads : 0, &items, &n, stats);
    if (rc < 0) goto out;
    size_t k = mf.n, j0 = 0;
    for (size_t i = 0; i < mf.n; i++) {
        const pagein_file *f = mf.files[i];
        const struct pi_manifest_file *e = &m.files[i];
        const char *b = base_name(f->path);
        /* names matter across shards (the index names them); a single file
         * may be renamed or copied freely */
        if (mf.n > 1 && (strlen(b) != e->name_len || memcmp(b, e->name, e->name_len) != 0))
            mismatch(&vs, f->path, NULL, 0, "file name differs from the manifest");
        if ((uint64_t)f->len != e->size) mismatch(&vs, f->path, NULL, 0, "file size differs from the manifest");
        else if (items[i].len != e->header_bytes || memcmp(items[i].hash, e->header_hash, 16) != 0)
            mismatch(&vs, f->path, NULL, 0, "header bytes differ from the manifest");
        size_t j1 = j0;
        for (; j1 < mf.ne && mf.e[j1].file == i; j1++, k++) {
            const struct entry *t = &mf.e[j1];
            const struct pi_manifest_tensor *me = pi_manifest_find(&m, (uint32_t)i, t->name, t->name_len);
            if (!me) mismatch(&vs, f->path, t->name, t->name_len, "not in the manifest");
            else if (me->offset != t->off || me->nbytes != t->len)
                mismatch(&vs, f->path, t->name, t->name_len, "offset or size differs from the manifest");
            else if (memcmp(me->hash, items[k].hash, 16) != 0)
                mismatch(&vs, f->path, t->name, t->name_len, "data hash differs from the manifest");
        }
        /* manifest entries the model lacks: counted per file */
        size_t listed = 0;
        for (size_t j = 0; j < m.n; j++)
            if (m.t[j].file == i) listed++;
        if (listed > j1 - j0) {
            for (size_t j = 0; j < m.n; j++) {
                if (m.t[j].file != i) continue;
                size_t x = j0; /* a file's own table has an index; a model's pieces are searched */
                if (f->tab.n) x = pi_table_find(&f->tab, m.t[j].name, m.t[j].name_len) ? j0 : j1;
                else
                    while (x < j1 && (mf.e[x].name_len != m.t[j].name_len ||
                                      memcmp(mf.e[x].name, m.t[j].name, m.t[j].name_len) != 0))
                        x++;
                if (x == j1)
                    mismatch(&vs, f->path, m.t[j].name, m.t[j].name_len, "in the manifest but not in the model");
            }
        }
        j0 = j1;
    }
done:
    if (stats) stats->mismatches = vs.mismatches;
    rc = vs.mismatches ? PAGEIN_E_HASH_MISMATCH : 0;
out:
    pi_free(items);
    pi_manifest_free(&m);
    close_files(&mf);
    return rc;
}

#endif /* PAGEIN_HAVE_XXHASH */
