/* parquet_describe.c - pagein_parquet_describe(): a Parquet file's footer
 * as text or JSON (`pagein inspect data.parquet`). Reads the tail through
 * the source seam (local paths and URLs alike): one read of the last
 * 64 KiB, a second when the footer is larger. docs/FORMAT-PARQUET.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../format/format.h"
#include "../source/source.h"
#include "parquet.h"
#include "../core/json.h"

#define TAIL (64u << 10)



static const char *rep_name(int r) {
    return r == PI_PQ_REQUIRED ? "required" : r == PI_PQ_OPTIONAL ? "optional" : r == PI_PQ_REPEATED ? "repeated" : "";
}

static const char *logical_name(const struct pi_pq_schema *e) {
    static const char *lt[] = {NULL, "STRING", "MAP", "LIST", "ENUM", "DECIMAL", "DATE", "TIME", "TIMESTAMP", NULL,
                               "INTEGER", "UNKNOWN", "JSON", "BSON", "UUID", "FLOAT16", "VARIANT", "GEOMETRY",
                               "GEOGRAPHY", "FILE"};
    static const char *ct[] = {"UTF8", "MAP", "MAP_KEY_VALUE", "LIST", "ENUM", "DECIMAL", "DATE", "TIME_MILLIS",
                               "TIME_MICROS", "TIMESTAMP_MILLIS", "TIMESTAMP_MICROS", "UINT_8", "UINT_16", "UINT_32",
                               "UINT_64", "INT_8", "INT_16", "INT_32", "INT_64", "JSON", "BSON", "INTERVAL"};
    if (e->logical > 0 && e->logical < (int)PI_ARRAY_LEN(lt) && lt[e->logical]) return lt[e->logical];
    if (e->converted >= 0 && e->converted < (int)PI_ARRAY_LEN(ct)) return ct[e->converted];
    return NULL;
}

static void describe_json(struct pi_buf *b, const struct pi_pq_file *f) {
    pi_buf_str(b, "{\"file\":");
    pi_json_buf_str(b, f->name);
    pi_buf_printf(b, ",\"size\":%llu,\"version\":%d,\"num_rows\":%lld,\"footer_bytes\":%llu,\"created_by\":",
            (unsigned long long)f->file_size, (int)f->version, (long long)f->num_rows,
            (unsigned long long)f->meta_len);
    pi_json_buf_str(b, f->created_by);
    pi_buf_str(b, ",\"columns\":[");
    for (size_t i = 0; i < f->nleaves; i++) {
        const struct pi_pq_leaf *L = &f->leaves[i];
        const struct pi_pq_schema *e = &f->schema[L->schema];
        pi_buf_str(b, i ? ",{\"path\":" : "{\"path\":");
        pi_json_buf_str(b, L->path);
        pi_buf_str(b, ",\"field\":");
        pi_json_buf_str(b, L->field);
        pi_buf_printf(b, ",\"type\":\"%s\"", pi_pq_type_name(L->type));
        if (L->type == PI_PQ_FIXED) pi_buf_printf(b, ",\"type_length\":%d", (int)L->type_length);
        pi_buf_printf(b, ",\"repetition\":\"%s\",\"kind\":\"%s\",\"max_def\":%d,\"max_rep\":%d,\"logical\":", rep_name(e->rep),
                L->kind == PI_PQ_LIST ? "list" : "scalar", L->max_def, L->max_rep);
        pi_json_buf_str(b, logical_name(e));
        pi_buf_str(b, ",\"unsupported\":");
        pi_json_buf_str(b, L->unsupported);
        pi_buf_str(b, "}");
    }
    pi_buf_str(b, "],\"row_groups\":[");
    for (size_t g = 0; g < f->ngroups; g++) {
        const struct pi_pq_group *G = &f->groups[g];
        pi_buf_printf(b, "%s{\"num_rows\":%lld,\"total_byte_size\":%lld,\"chunks\":[", g ? "," : "", (long long)G->num_rows,
                (long long)G->total_byte_size);
        for (size_t c = 0; c < f->nleaves; c++) {
            const struct pi_pq_chunk *C = &G->chunks[c];
            pi_buf_printf(b, "%s{\"column\":%zu,\"codec\":\"%s\",\"encodings\":[", c ? "," : "", c, pi_pq_codec_name(C->codec));
            for (unsigned k = 0; k < C->nencodings; k++)
                pi_buf_printf(b, "%s\"%s\"", k ? "," : "", pi_pq_encoding_name(C->encodings[k]));
            pi_buf_printf(b, "],\"num_values\":%lld,\"offset\":%llu,\"compressed\":%llu,\"uncompressed\":%lld", (long long)C->num_values,
                    (unsigned long long)C->off, (unsigned long long)C->len, (long long)C->total_uncompressed);
            pi_buf_printf(b, ",\"dictionary\":%s", C->dictionary_page_offset > 0 ? "true" : "false");
            if (C->offset_index_offset >= 0)
                pi_buf_printf(b, ",\"offset_index\":[%lld,%d]", (long long)C->offset_index_offset, (int)C->offset_index_length);
            if (C->column_index_offset >= 0)
                pi_buf_printf(b, ",\"column_index\":[%lld,%d]", (long long)C->column_index_offset, (int)C->column_index_length);
            pi_buf_str(b, "}");
        }
        pi_buf_str(b, "]}");
    }
    pi_buf_str(b, "],\"key_value\":{");
    for (size_t i = 0; i < f->nkv; i++) {
        if (i) pi_buf_str(b, ",");
        pi_json_buf_str(b, f->kv[i].key);
        pi_buf_str(b, ":");
        pi_json_buf_str(b, f->kv[i].val);
    }
    pi_buf_str(b, "}}\n");
}

static void describe_text(struct pi_buf *b, const struct pi_pq_file *f) {
    pi_buf_printf(b, "file:        %s\nformat:      parquet (version %d), %llu bytes, footer %llu bytes\n", f->name,
            (int)f->version, (unsigned long long)f->file_size, (unsigned long long)f->meta_len);
    if (f->created_by) pi_buf_printf(b, "created by:  %.200s\n", f->created_by);
    pi_buf_printf(b, "rows:        %lld in %zu row groups\ncolumns:     %zu\n\n", (long long)f->num_rows, f->ngroups,
            f->nleaves);
    pi_buf_printf(b, "%-32s %-24s %-9s %-6s %s\n", "column", "type", "rep", "kind", "annotation");
    for (size_t i = 0; i < f->nleaves; i++) {
        const struct pi_pq_leaf *L = &f->leaves[i];
        const struct pi_pq_schema *e = &f->schema[L->schema];
        const char *lg = logical_name(e);
        char ty[40];
        if (L->type == PI_PQ_FIXED)
            snprintf(ty, sizeof ty, "FIXED_LEN_BYTE_ARRAY(%d)", (int)L->type_length);
        else
            snprintf(ty, sizeof ty, "%s", pi_pq_type_name(L->type));
        pi_buf_printf(b, "%-32.200s %-24s %-9s %-6s %s%s%s\n", L->path, ty, rep_name(e->rep),
                L->kind == PI_PQ_LIST ? "list" : "scalar", lg ? lg : "", L->unsupported ? "  unsupported: " : "",
                L->unsupported ? L->unsupported : "");
    }
    /* per column, over all row groups: codecs, encodings, sizes */
    pi_buf_str(b, "\n");
    pi_buf_printf(b, "%-32s %-14s %14s %14s  %s\n", "column chunks", "codec", "compressed", "uncompressed", "encodings");
    for (size_t c = 0; c < f->nleaves; c++) {
        uint64_t comp = 0, unc = 0;
        unsigned codecs = 0, encs = 0;
        int oi = 0;
        for (size_t g = 0; g < f->ngroups; g++) {
            const struct pi_pq_chunk *C = &f->groups[g].chunks[c];
            comp += C->len;
            unc += (uint64_t)C->total_uncompressed;
            if (C->codec >= 0 && C->codec < 32) codecs |= 1u << C->codec;
            for (unsigned k = 0; k < C->nencodings; k++)
                if (C->encodings[k] < 32) encs |= 1u << C->encodings[k];
            oi |= C->offset_index_offset >= 0;
        }
        char cs[64] = "", es[200] = "";
        size_t n = 0;
        for (int k = 0; k < 8; k++)
            if (codecs >> k & 1) n += (size_t)snprintf(cs + n, sizeof cs - n, "%s%s", n ? "," : "", pi_pq_codec_name(k));
        n = 0;
        for (int k = 0; k < 11 && n < sizeof es; k++)
            if (encs >> k & 1) n += (size_t)snprintf(es + n, sizeof es - n, "%s%s", n ? "," : "", pi_pq_encoding_name(k));
        pi_buf_printf(b, "%-32.200s %-14s %14llu %14llu  %s%s\n", f->leaves[c].path, cs, (unsigned long long)comp,
                (unsigned long long)unc, es, oi ? " (page index)" : "");
    }
    if (f->ngroups) {
        pi_buf_str(b, "\nrow groups:\n");
        size_t shown = f->ngroups <= 20 ? f->ngroups : 10;
        for (size_t g = 0; g < shown; g++) {
            uint64_t comp = 0;
            for (size_t c = 0; c < f->nleaves; c++) comp += f->groups[g].chunks[c].len;
            pi_buf_printf(b, "  %-6zu %10lld rows %14llu bytes\n", g, (long long)f->groups[g].num_rows, (unsigned long long)comp);
        }
        if (shown < f->ngroups) pi_buf_printf(b, "  ... %zu more (--json lists all)\n", f->ngroups - shown);
    }
    if (f->nkv) {
        pi_buf_str(b, "\nkey-value metadata:\n");
        for (size_t i = 0; i < f->nkv; i++) {
            size_t vl = f->kv[i].val ? strlen(f->kv[i].val) : 0;
            pi_buf_printf(b, "  %.100s: %zu bytes\n", f->kv[i].key, vl);
        }
    }
}

PAGEIN_API int pagein_parquet_describe(const char *uri, unsigned flags, char **out) {
    if (!uri || !out) return pi_err(PAGEIN_E_INVALID, "pagein_parquet_describe: NULL argument");
    struct pi_source *src = NULL;
    FORWARD_IF(pi_source_open(&src, uri, 0));
    uint64_t size = src->size, tl = size < TAIL ? size : TAIL, need = 0;
    uint8_t *tail = pi_malloc(tl ? (size_t)tl : 1);
    struct pi_pq_file *f = NULL;
    int rc = tail ? pi_source_read(src, tail, tl, size - tl) : pi_err(-ENOMEM, "out of memory");
    if (rc >= 0) rc = pi_pq_tail_need(tail, (size_t)tl, size, uri, &need);
    if (rc >= 0 && need > tl) {
        pi_free(tail);
        tl = need;
        tail = pi_malloc((size_t)tl);
        rc = tail ? pi_source_read(src, tail, tl, size - tl) : pi_err(-ENOMEM, "out of memory");
    }
    if (rc >= 0) rc = pi_pq_open(&f, tail, (size_t)tl, size, uri);
    pi_free(tail);
    pi_source_close(src);
    if (rc < 0) return rc;
    struct pi_buf b = {0};
    if (flags & PAGEIN_PARQUET_JSON)
        describe_json(&b, f);
    else
        describe_text(&b, f);
    pi_pq_close(f);
    return pi_buf_hand_out(&b, out); /* the caller frees it with free() */
}
