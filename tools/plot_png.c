/* Metric curves as a PNG image: the SVG's layout rasterised on a canvas
 * (tools/plot_raster.c), encoded with libpng's simplified API. */
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrainer/io.h"
#include "plot.h"

static const PlotRgb BLACK = {0, 0, 0}, GRID = {221, 221, 221};

static void axes(PlotCanvas *c, const PlotPanel *p)
{
    int top = (int)p->top, bottom = top + PLOT_PANEL_H - PLOT_TOP - PLOT_BOTTOM;
    int right = PLOT_W - PLOT_RIGHT;
    char label[32];
    plot_text(c, PLOT_LEFT, top - 24, p->title, 2, BLACK);
    for (int k = 0; k < PLOT_YTICKS; k++) { /* y: ticks with grid lines */
        double v = plot_ytick(p, k), y = plot_py(p, v);
        plot_line(c, PLOT_LEFT, y, right, y, 1, GRID);
        snprintf(label, sizeof label, "%.4g", v);
        plot_text(c, PLOT_LEFT - 6 - plot_text_width(label, 1), (int)y - 3, label, 1,
                  BLACK);
    }
    double ticks[PLOT_MAX_XTICKS];
    int nt = plot_xticks(p, ticks);
    for (int k = 0; k < nt; k++) { /* x: whole epochs */
        double x = plot_px(p, ticks[k]);
        plot_line(c, x, bottom, x, bottom + 5, 1, BLACK);
        snprintf(label, sizeof label, "%.17g", ticks[k]);
        plot_text(c, (int)x - plot_text_width(label, 1) / 2, bottom + 9, label, 1, BLACK);
    }
    plot_line(c, PLOT_LEFT, top, right, top, 1, BLACK);
    plot_line(c, PLOT_LEFT, bottom, right, bottom, 1, BLACK);
    plot_line(c, PLOT_LEFT, top, PLOT_LEFT, bottom, 1, BLACK);
    plot_line(c, right, top, right, bottom, 1, BLACK);
    plot_text(c, (PLOT_LEFT + right - plot_text_width("epoch", 1)) / 2, bottom + 26,
              "epoch", 1, BLACK);
}

static void curve(PlotCanvas *c, const PlotPanel *p, const PlotSeries *s, PlotRgb color,
                  int slot)
{
    for (int k = 0; k < s->n; k++) {
        int prev = k ? k - 1 : 0; /* a lone point is drawn as a dot */
        plot_line(c, plot_px(p, s->x[prev]), plot_py(p, s->y[prev]), plot_px(p, s->x[k]),
                  plot_py(p, s->y[k]), s->n == 1 ? 6 : 2, color);
    }
    double ly = p->top + 10 + 20 * slot;
    plot_line(c, PLOT_W - PLOT_RIGHT + 12, ly, PLOT_W - PLOT_RIGHT + 36, ly, 2, color);
    plot_text(c, PLOT_W - PLOT_RIGHT + 42, (int)ly - 3, s->name, 1, BLACK);
}

static void draw(PlotCanvas *c, const PlotData *d, const PlotPanel *panels, int n)
{
    memset(c->px, 255, (size_t)c->w * (size_t)c->h * 3); /* white */
    int color = 0;
    for (int k = 0; k < n; k++) {
        axes(c, &panels[k]);
        int slot = 0;
        for (int i = 0; i < d->n; i++)
            if (d->s[i].n > 0 && plot_is_loss(&d->s[i]) == panels[k].losses)
                curve(c, &panels[k], &d->s[i],
                      plot_rgb(plot_colors[color++ % PLOT_NUM_COLORS]), slot++);
    }
}

CtStatus plot_png(const PlotData *d, const char *path)
{
    PlotPanel panels[2];
    int n = plot_layout(d, panels);
    PlotCanvas c = {PLOT_W, n * PLOT_PANEL_H,
                    malloc((size_t)PLOT_W * n * PLOT_PANEL_H * 3)};
    if (!c.px) return ct_error(CT_ERR_OOM, "plot: out of memory");
    draw(&c, d, panels, n);
    png_image img = {.version = PNG_IMAGE_VERSION,
                     .width = (png_uint_32)c.w,
                     .height = (png_uint_32)c.h,
                     .format = PNG_FORMAT_RGB};
    png_alloc_size_t size = 0;
    unsigned char *buf = NULL;
    CtStatus st = CT_OK;
    /* the first call measures, the second encodes */
    if (!png_image_write_to_memory(&img, NULL, &size, 0, c.px, 0, NULL))
        st = ct_error(CT_ERR_FORMAT, "%s: PNG encoding failed: %s", path, img.message);
    else if (!(buf = malloc(size)))
        st = ct_error(CT_ERR_OOM, "plot: out of memory");
    else if (!png_image_write_to_memory(&img, buf, &size, 0, c.px, 0, NULL))
        st = ct_error(CT_ERR_FORMAT, "%s: PNG encoding failed: %s", path, img.message);
    else
        st = ct_write_file_atomic(path, buf, size);
    png_image_free(&img);
    free(buf);
    free(c.px);
    return st;
}
