/* atomic.c - write-to-temp, fsync, rename, fsync-dir (see the "atomic
 * files" section of src/internal.h). */
#include "io.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void atomic_free(struct pi_atomic_file *a) {
    pi_free(a->path);
    pi_free(a->tmp);
    a->path = a->tmp = NULL;
    a->fd = -1;
}

/* Directory part of path ("." when it has none), malloc'd. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return pi_strndup(".", 1);
    if (slash == path) return pi_strndup("/", 1);
    return pi_strndup(path, (size_t)(slash - path));
}

int pi_atomic_open(struct pi_atomic_file *a, const char *path) {
    memset(a, 0, sizeof *a);
    a->fd = -1;
    if (!path || !*path) return pi_err(PAGEIN_E_INVALID, "atomic write: empty path");
    size_t pl = strlen(path);
    a->path = pi_strndup(path, pl);
    a->tmp = pi_malloc(pl + 64);
    if (!a->path || !a->tmp) {
        atomic_free(a);
        return pi_err(-ENOMEM, "%s: out of memory", path);
    }
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = path + dl;
    /* A hidden name next to the target; O_EXCL with a fresh suffix instead
     * of mkstemp so the mode honours the umask like any new file. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t r = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)a;
    for (int tries = 0; tries < 100; tries++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        snprintf(a->tmp, pl + 64, "%.*s.%.*s.tmp-%08x", (int)dl, path, (int)PI_MIN(strlen(base), 200),
                 base, (unsigned)(r >> 32));
        a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (a->fd >= 0) return 0;
        if (errno != EEXIST) break;
    }
    int e = errno;
    int rc = pi_err(-e, "%s: cannot create a temporary file next to it: %s", path, strerror(e));
    atomic_free(a);
    return rc;
}

int pi_atomic_write(struct pi_atomic_file *a, const void *buf, size_t len) {
    const uint8_t *p = buf;
    while (len) {
        ssize_t w = write(a->fd, p, PI_MIN(len, (size_t)1 << 30));
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            return pi_err(-e, "%s: write failed after %llu bytes: %s", a->path,
                          (unsigned long long)a->written, strerror(e));
        }
        if (w == 0) return pi_err(-EIO, "%s: write returned 0", a->path);
        p += w;
        len -= (size_t)w;
        a->written += (uint64_t)w;
    }
    return 0;
}

void pi_atomic_abort(struct pi_atomic_file *a) {
    if (!a) return;
    if (a->fd >= 0) close(a->fd);
    if (a->tmp) unlink(a->tmp);
    atomic_free(a);
}

int pi_atomic_commit(struct pi_atomic_file *a) {
    int rc = 0, e;
    /* Everything that can fail for lack of memory happens before the
     * rename: once it is done the new file is in place and commit succeeds
     * (short of a failing directory fsync). */
    char *dir = dir_of(a->path);
    if (!dir) {
        rc = pi_err(-ENOMEM, "%s: out of memory", a->path);
        goto fail;
    }
    if (fsync(a->fd) < 0) {
        e = errno;
        rc = pi_err(-e, "%s: fsync failed: %s", a->path, strerror(e));
        goto fail;
    }
    if (close(a->fd) < 0) {
        a->fd = -1;
        e = errno;
        rc = pi_err(-e, "%s: close failed: %s", a->path, strerror(e));
        goto fail;
    }
    a->fd = -1;
    if (rename(a->tmp, a->path) < 0) {
        e = errno;
        rc = pi_err(-e, "%s: cannot rename the temporary file into place: %s", a->path, strerror(e));
        goto fail;
    }
    /* the rename is durable only once the directory is synced */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        if (fsync(dfd) < 0 && errno != EINVAL && errno != EROFS) {
            e = errno;
            rc = pi_err(-e, "%s: fsync of directory %s failed: %s", a->path, dir, strerror(e));
        }
        close(dfd);
    }
    pi_free(dir);
    atomic_free(a);
    return rc;
fail:
    pi_free(dir);
    pi_atomic_abort(a);
    return rc;
}
