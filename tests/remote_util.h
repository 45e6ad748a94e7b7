/* remote_util.h - the remote tests' servers (tests/remote_util.c). */
#ifndef PAGEIN_REMOTE_UTIL_H
#define PAGEIN_REMOTE_UTIL_H

#include "test.h"

#include <sys/wait.h>

/* 1 when the servers run (started on first call, stopped at exit), else 0
 * with *reason saying why (for SKIP_BECAUSE). */
int rt_servers(const char **reason);
/* A value of the servers' env file (HTTP, HTTPS, CA, S3, FAULT, HF_COMMIT). */
const char *rt_env(const char *key);
/* rt_env(key) + path (ring of 8 static buffers). */
const char *rt_url(const char *key, const char *path);
/* The servers' directory (www/ is what nginx serves). */
const char *rt_dir(void);

#define RT_NEED_SERVERS()                                                       \
    do {                                                                        \
        const char *why_;                                                       \
        if (!rt_servers(&why_)) SKIP_BECAUSE("%s", why_);                      \
    } while (0)

#endif
