/* auto.c - the AUTO strategy: facts about where the model lives, and a rule.
 *
 * The rule (pi_auto_decide) is a pure function of injected facts so tests
 * can check every branch; pi_auto_gather collects the facts:
 *   - statfs() f_type: network filesystems and FUSE pay a round trip per
 *     request, and page faults are single-page requests at queue depth 1
 *     (specs/LINUX-IO.md), so they get READ;
 *   - /proc/self/mountinfo: the filesystem type by name (catches FUSE
 *     subtypes such as fuse.sshfs, fuse.s3fs, and types whose magic we do
 *     not list);
 *   - /sys/dev/block/MAJ:MIN/queue/rotational (or the parent disk's, for a
 *     partition): rotating disks get large sequential reads (READ);
 *   - total size: small models get READ (one read beats mapping + faults);
 *   - MemAvailable: a model that does not fit gets PREFETCH with a budget.
 * Everything else gets POPULATE: parallel page-in of the mapping, zero copy.
 *
 * Measured behaviour comes first (pi_auto_measure): a short probe of the
 * first file gives the latency of one request at depth 1 and how much
 * throughput grows at depth N. Storage where a request costs a round trip
 * and depth pays (FUSE, NFS, object-store mounts, a cold remote block
 * device), with a readahead window too small to make page faults large
 * reads, gets READ: the range engine keeps 16-32 large requests in flight,
 * page faults keep a handful of small ones. Storage that answers fast (a
 * warm page cache, tmpfs, a local disk with a large readahead) gets
 * POPULATE even on a network filesystem: the name alone decides only when
 * nothing could be measured.
 */
#include "load.h"
#include "../source/source.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

void pi_auto_gather(const pagein_model *m, struct pi_auto_facts *f) {
    memset(f, 0, sizeof *f);
    f->rotational = -1;
    for (size_t i = 0; m && i < m->nfiles; i++) f->model_bytes += m->files[i]->len;
    /* the storage facts are the first file's source's (source/facts.c:
     * statfs, mountinfo, sysfs, gathered once per source) */
    struct pi_source *s = m && m->nfiles ? m->files[0]->src : NULL;
    if (s) {
        const struct pi_source_facts *sf = pi_source_facts(s);
        f->fs_magic = sf->fs_magic;
        snprintf(f->fs_type, sizeof f->fs_type, "%s", sf->fs_type);
        f->rotational = sf->rotational;
        f->read_ahead_kb = sf->read_ahead_kb;
        f->storage = (int)sf->storage;
    }
    f->mem_available = pi_mem_available();
}

void pi_auto_measure(const pagein_model *m, struct pi_auto_facts *f) {
    f->measured = 0;
    if (!m || !m->nfiles || !m->files[0]->src) return;
    struct pi_source *s = m->files[0]->src;
    f->storage = (int)pi_source_facts(s)->storage;
    if (pi_source_facts(s)->read_ahead_kb) f->read_ahead_kb = pi_source_facts(s)->read_ahead_kb;
    if (pi_source_facts(s)->storage == PI_STORAGE_MEMORY) return; /* nothing to measure: memory */
    /* a remote object: auto reads it whatever a probe says (no mapping),
     * and the probe would fetch tensor data (up to 11 requests) where
     * `pagein plan URL` promises headers only */
    if (pi_source_facts(s)->storage == PI_STORAGE_REMOTE) return;
    /* a local disk whose readahead makes page faults large reads gets
     * populate whatever the probe says: do not pay for it */
    if (pi_source_facts(s)->storage == PI_STORAGE_LOCAL && pi_source_facts(s)->read_ahead_kb >= PI_AUTO_BIG_RA_KB) return;
    /* once per model: a second probe would find the first one's pages cached */
    pagein_model *mm = (pagein_model *)m;
    if (!mm->probed) {
        if (s->size < 16 * (128u << 10) || pi_engine_probe(s, 128u << 10, 8, &mm->probe) < 0) {
            pi_err_clear();
            return;
        }
        mm->probed = 1;
    }
    const struct pi_engine_probe_result r = mm->probe;
    f->measured = 1;
    f->lat1_ns = r.lat1_ns;
    f->speedup = r.speedup;
    f->probe_depth = r.n;
}

pagein_strategy pi_auto_decide(const struct pi_auto_facts *f, char *why, size_t len, uint64_t *budget) {
    if (budget) *budget = 0;
    double mib = (double)f->model_bytes / (1 << 20);
    int fits = !f->mem_available || f->model_bytes <= f->mem_available / 10 * 9;
    if (f->measured && fits) {
        /* a round trip per request: slow at depth 1 and either depth pays
         * (measured) or the storage is a network/FUSE/remote one (facts;
         * the depth-8 phase of the probe is noisy on a loaded machine) */
        int netlike = f->storage == PI_STORAGE_FUSE || f->storage == PI_STORAGE_NETFS ||
                      f->storage == PI_STORAGE_REMOTE;
        int rtt = f->lat1_ns >= PI_AUTO_RTT_NS && (f->speedup >= PI_AUTO_DEPTH_GAIN || netlike);
        int small_ra = f->read_ahead_kb < PI_AUTO_BIG_RA_KB;
        if (rtt && small_ra) {
            snprintf(why, len,
                     "auto: measured %.2f ms a request at depth 1 and %.1fx the throughput at depth %u, readahead "
                     "%u KiB: each request is a round trip and page faults read small pieces; explicit reads keep "
                     "many large requests in flight (model %.0f MiB fits in memory)",
                     f->lat1_ns / 1e6, f->speedup, f->probe_depth, f->read_ahead_kb, mib);
            return PAGEIN_STRATEGY_READ;
        }
        if (f->rotational != 1 && f->model_bytes >= PI_AUTO_SMALL_BYTES) {
            snprintf(why, len,
                     "auto: measured %.0f us a request at depth 1, %.1fx at depth %u, readahead %u KiB: %s; map and "
                     "populate in parallel (zero copy; model %.0f MiB fits in memory)",
                     f->lat1_ns / 1e3, f->speedup, f->probe_depth, f->read_ahead_kb,
                     !rtt ? "not latency-bound" : "page faults already read large pieces", mib);
            return PAGEIN_STRATEGY_POPULATE;
        }
    }
    if (!f->measured && pi_fs_is_remote(f->fs_magic, f->fs_type)) {
        const char *n = f->fs_type[0] ? f->fs_type : pi_fs_magic_name(f->fs_magic);
        snprintf(why, len,
                 "auto: %s is a network or FUSE filesystem (statfs magic 0x%x): explicit parallel reads, "
                 "since each page fault would be a round trip at queue depth 1",
                 n ? n : "?", f->fs_magic);
        return PAGEIN_STRATEGY_READ;
    }
    if (f->rotational == 1) {
        snprintf(why, len, "auto: rotating disk: large sequential reads instead of seeking page faults");
        return PAGEIN_STRATEGY_READ;
    }
    if (f->model_bytes < PI_AUTO_SMALL_BYTES) {
        snprintf(why, len, "auto: small model (%.1f MiB < %llu MiB): one parallel read beats mapping and faulting",
                 mib, (unsigned long long)(PI_AUTO_SMALL_BYTES >> 20));
        return PAGEIN_STRATEGY_READ;
    }
    if (f->mem_available && f->model_bytes > f->mem_available / 10 * 9) {
        uint64_t b = f->mem_available / 2;
        if (budget) *budget = b;
        snprintf(why, len,
                 "auto: model (%.0f MiB) does not fit in available memory (%.0f MiB): prefetch layers ahead "
                 "with a %.0f MiB budget",
                 mib, (double)f->mem_available / (1 << 20), (double)b / (1 << 20));
        return PAGEIN_STRATEGY_PREFETCH;
    }
    snprintf(why, len, "auto: local %s storage, model (%.0f MiB) fits in memory: map and populate in parallel "
                       "(zero copy)",
             f->rotational == 0 ? "solid-state" : "non-network", mib);
    return PAGEIN_STRATEGY_POPULATE;
}

pagein_strategy pi_auto_choose(const pagein_model *m, uint64_t asked, uint64_t *budget, char *why, size_t len) {
    *budget = 0;
    /* files that cannot be mapped (remote): no probe of their data; read
     * whole, or layer by layer with half of MemAvailable (or the budget
     * asked for) when larger than 90 % of it */
    uint64_t total = 0;
    int remote = 0;
    for (size_t i = 0; i < m->nfiles; i++) {
        total += m->files[i]->len;
        remote |= !m->files[i]->mapped && m->files[i]->len;
    }
    if (remote) {
        uint64_t avail = pi_mem_available();
        /* the reason reaches plan, --json and Python: the URL redacted
         * whole, before a short buffer could cut it inside its userinfo */
        char rp[1024];
        pi_url_redact(m->files[0]->path, rp, sizeof rp);
        if (avail && total > avail / 10 * 9) {
            *budget = asked ? asked : avail / 2;
            snprintf(why, len,
                     "auto: %s is not a local file and its %.0f MiB exceed 90%% of MemAvailable: layers read ahead "
                     "with a %.0f MiB budget", rp, (double)total / (1 << 20), (double)*budget / (1 << 20));
            return PAGEIN_STRATEGY_PREFETCH;
        }
        snprintf(why, len, "auto: %s is not a local file (no mapping): explicit parallel range reads", rp);
        return PAGEIN_STRATEGY_READ;
    }
    struct pi_auto_facts f;
    pi_auto_gather(m, &f);
    pi_auto_measure(m, &f);
    return pi_auto_decide(&f, why, len, budget);
}

pagein_strategy pagein_model_auto_plan(const pagein_model *m, uint64_t *budget, char *why, size_t len) {
    char tmp[256];
    uint64_t b = 0;
    if (budget) *budget = 0;
    if (!m) {
        if (why && len) snprintf(why, len, "no model");
        return PAGEIN_STRATEGY_AUTO;
    }
    /* the rule pagein_model_open runs for AUTO (no budget asked) */
    pagein_strategy s = pi_auto_choose(m, 0, &b, why && len ? why : tmp, why && len ? len : sizeof tmp);
    if (budget) *budget = b;
    return s;
}
