/*
 * hf.c - hf://[datasets/]org/name[@revision]/path: a file of a Hugging Face
 * Hub repository (docs/REMOTE.md), resolved the way huggingface_hub does:
 *
 *   HF_ENDPOINT (default https://huggingface.co)
 *     /{org}/{name}/resolve/{revision}/{path}           models
 *     /datasets/{org}/{name}/resolve/{revision}/{path}  datasets
 *
 * revision defaults to "main" and is percent-encoded ("refs/pr/1" may be
 * written refs%2Fpr%2F1). The token is HF_TOKEN (or HUGGING_FACE_HUB_TOKEN,
 * or the file HF_TOKEN_PATH / $HF_HOME/token / ~/.cache/huggingface/token),
 * sent as "Authorization: Bearer" to the Hub's origin only (http.c follows
 * redirects itself and sends no configured header to another origin, nor
 * on the range requests that go there later). The Hub answers with a
 * redirect that carries X-Linked-Etag (the LFS object's sha256),
 * X-Linked-Size and X-Repo-Commit; http.c keeps them (from the Hub's own
 * responses only) and reuses the redirect's target for the range requests.
 * The revision is checked here before it names anything (pull makes
 * refs/REV of it).
 */
#include "remote.h"
#include "../core/json.h"

#ifdef PAGEIN_HAVE_CURL

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>


void pi_hf_ref_free(struct pi_hf_ref *r) {
    if (!r) return;
    pi_free(r->kind);
    pi_free(r->repo);
    pi_free(r->rev);
    pi_free(r->path);
    memset(r, 0, sizeof *r);
}

static char *pct_decode(const char *s, size_t n) {
    char *o = pi_malloc(n + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
            isxdigit((unsigned char)s[i + 2])) {
            char h[3] = {s[i + 1], s[i + 2], 0};
            o[k++] = (char)strtol(h, NULL, 16);
            i += 2;
        } else {
            o[k++] = s[i];
        }
    }
    o[k] = 0;
    return o;
}

int pi_hf_parse(const char *uri, struct pi_hf_ref *r) {
    memset(r, 0, sizeof *r);
    if (strncasecmp(uri, "hf://", 5) != 0) return pi_err(PAGEIN_E_INVALID, "%s: not an hf:// URL", uri);
    const char *p = uri + 5;
    const char *kind = "models";
    if (strncmp(p, "datasets/", 9) == 0) kind = "datasets", p += 9;
    else if (strncmp(p, "models/", 7) == 0) p += 7;
    /* org/name[@rev] */
    const char *s1 = strchr(p, '/');
    if (!s1 || s1 == p || !s1[1] || s1[1] == '/' || s1[1] == '@')
        return pi_err(PAGEIN_E_INVALID, "%s: expected hf://ORG/NAME[@REVISION][/PATH]", uri);
    const char *nm = s1 + 1;
    size_t nl = strcspn(nm, "/@");
    const char *after = nm + nl;
    const char *rev = "main";
    size_t rl = 4;
    if (*after == '@') {
        rev = after + 1;
        rl = strcspn(rev, "/");
        if (rl == 0) return pi_err(PAGEIN_E_INVALID, "%s: empty revision after '@'", uri);
        after = rev + rl;
    }
    const char *path = *after == '/' ? after + 1 : after;
    for (const char *c = p; c < nm + nl; c++)
        if (!(isalnum((unsigned char)*c) || *c == '-' || *c == '_' || *c == '.' || *c == '/'))
            return pi_err(PAGEIN_E_INVALID, "%s: invalid character in the repository name", uri);
    if (strstr(path, "../") || strcmp(path, "..") == 0 || (strlen(path) >= 3 && !strcmp(path + strlen(path) - 3, "/..")))
        return pi_err(PAGEIN_E_INVALID, "%s: '..' in the path", uri);
    /* the revision names refs/REV and snapshots/REV in the cache: checked
     * after percent-decoding (@..%2F..%2F.. is ../../..) like a git ref
     * name: no NUL or control character, no '\\', no empty, '.'-led or
     * ".." component, no leading or trailing '/' */
    int bad = 0;
    for (size_t i = 0; i + 2 < rl; i++)
        if (rev[i] == '%' && rev[i + 1] == '0' && rev[i + 2] == '0') bad = 1; /* %00: a NUL */
    char *drev = pct_decode(rev, rl);
    if (!drev) return pi_err(-ENOMEM, "%s: out of memory", uri);
    size_t dl = strlen(drev);
    if (bad || dl == 0 || drev[0] == '/' || drev[dl - 1] == '/' || strstr(drev, "//") || strstr(drev, "..") ||
        strchr(drev, '\\'))
        bad = 1;
    for (size_t i = 0; !bad && i < dl; i++) {
        if ((unsigned char)drev[i] < 0x20 || drev[i] == 0x7f) bad = 1;
        if ((i == 0 || drev[i - 1] == '/') && drev[i] == '.') bad = 1; /* ".", "..", ".hidden" components */
    }
    if (bad) {
        int rc = pi_err(PAGEIN_E_INVALID, "%s: invalid revision '%.200s' (it would name a path: no '..', '.'-led or "
                        "empty component, leading '/', NUL or control character)", uri, drev);
        pi_free(drev);
        return rc;
    }
    pi_free(drev);
    r->kind = pi_strndup(kind, strlen(kind));
    r->repo = pi_strndup(p, (size_t)(nm + nl - p));
    r->rev = pct_decode(rev, rl);
    r->path = pi_strndup(path, strlen(path));
    if (!r->kind || !r->repo || !r->rev || !r->path) {
        pi_hf_ref_free(r);
        return pi_err(-ENOMEM, "%s: out of memory", uri);
    }
    return 0;
}


/* The token, or "" (read into out). */
static void hf_token(char *out, size_t cap) {
    const char *t = pi_env("HF_TOKEN");
    if (!t) t = pi_env("HUGGING_FACE_HUB_TOKEN");
    out[0] = 0;
    if (t) {
        snprintf(out, cap, "%s", t);
        return;
    }
    char path[1024];
    if (pi_env("HF_TOKEN_PATH")) snprintf(path, sizeof path, "%s", pi_env("HF_TOKEN_PATH"));
    else if (pi_env("HF_HOME")) snprintf(path, sizeof path, "%s/token", pi_env("HF_HOME"));
    else snprintf(path, sizeof path, "%s/.cache/huggingface/token", pi_env("HOME") ? pi_env("HOME") : "");
    FILE *f = fopen(path, "re");
    if (!f) return;
    if (fgets(out, (int)cap, f)) out[strcspn(out, "\r\n \t")] = 0;
    else out[0] = 0;
    fclose(f);
}

static int hf_match(const char *uri) { return strncasecmp(uri, "hf://", 5) == 0; }

/* The endpoint behind every hf:// URL (ops.origin: the metadata cache's
 * key), as the environment names it. */
static void hf_origin(const char *uri, char *out, size_t cap) {
    const char *v = pi_env("HF_ENDPOINT");
    snprintf(out, cap, "%s", v ? v : "https://huggingface.co");
}

/* The resolve URL of (ref, path) into url. */
static void resolve_url(const struct pi_hf_ref *r, const char *path, char *url, size_t cap) {
    const char *ep = pi_env("HF_ENDPOINT") ? pi_env("HF_ENDPOINT") : "https://huggingface.co";
    size_t el = strlen(ep);
    while (el && ep[el - 1] == '/') el--;
    snprintf(url, cap, "%.*s/%s%s/resolve/", (int)el, ep, strcmp(r->kind, "datasets") == 0 ? "datasets/" : "",
             r->repo);
    pi_url_encode(url, cap, r->rev, 0);
    size_t l = strlen(url);
    snprintf(url + l, cap - l, "/");
    pi_url_encode(url, cap, path, 1);
}

static int hf_open(struct pi_source *s, const char *uri, uint32_t flags) {
    struct pi_hf_ref r;
    FORWARD_IF(pi_hf_parse(uri, &r));
    if (!r.path[0] || r.path[strlen(r.path) - 1] == '/') {
        pi_hf_ref_free(&r);
        return pi_err(PAGEIN_E_INVALID, "%s: names a repository, not a file (open a file in it, or pull it)", uri);
    }
    char *url = pi_malloc(8192);
    char tok[1024], auth[1100];
    if (!url) {
        pi_hf_ref_free(&r);
        return pi_err(-ENOMEM, "%s: out of memory", uri);
    }
    url[0] = 0;
    resolve_url(&r, r.path, url, 8192);
    struct pi_http_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.url = url;
    cfg.scheme = "hf";
    hf_token(tok, sizeof tok);
    if (tok[0]) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", tok);
        cfg.headers[0] = auth;
    }
    int rc = pi_http_open_cfg(s, &cfg, flags);
    if (rc < 0) pi_err_prefix(uri);
    pi_free(url);
    pi_hf_ref_free(&r);
    return rc;
}

/* For pull: the resolve URL of another file of the same repo. */
int pi_hf_file_url(const struct pi_hf_ref *r, const char *path, char *url, size_t cap) {
    url[0] = 0;
    resolve_url(r, path, url, cap);
    return 0;
}

/* The files of the Hub's listing: per file its path in the repository and
 * its id (the LFS sha256, else the git blob id; "" when not stated), NUL
 * after each, in b; its size in size[] (PI_SIZE_UNKNOWN when not stated). */
struct hf_files {
    struct pi_buf b;
    uint64_t *size;
    size_t n, cap;
};

static void hf_files_free(struct hf_files *f) {
    pi_buf_free(&f->b);
    pi_free(f->size);
    memset(f, 0, sizeof *f);
}

/* v (vl bytes, not NUL-terminated) into out lower-case when it is hex
 * digits only and fits; else out stays "". */
static void hex_id(const char *v, size_t vl, char *out, size_t cap) {
    if (vl == 0 || vl >= cap) return;
    for (size_t i = 0; i < vl; i++)
        if (!isxdigit((unsigned char)v[i])) return;
    for (size_t i = 0; i < vl; i++) out[i] = (char)tolower((unsigned char)v[i]);
    out[vl] = 0;
}

/* One entry of "siblings": {"rfilename", "size", "blobId", "lfs": {"sha256"}}. */
static int hf_sibling(struct pi_json *j, struct hf_files *f) {
    const char *key, *v, *name = NULL;
    size_t kl, vl, nl = 0;
    char blob[96] = "", sha[96] = "";
    uint64_t size = PI_SIZE_UNKNOWN;
    int rc = pi_json_enter(j, PI_JSON_OBJECT);
    while (rc >= 0 && (rc = pi_json_next(j, &key, &kl)) > 0) {
        if (kl == 9 && !memcmp(key, "rfilename", 9)) {
            rc = pi_json_string(j, &v, &vl);
            if (rc >= 0 && vl > 0 && !memchr(v, 0, vl)) name = v, nl = vl;
        } else if (kl == 4 && !memcmp(key, "size", 4) && pi_json_peek(j) == PI_JSON_NUMBER) {
            rc = pi_json_u64(j, &size);
        } else if (kl == 6 && !memcmp(key, "blobId", 6) && pi_json_peek(j) == PI_JSON_STRING) {
            if ((rc = pi_json_string(j, &v, &vl)) >= 0) hex_id(v, vl, blob, sizeof blob);
        } else if (kl == 3 && !memcmp(key, "lfs", 3) && pi_json_peek(j) == PI_JSON_OBJECT) {
            rc = pi_json_enter(j, PI_JSON_OBJECT);
            while (rc >= 0 && (rc = pi_json_next(j, &key, &kl)) > 0) {
                if (kl == 6 && !memcmp(key, "sha256", 6) && pi_json_peek(j) == PI_JSON_STRING) {
                    if ((rc = pi_json_string(j, &v, &vl)) >= 0) hex_id(v, vl, sha, sizeof sha);
                } else {
                    rc = pi_json_skip(j);
                }
            }
        } else {
            rc = pi_json_skip(j);
        }
    }
    if (rc < 0 || !name) return rc;
    if (pi_grow((void **)&f->size, &f->cap, f->n + 1, sizeof *f->size) < 0) return -ENOMEM;
    f->size[f->n++] = size;
    pi_buf_put(&f->b, name, nl);
    pi_buf_put(&f->b, "", 1);
    pi_buf_put(&f->b, sha[0] ? sha : blob, strlen(sha[0] ? sha : blob) + 1);
    return f->b.oom ? -ENOMEM : 0;
}

/* The Hub's file listing (GET HF_ENDPOINT/api/models/REPO/revision/REV,
 * blobs=true: with sizes and ids) into *f. src names the request in
 * messages. */
static int hf_list_files(const char *src, const struct pi_hf_ref *r, struct hf_files *f) {
    memset(f, 0, sizeof *f);
    const char *ep = pi_env("HF_ENDPOINT") ? pi_env("HF_ENDPOINT") : "https://huggingface.co";
    char url[4096], auth[1200], tok[1024] = "";
    snprintf(url, sizeof url, "%s/api/%s/%s/revision/", ep, r->kind, r->repo);
    pi_url_encode(url, sizeof url, r->rev, 0); /* refs/pr/1 -> refs%2Fpr%2F1, as huggingface_hub asks */
    size_t ul = strlen(url);
    snprintf(url + ul, sizeof url - ul, "?blobs=true");
    const char *t = pi_env("HF_TOKEN") ? pi_env("HF_TOKEN") : pi_env("HUGGING_FACE_HUB_TOKEN");
    if (t) snprintf(tok, sizeof tok, "%s", t);
    struct pi_http_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.url = url;
    if (tok[0]) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", tok);
        cfg.headers[0] = auth;
    }
    char *body;
    size_t len;
    long status = 0;
    FORWARD_IF(pi_http_fetch(&cfg, &body, &len, 64u << 20, &status));
    int rc = 0;
    if (status != 200) {
        rc = pi_err(PAGEIN_E_REMOTE, "%s: GET %s (repository listing): HTTP %ld", src, url, status);
        pi_free(body);
        return rc;
    }
    struct pi_json j;
    pi_json_init(&j, body, len, 0);
    const char *key;
    size_t kl;
    rc = pi_json_enter(&j, PI_JSON_OBJECT);
    while (rc >= 0 && (rc = pi_json_next(&j, &key, &kl)) > 0) {
        if (kl == 8 && !memcmp(key, "siblings", 8)) {
            rc = pi_json_enter(&j, PI_JSON_ARRAY);
            while (rc >= 0 && (rc = pi_json_next(&j, NULL, NULL)) > 0) rc = hf_sibling(&j, f);
        } else {
            rc = pi_json_skip(&j);
        }
    }
    if (rc == -ENOMEM) {
        rc = pi_err(-ENOMEM, "%s: out of memory", src);
    } else if (rc < 0 && rc != PAGEIN_E_INVALID) {
        char d[300];
        snprintf(d, sizeof d, "%s", pagein_last_error_detail());
        rc = pi_err(PAGEIN_E_REMOTE, "%s: GET %s: the listing is not the Hub's JSON: %s", src, url, d);
    }
    pi_json_free(&j);
    pi_free(body);
    if (rc < 0) hf_files_free(f);
    return rc < 0 ? rc : 0;
}

/* A prefix: the repository (no path) or a folder of it (path ends '/'). */
static int hf_is_prefix(const char *uri) {
    struct pi_hf_ref r;
    if (pi_hf_parse(uri, &r) < 0) {
        pi_err_clear();
        return 0;
    }
    int pre = !r.path[0] || r.path[strlen(r.path) - 1] == '/';
    pi_hf_ref_free(&r);
    return pre;
}

/* The list op: the files of the repository under the URI's path, each as
 * hf://[datasets/]ORG/NAME@REV/PATH (the revision always, percent-encoded:
 * refs/pr/1 -> refs%2Fpr%2F1, a '/' would end it), named relative to the
 * path. The Hub's listing states neither sizes nor ids. */
static int hf_list(const char *uri, pi_list_fn fn, void *arg) {
    struct pi_hf_ref r;
    FORWARD_IF(pi_hf_parse(uri, &r));
    struct hf_files f;
    int rc = hf_list_files(uri, &r, &f);
    char erev[768] = "";
    pi_url_encode(erev, sizeof erev, r.rev, 0);
    size_t pl = strlen(r.path);
    struct pi_buf u = {0};
    const char *q = f.b.p;
    for (size_t i = 0; rc == 0 && i < f.n; i++) {
        size_t l = strlen(q);
        const char *id = q + l + 1, *name = q;
        q = id + strlen(id) + 1;
        if (l <= pl || strncmp(name, r.path, pl) != 0) continue;
        u.n = 0;
        pi_buf_str(&u, "hf://");
        if (!strcmp(r.kind, "datasets")) pi_buf_str(&u, "datasets/");
        pi_buf_str(&u, r.repo);
        pi_buf_str(&u, "@");
        pi_buf_str(&u, erev);
        pi_buf_str(&u, "/");
        pi_buf_put(&u, name, l + 1);
        if (u.oom) {
            rc = pi_err(-ENOMEM, "%s: out of memory listing", uri);
            break;
        }
        struct pi_list_entry e = {.uri = u.p, .rel = name + pl, .size = f.size[i], .identity = id};
        rc = fn(arg, &e);
    }
    pi_buf_free(&u);
    hf_files_free(&f);
    pi_hf_ref_free(&r);
    return rc;
}

static int hf_checksum(struct pi_source *s, struct pi_checksum *c) { return pi_http_checksum(s, c, 0); }

/* A file keeps its path in the repository (sub/x.gguf). */
static int hf_object_name(const char *uri, char *out, size_t cap) {
    struct pi_hf_ref r;
    FORWARD_IF(pi_hf_parse(uri, &r));
    snprintf(out, cap, "%s", r.path);
    pi_hf_ref_free(&r);
    return 0;
}

/* ---- the Hugging Face cache layout (pull without a destination) ---------- */
static void hf_cache_root(const char *cache_dir, char *out, size_t cap) {
    if (cache_dir) snprintf(out, cap, "%s", cache_dir);
    else if (pi_env("HF_HUB_CACHE")) snprintf(out, cap, "%s", pi_env("HF_HUB_CACHE"));
    else if (pi_env("HUGGINGFACE_HUB_CACHE")) snprintf(out, cap, "%s", pi_env("HUGGINGFACE_HUB_CACHE"));
    else if (pi_env("HF_HOME")) snprintf(out, cap, "%s/hub", pi_env("HF_HOME"));
    else if (pi_env("XDG_CACHE_HOME")) snprintf(out, cap, "%s/huggingface/hub", pi_env("XDG_CACHE_HOME"));
    else snprintf(out, cap, "%s/.cache/huggingface/hub", pi_env("HOME") ? pi_env("HOME") : ".");
}

/* repo folder: models--org--name */
static void hf_repo_dir(const char *root, const struct pi_hf_ref *r, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s/%s--", root, r->kind);
    for (const char *p = r->repo; *p && n + 3 < (int)cap; p++) {
        if (*p == '/') n += snprintf(out + n, cap - (size_t)n, "--");
        else out[n++] = *p, out[n] = 0;
    }
}

static int is_commit_hash(const char *s) {
    size_t n = strlen(s);
    if (n != 40 && n != 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

/* Where huggingface_hub keeps the file: ROOT/models--ORG--NAME/blobs/HASH,
 * snapshots/COMMIT/PATH -> ../../blobs/HASH, refs/REVISION = COMMIT (when
 * the revision is not the commit), so transformers and huggingface_hub
 * find it. */
static int hf_cache_place(struct pi_source *s, const char *cache_dir, struct pi_cache_place *p) {
    struct pi_hf_ref r;
    FORWARD_IF(pi_hf_parse(s->name, &r));
    char root[2048], repo[3072], commit[100], hash[200];
    int rc = 0;
    memset(p, 0, sizeof *p);
    hf_cache_root(cache_dir, root, sizeof root);
    hf_repo_dir(root, &r, repo, sizeof repo);
    /* blob name: the LFS sha256, else the ETag (the git blob id), unquoted,
     * as the Hub itself (never a redirect target) states them; 40 or 64
     * hex digits, or it names nothing on disk */
    const char *id = pi_http_linked_etag(s)[0] ? pi_http_linked_etag(s) : pi_http_origin_etag(s);
    /* the snapshot folder: X-Repo-Commit, a commit hash (40 or 64 hex
     * digits: it becomes a path); huggingface_hub files a revision (main,
     * refs/pr/1) under the commit the Hub states and refs/REVISION, so
     * without one only a revision that is itself a commit names a snapshot */
    const char *said = pi_http_repo_commit(s);
    if (!pi_hex_tag(id, 64, hash) && !pi_hex_tag(id, 40, hash)) {
        /* a static mirror (nginx: ETag "mtime-size"): the puller names the
         * blob by the sha256 of the bytes, as the Hub names an LFS blob */
        p->name_by_content = 1;
        snprintf(hash, sizeof hash, ".pagein-unnamed-%016llx", (unsigned long long)pi_hash_bytes(s->name, strlen(s->name)));
    }
    if (said[0] && !pi_hex_tag(said, 40, commit) && !pi_hex_tag(said, 64, commit)) {
        rc = pi_err(PAGEIN_E_REMOTE, "%s: X-Repo-Commit '%.100s' is not a commit hash (40 or 64 hex digits): refused "
                    "(it would name a folder of the cache)", s->name, said);
    } else if (!said[0] && !is_commit_hash(r.rev)) {
        rc = pi_err(PAGEIN_E_REMOTE, "%s: the server states no X-Repo-Commit and revision '%s' is not a commit hash: "
                    "cannot place it under snapshots/COMMIT/ in the Hugging Face cache", s->name, r.rev);
    }
    if (rc == 0) {
        if (!said[0]) snprintf(commit, sizeof commit, "%s", r.rev);
        snprintf(p->blob, sizeof p->blob, "%s/blobs/%s", repo, hash);
        snprintf(p->link, sizeof p->link, "%s/snapshots/%s/%s", repo, commit, r.path);
        snprintf(p->dir, sizeof p->dir, "%s/snapshots/%s", repo, commit);
        /* ../../blobs/HASH plus one ../ per directory inside the snapshot */
        int n = snprintf(p->target, sizeof p->target, "../../");
        for (const char *c = r.path; *c; c++)
            if (*c == '/') n += snprintf(p->target + n, sizeof p->target - (size_t)n, "../");
        snprintf(p->target + n, sizeof p->target - (size_t)n, "blobs/%s", hash);
        if (strcmp(commit, r.rev) != 0) {
            snprintf(p->ref, sizeof p->ref, "%s/refs/%s", repo, r.rev);
            snprintf(p->ref_text, sizeof p->ref_text, "%s", commit);
        }
    }
    pi_hf_ref_free(&r);
    return rc;
}

/* A revision that is a commit hash names bytes that cannot change. */
static int hf_pinned(const char *uri) {
    struct pi_hf_ref r;
    int pinned = 0;
    if (pi_hf_parse(uri, &r) == 0) pinned = is_commit_hash(r.rev);
    else pi_err_clear();
    pi_hf_ref_free(&r);
    return pinned;
}

const struct pi_source_ops pi_source_hf = {
    .name = "hf",
    .schemes = "hf://",
    .remote = 1,
    .match = hf_match,
    .open = hf_open,
    .readv = pi_http_readv,
    .read = pi_http_read,
    .close = pi_http_close,
    .is_prefix = hf_is_prefix,
    .list = hf_list,
    .deep_prefix = 1, /* a dataset's shards sit in data/... of the repository */
    .object_name = hf_object_name,
    .checksum = hf_checksum,
    .cache_place = hf_cache_place,
    .counters = pi_http_counters,
    .ranges_ignored = pi_http_no_ranges,
    .stream = pi_http_stream,
    .pinned = hf_pinned,
    .origin = hf_origin,
};

#endif /* PAGEIN_HAVE_CURL */
