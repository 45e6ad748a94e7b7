/* test_residency_model.c - page-cache residency, evict and lock of a
 * model's layers and tensors (pagein_model_*_residency, _evict_, _lock_).
 *
 * The test model has layers of 16 MiB, twice the largest readahead window
 * seen on the development machine (8 MiB), so that warming one layer can
 * pull at most the neighbouring layers in; layers two away must stay cold. */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#define MiB (1024u * 1024u)
#define NLAYERS 5
#define LAYER_BYTES (16u * MiB)
#define GLOBAL_BYTES (1u * MiB)

/* A safetensors file: embed (1 MiB), model.layers.N.w (16 MiB each, as two
 * tensors meeting mid-page: 8 MiB + 100 bytes and the rest), lm_head
 * (1 MiB). U8 tensors, random bytes, fsynced. */
static int write_model(const char *path) {
    char hdr[4096 + 64];
    size_t h = 0;
    uint64_t off = 0;
    h += (size_t)snprintf(hdr + h, sizeof hdr - h, "{\"embed.weight\":{\"dtype\":\"U8\",\"shape\":[%u],\"data_offsets\":[0,%u]}",
                          GLOBAL_BYTES, GLOBAL_BYTES);
    off = GLOBAL_BYTES;
    for (int l = 0; l < NLAYERS; l++) {
        uint64_t a = 8 * MiB + 100, b = LAYER_BYTES - a;
        h += (size_t)snprintf(hdr + h, sizeof hdr - h,
                              ",\"model.layers.%d.a\":{\"dtype\":\"U8\",\"shape\":[%llu],\"data_offsets\":[%llu,%llu]}"
                              ",\"model.layers.%d.b\":{\"dtype\":\"U8\",\"shape\":[%llu],\"data_offsets\":[%llu,%llu]}",
                              l, (unsigned long long)a, (unsigned long long)off, (unsigned long long)(off + a), l,
                              (unsigned long long)b, (unsigned long long)(off + a), (unsigned long long)(off + a + b));
        off += LAYER_BYTES;
    }
    h += (size_t)snprintf(hdr + h, sizeof hdr - h,
                          ",\"lm_head.weight\":{\"dtype\":\"U8\",\"shape\":[%u],\"data_offsets\":[%llu,%llu]}}",
                          GLOBAL_BYTES, (unsigned long long)off, (unsigned long long)(off + GLOBAL_BYTES));
    off += GLOBAL_BYTES;
    /* Pad the header so that the data starts on a page: layers then share
     * no page, and readahead still in flight for a neighbour cannot touch
     * a layer just evicted. (The two halves of each layer do share one.) */
    if (h > 4088) return -1;
    while (h < 4088) hdr[h++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    uint64_t n = h;
    fwrite(&n, 8, 1, f); /* little-endian host assumed (x86-64, arm64) */
    fwrite(hdr, 1, h, f);
    uint64_t seed = 42;
    uint64_t *buf = malloc(MiB);
    for (uint64_t done = 0; done < off; done += MiB) {
        for (size_t i = 0; i < MiB / 8; i++) buf[i] = pt_rand(&seed);
        fwrite(buf, 1, MiB, f);
    }
    free(buf);
    fflush(f);
    fsync(fileno(f));
    return fclose(f) == 0 ? 0 : -1;
}

static pagein_model *open_model(int *skip) {
    *skip = 0;
    struct statfs sf;
    if (statfs(pt_tmpdir(), &sf) == 0 && sf.f_type == 0x01021994) {
        *skip = 1;
        return NULL;
    }
    const char *p = pt_tmppath("layers.safetensors");
    if (access(p, F_OK) != 0 && write_model(p) != 0) return NULL;
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = PAGEIN_STRATEGY_LAZY;
    pagein_model *m = NULL;
    int rc = pagein_model_open(&m, p, &o);
    if (rc == PAGEIN_E_UNSUPPORTED) *skip = 2;
    else if (rc) printf("    open: %s: %s\n", pagein_strerror(rc), pagein_last_error_detail());
    return m;
}

#define OPEN_OR_SKIP(m)                                                                    \
    int skip_;                                                                             \
    pagein_model *m = open_model(&skip_);                                                  \
    if (skip_ == 1) SKIP_BECAUSE("temp dir is on tmpfs: DONTNEED cannot drop its pages"); \
    if (skip_ == 2) SKIP_BECAUSE("safetensors models not supported by this build yet");   \
    CHECK(m != NULL);                                                                      \
    if (!m) return FAIL

static uint64_t layer_resident(pagein_model *m, int32_t l) {
    pagein_residency r;
    int rc = pagein_model_layer_residency(m, l, &r);
    return rc == 0 ? r.resident_bytes : UINT64_MAX;
}

/* Residency of a tensor straight from mincore() on its file's mapping, to
 * check the library's accounting against the kernel's. */
static uint64_t mincore_resident_pages(pagein_model *m, const pagein_tensor *t) {
    pagein_file_info fi;
    pagein_file_get_info(pagein_model_file(m, t->file), &fi);
    const size_t ps = pagein_page_size();
    uintptr_t lo = ((uintptr_t)fi.base + t->offset) / ps * ps;
    uintptr_t hi = ((uintptr_t)fi.base + t->offset + t->nbytes + ps - 1) / ps * ps;
    size_t n = (hi - lo) / ps;
    unsigned char *v = malloc(n);
    uint64_t res = 0;
    if (v && mincore((void *)lo, hi - lo, v) == 0)
        for (size_t i = 0; i < n; i++) res += v[i] & 1;
    free(v);
    return res;
}

/* Readahead started by a populate can still be in flight when it returns
 * and lands a few milliseconds later (mincore shows a page once its read
 * completes). Waits until the model's residency has not changed for 50 ms
 * (at most 5 s), so that the checks see a settled page cache. */
static void settle(pagein_model *m) {
    pagein_residency a, b;
    pagein_model_residency(m, &a);
    for (int i = 0; i < 100; i++) {
        usleep(50 * 1000);
        pagein_model_residency(m, &b);
        if (b.resident_bytes == a.resident_bytes) return;
        a = b;
    }
}

TEST(residency_model_warm_chosen_layers) {
    OPEN_OR_SKIP(m);
    CHECK_EQ(pagein_model_layer_count(m), NLAYERS);
    settle(m);
    CHECK_OK(pagein_model_evict_tensors(m, NULL, 0));
    pagein_residency r;
    CHECK_OK(pagein_model_residency(m, &r));
    CHECK_EQ(r.bytes, 2 * GLOBAL_BYTES + NLAYERS * (uint64_t)LAYER_BYTES);
    CHECK_EQ(r.resident_bytes, 0);

    CHECK_OK(pagein_model_load_layers(m, 2, 2));
    CHECK_EQ(layer_resident(m, 2), LAYER_BYTES); /* the populate itself waited for these */
    settle(m);
    /* Two layers away and the globals: untouched, whatever readahead did. */
    CHECK_EQ(layer_resident(m, 0), 0);
    CHECK_EQ(layer_resident(m, 4), 0);
    CHECK_EQ(layer_resident(m, -1), 0);
    CHECK_EQ(layer_resident(m, NLAYERS), 0);
    /* The library's count agrees with mincore page by page. */
    const pagein_tensor *const *ts;
    size_t n = pagein_model_layer_tensors(m, 2, &ts);
    CHECK_EQ(n, 2);
    for (size_t i = 0; i < n; i++) {
        pagein_residency tr;
        CHECK_OK(pagein_model_tensor_residency(m, ts[i], &tr));
        CHECK_EQ(tr.resident_pages, mincore_resident_pages(m, ts[i]));
        CHECK_EQ(tr.resident_pages, tr.pages);
    }
    /* Per-tensor sums equal the model total: the page the two halves of a
     * layer share is not counted twice. */
    pagein_residency sum = {0, 0, 0, 0};
    for (size_t i = 0; i < pagein_model_tensor_count(m); i++) {
        pagein_residency tr;
        CHECK_OK(pagein_model_tensor_residency(m, pagein_model_tensor_at(m, i), &tr));
        pagein_residency_add(&sum, &tr);
    }
    CHECK_OK(pagein_model_residency(m, &r));
    CHECK_EQ(sum.resident_bytes, r.resident_bytes);
    CHECK_EQ(sum.bytes, r.bytes);

    /* Evict the layer again: zero. */
    CHECK_OK(pagein_model_evict_layers(m, 2, 2));
    CHECK_EQ(layer_resident(m, 2), 0);
    CHECK_OK(pagein_model_evict_tensors(m, NULL, 0));
    CHECK_OK(pagein_model_residency(m, &r));
    CHECK_EQ(r.resident_bytes, 0);
    CHECK_EQ(pagein_model_evict_layers(m, 3, 1), PAGEIN_E_RANGE);
    CHECK_EQ(pagein_model_evict_layers(m, -2, 1), PAGEIN_E_RANGE);
    pagein_model_close(m);
    return PASS;
}

TEST(residency_model_lock_layer) {
    SKIP_IF_ASAN();
    OPEN_OR_SKIP(m);
    CHECK_OK(pagein_model_evict_tensors(m, NULL, 0));
    int rc = pagein_model_lock_layers(m, 1, 1);
    if (rc == PAGEIN_E_MEMLOCK) {
        pagein_model_close(m);
        SKIP_BECAUSE("RLIMIT_MEMLOCK forbids locking a 16 MiB layer: %s", pagein_last_error_detail());
    }
    CHECK_OK(rc);
    CHECK_EQ(layer_resident(m, 1), LAYER_BYTES);
    settle(m);
    CHECK_OK(pagein_model_evict_tensors(m, NULL, 0));
    CHECK_EQ(layer_resident(m, 1), LAYER_BYTES); /* locked pages stay */
    CHECK_EQ(layer_resident(m, 3), 0);
    CHECK_OK(pagein_model_unlock_layers(m, 1, 1));
    settle(m);
    CHECK_OK(pagein_model_evict_tensors(m, NULL, 0));
    CHECK_EQ(layer_resident(m, 1), 0);
    pagein_model_close(m);
    return PASS;
}
