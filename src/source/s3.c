/*
 * s3.c - s3://bucket/key and gs://bucket/key through the S3 API
 * (docs/REMOTE.md). The request is signed by libcurl's own SigV4
 * (CURLOPT_AWS_SIGV4); this file only works out the endpoint, the region
 * and the credentials the way the AWS tools do, and hands an HTTP request
 * description to http.c.
 *
 *   credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN),
 *                else profile AWS_PROFILE (default "default") in
 *                AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials), then in
 *                AWS_CONFIG_FILE (~/.aws/config); none: anonymous (unsigned)
 *   region       AWS_REGION, AWS_DEFAULT_REGION, the profile's region, us-east-1
 *   endpoint     AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
 *                endpoint_url: path-style (ENDPOINT/bucket/key); none:
 *                https://bucket.s3.REGION.amazonaws.com/key (virtual-hosted)
 *   CA bundle    AWS_CA_BUNDLE, the profile's ca_bundle
 *
 * gs:// is the same code against GCS's XML API with HMAC keys:
 * GS_ACCESS_KEY_ID/GS_SECRET_ACCESS_KEY (else the AWS_* ones), endpoint
 * GS_ENDPOINT_URL or https://storage.googleapis.com, region "auto".
 */
#include "remote.h"

#ifdef PAGEIN_HAVE_CURL

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct s3conf {
    int gs;
    char bucket[256];
    char *key; /* raw key (malloc'd) */
    char region[64];
    char endpoint[512];
    char key_id[256], secret[256];
    char token[4096];
    char ca[1024];
    char cred_from[2400]; /* where the credentials came from, for messages */
};


/* Looks key up in section of an INI file (the AWS shared files). */
static int ini_get(const char *path, const char *section, const char *key, char *out, size_t cap) {
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    char line[4096];
    int in = 0, found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *p = line;
        int indented = (*p == ' ' || *p == '\t');
        while (*p == ' ' || *p == '\t') p++;
        size_t n = strcspn(p, "\r\n");
        p[n] = 0;
        if (!*p || *p == '#' || *p == ';') continue;
        if (*p == '[') {
            char *e = strchr(p, ']');
            if (!e) continue;
            *e = 0;
            char *name = p + 1;
            while (*name == ' ') name++;
            size_t l = strlen(name);
            while (l && name[l - 1] == ' ') name[--l] = 0;
            in = strcmp(name, section) == 0;
            continue;
        }
        if (!in || indented) continue; /* nested service blocks are not read */
        char *eq = strchr(p, '=');
        if (!eq) continue;
        char *k = p, *ke = eq;
        while (ke > k && (ke[-1] == ' ' || ke[-1] == '\t')) ke--;
        if ((size_t)(ke - k) != strlen(key) || strncmp(k, key, (size_t)(ke - k)) != 0) continue;
        char *v = eq + 1;
        while (*v == ' ' || *v == '\t') v++;
        size_t vl = strlen(v);
        while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t')) vl--;
        if (!vl) continue; /* "s3 =" opening a nested block */
        snprintf(out, cap, "%.*s", (int)vl, v);
        found = 1;
    }
    fclose(f);
    return found;
}

static void aws_files(char *creds, char *config, size_t cap) {
    const char *home = pi_env("HOME");
    const char *c = pi_env("AWS_SHARED_CREDENTIALS_FILE"), *g = pi_env("AWS_CONFIG_FILE");
    if (c) snprintf(creds, cap, "%s", c);
    else snprintf(creds, cap, "%s/.aws/credentials", home ? home : "");
    if (g) snprintf(config, cap, "%s", g);
    else snprintf(config, cap, "%s/.aws/config", home ? home : "");
}

/* key from the profile: the credentials file first, then the config. */
static int profile_get(const char *key, char *out, size_t cap, int creds_too) {
    char creds[1024], config[1024], sect[300];
    aws_files(creds, config, sizeof creds);
    const char *prof = pi_env("AWS_PROFILE");
    if (!prof) prof = pi_env("AWS_DEFAULT_PROFILE");
    if (!prof) prof = "default";
    if (creds_too && ini_get(creds, prof, key, out, cap)) return 1;
    if (strcmp(prof, "default") == 0 && ini_get(config, "default", key, out, cap)) return 1;
    snprintf(sect, sizeof sect, "profile %s", prof);
    return ini_get(config, sect, key, out, cap);
}

static int parse_uri(const char *uri, struct s3conf *c) {
    memset(c, 0, sizeof *c);
    c->gs = strncasecmp(uri, "gs://", 5) == 0;
    const char *p = uri + 5;
    size_t bl = strcspn(p, "/");
    if (bl == 0 || bl >= sizeof c->bucket)
        return pi_err(PAGEIN_E_INVALID, "%s: expected %s://BUCKET/KEY", uri, c->gs ? "gs" : "s3");
    memcpy(c->bucket, p, bl);
    c->bucket[bl] = 0;
    const char *k = p[bl] == '/' ? p + bl + 1 : p + bl;
    c->key = pi_strndup(k, strlen(k));
    if (!c->key) return pi_err(-ENOMEM, "%s: out of memory", uri);
    return 0;
}

static void load_conf(struct s3conf *c) {
    const char *v;
    /* credentials */
    const char *id = c->gs ? pi_env("GS_ACCESS_KEY_ID") : NULL, *sec = c->gs ? pi_env("GS_SECRET_ACCESS_KEY") : NULL;
    if (!id || !sec) {
        id = pi_env("AWS_ACCESS_KEY_ID");
        sec = pi_env("AWS_SECRET_ACCESS_KEY");
    }
    if (id && sec) {
        snprintf(c->key_id, sizeof c->key_id, "%s", id);
        snprintf(c->secret, sizeof c->secret, "%s", sec);
        if ((v = pi_env("AWS_SESSION_TOKEN"))) snprintf(c->token, sizeof c->token, "%s", v);
        snprintf(c->cred_from, sizeof c->cred_from, "key %s from %s", c->key_id,
                 c->gs && pi_env("GS_ACCESS_KEY_ID") ? "GS_ACCESS_KEY_ID" : "AWS_ACCESS_KEY_ID");
    } else if (profile_get("aws_access_key_id", c->key_id, sizeof c->key_id, 1) &&
               profile_get("aws_secret_access_key", c->secret, sizeof c->secret, 1)) {
        profile_get("aws_session_token", c->token, sizeof c->token, 1);
        char creds[1024], config[1024];
        aws_files(creds, config, sizeof creds);
        const char *prof = pi_env("AWS_PROFILE") ? pi_env("AWS_PROFILE") : pi_env("AWS_DEFAULT_PROFILE");
        snprintf(c->cred_from, sizeof c->cred_from, "key %s of profile '%s' (%s, %s)", c->key_id,
                 prof ? prof : "default", creds, config);
    } else {
        c->key_id[0] = c->secret[0] = 0;
        snprintf(c->cred_from, sizeof c->cred_from, "anonymous: no AWS_ACCESS_KEY_ID, no profile key");
    }
    /* region */
    if ((v = pi_env("AWS_REGION")) || (v = pi_env("AWS_DEFAULT_REGION"))) snprintf(c->region, sizeof c->region, "%s", v);
    else if (!profile_get("region", c->region, sizeof c->region, 0))
        snprintf(c->region, sizeof c->region, "%s", c->gs ? "auto" : "us-east-1");
    if (c->gs && !pi_env("AWS_REGION") && !pi_env("AWS_DEFAULT_REGION")) snprintf(c->region, sizeof c->region, "auto");
    /* endpoint */
    if (c->gs) {
        snprintf(c->endpoint, sizeof c->endpoint, "%s",
                 pi_env("GS_ENDPOINT_URL") ? pi_env("GS_ENDPOINT_URL") : "https://storage.googleapis.com");
    } else if ((v = pi_env("AWS_ENDPOINT_URL_S3")) || (v = pi_env("AWS_ENDPOINT_URL"))) {
        snprintf(c->endpoint, sizeof c->endpoint, "%s", v);
    } else {
        profile_get("endpoint_url", c->endpoint, sizeof c->endpoint, 0);
    }
    size_t el = strlen(c->endpoint);
    while (el && c->endpoint[el - 1] == '/') c->endpoint[--el] = 0;
    /* CA bundle */
    if ((v = pi_env("AWS_CA_BUNDLE"))) snprintf(c->ca, sizeof c->ca, "%s", v);
    else profile_get("ca_bundle", c->ca, sizeof c->ca, 0);
}

/* Appends s percent-encoded (RFC 3986 unreserved kept; '/' kept when
 * keep_slash) to out. */

/* The object URL (key may be "" for bucket-level requests). */
static void object_url(const struct s3conf *c, const char *key, char *url, size_t cap) {
    if (c->endpoint[0]) {
        snprintf(url, cap, "%s/%s/", c->endpoint, c->bucket);
    } else if (strchr(c->bucket, '.')) {
        snprintf(url, cap, "https://s3.%s.amazonaws.com/%s/", c->region, c->bucket);
    } else {
        snprintf(url, cap, "https://%s.s3.%s.amazonaws.com/", c->bucket, c->region);
    }
    pi_url_encode(url, cap, key, 1);
}

struct s3req {
    char sigv4[128], userpwd[600], tokhdr[4200];
};

static void fill_cfg(const struct s3conf *c, struct s3req *q, struct pi_http_cfg *cfg) {
    memset(cfg, 0, sizeof *cfg);
    int h = 0;
    cfg->headers[h++] = "x-amz-content-sha256: " EMPTY_SHA256;
    if (c->key_id[0]) {
        snprintf(q->sigv4, sizeof q->sigv4, "aws:amz:%s:s3", c->region);
        snprintf(q->userpwd, sizeof q->userpwd, "%s:%s", c->key_id, c->secret);
        cfg->sigv4 = q->sigv4;
        cfg->userpwd = q->userpwd;
        if (c->token[0]) {
            snprintf(q->tokhdr, sizeof q->tokhdr, "x-amz-security-token: %s", c->token);
            cfg->headers[h++] = q->tokhdr;
        }
    }
    cfg->cainfo = c->ca[0] ? c->ca : NULL;
    cfg->scheme = c->gs ? "gs" : "s3";
}

static int s3_match(const char *uri) { return strncasecmp(uri, "s3://", 5) == 0 || strncasecmp(uri, "gs://", 5) == 0; }

/* The endpoint behind a URL (ops.origin: the metadata cache's key), as
 * the environment names it: gs:// GS_ENDPOINT_URL; s3:// the endpoint
 * variables, and the profile and config file that may name another. */
static void s3_origin(const char *uri, char *out, size_t cap) {
    const char *v;
    if (strncasecmp(uri, "gs://", 5) == 0) {
        snprintf(out, cap, "%s", (v = pi_env("GS_ENDPOINT_URL")) ? v : "https://storage.googleapis.com");
        return;
    }
    const char *ep = (v = pi_env("AWS_ENDPOINT_URL_S3")) ? v : pi_env("AWS_ENDPOINT_URL");
    const char *pr = pi_env("AWS_PROFILE"), *cf = pi_env("AWS_CONFIG_FILE");
    snprintf(out, cap, "%s profile=%s config=%s", ep ? ep : "-", pr ? pr : "-", cf ? cf : "-");
}

static int s3_open(struct pi_source *s, const char *uri, uint32_t flags) {
    struct s3conf *c = pi_calloc(1, sizeof *c);
    struct s3req *q = pi_calloc(1, sizeof *q);
    char *url = pi_malloc(8192);
    int rc;
    if (!c || !q || !url) {
        rc = pi_err(-ENOMEM, "%s: out of memory", uri);
        goto out;
    }
    rc = parse_uri(uri, c);
    if (rc < 0) goto out;
    if (!c->key[0] || c->key[strlen(c->key) - 1] == '/') {
        rc = pi_err(PAGEIN_E_INVALID, "%s: names a prefix, not an object (open its *.index.json or pull the prefix)", uri);
        goto out;
    }
    load_conf(c);
    url[0] = 0;
    object_url(c, c->key, url, 8192);
    struct pi_http_cfg cfg;
    fill_cfg(c, q, &cfg);
    cfg.url = url;
    rc = pi_http_open_cfg(s, &cfg, flags);
    if (rc < 0) {
        /* say which endpoint, region and credentials were used: the usual
         * question when an object store refuses */
        char *d = pi_strndup(pagein_last_error_detail(), strlen(pagein_last_error_detail()));
        pi_err(rc, "%s: %s [endpoint %s, region %s, %s]", uri, d ? d : "", c->endpoint[0] ? c->endpoint : "AWS default",
               c->region, c->cred_from);
        pi_free(d);
    }
out:
    if (c) pi_free(c->key);
    pi_free(c);
    pi_free(q);
    pi_free(url);
    return rc;
}

/* ---- ListObjectsV2 (the page reader: s3_listing.c) --------------------------------- */
/* Every key under uri's key prefix through fn, up to max_pages pages;
 * delim: direct children only (delimiter '/'). */
static int s3_walk(const char *uri, int delim, int max_pages, pi_s3_key_fn fn, void *arg) {
    struct s3conf *c = pi_calloc(1, sizeof *c);
    struct s3req *q = pi_calloc(1, sizeof *q);
    char *url = pi_malloc(16384), *tok = pi_calloc(1, 2048);
    int rc;
    if (!c || !q || !url || !tok) {
        rc = pi_err(-ENOMEM, "%s: out of memory", uri);
        goto done;
    }
    rc = parse_uri(uri, c);
    if (rc < 0) goto done;
    load_conf(c);
    for (int page = 0; page < max_pages; page++) {
        url[0] = 0;
        object_url(c, "", url, 16384);
        size_t ul = strlen(url);
        snprintf(url + ul, 16384 - ul, "%s", delim ? "?delimiter=%2F&list-type=2&prefix=" : "?list-type=2&prefix=");
        pi_url_encode(url, 16384, c->key, 0);
        if (tok[0]) {
            ul = strlen(url);
            snprintf(url + ul, 16384 - ul, "&continuation-token=");
            pi_url_encode(url, 16384, tok, 0);
        }
        struct pi_http_cfg cfg;
        fill_cfg(c, q, &cfg);
        cfg.url = url;
        char *body;
        size_t blen;
        long st = 0;
        rc = pi_http_fetch(&cfg, &body, &blen, 64u << 20, &st);
        if (rc < 0) goto done;
        if (st != 200) {
            rc = pi_err(PAGEIN_E_REMOTE, "%s: GET %s (ListObjectsV2): HTTP %ld: %.300s", uri, url, st, body);
            pi_free(body);
            goto done;
        }
        int more = 0;
        rc = pi_s3_page(body, blen, c->key, fn, arg, tok, 2048, &more);
        pi_free(body);
        if (rc != 0 || !more || !tok[0]) break;
    }
done:
    if (c) pi_free(c->key);
    pi_free(c);
    pi_free(q);
    pi_free(url);
    pi_free(tok);
    return rc;
}

/* s3://bucket/prefix : every key directly under prefix (delimiter '/') with
 * its size and ETag (as GET sends it, quotes included), up to max_pages
 * pages; *out (malloc'd, free with pi_stat_entries_free), *count. One
 * listing request per 1,000 keys: what the metadata cache checks its
 * entries against through the row's stat_dir op (file/metacache.c,
 * pi_meta_vouch), instead of one request per object. */
static int s3_list_stat(const char *uri, int max_pages, struct pi_stat_entry **out, size_t *count) {
    *out = NULL;
    *count = 0;
    char base[600];
    if (!pi_s3_split(uri, base, sizeof base)) return pi_err(PAGEIN_E_INVALID, "%s: expected s3://BUCKET/PREFIX", uri);
    struct pi_s3_stats st = {.base = base};
    int rc = s3_walk(uri, 1, max_pages, pi_s3_stat_add, &st);
    if (rc < 0) {
        pi_stat_entries_free(st.v, st.n);
        return rc;
    }
    *out = st.v;
    *count = st.n;
    return 0;
}

/* The list op: the objects under the prefix, named relative to it
 * (s3_listing.c pi_s3_list_key). */
static int s3_list(const char *uri, pi_list_fn fn, void *arg) {
    char base[600];
    const char *prefix = pi_s3_split(uri, base, sizeof base);
    if (!prefix) return pi_err(PAGEIN_E_INVALID, "%s: expected s3://BUCKET/PREFIX", uri);
    struct pi_s3_lister l = {.fn = fn, .arg = arg, .uri = uri, .base = base, .prefix = prefix};
    int rc = s3_walk(uri, 0, 10000, pi_s3_list_key, &l);
    pi_free(l.u.p);
    return rc;
}

static int s3_is_prefix(const char *uri) {
    size_t n = strlen(uri);
    return n && uri[n - 1] == '/';
}

static int s3_checksum(struct pi_source *s, struct pi_checksum *c) { return pi_http_checksum(s, c, 1); }

/* The folder's direct children (delimiter '/'), the folder being uri with
 * a '/' added: its keys, not its siblings'. */
static int s3_stat_dir(const char *uri, int max_pages, struct pi_stat_entry **out, size_t *n) {
    size_t l = strlen(uri);
    char *pre = pi_malloc(l + 2);
    if (!pre) return pi_err(-ENOMEM, "%s: out of memory", uri);
    memcpy(pre, uri, l + 1);
    if (l && pre[l - 1] != '/') memcpy(pre + l, "/", 2);
    int rc = s3_list_stat(pre, max_pages, out, n);
    pi_free(pre);
    return rc;
}

const struct pi_source_ops pi_source_s3 = {
    .name = "s3",
    .schemes = "s3://, gs://",
    .remote = 1,
    .match = s3_match,
    .open = s3_open,
    .readv = pi_http_readv,
    .read = pi_http_read,
    .close = pi_http_close,
    .is_prefix = s3_is_prefix,
    .list = s3_list,
    .object_name = NULL,
    .checksum = s3_checksum,
    .cache_place = NULL,
    .counters = pi_http_counters,
    .ranges_ignored = pi_http_no_ranges,
    .stream = pi_http_stream,
    .stat_dir = s3_stat_dir,
    .origin = s3_origin,
};

#endif /* PAGEIN_HAVE_CURL */
