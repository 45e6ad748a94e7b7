/* cmd_hash.c - `pagein hash MODEL`: write or check an integrity manifest of
 * per-tensor XXH3-128 hashes. cli_manifest_check() is also the hook behind
 * `pagein verify --manifest`. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void hash_usage(FILE *out) {
    fprintf(out,
            "usage: pagein hash [options] MODEL\n"
            "\n"
            "Hash every tensor of MODEL (XXH3-128 of its bytes) and the header bytes of\n"
            "every file, in parallel, and write a manifest (docs/FORMAT-MANIFEST.md) next\n"
            "to it; with --check, hash again and compare with the manifest instead.\n"
            "Reads are guarded: a file truncated while hashing is an error, not a crash.\n"
            "\n"
            "options:\n"
            "  -o, --manifest M  manifest path (default FILE.pagein-manifest for a file,\n"
            "                    DIR/.pagein-manifest for a directory, `DIR` or `DIR/`)\n"
            "  -c, --check       verify MODEL against the manifest (= pagein verify --manifest M)\n"
            "  -t, --threads N   hashing threads (default: automatic)\n"
            "      --json        machine-readable result on stdout\n"
            "  -q, --quiet       print only errors and mismatches\n"
            "  -h, --help        this text\n"
            "\n"
            "Exit status: 0 written / everything matches, 1 mismatch or invalid model or\n"
            "manifest, 2 usage or I/O error, or hashing not built (needs libxxhash-dev).\n");
}

struct mm_ctx {
    int json;
    int first;
};

static void on_mismatch(void *ctx, const char *file, const char *tensor, size_t tlen, const char *what) {
    struct mm_ctx *c = ctx;
    if (c->json) {
        fputs(c->first ? "" : ",", stdout);
        c->first = 0;
        fputs("{\"file\":", stdout);
        cli_json_str(stdout, file, strlen(file));
        fputs(",\"tensor\":", stdout);
        if (tensor) cli_json_str(stdout, tensor, tlen);
        else fputs("null", stdout);
        fputs(",\"problem\":", stdout);
        cli_json_str(stdout, what, strlen(what));
        fputs("}", stdout);
    } else if (tensor) {
        printf("MISMATCH %s: tensor '%.*s': %s\n", file, (int)tlen, tensor, what);
    } else {
        printf("MISMATCH %s: %s\n", file, what);
    }
}

static int exit_for(int rc) {
    if (rc == PAGEIN_E_UNSUPPORTED || rc == PAGEIN_E_INVALID) return EXIT_USAGE;
    return rc <= PAGEIN_E_BASE ? EXIT_INVALID : EXIT_USAGE;
}

static void print_rate(const pagein_hash_stats *st) {
    char b[32];
    double gbs = st->seconds > 0 ? (double)st->bytes / st->seconds / 1e9 : 0;
    printf("%zu tensor%s in %zu file%s, %s in %.3f s: %.2f GB/s\n", st->tensors, st->tensors == 1 ? "" : "s",
           st->files, st->files == 1 ? "" : "s", cli_human_bytes(st->bytes, b, sizeof b), st->seconds, gbs);
}

char *cli_default_manifest(const char *model) {
    size_t n = strlen(model);
    struct stat st;
    int dir = stat(model, &st) == 0 && S_ISDIR(st.st_mode);
    while (n > 1 && model[n - 1] == '/') n--;
    const char *suffix = dir ? (n == 1 && model[0] == '/' ? ".pagein-manifest" : "/.pagein-manifest")
                             : ".pagein-manifest";
    size_t len = n + strlen(suffix) + 1;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%.*s%s", (int)n, model, suffix);
    return p;
}

int cli_manifest_check(const char *cmd, const char *model, const char *manifest, unsigned threads, int json,
                       int quiet) {
    pagein_hash_opts o = PAGEIN_HASH_OPTS_INIT;
    struct mm_ctx c = {json, 1};
    o.threads = threads;
    o.on_mismatch = on_mismatch;
    o.ctx = &c;
    pagein_hash_stats st;
    if (json) {
        fputs("{\"model\":", stdout);
        cli_json_str(stdout, model, strlen(model));
        fputs(",\"manifest\":", stdout);
        cli_json_str(stdout, manifest, strlen(manifest));
        fputs(",\"mismatches\":[", stdout);
    }
    int rc = pagein_manifest_verify(model, manifest, &o, &st);
    if (json) {
        printf("],\"ok\":%s,\"error\":", rc == 0 ? "true" : "false");
        if (rc < 0 && rc != PAGEIN_E_HASH_MISMATCH) {
            const char *e = pagein_strerror(rc);
            cli_json_str(stdout, e, strlen(e));
        } else {
            fputs("null", stdout);
        }
        printf(",\"tensors\":%zu,\"bytes\":%llu,\"seconds\":%.6f}\n", st.tensors, (unsigned long long)st.bytes,
               st.seconds);
    }
    if (rc == PAGEIN_E_HASH_MISMATCH) {
        if (!json)
            printf("%s: %zu mismatch%s against %s\n", model, st.mismatches, st.mismatches == 1 ? "" : "es",
                   manifest);
        return EXIT_INVALID;
    }
    if (rc < 0) {
        cli_error(cmd, rc, "cannot check %s against %s", model, manifest);
        return exit_for(rc);
    }
    if (!json && !quiet) {
        printf("%s: OK, matches %s; ", model, manifest);
        print_rate(&st);
    }
    return EXIT_OK;
}

static int hash_main(int argc, char **argv) {
    const char *model = NULL, *manifest = NULL;
    int check = 0, json = 0, quiet = 0;
    unsigned threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            hash_usage(stdout);
            return EXIT_OK;
        } else if (strcmp(a, "-c") == 0 || strcmp(a, "--check") == 0) {
            check = 1;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--manifest") == 0) {
            if (++i >= argc) {
                cli_error("hash", 0, "%s needs a path", a);
                return EXIT_USAGE;
            }
            manifest = argv[i];
        } else if (strcmp(a, "-t") == 0 || strcmp(a, "--threads") == 0) {
            char *end;
            if (++i >= argc || (threads = (unsigned)strtoul(argv[i], &end, 10), *end) || threads > 256) {
                cli_error("hash", 0, "--threads needs a number from 0 to 256");
                return EXIT_USAGE;
            }
        } else if (a[0] == '-' && a[1]) {
            cli_error("hash", 0, "unknown option '%s' (see pagein hash --help)", a);
            return EXIT_USAGE;
        } else if (!model) {
            model = a;
        } else {
            cli_error("hash", 0, "one MODEL at a time (see pagein hash --help)");
            return EXIT_USAGE;
        }
    }
    if (!model) {
        hash_usage(stderr);
        return EXIT_USAGE;
    }
    int pc = cli_check_path("hash", model);
    if (pc) return pc;
    char *def = NULL;
    if (!manifest) {
        def = cli_default_manifest(model);
        if (!def) return EXIT_USAGE;
        manifest = def;
        /* --check, when the default place has none, also looks where the
         * same model's manifest may be under another spelling: DIR.pagein-
         * manifest (written by `pagein hash DIR` before this version), and
         * for a sharded index DIR/.pagein-manifest (`pagein hash DIR`) */
        struct stat st;
        if (check && stat(def, &st) != 0 && errno == ENOENT) {
            size_t n = strlen(model);
            while (n > 1 && model[n - 1] == '/') n--;
            char *alt[2] = {malloc(n + sizeof ".pagein-manifest"), NULL};
            if (alt[0]) snprintf(alt[0], n + sizeof ".pagein-manifest", "%.*s.pagein-manifest", (int)n, model);
            if (n >= 11 && strncmp(model + n - 11, ".index.json", 11) == 0) {
                const char *slash = memrchr(model, '/', n);
                size_t d = slash ? (size_t)(slash - model) : 0;
                alt[1] = malloc(d + sizeof "/.pagein-manifest" + 1);
                if (alt[1]) {
                    if (slash) snprintf(alt[1], d + sizeof "/.pagein-manifest" + 1, "%.*s/.pagein-manifest", (int)d, model);
                    else snprintf(alt[1], sizeof ".pagein-manifest", ".pagein-manifest");
                }
            }
            for (int k = 0; k < 2; k++) {
                if (alt[k] && manifest == def && strcmp(alt[k], def) != 0 && stat(alt[k], &st) == 0 &&
                    S_ISREG(st.st_mode)) {
                    manifest = alt[k];
                    alt[k] = def; /* freed below */
                }
            }
            if (manifest != def) {
                def = (char *)manifest;
            }
            free(alt[0]);
            free(alt[1]);
        }
    }
    int ex;
    if (check) {
        ex = cli_manifest_check("hash", model, manifest, threads, json, quiet);
    } else {
        pagein_hash_opts o = PAGEIN_HASH_OPTS_INIT;
        o.threads = threads;
        pagein_hash_stats st;
        int rc = pagein_manifest_write(model, manifest, &o, &st);
        if (rc < 0) {
            cli_error("hash", rc, "cannot hash %s", model);
            ex = exit_for(rc);
        } else {
            if (json) {
                fputs("{\"model\":", stdout);
                cli_json_str(stdout, model, strlen(model));
                fputs(",\"manifest\":", stdout);
                cli_json_str(stdout, manifest, strlen(manifest));
                printf(",\"files\":%zu,\"tensors\":%zu,\"bytes\":%llu,\"seconds\":%.6f,\"gb_per_s\":%.3f}\n",
                       st.files, st.tensors, (unsigned long long)st.bytes, st.seconds,
                       st.seconds > 0 ? (double)st.bytes / st.seconds / 1e9 : 0.0);
            } else if (!quiet) {
                printf("%s -> %s: ", model, manifest);
                print_rate(&st);
            }
            ex = EXIT_OK;
        }
    }
    free(def);
    return ex;
}

CLI_COMMAND(hash, "hash", "write or check a manifest of per-tensor XXH3-128 hashes", hash_main)
