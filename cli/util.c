/* util.c - helpers shared by the CLI commands. */
#include "cli.h"
#include <stdio.h>
#include <sys/wait.h>
#include <fcntl.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* 1 if word (n bytes) occurs in msg as a whole piece: at the start or after
 * a space, and followed by the end, ':' or a space. */
static int has_piece(const char *msg, const char *word, size_t n) {
    if (n == 0) return 0;
    for (const char *p = msg; *p; p++) {
        if (strncmp(p, word, n) != 0) continue;
        if (p != msg && p[-1] != ' ') continue;
        if (p[n] == 0 || p[n] == ':' || p[n] == ' ') return 1;
    }
    return 0;
}

void cli_error(const char *cmd, int rc, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pagein_url_redact(msg, msg, sizeof msg); /* a URL's password or signature never printed */
    fprintf(stderr, "pagein %s: %s", cmd, msg);
    if (rc < 0) {
        /* The library's detail usually starts with the path and ends with
         * strerror already ("x: cannot open: No such file or directory"):
         * say each once. Leading "PATH: " pieces the message holds already
         * are dropped; the error's name only when the detail lacks it. */
        const char *d = pagein_last_error_detail();
        const char *e = pagein_strerror(rc);
        if (!d) d = "";
        for (;;) {
            const char *colon = strstr(d, ": ");
            if (!colon || !has_piece(msg, d, (size_t)(colon - d))) break;
            d = colon + 2;
        }
        if (!*d || !strstr(d, e)) fprintf(stderr, ": %s", e);
        if (*d) fprintf(stderr, ": %s", d);
    }
    fputc('\n', stderr);
}

const char *cli_file_kind(unsigned mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISREG(mode)) return "a regular file";
    return "not a file";
}

int cli_check_path(const char *cmd, const char *path) {
    struct stat st;
    if (pagein_is_url(path)) return 0; /* a remote object: its source checks it (docs/REMOTE.md) */
    if (stat(path, &st) != 0) {
        cli_error(cmd, 0, "%s: %s", path, strerror(errno));
        return EXIT_USAGE;
    }
    if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) return 0;
    cli_error(cmd, 0, "%s: %s, not a regular file or directory", path, cli_file_kind(st.st_mode));
    return EXIT_USAGE;
}

const char *cli_detail(const char *path) {
    const char *d = pagein_last_error_detail();
    if (!d) return "";
    size_t n = path ? strlen(path) : 0;
    if (n && strncmp(d, path, n) == 0 && d[n] == ':' && d[n + 1] == ' ') d += n + 2;
    return d;
}

/* Length of the well-formed UTF-8 sequence at s[0..n) (1-4), or 0 if
 * there is none (RFC 3629: no overlongs, no surrogates, at most U+10FFFF). */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t k;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) k = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (n < k || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < k; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return k;
}

void cli_shape_str(char *buf, size_t cap, const uint64_t *shape, uint32_t ndim) {
    size_t k = 0;
    buf[k++] = '[';
    for (uint32_t d = 0; d < ndim && k < cap - 24; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%" PRIu64, d ? "," : "", shape[d]);
    snprintf(buf + k, cap - k, "]");
}

void cli_json_str(FILE *out, const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    fputc('"', out);
    for (size_t i = 0; i < len;) {
        unsigned char c = u[i];
        size_t k = utf8_len(u + i, len - i);
        if (k == 0) {
            /* Not UTF-8 (a path is any bytes): JSON text must be, so each
             * such byte is written as \u00XX, the code point of the same
             * value (docs/CLI.md). */
            fprintf(out, "\\u%04x", c);
            i++;
            continue;
        }
        if (k > 1) {
            fwrite(u + i, 1, k, out);
            i += k;
            continue;
        }
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
        i++;
    }
    fputc('"', out);
}

int cli_open_records(pagein_dataset **d, const char *const *paths, size_t n, uint64_t record_bytes,
                     const char *megatron, uint64_t group_bytes) {
    size_t len = megatron ? strlen(megatron) + 5 : 1;
    for (size_t i = 0; !megatron && i < n; i++) len += strlen(paths[i]) + 1;
    char *spec = malloc(len);
    if (!spec) return -ENOMEM;
    if (megatron) snprintf(spec, len, "%s.bin", megatron);
    else {
        size_t k = 0; /* one spec, the files separated by newlines */
        spec[0] = 0;
        for (size_t i = 0; i < n; i++) k += (size_t)snprintf(spec + k, len - k, "%s%s", i ? "\n" : "", paths[i]);
    }
    pagein_dataset_opts o = PAGEIN_DATASET_OPTS_INIT;
    o.format = megatron ? "megatron" : "records";
    o.record_bytes = megatron ? 0 : record_bytes;
    o.group_bytes = group_bytes ? group_bytes : 16u << 20;
    int rc = pagein_dataset_open(d, spec, &o);
    free(spec);
    return rc;
}

int cli_parse_size(const char *s, uint64_t *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0) || isinf(v)) return -1;
    /* one rule for every size the tool reads (docs/CLI.md, "Sizes"):
     * K/M/G/T and KiB/MiB/GiB/TiB are powers of 1024; KB/MB/GB/TB powers
     * of 1000 (SI, as transformers reads max_shard_size); letters in any
     * case; a plain number is bytes */
    double mul = 1;
    int e = 0;
    switch (*end) {
    case 'k': case 'K': e = 1; break;
    case 'm': case 'M': e = 2; break;
    case 'g': case 'G': e = 3; break;
    case 't': case 'T': e = 4; break;
    case 'b': case 'B': e = -1; break;
    default: break;
    }
    if (e > 0) {
        end++;
        int binary = 1;
        if (*end == 'i' || *end == 'I') {
            end++;
            if (*end == 'b' || *end == 'B') end++;
        } else if (*end == 'b' || *end == 'B') {
            end++;
            binary = 0;
        }
        for (int k = 0; k < e; k++) mul *= binary ? 1024.0 : 1000.0;
    } else if (e < 0) {
        end++;
    }
    if (*end) return -1;
    double r = floor(v * mul);
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

int32_t cli_model_layers(const pagein_model *m, int32_t *lo, int32_t *hi) {
    int32_t L = pagein_model_layer_count(m), n = 0;
    *lo = *hi = -1;
    for (int32_t l = 0; l < L; l++) {
        const pagein_tensor *const *ts;
        if (pagein_model_layer_tensors(m, l, &ts) == 0) continue;
        if (*lo < 0) *lo = l;
        *hi = l;
        n++;
    }
    return n;
}

const char *cli_layers_text(int32_t count, int32_t lo, int32_t hi, char *buf, size_t n) {
    if (count <= 0) snprintf(buf, n, "no numbered layers");
    else if (count == 1) snprintf(buf, n, "1 layer (%d)", (int)lo);
    else
        snprintf(buf, n, "%d layers (%d-%d%s)", (int)count, (int)lo, (int)hi,
                 count == hi - lo + 1 ? "" : ", with gaps");
    return buf;
}

const char *cli_model_layers_text(const pagein_model *m, char *buf, size_t n) {
    int32_t lo, hi, c = cli_model_layers(m, &lo, &hi), L = pagein_model_layer_count(m);
    const pagein_tensor *const *ts;
    cli_layers_text(c, lo, hi, buf, n);
    size_t k = strlen(buf);
    if (pagein_model_layer_tensors(m, -1, &ts) && k < n) k += (size_t)snprintf(buf + k, n - k, ", embed");
    if (pagein_model_layer_tensors(m, L, &ts) && k < n) snprintf(buf + k, n - k, ", head");
    return buf;
}

void cli_reset_peak_rss(void) {
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (write(fd, "5", 1) < 0) { /* older kernels: the peak since fork */ }
        close(fd);
    }
}

double cli_status_bytes(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0) {
            v = atof(line + kl) * 1024;
            break;
        }
    fclose(f);
    return v;
}

double cli_fio_read_bps(const char *path, uint64_t size, const char *ioengine, const char *job) {
    if (strchr(path, '\'')) return -1;
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "fio --name=%s --filename='%s' --readonly --rw=read --bs=1M --iodepth=32 --ioengine=%s --direct=1 "
             "--size=%llu --output-format=json 2>/dev/null",
             job, path, ioengine, (unsigned long long)size);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    static char out[1 << 16];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    const char *rd = strstr(out, "\"read\"");
    const char *bw = rd ? strstr(rd, "\"bw_bytes\"") : NULL;
    if (st != 0 || !bw) return -1;
    bw = strchr(bw, ':');
    return bw ? atof(bw + 1) : 0;
}

int cli_fio_target(char *const *files, const uint64_t *sizes, size_t n, size_t *big, uint64_t *size) {
    if (!n || system("command -v fio >/dev/null 2>&1") != 0) return -1;
    size_t b = 0;
    for (size_t i = 1; i < n; i++)
        if (sizes[i] > sizes[b]) b = i;
    *big = b;
    *size = sizes[b] & ~((1ull << 20) - 1);
    return *size < (1u << 20) || strchr(files[b], '\'') ? -1 : 0;
}

void cli_files_evict(char *const *files, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int fd = open(files[i], O_RDONLY);
        if (fd < 0) continue;
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

void cli_files_warm(char *const *files, size_t n) {
    static char buf[1 << 20];
    for (size_t i = 0; i < n; i++) {
        int fd = open(files[i], O_RDONLY);
        if (fd < 0) continue;
        while (read(fd, buf, sizeof buf) > 0) {}
        close(fd);
    }
}

int cli_child_start(int fds[2], char *err, size_t errlen) {
    if (pipe(fds) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        cli_reset_peak_rss();
    }
    return (int)pid;
}

int cli_child_result(int fd, int pid, void *buf, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd);
    int st = 0;
    waitpid((pid_t)pid, &st, 0);
    return got == len ? 0 : (st ? st : -1);
}
