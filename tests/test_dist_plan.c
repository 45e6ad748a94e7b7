/* test_dist_plan.c - the distributed plan (src/dist/dist_plan.c): every byte
 * read by exactly one rank, the same shared reads on every rank, and TP
 * slices that, read with pagein_read_ranges, equal the slices of the data. */
#include "test.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#define H 12
#define F 20
#define V 37

static float wq[H * H], wo[H * H], wdown[H * F], wup[F * H], emb[V * H], norm[H];
static int16_t wk[H * H];

static const char *write_tiny(void) {
    for (unsigned i = 0; i < H * H; i++) wq[i] = (float)i, wo[i] = -(float)i, wk[i] = (int16_t)(i * 3);
    for (unsigned i = 0; i < H * F; i++) wdown[i] = (float)i + 0.5f, wup[i] = (float)i * 2;
    for (unsigned i = 0; i < V * H; i++) emb[i] = (float)i * 7;
    for (unsigned i = 0; i < H; i++) norm[i] = 1.0f + (float)i;
    static uint64_t shh[2] = {H, H}, sdown[2] = {H, F}, sup[2] = {F, H}, semb[2] = {V, H}, sn[1] = {H};
    pagein_write_tensor t[] = {
        {"model.embed_tokens.weight", PAGEIN_DTYPE_F32, 2, semb, emb, NULL, NULL},
        {"model.layers.0.self_attn.q_proj.weight", PAGEIN_DTYPE_F32, 2, shh, wq, NULL, NULL},
        {"model.layers.0.self_attn.k_proj.weight", PAGEIN_DTYPE_I16, 2, shh, wk, NULL, NULL},
        {"model.layers.0.self_attn.o_proj.weight", PAGEIN_DTYPE_F32, 2, shh, wo, NULL, NULL},
        {"model.layers.0.mlp.up_proj.weight", PAGEIN_DTYPE_F32, 2, sup, wup, NULL, NULL},
        {"model.layers.0.mlp.down_proj.weight", PAGEIN_DTYPE_F32, 2, sdown, wdown, NULL, NULL},
        {"model.norm.weight", PAGEIN_DTYPE_F32, 1, sn, norm, NULL, NULL},
    };
    const char *p = pt_tmppath("dist.safetensors");
    if (pagein_safetensors_write(p, t, sizeof t / sizeof t[0], NULL) < 0) return NULL;
    return p;
}

/* Executes every read of plan p that `rank` owns (private and broadcast)
 * into per-tensor buffers bufs[tensor]; EXCHANGE reads of every owner go to
 * stage[tensor] (whole tensors) at their rows, as if all ranks had sent
 * theirs. */
static int run_reads(const pagein_dist_plan *p, unsigned rank, int fd, uint8_t **bufs, uint8_t **stage) {
    size_t n = pagein_dist_plan_read_count(p), nr = 0;
    for (size_t i = 0; i < n; i++) {
        const pagein_dist_read *r = pagein_dist_plan_read_at(p, i);
        if (r->owner == rank || r->shared == PAGEIN_DIST_EXCHANGE) nr += r->count;
    }
    pagein_range *req = calloc(nr ? nr : 1, sizeof *req);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const pagein_dist_read *r = pagein_dist_plan_read_at(p, i);
        if (r->shared == PAGEIN_DIST_EXCHANGE) {
            uint64_t row = r->length / (r->row_stop - r->row_start);
            req[k++] = (pagein_range){0, r->offset, r->length, stage[r->tensor] + r->row_start * row};
            continue;
        }
        if (r->owner != rank) continue;
        for (uint64_t c = 0; c < r->count; c++)
            req[k++] = (pagein_range){0, r->offset + c * r->stride, r->length, bufs[r->tensor] + r->dst_offset + c * r->length};
    }
    int rc = nr ? pagein_read_ranges(&fd, 1, req, nr, NULL, NULL) : 0;
    free(req);
    return rc;
}

TEST(dist_plan_replicated_reads_each_byte_once) {
    const char *path = write_tiny();
    CHECK(path != NULL);
    pagein_model *m = NULL;
    CHECK_OK(pagein_model_open(&m, path, NULL));
    if (!m) return FAIL;
    size_t nt = pagein_model_tensor_count(m);
    uint64_t total = 0;
    for (size_t i = 0; i < nt; i++) total += pagein_model_tensor_at(m, i)->nbytes;
    int fd = open(path, O_RDONLY);
    for (unsigned world = 1; world <= 4; world++) {
        uint8_t *bufs[16] = {0};
        for (size_t i = 0; i < nt; i++) bufs[i] = calloc(1, pagein_model_tensor_at(m, i)->nbytes);
        pagein_dist_plan *p0 = NULL;
        pagein_dist_opts o = PAGEIN_DIST_OPTS_INIT;
        o.align = 64;
        CHECK_OK(pagein_dist_plan_new(&p0, m, 0, world, &o));
        uint64_t sum = 0;
        for (unsigned r = 0; r < world; r++) {
            pagein_dist_plan *p = NULL;
            CHECK_OK(pagein_dist_plan_new(&p, m, r, world, &o));
            if (!p || !p0) break;
            /* the shared reads are the same on every rank */
            CHECK_EQ(pagein_dist_plan_read_count(p), pagein_dist_plan_read_count(p0));
            for (size_t i = 0; i < pagein_dist_plan_read_count(p) && i < pagein_dist_plan_read_count(p0); i++)
                CHECK(memcmp(pagein_dist_plan_read_at(p, i), pagein_dist_plan_read_at(p0, i),
                             sizeof(pagein_dist_read)) == 0);
            CHECK_EQ(pagein_dist_plan_piece_count(p), nt);
            sum += pagein_dist_plan_read_bytes(p);
            /* balanced: within the alignment of total / world (plus one alignment of rounding) */
            CHECK(pagein_dist_plan_read_bytes(p) + 2 * 64 >= total / world);
            CHECK(pagein_dist_plan_read_bytes(p) <= total / world + 2 * 64);
            CHECK_OK(run_reads(p, r, fd, bufs, NULL));
            pagein_dist_plan_free(p);
        }
        CHECK_EQ(sum, total);
        /* all ranks' reads together rebuild every tensor */
        for (size_t i = 0; i < nt; i++) {
            const pagein_tensor *t = pagein_model_tensor_at(m, i);
            CHECK(memcmp(bufs[i], t->data, t->nbytes) == 0);
            free(bufs[i]);
        }
        pagein_dist_plan_free(p0);
    }
    close(fd);
    pagein_model_close(m);
    return PASS;
}

TEST(dist_plan_tp_slices) {
    const char *path = write_tiny();
    pagein_model *m = NULL;
    CHECK_OK(pagein_model_open(&m, path, NULL));
    if (!m) return FAIL;
    int fd = open(path, O_RDONLY);
    size_t nt = pagein_model_tensor_count(m);
    uint64_t total = 0;
    for (size_t i = 0; i < nt; i++) total += pagein_model_tensor_at(m, i)->nbytes;
    pagein_dist_opts o = PAGEIN_DIST_OPTS_INIT;
    o.mode = PAGEIN_DIST_TP;
    for (unsigned run = 0; run < 6; run++) {
        unsigned world = 2 + run % 3;
        o.flags = run < 3 ? 0 : PAGEIN_DIST_COLS_DIRECT;
        uint64_t sum = 0;
        for (unsigned r = 0; r < world; r++) {
            pagein_dist_plan *p = NULL;
            CHECK_OK(pagein_dist_plan_new(&p, m, r, world, &o));
            if (!p) break;
            sum += pagein_dist_plan_read_bytes(p);
            uint8_t *bufs[16] = {0}, *stage[16] = {0};
            for (size_t i = 0; i < nt; i++) {
                bufs[i] = calloc(1, pagein_model_tensor_at(m, i)->nbytes);
                stage[i] = calloc(1, pagein_model_tensor_at(m, i)->nbytes);
            }
            CHECK_OK(run_reads(p, r, fd, bufs, stage));
            for (size_t i = 0; i < pagein_dist_plan_read_count(p); i++) {
                const pagein_dist_read *x = pagein_dist_plan_read_at(p, i);
                CHECK(x->shared != PAGEIN_DIST_EXCHANGE || !(o.flags & PAGEIN_DIST_COLS_DIRECT));
                if (x->shared == PAGEIN_DIST_PRIVATE) CHECK_EQ(x->owner, r);
            }
            for (size_t i = 0; i < nt; i++) {
                const pagein_dist_piece *c = pagein_dist_plan_piece_at(p, i);
                const pagein_tensor *t = pagein_model_tensor_at(m, c->tensor);
                const char *name = t->name;
                int rows = strstr(name, "q_proj") || strstr(name, "k_proj") || strstr(name, "up_proj") ||
                           strstr(name, "embed_tokens");
                int cols = strstr(name, "o_proj") || strstr(name, "down_proj");
                CHECK_EQ(c->split, rows ? PAGEIN_SPLIT_ROWS : cols ? PAGEIN_SPLIT_COLS : PAGEIN_SPLIT_NONE);
                if (c->split == PAGEIN_SPLIT_NONE) continue;
                uint64_t d = t->shape[c->dim], e = t->nbytes / t->nelements;
                CHECK_EQ(c->start, r * d / world);
                CHECK_EQ(c->stop, (r + 1) * d / world);
                /* the bytes read equal the slice of the data */
                const uint8_t *src = t->data;
                if (c->split == PAGEIN_SPLIT_ROWS) {
                    uint64_t row = t->nbytes / d;
                    CHECK_EQ(c->nbytes, (c->stop - c->start) * row);
                    CHECK(memcmp(bufs[i], src + c->start * row, c->nbytes) == 0);
                } else {
                    uint64_t outer = t->nelements / d, w = (c->stop - c->start) * e;
                    CHECK_EQ(c->nbytes, outer * w);
                    /* direct: the slice itself; exchange: whole rows, all owners together */
                    int direct = (o.flags & PAGEIN_DIST_COLS_DIRECT) != 0;
                    for (uint64_t k = 0; k < outer; k++) {
                        if (direct) CHECK(memcmp(bufs[i] + k * w, src + k * d * e + c->start * e, w) == 0);
                        else CHECK(memcmp(stage[i] + k * d * e, src + k * d * e, d * e) == 0);
                    }
                }
            }
            for (size_t i = 0; i < nt; i++) free(bufs[i]), free(stage[i]);
            pagein_dist_plan_free(p);
        }
        CHECK_EQ(sum, total); /* storage serves every byte once */
    }
    close(fd);
    pagein_model_close(m);
    return PASS;
}

TEST(dist_plan_errors) {
    const char *path = write_tiny();
    pagein_model *m = NULL;
    CHECK_OK(pagein_model_open(&m, path, NULL));
    if (!m) return FAIL;
    pagein_dist_plan *p = NULL;
    CHECK_EQ(pagein_dist_plan_new(&p, m, 2, 2, NULL), PAGEIN_E_INVALID);
    CHECK_EQ(pagein_dist_plan_new(&p, m, 0, 0, NULL), PAGEIN_E_INVALID);
    pagein_dist_opts o = PAGEIN_DIST_OPTS_INIT;
    o.mode = (pagein_dist_mode)7;
    CHECK_EQ(pagein_dist_plan_new(&p, m, 0, 1, &o), PAGEIN_E_INVALID);
    pagein_dist_rule bad = {"*", (pagein_split)9};
    o.mode = PAGEIN_DIST_TP;
    o.rules = &bad;
    o.nrules = 1;
    CHECK_EQ(pagein_dist_plan_new(&p, m, 0, 1, &o), PAGEIN_E_INVALID);
    CHECK(p == NULL);
    pagein_model_close(m);
    /* a block-quantized tensor cannot be split; replicated it can be read */
    const char *q8 = pt_testdata("gguf/tinyllamas-stories-260k-q8_0.gguf");
    CHECK_OK(pagein_model_open(&m, q8, NULL));
    if (!m) return FAIL;
    pagein_dist_rule all = {"*", PAGEIN_SPLIT_COLS};
    o.rules = &all;
    CHECK_EQ(pagein_dist_plan_new(&p, m, 0, 2, &o), PAGEIN_E_UNSUPPORTED);
    CHECK(strstr(pagein_last_error_detail(), "cannot be split") != NULL);
    CHECK_OK(pagein_dist_plan_new(&p, m, 1, 2, NULL));
    CHECK(pagein_dist_plan_read_bytes(p) > 0);
    pagein_dist_plan_free(p);
    pagein_dist_plan_free(NULL);
    pagein_model_close(m);
    size_t n = 0;
    CHECK(pagein_dist_default_rules(&n) != NULL && n >= 9);
    return PASS;
}
