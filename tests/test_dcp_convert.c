/* test_dcp_convert.c - consolidating torch Distributed Checkpoints (the
 * committed fixtures of tests/data/dcp, written by torch's own DCP writer)
 * through the range engine: one file and Hugging Face shards, every tensor
 * equal to the one pagein_dcp_read assembles chunk by chunk, one engine
 * run reading each blob once, and the same bytes from http://, s3:// and
 * hf:// copies of the checkpoint (the remote tests' servers). */
#include "remote_util.h"
#include "dcp_testutil.h"
#include "../src/internal.h"

#include <dirent.h>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define FX "tests/data/dcp/"

static uint64_t dir_bytes(const char *dir) {
    static const char *files[] = {"__0_0.distcp", "__1_0.distcp", "__2_0.distcp", "__3_0.distcp"};
    uint64_t n = 0;
    char p[512];
    for (size_t i = 0; i < (sizeof files / sizeof *files); i++) {
        struct stat s;
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        if (stat(p, &s) == 0) n += (uint64_t)s.st_size;
    }
    return n;
}

/* Every tensor of the checkpoint equals the model at path's tensor of
 * the same name (path: one safetensors file or an index). */
static int same_tensors(const char *ckpt, const char *path) {
    pagein_dcp *d;
    CHECK_OK(pagein_dcp_open(&d, ckpt));
    pagein_model *m = NULL;
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    int rc = pagein_model_open(&m, path, &o);
    CHECK_OK(rc);
    size_t nt = 0;
    for (size_t i = 0; rc == 0 && i < pagein_dcp_item_count(d); i++) {
        pagein_dcp_item_info in;
        CHECK_OK(pagein_dcp_item(d, i, &in));
        if (in.is_bytes) {
            CHECK(pagein_model_tensor_get(m, in.name) == NULL);
            continue;
        }
        nt++;
        const pagein_tensor *t = pagein_model_tensor_get(m, in.name);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK_EQ(t->dtype, in.dtype);
        CHECK_EQ(t->ndim, in.ndim);
        CHECK_EQ(t->nbytes, in.nbytes);
        void *want = malloc(in.nbytes + 1);
        const void *got = NULL;
        CHECK_OK(pagein_dcp_read(d, i, want, in.nbytes));
        CHECK_OK(pagein_model_tensor_data(m, t, &got));
        CHECK(got && memcmp(want, got, in.nbytes) == 0);
        free(want);
    }
    if (m) CHECK_EQ(pagein_model_tensor_count(m), nt);
    pagein_model_close(m);
    pagein_dcp_close(d);
    return PASS;
}

TEST(dcp_convert_engine) {
    const char *out = pt_tmppath("dcp4.safetensors");
    pagein_dcp_convert_stats st;
    CHECK_OK(pagein_dcp_convert(FX "rank4", out, NULL, &st));
    CHECK_EQ(st.tensors, 9);
    CHECK_EQ(st.tensor_bytes, 561);
    CHECK_EQ(st.skipped_items, 2);
    CHECK_EQ(st.shards, 1);
    /* every blob of every tensor read once, in one run: the bytes read are
     * the tensors' blobs (the files less the non-tensor items) */
    CHECK(st.spans >= 9);
    CHECK(st.requests >= 1);
    CHECK(st.bytes_read > 561 && st.bytes_read <= dir_bytes(FX "rank4"));
    CHECK_EQ(same_tensors(FX "rank4", out), PASS);
    /* the old entry point gives the same file */
    const char *out2 = pt_tmppath("dcp4b.safetensors");
    CHECK_OK(pagein_dcp_convert_safetensors(FX "rank4", out2, NULL));
    CHECK(dcp_same_file(out, out2));
    CHECK_OK(pagein_dcp_convert(FX "rank2", pt_tmppath("dcp2.safetensors"), NULL, &st));
    CHECK_EQ(same_tensors(FX "rank2", pt_tmppath("dcp2.safetensors")), PASS);
    CHECK_OK(pagein_dcp_convert(FX "v2", pt_tmppath("v2.safetensors"), NULL, &st));
    CHECK_EQ(same_tensors(FX "v2", pt_tmppath("v2.safetensors")), PASS);
    return PASS;
}

TEST(dcp_convert_shards) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/sh", pt_tmpdir());
    mkdir(dir, 0777);
    char out[600], idx[700], first[700];
    snprintf(out, sizeof out, "%s/model.safetensors", dir);
    snprintf(idx, sizeof idx, "%s.index.json", out);
    pagein_convert_opts o = PAGEIN_CONVERT_OPTS_INIT;
    o.max_shard_bytes = 200;
    pagein_dcp_convert_stats st;
    CHECK_OK(pagein_dcp_convert(FX "rank4", out, &o, &st));
    CHECK(st.shards >= 3);
    snprintf(first, sizeof first, "%s/model-00001-of-%05u.safetensors", dir, st.shards);
    CHECK(access(idx, F_OK) == 0);
    CHECK(access(first, F_OK) == 0);
    CHECK(access(out, F_OK) != 0); /* no single file beside the set */
    CHECK_EQ(same_tensors(FX "rank4", idx), PASS);
    /* a cast is refused, nothing written */
    o.max_shard_bytes = 0;
    o.dtype = PAGEIN_DTYPE_F16;
    CHECK_EQ(pagein_dcp_convert(FX "rank4", pt_tmppath("cast.safetensors"), &o, NULL), PAGEIN_E_UNSUPPORTED);
    CHECK(access(pt_tmppath("cast.safetensors"), F_OK) != 0);
    /* a failing blob stops the run and leaves no output */
    o.dtype = PAGEIN_DTYPE_INVALID;
    const char *bad = dcp_ckpt_with("badblob", FX "rank4/.metadata");
    if (!bad) return FAIL;
    char blob[700];
    snprintf(blob, sizeof blob, "%s/__1_0.distcp", bad);
    size_t n;
    uint8_t *buf = pt_read_file(blob, &n);
    CHECK(buf != NULL);
    if (buf) {
        memset(buf, 0xEE, n > 64 ? 64 : n); /* rank 1's first blob: no zip */
        CHECK_EQ(pt_write_file(blob, buf, n), 0);
        free(buf);
    }
    int rc = pagein_dcp_convert(bad, pt_tmppath("bad.safetensors"), NULL, NULL);
    CHECK(rc < 0);
    CHECK(strstr(pagein_last_error_detail(), "__1_0.distcp") != NULL);
    CHECK(access(pt_tmppath("bad.safetensors"), F_OK) != 0);
    return PASS;
}

/* The checkpoint over HTTP, S3 and the Hub: the same file as local. */
TEST(remote_dcp_convert) {
#ifndef PAGEIN_HAVE_CURL
    SKIP_BECAUSE("built without libcurl (Debian libcurl4-openssl-dev; mk/remote.mk)");
#else
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    RT_NEED_SERVERS();
    char local[4096];
    snprintf(local, sizeof local, "%s", pt_tmppath("local.safetensors"));
    CHECK_OK(pagein_dcp_convert(FX "rank4", local, NULL, NULL));
    char urls[3][300];
    int n = rt_folder_urls(urls, "dcp4", "hf://org/dcp/ckpt", "s3://bkt/torch-dcp4");
    for (int i = 0; i < n; i++) {
        const char *out = pt_tmppath("remote.safetensors");
        pagein_dcp_convert_stats st;
        int rc = pagein_dcp_convert(urls[i], out, NULL, &st);
        if (rc < 0) printf("    %s: %s\n", urls[i], pagein_last_error_detail());
        CHECK_OK(rc);
        CHECK_EQ(st.tensors, 9);
        CHECK(st.requests >= 1 && st.bytes_read <= dir_bytes(FX "rank4"));
        CHECK(dcp_same_file(out, local));
        unlink(out);
    }
#endif
    return PASS;
}

/* pagein_dcp_read_many over HTTP: first each blob whole (headers parsed
 * and cached), then only the boxes' bytes; both equal the local reads. */
TEST(remote_dcp_read_many) {
#ifndef PAGEIN_HAVE_CURL
    SKIP_BECAUSE("built without libcurl (Debian libcurl4-openssl-dev; mk/remote.mk)");
#else
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    RT_NEED_SERVERS();
    setenv("PAGEIN_HTTP_RETRIES", "0", 1);
    pagein_dcp *l, *r;
    CHECK_OK(pagein_dcp_open(&l, FX "rank4"));
    int rc = pagein_dcp_open(&r, rt_url("HTTP", "/files/dcp4"));
    if (rc < 0) printf("    %s\n", pagein_last_error_detail());
    CHECK_OK(rc);
    if (rc < 0) return FAIL;
    size_t n = pagein_dcp_item_count(l);
    CHECK(n > 0 && n < 32 && pagein_dcp_item_count(r) == n);
    pagein_dcp_request rq[32];
    uint8_t *got[32] = {0};
    uint64_t sum = 0;
    for (size_t i = 0; i < n && i < 32; i++) {
        pagein_dcp_item_info in;
        CHECK_OK(pagein_dcp_item(l, i, &in));
        got[i] = calloc(1, in.nbytes + 1);
        rq[i] = (pagein_dcp_request){i, NULL, NULL, got[i], (size_t)in.nbytes};
        sum += in.nbytes;
    }
    for (int pass = 0; pass < 2; pass++) {
        pagein_dcp_read_stats st;
        for (size_t i = 0; i < n; i++) memset(got[i], 0, rq[i].len);
        rc = pagein_dcp_read_many(r, rq, n, &st);
        if (rc < 0) printf("    %s\n", pagein_last_error_detail());
        CHECK_OK(rc);
        CHECK_EQ(st.runs, 1);
        CHECK_EQ(st.bytes_needed, sum);
        /* pass 0 reads whole blobs; pass 1 only the tensors' bytes (the
         * bytes items are their blobs) */
        if (pass == 0) CHECK(st.bytes_read > sum);
        else CHECK(st.bytes_read >= sum && st.bytes_read < sum + 64 * 1024 * n);
        for (size_t i = 0; i < n; i++) {
            uint8_t *want = calloc(1, rq[i].len + 1);
            CHECK_OK(pagein_dcp_read(l, i, want, rq[i].len));
            CHECK(!memcmp(want, got[i], rq[i].len));
            free(want);
        }
    }
    for (size_t i = 0; i < n; i++) free(got[i]);
    pagein_dcp_close(l);
    pagein_dcp_close(r);
#endif
    return PASS;
}

/* A single-chunk row-major tensor is a pointer into its blob; the others
 * are refused with PAGEIN_E_UNSUPPORTED (read them). */
TEST(dcp_view_single_chunk) {
    pagein_dcp *d;
    CHECK_OK(pagein_dcp_open(&d, FX "rank4"));
    const void *p = NULL;
    int i = pagein_dcp_find(d, "layers.0.bias");
    CHECK(i >= 0);
    CHECK_OK(pagein_dcp_view(d, (size_t)i, &p));
    float want[6];
    CHECK_OK(pagein_dcp_read(d, (size_t)i, want, sizeof want));
    CHECK(p && memcmp(p, want, sizeof want) == 0);
    CHECK_EQ(pagein_dcp_view(d, (size_t)pagein_dcp_find(d, "rows.weight"), &p), PAGEIN_E_UNSUPPORTED);
    CHECK_EQ(pagein_dcp_view(d, (size_t)pagein_dcp_find(d, "transposed"), &p), PAGEIN_E_UNSUPPORTED);
    CHECK_EQ(pagein_dcp_view(d, (size_t)pagein_dcp_find(d, "step"), &p), PAGEIN_E_BAD_TYPE);
    pagein_dcp_close(d);
    return PASS;
}

/* WHITE-BOX (pi_alloc_fail_after): the 1st, 2nd, ... allocation of a
 * sharded consolidation failing (the reader thread's included; every one
 * of the first 60, then sparser) returns an
 * error and leaves the directory as it was: no shard, index or temporary. */
static int dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

TEST(dcp_convert_allocfail) {
    char dir[512], out[600];
    snprintf(dir, sizeof dir, "%s/dcp_af", pt_tmpdir());
    mkdir(dir, 0700);
    snprintf(out, sizeof out, "%s/model.safetensors", dir);
    pagein_convert_opts o = PAGEIN_CONVERT_OPTS_INIT;
    o.max_shard_bytes = 200;
    int k, rc = -1;
    int tried = 0;
    /* every one of the first 60, then sparser (a unit test stays under 1 s) */
    for (k = 0; k < 2000; k += 1 + k / 20, tried++) {
        pi_alloc_fail_after(k);
        rc = pagein_dcp_convert(FX "rank4", out, &o, NULL);
        pi_alloc_fail_after(-1);
        if (rc == 0) break;
        if (dir_entries(dir) != 0) {
            printf("    allocation %d failing left %d entries in %s\n", k, dir_entries(dir), dir);
            pt_failed = 1;
            break;
        }
    }
    printf("    %d of the first %d allocations failed in turn\n", tried, k);
    CHECK_OK(rc);
    CHECK_EQ(dir_entries(dir), 4); /* 3 shards and the index */
    return PASS;
}
