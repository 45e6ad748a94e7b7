/*
 * pull.c - pagein_pull: a remote model (or training shards) into a local
 * cache at the link's limit (docs/REMOTE.md).
 *
 * Per file: the object is cut into chunks; `connections` threads each read
 * one chunk at a time through the source (one range GET on a pooled,
 * kept-alive connection) into their own buffer and pwrite it into
 * FINAL.pagein-part (HF cache: blobs/HASH.incomplete), then mark the chunk
 * done in a state file next to it (one byte per chunk after a header that
 * names the URL, size, ETag and chunk size, then each chunk's XXH3-128).
 * Memory is connections x chunk whatever the size. Killed at any point
 * (kill -9), a second run with the same object (size and ETag unchanged)
 * skips the chunks marked done whose bytes still hash as written: at most
 * the chunks in flight, one per connection, are fetched again. A changed
 * object starts over.
 *
 * When every chunk is in: verification (sha256 of the file when the server
 * states one: the Hub's X-Linked-Etag, the LFS oid; the MD5 of a
 * single-part S3/GCS object's ETag; else only size and ETag, which every
 * response was checked against; and, when the source has a pagein manifest
 * next to it that lists the file, its size, header hash and every tensor's
 * XXH3-128 from that manifest), then io/atomic.c puts it in place
 * (pi_atomic_adopt: fsync, the part path checked to be still the file
 * written, rename under the directory's descriptor, fsync of the
 * directory; links by pi_atomic_symlink): the final path holds a complete,
 * verified file or nothing.
 *
 * Layouts: without a destination, a source that has a cache layout
 * (pi_source_ops.cache_place: hf:// goes to the Hugging Face cache,
 * models--ORG--NAME/blobs/HASH, snapshots/COMMIT/PATH -> ../../blobs/HASH,
 * refs/REVISION = COMMIT, so transformers and huggingface_hub find the
 * files) puts it there. Otherwise DEST (a file, or a directory for several
 * files or when it is one), or --stage DIR (relative paths kept), or the
 * current directory. A prefix (pi_source_ops.is_prefix) is listed through
 * its source (list); one that cannot be listed names the model in it by
 * the usual names (load/resolve.c). No scheme is known here.
 */
#include "../source/source.h"
#include "../format/format.h"
#include "../io/io.h"
#include "../load/load.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "../core/digest.h" /* libcrypto, loaded on the first digest */
#ifdef PAGEIN_HAVE_XXHASH
#define XXH_INLINE_ALL
#include <xxhash.h>
#endif

int pagein_remote_available(void) {
#ifdef PAGEIN_HAVE_CURL
    return 1;
#else
    return 0;
#endif
}

/* The source table's word: a registered remote source takes path. */
int pagein_is_url(const char *path) { return path && pi_source_is_remote(path); }

#define STATE_HDR 4096
/* the pid of the pull writing the file, at the end of the state's header
 * (not compared on resume) */
#define STATE_PID (STATE_HDR - 24)
/* on an installed file: "1 SIZE MTIME IDENTITY", so that pulling again
 * skips it while it is unchanged on both sides */
#define PULL_XATTR "user.pagein.pull"


/* mkdir -p of the directory part of path. */
static int mkdirs_for(const char *path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            int e = errno;
            return pi_err(-e, "%s: cannot create directory %s: %s", path, buf, strerror(e));
        }
        *p = '/';
    }
    return 0;
}

/* pi_atomic_adopt's and pi_atomic_symlink's flags for a pull's options. */
static unsigned adopt_flags(const pagein_pull_opts *o) {
    return o && (o->flags & PAGEIN_PULL_NO_SYNC) ? PI_ATOMIC_NO_SYNC : 0;
}

/* ---- one file ------------------------------------------------------------------- */
struct job {
    struct pi_source *s;
    int fd, sfd;
    uint64_t chunk, size;
    uint32_t *todo; /* chunk indexes to fetch */
    size_t ntodo;
    const pagein_pull_opts *o;
    const char *name;
    _Atomic uint64_t done_bytes;
    uint64_t base_done;
    pthread_mutex_t plock;
    double last_progress;
    /* chunk buffers reused across chunks (at most one per connection):
     * a fresh 8 MiB allocation per chunk costs its page faults and zeroing */
    uint8_t *bufs[64];
    unsigned nbufs;
    uint8_t *marks; /* chunk c written (this run or a resumed one): only then may the file be installed */
    uint64_t nchunks;
};

/* After the marks, the state holds each written chunk's XXH3-128 (as
 * written, before its mark): a resumed chunk is read back and checked
 * against it (check_resumed). */
#define STATE_HASH(nchunks, c) ((off_t)(STATE_HDR + (nchunks) + 16 * (c)))

static uint8_t *buf_get(struct job *j, uint64_t len) {
    uint8_t *b = NULL;
    pthread_mutex_lock(&j->plock);
    if (j->nbufs) b = j->bufs[--j->nbufs];
    pthread_mutex_unlock(&j->plock);
    return b ? b : pi_malloc(j->chunk ? j->chunk : (len ? len : 1));
}

static void buf_put(struct job *j, uint8_t *b) {
    pthread_mutex_lock(&j->plock);
    if (j->nbufs < 64) j->bufs[j->nbufs++] = b, b = NULL;
    pthread_mutex_unlock(&j->plock);
    pi_free(b);
}

static int fetch_chunk(void *ctx, size_t i) {
    struct job *j = ctx;
    uint64_t c = j->todo[i];
    uint64_t off = c * j->chunk, len = PI_MIN(j->chunk, j->size - off);
    uint8_t *buf = buf_get(j, len);
    if (!buf) return pi_err(-ENOMEM, "%s: out of memory for a %llu-byte chunk", j->name, (unsigned long long)len);
    /* one range GET through readv, not read: read serves reads near the
     * start from a growing header prefix (one at a time), which would
     * serialize the first chunks */
    struct pi_read_req r = {buf, off, len, 0, NULL};
    int rc = pi_source_readv(j->s, &r, 1, 1, NULL, NULL);
#ifdef PAGEIN_HAVE_XXHASH
    XXH128_canonical_t hc;
    if (rc == 0) XXH128_canonicalFromHash(&hc, XXH3_128bits(buf, (size_t)len));
#endif
    for (uint64_t w = 0; rc == 0 && w < len;) {
        ssize_t k = pwrite(j->fd, buf + w, len - w, (off_t)(off + w));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = k < 0 ? errno : EIO;
            rc = pi_err(-e, "%s: writing the download: %s", j->name, strerror(e));
        } else {
            w += (uint64_t)k;
        }
    }
    buf_put(j, buf);
    if (rc < 0) return rc;
#ifdef PAGEIN_HAVE_XXHASH
    if (pwrite(j->sfd, hc.digest, 16, STATE_HASH(j->nchunks, c)) != 16) {
        int e = errno;
        return pi_err(-e, "%s: writing the resume state: %s", j->name, strerror(e));
    }
#endif
    /* only now is the chunk marked done: after a kill the mark never
     * claims bytes that were not written (the page cache holds them) */
    char one = '1';
    if (pwrite(j->sfd, &one, 1, (off_t)(STATE_HDR + c)) != 1) {
        int e = errno;
        return pi_err(-e, "%s: writing the resume state: %s", j->name, strerror(e));
    }
    j->marks[c] = 1;
    uint64_t d = atomic_fetch_add(&j->done_bytes, len) + len;
    if (j->o && j->o->progress) {
        pthread_mutex_lock(&j->plock);
        j->o->progress(j->o->ctx, j->name, j->base_done + d, j->size);
        pthread_mutex_unlock(&j->plock);
    }
    return 0;
}

/* Verifies fd's first size bytes against the checksum the source states
 * (pi_source_ops.checksum: the Hub's sha256, an S3/GCS MD5 ETag). *how
 * gets the method. */
static int verify(struct pi_source *s, int fd, uint64_t size, const char *name, char *how, size_t howcap) {
    struct pi_checksum ck;
    const char *algo = NULL;
    if (pi_source_checksum(s, &ck) == 1 && (!strcmp(ck.algo, "sha256") || !strcmp(ck.algo, "md5"))) algo = ck.algo;
    if (!algo) {
        snprintf(how, howcap, "size+etag");
        return 0;
    }
#ifndef PAGEIN_HAVE_LIBCRYPTO
    snprintf(how, howcap, "size+etag (no libcrypto for %s)", algo);
    return 0;
#else
    const char *want = ck.hex;
    struct pi_digest *ctx = NULL;
    uint8_t *buf = pi_malloc(4u << 20);
    int rc = buf ? pi_digest_new(&ctx, algo, name) : pi_err(-ENOMEM, "%s: out of memory", name);
    if (rc < 0) goto out;
    for (uint64_t off = 0; off < size;) {
        ssize_t k = pread(fd, buf, (size_t)PI_MIN(4u << 20, size - off), (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            rc = pi_err(k < 0 ? -errno : PAGEIN_E_TRUNCATED, "%s: reading the download back to verify it", name);
            goto out;
        }
        pi_digest_update(ctx, buf, (size_t)k);
        off += (uint64_t)k;
    }
    char got[PI_DIGEST_HEX_CAP];
    rc = pi_digest_final(ctx, got);
    if (rc < 0) pi_err_prefix(name);
    else if (strcmp(got, want) != 0)
        rc = pi_err(PAGEIN_E_HASH_MISMATCH, "%s: %s of the download is %s, the server states %s", name, algo, got, want);
    snprintf(how, howcap, "%s", algo);
out:
    pi_free(buf);
    pi_digest_free(ctx);
    return rc;
#endif
}

/* ---- pagein manifests (docs/FORMAT-MANIFEST.md) ------------------------------------- */
/* A manifest found next to the pulled source describes the files of one
 * folder of the destination (reldir: "" or "sub/", as the files' relative
 * paths): a file there whose base name it lists is checked against it. */
struct mf {
    char reldir[2048];
    char uri[4096];
    struct pi_manifest m;
};

struct mfs {
    struct mf *v;
    size_t n;
};

/* What one file is checked against: file record fi of manifest mf. */
struct mcheck {
    const struct mf *mf;
    uint32_t fi;
};

static void mfs_free(struct mfs *ms) {
    for (size_t i = 0; i < ms->n; i++) pi_manifest_free(&ms->v[i].m);
    pi_free(ms->v);
    ms->v = NULL;
    ms->n = 0;
}

/* The manifest for relative path rel, or 0 when none lists it. */
static int mfs_find(const struct mfs *ms, const char *rel, struct mcheck *mc) {
    const char *slash = strrchr(rel, '/');
    size_t dl = slash ? (size_t)(slash - rel) + 1 : 0;
    const char *base = rel + dl;
    for (size_t i = 0; i < ms->n; i++) {
        const struct mf *f = &ms->v[i];
        if (strlen(f->reldir) != dl || strncmp(f->reldir, rel, dl) != 0) continue;
        for (size_t k = 0; k < f->m.nfiles; k++)
            if (f->m.files[k].name_len == strlen(base) && memcmp(f->m.files[k].name, base, f->m.files[k].name_len) == 0) {
                mc->mf = f;
                mc->fi = (uint32_t)k;
                return 1;
            }
    }
    return 0;
}

/* Fetches and parses the manifest at uri for the files under reldir.
 * Returns 1 when it was there, 0 when the server has no such object (404,
 * 410, 401, or 403 as S3 answers for a missing key without list rights) or
 * answers with something that is not a manifest (a server's catch-all
 * page), or a negative code (network failure, a manifest that does not
 * parse). */
static int mfs_fetch(struct mfs *ms, const char *uri, const char *reldir, pagein_pull_stats *st) {
    for (size_t i = 0; i < ms->n; i++)
        if (!strcmp(ms->v[i].uri, uri)) return 1;
    struct pi_source *s;
    int rc = pi_source_open(&s, uri, 0);
    if (rc < 0) {
        const char *d = pagein_last_error_detail();
        if (rc == PAGEIN_E_NOT_FOUND || rc == -ENOENT ||
            (rc == PAGEIN_E_REMOTE && d &&
             (strstr(d, "HTTP 404") || strstr(d, "HTTP 410") || strstr(d, "HTTP 403") || strstr(d, "HTTP 401")))) {
            pi_err_clear();
            return 0;
        }
        pi_err_prefix("fetching the manifest");
        return rc;
    }
    uint8_t *buf = NULL;
    struct mf *nv = NULL;
    char magic[15];
    if (s->size < 15 || pi_source_read(s, magic, 15, 0) < 0 || memcmp(magic, "pagein-manifest", 15) != 0) {
        /* a server answering every path with a page, or the object itself
         * (a server that ignores what follows a query string), has no
         * manifest there: only the first bytes are read to tell */
        pi_err_clear();
        rc = 0;
        goto out;
    }
    if (s->size > (64u << 20)) {
        rc = pi_err(PAGEIN_E_LIMIT, "%s: manifest of %llu bytes (limit 64 MiB)", uri, (unsigned long long)s->size);
        goto out;
    }
    if ((rc = pi_source_read_all(s, uri, &buf)) < 0) goto out;
    if (s->size < 15 || memcmp(buf, "pagein-manifest", 15) != 0) {
        /* a server answering every path with a page (200 and HTML) has no
         * manifest there; one that starts like a manifest must parse */
        rc = 0;
        goto out;
    }
    nv = pi_realloc(ms->v, (ms->n + 1) * sizeof *nv);
    if (!nv) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    ms->v = nv;
    struct mf *f = &ms->v[ms->n];
    memset(f, 0, sizeof *f);
    pi_manifest_init(&f->m);
    snprintf(f->reldir, sizeof f->reldir, "%s", reldir);
    snprintf(f->uri, sizeof f->uri, "%s", uri);
    rc = pi_manifest_parse(buf, (size_t)s->size, &f->m);
    if (rc < 0) {
        pi_err_prefix(uri);
        pi_manifest_free(&f->m);
        goto out;
    }
    ms->n++;
    rc = 1;
out:
    if (st) {
        uint64_t rq, rt;
        pi_source_counters(s, &rq, &rt);
        st->requests += rq;
        st->retries += rt;
    }
    pi_free(buf);
    pi_source_close(s);
    return rc;
}

#ifdef PAGEIN_HAVE_XXHASH
static void hex16(const uint8_t h[16], char out[33]) {
    for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", h[i]);
}
#endif

#ifdef PAGEIN_HAVE_XXHASH
/* XXH3-128 (canonical bytes) of fd's [off, off + len), as `pagein hash`. */
static int xxh_range(int fd, uint64_t off, uint64_t len, uint8_t *buf, size_t cap, uint8_t out[16], const char *name) {
    XXH3_state_t st;
    XXH3_128bits_reset(&st);
    while (len) {
        ssize_t k = pread(fd, buf, (size_t)PI_MIN((uint64_t)cap, len), (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return pi_err(k < 0 ? -errno : PAGEIN_E_TRUNCATED, "%s: reading the download back to verify it", name);
        XXH3_128bits_update(&st, buf, (size_t)k);
        off += (uint64_t)k;
        len -= (uint64_t)k;
    }
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&st));
    memcpy(out, c.digest, 16);
    return 0;
}
#endif

/* Checks the download (fd, size bytes) against its manifest record: the
 * size, the header hash and every tensor's hash. PAGEIN_E_HASH_MISMATCH
 * names the file, what differs and both values. */
static int check_manifest(int fd, uint64_t size, const char *name, const struct mcheck *mc) {
    const struct pi_manifest *m = &mc->mf->m;
    const struct pi_manifest_file *mf = &m->files[mc->fi];
    if (size != mf->size)
        return pi_err(PAGEIN_E_HASH_MISMATCH, "%s: %llu bytes, the manifest %s states %llu", name,
                      (unsigned long long)size, mc->mf->uri, (unsigned long long)mf->size);
#ifndef PAGEIN_HAVE_XXHASH
    (void)fd;
    return 1; /* sizes agree; no hash to compare without libxxhash */
#else
    size_t cap = 4u << 20;
    uint8_t *buf = pi_malloc(cap);
    if (!buf) return pi_err(-ENOMEM, "%s: out of memory", name);
    uint8_t got[16];
    char g[33], w[33];
    int rc = xxh_range(fd, 0, PI_MIN(mf->header_bytes, size), buf, cap, got, name);
    if (rc == 0 && memcmp(got, mf->header_hash, 16) != 0) {
        hex16(got, g), hex16(mf->header_hash, w);
        rc = pi_err(PAGEIN_E_HASH_MISMATCH, "%s: header (bytes [0, %llu)) hashes to %s, the manifest %s states %s",
                    name, (unsigned long long)mf->header_bytes, g, mc->mf->uri, w);
    }
    for (size_t i = 0; rc == 0 && i < m->n; i++) {
        const struct pi_manifest_tensor *t = &m->t[i];
        if (t->file != mc->fi) continue;
        if (t->offset > size || t->nbytes > size - t->offset) {
            rc = pi_err(PAGEIN_E_HASH_MISMATCH, "%s: tensor '%.*s' at [%llu, +%llu) lies past the end (%llu bytes)",
                        name, (int)PI_MIN(t->name_len, 200), t->name, (unsigned long long)t->offset,
                        (unsigned long long)t->nbytes, (unsigned long long)size);
            break;
        }
        rc = xxh_range(fd, t->offset, t->nbytes, buf, cap, got, name);
        if (rc == 0 && memcmp(got, t->hash, 16) != 0) {
            hex16(got, g), hex16(t->hash, w);
            rc = pi_err(PAGEIN_E_HASH_MISMATCH,
                        "%s: tensor '%.*s' (bytes [%llu, +%llu)) hashes to %s, the manifest %s states %s", name,
                        (int)PI_MIN(t->name_len, 200), t->name, (unsigned long long)t->offset,
                        (unsigned long long)t->nbytes, g, mc->mf->uri, w);
        }
    }
    pi_free(buf);
    return rc;
#endif
}

/* st->verified: the method when every file got the same one, else the
 * distinct methods in the order first seen, comma-separated
 * ("size+etag,manifest": an index without, its shards with a manifest). */
static void note_verified(pagein_pull_stats *st, const char *how) {
    size_t hl = strlen(how), vl = strlen(st->verified);
    for (const char *p = st->verified; *p;) {
        size_t l = strcspn(p, ",");
        if (l == hl && !strncmp(p, how, hl)) return;
        p += l + (p[l] == ',');
    }
    if (vl + (vl ? 1 : 0) + hl >= sizeof st->verified) return; /* full: keep what is there */
    if (vl) st->verified[vl++] = ',';
    memcpy(st->verified + vl, how, hl + 1);
}

/* opts->note when the caller's struct has it. */
static void note(const pagein_pull_opts *o, const char *file, const char *msg) {
    if (o && o->size >= offsetof(pagein_pull_opts, note) + sizeof o->note && o->note) o->note(o->ctx, file, msg);
}

/* The pid recorded in the state file at spath by the pull holding its
 * part file, or 0 when none is recorded or that process is gone. */
static long holder_pid(const char *spath) {
    int fd = open(spath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return 0;
    char b[STATE_HDR - STATE_PID + 1];
    ssize_t k = pread(fd, b, sizeof b - 1, STATE_PID);
    close(fd);
    long pid = 0;
    if (k <= 0) return 0;
    b[k] = 0;
    if (sscanf(b, "pid %ld", &pid) != 1 || pid <= 0) return 0;
    return kill((pid_t)pid, 0) == 0 || errno == EPERM ? pid : 0;
}

/* Opens part (created if needed, never truncated here, no symlink
 * followed) and takes an exclusive OFD lock on it, held until its close: a
 * second pull of the same file, in this process or another, fails here,
 * before it reads the state or truncates anything, instead of truncating
 * the first one's chunks to zeros under it. A part file that the holder
 * renamed into place while this one waited is left alone: the path is
 * opened again. */
static int open_locked(const char *part, const char *spath, const char *name, int *out) {
    for (int attempt = 0; attempt < 8; attempt++) {
        int fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0) {
            int e = errno;
            return pi_err(-e, "%s: cannot open %s: %s%s", name, part, strerror(e),
                          e == ELOOP ? " (a symbolic link there is not followed)" : "");
        }
        struct flock fl;
        memset(&fl, 0, sizeof fl);
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        if (fcntl(fd, F_OFD_SETLK, &fl) != 0 && errno != ENOLCK && errno != EINVAL && errno != ENOSYS &&
            errno != EOPNOTSUPP) { /* a file system without locks: as before, unlocked */
            int e = errno;
            close(fd);
            if (e != EAGAIN && e != EACCES) return pi_err(-e, "%s: cannot lock %s: %s", name, part, strerror(e));
            long pid = holder_pid(spath);
            char who[48] = "";
            if (pid) snprintf(who, sizeof who, " (pid %ld)", pid);
            return pi_err(-EBUSY, "%s: %s is being written by another pull of the same file%s: wait for it to finish, "
                          "or stop it and run this again", name, part, who);
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && lstat(part, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            *out = fd;
            return 0;
        }
        close(fd);
    }
    return pi_err(-EBUSY, "%s: %s keeps being replaced by another pull", name, part);
}

/* The xattr value that marks final as this object (size, mtime, identity). */
static void pull_mark(const struct pi_source *s, const struct stat *sb, char *out, size_t cap) {
    snprintf(out, cap, "1 %llu %lld.%09ld %s", (unsigned long long)s->size, (long long)sb->st_mtim.tv_sec,
             (long)sb->st_mtim.tv_nsec, s->identity);
}

/* pi_source_stream's sink: the body in order into the part file. */
static int stream_sink(void *ctx, const void *p, size_t n, uint64_t off) {
    struct job *j = ctx;
    for (size_t w = 0; w < n;) {
        ssize_t k = pwrite(j->fd, (const uint8_t *)p + w, n - w, (off_t)(off + w));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = k < 0 ? errno : EIO;
            return pi_err(-e, "%s: writing the download: %s", j->name, strerror(e));
        }
        w += (size_t)k;
    }
    atomic_store(&j->done_bytes, off + n); /* a retry starts over at 0 */
    if (j->o && j->o->progress) j->o->progress(j->o->ctx, j->name, off + n, j->size);
    return 0;
}

/* A resumed download's marked chunks, read back from the part file and
 * checked against the XXH3-128 the state holds for them: a chunk that
 * differs (the part file changed between the runs, or a power loss kept
 * the mark and lost the bytes) or has no hash (a state written without
 * them) is unmarked, to be fetched again. Returns how many. Without
 * libxxhash nothing is checked (docs/REMOTE.md). */
static uint64_t check_resumed(int fd, int sfd, uint8_t *marks, uint64_t nchunks, uint64_t chunk, uint64_t size,
                              const char *name) {
    uint64_t bad = 0;
#ifdef PAGEIN_HAVE_XXHASH
    size_t cap = 4u << 20;
    uint8_t *buf = pi_malloc(cap);
    for (uint64_t c = 0; c < nchunks; c++) {
        if (!marks[c]) continue;
        uint8_t want[16], got[16], zero[16] = {0};
        int ok = buf && pread(sfd, want, 16, STATE_HASH(nchunks, c)) == 16 && memcmp(want, zero, 16) != 0 &&
                 xxh_range(fd, c * chunk, PI_MIN(chunk, size - c * chunk), buf, cap, got, name) == 0 &&
                 memcmp(got, want, 16) == 0;
        if (!ok) {
            char z = '0';
            marks[c] = 0;
            bad++;
            ssize_t w = pwrite(sfd, &z, 1, (off_t)(STATE_HDR + c));
            (void)w; /* fetched again either way */
        }
    }
    pi_free(buf);
    pi_err_clear();
#else
    (void)fd, (void)sfd, (void)marks, (void)nchunks, (void)chunk, (void)size, (void)name;
#endif
    return bad;
}

/* Downloads the opened source s to final (through part + state); checks
 * it against mc (may be NULL) too. */
/* The chunk size of a download: opts.chunk_bytes, else about 8 MiB cut
 * evenly over the connections, or the size an earlier run of the same
 * object began with (its state file spath). */
static uint64_t pick_chunk(const struct pi_source *s, const pagein_pull_opts *o, unsigned conns, const char *spath) {
    if (o && o->chunk_bytes) return o->chunk_bytes;
    uint64_t chunk;
    /* about 8 MiB, cut so that every connection gets the same number of
     * chunks (no last round with one chunk in flight): 258 MiB over 16
     * connections is 32 chunks of 8.06 MiB, not 33 of 8 MiB. The cut
     * makes a chunk at most 1.5 x the target, so targets of at most
     * 128 MiB for all connections keep their buffers within 192 MiB
     * (more than 16 connections get smaller chunks); at least 1 MiB a
     * chunk: a small object gets one chunk per connection. */
    uint64_t target = 8u << 20;
    if (target * conns > (128u << 20)) target = (128u << 20) / conns; /* memory: conns x chunk */
    uint64_t k = (s->size + (uint64_t)conns * target / 2) / ((uint64_t)conns * target);
    uint64_t n = (k ? k : 1) * conns;
    chunk = (s->size + n - 1) / n;
    chunk = (chunk + 65535) & ~(uint64_t)65535;
    if (chunk < (1u << 20)) chunk = 1u << 20;
    /* a download begun with another chunk size (another -c) resumes
     * with that size rather than starting over, if its buffers stay
     * within twice this run's */
    int ofd = open(spath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (ofd >= 0) {
        char old[STATE_HDR + 1];
        unsigned long long osz = 0, och = 0;
        ssize_t k2 = pread(ofd, old, STATE_HDR, 0);
        close(ofd);
        if (k2 == STATE_HDR) {
            old[STATE_HDR] = 0;
            if (sscanf(old, "pagein-pull 1\nsize %llu\nchunk %llu\n", &osz, &och) == 2 && osz == s->size &&
                och >= 4096 && och <= 2 * chunk && och * conns <= (384ull << 20))
                chunk = och;
        }
    }
    return chunk;
}

/* The end of a download: the part file checked (server hash, manifest),
 * synced, marked as the object and renamed to final; a corrupt one is
 * removed with its state, so the next run starts over. */
static int install_part(struct pi_source *s, int fd, const char *final, const char *part, const char *spath,
                        const pagein_pull_opts *o, pagein_pull_stats *st, const struct mcheck *mc) {
    int rc;
    char how[48];
    rc = verify(s, fd, s->size, s->name, how, sizeof how);
    if (rc == 0 && mc) {
        rc = check_manifest(fd, s->size, s->name, mc);
        if (rc >= 0) {
            /* the manifest's check, with the server's hash when there was one */
            const char *alone = rc == 1 ? "size (manifest; no libxxhash)" : "manifest";
            if (!strncmp(how, "size+etag", 9)) snprintf(how, sizeof how, "%s", alone);
            else snprintf(how + strlen(how), sizeof how - strlen(how), "+%s", rc == 1 ? "manifest size" : "manifest");
            rc = 0;
        }
    }
    if (rc == PAGEIN_E_HASH_MISMATCH) {
        /* a corrupt download is not resumed: start over next time */
        unlink(part);
        unlink(spath);
        return rc;
    }
    if (rc < 0) return rc; /* could not check (memory, a read error): part and state stay */
    if (st) note_verified(st, how);
    /* marks the file as this object: pulling again skips it (up_to_date);
     * set before the fsync, so that it is as durable as the bytes */
    struct stat sb;
    if (s->identity[0] && fstat(fd, &sb) == 0) {
        char mark[600];
        pull_mark(s, &sb, mark, sizeof mark);
        (void)fsetxattr(fd, PULL_XATTR, mark, strlen(mark), 0); /* best effort */
    }
    /* the one atomic writer: fsync, the part path checked to be still the
     * file verified (the lock keeps other pulls away, not an rm or mv),
     * renamed over final under their directory's descriptor, that fsynced */
    rc = pi_atomic_adopt(fd, part, final, adopt_flags(o));
    if (rc < 0) {
        pi_err_prefix(s->name);
        return rc;
    }
    unlink(spath);
    return 0;
}

static int download(struct pi_source *s, const char *final, const char *part, const pagein_pull_opts *o,
                    pagein_pull_stats *st, const struct mcheck *mc) {
    unsigned conns = o && o->connections ? o->connections : (pi_source_facts(s)->depth ? pi_source_facts(s)->depth : 16);
    if (conns > 64) conns = 64;
    char spath[4200];
    snprintf(spath, sizeof spath, "%s.pagein-state", part);
    uint64_t chunk = pick_chunk(s, o, conns, spath);
    /* a server that ignores Range (200 with the whole object to the open's
     * range): one plain stream, one "chunk" */
    int stream = pi_source_ranges_ignored(s);
    if (stream) chunk = s->size ? s->size : 1;
    uint64_t nchunks = s->size ? (s->size + chunk - 1) / chunk : 0;
    if (nchunks > (1u << 26)) return pi_err(PAGEIN_E_LIMIT, "%s: too many chunks (%llu)", s->name, (unsigned long long)nchunks);
#ifdef PAGEIN_HAVE_LIBCRYPTO
    {
        /* the digest verify will need, loaded now: a machine without
         * libcrypto learns it before the download, not after it */
        struct pi_checksum ck;
        if (pi_source_checksum(s, &ck) == 1 && (!strcmp(ck.algo, "sha256") || !strcmp(ck.algo, "md5"))) {
            struct pi_digest *ctx = NULL;
            FORWARD_IF(pi_digest_new(&ctx, ck.algo, s->name));
            pi_digest_free(ctx);
        }
    }
#endif
    FORWARD_IF(mkdirs_for(final));
    FORWARD_IF(mkdirs_for(part));
    char hdr[STATE_HDR], shown[2048];
    memset(hdr, ' ', sizeof hdr);
    /* the URL without its password or signature (the state is a file others may read) */
    int hl = snprintf(hdr, sizeof hdr, "pagein-pull 1\nsize %llu\nchunk %llu\netag %s\nurl %s\n",
                      (unsigned long long)s->size, (unsigned long long)chunk, s->identity,
                      pi_url_redact(s->name, shown, sizeof shown));
    if (hl >= STATE_PID - 1) hl = STATE_PID - 2;
    hdr[hl] = ' ';
    memset(hdr + STATE_PID, ' ', STATE_HDR - 1 - STATE_PID);
    hdr[STATE_HDR - 1] = '\n';
    /* resume? the state must describe the same object and chunking */
    uint8_t *marks = pi_calloc(nchunks ? nchunks : 1, 1);
    if (!marks) return pi_err(-ENOMEM, "%s: out of memory", s->name);
    int fd = -1, rc = open_locked(part, spath, s->name, &fd);
    if (rc < 0) {
        pi_free(marks);
        return rc;
    }
    int resume = 0;
    int sfd = open(spath, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (sfd >= 0) {
        char old[STATE_HDR];
        struct stat pst;
        if (pread(sfd, old, STATE_HDR, 0) == STATE_HDR && memcmp(old, hdr, STATE_PID) == 0 &&
            fstat(fd, &pst) == 0 && (uint64_t)pst.st_size == s->size) {
            ssize_t k = pread(sfd, marks, nchunks, STATE_HDR);
            if (k < 0) k = 0;
            for (ssize_t i = 0; i < k; i++) marks[i] = marks[i] == '1';
            for (uint64_t i = (uint64_t)k; i < nchunks; i++) marks[i] = 0;
            resume = 1;
            uint64_t bad = check_resumed(fd, sfd, marks, nchunks, chunk, s->size, s->name);
            if (bad) {
                char msg[160];
                snprintf(msg, sizeof msg, "%llu chunk(s) of the part file differ from what was written: fetched again",
                         (unsigned long long)bad);
                note(o, s->name, msg);
            }
        }
        if (!resume) close(sfd), sfd = -1;
    }
    if (!resume) {
        unlink(spath);
        sfd = open(spath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (sfd < 0 || pwrite(sfd, hdr, STATE_HDR, 0) != STATE_HDR) {
            rc = pi_err(-errno, "%s: cannot write %s: %s%s", s->name, spath, strerror(errno),
                        errno == ELOOP ? " (a symbolic link there is not followed)" : "");
            goto out;
        }
        for (uint64_t i = 0; i < nchunks; i++) marks[i] = 0;
        if (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t)s->size) != 0) {
            rc = pi_err(-errno, "%s: cannot size %s: %s", s->name, part, strerror(errno));
            goto out;
        }
    }
    {
        /* who holds the part file, for a second pull's message */
        char pr[STATE_HDR - STATE_PID];
        snprintf(pr, sizeof pr, "pid %-19ld", (long)getpid());
        if (pwrite(sfd, pr, sizeof pr - 1, STATE_PID) != (ssize_t)sizeof pr - 1) {
            rc = pi_err(-errno, "%s: cannot write %s: %s", s->name, spath, strerror(errno));
            goto out;
        }
    }
    struct job j;
    memset(&j, 0, sizeof j);
    j.s = s;
    j.fd = fd;
    j.sfd = sfd;
    j.chunk = chunk;
    j.size = s->size;
    j.o = o;
    j.name = s->name;
    j.marks = marks;
    j.nchunks = nchunks;
    pthread_mutex_init(&j.plock, NULL);
    j.todo = pi_malloc((nchunks ? nchunks : 1) * sizeof *j.todo);
    if (!j.todo) {
        pthread_mutex_destroy(&j.plock);
        rc = pi_err(-ENOMEM, "%s: out of memory", s->name);
        goto out;
    }
    uint64_t have = 0;
    for (uint64_t i = 0; i < nchunks; i++) {
        if (marks[i]) have += PI_MIN(chunk, s->size - i * chunk);
        else j.todo[j.ntodo++] = (uint32_t)i;
    }
    j.base_done = have;
    if (o && o->progress) o->progress(o->ctx, s->name, have, s->size);
    if (stream && j.ntodo) {
        note(o, s->name, "the server ignores Range requests (it answered 200 with the whole object): one plain "
                         "stream, not resumable");
        rc = pi_source_stream(s, stream_sink, &j);
        char one = '1';
        if (rc == 0 && pwrite(sfd, &one, 1, STATE_HDR) != 1)
            rc = pi_err(-errno, "%s: writing the resume state: %s", s->name, strerror(errno));
        if (rc == 0) marks[0] = 1;
    } else {
        rc = j.ntodo ? pi_parallel(conns, j.ntodo, fetch_chunk, &j) : 0;
    }
    /* never install a chunk that was not written (it would read as zeros
     * and pass a size+etag check) */
    for (uint64_t i = 0; rc == 0 && i < nchunks; i++)
        if (!marks[i])
            rc = pi_err(PAGEIN_E_TRUNCATED, "%s: chunk %llu (bytes %llu-) of %s was never written: not installed",
                        s->name, (unsigned long long)i, (unsigned long long)(i * chunk), part);
    if (st) {
        st->resumed += have;
        st->fetched += atomic_load(&j.done_bytes);
    }
    pi_free(j.todo);
    for (unsigned b = 0; b < j.nbufs; b++) pi_free(j.bufs[b]);
    pthread_mutex_destroy(&j.plock);
    if (rc < 0) goto out; /* part and state stay for the next run */
    rc = install_part(s, fd, final, part, spath, o, st, mc);
out:
    if (fd >= 0) close(fd);
    if (sfd >= 0) close(sfd);
    pi_free(marks);
    return rc;
}

/* 1 when final already holds the object s (pulling again into the same
 * folder): a regular file of its size that this pull marked as the same
 * object (PULL_XATTR: identity, size and mtime unchanged), or, unmarked,
 * whose sha256/MD5 is the one the server states; and, when a manifest
 * lists it, that passes the manifest. *how gets the method. 0 otherwise
 * (no error: it is fetched). */
static int up_to_date(struct pi_source *s, const char *final, const struct mcheck *mc, char *how, size_t howcap) {
    int fd = open(final, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return 0;
    struct stat sb;
    int ok = 0;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size == s->size) {
        char want[600], got[600];
        pull_mark(s, &sb, want, sizeof want);
        ssize_t k = fgetxattr(fd, PULL_XATTR, got, sizeof got - 1);
        if (k > 0) {
            got[k] = 0;
            ok = s->identity[0] && strcmp(got, want) == 0;
            if (ok) snprintf(how, howcap, "size+etag");
        } else if (verify(s, fd, s->size, final, how, howcap) == 0) {
            ok = strncmp(how, "size+etag", 9) != 0; /* only a stated hash vouches for an unmarked file */
        }
        if (ok && mc) {
            int c = check_manifest(fd, s->size, final, mc);
            ok = c == 0 || c == 1;
        }
    }
    close(fd);
    pi_err_clear();
    return ok;
}

/* ---- a source's cache layout (pi_source_ops.cache_place: the Hub's) ---------------- */
static int write_small(const char *path, const char *text) {
    FORWARD_IF(mkdirs_for(path));
    struct pi_atomic_file a;
    FORWARD_IF(pi_atomic_open(&a, path));
    int rc = pi_atomic_write(&a, text, strlen(text));
    if (rc == 0) return pi_atomic_commit(&a);
    pi_atomic_abort(&a);
    return rc;
}

/* LINK -> TARGET, replacing what is there (io/atomic.c). */
static int place_link(const char *name, const char *link, const char *target, const pagein_pull_opts *o) {
    FORWARD_IF(mkdirs_for(link));
    int rc = pi_atomic_symlink(target, link, adopt_flags(o));
    if (rc < 0) pi_err_prefix(name);
    return rc;
}

/* A blob the server names by no hash (a static mirror's ETag): the bytes at
 * p->blob are renamed to the blob named by their sha256, as the Hub names
 * an LFS blob, and p's blob and target follow. */
static int name_blob_by_content(struct pi_source *s, struct pi_cache_place *p, const pagein_pull_opts *o) {
#ifndef PAGEIN_HAVE_LIBCRYPTO
    return pi_err(PAGEIN_E_UNSUPPORTED, "%s: the server states no hash to name the blob in the Hugging Face cache, "
                  "and this build has no libcrypto to hash the bytes", s->name);
#else
    int fd = open(p->blob, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return pi_err(-errno, "%s: cannot open %s", s->name, p->blob);
    struct pi_digest *ctx = NULL;
    uint8_t *buf = pi_malloc(4u << 20);
    int rc = buf ? pi_digest_new(&ctx, "sha256", s->name) : pi_err(-ENOMEM, "out of memory");
    for (ssize_t k; rc == 0 && (k = read(fd, buf, 4u << 20)) != 0;) {
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) rc = pi_err(-errno, "%s: reading %s back to hash it", s->name, p->blob);
        else pi_digest_update(ctx, buf, (size_t)k);
    }
    char hex[PI_DIGEST_HEX_CAP] = "", named[sizeof p->blob];
    if (rc == 0 && (rc = pi_digest_final(ctx, hex)) < 0) pi_err_prefix(s->name);
    pi_free(buf);
    pi_digest_free(ctx);
    char *slash = strrchr(p->blob, '/'), *tslash = strrchr(p->target, '/');
    size_t dl = slash ? (size_t)(slash + 1 - p->blob) : 0, hl = strlen(hex);
    if (rc == 0 && (!slash || !tslash)) rc = pi_err(PAGEIN_E_INVALID, "%s: bad cache place %s", s->name, p->blob);
    if (rc == 0 && dl + hl >= sizeof named) rc = pi_err(PAGEIN_E_INVALID, "%s: cache path too long", s->name);
    if (rc == 0) {
        memcpy(named, p->blob, dl);
        memcpy(named + dl, hex, hl + 1);
        /* the bytes hashed are the bytes renamed: the same descriptor */
        rc = pi_atomic_adopt(fd, p->blob, named, adopt_flags(o));
        if (rc < 0) pi_err_prefix(s->name);
    }
    close(fd);
    if (rc < 0) return rc;
    memcpy(p->blob, named, dl + hl + 1);
    snprintf(tslash + 1, sizeof p->target - (size_t)(tslash + 1 - p->target), "%s", hex);
    return 0;
#endif
}

/* An index's link, made only once its shards are in. */
struct place_pend {
    char link[4300], target[4300], blob[4096];
};

/* The install of one opened file where its source's cache layout puts it
 * (p: from cache_place; pend: do not link yet, say what to link). */
static int pull_cached(struct pi_source *s, struct pi_cache_place *p, const pagein_pull_opts *o,
                       pagein_pull_stats *st, const struct mcheck *mc, struct place_pend *pend) {
    char part[4200];
    snprintf(part, sizeof part, "%s.incomplete", p->blob);
    struct stat sb;
    int rc = 0;
    int cached = lstat(p->blob, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size == s->size;
    if (p->name_by_content) {
        /* named by its bytes: in the cache when the snapshot's link leads to
         * a blob of this size (the commit folder pins the bytes) */
        char real[PATH_MAX];
        cached = p->link[0] && stat(p->link, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size == s->size &&
                 realpath(p->link, real) != NULL;
        if (cached) {
            const char *b = strrchr(real, '/'), *t = strrchr(p->target, '/');
            if (b && t) snprintf((char *)t + 1, sizeof p->target - (size_t)(t + 1 - p->target), "%s", b + 1);
            if (strlen(real) < sizeof p->blob) memcpy(p->blob, real, strlen(real) + 1);
        }
    }
    if (cached && mc) {
        /* a manifest lists it: a blob already in the cache is checked like
         * a download (another tool, or the disk, may have changed it); one
         * that fails is fetched again */
        int bfd = open(p->blob, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        int c = bfd < 0 ? pi_err(-errno, "%s: cannot open %s", s->name, p->blob) : check_manifest(bfd, s->size, p->blob, mc);
        if (bfd >= 0) close(bfd);
        if (c == PAGEIN_E_HASH_MISMATCH) {
            unlink(p->blob);
            cached = 0;
            pi_err_clear();
        } else if (c < 0) {
            return c;
        }
    }
    if (cached) {
        if (st) st->cached += s->size;
    } else {
        rc = download(s, p->blob, part, o, st, mc);
        if (rc == 0 && p->name_by_content) rc = name_blob_by_content(s, p, o);
    }
    if (rc < 0) return rc;
    if (p->link[0]) {
        if (pend) {
            snprintf(pend->link, sizeof pend->link, "%s", p->link);
            snprintf(pend->target, sizeof pend->target, "%s", p->target);
            snprintf(pend->blob, sizeof pend->blob, "%s", p->blob);
        } else {
            FORWARD_IF(place_link(s->name, p->link, p->target, o));
        }
    }
    if (p->ref[0]) FORWARD_IF(write_small(p->ref, p->ref_text));
    return 0;
}

/* ---- the file list ----------------------------------------------------------------------- */
struct flist {
    char **uri, **rel;
    size_t n, cap;
    size_t *tab, tcap; /* open addressing over rel: index + 1, 0 = empty */
};

static size_t name_hash(const char *s) {
    size_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot of rel in l->tab: where it is, or the empty one where it goes. */
static size_t *flist_slot(struct flist *l, const char *rel) {
    size_t m = l->tcap - 1, i = name_hash(rel) & m;
    while (l->tab[i] && strcmp(l->rel[l->tab[i] - 1], rel) != 0) i = (i + 1) & m;
    return &l->tab[i];
}

static int flist_add(struct flist *l, const char *uri, const char *rel) {
    /* a set of the names, not a scan of the list: a listing of 80k keys
     * took 10.9 s before its first byte with the scan */
    if (l->tcap < 2 * (l->n + 1)) {
        size_t nc = l->tcap ? l->tcap * 2 : 64;
        size_t *nt = pi_calloc(nc, sizeof *nt);
        if (!nt) return pi_err(-ENOMEM, "out of memory");
        pi_free(l->tab);
        l->tab = nt;
        l->tcap = nc;
        for (size_t i = 0; i < l->n; i++) *flist_slot(l, l->rel[i]) = i + 1;
    }
    if (*flist_slot(l, rel)) return 0;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        char **a = pi_realloc(l->uri, nc * sizeof *a);
        if (!a) return pi_err(-ENOMEM, "out of memory");
        l->uri = a;
        char **b = pi_realloc(l->rel, nc * sizeof *b);
        if (!b) return pi_err(-ENOMEM, "out of memory");
        l->rel = b;
        l->cap = nc;
    }
    /* a relative path never climbs out of the destination */
    size_t rl = strlen(rel);
    if (!rel[0] || rel[0] == '/' || !strcmp(rel, "..") || !strncmp(rel, "../", 3) || strstr(rel, "/../") ||
        (rl >= 3 && !strcmp(rel + rl - 3, "/..")))
        return pi_err(PAGEIN_E_INVALID, "%s: unsafe file name '%s' in the listing", uri, rel);
    l->uri[l->n] = pi_strndup(uri, strlen(uri));
    l->rel[l->n] = pi_strndup(rel, strlen(rel));
    if (!l->uri[l->n] || !l->rel[l->n]) {
        pi_free(l->uri[l->n]);
        pi_free(l->rel[l->n]);
        return pi_err(-ENOMEM, "out of memory");
    }
    *flist_slot(l, l->rel[l->n]) = l->n + 1;
    l->n++;
    return 0;
}

static void flist_free(struct flist *l) {
    for (size_t i = 0; i < l->n; i++) pi_free(l->uri[i]), pi_free(l->rel[i]);
    pi_free(l->uri);
    pi_free(l->rel);
    pi_free(l->tab);
}

/* A prefix's listing into the file list. */
static int list_add(void *arg, const struct pi_list_entry *e) { return flist_add(arg, e->uri, e->rel); }

/* The shard names of a downloaded *.index.json (weight_map values). */
static int index_shards(const char *path, const char *src_uri, struct flist *l, const char *rel_dir) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return pi_err(-errno, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || sb.st_size > (64 << 20)) {
        close(fd);
        return pi_err(PAGEIN_E_LIMIT, "%s: index larger than 64 MiB", path);
    }
    char *buf = pi_malloc((size_t)sb.st_size + 1);
    ssize_t k = buf ? pread(fd, buf, (size_t)sb.st_size, 0) : -1;
    close(fd);
    if (k != sb.st_size) {
        pi_free(buf);
        return pi_err(-EIO, "%s: cannot read the index", path);
    }
    /* the one index parser (load/index.c), as opening the model reads it */
    struct pi_index ix;
    pi_index_init(&ix);
    int rc = pi_index_parse((const uint8_t *)buf, (size_t)k, &ix);
    if (rc < 0) pi_err_prefix(path);
    size_t dl = strcspn(src_uri, "?#"); /* the shards sit next to the index: its path without a query */
    while (dl > 0 && src_uri[dl - 1] != '/') dl--;
    for (size_t i = 0; rc >= 0 && i < ix.nshards; i++) {
        const char *v = ix.shards[i];
        char u[4096], rel[2048];
        snprintf(u, sizeof u, "%.*s%s", (int)dl, src_uri, v);
        if (snprintf(rel, sizeof rel, "%s%s", rel_dir, v) >= (int)sizeof rel) {
            rc = pi_err(PAGEIN_E_LIMIT, "%s: shard name too long", path);
            break;
        }
        rc = flist_add(l, u, rel);
    }
    pi_index_free(&ix);
    pi_free(buf);
    return rc < 0 ? rc : 0;
}

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The name pull gives one object: the source's (the Hub: the path in the
 * repository), else the last path segment without a query or fragment
 * (?download=true). */
static void object_name(const struct pi_source_ops *ops, const char *uri, char *out, size_t cap) {
    out[0] = 0;
    if (ops->object_name && ops->object_name(uri, out, cap) == 0) return;
    pi_err_clear();
    size_t pl = strcspn(uri, "?#"), b = pl;
    while (b > 0 && uri[b - 1] != '/') b--;
    snprintf(out, cap, "%.*s", (int)PI_MIN(pl - b, cap - 1), uri + b);
}

/* A pull of many files (a listed prefix or repository, an index's shards)
 * opens their sources ahead of the downloads, a window of
 * pi_source_open_depth at once: each open is a round trip (the probe) that
 * one after another cost 1,000 x the latency before the first byte moved.
 * A file's failure is kept and reported when its turn comes, as it was. */
struct ahead_slot {
    struct pi_source *s;
    int rc;
    char err[1024];
};
struct ahead {
    const struct flist *l;
    size_t base, n; /* the window: l->uri[base .. base + n) */
    struct ahead_slot *w;
};

static int ahead_open(void *ctx, size_t k) {
    struct ahead *a = ctx;
    struct ahead_slot *sl = &a->w[k];
    sl->s = NULL;
    sl->rc = pi_source_open(&sl->s, a->l->uri[a->base + k], 0);
    if (sl->rc < 0) snprintf(sl->err, sizeof sl->err, "%s", pagein_last_error_detail());
    return 0;
}

static void ahead_close(struct ahead *a, size_t from) {
    for (size_t k = from; k < a->n; k++)
        if (a->w[k].s) pi_source_close(a->w[k].s), a->w[k].s = NULL;
    a->n = 0;
}

/* The source of file i: from the window, opening the next window when i
 * is past it (a list that grew since, with an index's shards, is seen). */
static int ahead_take(struct ahead *a, size_t i, struct pi_source **out) {
    if (!(i >= a->base && i < a->base + a->n)) {
        ahead_close(a, 0);
        size_t left = a->l->n - i;
        /* the first file alone: a pull that fails on it (a bad prefix, a
         * refusing server) stops after one request, as before */
        unsigned depth = i == 0 ? 1 : pi_source_open_depth(a->l->uri[i]);
        a->base = i;
        a->n = left < depth ? left : depth;
        if (a->n > 1) pi_parallel((unsigned)a->n, a->n, ahead_open, a);
        else ahead_open(a, 0);
    }
    struct ahead_slot *sl = &a->w[i - a->base];
    *out = sl->s;
    sl->s = NULL;
    return sl->rc < 0 ? pi_err(sl->rc, "%s", sl->err) : 0;
}

int pagein_pull(const char *src, const char *dest, const pagein_pull_opts *o, pagein_pull_stats *st) {
    if (!src || !pi_source_is_remote(src)) {
        const char *sch = pi_source_schemes();
        if (!*sch)
            return pi_err(PAGEIN_E_UNSUPPORTED, "%s: pagein was built without libcurl: no remote sources",
                          src ? src : "");
        return pi_err(PAGEIN_E_INVALID, "%s: not a remote URL (%s)", src ? src : "(null)", sch);
    }
    if (o && o->size && o->size < sizeof(size_t)) return pi_err(PAGEIN_E_INVALID, "pagein_pull: bad opts->size");
    pagein_pull_stats local;
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    double t0 = pi_now_s();
    struct flist l = {0};
    struct mfs ms = {0};
    struct ahead ah = {0};
    const struct pi_source_ops *ops = pi_source_find(src);
    int rc = 0;
    const char *stage = o ? o->stage_dir : NULL;
    /* no destination: where the source's cache layout puts it (the Hub's), else here */
    int cache = ops->cache_place && !dest && !stage;
    /* an index pulled with its shards is installed after them (pend_*) */
    char pend_final[4096] = "", pend_path[4300] = "", rsrc[4096];
    struct place_pend cpend;
    int cache_pending = 0;
    /* the files */
    int listed = 0; /* from a listing (a repository, a prefix), not one URL */
    if (pi_source_is_prefix(src) && ops->list) {
        listed = 1;
        rc = ops->list(src, list_add, &l);
        if (rc == 0 && l.n == 0) rc = pi_err(PAGEIN_E_NOT_FOUND, "%s: no objects under this prefix", src);
    } else {
        if (pi_source_is_prefix(src)) {
            /* a folder its source cannot list (http(s)://host/dir/): the
             * model in it, as plan and open_model take it */
            rc = pi_remote_model_uri(src, rsrc, sizeof rsrc);
            if (rc < 0) goto out;
            src = rsrc;
        }
        char base[1024];
        object_name(ops, src, base, sizeof base);
        if (!*base) rc = pi_err(PAGEIN_E_INVALID, "%s: names no file", src);
        else rc = flist_add(&l, src, base);
    }
    if (rc < 0) goto out;
    /* pagein manifests: those a listing holds (DIR/.pagein-manifest,
     * FILE.pagein-manifest), else for one file or index URL the one next to
     * it (URL.pagein-manifest, else DIR/.pagein-manifest, as `pagein hash`
     * names them); none is fine (the server's hash or size+etag) */
    if (listed) {
        size_t n0 = l.n;
        for (size_t i = 0; rc >= 0 && i < n0; i++) {
            if (!pi_ends_with(l.rel[i], ".pagein-manifest")) continue;
            const char *sl = strrchr(l.rel[i], '/');
            char rd[2048];
            snprintf(rd, sizeof rd, "%.*s", sl ? (int)(sl - l.rel[i]) + 1 : 0, l.rel[i]);
            rc = mfs_fetch(&ms, l.uri[i], rd, st); /* 0: not a manifest after all (its pull says more) */
        }
    } else {
        char mu[4200], rd[2048];
        const char *sl = strrchr(l.rel[0], '/');
        snprintf(rd, sizeof rd, "%.*s", sl ? (int)(sl - l.rel[0]) + 1 : 0, l.rel[0]);
        /* the path only: a query or fragment (?download=true) is not part
         * of the name the manifest sits next to */
        int plen = (int)strcspn(src, "?#");
        snprintf(mu, sizeof mu, "%.*s.pagein-manifest", plen, src);
        rc = mfs_fetch(&ms, mu, rd, st);
        const char *us = src + plen;
        while (us > src && *us != '/') us--;
        if (rc == 0 && *us == '/') {
            snprintf(mu, sizeof mu, "%.*s/.pagein-manifest", (int)(us - src), src);
            rc = mfs_fetch(&ms, mu, rd, st);
        }
    }
    if (rc < 0) goto out;
    rc = 0;
    int single = l.n == 1 && !pi_ends_with(l.uri[0], ".index.json");
    /* DEST: a file for one file (unless it is a directory), else a directory */
    const char *dir = stage ? stage : dest ? dest : ".";
    int dest_is_file = dest && !stage && single && !pi_ends_with(dest, "/") && !is_dir(dest);
    ah.l = &l;
    ah.w = pi_calloc(256, sizeof *ah.w); /* pi_source_open_depth's largest window */
    if (!ah.w) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < l.n; i++) {
        struct pi_source *s;
        rc = ahead_take(&ah, i, &s);
        if (rc < 0) goto out;
        char final[4096], part[4200], placed[4096] = "";
        struct mcheck mc;
        const struct mcheck *mcp = mfs_find(&ms, l.rel[i], &mc) ? &mc : NULL;
        int defer = i == 0 && !listed && pi_ends_with(l.rel[0], ".index.json");
        if (cache) {
            struct pi_cache_place *cp = pi_malloc(sizeof *cp);
            rc = cp ? s->ops->cache_place(s, o ? o->cache_dir : NULL, cp) : pi_err(-ENOMEM, "out of memory");
            if (rc == 0) rc = pull_cached(s, cp, o, st, mcp, defer ? &cpend : NULL);
            if (rc == 0) {
                cache_pending = defer;
                snprintf(placed, sizeof placed, "%s", cp->blob);
                /* one file: its link (the snapshot's path); else the folder */
                int k = snprintf(st->path, sizeof st->path, "%s", single && cp->link[0] ? cp->link : cp->dir);
                if (k < 0 || (size_t)k >= sizeof st->path) rc = pi_err(PAGEIN_E_LIMIT, "%s: path too long", s->name);
            }
            pi_free(cp);
        } else {
            if (dest_is_file) snprintf(final, sizeof final, "%s", dest);
            else snprintf(final, sizeof final, "%s%s%s", dir, pi_ends_with(dir, "/") ? "" : "/", l.rel[i]);
            snprintf(part, sizeof part, "%s.pagein-part", final);
            snprintf(placed, sizeof placed, "%s", final);
            char how[48];
            if (up_to_date(s, final, mcp, how, sizeof how)) {
                st->cached += s->size; /* pulled before, unchanged on both sides */
            } else if (defer) {
                /* the index goes into place once its shards are in */
                snprintf(pend_path, sizeof pend_path, "%s.pagein-index", final);
                rc = download(s, pend_path, part, o, st, mcp);
                if (rc == 0) {
                    snprintf(pend_final, sizeof pend_final, "%s", final);
                    snprintf(placed, sizeof placed, "%s", pend_path);
                }
            } else {
                rc = download(s, final, part, o, st, mcp);
            }
            if (rc == 0) {
                if (single) snprintf(st->path, sizeof st->path, "%s", final);
                else snprintf(st->path, sizeof st->path, "%s", dir);
            }
        }
        uint64_t rq, rt;
        pi_source_counters(s, &rq, &rt);
        st->requests += rq;
        st->retries += rt;
        st->bytes += s->size;
        st->files++;
        pi_source_close(s);
        if (rc < 0) goto out;
        /* a sharded index brings its shards (listed after it; those a
         * listing already holds are not added twice) */
        if (pi_ends_with(l.rel[i], ".index.json")) {
            char reldir[2048];
            snprintf(reldir, sizeof reldir, "%.*s",
                     strrchr(l.rel[i], '/') ? (int)(strrchr(l.rel[i], '/') - l.rel[i]) + 1 : 0, l.rel[i]);
            rc = index_shards(placed, l.uri[i], &l, reldir);
            if (rc < 0) goto out;
            if (!cache && !dest_is_file) snprintf(st->path, sizeof st->path, "%s", dir);
        }
    }
    /* every shard is in: now the index */
    if (rc == 0 && cache_pending) rc = place_link(src, cpend.link, cpend.target, o);
    if (rc == 0 && pend_final[0]) {
        /* downloaded and verified like any file (its descriptor closed
         * since): opened again without following a link, then put in place
         * by the one atomic writer */
        int ifd = open(pend_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (ifd < 0) rc = pi_err(-errno, "%s: cannot open %s: %s", src, pend_path, strerror(errno));
        else if ((rc = pi_atomic_adopt(ifd, pend_path, pend_final, adopt_flags(o))) < 0) pi_err_prefix(src);
        if (ifd >= 0) close(ifd);
        if (rc == 0) pend_final[0] = 0;
    }
out:
    if (pend_final[0]) unlink(pend_path); /* a failed pull installs no index without its shards */
    st->seconds = pi_now_s() - t0;
    if (ah.w) ahead_close(&ah, 0);
    pi_free(ah.w);
    flist_free(&l);
    mfs_free(&ms);
    return rc;
}

