/*
 * pull.c - pagein_pull: a remote model (or training shards) into a local
 * cache at the link's limit (docs/REMOTE.md).
 *
 * Per file: the object is cut into chunks; `connections` threads each read
 * one chunk at a time through the source (one range GET on a pooled,
 * kept-alive connection) into their own buffer and pwrite it into
 * FINAL.pagein-part (HF cache: blobs/HASH.incomplete), then mark the chunk
 * done in a state file next to it (one byte per chunk after a header that
 * names the URL, size, ETag and chunk size). Memory is connections x chunk
 * whatever the size. Killed at any point (kill -9), a second run with the
 * same object (size and ETag unchanged) skips the chunks marked done: at
 * most the chunks in flight, one per connection, are fetched again. A
 * changed object starts over.
 *
 * When every chunk is in: verification (sha256 of the file when the server
 * states one: the Hub's X-Linked-Etag, the LFS oid; the MD5 of a
 * single-part S3/GCS object's ETag; else only size and ETag, which every
 * response was checked against), fsync, rename into the final place, fsync
 * of the directory: the final path holds a complete, verified file or
 * nothing.
 *
 * Layouts: hf:// without a destination goes to the Hugging Face cache
 * (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub):
 * models--ORG--NAME/blobs/HASH, snapshots/COMMIT/PATH -> ../../blobs/HASH,
 * refs/REVISION = COMMIT, so transformers and huggingface_hub find the
 * files. Otherwise DEST (a file, or a directory for several files or when
 * it is one), or --stage DIR (relative paths kept), or the current
 * directory.
 */
#include "remote.h"
#include "../format/format.h"
#include "../io/io.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef PAGEIN_HAVE_LIBCRYPTO
#include <openssl/evp.h>
#endif

int pagein_remote_available(void) {
#ifdef PAGEIN_HAVE_CURL
    return 1;
#else
    return 0;
#endif
}

int pagein_is_url(const char *path) { return path && pi_source_is_remote(path); }

#ifndef PAGEIN_HAVE_CURL
int pagein_pull(const char *src, const char *dest, const pagein_pull_opts *opts, pagein_pull_stats *stats) {
    (void)dest, (void)opts, (void)stats;
    return pi_err(PAGEIN_E_UNSUPPORTED, "%s: pagein was built without libcurl: no remote sources", src ? src : "");
}
#else

#define STATE_HDR 4096


static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *env(const char *n) {
    const char *v = getenv(n);
    return v && *v ? v : NULL;
}

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

static int fsync_dir_of(const char *path) {
    char d[4096];
    snprintf(d, sizeof d, "%s", path);
    char *s = strrchr(d, '/');
    if (s == d) d[1] = 0;
    else if (s) *s = 0;
    else snprintf(d, sizeof d, ".");
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -errno;
    int rc = fsync(fd) == 0 ? 0 : -errno;
    close(fd);
    return rc;
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
};

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
    /* only now is the chunk marked done: after a kill the mark never
     * claims bytes that were not written (the page cache holds them) */
    char one = '1';
    if (pwrite(j->sfd, &one, 1, (off_t)(STATE_HDR + c)) != 1) {
        int e = errno;
        return pi_err(-e, "%s: writing the resume state: %s", j->name, strerror(e));
    }
    uint64_t d = atomic_fetch_add(&j->done_bytes, len) + len;
    if (j->o && j->o->progress) {
        pthread_mutex_lock(&j->plock);
        j->o->progress(j->o->ctx, j->name, j->base_done + d, j->size);
        pthread_mutex_unlock(&j->plock);
    }
    return 0;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* s (quotes and W/ stripped) is exactly n hex digits: copies it lower-case. */
static int hex_tag(const char *s, size_t n, char *out) {
    if (strncmp(s, "W/", 2) == 0) s += 2;
    if (*s == '"') s++;
    size_t l = strcspn(s, "\"");
    if (l != n || (s[l] && s[l + 1])) return 0;
    for (size_t i = 0; i < n; i++) {
        if (hexval(s[i]) < 0) return 0;
        out[i] = (char)(s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 'a' : s[i]);
    }
    out[n] = 0;
    return 1;
}

/* Verifies fd's first size bytes against the hash the server stated.
 * *how gets the method. */
static int verify(struct pi_source *s, int fd, uint64_t size, const char *name, char *how, size_t howcap) {
    char want[65];
    const char *algo = NULL;
    if (hex_tag(pi_http_linked_etag(s), 64, want)) algo = "sha256";
    else if ((!strcmp(pi_source_facts(s)->fs_type, "s3") || !strcmp(pi_source_facts(s)->fs_type, "gs")) && hex_tag(pi_http_etag(s), 32, want))
        algo = "md5";
    if (!algo) {
        snprintf(how, howcap, "size+etag");
        return 0;
    }
#ifndef PAGEIN_HAVE_LIBCRYPTO
    snprintf(how, howcap, "size+etag (no libcrypto for %s)", algo);
    return 0;
#else
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    uint8_t *buf = pi_malloc(4u << 20);
    int rc = 0;
    if (!ctx || !buf) {
        rc = pi_err(-ENOMEM, "%s: out of memory", name);
        goto out;
    }
    EVP_DigestInit_ex(ctx, strcmp(algo, "md5") == 0 ? EVP_md5() : EVP_sha256(), NULL);
    for (uint64_t off = 0; off < size;) {
        ssize_t k = pread(fd, buf, (size_t)PI_MIN(4u << 20, size - off), (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            rc = pi_err(k < 0 ? -errno : PAGEIN_E_TRUNCATED, "%s: reading the download back to verify it", name);
            goto out;
        }
        EVP_DigestUpdate(ctx, buf, (size_t)k);
        off += (uint64_t)k;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_DigestFinal_ex(ctx, md, &mdlen);
    char got[2 * EVP_MAX_MD_SIZE + 1];
    for (unsigned i = 0; i < mdlen; i++) snprintf(got + 2 * i, 3, "%02x", md[i]);
    if (strcmp(got, want) != 0)
        rc = pi_err(PAGEIN_E_HASH_MISMATCH, "%s: %s of the download is %s, the server states %s", name, algo, got, want);
    snprintf(how, howcap, "%s", algo);
out:
    pi_free(buf);
    if (ctx) EVP_MD_CTX_free(ctx);
    return rc;
#endif
}

/* Downloads the opened source s to final (through part + state). */
static int download(struct pi_source *s, const char *final, const char *part, const pagein_pull_opts *o,
                    pagein_pull_stats *st) {
    unsigned conns = o && o->connections ? o->connections : (pi_source_facts(s)->depth ? pi_source_facts(s)->depth : 16);
    if (conns > 64) conns = 64;
    char spath[4200];
    snprintf(spath, sizeof spath, "%s.pagein-state", part);
    uint64_t chunk = o && o->chunk_bytes ? o->chunk_bytes : 0;
    if (!chunk) {
        /* about 8 MiB, cut so that every connection gets the same number of
         * chunks (no last round with one chunk in flight): 258 MiB over 16
         * connections is 32 chunks of 8.06 MiB, not 33 of 8 MiB. At most
         * 192 MiB for all connections' buffers, at least 1 MiB a chunk: a
         * small object gets one chunk per connection. */
        uint64_t target = 8u << 20;
        if (target * conns > (192u << 20)) target = (192u << 20) / conns; /* memory: conns x chunk */
        uint64_t k = (s->size + (uint64_t)conns * target / 2) / ((uint64_t)conns * target);
        uint64_t n = (k ? k : 1) * conns;
        chunk = (s->size + n - 1) / n;
        chunk = (chunk + 65535) & ~(uint64_t)65535;
        if (chunk < (1u << 20)) chunk = 1u << 20;
        /* a download begun with another chunk size (another -c) resumes
         * with that size rather than starting over */
        int ofd = open(spath, O_RDONLY | O_CLOEXEC);
        if (ofd >= 0) {
            char old[STATE_HDR + 1];
            unsigned long long osz = 0, och = 0;
            ssize_t k2 = pread(ofd, old, STATE_HDR, 0);
            close(ofd);
            if (k2 == STATE_HDR) {
                old[STATE_HDR] = 0;
                if (sscanf(old, "pagein-pull 1\nsize %llu\nchunk %llu\n", &osz, &och) == 2 && osz == s->size &&
                    och >= 4096 && och <= (1ull << 32))
                    chunk = och;
            }
        }
    }
    uint64_t nchunks = s->size ? (s->size + chunk - 1) / chunk : 0;
    if (nchunks > (1u << 26)) return pi_err(PAGEIN_E_LIMIT, "%s: too many chunks (%llu)", s->name, (unsigned long long)nchunks);
    FORWARD_IF(mkdirs_for(final));
    FORWARD_IF(mkdirs_for(part));
    char hdr[STATE_HDR];
    memset(hdr, ' ', sizeof hdr);
    int hl = snprintf(hdr, sizeof hdr, "pagein-pull 1\nsize %llu\nchunk %llu\netag %s\nurl %s\n",
                      (unsigned long long)s->size, (unsigned long long)chunk, s->identity, s->name);
    if (hl >= STATE_HDR - 1) hl = STATE_HDR - 2;
    hdr[hl] = ' ';
    hdr[STATE_HDR - 1] = '\n';
    /* resume? the state must describe the same object and chunking */
    uint8_t *marks = pi_calloc(nchunks ? nchunks : 1, 1);
    if (!marks) return pi_err(-ENOMEM, "%s: out of memory", s->name);
    int resume = 0;
    int sfd = open(spath, O_RDWR | O_CLOEXEC);
    if (sfd >= 0) {
        char old[STATE_HDR];
        struct stat pst;
        if (pread(sfd, old, STATE_HDR, 0) == STATE_HDR && memcmp(old, hdr, STATE_HDR) == 0 &&
            stat(part, &pst) == 0 && (uint64_t)pst.st_size == s->size) {
            ssize_t k = pread(sfd, marks, nchunks, STATE_HDR);
            if (k < 0) k = 0;
            for (ssize_t i = 0; i < k; i++) marks[i] = marks[i] == '1';
            for (uint64_t i = (uint64_t)k; i < nchunks; i++) marks[i] = 0;
            resume = 1;
        }
        if (!resume) close(sfd), sfd = -1;
    }
    int fd = -1, rc = 0;
    if (!resume) {
        unlink(spath);
        sfd = open(spath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (sfd < 0 || pwrite(sfd, hdr, STATE_HDR, 0) != STATE_HDR) {
            rc = pi_err(-errno, "%s: cannot write %s: %s", s->name, spath, strerror(errno));
            goto out;
        }
        for (uint64_t i = 0; i < nchunks; i++) marks[i] = 0;
        fd = open(part, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0 && ftruncate(fd, (off_t)s->size) != 0) {
            rc = pi_err(-errno, "%s: cannot size %s: %s", s->name, part, strerror(errno));
            goto out;
        }
    } else {
        fd = open(part, O_RDWR | O_CLOEXEC);
    }
    if (fd < 0) {
        rc = pi_err(-errno, "%s: cannot open %s: %s", s->name, part, strerror(errno));
        goto out;
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
    rc = j.ntodo ? pi_parallel(conns, j.ntodo, fetch_chunk, &j) : 0;
    if (st) {
        st->resumed += have;
        st->fetched += atomic_load(&j.done_bytes);
    }
    pi_free(j.todo);
    for (unsigned b = 0; b < j.nbufs; b++) pi_free(j.bufs[b]);
    pthread_mutex_destroy(&j.plock);
    if (rc < 0) goto out; /* part and state stay for the next run */
    char how[48];
    rc = verify(s, fd, s->size, s->name, how, sizeof how);
    if (rc < 0) {
        /* a corrupt download is not resumed: start over next time */
        unlink(part);
        unlink(spath);
        goto out;
    }
    if (st) snprintf(st->verified, sizeof st->verified, "%s", how);
    if (!(o && (o->flags & PAGEIN_PULL_NO_SYNC)) && fsync(fd) != 0) {
        rc = pi_err(-errno, "%s: fsync %s: %s", s->name, part, strerror(errno));
        goto out;
    }
    if (rename(part, final) != 0) {
        rc = pi_err(-errno, "%s: cannot rename %s to %s: %s", s->name, part, final, strerror(errno));
        goto out;
    }
    unlink(spath);
    if (!(o && (o->flags & PAGEIN_PULL_NO_SYNC))) fsync_dir_of(final);
out:
    if (fd >= 0) close(fd);
    if (sfd >= 0) close(sfd);
    pi_free(marks);
    return rc;
}

/* ---- Hugging Face cache layout ------------------------------------------------------ */
static void hf_cache_root(const pagein_pull_opts *o, char *out, size_t cap) {
    if (o && o->cache_dir) snprintf(out, cap, "%s", o->cache_dir);
    else if (env("HF_HUB_CACHE")) snprintf(out, cap, "%s", env("HF_HUB_CACHE"));
    else if (env("HUGGINGFACE_HUB_CACHE")) snprintf(out, cap, "%s", env("HUGGINGFACE_HUB_CACHE"));
    else if (env("HF_HOME")) snprintf(out, cap, "%s/hub", env("HF_HOME"));
    else if (env("XDG_CACHE_HOME")) snprintf(out, cap, "%s/huggingface/hub", env("XDG_CACHE_HOME"));
    else snprintf(out, cap, "%s/.cache/huggingface/hub", env("HOME") ? env("HOME") : ".");
}

/* repo folder: models--org--name */
static void hf_repo_dir(const char *root, const struct pi_hf_ref *r, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s/%s--", root, r->kind);
    for (const char *p = r->repo; *p && n + 3 < (int)cap; p++) {
        if (*p == '/') n += snprintf(out + n, cap - (size_t)n, "--");
        else out[n++] = *p, out[n] = 0;
    }
}

static int write_small(const char *path, const char *text) {
    FORWARD_IF(mkdirs_for(path));
    struct pi_atomic_file a;
    FORWARD_IF(pi_atomic_open(&a, path));
    int rc = pi_atomic_write(&a, text, strlen(text));
    if (rc == 0) return pi_atomic_commit(&a);
    pi_atomic_abort(&a);
    return rc;
}

/* The Hub-cache install of one opened file. */
static int pull_hf_file(struct pi_source *s, const struct pi_hf_ref *r, const char *relpath, const pagein_pull_opts *o,
                        pagein_pull_stats *st, char *snap_dir, size_t snap_cap) {
    char root[2048], repo[3072], blob[4096], part[4200], link[4200], target[4300], commit[100], hash[200];
    hf_cache_root(o, root, sizeof root);
    hf_repo_dir(root, r, repo, sizeof repo);
    /* blob name: the LFS sha256, else the ETag (the git blob id), unquoted */
    const char *id = pi_http_linked_etag(s)[0] ? pi_http_linked_etag(s) : pi_http_etag(s);
    if (strncmp(id, "W/", 2) == 0) id += 2;
    if (*id == '"') id++;
    size_t il = strcspn(id, "\"");
    if (il == 0 || il >= sizeof hash || memchr(id, '/', il))
        return pi_err(PAGEIN_E_REMOTE, "%s: the server states no ETag: cannot name the blob in the Hugging Face cache",
                      s->name);
    memcpy(hash, id, il);
    hash[il] = 0;
    snprintf(commit, sizeof commit, "%s", pi_http_repo_commit(s)[0] ? pi_http_repo_commit(s) : r->rev);
    snprintf(blob, sizeof blob, "%s/blobs/%s", repo, hash);
    snprintf(part, sizeof part, "%s.incomplete", blob);
    struct stat sb;
    int rc = 0;
    if (stat(blob, &sb) == 0 && (uint64_t)sb.st_size == s->size) {
        if (st) st->cached += s->size;
    } else {
        rc = download(s, blob, part, o, st);
    }
    if (rc < 0) return rc;
    snprintf(link, sizeof link, "%s/snapshots/%s/%s", repo, commit, relpath);
    snprintf(snap_dir, snap_cap, "%s/snapshots/%s", repo, commit);
    /* ../../blobs/HASH plus one ../ per directory inside the snapshot */
    int n = snprintf(target, sizeof target, "../../");
    for (const char *p = relpath; *p; p++)
        if (*p == '/') n += snprintf(target + n, sizeof target - (size_t)n, "../");
    snprintf(target + n, sizeof target - (size_t)n, "blobs/%s", hash);
    FORWARD_IF(mkdirs_for(link));
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.pagein-link", link);
    unlink(tmp);
    if (symlink(target, tmp) != 0 || rename(tmp, link) != 0) {
        int e = errno;
        unlink(tmp);
        return pi_err(-e, "%s: cannot link %s -> %s: %s", s->name, link, target, strerror(e));
    }
    if (strcmp(commit, r->rev) != 0) {
        char ref[3300];
        snprintf(ref, sizeof ref, "%s/refs/%s", repo, r->rev);
        FORWARD_IF(write_small(ref, commit));
    }
    return 0;
}

/* ---- the file list ----------------------------------------------------------------------- */
struct flist {
    char **uri, **rel;
    size_t n, cap;
};

static int flist_add(struct flist *l, const char *uri, const char *rel) {
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->rel[i], rel)) return 0;
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
    l->n++;
    return 0;
}

static void flist_free(struct flist *l) {
    for (size_t i = 0; i < l->n; i++) pi_free(l->uri[i]), pi_free(l->rel[i]);
    pi_free(l->uri);
    pi_free(l->rel);
}

/* hf://org/name[@rev]: every file of the repository. */
static int hf_list(const char *src, const struct pi_hf_ref *r, struct flist *l) {
    char *names;
    size_t n;
    FORWARD_IF(pi_hf_list(src, r, &names, &n));
    int rc = 0;
    const char *q = names;
    for (size_t i = 0; rc == 0 && i < n; i++, q += strlen(q) + 1) {
        char fu[4096];
        snprintf(fu, sizeof fu, "hf://%s%s@%s/%s", strcmp(r->kind, "datasets") ? "" : "datasets/", r->repo, r->rev, q);
        rc = flist_add(l, fu, q);
    }
    pi_free(names);
    return rc;
}

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
    struct pi_json j;
    pi_json_init(&j, buf, (size_t)k, 0);
    const char *key, *v;
    size_t kl, vl;
    int rc = pi_json_enter(&j, PI_JSON_OBJECT);
    size_t dl = strrchr(src_uri, '/') ? (size_t)(strrchr(src_uri, '/') - src_uri) + 1 : 0;
    while (rc >= 0 && (rc = pi_json_next(&j, &key, &kl)) > 0) {
        if (kl == 10 && !memcmp(key, "weight_map", 10)) {
            rc = pi_json_enter(&j, PI_JSON_OBJECT);
            while (rc >= 0 && (rc = pi_json_next(&j, &key, &kl)) > 0) {
                rc = pi_json_string(&j, &v, &vl);
                if (rc < 0) break;
                char u[4096], rel[2048];
                if (vl == 0 || memchr(v, '/', vl)) {
                    rc = pi_err(PAGEIN_E_BAD_INDEX, "%s: shard name '%.*s' is not a plain file name", path, (int)vl, v);
                    break;
                }
                snprintf(u, sizeof u, "%.*s%.*s", (int)dl, src_uri, (int)vl, v);
                if (snprintf(rel, sizeof rel, "%s%.*s", rel_dir, (int)vl, v) >= (int)sizeof rel) {
                    rc = pi_err(PAGEIN_E_LIMIT, "%s: shard name too long", path);
                    break;
                }
                rc = flist_add(l, u, rel);
            }
        } else {
            rc = pi_json_skip(&j);
        }
    }
    pi_json_free(&j);
    pi_free(buf);
    return rc < 0 ? rc : 0;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int pagein_pull(const char *src, const char *dest, const pagein_pull_opts *o, pagein_pull_stats *st) {
    if (!src || !pi_remote_match(src))
        return pi_err(PAGEIN_E_INVALID, "%s: not a remote URL (http://, https://, s3://, gs://, hf://)", src ? src : "(null)");
    if (o && o->size && o->size < sizeof(size_t)) return pi_err(PAGEIN_E_INVALID, "pagein_pull: bad opts->size");
    pagein_pull_stats local;
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    double t0 = now_s();
    struct flist l = {0};
    struct pi_hf_ref hr = {0};
    int is_hf = strncasecmp(src, "hf://", 5) == 0, rc = 0;
    const char *stage = o ? o->stage_dir : NULL;
    int hf_cache = is_hf && !dest && !stage;
    if (is_hf) {
        rc = pi_hf_parse(src, &hr);
        if (rc < 0) goto out;
    }
    /* the files */
    if (is_hf && !hr.path[0]) {
        rc = hf_list(src, &hr, &l);
    } else if (!is_hf && (strncasecmp(src, "s3://", 5) == 0 || strncasecmp(src, "gs://", 5) == 0) && ends_with(src, "/")) {
        char *keys;
        size_t nk;
        rc = pi_s3_list(src, &keys, &nk);
        const char *k = keys;
        for (size_t i = 0; rc == 0 && i < nk; i++, k += strlen(k) + 1) {
            if (ends_with(k, "/")) continue; /* "directory" markers */
            rc = flist_add(&l, k, k + strlen(src));
        }
        if (rc == 0 && nk == 0) rc = pi_err(PAGEIN_E_NOT_FOUND, "%s: no objects under this prefix", src);
        if (rc == 0) pi_free(keys);
    } else if (is_hf && ends_with(hr.path, "/")) {
        rc = pi_err(PAGEIN_E_INVALID, "%s: a folder of a repository: pull the repository (hf://ORG/NAME) or a file", src);
    } else {
        const char *base = is_hf ? hr.path : strrchr(src, '/') + 1;
        if (!*base) rc = pi_err(PAGEIN_E_INVALID, "%s: names no file", src);
        else rc = flist_add(&l, src, is_hf ? hr.path : base);
    }
    if (rc < 0) goto out;
    int single = l.n == 1 && !ends_with(l.uri[0], ".index.json");
    /* DEST: a file for one file (unless it is a directory), else a directory */
    const char *dir = stage ? stage : dest ? dest : ".";
    int dest_is_file = dest && !stage && single && !ends_with(dest, "/") && !is_dir(dest);
    for (size_t i = 0; i < l.n; i++) {
        struct pi_source *s;
        rc = pi_remote_open(&s, l.uri[i], 0);
        if (rc < 0) goto out;
        char final[4096], part[4200];
        if (hf_cache) {
            struct pi_hf_ref fr;
            rc = pi_hf_parse(l.uri[i], &fr);
            if (rc == 0) {
                rc = pull_hf_file(s, &fr, fr.path, o, st, st->path, sizeof st->path);
                pi_hf_ref_free(&fr);
            }
            if (rc == 0 && single) {
                size_t pl = strlen(st->path);
                snprintf(st->path + pl, sizeof st->path - pl, "/%s", l.rel[i]);
            }
        } else {
            if (dest_is_file) snprintf(final, sizeof final, "%s", dest);
            else snprintf(final, sizeof final, "%s%s%s", dir, ends_with(dir, "/") ? "" : "/", l.rel[i]);
            snprintf(part, sizeof part, "%s.pagein-part", final);
            rc = download(s, final, part, o, st);
            if (rc == 0) {
                if (single) snprintf(st->path, sizeof st->path, "%s", final);
                else snprintf(st->path, sizeof st->path, "%s", dir);
            }
        }
        uint64_t rq, rt;
        pi_http_counters(s, &rq, &rt);
        st->requests += rq;
        st->retries += rt;
        st->bytes += s->size;
        st->files++;
        pi_remote_close(s);
        if (rc < 0) goto out;
        /* a sharded index brings its shards (listed after it) */
        if (ends_with(l.rel[i], ".index.json") && !(is_hf && !hr.path[0])) {
            char idx[4096], reldir[2048];
            int il = hf_cache ? snprintf(idx, sizeof idx, "%s/%s", st->path, l.rel[i])
                              : snprintf(idx, sizeof idx, "%s", final);
            if (il >= (int)sizeof idx) {
                rc = pi_err(PAGEIN_E_LIMIT, "%s: path too long", l.uri[i]);
                goto out;
            }
            snprintf(reldir, sizeof reldir, "%.*s",
                     strrchr(l.rel[i], '/') ? (int)(strrchr(l.rel[i], '/') - l.rel[i]) + 1 : 0, l.rel[i]);
            rc = index_shards(idx, l.uri[i], &l, reldir);
            if (rc < 0) goto out;
            if (hf_cache) {
                /* st->path was the snapshot dir + index; keep the dir */
                char *sl = strrchr(st->path, '/');
                if (sl && single) *sl = 0;
            } else if (!dest_is_file) {
                snprintf(st->path, sizeof st->path, "%s", dir);
            }
        }
    }
out:
    st->seconds = now_s() - t0;
    pi_hf_ref_free(&hr);
    flist_free(&l);
    return rc;
}

#endif /* PAGEIN_HAVE_CURL */
