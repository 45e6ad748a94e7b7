/* cmd_bench.c - `pagein bench SUITE [ARGS...]` runs the command
 * `pagein bench-SUITE [ARGS...]` (each suite registers its own command, e.g.
 * bench-shuffle in cmd_bench_shuffle.c), so suites never edit this file. */
#include "cli.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int bench_main(int argc, char **argv) {
    if (argc < 2 || cli_is_help(argv[1])) {
        FILE *out = argc < 2 ? stderr : stdout;
        fprintf(out, "usage: pagein bench SUITE [ARGS...]\n"
                     "Runs the benchmark command `pagein bench-SUITE`; see `pagein --help` for the\n"
                     "bench-* commands (e.g. `pagein bench shuffle --help`).\n");
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    char name[128];
    snprintf(name, sizeof name, "bench-%s", argv[1]);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        cli_error("bench", 0, "cannot find the pagein executable");
        return EXIT_USAGE;
    }
    self[n] = 0;
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args) return EXIT_USAGE;
    args[0] = self;
    args[1] = name;
    for (int i = 2; i < argc; i++) args[i] = argv[i];
    execv(self, args);
    cli_error("bench", 0, "cannot run %s %s", self, name);
    free(args);
    return EXIT_USAGE;
}

CLI_COMMAND(bench, "bench", "run a benchmark suite: pagein bench SUITE (see bench-* commands)", bench_main)
