/* The picture both renderers draw: panel placement, value-to-pixel mapping,
 * the series colours. */
#include <float.h>
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

/* Half the distance from lo to hi: finite for any finite lo and hi, where
 * hi - lo can overflow (values near +-1e308). */
static double half_span(double lo, double hi)
{
    return hi / 2 - lo / 2;
}

/* [*lo, *hi] padded by pad each side, kept within the finite doubles. At
 * least DBL_MIN, so the padded range's half_span is never 0, even for
 * subnormal values. */
static void pad_range(double *lo, double *hi, double pad)
{
    pad = fmax(pad, DBL_MIN);
    *lo = fmax(*lo - pad, -DBL_MAX);
    *hi = fmin(*hi + pad, DBL_MAX);
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
    if (r.x1 <= r.x0) pad_range(&r.x0, &r.x1, fmax(1, fabs(r.x0) * 1e-6)); /* one epoch */
    double h = half_span(r.y0, r.y1);
    pad_range(&r.y0, &r.y1, h > 0 ? 0.1 * h : fmax(fabs(r.y0) * 0.1, 1));
    return r;
}

/* Where v lies between lo and hi, 0 to 1, without overflow. */
static double fraction(double v, double lo, double hi)
{
    return half_span(lo, v) / half_span(lo, hi);
}

double plot_px(const PlotPanel *p, double x)
{
    return PLOT_LEFT + fraction(x, p->r.x0, p->r.x1) * (PLOT_W - PLOT_LEFT - PLOT_RIGHT);
}

double plot_py(const PlotPanel *p, double y)
{
    double h = PLOT_PANEL_H - PLOT_TOP - PLOT_BOTTOM;
    return p->top + h - fraction(y, p->r.y0, p->r.y1) * h;
}

double plot_ytick(const PlotPanel *p, int k)
{
    double t = k / (double)(PLOT_YTICKS - 1);
    return p->r.y0 * (1 - t) + p->r.y1 * t; /* no overflow, unlike y0 + t * span */
}

int plot_xticks(const PlotPanel *p, double ticks[PLOT_MAX_XTICKS])
{
    double step = fmax(1, ceil(half_span(p->r.x0, p->r.x1) / 5)); /* ~10 per span */
    double first = ceil(p->r.x0);
    int n = 0;
    /* a counter, not x += step: x + step == x for large x */
    for (int k = 0; n < PLOT_MAX_XTICKS; k++) {
        double x = first + k * step;
        if (!(x <= p->r.x1)) break;
        ticks[n++] = x;
    }
    return n;
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
