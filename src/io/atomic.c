/* atomic.c - write-to-temp, fsync, rename, fsync-dir (see the "atomic
 * files" section of src/internal.h).
 *
 * The temporary file is an unnamed O_TMPFILE inode in the target's
 * directory wherever the filesystem has them (ext4, xfs, btrfs, tmpfs):
 * a process killed while writing leaves nothing behind, the kernel frees
 * the inode with the last descriptor. It gets a name only at commit, for
 * the instant between linkat() and rename(). Where O_TMPFILE is missing
 * (or PAGEIN_ATOMIC_NAMED=1 asks for it, for tests) the file is a named
 * hidden temporary from the start.
 *
 * Named temporaries (the fallback, and the linkat-rename instant) are
 * recorded in a fixed registry that pagein_temp_cleanup() empties with
 * unlink() from a signal handler: the one other piece of process-wide
 * state besides the SIGBUS handler (docs/SAFETY.md). */
#include "io.h"

#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- the registry of named temporaries -------------------------------- */

/* A slot: 0 free, 1 being filled, 2 holds a live name, 3 taken by cleanup.
 * The path is copied in (no pointer a signal handler could see freed). */
enum { TEMP_SLOTS = 64 };
static struct {
    _Atomic int state;
    pid_t pid; /* the process that registered it: a forked child's copy is not its own */
    char path[PATH_MAX];
} temps[TEMP_SLOTS];

int pi_fsync_dir(const char *dir, const char *what) {
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return 0;
    int rc = 0;
    if (fsync(dfd) < 0 && errno != EINVAL && errno != EROFS) {
        int e = errno;
        rc = what ? pi_err(-e, "%s: fsync of directory %s failed: %s", what, dir, strerror(e))
                  : pi_err(-e, "fsync of directory %s failed: %s", dir, strerror(e));
    }
    close(dfd);
    return rc;
}

int pi_temp_register(const char *path) {
    size_t n = strlen(path);
    if (n >= PATH_MAX) return -1;
    for (int i = 0; i < TEMP_SLOTS; i++) {
        int zero = 0;
        if (!atomic_compare_exchange_strong(&temps[i].state, &zero, 1)) continue;
        memcpy(temps[i].path, path, n + 1);
        temps[i].pid = getpid();
        atomic_store(&temps[i].state, 2);
        return i;
    }
    return -1; /* full: this name is not removed on a signal */
}

void pi_temp_unregister(int slot) {
    if (slot < 0 || slot >= TEMP_SLOTS) return;
    int two = 2;
    atomic_compare_exchange_strong(&temps[slot].state, &two, 0); /* fails only while cleanup owns it */
}

void pagein_temp_cleanup(void) {
    pid_t me = getpid();
    int saved = errno;
    int dirs = 0;
    /* files first, then directories (a sharded convert registers its
     * temporary directory and the finished shards inside it) */
    for (int i = 0; i < TEMP_SLOTS; i++) {
        int two = 2;
        if (temps[i].pid != me || !atomic_compare_exchange_strong(&temps[i].state, &two, 3)) continue;
        if (unlink(temps[i].path) != 0 && (errno == EISDIR || errno == EPERM)) {
            dirs++; /* stays taken (3) for the second pass */
            continue;
        }
        atomic_store(&temps[i].state, 0);
    }
    for (int i = 0; dirs && i < TEMP_SLOTS; i++) {
        if (temps[i].pid != me || atomic_load(&temps[i].state) != 3) continue;
        rmdir(temps[i].path);
        atomic_store(&temps[i].state, 0);
        dirs--;
    }
    errno = saved;
}

/* ---- atomic files ----------------------------------------------------- */

static void atomic_free(struct pi_atomic_file *a) {
    pi_temp_unregister(a->slot1 - 1);
    a->slot1 = 0;
    pi_free(a->path);
    pi_free(a->tmp);
    a->path = a->tmp = NULL;
    a->fd = -1;
}

/* A fresh hidden name next to the target into a->tmp: ".BASE.tmp-XXXXXXXX". */
static void temp_name(struct pi_atomic_file *a, uint64_t *r) {
    const char *path = a->path;
    size_t pl = strlen(path);
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = path + dl;
    *r = *r * 6364136223846793005ull + 1442695040888963407ull;
    snprintf(a->tmp, pl + 64, "%.*s.%.*s.tmp-%08x", (int)dl, path, (int)PI_MIN(strlen(base), 200), base,
             (unsigned)(*r >> 32));
}

static uint64_t temp_seed(const struct pi_atomic_file *a) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)a;
}

/* O_TMPFILE needs linkat() through /proc/self/fd at commit (AT_EMPTY_PATH
 * would need CAP_DAC_READ_SEARCH). */
static int want_tmpfile(void) {
    const char *e = getenv("PAGEIN_ATOMIC_NAMED");
    if (e && *e && strcmp(e, "0") != 0) return 0;
    return access("/proc/self/fd", X_OK) == 0;
}

/* Directory part of path ("." when it has none), malloc'd. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return pi_strndup(".", 1);
    if (slash == path) return pi_strndup("/", 1);
    return pi_strndup(path, (size_t)(slash - path));
}

/* pi_temp_register when the name is a path of its own (not under a dfd). */
static void temp_track(struct pi_atomic_file *a) {
    if (a->dfd == AT_FDCWD) a->slot1 = pi_temp_register(a->tmp) + 1;
}

int pi_atomic_open(struct pi_atomic_file *a, const char *path) { return pi_atomic_openat(a, AT_FDCWD, path, 0666); }

int pi_atomic_openat(struct pi_atomic_file *a, int dfd, const char *path, unsigned mode) {
    memset(a, 0, sizeof *a);
    a->fd = -1;
    a->slot1 = 0;
    a->dfd = dfd;
    if (!path || !*path) return pi_err(PAGEIN_E_INVALID, "atomic write: empty path");
    size_t pl = strlen(path);
    a->path = pi_strndup(path, pl);
    a->tmp = pi_malloc(pl + 64);
    char *dir = dir_of(path);
    if (!a->path || !a->tmp || !dir) {
        pi_free(dir);
        atomic_free(a);
        return pi_err(-ENOMEM, "%s: out of memory", path);
    }
    /* mode & ~umask like any new file (the temp becomes the file) */
    if (want_tmpfile()) {
        a->fd = openat(dfd, dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, (mode_t)mode);
        if (a->fd >= 0) {
            a->unnamed = 1;
            a->tmp[0] = 0;
            pi_free(dir);
            return 0;
        }
        /* EOPNOTSUPP, EISDIR (kernel without O_TMPFILE), ...: a named
         * temporary; real errors (EACCES, ENOENT) recur below */
    }
    pi_free(dir);
    uint64_t r = temp_seed(a);
    for (int tries = 0; tries < 100; tries++) {
        temp_name(a, &r);
        /* registered before it exists: a signal in between unlinks a name
         * that is not there, which is harmless */
        temp_track(a);
        a->fd = openat(dfd, a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)mode);
        if (a->fd >= 0) return 0;
        int e = errno;
        pi_temp_unregister(a->slot1 - 1);
        a->slot1 = 0;
        errno = e;
        if (errno != EEXIST) break;
    }
    int e = errno;
    int rc = pi_err(-e, "%s: cannot create a temporary file next to it: %s", path, strerror(e));
    atomic_free(a);
    return rc;
}

int pi_write_full(int fd, const void *buf, size_t len) {
    const uint8_t *p = buf;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, p + done, PI_MIN(len - done, (size_t)1 << 30));
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            return pi_err(-e, "write failed after %zu of %zu bytes: %s", done, len, strerror(e));
        }
        if (w == 0) return pi_err(-EIO, "write returned 0 after %zu of %zu bytes", done, len);
        done += (size_t)w;
    }
    return 0;
}

int pi_atomic_write(struct pi_atomic_file *a, const void *buf, size_t len) {
    int rc = pi_write_full(a->fd, buf, len);
    if (rc < 0) {
        pi_err_prefix(a->path);
        return rc;
    }
    a->written += len;
    return 0;
}

void pi_atomic_abort(struct pi_atomic_file *a) {
    if (!a) return;
    if (a->fd >= 0) close(a->fd); /* an unnamed temporary is gone with it */
    if (a->tmp && a->tmp[0]) unlinkat(a->dfd, a->tmp, 0);
    atomic_free(a);
}

/* Gives an unnamed temporary a hidden name next to the target (registered
 * for signal cleanup until the rename). */
static int link_unnamed(struct pi_atomic_file *a) {
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", a->fd);
    uint64_t r = temp_seed(a);
    int e = EEXIST;
    for (int tries = 0; tries < 100; tries++) {
        temp_name(a, &r);
        temp_track(a);
        if (linkat(AT_FDCWD, proc, a->dfd, a->tmp, AT_SYMLINK_FOLLOW) == 0) return 0;
        e = errno;
        pi_temp_unregister(a->slot1 - 1);
        a->slot1 = 0;
        if (e != EEXIST) break;
    }
    a->tmp[0] = 0;
    return pi_err(-e, "%s: cannot link the temporary file into its directory: %s", a->path, strerror(e));
}

int pi_atomic_name(struct pi_atomic_file *a) {
    if (!a->unnamed) return 0;
    int rc = link_unnamed(a);
    if (rc == 0) a->unnamed = 0;
    return rc;
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
    if (!a->no_sync && fsync(a->fd) < 0) {
        e = errno;
        rc = pi_err(-e, "%s: fsync failed: %s", a->path, strerror(e));
        goto fail;
    }
    if ((rc = pi_atomic_name(a)) < 0) goto fail;
    if (close(a->fd) < 0) {
        a->fd = -1;
        e = errno;
        rc = pi_err(-e, "%s: close failed: %s", a->path, strerror(e));
        goto fail;
    }
    a->fd = -1;
    if (renameat(a->dfd, a->tmp, a->dfd, a->path) < 0) {
        e = errno;
        rc = pi_err(-e, "%s: cannot rename the temporary file into place: %s", a->path, strerror(e));
        goto fail;
    }
    pi_temp_unregister(a->slot1 - 1); /* the name is the target's now */
    a->slot1 = 0;
    /* the rename is durable only once the directory is synced */
    if (a->no_sync) rc = 0;
    else if (a->dfd == AT_FDCWD) rc = pi_fsync_dir(dir, a->path);
    else rc = fsync(a->dfd) == 0 || errno == EINVAL || errno == EROFS ? 0 : pi_err(-errno, "%s: fsync of its directory failed", a->path);
    pi_free(dir);
    atomic_free(a);
    return rc;
fail:
    pi_free(dir);
    pi_atomic_abort(a);
    return rc;
}

int pi_atomic_put(int dfd, const char *path, unsigned mode, const struct iovec *pieces, int n) {
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", pagein_last_error_detail());
    struct pi_atomic_file a;
    int rc = pi_atomic_openat(&a, dfd, path, mode);
    for (int i = 0; rc == 0 && i < n; i++) rc = pi_atomic_write(&a, pieces[i].iov_base, pieces[i].iov_len);
    if (rc == 0) {
        a.no_sync = 1;
        rc = pi_atomic_commit(&a);
    } else if (a.path) {
        pi_atomic_abort(&a);
    }
    pi_err(0, "%s", keep);
    return rc;
}

/* ---- adopting a file written under a name of its own ----------------- */

/* The directory of path, opened for renameat and fsync (*can_sync 1), or
 * with O_PATH when it cannot be read (renameat only, *can_sync 0); *base
 * gets path's last component. The descriptor, or -errno with a detail. */
static int open_dir_of(const char *path, const char **base, int *can_sync) {
    char *dir = dir_of(path);
    if (!dir) return pi_err(-ENOMEM, "%s: out of memory", path);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    *can_sync = dfd >= 0;
    if (dfd < 0 && errno == EACCES) dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        int e = errno;
        dfd = pi_err(-e, "%s: cannot open its directory %s: %s", path, dir, strerror(e));
    }
    pi_free(dir);
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    return dfd;
}

static int sync_dirfd(int dfd, int can_sync, const char *path) {
    if (!can_sync || fsync(dfd) == 0 || errno == EINVAL || errno == EROFS) return 0;
    int e = errno;
    return pi_err(-e, "%s: fsync of its directory failed: %s", path, strerror(e));
}

/* 1 when a and b name files in one directory (the same text before the last '/'). */
static int same_dir(const char *a, const char *b) {
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    size_t la = sa ? (size_t)(sa - a) : 0, lb = sb ? (size_t)(sb - b) : 0;
    return la == lb && memcmp(a, b, la) == 0;
}

int pi_atomic_adopt(int fd, const char *from, const char *to, unsigned flags) {
    if (!same_dir(from, to))
        return pi_err(PAGEIN_E_INVALID, "%s: cannot put in place as %s: not in one directory", from, to);
    int nosync = (flags & PI_ATOMIC_NO_SYNC) != 0;
    if (!nosync && fsync(fd) != 0) {
        int e = errno;
        return pi_err(-e, "%s: fsync failed: %s", from, strerror(e));
    }
    const char *fb, *tb = strrchr(to, '/') ? strrchr(to, '/') + 1 : to;
    int can_sync, rc = 0;
    int dfd = open_dir_of(from, &fb, &can_sync);
    if (dfd < 0) return dfd;
    /* from must still name fd's inode, itself and not through a link: an
     * rm or mv while it was written is not installed */
    struct stat a, b;
    if (fstat(fd, &a) != 0 || !S_ISREG(a.st_mode) || fstatat(dfd, fb, &b, AT_SYMLINK_NOFOLLOW) != 0 ||
        a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
        rc = pi_err(PAGEIN_E_CHANGED, "%s was removed or replaced while it was written: not put in place as %s",
                    from, to);
    } else if (renameat(dfd, fb, dfd, tb) != 0) {
        int e = errno;
        rc = pi_err(-e, "cannot rename %s to %s: %s", from, to, strerror(e));
    } else if (!nosync) {
        rc = sync_dirfd(dfd, can_sync, to); /* the rename is durable only now */
    }
    close(dfd);
    return rc;
}

int pi_atomic_symlink(const char *target, const char *link, unsigned flags) {
    const char *lb;
    int can_sync;
    int dfd = open_dir_of(link, &lb, &can_sync);
    if (dfd < 0) return dfd;
    /* a hidden name next to link, as an atomic file's temporary (and in the
     * signal-cleanup registry until the rename) */
    struct pi_atomic_file a;
    memset(&a, 0, sizeof a);
    a.fd = -1;
    a.dfd = AT_FDCWD;
    size_t pl = strlen(link), dl = (size_t)(lb - link);
    a.path = pi_strndup(link, pl);
    a.tmp = pi_malloc(pl + 64);
    int rc = a.path && a.tmp ? 0 : pi_err(-ENOMEM, "%s: out of memory", link);
    uint64_t r = temp_seed(&a);
    for (int tries = 0; rc == 0; tries++) {
        temp_name(&a, &r);
        temp_track(&a);
        if (symlinkat(target, dfd, a.tmp + dl) == 0) break;
        int e = errno;
        pi_temp_unregister(a.slot1 - 1);
        a.slot1 = 0;
        if (e != EEXIST || tries >= 100) rc = pi_err(-e, "cannot link %s -> %s: %s", link, target, strerror(e));
    }
    if (rc == 0 && renameat(dfd, a.tmp + dl, dfd, lb) != 0) {
        int e = errno;
        unlinkat(dfd, a.tmp + dl, 0);
        rc = pi_err(-e, "cannot rename the new link %s into place as %s: %s", a.tmp, link, strerror(e));
    }
    if (rc == 0 && !(flags & PI_ATOMIC_NO_SYNC)) rc = sync_dirfd(dfd, can_sync, link);
    atomic_free(&a); /* unregisters the name: it is link's now, or gone */
    close(dfd);
    return rc;
}

/* The public face for consumers (the CLI's charts): one buffer, synced. */
int pagein_write_atomic(const char *path, const void *buf, size_t len) {
    struct pi_atomic_file a;
    int rc = pi_atomic_open(&a, path);
    if (rc == 0 && (rc = pi_atomic_write(&a, buf, len)) < 0) pi_atomic_abort(&a);
    return rc < 0 ? rc : pi_atomic_commit(&a);
}
