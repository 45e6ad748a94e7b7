/* parquet_enc.c - the integer encodings of Parquet (Encodings.md): the
 * RLE/bit-packed hybrid (levels, booleans, dictionary indexes) and
 * DELTA_BINARY_PACKED (integers, and the lengths of DELTA_LENGTH_BYTE_ARRAY
 * and DELTA_BYTE_ARRAY). Every read is checked against the buffer; a
 * stream that ends early is PI_PQ_EFORMAT. */
#include "parquet.h"
#include "../core/endian.h"

#include <string.h>

/* 8 bytes at p, of which only avail (may be < 8) exist: the rest read as 0 */
static inline uint64_t load64(const uint8_t *p, size_t avail) {
    if (avail >= 8) return pi_le64(p);
    uint8_t w[8] = {0};
    memcpy(w, p, avail);
    return pi_le64(w);
}

static int varint(const uint8_t **pp, const uint8_t *end, uint64_t *v) {
    const uint8_t *p = *pp;
    uint64_t r = 0;
    for (unsigned s = 0; s < 64; s += 7) {
        if (p >= end) return pi_err(PI_PQ_EFORMAT, "varint runs past the end of the data");
        uint8_t b = *p++;
        r |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) {
            *pp = p;
            *v = r;
            return 0;
        }
    }
    return pi_err(PI_PQ_EFORMAT, "varint longer than 64 bits");
}

/* n values of bw bits (1..32), LSB first, from p (avail bytes there, at
 * least ceil(n * bw / 8)): a 64-bit accumulator refilled 32 bits at a time
 * (the last few bytes one by one, never past avail). */
static void unpack32(const uint8_t *p, size_t avail, int bw, uint32_t *out, size_t n) {
    if (bw == 8) {
        for (size_t i = 0; i < n; i++) out[i] = p[i];
        return;
    }
    uint64_t mask = (1ull << bw) - 1, acc = 0;
    unsigned bits = 0;
    const uint8_t *end = p + avail;
    size_t i = 0;
    /* groups of 8 values (bw bytes) while 8 bytes past the group can be
     * loaded: one unaligned 64-bit load per value, no branches */
    while (n - i >= 8 && (size_t)(end - p) >= (size_t)bw + 8) {
        for (unsigned j = 0; j < 8; j++) {
            unsigned bit = j * (unsigned)bw;
            uint64_t w;
            memcpy(&w, p + (bit >> 3), 8);
            out[i + j] = (uint32_t)((w >> (bit & 7)) & mask);
        }
        i += 8;
        p += bw;
    }
    while (i < n) {
        if (bits < (unsigned)bw) {
            if (end - p >= 4) {
                uint32_t w;
                memcpy(&w, p, 4);
                acc |= (uint64_t)w << bits;
                p += 4;
                bits += 32;
            } else {
                while (bits < (unsigned)bw && p < end) {
                    acc |= (uint64_t)*p++ << bits;
                    bits += 8;
                }
                if (bits < (unsigned)bw) bits = (unsigned)bw; /* cannot happen: avail covers n values */
            }
        }
        out[i++] = (uint32_t)(acc & mask);
        acc >>= bw;
        bits -= (unsigned)bw;
    }
}

/* One run of the RLE/bit-packed hybrid at *pp (advanced past it), of at
 * most `left` values: bit-packed (packed 1: the values' bits at r->bits,
 * r->avail bytes readable from there) or a repeated value (r->value, at
 * most bw bits). Checked against the data; take may be 0 (an empty run). */
struct run {
    int packed;
    size_t take, avail;
    const uint8_t *bits;
    uint64_t value;
};

static int next_run(const uint8_t **pp, const uint8_t *end, int bw, size_t left, struct run *r) {
    uint64_t h;
    FORWARD_IF(varint(pp, end, &h));
    const uint8_t *p = *pp;
    r->packed = (int)(h & 1);
    if (r->packed) {
        uint64_t groups = h >> 1;
        if (groups > (1ull << 28)) return pi_err(PI_PQ_EFORMAT, "RLE bit-packed run of %llu groups", (unsigned long long)groups);
        r->take = (size_t)PI_MIN(groups * 8, (uint64_t)left);
        r->avail = (size_t)(end - p);
        r->bits = p;
        /* the last run may be cut after the values that are used */
        uint64_t need = ((uint64_t)r->take * (unsigned)bw + 7) / 8;
        if (need > r->avail)
            return pi_err(PI_PQ_EFORMAT, "RLE bit-packed run needs %llu bytes, %zu left", (unsigned long long)need, r->avail);
        uint64_t run_bytes = groups * (unsigned)bw;
        *pp = p + (run_bytes <= r->avail ? run_bytes : r->avail);
        return 0;
    }
    size_t vbytes = (size_t)(bw + 7) / 8;
    if ((size_t)(end - p) < vbytes) return pi_err(PI_PQ_EFORMAT, "RLE run value past the end of the data");
    uint64_t v = 0;
    for (size_t k = 0; k < vbytes; k++) v |= (uint64_t)p[k] << (8 * k);
    *pp = p + vbytes;
    if (bw < 64 && v >> bw) return pi_err(PI_PQ_EFORMAT, "RLE run value %llu is wider than %d bits", (unsigned long long)v, bw);
    r->value = v;
    r->take = (size_t)PI_MIN(h >> 1, (uint64_t)left);
    return 0;
}

int pi_pq_rle_decode(const uint8_t *p, size_t len, int bw, uint32_t *out, size_t n) {
    const uint8_t *end = p + len;
    if (bw < 0 || bw > 32) return pi_err(PI_PQ_EFORMAT, "RLE bit width %d is over 32", bw);
    for (size_t i = 0; i < n;) {
        struct run r;
        FORWARD_IF(next_run(&p, end, bw, n - i, &r));
        if (r.packed && bw)
            unpack32(r.bits, r.avail, bw, out + i, r.take);
        else if (!r.packed && r.value)
            for (size_t k = 0; k < r.take; k++) out[i + k] = (uint32_t)r.value;
        else
            memset(out + i, 0, r.take * sizeof *out);
        i += r.take;
    }
    return 0;
}

struct delta_hdr {
    uint64_t block, mb, total;
    int64_t first;
};

static int delta_header(const uint8_t **p, const uint8_t *end, struct delta_hdr *h) {
    uint64_t zz;
    FORWARD_IF(varint(p, end, &h->block));
    FORWARD_IF(varint(p, end, &h->mb));
    FORWARD_IF(varint(p, end, &h->total));
    FORWARD_IF(varint(p, end, &zz));
    h->first = (int64_t)((zz >> 1) ^ (~(zz & 1) + 1));
    if (h->block == 0 || h->block % 128 || h->block > (1u << 20) || h->mb == 0 || h->block % h->mb ||
        (h->block / h->mb) % 32)
        return pi_err(PI_PQ_EFORMAT, "DELTA_BINARY_PACKED block of %llu values in %llu miniblocks is invalid",
                      (unsigned long long)h->block, (unsigned long long)h->mb);
    return 0;
}

int pi_pq_delta_count(const uint8_t *p, size_t len, uint64_t *count) {
    struct delta_hdr h;
    FORWARD_IF(delta_header(&p, p + len, &h));
    *count = h.total;
    return 0;
}

int pi_pq_delta_decode(const uint8_t *start, size_t len, int is32, void *out, size_t n, size_t *used) {
    const uint8_t *p = start, *end = start + len;
    struct delta_hdr h;
    FORWARD_IF(delta_header(&p, end, &h));
    if (h.total != n)
        return pi_err(PI_PQ_EFORMAT, "DELTA_BINARY_PACKED holds %llu values where %zu are expected",
                      (unsigned long long)h.total, n);
    int32_t *o32 = out;
    int64_t *o64 = out;
    uint64_t prev = (uint64_t)h.first;
    if (n) {
        if (is32) {
            if (h.first < INT32_MIN || h.first > INT32_MAX)
                return pi_err(PI_PQ_EFORMAT, "DELTA_BINARY_PACKED first value out of the INT32 range");
            o32[0] = (int32_t)h.first;
        } else {
            o64[0] = h.first;
        }
    }
    size_t i = 1;
    size_t per_mb = (size_t)(h.block / h.mb);
    int maxbw = is32 ? 32 : 64;
    while (i < n) {
        uint64_t zz;
        FORWARD_IF(varint(&p, end, &zz));
        uint64_t min_delta = (zz >> 1) ^ (~(zz & 1) + 1);
        if ((uint64_t)(end - p) < h.mb) return pi_err(PI_PQ_EFORMAT, "DELTA_BINARY_PACKED bit widths past the end");
        const uint8_t *widths = p;
        p += h.mb;
        for (uint64_t m = 0; m < h.mb && i < n; m++) {
            int bw = widths[m];
            if (bw > maxbw) return pi_err(PI_PQ_EFORMAT, "DELTA_BINARY_PACKED miniblock bit width %d", bw);
            size_t bytes = per_mb * (size_t)bw / 8;
            size_t avail = (size_t)(end - p);
            size_t take = PI_MIN(per_mb, n - i);
            /* the last miniblock is padded to its full size (Encodings.md);
             * accept one cut after its last used value */
            size_t need = (take * (size_t)bw + 7) / 8;
            if (need > avail) return pi_err(PI_PQ_EFORMAT, "DELTA_BINARY_PACKED miniblock past the end of the data");
            uint64_t mask = bw == 64 ? UINT64_MAX : (1ull << bw) - 1;
            for (size_t k = 0; k < take; k++) {
                uint64_t v = 0;
                if (bw) {
                    uint64_t bit = (uint64_t)k * (unsigned)bw;
                    size_t byte = (size_t)(bit >> 3);
                    unsigned sh = (unsigned)(bit & 7);
                    uint64_t w = load64(p + byte, avail - byte);
                    v = w >> sh;
                    if (sh && bw + sh > 64 && avail - byte > 8) v |= (uint64_t)p[byte + 8] << (64 - sh);
                    v &= mask;
                }
                prev = prev + min_delta + v; /* wrapping, as the spec asks */
                if (is32)
                    o32[i + k] = (int32_t)(uint32_t)prev;
                else
                    o64[i + k] = (int64_t)prev;
            }
            i += take;
            p += bytes <= avail ? bytes : avail;
        }
    }
    *used = (size_t)(p - start);
    return 0;
}

/* A level scan's share of a run of `take` copies of level v at i. */
static void scan_run(uint8_t v, size_t i, size_t take, uint8_t *lo, uint8_t *hi, size_t *zeros, uint64_t base,
                     uint64_t *zpos) {
    if (!take) return;
    *lo = v < *lo ? v : *lo;
    *hi = v > *hi ? v : *hi;
    if (v) return;
    if (zpos)
        for (size_t k = 0; k < take; k++) zpos[*zeros + k] = base + i + k;
    *zeros += take;
}

/* Levels (bit width 0..8) of n values: into out (one byte each) when it is
 * not NULL, their smallest, largest and zero count into *st, and with zpos
 * the positions base + i of the zeros. Runs are memset; bit-packed groups
 * of 8 values come from one 64-bit load; stored levels are counted in a
 * second pass over them (it vectorizes), unstored ones group by group (a
 * group of eight 1s of width 1, a list's continuing values, at once). */
static int levels8(const uint8_t *p, size_t len, int bw, size_t n, uint8_t *out, struct pi_pq_lvlstat *st,
                   uint64_t base, uint64_t *zpos) {
    const uint8_t *end = p + len;
    uint8_t lo = 255, hi = 0;
    size_t zeros = 0;
    if (bw < 0 || bw > 8) return pi_err(PI_PQ_EFORMAT, "level bit width %d is over 8", bw);
    uint64_t mask = (1ull << bw) - 1;
    for (size_t i = 0; i < n;) {
        struct run r;
        FORWARD_IF(next_run(&p, end, bw, n - i, &r));
        size_t take = r.take;
        if (r.packed && bw) {
            const uint8_t *q = r.bits;
            for (size_t k = 0; k < take; k += 8, q += bw) {
                uint64_t w = load64(q, (size_t)(end - q));
                if (out) {
                    for (unsigned j = 0; j < 8 && k + j < take; j++)
                        out[i + k + j] = (uint8_t)((w >> (j * (unsigned)bw)) & mask);
                } else if (bw == 1 && take - k >= 8 && (w & 0xff) == 0xff) {
                    scan_run(1, i + k, 8, &lo, &hi, &zeros, base, zpos);
                } else {
                    for (unsigned j = 0; j < 8 && k + j < take; j++)
                        scan_run((uint8_t)((w >> (j * (unsigned)bw)) & mask), i + k + j, 1, &lo, &hi, &zeros, base, zpos);
                }
            }
            for (size_t k = 0; out && k < take; k++) {
                uint8_t x = out[i + k];
                lo = x < lo ? x : lo;
                hi = x > hi ? x : hi;
                zeros += x == 0;
            }
        } else {
            uint8_t v = r.packed ? 0 : (uint8_t)r.value;
            if (out) memset(out + i, v, take);
            scan_run(v, i, take, &lo, &hi, &zeros, base, zpos);
        }
        i += take;
    }
    if (st) {
        st->min = lo;
        st->max = hi;
        st->zeros = zeros;
    }
    return 0;
}

int pi_pq_rle_decode8(const uint8_t *p, size_t len, int bw, uint8_t *out, size_t n, struct pi_pq_lvlstat *st) {
    return levels8(p, len, bw, n, out, st, 0, NULL);
}

int pi_pq_rle_scan8(const uint8_t *p, size_t len, int bw, size_t n, struct pi_pq_lvlstat *st, uint64_t base,
                    uint64_t *zpos) {
    return levels8(p, len, bw, n, NULL, st, base, zpos);
}

/* n indexes at ix gathered from dict into out; *mx gets the largest index
 * seen (an index past the dictionary reads entry 0 and fails after). */
static void gather(const uint32_t *ix, size_t n, const void *dict, uint32_t dn, unsigned width, uint8_t *out,
                   uint32_t *mx) {
    uint32_t m = *mx;
    if (width == 4) {
        const uint32_t *dv = dict;
        for (size_t i = 0; i < n; i++) {
            uint32_t k = ix[i];
            m = k > m ? k : m;
            uint32_t x = dv[k < dn ? k : 0];
            memcpy(out + 4 * i, &x, 4);
        }
    } else {
        const uint64_t *dv = dict;
        for (size_t i = 0; i < n; i++) {
            uint32_t k = ix[i];
            m = k > m ? k : m;
            uint64_t x = dv[k < dn ? k : 0];
            memcpy(out + 8 * i, &x, 8);
        }
    }
    *mx = m;
}

/* Bit-packed indexes of bit width bw (<= 24: any value's 8-byte load
 * covers it) gathered 8 at a time from a dictionary of at least 2^bw
 * entries (so no index can pass it): one unaligned load per index, no
 * branch. Returns the values done (a multiple of 8; the rest, where 8
 * bytes past a group cannot be loaded, is the caller's). */
static inline __attribute__((always_inline)) size_t gather_bp(const uint8_t *q, size_t avail, int bw,
                                                              const void *dict, unsigned width, uint8_t *o, size_t n,
                                                              uint32_t *mx) {
    uint64_t mask = (1ull << bw) - 1;
    uint32_t m = *mx;
    size_t i = 0;
    for (; n - i >= 8 && avail >= (size_t)bw + 8; i += 8, q += bw, avail -= (size_t)bw) {
        for (unsigned j = 0; j < 8; j++) {
            unsigned bit = j * (unsigned)bw;
            uint64_t w;
            memcpy(&w, q + (bit >> 3), 8);
            uint32_t k = (uint32_t)((w >> (bit & 7)) & mask);
            m = k > m ? k : m;
            if (width == 4)
                memcpy(o + 4 * (i + j), (const uint32_t *)dict + k, 4);
            else
                memcpy(o + 8 * (i + j), (const uint64_t *)dict + k, 8);
        }
    }
    *mx = m;
    return i;
}

static size_t gather_padded(const uint8_t *q, size_t avail, int bw, const void *dict, unsigned width, uint8_t *o,
                            size_t n, uint32_t *mx) {
#define PQ_GB(B)                                                                                                       \
    case B: return width == 4 ? gather_bp(q, avail, B, dict, 4, o, n, mx) : gather_bp(q, avail, B, dict, 8, o, n, mx)
    switch (bw) {
        PQ_GB(1); PQ_GB(2); PQ_GB(3); PQ_GB(4); PQ_GB(5); PQ_GB(6); PQ_GB(7); PQ_GB(8);
        PQ_GB(9); PQ_GB(10); PQ_GB(11); PQ_GB(12); PQ_GB(13); PQ_GB(14); PQ_GB(15); PQ_GB(16);
    default: return 0;
    }
#undef PQ_GB
}

int pi_pq_dict_gather(const uint8_t *p, size_t len, int bw, const void *dict, uint32_t dn, uint64_t dcap,
                      unsigned width, void *out, size_t n) {
    const uint8_t *end = p + len;
    uint8_t *o = out;
    if (bw < 0 || bw > 32) return pi_err(PI_PQ_EFORMAT, "RLE bit width %d is over 32", bw);
    if (width != 4 && width != 8) return pi_err(PAGEIN_E_INVALID, "dictionary gather of width %u", width);
    if (!dn) return pi_err(PI_PQ_EFORMAT, "dictionary index into an empty dictionary");
    uint32_t mx = 0, tmp[256];
    for (size_t i = 0; i < n;) {
        struct run r;
        FORWARD_IF(next_run(&p, end, bw, n - i, &r));
        size_t take = r.take;
        if (r.packed) {
            const uint8_t *q = r.bits;
            size_t k = 0;
            /* a dictionary padded to 2^bw entries: straight from the bits */
            if (bw >= 1 && bw <= 16 && dcap >= (1ull << bw)) {
                k = gather_padded(q, r.avail, bw, dict, width, o + i * width, take, &mx);
                q += k / 8 * (size_t)bw;
            }
            /* else 256 values (32 groups: 32 * bw bytes) at a time, through
             * a buffer that stays in the first-level cache */
            for (; k < take; k += 256) {
                size_t m = PI_MIN((size_t)256, take - k);
                if (bw == 0)
                    memset(tmp, 0, m * sizeof *tmp);
                else
                    unpack32(q, (size_t)(end - q), bw, tmp, m);
                gather(tmp, m, dict, dn, width, o + (i + k) * width, &mx);
                q += 32 * (size_t)bw;
            }
        } else if (take) {
            if (r.value >= dn)
                return pi_err(PI_PQ_EFORMAT, "dictionary index %llu of a %u-entry dictionary", (unsigned long long)r.value, dn);
            const uint8_t *x = (const uint8_t *)dict + (size_t)r.value * width;
            for (size_t k = 0; k < take; k++) memcpy(o + (i + k) * width, x, width);
        }
        i += take;
    }
    if (mx >= dn) return pi_err(PI_PQ_EFORMAT, "dictionary index %u of a %u-entry dictionary", mx, dn);
    return 0;
}
