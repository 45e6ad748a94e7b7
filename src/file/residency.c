/* residency.c - the page cache seen from a mapping: residency (mincore),
 * eviction (fadvise DONTNEED), locking (mlock) and warming (parallel
 * pread), for raw address ranges, parsed files and any file at all.
 *
 * Residency is counted in bytes of the asked range, clipped per page, so
 * that ranges which share a page (two tensors meeting inside a page) add up
 * without double counting; page counts are kept too, for vmtouch parity.
 * See docs/PAGE-CACHE.md. */
#include "file.h"
#include "../source/source.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* mincore() vector per call: bounds memory for huge ranges (64 Ki pages =
 * 256 MiB of 4 KiB pages per call). */
#define MINCORE_CHUNK_PAGES ((size_t)64 * 1024)
/* Largest page-cache folio we expect at a range edge (PMD size). */
#define EDGE_FOLIO ((uint64_t)2 << 20)

size_t pagein_page_size(void) {
    static size_t ps;
    if (!ps) {
        long v = sysconf(_SC_PAGESIZE);
        ps = v > 0 ? (size_t)v : 4096;
    }
    return ps;
}

void pagein_residency_add(pagein_residency *a, const pagein_residency *b) {
    a->bytes += b->bytes;
    a->resident_bytes += b->resident_bytes;
    a->pages += b->pages;
    a->resident_pages += b->resident_pages;
}

int pagein_range_residency(const void *addr, uint64_t len, pagein_residency *r) {
    if (!r) return pi_err(PAGEIN_E_INVALID, "pagein_range_residency: NULL result");
    memset(r, 0, sizeof *r);
    if (len == 0) return 0;
    if (!addr) return pi_err(PAGEIN_E_INVALID, "pagein_range_residency: NULL address");
    const uint64_t ps = pagein_page_size();
    const uint64_t start = (uint64_t)(uintptr_t)addr, end = start + len;
    RETURN_IF(end < start, PAGEIN_E_OVERFLOW, "range at %p + %llu wraps", addr, (unsigned long long)len);
    const uint64_t first = start / ps, last = (end + ps - 1) / ps; /* pages [first, last) */
    unsigned char vec[4096];
    unsigned char *v = vec;
    size_t cap = sizeof vec;
    if (last - first > cap) {
        cap = (size_t)PI_MIN(last - first, (uint64_t)MINCORE_CHUNK_PAGES);
        v = pi_malloc(cap);
        if (!v) return pi_err(-ENOMEM, "out of memory for a %zu-page residency vector", cap);
    }
    int rc = 0;
    r->bytes = len;
    r->pages = last - first;
    for (uint64_t p = first; p < last;) {
        size_t n = (size_t)PI_MIN(last - p, (uint64_t)cap);
        if (mincore((void *)(uintptr_t)(p * ps), n * ps, v) != 0) {
            rc = pi_err(-errno, "mincore of %zu pages at %p: %s", n, (void *)(uintptr_t)(p * ps), strerror(errno));
            break;
        }
        for (size_t i = 0; i < n; i++) {
            if (!(v[i] & 1)) continue;
            uint64_t pg_lo = (p + i) * ps, pg_hi = pg_lo + ps;
            r->resident_pages++;
            r->resident_bytes += PI_MIN(pg_hi, end) - PI_MAX(pg_lo, start);
        }
        p += n;
    }
    if (v != vec) pi_free(v);
    if (rc < 0) memset(r, 0, sizeof *r);
    return rc;
}

/* The detail for an mlock refused by RLIMIT_MEMLOCK: what was asked, what
 * the limits are and every usual way to raise them. */
static int memlock_error(uint64_t len, int err) {
    struct rlimit rl = {0, 0};
    getrlimit(RLIMIT_MEMLOCK, &rl);
    char soft[32], hard[32];
    if (rl.rlim_cur == RLIM_INFINITY)
        snprintf(soft, sizeof soft, "unlimited");
    else
        snprintf(soft, sizeof soft, "%llu bytes", (unsigned long long)rl.rlim_cur);
    if (rl.rlim_max == RLIM_INFINITY)
        snprintf(hard, sizeof hard, "unlimited");
    else
        snprintf(hard, sizeof hard, "%llu bytes", (unsigned long long)rl.rlim_max);
    return pi_err(PAGEIN_E_MEMLOCK,
                  "mlock of %llu bytes refused (%s): RLIMIT_MEMLOCK is %s (hard limit %s), counting "
                  "what this process has locked already; raise it with `ulimit -l unlimited` in the "
                  "shell (up to the hard limit), `* - memlock unlimited` in "
                  "/etc/security/limits.conf, `LimitMEMLOCK=infinity` in a systemd unit, "
                  "`--ulimit memlock=-1` for docker, or grant CAP_IPC_LOCK",
                  (unsigned long long)len, strerror(err), soft, hard);
}

/* Rounds [addr, addr+len) out to whole pages. */
static void page_round(const void *addr, uint64_t len, void **a, size_t *l) {
    const uint64_t ps = pagein_page_size();
    uint64_t s = (uint64_t)(uintptr_t)addr, e = s + len;
    s -= s % ps;
    e = (e + ps - 1) / ps * ps;
    *a = (void *)(uintptr_t)s;
    *l = (size_t)(e - s);
}

int pagein_range_lock(const void *addr, uint64_t len) {
    if (len == 0) return 0;
    if (!addr) return pi_err(PAGEIN_E_INVALID, "pagein_range_lock: NULL address");
    void *a;
    size_t l;
    page_round(addr, len, &a, &l);
    if (mlock(a, l) == 0) return 0;
    int e = errno;
    if (e == EPERM) return memlock_error(l, e);
    if (e == ENOMEM) {
        /* ENOMEM means either "over RLIMIT_MEMLOCK" or "not mapped". Tell
         * them apart: an unmapped range also fails mincore. */
        unsigned char one;
        if (mincore(a, pagein_page_size(), &one) == 0) return memlock_error(l, e);
        return pi_err(-ENOMEM, "mlock of %zu bytes at %p: range not mapped", l, a);
    }
    return pi_err(-e, "mlock of %zu bytes at %p: %s", l, a, strerror(e));
}

int pagein_range_unlock(const void *addr, uint64_t len) {
    if (len == 0) return 0;
    if (!addr) return pi_err(PAGEIN_E_INVALID, "pagein_range_unlock: NULL address");
    void *a;
    size_t l;
    page_round(addr, len, &a, &l);
    if (munlock(a, l) != 0) return pi_err(-errno, "munlock of %zu bytes at %p: %s", l, a, strerror(errno));
    return 0;
}

/* ---- a file's bytes: shared by pagein_file and pagein_cache_file --------- */

struct span {
    const char *path;
    int fd;                /* -1: no descriptor (open_memory) */
    const uint8_t *base;   /* mapping of the whole file; NULL if empty */
    uint64_t size;
};

/* Clips [off, off+len) (len 0 = to the end) to the file. */
static void clip(const struct span *s, uint64_t *off, uint64_t *len) {
    if (*off >= s->size) {
        *off = s->size;
        *len = 0;
        return;
    }
    uint64_t avail = s->size - *off;
    if (*len == 0 || *len > avail) *len = avail;
}

static int span_residency(const struct span *s, uint64_t off, uint64_t len, pagein_residency *r) {
    if (!r) return pi_err(PAGEIN_E_INVALID, "residency: NULL result");
    clip(s, &off, &len);
    if (len == 0) {
        memset(r, 0, sizeof *r);
        return 0;
    }
    int rc = pagein_range_residency(s->base + off, len, r);
    if (rc < 0) pi_err_prefix(s->path);
    return rc;
}

static int span_evict(const struct span *s, uint64_t off, uint64_t len) {
    clip(s, &off, &len);
    if (len == 0) return 0;
    RETURN_IF(s->fd < 0, PAGEIN_E_UNSUPPORTED, "%s: no file descriptor (opened from memory): cannot evict",
              s->path);
    const uint64_t ps = pagein_page_size();
    uint64_t lo = off / ps * ps, hi = pi_align_up(off + len, ps);
    if (hi > pi_align_up(s->size, ps)) hi = pi_align_up(s->size, ps);
    /* Our own mapping would keep the pages mapped, and fadvise leaves mapped
     * pages alone: unmap them from our page tables first (the data stays
     * readable; it refaults from the cache or the disk). */
    /* EINVAL: some pages are mlocked; they stay whatever we do. */
    if (s->base && madvise((void *)(s->base + lo), (size_t)(hi - lo), MADV_DONTNEED) != 0 && errno != EINVAL)
        return pi_err(-errno, "%s: madvise(DONTNEED) of [%llu, %llu): %s", s->path, (unsigned long long)lo,
                      (unsigned long long)hi, strerror(errno));
    /* fadvise drops only whole pages inside the range, so hand it the
     * rounded-out range. */
    int e = posix_fadvise(s->fd, (off_t)lo, (off_t)(hi - lo), POSIX_FADV_DONTNEED);
    if (e != 0)
        return pi_err(-e, "%s: posix_fadvise(DONTNEED) of [%llu, %llu): %s", s->path, (unsigned long long)lo,
                      (unsigned long long)hi, strerror(e));
    /* Pages under I/O are locked and skipped by DONTNEED: readahead that a
     * recent fault or populate started (possibly by this process, just
     * before) can still be in flight, and lands after this call. Give such
     * reads a moment and drop once more; more is not worth it, since pages
     * mapped elsewhere stay whatever we do (docs/PAGE-CACHE.md). */
    pagein_residency r;
    if (s->base && pagein_range_residency(s->base + lo, PI_MIN(hi, s->size) - lo, &r) == 0 && r.resident_pages) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
        posix_fadvise(s->fd, (off_t)lo, (off_t)(hi - lo), POSIX_FADV_DONTNEED);
        /* Large folios (ext4, xfs on recent kernels): the kernel drops only
         * whole folios inside the range, so a folio that straddles an edge
         * (half ours, half the neighbour's) stays. If an edge page is still
         * there, drop the edge out to the largest folio size (2 MiB). */
        for (int edge = 0; edge < 2; edge++) {
            uint64_t pg = edge == 0 ? lo : hi - ps;
            if (pg >= s->size) continue;
            pagein_residency er;
            if (pagein_range_residency(s->base + pg, 1, &er) != 0 || er.resident_pages == 0) continue;
            uint64_t a = edge == 0 ? lo / EDGE_FOLIO * EDGE_FOLIO : hi - ps;
            uint64_t b = edge == 0 ? lo + ps : PI_MIN(pi_align_up(hi, EDGE_FOLIO), pi_align_up(s->size, ps));
            madvise((void *)(s->base + a), (size_t)(b - a), MADV_DONTNEED);
            posix_fadvise(s->fd, (off_t)a, (off_t)(b - a), POSIX_FADV_DONTNEED);
        }
    }
    return 0;
}

/* PAGEIN_E_TRUNCATED naming the file and offset when [off, off+len) now
 * ends past the end of the file (it shrank after it was mapped), else 0.
 * mlock of such a range fails with ENOMEM, which reads as RLIMIT_MEMLOCK. */
static int span_truncated(const struct span *s, uint64_t off, uint64_t len) {
    struct stat st;
    if (s->fd < 0 || fstat(s->fd, &st) != 0 || (uint64_t)st.st_size >= off + len) return 0;
    return pi_err(PAGEIN_E_TRUNCATED,
                  "%s: offset %llu: file truncated to %llu bytes since it was opened (was %llu); cannot lock "
                  "[%llu, %llu)",
                  s->path, (unsigned long long)PI_MAX((uint64_t)st.st_size, off), (unsigned long long)st.st_size,
                  (unsigned long long)s->size, (unsigned long long)off, (unsigned long long)(off + len));
}

static int span_lock(const struct span *s, uint64_t off, uint64_t len, int lock) {
    clip(s, &off, &len);
    if (len == 0) return 0;
    if (lock) FORWARD_IF(span_truncated(s, off, len));
    int rc = lock ? pagein_range_lock(s->base + off, len) : pagein_range_unlock(s->base + off, len);
    if (rc < 0 && lock) {
        /* shrank between the check and mlock */
        int t = span_truncated(s, off, len);
        if (t < 0) return t;
    }
    if (rc < 0) pi_err_prefix(s->path);
    return rc;
}

static struct span file_span(const pagein_file *f) {
    struct span s = {f->path ? f->path : "<memory>", f->fd, f->len ? f->base : NULL, f->len};
    return s;
}

/* A file read through a source that cannot be mapped (a remote object)
 * has no pages of its own to ask about, drop or lock: say so instead of
 * handing mincore/mlock addresses near NULL. */
static int unmapped(const pagein_file *f, const char *what) {
    if (f->base || !f->len || f->mapped) return 0;
    return pi_err(PAGEIN_E_UNSUPPORTED, "%s: not mapped (a remote source, read through its connections): no "
                  "page-cache pages to %s", f->path ? f->path : "<memory>", what);
}

int pagein_file_residency(const pagein_file *f, uint64_t off, uint64_t len, pagein_residency *r) {
    if (!f) return pi_err(PAGEIN_E_INVALID, "pagein_file_residency: NULL file");
    FORWARD_IF(unmapped(f, "count"));
    struct span s = file_span(f);
    return span_residency(&s, off, len, r);
}

int pagein_file_evict(const pagein_file *f, uint64_t off, uint64_t len) {
    if (!f) return pi_err(PAGEIN_E_INVALID, "pagein_file_evict: NULL file");
    FORWARD_IF(unmapped(f, "evict"));
    struct span s = file_span(f);
    return span_evict(&s, off, len);
}

int pagein_file_lock(const pagein_file *f, uint64_t off, uint64_t len) {
    if (!f) return pi_err(PAGEIN_E_INVALID, "pagein_file_lock: NULL file");
    FORWARD_IF(unmapped(f, "lock"));
    struct span s = file_span(f);
    return span_lock(&s, off, len, 1);
}

int pagein_file_unlock(const pagein_file *f, uint64_t off, uint64_t len) {
    if (!f) return pi_err(PAGEIN_E_INVALID, "pagein_file_unlock: NULL file");
    FORWARD_IF(unmapped(f, "unlock"));
    struct span s = file_span(f);
    return span_lock(&s, off, len, 0);
}

/* ---- any file --------------------------------------------------------- */

struct pagein_cache_file {
    struct span s;
    char *path;
};

int pagein_cache_open(pagein_cache_file **out, const char *path) {
    pi_err_clear();
    if (!out || !path) return pi_err(PAGEIN_E_INVALID, "pagein_cache_open: NULL argument");
    pagein_cache_file *c = pi_calloc(1, sizeof *c);
    if (!c) return pi_err(-ENOMEM, "%s: out of memory", path);
    c->s.fd = -1;
    int rc;
    c->path = pi_strndup(path, strlen(path));
    if (!c->path) {
        rc = pi_err(-ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    c->s.path = c->path;
    struct stat st;
    if ((rc = pi_open_regular(path, &c->s.fd, &st)) < 0) goto fail;
    c->s.size = (uint64_t)st.st_size;
    if (c->s.size > 0) {
        void *m = mmap(NULL, (size_t)c->s.size, PROT_READ, MAP_SHARED, c->s.fd, 0);
        if (m == MAP_FAILED) {
            rc = pi_err(-errno, "%s: cannot map %llu bytes: %s", path, (unsigned long long)c->s.size,
                        strerror(errno));
            goto fail;
        }
        c->s.base = m;
    }
    *out = c;
    return 0;
fail:
    pagein_cache_close(c);
    return rc;
}

void pagein_cache_close(pagein_cache_file *c) {
    if (!c) return;
    if (c->s.base) munmap((void *)c->s.base, (size_t)c->s.size);
    if (c->s.fd >= 0) close(c->s.fd);
    pi_free(c->path);
    pi_free(c);
}

uint64_t pagein_cache_size(const pagein_cache_file *c) { return c ? c->s.size : 0; }

int pagein_cache_residency(const pagein_cache_file *c, uint64_t off, uint64_t len, pagein_residency *r) {
    if (!c) return pi_err(PAGEIN_E_INVALID, "pagein_cache_residency: NULL file");
    return span_residency(&c->s, off, len, r);
}

int pagein_cache_evict(const pagein_cache_file *c, uint64_t off, uint64_t len) {
    if (!c) return pi_err(PAGEIN_E_INVALID, "pagein_cache_evict: NULL file");
    return span_evict(&c->s, off, len);
}

int pagein_cache_lock(const pagein_cache_file *c, uint64_t off, uint64_t len) {
    if (!c) return pi_err(PAGEIN_E_INVALID, "pagein_cache_lock: NULL file");
    return span_lock(&c->s, off, len, 1);
}

int pagein_cache_unlock(const pagein_cache_file *c, uint64_t off, uint64_t len) {
    if (!c) return pi_err(PAGEIN_E_INVALID, "pagein_cache_unlock: NULL file");
    return span_lock(&c->s, off, len, 0);
}

int pi_cache_file_fd(const pagein_cache_file *c, const char **path, uint64_t *size) {
    *path = c->s.path;
    *size = c->s.size;
    return c->s.fd;
}
