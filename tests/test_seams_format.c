/* test_seams_format.c - a format is one file and one line: this file
 * defines a test-only row (pi_format_test_fake, registered by its one line
 * in src/format/format.c's table, a weak reference that is NULL outside the
 * unit-test runner): detection by a magic, a tiny parser that fills the
 * tensor table, a suffix, a directory rank and a header read-ahead hint.
 * The tests open models through it end to end (pagein_open, pagein_model_open
 * on a file and on a directory, the auto plan). Nothing else in the library
 * knows it exists. White-box (format.h).
 *
 * The fake layout: "PIFAKE01", u32 count, then per tensor u16 name length,
 * the name, u64 nbytes (F32, one dimension); the data follows the header,
 * tensor after tensor. All integers little-endian. */
#include "test.h"

#include "../src/format/format.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define FAKE_ID ((pagein_format)0x7e57)
#define FAKE_MAGIC "PIFAKE01"

static int fake_detect(const uint8_t *buf, size_t len, uint64_t size) {
    (void)size;
    return len >= 8 && memcmp(buf, FAKE_MAGIC, 8) == 0;
}

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static int fake_parse(const uint8_t *buf, size_t avail, uint64_t size, uint32_t flags, struct pi_table *t) {
    (void)flags;
    if (avail < 12) return pi_err(PAGEIN_E_TRUNCATED, "fake header needs 12 bytes, have %zu", avail);
    uint64_t count = le(buf + 8, 4), pos = 12;
    /* first pass: the header's extent, then the tensors after it */
    for (uint64_t i = 0; i < count; i++) {
        if (pos + 2 > avail) return pi_err(PAGEIN_E_TRUNCATED, "fake tensor %llu: header cut", (unsigned long long)i);
        pos += 2 + le(buf + pos, 2) + 8;
        if (pos > avail) return pi_err(PAGEIN_E_TRUNCATED, "fake tensor %llu: header cut", (unsigned long long)i);
    }
    uint64_t data = pos, off = data;
    pos = 12;
    for (uint64_t i = 0; i < count; i++) {
        size_t nl = (size_t)le(buf + pos, 2);
        const char *name = (const char *)buf + pos + 2;
        uint64_t nb = le(buf + pos + 2 + nl, 8);
        pos += 2 + nl + 8;
        if (nb % 4 || nb > size - off)
            return pi_err(PAGEIN_E_BAD_OFFSET, "fake tensor %llu: %llu bytes do not fit", (unsigned long long)i,
                          (unsigned long long)nb);
        uint64_t shape[1] = {nb / 4};
        if (!pi_table_add(t, name, nl, PAGEIN_DTYPE_F32, 1, shape, off, nb)) return pi_err(-ENOMEM, "out of memory");
        off += nb;
    }
    t->data_start = data;
    t->header_len = data;
    return 0;
}

static uint64_t fake_header_size(const uint8_t *buf, size_t avail, uint64_t size) {
    (void)buf, (void)avail, (void)size;
    return 0; /* only by parsing */
}

static const char *const fake_suffixes[] = {".pifake", NULL};

const struct pi_format pi_format_test_fake = {
    .id = FAKE_ID,
    .name = "test-fake",
    .detect = fake_detect,
    .parse = fake_parse,
    .header_size = fake_header_size,
    .suffixes = fake_suffixes,
    .first_read = 4096,
    .whole_file = 0,
    .header_read = PI_HEADER_GROW,
    .dir_rank = 90, /* after every real format */
    .split_paths = NULL,
    .split_check = NULL,
    .plural = "test-fake files",
};

/* Writes a fake file of three tensors (two layers and a head). */
static int write_fake(const char *path) {
    static const char *names[] = {"model.layers.0.w", "model.layers.1.w", "lm_head.weight"};
    static const uint32_t counts[] = {64, 64, 16};
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    uint8_t b[8];
    fwrite(FAKE_MAGIC, 1, 8, f);
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(3 >> (8 * i));
    fwrite(b, 1, 4, f);
    for (int k = 0; k < 3; k++) {
        size_t nl = strlen(names[k]);
        b[0] = (uint8_t)nl, b[1] = 0;
        fwrite(b, 1, 2, f);
        fwrite(names[k], 1, nl, f);
        uint64_t nb = counts[k] * 4u;
        for (int i = 0; i < 8; i++) b[i] = (uint8_t)(nb >> (8 * i));
        fwrite(b, 1, 8, f);
    }
    for (int k = 0; k < 3; k++)
        for (uint32_t i = 0; i < counts[k]; i++) {
            float v = (float)(k * 100 + (int)i);
            fwrite(&v, 4, 1, f);
        }
    return fclose(f) == 0 ? 0 : -1;
}

static int check_values(const pagein_tensor *t, float first, float last, uint32_t n) {
    if (!t || !t->data || t->nbytes != n * 4u) return 0;
    float v[64];
    memcpy(v, t->data, t->nbytes);
    return v[0] == first && v[n - 1] == last;
}

TEST(seam_format_row_in_table) {
    CHECK_STR(pagein_format_name(FAKE_ID), "test-fake");
    CHECK_EQ(pagein_format_of_name("x/y.pifake"), FAKE_ID);
    CHECK_EQ(pagein_is_model_name("y.pifake"), 1);
    CHECK_EQ(pagein_detect_format(FAKE_MAGIC "\0\0\0\0", 12, 12), FAKE_ID);
    /* the real rows keep their answers */
    CHECK_EQ(pagein_format_of_name("a.safetensors"), PAGEIN_FORMAT_SAFETENSORS);
    CHECK_EQ(pagein_format_of_name("a.ckpt"), PAGEIN_FORMAT_TORCH);
    CHECK_EQ(pagein_format_of_name("a.txt"), PAGEIN_FORMAT_UNKNOWN);
    CHECK_EQ(pagein_detect_format("GGUF\3\0\0\0", 8, 8), PAGEIN_FORMAT_GGUF);
    CHECK_EQ(pagein_detect_format("FUGG\0\0\0\3", 8, 8), PAGEIN_FORMAT_UNKNOWN);
    return PASS;
}

TEST(seam_format_open_file) {
    const char *path = pt_tmppath("seam.pifake");
    CHECK_OK(write_fake(path));
    pagein_file *f = NULL;
    CHECK_OK(pagein_open(&f, path, NULL));
    if (!f) return FAIL;
    pagein_file_info fi;
    pagein_file_get_info(f, &fi);
    CHECK_EQ(fi.format, FAKE_ID);
    CHECK_EQ(pagein_tensor_count(f), 3);
    CHECK(check_values(pagein_tensor_get(f, "model.layers.1.w"), 100.0f, 163.0f, 64));
    CHECK(check_values(pagein_tensor_get(f, "lm_head.weight"), 200.0f, 215.0f, 16));
    pagein_close(f);
    /* a cut header is refused with a message, not a crash */
    const char *cut = pt_tmppath("seam_cut.pifake");
    FILE *o = fopen(cut, "wb");
    if (!o) return FAIL;
    fwrite(FAKE_MAGIC "\3\0\0\0\20\0model", 1, 19, o);
    fclose(o);
    f = NULL;
    CHECK(pagein_open(&f, cut, NULL) < 0);
    CHECK(f == NULL);
    return PASS;
}

TEST(seam_format_model_file_dir_and_plan) {
    const char *dir = pt_tmppath("seam_fake_dir");
    mkdir(dir, 0755);
    char path[1024];
    snprintf(path, sizeof path, "%s/weights.pifake", dir);
    CHECK_OK(write_fake(path));
    const char *const targets[] = {path, dir};
    for (int k = 0; k < 2; k++) {
        pagein_model *m = NULL;
        CHECK_OK(pagein_model_open(&m, targets[k], NULL));
        if (!m) return FAIL;
        CHECK_EQ(pagein_model_file_count(m), 1);
        CHECK_EQ(pagein_model_tensor_count(m), 3);
        CHECK_EQ(pagein_model_layer_count(m), 2);
        pagein_file_info fi;
        pagein_file_get_info(pagein_model_file(m, 0), &fi);
        CHECK_EQ(fi.format, FAKE_ID);
        CHECK_STR(fi.path, path);
        const pagein_tensor *t = pagein_model_tensor_get(m, "model.layers.0.w");
        const void *d = NULL;
        CHECK(t != NULL);
        if (t) CHECK_OK(pagein_model_tensor_data(m, t, &d));
        CHECK(d && ((const float *)d)[63] == 63.0f);
        /* the plan sees a model like any other */
        uint64_t budget = 0;
        char why[512] = "";
        pagein_strategy s = pagein_model_auto_plan(m, &budget, why, sizeof why);
        CHECK((int)s >= 0);
        CHECK(why[0] != 0);
        pagein_model_close(m);
    }
    /* the directory rank: a real format in the same folder wins */
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    float a[4] = {1, 2, 3, 4};
    uint64_t s4[1] = {4};
    pagein_write_tensor w[1] = {{"x", PAGEIN_DTYPE_F32, 1, s4, a, NULL, NULL}};
    pagein_write_opts wo = PAGEIN_WRITE_OPTS_INIT;
    CHECK_OK(pagein_safetensors_write(path, w, 1, &wo));
    pagein_model *m = NULL;
    CHECK_OK(pagein_model_open(&m, dir, NULL));
    if (m) {
        pagein_file_info fi;
        pagein_file_get_info(pagein_model_file(m, 0), &fi);
        CHECK_EQ(fi.format, PAGEIN_FORMAT_SAFETENSORS);
        pagein_model_close(m);
    }
    /* two fake files and nothing else: ambiguous, named in the message */
    unlink(path);
    snprintf(path, sizeof path, "%s/other.pifake", dir);
    CHECK_OK(write_fake(path));
    m = (pagein_model *)0x1;
    CHECK_EQ(pagein_model_open(&m, dir, NULL), PAGEIN_E_INVALID);
    CHECK(strstr(pagein_last_error_detail(), "2 test-fake files") != NULL);
    return PASS;
}
