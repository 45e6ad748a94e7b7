/* bench_load.c - the program behind `pagein bench load MODEL` (= `pagein
 * bench-load`; cli/cmd_bench_load.c runs it with the same arguments): every
 * load strategy, cold and warm, against
 * one-thread read() and read-whole-file baselines, a layer-walking pipeline
 * with and without prefetch, and fio's device limit, in one run.
 *
 * Each measurement runs in a forked child so that peak RSS (VmHWM, reset
 * through /proc/self/clear_refs), faults (getrusage) and storage bytes
 * (/proc/self/io) belong to that measurement alone. Cold runs evict every
 * file with posix_fadvise(DONTNEED) first, with nothing mapped in the
 * parent. Each figure is the median of --runs runs. */
#include "cli.h"
#include "svg.h"
#include "trace.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_FILES 4096
#define MAX_RUNS 50

enum kind { K_STRATEGY, K_READ1M, K_READALL };

struct mode {
    const char *name;
    enum kind kind;
    pagein_strategy s;
};

/* The rows: every strategy of the library's table (pagein_strategy_name),
 * auto last as it runs one of the others, then the two baselines, which
 * are this benchmark's own and no strategy. */
#define MAX_MODES 32
static struct mode modes[MAX_MODES];
static size_t NMODES;

static void build_modes(void) {
    if (NMODES) return;
    size_t n = pagein_strategy_count();
    for (size_t s = 0; s < n && NMODES < MAX_MODES - 3; s++)
        if ((pagein_strategy)s != PAGEIN_STRATEGY_AUTO)
            modes[NMODES++] = (struct mode){pagein_strategy_name((pagein_strategy)s), K_STRATEGY, (pagein_strategy)s};
    modes[NMODES++] = (struct mode){pagein_strategy_name(PAGEIN_STRATEGY_AUTO), K_STRATEGY, PAGEIN_STRATEGY_AUTO};
    modes[NMODES++] = (struct mode){"read1m", K_READ1M, 0};
    modes[NMODES++] = (struct mode){"readall", K_READALL, 0};
}

/* The row of a strategy (kind K_STRATEGY) or a baseline; NMODES if none. */
static size_t mode_of(enum kind kind, pagein_strategy s) {
    for (size_t k = 0; k < NMODES; k++)
        if (modes[k].kind == kind && (kind != K_STRATEGY || modes[k].s == s)) return k;
    return NMODES;
}

struct result {
    int ok;
    double open_s, first_s, all_s; /* < 0: not applicable */
    double peak_rss, majflt, minflt, read_bytes;
    double first_output_s, total_s;
    char err[256];
    struct trace tr;  /* the access trace (trace.h) */
    char chosen[16];  /* the strategy that ran (auto's choice) */
};

struct bench {
    const char *model;
    char *files[MAX_FILES];
    uint64_t sizes[MAX_FILES];
    size_t nfiles;
    uint64_t model_bytes;
    int32_t layers;
    unsigned threads;
    uint64_t chunk;
    unsigned ahead;
    int runs;
    char slowfs_stats[4200]; /* the model's slowfs mount's counters, "" if not on slowfs */
};

/* ---- process facts ------------------------------------------------------ */

static double now(void) { return cli_now(); }

static double io_read_bytes(void) {
    FILE *f = fopen("/proc/self/io", "r");
    if (!f) return -1;
    char line[256];
    double v = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "read_bytes:", 11) == 0) v = atof(line + 11);
    fclose(f);
    return v;
}

static void evict(struct bench *b) { cli_files_evict(b->files, b->nfiles); }

static void warm(struct bench *b) { cli_files_warm(b->files, b->nfiles); }

/* ---- touching and computing --------------------------------------------- */

static volatile uint64_t sink;

static void touch(const pagein_tensor *t) {
    const volatile uint8_t *p = t->data;
    uint64_t s = 0;
    for (uint64_t o = 0; o < t->nbytes; o += 4096) s += p[o];
    if (t->nbytes) s += p[t->nbytes - 1];
    sink += s;
}

static float bf16f(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static float f16f(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
    if (e == 0) {
        float f = (float)m * (1.0f / 16777216.0f);
        return s ? -f : f;
    }
    if (e == 31) x = s | 0x7f800000u | (m << 13);
    else x = s | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static float *xbuf;
static size_t xcap;

/* One matrix-vector product y = W x (x all ones / cols), touching every byte
 * of W the way decoding does. Other tensors are summed. */
static void matvec(const pagein_tensor *t) {
    if (t->ndim != 2 || !t->shape[0] || !t->shape[1]) {
        touch(t);
        return;
    }
    uint64_t rows = t->shape[0], cols = t->shape[1];
    if (cols > xcap) {
        free(xbuf);
        xbuf = malloc(cols * sizeof *xbuf);
        xcap = xbuf ? cols : 0;
        if (!xbuf) return;
        for (uint64_t c = 0; c < cols; c++) xbuf[c] = 1.0f / (float)cols;
    }
    float acc = 0;
    if (t->dtype == PAGEIN_DTYPE_BF16) {
        /* eight independent partial sums: SIMD-friendly, as a real kernel */
        const uint16_t *w = t->data;
        for (uint64_t r = 0; r < rows; r++) {
            const uint16_t *row = w + r * cols;
            float p[8] = {0};
            uint64_t c = 0;
            for (; c + 8 <= cols; c += 8)
                for (int k = 0; k < 8; k++) p[k] += bf16f(row[c + k]) * xbuf[c + k];
            float y = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
            for (; c < cols; c++) y += bf16f(row[c]) * xbuf[c];
            acc += y;
        }
    } else if (t->dtype == PAGEIN_DTYPE_F16) {
        const uint16_t *w = t->data;
        for (uint64_t r = 0; r < rows; r++) {
            float y = 0;
            for (uint64_t c = 0; c < cols; c++) y += f16f(w[r * cols + c]) * xbuf[c];
            acc += y;
        }
    } else if (t->dtype == PAGEIN_DTYPE_F32 && t->nbytes == rows * cols * 4) {
        const float *w = t->data;
        for (uint64_t r = 0; r < rows; r++) {
            float y = 0;
            for (uint64_t c = 0; c < cols; c++) y += w[r * cols + c] * xbuf[c];
            acc += y;
        }
    } else {
        touch(t);
        return;
    }
    sink += (uint64_t)(acc != acc);
}

/* Embedding lookup: only one row is read (token id 1). */
static void lookup(const pagein_tensor *t) {
    if (t->ndim != 2 || !t->shape[0]) {
        touch(t);
        return;
    }
    uint64_t row = t->nbytes / t->shape[0];
    const volatile uint8_t *p = (const uint8_t *)t->data + (t->shape[0] > 1 ? row : 0);
    uint64_t s = 0;
    for (uint64_t o = 0; o < row; o += 64) s += p[o];
    sink += s;
}

/* ---- one measurement (in the child) ------------------------------------- */

static pagein_model_opts opts_for(struct bench *b, pagein_strategy s) {
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = s;
    o.threads = b->threads;
    o.chunk_bytes = b->chunk;
    o.prefetch_ahead = b->ahead;
    return o;
}

static int measure_strategy(struct bench *b, pagein_strategy s, struct result *r) {
    double t0 = now();
    pagein_model *m;
    pagein_model_opts o = opts_for(b, s);
    int rc = pagein_model_open(&m, b->model, &o);
    if (rc < 0) {
        snprintf(r->err, sizeof r->err, "%s: %s", pagein_strerror(rc), pagein_last_error_detail());
        return rc;
    }
    r->open_s = now() - t0;
    int32_t L = pagein_model_layer_count(m);
    for (int32_t l = -1; l <= L; l++) {
        if ((rc = pagein_layer_wait(m, l)) < 0) break;
        const pagein_tensor *const *lt;
        size_t n = pagein_model_layer_tensors(m, l, &lt);
        for (size_t i = 0; i < n; i++) touch(lt[i]);
        pagein_layer_done(m, l);
        if (l == (L > 0 ? 0 : -1)) r->first_s = now() - t0;
    }
    r->all_s = now() - t0;
    if (rc < 0) snprintf(r->err, sizeof r->err, "%s: %s", pagein_strerror(rc), pagein_last_error_detail());
    r->peak_rss = cli_status_bytes("VmHWM:");
    pagein_io_stats st;
    if (pagein_model_io_stats(m, &st) == 0) trace_from_engine(&st, &r->tr);
    snprintf(r->chosen, sizeof r->chosen, "%s", pagein_strategy_name(pagein_model_strategy(m, NULL)));
    pagein_model_close(m);
    return rc;
}

/* The filesystem's name for a path ("ext4", "tmpfs", "fuse.slowfs", "nfs4",
 * ...): the type of the mount with the longest mount point above it in
 * /proc/self/mountinfo; "" when unknown. */
static void fs_name(const char *path, char *out, size_t len) {
    out[0] = 0;
    char *real = realpath(path, NULL);
    FILE *f = real ? fopen("/proc/self/mountinfo", "re") : NULL;
    char line[4096];
    size_t best = 0;
    while (f && fgets(line, sizeof line, f)) {
        /* id parent maj:min root mountpoint options [optional...] - type source super */
        char *save = NULL, *tok = strtok_r(line, " ", &save);
        for (int i = 0; tok && i < 4; i++) tok = strtok_r(NULL, " ", &save);
        char *mp = tok;
        if (!mp) continue;
        while ((tok = strtok_r(NULL, " ", &save)) && strcmp(tok, "-") != 0) {}
        char *type = tok ? strtok_r(NULL, " ", &save) : NULL;
        if (!type) continue;
        char *d = mp; /* octal escapes (\040 for a space) */
        for (char *q = mp; *q;) {
            if (q[0] == '\\' && q[1] >= '0' && q[1] <= '3' && q[2] >= '0' && q[2] <= '7' && q[3] >= '0' && q[3] <= '7') {
                *d++ = (char)((q[1] - '0') * 64 + (q[2] - '0') * 8 + (q[3] - '0'));
                q += 4;
            } else {
                *d++ = *q++;
            }
        }
        *d = 0;
        size_t n = strlen(mp);
        int prefix = strcmp(mp, "/") == 0 || (strncmp(real, mp, n) == 0 && (real[n] == '/' || real[n] == 0));
        if (prefix && n >= best) {
            best = n;
            snprintf(out, len, "%s", type);
        }
    }
    if (f) fclose(f);
    free(real);
}

/* What each verdict checks, one line each. */
#define TARGETS                                                                                        \
    "  populate  cold >= 2.5x a one-thread 1 MiB read() loop (read1m) and >= 70% of fio's device limit\n" \
    "  RSS       mapping strategies: peak RSS <= 1.05x the model (no copy beside the page cache)\n"      \
    "  lazy      warm open + every tensor looked up in < 5 ms (an open parses headers only)\n"          \
    "  pipeline  prefetch: first output < 10% of a cold populate; total <= 1.15x max(compute, populate)\n" \
    "  read      warm >= 0.5x read1m warm (the first load in a process; with --reload also the reload);\n"    \
    "            cold <= 1.2x populate cold\n"

static int measure_read1m(struct bench *b, struct result *r) {
    static char buf[1 << 20];
    double t0 = now();
    for (size_t i = 0; i < b->nfiles; i++) {
        int fd = open(b->files[i], O_RDONLY);
        if (fd < 0) return -errno;
        ssize_t n;
        while ((n = read(fd, buf, sizeof buf)) > 0) sink += (uint8_t)buf[0];
        close(fd);
    }
    r->all_s = now() - t0;
    r->open_s = r->first_s = -1;
    r->peak_rss = cli_status_bytes("VmHWM:");
    return 0;
}

static int measure_readall(struct bench *b, struct result *r) {
    double t0 = now();
    uint8_t *bufs[MAX_FILES] = {0};
    pagein_file *fs[MAX_FILES] = {0};
    int rc = 0;
    for (size_t i = 0; i < b->nfiles && rc == 0; i++) {
        int fd = open(b->files[i], O_RDONLY);
        if (fd < 0) {
            rc = -errno;
            break;
        }
        bufs[i] = malloc(b->sizes[i] ? b->sizes[i] : 1);
        uint64_t got = 0;
        while (bufs[i] && got < b->sizes[i]) {
            size_t want = b->sizes[i] - got > (1u << 30) ? (1u << 30) : (size_t)(b->sizes[i] - got);
            ssize_t n = read(fd, bufs[i] + got, want);
            if (n <= 0) break;
            got += (uint64_t)n;
        }
        close(fd);
        if (!bufs[i] || got != b->sizes[i]) rc = -EIO;
        else rc = pagein_open_memory(&fs[i], bufs[i], b->sizes[i], b->files[i], NULL);
    }
    r->all_s = r->open_s = r->first_s = now() - t0;
    r->peak_rss = cli_status_bytes("VmHWM:");
    for (size_t i = 0; i < b->nfiles; i++) {
        pagein_close(fs[i]);
        free(bufs[i]);
    }
    return rc;
}

/* Pipeline: walk the layers in order; one matvec per weight tensor; the
 * embeddings are a row lookup. first_output = end of layer 0. How the
 * consumer waits for its data (PIPE_WAIT_*, with prefetch): before each
 * tensor (pagein_tensor_wait: computing starts while the layer's last
 * tensors are still read) or before each layer (pagein_layer_wait). */
enum { PIPE_WAIT_NONE = 0, PIPE_WAIT_TENSOR = 1, PIPE_WAIT_LAYER = 2 };
static const char *const pipe_wait_name[] = {"none", "tensor", "layer"};

static int measure_pipeline(struct bench *b, pagein_strategy s, int flag, struct result *r) {
    int compute_only = flag & 1, wait = flag >> 1;
    pagein_model *m;
    pagein_model_opts o = opts_for(b, s);
    double t0 = now();
    int rc = pagein_model_open(&m, b->model, &o);
    if (rc < 0) {
        snprintf(r->err, sizeof r->err, "%s: %s", pagein_strerror(rc), pagein_last_error_detail());
        return rc;
    }
    if (compute_only) t0 = now(); /* data already resident */
    int prefetch = s == PAGEIN_STRATEGY_PREFETCH;
    if (!prefetch) wait = PIPE_WAIT_NONE;
    int32_t L = pagein_model_layer_count(m);
    for (int32_t l = -1; l <= L && rc == 0; l++) {
        const pagein_tensor *const *lt;
        size_t n = pagein_model_layer_tensors(m, l, &lt);
        if (l == -1) {
            for (size_t i = 0; i < n; i++) lookup(lt[i]);
            if (prefetch) pagein_layer_done(m, l);
            continue;
        }
        if (wait == PIPE_WAIT_LAYER && (rc = pagein_layer_wait(m, l)) < 0) break;
        for (size_t i = 0; i < n && rc == 0; i++)
            if (wait != PIPE_WAIT_TENSOR || (rc = pagein_tensor_wait(m, lt[i])) == 0) matvec(lt[i]);
        if (prefetch) pagein_layer_done(m, l);
        if (l == (L > 0 ? 0 : -1) || (L == 0 && l == 0)) r->first_output_s = now() - t0;
    }
    r->total_s = now() - t0;
    if (r->first_output_s <= 0) r->first_output_s = r->total_s;
    if (rc < 0) snprintf(r->err, sizeof r->err, "%s: %s", pagein_strerror(rc), pagein_last_error_detail());
    pagein_model_close(m);
    return rc;
}

/* One measurement with its process counters (in the child). */
static void child_measure(struct bench *b, int what, pagein_strategy s, int flag, struct result *r) {
    struct rusage u0, u1;
    getrusage(RUSAGE_SELF, &u0);
    double io0 = io_read_bytes();
    struct trace_snap sa, sb;
    trace_snap(b->slowfs_stats, &sa);
    double tm0 = now();
    int rc;
    if (what == 0) rc = measure_strategy(b, s, r);
    else if (what == 1) rc = measure_read1m(b, r);
    else if (what == 2) rc = measure_readall(b, r);
    else rc = measure_pipeline(b, s, flag, r);
    double tm1 = now();
    trace_snap(b->slowfs_stats, &sb);
    if (sa.ok && sb.ok) { /* slowfs saw every request: its view wins, the engine's choice stays */
        struct trace eng = r->tr;
        trace_from_slowfs(&sa, &sb, tm1 - tm0, &r->tr);
        trace_keep_engine(&r->tr, &eng);
    }
    getrusage(RUSAGE_SELF, &u1);
    r->majflt = (double)(u1.ru_majflt - u0.ru_majflt);
    r->minflt = (double)(u1.ru_minflt - u0.ru_minflt);
    r->read_bytes = io_read_bytes() - io0;
    r->ok = rc >= 0;
    if (rc < 0 && !r->err[0]) snprintf(r->err, sizeof r->err, "%s", pagein_strerror(rc));
}

/* Runs fn in a forked child; the child's struct result comes back over a
 * pipe. reload (not NULL): the child measures twice, the second time after
 * the first load was closed (cold: the files evicted again), and the
 * second figure goes to *reload: what a process that loads the same model
 * again pays (the library's memory reused), next to its first load. */
static struct result in_child(struct bench *b, int what, pagein_strategy s, int flag, int cold, struct result *reload) {
    struct result r[2];
    memset(r, 0, sizeof r);
    r[0].open_s = r[0].first_s = r[1].open_s = r[1].first_s = -1;
    int fds[2];
    size_t n = reload ? 2 : 1;
    pid_t pid = cli_child_start(fds, r[0].err, sizeof r[0].err);
    if (pid < 0) {
        if (reload) *reload = r[0];
        return r[0];
    }
    if (pid == 0) {
        child_measure(b, what, s, flag, &r[0]);
        if (reload && r[0].ok) {
            if (cold) evict(b);
            cli_reset_peak_rss();
            child_measure(b, what, s, flag, &r[1]);
        } else if (reload) {
            snprintf(r[1].err, sizeof r[1].err, "the first load failed");
        }
        ssize_t w = write(fds[1], r, n * sizeof r[0]);
        _exit(w == (ssize_t)(n * sizeof r[0]) ? 0 : 1);
    }
    close(fds[1]);
    int st = cli_child_result(fds[0], pid, r, n * sizeof r[0]);
    if (st) {
        memset(r, 0, sizeof r);
        snprintf(r[0].err, sizeof r[0].err, "measurement process died (status %d)", st);
        r[1] = r[0];
    }
    if (reload) *reload = r[1];
    return r[0];
}

/* ---- medians -------------------------------------------------------------- */

static int dcmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define MEDIAN_FIELD(out, arr, n, field)                                        \
    do {                                                                        \
        double v_[MAX_RUNS];                                                    \
        int k_ = 0;                                                             \
        for (int i_ = 0; i_ < (n); i_++)                                        \
            if ((arr)[i_].ok) v_[k_++] = (arr)[i_].field;                       \
        qsort(v_, (size_t)k_, sizeof v_[0], dcmp);                              \
        (out).field = k_ ? (k_ % 2 ? v_[k_ / 2] : (v_[k_ / 2 - 1] + v_[k_ / 2]) / 2) : -1; \
    } while (0)

static struct result median(const struct result *rs, int n) {
    struct result m;
    memset(&m, 0, sizeof m);
    int ok = 0;
    for (int i = 0; i < n; i++) {
        ok += rs[i].ok;
        if (!rs[i].ok && !m.err[0]) memcpy(m.err, rs[i].err, sizeof m.err);
    }
    m.ok = ok > 0;
    for (int i = 0; i < n; i++) /* the trace and choice of the last good run */
        if (rs[i].ok) {
            m.tr = rs[i].tr;
            memcpy(m.chosen, rs[i].chosen, sizeof m.chosen);
        }
    MEDIAN_FIELD(m, rs, n, open_s);
    MEDIAN_FIELD(m, rs, n, first_s);
    MEDIAN_FIELD(m, rs, n, all_s);
    MEDIAN_FIELD(m, rs, n, peak_rss);
    MEDIAN_FIELD(m, rs, n, majflt);
    MEDIAN_FIELD(m, rs, n, minflt);
    MEDIAN_FIELD(m, rs, n, read_bytes);
    MEDIAN_FIELD(m, rs, n, first_output_s);
    MEDIAN_FIELD(m, rs, n, total_s);
    return m;
}

/* ---- fio ------------------------------------------------------------------ */

static double fio_limit(struct bench *b, int quiet, char *how, size_t hlen) {
    size_t big;
    uint64_t size;
    if (cli_fio_target(b->files, b->sizes, b->nfiles, &big, &size) < 0) return -1;
    static const char *const engines[] = {"io_uring", "libaio", "psync"};
    for (size_t e = 0; e < 3; e++) {
        double v = cli_fio_read_bps(b->files[big], size, engines[e], "devlimit");
        if (v >= 0) {
            const char *base = strrchr(b->files[big], '/');
            snprintf(how, hlen, "fio --ioengine=%s, 1 MiB O_DIRECT reads at QD32 over %llu MiB of %.100s", engines[e],
                     (unsigned long long)(size >> 20), base ? base + 1 : b->files[big]);
            if (v > 0) return v / 1e9;
        }
        if (!quiet) fprintf(stderr, "pagein bench-load: fio with %s failed, trying the next engine\n", engines[e]);
    }
    return -1;
}

/* ---- output ---------------------------------------------------------------- */

static void jnum(FILE *o, const char *k, double v, int last) {
    if (v < 0 || isnan(v)) fprintf(o, "\"%s\": null%s", k, last ? "" : ", ");
    else fprintf(o, "\"%s\": %.6g%s", k, v, last ? "" : ", ");
}

static void fmt_s(char *buf, size_t n, double v) {
    if (v < 0) snprintf(buf, n, "-");
    else snprintf(buf, n, "%.3f", v);
}

static void usage(FILE *out) {
    build_modes();
    char names[512] = "", list[512] = "";
    size_t nl = 0, ll = 0;
    for (size_t k = 0; k < NMODES; k++) {
        if (modes[k].kind == K_STRATEGY && nl < sizeof names)
            nl += (size_t)snprintf(names + nl, sizeof names - nl, "%s%s", nl ? ", " : "", modes[k].name);
        if (ll < sizeof list) ll += (size_t)snprintf(list + ll, sizeof list - ll, "%s%s", ll ? "," : "", modes[k].name);
    }
    fputs("usage: pagein bench load MODEL [--json] [--runs N] [--only LIST] [--cache cold|warm|both]\n"
          "                          [--threads N] [--chunk SIZE] [--ahead N] [--no-pipeline] [--no-fio] [--reload] [-q]\n"
          "       (`pagein bench-load` is the same command)\n"
          "\n",
          out);
    fprintf(out, "Loads MODEL with every strategy (%s) and two\n", names);
    fputs("baselines (read1m: one thread reading 1 MiB read()s; readall: malloc the whole\n"
          "file, read it, parse it), each cold (evicted with posix_fadvise(DONTNEED) first)\n"
          "and warm, --runs times (default 3), and reports medians: time to open, to the\n"
          "first layer usable, to every tensor usable (each page touched), GB/s, peak RSS,\n"
          "faults and bytes read from storage. Each measurement runs in its own process.\n"
          "\n"
          "Pipeline (cold): walk the layers, one matrix-vector product per weight tensor\n"
          "(the embedding is a row lookup), with lazy faults, with prefetch (waiting per\n"
          "tensor, and per layer), and after a full populate; reports time to the first\n"
          "layer's output and in total, and the compute alone (warm, resident). Device\n"
          "limit: fio 1 MiB O_DIRECT reads at queue depth 32 on the largest file, when fio\n"
          "is installed.\n"
          "\n"
          "targets (the verdicts' MEETS / MISSES):\n" TARGETS "\n"
          "  --json          print one JSON object (schema in docs/LOADING.md)\n"
          "  --runs N        runs per figure (median), default 3\n",
          out);
    fprintf(out, "  --only LIST     comma-separated subset of %s\n", list);
    fputs("  --cache C       cold, warm or both (default both)\n"
          "  --threads N, --chunk SIZE, --ahead N   model options (default: library defaults)\n"
          "  --no-pipeline, --no-fio   skip those parts\n"
          "  --reload        each run's process loads twice, closing in between: the first load in the\n"
          "                  process and the reload (memory the library keeps is reused), both reported\n"
          "  -q              no progress on stderr\n"
          "  --svg FILE      also draw GB/s per strategy (the cold runs; the warm ones with --cache warm), with fio's\n"
          "                  device limit as a dashed line\n"
          "Environment: PAGEIN_POPULATE_METHOD=madvise|pread|readahead picks how populate pages in.\n"
          "Exit status: 0 ok, 1 a measurement failed, 2 usage or the model cannot be opened.\n",
          out);
}

static int in_list(const char *list, const char *name) {
    if (!list) return 1;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && strncmp(p, name, n) == 0) return 1;
        p += l + (e ? 1 : 0);
    }
    return 0;
}

static int warm_too(int have[][2]) {
    for (size_t k = 0; k < NMODES; k++)
        if (have[k][1]) return 1;
    return 0;
}

/* --svg: GB/s per strategy (the JSON's gbps), cold runs when there are any
 * (else warm), with fio's device limit as a dashed line. */
static int draw_svg(const char *path, const struct bench *b, struct result res[][2], int have[][2], double dev,
                    double gb) {
    const char *cat[MAX_MODES], *ser[2];
    double v[MAX_MODES * 2];
    int cols[2] = {0, 0};
    size_t nc = 0, ns = 0;
    for (size_t k = 0; k < NMODES; k++)
        for (int c = 0; c < 2; c++) cols[c] |= have[k][c];
    if (cols[0]) cols[1] = 0; /* cold against the device limit; warm (page-cache speed) would dwarf it */
    int ci[2];
    for (int c = 0; c < 2; c++)
        if (cols[c]) ci[ns] = c, ser[ns++] = c ? "warm" : "cold";
    for (size_t k = 0; k < NMODES; k++) {
        if (!have[k][0] && !have[k][1]) continue;
        for (size_t s = 0; s < ns; s++) {
            const struct result *x = &res[k][ci[s]];
            v[nc * ns + s] = have[k][ci[s]] && x->ok && x->all_s > 0 ? gb / x->all_s : -1;
        }
        cat[nc++] = modes[k].name;
    }
    char title[512], note[256], hb[32];
    const char *base = strrchr(b->model, '/');
    struct statfs sf; /* the storage, in the title: the figure travels without the table */
    unsigned long t = statfs(b->files[0], &sf) == 0 ? (unsigned long)sf.f_type : 0;
    char fsw[32];
    snprintf(fsw, sizeof fsw, "%s", t == 0xEF53 ? "ext4" : t == 0x58465342 ? "xfs" : t == 0x01021994 ? "tmpfs"
                                    : t == 0x65735546 ? "FUSE" : t == 0x6969 ? "NFS" : t == 0x9123683E ? "btrfs" : "");
    if (!fsw[0]) snprintf(fsw, sizeof fsw, "fs 0x%lx", t);
    snprintf(title, sizeof title, "pagein bench load: %.200s (%s, %s), GB/s to every tensor usable, median of %d",
             base ? base + 1 : b->model, cli_human_bytes(b->model_bytes, hb, sizeof hb), fsw, b->runs);
    snprintf(note, sizeof note, "%s%s",
             dev > 0 ? (cols[0] ? "dashed: device limit (fio, 1 MiB O_DIRECT, QD32); a cold bar above it was served "
                                  "from memory (page cache not dropped)"
                                : "dashed: device limit (fio, 1 MiB O_DIRECT, QD32); warm bars come from memory")
                     : "device limit: not measured (fio missing or --no-fio)",
             cols[0] && ns == 1 && warm_too(have) ? "; warm runs: in the table and the JSON" : "");
    struct svg_bars sb = {.title = title, .unit = "GB/s", .fmt = "%.2f", .ncat = nc, .nser = ns, .cat = cat,
                          .ser = ser, .v = v, .ref = dev > 0 ? dev : 0, .ref_label = "device limit",
                          .ref_key = "device_limit", .note = note};
    int rc = nc && ns ? svg_bar_chart(path, &sb) : -EINVAL;
    if (rc < 0) cli_error("bench-load", 0, "cannot write %s: %s", path, nc ? strerror(-rc) : "no figure measured");
    return rc;
}

/* ---- the command ------------------------------------------------------- */

struct lopts {
    int json, pipeline, fio, quiet, cold, warmc, reload;
    const char *only, *svg;
};

/* pipeline rows: lazy (page faults), prefetch with tensor waits (the
 * verdict's row), prefetch with layer waits, populate (load all first) */
static const pagein_strategy pst[4] = {PAGEIN_STRATEGY_LAZY, PAGEIN_STRATEGY_PREFETCH, PAGEIN_STRATEGY_PREFETCH,
                                       PAGEIN_STRATEGY_POPULATE};
static const int pwait[4] = {PIPE_WAIT_NONE, PIPE_WAIT_TENSOR, PIPE_WAIT_LAYER, PIPE_WAIT_NONE};

struct lreport {
    struct result res[MAX_MODES][2], pipe_res[4], compute;
    struct result rel[MAX_MODES][2]; /* --reload: the second load in the same process */
    int have[MAX_MODES][2];
    char plabel[4][40];
    double dev, warm_open, gb;
    char fio_how[192]; /* how the device limit was measured (engine, file, size) */
    pagein_strategy autos;
    char why[256], fsname[64];
    unsigned long fsmagic;
    struct utsname un;
    int failed, reload;
};

/* Parses the command line into b and o: -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, struct bench *b, struct lopts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(a)) {
            usage(stdout);
            return EXIT_OK;
        } else if (strcmp(a, "--json") == 0) o->json = 1;
        else if (strcmp(a, "--no-pipeline") == 0) o->pipeline = 0;
        else if (strcmp(a, "--no-fio") == 0) o->fio = 0;
        else if (strcmp(a, "-q") == 0) o->quiet = 1;
        else if (strcmp(a, "--reload") == 0) o->reload = 1;
        else if (strcmp(a, "--svg") == 0 && val) o->svg = val, i++;
        else if (strcmp(a, "--runs") == 0 && val) {
            b->runs = atoi(val), i++;
            if (b->runs < 1 || b->runs > MAX_RUNS) {
                cli_error("bench-load", 0, "--runs must be 1..%d", MAX_RUNS);
                return EXIT_USAGE;
            }
        } else if (strcmp(a, "--only") == 0 && val) o->only = val, i++;
        else if (strcmp(a, "--cache") == 0 && val) {
            o->cold = strcmp(val, "warm") != 0;
            o->warmc = strcmp(val, "cold") != 0;
            if (strcmp(val, "cold") && strcmp(val, "warm") && strcmp(val, "both")) {
                cli_error("bench-load", 0, "--cache must be cold, warm or both");
                return EXIT_USAGE;
            }
            i++;
        } else if (strcmp(a, "--threads") == 0 && val) b->threads = (unsigned)atoi(val), i++;
        else if (strcmp(a, "--ahead") == 0 && val) {
            /* any unsigned value: the library takes more than the layer
             * count as "all layers"; negatives, junk and values that do not
             * fit an unsigned int are refused instead of wrapping */
            char *end;
            errno = 0;
            unsigned long long v = val[0] == '-' ? 0 : strtoull(val, &end, 10);
            if (val[0] == '-' || !isdigit((unsigned char)val[0]) || *end || errno || v > UINT_MAX) {
                cli_error("bench-load", 0, "--ahead must be a number of layers from 0 to %u, not '%s'", UINT_MAX,
                          val);
                return EXIT_USAGE;
            }
            b->ahead = (unsigned)v;
            i++;
        }
        else if (strcmp(a, "--chunk") == 0 && val) {
            if (cli_parse_size(val, &b->chunk) != 0) {
                cli_error("bench-load", 0, "bad --chunk '%s'", val);
                return EXIT_USAGE;
            }
            i++;
        } else if (a[0] == '-') {
            cli_error("bench-load", 0, "unknown option '%s'", a);
            usage(stderr);
            return EXIT_USAGE;
        } else if (!b->model) b->model = a;
        else {
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (!b->model) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!b->model) {
        usage(stderr);
        return EXIT_USAGE;
    }
    return -1;
}

/* The model's files and facts from a lazy open that reads headers only,
 * auto's choice, and the warm lazy open + every lookup (in this process: a
 * fresh child pays copy-on-write faults that are not the library's).
 * -1 to go on, else the exit code. */
static int model_facts(struct bench *b, struct lreport *rep) {
    pagein_model *m;
    pagein_model_opts lo = PAGEIN_MODEL_OPTS_INIT;
    lo.strategy = PAGEIN_STRATEGY_LAZY;
    int rc = pagein_model_open(&m, b->model, &lo);
    if (rc < 0) {
        cli_error("bench-load", rc, "cannot open %s", b->model);
        return EXIT_USAGE;
    }
    b->nfiles = pagein_model_file_count(m);
    if (b->nfiles > MAX_FILES) {
        pagein_model_close(m);
        cli_error("bench-load", 0, "%s has more than %d files", b->model, MAX_FILES);
        return EXIT_USAGE;
    }
    for (size_t i = 0; i < b->nfiles; i++) {
        pagein_file_info fi;
        pagein_file_get_info(pagein_model_file(m, i), &fi);
        b->files[i] = strdup(fi.path);
        b->sizes[i] = fi.file_size;
        b->model_bytes += fi.file_size;
    }
    b->layers = pagein_model_layer_count(m);
    trace_slowfs_stats_path(b->files[0], b->slowfs_stats, sizeof b->slowfs_stats);
    rep->autos = pagein_model_auto_plan(m, NULL, rep->why, sizeof rep->why);
    pagein_model_close(m);

    /* warm lazy open with every tensor looked up by name, in this process
     * (a fresh child pays copy-on-write faults that are not the library's) */
    double lazy_open[7];
    for (int r = 0; r < 7; r++) {
        double t0 = now();
        if (pagein_model_open(&m, b->model, &lo) < 0) {
            lazy_open[r] = -1;
            continue;
        }
        size_t nt = pagein_model_tensor_count(m);
        for (size_t i = 0; i < nt; i++)
            if (!pagein_model_tensor_get(m, pagein_model_tensor_at(m, i)->name)) sink++;
        lazy_open[r] = now() - t0;
        pagein_model_close(m);
    }
    qsort(lazy_open, 7, sizeof lazy_open[0], dcmp);
    rep->warm_open = lazy_open[3];

    return -1;
}

/* Every strategy and baseline cold then warm, the pipeline rows and the
 * device limit, each a median of b->runs runs in children. */
static void measure(struct bench *b, const struct lopts *o, struct lreport *rep) {
    int progress = !o->quiet && isatty(2); /* progress lines only on a terminal */
    struct result runs[MAX_RUNS], rruns[MAX_RUNS];
    /* cold first (each run evicts), then warm */
    for (int c = 0; c < 2; c++) {
        if ((c == 0 && !o->cold) || (c == 1 && !o->warmc)) continue;
        for (size_t k = 0; k < NMODES; k++) {
            if (!in_list(o->only, modes[k].name)) continue;
            for (int r = 0; r < b->runs; r++) {
                if (progress) fprintf(stderr, "\rbench-load: %s %s run %d/%d   ", modes[k].name, c ? "warm" : "cold", r + 1, b->runs);
                if (c == 0) evict(b);
                else warm(b);
                int what = modes[k].kind == K_STRATEGY ? 0 : modes[k].kind == K_READ1M ? 1 : 2;
                runs[r] = in_child(b, what, modes[k].s, 0, c == 0, o->reload ? &rruns[r] : NULL);
            }
            rep->res[k][c] = median(runs, b->runs);
            rep->have[k][c] = 1;
            if (!rep->res[k][c].ok) rep->failed = 1;
            if (o->reload) {
                rep->rel[k][c] = median(rruns, b->runs);
                if (!rep->rel[k][c].ok) rep->failed = 1;
            }
        }
    }
    /* the pipeline rows (pst, pwait) */
    if (o->pipeline) {
        for (int k = 0; k < 4; k++) {
            for (int r = 0; r < b->runs; r++) {
                if (progress) fprintf(stderr, "\rbench-load: pipeline %s run %d/%d   ", rep->plabel[k], r + 1, b->runs);
                evict(b);
                runs[r] = in_child(b, 3, pst[k], pwait[k] << 1, 1, NULL);
            }
            rep->pipe_res[k] = median(runs, b->runs);
            if (!rep->pipe_res[k].ok) rep->failed = 1;
        }
        for (int r = 0; r < b->runs; r++) {
            if (progress) fprintf(stderr, "\rbench-load: compute only run %d/%d   ", r + 1, b->runs);
            warm(b);
            runs[r] = in_child(b, 3, PAGEIN_STRATEGY_POPULATE, 1, 0, NULL);
        }
        rep->compute = median(runs, b->runs);
        if (!rep->compute.ok) rep->failed = 1;
    }
    const char *given = getenv("PAGEIN_BENCH_DEVICE_LIMIT"); /* GB/s instead of fio (tests, a known device) */
    if (given && atof(given) > 0) {
        rep->dev = atof(given);
        snprintf(rep->fio_how, sizeof rep->fio_how, "given by PAGEIN_BENCH_DEVICE_LIMIT, not measured");
    } else if (o->fio) {
        if (progress) fprintf(stderr, "\rbench-load: fio device limit            ");
        rep->dev = fio_limit(b, o->quiet, rep->fio_how, sizeof rep->fio_how);
    }
    if (progress) fprintf(stderr, "\r\033[K");
}

/* One entry of the JSON's "runs". */
static void json_run(FILE *o, const char *name, int c, const struct result *x, const char *load, double gb,
                     int *first) {
    fprintf(o, "%s\n  {\"strategy\": \"%s\", \"cache\": \"%s\", \"load_in_process\": \"%s\", \"ok\": %s, ",
            *first ? "" : ",", name, c ? "warm" : "cold", load, x->ok ? "true" : "false");
    *first = 0;
    jnum(o, "open_s", x->open_s, 0);
    jnum(o, "first_layer_s", x->first_s, 0);
    jnum(o, "all_s", x->all_s, 0);
    jnum(o, "gbps", x->all_s > 0 ? gb / x->all_s : -1, 0);
    jnum(o, "peak_rss_bytes", x->peak_rss, 0);
    jnum(o, "major_faults", x->majflt, 0);
    jnum(o, "minor_faults", x->minflt, 0);
    jnum(o, "read_bytes", x->read_bytes, 0);
    if (x->chosen[0]) fprintf(o, "\"chosen\": \"%s\", ", x->chosen);
    trace_json(o, &x->tr);
    if (!x->ok) fprintf(o, ", ");
    if (!x->ok) {
        fprintf(o, "\"error\": ");
        cli_json_str(o, x->err, strlen(x->err));
    }
    fprintf(o, "}");
}

static void print_json(const struct bench *b, const struct lreport *rep, int pipeline) {
    FILE *o = stdout;
    fprintf(o, "{\"model\": ");
    cli_json_str(o, b->model, strlen(b->model));
    fprintf(o, ", \"model_bytes\": %llu, \"files\": %zu, \"layers\": %d, \"runs_per_figure\": %d, ",
            (unsigned long long)b->model_bytes, b->nfiles, b->layers, b->runs);
    fprintf(o, "\"kernel\": ");
    cli_json_str(o, rep->un.release, strlen(rep->un.release));
    fprintf(o, ", \"fs\": ");
    cli_json_str(o, rep->fsname, strlen(rep->fsname));
    fprintf(o, ", \"fs_magic\": \"0x%lx\", \"auto_choice\": \"%s\", \"auto_why\": ", rep->fsmagic,
            pagein_strategy_name(rep->autos));
    cli_json_str(o, rep->why, strlen(rep->why));
    fprintf(o, ",\n \"runs\": [");
    int first = 1;
    for (int c = 0; c < 2; c++)
        for (size_t k = 0; k < NMODES; k++) {
            if (!rep->have[k][c]) continue;
            json_run(o, modes[k].name, c, &rep->res[k][c], "first", rep->gb, &first);
            if (rep->reload) json_run(o, modes[k].name, c, &rep->rel[k][c], "reload", rep->gb, &first);
        }
    fprintf(o, "\n ],\n \"pipeline\": [");
    if (pipeline)
        for (int k = 0; k < 4; k++) {
            fprintf(o, "%s\n  {\"strategy\": \"%s\", \"wait\": \"%s\", \"cache\": \"cold\", ", k ? "," : "",
                    pagein_strategy_name(pst[k]), pipe_wait_name[pwait[k]]);
            jnum(o, "first_output_s", rep->pipe_res[k].ok ? rep->pipe_res[k].first_output_s : -1, 0);
            jnum(o, "total_s", rep->pipe_res[k].ok ? rep->pipe_res[k].total_s : -1, 0);
            jnum(o, "compute_only_s", rep->compute.ok ? rep->compute.total_s : -1, 1);
            fprintf(o, "}");
        }
    fprintf(o, "\n ],\n ");
    jnum(o, "warm_lazy_open_lookup_s", rep->warm_open, 0);
    jnum(o, "device_limit_gbps", rep->dev, 0);
    fprintf(o, "\"device_limit_how\": ");
    cli_json_str(o, rep->fio_how, strlen(rep->fio_how));
    fprintf(o, "\n}\n");
}

/* The table: one row per measured strategy and baseline, cold then warm. */
static void text_rows(const struct lreport *rep, const struct result res[][2], double gb) {
    char hb[32];
    printf("%-9s %-5s %8s %8s %8s %6s %10s %8s %8s %10s\n", "strategy", "cache", "open_s", "first_s", "all_s",
           "GB/s", "peak_rss", "majflt", "minflt", "read_MiB");
    for (int c = 0; c < 2; c++)
        for (size_t k = 0; k < NMODES; k++) {
            if (!rep->have[k][c]) continue;
            const struct result *x = &res[k][c];
            if (!x->ok) {
                printf("%-9s %-5s FAILED: %s\n", modes[k].name, c ? "warm" : "cold", x->err);
                continue;
            }
            char a1[16], a2[16], a3[16];
            fmt_s(a1, sizeof a1, x->open_s);
            fmt_s(a2, sizeof a2, x->first_s);
            fmt_s(a3, sizeof a3, x->all_s);
            printf("%-9s %-5s %8s %8s %8s %6.2f %10s %8.0f %8.0f %10.1f\n", modes[k].name, c ? "warm" : "cold",
                   a1, a2, a3, x->all_s > 0 ? gb / x->all_s : 0,
                   cli_human_bytes((uint64_t)(x->peak_rss > 0 ? x->peak_rss : 0), hb, sizeof hb), x->majflt,
                   x->minflt, x->read_bytes / 1048576.0);
        }
}

/* read's verdict: warm against read1m warm (what the copy into fresh
 * memory costs beyond the read itself), first load and reload; cold
 * against populate cold. */
static void read_verdict(const struct lreport *rep, size_t k1, size_t kpop) {
    size_t kr = mode_of(K_STRATEGY, PAGEIN_STRATEGY_READ);
    if (kr >= NMODES) return;
    const struct result *w1 = k1 < NMODES && rep->have[k1][1] ? &rep->res[k1][1] : NULL;
    if (w1 && w1->ok && w1->all_s > 0 && rep->have[kr][1] && rep->res[kr][1].ok && rep->res[kr][1].all_s > 0) {
        double f = w1->all_s / rep->res[kr][1].all_s;
        printf("  read      warm %.2fx read1m warm, first load in the process -> %s (target >= 0.5x)", f,
               f >= 0.5 ? "MEETS" : "MISSES");
        const struct result *rl = &rep->rel[kr][1];
        if (rep->reload && rl->ok && rl->all_s > 0) {
            double g = (rep->rel[k1][1].ok && rep->rel[k1][1].all_s > 0 ? rep->rel[k1][1].all_s : w1->all_s) / rl->all_s;
            printf("; reload %.2fx read1m -> %s", g, g >= 0.5 ? "MEETS" : "MISSES");
        }
        printf("\n");
    }
    const struct result *cp = kpop < NMODES && rep->have[kpop][0] ? &rep->res[kpop][0] : NULL;
    if (cp && cp->ok && cp->all_s > 0 && rep->have[kr][0] && rep->res[kr][0].ok) {
        double q = rep->res[kr][0].all_s / cp->all_s;
        printf("  read      cold %.2fx populate cold -> %s (target <= 1.2x)\n", q, q <= 1.2 ? "MEETS" : "MISSES");
    }
}

static void print_text(const struct bench *b, const struct lreport *rep, int pipeline) {
    char hb[32];
    printf("pagein bench load: %s\n", b->model);
    printf("  %s in %zu file%s, %d layers; kernel %s; filesystem %s; median of %d run%s\n",
           cli_human_bytes(b->model_bytes, hb, sizeof hb), b->nfiles, b->nfiles == 1 ? "" : "s", b->layers,
           rep->un.release, rep->fsname[0] ? rep->fsname : "unknown", b->runs, b->runs == 1 ? "" : "s");
    printf("  auto chooses %s: %s\n\n", pagein_strategy_name(rep->autos), rep->why);
    text_rows(rep, rep->res, rep->gb);
    if (rep->reload) {
        printf("\nreload: the same process loads the model again after closing it (the rows above are its first load)\n");
        text_rows(rep, rep->rel, rep->gb);
    }
    if (pipeline) {
        printf("\npipeline (cold; one matvec per weight tensor, layer by layer)\n");
        printf("%-15s %14s %10s %15s\n", "strategy", "first_output_s", "total_s", "compute_only_s");
        for (int k = 0; k < 4; k++) {
            if (!rep->pipe_res[k].ok) {
                printf("%-15s FAILED: %s\n", rep->plabel[k], rep->pipe_res[k].err);
                continue;
            }
            printf("%-15s %14.3f %10.3f %15.3f\n", rep->plabel[k], rep->pipe_res[k].first_output_s, rep->pipe_res[k].total_s,
                   rep->compute.total_s);
        }
    }
    if (rep->dev > 0)
        printf("\ndevice limit: %.2f GB/s, measured in this run (%s; it moves with the device's and the "
               "machine's load, so compare figures within one run)\n",
               rep->dev, rep->fio_how);
    else printf("\ndevice limit: not measured (fio missing or --no-fio)\n");
    /* verdicts, against the targets below (also in `bench load --help`) */
    printf("\ntargets\n%s", TARGETS);
    printf("\nverdicts\n");
    size_t k1 = mode_of(K_READ1M, 0), kpop = mode_of(K_STRATEGY, PAGEIN_STRATEGY_POPULATE);
    const struct result *r1 = k1 < NMODES && rep->have[k1][0] ? &rep->res[k1][0] : NULL;
    for (size_t k = 0; k < NMODES; k++) {
        if (!rep->have[k][0] && !rep->have[k][1]) continue;
        const struct result *x = rep->have[k][0] ? &rep->res[k][0] : &rep->res[k][1];
        if (!x->ok) {
            printf("  %-9s FAILED\n", modes[k].name);
            continue;
        }
        double gbps = x->all_s > 0 ? rep->gb / x->all_s : 0;
        double vs1 = r1 && r1->ok && x->all_s > 0 ? r1->all_s / x->all_s : -1;
        double rss = x->peak_rss > 0 ? x->peak_rss / (double)b->model_bytes : -1;
        printf("  %-9s %s %.2f GB/s", modes[k].name, rep->have[k][0] ? "cold" : "warm", gbps);
        if (vs1 > 0) printf(", %.2fx one-thread read()", vs1);
        if (rep->dev > 0) printf(", %.0f%% of device", 100 * gbps / rep->dev);
        if (rss >= 0) printf(", peak RSS %.0f%% of model", 100 * rss);
        /* a cold run faster than the device: served from memory (the
         * page cache was not dropped, or the device limit is stale) */
        int not_cold = rep->have[k][0] && rep->dev > 0 && modes[k].kind != K_READ1M && gbps > 1.1 * rep->dev;
        if (not_cold)
            printf(" [NOT COLD: %.0f%% of the device limit; the page cache was not dropped (run as root, or drop "
                   "it), or the limit was measured under other load]",
                   100 * gbps / rep->dev);
        if (modes[k].s == PAGEIN_STRATEGY_POPULATE && modes[k].kind == K_STRATEGY && rep->have[k][0]) {
            int ok1 = vs1 >= 2.5, ok2 = rep->dev <= 0 || gbps >= 0.7 * rep->dev;
            printf(" -> %s (>= 2.5x read1m: %s", ok1 && ok2 && !not_cold ? "MEETS" : not_cold ? "NOT JUDGED" : "MISSES",
                   ok1 ? "met" : "MISSED");
            if (rep->dev > 0) printf("; >= 70%% of fio: %s", ok2 ? "met" : "MISSED");
            printf(")");
        } else if (modes[k].kind == K_STRATEGY && modes[k].s != PAGEIN_STRATEGY_READ &&
                   modes[k].s != PAGEIN_STRATEGY_AUTO && rss >= 0) {
            printf(" -> RSS %s (target: within 5%% of model size)", rss <= 1.05 ? "MEETS" : "MISSES");
        }
        if (modes[k].s == PAGEIN_STRATEGY_LAZY && modes[k].kind == K_STRATEGY)
            printf("; warm open + every tensor looked up %.2f ms -> %s (target < 5 ms)", rep->warm_open * 1000,
                   rep->warm_open < 0.005 ? "MEETS" : "MISSES");
        printf("\n");
    }
    read_verdict(rep, k1, kpop);
    if (pipeline && rep->pipe_res[1].ok && kpop < NMODES && rep->have[kpop][0] && rep->res[kpop][0].ok) {
        double full = rep->res[kpop][0].all_s;
        double frac = rep->pipe_res[1].first_output_s / full;
        double bound = rep->compute.ok ? fmax(rep->compute.total_s, full) : full;
        printf("  pipeline  prefetch first output %.0f%% of cold populate (target < 10%%) -> %s; total %.2fx "
               "max(compute, populate) (target <= 1.15x) -> %s\n",
               100 * frac, frac < 0.10 ? "MEETS" : "MISSES", rep->pipe_res[1].total_s / bound,
               rep->pipe_res[1].total_s <= 1.15 * bound ? "MEETS" : "MISSES");
    }
}

static int bench_load_main(int argc, char **argv) {
    build_modes();
    struct bench b;
    memset(&b, 0, sizeof b);
    b.runs = 3;
    struct lopts o = {.pipeline = 1, .fio = 1, .cold = 1, .warmc = 1};
    int rc = parse_args(argc, argv, &b, &o);
    if (rc >= 0) return rc;
    static struct lreport r; /* large: the results of every mode */
    memset(&r, 0, sizeof r);
    r.dev = -1;
    for (int k = 0; k < 4; k++) /* the strategy's name, "/layer" for layer waits */
        snprintf(r.plabel[k], sizeof r.plabel[k], "%s%s", pagein_strategy_name(pst[k]),
                 pwait[k] == PIPE_WAIT_LAYER ? "/layer" : "");
    r.reload = o.reload;
    if ((rc = model_facts(&b, &r)) >= 0) return rc;
    measure(&b, &o, &r);
    uname(&r.un);
    struct statfs sf;
    r.fsmagic = statfs(b.files[0], &sf) == 0 ? (unsigned long)sf.f_type : 0;
    fs_name(b.files[0], r.fsname, sizeof r.fsname);
    r.gb = (double)b.model_bytes / 1e9;
    if (o.json) print_json(&b, &r, o.pipeline);
    else print_text(&b, &r, o.pipeline);
    int failed = r.failed;
    if (o.svg && draw_svg(o.svg, &b, r.res, r.have, r.dev, r.gb) < 0) failed = 2;
    for (size_t i = 0; i < b.nfiles; i++) free(b.files[i]);
    free(xbuf);
    return failed == 2 ? EXIT_USAGE : failed ? EXIT_INVALID : EXIT_OK;
}

int main(int argc, char **argv) { return bench_load_main(argc, argv); }
