/* cmd_bench_share.c - `pagein bench share` (= `pagein bench-share`): a
 * thin front. The benchmark is the program bench/bench_share.c, built
 * beside the tool (BUILD/bench/bench_share) and installed under
 * PREFIX/libexec/pagein/; this command runs it with the same arguments
 * (cli_bench_exec, cmd_bench.c). */
#include "cli.h"

static int bench_share_front(int argc, char **argv) {
    (void)argc;
    return cli_bench_exec("bench share", "bench_share", argv);
}

CLI_COMMAND(bench_share, "bench-share", "fork N workers that load one model; per-worker RSS/PSS, PSS sum (also `pagein bench share`)",
            bench_share_front)
