/*
 * slowfs - a read-only FUSE pass-through filesystem that waits a fixed time
 * per read request: a local stand-in for remote storage (NFS, Lustre, object
 * store mounts), where every request pays a round trip. Page faults and
 * read() really go through it, so it reproduces what a mapping read in
 * shuffled order costs on such storage.
 *
 *   slowfs [--delay-us N] [--max-inflight N] [--threads N] [--no-splice | --force-splice] [--stats FILE] SRC MNT
 *
 * Serves directory SRC at MNT, read-only. Every read request sleeps
 * --delay-us microseconds (default 1000) before it is served; with
 * --max-inflight N at most N requests are served at once (0 = no limit).
 * Counters (requests, bytes, a histogram of request sizes, the most requests
 * seen in flight, the time requests spent being served, a histogram of
 * their latencies in microseconds) are readable at any time from the hidden
 * file MNT/.slowfs-stats (not counted) and written to FILE when slowfs
 * exits. peak_inflight is the most requests in flight since the stats file
 * was last opened (open it before and after a run for that run's peak).
 * Runs in the foreground until unmounted (fusermount3 -u MNT) or signalled;
 * tools/slowfs.sh mounts and unmounts it for tests and benchmarks.
 *
 * Replies: where a pipe can hold a whole 1 MiB reply (fs.pipe-max-size of
 * 2 MiB or more, or CAP_SYS_RESOURCE; checked at start, --no-splice turns
 * it off, --force-splice on anyway: libfuse then splices the replies a pipe
 * holds and copies the others from the descriptor; for tests), a read hands libfuse the backing file's descriptor and libfuse
 * splices SRC's page-cache pages through a pipe into /dev/fuse: the data
 * is copied once, by the kernel, into the reader's memory, as a network
 * filesystem's client copies a reply out of its socket buffers. Otherwise
 * each read is a pread into libfuse's buffer and a writev of it: two
 * copies, on the CPUs the client shares (0.70 s of slowfs's CPU
 * for 1.3 GB against 0.45 s spliced, on 2 CPUs). The stats line `splice`
 * says which. A request counts as in flight (busy_ns, the latencies) from
 * its arrival through the delay and, without splice, the pread; the copy
 * into the reader's memory follows.
 */
#define FUSE_USE_VERSION 312 /* fuse_loop_mt with struct fuse_loop_config (max_threads) */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define STATS_NAME "/.slowfs-stats"
#define NBUCKETS 12 /* <=4K, <=8K, ... <=4M, >4M */
#define NLAT 24     /* latency: <=1us, <=2us, ... <=2^22 us, more */

static struct {
    int src;            /* directory fd of SRC */
    long delay_us;
    unsigned max_inflight;
    const char *stats_path;
    const char *mnt;
    long ra_kb;         /* -1 = leave the kernel's readahead window */
    sem_t slots;
    _Atomic uint64_t requests, bytes, hist[NBUCKETS];
    _Atomic unsigned inflight, max_seen, peak;
    _Atomic uint64_t busy_ns, lat[NLAT];
    unsigned threads;
    int splice; /* replies spliced from SRC (sf_read_buf) */
} g;

static const char *rel(const char *path) { return path[1] ? path + 1 : "."; }

static int bucket(size_t n) {
    int b = 0;
    size_t lim = 4096;
    while (b < NBUCKETS - 1 && n > lim) {
        lim <<= 1;
        b++;
    }
    return b;
}

#define STATS_FH (1ull << 63) /* fh of an open stats file: this bit | the peak when it was opened */

static int format_stats(char *buf, size_t cap, unsigned peak) {
    int n = snprintf(buf, cap,
                     "requests %" PRIu64 "\nbytes %" PRIu64 "\ndelay_us %ld\nmax_inflight %u\nmax_seen_inflight %u\n",
                     atomic_load(&g.requests), atomic_load(&g.bytes), g.delay_us, g.max_inflight,
                     atomic_load(&g.max_seen));
    size_t lim = 4;
    for (int b = 0; b < NBUCKETS && n < (int)cap; b++, lim <<= 1) {
        if (b < NBUCKETS - 1)
            n += snprintf(buf + n, cap - (size_t)n, "hist_le_%zuk %" PRIu64 "\n", lim, atomic_load(&g.hist[b]));
        else
            n += snprintf(buf + n, cap - (size_t)n, "hist_gt_%zuk %" PRIu64 "\n", lim / 2, atomic_load(&g.hist[b]));
    }
    if (n < (int)cap)
        n += snprintf(buf + n, cap - (size_t)n, "busy_ns %" PRIu64 "\npeak_inflight %u\nsplice %d\n",
                      atomic_load(&g.busy_ns), peak, g.splice);
    for (int b = 0; b < NLAT && n < (int)cap; b++)
        n += snprintf(buf + n, cap - (size_t)n, "lat_le_%luus %" PRIu64 "\n", 1ul << b, atomic_load(&g.lat[b]));
    return n;
}

static int sf_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
    (void)fi;
    if (strcmp(path, STATS_NAME) == 0) {
        memset(st, 0, sizeof *st);
        st->st_mode = S_IFREG | 0444;
        st->st_nlink = 1;
        st->st_size = 0; /* served with direct_io: the size is what a read returns */
        return 0;
    }
    if (fstatat(g.src, rel(path), st, AT_SYMLINK_NOFOLLOW) < 0) return -errno;
    st->st_mode &= ~(mode_t)0222;
    return 0;
}

static int sf_readlink(const char *path, char *buf, size_t size) {
    ssize_t n = readlinkat(g.src, rel(path), buf, size - 1);
    if (n < 0) return -errno;
    buf[n] = 0;
    return 0;
}

static int sf_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info *fi,
                      enum fuse_readdir_flags flags) {
    (void)off, (void)fi, (void)flags;
    int fd = openat(g.src, rel(path), O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -errno;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st = {.st_ino = e->d_ino, .st_mode = (mode_t)DTTOIF(e->d_type)};
        if (fill(buf, e->d_name, &st, 0, 0)) break;
    }
    closedir(d);
    return 0;
}

static int sf_open(const char *path, struct fuse_file_info *fi) {
    if ((fi->flags & O_ACCMODE) != O_RDONLY) return -EROFS;
    if (strcmp(path, STATS_NAME) == 0) {
        fi->direct_io = 1;
        /* report the peak of the window that ends now, start a new one */
        fi->fh = STATS_FH | atomic_exchange(&g.peak, atomic_load(&g.inflight));
        return 0;
    }
    int fd = openat(g.src, rel(path), O_RDONLY);
    if (fd < 0) return -errno;
    fi->fh = (uint64_t)fd;
    return 0;
}

/* A request arrives: counted in flight, then the delay. Returns its start. */
static struct timespec serve_begin(void) {
    if (g.max_inflight) sem_wait(&g.slots);
    unsigned now = atomic_fetch_add(&g.inflight, 1) + 1, seen = atomic_load(&g.max_seen);
    while (now > seen && !atomic_compare_exchange_weak(&g.max_seen, &seen, now)) {}
    unsigned pk = atomic_load(&g.peak);
    while (now > pk && !atomic_compare_exchange_weak(&g.peak, &pk, now)) {}
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (g.delay_us > 0) {
        struct timespec ts = {g.delay_us / 1000000, (g.delay_us % 1000000) * 1000};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
    }
    return t0;
}

/* ... and is answered with n bytes (size asked). */
static void serve_end(struct timespec t0, size_t size, ssize_t n) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)t1.tv_nsec - (uint64_t)t0.tv_nsec;
    atomic_fetch_add(&g.busy_ns, ns);
    int lb = 0;
    while (lb < NLAT - 1 && ns > (1000ull << lb)) lb++;
    atomic_fetch_add(&g.lat[lb], 1);
    atomic_fetch_sub(&g.inflight, 1);
    if (g.max_inflight) sem_post(&g.slots);
    atomic_fetch_add(&g.requests, 1);
    atomic_fetch_add(&g.hist[bucket(size)], 1);
    if (n > 0) atomic_fetch_add(&g.bytes, (uint64_t)n);
}

static int stats_read(struct fuse_file_info *fi, char *buf, size_t size, off_t off) {
    char tmp[4096];
    int n = format_stats(tmp, sizeof tmp, (unsigned)(fi->fh & ~STATS_FH));
    if (off >= n) return 0;
    size_t k = (size_t)n - (size_t)off < size ? (size_t)n - (size_t)off : size;
    memcpy(buf, tmp + off, k);
    return (int)k;
}

static int sf_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)path;
    if (fi->fh & STATS_FH) return stats_read(fi, buf, size, off);
    struct timespec t0 = serve_begin();
    ssize_t n = pread((int)fi->fh, buf, size, off);
    int rc = n < 0 ? -errno : (int)n;
    serve_end(t0, size, n);
    return rc;
}

/* With splice: the reply is SRC's descriptor and offset (FUSE_BUF_IS_FD),
 * which libfuse splices into /dev/fuse once this returns. */
static int sf_read_buf(const char *path, struct fuse_bufvec **bufp, size_t size, off_t off,
                       struct fuse_file_info *fi) {
    (void)path;
    struct fuse_bufvec *bv = malloc(sizeof *bv);
    if (!bv) return -ENOMEM;
    *bv = (struct fuse_bufvec)FUSE_BUFVEC_INIT(size);
    if (fi->fh & STATS_FH) { /* the stats file: from memory (libfuse frees it) */
        bv->buf[0].mem = malloc(size ? size : 1);
        if (!bv->buf[0].mem) {
            free(bv);
            return -ENOMEM;
        }
        bv->buf[0].size = (size_t)stats_read(fi, bv->buf[0].mem, size, off);
        *bufp = bv;
        return 0;
    }
    struct timespec t0 = serve_begin();
    struct stat st;
    int rc = fstat((int)fi->fh, &st) < 0 ? -errno : 0;
    size_t n = 0;
    if (rc == 0 && off < st.st_size) n = (uint64_t)(st.st_size - off) < size ? (size_t)(st.st_size - off) : size;
    bv->buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
    bv->buf[0].fd = (int)fi->fh;
    bv->buf[0].pos = off;
    bv->buf[0].size = n;
    serve_end(t0, size, rc < 0 ? rc : (ssize_t)n);
    if (rc < 0) {
        free(bv);
        return rc;
    }
    *bufp = bv;
    return 0;
}

/* Whether a pipe here can hold a 1 MiB reply and its header, as libfuse
 * asks before it splices (it wants 1 MiB + 3 pages, rounded up to 2 MiB). */
static int pipe_holds_reply(void) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) return 0;
    int ok = fcntl(p[0], F_SETPIPE_SZ, (1 << 20) + 4 * 4096) >= (1 << 20) + 4 * 4096;
    close(p[0]);
    close(p[1]);
    return ok;
}

static int sf_release(const char *path, struct fuse_file_info *fi) {
    (void)path;
    if (!(fi->fh & STATS_FH)) close((int)fi->fh);
    return 0;
}

static int sf_statfs(const char *path, struct statvfs *st) {
    (void)path;
    if (fstatvfs(g.src, st) < 0) return -errno;
    return 0;
}

static void *sf_init(struct fuse_conn_info *conn, struct fuse_config *cfg) {
    /* Reads arrive as asynchronous (background) requests, which the kernel
     * caps at max_background (default 12): raise it so that a client can
     * keep as many requests in flight as a real remote server would take. */
    conn->max_background = g.threads;
    conn->congestion_threshold = g.threads * 3 / 4;
    if (!(conn->capable & FUSE_CAP_SPLICE_WRITE)) g.splice = 0;
    if (g.splice) conn->want |= FUSE_CAP_SPLICE_WRITE; /* sf_read_buf's replies */
    cfg->use_ino = 1;
    return NULL;
}

/* Sets the mount's readahead window (/sys/class/bdi/MAJ:MIN/read_ahead_kb).
 * Runs on its own thread once the loop serves requests: the stat() of the
 * mount point is answered by the loop. */
static void *set_readahead(void *arg) {
    (void)arg;
    struct stat st;
    if (stat(g.mnt, &st) < 0) {
        perror("slowfs: stat of the mount point");
        return NULL;
    }
    char path[128];
    snprintf(path, sizeof path, "/sys/class/bdi/%u:%u/read_ahead_kb", major(st.st_dev), minor(st.st_dev));
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%ld\n", g.ra_kb) < 0 || fclose(f) != 0) {
        fprintf(stderr, "slowfs: cannot set %s to %ld: %s\n", path, g.ra_kb, strerror(errno));
        if (f) fclose(f);
    }
    return NULL;
}

static void write_stats(void) {
    if (!g.stats_path) return;
    char tmp[4096];
    int n = format_stats(tmp, sizeof tmp, atomic_load(&g.peak));
    FILE *f = fopen(g.stats_path, "w");
    if (!f) {
        perror(g.stats_path);
        return;
    }
    fwrite(tmp, 1, (size_t)n, f);
    fclose(f);
}

static const struct fuse_operations ops = {
    .getattr = sf_getattr,
    .readlink = sf_readlink,
    .readdir = sf_readdir,
    .open = sf_open,
    .read = sf_read,
    .release = sf_release,
    .statfs = sf_statfs,
    .init = sf_init,
};

static void usage(FILE *out) {
    fprintf(out, "usage: slowfs [--delay-us N] [--max-inflight N] [--threads N] [--ra-kb N] [--no-splice | --force-splice]\n"
                 "              [--stats FILE] SRC MNT\n"
                 "Read-only FUSE pass-through of SRC at MNT that waits N microseconds (default 1000)\n"
                 "per read request. --ra-kb sets the mount's kernel readahead window (also the\n"
                 "read-around of page faults; root). Counters: MNT/.slowfs-stats while mounted,\n"
                 "FILE at exit. Replies are spliced from SRC where a pipe holds 1 MiB (fs.pipe-max-size\n"
                 ">= 2 MiB or CAP_SYS_RESOURCE) unless --no-splice (--force-splice: also elsewhere, replies\n"
                 "a pipe cannot hold copied by libfuse); else pread + write.\n");
}

int main(int argc, char **argv) {
    g.delay_us = 1000;
    g.ra_kb = -1;
    unsigned threads = 64;
    int no_splice = 0, force_splice = 0;
    const char *src = NULL, *mnt = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--delay-us") && i + 1 < argc)
            g.delay_us = atol(argv[++i]);
        else if (!strcmp(a, "--max-inflight") && i + 1 < argc)
            g.max_inflight = (unsigned)atoi(argv[++i]);
        else if (!strcmp(a, "--threads") && i + 1 < argc)
            threads = (unsigned)atoi(argv[++i]);
        else if (!strcmp(a, "--ra-kb") && i + 1 < argc)
            g.ra_kb = atol(argv[++i]);
        else if (!strcmp(a, "--no-splice"))
            no_splice = 1;
        else if (!strcmp(a, "--force-splice"))
            force_splice = 1;
        else if (!strcmp(a, "--stats") && i + 1 < argc)
            g.stats_path = argv[++i];
        else if (a[0] == '-') {
            usage(stderr);
            return 2;
        } else if (!src)
            src = a;
        else if (!mnt)
            mnt = a;
        else {
            usage(stderr);
            return 2;
        }
    }
    g.threads = threads ? threads : 1;
    if (!src || !mnt || g.delay_us < 0) {
        usage(stderr);
        return 2;
    }
    g.src = open(src, O_RDONLY | O_DIRECTORY);
    if (g.src < 0) {
        perror(src);
        return 2;
    }
    if (g.max_inflight) sem_init(&g.slots, 0, g.max_inflight);
    char *fargv[] = {argv[0], "-o", "ro,fsname=slowfs,subtype=slowfs,default_permissions", NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
    g.splice = !no_splice && (force_splice || pipe_holds_reply());
    struct fuse_operations o = ops;
    if (g.splice) {
        o.read = NULL;
        o.read_buf = sf_read_buf;
    }
    struct fuse *f = fuse_new(&args, &o, sizeof o, NULL);
    if (!f) return 2;
    if (fuse_mount(f, mnt) != 0) {
        fuse_destroy(f);
        return 2;
    }
    struct fuse_session *se = fuse_get_session(f);
    fuse_set_signal_handlers(se);
    g.mnt = mnt;
    pthread_t ra_thread;
    int ra_started = g.ra_kb >= 0 && pthread_create(&ra_thread, NULL, set_readahead, NULL) == 0;
    struct fuse_loop_config *cfg = fuse_loop_cfg_create();
    fuse_loop_cfg_set_max_threads(cfg, threads);
    fuse_loop_cfg_set_idle_threads(cfg, threads);
    int rc = fuse_loop_mt(f, cfg);
    fuse_loop_cfg_destroy(cfg);
    if (ra_started) pthread_join(ra_thread, NULL);
    fuse_remove_signal_handlers(se);
    fuse_unmount(f);
    fuse_destroy(f);
    write_stats();
    close(g.src);
    return rc ? 1 : 0;
}
