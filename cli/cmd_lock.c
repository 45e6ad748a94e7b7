/* cmd_lock.c - `pagein lock`: mlock a model (or layers, tensors, files) and hold it. The work is in cli/cache.c. */
#include "cache.h"
#include "cli.h"

static int lock_main(int argc, char **argv) { return cache_main(CACHE_LOCK, argc, argv); }

CLI_COMMAND(lock, "lock", "mlock a model (or layers, tensors, files) and hold it", lock_main)
