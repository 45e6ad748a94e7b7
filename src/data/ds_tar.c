/* ds_tar.c - the WebDataset row: a .tar shard whose members are grouped
 * into samples by key (the member name up to the first dot of its
 * basename: "dir/000123.seg.png" has key "dir/000123" and field
 * "seg.png"); consecutive members with one key form one sample. ustar,
 * pax ('x' headers: path, size) and GNU long names ('L') are read; links,
 * directories and global headers are skipped; members without a dot in
 * the basename are skipped (as webdataset does). One sequential pass at
 * open builds the sample index: per sample its byte extent (from its
 * first header to the end of its last member) and its key. Fields:
 * "__key__" (utf8) and one binary field per extension seen in the shard
 * (null where a sample lacks it). A sample is one extent, so shards are
 * read by samples; .tar.gz shards are indexed through the decompressor
 * (never held whole) and read in groups of samples of at most the decode
 * budget through the shard's cursor (dscodec.c). */
#include "dsformat.h"
#include "../core/endian.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

struct tsample {
    uint64_t off, len;
    uint32_t key_off, key_len; /* in keys */
};

struct tar {
    struct tsample *s;
    size_t n, cap;
    char *keys; /* key bytes, concatenated */
    size_t keys_len, keys_cap;
    char **ext; /* every extension seen, in order of first appearance */
    size_t next, extcap;
    int *ext_col; /* ext index -> selected column, -1 */
    int key_col;  /* column of __key__, or -1 */
    struct pi_dscol *cols;
    size_t ncols;
    int gz;
    uint64_t raw_bytes; /* .tar.gz: the decompressed size */
    uint64_t *gfirst;   /* .tar.gz: ngroups + 1 first samples (groups of the decode budget) */
    uint64_t ng;
    struct pi_dszcur *cur;
};

/* ---- header parsing (shared by the index pass and sample()) -------------- */

static int tar_num(const uint8_t *f, size_t n, uint64_t *v) {
    if (f[0] & 0x80) { /* GNU base-256 */
        if (f[0] != 0x80) return -1; /* negative or too large */
        uint64_t x = 0;
        for (size_t i = 1; i < n; i++) {
            if (x >> 56) return -1;
            x = x << 8 | f[i];
        }
        *v = x;
        return 0;
    }
    uint64_t x = 0;
    size_t i = 0;
    while (i < n && f[i] == ' ') i++;
    int any = 0;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
        if (x >> 60) return -1;
        x = x * 8 + (uint64_t)(f[i] - '0');
        any = 1;
    }
    for (; i < n; i++)
        if (f[i] != ' ' && f[i] != 0) return -1;
    if (!any) x = 0;
    *v = x;
    return 0;
}

static int is_zero_block(const uint8_t *h) {
    for (int i = 0; i < 512; i++)
        if (h[i]) return 0;
    return 1;
}

static int checksum_ok(const uint8_t *h) {
    uint64_t want;
    if (tar_num(h + 148, 8, &want) < 0) return 0;
    uint64_t s = 0;
    for (int i = 0; i < 512; i++) s += (i >= 148 && i < 156) ? ' ' : h[i];
    if (s == want) return 1;
    int64_t ss = 0; /* some old tars sum signed bytes */
    for (int i = 0; i < 512; i++) ss += (i >= 148 && i < 156) ? ' ' : (int8_t)h[i];
    return ss >= 0 && (uint64_t)ss == want;
}

/* pax records "LEN key=value\n": finds path and size. */
static int pax_parse(const uint8_t *p, uint64_t n, const uint8_t **path, uint64_t *plen, uint64_t *size, int *has_size) {
    uint64_t i = 0;
    while (i < n) {
        uint64_t len = 0, j = i;
        while (j < n && p[j] >= '0' && p[j] <= '9' && len < (1ull << 40)) len = len * 10 + (uint64_t)(p[j++] - '0');
        if (j == i || j >= n || p[j] != ' ' || len < (j - i) + 3 || len > n - i) return -1;
        uint64_t rs = j + 1, re = i + len; /* record [rs, re), ends with '\n' */
        if (p[re - 1] != '\n') return -1;
        const uint8_t *eq = memchr(p + rs, '=', (size_t)(re - 1 - rs));
        if (!eq) return -1;
        uint64_t kl = (uint64_t)(eq - (p + rs));
        const uint8_t *v = eq + 1;
        uint64_t vl = (uint64_t)((p + re - 1) - v);
        if (kl == 4 && memcmp(p + rs, "path", 4) == 0) {
            *path = v;
            *plen = vl;
        } else if (kl == 4 && memcmp(p + rs, "size", 4) == 0) {
            uint64_t x = 0;
            if (vl == 0 || vl > 19) return -1;
            for (uint64_t k = 0; k < vl; k++) {
                if (v[k] < '0' || v[k] > '9') return -1;
                x = x * 10 + (uint64_t)(v[k] - '0');
            }
            *size = x;
            *has_size = 1;
        }
        i = re;
    }
    return 0;
}

/* 1 if a pax header's records hold a GNU.sparse.* key (sparse formats
 * 0.x and 1.0: the member's data is a map and the pieces). */
static int pax_sparse(const uint8_t *p, uint64_t n) {
    static const char k[] = " GNU.sparse.";
    return n >= sizeof k - 1 && memmem(p, (size_t)n, k, sizeof k - 1) != NULL;
}

/* One member as the walker sees it. */
struct member {
    uint64_t hdr;       /* offset of its first header (extension headers included) */
    uint64_t data, size;/* its data */
    uint64_t end;       /* offset after its padded data */
    const uint8_t *name;/* full name (contiguous when no ustar prefix) */
    uint64_t name_len;
    const uint8_t *prefix; /* ustar prefix (NULL if none) */
    uint64_t prefix_len;
    int regular;
};

/* Bytes [off, off + len) of the shard, or NULL (error set). */
typedef const uint8_t *(*fetch_fn)(void *ctx, uint64_t off, uint64_t len);

/* Reads the member at *pos (skipping extension headers into it). Returns 1
 * with a member, 0 at the end of the archive, < 0 on error. */
static int next_member(const struct pi_dsshard *sh, fetch_fn get, void *ctx, uint64_t size, uint64_t *pos,
                       struct member *m, uint8_t *namebuf) {
    const uint8_t *lname = NULL, *ppath = NULL;
    uint64_t lname_len = 0, ppath_len = 0, psize = 0;
    int has_psize = 0;
    uint64_t first = *pos;
    for (;;) {
        uint64_t at = *pos;
        if (at == size) {
            if (at != first) return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL,
                                              "extension header at %" PRIu64 " without a member", first);
            return 0; /* no end-of-archive blocks: accepted */
        }
        if (size - at < 512)
            return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL,
                             "truncated header at offset %" PRIu64 " (%" PRIu64 " bytes left)", at, size - at);
        const uint8_t *h = get(ctx, at, 512);
        if (!h) return -EIO;
        if (is_zero_block(h)) return 0;
        if (!checksum_ok(h))
            return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL, "bad header checksum at offset %" PRIu64,
                             at);
        uint64_t sz;
        if (tar_num(h + 124, 12, &sz) < 0)
            return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL, "bad size field at offset %" PRIu64, at);
        char type = (char)h[156];
        if (has_psize && type != 'x' && type != 'g' && type != 'L' && type != 'K') sz = psize;
        uint64_t data = at + 512;
        if (sz > size - data)
            return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL,
                             "member at offset %" PRIu64 " claims %" PRIu64 " bytes, %" PRIu64 " left", at, sz,
                             size - data);
        uint64_t end = data + pi_align_up(sz, 512);
        if (end > size)
            return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL,
                             "member at offset %" PRIu64 " truncated: its padded data ends at %" PRIu64 ", the file at %" PRIu64,
                             at, end, size);
        if (type == 'L' || type == 'x') {
            if (sz > 1u << 20)
                return pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, UINT64_MAX, NULL,
                                 "extension header at %" PRIu64 " of %" PRIu64 " bytes", at, sz);
            const uint8_t *d = get(ctx, data, sz);
            if (!d && sz) return -EIO;
            if (type == 'L') {
                if (sz > PI_DS_MAX_NAME)
                    return pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, UINT64_MAX, NULL,
                                     "long name of %" PRIu64 " bytes at offset %" PRIu64, sz, at);
                memcpy(namebuf, d, (size_t)sz);
                lname = namebuf;
                lname_len = sz;
                while (lname_len && lname[lname_len - 1] == 0) lname_len--;
            } else {
                const uint8_t *pp = NULL;
                uint64_t pl = 0;
                if (pax_parse(d, sz, &pp, &pl, &psize, &has_psize) < 0)
                    return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, UINT64_MAX, NULL,
                                     "malformed pax header at offset %" PRIu64, at);
                if (pax_sparse(d, sz)) { /* its data would be a map and pieces, not the file */
                    static const char nk[] = " GNU.sparse.name=";
                    const uint8_t *nm = memmem(d, (size_t)sz, nk, sizeof nk - 1), *ne = NULL;
                    if (nm) nm += sizeof nk - 1, ne = memchr(nm, '\n', (size_t)(d + sz - nm));
                    if (!ne) nm = pp, ne = pp ? pp + pl : NULL;
                    return pi_ds_err(sh, PAGEIN_E_UNSUPPORTED, UINT64_MAX, UINT64_MAX, NULL,
                                     "pax sparse member '%.*s' at offset %" PRIu64 " (GNU.sparse.*): not read",
                                     nm ? (int)PI_MIN((uint64_t)(ne - nm), (uint64_t)256) : 0, nm ? (const char *)nm : "",
                                     at);
                }
                if (pp) {
                    if (pl > PI_DS_MAX_NAME)
                        return pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, UINT64_MAX, NULL,
                                         "pax path of %" PRIu64 " bytes at offset %" PRIu64, pl, at);
                    memcpy(namebuf + PI_DS_MAX_NAME, pp, (size_t)pl);
                    ppath = namebuf + PI_DS_MAX_NAME;
                    ppath_len = pl;
                }
            }
            *pos = end;
            continue;
        }
        if (type == 'S')
            return pi_ds_err(sh, PAGEIN_E_UNSUPPORTED, UINT64_MAX, UINT64_MAX, NULL,
                             "GNU sparse member '%.*s' at offset %" PRIu64 ": not read",
                             (int)strnlen((const char *)h, 100), (const char *)h, at);
        *pos = end;
        m->hdr = first;
        m->data = data;
        m->size = sz;
        m->end = end;
        m->regular = type == '0' || type == 0 || type == '7';
        m->prefix = NULL;
        m->prefix_len = 0;
        if (ppath) {
            m->name = ppath, m->name_len = ppath_len;
        } else if (lname) {
            m->name = lname, m->name_len = lname_len;
        } else {
            m->name = h;
            m->name_len = strnlen((const char *)h, 100);
            if (memcmp(h + 257, "ustar", 5) == 0 && h[345]) {
                m->prefix = h + 345;
                m->prefix_len = strnlen((const char *)h + 345, 155);
            }
        }
        return 1;
    }
}

/* The member's key and extension. */
static int split_name(const struct member *m, const uint8_t **base, uint64_t *baselen, uint64_t *dot) {
    const uint8_t *n = m->name;
    uint64_t l = m->name_len, b = 0;
    for (uint64_t i = 0; i < l; i++)
        if (n[i] == '/') b = i + 1;
    const uint8_t *d = memchr(n + b, '.', (size_t)(l - b));
    if (!d) return 0;
    *base = n;
    *baselen = l;
    *dot = (uint64_t)(d - n);
    return 1;
}

/* ---- the index pass -------------------------------------------------------- */

struct srcwin {
    struct pi_source *src;
    uint8_t *buf;
    uint64_t off, len, cap;
    int err;
};

static const uint8_t *win_get(void *ctx, uint64_t off, uint64_t len) {
    struct srcwin *w = ctx;
    if (off >= w->off && off + len <= w->off + w->len) return w->buf + (off - w->off);
    uint64_t want = PI_MAX(len, (uint64_t)1 << 20);
    if (want > w->src->size - off) want = w->src->size - off;
    if (want > w->cap) {
        uint8_t *nb = pi_realloc(w->buf, want);
        if (!nb) {
            pi_err(-ENOMEM, "%s: out of memory", w->src->name);
            return NULL;
        }
        w->buf = nb;
        w->cap = want;
    }
    if (pi_source_read(w->src, w->buf, want, off) < 0) {
        w->len = 0;
        return NULL;
    }
    w->off = off;
    w->len = want;
    return w->buf;
}

static const uint8_t *mem_get(void *ctx, uint64_t off, uint64_t len) {
    (void)len;
    return (const uint8_t *)ctx + off;
}

static int find_ext(struct tar *T, const uint8_t *e, uint64_t el) {
    for (size_t i = 0; i < T->next; i++)
        if (strlen(T->ext[i]) == el && memcmp(T->ext[i], e, (size_t)el) == 0) return (int)i;
    return -1;
}

static int index_pass(struct pi_dsshard *sh, struct tar *T, fetch_fn get, void *ctx, uint64_t size) {
    uint8_t *namebuf = pi_malloc(2 * PI_DS_MAX_NAME + 1);
    if (!namebuf) return pi_err(-ENOMEM, "%s: out of memory", sh->name);
    uint64_t pos = 0;
    int rc;
    struct member m;
    struct tsample *cur = NULL;
    while ((rc = next_member(sh, get, ctx, size, &pos, &m, namebuf)) > 0) {
        const uint8_t *nm;
        uint64_t nl, dot;
        if (!m.regular || !split_name(&m, &nm, &nl, &dot)) continue;
        const uint8_t *ext = nm + dot + 1;
        uint64_t el = nl - dot - 1;
        /* key = prefix "/" name[0, dot) */
        uint64_t kl = dot + (m.prefix ? m.prefix_len + 1 : 0);
        if (kl > PI_DS_MAX_NAME) { rc = pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, T->n, NULL, "key too long"); break; }
        char kb[2 * 4096 + 2];
        size_t k = 0;
        if (m.prefix) {
            memcpy(kb, m.prefix, (size_t)m.prefix_len);
            k = (size_t)m.prefix_len;
            kb[k++] = '/';
        }
        memcpy(kb + k, nm, (size_t)dot);
        k += (size_t)dot;
        int same = cur && cur->key_len == k && memcmp(T->keys + cur->key_off, kb, k) == 0;
        if (!same) {
            if ((rc = pi_grow((void **)&T->s, &T->cap, T->n + 1, sizeof *T->s)) < 0) break;
            if ((rc = pi_grow((void **)&T->keys, &T->keys_cap, T->keys_len + k + 1, 1)) < 0) break;
            if (T->keys_len > UINT32_MAX - k) { rc = pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, T->n, NULL, "keys exceed 4 GiB"); break; }
            memcpy(T->keys + T->keys_len, kb, k);
            cur = &T->s[T->n++];
            *cur = (struct tsample){m.hdr, 0, (uint32_t)T->keys_len, (uint32_t)k};
            T->keys_len += k;
        }
        cur->len = m.end - cur->off;
        if (find_ext(T, ext, el) < 0) {
            if (T->next >= PI_DS_MAX_COLS) {
                rc = pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, T->n - 1, NULL, "more than %u extensions", PI_DS_MAX_COLS);
                break;
            }
            if ((rc = pi_grow((void **)&T->ext, &T->extcap, T->next + 1, sizeof *T->ext)) < 0) break;
            char *e = pi_strndup((const char *)ext, (size_t)el);
            if (!e) { rc = pi_err(-ENOMEM, "out of memory"); break; }
            T->ext[T->next++] = e;
        }
    }
    pi_free(namebuf);
    return rc < 0 ? rc : 0;
}

static void tar_free(struct tar *T) {
    if (!T) return;
    pi_free(T->s);
    pi_free(T->keys);
    for (size_t i = 0; i < T->next; i++) pi_free(T->ext[i]);
    pi_free(T->ext);
    pi_free(T->ext_col);
    pi_free(T->cols);
    pi_free(T->gfirst);
    pi_ds_zcur_free(T->cur);
    pi_free(T);
}

/* .tar.gz: the decompressed shard read forward through the cursor, a
 * window of 1 MiB (or what a header asks) at a time, for the index pass. */
struct zwin {
    struct pi_dszcur *cur;
    const uint8_t *z;
    size_t zn;
    uint64_t raw;
    uint8_t *buf;
    uint64_t off, len, cap;
    const char *name;
};

static const uint8_t *zwin_get(void *ctx, uint64_t off, uint64_t len) {
    struct zwin *w = ctx;
    if (off >= w->off && off + len <= w->off + w->len) return w->buf + (off - w->off);
    uint64_t want = PI_MAX(len, (uint64_t)1 << 20);
    if (off > w->raw || want > w->raw - off) want = off > w->raw ? 0 : w->raw - off;
    if (want < len) return NULL;
    /* a request starting inside the window keeps its tail and reads on from
     * the window's end, where the cursor is: asking the cursor for the
     * tail's bytes again would start the stream over (a header per MiB
     * straddling the window's end made the index pass quadratic) */
    uint64_t keep = w->len && off >= w->off && off < w->off + w->len ? w->off + w->len - off : 0;
    if (want > w->cap) {
        uint8_t *nb = pi_realloc(w->buf, want);
        if (!nb) {
            pi_err(-ENOMEM, "%s: out of memory", w->name);
            return NULL;
        }
        w->buf = nb;
        w->cap = want;
    }
    if (keep) memmove(w->buf, w->buf + (off - w->off), (size_t)keep);
    w->len = 0;
    struct pi_dszin in = {w->z, 0, w->zn, w->zn, NULL};
    if (pi_ds_zcur_read(w->cur, &in, off + keep, w->buf + keep, want - keep, w->name) < 0) return NULL;
    w->off = off;
    w->len = want;
    return w->buf;
}

static int zcount(void *ctx, const uint8_t *p, size_t len) {
    (void)ctx, (void)p, (void)len;
    return 0;
}

/* Groups of consecutive samples of at most the decode budget of raw bytes. */
static int tgz_groups(struct pi_dsshard *sh, struct tar *T) {
    uint64_t budget = pi_ds_decode_budget(), ng = 0;
    size_t cap = 0;
    for (uint64_t i = 0; i < T->n;) {
        if (T->s[i].len > budget)
            return pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, i, NULL,
                             "%" PRIu64 " bytes, more than the decode budget of %" PRIu64 " (PAGEIN_DS_DECODE_BUDGET)",
                             T->s[i].len, budget);
        FORWARD_IF(pi_grow((void **)&T->gfirst, &cap, (size_t)ng + 2, sizeof *T->gfirst));
        T->gfirst[ng++] = i;
        uint64_t j = i + 1;
        while (j < T->n && T->s[j].off + T->s[j].len - T->s[i].off <= budget) j++;
        i = j;
    }
    if (ng) T->gfirst[ng] = T->n;
    T->ng = ng;
    sh->ngroups = ng;
    return 0;
}

static int select_cols(struct pi_dsshard *sh, struct tar *T, const struct pi_dsopen *a) {
    T->ext_col = pi_malloc((T->next ? T->next : 1) * sizeof *T->ext_col);
    T->cols = pi_calloc(T->next + 1, sizeof *T->cols);
    const char **names = pi_calloc(T->next + 1, sizeof *names);
    int *idx = pi_calloc(T->next + 1, sizeof *idx);
    int rc = -ENOMEM;
    if (!T->ext_col || !T->cols || !names || !idx) goto out;
    for (size_t i = 0; i < T->next; i++) T->ext_col[i] = -1;
    T->key_col = -1;
    /* the one columns= rule (dscolumns.c): "__key__", then the extensions as first seen */
    names[0] = "__key__";
    for (size_t i = 0; i < T->next; i++) names[i + 1] = T->ext[i];
    rc = pi_ds_col_flat(sh, a, names, T->next + 1, idx);
    for (int k = 0; k < rc; k++) {
        size_t c = T->ncols++;
        if (idx[k] == 0) {
            T->key_col = (int)c;
            T->cols[c] = (struct pi_dscol){.name = "__key__", .type = PI_DT_UTF8};
        } else {
            T->ext_col[idx[k] - 1] = (int)c;
            T->cols[c] = (struct pi_dscol){.name = T->ext[idx[k] - 1], .type = PI_DT_BINARY, .nullable = 1};
        }
    }
out:
    pi_free(names);
    pi_free(idx);
    if (rc == -ENOMEM) return pi_err(-ENOMEM, "%s: out of memory", sh->name);
    return rc < 0 ? rc : 0;
}


/* ---- the cached index ------------------------------------------------------
 * Beside the shard (SHARD.pagein-idx) when its directory is writable, else
 * in a->cache_dir (named by a hash of the URI), never for PI_DSOPEN_NO_CACHE.
 * Layout (little endian): pi_ds_cache_write's header ("PGTARIX1", u32
 * identity length, identity (the source's: dev:ino:size:mtime for files,
 * the ETag remotely), u64 shard size), then u64 raw (decompressed .tar.gz) size, u64 samples, u64 key bytes,
 * u32 extensions, each u32 length + bytes, then per sample u64 offset, u64
 * length, u32 key offset, u32 key length, then the keys. A cache that does
 * not match the shard's identity and size, or fails any check (it is
 * input like any other), is ignored and rebuilt. */

#define TIX_MAGIC "PGTARIX1"

static void put64(struct pi_buf *b, uint64_t v) {
    uint8_t x[8];
    pi_st_le64(x, v);
    pi_buf_put(b, x, 8);
}
static void put32(struct pi_buf *b, uint32_t v) {
    uint8_t x[4];
    pi_st_le32(x, v);
    pi_buf_put(b, x, 4);
}

/* 1 loaded, 0 not usable (T left empty), < 0 out of memory. The payload
 * (after pi_ds_cache_read's magic, identity and size) is checked like any
 * input. */
static int cache_load(const struct pi_dsshard *sh, struct tar *T, const char *path) {
    uint8_t *b = NULL;
    size_t len = 0;
    int ok = 0;
    if (pi_ds_cache_read(sh, path, TIX_MAGIC, &b, &len) > 0 && len >= 28 && len <= (1ull << 32)) {
        const uint8_t *p = b, *e = b + len;
        uint32_t l;
        uint64_t raw = pi_le64(p), n = pi_le64(p + 8), kb = pi_le64(p + 16);
        uint32_t ne = pi_le32(p + 24);
        p += 28;
        if (ne > PI_DS_MAX_COLS) goto done;
        uint64_t span = raw ? raw : sh->src->size;
        for (uint32_t i = 0; i < ne; i++) {
            if (e - p < 4 || (l = pi_le32(p)) > PI_DS_MAX_NAME || (uint64_t)(e - p - 4) < l) goto done;
            char *x = pi_strndup((const char *)p + 4, l);
            if (!x || pi_grow((void **)&T->ext, &T->extcap, T->next + 1, sizeof *T->ext) < 0) {
                pi_free(x);
                goto done;
            }
            T->ext[T->next++] = x;
            p += 4 + l;
        }
        if (n > (uint64_t)(e - p) / 24 || kb != (uint64_t)(e - p) - n * 24) goto done;
        T->s = pi_malloc((size_t)(n ? n : 1) * sizeof *T->s);
        T->keys = pi_malloc((size_t)(kb ? kb : 1));
        if (!T->s || !T->keys) goto done;
        uint64_t prev = 0;
        for (uint64_t i = 0; i < n; i++, p += 24) {
            struct tsample s = {pi_le64(p), pi_le64(p + 8), pi_le32(p + 16), pi_le32(p + 20)};
            if (s.off < prev || s.len > span || s.off > span - s.len || (uint64_t)s.key_off + s.key_len > kb) goto done;
            prev = s.off + s.len;
            T->s[i] = s;
        }
        memcpy(T->keys, p, (size_t)kb);
        T->n = T->cap = (size_t)n;
        T->keys_len = T->keys_cap = (size_t)kb;
        T->raw_bytes = raw;
        ok = 1;
    }
done:
    pi_free(b);
    if (!ok) { /* leave T as the index pass expects it: empty */
        pi_free(T->s), T->s = NULL, T->n = T->cap = 0;
        pi_free(T->keys), T->keys = NULL, T->keys_len = T->keys_cap = 0;
        for (size_t i = 0; i < T->next; i++) pi_free(T->ext[i]);
        pi_free(T->ext), T->ext = NULL, T->next = T->extcap = 0;
    }
    return ok;
}

/* Best effort: a cache that cannot be written is not an error. */
static void cache_store(const struct pi_dsshard *sh, const struct tar *T, const char *path) {
    struct pi_buf b = {0};
    put64(&b, T->raw_bytes);
    put64(&b, T->n);
    put64(&b, T->keys_len);
    put32(&b, (uint32_t)T->next);
    for (size_t i = 0; i < T->next; i++) {
        put32(&b, (uint32_t)strlen(T->ext[i]));
        pi_buf_str(&b, T->ext[i]);
    }
    for (size_t i = 0; i < T->n; i++) {
        put64(&b, T->s[i].off);
        put64(&b, T->s[i].len);
        put32(&b, T->s[i].key_off);
        put32(&b, T->s[i].key_len);
    }
    pi_buf_put(&b, T->keys, T->keys_len);
    if (!b.oom) pi_ds_cache_write(sh, path, TIX_MAGIC, b.p, b.n);
    pi_buf_free(&b);
}

static int tar_open(struct pi_dsshard *sh, const struct pi_dsopen *a) {
    struct tar *T = pi_calloc(1, sizeof *T);
    if (!T) return pi_err(-ENOMEM, "%s: out of memory", sh->name);
    uint64_t size = sh->src->size;
    uint8_t head[2] = {0};
    int rc = 0;
    char *cpath = NULL;
    if (size >= 2 && (rc = pi_source_read(sh->src, head, 2, 0)) < 0) goto fail;
    T->gz = size >= 2 && head[0] == 0x1f && head[1] == 0x8b;
    cpath = pi_ds_cache_path(sh, a, "tar");
    int cached = cpath ? cache_load(sh, T, cpath) : 0;
    if (cached) {
        if (T->gz && ((rc = pi_ds_zcur_new(&T->cur, 1, sh->name)) < 0 || (rc = tgz_groups(sh, T)) < 0)) goto fail;
        if (T->gz) sh->in_order = 1;
    } else if (!T->gz) {
        struct srcwin w = {.src = sh->src};
        rc = index_pass(sh, T, win_get, &w, size);
        pi_free(w.buf);
        if (rc < 0) goto fail;
    } else {
        if (size > PI_DS_MAX_DECODE) {
            rc = pi_ds_err(sh, PAGEIN_E_LIMIT, UINT64_MAX, UINT64_MAX, NULL, "compressed shard too large to read whole");
            goto fail;
        }
        /* never held whole: counted, then its headers read forward through
         * the cursor (two decompressions; memory a 1 MiB window) */
        uint8_t *z = pi_malloc(size ? size : 1);
        uint64_t rl = 0;
        if (!z) { rc = pi_err(-ENOMEM, "%s: out of memory", sh->name); goto fail; }
        rc = pi_source_read(sh->src, z, size, 0);
        if (rc == 0) rc = pi_ds_gunzip_each(z, (size_t)size, UINT64_MAX, zcount, NULL, &rl, sh->name);
        if (rc == 0) rc = pi_ds_zcur_new(&T->cur, 1, sh->name);
        struct zwin w = {.cur = T->cur, .z = z, .zn = (size_t)size, .raw = rl, .name = sh->name};
        if (rc == 0) rc = index_pass(sh, T, zwin_get, &w, rl);
        pi_free(w.buf);
        pi_free(z);
        if (T->cur) pi_ds_zcur_reset(T->cur);
        if (rc < 0) goto fail;
        T->raw_bytes = rl;
        if ((rc = tgz_groups(sh, T)) < 0) goto fail;
    }
    if (cpath && !cached) cache_store(sh, T, cpath);
    pi_free(cpath);
    cpath = NULL;
    if ((rc = select_cols(sh, T, a)) < 0) goto fail;
    pi_ds_shard_set(sh, T, T->cols, T->ncols, T->n);
    return 0;
fail:
    pi_free(cpath);
    tar_free(T);
    return rc;
}

static void tar_close(struct pi_dsshard *sh) { tar_free(sh->impl); }

static int tar_locate(const struct pi_dsshard *sh, uint64_t i, uint64_t *off, uint64_t *len) {
    const struct tar *T = sh->impl;
    *off = T->s[i].off;
    *len = T->s[i].len;
    return 0;
}

/* The fields of sample i from its bytes (base: offset of p in the tar). */
static int tar_fields_at(const struct pi_dsshard *sh, uint64_t i, const uint8_t *p, uint64_t len, struct pi_dsfield *f,
                         size_t cap) {
    const struct tar *T = sh->impl;
    size_t nc = T->ncols;
    for (size_t c = 0; c < nc && c < cap; c++)
        f[c] = (struct pi_dsfield){.name = T->cols[c].name, .col = (uint32_t)c, .type = T->cols[c].type, .null = 1};
    if (T->key_col >= 0 && (size_t)T->key_col < cap) {
        struct pi_dsfield *k = &f[T->key_col];
        k->null = 0;
        k->data = T->keys + T->s[i].key_off;
        k->nbytes = T->s[i].key_len;
    }
    uint8_t namebuf[2 * PI_DS_MAX_NAME + 1];
    uint64_t pos = 0;
    struct member m;
    int rc;
    while (pos < len && (rc = next_member(sh, mem_get, (void *)p, len, &pos, &m, namebuf)) > 0) {
        const uint8_t *nm;
        uint64_t nl, dot;
        if (!m.regular || !split_name(&m, &nm, &nl, &dot)) continue;
        int e = find_ext((struct tar *)T, nm + dot + 1, nl - dot - 1);
        if (e < 0) return pi_ds_err(sh, PAGEIN_E_CHANGED, UINT64_MAX, i, NULL, "a member not seen at open");
        int c = T->ext_col[e];
        if (c < 0 || (size_t)c >= cap) continue;
        if (!f[c].null)
            return pi_ds_err(sh, PAGEIN_E_FORMAT, UINT64_MAX, i, T->ext[e], "two members with this extension");
        f[c].null = 0;
        f[c].data = p + m.data;
        f[c].nbytes = m.size;
    }
    if (pos < len && rc < 0) return rc;
    return (int)nc;
}

static int tar_sample(const struct pi_dsshard *sh, uint64_t i, const uint8_t *p, uint64_t len, struct pi_dsfield *f,
                      size_t cap) {
    return tar_fields_at(sh, i, p, len, f, cap);
}

/* .tar.gz: groups of the decode budget, read through the cursor
 * (struct pi_dsraw, dsformat.h) */
static int tar_group(const struct pi_dsshard *sh, uint64_t g, struct pi_dsgroupinfo *gi) {
    const struct tar *T = sh->impl;
    return pi_ds_raw_group(sh, T->gfirst, T->ng, g, gi);
}
static int tar_decode(const struct pi_dsshard *sh, struct pi_dsgroup *grp) {
    const struct tar *T = sh->impl;
    if (grp->nbufs != 1 || grp->g >= T->ng)
        return pi_ds_err(sh, PAGEIN_E_INVALID, grp->g, UINT64_MAX, NULL, "decode given %zu buffers", grp->nbufs);
    uint64_t a = T->gfirst[grp->g], e = T->gfirst[grp->g + 1] - 1;
    uint64_t lo = T->s[a].off, len = T->s[e].off + T->s[e].len - lo;
    struct pi_dszin in = {grp->bufs[0].p, 0, (size_t)grp->bufs[0].len, grp->bufs[0].len, NULL}; /* the whole shard */
    return pi_ds_raw_read(sh, T->cur, &in, lo, len, grp);
}
static int tar_gfields(const struct pi_dsshard *sh, const struct pi_dsgroup *grp, uint64_t i, struct pi_dsfield *f,
                       size_t cap) {
    const struct tar *T = sh->impl;
    const struct pi_dsraw *G = grp->impl;
    uint64_t id = grp->info.first + i;
    return tar_fields_at(sh, id, G->raw + (T->s[id].off - G->base), T->s[id].len, f, cap);
}

static int tar_detect(const char *name, const uint8_t *h, size_t nh, const uint8_t *t, size_t nt, uint64_t size) {
    (void)t, (void)nt;
    if (nh >= 512 && memcmp(h + 257, "ustar", 5) == 0 && checksum_ok(h)) return 2;
    size_t n = name ? strlen(name) : 0;
    if ((n >= 4 && strcmp(name + n - 4, ".tar") == 0) || (n >= 7 && strcmp(name + n - 7, ".tar.gz") == 0) ||
        (n >= 4 && strcmp(name + n - 4, ".tgz") == 0))
        return size == 0 || (nh >= 512 && checksum_ok(h)) || (nh >= 2 && h[0] == 0x1f && h[1] == 0x8b) ? 2 : 1;
    return 0;
}

static const char *const tar_suffixes[] = {".tar", ".tar.gz", ".tgz", NULL};
static const char *const tar_aliases[] = {"tar", "wds", NULL};

const struct pi_dsformat pi_dsformat_webdataset = {
    .name = "webdataset",
    .aliases = tar_aliases,
    .suffixes = tar_suffixes,
    .head_bytes = 512,
    .detect = tar_detect,
    .open = tar_open,
    .close = tar_close,
    .group = tar_group,
    .ranges = pi_ds_whole_ranges,
    .decode = tar_decode,
    .fields = tar_gfields,
    .group_free = pi_ds_raw_free,
    .locate = tar_locate,
    .sample = tar_sample,
};
