/* dsopenset.h - a dataset's bounded set of open shard sources (dsopenset.c).
 *
 * A dataset of more shards than the set's limit does not keep one source
 * (a descriptor, a remote connection pool) per shard open: each shard's
 * sh->src is a stand-in source that opens the real one when a read needs
 * it and closes the least recently used unreferenced one when more than
 * the limit are open. A reopen checks that the object is the one indexed
 * at open (size and identity: a local file's device, inode, size, mtime
 * and ctime; a remote object's ETag): a file replaced in between is
 * PAGEIN_E_CHANGED naming it, never other bytes. A dataset within the
 * limit keeps every source open for its life, as before (its descriptors
 * stable: pagein_dataset_fd).
 *
 * The limit: PAGEIN_MAX_OPEN_SHARDS, else a quarter of the soft
 * RLIMIT_NOFILE for local shards (256 at the usual 1024) and a sixteenth
 * for remote ones (a remote source holds a few connections), at least 8. */
#ifndef PAGEIN_DSOPENSET_H
#define PAGEIN_DSOPENSET_H

#include "../internal.h"
#include "../source/source.h"

struct pi_dsopenset;

/* A set for nshards shards, the first named first (remote or local
 * decides the default limit). NULL when out of memory. */
struct pi_dsopenset *pi_dsopenset_new(size_t nshards, const char *first);
/* After every source of the set is closed. NULL ok. */
void pi_dsopenset_free(struct pi_dsopenset *set);
/* The limit in effect; 1 when the set holds more shards than that (it
 * closes and reopens sources). */
size_t pi_dsopenset_limit(const struct pi_dsopenset *set);
int pi_dsopenset_bounded(const struct pi_dsopenset *set);

/* Opens uri as a stand-in source of set (closed with pi_source_close):
 * the real source is opened now and held for the shard's open (its fd is
 * the stand-in's meanwhile); call pi_dsopenset_opened() when the shard's
 * open is over. */
int pi_dsopenset_source(struct pi_source **out, struct pi_dsopenset *set, const char *uri);
/* The shard's open is over: a bounded set may now close the source (its
 * fd becomes -1); an unbounded one keeps it open for good. */
void pi_dsopenset_opened(struct pi_source *s);
/* The real source's descriptor, opened (and checked) if closed, kept open
 * from now on (a caller holding a descriptor); -1 for a remote source, or
 * < -1 (an error code) when it cannot be reopened. */
int pi_dsopenset_fd(struct pi_source *s);
/* Opens and closes in the life of the set (for tests and the docs' figures). */
void pi_dsopenset_counts(const struct pi_dsopenset *set, uint64_t *opens, uint64_t *closes, size_t *most_open);

#endif
