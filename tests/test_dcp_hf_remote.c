/* test_dcp_hf_remote.c - torch's safetensors flavour of a Distributed
 * Checkpoint (tests/data/dcp/hf/ckpt) over the remote tests' servers:
 * found by a listing (s3://, hf://) or by torch's file names (plain
 * HTTP, which cannot list), opened once per file, consolidated through one
 * range-engine run into the same bytes as the local fixture gives, each
 * chunk read once. */
#include "remote_util.h"
#include "dcp_testutil.h"

#include <stdlib.h>
#include <unistd.h>

#define FX "tests/data/dcp/hf/"

TEST(remote_dcp_hf_convert) {
#ifndef PAGEIN_HAVE_CURL
    SKIP_BECAUSE("built without libcurl (Debian libcurl4-openssl-dev; mk/remote.mk)");
#else
    RT_NEED_SERVERS();
    /* the chunks' bytes: what one read of each costs */
    pagein_dcp_hf *l;
    CHECK_OK(pagein_dcp_hf_open(&l, FX "ckpt"));
    uint64_t need = 0;
    for (size_t i = 0; i < pagein_dcp_hf_count(l); i++) {
        pagein_dcp_hf_info in;
        CHECK_OK(pagein_dcp_hf_tensor(l, i, &in));
        need += in.nbytes;
    }
    char urls[3][300];
    int n = rt_folder_urls(urls, "dcphf", "hf://org/dcp/hf", "s3://bkt/torch-dcphf");
    for (int i = 0; i < n; i++) {
        CHECK(pagein_is_dcp_hf_dir(urls[i]));
        pagein_dcp_hf *h = NULL;
        int rc = pagein_dcp_hf_open(&h, urls[i]);
        if (rc < 0) printf("    %s: %s\n", urls[i], pagein_last_error_detail());
        CHECK_OK(rc);
        if (rc < 0) continue;
        CHECK_EQ(pagein_dcp_hf_count(h), pagein_dcp_hf_count(l));
        /* a whole tensor read through the sources equals the local one */
        for (size_t t = 0; t < pagein_dcp_hf_count(h); t++) {
            pagein_dcp_hf_info in;
            CHECK_OK(pagein_dcp_hf_tensor(h, t, &in));
            uint8_t *a = malloc(in.nbytes + 1), *b = malloc(in.nbytes + 1);
            CHECK_OK(pagein_dcp_hf_read(h, t, a, in.nbytes));
            CHECK_OK(pagein_dcp_hf_read(l, t, b, in.nbytes));
            CHECK(memcmp(a, b, in.nbytes) == 0);
            free(a), free(b);
        }
        pagein_dcp_hf_close(h);
        const char *out = pt_tmppath("remote_hf.safetensors");
        pagein_dcp_convert_stats st;
        rc = pagein_dcp_hf_convert(urls[i], out, NULL, &st);
        if (rc < 0) printf("    %s: %s\n", urls[i], pagein_last_error_detail());
        CHECK_OK(rc);
        CHECK_EQ(st.tensors, 4);
        CHECK_EQ(st.bytes_read, need); /* every chunk once, nothing else */
        CHECK(st.requests >= 1 && st.requests <= st.spans);
        CHECK(dcp_same_file(out, FX "expected.safetensors"));
        unlink(out);
    }
    /* plain HTTP without torch's names: not found, said so */
    CHECK(!pagein_is_dcp_hf_dir(rt_url("HTTP", "/files/real")));
    pagein_dcp_hf_close(l);
#endif
    return PASS;
}
