/* dcp.h - torch Distributed Checkpoints (DCP): a directory with a pickled
 * `.metadata` (format/dcp_meta.c, through the restricted unpickler's DCP
 * mode) and `__RANK_N.distcp` files holding, at each entry's (offset,
 * length), a torch.save blob of one tensor chunk or the bytes of a
 * non-tensor item (format/dcp.c). Buffer in, no I/O (docs/FORMAT-DCP.md). */
#ifndef PAGEIN_DCP_H
#define PAGEIN_DCP_H

#include "format.h"

#define PI_DCP_MAX_NDIM 64
#define PI_DCP_META_NAME ".metadata"

struct pi_dcp_chunk {
    uint64_t *off, *len; /* ndim each: where the chunk lies in the tensor (arena) */
    uint64_t nelements;
    uint32_t file;       /* index into pi_dcp_meta.files */
    uint64_t at, nbytes; /* the blob: bytes [at, at + nbytes) of that file */
};

struct pi_dcp_item {
    const char *name; /* NUL-terminated (arena), name_len bytes */
    size_t name_len;
    int is_bytes;     /* a non-tensor item (BytesStorageMetadata): one chunk, ndim 0 */
    pagein_dtype dtype;
    uint32_t ndim;
    uint64_t *size;   /* ndim (arena) */
    uint64_t nelements;
    uint32_t nchunks;
    struct pi_dcp_chunk *chunks;
};

struct pi_dcp_meta {
    struct pi_dcp_item *items; /* in the state dict's order */
    size_t n;
    char **files; /* relative paths (plain file names, arena), in first-use order */
    size_t nfiles;
    int generation; /* 1: torch 1.13's module names; 2: torch 2.x's */
    uint32_t *ihash; /* name index: slots of item index + 1 */
    size_t ihcap;
    struct pi_arena arena;
};

void pi_dcp_meta_init(struct pi_dcp_meta *m);
void pi_dcp_meta_free(struct pi_dcp_meta *m);
/* Parses and validates a .metadata image (where: its path, for messages):
 * the pickle under the DCP allowlist; every tensor's chunks inside the
 * tensor, not overlapping and covering it; every chunk and non-tensor item
 * with exactly one storage entry and every storage entry with its item;
 * relative paths plain file names. Errors name where and the key:
 * PAGEIN_E_UNSAFE, _BAD_PICKLE, _TRUNCATED (pickle), _BAD_INDEX (the
 * checkpoint's structure), _BAD_OFFSET (chunks), _DUPLICATE, _BAD_DTYPE,
 * _UNSUPPORTED (sparse layouts, transformed blobs), _LIMIT, _OVERFLOW,
 * -ENOMEM. m is initialised by the caller and freed by the caller. */
int pi_dcp_meta_parse(const uint8_t *buf, size_t len, const char *where, struct pi_dcp_meta *m);
/* Every entry inside its file: sizes[i] is the size of files[i]. */
int pi_dcp_meta_check_files(const struct pi_dcp_meta *m, const char *where, const uint64_t *sizes);
/* The item named name (len bytes), or NULL. O(1). */
const struct pi_dcp_item *pi_dcp_meta_find(const struct pi_dcp_meta *m, const char *name, size_t len);

/* One chunk's blob, parsed: the torch.save zip at buf[0..len) (the blob's
 * own bytes; offsets below are relative to the blob's start). */
struct pi_dcp_blob {
    pagein_dtype dtype;
    uint32_t ndim;
    uint64_t shape[PI_DCP_MAX_NDIM];
    int64_t strides[PI_DCP_MAX_NDIM]; /* elements */
    uint64_t data_off;  /* the tensor's first element (storage offset applied) */
    uint64_t span;      /* bytes from data_off that the strides reach (the view's extent) */
    int contiguous;     /* row-major strides: bytes [data_off, data_off + nelements * esize) */
};
/* Parses the torch.save blob of item it's chunk c: a zip holding one
 * tensor; checks dtype and shape against the metadata and that the storage
 * lies inside the blob. Errors name where, the key and the file. */
int pi_dcp_blob_parse(const uint8_t *buf, size_t len, const struct pi_dcp_meta *m, const struct pi_dcp_item *it,
                      const struct pi_dcp_chunk *c, const char *where, struct pi_dcp_blob *b);

#endif
