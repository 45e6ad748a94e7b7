/* json.c - a strict, iterative JSON pull reader (see the JSON section of
 * src/internal.h for the API and its contract).
 *
 * Why a pull reader: the safetensors header, the sharded index and the
 * manifests all have a fixed, shallow schema. Walking the text directly
 * lets each caller build its own table without an intermediate DOM, and
 * allocation stays proportional to the input (at most one decode buffer of
 * len + 1 bytes). Nesting is kept in a fixed-size stack in the reader, so no
 * input can make the C stack grow. */
#include "json.h"

#include <stdio.h>

static int jerr(struct pi_json *j, int code, const char *what) {
    return pi_err(code, "JSON at byte %zu: %s", j->pos, what);
}

void pi_json_init(struct pi_json *j, const void *buf, size_t len, uint32_t max_depth) {
    memset(j, 0, offsetof(struct pi_json, kind));
    j->buf = buf;
    j->len = len;
    j->max_depth = (max_depth == 0 || max_depth > PI_JSON_MAX_DEPTH) ? PI_JSON_MAX_DEPTH : max_depth;
}

void pi_json_free(struct pi_json *j) {
    if (!j) return;
    pi_free(j->dec);
    j->dec = NULL;
}

static inline void skip_ws(struct pi_json *j) {
    const uint8_t *p = j->buf;
    size_t i = j->pos, n = j->len;
    while (i < n && (p[i] == ' ' || p[i] == '\n' || p[i] == '\r' || p[i] == '\t')) i++;
    j->pos = i;
}

/* ---- UTF-8 --------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s[0..n) (s[0] >= 0x80), 0 if invalid.
 * Table 3-7 of the Unicode standard: no overlongs, no surrogates, <= U+10FFFF. */
static size_t utf8_seq(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    if (c >= 0xC2 && c <= 0xDF) return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (n < 3 || (s[2] & 0xC0) != 0x80) return 0;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
        return (s[1] >= lo && s[1] <= hi) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (n < 4 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
        return (s[1] >= lo && s[1] <= hi) ? 4 : 0;
    }
    return 0;
}

bool pi_utf8_valid(const uint8_t *s, size_t n, size_t *bad) {
    size_t i = 0;
    while (i < n) {
        /* ASCII fast path, 8 bytes at a time */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = utf8_seq(s + i, n - i);
        if (!k) {
            if (bad) *bad = i;
            return false;
        }
        i += k;
    }
    return true;
}

/* ---- values -------------------------------------------------------------- */

int pi_json_peek(struct pi_json *j) {
    skip_ws(j);
    if (j->pos >= j->len) return jerr(j, PAGEIN_E_BAD_JSON, "unexpected end of input");
    switch (j->buf[j->pos]) {
    case '{': return PI_JSON_OBJECT;
    case '[': return PI_JSON_ARRAY;
    case '"': return PI_JSON_STRING;
    case 't': return PI_JSON_TRUE;
    case 'f': return PI_JSON_FALSE;
    case 'n': return PI_JSON_NULL;
    case '-': case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9': return PI_JSON_NUMBER;
    default: return jerr(j, PAGEIN_E_BAD_JSON, "expected a value");
    }
}

static int expect_type(struct pi_json *j, int type) {
    int t = pi_json_peek(j);
    if (t < 0) return t;
    if (t != type) {
        static const char *const names[] = {"", "an object", "an array", "a string", "a number",
                                            "true", "false", "null"};
        char msg[64];
        snprintf(msg, sizeof msg, "expected %s", names[type]);
        return jerr(j, PAGEIN_E_BAD_TYPE, msg);
    }
    return 0;
}

int pi_json_enter(struct pi_json *j, int type) {
    if (type != PI_JSON_OBJECT && type != PI_JSON_ARRAY) return jerr(j, PAGEIN_E_INVALID, "enter: bad type");
    FORWARD_IF(expect_type(j, type));
    if (j->depth >= j->max_depth) {
        char msg[64];
        snprintf(msg, sizeof msg, "nesting deeper than %u", j->max_depth);
        return jerr(j, PAGEIN_E_LIMIT, msg);
    }
    j->kind[j->depth] = j->buf[j->pos];
    j->first[j->depth] = 1;
    j->depth++;
    j->pos++;
    return 0;
}

static int hex4(const uint8_t *p, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int d = pi_hexval(p[i]);
        if (d < 0) return -1;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *d, uint32_t cp) {
    if (cp < 0x80) {
        d[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (char)(0xC0 | (cp >> 6));
        d[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (char)(0xE0 | (cp >> 12));
        d[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (char)(0xF0 | (cp >> 18));
    d[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    d[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    d[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes escapes of the raw string body p[0..n) (already scanned: no bare
 * control bytes, valid UTF-8, escapes well delimited) into j->dec. */
static int decode_escapes(struct pi_json *j, size_t body, size_t n, const char **s, size_t *len) {
    if (!j->dec) {
        /* Every escape decodes to at most as many bytes as it takes in the
         * input, and each string's quotes leave room for its NUL, so len + 1
         * bytes hold every decoded string of the document. */
        j->dec = pi_malloc(j->len + 1);
        if (!j->dec) return pi_err(-ENOMEM, "JSON: out of memory decoding a string");
        j->dec_used = 0;
    }
    const uint8_t *p = j->buf + body;
    char *out = j->dec + j->dec_used, *d = out;
    size_t i = 0;
    while (i < n) {
        if (p[i] != '\\') {
            *d++ = (char)p[i++];
            continue;
        }
        uint8_t e = p[i + 1];
        i += 2;
        switch (e) {
        case '"': *d++ = '"'; break;
        case '\\': *d++ = '\\'; break;
        case '/': *d++ = '/'; break;
        case 'b': *d++ = '\b'; break;
        case 'f': *d++ = '\f'; break;
        case 'n': *d++ = '\n'; break;
        case 'r': *d++ = '\r'; break;
        case 't': *d++ = '\t'; break;
        case 'u': {
            uint32_t cp = 0, lo = 0;
            hex4(p + i, &cp); /* validated by the scanner */
            i += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                hex4(p + i + 2, &lo);
                i += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            d += put_utf8(d, cp);
            break;
        }
        default: break; /* unreachable: the scanner rejected it */
        }
    }
    *d = 0;
    *s = out;
    *len = (size_t)(d - out);
    j->dec_used += *len + 1;
    return 0;
}

/* Scans the string literal at j->pos (a '"'), validating it, and returns its
 * decoded text. */
static int read_string(struct pi_json *j, const char **s, size_t *len) {
    const uint8_t *p = j->buf;
    size_t n = j->len, i = j->pos + 1, body = i;
    bool esc = false;
    for (;;) {
        /* fast path: 8 bytes at a time while none is '"', '\\', a control
         * byte or non-ASCII (SWAR: each test is exact about existence) */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
            uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
            uint64_t special = ((q - ones) & ~q) | ((b - ones) & ~b) | ((w - ones * 0x20) & ~w) | w;
            if (special & high) break;
            i += 8;
        }
        while (i < n && p[i] >= 0x20 && p[i] < 0x80 && p[i] != '"' && p[i] != '\\') i++;
        if (i >= n) {
            j->pos = i;
            return jerr(j, PAGEIN_E_BAD_JSON, "unterminated string");
        }
        uint8_t c = p[i];
        if (c == '"') break;
        if (c < 0x20) {
            j->pos = i;
            return jerr(j, PAGEIN_E_BAD_JSON, "control character in string");
        }
        if (c >= 0x80) {
            if (j->utf8_checked) {
                i++;
                continue;
            }
            size_t k = utf8_seq(p + i, n - i);
            if (!k) {
                j->pos = i;
                return jerr(j, PAGEIN_E_BAD_UTF8, "invalid UTF-8 in string");
            }
            i += k;
            continue;
        }
        /* backslash */
        esc = true;
        if (i + 1 >= n) {
            j->pos = i;
            return jerr(j, PAGEIN_E_BAD_JSON, "unterminated escape");
        }
        uint8_t e = p[i + 1];
        if (e == 'u') {
            uint32_t cp, lo;
            if (i + 6 > n || hex4(p + i + 2, &cp) < 0) {
                j->pos = i;
                return jerr(j, PAGEIN_E_BAD_JSON, "bad \\u escape");
            }
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                j->pos = i;
                return jerr(j, PAGEIN_E_BAD_JSON, "lone low surrogate in \\u escape");
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (i + 12 > n || p[i + 6] != '\\' || p[i + 7] != 'u' || hex4(p + i + 8, &lo) < 0 ||
                    lo < 0xDC00 || lo > 0xDFFF) {
                    j->pos = i;
                    return jerr(j, PAGEIN_E_BAD_JSON, "lone high surrogate in \\u escape");
                }
                i += 12;
            } else {
                i += 6;
            }
            continue;
        }
        if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' &&
            e != 't') {
            j->pos = i;
            return jerr(j, PAGEIN_E_BAD_JSON, "invalid escape");
        }
        i += 2;
    }
    j->pos = i + 1;
    if (!esc) {
        *s = (const char *)p + body;
        *len = i - body;
        return 0;
    }
    return decode_escapes(j, body, i - body, s, len);
}

int pi_json_string(struct pi_json *j, const char **s, size_t *len) {
    FORWARD_IF(expect_type(j, PI_JSON_STRING));
    const char *tmp;
    size_t tl;
    FORWARD_IF(read_string(j, &tmp, &tl));
    if (s) *s = tmp;
    if (len) *len = tl;
    return 0;
}

/* Validates the number at j->pos, leaving j->pos after it. */
static int scan_number(struct pi_json *j, bool *integer) {
    const uint8_t *p = j->buf;
    size_t n = j->len, i = j->pos;
    *integer = true;
    if (i < n && p[i] == '-') i++;
    if (i < n && p[i] == '0') {
        i++;
    } else if (i < n && p[i] >= '1' && p[i] <= '9') {
        while (i < n && p[i] >= '0' && p[i] <= '9') i++;
    } else {
        j->pos = i;
        return jerr(j, PAGEIN_E_BAD_JSON, "bad number");
    }
    if (i < n && p[i] == '.') {
        *integer = false;
        i++;
        if (i >= n || p[i] < '0' || p[i] > '9') {
            j->pos = i;
            return jerr(j, PAGEIN_E_BAD_JSON, "bad number fraction");
        }
        while (i < n && p[i] >= '0' && p[i] <= '9') i++;
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        *integer = false;
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-')) i++;
        if (i >= n || p[i] < '0' || p[i] > '9') {
            j->pos = i;
            return jerr(j, PAGEIN_E_BAD_JSON, "bad number exponent");
        }
        while (i < n && p[i] >= '0' && p[i] <= '9') i++;
    }
    j->pos = i;
    return 0;
}

int pi_json_number(struct pi_json *j, const char **text, size_t *len) {
    FORWARD_IF(expect_type(j, PI_JSON_NUMBER));
    size_t start = j->pos;
    bool integer;
    FORWARD_IF(scan_number(j, &integer));
    if (text) *text = (const char *)j->buf + start;
    if (len) *len = j->pos - start;
    return 0;
}

int pi_json_u64(struct pi_json *j, uint64_t *v) {
    FORWARD_IF(expect_type(j, PI_JSON_NUMBER));
    size_t start = j->pos;
    if (j->buf[start] == '-') return jerr(j, PAGEIN_E_BAD_TYPE, "expected a non-negative integer");
    /* one pass: accumulate digits, then let scan_number judge the rest */
    const uint8_t *p = j->buf;
    size_t i = start, n = j->len;
    uint64_t x = 0;
    bool ovf = false;
    while (i < n && p[i] >= '0' && p[i] <= '9') {
        if (pi_mul_overflow(x, 10, &x) || pi_add_overflow(x, (uint64_t)(p[i] - '0'), &x)) ovf = true;
        i++;
    }
    if (i < n && (p[i] == '.' || p[i] == 'e' || p[i] == 'E')) {
        bool integer;
        FORWARD_IF(scan_number(j, &integer)); /* a syntax error wins */
        j->pos = start;
        return jerr(j, PAGEIN_E_BAD_TYPE, "expected an integer");
    }
    if (p[start] == '0' && i - start > 1) {
        j->pos = start + 1;
        return jerr(j, PAGEIN_E_BAD_JSON, "leading zero in number");
    }
    if (ovf) return jerr(j, PAGEIN_E_OVERFLOW, "integer does not fit 64 bits");
    j->pos = i;
    if (v) *v = x;
    return 0;
}

static int literal(struct pi_json *j, const char *word, size_t n) {
    if (j->len - j->pos < n || memcmp(j->buf + j->pos, word, n) != 0)
        return jerr(j, PAGEIN_E_BAD_JSON, "bad literal");
    j->pos += n;
    return 0;
}

int pi_json_bool(struct pi_json *j, bool *v) {
    int t = pi_json_peek(j);
    if (t < 0) return t;
    if (t == PI_JSON_TRUE) {
        FORWARD_IF(literal(j, "true", 4));
        if (v) *v = true;
        return 0;
    }
    if (t == PI_JSON_FALSE) {
        FORWARD_IF(literal(j, "false", 5));
        if (v) *v = false;
        return 0;
    }
    return jerr(j, PAGEIN_E_BAD_TYPE, "expected true or false");
}

int pi_json_null(struct pi_json *j) {
    FORWARD_IF(expect_type(j, PI_JSON_NULL));
    return literal(j, "null", 4);
}

int pi_json_next(struct pi_json *j, const char **key, size_t *klen) {
    if (j->depth == 0) return jerr(j, PAGEIN_E_INVALID, "next outside a container");
    uint32_t lvl = j->depth - 1;
    uint8_t close = j->kind[lvl] == '{' ? '}' : ']';
    skip_ws(j);
    if (j->pos >= j->len) return jerr(j, PAGEIN_E_BAD_JSON, "unexpected end of input");
    uint8_t c = j->buf[j->pos];
    if (c == close) {
        j->pos++;
        j->depth--;
        return 0;
    }
    if (j->first[lvl]) {
        j->first[lvl] = 0;
    } else {
        if (c != ',') return jerr(j, PAGEIN_E_BAD_JSON, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
        j->pos++;
        skip_ws(j);
    }
    if (close == ']') return 1;
    if (j->pos >= j->len || j->buf[j->pos] != '"') return jerr(j, PAGEIN_E_BAD_JSON, "expected a key string");
    const char *k;
    size_t kl;
    FORWARD_IF(read_string(j, &k, &kl));
    skip_ws(j);
    if (j->pos >= j->len || j->buf[j->pos] != ':') return jerr(j, PAGEIN_E_BAD_JSON, "expected ':'");
    j->pos++;
    if (key) *key = k;
    if (klen) *klen = kl;
    return 1;
}

int pi_json_skip(struct pi_json *j) {
    uint32_t base = j->depth;
    do {
        int t = pi_json_peek(j);
        if (t < 0) return t;
        int rc = 0;
        bool integer;
        switch (t) {
        case PI_JSON_OBJECT:
        case PI_JSON_ARRAY: rc = pi_json_enter(j, t); break;
        case PI_JSON_STRING: {
            const char *s;
            size_t n;
            rc = read_string(j, &s, &n);
            break;
        }
        case PI_JSON_NUMBER: rc = scan_number(j, &integer); break;
        case PI_JSON_TRUE: rc = literal(j, "true", 4); break;
        case PI_JSON_FALSE: rc = literal(j, "false", 5); break;
        default: rc = literal(j, "null", 4); break;
        }
        if (rc < 0) return rc;
        /* close finished containers until a member follows or we are back */
        while (j->depth > base) {
            rc = pi_json_next(j, NULL, NULL);
            if (rc < 0) return rc;
            if (rc == 1) break;
        }
    } while (j->depth > base);
    return 0;
}

int pi_json_finish(struct pi_json *j) {
    if (j->depth) return jerr(j, PAGEIN_E_BAD_JSON, "unclosed container");
    skip_ws(j);
    if (j->pos != j->len) return jerr(j, PAGEIN_E_BAD_JSON, "trailing characters after the value");
    return 0;
}

/* ---- writing -------------------------------------------------------------- */

static int short_escape(unsigned char c) {
    switch (c) {
    case '"': return '"';
    case '\\': return '\\';
    case '\b': return 'b';
    case '\f': return 'f';
    case '\n': return 'n';
    case '\r': return 'r';
    case '\t': return 't';
    default: return 0;
    }
}

size_t pi_json_quoted_len(const char *s, size_t n) {
    size_t r = 2;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        r += short_escape(c) ? 2 : c < 0x20 ? 6 : 1;
    }
    return r;
}

char *pi_json_quote(char *d, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    *d++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int e = short_escape(c);
        if (e) {
            *d++ = '\\';
            *d++ = (char)e;
        } else if (c < 0x20) {
            memcpy(d, "\\u00", 4);
            d[4] = hex[c >> 4];
            d[5] = hex[c & 15];
            d += 6;
        } else {
            *d++ = (char)c;
        }
    }
    *d++ = '"';
    return d;
}

void pi_json_buf_str(struct pi_buf *b, const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (!s) {
        pi_buf_str(b, "null");
        return;
    }
    if (pi_utf8_valid((const uint8_t *)s, n, NULL)) {
        char *room = pi_buf_room(b, pi_json_quoted_len(s, n));
        if (room) b->n = (size_t)(pi_json_quote(room, s, n) - b->p);
        return;
    }
    pi_buf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\')
            pi_buf_printf(b, "\\u%04x", c);
        else
            pi_buf_put(b, &s[i], 1);
    }
    pi_buf_put(b, "\"", 1);
}
