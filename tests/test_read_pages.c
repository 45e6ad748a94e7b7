/*
 * test_read_pages.c - the page size of the READ strategy's buffers (issue
 * 29): huge pages (MADV_HUGEPAGE) unless the VM reports free pages to its
 * host, PAGEIN_HINT_HUGEPAGE asks for them, PAGEIN_READ_HUGEPAGE=0|1
 * forces either. Checked through the buffer's VMA flags in /proc/self/smaps
 * ("hg" = MADV_HUGEPAGE, "nh" = MADV_NOHUGEPAGE), with the bytes read.
 */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { NB = 6 << 20 };

static uint8_t pat(uint64_t o) { return (uint8_t)(o * 37 + (o >> 12) + 5); }

/* Opens path with READ and the given hints; checks the bytes; the VMA
 * flags of the tensor's buffer into flags. */
static int open_read(const char *path, uint32_t hints, char *flags, size_t cap) {
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_READ;
    o.hints = hints;
    pagein_model *m = NULL;
    int rc = pagein_model_open(&m, path, &o);
    CHECK_OK(rc);
    if (rc) return rc;
    const pagein_tensor *t = pagein_model_tensor_get(m, "w");
    CHECK(t != NULL && t->nbytes == NB);
    int bad = !t;
    for (uint64_t i = 0; t && i < t->nbytes; i++)
        if (((const uint8_t *)t->data)[i] != pat(i)) {
            printf("    byte %llu differs\n", (unsigned long long)i);
            bad = 1;
            break;
        }
    CHECK(!bad);
    if (t) pt_vma_thp(t->data, flags, cap);
    pagein_model_close(m);
    return bad;
}

TEST(read_buffer_page_size) {
    uint8_t *d = malloc(NB);
    CHECK(d != NULL);
    if (!d) return PASS;
    for (uint64_t i = 0; i < NB; i++) d[i] = pat(i);
    uint64_t shape[1] = {NB};
    pagein_write_tensor w = {"w", PAGEIN_DTYPE_U8, 1, shape, d, NULL, NULL};
    const char *path = pt_tmppath("pages.safetensors");
    CHECK_OK(pagein_safetensors_write(path, &w, 1, NULL));
    free(d);
    setenv("PAGEIN_MEM_KEEP", "0", 1); /* each open maps its own buffer: its advice is what is checked */
    const char *saved = getenv("PAGEIN_READ_HUGEPAGE");
    char keep[8] = "";
    if (saved) snprintf(keep, sizeof keep, "%s", saved);
    char fl[8];

    setenv("PAGEIN_READ_HUGEPAGE", "1", 1);
    CHECK_OK(open_read(path, 0, fl, sizeof fl));
    CHECK_STR(fl, "hg");
    setenv("PAGEIN_READ_HUGEPAGE", "0", 1);
    CHECK_OK(open_read(path, PAGEIN_HINT_HUGEPAGE, fl, sizeof fl)); /* the variable wins over the hint */
    CHECK_STR(fl, "nh");
    unsetenv("PAGEIN_READ_HUGEPAGE");
    CHECK_OK(open_read(path, PAGEIN_HINT_HUGEPAGE, fl, sizeof fl));
    CHECK_STR(fl, "hg");
    CHECK_OK(open_read(path, 0, fl, sizeof fl)); /* the machine decides: one or the other */
    CHECK(strcmp(fl, "hg") == 0 || strcmp(fl, "nh") == 0);
    printf("    note: without a hint this machine's READ buffers are %s\n",
           strcmp(fl, "hg") == 0 ? "MADV_HUGEPAGE" : "MADV_NOHUGEPAGE (the VM reports free pages to its host)");

    if (saved) setenv("PAGEIN_READ_HUGEPAGE", keep, 1);
    unlink(path);
    return PASS;
}
