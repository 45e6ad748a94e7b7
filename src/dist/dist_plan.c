/* dist_plan.c - which bytes each rank of a group reads, and what it keeps
 * (docs/DISTRIBUTED.md). Pure computation over an open model's tensor
 * table: no I/O, no transport. Every rank computes the same plan from the
 * same files, so the plan itself is never exchanged. */
#include "../internal.h"

#include <fnmatch.h>
#include <inttypes.h>

struct pagein_dist_plan {
    pagein_dist_read *reads;
    size_t nreads, cap_reads;
    pagein_dist_piece *pieces;
    size_t npieces;
    uint64_t read_bytes;
};

/* Hugging Face llama/mistral/qwen names, then GGUF (llama.cpp) names. */
static const pagein_dist_rule default_rules[] = {
    {"*.q_proj.*", PAGEIN_SPLIT_ROWS},        {"*.k_proj.*", PAGEIN_SPLIT_ROWS},
    {"*.v_proj.*", PAGEIN_SPLIT_ROWS},        {"*.gate_proj.*", PAGEIN_SPLIT_ROWS},
    {"*.up_proj.*", PAGEIN_SPLIT_ROWS},       {"*.o_proj.weight", PAGEIN_SPLIT_COLS},
    {"*.down_proj.weight", PAGEIN_SPLIT_COLS}, {"*embed_tokens.weight", PAGEIN_SPLIT_ROWS},
    {"lm_head.weight", PAGEIN_SPLIT_ROWS},    {"blk.*.attn_q.*", PAGEIN_SPLIT_ROWS},
    {"blk.*.attn_k.*", PAGEIN_SPLIT_ROWS},    {"blk.*.attn_v.*", PAGEIN_SPLIT_ROWS},
    {"blk.*.ffn_gate.*", PAGEIN_SPLIT_ROWS},  {"blk.*.ffn_up.*", PAGEIN_SPLIT_ROWS},
    {"blk.*.attn_output.weight", PAGEIN_SPLIT_COLS}, {"blk.*.ffn_down.weight", PAGEIN_SPLIT_COLS},
    {"token_embd.weight", PAGEIN_SPLIT_ROWS}, {"output.weight", PAGEIN_SPLIT_ROWS},
};

const pagein_dist_rule *pagein_dist_default_rules(size_t *n) {
    if (n) *n = PI_ARRAY_LEN(default_rules);
    return default_rules;
}

static int add_read(pagein_dist_plan *p, const pagein_dist_read *r) {
    FORWARD_IF(pi_grow((void **)&p->reads, &p->cap_reads, p->nreads + 1, sizeof *r));
    p->reads[p->nreads++] = *r;
    return 0;
}

/* floor(k * total / world), without overflow. */
static uint64_t share(uint64_t total, unsigned k, unsigned world) {
    return (uint64_t)(((unsigned __int128)total * k) / world);
}

static pagein_split rule_for(const pagein_tensor *t, const pagein_dist_rule *rules, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (rules[i].pattern && fnmatch(rules[i].pattern, t->name, 0) == 0) return rules[i].split;
    return PAGEIN_SPLIT_NONE;
}

/* Fills the piece of a split tensor and adds its reads: with exchange (a
 * COLS tensor, world > 1, not COLS_DIRECT) the EXCHANGE reads of every
 * owner, else this rank's PRIVATE read. */
static int plan_split(pagein_dist_plan *p, const pagein_tensor *t, uint32_t ti, pagein_split split, unsigned rank,
                      unsigned world, int exchange, pagein_dist_piece *pc) {
    const pagein_dtype_info *di = pagein_dtype_get(t->dtype);
    RETURN_IF(!di || di->bits == 0 || di->bits % 8 || (di->flags & PAGEIN_DTYPE_F_QUANT), PAGEIN_E_UNSUPPORTED,
              "tensor '%s': dtype %s cannot be split (block-quantized or sub-byte elements)", t->name,
              di ? di->name : "?");
    uint64_t e = di->bits / 8;
    uint32_t dim = split == PAGEIN_SPLIT_ROWS ? 0 : t->ndim - 1;
    uint64_t d = t->shape[dim];
    uint64_t a = share(d, rank, world), b = share(d, rank + 1, world);
    pc->split = split;
    pc->dim = dim;
    pc->start = a;
    pc->stop = b;
    pagein_dist_read r = {.owner = rank, .shared = 0, .tensor = ti, .file = t->file, .dst_offset = 0};
    if (d == 0 || t->nelements == 0) {
        pc->nbytes = 0;
        return 0;
    }
    if (split == PAGEIN_SPLIT_ROWS) {
        uint64_t row = t->nbytes / d;
        r.offset = t->offset + a * row;
        r.length = r.stride = (b - a) * row;
        r.count = 1;
    } else if (exchange) {
        uint64_t outer = t->nelements / d, row = d * e;
        pc->nbytes = outer * (b - a) * e;
        for (unsigned k = 0; k < world; k++) {
            uint64_t ra = share(outer, k, world), rb = share(outer, k + 1, world);
            if (ra == rb) continue;
            pagein_dist_read x = {.owner = k, .shared = PAGEIN_DIST_EXCHANGE, .tensor = ti, .file = t->file,
                                  .offset = t->offset + ra * row, .length = (rb - ra) * row,
                                  .stride = (rb - ra) * row, .count = 1, .dst_offset = 0,
                                  .row_start = ra, .row_stop = rb};
            FORWARD_IF(add_read(p, &x));
            if (k == rank) p->read_bytes += x.length;
        }
        return 0;
    } else {
        uint64_t outer = t->nelements / d;
        r.offset = t->offset + a * e;
        r.length = (b - a) * e;
        r.stride = d * e;
        r.count = outer;
    }
    pc->nbytes = r.length * r.count;
    if (pc->nbytes) {
        FORWARD_IF(add_read(p, &r));
        p->read_bytes += pc->nbytes;
    }
    return 0;
}

static int plan_build(pagein_dist_plan *p, const pagein_model *m, unsigned rank, unsigned world,
                      const pagein_dist_opts *o) {
    size_t nt = pagein_model_tensor_count(m);
    RETURN_IF(nt > UINT32_MAX, PAGEIN_E_LIMIT, "distributed plan: %zu tensors (at most 2^32-1)", nt);
    const pagein_dist_rule *rules = o->rules;
    size_t nrules = o->nrules;
    if (o->mode == PAGEIN_DIST_TP && !rules) rules = pagein_dist_default_rules(&nrules);
    for (size_t i = 0; i < nrules && rules; i++)
        RETURN_IF(rules[i].split > PAGEIN_SPLIT_COLS, PAGEIN_E_INVALID, "distributed plan: rule %zu ('%s'): split %d",
                  i, rules[i].pattern ? rules[i].pattern : "(null)", (int)rules[i].split);
    uint64_t align = o->align ? o->align : 4096;

    p->pieces = pi_calloc(nt ? nt : 1, sizeof *p->pieces);
    pagein_split *split = pi_calloc(nt ? nt : 1, sizeof *split);
    if (!p->pieces || !split) {
        pi_free(split);
        return pi_err(-ENOMEM, "distributed plan: %zu tensors", nt);
    }
    p->npieces = nt;
    int rc = 0;
    uint64_t total = 0; /* bytes of the replicated stream */
    for (size_t i = 0; i < nt && rc == 0; i++) {
        const pagein_tensor *t = pagein_model_tensor_at(m, i);
        if (t->flags & (PAGEIN_TENSOR_NONCONTIGUOUS | PAGEIN_TENSOR_SWAPPED | PAGEIN_TENSOR_ASSEMBLED)) {
            rc = pi_err(PAGEIN_E_UNSUPPORTED, "tensor '%s': stored %s; a distributed load reads raw bytes", t->name,
                        (t->flags & PAGEIN_TENSOR_SWAPPED)     ? "byte-swapped"
                        : (t->flags & PAGEIN_TENSOR_ASSEMBLED) ? "in several pieces (a DCP checkpoint: "
                                                                 "pagein.distributed reshards those)"
                                                               : "non-contiguous");
            break;
        }
        pagein_dist_piece *pc = &p->pieces[i];
        pc->tensor = (uint32_t)i;
        split[i] = o->mode == PAGEIN_DIST_TP ? rule_for(t, rules, nrules) : PAGEIN_SPLIT_NONE;
        if (split[i] == PAGEIN_SPLIT_COLS && t->ndim < 2) split[i] = PAGEIN_SPLIT_NONE;
        if (split[i] == PAGEIN_SPLIT_ROWS && t->ndim < 1) split[i] = PAGEIN_SPLIT_NONE;
        if (split[i] == PAGEIN_SPLIT_NONE) {
            pc->split = PAGEIN_SPLIT_NONE;
            pc->dim = 0;
            pc->start = 0;
            pc->stop = t->ndim ? t->shape[0] : 1;
            pc->nbytes = t->nbytes;
            total += t->nbytes;
        }
    }
    /* Shared reads first (every owner, model order: the broadcast order),
     * then this rank's private slices. */
    unsigned owner = 0;
    /* CUT(k): k * total / world rounded down to align; CUT(world) = total. */
#define CUT(k) ((k) >= world ? total : share(total, (k), world) / align * align)
    uint64_t pos = 0, cut_hi = CUT(1u);
    for (size_t i = 0; i < nt && rc == 0; i++) {
        if (split[i] != PAGEIN_SPLIT_NONE) continue;
        const pagein_tensor *t = pagein_model_tensor_at(m, i);
        uint64_t end = pos + t->nbytes;
        while (pos < end && rc == 0) {
            while (pos >= cut_hi && owner + 1 < world) {
                owner++;
                cut_hi = CUT(owner + 1);
            }
            uint64_t stop = PI_MIN(end, cut_hi);
            uint64_t into = pos - (end - t->nbytes);
            pagein_dist_read r = {.owner = owner, .shared = PAGEIN_DIST_BROADCAST, .tensor = (uint32_t)i, .file = t->file,
                                  .offset = t->offset + into, .length = stop - pos, .stride = stop - pos,
                                  .count = 1, .dst_offset = into};
            rc = add_read(p, &r);
            if (owner == rank) p->read_bytes += r.length;
            pos = stop;
        }
    }
#undef CUT
    /* EXCHANGE reads (all owners) before PRIVATE ones (this rank's). */
    int direct = (o->flags & PAGEIN_DIST_COLS_DIRECT) || world == 1;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < nt && rc == 0; i++) {
            int exchange = split[i] == PAGEIN_SPLIT_COLS && !direct;
            if (split[i] != PAGEIN_SPLIT_NONE && exchange == (pass == 0))
                rc = plan_split(p, pagein_model_tensor_at(m, i), (uint32_t)i, split[i], rank, world, exchange,
                                &p->pieces[i]);
        }
    pi_free(split);
    return rc;
}

int pagein_dist_plan_new(pagein_dist_plan **out, const pagein_model *m, unsigned rank, unsigned world,
                         const pagein_dist_opts *opts) {
    pagein_dist_opts o = PAGEIN_DIST_OPTS_INIT;
    if (opts) {
        RETURN_IF(opts->size < sizeof o, PAGEIN_E_INVALID, "distributed plan: opts.size %zu < %zu", opts->size,
                  sizeof o);
        o = *opts;
    }
    RETURN_IF(!out || !m, PAGEIN_E_INVALID, "distributed plan: NULL argument");
    RETURN_IF(world == 0 || rank >= world, PAGEIN_E_INVALID, "distributed plan: rank %u of world size %u", rank,
              world);
    RETURN_IF(o.mode != PAGEIN_DIST_REPLICATED && o.mode != PAGEIN_DIST_TP, PAGEIN_E_INVALID,
              "distributed plan: unknown mode %d", (int)o.mode);
    pagein_dist_plan *p = pi_calloc(1, sizeof *p);
    RETURN_IF(!p, -ENOMEM, "distributed plan: out of memory");
    int rc = plan_build(p, m, rank, world, &o);
    if (rc < 0) {
        pagein_dist_plan_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void pagein_dist_plan_free(pagein_dist_plan *p) {
    if (!p) return;
    pi_free(p->reads);
    pi_free(p->pieces);
    pi_free(p);
}

size_t pagein_dist_plan_read_count(const pagein_dist_plan *p) { return p ? p->nreads : 0; }
const pagein_dist_read *pagein_dist_plan_read_at(const pagein_dist_plan *p, size_t i) {
    return p && i < p->nreads ? &p->reads[i] : NULL;
}
size_t pagein_dist_plan_piece_count(const pagein_dist_plan *p) { return p ? p->npieces : 0; }
const pagein_dist_piece *pagein_dist_plan_piece_at(const pagein_dist_plan *p, size_t i) {
    return p && i < p->npieces ? &p->pieces[i] : NULL;
}
uint64_t pagein_dist_plan_read_bytes(const pagein_dist_plan *p) { return p ? p->read_bytes : 0; }
