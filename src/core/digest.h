/* digest.h - sha256 and MD5 of a byte stream (core/digest.c), over
 * libcrypto found at run time: the first digest dlopen()s libcrypto (its
 * soname, "libcrypto.so.3"; PAGEIN_CRYPTO_LIBRARY names another file), so
 * that a process computing none never loads it. Used by pull's
 * verification and content naming. Built only with PAGEIN_HAVE_LIBCRYPTO
 * (mk/remote.mk); without it every call returns PAGEIN_E_UNSUPPORTED. */
#ifndef PAGEIN_CORE_DIGEST_H
#define PAGEIN_CORE_DIGEST_H

#include "../internal.h"

#define PI_DIGEST_HEX_CAP 65 /* sha256's 64 hex digits + NUL (MD5: 32) */

struct pi_digest;

/* A digest of algo ("sha256" or "md5") in *out. 0, or < 0 with a detail
 * naming name (a file, a URL) and, when libcrypto could not be loaded,
 * the library and dlerror()'s reason. */
int pi_digest_new(struct pi_digest **out, const char *algo, const char *name);
/* Adds n bytes (an error is kept for pi_digest_final). */
void pi_digest_update(struct pi_digest *d, const void *p, size_t n);
/* The digest in lower-case hex (hex: PI_DIGEST_HEX_CAP bytes). 0 or < 0. */
int pi_digest_final(struct pi_digest *d, char *hex);
void pi_digest_free(struct pi_digest *d);
/* One buffer at once: pi_digest_new, _update, _final. */
int pi_digest_buf(const char *algo, const void *p, size_t n, char *hex, const char *name);

#endif /* PAGEIN_CORE_DIGEST_H */
