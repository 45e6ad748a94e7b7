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
 * PAGEIN_HAVE_* macro in that table. Everything above the sources asks the
 * table, never a scheme: is this a URL (.remote), is it a folder
 * (is_prefix), what is in it (list), what does the server say the bytes
 * hash to (checksum), where does pull put it without a destination
 * (cache_place). tests/test_seams_source.c is such a row (null://, bytes
 * from memory), added by one weak line.
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

/* One object of a prefix listing (pi_source_ops.list). Strings are
 * borrowed for the call. */
struct pi_list_entry {
    const char *uri;      /* the object's full URI, as open takes it */
    const char *rel;      /* its name relative to the listed prefix ("sub/a.safetensors") */
    uint64_t size;        /* bytes, PI_SIZE_UNKNOWN when the listing does not say */
    const char *identity; /* ETag, version or content id as listed, "" when unknown */
    int64_t mtime;        /* last modified, seconds since the epoch as listed; 0 unknown */
};
#define PI_SIZE_UNKNOWN UINT64_MAX
/* Called per listed object; a non-zero return stops the listing and is returned. */
typedef int (*pi_list_fn)(void *arg, const struct pi_list_entry *e);

/* A first-party content checksum of an opened object: what the server
 * itself states (the Hub's LFS sha256, a single-part S3/GCS object's MD5
 * ETag), never a redirect target's word. */
struct pi_checksum {
    char algo[16]; /* "sha256", "md5" */
    char hex[129]; /* lower-case hex digits */
};

/* Where a pulled object goes when the caller names no destination: a
 * source-defined cache layout (the Hub's: blobs/HASH, a snapshot link to
 * it, refs/REVISION). Filled by pi_source_ops.cache_place. */
struct pi_cache_place {
    char blob[4096];       /* the file the bytes go to (content-addressed) */
    char link[4300];       /* a symbolic link to make, "" none */
    char target[4300];     /* ... pointing here (relative to link) */
    char dir[4096];        /* the folder to report (the snapshot) */
    char ref[4096];        /* a small file to write, "" none */
    char ref_text[128];    /* ... holding this */
    int name_by_content;   /* 1: the server states no hash to name the blob (a static mirror's ETag):
                              blob is a temporary name in the blobs folder, and the puller names the
                              blob by the sha256 of the bytes (an LFS blob's name), fixing target */
};

/* Sink of a whole-object stream (pi_source_ops.stream): the body in order
 * (off = bytes before p); 0, or a negative code (detail set) to stop. */
typedef int (*pi_source_sink_fn)(void *ctx, const void *p, size_t n, uint64_t off);

/* One object of a folder with what the server states of it (stat_dir). */
struct pi_stat_entry {
    char *uri; /* the object's full URI ("s3://bucket/key") */
    uint64_t size;
    char etag[160]; /* as GET sends it, quotes included */
};

/* The submit side of one readv_view (the local file's pi_file_readv_view): what the ring (or
 * the threads) had submitted and not yet seen complete, time-weighted over
 * the call (mean) and at most; the seconds the issuing thread spent inside
 * io_uring_submit (issuing that blocks: the kernel faulting the
 * destination pages in, a filesystem that reads at issue) against the
 * call's wall time; and whether the ring moved issuing to the kernel's
 * workers (IOSQE_ASYNC) because issuing blocked, from which request. */
struct pi_readv_view {
    int ring;                 /* 1 io_uring, 0 threads */
    double mean_inflight;     /* submitted, not completed; time-weighted */
    uint64_t max_inflight;
    double issue_seconds, seconds;
    int async;                /* 1: issued by io-wq workers from request async_from on */
    size_t async_from;
};

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

    /* The rest is optional (0 / NULL: the source has none of it). */
    /* 1: names are URLs of a remote service (pagein_is_url, pull, the
     * metadata cache, remote folders); 0: local paths. */
    int remote;
    /* The schemes it takes, for messages ("s3://, gs://"); NULL for local paths. */
    const char *schemes;
    /* 1 when uri names a prefix (a folder: s3://b/p/, hf://org/name,
     * http://host/dir/) rather than one object. */
    int (*is_prefix)(const char *uri);
    /* Lists every object under prefix uri (deeper folders included), in
     * the service's order, calling fn per object; stops at fn's first
     * non-zero return and returns it. NULL: the source cannot list (plain
     * HTTP); callers then try the usual names. */
    int (*list)(const char *uri, pi_list_fn fn, void *arg);
    /* 1: a prefix of this source names everything under it, subfolders
     * included (a Hub repository: a dataset keeps its shards in data/...,
     * so a dataset prefix takes them all); 0: its direct children, as a
     * folder's (S3, GCS, null://). Read through pi_source_list_opt's
     * PI_LIST_AS_PREFIX. */
    int deep_prefix;
    /* The name pull gives one object under a destination folder: 0 with
     * out filled (the Hub: the path in the repository). NULL: the last
     * path segment without a query. */
    int (*object_name)(const char *uri, char *out, size_t cap);
    /* The object's first-party checksum: 1 with *c filled, 0 none. */
    int (*checksum)(struct pi_source *s, struct pi_checksum *c);
    /* Where pull puts s without a destination (cache_dir: the caller's
     * override, may be NULL): 0 with *p filled, < 0 with a detail. NULL:
     * the current directory, as named. */
    int (*cache_place)(struct pi_source *s, const char *cache_dir, struct pi_cache_place *p);
    /* Requests made and retried since open. */
    void (*counters)(const struct pi_source *s, uint64_t *requests, uint64_t *retries);
    /* 1 when only a whole-object read works (a server that ignored Range);
     * then stream reads it, in order. */
    int (*ranges_ignored)(const struct pi_source *s);
    int (*stream)(struct pi_source *s, pi_source_sink_fn sink, void *ctx);
    /* Optional (the metadata cache's one check for many entries): the
     * folder's direct children with their sizes and ETags in at most
     * max_pages requests; *out malloc'd, freed with pi_stat_entries_free.
     * < 0 when the listing is refused or fails. */
    int (*stat_dir)(const char *uri, int max_pages, struct pi_stat_entry **out, size_t *n);
    /* Optional: 1 when uri names bytes that cannot change (a Hub revision
     * that is a commit hash), so what is cached of it needs no check. */
    int (*pinned)(const char *uri);
    /* Optional: readv that also reports its submit side (how many were in
     * flight, how long the submits took: the local file's io_uring or
     * threads) into *v; the range engine's counters use it where a source
     * has it, plain readv elsewhere. */
    int (*readv_view)(struct pi_source *s, struct pi_read_req *reqs, size_t n, unsigned depth,
                      pi_read_done_fn done, void *arg, struct pi_readv_view *v);
    /* Optional: where uri's bytes come from besides its own text (an
     * endpoint, profile or mirror set in the environment), written into
     * out (cap bytes, "" when nothing); the metadata cache keys on it, so
     * an entry written while a mirror answered is never served for another
     * endpoint. NULL: the URL names its origin itself (http, local paths). */
    void (*origin)(const char *uri, char *out, size_t cap);
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
 * remote source fetches a short prefix at open instead of its usual one:
 * the size and identity for the check, and the bytes below. */
#define PI_OPEN_PROBE_ONLY 0x40000000u
/* What that open fetches (and keeps, so reads within it cost no request):
 * the first PI_PROBE_CHECK_BYTES of the object, in the one request it
 * makes anyway, so the caller can compare the header bytes its entry holds
 * with the source's own (a claimed ETag or sha256 is not content). */
#define PI_PROBE_CHECK_BYTES (64u << 10)

/* ---- opens that cost no request ---- */
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
/* ---- end ---- */

/* Opens a path or URL with the first source whose match() accepts it.
 * Refuses anything that is not a regular file (or a block device) BEFORE
 * opening it for reading, so FIFOs and sockets never block. *out is set
 * only on success. 0 or < 0 with a detail. */
int pi_source_open(struct pi_source **out, const char *uri, uint32_t flags);
void pi_source_close(struct pi_source *s); /* NULL ok */
/* One full read. */
int pi_source_read(struct pi_source *s, void *buf, uint64_t len, uint64_t off);
/* The whole object (s->size bytes; the caller bounds it) into a new buffer
 * with a NUL after it, *out (pi_free); name says which in the error. */
int pi_source_read_all(struct pi_source *s, const char *name, uint8_t **out);
/* Many reads in flight; see pi_source_ops.readv. */
int pi_source_readv(struct pi_source *s, struct pi_read_req *reqs, size_t n, unsigned depth,
                    pi_read_done_fn done, void *arg);
/* The source whose match() takes uri (the first in the table), or NULL. */
const struct pi_source_ops *pi_source_find(const char *uri);
/* 1 if uri names a remote source (a registered source with .remote
 * matches it), else 0. */
int pi_source_is_remote(const char *uri);
/* How many files to open at once when opening many (shards of a model or a
 * dataset, a folder for the cache commands), first being one of them: 32,
 * 64 for remote objects (each open is a round trip of its own connection,
 * costing no local CPU or disk: 1,011 shards at 20 ms opened in 0.51 s at
 * 64 against 1.12 s at 32, bench/open_many.sh HTTP=1); PAGEIN_OPEN_DEPTH=N
 * (1..256) overrides both (1: one after another). */
unsigned pi_source_open_depth(const char *first);
/* stat_dir of the source that takes uri: PAGEIN_E_UNSUPPORTED when it has
 * none. */
int pi_source_stat_dir(const char *uri, int max_pages, struct pi_stat_entry **out, size_t *n);
void pi_stat_entries_free(struct pi_stat_entry *v, size_t n);
/* pinned of the source that takes uri; 0 when it has none. */
int pi_source_pinned(const char *uri);
/* origin of the source that takes uri into out; "" when it has none. */
void pi_source_origin(const char *uri, char *out, size_t cap);
/* The registered remote schemes for messages ("http://, https://, s3://,
 * gs://, hf://"; "" in a build without remote sources). */
const char *pi_source_schemes(void);
/* 1 when uri names a prefix of its source (ops.is_prefix). */
int pi_source_is_prefix(const char *uri);
/* Lists prefix uri through its source (ops.list): PAGEIN_E_UNSUPPORTED
 * when the source cannot list, naming it. */
int pi_source_list(const char *uri, pi_list_fn fn, void *arg);
/* pi_source_list with options: PI_LIST_DIRECT keeps the prefix's direct
 * children only (names without a '/'); PI_LIST_AS_PREFIX keeps what a
 * prefix of that source names (its row's deep_prefix: everything for the
 * Hub, the direct children elsewhere). */
#define PI_LIST_DIRECT 1u
#define PI_LIST_AS_PREFIX 2u
int pi_source_list_opt(const char *uri, unsigned flags, pi_list_fn fn, void *arg);
/* ops.checksum: 1 with *c, 0 when the source states none. */
int pi_source_checksum(struct pi_source *s, struct pi_checksum *c);
/* ops.counters; 0 and 0 for sources that do not count. */
void pi_source_counters(const struct pi_source *s, uint64_t *requests, uint64_t *retries);
/* ops.ranges_ignored; 0 for sources without it. */
int pi_source_ranges_ignored(const struct pi_source *s);
/* ops.stream: the whole object in order (PAGEIN_E_UNSUPPORTED without it). */
int pi_source_stream(struct pi_source *s, pi_source_sink_fn sink, void *ctx);
/* The registered sources, pi_nsources rows, a row NULL when its weak
 * reference is absent (registry.c). */
extern const struct pi_source_ops *const pi_sources[];
extern const size_t pi_nsources;

/* The local-file source (source/file.c). */
extern const struct pi_source_ops pi_source_file;
/* The local path a name of the file source stands for ("file:///x" ->
 * "/x"; a plain path as it is). */
const char *pi_source_local_path(const char *uri);
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
