/* make_sample_gguf.c - `pagein make-sample --format gguf`: a llama-shaped
 * GGUF v3 file as llama.cpp's converter lays it out (token_embd, blk.N.*,
 * output_norm, output; llama.* hyperparameters; a llama tokenizer
 * vocabulary), written with the GGUF writer and fill callbacks so memory
 * stays small whatever the size. Data is F32, F16, BF16 or Q8_0 (norms stay
 * F32, as in real quantized files). Uses only <pagein.h>. */
#include "make_sample_gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct gfill {
    uint64_t seed, tensor;
    int norm;
    pagein_dtype dtype;
    struct cli_progress *progress;
    uint64_t *done;
};

static float value(const struct gfill *c, uint64_t e) {
    if (c->norm) return 1.0f;
    uint64_t h = make_sample_mix64((c->seed ^ (c->tensor * 0xd1b54a32d192ed03ull)) + e);
    return (float)((int32_t)(h >> 40) - (1 << 23)) * (0.05f / 8388608.0f);
}

/* Writer fill callback. For Q8_0, off and len are whole 34-byte blocks
 * except at chunk edges, so blocks are built one at a time into a scratch
 * block and copied. */
static int gfill_fn(void *vctx, void *dst, uint64_t off, size_t len) {
    struct gfill *c = vctx;
    uint8_t *out = dst;
    if (c->dtype == PAGEIN_DTYPE_Q8_0) {
        for (size_t i = 0; i < len;) {
            uint64_t at = off + i, blk = at / 34, in = at % 34;
            uint8_t b[34];
            float v[32], amax = 0;
            for (int k = 0; k < 32; k++) {
                v[k] = value(c, blk * 32 + (uint64_t)k);
                if (fabsf(v[k]) > amax) amax = fabsf(v[k]);
            }
            float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
            uint16_t dh = make_sample_f16(d, 0);
            memcpy(b, &dh, 2);
            for (int k = 0; k < 32; k++) b[2 + k] = (uint8_t)(int8_t)lrintf(v[k] * id);
            size_t n = (size_t)(34 - in) < len - i ? (size_t)(34 - in) : len - i;
            memcpy(out + i, b + in, n);
            i += n;
        }
    } else {
        uint32_t esz = pagein_dtype_get(c->dtype)->bits / 8;
        for (size_t i = 0; i < len / esz; i++) {
            float v = value(c, off / esz + i);
            if (c->dtype == PAGEIN_DTYPE_F32) {
                memcpy(out + 4 * i, &v, 4);
            } else {
                uint16_t h = c->dtype == PAGEIN_DTYPE_BF16 ? make_sample_bf16(v) : make_sample_f16(v, 0);
                memcpy(out + 2 * i, &h, 2);
            }
        }
    }
    *c->done += len;
    cli_progress_update(c->progress, *c->done);
    return 0;
}

struct gt {
    char name[64];
    uint32_t ndim;
    uint64_t shape[2];
    int norm;
};

static uint64_t rup(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

int make_sample_gguf(const char *out, const struct make_sample_gguf_args *a) {
    pagein_dtype dt = a->dtype;
    double esz = dt == PAGEIN_DTYPE_Q8_0 ? 34.0 / 32.0 : pagein_dtype_get(dt)->bits / 8.0;
    uint64_t hidden = a->hidden, layers = a->layers, vocab = a->vocab;
    uint64_t target = (uint64_t)((double)a->size / esz);
    static const uint64_t cands[] = {4096, 3072, 2048, 1024, 512, 256, 128, 64, 32};
    uint64_t inter = 0, kv = 0;
#define DIMS(h)                                                                                 \
    do {                                                                                        \
        inter = rup((h) * 8 / 3, (h) >= 512 ? 256 : 64);                                        \
        kv = (h) >= 256 ? (h) / 4 : (h);                                                        \
        if (!a->vocab) vocab = (h) >= 512 ? 32000 : (h) >= 256 ? 8192 : (h) >= 128 ? 4096 : 512; \
    } while (0)
    if (!hidden) {
        for (size_t c = 0; c < sizeof cands / sizeof cands[0]; c++) {
            uint64_t h = cands[c];
            DIMS(h);
            uint64_t base = 2 * vocab * h + h, lp = 2 * h * h + 2 * kv * h + 3 * h * inter + 2 * h;
            if (base + (layers ? layers : 8) * lp <= target || c + 1 == sizeof cands / sizeof cands[0]) {
                hidden = h;
                break;
            }
        }
    }
    DIMS(hidden);
#undef DIMS
    uint64_t base = 2 * vocab * hidden + hidden, lp = 2 * hidden * hidden + 2 * kv * hidden + 3 * hidden * inter + 2 * hidden;
    if (!layers) {
        uint64_t l = target > base ? (target - base + lp / 2) / lp : 0;
        layers = l < 1 ? 1 : l > 100000 ? 100000 : l;
    }
    if (dt == PAGEIN_DTYPE_Q8_0 && (hidden % 32 || inter % 32)) {
        cli_error("make-sample", 0, "Q8_0 needs a hidden size that is a multiple of 32 (got %" PRIu64 ")", hidden);
        return EXIT_USAGE;
    }
    size_t n = 3 + 9 * (size_t)layers;
    struct gt *t = calloc(n, sizeof *t);
    pagein_write_tensor *wt = calloc(n, sizeof *wt);
    struct gfill *fc = calloc(n, sizeof *fc);
    char **toks = calloc(vocab, sizeof *toks);
    float *scores = calloc(vocab, sizeof *scores);
    int32_t *ttype = calloc(vocab, sizeof *ttype);
    pagein_gguf_writer *w = NULL;
    int rc = (!t || !wt || !fc || !toks || !scores || !ttype) ? -ENOMEM : 0;
    size_t k = 0;
#define ADD(d0, d1, nd, norm_, ...)                                              \
    do {                                                                         \
        snprintf(t[k].name, sizeof t[k].name, __VA_ARGS__);                      \
        t[k].ndim = nd, t[k].shape[0] = d0, t[k].shape[1] = d1, t[k].norm = norm_; \
        k++;                                                                     \
    } while (0)
    if (rc == 0) {
        ADD(vocab, hidden, 2, 0, "token_embd.weight");
        for (uint64_t l = 0; l < layers; l++) {
            ADD(hidden, 0, 1, 1, "blk.%" PRIu64 ".attn_norm.weight", l);
            ADD(hidden, hidden, 2, 0, "blk.%" PRIu64 ".attn_q.weight", l);
            ADD(kv, hidden, 2, 0, "blk.%" PRIu64 ".attn_k.weight", l);
            ADD(kv, hidden, 2, 0, "blk.%" PRIu64 ".attn_v.weight", l);
            ADD(hidden, hidden, 2, 0, "blk.%" PRIu64 ".attn_output.weight", l);
            ADD(hidden, 0, 1, 1, "blk.%" PRIu64 ".ffn_norm.weight", l);
            ADD(inter, hidden, 2, 0, "blk.%" PRIu64 ".ffn_gate.weight", l);
            ADD(inter, hidden, 2, 0, "blk.%" PRIu64 ".ffn_up.weight", l);
            ADD(hidden, inter, 2, 0, "blk.%" PRIu64 ".ffn_down.weight", l);
        }
        ADD(hidden, 0, 1, 1, "output_norm.weight");
        ADD(vocab, hidden, 2, 0, "output.weight");
    }
#undef ADD
    if (rc == 0) rc = pagein_gguf_writer_new(&w, NULL);
    uint32_t heads = hidden >= 64 ? (uint32_t)(hidden / 64) : 1;
    uint32_t file_type = dt == PAGEIN_DTYPE_F32 ? 0 : dt == PAGEIN_DTYPE_F16 ? 1 : dt == PAGEIN_DTYPE_Q8_0 ? 7 : 32;
    char desc[160];
    snprintf(desc, sizeof desc, "pagein sample llama layers=%" PRIu64 " hidden=%" PRIu64 " seed=%" PRIu64, layers,
             hidden, a->seed);
    if (rc == 0) rc = pagein_gguf_set_str(w, "general.architecture", "llama", 5);
    if (rc == 0) rc = pagein_gguf_set_str(w, "general.name", desc, strlen(desc));
    if (rc == 0) rc = pagein_gguf_set_u32(w, "general.file_type", file_type);
    if (rc == 0 && dt == PAGEIN_DTYPE_Q8_0) rc = pagein_gguf_set_u32(w, "general.quantization_version", 2);
    if (rc == 0) rc = pagein_gguf_set_u32(w, "llama.block_count", (uint32_t)layers);
    if (rc == 0) rc = pagein_gguf_set_u32(w, "llama.context_length", 2048);
    if (rc == 0) rc = pagein_gguf_set_u32(w, "llama.embedding_length", (uint32_t)hidden);
    if (rc == 0) rc = pagein_gguf_set_u32(w, "llama.feed_forward_length", (uint32_t)inter);
    if (rc == 0) rc = pagein_gguf_set_u32(w, "llama.attention.head_count", heads);
    if (rc == 0) rc = pagein_gguf_set_u32(w, "llama.attention.head_count_kv", (uint32_t)(heads * kv / hidden ? heads * kv / hidden : 1));
    if (rc == 0) rc = pagein_gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    if (rc == 0) rc = pagein_gguf_set_u32(w, "llama.rope.dimension_count", (uint32_t)(hidden / heads));
    if (rc == 0) rc = pagein_gguf_set_str(w, "tokenizer.ggml.model", "llama", 5);
    for (uint64_t i = 0; rc == 0 && i < vocab; i++) {
        char buf[32];
        if (i == 0) snprintf(buf, sizeof buf, "<unk>");
        else if (i == 1) snprintf(buf, sizeof buf, "<s>");
        else if (i == 2) snprintf(buf, sizeof buf, "</s>");
        else snprintf(buf, sizeof buf, "tok%" PRIu64, i);
        toks[i] = strdup(buf);
        if (!toks[i]) rc = -ENOMEM;
        scores[i] = -(float)i;
        ttype[i] = i < 3 ? (i ? 3 : 2) : 1;
    }
    if (rc == 0) rc = pagein_gguf_set_str_array(w, "tokenizer.ggml.tokens", (const char *const *)toks, NULL, vocab);
    if (rc == 0) rc = pagein_gguf_set_array(w, "tokenizer.ggml.scores", PAGEIN_META_F32, scores, vocab);
    if (rc == 0) rc = pagein_gguf_set_array(w, "tokenizer.ggml.token_type", PAGEIN_META_I32, ttype, vocab);
    if (rc == 0) rc = pagein_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    if (rc == 0) rc = pagein_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    if (rc == 0) rc = pagein_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    struct cli_progress prog;
    uint64_t done = 0, total = 0, params = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        pagein_dtype tdt = t[i].norm ? PAGEIN_DTYPE_F32 : dt;
        uint64_t ne = t[i].shape[0] * (t[i].ndim == 2 ? t[i].shape[1] : 1), nb;
        params += ne;
        if (pagein_dtype_nbytes(tdt, ne, &nb) == 0) total += nb;
        fc[i] = (struct gfill){a->seed, i, t[i].norm, tdt, &prog, &done};
        wt[i] = (pagein_write_tensor){t[i].name, tdt, t[i].ndim, t[i].shape, NULL, gfill_fn, &fc[i]};
        rc = pagein_gguf_add_tensor(w, &wt[i]);
    }
    double t0 = cli_now();
    if (rc == 0) {
        cli_progress_start(&prog, "make-sample", total);
        rc = pagein_gguf_write(w, out);
        cli_progress_end(&prog);
    }
    if (rc < 0) {
        cli_error("make-sample", rc, "%s", out);
    } else if (!a->quiet) {
        char hb[32];
        printf("wrote %s: GGUF v3, %" PRIu64 " layers, hidden %" PRIu64 ", %zu tensors, %" PRIu64
               " parameters, %s %s in %.2f s\n",
               out, layers, hidden, n, params, cli_human_bytes(total, hb, sizeof hb), pagein_dtype_get(dt)->name,
               cli_now() - t0);
    }
    pagein_gguf_writer_free(w);
    for (uint64_t i = 0; toks && i < vocab; i++) free(toks[i]);
    free(toks), free(scores), free(ttype), free(t), free(wt), free(fc);
    return rc < 0 ? EXIT_USAGE : EXIT_OK;
}
