/* inspect_parquet.c - `pagein inspect data.parquet`: the schema, row
 * groups, codecs, encodings and sizes of a Parquet file's footer, as text
 * or (--json) one JSON object; from pagein_parquet_describe(). Uses only
 * <pagein.h>. docs/FORMAT-PARQUET.md. */
#include "inspect.h"

#include <stdlib.h>
#include <string.h>

int inspect_is_parquet(const char *path, int content) {
    /* the dataset-format table's rules: the name alone (no I/O), or (content)
     * the rows' head/tail detection, asked only of a file no model format
     * claimed: reading the last page of every model file would make tensor
     * data resident (`resident`, `inspect` must not fill the cache they measure) */
    char row[32];
    int rc = content ? pagein_dataset_detect(path, row, sizeof row) : pagein_dataset_detect_name(path, row, sizeof row);
    return rc == (content ? 2 : 1) && strcmp(row, "parquet") == 0;
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
