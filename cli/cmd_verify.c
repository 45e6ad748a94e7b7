/* cmd_verify.c - `pagein verify FILE...`: strict validation of each file
 * with pagein_open (any format it supports), or of every file of a model
 * named by a directory or a sharded index (pagein_model_open). A per-file
 * failure is reported and the next file checked. With --manifest the data
 * is hashed too, and OK is printed only once it matched. */
#include "cli.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

/* One path, validated: a file with pagein_open, a directory or a sharded
 * index with pagein_model_open (every file of the model, each as strictly).
 * Returns 0 (valid; *ntensors, *nfiles set), -errno / PAGEIN_E_* with the
 * detail set (the caller prints it), 1 for a FIFO, socket or device (never
 * opened: it could block), 2 when stat fails (errno in *nfiles). */
static int check_path(const char *path, const pagein_open_opts *o, size_t *ntensors, size_t *nfiles) {
    struct stat st;
    if (stat(path, &st) != 0) {
        *nfiles = (size_t)errno; /* for the caller's message: no library detail */
        return 2;
    }
    if (S_ISDIR(st.st_mode) || ends_with(path, ".index.json")) {
        pagein_model_opts mo = PAGEIN_MODEL_OPTS_INIT;
        mo.strategy = PAGEIN_STRATEGY_LAZY;
        mo.open_flags = o->flags;
        pagein_model *m = NULL;
        int rc = pagein_model_open(&m, path, &mo);
        if (rc < 0) return rc;
        *ntensors = pagein_model_tensor_count(m);
        *nfiles = pagein_model_file_count(m);
        fflush(stdout);
        for (size_t i = 0; i < *nfiles; i++) cli_warn_expansion(stderr, "verify", path, pagein_model_file(m, i));
        pagein_model_close(m);
        return 0;
    }
    if (!S_ISREG(st.st_mode)) return 1; /* a FIFO, socket, device: never opened */
    pagein_file *f = NULL;
    int rc = pagein_open(&f, path, o);
    if (rc < 0) return rc;
    *ntensors = pagein_tensor_count(f);
    *nfiles = 1;
    fflush(stdout);
    cli_warn_expansion(stderr, "verify", path, f);
    pagein_close(f);
    return 0;
}

static const char *kind_of(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return "not a file";
    if (S_ISFIFO(st.st_mode)) return "a FIFO";
    if (S_ISSOCK(st.st_mode)) return "a socket";
    if (S_ISCHR(st.st_mode)) return "a character device";
    if (S_ISBLK(st.st_mode)) return "a block device";
    return "not a regular file";
}

static void print_ok(const char *path, size_t nt, size_t nf, const char *manifest) {
    printf("%s: OK (%zu tensor%s", path, nt, nt == 1 ? "" : "s");
    if (nf != 1) printf(" in %zu files", nf);
    if (manifest) printf("; data matches %s", manifest);
    printf(")\n");
}

static void usage(FILE *out) {
    fputs("usage: pagein verify [--lenient] [-q] FILE...\n"
          "       pagein verify --manifest M [--lenient] [-q] MODEL\n"
          "\n"
          "Validates each file strictly (for safetensors: every rule of the reference\n"
          "implementation, plus duplicate keys, strict UTF-8, nesting and size limits)\n"
          "and prints `FILE: OK (N tensors)` or `FILE: INVALID: reason: detail`.\n"
          "A directory or a *.safetensors.index.json is opened as a model and every\n"
          "file of it validated. No tensor data is read.\n"
          "\n"
          "  --lenient   accept trailing bytes after the data (PAGEIN_OPEN_LENIENT)\n"
          "  -q          print only failures\n"
          "  --manifest M  also hash every tensor of MODEL (a file, directory or index)\n"
          "              and compare with the integrity manifest M (pagein hash;\n"
          "              docs/FORMAT-MANIFEST.md): checks the data, not only the header;\n"
          "              OK is printed only after the data matched\n"
          "\n"
          "Exit status: 0 all files valid, 1 any file invalid, 2 usage or I/O error\n"
          "(a file that cannot be read, a FIFO or device).\n",
          out);
}

static int verify_main(int argc, char **argv) {
    pagein_open_opts o = PAGEIN_OPEN_OPTS_INIT;
    int quiet = 0, nfiles = 0, invalid = 0, ioerr = 0;
    int opts_done = 0, nmodels = 0;
    const char *manifest = NULL; /* the safety area's hook: cmd_hash.c */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!opts_done && a[0] == '-' && a[1]) {
            if (cli_is_help(a)) {
                usage(stdout);
                return EXIT_OK;
            } else if (strcmp(a, "--lenient") == 0) {
                o.flags |= PAGEIN_OPEN_LENIENT;
            } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
                quiet = 1;
            } else if (strcmp(a, "--") == 0) {
                opts_done = 1;
            } else if (strcmp(a, "--manifest") == 0) {
                if (i + 1 >= argc) {
                    cli_error("verify", 0, "--manifest needs a path");
                    return EXIT_USAGE;
                }
                manifest = argv[++i];
            } else {
                cli_error("verify", 0, "unknown option '%s'", a);
                usage(stderr);
                return EXIT_USAGE;
            }
        } else {
            nmodels++;
        }
    }
    if (manifest && nmodels != 1) {
        cli_error("verify", 0, "--manifest checks one MODEL at a time");
        return EXIT_USAGE;
    }
    opts_done = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!opts_done && a[0] == '-' && a[1]) {
            if (strcmp(a, "--") == 0) opts_done = 1;
            if (strcmp(a, "--manifest") == 0) i++;
            continue;
        }
        nfiles++;
        size_t nt = 0, nf = 0;
        int rc = check_path(a, &o, &nt, &nf);
        if (rc == 0) {
            if (manifest) {
                /* the header is valid; the data's verdict comes from the
                 * manifest, and OK is printed only once that agrees */
                fflush(stdout);
                int r = cli_manifest_check("verify", a, manifest, 0, 0, 1);
                if (r == EXIT_OK) {
                    if (!quiet) print_ok(a, nt, nf, manifest);
                } else if (r == EXIT_USAGE) {
                    ioerr = 1;
                } else {
                    invalid = 1;
                }
            } else if (!quiet) {
                print_ok(a, nt, nf, NULL);
            }
        } else if (rc == 2) {
            printf("%s: ERROR: %s\n", a, strerror((int)nf));
            ioerr = 1;
        } else if (rc == 1) {
            printf("%s: ERROR: %s, not a regular file or directory\n", a, kind_of(a));
            ioerr = 1;
        } else if (rc > -4096) {
            /* -errno: the file could not be read at all */
            const char *d = cli_detail(a);
            const char *e = pagein_strerror(rc);
            if (*d && strstr(d, e)) printf("%s: ERROR: %s\n", a, d);
            else if (*d) printf("%s: ERROR: %s: %s\n", a, e, d);
            else printf("%s: ERROR: %s\n", a, e);
            ioerr = 1;
        } else {
            printf("%s: INVALID: %s: %s\n", a, pagein_strerror(rc), cli_detail(a));
            invalid = 1;
        }
    }
    if (!nfiles) {
        usage(stderr);
        return EXIT_USAGE;
    }
    fflush(stdout);
    return ioerr ? EXIT_USAGE : invalid ? EXIT_INVALID : EXIT_OK;
}

CLI_COMMAND(verify, "verify", "validate model files strictly; OK or the precise reason", verify_main)
