/* data.h - private declarations of the training-data readers (src/data/).
 * Never installed; used only by the files of src/data/ and the white-box tests. */
#ifndef PAGEIN_DATA_H
#define PAGEIN_DATA_H

#include "../internal.h"
#include "../source/source.h"

#include <pthread.h>
#include <stdatomic.h>

/* ---- datasets (dataset.c) ----------------------------------------------
 * A dataset is a list of shards, each opened by a row of the dataset-format
 * table (dsformat.h). Sample ids run through the shards in order. */
enum { PI_DS_RECORDS = 1, PI_DS_MEGATRON = 2, PI_DS_TABLE = 3 };

/* One file per shard, for the sample readers (reader.c): the shard's data
 * source when it is a local file (fd >= 0), else fd -1. */
struct pi_ds_file {
    char *path;
    int fd;
    uint64_t size;
    uint64_t first; /* first sample id in this shard */
    uint64_t count; /* samples in this shard */
};

struct pi_dsshard;
struct pagein_dataset {
    int kind;
    size_t nfiles; /* == nshards */
    struct pi_ds_file *files;
    uint64_t nsamples;
    struct pi_dsshard **shards;
    uint64_t *gfirst; /* nfiles + 1: global index of each shard's first group */
    uint64_t ngroups;
    int addressable;  /* every non-empty shard takes the sample path (locate) */
    struct pi_dsopenset *openset; /* the shards' open sources, bounded (dsopenset.h) */
    uint64_t zexcess; /* samples compressed shards claim beyond PI_DS_ROWS_PER_BYTE per compressed
                         byte, summed over the shards (at most the allowance: dscount.c) */
};

/* Shard and shard-local id of global sample id (< nsamples). */
size_t pi_ds_shard_of(const pagein_dataset *d, uint64_t id);
/* Shard of global group gg (< ngroups). */
size_t pi_ds_shard_of_group(const pagein_dataset *d, uint64_t gg);

/* ---- ranges (ranges.c) ---------------------------------------------------
 * The plan: requests sorted by (file, offset, -length); each block is one
 * read [off, off+len) of one file serving order[first .. first+count). */
struct pi_rblock {
    uint32_t file;
    uint64_t off, len;
    size_t first, count;
};
struct pi_rplan {
    size_t *order; /* n request indexes, sorted */
    struct pi_rblock *blocks;
    size_t nblocks;
    uint64_t bytes_read, bytes_wasted, bytes_requested;
};
/* Validates (zero length, file index, range against sizes[]) and plans.
 * max_gap UINT64_MAX... see ranges.c. no_merge: merge only contained and
 * duplicate requests. */
int pi_ranges_plan(const pagein_range *r, size_t n, size_t nfds, const uint64_t *sizes, uint64_t max_gap,
                   uint64_t max_block, int no_merge, struct pi_rplan *plan);
void pi_rplan_free(struct pi_rplan *plan);
/* A plan's counts for n requests into *st (NULL: nothing). */
void pi_rplan_stats(const struct pi_rplan *plan, size_t n, pagein_ranges_stats *st);

/* Open descriptors as range-engine sources (src/engine/engine.h), built
 * once and used for every batch. readv: reads go through the local-file
 * readv (io_uring where requests wait, threads on local disks; see
 * source/file_readv.c); else the engine's own threads. paths (may be NULL)
 * name the files in errors and give their storage facts.
 *
 * Why pagein_read_ranges does not take the file row's sources
 * (pi_source_from_fd, as warm.c does): PAGEIN_RANGES_URING is the
 * caller's choice of io_uring or threads, and the row makes that choice
 * itself from the descriptor's facts. Without paths these sources state no
 * facts (storage unknown), so with the flag the row's readv takes io_uring
 * for every read, and without it they have no readv, so the engine runs
 * `read` on its own workers. A row source gathers the facts: on a buffered
 * ext4 descriptor the flag then reads with the readv's threads, and
 * without the flag a FUSE or NFS descriptor would take io_uring (by the
 * readv's rule; not measured). Measured
 * (bench shuffle --modes ranges --size 128M, 4 alternated rounds, load
 * 3.4-4.9): with the flag 49 rings and 2,238 io_uring_enter, median
 * 0.54 s, against no ring, 1,490 threads started and 3,632 pread, 0.86 s;
 * without it 0.63 s against 0.88 s. Declaring the row source's storage
 * unknown gave the same rings and enters (0.47 against 0.59 s) but writes
 * the row's private facts from here. Taking the row needs the row to
 * accept the caller's choice (a from-fd open flag: ring, threads, or its
 * own rule) in source/file.c and file_readv.c. src/data/uri.c passes real
 * row sources through f.srcs and f.n only. */
struct pi_fdsrcs {
    struct pi_source_ops ops;
    struct pi_source *src;
    struct pi_source **srcs;
    char (*names)[48];
    size_t n;
};
int pi_fdsrcs_init(struct pi_fdsrcs *f, const int *fds, size_t n, const uint64_t *sizes, char *const *paths,
                   int readv);
void pi_fdsrcs_free(struct pi_fdsrcs *f);
/* Executes a plan on the range engine, qd reads in flight: a block that is
 * exactly one request is read straight into its buffer, others through the
 * engine's ring and sliced out into the requests they serve. With a crew
 * (kept workers, see pi_engine_opts.crew) merged blocks are read into
 * *scratch instead (grown as needed and kept by the caller, so that a
 * reader does not fault fresh pages in for every batch) and sliced out
 * after the run. */
struct pi_rscratch {
    uint8_t *p;
    uint64_t cap;
};
int pi_ranges_exec(const struct pi_fdsrcs *f, const pagein_range *r, const struct pi_rplan *plan, unsigned qd,
                   struct pi_crew *crew, struct pi_rscratch *scratch);

/* ---- random numbers ---------------------------------------------------- */
static inline uint64_t pi_splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* Uniform in [0, n) (Lemire's multiply-shift; bias < n / 2^64). */
static inline uint64_t pi_rand_below(uint64_t *s, uint64_t n) {
    return (uint64_t)(((unsigned __int128)pi_splitmix64(s) * n) >> 64);
}

#endif
