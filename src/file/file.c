/* file.c - single files: open through a source (source/), map local files,
 * detect the format and hand the header bytes to its parser (format/),
 * accessors. Unmapped sources (remote objects) get their header through one
 * read of a prefix, grown while the parser needs more. */
#include "../format/format.h"
#include "file.h"
#include "metacache.h"
#include "../io/io.h"
#include "../source/source.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct parse_ctx {
    pagein_file *f;
    const uint8_t *buf; /* the header bytes: the mapping, or a prefix read from the source */
    size_t avail;
    uint32_t flags;
    pagein_format fmt;
    int returned; /* the parser returned (was not abandoned by the guard) */
};

static int parse_format(void *arg) {
    struct parse_ctx *c = arg;
    pagein_file *f = c->f;
    const struct pi_format *x = pi_format_get(c->fmt);
    int rc = x ? x->parse(c->buf, c->avail, f->len, c->flags, &f->tab)
               : pi_err(PAGEIN_E_BAD_MAGIC, "unknown format %d", (int)c->fmt);
    c->returned = 1;
    return rc;
}

static int parse(pagein_file *f, const uint8_t *buf, size_t avail, uint32_t flags, pagein_format fmt, int from_memory) {
    if (fmt == PAGEIN_FORMAT_UNKNOWN) fmt = pi_detect_format_named(buf, avail, f->len, from_memory ? NULL : f->path);
    if (fmt == PAGEIN_FORMAT_UNKNOWN) return pi_format_not_model(f->path, buf, avail);
    f->tab.format = fmt;
    struct parse_ctx c = {f, buf, avail, flags, fmt, 0};
    /* A file truncated between fstat and the end of parsing would raise
     * SIGBUS inside the parser: parse under the truncation guard
     * (docs/SAFETY.md). If that happens the parser is abandoned mid-way,
     * without running its cleanup: the allocation journal then frees every
     * block the parse made (its scratch buffers and f->tab's contents) and
     * f->tab starts over empty, so nothing leaks and nothing is freed
     * twice. Only f->tab receives the parser's allocations (the tables
     * start empty: pi_table_init allocates nothing). */
    int rc;
    if (f->mapped) {
        struct pi_journal j;
        pi_journal_begin(&j);
        rc = pi_guard_call(buf, avail, f->path, 0, f->fd, parse_format, &c);
        pi_journal_end(&j, !c.returned);
        if (!c.returned) pi_table_init(&f->tab);
    } else {
        rc = parse_format(&c);
    }
    if (rc < 0) return rc;
    f->tab.format = fmt;
    return pi_table_finish(&f->tab, f->base);
}

/* Unmapped sources: read a prefix (the format's first guess), parse,
 * and while the parser reports that it needed more than the prefix, read
 * four times as much (at most the whole file) and parse again. */
static int parse_unmapped(pagein_file *f, uint32_t flags, pagein_format fmt, size_t *used) {
    size_t have = 0, avail = f->len < (64u << 10) ? f->len : (64u << 10);
    uint8_t *buf = NULL;
    int rc = 0;
    for (;;) {
        if (avail > have) { /* read only what is not here yet */
            uint8_t *nb = pi_realloc(buf, avail);
            if (!nb) {
                rc = pi_err(-ENOMEM, "out of memory for a %zu-byte header prefix", avail);
                break;
            }
            buf = nb;
            if ((rc = pi_source_read(f->src, buf + have, avail - have, have)) < 0) break;
            have = avail;
        }
        pagein_format ff = fmt != PAGEIN_FORMAT_UNKNOWN ? fmt : pi_detect_format_named(buf, have, f->len, f->path);
        const struct pi_format *x = pi_format_get(ff);
        uint64_t want = !x ? 0 : x->whole_file ? f->len : x->header_size ? x->header_size(buf, have, f->len) : 0;
        if (x && x->first_read > want) want = x->first_read;
        if (want > f->len) want = f->len;
        if (want > have) {
            avail = (size_t)want;
            continue;
        }
        rc = parse(f, buf, have, flags, ff, 0);
        if (rc == 0) {
            /* the table's metadata strings point into buf: keep it */
            f->hdr = buf;
            *used = have;
            return 0;
        }
        if (rc != PAGEIN_E_TRUNCATED || have >= f->len) break;
        pi_table_free(&f->tab);
        pi_table_init(&f->tab);
        avail = f->len / 8 < have ? f->len : have * 8; /* GGUF metadata: 64 KiB, 512 KiB, 4 MiB, ... */
    }
    pi_free(buf);
    return rc;
}

/* ---- the metadata cache (metacache.c) ----------------------------------
 * Remote objects: keyed by the URL (credentials and signatures redacted),
 * checked by the object's identity (ETag), size and first bytes, which the
 * source's open learns with one short request when an entry exists
 * (PI_OPEN_PROBE_ONLY).
 * Files on network and FUSE filesystems: keyed by the absolute path,
 * checked by inode, size and mtime (the device number of such a mount
 * changes when it is mounted again). Local disks are never cached. */

/* The header bytes worth keeping: up to the tensor data, not what was read
 * beyond it; 0 for formats that need the whole file. */
static size_t header_keep(const pagein_file *f, size_t have) {
    const struct pi_format *x = pi_format_get(f->tab.format);
    if (!x || x->whole_file) return 0;
    uint64_t ds = f->tab.data_start;
    return ds > 0 && ds < have ? (size_t)ds : have;
}

static int parse(pagein_file *f, const uint8_t *buf, size_t avail, uint32_t flags, pagein_format fmt, int from_memory);

/* The parse from a cache entry: 0 (m->hdr now f's), or < 0 and f->tab
 * empty again (the caller reads the header as if there were no entry). */
static int parse_cached(pagein_file *f, uint32_t flags, pagein_format fmt, struct pi_meta *m) {
    if (fmt != PAGEIN_FORMAT_UNKNOWN && fmt != m->format) return -1;
    int rc = parse(f, m->hdr, m->len, flags, m->format, 0);
    if (rc < 0) {
        pi_err_clear();
        pi_table_free(&f->tab);
        pi_table_init(&f->tab);
        return rc;
    }
    f->hdr = m->hdr;
    m->hdr = NULL;
    return 0;
}

/* An unmapped (remote) file: from the entry m when it matches the source's
 * identity, size and first bytes, else through the source, then stored
 * (replacing the entry). 0 or < 0. */
static int parse_remote(pagein_file *f, uint32_t flags, pagein_format fmt, struct pi_meta *m, const char *key) {
    struct pi_source *src = f->src;
    int ok = key && pi_meta_identity_ok(src->identity);
    if (m && ok && m->size == src->size && !strcmp(m->identity, src->identity) &&
        (!m->check_bytes || pi_meta_bytes_match(src, m->hdr, m->len)) &&
        parse_cached(f, flags, fmt, m) == 0)
        return 0;
    size_t used = 0;
    FORWARD_IF(parse_unmapped(f, flags, fmt, &used));
    size_t keep = ok ? header_keep(f, used) : 0;
    if (keep) pi_meta_put(key, src->identity, src->size, f->tab.format, f->hdr, keep);
    return 0;
}

/* A local file's cache key (into key[cap]) and identity, when its
 * filesystem is a network or FUSE one and the cache is on: 1, else 0. */
static int netfs_key(const pagein_file *f, const struct stat *st, char *key, size_t cap, char id[160]) {
    if (f->len == 0 || !pi_meta_dev_is_remote(st->st_dev) || !pi_meta_enabled()) return 0;
    const char *p = pi_source_local_path(f->path);
    char cwd[4096] = "";
    if (p[0] != '/' && !getcwd(cwd, sizeof cwd)) return 0;
    int k = snprintf(key, cap, "file %s%s%s", cwd, cwd[0] ? "/" : "", p);
    if (k < 0 || (size_t)k >= cap) return 0;
    snprintf(id, 160, "%llu:%llu:%lld.%09ld", (unsigned long long)st->st_ino, (unsigned long long)st->st_size,
             (long long)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec);
    return 1;
}

/* A mapped network/FUSE file from its entry (no read through the
 * filesystem): 1 if parsed from it, else 0. */
static int mapped_from_cache(pagein_file *f, uint32_t flags, pagein_format fmt, const char *key, const char *id) {
    struct pi_meta m;
    int hit = pi_meta_get(key, &m) && m.size == f->len && !strcmp(m.identity, id) &&
              parse_cached(f, flags, fmt, &m) == 0;
    if (hit) pi_meta_touch(key); /* checked (inode, size, mtime): the LRU clock */
    pi_free(m.hdr);
    return hit;
}

/* After a mapped network/FUSE file was parsed: its header into the cache. */
static void mapped_to_cache(pagein_file *f, const char *key, const char *id) {
    size_t keep = header_keep(f, f->len);
    uint8_t *copy = keep ? pi_malloc(keep) : NULL;
    if (copy && pi_guard_copy(copy, f->base, keep, f->path, 0, f->fd) == 0)
        pi_meta_put(key, id, f->len, f->tab.format, copy, keep);
    pi_err_clear();
    pi_free(copy);
}

static int open_source(pagein_file **out, struct pi_source *src, const pagein_open_opts *opts, struct pi_meta *me,
                       const char *key);

static pagein_file *file_new(const char *name) {
    pagein_file *f = pi_calloc(1, sizeof *f);
    if (!f) return NULL;
    f->fd = -1;
    pi_table_init(&f->tab);
    if (name) {
        f->path = pi_strndup(name, strlen(name));
        if (!f->path) {
            pi_free(f);
            return NULL;
        }
    }
    return f;
}

/* Reading the header through the mapping must not drag tensor data in: a
 * fault on a normal mapping reads around it, up to read_ahead_kb (8 MiB on
 * the development machine), so opening a model would make its first
 * megabytes of tensor data resident (what `pagein resident` reports, and
 * what a lazy open promises not to read). The mapping starts MADV_RANDOM
 * (the caller), so detection faults the first page only; then the format's
 * row says how its header is read (format.h, enum pi_header_read): its
 * extent from the first bytes, read exactly ahead (MADV_WILLNEED, large
 * requests: safetensors); growing prefixes (parse_mapped_grow below: GGUF);
 * or the kernel's read-around, which a zip directory walk benefits from
 * (torch). The caller resets the advice to normal. */
static void header_readahead(pagein_file *f, const struct pi_format *x) {
    if (!x || x->header_read == PI_HEADER_AROUND) {
        madvise((void *)f->base, f->len, MADV_NORMAL);
        return;
    }
    uint64_t n = x->header_size ? x->header_size(f->base, f->len, f->len) : 0;
    if (n && n <= f->len) madvise((void *)f->base, (size_t)n, MADV_WILLNEED);
}

/* GGUF's header (metadata, then tensor infos) has no length field: its
 * extent is known only once it is walked, and on a normal mapping the
 * first fault would read around it, up to read_ahead_kb (8 MiB), megabytes
 * of tensor data (`pagein resident` filled the cache it measured). So the
 * mapping has MADV_RANDOM (a fault reads its page only), and the parser is
 * handed growing prefixes, each read ahead in large requests first
 * (MADV_WILLNEED): 256 KiB, 1 MiB, 4 MiB, ... until it no longer reports
 * PAGEIN_E_TRUNCATED. The last prefix may reach past the header into the
 * tensor data: the pages there that were not resident before the open
 * (mincore) are dropped again (give_back), so opening leaves only the
 * header's pages behind. The caller resets the advice to normal. */
/* Drops the pages in [p0, np) that are resident now but were not before
 * (was[]). A page still being read ahead is locked, and DONTNEED skips
 * locked pages: such a page is first touched (which waits for its read;
 * with MADV_RANDOM no more is read) and unmapped again, as DONTNEED also
 * skips mapped pages. */
static void give_back(pagein_file *f, const unsigned char *was, size_t p0, size_t np) {
    const size_t ps = pagein_page_size();
    unsigned char now[256];
    for (size_t b = p0; b < np; b += sizeof now) {
        size_t nb = np - b < sizeof now ? np - b : sizeof now;
        if (mincore((void *)(f->base + b * ps), nb * ps, now) != 0) return;
        for (size_t i = 0; i < nb;) {
            if (was[b + i] || !(now[i] & 1)) {
                i++;
                continue;
            }
            size_t j = i;
            while (j < nb && !was[b + j] && (now[j] & 1)) j++;
            const uint8_t *a = f->base + (b + i) * ps;
            size_t len = (j - i) * ps;
            if (pi_guard_touch(a, len, f->path, (b + i) * ps, f->fd) == 0) {
                madvise((void *)a, len, MADV_DONTNEED);
                posix_fadvise(f->fd, (off_t)((b + i) * ps), (off_t)len, POSIX_FADV_DONTNEED);
            }
            i = j;
        }
    }
}

static int parse_mapped_grow(pagein_file *f, uint32_t flags, pagein_format fmt) {
    const size_t ps = pagein_page_size();
    size_t w = f->len < (256u << 10) ? f->len : (256u << 10), seen = 0;
    unsigned char *was = NULL; /* residency of pages [0, seen / ps) before we read them */
    int rc;
    for (;;) {
        size_t np = (w + ps - 1) / ps;
        unsigned char *nw = pi_realloc(was, np ? np : 1);
        if (!nw) {
            rc = pi_err(-ENOMEM, "out of memory for a %zu-page residency vector", np);
            break;
        }
        was = nw;
        if (np * ps > seen) {
            if (mincore((void *)(f->base + seen), np * ps - seen, was + seen / ps) != 0)
                memset(was + seen / ps, 1, np - seen / ps); /* unknown: never drop */
            seen = np * ps;
        }
        madvise((void *)f->base, w, MADV_WILLNEED);
        rc = parse(f, f->base, w, flags, fmt, 0);
        if (rc != PAGEIN_E_TRUNCATED || w >= f->len) break;
        pi_table_free(&f->tab);
        pi_table_init(&f->tab);
        w = f->len / 4 < w ? f->len : w * 4;
    }
    if (rc == 0 && was) give_back(f, was, (size_t)((f->tab.data_start + ps - 1) / ps), seen / ps);
    pi_free(was);
    return rc;
}

int pagein_open(pagein_file **out, const char *path, const pagein_open_opts *opts) {
    pi_err_clear();
    if (!out || !path) return pi_err(PAGEIN_E_INVALID, "pagein_open: NULL argument");
    struct pi_source *src;
    struct pi_meta me;
    char *key;
    int have = pi_meta_lookup(path, &key, &me);
    me.check_bytes = have;
    int rc = pi_source_open(&src, path, (opts ? opts->flags : 0) | (have ? PI_OPEN_PROBE_ONLY : 0));
    if (rc == 0) rc = open_source(out, src, opts, have ? &me : NULL, key);
    if (rc == 0 && have) pi_meta_touch(key); /* checked now (or written again) */
    pi_free(me.hdr);
    pi_free(key);
    return rc;
}

/* See metacache.h. The entry's identity and size must
 * be what the check listed (or the URL pinned), and the header still
 * parses from the entry as at any cache hit (parse_remote); otherwise this
 * is pagein_open. */
int pi_file_open_vouched(pagein_file **out, const char *path, const pagein_open_opts *opts,
                         const struct pi_meta_vouch *v) {
    if (!v || (!v->pinned && !v->n && !v->trust_ns) || !path || !pi_source_is_remote(path) || !pi_meta_enabled())
        return pagein_open(out, path, opts);
    pi_err_clear();
    if (!out) return pi_err(PAGEIN_E_INVALID, "pagein_open: NULL argument");
    struct pi_meta me;
    char *key;
    int have = pi_meta_lookup(path, &key, &me), rc, trusted = 0;
    int known = have && pi_meta_usable(v, path, &me, &trusted);
    uint32_t flags = opts ? opts->flags : 0;
    struct pi_source *src;
    if (known) rc = pi_source_open_known(&src, path, flags, me.size, me.identity);
    else rc = pi_source_open(&src, path, flags | (have ? PI_OPEN_PROBE_ONLY : 0));
    me.check_bytes = have && !known;
    if (rc == 0) rc = open_source(out, src, opts, have ? &me : NULL, key);
    if (rc == 0 && have && !trusted) pi_meta_touch(key); /* checked now (or written again) */
    pi_free(me.hdr);
    pi_free(key);
    return rc;
}

int pi_file_open_source(pagein_file **out, struct pi_source *src, const pagein_open_opts *opts) {
    return open_source(out, src, opts, NULL, NULL);
}

static int open_source(pagein_file **out, struct pi_source *src, const pagein_open_opts *opts, struct pi_meta *me,
                       const char *key) {
    uint32_t flags = opts ? opts->flags : 0;
    pagein_format fmt = opts ? opts->format : PAGEIN_FORMAT_UNKNOWN;
    const char *path = src->name;
    pagein_file *f = file_new(path);
    if (!f) {
        pi_source_close(src);
        return pi_err(-ENOMEM, "%s: out of memory", path);
    }
    path = f->path;
    f->src = src;
    int rc;
    f->fd = f->src->fd;
    f->len = (size_t)f->src->size;
    if (f->fd < 0) { /* no mapping: the header through the source */
        rc = parse_remote(f, flags, fmt, me, key);
        if (rc < 0) {
            pi_err_prefix(path);
            goto fail;
        }
        *out = f;
        return 0;
    }
    struct stat st;
    if (fstat(f->fd, &st) < 0) {
        rc = pi_err(-errno, "%s: cannot stat: %s", path, strerror(errno));
        goto fail;
    }
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    char nkey[4200], nid[160];
    int nfs = netfs_key(f, &st, nkey, sizeof nkey, nid);
    if (f->len > 0) {
        /* PRIVATE: copy-on-write, so in-place writes by the caller (torch
         * tensors) stay in this process and never reach the file. */
        int priv = (flags & PAGEIN_OPEN_PRIVATE) != 0;
        void *m = mmap(NULL, f->len, priv ? PROT_READ | PROT_WRITE : PROT_READ, priv ? MAP_PRIVATE : MAP_SHARED,
                       f->fd, 0);
        if (m == MAP_FAILED) {
            rc = pi_err(-errno, "%s: cannot map %zu bytes: %s", path, f->len, strerror(errno));
            goto fail;
        }
        f->base = m;
        f->mapped = 1;
        if (nfs && mapped_from_cache(f, flags, fmt, nkey, nid)) { /* no header read through the filesystem */
            *out = f;
            return 0;
        }
    } else {
        f->base = (const uint8_t *)"";
    }
    /* no read-around from the first touch (the magic) either */
    if (f->mapped) madvise((void *)f->base, f->len, MADV_RANDOM);
    const struct pi_format *x = NULL;
    if (f->mapped) {
        pagein_format d = fmt != PAGEIN_FORMAT_UNKNOWN ? fmt : pi_detect_format_named(f->base, f->len, f->len, path);
        x = pi_format_get(d);
    }
    if (x && x->header_read == PI_HEADER_GROW) {
        rc = parse_mapped_grow(f, flags, x->id);
    } else {
        if (f->mapped) header_readahead(f, x);
        rc = parse(f, f->base, f->len, flags, fmt, 0);
    }
    if (f->mapped) madvise((void *)f->base, f->len, MADV_NORMAL);
    if (rc < 0) {
        pi_err_prefix(path);
        goto fail;
    }
    if (nfs) mapped_to_cache(f, nkey, nid);
    *out = f;
    return 0;
fail:
    pagein_close(f);
    return rc;
}

int pagein_open_memory(pagein_file **out, const void *buf, size_t len, const char *name,
                       const pagein_open_opts *opts) {
    pi_err_clear();
    if (!out || (!buf && len)) return pi_err(PAGEIN_E_INVALID, "pagein_open_memory: NULL argument");
    pagein_file *f = file_new(name ? name : "<memory>");
    if (!f) return pi_err(-ENOMEM, "out of memory");
    f->base = buf ? buf : (const void *)"";
    f->len = len;
    int rc = parse(f, f->base, f->len, opts ? opts->flags : 0, opts ? opts->format : PAGEIN_FORMAT_UNKNOWN, 1);
    if (rc < 0) {
        pi_err_prefix(f->path);
        pagein_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

void pagein_close(pagein_file *f) {
    if (!f) return;
    if (f->mapped) munmap((void *)f->base, f->len);
    if (f->src) pi_source_close(f->src); /* closes f->fd */
    else if (f->fd >= 0) close(f->fd);
    pi_table_free(&f->tab);
    pi_free(f->hdr);
    pi_free(f->path);
    pi_free(f);
}

void pagein_file_get_info(const pagein_file *f, pagein_file_info *info) {
    memset(info, 0, sizeof *info);
    info->path = f->path;
    info->format = f->tab.format;
    info->file_size = f->len;
    info->data_start = f->tab.data_start;
    info->header_len = f->tab.header_len;
    info->version = f->tab.version;
    info->alignment = f->tab.alignment;
    info->n_tensors = f->tab.n;
    info->n_meta = f->tab.nmeta;
    info->big_endian = f->tab.big_endian;
    info->base = f->base;
}

size_t pagein_tensor_count(const pagein_file *f) { return f ? f->tab.n : 0; }

const pagein_tensor *pagein_tensor_at(const pagein_file *f, size_t i) {
    return f && i < f->tab.n ? &f->tab.t[i] : NULL;
}

const pagein_tensor *pagein_tensor_by_layer(const pagein_file *f, size_t i) {
    return f && i < f->tab.n ? &f->tab.t[f->tab.by_layer[i]] : NULL;
}

const pagein_tensor *pagein_tensor_find(const pagein_file *f, const char *name, size_t len) {
    return f ? pi_table_find(&f->tab, name, len) : NULL;
}

const pagein_tensor *pagein_tensor_get(const pagein_file *f, const char *name) {
    return f && name ? pi_table_find(&f->tab, name, strlen(name)) : NULL;
}

size_t pagein_meta_count(const pagein_file *f) { return f ? f->tab.nmeta : 0; }

const pagein_meta *pagein_meta_at(const pagein_file *f, size_t i) {
    return f && i < f->tab.nmeta ? &f->tab.meta[i] : NULL;
}

const pagein_meta *pagein_meta_find(const pagein_file *f, const char *key) {
    return f && key ? pi_table_find_meta(&f->tab, key, strlen(key)) : NULL;
}
