/* install.c - copy a model file into place atomically (pagein_install).
 *
 * Replacing a file that other processes have mapped must never go through
 * open(O_TRUNC) or an in-place write: a truncated mapping raises SIGBUS in
 * every reader. The only safe replacement is a new inode renamed over the old
 * name; readers keep the old inode until they unmap it. */
#include "../io/io.h"
#include "../source/source.h"

#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define COPY_CHUNK (8u << 20)

/* Copies size bytes from sfd to dfd. copy_file_range lets the kernel (or the
 * filesystem: reflinks, server-side copy) move the data; read/write is the
 * fallback. max_rate throttles (bytes/s). */
static int copy_fd(int sfd, int dfd, uint64_t size, uint64_t max_rate, const char *src) {
    uint64_t done = 0;
    size_t chunk = COPY_CHUNK;
    if (max_rate && max_rate / 8 < chunk) chunk = (size_t)PI_MAX(max_rate / 8, 4096);
    int use_cfr = 1;
    char *buf = NULL;
    double t0 = pi_now_s();
    int rc = 0;
    while (done < size) {
        size_t want = (size_t)PI_MIN((uint64_t)chunk, size - done);
        ssize_t n = -1;
        if (use_cfr) {
            loff_t in = (loff_t)done;
            n = copy_file_range(sfd, &in, dfd, NULL, want, 0);
            if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP ||
                          errno == EBADF || errno == EPERM) && done == 0) {
                use_cfr = 0;
                continue;
            }
        } else {
            if (!buf && !(buf = pi_malloc(chunk))) {
                rc = pi_err(-ENOMEM, "out of memory");
                goto out;
            }
            /* pi_pread_full reports a file that shrank as PAGEIN_E_TRUNCATED */
            if ((rc = pi_pread_full(sfd, buf, want, done)) < 0) {
                pi_err_prefix(src);
                goto out;
            }
            if ((rc = pi_write_full(dfd, buf, want)) < 0) {
                pi_err_prefix("the temporary copy");
                goto out;
            }
            n = (ssize_t)want;
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            rc = pi_err(-errno, "%s: copy at offset %llu: %s", src, (unsigned long long)done, strerror(errno));
            goto out;
        }
        if (n == 0) {
            rc = pi_err(PAGEIN_E_TRUNCATED, "%s: shrank during the copy: ended at %llu of %llu bytes", src,
                        (unsigned long long)done, (unsigned long long)size);
            goto out;
        }
        done += (uint64_t)n;
        if (max_rate) {
            double ahead = (double)done / (double)max_rate - (pi_now_s() - t0);
            if (ahead > 0) {
                struct timespec ts = {(time_t)ahead, (long)((ahead - (double)(time_t)ahead) * 1e9)};
                nanosleep(&ts, NULL);
            }
        }
    }
out:
    pi_free(buf);
    return rc;
}

int pagein_install(const char *src, const char *dest, const pagein_install_opts *opts) {
    pi_err_clear();
    if (!src || !dest || !*src || !*dest) return pi_err(PAGEIN_E_INVALID, "pagein_install: NULL argument");
    uint32_t flags = opts ? opts->flags : 0;
    uint64_t max_rate = opts ? opts->max_rate : 0;
    int sync = !(flags & PAGEIN_INSTALL_NO_SYNC);
    int rc = 0, sfd = -1, dirfd = -1, open_a = 0;
    char *dcopy = NULL, *bcopy = NULL, *target = NULL;
    struct pi_atomic_file a;

    struct stat sst, dst;
    rc = pi_open_regular(src, &sfd, &sst);
    if (rc == -EINVAL) rc = PAGEIN_E_INVALID; /* not a regular file */
    FORWARD_IF(rc);

    /* dest may be a directory: install under the source's name there */
    if (stat(dest, &dst) == 0 && S_ISDIR(dst.st_mode)) {
        char *sc = pi_strndup(src, strlen(src));
        if (!sc) {
            rc = pi_err(-ENOMEM, "out of memory");
            goto out;
        }
        const char *b = basename(sc);
        target = pi_path_join(dest, b);
        pi_free(sc);
    } else {
        target = pi_strndup(dest, strlen(dest));
    }
    dcopy = target ? pi_strndup(target, strlen(target)) : NULL;
    bcopy = target ? pi_strndup(target, strlen(target)) : NULL;
    if (!target || !dcopy || !bcopy) {
        rc = pi_err(-ENOMEM, "out of memory");
        goto out;
    }
    const char *dir = dirname(dcopy);
    const char *base = basename(bcopy);
    if (!*base || strcmp(base, "/") == 0 || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        rc = pi_err(PAGEIN_E_INVALID, "%s: not a file name", target);
        goto out;
    }

    mode_t mode = sst.st_mode & 07777;
    if (stat(target, &dst) == 0) {
        if (dst.st_ino == sst.st_ino && dst.st_dev == sst.st_dev) {
            rc = pi_err(PAGEIN_E_INVALID, "%s and %s are the same file", src, target);
            goto out;
        }
        if (!S_ISREG(dst.st_mode)) {
            rc = pi_err(PAGEIN_E_INVALID, "%s exists and is not a regular file", target);
            goto out;
        }
        mode = dst.st_mode & 07777;
    }

    /* the directory first, for a message that names it */
    dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        rc = pi_err(-errno, "%s: cannot open directory: %s", dir, strerror(errno));
        goto out;
    }
    close(dirfd);
    dirfd = -1;

    /* The temporary file (io/atomic.c): an unnamed O_TMPFILE inode where the
     * filesystem has them, so being killed during the copy leaves nothing
     * behind; it gets a hidden name only once complete (for the
     * validation, else at the rename). */
    if ((rc = pi_atomic_open(&a, target)) < 0) goto out;
    open_a = 1;
    a.no_sync = !sync;
    rc = copy_fd(sfd, a.fd, (uint64_t)sst.st_size, max_rate, src);
    if (rc < 0) goto out;
    if (fchmod(a.fd, mode) != 0) {
        rc = pi_err(-errno, "fchmod: %s", strerror(errno));
        goto out;
    }

    if (flags & PAGEIN_INSTALL_VALIDATE) {
        if ((rc = pi_atomic_name(&a)) < 0) goto out;
        pagein_file *f = NULL;
        rc = pagein_open(&f, a.tmp, NULL);
        pagein_close(f);
        if (rc < 0) {
            char d[1100];
            snprintf(d, sizeof d, "%s: not installed, the copy of %s is invalid: %s", target, src,
                     pagein_last_error_detail());
            pi_err(rc, "%s", d);
            goto out;
        }
    }

    /* fsync (unless --no-sync), rename over the target, fsync the directory */
    open_a = 0;
    rc = pi_atomic_commit(&a);
out:
    if (open_a) pi_atomic_abort(&a);
    if (dirfd >= 0) close(dirfd);
    if (sfd >= 0) close(sfd);
    pi_free(target);
    pi_free(dcopy);
    pi_free(bcopy);
    return rc;
}
