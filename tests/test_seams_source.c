/* test_seams_source.c - a source is one file and one line: this file
 * defines a test-only row (pi_source_test_null, registered by its one line
 * in src/source/registry.c's table, a weak reference that is NULL outside
 * the unit-test runner): null://PATH answers range reads from objects held
 * in memory, declares its storage facts, lists a prefix, states a sha256
 * when the test gives one. The tests open models through it end to end
 * (pagein_model_open on a file, on a folder and on a sharded index found by
 * listing, the auto plan) and pull a prefix and a file into a temporary
 * folder, checking every byte. Nothing else in the library knows it
 * exists: pull, resolve and the model layer ask the table. White-box
 * (source.h). */
#include "test.h"

#include "../src/source/source.h"
#include "../src/core/digest.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>


/* ---- the objects: a few in memory, by URI ----------------------------- */
#define NULL_MAX 16
static struct nobj {
    char uri[256];
    uint8_t *data;
    size_t len;
    char sha256[65]; /* stated by the "server" ("" none) */
} objs[NULL_MAX];
static size_t nobjs;
static int null_reads; /* range reads served */
static int null_opens; /* objects opened */

static void store_reset(void) {
    for (size_t i = 0; i < nobjs; i++) free(objs[i].data);
    memset(objs, 0, sizeof objs);
    nobjs = 0;
    null_reads = 0;
}

static struct nobj *store_put(const char *uri, const void *data, size_t len) {
    if (nobjs == NULL_MAX) return NULL;
    struct nobj *o = &objs[nobjs++];
    snprintf(o->uri, sizeof o->uri, "%s", uri);
    o->data = malloc(len ? len : 1);
    if (o->data && len) memcpy(o->data, data, len);
    o->len = len;
    return o;
}

static struct nobj *store_get(const char *uri) {
    for (size_t i = 0; i < nobjs; i++)
        if (!strcmp(objs[i].uri, uri)) return &objs[i];
    return NULL;
}

/* ---- the row --------------------------------------------------------- */
static int null_match(const char *uri) { return strncmp(uri, "null://", 7) == 0; }

static int null_is_prefix(const char *uri) {
    size_t n = strlen(uri);
    return n && uri[n - 1] == '/';
}

static int null_open(struct pi_source *s, const char *uri, uint32_t flags) {
    (void)flags;
    if (null_is_prefix(uri)) return pi_err(PAGEIN_E_INVALID, "%s: names a prefix, not an object", uri);
    struct nobj *o = store_get(uri);
    if (!o) return pi_err(PAGEIN_E_NOT_FOUND, "%s: no such object", uri);
    s->impl = o;
    __atomic_fetch_add(&null_opens, 1, __ATOMIC_RELAXED);
    s->size = o->len;
    uint64_t h = 1469598103934665603ull; /* the identity: an FNV-1a of the bytes, as an ETag would be */
    for (size_t i = 0; i < o->len; i++) h = (h ^ o->data[i]) * 1099511628211ull;
    snprintf(s->identity, sizeof s->identity, "\"null-%016llx\"", (unsigned long long)h);
    s->facts.storage = PI_STORAGE_REMOTE;
    snprintf(s->facts.fs_type, sizeof s->facts.fs_type, "null");
    s->facts.latency_ns = 1000;
    s->facts.request_bytes = 1u << 20;
    s->facts.depth = 4;
    return 0;
}

static int null_read(struct pi_source *s, void *buf, uint64_t len, uint64_t off) {
    const struct nobj *o = s->impl;
    if (off > o->len || len > o->len - off) return pi_err(PAGEIN_E_TRUNCATED, "%s: read past the end", s->name);
    memcpy(buf, o->data + off, (size_t)len);
    __atomic_fetch_add(&null_reads, 1, __ATOMIC_RELAXED);
    return 0;
}

static void null_close(struct pi_source *s) { s->impl = NULL; }

static int null_list(const char *uri, pi_list_fn fn, void *arg) {
    size_t pl = strlen(uri);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < nobjs; i++) {
        if (strncmp(objs[i].uri, uri, pl) != 0 || !objs[i].uri[pl]) continue;
        struct pi_list_entry e = {.uri = objs[i].uri, .rel = objs[i].uri + pl, .size = objs[i].len, .identity = ""};
        rc = fn(arg, &e);
    }
    return rc;
}

static int null_checksum(struct pi_source *s, struct pi_checksum *c) {
    const struct nobj *o = s->impl;
    if (!o->sha256[0]) return 0;
    snprintf(c->algo, sizeof c->algo, "sha256");
    snprintf(c->hex, sizeof c->hex, "%s", o->sha256);
    return 1;
}

const struct pi_source_ops pi_source_test_null = {
    .name = "null",
    .match = null_match,
    .open = null_open,
    .readv = NULL, /* the registry runs read on pool threads */
    .read = null_read,
    .close = null_close,
    .remote = 1,
    .schemes = "null://",
    .is_prefix = null_is_prefix,
    .list = null_list,
    .object_name = NULL,
    .checksum = null_checksum,
    .cache_place = NULL,
    .counters = NULL,
    .ranges_ignored = NULL,
    .stream = NULL,
};

/* ---- fixtures --------------------------------------------------------- */
static int slurp(const char *path, uint8_t **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc(n > 0 ? (size_t)n : 1);
    *len = *out && n >= 0 && fread(*out, 1, (size_t)n, f) == (size_t)n ? (size_t)n : 0;
    fclose(f);
    return *len ? 0 : -1;
}

/* A safetensors file of tensors names[0..n) (64 F32 each, value base*i +
 * k) put into the store as uri. */
static int put_safetensors(const char *uri, const char *const *names, int n, float base) {
    static float vals[4][64];
    uint64_t s64[1] = {64};
    pagein_write_tensor t[4];
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 64; k++) vals[i][k] = base * (float)(i + 1) + (float)k;
        pagein_write_tensor w = {names[i], PAGEIN_DTYPE_F32, 1, s64, vals[i], NULL, NULL};
        t[i] = w;
    }
    const char *path = pt_tmppath("null_src.safetensors");
    pagein_write_opts o = PAGEIN_WRITE_OPTS_INIT;
    if (pagein_safetensors_write(path, t, (size_t)n, &o) != 0) return -1;
    uint8_t *b;
    size_t len;
    if (slurp(path, &b, &len) != 0) return -1;
    struct nobj *ob = store_put(uri, b, len);
    free(b);
    return ob ? 0 : -1;
}

static void sha256_of(struct nobj *o) {
#ifdef PAGEIN_HAVE_LIBCRYPTO
    char hex[PI_DIGEST_HEX_CAP];
    if (pi_digest_buf("sha256", o->data, o->len, hex, "test object") == 0) memcpy(o->sha256, hex, 65);
#else
    (void)o;
#endif
}

/* null://m/model.safetensors (+ a config.json beside it), and a 2-shard
 * model under null://sharded/ with its index. */
static int build_store(void) {
    store_reset();
    static const char *const one[] = {"model.layers.0.w", "model.layers.1.w", "lm_head.weight"};
    static const char *const s1[] = {"model.layers.0.w", "model.layers.1.w"};
    static const char *const s2[] = {"model.layers.2.w", "lm_head.weight"};
    if (put_safetensors("null://m/model.safetensors", one, 3, 100.0f) < 0) return -1;
    if (!store_put("null://m/config.json", "{}", 2)) return -1;
    if (put_safetensors("null://sharded/model-00001-of-00002.safetensors", s1, 2, 1000.0f) < 0) return -1;
    if (put_safetensors("null://sharded/model-00002-of-00002.safetensors", s2, 2, 2000.0f) < 0) return -1;
    const char *ix = "{\"metadata\": {}, \"weight_map\": {"
                     "\"model.layers.0.w\": \"model-00001-of-00002.safetensors\", "
                     "\"model.layers.1.w\": \"model-00001-of-00002.safetensors\", "
                     "\"model.layers.2.w\": \"model-00002-of-00002.safetensors\", "
                     "\"lm_head.weight\": \"model-00002-of-00002.safetensors\"}}";
    if (!store_put("null://sharded/model.safetensors.index.json", ix, strlen(ix))) return -1;
    return 0;
}

/* Tensor name's first and last value in m (loaded by the model's strategy). */
static int values(pagein_model *m, const char *name, float *first, float *last) {
    const pagein_tensor *t = pagein_model_tensor_get(m, name);
    const void *d = NULL;
    if (!t || t->nbytes != 256 || pagein_model_tensor_data(m, t, &d) != 0 || !d) return -1;
    float v[64];
    memcpy(v, d, sizeof v);
    *first = v[0];
    *last = v[63];
    return 0;
}

/* ---- tests ------------------------------------------------------------ */
TEST(seam_source_row_in_table) {
    CHECK(pagein_is_url("null://m/model.safetensors"));
    CHECK(pi_source_is_remote("null://x"));
    const struct pi_source_ops *o = pi_source_find("null://x");
    CHECK(o == &pi_source_test_null);
    CHECK(strstr(pi_source_schemes(), "null://") != NULL);
    CHECK(pi_source_is_prefix("null://m/"));
    CHECK(!pi_source_is_prefix("null://m/model.safetensors"));
    /* a local path still goes to the file source */
    CHECK(!pagein_is_url("/tmp/null://x"));
    return PASS;
}

static int count_entry(void *arg, const struct pi_list_entry *e) {
    size_t *n = arg;
    if (strncmp(e->uri, "null://sharded/", 15) != 0 || strcmp(e->uri + 15, e->rel) != 0) return -1;
    if (e->size == PI_SIZE_UNKNOWN) return -1;
    (*n)++;
    return 0;
}

/* pagein_source_list goes through the table: the test-only row lists
 * through the public call too, each name the listed URI + its own name
 * (no scheme switch in data/uri.c). */
static int count_name(void *arg, const char *uri) {
    size_t *n = arg;
    if (strncmp(uri, "null://sharded", 14) != 0 || strstr(uri, "//sharded//") || pi_ends_with(uri, "/")) return -1;
    (*n)++;
    return 0;
}

TEST(seam_source_public_list) {
    CHECK_OK(build_store());
    size_t n = 0;
    CHECK_OK(pagein_source_list("null://sharded/", count_name, &n));
    CHECK_EQ(n, 3);
    n = 0;
    CHECK_OK(pagein_source_list("null://sharded", count_name, &n)); /* no '/': the names still get one */
    CHECK_EQ(n, 3);
    return PASS;
}

TEST(seam_source_list_and_facts) {
    CHECK_OK(build_store());
    size_t n = 0;
    CHECK_OK(pi_source_list("null://sharded/", count_entry, &n));
    CHECK_EQ(n, 3);
    struct pi_source *s = NULL;
    CHECK_OK(pi_source_open(&s, "null://m/model.safetensors", 0));
    if (!s) return FAIL;
    CHECK_EQ(s->size, objs[0].len);
    CHECK_EQ(pi_source_facts(s)->storage, PI_STORAGE_REMOTE);
    CHECK_STR(pi_source_facts(s)->fs_type, "null");
    struct pi_checksum c;
    CHECK_EQ(pi_source_checksum(s, &c), 0); /* none stated */
    uint8_t b[8];
    CHECK_OK(pi_source_read(s, b, 8, 0));
    CHECK(memcmp(b, objs[0].data, 8) == 0);
    pi_source_close(s);
    CHECK_EQ(pi_source_open(&s, "null://m/none.bin", 0), PAGEIN_E_NOT_FOUND);
    return PASS;
}

TEST(seam_source_model_open_file_and_folder) {
    CHECK_OK(build_store());
    const char *uris[] = {"null://m/model.safetensors", "null://m/"};
    for (int k = 0; k < 2; k++) {
        pagein_model *m = NULL;
        pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
        CHECK_OK(pagein_model_open(&m, uris[k], &o));
        if (!m) return FAIL;
        CHECK_EQ(pagein_model_file_count(m), 1);
        CHECK_EQ(pagein_model_tensor_count(m), 3);
        /* a remote source: auto reads into memory (no mapping) */
        CHECK_EQ(pagein_model_strategy(m, NULL), PAGEIN_STRATEGY_READ);
        float a = 0, z = 0;
        CHECK_OK(values(m, "model.layers.1.w", &a, &z));
        CHECK(a == 200.0f && z == 263.0f);
        CHECK_OK(values(m, "lm_head.weight", &a, &z));
        CHECK(a == 300.0f && z == 363.0f);
        pagein_model_close(m);
    }
    CHECK(null_reads > 0);
    return PASS;
}

TEST(seam_source_model_sharded_by_listing) {
    CHECK_OK(build_store());
    pagein_model *m = NULL;
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_READ;
    CHECK_OK(pagein_model_open(&m, "null://sharded/", &o)); /* the listing picks the index */
    if (!m) return FAIL;
    CHECK_EQ(pagein_model_file_count(m), 2);
    CHECK_EQ(pagein_model_tensor_count(m), 4);
    float a = 0, z = 0;
    CHECK_OK(values(m, "model.layers.2.w", &a, &z));
    CHECK(a == 2000.0f && z == 2063.0f);
    CHECK_OK(values(m, "model.layers.1.w", &a, &z));
    CHECK(a == 2000.0f && z == 2063.0f);
    /* plan: what auto would choose, and why */
    char why[512] = "";
    uint64_t budget = 1;
    CHECK_EQ(pagein_model_auto_plan(m, &budget, why, sizeof why), PAGEIN_STRATEGY_READ);
    CHECK(why[0] != 0);
    pagein_model_close(m);
    /* a folder with no model */
    CHECK(store_put("null://empty/readme.md", "x", 1) != NULL);
    CHECK_EQ(pagein_model_open(&m, "null://empty/", &o), PAGEIN_E_NOT_FOUND);
    CHECK(strstr(pagein_last_error_detail(), "null://empty/") != NULL);
    return PASS;
}

static int same_file(const char *path, const struct nobj *o) {
    uint8_t *b = NULL;
    size_t len = 0;
    int ok = slurp(path, &b, &len) == 0 && len == o->len && memcmp(b, o->data, len) == 0;
    free(b);
    return ok;
}

TEST(seam_source_pull_prefix) {
    CHECK_OK(build_store());
    /* a deeper object keeps its folder under the destination */
    static const char *const deep[] = {"x"};
    CHECK_OK(put_safetensors("null://sharded/extra/x.safetensors", deep, 1, 5.0f));
    for (size_t i = 0; i < nobjs; i++)
        if (!strncmp(objs[i].uri, "null://sharded/", 15) && strstr(objs[i].uri, "-of-")) sha256_of(&objs[i]);
    const char *dir = pt_tmppath("null_pull");
    pagein_pull_opts po = PAGEIN_PULL_OPTS_INIT;
    po.flags = PAGEIN_PULL_NO_SYNC;
    pagein_pull_stats st;
    CHECK_OK(pagein_pull("null://sharded/", dir, &po, &st));
    CHECK_EQ(st.files, 4);
    CHECK_STR(st.path, dir);
    const char *rels[] = {"model.safetensors.index.json", "model-00001-of-00002.safetensors",
                          "model-00002-of-00002.safetensors", "extra/x.safetensors"};
    for (int i = 0; i < 4; i++) {
        char p[4096], u[300];
        snprintf(p, sizeof p, "%s/%s", dir, rels[i]);
        snprintf(u, sizeof u, "null://sharded/%s", rels[i]);
        CHECK(same_file(p, store_get(u)));
    }
#ifdef PAGEIN_HAVE_LIBCRYPTO
    /* the shards' stated sha256 was checked (the source's checksum op) */
    CHECK(strstr(st.verified, "sha256") != NULL);
    CHECK(strstr(st.verified, "size+etag") != NULL);
#endif
    /* pulled again: every file is up to date, nothing is read */
    int before = null_reads;
    CHECK_OK(pagein_pull("null://sharded/", dir, &po, &st));
    CHECK_EQ(st.fetched, 0);
    CHECK_EQ(null_reads, before);
    /* the pulled folder opens as the same model */
    pagein_model *m = NULL;
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    CHECK_OK(pagein_model_open(&m, dir, &o));
    if (m) {
        CHECK_EQ(pagein_model_tensor_count(m), 4);
        pagein_model_close(m);
    }
    CHECK_EQ(pagein_pull("null://nothing/", dir, &po, &st), PAGEIN_E_NOT_FOUND);
    return PASS;
}

TEST(seam_source_pull_file_checked) {
    CHECK_OK(build_store());
    const char *dest = pt_tmppath("null_one.safetensors");
    pagein_pull_opts po = PAGEIN_PULL_OPTS_INIT;
    po.flags = PAGEIN_PULL_NO_SYNC;
    pagein_pull_stats st;
    CHECK_OK(pagein_pull("null://m/model.safetensors", dest, &po, &st));
    CHECK_EQ(st.files, 1);
    CHECK_STR(st.path, dest);
    CHECK(same_file(dest, store_get("null://m/model.safetensors")));
    CHECK_STR(st.verified, "size+etag");
#ifdef PAGEIN_HAVE_LIBCRYPTO
    /* a stated sha256 the bytes do not have: refused, nothing installed */
    struct nobj *bad = store_put("null://bad/w.bin", "0123456789", 10);
    CHECK(bad != NULL);
    if (!bad) return FAIL;
    memset(bad->sha256, 'a', 64);
    const char *bd = pt_tmppath("null_bad.bin");
    CHECK_EQ(pagein_pull("null://bad/w.bin", bd, &po, &st), PAGEIN_E_HASH_MISMATCH);
    struct stat sb;
    CHECK(stat(bd, &sb) != 0);
#endif
    return PASS;
}

/* ---- a dataset over null:// ----------------------------------------------- */
/* The dataset layer lists a prefix and a glob through the source table
 * (pi_source_list_opt): no scheme of null:// is known to it. A null://
 * prefix names its direct children (deep_prefix 0), as an S3 folder. */
static int put_dataset(void) {
    store_reset();
    if (!store_put("null://ds/a.jsonl", "{\"t\":1}\n{\"t\":2}\n", 16)) return -1;
    if (!store_put("null://ds/b.jsonl", "{\"t\":3}\n{\"t\":4}\n{\"t\":5}\n", 24)) return -1;
    if (!store_put("null://ds/sub/c.jsonl", "x\ny\nz\nw\n", 8)) return -1;
    if (!store_put("null://ds/README.md", "# a dataset\n", 12)) return -1;
    return 0;
}

TEST(seam_source_dataset_prefix_and_glob) {
    CHECK_OK(put_dataset());
    static const struct {
        const char *spec;
        size_t files;
        uint64_t samples;
    } cases[] = {{"null://ds/", 2, 5}, {"null://ds", 0, 0}, {"null://ds/*.jsonl", 2, 5}, {"null://ds/*/*.jsonl", 1, 4},
                 {"null://ds/sub/", 1, 4}};
    for (size_t i = 0; i < PI_ARRAY_LEN(cases); i++) {
        pagein_dataset *d = NULL;
        int rc = pagein_dataset_open(&d, cases[i].spec, NULL);
        if (!cases[i].files) { /* no '/': an object name, and there is no such object */
            CHECK(rc < 0);
            continue;
        }
        CHECK_OK(rc);
        if (!d) return FAIL;
        CHECK_EQ(pagein_dataset_file_count(d), cases[i].files);
        CHECK_EQ(pagein_dataset_count(d), cases[i].samples);
        CHECK_STR(pagein_dataset_format(d, 0), "lines");
        CHECK(!strncmp(pagein_dataset_path(d, 0), "null://ds/", 10));
        pagein_dataset_close(d);
    }
    pagein_dataset *d = NULL;
    CHECK_EQ(pagein_dataset_open(&d, "null://none/", NULL), PAGEIN_E_NOT_FOUND);
    CHECK(d == NULL);
    return PASS;
}

/* ---- fsspec's find(detail=True) over null:// ------------------------------ */
/* pagein.fsspec's ls/find(detail=True) are one pagein_source_list_entries
 * call (python/pagein/fsspec.py _entries): every object's size and
 * identity come from the listing, and no object is opened or read. The
 * Python module cannot see this test-only row, so the call it makes is
 * made here. */
struct found {
    size_t n, bytes;
    int bad;
};

static int found_add(void *arg, const pagein_list_entry *e) {
    struct found *f = arg;
    const struct nobj *o = store_get(e->uri);
    if (!o || e->size != o->len || strcmp(e->uri + strlen("null://ds/"), e->rel) != 0) f->bad++;
    f->n++;
    f->bytes += (size_t)e->size;
    return 0;
}

TEST(seam_source_fsspec_find_from_listing) {
    CHECK_OK(put_dataset());
    null_opens = null_reads = 0;
    struct found f = {0};
    CHECK_OK(pagein_source_list_entries("null://ds/", 0, found_add, &f)); /* find: everything under it */
    CHECK_EQ(f.n, 4);
    CHECK_EQ(f.bytes, 16 + 24 + 8 + 12);
    CHECK_EQ(f.bad, 0);
    memset(&f, 0, sizeof f);
    CHECK_OK(pagein_source_list_entries("null://ds", PAGEIN_LIST_DIRECT, found_add, &f)); /* ls: the children */
    CHECK_EQ(f.n, 3);
    CHECK_EQ(f.bad, 0);
    CHECK_EQ(null_opens, 0);
    CHECK_EQ(null_reads, 0);
    CHECK_EQ(pagein_source_list_entries("null://ds/", 0x80, found_add, &f), PAGEIN_E_INVALID);
    return PASS;
}
