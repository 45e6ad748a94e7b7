/* dscolumns.c - the one columns= rule of the dataset-format rows (see
 * dsformat.h, pi_ds_col_*):
 *
 *   A name selects the top-level field of that name, or a nested member by
 *   its dotted path through struct members ("messages.content": list and
 *   map levels are not named; a row may also accept the full path with
 *   them, as Parquet's "messages.list.element.content"). Everything under
 *   the field or member selected is read, nothing else of its column.
 *   Fields come in the shard's order (its schema's, its column list's,
 *   a WebDataset sample's "__key__" then its extensions as first seen),
 *   not the order asked, and a name given twice selects its field once.
 *   A name that selects nothing is PAGEIN_E_NOT_FOUND naming it and
 *   listing the names the shard has; a name two top-level fields carry
 *   is PAGEIN_E_INVALID naming both (which one is meant cannot be said).
 *
 * Every row calls these: the flat ones (lines, records, Megatron, MDS,
 * WebDataset) through pi_ds_col_flat, Arrow and Parquet through
 * pi_ds_col_hit and pi_ds_col_missing over their members' paths. */
#include "dsformat.h"

#include <stdio.h>

int pi_ds_col_hit(const char *have, const char *want) {
    size_t wl = strlen(want);
    return strncmp(have, want, wl) == 0 && (have[wl] == 0 || have[wl] == '.');
}

int pi_ds_col_missing(const struct pi_dsshard *sh, const char *want, const char *const *names, size_t n) {
    char list[600];
    size_t len = 0, shown = 0, at[sizeof list / 2]; /* a shown name takes 2 bytes or more */
    list[0] = 0;
    for (size_t i = 0; i < n; i++) {
        int dup = 0; /* rows may list a name once per leaf: compared with the shown ones only (linear in n) */
        for (size_t j = 0; j < shown && !dup; j++) dup = strcmp(names[i], names[at[j]]) == 0;
        if (dup) continue;
        size_t l = strlen(names[i]);
        if (len + l + 4 >= sizeof list - 40 || shown == PI_ARRAY_LEN(at)) {
            snprintf(list + len, sizeof list - len, ", ...");
            break;
        }
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", shown ? ", " : "", names[i]);
        at[shown++] = i;
    }
    return pi_ds_err(sh, PAGEIN_E_NOT_FOUND, UINT64_MAX, UINT64_MAX, want, "no such column (the shard has: %s)",
                     shown ? list : "no columns");
}

int pi_ds_col_flat(const struct pi_dsshard *sh, const struct pi_dsopen *a, const char *const *names, size_t n,
                   int *idx) {
    if (!a || !a->columns) {
        for (size_t i = 0; idx && i < n; i++) idx[i] = (int)i;
        return (int)n;
    }
    for (size_t k = 0; k < a->ncolumns; k++) { /* every name selects exactly one column */
        const char *want = a->columns[k];
        int hit = -1;
        for (size_t i = 0; i < n; i++) {
            if (strcmp(names[i], want) != 0) continue;
            if (hit >= 0)
                return pi_ds_err(sh, PAGEIN_E_INVALID, UINT64_MAX, UINT64_MAX, want,
                                 "names two columns (%d and %zu): select by a name that is one column's", hit, i);
            hit = (int)i;
        }
        if (hit < 0) return pi_ds_col_missing(sh, want, names, n);
    }
    int m = 0; /* the shard's order, each selected column once (a name given twice selects it once) */
    for (size_t i = 0; i < n; i++) {
        int sel = 0;
        for (size_t k = 0; k < a->ncolumns && !sel; k++) sel = strcmp(names[i], a->columns[k]) == 0;
        if (!sel) continue;
        if (idx) idx[m] = (int)i;
        m++;
    }
    return m;
}
