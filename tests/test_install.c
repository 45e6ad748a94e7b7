/* test_install.c - pagein_install replaces files atomically; mappings of
 * the old file keep working. Public API only. */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int fill(const char *path, char c, size_t n) {
    char *b = malloc(n);
    memset(b, c, n);
    int rc = pt_write_file(path, b, n);
    free(b);
    return rc;
}

TEST(install_keeps_old_mapping) {
    const char *src = pt_tmppath("inst-src.bin"), *dest = pt_tmppath("inst-dest.bin");
    CHECK_EQ(fill(src, 'n', 1 << 20), 0);
    CHECK_EQ(fill(dest, 'o', 3 << 20), 0); /* old is larger: truncating it would SIGBUS */
    int fd = open(dest, O_RDONLY);
    CHECK(fd >= 0);
    const char *old = mmap(NULL, 3 << 20, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(old != MAP_FAILED);
    struct stat st0, st1;
    fstat(fd, &st0);
    pagein_install_opts o = PAGEIN_INSTALL_OPTS_INIT;
    CHECK_OK(pagein_install(src, dest, &o));
    /* the old mapping still reads the complete old version */
    CHECK_EQ(old[0], 'o');
    CHECK_EQ(old[(3 << 20) - 1], 'o');
    CHECK_EQ(stat(dest, &st1), 0);
    CHECK(st1.st_ino != st0.st_ino);
    CHECK_EQ(st1.st_size, 1 << 20);
    size_t n = 0;
    char *got = pt_read_file(dest, &n);
    CHECK(got && n == (1 << 20) && got[0] == 'n' && got[n - 1] == 'n');
    free(got);
    munmap((void *)old, 3 << 20);
    close(fd);
    return PASS;
}

TEST(install_errors) {
    const char *src = pt_tmppath("inst-e-src.bin"), *dest = pt_tmppath("inst-e-dest.bin");
    CHECK_EQ(fill(src, 'x', 1000), 0);
    CHECK_EQ(pagein_install(NULL, dest, NULL), PAGEIN_E_INVALID);
    CHECK_EQ(pagein_install(pt_tmppath("nope"), dest, NULL), -ENOENT);
    CHECK_EQ(pagein_install(src, src, NULL), PAGEIN_E_INVALID);
    CHECK_EQ(pagein_install(pt_tmpdir(), dest, NULL), PAGEIN_E_INVALID); /* a directory */
    CHECK_EQ(pagein_install(src, "/nonexistent-dir-pagein/x", NULL), -ENOENT);
    /* validation refuses a non-model and leaves no file behind */
    pagein_install_opts o = PAGEIN_INSTALL_OPTS_INIT;
    o.flags = PAGEIN_INSTALL_VALIDATE | PAGEIN_INSTALL_NO_SYNC;
    CHECK(pagein_install(src, dest, &o) < 0);
    CHECK(access(dest, F_OK) != 0);
    o.flags = PAGEIN_INSTALL_NO_SYNC;
    CHECK_OK(pagein_install(src, dest, &o));
    CHECK_OK(pagein_install(src, dest, &o)); /* replacing works repeatedly */
    return PASS;
}

/* A source on another filesystem type (a memfd lives on tmpfs; the
 * temporary directory is usually not) makes copy_file_range refuse with
 * EXDEV, so the copy takes the pread/write path (pi_pread_full and
 * pi_write_full) in chunks; every byte must arrive, in a file larger than
 * one chunk with a ragged end, throttled or not. */
TEST(install_copies_across_filesystems) {
    uint64_t seed = pt_seed();
    size_t n = (9u << 20) + 4099;
    uint8_t *b = malloc(n);
    CHECK(b != NULL);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = pt_rand(&seed);
        memcpy(b + i, &v, n - i < 8 ? n - i : 8);
    }
    int fd = memfd_create("pagein-install-src", MFD_CLOEXEC);
    if (fd < 0) {
        free(b);
        SKIP_BECAUSE("memfd_create unavailable");
    }
    CHECK_EQ(write(fd, b, n), (ssize_t)n);
    char src[64];
    snprintf(src, sizeof src, "/proc/self/fd/%d", fd);
    for (int throttled = 0; throttled < 2; throttled++) {
        const char *dest = pt_tmppath(throttled ? "inst-x-dest2.bin" : "inst-x-dest.bin");
        pagein_install_opts o = PAGEIN_INSTALL_OPTS_INIT;
        o.flags = PAGEIN_INSTALL_NO_SYNC;
        if (throttled) o.max_rate = 40u << 20; /* 5 MiB chunks, about 0.2 s */
        CHECK_OK(pagein_install(src, dest, &o));
        size_t got_n = 0;
        uint8_t *got = pt_read_file(dest, &got_n);
        CHECK(got != NULL && got_n == n && memcmp(got, b, n) == 0);
        free(got);
        unlink(dest);
    }
    close(fd);
    free(b);
    return PASS;
}
