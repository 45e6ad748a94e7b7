/* test_meta_cache.c - the metadata cache's store (src/file/metacache.c),
 * white-box: entries round-trip with their identity, size and format; every
 * single flipped byte and every truncation of an entry is a miss that
 * removes it; a planted symlink is removed, its target untouched; entries
 * are 0600 in a 0700 directory; two processes writing the same entry while
 * a third reads never give a mixed entry; the size bound evicts the least
 * recently used; PAGEIN_META_CACHE=0 turns it off. tests/cli/
 * meta_cache.test.sh covers the hook in file.c against real servers. */
#include "test.h"
#include "../src/file/metacache.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *setup(const char *name) {
    const char *d = pt_tmppath(name);
    setenv("PAGEIN_META_CACHE_DIR", d, 1);
    unsetenv("PAGEIN_META_CACHE");
    unsetenv("PAGEIN_META_CACHE_MAX");
    return d;
}

static void done(void) {
    unsetenv("PAGEIN_META_CACHE_DIR");
    unsetenv("PAGEIN_META_CACHE_MAX");
}

/* The one entry file in d (its path into out), or 0 if there is not one. */
static int only_entry(const char *d, char *out, size_t cap) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "ls -A '%s' 2>/dev/null", d);
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    char name[256];
    int n = 0;
    while (fgets(name, sizeof name, p)) {
        name[strcspn(name, "\n")] = 0;
        snprintf(out, cap, "%s/%s", d, name);
        n++;
    }
    pclose(p);
    return n == 1;
}

TEST(meta_cache_roundtrip) {
    const char *d = setup("mc-rt");
    CHECK(pi_meta_enabled());
    const uint8_t hdr[] = "header bytes \x00\x01\x02 of a model";
    pi_meta_put("url http://h/m", "\"etag-1\"", 12345, PAGEIN_FORMAT_GGUF, hdr, sizeof hdr);
    struct pi_meta m;
    CHECK_EQ(pi_meta_get("url http://h/m", &m), 1);
    CHECK_STR(m.identity, "\"etag-1\"");
    CHECK_EQ(m.size, 12345);
    CHECK_EQ(m.format, PAGEIN_FORMAT_GGUF);
    CHECK_EQ(m.len, sizeof hdr);
    CHECK(m.hdr && memcmp(m.hdr, hdr, sizeof hdr) == 0);
    free(m.hdr);
    CHECK_EQ(pi_meta_get("url http://h/other", &m), 0);
    CHECK(m.hdr == NULL);
    struct stat st;
    CHECK(stat(d, &st) == 0 && (st.st_mode & 0777) == 0700);
    char e[4400];
    CHECK(only_entry(d, e, sizeof e));
    CHECK(stat(e, &st) == 0 && (st.st_mode & 0777) == 0600);
    /* a directory with wider permissions is narrowed */
    chmod(d, 0755);
    CHECK_EQ(pi_meta_get("url http://h/m", &m), 1);
    free(m.hdr);
    CHECK(stat(d, &st) == 0 && (st.st_mode & 0777) == 0700);
    setenv("PAGEIN_META_CACHE", "0", 1);
    CHECK(!pi_meta_enabled());
    unsetenv("PAGEIN_META_CACHE");
    done();
    return PASS;
}

TEST(meta_cache_damaged_entries) {
    const char *d = setup("mc-bad");
    const uint8_t hdr[] = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    pi_meta_put("k", "id", 100, PAGEIN_FORMAT_SAFETENSORS, hdr, sizeof hdr - 1);
    char e[4400];
    CHECK(only_entry(d, e, sizeof e));
    size_t n = 0;
    uint8_t *good = pt_read_file(e, &n);
    CHECK(good && n > 40);
    struct pi_meta m;
    int missed = 0, removed = 0;
    for (size_t i = 0; good && i < n; i++) { /* every byte flipped */
        uint8_t *b = malloc(n);
        memcpy(b, good, n);
        b[i] ^= 0x20;
        pt_write_file(e, b, n);
        chmod(e, 0600);
        int r = pi_meta_get("k", &m);
        free(m.hdr);
        missed += r == 0;
        removed += access(e, F_OK) != 0;
        free(b);
    }
    CHECK_EQ(missed, (long long)n);
    CHECK_EQ(removed, (long long)n);
    missed = 0;
    for (size_t l = 0; good && l < n; l++) { /* every truncation */
        pt_write_file(e, good, l);
        chmod(e, 0600);
        missed += pi_meta_get("k", &m) == 0;
        free(m.hdr);
    }
    CHECK_EQ(missed, (long long)n);
    /* intact again: a hit */
    pt_write_file(e, good, n);
    chmod(e, 0600);
    CHECK_EQ(pi_meta_get("k", &m), 1);
    free(m.hdr);
    /* a symlink in its place: not followed, removed, the target untouched */
    const char *target = pt_tmppath("mc-target");
    pt_write_file(target, good, n); /* even a valid entry behind the link */
    unlink(e);
    CHECK(symlink(target, e) == 0);
    CHECK_EQ(pi_meta_get("k", &m), 0);
    struct stat st;
    CHECK(lstat(e, &st) != 0);
    size_t tn = 0;
    uint8_t *t = pt_read_file(target, &tn);
    CHECK(t && tn == n && memcmp(t, good, n) == 0);
    free(t);
    /* a put does not write through a symlink either */
    CHECK(symlink(target, e) == 0);
    pi_meta_put("k", "id2", 100, PAGEIN_FORMAT_SAFETENSORS, hdr, 4);
    t = pt_read_file(target, &tn);
    CHECK(t && tn == n && memcmp(t, good, n) == 0);
    free(t);
    free(good);
    done();
    return PASS;
}

TEST(meta_cache_concurrent_writers) {
    setup("mc-conc");
    static uint8_t a[5000], b[300];
    memset(a, 'a', sizeof a);
    memset(b, 'b', sizeof b);
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            for (int i = 0; i < 300; i++)
                pi_meta_put("same", k ? "B" : "A", 1, PAGEIN_FORMAT_SAFETENSORS, k ? b : a, k ? sizeof b : sizeof a);
            _exit(0);
        }
    }
    int hits = 0, bad = 0;
    for (int i = 0; i < 600; i++) {
        struct pi_meta m;
        if (pi_meta_get("same", &m) != 1) continue;
        hits++;
        int isa = !strcmp(m.identity, "A") && m.len == sizeof a && !memcmp(m.hdr, a, sizeof a);
        int isb = !strcmp(m.identity, "B") && m.len == sizeof b && !memcmp(m.hdr, b, sizeof b);
        bad += !isa && !isb;
        free(m.hdr);
    }
    for (int k = 0; k < 2; k++) {
        int st = 0;
        waitpid(kids[k], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    CHECK_EQ(bad, 0);
    struct pi_meta m;
    CHECK_EQ(pi_meta_get("same", &m), 1); /* the last rename's entry, whole */
    CHECK(!strcmp(m.identity, "A") || !strcmp(m.identity, "B"));
    free(m.hdr);
    printf("    %d of 600 reads during the writes were hits, none mixed\n", hits);
    done();
    return PASS;
}

static int has(const char *key) {
    struct pi_meta m;
    int r = pi_meta_get(key, &m);
    free(m.hdr);
    return r == 1;
}

TEST(meta_cache_size_bound) {
    const char *d = setup("mc-max");
    static uint8_t h[1000];
    memset(h, 'h', sizeof h);
    setenv("PAGEIN_META_CACHE_MAX", "8K", 1); /* 7 entries of ~1.05 KB */
    char key[32], cmd[4300];
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        pi_meta_put(key, "id", 1, PAGEIN_FORMAT_SAFETENSORS, h, sizeof h);
    }
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        CHECK(has(key)); /* 6.3 KB: nothing evicted yet */
    }
    /* the LRU clock is the mtime: all old, then key-3 used (a hit sets it now) */
    snprintf(cmd, sizeof cmd, "touch -d 2000-01-01 '%s'/*", d);
    CHECK(system(cmd) == 0);
    CHECK(has("key-3"));
    for (int i = 6; i < 10; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        pi_meta_put(key, "id", 1, PAGEIN_FORMAT_SAFETENSORS, h, sizeof h);
    }
    snprintf(cmd, sizeof cmd, "test $(find '%s' -type f -printf '%%s\\n' | awk '{s += $1} END {print s + 0}') -le 8192", d);
    CHECK(system(cmd) == 0);
    CHECK(has("key-3"));
    for (int i = 6; i < 10; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        CHECK(has(key));
    }
    int old = 0;
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        if (i != 3) old += has(key);
    }
    CHECK(old <= 2); /* the least recently used went */
    /* an entry over a quarter of the bound is not written */
    static uint8_t big[4000];
    pi_meta_put("big", "id", 1, PAGEIN_FORMAT_SAFETENSORS, big, sizeof big);
    CHECK(!has("big"));
    done();
    return PASS;
}
