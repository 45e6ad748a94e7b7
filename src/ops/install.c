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

static int fill_random_suffix(char *s, size_t n) {
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)s;
    static _Thread_local uint64_t ctr;
    x += ++ctr * 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x >> 31;
        x *= 0xbf58476d1ce4e5b9ull;
        x ^= x >> 29;
        s[i] = al[x % (sizeof al - 1)];
    }
    return 0;
}

/* ".BASE.pagein-XXXXXXXX" in the same directory. */
static void temp_name(char *out, size_t cap, const char *base) {
    char sfx[9];
    fill_random_suffix(sfx, 8);
    sfx[8] = 0;
    snprintf(out, cap, ".%.200s.pagein-%s", base, sfx);
}

/* Records DIR/NAME for pagein_temp_cleanup (a signal handler unlinks it):
 * the named fallback and the link-rename instant. */
static int temp_register(const char *dir, const char *name) {
    char p[PATH_MAX];
    if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) >= sizeof p) return -1;
    return pi_temp_register(p);
}

int pagein_install(const char *src, const char *dest, const pagein_install_opts *opts) {
    pi_err_clear();
    if (!src || !dest || !*src || !*dest) return pi_err(PAGEIN_E_INVALID, "pagein_install: NULL argument");
    uint32_t flags = opts ? opts->flags : 0;
    uint64_t max_rate = opts ? opts->max_rate : 0;
    int sync = !(flags & PAGEIN_INSTALL_NO_SYNC);
    int rc = 0, sfd = -1, dirfd = -1, tfd = -1, linked = 0, slot = -1;
    char *dcopy = NULL, *bcopy = NULL, *target = NULL;
    char tmpname[512] = "";

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
        size_t n = strlen(dest) + strlen(b) + 2;
        target = pi_malloc(n);
        if (target) snprintf(target, n, "%s/%s", dest, b);
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

    dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        rc = pi_err(-errno, "%s: cannot open directory: %s", dir, strerror(errno));
        goto out;
    }

    /* An unnamed temporary file leaves nothing behind if we are killed
     * during the copy; it gets a name only once complete and synced. */
    int anonymous = 1;
    tfd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (tfd < 0) {
        anonymous = 0;
        for (int tries = 0; tries < 100 && tfd < 0; tries++) {
            temp_name(tmpname, sizeof tmpname, base);
            pi_temp_unregister(slot);
            slot = temp_register(dir, tmpname);
            tfd = openat(dirfd, tmpname, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
            if (tfd < 0 && errno != EEXIST) break;
        }
        if (tfd < 0) {
            rc = pi_err(-errno, "%s: cannot create a temporary file: %s", dir, strerror(errno));
            tmpname[0] = 0;
            goto out;
        }
        linked = 1;
    }

    rc = copy_fd(sfd, tfd, (uint64_t)sst.st_size, max_rate, src);
    if (rc < 0) goto out;
    if (fchmod(tfd, mode) != 0) {
        rc = pi_err(-errno, "fchmod: %s", strerror(errno));
        goto out;
    }
    if (sync && fsync(tfd) != 0) {
        rc = pi_err(-errno, "%s: fsync: %s", target, strerror(errno));
        goto out;
    }

    if (anonymous) {
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", tfd);
        for (int tries = 0; tries < 100 && !linked; tries++) {
            temp_name(tmpname, sizeof tmpname, base);
            pi_temp_unregister(slot);
            slot = temp_register(dir, tmpname);
            if (linkat(AT_FDCWD, proc, dirfd, tmpname, AT_SYMLINK_FOLLOW) == 0) linked = 1;
            else if (errno != EEXIST) break;
        }
        if (!linked) {
            rc = pi_err(-errno, "%s: cannot link the temporary file: %s", dir, strerror(errno));
            tmpname[0] = 0;
            goto out;
        }
    }

    if (flags & PAGEIN_INSTALL_VALIDATE) {
        size_t n = strlen(dir) + strlen(tmpname) + 2;
        char *tp = pi_malloc(n);
        if (!tp) {
            rc = pi_err(-ENOMEM, "out of memory");
            goto out;
        }
        snprintf(tp, n, "%s/%s", dir, tmpname);
        pagein_file *f = NULL;
        rc = pagein_open(&f, tp, NULL);
        pagein_close(f);
        pi_free(tp);
        if (rc < 0) {
            char d[1100];
            snprintf(d, sizeof d, "%s: not installed, the copy of %s is invalid: %s", target, src,
                     pagein_last_error_detail());
            pi_err(rc, "%s", d);
            goto out;
        }
    }

    if (renameat(dirfd, tmpname, dirfd, base) != 0) {
        rc = pi_err(-errno, "%s: rename: %s", target, strerror(errno));
        goto out;
    }
    linked = 0; /* the temporary name is gone: it is dest now */
    pi_temp_unregister(slot);
    slot = -1;
    if (sync && fsync(dirfd) != 0) {
        rc = pi_err(-errno, "%s: fsync directory: %s", dir, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    if (linked && tmpname[0] && dirfd >= 0) unlinkat(dirfd, tmpname, 0);
    pi_temp_unregister(slot);
    if (tfd >= 0) close(tfd);
    if (dirfd >= 0) close(dirfd);
    if (sfd >= 0) close(sfd);
    pi_free(target);
    pi_free(dcopy);
    pi_free(bcopy);
    return rc;
}
