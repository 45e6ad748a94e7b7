/* endian.h - little-endian loads and stores of unaligned bytes, the one
 * copy that the parsers of untrusted bytes (zip, safetensors, dequant,
 * pickle, Megatron, MDS, Parquet, ...) and the writers of the index and
 * metadata caches share: byte by byte, so any alignment and any host order
 * (compilers turn each into one load or store). pi_ld16/32/64 load in
 * the byte order a file states (be: big-endian), for the format that may
 * be either (GGUF). */
#ifndef PAGEIN_CORE_ENDIAN_H
#define PAGEIN_CORE_ENDIAN_H

#include <stdint.h>

static inline uint16_t pi_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t pi_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t pi_le64(const uint8_t *p) { return (uint64_t)pi_le32(p) | (uint64_t)pi_le32(p + 4) << 32; }
static inline uint16_t pi_be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t pi_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}
static inline uint64_t pi_be64(const uint8_t *p) { return (uint64_t)pi_be32(p) << 32 | (uint64_t)pi_be32(p + 4); }
static inline uint16_t pi_ld16(const uint8_t *p, int be) { return be ? pi_be16(p) : pi_le16(p); }
static inline uint32_t pi_ld32(const uint8_t *p, int be) { return be ? pi_be32(p) : pi_le32(p); }
static inline uint64_t pi_ld64(const uint8_t *p, int be) { return be ? pi_be64(p) : pi_le64(p); }
static inline void pi_st_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void pi_st_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

#endif
