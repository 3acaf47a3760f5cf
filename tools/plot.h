/* `ctrainer plot`: metric series read from MetricsLogger files, drawn as
 * SVG. */
#ifndef CTRAINER_PLOT_H
#define CTRAINER_PLOT_H

#include <stdbool.h>

#include "ctrainer/status.h"

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
 * "epoch,<metric>,...", empty cells for missing values). Missing, null and
 * non-finite values are left out. Errors: CT_ERR_IO (cannot read),
 * CT_ERR_FORMAT naming path:line (not an object/row of numbers, no epoch),
 * CT_ERR_INVALID (another extension), CT_ERR_FORMAT when no value is left.
 * On failure *d holds nothing. */
CtStatus plot_read(const char *path, PlotData *d);
void plot_data_free(PlotData *d);

/* The SVG document (malloc'd, NUL-terminated; NULL with CT_ERR_OOM): one
 * panel for the series whose name contains "loss" and one for the others
 * (each only when it has series), one polyline per series, axes with
 * ticks, a legend. */
char *plot_svg(const PlotData *d, const char *title);

#endif
