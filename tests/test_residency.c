/* test_residency.c - page-cache residency, evict, lock and warm on plain
 * files and memory (pagein_range_*, pagein_cache_*). Residency is checked
 * against mincore() itself where it matters. */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1024u * 1024u)

/* Writes a file of n bytes of varied content (not all zeros: some
 * filesystems keep holes out of the cache). Returns 0 or -1. */
static int make_file(const char *path, size_t n, uint64_t seed) {
    uint8_t *b = malloc(n ? n : 1);
    if (!b) return -1;
    uint64_t s = seed;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = pt_rand(&s);
        memcpy(b + i, &v, n - i < 8 ? n - i : 8);
    }
    int rc = pt_write_file(path, b, n);
    free(b);
    if (rc == 0) {
        int fd = open(path, O_RDONLY);
        if (fd >= 0) {
            fsync(fd); /* dirty pages would survive DONTNEED */
            close(fd);
        }
    }
    return rc;
}

/* 1 when the temp directory's filesystem keeps file pages in memory
 * (tmpfs, ramfs): DONTNEED cannot drop them there. */
static int tmp_is_memory_fs(void) {
    struct statfs sf;
    if (statfs(pt_tmpdir(), &sf) != 0) return 0;
    return sf.f_type == 0x01021994 /* TMPFS */ || sf.f_type == (long)0x858458f6 /* RAMFS */;
}

TEST(residency_anonymous_bytes_clip) {
    const size_t ps = pagein_page_size();
    CHECK(ps >= 4096);
    uint8_t *m = mmap(NULL, 16 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    if (m == MAP_FAILED) return FAIL;
    m[0] = 1;
    m[3 * ps + 10] = 1;
    pagein_residency r;
    CHECK_OK(pagein_range_residency(m, 16 * ps, &r));
    CHECK_EQ(r.pages, 16);
    CHECK_EQ(r.resident_pages, 2);
    CHECK_EQ(r.bytes, 16 * ps);
    CHECK_EQ(r.resident_bytes, 2 * ps);
    /* An unaligned range covering the second half of page 0 and the first
     * 100 bytes of page 1: only the bytes on page 0 count. */
    CHECK_OK(pagein_range_residency(m + ps / 2, ps / 2 + 100, &r));
    CHECK_EQ(r.pages, 2);
    CHECK_EQ(r.resident_pages, 1);
    CHECK_EQ(r.bytes, ps / 2 + 100);
    CHECK_EQ(r.resident_bytes, ps / 2);
    /* Two ranges meeting inside resident page 3 add up to the page, once. */
    pagein_residency a, b, sum = {0, 0, 0, 0};
    CHECK_OK(pagein_range_residency(m + 3 * ps, 1000, &a));
    CHECK_OK(pagein_range_residency(m + 3 * ps + 1000, ps - 1000, &b));
    pagein_residency_add(&sum, &a);
    pagein_residency_add(&sum, &b);
    CHECK_EQ(sum.resident_bytes, ps);
    CHECK_EQ(sum.bytes, ps);
    CHECK_EQ(sum.resident_pages, 2); /* the page is touched by both ranges */
    /* Empty range; unmapped range. */
    CHECK_OK(pagein_range_residency(m, 0, &r));
    CHECK_EQ(r.bytes, 0);
    munmap(m, 16 * ps);
    CHECK_EQ(pagein_range_residency(m, ps, &r), -ENOMEM);
    return PASS;
}

TEST(residency_warm_evict_file) {
    if (tmp_is_memory_fs()) SKIP_BECAUSE("temp dir is on tmpfs/ramfs: DONTNEED cannot drop its pages");
    const char *p = pt_tmppath("warm.bin");
    const size_t n = 8 * MiB + 123; /* a partial last page */
    CHECK_EQ(make_file(p, n, 1), 0);
    pagein_cache_file *c = NULL;
    CHECK_OK(pagein_cache_open(&c, p));
    if (!c) return FAIL;
    CHECK_EQ(pagein_cache_size(c), n);
    pagein_residency r;
    CHECK_OK(pagein_cache_evict(c, 0, 0));
    CHECK_OK(pagein_cache_residency(c, 0, 0, &r));
    CHECK_EQ(r.bytes, n);
    CHECK_EQ(r.resident_bytes, 0);
    CHECK_EQ(r.resident_pages, 0);
    CHECK_EQ(r.pages, (n + pagein_page_size() - 1) / pagein_page_size());

    /* Warm the middle 2 MiB..5 MiB: exactly that is resident. Readahead by
     * the kernel may bring in a little more, never less. */
    CHECK_OK(pagein_cache_warm(c, 2 * MiB, 3 * MiB, 4));
    CHECK_OK(pagein_cache_residency(c, 2 * MiB, 3 * MiB, &r));
    CHECK_EQ(r.resident_bytes, 3 * MiB);
    /* Evict everything, then warm the whole file. */
    CHECK_OK(pagein_cache_evict(c, 0, 0));
    CHECK_OK(pagein_cache_residency(c, 0, 0, &r));
    CHECK_EQ(r.resident_bytes, 0);
    CHECK_OK(pagein_cache_warm(c, 0, 0, 0));
    CHECK_OK(pagein_cache_residency(c, 0, 0, &r));
    CHECK_EQ(r.resident_bytes, n);
    CHECK_EQ(r.resident_pages, r.pages);

    /* Evict a byte range in the middle: rounded out to pages, so the pages
     * touched by [1 MiB + 100, 2 MiB - 100) go, the rest stays. */
    const size_t ps = pagein_page_size();
    CHECK_OK(pagein_cache_evict(c, MiB + 100, MiB - 200));
    CHECK_OK(pagein_cache_residency(c, MiB, MiB, &r));
    CHECK_EQ(r.resident_bytes, 0);
    CHECK_OK(pagein_cache_residency(c, 0, MiB, &r));
    CHECK_EQ(r.resident_bytes, MiB);
    CHECK_OK(pagein_cache_residency(c, 2 * MiB, 0, &r));
    CHECK_EQ(r.resident_bytes, n - 2 * MiB);
    CHECK(ps > 0);

    /* Ranges past the end are clipped, not errors. */
    CHECK_OK(pagein_cache_residency(c, n + 10, 5, &r));
    CHECK_EQ(r.bytes, 0);
    CHECK_OK(pagein_cache_residency(c, n - 10, 1000, &r));
    CHECK_EQ(r.bytes, 10);
    CHECK_OK(pagein_cache_evict(c, 0, 0));
    pagein_cache_close(c);
    pagein_cache_close(NULL);
    return PASS;
}

/* Evict drops pages this process mapped itself (it unmaps its own view
 * first); a mapping held elsewhere keeps them, as documented. */
TEST(residency_evict_own_mapping) {
    if (tmp_is_memory_fs()) SKIP_BECAUSE("temp dir is on tmpfs/ramfs: DONTNEED cannot drop its pages");
    const char *p = pt_tmppath("mapped.bin");
    const size_t n = 2 * MiB;
    CHECK_EQ(make_file(p, n, 2), 0);
    pagein_cache_file *c = NULL;
    CHECK_OK(pagein_cache_open(&c, p));
    if (!c) return FAIL;
    CHECK_OK(pagein_cache_lock(c, 0, 0)); /* faults everything in, mapped */
    CHECK_OK(pagein_cache_unlock(c, 0, 0));
    pagein_residency r;
    CHECK_OK(pagein_cache_residency(c, 0, 0, &r));
    CHECK_EQ(r.resident_bytes, n);
    CHECK_OK(pagein_cache_evict(c, 0, 0));
    CHECK_OK(pagein_cache_residency(c, 0, 0, &r));
    CHECK_EQ(r.resident_bytes, 0);

    /* A second, independent mapping that touches the pages keeps them. */
    int fd = open(p, O_RDONLY);
    CHECK(fd >= 0);
    volatile const uint8_t *other = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(other != MAP_FAILED);
    unsigned sum = 0;
    for (size_t i = 0; i < n; i += 4096) sum += other[i];
    (void)sum;
    CHECK_OK(pagein_cache_evict(c, 0, 0));
    CHECK_OK(pagein_cache_residency(c, 0, 0, &r));
    CHECK_EQ(r.resident_bytes, n);
    munmap((void *)other, n);
    close(fd);
    CHECK_OK(pagein_cache_evict(c, 0, 0));
    CHECK_OK(pagein_cache_residency(c, 0, 0, &r));
    CHECK_EQ(r.resident_bytes, 0);
    pagein_cache_close(c);
    return PASS;
}

TEST(residency_lock_holds_pages) {
    SKIP_IF_ASAN();
    if (tmp_is_memory_fs()) SKIP_BECAUSE("temp dir is on tmpfs/ramfs: DONTNEED cannot drop its pages");
    const char *p = pt_tmppath("lock.bin");
    const size_t n = 4 * MiB;
    CHECK_EQ(make_file(p, n, 3), 0);
    struct rlimit rl;
    getrlimit(RLIMIT_MEMLOCK, &rl);
    pagein_cache_file *c = NULL;
    CHECK_OK(pagein_cache_open(&c, p));
    if (!c) return FAIL;
    CHECK_OK(pagein_cache_evict(c, 0, 0));
    int rc = pagein_cache_lock(c, 0, 0);
    if (rc == PAGEIN_E_MEMLOCK) {
        pagein_cache_close(c);
        SKIP_BECAUSE("RLIMIT_MEMLOCK (%llu bytes) forbids locking %zu bytes and no CAP_IPC_LOCK: %s",
                     (unsigned long long)rl.rlim_cur, n, pagein_last_error_detail());
    }
    CHECK_OK(rc);
    pagein_residency r;
    CHECK_OK(pagein_cache_residency(c, 0, 0, &r));
    CHECK_EQ(r.resident_bytes, n);
    /* Locked pages survive eviction advice. */
    CHECK_OK(pagein_cache_evict(c, 0, 0));
    CHECK_OK(pagein_cache_residency(c, 0, 0, &r));
    CHECK_EQ(r.resident_bytes, n);
    /* Locking shows in VmLck. */
    FILE *st = fopen("/proc/self/status", "r");
    CHECK(st != NULL);
    unsigned long long vmlck_kb = 0;
    char line[256];
    while (st && fgets(line, sizeof line, st))
        if (strncmp(line, "VmLck:", 6) == 0) vmlck_kb = strtoull(line + 6, NULL, 10);
    if (st) fclose(st);
    CHECK(vmlck_kb * 1024 >= n);
    CHECK_OK(pagein_cache_unlock(c, 0, 0));
    CHECK_OK(pagein_cache_evict(c, 0, 0));
    CHECK_OK(pagein_cache_residency(c, 0, 0, &r));
    CHECK_EQ(r.resident_bytes, 0);
    pagein_cache_close(c);
    return PASS;
}

/* The failure path. Root has CAP_IPC_LOCK, which makes mlock ignore
 * RLIMIT_MEMLOCK altogether, so a forked child lowers the limit and then
 * gives up root (setuid to nobody drops every capability) before locking
 * more than the limit. The child reports a result code through a pipe,
 * not its exit status: under valgrind a forked child inherits memcheck's
 * error count (and --error-exitcode) from whatever ran before it. */
TEST(residency_lock_memlock_error) {
    SKIP_IF_ASAN();
    const char *p = pt_tmppath("lockfail.bin");
    const size_t n = 1 * MiB;
    CHECK_EQ(make_file(p, n, 4), 0);
    pagein_cache_file *c = NULL;
    CHECK_OK(pagein_cache_open(&c, p));
    if (!c) return FAIL;
    int pfd[2];
    CHECK_EQ(pipe(pfd), 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        unsigned char res = 0;
        struct rlimit rl = {64 * 1024, 64 * 1024};
        const char *d;
        if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0) res = 10;
        else if (getuid() == 0 && setuid(65534) != 0) res = 11;
        else if (pagein_cache_lock(c, 0, 0) != PAGEIN_E_MEMLOCK) res = 12;
        else if (d = pagein_last_error_detail(),
                 !strstr(d, "RLIMIT_MEMLOCK") || !strstr(d, "ulimit -l") || !strstr(d, "65536")) res = 13;
        else if (pagein_cache_lock(c, 0, 16 * 1024) != 0) res = 14; /* under the limit it works */
        if (write(pfd[1], &res, 1) != 1) res = 15;
        _exit(res);
    }
    close(pfd[1]);
    CHECK(pid > 0);
    unsigned char res = 99;
    CHECK_EQ(read(pfd[0], &res, 1), 1);
    close(pfd[0]);
    waitpid(pid, NULL, 0);
    pagein_cache_close(c);
    if (res == 11) SKIP_BECAUSE("cannot drop root in the child (setuid failed), so CAP_IPC_LOCK bypasses the limit");
    CHECK_EQ(res, 0);
    return PASS;
}

TEST(residency_cache_open_errors) {
    pagein_cache_file *c = NULL;
    CHECK_EQ(pagein_cache_open(&c, pt_tmppath("does-not-exist")), -ENOENT);
    CHECK(c == NULL);
    CHECK(strstr(pagein_last_error_detail(), "does-not-exist") != NULL);
    CHECK_EQ(pagein_cache_open(&c, pt_tmpdir()), -EINVAL);
    CHECK(c == NULL);
    /* Empty file: every range is empty, every call succeeds. */
    const char *p = pt_tmppath("empty.bin");
    CHECK_EQ(pt_write_file(p, "", 0), 0);
    CHECK_OK(pagein_cache_open(&c, p));
    pagein_residency r;
    CHECK_OK(pagein_cache_residency(c, 0, 0, &r));
    CHECK_EQ(r.bytes, 0);
    CHECK_EQ(r.pages, 0);
    CHECK_OK(pagein_cache_warm(c, 0, 0, 0));
    CHECK_OK(pagein_cache_evict(c, 0, 0));
    CHECK_OK(pagein_cache_lock(c, 0, 0));
    CHECK_OK(pagein_cache_unlock(c, 0, 0));
    pagein_cache_close(c);
    return PASS;
}

/* Warming a file that shrank after open reads what is left, no SIGBUS. */
TEST(residency_warm_truncated) {
    const char *p = pt_tmppath("shrink.bin");
    CHECK_EQ(make_file(p, 2 * MiB, 5), 0);
    pagein_cache_file *c = NULL;
    CHECK_OK(pagein_cache_open(&c, p));
    if (!c) return FAIL;
    CHECK_EQ(truncate(p, MiB / 2), 0);
    CHECK_OK(pagein_cache_warm(c, 0, 0, 2));
    pagein_cache_close(c);
    return PASS;
}

/* The pagein_file_* entry points on a parsed file, and a file opened from
 * memory (residency works on the buffer; evict has no descriptor). */
TEST(residency_parsed_file) {
    if (tmp_is_memory_fs()) SKIP_BECAUSE("temp dir is on tmpfs/ramfs: DONTNEED cannot drop its pages");
    /* A safetensors file: one U8 tensor of 3 MiB after a page-sized header. */
    const char *p = pt_tmppath("one.safetensors");
    const size_t n = 3 * MiB;
    char hdr[4096];
    int h = snprintf(hdr, sizeof hdr, "{\"w\":{\"dtype\":\"U8\",\"shape\":[%zu],\"data_offsets\":[0,%zu]}}", n, n);
    CHECK(h > 0 && h < 4088);
    memset(hdr + h, ' ', (size_t)(4088 - h));
    uint8_t *img = malloc(4096 + n);
    CHECK(img != NULL);
    if (!img) return FAIL;
    uint64_t hl = 4088, seed = 9;
    memcpy(img, &hl, 8);
    memcpy(img + 8, hdr, 4088);
    for (size_t i = 0; i < n; i++) img[4096 + i] = (uint8_t)pt_rand(&seed);
    CHECK_EQ(pt_write_file(p, img, 4096 + n), 0);
    int fd = open(p, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    pagein_file *f = NULL;
    int rc = pagein_open(&f, p, NULL);
    if (rc == PAGEIN_E_UNSUPPORTED) {
        free(img);
        SKIP_BECAUSE("safetensors parser not in this build");
    }
    CHECK_OK(rc);
    if (!f) {
        free(img);
        return FAIL;
    }
    const pagein_tensor *t = pagein_tensor_get(f, "w");
    CHECK(t != NULL);
    pagein_residency r;
    CHECK_OK(pagein_file_evict(f, 0, 0));
    CHECK_OK(pagein_file_residency(f, t->offset, t->nbytes, &r));
    CHECK_EQ(r.bytes, n);
    CHECK_EQ(r.resident_bytes, 0);
    if (!ASAN_BUILD) {
        CHECK_OK(pagein_file_lock(f, t->offset, t->nbytes));
        CHECK_OK(pagein_file_residency(f, t->offset, t->nbytes, &r));
        CHECK_EQ(r.resident_bytes, n);
        CHECK_OK(pagein_file_unlock(f, t->offset, t->nbytes));
    }
    CHECK_OK(pagein_file_evict(f, 0, 0));
    CHECK_OK(pagein_file_residency(f, 0, 0, &r));
    CHECK_EQ(r.resident_bytes, 0);
    pagein_close(f);

    /* From memory: anonymous pages we wrote are "resident"; no evict. */
    CHECK_OK(pagein_open_memory(&f, img, 4096 + n, "mem", NULL));
    if (f) {
        CHECK_OK(pagein_file_residency(f, 4096, n, &r));
        CHECK_EQ(r.resident_bytes, n);
        CHECK_EQ(pagein_file_evict(f, 0, 0), PAGEIN_E_UNSUPPORTED);
        CHECK_EQ(pagein_file_residency(NULL, 0, 0, &r), PAGEIN_E_INVALID);
        pagein_close(f);
    }
    free(img);
    return PASS;
}
