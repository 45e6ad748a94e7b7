/* thrift.h - a bounds-checked reader of the Thrift compact protocol over a
 * buffer (private; used by the Parquet reader, src/data/parquet*.c).
 *
 * The compact protocol, as Parquet's footer and page headers use it:
 *  - a struct is a run of fields ended by a zero byte (STOP); a field header
 *    byte holds the id delta from the previous field in its high nibble and
 *    the type in its low nibble; a zero delta means a zigzag varint i16 id
 *    follows;
 *  - i16/i32/i64 are zigzag LEB128 varints, a byte is one byte, a double is
 *    8 bytes little-endian, binary/string is a varint length then the bytes;
 *    a bool field carries its value in the type nibble (1 true, 2 false), a
 *    bool list element is one byte;
 *  - list/set: one byte, size in the high nibble (15: a varint size follows)
 *    and element type in the low nibble; map: a varint size, then (when the
 *    size is not 0) one byte of key type << 4 | value type.
 *
 * Every read checks the bytes left; every list or map size is checked
 * against the bytes left before the caller may allocate for it (an element
 * takes at least one byte, a map entry two), so no count can ask for more
 * memory than the input could describe. Nesting is bounded by
 * PI_THRIFT_MAX_DEPTH. No I/O, no allocation. Errors return PI_THRIFT_EFORMAT
 * (PAGEIN_E_FORMAT) with a detail naming the byte offset. */
#ifndef PAGEIN_THRIFT_H
#define PAGEIN_THRIFT_H

#include <stddef.h>
#include <stdint.h>

#include "pagein.h"

#define PI_THRIFT_EFORMAT PAGEIN_E_FORMAT
#define PI_THRIFT_MAX_DEPTH 64

enum {
    PI_TT_STOP = 0,
    PI_TT_TRUE = 1,
    PI_TT_FALSE = 2,
    PI_TT_BYTE = 3,
    PI_TT_I16 = 4,
    PI_TT_I32 = 5,
    PI_TT_I64 = 6,
    PI_TT_DOUBLE = 7,
    PI_TT_BINARY = 8,
    PI_TT_LIST = 9,
    PI_TT_SET = 10,
    PI_TT_MAP = 11,
    PI_TT_STRUCT = 12,
    PI_TT_UUID = 13
};

struct pi_thrift {
    const uint8_t *base, *p, *end;
    unsigned depth;
};

void pi_thrift_init(struct pi_thrift *t, const void *buf, size_t len);
static inline size_t pi_thrift_pos(const struct pi_thrift *t) { return (size_t)(t->p - t->base); }

/* Structs: begin (depth + 1, bounded) ... fields ... end (depth - 1). */
int pi_thrift_struct_begin(struct pi_thrift *t);
void pi_thrift_struct_end(struct pi_thrift *t);
/* Next field header: *type PI_TT_STOP at the end of the struct; *id is
 * updated from the previous id (start a struct with *id = 0). */
int pi_thrift_field(struct pi_thrift *t, int16_t *id, int *type);

int pi_thrift_varint(struct pi_thrift *t, uint64_t *v);
int pi_thrift_i64(struct pi_thrift *t, int64_t *v);
/* i32/i16 values, also accepting an i16/i32 wire type where the schema
 * says the other (writers differ); range-checked. */
int pi_thrift_i32(struct pi_thrift *t, int32_t *v);
/* A field's integer value of wire type `type` (BYTE, I16, I32, I64). */
int pi_thrift_int(struct pi_thrift *t, int type, int64_t *v);
/* A bool field's value from its type nibble, or a bool list element. */
int pi_thrift_bool(struct pi_thrift *t, int type, int in_list, int *v);
int pi_thrift_binary(struct pi_thrift *t, const uint8_t **p, uint32_t *len);
/* List/set header; *n checked against the bytes left. */
int pi_thrift_list(struct pi_thrift *t, int *elem_type, uint32_t *n);
/* Skips one value of the given type (nested values bounded by depth). */
int pi_thrift_skip(struct pi_thrift *t, int type);

#endif
