/* test_guard.c - truncation guards: files shrinking under a mapping give
 * PAGEIN_E_TRUNCATED, never SIGBUS; SIGBUS outside guarded reads still
 * reaches the program's own handler. White-box: includes src/internal.h to
 * build file objects over raw mappings and to reset the handler in forked
 * children. */
#include "test.h"
#include "../src/io/io.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PG 4096

/* A file of npages pages of a byte pattern, mapped whole, wrapped in a
 * pagein_file (white-box) so the public guarded accessors can be used
 * before any parser is involved. */
struct mf {
    pagein_file f;
    char path[4096];
    size_t len;
};

static int mf_open(struct mf *m, const char *name, size_t len) {
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", pt_tmppath(name));
    uint8_t *buf = malloc(len);
    if (!buf) return -1;
    for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)(i * 7 + 1);
    int rc = pt_write_file(m->path, buf, len);
    free(buf);
    if (rc) return -1;
    m->f.fd = open(m->path, O_RDONLY | O_CLOEXEC);
    if (m->f.fd < 0) return -1;
    struct stat st;
    fstat(m->f.fd, &st);
    m->f.dev = st.st_dev;
    m->f.ino = st.st_ino;
    void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, m->f.fd, 0);
    if (p == MAP_FAILED) return -1;
    m->f.base = p;
    m->f.len = m->len = len;
    m->f.mapped = 1;
    m->f.path = m->path;
    return 0;
}

static void mf_close(struct mf *m) {
    if (m->f.base) munmap((void *)m->f.base, m->len);
    if (m->f.fd >= 0) close(m->f.fd);
}

static pagein_tensor mk_tensor(struct mf *m, uint64_t off, uint64_t n) {
    pagein_tensor t;
    memset(&t, 0, sizeof t);
    t.name = "w";
    t.name_len = 1;
    t.offset = off;
    t.nbytes = n;
    t.data = m->f.base + off;
    return t;
}

static int shrink(const char *path, off_t len) {
    int fd = open(path, O_WRONLY);
    if (fd < 0) return -1;
    int rc = ftruncate(fd, len);
    close(fd);
    return rc;
}

TEST(guard_copy_truncated) {
    struct mf m;
    if (mf_open(&m, "copy.bin", 4 * PG) != 0) SKIP_BECAUSE("cannot create and map a temp file");
    pagein_tensor t = mk_tensor(&m, 100, 3 * PG);
    uint8_t *dst = malloc(3 * PG);
    CHECK_OK(pagein_tensor_copy(&m.f, &t, 0, dst, 3 * PG));
    CHECK_EQ(dst[0], (uint8_t)(100 * 7 + 1));
    CHECK_EQ(dst[3 * PG - 1], (uint8_t)((100 + 3 * PG - 1) * 7 + 1));
    CHECK_EQ(pagein_tensor_copy(&m.f, &t, 1, dst, 3 * PG), PAGEIN_E_RANGE);
    CHECK_EQ(pagein_tensor_copy(&m.f, &t, 3 * PG + 1, dst, 0), PAGEIN_E_RANGE);
    CHECK_OK(pagein_file_check(&m.f));

    CHECK_EQ(shrink(m.path, PG), 0);
    CHECK_EQ(pagein_file_check(&m.f), PAGEIN_E_TRUNCATED);
    /* the part still inside the file copies fine */
    CHECK_OK(pagein_tensor_copy(&m.f, &t, 0, dst, PG - 100));
    int rc = pagein_tensor_copy(&m.f, &t, 0, dst, 3 * PG);
    CHECK_EQ(rc, PAGEIN_E_TRUNCATED);
    const char *d = pagein_last_error_detail();
    CHECK(strstr(d, m.path) != NULL);
    CHECK(strstr(d, "offset 4096") != NULL);
    CHECK(strstr(d, "tensor 'w'") != NULL);
    CHECK(strstr(d, "now 4096 bytes") != NULL);
    /* again, from another starting point: the guard is reusable */
    CHECK_EQ(pagein_tensor_copy(&m.f, &t, 2 * PG, dst, PG), PAGEIN_E_TRUNCATED);
    CHECK(strstr(pagein_last_error_detail(), "offset 8292") != NULL);
    /* NULL file: still guarded, the message cannot name it */
    CHECK_EQ(pagein_tensor_copy(NULL, &t, 0, dst, 3 * PG), PAGEIN_E_TRUNCATED);
    free(dst);
    mf_close(&m);
    return PASS;
}

TEST(guard_populate_truncated) {
    struct mf m;
    if (mf_open(&m, "pop.bin", 8 * PG) != 0) SKIP_BECAUSE("cannot create and map a temp file");
    CHECK_OK(pi_guard_populate(m.f.base, 8 * PG, m.path, 0, m.f.fd));
    CHECK_OK(pi_guard_populate(m.f.base + 10, 5 * PG, m.path, 10, m.f.fd));
    CHECK_OK(pi_guard_touch(m.f.base + 10, 5 * PG, m.path, 10, m.f.fd));
    CHECK_EQ(shrink(m.path, 3 * PG + 5), 0);
    /* the partial last page reads as zeros past the end: no error */
    CHECK_OK(pi_guard_populate(m.f.base, 4 * PG, m.path, 0, m.f.fd));
    CHECK_EQ(pi_guard_populate(m.f.base, 8 * PG, m.path, 0, m.f.fd), PAGEIN_E_TRUNCATED);
    CHECK(strstr(pagein_last_error_detail(), "offset 16384") != NULL);
    CHECK_EQ(pi_guard_touch(m.f.base + 5 * PG + 3, PG, m.path, 5 * PG + 3, -1), PAGEIN_E_TRUNCATED);
    CHECK(strstr(pagein_last_error_detail(), "offset 20483") != NULL);
    /* an unmapped range is an OS error, not a crash */
    void *hole = mmap(NULL, PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(hole, PG);
    CHECK_EQ(pi_guard_populate(hole, PG, "hole", 0, -1), -ENOMEM);
    mf_close(&m);
    return PASS;
}

struct nest_ctx {
    struct mf *m;
    int inner_rc;
};

static int inner_fn(void *arg) {
    struct nest_ctx *c = arg;
    volatile const uint8_t *p = c->m->f.base;
    return p[6 * PG]; /* beyond the end: faults inside the inner guard */
}

static int outer_fn(void *arg) {
    struct nest_ctx *c = arg;
    c->inner_rc = pi_guard_call(c->m->f.base + 4 * PG, 4 * PG, "inner", 4 * PG, -1, inner_fn, c);
    volatile const uint8_t *p = c->m->f.base;
    return p[7 * PG]; /* faults again, now in the outer guard only */
}

TEST(guard_nested) {
    struct mf m;
    if (mf_open(&m, "nest.bin", 8 * PG) != 0) SKIP_BECAUSE("cannot create and map a temp file");
    CHECK_EQ(shrink(m.path, 2 * PG), 0);
    struct nest_ctx c = {&m, 0};
    int rc = pi_guard_call(m.f.base, 8 * PG, "outer", 0, -1, outer_fn, &c);
    CHECK_EQ(c.inner_rc, PAGEIN_E_TRUNCATED);
    CHECK_EQ(rc, PAGEIN_E_TRUNCATED);
    CHECK(strstr(pagein_last_error_detail(), "outer: offset 28672") != NULL);
    mf_close(&m);
    return PASS;
}

/* ---- SIGBUS outside guarded reads goes where it went before ------------- */

static volatile sig_atomic_t user_hits;
static void user_handler(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)uc;
    if (si->si_code <= 0) { /* kill(): count and carry on */
        user_hits++;
        return;
    }
    _exit(42); /* a real fault: the program's handler decides */
}

/* Runs in a forked child; returns the child's exit code (or 128+signal). */
static int in_child(void (*fn)(struct mf *), struct mf *m) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        pi_guard_uninstall(); /* the parent may have registered already */
        fn(m);
        _exit(0);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid) return -1;
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return WEXITSTATUS(st);
}

static void child_chain(struct mf *m) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = user_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
    pagein_tensor t = mk_tensor(m, 0, 4 * PG);
    uint8_t dst[4 * PG];
    /* guarded: an error, the user handler is not involved */
    if (pagein_tensor_copy(&m->f, &t, 0, dst, sizeof dst) != PAGEIN_E_TRUNCATED) _exit(3);
    /* a SIGBUS sent by kill reaches the user handler, which returns */
    raise(SIGBUS);
    if (user_hits != 1) _exit(4);
    /* an unguarded fault reaches the user handler, which exits 42 */
    volatile const uint8_t *p = m->f.base;
    (void)p[3 * PG];
    _exit(5);
}

static void child_default(struct mf *m) {
    signal(SIGBUS, SIG_DFL);
    pagein_tensor t = mk_tensor(m, 0, 4 * PG);
    uint8_t dst[4 * PG];
    if (pagein_tensor_copy(&m->f, &t, 0, dst, sizeof dst) != PAGEIN_E_TRUNCATED) _exit(3);
    volatile const uint8_t *p = m->f.base;
    (void)p[3 * PG]; /* dies of SIGBUS as without pagein */
    _exit(5);
}

static void child_ignore_kill(struct mf *m) {
    signal(SIGBUS, SIG_IGN);
    if (pi_guard_install() != 0) _exit(3);
    raise(SIGBUS); /* ignored, as the program asked */
    pagein_tensor t = mk_tensor(m, 0, 4 * PG);
    uint8_t dst[4 * PG];
    if (pagein_tensor_copy(&m->f, &t, 0, dst, sizeof dst) != PAGEIN_E_TRUNCATED) _exit(4);
    _exit(0);
}

TEST(guard_chains_previous_handler) {
    struct mf m;
    if (mf_open(&m, "chain.bin", 4 * PG) != 0) SKIP_BECAUSE("cannot create and map a temp file");
    CHECK_EQ(shrink(m.path, PG), 0);
    CHECK_EQ(in_child(child_chain, &m), 42);
    CHECK_EQ(in_child(child_default, &m), 128 + SIGBUS);
    CHECK_EQ(in_child(child_ignore_kill, &m), 0);
    mf_close(&m);
    return PASS;
}

/* ---- many threads faulting at once -------------------------------------- */

struct race {
    struct mf *m;
    _Atomic int stop;
    _Atomic long ok, truncated, other;
};

static void *race_reader(void *arg) {
    struct race *r = arg;
    pagein_tensor t = mk_tensor(r->m, 0, 16 * PG);
    uint8_t *dst = malloc(16 * PG);
    while (!atomic_load(&r->stop)) {
        int rc = pagein_tensor_copy(&r->m->f, &t, 0, dst, 16 * PG);
        if (rc == 0) atomic_fetch_add(&r->ok, 1);
        else if (rc == PAGEIN_E_TRUNCATED) atomic_fetch_add(&r->truncated, 1);
        else atomic_fetch_add(&r->other, 1);
        rc = pi_guard_populate(r->m->f.base, 16 * PG, r->m->path, 0, -1);
        if (rc != 0 && rc != PAGEIN_E_TRUNCATED) atomic_fetch_add(&r->other, 1);
    }
    free(dst);
    return NULL;
}

/* ThreadSanitizer cannot run the guard: a fault inside its memcpy
 * interceptor, left by siglongjmp, kills the process (the guard's tests
 * fail there, most of SIGBUS; google/sanitizers#482), so they are
 * not in mk/tsan.mk's list and this one says so if run there. */
#if defined(__SANITIZE_THREAD__)
#define TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TSAN_BUILD 1
#endif
#endif

TEST(guard_threads_truncate_race) {
#ifdef TSAN_BUILD
    SKIP_BECAUSE("ThreadSanitizer does not support leaving a fault's handler by siglongjmp (the guard)");
#endif
    struct mf m;
    if (mf_open(&m, "race.bin", 16 * PG) != 0) SKIP_BECAUSE("cannot create and map a temp file");
    struct race r = {.m = &m};
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, race_reader, &r);
    int fd = open(m.path, O_WRONLY);
    CHECK(fd >= 0);
    /* the race is required: at least 200 rounds, and on until a reader's
     * copy was stopped by a truncation (bounded: 20 s) */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int i = 0;
    for (;; i++) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (i >= 200 && (atomic_load(&r.truncated) > 0 || t1.tv_sec - t0.tv_sec > 20)) break;
        CHECK_EQ(ftruncate(fd, (off_t)(i % 16) * PG), 0);
        usleep(200);
        CHECK_EQ(ftruncate(fd, 16 * PG), 0);
        usleep(200);
    }
    close(fd);
    atomic_store(&r.stop, 1);
    for (int k = 0; k < 4; k++) pthread_join(th[k], NULL);
    printf("    %d truncations: %ld copies ok, %ld truncated, %ld other\n", i, (long)r.ok, (long)r.truncated,
           (long)r.other);
    CHECK_EQ(r.other, 0);
    if (r.truncated == 0) printf("    the race did not happen: no copy met a truncation in 20 s\n");
    CHECK(r.truncated > 0); /* a copy really ran into a truncation */
    CHECK(r.ok > 0);
    mf_close(&m);
    return PASS;
}
