/* cache.h - the page-cache commands (resident, warm, evict, lock) share one
 * driver in cli/cache.c; each cmd_*.c only registers its mode. The driver
 * also accepts vmtouch's flags (docs/PAGE-CACHE.md has the table). */
#ifndef PAGEIN_CLI_CACHE_H
#define PAGEIN_CLI_CACHE_H

enum cache_mode { CACHE_RESIDENT, CACHE_WARM, CACHE_EVICT, CACHE_LOCK };

/* argv[0] is the command name. Returns the exit status. */
int cache_main(enum cache_mode mode, int argc, char **argv);

#endif
