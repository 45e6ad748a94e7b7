/* dcp_testutil.c - fixtures and checks shared by the Distributed Checkpoint
 * tests (dcp_testutil.h). */
#include "dcp_testutil.h"

#include <stdlib.h>

const char *dcp_ckpt_with(const char *name, const char *meta) {
    const char *dir = pt_tmppath(name);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && cp tests/data/dcp/rank4/__* %s/ && cp %s %s/.metadata", dir,
             dir, dir, meta, dir);
    if (system(cmd) == 0) return dir;
    printf("    could not make the checkpoint copy: %s\n", cmd);
    pt_failed = 1;
    return NULL;
}

void dcp_check_refusal(const char *what, int rc, int code, const char *const *words) {
    const char *d = pagein_last_error_detail();
    int ok = rc == code;
    for (size_t k = 0; words[k]; k++) ok = ok && strstr(d, words[k]) != NULL;
    if (!ok) {
        printf("    %s: rc %d (want %d), detail: %s\n", what, rc, code, d);
        pt_failed = 1;
    }
}

pagein_model *dcp_model_open(const char *path, pagein_strategy s) {
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = s;
    pagein_model *m = NULL;
    int rc = pagein_model_open(&m, path, &o);
    if (rc != 0) {
        printf("    pagein_model_open(%s, %s) returned %d (%s): %s\n", path, pagein_strategy_name(s), rc,
               pagein_strerror(rc), pagein_last_error_detail());
        pt_failed = 1;
        pagein_model_close(m);
        return NULL;
    }
    return m;
}

int dcp_same_file(const char *a, const char *b) {
    size_t an = 0, bn = 0;
    uint8_t *x = pt_read_file(a, &an), *y = pt_read_file(b, &bn);
    int same = x && y && an == bn && memcmp(x, y, an) == 0;
    free(x);
    free(y);
    return same;
}
