/* thrift.c - the Thrift compact-protocol reader (thrift.h). Written from the
 * Thrift compact protocol specification; no I/O, no allocation. */
#include "thrift.h"

#include <string.h>

#include "../internal.h"

#define TERR(t, ...) pi_err(PI_THRIFT_EFORMAT, __VA_ARGS__)

void pi_thrift_init(struct pi_thrift *t, const void *buf, size_t len) {
    t->base = t->p = (const uint8_t *)buf;
    t->end = t->p + len;
    t->depth = 0;
}

int pi_thrift_varint(struct pi_thrift *t, uint64_t *v) {
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (t->p >= t->end) return TERR(t, "thrift: varint runs past the end at byte %zu", pi_thrift_pos(t));
        uint8_t b = *t->p++;
        if (shift == 63 && (b & 0x7e)) return TERR(t, "thrift: varint overflows 64 bits at byte %zu", pi_thrift_pos(t));
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return 0;
        }
    }
    return TERR(t, "thrift: varint longer than 10 bytes at byte %zu", pi_thrift_pos(t));
}

int pi_thrift_i64(struct pi_thrift *t, int64_t *v) {
    uint64_t u;
    FORWARD_IF(pi_thrift_varint(t, &u));
    *v = (int64_t)((u >> 1) ^ (~(u & 1) + 1));
    return 0;
}

int pi_thrift_int(struct pi_thrift *t, int type, int64_t *v) {
    switch (type) {
    case PI_TT_BYTE:
        if (t->p >= t->end) return TERR(t, "thrift: byte past the end at byte %zu", pi_thrift_pos(t));
        *v = (int8_t)*t->p++;
        return 0;
    case PI_TT_I16:
    case PI_TT_I32:
    case PI_TT_I64:
        return pi_thrift_i64(t, v);
    default:
        return TERR(t, "thrift: integer expected, found type %d at byte %zu", type, pi_thrift_pos(t));
    }
}

int pi_thrift_i32(struct pi_thrift *t, int32_t *v) {
    int64_t x;
    FORWARD_IF(pi_thrift_i64(t, &x));
    if (x < INT32_MIN || x > INT32_MAX) return TERR(t, "thrift: i32 out of range at byte %zu", pi_thrift_pos(t));
    *v = (int32_t)x;
    return 0;
}

int pi_thrift_bool(struct pi_thrift *t, int type, int in_list, int *v) {
    if (in_list) {
        if (t->p >= t->end) return TERR(t, "thrift: bool past the end at byte %zu", pi_thrift_pos(t));
        *v = *t->p++ == PI_TT_TRUE;
        return 0;
    }
    if (type != PI_TT_TRUE && type != PI_TT_FALSE)
        return TERR(t, "thrift: bool expected, found type %d at byte %zu", type, pi_thrift_pos(t));
    *v = type == PI_TT_TRUE;
    return 0;
}

int pi_thrift_binary(struct pi_thrift *t, const uint8_t **p, uint32_t *len) {
    uint64_t n;
    FORWARD_IF(pi_thrift_varint(t, &n));
    if (n > (uint64_t)(t->end - t->p))
        return TERR(t, "thrift: string of %llu bytes runs past the end at byte %zu", (unsigned long long)n,
                    pi_thrift_pos(t));
    *p = t->p;
    *len = (uint32_t)n;
    t->p += n;
    return 0;
}

int pi_thrift_list(struct pi_thrift *t, int *elem_type, uint32_t *n) {
    if (t->p >= t->end) return TERR(t, "thrift: list header past the end at byte %zu", pi_thrift_pos(t));
    uint8_t h = *t->p++;
    uint64_t size = h >> 4;
    if (size == 15) FORWARD_IF(pi_thrift_varint(t, &size));
    *elem_type = h & 15;
    /* every element takes at least one byte */
    if (size > (uint64_t)(t->end - t->p))
        return TERR(t, "thrift: list of %llu elements is longer than the %zu bytes left at byte %zu",
                    (unsigned long long)size, (size_t)(t->end - t->p), pi_thrift_pos(t));
    *n = (uint32_t)size;
    return 0;
}

int pi_thrift_struct_begin(struct pi_thrift *t) {
    if (t->depth >= PI_THRIFT_MAX_DEPTH)
        return pi_err(PAGEIN_E_LIMIT, "thrift: nesting deeper than %d at byte %zu", PI_THRIFT_MAX_DEPTH,
                      pi_thrift_pos(t));
    t->depth++;
    return 0;
}

void pi_thrift_struct_end(struct pi_thrift *t) {
    if (t->depth) t->depth--;
}

int pi_thrift_field(struct pi_thrift *t, int16_t *id, int *type) {
    if (t->p >= t->end) return TERR(t, "thrift: struct not terminated before the end at byte %zu", pi_thrift_pos(t));
    uint8_t h = *t->p++;
    *type = h & 15;
    if (*type == PI_TT_STOP) return 0;
    int delta = h >> 4;
    if (delta) {
        int nid = *id + delta;
        if (nid > INT16_MAX) return TERR(t, "thrift: field id overflows at byte %zu", pi_thrift_pos(t));
        *id = (int16_t)nid;
    } else {
        int64_t v;
        FORWARD_IF(pi_thrift_i64(t, &v));
        if (v < INT16_MIN || v > INT16_MAX) return TERR(t, "thrift: field id out of range at byte %zu", pi_thrift_pos(t));
        *id = (int16_t)v;
    }
    if (*type > PI_TT_UUID) return TERR(t, "thrift: unknown type %d at byte %zu", *type, pi_thrift_pos(t));
    return 0;
}

static int skip_n(struct pi_thrift *t, size_t n) {
    if (n > (size_t)(t->end - t->p)) return TERR(t, "thrift: value runs past the end at byte %zu", pi_thrift_pos(t));
    t->p += n;
    return 0;
}

static int skip_value(struct pi_thrift *t, int type, int in_list) {
    uint64_t u;
    switch (type) {
    case PI_TT_TRUE:
    case PI_TT_FALSE:
        return in_list ? skip_n(t, 1) : 0;
    case PI_TT_BYTE:
        return skip_n(t, 1);
    case PI_TT_I16:
    case PI_TT_I32:
    case PI_TT_I64:
        return pi_thrift_varint(t, &u);
    case PI_TT_DOUBLE:
        return skip_n(t, 8);
    case PI_TT_UUID:
        return skip_n(t, 16);
    case PI_TT_BINARY: {
        const uint8_t *p;
        uint32_t n;
        return pi_thrift_binary(t, &p, &n);
    }
    case PI_TT_LIST:
    case PI_TT_SET: {
        int et;
        uint32_t n;
        FORWARD_IF(pi_thrift_list(t, &et, &n));
        if (et == PI_TT_STOP && n) return TERR(t, "thrift: list of type 0 at byte %zu", pi_thrift_pos(t));
        FORWARD_IF(pi_thrift_struct_begin(t));
        for (uint32_t i = 0; i < n; i++) FORWARD_IF(skip_value(t, et, 1));
        pi_thrift_struct_end(t);
        return 0;
    }
    case PI_TT_MAP: {
        FORWARD_IF(pi_thrift_varint(t, &u));
        if (u == 0) return 0;
        if (t->p >= t->end) return TERR(t, "thrift: map header past the end at byte %zu", pi_thrift_pos(t));
        uint8_t kv = *t->p++;
        if (u > (uint64_t)(t->end - t->p) / 2)
            return TERR(t, "thrift: map of %llu entries is longer than the bytes left at byte %zu",
                        (unsigned long long)u, pi_thrift_pos(t));
        int kt = kv >> 4, vt = kv & 15;
        if (kt == PI_TT_STOP || vt == PI_TT_STOP || kt > PI_TT_UUID || vt > PI_TT_UUID)
            return TERR(t, "thrift: bad map types at byte %zu", pi_thrift_pos(t));
        FORWARD_IF(pi_thrift_struct_begin(t));
        for (uint64_t i = 0; i < u; i++) {
            FORWARD_IF(skip_value(t, kt, 1));
            FORWARD_IF(skip_value(t, vt, 1));
        }
        pi_thrift_struct_end(t);
        return 0;
    }
    case PI_TT_STRUCT: {
        FORWARD_IF(pi_thrift_struct_begin(t));
        int16_t id = 0;
        int ft;
        for (;;) {
            FORWARD_IF(pi_thrift_field(t, &id, &ft));
            if (ft == PI_TT_STOP) break;
            FORWARD_IF(skip_value(t, ft, 0));
        }
        pi_thrift_struct_end(t);
        return 0;
    }
    default:
        return TERR(t, "thrift: cannot skip type %d at byte %zu", type, pi_thrift_pos(t));
    }
}

int pi_thrift_skip(struct pi_thrift *t, int type) { return skip_value(t, type, 0); }
