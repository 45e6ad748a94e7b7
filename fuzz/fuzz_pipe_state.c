/* fuzz_pipe_state.c - the pipe's resume-state parser on untrusted text
 * (a state read back with `read-samples --state @FILE`, or handed to a
 * binding): pagein_pipe_state_parse, the parser pagein_pipe_open uses. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef PAGEIN_EXPERIMENTAL /* the pipeline is in the experimental section */
#define PAGEIN_EXPERIMENTAL
#endif
#include "pagein.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    pagein_pipe_state_info in;
    if (pagein_pipe_state_parse(s, &in) == 0 && (in.remaining > in.samples || in.order > PAGEIN_ORDER_GLOBAL))
        __builtin_trap(); /* parsed => positions inside the dataset, a known order */
    free(s);
    return 0;
}
