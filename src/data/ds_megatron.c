/* ds_megatron.c - the Megatron-LM row: PREFIX.bin is the shard's source,
 * PREFIX.idx is read whole at open (through the source seam, so local or
 * remote alike) and validated as untrusted input by
 * pagein_megatron_validate, a buffer parser that does no I/O. Sample i is
 * sequence i: one field "tokens", an array of the index's dtype. */
#include "dsformat.h"
#include "../core/endian.h"

#include <inttypes.h>

/* ---- Megatron .idx ------------------------------------------------------
 * Layout (Megatron-LM megatron/core/datasets/indexed_dataset.py, little
 * endian): "MMIDIDX\0\0" (9 bytes), u64 version = 1, u8 dtype code, u64
 * sequence count S, u64 document count D, then int32 lengths[S], int64
 * pointers[S] (byte offsets into .bin), int64 document_indices[D], and, for
 * multimodal datasets only, int8 modes[S]. */
#define MEGA_MAGIC "MMIDIDX\0\0"
#define MEGA_HDR 34u


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
    uint64_t version = pi_le64(b + 9);
    RETURN_IF(version != 1, PAGEIN_E_BAD_VERSION, "megatron index: version %" PRIu64 ", expected 1", version);
    uint8_t code = b[17];
    uint32_t eb = mega_elem_bytes(code);
    RETURN_IF(!eb, PAGEIN_E_BAD_DTYPE, "megatron index: unknown dtype code %u", code);
    uint64_t S = pi_le64(b + 18), D = pi_le64(b + 26);
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
        int32_t l = (int32_t)pi_le32(lens + 4 * i);
        int64_t p = (int64_t)pi_le64(ptrs + 8 * i);
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
        int64_t v = (int64_t)pi_le64(docs + 8 * i);
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

struct mega {
    uint8_t *idx;
    size_t idx_len;
    uint64_t S;
    uint32_t eb;
    uint8_t type;
    struct pi_dscol col;
};

static void mega_dtype(uint8_t code, uint8_t *type) {
    switch (code) {
    case 1: case 8: *type = PI_DT_UINT; break;
    case 2: case 3: case 4: case 5: *type = PI_DT_INT; break;
    default: *type = PI_DT_FLOAT; break;
    }
}

/* PREFIX.idx for a shard named PREFIX.bin (or PREFIX). */
static char *idx_name(const char *uri) {
    size_t n = strlen(uri);
    if (n >= 4 && strcmp(uri + n - 4, ".bin") == 0) n -= 4;
    char *p = pi_malloc(n + 5);
    if (!p) return NULL;
    memcpy(p, uri, n);
    memcpy(p + n, ".idx", 5);
    return p;
}

static int mega_open(struct pi_dsshard *sh, const struct pi_dsopen *a) {
    static const char *const only[] = {"tokens"};
    FORWARD_IF(pi_ds_col_flat(sh, a, only, 1, NULL));
    struct mega *m = pi_calloc(1, sizeof *m);
    char *ip = idx_name(a->uri ? a->uri : sh->name);
    struct pi_source *is = NULL;
    int rc = 0;
    if (!m || !ip) {
        rc = pi_err(-ENOMEM, "%s: out of memory", sh->name);
        goto fail;
    }
    if ((rc = pi_source_open(&is, ip, 0)) < 0) goto fail;
    if (is->size > SIZE_MAX / 2 || is->size > (64ull << 30)) {
        rc = pi_err(PAGEIN_E_LIMIT, "%s: index of %" PRIu64 " bytes too large", ip, is->size);
        goto fail;
    }
    m->idx_len = (size_t)is->size;
    m->idx = pi_malloc(m->idx_len ? m->idx_len : 1);
    if (!m->idx) {
        rc = pi_err(-ENOMEM, "%s: out of memory for %zu bytes", ip, m->idx_len);
        goto fail;
    }
    if ((rc = pi_source_read(is, m->idx, m->idx_len, 0)) < 0) goto fail;
    pagein_megatron_info info;
    if ((rc = pagein_megatron_validate(m->idx, m->idx_len, sh->src->size, &info)) < 0) {
        pi_err_prefix(ip);
        goto fail;
    }
    m->S = info.sequences;
    m->eb = info.elem_bytes;
    mega_dtype(info.dtype_code, &m->type);
    m->col = (struct pi_dscol){.name = "tokens", .type = m->type, .width = (uint8_t)m->eb, .ndim = 1, .shape = {-1}};
    pi_source_close(is);
    pi_free(ip);
    pi_ds_shard_set(sh, m, &m->col, 1, m->S);
    return 0;
fail:
    pi_source_close(is);
    pi_free(ip);
    if (m) pi_free(m->idx);
    pi_free(m);
    return rc;
}

static void mega_close(struct pi_dsshard *sh) {
    struct mega *m = sh->impl;
    pi_free(m->idx);
    pi_free(m);
}

static int mega_locate(const struct pi_dsshard *sh, uint64_t i, uint64_t *off, uint64_t *len) {
    const struct mega *m = sh->impl;
    const uint8_t *lens = m->idx + MEGA_HDR, *ptrs = lens + 4 * m->S;
    *off = pi_le64(ptrs + 8 * i);
    *len = (uint64_t)pi_le32(lens + 4 * i) * m->eb;
    return 0;
}

static int mega_sample(const struct pi_dsshard *sh, uint64_t i, const uint8_t *p, uint64_t len, struct pi_dsfield *f,
                       size_t cap) {
    const struct mega *m = sh->impl;
    (void)i;
    if (cap >= 1)
        f[0] = (struct pi_dsfield){.name = "tokens", .type = m->type, .width = (uint8_t)m->eb, .ndim = 1,
                                   .shape = {len / m->eb}, .data = p, .nbytes = len};
    return 1;
}

static int mega_detect(const char *name, const uint8_t *h, size_t nh, const uint8_t *t, size_t nt, uint64_t size) {
    (void)t, (void)nt, (void)size;
    if (nh >= 9 && memcmp(h, MEGA_MAGIC, 9) == 0) return 2; /* the .idx */
    size_t n = name ? strlen(name) : 0;
    return n >= 4 && (strcmp(name + n - 4, ".idx") == 0) ? 1 : 0;
}

static const char *const mega_suffixes[] = {".idx", NULL};

/* PREFIX.idx names the dataset; PREFIX and PREFIX.bin name it when
 * PREFIX.idx is beside them. The shard is PREFIX.bin (open() reads the
 * .idx beside it). */
static int mega_companion(const char *name, int (*exists)(const char *uri), char **shard) {
    size_t n = strlen(name);
    int idx = pi_ends_with(name, ".idx"), bin = pi_ends_with(name, ".bin");
    size_t pl = n - (idx || bin ? 4 : 0);
    char *s = pi_malloc(pl + 5);
    if (!s) return pi_err(-ENOMEM, "%s: out of memory", name);
    memcpy(s, name, pl);
    memcpy(s + pl, ".idx", 5);
    int claim = idx ? 2 : exists && exists(s) ? 1 : 0;
    memcpy(s + pl, ".bin", 5);
    *shard = s;
    return claim;
}

const struct pi_dsformat pi_dsformat_megatron = {
    .name = "megatron",
    .suffixes = mega_suffixes,
    .companion = mega_companion,
    .head_bytes = 9,
    .detect = mega_detect,
    .open = mega_open,
    .close = mega_close,
    .locate = mega_locate,
    .sample = mega_sample,
};
