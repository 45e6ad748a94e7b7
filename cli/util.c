/* util.c - helpers shared by the CLI commands. */
#include "cli.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void cli_error(const char *cmd, int rc, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "pagein %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (rc < 0) {
        const char *d = pagein_last_error_detail();
        fprintf(stderr, ": %s", pagein_strerror(rc));
        if (d && *d) fprintf(stderr, ": %s", d);
    }
    fputc('\n', stderr);
}

void cli_json_str(FILE *out, const char *s, size_t len) {
    fputc('"', out);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        case '\b': fputs("\\b", out); break;
        case '\f': fputs("\\f", out); break;
        default:
            if (c < 0x20 || c == 0x7f)
                fprintf(out, "\\u%04x", c);
            else
                fputc(c, out);
        }
    }
    fputc('"', out);
}

int cli_parse_size(const char *s, uint64_t *out) {
    if (!s || !*s) return -1;
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) return -1;
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i') end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
    double r = v * mul;
    if (r > 1.8e19) return -1;
    *out = (uint64_t)r;
    return 0;
}

const char *cli_human_bytes(uint64_t n, char *buf, size_t len) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    if (i == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)n);
    else
        snprintf(buf, len, "%.2f %s", v, u[i]);
    return buf;
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void cli_progress_start(struct cli_progress *p, const char *label, uint64_t total) {
    p->label = label;
    p->total = total;
    p->start = p->last = cli_now();
    p->enabled = isatty(2);
}

void cli_progress_update(struct cli_progress *p, uint64_t done) {
    if (!p->enabled) return;
    double now = cli_now();
    if (now - p->last < 0.1 && done < p->total) return;
    p->last = now;
    int width = 30;
    double frac = p->total ? (double)done / (double)p->total : 1.0;
    if (frac > 1) frac = 1;
    int fill = (int)(frac * width);
    double el = now - p->start;
    fprintf(stderr, "\r%s [", p->label);
    for (int i = 0; i < width; i++) fputc(i < fill ? '#' : '.', stderr);
    fprintf(stderr, "] %5.1f%% %.2f GB/s ", frac * 100, el > 0 ? (double)done / el / 1e9 : 0.0);
}

void cli_progress_end(struct cli_progress *p) {
    if (p->enabled) fputs("\r\033[K", stderr);
}

int cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }
