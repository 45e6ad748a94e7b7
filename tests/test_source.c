/* test_source.c - the source seam (white-box: includes src/source/source.h):
 * non-regular files refused before they are opened for reading, the header
 * of an unmapped source read through a grown prefix with the same table as
 * the mapped open, files that are not models named as such. */
#include "test.h"

#include "../src/source/source.h"

#include <dirent.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs pagein_open(path) in a child with a 5 s alarm: returns the child's
 * rc (0 opened, 1 failed with the expected detail, 2 other failure), or -1
 * when it hung and was killed. */
static int open_in_child(const char *path, const char *want) {
    pid_t pid = fork();
    if (pid == 0) {
        alarm(5);
        pagein_file *f = NULL;
        int rc = pagein_open(&f, path, NULL);
        if (rc == 0) _exit(0);
        _exit(strstr(pagein_last_error_detail(), want) ? 1 : 2);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return -2;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(source_refuses_fifo_without_blocking) {
    const char *p = pt_tmppath("fifo.safetensors");
    unlink(p);
    CHECK_EQ(mkfifo(p, 0600), 0);
    CHECK_EQ(open_in_child(p, "a FIFO, not a regular file"), 1);
    pagein_file *f = NULL;
    CHECK_EQ(pagein_open(&f, pt_tmpdir(), NULL), -EINVAL);
    CHECK(strstr(pagein_last_error_detail(), "a directory") != NULL);
    unlink(p);
    return PASS;
}

/* A test source over a memory image that counts its reads. */
struct memsrc {
    const uint8_t *img;
    int reads;
    uint64_t bytes;
};

static int mem_read(struct pi_source *s, void *buf, uint64_t len, uint64_t off) {
    struct memsrc *m = s->impl;
    memcpy(buf, m->img + off, (size_t)len);
    m->reads++;
    m->bytes += len;
    return 0;
}

static void mem_close(struct pi_source *s) { PI_UNUSED(s); }

static const struct pi_source_ops memops = {.name = "memtest", .read = mem_read, .close = mem_close};

static struct pi_source *mem_source(const char *name, struct memsrc *m, uint64_t size) {
    struct pi_source *s = pi_calloc(1, sizeof *s);
    s->ops = &memops;
    s->name = pi_strndup(name, strlen(name));
    s->size = size;
    s->fd = -1;
    s->impl = m;
    return s;
}

/* Opens path mapped and through the memory source; the tables must agree. */
static int compare_unmapped(const char *path, int *reads, uint64_t *bytes) {
    size_t len = 0;
    uint8_t *img = pt_read_file(path, &len);
    CHECK(img != NULL);
    pagein_file *a = NULL, *b = NULL;
    CHECK_OK(pagein_open(&a, path, NULL));
    struct memsrc m = {img, 0, 0};
    int rc = pi_file_open_source(&b, mem_source(path, &m, len), NULL);
    CHECK_OK(rc);
    if (a && b) {
        CHECK_EQ(pagein_tensor_count(a), pagein_tensor_count(b));
        CHECK_EQ(pagein_meta_count(a), pagein_meta_count(b));
        for (size_t i = 0; i < pagein_tensor_count(a) && i < pagein_tensor_count(b); i++) {
            const pagein_tensor *x = pagein_tensor_at(a, i), *y = pagein_tensor_at(b, i);
            CHECK_STR(x->name, y->name);
            CHECK_EQ(x->offset, y->offset);
            CHECK_EQ(x->nbytes, y->nbytes);
            CHECK_EQ(x->dtype, y->dtype);
            CHECK_EQ(x->layer, y->layer);
            CHECK(y->data == NULL); /* unmapped: no data pointers */
        }
        pagein_file_info ia, ib;
        pagein_file_get_info(a, &ia);
        pagein_file_get_info(b, &ib);
        CHECK_EQ(ia.format, ib.format);
        CHECK_EQ(ia.data_start, ib.data_start);
    }
    pagein_close(a);
    pagein_close(b);
    free(img);
    *reads = m.reads;
    *bytes = m.bytes;
    return PASS;
}

static int walk(const char *dir, int *files, int *bad) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "malformed") == 0) continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            walk(p, files, bad);
            continue;
        }
        size_t n = strlen(p);
        int st_file = n > 12 && strcmp(p + n - 12, ".safetensors") == 0;
        int gguf = n > 5 && strcmp(p + n - 5, ".gguf") == 0;
        if (!st_file && !gguf) continue;
        int reads = 0;
        uint64_t bytes = 0;
        if (compare_unmapped(p, &reads, &bytes) != PASS) (*bad)++;
        /* safetensors: the 64 KiB prefix, plus one read when the header
         * is larger; never the tensor data of a large file */
        if (st_file && reads > 2) {
            printf("    %s: %d reads\n", p, reads);
            (*bad)++;
        }
        if ((uint64_t)st.st_size > (4u << 20) && bytes >= (uint64_t)st.st_size) {
            printf("    %s: read all %llu bytes for its header\n", p, (unsigned long long)bytes);
            (*bad)++;
        }
        (*files)++;
    }
    closedir(d);
    return 0;
}

TEST(source_unmapped_header_matches_mapped) {
    if (!pt_have_testdata()) SKIP_BECAUSE("no tests/data/real");
    int files = 0, bad = 0;
    walk(pt_testdata("safetensors"), &files, &bad);
    walk(pt_testdata("gguf"), &files, &bad);
    CHECK(files >= 15);
    CHECK_EQ(bad, 0);
    return PASS;
}

TEST(source_unmapped_large_header_two_reads) {
    /* a safetensors header larger than the first 64 KiB read: exactly two
     * reads, the second of 8 + N bytes, and no tensor data */
    size_t ntens = 3000;
    char *hdr = malloc(ntens * 160 + 64);
    size_t k = (size_t)sprintf(hdr, "{");
    for (size_t i = 0; i < ntens; i++)
        k += (size_t)sprintf(hdr + k, "%s\"model.layers.%zu.w\":{\"dtype\":\"F32\",\"shape\":[1024],\"data_offsets\":[%zu,%zu]}",
                             i ? "," : "", i, i * 4096, (i + 1) * 4096);
    k += (size_t)sprintf(hdr + k, "}");
    uint64_t n = k, size = 8 + n + ntens * 4096;
    uint8_t *img = calloc(1, (size_t)size);
    memcpy(img, &n, 8);
    memcpy(img + 8, hdr, k);
    struct memsrc m = {img, 0, 0};
    pagein_file *f = NULL;
    CHECK_OK(pi_file_open_source(&f, mem_source("big.safetensors", &m, size), NULL));
    CHECK_EQ(pagein_tensor_count(f), ntens);
    CHECK_EQ(m.reads, 2);
    CHECK(m.bytes < (64u << 10) + 8 + n + 1);
    pagein_close(f);
    free(img);
    free(hdr);
    return PASS;
}

TEST(source_not_a_model) {
    const char *p = pt_tmppath("notes.txt");
    const char *text = "hello, this is plainly text\n";
    CHECK_EQ(pt_write_file(p, text, strlen(text)), 0);
    pagein_file *f = NULL;
    CHECK_EQ(pagein_open(&f, p, NULL), PAGEIN_E_NOT_MODEL);
    CHECK(strstr(pagein_last_error_detail(), "not a safetensors, GGUF or PyTorch file: starts with 'hello") != NULL);
    const char *ix = pt_tmppath("model.safetensors.index.json");
    const char *j = "{\"metadata\":{},\"weight_map\":{}}";
    CHECK_EQ(pt_write_file(ix, j, strlen(j)), 0);
    CHECK_EQ(pagein_open(&f, ix, NULL), PAGEIN_E_NOT_MODEL);
    CHECK(strstr(pagein_last_error_detail(), "index") != NULL);
    CHECK(strstr(pagein_last_error_detail(), "open_model") != NULL);
    /* named .safetensors: its parser still reports the precise defect */
    const char *st = pt_tmppath("text.safetensors");
    CHECK_EQ(pt_write_file(st, text, strlen(text)), 0);
    CHECK_EQ(pagein_open(&f, st, NULL), PAGEIN_E_HEADER_TOO_LARGE);
    CHECK_STR(pagein_format_name(PAGEIN_FORMAT_GGUF), "gguf");
    CHECK_STR(pagein_format_name((pagein_format)99), "unknown");
    return PASS;
}

/* pi_source_readv: every request completes with its bytes; a failing one
 * stops the batch and the rest are reported cancelled or done. */
static int count_done(void *arg, struct pi_read_req *r) {
    atomic_fetch_add((_Atomic int *)arg, 1); /* called from the readv's threads, concurrently */
    return r->rc;
}

TEST(source_readv_local) {
    const char *p = pt_tmppath("readv.bin");
    size_t n = 1 << 20;
    uint8_t *img = malloc(n);
    for (size_t i = 0; i < n; i++) img[i] = (uint8_t)(i * 131 + (i >> 9));
    CHECK_EQ(pt_write_file(p, img, n), 0);
    struct pi_source *s = NULL;
    CHECK_OK(pi_source_open(&s, p, 0));
    CHECK_EQ(s->size, n);
    CHECK(s->fd >= 0);
    CHECK(s->identity[0] != 0);
    struct pi_read_req r[64];
    uint8_t *out = malloc(n);
    for (int i = 0; i < 64; i++) r[i] = (struct pi_read_req){out + i * (n / 64), (uint64_t)i * (n / 64), n / 64, 0, NULL};
    _Atomic int done = 0;
    CHECK_OK(pi_source_readv(s, r, 64, 8, count_done, &done));
    CHECK_EQ(atomic_load(&done), 64);
    CHECK(memcmp(out, img, n) == 0);
    /* a request past the end fails with PAGEIN_E_RANGE naming the file */
    r[3].off = n - 10;
    r[3].len = 4096;
    CHECK_EQ(pi_source_readv(s, r, 64, 1, NULL, NULL), PAGEIN_E_RANGE);
    CHECK(strstr(pagein_last_error_detail(), "readv.bin") != NULL);
    CHECK_EQ(r[3].rc, PAGEIN_E_RANGE);
    CHECK(r[63].rc == PAGEIN_E_CANCELLED || r[63].rc == 0);
    pi_source_close(s);
    free(out);
    free(img);
    return PASS;
}

/* The file source's list op: every regular file under a folder, deeper
 * ones included, named relative to it, with size and identity; FIFOs and
 * symbolic links are not listed (nor followed). */
struct seen {
    char names[8][64];
    uint64_t sizes[8];
    int n, bad;
};

static int seen_add(void *arg, const struct pi_list_entry *e) {
    struct seen *s = arg;
    if (s->n == 8 || strlen(e->rel) >= 64 || !e->identity[0] || strcmp(e->uri + strlen(e->uri) - strlen(e->rel), e->rel)) {
        s->bad = 1;
        return 0;
    }
    snprintf(s->names[s->n], 64, "%s", e->rel);
    s->sizes[s->n++] = e->size;
    return 0;
}

static uint64_t seen_size(const struct seen *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name)) return s->sizes[i];
    return UINT64_MAX;
}

TEST(source_file_list) {
    const char *d = pt_tmppath("list");
    char p[4096];
    CHECK_OK(mkdir(d, 0700));
    snprintf(p, sizeof p, "%s/sub", d);
    CHECK_OK(mkdir(p, 0700));
    snprintf(p, sizeof p, "%s/a.bin", d);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL);
    if (f) fputs("abc", f), fclose(f);
    snprintf(p, sizeof p, "%s/sub/b.bin", d);
    f = fopen(p, "wb");
    CHECK(f != NULL);
    if (f) fputs("hello", f), fclose(f);
    snprintf(p, sizeof p, "%s/fifo", d);
    CHECK_OK(mkfifo(p, 0600));
    snprintf(p, sizeof p, "%s/link", d);
    CHECK_OK(symlink("/etc", p));
    CHECK(pi_source_is_prefix(d));
    snprintf(p, sizeof p, "%s/a.bin", d);
    CHECK(!pi_source_is_prefix(p));
    CHECK(!pi_source_is_remote(d));
    struct seen s;
    memset(&s, 0, sizeof s);
    CHECK_OK(pi_source_list(d, seen_add, &s));
    CHECK_EQ(s.n, 2);
    CHECK_EQ(s.bad, 0);
    CHECK_EQ(seen_size(&s, "a.bin"), 3);
    CHECK_EQ(seen_size(&s, "sub/b.bin"), 5);
    /* a trailing '/' names the same folder */
    char slash[4100];
    snprintf(slash, sizeof slash, "%s/", d);
    memset(&s, 0, sizeof s);
    CHECK_OK(pi_source_list(slash, seen_add, &s));
    CHECK_EQ(s.n, 2);
    CHECK_EQ(seen_size(&s, "sub/b.bin"), 5);
    /* a local file states no checksum */
    struct pi_source *src = NULL;
    struct pi_checksum c;
    CHECK_OK(pi_source_open(&src, p, 0));
    CHECK_EQ(pi_source_checksum(src, &c), 0);
    pi_source_close(src);
    snprintf(p, sizeof p, "%s/none", d);
    CHECK(pi_source_list(p, seen_add, &s) < 0);
    return PASS;
}
