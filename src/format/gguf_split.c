/* gguf_split.c - split GGUF sets (PREFIX-00001-of-00003.gguf): shard names
 * from any shard's path, and the consistency check of the split.* keys.
 * Opening the files and merging their tables is the load engine's job
 * (pagein_model_open); it calls these two helpers. */
#include "format.h"

#include <stdio.h>

/* Parses "-NNNNN-of-MMMMM.gguf" at the end of the file name; returns the
 * prefix length (bytes of path before it) or -1. */
static long split_name(const char *path, unsigned *no, unsigned *count) {
    static const char tail[] = "-00000-of-00000.gguf";
    size_t tl = sizeof tail - 1, pl = strlen(path);
    if (pl < tl) return -1;
    const char *s = path + pl - tl;
    unsigned a = 0, b = 0;
    for (size_t i = 0; i < tl; i++) {
        if (tail[i] == '0') {
            if (s[i] < '0' || s[i] > '9') return -1;
            if (i < 6) a = a * 10 + (unsigned)(s[i] - '0');
            else b = b * 10 + (unsigned)(s[i] - '0');
        } else if (s[i] != tail[i]) {
            return -1;
        }
    }
    /* the prefix must not be empty and must stay inside the file name */
    size_t pre = pl - tl;
    if (pre == 0 || path[pre - 1] == '/') return -1;
    *no = a;
    *count = b;
    return (long)pre;
}

void pi_gguf_split_free_paths(char **paths, size_t n) {
    if (!paths) return;
    for (size_t i = 0; i < n; i++) pi_free(paths[i]);
    pi_free(paths);
}

int pi_gguf_split_paths(const char *path, char ***paths, size_t *n) {
    *paths = NULL;
    *n = 0;
    unsigned no, count;
    long pre = path ? split_name(path, &no, &count) : -1;
    if (pre < 0) return 0;
    if (no == 0 || count == 0 || no > count)
        return pi_err(PAGEIN_E_BAD_INDEX, "%s: names shard %u of %u (shards are numbered 1..count)", path, no, count);
    char **p = pi_calloc(count, sizeof *p);
    if (!p) return pi_err(-ENOMEM, "out of memory");
    size_t len = (size_t)pre + 21;
    for (unsigned i = 0; i < count; i++) {
        p[i] = pi_malloc(len);
        if (!p[i]) {
            pi_gguf_split_free_paths(p, count);
            return pi_err(-ENOMEM, "out of memory");
        }
        snprintf(p[i], len, "%.*s-%05u-of-%05u.gguf", (int)pre, path, i + 1, count);
    }
    *paths = p;
    *n = count;
    return 1;
}

/* Integer value of key in f: 1 found, 0 absent, <0 wrong type. */
static int get_int(const pagein_file *f, const char *key, int64_t *v, size_t shard) {
    const pagein_meta *m = pi_table_find_meta(&f->tab, key, strlen(key));
    if (!m) return 0;
    int rc = pagein_meta_get_i64(f, key, v);
    if (rc < 0) {
        char pre[64];
        snprintf(pre, sizeof pre, "shard %zu", shard + 1);
        pi_err_prefix(pre);
        return PAGEIN_E_BAD_INDEX;
    }
    return 1;
}

int pi_gguf_split_check(const pagein_file *const *files, size_t n) {
    if (!files || !n) return pi_err(PAGEIN_E_INVALID, "empty split set");
    int64_t tensors_key = -1;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const pagein_file *f = files[i];
        const char *p = f->path ? f->path : "?";
        int64_t no, count, tc;
        int hno = get_int(f, "split.no", &no, i);
        int hcount = get_int(f, "split.count", &count, i);
        int htc = get_int(f, "split.tensors.count", &tc, i);
        if (hno < 0 || hcount < 0 || htc < 0) return PAGEIN_E_BAD_INDEX;
        if (n > 1 && (!hno || !hcount))
            return pi_err(PAGEIN_E_BAD_INDEX, "%s (shard %zu of %zu): split.%s is missing", p, i + 1, n,
                          hno ? "count" : "no");
        if (hno && no != (int64_t)i)
            return pi_err(PAGEIN_E_BAD_INDEX, "%s (shard %zu of %zu): split.no is %lld, expected %zu", p, i + 1, n,
                          (long long)no, i);
        if (hcount && count != (int64_t)n)
            return pi_err(PAGEIN_E_BAD_INDEX, "%s (shard %zu of %zu): split.count is %lld, expected %zu", p, i + 1,
                          n, (long long)count, n);
        if (htc) {
            if (i > 0 && tensors_key < 0)
                return pi_err(PAGEIN_E_BAD_INDEX, "%s (shard %zu of %zu): split.tensors.count is set but shard 1 lacks it",
                              p, i + 1, n);
            if (tensors_key >= 0 && tc != tensors_key)
                return pi_err(PAGEIN_E_BAD_INDEX, "%s (shard %zu of %zu): split.tensors.count is %lld, shard 1 says %lld",
                              p, i + 1, n, (long long)tc, (long long)tensors_key);
            if (tc < 0)
                return pi_err(PAGEIN_E_BAD_INDEX, "%s: split.tensors.count is negative (%lld)", p, (long long)tc);
            tensors_key = tc;
        } else if (tensors_key >= 0) {
            return pi_err(PAGEIN_E_BAD_INDEX, "%s (shard %zu of %zu): split.tensors.count is missing", p, i + 1, n);
        }
        total += f->tab.n;
        for (size_t k = 0; k < i; k++)
            for (size_t j = 0; j < f->tab.n; j++) {
                const pagein_tensor *t = &f->tab.t[j];
                if (pi_table_find(&files[k]->tab, t->name, t->name_len))
                    return pi_err(PAGEIN_E_DUPLICATE, "tensor '%s' is in shard %zu and shard %zu", t->name, k + 1,
                                  i + 1);
            }
    }
    if (tensors_key >= 0 && (uint64_t)tensors_key != total)
        return pi_err(PAGEIN_E_BAD_INDEX, "split.tensors.count is %lld but the %zu shards hold %llu tensors",
                      (long long)tensors_key, n, (unsigned long long)total);
    return 0;
}
