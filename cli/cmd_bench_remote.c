/* cmd_bench_remote.c - `pagein bench remote` (= `pagein bench-remote`): a
 * thin front. The benchmark is the program bench/bench_remote.c (it runs
 * bench/remote.sh with PAGEIN set to this tool), built beside the tool
 * (BUILD/bench/bench_remote) and installed under PREFIX/libexec/pagein/;
 * this command runs it with the same arguments (cli_bench_exec,
 * cmd_bench.c). */
#include "cli.h"

static int bench_remote_front(int argc, char **argv) {
    (void)argc;
    return cli_bench_exec("bench remote", "bench_remote", argv);
}

CLI_COMMAND(bench_remote, "bench-remote",
            "pull vs curl, aria2c -x16, fsspec cat_ranges from an emulated object store (bench/remote.sh)",
            bench_remote_front)
