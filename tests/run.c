/* run.c - runs the registered unit tests: `run` for all, `run NAME...` for
 * some. Prints one line per test and, last, "N passed, N failed, N skipped".
 * Exit status is non-zero if any test failed. */
#include "test.h"

#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct entry {
    const char *name;
    pt_fn fn;
};

static struct entry *tests;
static size_t ntests, captests;
int pt_failed;

void pt_register(const char *name, pt_fn fn) {
    if (ntests == captests) {
        captests = captests ? captests * 2 : 64;
        tests = realloc(tests, captests * sizeof *tests);
        if (!tests) abort();
    }
    tests[ntests].name = name;
    tests[ntests].fn = fn;
    ntests++;
}

static int cmp(const void *a, const void *b) {
    return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

static char ring[8][4096];
static int ringi;
static char *next_buf(void) { return ring[ringi++ & 7]; }

const char *pt_testdata(const char *rel) {
    const char *root = getenv("PAGEIN_TESTDATA");
    char *b = next_buf();
    snprintf(b, 4096, "%s/%s", root ? root : "tests/data/real", rel);
    return b;
}

int pt_have_testdata(void) {
    struct stat st;
    return stat(pt_testdata("PROVENANCE.md"), &st) == 0;
}

static char tmpdir[256];

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void rm_tmpdir(void) {
    if (tmpdir[0] && !getenv("PAGEIN_KEEP_TMP")) nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

const char *pt_tmpdir(void) {
    if (!tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/pagein-test-XXXXXX", base ? base : "/tmp");
        if (!mkdtemp(tmpdir)) {
            perror("mkdtemp");
            abort();
        }
        atexit(rm_tmpdir);
    }
    return tmpdir;
}

const char *pt_tmppath(const char *name) {
    char *b = next_buf();
    snprintf(b, 4096, "%s/%s", pt_tmpdir(), name);
    return b;
}

void *pt_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf && len) *len = (size_t)n;
    return buf;
}

int pt_write_file(const char *path, const void *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int rc = fwrite(buf, 1, len, f) == len ? 0 : -1;
    if (fclose(f) != 0) rc = -1;
    return rc;
}

static uint64_t seed;
uint64_t pt_seed(void) {
    if (!seed) {
        const char *s = getenv("PAGEIN_SEED");
        seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
        if (!seed) seed = 1;
        printf("    seed: PAGEIN_SEED=%" PRIu64 "\n", seed);
    }
    return seed;
}

uint64_t pt_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    qsort(tests, ntests, sizeof *tests, cmp);
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < ntests; i++) {
        if (argc > 1) {
            int want = 0;
            for (int a = 1; a < argc; a++)
                if (strcmp(argv[a], tests[i].name) == 0) want = 1;
            if (!want) continue;
        }
        pt_failed = 0;
        int rc = tests[i].fn();
        if (rc == SKIP) {
            printf("SKIP %s\n", tests[i].name);
            skipped++;
        } else if (rc != PASS || pt_failed) {
            printf("FAIL %s\n", tests[i].name);
            failed++;
        } else {
            printf("ok   %s\n", tests[i].name);
            passed++;
        }
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    free(tests);
    return failed ? 1 : 0;
}
