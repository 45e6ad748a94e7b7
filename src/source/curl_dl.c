/*
 * curl_dl.c - libcurl found at run time (curl_dl.h).
 *
 * The first remote open dlopen()s "libcurl.so.4" (the soname of libcurl 7
 * and 8; PAGEIN_CURL_LIBRARY names another file) with RTLD_LOCAL, so that
 * its symbols stay out of the global namespace (a Python process may hold
 * another libcurl), looks up every entry point of PI_CURL_ENTRY_POINTS
 * and calls curl_global_init once. The table is filled once (core/lazy.h)
 * and never unloaded (libcurl and its TLS library keep global state;
 * dlclose of them is unsafe). A failed load leaves nothing behind: the
 * open fails with PAGEIN_E_REMOTE naming the source and the library, and
 * a later open tries again.
 */
#define PI_CURL_DL_FILL /* the table's members by their own names */
#include "curl_dl.h"
#include "../internal.h"
#include "../core/lazy.h"

#ifdef PAGEIN_HAVE_CURL

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct pi_curl_api pi_curl_api;
static atomic_int curl_loaded; /* 1 once the table is filled and curl_global_init worked */

static int load_locked(const char *name) {
    const char *lib = secure_getenv("PAGEIN_CURL_LIBRARY"); /* not in a setuid process */
    if (!lib || !*lib) lib = "libcurl.so.4";
    dlerror();
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return pi_err(PAGEIN_E_REMOTE, "%s: remote sources need libcurl at run time (Debian package libcurl4): "
                      "dlopen(\"%s\") failed: %s", name, lib, why ? why : "?");
    }
    struct pi_curl_api t;
#define PI_CURL_SYM(f)                                                                                   \
    *(void **)&t.f = dlsym(h, #f);                                                                       \
    if (!t.f) {                                                                                          \
        dlclose(h);                                                                                      \
        return pi_err(PAGEIN_E_REMOTE, "%s: %s has no entry point %s (libcurl older than 7.66?)", name, lib, #f); \
    }
    PI_CURL_ENTRY_POINTS(PI_CURL_SYM)
#undef PI_CURL_SYM
    CURLcode rc = t.curl_global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK) {
        /* curl_global_init may have loaded TLS state: h stays loaded */
        return pi_err(PAGEIN_E_REMOTE, "%s: curl_global_init failed in %s: %s", name, lib, t.curl_easy_strerror(rc));
    }
    pi_curl_api = t; /* h stays loaded for the life of the process */
    return 0;
}

int pi_curl_load(const char *name) { return pi_lazy_load(&curl_loaded, load_locked, name); }

#endif /* PAGEIN_HAVE_CURL */
