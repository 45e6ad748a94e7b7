/* cmd_bench_remote.c - `pagein bench remote [--json]`: runs bench/remote.sh
 * (pagein pull against curl, aria2c -x16 -s16 and fsspec cat_ranges from
 * nginx emulating an object store; docs/REMOTE.md, docs/BENCHMARKS.md) with
 * PAGEIN set to this binary. The script is found next to the build
 * (BUILD/../bench/remote.sh) or under PAGEIN_REPO. */
#include "cli.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int bench_remote_main(int argc, char **argv) {
    char exe[PATH_MAX], script[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        cli_error("bench remote", 0, "cannot find this binary (/proc/self/exe)");
        return EXIT_USAGE;
    }
    exe[n] = 0;
    const char *repo = getenv("PAGEIN_REPO");
    if (repo) {
        snprintf(script, sizeof script, "%s/bench/remote.sh", repo);
    } else {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", exe);
        char *s = strrchr(dir, '/');
        if (s) *s = 0;
        snprintf(script, sizeof script, "%s/../bench/remote.sh", dir);
    }
    if (access(script, R_OK) != 0) {
        cli_error("bench remote", 0, "%s not found (set PAGEIN_REPO to the source tree)", script);
        return EXIT_USAGE;
    }
    setenv("PAGEIN", exe, 1);
    char *args[8] = {"bash", script, NULL};
    int k = 2;
    for (int i = 1; i < argc && k < 7; i++) args[k++] = argv[i];
    args[k] = NULL;
    execvp("bash", args);
    cli_error("bench remote", 0, "cannot run bash %s", script);
    return EXIT_USAGE;
}

CLI_COMMAND(bench_remote, "bench-remote",
            "pull vs curl, aria2c -x16, fsspec cat_ranges from an emulated object store (bench/remote.sh)",
            bench_remote_main)
