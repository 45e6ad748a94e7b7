/* test_gpu.c - GPU staging (src/gpu/, docs/GPU.md) against the host
 * backend (PAGEIN_DEVICE_HOST: heap "device" memory, asynchronous copies on
 * worker threads), the no-CUDA path, and, when a CUDA device is present,
 * the same loads onto the GPU.
 * White-box: includes src/gpu/gpu.h for the pinned-memory counters and the
 * host backend's copy-delay hook. */
#include "test.h"

#include "../src/gpu/gpu.h"

#include <stdlib.h>
#include <unistd.h>

static uint8_t pat(uint64_t seed, uint64_t off) {
    uint64_t z = (off + seed * 0x9E3779B97F4A7C15ull + 1) * 0xBF58476D1CE4E5B9ull;
    return (uint8_t)(z >> 56);
}

/* A safetensors model: embed, nl layers of two tensors, norm, head; sizes
 * vary so that tensors straddle staging buffers. Returns 0 and the path. */
static int gen_model(const char *name, int nl, uint64_t tbytes, char *path, size_t cap) {
    size_t n = (size_t)nl * 2 + 3;
    pagein_write_tensor *w = calloc(n, sizeof *w);
    char (*names)[64] = calloc(n, 64);
    uint64_t *shapes = calloc(n, sizeof *shapes);
    uint8_t **bufs = calloc(n, sizeof *bufs);
    size_t k = 0;
    snprintf(names[k++], 64, "model.embed_tokens.weight");
    for (int l = 0; l < nl; l++) {
        snprintf(names[k++], 64, "model.layers.%d.a.weight", l);
        snprintf(names[k++], 64, "model.layers.%d.b.weight", l);
    }
    snprintf(names[k++], 64, "model.norm.weight");
    snprintf(names[k++], 64, "lm_head.weight");
    for (size_t i = 0; i < n; i++) {
        shapes[i] = i == n - 2 ? 64 : tbytes + i * 977; /* the norm is tiny */
        bufs[i] = malloc(shapes[i]);
        for (uint64_t o = 0; o < shapes[i]; o++) bufs[i][o] = pat(i, o);
        w[i] = (pagein_write_tensor){names[i], PAGEIN_DTYPE_U8, 1, &shapes[i], bufs[i], NULL, NULL};
    }
    snprintf(path, cap, "%s", pt_tmppath(name));
    int rc = pagein_safetensors_write(path, w, n, NULL);
    for (size_t i = 0; i < n; i++) free(bufs[i]);
    free(bufs), free(shapes), free(names), free(w);
    return rc;
}

/* Every tensor of the load equals the CPU read of it (pagein_tensor_copy:
 * row-major, native order). Returns the number of mismatches. */
static int compare_all(pagein_gpu_load *l, const pagein_file *const *files, const pagein_tensor *const *ts,
                       size_t n) {
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const pagein_tensor *t = ts[i];
        uint64_t nb = pagein_gpu_tensor_bytes(t);
        uint8_t *want = malloc(nb + 1), *got = malloc(nb + 1);
        int rc = pagein_tensor_copy(files[t->file], t, 0, want, (size_t)nb);
        int rc2 = pagein_gpu_tensor_read_back(l, t, got, 0, (size_t)nb);
        if (rc || rc2 || memcmp(want, got, (size_t)nb) != 0) {
            printf("    tensor %s: %s (rc %d/%d %s)\n", t->name, rc || rc2 ? "error" : "bytes differ", rc, rc2,
                   pagein_last_error_detail());
            bad++;
        }
        free(want), free(got);
    }
    return bad;
}

static int model_compare(pagein_gpu_load *l, const pagein_model *m) {
    size_t nf = pagein_model_file_count(m), n = pagein_model_tensor_count(m);
    const pagein_file **files = calloc(nf, sizeof *files);
    const pagein_tensor **ts = calloc(n ? n : 1, sizeof *ts);
    for (size_t i = 0; i < nf; i++) files[i] = pagein_model_file(m, i);
    for (size_t i = 0; i < n; i++) ts[i] = pagein_model_tensor_at(m, i);
    int bad = compare_all(l, files, ts, n);
    free(files), free(ts);
    return bad;
}

/* compare_all over every tensor of one file. */
static int compare_file(pagein_gpu_load *l, const pagein_file *f) {
    size_t n = pagein_tensor_count(f);
    const pagein_tensor **ts = calloc(n ? n : 1, sizeof *ts);
    if (!ts) return -1;
    for (size_t i = 0; i < n; i++) ts[i] = pagein_tensor_at(f, i);
    const pagein_file *fs[1] = {f};
    int bad = compare_all(l, fs, ts, n);
    free(ts);
    return bad;
}

static int open_lazy(pagein_model **m, const char *path) {
    pagein_model_opts mo = PAGEIN_MODEL_OPTS_INIT;
    mo.strategy = PAGEIN_STRATEGY_LAZY;
    return pagein_model_open(m, path, &mo);
}

/* A 40-layer model of ~2.6 MB through a ring of 4 x 64 KiB with slow
 * asynchronous copies: every byte equal, pinned memory never above the
 * ring, no buffer reused early (the delay would expose it), all pinned
 * memory given back. */
TEST(gpu_host_safetensors_bytes_ring_bounded) {
    char path[4096];
    CHECK_OK(gen_model("gpu_st.safetensors", 40, 30000, path, sizeof path));
    pagein_model *m;
    CHECK_OK(open_lazy(&m, path));
    if (pt_failed) return FAIL;
    uint64_t live0 = atomic_load(&pi_gpu_pinned_live);
    atomic_store(&pi_gpu_pinned_peak, live0);
    atomic_store(&pi_test_host_copy_delay_us, 200);
    pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
    o.device = PAGEIN_DEVICE_HOST;
    o.buffer_bytes = 64 << 10;
    o.nbuffers = 4;
    o.threads = 2;
    pagein_gpu_load *l = NULL;
    CHECK_OK(pagein_gpu_load_model(&l, m, &o));
    if (l) {
        CHECK_OK(pagein_gpu_load_wait(l));
        pagein_gpu_stats st;
        pagein_gpu_load_stats(l, &st);
        uint64_t model_bytes = 0;
        for (size_t i = 0; i < pagein_model_tensor_count(m); i++) model_bytes += pagein_model_tensor_at(m, i)->nbytes;
        CHECK_EQ(st.bytes, model_bytes);
        CHECK_EQ(st.tensors, pagein_model_tensor_count(m));
        CHECK_EQ(st.ready, st.tensors);
        CHECK_EQ(st.ring_bytes, 4 * (64 << 10));
        CHECK(model_bytes > 8 * st.ring_bytes); /* the model is much larger than the ring */
        CHECK(st.pinned_peak <= st.ring_bytes);
        CHECK(atomic_load(&pi_gpu_pinned_peak) - live0 <= st.ring_bytes);
        CHECK(st.buffers_peak >= 1 && st.buffers_peak <= 4);
        CHECK(st.copies >= model_bytes / (64 << 10));
        CHECK(st.first_layer_seconds >= 0 && st.first_layer_seconds <= st.seconds);
        CHECK_EQ(st.device_bytes >= model_bytes, 1);
        CHECK_STR(st.device_name, "host memory");
        CHECK_EQ(model_compare(l, m), 0);
        pagein_gpu_load_free(l);
    }
    atomic_store(&pi_test_host_copy_delay_us, 0);
    CHECK_EQ(atomic_load(&pi_gpu_pinned_live), live0);
    pagein_model_close(m);
    return PASS;
}

/* Readiness follows layer order: buffers are retired strictly in chunk
 * order whatever the number of readers, so tensors become ready exactly in
 * layer order (checked on the recorded ready order, not on timing);
 * waiting for a tensor returns once it is there. */
TEST(gpu_host_layer_order_and_per_tensor_wait) {
    char path[4096];
    CHECK_OK(gen_model("gpu_order.safetensors", 24, 20000, path, sizeof path));
    pagein_model *m;
    CHECK_OK(open_lazy(&m, path));
    if (pt_failed) return FAIL;
    atomic_store(&pi_test_host_copy_delay_us, 300);
    pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
    o.device = PAGEIN_DEVICE_HOST;
    o.buffer_bytes = 16 << 10;
    o.nbuffers = 3;
    o.threads = 2;
    pagein_gpu_load *l = NULL;
    CHECK_OK(pagein_gpu_load_model(&l, m, &o));
    if (l) {
        const pagein_tensor *l0 = pagein_model_tensor_get(m, "model.layers.0.b.weight");
        const pagein_tensor *head = pagein_model_tensor_get(m, "lm_head.weight");
        const pagein_tensor *last = pagein_model_tensor_get(m, "model.layers.23.a.weight");
        CHECK_OK(pagein_gpu_tensor_wait(l, l0));
        CHECK_EQ(pagein_gpu_tensor_query(l, l0), 1);
        pagein_gpu_stats st;
        pagein_gpu_load_stats(l, &st);
        CHECK(st.first_layer_seconds >= 0);
        CHECK_OK(pagein_gpu_tensor_wait(l, head));
        CHECK_OK(pagein_gpu_load_wait(l));
        /* ready order == layer order */
        long prev = -1;
        for (size_t i = 0; i < pagein_model_tensor_count(m); i++) {
            long r = pi_gpu_ready_rank(l, pagein_model_tensor_by_layer(m, i));
            CHECK(r > prev);
            prev = r;
        }
        CHECK(pi_gpu_ready_rank(l, l0) < pi_gpu_ready_rank(l, last));
        CHECK(pi_gpu_ready_rank(l, last) < pi_gpu_ready_rank(l, head));
        CHECK(pagein_gpu_tensor_ptr(l, head) != 0);
        CHECK(pagein_gpu_tensor_ptr(l, l0) < pagein_gpu_tensor_ptr(l, last)); /* allocated in layer order */
        CHECK_EQ(model_compare(l, m), 0);
        pagein_gpu_load_free(l);
    }
    atomic_store(&pi_test_host_copy_delay_us, 0);
    pagein_model_close(m);
    return PASS;
}

/* Caller-provided destinations for a subset given in reverse order. */
TEST(gpu_host_subset_caller_buffers) {
    char path[4096];
    CHECK_OK(gen_model("gpu_sub.safetensors", 6, 5000, path, sizeof path));
    pagein_model *m;
    CHECK_OK(open_lazy(&m, path));
    if (pt_failed) return FAIL;
    const char *names[] = {"lm_head.weight", "model.layers.3.a.weight", "model.embed_tokens.weight"};
    const pagein_tensor *ts[3];
    uint64_t dst[3];
    uint8_t *bufs[3];
    for (int i = 0; i < 3; i++) {
        ts[i] = pagein_model_tensor_get(m, names[i]);
        bufs[i] = malloc(pagein_gpu_tensor_bytes(ts[i]));
        memset(bufs[i], 0xEE, pagein_gpu_tensor_bytes(ts[i]));
        dst[i] = (uint64_t)(uintptr_t)bufs[i];
    }
    pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
    o.device = PAGEIN_DEVICE_HOST;
    o.buffer_bytes = 4096;
    o.nbuffers = 3;
    o.tensors = ts;
    o.ntensors = 3;
    o.dst = dst;
    pagein_gpu_load *l = NULL;
    CHECK_OK(pagein_gpu_load_model(&l, m, &o));
    if (l) {
        CHECK_OK(pagein_gpu_load_wait(l));
        for (int i = 0; i < 3; i++) {
            CHECK_EQ(pagein_gpu_tensor_ptr(l, ts[i]), dst[i]);
            CHECK(memcmp(bufs[i], ts[i]->data, ts[i]->nbytes) == 0);
        }
        pagein_gpu_stats st;
        pagein_gpu_load_stats(l, &st);
        CHECK_EQ(st.device_bytes, 0);
        CHECK_EQ(st.tensors, 3);
        const pagein_tensor *other = pagein_model_tensor_get(m, "model.layers.0.a.weight");
        CHECK_EQ(pagein_gpu_tensor_wait(l, other), PAGEIN_E_NOT_FOUND);
        CHECK_EQ(pagein_gpu_tensor_ptr(l, other), 0);
        pagein_gpu_load_free(l);
    }
    /* bad options */
    o.dst = NULL;
    const pagein_tensor *dup[2] = {ts[0], ts[0]};
    o.tensors = dup;
    o.ntensors = 2;
    l = NULL;
    CHECK_EQ(pagein_gpu_load_model(&l, m, &o), PAGEIN_E_INVALID);
    CHECK(strstr(pagein_last_error_detail(), "listed twice") != NULL);
    CHECK(l == NULL);
    pagein_tensor fake = *ts[0];
    const pagein_tensor *alien[1] = {&fake};
    o.tensors = alien;
    o.ntensors = 1;
    CHECK_EQ(pagein_gpu_load_model(&l, m, &o), PAGEIN_E_INVALID);
    o.tensors = NULL;
    o.dst = dst;
    CHECK_EQ(pagein_gpu_load_model(&l, m, &o), PAGEIN_E_INVALID);
    o.dst = NULL;
    o.nbuffers = 1;
    CHECK_EQ(pagein_gpu_load_model(&l, m, &o), PAGEIN_E_INVALID);
    o.nbuffers = 2;
    o.buffer_bytes = 100;
    CHECK_EQ(pagein_gpu_load_model(&l, m, &o), PAGEIN_E_INVALID);
    CHECK(strstr(pagein_last_error_detail(), "buffer_bytes") != NULL);
    CHECK(l == NULL);
    /* more threads than buffers is clamped, not refused */
    o.buffer_bytes = 4096;
    o.threads = 16;
    CHECK_OK(pagein_gpu_load_model(&l, m, &o));
    if (l) {
        CHECK_OK(pagein_gpu_load_wait(l));
        CHECK_EQ(model_compare(l, m), 0);
        pagein_gpu_load_free(l);
    }
    CHECK_EQ(pagein_gpu_load_model(&l, NULL, &o), PAGEIN_E_INVALID);
    CHECK_EQ(pagein_gpu_tensor_wait(NULL, ts[0]), PAGEIN_E_INVALID);
    pagein_gpu_load_free(NULL);
    for (int i = 0; i < 3; i++) free(bufs[i]);
    pagein_model_close(m);
    return PASS;
}

/* GGUF, unquantized and raw quantized blocks (Q8_0), through a ring much
 * smaller than the files, single files (pagein_gpu_load_file) and models. */
TEST(gpu_host_gguf_quantized_blocks) {
    if (!pt_have_testdata()) SKIP_BECAUSE("tests/data/real is missing");
    const char *files[] = {"gguf/tinyllamas-stories-260k-q8_0.gguf", "gguf/llama-2-tiny-random.gguf"};
    int quant_seen = 0;
    for (size_t k = 0; k < 2; k++) {
        pagein_file *f = NULL;
        CHECK_OK(pagein_open(&f, pt_testdata(files[k]), NULL));
        if (!f) continue;
        for (size_t i = 0; i < pagein_tensor_count(f); i++)
            quant_seen |= (pagein_dtype_get(pagein_tensor_at(f, i)->dtype)->flags & PAGEIN_DTYPE_F_QUANT) != 0;
        pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
        o.device = PAGEIN_DEVICE_HOST;
        o.buffer_bytes = 8192;
        o.nbuffers = 3;
        pagein_gpu_load *l = NULL;
        CHECK_OK(pagein_gpu_load_file(&l, f, &o));
        if (l) {
            CHECK_OK(pagein_gpu_load_wait(l));
            CHECK_EQ(compare_file(l, f), 0);
            pagein_gpu_stats st;
            pagein_gpu_load_stats(l, &st);
            CHECK(st.pinned_peak <= 3 * 8192);
            pagein_gpu_load_free(l);
        }
        pagein_close(f);
    }
    CHECK(quant_seen); /* the q8_0 file really has block-quantized tensors */
    return PASS;
}

/* A file truncated after open: the load fails with an error naming the
 * file and a tensor, tensors before the cut that were ready stay ready,
 * nothing crashes, everything is freed. */
TEST(gpu_host_truncated_mid_stream) {
    char path[4096];
    CHECK_OK(gen_model("gpu_trunc.safetensors", 16, 20000, path, sizeof path));
    pagein_model *m;
    CHECK_OK(open_lazy(&m, path));
    if (pt_failed) return FAIL;
    CHECK_EQ(truncate(path, 200000), 0);
    uint64_t live0 = atomic_load(&pi_gpu_pinned_live);
    pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
    o.device = PAGEIN_DEVICE_HOST;
    o.buffer_bytes = 32 << 10;
    o.nbuffers = 4;
    pagein_gpu_load *l = NULL;
    CHECK_OK(pagein_gpu_load_model(&l, m, &o));
    if (l) {
        int rc = pagein_gpu_load_wait(l);
        CHECK_EQ(rc, PAGEIN_E_TRUNCATED);
        const char *d = pagein_last_error_detail();
        CHECK(strstr(d, path) != NULL);
        CHECK(strstr(d, "tensor '") != NULL);
        const pagein_tensor *head = pagein_model_tensor_get(m, "lm_head.weight");
        CHECK_EQ(pagein_gpu_tensor_wait(l, head), PAGEIN_E_TRUNCATED);
        CHECK(pagein_gpu_tensor_query(l, head) < 0);
        pagein_gpu_stats st;
        pagein_gpu_load_stats(l, &st);
        CHECK(st.ready < st.tensors);
        pagein_gpu_load_free(l);
    }
    CHECK_EQ(atomic_load(&pi_gpu_pinned_live), live0);
    pagein_model_close(m);
    return PASS;
}

/* Many loads in a loop: pinned memory returns to where it was (ASan and
 * valgrind check the heap; the counter checks the backend's own). */
TEST(gpu_host_loop_no_leak) {
    char path[4096];
    CHECK_OK(gen_model("gpu_loop.safetensors", 4, 3000, path, sizeof path));
    pagein_model *m;
    CHECK_OK(open_lazy(&m, path));
    if (pt_failed) return FAIL;
    uint64_t live0 = atomic_load(&pi_gpu_pinned_live);
    for (int i = 0; i < 20; i++) {
        pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
        o.device = PAGEIN_DEVICE_HOST;
        o.buffer_bytes = 4096;
        o.nbuffers = 2 + (unsigned)(i % 3);
        pagein_gpu_load *l = NULL;
        CHECK_OK(pagein_gpu_load_model(&l, m, &o));
        /* every other one is freed while still running */
        if (l && i % 2 == 0) CHECK_OK(pagein_gpu_load_wait(l));
        pagein_gpu_load_free(l);
        CHECK_EQ(atomic_load(&pi_gpu_pinned_live), live0);
    }
    pagein_model_close(m);
    return PASS;
}

/* No CUDA: dlopen of a missing library, and the toolkit's stub libcuda
 * (whose cuInit fails), give PAGEIN_E_NO_CUDA with the reason. */
TEST(gpu_no_cuda_errors) {
    const char *old = getenv("PAGEIN_CUDA_LIBRARY");
    char *saved = old ? strdup(old) : NULL;
    setenv("PAGEIN_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    pagein_gpu_info info;
    int rc = pagein_gpu_probe(0, &info);
    /* a process that already loaded a real driver keeps it (by design) */
    if (rc == 0) {
        printf("    note: a CUDA driver is already loaded in this process; the dlopen failure is not observable\n");
    } else {
        CHECK_EQ(rc, PAGEIN_E_NO_CUDA);
        CHECK(strstr(pagein_last_error_detail(), "/nonexistent/libcuda.so.1") != NULL);
        char path[4096];
        CHECK_OK(gen_model("gpu_nocuda.safetensors", 1, 100, path, sizeof path));
        pagein_model *m;
        CHECK_OK(open_lazy(&m, path));
        if (m) {
            pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
            o.device = 0;
            pagein_gpu_load *l = (pagein_gpu_load *)&o; /* must stay untouched */
            CHECK_EQ(pagein_gpu_load_model(&l, m, &o), PAGEIN_E_NO_CUDA);
            CHECK(l == (pagein_gpu_load *)&o);
            CHECK(strstr(pagein_last_error_detail(), "no CUDA driver") != NULL);
            pagein_model_close(m);
        }
        const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
        if (access(stub, R_OK) == 0) {
            setenv("PAGEIN_CUDA_LIBRARY", stub, 1);
            CHECK_EQ(pagein_gpu_probe(0, NULL), PAGEIN_E_NO_CUDA);
            CHECK(strstr(pagein_last_error_detail(), "cuInit") != NULL);
        } else {
            printf("    note: no CUDA stub library at %s: the cuInit failure path is not exercised\n", stub);
        }
    }
    CHECK_EQ(pagein_gpu_probe(-5, NULL), PAGEIN_E_INVALID);
    CHECK_OK(pagein_gpu_probe(PAGEIN_DEVICE_HOST, &info));
    CHECK_STR(info.name, "host memory");
    if (saved) setenv("PAGEIN_CUDA_LIBRARY", saved, 1);
    else unsetenv("PAGEIN_CUDA_LIBRARY");
    free(saved);
    return PASS;
}

/* On a machine with a CUDA device: the same model and the GGUF files onto
 * device 0, read back and compared with the CPU bytes. */
TEST(gpu_cuda_bytes_equal) {
    pagein_gpu_info info;
    if (pagein_gpu_probe(0, &info) < 0) SKIP_BECAUSE("no CUDA device: %s", pagein_last_error_detail());
    printf("    device 0: %s\n", info.name);
    char path[4096];
    CHECK_OK(gen_model("gpu_cuda.safetensors", 12, 300000, path, sizeof path));
    pagein_model *m;
    CHECK_OK(open_lazy(&m, path));
    if (pt_failed) return FAIL;
    uint64_t live0 = atomic_load(&pi_gpu_pinned_live);
    uint64_t free0 = info.free_bytes;
    for (int i = 0; i < 5; i++) {
        pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
        o.device = 0;
        o.buffer_bytes = 1 << 20;
        o.nbuffers = 4;
        pagein_gpu_load *l = NULL;
        CHECK_OK(pagein_gpu_load_model(&l, m, &o));
        if (l) {
            CHECK_OK(pagein_gpu_load_wait(l));
            if (i == 0) CHECK_EQ(model_compare(l, m), 0);
            pagein_gpu_load_free(l);
        }
        CHECK_EQ(atomic_load(&pi_gpu_pinned_live), live0);
    }
    /* No device memory leaked by the 5 loads (each allocated ~4 MB; the
     * slack covers the driver's own bookkeeping). */
    pagein_gpu_info after;
    CHECK_OK(pagein_gpu_probe(0, &after));
    printf("    free device memory: %llu before, %llu after 5 loads\n", (unsigned long long)free0,
           (unsigned long long)after.free_bytes);
    CHECK(after.free_bytes + (2u << 20) >= free0);
    /* truncated after open: an error naming file and tensor, not a crash */
    CHECK_EQ(truncate(path, 500000), 0);
    {
        pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
        o.device = 0;
        o.buffer_bytes = 1 << 20;
        pagein_gpu_load *l = NULL;
        CHECK_OK(pagein_gpu_load_model(&l, m, &o));
        if (l) {
            CHECK_EQ(pagein_gpu_load_wait(l), PAGEIN_E_TRUNCATED);
            CHECK(strstr(pagein_last_error_detail(), "tensor '") != NULL);
            pagein_gpu_load_free(l);
        }
    }
    pagein_model_close(m);
    if (pt_have_testdata()) {
        pagein_file *f = NULL;
        CHECK_OK(pagein_open(&f, pt_testdata("gguf/tinyllamas-stories-260k-q8_0.gguf"), NULL));
        pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
        o.device = 0;
        o.buffer_bytes = 65536;
        o.nbuffers = 3;
        pagein_gpu_load *l = NULL;
        if (f) CHECK_OK(pagein_gpu_load_file(&l, f, &o));
        if (l) {
            CHECK_EQ(compare_file(l, f), 0);
            pagein_gpu_load_free(l);
        }
        pagein_close(f);
    }
    return PASS;
}

/* Every allocation of a load failing in turn (setup, plan, ring, the host
 * backend's queued copies mid-stream): an error or success, never a crash,
 * a hang or a leak (ASan/valgrind), and pinned memory always given back. */
TEST(gpu_host_alloc_failures) {
    char path[4096];
    CHECK_OK(gen_model("gpu_oom.safetensors", 3, 3000, path, sizeof path));
    pagein_model *m;
    CHECK_OK(open_lazy(&m, path));
    if (pt_failed) return FAIL;
    uint64_t live0 = atomic_load(&pi_gpu_pinned_live);
    int failures = 0, successes = 0;
    for (long n = 0; n < 200 && successes < 3; n++) {
        pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
        o.device = PAGEIN_DEVICE_HOST;
        o.buffer_bytes = 4096;
        o.nbuffers = 2;
        pagein_gpu_load *l = NULL;
        pi_alloc_fail_after(n);
        int rc = pagein_gpu_load_model(&l, m, &o);
        if (rc == 0) rc = pagein_gpu_load_wait(l);
        pi_alloc_fail_after(-1);
        if (rc == 0) {
            successes++;
            CHECK_EQ(model_compare(l, m), 0);
        } else {
            failures++;
            CHECK(rc == -ENOMEM);
            CHECK(pagein_last_error_detail()[0] != 0);
        }
        pagein_gpu_load_free(l);
        CHECK_EQ(atomic_load(&pi_gpu_pinned_live), live0);
    }
    CHECK(failures > 10);
    CHECK(successes > 0);
    pagein_model_close(m);
    return PASS;
}

/* A file opened from memory (no source, no descriptor): the pieces are
 * copied from the caller's buffer with pagein_tensor_copy. */
TEST(gpu_host_memory_file) {
    char path[4096];
    CHECK_OK(gen_model("gpu_mem.safetensors", 5, 7000, path, sizeof path));
    size_t len = 0;
    void *buf = pt_read_file(path, &len);
    CHECK(buf != NULL);
    pagein_file *f = NULL;
    if (buf) CHECK_OK(pagein_open_memory(&f, buf, len, "mem.safetensors", NULL));
    if (f) {
        pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
        o.device = PAGEIN_DEVICE_HOST;
        o.buffer_bytes = 4096;
        o.nbuffers = 2;
        pagein_gpu_load *l = NULL;
        CHECK_OK(pagein_gpu_load_file(&l, f, &o));
        if (l) {
            CHECK_OK(pagein_gpu_load_wait(l));
            CHECK_EQ(compare_file(l, f), 0);
            pagein_gpu_load_free(l);
        }
        pagein_close(f);
    }
    free(buf);
    return PASS;
}

/* The pinned-buffer cache: a freed load's ring is reused by the next load
 * on the same device (nothing newly pinned), never beyond the next load's
 * own buffer size (its ring still bounds what it holds), capped, and
 * emptied by pagein_gpu_trim. The host backend caches only when a test
 * sets the cap. */
TEST(gpu_host_pinned_cache_reuse) {
    char path[4096];
    CHECK_OK(gen_model("gpu_cache.safetensors", 8, 20000, path, sizeof path));
    pagein_model *m;
    CHECK_OK(open_lazy(&m, path));
    if (pt_failed) return FAIL;
    pagein_gpu_trim();
    atomic_store(&pi_test_pinned_cache_cap, 1 << 20);
    uint64_t live0 = atomic_load(&pi_gpu_pinned_live);
    uint64_t sizes[3] = {64 << 10, 64 << 10, 32 << 10};
    uint64_t new_allocs[3];
    for (int k = 0; k < 3; k++) {
        uint64_t a0 = atomic_load(&pi_gpu_pinned_allocs);
        pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
        o.device = PAGEIN_DEVICE_HOST;
        o.buffer_bytes = sizes[k];
        o.nbuffers = 4;
        pagein_gpu_load *l = NULL;
        CHECK_OK(pagein_gpu_load_model(&l, m, &o));
        if (l) {
            CHECK_OK(pagein_gpu_load_wait(l));
            CHECK_EQ(model_compare(l, m), 0);
            pagein_gpu_stats st;
            pagein_gpu_load_stats(l, &st);
            CHECK(st.pinned_peak <= st.ring_bytes);
            pagein_gpu_load_free(l);
        }
        new_allocs[k] = atomic_load(&pi_gpu_pinned_allocs) - a0;
        CHECK_EQ(atomic_load(&pi_gpu_pinned_live), live0);
    }
    CHECK_EQ(new_allocs[0], 4);
    CHECK_EQ(new_allocs[1], 0);  /* the same ring again: all from the cache */
    CHECK_EQ(new_allocs[2], 4);  /* 64 KiB buffers are too large for a 32 KiB ring */
    CHECK(pi_gpu_pinned_cached() <= (1u << 20));
    CHECK(pi_gpu_pinned_cached() >= 4 * (64u << 10));
    pagein_gpu_trim();
    CHECK_EQ(pi_gpu_pinned_cached(), 0);
    /* cap 0: nothing kept */
    atomic_store(&pi_test_pinned_cache_cap, 0);
    pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
    o.device = PAGEIN_DEVICE_HOST;
    o.buffer_bytes = 4096;
    pagein_gpu_load *l = NULL;
    CHECK_OK(pagein_gpu_load_model(&l, m, &o));
    if (l) CHECK_OK(pagein_gpu_load_wait(l));
    pagein_gpu_load_free(l);
    CHECK_EQ(pi_gpu_pinned_cached(), 0);
    atomic_store(&pi_test_pinned_cache_cap, -1);
    pagein_model_close(m);
    return PASS;
}
