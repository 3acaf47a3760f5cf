/* Metric curves as a plain SVG document: a panel for losses and one for
 * other metrics, each with axes, ticks, grid lines and a legend. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"

enum { W = 860, PANEL_H = 340, TOP = 40, LEFT = 80, RIGHT = 230, BOTTOM = 50 };

static const char *const colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                     "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                     "#bcbd22", "#17becf"};

typedef struct Svg {
    char *s;
    size_t n, cap;
    bool oom;
} Svg;

__attribute__((format(printf, 2, 3))) static void put(Svg *b, const char *fmt, ...)
{
    for (int pass = 0; pass < 2 && !b->oom; pass++) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) b->oom = true;
        if (b->oom || (b->s && b->n + (size_t)k < b->cap)) {
            if (!b->oom) b->n += (size_t)k;
            return;
        }
        size_t cap = (b->cap + (size_t)k + 1) * 2;
        char *s = realloc(b->s, cap);
        if (!s) b->oom = true;
        b->s = s ? s : b->s;
        b->cap = s ? cap : b->cap;
    }
}

/* Text with XML's special characters escaped. */
static void put_text(Svg *b, const char *t)
{
    for (; *t; t++) {
        if (*t == '<')
            put(b, "&lt;");
        else if (*t == '>')
            put(b, "&gt;");
        else if (*t == '&')
            put(b, "&amp;");
        else if (*t == '"')
            put(b, "&quot;");
        else
            put(b, "%c", *t);
    }
}

static bool is_loss(const PlotSeries *s)
{
    return strstr(s->name, "loss") != NULL;
}

typedef struct Range {
    double x0, x1, y0, y1;
} Range;

static Range range_of(const PlotData *d, bool losses)
{
    Range r = {INFINITY, -INFINITY, INFINITY, -INFINITY};
    for (int i = 0; i < d->n; i++) {
        if (is_loss(&d->s[i]) != losses) continue;
        for (int k = 0; k < d->s[i].n; k++) {
            r.x0 = fmin(r.x0, d->s[i].x[k]);
            r.x1 = fmax(r.x1, d->s[i].x[k]);
            r.y0 = fmin(r.y0, d->s[i].y[k]);
            r.y1 = fmax(r.y1, d->s[i].y[k]);
        }
    }
    if (r.x1 <= r.x0) r = (Range){r.x0 - 1, r.x0 + 1, r.y0, r.y1};
    double pad = r.y1 > r.y0 ? 0.05 * (r.y1 - r.y0) : fmax(fabs(r.y0) * 0.1, 1);
    r.y0 -= pad;
    r.y1 += pad;
    return r;
}

typedef struct Panel {
    double top; /* pixel y of the plot area's top */
    Range r;
} Panel;

static double px(const Panel *p, double x)
{
    return LEFT + (x - p->r.x0) / (p->r.x1 - p->r.x0) * (W - LEFT - RIGHT);
}

static double py(const Panel *p, double y)
{
    double h = PANEL_H - TOP - BOTTOM;
    return p->top + h - (y - p->r.y0) / (p->r.y1 - p->r.y0) * h;
}

static void axes(Svg *b, const Panel *p, const char *title)
{
    double bottom = p->top + PANEL_H - TOP - BOTTOM;
    put(b, "<text x=\"%d\" y=\"%.1f\" font-size=\"15\" font-weight=\"bold\">", LEFT,
        p->top - 12);
    put_text(b, title);
    put(b, "</text>\n");
    for (int k = 0; k <= 5; k++) { /* y: 6 ticks with grid lines */
        double v = p->r.y0 + (p->r.y1 - p->r.y0) * k / 5, y = py(p, v);
        put(b,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
            "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" "
            "text-anchor=\"end\">%.4g</text>\n",
            LEFT, y, W - RIGHT, y, LEFT - 6, y + 4, v);
    }
    double span = p->r.x1 - p->r.x0, step = fmax(1, ceil(span / 10));
    for (double x = ceil(p->r.x0); x <= p->r.x1; x += step) /* x: whole epochs */
        put(b,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
            "text-anchor=\"middle\">%g</text>\n",
            px(p, x), bottom, px(p, x), bottom + 5, px(p, x), bottom + 18, x);
    put(b,
        "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"none\" "
        "stroke=\"#000\"/>\n"
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" "
        "text-anchor=\"middle\">epoch</text>\n",
        LEFT, p->top, W - LEFT - RIGHT, PANEL_H - TOP - BOTTOM, (LEFT + W - RIGHT) / 2.0,
        bottom + 36);
}

static void curve(Svg *b, const Panel *p, const PlotSeries *s, const char *color,
                  int slot)
{
    put(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color);
    for (int k = 0; k < s->n; k++)
        put(b, "%s%.2f,%.2f", k ? " " : "", px(p, s->x[k]), py(p, s->y[k]));
    put(b, "\"><title>");
    put_text(b, s->name);
    put(b, "</title></polyline>\n");
    if (s->n == 1) /* a lone point has no line to show */
        put(b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"/>\n", px(p, s->x[0]),
            py(p, s->y[0]), color);
    double ly = p->top + 10 + 20 * slot;
    put(b,
        "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" "
        "stroke-width=\"2\"/>"
        "<text x=\"%d\" y=\"%.1f\" font-size=\"12\">",
        W - RIGHT + 12, ly, W - RIGHT + 36, ly, color, W - RIGHT + 42, ly + 4);
    put_text(b, s->name);
    put(b, "</text>\n");
}

static int count(const PlotData *d, bool losses)
{
    int n = 0;
    for (int i = 0; i < d->n; i++) n += d->s[i].n > 0 && is_loss(&d->s[i]) == losses;
    return n;
}

char *plot_svg(const PlotData *d, const char *title)
{
    Svg b = {0};
    int panels = (count(d, true) > 0) + (count(d, false) > 0);
    put(&b,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
        "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n<title>",
        W, panels * PANEL_H, W, panels * PANEL_H);
    put_text(&b, title);
    put(&b, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n");
    int panel = 0, color = 0;
    for (int losses = 1; losses >= 0; losses--) {
        if (!count(d, losses)) continue;
        Panel p = {panel++ * PANEL_H + TOP, range_of(d, losses)};
        axes(&b, &p, losses ? "loss" : "metrics");
        int slot = 0;
        for (int i = 0; i < d->n; i++)
            if (d->s[i].n > 0 && is_loss(&d->s[i]) == (bool)losses)
                curve(&b, &p, &d->s[i], colors[color++ % 10], slot++);
    }
    put(&b, "</svg>\n");
    if (b.oom) {
        free(b.s);
        ct_error(CT_ERR_OOM, "plot: out of memory");
        return NULL;
    }
    return b.s;
}
