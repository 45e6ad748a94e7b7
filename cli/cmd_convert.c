/* cmd_convert.c - `pagein convert IN OUT`: PyTorch checkpoints (and GGUF
 * with plain types, and safetensors) to safetensors, optionally cast,
 * sharded or page-aligned. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *out) {
    fprintf(out,
            "usage: pagein convert IN OUT [--dtype bf16|f16|f32] [--dequantize f16|bf16|f32]\n"
            "                      [--max-shard-size SIZE] [--max-output-size SIZE] [--align N]\n"
            "                      [--dry-run] [--json] [-q]\n"
            "\n"
            "Converts IN to safetensors at OUT without Python (to GGUF when OUT ends in .gguf).\n"
            "  IN   a torch.save checkpoint (.pt/.pth/.bin, zip format), a GGUF file, or a\n"
            "       safetensors file (detected from its content).\n"
            "       Checkpoints are read by a restricted unpickler that accepts exactly what\n"
            "       torch.load(weights_only=True) accepts and never runs code.\n"
            "  OUT  the safetensors file; with sharding, OUT's stem names the shards\n"
            "       (model.safetensors -> model-00001-of-00003.safetensors) and\n"
            "       OUT.index.json maps each tensor to its shard. A missing directory of\n"
            "       OUT is created.\n"
            "\n"
            "Every tensor name appears with its own bytes: tied weights and views are\n"
            "written in full (the summary lists which names shared storage), strided\n"
            "tensors are materialised. Values that are not tensors (ints, strings, ...)\n"
            "are skipped and listed. __metadata__ is {\"format\": \"pt\"} for checkpoints;\n"
            "GGUF metadata becomes __metadata__ strings (non-strings JSON-encoded, arrays\n"
            "too). GGUF output (v3) keeps every GGUF key, arrays included. Whatever cannot\n"
            "be carried is listed as skipped. Files are written atomically; a sharded set\n"
            "is all or nothing (written aside, moved into place index last; on failure\n"
            "an existing model is left as it was). The output size is computed first and\n"
            "checked against the free space of the target filesystem.\n"
            "\n"
            "options:\n"
            "  --dtype T            cast floating-point tensors to bf16, f16 or f32\n"
            "  --dequantize T       dequantize GGUF block types (Q4_0 ... Q8_K, IQ4_NL,\n"
            "                       IQ4_XS) to f16, bf16 or f32, with ggml's values\n"
            "  --max-shard-size S   shard at S bytes of tensor data, in state-dict order,\n"
            "                       a layer kept in one shard where it fits. Sizes as\n"
            "                       everywhere in pagein (and transformers): 5GB = 5e9\n"
            "                       bytes, 5GiB = 5G = 5*2^30, also KB/MB/TB, KiB/MiB/TiB;\n"
            "                       a plain number is bytes\n"
            "  --max-output-size S  refuse when the output would exceed S bytes\n"
            "                       (default: the free space of the target filesystem)\n"
            "  --align N            align the data section to N bytes (e.g. 4096 for\n"
            "                       O_DIRECT and GPU direct loads; default 8)\n"
            "  --dry-run            read and check IN, print the summary, write nothing\n"
            "  --json               print the summary as JSON on stdout\n"
            "  -q                   no summary (errors only)\n"
            "\n"
            "exit status: 0 converted, 1 invalid or refused input, 2 usage or I/O error\n");
}

struct opts {
    const char *in, *out;
    pagein_dtype dtype, deq;
    uint64_t shard, align, max_out;
    int dry, json, quiet;
};

/* Metadata entries the converter did not carry over. */
struct skipped {
    struct skip {
        char *key, *why;
        size_t key_len;
    } *v;
    size_t n, cap;
};

static void on_skip(void *ctx, const char *key, size_t key_len, const char *why) {
    struct skipped *sk = ctx;
    if (sk->n == sk->cap) {
        size_t c = sk->cap ? sk->cap * 2 : 16;
        struct skip *nv = realloc(sk->v, c * sizeof *nv);
        if (!nv) return;
        sk->v = nv, sk->cap = c;
    }
    struct skip *e = &sk->v[sk->n];
    e->key = malloc(key_len + 1);
    e->why = strdup(why ? why : "");
    if (!e->key || !e->why) {
        free(e->key), free(e->why);
        return;
    }
    memcpy(e->key, key, key_len);
    e->key[key_len] = 0;
    e->key_len = key_len;
    sk->n++;
}

static void skipped_free(struct skipped *sk) {
    for (size_t i = 0; i < sk->n; i++) free(sk->v[i].key), free(sk->v[i].why);
    free(sk->v);
}

/* mkdir -p of the directory part of path. */
static int make_parent(const char *path) {
    char *d = strdup(path);
    if (!d) return -ENOMEM;
    char *slash = strrchr(d, '/');
    int rc = 0;
    if (slash && slash != d) {
        *slash = 0;
        for (char *p = d + 1; rc == 0; p++) {
            if (*p != '/' && *p) continue;
            char c = *p;
            *p = 0;
            if (mkdir(d, 0777) != 0 && errno != EEXIST) rc = -errno;
            *p = c;
            if (!c) break;
        }
    }
    free(d);
    return rc;
}

static void on_progress(void *ctx, uint64_t done, uint64_t total) {
    (void)total;
    cli_progress_update(ctx, done);
}

static const char *fmt_name(pagein_format f) { return pagein_format_name(f); }

static void meta_value(FILE *o, const pagein_meta *m, int json) {
    char buf[64];
    switch (m->type) {
    case PAGEIN_META_STRING:
        if (json) cli_json_str(o, m->str, (size_t)m->str_len);
        else fprintf(o, "%.*s", (int)(m->str_len > 200 ? 200 : m->str_len), m->str);
        return;
    case PAGEIN_META_BOOL: snprintf(buf, sizeof buf, "%s", m->v.b ? (json ? "true" : "True") : (json ? "false" : "False")); break;
    case PAGEIN_META_F32:
    case PAGEIN_META_F64: snprintf(buf, sizeof buf, "%.17g", m->v.f); break;
    case PAGEIN_META_I8: case PAGEIN_META_I16: case PAGEIN_META_I32: case PAGEIN_META_I64:
        snprintf(buf, sizeof buf, "%lld", (long long)m->v.i); break;
    case PAGEIN_META_ARRAY: snprintf(buf, sizeof buf, json ? "\"<array of %llu>\"" : "<array of %llu>", (unsigned long long)m->count); break;
    default: snprintf(buf, sizeof buf, "%llu", (unsigned long long)m->v.u); break;
    }
    fputs(buf, o);
}

/* Tensors sharing a storage, grouped: returns for each tensor the index of
 * the first tensor of its group (itself when alone). */
static size_t *share_groups(const pagein_file *f, size_t n) {
    size_t ns = pagein_torch_storage_count(f);
    size_t *g = malloc((n ? n : 1) * sizeof *g);
    size_t *first = malloc((ns ? ns : 1) * sizeof *first);
    if (!g || !first) {
        free(g), free(first);
        return NULL;
    }
    for (size_t k = 0; k < ns; k++) first[k] = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        const pagein_tensor *t = pagein_tensor_at(f, i);
        pagein_torch_tensor_info ti;
        g[i] = i;
        if (!(t->flags & PAGEIN_TENSOR_VIEW) || pagein_torch_tensor_get_info(f, t, &ti) != 0 || ti.storage >= ns)
            continue;
        if (first[ti.storage] == SIZE_MAX) first[ti.storage] = i;
        g[i] = first[ti.storage];
    }
    free(first);
    return g;
}

static void summary(FILE *o, const struct opts *op, const pagein_file *f, const pagein_convert_stats *st, double secs,
                    int rc, const struct skipped *sk) {
    size_t n = pagein_tensor_count(f);
    size_t *g = share_groups(f, n);
    pagein_file_info fi;
    pagein_file_get_info(f, &fi);
    if (op->json) {
        fprintf(o, "{\"input\": ");
        cli_json_str(o, op->in, strlen(op->in));
        fprintf(o, ", \"output\": ");
        cli_json_str(o, op->out, strlen(op->out));
        fprintf(o, ", \"format\": \"%s\", \"dry_run\": %s, \"ok\": %s", fmt_name(fi.format), op->dry ? "true" : "false",
                rc == 0 ? "true" : "false");
        if (st) {
            fprintf(o, ", \"shards\": %u, \"bytes\": %llu, \"cast\": %zu, \"dequantized\": %zu, \"seconds\": %.3f",
                    st->shards, (unsigned long long)st->bytes, st->cast, st->dequantized, secs);
        }
        fprintf(o, ",\n \"tensors\": [");
        for (size_t i = 0; i < n; i++) {
            const pagein_tensor *t = pagein_tensor_at(f, i);
            fprintf(o, "%s\n  {\"name\": ", i ? "," : "");
            cli_json_str(o, t->name, t->name_len);
            fprintf(o, ", \"dtype\": \"%s\", \"shape\": [", pagein_dtype_get(t->dtype)->name);
            for (uint32_t d = 0; d < t->ndim; d++) fprintf(o, "%s%llu", d ? ", " : "", (unsigned long long)t->shape[d]);
            fprintf(o, "], \"offset\": %llu, \"nbytes\": %llu, \"view\": %s, \"noncontiguous\": %s", (unsigned long long)t->offset,
                    (unsigned long long)t->nbytes, t->flags & PAGEIN_TENSOR_VIEW ? "true" : "false",
                    t->flags & PAGEIN_TENSOR_NONCONTIGUOUS ? "true" : "false");
            pagein_torch_tensor_info ti;
            if (pagein_torch_tensor_get_info(f, t, &ti) == 0) {
                fprintf(o, ", \"storage\": %u, \"storage_offset\": %llu, \"stride\": [", ti.storage,
                        (unsigned long long)ti.elem_offset);
                for (uint32_t d = 0; d < t->ndim; d++) fprintf(o, "%s%lld", d ? ", " : "", (long long)ti.strides[d]);
                fprintf(o, "], \"parameter\": %s", ti.is_parameter ? "true" : "false");
            }
            fputc('}', o);
        }
        fprintf(o, "],\n \"shared\": [");
        int first = 1;
        for (size_t i = 0; g && i < n; i++) {
            if (g[i] != i) continue;
            size_t cnt = 0;
            for (size_t j = i; j < n; j++) cnt += g[j] == i;
            if (cnt < 2) continue;
            fprintf(o, "%s[", first ? "" : ", ");
            first = 0;
            int f1 = 1;
            for (size_t j = i; j < n; j++)
                if (g[j] == i) {
                    const pagein_tensor *t = pagein_tensor_at(f, j);
                    fprintf(o, "%s", f1 ? "" : ", ");
                    cli_json_str(o, t->name, t->name_len);
                    f1 = 0;
                }
            fputc(']', o);
        }
        fprintf(o, "],\n \"skipped\": [");
        for (size_t i = 0; i < sk->n; i++) {
            const pagein_meta *m = pagein_meta_find(f, sk->v[i].key);
            fprintf(o, "%s{\"name\": ", i ? ", " : "");
            cli_json_str(o, sk->v[i].key, sk->v[i].key_len);
            if (m) {
                fprintf(o, ", \"value\": ");
                meta_value(o, m, 1);
            }
            fprintf(o, ", \"reason\": ");
            cli_json_str(o, sk->v[i].why, strlen(sk->v[i].why));
            fputc('}', o);
        }
        fprintf(o, "]}\n");
        free(g);
        return;
    }
    char hb[32];
    if (st)
        fprintf(o, "%s %zu tensors (%s) from %s to %s%s in %.2f s\n", op->dry ? "would convert" : "converted", st->tensors,
                cli_human_bytes(st->bytes, hb, sizeof hb), fmt_name(fi.format), op->out,
                st->shards > 1 ? " (sharded)" : "", secs);
    if (st && st->shards > 1) fprintf(o, "  %u shards, index %s.index.json\n", st->shards, op->out);
    if (st && st->cast) fprintf(o, "  cast to %s: %zu tensors\n", pagein_dtype_get(op->dtype)->name, st->cast);
    if (st && st->dequantized)
        fprintf(o, "  dequantized to %s: %zu tensors\n", pagein_dtype_get(op->deq)->name, st->dequantized);
    for (size_t i = 0; g && i < n; i++) {
        if (g[i] != i) continue;
        size_t cnt = 0;
        for (size_t j = i; j < n; j++) cnt += g[j] == i;
        if (cnt < 2) continue;
        fprintf(o, "  shared storage, written in full for each name:");
        for (size_t j = i; j < n; j++)
            if (g[j] == i) fprintf(o, " %s", pagein_tensor_at(f, j)->name);
        fputc('\n', o);
    }
    for (size_t i = 0; i < n; i++) {
        const pagein_tensor *t = pagein_tensor_at(f, i);
        if (t->flags & PAGEIN_TENSOR_NONCONTIGUOUS) fprintf(o, "  materialised strided tensor: %s\n", t->name);
    }
    for (size_t i = 0; i < sk->n; i++) {
        const pagein_meta *m = pagein_meta_find(f, sk->v[i].key);
        if (fi.format == PAGEIN_FORMAT_TORCH && m) {
            fprintf(o, "  skipped non-tensor value: %s = ", sk->v[i].key);
            meta_value(o, m, 0);
            fputc('\n', o);
        } else {
            fprintf(o, "  skipped metadata: %s (%s)\n", sk->v[i].key, sk->v[i].why);
        }
    }
    free(g);
}

/* A torch Distributed Checkpoint directory (a `.metadata` beside
 * `__RANK_N.distcp` files), local or a source URL: consolidated by the
 * library (src/ops/dcp.c) through one run of the range engine into one
 * safetensors file or, with --max-shard-size, Hugging Face shards and an
 * index; casting is not offered for it. */
static int convert_dcp(const struct opts *op, int hf) {
    size_t ol = strlen(op->out);
    if (op->dtype || op->deq || op->dry || !strcmp(op->out, "-") || (ol >= 5 && !strcmp(op->out + ol - 5, ".gguf"))) {
        fprintf(stderr, "pagein convert: %s is a torch Distributed Checkpoint: it converts to safetensors "
                        "(--dtype, --dequantize, --dry-run and GGUF output are not supported for it yet)\n",
                op->in);
        return EXIT_USAGE;
    }
    pagein_convert_opts co = PAGEIN_CONVERT_OPTS_INIT;
    co.max_shard_bytes = op->shard;
    co.max_output_bytes = op->max_out;
    co.align = op->align;
    pagein_dcp_convert_stats st;
    double t0 = cli_now();
    int rc = make_parent(op->out);
    if (rc == 0) rc = hf ? pagein_dcp_hf_convert(op->in, op->out, &co, &st) : pagein_dcp_convert(op->in, op->out, &co, &st);
    if (rc < 0) {
        cli_error("convert", rc, "cannot convert %s to %s", op->in, op->out);
        return rc > -4096 ? EXIT_USAGE : EXIT_INVALID;
    }
    if (!op->quiet)
        printf("converted %s -> %s: %llu tensors, %llu bytes, %llu non-tensor items skipped, %u file%s, "
               "%llu bytes read in %llu requests, %.2f s\n",
               op->in, op->out, (unsigned long long)st.tensors, (unsigned long long)st.tensor_bytes,
               (unsigned long long)st.skipped_items, st.shards, st.shards == 1 ? "" : "s",
               (unsigned long long)st.bytes_read, (unsigned long long)st.requests, cli_now() - t0);
    return EXIT_OK;
}

/* --dtype's and --dequantize's names: BF16, F16 or F32 (any case; fp16,
 * fp32), else PAGEIN_DTYPE_INVALID. */
static pagein_dtype float_dtype(const char *v) {
    if (!strcasecmp(v, "bf16")) return PAGEIN_DTYPE_BF16;
    if (!strcasecmp(v, "f16") || !strcasecmp(v, "fp16")) return PAGEIN_DTYPE_F16;
    if (!strcasecmp(v, "f32") || !strcasecmp(v, "fp32")) return PAGEIN_DTYPE_F32;
    return PAGEIN_DTYPE_INVALID;
}

static int convert_main(int argc, char **argv) {
    struct opts op = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "--dtype") && i + 1 < argc) {
            const char *v = argv[++i];
            if (!(op.dtype = float_dtype(v))) {
                cli_error("convert", 0, "--dtype '%s': expected bf16, f16 or f32", v);
                return EXIT_USAGE;
            }
        } else if (!strcmp(a, "--dequantize") && i + 1 < argc) {
            const char *v = argv[++i];
            if (!(op.deq = float_dtype(v))) {
                cli_error("convert", 0, "--dequantize '%s': expected f16, bf16 or f32", v);
                return EXIT_USAGE;
            }
        } else if (!strcmp(a, "--max-shard-size") && i + 1 < argc) {
            if (cli_parse_size(argv[++i], &op.shard) < 0 || op.shard == 0) {
                cli_error("convert", 0, "--max-shard-size '%s': expected a size such as 5GB (5e9 bytes) or 5GiB", argv[i]);
                return EXIT_USAGE;
            }
        } else if (!strcmp(a, "--max-output-size") && i + 1 < argc) {
            if (cli_parse_size(argv[++i], &op.max_out) < 0 || op.max_out == 0) {
                cli_error("convert", 0, "--max-output-size '%s': expected a size such as 20GB or 20GiB", argv[i]);
                return EXIT_USAGE;
            }
        } else if (!strcmp(a, "--align") && i + 1 < argc) {
            if (cli_parse_size(argv[++i], &op.align) < 0 || (op.align && !cli_valid_align(op.align))) {
                cli_error("convert", 0, "--align '%s': expected a power of two between 8 and 2^30 bytes", argv[i]);
                return EXIT_USAGE;
            }
        } else if (!strcmp(a, "--dry-run")) {
            op.dry = 1;
        } else if (!strcmp(a, "--json")) {
            op.json = 1;
        } else if (!strcmp(a, "-q")) {
            op.quiet = 1;
        } else if (a[0] == '-' && a[1]) {
            cli_error("convert", 0, "unknown option '%s' (see pagein convert --help)", a);
            return EXIT_USAGE;
        } else if (!op.in) {
            op.in = a;
        } else if (!op.out) {
            op.out = a;
        } else {
            cli_error("convert", 0, "too many arguments");
            return EXIT_USAGE;
        }
    }
    if (!op.in || (!op.out && !op.dry)) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!op.out) op.out = "-";
    if (pagein_is_dcp_dir(op.in)) return convert_dcp(&op, 0);
    if (pagein_is_dcp_hf_dir(op.in)) return convert_dcp(&op, 1); /* torch's safetensors flavour */
    pagein_file *f = NULL;
    int rc = pagein_open(&f, op.in, NULL);
    if (rc < 0) {
        cli_error("convert", rc, "cannot read %s", op.in);
        return rc > -4096 ? EXIT_USAGE : EXIT_INVALID;
    }
    cli_warn_expansion(stderr, "convert", op.in, f);
    pagein_convert_opts co = PAGEIN_CONVERT_OPTS_INIT;
    struct skipped sk = {0};
    co.dtype = op.dtype;
    co.dequantize = op.deq;
    co.max_shard_bytes = op.shard;
    co.max_output_bytes = op.max_out;
    co.align = op.align;
    co.on_skip = on_skip, co.skip_ctx = &sk;
    pagein_convert_stats st = {0};
    struct cli_progress pr;
    double t0 = cli_now();
    /* output bytes, as the converter counts them (strided tensors in full,
     * casts and dequantized tensors at the target width) */
    uint64_t total = 0;
    for (size_t i = 0; i < pagein_tensor_count(f); i++) {
        const pagein_tensor *t = pagein_tensor_at(f, i);
        const pagein_dtype_info *di = pagein_dtype_get(t->dtype);
        int castable = t->dtype == PAGEIN_DTYPE_F32 || t->dtype == PAGEIN_DTYPE_F16 ||
                       t->dtype == PAGEIN_DTYPE_BF16 || t->dtype == PAGEIN_DTYPE_F64;
        int quant = di && (di->flags & PAGEIN_DTYPE_F_QUANT);
        if (op.dtype && castable) total += t->nelements * (pagein_dtype_get(op.dtype)->bits / 8);
        else if (op.deq && quant) total += t->nelements * (pagein_dtype_get(op.deq)->bits / 8);
        else total += di && di->block_elems == 1 ? t->nelements * (di->bits / 8) : t->nbytes;
    }
    if (op.dry) {
        st.tensors = pagein_tensor_count(f);
        st.shards = 1;
        st.bytes = total;
        pagein_file_info fi;
        pagein_file_get_info(f, &fi);
        if (fi.format == PAGEIN_FORMAT_TORCH)
            for (size_t i = 0; i < pagein_meta_count(f); i++) {
                const pagein_meta *m = pagein_meta_at(f, i);
                on_skip(&sk, m->key, m->key_len, "not a tensor");
            }
    } else if ((rc = make_parent(op.out)) < 0) {
        /* reported below as "cannot convert" with the errno */
    } else {
        cli_progress_start(&pr, "convert", total);
        if (!op.quiet) co.progress = on_progress, co.progress_ctx = &pr;
        size_t ol = strlen(op.out);
        if (ol >= 5 && !strcmp(op.out + ol - 5, ".gguf"))
            rc = pagein_convert_gguf(f, op.out, &co, &st);
        else
            rc = pagein_convert_safetensors(f, op.out, &co, &st);
        cli_progress_end(&pr);
    }
    double secs = cli_now() - t0;
    if (rc < 0) {
        cli_error("convert", rc, "cannot convert %s to %s", op.in, op.out);
        if (op.json) summary(stdout, &op, f, NULL, secs, rc, &sk);
        pagein_close(f);
        skipped_free(&sk);
        return rc > -4096 ? EXIT_USAGE : EXIT_INVALID;
    }
    if (!op.quiet || op.json) summary(stdout, &op, f, &st, secs, 0, &sk);
    pagein_close(f);
    skipped_free(&sk);
    return EXIT_OK;
}

CLI_COMMAND(convert, "convert", "convert PyTorch checkpoints, GGUF and safetensors to safetensors (or GGUF)", convert_main)
