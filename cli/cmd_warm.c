/* cmd_warm.c - `pagein warm`: page a model (or layers, tensors, files) into the page cache, in parallel. The work is in cli/cache.c. */
#include "cache.h"
#include "cli.h"

static int warm_main(int argc, char **argv) { return cache_main(CACHE_WARM, argc, argv); }

CLI_COMMAND(warm, "warm", "page a model (or layers, tensors, files) into the page cache, in parallel", warm_main)
