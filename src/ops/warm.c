/* warm.c - pagein_cache_warm: a byte range of any file into the page cache,
 * as a PAGECACHE plan of one span on the range engine (src/engine/):
 * buffered reads into per-request scratch buffers, `threads` (0 = chosen
 * from the storage) in flight. Unlike touching a mapping, a file that
 * shrinks underneath only shortens the span (the source's size is taken
 * now), never SIGBUS. Lives above io/ (residency.c keeps the file record):
 * calls go downward, ops/ -> engine/ -> source/. */
#include "../engine/engine.h"
#include "../io/io.h"
#include "../file/file.h"

int pagein_cache_warm(const pagein_cache_file *c, uint64_t off, uint64_t len, unsigned threads) {
    if (!c) return pi_err(PAGEIN_E_INVALID, "pagein_cache_warm: NULL file");
    const char *path;
    uint64_t size;
    int fd = pi_cache_file_fd(c, &path, &size);
    if (off >= size) return 0;
    if (len == 0 || len > size - off) len = size - off;
    struct pi_source *src;
    int rc = pi_source_from_fd(&src, fd, path, 0);
    if (rc < 0) return rc;
    if (off >= src->size) len = 0; /* shrank since open */
    else if (len > src->size - off) len = src->size - off;
    struct pi_span sp = {0, off, len, NULL};
    struct pi_engine_opts o = {.deliver = PI_DELIVER_PAGECACHE, .depth = threads, .max_gap = UINT64_MAX};
    rc = len ? pi_engine_run(&src, 1, &sp, 1, &o, NULL) : 0;
    pi_source_close(src);
    return rc;
}
