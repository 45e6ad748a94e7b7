/* svg.h - plain SVG figures written by the CLI (`--svg FILE` of the bench
 * commands and `pagein resident`): bars per category and series with a
 * reference line, lines over time, and heat maps. No plotting dependency:
 * the file is text, written whole to FILE.tmp and renamed (a failed write
 * leaves no partial figure).
 *
 * Every number drawn is a text element of class "value" carrying a
 * data-key ("read/cold", "device_limit", "layer/3"...), so that tests can
 * check the picture against the JSON of the same run. */
#ifndef PAGEIN_CLI_SVG_H
#define PAGEIN_CLI_SVG_H

#include <stddef.h>
#include <stdio.h>

struct svg;

/* Starts a figure of w x h pixels with a title. NULL with errno set. */
struct svg *svg_begin(const char *path, int w, int h, const char *title);
/* Writes the figure and renames it into place: 0, or -errno (the message
 * is the caller's, naming the file). Frees s in both cases. */
int svg_end(struct svg *s);

/* Primitives. Text is escaped; anchor is "start", "middle" or "end";
 * cls may be NULL; key (may be NULL) becomes data-key. */
void svg_text(struct svg *s, double x, double y, const char *anchor, int size, const char *cls, const char *key,
              const char *fmt, ...) __attribute__((format(printf, 8, 9)));
void svg_rect(struct svg *s, double x, double y, double w, double h, const char *fill, const char *tooltip);
void svg_line(struct svg *s, double x1, double y1, double x2, double y2, const char *stroke, double width,
              int dashed);
void svg_polyline(struct svg *s, const double *x, const double *y, size_t n, const char *stroke);
/* The i-th series colour. */
const char *svg_color(size_t i);

/* Bars: ncat categories along x, nser bars in each; v[c * nser + k] < 0
 * is missing (no bar, "-"). ref > 0 draws a dashed line with ref_label
 * (its number is a value of key "ref_key"). Value labels use fmt ("%.2f"). */
struct svg_bars {
    const char *title, *unit, *fmt;
    size_t ncat, nser;
    const char *const *cat, *const *ser;
    const double *v;
    double ref;
    const char *ref_label, *ref_key;
    const char *note; /* a line under the chart, or NULL */
    int log_y;        /* 1: a log10 y axis (decades), for values spanning orders of magnitude */
};
int svg_bar_chart(const char *path, const struct svg_bars *b);

/* Lines: each series y over x; refs are horizontal dashed lines with
 * labels (value of key ref_keys[i], printed with fmt). */
struct svg_series {
    const char *name;
    const double *x, *y;
    size_t n;
};
struct svg_lines {
    const char *title, *xunit, *yunit, *fmt;
    const struct svg_series *ser;
    size_t nser;
    const double *refs;
    const char *const *ref_labels, *const *ref_keys;
    size_t nref;
    const char *note;
};
int svg_line_chart(const char *path, const struct svg_lines *l);

/* Heat map: one row per label, cells[r] values in [0, 1] (count
 * ncells[r]) drawn left to right, cell_names[r][i] as tooltips; each row
 * ends with its summary row_value[r] (fraction, printed as a percentage,
 * key "<row_key_prefix>/<row_key[r]>"). */
struct svg_heat {
    const char *title, *row_key_prefix, *note;
    size_t nrows;
    const char *const *row_label, *const *row_key; /* row_key may be NULL: the label */
    const double *const *cells;
    const size_t *ncells;
    const char *const *const *cell_names;
    const double *row_value;
    /* optional column headers (the tensor names of a layer without its
     * prefix), drawn rotated above the cells; ncol_labels may be 0 */
    const char *const *col_label;
    size_t ncol_labels;
    const char *row_title; /* above the row labels ("layer"), or NULL */
};
int svg_heat_map(const char *path, const struct svg_heat *h);

#endif
