/* dcp_hf.h - torch's safetensors flavour of a Distributed Checkpoint
 * (torch 2.7+): safetensors files whose "__metadata__" holds
 * "DCP_SHARDING_INFO", a JSON string mapping each tensor of the file to
 * {"saved_offsets": [...]}, where its chunk lies in the whole tensor. The
 * parser of that string and the checks of one tensor's chunks. Buffer in,
 * no I/O (docs/FORMAT-DCP.md). */
#ifndef PAGEIN_DCP_HF_H
#define PAGEIN_DCP_HF_H

#include "dcp.h"

#define PI_DCP_HF_KEY "DCP_SHARDING_INFO"

struct pi_dcp_hf_entry {
    char *name; /* NUL-terminated copy, name_len bytes (may hold NUL) */
    size_t name_len;
    uint32_t ndim;
    uint64_t *off; /* ndim saved offsets */
    /* Hugging Face transformers' chunk layout: the storage key ("chunk_3")
     * is not the tensor's name; the entry names it ("fqn") and gives the
     * whole tensor's shape ("shape"). NULL when absent. */
    char *fqn;
    size_t fqn_len;
    uint64_t *shape;
    uint32_t shape_ndim;
};

struct pi_dcp_hf_info {
    struct pi_dcp_hf_entry *e; /* sorted by name, unique */
    size_t n, cap;
};

void pi_dcp_hf_info_free(struct pi_dcp_hf_info *in);
/* Parses the DCP_SHARDING_INFO string s[0..len) of file (for messages):
 * an object of storage key -> object with "saved_offsets" (an array of at
 * most PI_DCP_MAX_NDIM non-negative integers), optionally "fqn" (a string:
 * the tensor's name when it differs from the key) and "shape" (the whole
 * tensor's, at most PI_DCP_MAX_NDIM integers); other members are skipped.
 * PAGEIN_E_BAD_JSON, _BAD_UTF8, _BAD_TYPE, _OVERFLOW, _LIMIT, _DUPLICATE,
 * _BAD_INDEX (no saved_offsets), -ENOMEM; messages name file and fqn.
 * in is zeroed by the caller and freed by the caller. */
int pi_dcp_hf_info_parse(const char *s, size_t len, const char *file, struct pi_dcp_hf_info *in);
const struct pi_dcp_hf_entry *pi_dcp_hf_info_find(const struct pi_dcp_hf_info *in, const char *name, size_t len);

/* One saved chunk of a tensor: its file, dtype and box; shape: the whole
 * tensor's shape as its entry states it (shape_ndim of them), or NULL. */
struct pi_dcp_hf_piece {
    const char *file;
    pagein_dtype dtype;
    uint32_t ndim;
    const uint64_t *off, *len;
    const uint64_t *shape;
    uint32_t shape_ndim;
};

/* The whole tensor name from its chunks p[0..np), as torch consolidates
 * it: shape = max(off + len) in each dimension. Checks that the chunks
 * agree on ndim (<= PI_DCP_MAX_NDIM) and dtype, that off + len does not
 * overflow, that no two chunks share an element and that they cover the
 * tensor, and that a stated whole shape is the one the chunks make;
 * errors name the tensor and the file(s). size: PI_DCP_MAX_NDIM. */
int pi_dcp_hf_check(const char *name, const struct pi_dcp_hf_piece *p, size_t np, uint32_t *ndim, uint64_t *size,
                    uint64_t *nelements);

#endif
