/* gguf_testutil.h - helpers shared by the GGUF tests: a byte builder for
 * hand-made (often malformed) GGUF images, and the comparison with the
 * independent Python reader tests/gguf_ref.py. */
#ifndef PAGEIN_GGUF_TESTUTIL_H
#define PAGEIN_GGUF_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "pagein.h"

struct gt_buf {
    uint8_t *p;
    size_t n, cap;
    int v1; /* lengths and counts as u32 */
    int be; /* big-endian */
};

void gt_bytes(struct gt_buf *b, const void *p, size_t n);
void gt_u8(struct gt_buf *b, uint8_t v);
void gt_u32(struct gt_buf *b, uint32_t v);
void gt_u64(struct gt_buf *b, uint64_t v);
void gt_len(struct gt_buf *b, uint64_t v); /* u32 in v1, else u64 */
void gt_str(struct gt_buf *b, const char *s);
/* GGUF header: magic, version, n_tensors, n_kv. */
void gt_header(struct gt_buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv);
/* One tensor info; ne innermost first. */
void gt_tinfo(struct gt_buf *b, const char *name, uint32_t nd, const uint64_t *ne, uint32_t type, uint64_t off);
/* Zero padding to a multiple of a. */
void gt_pad(struct gt_buf *b, size_t a);
void gt_free(struct gt_buf *b);

/* Opens path with pagein, writes pagein's view as JSON and runs
 * `gguf_ref.py --compare`. Returns 0 if they agree, 1 otherwise (details
 * printed), 77 when /usr/bin/python3 is missing. */
int gt_ref_compare(const char *path);

#endif
