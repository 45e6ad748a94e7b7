/*
 * test.h - the unit-test registry (liburing/sds style).
 *
 * A test file defines tests with TEST(name) { ... return PASS; } and they
 * register themselves at start-up, so adding a test file needs no edit
 * elsewhere. CHECK* print file:line and the expression, mark the test
 * failed and carry on. A test returns PASS, or SKIP_BECAUSE("why").
 * Tests run from the repository root; real test files are read from
 * pt_testdata("safetensors/...") = tests/data/real/... (override
 * with PAGEIN_TESTDATA).
 */
#ifndef PAGEIN_TEST_H
#define PAGEIN_TEST_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pagein.h"

#define PASS 0
#define FAIL 1
#define SKIP 77

typedef int (*pt_fn)(void);
void pt_register(const char *name, pt_fn fn);
extern int pt_failed;

#define TEST(name)                                                              \
    static int test_##name(void);                                               \
    __attribute__((constructor)) static void pt_reg_##name(void) {              \
        pt_register(#name, test_##name);                                        \
    }                                                                           \
    static int test_##name(void)

#define CHECK(expr)                                                             \
    do {                                                                        \
        if (!(expr)) {                                                          \
            printf("    %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #expr);   \
            pt_failed = 1;                                                      \
        }                                                                       \
    } while (0)

#define CHECK_EQ(a, b)                                                          \
    do {                                                                        \
        long long a_ = (long long)(a), b_ = (long long)(b);                     \
        if (a_ != b_) {                                                         \
            printf("    %s:%d: CHECK_EQ(%s, %s) failed: %lld != %lld\n", __FILE__, \
                   __LINE__, #a, #b, a_, b_);                                   \
            pt_failed = 1;                                                      \
        }                                                                       \
    } while (0)

#define CHECK_STR(a, b)                                                         \
    do {                                                                        \
        const char *a_ = (a), *b_ = (b);                                        \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                \
            printf("    %s:%d: CHECK_STR(%s, %s) failed: \"%s\" != \"%s\"\n",      \
                   __FILE__, __LINE__, #a, #b, a_ ? a_ : "(null)",              \
                   b_ ? b_ : "(null)");                                         \
            pt_failed = 1;                                                      \
        }                                                                       \
    } while (0)

/* Checks rc == 0 and prints pagein's detail otherwise. */
#define CHECK_OK(rc)                                                            \
    do {                                                                        \
        int rc_ = (rc);                                                         \
        if (rc_ != 0) {                                                         \
            printf("    %s:%d: %s returned %d (%s): %s\n", __FILE__, __LINE__, #rc, \
                   rc_, pagein_strerror(rc_), pagein_last_error_detail());      \
            pt_failed = 1;                                                      \
        }                                                                       \
    } while (0)

#define SKIP_BECAUSE(...)                                                       \
    do {                                                                        \
        printf("    skip: ");                                                   \
        printf(__VA_ARGS__);                                                    \
        printf("\n");                                                           \
        return SKIP;                                                            \
    } while (0)

/* A fixture shared by the tests whose names start with prefix (servers that
 * take seconds to start): the runner calls start() once, in its own
 * process, before the first such test it will run, so that every test
 * process inherits it; it is stopped when the runner exits. Register from a
 * constructor. PAGEIN_TEST_SHARED=0 leaves it to each test. */
void pt_register_shared(const char *prefix, void (*start)(void));

/* Path of a file under the shared real test data (static buffer per call
 * ring of 8); pt_have_testdata() is 0 when the folder is missing. */
const char *pt_testdata(const char *rel);
int pt_have_testdata(void);
/* A fresh private temporary directory for this run (removed at exit), and
 * a path inside it (ring of 8 static buffers). */
const char *pt_tmpdir(void);
const char *pt_tmppath(const char *name);
/* Reads a whole file into a malloc'd buffer; returns NULL on failure. */
void *pt_read_file(const char *path, size_t *len);
/* Writes a buffer to path; returns 0 or -1. */
int pt_write_file(const char *path, const void *buf, size_t len);
/* The transparent-huge-page flag of the mapping holding address a, from
 * /proc/self/smaps: "hg" (MADV_HUGEPAGE), "nh" (MADV_NOHUGEPAGE), ""
 * (neither) or "?" (not found); written into out, which is returned. */
const char *pt_vma_thp(const void *a, char *out, size_t cap);
/* Seed for randomised tests (PAGEIN_SEED or time); printed once. */
uint64_t pt_seed(void);
uint64_t pt_rand(uint64_t *state); /* splitmix64 */

/* AddressSanitizer intercepts mlock()/munlock() as no-ops (locking would
 * pin its shadow memory), so lock tests cannot observe anything there: they
 * skip with SKIP_IF_ASAN(). */
#if defined(__SANITIZE_ADDRESS__)
#define ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_BUILD 1
#endif
#endif
#ifndef ASAN_BUILD
#define ASAN_BUILD 0
#endif
#define SKIP_IF_ASAN() \
    do { if (ASAN_BUILD) SKIP_BECAUSE("AddressSanitizer turns mlock into a no-op"); } while (0)

#endif
