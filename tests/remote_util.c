/*
 * remote_util.c - starts the remote tests' servers (tests/remote/servers.sh:
 * nginx HTTP+HTTPS and the fault server; s3rver when a test first asks for
 * an S3 key) and stops them at exit. The runner starts them once for all
 * the remote_* tests it runs (pt_register_shared), in its own process: the
 * tests, each in a child, inherit them; a test run alone, or with
 * PAGEIN_TEST_SHARED=0, starts its own. Also the S3 tests' list of AWS
 * settings and the checkpoint tests' addresses of a served folder.
 * White-box helper for tests/test_remote*.c and the remote tests of
 * tests/test_dcp*.c.
 */
#include "remote_util.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];
static int state; /* 0 not tried, 1 up, -1 unavailable */
static char why[600];
static char envbuf[4096];
static pid_t owner; /* the process that started them stops them */

static void read_env(void);

static void stop_servers(void) {
    if (!dir[0] || getpid() != owner) return; /* a test inheriting shared servers leaves them */
    char cmd[700];
    snprintf(cmd, sizeof cmd, "bash tests/remote/servers.sh stop '%s' >/dev/null 2>&1; rm -rf '%s'", dir, dir);
    if (system(cmd) != 0) fprintf(stderr, "remote tests: stopping the servers in %s failed\n", dir);
    dir[0] = 0;
}

/* The files the servers serve: the real test files over HTTP(S), the fault
 * server and s3rver, and a Hub repository "org/tiny". */
static int populate(void) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "set -e; d='%s'; t='%s'; mkdir -p $d/www/real $d/s3/real $d/www/hf/org/tiny/sub;"
             "cp -r $t/safetensors $t/gguf $d/www/real/; cp -r $t/safetensors $t/gguf $d/s3/real/;"
             "cp $t/safetensors/burn-mnist-f32.safetensors $d/www/hf/org/tiny/model.safetensors;"
             "cp $t/gguf/llama-2-tiny-random.gguf $d/www/hf/org/tiny/sub/tiny.gguf;"
             "printf '{\"architectures\": [\"Tiny\"]}' > $d/www/hf/org/tiny/config.json;"
             "/usr/bin/python3 tests/remote/make_sharded.py $d/www/sharded 3 1000 && cp -r $d/www/sharded $d/s3/;"
             /* a torch Distributed Checkpoint (s3/torch-dcp4 sorts after s3/real,
              * whose first file the TLS s3rver holds) */
             "mkdir -p $d/www/hf/org/dcp; for x in $d/www/dcp4 $d/s3/torch-dcp4 $d/www/hf/org/dcp/ckpt; do "
             "cp -r tests/data/dcp/rank4 $x; done;"
             /* and torch's safetensors flavour of one (DCP_SHARDING_INFO) */
             "for x in $d/www/dcphf $d/s3/torch-dcphf $d/www/hf/org/dcp/hf; do "
             "cp -r tests/data/dcp/hf/ckpt $x; done",
             dir, pt_testdata(""));
    return system(cmd) == 0 ? 0 : -1;
}

int rt_servers(const char **reason) {
    if (state == 0) {
        state = -1;
        snprintf(dir, sizeof dir, "/tmp/pagein-remote-XXXXXX");
        if (!mkdtemp(dir)) {
            snprintf(why, sizeof why, "mkdtemp failed");
            dir[0] = 0;
        } else if (populate() < 0) {
            snprintf(why, sizeof why, "could not copy the test files into %s", dir);
        } else {
            owner = getpid();
            atexit(stop_servers);
            char cmd[700], out[512] = "";
            /* s3rver (two node processes and an upload of every file) is
             * started by rt_env on the first test that asks for it */
            snprintf(cmd, sizeof cmd, "bash tests/remote/servers.sh start '%s' %d nginx fault 2>&1", dir,
                     (int)getpid());
            FILE *p = popen(cmd, "r");
            size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
            out[n] = 0;
            int st = p ? pclose(p) : -1;
            int code = st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
            out[strcspn(out, "\n")] = 0;
            if (code == 0) {
                state = 1;
                read_env();
            } else {
                snprintf(why, sizeof why, "test servers unavailable: %s", out[0] ? out : "servers.sh failed");
            }
        }
    }
    if (reason) *reason = why;
    return state == 1;
}

static void read_env(void) {
    char ep[300];
    snprintf(ep, sizeof ep, "%s/env", dir);
    FILE *f = fopen(ep, "r");
    size_t n = f ? fread(envbuf, 1, sizeof envbuf - 1, f) : 0;
    envbuf[n] = 0;
    if (f) fclose(f);
}

/* Starts s3rver beside the running servers, once; its failure is printed
 * and the S3 keys stay unset (the tests that need them skip). */
static int s3_tried;
static void start_s3(void) {
    if (s3_tried || state != 1) return;
    s3_tried = 1;
    char cmd[700], out[512] = "";
    snprintf(cmd, sizeof cmd, "APPEND=1 bash tests/remote/servers.sh start '%s' %d s3 2>&1", dir, (int)getpid());
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = 0;
    int st = p ? pclose(p) : -1;
    if (!(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0)) printf("    s3rver unavailable: %s\n", out);
    read_env();
}

const char *rt_env(const char *key) {
    static char vals[8][1024];
    static int k;
    if (strncmp(key, "S3", 2) == 0) start_s3();
    size_t kl = strlen(key);
    for (const char *p = envbuf; *p;) {
        const char *e = strchr(p, '\n');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l > kl && p[kl] == '=' && memcmp(p, key, kl) == 0) {
            char *v = vals[k++ % 8];
            snprintf(v, 1024, "%.*s", (int)(l - kl - 1), p + kl + 1);
            return v;
        }
        p += l + (e ? 1 : 0);
    }
    return NULL;
}

const char *rt_url(const char *key, const char *path) {
    static char bufs[8][2048];
    static int k;
    char *b = bufs[k++ % 8];
    const char *base = rt_env(key);
    snprintf(b, 2048, "%s%s", base ? base : "http://127.0.0.1:1", path);
    return b;
}

const char *rt_dir(void) { return dir; }

const char *const rt_aws_vars[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                                   "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
                                   "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "GS_ACCESS_KEY_ID", "AWS_CA_BUNDLE"};
_Static_assert(sizeof rt_aws_vars / sizeof *rt_aws_vars == RT_AWS_NVARS, "RT_AWS_NVARS counts rt_aws_vars");

int rt_folder_urls(char urls[3][300], const char *files_name, const char *hf_uri, const char *s3_uri) {
    setenv("PAGEIN_HTTP_RETRIES", "0", 1);
    setenv("HF_ENDPOINT", rt_env("HTTP"), 1);
    setenv("HF_TOKEN", "hf_testtoken", 1);
    char path[256];
    snprintf(path, sizeof path, "/files/%s", files_name);
    snprintf(urls[0], 300, "%s", rt_url("HTTP", path));
    snprintf(urls[1], 300, "%s", hf_uri);
    if (!rt_env("S3")) {
        printf("    s3:// not checked: s3rver is not running\n");
        return 2;
    }
    for (size_t i = 0; i < RT_AWS_NVARS; i++) unsetenv(rt_aws_vars[i]);
    setenv("AWS_ENDPOINT_URL_S3", rt_env("S3"), 1);
    snprintf(urls[2], 300, "%s", s3_uri);
    return 3;
}

/* The runner's shared start: the servers and s3rver, before the first
 * remote_* test (the s3rver a test started itself would stop with it, and
 * its watcher would take the shared servers along). */
static void share_start(void) {
    if (rt_servers(NULL)) start_s3();
}

__attribute__((constructor)) static void register_shared(void) { pt_register_shared("remote_", share_start); }
