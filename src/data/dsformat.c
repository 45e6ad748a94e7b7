/* dsformat.c - the dataset-format table (dsformat.h): the rows, shards
 * over sources or memory, groups built over locate()+sample() for rows
 * whose samples are byte extents, and the walk every fuzz target runs.
 * What the rows call (errors, columns, the cached index) is dsrow.c, below
 * the rows: the table names them, they never call back up into it. */
#include "dsformat.h"
#include "../core/endian.h"
#include "../io/io.h"
#include "dsopenset.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>


extern const struct pi_dsformat pi_dsformat_arrow; /* ds_arrow.c */
/* A row compiled into the unit-test runner only (tests/test_seams_dsformat.c):
 * a new format is one file and one line; absent (NULL: the table ends there)
 * everywhere else. */
extern const struct pi_dsformat pi_dsformat_test_fake __attribute__((weak, visibility("hidden")));

/* Detection order: content signatures first; names decide ties. */
const struct pi_dsformat *const pi_dsformats[] = {
    &pi_dsformat_arrow,
    &pi_dsformat_mds,
    &pi_dsformat_webdataset,
    &pi_dsformat_megatron,
    &pi_dsformat_lines,
    &pi_dsformat_records, /* never detected: only by name or pagein_dataset_open_records */
    &pi_dsformat_parquet,
    &pi_dsformat_test_fake, /* last: when absent it is the table's end */
    NULL,
};

const struct pi_dsformat *pi_dsformat_by_name(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; pi_dsformats[i]; i++) {
        if (strcmp(pi_dsformats[i]->name, name) == 0) return pi_dsformats[i];
        for (const char *const *a = pi_dsformats[i]->aliases; a && *a; a++)
            if (strcmp(*a, name) == 0) return pi_dsformats[i];
    }
    return NULL;
}

static int local_exists(const char *path) { return access(path, R_OK) == 0; }

int pi_ds_companion(const struct pi_dsformat *fmt, const char *name, int local, const struct pi_dsformat **row,
                    char **shard) {
    *shard = NULL;
    for (size_t i = 0; pi_dsformats[i]; i++) {
        const struct pi_dsformat *f = pi_dsformats[i];
        if ((fmt && f != fmt) || !f->companion) continue;
        char *s = NULL;
        int c = f->companion(name, local ? local_exists : NULL, &s);
        if (c < 0) return c;
        if (c > 0 || fmt) {
            *row = f;
            *shard = s;
            return fmt ? PI_MAX(c, 1) : c;
        }
        pi_free(s);
    }
    return 0;
}

int pi_ds_detect_name(const char *name, int local, const struct pi_dsformat **row) {
    char *shard = NULL;
    int best = pi_ds_companion(NULL, name, local, row, &shard);
    pi_free(shard);
    if (best != 0) return best;
    for (size_t i = 0; pi_dsformats[i]; i++) {
        const struct pi_dsformat *f = pi_dsformats[i];
        int sc = f->detect ? f->detect(name, NULL, 0, NULL, 0, 0) : 0;
        if (sc > best) best = sc, *row = f;
    }
    return best;
}

/* ---- the table for tools and bindings (pagein.h) ----------------------------- */

size_t pagein_dataset_format_count(void) {
    size_t n = 0;
    while (pi_dsformats[n]) n++;
    return n;
}

int pagein_dataset_format_get(size_t i, pagein_dataset_format_info *info) {
    pi_err_clear();
    RETURN_IF(!info, PAGEIN_E_INVALID, "dataset_format_get: NULL argument");
    RETURN_IF(i >= pagein_dataset_format_count(), PAGEIN_E_RANGE, "dataset_format_get: row %zu of %zu", i,
              pagein_dataset_format_count());
    static const char *const none[] = {NULL};
    const struct pi_dsformat *f = pi_dsformats[i];
    *info = (pagein_dataset_format_info){
        .name = f->name,
        .aliases = f->aliases ? f->aliases : none,
        .suffixes = f->suffixes ? f->suffixes : none,
        .index_names = f->index_names ? f->index_names : none,
        .content = f->head_bytes || f->tail_bytes,
        .companion = f->companion != NULL,
    };
    return 0;
}

int pagein_dataset_detect_name(const char *name, char *row, size_t cap) {
    pi_err_clear();
    RETURN_IF(!name || (!row && cap), PAGEIN_E_INVALID, "dataset_detect_name: NULL argument");
    const struct pi_dsformat *f = NULL;
    int sc = pi_ds_detect_name(name, !pi_source_is_remote(name), &f);
    if (sc < 0) return sc;
    if (cap) snprintf(row, cap, "%s", sc > 0 && f ? f->name : "");
    return sc > 0;
}

/* ---- a source over memory (fuzz targets, tests, decompressed images) ---- */

static int mem_read(struct pi_source *s, void *buf, uint64_t len, uint64_t off) {
    if (off > s->size || len > s->size - off)
        return pi_err(PAGEIN_E_TRUNCATED, "%s: read [%" PRIu64 ", +%" PRIu64 ") past the end (%" PRIu64 " bytes)",
                      s->name, off, len, s->size);
    if (len) memcpy(buf, (const uint8_t *)s->impl + off, (size_t)len);
    return 0;
}
static int mem_match(const char *uri) {
    (void)uri;
    return 0;
}
static const struct pi_source_ops mem_ops = {.name = "memory", .match = mem_match, .read = mem_read};

static int mem_source(struct pi_source **out, const void *buf, size_t len, const char *name) {
    struct pi_source *s = pi_calloc(1, sizeof *s);
    if (!s) return pi_err(-ENOMEM, "out of memory");
    const char *nm = name ? name : "<memory>";
    s->name = pi_strndup(nm, strlen(nm));
    if (!s->name) {
        pi_free(s);
        return pi_err(-ENOMEM, "out of memory");
    }
    s->ops = &mem_ops;
    s->fd = -1;
    s->size = len;
    s->impl = (void *)buf;
    s->facts.storage = PI_STORAGE_MEMORY;
    s->facts.rotational = -1;
    *out = s;
    return 0;
}

/* ---- groups built over locate() + sample() ------------------------------- */

struct gen_group {
    uint64_t first, count, off, len;
};
struct gen {
    struct gen_group *g;
    size_t n;
};

static int gen_build(struct pi_dsshard *sh, uint64_t group_bytes) {
    struct gen *G = pi_calloc(1, sizeof *G);
    if (!G) return pi_err(-ENOMEM, "%s: out of memory", sh->name);
    sh->gen = G;
    size_t cap = 0;
    uint64_t lo = 0, hi = 0;
    struct gen_group *cur = NULL;
    for (uint64_t i = 0; i < sh->nsamples; i++) {
        uint64_t off, len;
        FORWARD_IF(sh->fmt->locate(sh, i, &off, &len));
        if (off > sh->src->size || len > sh->src->size - off)
            return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, i, NULL,
                             "[%" PRIu64 ", +%" PRIu64 ") past the end of the shard (%" PRIu64 " bytes)", off, len,
                             sh->src->size);
        if (cur) {
            uint64_t nlo = len ? PI_MIN(lo, off) : lo, nhi = len ? PI_MAX(hi, off + len) : hi;
            if (cur->len == 0) nlo = off, nhi = off + len;
            /* extend while the group stays one compact extent */
            if (nhi - nlo <= group_bytes && nhi - nlo <= (hi - lo) + len + (64u << 10)) {
                lo = nlo, hi = nhi;
                cur->off = lo;
                cur->len = hi - lo;
                cur->count++;
                continue;
            }
        }
        FORWARD_IF(pi_grow((void **)&G->g, &cap, G->n + 1, sizeof *G->g));
        cur = &G->g[G->n++];
        lo = off, hi = off + len;
        *cur = (struct gen_group){i, 1, off, len};
    }
    sh->ngroups = G->n;
    return 0;
}

int pi_ds_group(const struct pi_dsshard *sh, uint64_t g, struct pi_dsgroupinfo *gi) {
    if (g >= sh->ngroups)
        return pi_ds_err(sh, PAGEIN_E_RANGE, g, UINT64_MAX, NULL, "no such group (%" PRIu64 ")", sh->ngroups);
    if (sh->gen) {
        const struct gen *G = sh->gen;
        *gi = (struct pi_dsgroupinfo){G->g[g].first, G->g[g].count, G->g[g].len};
        return 0;
    }
    return sh->fmt->group(sh, g, gi);
}

int pi_ds_ranges(const struct pi_dsshard *sh, uint64_t g, struct pi_dsrange *r, size_t cap) {
    if (sh->gen) {
        const struct gen *G = sh->gen;
        if (g >= G->n) return pi_ds_err(sh, PAGEIN_E_RANGE, g, UINT64_MAX, NULL, "no such group");
        if (G->g[g].len == 0) return 0;
        if (cap >= 1) r[0] = (struct pi_dsrange){G->g[g].off, G->g[g].len};
        return 1;
    }
    return sh->fmt->ranges(sh, g, r, cap);
}

int pi_ds_decode(const struct pi_dsshard *sh, struct pi_dsgroup *grp) {
    if (sh->gen) {
        const struct gen *G = sh->gen;
        size_t want = G->g[grp->g].len ? 1 : 0;
        if (grp->nbufs != want || (want && grp->bufs[0].len != G->g[grp->g].len))
            return pi_ds_err(sh, PAGEIN_E_INVALID, grp->g, UINT64_MAX, NULL, "decode given %zu buffers", grp->nbufs);
        return 0;
    }
    return sh->fmt->decode(sh, grp);
}

int pi_ds_fields(const struct pi_dsshard *sh, const struct pi_dsgroup *grp, uint64_t i, struct pi_dsfield *f,
                 size_t cap) {
    if (i >= grp->info.count)
        return pi_ds_err(sh, PAGEIN_E_RANGE, grp->g, i, NULL, "sample past the group's %" PRIu64, grp->info.count);
    if (sh->gen) {
        const struct gen *G = sh->gen;
        uint64_t id = grp->info.first + i, off, len;
        FORWARD_IF(sh->fmt->locate(sh, id, &off, &len));
        const struct gen_group *gg = &G->g[grp->g];
        if (len && (off < gg->off || off + len > gg->off + gg->len))
            return pi_ds_err(sh, PAGEIN_E_FORMAT, grp->g, id, NULL, "outside its group");
        const uint8_t *p = len ? grp->bufs[0].p + (off - gg->off) : (const uint8_t *)"";
        return sh->fmt->sample(sh, id, p, len, f, cap);
    }
    return sh->fmt->fields(sh, grp, i, f, cap);
}

void pi_ds_group_free(const struct pi_dsshard *sh, struct pi_dsgroup *grp) {
    if (!sh->gen && sh->fmt->group_free && grp->impl) sh->fmt->group_free(sh, grp);
    grp->impl = NULL;
}

/* ---- shards ---------------------------------------------------------------- */

void pi_ds_shard_close(struct pi_dsshard *sh) {
    if (!sh) return;
    if (sh->fmt && sh->fmt->close && sh->impl) sh->fmt->close(sh);
    if (sh->gen) {
        pi_free(((struct gen *)sh->gen)->g);
        pi_free(sh->gen);
    }
    pi_source_close(sh->src);
    pi_free(sh);
}

static int shard_finish_open(struct pi_dsshard *sh, const struct pi_dsopen *a) {
    struct pi_dsopen none = {0};
    if (!a) a = &none;
    int rc = sh->fmt->open(sh, a);
    if (rc < 0) {
        sh->impl = NULL;
        return rc;
    }
    if (sh->ngroups == 0 && sh->nsamples > 0) {
        if (!sh->fmt->locate || !sh->fmt->sample)
            return pi_ds_err(sh, PAGEIN_E_INVALID, UINT64_MAX, UINT64_MAX, NULL, "row %s has neither path",
                             sh->fmt->name);
        FORWARD_IF(gen_build(sh, a->group_bytes ? a->group_bytes : (4u << 20)));
    }
    return 0;
}

int pi_ds_open_memory(struct pi_dsshard **out, const struct pi_dsformat *fmt, const void *buf, size_t len,
                      const char *name, const struct pi_dsopen *a) {
    struct pi_dsshard *sh = pi_calloc(1, sizeof *sh);
    if (!sh) return pi_err(-ENOMEM, "out of memory");
    int rc = mem_source(&sh->src, buf, len, name);
    if (rc == 0) {
        sh->fmt = fmt;
        sh->name = sh->src->name;
        rc = shard_finish_open(sh, a);
    }
    if (rc < 0) {
        pi_ds_shard_close(sh);
        return rc;
    }
    *out = sh;
    return 0;
}

/* Reads head/tail bytes of src and asks every row; best score wins. */
int pagein_dataset_detect(const char *uri, char *name, size_t cap) {
    pi_err_clear();
    RETURN_IF(!uri || (!name && cap), PAGEIN_E_INVALID, "dataset_detect: NULL argument");
    struct pi_source *src = NULL;
    FORWARD_IF(pi_source_open(&src, uri, 0));
    int score = 0;
    const struct pi_dsformat *f = pi_ds_detect(src, uri, &score);
    pi_source_close(src);
    if (!f) score = 0;
    if (cap) snprintf(name, cap, "%s", f ? f->name : "");
    return score;
}

const struct pi_dsformat *pi_ds_detect(struct pi_source *src, const char *name, int *score) {
    uint32_t hb = 0, tb = 0;
    for (size_t i = 0; pi_dsformats[i]; i++) {
        hb = PI_MAX(hb, pi_dsformats[i]->head_bytes);
        tb = PI_MAX(tb, pi_dsformats[i]->tail_bytes);
    }
    uint64_t nh = PI_MIN((uint64_t)hb, src->size), nt = PI_MIN((uint64_t)tb, src->size);
    uint8_t *h = pi_malloc(nh + nt + 1);
    if (!h) return NULL;
    uint8_t *t = h + nh;
    const struct pi_dsformat *best = NULL;
    int bs = 0;
    if ((!nh || pi_source_read(src, h, nh, 0) == 0) && (!nt || pi_source_read(src, t, nt, src->size - nt) == 0)) {
        for (size_t i = 0; pi_dsformats[i]; i++) {
            const struct pi_dsformat *f = pi_dsformats[i];
            if (!f->detect) continue;
            size_t th = PI_MIN(nh, (uint64_t)f->head_bytes), tt = PI_MIN(nt, (uint64_t)f->tail_bytes);
            int s = f->detect(name, h, th, tt ? t + (nt - tt) : NULL, tt, src->size);
            if (s > bs) bs = s, best = f;
        }
    }
    pi_free(h);
    if (score) *score = bs;
    return best;
}

int pi_ds_shard_open(struct pi_dsshard **out, const struct pi_dsformat *fmt, const char *uri,
                     const struct pi_dsopen *a) {
    struct pi_dsshard *sh = pi_calloc(1, sizeof *sh);
    if (!sh) return pi_err(-ENOMEM, "%s: out of memory", uri);
    struct pi_dsopenset *set = a ? a->openset : NULL;
    int rc = set ? pi_dsopenset_source(&sh->src, set, uri) : pi_source_open(&sh->src, uri, 0);
    if (rc == 0) {
        sh->name = sh->src->name;
        if (!fmt) {
            pi_err_clear();
            fmt = pi_ds_detect(sh->src, uri, NULL);
            if (!fmt) rc = pi_err(PAGEIN_E_BAD_MAGIC, "%s: not a dataset shard in any format pagein reads", uri);
        }
        sh->fmt = fmt;
        if (rc == 0) rc = shard_finish_open(sh, a);
        if (set) pi_dsopenset_opened(sh->src); /* a bounded set may close it now */
    }
    if (rc < 0) {
        pi_ds_shard_close(sh);
        return rc;
    }
    *out = sh;
    return 0;
}

/* ---- the walk ----------------------------------------------------------- */

int pi_ds_walk(const struct pi_dsshard *sh) {
    struct pi_dsrange rr[64];
    struct pi_dsfield ff[64];
    struct pi_dsbuf bb[64];
    uint8_t *own[64];
    int rc = 0;
    for (uint64_t g = 0; g < sh->ngroups && rc == 0; g++) {
        struct pi_dsgroup grp = {.g = g};
        if ((rc = pi_ds_group(sh, g, &grp.info)) < 0) break;
        int n = pi_ds_ranges(sh, g, rr, PI_ARRAY_LEN(rr));
        if (n < 0) return n;
        if ((size_t)n > PI_ARRAY_LEN(rr))
            return pi_ds_err(sh, PAGEIN_E_LIMIT, g, UINT64_MAX, NULL, "%d ranges (the walk reads 64)", n);
        int k = 0;
        for (; k < n; k++) {
            own[k] = pi_malloc(rr[k].len ? rr[k].len : 1);
            if (!own[k]) {
                rc = pi_err(-ENOMEM, "%s: out of memory for %" PRIu64 " bytes", sh->name, rr[k].len);
                break;
            }
            if ((rc = pi_source_read(sh->src, own[k], rr[k].len, rr[k].off)) < 0) {
                k++;
                break;
            }
            bb[k] = (struct pi_dsbuf){own[k], rr[k].len};
        }
        if (rc == 0) {
            grp.bufs = bb;
            grp.nbufs = (size_t)n;
            rc = pi_ds_decode(sh, &grp);
            for (uint64_t i = 0; rc == 0 && i < grp.info.count; i++) {
                int nf = pi_ds_fields(sh, &grp, i, ff, PI_ARRAY_LEN(ff));
                if (nf < 0) rc = nf;
                for (int j = 0; rc == 0 && j < nf && j < (int)PI_ARRAY_LEN(ff); j++) {
                    volatile uint8_t x = 0; /* touch every byte a field claims */
                    const uint8_t *p = ff[j].data;
                    for (uint64_t b = 0; p && b < ff[j].nbytes; b += 997) x ^= p[b];
                    if (p && ff[j].nbytes) x ^= p[ff[j].nbytes - 1];
                    (void)x;
                }
            }
            pi_ds_group_free(sh, &grp);
        }
        for (int j = 0; j < k; j++) pi_free(own[j]);
    }
    return rc;
}
