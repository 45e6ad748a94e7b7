/*
 * test_remote_reliability.c - fork safety and re-resolved redirects against the real
 * servers (tests/remote/servers.sh: nginx, tools/httpfault.py):
 *
 *   - a child of fork() made after a remote source kept connections alive
 *     gets its own: the parent and the child read ranges at the same time
 *     and both get the right bytes (over HTTP/1.1 and over TLS + HTTP/2),
 *     and the parent's connections still work after the child closed the
 *     source;
 *   - a redirect's target that stops being accepted (a presigned URL that
 *     expired: 403) is resolved again from the configured URL, once per
 *     request, and the reads go on.
 */
#include "../src/source/remote.h"
#include "remote_util.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef PAGEIN_HAVE_CURL
static uint8_t pat(uint64_t i) { return (uint8_t)((i * 0x9E3779B97F4A7C15ull) >> 56); }

/* www/NAME: size bytes of pat(). */
static int write_pattern(const char *name, uint64_t size) {
    char path[600];
    snprintf(path, sizeof path, "%s/www/%s", rt_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    for (uint64_t i = 0; i < size; i++) fputc(pat(i), f);
    return fclose(f);
}

#define RR_N 16
#define RR_LEN 65536

/* rounds x one readv of RR_N ranges (RR_LEN bytes at pseudo-random
 * offsets) at depth 8: the number of failed readvs plus wrong ranges. */
static int read_rounds(struct pi_source *s, unsigned seed, int rounds, char *err, size_t errcap) {
    uint8_t *buf = malloc((size_t)RR_N * RR_LEN);
    if (!buf) return 1;
    int bad = 0;
    for (int k = 0; k < rounds; k++) {
        struct pi_read_req r[RR_N];
        for (int i = 0; i < RR_N; i++) {
            seed = seed * 1103515245u + 12345u;
            uint64_t off = ((uint64_t)seed * 7919u) % (s->size - RR_LEN);
            r[i] = (struct pi_read_req){buf + (size_t)i * RR_LEN, off, RR_LEN, 0, NULL};
        }
        memset(buf, 0xEE, (size_t)RR_N * RR_LEN);
        int rc = pi_source_readv(s, r, RR_N, 8, NULL, NULL);
        if (rc) {
            if (!bad && err) snprintf(err, errcap, "readv: %d %s", rc, pagein_last_error_detail());
            bad++;
            continue;
        }
        for (int i = 0; i < RR_N; i++) {
            const uint8_t *b = r[i].buf;
            for (uint64_t j = 0; j < RR_LEN; j++)
                if (b[j] != pat(r[i].off + j)) {
                    if (!bad && err) snprintf(err, errcap, "wrong byte at %llu", (unsigned long long)(r[i].off + j));
                    bad++;
                    break;
                }
        }
    }
    free(buf);
    return bad;
}

/* Opens url, reads (so the pool keeps connections), forks; both read at
 * once; the child closes the source and exits; the parent reads again. */
static int fork_case(const char *url) {
    struct pi_source *s = NULL;
    int rc = pi_remote_open(&s, url, 0);
    CHECK_OK(rc);
    if (rc) return FAIL;
    char err[600] = "";
    CHECK_EQ(read_rounds(s, 1, 2, err, sizeof err), 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        char cerr[600] = "";
        int bad = read_rounds(s, 7, 40, cerr, sizeof cerr);
        if (bad) fprintf(stderr, "child: %d bad: %s\n", bad, cerr);
        pi_remote_close(s);
        _exit(bad ? 1 : 0); /* no atexit: the servers belong to the parent */
    }
    int bad = read_rounds(s, 3, 40, err, sizeof err);
    if (bad) fprintf(stderr, "parent: %d bad: %s\n", bad, err);
    CHECK_EQ(bad, 0);
    int st = 0;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* the child's close did not touch the parent's connections */
    CHECK_EQ(read_rounds(s, 5, 4, err, sizeof err), 0);
    pi_remote_close(s);
    return PASS;
}
#endif

TEST(remote_fork_own_connections) {
    NEED_CURL();
    /* the child leaves the parent's connections unclosed on purpose (closing
     * them would write to the parent's sockets): memcheck calls that a leak */
    if (getenv("PAGEIN_UNDER_VALGRIND")) SKIP_BECAUSE("the forked child deliberately leaks the parent's connections");
#ifdef PAGEIN_HAVE_CURL
    RT_NEED_SERVERS();
    CHECK_EQ(write_pattern("forkpat.bin", 8u << 20), 0);
    setenv("CURL_CA_BUNDLE", rt_env("CA"), 1);
    int r1 = fork_case(rt_url("HTTP", "/files/forkpat.bin"));
    int r2 = fork_case(rt_url("HTTPS", "/files/forkpat.bin"));
    unsetenv("CURL_CA_BUNDLE");
    if (r1 != PASS || r2 != PASS) return FAIL;
#endif
    return PASS;
}

TEST(remote_presigned_expiry) {
    NEED_CURL();
#ifdef PAGEIN_HAVE_CURL
    RT_NEED_SERVERS();
    CHECK_EQ(write_pattern("presign.bin", 1u << 20), 0);
    /* each redirect's target serves 20 requests (more than one readv's 8 in
     * flight, which all retry on the fresh target), then answers 403 */
    struct pi_source *s = NULL;
    int rc = pi_remote_open(&s, rt_url("FAULT", "/presign/20/presign.bin"), 0);
    CHECK_OK(rc);
    if (rc) return FAIL;
    CHECK(strstr(pi_http_url(s), "/signed/20/presign.bin?sig=") != NULL);
    char err[600] = "";
    int bad = read_rounds(s, 11, 16, err, sizeof err);
    if (bad) fprintf(stderr, "presigned: %d bad: %s\n", bad, err);
    CHECK_EQ(bad, 0);
    uint64_t reqs, retries;
    pi_http_counters(s, &reqs, &retries);
    CHECK(retries > 0);
    /* a target that refuses at once is retried once, then the 403 stands */
    pi_remote_close(s);
    rc = pi_remote_open(&s, rt_url("FAULT", "/presign/1/presign.bin"), 0);
    CHECK_OK(rc);
    if (rc) return FAIL;
    struct pi_read_req r = {malloc(4096), 900000, 4096, 0, NULL};
    rc = pi_source_readv(s, &r, 1, 1, NULL, NULL);
    CHECK_EQ(rc, PAGEIN_E_REMOTE);
    CHECK(strstr(pagein_last_error_detail(), "HTTP 403") != NULL);
    free(r.buf);
    pi_remote_close(s);
#endif
    return PASS;
}
