/* cmd_install.c - `pagein install SRC DEST`: copy a model into place
 * atomically, never truncating a file that may be mapped. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static void install_usage(FILE *out) {
    fprintf(out,
            "usage: pagein install [options] SRC DEST\n"
            "\n"
            "Copy SRC to DEST atomically: the data goes to a temporary file in DEST's\n"
            "directory, which is fsynced and renamed over DEST, then the directory is\n"
            "fsynced. An existing DEST is never truncated or written in place, so\n"
            "processes that have it mapped keep the old version; killed at any moment,\n"
            "DEST is either the old file or the new one. If DEST is a directory the file\n"
            "is installed there under SRC's name.\n"
            "\n"
            "options:\n"
            "  --no-validate     do not check the copy with the format parser before\n"
            "                    it replaces DEST (default: validate)\n"
            "  --rate SIZE       copy at most SIZE bytes per second (e.g. 50M)\n"
            "  --no-sync         skip the fsyncs (tests; not crash-safe)\n"
            "  -q, --quiet       print nothing on success\n"
            "  -h, --help        this text\n"
            "\n"
            "Exit status: 0 installed, 1 SRC is not a valid model (nothing changed),\n"
            "2 usage or I/O error (nothing changed).\n");
}

static int install_main(int argc, char **argv) {
    pagein_install_opts o = PAGEIN_INSTALL_OPTS_INIT;
    o.flags = PAGEIN_INSTALL_VALIDATE;
    int quiet = 0;
    const char *pos[2];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            install_usage(stdout);
            return EXIT_OK;
        } else if (strcmp(a, "--no-validate") == 0) {
            o.flags &= ~PAGEIN_INSTALL_VALIDATE;
        } else if (strcmp(a, "--no-sync") == 0) {
            o.flags |= PAGEIN_INSTALL_NO_SYNC;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if (strcmp(a, "--rate") == 0) {
            if (i + 1 >= argc || cli_parse_size(argv[i + 1], &o.max_rate) != 0) {
                cli_error("install", 0, "--rate needs a size such as 50M");
                return EXIT_USAGE;
            }
            i++;
        } else if (a[0] == '-' && a[1]) {
            cli_error("install", 0, "unknown option '%s' (see pagein install --help)", a);
            return EXIT_USAGE;
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            cli_error("install", 0, "too many arguments (see pagein install --help)");
            return EXIT_USAGE;
        }
    }
    if (npos != 2) {
        install_usage(stderr);
        return EXIT_USAGE;
    }
    /* a FIFO or device as SRC would block the copy's first read */
    int pc = cli_check_path("install", pos[0]);
    if (pc) return pc;
    double t0 = cli_now();
    int rc = pagein_install(pos[0], pos[1], &o);
    if (rc < 0) {
        cli_error("install", rc, "%s -> %s not installed", pos[0], pos[1]);
        return rc <= PAGEIN_E_BASE && rc != PAGEIN_E_INVALID ? EXIT_INVALID : EXIT_USAGE;
    }
    if (!quiet) printf("installed %s -> %s (%.2f s)\n", pos[0], pos[1], cli_now() - t0);
    return EXIT_OK;
}

CLI_COMMAND(install, "install", "copy a model into place atomically (temp file, fsync, rename)", install_main)
