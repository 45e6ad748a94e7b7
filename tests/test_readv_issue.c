/*
 * test_readv_issue.c - the submit side of the local readv: what
 * the ring or the threads had submitted and not completed, the time the
 * issuing thread spent inside io_uring_submit, and the switch to the
 * kernel's workers (IOSQE_ASYNC) when issuing blocks.
 *
 * A blocking issue is simulated with pi_test_readv_issue_delay_us (each
 * io_uring_submit call sleeps first, as faulting a cold destination in
 * does on FUSE O_DIRECT); the ring must then move issuing to io-wq and
 * still deliver every byte.
 */
#include "test.h"

#include "../src/engine/engine.h"
#include "../src/source/file_readv.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

enum { SZ = 2 << 20, N = 48, LEN = 32768 };

static uint8_t pat(uint64_t o) { return (uint8_t)(o * 131 + (o >> 11) * 7 + 3); }

static int open_src(struct pi_source *s, const char *path, const uint8_t *data) {
    if (pt_write_file(path, data, SZ) != 0) return -1;
    memset(s, 0, sizeof *s);
    static const struct pi_source_ops ops = {.name = "file-test", .readv = pi_file_readv, .readv_view = pi_file_readv_view};
    s->ops = &ops;
    s->name = (char *)path;
    s->size = SZ;
    s->fd = open(path, O_RDONLY | O_CLOEXEC);
    return s->fd;
}

static void make_reqs(struct pi_read_req *rq, uint8_t *buf, uint64_t seed) {
    for (int i = 0; i < N; i++) {
        uint64_t off = (seed * 7919 + (uint64_t)i * 40961) % (SZ - LEN);
        rq[i] = (struct pi_read_req){buf + (size_t)i * LEN, off, LEN, 1, NULL};
    }
}

static int all_good(const struct pi_read_req *rq, const uint8_t *data) {
    for (int i = 0; i < N; i++)
        if (rq[i].rc != 0 || memcmp(rq[i].buf, data + rq[i].off, LEN) != 0) return 0;
    return 1;
}

/* One readv of N requests at depth 4 with the given environment and issue
 * delay; fills *v. */
static int run_case(struct pi_source *s, const uint8_t *data, const char *env_async, int delay_us,
                    struct pi_readv_view *v) {
    uint8_t *buf = malloc((size_t)N * LEN);
    struct pi_read_req rq[N];
    make_reqs(rq, buf, (uint64_t)delay_us + (env_async ? (uint64_t)env_async[0] : 0));
    if (env_async) setenv("PAGEIN_URING_ASYNC", env_async, 1);
    else unsetenv("PAGEIN_URING_ASYNC");
    atomic_store(&pi_test_readv_issue_delay_us, delay_us);
    int rc = pi_file_readv_view(s, rq, N, 4, NULL, NULL, v);
    atomic_store(&pi_test_readv_issue_delay_us, 0);
    unsetenv("PAGEIN_URING_ASYNC");
    int good = rc == 0 && all_good(rq, data);
    free(buf);
    return good ? 0 : -1;
}

TEST(readv_issue_blocking_goes_async) {
    if (getenv("PAGEIN_UNDER_VALGRIND")) SKIP_BECAUSE("io_uring writes are invisible to valgrind memcheck");
    if (getenv("PAGEIN_NO_URING") || !pagein_ranges_uring_available()) SKIP_BECAUSE("no io_uring here");
    uint8_t *data = malloc(SZ);
    for (uint64_t o = 0; o < SZ; o++) data[o] = pat(o);
    const char *path = pt_tmppath("readv_issue.bin");
    struct pi_source s;
    CHECK(open_src(&s, path, data) >= 0);
    struct pi_readv_view v;

    /* issuing blocks 2 ms a call: after the first 4 requests the ring lets
     * io-wq issue the rest, and every byte still arrives */
    CHECK_OK(run_case(&s, data, NULL, 2000, &v));
    CHECK_EQ(v.ring, 1);
    CHECK_EQ(v.async, 1);
    CHECK(v.async_from >= 4 && v.async_from < N);
    CHECK(v.issue_seconds >= 0.002 * 2); /* at least the first calls' delays */
    CHECK(v.issue_seconds <= v.seconds + 1e-3);
    CHECK(v.max_inflight >= 1 && v.max_inflight <= 4);
    CHECK(v.mean_inflight > 0 && v.mean_inflight <= 4.0 + 1e-9);

    /* the same with the switch turned off: issued inline throughout, and
     * the view says where the time went */
    CHECK_OK(run_case(&s, data, "0", 2000, &v));
    CHECK_EQ(v.async, 0);
    CHECK(v.issue_seconds * 2 > v.seconds);

    /* issuing that does not block (page cache hits complete inline, fast)
     * keeps the inline path; PAGEIN_URING_ASYNC=1 forces io-wq from the
     * first request */
    CHECK_OK(run_case(&s, data, "1", 0, &v));
    CHECK_EQ(v.async, 1);
    CHECK_EQ(v.async_from, 0);
    CHECK(v.max_inflight <= 4);

    close(s.fd);
    unlink(path);
    free(data);
    return PASS;
}

/* The threads' view: in flight never above the depth, and the engine's
 * batch path carries the view into its stats and JSON. */
TEST(readv_issue_threads_and_engine_view) {
    if (getenv("PAGEIN_UNDER_VALGRIND")) SKIP_BECAUSE("io_uring writes are invisible to valgrind memcheck");
    uint8_t *data = malloc(SZ);
    for (uint64_t o = 0; o < SZ; o++) data[o] = pat(o);
    const char *path = pt_tmppath("readv_issue2.bin");
    struct pi_source s;
    CHECK(open_src(&s, path, data) >= 0);
    struct pi_readv_view v;
    CHECK_OK(run_case(&s, data, NULL, 0, &v)); /* warms the page cache too */
    setenv("PAGEIN_NO_URING", "1", 1);
    CHECK_OK(run_case(&s, data, NULL, 0, &v));
    unsetenv("PAGEIN_NO_URING");
    CHECK_EQ(v.ring, 0);
    CHECK_EQ(v.async, 0);
    CHECK(v.max_inflight >= 1 && v.max_inflight <= 4);
    CHECK(v.mean_inflight > 0 && v.mean_inflight <= 4.0 + 1e-9);

    uint8_t *dst = malloc(SZ);
    struct pi_source *srcs[] = {&s};
    struct pi_span sp = {0, 0, SZ, dst};
    struct pi_engine_opts o = {.deliver = PI_DELIVER_BUFFERS, .request_bytes = 128 << 10, .depth = 3,
                               .max_gap = UINT64_MAX};
    struct pi_engine_stats es;
    CHECK_OK(pi_engine_run(srcs, 1, &sp, 1, &o, &es));
    CHECK(memcmp(dst, data, SZ) == 0);
    CHECK_EQ(es.submit_view, 1);
    CHECK(es.submit_max_inflight >= 1 && es.submit_max_inflight <= 3);
    CHECK(es.submit_mean_inflight > 0 && es.submit_mean_inflight <= 3.0 + 1e-9);
    CHECK(es.issue_seconds >= 0 && es.issue_seconds <= es.seconds + 1e-3);
    char js[1024];
    pi_engine_stats_json(&es, js, sizeof js);
    CHECK(strstr(js, "\"issue_async\": ") != NULL);
    CHECK(strstr(js, "\"issue_s\": ") != NULL);
    close(s.fd);
    unlink(path);
    free(dst);
    free(data);
    return PASS;
}
