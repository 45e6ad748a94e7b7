/* arrow_fb.c - a small bounds-checked flatbuffers reader, enough for the
 * Arrow IPC metadata (Message, Schema, Footer).
 *
 * The wire format (flatbuffers' "internals" document): the buffer starts
 * with a uint32 offset to the root table. A table starts with an int32
 * soffset: its vtable is at table - soffset. A vtable is uint16 vtable
 * bytes, uint16 table bytes, then one uint16 per field slot: the field's
 * offset from the table start, 0 = absent (the default applies). Offsets
 * to strings, vectors and sub-tables are uint32, relative to where they
 * are stored. Vectors and strings start with a uint32 count; structs sit
 * inline. Unions are two slots: a uint8 type, then the offset.
 *
 * Every position is checked against the buffer before it is read, and all
 * reads go through memcpy (no alignment assumptions). Nothing here
 * recurses or loops over input-controlled counts. */
#include "arrow.h"

static int fb_err(const char *what, uint64_t pos) {
    return pi_err(PI_ARROW_E_FORMAT, "flatbuffer: %s at byte %llu", what, (unsigned long long)pos);
}

static int table_at(const struct pi_fb *b, uint64_t pos, struct pi_fbt *t) {
    if (pos > b->n || b->n - pos < 4) return fb_err("table out of bounds", pos);
    int32_t so = (int32_t)pi_le32(b->p + pos);
    int64_t vt = (int64_t)pos - so;
    if (vt < 0 || (uint64_t)vt > b->n || b->n - (uint64_t)vt < 4) return fb_err("vtable out of bounds", pos);
    uint16_t vtlen = pi_le16(b->p + vt), tlen = pi_le16(b->p + vt + 2);
    if (vtlen < 4 || (vtlen & 1) || (uint64_t)vt + vtlen > b->n) return fb_err("bad vtable size", (uint64_t)vt);
    if (tlen < 4 || pos + tlen > b->n) return fb_err("bad table size", pos);
    t->b = b;
    t->pos = (uint32_t)pos;
    t->vt = (uint32_t)vt;
    t->vtlen = vtlen;
    t->tlen = tlen;
    return 0;
}

int pi_fb_root(const struct pi_fb *b, struct pi_fbt *t) {
    if (b->n < 8) return fb_err("buffer too short", 0);
    return table_at(b, pi_fb_ld32(b->p), t);
}

/* Position of the field of slot (size bytes, inside the table), 0 when
 * absent, or an error. */
static int64_t field(const struct pi_fbt *t, unsigned slot, unsigned size) {
    uint32_t at = 4 + 2 * slot;
    if (at + 2 > t->vtlen) return 0;
    uint16_t off = pi_le16(t->b->p + t->vt + at);
    if (off == 0) return 0;
    if (off < 4 || (uint32_t)off + size > t->tlen) return fb_err("field outside its table", t->pos);
    return (int64_t)t->pos + off;
}

#define SCALAR(fn, type)                                                          \
    int fn(const struct pi_fbt *t, unsigned slot, type def, type *v) {            \
        int64_t at = field(t, slot, sizeof(type));                                \
        if (at < 0) return (int)at;                                               \
        if (at == 0) *v = def;                                                    \
        else memcpy(v, t->b->p + at, sizeof(type));                               \
        return 0;                                                                 \
    }
SCALAR(pi_fb_i64, int64_t)
SCALAR(pi_fb_i32, int32_t)
SCALAR(pi_fb_i16, int16_t)
SCALAR(pi_fb_u8, uint8_t)

/* Follows the uoffset of slot: 1 and *target, 0 absent. */
static int deref(const struct pi_fbt *t, unsigned slot, uint64_t *target) {
    int64_t at = field(t, slot, 4);
    if (at <= 0) return (int)at;
    uint64_t tg = (uint64_t)at + pi_fb_ld32(t->b->p + at);
    if (tg >= t->b->n) return fb_err("offset out of bounds", (uint64_t)at);
    *target = tg;
    return 1;
}

int pi_fb_table(const struct pi_fbt *t, unsigned slot, struct pi_fbt *sub) {
    uint64_t tg = 0;
    int rc = deref(t, slot, &tg);
    if (rc <= 0) return rc;
    FORWARD_IF(table_at(t->b, tg, sub));
    return 1;
}

static int vec_at(const struct pi_fb *b, uint64_t pos, uint32_t elem, uint32_t *data, uint32_t *count) {
    if (b->n - pos < 4) return fb_err("vector length out of bounds", pos);
    uint64_t c = pi_fb_ld32(b->p + pos);
    if (c * elem > b->n - pos - 4) return fb_err("vector longer than the buffer", pos);
    *data = (uint32_t)pos + 4;
    *count = (uint32_t)c;
    return 1;
}

int pi_fb_vector(const struct pi_fbt *t, unsigned slot, uint32_t elem, uint32_t *data, uint32_t *count) {
    uint64_t tg = 0;
    *count = 0;
    *data = 0;
    int rc = deref(t, slot, &tg);
    if (rc <= 0) return rc;
    return vec_at(t->b, tg, elem, data, count);
}

int pi_fb_vec_table(const struct pi_fb *b, uint32_t data, uint32_t i, struct pi_fbt *sub) {
    uint64_t at = (uint64_t)data + 4ull * i; /* inside the vector: checked by pi_fb_vector */
    uint64_t tg = at + pi_fb_ld32(b->p + at);
    if (tg >= b->n) return fb_err("offset out of bounds", at);
    return table_at(b, tg, sub);
}

int pi_fb_string(const struct pi_fbt *t, unsigned slot, const char **s, uint32_t *len) {
    uint32_t data, count;
    int rc = pi_fb_vector(t, slot, 1, &data, &count);
    if (rc <= 0) return rc;
    *s = (const char *)t->b->p + data;
    *len = count;
    return 1;
}
