/* cmd_evict.c - `pagein evict`: drop a model (or layers, tensors, files) from the page cache. The work is in cli/cache.c. */
#include "cache.h"
#include "cli.h"

static int evict_main(int argc, char **argv) { return cache_main(CACHE_EVICT, argc, argv); }

CLI_COMMAND(evict, "evict", "drop a model (or layers, tensors, files) from the page cache", evict_main)
