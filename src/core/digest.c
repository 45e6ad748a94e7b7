/*
 * digest.c - sha256 and MD5 over libcrypto found at run time (digest.h).
 *
 * libpagein has no link-time dependency on libcrypto: the first digest
 * dlopen()s its soname with RTLD_LOCAL and looks up the seven EVP entry
 * points used here. The table is filled once (core/lazy.h) and never
 * unloaded (OpenSSL keeps global state and registers its own exit
 * handler; dlclose of it is unsafe). A failed load leaves nothing behind:
 * the digest fails naming the library and dlerror()'s reason, and a later
 * digest tries again.
 */
#include "digest.h"
#include "lazy.h"

#ifndef PAGEIN_HAVE_LIBCRYPTO

int pi_digest_new(struct pi_digest **out, const char *algo, const char *name) {
    *out = NULL;
    return pi_err(PAGEIN_E_UNSUPPORTED, "%s: pagein was built without libcrypto (libssl-dev): no %s", name, algo);
}
void pi_digest_update(struct pi_digest *d, const void *p, size_t n) {}
int pi_digest_final(struct pi_digest *d, char *hex) {
    hex[0] = 0;
    return pi_err(PAGEIN_E_UNSUPPORTED, "pagein was built without libcrypto (libssl-dev)");
}
void pi_digest_free(struct pi_digest *d) {}

#else

#include <openssl/evp.h> /* the types only: every call goes through the table */
#include <openssl/opensslv.h>

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PI_STR2(x) #x
#define PI_STR(x) PI_STR2(x)
#if OPENSSL_VERSION_MAJOR >= 3
#define CRYPTO_SONAME "libcrypto.so." PI_STR(OPENSSL_VERSION_MAJOR)
#else
#define CRYPTO_SONAME "libcrypto.so.1.1"
#endif

#define PI_CRYPTO_ENTRY_POINTS(X)                                                               \
    X(EVP_MD_CTX_new) X(EVP_MD_CTX_free) X(EVP_DigestInit_ex) X(EVP_DigestUpdate) X(EVP_DigestFinal_ex) \
    X(EVP_sha256) X(EVP_md5)

static struct {
#define PI_CRYPTO_MEMBER(f) __typeof__(f) *f;
    PI_CRYPTO_ENTRY_POINTS(PI_CRYPTO_MEMBER)
#undef PI_CRYPTO_MEMBER
} cr;
static atomic_int cr_loaded;

static int load_locked(const char *name) {
    const char *lib = secure_getenv("PAGEIN_CRYPTO_LIBRARY"); /* not in a setuid process */
    if (!lib || !*lib) lib = CRYPTO_SONAME;
    dlerror();
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return pi_err(PAGEIN_E_UNSUPPORTED, "%s: hashing needs libcrypto at run time (Debian package libssl3): "
                      "dlopen(\"%s\") failed: %s", name, lib, why ? why : "?");
    }
    __typeof__(cr) t;
#define PI_CRYPTO_SYM(f)                                                                           \
    *(void **)&t.f = dlsym(h, #f);                                                                 \
    if (!t.f) {                                                                                    \
        dlclose(h);                                                                                \
        return pi_err(PAGEIN_E_UNSUPPORTED, "%s: %s has no entry point %s", name, lib, #f);         \
    }
    PI_CRYPTO_ENTRY_POINTS(PI_CRYPTO_SYM)
#undef PI_CRYPTO_SYM
    cr = t; /* h stays loaded for the life of the process */
    return 0;
}

static int load(const char *name) { return pi_lazy_load(&cr_loaded, load_locked, name); }

struct pi_digest {
    EVP_MD_CTX *ctx;
    int failed; /* an EVP call returned 0 */
    char algo[8];
};

int pi_digest_new(struct pi_digest **out, const char *algo, const char *name) {
    *out = NULL;
    int md5 = strcmp(algo, "md5") == 0;
    if (!md5 && strcmp(algo, "sha256") != 0) return pi_err(PAGEIN_E_UNSUPPORTED, "%s: no digest %s", name, algo);
    FORWARD_IF(load(name));
    struct pi_digest *d = pi_calloc(1, sizeof *d);
    if (d) d->ctx = cr.EVP_MD_CTX_new();
    if (!d || !d->ctx) {
        pi_free(d);
        return pi_err(-ENOMEM, "%s: out of memory", name);
    }
    snprintf(d->algo, sizeof d->algo, "%s", md5 ? "md5" : "sha256");
    if (cr.EVP_DigestInit_ex(d->ctx, md5 ? cr.EVP_md5() : cr.EVP_sha256(), NULL) != 1) {
        pi_digest_free(d);
        return pi_err(PAGEIN_E_UNSUPPORTED, "%s: libcrypto refused %s (a FIPS provider without it?)", name, algo);
    }
    *out = d;
    return 0;
}

void pi_digest_update(struct pi_digest *d, const void *p, size_t n) {
    if (!d->failed && cr.EVP_DigestUpdate(d->ctx, p, n) != 1) d->failed = 1;
}

int pi_digest_final(struct pi_digest *d, char *hex) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    hex[0] = 0;
    if (d->failed || cr.EVP_DigestFinal_ex(d->ctx, md, &n) != 1 || 2 * n >= PI_DIGEST_HEX_CAP)
        return pi_err(-EIO, "libcrypto failed to compute the %s", d->algo);
    for (unsigned i = 0; i < n; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return 0;
}

void pi_digest_free(struct pi_digest *d) {
    if (!d) return;
    if (d->ctx) cr.EVP_MD_CTX_free(d->ctx);
    pi_free(d);
}

#endif /* PAGEIN_HAVE_LIBCRYPTO */

int pi_digest_buf(const char *algo, const void *p, size_t n, char *hex, const char *name) {
    struct pi_digest *d;
    hex[0] = 0;
    FORWARD_IF(pi_digest_new(&d, algo, name));
    pi_digest_update(d, p, n);
    int rc = pi_digest_final(d, hex);
    pi_digest_free(d);
    return rc;
}
