/* cmd_plan.c - `pagein plan MODEL`: what pagein_model_open would do with
 * MODEL: its files, layers, and the strategy AUTO picks and why. Opens the
 * model LAZY (headers only); reads no tensor data. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
    fputs("usage: pagein plan MODEL [--json] [--threads N] [--chunk SIZE]\n"
          "\n"
          "Shows how pagein would load MODEL (a file, a sharded safetensors index, a GGUF\n"
          "split set or a directory): the files in shard order, the layers and their sizes,\n"
          "and the strategy `auto` chooses with the reason: from a short probe of the first\n"
          "file (latency of one request at depth 1, throughput at depth 8), the mount's\n"
          "readahead, the disk, the model size and available memory. Also the request size\n"
          "and depth the range engine would use for `read` and how they were chosen\n"
          "(--chunk SIZE / --threads N, the model options chunk_bytes / threads, and then\n"
          "PAGEIN_REQUEST_BYTES / PAGEIN_QUEUE_DEPTH override them).\n"
          "Reads headers and the probe's few 128 KiB requests only; a remote model (URL)\n"
          "costs its headers only: the index and about one request per file.\n"
          "Exit status: 0 ok, 1 the model is invalid, 2 usage or I/O error.\n",
          out);
}

static int plan_main(int argc, char **argv) {
    const char *path = NULL;
    int json = 0;
    unsigned threads = 0;
    uint64_t chunk = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return EXIT_OK;
        } else if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            char *e;
            unsigned long v = strtoul(argv[++i], &e, 10);
            if (*e || v == 0 || v > 1024) {
                usage(stderr);
                return EXIT_USAGE;
            }
            threads = (unsigned)v;
        } else if (strcmp(argv[i], "--chunk") == 0 && i + 1 < argc) {
            if (cli_parse_size(argv[++i], &chunk) != 0 || chunk == 0) {
                usage(stderr);
                return EXIT_USAGE;
            }
        } else if (argv[i][0] == '-' || path) {
            usage(stderr);
            return EXIT_USAGE;
        } else path = argv[i];
    }
    if (!path) {
        usage(stderr);
        return EXIT_USAGE;
    }
    int pc = cli_check_path("plan", path);
    if (pc) return pc;
    pagein_model *m;
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_LAZY;
    o.threads = threads;    /* the engine's depth for read, as the model option */
    o.chunk_bytes = chunk;  /* the engine's request size for read */
    int rc = pagein_model_open(&m, path, &o);
    if (rc < 0) {
        cli_error("plan", rc, "cannot open %s", path);
        return rc > -4096 ? EXIT_USAGE : EXIT_INVALID;
    }
    char pshown[4096], fshown[4096]; /* URLs as printed: no password or signature */
    path = pagein_url_redact(path, pshown, sizeof pshown);
    char why[256];
    uint64_t budget = 0;
    pagein_strategy s = pagein_model_auto_plan(m, &budget, why, sizeof why);
    pagein_io_facts io;
    int have_io = pagein_model_io_facts(m, &io) == 0;
    size_t nf = pagein_model_file_count(m);
    uint64_t total = 0;
    for (size_t i = 0; i < nf; i++) {
        pagein_file_info fi;
        pagein_file_get_info(pagein_model_file(m, i), &fi);
        total += fi.file_size;
    }
    int32_t L = pagein_model_layer_count(m);
    int32_t lo, hi, np = cli_model_layers(m, &lo, &hi);
    char lt[64];
    if (json) {
        printf("{\"model\": ");
        cli_json_str(stdout, path, strlen(path));
        printf(", \"bytes\": %llu, \"tensors\": %zu, \"layers\": %d, ", (unsigned long long)total,
               pagein_model_tensor_count(m), L);
        if (np)
            printf("\"layers_present\": %d, \"layer_min\": %d, \"layer_max\": %d, ", np, lo, hi);
        else
            printf("\"layers_present\": 0, \"layer_min\": null, \"layer_max\": null, ");
        printf("\"strategy\": \"%s\", \"budget_bytes\": %llu, \"why\": ", pagein_strategy_name(s),
               (unsigned long long)budget);
        cli_json_str(stdout, why, strlen(why));
        if (have_io) {
            printf(", \"io\": {\"storage\": \"%s\", \"fs_type\": ", io.storage);
            cli_json_str(stdout, io.fs_type, strlen(io.fs_type));
            printf(", \"read_ahead_kb\": %u, \"rotational\": %d, \"measured\": %s, \"lat1_us\": %.1f, "
                   "\"depth_speedup\": %.2f, \"probe_depth\": %u, \"request_bytes\": %llu, \"depth\": %u, "
                   "\"engine_why\": ",
                   io.read_ahead_kb, io.rotational, io.measured ? "true" : "false", io.lat1_us, io.depth_speedup,
                   io.probe_depth, (unsigned long long)io.request_bytes, io.depth);
            cli_json_str(stdout, io.engine_why, strlen(io.engine_why));
            printf("}");
        }
        printf(", \"files\": [");
        for (size_t i = 0; i < nf; i++) {
            pagein_file_info fi;
            pagein_file_get_info(pagein_model_file(m, i), &fi);
            printf("%s{\"path\": ", i ? ", " : "");
            pagein_url_redact(fi.path, fshown, sizeof fshown);
            cli_json_str(stdout, fshown, strlen(fshown));
            uint64_t tb;
            size_t ft = pagein_model_file_tensors(m, i, &tb); /* a DCP file's own table is empty */
            printf(", \"bytes\": %llu, \"tensors\": %zu, \"tensor_bytes\": %llu, \"format\": \"%s\"}",
                   (unsigned long long)fi.file_size, ft, (unsigned long long)tb, pagein_format_name(fi.format));
        }
        /* the leading and trailing groups always; numbered layers only when
         * they hold a tensor (a LoRA of layers 30-31 lists 2, not 32) */
        printf("], \"layer_groups\": [");
        for (int32_t l = -1; l <= L; l++) {
            const pagein_tensor *const *lt_;
            size_t n = pagein_model_layer_tensors(m, l, &lt_);
            if (n == 0 && l >= 0 && l < L) continue;
            uint64_t b = 0;
            for (size_t i = 0; i < n; i++) b += lt_[i]->nbytes;
            printf("%s{\"layer\": %d, \"tensors\": %zu, \"bytes\": %llu}", l > -1 ? ", " : "", l, n, (unsigned long long)b);
        }
        printf("]}\n");
    } else {
        char hb[32];
        size_t nt = pagein_model_tensor_count(m);
        printf("%s: %s in %zu file%s, %zu tensor%s, %s\n", path, cli_human_bytes(total, hb, sizeof hb), nf,
               nf == 1 ? "" : "s", nt, nt == 1 ? "" : "s", cli_layers_text(np, lo, hi, lt, sizeof lt));
        for (size_t i = 0; i < nf; i++) {
            pagein_file_info fi;
            pagein_file_get_info(pagein_model_file(m, i), &fi);
            size_t ft = pagein_model_file_tensors(m, i, NULL); /* a DCP file's own table is empty */
            printf("  file %zu: %s (%s, %zu tensor%s)\n", i, pagein_url_redact(fi.path, fshown, sizeof fshown), cli_human_bytes(fi.file_size, hb, sizeof hb),
                   ft, ft == 1 ? "" : "s");
        }
        /* the leading group, the first two and the last present layer, the
         * trailing group; empty layers are not listed */
        int32_t shown = 0;
        for (int32_t l = -1; l <= L; l++) {
            const pagein_tensor *const *lt_;
            size_t n = pagein_model_layer_tensors(m, l, &lt_);
            int numbered = l >= 0 && l < L;
            if (n == 0) continue;
            uint64_t b = 0;
            for (size_t i = 0; i < n; i++) b += lt_[i]->nbytes;
            if (numbered) shown++;
            if (!numbered || shown <= 2 || l == hi) {
                char nm[32], bb[32];
                if (l == -1) snprintf(nm, sizeof nm, "leading");
                else if (l == L) snprintf(nm, sizeof nm, "trailing");
                else snprintf(nm, sizeof nm, "layer %d", l);
                printf("  %-14s %3zu tensor%s %12s\n", nm, n, n == 1 ? " " : "s", cli_human_bytes(b, bb, sizeof bb));
            } else if (shown == 3) {
                printf("  ...\n");
            }
        }
        printf("strategy: %s\n  %s\n", pagein_strategy_name(s), why);
        if (budget) printf("  budget: %s\n", cli_human_bytes(budget, hb, sizeof hb));
        if (have_io) {
            printf("storage: %s (%s), readahead %u KiB, rotational %s\n", io.storage, io.fs_type[0] ? io.fs_type : "?",
                   io.read_ahead_kb, io.rotational == 1 ? "yes" : io.rotational == 0 ? "no" : "unknown");
            if (io.measured)
                printf("  measured: %.0f us a 128 KiB request at depth 1, %.1fx the throughput at depth %u\n",
                       io.lat1_us, io.depth_speedup, io.probe_depth);
            else
                printf("  measured: nothing (file too small, memory, or remote: no probe of tensor data)\n");
            printf("range engine (read): %s requests, %u in flight\n  %s\n",
                   cli_human_bytes(io.request_bytes, hb, sizeof hb), io.depth, io.engine_why);
        }
    }
    pagein_model_close(m);
    return EXIT_OK;
}

CLI_COMMAND(plan, "plan", "show how a model would be loaded: files, layers, the auto strategy and why", plan_main)
