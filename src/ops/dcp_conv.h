/* dcp_conv.h - consolidating a checkpoint of chunks into safetensors
 * through ONE range-engine run, shared by the two DCP layouts (ops/dcp.c:
 * torch.save blobs; ops/dcp_hf.c: safetensors chunks). Every chunk is one
 * span, planned in the writer's order; the engine (coalesced, many in
 * flight, a bounded ring) streams them to a consumer thread that hands
 * each whole span to the layout's piece function, which copies the chunk
 * into its tensor's buffer (or says the span is the tensor as stored);
 * each whole tensor is handed to the safetensors writer on the caller's
 * thread while the engine reads on (double buffering). Memory: the tensor
 * being written, a span gathered over several engine pieces, one spare
 * buffer, the ring (docs/FORMAT-DCP.md, "Consolidation"). */
#ifndef PAGEIN_OPS_DCP_CONV_H
#define PAGEIN_OPS_DCP_CONV_H

#include "../source/source.h"
#include "../engine/engine.h"
#include "convert.h"

/* One output tensor, in the writer's order. */
struct pi_dcpc_tensor {
    const char *name;
    uint64_t nbytes;
    size_t s0, s1; /* its spans in the plan: [s0, s1) */
};

struct pi_dcpc;

/* The layout's part, called on the engine's consumer thread with span's
 * whole bytes p: when whole_ok (the tensor is this span alone and p may be
 * kept as its buffer) and the span holds the tensor as stored, sets *data
 * to its first byte inside p and copies nothing; else copies the chunk
 * into pi_dcpc_tbuf(g). */
typedef int (*pi_dcpc_piece_fn)(void *arg, struct pi_dcpc *g, size_t span, const uint8_t *p, int whole_ok,
                                const uint8_t **data);

/* The buffer of the tensor being assembled (nbytes, from the pool); NULL
 * when out of memory (the error is set). */
uint8_t *pi_dcpc_tbuf(struct pi_dcpc *g);

struct pi_dcpc_plan {
    struct pi_source **srcs;
    size_t nsrc;
    const struct pi_span *spans; /* in the writer's order */
    size_t nspans;
    const size_t *span_t; /* span -> position in t */
    const struct pi_dcpc_tensor *t;
    size_t nt;
    pi_dcpc_piece_fn piece;
    void *arg;
};

/* Writes out (one file, or nshards shards + index) from the plan: w[k]
 * (state-dict order) is t[pos[k]]; its fill is set here. ord, shard,
 * nshards, wo, total, bound, max_out: pi_convert_write_set's. The engine's
 * counters into *est. */
int pi_dcpc_convert(const struct pi_dcpc_plan *p, const char *out, pagein_write_tensor *w, const size_t *pos,
                    const size_t *ord, const uint32_t *shard, uint32_t nshards, const pagein_write_opts *wo,
                    uint64_t total, uint64_t bound, uint64_t max_out, struct pi_engine_stats *est);

#endif
