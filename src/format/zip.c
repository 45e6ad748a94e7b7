/* zip.c - the zip container torch.save writes: end of central directory
 * (zip64 included), central directory, local headers. Buffer in, no I/O.
 *
 * The central directory is authoritative for sizes and names (local headers
 * of streamed entries may carry zeros); each local header is still checked
 * for its signature and name so that the data offset we derive from its
 * name and extra lengths is the one a conforming reader derives. CRCs are
 * not verified: that would read every byte, and zero-copy is the point. */
#include "torch_internal.h"
#include "../core/endian.h"

#include <stdlib.h>


#define EOCD_LEN 22
#define Z64_LOC_LEN 20
#define Z64_EOCD_LEN 56
#define CDH_LEN 46
#define LFH_LEN 30

static int name_cmp(const void *a, const void *b) {
    const struct pi_zip_entry *x = a, *y = b;
    size_t n = PI_MIN(x->name_len, y->name_len);
    int c = memcmp(x->name, y->name, n);
    if (c) return c;
    return x->name_len < y->name_len ? -1 : x->name_len > y->name_len;
}

void pi_zip_free(struct pi_zip *z) {
    if (!z) return;
    pi_free(z->e);
    memset(z, 0, sizeof *z);
}

const struct pi_zip_entry *pi_zip_find(const struct pi_zip *z, const char *name, size_t len) {
    struct pi_zip_entry key = {.name = name, .name_len = (uint32_t)len};
    if (len > UINT32_MAX) return NULL;
    return bsearch(&key, z->e, z->n, sizeof *z->e, name_cmp);
}

/* Finds the end-of-central-directory record: the last "PK\5\6" whose
 * comment length reaches exactly the end of the file, searching back at
 * most 64 KiB (the largest comment). */
static int find_eocd(const uint8_t *buf, size_t len, size_t *pos) {
    RETURN_IF(len < EOCD_LEN, PAGEIN_E_TRUNCATED, "zip: %zu bytes, too short for an end-of-central-directory record", len);
    size_t lo = len > EOCD_LEN + 0xFFFF ? len - EOCD_LEN - 0xFFFF : 0;
    for (size_t p = len - EOCD_LEN + 1; p-- > lo;) {
        if (memcmp(buf + p, "PK\x05\x06", 4) != 0) continue;
        if (p + EOCD_LEN + pi_le16(buf + p + 20) != len) continue;
        *pos = p;
        return 0;
    }
    return pi_err(PAGEIN_E_TRUNCATED,
                  "zip: no end-of-central-directory record in the last 64 KiB "
                  "(file truncated, or not a zip archive)");
}

/* Reads the zip64 extended-information extra field of a central header:
 * only the fields whose 32-bit header value is all ones are present, in
 * the order usize, csize, local header offset. */
static int zip64_extra(const uint8_t *x, size_t xlen, uint64_t *usize, uint64_t *csize, uint64_t *lho,
                       bool need_u, bool need_c, bool need_o) {
    size_t p = 0;
    while (p + 4 <= xlen) {
        uint16_t id = pi_le16(x + p), n = pi_le16(x + p + 2);
        RETURN_IF(p + 4 + n > xlen, PAGEIN_E_BAD_ZIP, "zip: extra field runs past its header");
        if (id == 0x0001) {
            size_t q = p + 4, end = p + 4 + n;
            if (need_u) {
                RETURN_IF(q + 8 > end, PAGEIN_E_BAD_ZIP, "zip: zip64 extra field lacks the size");
                *usize = pi_le64(x + q), q += 8;
            }
            if (need_c) {
                RETURN_IF(q + 8 > end, PAGEIN_E_BAD_ZIP, "zip: zip64 extra field lacks the compressed size");
                *csize = pi_le64(x + q), q += 8;
            }
            if (need_o) {
                RETURN_IF(q + 8 > end, PAGEIN_E_BAD_ZIP, "zip: zip64 extra field lacks the header offset");
                *lho = pi_le64(x + q);
            }
            return 0;
        }
        p += 4 + (size_t)n;
    }
    if (need_u || need_c || need_o) return pi_err(PAGEIN_E_BAD_ZIP, "zip: 0xFFFFFFFF size or offset without a zip64 extra field");
    return 0;
}

int pi_zip_parse(const uint8_t *buf, size_t len, struct pi_zip *z) {
    memset(z, 0, sizeof *z);
    size_t eo = 0;
    FORWARD_IF(find_eocd(buf, len, &eo));
    const uint8_t *e = buf + eo;
    RETURN_IF(pi_le16(e + 4) != 0 || pi_le16(e + 6) != 0, PAGEIN_E_UNSUPPORTED, "zip: multi-disk archives are not supported");
    uint64_t count = pi_le16(e + 10), cd_size = pi_le32(e + 12), cd_off = pi_le32(e + 16);
    /* zip64: a locator right before the EOCD points at the zip64 EOCD. torch
     * writes one always; plain zips need it only when a field overflows. */
    if (eo >= Z64_LOC_LEN && memcmp(buf + eo - Z64_LOC_LEN, "PK\x06\x07", 4) == 0) {
        const uint8_t *l = buf + eo - Z64_LOC_LEN;
        uint64_t zo = pi_le64(l + 8);
        RETURN_IF(zo > eo - Z64_LOC_LEN || eo - Z64_LOC_LEN - zo < Z64_EOCD_LEN, PAGEIN_E_BAD_ZIP,
                  "zip: zip64 end-of-central-directory offset %llu out of range", (unsigned long long)zo);
        const uint8_t *r = buf + zo;
        RETURN_IF(memcmp(r, "PK\x06\x06", 4) != 0, PAGEIN_E_BAD_ZIP,
                  "zip: no zip64 end-of-central-directory record at offset %llu", (unsigned long long)zo);
        count = pi_le64(r + 32);
        cd_size = pi_le64(r + 40);
        cd_off = pi_le64(r + 48);
        z->zip64 = 1;
    } else {
        RETURN_IF(count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu, PAGEIN_E_BAD_ZIP,
                  "zip: end-of-central-directory fields say zip64 but there is no zip64 locator");
    }
    uint64_t cd_end;
    RETURN_IF(pi_add_overflow(cd_off, cd_size, &cd_end) || cd_end > eo, PAGEIN_E_TRUNCATED,
              "zip: central directory [%llu, +%llu) runs past its end record at %zu",
              (unsigned long long)cd_off, (unsigned long long)cd_size, eo);
    RETURN_IF(count > cd_size / CDH_LEN, PAGEIN_E_BAD_ZIP, "zip: %llu entries cannot fit in a %llu-byte central directory",
              (unsigned long long)count, (unsigned long long)cd_size);
    z->cd_offset = cd_off;
    z->e = pi_calloc(count ? (size_t)count : 1, sizeof *z->e);
    if (!z->e) return pi_err(-ENOMEM, "zip: out of memory for %llu entries", (unsigned long long)count);
    uint64_t p = cd_off;
    int rc = 0;
    for (uint64_t i = 0; i < count; i++) {
        if (cd_end - p < CDH_LEN || memcmp(buf + p, "PK\x01\x02", 4) != 0) {
            rc = pi_err(PAGEIN_E_BAD_ZIP, "zip: central directory entry %llu at offset %llu is malformed",
                        (unsigned long long)i, (unsigned long long)p);
            goto fail;
        }
        const uint8_t *h = buf + p;
        struct pi_zip_entry *en = &z->e[i];
        en->flags = pi_le16(h + 8);
        en->method = pi_le16(h + 10);
        en->crc = pi_le32(h + 16);
        uint64_t csize = pi_le32(h + 20), usize = pi_le32(h + 24), lho = pi_le32(h + 42);
        uint32_t nlen = pi_le16(h + 28), xlen = pi_le16(h + 30), clen = pi_le16(h + 32);
        if (cd_end - p - CDH_LEN < (uint64_t)nlen + xlen + clen) {
            rc = pi_err(PAGEIN_E_BAD_ZIP, "zip: central directory entry %llu runs past the directory", (unsigned long long)i);
            goto fail;
        }
        en->name = (const char *)h + CDH_LEN;
        en->name_len = nlen;
        rc = zip64_extra(h + CDH_LEN + nlen, xlen, &usize, &csize, &lho, usize == 0xFFFFFFFFu,
                         csize == 0xFFFFFFFFu, lho == 0xFFFFFFFFu);
        if (rc < 0) {
            pi_err_prefix("zip");
            goto fail;
        }
        /* the local header, then the data */
        if (lho > cd_off || cd_off - lho < LFH_LEN || memcmp(buf + lho, "PK\x03\x04", 4) != 0) {
            rc = pi_err(PAGEIN_E_BAD_ZIP, "zip: entry '%.*s': no local header at offset %llu", (int)PI_MIN(nlen, 200),
                        en->name, (unsigned long long)lho);
            goto fail;
        }
        const uint8_t *l = buf + lho;
        uint64_t data = lho + LFH_LEN + pi_le16(l + 26) + (uint64_t)pi_le16(l + 28);
        if (pi_le16(l + 26) != nlen || data > cd_off || memcmp(l + LFH_LEN, en->name, nlen) != 0) {
            rc = pi_err(PAGEIN_E_BAD_ZIP, "zip: entry '%.*s': local header at %llu disagrees with the central directory",
                        (int)PI_MIN(nlen, 200), en->name, (unsigned long long)lho);
            goto fail;
        }
        if (csize > cd_off - data) {
            rc = pi_err(PAGEIN_E_TRUNCATED, "zip: entry '%.*s': %llu bytes at offset %llu run past the data area (%llu)",
                        (int)PI_MIN(nlen, 200), en->name, (unsigned long long)csize, (unsigned long long)data,
                        (unsigned long long)cd_off);
            goto fail;
        }
        en->offset = data;
        en->size = usize;
        en->csize = csize;
        p += CDH_LEN + (uint64_t)nlen + xlen + clen;
    }
    z->n = (size_t)count;
    if (z->n) qsort(z->e, z->n, sizeof *z->e, name_cmp);
    for (size_t i = 1; i < z->n; i++)
        if (name_cmp(&z->e[i - 1], &z->e[i]) == 0) {
            rc = pi_err(PAGEIN_E_DUPLICATE, "zip: entry '%.*s' appears twice", (int)PI_MIN(z->e[i].name_len, 200u),
                        z->e[i].name);
            goto fail;
        }
    return 0;
fail:
    pi_zip_free(z);
    return rc;
}
