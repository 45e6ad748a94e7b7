/* dscodec.c - decompression for the dataset rows: zstd (libzstd) and gzip
 * (zlib), never past a declared or allowed size. Without a library the
 * calls say which one is missing. */
#include "dsformat.h"

#include <inttypes.h>
#include <pthread.h>

#ifdef PAGEIN_HAVE_ZSTD
#include <zstd.h>
#endif
#ifdef PAGEIN_HAVE_ZLIB
#include <zlib.h>
#endif

int64_t pi_ds_zstd_size(const uint8_t *in, size_t n) {
#ifdef PAGEIN_HAVE_ZSTD
    unsigned long long s = ZSTD_getFrameContentSize(in, n);
    if (s == ZSTD_CONTENTSIZE_UNKNOWN || s == ZSTD_CONTENTSIZE_ERROR || s > INT64_MAX) return -1;
    return (int64_t)s;
#else
    (void)in, (void)n;
    return -1;
#endif
}

int pi_ds_zstd(const uint8_t *in, size_t n, uint8_t *out, size_t want, const char *what) {
#ifdef PAGEIN_HAVE_ZSTD
    /* ZSTD_decompress never writes past out + want: more output is the
     * error "destination buffer too small" */
    size_t r = ZSTD_decompress(out, want, in, n);
    if (ZSTD_isError(r)) return pi_err(PAGEIN_E_FORMAT, "%s: zstd: %s (%zu bytes declared)", what, ZSTD_getErrorName(r), want);
    if (r != want) return pi_err(PAGEIN_E_FORMAT, "%s: zstd data holds %zu bytes, %zu declared", what, r, want);
    return 0;
#else
    (void)in, (void)n, (void)out, (void)want;
    return pi_err(PAGEIN_E_UNSUPPORTED, "%s: zstd-compressed, and pagein was built without libzstd", what);
#endif
}

/* The end of a whole-stream decompression: the buffer to the caller, or freed on error. */
static int hand_out(int rc, uint8_t *buf, size_t len, uint8_t **out, size_t *outlen) {
    if (rc < 0) {
        pi_free(buf);
        return rc;
    }
    *out = buf;
    *outlen = len;
    return 0;
}

/* Grows *buf to hold at least need bytes, at most max. */
static int grow_to(uint8_t **buf, size_t *cap, size_t need, uint64_t max, const char *what) {
    if (need <= *cap) return 0;
    if (need > max) return pi_err(PAGEIN_E_LIMIT, "%s: decompresses past %" PRIu64 " bytes", what, max);
    size_t nc = *cap ? *cap : (1u << 16);
    while (nc < need) nc = nc > SIZE_MAX / 2 ? need : nc * 2;
    if (nc > max) nc = (size_t)max;
    uint8_t *p = pi_realloc(*buf, nc ? nc : 1);
    if (!p) return pi_err(-ENOMEM, "%s: out of memory for %zu decompressed bytes", what, nc);
    *buf = p;
    *cap = nc;
    return 0;
}

int pi_ds_unzstd_all(const uint8_t *in, size_t n, uint64_t max, uint8_t **out, size_t *outlen, const char *what) {
#ifdef PAGEIN_HAVE_ZSTD
    ZSTD_DCtx *z = ZSTD_createDCtx();
    if (!z) return pi_err(-ENOMEM, "%s: out of memory for a zstd context", what);
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0, last = 1;
    ZSTD_inBuffer ib = {in, n, 0};
    int rc = 0;
    while (rc == 0) {
        if ((rc = grow_to(&buf, &cap, len + 1, max + 1 > max ? max + 1 : max, what)) < 0) break;
        ZSTD_outBuffer ob = {buf + len, cap - len, 0};
        last = ZSTD_decompressStream(z, &ob, &ib);
        if (ZSTD_isError(last)) {
            rc = pi_err(PAGEIN_E_FORMAT, "%s: zstd: %s (after %zu bytes out)", what, ZSTD_getErrorName(last), len);
            break;
        }
        len += ob.pos;
        if (len > max) {
            rc = pi_err(PAGEIN_E_LIMIT, "%s: decompresses past %" PRIu64 " bytes", what, max);
            break;
        }
        /* all input consumed and the last frame ended (0: flushed whole,
         * even when it filled the buffer exactly), or nothing more comes */
        if (ib.pos == ib.size && (last == 0 || ob.pos < ob.size)) break;
        if (ob.pos == 0 && ib.pos == ib.size) break;
    }
    ZSTD_freeDCtx(z);
    if (rc == 0 && last != 0) rc = pi_err(PAGEIN_E_FORMAT, "%s: zstd stream truncated after %zu bytes out", what, len);
    return hand_out(rc, buf, len, out, outlen);
#else
    (void)in, (void)n, (void)max, (void)out, (void)outlen;
    return pi_err(PAGEIN_E_UNSUPPORTED, "%s: zstd-compressed, and pagein was built without libzstd", what);
#endif
}

int pi_ds_unzstd_each(const uint8_t *in, size_t n, uint64_t max, pi_ds_piece_fn fn, void *ctx, uint64_t *total,
                      const char *what) {
#ifdef PAGEIN_HAVE_ZSTD
    ZSTD_DCtx *z = ZSTD_createDCtx();
    size_t cap = ZSTD_DStreamOutSize();
    uint8_t *buf = z ? pi_malloc(cap) : NULL;
    if (!buf) {
        ZSTD_freeDCtx(z);
        return pi_err(-ENOMEM, "%s: out of memory for a zstd context", what);
    }
    ZSTD_inBuffer ib = {in, n, 0};
    uint64_t len = 0;
    size_t last = 1;
    int rc = 0;
    while (rc == 0) {
        ZSTD_outBuffer ob = {buf, cap, 0};
        last = ZSTD_decompressStream(z, &ob, &ib);
        if (ZSTD_isError(last)) {
            rc = pi_err(PAGEIN_E_FORMAT, "%s: zstd: %s (after %" PRIu64 " bytes out)", what, ZSTD_getErrorName(last), len);
            break;
        }
        len += ob.pos;
        if (len > max) {
            rc = pi_err(PAGEIN_E_LIMIT, "%s: decompresses past %" PRIu64 " bytes", what, max);
            break;
        }
        if (ob.pos && (rc = fn(ctx, buf, ob.pos)) != 0) break;
        if (ib.pos == ib.size && (last == 0 || ob.pos < ob.size)) break;
    }
    ZSTD_freeDCtx(z);
    pi_free(buf);
    if (rc == 0 && last != 0) rc = pi_err(PAGEIN_E_FORMAT, "%s: zstd stream truncated after %" PRIu64 " bytes out", what, len);
    *total = len;
    return rc < 0 ? rc : 0;
#else
    (void)in, (void)n, (void)max, (void)fn, (void)ctx, (void)total;
    return pi_err(PAGEIN_E_UNSUPPORTED, "%s: zstd-compressed, and pagein was built without libzstd", what);
#endif
}

int pi_ds_gunzip_each(const uint8_t *in, size_t n, uint64_t max, pi_ds_piece_fn fn, void *ctx, uint64_t *total,
                      const char *what) {
#ifdef PAGEIN_HAVE_ZLIB
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 32) != Z_OK) return pi_err(-ENOMEM, "%s: inflateInit failed", what);
    const size_t cap = 1u << 18;
    uint8_t *buf = pi_malloc(cap);
    if (!buf) {
        inflateEnd(&z);
        return pi_err(-ENOMEM, "%s: out of memory", what);
    }
    uint64_t len = 0;
    int rc = 0, zr = Z_OK;
    size_t left = n;
    const uint8_t *ip = in;
    while (rc == 0) {
        uInt inchunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
        z.next_in = (Bytef *)ip;
        z.avail_in = inchunk;
        z.next_out = buf;
        z.avail_out = (uInt)cap;
        zr = inflate(&z, Z_NO_FLUSH);
        size_t used = inchunk - z.avail_in, got = cap - z.avail_out;
        ip += used;
        left -= used;
        len += got;
        if (len > max) {
            rc = pi_err(PAGEIN_E_LIMIT, "%s: decompresses past %" PRIu64 " bytes", what, max);
            break;
        }
        if (got && (rc = fn(ctx, buf, got)) != 0) break;
        if (zr == Z_STREAM_END) {
            if (left == 0) break;
            if (inflateReset(&z) != Z_OK) rc = pi_err(PAGEIN_E_FORMAT, "%s: inflateReset failed", what);
            continue;
        }
        if (zr == Z_BUF_ERROR && left == 0 && got == 0) {
            rc = pi_err(PAGEIN_E_FORMAT, "%s: gzip stream truncated after %" PRIu64 " bytes out", what, len);
            break;
        }
        if (zr != Z_OK && zr != Z_BUF_ERROR) {
            rc = pi_err(PAGEIN_E_FORMAT, "%s: gzip: %s (after %" PRIu64 " bytes out)", what,
                        z.msg ? z.msg : "inflate error", len);
            break;
        }
    }
    inflateEnd(&z);
    pi_free(buf);
    *total = len;
    return rc < 0 ? rc : 0;
#else
    (void)in, (void)n, (void)max, (void)fn, (void)ctx, (void)total;
    return pi_err(PAGEIN_E_UNSUPPORTED, "%s: gzip-compressed, and pagein was built without zlib", what);
#endif
}

int pi_ds_gunzip_all(const uint8_t *in, size_t n, uint64_t max, uint8_t **out, size_t *outlen, const char *what) {
#ifdef PAGEIN_HAVE_ZLIB
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 32) != Z_OK) return pi_err(-ENOMEM, "%s: inflateInit failed", what);
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0;
    int rc = 0, zr = Z_OK;
    size_t left = n;
    const uint8_t *ip = in;
    while (rc == 0) {
        if ((rc = grow_to(&buf, &cap, len + 1, max + 1 > max ? max + 1 : max, what)) < 0) break;
        uInt inchunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
        z.next_in = (Bytef *)ip;
        z.avail_in = inchunk;
        size_t room = cap - len;
        z.next_out = buf + len;
        z.avail_out = room > (1u << 30) ? (1u << 30) : (uInt)room;
        uInt ao = z.avail_out;
        zr = inflate(&z, Z_NO_FLUSH);
        size_t used = inchunk - z.avail_in;
        ip += used;
        left -= used;
        len += ao - z.avail_out;
        if (len > max) {
            rc = pi_err(PAGEIN_E_LIMIT, "%s: decompresses past %" PRIu64 " bytes", what, max);
            break;
        }
        if (zr == Z_STREAM_END) {
            if (left == 0) break;
            /* concatenated gzip members (pigz, cat a.gz b.gz) */
            if (inflateReset(&z) != Z_OK) {
                rc = pi_err(PAGEIN_E_FORMAT, "%s: inflateReset failed", what);
                break;
            }
            continue;
        }
        if (zr == Z_BUF_ERROR && left == 0) {
            rc = pi_err(PAGEIN_E_FORMAT, "%s: gzip stream truncated after %zu bytes out", what, len);
            break;
        }
        if (zr != Z_OK && zr != Z_BUF_ERROR) {
            rc = pi_err(PAGEIN_E_FORMAT, "%s: gzip: %s (after %zu bytes out)", what, z.msg ? z.msg : "inflate error",
                        len);
            break;
        }
    }
    inflateEnd(&z);
    return hand_out(rc, buf, len, out, outlen);
#else
    (void)in, (void)n, (void)max, (void)out, (void)outlen;
    return pi_err(PAGEIN_E_UNSUPPORTED, "%s: gzip-compressed, and pagein was built without zlib", what);
#endif
}

/* ---- the cursor: a window of a stream, decompressed from where the last
 * window ended (in-order reads are linear) or from the start ---- */

struct pi_dszcur {
    pthread_mutex_t mu;
    int kind;            /* 1 gzip, 2 zstd */
    int live;            /* a stream is under way */
    uint64_t in_pos;     /* compressed bytes consumed */
    uint8_t *ibuf;       /* compressed bytes read from the source: [ioff, ioff + ilen) */
    uint64_t ioff;
    size_t ilen, icap;
    uint64_t produced;   /* decompressed bytes produced so far */
    int ended;           /* the last frame/member ended and no input is left */
    uint8_t *buf;        /* the last piece produced: [produced - blen, produced) */
    size_t bcap, blen;
#ifdef PAGEIN_HAVE_ZSTD
    ZSTD_DCtx *zd;
#endif
#ifdef PAGEIN_HAVE_ZLIB
    z_stream zs;
    int zs_init;
#endif
};

int pi_ds_zcur_new(struct pi_dszcur **out, int kind, const char *what) {
    struct pi_dszcur *c = pi_calloc(1, sizeof *c);
    if (!c) return pi_err(-ENOMEM, "%s: out of memory", what);
    c->kind = kind;
    c->bcap = 1u << 17;
    c->icap = 1u << 20;
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return 0;
}

static void zcur_end(struct pi_dszcur *c) {
#ifdef PAGEIN_HAVE_ZSTD
    if (c->zd) ZSTD_freeDCtx(c->zd);
    c->zd = NULL;
#endif
#ifdef PAGEIN_HAVE_ZLIB
    if (c->zs_init) inflateEnd(&c->zs);
    c->zs_init = 0;
#endif
    c->live = 0;
    c->in_pos = 0;
    c->produced = 0;
    c->blen = 0;
    c->ended = 0;
}

void pi_ds_zcur_free(struct pi_dszcur *c) {
    if (!c) return;
    zcur_end(c);
    pi_free(c->buf);
    pi_free(c->ibuf);
    pthread_mutex_destroy(&c->mu);
    pi_free(c);
}

static int zcur_start(struct pi_dszcur *c, const char *what) {
    zcur_end(c);
    if (!c->buf && !(c->buf = pi_malloc(c->bcap))) return pi_err(-ENOMEM, "%s: out of memory", what);
    if (c->kind == 2) {
#ifdef PAGEIN_HAVE_ZSTD
        if (!(c->zd = ZSTD_createDCtx())) return pi_err(-ENOMEM, "%s: out of memory for a zstd context", what);
#else
        return pi_err(PAGEIN_E_UNSUPPORTED, "%s: zstd-compressed, and pagein was built without libzstd", what);
#endif
    } else {
#ifdef PAGEIN_HAVE_ZLIB
        memset(&c->zs, 0, sizeof c->zs);
        if (inflateInit2(&c->zs, 15 + 32) != Z_OK) return pi_err(-ENOMEM, "%s: inflateInit failed", what);
        c->zs_init = 1;
#else
        return pi_err(PAGEIN_E_UNSUPPORTED, "%s: gzip-compressed, and pagein was built without zlib", what);
#endif
    }
    c->live = 1;
    return 0;
}

/* The next piece into dst (cap bytes): *got bytes; ended set at the end.
 * A piece into c->buf is kept (blen) for a read that wants its bytes. */
static int zcur_step(struct pi_dszcur *c, const uint8_t *p, size_t avail, int at_end, uint8_t *dst, size_t cap,
                     size_t *got, const char *what) {
    c->blen = 0;
    *got = 0;
    if (c->kind == 2) {
#ifdef PAGEIN_HAVE_ZSTD
        ZSTD_inBuffer ib = {p, avail, 0};
        ZSTD_outBuffer ob = {dst, cap, 0};
        size_t r = ZSTD_decompressStream(c->zd, &ob, &ib);
        if (ZSTD_isError(r))
            return pi_err(PAGEIN_E_FORMAT, "%s: zstd: %s (after %" PRIu64 " bytes out)", what, ZSTD_getErrorName(r),
                          c->produced);
        c->in_pos += ib.pos;
        *got = ob.pos;
        if (at_end && ib.pos == ib.size && ob.pos < ob.size) {
            if (r != 0) return pi_err(PAGEIN_E_FORMAT, "%s: zstd stream truncated after %" PRIu64 " bytes out", what,
                                      c->produced + ob.pos);
            c->ended = 1;
        }
#endif
    } else {
#ifdef PAGEIN_HAVE_ZLIB
        uInt inchunk = avail > (1u << 30) ? (1u << 30) : (uInt)avail;
        uInt outchunk = cap > (1u << 30) ? (1u << 30) : (uInt)cap;
        c->zs.next_in = (Bytef *)p;
        c->zs.avail_in = inchunk;
        c->zs.next_out = dst;
        c->zs.avail_out = outchunk;
        int zr = inflate(&c->zs, Z_NO_FLUSH);
        c->in_pos += inchunk - c->zs.avail_in;
        *got = outchunk - c->zs.avail_out;
        int all = at_end && c->zs.avail_in == 0;
        if (zr == Z_STREAM_END) {
            if (all) c->ended = 1;
            else if (inflateReset(&c->zs) != Z_OK) return pi_err(PAGEIN_E_FORMAT, "%s: inflateReset failed", what);
        } else if (zr == Z_BUF_ERROR && all && *got == 0) {
            return pi_err(PAGEIN_E_FORMAT, "%s: gzip stream truncated after %" PRIu64 " bytes out", what, c->produced);
        } else if (zr != Z_OK && zr != Z_BUF_ERROR) {
            return pi_err(PAGEIN_E_FORMAT, "%s: gzip: %s (after %" PRIu64 " bytes out)", what,
                          c->zs.msg ? c->zs.msg : "inflate error", c->produced);
        }
#endif
    }
    c->produced += *got;
    if (dst == c->buf) c->blen = *got;
    return 0;
}

/* The compressed bytes at the cursor: from in's window when it holds them,
 * else read from in->src into the cursor's own buffer (at most 1 MiB, and
 * not into the window). *at_end: they run to the end of the stream. */
static int zcur_input(struct pi_dszcur *c, const struct pi_dszin *in, const uint8_t **p, size_t *avail, int *at_end,
                      const char *what) {
    uint64_t pos = c->in_pos, wend = in->base + in->n;
    *at_end = 1;
    *avail = 0;
    *p = (const uint8_t *)"";
    if (pos >= in->total) return 0;
    if (in->p && pos >= in->base && pos < wend) {
        *p = in->p + (pos - in->base);
        *avail = (size_t)(wend - pos);
        *at_end = wend >= in->total;
        return 0;
    }
    if (!c->ibuf || pos < c->ioff || pos >= c->ioff + c->ilen) {
        if (!in->src) return pi_err(PAGEIN_E_CHANGED, "%s: compressed data shorter than at open", what);
        uint64_t end = PI_MIN(in->total, pos + c->icap);
        if (in->p && pos < in->base) end = PI_MIN(end, in->base);
        if (!c->ibuf && !(c->ibuf = pi_malloc(c->icap))) return pi_err(-ENOMEM, "%s: out of memory", what);
        c->ilen = 0;
        int rc = pi_source_read(in->src, c->ibuf, end - pos, pos);
        if (rc < 0) return rc;
        c->ioff = pos;
        c->ilen = (size_t)(end - pos);
    }
    *p = c->ibuf + (pos - c->ioff);
    *avail = (size_t)(c->ioff + c->ilen - pos);
    *at_end = c->ioff + c->ilen >= in->total;
    return 0;
}

int pi_ds_zcur_read(struct pi_dszcur *c, const struct pi_dszin *in, uint64_t at, uint8_t *out, uint64_t len,
                    const char *what) {
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    /* behind the last piece: start over (a stream has no way back) */
    if (!c->live || at < c->produced - c->blen) rc = zcur_start(c, what);
    uint64_t end = at + len, done = 0;
    while (rc == 0) {
        /* what the kept piece holds of [at, end) */
        uint64_t p0 = c->produced - c->blen, p1 = c->produced;
        uint64_t a = PI_MAX(p0, at + done), b = PI_MIN(p1, end);
        if (a < b && a == at + done) {
            memcpy(out + done, c->buf + (a - p0), (size_t)(b - a));
            done += b - a;
        }
        if (done == len) break;
        if (c->ended) {
            rc = pi_err(PAGEIN_E_CHANGED, "%s: decompresses to %" PRIu64 " bytes, %" PRIu64 " wanted at open", what,
                        c->produced, end);
            break;
        }
        const uint8_t *ip;
        size_t avail, got = 0;
        int at_end;
        if ((rc = zcur_input(c, in, &ip, &avail, &at_end, what)) < 0) break;
        uint64_t was = c->in_pos;
        if (at + done == c->produced) { /* straight into place */
            uint64_t room = len - done;
            rc = zcur_step(c, ip, avail, at_end, out + done, room > SIZE_MAX ? SIZE_MAX : (size_t)room, &got, what);
            done += got;
        } else {
            rc = zcur_step(c, ip, avail, at_end, c->buf, c->bcap, &got, what);
        }
        /* nothing out, nothing in, not ended: the input has run out */
        if (rc == 0 && !got && !c->ended && c->in_pos == was)
            rc = pi_err(PAGEIN_E_CHANGED, "%s: compressed data shorter than at open", what);
    }
    if (rc < 0) zcur_end(c); /* the next read starts over */
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int pi_ds_zcur_next(struct pi_dszcur *c, const uint8_t *in, size_t n, uint8_t *out, size_t cap, uint64_t *got,
                    uint64_t *in_pos, const char *what) {
    pthread_mutex_lock(&c->mu);
    int rc = c->live ? 0 : zcur_start(c, what);
    size_t g = 0;
    if (rc == 0 && !c->ended) {
        uint64_t pos = PI_MIN(c->in_pos, (uint64_t)n);
        if ((rc = zcur_step(c, in + pos, n - (size_t)pos, 1, out, cap, &g, what)) == 0) {
            *in_pos = c->in_pos;
            /* a step that produced nothing and ended nothing: input is missing */
            if (!g && !c->ended && c->in_pos == n)
                rc = pi_err(PAGEIN_E_FORMAT, "%s: stream truncated after %" PRIu64 " bytes out", what, c->produced);
        }
    }
    *got = g;
    if (rc < 0) zcur_end(c);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void pi_ds_zcur_reset(struct pi_dszcur *c) {
    pthread_mutex_lock(&c->mu);
    zcur_end(c);
    pthread_mutex_unlock(&c->mu);
}

uint64_t pi_ds_zcur_pos(struct pi_dszcur *c) {
    pthread_mutex_lock(&c->mu);
    uint64_t p = c->live ? c->produced - c->blen : 0;
    pthread_mutex_unlock(&c->mu);
    return p;
}

int pi_ds_raw_group(const struct pi_dsshard *sh, const uint64_t *gfirst, uint64_t ng, uint64_t g,
                    struct pi_dsgroupinfo *gi) {
    if (g >= ng) return pi_ds_err(sh, PAGEIN_E_RANGE, g, UINT64_MAX, NULL, "no such group");
    *gi = (struct pi_dsgroupinfo){gfirst[g], gfirst[g + 1] - gfirst[g], sh->src->size};
    return 0;
}

int pi_ds_whole_ranges(const struct pi_dsshard *sh, uint64_t g, struct pi_dsrange *r, size_t cap) {
    (void)g;
    if (cap) r[0] = (struct pi_dsrange){0, sh->src->size};
    return 1;
}

int pi_ds_raw_read(const struct pi_dsshard *sh, struct pi_dszcur *cur, const struct pi_dszin *in, uint64_t lo,
                   uint64_t len, struct pi_dsgroup *grp) {
    struct pi_dsraw *G = pi_calloc(1, sizeof *G);
    if (G) G->raw = pi_malloc(len ? len : 1);
    if (!G || !G->raw) {
        pi_free(G);
        return pi_err(-ENOMEM, "%s: out of memory for %" PRIu64 " bytes", sh->name, len);
    }
    G->base = lo;
    G->len = len;
    int rc = pi_ds_zcur_read(cur, in, lo, G->raw, len, sh->name);
    if (rc < 0) {
        pi_free(G->raw);
        pi_free(G);
        return rc;
    }
    grp->impl = G;
    return 0;
}

void pi_ds_raw_free(const struct pi_dsshard *sh, struct pi_dsgroup *grp) {
    (void)sh;
    struct pi_dsraw *G = grp->impl;
    pi_free(G->raw);
    pi_free(G);
}
