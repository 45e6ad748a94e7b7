/* bench_gpu.c - the program behind `pagein bench gpu MODEL` (= `pagein
 * bench-gpu`; cli/cmd_bench_gpu.c runs it with the same arguments): weights
 * into GPU memory, pagein's pinned staging against the stock loaders, cold
 * and warm, in one run, with the two limits (the disk, through fio into
 * host memory, and a pinned host-to-device copy).
 *
 * Rows: pagein (staging onto --device), pagein-host (the same pipeline
 * with host memory as the destination: runs everywhere, so this command
 * never rots on machines without a GPU), and through Python (torch):
 * safetensors load_file(device="cuda:N"), torch.load + .to("cuda:N") (torch
 * checkpoints only) and mmap + per-tensor .to("cuda:N") (safetensors only;
 * the seed's slow case). Each measurement runs in its own process (CUDA
 * must never be initialised in the parent: a forked child could not use
 * it), cold runs evict the files with posix_fadvise(DONTNEED) first, and
 * each figure is the median of --runs runs. Without a GPU the GPU rows are
 * reported as skipped with the reason, and the command says so. */
#include "cli.h"
#include "svg.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_FILES 4096
#define MAX_RUNS 20

struct result {
    int ok, skipped;
    double seconds, first_s, peak_rss, pinned;
    double base_rss; /* RSS once the device was initialised, before the load (< 0 unknown) */
    char err[256];
};

struct bench {
    const char *model;
    char *files[MAX_FILES];
    uint64_t sizes[MAX_FILES];
    size_t nfiles;
    uint64_t bytes;
    size_t tensors;
    int device;
    uint64_t buffer_bytes;
    unsigned buffers, threads;
    const char *python;
    int runs, quiet;
};


static double vm_hwm(void) { return cli_status_bytes("VmHWM:"); }

/* ---- the measurements, each in a child -------------------------------------- */

enum what { W_PROBE, W_PAGEIN, W_COPY };

static int measure_pagein(const struct bench *b, int device, struct result *r) {
    /* Driver and context set-up are not part of the load (the Python rows
     * create theirs before timing too). */
    if (device != PAGEIN_DEVICE_HOST) {
        int rc = pagein_gpu_probe(device, NULL);
        if (rc < 0) return rc;
    }
    /* The peak counts from here: the load's own memory, not the driver's
     * context (base_rss says what was there before). */
    cli_reset_peak_rss();
    r->base_rss = cli_status_bytes("VmRSS:");
    double t0 = cli_now();
    pagein_model *m;
    pagein_model_opts mo = PAGEIN_MODEL_OPTS_INIT;
    mo.strategy = PAGEIN_STRATEGY_LAZY;
    int rc = pagein_model_open(&m, b->model, &mo);
    if (rc < 0) return rc;
    double t_open = cli_now() - t0;
    pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
    o.device = device;
    o.buffer_bytes = b->buffer_bytes;
    o.nbuffers = b->buffers;
    o.threads = b->threads;
    pagein_gpu_load *l = NULL;
    rc = pagein_gpu_load_model(&l, m, &o);
    if (rc == 0) rc = pagein_gpu_load_wait(l);
    r->seconds = cli_now() - t0;
    if (rc < 0) snprintf(r->err, sizeof r->err, "%s: %s", pagein_strerror(rc), pagein_last_error_detail());
    pagein_gpu_stats st;
    pagein_gpu_load_stats(l, &st);
    r->first_s = st.first_layer_seconds >= 0 ? t_open + st.first_layer_seconds : -1;
    r->pinned = (double)st.pinned_peak;
    pagein_gpu_load_free(l);
    pagein_model_close(m);
    return rc;
}

static struct result in_child(const struct bench *b, enum what w, int device, char *name_out, size_t name_len) {
    struct result r;
    memset(&r, 0, sizeof r);
    r.first_s = r.pinned = r.base_rss = -1;
    int fds[2];
    pid_t pid = cli_child_start(fds, r.err, sizeof r.err);
    if (pid < 0) return r;
    if (pid == 0) {
        int rc = 0;
        char name[128] = "";
        if (w == W_PROBE) {
            pagein_gpu_info info;
            rc = pagein_gpu_probe(device, &info);
            if (rc == 0) snprintf(name, sizeof name, "%s", info.name);
            else snprintf(r.err, sizeof r.err, "%s", pagein_last_error_detail());
        } else if (w == W_PAGEIN) {
            rc = measure_pagein(b, device, &r);
        } else {
            uint64_t n = b->bytes < (1ull << 20) ? (1ull << 20) : b->bytes > (4ull << 30) ? (4ull << 30) : b->bytes;
            rc = pagein_gpu_copy_bench(device, n, 2, &r.seconds);
            r.pinned = (double)n; /* bytes copied, for the rate */
            if (rc < 0) snprintf(r.err, sizeof r.err, "%s: %s", pagein_strerror(rc), pagein_last_error_detail());
        }
        r.peak_rss = vm_hwm();
        r.ok = rc >= 0;
        if (write(fds[1], &r, sizeof r) != (ssize_t)sizeof r) _exit(1);
        if (write(fds[1], name, sizeof name) != (ssize_t)sizeof name) _exit(1);
        _exit(0);
    }
    close(fds[1]);
    /* the child writes its result and then the device name */
    struct {
        struct result r;
        char name[128];
    } out;
    int st = cli_child_result(fds[0], pid, &out, sizeof out);
    if (!st) {
        r = out.r;
        if (name_out) snprintf(name_out, name_len, "%s", out.name);
    } else {
        memset(&r, 0, sizeof r);
        snprintf(r.err, sizeof r.err, "measurement process died (status %d)", st);
    }
    return r;
}

/* ---- the Python rows ---------------------------------------------------------- */

/* argv: MODE PATH DEVICE (DEVICE < 0: cpu, to exercise the script without a
 * GPU). Prints one JSON object: seconds, first_s, bytes; or skip/error. */
static const char py_script[] =
    "import json, os, re, sys, time\n"
    "mode, path, dev = sys.argv[1], sys.argv[2], int(sys.argv[3])\n"
    "base_rss = -1\n"
    "def out(**k):\n"
    "    k['base_rss'] = base_rss\n"
    "    print(json.dumps(k)); sys.exit(0)\n"
    "# the cheap reasons to skip first: importing torch takes seconds\n"
    "if mode == 'safetensors':\n"
    "    if not path.endswith('.safetensors'): out(skip='not a safetensors file')\n"
    "    try:\n"
    "        import safetensors\n"
    "    except ImportError:\n"
    "        out(skip='the safetensors package is not installed')\n"
    "if mode == 'torch' and (path.endswith('.safetensors') or path.endswith('.gguf')):\n"
    "    out(skip='not a torch checkpoint')\n"
    "if mode == 'mmap' and not path.endswith('.safetensors'): out(skip='mmap row reads safetensors files only')\n"
    "try:\n"
    "    import torch\n"
    "except ImportError:\n"
    "    out(skip='torch is not installed')\n"
    "d = 'cpu' if dev < 0 else 'cuda:%d' % dev\n"
    "if dev >= 0:\n"
    "    if not torch.cuda.is_available(): out(skip='torch has no CUDA')\n"
    "    torch.zeros(1, device=d); torch.cuda.synchronize(d)\n"
    "def sync():\n"
    "    if dev >= 0: torch.cuda.synchronize(d)\n"
    "def layer(n):\n"
    "    m = re.search(r'(?:^|\\.)(?:layers|h|blocks|block|layer|blk)\\.(\\d+)\\.', n)\n"
    "    return int(m.group(1)) if m else -1\n"
    "def walk(items):\n"
    "    # move tensors in layer order; first_s when the lowest layer is done\n"
    "    items = sorted(items, key=lambda kv: layer(kv[0]))\n"
    "    ls = [layer(k) for k, _ in items]\n"
    "    first = min([l for l in ls if l >= 0], default=None)\n"
    "    last_first = max([i for i, l in enumerate(ls) if l == first], default=0)\n"
    "    res, first_s, nb = {}, None, 0\n"
    "    for i, (k, v) in enumerate(items):\n"
    "        res[k] = (v() if callable(v) else v).to(d, copy=True)\n"
    "        nb += res[k].numel() * res[k].element_size()\n"
    "        if i == last_first:\n"
    "            sync(); first_s = time.perf_counter() - t0\n"
    "    sync()\n"
    "    return res, first_s, nb\n"
    "def rss():\n"
    "    for l in open('/proc/self/status'):\n"
    "        if l.startswith('VmRSS:'): return int(l.split()[1]) * 1024\n"
    "    return -1\n"
    "base_rss = rss()\n"
    "t0 = time.perf_counter()\n"
    "if mode == 'safetensors':\n"
    "    try:\n"
    "        from safetensors.torch import load_file\n"
    "    except ImportError:\n"
    "        out(skip='the safetensors package is not installed')\n"
    "    if not path.endswith('.safetensors'): out(skip='not a safetensors file')\n"
    "    sd = load_file(path, device=d); sync()\n"
    "    s = time.perf_counter() - t0\n"
    "    out(seconds=s, first_s=s, bytes=sum(v.numel() * v.element_size() for v in sd.values()))\n"
    "elif mode == 'torch':\n"
    "    if path.endswith('.safetensors') or path.endswith('.gguf'): out(skip='not a torch checkpoint')\n"
    "    sd = torch.load(path, map_location='cpu')\n"
    "    if not isinstance(sd, dict): out(skip='checkpoint is not a dict of tensors')\n"
    "    res, f, nb = walk([(k, v) for k, v in sd.items() if torch.is_tensor(v)])\n"
    "    out(seconds=time.perf_counter() - t0, first_s=f, bytes=nb)\n"
    "elif mode == 'mmap':\n"
    "    if not path.endswith('.safetensors'): out(skip='mmap row reads safetensors files only')\n"
    "    import mmap, struct\n"
    "    import numpy as np\n"
    "    fd = os.open(path, os.O_RDONLY); mm = mmap.mmap(fd, 0, prot=mmap.PROT_READ); os.close(fd)\n"
    "    n = struct.unpack('<Q', mm[:8])[0]; hdr = json.loads(mm[8:8 + n]); base = 8 + n\n"
    "    hdr.pop('__metadata__', None)\n"
    "    dt = {'F32': torch.float32, 'F16': torch.float16, 'BF16': torch.bfloat16, 'F64': torch.float64,\n"
    "          'I64': torch.int64, 'I32': torch.int32, 'I16': torch.int16, 'I8': torch.int8, 'U8': torch.uint8,\n"
    "          'BOOL': torch.bool}\n"
    "    buf = np.frombuffer(mm, dtype=np.uint8)\n"
    "    def view(i):\n"
    "        a, b = i['data_offsets']\n"
    "        t = torch.from_numpy(buf[base + a:base + b])\n"
    "        return lambda: t.view(dt.get(i['dtype'], torch.uint8)) if i['dtype'] in dt else t\n"
    "    import warnings; warnings.simplefilter('ignore')\n"
    "    res, f, nb = walk([(k, view(v)) for k, v in hdr.items()])\n"
    "    out(seconds=time.perf_counter() - t0, first_s=f, bytes=nb)\n"
    "out(error='unknown mode ' + mode)\n";

static double json_num(const char *s, const char *key) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *p = strstr(s, k);
    if (!p) return -1;
    p += strlen(k);
    if (strncmp(p, "null", 4) == 0) return -1;
    return atof(p);
}

static int json_str(const char *s, const char *key, char *out, size_t len) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\": \"", key);
    const char *p = strstr(s, k);
    if (!p) return 0;
    p += strlen(k);
    size_t i = 0;
    while (*p && *p != '"' && i + 1 < len) out[i++] = *p++;
    out[i] = 0;
    return 1;
}

static struct result run_python(const struct bench *b, const char *mode, int device) {
    struct result r;
    memset(&r, 0, sizeof r);
    r.first_s = r.pinned = r.base_rss = -1;
    char dev[16];
    snprintf(dev, sizeof dev, "%d", device);
    int fds[2];
    pid_t pid = cli_child_start(fds, r.err, sizeof r.err);
    if (pid < 0) return r;
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[1]);
        execlp(b->python, b->python, "-c", py_script, mode, b->model, dev, (char *)NULL);
        printf("{\"skip\": \"cannot run %s: %s\"}\n", b->python, strerror(errno));
        fflush(stdout);
        _exit(0);
    }
    close(fds[1]);
    char out[4096];
    size_t got = 0;
    ssize_t n;
    while (got + 1 < sizeof out && (n = read(fds[0], out + got, sizeof out - 1 - got)) > 0) got += (size_t)n;
    out[got] = 0;
    close(fds[0]);
    int st;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    wait4(pid, &st, 0, &ru);
    char msg[200];
    if (json_str(out, "skip", msg, sizeof msg)) {
        r.skipped = 1;
        snprintf(r.err, sizeof r.err, "%s", msg);
    } else if (json_str(out, "error", msg, sizeof msg)) {
        snprintf(r.err, sizeof r.err, "%s", msg);
    } else if (json_num(out, "seconds") >= 0) {
        r.ok = 1;
        r.seconds = json_num(out, "seconds");
        r.first_s = json_num(out, "first_s");
        r.peak_rss = (double)ru.ru_maxrss * 1024;
        r.base_rss = json_num(out, "base_rss");
    } else {
        snprintf(r.err, sizeof r.err, "%s exited with status %d: %.150s", b->python,
                 WIFEXITED(st) ? WEXITSTATUS(st) : -1, got ? out : "(no output)");
    }
    return r;
}

/* ---- fio ------------------------------------------------------------------ */

static double fio_gbps(const struct bench *b) {
    size_t big;
    uint64_t size;
    if (cli_fio_target(b->files, b->sizes, b->nfiles, &big, &size) < 0) return -1;
    double v = cli_fio_read_bps(b->files[big], size, "libaio", "hostlimit");
    return v > 0 ? v / 1e9 : -1;
}

/* ---- output and main ---------------------------------------------------------- */

static int dcmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double med(double *v, int n) {
    if (n == 0) return -1;
    qsort(v, (size_t)n, sizeof *v, dcmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static struct result median(const struct result *rs, int n) {
    struct result m = rs[0];
    double s[MAX_RUNS], f[MAX_RUNS], p[MAX_RUNS], b[MAX_RUNS];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (rs[i].ok) s[k] = rs[i].seconds, f[k] = rs[i].first_s, p[k] = rs[i].peak_rss, b[k] = rs[i].base_rss, k++;
        else if (!m.err[0] || m.ok) m = rs[i];
    if (k == 0) return m;
    m.ok = 1;
    m.seconds = med(s, k);
    m.first_s = med(f, k);
    m.peak_rss = med(p, k);
    m.base_rss = med(b, k);
    return m;
}

static void jnum(FILE *o, const char *k, double v) {
    if (v < 0 || isnan(v)) fprintf(o, ", \"%s\": null", k);
    else if (v == floor(v) && v < 1e15) fprintf(o, ", \"%s\": %.0f", k, v); /* byte counts stay exact */
    else fprintf(o, ", \"%s\": %.6g", k, v);
}

struct row {
    const char *name;
    const char *cache;
    struct result r;
};

static void usage(FILE *out) {
    fputs("usage: pagein bench gpu MODEL [--device N] [--runs N] [--cache cold|warm|both] [--json]\n"
          "                        [--buffer-bytes SIZE] [--buffers N] [--threads N] [--python PATH]\n"
          "                        [--no-python] [--no-fio] [--baselines-on-host] [-q]\n"
          "       (`pagein bench-gpu` is the same command)\n"
          "\n"
          "Loads MODEL into GPU memory with pagein's pinned staging and, through Python,\n"
          "with safetensors load_file(device=\"cuda:N\"), torch.load + .to(\"cuda:N\") (torch\n"
          "checkpoints) and mmap + per-tensor .to(\"cuda:N\") (safetensors), each cold\n"
          "(evicted first) and warm, --runs times (default 3, medians), in separate\n"
          "processes. Reports GB/s, time until the first layer is on the device, peak\n"
          "host RSS and pinned memory, and the limits: fio (1 MiB O_DIRECT reads at depth\n"
          "32 into host memory, when fio is installed) and a pinned host-to-device copy.\n"
          "The row pagein-host runs the same pipeline into host memory; it runs without\n"
          "a GPU too. Without a CUDA device the GPU rows are skipped and the command\n"
          "says why.\n"
          "\n"
          "  --device N          CUDA device ordinal (default 0)\n"
          "  --buffer-bytes SIZE, --buffers N, --threads N   the staging ring (library defaults)\n"
          "  --python PATH       interpreter for the Python rows (default $PAGEIN_PYTHON, else /usr/bin/python3)\n"
          "  --no-python         skip the Python rows\n"
          "  --baselines-on-host run the Python rows with device \"cpu\" (exercises them without a GPU)\n"
          "  --no-fio            skip fio\n"
          "  --json              one JSON object (docs/GPU.md)\n"
          "  --svg FILE          also draw GB/s per row, cold and warm, with the lower limit as a line\n"
          "Exit status: 0 ok (also when no GPU is present: the JSON says gpu.available false),\n"
          "1 a measurement failed, 2 usage or the model cannot be opened.\n",
          out);
}

/* --svg: GB/s per row (the JSON's rows[].gbps), cold and warm bars, and the
 * lower of the two limits (fio into host memory, pinned host-to-device) as
 * a dashed line. */
static int draw_svg(const char *path, const struct bench *b, const struct row *rows, size_t nrows, double fio_v,
                    double h2d_v) {
    const char *cat[8], *ser[2];
    double v[16];
    size_t nc = 0, ns = 0;
    for (size_t i = 0; i < nrows; i++) {
        size_t c = 0, k = 0;
        while (c < nc && strcmp(cat[c], rows[i].name)) c++;
        while (k < ns && strcmp(ser[k], rows[i].cache)) k++;
        if (c == nc && nc < 8) cat[nc++] = rows[i].name;
        if (k == ns && ns < 2) ser[ns++] = rows[i].cache;
    }
    for (size_t i = 0; i < nc * ns; i++) v[i] = -1;
    for (size_t i = 0; i < nrows; i++)
        for (size_t c = 0; c < nc; c++)
            for (size_t k = 0; k < ns; k++)
                if (!strcmp(cat[c], rows[i].name) && !strcmp(ser[k], rows[i].cache) && rows[i].r.ok &&
                    rows[i].r.seconds > 0)
                    v[c * ns + k] = (double)b->bytes / rows[i].r.seconds / 1e9;
    double ref = fio_v > 0 && (h2d_v <= 0 || fio_v < h2d_v) ? fio_v : h2d_v;
    char title[300], hb[32];
    const char *base = strrchr(b->model, '/');
    snprintf(title, sizeof title, "pagein bench gpu: %.200s (%s), GB/s, median of %d", base ? base + 1 : b->model,
             cli_human_bytes(b->bytes, hb, sizeof hb), b->runs);
    struct svg_bars sb = {.title = title, .unit = "GB/s", .fmt = "%.2f", .ncat = nc, .nser = ns, .cat = cat,
                          .ser = ser, .v = v, .ref = ref > 0 ? ref : 0,
                          .ref_label = ref == fio_v ? "limit: fio into host memory" : "limit: pinned host-to-device",
                          .ref_key = "limit",
                          .note = "'-': skipped or failed (the JSON says why); dashed: the lower limit"};
    int rc = nc && ns ? svg_bar_chart(path, &sb) : -EINVAL;
    if (rc < 0) cli_error("bench-gpu", 0, "cannot write %s: %s", path, nc ? strerror(-rc) : "no figure measured");
    return rc;
}

struct gopts {
    int json, python, fio, cold, warmc, py_host;
    const char *svg;
};

/* Parses the command line into b and o: -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, struct bench *b, struct gopts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(a)) {
            usage(stdout);
            return EXIT_OK;
        } else if (strcmp(a, "--json") == 0) o->json = 1;
        else if (strcmp(a, "--no-python") == 0) o->python = 0;
        else if (strcmp(a, "--no-fio") == 0) o->fio = 0;
        else if (strcmp(a, "--baselines-on-host") == 0) o->py_host = 1;
        else if (strcmp(a, "-q") == 0) b->quiet = 1;
        else if (strcmp(a, "--svg") == 0 && val) o->svg = val, i++;
        else if (strcmp(a, "--device") == 0 && val) {
            char *e;
            long d = strtol(val, &e, 10);
            if (*e || d < 0 || d > 1000) {
                cli_error("bench-gpu", 0, "--device must be a CUDA ordinal (0, 1, ...), not '%s'", val);
                return EXIT_USAGE;
            }
            b->device = (int)d, i++;
        } else if (strcmp(a, "--runs") == 0 && val) {
            b->runs = atoi(val), i++;
            if (b->runs < 1 || b->runs > MAX_RUNS) {
                cli_error("bench-gpu", 0, "--runs must be 1..%d", MAX_RUNS);
                return EXIT_USAGE;
            }
        } else if (strcmp(a, "--buffer-bytes") == 0 && val) {
            if (cli_parse_size(val, &b->buffer_bytes) < 0) {
                cli_error("bench-gpu", 0, "bad size '%s'", val);
                return EXIT_USAGE;
            }
            i++;
        } else if (strcmp(a, "--buffers") == 0 && val) b->buffers = (unsigned)atoi(val), i++;
        else if (strcmp(a, "--threads") == 0 && val) b->threads = (unsigned)atoi(val), i++;
        else if (strcmp(a, "--python") == 0 && val) b->python = val, i++;
        else if (strcmp(a, "--cache") == 0 && val) {
            if (strcmp(val, "cold") && strcmp(val, "warm") && strcmp(val, "both")) {
                cli_error("bench-gpu", 0, "--cache must be cold, warm or both");
                return EXIT_USAGE;
            }
            o->cold = strcmp(val, "warm") != 0, o->warmc = strcmp(val, "cold") != 0, i++;
        } else if (a[0] == '-') {
            cli_error("bench-gpu", 0, "unknown option '%s'", a);
            usage(stderr);
            return EXIT_USAGE;
        } else if (!b->model) b->model = a;
        else {
            cli_error("bench-gpu", 0, "one MODEL only");
            return EXIT_USAGE;
        }
    }
    if (!b->model) {
        usage(stderr);
        return EXIT_USAGE;
    }
    return -1;
}

static int bench_gpu_main(int argc, char **argv) {
    struct bench b;
    memset(&b, 0, sizeof b);
    b.runs = 3;
    /* Debian's interpreter is the one with python3-torch; a python3 earlier
     * on PATH (pyenv, a venv) may lack it. */
    b.python = getenv("PAGEIN_PYTHON") && *getenv("PAGEIN_PYTHON") ? getenv("PAGEIN_PYTHON")
               : access("/usr/bin/python3", X_OK) == 0                  ? "/usr/bin/python3"
                                                                         : "python3";
    struct gopts go = {.python = 1, .fio = 1, .cold = 1, .warmc = 1};
    int prc = parse_args(argc, argv, &b, &go);
    if (prc >= 0) return prc;
    int json = go.json, python = go.python, fio = go.fio, cold = go.cold, warmc = go.warmc, py_host = go.py_host;
    const char *svg = go.svg;
    /* The table, in the parent, without touching CUDA. */
    pagein_model *m;
    pagein_model_opts mo = PAGEIN_MODEL_OPTS_INIT;
    mo.strategy = PAGEIN_STRATEGY_LAZY;
    int rc = pagein_model_open(&m, b.model, &mo);
    if (rc < 0) {
        cli_error("bench-gpu", rc, "%s", b.model);
        return EXIT_USAGE;
    }
    b.nfiles = pagein_model_file_count(m);
    if (b.nfiles > MAX_FILES) b.nfiles = MAX_FILES;
    for (size_t i = 0; i < b.nfiles; i++) {
        pagein_file_info fi;
        pagein_file_get_info(pagein_model_file(m, i), &fi);
        b.files[i] = strdup(fi.path);
        b.sizes[i] = fi.file_size;
    }
    b.tensors = pagein_model_tensor_count(m);
    for (size_t i = 0; i < b.tensors; i++) b.bytes += pagein_gpu_tensor_bytes(pagein_model_tensor_at(m, i));
    pagein_model_close(m);

    char gpu_name[128] = "";
    struct result probe = in_child(&b, W_PROBE, b.device, gpu_name, sizeof gpu_name);
    int gpu = probe.ok;
    if (!gpu && !b.quiet)
        fprintf(stderr,
                "pagein bench gpu: no usable CUDA device %d (%s): the GPU rows are skipped; only the "
                "host-destination rows run\n",
                b.device, probe.err[0] ? probe.err : "unknown reason");

    static const struct {
        const char *name, *py;
        int gpu_row;
    } kinds[] = {{"pagein", NULL, 1},          {"pagein-host", NULL, 0}, {"safetensors", "safetensors", 1},
                 {"torch-load", "torch", 1}, {"mmap-to", "mmap", 1}};
    struct row rows[2 * 5];
    size_t nrows = 0;
    int failed = 0;
    for (int c = 0; c < 2; c++) {
        if ((c == 0 && !cold) || (c == 1 && !warmc)) continue;
        for (size_t k = 0; k < 5; k++) {
            struct row *rw = &rows[nrows++];
            rw->name = kinds[k].name;
            rw->cache = c == 0 ? "cold" : "warm";
            memset(&rw->r, 0, sizeof rw->r);
            int py_dev = kinds[k].py && py_host ? -1 : b.device;
            if (kinds[k].py && !python) {
                rw->r.skipped = 1;
                snprintf(rw->r.err, sizeof rw->r.err, "--no-python");
                continue;
            }
            if (kinds[k].gpu_row && !gpu && !(kinds[k].py && py_host)) {
                rw->r.skipped = 1;
                snprintf(rw->r.err, sizeof rw->r.err, "no CUDA device: %.200s", probe.err);
                continue;
            }
            struct result rs[MAX_RUNS];
            for (int i = 0; i < b.runs; i++) {
                if (c == 0) cli_files_evict(b.files, b.nfiles);
                else cli_files_warm(b.files, b.nfiles);
                if (!b.quiet && isatty(2)) fprintf(stderr, "\r%s %s run %d/%d   ", rw->name, rw->cache, i + 1, b.runs);
                rs[i] = kinds[k].py ? run_python(&b, kinds[k].py, py_dev)
                                    : in_child(&b, W_PAGEIN, kinds[k].gpu_row ? b.device : PAGEIN_DEVICE_HOST,
                                               NULL, 0);
                if (rs[i].skipped) break;
            }
            rw->r = rs[0].skipped ? rs[0] : median(rs, b.runs);
            if (!rw->r.ok && !rw->r.skipped) failed = 1;
        }
    }
    if (!b.quiet && isatty(2)) fprintf(stderr, "\r%60s\r", "");
    double fio_v = fio ? fio_gbps(&b) : -1;
    struct result h2d = {0}, hcopy = in_child(&b, W_COPY, PAGEIN_DEVICE_HOST, NULL, 0);
    if (gpu) h2d = in_child(&b, W_COPY, b.device, NULL, 0);
    double h2d_v = gpu && h2d.ok && h2d.seconds > 0 ? h2d.pinned / h2d.seconds / 1e9 : -1;
    double hcopy_v = hcopy.ok && hcopy.seconds > 0 ? hcopy.pinned / hcopy.seconds / 1e9 : -1;
    double la[3] = {-1, -1, -1};
    getloadavg(la, 3);

    FILE *o = stdout;
    if (json) {
        fprintf(o, "{\"model\": ");
        cli_json_str(o, b.model, strlen(b.model));
        fprintf(o, ", \"bytes\": %llu, \"tensors\": %zu, \"runs\": %d", (unsigned long long)b.bytes, b.tensors, b.runs);
        fprintf(o, ", \"gpu\": {\"device\": %d, \"available\": %s, \"name\": ", b.device, gpu ? "true" : "false");
        cli_json_str(o, gpu_name, strlen(gpu_name));
        fprintf(o, ", \"why\": ");
        if (gpu) fprintf(o, "null");
        else cli_json_str(o, probe.err, strlen(probe.err));
        fprintf(o, "}, \"ring\": {\"buffer_bytes\": %llu, \"buffers\": %u, \"threads\": %u}",
                (unsigned long long)b.buffer_bytes, b.buffers, b.threads);
        fprintf(o, ", \"loadavg\": [%.2f, %.2f, %.2f], \"rows\": [", la[0], la[1], la[2]);
        for (size_t i = 0; i < nrows; i++) {
            const struct result *r = &rows[i].r;
            fprintf(o, "%s{\"name\": \"%s\", \"cache\": \"%s\", \"ok\": %s", i ? ", " : "", rows[i].name,
                    rows[i].cache, r->ok ? "true" : "false");
            jnum(o, "seconds", r->ok ? r->seconds : -1);
            jnum(o, "gbps", r->ok && r->seconds > 0 ? (double)b.bytes / r->seconds / 1e9 : -1);
            jnum(o, "first_layer_s", r->ok ? r->first_s : -1);
            jnum(o, "peak_rss", r->ok ? r->peak_rss : -1);
            jnum(o, "base_rss", r->ok ? r->base_rss : -1);
            jnum(o, "pinned_bytes", r->ok ? r->pinned : -1);
            fprintf(o, ", \"skipped\": ");
            if (r->skipped) cli_json_str(o, r->err, strlen(r->err));
            else fprintf(o, "null");
            fprintf(o, ", \"error\": ");
            if (!r->ok && !r->skipped) cli_json_str(o, r->err, strlen(r->err));
            else fprintf(o, "null");
            fprintf(o, "}");
        }
        fprintf(o, "], \"limits\": {");
        fprintf(o, "\"fio_gbps\": ");
        if (fio_v > 0) fprintf(o, "%.6g", fio_v);
        else fprintf(o, "null");
        jnum(o, "h2d_gbps", h2d_v);
        jnum(o, "host_copy_gbps", hcopy_v);
        fprintf(o, "}}\n");
    } else {
        printf("pagein bench gpu: %s, %llu bytes, %zu tensors, %d run(s) per row, load %.2f\n", b.model,
               (unsigned long long)b.bytes, b.tensors, b.runs, la[0]);
        printf("device %d: %s\n", b.device, gpu ? gpu_name : "none (GPU rows skipped)");
        printf("%-12s %-5s %9s %8s %10s %10s %10s\n", "row", "cache", "seconds", "GB/s", "first(s)", "peakRSS", "pinned");
        for (size_t i = 0; i < nrows; i++) {
            const struct result *r = &rows[i].r;
            if (!r->ok) {
                printf("%-12s %-5s %s: %s\n", rows[i].name, rows[i].cache, r->skipped ? "skipped" : "FAILED", r->err);
                continue;
            }
            char rss[32], pin[32];
            cli_human_bytes((uint64_t)(r->peak_rss > 0 ? r->peak_rss : 0), rss, sizeof rss);
            if (r->pinned >= 0) cli_human_bytes((uint64_t)r->pinned, pin, sizeof pin);
            else snprintf(pin, sizeof pin, "-");
            printf("%-12s %-5s %9.3f %8.2f %10.3f %10s %10s\n", rows[i].name, rows[i].cache, r->seconds,
                   r->seconds > 0 ? (double)b.bytes / r->seconds / 1e9 : 0, r->first_s, rss, pin);
        }
        char lf[32] = "-", lh[32] = "-", lc[32] = "-";
        if (fio_v > 0) snprintf(lf, sizeof lf, "%.2f", fio_v);
        if (h2d_v > 0) snprintf(lh, sizeof lh, "%.2f", h2d_v);
        if (hcopy_v > 0) snprintf(lc, sizeof lc, "%.2f", hcopy_v);
        printf("limits (GB/s): fio into host memory %s, pinned host-to-device %s, host copy %s\n", lf, lh, lc);
    }
    if (svg && draw_svg(svg, &b, rows, nrows, fio_v, h2d_v) < 0) failed = 2;
    for (size_t i = 0; i < b.nfiles; i++) free(b.files[i]);
    return failed == 2 ? EXIT_USAGE : failed ? EXIT_INVALID : EXIT_OK;
}

int main(int argc, char **argv) { return bench_gpu_main(argc, argv); }
