/* cmd_resident.c - `pagein resident`: show which files, layers and tensors are in the page cache. The work is in cli/cache.c;
 * `--svg FILE` (here) also draws each model's residency per layer and tensor as a heat map. */
#include "cache.h"
#include "cli.h"
#include "svg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Options of resident that take the next word as their value. */
static int takes_value(const char *a) {
    static const char *const v[] = {"--layers", "-p", "--range", "-m", "--max-size", "-b", "--batch",
                                    "--threads", "--chunk", "-P", "--pidfile", "-o"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!strcmp(a, v[i])) return 1;
    return 0;
}

struct heat_rows {
    size_t n, cap;
    char **label, **key;
    double **cells, *value;
    size_t *ncells;
    const char ***names;
};

static int add_row(struct heat_rows *h) {
    if (h->n == h->cap) {
        size_t c = h->cap ? h->cap * 2 : 64;
        void *p[6] = {realloc(h->label, c * sizeof *h->label), realloc(h->key, c * sizeof *h->key),
                      realloc(h->cells, c * sizeof *h->cells), realloc(h->value, c * sizeof *h->value),
                      realloc(h->ncells, c * sizeof *h->ncells), realloc(h->names, c * sizeof *h->names)};
        if (p[0]) h->label = p[0];
        if (p[1]) h->key = p[1];
        if (p[2]) h->cells = p[2];
        if (p[3]) h->value = p[3];
        if (p[4]) h->ncells = p[4];
        if (p[5]) h->names = p[5];
        for (int i = 0; i < 6; i++)
            if (!p[i]) return -ENOMEM;
        h->cap = c;
    }
    h->label[h->n] = h->key[h->n] = NULL;
    h->cells[h->n] = NULL;
    h->names[h->n] = NULL;
    h->ncells[h->n] = 0;
    h->value[h->n] = 0;
    return 0;
}

/* One row per layer (embed, 0..L-1, head) of the model at path, a cell per tensor. */
static int model_rows(const char *path, int many, struct heat_rows *h, pagein_model **keep) {
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_LAZY;
    if (pagein_model_open(keep, path, &o) < 0) return 1; /* not a model: nothing to draw */
    pagein_model *m = *keep;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    int32_t L = pagein_model_layer_count(m);
    for (int32_t l = -1; l <= L; l++) {
        const pagein_tensor *const *lt;
        size_t n = pagein_model_layer_tensors(m, l, &lt);
        if (!n) continue;
        if (add_row(h) < 0) return -ENOMEM;
        size_t r = h->n;
        char lab[64], name[300], key[48];
        if (l < 0) snprintf(lab, sizeof lab, "embed");
        else if (l == L) snprintf(lab, sizeof lab, "head");
        else snprintf(lab, sizeof lab, "%d", l);
        snprintf(name, sizeof name, "%.200s%s%s", many ? base : "", many ? ":" : "", lab);
        snprintf(key, sizeof key, "%d", l);
        snprintf(name + strlen(name), sizeof name - strlen(name), "%s", "");
        h->label[r] = strdup(name);
        char kk[300];
        snprintf(kk, sizeof kk, "%.200s%s%s", many ? base : "", many ? ":" : "", key);
        h->key[r] = strdup(kk);
        h->cells[r] = calloc(n, sizeof *h->cells[r]);
        h->names[r] = calloc(n, sizeof *h->names[r]);
        h->n++;
        if (!h->label[r] || !h->key[r] || !h->cells[r] || !h->names[r]) return -ENOMEM;
        uint64_t bytes = 0, res = 0;
        for (size_t i = 0; i < n; i++) {
            pagein_residency rr = {0, 0, 0, 0};
            if (pagein_model_tensor_residency(m, lt[i], &rr) < 0) continue;
            bytes += rr.bytes;
            res += rr.resident_bytes;
            h->cells[r][i] = rr.bytes ? (double)rr.resident_bytes / (double)rr.bytes : 0;
            h->names[r][i] = lt[i]->name;
        }
        h->ncells[r] = n;
        h->value[r] = bytes ? (double)res / (double)bytes : 0;
    }
    return 0;
}

/* The tensor names of a numbered layer without the layer's prefix
 * ("model.layers.3.self_attn.q_proj.weight" -> "self_attn.q_proj.weight"),
 * from the layer row with the most tensors: the heat map's column headers.
 * Fills lab[] (pointers into the names) and returns how many. */
static size_t column_labels(const struct heat_rows *h, const char **lab, size_t cap) {
    size_t best = SIZE_MAX;
    for (size_t r = 0; r < h->n; r++) {
        const char *k = strrchr(h->label[r], ':');
        k = k ? k + 1 : h->label[r];
        if (*k < '0' || *k > '9') continue; /* embed, head */
        if (best == SIZE_MAX || h->ncells[r] > h->ncells[best]) best = r;
    }
    if (best == SIZE_MAX) return 0;
    const char *num = strrchr(h->label[best], ':');
    num = num ? num + 1 : h->label[best];
    char pat[32];
    snprintf(pat, sizeof pat, ".%.20s.", num);
    size_t n = h->ncells[best] < cap ? h->ncells[best] : cap;
    for (size_t i = 0; i < n; i++) {
        const char *name = h->names[best][i], *p = name ? strstr(name, pat) : NULL;
        lab[i] = p ? p + strlen(pat) : name;
    }
    return n;
}

static int draw_svg(const char *svg, int argc, char **argv) {
    struct heat_rows h = {0};
    pagein_model *ms[64];
    size_t nm = 0, npaths = 0;
    struct stat st;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' || (i > 1 && takes_value(argv[i - 1]))) continue;
        if (stat(argv[i], &st) == 0) npaths++;
    }
    int rc = 0;
    for (int i = 1; i < argc && rc >= 0 && nm < 64; i++) {
        if (argv[i][0] == '-' || (i > 1 && takes_value(argv[i - 1])) || stat(argv[i], &st) != 0) continue;
        ms[nm] = NULL;
        rc = model_rows(argv[i], npaths > 1, &h, &ms[nm]);
        if (ms[nm]) nm++;
        if (rc > 0) rc = 0;
    }
    if (rc >= 0 && h.n == 0) rc = -EINVAL;
    if (rc >= 0) {
        const char *first = NULL;
        for (int i = 1; i < argc && !first; i++)
            if (argv[i][0] != '-' && !(i > 1 && takes_value(argv[i - 1]))) first = argv[i];
        char title[300];
        const char *b = first ? strrchr(first, '/') : NULL;
        snprintf(title, sizeof title, "pagein resident: %.200s%s, page-cache residency per layer and tensor",
                 first ? (b ? b + 1 : first) : "", nm > 1 ? " and more" : "");
        static const char *cols[512];
        size_t ncols = column_labels(&h, cols, sizeof cols / sizeof cols[0]);
        struct svg_heat sh = {.title = title, .row_key_prefix = "layer", .col_label = cols, .ncol_labels = ncols,
                              .row_title = "layer",
                              .note = "one row per layer (embed, 0..L-1, head), one cell per tensor in layer order, "
                                      "named above; right: the layer's resident bytes",
                              .nrows = h.n, .row_label = (const char *const *)h.label,
                              .row_key = (const char *const *)h.key, .cells = (const double *const *)h.cells,
                              .ncells = h.ncells, .cell_names = (const char *const *const *)h.names,
                              .row_value = h.value};
        rc = svg_heat_map(svg, &sh);
    }
    if (rc < 0)
        cli_error("resident", 0, "cannot write %s: %s", svg,
                  rc == -EINVAL ? "no model among the paths (--svg draws models' layers and tensors)" : strerror(-rc));
    for (size_t r = 0; r < h.n; r++) {
        free(h.label[r]);
        free(h.key[r]);
        free(h.cells[r]);
        free(h.names[r]);
    }
    free(h.label);
    free(h.key);
    free(h.cells);
    free(h.value);
    free(h.ncells);
    free(h.names);
    for (size_t i = 0; i < nm; i++) pagein_model_close(ms[i]);
    return rc;
}

static int resident_main(int argc, char **argv) {
    const char *svg = NULL;
    char **av = malloc((size_t)(argc + 1) * sizeof *av);
    if (!av) {
        cli_error("resident", -ENOMEM, "out of memory");
        return EXIT_USAGE;
    }
    int ac = 0;
    for (int i = 0; i < argc; i++) {
        if (i > 0 && !strcmp(argv[i], "--svg") && i + 1 < argc) svg = argv[++i];
        else if (i > 0 && !strncmp(argv[i], "--svg=", 6)) svg = argv[i] + 6;
        else av[ac++] = argv[i];
    }
    av[ac] = NULL;
    int rc = cache_main(CACHE_RESIDENT, ac, av);
    if (svg && rc != EXIT_USAGE && draw_svg(svg, ac, av) < 0) rc = EXIT_USAGE;
    free(av);
    return rc;
}

CLI_COMMAND(resident, "resident", "show which files, layers and tensors are in the page cache", resident_main)
