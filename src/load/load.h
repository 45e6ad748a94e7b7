/* load.h - private declarations of the load engine (src/load/). White-box
 * tests include it; nothing outside the library depends on it.
 *
 * The files call down only (scripts/layers.sh fails on a circle):
 *   model.c -> strategy.c (the table) -> pager.c (prefetch), read.c (read),
 *              populate.c (populate)
 *   model.c -> access.c (waits, data pointers, load_tensors) -> pager.c
 *   pager.c -> the fill rows: populate.c (mapping), stream.c (buffers)
 *   populate.c, stream.c -> range.c (ranges, pi_fill_group, errors)
 *   auto.c, index.c, resolve.c: leaves that model.c and read.c call. */
#ifndef PAGEIN_LOAD_H
#define PAGEIN_LOAD_H

#include "../internal.h"
#include "../core/mem.h"
#include "../source/source.h"
#include "../engine/engine.h"
#include "../format/format.h"

#include <pthread.h>
#include <stdatomic.h>

/* ---- sharded safetensors index (index.c) -------------------------------- */
struct pi_index_entry {
    const char *name; /* decoded tensor name (arena), may contain NUL */
    size_t name_len;
    uint32_t shard;   /* index into shards[] */
};

struct pi_index {
    char **shards;    /* unique shard file names, sorted (shard order) */
    size_t nshards;
    struct pi_index_entry *e; /* weight_map entries in index order */
    size_t n;
    uint64_t total_size;      /* metadata.total_size when present */
    int has_total_size;
    struct pi_arena arena;
};

void pi_index_init(struct pi_index *ix);
void pi_index_free(struct pi_index *ix);
/* Parses an index file image (untrusted). Returns 0, PAGEIN_E_BAD_JSON,
 * PAGEIN_E_BAD_UTF8, PAGEIN_E_BAD_INDEX (no weight_map, non-string value,
 * shard name with '/' or NUL), PAGEIN_E_DUPLICATE, PAGEIN_E_LIMIT or
 * -ENOMEM. *ix must be initialised; free it on error too. */
int pi_index_parse(const uint8_t *buf, size_t len, struct pi_index *ix);


/* ---- auto strategy (auto.c) --------------------------------------------- */
/* Facts the auto rule looks at; gathered by pi_auto_gather() or injected by
 * tests. */
struct pi_auto_facts {
    uint32_t fs_magic;        /* statfs f_type of the first file */
    char fs_type[64];         /* mountinfo type, e.g. "ext4", "fuse.sshfs" ("" unknown) */
    int rotational;           /* 1 rotating disk, 0 not, -1 unknown */
    uint64_t model_bytes;     /* sum of file sizes */
    uint64_t mem_available;   /* MemAvailable, 0 unknown */
    /* measured behaviour (pi_auto_measure: a short probe of the first
     * file through its source); measured 0 = not measured */
    int measured;
    uint64_t lat1_ns;         /* one 128 KiB request at depth 1 */
    double speedup;           /* throughput at depth probe_depth / at depth 1 */
    unsigned probe_depth;
    uint32_t read_ahead_kb;   /* the mount's readahead window (page-fault read-around), 0 unknown */
    int storage;              /* enum pi_storage of the first file */
};

/* Probes the model's first file (engine.h pi_engine_probe) and adds what it
 * measured to f. Leaves f->measured 0 when the file is too small to probe
 * or the probe failed. */
void pi_auto_measure(const pagein_model *m, struct pi_auto_facts *f);
/* Latency-bound storage: a request costs a round trip (>= 150 us at depth
 * 1) and throughput grows with depth (>= 1.8x at depth N). */
#define PI_AUTO_RTT_NS 150000ull
#define PI_AUTO_DEPTH_GAIN 1.8
/* Readahead at least this large makes page faults read large requests. */
#define PI_AUTO_BIG_RA_KB 1024u

/* Fills facts for model m: its size, MemAvailable, and the storage facts
 * of its first file's source (source/facts.c). Never fails: unknown facts
 * stay 0/-1/"". */
void pi_auto_gather(const pagein_model *m, struct pi_auto_facts *f);
/* The rule. Writes a one-sentence reason into why (len bytes) and, when it
 * chooses PREFETCH for a model larger than memory, a budget into *budget. */
pagein_strategy pi_auto_decide(const struct pi_auto_facts *f, char *why, size_t len, uint64_t *budget);

/* The AUTO rule, the one pagein_model_open applies and
 * pagein_model_auto_plan reports: files without a mapping (remote) get
 * READ, or PREFETCH with a budget (asked, else half of MemAvailable) when
 * larger than 90 % of MemAvailable; mapped files get pi_auto_decide over
 * gathered and measured facts. why gets the reason; *budget the budget of
 * a PREFETCH (0 otherwise). */
pagein_strategy pi_auto_choose(const pagein_model *m, uint64_t asked, uint64_t *budget, char *why, size_t len);

/* Files below this total size get READ from auto. */
#define PI_AUTO_SMALL_BYTES (32ull << 20)

/* ---- byte ranges paged in by the pool (populate.c) ---------------------- */
enum pi_pop_method {
    PI_POP_MADVISE = 0,   /* MADV_POPULATE_READ on the mapping */
    PI_POP_PREAD = 1,     /* pread into a scratch buffer (fills the page cache), then map */
    PI_POP_READAHEAD = 2, /* readahead() the chunk, then MADV_POPULATE_READ */
};

struct pi_range {
    uint32_t file;
    uint64_t off, len;
};

/* ---- the model ---------------------------------------------------------- */
struct pi_pager;

struct pagein_model {
    pagein_file **files;
    size_t nfiles;
    struct pi_table tab;       /* merged table; tensor.file = index into files */
    uint8_t **rbuf;            /* READ: per-file anonymous copy (NULL otherwise) */
    size_t *rlen;              /* bytes mapped for rbuf[i] */
    int rbuf_keep;             /* rbuf from pi_mem_get: given back with pi_mem_put (reuse) */
    struct pi_mem_stats mem;   /* what the memory policy did for rbuf (core/mem.h) */
    pagein_model_opts opts;
    pagein_strategy strategy;
    const struct pi_strategy *st; /* strategy's row (decided: never auto), set once by open; NULL before */
    char why[256];
    int32_t nlayers;
    /* layer groups: group g = layer + 1, g in [0, nlayers + 1] */
    const pagein_tensor **lt;  /* tensors in layer order */
    size_t *lstart;            /* nlayers + 3 entries: group g is lt[lstart[g] .. lstart[g+1]) */
    uint64_t *lbytes;          /* bytes per group */
    int32_t *tgroup;           /* group of each tensor, by index in tab.t */
    enum pi_pop_method pop_method;
    _Atomic int cancel;        /* set on close: in-flight paging stops early */
    struct pi_pager *pager;
    unsigned pager_threads;    /* pool size for the pager's passes */
    /* READ: what the range engine chose and did (read.c) */
    struct pi_engine_stats io_stats;
    int has_io_stats;
    unsigned threads_given;    /* opts.threads as the caller gave it (0 = default) */
    struct pi_engine_probe_result probe; /* auto's probe of files[0] (probed set) */
    int probed;
    /* tensor data lives in rbuf, filled by reads as asked (the buffers'
     * fill row under PREFETCH over files without a mapping: stream.c) */
    int streamed;
    _Atomic unsigned stream_share; /* streamed: groups the pager reads at once (their runs split the depth) */
    /* assembled tensors (PAGEIN_TENSOR_ASSEMBLED, assemble.c): their
     * pieces (from a directory format's dir_table; first NULL: none), the
     * memory they are built in, and per tensor whether it is built yet */
    struct pi_pieces pieces;
    uint8_t *abuf;
    size_t alen;
    _Atomic uint8_t *abuilt;
    pthread_mutex_t amu;
    int amu_ready;
};

/* Pages ranges in (file ranges; merged and split into chunk_bytes chunks,
 * run on opts.threads threads). Guarded: truncation gives
 * PAGEIN_E_TRUNCATED naming the file and offset. */
int pi_model_populate(pagein_model *m, struct pi_range *r, size_t n);
/* Every file of a mapped model paged in (POPULATE's start). */
int pi_model_populate_all(pagein_model *m);
/* Same with an explicit method (the pager always uses READAHEAD on a
 * MADV_RANDOM mapping, which pages in exactly the ranges asked for). */
int pi_model_populate_with(pagein_model *m, struct pi_range *r, size_t n, enum pi_pop_method method);
/* Same, abandoning the work (PAGEIN_E_CANCELLED) once *cursor > group: the
 * pager never keeps loading a layer the consumer has moved past. */
int pi_model_populate_group(pagein_model *m, struct pi_range *r, size_t n, enum pi_pop_method method,
                            _Atomic int32_t *cursor, int32_t group);
/* Pages several layer groups in one parallel pass, chunks in group order,
 * calling the hooks on pool threads:
 *  - enter(arg, g) before each chunk of group g, leave(arg, g, token) after
 *    it with what enter returned (the pager throttles work ahead of the
 *    cursor there);
 *  - progress(arg, g, file, end) when the chunks of g finished so far, in
 *    chunk order, reach (file, end): every byte of g before that position
 *    in (file, offset) order is resident (may be NULL);
 *  - done(arg, g, rc) as each group completes: 0, PAGEIN_E_CANCELLED (m
 *    closing, or *cursor passed g: its remaining chunks are skipped) or the
 *    group's first failure (detail set on that thread).
 * Returns 0 or -ENOMEM before anything started (then no callback ran). */
struct pi_group_hooks {
    void *arg;
    int (*enter)(void *arg, int32_t g);
    void (*leave)(void *arg, int32_t g, int token);
    void (*progress)(void *arg, int32_t g, uint32_t file, uint64_t end);
    void (*done)(void *arg, int32_t g, int rc);
};
int pi_model_populate_groups(pagein_model *m, const int32_t *groups, size_t ng, enum pi_pop_method method,
                             _Atomic int32_t *cursor, const struct pi_group_hooks *h);
/* Ranges of one layer group (g = layer + 1) into r (caller-allocated with
 * room for the group's tensor count); returns the count. */
size_t pi_model_group_ranges(const pagein_model *m, int32_t g, struct pi_range *r);
/* PAGEIN_E_UNSUPPORTED for a header-only model (LAZY over files that
 * cannot be mapped: remote objects): names the tensor at (file, off) and
 * says to use pagein_tensor_copy or read/prefetch/auto. Always negative. */
int pi_model_no_data(const pagein_model *m, uint32_t file, uint64_t off);
/* Releases a group's pages (pager budget). */
void pi_model_release_group(pagein_model *m, int32_t g);
/* Test hook (tests/test_load.c): when set, every O_DIRECT read fails with
 * EINVAL, as on filesystems that accept O_DIRECT at open and refuse the
 * reads, so the fallback to buffered reads is exercised everywhere. */
extern _Atomic int pi_test_direct_read_fails;
/* Whether this is a VM whose virtio-balloon reports free pages to its host
 * (a fact for reports; the page size is measured, core/mem.h);
 * pi_test_virtio_dir stands in for /sys/bus/virtio/devices in tests. */
int pi_free_page_reporting(void);
/* The page size of anonymous model buffers (READ, PREFETCH): forced by
 * PAGEIN_READ_HUGEPAGE=0|1, huge with the HUGEPAGE hint, else measured by
 * the memory policy (core/mem.h). */
enum pi_mem_pages pi_read_pages(const pagein_model *m);
extern const char *pi_test_virtio_dir;
/* READ strategy: reads every file into anonymous memory. */
int pi_model_read_all(pagein_model *m);
/* Method from PAGEIN_POPULATE_METHOD (madvise|pread|readahead). */
enum pi_pop_method pi_pop_method_from_env(void);

/* ---- assembled tensors (assemble.c) ------------------------------------- */
#define PI_DCP_MAX_NDIM_LOAD 64 /* dimensions of an assembled tensor or a box (format/dcp.h's bound) */
/* A tensor's byte ranges in its files: its pieces' spans for an assembled
 * tensor, else (file, offset, nbytes). pi_tensor_nranges says how many
 * pi_tensor_ranges writes; pi_group_nranges the sum over group g. */
size_t pi_tensor_nranges(const pagein_model *m, const pagein_tensor *t);
size_t pi_tensor_ranges(const pagein_model *m, const pagein_tensor *t, struct pi_range *r);
size_t pi_group_nranges(const pagein_model *m, int32_t g);
/* The ranges that loading t still needs: none for an assembled tensor
 * already built (its pieces' pages were given back: paging them in again
 * would map them twice), else pi_tensor_ranges. */
size_t pi_tensor_load_ranges(const pagein_model *m, const pagein_tensor *t, struct pi_range *r);
/* 1 for an assembled tensor not built yet. */
int pi_assemble_pending(const pagein_model *m, const pagein_tensor *t);
/* Gives the assembled tensors their memory and data pointers (after the
 * strategy started: READ points every tensor into its copies first), and
 * builds them all now when the strategy keeps everything resident. */
int pi_assemble_start(pagein_model *m);
/* Builds the assembled tensors among t[0..n) (NULL: all) or of group g
 * that are not built yet, from their pieces' bytes (the mapping or READ's
 * copy; a mapping's pages are faulted in under the truncation guard). 0
 * at once for a model without any. */
int pi_assemble(pagein_model *m, const pagein_tensor *const *t, size_t n);
int pi_assemble_group(pagein_model *m, int32_t g);
/* The box [start, start + count) of t into dst (row-major, len bytes):
 * an assembled tensor from the pieces it overlaps, any other from src
 * (its bytes, valid). */
int pi_read_box(pagein_model *m, const pagein_tensor *t, const void *src, const uint64_t *start,
                const uint64_t *count, void *dst, size_t len);
/* Frees what pi_assemble_start made (model close). */
void pi_assemble_free(pagein_model *m);

/* ---- the strategy table (strategy.c) ------------------------------------ */
/* A strategy is a row: what runs once the model is open, and what its
 * memory means for the calls after (flags). The model code asks the row,
 * never which strategy it is. Adding one = src/load/NAME.c defining
 * `const struct pi_strategy pi_strategy_NAME = {.name = ..., ...}` and one
 * line in the table of strategy.c (its PAGEIN_STRATEGY_* id is its place
 * there). */
enum {
    /* every tensor is in memory once start() returned: waits return at once
     * and PAGEIN_HINT_PRELOAD has nothing to add */
    PI_ST_RESIDENT = 0x1,
    /* tensors live in the model's own anonymous memory (filled by reads):
     * nothing to page in, release or drop */
    PI_ST_PRIVATE = 0x2,
    /* over a source that cannot be mapped, the model is opened from its
     * headers alone: no data pointers, tensor bytes through
     * pagein_tensor_copy, and the calls that promise resident bytes refuse */
    PI_ST_HEADERS_ONLY = 0x4,
    /* pages whole 2 MiB blocks in (MADV_HUGEPAGE unless the caller chose an
     * access pattern); _UNBUDGETED: only without a budget */
    PI_ST_BLOCKS = 0x8,
    PI_ST_BLOCKS_UNBUDGETED = 0x10,
};

struct pi_strategy {
    const char *name;
    int (*start)(pagein_model *m); /* runs once the model is open; NULL: nothing to do */
    int needs_map;                 /* every file must be mapped (local) */
    uint32_t flags;                /* PI_ST_* */
    const char *summary;
};
const struct pi_strategy *pi_strategy_get(pagein_strategy s); /* NULL if unknown */
/* The flags of a model's strategy: its row (m->st, which open sets once the
 * strategy is decided) read as data, so the files below the table never
 * call back into it (0 before the strategy is decided). */
static inline uint32_t pi_model_flags(const pagein_model *m) { return m->st ? m->st->flags : 0; }

/* ---- fill rows: how ranges come into memory (range.c) ------------------ */
/* One kind of memory a strategy pages a model's ranges into. The prefetch
 * pager (pager.c) and the lazy waits (access.c) run over a row and never
 * ask which it is; a row calls only the primitives below it. budget is the
 * pager's (0: none, or not the pager). */
struct pi_fill {
    const char *name;
    /* once, before the pager's first pass */
    int (*prepare)(pagein_model *m, uint64_t budget);
    /* makes n ranges resident on this thread (r may be reordered) */
    int (*load)(pagein_model *m, struct pi_range *r, size_t n, uint64_t budget);
    /* a window's groups in one pass, reporting through h as
     * pi_model_populate_groups does (h->done once per group); < 0 only
     * when nothing started (then no callback ran) */
    int (*pass)(pagein_model *m, const int32_t *groups, size_t ng, uint64_t budget, _Atomic int32_t *cursor,
                const struct pi_group_hooks *h);
    /* gives a group's memory back (pagein_layer_done with a budget) */
    void (*release)(pagein_model *m, int32_t g);
    /* the memory is the model's own, filled by reads: bytes not read yet
     * read as zeros, so every accessor makes them valid first (the files'
     * ensure hook), and its sources' connections do not survive fork() */
    int buffers;
};
/* the file's mapping, paged in by the pool (populate.c) */
extern const struct pi_fill pi_fill_mapping;
/* anonymous buffers read through the range engine: files without a
 * mapping, remote sources (stream.c) */
extern const struct pi_fill pi_fill_buffers;
/* Loads group g's ranges through fill on this thread. */
int pi_fill_group(const struct pi_fill *fill, pagein_model *m, int32_t g, uint64_t budget);
/* qsort order of ranges: by (file, offset). */
int pi_range_cmp(const void *a, const void *b);

/* ---- anonymous buffers read through the sources (stream.c) -------------- */
/* Gives every file an anonymous buffer (rbuf) and points the tensors into
 * it; nothing is read yet. Sets m->streamed. */
int pi_stream_init(pagein_model *m);
/* Reads ranges (file ranges) through the range engine into rbuf: sorted by
 * (file, offset), coalesced by the engine; request size cut so that the
 * ranges fill the engine's depth. 0, or the failure naming the source. */
int pi_stream_read(pagein_model *m, struct pi_range *r, size_t n);
/* Drops a group's pages: the page-aligned interior of each tensor. */
void pi_stream_release_group(pagein_model *m, int32_t g);

/* ---- pager (pager.c) ---------------------------------------------------- */
int pi_pager_start(pagein_model *m);
void pi_pager_stop(pagein_model *m);
int pi_pager_wait(pagein_model *m, int32_t g);
int pi_pager_done(pagein_model *m, int32_t g);
/* Waits until tensor t of group g is resident. */
int pi_pager_wait_tensor(pagein_model *m, int32_t g, const pagein_tensor *t);
/* Streamed models: makes t's bytes in rbuf valid without moving the
 * cursor (its group resident or being read: waits; else reads just t on
 * this thread). 0 at once for other models. */
int pi_pager_ensure_tensor(pagein_model *m, const pagein_tensor *t);
/* The same for n tensors, the missing ones read in one engine run. */
int pi_pager_ensure_tensors(pagein_model *m, const pagein_tensor *const *t, size_t n);
/* Bytes the pager counts as resident (tests). */
uint64_t pi_pager_resident(pagein_model *m);
/* Waits until the pager thread has nothing left to load (the window is
 * filled as far as the budget allows, every load it started is finished),
 * at most timeout_ms: 0, or -ETIMEDOUT. For tests, which bound residency
 * only once the pager has done all it may. 0 at once without a pager. */
int pi_pager_settle(pagein_model *m, unsigned timeout_ms);

/* ---- which file behind a remote prefix is the model (resolve.c) -------- */
/* A model behind a prefix: s3://b/p/, gs://b/p/, hf://org/name[@rev] or
 * http(s)://host/dir/ -> the URI to open (what format/pick.c's
 * pi_model_pick chooses among the listing, listed = 1), written into out. A URI that names a file is copied unchanged.
 * PAGEIN_E_NOT_FOUND when the prefix holds no model. */
int pi_remote_model_uri(const char *uri, char *out, size_t cap);

#endif
