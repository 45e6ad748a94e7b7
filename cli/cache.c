/* cache.c - the driver behind `pagein resident`, `warm`, `evict` and `lock`.
 *
 * Every path names a target: a model (a file, a sharded checkpoint, a GGUF
 * split set or a directory holding one, opened lazily: nothing is read but
 * headers) or, when it is not a model, plain files (a directory that is not
 * a model is walked, like vmtouch does). Models can be narrowed to layers
 * and to tensors matching a regular expression; plain files to a byte range.
 * The four modes then report residency, page in, drop or lock the selection.
 * Output is human text, `--json` or vmtouch's `-o kv`. */
#include "cache.h"

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <regex.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define LAYER_FIRST INT32_MIN /* "embed": the leading globals, layer -1 */
#define LAYER_LAST INT32_MAX  /* "head": the trailing globals, layer L */
#define CHART_COLS 60
#define MIN_U64(a, b) ((a) < (b) ? (a) : (b))
#define FORWARD_RC(expr)        \
    do {                        \
        int rc_ = (expr);       \
        if (rc_ < 0) return rc_; \
    } while (0)

struct layer_span {
    int32_t lo, hi;
};

struct opts {
    enum cache_mode mode;
    const char *cmd;
    int json, kv, verbose, quiet, list_tensors, daemon, wait;
    const char *pidfile;
    int have_re;
    regex_t re;
    const char *re_text;
    struct layer_span *layers;
    size_t nlayers;
    unsigned threads;
    uint64_t chunk;
    int have_max;
    uint64_t max_size;
    int have_range;
    uint64_t r_lo, r_len; /* r_len 0 = to the end */
    char **paths;
    size_t npaths, cap_paths;
    size_t ndirs;
};

struct target {
    char *path;
    pagein_model *m;
    pagein_cache_file *c;
    const pagein_tensor **sel; /* in layer order */
    int32_t *sel_layer;        /* the layer (-1..L) each selected tensor came from */
    size_t nsel;
    uint64_t sel_bytes;
    int failed;
    int usage; /* failed because a flag does not apply to it (exit 2) */
};

struct targets {
    struct target *t;
    size_t n, cap;
};

/* ---- options ------------------------------------------------------------ */

static void usage(const struct opts *o, FILE *out) {
    static const char *what[] = {
        "Show how much of each file, layer and tensor is in the page cache (mincore).",
        "Page the selection into the page cache with parallel reads; report bytes, seconds, GB/s.",
        "Drop the selection from the page cache (posix_fadvise DONTNEED); report before/after.",
        "mlock the selection and hold it until SIGINT/SIGTERM/SIGHUP (or as a daemon)."};
    fprintf(out, "usage: pagein %s [OPTIONS] PATH...\n\n%s\n\n", o->cmd, what[o->mode]);
    fprintf(out,
            "PATH is a model (safetensors or GGUF file, *.safetensors.index.json, GGUF split\n"
            "shard, or a directory holding one) or any other file or directory (treated as\n"
            "plain files, like vmtouch). A model that fails to open is an error, never plain\n"
            "bytes; FIFOs, sockets and devices are refused.\n\n"
            "selection (models):\n"
            "  --layers SPEC      layers: N, A-B, lists A,B-C; `embed` = leading globals,\n"
            "                     `head` = trailing globals (final norm, lm head)\n");
    if (o->mode == CACHE_RESIDENT)
        fprintf(out, "  --tensors [REGEX]  list every tensor (matching REGEX, which also narrows totals);\n"
                     "                     a word after --tensors is REGEX unless it is an existing\n"
                     "                     path or the last argument (--tensors=REGEX is never a path)\n");
    else
        fprintf(out, "  --tensors REGEX    only tensors whose name matches (POSIX extended regex)\n");
    fprintf(out,
            "selection (plain files):\n"
            "  -p, --range R      byte range: A-B, A- (to end), -B or N (first N bytes); sizes\n"
            "                     take K/M/G suffixes; forces plain-file treatment\n"
            "  -m, --max-size S   skip files larger than S\n"
            "  -b, --batch FILE   read more paths from FILE, one per line (`-` = stdin)\n"
            "output:\n"
            "  --json             JSON on stdout (schema in docs/CLI.md)\n"
            "  -o kv              one key=value summary line (vmtouch -o kv)\n"
            "  -v, --verbose      per-file residency chart (vmtouch -v)\n"
            "  -q, --quiet        no output except errors\n");
    if (o->mode == CACHE_WARM) /* errors in the other modes: not listed there */
        fprintf(out,
                "  --threads N        I/O threads (default: the library's)\n"
                "  --chunk SIZE       bytes per parallel request (default: the library's)\n");
    if (o->mode == CACHE_LOCK)
        fprintf(out,
                "lock:\n"
                "  -d, --daemon       lock in a background process and return\n"
                "  -P, --pidfile F    write the holder's pid to F (removed when it exits)\n"
                "  -w, --wait         with --daemon: return only once everything is locked,\n"
                "                     with its exit status\n");
    fprintf(out,
            "vmtouch flags: -t touch (= warm), -e evict, -l / -L lock (= lock); they switch\n"
            "the mode of any of the four commands.\n"
            "exit: 0 ok; 1 a path failed, a model did not open or a selection matched\n"
            "nothing (others still processed); 2 usage error, or a flag that does not apply\n"
            "(--layers/--tensors on a path that is not a model).\n");
}

static int parse_u64(const char *s, uint64_t *v) {
    if (!*s) {
        *v = 0;
        return 0;
    }
    return cli_parse_size(s, v);
}

/* -p: A-B, A-, -B, N. */
static int parse_range(const char *s, uint64_t *lo, uint64_t *len) {
    const char *dash = strchr(s, '-');
    char buf[64];
    uint64_t a = 0, b = 0;
    if (!dash) {
        if (cli_parse_size(s, &b) < 0 || b == 0) return -1;
        *lo = 0;
        *len = b;
        return 0;
    }
    size_t n = (size_t)(dash - s);
    if (n >= sizeof buf) return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    if (parse_u64(buf, &a) < 0 || parse_u64(dash + 1, &b) < 0) return -1;
    if (dash[1] == 0) { /* A- */
        *lo = a;
        *len = 0;
        return 0;
    }
    if (b <= a) return -1;
    *lo = a;
    *len = b - a;
    return 0;
}

static int32_t parse_layer_word(const char *s, int *ok) {
    *ok = 1;
    if (!strcmp(s, "embed") || !strcmp(s, "first")) return LAYER_FIRST;
    if (!strcmp(s, "head") || !strcmp(s, "last")) return LAYER_LAST;
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 0 || v > 1000000) *ok = 0;
    return (int32_t)v;
}

static int parse_layers(struct opts *o, const char *spec) {
    char *dup = strdup(spec);
    if (!dup) return -1;
    int rc = 0;
    for (char *save = NULL, *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        struct layer_span sp;
        int ok1 = 1, ok2 = 1;
        char *dash = strchr(tok, '-');
        if (dash) {
            *dash = 0;
            sp.lo = parse_layer_word(tok, &ok1);
            sp.hi = parse_layer_word(dash + 1, &ok2);
        } else {
            sp.lo = sp.hi = parse_layer_word(tok, &ok1);
        }
        if (!ok1 || !ok2) {
            rc = -1;
            break;
        }
        struct layer_span *n = realloc(o->layers, (o->nlayers + 1) * sizeof *n);
        if (!n) {
            rc = -1;
            break;
        }
        o->layers = n;
        o->layers[o->nlayers++] = sp;
    }
    free(dup);
    return o->nlayers ? rc : -1;
}

static int add_path(struct opts *o, const char *p) {
    if (o->npaths == o->cap_paths) {
        size_t cap = o->cap_paths ? o->cap_paths * 2 : 16;
        char **n = realloc(o->paths, cap * sizeof *n);
        if (!n) return -1;
        o->paths = n;
        o->cap_paths = cap;
    }
    o->paths[o->npaths] = strdup(p);
    if (!o->paths[o->npaths]) return -1;
    o->npaths++;
    return 0;
}

static int read_batch(struct opts *o, const char *file) {
    FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "r");
    if (!f) {
        cli_error(o->cmd, 0, "cannot open batch file %s: %s", file, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n == 0) continue;
        if (add_path(o, line) < 0) break;
    }
    free(line);
    if (f != stdin) fclose(f);
    return 0;
}

/* Returns 0, or EXIT_USAGE after printing why; 1 = --help printed. */
static int parse_args(struct opts *o, int argc, char **argv) {
    const char *re = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
#define NEED_VAL()                                                                  \
    do {                                                                            \
        const char *eq_ = strchr(a, '=');                                           \
        if (a[1] == '-' && eq_) val = eq_ + 1;                                      \
        else if (a[1] != '-' && a[2]) val = a + 2;                                  \
        else if (i + 1 < argc) val = argv[++i];                                     \
        else {                                                                      \
            cli_error(o->cmd, 0, "%s needs a value", a);                            \
            return EXIT_USAGE;                                                      \
        }                                                                           \
    } while (0)
#define IS(long_) (strcmp(a, long_) == 0 || (strncmp(a, long_ "=", sizeof(long_)) == 0))
        if (cli_is_help(a)) {
            usage(o, stdout);
            return 1;
        } else if (strcmp(a, "--") == 0) {
            for (i++; i < argc; i++)
                if (add_path(o, argv[i]) < 0) return EXIT_USAGE;
            break;
        } else if (a[0] != '-' || a[1] == 0) {
            if (add_path(o, a) < 0) return EXIT_USAGE;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            o->verbose = 1;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o->quiet = 1;
        } else if (!strcmp(a, "-t")) {
            o->mode = CACHE_WARM;
        } else if (!strcmp(a, "-e")) {
            o->mode = CACHE_EVICT;
        } else if (!strcmp(a, "-l") || !strcmp(a, "-L")) {
            o->mode = CACHE_LOCK;
        } else if (!strcmp(a, "-d") || !strcmp(a, "--daemon")) {
            o->daemon = 1;
        } else if (!strcmp(a, "-w") || !strcmp(a, "--wait")) {
            o->wait = 1;
        } else if (!strncmp(a, "-o", 2) && (a[2] == 0 || !strcmp(a + 2, "kv"))) {
            NEED_VAL();
            if (strcmp(val, "kv") != 0) {
                cli_error(o->cmd, 0, "-o supports only kv");
                return EXIT_USAGE;
            }
            o->kv = 1;
        } else if (IS("--pidfile") || !strncmp(a, "-P", 2)) {
            NEED_VAL();
            o->pidfile = val;
        } else if (IS("--threads")) {
            NEED_VAL();
            char *end;
            long v = strtol(val, &end, 10);
            if (*end || v < 1 || v > 256) {
                cli_error(o->cmd, 0, "--threads wants 1..256, got '%s'", val);
                return EXIT_USAGE;
            }
            o->threads = (unsigned)v;
        } else if (IS("--chunk")) {
            NEED_VAL();
            if (cli_parse_size(val, &o->chunk) < 0 || o->chunk == 0) {
                cli_error(o->cmd, 0, "bad --chunk '%s'", val);
                return EXIT_USAGE;
            }
        } else if (IS("--layers")) {
            NEED_VAL();
            if (parse_layers(o, val) < 0) {
                cli_error(o->cmd, 0, "bad --layers '%s' (want N, A-B, lists, embed, head)", val);
                return EXIT_USAGE;
            }
        } else if (IS("--tensors")) {
            if (o->mode == CACHE_RESIDENT) {
                /* the value is optional here: `--tensors REGEX` takes the
                 * word as REGEX, as warm/evict/lock do, unless it names a
                 * path that exists, or it is the last word and no path was
                 * given before it (`resident M --tensors REGEX` narrows) */
                struct stat st_;
                o->list_tensors = 1;
                const char *eq = strchr(a, '=');
                if (eq) re = eq + 1;
                else if (i + 1 < argc && (i + 2 < argc || o->npaths > 0) && argv[i + 1][0] != '-' &&
                         lstat(argv[i + 1], &st_) != 0)
                    re = argv[++i];
            } else {
                NEED_VAL();
                re = val;
            }
        } else if (!strncmp(a, "-p", 2) || IS("--range")) {
            NEED_VAL();
            if (parse_range(val, &o->r_lo, &o->r_len) < 0) {
                cli_error(o->cmd, 0, "bad range '%s' (want A-B, A-, -B or N)", val);
                return EXIT_USAGE;
            }
            o->have_range = 1;
        } else if (!strncmp(a, "-m", 2) || IS("--max-size")) {
            NEED_VAL();
            if (cli_parse_size(val, &o->max_size) < 0) {
                cli_error(o->cmd, 0, "bad size '%s'", val);
                return EXIT_USAGE;
            }
            o->have_max = 1;
        } else if (!strncmp(a, "-b", 2) || IS("--batch")) {
            NEED_VAL();
            if (read_batch(o, val) < 0) return EXIT_USAGE;
        } else {
            cli_error(o->cmd, 0, "unknown option '%s' (see pagein %s --help)", a, o->cmd);
            return EXIT_USAGE;
        }
#undef NEED_VAL
#undef IS
    }
    if (re) {
        int e = regcomp(&o->re, re, REG_EXTENDED | REG_NOSUB);
        if (e != 0) {
            char msg[256];
            regerror(e, &o->re, msg, sizeof msg);
            cli_error(o->cmd, 0, "bad --tensors regex '%s': %s", re, msg);
            return EXIT_USAGE;
        }
        o->have_re = 1;
        o->re_text = re;
    }
    if (o->npaths == 0) {
        cli_error(o->cmd, 0, "no PATH given (see pagein %s --help)", o->cmd);
        return EXIT_USAGE;
    }
    if (o->json && o->kv) {
        cli_error(o->cmd, 0, "--json and -o kv exclude each other");
        return EXIT_USAGE;
    }
    if ((o->daemon || o->wait || o->pidfile) && o->mode != CACHE_LOCK) {
        cli_error(o->cmd, 0, "--daemon, --wait and --pidfile go with lock (-l)");
        return EXIT_USAGE;
    }
    if (o->wait && !o->daemon) {
        cli_error(o->cmd, 0, "--wait goes with --daemon");
        return EXIT_USAGE;
    }
    if (o->pidfile) {
        /* the same refusals write_pidfile makes, early, so that a daemon
         * without --wait does not report success before its holder fails */
        struct stat st;
        if (lstat(o->pidfile, &st) == 0 && (!S_ISREG(st.st_mode) || st.st_nlink != 1)) {
            cli_error(o->cmd, 0, "pidfile %s %s: refusing to write to it", o->pidfile,
                      S_ISLNK(st.st_mode) ? "is a symbolic link"
                      : S_ISREG(st.st_mode) ? "has other hard links" : "exists and is not a regular file");
            return EXIT_USAGE;
        }
    }
    if (o->have_range && (o->nlayers || re)) {
        cli_error(o->cmd, 0, "--range selects bytes of plain files; --layers and --tensors select parts of models: "
                             "use one or the other");
        return EXIT_USAGE;
    }
    if ((o->threads || o->chunk) && o->mode != CACHE_WARM) {
        cli_error(o->cmd, 0, "--threads and --chunk go with warm (-t)");
        return EXIT_USAGE;
    }
    return 0;
}

/* ---- targets ------------------------------------------------------------ */

static struct target *push_target(struct targets *ts, const char *path) {
    if (ts->n == ts->cap) {
        size_t cap = ts->cap ? ts->cap * 2 : 16;
        struct target *n = realloc(ts->t, cap * sizeof *n);
        if (!n) return NULL;
        ts->t = n;
        ts->cap = cap;
    }
    struct target *t = &ts->t[ts->n++];
    memset(t, 0, sizeof *t);
    t->path = strdup(path);
    return t;
}

static int selected_layer(const struct opts *o, int32_t l, int32_t L) {
    if (!o->nlayers) return 1;
    for (size_t i = 0; i < o->nlayers; i++) {
        int32_t lo = o->layers[i].lo == LAYER_FIRST ? -1 : o->layers[i].lo == LAYER_LAST ? L : o->layers[i].lo;
        int32_t hi = o->layers[i].hi == LAYER_FIRST ? -1 : o->layers[i].hi == LAYER_LAST ? L : o->layers[i].hi;
        if (l >= lo && l <= hi) return 1;
    }
    return 0;
}

static int selected_tensor(const struct opts *o, const pagein_tensor *t) {
    return !o->have_re || regexec(&o->re, t->name, 0, NULL, 0) == 0;
}

/* "3", "2-5", "embed", "head": one --layers span as the user wrote it. */
static const char *span_name(const struct layer_span *sp, char *buf, size_t n) {
    char a[16], b[16];
    if (sp->lo == LAYER_FIRST) snprintf(a, sizeof a, "embed");
    else if (sp->lo == LAYER_LAST) snprintf(a, sizeof a, "head");
    else snprintf(a, sizeof a, "%d", sp->lo);
    if (sp->hi == LAYER_FIRST) snprintf(b, sizeof b, "embed");
    else if (sp->hi == LAYER_LAST) snprintf(b, sizeof b, "head");
    else snprintf(b, sizeof b, "%d", sp->hi);
    if (sp->lo == sp->hi) snprintf(buf, n, "%s", a);
    else snprintf(buf, n, "%s-%s", a, b);
    return buf;
}

/* Tensors of a model in layer order, filtered by --layers and --tensors.
 * Returns 0, -1 (out of memory) or -2 after printing that a --layers span
 * or the --tensors regex matched nothing (a selection of nothing is a
 * mistake to report, not 0 bytes of work to do). */
static int select_tensors(const struct opts *o, struct target *t) {
    size_t n = pagein_model_tensor_count(t->m);
    t->sel = calloc(n ? n : 1, sizeof *t->sel);
    t->sel_layer = calloc(n ? n : 1, sizeof *t->sel_layer);
    if (!t->sel || !t->sel_layer) return -1;
    int32_t L = pagein_model_layer_count(t->m);
    for (int32_t l = -1; l <= L; l++) {
        if (!selected_layer(o, l, L)) continue;
        const pagein_tensor *const *ts;
        size_t k = pagein_model_layer_tensors(t->m, l, &ts);
        for (size_t i = 0; i < k && t->nsel < n; i++) {
            if (!selected_tensor(o, ts[i])) continue;
            t->sel_layer[t->nsel] = l;
            t->sel[t->nsel++] = ts[i];
            t->sel_bytes += ts[i]->nbytes;
        }
    }
    int bad = 0;
    for (size_t s = 0; s < o->nlayers; s++) {
        int32_t lo = o->layers[s].lo == LAYER_FIRST ? -1 : o->layers[s].lo == LAYER_LAST ? L : o->layers[s].lo;
        int32_t hi = o->layers[s].hi == LAYER_FIRST ? -1 : o->layers[s].hi == LAYER_LAST ? L : o->layers[s].hi;
        size_t found = 0;
        for (int32_t l = lo < -1 ? -1 : lo; l <= hi && l <= L && !found; l++) {
            const pagein_tensor *const *ts;
            found = pagein_model_layer_tensors(t->m, l, &ts);
        }
        if (found) continue;
        char sp[48], have[96];
        cli_model_layers_text(t->m, have, sizeof have);
        cli_error(o->cmd, 0, "%s: --layers %s matched nothing: the model has %s", t->path,
                  span_name(&o->layers[s], sp, sizeof sp), have);
        bad = 1;
    }
    if (!bad && o->have_re && t->nsel == 0) {
        cli_error(o->cmd, 0, "%s: --tensors '%s' matched no tensor%s", t->path, o->re_text,
                  o->nlayers ? " of the selected layers" : "");
        bad = 1;
    }
    return bad ? -2 : 0;
}

static struct targets *walk_targets; /* nftw has no context pointer */
static const struct opts *walk_opts;

static int walk_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)ftw;
    if (flag == FTW_D) {
        ((struct opts *)walk_opts)->ndirs++;
        return 0;
    }
    if (flag != FTW_F || !S_ISREG(sb->st_mode)) return 0;
    struct target *t = push_target(walk_targets, p);
    return t ? 0 : -1;
}

/* After a raw file target's open: --max-size. */
static void raw_opened(const struct opts *o, struct target *t) {
    if (o->have_max && pagein_cache_size(t->c) > o->max_size) {
        if (!o->quiet) fprintf(stderr, "pagein %s: skipping %s: larger than --max-size\n", o->cmd, t->path);
        pagein_cache_close(t->c);
        t->c = NULL;
    }
}

/* Opens one raw file target; prints and marks failures. */
static void open_raw(const struct opts *o, struct target *t) {
    int rc = pagein_cache_open(&t->c, t->path);
    if (rc < 0) {
        cli_error(o->cmd, rc, "%s", t->path);
        t->failed = 1;
        return;
    }
    raw_opened(o, t);
}

/* Opens targets [from, ts->n) at once (a walked folder: on a network or
 * FUSE filesystem each open is a round trip; pagein_cache_open_many keeps
 * many in flight). A file that failed is opened again alone for the
 * detail of its message. */
static void open_raw_many(const struct opts *o, struct targets *ts, size_t from) {
    size_t n = ts->n - from;
    if (n == 0) return;
    const char **paths = malloc(n * sizeof *paths);
    pagein_cache_file **cs = malloc(n * sizeof *cs);
    int *rcs = malloc(n * sizeof *rcs);
    if (!paths || !cs || !rcs) {
        free(paths);
        free(cs);
        free(rcs);
        for (size_t k = from; k < ts->n; k++) open_raw(o, &ts->t[k]);
        return;
    }
    for (size_t k = 0; k < n; k++) paths[k] = ts->t[from + k].path;
    pagein_cache_open_many(cs, paths, n, rcs);
    for (size_t k = 0; k < n; k++) {
        struct target *t = &ts->t[from + k];
        if (rcs[k] < 0) {
            open_raw(o, t); /* again, alone: the detail of its failure */
            continue;
        }
        t->c = cs[k];
        raw_opened(o, t);
    }
    free(paths);
    free(cs);
    free(rcs);
}

static int model_too_big(const struct opts *o, const pagein_model *m) {
    if (!o->have_max) return 0;
    for (size_t i = 0; i < pagein_model_file_count(m); i++) {
        pagein_file_info fi;
        pagein_file_get_info(pagein_model_file(m, i), &fi);
        if (fi.file_size > o->max_size) return 1;
    }
    return 0;
}

/* A name that promises a model (the format table's suffixes, a sharded
 * index, any *.index.json named directly): failing to open it is an error,
 * never a reason to treat it as a plain file. */
static int looks_like_model(const char *p) {
    char name[4096];
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') n--;
    if (n >= sizeof name) return 0;
    memcpy(name, p, n);
    name[n] = 0;
    return pagein_format_of_name(name) != PAGEIN_FORMAT_UNKNOWN ||
           (n >= 11 && strcmp(name + n - 11, ".index.json") == 0);
}

/* 1 if the first bytes of p are those of a model pagein reads (the format
 * table's detection), 0 if not, -errno if p cannot be read. O_NONBLOCK and
 * fstat: a FIFO swapped in after the caller's stat must not block us. */
static int sniff_model(const char *p) {
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return 0;
    }
    unsigned char b[64];
    ssize_t n;
    do n = pread(fd, b, sizeof b, 0);
    while (n < 0 && errno == EINTR);
    int e = errno;
    close(fd);
    if (n < 0) return -e;
    return pagein_detect_format(b, (size_t)n, (uint64_t)st.st_size) != PAGEIN_FORMAT_UNKNOWN;
}

/* 1 if directory p holds a file that a model open would pick up (the
 * library's folder rule: pagein_is_model_name), 0 if not, -errno if it
 * cannot be listed. */
static int dir_has_model(const char *p) {
    DIR *d = opendir(p);
    if (!d) return -errno;
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d))) found = pagein_is_model_name(e->d_name);
    closedir(d);
    return found;
}

/* What a path that is neither a regular file nor a directory is. */
static const char *file_kind(mode_t m) {
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    return "not a regular file";
}

static struct target *failed_target(struct targets *ts, const char *p, int usage) {
    struct target *t = push_target(ts, p);
    if (t) {
        t->failed = 1;
        t->usage = usage;
    }
    return t;
}

static void open_targets(struct opts *o, struct targets *ts) {
    for (size_t i = 0; i < o->npaths; i++) {
        const char *p = o->paths[i];
        struct stat st;
        if (stat(p, &st) != 0) {
            cli_error(o->cmd, 0, "%s: %s", p, strerror(errno));
            failed_target(ts, p, 0);
            continue;
        }
        /* A FIFO, socket or device would block the first read (or worse):
         * refuse it before anything opens it. */
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
            cli_error(o->cmd, 0, "%s: %s, not a regular file or directory", p, file_kind(st.st_mode));
            failed_target(ts, p, 0);
            continue;
        }
        /* Trying a plain file as a model reads its first page. Leave no
         * trace: if that page was not resident before, drop it again when
         * the file turns out not to be a model. */
        int page0_cold = 0;
        if (!o->have_range && S_ISREG(st.st_mode)) {
            pagein_cache_file *probe = NULL;
            pagein_residency r0;
            if (pagein_cache_open(&probe, p) == 0 && pagein_cache_residency(probe, 0, 1, &r0) == 0)
                page0_cold = r0.bytes > 0 && r0.resident_bytes == 0;
            pagein_cache_close(probe);
        }
        if (!o->have_range) {
            pagein_model_opts mo = PAGEIN_MODEL_OPTS_INIT;
            mo.strategy = PAGEIN_STRATEGY_LAZY;
            /* Warming a whole model pages 2 MiB blocks in: with
             * MADV_HUGEPAGE each is read as one folio instead of an 8 MiB
             * read-around (0.26-0.28 s instead of 0.26-0.39 s on the
             * sample, docs/BENCHMARKS.md). Not for --layers/--tensors: a
             * 2 MiB folio straddling the selection's edge would make the
             * neighbours resident, and a later evict of the selection could
             * not drop it (the kernel keeps partly covered large folios). */
            if (o->mode == CACHE_WARM && !o->nlayers && !o->have_re) mo.hints = PAGEIN_HINT_HUGEPAGE;
            mo.threads = o->threads;
            mo.chunk_bytes = o->chunk;
            pagein_model *m = NULL;
            int rc = pagein_model_open(&m, p, &mo);
            if (rc == 0) {
                if (model_too_big(o, m)) {
                    if (!o->quiet) fprintf(stderr, "pagein %s: skipping %s: a file is larger than --max-size\n", o->cmd, p);
                    pagein_model_close(m);
                    continue;
                }
                struct target *t = push_target(ts, p);
                if (!t) {
                    pagein_model_close(m);
                    continue;
                }
                t->m = m;
                if (select_tensors(o, t) < 0) t->failed = 1;
                continue;
            }
            /* Only what is not a model at all falls back to plain files: a
             * model that fails to open (a missing shard, a truncated file,
             * EMFILE) is an error, never "warmed" as its index or its bytes. */
            char detail[512];
            snprintf(detail, sizeof detail, "%s", cli_detail(p));
            int not_model;
            if (S_ISDIR(st.st_mode))
                not_model = (rc == PAGEIN_E_NOT_MODEL || rc <= PAGEIN_E_BASE) && dir_has_model(p) == 0;
            else
                /* BAD_MAGIC: the library recognised no format (a zip that
                 * is not a torch checkpoint, say) */
                not_model = rc == PAGEIN_E_NOT_MODEL ||
                            (rc <= PAGEIN_E_BASE && !looks_like_model(p) &&
                             (rc == PAGEIN_E_BAD_MAGIC || sniff_model(p) == 0));
            if (page0_cold) {
                pagein_cache_file *probe = NULL;
                if (pagein_cache_open(&probe, p) == 0) pagein_cache_evict(probe, 0, 1);
                pagein_cache_close(probe);
            }
            if (!not_model) {
                cli_error(o->cmd, rc, "%s: cannot open the model", p);
                failed_target(ts, p, 0);
                continue;
            }
            if (o->nlayers || o->have_re || o->list_tensors) {
                cli_error(o->cmd, 0, "%s: --layers and --tensors select parts of models, and this is not one (%s)",
                          p, detail);
                failed_target(ts, p, 1);
                continue;
            }
            if (o->verbose && !o->quiet)
                fprintf(stderr, "pagein %s: %s: not a model (%s); treating as plain file%s\n", o->cmd, p, detail,
                        S_ISDIR(st.st_mode) ? "s" : "");
        }
        if (S_ISDIR(st.st_mode)) {
            size_t before = ts->n;
            walk_targets = ts;
            walk_opts = o;
            nftw(p, walk_cb, 32, FTW_PHYS);
            open_raw_many(o, ts, before);
        } else {
            struct target *t = push_target(ts, p);
            if (t) open_raw(o, t);
        }
    }
}

static void close_targets(struct targets *ts) {
    for (size_t i = 0; i < ts->n; i++) {
        pagein_model_close(ts->t[i].m);
        pagein_cache_close(ts->t[i].c);
        free(ts->t[i].sel);
        free(ts->t[i].sel_layer);
        free(ts->t[i].path);
    }
    free(ts->t);
}

/* ---- output helpers ----------------------------------------------------- */

static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 0.0; }

static void bar(FILE *out, uint64_t a, uint64_t b, int width) {
    int fill = (int)(pct(a, b) / 100.0 * width + 0.5);
    if (a > 0 && fill == 0) fill = 1;
    if (a < b && fill == width) fill = width - 1;
    fputc('[', out);
    for (int i = 0; i < width; i++) fputc(i < fill ? '#' : '.', out);
    fputc(']', out);
}

static const char *layer_name(int32_t l, int32_t L, char *buf, size_t n) {
    if (l < 0) snprintf(buf, n, "embed");
    else if (l == L) snprintf(buf, n, "head");
    else snprintf(buf, n, "%d", l);
    return buf;
}

/* vmtouch -v: one character per slice of the file: 'O' all resident, 'o'
 * some, ' ' none. */
typedef int (*res_fn)(const void *obj, uint64_t off, uint64_t len, pagein_residency *r);
static int res_cache(const void *obj, uint64_t off, uint64_t len, pagein_residency *r) {
    return pagein_cache_residency(obj, off, len, r);
}
static int res_file(const void *obj, uint64_t off, uint64_t len, pagein_residency *r) {
    return pagein_file_residency(obj, off, len, r);
}

static void chart(FILE *out, const char *path, res_fn fn, const void *obj, uint64_t lo, uint64_t len) {
    const uint64_t ps = pagein_page_size();
    uint64_t pages = (len + ps - 1) / ps;
    int cols = pages < CHART_COLS ? (int)pages : CHART_COLS;
    if (*path) fprintf(out, "%s\n", path);
    fputc('[', out);
    for (int c = 0; c < cols; c++) {
        uint64_t p0 = pages * (uint64_t)c / (uint64_t)cols, p1 = pages * (uint64_t)(c + 1) / (uint64_t)cols;
        uint64_t a = lo + p0 * ps, b = MIN_U64(lo + p1 * ps, lo + len);
        pagein_residency r = {0, 0, 0, 0};
        if (b > a) fn(obj, a, b - a, &r);
        fputc(r.resident_pages == 0 ? ' ' : r.resident_pages == r.pages ? 'O' : 'o', out);
    }
    pagein_residency tot = {0, 0, 0, 0};
    fn(obj, lo, len, &tot);
    fprintf(out, "] %llu/%llu\n", (unsigned long long)tot.resident_pages, (unsigned long long)tot.pages);
}

/* ---- residency of a target ---------------------------------------------- */

/* One snapshot of a target: per selected tensor (models), per file (bytes
 * of the selection in that file) and per whole file (vmtouch's view). */
struct snap {
    pagein_residency *tensor; /* nsel */
    pagein_residency *file;   /* nfiles: the selection's bytes in each file */
    pagein_residency *whole;  /* nfiles: the whole file, header included */
    size_t nfiles;
    pagein_residency total;   /* the selection */
    pagein_residency pages;   /* whole files */
};

static void snap_free(struct snap *s) {
    free(s->tensor);
    free(s->file);
    free(s->whole);
    memset(s, 0, sizeof *s);
}

static uint64_t range_len(const struct opts *o, uint64_t size) {
    if (o->r_lo >= size) return 0;
    uint64_t avail = size - o->r_lo;
    return o->r_len == 0 || o->r_len > avail ? avail : o->r_len;
}

static int take_snap(const struct opts *o, const struct target *t, struct snap *s) {
    memset(s, 0, sizeof *s);
    int rc = 0;
    if (t->m) {
        s->nfiles = pagein_model_file_count(t->m);
        s->tensor = calloc(t->nsel ? t->nsel : 1, sizeof *s->tensor);
        s->file = calloc(s->nfiles ? s->nfiles : 1, sizeof *s->file);
        s->whole = calloc(s->nfiles ? s->nfiles : 1, sizeof *s->whole);
        if (!s->tensor || !s->file || !s->whole) return -ENOMEM;
        for (size_t i = 0; i < t->nsel && rc == 0; i++) {
            rc = pagein_model_tensor_residency(t->m, t->sel[i], &s->tensor[i]);
            if (rc == 0 && (t->sel[i]->flags & PAGEIN_TENSOR_ASSEMBLED)) /* pieces in several files */
                for (size_t f = 0; f < s->nfiles && rc == 0; f++) {
                    pagein_residency part;
                    rc = pagein_model_tensor_file_residency(t->m, t->sel[i], f, &part);
                    if (rc == 0) pagein_residency_add(&s->file[f], &part);
                }
            else if (rc == 0 && t->sel[i]->file < s->nfiles)
                pagein_residency_add(&s->file[t->sel[i]->file], &s->tensor[i]);
            if (rc == 0) pagein_residency_add(&s->total, &s->tensor[i]);
        }
        for (size_t f = 0; f < s->nfiles && rc == 0; f++) {
            rc = pagein_file_residency(pagein_model_file(t->m, f), 0, 0, &s->whole[f]);
            if (rc == 0) pagein_residency_add(&s->pages, &s->whole[f]);
        }
    } else if (t->c) {
        s->nfiles = 1;
        s->file = calloc(1, sizeof *s->file);
        s->whole = calloc(1, sizeof *s->whole);
        if (!s->file || !s->whole) return -ENOMEM;
        rc = pagein_cache_residency(t->c, o->r_lo, range_len(o, pagein_cache_size(t->c)), &s->file[0]);
        if (rc == 0 && o->have_range && range_len(o, pagein_cache_size(t->c)) == 0) memset(&s->file[0], 0, sizeof s->file[0]);
        if (rc == 0) rc = pagein_cache_residency(t->c, 0, 0, &s->whole[0]);
        s->total = s->file[0];
        s->pages = s->whole[0];
    }
    return rc;
}

static const char *file_path(const struct target *t, size_t f) {
    if (!t->m) return t->path;
    pagein_file_info fi;
    pagein_file_get_info(pagein_model_file(t->m, f), &fi);
    return fi.path;
}

/* ---- the four modes ------------------------------------------------------ */

struct totals {
    pagein_residency before, after, pages;
    uint64_t bytes;
    size_t files;
    double seconds;
};

/* Calls fn for each run of selected tensors that share a layer. */
static void each_layer(const struct target *t, const struct snap *s,
                       void (*fn)(void *ctx, int32_t layer, const pagein_residency *r), void *ctx) {
    size_t k = 0;
    while (k < t->nsel) {
        int32_t l = t->sel_layer[k];
        pagein_residency r = {0, 0, 0, 0};
        for (; k < t->nsel && t->sel_layer[k] == l; k++) pagein_residency_add(&r, &s->tensor[k]);
        fn(ctx, l, &r);
    }
}

static void human_layer(void *ctx, int32_t l, const pagein_residency *r) {
    const struct target *t = ctx;
    char nb[16], b1[32];
    printf("  %-8s %10s  ", layer_name(l, pagein_model_layer_count(t->m), nb, sizeof nb),
           cli_human_bytes(r->bytes, b1, sizeof b1));
    bar(stdout, r->resident_bytes, r->bytes, 40);
    printf(" %5.1f%%\n", pct(r->resident_bytes, r->bytes));
}

static void print_human(const struct opts *o, const struct target *t, const struct snap *s) {
    char b1[32], b2[32];
    for (size_t f = 0; f < s->nfiles; f++) {
        printf("%s: %s%s, %s resident (%.1f%%)\n", file_path(t, f), cli_human_bytes(s->file[f].bytes, b1, sizeof b1),
               t->m ? " of tensor data" : "", cli_human_bytes(s->file[f].resident_bytes, b2, sizeof b2),
               pct(s->file[f].resident_bytes, s->file[f].bytes));
        if (o->verbose) {
            if (t->m)
                chart(stdout, "", res_file, pagein_model_file(t->m, f), 0, s->whole[f].bytes);
            else
                chart(stdout, "", res_cache, t->c, o->r_lo, range_len(o, pagein_cache_size(t->c)));
        }
    }
    if (!t->m) return;
    if (t->nsel) {
        printf("  %-8s %10s  resident\n", "layer", "size");
        each_layer(t, s, human_layer, (void *)t);
    }
    if (o->list_tensors) {
        printf("  %-50s %-6s %10s  resident\n", "tensor", "layer", "size");
        for (size_t i = 0; i < t->nsel; i++) {
            char nb[16];
            printf("  %-50s %-6s %10s  %5.1f%%\n", t->sel[i]->name,
                   layer_name(t->sel_layer[i], pagein_model_layer_count(t->m), nb, sizeof nb),
                   cli_human_bytes(t->sel[i]->nbytes, b1, sizeof b1),
                   pct(s->tensor[i].resident_bytes, s->tensor[i].bytes));
        }
    }
}

struct json_ctx {
    int *first;
    const char *model;
};

static void json_layer(void *ctx, int32_t l, const pagein_residency *r) {
    struct json_ctx *c = ctx;
    printf("%s\n    {\"model\": ", *c->first ? "" : ",");
    cli_json_str(stdout, c->model, strlen(c->model));
    printf(", \"layer\": %d, \"bytes\": %llu, \"resident_bytes\": %llu}", l, (unsigned long long)r->bytes,
           (unsigned long long)r->resident_bytes);
    *c->first = 0;
}

/* `pagein resident --json`: the stable schema documented in docs/CLI.md. */
static void print_json_resident(const struct opts *o, struct targets *ts, struct snap *snaps, const struct totals *tot) {
    int first = 1;
    printf("{\n  \"files\": [");
    for (size_t i = 0; i < ts->n; i++) {
        const struct target *t = &ts->t[i];
        for (size_t f = 0; f < snaps[i].nfiles; f++) {
            const char *p = file_path(t, f);
            printf("%s\n    {\"path\": ", first ? "" : ",");
            cli_json_str(stdout, p, strlen(p));
            printf(", \"bytes\": %llu, \"resident_bytes\": %llu, \"file_bytes\": %llu, "
                   "\"file_resident_bytes\": %llu, \"pages\": %llu, \"resident_pages\": %llu}",
                   (unsigned long long)snaps[i].file[f].bytes, (unsigned long long)snaps[i].file[f].resident_bytes,
                   (unsigned long long)snaps[i].whole[f].bytes,
                   (unsigned long long)snaps[i].whole[f].resident_bytes, (unsigned long long)snaps[i].whole[f].pages,
                   (unsigned long long)snaps[i].whole[f].resident_pages);
            first = 0;
        }
    }
    printf("%s],\n  \"layers\": [", first ? "" : "\n  ");
    first = 1;
    for (size_t i = 0; i < ts->n; i++) {
        if (!ts->t[i].m) continue;
        struct json_ctx c = {&first, ts->t[i].path};
        each_layer(&ts->t[i], &snaps[i], json_layer, &c);
    }
    printf("%s]", first ? "" : "\n  ");
    if (o->list_tensors) {
        printf(",\n  \"tensors\": [");
        first = 1;
        for (size_t i = 0; i < ts->n; i++) {
            const struct target *t = &ts->t[i];
            for (size_t k = 0; t->m && k < t->nsel; k++) {
                printf("%s\n    {\"model\": ", first ? "" : ",");
                cli_json_str(stdout, t->path, strlen(t->path));
                printf(", \"name\": ");
                cli_json_str(stdout, t->sel[k]->name, t->sel[k]->name_len);
                printf(", \"layer\": %d, \"file\": %u, \"bytes\": %llu, \"resident_bytes\": %llu}", t->sel_layer[k],
                       t->sel[k]->file, (unsigned long long)snaps[i].tensor[k].bytes,
                       (unsigned long long)snaps[i].tensor[k].resident_bytes);
                first = 0;
            }
        }
        printf("%s]", first ? "" : "\n  ");
    }
    printf(",\n  \"bytes\": %llu,\n  \"resident_bytes\": %llu,\n  \"pages\": %llu,\n  \"resident_pages\": %llu\n}\n",
           (unsigned long long)tot->after.bytes, (unsigned long long)tot->after.resident_bytes,
           (unsigned long long)tot->pages.pages, (unsigned long long)tot->pages.resident_pages);
}

static void print_kv(const struct opts *o, const struct totals *tot) {
    printf("Files=%zu Directories=%zu ResidentPages=%llu TotalPages=%llu ResidentSize=%llu TotalSize=%llu "
           "ResidentPercentage=%g Elapsed=%g\n",
           tot->files, o->ndirs, (unsigned long long)tot->pages.resident_pages, (unsigned long long)tot->pages.pages,
           (unsigned long long)tot->after.resident_bytes, (unsigned long long)tot->after.bytes,
           pct(tot->after.resident_bytes, tot->after.bytes), tot->seconds);
}

/* warm: the model through the load engine's parallel populate (in batches
 * of about 256 MiB when a progress bar is drawn), plain files through
 * pagein_cache_warm. */
static int do_warm(const struct opts *o, struct target *t, struct cli_progress *pg, uint64_t *done) {
    const uint64_t batch = (uint64_t)256 << 20;
    if (t->m) {
        if (!pg->enabled) {
            int rc = t->nsel ? pagein_model_load_tensors(t->m, t->sel, t->nsel) : 0;
            *done += t->sel_bytes;
            return rc;
        }
        size_t k = 0;
        while (k < t->nsel) {
            size_t k0 = k;
            uint64_t b = 0;
            while (k < t->nsel && (k == k0 || b + t->sel[k]->nbytes <= batch)) b += t->sel[k++]->nbytes;
            FORWARD_RC(pagein_model_load_tensors(t->m, t->sel + k0, k - k0));
            *done += b;
            cli_progress_update(pg, *done);
        }
        return 0;
    }
    uint64_t len = range_len(o, pagein_cache_size(t->c));
    for (uint64_t off = 0; off < len;) {
        uint64_t n = pg->enabled ? MIN_U64(batch, len - off) : len - off;
        FORWARD_RC(pagein_cache_warm(t->c, o->r_lo + off, n, o->threads));
        off += n;
        *done += n;
        cli_progress_update(pg, *done);
    }
    return 0;
}

static int usable(const struct target *t) { return !t->failed && (t->m || t->c); }

/* warm: the plain files (a walked folder) as one engine run
 * (pagein_cache_warm_many: the requests of every file share one queue, so
 * a folder of small files on a network or FUSE filesystem does not cost a
 * round trip per file), in groups of about 256 MiB when a progress bar is
 * drawn. A group that fails is warmed again file by file, so that each
 * failure names its file. Sets warmed[i] for the targets it did. */
static void warm_plain(const struct opts *o, struct targets *ts, struct cli_progress *pg, uint64_t *done,
                       char *warmed) {
    const uint64_t batch = (uint64_t)256 << 20;
    const pagein_cache_file **cs = malloc(ts->n * sizeof *cs);
    size_t *idx = malloc(ts->n * sizeof *idx);
    if (!cs || !idx) {
        free(cs);
        free(idx);
        return; /* run() warms them one by one */
    }
    size_t i = 0;
    while (i < ts->n) {
        size_t k = 0;
        uint64_t b = 0;
        for (; i < ts->n && (k == 0 || !pg->enabled || b < batch); i++) {
            struct target *t = &ts->t[i];
            if (!usable(t) || t->m) continue;
            cs[k] = t->c;
            idx[k++] = i;
            b += range_len(o, pagein_cache_size(t->c));
        }
        if (k == 0) break;
        if (pagein_cache_warm_many(cs, k, o->r_lo, o->r_len, o->threads) < 0) continue; /* run() redoes them */
        for (size_t j = 0; j < k; j++) warmed[idx[j]] = 1;
        *done += b;
        cli_progress_update(pg, *done);
    }
    free(cs);
    free(idx);
}

static int lock_target(const struct opts *o, struct target *t) {
    if (t->m) return t->nsel ? pagein_model_lock_tensors(t->m, t->sel, t->nsel) : 0;
    return pagein_cache_lock(t->c, o->r_lo, range_len(o, pagein_cache_size(t->c)));
}

static int evict_target(const struct opts *o, struct target *t) {
    if (t->m) return t->nsel ? pagein_model_evict_tensors(t->m, t->sel, t->nsel) : 0;
    return pagein_cache_evict(t->c, o->r_lo, range_len(o, pagein_cache_size(t->c)));
}


/* "files" for warm, evict and lock: the selection's bytes per file, with
 * residency before (evict) and after. */
static void print_json_files(const struct opts *o, struct targets *ts, struct snap *before, struct snap *after) {
    int first = 1;
    printf("{\n  \"files\": [");
    for (size_t i = 0; i < ts->n; i++) {
        if (!usable(&ts->t[i])) continue;
        for (size_t f = 0; f < after[i].nfiles; f++) {
            const char *p = file_path(&ts->t[i], f);
            printf("%s\n    {\"path\": ", first ? "" : ",");
            cli_json_str(stdout, p, strlen(p));
            printf(", \"bytes\": %llu", (unsigned long long)after[i].file[f].bytes);
            if (o->mode == CACHE_EVICT)
                printf(", \"resident_bytes_before\": %llu, \"resident_bytes_after\": %llu",
                       (unsigned long long)before[i].file[f].resident_bytes,
                       (unsigned long long)after[i].file[f].resident_bytes);
            else
                printf(", \"resident_bytes\": %llu", (unsigned long long)after[i].file[f].resident_bytes);
            printf("}");
            first = 0;
        }
    }
    printf("%s]", first ? "" : "\n  ");
}

static volatile sig_atomic_t dummy_sig;

/* Blocks the signals that end a lock holder; sigwait() picks them up. */
static void block_stop_signals(sigset_t *set) {
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    sigprocmask(SIG_BLOCK, set, NULL);
}

/* The pidfile we wrote (device and inode), so that we remove only that. */
static dev_t pid_dev;
static ino_t pid_ino;

/* Writes our pid to path without ever following a symlink or writing into
 * someone else's file: a new file is created with O_EXCL|O_NOFOLLOW; an
 * existing one (a stale pidfile) is reused only if it is a regular file
 * with one link (O_NOFOLLOW refuses a symlink; the link count a hard link
 * to a victim). A pidfile in a world-writable directory is then no way to
 * make pagein, possibly run as root, overwrite another file. */
static int write_pidfile(const char *cmd, const char *path) {
    if (!path) return 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ELOOP)
            cli_error(cmd, 0, "pidfile %s is a symbolic link: refusing to write through it", path);
        else
            cli_error(cmd, 0, "cannot write pidfile %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
        close(fd);
        cli_error(cmd, 0, "pidfile %s exists and is %s: refusing to write to it", path,
                  S_ISREG(st.st_mode) ? "a file with other hard links" : "not a regular file");
        return -1;
    }
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    int rc = ftruncate(fd, 0) == 0 && write(fd, buf, (size_t)n) == n ? 0 : -errno;
    if (close(fd) != 0 && rc == 0) rc = -errno;
    if (rc < 0) {
        cli_error(cmd, 0, "cannot write pidfile %s: %s", path, strerror(-rc));
        return -1;
    }
    pid_dev = st.st_dev;
    pid_ino = st.st_ino;
    return 0;
}

/* Removes the pidfile only if it is still the one we wrote. */
static void remove_pidfile(const char *path) {
    struct stat st;
    if (path && lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == pid_dev && st.st_ino == pid_ino)
        unlink(path);
}

/* The daemon handshake: one status byte per message; a holder that died
 * before sending reads as EXIT_INVALID. */
static void send_status(int fd, int status) {
    unsigned char st = (unsigned char)status;
    ssize_t n;
    do n = write(fd, &st, 1);
    while (n < 0 && errno == EINTR); /* EPIPE: parent gone, keep holding */
}

static int read_status(int fd) {
    unsigned char st = EXIT_INVALID;
    ssize_t n;
    do n = read(fd, &st, 1);
    while (n < 0 && errno == EINTR);
    return n == 1 ? st : EXIT_INVALID;
}

static void detach_stdio(void) {
    fflush(stdout);
    fflush(stderr);
    int fd = open("/dev/null", O_RDWR);
    if (fd >= 0) {
        dup2(fd, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        if (fd > 2) close(fd);
    }
}

static void report(const struct opts *o, struct targets *ts, struct snap *before, struct snap *after,
                   struct totals *tot) {
    char b1[32], b2[32], b3[32];
    if (o->quiet) return;
    if (o->json) {
        if (o->mode == CACHE_RESIDENT) {
            print_json_resident(o, ts, after, tot);
            return;
        }
        print_json_files(o, ts, before, after);
        printf(",\n  \"bytes\": %llu", (unsigned long long)tot->after.bytes);
        switch (o->mode) {
        case CACHE_WARM:
            printf(",\n  \"resident_bytes\": %llu,\n  \"seconds\": %.6f,\n  \"gb_per_s\": %.3f",
                   (unsigned long long)tot->after.resident_bytes, tot->seconds,
                   tot->seconds > 0 ? (double)tot->bytes / tot->seconds / 1e9 : 0.0);
            break;
        case CACHE_EVICT:
            printf(",\n  \"resident_bytes_before\": %llu,\n  \"resident_bytes_after\": %llu",
                   (unsigned long long)tot->before.resident_bytes, (unsigned long long)tot->after.resident_bytes);
            break;
        case CACHE_LOCK:
            printf(",\n  \"locked_bytes\": %llu,\n  \"resident_bytes\": %llu,\n  \"pid\": %ld", (unsigned long long)tot->bytes,
                   (unsigned long long)tot->after.resident_bytes, (long)getpid());
            break;
        default: break;
        }
        printf("\n}\n");
        return;
    }
    if (o->kv) {
        print_kv(o, tot);
        return;
    }
    if (o->mode == CACHE_RESIDENT || o->verbose)
        for (size_t i = 0; i < ts->n; i++)
            if (usable(&ts->t[i])) print_human(o, &ts->t[i], &after[i]);
    switch (o->mode) {
    case CACHE_RESIDENT:
        printf("total: %s of %s resident (%.1f%%); whole files: %llu of %llu pages\n",
               cli_human_bytes(tot->after.resident_bytes, b1, sizeof b1), cli_human_bytes(tot->after.bytes, b2, sizeof b2),
               pct(tot->after.resident_bytes, tot->after.bytes), (unsigned long long)tot->pages.resident_pages,
               (unsigned long long)tot->pages.pages);
        break;
    case CACHE_WARM:
        printf("warmed %s in %.3f s (%.2f GB/s); %s of %s now resident (%.1f%%)\n",
               cli_human_bytes(tot->bytes, b1, sizeof b1), tot->seconds,
               tot->seconds > 0 ? (double)tot->bytes / tot->seconds / 1e9 : 0.0,
               cli_human_bytes(tot->after.resident_bytes, b2, sizeof b2), cli_human_bytes(tot->after.bytes, b3, sizeof b3),
               pct(tot->after.resident_bytes, tot->after.bytes));
        break;
    case CACHE_EVICT:
        for (size_t i = 0; i < ts->n && !o->verbose; i++) {
            if (!usable(&ts->t[i])) continue;
            for (size_t f = 0; f < after[i].nfiles; f++)
                printf("%s: %s resident before, %s after\n", file_path(&ts->t[i], f),
                       cli_human_bytes(before[i].file[f].resident_bytes, b1, sizeof b1),
                       cli_human_bytes(after[i].file[f].resident_bytes, b2, sizeof b2));
        }
        printf("evicted: %s resident before, %s after, of %s\n",
               cli_human_bytes(tot->before.resident_bytes, b1, sizeof b1),
               cli_human_bytes(tot->after.resident_bytes, b2, sizeof b2), cli_human_bytes(tot->after.bytes, b3, sizeof b3));
        break;
    case CACHE_LOCK:
        printf("locked %s in %zu file%s (%s resident); holding until SIGINT, SIGTERM or SIGHUP (pid %ld)\n",
               cli_human_bytes(tot->bytes, b1, sizeof b1), tot->files, tot->files == 1 ? "" : "s",
               cli_human_bytes(tot->after.resident_bytes, b2, sizeof b2), (long)getpid());
        break;
    }
}

/* Does the mode's work on every usable target, then reports. */
static int run(const struct opts *o, struct targets *ts, struct totals *tot, struct snap *before, struct snap *after) {
    int status = EXIT_OK;
    uint64_t total = 0, done = 0;
    for (size_t i = 0; i < ts->n; i++) {
        struct target *t = &ts->t[i];
        if (t->failed && status != EXIT_USAGE) status = t->usage ? EXIT_USAGE : EXIT_INVALID;
        if (!usable(t)) continue;
        tot->files += t->m ? pagein_model_file_count(t->m) : 1;
        total += t->m ? t->sel_bytes : range_len(o, pagein_cache_size(t->c));
    }
    if (o->mode == CACHE_EVICT)
        for (size_t i = 0; i < ts->n; i++)
            if (usable(&ts->t[i]) && take_snap(o, &ts->t[i], &before[i]) == 0) pagein_residency_add(&tot->before, &before[i].total);
    struct cli_progress pg;
    cli_progress_start(&pg, o->mode == CACHE_WARM ? "warm" : o->mode == CACHE_LOCK ? "lock" : "scan", total);
    if (o->quiet || o->mode != CACHE_WARM) pg.enabled = 0;
    double t0 = cli_now();
    char *warmed = o->mode == CACHE_WARM && ts->n ? calloc(ts->n, 1) : NULL;
    if (warmed) warm_plain(o, ts, &pg, &done, warmed);
    for (size_t i = 0; i < ts->n; i++) {
        struct target *t = &ts->t[i];
        if (!usable(t)) continue;
        int rc = 0;
        switch (o->mode) {
        case CACHE_WARM: rc = warmed && warmed[i] ? 0 : do_warm(o, t, &pg, &done); break;
        case CACHE_EVICT: rc = evict_target(o, t); break;
        case CACHE_LOCK: rc = lock_target(o, t); break;
        default: break;
        }
        if (rc < 0) {
            cli_error(o->cmd, rc, "%s", t->path);
            t->failed = 1;
            status = EXIT_INVALID;
        } else if (o->mode != CACHE_RESIDENT) {
            tot->bytes += t->m ? t->sel_bytes : range_len(o, pagein_cache_size(t->c));
        }
    }
    tot->seconds = cli_now() - t0;
    free(warmed);
    cli_progress_end(&pg);
    for (size_t i = 0; i < ts->n; i++) {
        if (!usable(&ts->t[i])) continue;
        int rc = take_snap(o, &ts->t[i], &after[i]);
        if (rc < 0) {
            cli_error(o->cmd, rc, "%s: residency", ts->t[i].path);
            ts->t[i].failed = 1;
            status = EXIT_INVALID;
            continue;
        }
        pagein_residency_add(&tot->after, &after[i].total);
        pagein_residency_add(&tot->pages, &after[i].pages);
    }
    if (o->mode == CACHE_RESIDENT) tot->seconds = cli_now() - t0;
    return status;
}

int cache_main(enum cache_mode mode, int argc, char **argv) {
    struct opts o;
    memset(&o, 0, sizeof o);
    o.mode = mode;
    o.cmd = argv[0];
    int status = parse_args(&o, argc, argv);
    struct targets ts = {NULL, 0, 0};
    struct snap *before = NULL, *after = NULL;
    if (status == 1) {
        status = EXIT_OK;
        goto out;
    }
    if (status) goto out;
    open_targets(&o, &ts);
    before = calloc(ts.n ? ts.n : 1, sizeof *before);
    after = calloc(ts.n ? ts.n : 1, sizeof *after);
    if (!before || !after) {
        cli_error(o.cmd, 0, "out of memory");
        status = EXIT_USAGE;
        goto out;
    }
    struct totals tot;
    memset(&tot, 0, sizeof tot);
    if (o.mode != CACHE_LOCK) {
        status = run(&o, &ts, &tot, before, after);
        /* nothing to report when every path failed: no "warmed 0 B" */
        int any = 0;
        for (size_t i = 0; i < ts.n; i++) any |= usable(&ts.t[i]);
        if (any || status == EXIT_OK) report(&o, &ts, before, after, &tot);
        goto out;
    }

    /* lock: the holder must be the process that locks (locks are not
     * inherited across fork). */
    sigset_t stop;
    int pfd[2] = {-1, -1};
    /* a path that failed to open fails the command now, before a daemon
     * without --wait could report a holder that would only exit */
    for (size_t i = 0; i < ts.n; i++)
        if (ts.t[i].failed && status != EXIT_USAGE) status = ts.t[i].usage ? EXIT_USAGE : EXIT_INVALID;
    if (status != EXIT_OK) goto out;
    if (o.daemon) {
        if (pipe(pfd) != 0) {
            cli_error(o.cmd, 0, "pipe: %s", strerror(errno));
            status = EXIT_USAGE;
            goto out;
        }
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
            cli_error(o.cmd, 0, "fork: %s", strerror(errno));
            status = EXIT_USAGE;
            goto out;
        }
        if (pid > 0) {
            /* the holder sends one byte once its pidfile is written (the
             * parent returns only then, so the pidfile exists when it
             * does) and, with --wait, a second with lock's status */
            close(pfd[1]);
            status = read_status(pfd[0]);
            if (status == EXIT_OK && o.wait) status = read_status(pfd[0]);
            close(pfd[0]);
            if (status != EXIT_OK) waitpid(pid, NULL, 0);
            else if (!o.wait && !o.quiet && !o.json && !o.kv)
                printf("pagein %s: holder pid %ld\n", o.cmd, (long)pid);
            goto out;
        }
        close(pfd[0]);
        setsid();
        /* the parent closes its end after the first byte without --wait:
         * a later write must fail with EPIPE, not kill the holder */
        signal(SIGPIPE, SIG_IGN);
    }
    block_stop_signals(&stop);
    /* the pidfile is written before the (possibly long) lock so that a
     * daemon's parent can return as soon as it exists; it is removed again
     * if the lock fails, and at every exit of the holder after that */
    if (o.pidfile && write_pidfile(o.cmd, o.pidfile) < 0) status = EXIT_USAGE;
    if (o.daemon) {
        send_status(pfd[1], status);
        if (!o.wait) {
            close(pfd[1]);
            pfd[1] = -1;
            detach_stdio();
        }
    }
    if (status == EXIT_OK) status = run(&o, &ts, &tot, before, after);
    if (status == EXIT_OK) report(&o, &ts, before, after, &tot);
    fflush(stdout);
    if (o.daemon && pfd[1] >= 0) {
        detach_stdio();
        send_status(pfd[1], status);
        close(pfd[1]);
    }
    if (status != EXIT_OK) remove_pidfile(o.pidfile);
    if (status == EXIT_OK) {
        int sig = 0;
        sigwait(&stop, &sig);
        (void)dummy_sig;
        remove_pidfile(o.pidfile);
    }
    if (o.daemon) {
        close_targets(&ts);
        _exit(status);
    }
out:
    for (size_t i = 0; i < ts.n && before && after; i++) {
        snap_free(&before[i]);
        snap_free(&after[i]);
    }
    free(before);
    free(after);
    close_targets(&ts);
    for (size_t i = 0; i < o.npaths; i++) free(o.paths[i]);
    free(o.paths);
    free(o.layers);
    if (o.have_re) regfree(&o.re);
    return status;
}
