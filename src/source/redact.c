/*
 * redact.c - secrets never reach output (docs/SAFETY.md, "Remote sources").
 *
 * One function decides what of a URL is secret: the userinfo
 * (`user:pass@` -> `***@`) and the values of query parameters that carry
 * credentials or signatures (presigned S3/GCS/CDN URLs: X-Amz-Signature,
 * X-Amz-Credential, X-Amz-Security-Token, Signature, sig, token, ... ->
 * `REDACTED`). pi_err and pi_err_prefix pass every error detail through
 * pi_redact_text, so no message, exception or --json error carries them;
 * pull's resume state stores the redacted URL. Not built on libcurl: the
 * error path of every build uses it.
 */
#include "../internal.h"

#include <ctype.h>
#include <stdio.h>
#include <strings.h>

/* Query parameter names whose values are secrets: exact names (case
 * insensitive), and any name containing one of the words below. */
static const char *const secret_names[] = {
    "sig", "key", "code", "auth", "jwt", "session", "policy", "key-pair-id", "awsaccesskeyid", "googleaccessid",
};
static const char *const secret_words[] = {
    "signature", "credential", "token", "secret", "password", "passwd", "apikey", "api_key", "api-key",
};

static int contains_ci(const char *s, size_t n, const char *w) {
    size_t wl = strlen(w);
    for (size_t i = 0; i + wl <= n; i++)
        if (strncasecmp(s + i, w, wl) == 0) return 1;
    return 0;
}

/* 1 when the query parameter named s[0,n) (possibly percent-encoded) holds
 * a secret. */
static int secret_param(const char *s, size_t n) {
    for (size_t i = 0; i < PI_ARRAY_LEN(secret_names); i++)
        if (strlen(secret_names[i]) == n && strncasecmp(s, secret_names[i], n) == 0) return 1;
    for (size_t i = 0; i < PI_ARRAY_LEN(secret_words); i++)
        if (contains_ci(s, n, secret_words[i])) return 1;
    return 0;
}

/* The characters a URL runs over inside a message: it ends at white space,
 * a quote, '<', '>' or a closing bracket/paren/comma that ends the
 * sentence rather than the URL (a URL with those unencoded is rare; when it
 * happens the rest is not treated as the URL, which only redacts less of
 * its query). */
static int url_char(char c) {
    return c && !isspace((unsigned char)c) && c != '"' && c != '\'' && c != '<' && c != '>' && c != ')' &&
           c != ']' && c != '}' && c != ',';
}

/* Appends s[0,n) to out at *o (cap bytes; the NUL kept in room). */
static void put(char *out, size_t cap, size_t *o, const char *s, size_t n) {
    if (!cap) return;
    size_t k = PI_MIN(n, cap - 1 - *o);
    memcpy(out + *o, s, k);
    *o += k;
    out[*o] = 0;
}

/* Redacts the URL u[0,n) into out at *o. */
static void redact_one(const char *u, size_t n, char *out, size_t cap, size_t *o) {
    const char *ss = NULL;
    for (size_t i = 0; i + 2 < n; i++)
        if (u[i] == ':' && u[i + 1] == '/' && u[i + 2] == '/') {
            ss = u + i + 3;
            break;
        }
    if (!ss) {
        put(out, cap, o, u, n);
        return;
    }
    const char *end = u + n;
    put(out, cap, o, u, (size_t)(ss - u));
    /* authority: up to the first '/', '?' or '#'; userinfo is what precedes
     * its last '@' */
    const char *ae = ss;
    while (ae < end && *ae != '/' && *ae != '?' && *ae != '#') ae++;
    const char *at = NULL;
    for (const char *p = ss; p < ae; p++)
        if (*p == '@') at = p;
    if (at) {
        put(out, cap, o, "***", 3);
        ss = at;
    }
    /* path: as is; query: secret values replaced */
    const char *q = ss;
    while (q < end && *q != '?' && *q != '#') q++;
    put(out, cap, o, ss, (size_t)(q - ss));
    if (q < end && *q == '?') {
        put(out, cap, o, "?", 1);
        const char *p = q + 1;
        while (p < end && *p != '#') {
            const char *pe = p;
            while (pe < end && *pe != '&' && *pe != ';' && *pe != '#') pe++;
            const char *eq = memchr(p, '=', (size_t)(pe - p));
            if (eq && secret_param(p, (size_t)(eq - p))) {
                put(out, cap, o, p, (size_t)(eq - p) + 1);
                put(out, cap, o, "REDACTED", 8);
            } else {
                put(out, cap, o, p, (size_t)(pe - p));
            }
            p = pe;
            if (p < end && *p != '#') put(out, cap, o, p++, 1); /* the separator */
        }
        q = p;
    }
    put(out, cap, o, q, (size_t)(end - q)); /* the fragment */
}

char *pi_url_redact(const char *url, char *out, size_t cap) {
    size_t o = 0;
    if (!cap) return out;
    out[0] = 0;
    if (url) redact_one(url, strlen(url), out, cap, &o);
    return out;
}

/* 1 when text[i] starts a URL: letters, digits, '+', '-', '.' then "://",
 * with the scheme starting at a word boundary. */
static size_t scheme_at(const char *t, size_t i) {
    if (i > 0 && (isalnum((unsigned char)t[i - 1]) || t[i - 1] == '+' || t[i - 1] == '-' || t[i - 1] == '.'))
        return 0;
    if (!isalpha((unsigned char)t[i])) return 0;
    size_t k = i;
    while (isalnum((unsigned char)t[k]) || t[k] == '+' || t[k] == '-' || t[k] == '.') k++;
    if (t[k] == ':' && t[k + 1] == '/' && t[k + 2] == '/') return k - i + 3;
    return 0;
}

int pi_redact_text(char *text, size_t cap) {
    if (!text || !cap) return 0;
    /* quick exit: no "://" at all (most messages) */
    if (!strstr(text, "://")) return 0;
    char stack[4096], *tmp = stack;
    size_t tcap = sizeof stack, o = 0, i = 0;
    int changed = 0;
    if (cap > tcap) {
        /* redaction only shortens a URL or lengthens "a@" to "***@": room
         * for the text plus a little is enough (else it is cut to cap) */
        tmp = pi_malloc(cap + 64);
        if (!tmp) tmp = stack; /* cut at 4 KiB rather than not redact */
        else tcap = cap + 64;
    }
    tmp[0] = 0;
    while (text[i]) {
        size_t sl = scheme_at(text, i);
        if (!sl) {
            put(tmp, tcap, &o, text + i, 1);
            i++;
            continue;
        }
        size_t e = i + sl;
        while (url_char(text[e])) e++;
        while (e > i + sl && (text[e - 1] == ':' || text[e - 1] == '.' || text[e - 1] == ';')) e--; /* "URL: ..." */
        size_t before = o;
        redact_one(text + i, e - i, tmp, tcap, &o);
        if (o - before != e - i || memcmp(tmp + before, text + i, e - i) != 0) changed = 1;
        i = e;
    }
    if (changed) {
        size_t k = PI_MIN(o, cap - 1);
        memcpy(text, tmp, k);
        text[k] = 0;
    }
    if (tmp != stack) pi_free(tmp);
    return changed;
}

char *pagein_url_redact(const char *text, char *out, size_t cap) {
    if (!cap) return out;
    if (!text) text = "";
    if (out != text) {
        size_t n = PI_MIN(strlen(text), cap - 1);
        memmove(out, text, n);
        out[n] = 0;
    }
    pi_redact_text(out, cap);
    return out;
}
