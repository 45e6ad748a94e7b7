/* test_dcp.c - torch Distributed Checkpoints: the .metadata parser on
 * checkpoints torch 1.13's own writer produced (tests/data/dcp/gen.py), the
 * torch 2.x layout, and the malformed variants derived from them. */
#include "test.h"
#include "dcp_testutil.h"
#include "../src/format/dcp.h"

#include <stdlib.h>
#include <unistd.h>

#define FX "tests/data/dcp/"

static int parse_file(const char *path, struct pi_dcp_meta *m) {
    size_t len;
    uint8_t *buf = pt_read_file(path, &len);
    if (!buf) return -ENOENT;
    pi_dcp_meta_init(m);
    int rc = pi_dcp_meta_parse(buf, len, path, m);
    free(buf);
    return rc;
}

static const struct pi_dcp_item *item(const struct pi_dcp_meta *m, const char *name) {
    return pi_dcp_meta_find(m, name, strlen(name));
}

static void check_rank4(const struct pi_dcp_meta *m) {
    CHECK_EQ(m->n, 11);
    CHECK_EQ(m->nfiles, 4);
    const struct pi_dcp_item *r = item(m, "rows.weight"), *c = item(m, "cols.weight"), *b = item(m, "blocks");
    CHECK(r && c && b);
    if (!r || !c || !b) return;
    CHECK_EQ(r->dtype, PAGEIN_DTYPE_F32);
    CHECK_EQ(c->dtype, PAGEIN_DTYPE_BF16);
    CHECK_EQ(b->dtype, PAGEIN_DTYPE_F16);
    CHECK_EQ(r->ndim, 2);
    CHECK_EQ(r->size[0], 10);
    CHECK_EQ(r->size[1], 6);
    CHECK_EQ(r->nchunks, 4);
    CHECK_EQ(r->chunks[3].off[0], 9);
    CHECK_EQ(r->chunks[3].len[0], 1);
    CHECK_EQ(c->chunks[1].off[1], 3);
    CHECK_EQ(b->nchunks, 4);
    CHECK_STR(m->files[r->chunks[1].file], "__1_0.distcp");
    const struct pi_dcp_item *s = item(m, "step"), *sc = item(m, "scalar"), *fl = item(m, "flags");
    CHECK(s && s->is_bytes && s->nchunks == 1 && s->chunks[0].nbytes > 0);
    CHECK(sc && sc->ndim == 0 && sc->nelements == 1 && sc->dtype == PAGEIN_DTYPE_F64);
    CHECK(fl && fl->dtype == PAGEIN_DTYPE_BOOL);
    CHECK(item(m, "small") && item(m, "small")->dtype == PAGEIN_DTYPE_I8);
    CHECK(!item(m, "nosuch"));
}

TEST(dcp_meta_rank4) {
    struct pi_dcp_meta m;
    CHECK_OK(parse_file(FX "rank4/.metadata", &m));
    CHECK_EQ(m.generation, 1);
    check_rank4(&m);
    uint64_t sizes[4] = {0};
    for (size_t i = 0; i < m.nfiles && i < 4; i++) {
        char p[256];
        size_t len = 0;
        snprintf(p, sizeof p, FX "rank4/%s", m.files[i]);
        free(pt_read_file(p, &len));
        sizes[i] = len;
    }
    CHECK_OK(pi_dcp_meta_check_files(&m, "rank4", sizes));
    sizes[0] -= 1;
    CHECK_EQ(pi_dcp_meta_check_files(&m, "rank4", sizes), PAGEIN_E_BAD_OFFSET);
    CHECK(strstr(pagein_last_error_detail(), "__0_0.distcp"));
    pi_dcp_meta_free(&m);
    return PASS;
}

TEST(dcp_meta_rank2_and_v2) {
    struct pi_dcp_meta m;
    CHECK_OK(parse_file(FX "rank2/.metadata", &m));
    CHECK_EQ(m.n, 4);
    CHECK_EQ(m.nfiles, 6); /* one file per item */
    pi_dcp_meta_free(&m);
    CHECK_OK(parse_file(FX "v2/.metadata", &m));
    CHECK_EQ(m.generation, 2);
    check_rank4(&m);
    pi_dcp_meta_free(&m);
    return PASS;
}

/* Each malformed variant: its code and words of its message (the key and
 * the reason). */
TEST(dcp_meta_malformed) {
    static const struct {
        const char *name;
        int code;
        const char *words[2];
    } cases[] = {
        {"gap", PAGEIN_E_BAD_OFFSET, {"'rows.weight'", "gap of 6 elements"}},
        {"overlap", PAGEIN_E_BAD_OFFSET, {"'rows.weight'", "overlap"}},
        {"outside", PAGEIN_E_BAD_OFFSET, {"'rows.weight'", "outside the tensor"}},
        {"path_slash", PAGEIN_E_BAD_INDEX, {"'rows.weight'", "sub/__1_0.distcp"}},
        {"path_dotdot", PAGEIN_E_BAD_INDEX, {"'rows.weight'", "'..'"}},
        {"path_nul", PAGEIN_E_BAD_INDEX, {"'rows.weight'", "plain file name"}},
        {"no_storage", PAGEIN_E_BAD_INDEX, {"'cols.weight'", "no storage entry"}},
        {"orphan_storage", PAGEIN_E_BAD_INDEX, {"'nosuch'", "does not list"}},
        {"sparse", PAGEIN_E_UNSUPPORTED, {"'counts'", "sparse_coo"}},
        {"evil", PAGEIN_E_UNSAFE, {"posix.system", "bad/evil.metadata"}},
        {"bad_hint", PAGEIN_E_BAD_INDEX, {"'rows.weight'", "(4, 0)"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char p[256];
        snprintf(p, sizeof p, FX "bad/%s.metadata", cases[i].name);
        struct pi_dcp_meta m;
        int rc = parse_file(p, &m);
        const char *words[] = {cases[i].words[0], cases[i].words[1], p, NULL};
        dcp_check_refusal(cases[i].name, rc, cases[i].code, words);
        pi_dcp_meta_free(&m);
    }
    return PASS;
}

/* Every prefix and a sweep of single-byte changes of a real .metadata:
 * an error or a consistent result, never a crash (ASan/UBSan in make test). */
TEST(dcp_meta_mutations) {
    size_t len;
    uint8_t *orig = pt_read_file(FX "rank4/.metadata", &len);
    CHECK(orig);
    if (!orig) return FAIL;
    uint8_t *buf = malloc(len);
    for (size_t cut = 0; cut < len; cut += 7) {
        struct pi_dcp_meta m;
        pi_dcp_meta_init(&m);
        CHECK(pi_dcp_meta_parse(orig, cut, "cut", &m) < 0);
        pi_dcp_meta_free(&m);
    }
    uint64_t seed = pt_seed();
    for (int k = 0; k < 3000; k++) {
        memcpy(buf, orig, len);
        size_t at = (size_t)(pt_rand(&seed) % len);
        buf[at] = (uint8_t)pt_rand(&seed);
        struct pi_dcp_meta m;
        pi_dcp_meta_init(&m);
        if (pi_dcp_meta_parse(buf, len, "mut", &m) == 0) {
            for (size_t i = 0; i < m.n; i++)
                for (uint32_t j = 0; j < m.items[i].nchunks; j++) CHECK(m.items[i].chunks[j].file < m.nfiles);
        }
        pi_dcp_meta_free(&m);
    }
    free(buf);
    free(orig);
    return PASS;
}

/* The torch-mode allowlist is unchanged: a DCP class inside a data.pkl is
 * refused there (only the DCP mode takes it). */
TEST(dcp_meta_torch_mode_unchanged) {
    static const uint8_t pkl[] = "\x80\x02" "ctorch.distributed._shard.checkpoint.metadata\nMetadata\n.";
    pagein_file *f = NULL;
    /* through the public torch reader: a zip with this data.pkl is built by
     * tests/test_torch.c's helpers; here the unpickler's own mode flag is
     * enough: parse as DCP metadata succeeds past the global, as torch not */
    struct pi_dcp_meta m;
    pi_dcp_meta_init(&m);
    int rc = pi_dcp_meta_parse(pkl, sizeof pkl - 1, "x", &m);
    CHECK_EQ(rc, PAGEIN_E_BAD_INDEX); /* a class, not a Metadata object */
    pi_dcp_meta_free(&m);
    (void)f;
    return PASS;
}

/* ---- the checkpoint opened whole: items, assembly, slices, convert ---- */


static double elem(pagein_dtype dt, const uint8_t *p) {
    switch (dt) {
    case PAGEIN_DTYPE_F32: { float f; memcpy(&f, p, 4); return f; }
    case PAGEIN_DTYPE_F64: { double f; memcpy(&f, p, 8); return f; }
    case PAGEIN_DTYPE_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case PAGEIN_DTYPE_I8: return (int8_t)p[0];
    case PAGEIN_DTYPE_BOOL: return p[0];
    case PAGEIN_DTYPE_BF16: { uint32_t u = (uint32_t)(p[0] | p[1] << 8) << 16; float f; memcpy(&f, &u, 4); return f; }
    case PAGEIN_DTYPE_F16: {
        uint16_t h = (uint16_t)(p[0] | p[1] << 8);
        int e = (h >> 10) & 31, m = h & 1023;
        double v = e ? (1 + m / 1024.0) * (double)(1 << e) / 32768.0 : m / 16777216.0;
        return h & 0x8000 ? -v : v;
    }
    default: return -1e300;
    }
}

/* gen.py's values: element k is k % 251 (bool: k % 3 == 0); "transposed"
 * is arange(15).reshape(3, 5).t(); "scalar" 2.5. */
static double expect(const char *name, uint64_t k) {
    if (!strcmp(name, "flags")) return k % 3 == 0;
    if (!strcmp(name, "scalar")) return 2.5;
    if (!strcmp(name, "transposed")) return (double)((k % 3) * 5 + k / 3);
    return (double)(k % 251);
}

static int check_all_items(const char *dir) {
    pagein_dcp *d;
    int rc = pagein_dcp_open(&d, dir);
    CHECK_OK(rc);
    if (rc) return FAIL;
    size_t tensors = 0;
    for (size_t i = 0; i < pagein_dcp_item_count(d); i++) {
        pagein_dcp_item_info in;
        CHECK_OK(pagein_dcp_item(d, i, &in));
        uint8_t *buf = malloc(in.nbytes + 1);
        CHECK_OK(pagein_dcp_read(d, i, buf, in.nbytes));
        if (in.is_bytes) {
            CHECK(in.nbytes > 4 && !memcmp(buf, "PK\x03\x04", 4)); /* torch.save of the object */
        } else {
            tensors++;
            uint32_t es = pagein_dtype_get(in.dtype)->bits / 8;
            for (uint64_t k = 0; k < in.nbytes / es; k++)
                if (elem(in.dtype, buf + k * es) != expect(in.name, k)) {
                    printf("    %s: %s[%llu] = %g, expected %g\n", dir, in.name, (unsigned long long)k,
                           elem(in.dtype, buf + k * es), expect(in.name, k));
                    pt_failed = 1;
                    break;
                }
        }
        free(buf);
    }
    CHECK(tensors >= 3);
    pagein_dcp_close(d);
    return PASS;
}

TEST(dcp_read_assembled) {
    CHECK(pagein_is_dcp_dir(FX "rank4"));
    CHECK(!pagein_is_dcp_dir(FX "bad"));
    check_all_items(FX "rank4");
    check_all_items(FX "rank2");
    check_all_items(FX "v2");
    return PASS;
}

struct dcp_at {
    pagein_dcp *d;
    size_t i;
};
static int dcp_slice(void *ctx, const uint64_t *start, const uint64_t *count, void *out, size_t cap) {
    struct dcp_at *a = ctx;
    return pagein_dcp_read_slice(a->d, a->i, start, count, out, cap);
}

/* A slice across chunk boundaries in both dimensions of the block-sharded
 * tensor equals the same box of the whole. */
TEST(dcp_read_slice) {
    pagein_dcp *d;
    CHECK_OK(pagein_dcp_open(&d, FX "rank4"));
    int i = pagein_dcp_find(d, "blocks");
    CHECK(i >= 0);
    uint64_t start[2] = {2, 3}, count[2] = {3, 3};
    uint16_t box[9], whole[48];
    CHECK_OK(pagein_dcp_read_slice(d, (size_t)i, start, count, box, sizeof box));
    CHECK_OK(pagein_dcp_read(d, (size_t)i, whole, sizeof whole));
    /* every element again, through the headers parsed by the reads above */
    struct dcp_at at = {d, (size_t)i};
    dcp_check_blocks_box(dcp_slice, &at, box, whole);
    uint64_t bad[2] = {5, 7}, two[2] = {2, 2};
    CHECK_EQ(pagein_dcp_read_slice(d, (size_t)i, bad, two, box, sizeof box), PAGEIN_E_RANGE);
    CHECK_EQ(pagein_dcp_find(d, "nosuch"), PAGEIN_E_NOT_FOUND);
    pagein_dcp_close(d);
    return PASS;
}

/* Many requests (every item whole, a box across chunks, single elements)
 * in one engine run equal the reads one by one. */
TEST(dcp_read_many) {
    pagein_dcp *d, *d2;
    CHECK_OK(pagein_dcp_open(&d, FX "rank4"));
    CHECK_OK(pagein_dcp_open(&d2, FX "rank4"));
    size_t n = pagein_dcp_item_count(d), nr = 0;
    int bi = pagein_dcp_find(d, "blocks");
    CHECK(bi >= 0 && n > 0 && n < 64);
    pagein_dcp_request rq[80];
    uint8_t *got[80] = {0};
    uint64_t need = 0;
    for (size_t i = 0; i < n; i++) {
        pagein_dcp_item_info in;
        CHECK_OK(pagein_dcp_item(d, i, &in));
        got[nr] = calloc(1, in.nbytes + 1);
        rq[nr] = (pagein_dcp_request){i, NULL, NULL, got[nr], (size_t)in.nbytes};
        nr++;
        need += in.nbytes;
    }
    uint64_t start[2] = {2, 3}, count[2] = {3, 3}, at[8][2], one[2] = {1, 1};
    got[nr] = calloc(1, 18);
    rq[nr] = (pagein_dcp_request){(size_t)bi, start, count, got[nr], 18};
    nr++;
    for (int k = 0; k < 8; k++) {
        at[k][0] = (uint64_t)k % 6, at[k][1] = (uint64_t)(k * 3) % 8;
        got[nr] = calloc(1, 2);
        rq[nr] = (pagein_dcp_request){(size_t)bi, at[k], one, got[nr], 2};
        nr++;
    }
    need += 18 + 16;
    pagein_dcp_read_stats st;
    CHECK_OK(pagein_dcp_read_many(d, rq, nr, &st));
    CHECK_EQ(st.runs, 1);
    CHECK_EQ(st.bytes_needed, need);
    CHECK(st.spans >= nr && st.requests >= 1 && st.requests < st.spans);
    for (size_t i = 0; i < n; i++) {
        uint8_t *want = calloc(1, rq[i].len + 1);
        CHECK_OK(pagein_dcp_read(d2, i, want, rq[i].len));
        CHECK(!memcmp(want, got[i], rq[i].len));
        free(want);
    }
    uint16_t whole[48], box[9];
    CHECK_OK(pagein_dcp_read(d2, (size_t)bi, whole, sizeof whole));
    memcpy(box, got[n], sizeof box);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) CHECK_EQ(box[r * 3 + c], whole[(r + 2) * 8 + c + 3]);
    for (int k = 0; k < 8; k++) {
        uint16_t v;
        memcpy(&v, got[n + 1 + k], 2);
        CHECK_EQ(v, whole[at[k][0] * 8 + at[k][1]]);
    }
    /* a box outside the tensor: refused before any read */
    uint64_t bad[2] = {5, 7}, two[2] = {2, 2};
    rq[0] = (pagein_dcp_request){(size_t)bi, bad, two, box, sizeof box};
    CHECK_EQ(pagein_dcp_read_many(d, rq, 1, &st), PAGEIN_E_RANGE);
    CHECK_EQ(st.runs, 0);
    CHECK_OK(pagein_dcp_read_many(d, NULL, 0, &st));
    for (size_t k = 0; k < nr; k++) free(got[k]);
    pagein_dcp_close(d);
    pagein_dcp_close(d2);
    return PASS;
}

/* A blob past its file's end is refused at open, naming key and file. */
TEST(dcp_open_past_end) {
    const char *dir = dcp_ckpt_with("dcp_past_end", FX "bad/past_end.metadata");
    if (!dir) return FAIL;
    pagein_dcp *d = NULL;
    CHECK_EQ(pagein_dcp_open(&d, dir), PAGEIN_E_BAD_OFFSET);
    CHECK(strstr(pagein_last_error_detail(), "'blocks'") && strstr(pagein_last_error_detail(), "__3_0.distcp"));
    return PASS;
}

TEST(dcp_convert) {
    const char *out = pt_tmppath("dcp.safetensors");
    pagein_dcp_convert_stats st;
    CHECK_OK(pagein_dcp_convert_safetensors(FX "rank4", out, &st));
    CHECK_EQ(st.tensors, 9);
    CHECK_EQ(st.skipped_items, 2);
    pagein_file *f;
    CHECK_OK(pagein_open(&f, out, NULL));
    pagein_dcp *d;
    CHECK_OK(pagein_dcp_open(&d, FX "rank4"));
    CHECK_EQ(pagein_tensor_count(f), 9);
    for (size_t i = 0; i < pagein_dcp_item_count(d); i++) {
        pagein_dcp_item_info in;
        pagein_dcp_item(d, i, &in);
        if (in.is_bytes) continue;
        const pagein_tensor *t = pagein_tensor_find(f, in.name, strlen(in.name));
        CHECK(t && t->nbytes == in.nbytes && t->dtype == in.dtype);
        if (!t) continue;
        uint8_t *a = malloc(in.nbytes + 1), *b = malloc(in.nbytes + 1);
        CHECK_OK(pagein_dcp_read(d, i, a, in.nbytes));
        CHECK_OK(pagein_tensor_copy(f, t, 0, b, in.nbytes));
        CHECK(!memcmp(a, b, in.nbytes));
        free(a), free(b);
    }
    pagein_dcp_close(d);
    pagein_close(f);
    return PASS;
}

/* A file truncated after open: the read fails with an error naming the
 * key, never SIGBUS (the parse and copy run under the truncation guard). */
TEST(dcp_truncated_after_open) {
    const char *dir = dcp_ckpt_with("dcp_trunc", FX "rank4/.metadata");
    if (!dir) return FAIL;
    pagein_dcp *d;
    CHECK_OK(pagein_dcp_open(&d, dir));
    char p[1024];
    snprintf(p, sizeof p, "%s/__3_0.distcp", dir);
    CHECK_EQ(truncate(p, 100), 0);
    int i = pagein_dcp_find(d, "blocks");
    uint16_t whole[48];
    /* the fixture files are under a page: bytes past the end inside the
     * last mapped page read as zeros (no SIGBUS), so the blob is no zip */
    int rc = pagein_dcp_read(d, (size_t)i, whole, sizeof whole);
    CHECK(rc == PAGEIN_E_TRUNCATED || rc == PAGEIN_E_BAD_MAGIC);
    CHECK(strstr(pagein_last_error_detail(), "'blocks'") != NULL);
    pagein_dcp_close(d);
    return PASS;
}
