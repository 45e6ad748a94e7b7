/* parquet_codec.c - Parquet page decompression through Debian's codec
 * libraries (Compression.md). Every codec writes into exactly the page's
 * declared uncompressed size and no further: the libraries are given that
 * buffer size and a page that would inflate past it is malformed. A codec
 * whose library was not found at build time (mk/parquet.mk) is
 * PAGEIN_E_UNSUPPORTED. */
#include "parquet.h"

#include <string.h>

#ifdef PAGEIN_HAVE_SNAPPY
#include <snappy-c.h>
#endif
#ifdef PAGEIN_HAVE_ZLIB
#include <zlib.h>
#endif
#ifdef PAGEIN_HAVE_ZSTD
#include <zstd.h>
#endif
#ifdef PAGEIN_HAVE_LZ4
#include <lz4.h>
#endif
#ifdef PAGEIN_HAVE_BROTLI
#include <brotli/decode.h>
#endif

#define BADSIZE(name, got, want)                                                                           \
    pi_err(PI_PQ_EFORMAT, "%s data decompresses to %zu bytes, the page header says %zu", name, (size_t)(got), \
           (size_t)(want))

#ifdef PAGEIN_HAVE_LZ4
static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Hadoop's framing (the deprecated LZ4 codec): blocks of [4-byte BE
 * uncompressed size][4-byte BE compressed size][LZ4 block]. */
static int lz4_hadoop(const uint8_t *src, size_t n, uint8_t *dst, size_t dst_len) {
    size_t out = 0;
    while (n) {
        if (n < 8) return -1;
        uint32_t ul = be32(src), cl = be32(src + 4);
        src += 8;
        n -= 8;
        if (cl > n || ul > dst_len - out || cl > (uint32_t)INT32_MAX || ul > (uint32_t)INT32_MAX) return -1;
        int r = LZ4_decompress_safe((const char *)src, (char *)dst + out, (int)cl, (int)ul);
        if (r < 0 || (uint32_t)r != ul) return -1;
        out += ul;
        src += cl;
        n -= cl;
    }
    return out == dst_len ? 0 : -1;
}
#endif

int pi_pq_decompress(int codec, const uint8_t *src, size_t n, uint8_t *dst, size_t dst_len) {
    switch (codec) {
    case PI_PQ_UNCOMPRESSED:
        if (n != dst_len) return BADSIZE("uncompressed", n, dst_len);
        memcpy(dst, src, n);
        return 0;
#ifdef PAGEIN_HAVE_SNAPPY
    case PI_PQ_SNAPPY: {
        size_t ul;
        if (snappy_uncompressed_length((const char *)src, n, &ul) != SNAPPY_OK)
            return pi_err(PI_PQ_EFORMAT, "SNAPPY data has no valid length header");
        if (ul != dst_len) return BADSIZE("SNAPPY", ul, dst_len);
        size_t got = dst_len;
        if (snappy_uncompress((const char *)src, n, (char *)dst, &got) != SNAPPY_OK)
            return pi_err(PI_PQ_EFORMAT, "SNAPPY data is corrupt");
        if (got != dst_len) return BADSIZE("SNAPPY", got, dst_len);
        return 0;
    }
#endif
#ifdef PAGEIN_HAVE_ZLIB
    case PI_PQ_GZIP: {
        if (n > UINT32_MAX || dst_len > UINT32_MAX) return pi_err(PAGEIN_E_LIMIT, "GZIP page larger than 4 GiB");
        z_stream z;
        memset(&z, 0, sizeof z);
        if (inflateInit2(&z, 15 + 32) != Z_OK) return pi_err(-ENOMEM, "GZIP: inflateInit2 failed");
        z.next_in = (Bytef *)src;
        z.avail_in = (uInt)n;
        z.next_out = dst;
        z.avail_out = (uInt)dst_len;
        int rc = 0;
        for (;;) {
            int zr = inflate(&z, Z_FINISH);
            if (zr == Z_STREAM_END) {
                /* several gzip members may follow one another (Compression.md) */
                if (z.avail_in == 0) break;
                if (inflateReset(&z) != Z_OK) {
                    rc = pi_err(PI_PQ_EFORMAT, "GZIP: cannot start the next member");
                    break;
                }
                continue;
            }
            if (zr == Z_OK) continue; /* progress was made */
            if (zr == Z_BUF_ERROR && z.avail_out == 0)
                rc = pi_err(PI_PQ_EFORMAT, "GZIP data inflates past the page's %zu bytes", dst_len);
            else
                rc = pi_err(PI_PQ_EFORMAT, "GZIP data is corrupt or truncated (zlib %d%s%s)", zr, z.msg ? ": " : "",
                            z.msg ? z.msg : "");
            break;
        }
        size_t got = dst_len - z.avail_out;
        inflateEnd(&z);
        if (rc) return rc;
        if (got != dst_len) return BADSIZE("GZIP", got, dst_len);
        return 0;
    }
#endif
#ifdef PAGEIN_HAVE_ZSTD
    case PI_PQ_ZSTD: {
        size_t r = ZSTD_decompress(dst, dst_len, src, n);
        if (ZSTD_isError(r)) return pi_err(PI_PQ_EFORMAT, "ZSTD data is corrupt or too large: %s", ZSTD_getErrorName(r));
        if (r != dst_len) return BADSIZE("ZSTD", r, dst_len);
        return 0;
    }
#endif
#ifdef PAGEIN_HAVE_LZ4
    case PI_PQ_LZ4_RAW:
    case PI_PQ_LZ4: {
        if (n > (size_t)INT32_MAX || dst_len > (size_t)INT32_MAX)
            return pi_err(PAGEIN_E_LIMIT, "LZ4 page larger than 2 GiB");
        if (codec == PI_PQ_LZ4 && lz4_hadoop(src, n, dst, dst_len) == 0) return 0;
        /* LZ4_RAW, and the raw block some writers used for LZ4 */
        int r = LZ4_decompress_safe((const char *)src, (char *)dst, (int)n, (int)dst_len);
        if (r < 0) return pi_err(PI_PQ_EFORMAT, "%s data is corrupt or too large", pi_pq_codec_name(codec));
        if ((size_t)r != dst_len) return BADSIZE(pi_pq_codec_name(codec), r, dst_len);
        return 0;
    }
#endif
#ifdef PAGEIN_HAVE_BROTLI
    case PI_PQ_BROTLI: {
        size_t got = dst_len;
        if (BrotliDecoderDecompress(n, src, &got, dst) != BROTLI_DECODER_RESULT_SUCCESS)
            return pi_err(PI_PQ_EFORMAT, "BROTLI data is corrupt or inflates past %zu bytes", dst_len);
        if (got != dst_len) return BADSIZE("BROTLI", got, dst_len);
        return 0;
    }
#endif
    default:
        return pi_err(PAGEIN_E_UNSUPPORTED, "codec %s is not supported%s", pi_pq_codec_name(codec),
                      codec >= 0 && codec <= 7 && codec != PI_PQ_LZO ? " (library not found at build time)" : "");
    }
}
