/* bench_remote.c - the program behind `pagein bench remote [--json]` (the
 * CLI's cli/cmd_bench_remote.c runs it; it runs on its own too, with the
 * same arguments): runs bench/remote.sh (pagein pull against curl, aria2c
 * -x16 -s16 and fsspec cat_ranges from nginx emulating an object store;
 * docs/REMOTE.md, docs/BENCHMARKS.md) with PAGEIN set to the pagein tool
 * (the build tree's, or PREFIX/bin/pagein for PREFIX/libexec/pagein/). The
 * script is found next to the build (BUILD/../bench/remote.sh) or under
 * PAGEIN_REPO. With --svg FILE the script runs as a child and writes the
 * figure's numbers for FILE (pull's MB/s over time, every tool's mean MB/s
 * as a line). */
#include "cli.h"
#include "svg.h"

#include "bench.h"

#include <errno.h>
#include <stdio.h>
#include <sys/wait.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Draws the figure from the script's lines: "ref TOOL MB/s", "point SECONDS MB/s". */
static int draw_svg(const char *svg, const char *data) {
    FILE *f = fopen(data, "r");
    if (!f) {
        cli_error("bench remote", 0, "cannot write %s: the benchmark wrote no figure data (%s)", svg, strerror(errno));
        return -1;
    }
    double px[4096], py[4096], refs[8];
    char labels[8][64], keys[8][48];
    const char *lab[8], *key[8];
    size_t np = 0, nr = 0;
    char line[256], w[32], rate[32] = "?";
    unsigned long long size = 0;
    int delay = 0, conns = 0;
    while (fgets(line, sizeof line, f)) {
        double a, b;
        if (sscanf(line, "point %lf %lf", &a, &b) == 2 && np < 4096) px[np] = a, py[np++] = b;
        else if (sscanf(line, "ref %31s %lf", w, &a) == 2 && nr < 8) {
            snprintf(labels[nr], sizeof labels[nr], "%s (mean)", w);
            snprintf(keys[nr], sizeof keys[nr], "%s/MB_per_s", w);
            lab[nr] = labels[nr], key[nr] = keys[nr], refs[nr++] = a;
        } else if (sscanf(line, "size %llu", &size) == 1 || sscanf(line, "rate %31s", rate) == 1 ||
                   sscanf(line, "first_byte_ms %d", &delay) == 1 || sscanf(line, "connections %d", &conns) == 1) {
        }
    }
    fclose(f);
    char title[256], note[256];
    snprintf(title, sizeof title, "pagein bench remote: pull's throughput over time, %.1f MB", size / 1e6);
    snprintf(note, sizeof note,
             "nginx %s a connection, %d ms first byte; pull -c %d, last run: MB/s of chunks done per 10th of the "
             "run; dashed: means",
             rate, delay, conns);
    struct svg_series ser = {"pagein pull", px, py, np};
    struct svg_lines l = {.title = title, .xunit = "seconds", .yunit = "MB/s", .fmt = "%.1f", .ser = &ser,
                          .nser = 1, .refs = refs, .ref_labels = lab, .ref_keys = key, .nref = nr, .note = note};
    int rc = np || nr ? svg_line_chart(svg, &l) : -EINVAL;
    if (rc < 0) cli_error("bench remote", 0, "cannot write %s: %s", svg, rc == -EINVAL ? "nothing measured" : strerror(-rc));
    return rc;
}

/* The pagein tool into exe (PATH_MAX bytes): beside this program in the
 * build tree, or PREFIX/bin/pagein when this is PREFIX/libexec/pagein/. */
static int find_tool(char *exe) {
    char dir[PATH_MAX], path[PATH_MAX + 32];
    bench_tool_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/pagein", dir);
    if (access(path, X_OK) != 0) snprintf(path, sizeof path, "%s/../../bin/pagein", dir);
    if (access(path, X_OK) == 0 && realpath(path, exe)) return 0;
    cli_error("bench remote", 0, "cannot find the pagein tool (looked for %s/pagein and %s)", dir, path);
    return -1;
}

static int bench_remote_main(int argc, char **argv) {
    char exe[PATH_MAX], script[PATH_MAX + 64];
    if (find_tool(exe) < 0) return EXIT_USAGE;
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
    const char *svg = NULL;
    int k = 2;
    for (int i = 1; i < argc && k < 7; i++) {
        if (!strcmp(argv[i], "--svg") && i + 1 < argc) svg = argv[++i];
        else args[k++] = argv[i];
    }
    args[k] = NULL;
    if (svg) {
        char data[] = "/tmp/pagein-bench-remote-figure-XXXXXX";
        int fd = mkstemp(data);
        if (fd < 0) {
            cli_error("bench remote", 0, "cannot create a temporary file for %s: %s", svg, strerror(errno));
            return EXIT_USAGE;
        }
        close(fd);
        setenv("PAGEIN_BENCH_FIGURE", data, 1);
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            execvp("bash", args);
            _exit(127);
        }
        int st = 0;
        while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
        int rc = pid < 0 ? EXIT_USAGE : WIFEXITED(st) ? WEXITSTATUS(st) : EXIT_USAGE;
        if (rc == EXIT_OK && draw_svg(svg, data) < 0) rc = EXIT_USAGE;
        unlink(data);
        return rc;
    }
    execvp("bash", args);
    cli_error("bench remote", 0, "cannot run bash %s", script);
    return EXIT_USAGE;
}

int main(int argc, char **argv) { return bench_remote_main(argc, argv); }
