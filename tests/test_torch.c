/* test_torch.c - PyTorch checkpoint reader: zip container (zip64), the
 * restricted unpickler and tensor records, on archives built here byte by
 * byte (no Python needed). Real torch-written files are checked by
 * tests/torch_check.py (make torch-test). Uses only <pagein.h>. */
#include "test.h"

#include <stdlib.h>

#define PI_MIN_LEN(a, b) ((a) < (b) ? (a) : (b))
#define LIT(s) s, sizeof(s) - 1

/* ---- a tiny byte builder ---------------------------------------------------- */
struct bb {
    uint8_t *p;
    size_t n, cap;
};
static void bput(struct bb *b, const void *s, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void bstr(struct bb *b, const char *s) { bput(b, s, strlen(s)); }
static void b8(struct bb *b, unsigned v) {
    uint8_t c = (uint8_t)v;
    bput(b, &c, 1);
}
static void b16(struct bb *b, unsigned v) { b8(b, v & 0xFF), b8(b, v >> 8 & 0xFF); }
static void b32(struct bb *b, uint32_t v) { b16(b, v & 0xFFFF), b16(b, v >> 16); }
static void b64(struct bb *b, uint64_t v) { b32(b, (uint32_t)v), b32(b, (uint32_t)(v >> 32)); }

/* ---- pickle pieces ------------------------------------------------------------ */
static void p_str(struct bb *b, const char *s) {
    b8(b, 'X');
    b32(b, (uint32_t)strlen(s));
    bstr(b, s);
}
static void p_int(struct bb *b, uint32_t v) {
    if (v < 256) b8(b, 'K'), b8(b, v);
    else b8(b, 'J'), b32(b, v);
}
static void p_global(struct bb *b, const char *mod, const char *name) {
    b8(b, 'c');
    bstr(b, mod), b8(b, '\n'), bstr(b, name), b8(b, '\n');
}
static void p_tuple(struct bb *b, int n, const uint64_t *v) {
    b8(b, '(');
    for (int i = 0; i < n; i++) p_int(b, (uint32_t)v[i]);
    b8(b, 't');
}
/* _rebuild_tensor_v2(storage(cls, key, numel), offset, sizes, strides, False, OrderedDict()) */
static void p_tensor(struct bb *b, const char *cls, const char *key, uint64_t numel, uint64_t off, int nd,
                     const uint64_t *sizes, const uint64_t *strides) {
    p_global(b, "torch._utils", "_rebuild_tensor_v2");
    b8(b, '(');
    b8(b, '(');
    p_str(b, "storage");
    p_global(b, "torch", cls);
    p_str(b, key);
    p_str(b, "cpu");
    p_int(b, (uint32_t)numel);
    b8(b, 't');
    b8(b, 'Q');
    p_int(b, (uint32_t)off);
    p_tuple(b, nd, sizes);
    p_tuple(b, nd, strides);
    b8(b, 0x89);
    p_global(b, "collections", "OrderedDict");
    b8(b, ')');
    b8(b, 'R');
    b8(b, 't');
    b8(b, 'R');
}

/* ---- zip writer (stored records, 64-byte aligned data like torch) ---------- */
struct zent {
    const char *name;
    const void *data;
    size_t len;
    unsigned method;
};

static void zip_build(struct bb *z, const struct zent *e, int n, int zip64) {
    uint64_t *lho = calloc((size_t)n, sizeof *lho);
    for (int i = 0; i < n; i++) {
        lho[i] = z->n;
        size_t nl = strlen(e[i].name);
        /* pad the extra field so that data starts on a 64-byte boundary */
        size_t data = z->n + 30 + nl + 4;
        size_t pad = (64 - data % 64) % 64;
        bstr(z, "PK\x03\x04");
        b16(z, 20), b16(z, 0), b16(z, (unsigned)e[i].method), b16(z, 0), b16(z, 0);
        b32(z, 0), b32(z, (uint32_t)e[i].len), b32(z, (uint32_t)e[i].len);
        b16(z, (unsigned)nl), b16(z, (unsigned)(4 + pad));
        bstr(z, e[i].name);
        b16(z, 0x4b46), b16(z, (unsigned)pad);
        for (size_t k = 0; k < pad; k++) b8(z, 'Z');
        bput(z, e[i].data, e[i].len);
    }
    uint64_t cd = z->n;
    for (int i = 0; i < n; i++) {
        size_t nl = strlen(e[i].name);
        bstr(z, "PK\x01\x02");
        b16(z, 45), b16(z, 45), b16(z, 0), b16(z, (unsigned)e[i].method), b16(z, 0), b16(z, 0);
        b32(z, 0);
        b32(z, zip64 ? 0xFFFFFFFFu : (uint32_t)e[i].len);
        b32(z, zip64 ? 0xFFFFFFFFu : (uint32_t)e[i].len);
        b16(z, (unsigned)nl), b16(z, zip64 ? 28 : 0), b16(z, 0), b16(z, 0), b16(z, 0), b32(z, 0);
        b32(z, zip64 ? 0xFFFFFFFFu : (uint32_t)lho[i]);
        bstr(z, e[i].name);
        if (zip64) b16(z, 1), b16(z, 24), b64(z, e[i].len), b64(z, e[i].len), b64(z, lho[i]);
    }
    uint64_t cdsize = z->n - cd;
    if (zip64) {
        uint64_t zo = z->n;
        bstr(z, "PK\x06\x06");
        b64(z, 44), b16(z, 45), b16(z, 45), b32(z, 0), b32(z, 0);
        b64(z, (uint64_t)n), b64(z, (uint64_t)n), b64(z, cdsize), b64(z, cd);
        bstr(z, "PK\x06\x07");
        b32(z, 0), b64(z, zo), b32(z, 1);
    }
    bstr(z, "PK\x05\x06");
    b16(z, 0), b16(z, 0);
    b16(z, zip64 ? 0xFFFF : (unsigned)n), b16(z, zip64 ? 0xFFFF : (unsigned)n);
    b32(z, zip64 ? 0xFFFFFFFFu : (uint32_t)cdsize), b32(z, zip64 ? 0xFFFFFFFFu : (uint32_t)cd);
    b16(z, 0);
    free(lho);
}

/* A checkpoint {"w": tensor} with the given pickle body for the value and
 * one storage record "0" of `storage` bytes. */
static void make_ckpt(struct bb *z, const struct bb *pkl, const void *storage, size_t slen, int zip64,
                      const char *byteorder) {
    struct zent e[4] = {
        {"archive/data.pkl", pkl->p, pkl->n, 0},
        {"archive/data/0", storage, slen, 0},
        {"archive/version", "3\n", 2, 0},
        {"archive/byteorder", byteorder, byteorder ? strlen(byteorder) : 0, 0},
    };
    zip_build(z, e, byteorder ? 4 : 3, zip64);
}

static void pkl_dict1(struct bb *b, const char *name, const char *cls, uint64_t numel, uint64_t off, int nd,
                      const uint64_t *sizes, const uint64_t *strides) {
    bstr(b, "\x80\x02}(");
    p_str(b, name);
    p_tensor(b, cls, "0", numel, off, nd, sizes, strides);
    bstr(b, "u.");
}

static pagein_file *open_buf(const struct bb *z, int *rc) {
    pagein_file *f = NULL;
    *rc = pagein_open_memory(&f, z->p, z->n, "test.pt", NULL);
    return f;
}

TEST(torch_basic_zip32_and_zip64) {
    float data[6] = {0, 1, 2, 3, 4, 5};
    for (int zip64 = 0; zip64 < 2; zip64++) {
        struct bb pk = {0}, z = {0};
        uint64_t sz[2] = {2, 3}, sd[2] = {3, 1};
        pkl_dict1(&pk, "layers.0.w", "FloatStorage", 6, 0, 2, sz, sd);
        make_ckpt(&z, &pk, data, sizeof data, zip64, NULL);
        int rc;
        pagein_file *f = open_buf(&z, &rc);
        CHECK_OK(rc);
        if (f) {
            pagein_file_info fi;
            pagein_file_get_info(f, &fi);
            CHECK_EQ(fi.format, PAGEIN_FORMAT_TORCH);
            CHECK_EQ(fi.version, 3);
            CHECK_EQ(pagein_tensor_count(f), 1);
            const pagein_tensor *t = pagein_tensor_get(f, "layers.0.w");
            CHECK(t != NULL);
            if (t) {
                CHECK_EQ(t->dtype, PAGEIN_DTYPE_F32);
                CHECK_EQ(t->ndim, 2);
                CHECK_EQ(t->shape[0], 2);
                CHECK_EQ(t->shape[1], 3);
                CHECK_EQ(t->nbytes, 24);
                CHECK_EQ(t->offset % 64, 0); /* our builder aligns like torch */
                CHECK_EQ(t->layer, 0);
                CHECK_EQ(t->flags, 0);
                CHECK(memcmp(t->data, data, 24) == 0);
                pagein_torch_tensor_info ti;
                CHECK_OK(pagein_torch_tensor_get_info(f, t, &ti));
                CHECK_EQ(ti.strides[0], 3);
                CHECK_EQ(ti.n_sharing, 1);
                CHECK_STR(ti.storage_key, "0");
            }
            pagein_close(f);
        }
        free(pk.p), free(z.p);
    }
    return PASS;
}

TEST(torch_transpose_read_and_byteswap) {
    /* storage 0..11 as [3,4]; the tensor is its transpose [4,3] at offset 0 */
    int32_t data[12];
    for (int i = 0; i < 12; i++) data[i] = i;
    struct bb pk = {0}, z = {0};
    uint64_t sz[2] = {4, 3}, sd[2] = {1, 4};
    pkl_dict1(&pk, "t", "IntStorage", 12, 0, 2, sz, sd);
    make_ckpt(&z, &pk, data, sizeof data, 1, "little");
    int rc;
    pagein_file *f = open_buf(&z, &rc);
    CHECK_OK(rc);
    if (!f) return FAIL;
    const pagein_tensor *t = pagein_tensor_get(f, "t");
    CHECK(t->flags & PAGEIN_TENSOR_NONCONTIGUOUS);
    int32_t out[12], want[12];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 3; c++) want[r * 3 + c] = data[c * 4 + r];
    CHECK_OK(pagein_tensor_copy(f, t, 0, out, sizeof out));
    CHECK(memcmp(out, want, sizeof out) == 0);
    /* unaligned sub-ranges agree byte for byte */
    for (size_t off = 0; off < sizeof out; off += 5) {
        uint8_t part[48];
        size_t len = PI_MIN_LEN(sizeof out - off, 7);
        CHECK_OK(pagein_tensor_copy(f, t, off, part, len));
        CHECK(memcmp(part, (uint8_t *)want + off, len) == 0);
    }
    CHECK_EQ(pagein_tensor_copy(f, t, 1, out, sizeof out), PAGEIN_E_RANGE);
    pagein_close(f);
    free(z.p);
    /* the same archive saying byteorder "big": values come back swapped */
    int32_t be[12];
    for (int i = 0; i < 12; i++) be[i] = (int32_t)__builtin_bswap32((uint32_t)i);
    struct bb z2 = {0};
    make_ckpt(&z2, &pk, be, sizeof be, 0, "big");
    f = open_buf(&z2, &rc);
    CHECK_OK(rc);
    if (f) {
        t = pagein_tensor_get(f, "t");
        CHECK(t->flags & PAGEIN_TENSOR_SWAPPED);
        CHECK_OK(pagein_tensor_copy(f, t, 0, out, sizeof out));
        CHECK(memcmp(out, want, sizeof out) == 0);
        for (size_t off = 0; off < sizeof out; off += 3) {
            uint8_t part[48];
            size_t len = PI_MIN_LEN(sizeof out - off, 6);
            CHECK_OK(pagein_tensor_copy(f, t, off, part, len));
            CHECK(memcmp(part, (uint8_t *)want + off, len) == 0);
        }
        pagein_close(f);
    }
    free(pk.p), free(z2.p);
    return PASS;
}

/* Every refusal: the detail names what was wrong. */
static void expect_fail(const struct bb *z, int code, const char *needle) {
    int rc;
    pagein_file *f = open_buf(z, &rc);
    CHECK(f == NULL);
    pagein_close(f);
    CHECK_EQ(rc, code);
    if (needle && !strstr(pagein_last_error_detail(), needle)) {
        printf("    detail lacks '%s': %s\n", needle, pagein_last_error_detail());
        pt_failed = 1;
    }
}

TEST(torch_refuses_unsafe_globals) {
    float data[2] = {1, 2};
    const char *bad[][2] = {{"posix", "system"}, {"os", "system"}, {"builtins", "eval"}, {"__builtin__", "exec"},
                            {"subprocess", "Popen"}, {"torch", "load"}, {"torch._utils", "_rebuild_qtensor"},
                            {"torch.nn", "Module"}, {"collections", "defaultdict"}, {"torch", "FloatStorage.x"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct bb pk = {0}, z = {0};
        bstr(&pk, "\x80\x02}(");
        p_str(&pk, "x");
        p_global(&pk, bad[i][0], bad[i][1]);
        p_str(&pk, "touch /tmp/pagein-pwned");
        bstr(&pk, "\x85R");
        bstr(&pk, "u.");
        make_ckpt(&z, &pk, data, sizeof data, 0, NULL);
        char want[128];
        snprintf(want, sizeof want, "'%s.%s'", bad[i][0], bad[i][1]);
        expect_fail(&z, PAGEIN_E_UNSAFE, want);
        free(pk.p), free(z.p);
    }
    /* module/name split differently but the same dotted path: torch joins
     * them with '.', so this is the allowlisted OrderedDict */
    struct bb pk = {0}, z = {0};
    bstr(&pk, "\x80\x02");
    p_global(&pk, "collections.OrderedDict", "");
    bstr(&pk, ")R.");
    make_ckpt(&z, &pk, data, sizeof data, 0, NULL);
    expect_fail(&z, PAGEIN_E_UNSAFE, "'collections.OrderedDict.'");
    free(pk.p), free(z.p);
    return PASS;
}

TEST(torch_refuses_unsafe_calls) {
    float data[2] = {1, 2};
    struct {
        const char *pkl;
        size_t len;
        int code;
        const char *needle;
    } cases[] = {
        /* NEWOBJ of an allowlisted class that is not Parameter */
        {LIT("\x80\x02" "ctorch\nSize\n)\x81."), PAGEIN_E_UNSAFE, "only torch.nn.Parameter"},
        /* REDUCE on a non-global */
        {LIT("\x80\x02" "X\x01\x00\x00\x00" "x)R."), PAGEIN_E_UNSAFE, "not an allowlisted global"},
        /* BUILD on a plain dict */
        {LIT("\x80\x02" "}}b."), PAGEIN_E_UNSAFE, "BUILD"},
        /* APPEND to a dict */
        {LIT("\x80\x02" "}K\x01" "a."), PAGEIN_E_BAD_PICKLE, "APPEND"},
        /* protocol-4 opcodes that torch's weights_only refuses */
        {LIT("\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00}."), PAGEIN_E_UNSUPPORTED, "FRAME"},
        {LIT("\x80\x02\x93."), PAGEIN_E_UNSUPPORTED, "STACK_GLOBAL"},
        {LIT("\x80\x02" "cposix\nsystem\n"), PAGEIN_E_UNSAFE, "posix.system"},
        /* persistent id that is not a storage */
        {LIT("\x80\x02" "(X\x03\x00\x00\x00" "fooK\x01" "tQ."), PAGEIN_E_BAD_PICKLE, "storage"},
        /* sparse tensors: allowed by torch, no dense bytes */
        {LIT("\x80\x02" "ctorch._utils\n_rebuild_sparse_tensor\n)R."), PAGEIN_E_UNSUPPORTED, "sparse"},
        /* stack underflow, memo miss, missing STOP, bad strings */
        {LIT("\x80\x02t."), PAGEIN_E_BAD_PICKLE, "MARK"},
        {LIT("\x80\x02h\x05."), PAGEIN_E_BAD_PICKLE, "memo"},
        {LIT("\x80\x02}"), PAGEIN_E_TRUNCATED, "STOP"},
        {LIT("\x80\x02X\xff\x00\x00\x00" "ab."), PAGEIN_E_TRUNCATED, "BINUNICODE"},
        {LIT("\x80\x02X\x02\x00\x00\x00\xc3\x28."), PAGEIN_E_BAD_UTF8, "UTF-8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct bb pk = {0}, z = {0};
        size_t n = cases[i].len;
        bput(&pk, cases[i].pkl, n);
        make_ckpt(&z, &pk, data, sizeof data, 0, NULL);
        expect_fail(&z, cases[i].code, cases[i].needle);
        free(pk.p), free(z.p);
    }
    return PASS;
}

TEST(torch_bounds_and_containers) {
    float data[6] = {0};
    uint64_t sz[2] = {2, 3}, sd[2] = {3, 1};
    struct bb pk = {0}, z = {0};
    /* offset 1 + 6 elements > 6-element storage */
    pkl_dict1(&pk, "w", "FloatStorage", 6, 1, 2, sz, sd);
    make_ckpt(&z, &pk, data, sizeof data, 0, NULL);
    expect_fail(&z, PAGEIN_E_BAD_OFFSET, "'w'");
    free(pk.p), free(z.p);
    /* storage numel larger than its record */
    pk = (struct bb){0}, z = (struct bb){0};
    pkl_dict1(&pk, "w", "DoubleStorage", 6, 0, 2, sz, sd);
    make_ckpt(&z, &pk, data, sizeof data, 0, NULL);
    expect_fail(&z, PAGEIN_E_TRUNCATED, "needs 48 bytes");
    free(pk.p), free(z.p);
    /* compressed storage record */
    pk = (struct bb){0}, z = (struct bb){0};
    pkl_dict1(&pk, "w", "FloatStorage", 6, 0, 2, sz, sd);
    struct zent e[3] = {{"a/data.pkl", pk.p, pk.n, 0}, {"a/data/0", data, sizeof data, 8}, {"a/version", "3\n", 2, 0}};
    zip_build(&z, e, 3, 0);
    expect_fail(&z, PAGEIN_E_UNSUPPORTED, "compressed");
    free(z.p);
    /* not a torch archive */
    z = (struct bb){0};
    struct zent e2[1] = {{"hello.txt", "hi", 2, 0}};
    zip_build(&z, e2, 1, 0);
    expect_fail(&z, PAGEIN_E_BAD_MAGIC, "data.pkl");
    free(z.p), free(pk.p);
    /* a list that contains itself, and a dict shared 40 levels deep
     * (2^40 paths): flattening must stop, not hang */
    pk = (struct bb){0}, z = (struct bb){0};
    bput(&pk, LIT("\x80\x02}(X\x01\x00\x00\x00" "l]q\x00h\x00" "au."));
    make_ckpt(&z, &pk, data, sizeof data, 0, NULL);
    int rc;
    pagein_file *f = open_buf(&z, &rc);
    CHECK_OK(rc);
    if (f) {
        const pagein_meta *m = pagein_meta_find(f, "l");
        CHECK(m && m->type == PAGEIN_META_STRING);
        pagein_close(f);
    }
    free(pk.p), free(z.p);
    pk = (struct bb){0}, z = (struct bb){0};
    bstr(&pk, "\x80\x02");
    pkl_dict1(&pk, "w", "FloatStorage", 6, 0, 2, sz, sd); /* ends with u. */
    pk.n -= 1;                                            /* drop STOP: dict on stack */
    for (int i = 0; i < 40; i++) bstr(&pk, "q\x01(h\x01h\x01t"); /* x = (x, x) */
    bstr(&pk, "\x85.");
    make_ckpt(&z, &pk, data, sizeof data, 0, NULL);
    expect_fail(&z, PAGEIN_E_LIMIT, "pickle: "); /* visits or name bytes, whichever first */
    free(pk.p), free(z.p);
    return PASS;
}

TEST(torch_values_and_views) {
    float data[6] = {0, 1, 2, 3, 4, 5};
    struct bb pk = {0}, z = {0};
    uint64_t sz[1] = {3}, sd[1] = {1}, sz2[1] = {3}, sd2[1] = {2};
    bstr(&pk, "\x80\x02}(");
    p_str(&pk, "a");
    p_tensor(&pk, "FloatStorage", "0", 6, 3, 1, sz, sd);
    p_str(&pk, "b");
    p_tensor(&pk, "FloatStorage", "0", 6, 0, 1, sz2, sd2);
    p_str(&pk, "n");
    p_int(&pk, 70000);
    p_str(&pk, "neg");
    bput(&pk, LIT("\x8a\x02\x00\x80")); /* LONG1 -32768 */
    p_str(&pk, "big");
    bput(&pk, LIT("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01")); /* 2^64 */
    p_str(&pk, "f");
    bput(&pk, LIT("G\x3f\xf8\x00\x00\x00\x00\x00\x00")); /* 1.5 */
    p_str(&pk, "s");
    bstr(&pk, "U\x02hi");
    p_str(&pk, "none");
    bstr(&pk, "N");
    bstr(&pk, "u.");
    make_ckpt(&z, &pk, data, sizeof data, 0, NULL);
    int rc;
    pagein_file *f = open_buf(&z, &rc);
    CHECK_OK(rc);
    if (!f) return FAIL;
    CHECK_EQ(pagein_tensor_count(f), 2);
    CHECK_EQ(pagein_torch_storage_count(f), 1);
    /* file order is ascending offset: b (offset 0) before a (offset 3) */
    CHECK_STR(pagein_tensor_at(f, 0)->name, "b");
    const pagein_tensor *a = pagein_tensor_get(f, "a"), *b = pagein_tensor_get(f, "b");
    CHECK_EQ(a->flags, PAGEIN_TENSOR_VIEW);
    CHECK_EQ(b->flags, PAGEIN_TENSOR_VIEW | PAGEIN_TENSOR_NONCONTIGUOUS);
    CHECK_EQ(((const float *)a->data)[0], 3);
    float out[3];
    CHECK_OK(pagein_tensor_copy(f, b, 0, out, sizeof out));
    CHECK(out[0] == 0 && out[1] == 2 && out[2] == 4);
    CHECK_EQ(pagein_meta_find(f, "n")->v.i, 70000);
    CHECK_EQ(pagein_meta_find(f, "neg")->v.i, -32768);
    CHECK_EQ(pagein_meta_find(f, "big")->type, PAGEIN_META_STRING);
    CHECK(pagein_meta_find(f, "f")->v.f == 1.5);
    CHECK_STR(pagein_meta_find(f, "s")->str, "hi");
    CHECK_STR(pagein_meta_find(f, "none")->str, "None");
    pagein_close(f);
    free(pk.p), free(z.p);
    return PASS;
}

/* Every prefix of a valid archive, and every single-byte corruption of its
 * pickle, fails cleanly (or parses): no crash, no leak. */
TEST(torch_truncation_and_corruption) {
    float data[6] = {0};
    uint64_t sz[2] = {2, 3}, sd[2] = {3, 1};
    struct bb pk = {0}, z = {0};
    pkl_dict1(&pk, "w", "FloatStorage", 6, 0, 2, sz, sd);
    make_ckpt(&z, &pk, data, sizeof data, 1, NULL);
    for (size_t n = 0; n < z.n; n++) {
        pagein_file *f = NULL;
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, z.p, n);
        int rc = pagein_open_memory(&f, copy, n, "cut.pt", NULL);
        CHECK(rc < 0);
        pagein_close(f);
        free(copy);
    }
    uint64_t seed = pt_seed();
    for (int i = 0; i < 2000; i++) {
        struct bb p2 = {0}, z2 = {0};
        bput(&p2, pk.p, pk.n);
        size_t at = pt_rand(&seed) % p2.n;
        p2.p[at] = (uint8_t)pt_rand(&seed);
        make_ckpt(&z2, &p2, data, sizeof data, 0, NULL);
        pagein_file *f = NULL;
        if (pagein_open_memory(&f, z2.p, z2.n, "x.pt", NULL) == 0) pagein_close(f);
        free(p2.p), free(z2.p);
    }
    free(pk.p), free(z.p);
    return PASS;
}

/* Copies into the table are bounded: a long key nested twice, and a 3000-byte
 * string shared 25,000 times next to a tensor, end with PAGEIN_E_LIMIT
 * instead of hundreds of megabytes of names. */
TEST(torch_name_budget) {
    float data[6] = {0};
    uint64_t sz[1] = {6}, sd[1] = {1};
    char *key = malloc(40001);
    memset(key, 'k', 40000);
    key[40000] = 0;
    struct bb pk = {0}, z = {0};
    bstr(&pk, "\x80\x02}(");
    p_str(&pk, key);
    bstr(&pk, "}(");
    p_str(&pk, key);
    p_tensor(&pk, "FloatStorage", "0", 6, 0, 1, sz, sd);
    bstr(&pk, "uu.");
    make_ckpt(&z, &pk, data, sizeof data, 0, NULL);
    expect_fail(&z, PAGEIN_E_LIMIT, "longer than");
    free(pk.p), free(z.p);
    pk = (struct bb){0}, z = (struct bb){0};
    bstr(&pk, "\x80\x02}(");
    p_str(&pk, "l");
    bstr(&pk, "](");
    p_tensor(&pk, "FloatStorage", "0", 6, 0, 1, sz, sd);
    key[3000] = 0;
    p_str(&pk, key);
    bstr(&pk, "q\x01");
    for (int i = 0; i < 25000; i++) bstr(&pk, "h\x01");
    bstr(&pk, "eu.");
    make_ckpt(&z, &pk, data, sizeof data, 0, NULL);
    expect_fail(&z, PAGEIN_E_LIMIT, "add up");
    free(pk.p), free(z.p), free(key);
    return PASS;
}

/* The library converter on a hand-built checkpoint: a transposed view and
 * its base, written as safetensors and read back; also cast and GGUF. */
TEST(torch_convert_library) {
    int32_t data[12];
    for (int i = 0; i < 12; i++) data[i] = i * 3 - 7;
    struct bb pk = {0}, z = {0};
    uint64_t sz[2] = {3, 4}, sd[2] = {4, 1}, tz[2] = {4, 3}, td[2] = {1, 4};
    bstr(&pk, "\x80\x02}(");
    p_str(&pk, "base");
    p_tensor(&pk, "IntStorage", "0", 12, 0, 2, sz, sd);
    p_str(&pk, "t");
    p_tensor(&pk, "IntStorage", "0", 12, 0, 2, tz, td);
    p_str(&pk, "epoch");
    p_int(&pk, 3);
    bstr(&pk, "u.");
    make_ckpt(&z, &pk, data, sizeof data, 1, NULL);
    int rc;
    pagein_file *f = open_buf(&z, &rc);
    CHECK_OK(rc);
    if (!f) return FAIL;
    const char *out = pt_tmppath("conv.safetensors");
    pagein_convert_stats st;
    CHECK_OK(pagein_convert_safetensors(f, out, NULL, &st));
    CHECK_EQ(st.tensors, 2);
    CHECK_EQ(st.shared, 2);
    CHECK_EQ(st.materialised, 1);
    CHECK_EQ(st.bytes, 96);
    pagein_file *g = NULL;
    CHECK_OK(pagein_open(&g, out, NULL));
    if (g) {
        const pagein_tensor *t = pagein_tensor_get(g, "t"), *b = pagein_tensor_get(g, "base");
        CHECK(t && b);
        if (t && b) {
            CHECK_EQ(t->shape[0], 4);
            CHECK(memcmp(b->data, data, sizeof data) == 0);
            const int32_t *tv = t->data;
            int ok = 1;
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 3; c++) ok &= tv[r * 3 + c] == data[c * 4 + r];
            CHECK(ok);
        }
        const pagein_meta *m = pagein_meta_find(g, "format");
        CHECK(m && m->str && strcmp(m->str, "pt") == 0);
        pagein_close(g);
    }
    /* GGUF output reads back with the same bytes */
    const char *gout = pt_tmppath("conv.gguf");
    CHECK_OK(pagein_convert_gguf(f, gout, NULL, NULL));
    g = NULL;
    CHECK_OK(pagein_open(&g, gout, NULL));
    if (g) {
        const pagein_tensor *t = pagein_tensor_get(g, "t");
        CHECK(t != NULL && t->nbytes == 48);
        const pagein_meta *m = pagein_meta_find(g, "epoch");
        CHECK(m != NULL);
        pagein_close(g);
    }
    /* refusals leave nothing behind */
    pagein_convert_opts o = PAGEIN_CONVERT_OPTS_INIT;
    o.dtype = PAGEIN_DTYPE_I8;
    const char *bad = pt_tmppath("bad.safetensors");
    CHECK_EQ(pagein_convert_safetensors(f, bad, &o, NULL), PAGEIN_E_INVALID);
    FILE *x = fopen(bad, "rb");
    CHECK(x == NULL);
    if (x) fclose(x);
    pagein_close(f);
    free(pk.p), free(z.p);
    return PASS;
}

/* The legacy (pre-1.6) format is recognised and refused with advice. */
TEST(torch_legacy_refused) {
    struct bb z = {0};
    bput(&z, LIT("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.\x80\x02M\xe9\x03."));
    expect_fail(&z, PAGEIN_E_UNSUPPORTED, "legacy torch.save format");
    free(z.p);
    return PASS;
}
