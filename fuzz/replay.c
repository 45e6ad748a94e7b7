/* replay.c - feeds files to a fuzz target without libFuzzer, so `make test`
 * can replay every corpus under ASan+UBSan with any compiler (zstd's
 * regression driver). Arguments are files or directories (recursed). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static long nfiles;

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        fprintf(stderr, "%s: read failed\n", path);
        fclose(f);
        free(buf);
        return -1;
    }
    fclose(f);
    /* exact-size copy so ASan catches reads past the end */
    uint8_t *exact = malloc(n > 0 ? (size_t)n : 1);
    if (n > 0) memcpy(exact, buf, (size_t)n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, (size_t)n);
    free(exact);
    nfiles++;
    return 0;
}

static int run_path(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return 0; /* optional seed folders may be absent */
    if (!S_ISDIR(st.st_mode)) return run_file(path);
    DIR *d = opendir(path);
    if (!d) return -1;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        if (run_path(sub) < 0) rc = -1;
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv) {
    int rc = 0;
    for (int i = 1; i < argc; i++)
        if (run_path(argv[i]) < 0) rc = 1;
    printf("replay %s: %ld inputs, no crash\n", argv[0], nfiles);
    return rc;
}
