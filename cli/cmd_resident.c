/* cmd_resident.c - `pagein resident`: show which files, layers and tensors are in the page cache. The work is in cli/cache.c. */
#include "cache.h"
#include "cli.h"

static int resident_main(int argc, char **argv) { return cache_main(CACHE_RESIDENT, argc, argv); }

CLI_COMMAND(resident, "resident", "show which files, layers and tensors are in the page cache", resident_main)
