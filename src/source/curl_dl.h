/*
 * curl_dl.h - libcurl found at run time (curl_dl.c).
 *
 * libpagein has no link-time dependency on libcurl: the first remote open
 * dlopen()s "libcurl.so.4" (PAGEIN_CURL_LIBRARY names another file, e.g.
 * Debian's libcurl-gnutls.so.4 or a test's missing one) and fills a table
 * of the libcurl entry points pagein calls. A process that never opens a
 * URL never loads libcurl nor the ~30 libraries it needs (TLS, Kerberos,
 * LDAP, SSH, IDN, ...): `pagein --version` starts in a third of the time.
 *
 * After this header, the call sites read as plain libcurl: each name below
 * is a macro for the table's entry of the same name (types taken from
 * <curl/curl.h> itself). curl's gcc type-check macros wrap the setopt
 * calls and are turned off (CURL_DISABLE_TYPECHECK) so that the names can
 * be redefined here. Only the three http*.c files and curl_dl.c include
 * it (through http_int.h).
 */
#ifndef PAGEIN_CURL_DL_H
#define PAGEIN_CURL_DL_H

#ifdef PAGEIN_HAVE_CURL

#ifndef CURL_DISABLE_TYPECHECK
#define CURL_DISABLE_TYPECHECK
#endif
#include <curl/curl.h>

/* X(name): every libcurl function pagein calls. */
#define PI_CURL_ENTRY_POINTS(X)                                                                          \
    X(curl_global_init) X(curl_easy_init) X(curl_easy_cleanup) X(curl_easy_setopt) X(curl_easy_getinfo) \
    X(curl_easy_strerror) X(curl_free) X(curl_multi_init) X(curl_multi_cleanup) X(curl_multi_add_handle) \
    X(curl_multi_remove_handle) X(curl_multi_perform) X(curl_multi_poll) X(curl_multi_info_read)         \
    X(curl_multi_setopt) X(curl_share_init) X(curl_share_cleanup) X(curl_share_setopt)                   \
    X(curl_slist_append) X(curl_slist_free_all) X(curl_url) X(curl_url_cleanup) X(curl_url_get)          \
    X(curl_url_set)

/* curl.h's "exactly three arguments" wrappers */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_share_setopt
#undef curl_multi_setopt

struct pi_curl_api {
#define PI_CURL_MEMBER(f) __typeof__(f) *f;
    PI_CURL_ENTRY_POINTS(PI_CURL_MEMBER)
#undef PI_CURL_MEMBER
};
/* Filled by pi_curl_load; read only after it returned 0. */
extern struct pi_curl_api pi_curl_api;

/* Loads libcurl once per process (later calls return at once). 0, or
 * PAGEIN_E_REMOTE naming url and the library that could not be loaded,
 * with dlerror()'s reason; a failed load leaves nothing behind, so a
 * later call tries again. Thread-safe. */
int pi_curl_load(const char *url);

/* The call sites' names, now the table's (a macro does not expand itself
 * again inside its own expansion, so the member keeps its name). Not in
 * curl_dl.c, which fills the table by these names. */
#ifndef PI_CURL_DL_FILL
#define curl_global_init (pi_curl_api.curl_global_init)
#define curl_easy_init (pi_curl_api.curl_easy_init)
#define curl_easy_cleanup (pi_curl_api.curl_easy_cleanup)
#define curl_easy_setopt (pi_curl_api.curl_easy_setopt)
#define curl_easy_getinfo (pi_curl_api.curl_easy_getinfo)
#define curl_easy_strerror (pi_curl_api.curl_easy_strerror)
#define curl_free (pi_curl_api.curl_free)
#define curl_multi_init (pi_curl_api.curl_multi_init)
#define curl_multi_cleanup (pi_curl_api.curl_multi_cleanup)
#define curl_multi_add_handle (pi_curl_api.curl_multi_add_handle)
#define curl_multi_remove_handle (pi_curl_api.curl_multi_remove_handle)
#define curl_multi_perform (pi_curl_api.curl_multi_perform)
#define curl_multi_poll (pi_curl_api.curl_multi_poll)
#define curl_multi_info_read (pi_curl_api.curl_multi_info_read)
#define curl_multi_setopt (pi_curl_api.curl_multi_setopt)
#define curl_share_init (pi_curl_api.curl_share_init)
#define curl_share_cleanup (pi_curl_api.curl_share_cleanup)
#define curl_share_setopt (pi_curl_api.curl_share_setopt)
#define curl_slist_append (pi_curl_api.curl_slist_append)
#define curl_slist_free_all (pi_curl_api.curl_slist_free_all)
#define curl_url (pi_curl_api.curl_url)
#define curl_url_cleanup (pi_curl_api.curl_url_cleanup)
#define curl_url_get (pi_curl_api.curl_url_get)
#define curl_url_set (pi_curl_api.curl_url_set)
#endif /* PI_CURL_DL_FILL */

#endif /* PAGEIN_HAVE_CURL */
#endif /* PAGEIN_CURL_DL_H */
