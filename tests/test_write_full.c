/* test_write_full.c - pi_write_full, the one write-until-done loop under
 * pi_atomic_write and pagein_install (white-box: includes src/io/io.h). */
#include "test.h"
#include "../src/io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

TEST(write_full_all_bytes_and_errors) {
    const char *path = pt_tmppath("write-full.bin");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    size_t n = (3u << 20) + 17;
    char *b = malloc(n);
    CHECK(b != NULL);
    for (size_t i = 0; i < n; i++) b[i] = (char)(i * 31 + 7);
    CHECK_OK(pi_write_full(fd, b, n));
    CHECK_OK(pi_write_full(fd, b, 0));
    close(fd);
    size_t got_n = 0;
    char *got = pt_read_file(path, &got_n);
    CHECK(got != NULL && got_n == n && memcmp(got, b, n) == 0);
    free(got);
    unlink(path);

    /* a full device: -ENOSPC, and the detail says how far it got */
    fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        CHECK_EQ(pi_write_full(fd, b, 4096), -ENOSPC);
        CHECK(strstr(pagein_last_error_detail(), "after 0 of 4096 bytes") != NULL);
        close(fd);
    }
    /* a pipe nobody reads: -EPIPE (SIGPIPE ignored for the test) */
    int p[2];
    CHECK_EQ(pipe(p), 0);
    close(p[0]);
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigaction(SIGPIPE, &ign, &old);
    CHECK_EQ(pi_write_full(p[1], b, 100), -EPIPE);
    sigaction(SIGPIPE, &old, NULL);
    close(p[1]);
    /* a closed descriptor */
    CHECK_EQ(pi_write_full(-1, b, 1), -EBADF);
    free(b);
    return PASS;
}
