/* strategy.c - the strategy table: one row per strategy (name, what runs
 * after the model is open, whether it needs every file mapped, what its
 * memory means: load.h's PI_ST_* flags). Adding a strategy = its file
 * under src/load/ defining its row and one line in the table here (its
 * PAGEIN_STRATEGY_* id in pagein.h is its place in the table). Names
 * everywhere (CLI, bench, Python) come from this table through
 * pagein_strategy_name/_from_name and pagein_strategy_count. */
#include "load.h"

static const struct pi_strategy st_auto = {
    .name = "auto", .summary = "measure the storage and pick one of the others"};
static const struct pi_strategy st_lazy = {
    .name = "lazy", .needs_map = 1, .flags = PI_ST_HEADERS_ONLY, .summary = "map only: pages arrive on first touch"};
static const struct pi_strategy st_populate = {
    .name = "populate", .start = pi_model_populate_all, .needs_map = 1, .flags = PI_ST_RESIDENT | PI_ST_BLOCKS,
    .summary = "map and page everything in, in parallel"};
/* mapped files: the pager pages the mapping in; files without one
 * (remote): it reads each layer through the sources into anonymous memory
 * (pager.c, stream.c) */
static const struct pi_strategy st_prefetch = {
    .name = "prefetch", .start = pi_pager_start, .flags = PI_ST_BLOCKS_UNBUDGETED,
    .summary = "page layers in ahead of the consumer"};
static const struct pi_strategy st_read = {
    .name = "read", .start = pi_model_read_all, .flags = PI_ST_RESIDENT | PI_ST_PRIVATE,
    .summary = "explicit parallel reads into anonymous memory"};

/* A row the unit-test runner defines (tests/test_seams_strategy.c) to prove that a
 * strategy is one file and one line; absent (NULL) everywhere else. */
extern const struct pi_strategy pi_strategy_test_noop __attribute__((weak, visibility("hidden")));

/* Order = the pagein_strategy enum; rows that are NULL (an absent weak
 * test row) come last and are skipped. */
static const struct pi_strategy *const table[] = {
    &st_auto, &st_lazy, &st_populate, &st_prefetch, &st_read,
    &pi_strategy_test_noop,
};

size_t pagein_strategy_count(void) {
    size_t n = 0;
    while (n < PI_ARRAY_LEN(table) && table[n]) n++;
    return n;
}

const struct pi_strategy *pi_strategy_get(pagein_strategy s) {
    return (unsigned)s < pagein_strategy_count() ? table[s] : NULL;
}

const char *pagein_strategy_name(pagein_strategy s) {
    const struct pi_strategy *x = pi_strategy_get(s);
    return x ? x->name : "unknown";
}

int pagein_strategy_from_name(const char *name) {
    if (!name) return PAGEIN_E_NOT_FOUND;
    for (size_t i = 0; i < pagein_strategy_count(); i++)
        if (strcmp(name, table[i]->name) == 0) return (int)i;
    return PAGEIN_E_NOT_FOUND;
}

const char *pagein_strategy_summary(pagein_strategy s) {
    const struct pi_strategy *x = pi_strategy_get(s);
    return x ? x->summary : "unknown";
}
