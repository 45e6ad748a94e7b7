/* test_stwrite_allocfail.c - WHITE-BOX (src/internal.h: pi_alloc_fail_after):
 * the safetensors writer with its 1st, 2nd, ... allocation failing returns
 * -ENOMEM, leaves no temporary file and does not touch an existing file. */
#include "test.h"
#include "../src/internal.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

static int temps_in(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp-")) n++;
    if (d) closedir(d);
    return n;
}

static int fill_ones(void *ctx, void *dst, uint64_t off, size_t len) {
    (void)ctx, (void)off;
    memset(dst, 1, len);
    return 0;
}

TEST(allocfail_safetensors_writer) {
    const char *dir = pt_tmppath("stw-oom");
    mkdir(dir, 0700);
    char path[4096];
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    CHECK_OK(pt_write_file(path, "old", 3));
    float x[4] = {1, 2, 3, 4};
    uint64_t s4[] = {4}, s2[] = {2, 3};
    pagein_write_tensor t[3] = {
        {"b", PAGEIN_DTYPE_F32, 1, s4, x, NULL, NULL},
        {"a", PAGEIN_DTYPE_BF16, 2, s2, NULL, fill_ones, NULL},
        {"c\n\"", PAGEIN_DTYPE_U8, 0, NULL, x, NULL, NULL},
    };
    const char *k[] = {"format"}, *v[] = {"pt"};
    pagein_write_opts o = PAGEIN_WRITE_OPTS_INIT;
    o.meta_keys = k, o.meta_values = v, o.n_meta = 1;
    long k_ok = -1;
    for (long n = 0; n < 1000; n++) {
        pi_alloc_fail_after(n);
        int rc = pagein_safetensors_write(path, t, 3, &o);
        pi_alloc_fail_after(-1);
        CHECK_EQ(temps_in(dir), 0);
        if (rc == 0) {
            k_ok = n;
            break;
        }
        CHECK_EQ(rc, -ENOMEM);
        size_t len;
        char *b = pt_read_file(path, &len);
        CHECK(b && len == 3 && memcmp(b, "old", 3) == 0);
        free(b);
    }
    CHECK(k_ok > 2);
    pagein_file *f;
    CHECK_OK(pagein_open(&f, path, NULL));
    CHECK_EQ(pagein_tensor_count(f), 3);
    pagein_close(f);
    return PASS;
}
