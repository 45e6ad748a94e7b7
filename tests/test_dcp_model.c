/* test_dcp_model.c - a torch Distributed Checkpoint directory opened as a
 * model (the format table's DCP row, src/format/dcp_model.c; assembled
 * tensors, src/load/assemble.c) over the checkpoints torch 1.13's own
 * writer produced (tests/data/dcp/gen.py): every strategy gives every
 * tensor the bytes pagein_dcp_read assembles (test_dcp.c checks those
 * against gen.py's values), slices read only the chunks they overlap, and
 * the malformed variants are refused naming the key and the file. */
#include "test.h"
#include "dcp_testutil.h"
#include "remote_util.h"

#include <stdlib.h>
#include <unistd.h>

#define FX "tests/data/dcp/"

/* Every item of the model equals pagein_dcp_read's bytes of it. */
static int check_model(const char *path, const char *dir, pagein_strategy s) {
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = s;
    pagein_model *m = NULL;
    pagein_dcp *d = NULL;
    int rc = pagein_model_open(&m, path, &o);
    CHECK_OK(rc);
    CHECK_OK(pagein_dcp_open(&d, dir));
    if (rc || !d) {
        pagein_model_close(m), pagein_dcp_close(d);
        return FAIL;
    }
    CHECK_EQ(pagein_model_tensor_count(m), pagein_dcp_item_count(d));
    pagein_file_info fi0;
    pagein_file_get_info(pagein_model_file(m, 0), &fi0);
    CHECK_EQ(fi0.format, PAGEIN_FORMAT_DCP);
    /* the layers' way (pagein_layer_wait) for half, the tensors' way for the rest */
    for (int32_t l = -1; l <= pagein_model_layer_count(m); l += 2) CHECK_OK(pagein_layer_wait(m, l));
    for (size_t i = 0; i < pagein_dcp_item_count(d); i++) {
        pagein_dcp_item_info in;
        CHECK_OK(pagein_dcp_item(d, i, &in));
        const pagein_tensor *t = pagein_model_tensor_get(m, in.name);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK_EQ(t->nbytes, in.nbytes);
        CHECK_EQ(!!(t->flags & PAGEIN_TENSOR_BYTES), !!in.is_bytes);
        CHECK_EQ(!!(t->flags & PAGEIN_TENSOR_ASSEMBLED), !in.is_bytes && (in.nchunks > 1 || !strcmp(in.name, "transposed")));
        uint8_t *want = malloc(in.nbytes + 1);
        CHECK_OK(pagein_dcp_read(d, i, want, in.nbytes));
        const void *got = NULL;
        if (i % 2) CHECK_OK(pagein_tensor_wait(m, t));
        CHECK_OK(pagein_model_tensor_data(m, t, &got));
        if (!got || memcmp(got, want, in.nbytes)) {
            printf("    %s (%s): '%s' differs\n", dir, pagein_strategy_name(s), in.name);
            pt_failed = 1;
        }
        /* a single row-major chunk: the tensor points into its blob in the mapping */
        const void *view = NULL;
        if (!in.is_bytes && pagein_dcp_view(d, i, &view) == 0  && pagein_model_strategy(m, NULL) != PAGEIN_STRATEGY_READ) {
            const pagein_file *f = pagein_model_file(m, t->file);
            pagein_file_info fi;
            pagein_file_get_info(f, &fi);
            CHECK(got == (const uint8_t *)fi.base + t->offset);
        }
        free(want);
    }
    CHECK_OK(pagein_model_load_tensors(m, NULL, 0));
    pagein_dcp_close(d);
    pagein_model_close(m);
    return PASS;
}

TEST(dcp_model_every_strategy) {
    static const pagein_strategy st[] = {PAGEIN_STRATEGY_LAZY, PAGEIN_STRATEGY_POPULATE, PAGEIN_STRATEGY_PREFETCH,
                                         PAGEIN_STRATEGY_READ, PAGEIN_STRATEGY_AUTO};
    for (size_t k = 0; k < sizeof st / sizeof *st; k++) {
        check_model(FX "rank4", FX "rank4", st[k]);
        check_model(FX "rank2", FX "rank2", st[k]);
    }
    check_model(FX "v2", FX "v2", PAGEIN_STRATEGY_LAZY);
    check_model(FX "rank4/.metadata", FX "rank4", PAGEIN_STRATEGY_POPULATE); /* the marker names its directory */
    return PASS;
}

/* A budgeted prefetch through the layers: each layer's tensors right when
 * it is waited for, assembled ones included. */
TEST(dcp_model_prefetch_budget) {
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_PREFETCH;
    o.budget_bytes = 4096;
    pagein_model *m;
    pagein_dcp *d;
    CHECK_OK(pagein_model_open(&m, FX "rank4", &o));
    CHECK_OK(pagein_dcp_open(&d, FX "rank4"));
    for (int32_t l = -1; l <= pagein_model_layer_count(m); l++) {
        const pagein_tensor *const *ts;
        size_t n = pagein_model_layer_tensors(m, l, &ts);
        CHECK_OK(pagein_layer_wait(m, l));
        for (size_t i = 0; i < n; i++) {
            int k = pagein_dcp_find(d, ts[i]->name);
            uint8_t *want = malloc(ts[i]->nbytes + 1);
            CHECK_OK(pagein_dcp_read(d, (size_t)k, want, ts[i]->nbytes));
            CHECK(!memcmp(ts[i]->data, want, ts[i]->nbytes));
            free(want);
        }
        CHECK_OK(pagein_layer_done(m, l));
    }
    pagein_dcp_close(d);
    pagein_model_close(m);
    return PASS;
}

struct model_at {
    pagein_model *m;
    const pagein_tensor *t;
};
static int model_slice(void *ctx, const uint64_t *start, const uint64_t *count, void *out, size_t cap) {
    struct model_at *a = ctx;
    return pagein_model_read_slice(a->m, a->t, start, count, out, cap);
}

/* A box across the chunk boundaries of the 2x2-block tensor (read from
 * the chunks it overlaps: pi_read_box copies piece by piece, skipping the
 * pieces outside the box) equals the same box of the whole tensor, for
 * every single element too; a one-chunk and a strided tensor alike. */
TEST(dcp_model_read_slice) {
    pagein_model *m = dcp_model_open(FX "rank4", PAGEIN_STRATEGY_LAZY);
    if (!m) return FAIL;
    const pagein_tensor *t = pagein_model_tensor_get(m, "blocks");
    CHECK(t && (t->flags & PAGEIN_TENSOR_ASSEMBLED));
    uint64_t start[2] = {2, 3}, count[2] = {3, 3};
    uint16_t box[9], whole[48];
    CHECK_OK(pagein_model_read_slice(m, t, start, count, box, sizeof box));
    const void *p;
    CHECK_OK(pagein_model_tensor_data(m, t, &p));
    memcpy(whole, p, sizeof whole);
    /* every single element, and of a plain (one chunk) and a strided tensor */
    struct model_at at = {m, t};
    dcp_check_blocks_box(model_slice, &at, box, whole);
    const pagein_tensor *tr = pagein_model_tensor_get(m, "transposed"), *b = pagein_model_tensor_get(m, "layers.0.bias");
    uint64_t s1[2] = {1, 0}, c1[2] = {2, 3}, s2[1] = {2}, c2[1] = {3};
    float fb[6];
    CHECK_OK(pagein_model_read_slice(m, tr, s1, c1, fb, sizeof fb));
    for (int k = 0; k < 6; k++) CHECK_EQ(fb[k], (float)((k % 3) * 5 + 1 + k / 3)); /* arange(15).reshape(3,5).t() */
    CHECK_OK(pagein_model_read_slice(m, b, s2, c2, fb, sizeof fb));
    for (int k = 0; k < 3; k++) CHECK_EQ(fb[k], (float)(k + 2));
    uint64_t bad[2] = {5, 7}, two[2] = {2, 2};
    CHECK_EQ(pagein_model_read_slice(m, t, bad, two, box, sizeof box), PAGEIN_E_RANGE);
    CHECK(strstr(pagein_last_error_detail(), "'blocks'"));
    CHECK_EQ(pagein_model_read_slice(m, t, start, count, box, 4), PAGEIN_E_INVALID);
    CHECK_EQ(pagein_model_read_slice(m, pagein_model_tensor_get(m, "step"), s2, c2, box, sizeof box), PAGEIN_E_INVALID);
    pagein_model_close(m);
    return PASS;
}

/* Non-tensor items: listed, their stored bytes (torch.save of the object). */
TEST(dcp_model_bytes_items) {
    pagein_model *m;
    CHECK_OK(pagein_model_open(&m, FX "rank4", NULL));
    const pagein_tensor *s = pagein_model_tensor_get(m, "step"), *c = pagein_model_tensor_get(m, "config");
    CHECK(s && c && (s->flags & PAGEIN_TENSOR_BYTES) && s->dtype == PAGEIN_DTYPE_U8 && s->ndim == 1);
    const void *p;
    CHECK_OK(pagein_model_tensor_data(m, c, &p));
    CHECK(!memcmp(p, "PK\x03\x04", 4));
    pagein_model_close(m);
    return PASS;
}

/* Malformed checkpoints are refused at open, naming the key and the file. */
TEST(dcp_model_refusals) {
    static const struct {
        const char *meta;
        int code;
        const char *words[2];
    } cases[] = {
        {FX "bad/past_end.metadata", PAGEIN_E_BAD_OFFSET, {"'blocks'", "__3_0.distcp"}},
        {FX "bad/gap.metadata", PAGEIN_E_BAD_OFFSET, {"'rows.weight'", ".metadata"}},
        {FX "bad/evil.metadata", PAGEIN_E_UNSAFE, {"posix.system", ".metadata"}},
        {FX "bad/path_dotdot.metadata", PAGEIN_E_BAD_INDEX, {"'rows.weight'", "'..'"}},
        {FX "bad/shared_blob.metadata", PAGEIN_E_BAD_OFFSET, {"'rows.weight'", "overlap in __0_0.distcp"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *dir = dcp_ckpt_with("dcp_model_bad", cases[i].meta);
        if (!dir) continue;
        pagein_model *m = NULL;
        int rc = pagein_model_open(&m, dir, NULL);
        const char *words[] = {cases[i].words[0], cases[i].words[1], NULL};
        dcp_check_refusal(cases[i].meta, rc, cases[i].code, words);
        CHECK(m == NULL);
    }
    /* a blob that is not what its chunk says (a file's bytes swapped for
     * another's): the key and the file */
    const char *dir = dcp_ckpt_with("dcp_model_swap", FX "rank4/.metadata");
    if (!dir) return FAIL;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp %s/__0_0.distcp %s/__1_0.distcp", dir, dir);
    CHECK_EQ(system(cmd), 0);
    pagein_model *m = NULL;
    int rc = pagein_model_open(&m, dir, NULL);
    const char *why = pagein_last_error_detail();
    if (rc >= 0 || !strstr(why, "__1_0.distcp") || !strstr(why, "'rows.weight'")) {
        printf("    swapped file: rc %d: %s\n", rc, why);
        pt_failed = 1;
    }
    pagein_model_close(m);
    /* the .metadata itself is no model file */
    pagein_file *f = NULL;
    CHECK_EQ(pagein_open(&f, FX "rank4/.metadata", NULL), PAGEIN_E_NOT_MODEL);
    CHECK(strstr(pagein_last_error_detail(), "open its directory"));
    return PASS;
}

/* A blob that is an expanded view (stride 0: a [2^17, 2^17] tensor in one
 * stored byte; tests/data/dcp/gen_expand.py) is refused before anything is
 * allocated, under every strategy: no 16 GiB request from a 747-byte file,
 * no wrapped size sum (expand_wrap: 8 x 2^61 bytes + 2^33) and no write
 * past a too-small block. */
TEST(dcp_model_expanded_blob) {
    static const char *const dirs[] = {FX "expand_big", FX "expand_wrap"};
    static const char *const keys[] = {"'x'", "'a0'"};
    for (size_t i = 0; i < 2; i++)
        for (int s = PAGEIN_STRATEGY_LAZY; s <= PAGEIN_STRATEGY_READ; s++) {
            pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
            o.strategy = (pagein_strategy)s;
            pagein_model *m = NULL;
            int rc = pagein_model_open(&m, dirs[i], &o);
            char what[256];
            snprintf(what, sizeof what, "%s (%d)", dirs[i], s);
            const char *words[] = {keys[i], "__0_0.distcp", "strides", NULL};
            dcp_check_refusal(what, rc, PAGEIN_E_BAD_TENSOR_INFO, words);
            CHECK(m == NULL);
            pagein_model_close(m);
        }
    return PASS;
}

/* Under LAZY an assembled tensor not built yet reads zeros, never the
 * bytes a reused memory block held (another model's tensors). */
TEST(dcp_model_unbuilt_reads_zeros) {
    pagein_model *m = dcp_model_open(FX "rank4", PAGEIN_STRATEGY_POPULATE);
    const pagein_tensor *t = m ? pagein_model_tensor_get(m, "blocks") : NULL;
    CHECK(t && (t->flags & PAGEIN_TENSOR_ASSEMBLED));
    const void *before = t ? t->data : NULL;
    pagein_model_close(m); /* its block is kept for reuse */
    m = dcp_model_open(FX "rank4", PAGEIN_STRATEGY_LAZY);
    t = m ? pagein_model_tensor_get(m, "blocks") : NULL;
    CHECK(t && t->data);
    if (!t || !t->data) return FAIL;
    if (t->data != before) printf("    note: the block was not reused (%p, %p)\n", before, t->data);
    const uint8_t *b = t->data;
    size_t nz = 0;
    for (uint64_t i = 0; i < t->nbytes; i++) nz += b[i] != 0;
    CHECK_EQ(nz, 0);
    const void *d;
    CHECK_OK(pagein_model_tensor_data(m, t, &d));
    CHECK(d == t->data && ((const uint16_t *)d)[1] != 0); /* built: gen.py's values */
    pagein_model_close(m);
    return PASS;
}

/* A file truncated after open: building a tensor fails naming it (the
 * truncation guard), never SIGBUS. */
TEST(dcp_model_truncated_after_open) {
    const char *dir = dcp_ckpt_with("dcp_model_trunc", FX "rank4/.metadata");
    if (!dir) return FAIL;
    pagein_model *m = dcp_model_open(dir, PAGEIN_STRATEGY_LAZY);
    if (!m) return FAIL;
    char p[1024];
    snprintf(p, sizeof p, "%s/__3_0.distcp", dir);
    CHECK_EQ(truncate(p, 0), 0);
    const pagein_tensor *t = pagein_model_tensor_get(m, "blocks");
    /* a slice reads only the chunks it overlaps: the blocks of ranks 0-2
     * still read, the one in __3_0.distcp (rows 3-5, columns 4-7) fails */
    uint64_t s0[2] = {0, 0}, c0[2] = {6, 4}, s1[2] = {2, 3}, c1[2] = {3, 3};
    uint16_t box[24];
    CHECK_OK(pagein_model_read_slice(m, t, s0, c0, box, sizeof box));
    CHECK_EQ(box[23], 0x5160); /* gen.py: element k is k % 251: element (5, 3) is 43.0, f16 0x5160 */
    CHECK_EQ(pagein_model_read_slice(m, t, s1, c1, box, sizeof box), PAGEIN_E_TRUNCATED);
    const void *d;
    int rc = pagein_model_tensor_data(m, t, &d);
    CHECK_EQ(rc, PAGEIN_E_TRUNCATED);
    if (!strstr(pagein_last_error_detail(), "blocks") || !strstr(pagein_last_error_detail(), "__3_0.distcp")) {
        printf("    detail: %s\n", pagein_last_error_detail());
        pt_failed = 1;
    }
    pagein_model_close(m);
    return PASS;
}

/* Each rank's file holds bytes of several tensors though its own table is
 * empty: the model says which and how many bytes (plan, resident, hash). */
TEST(dcp_model_file_tensors) {
    pagein_model *m = dcp_model_open(FX "rank4", PAGEIN_STRATEGY_LAZY);
    if (!m) return FAIL;
    uint64_t b = 0, sum = 0;
    CHECK_EQ(pagein_model_file_tensors(m, 0, &b), 11);
    CHECK_EQ(b, 1127);
    sum += b;
    for (size_t f = 1; f < 4; f++) {
        CHECK_EQ(pagein_model_file_tensors(m, f, &b), 3);
        sum += b;
    }
    CHECK_EQ(pagein_model_file_tensors(m, 4, &b), 0);
    CHECK_EQ(b, 0);
    /* the files' bytes together are every tensor's bytes, each once */
    uint64_t all = 0;
    for (size_t i = 0; i < pagein_model_tensor_count(m); i++) all += pagein_model_tensor_at(m, i)->nbytes;
    CHECK_EQ(sum, all);
    /* an assembled tensor's residency is the sum of its parts in each file */
    const pagein_tensor *t = pagein_model_tensor_get(m, "rows.weight");
    CHECK(t && (t->flags & PAGEIN_TENSOR_ASSEMBLED));
    pagein_residency whole, part, acc = {0, 0, 0, 0};
    CHECK_OK(pagein_model_tensor_residency(m, t, &whole));
    for (size_t f = 0; f < 4; f++) {
        CHECK_OK(pagein_model_tensor_file_residency(m, t, f, &part));
        CHECK(part.bytes > 0);
        pagein_residency_add(&acc, &part);
    }
    CHECK_EQ(acc.bytes, whole.bytes);
    CHECK_EQ(acc.bytes, t->nbytes);
    CHECK_OK(pagein_model_tensor_file_residency(m, t, 9, &part));
    CHECK_EQ(part.bytes, 0);
    pagein_model_close(m);
    return PASS;
}

/* GPU staging onto the host backend: assembled tensors are copied from
 * their built memory, views and non-tensor items from their files; every
 * tensor on the "device" equals the model's bytes, for a lazy model (built
 * by the staging's readers) and a read one (built at open). */
TEST(dcp_model_gpu_host_staging) {
    static const pagein_strategy strat[] = {PAGEIN_STRATEGY_LAZY, PAGEIN_STRATEGY_READ};
    static const char *const dirs[] = {FX "rank4", FX "v2"};
    for (size_t d = 0; d < 2; d++)
        for (size_t s = 0; s < 2; s++) {
            pagein_model *m = dcp_model_open(dirs[d], strat[s]);
            if (!m) return FAIL;
            pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
            o.device = PAGEIN_DEVICE_HOST;
            o.buffer_bytes = 4096;
            o.nbuffers = 2;
            o.threads = 2;
            pagein_gpu_load *l = NULL;
            CHECK_OK(pagein_gpu_load_model(&l, m, &o));
            if (l) CHECK_OK(pagein_gpu_load_wait(l));
            size_t assembled = 0;
            for (size_t i = 0; l && i < pagein_model_tensor_count(m); i++) {
                const pagein_tensor *t = pagein_model_tensor_at(m, i);
                assembled += !!(t->flags & PAGEIN_TENSOR_ASSEMBLED);
                uint8_t *got = malloc(t->nbytes + 1);
                const void *want = NULL;
                CHECK_OK(pagein_model_tensor_data(m, t, &want));
                CHECK_OK(pagein_gpu_tensor_read_back(l, t, got, 0, (size_t)t->nbytes));
                if (!want || memcmp(got, want, (size_t)t->nbytes)) {
                    printf("    %s (%s): '%s' differs on the device\n", dirs[d], pagein_strategy_name(strat[s]), t->name);
                    pt_failed = 1;
                }
                free(got);
            }
            CHECK(assembled >= 2);
            pagein_gpu_load_free(l);
            pagein_model_close(m);
        }
    return PASS;
}

/* A checkpoint behind a URL prefix is found (its .metadata, by listing or
 * by probing the name) and refused as a model with the reason, naming the
 * file (was "no model file"): its blobs' headers are not read remotely
 * yet; pagein convert and pagein.dcp read it. */
TEST(remote_dcp_model_refused) {
#ifndef PAGEIN_HAVE_CURL
    SKIP_BECAUSE("built without libcurl (Debian libcurl4-openssl-dev; mk/remote.mk)");
#else
    RT_NEED_SERVERS();
    setenv("PAGEIN_HTTP_RETRIES", "0", 1);
    const char *urls[] = {rt_url("HTTP", "/files/dcp4/"), rt_url("HTTP", "/files/dcp4/.metadata")};
    for (size_t i = 0; i < 2; i++) {
        char u[512];
        snprintf(u, sizeof u, "%s", urls[i]);
        pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
        pagein_model *m = NULL;
        int rc = pagein_model_open(&m, u, &o);
        CHECK_EQ(rc, PAGEIN_E_UNSUPPORTED);
        CHECK(strstr(pagein_last_error_detail(), "not opened as a model") != NULL);
        CHECK(strstr(pagein_last_error_detail(), "__0_0.distcp") != NULL);
        if (rc != PAGEIN_E_UNSUPPORTED) printf("    %s: %d %s\n", u, rc, pagein_last_error_detail());
        pagein_model_close(m);
    }
#endif
    return PASS;
}
