/* test_torch_oom.c - white-box (declares the internal allocation hook
 * pi_alloc_fail_after from src/internal.h): every allocation of the PyTorch
 * reader may fail, and each failure is reported cleanly with no leak or
 * crash (run under ASan by make san-test). Uses a checkpoint written by
 * tests/torch_gen.py's module state dict when present, else skips. */
#include "test.h"

#include <errno.h>
#include <stdlib.h>

void pi_alloc_fail_after(long n);

TEST(torch_alloc_failures) {
    const char *p = "fuzz/corpus/torch/modules.pt";
    size_t len = 0;
    void *buf = pt_read_file(p, &len);
    if (!buf) SKIP_BECAUSE("%s not found (run from the repository root)", p);
    pagein_file *f = NULL;
    CHECK_OK(pagein_open_memory(&f, buf, len, "modules.pt", NULL));
    size_t want = pagein_tensor_count(f);
    CHECK(want > 30);
    pagein_close(f);
    int failed = 0, ok = 0;
    for (long n = 0; n < 100000; n++) {
        pi_alloc_fail_after(n);
        f = NULL;
        int rc = pagein_open_memory(&f, buf, len, "modules.pt", NULL);
        pi_alloc_fail_after(-1);
        if (rc == 0) {
            CHECK_EQ(pagein_tensor_count(f), want);
            pagein_close(f);
            ok = 1;
            break;
        }
        CHECK_EQ(rc, -ENOMEM);
        failed++;
    }
    CHECK(ok);
    CHECK(failed > 10);
    free(buf);
    return PASS;
}
