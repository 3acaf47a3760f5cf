/* Metric curves as a PNG image: the SVG's layout rasterised on a canvas
 * (tools/plot_raster.c), encoded with libpng.
 *
 * libpng reports errors by longjmp; everything the encoder allocates lives
 * in a PngOut reached through a pointer, and the setjmp sits in encode,
 * which only touches it. */
#include <math.h>
#include <png.h>
#include <setjmp.h>
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
    for (int k = 0; k <= 5; k++) { /* y: 6 ticks with grid lines */
        double v = p->r.y0 + (p->r.y1 - p->r.y0) * k / 5, y = plot_py(p, v);
        plot_line(c, PLOT_LEFT, y, right, y, 1, GRID);
        snprintf(label, sizeof label, "%.4g", v);
        plot_text(c, PLOT_LEFT - 6 - plot_text_width(label, 1), (int)y - 3, label, 1,
                  BLACK);
    }
    double span = p->r.x1 - p->r.x0, step = fmax(1, ceil(span / 10));
    for (double x = ceil(p->r.x0); x <= p->r.x1; x += step) { /* x: whole epochs */
        plot_line(c, plot_px(p, x), bottom, plot_px(p, x), bottom + 5, 1, BLACK);
        snprintf(label, sizeof label, "%g", x);
        plot_text(c, (int)plot_px(p, x) - plot_text_width(label, 1) / 2, bottom + 9,
                  label, 1, BLACK);
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

typedef struct PngOut {
    png_structp png;
    png_infop info;
    png_bytep *rows;
    unsigned char *buf;
    size_t n, cap;
    bool oom;
    char msg[160];
} PngOut;

static void on_error(png_structp png, png_const_charp msg)
{
    PngOut *o = png_get_error_ptr(png);
    snprintf(o->msg, sizeof o->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static void write_mem(png_structp png, png_bytep data, size_t n)
{
    PngOut *o = png_get_io_ptr(png);
    if (o->n + n > o->cap) {
        size_t cap = (o->cap + n) * 2;
        unsigned char *b = realloc(o->buf, cap);
        if (!b) {
            o->oom = true;
            png_error(png, "out of memory");
        }
        o->buf = b;
        o->cap = cap;
    }
    memcpy(o->buf + o->n, data, n);
    o->n += n;
}

static void flush_mem(png_structp png)
{
    (void)png;
}

static int encode(PngOut *o, const PlotCanvas *c, const char *title)
{
    if (setjmp(png_jmpbuf(o->png))) return -1;
    png_set_write_fn(o->png, o, write_mem, flush_mem);
    png_set_IHDR(o->png, o->info, (png_uint_32)c->w, (png_uint_32)c->h, 8,
                 PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_text text = {.compression = PNG_TEXT_COMPRESSION_NONE,
                     .key = (png_charp) "Title",
                     .text = (png_charp)title,
                     .text_length = strlen(title)};
    png_set_text(o->png, o->info, &text, 1);
    for (int y = 0; y < c->h; y++) o->rows[y] = c->px + (size_t)y * (size_t)c->w * 3;
    png_set_rows(o->png, o->info, o->rows);
    png_write_png(o->png, o->info, PNG_TRANSFORM_IDENTITY, NULL);
    return 0;
}

CtStatus plot_png(const PlotData *d, const char *title, const char *path)
{
    PlotPanel panels[2];
    int n = plot_layout(d, panels);
    PlotCanvas c = {PLOT_W, n * PLOT_PANEL_H, NULL};
    PngOut o = {0};
    c.px = malloc((size_t)c.w * (size_t)c.h * 3);
    o.rows = malloc((size_t)c.h * sizeof *o.rows);
    o.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &o, on_error, on_warning);
    o.info = o.png ? png_create_info_struct(o.png) : NULL;
    CtStatus st = CT_OK;
    if (!c.px || !o.rows || !o.info) {
        st = ct_error(CT_ERR_OOM, "plot: out of memory");
    } else {
        draw(&c, d, panels, n);
        if (encode(&o, &c, title) != 0)
            st = o.oom ? ct_error(CT_ERR_OOM, "plot: out of memory")
                       : ct_error(CT_ERR_FORMAT, "%s: PNG encoding failed: %s", path,
                                  o.msg);
    }
    if (st == CT_OK) st = ct_write_file_atomic(path, o.buf, o.n);
    png_destroy_write_struct(&o.png, &o.info);
    free(o.buf);
    free(o.rows);
    free(c.px);
    return st;
}
