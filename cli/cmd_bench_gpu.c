/* cmd_bench_gpu.c - `pagein bench gpu` (= `pagein bench-gpu`): a
 * thin front. The benchmark is the program bench/bench_gpu.c, built
 * beside the tool (BUILD/bench/bench_gpu) and installed under
 * PREFIX/libexec/pagein/; this command runs it with the same arguments
 * (cli_bench_exec, cmd_bench.c). */
#include "cli.h"

static int bench_gpu_front(int argc, char **argv) {
    (void)argc;
    return cli_bench_exec("bench gpu", "bench_gpu", argv);
}

CLI_COMMAND(bench_gpu, "bench-gpu", "GPU loading: pinned staging vs stock loaders (pagein bench gpu --help)",
            bench_gpu_front)
