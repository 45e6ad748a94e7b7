/*
 * source.h - where bytes come from: the one interface between storage and
 * everything above it (docs/ARCHITECTURE.md).
 *
 * A source is an opened object with a size, an identity, range reads that
 * can keep many requests in flight, an optional mapping (local files only)
 * and facts about its storage (kind, latency, preferred request size and
 * depth). Parsers never see a source: they get header bytes. Strategies,
 * the range engine (src/engine/), page-cache tools, hash, convert, live
 * reload and the training-data readers read through it.
 *
 * Adding a source = one file under src/source/ defining a
 * `const struct pi_source_ops pi_source_NAME` + one line in the table of
 * src/source/registry.c. Optional sources (libcurl) sit behind their
 * PAGEIN_HAVE_* macro in that table.
 *
 * Thread safety: after open, read and readv may be called from any number
 * of threads at once on the same source (local files use pread; remote
 * sources keep their own connection pool). open/close are not concurrent
 * with anything else on the same source.
 */
#ifndef PAGEIN_SOURCE_H
#define PAGEIN_SOURCE_H

#include "../internal.h"

/* What kind of storage serves the bytes. */
enum pi_storage {
    PI_STORAGE_UNKNOWN = 0,
    PI_STORAGE_LOCAL,  /* a local block device (ext4, xfs, btrfs, ...) */
    PI_STORAGE_MEMORY, /* tmpfs, ramfs, or caller memory */
    PI_STORAGE_NETFS,  /* NFS, CIFS, Lustre, Ceph, GPFS, ... */
    PI_STORAGE_FUSE,   /* FUSE (gcsfuse, mountpoint-s3, JuiceFS, slowfs) */
    PI_STORAGE_REMOTE, /* HTTP(S), S3-compatible object store, the Hub */
};

/* Facts the range engine and the auto rule use. Declared by the source at
 * open (from statfs, mountinfo, sysfs, the URL scheme); latency and
 * throughput may later be measured by a probe and written back here with
 * `measured` set. 0 means unknown for every number. */
struct pi_source_facts {
    enum pi_storage storage;
    char fs_type[64];        /* mountinfo type ("ext4", "fuse.slowfs") or URL scheme ("https") */
    uint32_t fs_magic;       /* statfs f_type (local files) */
    int rotational;          /* 1 rotating, 0 not, -1 unknown */
    uint32_t read_ahead_kb;  /* the device's read_ahead_kb (local files), 0 unknown */
    uint64_t latency_ns;     /* per-request latency at depth 1 */
    uint64_t bandwidth;      /* bytes/s one request stream reaches */
    uint64_t request_bytes;  /* preferred request size */
    uint32_t depth;          /* preferred requests in flight */
    int measured;            /* latency_ns/bandwidth come from a probe */
};

/* One range read. The source fills buf[0, len) from offset off. */
struct pi_read_req {
    void *buf;
    uint64_t off, len;
    int rc;     /* set by the source when the request completes: 0 or < 0 */
    void *user; /* the caller's */
};

/* Called once per request as it completes (rc set), from any thread,
 * possibly concurrently. A non-zero return stops the batch: requests not
 * yet started are not started and readv returns that value. */
typedef int (*pi_read_done_fn)(void *arg, struct pi_read_req *r);

struct pi_source;

struct pi_source_ops {
    const char *name; /* "file", "http", "s3", "hf", ... */
    /* 1 if this source handles uri (a path, or scheme://...). The table in
     * registry.c is tried in order; "file" is last and takes everything
     * without a known scheme. */
    int (*match)(const char *uri);
    /* Opens uri into s (s->ops, s->name already set; the source sets size,
     * identity, fd, facts, impl). flags: PAGEIN_OPEN_*. 0 or < 0 with a
     * detail naming the path or URL. On failure close is not called: the
     * source frees what it allocated. */
    int (*open)(struct pi_source *s, const char *uri, uint32_t flags);
    /* Reads n requests keeping up to depth in flight (0 = the source's
     * preferred depth), calling done (may be NULL) as each completes. Every
     * req->rc is set, also for requests not started (PAGEIN_E_CANCELLED).
     * Returns 0 or the first failure (detail: name, offset, length, and
     * for remote sources the URL and status). A short read past the end is
     * PAGEIN_E_TRUNCATED, never silent. May be NULL: then pi_source_readv
     * runs `read` on pool threads. */
    int (*readv)(struct pi_source *s, struct pi_read_req *reqs, size_t n, unsigned depth,
                 pi_read_done_fn done, void *arg);
    /* One blocking read of exactly len bytes (retries short reads/EINTR). */
    int (*read)(struct pi_source *s, void *buf, uint64_t len, uint64_t off);
    void (*close)(struct pi_source *s);
};

struct pi_source {
    const struct pi_source_ops *ops;
    char *name;            /* path or URL as given (for messages) */
    uint64_t size;         /* bytes */
    char identity[160];    /* local: "dev:ino:size:mtime_ns"; remote: ETag or sha256; for caches and reload */
    int fd;                /* local files: the open descriptor (for mmap, fadvise, mincore); -1 otherwise */
    struct pi_source_facts facts; /* read through pi_source_facts(): local facts are gathered on first use */
    _Atomic int facts_state;      /* 0 ready; 1 to gather (local files); 2 being gathered */
    void *impl;            /* the source's private state */
};

/* The source's storage facts. A local file gathers them (statfs,
 * mountinfo, sysfs: about 0.1 ms) on the first call, not at open, so a
 * warm open stays a few syscalls. Thread-safe; the pointer is s's. */
struct pi_source_facts *pi_source_facts(struct pi_source *s);

/* Internal open flag (beside the public PAGEIN_OPEN_*): the caller has the
 * object's header already (the metadata cache, file/metacache.c), so a
 * remote source fetches 1 byte at open instead of its usual prefix: the
 * size and identity for the check, none of the header. */
#define PI_OPEN_PROBE_ONLY 0x40000000u

/* ---- issue 28 (meta28): opens that cost no request ---- */
/* Internal open flag: the caller already knows the object's size and
 * identity from a check that covered many objects at once (a listing with
 * ETags, a pinned Hub commit: file/metacache.c, pi_meta_vouch) and has its
 * header (the metadata cache), so a remote source opens without a request:
 * s->size and s->identity are set before ops->open. Reads still send
 * If-Match with that identity where it is an ETag, so a change after the
 * check is PAGEIN_E_CHANGED, never wrong bytes. */
#define PI_OPEN_KNOWN 0x20000000u
/* pi_source_open with PI_OPEN_KNOWN: size and identity preset. */
int pi_source_open_known(struct pi_source **out, const char *uri, uint32_t flags, uint64_t size,
                         const char *identity);
/* ---- end issue 28 ---- */

/* Opens a path or URL with the first source whose match() accepts it.
 * Refuses anything that is not a regular file (or a block device) BEFORE
 * opening it for reading, so FIFOs and sockets never block. *out is set
 * only on success. 0 or < 0 with a detail. */
int pi_source_open(struct pi_source **out, const char *uri, uint32_t flags);
void pi_source_close(struct pi_source *s); /* NULL ok */
/* One full read. */
int pi_source_read(struct pi_source *s, void *buf, uint64_t len, uint64_t off);
/* Many reads in flight; see pi_source_ops.readv. */
int pi_source_readv(struct pi_source *s, struct pi_read_req *reqs, size_t n, unsigned depth,
                    pi_read_done_fn done, void *arg);
/* 1 if uri names a remote source (has a scheme some registered non-file
 * source matches), else 0. */
int pi_source_is_remote(const char *uri);
/* The registered sources, NULL-terminated (registry.c). */
extern const struct pi_source_ops *const pi_sources[];

/* The local-file source (source/file.c). */
extern const struct pi_source_ops pi_source_file;
/* Wraps an already-open local descriptor (no ownership of fd is taken
 * unless own_fd). For readers that open files themselves. */
int pi_source_from_fd(struct pi_source **out, int fd, const char *name, int own_fd);


/* Opens a pagein_file over an open source (file/file.c): maps local files,
 * reads the header of unmapped ones through the source. Takes ownership of
 * src (closed on failure too). pagein_open = pi_source_open + this. */
int pi_file_open_source(pagein_file **out, struct pi_source *src, const pagein_open_opts *opts);

/* Opens a local path for reading, refusing anything that is not a regular
 * file before the open (FIFOs never block): 0 with *fd and *st, or < 0
 * with a detail naming the path and what it is. The one open of user
 * paths (sources, datasets, page-cache tools, install). */
struct stat;
int pi_open_regular(const char *path, int *fd, struct stat *st);

/* Local storage facts (source/facts.c). */
/* 1 if the filesystem is network or FUSE (by statfs magic or mountinfo type name). */
int pi_fs_is_remote(uint32_t magic, const char *fs_type);
void pi_local_facts(int fd, const char *path, struct pi_source_facts *f);
const char *pi_fs_magic_name(uint32_t magic); /* NULL if not a known network/FUSE magic */
void pi_fs_mount_type(const char *real, char *out, size_t len);
int pi_fs_rotational(dev_t dev);
uint32_t pi_fs_read_ahead_kb(dev_t dev);
uint64_t pi_mem_available(void);
/* Full pread of len bytes at off (retries EINTR and short reads; end of
 * file is PAGEIN_E_TRUNCATED). The one read-until-done loop. */
int pi_pread_full(int fd, void *buf, uint64_t len, uint64_t off);

#endif
