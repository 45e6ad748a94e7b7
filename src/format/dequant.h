/* dequant.h - internal entry points of dequant.c, shared with the
 * converter (src/ops/convert.c). */
#ifndef PAGEIN_DEQUANT_H
#define PAGEIN_DEQUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pagein.h"

/* Exact F16 -> F32; F32 -> F16/BF16 round to nearest even (NaN stays NaN). */
float pi_f16_to_f32(uint16_t h);
uint16_t pi_f32_to_f16(float f);
float pi_bf16_to_f32(uint16_t b);
uint16_t pi_f32_to_bf16(float f);

/* Whether pi_dequant handles dtype d (a supported block type or a plain
 * numeric type). */
bool pi_dequant_supported(pagein_dtype d);

/* src_len bytes of type in (a whole number of blocks or elements; swapped:
 * plain elements in the other byte order) to out (F32, F16, BF16) at dst,
 * which must hold dst_len >= the output bytes. *nout (may be NULL) gets the
 * element count. name is used in messages. Returns 0 or PAGEIN_E_*. */
int pi_dequant(const char *name, pagein_dtype in, int swapped, const void *src, size_t src_len, pagein_dtype out,
               void *dst, size_t dst_len, uint64_t *nout);

#endif
