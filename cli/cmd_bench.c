/* cmd_bench.c - `pagein bench` alone, or with an unknown suite. Each suite is
 * its own command registered as "bench-SUITE" (cmd_bench_load.c,
 * cmd_bench_share.c, cmd_bench_shuffle.c, ...); main.c runs `pagein bench SUITE`
 * as that command, so suites never edit this file. Each suite is a thin
 * front: its benchmark is the program bench/bench_SUITE.c, run through
 * cli_bench_exec, so no benchmark ships inside the tool. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

int cli_bench_exec(const char *cmd, const char *prog, char **argv) {
    char self[PATH_MAX];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) snprintf(self, sizeof self, ".");
    else {
        self[sl] = 0;
        char *slash = strrchr(self, '/');
        if (slash) *slash = 0;
    }
    /* the build tree, next to the tool, an installed tree */
    static const char *const where[] = {"%s/bench/%s", "%s/%s", "%s/../libexec/pagein/%s"};
    char tried[3][PATH_MAX + 64];
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
        snprintf(tried[i], sizeof tried[i], where[i], self, prog);
        if (access(tried[i], X_OK) != 0) continue;
        argv[0] = tried[i];
        execv(tried[i], argv);
        int e = errno;
        cli_error(cmd, 0, "cannot run %s: %s", tried[i], strerror(e));
        return EXIT_USAGE;
    }
    cli_error(cmd, 0, "the benchmark program %s is not there (looked for %s, %s and %s): build it with make", prog,
              tried[0], tried[1], tried[2]);
    return EXIT_USAGE;
}

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
