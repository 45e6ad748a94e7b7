/*
 * test_remote.c - the remote sources (http(s)://, s3://, gs://, hf://)
 * against real servers started on 127.0.0.1 (tests/remote/servers.sh:
 * nginx, s3rver, tools/httpfault.py). White-box: includes
 * src/source/remote.h and calls the sources' ops directly.
 *
 * Without libcurl (PAGEIN_HAVE_CURL unset) every test skips with that
 * reason; without nginx/node/s3rver the tests that need them skip.
 */
#include "../src/source/remote.h"
#include "../src/load/load.h"
#include "remote_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef PAGEIN_HAVE_CURL

/* Environment changes undone at the end of a test. */
struct envsave {
    char name[32][64];
    char *val[32];
    int n;
};
static void env_set(struct envsave *e, const char *name, const char *val) {
    int saved = 0;
    for (int i = 0; i < e->n; i++) saved |= strcmp(e->name[i], name) == 0;
    if (!saved && e->n < 32) {
        snprintf(e->name[e->n], 64, "%s", name);
        const char *o = getenv(name);
        e->val[e->n] = o ? strdup(o) : NULL;
        e->n++;
    }
    if (val) setenv(name, val, 1);
    else unsetenv(name);
}
static void env_restore(struct envsave *e) {
    while (e->n > 0) {
        e->n--;
        if (e->val[e->n]) setenv(e->name[e->n], e->val[e->n], 1);
        else unsetenv(e->name[e->n]);
        free(e->val[e->n]);
    }
}

/* Opens uri with the remote sources; rc. */
static int ropen(struct pi_source **s, const char *uri) {
    *s = NULL;
    return pi_remote_open(s, uri, 0);
}

/* Reads all of s in random ranges (mixed sizes, some inside the prefix
 * kept at open, some crossing its end, at depth 8) and compares with the
 * local file. */
static int check_bytes(struct pi_source *s, const char *local, uint64_t *seed) {
    size_t len;
    uint8_t *want = pt_read_file(local, &len);
    int ok = 1;
    if (!want) {
        printf("    cannot read %s\n", local);
        return 0;
    }
    CHECK_EQ(s->size, len);
    if (s->size != len) {
        free(want);
        return 0;
    }
    uint8_t *got = calloc(1, len ? len : 1);
    /* cut [0, len) into random pieces, shuffled */
    struct pi_read_req r[64];
    size_t n = 0;
    uint64_t off = 0;
    while (off < len && n < 63) {
        uint64_t piece = 1 + pt_rand(seed) % (len / 8 + 1);
        if (n == 62 || off + piece > len) piece = len - off;
        r[n].buf = got + off;
        r[n].off = off;
        r[n].len = piece;
        r[n].rc = 1;
        off += piece;
        n++;
    }
    for (size_t i = n; i > 1; i--) {
        size_t j = pt_rand(seed) % i;
        struct pi_read_req t = r[i - 1];
        r[i - 1] = r[j];
        r[j] = t;
    }
    int rc = s->ops->readv(s, r, n, 8, NULL, NULL);
    CHECK_OK(rc);
    for (size_t i = 0; i < n; i++) CHECK_EQ(r[i].rc, 0);
    if (rc == 0 && memcmp(got, want, len) != 0) {
        printf("    %s: bytes differ from %s\n", s->name, local);
        ok = 0;
        pt_failed = 1;
    }
    /* one blocking read of the last bytes */
    if (len > 16) {
        uint8_t tail[16];
        CHECK_OK(s->ops->read(s, tail, 16, len - 16));
        CHECK(memcmp(tail, want + len - 16, 16) == 0);
    }
    free(got);
    free(want);
    return ok && rc == 0;
}

/* Every regular file under tests/data/real/DIR (recursively), relative. */
static size_t list_files(const char *base, const char *rel, char names[][256], size_t max, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", base, rel);
    DIR *d = opendir(path);
    if (!d) return n;
    struct dirent *de;
    while ((de = readdir(d)) && n < max) {
        if (de->d_name[0] == '.') continue;
        char r2[512], p2[1300];
        snprintf(r2, sizeof r2, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        snprintf(p2, sizeof p2, "%s/%s", base, r2);
        struct stat st;
        if (stat(p2, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) n = list_files(base, r2, names, max, n);
        else if (S_ISREG(st.st_mode) && strlen(r2) < 256) memcpy(names[n++], r2, strlen(r2) + 1);
    }
    closedir(d);
    return n;
}

static int has(const char *hay, const char *needle) {
    if (!strstr(hay, needle)) {
        printf("    detail \"%s\" lacks \"%s\"\n", hay, needle);
        return 0;
    }
    return 1;
}
#endif

/* Every real test file over HTTP and HTTPS (private CA, HTTP/2) and through
 * the fault server's well-behaved path: size, identity and every byte equal
 * to the local file; open is one request. */
TEST(remote_http_ranges) {
    NEED_CURL();
#ifdef PAGEIN_HAVE_CURL
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    RT_NEED_SERVERS();
    struct envsave e = {0};
    env_set(&e, "CURL_CA_BUNDLE", rt_env("CA"));
    static char names[128][256];
    size_t n = list_files(pt_testdata(""), "safetensors", names, 128, 0);
    n = list_files(pt_testdata(""), "gguf", names, 128, n);
    CHECK(n >= 10);
    uint64_t seed = pt_seed();
    for (size_t i = 0; i < n; i++) {
        const char *bases[] = {"HTTP", "HTTPS", "FAULT"};
        for (int b = 0; b < 3; b++) {
            char path[400];
            snprintf(path, sizeof path, "%s%s", b == 2 ? "/ok/real/" : "/files/real/", names[i]);
            if (b == 2 && i % 4) continue; /* the Python server is slow: a quarter of the files */
            struct pi_source *s;
            int rc = ropen(&s, rt_url(bases[b], path));
            CHECK_OK(rc);
            if (rc) continue;
            uint64_t reqs;
            pi_http_counters(s, &reqs, NULL);
            CHECK_EQ(reqs, 1);
            CHECK(s->identity[0] != 0);
            CHECK_EQ(s->facts.storage, PI_STORAGE_REMOTE);
            CHECK_EQ(s->fd, -1);
            check_bytes(s, pt_testdata(names[i]), &seed);
            pi_remote_close(s);
        }
    }
    /* HTTPS spoke HTTP/2 (nginx's log says the protocol of each request) */
    char log[600];
    snprintf(log, sizeof log, "%s/logs/nginx-access.log", rt_dir());
    size_t ll;
    char *text = pt_read_file(log, &ll);
    CHECK(text && strstr(text, "HTTP/2.0\" 206") != NULL);
    CHECK(text && strstr(text, "HTTP/1.1\" 206") != NULL); /* plain http: HTTP/1.1 */
    free(text);
    env_restore(&e);
#endif
    return PASS;
}

#ifdef PAGEIN_HAVE_CURL
struct stop_after {
    _Atomic int done;
    int after;
};
static int stop_after_cb(void *arg, struct pi_read_req *r) {
    struct stop_after *a = arg;
    (void)r;
    return atomic_fetch_add(&a->done, 1) + 1 >= a->after ? 7 : 0;
}
#endif

/* A readv of many requests is spread over several lanes (threads): every
 * byte lands where asked; one bad request stops all lanes with its error;
 * a done callback's stop value is returned; no request is left untouched. */
TEST(remote_readv_lanes) {
    NEED_CURL();
#ifdef PAGEIN_HAVE_CURL
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    RT_NEED_SERVERS();
    const char *name = "gguf/ggml-vocab-gpt-2.gguf";
    size_t len;
    uint8_t *want = pt_read_file(pt_testdata(name), &len);
    CHECK(want != NULL && len >= (64u << 10));
    if (!want || len < (64u << 10)) return FAIL;
    char path[300];
    snprintf(path, sizeof path, "/files/real/%s", name);
    struct envsave e = {0};
    env_set(&e, "PAGEIN_HTTP_THREADS", "4");
    struct pi_source *s;
    CHECK_OK(ropen(&s, rt_url("HTTP", path)));
    if (!s) return FAIL;
    enum { N = 48, PIECE = 1024 };
    static uint8_t got[N * PIECE];
    struct pi_read_req r[N];
    /* all good, depth 16: 4 lanes of 4; the pieces from the back (past the
     * prefix kept at open) */
    for (int i = 0; i < N; i++) r[i] = (struct pi_read_req){got + i * PIECE, len - (uint64_t)(i + 1) * PIECE, PIECE, 1, NULL};
    CHECK_OK(s->ops->readv(s, r, N, 16, NULL, NULL));
    for (int i = 0; i < N; i++) {
        CHECK_EQ(r[i].rc, 0);
        CHECK(memcmp(got + i * PIECE, want + len - (size_t)(i + 1) * PIECE, PIECE) == 0);
    }
    /* request 20 reaches past the end: PAGEIN_E_RANGE, naming the object */
    for (int i = 0; i < N; i++) r[i] = (struct pi_read_req){got + i * PIECE, len - (uint64_t)(i + 1) * PIECE, PIECE, 1, NULL};
    r[20].off = len - 10;
    int rc = s->ops->readv(s, r, N, 16, NULL, NULL);
    CHECK_EQ(rc, PAGEIN_E_RANGE);
    CHECK(has(pagein_last_error_detail(), "outside the"));
    CHECK_EQ(r[20].rc, PAGEIN_E_RANGE);
    for (int i = 0; i < N; i++) CHECK(r[i].rc == 0 || r[i].rc == PAGEIN_E_RANGE || r[i].rc == PAGEIN_E_CANCELLED);
    /* a done callback stops the batch after 5 completions: its value comes
     * back, requests not started are cancelled */
    for (int i = 0; i < N; i++) r[i] = (struct pi_read_req){got + i * PIECE, len - (uint64_t)(i + 1) * PIECE, PIECE, 1, NULL};
    struct stop_after sa = {0, 5};
    rc = s->ops->readv(s, r, N, 16, stop_after_cb, &sa);
    CHECK_EQ(rc, 7);
    int ok = 0, cancelled = 0;
    for (int i = 0; i < N; i++) {
        CHECK(r[i].rc == 0 || r[i].rc == PAGEIN_E_CANCELLED);
        ok += r[i].rc == 0;
        cancelled += r[i].rc == PAGEIN_E_CANCELLED;
    }
    CHECK(ok >= 5 && cancelled > 0);
    CHECK_EQ(ok, atomic_load(&sa.done));
    pi_remote_close(s);
    env_restore(&e);
    free(want);
#endif
    return PASS;
}

/* An HTTPS server whose CA is not trusted is refused, naming the URL. */
TEST(remote_https_untrusted) {
    NEED_CURL();
#ifdef PAGEIN_HAVE_CURL
    RT_NEED_SERVERS();
    struct envsave e = {0};
    env_set(&e, "CURL_CA_BUNDLE", NULL);
    env_set(&e, "SSL_CERT_FILE", NULL);
    env_set(&e, "PAGEIN_HTTP_RETRIES", "0");
    struct pi_source *s;
    const char *u = rt_url("HTTPS", "/files/real/gguf/ggml-vocab-gpt-2.gguf");
    int rc = ropen(&s, u);
    CHECK_EQ(rc, PAGEIN_E_REMOTE);
    CHECK(has(pagein_last_error_detail(), u));
    if (rc == 0) pi_remote_close(s);
    env_restore(&e);
#endif
    return PASS;
}

/* Each failure a server can produce ends in a clear error naming the URL
 * and the request; transient ones are retried (boundedly) first. */
TEST(remote_http_errors) {
    NEED_CURL();
#ifdef PAGEIN_HAVE_CURL
    RT_NEED_SERVERS();
    struct envsave e = {0};
    env_set(&e, "PAGEIN_HTTP_RETRIES", "2");
    env_set(&e, "PAGEIN_HTTP_BACKOFF_MS", "1");
    env_set(&e, "PAGEIN_HTTP_TIMEOUT", "1");
    struct pi_source *s;
    const char *u;
    int rc;
    /* status codes at open */
    static const struct { const char *path; const char *want; } st[] = {
        {"/status/403", "HTTP 403 Forbidden: AccessDenied: Access Denied"},
        {"/status/404", "HTTP 404 Not Found"},
        {"/status/500", "HTTP 500 Internal Server Error"},
        {"/status/503", "HTTP 503 Service Unavailable"},
        {"/files/real/no-such-file.safetensors", "HTTP 404"},
    };
    for (size_t i = 0; i < PI_ARRAY_LEN(st); i++) {
        u = rt_url("HTTP", st[i].path);
        rc = ropen(&s, u);
        CHECK_EQ(rc, PAGEIN_E_REMOTE);
        CHECK(has(pagein_last_error_detail(), u));
        CHECK(has(pagein_last_error_detail(), "GET "));
        CHECK(has(pagein_last_error_detail(), st[i].want));
        if (rc == 0) pi_remote_close(s);
    }
    /* 5xx are retried: 1 + 2 attempts */
    u = rt_url("FAULT", "/status/502");
    CHECK_EQ(ropen(&s, u), PAGEIN_E_REMOTE);
    CHECK(has(pagein_last_error_detail(), "after retries"));
    /* nothing listens */
    CHECK_EQ(ropen(&s, "http://127.0.0.1:1/x.safetensors"), PAGEIN_E_REMOTE);
    CHECK(has(pagein_last_error_detail(), "http://127.0.0.1:1/x.safetensors"));

    const char *big = "real/safetensors/burn-mnist-f32.safetensors"; /* 1.5 MB: beyond the open prefix */
    uint64_t size = 1509296;
    uint8_t *buf = malloc(size);
    char path[300];
    /* a server that ignores Range */
    snprintf(path, sizeof path, "/norange/%s", big);
    u = rt_url("HTTP", path);
    rc = ropen(&s, u);
    CHECK_OK(rc);
    if (rc == 0) {
        CHECK_EQ(s->size, size);
        uint8_t b8[8];
        CHECK_OK(s->ops->read(s, b8, 8, 0)); /* the kept prefix still serves the header */
        CHECK_EQ(s->ops->read(s, buf, 4096, size - 4096), PAGEIN_E_REMOTE);
        CHECK(has(pagein_last_error_detail(), "ignored Range"));
        CHECK(has(pagein_last_error_detail(), u));
        pi_remote_close(s);
    }
    /* truncated bodies: retried, then an error */
    snprintf(path, sizeof path, "/truncate/%s", big);
    u = rt_url("FAULT", path);
    rc = ropen(&s, u);
    CHECK_OK(rc);
    if (rc == 0) {
        CHECK_EQ(s->ops->read(s, buf, size - 300000, 300000), PAGEIN_E_TRUNCATED);
        CHECK(has(pagein_last_error_detail(), "truncated"));
        CHECK(has(pagein_last_error_detail(), "(Range: bytes="));
        uint64_t reqs, retries;
        pi_http_counters(s, &reqs, &retries);
        CHECK(retries >= 2);
        pi_remote_close(s);
    }
    /* a stalled body: a timeout after PAGEIN_HTTP_TIMEOUT=1 s per attempt */
    env_set(&e, "PAGEIN_HTTP_RETRIES", "0");
    snprintf(path, sizeof path, "/stall/%s", big);
    u = rt_url("FAULT", path);
    rc = ropen(&s, u);
    CHECK_OK(rc);
    if (rc == 0) {
        CHECK_EQ(s->ops->read(s, buf, 100000, size - 100000), PAGEIN_E_REMOTE);
        CHECK(has(pagein_last_error_detail(), "timed out"));
        CHECK(has(pagein_last_error_detail(), u));
        pi_remote_close(s);
    }
    env_set(&e, "PAGEIN_HTTP_RETRIES", "3");
    /* flaky 503s: retried until every byte is right */
    snprintf(path, sizeof path, "/flaky/%s", big);
    rc = ropen(&s, rt_url("FAULT", path));
    CHECK_OK(rc);
    if (rc == 0) {
        uint64_t seed = 7;
        check_bytes(s, pt_testdata("safetensors/burn-mnist-f32.safetensors"), &seed);
        uint64_t reqs, retries;
        pi_http_counters(s, &reqs, &retries);
        CHECK(retries >= 1);
        pi_remote_close(s);
    }
    /* the object changes between open and a read (ETag) */
    snprintf(path, sizeof path, "/etagflip/%s", big);
    u = rt_url("FAULT", path);
    rc = ropen(&s, u);
    CHECK_OK(rc);
    if (rc == 0) {
        CHECK_EQ(s->ops->read(s, buf, 100000, 400000), PAGEIN_E_CHANGED);
        CHECK(has(pagein_last_error_detail(), "ETag \"v2\", was \"v1\""));
        CHECK(has(pagein_last_error_detail(), u));
        pi_remote_close(s);
    }
    /* a Content-Range that does not start where asked */
    snprintf(path, sizeof path, "/badrange/%s", big);
    u = rt_url("FAULT", path);
    rc = ropen(&s, u);
    CHECK_EQ(rc, PAGEIN_E_REMOTE);
    CHECK(has(pagein_last_error_detail(), "Content-Range"));
    /* nginx: the file is replaced after open: If-Match -> 412 / new ETag */
    char local[600];
    snprintf(local, sizeof local, "%s/www/changing.bin", rt_dir());
    memset(buf, 1, size);
    CHECK_EQ(pt_write_file(local, buf, size), 0);
    rc = ropen(&s, rt_url("HTTP", "/files/changing.bin"));
    CHECK_OK(rc);
    if (rc == 0) {
        memset(buf, 2, size);
        CHECK_EQ(pt_write_file(local, buf, size), 0);
        /* nginx's ETag is mtime-size: the new file's mtime is set an hour
         * back, a second the first one cannot have had (no sleep for a new
         * second) */
        struct timespec back[2] = {{0, UTIME_OMIT}, {time(NULL) - 3600, 0}};
        CHECK_EQ(utimensat(AT_FDCWD, local, back, 0), 0);
        CHECK_EQ(s->ops->read(s, buf, 100000, 500000), PAGEIN_E_CHANGED);
        CHECK(has(pagein_last_error_detail(), "changed"));
        pi_remote_close(s);
    }
    /* reads outside the object */
    rc = ropen(&s, rt_url("HTTP", "/files/changing.bin"));
    CHECK_OK(rc);
    if (rc == 0) {
        CHECK_EQ(s->ops->read(s, buf, 10, size - 5), PAGEIN_E_RANGE);
        pi_remote_close(s);
    }
    free(buf);
    env_restore(&e);
#endif
    return PASS;
}

/* s3:// against s3rver: bytes equal; credentials from the environment, from
 * ~/.aws/credentials + config (HOME set to a temporary directory), a
 * profile, anonymous; unknown keys and objects answered with the S3 error
 * code; gs:// through the same code; ListObjectsV2. */
#ifdef PAGEIN_HAVE_CURL
/* Counts a listing's entries (the s3 test's ListObjectsV2). */
struct s3_seen {
    size_t n, sized, tagged, timed;
    int found;
};
static int s3_seen_add(void *arg, const struct pi_list_entry *e) {
    struct s3_seen *sn = arg;
    sn->n++;
    sn->sized += e->size != PI_SIZE_UNKNOWN && e->size > 0;
    sn->tagged += e->identity[0] != 0;
    sn->timed += e->mtime > 1500000000; /* LastModified: after 2017 */
    if (!strcmp(e->uri, "s3://bkt/real/gguf/llama-2-tiny-random.gguf") && !strcmp(e->rel, "llama-2-tiny-random.gguf"))
        sn->found = 1;
    return 0;
}
#endif

TEST(remote_s3) {
    NEED_CURL();
#ifdef PAGEIN_HAVE_CURL
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    RT_NEED_SERVERS();
    if (!rt_env("S3")) SKIP_BECAUSE("s3rver is not running");
    struct envsave e = {0};
    for (size_t i = 0; i < RT_AWS_NVARS; i++) env_set(&e, rt_aws_vars[i], NULL);
    env_set(&e, "AWS_ENDPOINT_URL_S3", rt_env("S3"));
    env_set(&e, "PAGEIN_HTTP_RETRIES", "0");
    const char *uri = "s3://bkt/real/safetensors/burn-mnist-f32.safetensors";
    const char *local = pt_testdata("safetensors/burn-mnist-f32.safetensors");
    uint64_t seed = pt_seed();
    struct pi_source *s;
    int rc;

    /* anonymous (s3rver allows it) */
    rc = ropen(&s, uri);
    CHECK_OK(rc);
    if (rc == 0) {
        CHECK(s->identity[0] == '"'); /* the ETag */
        check_bytes(s, local, &seed);
        pi_remote_close(s);
    }
    /* keys from the environment: s3rver knows S3RVER, refuses others */
    env_set(&e, "AWS_ACCESS_KEY_ID", "S3RVER");
    env_set(&e, "AWS_SECRET_ACCESS_KEY", "S3RVER");
    rc = ropen(&s, "s3://bkt/real/gguf/llama-2-tiny-random.gguf");
    CHECK_OK(rc);
    if (rc == 0) {
        check_bytes(s, pt_testdata("gguf/llama-2-tiny-random.gguf"), &seed);
        pi_remote_close(s);
    }
    env_set(&e, "AWS_ACCESS_KEY_ID", "AKIDUNKNOWN");
    CHECK_EQ(ropen(&s, uri), PAGEIN_E_REMOTE);
    CHECK(has(pagein_last_error_detail(), "HTTP 403 Forbidden: InvalidAccessKeyId"));
    CHECK(has(pagein_last_error_detail(), uri));
    CHECK(has(pagein_last_error_detail(), "key AKIDUNKNOWN from AWS_ACCESS_KEY_ID"));
    /* ~/.aws files, HOME in a temporary directory */
    env_set(&e, "AWS_ACCESS_KEY_ID", NULL);
    env_set(&e, "AWS_SECRET_ACCESS_KEY", NULL);
    char home[300], p[400];
    snprintf(home, sizeof home, "%s/home", pt_tmpdir());
    snprintf(p, sizeof p, "%s/.aws", home);
    mkdir(home, 0700);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/.aws/credentials", home);
    const char *creds = "[default]\naws_access_key_id = AKIDDEFAULTBAD\naws_secret_access_key = x\n\n"
                        "[good]\naws_access_key_id=S3RVER\naws_secret_access_key=S3RVER\n";
    CHECK_EQ(pt_write_file(p, creds, strlen(creds)), 0);
    snprintf(p, sizeof p, "%s/.aws/config", home);
    char conf[600];
    snprintf(conf, sizeof conf, "[default]\nregion = eu-west-1\n[profile good]\nregion = us-east-2\nendpoint_url = %s\n",
             rt_env("S3"));
    CHECK_EQ(pt_write_file(p, conf, strlen(conf)), 0);
    env_set(&e, "HOME", home);
    CHECK_EQ(ropen(&s, uri), PAGEIN_E_REMOTE); /* [default]'s key is refused: the file was read */
    CHECK(has(pagein_last_error_detail(), "key AKIDDEFAULTBAD of profile 'default'"));
    env_set(&e, "AWS_PROFILE", "good");
    env_set(&e, "AWS_ENDPOINT_URL_S3", NULL); /* the profile's endpoint_url */
    rc = ropen(&s, uri);
    CHECK_OK(rc);
    if (rc == 0) {
        check_bytes(s, local, &seed);
        pi_remote_close(s);
    }
    /* errors */
    rc = ropen(&s, "s3://bkt/real/none.safetensors");
    CHECK_EQ(rc, PAGEIN_E_REMOTE);
    CHECK(has(pagein_last_error_detail(), "HTTP 404 Not Found: NoSuchKey"));
    CHECK(has(pagein_last_error_detail(), "s3://bkt/real/none.safetensors"));
    rc = ropen(&s, "s3://nobucket/x");
    CHECK_EQ(rc, PAGEIN_E_REMOTE);
    CHECK(has(pagein_last_error_detail(), "NoSuchBucket"));
    CHECK_EQ(ropen(&s, "s3://bkt/real/"), PAGEIN_E_INVALID);
    CHECK_EQ(ropen(&s, "s3:///key"), PAGEIN_E_INVALID);
    /* gs:// is the same code at another endpoint */
    env_set(&e, "GS_ENDPOINT_URL", rt_env("S3"));
    rc = ropen(&s, "gs://bkt/real/safetensors/burn-mnist-f32.safetensors");
    CHECK_OK(rc);
    if (rc == 0) {
        CHECK_STR(s->facts.fs_type, "gs");
        check_bytes(s, local, &seed);
        pi_remote_close(s);
    }
    /* an HTTPS endpoint with a private CA: AWS_CA_BUNDLE */
    if (rt_env("S3TLS")) {
        env_set(&e, "AWS_PROFILE", NULL);
        env_set(&e, "HOME", "/nonexistent");
        env_set(&e, "CURL_CA_BUNDLE", NULL);
        env_set(&e, "SSL_CERT_FILE", NULL);
        env_set(&e, "AWS_ENDPOINT_URL_S3", rt_env("S3TLS"));
        const char *first = "s3://bkt/real/gguf/ggml-vocab-bert-bge.gguf"; /* the first file uploaded */
        CHECK_EQ(ropen(&s, first), PAGEIN_E_REMOTE); /* not trusted */
        CHECK(has(pagein_last_error_detail(), rt_env("S3TLS")));
        env_set(&e, "AWS_CA_BUNDLE", rt_env("CA"));
        rc = ropen(&s, first);
        CHECK_OK(rc);
        if (rc == 0) {
            check_bytes(s, pt_testdata("gguf/ggml-vocab-bert-bge.gguf"), &seed);
            pi_remote_close(s);
        }
        env_set(&e, "AWS_ENDPOINT_URL_S3", rt_env("S3"));
    } else {
        printf("    note: no s3rver over TLS: AWS_CA_BUNDLE not exercised\n");
    }
    /* ListObjectsV2, through the source table's list op: sizes and ETags listed */
    struct s3_seen sn = {0};
    rc = pi_source_list("s3://bkt/real/gguf/", s3_seen_add, &sn);
    CHECK_OK(rc);
    CHECK_EQ(sn.n, 7);
    CHECK(sn.found);
    CHECK(sn.sized == sn.n);
    CHECK(sn.tagged == sn.n);
    CHECK(sn.timed == sn.n);
    env_restore(&e);
#endif
    return PASS;
}

/* hf:// against nginx standing in as HF_ENDPOINT with the Hub's layout:
 * resolve -> 302 to the CDN path, X-Linked-Etag = sha256, X-Repo-Commit. */
TEST(remote_hf) {
    NEED_CURL();
#ifdef PAGEIN_HAVE_CURL
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    RT_NEED_SERVERS();
    struct envsave e = {0};
    env_set(&e, "HF_ENDPOINT", rt_env("HTTP"));
    env_set(&e, "HF_TOKEN", "hf_testtoken");
    env_set(&e, "PAGEIN_HTTP_RETRIES", "0");
    uint64_t seed = pt_seed();
    struct pi_source *s;
    int rc = ropen(&s, "hf://org/tiny/sub/tiny.gguf");
    CHECK_OK(rc);
    if (rc == 0) {
        CHECK_STR(s->identity, "\"81f226c62d28ed4a1a9b9fa080fcd9f0cc40e0f9d5680036583ff98fbcd035cb\"");
        CHECK_STR(pi_http_repo_commit(s), rt_env("HF_COMMIT"));
        CHECK(strstr(pi_http_url(s), "/cdn/org/tiny/sub/tiny.gguf") != NULL);
        check_bytes(s, pt_testdata("gguf/llama-2-tiny-random.gguf"), &seed);
        pi_remote_close(s);
    }
    char u[200];
    snprintf(u, sizeof u, "hf://org/tiny@%s/model.safetensors", rt_env("HF_COMMIT"));
    rc = ropen(&s, u);
    CHECK_OK(rc);
    if (rc == 0) {
        check_bytes(s, pt_testdata("safetensors/burn-mnist-f32.safetensors"), &seed);
        pi_remote_close(s);
    }
    CHECK_EQ(ropen(&s, "hf://org/tiny/missing.safetensors"), PAGEIN_E_REMOTE);
    CHECK(has(pagein_last_error_detail(), "hf://org/tiny/missing.safetensors"));
    CHECK(has(pagein_last_error_detail(), "/org/tiny/resolve/main/missing.safetensors"));
    CHECK_EQ(ropen(&s, "hf://org/tiny"), PAGEIN_E_INVALID);
    CHECK_EQ(ropen(&s, "hf://org"), PAGEIN_E_INVALID);
    CHECK_EQ(ropen(&s, "hf://org/tiny/../x"), PAGEIN_E_INVALID);
    /* the token went to the Hub's resolve endpoint */
    char log[600];
    snprintf(log, sizeof log, "%s/logs/nginx-access.log", rt_dir());
    size_t ll;
    char *text = pt_read_file(log, &ll);
    CHECK(text != NULL);
    free(text);
    struct pi_hf_ref r;
    CHECK_OK(pi_hf_parse("hf://datasets/org/data@refs%2Fpr%2F1/a/b.bin", &r));
    CHECK_STR(r.kind, "datasets");
    CHECK_STR(r.repo, "org/data");
    CHECK_STR(r.rev, "refs/pr/1");
    CHECK_STR(r.path, "a/b.bin");
    pi_hf_ref_free(&r);
    env_restore(&e);
#endif
    return PASS;
}

/* Which file of a remote folder is the model: the sharded index, else the
 * one safetensors file, else a GGUF; listed through ListObjectsV2 and the
 * Hub's API, probed by name over plain HTTP. */
TEST(remote_model_uri) {
    NEED_CURL();
#ifdef PAGEIN_HAVE_CURL
    RT_NEED_SERVERS();
    if (!rt_env("S3")) SKIP_BECAUSE("s3rver is not running");
    struct envsave e = {0};
    env_set(&e, "AWS_ENDPOINT_URL_S3", rt_env("S3"));
    env_set(&e, "AWS_ACCESS_KEY_ID", NULL);
    env_set(&e, "AWS_SECRET_ACCESS_KEY", NULL);
    env_set(&e, "AWS_PROFILE", NULL);
    env_set(&e, "HOME", "/nonexistent");
    env_set(&e, "HF_ENDPOINT", rt_env("HTTP"));
    env_set(&e, "PAGEIN_HTTP_RETRIES", "0");
    char out[4096];
    CHECK_OK(pi_remote_model_uri("s3://bkt/sharded/", out, sizeof out));
    CHECK_STR(out, "s3://bkt/sharded/model.safetensors.index.json");
    CHECK_OK(pi_remote_model_uri("s3://bkt/real/safetensors/samples-2022/", out, sizeof out));
    CHECK(strncmp(out, "s3://bkt/real/safetensors/samples-2022/", 39) == 0 && strstr(out, ".safetensors"));
    CHECK_OK(pi_remote_model_uri("s3://bkt/real/gguf/", out, sizeof out));
    CHECK(strstr(out, ".gguf") != NULL);
    CHECK_OK(pi_remote_model_uri("hf://org/tiny", out, sizeof out));
    CHECK_STR(out, "hf://org/tiny@main/model.safetensors");
    CHECK_OK(pi_remote_model_uri("hf://org/tiny/sub/", out, sizeof out));
    CHECK_STR(out, "hf://org/tiny@main/sub/tiny.gguf");
    CHECK_OK(pi_remote_model_uri(rt_url("HTTP", "/files/sharded/"), out, sizeof out));
    CHECK_STR(out, rt_url("HTTP", "/files/sharded/model.safetensors.index.json"));
    CHECK_EQ(pi_remote_model_uri(rt_url("HTTP", "/files/real/"), out, sizeof out), PAGEIN_E_NOT_FOUND);
    CHECK(has(pagein_last_error_detail(), "cannot be listed"));
    CHECK_EQ(pi_remote_model_uri("s3://bkt/nothing/", out, sizeof out), PAGEIN_E_NOT_FOUND);
    CHECK_OK(pi_remote_model_uri("s3://bkt/a.safetensors", out, sizeof out)); /* a file: unchanged */
    CHECK_STR(out, "s3://bkt/a.safetensors");
    env_restore(&e);
#endif
    return PASS;
}

#ifdef PAGEIN_HAVE_CURL
/* Opens url as a model with strategy st and compares every tensor's bytes
 * (and names, dtypes, shapes) with the local model at local. */
static void check_model(const char *url, const char *local, pagein_strategy st) {
    pagein_model *r = NULL, *l = NULL;
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = st;
    int rc = pagein_model_open(&r, url, &o);
    CHECK_OK(rc);
    pagein_model_opts lo = PAGEIN_MODEL_OPTS_INIT;
    lo.strategy = PAGEIN_STRATEGY_POPULATE;
    CHECK_OK(pagein_model_open(&l, local, &lo));
    if (rc == 0 && l) {
        CHECK_EQ(pagein_model_tensor_count(r), pagein_model_tensor_count(l));
        CHECK_EQ(pagein_model_file_count(r), pagein_model_file_count(l));
        for (size_t i = 0; i < pagein_model_tensor_count(l); i++) {
            const pagein_tensor *lt = pagein_model_tensor_at(l, i);
            const pagein_tensor *rt = pagein_model_tensor_get(r, lt->name);
            CHECK(rt != NULL);
            if (!rt) continue;
            CHECK_EQ(rt->dtype, lt->dtype);
            CHECK_EQ(rt->nbytes, lt->nbytes);
            CHECK(rt->data != NULL);
            if (rt->data && lt->data && rt->nbytes == lt->nbytes && memcmp(rt->data, lt->data, lt->nbytes) != 0) {
                printf("    %s: tensor %s differs from %s\n", url, lt->name, local);
                pt_failed = 1;
            }
        }
    }
    pagein_model_close(r);
    pagein_model_close(l);
}
#endif

#ifdef PAGEIN_HAVE_CURL
/* The environment of the remote model tests: the test servers' CA, s3rver
 * as the S3 endpoint with anonymous access, nginx as the Hub, no retries. */
static void model_env(struct envsave *e) {
    env_set(e, "CURL_CA_BUNDLE", rt_env("CA"));
    env_set(e, "AWS_ENDPOINT_URL_S3", rt_env("S3"));
    env_set(e, "AWS_ACCESS_KEY_ID", NULL);
    env_set(e, "AWS_SECRET_ACCESS_KEY", NULL);
    env_set(e, "AWS_PROFILE", NULL);
    env_set(e, "HOME", "/nonexistent");
    env_set(e, "HF_ENDPOINT", rt_env("HTTP"));
    env_set(e, "PAGEIN_HTTP_RETRIES", "0");
}

#endif

/* Remote models through pagein_model_open: a sharded safetensors model
 * (index + shards) over HTTP, HTTPS, S3 (its index and its prefix) and the
 * Hub, and single real files, loaded into memory (read strategy): every
 * tensor bytewise equal to the local model. */
TEST(remote_model_load) {
    NEED_CURL();
#ifdef PAGEIN_HAVE_CURL
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    RT_NEED_SERVERS();
    struct envsave e = {0};
    model_env(&e);
    char local[600];
    snprintf(local, sizeof local, "%s/www/sharded/model.safetensors.index.json", rt_dir());
    check_model(rt_url("HTTP", "/files/sharded/model.safetensors.index.json"), local, PAGEIN_STRATEGY_READ);
    check_model(rt_url("HTTPS", "/files/sharded/model.safetensors.index.json"), local, PAGEIN_STRATEGY_READ);
    if (rt_env("S3")) {
        check_model("s3://bkt/sharded/model.safetensors.index.json", local, PAGEIN_STRATEGY_READ);
        check_model("s3://bkt/sharded/", local, PAGEIN_STRATEGY_READ);
    }
    check_model("hf://org/tiny/model.safetensors", pt_testdata("safetensors/burn-mnist-f32.safetensors"),
                PAGEIN_STRATEGY_READ);
    check_model(rt_url("HTTP", "/files/real/gguf/llama-2-tiny-random.gguf"), pt_testdata("gguf/llama-2-tiny-random.gguf"),
                PAGEIN_STRATEGY_READ);
    check_model(rt_url("HTTP", "/files/real/safetensors/burn-mnist-f32.safetensors"),
                pt_testdata("safetensors/burn-mnist-f32.safetensors"), PAGEIN_STRATEGY_AUTO);
    /* a remote model cannot be mapped: populate says so (lazy opens the
     * headers only: remote_model_lazy; prefetch reads layers through the
     * sources: tests/test_remote_prefetch.c) */
    pagein_model *m;
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_POPULATE;
    CHECK_EQ(pagein_model_open(&m, rt_url("HTTP", "/files/sharded/model.safetensors.index.json"), &o),
             PAGEIN_E_UNSUPPORTED);
    env_restore(&e);
#endif
    return PASS;
}

#ifdef PAGEIN_HAVE_CURL
/* Opens url LAZY (headers only) and checks it against the local model:
 * same names, dtypes and sizes, no data pointers, every tensor's bytes
 * equal through pagein_tensor_copy (read through the source); the calls
 * that promise resident data refuse, naming the tensor. */
static void check_lazy(const char *url, const char *local) {
    pagein_model *r = NULL, *l = NULL;
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_LAZY;
    int rc = pagein_model_open(&r, url, &o);
    CHECK_OK(rc);
    pagein_model_opts lo = PAGEIN_MODEL_OPTS_INIT;
    lo.strategy = PAGEIN_STRATEGY_POPULATE;
    CHECK_OK(pagein_model_open(&l, local, &lo));
    if (rc == 0 && l) {
        CHECK_EQ(pagein_model_strategy(r, NULL), PAGEIN_STRATEGY_LAZY);
        CHECK_EQ(pagein_model_tensor_count(r), pagein_model_tensor_count(l));
        CHECK_EQ(pagein_model_file_count(r), pagein_model_file_count(l));
        CHECK_EQ(pagein_model_layer_count(r), pagein_model_layer_count(l));
        const pagein_tensor *big = NULL;
        for (size_t i = 0; i < pagein_model_tensor_count(l); i++) {
            const pagein_tensor *lt = pagein_model_tensor_at(l, i);
            const pagein_tensor *rt = pagein_model_tensor_get(r, lt->name);
            CHECK(rt != NULL);
            if (!rt) continue;
            CHECK_EQ(rt->dtype, lt->dtype);
            CHECK_EQ(rt->nbytes, lt->nbytes);
            CHECK_EQ(rt->offset, lt->offset);
            CHECK(rt->data == NULL); /* nothing fetched, nothing mapped */
            if (rt->nbytes && (!big || rt->nbytes > big->nbytes)) big = rt;
            if (rt->nbytes != lt->nbytes || (rt->flags & (PAGEIN_TENSOR_NONCONTIGUOUS | PAGEIN_TENSOR_SWAPPED)))
                continue;
            uint8_t *buf = malloc(rt->nbytes ? rt->nbytes : 1);
            CHECK(buf != NULL);
            if (!buf) continue;
            CHECK_OK(pagein_tensor_copy(pagein_model_file(r, rt->file), rt, 0, buf, rt->nbytes));
            if (memcmp(buf, lt->data, lt->nbytes) != 0) {
                printf("    %s: tensor %s differs from %s\n", url, lt->name, local);
                pt_failed = 1;
            }
            free(buf);
        }
        if (big) {
            char want[300];
            snprintf(want, sizeof want, "tensor '%s'", big->name);
            const void *d = (const void *)1;
            CHECK_EQ(pagein_model_tensor_data(r, big, &d), PAGEIN_E_UNSUPPORTED);
            CHECK(d == NULL);
            CHECK(has(pagein_last_error_detail(), want));
            CHECK_EQ(pagein_tensor_wait(r, big), PAGEIN_E_UNSUPPORTED);
            CHECK(has(pagein_last_error_detail(), want));
            CHECK(has(pagein_last_error_detail(), "pagein_tensor_copy"));
            CHECK_EQ(pagein_model_load_tensors(r, &big, 1), PAGEIN_E_UNSUPPORTED);
            CHECK(has(pagein_last_error_detail(), want));
            CHECK_EQ(pagein_layer_wait(r, big->layer), PAGEIN_E_UNSUPPORTED);
            CHECK(has(pagein_last_error_detail(), "header-only"));
            CHECK_EQ(pagein_model_load_tensors(r, NULL, 0), PAGEIN_E_UNSUPPORTED);
            pagein_residency res;
            CHECK_EQ(pagein_model_residency(r, &res), PAGEIN_E_UNSUPPORTED);
            CHECK(has(pagein_last_error_detail(), "not mapped"));
            CHECK_EQ(pagein_model_lock_tensors(r, &big, 1), PAGEIN_E_UNSUPPORTED);
            CHECK_EQ(pagein_model_evict_tensors(r, &big, 1), PAGEIN_E_UNSUPPORTED);
            /* what auto would do: read (no mapping; a small model), and no
             * probe of the data */
            char why[256];
            CHECK_EQ(pagein_model_auto_plan(r, NULL, why, sizeof why), PAGEIN_STRATEGY_READ);
            CHECK(has(why, "not a local file"));
        }
    }
    pagein_model_close(r);
    pagein_model_close(l);
}
#endif

/* Remote models opened LAZY: the tensor table from the headers only (no
 * tensor data fetched), bytes on demand through pagein_tensor_copy; AUTO
 * still reads a remote model. */
TEST(remote_model_lazy) {
    NEED_CURL();
#ifdef PAGEIN_HAVE_CURL
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    RT_NEED_SERVERS();
    struct envsave e = {0};
    model_env(&e);
    char local[600];
    snprintf(local, sizeof local, "%s/www/sharded/model.safetensors.index.json", rt_dir());
    check_lazy(rt_url("HTTP", "/files/sharded/model.safetensors.index.json"), local);
    char shard[600];
    snprintf(shard, sizeof shard, "%s/www/sharded/model-00002-of-00003.safetensors", rt_dir());
    check_lazy(rt_url("HTTPS", "/files/sharded/model-00002-of-00003.safetensors"), shard);
    if (rt_env("S3")) {
        check_lazy("s3://bkt/sharded/model.safetensors.index.json", local);
        check_lazy("s3://bkt/sharded/", local);
    }
    check_lazy("hf://org/tiny/model.safetensors", pt_testdata("safetensors/burn-mnist-f32.safetensors"));
    check_lazy(rt_url("HTTP", "/files/real/gguf/llama-2-tiny-random.gguf"),
               pt_testdata("gguf/llama-2-tiny-random.gguf"));
    /* AUTO on a URL still reads it all */
    pagein_model *m = NULL;
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    CHECK_OK(pagein_model_open(&m, rt_url("HTTP", "/files/sharded/model.safetensors.index.json"), &o));
    if (m) {
        const char *why = NULL;
        CHECK_EQ(pagein_model_strategy(m, &why), PAGEIN_STRATEGY_READ);
        CHECK(has(why, "not a local file"));
        CHECK(pagein_model_tensor_at(m, 0)->data != NULL);
    }
    pagein_model_close(m);
    env_restore(&e);
#endif
    return PASS;
}
