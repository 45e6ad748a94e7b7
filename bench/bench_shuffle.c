/* bench_shuffle.c - the program behind `pagein bench shuffle` (the CLI's
 * cli/cmd_bench_shuffle.c runs it; it runs on its own too, with the same
 * arguments): the ml-engineering storage benchmark in C. 1 GiB as 32,768 rows of 32 KiB
 * in three shard files; before each mode every shard is evicted with
 * posix_fadvise(DONTNEED); then sequential read() of 1 MiB, mmap rows in
 * order, mmap rows shuffled, and pagein's global (queue depth 32), block and
 * ranges (a shuffled batch of 256 rows per call) readers. On the local disk
 * and, with --slowfs, through tools/slowfs (a FUSE pass-through that waits
 * per request). docs/TRAINING-DATA.md explains the columns. */
#include "bench.h"
#include "cli.h"
#include "cleanup.h"
#include "svg.h"
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#define NSHARDS 3

static const char *ALL_MODES[] = {"sequential", "mmap-in-order", "mmap-shuffled", "global", "block", "ranges"};
#define NMODES 6

struct opts {
    const char *dir;
    uint64_t size, row;
    int local, slowfs, json, keep, uring;
    int own_dir; /* o.dir is our temporary directory: removed on exit or signal */
    long delay_us, ra_kb;
    uint64_t seed;
    unsigned qd, batch, buffer_blocks, rounds;
    uint64_t block_bytes;
    const char *slowfs_bin;
    int want[NMODES];
};

struct result {
    const char *mode;
    const char *fs;
    double seconds;
    long major_faults;
    uint64_t read_bytes;
    long long requests;       /* -1 = not measured (local) */
    double mean_request_bytes;
    double quality;
    int failed;
    struct trace tr; /* the access trace (slowfs counters; trace.h) */
};

static void usage(FILE *out) {
    fprintf(out,
            "usage: pagein bench shuffle [--dir DIR] [--slowfs] [--size S] [--json] [options]\n"
            "\n"
            "Reads a dataset of rows in six ways, cold each time, and reports seconds, slowdown\n"
            "against sequential read(), major faults, bytes read, requests seen by slowfs and\n"
            "their mean size, and the shuffle quality of the order (1.0 = full permutation).\n"
            "\n"
            "  --dir DIR          where the shard files live (created if missing or of another\n"
            "                     size; kept). Default: a temporary directory under /var/tmp, removed\n"
            "  --size S           dataset size (default 1G), split into 3 shard files\n"
            "  --row S            row size (default 32K)\n"
            "  --formats [LIST]   instead: the same rows as records, webdataset, mds, lines and arrow\n"
            "                     (IPC stream) shards read through the one pipeline (none, block,\n"
            "                     global) beside sequential read() and the baselines: torch-dataloader\n"
            "                     (bench/shuffle_torch.py: a map-style Dataset, one pread a sample,\n"
            "                     DataLoader(shuffle=True)) and, for arrow, mmap-random (rows read\n"
            "                     at random through a mapping); --size (default 256M), --row,\n"
            "                     --window, --slowfs, --svg, --loader-workers N (default 1),\n"
            "                     --mmap-rows N (default 1000), --python, --torch-script\n"
            "  --slowfs           also run every mode through tools/slowfs (FUSE, --delay-us per request)\n"
            "  --slowfs-only      run only through slowfs\n"
            "  --delay-us N       slowfs delay per read request (default 1000)\n"
            "  --slowfs-ra-kb N   readahead window of the slowfs mount in KiB (default 4: page faults\n"
            "                     get no read-around, as on Lustre and as Linux does once a file's\n"
            "                     faults keep missing; large read()s still go out as 128 KiB\n"
            "                     requests); -1 keeps the kernel's 128 KiB (docs/TRAINING-DATA.md)\n"
            "  --slowfs-bin PATH  slowfs binary (default: slowfs in the build directory, next to pagein)\n"
            "  --modes LIST       comma-separated subset of: sequential,mmap-in-order,mmap-shuffled,\n"
            "                     global,block,ranges (default all)\n"
            "  --seed N           shuffle seed (default 1234)\n"
            "  --rounds N         run all modes N times in turn, keep each mode's fastest (default 1)\n"
            "  --qd N             queue depth of global and ranges (default 32)\n"
            "  --batch N          rows per ranges call (default 256)\n"
            "  --threads          ranges: read with threads even where io_uring is available\n"
            "  --block-size S     bytes per group of records, the blocks the block mode\n"
            "                     shuffles (default 16M)\n"
            "  --buffer-blocks N  block reader buffer, in blocks (default 8)\n"
            "  --svg FILE         also draw samples (rows) per second for each order and storage\n"
            "  --json             JSON: {\"modes\": [{\"mode\", \"fs\", \"seconds\", \"major_faults\",\n"
            "                     \"read_bytes\", \"requests\", \"mean_request_bytes\", \"quality\", ...}]}\n"
            "\n"
            "read_bytes is /proc/self/io read_bytes on local disk and the bytes slowfs served on\n"
            "slowfs; requests and mean_request_bytes are null on local disk. Exit: 0 ok, 1 a mode\n"
            "failed, 2 usage or I/O error.\n");
}

/* ---- measurement helpers ----------------------------------------------- */

static long major_faults(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_majflt;
}

static uint64_t proc_read_bytes(void) {
    FILE *f = fopen("/proc/self/io", "r");
    if (!f) return 0;
    char line[256];
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "read_bytes: %" SCNu64, &v) == 1) break;
    fclose(f);
    return v;
}

static int slowfs_counters(const char *mnt, uint64_t *req, uint64_t *bytes) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/.slowfs-stats", mnt);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    *req = *bytes = 0;
    while (fgets(line, sizeof line, f)) {
        sscanf(line, "requests %" SCNu64, req);
        sscanf(line, "bytes %" SCNu64, bytes);
    }
    fclose(f);
    return 0;
}

static volatile uint64_t sink;

/* Touches every cache line of a sample, as a consumer would. */
static void consume(const void *p, uint64_t n) {
    const uint8_t *b = p;
    uint64_t s = 0;
    for (uint64_t i = 0; i + 8 <= n; i += 64) {
        uint64_t v;
        memcpy(&v, b + i, 8);
        s += v;
    }
    sink += s;
}

static void evict(char paths[][PATH_MAX], int n) {
    for (int i = 0; i < n; i++) {
        int fd = open(paths[i], O_RDONLY);
        if (fd < 0) continue;
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

/* Fraction of the shards' pages resident in the page cache (mincore). */
static double resident_fraction(char paths[][PATH_MAX], int n) {
    uint64_t pages = 0, res = 0;
    long ps = sysconf(_SC_PAGESIZE);
    for (int i = 0; i < n; i++) {
        int fd = open(paths[i], O_RDONLY);
        if (fd < 0) continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_size > 0) {
            void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
            if (m != MAP_FAILED) {
                size_t np = ((size_t)st.st_size + (size_t)ps - 1) / (size_t)ps;
                unsigned char *v = malloc(np);
                if (v && mincore(m, (size_t)st.st_size, v) == 0)
                    for (size_t j = 0; j < np; j++) res += v[j] & 1;
                pages += np;
                free(v);
                munmap(m, (size_t)st.st_size);
            }
        }
        close(fd);
    }
    return pages ? (double)res / (double)pages : 0.0;
}

/* ---- dataset ------------------------------------------------------------ */

static int make_shards(const struct opts *o, char paths[][PATH_MAX], uint64_t rows) {
    uint8_t *buf = malloc(1 << 20);
    if (!buf) return -ENOMEM;
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < (1u << 20); i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    int rc = 0;
    for (int s = 0; s < NSHARDS && rc == 0; s++) {
        uint64_t r0 = rows * (uint64_t)s / NSHARDS, r1 = rows * (uint64_t)(s + 1) / NSHARDS;
        uint64_t want = (r1 - r0) * o->row;
        snprintf(paths[s], PATH_MAX, "%s/shuffle-bench-%d.bin", o->dir, s);
        struct stat st;
        if (stat(paths[s], &st) == 0 && (uint64_t)st.st_size == want) continue;
        /* a shard being written is removed if we are interrupted; in our
         * own temporary directory every shard is, for the whole run */
        int h = cli_cleanup_file(paths[s]);
        int fd = open(paths[s], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) {
            rc = -errno;
            cli_cleanup_forget(h);
            break;
        }
        for (uint64_t done = 0; done < want;) {
            size_t k = want - done < (1u << 20) ? (size_t)(want - done) : (1u << 20);
            buf[0] = (uint8_t)done, buf[1] = (uint8_t)(done >> 20); /* rows differ */
            ssize_t w = write(fd, buf, k);
            if (w <= 0) {
                rc = w < 0 ? -errno : -EIO;
                break;
            }
            done += (uint64_t)w;
        }
        if (rc == 0 && fsync(fd) < 0) rc = -errno;
        close(fd);
        if (rc < 0) unlink(paths[s]);
        if (rc < 0 || !o->own_dir) cli_cleanup_forget(h);
    }
    free(buf);
    return rc;
}

/* ---- modes -------------------------------------------------------------- */

static int run_sequential(char paths[][PATH_MAX], uint64_t *ids, size_t *nids) {
    uint8_t *buf = malloc(1 << 20);
    if (!buf) return -ENOMEM;
    int rc = 0;
    for (int s = 0; s < NSHARDS && rc == 0; s++) {
        int fd = open(paths[s], O_RDONLY);
        if (fd < 0) {
            rc = -errno;
            break;
        }
        ssize_t n;
        while ((n = read(fd, buf, 1 << 20)) > 0) consume(buf, (uint64_t)n);
        if (n < 0) rc = -errno;
        close(fd);
    }
    free(buf);
    *nids = 0; /* file order: quality 0 by definition */
    (void)ids;
    return rc;
}

static int run_reader(pagein_dataset *d, const struct opts *o, pagein_reader_kind kind, uint32_t flags,
                      uint64_t *ids, size_t *nids) {
    pagein_reader_opts ro = PAGEIN_READER_OPTS_INIT;
    ro.kind = kind;
    ro.flags = flags;
    ro.seed = o->seed;
    ro.queue_depth = o->qd;
    ro.batch = o->batch;
    ro.block_bytes = o->block_bytes;
    ro.buffer_blocks = o->buffer_blocks;
    pagein_reader *r;
    int rc = pagein_reader_open(&r, d, &ro);
    if (rc < 0) return rc;
    pagein_sample s;
    size_t n = 0;
    while ((rc = pagein_reader_next(r, &s)) == 1) {
        consume(s.data, s.length);
        ids[n++] = s.id;
    }
    pagein_reader_close(r);
    *nids = n;
    return rc;
}

static int run_ranges(pagein_dataset *d, const struct opts *o, uint64_t *ids, size_t *nids) {
    uint64_t n = pagein_dataset_count(d);
    pagein_permutation(ids, n, pagein_epoch_seed(o->seed, 0));
    /* Own descriptors with POSIX_FADV_RANDOM, as the global reader uses:
     * each merged read is exactly what is wanted, readahead would only add
     * to it. */
    int fds[NSHARDS];
    size_t nf = pagein_dataset_file_count(d);
    for (size_t i = 0; i < nf; i++) {
        fds[i] = open(pagein_dataset_path(d, i), O_RDONLY | O_CLOEXEC);
        if (fds[i] < 0) {
            int e = -errno;
            while (i--) close(fds[i]);
            return e;
        }
        posix_fadvise(fds[i], 0, 0, POSIX_FADV_RANDOM);
    }
    uint8_t *buf = malloc((size_t)o->batch * o->row);
    pagein_range *req = calloc(o->batch, sizeof *req);
    if (!buf || !req) {
        free(buf);
        free(req);
        for (size_t i = 0; i < nf; i++) close(fds[i]);
        return -ENOMEM;
    }
    pagein_ranges_opts ro = PAGEIN_RANGES_OPTS_INIT;
    ro.queue_depth = o->qd;
    if (o->uring) ro.flags |= PAGEIN_RANGES_URING;
    int rc = 0;
    for (uint64_t pos = 0; pos < n && rc == 0; pos += o->batch) {
        size_t k = n - pos < o->batch ? (size_t)(n - pos) : o->batch;
        for (size_t i = 0; i < k; i++) {
            pagein_sample_loc l;
            pagein_dataset_locate(d, ids[pos + i], &l);
            req[i] = (pagein_range){l.file, l.offset, l.length, buf + i * o->row};
        }
        rc = pagein_read_ranges(fds, nf, req, k, &ro, NULL);
        for (size_t i = 0; i < k && rc == 0; i++) consume(req[i].dst, req[i].length);
    }
    free(buf);
    free(req);
    for (size_t i = 0; i < nf; i++) close(fds[i]);
    *nids = (size_t)n;
    return rc;
}

/* Runs every wanted mode over the shards at paths (local files or the same
 * files seen through a slowfs mount at mnt). */
static int run_all(const struct opts *o, char paths[][PATH_MAX], char local[][PATH_MAX], const char *fs,
                   const char *mnt, struct result *res, int *nres) {
    const char *pp[NSHARDS] = {paths[0], paths[1], paths[2]};
    pagein_dataset *d;
    int rc = cli_open_records(&d, pp, NSHARDS, o->row, NULL, o->block_bytes); /* --block-size: the groups */
    if (rc < 0) {
        cli_error("bench shuffle", rc, "cannot open the shards");
        return EXIT_USAGE;
    }
    uint64_t n = pagein_dataset_count(d);
    uint64_t *ids = malloc(n * sizeof *ids);
    if (!ids) {
        pagein_dataset_close(d);
        return EXIT_USAGE;
    }
    int status = EXIT_OK, first = *nres;
    /* Rounds run every mode in turn (so that noise from other work on the
     * machine hits all modes alike); each mode keeps its fastest round. */
    for (unsigned round = 0; round < o->rounds; round++)
    for (int m = 0, slot = first; m < NMODES; m++) {
        if (!o->want[m]) continue;
        evict(local, NSHARDS);
        if (mnt) evict(paths, NSHARDS);
        struct result cur, *r = &cur;
        memset(r, 0, sizeof *r);
        r->mode = ALL_MODES[m];
        r->fs = fs;
        uint64_t req0 = 0, by0 = 0, req1 = 0, by1 = 0;
        if (mnt) slowfs_counters(mnt, &req0, &by0);
        char stats_path[PATH_MAX + 32] = "";
        if (mnt) snprintf(stats_path, sizeof stats_path, "%s/.slowfs-stats", mnt);
        struct trace_snap ta, tb;
        trace_snap(stats_path, &ta);
        uint64_t rb0 = proc_read_bytes();
        long mf0 = major_faults();
        size_t nids = 0;
        double t0 = cli_now();
        switch (m) {
        case 0: rc = run_sequential(paths, ids, &nids); break;
        case 1: rc = run_reader(d, o, PAGEIN_READER_MMAP, PAGEIN_READER_IN_ORDER, ids, &nids); break;
        case 2: rc = run_reader(d, o, PAGEIN_READER_MMAP, 0, ids, &nids); break;
        case 3: rc = run_reader(d, o, PAGEIN_READER_GLOBAL, 0, ids, &nids); break;
        case 4: rc = run_reader(d, o, PAGEIN_READER_BLOCK, 0, ids, &nids); break;
        default: rc = run_ranges(d, o, ids, &nids); break;
        }
        r->seconds = cli_now() - t0;
        trace_snap(stats_path, &tb);
        trace_from_slowfs(&ta, &tb, r->seconds, &r->tr);
        r->major_faults = major_faults() - mf0;
        if (mnt) {
            slowfs_counters(mnt, &req1, &by1);
            r->read_bytes = by1 - by0;
            r->requests = (long long)(req1 - req0);
            r->mean_request_bytes = req1 > req0 ? (double)(by1 - by0) / (double)(req1 - req0) : 0;
        } else {
            r->read_bytes = proc_read_bytes() - rb0;
            r->requests = -1;
        }
        r->quality = 0.0;
        if (nids >= 3 && pagein_shuffle_quality(ids, nids, &r->quality) < 0) r->quality = 0.0;
        if (rc < 0) {
            cli_error("bench shuffle", rc, "mode %s on %s failed", r->mode, fs);
            r->failed = 1;
            status = EXIT_INVALID;
        }
        if (!o->json) fprintf(stderr, "  round %u %-14s %-6s %8.3f s\n", round + 1, r->mode, fs, r->seconds);
        struct result *keep = &res[slot++];
        if (round == 0 || r->failed || (!keep->failed && r->seconds < keep->seconds)) *keep = *r;
        if (round == 0) (*nres)++;
    }
    free(ids);
    pagein_dataset_close(d);
    return status;
}

/* ---- slowfs ------------------------------------------------------------- */

static int mounted(const char *mnt) {
    FILE *f = fopen("/proc/mounts", "r");
    if (!f) return 0;
    char line[PATH_MAX * 2];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char dev[256], dir[PATH_MAX], type[64];
        if (sscanf(line, "%255s %4095s %63s", dev, dir, type) == 3 && strcmp(dir, mnt) == 0 &&
            strcmp(type, "fuse.slowfs") == 0)
            found = 1;
    }
    fclose(f);
    return found;
}

static int slowfs_handle = -1;

static pid_t slowfs_start(const struct opts *o, const char *src, const char *mnt) {
    char delay[32], ra[32];
    snprintf(delay, sizeof delay, "%ld", o->delay_us);
    snprintf(ra, sizeof ra, "%ld", o->ra_kb);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) dup2(nul, 0), dup2(nul, 1);
        if (o->ra_kb >= 0)
            execl(o->slowfs_bin, o->slowfs_bin, "--delay-us", delay, "--ra-kb", ra, src, mnt, (char *)NULL);
        else
            execl(o->slowfs_bin, o->slowfs_bin, "--delay-us", delay, src, mnt, (char *)NULL);
        _exit(127);
    }
    /* from now on a signal stops it and unmounts; slowfs_stop forgets it */
    slowfs_handle = cli_cleanup_daemon(pid, mnt);
    for (int i = 0; i < 400; i++) {
        if (mounted(mnt)) return pid;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            cli_cleanup_forget(slowfs_handle);
            return -1;
        }
        usleep(25000);
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    cli_cleanup_forget(slowfs_handle);
    return -1;
}

static void slowfs_stop(pid_t pid, const char *mnt) {
    pid_t p = fork();
    if (p == 0) {
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) dup2(nul, 1), dup2(nul, 2);
        execlp("fusermount3", "fusermount3", "-u", mnt, (char *)NULL);
        _exit(127);
    }
    if (p > 0) waitpid(p, NULL, 0);
    for (int i = 0; i < 200; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            cli_cleanup_forget(slowfs_handle);
            return;
        }
        usleep(25000);
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    cli_cleanup_forget(slowfs_handle);
}

/* ---- output ------------------------------------------------------------- */

static double seq_seconds(const struct result *res, int n, const char *fs) {
    for (int i = 0; i < n; i++)
        if (strcmp(res[i].fs, fs) == 0 && strcmp(res[i].mode, "sequential") == 0 && !res[i].failed)
            return res[i].seconds;
    return 0;
}

static void print_table(const struct opts *o, const struct result *res, int n) {
    printf("%-14s %-6s %9s %9s %12s %11s %9s %10s %8s\n", "mode", "fs", "seconds", "slowdown", "major_faults",
           "read_MiB", "requests", "mean_KiB", "quality");
    for (int i = 0; i < n; i++) {
        const struct result *r = &res[i];
        double base = seq_seconds(res, n, r->fs);
        char sd[32], rq[32], mr[32];
        snprintf(sd, sizeof sd, base > 0 ? "%.2fx" : "-", base > 0 ? r->seconds / base : 0.0);
        if (r->requests >= 0) {
            snprintf(rq, sizeof rq, "%lld", r->requests);
            snprintf(mr, sizeof mr, "%.1f", r->mean_request_bytes / 1024);
        } else {
            snprintf(rq, sizeof rq, "-");
            snprintf(mr, sizeof mr, "-");
        }
        printf("%-14s %-6s %9.3f %9s %12ld %11.1f %9s %10s %8.3f%s\n", r->mode, r->fs, r->seconds, sd, r->major_faults,
               (double)r->read_bytes / 1048576.0, rq, mr, r->quality, r->failed ? "  FAILED" : "");
    }
    (void)o;
}

static void print_json(const struct opts *o, const struct result *res, int n, const char *kernel, double resident) {
    printf("{\n  \"benchmark\": \"shuffle\",\n  \"size_bytes\": %" PRIu64 ",\n  \"row_bytes\": %" PRIu64
           ",\n  \"rows\": %" PRIu64 ",\n  \"shards\": %d,\n  \"seed\": %" PRIu64 ",\n  \"queue_depth\": %u,\n"
           "  \"batch\": %u,\n  \"block_bytes\": %" PRIu64 ",\n  \"buffer_blocks\": %u,\n  \"slowfs_delay_us\": %ld,\n"
           "  \"slowfs_ra_kb\": %ld,\n  \"rounds\": %u,\n  \"ranges_engine\": \"%s\",\n"
           "  \"kernel\": ",
           o->size / o->row * o->row, o->row, o->size / o->row, NSHARDS, o->seed, o->qd, o->batch, o->block_bytes,
           o->buffer_blocks, o->delay_us, o->ra_kb, o->rounds, o->uring ? "io_uring" : "threads");
    cli_json_str(stdout, kernel, strlen(kernel));
    printf(",\n  \"resident_after_evict\": %.4f,\n  \"modes\": [", resident);
    for (int i = 0; i < n; i++) {
        const struct result *r = &res[i];
        double base = seq_seconds(res, n, r->fs);
        printf("%s\n    {\"mode\": \"%s\", \"fs\": \"%s\", \"seconds\": %.6f, \"slowdown\": ", i ? "," : "", r->mode,
               r->fs, r->seconds);
        if (base > 0)
            printf("%.4f", r->seconds / base);
        else
            printf("null");
        printf(", \"major_faults\": %ld, \"read_bytes\": %" PRIu64 ", \"requests\": ", r->major_faults, r->read_bytes);
        if (r->requests >= 0)
            printf("%lld, \"mean_request_bytes\": %.1f", r->requests, r->mean_request_bytes);
        else
            printf("null, \"mean_request_bytes\": null");
        printf(", \"quality\": %.4f, \"ok\": %s, ", r->quality, r->failed ? "false" : "true");
        trace_json(stdout, &r->tr);
        printf("}");
    }
    printf("\n  ]\n}\n");
}

/* --svg: samples (rows) per second, rows / seconds of the JSON, one bar per
 * storage (local, slowfs) for each order. */
static int draw_svg(const char *path, const struct opts *o, const struct result *res, int n) {
    const char *cat[NMODES], *ser[2];
    size_t nc = 0, ns = 0;
    double v[NMODES * 2];
    for (int i = 0; i < n; i++) {
        size_t k = 0;
        while (k < ns && strcmp(ser[k], res[i].fs)) k++;
        if (k == ns && ns < 2) ser[ns++] = res[i].fs;
    }
    for (int m = 0; m < NMODES; m++) {
        int any = 0;
        for (size_t k = 0; k < ns; k++) {
            v[nc * ns + k] = -1;
            for (int i = 0; i < n; i++)
                if (!strcmp(res[i].mode, ALL_MODES[m]) && !strcmp(res[i].fs, ser[k])) {
                    any = 1;
                    if (!res[i].failed && res[i].seconds > 0) v[nc * ns + k] = (double)(o->size / o->row) / res[i].seconds;
                }
        }
        if (any) cat[nc++] = ALL_MODES[m];
    }
    char title[256], note[256];
    snprintf(title, sizeof title, "pagein bench shuffle: samples/s by order, %" PRIu64 " rows of %" PRIu64 " B, cold",
             o->size / o->row, o->row);
    snprintf(note, sizeof note, "slowfs: %ld us a request, readahead %ld KiB; queue depth %u, batch %u", o->delay_us,
             o->ra_kb, o->qd, o->batch);
    /* slowfs is orders of magnitude below local disk: a log axis shows both */
    struct svg_bars sb = {.title = title, .unit = "samples/s", .fmt = "%.0f", .ncat = nc, .nser = ns, .cat = cat,
                          .ser = ser, .v = v, .note = note, .log_y = 1};
    int rc = nc && ns ? svg_bar_chart(path, &sb) : -EINVAL;
    if (rc < 0) cli_error("bench shuffle", 0, "cannot write %s: %s", path, nc ? strerror(-rc) : "no figure measured");
    return rc;
}

/* ---- main --------------------------------------------------------------- */

static int parse_u(const char *s, unsigned *out) {
    char *e;
    unsigned long v = strtoul(s, &e, 10);
    if (*e || v == 0 || v > 1u << 20) return -1;
    *out = (unsigned)v;
    return 0;
}

static int bench_formats(int argc, char **argv); /* --formats: at the end of this file */

static int bench_shuffle_main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--formats")) return bench_formats(argc, argv);
    struct opts o = {.size = 1ull << 30, .row = 32 << 10, .local = 1, .delay_us = 1000, .ra_kb = 4, .seed = 1234, .qd = 32,
                     .batch = 256, .buffer_blocks = 8, .rounds = 1, .block_bytes = 16 << 20};
    for (int m = 0; m < NMODES; m++) o.want[m] = 1;
    o.uring = pagein_ranges_uring_available();
    char self_dir[PATH_MAX], slowfs_default[PATH_MAX + 16];
    bench_tool_dir(self_dir, sizeof self_dir);
    snprintf(slowfs_default, sizeof slowfs_default, "%s/slowfs", self_dir);
    o.slowfs_bin = slowfs_default;
    const char *svg = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (cli_is_help(a)) {
            usage(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "--json"))
            o.json = 1;
        else if (!strcmp(a, "--threads"))
            o.uring = 0;
        else if (!strcmp(a, "--slowfs"))
            o.slowfs = 1;
        else if (!strcmp(a, "--slowfs-only"))
            o.slowfs = 1, o.local = 0;
        else if (!v)
            bad = 1;
        else if (!strcmp(a, "--dir"))
            o.dir = v, i++;
        else if (!strcmp(a, "--size"))
            bad = cli_parse_size(v, &o.size) < 0, i++;
        else if (!strcmp(a, "--row"))
            bad = cli_parse_size(v, &o.row) < 0 || o.row == 0, i++;
        else if (!strcmp(a, "--block-size"))
            bad = cli_parse_size(v, &o.block_bytes) < 0 || o.block_bytes == 0, i++;
        else if (!strcmp(a, "--delay-us"))
            o.delay_us = atol(v), bad = o.delay_us < 0, i++;
        else if (!strcmp(a, "--seed"))
            o.seed = strtoull(v, NULL, 0), i++;
        else if (!strcmp(a, "--qd"))
            bad = parse_u(v, &o.qd) < 0 || o.qd > 256, i++;
        else if (!strcmp(a, "--rounds"))
            bad = parse_u(v, &o.rounds) < 0 || o.rounds > 100, i++;
        else if (!strcmp(a, "--batch"))
            bad = parse_u(v, &o.batch) < 0, i++;
        else if (!strcmp(a, "--buffer-blocks"))
            bad = parse_u(v, &o.buffer_blocks) < 0, i++;
        else if (!strcmp(a, "--slowfs-ra-kb"))
            o.ra_kb = atol(v), i++;
        else if (!strcmp(a, "--slowfs-bin"))
            o.slowfs_bin = v, i++;
        else if (!strcmp(a, "--svg"))
            svg = v, i++;
        else if (!strcmp(a, "--modes")) {
            for (int m = 0; m < NMODES; m++) o.want[m] = 0;
            char *list = strdup(v);
            for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
                int found = 0;
                for (int m = 0; m < NMODES; m++)
                    if (!strcmp(t, ALL_MODES[m])) o.want[m] = found = 1;
                if (!found) bad = 1;
            }
            free(list);
            i++;
        } else
            bad = 1;
        if (bad) {
            cli_error("bench shuffle", 0, "bad argument '%s%s%s' (see --help)", a, v ? " " : "", v ? v : "");
            return EXIT_USAGE;
        }
    }
    if (o.size / o.row < NSHARDS * 3) {
        cli_error("bench shuffle", 0, "--size must hold at least %d rows", NSHARDS * 3);
        return EXIT_USAGE;
    }
    if (o.slowfs && access(o.slowfs_bin, X_OK) != 0) {
        cli_error("bench shuffle", 0, "--slowfs: %s not found (build it: needs libfuse3-dev; or --slowfs-bin)",
                  o.slowfs_bin);
        return EXIT_USAGE;
    }
    char tmpdir[] = "/var/tmp/pagein-shuffle-XXXXXX";
    int own_dir = 0;
    if (!o.dir) {
        if (!mkdtemp(tmpdir)) {
            cli_error("bench shuffle", -errno, "mkdtemp");
            return EXIT_USAGE;
        }
        o.dir = tmpdir;
        own_dir = 1;
        o.own_dir = 1;
        cli_cleanup_dir(tmpdir); /* removed on a signal once its shards are */
    } else if (mkdir(o.dir, 0755) < 0 && errno != EEXIST) {
        cli_error("bench shuffle", -errno, "cannot create %s", o.dir);
        return EXIT_USAGE;
    }
    char absdir[PATH_MAX];
    if (!realpath(o.dir, absdir)) {
        cli_error("bench shuffle", -errno, "%s", o.dir);
        return EXIT_USAGE;
    }
    o.dir = absdir;
    static char local[NSHARDS][PATH_MAX], via[NSHARDS][PATH_MAX];
    uint64_t rows = o.size / o.row;
    struct utsname un;
    uname(&un);
    char kernel[256];
    snprintf(kernel, sizeof kernel, "%s %s", un.sysname, un.release);
    if (!o.json)
        fprintf(stderr, "pagein bench shuffle: %" PRIu64 " rows of %" PRIu64 " bytes in %d shards under %s (%s)\n",
                rows, o.row, NSHARDS, o.dir, kernel);
    int rc = make_shards(&o, local, rows);
    if (rc < 0) {
        cli_error("bench shuffle", rc, "cannot write the shards under %s", o.dir);
        if (own_dir) {
            for (int s = 0; s < NSHARDS; s++) unlink(local[s]);
            rmdir(o.dir);
        }
        return EXIT_USAGE;
    }
    evict(local, NSHARDS);
    double resident = resident_fraction(local, NSHARDS);
    struct result res[2 * NMODES];
    int nres = 0, status = EXIT_OK;
    if (o.local) status = run_all(&o, local, local, "local", NULL, res, &nres);
    if (o.slowfs && status != EXIT_USAGE) {
        char mnt[PATH_MAX + 16];
        snprintf(mnt, sizeof mnt, "%s.mnt", o.dir);
        mkdir(mnt, 0755);
        int mh = cli_cleanup_dir(mnt);
        pid_t pid = slowfs_start(&o, o.dir, mnt);
        if (pid < 0) {
            cli_error("bench shuffle", 0, "slowfs did not mount %s (is /dev/fuse usable? fusermount3 installed?)", mnt);
            rmdir(mnt);
            cli_cleanup_forget(mh);
            status = EXIT_USAGE;
        } else {
            if (!o.json) fprintf(stderr, "slowfs: %s at %s, %ld us per read request\n", o.dir, mnt, o.delay_us);
            for (int s = 0; s < NSHARDS; s++)
                snprintf(via[s], PATH_MAX, "%.3000s/%.1000s", mnt, strrchr(local[s], '/') + 1);
            int st = run_all(&o, via, local, "slowfs", mnt, res, &nres);
            if (st > status) status = st;
            slowfs_stop(pid, mnt);
            rmdir(mnt);
            cli_cleanup_forget(mh);
        }
    }
    if (o.json)
        print_json(&o, res, nres, kernel, resident);
    else {
        char ra[32];
        if (o.ra_kb >= 0)
            snprintf(ra, sizeof ra, "%ld KiB", o.ra_kb);
        else
            snprintf(ra, sizeof ra, "kernel default");
        printf("# %" PRIu64 " rows x %" PRIu64 " B = %.0f MiB in %d shards, cold (%.1f%% resident after DONTNEED), "
               "qd %u, batch %u (ranges via %s), block %" PRIu64 " KiB x %u, slowfs %ld us/request ra %s, %u round(s), %s\n",
               rows, o.row, (double)(rows * o.row) / 1048576.0, NSHARDS, resident * 100, o.qd, o.batch,
               o.uring ? "io_uring" : "threads",
               o.block_bytes >> 10, o.buffer_blocks, o.delay_us, ra, o.rounds, kernel);
        print_table(&o, res, nres);
    }
    if (svg && draw_svg(svg, &o, res, nres) < 0) status = EXIT_USAGE;
    if (own_dir && !o.keep) {
        for (int s = 0; s < NSHARDS; s++) unlink(local[s]);
        rmdir(o.dir);
    }
    return status;
}

int main(int argc, char **argv) { return bench_shuffle_main(argc, argv); }

/* ==== --formats: every format of the dataset-format table =================
 * The same rows (--row bytes each, --size in all, NSHARDS shards) written
 * as fixed records, WebDataset tars (one member a sample), MDS (one bytes
 * column; index.json) and JSONL (one line a row), then read cold through
 * the one pipeline (pagein_pipe) in order none, block and global, beside
 * the sequential read() limit of the same files; on the local disk and
 * through slowfs. Rows per second and sample bytes per second. */

static const char *const FMT_NAMES[] = {"records", "webdataset", "mds", "lines", "arrow"};
#define NFMT 5
#define F_ARROW 4
/* modes of --formats: the pipeline's three orders between the sequential
 * limit and the ways users read each format today */
static const char *const FMODES[] = {"sequential", "none", "block", "global", "torch-dataloader", "mmap-random"};
#define NFMODES 6
#define FM_TORCH 4
#define FM_MMAP 5

struct fres {
    const char *fmt, *fs, *mode;
    double seconds, open_seconds, quality;
    uint64_t samples, bytes, requests, sbytes;
    int failed, skipped;
};

/* ---- Arrow IPC streams, written from the spec (format/Schema.fbs,
 * Message.fbs): one `data: binary` column in record batches of
 * ARROW_BATCH_BYTES; each flatbuffer laid out front to back (root offset,
 * then each table's vtable before it, children after their parent, so
 * every uoffset points forward). The layout of every batch is kept for the
 * mmap-random baseline (rows read at their offsets through a mapping, as
 * `datasets` reads after .shuffle()) and written to layout.txt for the
 * torch DataLoader baseline. */

#define ARROW_BATCH_BYTES (4u << 20)

struct fb {
    uint8_t b[512];
    size_t n;
};

static size_t fb_at(struct fb *f, size_t size, size_t align) {
    while (f->n % align) f->n++;
    size_t at = f->n;
    f->n += size;
    return at;
}
static void fb_u16(struct fb *f, size_t at, uint16_t v) { memcpy(f->b + at, &v, 2); }
static void fb_u32(struct fb *f, size_t at, uint32_t v) { memcpy(f->b + at, &v, 4); }
static void fb_u64(struct fb *f, size_t at, uint64_t v) { memcpy(f->b + at, &v, 8); }
static void fb_off(struct fb *f, size_t field, size_t target) { fb_u32(f, field, (uint32_t)(target - field)); }

/* A vtable (field offsets, 0 = absent) and its table of tsize bytes after
 * it; returns the table's position. */
static size_t fb_table(struct fb *f, const uint16_t *offs, size_t nf, uint16_t tsize) {
    size_t vt = fb_at(f, 4 + 2 * nf, 2);
    fb_u16(f, vt, (uint16_t)(4 + 2 * nf));
    fb_u16(f, vt + 2, tsize);
    for (size_t i = 0; i < nf; i++) fb_u16(f, vt + 4 + 2 * i, offs[i]);
    size_t t = fb_at(f, tsize, 8);
    fb_u32(f, t, (uint32_t)(t - vt));
    return t;
}

/* Message{version V5, header_type, header, bodyLength}; returns the header field's position. */
static size_t fb_message(struct fb *f, uint8_t type, uint64_t body) {
    size_t root = fb_at(f, 4, 4);
    static const uint16_t mo[] = {16, 18, 4, 8};
    size_t m = fb_table(f, mo, 4, 24);
    fb_off(f, root, m);
    fb_u16(f, m + 16, 4);
    f->b[m + 18] = type;
    fb_u64(f, m + 8, body);
    return m + 4;
}

static void arrow_schema(struct fb *f) {
    size_t hdr = fb_message(f, 1, 0);
    static const uint16_t so[] = {0, 4};
    size_t sc = fb_table(f, so, 2, 8);
    fb_off(f, hdr, sc);
    size_t vec = fb_at(f, 8, 4);
    fb_off(f, sc + 4, vec);
    fb_u32(f, vec, 1);
    static const uint16_t fo[] = {4, 0, 16, 8, 0, 12};
    size_t fld = fb_table(f, fo, 6, 20);
    fb_off(f, vec + 4, fld);
    f->b[fld + 16] = 4; /* Type.Binary */
    size_t name = fb_at(f, 9, 4);
    fb_u32(f, name, 4);
    memcpy(f->b + name + 4, "data", 5);
    fb_off(f, fld + 4, name);
    static const uint16_t none[1] = {0};
    size_t bin = fb_table(f, none, 0, 4);
    fb_off(f, fld + 8, bin);
    size_t kids = fb_at(f, 4, 4);
    fb_off(f, fld + 12, kids);
}

static void arrow_batch(struct fb *f, uint64_t n, uint64_t off_bytes, uint64_t data_bytes) {
    size_t hdr = fb_message(f, 3, off_bytes + data_bytes);
    static const uint16_t ro[] = {16, 4, 8};
    size_t rb = fb_table(f, ro, 3, 24);
    fb_off(f, hdr, rb);
    fb_u64(f, rb + 16, n);
    while (f->n % 8 != 4) f->n++;
    size_t nodes = fb_at(f, 4 + 16, 4);
    fb_off(f, rb + 4, nodes);
    fb_u32(f, nodes, 1);
    fb_u64(f, nodes + 4, n);
    while (f->n % 8 != 4) f->n++;
    size_t bufs = fb_at(f, 4 + 48, 4);
    fb_off(f, rb + 8, bufs);
    fb_u32(f, bufs, 3);
    fb_u64(f, bufs + 4 + 16, 0), fb_u64(f, bufs + 4 + 24, (n + 1) * 4); /* offsets */
    fb_u64(f, bufs + 4 + 32, off_bytes), fb_u64(f, bufs + 4 + 40, data_bytes);
}

/* Writes one encapsulated message: continuation, length, flatbuffer, padding. */
static void arrow_put(FILE *o, const struct fb *f) {
    uint32_t len = (uint32_t)((f->n + 7) / 8 * 8), cont = 0xFFFFFFFFu;
    static const uint8_t zero[8];
    fwrite(&cont, 4, 1, o);
    fwrite(&len, 4, 1, o);
    fwrite(f->b, 1, f->n, o);
    fwrite(zero, 1, len - f->n, o);
}

struct abatch { /* where a batch's rows are: for the mapped baseline */
    uint64_t first, n, offsets_at, data_at;
};
static struct abatch *g_abatch[NSHARDS];
static size_t g_nabatch[NSHARDS];

static void fill_row(uint8_t *p, uint64_t n, uint64_t id, int text);

static int write_arrow_shard(FILE *o, int s, uint64_t first, uint64_t per, uint64_t row, uint8_t *buf) {
    struct fb f = {{0}, 0};
    arrow_schema(&f);
    arrow_put(o, &f);
    uint64_t rows_per = ARROW_BATCH_BYTES / row ? ARROW_BATCH_BYTES / row : 1;
    free(g_abatch[s]);
    g_abatch[s] = calloc(per / rows_per + 2, sizeof *g_abatch[s]);
    g_nabatch[s] = 0;
    if (!g_abatch[s]) return -ENOMEM;
    uint32_t *offs = malloc((rows_per + 1) * 4);
    if (!offs) return -ENOMEM;
    for (uint64_t b0 = 0; b0 < per; b0 += rows_per) {
        uint64_t n = per - b0 < rows_per ? per - b0 : rows_per;
        uint64_t ob = ((n + 1) * 4 + 7) / 8 * 8, db = (n * row + 7) / 8 * 8;
        memset(&f, 0, sizeof f);
        arrow_batch(&f, n, ob, db);
        arrow_put(o, &f);
        long at = ftell(o);
        g_abatch[s][g_nabatch[s]++] = (struct abatch){first + b0, n, (uint64_t)at, (uint64_t)at + ob};
        for (uint64_t i = 0; i <= n; i++) offs[i] = (uint32_t)(i * row);
        fwrite(offs, 4, n + 1, o);
        static const uint8_t zero[8];
        fwrite(zero, 1, ob - (n + 1) * 4, o);
        for (uint64_t i = 0; i < n; i++) {
            fill_row(buf, row, first + b0 + i, 0);
            fwrite(buf, 1, row, o);
        }
        fwrite(zero, 1, db - n * row, o);
    }
    free(offs);
    uint32_t eos[2] = {0xFFFFFFFFu, 0};
    fwrite(eos, 4, 2, o);
    return 0;
}


static void fill_row(uint8_t *p, uint64_t n, uint64_t id, int text) {
    uint64_t s = id * 0x9e3779b97f4a7c15ull + 1;
    for (uint64_t i = 0; i < n; i++) {
        if ((i & 7) == 0) s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint8_t b = (uint8_t)(s >> (8 * (i & 7)));
        p[i] = text ? (uint8_t)('a' + b % 26) : b;
    }
}

static void tar_header(uint8_t *h, const char *name, uint64_t size) {
    memset(h, 0, 512);
    snprintf((char *)h, 100, "%s", name);
    memcpy(h + 100, "0000644", 8);
    memcpy(h + 108, "0000000", 8);
    memcpy(h + 116, "0000000", 8);
    snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
    snprintf((char *)h + 136, 12, "%011o", 1700000000u);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
}

/* Writes format f's shards under dir; fills paths (the shard files). */
static int write_format(int f, const char *dir, uint64_t rows, uint64_t row, char paths[][PATH_MAX]) {
    mkdir(dir, 0755);
    uint64_t per = rows / NSHARDS;
    uint8_t *buf = malloc(row + 1024);
    if (!buf) return -ENOMEM;
    static char idx[16384];
    size_t il = (size_t)snprintf(idx, sizeof idx, "{\"shards\": [");
    int rc = 0;
    for (int s = 0; s < NSHARDS && rc == 0; s++) {
        static const char *const ext[] = {".bin", ".tar", ".mds", ".jsonl", ".arrow"};
        snprintf(paths[s], PATH_MAX, "%.3000s/shard.%05d%s", dir, s, ext[f]);
        FILE *o = fopen(paths[s], "wb");
        if (!o) {
            rc = -errno;
            break;
        }
        uint64_t first = (uint64_t)s * per;
        if (f == F_ARROW) {
            rc = write_arrow_shard(o, s, first, per, row, buf);
            if (fclose(o) != 0 && rc == 0) rc = -EIO;
            continue;
        }
        if (f == 2) { /* MDS: u32 n, u32 offsets[n+1], config, samples (u32 size + bytes) */
            const char *cfg = "{\"column_encodings\": [\"bytes\"], \"column_names\": [\"data\"], \"column_sizes\": [null], "
                              "\"compression\": null, \"format\": \"mds\", \"hashes\": [], \"size_limit\": null, \"version\": 2}";
            uint32_t n32 = (uint32_t)per, off = (uint32_t)(4 + 4 * (per + 1) + strlen(cfg));
            fwrite(&n32, 4, 1, o);
            for (uint64_t i = 0; i <= per; i++, off += (uint32_t)(row + 4)) fwrite(&off, 4, 1, o);
            fputs(cfg, o);
            if (il < sizeof idx - 512)
                il += (size_t)snprintf(idx + il, sizeof idx - il,
                                       "%s{\"column_encodings\": [\"bytes\"], \"column_names\": [\"data\"], \"column_sizes\": [null], "
                                       "\"compression\": null, \"format\": \"mds\", \"raw_data\": {\"basename\": \"shard.%05d.mds\", "
                                       "\"bytes\": %u}, \"samples\": %" PRIu64 ", \"zip_data\": null, \"version\": 2}",
                                       s ? ", " : "", s, off - (uint32_t)(row + 4), per);
        }
        for (uint64_t i = 0; i < per; i++) {
            uint64_t id = first + i;
            if (f == 1) {
                char name[64];
                snprintf(name, sizeof name, "%010" PRIu64 ".bin", id);
                tar_header(buf, name, row);
                fwrite(buf, 1, 512, o);
                fill_row(buf, row, id, 0);
                fwrite(buf, 1, row, o);
                static const uint8_t zero[512];
                if (row % 512) fwrite(zero, 1, 512 - row % 512, o);
            } else if (f == 2) {
                uint32_t sz = (uint32_t)row;
                fwrite(&sz, 4, 1, o);
                fill_row(buf, row, id, 0);
                fwrite(buf, 1, row, o);
            } else if (f == 3) {
                fill_row(buf, row - 1, id, 1);
                buf[row - 1] = '\n';
                fwrite(buf, 1, row, o);
            } else {
                fill_row(buf, row, id, 0);
                fwrite(buf, 1, row, o);
            }
        }
        if (f == 1) {
            memset(buf, 0, 1024);
            fwrite(buf, 1, 1024, o);
        }
        if (fclose(o) != 0) rc = -EIO;
    }
    free(buf);
    if (rc == 0 && f == F_ARROW) { /* the batches' layout, for the torch baseline */
        char p[PATH_MAX + 16];
        snprintf(p, sizeof p, "%.3000s/layout.pagein", dir);
        FILE *o = fopen(p, "wb");
        if (!o) return -errno;
        for (int sh = 0; sh < NSHARDS; sh++)
            for (size_t b = 0; b < g_nabatch[sh]; b++)
                fprintf(o, "%d %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", sh, g_abatch[sh][b].first,
                        g_abatch[sh][b].n, g_abatch[sh][b].offsets_at, g_abatch[sh][b].data_at);
        if (fclose(o) != 0) rc = -EIO;
    }
    if (rc == 0 && f == 2) {
        char p[PATH_MAX + 16];
        snprintf(p, sizeof p, "%.3000s/index.json", dir);
        FILE *o = fopen(p, "wb");
        if (!o) return -errno;
        fprintf(o, "%.*s], \"version\": 2}", (int)il, idx);
        if (fclose(o) != 0) rc = -EIO;
    }
    return rc;
}

/* Called after the dataset is opened (its index read), before the timed
 * epoch: evicts the shards and snapshots the request counters. */
struct fmt_cold {
    char (*paths)[PATH_MAX], (*via)[PATH_MAX];
    const char *mnt;
    uint64_t q0, b0;
};

static void fmt_cold(struct fmt_cold *c) {
    evict(c->paths, NSHARDS);
    if (c->mnt) {
        evict(c->via, NSHARDS);
        slowfs_counters(c->mnt, &c->q0, &c->b0);
    }
}

static int fmt_run(const char *spec, int f, uint64_t row, int order, unsigned window, uint64_t seed, struct fres *r,
                   uint64_t *ids, uint64_t cap, struct fmt_cold *cold) {
    pagein_dataset_opts dop = PAGEIN_DATASET_OPTS_INIT;
    if (f == 0) dop.record_bytes = row;
    dop.group_bytes = 4u << 20;
    pagein_dataset *d = NULL;
    double t0 = cli_now();
    int rc = pagein_dataset_open(&d, spec, &dop);
    r->open_seconds = cli_now() - t0;
    if (rc < 0) return rc;
    pagein_pipe_opts po = PAGEIN_PIPE_OPTS_INIT;
    po.order = (pagein_order)order;
    po.seed = seed;
    po.window = window;
    pagein_pipe *p = NULL;
    fmt_cold(cold);
    t0 = cli_now();
    if ((rc = pagein_pipe_open(&p, d, &po)) == 0) {
        pagein_item it;
        while ((rc = pagein_pipe_next(p, &it)) == 1) {
            for (size_t k = 0; k < it.nfields; k++) {
                consume(it.fields[k].data, it.fields[k].nbytes);
                r->sbytes += it.fields[k].nbytes;
            }
            if (r->samples < cap) ids[r->samples] = it.id;
            r->samples++;
        }
        pagein_pipe_stats st;
        pagein_pipe_get_stats(p, &st);
        r->bytes = st.bytes_read;
    }
    r->seconds = cli_now() - t0;
    pagein_pipe_close(p);
    pagein_dataset_close(d);
    r->quality = 0;
    if (rc == 0 && r->samples >= 3 && r->samples <= cap) pagein_shuffle_quality(ids, (size_t)r->samples, &r->quality);
    return rc;
}

/* ---- the baselines: how users read each format today ------------------------ */

/* mmap-random (arrow): the shards mapped, nrand rows in a seeded random
 * order, each row read through the mapping at its offsets (the row's two
 * offsets, then its bytes), as `datasets` does after .shuffle(). */
static int run_mmap_random(char paths[][PATH_MAX], uint64_t rows, uint64_t seed, uint64_t nrand, struct fres *r) {
    const uint8_t *m[NSHARDS] = {0};
    size_t len[NSHARDS] = {0};
    int rc = 0;
    double t0 = cli_now();
    for (int s = 0; s < NSHARDS && rc == 0; s++) {
        int fd = open(paths[s], O_RDONLY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) rc = -errno;
        else if ((m[s] = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0)) == MAP_FAILED) rc = -errno, m[s] = NULL;
        else len[s] = (size_t)st.st_size;
        if (fd >= 0) close(fd);
    }
    uint64_t per = rows / NSHARDS, x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (uint64_t i = 0; i < nrand && rc == 0; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t id = (uint64_t)(((unsigned __int128)(x >> 1) * rows) >> 63), s = id / per;
        size_t lo = 0, hi = g_nabatch[s];
        while (hi - lo > 1) {
            size_t mid = (lo + hi) / 2;
            if (g_abatch[s][mid].first <= id) lo = mid;
            else hi = mid;
        }
        const struct abatch *b = &g_abatch[s][lo];
        uint32_t o[2];
        memcpy(o, m[s] + b->offsets_at + 4 * (id - b->first), 8);
        if (o[1] < o[0] || b->data_at + o[1] > len[s]) rc = -EINVAL;
        else consume(m[s] + b->data_at + o[0], o[1] - o[0]), r->sbytes += o[1] - o[0];
    }
    r->seconds = cli_now() - t0;
    r->samples = nrand;
    for (int s = 0; s < NSHARDS; s++)
        if (m[s]) munmap((void *)m[s], len[s]);
    return rc;
}

/* torch-dataloader: bench/shuffle_torch.py, a map-style Dataset with one
 * pread per sample under torch's DataLoader(shuffle=True). 1 skipped (torch
 * or the script missing: r->skipped), 0 ok, < 0 failed. */
struct torch_base {
    const char *script, *python;
    unsigned workers;
};

static void shell_quote(char *out, size_t cap, const char *in) {
    size_t n = 0;
    if (cap < 3) return;
    out[n++] = '\'';
    for (; *in && n + 6 < cap; in++) {
        if (*in == '\'') n += (size_t)snprintf(out + n, cap - n, "'\\''");
        else out[n++] = *in;
    }
    out[n++] = '\'';
    out[n] = 0;
}

static int run_torch(const struct torch_base *tb, const char *fmt, const char *dir, uint64_t row, uint64_t seed,
                     char paths[][PATH_MAX], char via[][PATH_MAX], int slowfs, struct fres *r) {
    if (access(tb->script, R_OK) != 0) {
        r->skipped = 1;
        return 1;
    }
    static char cmd[16 * PATH_MAX];
    char q[2 * PATH_MAX + 8];
    size_t n = 0;
    shell_quote(q, sizeof q, tb->python);
    n += (size_t)snprintf(cmd + n, sizeof cmd - n, "%s ", q);
    shell_quote(q, sizeof q, tb->script);
    n += (size_t)snprintf(cmd + n, sizeof cmd - n, "%s %s ", q, fmt);
    shell_quote(q, sizeof q, dir);
    n += (size_t)snprintf(cmd + n, sizeof cmd - n, "%s %" PRIu64 " %" PRIu64 " %u --evict", q, row, seed, tb->workers);
    for (int s = 0; s < NSHARDS; s++) {
        shell_quote(q, sizeof q, paths[s]);
        n += (size_t)snprintf(cmd + n, sizeof cmd - n, " %s", q);
        if (slowfs) {
            shell_quote(q, sizeof q, via[s]);
            n += (size_t)snprintf(cmd + n, sizeof cmd - n, " %s", q);
        }
    }
    FILE *pp = popen(cmd, "r");
    if (!pp) return -errno;
    char line[1024] = "";
    if (!fgets(line, sizeof line, pp)) line[0] = 0;
    int st = pclose(pp);
    if (strstr(line, "\"skipped\"")) {
        r->skipped = 1;
        return 1;
    }
    const char *a = strstr(line, "\"seconds\": "), *b = strstr(line, "\"samples\": "), *c = strstr(line, "\"bytes\": ");
    if (st != 0 || !a || !b || !c) return -EIO;
    r->seconds = strtod(a + 11, NULL);
    r->samples = strtoull(b + 11, NULL, 10);
    r->sbytes = r->bytes = strtoull(c + 9, NULL, 10);
    return 0;
}

/* The results of bench_formats: JSON, or a table with each mode's speed
 * against the sequential read of the same format and file system. */
static const struct fres *seq_of(const struct fres *res, int n, const struct fres *r) {
    for (int i = 0; i < n; i++)
        if (res[i].fmt == r->fmt && res[i].fs == r->fs && !strcmp(res[i].mode, "sequential")) return &res[i];
    return r;
}

/* The baselines' orders are torch's sampler and a seeded random draw: not measured. */
static int is_baseline(const struct fres *r) { return !strcmp(r->mode, FMODES[FM_TORCH]) || !strcmp(r->mode, FMODES[FM_MMAP]); }

static void print_formats(const struct fres *res, int nres, int json, uint64_t rows, uint64_t row, unsigned window,
                          long delay, unsigned rounds) {
    if (json) {
        printf("{\n  \"benchmark\": \"shuffle-formats\",\n  \"rows\": %" PRIu64 ",\n  \"row_bytes\": %" PRIu64
               ",\n  \"shards\": %d,\n  \"window\": %u,\n  \"slowfs_delay_us\": %ld,\n  \"rounds\": %u,\n  \"results\": [",
               rows, row, NSHARDS, window, delay, rounds);
        for (int i = 0; i < nres; i++) {
            const struct fres *r = &res[i];
            printf("%s\n    {\"format\": \"%s\", \"fs\": \"%s\", \"mode\": \"%s\", \"seconds\": %.4f, \"open_seconds\": %.4f, "
                   "\"samples\": %" PRIu64 ", \"samples_per_s\": %.1f, \"bytes_per_s\": %.1f, \"bytes_read\": %" PRIu64
                   ", \"requests\": ",
                   i ? "," : "", r->fmt, r->fs, r->mode, r->seconds, r->open_seconds, r->samples,
                   r->seconds > 0 ? (double)r->samples / r->seconds : 0, r->seconds > 0 ? (double)r->sbytes / r->seconds : 0,
                   r->bytes);
            if (!strcmp(r->fs, "slowfs")) printf("%" PRIu64, r->requests);
            else printf("null");
            if (is_baseline(r)) printf(", \"quality\": null");
            else printf(", \"quality\": %.4f", r->quality);
            printf(", \"ok\": %s}", r->failed ? "false" : "true");
        }
        printf("\n  ]\n}\n");
        return;
    }
    printf("# %" PRIu64 " rows x %" PRIu64 " B in %d shards per format, cold, window %u groups, slowfs %ld us/request\n",
           rows, row, NSHARDS, window, delay);
    printf("%-10s %-6s %-16s %9s %12s %10s %8s %9s %7s\n", "format", "fs", "mode", "seconds", "samples/s", "MiB/s",
           "vs seq", "requests", "quality");
    for (int i = 0; i < nres; i++) {
        const struct fres *r = &res[i], *seq = seq_of(res, nres, r);
        char req[32] = "-";
        if (!strcmp(r->fs, "slowfs")) snprintf(req, sizeof req, "%" PRIu64, r->requests);
        double rate = r->seconds > 0 ? (double)r->samples / r->seconds : 0, srate = seq->seconds > 0 ? (double)seq->samples / seq->seconds : 0;
        char q[16] = "-";
        if (!is_baseline(r)) snprintf(q, sizeof q, "%.3f", r->quality);
        printf("%-10s %-6s %-16s %9.3f %12.0f %10.1f %7.2fx %9s %7s%s\n", r->fmt, r->fs, r->mode, r->seconds, rate,
               r->seconds > 0 ? (double)r->sbytes / r->seconds / 1048576.0 : 0, srate > 0 ? rate / srate : 0, req, q,
               r->failed ? "  FAILED" : "");
    }
}

/* --svg: samples per second, one group of bars per format and storage, one
 * bar per mode. */
static int draw_formats_svg(const char *path, const struct fres *res, int n, uint64_t rows, uint64_t row, long delay) {
    static char catbuf[NFMT * 2][40];
    const char *cat[NFMT * 2];
    double v[NFMT * 2 * NFMODES];
    size_t nc = 0;
    for (int i = 0; i < n; i++) {
        size_t k = 0;
        char name[40];
        snprintf(name, sizeof name, "%s, %s", res[i].fmt, res[i].fs);
        while (k < nc && strcmp(cat[k], name)) k++;
        if (k == nc && nc < NFMT * 2) {
            snprintf(catbuf[nc], sizeof catbuf[nc], "%s", name);
            cat[nc] = catbuf[nc];
            for (int m = 0; m < NFMODES; m++) v[nc * NFMODES + (size_t)m] = -1;
            nc++;
        }
        for (int m = 0; m < NFMODES && k < nc; m++)
            if (!strcmp(res[i].mode, FMODES[m]) && !res[i].failed && res[i].seconds > 0)
                v[k * NFMODES + (size_t)m] = (double)res[i].samples / res[i].seconds;
    }
    char title[256], note[256];
    snprintf(title, sizeof title, "pagein bench shuffle --formats: samples/s, %" PRIu64 " rows of %" PRIu64 " B, cold",
             rows, row);
    snprintf(note, sizeof note, "slowfs: %ld us a request; torch-dataloader: one pread a sample; mmap-random: arrow rows "
             "through a mapping", delay);
    struct svg_bars sb = {.title = title, .unit = "samples/s", .fmt = "%.0f", .ncat = nc, .nser = NFMODES, .cat = cat,
                          .ser = FMODES, .v = v, .note = note, .log_y = 1};
    int rc = nc ? svg_bar_chart(path, &sb) : -EINVAL;
    if (rc < 0) cli_error("bench shuffle", 0, "cannot write %s: %s", path, nc ? strerror(-rc) : "no figure measured");
    return rc;
}

/* Removes the shards bench_formats wrote into its own directory. */
static void remove_formats(const int *want, char (*paths)[NSHARDS][PATH_MAX], char (*sub)[PATH_MAX], const char *absdir) {
    for (int f = 0; f < NFMT; f++) {
        if (!want[f]) continue;
        for (int s = 0; s < NSHARDS; s++) {
            char c[PATH_MAX + 16];
            unlink(paths[f][s]);
            snprintf(c, sizeof c, "%.4000s.pagein-idx", paths[f][s]);
            unlink(c);
        }
        char ix[PATH_MAX + 16];
        snprintf(ix, sizeof ix, "%.4000s/index.json", sub[f]);
        unlink(ix);
        snprintf(ix, sizeof ix, "%.4000s/layout.pagein", sub[f]);
        unlink(ix);
        rmdir(sub[f]);
    }
    rmdir(absdir);
}

/* What one storage's runs share. */
struct fctx {
    uint64_t rows, row, seed, mmap_rows;
    unsigned window, rounds;
    int fsi, json;
    const char *mnt;
    struct torch_base tb;
};

/* One round of mode m of format f: into cur. */
static int run_fmode(const struct fctx *c, int f, int m, const char *spec, char paths[][PATH_MAX],
                     char via[][PATH_MAX], uint64_t *ids, struct fres *cur) {
    struct fmt_cold cold = {paths, via, c->fsi == 1 ? c->mnt : NULL, 0, 0};
    char (*files)[PATH_MAX] = c->fsi ? via : paths;
    int rc = 0;
    if (m == 0) {
        size_t nids = 0;
        fmt_cold(&cold);
        double t0 = cli_now();
        rc = run_sequential(files, ids, &nids);
        cur->seconds = cli_now() - t0;
        cur->samples = c->rows;
        for (int s = 0; s < NSHARDS; s++) {
            struct stat st;
            if (stat(paths[s], &st) == 0) cur->sbytes += (uint64_t)st.st_size;
        }
        cur->bytes = cur->sbytes;
    } else if (m == FM_TORCH) {
        fmt_cold(&cold);
        rc = run_torch(&c->tb, FMT_NAMES[f], spec, c->row, c->seed, paths, via, c->fsi == 1, cur);
    } else if (m == FM_MMAP) {
        fmt_cold(&cold);
        rc = run_mmap_random(files, c->rows, c->seed, c->mmap_rows < c->rows ? c->mmap_rows : c->rows, cur);
    } else
        rc = fmt_run(spec, f, c->row, m - 1, c->window, c->seed, cur, ids, c->rows, &cold);
    if (c->fsi == 1) {
        uint64_t q1 = 0, b1 = 0;
        slowfs_counters(c->mnt, &q1, &b1);
        cur->requests = q1 - cold.q0;
    }
    return rc;
}

/* Every mode of format f on one storage, each round; the fastest round of
 * each mode appended to res. */
static int run_format(const struct fctx *c, int f, const char *spec, char paths[][PATH_MAX], char via[][PATH_MAX],
                      uint64_t *ids, struct fres *res, int *nres) {
    int status = EXIT_OK;
    for (int m = 0; m < NFMODES; m++) {
        if (m == FM_MMAP && f != F_ARROW) continue; /* the records bench has mmap-shuffled */
        struct fres best = {0};
        for (unsigned round = 0; round < c->rounds; round++) {
            struct fres cur = {.fmt = FMT_NAMES[f], .fs = c->fsi ? "slowfs" : "local", .mode = FMODES[m]};
            int rc = run_fmode(c, f, m, spec, paths, via, ids, &cur);
            if (rc == 1) {
                if (!c->json) fprintf(stderr, "  %-10s %s: skipped (torch or bench/shuffle_torch.py missing)\n", cur.fmt, cur.mode);
                best = cur;
                break;
            }
            uint64_t want = m == FM_MMAP ? cur.samples : c->rows;
            if (rc < 0 || cur.samples != want) {
                cli_error("bench shuffle", rc, "%s %s on %s failed (%" PRIu64 " of %" PRIu64 " samples)", cur.fmt,
                          cur.mode, cur.fs, cur.samples, want);
                cur.failed = 1;
                status = EXIT_INVALID;
            }
            if (!c->json)
                fprintf(stderr, "  round %u %-10s %-16s %-6s %8.3f s\n", round + 1, cur.fmt, cur.mode, cur.fs, cur.seconds);
            if (round == 0 || cur.failed || (!best.failed && cur.seconds < best.seconds)) best = cur;
        }
        if (!best.skipped) res[(*nres)++] = best;
    }
    return status;
}

/* Mounts slowfs over absdir (fsi 1) and runs every wanted format. */
static int run_storage(struct fctx *c, const int *want, char (*paths)[NSHARDS][PATH_MAX], char (*sub)[PATH_MAX],
                       const char *absdir, long delay, long ra, const char *slowfs_bin, uint64_t *ids,
                       struct fres *res, int *nres) {
    static char via[NSHARDS][PATH_MAX];
    char mnt[PATH_MAX + 16] = "";
    pid_t pid = -1;
    int mh = -1, status = EXIT_OK;
    if (c->fsi == 1) {
        if (access(slowfs_bin, X_OK) != 0) {
            cli_error("bench shuffle", 0, "--slowfs: %s not found", slowfs_bin);
            return EXIT_USAGE;
        }
        struct opts so = {.delay_us = delay, .ra_kb = ra, .slowfs_bin = slowfs_bin};
        snprintf(mnt, sizeof mnt, "%s.mnt", absdir);
        mkdir(mnt, 0755);
        mh = cli_cleanup_dir(mnt);
        if ((pid = slowfs_start(&so, absdir, mnt)) < 0) {
            cli_error("bench shuffle", 0, "slowfs did not mount %s", mnt);
            rmdir(mnt);
            cli_cleanup_forget(mh);
            return EXIT_USAGE;
        }
        c->mnt = mnt;
    }
    for (int f = 0; f < NFMT; f++) {
        if (!want[f]) continue;
        char spec[PATH_MAX + 64];
        if (c->fsi == 1) {
            snprintf(spec, sizeof spec, "%.3000s/%s", mnt, FMT_NAMES[f]);
            for (int s = 0; s < NSHARDS; s++)
                snprintf(via[s], PATH_MAX, "%.3000s/%s/%.200s", mnt, FMT_NAMES[f], strrchr(paths[f][s], '/') + 1);
        } else
            snprintf(spec, sizeof spec, "%s", sub[f]);
        int st = run_format(c, f, spec, paths[f], via, ids, res, nres);
        if (st != EXIT_OK) status = st;
    }
    if (c->fsi == 1) {
        slowfs_stop(pid, mnt);
        rmdir(mnt);
        cli_cleanup_forget(mh);
    }
    return status;
}

static int bench_formats(int argc, char **argv) {
    uint64_t size = 256ull << 20, row = 32 << 10, seed = 1234, mmap_rows = 1000;
    const char *dir = NULL, *slowfs_bin = NULL, *svg = NULL;
    int json = 0, local = 1, slow = 0, write_only = 0, want[NFMT] = {1, 1, 1, 1, 1};
    unsigned window = 8, rounds = 1, workers = 1;
    long delay = 1000, ra = 4;
    static char self[PATH_MAX], sbin[PATH_MAX + 16], tscript[PATH_MAX + 64];
    bench_tool_dir(self, sizeof self);
    snprintf(sbin, sizeof sbin, "%s/slowfs", self);
    snprintf(tscript, sizeof tscript, "%s/../bench/shuffle_torch.py", self);
    slowfs_bin = sbin;
    struct torch_base tb = {tscript, access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3", 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--formats") && v && v[0] != '-') {
            for (int k = 0; k < NFMT; k++) want[k] = 0;
            char *l = strdup(v);
            for (char *t = strtok(l, ","); t; t = strtok(NULL, ",")) {
                int found = 0;
                for (int k = 0; k < NFMT; k++)
                    if (!strcmp(t, FMT_NAMES[k])) want[k] = found = 1;
                bad |= !found;
            }
            free(l);
            i++;
        } else if (!strcmp(a, "--formats")) {
        } else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--write-only")) write_only = 1;
        else if (!strcmp(a, "--slowfs")) slow = 1;
        else if (!strcmp(a, "--slowfs-only")) slow = 1, local = 0;
        else if (!v) bad = 1;
        else if (!strcmp(a, "--dir")) dir = v, i++;
        else if (!strcmp(a, "--svg")) svg = v, i++;
        else if (!strcmp(a, "--size")) bad = cli_parse_size(v, &size) < 0, i++;
        else if (!strcmp(a, "--row")) bad = cli_parse_size(v, &row) < 0 || row < 16 || row > (64u << 20), i++;
        else if (!strcmp(a, "--window")) bad = parse_u(v, &window) < 0, i++;
        else if (!strcmp(a, "--rounds")) bad = parse_u(v, &rounds) < 0 || !rounds, i++;
        else if (!strcmp(a, "--loader-workers")) bad = parse_u(v, &workers) < 0, tb.workers = workers, i++;
        else if (!strcmp(a, "--torch-script")) tb.script = v, i++;
        else if (!strcmp(a, "--python")) tb.python = v, i++;
        else if (!strcmp(a, "--mmap-rows")) mmap_rows = strtoull(v, NULL, 0), bad = !mmap_rows, i++;
        else if (!strcmp(a, "--delay-us")) delay = atol(v), i++;
        else if (!strcmp(a, "--slowfs-ra-kb")) ra = atol(v), i++;
        else if (!strcmp(a, "--slowfs-bin")) slowfs_bin = v, i++;
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 0), i++;
        else bad = 1;
        if (bad) {
            cli_error("bench shuffle", 0, "bad argument '%s%s%s' (see --help)", a, v ? " " : "", v ? v : "");
            return EXIT_USAGE;
        }
    }
    uint64_t rows = size / row / NSHARDS * NSHARDS;
    if (rows < NSHARDS * 3) {
        cli_error("bench shuffle", 0, "--size must hold at least %d rows", NSHARDS * 3);
        return EXIT_USAGE;
    }
    char tmpdir[] = "/var/tmp/pagein-formats-XXXXXX", absdir[PATH_MAX];
    int own = !dir;
    if (own) {
        if (!mkdtemp(tmpdir)) return EXIT_USAGE;
        dir = tmpdir;
        cli_cleanup_dir(tmpdir);
    } else
        mkdir(dir, 0755);
    if (!realpath(dir, absdir)) return EXIT_USAGE;
    static char paths[NFMT][NSHARDS][PATH_MAX];
    char sub[NFMT][PATH_MAX];
    for (int f = 0; f < NFMT; f++) {
        snprintf(sub[f], PATH_MAX, "%.3000s/%s", absdir, FMT_NAMES[f]);
        if (!want[f]) continue;
        int rc = write_format(f, sub[f], rows, row, paths[f]);
        if (rc < 0) {
            cli_error("bench shuffle", rc, "cannot write %s shards under %s", FMT_NAMES[f], sub[f]);
            return EXIT_USAGE;
        }
        /* the first open builds what a format caches (the tar index) */
        pagein_dataset_opts dop = PAGEIN_DATASET_OPTS_INIT;
        if (f == 0) dop.record_bytes = row;
        pagein_dataset *d = NULL;
        if (pagein_dataset_open(&d, sub[f], &dop) == 0) pagein_dataset_close(d);
    }
    if (write_only) { /* the shards stay in --dir (bench/formats_http.sh serves them) */
        if (!json) printf("%" PRIu64 " rows of %" PRIu64 " bytes per format under %s\n", rows, row, absdir);
        return EXIT_OK;
    }
    uint64_t *ids = malloc(rows * sizeof *ids);
    struct fres *res = calloc((size_t)NFMT * NFMODES * 2, sizeof *res);
    if (!ids || !res) return EXIT_USAGE;
    int nres = 0, status = EXIT_OK;
    for (int fsi = 0; fsi < 2 && status != EXIT_USAGE; fsi++) {
        if ((fsi == 0 && !local) || (fsi == 1 && !slow)) continue;
        struct fctx c = {rows, row, seed, mmap_rows, window, rounds, fsi, json, NULL, tb};
        int st = run_storage(&c, want, paths, sub, absdir, delay, ra, slowfs_bin, ids, res, &nres);
        if (st != EXIT_OK) status = st;
    }
    print_formats(res, nres, json, rows, row, window, delay, rounds);
    if (svg && draw_formats_svg(svg, res, nres, rows, row, delay) < 0) status = EXIT_USAGE;
    free(ids);
    free(res);
    if (own) remove_formats(want, paths, sub, absdir);
    return status;
}
