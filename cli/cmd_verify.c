/* cmd_verify.c - `pagein verify FILE...`: strict validation of each file
 * with pagein_open (any format it supports). A per-file failure is
 * reported and the next file checked. */
#include "cli.h"

#include <string.h>

/* The detail starts with the path already; print it once. */
static const char *detail_for(const char *path) {
    const char *d = pagein_last_error_detail();
    size_t n = strlen(path);
    if (strncmp(d, path, n) == 0 && d[n] == ':' && d[n + 1] == ' ') d += n + 2;
    return d;
}

static void usage(FILE *out) {
    fputs("usage: pagein verify [--lenient] [-q] FILE...\n"
          "       pagein verify --manifest M [--lenient] [-q] MODEL\n"
          "\n"
          "Validates each file strictly (for safetensors: every rule of the reference\n"
          "implementation, plus duplicate keys, strict UTF-8, nesting and size limits)\n"
          "and prints `FILE: OK (N tensors)` or `FILE: INVALID: reason: detail`.\n"
          "No tensor data is read.\n"
          "\n"
          "  --lenient   accept trailing bytes after the data (PAGEIN_OPEN_LENIENT)\n"
          "  -q          print only failures\n"
          "  --manifest M  also hash every tensor of MODEL and compare with the\n"
          "              integrity manifest M (pagein hash; docs/FORMAT-MANIFEST.md):\n"
          "              checks the data, not only the header\n"
          "\n"
          "Exit status: 0 all files valid, 1 any file invalid, 2 usage or I/O error\n"
          "(a file that cannot be read).\n",
          out);
}

static int verify_main(int argc, char **argv) {
    pagein_open_opts o = PAGEIN_OPEN_OPTS_INIT;
    int quiet = 0, nfiles = 0, invalid = 0, ioerr = 0;
    int opts_done = 0;
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
        }
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
        pagein_file *f = NULL;
        int rc = pagein_open(&f, a, &o);
        if (rc == 0) {
            if (!quiet) printf("%s: OK (%zu tensors)\n", a, pagein_tensor_count(f));
            fflush(stdout);
            cli_warn_expansion(stderr, "verify", a, f);
            pagein_close(f);
        } else if (rc > -4096) {
            /* -errno: the file could not be read at all */
            printf("%s: ERROR: %s: %s\n", a, pagein_strerror(rc), detail_for(a));
            ioerr = 1;
        } else {
            printf("%s: INVALID: %s: %s\n", a, pagein_strerror(rc), detail_for(a));
            invalid = 1;
        }
    }
    if (!nfiles) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (manifest) {
        if (nfiles != 1) {
            cli_error("verify", 0, "--manifest checks one MODEL at a time");
            return EXIT_USAGE;
        }
        if (!ioerr && !invalid) {
            const char *model = NULL;
            opts_done = 0;
            for (int i = 1; i < argc && !model; i++) {
                const char *a = argv[i];
                if (!opts_done && a[0] == '-' && a[1]) {
                    if (strcmp(a, "--") == 0) opts_done = 1;
                    if (strcmp(a, "--manifest") == 0) i++;
                    continue;
                }
                model = a;
            }
            fflush(stdout);
            int r = cli_manifest_check(model, manifest, 0, 0, quiet);
            if (r == EXIT_USAGE) ioerr = 1;
            else if (r != EXIT_OK) invalid = 1;
        }
    }
    fflush(stdout);
    return ioerr ? EXIT_USAGE : invalid ? EXIT_INVALID : EXIT_OK;
}

CLI_COMMAND(verify, "verify", "validate model files strictly; OK or the precise reason", verify_main)
