/* test_dcp_hf.c - torch's safetensors flavour of a Distributed Checkpoint
 * (DCP_SHARDING_INFO in each rank's safetensors __metadata__): the
 * sharding-info parser, the chunk checks, open/read/convert on the fixture
 * tests/data/dcp/hf/gen.py writes (following torch's _hf_utils.py) and
 * its malformed variants. */
#include "test.h"
#include "dcp_testutil.h"
#include "../src/format/dcp_hf.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define FX "tests/data/dcp/hf/"

static int parse(const char *s, struct pi_dcp_hf_info *in) {
    memset(in, 0, sizeof *in);
    return pi_dcp_hf_info_parse(s, strlen(s), "f.safetensors", in);
}

TEST(dcp_hf_info_parse) {
    struct pi_dcp_hf_info in;
    CHECK_OK(parse("{\"b\": {\"saved_offsets\": [2, 0]}, \"a\": {\"saved_offsets\": [], \"x\": [1]}}", &in));
    CHECK_EQ(in.n, 2);
    const struct pi_dcp_hf_entry *b = pi_dcp_hf_info_find(&in, "b", 1), *a = pi_dcp_hf_info_find(&in, "a", 1);
    CHECK(a && b && !pi_dcp_hf_info_find(&in, "c", 1));
    if (a && b) {
        CHECK_EQ(b->ndim, 2);
        CHECK_EQ(b->off[0], 2);
        CHECK_EQ(a->ndim, 0);
    }
    pi_dcp_hf_info_free(&in);
    static const struct {
        const char *s;
        int rc;
        const char *msg;
    } bad[] = {
        {"{\"a\": {\"saved_offsets\": [-1]}}", PAGEIN_E_BAD_TYPE, "'a'"},
        {"{\"a\": {\"saved_offsets\": [1.5]}}", PAGEIN_E_BAD_TYPE, "'a'"},
        {"{\"a\": {}}", PAGEIN_E_BAD_INDEX, "no saved_offsets"},
        {"{\"a\": [0]}", PAGEIN_E_BAD_TYPE, "not an object"},
        {"{\"a\": {\"saved_offsets\": [0]}, \"a\": {\"saved_offsets\": [0]}}", PAGEIN_E_DUPLICATE, "twice"},
        {"{\"a\": {\"saved_offsets\": [0], \"saved_offsets\": [0]}}", PAGEIN_E_DUPLICATE, "twice"},
        {"{\"a\": {\"saved_offsets\": [99999999999999999999]}}", PAGEIN_E_OVERFLOW, "'a'"},
        {"[]", PAGEIN_E_BAD_TYPE, "not a JSON object"},
        {"{\"a\": {\"saved_offsets\": [0]}} x", PAGEIN_E_BAD_JSON, "f.safetensors"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(bad[i].s, &in);
        CHECK_EQ(rc, bad[i].rc);
        CHECK(strstr(pagein_last_error_detail(), bad[i].msg) && strstr(pagein_last_error_detail(), "f.safetensors"));
        pi_dcp_hf_info_free(&in);
    }
    /* 65 dimensions */
    char big[600] = "{\"a\": {\"saved_offsets\": [0";
    for (int i = 0; i < 64; i++) strcat(big, ",0");
    strcat(big, "]}}");
    CHECK_EQ(parse(big, &in), PAGEIN_E_LIMIT);
    pi_dcp_hf_info_free(&in);
    return PASS;
}

TEST(dcp_hf_check) {
    uint64_t o0[2] = {0, 0}, o1[2] = {0, 2}, l[2] = {3, 2}, size[PI_DCP_MAX_NDIM], ne;
    uint32_t nd;
    struct pi_dcp_hf_piece p[2] = {{"f0", PAGEIN_DTYPE_F32, 2, o0, l, NULL, 0}, {"f1", PAGEIN_DTYPE_F32, 2, o1, l, NULL, 0}};
    CHECK_OK(pi_dcp_hf_check("w", p, 2, &nd, size, &ne));
    CHECK_EQ(nd, 2);
    CHECK_EQ(size[0], 3);
    CHECK_EQ(size[1], 4);
    CHECK_EQ(ne, 12);
    uint64_t o2[2] = {0, 1};
    p[1].off = o2;
    CHECK_EQ(pi_dcp_hf_check("w", p, 2, &nd, size, &ne), PAGEIN_E_BAD_OFFSET);
    CHECK(strstr(pagein_last_error_detail(), "overlap") && strstr(pagein_last_error_detail(), "f1"));
    uint64_t o3[2] = {0, 3};
    p[1].off = o3;
    CHECK_EQ(pi_dcp_hf_check("w", p, 2, &nd, size, &ne), PAGEIN_E_BAD_OFFSET);
    CHECK(strstr(pagein_last_error_detail(), "gap of 3 elements"));
    p[1].off = o1, p[1].dtype = PAGEIN_DTYPE_BF16;
    CHECK_EQ(pi_dcp_hf_check("w", p, 2, &nd, size, &ne), PAGEIN_E_BAD_DTYPE);
    p[1].dtype = PAGEIN_DTYPE_F32, p[1].ndim = 1;
    CHECK_EQ(pi_dcp_hf_check("w", p, 2, &nd, size, &ne), PAGEIN_E_BAD_TENSOR_INFO);
    /* 0-d: one chunk is the tensor, two overlap */
    struct pi_dcp_hf_piece s[2] = {{"f0", PAGEIN_DTYPE_F64, 0, o0, l, NULL, 0}, {"f1", PAGEIN_DTYPE_F64, 0, o0, l, NULL, 0}};
    CHECK_OK(pi_dcp_hf_check("s", s, 1, &nd, size, &ne));
    CHECK_EQ(ne, 1);
    CHECK_EQ(pi_dcp_hf_check("s", s, 2, &nd, size, &ne), PAGEIN_E_BAD_OFFSET);
    return PASS;
}

/* The whole tensors, bytes equal to the script's own reconstruction. */
TEST(dcp_hf_open_read) {
    if (access(FX "ckpt", F_OK) != 0) {
        SKIP_BECAUSE("no fixture " FX "ckpt (run gen.py)");
    }
    CHECK(pagein_is_dcp_hf_dir(FX "ckpt"));
    CHECK(!pagein_is_dcp_hf_dir(FX));
    CHECK(!pagein_is_dcp_hf_dir("tests/data/dcp/rank4"));
    pagein_dcp_hf *h = NULL;
    CHECK_OK(pagein_dcp_hf_open(&h, FX "ckpt"));
    if (!h) return PASS;
    pagein_file *e = NULL;
    CHECK_OK(pagein_open(&e, FX "expected.safetensors", NULL));
    CHECK_EQ(pagein_dcp_hf_count(h), 4);
    CHECK_EQ(pagein_dcp_hf_count(h), pagein_tensor_count(e));
    static const uint32_t chunks[4] = {4, 2, 1, 4}; /* cols, emb, norm, rows */
    for (size_t i = 0; e && i < pagein_dcp_hf_count(h); i++) {
        pagein_dcp_hf_info in;
        CHECK_OK(pagein_dcp_hf_tensor(h, i, &in));
        const pagein_tensor *t = pagein_tensor_get(e, in.name);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK_EQ(in.nchunks, chunks[i]);
        CHECK_EQ(in.dtype, t->dtype);
        CHECK_EQ(in.ndim, t->ndim);
        for (uint32_t d = 0; d < in.ndim && d < t->ndim; d++) CHECK_EQ(in.shape[d], t->shape[d]);
        CHECK_EQ(in.nbytes, t->nbytes);
        uint8_t *buf = malloc(in.nbytes);
        CHECK_OK(pagein_dcp_hf_read(h, i, buf, in.nbytes));
        CHECK(!memcmp(buf, t->data, in.nbytes));
        CHECK_EQ(pagein_dcp_hf_read(h, i, buf, in.nbytes - 1), PAGEIN_E_RANGE);
        free(buf);
    }
    pagein_close(e);
    pagein_dcp_hf_close(h);
    return PASS;
}

TEST(dcp_hf_convert) {
    if (access(FX "ckpt", F_OK) != 0) {
        SKIP_BECAUSE("no fixture " FX "ckpt (run gen.py)");
    }
    char out[512], shards[512];
    snprintf(out, sizeof out, "%s/hf_out.safetensors", pt_tmpdir());
    pagein_dcp_convert_stats st;
    CHECK_OK(pagein_dcp_hf_convert(FX "ckpt", out, NULL, &st));
    CHECK_EQ(st.tensors, 4);
    CHECK_EQ(st.tensor_bytes, 310);
    CHECK_EQ(st.shards, 1);
    CHECK(dcp_same_file(out, FX "expected.safetensors")); /* byte for byte the script's own reconstruction */
    unlink(out);
    pagein_convert_opts co = PAGEIN_CONVERT_OPTS_INIT;
    co.max_shard_bytes = 100;
    snprintf(shards, sizeof shards, "%s/hfsh/model.safetensors", pt_tmpdir());
    char d[512];
    snprintf(d, sizeof d, "%s/hfsh", pt_tmpdir());
    mkdir(d, 0755);
    CHECK_OK(pagein_dcp_hf_convert(FX "ckpt", shards, &co, &st));
    CHECK_EQ(st.shards, 3);
    char idx[600];
    snprintf(idx, sizeof idx, "%s.index.json", shards);
    CHECK(access(idx, F_OK) == 0);
    co.max_shard_bytes = 0, co.dtype = PAGEIN_DTYPE_F16;
    CHECK_EQ(pagein_dcp_hf_convert(FX "ckpt", out, &co, &st), PAGEIN_E_UNSUPPORTED);
    return PASS;
}

TEST(dcp_hf_malformed) {
    if (access(FX "bad_gap", F_OK) != 0) {
        SKIP_BECAUSE("no fixture " FX "bad_* (run gen.py)");
    }
    static const struct {
        const char *dir;
        int rc;
        const char *msg[2];
    } bad[] = {
        {"bad_overlap", PAGEIN_E_BAD_OFFSET, {"'rows.weight'", "shard-00002-model-00001-of-00001.safetensors overlap"}},
        {"bad_gap", PAGEIN_E_BAD_OFFSET, {"'rows.weight'", "gap of 12 elements"}},
        {"bad_dtype", PAGEIN_E_BAD_DTYPE, {"'cols.weight'", "shard-00002"}},
        {"bad_ndim", PAGEIN_E_BAD_TENSOR_INFO, {"'rows.weight'", "shard-00002"}},
        {"bad_missing", PAGEIN_E_BAD_INDEX, {"'cols.weight'", "shard-00002"}},
        {"bad_extra", PAGEIN_E_BAD_INDEX, {"'ghost'", "shard-00002"}},
        {"bad_huge", PAGEIN_E_BAD_OFFSET, {"'rows.weight'", "overflows"}},
        {"bad_json", PAGEIN_E_BAD_JSON, {"DCP_SHARDING_INFO", "shard-00002"}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char p[256];
        snprintf(p, sizeof p, FX "%s", bad[i].dir);
        CHECK(pagein_is_dcp_hf_dir(p));
        pagein_dcp_hf *h = NULL;
        int rc = pagein_dcp_hf_open(&h, p);
        const char *words[] = {bad[i].msg[0], bad[i].msg[1], NULL};
        dcp_check_refusal(bad[i].dir, rc, bad[i].rc, words);
        CHECK(h == NULL);
        pagein_dcp_hf_close(h);
    }
    return PASS;
}

/* Hugging Face transformers' chunk layout (gen.py's fqn/): storage keys
 * chunk_N, the tensor named by each entry's "fqn" and its whole shape by
 * "shape"; several chunks of one tensor in one file. */
TEST(dcp_hf_fqn) {
    struct pi_dcp_hf_info in;
    CHECK_OK(parse("{\"chunk_0\": {\"fqn\": \"w\", \"shape\": [4, 2], \"saved_offsets\": [2, 0]}}", &in));
    CHECK_EQ(in.n, 1);
    CHECK(in.e[0].fqn && in.e[0].fqn_len == 1 && in.e[0].fqn[0] == 'w');
    CHECK(in.e[0].shape && in.e[0].shape_ndim == 2 && in.e[0].shape[0] == 4);
    pi_dcp_hf_info_free(&in);
    CHECK_EQ(parse("{\"c\": {\"fqn\": 3, \"saved_offsets\": [0]}}", &in), PAGEIN_E_BAD_TYPE);
    pi_dcp_hf_info_free(&in);
    CHECK_EQ(parse("{\"c\": {\"fqn\": \"a\", \"fqn\": \"b\", \"saved_offsets\": [0]}}", &in), PAGEIN_E_DUPLICATE);
    pi_dcp_hf_info_free(&in);
    /* a stated whole shape must be the one the chunks make */
    uint64_t o0[2] = {0, 0}, o1[2] = {2, 0}, l[2] = {2, 2}, good[2] = {4, 2}, bad[2] = {6, 2}, sz[PI_DCP_MAX_NDIM], ne;
    uint32_t nd;
    struct pi_dcp_hf_piece p[2] = {{"f0", PAGEIN_DTYPE_F32, 2, o0, l, good, 2}, {"f1", PAGEIN_DTYPE_F32, 2, o1, l, good, 2}};
    CHECK_OK(pi_dcp_hf_check("w", p, 2, &nd, sz, &ne));
    CHECK_EQ(ne, 8);
    p[1].shape = bad;
    CHECK_EQ(pi_dcp_hf_check("w", p, 2, &nd, sz, &ne), PAGEIN_E_BAD_OFFSET);
    CHECK(strstr(pagein_last_error_detail(), "'w'") && strstr(pagein_last_error_detail(), "f1"));
    if (access(FX "fqn", F_OK) != 0) SKIP_BECAUSE("no fixture " FX "fqn (run gen.py)");
    pagein_dcp_hf *h;
    CHECK_OK(pagein_dcp_hf_open(&h, FX "fqn"));
    CHECK_EQ(pagein_dcp_hf_count(h), 4);
    pagein_dcp_hf_info ti;
    CHECK_OK(pagein_dcp_hf_tensor(h, 3, &ti));
    CHECK_STR(ti.name, "rows.weight");
    CHECK_EQ(ti.nchunks, 4);
    pagein_dcp_hf_close(h);
    char out[512];
    snprintf(out, sizeof out, "%s/hf_fqn.safetensors", pt_tmpdir());
    pagein_dcp_convert_stats st;
    CHECK_OK(pagein_dcp_hf_convert(FX "fqn", out, NULL, &st));
    CHECK(dcp_same_file(out, FX "expected.safetensors")); /* the same tensors as the one-chunk-per-file layout */
    unlink(out);
    return PASS;
}
