/* json.h - the core's JSON pull reader and writer helpers (core/json.c).
 * No I/O; used by every layer above the core (format headers, indexes,
 * manifests, remote listings, pull's metadata). */
#ifndef PAGEIN_CORE_JSON_H
#define PAGEIN_CORE_JSON_H

#include "../internal.h"

#include <stdbool.h>

/* ==== JSON (core/json.c) =============================================== */
/*
 * A pull reader for JSON over (buf, len): no DOM, no recursion (nesting is
 * tracked in a fixed stack, so input cannot drive the C stack deep), strict
 * RFC 8259 syntax, strict UTF-8, every string escape including \uXXXX
 * surrogate pairs (lone surrogates are rejected). Used by the safetensors
 * header, the sharded `*.index.json` and integrity manifests.
 *
 * Walk a document like this:
 *
 *     struct pi_json j;
 *     pi_json_init(&j, buf, len, 0);
 *     rc = pi_json_enter(&j, PI_JSON_OBJECT);          // consumes '{'
 *     while ((rc = pi_json_next(&j, &key, &klen)) > 0) { // 1: a member follows
 *         if (klen == 4 && !memcmp(key, "name", 4)) rc = pi_json_string(&j, &s, &n);
 *         else rc = pi_json_skip(&j);                   // any value, iteratively
 *         if (rc < 0) break;
 *     }                                                 // 0: '}' consumed
 *     if (rc == 0) rc = pi_json_finish(&j);             // only whitespace left
 *     pi_json_free(&j);
 *
 * Errors (negative returns, detail says the byte offset): PAGEIN_E_BAD_JSON
 * (syntax, unexpected end, lone surrogate, control character in a string),
 * PAGEIN_E_BAD_UTF8, PAGEIN_E_LIMIT (nesting deeper than max_depth),
 * PAGEIN_E_BAD_TYPE (the value is not of the requested type; nothing is
 * consumed), PAGEIN_E_OVERFLOW (integer does not fit uint64), -ENOMEM.
 * After an error the reader must not be used again except for pi_json_free.
 *
 * Strings and keys are returned as (pointer, length): the decoded text may
 * contain NUL bytes. A string without escapes points into buf; one with
 * escapes is decoded into a buffer owned by the reader (allocated once, at
 * most len + 1 bytes, on the first escape) and NUL-terminated. Either way
 * the pointer stays valid until pi_json_free() (and buf outlives it).
 */
#define PI_JSON_MAX_DEPTH 128

enum pi_json_type {
    PI_JSON_OBJECT = 1,
    PI_JSON_ARRAY,
    PI_JSON_STRING,
    PI_JSON_NUMBER,
    PI_JSON_TRUE,
    PI_JSON_FALSE,
    PI_JSON_NULL
};

struct pi_json {
    const uint8_t *buf;
    size_t len, pos;
    uint32_t depth, max_depth;
    bool utf8_checked;  /* caller validated all of buf: skip per-string UTF-8 checks */
    char *dec;          /* decoded strings (NULL until the first escape) */
    size_t dec_used;
    uint8_t kind[PI_JSON_MAX_DEPTH];  /* '{' or '[' per open container */
    uint8_t first[PI_JSON_MAX_DEPTH]; /* 1 until the container's first member */
};

/* Starts reading buf. max_depth 0 or > PI_JSON_MAX_DEPTH means PI_JSON_MAX_DEPTH. */
void pi_json_init(struct pi_json *j, const void *buf, size_t len, uint32_t max_depth);
void pi_json_free(struct pi_json *j);
/* Type of the next value (skips whitespace, consumes nothing): a
 * PI_JSON_* >= 1, or PAGEIN_E_BAD_JSON (end of input / not a value). */
int pi_json_peek(struct pi_json *j);
/* Consumes '{' (type PI_JSON_OBJECT) or '[' (PI_JSON_ARRAY). */
int pi_json_enter(struct pi_json *j, int type);
/* In the innermost open container: returns 1 if a member follows (for an
 * object its key is decoded into key/klen, either may be NULL, and the
 * ':' consumed; the caller must then consume the value), 0 if the
 * container ended (its closing bracket consumed), or an error. */
int pi_json_next(struct pi_json *j, const char **key, size_t *klen);
int pi_json_string(struct pi_json *j, const char **s, size_t *len);
/* A non-negative integer without fraction or exponent. Negative numbers,
 * fractions and exponents give PAGEIN_E_BAD_TYPE. */
int pi_json_u64(struct pi_json *j, uint64_t *v);
/* Any number: its validated text (points into buf). */
int pi_json_number(struct pi_json *j, const char **text, size_t *len);
int pi_json_bool(struct pi_json *j, bool *v);
int pi_json_null(struct pi_json *j);
/* Consumes the next value whatever it is (objects and arrays iteratively,
 * still validating syntax, UTF-8 and the depth limit). */
int pi_json_skip(struct pi_json *j);
/* After the top-level value: only JSON whitespace may remain. */
int pi_json_finish(struct pi_json *j);
/* Current byte offset (for messages). */
static inline size_t pi_json_offset(const struct pi_json *j) { return j->pos; }
/* True if s[0..n) is valid UTF-8 (no overlongs, surrogates or code points
 * above U+10FFFF); otherwise false and *bad (may be NULL) = first bad byte. */
bool pi_utf8_valid(const uint8_t *s, size_t n, size_t *bad);
/* Appends s[0..n) as a JSON string literal with serde_json's escaping
 * (\" \\ \b \f \n \r \t, other control bytes as \u00xx, everything
 * else verbatim) to dst, which must have room for pi_json_quoted_len(s, n). */
size_t pi_json_quoted_len(const char *s, size_t n);
char *pi_json_quote(char *dst, const char *s, size_t n);
/* Appends s to b as a JSON string ("null" for NULL): valid UTF-8 quoted,
 * otherwise each byte outside printable ASCII as \u00XX. */
void pi_json_buf_str(struct pi_buf *b, const char *s);
/* ==== end JSON ============================================================ */

#endif
