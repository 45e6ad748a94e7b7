/* test_seams_strategy.c - a strategy is one file and one line: this file
 * defines a test-only row (pi_strategy_test_noop, registered by its one
 * line in src/load/strategy.c's table, a weak reference that is NULL outside
 * the unit-test runner), and the tests open models through it end to end.
 * Nothing else in the library knows it exists. White-box (load.h). */
#include "test.h"

#include "../src/load/load.h"

#include <stdlib.h>

static int noop_starts;
static int noop_start(pagein_model *m) {
    (void)m;
    noop_starts++;
    return 0;
}

const struct pi_strategy pi_strategy_test_noop = {
    .name = "test-noop",
    .start = noop_start,
    .needs_map = 1,
    .flags = 0, /* memory like lazy's: mapped, paged in on demand */
    .summary = "test-only: maps, starts nothing",
};

static int write_model(const char *path) {
    static float a[64], b[64], c[16];
    for (int i = 0; i < 64; i++) a[i] = (float)i, b[i] = (float)(100 + i);
    for (int i = 0; i < 16; i++) c[i] = (float)(1000 + i);
    uint64_t s64[1] = {64}, s16[1] = {16};
    pagein_write_tensor t[3] = {
        {"model.layers.0.w", PAGEIN_DTYPE_F32, 1, s64, a, NULL, NULL},
        {"model.layers.1.w", PAGEIN_DTYPE_F32, 1, s64, b, NULL, NULL},
        {"lm_head.weight", PAGEIN_DTYPE_F32, 1, s16, c, NULL, NULL},
    };
    pagein_write_opts o = PAGEIN_WRITE_OPTS_INIT;
    return pagein_safetensors_write(path, t, 3, &o);
}

TEST(seam_strategy_row_by_name) {
    int id = pagein_strategy_from_name("test-noop");
    CHECK(id >= 0);
    CHECK_EQ(id, (int)pagein_strategy_count() - 1); /* the row after the public ones */
    CHECK_STR(pagein_strategy_name((pagein_strategy)id), "test-noop");
    CHECK_STR(pagein_strategy_summary((pagein_strategy)id), "test-only: maps, starts nothing");
    /* the public rows keep their ids */
    CHECK_EQ(pagein_strategy_from_name("read"), PAGEIN_STRATEGY_READ);
    CHECK_EQ(pagein_strategy_from_name("auto"), PAGEIN_STRATEGY_AUTO);
    return PASS;
}

TEST(seam_strategy_row_end_to_end) {
    const char *path = pt_tmppath("seam_strategy.safetensors");
    CHECK_OK(write_model(path));
    int id = pagein_strategy_from_name("test-noop");
    if (id < 0) return FAIL;
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = (pagein_strategy)id;
    pagein_model *m = NULL;
    noop_starts = 0;
    CHECK_OK(pagein_model_open(&m, path, &o));
    if (!m) return FAIL;
    CHECK_EQ(noop_starts, 1);
    CHECK_EQ(pagein_model_strategy(m, NULL), id);
    /* the calls after open ask the row: waits page in on demand, done
     * releases nothing without a budget, the bytes are the file's */
    CHECK_OK(pagein_layer_wait(m, 0));
    CHECK_OK(pagein_layer_wait(m, 1));
    const pagein_tensor *t = pagein_model_tensor_get(m, "model.layers.1.w");
    CHECK(t != NULL);
    if (t) {
        const void *d = NULL;
        CHECK_OK(pagein_model_tensor_data(m, t, &d));
        float v[64];
        if (d) memcpy(v, d, sizeof v);
        CHECK(d && v[0] == 100.0f && v[63] == 163.0f);
        CHECK_OK(pagein_tensor_wait(m, t));
    }
    CHECK_OK(pagein_layer_done(m, 0));
    CHECK_OK(pagein_model_load_tensors(m, NULL, 0));
    pagein_model_close(m);
    /* with a budget the same row releases behind the cursor */
    o.budget_bytes = 1;
    CHECK_OK(pagein_model_open(&m, path, &o));
    if (m) {
        CHECK_OK(pagein_layer_wait(m, 0));
        CHECK_OK(pagein_layer_done(m, 0));
        pagein_model_close(m);
    }
    return PASS;
}
