/* test_pipe_memory.c - what the pipeline's memory_peak counts: the two
 * units' fetch buffers as held (docs/TRAINING-DATA.md, "Reading and
 * memory"), on a records dataset whose units have a known size. */
#include "test.h"

#include <stdlib.h>

#define REC (64u << 10)
#define NREC 96u /* 6 MiB */

static const char *write_records(void) {
    const char *path = pt_tmppath("pipe_memory.rec");
    uint8_t *b = malloc((size_t)REC * NREC);
    if (!b) return NULL;
    for (size_t i = 0; i < (size_t)REC * NREC; i++) b[i] = (uint8_t)(i * 131 + i / REC);
    int rc = pt_write_file(path, b, (size_t)REC * NREC);
    free(b);
    return rc == 0 ? path : NULL;
}

/* One block epoch through a pipe of one group a unit (window 1): the
 * pipe's memory_peak, or 0 on a failure (reported). */
static uint64_t block_epoch_peak(const char *path, uint64_t group_bytes, uint64_t groups) {
    pagein_dataset_opts dop = PAGEIN_DATASET_OPTS_INIT;
    dop.record_bytes = REC;
    dop.group_bytes = group_bytes;
    pagein_dataset *d = NULL;
    CHECK_OK(pagein_dataset_open(&d, path, &dop));
    if (!d) return 0;
    CHECK_EQ(pagein_dataset_group_count(d), groups);
    pagein_pipe_opts o = PAGEIN_PIPE_OPTS_INIT;
    o.order = PAGEIN_ORDER_BLOCK;
    o.window = 1;
    pagein_pipe *p = NULL;
    CHECK_OK(pagein_pipe_open(&p, d, &o));
    pagein_item it;
    uint64_t n = 0;
    while (p && pagein_pipe_next(p, &it) == 1) n++;
    CHECK_EQ(n, NREC);
    pagein_pipe_stats st = {0};
    if (p) pagein_pipe_get_stats(p, &st);
    CHECK_EQ(st.units, groups);
    pagein_pipe_close(p);
    pagein_dataset_close(d);
    return st.memory_peak;
}

/* Units of 1 MiB live on the heap: two of them are 2 MiB. Units of 3 MiB
 * are blocks of the memory policy, 4 MiB each (2 MiB pieces): 8 MiB, not
 * the 6 MiB the fetches needed. The reader's memory_bound still holds it. */
TEST(pipe_memory_peak_units) {
    const char *path = write_records();
    CHECK(path != NULL);
    if (!path) return FAIL;
    CHECK_EQ(block_epoch_peak(path, 1u << 20, 6), 2u << 20);
    CHECK_EQ(block_epoch_peak(path, 3u << 20, 2), 8u << 20);
    pagein_dataset_opts dop = PAGEIN_DATASET_OPTS_INIT;
    dop.record_bytes = REC;
    dop.group_bytes = 3u << 20;
    pagein_dataset *d = NULL;
    CHECK_OK(pagein_dataset_open(&d, path, &dop));
    if (!d) return FAIL;
    pagein_reader_opts ro = PAGEIN_READER_OPTS_INIT;
    ro.kind = PAGEIN_READER_BLOCK;
    ro.buffer_blocks = 2; /* a window of one group */
    pagein_reader *r = NULL;
    CHECK_OK(pagein_reader_open(&r, d, &ro));
    pagein_sample s;
    uint64_t n = 0;
    while (r && pagein_reader_next(r, &s) == 1) n++;
    CHECK_EQ(n, NREC);
    pagein_reader_stats st;
    memset(&st, 0, sizeof st);
    if (r) pagein_reader_get_stats(r, &st);
    CHECK_EQ(st.memory_peak, 8u << 20);
    CHECK(st.memory_peak <= st.memory_bound);
    if (st.memory_peak > st.memory_bound)
        printf("    peak %" PRIu64 " > bound %" PRIu64 "\n", st.memory_peak, st.memory_bound);
    pagein_reader_close(r);
    pagein_dataset_close(d);
    return PASS;
}
