/* cache_many.c - pagein_cache_open_many (include/pagein.h): the page-cache
 * tools' plain files opened at once.
 *
 * `pagein resident|warm|evict|lock DIR` over a folder that is not a model
 * walks it and opens every file (open, fstat, mmap). On a network or FUSE
 * filesystem each open and fstat is a round trip, so 1,000 files one
 * after another cost 1,000 of them before any residency is known. They
 * are opened as a model's shards are (load/model.c add_files): up to
 * pi_source_open_depth at once on the pool (32; PAGEIN_OPEN_DEPTH=N to
 * override, 1: one after another, as before).
 */
#include "../internal.h"
#include "../source/source.h"

#include <stdlib.h>

struct many {
    pagein_cache_file **out;
    const char *const *paths;
    int *rcs;
};

static int one(void *ctx, size_t i) {
    struct many *m = ctx;
    m->out[i] = NULL;
    m->rcs[i] = pagein_cache_open(&m->out[i], m->paths[i]);
    return 0; /* a failure is that file's: the others still open */
}

size_t pagein_cache_open_many(pagein_cache_file **out, const char *const *paths, size_t n, int *rcs) {
    pi_err_clear();
    if (!out || !paths || !rcs) return n;
    unsigned depth = pi_source_open_depth(n ? paths[0] : NULL);
    struct many m = {out, paths, rcs};
    if (n) pi_parallel(n < depth ? (unsigned)n : depth, n, one, &m);
    size_t failed = 0;
    for (size_t i = 0; i < n; i++) failed += rcs[i] < 0;
    return failed;
}

