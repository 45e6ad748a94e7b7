/* test_dcp_read.c - reading boxes of chunks of more than two dimensions
 * (tests/data/dcp/nd, written by torch 1.13's own DCP writer on 2 gloo
 * ranks: a 3-D tensor split along dim 1, a 4-D conv weight along dim 0, a
 * 4-D tensor along dim 2): every box equals the known values, and rows
 * contiguous in both the blob and the destination are one span, not one
 * per innermost row; over HTTP, a blob that several requests of one run
 * need before its header is known is read once. */
#include "remote_util.h"
#include "../src/format/dequant.h"

#include <stdlib.h>

#define FX "tests/data/dcp/nd"

/* Element k of a fixture tensor is k % 251 (gen.py). */
static float elem(pagein_dtype dt, const uint8_t *p, uint64_t i) {
    if (dt == PAGEIN_DTYPE_F32) {
        float f;
        memcpy(&f, p + i * 4, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p + i * 2, 2);
    return dt == PAGEIN_DTYPE_BF16 ? pi_bf16_to_f32(h) : pi_f16_to_f32(h);
}

/* The box [start, start + count) of item i read in one run; its values
 * checked; the spans the plan made into *spans. */
static int read_box(pagein_dcp *d, size_t i, const uint64_t *start, const uint64_t *count, uint64_t *spans) {
    pagein_dcp_item_info in;
    CHECK_OK(pagein_dcp_item(d, i, &in));
    uint64_t n = 1, es = pagein_dtype_get(in.dtype)->bits / 8;
    for (uint32_t a = 0; a < in.ndim; a++) n *= count[a];
    uint8_t *buf = calloc(1, n * es + 1);
    pagein_dcp_request rq = {i, start, count, buf, (size_t)(n * es)};
    pagein_dcp_read_stats st;
    int rc = pagein_dcp_read_many(d, &rq, 1, &st);
    if (rc < 0) printf("    %s\n", pagein_last_error_detail());
    CHECK_OK(rc);
    CHECK_EQ(st.bytes_needed, n * es);
    *spans = st.spans;
    uint64_t idx[8] = {0}, bad = 0;
    for (uint64_t e = 0; e < n; e++) {
        uint64_t k = 0; /* the element's index in the whole tensor */
        for (uint32_t a = 0; a < in.ndim; a++) k = k * in.shape[a] + start[a] + idx[a];
        if (elem(in.dtype, buf, e) != (float)(k % 251)) bad++;
        for (uint32_t a = in.ndim; a-- > 0;) {
            if (++idx[a] < count[a]) break;
            idx[a] = 0;
        }
    }
    CHECK_EQ(bad, 0);
    free(buf);
    return PASS;
}

TEST(dcp_read_nd_boxes) {
    pagein_dcp *d;
    CHECK_OK(pagein_dcp_open(&d, FX));
    int cube = pagein_dcp_find(d, "cube"), conv = pagein_dcp_find(d, "conv.weight");
    int hyper = pagein_dcp_find(d, "hyper");
    CHECK(cube >= 0 && conv >= 0 && hyper >= 0);
    uint64_t sp = 0;
    /* cube [4, 6, 5] in two [4, 3, 5] chunks: the whole tensor is one run
     * of 15 elements per chunk and dim-0 index (the destination's rows are
     * 30 long): 4 x 2 spans, written where they go (no gather buffer) */
    uint64_t z3[3] = {0}, c3[3] = {4, 6, 5};
    CHECK(read_box(d, (size_t)cube, z3, c3, &sp) == PASS);
    CHECK_EQ(sp, 8);
    /* a box inside one chunk, whole along dims 1-2 of the chunk: one run */
    uint64_t s3[3] = {1, 3, 0}, k3[3] = {2, 3, 5};
    CHECK(read_box(d, (size_t)cube, s3, k3, &sp) == PASS);
    CHECK_EQ(sp, 1);
    /* part of the innermost dimension: one span per innermost row */
    uint64_t s3b[3] = {0, 2, 1}, k3b[3] = {4, 2, 3};
    CHECK(read_box(d, (size_t)cube, s3b, k3b, &sp) == PASS);
    CHECK_EQ(sp, 8);
    /* conv.weight [4, 2, 3, 3] by dim 0: each chunk is one span */
    uint64_t z4[4] = {0}, c4[4] = {4, 2, 3, 3};
    CHECK(read_box(d, (size_t)conv, z4, c4, &sp) == PASS);
    CHECK_EQ(sp, 2);
    /* hyper [2, 3, 4, 6] by dim 2: one run of 2 x 6 per (i, j) and chunk */
    uint64_t h4[4] = {2, 3, 4, 6};
    CHECK(read_box(d, (size_t)hyper, z4, h4, &sp) == PASS);
    CHECK_EQ(sp, 12);
    /* the same checkpoint assembled whole by pagein_dcp_read (copy_box) */
    for (int i = 0; i < 3; i++) {
        int it = i == 0 ? cube : i == 1 ? conv : hyper;
        pagein_dcp_item_info in;
        CHECK_OK(pagein_dcp_item(d, (size_t)it, &in));
        uint8_t *a = malloc(in.nbytes), *b = malloc(in.nbytes);
        CHECK_OK(pagein_dcp_read(d, (size_t)it, a, in.nbytes));
        pagein_dcp_request rq = {(size_t)it, NULL, NULL, b, (size_t)in.nbytes};
        CHECK_OK(pagein_dcp_read_many(d, &rq, 1, NULL));
        CHECK(memcmp(a, b, in.nbytes) == 0);
        free(a), free(b);
    }
    pagein_dcp_close(d);
    return PASS;
}

/* Over HTTP the first read of a chunk takes its whole blob (its header is
 * not known yet): two requests that both need the same blob read it once,
 * as one request for the whole tensor does. */
TEST(remote_dcp_read_many_once) {
#ifndef PAGEIN_HAVE_CURL
    SKIP_BECAUSE("built without libcurl (Debian libcurl4-openssl-dev; mk/remote.mk)");
#else
    RT_NEED_SERVERS();
    setenv("PAGEIN_HTTP_RETRIES", "0", 1);
    uint64_t whole_read = 0;
    for (int pass = 0; pass < 2; pass++) {
        pagein_dcp *r;
        int rc = pagein_dcp_open(&r, rt_url("HTTP", "/files/dcp4"));
        if (rc < 0) printf("    %s\n", pagein_last_error_detail());
        CHECK_OK(rc);
        if (rc < 0) return FAIL;
        int it = pagein_dcp_find(r, "rows.weight"); /* [10, 6] f32 in row chunks of 3, 3, 3, 1 */
        CHECK(it >= 0);
        float a[2 * 6], b[8 * 6], w[10 * 6];
        uint64_t s0[2] = {0, 0}, c0[2] = {2, 6}, s1[2] = {2, 0}, c1[2] = {8, 6};
        pagein_dcp_request rq[2] = {{(size_t)it, s0, c0, a, sizeof a}, {(size_t)it, s1, c1, b, sizeof b}};
        pagein_dcp_request one = {(size_t)it, NULL, NULL, w, sizeof w};
        pagein_dcp_read_stats st;
        /* pass 0: the whole tensor in one request; pass 1: rows [0, 2) and [2, 10), both in chunk 0 */
        CHECK_OK(pass == 0 ? pagein_dcp_read_many(r, &one, 1, &st) : pagein_dcp_read_many(r, rq, 2, &st));
        if (pass == 0) {
            whole_read = st.bytes_read;
            CHECK_EQ(st.spans, 4);
        } else {
            CHECK_EQ(st.bytes_read, whole_read); /* chunk 0's blob once, not twice */
            CHECK_EQ(st.spans, 4);
            pagein_dcp *l;
            CHECK_OK(pagein_dcp_open(&l, "tests/data/dcp/rank4"));
            CHECK_OK(pagein_dcp_read(l, (size_t)it, w, sizeof w));
            CHECK(!memcmp(a, w, sizeof a) && !memcmp(b, w + 12, sizeof b));
            pagein_dcp_close(l);
        }
        pagein_dcp_close(r);
    }
#endif
    return PASS;
}

/* pagein_dcp_read_many_strided: a box written through a strided view (a
 * column slice of a wider row-major tensor, and a transposed one), the
 * bytes around it untouched; a buffer too short for the strides refused. */
TEST(dcp_read_many_strided) {
    pagein_dcp *d;
    CHECK_OK(pagein_dcp_open(&d, "tests/data/dcp/rank4"));
    int it = pagein_dcp_find(d, "cols.weight"); /* bf16 [4, 10] in column chunks of 3, 3, 3, 1 */
    CHECK(it >= 0);
    uint16_t whole[4 * 10], wide[4 * 16], tr[10 * 4];
    CHECK_OK(pagein_dcp_read(d, (size_t)it, whole, sizeof whole));
    for (int pass = 0; pass < 2; pass++) { /* pass 1: headers cached, box spans */
        memset(wide, 0xab, sizeof wide);
        uint64_t st[2] = {0, 2}, ct[2] = {4, 7}, ws[2] = {16, 1}; /* columns 2..8 into columns 3..9 of [4, 16] */
        pagein_dcp_request rq = {(size_t)it, st, ct, wide + 3, sizeof wide - 6};
        const uint64_t *ds[1] = {ws};
        CHECK_OK(pagein_dcp_read_many_strided(d, &rq, 1, ds, NULL));
        int bad = 0;
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 16; c++) {
                uint16_t want = c >= 3 && c < 10 ? whole[r * 10 + c - 1] : 0xabab;
                bad += wide[r * 16 + c] != want;
            }
        CHECK_EQ(bad, 0);
        /* the whole tensor transposed: strides {1, 4} into a [10, 4] buffer */
        uint64_t z[2] = {0, 0}, all[2] = {4, 10}, ts[2] = {1, 4};
        pagein_dcp_request rt = {(size_t)it, z, all, tr, sizeof tr};
        const uint64_t *dt[1] = {ts};
        CHECK_OK(pagein_dcp_read_many_strided(d, &rt, 1, dt, NULL));
        bad = 0;
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 10; c++) bad += tr[c * 4 + r] != whole[r * 10 + c];
        CHECK_EQ(bad, 0);
        rt.len = sizeof tr - 2;
        CHECK_EQ(pagein_dcp_read_many_strided(d, &rt, 1, dt, NULL), PAGEIN_E_RANGE);
    }
    pagein_dcp_close(d);
    return PASS;
}
