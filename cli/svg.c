/* svg.c - see svg.h. */
#include "svg.h"

#include "pagein.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct svg {
    char *path;
    FILE *f; /* open_memstream: written to the file at svg_end */
    char *buf;
    size_t len;
    int w, h;
};

static void esc(FILE *f, const char *t) {
    for (; *t; t++) {
        unsigned char c = (unsigned char)*t;
        switch (c) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default:
            if (c < 32) fputc(' ', f); /* control characters are not XML */
            else fputc((int)c, f);
        }
    }
}

struct svg *svg_begin(const char *path, int w, int h, const char *title) {
    int tw = (int)(strlen(title) * 8.2) + 40; /* 15 px text: about 8 px a character */
    if (w < tw) w = tw;
    struct svg *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->path = strdup(path);
    s->f = open_memstream(&s->buf, &s->len);
    if (!s->path || !s->f) {
        if (s->f) fclose(s->f);
        free(s->buf);
        free(s->path);
        free(s);
        errno = ENOMEM;
        return NULL;
    }
    s->w = w;
    s->h = h;
    fprintf(s->f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n<title>",
            w, h, w, h);
    esc(s->f, title);
    fprintf(s->f, "</title>\n<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", w, h);
    svg_text(s, w / 2.0, 24, "middle", 15, "title", NULL, "%s", title);
    return s;
}

int svg_end(struct svg *s) {
    fputs("</svg>\n", s->f);
    int rc = fclose(s->f) == 0 ? 0 : -ENOMEM;
    if (rc == 0) rc = pagein_write_atomic(s->path, s->buf, s->len); /* src/io/atomic.c */
    free(s->buf);
    free(s->path);
    free(s);
    return rc;
}

void svg_text(struct svg *s, double x, double y, const char *anchor, int size, const char *cls, const char *key,
              const char *fmt, ...) {
    char t[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    fprintf(s->f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%d\" fill=\"#222222\"", x, y, anchor,
            size);
    if (cls) fprintf(s->f, " class=\"%s\"", cls);
    if (key) {
        fputs(" data-key=\"", s->f);
        esc(s->f, key);
        fputc('"', s->f);
    }
    fputc('>', s->f);
    esc(s->f, t);
    fputs("</text>\n", s->f);
}

void svg_rect(struct svg *s, double x, double y, double w, double h, const char *fill, const char *tooltip) {
    fprintf(s->f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"", x, y, w > 0 ? w : 0,
            h > 0 ? h : 0, fill);
    if (tooltip) {
        fputs("><title>", s->f);
        esc(s->f, tooltip);
        fputs("</title></rect>\n", s->f);
    } else {
        fputs("/>\n", s->f);
    }
}

void svg_line(struct svg *s, double x1, double y1, double x2, double y2, const char *stroke, double width,
              int dashed) {
    fprintf(s->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%.1f\"%s/>\n", x1,
            y1, x2, y2, stroke, width, dashed ? " stroke-dasharray=\"6 4\"" : "");
}

void svg_polyline(struct svg *s, const double *x, const double *y, size_t n, const char *stroke) {
    fputs("<polyline fill=\"none\" stroke-width=\"2\" stroke=\"", s->f);
    fputs(stroke, s->f);
    fputs("\" points=\"", s->f);
    for (size_t i = 0; i < n; i++) fprintf(s->f, "%s%.1f,%.1f", i ? " " : "", x[i], y[i]);
    fputs("\"/>\n", s->f);
}

const char *svg_color(size_t i) {
    static const char *const c[] = {"#4878d0", "#ee854a", "#6acc64", "#d65f5f", "#956cb4", "#8c613c", "#dc7ec0", "#797979"};
    return c[i % (sizeof c / sizeof c[0])];
}

/* A "nice" axis maximum and step for values up to top. */
static double nice_step(double top, int ticks) {
    if (!(top > 0) || !isfinite(top)) return 1;
    double raw = top / ticks, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * mag;
}

/* A tick's value with as many decimals as the step needs (0.25: two). */
static void fmt_tick(char *b, size_t n, double v, double step) {
    int d = 0;
    while (d < 6 && fabs(step * pow(10, d) - round(step * pow(10, d))) > 1e-6 * step * pow(10, d)) d++;
    snprintf(b, n, "%.*f", d, v);
}

/* The y axis of a plot area [x0, x1] x [y0 (top), y1 (bottom)] for 0..top;
 * returns the axis maximum. */
/* The y axis's unit, written up its left side (then suffix). */
static void unit_label(struct svg *s, double x0, double y0, double y1, const char *unit, const char *suffix) {
    fprintf(s->f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\" fill=\"#222222\" "
                  "transform=\"rotate(-90 %.1f %.1f)\">", x0 - 48, (y0 + y1) / 2, x0 - 48, (y0 + y1) / 2);
    esc(s->f, unit);
    fprintf(s->f, "%s</text>\n", suffix);
}

static double y_axis(struct svg *s, double x0, double x1, double y0, double y1, double top, const char *unit) {
    double step = nice_step(top, 5), max = step * ceil(top / step);
    if (max <= 0) max = step;
    for (double v = 0; v <= max * (1 + 1e-9); v += step) {
        double y = y1 - (y1 - y0) * v / max;
        svg_line(s, x0, y, x1, y, v == 0 ? "#444444" : "#dddddd", 1, 0);
        char t[32];
        fmt_tick(t, sizeof t, v, step);
        svg_text(s, x0 - 6, y + 4, "end", 11, "tick", NULL, "%s", t);
    }
    if (unit) unit_label(s, x0, y0, y1, unit, "");
    return max;
}

/* A log10 y axis over [lo, hi] (decades; 2 and 5 between them when few):
 * returns log10 of the axis bottom and sets *lmax to log10 of its top. */
static double y_axis_log(struct svg *s, double x0, double x1, double y0, double y1, double lo, double hi,
                         const char *unit, double *lmax) {
    double a = floor(log10(lo)), b = ceil(log10(hi));
    if (log10(lo) - a < 0.3) a -= 1; /* the smallest bar stays visible */
    if (b <= a) b = a + 1;
    *lmax = b;
    for (double d = a; d <= b + 1e-9; d++) {
        for (int m = 1; m <= 5; m += (m == 1 ? 1 : 3)) {
            double lv = d + log10((double)m);
            if (lv > b + 1e-9 || (m > 1 && b - a > 4)) continue;
            double y = y1 - (y1 - y0) * (lv - a) / (b - a);
            svg_line(s, x0, y, x1, y, d == a && m == 1 ? "#444444" : m == 1 ? "#cccccc" : "#eeeeee", 1, 0);
            char t[32];
            double v = pow(10, lv);
            if (v >= 1e6) snprintf(t, sizeof t, "%gM", v / 1e6);
            else if (v >= 1e3) snprintf(t, sizeof t, "%gk", v / 1e3);
            else snprintf(t, sizeof t, "%g", v);
            svg_text(s, x0 - 6, y + 4, "end", m == 1 ? 11 : 9, "tick", NULL, "%s", t);
        }
    }
    if (unit) unit_label(s, x0, y0, y1, unit, " (log scale)");
    return a;
}

static void legend(struct svg *s, double x, double y, const char *const *names, size_t n) {
    for (size_t k = 0; k < n; k++) {
        svg_rect(s, x, y - 10, 12, 12, svg_color(k), NULL);
        svg_text(s, x + 16, y, "start", 12, "legend", NULL, "%s", names[k]);
        x += 30 + 7.5 * (double)strlen(names[k]);
    }
}

int svg_bar_chart(const char *path, const struct svg_bars *b) {
    double bw = b->nser > 1 ? 36 : 44, gap = 26, longest = 0;
    for (size_t c = 0; c < b->ncat; c++)
        if ((double)strlen(b->cat[c]) > longest) longest = (double)strlen(b->cat[c]);
    double per = (double)b->nser * bw + gap; /* a category's slot: its bars, or its name (12 px text) */
    if (per < longest * 7.5 + 12) per = longest * 7.5 + 12;
    double plot_w = (double)b->ncat * per + gap;
    if (plot_w < 420) plot_w = 420;
    double rw = b->ref > 0 && b->ref_label ? 6.2 * (double)strlen(b->ref_label) + 12 : 0; /* its label, right */
    int W = (int)(plot_w + 90 + (rw > 40 ? rw : 40)), H = 380 + (b->note ? 18 : 0);
    struct svg *s = svg_begin(path, W, H, b->title);
    if (!s) return -errno;
    double x0 = 80, x1 = x0 + plot_w, y0 = 60, y1 = 300;
    double top = b->ref > 0 ? b->ref : 0, low = b->ref > 0 ? b->ref : INFINITY;
    for (size_t i = 0; i < b->ncat * b->nser; i++) {
        if (b->v[i] > top) top = b->v[i];
        if (b->v[i] > 0 && b->v[i] < low) low = b->v[i];
    }
    int lg = b->log_y && top > 0 && isfinite(low);
    double lmin = 0, lmax = 1, max = lg ? 1 : y_axis(s, x0, x1, y0, y1, top * 1.08, b->unit);
    if (lg) lmin = y_axis_log(s, x0, x1, y0, y1, low, top, b->unit, &lmax);
    /* a value's height above the axis: linear, or log10 from the axis bottom */
#define BAR_H(v_) (lg ? ((v_) > 0 ? (y1 - y0) * (log10(v_) - lmin) / (lmax - lmin) : 0) : (y1 - y0) * (v_) / max)
    double slot = (plot_w - gap) / (double)(b->ncat ? b->ncat : 1);
    for (size_t c = 0; c < b->ncat; c++) {
        double cx = x0 + gap / 2 + slot * (double)c + slot / 2, left = cx - (double)b->nser * bw / 2;
        for (size_t k = 0; k < b->nser; k++) {
            double v = b->v[c * b->nser + k], bx = left + bw * (double)k;
            char key[160], tip[200], num[48];
            snprintf(key, sizeof key, "%s/%s", b->cat[c], b->ser[k]);
            if (v < 0 || !isfinite(v)) {
                svg_text(s, bx + bw / 2, y1 - 4, "middle", 10, "missing", key, "-");
                continue;
            }
            snprintf(num, sizeof num, b->fmt, v);
            double h = BAR_H(v);
            snprintf(tip, sizeof tip, "%s %s: %s %s", b->cat[c], b->ser[k], num, b->unit ? b->unit : "");
            svg_rect(s, bx + 1, y1 - h, bw - 2, h, svg_color(k), tip);
            svg_text(s, bx + bw / 2, y1 - h - 4, "middle", 10, "value", key, "%s", num);
        }
        svg_text(s, cx, y1 + 16, "middle", 12, "category", NULL, "%s", b->cat[c]);
    }
    if (b->ref > 0) {
        double y = y1 - BAR_H(b->ref);
        svg_line(s, x0, y, x1, y, "#c0392b", 2, 1);
        char num[48];
        snprintf(num, sizeof num, b->fmt, b->ref);
        svg_text(s, x1 + 4, y - 5, "start", 10, "reflabel", NULL, "%s", b->ref_label ? b->ref_label : "limit");
        svg_text(s, x1 + 4, y + 9, "start", 11, "value", b->ref_key ? b->ref_key : "ref", "%s", num);
    }
    if (b->nser > 1 || b->ser[0][0]) legend(s, x0, y1 + 44, b->ser, b->nser);
    if (b->note) svg_text(s, x0, y1 + 68, "start", 11, "note", NULL, "%s", b->note);
#undef BAR_H
    return svg_end(s);
}

int svg_line_chart(const char *path, const struct svg_lines *l) {
    int W = 760, H = 400 + (l->note ? 18 : 0);
    struct svg *s = svg_begin(path, W, H, l->title);
    if (!s) return -errno;
    double x0 = 80, x1 = W - 150, y0 = 60, y1 = 300, xmax = 0, top = 0;
    for (size_t k = 0; k < l->nser; k++)
        for (size_t i = 0; i < l->ser[k].n; i++) {
            if (l->ser[k].x[i] > xmax) xmax = l->ser[k].x[i];
            if (l->ser[k].y[i] > top) top = l->ser[k].y[i];
        }
    for (size_t r = 0; r < l->nref; r++)
        if (l->refs[r] > top) top = l->refs[r];
    double max = y_axis(s, x0, x1, y0, y1, top * 1.08, l->yunit);
    double xstep = nice_step(xmax, 6), xm = xstep * ceil(xmax / xstep);
    if (xm <= 0) xm = xstep;
    for (double v = 0; v <= xm * (1 + 1e-9); v += xstep) {
        double x = x0 + (x1 - x0) * v / xm;
        svg_line(s, x, y1, x, y1 + 4, "#444444", 1, 0);
        char t[32];
        fmt_tick(t, sizeof t, v, xstep);
        svg_text(s, x, y1 + 17, "middle", 11, "tick", NULL, "%s", t);
    }
    if (l->xunit) svg_text(s, (x0 + x1) / 2, y1 + 34, "middle", 12, "axis", NULL, "%s", l->xunit);
    const char *names[16];
    for (size_t k = 0; k < l->nser && k < 16; k++) {
        const struct svg_series *se = &l->ser[k];
        names[k] = se->name;
        double *px = malloc((se->n ? se->n : 1) * sizeof *px), *py = malloc((se->n ? se->n : 1) * sizeof *py);
        if (!px || !py) {
            free(px);
            free(py);
            continue;
        }
        for (size_t i = 0; i < se->n; i++) {
            px[i] = x0 + (x1 - x0) * se->x[i] / xm;
            py[i] = y1 - (y1 - y0) * se->y[i] / max;
        }
        svg_polyline(s, px, py, se->n, svg_color(k));
        free(px);
        free(py);
    }
    /* the lines' labels at the right, pushed apart where lines lie close (at most 16) */
    size_t nref = l->nref < 16 ? l->nref : 16, ord[16];
    double ly[16];
    for (size_t r = 0; r < nref; r++) {
        ord[r] = r;
        ly[r] = y1 - (y1 - y0) * l->refs[r] / max;
        svg_line(s, x0, ly[r], x1, ly[r], svg_color(l->nser + r), 1.5, 1);
    }
    for (size_t i = 1; i < nref; i++) /* insertion sort by height on the page */
        for (size_t j = i; j > 0 && ly[ord[j]] < ly[ord[j - 1]]; j--) {
            size_t t = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = t;
        }
    double prev = -1e9;
    for (size_t i = 0; i < nref; i++) {
        size_t r = ord[i];
        double y = ly[r] < prev + 24 ? prev + 24 : ly[r];
        prev = y;
        char num[48];
        snprintf(num, sizeof num, l->fmt, l->refs[r]);
        svg_text(s, x1 + 4, y - 7, "start", 10, "reflabel", NULL, "%s", l->ref_labels[r]);
        svg_text(s, x1 + 4, y + 5, "start", 10, "value", l->ref_keys[r], "%s", num);
    }
    legend(s, x0, y1 + 56, names, l->nser < 16 ? l->nser : 16);
    if (l->note) svg_text(s, x0, y1 + 80, "start", 11, "note", NULL, "%s", l->note);
    return svg_end(s);
}

/* White (0) to deep blue (1). */
static void heat_color(double v, char *b, size_t n) {
    if (!(v >= 0)) v = 0;
    if (v > 1) v = 1;
    int r = (int)(240 - 200 * v), g = (int)(242 - 150 * v), bl = (int)(245 - 60 * v);
    snprintf(b, n, "#%02x%02x%02x", r, g, bl);
}

int svg_heat_map(const char *path, const struct svg_heat *h) {
    size_t maxc = 1;
    for (size_t r = 0; r < h->nrows; r++)
        if (h->ncells[r] > maxc) maxc = h->ncells[r];
    double cw = 600.0 / (double)maxc, rh = h->nrows > 60 ? 8 : 14; /* cells 3-28 px wide */
    if (cw > 28) cw = 28;
    if (cw < 3) cw = 3;
    double x0 = 90, y0 = 50, longest = 0;
    size_t ncl = h->col_label ? (h->ncol_labels < maxc ? h->ncol_labels : maxc) : 0;
    for (size_t i = 0; i < ncl; i++)
        if (h->col_label[i] && (double)strlen(h->col_label[i]) > longest) longest = (double)strlen(h->col_label[i]);
    if (longest > 40) longest = 40;
    y0 += ncl ? longest * 5.2 * 0.87 + 8 : 0; /* the headers, 10 px text at -60 degrees */
    int W = (int)(x0 + cw * (double)maxc + 90 + (ncl ? longest * 2.6 : 0)),
        H = (int)(y0 + rh * (double)h->nrows + 70 + (h->note ? 18 : 0));
    if (W < 480) W = 480;
    if (h->note && W < (int)(x0 + 6.2 * (double)strlen(h->note))) W = (int)(x0 + 6.2 * (double)strlen(h->note));
    struct svg *s = svg_begin(path, W, H, h->title);
    if (!s) return -errno;
    for (size_t i = 0; i < ncl; i++) {
        if (!h->col_label[i]) continue;
        double cx = x0 + cw * (double)i + cw / 2, cy = y0 - 6;
        char t[48];
        snprintf(t, sizeof t, "%.40s", h->col_label[i]);
        fprintf(s->f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" fill=\"#222222\" class=\"collabel\" "
                      "transform=\"rotate(-60 %.1f %.1f)\">", cx, cy, cw >= 10 ? 10 : 7, cx, cy);
        esc(s->f, t);
        fputs("</text>\n", s->f);
    }
    if (h->row_title) svg_text(s, x0 - 6, y0 - 6, "end", 11, "rowtitle", NULL, "%s", h->row_title);
    for (size_t r = 0; r < h->nrows; r++) {
        double y = y0 + rh * (double)r;
        svg_text(s, x0 - 6, y + rh - 3, "end", rh >= 12 ? 11 : 7, "row", NULL, "%s", h->row_label[r]);
        for (size_t i = 0; i < h->ncells[r]; i++) {
            char col[16], tip[300];
            heat_color(h->cells[r][i], col, sizeof col);
            snprintf(tip, sizeof tip, "%s: %.1f%% resident", h->cell_names[r][i], 100 * h->cells[r][i]);
            svg_rect(s, x0 + cw * (double)i, y, cw - (cw > 3 ? 1 : 0), rh - 1, col, tip);
        }
        char key[160];
        snprintf(key, sizeof key, "%s/%s", h->row_key_prefix, h->row_key ? h->row_key[r] : h->row_label[r]);
        svg_text(s, x0 + cw * (double)maxc + 6, y + rh - 3, "start", rh >= 12 ? 11 : 7, "value", key, "%.1f%%",
                 100 * h->row_value[r]);
    }
    /* the scale */
    double ly = y0 + rh * (double)h->nrows + 20;
    for (int i = 0; i <= 10; i++) {
        char col[16];
        heat_color(i / 10.0, col, sizeof col);
        svg_rect(s, x0 + 18 * i, ly, 18, 10, col, NULL);
    }
    svg_text(s, x0, ly + 24, "start", 10, "tick", NULL, "0%%");
    svg_text(s, x0 + 198, ly + 24, "end", 10, "tick", NULL, "100%% resident");
    if (h->note) svg_text(s, x0, ly + 42, "start", 11, "note", NULL, "%s", h->note);
    return svg_end(s);
}
