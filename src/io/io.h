/* io.h - the bottom layer's private declarations: truncation guards and
 * atomic files. Never installed. */
#ifndef PAGEIN_IO_H
#define PAGEIN_IO_H

#include "../internal.h"

/* ---- guards (io/guard.c) ------------------------------------------------ */
/*
 * Reads the library performs through a file mapping must not kill the
 * process when the file shrinks underneath (SIGBUS). Two tools:
 *
 *  - pi_guard_populate() uses madvise(MADV_POPULATE_READ), which returns an
 *    error (EFAULT) instead of raising SIGBUS; use it to make ranges
 *    resident (populate, prefetch, warm).
 *  - Where bytes must actually be loaded (copies, checksums, touching pages
 *    on kernels without MADV_POPULATE_READ), pi_guard_call() runs a function
 *    under a per-thread sigsetjmp guard. A SIGBUS whose fault address lies
 *    inside the guarded range jumps back and becomes PAGEIN_E_TRUNCATED
 *    naming the file and the file offset of the fault.
 *
 * The SIGBUS handler is registered once per process, on first use of any
 * guard (the one piece of process-wide state besides the allocation test
 * hook; docs/SAFETY.md). It remembers the handler that was installed before
 * it and passes every SIGBUS outside a guarded range on to it (calling it,
 * ignoring or re-raising with the default action as that handler says), so
 * the program's own handling is unchanged. Guards nest and are per thread.
 *
 * Names and offsets are only used in messages: name is the file path,
 * file_off the file offset of addr, fd (or -1) lets the message say how
 * large the file is now.
 */
/* Makes [addr, addr+len) of a read-only file mapping resident. addr need not
 * be page aligned. Returns 0, PAGEIN_E_TRUNCATED or -errno (-ENOMEM when the
 * range is not mapped). Falls back to a guarded touch of one byte per page
 * when the kernel lacks MADV_POPULATE_READ. */
int pi_guard_populate(const void *addr, size_t len, const char *name, uint64_t file_off, int fd);
/* Loads one byte per page of [addr, addr+len) under a guard. */
int pi_guard_touch(const void *addr, size_t len, const char *name, uint64_t file_off, int fd);
/* memcpy(dst, src, len) under a guard over the source range. */
int pi_guard_copy(void *dst, const void *src, size_t len, const char *name, uint64_t file_off, int fd);
/*
 * Runs fn(ctx) with [addr, addr+len) guarded and returns its result, or
 * PAGEIN_E_TRUNCATED if it faulted inside the range. fn is abandoned at the
 * faulting load (siglongjmp), so while guarded it must not allocate, take
 * locks or otherwise leave state that needs undoing: it should only read the
 * range and write into memory its caller owns.
 */
typedef int (*pi_guard_fn)(void *ctx);
int pi_guard_call(const void *addr, size_t len, const char *name, uint64_t file_off, int fd,
                  pi_guard_fn fn, void *ctx);
/* Registers the SIGBUS handler now (it is otherwise registered on first
 * use). Returns 0 or -errno. Idempotent, thread-safe. */
int pi_guard_install(void);
/* Test hook: restores the handler that was in place before pi_guard_install
 * so that a forked child can register again. Not thread-safe. */
void pi_guard_uninstall(void);

/* ==== atomic files (io/atomic.c) ========================================= */
/*
 * Writing a file so that readers see either the old file or the complete
 * new one, never a partial one, and a crash never truncates the old one:
 * create a temporary file in the target's directory (same filesystem, so
 * rename is atomic), write, fsync it, rename it over the target, fsync the
 * directory so the rename is durable. On any failure the temporary file is
 * unlinked and the target is untouched. Used by the safetensors and GGUF
 * writers, converters, `pagein install`, the metadata and index caches
 * (pi_atomic_put), consumers (pagein_write_atomic) and, for the files it
 * downloads under names of their own and its links, pull (pi_atomic_adopt,
 * pi_atomic_symlink).
 *
 *     struct pi_atomic_file a;
 *     rc = pi_atomic_open(&a, path);            // temp created, mode 0666 & ~umask
 *     if (rc == 0) rc = pi_atomic_write(&a, buf, n);   // as often as needed
 *     if (rc == 0) rc = pi_atomic_commit(&a);   // fsync, rename, fsync dir
 *     else pi_atomic_abort(&a);                 // unlink temp (commit cleans up itself)
 *
 * Errors are -errno with a detail naming the path. Not thread-safe per
 * object; distinct objects are independent.
 */
struct pi_atomic_file {
    int fd;        /* the temporary file, -1 when closed */
    char *path;    /* final path (copy) */
    char *tmp;     /* temporary path (copy; "" while an O_TMPFILE is unnamed) */
    uint64_t written;
    int unnamed;   /* fd is an O_TMPFILE inode, named only at commit */
    int slot1;     /* pi_temp_register slot of tmp + 1, 0 when none */
    int no_sync;   /* set by the caller after open: commit neither fsyncs the file nor the directory */
    int dfd;       /* directory the names are relative to (AT_FDCWD for a plain path) */
};
int pi_atomic_open(struct pi_atomic_file *a, const char *path);
/* pi_atomic_open with the new file's mode (before umask; pi_atomic_open is
 * 0666) and names relative to the directory descriptor dfd (AT_FDCWD: a
 * plain path). A temporary under a dfd other than AT_FDCWD is not in the
 * signal-cleanup registry (its name means nothing without the descriptor). */
int pi_atomic_openat(struct pi_atomic_file *a, int dfd, const char *path, unsigned mode);
/* A whole small file from n pieces, for the caches: pi_atomic_openat, the
 * pieces, commit without fsync. 0 or -errno; the thread's error detail is
 * left as it was either way (a cache that cannot be written is no error). */
struct iovec;
int pi_atomic_put(int dfd, const char *path, unsigned mode, const struct iovec *pieces, int n);
/* Writes all len bytes at the current end (retries short writes and EINTR). */
int pi_atomic_write(struct pi_atomic_file *a, const void *buf, size_t len);
/* The loop under it, for any descriptor: all len bytes at fd's position,
 * retrying short writes and EINTR. 0 or -errno (-EIO for a write of 0) with
 * a detail saying how many bytes were written before the failure; callers
 * prefix the path. */
int pi_write_full(int fd, const void *buf, size_t len);
/* fsyncs, renames the temp over path, fsyncs the directory, frees a. On
 * failure the temp is unlinked and a freed as well. Every failure except a
 * failing directory fsync happens before the rename, so the target is then
 * untouched; after a directory fsync error the new file is in place but
 * its rename may not survive a crash. */
int pi_atomic_commit(struct pi_atomic_file *a);
/* Gives the temporary file its hidden name next to the target now (an
 * O_TMPFILE has none until commit): for a caller that opens it by name
 * before the rename (pagein_install's validation). a->tmp is the name; it
 * is registered for signal cleanup. 0, or -errno with a detail. */
int pi_atomic_name(struct pi_atomic_file *a);
/* Closes and unlinks the temp file and frees a. Safe after a failed open. */
void pi_atomic_abort(struct pi_atomic_file *a);
/* A file that its writer built under a name of its own and kept open as
 * fd (a download's part file, kept across runs to resume), put in place as
 * pi_atomic_commit puts a temporary: fsyncs fd; checks that from still
 * names fd's inode, a regular file, not followed if it is a symbolic link
 * (PAGEIN_E_CHANGED when it was removed or replaced: nothing renamed);
 * renames from over to under a descriptor of their directory (they must
 * share one: PAGEIN_E_INVALID otherwise); fsyncs the directory. fd stays
 * the caller's. 0, or a negative code with a detail naming from and to;
 * only a failing directory fsync leaves the file in place. */
#define PI_ATOMIC_NO_SYNC 0x1u /* flags: neither fsync (tests, tmpfs) */
int pi_atomic_adopt(int fd, const char *from, const char *to, unsigned flags);
/* link -> target, replacing what is at link atomically: a symbolic link
 * under a hidden temporary name next to link (in the signal-cleanup
 * registry), renamed over link under its directory's descriptor, the
 * directory fsynced unless PI_ATOMIC_NO_SYNC. 0 or -errno with a detail. */
int pi_atomic_symlink(const char *target, const char *link, unsigned flags);
/* The registry pagein_temp_cleanup() empties from a signal handler: a
 * path (copied; under PATH_MAX) to unlink if the process is signalled
 * before pi_temp_unregister(slot). Returns the slot, or -1 when the 64
 * slots are taken (the name is then not cleaned up). Thread-safe, lock-free. */
/* fsyncs directory dir, so that a rename or link in it is durable. 0, or
 * -errno with a detail naming what (a file whose rename it makes durable,
 * may be NULL) and dir; EINVAL and EROFS (filesystems that cannot sync a
 * directory) count as success, and so does a directory that cannot be
 * opened (nothing to sync through). */
int pi_fsync_dir(const char *dir, const char *what);
int pi_temp_register(const char *path);
void pi_temp_unregister(int slot); /* -1 is a no-op */
/* ==== end atomic files ==================================================== */


#endif
