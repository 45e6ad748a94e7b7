/* test_parquet.c - the Parquet reader (src/data/parquet*.c, thrift.c).
 * White-box: includes src/data/parquet.h and src/format/format.h (JSON).
 *
 * parquet_writer_files decodes every value of files written by npm
 * parquet-wasm (the Rust parquet crate) from tables built with npm
 * apache-arrow (tests/data/parquet/gen.mjs: every codec, data page v1/v2,
 * dictionary on/off, the DELTA_* / BYTE_STREAM_SPLIT / RLE encodings, small
 * row groups and pages) and compares them with the values gen.mjs wrote as
 * JSON. The other tests build pages and footers by hand for what that
 * writer cannot produce (INT96, the legacy two-level lists, BIT_PACKED
 * levels, LZO) and for malformed input. */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "test.h"

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
    if (!c->elem_valid[i]) {
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
static void put_rows(struct sb *s, const struct pi_pq_column *c, int first) {
    for (uint64_t r = 0; r < c->nrows; r++) {
        if (!first || r) sb_str(s, ",");
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

static const char *fixtures(void) {
    static char dir[512];
    static int rc = -1;
    if (rc < 0) {
        const char *env = getenv("PAGEIN_PQ_FIXTURES");
        snprintf(dir, sizeof dir, "%s", env ? env : "build/parquet-fixtures");
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "bash tests/data/parquet/gen.sh %s > %s.why 2>&1", dir, dir);
        mkdir("build", 0755);
        int st = system(cmd);
        rc = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    }
    return rc == 0 ? dir : NULL;
}

static const char *fixture_why(void) {
    static char why[512];
    char p[600];
    const char *env = getenv("PAGEIN_PQ_FIXTURES");
    snprintf(p, sizeof p, "%s.why", env ? env : "build/parquet-fixtures");
    size_t n = 0;
    char *b = pt_read_file(p, &n);
    snprintf(why, sizeof why, "%.*s", b ? (int)PI_MIN(n, 400) : 0, b ? b : "");
    free(b);
    return why;
}

/* Decodes every column of every row group of a file and compares it with
 * expected.json; 0 when all match. */
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
    if (f->num_rows != 3000 || f->nleaves != 13) {
        printf("    %s: %lld rows, %zu leaves\n", name, (long long)f->num_rows, f->nleaves);
        bad = 1;
    }
    for (size_t col = 0; col < f->nleaves && !bad; col++) {
        const struct pi_pq_leaf *L = &f->leaves[col];
        struct sb s = {0};
        sb_str(&s, "[");
        uint64_t rows = 0;
        for (size_t g = 0; g < f->ngroups; g++) {
            uint64_t off, cl;
            pi_pq_chunk_range(f, g, col, &off, &cl);
            struct pi_pq_column c;
            rc = pi_pq_decode_chunk(f, g, col, buf + off, (size_t)cl, &c);
            if (rc < 0) {
                printf("    %s: decode: %s\n", name, pagein_last_error_detail());
                bad = 1;
                break;
            }
            put_rows(&s, &c, rows == 0);
            rows += c.nrows;
            pi_pq_column_free(&c);
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
    pi_pq_close(f);
    free(buf);
    return bad ? -1 : 0;
}

TEST(parquet_writer_files) {
    const char *dir = fixtures();
    if (!dir) SKIP_BECAUSE("no Parquet fixtures: %s", fixture_why());
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
            CHECK_EQ(groups, 31); /* 3000 rows in groups of 97 */
            CHECK(oindex);        /* page-level statistics: the page index is there */
        }
    }
    CHECK_EQ(nok, nfiles);
    CHECK(nfiles >= 33);
    free(exp);
    free(files);
    return PASS;
}
