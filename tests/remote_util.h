/* remote_util.h - the remote tests' servers and setup (tests/remote_util.c). */
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

/* The AWS settings a user's environment may hold: the S3 tests unset them
 * all, so that only the servers' own ones are read (RT_AWS_NVARS names). */
extern const char *const rt_aws_vars[];
#define RT_AWS_NVARS 12
/* The environment a remote checkpoint test reads a folder in (no retries,
 * the test Hub at nginx with a token, S3 at s3rver and none of the user's
 * AWS settings) and the folder's addresses into urls: plain HTTP
 * /files/FILES_NAME, HF_URI and, when s3rver runs, S3_URI (else said so).
 * Returns how many (2 or 3). */
int rt_folder_urls(char urls[3][300], const char *files_name, const char *hf_uri, const char *s3_uri);

#ifndef PAGEIN_HAVE_CURL
#define NEED_CURL() SKIP_BECAUSE("built without libcurl (Debian libcurl4-openssl-dev; mk/remote.mk)")
#else
#define NEED_CURL()                                                             \
    do {                                                                        \
    } while (0)
#endif

#define RT_NEED_SERVERS()                                                       \
    do {                                                                        \
        const char *why_;                                                       \
        if (!rt_servers(&why_)) SKIP_BECAUSE("%s", why_);                      \
    } while (0)

#endif
