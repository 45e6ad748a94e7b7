/* file.h - the file layer (src/file/): a model file opened over a source
 * and a format (file.c), the safety checks of a checkpoint (safety.c) and
 * the page-cache view of files (residency.c). Above source/ and format/,
 * below engine/, load/ and ops/. Most of it is public API (pagein.h); this
 * header holds what the layers above need besides. */
#ifndef PAGEIN_FILE_H
#define PAGEIN_FILE_H

#include "../internal.h"

/* ==== page-cache files (residency.c) for their warm (ops/warm.c) ========= */
/* The descriptor of c, its path and its size at open. */
int pi_cache_file_fd(const pagein_cache_file *c, const char **path, uint64_t *size);

#endif
