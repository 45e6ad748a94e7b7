/* strategy.c - the strategy table: one row per strategy (name, what runs
 * after the model is open, whether it needs every file mapped). Adding a
 * strategy = its file under src/load/ and one row here (plus its
 * PAGEIN_STRATEGY_* id in pagein.h). Names everywhere (CLI, bench, Python)
 * come from this table through pagein_strategy_name/_from_name and
 * pagein_strategy_count. */
#include "load.h"

static int start_populate(pagein_model *m) { return pagein_model_load_tensors(m, NULL, 0); }

/* Order = the pagein_strategy enum. */
static const struct pi_strategy table[] = {
    {PAGEIN_STRATEGY_AUTO, "auto", NULL, 0, "measure the storage and pick one of the others"},
    {PAGEIN_STRATEGY_LAZY, "lazy", NULL, 1, "map only: pages arrive on first touch"},
    {PAGEIN_STRATEGY_POPULATE, "populate", start_populate, 1, "map and page everything in, in parallel"},
    /* mapped files: the pager pages the mapping in; files without one
     * (remote): it reads each layer through the sources into anonymous
     * memory (pager.c, stream.c) */
    {PAGEIN_STRATEGY_PREFETCH, "prefetch", pi_pager_start, 0, "page layers in ahead of the consumer"},
    {PAGEIN_STRATEGY_READ, "read", pi_model_read_all, 0, "explicit parallel reads into anonymous memory"},
};

const struct pi_strategy *pi_strategy_get(pagein_strategy s) {
    return (unsigned)s < PI_ARRAY_LEN(table) ? &table[s] : NULL;
}

const char *pagein_strategy_name(pagein_strategy s) {
    const struct pi_strategy *x = pi_strategy_get(s);
    return x ? x->name : "unknown";
}

int pagein_strategy_from_name(const char *name) {
    if (!name) return PAGEIN_E_NOT_FOUND;
    for (size_t i = 0; i < PI_ARRAY_LEN(table); i++)
        if (strcmp(name, table[i].name) == 0) return (int)table[i].id;
    return PAGEIN_E_NOT_FOUND;
}

size_t pagein_strategy_count(void) { return PI_ARRAY_LEN(table); }

const char *pagein_strategy_summary(pagein_strategy s) {
    const struct pi_strategy *x = pi_strategy_get(s);
    return x ? x->summary : "unknown";
}
