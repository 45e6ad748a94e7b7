/* test_dataformats.c - the dataset-format table and the one pipeline:
 * WebDataset tars (Python's tarfile: pax, GNU, ustar; GNU tar), MDS
 * (written from the published layout by tests/dataformats_gen.py), JSONL /
 * text (plain, gzip, zstd), records; exactly once over 4 ranks x 2 workers
 * for every format and order, resume onto another world size, values,
 * columns=, and malformed shards. */
#include "test.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *fixtures(void) {
    static char dir[4096];
    static int made = -1;
    if (made < 0) {
        snprintf(dir, sizeof dir, "%s", pt_tmppath("dsfx"));
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/dataformats_gen.py '%s'", dir);
        made = access("/usr/bin/python3", X_OK) == 0 && system(cmd) == 0;
    }
    return made ? dir : NULL;
}

static const char *fx(const char *rel) {
    static char buf[8][4096];
    static int k;
    char *b = buf[k++ & 7];
    snprintf(b, sizeof buf[0], "%s/%s", fixtures(), rel);
    return b;
}

static pagein_dataset *open_ds(const char *spec, const pagein_dataset_opts *o) {
    pagein_dataset *d = NULL;
    int rc = pagein_dataset_open(&d, spec, o);
    CHECK_OK(rc);
    return rc == 0 ? d : NULL;
}

/* Reads this consumer's part; returns the count (ids into out). */
static uint64_t drain(pagein_dataset *d, const pagein_pipe_opts *o, uint64_t *out, uint64_t cap) {
    pagein_pipe *p = NULL;
    int rc = pagein_pipe_open(&p, d, o);
    CHECK_OK(rc);
    if (rc) return 0;
    pagein_item it;
    uint64_t n = 0;
    while ((rc = pagein_pipe_next(p, &it)) == 1) {
        if (n < cap) out[n] = it.id;
        n++;
    }
    CHECK_OK(rc);
    CHECK_EQ(n, pagein_pipe_length(p));
    pagein_pipe_close(p);
    return n;
}

static const char *const SPECS[] = {"wds", "mds", "lines", "wds-gz.tar.gz", "wds/shard-{01..02}.tar", "mega/m.idx",
                                    "records"};

TEST(dataformats_exactly_once) {
    if (!fixtures()) SKIP_BECAUSE("/usr/bin/python3 cannot write the fixtures");
    for (size_t s = 0; s < (sizeof SPECS / sizeof SPECS[0]); s++) {
        pagein_dataset_opts dop = PAGEIN_DATASET_OPTS_INIT;
        if (!strcmp(SPECS[s], "records")) dop.record_bytes = 16, dop.group_bytes = 64;
        if (!strcmp(SPECS[s], "mega/m.idx")) dop.group_bytes = 40;
        pagein_dataset *d = open_ds(fx(SPECS[s]), &dop);
        if (!d) continue;
        uint64_t n = pagein_dataset_count(d);
        CHECK(n > 0);
        uint64_t *ids = calloc(n + 1, 8), *seen = calloc(n, 8), *ref = calloc(n, 8);
        for (int order = 0; order <= PAGEIN_ORDER_GLOBAL; order++) {
            pagein_pipe_opts o = PAGEIN_PIPE_OPTS_INIT;
            o.order = (pagein_order)order;
            o.seed = 11;
            o.window = 2;
            o.read_batch = 7;
            CHECK_OK(pagein_pipe_order(d, &o, ref, n));
            /* world size 1 yields exactly the epoch's sequence */
            uint64_t got = drain(d, &o, ids, n);
            CHECK_EQ(got, n);
            CHECK(memcmp(ids, ref, n * 8) == 0);
            /* 4 ranks x 2 workers, batches of 3: every id once */
            memset(seen, 0, n * 8);
            uint64_t total = 0;
            for (uint32_t r = 0; r < 4; r++)
                for (uint32_t w = 0; w < 2; w++) {
                    o.rank = r, o.world_size = 4, o.worker = w, o.num_workers = 2, o.batch = 3;
                    uint64_t k = drain(d, &o, ids, n);
                    for (uint64_t i = 0; i < k && i < n; i++) {
                        CHECK(ids[i] < n);
                        if (ids[i] < n) seen[ids[i]]++;
                    }
                    total += k;
                }
            CHECK_EQ(total, n);
            for (uint64_t i = 0; i < n; i++)
                if (seen[i] != 1) {
                    printf("    %s order %d: sample %" PRIu64 " seen %" PRIu64 " times\n", SPECS[s], order, i, seen[i]);
                    CHECK(0);
                    break;
                }
            /* another epoch, another order (shuffled orders) */
            if (order && n > 10) {
                o = (pagein_pipe_opts)PAGEIN_PIPE_OPTS_INIT;
                o.order = (pagein_order)order, o.seed = 11, o.window = 2, o.epoch = 1;
                CHECK_OK(pagein_pipe_order(d, &o, ids, n));
                CHECK(memcmp(ids, ref, n * 8) != 0);
            }
        }
        free(ids);
        free(seen);
        free(ref);
        pagein_dataset_close(d);
    }
    return PASS;
}

/* What a rank's training loop saw after s samples: its workers' outputs
 * interleaved batch by batch (a DataLoader's order). */
static uint64_t loop_prefix(uint64_t *const *wout, const uint64_t *wn, uint32_t nw, uint32_t B, uint64_t s,
                            uint64_t *out) {
    uint64_t pos[8] = {0}, k = 0;
    for (uint32_t w = 0; k < s; w = (w + 1) % nw) {
        int any = 0;
        for (uint32_t v = 0; v < nw; v++) any |= pos[v] < wn[v];
        if (!any) break;
        for (uint32_t j = 0; j < B && pos[w] < wn[w] && k < s; j++) out[k++] = wout[w][pos[w]++];
    }
    return k;
}

TEST(dataformats_resume_other_world) {
    if (!fixtures()) SKIP_BECAUSE("/usr/bin/python3 cannot write the fixtures");
    const char *specs[] = {"wds", "mds"};
    for (size_t s = 0; s < 2; s++) {
        pagein_dataset *d = open_ds(fx(specs[s]), NULL);
        if (!d) continue;
        uint64_t n = pagein_dataset_count(d);
        for (int order = PAGEIN_ORDER_BLOCK; order <= PAGEIN_ORDER_GLOBAL; order++) {
            uint64_t *seen = calloc(n, 8), *loop = calloc(n, 8);
            uint64_t *wout[2] = {calloc(n, 8), calloc(n, 8)}, wn[2];
            pagein_pipe_opts o = PAGEIN_PIPE_OPTS_INIT;
            o.order = (pagein_order)order, o.seed = 5, o.epoch = 3, o.window = 3;
            o.world_size = 4, o.num_workers = 2, o.batch = 4;
            const uint64_t steps = 9; /* samples each rank's loop consumed */
            uint64_t consumed = 0;
            for (uint32_t r = 0; r < 4; r++) {
                o.rank = r;
                for (uint32_t w = 0; w < 2; w++) {
                    o.worker = w;
                    wn[w] = drain(d, &o, wout[w], n);
                }
                uint64_t k = loop_prefix(wout, wn, 2, 4, steps, loop);
                for (uint64_t i = 0; i < k; i++) seen[loop[i]]++;
                consumed += k;
            }
            char state[4096];
            o.rank = 0, o.worker = 0;
            int len = pagein_pipe_state(d, &o, steps, state, sizeof state);
            CHECK(len > 0 && (size_t)len < sizeof state);
            /* what the state says, from the library's parser (bindings keep none) */
            pagein_pipe_state_info si;
            CHECK_OK(pagein_pipe_state_parse(state, &si));
            CHECK(si.order == (pagein_order)order && si.seed == 5 && si.epoch == 3 && si.samples == n &&
                  si.window == 3 && si.groups == pagein_dataset_group_count(d));
            CHECK_EQ(si.remaining, n - consumed);
            /* onto 3 ranks, no workers */
            pagein_pipe_opts o2 = PAGEIN_PIPE_OPTS_INIT;
            o2.order = (pagein_order)order, o2.seed = 5, o2.window = 3, o2.world_size = 3, o2.state = state;
            uint64_t rest = 0;
            for (uint32_t r = 0; r < 3; r++) {
                o2.rank = r;
                uint64_t k = drain(d, &o2, loop, n);
                for (uint64_t i = 0; i < k; i++) seen[loop[i]]++;
                rest += k;
            }
            CHECK_EQ(consumed + rest, n);
            for (uint64_t i = 0; i < n; i++)
                if (seen[i] != 1) {
                    printf("    %s %s: sample %" PRIu64 " seen %" PRIu64 " times (state %s)\n", specs[s],
                           pagein_order_name((pagein_order)order), i, seen[i], state);
                    CHECK(0);
                    break;
                }
            /* a state for another seed is refused */
            o2.seed = 6;
            pagein_pipe *p = NULL;
            CHECK_EQ(pagein_pipe_open(&p, d, &o2), PAGEIN_E_INVALID);
            free(seen);
            free(loop);
            free(wout[0]);
            free(wout[1]);
        }
        pagein_dataset_close(d);
    }
    return PASS;
}

static const pagein_field *field(const pagein_item *it, const char *name) {
    for (size_t i = 0; i < it->nfields; i++)
        if (!strcmp(it->fields[i].name, name)) return &it->fields[i];
    return NULL;
}

TEST(dataformats_values) {
    if (!fixtures()) SKIP_BECAUSE("/usr/bin/python3 cannot write the fixtures");
    const char *wspecs[] = {"wds/shard-{00..03}.tar", "wds/gnu.tar", "wds-gz.tar.gz"};
    for (size_t s = 0; s < 3; s++) {
        if (s == 1 && access(fx("wds/gnu.tar"), R_OK) != 0) continue; /* no GNU tar here */
        pagein_dataset *d = open_ds(fx(wspecs[s]), NULL);
        if (!d) continue;
        CHECK_EQ(pagein_dataset_count(d), s == 0 ? 160 : 40);
        CHECK_STR(pagein_dataset_format(d, 0), "webdataset");
        pagein_pipe_opts o = PAGEIN_PIPE_OPTS_INIT;
        o.order = PAGEIN_ORDER_GLOBAL;
        pagein_pipe *p = NULL;
        CHECK_OK(pagein_pipe_open(&p, d, &o));
        pagein_item it;
        int rc;
        uint64_t n = 0;
        while (p && (rc = pagein_pipe_next(p, &it)) == 1) {
            unsigned sh = (unsigned)(it.id / 40), k = (unsigned)(it.id % 40);
            char want[64];
            snprintf(want, sizeof want, "hello %u %u", sh, k);
            const pagein_field *t = field(&it, "txt"), *c = field(&it, "cls"), *b = field(&it, "bin"),
                               *key = field(&it, "__key__");
            CHECK(t && !t->null && t->nbytes == strlen(want) && !memcmp(t->data, want, t->nbytes));
            CHECK(c && c->nbytes == 1 && ((const char *)c->data)[0] == '0' + (char)(k % 7));
            CHECK(key && key->type == PAGEIN_FIELD_UTF8 && key->nbytes >= 9);
            if (key && key->nbytes >= 9) {
                char kw[16];
                snprintf(kw, sizeof kw, "s%02u/%05u", sh, k);
                CHECK(!memcmp((const char *)key->data + key->nbytes - 9, kw, 9));
            }
            CHECK(b != NULL);
            if (b && k % 2 == 0) {
                CHECK(!b->null && b->nbytes == k * 13u);
                for (uint64_t j = 0; !b->null && j < b->nbytes; j++)
                    if (((const uint8_t *)b->data)[j] != (sh * k + j) % 251) {
                        CHECK(0);
                        break;
                    }
            } else if (b)
                CHECK(b->null);
            n++;
        }
        CHECK_EQ(n, pagein_dataset_count(d));
        pagein_pipe_close(p);
        pagein_dataset_close(d);
    }
    /* MDS: every column's type, shape and value */
    pagein_dataset *d = open_ds(fx("mds"), NULL);
    if (d) {
        CHECK_EQ(pagein_dataset_count(d), 60);
        pagein_pipe_opts o = PAGEIN_PIPE_OPTS_INIT;
        o.order = PAGEIN_ORDER_NONE;
        pagein_pipe *p = NULL;
        CHECK_OK(pagein_pipe_open(&p, d, &o));
        pagein_item it;
        uint64_t i = 0;
        while (p && pagein_pipe_next(p, &it) == 1) {
            CHECK_EQ(it.id, i);
            const pagein_field *id = field(&it, "id"), *tx = field(&it, "text"), *tk = field(&it, "tokens"),
                               *v = field(&it, "vec"), *lb = field(&it, "label"), *raw = field(&it, "raw");
            int64_t x;
            CHECK(id && id->type == PAGEIN_FIELD_INT && id->width == 8 && id->ndim == 0);
            if (id) {
                memcpy(&x, id->data, 8);
                CHECK_EQ(x, (int64_t)i);
            }
            char want[32];
            snprintf(want, sizeof want, "sample %" PRIu64, i);
            CHECK(tx && tx->type == PAGEIN_FIELD_UTF8 && tx->nbytes == strlen(want) && !memcmp(tx->data, want, tx->nbytes));
            CHECK(tk && tk->type == PAGEIN_FIELD_INT && tk->width == 4 && tk->ndim == 1 && tk->shape[0] == i % 9 + 1);
            for (uint64_t j = 0; tk && j < tk->shape[0]; j++) {
                int32_t y;
                memcpy(&y, (const uint8_t *)tk->data + 4 * j, 4);
                CHECK_EQ(y, (int32_t)j);
            }
            CHECK(v && v->type == PAGEIN_FIELD_FLOAT && v->width == 4 && v->ndim == 1 && v->shape[0] == 4);
            if (v) {
                float f[4];
                memcpy(f, v->data, 16);
                CHECK(f[0] == (float)i && f[1] == (float)i + 0.5f && f[2] == -(float)i && f[3] == 2.0f * (float)i);
            }
            CHECK(lb && lb->type == PAGEIN_FIELD_UINT && lb->width == 1 && ((const uint8_t *)lb->data)[0] == i % 256);
            CHECK(raw && raw->type == PAGEIN_FIELD_BINARY && raw->nbytes == i % 5);
            i++;
        }
        CHECK_EQ(i, 60);
        pagein_pipe_close(p);
        pagein_dataset_close(d);
    }
    /* lines: blank lines skipped, '\r' kept; .gz and .zst equal the plain file */
    d = open_ds(fx("lines/b.txt"), NULL);
    if (d) {
        CHECK_EQ(pagein_dataset_count(d), 3);
        pagein_pipe_opts o = PAGEIN_PIPE_OPTS_INIT;
        o.order = PAGEIN_ORDER_NONE;
        pagein_pipe *p = NULL;
        CHECK_OK(pagein_pipe_open(&p, d, &o));
        const char *want[] = {"one", "two\r", "three"};
        pagein_item it;
        for (int k = 0; p && k < 3 && pagein_pipe_next(p, &it) == 1; k++)
            CHECK(it.fields[0].nbytes == strlen(want[k]) && !memcmp(it.fields[0].data, want[k], strlen(want[k])));
        pagein_pipe_close(p);
        pagein_dataset_close(d);
    }
    /* Megatron through the table: tokens i * 100 + j, sequences of i % 7 (empty ones too) */
    d = open_ds(fx("mega/m.idx"), NULL);
    if (d) {
        CHECK_STR(pagein_dataset_format(d, 0), "megatron");
        CHECK_EQ(pagein_dataset_count(d), 50);
        pagein_pipe_opts o = PAGEIN_PIPE_OPTS_INIT;
        o.order = PAGEIN_ORDER_GLOBAL;
        pagein_pipe *p = NULL;
        CHECK_OK(pagein_pipe_open(&p, d, &o));
        pagein_item it;
        int k = 0;
        while (p && pagein_pipe_next(p, &it) == 1) {
            const pagein_field *t = &it.fields[0];
            CHECK(it.nfields == 1 && t->type == PAGEIN_FIELD_INT && t->width == 4 && t->ndim == 1 &&
                  t->shape[0] == it.id % 7 && t->nbytes == 4 * (it.id % 7));
            for (uint64_t j = 0; j < t->shape[0]; j++) {
                int32_t v;
                memcpy(&v, (const uint8_t *)t->data + 4 * j, 4);
                CHECK_EQ(v, (int32_t)(it.id * 100 + j));
            }
            k++;
        }
        CHECK_EQ(k, 50);
        pagein_pipe_close(p);
        pagein_dataset_close(d);
    }
    const char *zs[] = {"lines/c.jsonl.gz", "lines/d.jsonl.zst"};
    for (int z = 0; z < 2; z++) {
        if (access(fx(zs[z]), R_OK) != 0) continue;
        d = open_ds(fx(zs[z]), NULL);
        if (!d) continue;
        CHECK_EQ(pagein_dataset_count(d), 120);
        pagein_pipe_opts o = PAGEIN_PIPE_OPTS_INIT;
        o.order = PAGEIN_ORDER_NONE;
        pagein_pipe *p = NULL;
        CHECK_OK(pagein_pipe_open(&p, d, &o));
        pagein_item it;
        for (int k = 0; p && pagein_pipe_next(p, &it) == 1; k++) {
            char w[32];
            snprintf(w, sizeof w, "{\"i\": %d}", k);
            CHECK(it.fields[0].nbytes == strlen(w) && !memcmp(it.fields[0].data, w, strlen(w)));
        }
        pagein_pipe_close(p);
        pagein_dataset_close(d);
    }
    return PASS;
}

TEST(dataformats_columns) {
    if (!fixtures()) SKIP_BECAUSE("/usr/bin/python3 cannot write the fixtures");
    const char *cols[] = {"text", "id"};
    pagein_dataset_opts o = PAGEIN_DATASET_OPTS_INIT;
    o.columns = cols;
    o.ncolumns = 2;
    pagein_dataset *d = open_ds(fx("mds"), &o);
    if (d) {
        pagein_pipe *p = NULL;
        CHECK_OK(pagein_pipe_open(&p, d, NULL));
        pagein_item it;
        CHECK(p && pagein_pipe_next(p, &it) == 1);
        if (p) {
            CHECK_EQ(it.nfields, 2); /* the shard's order (id, label, raw, text, ...), not the order asked */
            CHECK_STR(it.fields[0].name, "id");
            CHECK_STR(it.fields[1].name, "text");
        }
        pagein_pipe_close(p);
        pagein_dataset_close(d);
    }
    const char *bad[] = {"nope"};
    o.columns = bad;
    o.ncolumns = 1;
    pagein_dataset *d2 = NULL;
    CHECK_EQ(pagein_dataset_open(&d2, fx("mds"), &o), PAGEIN_E_NOT_FOUND);
    CHECK(strstr(pagein_last_error_detail(), "nope") != NULL);
    CHECK_EQ(pagein_dataset_open(&d2, fx("wds/shard-00.tar"), &o), PAGEIN_E_NOT_FOUND);
    return PASS;
}

/* The one columns= rule over every flat and columnar row: fields come in
 * the shard's order, not the order asked, and a name given twice selects
 * its field once. Asked {second, first, second}, each row gives {first,
 * second} (a one-column row: its column once). */
TEST(dataformats_columns_one_order) {
    if (!fixtures()) SKIP_BECAUSE("/usr/bin/python3 cannot write the fixtures");
    const char *specs[] = {fx("mds"), fx("wds/shard-00.tar"), fx("lines"),
                           "tests/data/parquet/fixtures/uncompressed_v1_plain.parquet",
                           "tests/data/arrow/fixtures/types.file.arrow"};
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        pagein_dataset *d = open_ds(specs[s], NULL);
        pagein_pipe *p = NULL;
        pagein_item it;
        char first[64] = "", second[64] = "";
        size_t all = 0;
        CHECK(d && pagein_pipe_open(&p, d, NULL) == 0 && pagein_pipe_next(p, &it) == 1);
        if (p && it.nfields >= 1) {
            all = it.nfields;
            snprintf(first, sizeof first, "%s", it.fields[0].name);
            snprintf(second, sizeof second, "%s", it.fields[all > 1].name);
        }
        pagein_pipe_close(p);
        pagein_dataset_close(d);
        CHECK(all > 1 || s == 2); /* lines: one column; the others several */
        if (!all) continue;
        const char *cols[] = {second, first, second};
        pagein_dataset_opts o = PAGEIN_DATASET_OPTS_INIT;
        o.columns = cols;
        o.ncolumns = 3;
        d = open_ds(specs[s], &o);
        p = NULL;
        CHECK(d && pagein_pipe_open(&p, d, NULL) == 0 && pagein_pipe_next(p, &it) == 1);
        if (p) {
            CHECK_EQ(it.nfields, all > 1 ? 2 : 1);
            CHECK_STR(it.fields[0].name, first);
            if (all > 1 && it.nfields > 1) CHECK_STR(it.fields[1].name, second);
        }
        pagein_pipe_close(p);
        pagein_dataset_close(d);
    }
    return PASS;
}

/* A .json file holding one JSON array, or one value over several lines, is
 * refused by the lines row's open naming the file (it gave line fragments);
 * JSON Lines under a .json name, arrays one per line included, is read. */
TEST(dataformats_json_document_refused) {
    static const struct {
        const char *name, *text, *says;
        uint64_t n;
    } c[] = {
        {"arr.json", "[\n {\"text\": \"a\"},\n {\"text\": \"b\"}\n]\n", "a JSON array, not JSON Lines", 0},
        {"obj.json", "{\n  \"text\": \"a\"\n}\n", "a JSON document over several lines", 0},
        {"ok.json", "{\"a\": 1}\n[1, 2]\n", NULL, 2},
        {"one.json", "  [{\"a\": 1}, 2]\n", "a JSON array, not JSON Lines", 0}, /* json.dump's array */
        {"obj1.json", "{\"a\": 1}\n", NULL, 1},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        const char *p = pt_tmppath(c[i].name);
        CHECK_OK(pt_write_file(p, c[i].text, strlen(c[i].text)));
        pagein_dataset *d = NULL;
        int rc = pagein_dataset_open(&d, p, NULL);
        if (c[i].says) {
            CHECK_EQ(rc, PAGEIN_E_FORMAT);
            CHECK(strstr(pagein_last_error_detail(), c[i].name) && strstr(pagein_last_error_detail(), c[i].says));
        } else {
            CHECK_OK(rc);
            CHECK_EQ(d ? pagein_dataset_count(d) : 0, c[i].n);
        }
        pagein_dataset_close(d);
    }
    { /* JSON Lines whose first record is past 1 MiB: read, not judged */
        size_t big = (3u << 19) + 64;
        char *t = malloc(big);
        CHECK(t != NULL);
        if (!t) return FAIL;
        memcpy(t, "{\"t\": \"", 7);
        memset(t + 7, 'x', big - 7);
        size_t e = (3u << 19);
        memcpy(t + e, "\"}\n{\"a\": 1}\n", 12);
        const char *p = pt_tmppath("bigfirst.json");
        CHECK_OK(pt_write_file(p, t, e + 12));
        free(t);
        pagein_dataset *d = NULL;
        CHECK_OK(pagein_dataset_open(&d, p, NULL));
        CHECK_EQ(d ? pagein_dataset_count(d) : 0, 2);
        pagein_dataset_close(d);
    }
    /* a folder: .json beside shards of another row is their metadata (a
     * pretty-printed info.json does not stop the folder opening); .json
     * files alone or beside .jsonl are JSON Lines shards */
    const char *mixed = pt_tmppath("json_mixed"), *alone = pt_tmppath("json_alone");
    CHECK(mkdir(mixed, 0755) == 0 && mkdir(alone, 0755) == 0);
    char f[4096];
    size_t pn = 0;
    uint8_t *pq = pt_read_file("tests/data/parquet/fixtures/uncompressed_v1_plain.parquet", &pn);
    CHECK(pq != NULL);
    if (!pq) return FAIL;
    snprintf(f, sizeof f, "%s/data.parquet", mixed);
    CHECK_OK(pt_write_file(f, pq, pn));
    free(pq);
    pagein_dataset *one = NULL;
    CHECK_OK(pagein_dataset_open(&one, f, NULL));
    uint64_t rows = one ? pagein_dataset_count(one) : 0;
    pagein_dataset_close(one);
    CHECK(rows > 0);
    snprintf(f, sizeof f, "%s/info.json", mixed);
    CHECK_OK(pt_write_file(f, c[1].text, strlen(c[1].text)));
    snprintf(f, sizeof f, "%s/train.json", alone);
    CHECK_OK(pt_write_file(f, "{\"a\": 1}\n{\"a\": 2}\n", 18));
    snprintf(f, sizeof f, "%s/valid.json", alone);
    CHECK_OK(pt_write_file(f, "{\"a\": 3}\n", 9));
    snprintf(f, sizeof f, "%s/more.jsonl", alone); /* lines of the same row: the .json stay shards */
    CHECK_OK(pt_write_file(f, "{\"a\": 4}\n", 9));
    pagein_dataset *d = NULL;
    CHECK_OK(pagein_dataset_open(&d, mixed, NULL));
    CHECK_EQ(d ? pagein_dataset_count(d) : 0, rows);
    pagein_dataset_close(d);
    d = NULL;
    CHECK_OK(pagein_dataset_open(&d, alone, NULL));
    CHECK_EQ(d ? pagein_dataset_count(d) : 0, 4);
    pagein_dataset_close(d);
    return PASS;
}

static int write_bytes(const char *path, const void *p, size_t n) { return pt_write_file(path, p, n); }

TEST(dataformats_malformed) {
    if (!fixtures()) SKIP_BECAUSE("/usr/bin/python3 cannot write the fixtures");
    size_t n = 0;
    uint8_t *t = pt_read_file(fx("wds/shard-00.tar"), &n);
    CHECK(t && n > 2048);
    if (!t) return FAIL;
    pagein_dataset *d = NULL;
    /* a truncated member */
    const char *p1 = pt_tmppath("trunc.tar");
    write_bytes(p1, t, 512 + 5);
    CHECK_EQ(pagein_dataset_open(&d, p1, NULL), PAGEIN_E_FORMAT);
    CHECK(strstr(pagein_last_error_detail(), "trunc.tar") != NULL);
    /* a flipped byte in the first header: checksum */
    t[10] ^= 0x55;
    const char *p2 = pt_tmppath("cksum.tar");
    write_bytes(p2, t, n);
    CHECK_EQ(pagein_dataset_open(&d, p2, NULL), PAGEIN_E_FORMAT);
    CHECK(strstr(pagein_last_error_detail(), "checksum") != NULL);
    free(t);
    /* MDS: a pickle column is refused; an offset past the end is malformed */
    char cfg[] = "{\"column_encodings\": [\"pkl\"], \"column_names\": [\"obj\"], \"column_sizes\": [null]}";
    uint8_t img[512];
    uint32_t hdr[3] = {1, 0, 0};
    hdr[1] = (uint32_t)(12 + strlen(cfg));
    hdr[2] = hdr[1] + 8;
    memcpy(img, hdr, 12);
    memcpy(img + 12, cfg, strlen(cfg));
    memset(img + hdr[1], 0, 8);
    const char *p3 = pt_tmppath("pickle.mds");
    write_bytes(p3, img, hdr[2]);
    CHECK_EQ(pagein_dataset_open(&d, p3, NULL), PAGEIN_E_UNSAFE);
    CHECK(strstr(pagein_last_error_detail(), "obj") != NULL);
    char cfg2[] = "{\"column_encodings\": [\"str\"], \"column_names\": [\"s\"], \"column_sizes\": [null]}";
    hdr[1] = (uint32_t)(12 + strlen(cfg2));
    hdr[2] = hdr[1] + 1000;
    memcpy(img, hdr, 12);
    memcpy(img + 12, cfg2, strlen(cfg2));
    const char *p4 = pt_tmppath("past.mds");
    write_bytes(p4, img, hdr[1] + 8);
    CHECK_EQ(pagein_dataset_open(&d, p4, NULL), PAGEIN_E_FORMAT);
    CHECK(strstr(pagein_last_error_detail(), "past.mds") != NULL);
    /* a sample whose size prefix claims more than it holds: named at read */
    hdr[2] = hdr[1] + 8;
    memcpy(img, hdr, 12);
    uint32_t big = 100;
    memcpy(img + hdr[1], &big, 4);
    const char *p5 = pt_tmppath("size.mds");
    write_bytes(p5, img, hdr[2]);
    CHECK_OK(pagein_dataset_open(&d, p5, NULL));
    if (d) {
        pagein_pipe *p = NULL;
        CHECK_OK(pagein_pipe_open(&p, d, NULL));
        pagein_item it;
        CHECK_EQ(p ? pagein_pipe_next(p, &it) : 0, PAGEIN_E_FORMAT);
        CHECK(strstr(pagein_last_error_detail(), "sample 0") && strstr(pagein_last_error_detail(), "'s'"));
        pagein_pipe_close(p);
        pagein_dataset_close(d);
        d = NULL;
    }
    /* a .gz that is not gzip data past its header */
    uint8_t gz[64] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff, 0xff};
    const char *p6 = pt_tmppath("bad.jsonl.gz");
    write_bytes(p6, gz, sizeof gz);
    CHECK_EQ(pagein_dataset_open(&d, p6, NULL), PAGEIN_E_FORMAT);
    /* nothing matches */
    CHECK_EQ(pagein_dataset_open(&d, pt_tmppath("none-*.tar"), NULL), PAGEIN_E_NOT_FOUND);
    return PASS;
}

TEST(dataformats_records_megatron_table) {
    /* the old constructors and pagein_dataset_open give the same samples */
    const char *p = pt_tmppath("recs.bin");
    uint8_t buf[1000];
    for (int i = 0; i < 1000; i++) buf[i] = (uint8_t)(i * 7);
    CHECK_EQ(write_bytes(p, buf, sizeof buf), 0);
    pagein_dataset_opts o = PAGEIN_DATASET_OPTS_INIT;
    o.record_bytes = 10;
    pagein_dataset *d = open_ds(p, &o);
    if (!d) return FAIL;
    CHECK_EQ(pagein_dataset_count(d), 100);
    CHECK_STR(pagein_dataset_format(d, 0), "records");
    pagein_sample_loc loc;
    CHECK_OK(pagein_dataset_locate(d, 42, &loc));
    CHECK(loc.offset == 420 && loc.length == 10);
    pagein_pipe_opts po = PAGEIN_PIPE_OPTS_INIT;
    po.order = PAGEIN_ORDER_GLOBAL;
    pagein_pipe *pp = NULL;
    CHECK_OK(pagein_pipe_open(&pp, d, &po));
    pagein_item it;
    int k = 0;
    while (pp && pagein_pipe_next(pp, &it) == 1) {
        CHECK(it.nfields == 1 && it.fields[0].nbytes == 10 && !memcmp(it.fields[0].data, buf + it.id * 10, 10));
        k++;
    }
    CHECK_EQ(k, 100);
    pagein_pipe_close(pp);
    /* the old reader still works over the table's records */
    pagein_reader *r = NULL;
    CHECK_OK(pagein_reader_open(&r, d, NULL));
    pagein_sample s;
    k = 0;
    while (r && pagein_reader_next(r, &s) == 1) k++;
    CHECK_EQ(k, 100);
    pagein_reader_close(r);
    pagein_dataset_close(d);
    return PASS;
}

TEST(dataformats_tar_index_cache) {
    if (!fixtures()) SKIP_BECAUSE("/usr/bin/python3 cannot write the fixtures");
    size_t n = 0;
    uint8_t *t = pt_read_file(fx("wds/shard-02.tar"), &n);
    CHECK(t != NULL);
    if (!t) return FAIL;
    const char *p = pt_tmppath("cache.tar"), *c = pt_tmppath("cache.tar.pagein-idx");
    CHECK_EQ(write_bytes(p, t, n), 0);
    free(t);
    unlink(c);
    uint64_t ref[40], got[40];
    pagein_pipe_opts o = PAGEIN_PIPE_OPTS_INIT;
    o.order = PAGEIN_ORDER_GLOBAL;
    pagein_dataset *d = open_ds(p, NULL);
    if (!d) return FAIL;
    CHECK_EQ(drain(d, &o, ref, 40), 40);
    pagein_dataset_close(d);
    CHECK(access(c, R_OK) == 0); /* written beside the shard */
    /* read from the cache: the same samples */
    d = open_ds(p, NULL);
    if (d) {
        CHECK_EQ(drain(d, &o, got, 40), 40);
        CHECK(!memcmp(ref, got, sizeof ref));
        pagein_dataset_close(d);
    }
    /* a damaged cache is ignored and rebuilt */
    size_t cn = 0;
    uint8_t *cb = pt_read_file(c, &cn);
    CHECK(cb && cn > 100);
    if (cb) {
        for (size_t i = cn / 2; i < cn; i++) cb[i] ^= 0xa5;
        write_bytes(c, cb, cn);
        free(cb);
    }
    d = open_ds(p, NULL);
    if (d) {
        CHECK_EQ(pagein_dataset_count(d), 40);
        CHECK_EQ(drain(d, &o, got, 40), 40);
        CHECK(!memcmp(ref, got, sizeof ref));
        pagein_dataset_close(d);
    }
    return PASS;
}

/* The index cache is written as a new file of its own, never through a
 * link planted at its temporary name in a shared directory, and is no more
 * readable than its shard. */
TEST(dataformats_index_cache_no_follow) {
    if (!fixtures()) SKIP_BECAUSE("/usr/bin/python3 cannot write the fixtures");
    size_t n = 0;
    uint8_t *t = pt_read_file(fx("wds/shard-02.tar"), &n);
    CHECK(t != NULL);
    if (!t) return FAIL;
    const char *p = pt_tmppath("private.tar"), *c = pt_tmppath("private.tar.pagein-idx");
    const char *victim = pt_tmppath("victim.txt");
    CHECK_EQ(write_bytes(p, t, n), 0);
    free(t);
    CHECK_EQ(chmod(p, 0600), 0);
    unlink(c);
    CHECK_EQ(write_bytes(victim, "keep me\n", 8), 0);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", c, (long)getpid());
    unlink(tmp);
    CHECK_EQ(symlink(victim, tmp), 0);
    pagein_dataset *d = open_ds(p, NULL);
    if (!d) return FAIL;
    CHECK_EQ(pagein_dataset_count(d), 40);
    pagein_dataset_close(d);
    size_t vn = 0;
    uint8_t *v = pt_read_file(victim, &vn);
    CHECK(v && vn == 8 && !memcmp(v, "keep me\n", 8)); /* the link's target untouched */
    free(v);
    struct stat st;
    CHECK_EQ(lstat(c, &st), 0); /* the cache is there, a plain file */
    CHECK(S_ISREG(st.st_mode));
    CHECK_EQ(st.st_mode & 077, 0); /* as private as the shard */
    unlink(tmp);
    unlink(c);
    return PASS;
}

TEST(dataformats_lines_index_cache) {
    /* a JSONL file of 1.5 MiB: its line index is cached beside it */
    const char *p = pt_tmppath("big.jsonl"), *c = pt_tmppath("big.jsonl.pagein-idx");
    size_t n = 0, cap = 3u << 19;
    char *t = malloc(cap + 64);
    int lines = 0;
    while (n < cap) n += (size_t)snprintf(t + n, 64, "{\"i\": %d}\n%s", lines, lines % 5 == 0 ? "\n" : ""), lines++;
    CHECK_EQ(write_bytes(p, t, n), 0);
    free(t);
    unlink(c);
    pagein_dataset *d = open_ds(p, NULL);
    if (!d) return FAIL;
    CHECK_EQ(pagein_dataset_count(d), lines);
    pagein_dataset_close(d);
    CHECK(access(c, R_OK) == 0);
    for (int round = 0; round < 2; round++) {
        d = open_ds(p, NULL); /* from the cache, then after damaging it */
        if (!d) return FAIL;
        CHECK_EQ(pagein_dataset_count(d), lines);
        pagein_pipe_opts o = PAGEIN_PIPE_OPTS_INIT;
        o.order = PAGEIN_ORDER_GLOBAL;
        pagein_pipe *pp = NULL;
        CHECK_OK(pagein_pipe_open(&pp, d, &o));
        pagein_item it;
        int k = 0;
        while (pp && pagein_pipe_next(pp, &it) == 1) {
            char w[32];
            snprintf(w, sizeof w, "{\"i\": %d}", (int)it.id);
            if (it.fields[0].nbytes != strlen(w) || memcmp(it.fields[0].data, w, strlen(w))) {
                CHECK(0);
                break;
            }
            k++;
        }
        CHECK_EQ(k, lines);
        pagein_pipe_close(pp);
        pagein_dataset_close(d);
        size_t cn = 0;
        uint8_t *cb = pt_read_file(c, &cn);
        if (cb && cn > 64) {
            for (size_t i = cn - 64; i < cn; i++) cb[i] ^= 0x3c;
            write_bytes(c, cb, cn);
        }
        free(cb);
    }
    return PASS;
}

/* A 15-byte zstd MDS shard whose frame declares a raw size zstd could not
 * expand 15 bytes to: refused as malformed, naming the shard, before any
 * allocation of that size (found by fuzz_mds as a 10 s, 170 MB unit). */
TEST(dataformats_mds_zstd_declared_size_bound) {
    static const uint8_t bomb[] = {0x28, 0xb5, 0x2f, 0xfd, 0xb2, 0x75, 0x6e, 0x64,
                                   0x61, 0x72, 0x40, 0x61, 0x79, 0xf2, 0x6c};
    const char *p = pt_tmppath("shard.00000.mds.zstd");
    CHECK_OK(pt_write_file(p, bomb, sizeof bomb));
    pagein_dataset *d = NULL;
    CHECK_EQ(pagein_dataset_open(&d, p, NULL), PAGEIN_E_FORMAT);
    CHECK(strstr(pagein_last_error_detail(), "shard.00000.mds.zstd") != NULL);
    CHECK(strstr(pagein_last_error_detail(), "zstd bytes can hold") != NULL);
    return PASS;
}

#ifdef PAGEIN_HAVE_ZLIB
#include <sys/stat.h>
#include <zlib.h>
/* The global order over rows that are not single byte ranges (here .gz line
 * files, a group each) fetches a sample's whole group: a unit of R samples
 * holds up to min(R, groups) groups. Over more than 256 groups the default
 * R stays 256, so a unit never holds more than 256 groups (a group-sized R
 * of window x 100 lines would hold ~280 of these 300: 38 units, not 118,
 * checked by reverting the rule). 300 files of 100 lines, not 600 of 200:
 * the same check at a quarter of the CPU (2.2 -> 0.6 s). */
TEST(dataformats_global_unit_groups_bounded) {
    const char *dir = pt_tmppath("gzmany");
    mkdir(dir, 0700);
    enum { FILES = 300, LINES = 100 };
    uint64_t max_group = 0;
    for (int f = 0; f < FILES; f++) {
        char p[4200], line[64];
        snprintf(p, sizeof p, "%s/f%03d.jsonl.gz", dir, f);
        gzFile z = gzopen(p, "wb");
        CHECK(z != NULL);
        if (!z) return FAIL;
        uint64_t raw = 0;
        for (int i = 0; i < LINES; i++) {
            int k = snprintf(line, sizeof line, "{\"f\": %d, \"i\": %d}\n", f, i);
            gzwrite(z, line, (unsigned)k);
            raw += (uint64_t)k;
        }
        gzclose(z);
        struct stat st;
        CHECK_EQ(stat(p, &st), 0);
        if (raw + (uint64_t)st.st_size > max_group) max_group = raw + (uint64_t)st.st_size;
    }
    pagein_dataset *d = open_ds(dir, NULL);
    if (!d) return FAIL;
    CHECK_EQ(pagein_dataset_count(d), FILES * LINES);
    CHECK_EQ(pagein_dataset_group_count(d), FILES);
    pagein_pipe_opts o = PAGEIN_PIPE_OPTS_INIT;
    o.order = PAGEIN_ORDER_GLOBAL;
    pagein_pipe *p = NULL;
    CHECK_OK(pagein_pipe_open(&p, d, &o));
    pagein_item it;
    uint64_t n = 0;
    int rc;
    while (p && (rc = pagein_pipe_next(p, &it)) == 1) n++;
    CHECK_EQ(n, FILES * LINES);
    pagein_pipe_stats st;
    pagein_pipe_get_stats(p, &st);
    pagein_pipe_close(p);
    pagein_dataset_close(d);
    CHECK_EQ(st.units, (FILES * LINES + 255) / 256);
    CHECK(st.groups <= st.units * 256); /* before: 41,902 groups in 75 units (558 a unit) */
    CHECK(st.memory_peak <= 2 * 256 * max_group); /* two units (consumed, loading) */
    return PASS;
}
#endif

/* An index cache beside a shard is used only when it belongs to us (or to
 * the shard's owner) and nobody else can write it: one owned by another user
 * or writable by others is rebuilt and replaced, never trusted. */
TEST(dataformats_index_cache_owner) {
    if (geteuid() != 0) SKIP_BECAUSE("needs root to give the cache to another user");
    const char *p = pt_tmppath("owned.jsonl"), *c = pt_tmppath("owned.jsonl.pagein-idx");
    size_t n = 0, cap = 3u << 19;
    char *t = malloc(cap + 64);
    int lines = 0;
    while (n < cap) n += (size_t)snprintf(t + n, 64, "{\"i\": %d}\n", lines), lines++;
    CHECK_EQ(write_bytes(p, t, n), 0);
    free(t);
    unlink(c);
    for (int round = 0; round < 3; round++) {
        pagein_dataset *d = open_ds(p, NULL);
        if (!d) return FAIL;
        CHECK_EQ(pagein_dataset_count(d), lines);
        pagein_dataset_close(d);
        struct stat st;
        CHECK_EQ(lstat(c, &st), 0);
        CHECK_EQ(st.st_uid, geteuid()); /* written (again) by us */
        CHECK_EQ(st.st_mode & 022, 0);
        if (round == 0) CHECK_EQ(chown(c, 65534, 65534), 0); /* another user's */
        if (round == 1) CHECK_EQ(chmod(c, 0666), 0);         /* writable by anyone */
    }
    unlink(c);
    return PASS;
}

static int has(const char *const *v, const char *s) {
    for (; v && *v; v++)
        if (!strcmp(*v, s)) return 1;
    return 0;
}

/* The table describes itself (the listing bindings and the CLI read):
 * aliases, suffixes, index files, content detection and companion files;
 * an alias opens its row; a Megatron pair is named by its .idx, its prefix
 * or its .bin, and a glob over the pair names it once. */
TEST(dataformats_rows_describe_themselves) {
    size_t n = pagein_dataset_format_count();
    CHECK(n >= 7);
    unsigned seen = 0;
    for (size_t i = 0; i < n; i++) {
        pagein_dataset_format_info in;
        CHECK_OK(pagein_dataset_format_get(i, &in));
        CHECK(in.name && in.aliases && in.suffixes && in.index_names);
        int ok = 1;
        if (!strcmp(in.name, "lines"))
            seen |= 1, ok = has(in.aliases, "jsonl") && has(in.aliases, "ndjson") && has(in.suffixes, ".jsonl.zst") &&
                            !in.content && !in.companion;
        if (!strcmp(in.name, "megatron")) seen |= 2, ok = in.companion && in.content && has(in.suffixes, ".idx");
        if (!strcmp(in.name, "webdataset")) seen |= 4, ok = has(in.aliases, "wds") && has(in.aliases, "tar");
        if (!strcmp(in.name, "mds")) seen |= 8, ok = has(in.index_names, "index.json");
        if (!strcmp(in.name, "arrow")) seen |= 16, ok = has(in.aliases, "feather") && in.content;
        if (!ok) printf("    row %s\n", in.name);
        CHECK(ok);
    }
    CHECK_EQ(seen, 31u);
    pagein_dataset_format_info in;
    CHECK_EQ(pagein_dataset_format_get(n, &in), PAGEIN_E_RANGE);
    char row[32];
    CHECK_EQ(pagein_dataset_detect_name("a/b.jsonl.zst", row, sizeof row), 1);
    CHECK_STR(row, "lines");
    CHECK_EQ(pagein_dataset_detect_name("a/b.unknown", row, sizeof row), 0);
    CHECK_STR(row, "");
    CHECK_EQ(pagein_dataset_detect_name("a/b.idx", row, sizeof row), 1);
    CHECK_STR(row, "megatron");
    if (!fixtures()) SKIP_BECAUSE("/usr/bin/python3 cannot write the fixtures");
    const char *names[] = {"mega/m.idx", "mega/m", "mega/m.bin", "mega/m*", "mega/m.[bi][id]*"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        if (k < 3) {
            CHECK_EQ(pagein_dataset_detect_name(fx(names[k]), row, sizeof row), 1);
            CHECK_STR(row, "megatron");
        }
        for (int forced = 0; forced < 2; forced++) {
            pagein_dataset_opts o = PAGEIN_DATASET_OPTS_INIT;
            o.format = forced ? "megatron" : NULL;
            pagein_dataset *d = open_ds(fx(names[k]), &o);
            if (!d) continue;
            CHECK_EQ(pagein_dataset_file_count(d), 1); /* the pair once */
            CHECK_EQ(pagein_dataset_count(d), 50);
            CHECK_STR(pagein_dataset_format(d, 0), "megatron");
            const char *path = pagein_dataset_path(d, 0);
            CHECK(path && strlen(path) > 10 && !strcmp(path + strlen(path) - 10, "mega/m.bin"));
            pagein_dataset_close(d);
        }
    }
    /* aliases are the rows' */
    const char *alias[][2] = {{"ndjson", "lines/a.jsonl"}, {"json-lines", "lines/a.jsonl"}, {"wds", "wds"}};
    for (size_t k = 0; k < sizeof alias / sizeof *alias; k++) {
        pagein_dataset_opts o = PAGEIN_DATASET_OPTS_INIT;
        o.format = alias[k][0];
        pagein_dataset *d = open_ds(fx(alias[k][1]), &o);
        if (d) CHECK_STR(pagein_dataset_format(d, 0), k < 2 ? "lines" : "webdataset");
        pagein_dataset_close(d);
    }
    return PASS;
}
