/* cmd_bench.c - `pagein bench` alone, or with an unknown suite. Each suite is
 * its own command registered as "bench-SUITE" (cmd_bench_load.c,
 * cmd_bench_share.c, cmd_bench_shuffle.c: a front for bench/bench_shuffle.c);
 * main.c runs `pagein bench SUITE`
 * as that command, so suites never edit this file. */
#include "cli.h"

static int bench_main(int argc, char **argv) {
    int help = argc >= 2 && cli_is_help(argv[1]);
    FILE *out = help ? stdout : stderr;
    if (argc >= 2 && !help) fprintf(stderr, "pagein bench: unknown suite '%s'\n", argv[1]);
    /* the suites are the registered bench-* commands: a new suite is
     * listed without an edit here */
    fprintf(out, "usage: pagein bench SUITE [ARGS...]\n"
                 "\n"
                 "suites:\n");
    cli_print_subcommands(out, "bench");
    fprintf(out, "\n"
                 "`pagein bench SUITE --help` documents each (also runnable as `pagein bench-SUITE`).\n");
    return help ? EXIT_OK : EXIT_USAGE;
}

CLI_COMMAND(bench, "bench", "run a benchmark suite: load, share, shuffle, gpu, remote, ... (pagein bench --help)", bench_main)
