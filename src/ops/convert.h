/* convert.h - what ops/convert.c offers the other converters of ops/
 * (ops/dcp.c): the safetensors output, one file or a Hugging Face shard set
 * with its index, written all or nothing. */
#ifndef PAGEIN_OPS_CONVERT_H
#define PAGEIN_OPS_CONVERT_H

#include "../internal.h"

/* Writes w[0..n) to out: one file when nshards is 1, else nshards shards
 * named like "model-00001-of-00003.safetensors" (tensor i in shard[i],
 * each shard's tensors taken in order ord) plus out's ".index.json", all
 * or nothing. bound: the output's bytes (headers included) checked against
 * max_output_bytes (0: the free space; UINT64_MAX: no check); total: the
 * tensor bytes, for the index. */
int pi_convert_write_set(const char *out, const pagein_write_tensor *w, size_t n, const size_t *ord,
                         const uint32_t *shard, uint32_t nshards, const pagein_write_opts *wo, uint64_t total,
                         uint64_t bound, uint64_t max_output_bytes);

#endif
