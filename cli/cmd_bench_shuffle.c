/* cmd_bench_shuffle.c - `pagein bench shuffle` (= `pagein bench-shuffle`):
 * a thin front. The benchmark and its shard writers (records, WebDataset,
 * MDS, JSONL, Arrow IPC) are the program bench/bench_shuffle.c, built
 * beside the tool (BUILD/bench/bench_shuffle) and installed under
 * PREFIX/libexec/pagein/; this command runs it with the same arguments.
 * docs/BENCHMARKS.md explains the benchmark. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#define PROG "bench_shuffle"

static int bench_shuffle_front(int argc, char **argv) {
    (void)argc;
    char self[PATH_MAX];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) snprintf(self, sizeof self, ".");
    else {
        self[sl] = 0;
        char *slash = strrchr(self, '/');
        if (slash) *slash = 0;
    }
    /* the build tree, next to the tool, an installed tree */
    static const char *const where[] = {"%s/bench/" PROG, "%s/" PROG, "%s/../libexec/pagein/" PROG};
    char tried[3][PATH_MAX + 32];
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
        snprintf(tried[i], sizeof tried[i], where[i], self);
        if (access(tried[i], X_OK) != 0) continue;
        argv[0] = tried[i];
        execv(tried[i], argv);
        int e = errno;
        cli_error("bench shuffle", 0, "cannot run %s: %s", tried[i], strerror(e));
        return EXIT_USAGE;
    }
    cli_error("bench shuffle", 0, "the benchmark program %s is not there (looked for %s, %s and %s): build it with make",
              PROG, tried[0], tried[1], tried[2]);
    return EXIT_USAGE;
}

CLI_COMMAND(bench_shuffle, "bench-shuffle", "training-data benchmark: shuffled reads, cold, local and slowfs",
            bench_shuffle_front)
