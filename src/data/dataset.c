/* dataset.c - where each training sample lives: fixed-size records over
 * shard files, or a Megatron-LM indexed dataset (.idx validated as untrusted
 * input by a buffer parser that does no I/O). */
#include "data.h"

#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- Megatron .idx ------------------------------------------------------
 * Layout (Megatron-LM megatron/core/datasets/indexed_dataset.py, little
 * endian): "MMIDIDX\0\0" (9 bytes), u64 version = 1, u8 dtype code, u64
 * sequence count S, u64 document count D, then int32 lengths[S], int64
 * pointers[S] (byte offsets into .bin), int64 document_indices[D], and, for
 * multimodal datasets only, int8 modes[S]. */
#define MEGA_MAGIC "MMIDIDX\0\0"
#define MEGA_HDR 34u

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static uint32_t mega_elem_bytes(uint8_t code) {
    switch (code) {
    case 1: case 2: return 1;  /* uint8, int8 */
    case 3: case 8: return 2;  /* int16, uint16 */
    case 4: case 7: return 4;  /* int32, float32 */
    case 5: case 6: return 8;  /* int64, float64 */
    default: return 0;
    }
}

int pagein_megatron_validate(const void *idxv, size_t len, uint64_t bin_size, pagein_megatron_info *info) {
    const uint8_t *b = idxv;
    RETURN_IF(!b && len, PAGEIN_E_INVALID, "megatron index: NULL buffer");
    RETURN_IF(len < 9, PAGEIN_E_TRUNCATED, "megatron index: %zu bytes, shorter than the 9-byte magic", len);
    RETURN_IF(memcmp(b, MEGA_MAGIC, 9) != 0, PAGEIN_E_BAD_MAGIC, "megatron index: magic is not MMIDIDX\\0\\0");
    RETURN_IF(len < MEGA_HDR, PAGEIN_E_TRUNCATED, "megatron index: %zu bytes, header needs %u", len, MEGA_HDR);
    uint64_t version = le64(b + 9);
    RETURN_IF(version != 1, PAGEIN_E_BAD_VERSION, "megatron index: version %" PRIu64 ", expected 1", version);
    uint8_t code = b[17];
    uint32_t eb = mega_elem_bytes(code);
    RETURN_IF(!eb, PAGEIN_E_BAD_DTYPE, "megatron index: unknown dtype code %u", code);
    uint64_t S = le64(b + 18), D = le64(b + 26);
    /* expected = 34 + 12 S + 8 D, computed without overflow */
    uint64_t t1, t2, need;
    RETURN_IF(pi_mul_overflow(S, 12, &t1) || pi_mul_overflow(D, 8, &t2) || pi_add_overflow(t1, t2, &need) ||
                  pi_add_overflow(need, MEGA_HDR, &need),
              PAGEIN_E_OVERFLOW, "megatron index: counts %" PRIu64 " sequences, %" PRIu64 " documents overflow", S, D);
    RETURN_IF((uint64_t)len < need, PAGEIN_E_TRUNCATED,
              "megatron index: %zu bytes, but %" PRIu64 " sequences and %" PRIu64 " documents need %" PRIu64, len, S, D,
              need);
    int multimodal = 0;
    if ((uint64_t)len != need) {
        RETURN_IF((uint64_t)len - need != S, PAGEIN_E_BAD_DATASET,
                  "megatron index: %zu bytes, but %" PRIu64 " sequences and %" PRIu64
                  " documents need %" PRIu64 " (or %" PRIu64 " with mode bytes)",
                  len, S, D, need, need + S);
        multimodal = 1;
    }
    RETURN_IF(D < 1, PAGEIN_E_BAD_DATASET, "megatron index: empty document index (needs at least the leading 0)");
    const uint8_t *lens = b + MEGA_HDR, *ptrs = lens + 4 * S, *docs = ptrs + 8 * S;
    uint64_t tokens = 0;
    for (uint64_t i = 0; i < S; i++) {
        int32_t l = (int32_t)le32(lens + 4 * i);
        int64_t p = (int64_t)le64(ptrs + 8 * i);
        RETURN_IF(l < 0, PAGEIN_E_BAD_DATASET, "megatron index: sequence %" PRIu64 " has negative length %d", i, l);
        RETURN_IF(p < 0, PAGEIN_E_BAD_DATASET, "megatron index: sequence %" PRIu64 " has negative pointer %" PRId64, i,
                  p);
        uint64_t nb = (uint64_t)l * eb, end;
        RETURN_IF(pi_add_overflow((uint64_t)p, nb, &end), PAGEIN_E_OVERFLOW,
                  "megatron index: sequence %" PRIu64 " pointer %" PRId64 " + %" PRIu64 " bytes overflows", i, p, nb);
        RETURN_IF(end > bin_size, PAGEIN_E_RANGE,
                  "megatron index: sequence %" PRIu64 " [%" PRId64 ", %" PRIu64 ") ends past the end of .bin (%" PRIu64
                  " bytes)",
                  i, p, end, bin_size);
        tokens += (uint64_t)l; /* S < 2^60 and l < 2^31: cannot overflow */
    }
    uint64_t prev = 0;
    for (uint64_t i = 0; i < D; i++) {
        int64_t v = (int64_t)le64(docs + 8 * i);
        RETURN_IF(i == 0 && v != 0, PAGEIN_E_BAD_DATASET, "megatron index: document index starts at %" PRId64 ", not 0",
                  v);
        RETURN_IF(v < 0 || (uint64_t)v < prev || (uint64_t)v > S, PAGEIN_E_BAD_DATASET,
                  "megatron index: document index entry %" PRIu64 " = %" PRId64 " (previous %" PRIu64
                  ", %" PRIu64 " sequences)",
                  i, v, prev, S);
        prev = (uint64_t)v;
    }
    RETURN_IF(prev != S, PAGEIN_E_BAD_DATASET,
              "megatron index: document index ends at %" PRIu64 ", not at the sequence count %" PRIu64, prev, S);
    if (info) {
        info->dtype_code = code;
        info->elem_bytes = eb;
        info->sequences = S;
        info->documents = D;
        info->tokens = tokens;
        info->multimodal = multimodal;
    }
    return 0;
}

/* ---- open / close ------------------------------------------------------- */

static int ds_add_file(pagein_dataset *d, const char *path) {
    struct pi_ds_file *f = &d->files[d->nfiles];
    f->fd = -1;
    f->path = pi_strndup(path, strlen(path));
    if (!f->path) return pi_err(-ENOMEM, "%s: out of memory", path);
    d->nfiles++;
    struct stat st;
    int rc = pi_open_regular(path, &f->fd, &st);
    FORWARD_IF(rc == -EINVAL ? PAGEIN_E_INVALID : rc); /* not a regular file */
    f->size = (uint64_t)st.st_size;
    return 0;
}

void pagein_dataset_close(pagein_dataset *d) {
    if (!d) return;
    for (size_t i = 0; i < d->nfiles; i++) {
        if (d->files[i].fd >= 0) close(d->files[i].fd);
        pi_free(d->files[i].path);
    }
    pi_free(d->files);
    pi_free(d->idx);
    pi_free(d);
}

int pagein_dataset_open_records(pagein_dataset **out, const char *const *paths, size_t npaths,
                                uint64_t record_bytes) {
    pi_err_clear();
    RETURN_IF(!out || (!paths && npaths), PAGEIN_E_INVALID, "dataset: NULL argument");
    RETURN_IF(npaths == 0, PAGEIN_E_INVALID, "dataset: no files");
    RETURN_IF(record_bytes == 0, PAGEIN_E_INVALID, "dataset: record size 0");
    RETURN_IF(npaths > UINT32_MAX, PAGEIN_E_LIMIT, "dataset: %zu files", npaths);
    pagein_dataset *d = pi_calloc(1, sizeof *d);
    if (!d) return pi_err(-ENOMEM, "dataset: out of memory");
    d->kind = PI_DS_RECORDS;
    d->record_bytes = record_bytes;
    int rc = 0;
    d->files = pi_calloc(npaths, sizeof *d->files);
    if (!d->files) {
        rc = pi_err(-ENOMEM, "dataset: out of memory");
        goto fail;
    }
    for (size_t i = 0; i < npaths; i++) {
        if (!paths[i]) {
            rc = pi_err(PAGEIN_E_INVALID, "dataset: path %zu is NULL", i);
            goto fail;
        }
        if ((rc = ds_add_file(d, paths[i])) < 0) goto fail;
        struct pi_ds_file *f = &d->files[i];
        if (f->size % record_bytes) {
            rc = pi_err(PAGEIN_E_BAD_DATASET, "%s: %" PRIu64 " bytes is not a whole number of %" PRIu64 "-byte records",
                        f->path, f->size, record_bytes);
            goto fail;
        }
        f->first = d->nsamples;
        f->count = f->size / record_bytes;
        d->nsamples += f->count;
    }
    *out = d;
    return 0;
fail:
    pagein_dataset_close(d);
    return rc;
}

int pagein_dataset_open_megatron(pagein_dataset **out, const char *prefix) {
    pi_err_clear();
    RETURN_IF(!out || !prefix, PAGEIN_E_INVALID, "dataset: NULL argument");
    size_t pl = strlen(prefix);
    char *p = pi_malloc(pl + 5);
    if (!p) return pi_err(-ENOMEM, "dataset: out of memory");
    int rc = 0, ifd = -1;
    pagein_dataset *d = pi_calloc(1, sizeof *d);
    if (!d || !(d->files = pi_calloc(1, sizeof *d->files))) {
        rc = pi_err(-ENOMEM, "dataset: out of memory");
        goto done;
    }
    d->kind = PI_DS_MEGATRON;
    memcpy(p, prefix, pl);
    memcpy(p + pl, ".bin", 5);
    if ((rc = ds_add_file(d, p)) < 0) goto done;
    memcpy(p + pl, ".idx", 5);
    struct stat st;
    if ((rc = pi_open_regular(p, &ifd, &st)) < 0) goto done;
    if ((uint64_t)st.st_size > SIZE_MAX / 2) {
        rc = pi_err(PAGEIN_E_LIMIT, "%s: index too large", p);
        goto done;
    }
    d->idx_len = (size_t)st.st_size;
    d->idx = pi_malloc(d->idx_len);
    if (!d->idx) {
        rc = pi_err(-ENOMEM, "%s: out of memory for %zu bytes", p, d->idx_len);
        goto done;
    }
    if ((rc = pi_pread_full(ifd, d->idx, d->idx_len, 0)) < 0) {
        pi_err_prefix(p);
        goto done;
    }
    pagein_megatron_info info;
    if ((rc = pagein_megatron_validate(d->idx, d->idx_len, d->files[0].size, &info)) < 0) {
        pi_err_prefix(p);
        goto done;
    }
    d->nsamples = info.sequences;
    d->elem_bytes = info.elem_bytes;
    d->files[0].count = info.sequences;
done:
    if (ifd >= 0) close(ifd);
    pi_free(p);
    if (rc < 0)
        pagein_dataset_close(d);
    else
        *out = d;
    return rc;
}

/* ---- accessors ---------------------------------------------------------- */

uint64_t pagein_dataset_count(const pagein_dataset *d) { return d ? d->nsamples : 0; }
size_t pagein_dataset_file_count(const pagein_dataset *d) { return d ? d->nfiles : 0; }
const char *pagein_dataset_path(const pagein_dataset *d, size_t i) { return d && i < d->nfiles ? d->files[i].path : NULL; }
int pagein_dataset_fd(const pagein_dataset *d, size_t i) { return d && i < d->nfiles ? d->files[i].fd : -1; }
uint64_t pagein_dataset_file_size(const pagein_dataset *d, size_t i) { return d && i < d->nfiles ? d->files[i].size : 0; }

int pagein_dataset_locate(const pagein_dataset *d, uint64_t id, pagein_sample_loc *loc) {
    RETURN_IF(!d || !loc, PAGEIN_E_INVALID, "dataset: NULL argument");
    RETURN_IF(id >= d->nsamples, PAGEIN_E_RANGE, "dataset: sample %" PRIu64 " of %" PRIu64, id, d->nsamples);
    if (d->kind == PI_DS_MEGATRON) {
        uint64_t S = d->nsamples;
        const uint8_t *lens = d->idx + MEGA_HDR, *ptrs = lens + 4 * S;
        loc->file = 0;
        loc->offset = le64(ptrs + 8 * id);
        loc->length = (uint64_t)le32(lens + 4 * id) * d->elem_bytes;
        return 0;
    }
    /* binary search for the file holding record id (empty files skipped) */
    size_t lo = 0, hi = d->nfiles;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->files[mid].first <= id)
            lo = mid;
        else
            hi = mid;
    }
    while (d->files[lo].count == 0 || id >= d->files[lo].first + d->files[lo].count) lo++;
    loc->file = (uint32_t)lo;
    loc->offset = (id - d->files[lo].first) * d->record_bytes;
    loc->length = d->record_bytes;
    return 0;
}
