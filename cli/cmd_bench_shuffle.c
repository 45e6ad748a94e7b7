/* cmd_bench_shuffle.c - `pagein bench shuffle` (= `pagein bench-shuffle`):
 * a thin front. The benchmark and its shard writers (records, WebDataset,
 * MDS, JSONL, Arrow IPC) are the program bench/bench_shuffle.c, built
 * beside the tool (BUILD/bench/bench_shuffle) and installed under
 * PREFIX/libexec/pagein/; this command runs it with the same arguments
 * (cli_bench_exec, cmd_bench.c). docs/BENCHMARKS.md explains the benchmark. */
#include "cli.h"

static int bench_shuffle_front(int argc, char **argv) {
    (void)argc;
    return cli_bench_exec("bench shuffle", "bench_shuffle", argv);
}

CLI_COMMAND(bench_shuffle, "bench-shuffle", "training-data benchmark: shuffled reads, cold, local and slowfs",
            bench_shuffle_front)
