/* safety.c - public guarded accessors: copy-out, change detection. */
#include "file.h"
#include "../io/io.h"
#include "../source/source.h"
#include "../format/torch_internal.h"

#include <stdio.h>
#include <sys/stat.h>

int pagein_tensor_copy(const pagein_file *f, const pagein_tensor *t, uint64_t off, void *dst, size_t len) {
    pi_err_clear();
    if (!t || (!dst && len)) return pi_err(PAGEIN_E_INVALID, "pagein_tensor_copy: NULL argument");
    /* a model whose tensor memory is filled by reads (prefetch over a
     * remote source): the bytes are read first, never copied unread */
    if (f && f->ensure && len) {
        int erc = f->ensure(f->ensure_ctx, t);
        if (erc < 0) return erc;
    }
    /* strided views and big-endian records: gathered and swapped into
     * row-major native order (format/torch.c) */
    const pagein_dtype_info *di = pagein_dtype_get(t->dtype);
    int blocks = di && di->block_elems > 1; /* block-quantized: no big-endian layout exists to swap */
    if ((t->flags & PAGEIN_TENSOR_NONCONTIGUOUS) || ((t->flags & PAGEIN_TENSOR_SWAPPED) && !blocks))
        return pi_tensor_gather(f, t, dst, off, len);
    if (off > t->nbytes || len > t->nbytes - off)
        return pi_err(PAGEIN_E_RANGE, "tensor '%.*s': bytes [%llu, +%zu) outside its %llu bytes",
                      (int)PI_MIN(t->name_len, 200), t->name, (unsigned long long)off, len,
                      (unsigned long long)t->nbytes);
    if (len == 0) return 0;
    if (!t->data && f && f->src && !f->mapped) { /* unmapped source (remote): read through it */
        int rc = pi_source_read(f->src, dst, len, t->offset + off);
        if (rc < 0) {
            char what[256];
            snprintf(what, sizeof what, "tensor '%.*s'", (int)PI_MIN(t->name_len, 200), t->name);
            pi_err_prefix(what);
        }
        return rc;
    }
    if (!t->data) return pi_err(PAGEIN_E_INVALID, "tensor '%s' has no data pointer", t->name);
    const uint8_t *src = (const uint8_t *)t->data + off;
    if (f && !f->mapped) { /* caller's memory (open_memory): nothing can shrink */
        memcpy(dst, src, len);
        return 0;
    }
    int rc = pi_guard_copy(dst, src, len, f ? f->path : "(unknown file)", t->offset + off, f ? f->fd : -1);
    if (rc < 0) {
        char what[256];
        snprintf(what, sizeof what, "tensor '%.*s'", (int)PI_MIN(t->name_len, 200), t->name);
        pi_err_prefix(what);
    }
    return rc;
}

int pagein_file_check(const pagein_file *f) {
    pi_err_clear();
    if (!f) return pi_err(PAGEIN_E_INVALID, "pagein_file_check: NULL file");
    if (f->fd < 0) return 0;
    struct stat st;
    if (fstat(f->fd, &st) != 0) return pi_err(-errno, "%s: fstat: %s", f->path, strerror(errno));
    if ((uint64_t)st.st_size < (uint64_t)f->len)
        return pi_err(PAGEIN_E_TRUNCATED, "%s: file shrank from %zu to %llu bytes since open", f->path,
                      f->len, (unsigned long long)st.st_size);
    if (stat(f->path, &st) != 0) {
        if (errno == ENOENT) return pi_err(PAGEIN_E_CHANGED, "%s: file removed since open", f->path);
        return pi_err(-errno, "%s: stat: %s", f->path, strerror(errno));
    }
    if (st.st_ino != f->ino || st.st_dev != f->dev)
        return pi_err(PAGEIN_E_CHANGED, "%s: path names another file since open (inode %llu, was %llu)",
                      f->path, (unsigned long long)st.st_ino, (unsigned long long)f->ino);
    return 0;
}
