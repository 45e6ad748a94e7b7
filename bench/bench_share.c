/* bench_share.c - the program behind `pagein bench share MODEL --workers N`
 * (cli/cmd_bench_share.c runs it with the same arguments): how much memory
 * N worker processes that each load the same model really cost.
 *
 * For each strategy (lazy mapping, then explicit reads into private memory)
 * the command forks N workers. Each opens the model, touches one byte of
 * every page of every tensor, and waits at a barrier until all N have done
 * so; only then does each read its own Rss and Pss from
 * /proc/self/smaps_rollup, so that every shared page is divided among all N
 * at the moment of measurement. With a mapping the page cache holds one
 * copy that all workers share (sum of PSS about the model size); with
 * `read` each worker holds its own copy (sum about N times the model). */
#include "cli.h"
#include "svg.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_WORKERS 256

struct sample {
    int ok;           /* 1 measured, 0 failed */
    uint64_t rss_kb, pss_kb;
    uint64_t touched; /* bytes of tensor data touched */
};

static void usage(FILE *out) {
    fprintf(out,
            "usage: pagein bench share MODEL [--workers N] [--strategy lazy|read|populate]... [--json]\n"
            "\n"
            "Forks N workers (default 8) that each open MODEL and touch every tensor, then\n"
            "reports each worker's RSS and PSS (/proc/self/smaps_rollup, read while all N are\n"
            "alive) and the sum of PSS, first with the `lazy` strategy (shared mapping of the\n"
            "page cache), then with `read` (private copies). --strategy (repeatable) picks\n"
            "others. --svg FILE also draws the PSS sum per strategy against the model's size.\n"
            "Exit: 0 ok, 1 a worker failed, 2 usage error.\n");
}

/* Rss and Pss in kB from smaps_rollup (the whole process). */
static int read_rollup(uint64_t *rss, uint64_t *pss) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -errno;
    char line[256];
    *rss = *pss = 0;
    int got = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "Rss:", 4) == 0) {
            *rss = strtoull(line + 4, NULL, 10);
            got |= 1;
        } else if (strncmp(line, "Pss:", 4) == 0) {
            *pss = strtoull(line + 4, NULL, 10);
            got |= 2;
        }
    }
    fclose(f);
    return got == 3 ? 0 : -ENOENT;
}

static int full_write(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int full_read(int fd, void *p, size_t n) {
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

/* One worker: open, touch, report ready, wait for go (one byte each),
 * measure, report, then wait until the parent closes `quit` (so everyone
 * stays mapped until all have measured). Never returns. */
static void worker(const char *path, pagein_strategy strat, int ready_fd, int go_fd, int res_fd, int quit_fd) {
    struct sample s = {0, 0, 0, 0};
    pagein_model_opts mo = PAGEIN_MODEL_OPTS_INIT;
    mo.strategy = strat;
    pagein_model *m = NULL;
    int rc = pagein_model_open(&m, path, &mo);
    if (rc < 0) {
        cli_error("bench share", rc, "worker %ld: %s", (long)getpid(), path);
    } else {
        const size_t ps = pagein_page_size();
        volatile unsigned sum = 0;
        for (size_t i = 0; i < pagein_model_tensor_count(m); i++) {
            const pagein_tensor *t = pagein_model_tensor_at(m, i);
            const volatile unsigned char *d = t->data;
            if (!d || t->nbytes == 0) continue;
            for (uint64_t off = 0; off < t->nbytes; off += ps) sum += d[off];
            sum += d[t->nbytes - 1];
            s.touched += t->nbytes;
        }
        (void)sum;
    }
    char c = rc < 0 ? 'E' : 'R';
    full_write(ready_fd, &c, 1);
    if (full_read(go_fd, &c, 1) == 0 && rc == 0 && read_rollup(&s.rss_kb, &s.pss_kb) == 0) s.ok = 1;
    full_write(res_fd, &s, sizeof s);
    while (read(quit_fd, &c, 1) != 0 && errno == EINTR) { /* hold the model until the parent closes quit */
    }
    pagein_model_close(m);
    _exit(s.ok ? 0 : 1);
}

struct round {
    pagein_strategy strat;
    struct sample s[MAX_WORKERS];
    uint64_t pss_sum_kb, rss_sum_kb;
    int failed;
};

static int run_round(const char *path, int n, struct round *r) {
    int ready[2], go[2], res[2], quit[2];
    if (pipe(ready) || pipe(go) || pipe(res) || pipe(quit)) return -errno;
    fflush(stdout);
    fflush(stderr);
    pid_t pids[MAX_WORKERS];
    int started = 0;
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p < 0) break;
        if (p == 0) {
            close(ready[0]);
            close(go[1]);
            close(res[0]);
            close(quit[1]);
            worker(path, r->strat, ready[1], go[0], res[1], quit[0]);
        }
        pids[started++] = p;
    }
    close(ready[1]);
    close(go[0]);
    close(res[1]);
    close(quit[0]);
    /* barrier: everyone has touched everything */
    for (int i = 0; i < started; i++) {
        char c;
        if (full_read(ready[0], &c, 1) < 0 || c != 'R') r->failed = 1;
    }
    /* go: everyone measures, while all are alive */
    char go_bytes[MAX_WORKERS];
    memset(go_bytes, 'G', sizeof go_bytes);
    full_write(go[1], go_bytes, (size_t)started);
    for (int i = 0; i < started; i++) {
        if (full_read(res[0], &r->s[i], sizeof r->s[i]) < 0 || !r->s[i].ok) r->failed = 1;
        r->pss_sum_kb += r->s[i].pss_kb;
        r->rss_sum_kb += r->s[i].rss_kb;
    }
    close(go[1]);
    close(quit[1]); /* workers exit */
    for (int i = 0; i < started; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) r->failed = 1;
    }
    close(ready[0]);
    close(res[0]);
    if (started < n) r->failed = 1;
    return 0;
}

static int share_main(int argc, char **argv) {
    const char *path = NULL;
    int n = 8, json = 0;
    const char *svg = NULL;
    pagein_strategy strats[8];
    int nstrat = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--svg") && i + 1 < argc) {
            svg = argv[++i];
        } else if ((!strcmp(a, "--workers") || !strcmp(a, "-n")) && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > MAX_WORKERS) {
                cli_error("bench share", 0, "--workers wants 1..%d", MAX_WORKERS);
                return EXIT_USAGE;
            }
            n = (int)v;
        } else if (!strcmp(a, "--strategy") && i + 1 < argc) {
            int s = pagein_strategy_from_name(argv[++i]);
            if (s < 0 || nstrat == 8) {
                cli_error("bench share", 0, "unknown strategy '%s'", argv[i]);
                return EXIT_USAGE;
            }
            strats[nstrat++] = (pagein_strategy)s;
        } else if (a[0] != '-' && !path) {
            path = a;
        } else {
            cli_error("bench share", 0, "unexpected argument '%s' (see pagein bench share --help)", a);
            return EXIT_USAGE;
        }
    }
    if (!path) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (nstrat == 0) {
        strats[nstrat++] = PAGEIN_STRATEGY_LAZY;
        strats[nstrat++] = PAGEIN_STRATEGY_READ;
    }
    /* Model size from a lazy open in the parent, closed again before any
     * fork: the parent maps nothing while workers are measured. */
    uint64_t model_bytes = 0;
    size_t ntensors = 0;
    {
        pagein_model *m = NULL;
        pagein_model_opts mo = PAGEIN_MODEL_OPTS_INIT;
        mo.strategy = PAGEIN_STRATEGY_LAZY;
        int rc = pagein_model_open(&m, path, &mo);
        if (rc < 0) {
            cli_error("bench share", rc, "%s", path);
            return EXIT_INVALID;
        }
        ntensors = pagein_model_tensor_count(m);
        for (size_t i = 0; i < ntensors; i++) model_bytes += pagein_model_tensor_at(m, i)->nbytes;
        pagein_model_close(m);
    }
    struct round *rounds = calloc((size_t)nstrat, sizeof *rounds);
    if (!rounds) return EXIT_USAGE;
    int status = EXIT_OK;
    for (int k = 0; k < nstrat; k++) {
        rounds[k].strat = strats[k];
        if (run_round(path, n, &rounds[k]) < 0) {
            cli_error("bench share", -errno, "cannot set up workers");
            free(rounds);
            return EXIT_USAGE;
        }
        if (rounds[k].failed) status = EXIT_INVALID;
    }
    const double mb = 1024.0 * 1024.0;
    if (json) {
        printf("{\n  \"model\": ");
        cli_json_str(stdout, path, strlen(path));
        printf(",\n  \"bytes\": %llu,\n  \"tensors\": %zu,\n  \"workers\": %d,\n  \"strategies\": [",
               (unsigned long long)model_bytes, ntensors, n);
        for (int k = 0; k < nstrat; k++) {
            struct round *r = &rounds[k];
            printf("%s\n    {\"strategy\": \"%s\", \"ok\": %s, \"pss_sum_bytes\": %llu, \"rss_sum_bytes\": %llu, "
                   "\"pss_sum_over_model\": %.4f, \"workers\": [",
                   k ? "," : "", pagein_strategy_name(r->strat), r->failed ? "false" : "true",
                   (unsigned long long)r->pss_sum_kb * 1024, (unsigned long long)r->rss_sum_kb * 1024,
                   model_bytes ? (double)r->pss_sum_kb * 1024 / (double)model_bytes : 0.0);
            for (int i = 0; i < n; i++)
                printf("%s{\"rss_bytes\": %llu, \"pss_bytes\": %llu}", i ? ", " : "",
                       (unsigned long long)r->s[i].rss_kb * 1024, (unsigned long long)r->s[i].pss_kb * 1024);
            printf("]}");
        }
        printf("\n  ]\n}\n");
    } else {
        printf("model %s: %zu tensors, %.1f MiB of tensor data; %d workers each open it and touch every page\n",
               path, ntensors, (double)model_bytes / mb, n);
        printf("%-9s %6s %12s %12s\n", "strategy", "worker", "RSS MiB", "PSS MiB");
        for (int k = 0; k < nstrat; k++) {
            struct round *r = &rounds[k];
            for (int i = 0; i < n; i++)
                printf("%-9s %6d %12.1f %12.1f\n", pagein_strategy_name(r->strat), i, (double)r->s[i].rss_kb / 1024.0,
                       (double)r->s[i].pss_kb / 1024.0);
            printf("%-9s %6s %12.1f %12.1f   PSS sum = %.2f x model size%s\n", pagein_strategy_name(r->strat), "sum",
                   (double)r->rss_sum_kb / 1024.0, (double)r->pss_sum_kb / 1024.0,
                   model_bytes ? (double)r->pss_sum_kb * 1024 / (double)model_bytes : 0.0,
                   r->failed ? " (a worker failed)" : "");
        }
    }
    if (svg) { /* the PSS sum over the model's size per strategy (the JSON's pss_sum_over_model) */
        const char *cat[8], *ser[1] = {""};
        double v[8];
        for (int k = 0; k < nstrat; k++) {
            cat[k] = pagein_strategy_name(rounds[k].strat);
            v[k] = rounds[k].failed || !model_bytes ? -1 : (double)rounds[k].pss_sum_kb * 1024 / (double)model_bytes;
        }
        char title[300];
        const char *base = strrchr(path, '/');
        snprintf(title, sizeof title, "pagein bench share: %.200s, %d workers: memory (PSS sum) in model sizes",
                 base ? base + 1 : path, n);
        struct svg_bars sb = {.title = title, .unit = "PSS sum / model size", .fmt = "%.2f", .ncat = (size_t)nstrat,
                              .nser = 1, .cat = cat, .ser = ser, .v = v, .ref = 1, .ref_label = "one copy of the model",
                              .ref_key = "one_copy", .note = "below the line: the workers share one copy"};
        int rc = svg_bar_chart(svg, &sb);
        if (rc < 0) {
            cli_error("bench share", 0, "cannot write %s: %s", svg, strerror(-rc));
            status = EXIT_USAGE;
        }
    }
    free(rounds);
    return status;
}

int main(int argc, char **argv) { return share_main(argc, argv); }
