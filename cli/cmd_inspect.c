/* cmd_inspect.c - `pagein inspect FILE [--json]`: header summary and the
 * tensor table of any file pagein_open supports. The JSON output is a
 * stable contract (docs/CLI.md); formats add their own fields through the
 * hooks of cli/inspect.h. */
#include "inspect.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

#define MAX_HOOKS 8
static const struct inspect_hook *hooks[MAX_HOOKS];
int inspect_full, inspect_text;
static int nhooks;

void inspect_register_hook(const struct inspect_hook *h) {
    if (nhooks < MAX_HOOKS) hooks[nhooks++] = h;
}

static const struct inspect_hook *hook_for(pagein_format fmt) {
    for (int i = 0; i < nhooks; i++)
        if (hooks[i]->format == fmt) return hooks[i];
    return NULL;
}

static const char *format_name(pagein_format fmt) {
    const struct inspect_hook *h = hook_for(fmt);
    return h && h->name ? h->name : pagein_format_name(fmt);
}

static const uint64_t align_classes[] = {8, 64, 256, 4096};
#define NALIGN (sizeof align_classes / sizeof align_classes[0])

struct summary {
    uint64_t params, data_bytes;
    uint64_t dtype_bytes[PAGEIN_DTYPE_COUNT];
    uint64_t dtype_count[PAGEIN_DTYPE_COUNT];
    uint64_t aligned[NALIGN];
    int32_t max_layer;
    int32_t nlayers, min_layer; /* numbered layers holding a tensor, the smallest of them */
    size_t span_rows;           /* tensors whose nbytes is a storage span, not their own size */
};

/* 1 if t's nbytes is more than its own elements take: a torch view or
 * strided tensor, whose bytes are the span of storage it reads. */
static int is_span(const pagein_tensor *t) {
    uint64_t own;
    return (t->flags & (PAGEIN_TENSOR_VIEW | PAGEIN_TENSOR_NONCONTIGUOUS)) &&
           pagein_dtype_nbytes(t->dtype, t->nelements, &own) == 0 && own != t->nbytes;
}

static void summarize(const pagein_file *f, struct summary *s) {
    memset(s, 0, sizeof *s);
    s->max_layer = -1;
    s->min_layer = -1;
    size_t n = pagein_tensor_count(f);
    /* present layers: a LoRA adapter of layers 30 and 31 has 2, not 32 */
    int32_t maxl = -1;
    for (size_t i = 0; i < n; i++)
        if (pagein_tensor_at(f, i)->layer > maxl) maxl = pagein_tensor_at(f, i)->layer;
    unsigned char *seen = maxl >= 0 ? calloc((size_t)maxl + 1, 1) : NULL;
    for (size_t i = 0; i < n; i++) {
        const pagein_tensor *t = pagein_tensor_at(f, i);
        s->params += t->nelements;
        s->data_bytes += t->nbytes;
        if ((int)t->dtype > 0 && t->dtype < PAGEIN_DTYPE_COUNT) {
            s->dtype_bytes[t->dtype] += t->nbytes;
            s->dtype_count[t->dtype]++;
        }
        for (size_t a = 0; a < NALIGN; a++) s->aligned[a] += t->offset % align_classes[a] == 0;
        if (t->layer > s->max_layer) s->max_layer = t->layer;
        if (t->layer >= 0 && seen && !seen[t->layer]) {
            seen[t->layer] = 1;
            s->nlayers++;
            if (s->min_layer < 0 || t->layer < s->min_layer) s->min_layer = t->layer;
        }
        s->span_rows += is_span(t);
    }
    free(seen);
}

static const char *dtype_name(pagein_dtype d) {
    const pagein_dtype_info *i = pagein_dtype_get(d);
    return i ? i->name : "INVALID";
}

static void json_meta_value(const pagein_file *f, const pagein_meta *m, FILE *out) {
    pagein_file_info info;
    pagein_file_get_info(f, &info);
    const struct inspect_hook *h = hook_for(info.format);
    if (h && h->meta_json && h->meta_json(f, m, out)) return;
    switch (m->type) {
    case PAGEIN_META_STRING: cli_json_str(out, m->str ? m->str : "", (size_t)m->str_len); break;
    case PAGEIN_META_U8: case PAGEIN_META_U16: case PAGEIN_META_U32: case PAGEIN_META_U64:
        fprintf(out, "%" PRIu64, m->v.u);
        break;
    case PAGEIN_META_I8: case PAGEIN_META_I16: case PAGEIN_META_I32: case PAGEIN_META_I64:
        fprintf(out, "%" PRId64, m->v.i);
        break;
    case PAGEIN_META_F32: case PAGEIN_META_F64:
        if (isfinite(m->v.f)) fprintf(out, m->type == PAGEIN_META_F32 ? "%.9g" : "%.17g", m->v.f);
        else fputs("null", out);
        break;
    case PAGEIN_META_BOOL: fputs(m->v.b ? "true" : "false", out); break;
    case PAGEIN_META_ARRAY:
        fprintf(out, "{\"type\":\"array\",\"elem_type\":%d,\"count\":%" PRIu64 "}", (int)m->elem_type, m->count);
        break;
    default: fputs("null", out); break;
    }
}

/* What both outputs start from: the path as printed (a URL without its
 * password or signature, written into shown), the file's info, its summary
 * and the format's hook. */
static const struct inspect_hook *prepare(const char **path, char *shown, size_t cap, const pagein_file *f,
                                          pagein_file_info *info, struct summary *s) {
    *path = pagein_url_redact(*path, shown, cap);
    pagein_file_get_info(f, info);
    summarize(f, s);
    return hook_for(info->format);
}

static void print_json(const char *path, const pagein_file *f, FILE *out) {
    char shown[4096];
    pagein_file_info info;
    struct summary s;
    const struct inspect_hook *h = prepare(&path, shown, sizeof shown, f, &info, &s);
    fputs("{\"file\":", out);
    cli_json_str(out, path, strlen(path));
    fprintf(out, ",\"format\":\"%s\",\"file_size\":%" PRIu64 ",\"header_len\":%" PRIu64 ",\"data_start\":%" PRIu64,
            format_name(info.format), info.file_size, info.header_len, info.data_start);
    fprintf(out, ",\"n_tensors\":%zu,\"parameters\":%" PRIu64 ",\"data_bytes\":%" PRIu64 ",\"layers\":%d",
            info.n_tensors, s.params, s.data_bytes, (int)(s.max_layer + 1));
    /* "layers" stays the highest layer index + 1 (the contract); these say
     * which layers are there */
    if (s.nlayers)
        fprintf(out, ",\"layers_present\":%d,\"layer_min\":%d,\"layer_max\":%d", (int)s.nlayers, (int)s.min_layer,
                (int)s.max_layer);
    else
        fputs(",\"layers_present\":0,\"layer_min\":null,\"layer_max\":null", out);
    fputs(",\"bytes_by_dtype\":{", out);
    int first = 1;
    for (int d = 1; d < PAGEIN_DTYPE_COUNT; d++) {
        if (!s.dtype_count[d]) continue;
        fprintf(out, "%s\"%s\":%" PRIu64, first ? "" : ",", dtype_name((pagein_dtype)d), s.dtype_bytes[d]);
        first = 0;
    }
    fputs("},\"aligned\":{", out);
    for (size_t a = 0; a < NALIGN; a++)
        fprintf(out, "%s\"%" PRIu64 "\":%" PRIu64, a ? "," : "", align_classes[a], s.aligned[a]);
    fputs("},\"metadata\":{", out);
    for (size_t i = 0; i < pagein_meta_count(f); i++) {
        const pagein_meta *m = pagein_meta_at(f, i);
        if (i) fputc(',', out);
        cli_json_str(out, m->key, m->key_len);
        fputc(':', out);
        json_meta_value(f, m, out);
    }
    fputc('}', out);
    if (h && h->json) h->json(f, out);
    fputs(",\"tensors\":[", out);
    for (size_t i = 0; i < pagein_tensor_count(f); i++) {
        const pagein_tensor *t = pagein_tensor_at(f, i);
        fputs(i ? ",\n{\"name\":" : "\n{\"name\":", out);
        cli_json_str(out, t->name, t->name_len);
        fprintf(out, ",\"dtype\":\"%s\",\"shape\":[", dtype_name(t->dtype));
        for (uint32_t d = 0; d < t->ndim; d++) fprintf(out, "%s%" PRIu64, d ? "," : "", t->shape[d]);
        fprintf(out, "],\"offset\":%" PRIu64 ",\"nbytes\":%" PRIu64 ",\"layer\":%d", t->offset, t->nbytes,
                (int)t->layer);
        if (h && h->tensor_json) h->tensor_json(f, t, out);
        fputc('}', out);
    }
    fputs("]}\n", out);
}

/* Prints s with control bytes as C escapes (\\n, \\t, \\x1b ...) and a
 * backslash as \\\\, for the text output: a newline in a name or a
 * tokenizer's "\\n" token stays readable and on its line. Returns the
 * number of columns printed. */
size_t inspect_escaped(FILE *out, const char *s, size_t n) {
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *e = NULL;
        switch (c) {
        case '\n': e = "\\n"; break;
        case '\t': e = "\\t"; break;
        case '\r': e = "\\r"; break;
        case '\\': e = "\\\\"; break;
        case 0: e = "\\0"; break;
        default: break;
        }
        if (e) {
            if (out) fputs(e, out);
            w += 2;
        } else if (c < 0x20 || c == 0x7f) {
            if (out) fprintf(out, "\\x%02x", c);
            w += 4;
        } else {
            if (out) fputc(c, out);
            w++;
        }
    }
    return w;
}

static void print_text(const char *path, const pagein_file *f, int table, FILE *out) {
    char shown[4096];
    pagein_file_info info;
    struct summary s;
    const struct inspect_hook *h = prepare(&path, shown, sizeof shown, f, &info, &s);
    char hb[32], hb2[32];
    fprintf(out, "file:        %s\n", path);
    fprintf(out, "format:      %s\n", format_name(info.format));
    fprintf(out, "file size:   %" PRIu64 " bytes (%s)\n", info.file_size, cli_human_bytes(info.file_size, hb, sizeof hb));
    fprintf(out, "header:      %" PRIu64 " bytes, data starts at %" PRIu64 "\n", info.header_len, info.data_start);
    char lt[64];
    fprintf(out, "tensors:     %zu; %s\n", info.n_tensors, cli_layers_text(s.nlayers, s.min_layer, s.max_layer, lt, sizeof lt));
    fprintf(out, "parameters:  %" PRIu64 "\n", s.params);
    fprintf(out, "data:        %" PRIu64 " bytes (%s)\n", s.data_bytes, cli_human_bytes(s.data_bytes, hb, sizeof hb));
    for (int d = 1; d < PAGEIN_DTYPE_COUNT; d++)
        if (s.dtype_count[d])
            fprintf(out, "  %-12s %6" PRIu64 " tensor%s %12s\n", dtype_name((pagein_dtype)d), s.dtype_count[d],
                    s.dtype_count[d] == 1 ? " " : "s", cli_human_bytes(s.dtype_bytes[d], hb2, sizeof hb2));
    fprintf(out, "aligned:    ");
    for (size_t a = 0; a < NALIGN; a++)
        fprintf(out, " %" PRIu64 "B: %" PRIu64 "/%zu", align_classes[a], s.aligned[a], info.n_tensors);
    fputc('\n', out);
    if (h && h->summary) h->summary(f, out);
    if (pagein_meta_count(f)) {
        fprintf(out, "metadata:    %zu entr%s\n", pagein_meta_count(f), pagein_meta_count(f) == 1 ? "y" : "ies");
        for (size_t i = 0; i < pagein_meta_count(f); i++) {
            const pagein_meta *m = pagein_meta_at(f, i);
            fputs("  ", out);
            inspect_escaped(out, m->key, m->key_len);
            fputs(" = ", out);
            if (m->type == PAGEIN_META_STRING) {
                size_t n = m->str_len > 200 ? 200 : (size_t)m->str_len;
                inspect_escaped(out, m->str, n);
                if (n < m->str_len) fputs("...", out);
            } else {
                json_meta_value(f, m, out);
            }
            fputc('\n', out);
        }
    }
    if (!table) return;
    size_t w = 4;
    for (size_t i = 0; i < pagein_tensor_count(f); i++) {
        size_t l = inspect_escaped(NULL, pagein_tensor_at(f, i)->name, pagein_tensor_at(f, i)->name_len);
        if (l > w) w = l;
    }
    if (w > 64) w = 64;
    fprintf(out, "\n%-*s %-11s %-22s %14s %14s %5s\n", (int)w, "NAME", "DTYPE", "SHAPE", "BYTES", "OFFSET", "LAYER");
    for (size_t i = 0; i < pagein_tensor_count(f); i++) {
        const pagein_tensor *t = pagein_tensor_at(f, i);
        char shape[128];
        cli_shape_str(shape, sizeof shape, t->shape, t->ndim);
        size_t nw = inspect_escaped(out, t->name, t->name_len);
        for (size_t p = nw; p < w; p++) fputc(' ', out);
        fprintf(out, " %-11s %-22s %13" PRIu64 "%c %14" PRIu64 " %5d\n", dtype_name(t->dtype), shape, t->nbytes,
                is_span(t) ? '*' : ' ', t->offset, (int)t->layer);
    }
    if (s.span_rows)
        fprintf(out, "\n* BYTES of %zu view%s or strided tensor%s: the span of storage the tensor reads, more than\n"
                "  its own elements take (numel x element size); `pagein convert` writes each with its own bytes\n",
                s.span_rows, s.span_rows == 1 ? "" : "s", s.span_rows == 1 ? "" : "s");
}

/* 1 if the directory holds a model file (a name the format table's folder
 * scan considers, pagein_is_model_name, that no dataset row claims: a
 * Megatron pair's PREFIX.bin is training data): inspect points at `pagein
 * plan` instead of reading it as a folder of training-data shards. */
static int holds_model(const char *dir) {
    DIR *dp = opendir(dir);
    if (!dp) return 0;
    int yes = 0;
    for (struct dirent *e; !yes && (e = readdir(dp)) != NULL;) {
        if (!pagein_is_model_name(e->d_name)) continue;
        char path[4096], row[32];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        yes = pagein_dataset_detect_name(path, row, sizeof row) != 1;
    }
    closedir(dp);
    return yes;
}

/* why without a leading "PATH: ". */
static const char *cli_strip_path(const char *why, const char *path) {
    size_t n = strlen(path);
    return !strncmp(why, path, n) && why[n] == ':' && why[n + 1] == ' ' ? why + n + 2 : why;
}

static void usage(FILE *out) {
    fputs("usage: pagein inspect FILE|DIR [--json] [--summary] [--lenient] [--full[=all]]\n"
          "\n"
          "Prints the header of a model file (safetensors, and every other format pagein\n"
          "opens): format, tensor count, parameter count, bytes by dtype, data start, how\n"
          "many tensors are 8/64/256/4096-byte aligned, the metadata, then one line per\n"
          "tensor (name, dtype, shape, bytes, absolute offset, layer). No tensor data is read.\n"
          "A Parquet file (.parquet, or PAR1 at both ends) prints its footer instead: schema\n"
          "(columns, types, list/scalar, annotations), row groups, codecs, encodings, sizes\n"
          "and page indexes (--json: pagein_parquet_describe in pagein.h).\n"
          "Training data (a shard of Arrow, WebDataset tar, MDS, JSONL/text incl. .gz/.zst,\n"
          "Megatron .idx/.bin, or a folder of shards as a whole, such as a datasets\n"
          "save_to_disk folder) prints its formats, samples, groups, schema, codecs, each\n"
          "shard and the index cost: what opening it reads, timed (pagein_dataset_describe).\n"
          "\n"
          "  --json      the same as one JSON object (stable contract: docs/CLI.md)\n"
          "  --summary   leave out the tensor table (text output only)\n"
          "  --lenient   accept trailing bytes after the data (PAGEIN_OPEN_LENIENT)\n"
          "  --full      show long metadata arrays (GGUF vocabularies) to their first 1024\n"
          "              elements (without it: text 8, JSON 64), then a \"... N more\" note or\n"
          "              a {\"...truncated\": {\"count\": N, \"shown\": K}} marker object;\n"
          "              a dataset: list every shard (without it: the first 64)\n"
          "  --full=all  every element of every array, however long\n"
          "\n"
          "Exit status: 0 ok, 1 the file is invalid, 2 usage or I/O error.\n",
          out);
}

static int inspect_main(int argc, char **argv) {
    int json = 0, table = 1;
    const char *path = NULL;
    pagein_open_opts o = PAGEIN_OPEN_OPTS_INIT;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return EXIT_OK;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--full") == 0) {
            inspect_full = 1;
        } else if (strcmp(argv[i], "--full=all") == 0) {
            inspect_full = 2;
        } else if (strcmp(argv[i], "--summary") == 0) {
            table = 0;
        } else if (strcmp(argv[i], "--lenient") == 0) {
            o.flags |= PAGEIN_OPEN_LENIENT;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("inspect", 0, "unknown option '%s'", argv[i]);
            usage(stderr);
            return EXIT_USAGE;
        } else if (path) {
            cli_error("inspect", 0, "one FILE only");
            return EXIT_USAGE;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        usage(stderr);
        return EXIT_USAGE;
    }
    /* inspect reads one file: say where a model of several files goes,
     * and never open a FIFO or device (the first read could block) */
    struct stat st;
    if (pagein_is_url(path)) {
        /* a remote object (docs/REMOTE.md): the source checks it */
    } else if (stat(path, &st) != 0) {
        cli_error("inspect", 0, "%s: %s", path, strerror(errno));
        return EXIT_USAGE;
    }
    /* a checkpoint folder, local or a source URL (whose last part has no suffix) */
    int folder = pagein_is_url(path) || S_ISDIR(st.st_mode);
    if (folder && pagein_is_dcp_dir(path)) return inspect_dcp(path, json);
    if (folder && pagein_is_dcp_hf_dir(path)) return inspect_dcp_hf(path, json);
    if (!pagein_is_url(path) && S_ISDIR(st.st_mode) && !holds_model(path)) {
        int drc = inspect_dataset(path, json, inspect_full != 0, 1);
        if (drc >= 0) return drc;
    }
    if (!pagein_is_url(path) && S_ISDIR(st.st_mode)) {
        cli_error("inspect", 0,
                  "%s is a directory; inspect reads one file: `pagein plan %s` shows the model it holds (files, "
                  "layers), `pagein inspect FILE` one of its files",
                  path, path);
        return EXIT_USAGE;
    }
    if (!pagein_is_url(path) && !S_ISREG(st.st_mode)) {
        cli_error("inspect", 0, "%s: %s, not a regular file", path,
                  S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket"
                  : S_ISCHR(st.st_mode) ? "a character device" : S_ISBLK(st.st_mode) ? "a block device" : "not a file");
        return EXIT_USAGE;
    }
    size_t plen = strlen(path);
    if (plen >= 11 && strcmp(path + plen - 11, ".index.json") == 0) {
        cli_error("inspect", 0,
                  "%s is the index of a sharded checkpoint, not a model file: `pagein plan %s` shows its shards and "
                  "layers, `pagein inspect SHARD` one shard; load it with pagein_model_open() (Python: "
                  "pagein.open_model)",
                  path, path);
        return EXIT_USAGE;
    }
    if (plen >= 7 && strcmp(path + plen - 7, ".distcp") == 0) {
        cli_error("inspect", 0,
                  "%s is one rank's file of a torch Distributed Checkpoint (several torch.save blobs, named by the "
                  "directory's .metadata): `pagein inspect DIR` lists the checkpoint, `pagein convert DIR "
                  "model.safetensors` consolidates it",
                  path);
        return EXIT_USAGE;
    }
    if (inspect_is_parquet(path, 0)) return inspect_parquet(path, json);
    pagein_file *f = NULL;
    int rc = pagein_open(&f, path, &o);
    if (rc == PAGEIN_E_NOT_MODEL) {
        /* training data: a shard of any dataset format (Arrow, tar, MDS,
         * JSONL, Megatron, ...); when it is none either, the model's error */
        char why[1024];
        snprintf(why, sizeof why, "%s", pagein_last_error_detail() ? pagein_last_error_detail() : "");
        if (inspect_is_parquet(path, 1)) return inspect_parquet(path, json);
        int drc = inspect_dataset(path, json, inspect_full != 0, 1);
        if (drc >= 0) return drc;
        cli_error("inspect", 0, "%s: %s: %s (nor a training-data shard of a format pagein reads: %s)", path,
                  pagein_strerror(rc), cli_strip_path(why, path), cli_detail(path));
        return EXIT_INVALID;
    }
    if (rc < 0) {
        cli_error("inspect", rc, "%s", path);
        /* -errno and network failures are I/O, not an invalid file */
        return rc > -4096 || rc == PAGEIN_E_REMOTE ? EXIT_USAGE : EXIT_INVALID;
    }
    inspect_text = !json;
    cli_warn_expansion(stderr, "inspect", path, f);
    if (json)
        print_json(path, f, stdout);
    else
        print_text(path, f, table, stdout);
    pagein_close(f);
    if (fflush(stdout) != 0) return EXIT_USAGE;
    return EXIT_OK;
}

CLI_COMMAND(inspect, "inspect", "print a model file's header and tensor table (--json)", inspect_main)
