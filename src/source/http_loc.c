/*
 * http_loc.c - where an HTTP object's requests go (http_int.h): the
 * location (URL, first-party flag, generation) under one mutex, read as
 * one snapshot per attempt; the configured origin (the only one
 * credentials go to) and its userinfo; redirects, followed here and
 * checked (http or https only, never down to http, at most 10; another
 * origin gets no credentials). A leaf of the object layer: it makes no
 * request (re-resolution, which does, is in http_xfer.c).
 */
#include "http_int.h"

#ifdef PAGEIN_HAVE_CURL

#include <ctype.h>
#include <stdio.h>
#include <strings.h>

/* The location as one snapshot: URL, first-party flag and generation. */
void pi_hx_loc_get(struct http_obj *o, struct loc_snap *sn) {
    pthread_mutex_lock(&o->loc.lock);
    sn->url = o->loc.url;
    sn->first_party = o->loc.first_party;
    sn->redirected = o->loc.redirected;
    sn->gen = o->loc.gen;
    pthread_mutex_unlock(&o->loc.lock);
}

/* A probe's redirects led to url (malloc'd): later requests go there,
 * with credentials only when first_party (still the configured origin).
 * The old URL is retired, not freed (a snapshot may hold it). 1 when url
 * was taken, 0 when out of memory (the location stays). */
int pi_hx_loc_set(struct http_obj *o, char *url, int first_party) {
    pthread_mutex_lock(&o->loc.lock);
    char **r = pi_realloc(o->loc.retired, (o->loc.nretired + 1) * sizeof *r);
    if (r) {
        o->loc.retired = r;
        o->loc.retired[o->loc.nretired++] = o->loc.url;
        o->loc.url = url;
        o->loc.first_party = first_party;
        o->loc.redirected = strcmp(url, o->orig_url) != 0;
        o->loc.gen++;
    }
    pthread_mutex_unlock(&o->loc.lock);
    return r != NULL;
}

/* The location's URL (for messages; valid until the object is freed). */
const char *pi_hx_loc_url(struct http_obj *o) {
    struct loc_snap sn;
    pi_hx_loc_get(o, &sn);
    return sn.url;
}


/* scheme://host:port of url, lower-case, into out ("" when it does not
 * parse: then it matches no origin and gets no credentials). */
void pi_hx_url_origin(const char *url, char *out, size_t cap) {
    out[0] = 0;
    CURLU *h = curl_url();
    char *sc = NULL, *host = NULL, *port = NULL;
    if (h && curl_url_set(h, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(h, CURLUPART_SCHEME, &sc, 0) == CURLUE_OK && curl_url_get(h, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(h, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
        snprintf(out, cap, "%s://%s:%s", sc, host, port);
        for (char *c = out; *c; c++) *c = (char)tolower((unsigned char)*c);
    }
    curl_free(sc);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(h);
}

/* o->user, o->pass: the configured URL's userinfo, percent-decoded. */
void pi_hx_url_userinfo(struct http_obj *o) {
    CURLU *h = curl_url();
    char *u = NULL, *p = NULL;
    if (h && curl_url_set(h, CURLUPART_URL, o->orig_url, 0) == CURLUE_OK) {
        if (curl_url_get(h, CURLUPART_USER, &u, CURLU_URLDECODE) == CURLUE_OK && u) o->user = pi_strndup(u, strlen(u));
        if (curl_url_get(h, CURLUPART_PASSWORD, &p, CURLU_URLDECODE) == CURLUE_OK && p) o->pass = pi_strndup(p, strlen(p));
    }
    curl_free(u);
    curl_free(p);
    curl_url_cleanup(h);
}

static int same_origin(const struct http_obj *o, const char *url) {
    char org[300];
    pi_hx_url_origin(url, org, sizeof org);
    return o->origin[0] && strcmp(org, o->origin) == 0;
}

/* A 3xx with a Location: the next target of x, checked (http or https
 * only, never from https down to http, at most 10). 2 to restart x there
 * at once, < 0 refused (detail set). A target of another origin, and every
 * hop after it, gets no credentials. */
int pi_hx_follow(struct http_obj *o, struct xfer *x, const char *rq) {
    char *loc = NULL;
    curl_easy_getinfo(x->e, CURLINFO_REDIRECT_URL, &loc);
    if (!loc || !*loc) return pi_err(PAGEIN_E_REMOTE, "%s: HTTP %ld without a Location", rq, x->status);
    if (x->redirects >= 10) return pi_err(PAGEIN_E_REMOTE, "%s: more than 10 redirects", rq);
    const char *cur = x->url ? x->url : x->at;
    int https = strncasecmp(cur, "https://", 8) == 0;
    if (strncasecmp(loc, "https://", 8) != 0 && strncasecmp(loc, "http://", 7) != 0)
        return pi_err(PAGEIN_E_REMOTE, "%s: HTTP %ld redirects to %.300s: only http:// and https:// are followed", rq,
                      x->status, loc);
    if (https && strncasecmp(loc, "http://", 7) == 0)
        return pi_err(PAGEIN_E_REMOTE,
                      "%s: HTTP %ld redirects from https to plain http (%.300s): refused (a downgrade would expose the "
                      "request and the data)", rq, x->status, loc);
    char *nu = pi_strndup(loc, strlen(loc));
    if (!nu) return pi_err(-ENOMEM, "%s: out of memory", rq);
    x->third = x->third || !same_origin(o, nu);
    pi_free(x->url);
    x->url = nu;
    x->redirects++;
    return 2;
}

#endif /* PAGEIN_HAVE_CURL */
