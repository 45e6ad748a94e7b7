/* inspect_dataset.c - `pagein inspect` on training data: a shard of any
 * format of the dataset-format table (Arrow, WebDataset tar, MDS,
 * JSONL/text incl. .gz/.zst, Megatron .idx/.bin, records) or a folder of
 * shards as a whole (a `datasets` save_to_disk folder, an MDS folder, a
 * folder of tar shards). pagein_dataset_open() indexes it, timed, with the
 * bytes it read (local files: /proc/self/io rchar); pagein_dataset_describe()
 * says the rest. Uses only <pagein.h>. */
#include "inspect.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* rchar of /proc/self/io (bytes read by read/pread), or -1. */
static int64_t rchar(void) {
    FILE *f = fopen("/proc/self/io", "r");
    if (!f) return -1;
    char line[128];
    long long v = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "rchar: %lld", &v) == 1) break;
    fclose(f);
    return v;
}

int inspect_dataset(const char *path, int json, int all, int quiet_fail) {
    pagein_dataset_opts o = PAGEIN_DATASET_OPTS_INIT;
    pagein_dataset *d = NULL;
    /* a Megatron pair is named by its .idx, its .bin or its prefix: the
     * dataset-format table's companion files resolve it */
    int64_t r0 = rchar();
    double t0 = cli_now();
    int rc = pagein_dataset_open(&d, path, &o);
    double secs = cli_now() - t0;
    int64_t r1 = rchar();
    if (rc < 0) {
        if (quiet_fail) return -1;
        cli_error("inspect", rc, "%s", path);
        return rc > -4096 || rc == PAGEIN_E_REMOTE ? EXIT_USAGE : EXIT_INVALID;
    }
    char *s = NULL;
    rc = pagein_dataset_describe(d, (json ? PAGEIN_DESCRIBE_JSON : 0) | (all ? PAGEIN_DESCRIBE_ALL : 0), &s);
    pagein_dataset_close(d);
    if (rc < 0) {
        cli_error("inspect", rc, "%s", path);
        return EXIT_USAGE;
    }
    size_t sl = strlen(s);
    while (sl && s[sl - 1] == '\n') s[--sl] = 0;
    long long rb = r0 >= 0 && r1 >= r0 && !pagein_is_url(path) ? (long long)(r1 - r0) : -1;
    if (json) {
        fputs("{\"file\": ", stdout);
        cli_json_str(stdout, path, strlen(path));
        printf(", \"kind\": \"dataset\", \"open\": {\"seconds\": %.6f, \"read_bytes\": ", secs);
        if (rb >= 0) printf("%lld", rb);
        else fputs("null", stdout);
        printf("}, \"dataset\": %s}\n", s);
    } else {
        printf("dataset:   %s\n", path);
        printf("%s\n", s);
        printf("\nopen:      %.3f s", secs);
        if (rb >= 0) printf(", %lld bytes read (the index cost; a cached index costs less)", rb);
        putchar('\n');
    }
    free(s);
    return fflush(stdout) == 0 ? EXIT_OK : EXIT_USAGE;
}
