/*
 * test_remote_prefetch.c - PREFETCH over remote sources (src/load/stream.c,
 * the pager's streamed mode) against nginx on 127.0.0.1
 * (tests/remote/servers.sh): layers read through the range engine into
 * anonymous memory ahead of the cursor, the budget, re-reading released
 * layers, accessors that never hand out unread bytes, and a source that
 * fails mid-walk. White-box: includes src/load/load.h for the model's
 * buffers (mincore) and the pager's resident count.
 *
 * Without libcurl or nginx every test skips with the reason.
 */
#include "../src/load/load.h"
#include "remote_util.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef PAGEIN_HAVE_CURL

/* A local model to compare with (mapped, everything resident). */
static pagein_model *open_local(const char *path) {
    pagein_model *l = NULL;
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_POPULATE;
    if (pagein_model_open(&l, path, &o) < 0) {
        printf("    cannot open %s: %s\n", path, pagein_last_error_detail());
        return NULL;
    }
    return l;
}

/* t's bytes (remote model r, read through *data) equal to the local model's. */
static int same(const pagein_model *l, const pagein_tensor *t, const void *data) {
    const pagein_tensor *x = pagein_model_tensor_get(l, t->name);
    if (!x || x->nbytes != t->nbytes) return 0;
    return !t->nbytes || memcmp(x->data, data, t->nbytes) == 0;
}

/* Walks every layer of url (PREFETCH) with wait/done and compares every
 * tensor with the local model; then the accessors. */
static void walk_and_compare(const char *url, const char *local, uint64_t budget) {
    pagein_model *l = open_local(local);
    pagein_model *m = NULL;
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_PREFETCH;
    o.budget_bytes = budget;
    int rc = pagein_model_open(&m, url, &o);
    CHECK_OK(rc);
    if (rc < 0 || !l) goto out;
    CHECK_EQ(pagein_model_strategy(m, NULL), PAGEIN_STRATEGY_PREFETCH);
    CHECK(m->streamed);
    CHECK_EQ(pagein_model_tensor_count(m), pagein_model_tensor_count(l));
    /* before any wait: the accessors read what they hand out */
    size_t n = pagein_model_tensor_count(m);
    const pagein_tensor *last = pagein_model_tensor_by_layer(m, n - 1);
    const void *d = NULL;
    CHECK_OK(pagein_model_tensor_data(m, last, &d));
    CHECK(d && same(l, last, d));
    int32_t L = pagein_model_layer_count(m);
    for (int32_t i = -1; i <= L; i++) {
        CHECK_OK(pagein_layer_wait(m, i));
        const pagein_tensor *const *ts;
        size_t k = pagein_model_layer_tensors(m, i, &ts);
        for (size_t j = 0; j < k; j++)
            if (!same(l, ts[j], ts[j]->data)) {
                printf("    %s: layer %d tensor %s differs from %s\n", url, i, ts[j]->name, local);
                pt_failed = 1;
            }
        CHECK_OK(pagein_layer_done(m, i));
    }
    /* every tensor again through pagein_tensor_copy (released layers are
     * read again, never copied as zeros) */
    for (size_t i = 0; i < n; i++) {
        const pagein_tensor *t = pagein_model_tensor_at(m, i);
        uint8_t *buf = malloc(t->nbytes ? t->nbytes : 1);
        CHECK_OK(pagein_tensor_copy(pagein_model_file(m, t->file), t, 0, buf, t->nbytes));
        if (!same(l, t, buf)) {
            printf("    %s: pagein_tensor_copy of %s differs\n", url, t->name);
            pt_failed = 1;
        }
        free(buf);
    }
    /* and a re-walk */
    for (int32_t i = -1; i <= L; i++) {
        CHECK_OK(pagein_layer_wait(m, i));
        const pagein_tensor *const *ts;
        size_t k = pagein_model_layer_tensors(m, i, &ts);
        for (size_t j = 0; j < k; j++) CHECK(same(l, ts[j], ts[j]->data));
    }
out:
    pagein_model_close(m);
    pagein_model_close(l);
}

/* A safetensors file with L layers of two U8 tensors each (odd sizes, so
 * tensors share pages with their neighbours) plus a leading and a trailing
 * global; bytes from a hash of the offset (never all zero). */
static int write_layered(const char *path, int L, size_t a, size_t b) {
    char *h = malloc(64 * 1024);
    size_t hl = 0, off = 0;
    hl += (size_t)sprintf(h + hl, "{");
    const char *glob[2] = {"model.embed_tokens.weight", "lm_head.weight"};
    for (int i = -1; i <= L; i++) {
        for (int j = 0; j < (i < 0 || i == L ? 1 : 2); j++) {
            size_t n = j ? b : a;
            char name[64];
            if (i < 0 || i == L) snprintf(name, sizeof name, "%s", glob[i == L]);
            else snprintf(name, sizeof name, "model.layers.%d.%s", i, j ? "mlp" : "attn");
            hl += (size_t)sprintf(h + hl, "%s\"%s\":{\"dtype\":\"U8\",\"shape\":[%zu],\"data_offsets\":[%zu,%zu]}",
                                  hl > 1 ? "," : "", name, n, off, off + n);
            off += n;
        }
    }
    hl += (size_t)sprintf(h + hl, "}");
    while (hl % 8) h[hl++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(h);
        return -1;
    }
    uint64_t hlen = hl;
    fwrite(&hlen, 8, 1, f);
    fwrite(h, 1, hl, f);
    for (size_t i = 0; i < off; i++) fputc((int)((i * 2654435761u >> 13) % 251 + 1), f);
    free(h);
    return fclose(f);
}

/* Bytes of [p, p + len) on resident pages (whole pages counted). */
static uint64_t resident_bytes(const uint8_t *p, size_t len) {
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), np = (len + ps - 1) / ps;
    unsigned char *v = malloc(np ? np : 1);
    uint64_t r = 0;
    if (mincore((void *)p, len, v) == 0)
        for (size_t i = 0; i < np; i++) r += (v[i] & 1) ? ps : 0;
    free(v);
    return r;
}

static uint64_t max_group(const pagein_model *m) {
    uint64_t g = 0;
    for (int32_t i = 0; i < m->nlayers + 2; i++) g = m->lbytes[i] > g ? m->lbytes[i] : g;
    return g;
}

#endif

/* Real files (GGUF and safetensors, a sharded index) over HTTP with
 * PREFETCH: every layer bytewise equal to the local file when waited for,
 * the accessors before any wait, after the walk, and a second walk. */
TEST(remote_prefetch_walk) {
    NEED_CURL();
#ifdef PAGEIN_HAVE_CURL
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    RT_NEED_SERVERS();
    walk_and_compare(rt_url("HTTP", "/files/real/gguf/tinyllamas-stories-260k-q8_0.gguf"),
                     pt_testdata("gguf/tinyllamas-stories-260k-q8_0.gguf"), 0);
    walk_and_compare(rt_url("HTTP", "/files/real/gguf/tinyllamas-stories-260k-q8_0.gguf"),
                     pt_testdata("gguf/tinyllamas-stories-260k-q8_0.gguf"), 64 << 10);
    walk_and_compare(rt_url("HTTP", "/files/real/safetensors/ollama-minicpm3-tiny-f32.safetensors"),
                     pt_testdata("safetensors/ollama-minicpm3-tiny-f32.safetensors"), 1);
    const char *old = getenv("CURL_CA_BUNDLE");
    char *saved = old ? strdup(old) : NULL;
    setenv("CURL_CA_BUNDLE", rt_env("CA"), 1);
    walk_and_compare(rt_url("HTTPS", "/files/real/gguf/llama-2-tiny-random.gguf"),
                     pt_testdata("gguf/llama-2-tiny-random.gguf"), 0);
    if (saved) setenv("CURL_CA_BUNDLE", saved, 1);
    else unsetenv("CURL_CA_BUNDLE");
    free(saved);
    char local[600];
    snprintf(local, sizeof local, "%s/www/sharded/model.safetensors.index.json", rt_dir());
    walk_and_compare(rt_url("HTTP", "/files/sharded/model.safetensors.index.json"), local, 4096);
    /* a local file keeps the mapped pager */
    pagein_model *m = NULL;
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_PREFETCH;
    CHECK_OK(pagein_model_open(&m, pt_testdata("gguf/tinyllamas-stories-260k-q8_0.gguf"), &o));
    if (m) {
        CHECK(!m->streamed && !m->rbuf);
        const pagein_tensor *t = pagein_model_tensor_at(m, 0);
        const void *d = NULL;
        CHECK_OK(pagein_model_tensor_data(m, t, &d));
        CHECK(d == t->data);
    }
    pagein_model_close(m);
#endif
    return PASS;
}

/* The budget over a remote file: the pager's resident count and the pages
 * actually resident in the model's buffer stay within budget + one group
 * (plus the pages tensors share with released neighbours); a released
 * layer's pages are gone; waiting for it again reads it again. */
TEST(remote_prefetch_budget) {
    NEED_CURL();
#ifdef PAGEIN_HAVE_CURL
    RT_NEED_SERVERS();
    char path[600];
    snprintf(path, sizeof path, "%s/www/pf_layered.safetensors", rt_dir());
    const int L = 12;
    CHECK_OK(write_layered(path, L, 96 * 1024 + 13, 160 * 1024 + 7));
    pagein_model *l = open_local(path);
    pagein_model *m = NULL;
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_PREFETCH;
    o.prefetch_ahead = 4;
    o.budget_bytes = 600 * 1024; /* two layers and a bit: the window is cut by the budget */
    CHECK_OK(pagein_model_open(&m, rt_url("HTTP", "/files/pf_layered.safetensors"), &o));
    if (!m || !l) goto out;
    CHECK(m->streamed);
    CHECK_EQ(pagein_model_layer_count(m), L);
    uint64_t mg = max_group(m), ps = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t limit = o.budget_bytes + mg;
    uint64_t slack = 2 * ps * m->tab.n; /* pages shared with another tensor are never dropped */
    uint64_t peak = 0, rpeak = 0;
    for (int32_t i = -1; i <= L; i++) {
        CHECK_OK(pagein_layer_wait(m, i));
        /* the pager has worked ahead as far as the budget lets it */
        CHECK_OK(pi_pager_settle(m, 10000));
        uint64_t r = pi_pager_resident(m), rr = resident_bytes(m->rbuf[0], m->files[0]->len);
        /* and it did work ahead: the next group is in when the budget
         * holds it beside this one */
        if (i + 1 <= L) {
            uint64_t here = 0, next = 0;
            const pagein_tensor *const *t2;
            size_t k2 = pagein_model_layer_tensors(m, i, &t2);
            for (size_t j = 0; j < k2; j++) here += t2[j]->nbytes;
            k2 = pagein_model_layer_tensors(m, i + 1, &t2);
            for (size_t j = 0; j < k2; j++) next += t2[j]->nbytes;
            if (here + next + (here + next) / 8 <= o.budget_bytes) CHECK(r >= here + next);
        }
        peak = r > peak ? r : peak;
        rpeak = rr > rpeak ? rr : rpeak;
        CHECK(r <= limit);
        CHECK(rr <= limit + slack);
        const pagein_tensor *const *ts;
        size_t k = pagein_model_layer_tensors(m, i, &ts);
        for (size_t j = 0; j < k; j++) CHECK(same(l, ts[j], ts[j]->data));
        CHECK_OK(pagein_layer_done(m, i));
        /* released: no whole page inside its tensors is resident */
        for (size_t j = 0; j < k; j++) {
            uint64_t a = pi_align_up(ts[j]->offset, ps), e = (ts[j]->offset + ts[j]->nbytes) & ~(ps - 1);
            if (e > a) CHECK_EQ(resident_bytes(m->rbuf[0] + a, e - a), 0);
        }
    }
    printf("    budget %llu, largest group %llu: pager peak %llu, pages peak %llu bytes\n",
           (unsigned long long)o.budget_bytes, (unsigned long long)mg, (unsigned long long)peak,
           (unsigned long long)rpeak);
    CHECK(peak > 0);
    /* a released layer, waited for again (behind the cursor: read by this
     * thread), and read through the accessors */
    for (int32_t i = 3; i >= 0; i--) {
        CHECK_OK(pagein_layer_wait(m, i));
        const pagein_tensor *const *ts;
        size_t k = pagein_model_layer_tensors(m, i, &ts);
        for (size_t j = 0; j < k; j++) CHECK(same(l, ts[j], ts[j]->data));
        CHECK_OK(pagein_layer_done(m, i));
    }
    /* tensor by tensor behind the cursor (pagein_tensor_wait reads just the
     * tensor, uncounted): pagein_layer_done still gives the memory back */
    for (int32_t i = 8; i <= 9; i++) {
        const pagein_tensor *const *ts;
        size_t k = pagein_model_layer_tensors(m, i, &ts);
        for (size_t j = 0; j < k; j++) {
            CHECK_OK(pagein_tensor_wait(m, ts[j]));
            CHECK(same(l, ts[j], ts[j]->data));
        }
        CHECK_OK(pagein_layer_done(m, i));
        for (size_t j = 0; j < k; j++) {
            uint64_t a = pi_align_up(ts[j]->offset, ps), e = (ts[j]->offset + ts[j]->nbytes) & ~(ps - 1);
            if (e > a) CHECK_EQ(resident_bytes(m->rbuf[0] + a, e - a), 0);
        }
    }
    const pagein_tensor *t = pagein_model_tensor_get(m, "model.layers.7.mlp");
    CHECK(t != NULL);
    if (t) {
        const void *d = NULL;
        CHECK_OK(pagein_model_tensor_data(m, t, &d));
        CHECK(d && same(l, t, d));
        CHECK_OK(pagein_model_load_tensors(m, &t, 1));
        CHECK(same(l, t, t->data));
    }
    /* every tensor at once (most released by now): one engine run, then
     * every byte through the raw pointers */
    CHECK_OK(pagein_model_load_tensors(m, NULL, 0));
    for (size_t i = 0; i < pagein_model_tensor_count(m); i++) {
        const pagein_tensor *x = pagein_model_tensor_at(m, i);
        CHECK(same(l, x, x->data));
    }
out:
    pagein_model_close(m);
    pagein_model_close(l);
    unlink(path);
#endif
    return PASS;
}

/* The object disappears after open: the waits for layers not read yet fail
 * with an error naming the URL, and no accessor hands out zeros. */
TEST(remote_prefetch_source_fails) {
    NEED_CURL();
#ifdef PAGEIN_HAVE_CURL
    RT_NEED_SERVERS();
    char path[600];
    snprintf(path, sizeof path, "%s/www/pf_gone.safetensors", rt_dir());
    const int L = 10;
    CHECK_OK(write_layered(path, L, 100 * 1024 + 1, 150 * 1024 + 3));
    pagein_model *l = open_local(path);
    const char *old = getenv("PAGEIN_HTTP_RETRIES");
    char *saved = old ? strdup(old) : NULL;
    setenv("PAGEIN_HTTP_RETRIES", "0", 1);
    pagein_model *m = NULL;
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_PREFETCH;
    o.prefetch_ahead = 1;
    o.budget_bytes = 1; /* the cursor group and nothing ahead of it */
    char url[600];
    snprintf(url, sizeof url, "%s", rt_url("HTTP", "/files/pf_gone.safetensors"));
    CHECK_OK(pagein_model_open(&m, url, &o));
    CHECK_OK(unlink(path));
    if (!m || !l) goto out;
    int failed = 0, accessor_failed = 0;
    for (int32_t i = -1; i <= L; i++) {
        int rc = pagein_layer_wait(m, i);
        if (rc < 0) {
            failed++;
            if (!strstr(pagein_last_error_detail(), "/files/pf_gone.safetensors")) {
                printf("    error does not name the URL: %s\n", pagein_last_error_detail());
                pt_failed = 1;
            }
            /* the accessors read the tensor themselves: they fail the same
             * way (or, for bytes in the prefix the source kept at open,
             * give the right ones), never zeros */
            const pagein_tensor *const *ts;
            size_t k = pagein_model_layer_tensors(m, i, &ts);
            for (size_t j = 0; j < k; j++) {
                const void *d = (const void *)1;
                int drc = pagein_model_tensor_data(m, ts[j], &d);
                if (drc < 0) {
                    accessor_failed++;
                    CHECK(d == NULL);
                    CHECK(strstr(pagein_last_error_detail(), "/files/pf_gone.safetensors") != NULL);
                    uint8_t b[16];
                    CHECK(pagein_tensor_copy(pagein_model_file(m, ts[j]->file), ts[j], 0, b, sizeof b) < 0);
                    CHECK(pagein_model_load_tensors(m, ts + j, 1) < 0);
                } else {
                    CHECK(same(l, ts[j], d));
                }
            }
            /* a later wait retries, and fails again */
            CHECK(pagein_layer_wait(m, i) < 0);
        } else {
            const pagein_tensor *const *ts;
            size_t k = pagein_model_layer_tensors(m, i, &ts);
            for (size_t j = 0; j < k; j++) CHECK(same(l, ts[j], ts[j]->data));
        }
        pagein_layer_done(m, i);
    }
    printf("    %d of %d layer waits failed after the object was deleted\n", failed, L + 2);
    CHECK(failed >= L - 4); /* layers past the kept prefix and the first window */
    CHECK(accessor_failed >= L - 4);
out:
    if (saved) setenv("PAGEIN_HTTP_RETRIES", saved, 1);
    else unsetenv("PAGEIN_HTTP_RETRIES");
    free(saved);
    pagein_model_close(m);
    pagein_model_close(l);
    unlink(path);
#endif
    return PASS;
}

/* fork() after a streamed prefetch open: the child cannot load layers (the
 * connections and the pager belong to the parent) and says so with
 * PAGEIN_E_FORKED, naming the URL, instead of handing out zeros or hanging;
 * the parent walks on unharmed. Not under ASan or valgrind, whose allocator
 * locks a fork can copy held (test_reliability.c's fork test says more). */
TEST(remote_prefetch_fork) {
    NEED_CURL();
#ifdef PAGEIN_HAVE_CURL
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    if (ASAN_BUILD || getenv("PAGEIN_UNDER_VALGRIND")) SKIP_BECAUSE("fork with a live pager thread under ASan/valgrind");
    RT_NEED_SERVERS();
    const char *name = "gguf/tinyllamas-stories-260k-q8_0.gguf";
    pagein_model *l = open_local(pt_testdata(name));
    char path[300];
    snprintf(path, sizeof path, "/files/real/%s", name);
    pagein_model *m = NULL;
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_PREFETCH;
    o.prefetch_ahead = 1;
    CHECK_OK(pagein_model_open(&m, rt_url("HTTP", path), &o));
    if (!m || !l) goto out;
    CHECK_OK(pagein_layer_wait(m, -1));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        int rc = pagein_layer_wait(m, 0);
        int named = strstr(pagein_last_error_detail(), "fork") != NULL &&
                    strstr(pagein_last_error_detail(), "127.0.0.1") != NULL;
        _exit(rc == PAGEIN_E_FORKED && named ? 0 : 10);
    }
    CHECK(pid > 0);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        printf("    child status %d (exit %d)\n", status, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    /* the parent goes on */
    for (int32_t i = 0; i <= pagein_model_layer_count(m); i++) {
        CHECK_OK(pagein_layer_wait(m, i));
        const pagein_tensor *const *ts;
        size_t k = pagein_model_layer_tensors(m, i, &ts);
        for (size_t j = 0; j < k; j++) CHECK(same(l, ts[j], ts[j]->data));
        CHECK_OK(pagein_layer_done(m, i));
    }
out:
    pagein_model_close(m);
    pagein_model_close(l);
#endif
    return PASS;
}
