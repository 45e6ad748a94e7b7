/* fuzz_open_file.c - safetensors, GGUF and torch checkpoints opened from a
 * file (a memfd through /proc/self/fd), the path real users take: the
 * mapping, the parse under the truncation guard, the allocation journal.
 * The in-memory targets never reach those.
 *
 * Each input is opened twice. First whole: on success every tensor is
 * copied out with pagein_tensor_copy, then the file is cut short (at a
 * point derived from the input) and copied again: every copy either works
 * or fails with PAGEIN_E_TRUNCATED, and pagein_file_check reports the
 * truncation. Then the file is restored and opened again with the file
 * truncated from inside the parse, when the journal records its k-th
 * block (pi_journal_hook; k from the input): the parser faults mid-way,
 * the guard abandons it and the journal must free every block it made
 * (LeakSanitizer checks) - or the parse was already done and the open
 * works or fails cleanly. Format detection is the library's (the first
 * bytes), so the corpus is plain model files.
 *
 * White-box: includes src/internal.h for pi_journal_hook. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../src/internal.h"

#define ASSERT(c) \
    do {          \
        if (!(c)) abort(); \
    } while (0)

static uint64_t mix(const uint8_t *d, size_t n) {
    uint64_t h = 1469598103934665603ull ^ n;
    for (size_t i = 0; i < n; i++) h = (h ^ d[i]) * 1099511628211ull;
    return h ^ (h >> 31);
}

struct cut {
    int fd;
    off_t to;
};

static void cut_now(void *arg) {
    struct cut *c = arg;
    if (ftruncate(c->fd, c->to) != 0) abort();
}

static void copy_all(const pagein_file *f, int truncated) {
    uint8_t buf[512];
    for (size_t i = 0; i < pagein_tensor_count(f); i++) {
        const pagein_tensor *t = pagein_tensor_at(f, i);
        for (uint64_t off = 0; off < t->nbytes && off < 8192; off += sizeof buf) {
            size_t n = t->nbytes - off < sizeof buf ? (size_t)(t->nbytes - off) : sizeof buf;
            int rc = pagein_tensor_copy(f, t, off, buf, n);
            ASSERT(rc == 0 || (truncated && rc == PAGEIN_E_TRUNCATED) || rc == PAGEIN_E_RANGE ||
                   rc == PAGEIN_E_INVALID || rc == PAGEIN_E_UNSUPPORTED);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("fuzz_open_file", MFD_CLOEXEC);
    if (fd < 0) return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    uint64_t h = mix(data, size);
    off_t cut_to = size ? (off_t)(h % size) : 0;

    /* 1: whole, then cut under an open file */
    pagein_file *f = NULL;
    if (pagein_open(&f, path, NULL) == 0) {
        copy_all(f, 0);
        ASSERT(pagein_file_check(f) == 0);
        if (size && ftruncate(fd, cut_to) == 0) {
            copy_all(f, 1);
            int rc = pagein_file_check(f);
            ASSERT(rc == PAGEIN_E_TRUNCATED || rc == PAGEIN_E_CHANGED);
        }
        pagein_close(f);
        f = NULL;
        if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) {
            close(fd);
            return 0;
        }
    }

    /* 2: cut from inside the parse, at the journal's k-th block */
    struct cut c = {fd, (off_t)((h >> 20) % (size + 1))};
    c.to &= ~(off_t)4095; /* a page boundary below: the rest faults */
    pi_journal_hook(1 + (long)((h >> 40) % 64), cut_now, &c);
    int rc = pagein_open(&f, path, NULL);
    pi_journal_hook(0, NULL, NULL);
    if (rc == 0) pagein_close(f);
    close(fd);
    return 0;
}
