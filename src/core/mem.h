/*
 * mem.h - the one memory policy for the memory pagein hands out: READ's
 * buffers, prefetch's buffers, decoded training-data groups.
 *
 * On a VM, the first write to a fresh page can cost far more than the
 * bytes it receives: each page fault taken by a load or a store (or by a
 * read() copying into the page) goes through the guest's exception path,
 * and memory the VM's balloon handed back to the host is faulted in again
 * by the host. Measured on the 2-CPU VM of docs/BENCHMARKS.md ("Fresh
 * memory"): faulting 1 GiB of 4 KiB pages by touching it 6-10 s;
 * MADV_POPULATE_WRITE on the same 4 KiB pages 0.5-0.7 s; huge pages 0.15
 * s when the guest had just freed them, 5 s when they came back from the
 * balloon. So:
 *
 *  1. Reuse first: pi_mem_get hands out a block released by pi_mem_put
 *     (already resident) before it maps a fresh one. A few blocks are kept
 *     per process, bounded (PAGEIN_MEM_KEEP bytes, default 1/16 of RAM,
 *     at most 2 GiB) and dropped after 60 s unused; while kept they are
 *     MADV_FREE (the kernel takes them back under memory pressure without
 *     writing them out: a reused block may then hold zero pages).
 *  2. Fresh memory can be populated ahead, off the I/O path: a fill
 *     (pi_mem_fill_start) populates the regions in order, 4 MiB at a time,
 *     with MADV_POPULATE_WRITE and a write per 4 KiB on its own threads,
 *     while the range engine reads; the engine waits for a destination's
 *     pages before it issues a request into them (pi_engine_opts.fill).
 *     The caller says how many threads: READ asks for one when its reads
 *     go O_DIRECT to a latency-bound filesystem, where each request pins
 *     its destination on the issuing thread before the filesystem sees
 *     it (load/read.c), the Parquet decoder one for a fresh values array
 *     of 8 MiB or more (data/parquet_page.c); otherwise none: on the VM above, loaded, one
 *     thread populating ahead of local reads took 15-53 s for 1.3 GB where
 *     the engine's own 8 threads faulting the same huge pages in took 6-9
 *     s (docs/BENCHMARKS.md, "Fresh memory"). PAGEIN_MEM_THREADS=N
 *     overrides both. Without a fill a measured block gets huge pages
 *     (pi_mem_advise).
 *  3. The page size, where a fill runs, is measured: each 4 MiB chunk is timed;
 *     huge pages first (the allocator hands out the 2 MiB blocks freed
 *     last, which the host still backs), 4 KiB pages tried once huge ones
 *     populate below 1 GB/s, then the faster of the two, the slower tried
 *     again every 16 chunks while the faster stays below 1 GB/s.
 *     PAGEIN_READ_HUGEPAGE=0|1 forces one size.
 *
 *  4. READ's fresh blocks may come from the hugetlb pool
 *     (PAGEIN_READ_HUGETLB=1, pi_mem_get_read): pages the administrator
 *     reserved stay with the guest between processes, still backed.
 *
 * pi_mem_stats counts what was done (the access trace: pagein_io_stats).
 */
#ifndef PAGEIN_CORE_MEM_H
#define PAGEIN_CORE_MEM_H

#include <stddef.h>
#include <stdint.h>

struct pi_mem_stats {
    double fault_s;    /* seconds the fill's threads spent populating (summed over threads) */
    double wait_s;     /* seconds a consumer waited for the fill (pi_mem_fill_wait) */
    uint64_t populated; /* bytes populated ahead (fresh pages) */
    uint64_t huge;      /* of which as huge pages */
    uint64_t reused;    /* bytes handed out from blocks released before (already resident) */
    uint64_t pool;      /* bytes from the hugetlb pool (pi_mem_get_read) */
};

/* Page-size choice for a block. */
enum pi_mem_pages {
    PI_MEM_PAGES_MEASURE = 0, /* measured (3. above); PAGEIN_READ_HUGEPAGE forces */
    PI_MEM_PAGES_SMALL,       /* always 4 KiB pages (what is resident must be what was written) */
    PI_MEM_PAGES_HUGE,        /* huge pages asked for (PAGEIN_HINT_HUGEPAGE) */
    PI_MEM_PAGES_ASIS,        /* no advice: the block's owner set it once for the whole block */
};

/* A block of at least len bytes of zero-or-stale anonymous memory
 * (reused blocks hold their last user's bytes: only for callers that
 * write every byte they expose), its size in *cap (a multiple of 2 MiB).
 * *reused is set to 1 when it came from the free list. NULL with errno
 * set on failure. noreserve: MAP_NORESERVE and never reused (an address
 * range larger than memory, touched only in part). */
void *pi_mem_get(size_t len, size_t *cap, int noreserve, int *reused);
/* pi_mem_get for READ's buffers: a kept block first; then, with
 * PAGEIN_READ_HUGETLB=1, a block from the hugetlb pool (vm.nr_hugepages,
 * MAP_HUGETLB; *pool set to 1). Pages in the pool stay with the guest when
 * no process uses them, so on a VM whose balloon hands free memory back to
 * the host they are still backed when the next process takes them
 * (docs/BENCHMARKS.md: 0.93-0.98 s for 1.3 GB read with O_DIRECT into
 * them, after 20-60 s idle, against 7.0-8.4 s into fresh huge pages; the
 * pool's first use pays like fresh memory). Opt-in: the pool is the
 * administrator's, and another program may count on it. Otherwise, or
 * when the pool lacks the pages, ordinary memory (pi_mem_get). */
void *pi_mem_get_read(size_t len, size_t *cap, int *reused, int *pool);
/* Gives a block from pi_mem_get back: kept for reuse (bounded, see above)
 * or unmapped. NULL is ignored. */
void pi_mem_put(void *p, size_t cap);
/* Unmaps every kept block (tests; a caller about to measure RSS). */
void pi_mem_trim(void);
/* Bytes currently kept for reuse. */
uint64_t pi_mem_kept(void);

/* Growable arrays (pi_grow's contract: *cap elements of elem bytes, grown
 * by doubling to at least need, contents kept) whose large sizes come from
 * the blocks above: an array of 256 KiB or more lives in a pi_mem_get block,
 * so that an array freed with pi_mem_release goes back to the kept blocks
 * and the next one of about that size (the next group's decoded column, in
 * this or another reader) is handed the same, already resident, pages
 * instead of faulting fresh ones in. Smaller arrays use the heap. An array
 * must be grown and released only through these two (never realloc/free).
 * Negative code with a message on failure (the array unchanged). */
int pi_mem_grow(void **p, size_t *cap, size_t need, size_t elem);
void pi_mem_release(void *p, size_t cap, size_t elem);
/* Bytes of blocks handed out again by pi_mem_grow since the process began
 * (a counter for benchmarks and tests). */
uint64_t pi_mem_grow_reused(void);
/* 1 if an array of this many bytes grown by pi_mem_grow lives in a
 * pi_mem_get block (whole pages; never under ASan, where arrays stay on
 * the heap), 0 if on the heap. */
int pi_mem_grow_is_block(size_t bytes);
/* Bytes populated by every fill since the process began (a counter for
 * benchmarks and tests). */
uint64_t pi_mem_populated_total(void);

/* ---- populating ahead ------------------------------------------------- */
struct pi_mem_fill;

/* Starts populating regions p[i] (len[i] bytes each, in this order) on
 * `threads` threads (PAGEIN_MEM_THREADS overrides; 0, the default: no
 * fill, NULL). pages picks the page size. NULL when nothing needs doing or
 * the threads cannot start (the pages then fault in where they are
 * written: slower, never wrong). The regions must stay mapped until
 * pi_mem_fill_end. */
struct pi_mem_fill *pi_mem_fill_start(void *const *p, const size_t *len, size_t n, unsigned threads,
                                      enum pi_mem_pages pages);
/* Blocks until [p, p + len) is populated, where it lies in one of the
 * fill's regions; returns at once otherwise (or for a NULL fill). */
void pi_mem_fill_wait(struct pi_mem_fill *f, const void *p, uint64_t len);
/* 1 if [p, p + len) is populated or outside the fill's regions, without
 * waiting. */
int pi_mem_fill_ready(struct pi_mem_fill *f, const void *p, uint64_t len);
/* Stops claiming new chunks, joins the threads, adds the counters to *st
 * (may be NULL) and frees the fill. NULL is ignored. */
void pi_mem_fill_end(struct pi_mem_fill *f, struct pi_mem_stats *st);

/* Populates [p, p + len) now, on the calling thread (pages as above);
 * for small blocks where threads cost more than they save. */
void pi_mem_populate(void *p, size_t len, enum pi_mem_pages pages, struct pi_mem_stats *st);

/* The page-size advice alone, for memory no fill populates (MEASURE:
 * huge pages, the fill's first choice). */
void pi_mem_advise(void *p, size_t len, enum pi_mem_pages pages);

/* Tests: the last measured 4 KiB populate rate (bytes/s, 0 unknown), and
 * a hook that forgets it. */
double pi_mem_small_rate(void);
void pi_mem_forget_rates(void);

#endif
