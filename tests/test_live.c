/* test_live.c - files changing under readers: hot reload under atomic
 * replacement, in-place truncation under guarded readers, model checks.
 * Public API only. PAGEIN_UNDER_VALGRIND=1 shortens the stress loops. */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NT 8
#define TBYTES (32u << 10)

static int slow(void) { return getenv("PAGEIN_UNDER_VALGRIND") != NULL; }

/* Tensor i of version v: v in the first 4 bytes, then a pattern of (v, i). */
static void gen(uint8_t *p, uint32_t v, uint32_t i) {
    uint64_t s = (uint64_t)v * 0x9e3779b97f4a7c15ull + i;
    for (size_t j = 0; j < TBYTES; j++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[j] = (uint8_t)s;
    }
    memcpy(p, &v, 4);
}

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static char names[NT][48];

static int write_version(const char *path, uint32_t v, uint8_t *buf) {
    pagein_write_tensor t[NT];
    static uint64_t shape[1] = {TBYTES};
    for (uint32_t i = 0; i < NT; i++) {
        snprintf(names[i], sizeof names[i], "model.layers.%u.w", i);
        gen(buf + (size_t)i * TBYTES, v, i);
        t[i] = (pagein_write_tensor){names[i], PAGEIN_DTYPE_U8, 1, shape, buf + (size_t)i * TBYTES, NULL, NULL};
    }
    return pagein_safetensors_write(path, t, NT, NULL);
}

/* Checksum of version v in model order (tensors are written by name, so
 * model order is layer 0..NT-1 whatever the writer's sort). */
static uint64_t version_sum(uint32_t v, uint8_t *buf) {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < NT; i++) {
        gen(buf, v, i);
        h = fnv(h, buf, TBYTES);
    }
    return h;
}

struct stress {
    pagein_live *l;
    uint64_t *sums;  /* sums[v] for v in 1..nver */
    uint32_t nver;
    _Atomic int stop;
    _Atomic long reads, bad, mixed;
    _Atomic uint32_t max_seen;
};

static void *reader(void *arg) {
    struct stress *s = arg;
    while (!atomic_load(&s->stop)) {
        pagein_model *m = pagein_live_acquire(s->l);
        if (!m) {
            atomic_fetch_add(&s->bad, 1);
            break;
        }
        uint64_t h = 1469598103934665603ull;
        uint32_t v0 = 0;
        int mixed = 0;
        size_t n = pagein_model_tensor_count(m);
        for (size_t i = 0; i < n; i++) {
            char nm[48];
            snprintf(nm, sizeof nm, "model.layers.%zu.w", i);
            const pagein_tensor *t = pagein_model_tensor_get(m, nm);
            if (!t || t->nbytes != TBYTES) {
                mixed = 1;
                break;
            }
            uint32_t v;
            memcpy(&v, t->data, 4);
            if (i == 0) v0 = v;
            else if (v != v0) mixed = 1;
            h = fnv(h, t->data, TBYTES);
        }
        if (n != NT || mixed) atomic_fetch_add(&s->mixed, 1);
        else if (v0 < 1 || v0 > s->nver || s->sums[v0] != h) atomic_fetch_add(&s->bad, 1);
        else {
            uint32_t cur = atomic_load(&s->max_seen);
            while (v0 > cur && !atomic_compare_exchange_weak(&s->max_seen, &cur, v0)) {
            }
        }
        atomic_fetch_add(&s->reads, 1);
        pagein_live_release(s->l, m);
    }
    return NULL;
}

/* The writer fsyncs every version; on a busy disk 100 fsyncs take seconds.
 * tmpfs (/dev/shm) has the same mapping semantics with free fsyncs. */
static const char *fast_path(const char *name, char *buf, size_t len) {
    if (access("/dev/shm", W_OK) == 0) {
        snprintf(buf, len, "/dev/shm/pagein-test-%ld-%s", (long)getpid(), name);
        return buf;
    }
    return pt_tmppath(name);
}

TEST(live_stress_atomic_replace) {
    char pbuf[256];
    const char *path = fast_path("live.safetensors", pbuf, sizeof pbuf);
    uint32_t nver = slow() ? 11 : 101; /* the first version + 100 replacements */
    uint8_t *buf = malloc((size_t)NT * TBYTES);
    struct stress s = {0};
    s.nver = nver;
    s.sums = calloc(nver + 1, sizeof *s.sums);
    for (uint32_t v = 1; v <= nver; v++) s.sums[v] = version_sum(v, buf);
    CHECK_OK(write_version(path, 1, buf));
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_LAZY;
    int rc = pagein_live_open(&s.l, path, &o);
    CHECK_OK(rc);
    if (rc < 0) {
        if (path == pbuf) unlink(path);
        return FAIL;
    }
    CHECK_EQ(pagein_live_reload(s.l, 0), 0); /* nothing changed yet */
    CHECK_EQ(pagein_live_version(s.l), 1);
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, reader, &s);
    int reloads = 0;
    for (uint32_t v = 2; v <= nver; v++) {
        CHECK_OK(write_version(path, v, buf)); /* temporary file + rename */
        rc = pagein_live_reload(s.l, 0);
        if (rc == 1) reloads++;
        else CHECK_OK(rc);
        usleep(500); /* let the readers see this version */
    }
    /* let a reader see the newest version (bounded: the machine may be slow) */
    for (int w = 0; w < 2000 && atomic_load(&s.max_seen) < nver; w++) usleep(5000);
    atomic_store(&s.stop, 1);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    printf("    %u versions, %d reloads, %ld checksummed reads, newest seen %u\n", nver, reloads,
           (long)s.reads, (unsigned)s.max_seen);
    CHECK_EQ(reloads, nver - 1);
    CHECK_EQ(pagein_live_version(s.l), nver);
    CHECK_EQ(s.bad, 0);
    CHECK_EQ(s.mixed, 0);
    CHECK(s.reads > 0);
    CHECK_EQ(s.max_seen, nver);
    /* a borrow held across close stays valid */
    pagein_model *m = pagein_live_acquire(s.l);
    CHECK(m != NULL);
    pagein_live_close(s.l);
    const pagein_tensor *t = pagein_model_tensor_get(m, "model.layers.7.w");
    CHECK(t && t->nbytes == TBYTES);
    uint32_t v = 0;
    if (t) memcpy(&v, t->data, 4);
    CHECK_EQ(v, nver);
    pagein_live_release(s.l, m); /* frees the live object */
    if (path == pbuf) unlink(path);
    free(s.sums);
    free(buf);
    return PASS;
}

TEST(live_reload_errors_keep_current) {
    const char *path = pt_tmppath("live2.safetensors");
    uint8_t *buf = malloc((size_t)NT * TBYTES);
    CHECK_OK(write_version(path, 1, buf));
    pagein_live *l = NULL;
    CHECK_OK(pagein_live_open(&l, path, NULL));
    if (!l) return FAIL;
    pagein_model *m1 = pagein_live_acquire(l);
    CHECK_OK(pagein_model_check(m1));
    /* replaced by something that is not a model: reload fails, v1 stays */
    CHECK_EQ(pt_write_file(pt_tmppath("junk"), "junk", 4), 0);
    CHECK_EQ(rename(pt_tmppath("junk"), path), 0);
    CHECK_EQ(pagein_model_check(m1), PAGEIN_E_CHANGED);
    CHECK(pagein_live_reload(l, 0) < 0);
    CHECK_EQ(pagein_live_version(l), 1);
    pagein_model *m1b = pagein_live_acquire(l);
    CHECK(m1b == m1);
    pagein_live_release(l, m1b);
    /* removed: still CHANGED; forced reload of a good file works */
    CHECK_EQ(unlink(path), 0);
    CHECK_EQ(pagein_model_check(m1), PAGEIN_E_CHANGED);
    CHECK_OK(write_version(path, 2, buf));
    CHECK_EQ(pagein_live_reload(l, 1), 1);
    CHECK_EQ(pagein_live_version(l), 2);
    pagein_model *m2 = pagein_live_acquire(l);
    CHECK(m2 != m1);
    CHECK_OK(pagein_model_check(m2));
    /* m1 is still borrowed and readable */
    const pagein_tensor *t = pagein_model_tensor_get(m1, "model.layers.0.w");
    uint32_t v = 0;
    if (t) memcpy(&v, t->data, 4);
    CHECK_EQ(v, 1);
    pagein_live_release(l, m1);
    pagein_live_release(l, m2);
    pagein_live_close(l);
    CHECK_EQ(pagein_live_open(&l, pt_tmppath("missing"), NULL), -ENOENT);
    free(buf);
    return PASS;
}

/* ---- in-place truncation under guarded readers ----------------------------- */

struct trunc_stress {
    pagein_model *m;
    const pagein_file *f;
    _Atomic int stop;
    _Atomic long ok, truncated, other;
};

static void count(struct trunc_stress *s, int rc) {
    if (rc == 0) atomic_fetch_add(&s->ok, 1);
    else if (rc == PAGEIN_E_TRUNCATED) atomic_fetch_add(&s->truncated, 1);
    else {
        if (atomic_fetch_add(&s->other, 1) == 0)
            printf("    unexpected %d (%s): %s\n", rc, pagein_strerror(rc), pagein_last_error_detail());
    }
}

static void *trunc_reader(void *arg) {
    struct trunc_stress *s = arg;
    uint8_t *buf = malloc(TBYTES);
    for (unsigned k = 0; !atomic_load(&s->stop); k++) {
        size_t n = pagein_model_tensor_count(s->m);
        for (size_t i = 0; i < n; i++) {
            const pagein_tensor *t = pagein_model_tensor_at(s->m, i);
            count(s, pagein_tensor_copy(s->f, t, 0, buf, (size_t)t->nbytes));
        }
        if (k % 4 == 0) {
            const pagein_tensor *t = pagein_model_tensor_at(s->m, k % n);
            count(s, pagein_model_load_tensors(s->m, &t, 1)); /* the load engine's guarded populate */
        }
    }
    free(buf);
    return NULL;
}

TEST(live_stress_truncate_in_place) {
    const char *path = pt_tmppath("trunc.safetensors");
    uint8_t *buf = malloc((size_t)NT * TBYTES);
    CHECK_OK(write_version(path, 1, buf));
    struct stat st;
    CHECK_EQ(stat(path, &st), 0);
    struct trunc_stress s = {0};
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_LAZY;
    int rc = pagein_model_open(&s.m, path, &o);
    CHECK_OK(rc);
    if (rc < 0) return FAIL;
    s.f = pagein_model_file(s.m, 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, trunc_reader, &s);
    int fd = open(path, O_WRONLY);
    uint64_t seed = pt_seed();
    int rounds = slow() ? 20 : 200, checked = 0;
    for (int r = 0; r < rounds; r++) {
        off_t to = (off_t)(pt_rand(&seed) % (uint64_t)st.st_size);
        CHECK_EQ(ftruncate(fd, to), 0);
        if (pagein_model_check(s.m) == PAGEIN_E_TRUNCATED) checked++;
        /* keep it short until a reader has run into it (bounded wait) */
        long seen = atomic_load(&s.truncated);
        for (int w = 0; w < 100 && atomic_load(&s.truncated) == seen; w++) usleep(300);
        CHECK_EQ(ftruncate(fd, st.st_size), 0); /* grows back (zeros): reads work again */
        usleep(300);
    }
    close(fd);
    atomic_store(&s.stop, 1);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    printf("    %d truncations: %ld guarded reads ok, %ld PAGEIN_E_TRUNCATED, %ld other\n", rounds, (long)s.ok,
           (long)s.truncated, (long)s.other);
    CHECK_EQ(s.other, 0);
    CHECK(s.truncated > 0);
    CHECK_EQ(checked, rounds);
    CHECK_OK(pagein_model_check(s.m));
    pagein_model_close(s.m);
    free(buf);
    return PASS;
}

/* ---- truncation while a file is being opened -------------------------------- */


struct open_race {
    const char *path;
    _Atomic int stop;
    _Atomic long ok, failed;
};

static void *truncator(void *arg) {
    struct open_race *r = arg;
    struct stat st;
    if (stat(r->path, &st) != 0) return NULL;
    int fd = open(r->path, O_WRONLY);
    while (!atomic_load(&r->stop)) {
        if (ftruncate(fd, 4096) != 0) break;
        usleep(50);
        if (ftruncate(fd, st.st_size) != 0) break;
        usleep(50);
    }
    close(fd);
    return NULL;
}

TEST(guard_open_while_truncated) {
    /* A parse abandoned by the guard frees what it had allocated (the
     * allocation journal): LeakSanitizer and valgrind run this too, the
     * latter with fewer rounds. */
    int rounds = slow() ? 30 : 300;
    /* a 4 MiB header: metadata with a long value, so parsing takes a while */
    size_t vlen = 4u << 20;
    char *v = malloc(vlen + 1);
    memset(v, 'x', vlen);
    v[vlen] = 0;
    const char *keys[1] = {"big"}, *vals[1] = {v};
    pagein_write_opts wo = PAGEIN_WRITE_OPTS_INIT;
    wo.meta_keys = keys;
    wo.meta_values = vals;
    wo.n_meta = 1;
    static uint8_t d[16];
    uint64_t sh[1] = {4};
    pagein_write_tensor t = {"w", PAGEIN_DTYPE_F32, 1, sh, d, NULL, NULL};
    struct open_race r = {.path = pt_tmppath("openrace.safetensors")};
    CHECK_OK(pagein_safetensors_write(r.path, &t, 1, &wo));
    free(v);
    pthread_t th;
    pthread_create(&th, NULL, truncator, &r);
    long truncated = 0, guarded = 0;
    /* the race is required: at least `rounds` opens, and on until one parse
     * was stopped by the guard (bounded: 20 s) */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int i = 0;
    for (;; i++) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (i >= rounds && (guarded > 0 || t1.tv_sec - t0.tv_sec > 20)) break;
        pagein_file *f = NULL;
        int rc = pagein_open(&f, r.path, NULL);
        if (rc == 0) atomic_fetch_add(&r.ok, 1);
        else atomic_fetch_add(&r.failed, 1);
        if (rc == PAGEIN_E_TRUNCATED) truncated++;
        /* the guard's own message: the parser was stopped by a fault */
        if (rc == PAGEIN_E_TRUNCATED && strstr(pagein_last_error_detail(), "shrank under the mapping")) guarded++;
        CHECK(rc == 0 || rc <= PAGEIN_E_BASE);
        pagein_close(f);
    }
    atomic_store(&r.stop, 1);
    pthread_join(th, NULL);
    printf("    %d opens racing truncation: %ld ok, %ld failed (%ld PAGEIN_E_TRUNCATED, %ld of them faults "
           "caught in the parser), no crash\n",
           i, (long)r.ok, (long)r.failed, truncated, guarded);
    CHECK(guarded > 0); /* a parse really ran into the truncation */
    return PASS;
}

/* Every copy-out helper returns PAGEIN_E_TRUNCATED on a file truncated
 * after open; none raises SIGBUS. */
TEST(guard_copy_helpers_after_truncation) {
    const char *path = pt_tmppath("helpers.safetensors");
    uint8_t *buf = malloc((size_t)NT * TBYTES);
    CHECK_OK(write_version(path, 1, buf));
    pagein_file *f = NULL;
    CHECK_OK(pagein_open(&f, path, NULL));
    if (!f) return FAIL;
    const pagein_tensor *t = pagein_tensor_get(f, "model.layers.7.w");
    CHECK(t != NULL);
    if (!t) return FAIL;
    CHECK_OK(pagein_tensor_copy(f, t, 0, buf, TBYTES));
    CHECK_OK(pagein_tensor_copy(f, t, 0, buf, TBYTES));
    CHECK_OK(pagein_file_check(f));
    CHECK_EQ(truncate(path, 4096), 0);
    CHECK_EQ(pagein_file_check(f), PAGEIN_E_TRUNCATED);
    CHECK_EQ(pagein_tensor_copy(f, t, 0, buf, TBYTES), PAGEIN_E_TRUNCATED);
    CHECK(strstr(pagein_last_error_detail(), "model.layers.7.w") != NULL);
    CHECK(strstr(pagein_last_error_detail(), "shrank under the mapping") != NULL);
    CHECK_EQ(pagein_tensor_copy(f, t, 100, buf, 1000), PAGEIN_E_TRUNCATED);
    pagein_close(f);
    free(buf);
    return PASS;
}

/* The load engine's paths on a file truncated after open: populate, the
 * prefetch pager's layer cursor. Errors, never SIGBUS. */
TEST(guard_load_paths_after_truncation) {
    const char *path = pt_tmppath("loadtrunc.safetensors");
    static const pagein_strategy strategies[] = {PAGEIN_STRATEGY_LAZY, PAGEIN_STRATEGY_POPULATE,
                                                 PAGEIN_STRATEGY_PREFETCH};
    for (size_t k = 0; k < sizeof strategies / sizeof strategies[0]; k++) {
        uint8_t *b2 = malloc((size_t)NT * TBYTES);
        CHECK_OK(write_version(path, 1, b2));
        free(b2);
        pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
        o.strategy = strategies[k];
        pagein_model *m = NULL;
        int rc = pagein_model_open(&m, path, &o);
        CHECK_OK(rc);
        if (rc < 0) continue;
        CHECK_EQ(truncate(path, 4096 + TBYTES), 0); /* keeps the header and part of layer 0 */
        CHECK_EQ(pagein_model_check(m), PAGEIN_E_TRUNCATED);
        rc = pagein_model_load_tensors(m, NULL, 0);
        CHECK(rc == PAGEIN_E_TRUNCATED);
        int32_t nl = pagein_model_layer_count(m);
        int errors = 0;
        for (int32_t l = -1; l <= nl; l++) {
            rc = pagein_layer_wait(m, l);
            CHECK(rc == 0 || rc == PAGEIN_E_TRUNCATED);
            if (rc < 0) errors++;
            rc = pagein_layer_done(m, l);
            CHECK(rc == 0 || rc == PAGEIN_E_TRUNCATED);
        }
        printf("    %s: load_tensors PAGEIN_E_TRUNCATED, %d of %d layer waits failed cleanly\n",
               pagein_strategy_name(strategies[k]), errors, nl + 2);
        pagein_model_close(m);
    }
    return PASS;
}
