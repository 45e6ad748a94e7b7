/* dcp_testutil.h - fixtures and checks shared by the Distributed
 * Checkpoint tests (test_dcp*.c; the functions are in dcp_testutil.c). */
#ifndef PAGEIN_DCP_TESTUTIL_H
#define PAGEIN_DCP_TESTUTIL_H

#include "test.h"

/* A copy of the rank4 fixture's .distcp files with meta as its .metadata,
 * in the test's temporary directory under name (emptied first): the
 * directory, or NULL after failing the test when the copy failed. */
const char *dcp_ckpt_with(const char *name, const char *meta);

/* Checks that rc is code and that the error detail holds every word of
 * words (NULL-terminated); otherwise prints what (the case), rc and the
 * detail and fails the test. */
void dcp_check_refusal(const char *what, int rc, int code, const char *const *words);

/* pagein_model_open of path under strategy s: the model, or NULL after
 * failing the test with the error. */
pagein_model *dcp_model_open(const char *path, pagein_strategy s);

/* 1 when the files at a and b were both read and hold the same bytes. */
int dcp_same_file(const char *a, const char *b);

/* Reads the box start/count (2-D) of one tensor into out (cap bytes). */
typedef int (*dcp_slice_fn)(void *ctx, const uint64_t *start, const uint64_t *count, void *out, size_t cap);

/* The rank4 fixture's "blocks" tensor (6 x 8 u16, sharded in blocks): box
 * holds its 3 x 3 box at (2, 3), across chunk boundaries in both
 * dimensions, and must equal that box of whole; then every single element
 * read through slice must equal whole's. */
static inline void dcp_check_blocks_box(dcp_slice_fn slice, void *ctx, const uint16_t box[9],
                                        const uint16_t whole[48]) {
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) CHECK_EQ(box[r * 3 + c], whole[(r + 2) * 8 + c + 3]);
    for (uint64_t r = 0; r < 6; r++)
        for (uint64_t c = 0; c < 8; c++) {
            uint64_t at[2] = {r, c}, one[2] = {1, 1};
            uint16_t v = 0;
            CHECK_OK(slice(ctx, at, one, &v, sizeof v));
            CHECK_EQ(v, whole[r * 8 + c]);
        }
}

#endif
