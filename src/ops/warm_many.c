/* warm_many.c - pagein_cache_warm_many (include/pagein.h): many
 * plain files warmed as one plan of the range engine. In ops/ beside
 * warm.c: calls go downward, ops -> engine -> source. */
#include "../engine/engine.h"
#include "../io/io.h"
#include "../file/file.h"

/* ---- many files warmed in one engine run -------------------------------- */

/* The same as pagein_cache_warm on each file, as one run of the range
 * engine over all of them: every file's requests share one queue of
 * `threads` (0 = chosen from the storage) in flight, so a folder of small
 * files on a latency-bound filesystem costs about files / depth round trips
 * instead of one per file. */
int pagein_cache_warm_many(const pagein_cache_file *const *cs, size_t n, uint64_t off, uint64_t len,
                           unsigned threads) {
    pi_err_clear();
    if (!cs && n) return pi_err(PAGEIN_E_INVALID, "pagein_cache_warm_many: NULL files");
    if (n == 0) return 0;
    if (n > UINT32_MAX) return pi_err(PAGEIN_E_LIMIT, "pagein_cache_warm_many: %zu files", n);
    struct pi_source **srcs = pi_calloc(n, sizeof *srcs);
    struct pi_span *sp = pi_calloc(n, sizeof *sp);
    int rc = 0;
    size_t ns = 0;
    if (!srcs || !sp) {
        rc = pi_err(-ENOMEM, "out of memory for %zu files", n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (!cs[i]) {
            rc = pi_err(PAGEIN_E_INVALID, "pagein_cache_warm_many: file %zu is NULL", i);
            goto out;
        }
        const char *path;
        uint64_t size;
        int fd = pi_cache_file_fd(cs[i], &path, &size);
        if ((rc = pi_source_from_fd(&srcs[i], fd, path, 0)) < 0) goto out;
        uint64_t s = srcs[i]->size < size ? srcs[i]->size : size; /* a file that shrank since open: what is left */
        uint64_t l = off >= s ? 0 : (len == 0 || len > s - off ? s - off : len);
        if (l) sp[ns++] = (struct pi_span){(uint32_t)i, off, l, NULL};
    }
    struct pi_engine_opts o = {.deliver = PI_DELIVER_PAGECACHE, .depth = threads, .max_gap = UINT64_MAX};
    rc = ns ? pi_engine_run(srcs, n, sp, ns, &o, NULL) : 0;
out:
    for (size_t i = 0; srcs && i < n; i++) pi_source_close(srcs[i]);
    pi_free(srcs);
    pi_free(sp);
    return rc;
}
