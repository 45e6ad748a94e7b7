/* ds_describe.c - pagein_dataset_describe(): an open dataset of any row of
 * the dataset-format table as text or JSON (`pagein inspect` on a shard or
 * a folder of shards): formats, shards, samples, groups, schema, codecs and
 * what open() reads to index each format. Reads nothing: everything comes
 * from the shards' open state (the groups' facts are pure, dsformat.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "dsformat.h"
#include "../core/json.h"

/* ds_arrow.c: the codec of an Arrow shard's compressed batches. */
const char *pi_ds_arrow_codec(const struct pi_dsshard *sh);

#define DESCRIBE_FILES 64 /* shards listed one by one unless PAGEIN_DESCRIBE_ALL */



/* The codec of a shard's bytes: "none", "gzip", "zstd", "lz4_frame", or
 * NULL where it varies per column chunk (Parquet: inspect the file). */
static const char *shard_codec(const struct pi_dsshard *sh) {
    const char *f = sh->fmt->name, *n = sh->name ? sh->name : "";
    if (!strcmp(f, "lines")) return pi_ends_with(n, ".gz") ? "gzip" : pi_ends_with(n, ".zst") ? "zstd" : "none";
    if (!strcmp(f, "mds")) return pi_ends_with(n, ".zstd") ? "zstd" : "none";
    if (!strcmp(f, "arrow")) return pi_ds_arrow_codec(sh);
    if (!strcmp(f, "parquet")) return NULL;
    return "none";
}

/* What open() reads to index a shard of format f (docs/CLI.md, inspect). */
static const char *index_cost(const char *f) {
    static const char *const t[][2] = {
        {"records", "nothing: the record size and the file size give every sample"},
        {"megatron", "PREFIX.idx, read whole and validated (12 bytes a sequence, 8 a document)"},
        {"lines", "one sequential pass over the file for the line offsets, kept in a cache file beside it or in "
                  "the cache dir when it is written (.gz/.zst: decompressed once into groups of lines, not cached)"},
        {"webdataset", "one pass over the tar member headers, kept in a cache file beside the shard or in the "
                       "cache dir when it is written"},
        {"mds", "the folder's index.json (each shard's sample count and sizes), then each shard's offset table"},
        {"arrow", "the footer (file) or the message headers (stream), never the record batch bodies"},
        {"parquet", "the footer: the last 64 KiB in one read (one more when the footer is larger)"},
    };
    for (size_t i = 0; i < PI_ARRAY_LEN(t); i++)
        if (!strcmp(f, t[i][0])) return t[i][1];
    return "the format's own index";
}

static uint64_t shard_group_count(const pagein_dataset *d, size_t i) {
    return d->gfirst ? d->gfirst[i + 1] - d->gfirst[i] : d->shards[i]->ngroups;
}

struct gstats {
    uint64_t min_n, max_n, min_b, max_b, bytes;
};

/* Facts of every group of a shard (pure): fewest and most samples and bytes. */
static void shard_groups(const struct pi_dsshard *sh, uint64_t ngroups, struct gstats *g) {
    for (uint64_t k = 0; k < ngroups; k++) {
        struct pi_dsgroupinfo gi;
        if (pi_ds_group(sh, k, &gi) < 0) break;
        if (gi.count < g->min_n) g->min_n = gi.count;
        if (gi.count > g->max_n) g->max_n = gi.count;
        if (gi.bytes < g->min_b) g->min_b = gi.bytes;
        if (gi.bytes > g->max_b) g->max_b = gi.bytes;
        g->bytes += gi.bytes;
    }
}

/* 1 if two shards have the same fields (name, type, width, dimensions). */
static int same_schema(const struct pi_dsshard *a, const struct pi_dsshard *b) {
    if (a->ncols != b->ncols) return 0;
    for (size_t i = 0; i < a->ncols; i++) {
        const struct pi_dscol *x = &a->cols[i], *y = &b->cols[i];
        if (strcmp(x->name, y->name) || x->type != y->type || x->width != y->width || x->ndim != y->ndim) return 0;
    }
    return 1;
}

static void shape_text(struct pi_buf *b, const struct pi_dscol *c, int json) {
    pi_buf_str(b, "[");
    for (unsigned k = 0; k < c->ndim && k < PI_DS_MAX_DIMS; k++) {
        if (c->shape[k] < 0) pi_buf_printf(b, "%s%s", k ? ", " : "", json ? "null" : "*");
        else pi_buf_printf(b, "%s%lld", k ? ", " : "", (long long)c->shape[k]);
    }
    pi_buf_str(b, "]");
}

struct dsum {
    const struct pi_dsshard *schema; /* the first shard with samples (else the first) */
    int consistent;
    struct gstats g;
    uint64_t bytes;
    char formats[256], codecs[256]; /* distinct names, ", "-separated */
};

static void add_name(char *list, size_t cap, const char *name) {
    size_t n = strlen(name), l = strlen(list);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == 0 || p[n] == ',')) return;
    if (l + n + 3 < cap) snprintf(list + l, cap - l, "%s%s", l ? ", " : "", name);
}

static void summarise(const pagein_dataset *d, struct dsum *s) {
    memset(s, 0, sizeof *s);
    s->consistent = 1;
    s->g.min_n = s->g.min_b = UINT64_MAX;
    for (size_t i = 0; i < d->nfiles; i++) {
        const struct pi_dsshard *sh = d->shards[i];
        if (!s->schema || (!s->schema->nsamples && sh->nsamples)) s->schema = sh;
        s->bytes += d->files[i].size;
        add_name(s->formats, sizeof s->formats, sh->fmt->name);
        const char *c = shard_codec(sh);
        add_name(s->codecs, sizeof s->codecs, c ? c : "per column chunk");
        shard_groups(sh, shard_group_count(d, i), &s->g);
    }
    for (size_t i = 0; i < d->nfiles; i++)
        if (d->shards[i]->nsamples && s->schema && !same_schema(s->schema, d->shards[i])) s->consistent = 0;
    if (s->g.min_n == UINT64_MAX) s->g.min_n = s->g.min_b = 0;
}

static void describe_json(struct pi_buf *b, const pagein_dataset *d, const struct dsum *s, int all) {
    pi_buf_printf(b, "{\"formats\": [");
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", s->formats);
    int k = 0;
    for (char *t = strtok(tmp, ", "); t; t = strtok(NULL, ", ")) {
        pi_buf_printf(b, "%s", k++ ? ", " : "");
        pi_json_buf_str(b, t);
    }
    pi_buf_printf(b, "], \"shards\": %zu, \"samples\": %" PRIu64 ", \"groups\": %" PRIu64 ", \"bytes\": %" PRIu64
               ", \"addressable\": %s",
            d->nfiles, d->nsamples, d->ngroups, s->bytes, d->addressable ? "true" : "false");
    pi_buf_printf(b, ", \"group_samples\": {\"min\": %" PRIu64 ", \"max\": %" PRIu64 "}, \"group_bytes\": {\"min\": %" PRIu64
               ", \"max\": %" PRIu64 ", \"total\": %" PRIu64 "}",
            s->g.min_n, s->g.max_n, s->g.min_b, s->g.max_b, s->g.bytes);
    pi_buf_printf(b, ", \"schema_consistent\": %s, \"schema\": [", s->consistent ? "true" : "false");
    for (size_t i = 0; s->schema && i < s->schema->ncols; i++) {
        const struct pi_dscol *c = &s->schema->cols[i];
        pi_buf_printf(b, "%s{\"name\": ", i ? ", " : "");
        pi_json_buf_str(b, c->name);
        pi_buf_printf(b, ", \"type\": \"%s\", \"shape\": ", pi_dstype_name((enum pi_dstype)c->type, c->width));
        shape_text(b, c, 1);
        pi_buf_printf(b, ", \"nullable\": %s}", c->nullable ? "true" : "false");
    }
    pi_buf_printf(b, "], \"index\": {");
    k = 0;
    snprintf(tmp, sizeof tmp, "%s", s->formats);
    for (char *t = strtok(tmp, ", "); t; t = strtok(NULL, ", ")) {
        pi_buf_printf(b, "%s", k++ ? ", " : "");
        pi_json_buf_str(b, t);
        pi_buf_str(b, ": ");
        pi_json_buf_str(b, index_cost(t));
    }
    pi_buf_printf(b, "}, \"files\": [");
    size_t shown = all || d->nfiles <= DESCRIBE_FILES ? d->nfiles : DESCRIBE_FILES;
    for (size_t i = 0; i < shown; i++) {
        const struct pi_dsshard *sh = d->shards[i];
        pi_buf_printf(b, "%s{\"path\": ", i ? ", " : "");
        pi_json_buf_str(b, d->files[i].path);
        pi_buf_printf(b, ", \"format\": \"%s\", \"bytes\": %" PRIu64 ", \"samples\": %" PRIu64 ", \"groups\": %" PRIu64
                   ", \"codec\": ",
                sh->fmt->name, d->files[i].size, sh->nsamples, shard_group_count(d, i));
        pi_json_buf_str(b, shard_codec(sh));
        pi_buf_str(b, "}");
    }
    if (shown < d->nfiles)
        pi_buf_printf(b, "%s{\"...truncated\": {\"count\": %zu, \"shown\": %zu}}", shown ? ", " : "", d->nfiles, shown);
    pi_buf_str(b, "]}\n");
}

static void describe_text(struct pi_buf *b, const pagein_dataset *d, const struct dsum *s, int all) {
    char h[64];
    double mib = (double)s->bytes / 1048576.0;
    snprintf(h, sizeof h, "%.2f MiB", mib);
    pi_buf_printf(b, "format:    %s (%zu shard%s, %s)\n", s->formats, d->nfiles, d->nfiles == 1 ? "" : "s", h);
    pi_buf_printf(b, "samples:   %" PRIu64 "%s\n", d->nsamples,
            d->addressable ? " (each a byte range: the global order reads single samples)" : "");
    pi_buf_printf(b, "groups:    %" PRIu64 " (units of block reads: %" PRIu64 "-%" PRIu64 " samples, %" PRIu64 "-%" PRIu64
               " bytes each)\n",
            d->ngroups, s->g.min_n, s->g.max_n, s->g.min_b, s->g.max_b);
    pi_buf_printf(b, "codecs:    %s\n", s->codecs[0] ? s->codecs : "none");
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", s->formats);
    for (char *t = strtok(tmp, ", "); t; t = strtok(NULL, ", ")) pi_buf_printf(b, "index:     %s: %s\n", t, index_cost(t));
    size_t nc = s->schema ? s->schema->ncols : 0;
    pi_buf_printf(b, "\nschema: %zu field%s%s\n", nc, nc == 1 ? "" : "s",
            s->consistent ? "" : " (of the first shard with samples; other shards differ)");
    if (nc) pi_buf_printf(b, "  %-32s %-8s %-12s %s\n", "NAME", "TYPE", "SHAPE", "NULLABLE");
    for (size_t i = 0; i < nc; i++) {
        const struct pi_dscol *c = &s->schema->cols[i];
        struct pi_buf sb = {0};
        shape_text(&sb, c, 0);
        pi_buf_printf(b, "  %-32s %-8s %-12s %s\n", c->name, pi_dstype_name((enum pi_dstype)c->type, c->width),
                sb.p ? sb.p : "[]", c->nullable ? "yes" : "no");
        pi_buf_free(&sb);
    }
    size_t shown = all || d->nfiles <= DESCRIBE_FILES ? d->nfiles : DESCRIBE_FILES;
    pi_buf_printf(b, "\n%-12s %10s %10s %8s %-10s %s\n", "FORMAT", "BYTES", "SAMPLES", "GROUPS", "CODEC", "SHARD");
    for (size_t i = 0; i < shown; i++) {
        const struct pi_dsshard *sh = d->shards[i];
        const char *c = shard_codec(sh);
        pi_buf_printf(b, "%-12s %10" PRIu64 " %10" PRIu64 " %8" PRIu64 " %-10s %s\n", sh->fmt->name, d->files[i].size,
                sh->nsamples, shard_group_count(d, i), c ? c : "(columns)", d->files[i].path);
    }
    if (shown < d->nfiles) pi_buf_printf(b, "... %zu more shards (inspect --full lists every one)\n", d->nfiles - shown);
}

int pagein_dataset_describe(const pagein_dataset *d, unsigned flags, char **out) {
    RETURN_IF(!d || !out, PAGEIN_E_INVALID, "pagein_dataset_describe: NULL argument");
    RETURN_IF(d->kind != PI_DS_TABLE || !d->shards, PAGEIN_E_UNSUPPORTED,
              "pagein_dataset_describe: a dataset opened with pagein_dataset_open describes itself; this one was "
              "opened by records or megatron directly");
    struct dsum s;
    summarise(d, &s);
    struct pi_buf b = {0};
    if (flags & PAGEIN_DESCRIBE_JSON)
        describe_json(&b, d, &s, (flags & PAGEIN_DESCRIBE_ALL) != 0);
    else
        describe_text(&b, d, &s, (flags & PAGEIN_DESCRIBE_ALL) != 0);
    return pi_buf_hand_out(&b, out);
}
