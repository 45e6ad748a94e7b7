/* cmd_bench_load.c - `pagein bench load` (= `pagein bench-load`): a
 * thin front. The benchmark is the program bench/bench_load.c, built
 * beside the tool (BUILD/bench/bench_load) and installed under
 * PREFIX/libexec/pagein/; this command runs it with the same arguments
 * (cli_bench_exec, cmd_bench.c). */
#include "cli.h"

static int bench_load_front(int argc, char **argv) {
    (void)argc;
    return cli_bench_exec("bench load", "bench_load", argv);
}

CLI_COMMAND(bench_load, "bench-load", "benchmark every load strategy cold and warm, with baselines and verdicts (also `pagein bench load`)",
            bench_load_front)
