/* cmd_make_sample.c - `pagein make-sample OUT`: a llama-shaped model with
 * deterministic pseudo-random contents, written with
 * pagein_safetensors_write() and fill callbacks, so memory stays small
 * whatever the size. The shape is computed by sample_plan_make() alone, so
 * another format's writer (a `--format gguf` branch) can write the same
 * plan. */
#include "cli.h"
#include "make_sample_gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---- the plan: names and shapes of a llama-style checkpoint -------------- */

struct sample_tensor {
    char name[96];
    uint32_t ndim;
    uint64_t shape[2];
    int norm; /* RMSNorm weight: filled with ones */
};

struct sample_plan {
    uint32_t layers;
    uint64_t hidden, inter, kv_dim, vocab;
    pagein_dtype dtype;
    uint64_t params, bytes;
    size_t n;
    struct sample_tensor *t; /* malloc'd, n entries */
};

static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static void dims_for(uint64_t h, uint64_t vocab_opt, uint64_t *inter, uint64_t *kv, uint64_t *vocab) {
    *inter = round_up(h * 8 / 3, h >= 512 ? 256 : 64);
    *kv = h >= 256 ? h / 4 : h; /* grouped-query attention: 4 query heads per kv head */
    if (vocab_opt)
        *vocab = vocab_opt;
    else
        *vocab = h >= 512 ? 32000 : h >= 256 ? 8192 : h >= 128 ? 4096 : h >= 64 ? 1024 : 512;
}

static uint64_t layer_params(uint64_t h, uint64_t inter, uint64_t kv) {
    return 2 * h * h + 2 * kv * h + 3 * h * inter + 2 * h;
}

/* Chooses hidden size and layer count. layers/hidden/vocab 0 = choose:
 * hidden is the largest of 4096..32 that leaves room for at least 8 layers
 * (or for the given layer count) in target_bytes; layers then fill the
 * target. Returns 0 or -EINVAL (nothing fits). */
static int sample_plan_make(struct sample_plan *p, uint64_t target_bytes, uint32_t layers, uint64_t hidden,
                            uint64_t vocab_opt, pagein_dtype dtype) {
    memset(p, 0, sizeof *p);
    uint64_t esz = pagein_dtype_get(dtype)->bits / 8;
    uint64_t target = target_bytes / esz;
    static const uint64_t cands[] = {4096, 3072, 2048, 1024, 512, 256, 128, 64, 32};
    uint64_t inter = 0, kv = 0, vocab = 0;
    if (!hidden) {
        for (size_t c = 0; c < sizeof cands / sizeof cands[0]; c++) {
            uint64_t h = cands[c];
            dims_for(h, vocab_opt, &inter, &kv, &vocab);
            uint64_t base = 2 * vocab * h + h, lp = layer_params(h, inter, kv);
            uint32_t need = layers ? layers : 8;
            if (base + need * lp <= target || c + 1 == sizeof cands / sizeof cands[0]) {
                hidden = h;
                break;
            }
        }
    }
    dims_for(hidden, vocab_opt, &inter, &kv, &vocab);
    uint64_t base = 2 * vocab * hidden + hidden, lp = layer_params(hidden, inter, kv);
    if (!layers) {
        uint64_t l = target > base ? (target - base + lp / 2) / lp : 0;
        layers = (uint32_t)(l < 1 ? 1 : l > 100000 ? 100000 : l);
    }
    p->layers = layers;
    p->hidden = hidden;
    p->inter = inter;
    p->kv_dim = kv;
    p->vocab = vocab;
    p->dtype = dtype;
    p->n = 3 + 9 * (size_t)layers;
    p->t = calloc(p->n, sizeof *p->t);
    if (!p->t) return -ENOMEM;
    size_t k = 0;
#define ADD(nm_, d0, d1, nd, norm_)                                                 \
    do {                                                                            \
        struct sample_tensor *t_ = &p->t[k++];                                      \
        snprintf(t_->name, sizeof t_->name, "%s", nm_);                             \
        t_->ndim = nd, t_->shape[0] = d0, t_->shape[1] = d1, t_->norm = norm_;      \
    } while (0)
    ADD("model.embed_tokens.weight", vocab, hidden, 2, 0);
    static const char *const proj[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                       "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                       "mlp.down_proj"};
    for (uint32_t l = 0; l < layers; l++) {
        char nm[96];
        uint64_t shapes[7][2] = {{hidden, hidden}, {kv, hidden}, {kv, hidden}, {hidden, hidden},
                                 {inter, hidden},  {inter, hidden}, {hidden, inter}};
        for (int j = 0; j < 7; j++) {
            snprintf(nm, sizeof nm, "model.layers.%u.%s.weight", l, proj[j]);
            ADD(nm, shapes[j][0], shapes[j][1], 2, 0);
        }
        snprintf(nm, sizeof nm, "model.layers.%u.input_layernorm.weight", l);
        ADD(nm, hidden, 0, 1, 1);
        snprintf(nm, sizeof nm, "model.layers.%u.post_attention_layernorm.weight", l);
        ADD(nm, hidden, 0, 1, 1);
    }
    ADD("model.norm.weight", hidden, 0, 1, 1);
    ADD("lm_head.weight", vocab, hidden, 2, 0);
#undef ADD
    for (size_t i = 0; i < p->n; i++) {
        uint64_t ne = p->t[i].shape[0] * (p->t[i].ndim == 2 ? p->t[i].shape[1] : 1);
        p->params += ne;
    }
    p->bytes = p->params * esz;
    return 0;
}

/* ---- deterministic contents ---------------------------------------------- */

struct fill_ctx {
    uint64_t seed;
    uint64_t tensor;
    int norm;
    pagein_dtype dtype;
    struct cli_progress *progress;
    uint64_t *done;
};

/* Element e of tensor t: uniform in [-0.05, 0.05), or 1.0 for norms; the
 * same bytes for the same seed on every machine. */
static int fill(void *vctx, void *dst, uint64_t off, size_t len) {
    struct fill_ctx *c = vctx;
    uint32_t esz = pagein_dtype_get(c->dtype)->bits / 8;
    uint64_t e0 = off / esz;
    size_t n = len / esz;
    uint64_t base = c->seed ^ (c->tensor * 0xd1b54a32d192ed03ull);
    for (size_t i = 0; i < n; i++) {
        float v = 1.0f;
        if (!c->norm) {
            uint64_t h = make_sample_mix64(base + e0 + i);
            v = (float)((int32_t)(h >> 40) - (1 << 23)) * (0.05f / 8388608.0f);
        }
        if (c->dtype == PAGEIN_DTYPE_F32) {
            memcpy((char *)dst + 4 * i, &v, 4);
        } else {
            uint16_t b = c->dtype == PAGEIN_DTYPE_BF16 ? make_sample_bf16(v) : make_sample_f16(v, 1);
            memcpy((char *)dst + 2 * i, &b, 2);
        }
    }
    *c->done += len;
    cli_progress_update(c->progress, *c->done);
    return 0;
}

/* ---- the command ----------------------------------------------------------- */

static void usage(FILE *out) {
    fputs("usage: pagein make-sample OUT [--layers N] [--hidden H] [--vocab V]\n"
          "                          [--dtype bf16|f16|f32|q8_0] [--size 1.3G] [--seed S]\n"
          "                          [--align BYTES] [--format safetensors|gguf] [-q]\n"
          "\n"
          "Writes a llama-shaped safetensors model to OUT: model.embed_tokens, per layer\n"
          "q/k/v/o projections (grouped-query, kv = hidden/4), gate/up/down MLP\n"
          "projections (intermediate = 8/3 hidden rounded up) and two RMSNorm weights,\n"
          "then model.norm and lm_head, in the official writer's layout, written\n"
          "atomically (temporary file, fsync, rename). Contents are deterministic\n"
          "pseudo-random values in [-0.05, 0.05) (norms are 1.0) from --seed.\n"
          "\n"
          "  --size S     target file size in bytes (default 1.3e9, the bf16 inference case);\n"
          "               picks hidden and layers when they are not given. K, M, G, T\n"
          "               and KiB..TiB are powers of 1024 (1.3G = 1.40e9 bytes), KB..TB\n"
          "               powers of 1000 (1.3GB = the default), as in convert\n"
          "  --layers N   number of decoder layers\n"
          "  --hidden H   hidden size\n"
          "  --vocab V    vocabulary size (default from hidden, 32000 from 512 up)\n"
          "  --dtype T    bf16 (default), f16 or f32\n"
          "  --seed S     contents seed (default 0)\n"
          "  --align A    pad the header so data starts at a multiple of A (default 8; a\n"
          "               power of two from 8 to 2^30)\n"
          "  --format F   safetensors (default) or gguf: a GGUF v3 file as llama.cpp lays\n"
          "               it out (token_embd, blk.N.attn_q/k/v/output, ffn_gate/up/down,\n"
          "               attn_norm/ffn_norm, output_norm, output; general.architecture=llama,\n"
          "               llama.block_count, ... and a llama tokenizer vocabulary). GGUF\n"
          "               also takes --dtype q8_0 (norms stay f32; hidden a multiple of 32);\n"
          "               --align does not apply\n"
          "  -q           no summary line\n"
          "\n"
          "Exit status: 0 ok, 2 usage or I/O error.\n",
          out);
}

static int parse_u64(const char *s, uint64_t *v) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 0);
    if (errno || end == s || *end || s[0] == '-') return -1;
    *v = x;
    return 0;
}

static int make_sample_main(int argc, char **argv) {
    const char *out = NULL;
    uint64_t layers = 0, hidden = 0, vocab = 0, size = 0, seed = 0, align = 0;
    pagein_dtype dtype = PAGEIN_DTYPE_BF16;
    int quiet = 0, gguf = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (cli_is_help(a)) {
            usage(stdout);
            return EXIT_OK;
        } else if (strcmp(a, "-q") == 0) {
            quiet = 1;
            continue;
        } else if (a[0] != '-') {
            if (out) {
                cli_error("make-sample", 0, "one OUT only");
                return EXIT_USAGE;
            }
            out = a;
            continue;
        }
        if (!val) {
            cli_error("make-sample", 0, "option '%s' needs a value", a);
            return EXIT_USAGE;
        }
        i++;
        if (strcmp(a, "--layers") == 0) bad = parse_u64(val, &layers) || layers == 0 || layers > 100000;
        else if (strcmp(a, "--hidden") == 0) bad = parse_u64(val, &hidden) || hidden < 8 || hidden > 65536 || hidden % 8;
        else if (strcmp(a, "--vocab") == 0) bad = parse_u64(val, &vocab) || vocab == 0 || vocab > 10000000;
        else if (strcmp(a, "--size") == 0) bad = cli_parse_size(val, &size) != 0 || size == 0;
        else if (strcmp(a, "--seed") == 0) bad = parse_u64(val, &seed);
        else if (strcmp(a, "--align") == 0) bad = parse_u64(val, &align) || !cli_valid_align(align);
        else if (strcmp(a, "--dtype") == 0) {
            if (strcmp(val, "bf16") == 0) dtype = PAGEIN_DTYPE_BF16;
            else if (strcmp(val, "f16") == 0) dtype = PAGEIN_DTYPE_F16;
            else if (strcmp(val, "f32") == 0) dtype = PAGEIN_DTYPE_F32;
            else if (strcmp(val, "q8_0") == 0) dtype = PAGEIN_DTYPE_Q8_0;
            else bad = 1;
        } else if (strcmp(a, "--format") == 0) {
            if (strcmp(val, "gguf") == 0) gguf = 1;
            else if (strcmp(val, "safetensors") == 0) gguf = 0;
            else bad = 1;
        } else {
            cli_error("make-sample", 0, "unknown option '%s'", a);
            usage(stderr);
            return EXIT_USAGE;
        }
        if (bad) {
            cli_error("make-sample", 0, "bad value '%s' for %s (hidden: multiple of 8; align: power of two from 8 to 2^30)", val, a);
            return EXIT_USAGE;
        }
    }
    if (!out) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!size) size = 1300000000; /* 1.3 GB */
    if (gguf) {
        struct make_sample_gguf_args ga = {layers, hidden, vocab, size, seed, dtype, quiet};
        return make_sample_gguf(out, &ga);
    }
    if (dtype == PAGEIN_DTYPE_Q8_0) {
        cli_error("make-sample", 0, "--dtype q8_0 needs --format gguf");
        return EXIT_USAGE;
    }
    struct sample_plan plan;
    if (sample_plan_make(&plan, size, (uint32_t)layers, hidden, vocab, dtype) < 0) {
        cli_error("make-sample", 0, "out of memory");
        return EXIT_USAGE;
    }
    pagein_write_tensor *wt = calloc(plan.n, sizeof *wt);
    struct fill_ctx *ctx = calloc(plan.n, sizeof *ctx);
    if (!wt || !ctx) {
        free(wt), free(ctx), free(plan.t);
        cli_error("make-sample", 0, "out of memory");
        return EXIT_USAGE;
    }
    struct cli_progress prog;
    uint64_t done = 0;
    cli_progress_start(&prog, "make-sample", plan.bytes);
    for (size_t i = 0; i < plan.n; i++) {
        ctx[i] = (struct fill_ctx){seed, i, plan.t[i].norm, dtype, &prog, &done};
        wt[i] = (pagein_write_tensor){plan.t[i].name, dtype, plan.t[i].ndim, plan.t[i].shape, NULL, fill, &ctx[i]};
    }
    char desc[256];
    snprintf(desc, sizeof desc, "llama layers=%u hidden=%" PRIu64 " intermediate=%" PRIu64 " kv=%" PRIu64
             " vocab=%" PRIu64 " seed=%" PRIu64,
             plan.layers, plan.hidden, plan.inter, plan.kv_dim, plan.vocab, seed);
    const char *mk[] = {"format", "pagein.sample"}, *mv[] = {"pt", desc};
    pagein_write_opts o = PAGEIN_WRITE_OPTS_INIT;
    o.meta_keys = mk, o.meta_values = mv, o.n_meta = 2;
    o.align = align;
    double t0 = cli_now();
    int rc = pagein_safetensors_write(out, wt, plan.n, &o);
    double el = cli_now() - t0;
    cli_progress_end(&prog);
    if (rc < 0) {
        cli_error("make-sample", rc, "%s", out);
    } else if (!quiet) {
        char hb[32];
        printf("wrote %s: %u layers, hidden %" PRIu64 ", %zu tensors, %" PRIu64 " parameters, %s %s in %.2f s\n",
               out, plan.layers, plan.hidden, plan.n, plan.params, cli_human_bytes(plan.bytes, hb, sizeof hb),
               pagein_dtype_get(dtype)->name, el);
    }
    free(wt);
    free(ctx);
    free(plan.t);
    return rc < 0 ? EXIT_USAGE : EXIT_OK;
}

CLI_COMMAND(make_sample, "make-sample", "write a llama-shaped sample model (safetensors or GGUF)", make_sample_main)
