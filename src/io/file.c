/* file.c - single files: open, map, detect the format, hand the mapping to
 * the format parser, accessors. */
#include "../internal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

pagein_format pi_detect_format(const uint8_t *buf, size_t len) {
    if (len >= 4 && memcmp(buf, "GGUF", 4) == 0) return PAGEIN_FORMAT_GGUF;
    if (len >= 4 && memcmp(buf, "PK\x03\x04", 4) == 0) return PAGEIN_FORMAT_TORCH;
    /* torch.save's legacy (pre-1.6) format: a pickled magic number first
     * (PROTO 2, LONG1 of 10 bytes); torch.c refuses it with advice. */
    if (len >= 4 && memcmp(buf, "\x80\x02\x8a\x0a", 4) == 0) return PAGEIN_FORMAT_TORCH;
    return PAGEIN_FORMAT_SAFETENSORS;
}

struct parse_ctx {
    pagein_file *f;
    uint32_t flags;
    pagein_format fmt;
    int returned; /* the parser returned (was not abandoned by the guard) */
};

static int parse_format(void *arg) {
    struct parse_ctx *c = arg;
    pagein_file *f = c->f;
    int rc;
    switch (c->fmt) {
    case PAGEIN_FORMAT_SAFETENSORS: rc = pi_safetensors_parse(f->base, f->len, c->flags, &f->tab); break;
    case PAGEIN_FORMAT_GGUF: rc = pi_gguf_parse(f->base, f->len, c->flags, &f->tab); break;
    case PAGEIN_FORMAT_TORCH: rc = pi_torch_parse(f->base, f->len, c->flags, &f->tab); break;
    default: rc = pi_err(PAGEIN_E_BAD_MAGIC, "unknown format %d", (int)c->fmt); break;
    }
    c->returned = 1;
    return rc;
}

static int parse(pagein_file *f, uint32_t flags, pagein_format fmt) {
    if (fmt == PAGEIN_FORMAT_UNKNOWN) fmt = pi_detect_format(f->base, f->len);
    f->tab.format = fmt;
    struct parse_ctx c = {f, flags, fmt, 0};
    /* A file truncated between fstat and the end of parsing would raise
     * SIGBUS inside the parser: parse under the truncation guard
     * (docs/SAFETY.md). If that happens the parser is abandoned mid-way,
     * without running its cleanup: the allocation journal then frees every
     * block the parse made (its scratch buffers and f->tab's contents) and
     * f->tab starts over empty, so nothing leaks and nothing is freed
     * twice. Only f->tab receives the parser's allocations (the tables
     * start empty: pi_table_init allocates nothing). */
    int rc;
    if (f->mapped) {
        struct pi_journal j;
        pi_journal_begin(&j);
        rc = pi_guard_call(f->base, f->len, f->path, 0, f->fd, parse_format, &c);
        pi_journal_end(&j, !c.returned);
        if (!c.returned) pi_table_init(&f->tab);
    } else {
        rc = parse_format(&c);
    }
    if (rc < 0) return rc;
    f->tab.format = fmt;
    return pi_table_finish(&f->tab, f->base);
}

static pagein_file *file_new(const char *name) {
    pagein_file *f = pi_calloc(1, sizeof *f);
    if (!f) return NULL;
    f->fd = -1;
    pi_table_init(&f->tab);
    if (name) {
        f->path = pi_strndup(name, strlen(name));
        if (!f->path) {
            pi_free(f);
            return NULL;
        }
    }
    return f;
}

/* Reading the header through the mapping must not drag tensor data in: a
 * fault on a normal mapping reads around it, up to read_ahead_kb (8 MiB on
 * the development machine), so opening a model would make its first
 * megabytes of tensor data resident (what `pagein resident` reports, and
 * what a lazy open promises not to read). For safetensors the header's
 * extent is known from its first 8 bytes: fault only that page
 * (MADV_RANDOM), then read exactly the header ahead (MADV_WILLNEED, large
 * requests). Other formats keep the kernel's read-around, which their
 * metadata walk benefits from. The caller resets the advice to normal. */
static void header_readahead(pagein_file *f) {
    if (f->len < 8) return;
    madvise((void *)f->base, f->len, MADV_RANDOM); /* before the first touch */
    if (memcmp(f->base, "GGUF", 4) == 0 || memcmp(f->base, "PK\x03\x04", 4) == 0) {
        madvise((void *)f->base, f->len, MADV_NORMAL);
        return;
    }
    uint64_t n;
    memcpy(&n, f->base, 8); /* little-endian hosts; a bad length fails the parse anyway */
    if (n <= f->len - 8) madvise((void *)f->base, (size_t)(8 + n), MADV_WILLNEED);
}

int pagein_open(pagein_file **out, const char *path, const pagein_open_opts *opts) {
    pi_err_clear();
    if (!out || !path) return pi_err(PAGEIN_E_INVALID, "pagein_open: NULL argument");
    uint32_t flags = opts ? opts->flags : 0;
    pagein_format fmt = opts ? opts->format : PAGEIN_FORMAT_UNKNOWN;
    pagein_file *f = file_new(path);
    if (!f) return pi_err(-ENOMEM, "%s: out of memory", path);
    int rc;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) {
        rc = pi_err(-errno, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    struct stat st;
    if (fstat(f->fd, &st) < 0) {
        rc = pi_err(-errno, "%s: cannot stat: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = pi_err(-EINVAL, "%s: not a regular file", path);
        goto fail;
    }
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    f->len = (size_t)st.st_size;
    if (f->len > 0) {
        /* PRIVATE: copy-on-write, so in-place writes by the caller (torch
         * tensors) stay in this process and never reach the file. */
        int priv = (flags & PAGEIN_OPEN_PRIVATE) != 0;
        void *m = mmap(NULL, f->len, priv ? PROT_READ | PROT_WRITE : PROT_READ, priv ? MAP_PRIVATE : MAP_SHARED,
                       f->fd, 0);
        if (m == MAP_FAILED) {
            rc = pi_err(-errno, "%s: cannot map %zu bytes: %s", path, f->len, strerror(errno));
            goto fail;
        }
        f->base = m;
        f->mapped = 1;
    } else {
        f->base = (const uint8_t *)"";
    }
    if (f->mapped) header_readahead(f);
    rc = parse(f, flags, fmt);
    if (f->mapped) madvise((void *)f->base, f->len, MADV_NORMAL);
    if (rc < 0) {
        pi_err_prefix(path);
        goto fail;
    }
    *out = f;
    return 0;
fail:
    pagein_close(f);
    return rc;
}

int pagein_open_memory(pagein_file **out, const void *buf, size_t len, const char *name,
                       const pagein_open_opts *opts) {
    pi_err_clear();
    if (!out || (!buf && len)) return pi_err(PAGEIN_E_INVALID, "pagein_open_memory: NULL argument");
    pagein_file *f = file_new(name ? name : "<memory>");
    if (!f) return pi_err(-ENOMEM, "out of memory");
    f->base = buf ? buf : (const void *)"";
    f->len = len;
    int rc = parse(f, opts ? opts->flags : 0, opts ? opts->format : PAGEIN_FORMAT_UNKNOWN);
    if (rc < 0) {
        pi_err_prefix(f->path);
        pagein_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

void pagein_close(pagein_file *f) {
    if (!f) return;
    if (f->mapped) munmap((void *)f->base, f->len);
    if (f->fd >= 0) close(f->fd);
    pi_table_free(&f->tab);
    pi_free(f->path);
    pi_free(f);
}

void pagein_file_get_info(const pagein_file *f, pagein_file_info *info) {
    memset(info, 0, sizeof *info);
    info->path = f->path;
    info->format = f->tab.format;
    info->file_size = f->len;
    info->data_start = f->tab.data_start;
    info->header_len = f->tab.header_len;
    info->version = f->tab.version;
    info->alignment = f->tab.alignment;
    info->n_tensors = f->tab.n;
    info->n_meta = f->tab.nmeta;
    info->big_endian = f->tab.big_endian;
    info->base = f->base;
}

size_t pagein_tensor_count(const pagein_file *f) { return f ? f->tab.n : 0; }

const pagein_tensor *pagein_tensor_at(const pagein_file *f, size_t i) {
    return f && i < f->tab.n ? &f->tab.t[i] : NULL;
}

const pagein_tensor *pagein_tensor_by_layer(const pagein_file *f, size_t i) {
    return f && i < f->tab.n ? &f->tab.t[f->tab.by_layer[i]] : NULL;
}

const pagein_tensor *pagein_tensor_find(const pagein_file *f, const char *name, size_t len) {
    return f ? pi_table_find(&f->tab, name, len) : NULL;
}

const pagein_tensor *pagein_tensor_get(const pagein_file *f, const char *name) {
    return f && name ? pi_table_find(&f->tab, name, strlen(name)) : NULL;
}

size_t pagein_meta_count(const pagein_file *f) { return f ? f->tab.nmeta : 0; }

const pagein_meta *pagein_meta_at(const pagein_file *f, size_t i) {
    return f && i < f->tab.nmeta ? &f->tab.meta[i] : NULL;
}

const pagein_meta *pagein_meta_find(const pagein_file *f, const char *key) {
    return f && key ? pi_table_find_meta(&f->tab, key, strlen(key)) : NULL;
}
