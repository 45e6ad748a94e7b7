/* metacache.c - the metadata cache (metacache.h, docs/REMOTE.md "Metadata
 * cache").
 *
 * One file per cached header in $PAGEIN_META_CACHE_DIR, else
 * $XDG_CACHE_HOME/pagein/meta, else ~/.cache/pagein/meta (beside nothing
 * else of pagein's: pull writes into the Hugging Face cache or a named
 * folder). The directory is 0700 and must be the user's; every entry is a
 * regular 0600 file opened with O_NOFOLLOW relative to the directory, so a
 * symlink planted there is removed, never followed. Entries are named by a
 * 128-bit hash of their key and hold:
 *
 *   "PIMETA1\n" | u64 size | u32 format | u32 idlen | u32 keylen | u32 0 |
 *   u64 hdrlen | identity | key | header bytes | u64 checksum of all before
 *
 * A reader checks the lengths against the file's size, the checksum and the
 * key; anything else is a miss and the entry is removed. Writers write a
 * temporary file and rename it over the entry, so concurrent processes see
 * the old entry or the new one, never a mix. Size: after writing, a process
 * that has written 1/16 of PAGEIN_META_CACHE_MAX (default 256 MiB) since
 * its last look (and on its first write) sums the directory and removes the
 * least recently used entries (oldest mtime; a hit sets it to now) down to
 * 3/4 of the limit.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "metacache.h"
#include "../source/source.h"
#include "../core/endian.h"
#include "../io/io.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifdef PAGEIN_HAVE_XXHASH
#define XXH_INLINE_ALL
#include <xxhash.h>
static uint64_t hash64(const void *p, size_t n, uint64_t seed) { return XXH3_64bits_withSeed(p, n, seed); }
#else
/* FNV-1a over 8-byte words: a checksum against torn and damaged files, not
 * against an attacker (the directory is the user's own). */
static uint64_t hash64(const void *p, size_t n, uint64_t seed) {
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h ^ (h >> 32);
}
#endif

#define MAGIC "PIMETA1\n"
#define HEAD_LEN 40u
#define DEFAULT_MAX (256ull << 20)

int pi_meta_enabled(void) {
    const char *e = pi_env("PAGEIN_META_CACHE");
    if (e && (!strcmp(e, "0") || !strcmp(e, "off") || !strcmp(e, "no"))) return 0;
    return pi_env("PAGEIN_META_CACHE_DIR") || pi_env("XDG_CACHE_HOME") || pi_env("HOME");
}

static uint64_t cache_max(void) {
    uint64_t v = pi_env_size("PAGEIN_META_CACHE_MAX", DEFAULT_MAX);
    return v ? v : DEFAULT_MAX;
}

/* mkdir that accepts an existing directory. */
static int mkdir_one(const char *p) { return mkdir(p, 0700) == 0 || errno == EEXIST ? 0 : -1; }

/* The cache directory's path from the environment into p: 0, or -1. */
static int dir_path(char *p, size_t cap) {
    const char *d = pi_env("PAGEIN_META_CACHE_DIR");
    int k;
    if (d) k = snprintf(p, cap, "%s", d);
    else if (pi_env("XDG_CACHE_HOME")) k = snprintf(p, cap, "%s/pagein/meta", pi_env("XDG_CACHE_HOME"));
    else if (pi_env("HOME")) k = snprintf(p, cap, "%s/.cache/pagein/meta", pi_env("HOME"));
    else return -1;
    return k > 0 && (size_t)k < cap ? 0 : -1;
}

/* Opens path p, creating it and its missing parents 0700; refuses it
 * unless it is a directory of the user's (not a symlink in its last
 * component), and narrows its mode to 0700. A descriptor or -1. */
static int open_dir(char *p) {
    int fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        for (char *s = p + 1; *s; s++) /* mkdir -p */
            if (*s == '/') {
                *s = 0;
                (void)mkdir_one(p);
                *s = '/';
            }
        (void)mkdir_one(p);
        fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid() ||
        ((st.st_mode & 077) != 0 && fchmod(fd, 0700) != 0)) { /* headers can be private */
        close(fd);
        return -1;
    }
    return fd;
}

/* The directory stays open for the life of the process, reopened when the
 * environment names another one (tests) or after a write found it gone.
 * A replaced descriptor is left open, never closed: another thread may be
 * using it, and a closed number could be reused by an unrelated open. */
static pthread_mutex_t dir_mu = PTHREAD_MUTEX_INITIALIZER;
static int dir_fd = -1;
static char dir_name[4096];

static int cache_dir(void) {
    char p[4096];
    if (dir_path(p, sizeof p) < 0) return -1;
    pthread_mutex_lock(&dir_mu);
    if (dir_fd < 0 || strcmp(p, dir_name) != 0) {
        snprintf(dir_name, sizeof dir_name, "%s", p);
        dir_fd = open_dir(p);
    }
    int fd = dir_fd;
    pthread_mutex_unlock(&dir_mu);
    struct stat st; /* still private (an fstat: no path lookup) */
    if (fd >= 0 && (fstat(fd, &st) != 0 || ((st.st_mode & 077) != 0 && fchmod(fd, 0700) != 0))) return -1;
    return fd;
}

/* The directory went away under an open descriptor (removed by hand): the
 * next call opens it again. */
static void dir_gone(int fd) {
    pthread_mutex_lock(&dir_mu);
    if (dir_fd == fd) dir_fd = -1; /* left open: see above */
    pthread_mutex_unlock(&dir_mu);
}

static void entry_name(const char *key, char out[40]) {
    size_t n = strlen(key);
    uint64_t a = hash64(key, n, 0x6d657461ull), b = hash64(key, n, 0x70616765696eull);
    snprintf(out, 40, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
}

uint64_t pi_meta_sum(const void *p, size_t n) { return hash64(p, n, 0); }

int pi_meta_decode(const uint8_t *b, size_t n, const char *key, struct pi_meta *m) {
    memset(m, 0, sizeof *m);
    if (n < HEAD_LEN + 8 || memcmp(b, MAGIC, 8) != 0) return -1;
    uint64_t idl = pi_le32(b + 20), kel = pi_le32(b + 24), hl = pi_le64(b + 32);
    if (idl >= sizeof m->identity || hl > n || kel > n || HEAD_LEN + idl + kel + hl + 8 != n ||
        hash64(b, n - 8, 0) != pi_le64(b + n - 8))
        return -1;
    size_t kl = strlen(key);
    if (kel != kl || memcmp(b + HEAD_LEN + idl, key, kl) != 0) return 0; /* another key's entry (a hash collision) */
    m->size = pi_le64(b + 8);
    m->format = (pagein_format)pi_le32(b + 16);
    memcpy(m->identity, b + HEAD_LEN, (size_t)idl);
    m->identity[idl] = 0;
    m->len = (size_t)hl;
    m->hdr = (uint8_t *)(uintptr_t)(b + HEAD_LEN + idl + kel);
    return 1;
}

int pi_meta_get(const char *key, struct pi_meta *m) {
    memset(m, 0, sizeof *m);
    int dfd = cache_dir();
    if (dfd < 0) return 0;
    char name[40];
    entry_name(key, name);
    int hit = 0, bad = 0;
    uint8_t *b = NULL;
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        bad = errno == ELOOP; /* a symlink: removed, never followed */
        goto out;
    }
    struct stat st;
    uint64_t lim = cache_max();
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_size < HEAD_LEN + 8 ||
        (uint64_t)st.st_size > lim || (uint64_t)st.st_size > (256ull << 20)) {
        bad = 1;
        goto out;
    }
    size_t n = (size_t)st.st_size;
    b = pi_malloc(n);
    if (!b) goto out;
    if (pi_pread_full(fd, b, n, 0) < 0) {
        pi_err_clear();
        bad = 1;
        goto out;
    }
    int d = pi_meta_decode(b, n, key, m);
    if (d < 0) bad = 1;
    if (d <= 0) goto out;
    memmove(b, m->hdr, m->len);
    m->hdr = b;
    b = NULL;
    hit = 1;
    m->checked_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
out:
    if (fd >= 0) close(fd);
    if (bad) (void)unlinkat(dfd, name, 0);
    pi_free(b);
    return hit;
}

void pi_meta_touch(const char *key) {
    int dfd = cache_dir();
    if (dfd < 0) return;
    char name[40];
    entry_name(key, name);
    (void)utimensat(dfd, name, NULL, AT_SYMLINK_NOFOLLOW); /* checked now: the LRU clock and the trust age */
}

struct ent {
    time_t mt;
    long mns;
    uint64_t size;
    char name[48];
};

static int ent_cmp(const void *a, const void *b) {
    const struct ent *x = a, *y = b;
    if (x->mt != y->mt) return x->mt < y->mt ? -1 : 1;
    return (x->mns > y->mns) - (x->mns < y->mns);
}

/* Sums the directory; over max, removes the least recently used entries
 * down to 3/4 of it. Temporary files older than an hour (a writer that
 * died) go too. */
static void evict(int dfd, uint64_t max) {
    int d2 = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
    if (!d) {
        if (d2 >= 0) close(d2);
        return;
    }
    struct ent *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        struct stat st;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        if (e->d_name[0] == '.' && strstr(e->d_name, ".tmp-")) { /* pi_atomic_put's, or an older ".tmp-PID-N-NAME" */
            if (st.st_mtime < now - 3600) (void)unlinkat(dfd, e->d_name, 0);
            continue;
        }
        if (strlen(e->d_name) >= sizeof v->name) continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 256;
            struct ent *nv = pi_realloc(v, nc * sizeof *nv);
            if (!nv) break;
            v = nv, cap = nc;
        }
        v[n].mt = st.st_mtim.tv_sec;
        v[n].mns = st.st_mtim.tv_nsec;
        v[n].size = (uint64_t)st.st_size;
        snprintf(v[n].name, sizeof v[n].name, "%s", e->d_name);
        total += v[n].size;
        n++;
    }
    closedir(d);
    if (total > max) {
        qsort(v, n, sizeof *v, ent_cmp);
        for (size_t i = 0; i < n && total > max / 4 * 3; i++)
            if (unlinkat(dfd, v[i].name, 0) == 0) total -= v[i].size;
    }
    pi_free(v);
}

static _Atomic uint64_t written_since_scan = UINT64_MAX / 2; /* the first write looks */
static _Atomic int scanning;

void pi_meta_put(const char *key, const char *identity, uint64_t size, pagein_format format, const uint8_t *hdr,
                 size_t len) {
    uint64_t max = cache_max();
    size_t il = strlen(identity), kl = strlen(key);
    uint64_t total = (uint64_t)HEAD_LEN + il + kl + len + 8;
    if (il >= sizeof ((struct pi_meta *)0)->identity || total > max / 4 || kl > 8192) return;
    int dfd = cache_dir();
    if (dfd < 0) return;
    uint8_t head[HEAD_LEN];
    memcpy(head, MAGIC, 8);
    pi_st_le64(head + 8, size);
    pi_st_le32(head + 16, (uint32_t)format);
    pi_st_le32(head + 20, (uint32_t)il);
    pi_st_le32(head + 24, (uint32_t)kl);
    pi_st_le32(head + 28, 0);
    pi_st_le64(head + 32, len);
#ifdef PAGEIN_HAVE_XXHASH
    XXH3_state_t hs;
    XXH3_64bits_reset_withSeed(&hs, 0);
    XXH3_64bits_update(&hs, head, HEAD_LEN);
    XXH3_64bits_update(&hs, identity, il);
    XXH3_64bits_update(&hs, key, kl);
    XXH3_64bits_update(&hs, hdr, len);
    uint64_t sum = XXH3_64bits_digest(&hs);
    uint8_t *whole = NULL;
#else
    uint8_t *whole = pi_malloc((size_t)total - 8); /* the fallback hash wants one buffer */
    if (!whole) return;
    memcpy(whole, head, HEAD_LEN);
    memcpy(whole + HEAD_LEN, identity, il);
    memcpy(whole + HEAD_LEN + il, key, kl);
    memcpy(whole + HEAD_LEN + il + kl, hdr, len);
    uint64_t sum = hash64(whole, (size_t)total - 8, 0);
#endif
    uint8_t sum8[8];
    pi_st_le64(sum8, sum);
    char name[40];
    entry_name(key, name);
    struct iovec iv[5] = {{head, HEAD_LEN}, {(void *)identity, il}, {(void *)key, kl}, {(void *)hdr, len}, {sum8, 8}};
    if (pi_atomic_put(dfd, name, 0600, iv, 5) == -ENOENT) dir_gone(dfd); /* private; a cache: no fsync */
    pi_free(whole);
    if (atomic_fetch_add(&written_since_scan, total) + total >= max / 16) {
        int zero = 0;
        if (atomic_compare_exchange_strong(&scanning, &zero, 1)) {
            atomic_store(&written_since_scan, 0);
            evict(dfd, max);
            atomic_store(&scanning, 0);
        }
    }
}

/* Where a URL's bytes come from besides its own text, as its source row
 * states it (ops.origin: the Hub's HF_ENDPOINT, S3's endpoint variables and
 * profile, GCS's GS_ENDPOINT_URL; http(s) URLs name their origin
 * themselves). An entry written while a mirror answered is never served
 * for another endpoint: a mirror that claimed the Hub's sha256 for a header
 * of its own stayed cached, and the honest endpoint then got the mirror's
 * tensors. */
static void origin_of(const char *url, char *out, size_t cap) {
    static const char tag[] = " origin=";
    const size_t tl = sizeof tag - 1;
    out[0] = 0;
    if (cap <= tl + 1) return;
    pi_source_origin(url, out + tl, cap - tl);
    if (out[tl]) memcpy(out, tag, tl);
}

char *pi_meta_remote_key(const char *url) {
    char *k = pi_malloc(8300 + 3 * 4096);
    if (!k) return NULL;
    memcpy(k, "url ", 4);
    pi_url_redact(url, k + 4, 8300 - 4);
    char o[3 * 4096 + 32];
    origin_of(url, o, sizeof o);
    size_t kl = strlen(k), ol = strlen(o);
    if (ol && kl + ol < 8300 + 3 * 4096) memcpy(k + kl, o, ol + 1);
    return k;
}

int pi_meta_bytes_match(struct pi_source *src, const uint8_t *hdr, size_t len) {
    size_t n = len < PI_PROBE_CHECK_BYTES ? len : PI_PROBE_CHECK_BYTES;
    if (n > src->size) return 0;
    if (n == 0) return 1;
    uint8_t *b = pi_malloc(n);
    int same = b && pi_source_read(src, b, n, 0) == 0 && memcmp(b, hdr, n) == 0;
    pi_free(b);
    pi_err_clear();
    return same;
}

int pi_meta_identity_ok(const char *id) { return id[0] && strncmp(id, "W/", 2) != 0; }

/* ---- which local files are worth it ------------------------------------- */

static pthread_mutex_t dev_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    dev_t dev;
    int remote;
} dev_tab[32];
static unsigned dev_n;

int pi_meta_dev_is_remote(dev_t dev) {
    if (major(dev) != 0) return 0; /* a block device: local disk (network and FUSE mounts have anonymous devices) */
    pthread_mutex_lock(&dev_mu);
    for (unsigned i = 0; i < dev_n; i++)
        if (dev_tab[i].dev == dev) {
            int r = dev_tab[i].remote;
            pthread_mutex_unlock(&dev_mu);
            return r;
        }
    pthread_mutex_unlock(&dev_mu);
    int remote = 0;
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f) {
        char line[4096];
        while (fgets(line, sizeof line, f)) {
            unsigned ma, mi;
            if (sscanf(line, "%*u %*u %u:%u", &ma, &mi) != 2 || makedev(ma, mi) != dev) continue;
            const char *t = strstr(line, " - ");
            if (!t) continue;
            char type[64];
            if (sscanf(t + 3, "%63s", type) == 1) remote = pi_fs_is_remote(0, type);
            break;
        }
        fclose(f);
    }
    pthread_mutex_lock(&dev_mu);
    if (dev_n < PI_ARRAY_LEN(dev_tab)) {
        dev_tab[dev_n].dev = dev;
        dev_tab[dev_n].remote = remote;
        dev_n++;
    }
    pthread_mutex_unlock(&dev_mu);
    return remote;
}

/* ---- checking many entries with one request ------------------ */

static int stat_cmp(const void *a, const void *b) {
    return strcmp(((const struct pi_stat_entry *)a)->uri, ((const struct pi_stat_entry *)b)->uri);
}

/* A listing costs one request per page of 1,000 keys: past this many, a
 * folder holds far more than one model and the per-object checks are
 * cheaper than listing it all. */
#define VOUCH_MAX_PAGES 8


int pi_meta_lookup(const char *path, char **key, struct pi_meta *m) {
    memset(m, 0, sizeof *m);
    *key = NULL;
    if (!path || !pi_source_is_remote(path) || !pi_meta_enabled()) return 0;
    *key = pi_meta_remote_key(path);
    if (*key && pi_meta_get(*key, m)) return 1;
    memset(m, 0, sizeof *m); /* a miss holds nothing to free */
    return 0;
}
void pi_meta_vouch_dir(const char *dir_uri, struct pi_meta_vouch *v) {
    memset(v, 0, sizeof *v);
    const char *off = pi_env("PAGEIN_META_VOUCH"); /* 0: each entry its own request (bench/open_many.sh compares) */
    if (!dir_uri || !pi_meta_enabled() || (off && !strcmp(off, "0")) || !pi_source_is_remote(dir_uri)) return;
    long long ts = pi_env_long("PAGEIN_META_TRUST_SECONDS", 0, 1, 365l * 86400);
    if (ts > 0) v->trust_ns = ts * 1000000000ll; /* opt-in; used only where no check covers a file */
    /* bytes that cannot change (the Hub at a commit): no check at all */
    if (pi_source_pinned(dir_uri)) {
        v->pinned = 1;
        return;
    }
    /* a source that lists sizes and ETags (S3, GCS): one listing */
    struct pi_stat_entry *s = NULL;
    size_t k = 0;
    if (pi_source_stat_dir(dir_uri, VOUCH_MAX_PAGES, &s, &k) == 0) {
        qsort(s, k, sizeof *s, stat_cmp);
        v->v = s;
        v->n = k;
        v->requests = (unsigned)(k / 1000 + 1);
    } else {
        pi_err_clear(); /* none, refused (no s3:ListBucket) or failed: each object is checked by itself */
    }
}

int pi_meta_vouched(const struct pi_meta_vouch *v, const char *uri, uint64_t *size, const char **identity) {
    if (!v) return 0;
    if (v->pinned) return 2;
    int r = v->trust_ns && !v->requests ? 3 : 0; /* a listing ran: what it does not list is not trusted */
    size_t lo = 0, hi = v->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(v->v[mid].uri, uri);
        if (c == 0) {
            *size = v->v[mid].size;
            *identity = v->v[mid].etag;
            return 1;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return r;
}

int pi_meta_usable(const struct pi_meta_vouch *v, const char *uri, const struct pi_meta *m, int *trusted) {
    *trusted = 0;
    if (!v || !m || !pi_meta_identity_ok(m->identity)) return 0;
    uint64_t size = 0;
    const char *id = NULL;
    switch (pi_meta_vouched(v, uri, &size, &id)) {
    case 1: return size == m->size && !strcmp(id, m->identity);
    case 2: return 1;
    case 3: {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        int64_t t = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
        *trusted = m->checked_ns <= t && t - m->checked_ns < v->trust_ns;
        return *trusted;
    }
    default: return 0;
    }
}

void pi_meta_vouch_free(struct pi_meta_vouch *v) {
    if (!v) return;
    pi_stat_entries_free(v->v, v->n);
    memset(v, 0, sizeof *v);
}
