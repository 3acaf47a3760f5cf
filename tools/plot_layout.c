/* The picture both renderers draw: panel placement, value-to-pixel mapping,
 * the series colours. */
#include <math.h>
#include <string.h>

#include "plot.h"

const char *const plot_colors[PLOT_NUM_COLORS] = {
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

bool plot_is_loss(const PlotSeries *s)
{
    return strstr(s->name, "loss") != NULL;
}

int plot_count(const PlotData *d, bool losses)
{
    int n = 0;
    for (int i = 0; i < d->n; i++) n += d->s[i].n > 0 && plot_is_loss(&d->s[i]) == losses;
    return n;
}

PlotRange plot_range(const PlotData *d, bool losses)
{
    PlotRange r = {INFINITY, -INFINITY, INFINITY, -INFINITY};
    for (int i = 0; i < d->n; i++) {
        if (plot_is_loss(&d->s[i]) != losses) continue;
        for (int k = 0; k < d->s[i].n; k++) {
            r.x0 = fmin(r.x0, d->s[i].x[k]);
            r.x1 = fmax(r.x1, d->s[i].x[k]);
            r.y0 = fmin(r.y0, d->s[i].y[k]);
            r.y1 = fmax(r.y1, d->s[i].y[k]);
        }
    }
    if (r.x1 <= r.x0) r = (PlotRange){r.x0 - 1, r.x0 + 1, r.y0, r.y1};
    double pad = r.y1 > r.y0 ? 0.05 * (r.y1 - r.y0) : fmax(fabs(r.y0) * 0.1, 1);
    r.y0 -= pad;
    r.y1 += pad;
    return r;
}

double plot_px(const PlotPanel *p, double x)
{
    return PLOT_LEFT +
           (x - p->r.x0) / (p->r.x1 - p->r.x0) * (PLOT_W - PLOT_LEFT - PLOT_RIGHT);
}

double plot_py(const PlotPanel *p, double y)
{
    double h = PLOT_PANEL_H - PLOT_TOP - PLOT_BOTTOM;
    return p->top + h - (y - p->r.y0) / (p->r.y1 - p->r.y0) * h;
}

int plot_layout(const PlotData *d, PlotPanel panels[2])
{
    int n = 0;
    for (int losses = 1; losses >= 0; losses--) {
        if (!plot_count(d, losses)) continue;
        panels[n] = (PlotPanel){.top = n * PLOT_PANEL_H + PLOT_TOP,
                                .r = plot_range(d, losses),
                                .losses = losses,
                                .title = losses ? "loss" : "metrics"};
        n++;
    }
    return n;
}
