/* manifest.c - integrity manifests: parser (untrusted input, buffer in, no
 * I/O) and formatter. The format is docs/FORMAT-MANIFEST.md:
 *
 *   pagein-manifest 1
 *   hash xxh3-128
 *   file 0 SIZE HEADER_BYTES HASH NAME
 *   tensor FILE OFFSET NBYTES HASH NAME
 *   end NFILES NTENSORS
 *
 * Line based like sha256sum output, so it diffs and greps well; names are
 * percent-encoded so any byte string fits in one field. */
#include "format.h"

#include <stdio.h>
#include <stdlib.h>

void pi_manifest_init(struct pi_manifest *m) { memset(m, 0, sizeof *m); }

void pi_manifest_free(struct pi_manifest *m) {
    if (!m) return;
    pi_free(m->files);
    pi_free(m->t);
    pi_free(m->index);
    pi_arena_free(&m->arena);
    memset(m, 0, sizeof *m);
}

int pi_manifest_add_file(struct pi_manifest *m, const char *name, size_t name_len, uint64_t size,
                         uint64_t header_bytes, const uint8_t hash[16]) {
    if (pi_grow((void **)&m->files, &m->fcap, m->nfiles + 1, sizeof *m->files) < 0) return -ENOMEM;
    struct pi_manifest_file *f = &m->files[m->nfiles];
    f->name = pi_arena_strndup(&m->arena, name, name_len);
    if (!f->name) return -ENOMEM;
    f->name_len = name_len;
    f->size = size;
    f->header_bytes = header_bytes;
    memcpy(f->header_hash, hash, 16);
    m->nfiles++;
    return 0;
}

int pi_manifest_add_tensor(struct pi_manifest *m, uint32_t file, const char *name, size_t name_len,
                           uint64_t offset, uint64_t nbytes, const uint8_t hash[16]) {
    if (pi_grow((void **)&m->t, &m->cap, m->n + 1, sizeof *m->t) < 0) return -ENOMEM;
    struct pi_manifest_tensor *t = &m->t[m->n];
    t->name = pi_arena_strndup(&m->arena, name, name_len);
    if (!t->name) return -ENOMEM;
    t->name_len = name_len;
    t->file = file;
    t->offset = offset;
    t->nbytes = nbytes;
    memcpy(t->hash, hash, 16);
    m->n++;
    return 0;
}

/* ---- index by (file, name) ---------------------------------------------- */

static uint64_t key_hash(uint32_t file, const char *name, size_t len) {
    return pi_hash_bytes(name, len) ^ ((uint64_t)file * 0x9e3779b97f4a7c15ull);
}

/* Builds the index; PAGEIN_E_DUPLICATE names the repeated tensor. */
static int build_index(struct pi_manifest *m) {
    size_t cap = 16;
    while (cap < m->n * 2) cap *= 2;
    m->index = pi_calloc(cap, sizeof *m->index);
    if (!m->index) return -ENOMEM;
    m->icap = cap;
    for (size_t i = 0; i < m->n; i++) {
        const struct pi_manifest_tensor *t = &m->t[i];
        size_t s = key_hash(t->file, t->name, t->name_len) & (cap - 1);
        for (;; s = (s + 1) & (cap - 1)) {
            uint32_t v = m->index[s];
            if (!v) {
                m->index[s] = (uint32_t)i + 1;
                break;
            }
            const struct pi_manifest_tensor *o = &m->t[v - 1];
            if (o->file == t->file && o->name_len == t->name_len && memcmp(o->name, t->name, t->name_len) == 0)
                return pi_err(PAGEIN_E_DUPLICATE, "manifest: tensor '%.*s' of file %u listed twice",
                              (int)PI_MIN(t->name_len, 200), t->name, t->file);
        }
    }
    return 0;
}

const struct pi_manifest_tensor *pi_manifest_find(const struct pi_manifest *m, uint32_t file,
                                                  const char *name, size_t len) {
    if (!m->icap) return NULL;
    size_t s = key_hash(file, name, len) & (m->icap - 1);
    for (;; s = (s + 1) & (m->icap - 1)) {
        uint32_t v = m->index[s];
        if (!v) return NULL;
        const struct pi_manifest_tensor *o = &m->t[v - 1];
        if (o->file == file && o->name_len == len && memcmp(o->name, name, len) == 0) return o;
    }
}

/* ---- parser ------------------------------------------------------------- */

struct field {
    const char *p;
    size_t n;
};

/* Splits [p, p+n) at single spaces into at most max fields; returns the
 * count, or max + 1 if there are more. */
static size_t split(const char *p, size_t n, struct field *f, size_t max) {
    size_t k = 0, start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || p[i] == ' ') {
            if (k == max) return max + 1;
            f[k].p = p + start;
            f[k].n = i - start;
            k++;
            start = i + 1;
        }
    }
    return k;
}

static bool field_is(const struct field *f, const char *s) {
    size_t n = strlen(s);
    return f->n == n && memcmp(f->p, s, n) == 0;
}

/* Decimal, no sign, no leading zeros. 0, PAGEIN_E_BAD_MANIFEST or _OVERFLOW. */
static int parse_u64(const struct field *f, uint64_t *out, size_t line, const char *what) {
    if (f->n == 0 || (f->n > 1 && f->p[0] == '0'))
        return pi_err(PAGEIN_E_BAD_MANIFEST, "manifest line %zu: %s is not a decimal number", line, what);
    uint64_t v = 0;
    for (size_t i = 0; i < f->n; i++) {
        char c = f->p[i];
        if (c < '0' || c > '9')
            return pi_err(PAGEIN_E_BAD_MANIFEST, "manifest line %zu: %s is not a decimal number", line, what);
        if (pi_mul_overflow(v, 10, &v) || pi_add_overflow(v, (uint64_t)(c - '0'), &v))
            return pi_err(PAGEIN_E_OVERFLOW, "manifest line %zu: %s exceeds 2^64-1", line, what);
    }
    *out = v;
    return 0;
}

static int parse_hash(const struct field *f, uint8_t out[16], size_t line) {
    if (f->n != 32) return pi_err(PAGEIN_E_BAD_MANIFEST, "manifest line %zu: hash must be 32 hex digits", line);
    for (size_t i = 0; i < 16; i++) {
        char a = f->p[2 * i], b = f->p[2 * i + 1];
        /* lowercase only: one spelling per hash keeps manifests comparable */
        if ((a >= 'A' && a <= 'F') || (b >= 'A' && b <= 'F') || pi_hexval(a) < 0 || pi_hexval(b) < 0)
            return pi_err(PAGEIN_E_BAD_MANIFEST, "manifest line %zu: hash must be 32 lowercase hex digits", line);
        out[i] = (uint8_t)(pi_hexval(a) << 4 | pi_hexval(b));
    }
    return 0;
}

/* Decodes a percent-encoded name into the arena. */
static int parse_name(struct pi_manifest *m, const struct field *f, const char **out, size_t *out_len,
                      size_t line) {
    size_t n = 0;
    for (size_t i = 0; i < f->n; i++, n++) {
        unsigned char c = (unsigned char)f->p[i];
        if (c == '%') {
            if (f->n - i < 3 || pi_hexval(f->p[i + 1]) < 0 || pi_hexval(f->p[i + 2]) < 0)
                return pi_err(PAGEIN_E_BAD_MANIFEST, "manifest line %zu: bad %%-escape in a name", line);
            i += 2;
        } else if (c < 0x21 || c == 0x7f) {
            return pi_err(PAGEIN_E_BAD_MANIFEST, "manifest line %zu: control byte 0x%02x in a name (must be %%-escaped)",
                          line, c);
        }
    }
    if (n > PI_MANIFEST_MAX_NAME)
        return pi_err(PAGEIN_E_LIMIT, "manifest line %zu: name of %zu bytes exceeds %u", line, n,
                      PI_MANIFEST_MAX_NAME);
    char *d = pi_arena_alloc(&m->arena, n + 1);
    if (!d) return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < f->n; i++) {
        if (f->p[i] == '%') {
            d[k++] = (char)(pi_hexval(f->p[i + 1]) << 4 | pi_hexval(f->p[i + 2]));
            i += 2;
        } else {
            d[k++] = f->p[i];
        }
    }
    d[k] = 0;
    *out = d;
    *out_len = k;
    return 0;
}

int pi_manifest_parse(const uint8_t *buf, size_t len, struct pi_manifest *m) {
    const char *p = (const char *)buf, *end = p + len;
    size_t line = 0;
    int state = 0; /* 0 magic, 1 hash, 2 body, 3 after end */
    struct field f[8];
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        line++;
        if (!nl)
            return pi_err(PAGEIN_E_TRUNCATED, "manifest line %zu: ends without a newline (truncated?)", line);
        size_t n = (size_t)(nl - p);
        const char *l = p;
        p = nl + 1;
        if (state == 3) return pi_err(PAGEIN_E_BAD_MANIFEST, "manifest line %zu: text after the end line", line);
        if (state > 0 && n > 0 && l[0] == '#') continue; /* comment */
        size_t k = split(l, n, f, 7);
        if (state == 0) {
            if (k != 2 || !field_is(&f[0], "pagein-manifest"))
                return pi_err(PAGEIN_E_BAD_MAGIC, "not a pagein manifest (first line must be 'pagein-manifest 1')");
            if (!field_is(&f[1], "1"))
                return pi_err(PAGEIN_E_BAD_VERSION, "manifest version '%.*s' unsupported (expected 1)",
                              (int)PI_MIN(f[1].n, 40), f[1].p);
            state = 1;
            continue;
        }
        if (state == 1) {
            if (k != 2 || !field_is(&f[0], "hash"))
                return pi_err(PAGEIN_E_BAD_MANIFEST, "manifest line %zu: expected 'hash xxh3-128'", line);
            if (!field_is(&f[1], "xxh3-128"))
                return pi_err(PAGEIN_E_UNSUPPORTED, "manifest line %zu: hash '%.*s' unsupported (expected xxh3-128)",
                              line, (int)PI_MIN(f[1].n, 40), f[1].p);
            state = 2;
            continue;
        }
        if (k >= 1 && field_is(&f[0], "file")) {
            if (k != 6)
                return pi_err(PAGEIN_E_BAD_MANIFEST, "manifest line %zu: 'file' needs INDEX SIZE HEADER_BYTES HASH NAME",
                              line);
            if (m->n)
                return pi_err(PAGEIN_E_BAD_MANIFEST, "manifest line %zu: 'file' after the first 'tensor'", line);
            uint64_t idx, size, hb;
            uint8_t h[16];
            const char *name;
            size_t name_len;
            FORWARD_IF(parse_u64(&f[1], &idx, line, "file index"));
            FORWARD_IF(parse_u64(&f[2], &size, line, "file size"));
            FORWARD_IF(parse_u64(&f[3], &hb, line, "header bytes"));
            FORWARD_IF(parse_hash(&f[4], h, line));
            FORWARD_IF(parse_name(m, &f[5], &name, &name_len, line));
            if (idx != m->nfiles)
                return pi_err(idx < m->nfiles ? PAGEIN_E_DUPLICATE : PAGEIN_E_BAD_MANIFEST,
                              "manifest line %zu: file index %llu, expected %zu", line, (unsigned long long)idx,
                              m->nfiles);
            if (m->nfiles >= PI_MANIFEST_MAX_FILES)
                return pi_err(PAGEIN_E_LIMIT, "manifest line %zu: more than %u files", line, PI_MANIFEST_MAX_FILES);
            if (hb > size)
                return pi_err(PAGEIN_E_BAD_OFFSET, "manifest line %zu: header of %llu bytes in a file of %llu",
                              line, (unsigned long long)hb, (unsigned long long)size);
            if (name_len == 0 || memchr(name, '/', name_len) || memchr(name, 0, name_len) ||
                (name_len == 1 && name[0] == '.') || (name_len == 2 && memcmp(name, "..", 2) == 0))
                return pi_err(PAGEIN_E_BAD_MANIFEST,
                              "manifest line %zu: file name must be a plain name (no '/', NUL, '.', '..')", line);
            if (pi_manifest_add_file(m, name, name_len, size, hb, h) < 0) return -ENOMEM;
            continue;
        }
        if (k >= 1 && field_is(&f[0], "tensor")) {
            if (k != 6)
                return pi_err(PAGEIN_E_BAD_MANIFEST, "manifest line %zu: 'tensor' needs FILE OFFSET NBYTES HASH NAME",
                              line);
            uint64_t fi, off, nb, e;
            uint8_t h[16];
            const char *name;
            size_t name_len;
            FORWARD_IF(parse_u64(&f[1], &fi, line, "file index"));
            FORWARD_IF(parse_u64(&f[2], &off, line, "offset"));
            FORWARD_IF(parse_u64(&f[3], &nb, line, "byte count"));
            FORWARD_IF(parse_hash(&f[4], h, line));
            FORWARD_IF(parse_name(m, &f[5], &name, &name_len, line));
            if (fi >= m->nfiles)
                return pi_err(PAGEIN_E_BAD_MANIFEST, "manifest line %zu: tensor names file %llu of %zu", line,
                              (unsigned long long)fi, m->nfiles);
            if (pi_add_overflow(off, nb, &e))
                return pi_err(PAGEIN_E_OVERFLOW, "manifest line %zu: offset + byte count overflows", line);
            const struct pi_manifest_file *mf = &m->files[fi];
            if (off < mf->header_bytes || e > mf->size)
                return pi_err(PAGEIN_E_BAD_OFFSET, "manifest line %zu: bytes [%llu, %llu) outside the data of a %llu-byte file",
                              line, (unsigned long long)off, (unsigned long long)e, (unsigned long long)mf->size);
            if (m->n >= PI_MANIFEST_MAX_TENSORS)
                return pi_err(PAGEIN_E_LIMIT, "manifest line %zu: more than %u tensors", line, PI_MANIFEST_MAX_TENSORS);
            if (pi_manifest_add_tensor(m, (uint32_t)fi, name, name_len, off, nb, h) < 0) return -ENOMEM;
            continue;
        }
        if (k >= 1 && field_is(&f[0], "end")) {
            uint64_t nf, nt;
            if (k != 3) return pi_err(PAGEIN_E_BAD_MANIFEST, "manifest line %zu: 'end' needs NFILES NTENSORS", line);
            FORWARD_IF(parse_u64(&f[1], &nf, line, "file count"));
            FORWARD_IF(parse_u64(&f[2], &nt, line, "tensor count"));
            if (nf != m->nfiles || nt != m->n)
                return pi_err(PAGEIN_E_BAD_MANIFEST, "manifest line %zu: end says %llu files and %llu tensors, found %zu and %zu",
                              line, (unsigned long long)nf, (unsigned long long)nt, m->nfiles, m->n);
            state = 3;
            continue;
        }
        return pi_err(PAGEIN_E_BAD_MANIFEST, "manifest line %zu: unknown record '%.*s'", line,
                      (int)PI_MIN(k ? f[0].n : n, 40), l);
    }
    if (state == 0) return pi_err(PAGEIN_E_BAD_MAGIC, "not a pagein manifest (empty)");
    if (state != 3) return pi_err(PAGEIN_E_TRUNCATED, "manifest ends before its 'end' line (truncated?)");
    if (m->nfiles == 0) return pi_err(PAGEIN_E_BAD_MANIFEST, "manifest lists no file");
    return build_index(m);
}

/* ---- formatter ---------------------------------------------------------- */

#define sb_put pi_buf_put


static void sb_hash(struct pi_buf *b, const uint8_t h[16]) {
    static const char hx[] = "0123456789abcdef";
    char s[33];
    for (int i = 0; i < 16; i++) {
        s[2 * i] = hx[h[i] >> 4];
        s[2 * i + 1] = hx[h[i] & 15];
    }
    sb_put(b, s, 32);
}

static void sb_name(struct pi_buf *b, const char *s, size_t n) {
    static const char hx[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x21 || c == 0x7f || c == '%') {
            char e[3] = {'%', hx[c >> 4], hx[c & 15]};
            sb_put(b, e, 3);
        } else {
            sb_put(b, (const char *)&s[i], 1);
        }
    }
}

int pi_manifest_format(const struct pi_manifest *m, char **out, size_t *len) {
    struct pi_buf b = {0};
    pi_buf_printf(&b, "pagein-manifest 1\nhash xxh3-128\n");
    for (size_t i = 0; i < m->nfiles; i++) {
        const struct pi_manifest_file *f = &m->files[i];
        pi_buf_printf(&b, "file %zu %llu %llu ", i, (unsigned long long)f->size, (unsigned long long)f->header_bytes);
        sb_hash(&b, f->header_hash);
        sb_put(&b, " ", 1);
        sb_name(&b, f->name, f->name_len);
        sb_put(&b, "\n", 1);
    }
    for (size_t i = 0; i < m->n; i++) {
        const struct pi_manifest_tensor *t = &m->t[i];
        pi_buf_printf(&b, "tensor %u %llu %llu ", t->file, (unsigned long long)t->offset, (unsigned long long)t->nbytes);
        sb_hash(&b, t->hash);
        sb_put(&b, " ", 1);
        sb_name(&b, t->name, t->name_len);
        sb_put(&b, "\n", 1);
    }
    pi_buf_printf(&b, "end %zu %zu\n", m->nfiles, m->n);
    if (b.oom) {
        pi_free(b.p);
        return -ENOMEM;
    }
    *out = b.p;
    *len = b.n;
    return 0;
}
