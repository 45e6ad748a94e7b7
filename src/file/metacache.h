/* metacache.h - the metadata cache (file/metacache.c; docs/REMOTE.md
 * "Metadata cache"): the header bytes of remote objects and of files on
 * network or FUSE filesystems, kept on local disk so that opening them again
 * costs no header reads. Private to the file layer. */
#ifndef PAGEIN_FILE_METACACHE_H
#define PAGEIN_FILE_METACACHE_H

#include "../internal.h"
#include "../source/source.h"

/* One entry as read back: the identity and size it was stored for, the
 * format, and the header bytes (malloc'd; the caller owns hdr). */
struct pi_meta {
    char identity[160];
    uint64_t size;
    pagein_format format;
    uint8_t *hdr;
    size_t len;
    int64_t checked_ns; /* when the entry was last checked against its source (its mtime) */
    int check_bytes;    /* set by the opener: the source was opened with PI_OPEN_PROBE_ONLY, so its first
                           PI_PROBE_CHECK_BYTES are at hand and the entry's header is compared with them */
};

/* The key of a remote object: "url " + the URL with credentials and
 * signatures redacted, then the origin the URL resolves to when its text
 * does not name it (" origin=" HF_ENDPOINT for hf://, the S3 endpoint and
 * profile for s3://, GS_ENDPOINT_URL for gs://) (malloc'd; NULL when out of
 * memory). */
char *pi_meta_remote_key(const char *url);
/* 1 if a source identity may validate an entry: a strong ETag or a hash
 * (not empty, not a weak W/ ETag). */
int pi_meta_identity_ok(const char *id);
/* Content identity, not only a claimed one: 1 if an entry's header bytes
 * hdr[0, len) equal the source's own over their first PI_PROBE_CHECK_BYTES.
 * For a source opened with PI_OPEN_PROBE_ONLY, whose open fetched those
 * bytes in its one request: the compare costs no request. A mirror or an
 * origin that sent the right ETag or sha256 with other header bytes (two
 * tensors swapped) then costs a fresh read of the header, which replaces
 * the entry, instead of the entry's tensors being handed out. Opens with
 * no request (a listing's ETags, a pinned commit) are not compared: their
 * identity is the origin's own answer for many objects at once. */
int pi_meta_bytes_match(struct pi_source *src, const uint8_t *hdr, size_t len);
/* 0 when PAGEIN_META_CACHE=0 or no cache directory can be named. */
int pi_meta_enabled(void);
/* 1 if the local file on device dev is on a network or FUSE filesystem
 * (mountinfo, once per device per process), else 0. */
int pi_meta_dev_is_remote(dev_t dev);
/* Reads the entry stored under key: 1 with *m filled (m->hdr malloc'd), 0
 * when there is none or it is unusable (corrupt, truncated, foreign,
 * a symlink: such an entry is removed). Never fails otherwise. */
int pi_meta_get(const char *key, struct pi_meta *m);
/* The one lookup before opening path: for a remote URL with the cache on,
 * *key (malloc'd; NULL otherwise or when out of memory) and 1 with *m
 * filled (as pi_meta_get) when the cache holds an entry; else 0 with *m
 * zeroed. Free m->hdr and *key with pi_free in either case. */
int pi_meta_lookup(const char *path, char **key, struct pi_meta *m);
/* The entry under key was checked against its source just now (or used
 * after such a check): its mtime, the LRU clock and the age that
 * PAGEIN_META_TRUST_SECONDS reads, becomes now. A use that only trusted the
 * entry does not call it, so trust ends N seconds after the last check. */
void pi_meta_touch(const char *key);
/* Decodes an entry's bytes b[0, n) for key: 1 with *m filled (m->hdr
 * points into b), 0 for a valid entry of another key, -1 if damaged (bad
 * magic, lengths that do not add up to n, checksum). The parser
 * fuzz/fuzz_metacache.c drives. */
int pi_meta_decode(const uint8_t *b, size_t n, const char *key, struct pi_meta *m);
/* The checksum an entry ends with, over the bytes before it. */
uint64_t pi_meta_sum(const void *p, size_t n);
/* Stores hdr[0, len) under key for (identity, size, format), replacing any
 * entry (a temporary file renamed over it; 0600 in a 0700 directory), then
 * keeps the directory under PAGEIN_META_CACHE_MAX. Best effort: a failure
 * leaves no entry and is not reported. */
void pi_meta_put(const char *key, const char *identity, uint64_t size, pagein_format format, const uint8_t *hdr,
                 size_t len);

/* ---- checking many entries with one request ----------------- */
/* What one check said about the objects of a folder: their sizes and
 * identities from a listing (s3://, gs://: ListObjectsV2 carries every
 * key's ETag and size, one request per 1,000 keys), or that every object
 * under it is immutable (hf://ORG/NAME@<40-hex commit>: the commit pins the
 * bytes, so an entry keyed by such a URL is valid with no request). Plain
 * HTTP has neither: its entries are checked one request each. */
struct pi_meta_vouch {
    int pinned;
    int64_t trust_ns; /* PAGEIN_META_TRUST_SECONDS (opt-in): entries checked this recently need no check */
    struct pi_stat_entry *v; /* sorted by uri */
    size_t n;
    unsigned requests; /* what the check cost */
};
/* Fills *v for the folder dir_uri (the folder of an index, or of the
 * first shard). Best effort: a folder no check covers, a listing that
 * fails or is refused leave *v empty (each object is then checked by its
 * own request), and no error is reported. */
void pi_meta_vouch_dir(const char *dir_uri, struct pi_meta_vouch *v);
/* Whether the check covers uri: 0 no; 1 with *size and *identity (points
 * into v) as listed; 2 pinned (any entry of uri is valid); 3 trusted by
 * age (valid if m->checked_ns is within v->trust_ns of now: the caller
 * asks pi_meta_trusted). */
int pi_meta_vouched(const struct pi_meta_vouch *v, const char *uri, uint64_t *size, const char **identity);
void pi_meta_vouch_free(struct pi_meta_vouch *v);
/* 1 if entry m may be used for uri without a request: vouched by v's
 * listing (same size and identity), pinned, or (opt-in) checked within
 * PAGEIN_META_TRUST_SECONDS; *trusted says it was the last (no check
 * happened: the caller must not pi_meta_touch). */
int pi_meta_usable(const struct pi_meta_vouch *v, const char *uri, const struct pi_meta *m, int *trusted);
/* pagein_open, where the check v (NULL: none) may stand for the request
 * that checks path's entry (file/file.c): with an entry that v vouches
 * for, a remote file opens with no request at all (PI_OPEN_KNOWN). */
int pi_file_open_vouched(pagein_file **out, const char *path, const pagein_open_opts *opts,
                         const struct pi_meta_vouch *v);

#endif
