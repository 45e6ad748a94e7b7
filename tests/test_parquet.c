/* test_parquet.c - the Parquet reader (src/data/parquet*.c, thrift.c).
 * White-box: includes src/data/parquet.h and src/format/format.h (JSON).
 *
 * parquet_writer_files decodes every value of files written by npm
 * parquet-wasm (the Rust parquet crate) from tables built with npm
 * apache-arrow (tests/data/parquet/gen.mjs: every codec, data page v1/v2,
 * dictionary on/off, the DELTA_* / BYTE_STREAM_SPLIT / RLE encodings, small
 * row groups and pages) and compares them with the values gen.mjs wrote as
 * JSON (committed in tests/data/parquet/fixtures/, tests/data/regen.sh
 * writes them again). The other tests build pages and footers by hand for what that
 * writer cannot produce (INT96, the legacy two-level lists, BIT_PACKED
 * levels, LZO) and for malformed input. */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

#include "../src/core/mem.h"
#include "../src/data/data.h"
#include "../src/data/dsformat.h"
#include "../src/data/parquet.h"
#include "../src/data/thrift.h"
#include "../src/format/format.h"

/* ---- a growable string ---- */
struct sb {
    char *p;
    size_t n, cap;
};
static void sb_put(struct sb *s, const char *t, size_t n) {
    if (s->n + n + 1 > s->cap) {
        s->cap = (s->n + n + 1) * 2;
        s->p = realloc(s->p, s->cap);
    }
    memcpy(s->p + s->n, t, n);
    s->n += n;
    s->p[s->n] = 0;
}
static void sb_str(struct sb *s, const char *t) { sb_put(s, t, strlen(t)); }

/* Canonical text of element i of a column (gen.mjs's canon()). */
static void put_value(struct sb *s, const struct pi_pq_column *c, uint64_t i) {
    char t[64];
    if (!pi_pq_elem_ok(c, i)) {
        sb_str(s, "null");
        return;
    }
    sb_str(s, "\"");
    const uint8_t *v = c->width ? c->values + i * c->width : NULL;
    switch (c->type) {
    case PI_PQ_BOOLEAN: sb_str(s, v[0] ? "true" : "false"); break;
    case PI_PQ_INT32: {
        int32_t x;
        memcpy(&x, v, 4);
        snprintf(t, sizeof t, "%d", x);
        sb_str(s, t);
        break;
    }
    case PI_PQ_INT64: {
        int64_t x;
        memcpy(&x, v, 8);
        snprintf(t, sizeof t, "%lld", (long long)x);
        sb_str(s, t);
        break;
    }
    case PI_PQ_FLOAT: {
        uint32_t x;
        memcpy(&x, v, 4);
        snprintf(t, sizeof t, "0x%08x", x);
        sb_str(s, t);
        break;
    }
    case PI_PQ_DOUBLE: {
        uint64_t x;
        memcpy(&x, v, 8);
        snprintf(t, sizeof t, "0x%016llx", (unsigned long long)x);
        sb_str(s, t);
        break;
    }
    default: {
        const uint8_t *b = v;
        uint64_t n = c->width;
        if (!c->width) {
            b = c->bytes + c->voff[i];
            n = c->voff[i + 1] - c->voff[i];
        }
        for (uint64_t k = 0; k < n; k++) {
            snprintf(t, sizeof t, "%02x", b[k]);
            sb_put(s, t, 2);
        }
    }
    }
    sb_str(s, "\"");
}

/* Appends the rows of c as gen.mjs's JSON (without the brackets). */
/* Row r of a NESTED column of a struct member (no lists): its value where
 * its level is the deepest, else null. */
static void put_nested_row(struct sb *s, struct pi_pq_column *c, uint64_t r, int max_def) {
    /* a nested column holds only non-null leaf values: no validity bytes */
    CHECK(c->all_valid);
    if (c->ldef[c->rowslot[r]] == max_def && c->rowval[r] < c->nelems) {
        put_value(s, c, c->rowval[r]);
    } else {
        sb_str(s, "null");
    }
}

static void put_rows(struct sb *s, struct pi_pq_column *c, int first, int max_def) {
    for (uint64_t r = 0; r < c->nrows; r++) {
        if (!first || r) sb_str(s, ",");
        if (c->kind == PI_PQ_NESTED) {
            put_nested_row(s, c, r, max_def);
            continue;
        }
        uint64_t b, e;
        int ok = pi_pq_row(c, r, &b, &e);
        if (c->kind == PI_PQ_SCALAR) {
            put_value(s, c, r);
            continue;
        }
        if (!ok) {
            sb_str(s, "null");
            continue;
        }
        sb_str(s, "[");
        for (uint64_t i = b; i < e; i++) {
            if (i > b) sb_str(s, ",");
            put_value(s, c, i);
        }
        sb_str(s, "]");
    }
}

/* The JSON text of expected.json's column `name` (a span into buf). */
static int expected_span(const char *buf, size_t len, const char *name, const char **sp, size_t *sl) {
    struct pi_json j;
    pi_json_init(&j, buf, len, 0);
    const char *k;
    size_t kl;
    int rc = pi_json_enter(&j, PI_JSON_OBJECT), found = 0;
    while (rc >= 0 && (rc = pi_json_next(&j, &k, &kl)) > 0) {
        if (kl == 7 && !memcmp(k, "columns", 7)) {
            rc = pi_json_enter(&j, PI_JSON_OBJECT);
            while (rc >= 0 && (rc = pi_json_next(&j, &k, &kl)) > 0) {
                pi_json_peek(&j);
                size_t at = pi_json_offset(&j);
                rc = pi_json_skip(&j);
                if (kl == strlen(name) && !memcmp(k, name, kl)) {
                    *sp = buf + at;
                    *sl = pi_json_offset(&j) - at;
                    found = 1;
                }
            }
        } else {
            rc = pi_json_skip(&j);
        }
    }
    pi_json_free(&j);
    return rc < 0 ? rc : found ? 0 : -1;
}

/* Opens a whole file's bytes as a reader would: a small tail first, then
 * the tail the footer needs. */
static int open_bytes(struct pi_pq_file **f, const uint8_t *buf, size_t len, const char *name) {
    size_t t = len < 512 ? len : 512;
    uint64_t need;
    int rc = pi_pq_tail_need(buf + len - t, t, len, name, &need);
    if (rc < 0) return rc;
    if (need > t) {
        t = (size_t)need;
        rc = pi_pq_tail_need(buf + len - t, t, len, name, &need);
        if (rc < 0) return rc;
    }
    return pi_pq_open(f, buf + len - t, t, len, name);
}

/* The committed fixtures (tests/data/parquet/fixtures/, written again by
 * tests/data/regen.sh); NULL, said, when they are missing: a failure. */
static const char *fixtures(void) {
    static char dir[512];
    const char *env = getenv("PAGEIN_PQ_FIXTURES");
    snprintf(dir, sizeof dir, "%s", env && *env ? env : "tests/data/parquet/fixtures");
    char p[600];
    snprintf(p, sizeof p, "%s/files.txt", dir);
    if (access(p, R_OK) == 0) return dir;
    printf("    %s: the committed Parquet fixtures are missing (tests/data/regen.sh)\n", p);
    return NULL;
}

/* Decodes every column of every row group of a file and compares it with
 * expected.json; 0 when all match. Every chunk of the file is decoded into
 * one reused column with one reused scratch (as the dataset row does),
 * whatever its type and kind: what a previous chunk left must not show. */
static int check_file(const char *dir, const char *name, const char *exp, size_t explen, int *groups_out,
                      int *oindex_out) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.parquet", dir, name);
    size_t len;
    uint8_t *buf = pt_read_file(path, &len);
    if (!buf) {
        printf("    %s: cannot read\n", path);
        return -1;
    }
    struct pi_pq_file *f = NULL;
    int rc = open_bytes(&f, buf, len, name), bad = 0;
    if (rc < 0) {
        printf("    %s: open: %s\n", name, pagein_last_error_detail());
        free(buf);
        return -1;
    }
    *groups_out = (int)f->ngroups;
    *oindex_out = f->ngroups && f->groups[0].chunks[0].offset_index_offset > 0;
    if (f->num_rows != 1000 || f->nleaves != 14) {
        printf("    %s: %lld rows, %zu leaves\n", name, (long long)f->num_rows, f->nleaves);
        bad = 1;
    }
    struct pi_pq_column c;
    struct pi_pq_scratch scr;
    memset(&c, 0, sizeof c);
    memset(&scr, 0, sizeof scr);
    for (size_t col = 0; col < f->nleaves && !bad; col++) {
        const struct pi_pq_leaf *L = &f->leaves[col];
        struct sb s = {0};
        sb_str(&s, "[");
        uint64_t rows = 0;
        for (size_t g = 0; g < f->ngroups; g++) {
            uint64_t off, cl;
            pi_pq_chunk_range(f, g, col, &off, &cl);
            rc = pi_pq_decode_chunk_into(f, g, col, buf + off, (size_t)cl, &c, &scr);
            if (rc < 0) {
                printf("    %s: decode: %s\n", name, pagein_last_error_detail());
                bad = 1;
                break;
            }
            put_rows(&s, &c, rows == 0, L->max_def);
            rows += c.nrows;
        }
        sb_str(&s, "]");
        const char *sp = NULL;
        size_t sl;
        if (!bad && expected_span(exp, explen, L->field, &sp, &sl) < 0) {
            printf("    %s: column %s not in expected.json\n", name, L->field);
            bad = 1;
        } else if (!bad && (sl != s.n || memcmp(sp, s.p, sl))) {
            size_t k = 0;
            while (k < sl && k < s.n && sp[k] == s.p[k]) k++;
            size_t from = k > 60 ? k - 60 : 0;
            printf("    %s: column %s (%s) differs at byte %zu:\n      want ...%.120s\n      got  ...%.120s\n", name,
                   L->path, pi_pq_type_name(L->type), k, sp + from, s.p + from);
            bad = 1;
        }
        free(s.p);
    }
    pi_pq_column_free(&c);
    pi_pq_scratch_free(&scr);
    pi_pq_close(f);
    free(buf);
    return bad ? -1 : 0;
}

TEST(parquet_writer_files) {
    const char *dir = fixtures();
    if (!dir) return FAIL;
    char p[600];
    snprintf(p, sizeof p, "%s/expected.json", dir);
    size_t explen, flen;
    char *exp = pt_read_file(p, &explen);
    snprintf(p, sizeof p, "%s/files.txt", dir);
    char *files = pt_read_file(p, &flen);
    CHECK(exp && files);
    if (!exp || !files) return FAIL;
    int nfiles = 0, nok = 0;
    char *save = NULL;
    files = realloc(files, flen + 1);
    files[flen] = 0;
    for (char *name = strtok_r(files, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
        int groups = 0, oindex = 0;
        nfiles++;
        if (check_file(dir, name, exp, explen, &groups, &oindex) == 0) nok++;
        else printf("    %s: FAILED\n", name);
        if (!strcmp(name, "small_groups")) {
            CHECK_EQ(groups, 11); /* 1000 rows in groups of 97 */
            CHECK(oindex);        /* page-level statistics: the page index is there */
        }
    }
    CHECK_EQ(nok, nfiles);
    CHECK(nfiles >= 33);
    free(exp);
    free(files);
    return PASS;
}

/* ---- hand-built input: a tiny Thrift compact writer ---------------------- */
struct tw {
    uint8_t b[8192];
    size_t n;
    int16_t last[32];
    int d;
};
static void tw_byte(struct tw *w, uint8_t x) { w->b[w->n++] = x; }
static void tw_bytes(struct tw *w, const void *p, size_t n) {
    memcpy(w->b + w->n, p, n);
    w->n += n;
}
static void tw_varint(struct tw *w, uint64_t v) {
    while (v >= 0x80) {
        tw_byte(w, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    tw_byte(w, (uint8_t)v);
}
static uint64_t zz(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static void tw_field(struct tw *w, int id, int type) {
    int delta = id - w->last[w->d];
    if (delta > 0 && delta <= 15) {
        tw_byte(w, (uint8_t)(delta << 4 | type));
    } else {
        tw_byte(w, (uint8_t)type);
        tw_varint(w, zz(id));
    }
    w->last[w->d] = (int16_t)id;
}
static void tw_i32(struct tw *w, int id, int64_t v) {
    tw_field(w, id, PI_TT_I32);
    tw_varint(w, zz(v));
}
static void tw_i64(struct tw *w, int id, int64_t v) {
    tw_field(w, id, PI_TT_I64);
    tw_varint(w, zz(v));
}
static void tw_str(struct tw *w, int id, const char *s) {
    tw_field(w, id, PI_TT_BINARY);
    tw_varint(w, strlen(s));
    tw_bytes(w, s, strlen(s));
}
static void tw_begin(struct tw *w) { w->last[++w->d] = 0; } /* a struct (after its field header or as an element) */
static void tw_struct(struct tw *w, int id) {
    tw_field(w, id, PI_TT_STRUCT);
    tw_begin(w);
}
static void tw_end(struct tw *w) {
    tw_byte(w, 0);
    w->d--;
}
static void tw_list(struct tw *w, int id, int et, unsigned n) {
    tw_field(w, id, PI_TT_LIST);
    if (n < 15) {
        tw_byte(w, (uint8_t)(n << 4 | et));
    } else {
        tw_byte(w, (uint8_t)(0xf0 | et));
        tw_varint(w, n);
    }
}

/* A v1 data page header (uncompressed) of n values and usize bytes. */
static void tw_page_v1(struct tw *w, int n, int usize, int csize, int enc, int lvl_enc) {
    tw_begin(w);
    tw_i32(w, 1, PI_PQ_DATA_PAGE);
    tw_i32(w, 2, usize);
    tw_i32(w, 3, csize);
    tw_struct(w, 5);
    tw_i32(w, 1, n);
    tw_i32(w, 2, enc);
    tw_i32(w, 3, lvl_enc);
    tw_i32(w, 4, lvl_enc);
    tw_end(w);
    tw_end(w);
}

/* Levels as a v1 section: [4-byte length][one RLE run of 1 per level]. */
static void put_levels(struct tw *w, const uint8_t *lv, int n) {
    uint32_t len = (uint32_t)(2 * n);
    tw_bytes(w, &len, 4);
    for (int i = 0; i < n; i++) {
        tw_byte(w, 2);
        tw_byte(w, lv[i]);
    }
}

struct hcol {
    const char *path1, *path2; /* path_in_schema */
    int type, codec;
    int nvalues;
    struct tw page; /* header + body */
};

static void build_chunk(struct hcol *c, int enc, int nvalues, const uint8_t *rep, const uint8_t *def, const void *vals,
                        size_t vlen, int codec) {
    struct tw body = {0};
    if (rep) put_levels(&body, rep, nvalues);
    if (def) put_levels(&body, def, nvalues);
    tw_bytes(&body, vals, vlen);
    memset(&c->page, 0, sizeof c->page);
    tw_page_v1(&c->page, nvalues, (int)body.n, (int)body.n, enc, PI_PQ_RLE);
    tw_bytes(&c->page, body.b, body.n);
    c->nvalues = nvalues;
    c->codec = codec;
}

/* Writer quirks build_file reproduces (bits): 1 FileMetaData.num_rows 0;
 * 2 data_page_offset 0 and the first page's offset in dictionary_page_offset
 * (as parquet-cpp 17 wrote parquet-testing's column_chunk_key_value_metadata);
 * 4 data_page_offset 0; 8 dictionary_page_offset past the file's data (with 4:
 * the only page offset);
 * 16 FileMetaData.num_rows one more than the row groups hold. */
static int bf_quirk;

/* A file: PAR1, the chunks, the FileMetaData (schema given as a callback),
 * its length, PAR1. */
static size_t build_file(uint8_t *out, struct hcol *cols, int ncols, int64_t rows, void (*schema)(struct tw *)) {
    size_t n = 0;
    memcpy(out, "PAR1", 4);
    n = 4;
    int64_t offs[16];
    for (int i = 0; i < ncols; i++) {
        offs[i] = (int64_t)n;
        memcpy(out + n, cols[i].page.b, cols[i].page.n);
        n += cols[i].page.n;
    }
    struct tw m = {0};
    tw_begin(&m);
    tw_i32(&m, 1, 1);
    schema(&m);
    tw_i64(&m, 3, bf_quirk & 1 ? 0 : bf_quirk & 16 ? rows + 1 : rows);
    tw_list(&m, 4, PI_TT_STRUCT, 1);
    tw_begin(&m); /* RowGroup */
    tw_list(&m, 1, PI_TT_STRUCT, (unsigned)ncols);
    for (int i = 0; i < ncols; i++) {
        tw_begin(&m); /* ColumnChunk */
        tw_i64(&m, 2, offs[i]);
        tw_struct(&m, 3);
        tw_i32(&m, 1, cols[i].type);
        tw_list(&m, 2, PI_TT_I32, 1);
        tw_varint(&m, zz(PI_PQ_PLAIN));
        tw_list(&m, 3, PI_TT_BINARY, cols[i].path2 ? 2 : 1);
        tw_varint(&m, strlen(cols[i].path1));
        tw_bytes(&m, cols[i].path1, strlen(cols[i].path1));
        if (cols[i].path2) {
            tw_varint(&m, strlen(cols[i].path2));
            tw_bytes(&m, cols[i].path2, strlen(cols[i].path2));
        }
        tw_i32(&m, 4, cols[i].codec);
        tw_i64(&m, 5, cols[i].nvalues);
        tw_i64(&m, 6, (int64_t)cols[i].page.n);
        tw_i64(&m, 7, (int64_t)cols[i].page.n);
        tw_i64(&m, 9, bf_quirk & 6 ? 0 : offs[i]);
        if (bf_quirk & 10) tw_i64(&m, 11, bf_quirk & 8 ? 1 << 20 : offs[i]);
        tw_end(&m);
        tw_end(&m);
    }
    tw_i64(&m, 2, 100);
    tw_i64(&m, 3, rows);
    tw_end(&m);
    tw_end(&m);
    memcpy(out + n, m.b, m.n);
    n += m.n;
    uint32_t ml = (uint32_t)m.n;
    memcpy(out + n, &ml, 4);
    memcpy(out + n + 4, "PAR1", 4);
    return n + 8;
}

static void el(struct tw *m, const char *name, int type, int rep, int nchildren, int converted) {
    tw_begin(m);
    if (type >= 0) tw_i32(m, 1, type);
    if (rep >= 0) tw_i32(m, 3, rep);
    tw_str(m, 4, name);
    if (nchildren) tw_i32(m, 5, nchildren);
    if (converted >= 0) tw_i32(m, 6, converted);
    tw_end(m);
}

/* required int96 t; optional group a (LIST) { repeated int32 array; };
 * repeated int32 r; optional group l (LIST) { repeated group array { required int64 x } } */
static void legacy_schema(struct tw *m) {
    tw_list(m, 2, PI_TT_STRUCT, 8);
    el(m, "schema", -1, -1, 4, -1);
    el(m, "t", PI_PQ_INT96, PI_PQ_REQUIRED, 0, -1);
    el(m, "a", -1, PI_PQ_OPTIONAL, 1, PI_PQ_CT_LIST);
    el(m, "array", PI_PQ_INT32, PI_PQ_REPEATED, 0, -1);
    el(m, "r", PI_PQ_INT32, PI_PQ_REPEATED, 0, -1);
    el(m, "l", -1, PI_PQ_OPTIONAL, 1, PI_PQ_CT_LIST);
    el(m, "array", -1, PI_PQ_REPEATED, 1, -1);
    el(m, "x", PI_PQ_INT64, PI_PQ_REQUIRED, 0, -1);
}

static size_t legacy_file(uint8_t *file, int t_codec) {
    static struct hcol cols[4];
    memset(cols, 0, sizeof cols);
    uint8_t t96[36];
    for (int i = 0; i < 36; i++) t96[i] = (uint8_t)(i * 7 + 1);
    cols[0] = (struct hcol){.path1 = "t", .type = PI_PQ_INT96};
    build_chunk(&cols[0], PI_PQ_PLAIN, 3, NULL, NULL, t96, 36, t_codec);
    /* a: [1,2], null, [] */
    const uint8_t arep[] = {0, 1, 0, 0}, adef[] = {2, 2, 0, 1};
    const int32_t av[] = {1, 2};
    cols[1] = (struct hcol){.path1 = "a", .path2 = "array", .type = PI_PQ_INT32};
    build_chunk(&cols[1], PI_PQ_PLAIN, 4, arep, adef, av, sizeof av, 0);
    /* r: [5], [], [6,7] */
    const uint8_t rrep[] = {0, 0, 0, 1}, rdef[] = {1, 0, 1, 1};
    const int32_t rv[] = {5, 6, 7};
    cols[2] = (struct hcol){.path1 = "r", .type = PI_PQ_INT32};
    build_chunk(&cols[2], PI_PQ_PLAIN, 4, rrep, rdef, rv, sizeof rv, 0);
    /* l: [], [9], null */
    const uint8_t lrep[] = {0, 0, 0}, ldef[] = {1, 2, 0};
    const int64_t lv[] = {9};
    cols[3] = (struct hcol){.path1 = "l", .path2 = "array", .type = PI_PQ_INT64};
    build_chunk(&cols[3], PI_PQ_PLAIN, 3, lrep, ldef, lv, sizeof lv, 0);
    /* the "x" level of l's path: path_in_schema is not checked by name */
    return build_file(file, cols, 4, 3, legacy_schema);
}

static int decode_col(struct pi_pq_file *f, const uint8_t *file, size_t col, struct pi_pq_column *c) {
    uint64_t off, len;
    pi_pq_chunk_range(f, 0, col, &off, &len);
    return pi_pq_decode_chunk(f, 0, col, file + off, (size_t)len, c);
}

/* a list row as text: "null", "[]", "[1,2]" */
static const char *list_text(const struct pi_pq_column *c, uint64_t r) {
    static char t[256];
    uint64_t b, e;
    if (!pi_pq_row(c, r, &b, &e)) return "null";
    size_t n = 0;
    n += (size_t)snprintf(t + n, sizeof t - n, "[");
    for (uint64_t i = b; i < e; i++) {
        long long v = 0;
        if (c->width == 4) {
            int32_t x;
            memcpy(&x, c->values + 4 * i, 4);
            v = x;
        } else {
            memcpy(&v, c->values + 8 * i, 8);
        }
        n += (size_t)snprintf(t + n, sizeof t - n, "%s%lld", i > b ? "," : "", v);
    }
    snprintf(t + n, sizeof t - n, "]");
    return t;
}

TEST(parquet_int96_and_legacy_lists) {
    static uint8_t file[16384];
    size_t n = legacy_file(file, PI_PQ_UNCOMPRESSED);
    struct pi_pq_file *f = NULL;
    CHECK_OK(pi_pq_open(&f, file, n, n, "legacy.parquet"));
    if (!f) return FAIL;
    CHECK_EQ(f->nleaves, 4);
    CHECK_STR(f->leaves[1].field, "a");
    CHECK_STR(f->leaves[1].path, "a.array");
    CHECK_EQ(f->leaves[1].kind, PI_PQ_LIST);
    CHECK_EQ(f->leaves[2].kind, PI_PQ_LIST);
    CHECK_STR(f->leaves[3].field, "l");
    /* a repeated group named "array" with one field is the element itself
     * (LogicalTypes.md's backward-compatibility rule): l is a list of
     * structs {x}, assembled from its levels */
    CHECK_EQ(f->leaves[3].kind, PI_PQ_NESTED);
    struct pi_pq_column c;
    CHECK_OK(decode_col(f, file, 0, &c));
    CHECK_EQ(c.width, 12);
    CHECK_EQ(c.nrows, 3);
    CHECK(c.values && c.values[35] == (uint8_t)(35 * 7 + 1) && c.values[12] == 12 * 7 + 1);
    CHECK(c.all_valid); /* a required column: no validity bytes */
    CHECK(pi_pq_elem_ok(&c, 2));
    pi_pq_column_free(&c);
    const char *want[2][3] = {{"[1,2]", "null", "[]"}, {"[5]", "[]", "[6,7]"}};
    for (int k = 0; k < 2; k++) {
        CHECK_OK(decode_col(f, file, (size_t)k + 1, &c));
        CHECK_EQ(c.nrows, 3);
        for (int r = 0; r < 3 && (uint64_t)r < c.nrows; r++) CHECK_STR(list_text(&c, (uint64_t)r), want[k][r]);
        CHECK(!c.all_valid); /* a null list or an empty one: levels below the maximum */
        pi_pq_column_free(&c);
    }
    pi_pq_close(f);
    return PASS;
}

/* Errors name the file, row group, column and page. */
TEST(parquet_errors_name_the_place) {
    static uint8_t file[16384];
    size_t n = legacy_file(file, PI_PQ_LZO);
    struct pi_pq_file *f = NULL;
    CHECK_OK(pi_pq_open(&f, file, n, n, "lzo.parquet"));
    if (!f) return FAIL;
    struct pi_pq_column c;
    int rc = decode_col(f, file, 0, &c);
    CHECK_EQ(rc, PAGEIN_E_UNSUPPORTED);
    const char *d = pagein_last_error_detail();
    CHECK(strstr(d, "lzo.parquet") && strstr(d, "row group 0") && strstr(d, "column t") && strstr(d, "page 0") &&
          strstr(d, "LZO"));
    printf("    (%s)\n", d);
    pi_pq_close(f);

    /* an encoding pagein does not know, in column a's page */
    n = legacy_file(file, PI_PQ_UNCOMPRESSED);
    CHECK_OK(pi_pq_open(&f, file, n, n, "enc.parquet"));
    if (!f) return FAIL;
    uint64_t off, len;
    pi_pq_chunk_range(f, 0, 1, &off, &len);
    /* the DataPageHeader's encoding field: the byte after "2: i32" header 0x15 inside the sub-struct */
    uint8_t *p = file + off;
    int patched = 0;
    for (size_t i = 0; i + 3 < len && !patched; i++)
        if (p[i] == 0x2c && p[i + 1] == 0x15) { /* field 5 struct, field 1 i32 (num_values) */
            /* num_values varint (1 byte), then 0x15 encoding */
            if (p[i + 3] == 0x15) {
                p[i + 4] = (uint8_t)zz(31);
                patched = 1;
            }
        }
    CHECK(patched);
    rc = decode_col(f, file, 1, &c);
    CHECK_EQ(rc, PAGEIN_E_UNSUPPORTED);
    d = pagein_last_error_detail();
    CHECK(strstr(d, "enc.parquet") && strstr(d, "row group 0") && strstr(d, "column a.array") && strstr(d, "page 0"));
    printf("    (%s)\n", d);
    pi_pq_close(f);

    /* BIT_PACKED (deprecated) levels are refused by name */
    struct hcol hc = {.path1 = "x", .type = PI_PQ_INT32};
    const uint8_t def[] = {1};
    const int32_t v[] = {1};
    build_chunk(&hc, PI_PQ_PLAIN, 1, NULL, def, v, 4, 0);
    for (size_t i = 0; i + 1 < hc.page.n; i++)
        if (hc.page.b[i] == 0x15 && hc.page.b[i + 1] == (uint8_t)zz(PI_PQ_RLE)) hc.page.b[i + 1] = (uint8_t)zz(PI_PQ_BIT_PACKED);
    struct pi_pq_leaf L = {.path = (char *)"x", .field = (char *)"x", .type = PI_PQ_INT32, .max_def = 1, .list_def = -1};
    rc = pi_pq_decode_pages(&L, 0, 1, 1, hc.page.b, hc.page.n, "bp.parquet: row group 0, column x", &c);
    CHECK_EQ(rc, PAGEIN_E_UNSUPPORTED);
    CHECK(strstr(pagein_last_error_detail(), "BIT_PACKED") && strstr(pagein_last_error_detail(), "page 0"));
    return PASS;
}

/* Every truncation and every single-byte corruption of a file: an error or
 * a decode, never a crash (under ASan in make test's san run). */
TEST(parquet_malformed_files) {
    static uint8_t file[16384], bad[16384];
    size_t n = legacy_file(file, PI_PQ_UNCOMPRESSED);
    struct pi_pq_file *f = NULL;
    for (size_t k = 0; k < n; k++) {
        /* the tail of a file cut to k bytes */
        int rc = pi_pq_open(&f, file, k, k, "cut.parquet");
        CHECK(rc < 0);
    }
    int opened = 0, decoded = 0;
    for (size_t k = 0; k < n; k++) {
        memcpy(bad, file, n);
        bad[k] ^= 0x5a;
        if (pi_pq_open(&f, bad, n, n, "flip.parquet") < 0) {
            CHECK(strstr(pagein_last_error_detail(), "flip.parquet") != NULL);
            continue;
        }
        opened++;
        for (size_t c = 0; c < f->nleaves; c++) {
            struct pi_pq_column col;
            uint64_t off, len;
            pi_pq_chunk_range(f, 0, c, &off, &len);
            if (pi_pq_decode_chunk(f, 0, c, bad + off, (size_t)len, &col) == 0) {
                decoded++;
                pi_pq_column_free(&col);
            } else {
                const char *d = pagein_last_error_detail();
                CHECK(strstr(d, "flip.parquet") && strstr(d, "row group 0"));
            }
        }
        pi_pq_close(f);
    }
    CHECK(opened > 0);
    /* tail handling: PAR1 missing, a footer longer than the file */
    uint64_t need;
    memcpy(bad, file, n);
    bad[n - 1] = 'X';
    CHECK_EQ(pi_pq_tail_need(bad, n, n, "x", &need), PAGEIN_E_BAD_MAGIC);
    memcpy(bad, file, n);
    bad[n - 5] = 0x7f;
    CHECK_EQ(pi_pq_tail_need(bad, n, n, "x", &need), PI_PQ_EFORMAT);
    CHECK_OK(pi_pq_tail_need(file + n - 16, 16, n, "x", &need));
    CHECK(need > 16 && need < n);
    CHECK_EQ(pi_pq_open(&f, file + n - 16, 16, n, "x"), PAGEIN_E_TRUNCATED);
    return PASS;
}

/* Footers from writer quirks the spec leaves room for are read (a file-level
 * num_rows left 0; a chunk whose data_page_offset is 0 but whose
 * dictionary_page_offset holds its first page); the same footers past those
 * limits are still refused. */
TEST(parquet_footer_writer_quirks) {
    static uint8_t file[16384];
    struct pi_pq_file *f = NULL;
    const int ok[] = {1, 2, 3};
    for (size_t q = 0; q < sizeof ok / sizeof *ok; q++) {
        bf_quirk = ok[q];
        size_t n = legacy_file(file, PI_PQ_UNCOMPRESSED);
        bf_quirk = 0;
        f = NULL;
        int rc = pi_pq_open(&f, file, n, n, "quirk.parquet");
        CHECK_OK(rc);
        if (rc < 0) continue;
        CHECK_EQ(f->num_rows, 3);
        CHECK_EQ(f->groups[0].num_rows, 3);
        uint64_t off, len;
        CHECK_OK(pi_pq_chunk_range(f, 0, 0, &off, &len));
        CHECK_EQ(off, 4);
        for (size_t c = 0; c < f->nleaves; c++) {
            struct pi_pq_column col;
            CHECK_OK(decode_col(f, file, c, &col));
            CHECK_EQ(col.nrows, 3);
            if (c == 2) CHECK(!strcmp(list_text(&col, 2), "[6,7]"));
            pi_pq_column_free(&col);
        }
        pi_pq_close(f);
    }
    const int bad[] = {4, 12, 16};
    const char *why[] = {"outside the data of the file", "outside the data of the file", "FileMetaData.num_rows says 4"};
    for (size_t q = 0; q < sizeof bad / sizeof *bad; q++) {
        bf_quirk = bad[q];
        size_t n = legacy_file(file, PI_PQ_UNCOMPRESSED);
        bf_quirk = 0;
        CHECK_EQ(pi_pq_open(&f, file, n, n, "quirk.parquet"), PI_PQ_EFORMAT);
        CHECK(strstr(pagein_last_error_detail(), why[q]) != NULL);
    }
    return PASS;
}

/* DELTA_BINARY_PACKED with wrapping INT64 deltas and several blocks (a
 * hand-made encoder: block 128, 4 miniblocks of 32), and the Thrift limits. */
static size_t delta_encode(uint8_t *out, const int64_t *v, size_t n, int is32) {
    struct tw w = {0};
    tw_varint(&w, 128);
    tw_varint(&w, 4);
    tw_varint(&w, n);
    tw_varint(&w, zz(v[0]));
    for (size_t i = 1; i < n; i += 128) {
        size_t m = PI_MIN((size_t)128, n - i);
        uint64_t d[128] = {0}, mind = UINT64_MAX;
        int64_t mn = INT64_MAX;
        for (size_t k = 0; k < m; k++) {
            d[k] = (uint64_t)v[i + k] - (uint64_t)v[i + k - 1];
            if (is32) d[k] = (uint64_t)(int64_t)(int32_t)(uint32_t)d[k]; /* writers wrap in 32 bits */
            if ((int64_t)d[k] < mn) mn = (int64_t)d[k];
        }
        mind = (uint64_t)mn;
        tw_varint(&w, zz(mn));
        int bws[4] = {0};
        for (size_t k = 0; k < 128; k++) {
            uint64_t x = k < m ? d[k] - mind : 0;
            int b = 0;
            while (b < 64 && (x >> b)) b++;
            if (b > bws[k / 32]) bws[k / 32] = b;
        }
        for (int k = 0; k < 4; k++) tw_byte(&w, (uint8_t)bws[k]);
        for (int mb = 0; mb < 4 && (size_t)mb * 32 < m; mb++) {
            uint8_t buf[32 * 8 + 8] = {0};
            for (size_t k = 0; k < 32; k++) {
                size_t idx = (size_t)mb * 32 + k;
                uint64_t x = idx < m ? d[idx] - mind : 0;
                for (int b = 0; b < bws[mb]; b++)
                    if (x >> b & 1) {
                        size_t bit = k * (size_t)bws[mb] + (size_t)b;
                        buf[bit / 8] |= (uint8_t)(1u << (bit % 8));
                    }
            }
            tw_bytes(&w, buf, (size_t)bws[mb] * 4);
        }
    }
    memcpy(out, w.b, w.n);
    return w.n;
}

TEST(parquet_delta_and_thrift_limits) {
    int64_t v[300];
    uint64_t s = 7;
    for (int i = 0; i < 300; i++) v[i] = (int64_t)pt_rand(&s);
    v[10] = INT64_MIN;
    v[11] = INT64_MAX;
    v[12] = INT64_MIN;
    static uint8_t enc[8192];
    size_t n = delta_encode(enc, v, 300, 0);
    int64_t out[300];
    size_t used = 0;
    CHECK_OK(pi_pq_delta_decode(enc, n, 0, out, 300, &used));
    CHECK_EQ(used, n);
    CHECK(!memcmp(out, v, sizeof v));
    /* every cut is an error, never a read past the end (a cut in the last
     * miniblock's padding still decodes, correctly) */
    for (size_t k = 0; k < n; k++) {
        memset(out, 0, sizeof out);
        if (pi_pq_delta_decode(enc, k, 0, out, 300, &used) == 0) CHECK(!memcmp(out, v, sizeof v) && k > n - 32 * 8);
    }
    /* INT32 wraps in 32 bits */
    int64_t w32[3] = {INT32_MAX, INT32_MIN, INT32_MAX};
    n = delta_encode(enc, w32, 3, 1);
    int32_t o32[3];
    CHECK_OK(pi_pq_delta_decode(enc, n, 1, o32, 3, &used));
    CHECK(o32[0] == INT32_MAX && o32[1] == INT32_MIN && o32[2] == INT32_MAX);

    /* Thrift: nesting past the limit, a list longer than its bytes */
    static uint8_t deep[200];
    for (int i = 0; i < 199; i++) deep[i] = 0x1c; /* field 1, struct */
    struct pi_thrift t;
    pi_thrift_init(&t, deep, sizeof deep);
    CHECK_EQ(pi_thrift_skip(&t, PI_TT_STRUCT), PAGEIN_E_LIMIT);
    const uint8_t biglist[] = {0x19, 0xf5, 0xff, 0xff, 0xff, 0x0f, 0x02};
    pi_thrift_init(&t, biglist, sizeof biglist);
    CHECK_EQ(pi_thrift_skip(&t, PI_TT_STRUCT), PI_THRIFT_EFORMAT);
    return PASS;
}

/* ---- the dataset-format row (ds_parquet.c) through the one pipeline ---- */

/* canonical text of a pipeline field (gen.mjs's canon()), kind of column known by name */
static void put_field(struct sb *s, const pagein_field *f, const char *col) {
    char t[64];
    if (f->null) {
        sb_str(s, "null");
        return;
    }
    const uint8_t *p = f->data;
    if (f->ndim == 1) {
        sb_str(s, "[");
        for (uint64_t i = 0; i < f->shape[0]; i++) {
            int32_t x;
            memcpy(&x, p + 4 * i, 4);
            snprintf(t, sizeof t, "%s\"%d\"", i ? "," : "", x);
            sb_str(s, t);
        }
        sb_str(s, "]");
        return;
    }
    sb_str(s, "\"");
    if (f->type == PAGEIN_FIELD_UTF8 || f->type == PAGEIN_FIELD_BINARY) {
        for (uint64_t k = 0; k < f->nbytes; k++) {
            snprintf(t, sizeof t, "%02x", p[k]);
            sb_put(s, t, 2);
        }
    } else if (f->type == PAGEIN_FIELD_BOOL) {
        sb_str(s, p[0] ? "true" : "false");
    } else if (f->type == PAGEIN_FIELD_FLOAT && f->width == 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        snprintf(t, sizeof t, "0x%016llx", (unsigned long long)x);
        sb_str(s, t);
    } else if (f->width == 8) {
        int64_t x;
        memcpy(&x, p, 8);
        snprintf(t, sizeof t, "%lld", (long long)x);
        sb_str(s, t);
    } else {
        int32_t x;
        memcpy(&x, p, 4);
        snprintf(t, sizeof t, "%d", x);
        sb_str(s, t);
    }
    sb_str(s, "\"");
    (void)col;
}

/* The JSON text of expected.json's column `name`, row `row`. */
static int expected_cell(const char *buf, size_t len, const char *name, uint64_t row, struct sb *out) {
    const char *sp;
    size_t sl;
    if (expected_span(buf, len, name, &sp, &sl) < 0) return -1;
    struct pi_json j;
    pi_json_init(&j, sp, sl, 0);
    int rc = pi_json_enter(&j, PI_JSON_ARRAY);
    for (uint64_t r = 0; rc >= 0 && (rc = pi_json_next(&j, NULL, NULL)) > 0; r++) {
        pi_json_peek(&j);
        size_t at = pi_json_offset(&j);
        rc = pi_json_skip(&j);
        if (r == row) {
            sb_put(out, sp + at, pi_json_offset(&j) - at);
            break;
        }
    }
    pi_json_free(&j);
    return rc < 0 ? rc : 0;
}

/* A field with its nested values: a LIST as an array of its elements. */
static void put_node(struct sb *s, const pagein_item *it, const pagein_field *f) {
    if (f->type == PAGEIN_FIELD_LIST && !f->null) {
        sb_str(s, "[");
        for (uint32_t k = 0; k < f->nchild && f->child + k < it->nnodes; k++) {
            if (k) sb_str(s, ",");
            put_node(s, it, &it->fields[f->child + k]);
        }
        sb_str(s, "]");
        return;
    }
    put_field(s, f, f->name);
}

/* One cell against expected.json: 1 when it differs (printed). */
static uint64_t check_cell(const char *exp, size_t explen, const pagein_item *it, const char *name, struct sb *got) {
    struct sb want = {0};
    expected_cell(exp, explen, name, it->id, &want);
    uint64_t bad = !want.p || !got->p || strcmp(want.p, got->p);
    if (bad)
        printf("    row %llu field %s: want %s got %s\n", (unsigned long long)it->id, name, want.p ? want.p : "?",
               got->p ? got->p : "?");
    free(want.p);
    free(got->p);
    return bad;
}

/* The fields of an item against expected.json: the number that differ
 * (each printed). A struct's members are gen.mjs's columns "st.a". */
static uint64_t check_item(const char *exp, size_t explen, const pagein_item *it) {
    uint64_t bad = 0;
    for (size_t k = 0; k < it->nfields; k++) {
        const pagein_field *f = &it->fields[k];
        if (f->type == PAGEIN_FIELD_STRUCT) {
            static const char *const members[] = {"a", "b"};
            for (size_t m = 0; m < 2; m++) {
                struct sb got = {0};
                char nm[64];
                snprintf(nm, sizeof nm, "%s.%s", f->name, members[m]);
                if (f->null) sb_str(&got, "null");
                for (uint32_t c = 0; !f->null && c < f->nchild; c++)
                    if (!strcmp(it->fields[f->child + c].name, members[m])) put_node(&got, it, &it->fields[f->child + c]);
                bad += check_cell(exp, explen, it, nm, &got);
            }
            continue;
        }
        struct sb got = {0};
        put_node(&got, it, f);
        bad += check_cell(exp, explen, it, f->name, &got);
    }
    return bad;
}

TEST(parquet_dataset_pipeline) {
    const char *dir = fixtures();
    if (!dir) return FAIL;
    char path[600], p2[600];
    snprintf(path, sizeof path, "%s/small_groups.parquet", dir);
    snprintf(p2, sizeof p2, "%s/expected.json", dir);
    size_t explen;
    char *exp = pt_read_file(p2, &explen);
    CHECK(exp != NULL);
    if (!exp) return FAIL;
    const char *cols[] = {"i32", "s", "tok", "st", "b", "f64", "fx", "ts", "bin"};
    pagein_dataset_opts o = {.size = sizeof o, .columns = cols, .ncolumns = 9};
    pagein_dataset *d = NULL;
    CHECK_OK(pagein_dataset_open(&d, path, &o));
    if (!d) {
        free(exp);
        return FAIL;
    }
    CHECK_STR(pagein_dataset_format(d, 0), "parquet");
    CHECK_EQ(pagein_dataset_count(d), 1000);
    CHECK_EQ(pagein_dataset_group_count(d), 11);
    /* in block order over 4 ranks x 2 workers: every row exactly once, the
     * selected fields of every 8th row with the writer's values */
    uint8_t *seen = calloc(1000, 1);
    uint64_t total = 0, bad = 0;
    for (uint32_t r = 0; r < 4; r++)
        for (uint32_t w = 0; w < 2; w++) {
            pagein_pipe_opts po = PAGEIN_PIPE_OPTS_INIT;
            po.order = PAGEIN_ORDER_BLOCK, po.seed = 5, po.window = 3;
            po.rank = r, po.world_size = 4, po.worker = w, po.num_workers = 2, po.batch = 8;
            pagein_pipe *p = NULL;
            CHECK_OK(pagein_pipe_open(&p, d, &po));
            if (!p) continue;
            pagein_item it;
            int rc;
            while ((rc = pagein_pipe_next(p, &it)) == 1) {
                total++;
                if (it.id >= 1000 || seen[it.id]++) {
                    bad++;
                    continue;
                }
                CHECK_EQ(it.nfields, 9); /* st is one struct value */
                /* the values of every 8th row through the pipeline (every
                 * value of this file is checked by parquet_writer_files;
                 * expected_cell walks the whole JSON, so every row here
                 * took 52 s, and minutes under ASan and valgrind) */
                if (it.id % 8) continue;
                if (bad < 5) bad += check_item(exp, explen, &it);
            }
            CHECK_OK(rc < 0 ? rc : 0);
            pagein_pipe_close(p);
        }
    CHECK_EQ(total, 1000);
    CHECK_EQ(bad, 0);
    free(seen);
    pagein_dataset_close(d);

    /* lists of strings and lists with null elements are read as LIST
     * values; an unknown column is refused by name */
    const char *c_nope[] = {"nope"}, *c_lists[] = {"ids", "tags"};
    o.columns = c_nope, o.ncolumns = 1;
    CHECK_EQ(pagein_dataset_open(&d, path, &o), PAGEIN_E_NOT_FOUND);
    CHECK(strstr(pagein_last_error_detail(), "nope") != NULL);
    o.columns = c_lists, o.ncolumns = 2;
    d = NULL;
    CHECK_OK(pagein_dataset_open(&d, path, &o));
    if (d) {
        pagein_pipe *p = NULL;
        pagein_pipe_opts po = PAGEIN_PIPE_OPTS_INIT;
        CHECK_OK(pagein_pipe_open(&p, d, &po));
        pagein_item it;
        int rc = 0;
        uint64_t rows = 0, lists = 0;
        bad = 0;
        while (p && (rc = pagein_pipe_next(p, &it)) == 1) {
            rows++;
            CHECK_EQ(it.nfields, 2);
            for (size_t k = 0; k < it.nfields; k++) lists += it.fields[k].type == PAGEIN_FIELD_LIST;
            if (it.id % 4 == 0 && bad < 5) bad += check_item(exp, explen, &it);
        }
        CHECK_OK(rc < 0 ? rc : 0);
        CHECK_EQ(rows, 1000);
        CHECK(lists > 1000); /* every tags row, and the ids rows holding a null */
        CHECK_EQ(bad, 0);
        pagein_pipe_close(p);
        pagein_dataset_close(d);
    }
    free(exp);
    return PASS;
}

/* Single pages through the OffsetIndex: every page, and runs of pages, of
 * every column of a file with many small pages decode to exactly the rows
 * the whole chunk gives for them. */
TEST(parquet_offset_index_pages) {
    const char *dir = fixtures();
    if (!dir) return FAIL;
    char path[600];
    snprintf(path, sizeof path, "%s/small_pages.parquet", dir);
    size_t len;
    uint8_t *buf = pt_read_file(path, &len);
    struct pi_pq_file *f = NULL;
    CHECK(buf != NULL);
    if (!buf) return FAIL;
    CHECK_OK(open_bytes(&f, buf, len, "small_pages.parquet"));
    if (!f) {
        free(buf);
        return FAIL;
    }
    size_t runs = 0, maxpages = 0;
    for (size_t col = 0; col < f->nleaves; col++) {
        const struct pi_pq_chunk *C = &f->groups[0].chunks[col];
        CHECK(C->offset_index_offset > 0);
        if (C->offset_index_offset <= 0) continue;
        struct pi_pq_page_loc *loc = NULL;
        size_t n = 0;
        CHECK_OK(pi_pq_offset_index(f, 0, col, buf + C->offset_index_offset, (size_t)C->offset_index_length, &loc, &n));
        if (!loc) continue;
        if (n > maxpages) maxpages = n;
        struct pi_pq_column whole;
        CHECK_OK(pi_pq_decode_chunk(f, 0, col, buf + C->off, (size_t)C->len, &whole));
        int64_t nrows = f->groups[0].num_rows;
        /* single pages, then runs of 3 */
        for (size_t step = 1; step <= 3; step += 2)
            for (size_t a = 0; a < n; a += step) {
                size_t b = PI_MIN(a + step, n);
                int64_t r0 = loc[a].first_row, r1 = b < n ? loc[b].first_row : nrows;
                struct pi_pq_column part;
                int rc = pi_pq_decode_page_run(f, 0, col, buf + C->off, (size_t)((uint64_t)loc[0].offset - C->off),
                                               buf + loc[a].offset,
                                               (size_t)(loc[b - 1].offset + loc[b - 1].size - loc[a].offset), r0, r1 - r0,
                                               &part);
                CHECK_OK(rc);
                if (rc) break;
                runs++;
                /* the same rows as the whole chunk's, as text */
                struct sb x = {0}, y = {0};
                put_rows(&x, &part, 1, f->leaves[col].max_def);
                for (int64_t r = r0; r < r1; r++) {
                    uint64_t rb = 0, re = 0;
                    int ok = whole.kind == PI_PQ_NESTED ? 1 : pi_pq_row(&whole, (uint64_t)r, &rb, &re);
                    if (r > r0) sb_str(&y, ",");
                    if (whole.kind == PI_PQ_NESTED) {
                        put_nested_row(&y, &whole, (uint64_t)r, f->leaves[col].max_def);
                    } else if (whole.kind == PI_PQ_SCALAR) {
                        put_value(&y, &whole, (uint64_t)r);
                    } else if (!ok) {
                        sb_str(&y, "null");
                    } else {
                        sb_str(&y, "[");
                        for (uint64_t i = rb; i < re; i++) {
                            if (i > rb) sb_str(&y, ",");
                            put_value(&y, &whole, i);
                        }
                        sb_str(&y, "]");
                    }
                }
                if (!x.p || !y.p || strcmp(x.p, y.p)) {
                    printf("    column %s pages [%zu, %zu): rows differ\n", f->leaves[col].path, a, b);
                    CHECK(0);
                }
                free(x.p);
                free(y.p);
                pi_pq_column_free(&part);
            }
        /* a wrong row count is caught */
        if (n > 1) {
            struct pi_pq_column part;
            CHECK(pi_pq_decode_page_run(f, 0, col, buf + C->off, (size_t)((uint64_t)loc[0].offset - C->off),
                                        buf + loc[0].offset, (size_t)loc[0].size, 0, loc[1].first_row + 1, &part) < 0);
        }
        pi_pq_column_free(&whole);
        pi_free(loc);
    }
    CHECK(maxpages > 10); /* pages of at most 256 bytes */
    printf("    %zu page runs decoded, up to %zu pages a chunk\n", runs, maxpages);
    pi_pq_close(f);
    free(buf);
    return PASS;
}

/* Every codec decompresses into exactly the declared size: one byte less or
 * more is an error and nothing is written past the buffer; GZIP pages of
 * several members, and the LZ4 codec's Hadoop framing and bare-block
 * fallback. (Brotli: the writer fixtures; no encoder is linked here.) */
#ifdef PAGEIN_HAVE_SNAPPY
#include <snappy-c.h>
#endif
#ifdef PAGEIN_HAVE_ZLIB
#include <zlib.h>
#endif
#ifdef PAGEIN_HAVE_ZSTD
#include <zstd.h>
#endif
#ifdef PAGEIN_HAVE_LZ4
#include <lz4.h>
#endif

static int check_codec(int codec, const uint8_t *z, size_t zn, const uint8_t *want, size_t n) {
    static uint8_t out[70000];
    int bad = 0;
    memset(out, 0xcc, sizeof out);
    if (pi_pq_decompress(codec, z, zn, out, n) != 0 || memcmp(out, want, n)) {
        printf("    %s: %s\n", pi_pq_codec_name(codec), pagein_last_error_detail());
        bad = 1;
    }
    memset(out, 0xcc, sizeof out);
    if (pi_pq_decompress(codec, z, zn, out, n - 1) != PI_PQ_EFORMAT || out[n - 1] != 0xcc) bad = 1;
    if (pi_pq_decompress(codec, z, zn, out, n + 1) != PI_PQ_EFORMAT) bad = 1;
    for (size_t k = 0; k + 1 < zn; k += zn / 7 + 1) /* cut anywhere: an error */
        if (pi_pq_decompress(codec, z, k, out, n) == 0) bad = 1;
    if (bad) printf("    %s: not bounded\n", pi_pq_codec_name(codec));
    return bad;
}

TEST(parquet_codecs_bounded) {
    static uint8_t src[30000], z[80000];
    uint64_t s = 3;
    for (size_t i = 0; i < sizeof src; i++) src[i] = (uint8_t)(i % 251 < 120 ? 'a' + i % 7 : pt_rand(&s));
    size_t n = sizeof src;
    int tested = 0;
#ifdef PAGEIN_HAVE_SNAPPY
    size_t zn = sizeof z;
    CHECK(snappy_compress((const char *)src, n, (char *)z, &zn) == SNAPPY_OK);
    CHECK(!check_codec(PI_PQ_SNAPPY, z, zn, src, n));
    tested++;
#endif
#ifdef PAGEIN_HAVE_ZLIB
    {
        /* two gzip members: the first half, then the second */
        size_t off = 0;
        for (int m = 0; m < 2; m++) {
            z_stream zs;
            memset(&zs, 0, sizeof zs);
            CHECK(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
            zs.next_in = src + m * (n / 2);
            zs.avail_in = (uInt)(n / 2);
            zs.next_out = z + off;
            zs.avail_out = (uInt)(sizeof z - off);
            CHECK(deflate(&zs, Z_FINISH) == Z_STREAM_END);
            off += zs.total_out;
            deflateEnd(&zs);
        }
        CHECK(!check_codec(PI_PQ_GZIP, z, off, src, n));
        tested++;
    }
#endif
#ifdef PAGEIN_HAVE_ZSTD
    {
        size_t r = ZSTD_compress(z, sizeof z, src, n, 3);
        CHECK(!ZSTD_isError(r));
        CHECK(!check_codec(PI_PQ_ZSTD, z, r, src, n));
        tested++;
    }
#endif
#ifdef PAGEIN_HAVE_LZ4
    {
        int r = LZ4_compress_default((const char *)src, (char *)z, (int)n, (int)sizeof z);
        CHECK(r > 0);
        CHECK(!check_codec(PI_PQ_LZ4_RAW, z, (size_t)r, src, n));
        CHECK(!check_codec(PI_PQ_LZ4, z, (size_t)r, src, n)); /* the bare-block fallback */
        /* Hadoop framing: two blocks of [BE uncompressed][BE compressed][block] */
        static uint8_t h[80000];
        size_t off = 0;
        for (int m = 0; m < 2; m++) {
            int cr = LZ4_compress_default((const char *)src + m * (n / 2), (char *)h + off + 8, (int)(n / 2),
                                          (int)(sizeof h - off - 8));
            uint32_t ul = (uint32_t)(n / 2), cl = (uint32_t)cr;
            uint8_t be[8] = {(uint8_t)(ul >> 24), (uint8_t)(ul >> 16), (uint8_t)(ul >> 8), (uint8_t)ul,
                             (uint8_t)(cl >> 24), (uint8_t)(cl >> 16), (uint8_t)(cl >> 8), (uint8_t)cl};
            memcpy(h + off, be, 8);
            off += 8 + (size_t)cr;
        }
        CHECK(!check_codec(PI_PQ_LZ4, h, off, src, n));
        tested++;
    }
#endif
    /* an unknown codec names itself */
    uint8_t o[4];
    CHECK_EQ(pi_pq_decompress(9, src, 4, o, 4), PAGEIN_E_UNSUPPORTED);
    if (!tested) SKIP_BECAUSE("built without the codec libraries");
    return PASS;
}

/* ---- the fused dictionary gather and the level scan ----------------------- */

/* A hybrid stream of n indexes of bit width bw: a bit-packed run of all of
 * them, an RLE run of `rle` copies of index 1 in the middle, bit-packed
 * again after it. */
static size_t build_indexes(uint8_t *out, const uint32_t *ix, size_t n, int bw, size_t rle_at, size_t rle) {
    size_t o = 0;
    size_t parts[3][2] = {{0, rle_at}, {rle_at, rle}, {rle_at + rle, n - rle_at - rle}};
    for (int k = 0; k < 3; k++) {
        size_t a = parts[k][0], m = parts[k][1];
        if (!m) continue;
        if (k == 1) { /* an RLE run: (count << 1), then the value in ceil(bw / 8) bytes */
            uint64_t h = (uint64_t)m << 1;
            while (h >= 0x80) out[o++] = (uint8_t)(h | 0x80), h >>= 7;
            out[o++] = (uint8_t)h;
            for (int b = 0; b < (bw + 7) / 8; b++) out[o++] = (uint8_t)(ix[a] >> (8 * b));
            continue;
        }
        size_t groups = (m + 7) / 8;
        uint64_t h = (uint64_t)groups << 1 | 1;
        while (h >= 0x80) out[o++] = (uint8_t)(h | 0x80), h >>= 7;
        out[o++] = (uint8_t)h;
        memset(out + o, 0, groups * (size_t)bw);
        for (size_t i = 0; i < m; i++)
            for (int b = 0; b < bw; b++)
                if (ix[a + i] >> b & 1) {
                    size_t bit = i * (size_t)bw + (size_t)b;
                    out[o + bit / 8] |= (uint8_t)(1u << (bit % 8));
                }
        o += groups * (size_t)bw;
    }
    return o;
}

TEST(parquet_dict_gather_paths) {
    uint64_t st = pt_seed();
    enum { N = 3001 };
    static uint32_t ix[N], want[N], got[N], dict[1 << 20];
    static uint8_t enc[N * 4 + 64];
    for (size_t i = 0; i < PI_ARRAY_LEN(dict); i++) dict[i] = (uint32_t)(i * 2654435761u);
    int widths[] = {1, 3, 8, 13, 16, 17, 20};
    for (size_t w = 0; w < PI_ARRAY_LEN(widths); w++) {
        int bw = widths[w];
        uint32_t dn = bw == 1 ? 2 : (1u << bw) - 5; /* short of 2^bw: bad indexes are possible */
        for (size_t i = 0; i < N; i++) ix[i] = (uint32_t)(pt_rand(&st) % dn);
        for (size_t i = 1000; i < 1700; i++) ix[i] = 1; /* the RLE run */
        size_t len = build_indexes(enc, ix, N, bw, 1000, 700);
        for (size_t i = 0; i < N; i++) want[i] = dict[ix[i]];
        /* padded (dcap 2^bw: straight from the bits, up to 16) and not (through the L1 buffer) */
        for (int padded = 0; padded < 2; padded++) {
            memset(got, 0xee, sizeof got);
            uint64_t cap = padded ? (1ull << bw) : dn;
            CHECK_EQ(pi_pq_dict_gather(enc, len, bw, dict, dn, cap, 4, got, N), 0);
            CHECK(!memcmp(got, want, sizeof want));
            /* one index past the dictionary: refused whichever path */
            uint32_t keep = ix[77];
            ix[77] = dn + (bw > 1 ? 2 : 0);
            if (ix[77] < (1u << bw)) {
                size_t l2 = build_indexes(enc, ix, N, bw, 1000, 700);
                CHECK_EQ(pi_pq_dict_gather(enc, l2, bw, dict, dn, cap, 4, got, N), PI_PQ_EFORMAT);
                CHECK(strstr(pagein_last_error_detail(), "dictionary index") != NULL);
            }
            ix[77] = keep;
            len = build_indexes(enc, ix, N, bw, 1000, 700);
        }
    }
    return PASS;
}

TEST(parquet_level_scan_row_starts) {
    uint64_t st = pt_seed();
    enum { N = 5000 };
    static uint8_t lv[N], enc[N + 64], dec[N];
    static uint64_t zpos[N];
    static uint32_t ix[N];
    for (int trial = 0; trial < 20; trial++) {
        /* rows of 1-40 values: a 0 then 1s (repetition levels of a list) */
        for (size_t i = 0; i < N;) {
            size_t m = 1 + (size_t)(pt_rand(&st) % (trial & 1 ? 40 : 3));
            for (size_t k = 0; k < m && i < N; k++, i++) lv[i] = k ? 1 : 0;
        }
        for (size_t i = 0; i < N; i++) ix[i] = lv[i];
        size_t len = build_indexes(enc, ix, N, 1, 2000, 0);
        struct pi_pq_lvlstat a, b;
        CHECK_EQ(pi_pq_rle_decode8(enc, len, 1, dec, N, &a), 0);
        CHECK(!memcmp(dec, lv, N));
        CHECK_EQ(pi_pq_rle_scan8(enc, len, 1, N, &b, 0, NULL), 0);
        CHECK_EQ(a.zeros, b.zeros);
        CHECK_EQ(a.min, b.min);
        CHECK_EQ(a.max, b.max);
        CHECK_EQ(pi_pq_rle_scan8(enc, len, 1, N, &b, 100, zpos), 0);
        size_t z = 0;
        for (size_t i = 0; i < N; i++)
            if (!lv[i]) CHECK_EQ(zpos[z++], 100 + i);
        CHECK_EQ(z, b.zeros);
    }
    return PASS;
}

/* Global order over a file with a page index reads, for each sample, only
 * the page of each selected column that holds it (and the column's
 * dictionary), never whole row groups: the bytes the pipe fetched are
 * bounded by the parts its batches need, far below what whole groups would
 * cost; every row comes out exactly once over ranks and workers, with the
 * writer's values. */
TEST(parquet_global_order_pages) {
    const char *dir = fixtures();
    if (!dir) return FAIL;
    char path[600], p2[600];
    snprintf(path, sizeof path, "%s/small_pages.parquet", dir); /* 1000 rows, 1 row group, 256-byte pages */
    snprintf(p2, sizeof p2, "%s/expected.json", dir);
    size_t explen;
    char *exp = pt_read_file(p2, &explen);
    CHECK(exp != NULL);
    if (!exp) return FAIL;
    const char *cols[] = {"i32", "s", "tok", "st"};
    pagein_dataset_opts o = {.size = sizeof o, .columns = cols, .ncolumns = 4};
    pagein_dataset *d = NULL;
    CHECK_OK(pagein_dataset_open(&d, path, &o));
    if (!d) {
        free(exp);
        return FAIL;
    }
    enum { N = 1000, RB = 4 };
    const struct pi_dsshard *sh = d->shards[0];
    struct pi_dsgroupinfo gi, whole;
    CHECK_EQ(sh->ngroups, 1);
    CHECK(sh->fmt->part != NULL);
    if (!sh->fmt->part) {
        pagein_dataset_close(d);
        free(exp);
        return FAIL;
    }
    CHECK_EQ(sh->fmt->part(sh, 0, 0, &gi, NULL, 0), 10); /* 5 leaves (st is st.a, st.b): dictionary + page each */
    CHECK_OK(pi_ds_group(sh, 0, &whole));
    /* what batches of RB samples need: the distinct parts of each batch */
    pagein_pipe_opts po = PAGEIN_PIPE_OPTS_INIT;
    po.order = PAGEIN_ORDER_GLOBAL, po.seed = 9, po.read_batch = RB, po.window = RB; /* batches of RB */
    uint64_t *ids = calloc(N, sizeof *ids), bound = 0, nparts = 0;
    CHECK_OK(pagein_pipe_order(d, &po, ids, N));
    for (uint64_t u = 0; u < N; u += RB) {
        uint64_t firsts[RB];
        size_t nf = 0;
        for (uint64_t k = u; k < u + RB && k < N; k++) {
            CHECK(sh->fmt->part(sh, 0, ids[k], &gi, NULL, 0) > 0);
            CHECK(gi.first <= ids[k] && ids[k] < gi.first + gi.count);
            int seen = 0;
            for (size_t j = 0; j < nf; j++) seen |= firsts[j] == gi.first;
            if (seen) continue;
            firsts[nf++] = gi.first;
            bound += gi.bytes;
            nparts++;
        }
    }
    uint64_t units = (N + RB - 1) / RB;
    printf("    %llu units of %d: parts need at most %llu bytes, whole row groups %llu\n", (unsigned long long)units, RB,
           (unsigned long long)bound, (unsigned long long)(units * whole.bytes));
    CHECK(bound * 3 < units * whole.bytes); /* 1000 rows (the committed file): 3.3x */
    /* one consumer: what it fetched is what the parts need (dictionaries
     * shared within a batch, so at most the bound) */
    pagein_pipe *p = NULL;
    CHECK_OK(pagein_pipe_open(&p, d, &po));
    pagein_item it;
    int rc;
    uint64_t k = 0, bad = 0;
    while (p && (rc = pagein_pipe_next(p, &it)) == 1) {
        if (k >= N || it.id != ids[k]) bad++;
        k++;
        if (it.id % 8 || bad > 5) continue;
        bad += check_item(exp, explen, &it);
    }
    CHECK_EQ(k, N);
    CHECK_EQ(bad, 0);
    pagein_pipe_stats st;
    pagein_pipe_get_stats(p, &st);
    printf("    fetched %llu bytes in %llu requests, %llu parts decoded\n", (unsigned long long)st.bytes_read,
           (unsigned long long)st.requests, (unsigned long long)st.groups);
    CHECK(st.bytes_read <= bound);
    CHECK_EQ(st.groups, nparts);
    CHECK_EQ(st.units, units);
    pagein_pipe_close(p);
    /* 3 ranks x 2 workers: every row exactly once */
    uint8_t *seen = calloc(N, 1);
    uint64_t total = 0;
    for (uint32_t r = 0; r < 3; r++)
        for (uint32_t w = 0; w < 2; w++) {
            pagein_pipe_opts pr = po;
            pr.rank = r, pr.world_size = 3, pr.worker = w, pr.num_workers = 2, pr.batch = 4;
            pagein_pipe *q = NULL;
            CHECK_OK(pagein_pipe_open(&q, d, &pr));
            while (q && (rc = pagein_pipe_next(q, &it)) == 1) {
                total++;
                if (it.id >= N || seen[it.id]++) bad++;
            }
            pagein_pipe_close(q);
        }
    CHECK_EQ(total, N);
    CHECK_EQ(bad, 0);
    free(seen);
    free(ids);
    free(exp);
    pagein_dataset_close(d);
    return PASS;
}

/* A fresh values array of 8 MiB or more is populated ahead on a thread of
 * its own while the pages decode into it: the values are right, and a
 * chunk whose pages hold fewer values than it declares ends the fill and
 * fails naming the counts. */
TEST(parquet_fresh_values_filled) {
    enum { PAGES = 4, PER = 700000, N = PAGES * PER }; /* 11.2 MB of INT32 */
    uint8_t *buf = malloc((size_t)N * 4 + PAGES * 64);
    int32_t *v = malloc((size_t)PER * 4);
    CHECK(buf && v);
    size_t n = 0;
    for (int p = 0; p < PAGES; p++) {
        for (int i = 0; i < PER; i++) v[i] = (int32_t)((uint32_t)(p * PER + i) * 2654435761u);
        struct tw h = {0};
        tw_page_v1(&h, PER, PER * 4, PER * 4, PI_PQ_PLAIN, PI_PQ_RLE);
        memcpy(buf + n, h.b, h.n);
        memcpy(buf + n + h.n, v, (size_t)PER * 4);
        n += h.n + (size_t)PER * 4;
    }
    struct pi_pq_leaf L = {.path = (char *)"x", .field = (char *)"x", .type = PI_PQ_INT32, .list_def = -1};
    for (int round = 0; round < 2; round++) {
        pi_mem_trim(); /* fresh blocks: the fill runs */
        uint64_t before = pi_mem_populated_total();
        struct pi_pq_column c;
        CHECK_EQ(pi_pq_decode_pages(&L, 0, N, N, buf, n, "fill.parquet: row group 0, column x", &c), 0);
        /* the fill ran over the values (none where the array is on the heap: ASan) */
        if (pi_mem_grow_is_block((size_t)N * 4)) CHECK(pi_mem_populated_total() - before >= (uint64_t)N * 4 - 4096);
        else CHECK_EQ(pi_mem_populated_total(), before);
        CHECK_EQ(c.nelems, (uint64_t)N);
        const int32_t *got = (const int32_t *)c.values;
        uint64_t bad = 0;
        for (uint64_t i = 0; i < (uint64_t)N; i++) bad += got[i] != (int32_t)((uint32_t)i * 2654435761u);
        CHECK_EQ(bad, 0);
        pi_pq_column_free(&c);
    }
    /* the chunk declares one page more than it holds: the fill ends, the error names the counts */
    pi_mem_trim();
    struct pi_pq_column c;
    CHECK_EQ(pi_pq_decode_pages(&L, 0, N + PER, N + PER, buf, n, "fill.parquet: row group 0, column x", &c),
             PI_PQ_EFORMAT);
    CHECK(strstr(pagein_last_error_detail(), "fill.parquet") && strstr(pagein_last_error_detail(), "values"));
    /* one page fewer declared than held: the declared values are decoded
     * (the fill over them), the page past them is not */
    pi_mem_trim();
    CHECK_EQ(pi_pq_decode_pages(&L, 0, N - PER, N - PER, buf, n, "fill.parquet: row group 0, column x", &c), 0);
    CHECK_EQ(c.nelems, (uint64_t)(N - PER));
    for (uint64_t i = 0; i < (uint64_t)(N - PER); i += 4093)
        CHECK_EQ(((const int32_t *)c.values)[i], (int32_t)((uint32_t)i * 2654435761u));
    pi_pq_column_free(&c);
    free(v);
    free(buf);
    return PASS;
}
