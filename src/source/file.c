/* file.c - the local-file source: paths (and file:// URLs) on any mounted
 * filesystem. Opens without blocking on FIFOs, refuses anything that is not
 * a regular file, declares the storage facts (source/facts.c) and reads
 * with pread. The mapping itself stays with pagein_file (file/file.c), which
 * maps s->fd. */
#include "source.h"
#include "file_readv.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* "scheme://" with a scheme of letters, digits, '+', '-', '.' (RFC 3986). */
static int has_scheme(const char *uri) {
    const char *p = uri;
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) return 0;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '+' ||
           *p == '-' || *p == '.')
        p++;
    return p[0] == ':' && p[1] == '/' && p[2] == '/';
}

static int file_match(const char *uri) { return !has_scheme(uri) || strncmp(uri, "file://", 7) == 0; }

static const char *kind_name(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    return "not a regular file";
}

static void set_identity(struct pi_source *s, const struct stat *st) {
    snprintf(s->identity, sizeof s->identity, "%ju:%ju:%jd:%jd.%09ld", (uintmax_t)st->st_dev,
             (uintmax_t)st->st_ino, (intmax_t)st->st_size, (intmax_t)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
}

int pi_open_regular(const char *path, int *fd_out, struct stat *st) {
    /* stat first: opening a FIFO for reading blocks until a writer appears
     * (and a device may do anything on open). O_NONBLOCK on the open covers
     * the path being swapped for a FIFO between the two calls; it has no
     * effect on regular files. */
    if (stat(path, st) != 0) return pi_err(-errno, "%s: %s", path, strerror(errno));
    if (!S_ISREG(st->st_mode)) return pi_err(-EINVAL, "%s: %s, not a regular file", path, kind_name(st->st_mode));
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return pi_err(-errno, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        int e = errno;
        int reg = S_ISREG(st->st_mode);
        close(fd);
        return reg ? pi_err(-e, "%s: cannot stat: %s", path, strerror(e))
                   : pi_err(-EINVAL, "%s: %s, not a regular file", path, kind_name(st->st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fd_out = fd;
    return 0;
}

static int file_open(struct pi_source *s, const char *uri, uint32_t flags) {
    PI_UNUSED(flags);
    const char *path = strncmp(uri, "file://", 7) == 0 ? uri + 7 : uri;
    struct stat st;
    int fd;
    FORWARD_IF(pi_open_regular(path, &fd, &st));
    s->fd = fd;
    s->size = (uint64_t)st.st_size;
    set_identity(s, &st);
    atomic_store(&s->facts_state, 1); /* pi_source_facts() gathers them when asked */
    return 0;
}

static int file_read(struct pi_source *s, void *buf, uint64_t len, uint64_t off) {
    int rc = pi_pread_full(s->fd, buf, len, off);
    if (rc < 0) pi_err_prefix(s->name);
    return rc;
}

static void file_close(struct pi_source *s) {
    if (s->impl == NULL && s->fd >= 0) close(s->fd); /* impl != NULL: borrowed descriptor */
    s->fd = -1;
}

static const char *local_path(const char *uri) { return strncmp(uri, "file://", 7) == 0 ? uri + 7 : uri; }

const char *pi_source_local_path(const char *uri) { return local_path(uri); }

/* A prefix: a directory. */
static int file_is_prefix(const char *uri) {
    struct stat st;
    return stat(local_path(uri), &st) == 0 && S_ISDIR(st.st_mode);
}

/* The regular files under dir (path b->p[0, b->n)), depth-first in readdir
 * order, symbolic links not followed; rel starts at b->p + base. */
static int walk(struct pi_buf *b, size_t base, int depth, pi_list_fn fn, void *arg, const char *uri) {
    if (depth > 32) return pi_err(PAGEIN_E_LIMIT, "%s: folders nested more than 32 deep", uri);
    DIR *d = opendir(b->p);
    if (!d) return pi_err(-errno, "%s: %s", b->p, strerror(errno));
    size_t n0 = b->n;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        b->n = n0;
        if (n0 && b->p[n0 - 1] != '/') pi_buf_put(b, "/", 1);
        pi_buf_put(b, e->d_name, strlen(e->d_name) + 1);
        if (b->oom) {
            rc = pi_err(-ENOMEM, "%s: out of memory listing", uri);
            break;
        }
        b->n--; /* the NUL stays after the name */
        struct stat st;
        if (lstat(b->p, &st) != 0) continue; /* gone meanwhile */
        if (S_ISDIR(st.st_mode)) {
            rc = walk(b, base, depth + 1, fn, arg, uri);
        } else if (S_ISREG(st.st_mode)) {
            char id[96];
            snprintf(id, sizeof id, "%ju:%ju:%jd:%jd.%09ld", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino,
                     (intmax_t)st.st_size, (intmax_t)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec); /* as open's */
            struct pi_list_entry le = {b->p, b->p + base, (uint64_t)st.st_size, id, (int64_t)st.st_mtim.tv_sec};
            rc = fn(arg, &le);
        }
    }
    closedir(d);
    b->n = n0;
    if (b->p) b->p[n0] = 0;
    return rc;
}

/* The list op: every regular file under a directory, named relative to it. */
static int file_list(const char *uri, pi_list_fn fn, void *arg) {
    const char *dir = local_path(uri);
    struct pi_buf b = {0};
    pi_buf_put(&b, dir, strlen(dir) + 1);
    if (b.oom) return pi_err(-ENOMEM, "%s: out of memory", uri);
    b.n--;
    size_t base = b.n + (b.n && b.p[b.n - 1] != '/');
    int rc = walk(&b, base, 0, fn, arg, uri);
    pi_buf_free(&b);
    return rc;
}

const struct pi_source_ops pi_source_file = {
    .name = "file",
    .schemes = NULL,
    .remote = 0,
    .match = file_match,
    .open = file_open,
    .readv = pi_file_readv, /* io_uring or threads (file_readv.c) */
    .read = file_read,
    .close = file_close,
    .is_prefix = file_is_prefix,
    .list = file_list,
    .object_name = NULL,
    .checksum = NULL, /* a local file states no hash of its own */
    .cache_place = NULL,
    .counters = NULL,
    .ranges_ignored = NULL,
    .stream = NULL,
    .readv_view = pi_file_readv_view, /* the same readv, reporting its submit side to the range engine */
};

static char borrowed_marker;

int pi_source_from_fd(struct pi_source **out, int fd, const char *name, int own_fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return pi_err(-errno, "%s: cannot stat: %s", name ? name : "?", strerror(errno));
    struct pi_source *s = pi_calloc(1, sizeof *s);
    if (!s) return pi_err(-ENOMEM, "%s: out of memory", name ? name : "?");
    s->name = pi_strndup(name ? name : "<fd>", strlen(name ? name : "<fd>"));
    if (!s->name) {
        pi_free(s);
        return pi_err(-ENOMEM, "out of memory");
    }
    s->ops = &pi_source_file;
    s->fd = fd;
    s->size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    s->impl = own_fd ? NULL : &borrowed_marker;
    set_identity(s, &st);
    s->facts.rotational = -1;
    atomic_store(&s->facts_state, 1);
    *out = s;
    return 0;
}
