/* test_cache_many.c - many plain files at once:
 * pagein_cache_open_many opens every path it can, says which failed and
 * keeps the order; pagein_cache_warm_many warms every file's range as one
 * engine run (residency checked with mincore through
 * pagein_cache_residency). Uses only pagein.h. */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/vfs.h>
#include <unistd.h>

#define NF 40

static int mem_fs(void) {
    struct statfs sf;
    if (statfs(pt_tmpdir(), &sf) != 0) return 0;
    return sf.f_type == 0x01021994 /* TMPFS */ || sf.f_type == (long)0x858458f6 /* RAMFS */;
}

TEST(cache_open_many_and_warm_many) {
    char *paths[NF];
    uint64_t seed = pt_seed();
    for (int i = 0; i < NF; i++) {
        char name[32];
        snprintf(name, sizeof name, "many-%d.dat", i);
        paths[i] = strdup(pt_tmppath(name));
        size_t n = 4096 * (size_t)(1 + i % 5) + (size_t)i;
        uint8_t *b = malloc(n);
        CHECK(b != NULL);
        if (!b) return FAIL;
        for (size_t k = 0; k < n; k++) b[k] = (uint8_t)(pt_rand(&seed) >> 56);
        if (i != 7) CHECK_OK(pt_write_file(paths[i], b, n)); /* file 7 does not exist */
        int fd = open(paths[i], O_RDONLY);
        if (fd >= 0) {
            fsync(fd);
            close(fd);
        }
        free(b);
    }
    pagein_cache_file *cs[NF];
    int rcs[NF];
    CHECK_EQ(pagein_cache_open_many(cs, (const char *const *)paths, NF, rcs), 1);
    for (int i = 0; i < NF; i++) {
        if (i == 7) {
            CHECK(cs[i] == NULL && rcs[i] == -ENOENT);
            continue;
        }
        CHECK(cs[i] != NULL && rcs[i] == 0);
        if (cs[i]) CHECK_EQ(pagein_cache_size(cs[i]), 4096 * (uint64_t)(1 + i % 5) + (uint64_t)i); /* in order */
    }
    /* warm_many: every file whole, as one run; then all resident */
    const pagein_cache_file *ok[NF];
    size_t k = 0;
    for (int i = 0; i < NF; i++)
        if (cs[i]) ok[k++] = cs[i];
    if (!mem_fs())
        for (size_t i = 0; i < k; i++) pagein_cache_evict(ok[i], 0, 0);
    CHECK_OK(pagein_cache_warm_many(ok, k, 0, 0, 8));
    for (size_t i = 0; i < k; i++) {
        pagein_residency r;
        CHECK_OK(pagein_cache_residency(ok[i], 0, 0, &r));
        CHECK_EQ(r.resident_bytes, r.bytes);
    }
    /* a range past every file's end warms nothing and is no error */
    CHECK_OK(pagein_cache_warm_many(ok, k, 1u << 30, 0, 0));
    CHECK_OK(pagein_cache_warm_many(ok, 0, 0, 0, 0));
    CHECK(pagein_cache_warm_many(NULL, 3, 0, 0, 0) < 0);
    for (int i = 0; i < NF; i++) {
        pagein_cache_close(cs[i]);
        free(paths[i]);
    }
    CHECK_EQ(pagein_cache_open_many(cs, NULL, 0, rcs), 0);
    return PASS;
}
