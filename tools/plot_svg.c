/* Metric curves as a plain SVG document: a panel for losses and one for
 * other metrics, each with axes, ticks, grid lines and a legend. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"

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

/* The length of the valid UTF-8 sequence at s (1 to 4) for a character
 * XML 1.0 allows, or 0: no overlong forms, no surrogates, nothing above
 * U+10FFFF, not U+FFFE or U+FFFF. Control characters are left to the
 * caller. */
static int utf8_char(const unsigned char *s)
{
    if (s[0] < 0x80) return 1;
    int n = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 0;
    if (!n || s[0] > 0xF4) return 0;
    unsigned long c = s[0] & (0x7F >> n);
    for (int k = 1; k < n; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0; /* also stops at the NUL */
        c = c << 6 | (s[k] & 0x3F);
    }
    static const unsigned long min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF) || c == 0xFFFE ||
        c == 0xFFFF)
        return 0;
    return n;
}

/* Text as XML character data: the special characters escaped, control
 * characters other than tab and line breaks as spaces, each byte that is
 * not part of a valid UTF-8 character as U+FFFD (titles and metric names
 * come from paths and files in any encoding). */
static void put_text(Svg *b, const char *t)
{
    const unsigned char *s = (const unsigned char *)t;
    while (*s) {
        int n = utf8_char(s);
        if (*s == '<')
            put(b, "&lt;");
        else if (*s == '>')
            put(b, "&gt;");
        else if (*s == '&')
            put(b, "&amp;");
        else if (*s == '"')
            put(b, "&quot;");
        else if (*s < 0x20 && *s != '\t' && *s != '\n' && *s != '\r')
            put(b, " ");
        else if (!n)
            put(b, "\xEF\xBF\xBD"); /* U+FFFD */
        else
            put(b, "%.*s", n, (const char *)s);
        s += n ? n : 1;
    }
}

static void axes(Svg *b, const PlotPanel *p, const char *title)
{
    double bottom = p->top + PLOT_PANEL_H - PLOT_TOP - PLOT_BOTTOM;
    put(b, "<text x=\"%d\" y=\"%.1f\" font-size=\"15\" font-weight=\"bold\">", PLOT_LEFT,
        p->top - 12);
    put_text(b, title);
    put(b, "</text>\n");
    for (int k = 0; k < PLOT_YTICKS; k++) { /* y: ticks with grid lines */
        double v = plot_ytick(p, k), y = plot_py(p, v);
        put(b,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
            "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" "
            "text-anchor=\"end\">%.4g</text>\n",
            PLOT_LEFT, y, PLOT_W - PLOT_RIGHT, y, PLOT_LEFT - 6, y + 4, v);
    }
    double ticks[PLOT_MAX_XTICKS];
    int nt = plot_xticks(p, ticks);
    for (int k = 0; k < nt; k++) { /* x: whole epochs */
        double x = plot_px(p, ticks[k]);
        put(b,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
            "text-anchor=\"middle\">%.17g</text>\n",
            x, bottom, x, bottom + 5, x, bottom + 18, ticks[k]);
    }
    put(b,
        "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"none\" "
        "stroke=\"#000\"/>\n"
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" "
        "text-anchor=\"middle\">epoch</text>\n",
        PLOT_LEFT, p->top, PLOT_W - PLOT_LEFT - PLOT_RIGHT,
        PLOT_PANEL_H - PLOT_TOP - PLOT_BOTTOM, (PLOT_LEFT + PLOT_W - PLOT_RIGHT) / 2.0,
        bottom + 36);
}

static void curve(Svg *b, const PlotPanel *p, const PlotSeries *s, const char *color,
                  int slot)
{
    put(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color);
    for (int k = 0; k < s->n; k++)
        put(b, "%s%.2f,%.2f", k ? " " : "", plot_px(p, s->x[k]), plot_py(p, s->y[k]));
    put(b, "\"><title>");
    put_text(b, s->name);
    put(b, "</title></polyline>\n");
    if (s->n == 1) /* a lone point has no line to show */
        put(b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"/>\n",
            plot_px(p, s->x[0]), plot_py(p, s->y[0]), color);
    double ly = p->top + 10 + 20 * slot;
    put(b,
        "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" "
        "stroke-width=\"2\"/>"
        "<text x=\"%d\" y=\"%.1f\" font-size=\"12\">",
        PLOT_W - PLOT_RIGHT + 12, ly, PLOT_W - PLOT_RIGHT + 36, ly, color,
        PLOT_W - PLOT_RIGHT + 42, ly + 4);
    put_text(b, s->name);
    put(b, "</text>\n");
}

char *plot_svg(const PlotData *d, const char *title)
{
    Svg b = {0};
    PlotPanel panels[2];
    int n = plot_layout(d, panels);
    put(&b,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
        "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n<title>",
        PLOT_W, n * PLOT_PANEL_H, PLOT_W, n * PLOT_PANEL_H);
    put_text(&b, title);
    put(&b, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n");
    int color = 0;
    for (int k = 0; k < n; k++) {
        const PlotPanel *p = &panels[k];
        axes(&b, p, p->title);
        int slot = 0;
        for (int i = 0; i < d->n; i++)
            if (d->s[i].n > 0 && plot_is_loss(&d->s[i]) == p->losses)
                curve(&b, p, &d->s[i], plot_colors[color++ % PLOT_NUM_COLORS], slot++);
    }
    put(&b, "</svg>\n");
    if (b.oom) {
        free(b.s);
        ct_error(CT_ERR_OOM, "plot: out of memory");
        return NULL;
    }
    return b.s;
}
