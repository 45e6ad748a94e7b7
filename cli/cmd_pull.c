/* cmd_pull.c - `pagein pull SRC [DEST]`: a remote model or training shards
 * into local storage, in parallel ranges, resumable, verified, installed
 * atomically (pagein_pull; docs/REMOTE.md). */
#include "cli.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static void pull_usage(FILE *out) {
    fprintf(out,
            "usage: pagein pull [options] SRC [DEST]\n"
            "\n"
            "Download SRC at the link's limit: each file in chunks over parallel range\n"
            "requests on kept-alive connections. Interrupted (even by kill -9), run the\n"
            "same command again: only the chunks that were not complete are fetched\n"
            "(at most one per connection again). Each file is verified (sha256 when the\n"
            "server states it, e.g. the Hub's LFS oid; the MD5 ETag of a single-part\n"
            "S3/GCS object; else size and ETag) and, when a pagein manifest (`pagein\n"
            "hash`) lies next to the source and lists the file, against the manifest:\n"
            "its size, header and every tensor's hash. The manifest is SRC.pagein-manifest,\n"
            "else DIR/.pagein-manifest for a file or *.index.json URL; for an s3://\n"
            "prefix or an hf:// repository, the *.pagein-manifest files it holds. Then\n"
            "the file is renamed into place: the final path holds the whole, verified\n"
            "file or nothing; a file that fails is removed with its part file (the next\n"
            "run fetches it again). --json's \"verified\": sha256, md5, size+etag,\n"
            "manifest, sha256+manifest or md5+manifest (several, comma-separated, when\n"
            "files differ, e.g. \"size+etag,manifest\" for an index and its shards).\n"
            "\n"
            "SRC: http(s)://HOST/PATH, s3://BUCKET/KEY, gs://BUCKET/KEY, a prefix ending\n"
            "in '/' (every object under it), hf://ORG/NAME[@REV][/PATH] (a file, or the\n"
            "whole repository; REV may be refs%%2Fpr%%2F1), an http(s)://HOST/DIR/ (the\n"
            "model in it, as `pagein plan`), or a *.index.json (the index and every\n"
            "shard it names; the index is installed last, after its shards).\n"
            "A server that ignores Range is read as one plain stream (said on stderr;\n"
            "not resumable). Pulling again into the same place skips the files that\n"
            "are unchanged (same size and ETag, or the server's sha256/MD5). A second\n"
            "pull of a file another pull is writing fails at once, naming it.\n"
            "DEST: a file (single file) or a directory. Without DEST, hf:// goes to the\n"
            "Hugging Face cache (HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub;\n"
            "models--ORG--NAME/{blobs,snapshots,refs}) where transformers finds it, and\n"
            "other sources to the current directory.\n"
            "\n"
            "options:\n"
            "  -c, --connections N  parallel requests (default 16, PAGEIN_HTTP_CONNECTIONS)\n"
            "      --chunk SIZE     bytes per request (default: about 8M, an equal share\n"
            "                       per connection, >= 1M)\n"
            "      --stage DIR      stage into DIR keeping relative paths (training shards\n"
            "                       to local NVMe)\n"
            "      --cache-dir DIR  Hugging Face cache root for hf:// (instead of the\n"
            "                       environment's)\n"
            "      --no-sync        skip the fsyncs (tests; not crash-safe)\n"
            "      --json           a JSON summary on stdout\n"
            "  -q, --quiet          print only errors\n"
            "  -h, --help           this text\n"
            "\n"
            "Environment: AWS_* and ~/.aws for s3:// (docs/REMOTE.md), GS_* for gs://,\n"
            "HF_ENDPOINT and HF_TOKEN for hf://, CURL_CA_BUNDLE / AWS_CA_BUNDLE for a\n"
            "private CA, PAGEIN_HTTP_RETRIES/_TIMEOUT/_MIN_RATE/_BACKOFF_MS.\n"
            "\n"
            "Exit status: 0 pulled, 1 the data failed verification or changed during\n"
            "the download, 2 usage, network or I/O error (a later run resumes).\n");
}

struct prog {
    struct cli_progress bar;
    char file[512];
    int enabled, quiet;
};

/* What the pull says a user should know (a server that ignores Range). */
static void on_note(void *ctx, const char *file, const char *msg) {
    struct prog *p = ctx;
    if (!p->quiet) fprintf(stderr, "pagein pull: %s: %s\n", file, msg);
}

static void on_progress(void *ctx, const char *file, uint64_t done, uint64_t total) {
    struct prog *p = ctx;
    if (!p->enabled) return;
    if (strcmp(p->file, file) != 0) {
        if (p->file[0]) cli_progress_end(&p->bar);
        snprintf(p->file, sizeof p->file, "%s", file);
        char shown[1024];
        pagein_url_redact(file, shown, sizeof shown); /* no signature in a presigned URL's name */
        const char *base = strrchr(shown, '/');
        cli_progress_start(&p->bar, base ? base + 1 : shown, total);
    }
    cli_progress_update(&p->bar, done);
}

static int pull_main(int argc, char **argv) {
    pagein_pull_opts o = PAGEIN_PULL_OPTS_INIT;
    int json = 0, quiet = 0;
    const char *pos[2] = {NULL, NULL};
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(a)) {
            pull_usage(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--connections")) {
            char *end;
            long n = next ? strtol(next, &end, 10) : 0;
            if (!next || *end || n < 1 || n > 64) {
                cli_error("pull", 0, "%s needs a number from 1 to 64", a);
                return EXIT_USAGE;
            }
            o.connections = (unsigned)n;
            i++;
        } else if (!strcmp(a, "--chunk")) {
            if (!next || cli_parse_size(next, &o.chunk_bytes) != 0 || o.chunk_bytes < 4096) {
                cli_error("pull", 0, "--chunk needs a size of at least 4K such as 8M");
                return EXIT_USAGE;
            }
            i++;
        } else if (!strcmp(a, "--stage") || !strcmp(a, "--cache-dir")) {
            if (!next) {
                cli_error("pull", 0, "%s needs a directory", a);
                return EXIT_USAGE;
            }
            if (a[2] == 's') o.stage_dir = next;
            else o.cache_dir = next;
            i++;
        } else if (!strcmp(a, "--no-sync")) {
            o.flags |= PAGEIN_PULL_NO_SYNC;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (a[0] == '-' && a[1]) {
            cli_error("pull", 0, "unknown option '%s' (see pagein pull --help)", a);
            return EXIT_USAGE;
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            cli_error("pull", 0, "too many arguments (see pagein pull --help)");
            return EXIT_USAGE;
        }
    }
    if (npos < 1) {
        pull_usage(stderr);
        return EXIT_USAGE;
    }
    if (!pagein_remote_available()) {
        cli_error("pull", 0, "this pagein was built without libcurl (Debian libcurl4-openssl-dev): no remote sources");
        return EXIT_USAGE;
    }
    struct prog p;
    memset(&p, 0, sizeof p);
    p.enabled = !quiet && !json;
    p.quiet = quiet;
    o.progress = on_progress;
    o.note = on_note;
    o.ctx = &p;
    pagein_pull_stats st;
    int rc = pagein_pull(pos[0], pos[1], &o, &st);
    char shown[4096]; /* the source as printed: no password or signature */
    pagein_url_redact(pos[0], shown, sizeof shown);
    if (p.file[0]) cli_progress_end(&p.bar);
    double rate = st.seconds > 0 ? (double)st.fetched / st.seconds : 0;
    if (json) {
        fputs("{\"src\":", stdout);
        cli_json_str(stdout, shown, strlen(shown));
        printf(",\"ok\":%s,\"path\":", rc == 0 ? "true" : "false");
        cli_json_str(stdout, st.path, strlen(st.path));
        printf(",\"files\":%zu,\"bytes\":%llu,\"fetched\":%llu,\"resumed\":%llu,\"cached\":%llu,"
               "\"requests\":%llu,\"retries\":%llu,\"seconds\":%.3f,\"rate_bytes_per_s\":%.0f,\"verified\":",
               st.files, (unsigned long long)st.bytes, (unsigned long long)st.fetched,
               (unsigned long long)st.resumed, (unsigned long long)st.cached, (unsigned long long)st.requests,
               (unsigned long long)st.retries, st.seconds, rate);
        cli_json_str(stdout, st.verified, strlen(st.verified));
        if (rc < 0) {
            fputs(",\"error\":", stdout);
            const char *d = pagein_last_error_detail();
            cli_json_str(stdout, d, strlen(d));
        }
        fputs("}\n", stdout);
    }
    if (rc < 0) {
        cli_error("pull", rc, "%s not pulled", shown);
        return rc == PAGEIN_E_HASH_MISMATCH || rc == PAGEIN_E_CHANGED ? EXIT_INVALID : EXIT_USAGE;
    }
    if (!quiet && !json) {
        char b1[32], b2[32], b3[32];
        printf("pulled %s -> %s: %zu file(s), %s in %.2f s (%.1f MB/s); fetched %s, resumed %s, verified %s\n",
               shown, st.path, st.files, cli_human_bytes(st.bytes, b1, sizeof b1), st.seconds, rate / 1e6,
               cli_human_bytes(st.fetched, b2, sizeof b2), cli_human_bytes(st.resumed, b3, sizeof b3),
               st.verified[0] ? st.verified : "(cached)");
    }
    return EXIT_OK;
}

CLI_COMMAND(pull, "pull", "download a remote model or shards (parallel ranges, resume, verify)", pull_main)
