/* cmd_read_samples.c - `pagein read-samples`: stream the samples of a
 * training dataset (fixed-size records over shard files, or a Megatron-LM
 * indexed dataset) in a reader's order, or just their ids, for inspection
 * and for piping into other tools. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *out) {
    fprintf(out,
            "usage: pagein read-samples [OPTIONS] --records SIZE FILE...\n"
            "       pagein read-samples [OPTIONS] --megatron PREFIX\n"
            "       pagein read-samples --dataset SPEC [PIPE OPTIONS]\n"
            "\n"
            "Reads every sample of one epoch in a reader's order and writes the samples' bytes\n"
            "to stdout (or, with --ids, their ids one per line).\n"
            "\n"
            "  --records SIZE     fixed-size records of SIZE bytes over the FILEs, in order\n"
            "  --megatron PREFIX  Megatron-LM indexed dataset PREFIX.idx + PREFIX.bin (validated)\n"
            "  --mode M           global (default), block, ranges or mmap\n"
            "  --seed N           order seed (default 0)\n"
            "  --epoch N          epoch number (default 0): the order depends on (seed, epoch)\n"
            "  --in-order         no shuffling\n"
            "  --ids              print sample ids instead of bytes\n"
            "  --format F         how sample bytes are written: raw (default: back to back,\n"
            "                     fine for fixed-size records), framed (each sample as a\n"
            "                     16-byte header, u64 little-endian id then u64 little-endian\n"
            "                     byte length, then its bytes) or jsonl (one line per sample:\n"
            "                     {\"id\": N, \"length\": L, \"base64\": \"...\"}); variable-length\n"
            "                     samples (Megatron) need framed or jsonl to be told apart\n"
            "  --limit N          stop after N samples\n"
            "  --qd N             global/ranges: reads in flight (default 32)\n"
            "  --batch N          global/ranges: samples per batch (default 256)\n"
            "  --block-size S     bytes per group of records, the blocks the block mode\n"
            "                     shuffles (default 16M)\n"
            "  --buffer-blocks N  block: blocks in memory (default 8)\n"
            "  --stats            print counters and the shuffle quality to stderr\n"
            "  --json             one JSON object: mode, samples, ids, quality, I/O counters\n"
            "\n"
            "\n"
            "--dataset SPEC reads any format of the dataset-format table (records, megatron,\n"
            "lines = JSONL/text incl. .gz/.zst, webdataset .tar, mds, ...) through the one\n"
            "pipeline (docs/TRAINING-DATA.md). SPEC: a file, a directory, a glob, a brace\n"
            "pattern shard-{000..009}.tar, a URL; repeat --dataset for a list. PIPE OPTIONS:\n"
            "  --data-format NAME  force a row (default: detected)\n"
            "  --record-size SIZE  records: bytes per record\n"
            "  --order O           none, block (default) or global\n"
            "  --seed N, --epoch N the order depends on (seed, epoch) only\n"
            "  --rank R --world W  this rank of W (default 0 of 1)\n"
            "  --worker K --workers N   this loader worker of N (default 0 of 1)\n"
            "  --batch-size B      the loader batch: workers get whole batches (default 1)\n"
            "  --window N          block: groups shuffled together (default 8)\n"
            "  --group-size SIZE   bytes per group of addressable shards (default 4M)\n"
            "  --cache-dir DIR     where indexes of read-only or remote shards are cached (tar)\n"
            "  --columns A,B       read only these fields\n"
            "  --state TEXT        resume from a state printed by --state-after (@FILE: read from FILE)\n"
            "  --state-after N     print the state after every rank consumed N samples, and exit\n"
            "  --limit N           stop after N samples\n"
            "  --format F          how samples are written (default raw): raw (the bytes of each\n"
            "                      sample's fields back to back, in field order), framed (a\n"
            "                      16-byte header, u64 LE id and u64 LE length, then those\n"
            "                      bytes) or jsonl (one line per sample: {\"id\": N, \"fields\":\n"
            "                      {NAME: {\"type\", \"shape\", \"base64\"}}}, null fields: null;\n"
            "                      nested values as {\"type\": \"list\"|\"struct\"|\"map\", \"items\"|\n"
            "                      \"fields\"|\"entries\": ...})\n"
            "  --ids / --json      ids one per line / one JSON object with ids and counters\n"
            "  --check             read everything, print only the counts\n"
            "\n"
            "The dataset-format table's rows (--data-format takes a name or an alias):\n");
    for (size_t i = 0; i < pagein_dataset_format_count(); i++) {
        pagein_dataset_format_info in;
        if (pagein_dataset_format_get(i, &in) < 0) continue;
        fprintf(out, "  %-11s", in.name);
        for (size_t k = 0; in.aliases[k]; k++) fprintf(out, "%s%s", k ? ", " : " also ", in.aliases[k]);
        for (size_t k = 0; in.suffixes[k]; k++) fprintf(out, "%s%s", k ? " " : (in.aliases[0] ? "; files " : " files "),
                                                        in.suffixes[k]);
        fputs(in.aliases[0] || in.suffixes[0] ? "\n" : " never detected: named only\n", out);
    }
    fprintf(out, "\nExit status: 0 ok, 1 invalid dataset, 2 usage or I/O error.\n");
}

static int exit_for(int rc) { return rc <= PAGEIN_E_BASE && rc > PAGEIN_E_LAST ? EXIT_INVALID : EXIT_USAGE; }

/* The exit status once got samples were read (rc < 0: the reading failed, said here). */
static int read_status(int rc, uint64_t got) {
    if (rc >= 0) return EXIT_OK;
    cli_error("read-samples", rc, "reading failed after %" PRIu64 " samples", got);
    return exit_for(rc);
}

/* ---- --dataset: the one pipeline over the dataset-format table ----------- */

static const char *field_type_name(const pagein_field *f) {
    static const char *const ints[] = {"int8", "int16", "int32", "int64"}, *const uints[] = {"uint8", "uint16", "uint32", "uint64"},
                                *const floats[] = {"?", "float16", "float32", "float64"};
    int k = f->width == 1 ? 0 : f->width == 2 ? 1 : f->width == 4 ? 2 : 3;
    switch (f->type) {
    case PAGEIN_FIELD_BOOL: return "bool";
    case PAGEIN_FIELD_INT: return ints[k];
    case PAGEIN_FIELD_UINT: return uints[k];
    case PAGEIN_FIELD_FLOAT: return floats[k];
    case PAGEIN_FIELD_UTF8: return "utf8";
    case PAGEIN_FIELD_BINARY: return "binary";
    case PAGEIN_FIELD_LIST: return "list";
    case PAGEIN_FIELD_STRUCT: return "struct";
    case PAGEIN_FIELD_MAP: return "map";
    default: return "null";
    }
}

static void put_b64(const unsigned char *d, uint64_t n) {
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char q[4];
    for (uint64_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16;
        if (i + 1 < n) v |= (uint32_t)d[i + 1] << 8;
        if (i + 2 < n) v |= d[i + 2];
        q[0] = b64[v >> 18 & 63];
        q[1] = b64[v >> 12 & 63];
        q[2] = i + 1 < n ? b64[v >> 6 & 63] : '=';
        q[3] = i + 2 < n ? b64[v & 63] : '=';
        fwrite(q, 1, 4, stdout);
    }
}

enum out_format { OUT_RAW, OUT_FRAMED, OUT_JSONL };

/* Nested values (LIST, STRUCT, MAP) hold their children at fields[child ..
 * child + nchild) of the item's array; a well-formed item never nests
 * deeper than its node count, and the walk is bounded by that too. */
static const pagein_field *child_of(const pagein_item *it, const pagein_field *f, uint32_t k) {
    uint64_t i = (uint64_t)f->child + k;
    return i < it->nnodes ? &it->fields[i] : NULL;
}

static int is_nested(const pagein_field *f) {
    return f->type == PAGEIN_FIELD_LIST || f->type == PAGEIN_FIELD_STRUCT || f->type == PAGEIN_FIELD_MAP;
}

/* The bytes of f's leaves, in order (raw and framed): their length when
 * out is NULL, else written. */
static uint64_t put_leaves(const pagein_item *it, const pagein_field *f, FILE *out, int depth, int *err) {
    if (!f || f->null || depth > 64) return 0;
    if (!is_nested(f)) {
        if (out && f->nbytes && fwrite(f->data, 1, (size_t)f->nbytes, out) != f->nbytes) *err = 1;
        return f->nbytes;
    }
    uint64_t n = 0;
    for (uint32_t k = 0; k < f->nchild; k++) n += put_leaves(it, child_of(it, f, k), out, depth + 1, err);
    return n;
}

/* One value as JSON: null, a leaf {"type", "shape", "base64"}, a list
 * {"type": "list", "items": [...]}, a struct {"type": "struct", "fields":
 * {...}} or a map {"type": "map", "entries": [{key, value structs}]}. */
static void put_json_value(const pagein_item *it, const pagein_field *f, int depth) {
    if (!f || f->null || depth > 64) {
        printf("null");
        return;
    }
    if (!is_nested(f)) {
        printf("{\"type\": \"%s\", \"shape\": [", field_type_name(f));
        for (unsigned j = 0; j < f->ndim; j++) printf("%s%" PRIu64, j ? ", " : "", f->shape[j]);
        printf("], \"base64\": \"");
        put_b64(f->data, f->nbytes);
        printf("\"}");
        return;
    }
    int st = f->type == PAGEIN_FIELD_STRUCT;
    printf("{\"type\": \"%s\", \"%s\": %c", st ? "struct" : f->type == PAGEIN_FIELD_MAP ? "map" : "list",
           st ? "fields" : f->type == PAGEIN_FIELD_MAP ? "entries" : "items", st ? '{' : '[');
    for (uint32_t k = 0; k < f->nchild; k++) {
        const pagein_field *c = child_of(it, f, k);
        printf("%s", k ? ", " : "");
        if (st) {
            cli_json_str(stdout, c && c->name ? c->name : "", c && c->name ? strlen(c->name) : 0);
            printf(": ");
        }
        put_json_value(it, c, depth + 1);
    }
    printf("%c}", st ? '}' : ']');
}

/* One item of the pipeline in the chosen framing (raw and framed: the
 * bytes of its non-null fields back to back, in field order, a nested
 * value's leaves in order); 0 or -EIO. */
static int put_item(enum out_format fmt, const pagein_item *it) {
    int err = 0;
    if (fmt == OUT_FRAMED) {
        uint64_t len = 0;
        for (size_t k = 0; k < it->nfields; k++) len += put_leaves(it, &it->fields[k], NULL, 0, &err);
        unsigned char h[16];
        for (int i = 0; i < 8; i++) h[i] = (unsigned char)(it->id >> (8 * i)), h[8 + i] = (unsigned char)(len >> (8 * i));
        if (fwrite(h, 1, sizeof h, stdout) != sizeof h) return -EIO;
    }
    if (fmt != OUT_JSONL) {
        for (size_t k = 0; k < it->nfields; k++) put_leaves(it, &it->fields[k], stdout, 0, &err);
        return err ? -EIO : 0;
    }
    printf("{\"id\": %" PRIu64 ", \"fields\": {", it->id);
    for (size_t k = 0; k < it->nfields; k++) {
        printf("%s", k ? ", " : "");
        cli_json_str(stdout, it->fields[k].name, strlen(it->fields[k].name));
        printf(": ");
        put_json_value(it, &it->fields[k], 0);
    }
    return fputs("}}\n", stdout) < 0 ? -EIO : 0;
}

/* --state @FILE: the state read whole from FILE (a long state does not fit
 * one command-line argument), the trailing newline dropped; NULL on error. */
static char *read_state(const char *path, char *old) {
    free(old);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *t = NULL;
    size_t n = 0, cap = 0, k;
    char chunk[65536];
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) {
        char *nt = n + k + 1 > cap ? realloc(t, cap = 2 * (n + k + 1)) : t;
        if (!nt) {
            free(t);
            fclose(f);
            return NULL;
        }
        t = nt;
        memcpy(t + n, chunk, k);
        n += k;
    }
    fclose(f);
    if (!t) t = calloc(1, 1);
    while (t && n && (t[n - 1] == '\n' || t[n - 1] == '\r')) n--;
    if (t) t[n] = 0;
    return t;
}

static int pipe_main(int argc, char **argv) {
    pagein_dataset_opts dop = PAGEIN_DATASET_OPTS_INIT;
    pagein_pipe_opts po = PAGEIN_PIPE_OPTS_INIT;
    uint64_t limit = UINT64_MAX, state_after = UINT64_MAX;
    int ids_only = 0, json = 0, check = 0, have_format = 0, status = EXIT_USAGE;
    enum out_format fmt = OUT_RAW;
    char *spec = NULL, *cols = NULL, *state_text = NULL;
    const char **colv = NULL;
    size_t specn = 0, ncols = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        int bad = 0;
        int *flag = !strcmp(a, "--ids") ? &ids_only : !strcmp(a, "--json") ? &json : !strcmp(a, "--check") ? &check : NULL;
        if (flag) {
            *flag = 1;
            continue;
        }
        if (!v) bad = 1;
        else if (!strcmp(a, "--dataset")) {
            size_t l = strlen(v);
            char *ns = realloc(spec, specn + l + 2);
            if (!ns) goto out;
            spec = ns;
            if (specn) spec[specn++] = '\n';
            memcpy(spec + specn, v, l + 1);
            specn += l;
        } else if (!strcmp(a, "--data-format")) dop.format = v;
        else if (!strcmp(a, "--cache-dir")) dop.cache_dir = v;
        else if (!strcmp(a, "--record-size")) bad = cli_parse_size(v, &dop.record_bytes) < 0 || !dop.record_bytes;
        else if (!strcmp(a, "--group-size")) bad = cli_parse_size(v, &dop.group_bytes) < 0 || !dop.group_bytes;
        else if (!strcmp(a, "--order")) {
            int k = pagein_order_from_name(v);
            bad = k < 0;
            po.order = (pagein_order)(k < 0 ? 0 : k);
        } else if (!strcmp(a, "--format")) {
            have_format = 1;
            fmt = !strcmp(v, "framed") ? OUT_FRAMED : !strcmp(v, "jsonl") ? OUT_JSONL : OUT_RAW;
            bad = fmt == OUT_RAW && strcmp(v, "raw") != 0;
        }
        else if (!strcmp(a, "--columns")) cols = (char *)v;
        else if (!strcmp(a, "--state") && v[0] == '@') bad = !(po.state = state_text = read_state(v + 1, state_text));
        else if (!strcmp(a, "--state")) po.state = v;
        else {
            uint64_t x = strtoull(v, &end, 0);
            bad = *end != 0 || end == v;
            if (!strcmp(a, "--seed")) po.seed = x;
            else if (!strcmp(a, "--epoch")) po.epoch = x;
            else if (!strcmp(a, "--limit")) limit = x;
            else if (!strcmp(a, "--state-after")) state_after = x;
            else if (!strcmp(a, "--rank")) po.rank = (uint32_t)x;
            else if (!strcmp(a, "--world")) po.world_size = (uint32_t)x;
            else if (!strcmp(a, "--worker")) po.worker = (uint32_t)x;
            else if (!strcmp(a, "--workers")) po.num_workers = (uint32_t)x;
            else if (!strcmp(a, "--batch-size")) po.batch = (uint32_t)x;
            else if (!strcmp(a, "--window")) po.window = (uint32_t)x;
            else if (!strcmp(a, "--qd")) po.queue_depth = (unsigned)x;
            else if (!strcmp(a, "--batch")) po.read_batch = (uint32_t)x;
            else bad = 1;
        }
        if (bad) {
            cli_error("read-samples", 0, "bad argument '%s%s%s' (see --help)", a, v ? " " : "", v ? v : "");
            goto out;
        }
        i++;
    }
    if (cols) {
        colv = calloc(strlen(cols) + 1, sizeof *colv);
        if (!colv) goto out;
        for (char *t = strtok(cols, ","); t; t = strtok(NULL, ",")) colv[ncols++] = t;
        dop.columns = colv;
        dop.ncolumns = ncols;
    }
    if (have_format && (ids_only || json || check)) {
        cli_error("read-samples", 0, "--format frames sample bytes; --ids, --json and --check print ids or counts instead");
        goto out;
    }
    if (!ids_only && !json && !check && state_after == UINT64_MAX && fmt != OUT_JSONL && isatty(1)) {
        cli_error("read-samples", 0, "stdout is a terminal: redirect the sample bytes, or use --ids, --check or --format jsonl");
        goto out;
    }
    pagein_dataset *d = NULL;
    int rc = pagein_dataset_open(&d, spec, &dop);
    if (rc < 0) {
        cli_error("read-samples", rc, "cannot open the dataset");
        status = exit_for(rc);
        goto out;
    }
    if (state_after != UINT64_MAX) {
        /* the whole state, however long: asked for its length first */
        char *buf = NULL;
        rc = pagein_pipe_state(d, &po, state_after, NULL, 0);
        if (rc >= 0 && !(buf = malloc((size_t)rc + 1))) rc = -ENOMEM;
        if (rc >= 0) rc = pagein_pipe_state(d, &po, state_after, buf, (size_t)rc + 1);
        if (rc < 0) cli_error("read-samples", rc, "cannot compute the state");
        else printf("%s\n", buf);
        free(buf);
        status = rc < 0 ? exit_for(rc) : EXIT_OK;
        pagein_dataset_close(d);
        goto out;
    }
    pagein_pipe *p = NULL;
    if ((rc = pagein_pipe_open(&p, d, &po)) < 0) {
        cli_error("read-samples", rc, "cannot start the pipeline");
        status = exit_for(rc);
        pagein_dataset_close(d);
        goto out;
    }
    uint64_t n = pagein_pipe_length(p), got = 0, fields = 0, bytes = 0;
    uint64_t *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    pagein_item it;
    if (json) printf("{\"order\": \"%s\", \"format\": \"%s\", \"seed\": %" PRIu64 ", \"epoch\": %" PRIu64 ", \"ids\": [",
                     pagein_order_name(po.order), pagein_dataset_format(d, 0), po.seed, po.epoch);
    while (got < limit && (rc = pagein_pipe_next(p, &it)) == 1) {
        if (order && got < n) order[got] = it.id;
        for (size_t k = 0; k < it.nfields; k++) bytes += it.fields[k].nbytes;
        fields += it.nfields;
        if (json) printf("%s%" PRIu64, got ? ", " : "", it.id);
        else if (ids_only) printf("%" PRIu64 "\n", it.id);
        else if (!check && (rc = put_item(fmt, &it)) < 0) break;
        got++;
    }
    status = read_status(rc, got);
    pagein_pipe_stats st;
    pagein_pipe_get_stats(p, &st);
    double q = -1;
    if (json && order && got >= 3 && got <= n && pagein_shuffle_quality(order, (size_t)got, &q) < 0) q = -1; /* --json's */
    if (json) {
        printf("], \"samples\": %" PRIu64 ", \"dataset_samples\": %" PRIu64 ", \"quality\": ", got,
               pagein_dataset_count(d));
        if (q >= 0) printf("%.4f", q);
        else printf("null");
        printf(", \"units\": %" PRIu64 ", \"groups\": %" PRIu64 ", \"requests\": %" PRIu64 ", \"bytes_read\": %" PRIu64
               ", \"memory_peak\": %" PRIu64 ", \"ok\": %s}\n",
               st.units, st.groups, st.requests, st.bytes_read, st.memory_peak, status == EXIT_OK ? "true" : "false");
    }
    if (check)
        printf("%" PRIu64 " samples, %" PRIu64 " fields, %" PRIu64 " field bytes, %" PRIu64 " groups, %" PRIu64
               " bytes read\n", got, fields, bytes, st.groups, st.bytes_read);
    if (fflush(stdout) != 0 && status == EXIT_OK) status = EXIT_USAGE;
    free(order);
    pagein_pipe_close(p);
    pagein_dataset_close(d);
out:
    free(spec);
    free(colv);
    free(state_text);
    return status;
}

static void put_u64le(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* One sample in the chosen framing; 0 or -EIO. */
static int write_sample(enum out_format f, const pagein_sample *s) {
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (f == OUT_FRAMED) {
        unsigned char h[16];
        put_u64le(h, s->id);
        put_u64le(h + 8, s->length);
        if (fwrite(h, 1, sizeof h, stdout) != sizeof h) return -EIO;
    }
    if (f != OUT_JSONL) {
        if (s->length && fwrite(s->data, 1, (size_t)s->length, stdout) != s->length) return -EIO;
        return 0;
    }
    printf("{\"id\": %" PRIu64 ", \"length\": %" PRIu64 ", \"base64\": \"", s->id, s->length);
    const unsigned char *d = s->data;
    char q[4];
    for (uint64_t i = 0; i < s->length; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16;
        if (i + 1 < s->length) v |= (uint32_t)d[i + 1] << 8;
        if (i + 2 < s->length) v |= d[i + 2];
        q[0] = b64[v >> 18 & 63];
        q[1] = b64[v >> 12 & 63];
        q[2] = i + 1 < s->length ? b64[v >> 6 & 63] : '=';
        q[3] = i + 2 < s->length ? b64[v & 63] : '=';
        fwrite(q, 1, 4, stdout);
    }
    return fputs("\"}\n", stdout) < 0 ? -EIO : 0;
}


static int read_samples_main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--dataset")) return pipe_main(argc, argv);
    uint64_t rec = 0, seed = 0, epoch = 0, limit = UINT64_MAX;
    const char *megatron = NULL;
    int ids_only = 0, json = 0, stats = 0, in_order = 0, have_format = 0;
    enum out_format fmt = OUT_RAW;
    pagein_reader_opts ro = PAGEIN_READER_OPTS_INIT;
    const char **files = calloc((size_t)argc, sizeof *files);
    size_t nfiles = 0;
    if (!files) return EXIT_USAGE;
    int status = EXIT_USAGE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        char *end = NULL;
        if (cli_is_help(a)) {
            usage(stdout);
            free(files);
            return EXIT_OK;
        }
        /* flags without a value */
        int *flag = !strcmp(a, "--ids") ? &ids_only : !strcmp(a, "--json") ? &json
                  : !strcmp(a, "--stats") ? &stats : !strcmp(a, "--in-order") ? &in_order : NULL;
        if (flag) {
            *flag = 1;
            continue;
        }
        if (a[0] != '-') {
            files[nfiles++] = a;
            continue;
        } else if (!v)
            bad = 1;
        else if (!strcmp(a, "--records"))
            bad = cli_parse_size(v, &rec) < 0 || rec == 0;
        else if (!strcmp(a, "--megatron"))
            megatron = v;
        else if (!strcmp(a, "--format")) {
            have_format = 1;
            if (!strcmp(v, "raw")) fmt = OUT_RAW;
            else if (!strcmp(v, "framed")) fmt = OUT_FRAMED;
            else if (!strcmp(v, "jsonl")) fmt = OUT_JSONL;
            else bad = 1;
        }
        else if (!strcmp(a, "--mode")) {
            int k = pagein_reader_kind_from_name(v);
            bad = k < 0;
            ro.kind = (pagein_reader_kind)(k < 0 ? 0 : k);
        } else if (!strcmp(a, "--seed"))
            seed = strtoull(v, &end, 0), bad = *end != 0;
        else if (!strcmp(a, "--epoch"))
            epoch = strtoull(v, &end, 0), bad = *end != 0;
        else if (!strcmp(a, "--limit"))
            limit = strtoull(v, &end, 0), bad = *end != 0;
        else if (!strcmp(a, "--qd"))
            ro.queue_depth = (unsigned)strtoul(v, &end, 0), bad = *end != 0 || !ro.queue_depth;
        else if (!strcmp(a, "--batch"))
            ro.batch = (unsigned)strtoul(v, &end, 0), bad = *end != 0 || !ro.batch;
        else if (!strcmp(a, "--block-size"))
            bad = cli_parse_size(v, &ro.block_bytes) < 0 || !ro.block_bytes;
        else if (!strcmp(a, "--buffer-blocks"))
            ro.buffer_blocks = (unsigned)strtoul(v, &end, 0), bad = *end != 0 || !ro.buffer_blocks;
        else
            bad = 1;
        if (bad) {
            cli_error("read-samples", 0, "bad argument '%s%s%s' (see --help)", a, v ? " " : "", v ? v : "");
            goto out;
        }
        i++;
    }
    if ((megatron != NULL) == (rec != 0) || (megatron && nfiles) || (rec && !nfiles)) {
        cli_error("read-samples", 0, "give either --records SIZE FILE... or --megatron PREFIX (see --help)");
        goto out;
    }
    if (have_format && (ids_only || json)) {
        cli_error("read-samples", 0, "--format frames sample bytes; --ids and --json print ids instead");
        goto out;
    }
    if (!ids_only && !json && fmt != OUT_JSONL && isatty(1)) {
        cli_error("read-samples", 0, "refusing to write sample bytes to a terminal (use --ids, or redirect)");
        goto out;
    }
    /* a FIFO or device among the inputs would block the first read */
    for (size_t i = 0; i < nfiles; i++)
        if (cli_check_path("read-samples", files[i])) goto out;
    if (megatron) {
        for (int k = 0; k < 2; k++) {
            size_t n = strlen(megatron) + 5;
            char *p = malloc(n);
            if (!p) goto out;
            snprintf(p, n, "%s%s", megatron, k ? ".bin" : ".idx");
            struct stat st;
            int bad = stat(p, &st) == 0 && !S_ISREG(st.st_mode) && cli_check_path("read-samples", p);
            free(p);
            if (bad) goto out;
        }
    }
    pagein_dataset *d = NULL;
    /* --block-size: the dataset's groups, the blocks the block order shuffles */
    int rc = cli_open_records(&d, files, nfiles, rec, megatron, ro.block_bytes);
    if (rc < 0) {
        cli_error("read-samples", rc, "cannot open the dataset");
        status = exit_for(rc);
        goto out;
    }
    uint64_t n = pagein_dataset_count(d);
    ro.seed = seed;
    ro.flags = in_order ? PAGEIN_READER_IN_ORDER : 0;
    pagein_reader *r = NULL;
    if (n == 0) {
        status = EXIT_OK; /* an empty dataset: nothing to stream */
        if (json) printf("{\"mode\": \"%s\", \"samples\": 0, \"ids\": [], \"quality\": null}\n",
                         pagein_reader_kind_name(ro.kind));
        pagein_dataset_close(d);
        goto out;
    }
    if ((rc = pagein_reader_open(&r, d, &ro)) < 0 || (epoch && (rc = pagein_reader_start_epoch(r, epoch)) < 0)) {
        cli_error("read-samples", rc, "cannot start the %s reader", pagein_reader_kind_name(ro.kind));
        status = exit_for(rc);
        pagein_reader_close(r);
        pagein_dataset_close(d);
        goto out;
    }
    uint64_t *order = malloc((size_t)n * sizeof *order);
    uint64_t got = 0;
    pagein_sample s;
    if (json) printf("{\"mode\": \"%s\", \"seed\": %" PRIu64 ", \"epoch\": %" PRIu64 ", \"ids\": [",
                     pagein_reader_kind_name(ro.kind), seed, epoch);
    while (got < limit && (rc = pagein_reader_next(r, &s)) == 1) {
        if (order) order[got] = s.id;
        if (json)
            printf("%s%" PRIu64, got ? ", " : "", s.id);
        else if (ids_only)
            printf("%" PRIu64 "\n", s.id);
        else if (write_sample(fmt, &s) < 0) {
            rc = -EIO;
            break;
        }
        got++;
    }
    status = read_status(rc, got);
    double q = -1;
    if (order && got >= 3 && pagein_shuffle_quality(order, (size_t)got, &q) < 0) q = -1;
    pagein_reader_stats st;
    pagein_reader_get_stats(r, &st);
    if (json) {
        printf("], \"samples\": %" PRIu64 ", \"dataset_samples\": %" PRIu64 ", \"quality\": ", got, n);
        if (q >= 0)
            printf("%.4f", q);
        else
            printf("null");
        printf(", \"requests\": %" PRIu64 ", \"reads\": %" PRIu64 ", \"bytes_read\": %" PRIu64
               ", \"bytes_wasted\": %" PRIu64 ", \"memory_bound\": %" PRIu64 ", \"ok\": %s}\n",
               st.io.requests, st.io.reads, st.io.bytes_read, st.io.bytes_wasted, st.memory_bound,
               status == EXIT_OK ? "true" : "false");
    }
    if (stats)
        fprintf(stderr,
                "read-samples: %s: %" PRIu64 " of %" PRIu64 " samples, quality %.3f, %" PRIu64 " requests, %" PRIu64
                " reads, %" PRIu64 " bytes read (%" PRIu64 " wasted), memory bound %" PRIu64 " bytes\n",
                pagein_reader_kind_name(ro.kind), got, n, q, st.io.requests, st.io.reads, st.io.bytes_read,
                st.io.bytes_wasted, st.memory_bound);
    if (fflush(stdout) != 0 && status == EXIT_OK) status = EXIT_USAGE;
    free(order);
    pagein_reader_close(r);
    pagein_dataset_close(d);
out:
    free(files);
    return status;
}

CLI_COMMAND(read_samples, "read-samples", "stream training samples (or their ids) in a reader's order",
            read_samples_main)
