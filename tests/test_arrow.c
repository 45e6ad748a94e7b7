/* test_arrow.c - the Arrow IPC reader (src/data/arrow.c) against files
 * written by npm apache-arrow (tests/data/arrow/gen.mjs; committed in
 * tests/data/arrow/fixtures/, written again by tests/data/regen.sh, so
 * nothing here needs node or npm). Every cell of every batch, in the
 * stream and file formats, uncompressed, LZ4-frame and ZSTD, is rendered
 * as text and compared with what the writer was given.
 *
 * White-box: includes src/data/arrow.h (the reader is private). */
#include "test.h"

#include "../src/data/arrow.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- fixtures ------------------------------------------------------------ */
static char fx_dir[4096];

/* NULL when the fixtures are there, else why they are not (a FAIL: they are
 * committed, tests/data/regen.sh writes them again). */
static const char *fixtures(void) {
    const char *env = getenv("PAGEIN_ARROW_FIXTURES");
    snprintf(fx_dir, sizeof fx_dir, "%s", env && *env ? env : "tests/data/arrow/fixtures");
    char p[4200];
    snprintf(p, sizeof p, "%s/types.expected.tsv", fx_dir);
    return access(p, R_OK) == 0 ? NULL : "the committed fixtures are missing (tests/data/regen.sh)";
}

static const char *fx(const char *name) {
    static char b[8][4096 + 256];
    static int k;
    char *r = b[k++ & 7];
    snprintf(r, sizeof b[0], "%s/%.200s", fx_dir, name);
    return r;
}

#define NEED_FIXTURES()                                 \
    do {                                                \
        const char *why_ = fixtures();                  \
        if (why_) {                                     \
            printf("    %s: %s\n", fx_dir, why_);      \
            return FAIL;                                \
        }                                               \
    } while (0)
#define NEED_CODECS()                                                                     \
    do {                                                                                  \
        if (!pi_arrow_have_codec(0) || !pi_arrow_have_codec(1))                           \
            SKIP_BECAUSE("built without liblz4-dev or libzstd-dev (mk/arrow.mk)");        \
    } while (0)

struct blob {
    uint8_t *p;
    size_t n;
};
static struct blob load(const char *path) {
    struct blob b = {0};
    b.p = pt_read_file(path, &b.n);
    if (!b.p) printf("    cannot read %s\n", path);
    return b;
}

/* ---- rendering (the text gen.mjs writes) ----------------------------------- */
static void put(struct pi_buf *o, const char *s) { pi_buf_str(o, s); }

static void put_hex(struct pi_buf *o, const uint8_t *p, uint64_t n) {
    static const char h[] = "0123456789abcdef";
    for (uint64_t i = 0; i < n; i++) {
        char c[2] = {h[p[i] >> 4], h[p[i] & 15]};
        pi_buf_put(o, c, 2);
    }
}

static void put_double(struct pi_buf *o, double v) {
    char t[64];
    if (v == 0) v = 0; /* JS prints -0 as 0 */
    snprintf(t, sizeof t, "%.17g", v);
    char *e = strchr(t, 'e'); /* JS writes e-7 where C writes e-07 */
    if (e) {
        char *d = e + 2;
        while (d[0] == '0' && d[1]) memmove(d, d + 1, strlen(d));
    }
    put(o, t);
}

static void render(struct pi_buf *o, const struct pi_arrow_col *c, uint64_t row) {
    struct pi_arrow_val v;
    char t[64];
    if (pi_arrow_get(c, row, &v) != 0) {
        put(o, "<range>");
        return;
    }
    if (v.null) {
        put(o, "null");
        return;
    }
    const struct pi_arrow_field *f = c->f;
    switch (f->kind) {
    case PI_ARROW_BOOL: put(o, v.i ? "true" : "false"); break;
    case PI_ARROW_INT:
        if (f->is_signed) snprintf(t, sizeof t, "%lld", (long long)v.i);
        else snprintf(t, sizeof t, "%llu", (unsigned long long)v.u);
        put(o, t);
        break;
    case PI_ARROW_FLOAT: put_double(o, v.f); break;
    case PI_ARROW_UTF8:
    case PI_ARROW_LARGE_UTF8: put(o, "s:"); put_hex(o, v.p, v.n); break;
    case PI_ARROW_BINARY:
    case PI_ARROW_LARGE_BINARY: put(o, "b:"); put_hex(o, v.p, v.n); break;
    case PI_ARROW_LIST:
    case PI_ARROW_LARGE_LIST:
    case PI_ARROW_FIXED_LIST:
        put(o, "[");
        for (uint64_t i = 0; i < v.n; i++) {
            if (i) put(o, ",");
            render(o, v.child, v.first + i);
        }
        put(o, "]");
        break;
    case PI_ARROW_STRUCT:
        put(o, "{");
        for (uint32_t i = 0; i < f->nchildren; i++) {
            if (i) put(o, ",");
            put(o, f->children[i].name);
            put(o, "=");
            render(o, &c->children[i], row);
        }
        put(o, "}");
        break;
    default: put(o, "?");
    }
}

/* ---- expected values ------------------------------------------------------- */
struct cell {
    char *file; /* ds.expected.tsv only */
    unsigned batch;
    char *col;
    unsigned row;
    char *val;
};
struct expect {
    char *text;
    struct cell *c;
    size_t n;
};

static int load_expect(const char *path, int with_file, struct expect *e) {
    memset(e, 0, sizeof *e);
    size_t len;
    e->text = pt_read_file(path, &len);
    if (!e->text) return -1;
    size_t cap = 0;
    for (size_t i = 0; i < len; i++) cap += e->text[i] == '\n';
    e->c = calloc(cap + 1, sizeof *e->c);
    char *save = NULL;
    for (char *line = strtok_r(e->text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "batch\t", 6)) continue;
        char *f[5] = {0};
        int k = 0;
        char *s2 = NULL;
        for (char *t = strtok_r(line, "\t", &s2); t && k < 5; t = strtok_r(NULL, "\t", &s2)) f[k++] = t;
        if (k != 4 + with_file) continue;
        struct cell *c = &e->c[e->n++];
        int j = 0;
        if (with_file) c->file = f[j++];
        c->batch = (unsigned)atoi(f[j++]);
        c->col = f[j++];
        c->row = (unsigned)atoi(f[j++]);
        c->val = f[j];
    }
    return 0;
}
static void free_expect(struct expect *e) {
    free(e->text);
    free(e->c);
}

/* Decodes every batch of path (all columns) and compares each cell with
 * the expected ones (those of file when it is not NULL); returns cells
 * checked. */
static size_t check_file(const char *path, const struct expect *e, const char *file, int want_kind) {
    struct blob b = load(path);
    if (!b.p) {
        pt_failed = 1;
        return 0;
    }
    struct pi_arrow a;
    int rc = pi_arrow_open_mem(&a, path, b.p, b.n);
    CHECK_OK(rc);
    if (rc) {
        free(b.p);
        return 0;
    }
    CHECK_EQ(a.kind, want_kind);
    size_t checked = 0, bad = 0, bi = (size_t)-1;
    struct pi_arrow_batch batch = {0};
    struct pi_buf o = {0};
    for (size_t i = 0; i < e->n; i++) {
        const struct cell *c = &e->c[i];
        if (file && strcmp(c->file, file) != 0) continue;
        if (c->batch != bi) {
            pi_arrow_batch_free(&batch);
            bi = c->batch;
            CHECK(bi < a.nbatches);
            if (bi >= a.nbatches) break;
            const struct pi_arrow_batch_ref *r = &a.batches[bi];
            rc = pi_arrow_decode(&a, bi, b.p + r->offset, r->meta_len + r->body_len, NULL, 0, &batch);
            CHECK_OK(rc);
            if (rc) break;
        }
        int ci = pi_arrow_column(&a, c->col, strlen(c->col));
        CHECK(ci >= 0);
        if (ci < 0) break;
        o.n = 0;
        render(&o, &batch.cols[ci], c->row);
        pi_buf_put(&o, "", 0);
        if (o.oom || strcmp(o.p, c->val) != 0) {
            if (bad++ < 5)
                printf("    %s: batch %u column %s row %u: got %s, want %s\n", path, c->batch, c->col, c->row,
                       o.p ? o.p : "(oom)", c->val);
            pt_failed = 1;
        }
        checked++;
    }
    pi_buf_free(&o);
    pi_arrow_batch_free(&batch);
    pi_arrow_close(&a);
    free(b.p);
    return checked;
}

static const unsigned types_rows[] = {5, 1, 9, 4, 150};

TEST(arrow_types_every_cell) {
    NEED_FIXTURES();
    NEED_CODECS();
    struct expect e;
    CHECK(load_expect(fx("types.expected.tsv"), 0, &e) == 0);
    CHECK(e.n == 169 * 25);
    static const char *const files[] = {"types.stream.arrow", "types.file.arrow", "types.lz4.stream.arrow",
                                        "types.lz4.file.arrow", "types.zstd.stream.arrow", "types.zstd.file.arrow"};
    for (size_t i = 0; i < PI_ARRAY_LEN(files); i++) {
        size_t n = check_file(fx(files[i]), &e, NULL, strstr(files[i], ".file.") ? PI_ARROW_FILE : PI_ARROW_STREAM);
        CHECK_EQ(n, e.n);
    }
    free_expect(&e);
    return PASS;
}

TEST(arrow_index_and_schema) {
    NEED_FIXTURES();
    NEED_CODECS();
    struct blob s = load(fx("types.stream.arrow")), f = load(fx("types.file.arrow"));
    struct pi_arrow as, af;
    CHECK_OK(pi_arrow_open_mem(&as, "s", s.p, s.n));
    CHECK_OK(pi_arrow_open_mem(&af, "f", f.p, f.n));
    CHECK_EQ(as.nbatches, 5);
    CHECK_EQ(af.nbatches, 5);
    CHECK_EQ(as.nrows, 169);
    CHECK_EQ(af.nrows, 169);
    CHECK_EQ(as.compressed, 0);
    uint64_t first = 0;
    for (size_t i = 0; i < 5 && i < as.nbatches && i < af.nbatches; i++) {
        CHECK_EQ(as.batches[i].rows, types_rows[i]);
        CHECK_EQ(af.batches[i].rows, types_rows[i]);
        CHECK_EQ(as.batches[i].first_row, first);
        first += types_rows[i];
        /* the same message in both (apache-arrow's file writer leaves the
         * Schema message out of the file's stream: the first batch is at 8) */
        if (i == 0) CHECK_EQ(af.batches[i].offset, 8);
        CHECK_EQ(af.batches[i].meta_len, as.batches[i].meta_len);
        CHECK_EQ(af.batches[i].body_len, as.batches[i].body_len);
        CHECK(memcmp(s.p + as.batches[i].offset, f.p + af.batches[i].offset,
                     as.batches[i].meta_len + as.batches[i].body_len) == 0);
        /* batches follow each other: the extents tile the stream */
        if (i + 1 < as.nbatches)
            CHECK_EQ(as.batches[i].offset + as.batches[i].meta_len + as.batches[i].body_len, as.batches[i + 1].offset);
    }
    CHECK_EQ(as.schema.nfields, 25);
    const struct pi_arrow_field *st = &as.schema.fields[pi_arrow_column(&as, "st", 2)];
    CHECK_EQ(st->kind, PI_ARROW_STRUCT);
    CHECK_EQ(st->nchildren, 3);
    CHECK_STR(st->children[2].children[0].path, "st.c.item");
    const struct pi_arrow_field *fsl = &as.schema.fields[pi_arrow_column(&as, "fsl", 3)];
    CHECK_EQ(fsl->kind, PI_ARROW_FIXED_LIST);
    CHECK_EQ(fsl->list_size, 3);
    CHECK_EQ(as.schema.fields[pi_arrow_column(&as, "i32", 3)].nullable, 0);
    CHECK_EQ(as.schema.fields[pi_arrow_column(&as, "i8", 2)].nullable, 1);
    CHECK_EQ(pi_arrow_column(&as, "nope", 4), PAGEIN_E_NOT_FOUND);
    CHECK(strstr(pagein_last_error_detail(), "nope") != NULL);
    pi_arrow_close(&as);
    pi_arrow_close(&af);
    /* compressed: the codec is reported */
    struct blob z = load(fx("types.zstd.file.arrow")), l = load(fx("types.lz4.stream.arrow"));
    CHECK_OK(pi_arrow_open_mem(&af, "z", z.p, z.n));
    CHECK_EQ(af.compressed, 2);
    pi_arrow_close(&af);
    CHECK_OK(pi_arrow_open_mem(&af, "l", l.p, l.n));
    CHECK_EQ(af.compressed, 1);
    pi_arrow_close(&af);
    free(s.p);
    free(f.p);
    free(z.p);
    free(l.p);
    return PASS;
}

/* Only the selected columns are decoded (and their buffers looked at). */
TEST(arrow_select_columns) {
    NEED_FIXTURES();
    NEED_CODECS();
    struct blob b = load(fx("types.zstd.stream.arrow"));
    struct pi_arrow a;
    CHECK_OK(pi_arrow_open_mem(&a, "z", b.p, b.n));
    uint32_t sel[2] = {(uint32_t)pi_arrow_column(&a, "s", 1), (uint32_t)pi_arrow_column(&a, "li", 2)};
    const struct pi_arrow_batch_ref *r = &a.batches[4];
    struct pi_arrow_batch all, some;
    CHECK_OK(pi_arrow_decode(&a, 4, b.p + r->offset, r->meta_len + r->body_len, NULL, 0, &all));
    CHECK_OK(pi_arrow_decode(&a, 4, b.p + r->offset, r->meta_len + r->body_len, sel, 2, &some));
    CHECK(some.inflated < all.inflated); /* fewer buffers inflated */
    for (uint32_t i = 0; i < a.schema.nfields; i++) CHECK((some.cols[i].f != NULL) == (i == sel[0] || i == sel[1]));
    /* a list of int32: (pointer, count) straight into the values */
    struct pi_arrow_val v;
    CHECK_OK(pi_arrow_get(&some.cols[sel[1]], 3, &v)); /* row 22: 2 items, 220, 221 */
    CHECK_EQ(v.null, 0);
    CHECK_EQ(v.n, 2);
    int32_t x[2];
    memcpy(x, v.p, 8);
    CHECK_EQ(x[0], 220);
    CHECK_EQ(x[1], 221);
    CHECK_EQ(pi_arrow_get(&some.cols[sel[1]], 150, &v), PAGEIN_E_RANGE);
    /* the same from the two columns' spans alone, each in its own buffer */
    struct pi_arrow_seg seg[2];
    uint8_t *copy[2];
    uint64_t span_total = 0;
    for (int k = 0; k < 2; k++) {
        CHECK_OK(pi_arrow_col_span(&a, 4, sel[k], &seg[k].off, &seg[k].len));
        copy[k] = malloc(seg[k].len);
        memcpy(copy[k], b.p + r->offset + r->meta_len + seg[k].off, seg[k].len);
        seg[k].p = copy[k];
        span_total += seg[k].len;
    }
    CHECK(span_total < r->body_len / 4); /* 2 of 23 columns */
    struct pi_arrow_batch part;
    CHECK_OK(pi_arrow_decode_segs(&a, 4, seg, 2, sel, 2, &part));
    struct pi_buf o1 = {0}, o2 = {0};
    for (int k = 0; k < 2; k++)
        for (uint64_t row = 0; row < part.rows; row++) {
            render(&o1, &part.cols[sel[k]], row);
            render(&o2, &all.cols[sel[k]], row);
        }
    CHECK(o1.n == o2.n && o1.n > 1000 && memcmp(o1.p, o2.p, o1.n) == 0);
    pi_buf_free(&o1);
    pi_buf_free(&o2);
    pi_arrow_batch_free(&part);
    /* a column whose bytes were not given */
    uint32_t other = (uint32_t)pi_arrow_column(&a, "i64", 3);
    CHECK_EQ(pi_arrow_decode_segs(&a, 4, seg, 2, &other, 1, &part), PAGEIN_E_INVALID);
    free(copy[0]);
    free(copy[1]);
    pi_arrow_batch_free(&all);
    pi_arrow_batch_free(&some);
    pi_arrow_close(&a);
    free(b.p);
    return PASS;
}

/* apache-arrow 21.2.0's writer puts the compressed length where the spec
 * has the uncompressed one: the frame holds more than declared, and the
 * reader refuses rather than inflate past the declared size. */
TEST(arrow_refuses_wrong_declared_length) {
    NEED_FIXTURES();
    NEED_CODECS();
    struct blob b = load(fx("types.lz4js.stream.arrow"));
    struct pi_arrow a;
    CHECK_OK(pi_arrow_open_mem(&a, "types.lz4js.stream.arrow", b.p, b.n));
    int refused = 0;
    for (size_t i = 0; i < a.nbatches; i++) {
        const struct pi_arrow_batch_ref *r = &a.batches[i];
        struct pi_arrow_batch bt;
        int rc = pi_arrow_decode(&a, i, b.p + r->offset, r->meta_len + r->body_len, NULL, 0, &bt);
        if (rc == 0) {
            pi_arrow_batch_free(&bt);
            continue;
        }
        refused++;
        CHECK_EQ(rc, PI_ARROW_E_FORMAT);
        const char *d = pagein_last_error_detail();
        CHECK(strstr(d, "types.lz4js.stream.arrow: batch ") == d);
        CHECK(strstr(d, "field '") != NULL);
        CHECK(strstr(d, "lz4") != NULL);
        if (i == 4) printf("    (detail: %s)\n", d);
    }
    CHECK(refused >= 1);
    pi_arrow_close(&a);
    free(b.p);
    return PASS;
}

TEST(arrow_dictionary_read) {
    NEED_FIXTURES();
    struct blob b = load(fx("dict.stream.arrow"));
    struct pi_arrow a;
    CHECK_EQ(pi_arrow_open_mem(&a, "dict.stream.arrow", b.p, b.n), 0);
    CHECK_EQ(a.schema.ndicts, 1);
    CHECK_EQ(a.schema.fields[1].kind, PI_ARROW_DICT);
    const struct pi_arrow_batch_ref *r = &a.batches[0];
    struct pi_arrow_batch bt;
    CHECK_EQ(pi_arrow_decode(&a, 0, b.p + r->offset, r->meta_len + r->body_len, NULL, 0, &bt), 0);
    struct pi_buf o = {0};
    for (uint64_t i = 0; i < bt.rows; i++) {
        const struct pi_arrow_col *vc;
        uint64_t vr;
        if (pi_arrow_is_null(&bt.cols[1], i)) {
            put(&o, "null;");
            continue;
        }
        CHECK_EQ(pi_arrow_resolve(&bt.cols[1], i, &vc, &vr), 0);
        render(&o, vc, vr);
        put(&o, ";");
    }
    CHECK_STR(o.p, "s:726564;s:677265656e;s:726564;null;"); /* red, green, red, null (render: hex) */
    pi_buf_free(&o);
    pi_arrow_batch_free(&bt);
    pi_arrow_close(&a);
    free(b.p);
    return PASS;
}

/* tests/data/nested/types.arrows (apache-arrow): dictionaries grown by
 * delta batches, Decimal256, unions; an index past its dictionary is
 * refused naming the dictionary. */
TEST(arrow_dictionary_deltas_unions) {
    struct blob b = load("tests/data/nested/types.arrows");
    CHECK(b.p != NULL); /* committed */
    struct pi_arrow a;
    CHECK_EQ(pi_arrow_open_mem(&a, "types.arrows", b.p, b.n), 0);
    CHECK_EQ(a.schema.ndicts, 2);
    CHECK_EQ(a.schema.dicts[0].npieces, 4); /* the first batch and three deltas (one empty) */
    CHECK_EQ(a.schema.dicts[0].length, 7);
    CHECK_EQ(a.nbatches, 4);
    CHECK_EQ(a.schema.fields[2].bits, 256);
    CHECK_EQ(a.schema.fields[5].kind, PI_ARROW_UNION);
    CHECK_EQ(a.schema.fields[5].union_mode, 1);
    CHECK_EQ(a.schema.fields[5].type_child[9], 1);
    struct pi_buf o = {0};
    for (size_t bi = 0; bi < a.nbatches; bi++) {
        const struct pi_arrow_batch_ref *r = &a.batches[bi];
        struct pi_arrow_batch bt;
        CHECK_EQ(pi_arrow_decode(&a, bi, b.p + r->offset, r->meta_len + r->body_len, NULL, 0, &bt), 0);
        const struct pi_arrow_col *vc;
        uint64_t vr;
        if (!pi_arrow_is_null(&bt.cols[0], bt.rows - 1)) {
            CHECK_EQ(pi_arrow_resolve(&bt.cols[0], bt.rows - 1, &vc, &vr), 0);
            render(&o, vc, vr);
        }
        CHECK_EQ(pi_arrow_resolve(&bt.cols[5], 0, &vc, &vr), 0);
        put(&o, "/");
        render(&o, vc, vr);
        put(&o, ";");
        pi_arrow_batch_free(&bt);
    }
    /* the same rows as types.arrows.jsonl: tag and du of rows 11, 23, 35, 39 and du of 0, 12, 24, 36 */
    CHECK_STR(o.p, "s:677265656e/s:7430;s:726564/s:743132;s:726564/s:743234;s:6379616e/s:743336;"); /* green/t0 red/t12 red/t24 cyan/t36 */
    pi_buf_free(&o);
    /* an index past the dictionary: the last batch's first tag index set to 99 */
    const struct pi_arrow_batch_ref *r = &a.batches[3];
    struct pi_arrow_batch bt;
    CHECK_EQ(pi_arrow_decode(&a, 3, b.p + r->offset, r->meta_len + r->body_len, NULL, 0, &bt), 0);
    const uint8_t *idx = bt.cols[0].values;
    size_t at = (size_t)(idx - b.p);
    pi_arrow_batch_free(&bt);
    uint32_t bad = 99;
    memcpy(b.p + at, &bad, 4);
    CHECK_EQ(pi_arrow_decode(&a, 3, b.p + r->offset, r->meta_len + r->body_len, NULL, 0, &bt), PI_ARROW_E_FORMAT);
    CHECK(strstr(pagein_last_error_detail(), "index 99 at 0 outside dictionary 1 of 7 values") != NULL);
    pi_arrow_close(&a);
    free(b.p);
    return PASS;
}

/* A save_to_disk directory: state.json lists the shards in order. */
TEST(arrow_save_to_disk_dir) {
    NEED_FIXTURES();
    size_t len;
    char *js = pt_read_file(fx("ds/state.json"), &len);
    CHECK(js != NULL);
    char **files;
    size_t n;
    CHECK_OK(pi_arrow_state_files(js, len, "ds/state.json", &files, &n));
    CHECK_EQ(n, 2);
    if (n == 2) {
        CHECK_STR(files[0], "data-00000-of-00002.arrow");
        CHECK_STR(files[1], "data-00001-of-00002.arrow");
    }
    struct expect e;
    CHECK(load_expect(fx("ds.expected.tsv"), 1, &e) == 0);
    CHECK_EQ(e.n, 35 * 3);
    uint64_t rows = 0;
    for (size_t i = 0; i < n; i++) {
        char p[64];
        snprintf(p, sizeof p, "ds/%s", files[i]);
        CHECK_EQ(check_file(fx(p), &e, files[i], PI_ARROW_STREAM), (i == 0 ? 23 : 12) * 3);
        struct blob b = load(fx(p));
        struct pi_arrow a;
        CHECK_OK(pi_arrow_open_mem(&a, files[i], b.p, b.n));
        rows += a.nrows;
        pi_arrow_close(&a);
        free(b.p);
    }
    CHECK_EQ(rows, 35);
    pi_arrow_names_free(files, n);
    free_expect(&e);
    free(js);
    /* names that leave the directory, and documents without files */
    static const char *const bad[] = {
        "{\"_data_files\":[{\"filename\":\"../x.arrow\"}]}", "{\"_data_files\":[{\"filename\":\"..\"}]}",
        "{\"_data_files\":[]}", "{\"_split\":\"train\"}", "{\"_data_files\":[{\"name\":\"a\"}]}",
        "{\"_data_files\":[{\"filename\":\"a\\u0000b\"}]}", "[1]", "{\"_data_files\":[{\"filename\":\"a\"}]"};
    for (size_t i = 0; i < PI_ARRAY_LEN(bad); i++) {
        int rc = pi_arrow_state_files(bad[i], strlen(bad[i]), "state.json", &files, &n);
        CHECK(rc < 0);
        CHECK(files == NULL);
        CHECK(strstr(pagein_last_error_detail(), "state.json") == pagein_last_error_detail());
    }
    return PASS;
}

/* ---- malformed input ----------------------------------------------------- */
/* Opens and decodes everything; returns the first error (0 if none). */
static int open_decode_all(const uint8_t *p, size_t n, const char *name) {
    struct pi_arrow a;
    int rc = pi_arrow_open_mem(&a, name, p, n);
    if (rc) return rc;
    a.max_batch_bytes = 1 << 24;
    for (size_t i = 0; i < a.nbatches && rc == 0; i++) {
        const struct pi_arrow_batch_ref *r = &a.batches[i];
        struct pi_arrow_batch b;
        rc = pi_arrow_decode(&a, i, p + r->offset, r->meta_len + r->body_len, NULL, 0, &b);
        if (rc == 0) {
            /* every cell is readable */
            struct pi_buf o = {0};
            for (uint32_t c = 0; c < b.ncols; c++)
                for (uint64_t row = 0; row < b.rows; row++) render(&o, &b.cols[c], row), o.n = 0;
            pi_buf_free(&o);
            pi_arrow_batch_free(&b);
        }
    }
    pi_arrow_close(&a);
    return rc;
}

static int is_arrow_error(int rc) {
    return rc == PI_ARROW_E_FORMAT || rc == PAGEIN_E_TRUNCATED || rc == PAGEIN_E_UNSUPPORTED ||
           rc == PAGEIN_E_LIMIT || rc == PAGEIN_E_BAD_MAGIC || rc == PAGEIN_E_BAD_VERSION || rc == PAGEIN_E_ENDIAN;
}

/* Every truncation of a stream and of a file is either a valid shorter
 * stream (cut at a message boundary) or an error naming the file. */
TEST(arrow_truncations) {
    NEED_FIXTURES();
    NEED_CODECS();
    static const char *const files[] = {"ds/data-00001-of-00002.arrow", "types.zstd.file.arrow"};
    for (size_t k = 0; k < 2; k++) {
        struct blob b = load(fx(files[k]));
        size_t ok = 0;
        for (size_t n = 0; n < b.n; n += (k ? 7 : 1)) {
            uint8_t *c = malloc(n ? n : 1);
            memcpy(c, b.p, n);
            int rc = open_decode_all(c, n, "cut.arrow");
            if (rc == 0) ok++;
            else {
                CHECK(is_arrow_error(rc));
                CHECK(strncmp(pagein_last_error_detail(), "cut.arrow: ", 11) == 0);
            }
            free(c);
        }
        if (k == 1) CHECK_EQ(ok, 0); /* a file needs its footer */
        else CHECK(ok >= 2);         /* a stream cut after a batch is a stream */
        free(b.p);
    }
    return PASS;
}

/* Random byte changes: never a crash (run under ASan by make test), only
 * the reader's errors. */
TEST(arrow_mutations) {
    NEED_FIXTURES();
    NEED_CODECS();
    uint64_t seed = pt_seed();
    static const char *const files[] = {"types.stream.arrow", "types.lz4.file.arrow", "types.zstd.stream.arrow"};
    for (size_t k = 0; k < 3; k++) {
        struct blob b = load(fx(files[k]));
        uint8_t *c = malloc(b.n);
        for (int it = 0; it < 300; it++) {
            memcpy(c, b.p, b.n);
            int nm = 1 + (int)(pt_rand(&seed) % 4);
            for (int j = 0; j < nm; j++) {
                size_t at = (size_t)(pt_rand(&seed) % b.n);
                /* mostly the metadata (the first 2 KiB of each message is where the fields are) */
                c[at] ^= (uint8_t)(1u << (pt_rand(&seed) % 8));
            }
            int rc = open_decode_all(c, b.n, "m.arrow");
            if (rc) CHECK(is_arrow_error(rc) || rc == PAGEIN_E_CHANGED);
        }
        free(c);
        free(b.p);
    }
    return PASS;
}

/* Finds the file offset of column col's buffer k in batch bi (white-box). */
static int64_t buf_pos(const struct pi_arrow *a, const uint8_t *p, size_t bi, const char *col, uint32_t k) {
    const struct pi_arrow_batch_ref *r = &a->batches[bi];
    const struct pi_arrow_field *f = &a->schema.fields[pi_arrow_column(a, col, strlen(col))];
    struct pi_fb fb = {p + r->offset + 8, (uint32_t)pi_fb_ld32(p + r->offset + 4)};
    struct pi_fbt root, rb;
    uint32_t d, nb;
    if (pi_fb_root(&fb, &root) || pi_fb_table(&root, 2, &rb) != 1 || pi_fb_vector(&rb, 2, 16, &d, &nb) != 1) return -1;
    int64_t off = pi_fb_ld64(fb.p + d + 16ull * (f->buf + k));
    return (int64_t)(r->offset + r->meta_len) + off;
}

TEST(arrow_bad_offsets_and_bombs) {
    NEED_FIXTURES();
    NEED_CODECS();
    struct blob b = load(fx("types.stream.arrow"));
    struct pi_arrow a;
    CHECK_OK(pi_arrow_open_mem(&a, "t.arrow", b.p, b.n));
    /* column s, batch 2: offsets buffer (buffer 1); make offset 3 < offset 2 */
    int64_t at = buf_pos(&a, b.p, 2, "s", 1);
    CHECK(at > 0);
    uint8_t *c = malloc(b.n);
    memcpy(c, b.p, b.n);
    int32_t o2;
    memcpy(&o2, c + at + 8, 4);
    int32_t bad = o2 - 1;
    memcpy(c + at + 12, &bad, 4);
    const struct pi_arrow_batch_ref *r = &a.batches[2];
    struct pi_arrow_batch bt;
    CHECK_EQ(pi_arrow_decode(&a, 2, c + r->offset, r->meta_len + r->body_len, NULL, 0, &bt), PI_ARROW_E_FORMAT);
    printf("    (detail: %s)\n", pagein_last_error_detail());
    CHECK(strstr(pagein_last_error_detail(), "t.arrow: batch 2: field 's': offset 3") == pagein_last_error_detail());
    /* the last offset past the data */
    memcpy(c, b.p, b.n);
    int32_t huge = 1 << 30;
    memcpy(c + at + 4 * 9, &huge, 4);
    CHECK_EQ(pi_arrow_decode(&a, 2, c + r->offset, r->meta_len + r->body_len, NULL, 0, &bt), PI_ARROW_E_FORMAT);
    CHECK(strstr(pagein_last_error_detail(), "field 's'") != NULL);
    /* a selected column is all that is checked: the others still decode */
    uint32_t only = (uint32_t)pi_arrow_column(&a, "i8", 2);
    CHECK_OK(pi_arrow_decode(&a, 2, c + r->offset, r->meta_len + r->body_len, &only, 1, &bt));
    pi_arrow_batch_free(&bt);
    free(c);
    pi_arrow_close(&a);
    free(b.p);

    /* zstd: a declared length past the batch budget is refused before any
     * allocation; one smaller than the frame is refused without writing past it */
    b = load(fx("types.zstd.stream.arrow"));
    CHECK_OK(pi_arrow_open_mem(&a, "z.arrow", b.p, b.n));
    c = malloc(b.n);
    r = &a.batches[4];
    int64_t li = -1;
    for (uint32_t k = 0; k < 3 && li < 0; k++) { /* find a compressed buffer of column s */
        int64_t p = buf_pos(&a, b.p, 4, "s", k);
        if (p > 0 && pi_fb_ld64(b.p + p) > 0) li = p;
    }
    CHECK(li > 0);
    if (li > 0) {
        int64_t declared = pi_fb_ld64(b.p + li);
        memcpy(c, b.p, b.n);
        int64_t big = (int64_t)1 << 40;
        memcpy(c + li, &big, 8);
        CHECK_EQ(pi_arrow_decode(&a, 4, c + r->offset, r->meta_len + r->body_len, NULL, 0, &bt), PAGEIN_E_LIMIT);
        CHECK(strstr(pagein_last_error_detail(), "field 's'") != NULL);
        int64_t small = declared - 1;
        memcpy(c + li, &small, 8);
        CHECK_EQ(pi_arrow_decode(&a, 4, c + r->offset, r->meta_len + r->body_len, NULL, 0, &bt), PI_ARROW_E_FORMAT);
        printf("    (detail: %s)\n", pagein_last_error_detail());
        CHECK(strstr(pagein_last_error_detail(), "zstd") != NULL);
        int64_t more = declared + 1;
        memcpy(c + li, &more, 8);
        CHECK_EQ(pi_arrow_decode(&a, 4, c + r->offset, r->meta_len + r->body_len, NULL, 0, &bt), PI_ARROW_E_FORMAT);
        /* and the budget itself */
        a.max_batch_bytes = 100;
        CHECK_EQ(pi_arrow_decode(&a, 4, b.p + r->offset, r->meta_len + r->body_len, NULL, 0, &bt), PAGEIN_E_LIMIT);
    }
    free(c);
    pi_arrow_close(&a);
    free(b.p);
    return PASS;
}

/* Streams without a continuation marker (Arrow < 0.15): the same messages
 * with the 4-byte length alone are read. */
TEST(arrow_legacy_prefix) {
    NEED_FIXTURES();
    struct blob b = load(fx("ds/data-00001-of-00002.arrow"));
    uint8_t *c = malloc(b.n);
    size_t in = 0, out = 0;
    while (in + 8 <= b.n && pi_fb_ld32(b.p + in) == 0xFFFFFFFFu) {
        uint32_t ml = pi_fb_ld32(b.p + in + 4);
        if (ml == 0) {
            memset(c + out, 0, 4);
            out += 4;
            break;
        }
        struct pi_fb fb = {b.p + in + 8, ml};
        struct pi_fbt root;
        int64_t body = 0;
        CHECK_OK(pi_fb_root(&fb, &root));
        pi_fb_i64(&root, 3, 0, &body);
        memcpy(c + out, b.p + in + 4, 4 + ml + (size_t)body);
        out += 4 + ml + (size_t)body;
        in += 8 + ml + (size_t)body;
    }
    struct pi_arrow a;
    CHECK_OK(pi_arrow_open_mem(&a, "legacy", c, out));
    CHECK_EQ(a.nbatches, 2);
    CHECK_EQ(a.nrows, 12);
    CHECK_OK(open_decode_all(c, out, "legacy"));
    pi_arrow_close(&a);
    free(c);
    free(b.p);
    return PASS;
}

/* ---- the dataset-format row (ds_arrow.c) through the public API ---------- */
/* Renders a pipe field the way gen.mjs writes values (arrays nested by
 * their shape). */
static void render_elems(struct pi_buf *o, const pagein_field *f, unsigned d, uint64_t *at) {
    char t[64];
    if (d < f->ndim) {
        put(o, "[");
        for (uint64_t i = 0; i < f->shape[d]; i++) {
            if (i) put(o, ",");
            render_elems(o, f, d + 1, at);
        }
        put(o, "]");
        return;
    }
    const uint8_t *p = (const uint8_t *)f->data + (*at)++ * f->width;
    if (f->type == PAGEIN_FIELD_INT || f->type == PAGEIN_FIELD_UINT) {
        int64_t v = 0;
        memcpy(&v, p, f->width);
        if (f->type == PAGEIN_FIELD_INT && f->width < 8 && (v >> (f->width * 8 - 1)) & 1)
            v |= (int64_t)(~0ull << (f->width * 8));
        snprintf(t, sizeof t, f->type == PAGEIN_FIELD_INT ? "%lld" : "%llu", (long long)v);
        put(o, t);
    } else if (f->type == PAGEIN_FIELD_BOOL) {
        put(o, p[0] ? "true" : "false");
    } else if (f->type == PAGEIN_FIELD_FLOAT && f->width == 8) {
        double x;
        memcpy(&x, p, 8);
        put_double(o, x);
    } else if (f->type == PAGEIN_FIELD_FLOAT && f->width == 4) {
        float x;
        memcpy(&x, p, 4);
        put_double(o, x);
    } else {
        put(o, "?");
    }
}

static void render_field(struct pi_buf *o, const pagein_field *f) {
    if (f->null) {
        put(o, "null");
        return;
    }
    if (f->type == PAGEIN_FIELD_UTF8 || f->type == PAGEIN_FIELD_BINARY) {
        put(o, f->type == PAGEIN_FIELD_UTF8 ? "s:" : "b:");
        put_hex(o, f->data, f->nbytes);
        return;
    }
    uint64_t at = 0, n = 1;
    for (unsigned d = 0; d < f->ndim; d++) n *= f->shape[d];
    CHECK_EQ(f->nbytes, n * f->width);
    render_elems(o, f, 0, &at);
}

/* A save_to_disk directory opens as one dataset: every sample of every
 * order, over ranks and workers, with the writer's values. */
TEST(arrow_row_save_to_disk) {
    NEED_FIXTURES();
    struct expect e;
    CHECK(load_expect(fx("ds.expected.tsv"), 1, &e) == 0);
    /* expected text per (sample, column): lines are in file, batch, column, row order */
    char *want[35][3] = {{0}};
    {
        unsigned base = 0, fbase = 0;
        const char *file = "";
        unsigned lastb = ~0u, maxrow = 0;
        for (size_t i = 0; i < e.n; i++) {
            const struct cell *c = &e.c[i];
            if (strcmp(c->file, file) != 0 || c->batch != lastb) {
                if (strcmp(c->file, file) != 0) fbase = 0;
                base += maxrow;
                maxrow = 0;
                file = c->file;
                lastb = c->batch;
                (void)fbase;
            }
            if (c->row + 1 > maxrow) maxrow = c->row + 1;
            int k = !strcmp(c->col, "text") ? 0 : !strcmp(c->col, "input_ids") ? 1 : 2;
            if (base + c->row < 35) want[base + c->row][k] = c->val;
        }
    }
    pagein_dataset *d = NULL;
    CHECK_OK(pagein_dataset_open(&d, fx("ds"), NULL));
    if (!d) {
        free_expect(&e);
        return FAIL;
    }
    CHECK_EQ(pagein_dataset_count(d), 35);
    CHECK_EQ(pagein_dataset_group_count(d), 5);
    CHECK_STR(pagein_dataset_format(d, 0), "arrow");
    static const pagein_order orders[] = {PAGEIN_ORDER_NONE, PAGEIN_ORDER_BLOCK, PAGEIN_ORDER_GLOBAL};
    struct pi_buf o = {0};
    for (size_t oi = 0; oi < 3; oi++) {
        int seen[35] = {0};
        for (uint32_t rank = 0; rank < 2; rank++)
            for (uint32_t w = 0; w < 2; w++) {
                pagein_pipe_opts po = PAGEIN_PIPE_OPTS_INIT;
                po.order = orders[oi];
                po.seed = 7;
                po.rank = rank;
                po.world_size = 2;
                po.worker = w;
                po.num_workers = 2;
                po.window = 2;
                pagein_pipe *p = NULL;
                CHECK_OK(pagein_pipe_open(&p, d, &po));
                if (!p) continue;
                pagein_item it;
                int rc;
                while ((rc = pagein_pipe_next(p, &it)) == 1) {
                    CHECK(it.id < 35);
                    if (it.id >= 35) break;
                    seen[it.id]++;
                    CHECK_EQ(it.nfields, 3);
                    for (size_t k = 0; k < it.nfields && k < 3; k++) {
                        o.n = 0;
                        render_field(&o, &it.fields[k]);
                        pi_buf_put(&o, "", 0);
                        if (!want[it.id][k] || strcmp(o.p, want[it.id][k]) != 0) {
                            printf("    order %s sample %llu field %s: got %s want %s\n", pagein_order_name(orders[oi]),
                                   (unsigned long long)it.id, it.fields[k].name, o.p,
                                   want[it.id][k] ? want[it.id][k] : "?");
                            pt_failed = 1;
                        }
                    }
                }
                CHECK_OK(rc);
                pagein_pipe_close(p);
            }
        for (int i = 0; i < 35; i++) CHECK_EQ(seen[i], 1);
    }
    pi_buf_free(&o);
    pagein_dataset_close(d);
    /* columns=: only input_ids, and fewer bytes fetched */
    const char *cols[] = {"input_ids"};
    pagein_dataset_opts dopt = PAGEIN_DATASET_OPTS_INIT;
    dopt.columns = cols;
    dopt.ncolumns = 1;
    uint64_t bytes[2] = {0, 0};
    for (int pass = 0; pass < 2; pass++) {
        CHECK_OK(pagein_dataset_open(&d, fx("ds"), pass ? &dopt : NULL));
        pagein_pipe_opts po = PAGEIN_PIPE_OPTS_INIT;
        pagein_pipe *p = NULL;
        CHECK_OK(pagein_pipe_open(&p, d, &po));
        pagein_item it;
        uint64_t n = 0;
        while (p && pagein_pipe_next(p, &it) == 1) {
            n++;
            if (pass) CHECK(it.nfields == 1 && !strcmp(it.fields[0].name, "input_ids"));
        }
        CHECK_EQ(n, 35);
        pagein_pipe_stats st;
        if (p) pagein_pipe_get_stats(p, &st), bytes[pass] = st.bytes_read;
        pagein_pipe_close(p);
        pagein_dataset_close(d);
        d = NULL;
    }
    CHECK(bytes[1] > 0 && bytes[1] < bytes[0]);
    /* an unknown column */
    const char *nope[] = {"nope"};
    dopt.columns = nope;
    CHECK_EQ(pagein_dataset_open(&d, fx("ds"), &dopt), PAGEIN_E_NOT_FOUND);
    CHECK(strstr(pagein_last_error_detail(), "nope") != NULL);
    free_expect(&e);
    return PASS;
}

/* The types file through the row: every column opens (a list of strings
 * is a nested LIST value); selected columns read, a struct as one STRUCT
 * value whose members are its children. */
TEST(arrow_row_types) {
    NEED_FIXTURES();
    NEED_CODECS();
    pagein_dataset *d = NULL;
    CHECK_OK(pagein_dataset_open(&d, fx("types.zstd.file.arrow"), NULL));
    pagein_dataset_close(d);
    d = NULL;
    const char *cols[] = {"i8", "u64", "f64", "b", "s", "bin", "ll", "st", "n", "emb", "boxes"};
    pagein_dataset_opts o = PAGEIN_DATASET_OPTS_INIT;
    o.columns = cols;
    o.ncolumns = PI_ARRAY_LEN(cols);
    struct expect e;
    CHECK(load_expect(fx("types.expected.tsv"), 0, &e) == 0);
    static const char *const files[] = {"types.stream.arrow", "types.lz4.file.arrow", "types.zstd.stream.arrow"};
    for (size_t fi = 0; fi < 3; fi++) {
        CHECK_OK(pagein_dataset_open(&d, fx(files[fi]), &o));
        if (!d) continue;
        CHECK_EQ(pagein_dataset_count(d), 169);
        pagein_pipe_opts po = PAGEIN_PIPE_OPTS_INIT;
        po.order = PAGEIN_ORDER_NONE;
        pagein_pipe *p = NULL;
        CHECK_OK(pagein_pipe_open(&p, d, &po));
        pagein_item it;
        struct pi_buf ob = {0};
        size_t checked = 0;
        uint64_t starts[] = {0, 5, 6, 15, 19, 169};
        while (p && pagein_pipe_next(p, &it) == 1) {
            unsigned b = 0;
            while (it.id >= starts[b + 1]) b++;
            unsigned row = (unsigned)(it.id - starts[b]);
            CHECK_EQ(it.nfields, 11); /* st is one value */
            for (size_t k = 0; k < it.nfields; k++) {
                const pagein_field *f = &it.fields[k];
                if (f->type == PAGEIN_FIELD_STRUCT || f->type == PAGEIN_FIELD_NULL) {
                    if (!strcmp(f->name, "n")) CHECK(f->null);
                    continue; /* the struct's text is checked as a whole by arrow_types_every_cell */
                }
                for (size_t i = 0; i < e.n; i++) {
                    const struct cell *c = &e.c[i];
                    if (c->batch != b || c->row != row || strcmp(c->col, f->name) != 0) continue;
                    ob.n = 0;
                    render_field(&ob, f);
                    pi_buf_put(&ob, "", 0);
                    if (strcmp(ob.p, c->val) != 0) {
                        printf("    %s sample %llu %s: got %s want %s\n", files[fi], (unsigned long long)it.id, f->name,
                               ob.p, c->val);
                        pt_failed = 1;
                    }
                    checked++;
                    break;
                }
            }
            /* st's member a: null when st is null or a is */
            const pagein_field *st = &it.fields[7], *sa = st;
            CHECK_STR(st->name, "st");
            CHECK_EQ(st->type, PAGEIN_FIELD_STRUCT);
            int st_null = (it.id % 5 == 4), a_null = (it.id % 3 == 2);
            CHECK_EQ(st->null, st_null);
            if (!st->null && st->nchild >= 1 && st->child < it.nnodes) {
                sa = &it.fields[st->child];
                CHECK_STR(sa->name, "a");
            }
            CHECK_EQ(sa->null, st_null || a_null);
            if (!sa->null) {
                int32_t v;
                memcpy(&v, sa->data, 4);
                CHECK_EQ(v, (int64_t)it.id - 50);
            }
        }
        CHECK_EQ(checked, 169 * 9);
        pi_buf_free(&ob);
        pagein_pipe_close(p);
        pagein_dataset_close(d);
        d = NULL;
    }
    free_expect(&e);
    return PASS;
}

/* ---- hand-built flatbuffers: shared tables --------------------------------- */
static void w16(uint8_t *b, size_t at, uint16_t v) { memcpy(b + at, &v, 2); }
static void w32(uint8_t *b, size_t at, uint32_t v) { memcpy(b + at, &v, 4); }

/* A stream whose Schema's fields form a DAG: `depth` levels, each a vector
 * of k entries all pointing at one Struct field whose children vector is the
 * next level (flatbuffers' offsets only point forward, so shared tables, not
 * cycles): k^depth fields if walked, in a few hundred bytes. The last level
 * is a Struct without children. Returns the stream's length. */
static size_t dag_stream(uint8_t *s, uint32_t k, uint32_t depth) {
    uint8_t *b = s + 8; /* after the prefix */
    memset(s, 0, 8192);
    size_t vt_msg = 8, t_msg = 20, vt_sch = 44, t_sch = 52, pos = 60;
    w32(b, 0, (uint32_t)t_msg);
    uint16_t vm[] = {12, 24, 4, 6, 8, 16};
    for (int i = 0; i < 6; i++) w16(b, vt_msg + 2 * i, vm[i]);
    w32(b, t_msg, (uint32_t)(t_msg - vt_msg));
    w16(b, t_msg + 4, 4);  /* V5 */
    b[t_msg + 6] = 1;      /* Schema */
    w32(b, t_msg + 8, (uint32_t)(t_sch - (t_msg + 8)));
    uint16_t vs[] = {8, 8, 0, 4};
    for (int i = 0; i < 4; i++) w16(b, vt_sch + 2 * i, vs[i]);
    w32(b, t_sch, (uint32_t)(t_sch - vt_sch));
    w32(b, t_sch + 4, (uint32_t)(pos - (t_sch + 4)));
    for (uint32_t d = 0; d < depth; d++) {
        size_t v_f = pos, vt_f = v_f + 4 + 4 * (size_t)k, t_f = vt_f + 16, vt_st = t_f + 16, t_st = vt_st + 4;
        pos = t_st + 4;
        w32(b, v_f, k);
        for (uint32_t i = 0; i < k; i++) w32(b, v_f + 4 + 4 * i, (uint32_t)(t_f - (v_f + 4 + 4 * i)));
        uint16_t vf[] = {16, 16, 0, 0, 4, 8, 0, (uint16_t)(d + 1 < depth ? 12 : 0)};
        for (int i = 0; i < 8; i++) w16(b, vt_f + 2 * i, vf[i]);
        w32(b, t_f, (uint32_t)(t_f - vt_f));
        b[t_f + 4] = 13; /* Struct_ */
        w32(b, t_f + 8, (uint32_t)(t_st - (t_f + 8)));
        w32(b, t_f + 12, (uint32_t)(pos - (t_f + 12))); /* children: the next level's vector */
        w16(b, vt_st, 4);
        w16(b, vt_st + 2, 4);
        w32(b, t_st, (uint32_t)(t_st - vt_st));
    }
    size_t end = pos;
    w32(s, 0, 0xFFFFFFFFu);
    w32(s, 4, (uint32_t)end);
    w32(s, 8 + end, 0xFFFFFFFFu); /* end of stream */
    w32(s, 12 + end, 0);
    return 16 + end;
}

/* Shared tables cannot make the schema walk exponential: the fields
 * walked are bounded by the metadata's size, and the error says so. */
TEST(arrow_schema_dag_bounded) {
    static uint8_t s[8192];
    struct pi_arrow a;
    /* 2 levels of 3: 3 + 9 fields, a valid schema */
    size_t n = dag_stream(s, 3, 2);
    CHECK_OK(pi_arrow_open_mem(&a, "dag.arrow", s, n));
    CHECK_EQ(a.schema.nfields, 3);
    CHECK_EQ(a.schema.nnodes, 12);
    CHECK_EQ(a.schema.fields[2].nchildren, 3);
    CHECK_EQ(a.nbatches, 0);
    pi_arrow_close(&a);
    /* 16 levels of 16: 16^16 fields in about 1.5 KB, and 40 levels of 2 */
    static const uint32_t kd[][2] = {{16, 16}, {2, 40}, {64, 8}};
    for (size_t i = 0; i < 3; i++) {
        n = dag_stream(s, kd[i][0], kd[i][1]);
        CHECK(n < 8192);
        CHECK_EQ(pi_arrow_open_mem(&a, "dag.arrow", s, n), PAGEIN_E_LIMIT);
        CHECK(strstr(pagein_last_error_detail(), "dag.arrow: message 0 at byte 0") == pagein_last_error_detail());
        if (i == 0) printf("    (detail: %s)\n", pagein_last_error_detail());
    }
    return PASS;
}
