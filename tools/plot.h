/* `ctrainer plot`: metric series read from MetricsLogger files, drawn as
 * SVG or PNG. */
#ifndef CTRAINER_PLOT_H
#define CTRAINER_PLOT_H

#include <stdbool.h>

#include "ctrainer/status.h"

/* The largest epoch read: 2^53, below which every whole number is a
 * double, so epoch ticks are exact. */
#define PLOT_MAX_EPOCH 9007199254740992.0

/* One metric's finite values against the epoch, in file order. */
typedef struct PlotSeries {
    char *name;
    double *x, *y; /* epoch, value; n of each */
    int n, cap;
} PlotSeries;

typedef struct PlotData {
    PlotSeries *s; /* in order of first appearance */
    int n, cap;
} PlotData;

/* Reads a MetricsLogger file: JSON lines (".jsonl": {"epoch": 1,
 * "<metric>": value or null, ...} per line) or CSV (".csv": header
 * "epoch,<metric>,...", empty cells for missing values). Epochs are whole
 * numbers from 0 to PLOT_MAX_EPOCH. Missing, null and non-finite values are
 * left out. Errors: CT_ERR_IO (cannot read), CT_ERR_FORMAT naming path:line
 * (not an object/row of numbers, no epoch or a bad one),
 * CT_ERR_INVALID (another extension), CT_ERR_FORMAT when no value is left.
 * On failure *d holds nothing. */
CtStatus plot_read(const char *path, PlotData *d);
void plot_data_free(PlotData *d);

/* ------------------------------------------------------------- layout */
/* What the SVG and the PNG both draw (tools/plot_layout.c): one panel for
 * the series whose name contains "loss" and one for the others (each only
 * when it has series), PLOT_W pixels wide and PLOT_PANEL_H high each, the
 * plot area inset by the margins, the legend in the right margin. */
enum {
    PLOT_W = 860,
    PLOT_PANEL_H = 340,
    PLOT_TOP = 40,
    PLOT_LEFT = 80,
    PLOT_RIGHT = 230,
    PLOT_BOTTOM = 50,
    PLOT_NUM_COLORS = 10,
    PLOT_YTICKS = 6,     /* value ticks per panel, with grid lines */
    PLOT_MAX_XTICKS = 12 /* epoch ticks per panel, at most */
};

/* Series colours "#rrggbb", taken in turn across panels. */
extern const char *const plot_colors[PLOT_NUM_COLORS];

typedef struct PlotRange {
    double x0, x1, y0, y1;
} PlotRange;

typedef struct PlotPanel {
    double top; /* pixel y of the plot area's top */
    PlotRange r;
    bool losses;       /* the loss panel, or the metrics one */
    const char *title; /* "loss" or "metrics" */
} PlotPanel;

bool plot_is_loss(const PlotSeries *s);
/* Series with values in the loss panel (losses) or the metrics one. */
int plot_count(const PlotData *d, bool losses);
/* The panels to draw, top to bottom, into panels; returns how many (0..2). */
int plot_layout(const PlotData *d, PlotPanel panels[2]);
/* Pixel coordinates of an (epoch, value) point in panel p: finite for any
 * finite point in the panel's range, values near +-DBL_MAX included. */
double plot_px(const PlotPanel *p, double x);
double plot_py(const PlotPanel *p, double y);
/* The value of y tick k (0 at the bottom .. PLOT_YTICKS - 1 at the top). */
double plot_ytick(const PlotPanel *p, int k);
/* The epoch ticks of panel p, whole epochs evenly spaced across its range,
 * into ticks; returns how many (at most PLOT_MAX_XTICKS). */
int plot_xticks(const PlotPanel *p, double ticks[PLOT_MAX_XTICKS]);

/* ------------------------------------------------------------- raster */
/* An 8-bit RGB canvas (tools/plot_raster.c); drawing outside it is clipped. */
typedef struct PlotRgb {
    unsigned char r, g, b;
} PlotRgb;

typedef struct PlotCanvas {
    int w, h;
    unsigned char *px; /* w * h * 3 bytes, rows top to bottom */
} PlotCanvas;

/* "#rrggbb" as RGB. */
PlotRgb plot_rgb(const char *hex);
void plot_pixel(PlotCanvas *c, int x, int y, PlotRgb color);
/* A line of width pixels; every point on it, its end points included,
 * colours the pixel it lies in. */
void plot_line(PlotCanvas *c, double x0, double y0, double x1, double y1, int width,
               PlotRgb color);
/* Text in a 5x7 pixel font magnified scale times, top-left corner at (x, y),
 * 6 * scale pixels per character: letters (upper case drawn as lower
 * case), digits and " .-+_:/()<>,=%"; other characters show as '?'. */
void plot_text(PlotCanvas *c, int x, int y, const char *s, int scale, PlotRgb color);
int plot_text_width(const char *s, int scale);

/* ------------------------------------------------------------ renderers */

/* The SVG document (malloc'd, NUL-terminated; NULL with CT_ERR_OOM): the
 * layout with axes, ticks, grid lines, one polyline per series (its name
 * as the polyline's <title>), a legend. */
char *plot_svg(const PlotData *d, const char *title);

/* The same picture as an 8-bit RGB PNG (libpng) written atomically to path:
 * every polyline vertex of the SVG lies in a pixel of its series' colour;
 * text in plot_text's font. Errors: CT_ERR_OOM, CT_ERR_IO naming path,
 * CT_ERR_FORMAT with libpng's message. */
CtStatus plot_png(const PlotData *d, const char *path);

#endif
