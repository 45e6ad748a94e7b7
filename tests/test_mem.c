/*
 * test_mem.c - the memory policy (src/core/mem.c): reuse of given-back
 * blocks, populating ahead without changing a byte, waiting for a range,
 * the page-size advice, and READ's counters in the access trace.
 */
#include "test.h"
#include "../src/internal.h"
#include "../src/core/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Resident pages of [p, p + len) (mincore). */
static size_t resident(const void *p, size_t len) {
    size_t n = (len + 4095) / 4096, r = 0;
    unsigned char *v = malloc(n);
    if (!v || mincore((void *)p, len, v) != 0) {
        free(v);
        return 0;
    }
    for (size_t i = 0; i < n; i++) r += v[i] & 1;
    free(v);
    return r;
}

/* LazyFree bytes of the process (MADV_FREE pages not yet taken), -1 if
 * the kernel does not say. */
static long long lazyfree(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "LazyFree: %lld kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

TEST(mem_reuse_first) {
    setenv("PAGEIN_MEM_KEEP", "64M", 1);
    pi_mem_trim();
    size_t cap = 0, cap2 = 0;
    int re = -1;
    uint8_t *p = pi_mem_get(5u << 20, &cap, 0, &re);
    CHECK(p != NULL);
    if (!p) return PASS;
    CHECK_EQ(cap, 6u << 20); /* 2 MiB multiple */
    CHECK_EQ(re, 0);
    memset(p, 7, cap);
    long long lf0 = lazyfree();
    pi_mem_put(p, cap);
    CHECK_EQ(pi_mem_kept(), 6u << 20);
    if (lf0 >= 0) /* kept pages are MADV_FREE: the kernel may take them under pressure */
        CHECK(lazyfree() - lf0 >= (long long)cap / 2);
    uint8_t *q = pi_mem_get(6u << 20, &cap2, 0, &re); /* fits: handed back, still resident */
    CHECK(q == p);
    CHECK_EQ(re, 1);
    CHECK_EQ(cap2, cap);
    CHECK_EQ(pi_mem_kept(), 0);
    CHECK_EQ(resident(q, cap2), cap2 / 4096);
    pi_mem_put(q, cap2);
    uint8_t *big = pi_mem_get(16u << 20, &cap2, 0, &re); /* larger than any kept block: fresh */
    CHECK_EQ(re, 0);
    pi_mem_put(big, cap2);
    uint8_t *nr = pi_mem_get(2u << 20, &cap2, 1, &re); /* noreserve: never from the list */
    CHECK_EQ(re, 0);
    munmap(nr, cap2);
    setenv("PAGEIN_MEM_KEEP", "0", 1); /* nothing kept */
    pi_mem_trim();
    p = pi_mem_get(2u << 20, &cap, 0, &re);
    pi_mem_put(p, cap);
    CHECK_EQ(pi_mem_kept(), 0);
    unsetenv("PAGEIN_MEM_KEEP");
    return PASS;
}

/* pi_mem_grow: small arrays on the heap, large ones in kept blocks that a
 * released array hands to the next one (a decoded column's arrays). */
TEST(mem_grow_reuses_released_arrays) {
    setenv("PAGEIN_MEM_KEEP", "64M", 1);
    pi_mem_trim();
    uint32_t *a = NULL;
    size_t cap = 0;
    CHECK_EQ(pi_mem_grow((void **)&a, &cap, 1000, sizeof *a), 0);
    CHECK(cap >= 1000 && cap * sizeof *a < (1u << 20));
    for (uint32_t i = 0; i < 1000; i++) a[i] = i * 7;
    CHECK_EQ(pi_mem_grow((void **)&a, &cap, 700000, sizeof *a), 0); /* 2.8 MB: a block, contents kept */
    CHECK(cap >= 700000);
    int same = 1;
    for (uint32_t i = 0; i < 1000; i++) same &= a[i] == i * 7;
    CHECK(same);
    a[699999] = 5;
    CHECK_EQ(pi_mem_grow((void **)&a, &cap, 100, sizeof *a), 0); /* no shrink */
    CHECK_EQ(a[699999], 5);
    void *first = a;
    size_t firstcap = cap;
    memset(a, 1, cap * sizeof *a); /* every page written once */
    pi_mem_release(a, cap, sizeof *a);
    uint64_t before = pi_mem_grow_reused();
    uint32_t *b = NULL;
    size_t bcap = 0;
    CHECK_EQ(pi_mem_grow((void **)&b, &bcap, 700000, sizeof *b), 0);
#if !defined(__SANITIZE_ADDRESS__)
    if (cap * sizeof *a >= (1u << 20)) { /* not an ASan build (arrays stay on the heap there) */
        CHECK(b == first); /* the released block, resident */
        CHECK_EQ(bcap, firstcap);
        CHECK(pi_mem_grow_reused() > before);
        CHECK_EQ(resident(b, bcap * sizeof *b), bcap * sizeof *b / 4096);
    }
#endif
    pi_mem_release(b, bcap, sizeof *b);
    uint8_t *c = NULL;
    size_t ccap = 0;
    CHECK(pi_mem_grow((void **)&c, &ccap, SIZE_MAX, 8) < 0); /* refused, unchanged */
    CHECK(c == NULL && ccap == 0);
    pi_mem_release(NULL, 0, 1);
    pi_mem_trim();
    unsetenv("PAGEIN_MEM_KEEP");
    return PASS;
}

TEST(mem_fill_populates_without_changing_bytes) {
    size_t cap[3];
    int re;
    size_t len[3] = {9u << 20, 3u << 20, 1};
    void *p[3];
    for (int i = 0; i < 3; i++) {
        p[i] = pi_mem_get(len[i], &cap[i], 1, &re);
        CHECK(p[i] != NULL);
        if (!p[i]) return PASS;
    }
    /* bytes written before the fill stay */
    for (size_t i = 0; i < (1u << 20); i += 4096) ((uint8_t *)p[0])[i] = (uint8_t)(i >> 12);
    struct pi_mem_fill *f = pi_mem_fill_start(p, len, 3, 2, PI_MEM_PAGES_MEASURE);
    CHECK(f != NULL);
    pi_mem_fill_wait(f, (uint8_t *)p[0] + (8u << 20), 1u << 20); /* the last chunk of region 0 */
    CHECK(pi_mem_fill_ready(f, p[0], len[0]));
    CHECK(pi_mem_fill_ready(f, &re, sizeof re)); /* outside every region */
    pi_mem_fill_wait(f, &re, sizeof re);
    pi_mem_fill_wait(f, p[2], 1);
    struct pi_mem_stats st = {0};
    pi_mem_fill_end(f, &st);
    CHECK_EQ(resident(p[0], len[0]), len[0] / 4096);
    CHECK_EQ(resident(p[1], len[1]), len[1] / 4096);
    CHECK_EQ(st.populated, len[0] + len[1] + 4096);
    CHECK(st.huge <= st.populated);
    CHECK(st.fault_s >= 0 && st.wait_s >= 0);
    int same = 1;
    for (size_t i = 0; i < (1u << 20); i += 4096) same &= ((uint8_t *)p[0])[i] == (uint8_t)(i >> 12);
    CHECK(same);
    for (int i = 0; i < 3; i++) munmap(p[i], cap[i]);
    pi_mem_fill_end(NULL, &st);                       /* NULL: nothing */
    CHECK(pi_mem_fill_start(p, len, 0, 1, PI_MEM_PAGES_SMALL) == NULL); /* no regions */
    return PASS;
}

TEST(mem_page_size_forced_and_measured) {
    size_t cap, len = 8u << 20;
    int re;
    char fl[8];
    unsetenv("PAGEIN_READ_HUGEPAGE");
    void *p = pi_mem_get(len, &cap, 1, &re);
    CHECK(p != NULL);
    if (!p) return PASS;
    pi_mem_populate(p, len, PI_MEM_PAGES_SMALL, NULL);
    pt_vma_thp(p, fl, sizeof fl);
    CHECK_STR(fl, "nh");
    munmap(p, cap);
    setenv("PAGEIN_READ_HUGEPAGE", "1", 1); /* forces a measured block */
    p = pi_mem_get(len, &cap, 1, &re);
    struct pi_mem_stats st = {0};
    pi_mem_populate(p, len, PI_MEM_PAGES_MEASURE, &st);
    pt_vma_thp(p, fl, sizeof fl);
    CHECK_STR(fl, "hg");
    CHECK_EQ(st.huge, len);
    munmap(p, cap);
    unsetenv("PAGEIN_READ_HUGEPAGE");
    pi_mem_forget_rates();
    p = pi_mem_get(len, &cap, 1, &re); /* measured: huge pages first */
    memset(&st, 0, sizeof st);
    pi_mem_populate(p, len, PI_MEM_PAGES_MEASURE, &st);
    pt_vma_thp(p, fl, sizeof fl);
    CHECK_STR(fl, "hg");
    CHECK(st.huge >= (4u << 20));
    printf("    note: huge pages populated at %.2f GB/s here (%llu of %zu bytes as huge pages)\n",
           st.fault_s > 0 ? st.populated / st.fault_s / 1e9 : 0.0, (unsigned long long)st.huge, len);
    munmap(p, cap);
    return PASS;
}

/* Writes a safetensors file at path holding one u8 tensor "w" of nb bytes
 * (byte i = i * mul + add); returns those bytes (malloc'd) or NULL, the
 * failure checked. */
static uint8_t *write_u8_model(const char *path, size_t nb, unsigned mul, unsigned add) {
    uint8_t *d = malloc(nb);
    CHECK(d != NULL);
    if (!d) return NULL;
    for (size_t i = 0; i < nb; i++) d[i] = (uint8_t)(i * mul + add);
    uint64_t shape[1] = {nb};
    pagein_write_tensor w = {"w", PAGEIN_DTYPE_U8, 1, shape, d, NULL, NULL};
    int rc = pagein_safetensors_write(path, &w, 1, NULL);
    CHECK_OK(rc);
    if (rc) free(d);
    return rc ? NULL : d;
}

TEST(mem_read_counters_in_trace) {
    enum { NB = 5 << 20 };
    const char *path = pt_tmppath("mem.safetensors");
    uint8_t *d = write_u8_model(path, NB, 31, 7);
    if (!d) return FAIL;
    setenv("PAGEIN_MEM_KEEP", "64M", 1);
    setenv("PAGEIN_MEM_THREADS", "1", 1); /* populating ahead, off by default */
    pi_mem_trim();
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_READ;
    for (int round = 0; round < 2; round++) {
        pagein_model *m = NULL;
        CHECK_OK(pagein_model_open(&m, path, &o));
        if (!m) break;
        const pagein_tensor *t = pagein_model_tensor_get(m, "w");
        CHECK(t && memcmp(t->data, d, NB) == 0);
        pagein_io_stats s;
        CHECK_OK(pagein_model_io_stats(m, &s));
        if (round == 0) { /* fresh memory, populated ahead */
            CHECK(s.mem_bytes_populated >= NB);
            CHECK_EQ(s.mem_bytes_reused, 0);
        } else { /* the first model's buffer again */
            CHECK_EQ(s.mem_bytes_populated, 0);
            CHECK(s.mem_bytes_reused >= NB);
        }
        pagein_model_close(m);
    }
    pagein_model *m = NULL; /* default: no fill, nothing populated ahead, the bytes still right */
    unsetenv("PAGEIN_MEM_THREADS");
    pi_mem_trim();
    CHECK_OK(pagein_model_open(&m, path, &o));
    if (m) {
        const pagein_tensor *t = pagein_model_tensor_get(m, "w");
        CHECK(t && memcmp(t->data, d, NB) == 0);
        pagein_io_stats s;
        CHECK_OK(pagein_model_io_stats(m, &s));
        CHECK_EQ(s.mem_bytes_populated, 0);
        pagein_model_close(m);
    }
    pi_mem_trim();
    unsetenv("PAGEIN_MEM_KEEP");
    unlink(path);
    free(d);
    return PASS;
}

/* Free pages of the hugetlb pool of 2 MiB pages (0 if none or not 2 MiB). */
static long hugetlb_free_2m(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long fr = 0, kb = 0;
    while (f && fgets(line, sizeof line, f)) {
        sscanf(line, "HugePages_Free: %ld", &fr);
        sscanf(line, "Hugepagesize: %ld kB", &kb);
    }
    if (f) fclose(f);
    return kb == 2048 ? fr : 0;
}

/* PAGEIN_READ_HUGETLB=1: READ's fresh buffers from the hugetlb pool when
 * it has the pages (counted in mem_bytes_pool), ordinary memory otherwise
 * (an empty pool, the usual case: nothing fails), the bytes right either way. */
TEST(mem_read_hugetlb_pool) {
    enum { NB = 3 << 20 };
    const char *path = pt_tmppath("pool.safetensors");
    uint8_t *d = write_u8_model(path, NB, 13, 1);
    if (!d) return FAIL;
    setenv("PAGEIN_READ_HUGETLB", "1", 1);
    pi_mem_trim();
    long before = hugetlb_free_2m();
    size_t cap = 0;
    int re = -1, pool = -1;
    void *b = pi_mem_get_read(5u << 20, &cap, &re, &pool);
    CHECK(b != NULL);
    CHECK_EQ(re, 0);
    CHECK_EQ(cap, 6u << 20);
    CHECK_EQ(pool, before >= 3 ? 1 : 0);
    if (b) munmap(b, cap);
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_READ;
    pagein_model *m = NULL;
    before = hugetlb_free_2m();
    CHECK_OK(pagein_model_open(&m, path, &o));
    if (m) {
        const pagein_tensor *t = pagein_model_tensor_get(m, "w");
        CHECK(t && memcmp(t->data, d, NB) == 0);
        pagein_io_stats s;
        CHECK_OK(pagein_model_io_stats(m, &s));
        if (before >= 2) CHECK(s.mem_bytes_pool >= NB);
        else CHECK_EQ(s.mem_bytes_pool, 0);
        printf("    note: hugetlb pool: %ld free 2 MiB pages, %llu bytes read into them\n", before,
               (unsigned long long)s.mem_bytes_pool);
        pagein_model_close(m);
    }
    pi_mem_trim();
    unsetenv("PAGEIN_READ_HUGETLB");
    unlink(path);
    free(d);
    return PASS;
}
