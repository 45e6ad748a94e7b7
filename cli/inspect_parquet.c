/* inspect_parquet.c - `pagein inspect data.parquet`: the schema, row
 * groups, codecs, encodings and sizes of a Parquet file's footer, as text
 * or (--json) one JSON object; from pagein_parquet_describe(). Uses only
 * <pagein.h>. docs/FORMAT-PARQUET.md. */
#include "inspect.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

int inspect_is_parquet(const char *path) {
    size_t n = strlen(path);
    if (n >= 8 && strcmp(path + n - 8, ".parquet") == 0) return 1;
    if (pagein_is_url(path)) return 0;
    /* a local file of another name: "PAR1" at both ends */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return 0;
    struct stat st;
    char head[4], tail[4];
    /* the tail is read only after the head says PAR1: reading the last page
     * of every model file would make tensor data resident (`resident`,
     * `inspect` must not fill the cache they measure) */
    int yes = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 12 && pread(fd, head, 4, 0) == 4 &&
              !memcmp(head, "PAR1", 4) && pread(fd, tail, 4, st.st_size - 4) == 4 && !memcmp(tail, "PAR1", 4);
    close(fd);
    return yes;
}

int inspect_parquet(const char *path, int json) {
    char *s = NULL;
    int rc = pagein_parquet_describe(path, json ? PAGEIN_PARQUET_JSON : 0, &s);
    if (rc < 0) {
        cli_error("inspect", rc, "%s", path);
        return rc > -4096 || rc == PAGEIN_E_REMOTE ? EXIT_USAGE : EXIT_INVALID;
    }
    fputs(s, stdout);
    free(s);
    return fflush(stdout) == 0 ? EXIT_OK : EXIT_USAGE;
}
