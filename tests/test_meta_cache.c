/* test_meta_cache.c - the metadata cache's store (src/file/metacache.c),
 * white-box: entries round-trip with their identity, size and format; every
 * single flipped byte and every truncation of an entry is a miss that
 * removes it; a planted symlink is removed, its target untouched; entries
 * are 0600 in a 0700 directory; two processes writing the same entry while
 * a third reads never give a mixed entry (the reads are required to see
 * both writers' entries while both write); the size bound evicts the least
 * recently used; PAGEIN_META_CACHE=0 turns it off; the rule by which a
 * listing, a pinned commit or the opt-in trust age stand for the per-file
 * check (meta_cache_vouch_rule); the remote key's text, its endpoint from the
 * source row (meta_cache_remote_key). tests/cli/
 * meta_cache.test.sh covers the hook in file.c against real servers. */
#include "test.h"
#include "../src/file/metacache.h"
#include "../src/source/remote.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
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

/* The race is required: the two writers put until the parent tells them
 * to stop, and the parent reads on until it has seen each writer's entry
 * while both were still writing (bounded: 20 s, then a failure that says
 * what was missing). Shared with the children through an anonymous
 * MAP_SHARED page. */
struct conc {
    _Atomic int stop;
    _Atomic long puts[2];
};

TEST(meta_cache_concurrent_writers) {
    setup("mc-conc");
    static uint8_t a[5000], b[300];
    memset(a, 'a', sizeof a);
    memset(b, 'b', sizeof b);
    struct conc *c = mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED) SKIP_BECAUSE("cannot map a shared page: %s", strerror(errno));
    memset(c, 0, sizeof *c);
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            /* bounded too: a parent that died leaves no writer behind */
            for (long i = 0; i < 2000000 && !atomic_load(&c->stop); i++) {
                pi_meta_put("same", k ? "B" : "A", 1, PAGEIN_FORMAT_SAFETENSORS, k ? b : a, k ? sizeof b : sizeof a);
                atomic_fetch_add(&c->puts[k], 1);
            }
            _exit(0);
        }
        CHECK(kids[k] > 0);
    }
    long reads = 0, hits = 0, seen[2] = {0, 0}, bad = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double el = 0;
    /* on until each writer's entry was read whole at least 20 times while
     * both writers had put at least 20 and were still putting */
    while (kids[0] > 0 && kids[1] > 0) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        el = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        if ((seen[0] >= 20 && seen[1] >= 20) || el > 20) break;
        int both = atomic_load(&c->puts[0]) >= 20 && atomic_load(&c->puts[1]) >= 20;
        struct pi_meta m;
        reads++;
        if (pi_meta_get("same", &m) != 1) continue;
        hits++;
        int isa = !strcmp(m.identity, "A") && m.len == sizeof a && !memcmp(m.hdr, a, sizeof a);
        int isb = !strcmp(m.identity, "B") && m.len == sizeof b && !memcmp(m.hdr, b, sizeof b);
        bad += !isa && !isb;
        if (both) seen[0] += isa, seen[1] += isb;
        free(m.hdr);
    }
    atomic_store(&c->stop, 1);
    for (int k = 0; k < 2; k++) {
        int st = 0;
        if (kids[k] <= 0) continue;
        waitpid(kids[k], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    printf("    %.2f s: %ld and %ld puts; %ld reads during the writes, %ld hits (%ld A, %ld B while both wrote), "
           "%ld mixed\n",
           el, (long)c->puts[0], (long)c->puts[1], reads, hits, seen[0], seen[1], bad);
    CHECK_EQ(bad, 0);
    if (seen[0] < 20 || seen[1] < 20)
        printf("    the race did not happen: the reads did not see each writer's entry 20 times while both were "
               "writing, within 20 s\n");
    CHECK(seen[0] >= 20 && seen[1] >= 20);
    struct pi_meta m;
    CHECK_EQ(pi_meta_get("same", &m), 1); /* the last rename's entry, whole */
    CHECK(!strcmp(m.identity, "A") || !strcmp(m.identity, "B"));
    free(m.hdr);
    munmap(c, sizeof *c);
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
    /* the LRU clock is the mtime: all old, then key-3 used after a check
     * (pi_meta_touch sets it now; a read alone does not, so that the
     * opt-in trust age counts from the last check) */
    snprintf(cmd, sizeof cmd, "touch -d 2000-01-01 '%s'/*", d);
    CHECK(system(cmd) == 0);
    CHECK(has("key-3"));
    pi_meta_touch("key-3");
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

/* One check for many entries: the rule that lets an entry be
 * used without a request of its own (pi_meta_usable) and the listing page
 * it reads (pi_s3_stat_page). */
TEST(meta_cache_vouch_rule) {
    struct pi_stat_entry *v = NULL;
    size_t n = 0, cap = 0;
    char tok[64];
    int more = 0;
    static const char page[] =
        "<ListBucketResult><IsTruncated>true</IsTruncated>"
        "<Contents><Key>m/b.safetensors</Key><ETag>&quot;e2&quot;</ETag><Size>20</Size></Contents>"
        "<Contents><Key>m/a&amp;1.safetensors</Key><Size>10</Size><ETag>&quot;e1&quot;</ETag></Contents>"
        "<Contents><Key>m/nosize</Key><ETag>&quot;e3&quot;</ETag></Contents>"
        "<Contents><Key>m/neg</Key><Size>-5</Size><ETag>&quot;e4&quot;</ETag></Contents>"
        "<Contents><Key>other/x</Key><Size>5</Size><ETag>&quot;e5&quot;</ETag></Contents>"
        "<NextContinuationToken>t&amp;2</NextContinuationToken></ListBucketResult>";
    CHECK_EQ(pi_s3_stat_page(page, sizeof page - 1, "s3://bkt/", "m/", &v, &n, &cap, tok, sizeof tok, &more), 0);
    CHECK_EQ(n, 2); /* the records without a size, with a bad one, or outside the prefix are skipped */
    CHECK(more);
    CHECK(!strcmp(tok, "t&2"));
    CHECK(n == 2 && !strcmp(v[1].uri, "s3://bkt/m/a&1.safetensors") && v[1].size == 10 && !strcmp(v[1].etag, "\"e1\""));
    /* vouched: the listing's size and ETag must both match the entry */
    struct pi_meta_vouch vo = {0};
    struct pi_stat_entry sorted[2];
    if (n == 2) {
        sorted[0] = v[1];
        sorted[1] = v[0];
    }
    vo.v = sorted;
    vo.n = n;
    vo.requests = 1;
    struct pi_meta m = {.size = 10};
    snprintf(m.identity, sizeof m.identity, "\"e1\"");
    int trusted = 1;
    CHECK(pi_meta_usable(&vo, "s3://bkt/m/a&1.safetensors", &m, &trusted) && !trusted);
    m.size = 11;
    CHECK(!pi_meta_usable(&vo, "s3://bkt/m/a&1.safetensors", &m, &trusted)); /* size differs */
    m.size = 10;
    snprintf(m.identity, sizeof m.identity, "\"e0\"");
    CHECK(!pi_meta_usable(&vo, "s3://bkt/m/a&1.safetensors", &m, &trusted)); /* ETag differs */
    CHECK(!pi_meta_usable(&vo, "s3://bkt/m/gone.safetensors", &m, &trusted)); /* not listed */
    vo.trust_ns = 3600000000000ll; /* a listing ran: what it does not list is never trusted by age */
    CHECK(!pi_meta_usable(&vo, "s3://bkt/m/gone.safetensors", &m, &trusted));
    /* pinned: any entry with a strong identity */
    struct pi_meta_vouch pin = {.pinned = 1};
    CHECK(pi_meta_usable(&pin, "hf://o/n@x/a", &m, &trusted) && !trusted);
    snprintf(m.identity, sizeof m.identity, "W/\"weak\"");
    CHECK(!pi_meta_usable(&pin, "hf://o/n@x/a", &m, &trusted));
    snprintf(m.identity, sizeof m.identity, "\"e1\"");
    /* trust by age (opt-in, no listing): checked 10 s ago vs 2 h ago */
    struct pi_meta_vouch tr = {.trust_ns = 3600000000000ll};
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t t = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    m.checked_ns = t - 10000000000ll;
    CHECK(pi_meta_usable(&tr, "http://h/a", &m, &trusted) && trusted);
    m.checked_ns = t - 7200000000000ll;
    CHECK(!pi_meta_usable(&tr, "http://h/a", &m, &trusted) && !trusted);
    m.checked_ns = t + 600000000000ll; /* a clock in the future: not trusted */
    CHECK(!pi_meta_usable(&tr, "http://h/a", &m, &trusted));
    CHECK(!pi_meta_usable(NULL, "http://h/a", &m, &trusted));
#ifdef PAGEIN_HAVE_CURL
    /* a pinned revision is a full commit hash only */
    setenv("PAGEIN_META_CACHE_DIR", pt_tmppath("vouch"), 1);
    struct pi_meta_vouch h;
    pi_meta_vouch_dir("hf://org/name@0123456789abcdef0123456789abcdef01234567", &h);
    CHECK(h.pinned);
    pi_meta_vouch_free(&h);
    pi_meta_vouch_dir("hf://org/name@main", &h);
    CHECK(!h.pinned);
    pi_meta_vouch_free(&h);
    pi_meta_vouch_dir("hf://org/name@0123456", &h);
    CHECK(!h.pinned);
    pi_meta_vouch_free(&h);
    pi_meta_vouch_dir("http://h/dir", &h);
    CHECK(!h.pinned && !h.n && !h.trust_ns);
    pi_meta_vouch_free(&h);
#endif
    done();
    pi_stat_entries_free(v, n);
    return PASS;
}

/* The key of a remote header: the redacted URL, then the endpoint its
 * source row states (ops.origin), in the text entries were written under
 * before the rows stated it (so they still hit). */
static void key_is(const char *url, const char *want) {
    char *k = pi_meta_remote_key(url);
    CHECK(k != NULL);
    if (k) CHECK_STR(k, want);
    free(k);
}

TEST(meta_cache_remote_key) {
    const char *vars[] = {"HF_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_CONFIG_FILE",
                          "GS_ENDPOINT_URL"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
    key_is("https://u:p@h/x?Signature=1", "url https://***@h/x?Signature=REDACTED");
    key_is("/tmp/a.gguf", "url /tmp/a.gguf");
#ifdef PAGEIN_HAVE_CURL
    key_is("hf://org/m/model.safetensors", "url hf://org/m/model.safetensors origin=https://huggingface.co");
    key_is("s3://b/k.gguf", "url s3://b/k.gguf origin=- profile=- config=-");
    key_is("gs://b/k", "url gs://b/k origin=https://storage.googleapis.com");
    setenv("HF_ENDPOINT", "http://mirror", 1);
    setenv("AWS_ENDPOINT_URL", "http://minio", 1);
    setenv("AWS_PROFILE", "p", 1);
    setenv("AWS_CONFIG_FILE", "/c", 1);
    setenv("GS_ENDPOINT_URL", "http://g", 1);
    key_is("hf://org/m/f", "url hf://org/m/f origin=http://mirror");
    key_is("s3://b/k", "url s3://b/k origin=http://minio profile=p config=/c");
    setenv("AWS_ENDPOINT_URL_S3", "http://s3only", 1);
    key_is("s3://b/k", "url s3://b/k origin=http://s3only profile=p config=/c");
    key_is("gs://b/k", "url gs://b/k origin=http://g");
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
#endif
    return PASS;
}
