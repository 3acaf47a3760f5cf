/* Metric series from MetricsLogger's JSON lines or CSV files. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"

void plot_data_free(PlotData *d)
{
    for (int i = 0; i < d->n; i++) {
        free(d->s[i].name);
        free(d->s[i].x);
        free(d->s[i].y);
    }
    free(d->s);
    memset(d, 0, sizeof *d);
}

static PlotSeries *series(PlotData *d, const char *name, size_t len)
{
    for (int i = 0; i < d->n; i++)
        if (strlen(d->s[i].name) == len && !memcmp(d->s[i].name, name, len))
            return &d->s[i];
    if (d->n == d->cap) {
        int cap = d->cap ? 2 * d->cap : 8;
        PlotSeries *s = realloc(d->s, (size_t)cap * sizeof *s);
        if (!s) return NULL;
        d->s = s;
        d->cap = cap;
    }
    PlotSeries *s = &d->s[d->n];
    *s = (PlotSeries){.name = malloc(len + 1)};
    if (!s->name) return NULL;
    memcpy(s->name, name, len);
    s->name[len] = '\0';
    d->n++;
    return s;
}

/* Appends (x, y) to the series `name` (non-finite y: nothing). */
static CtStatus add_point(PlotData *d, const char *name, size_t len, double x, double y)
{
    PlotSeries *s = series(d, name, len);
    if (!s) return ct_error(CT_ERR_OOM, "plot: out of memory");
    if (!isfinite(y)) return CT_OK;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        double *nx = realloc(s->x, (size_t)cap * sizeof *nx);
        if (nx) s->x = nx;
        double *ny = nx ? realloc(s->y, (size_t)cap * sizeof *ny) : NULL;
        if (!ny) return ct_error(CT_ERR_OOM, "plot: out of memory");
        s->y = ny;
        s->cap = cap;
    }
    s->x[s->n] = x;
    s->y[s->n++] = y;
    return CT_OK;
}

/* MetricsLogger's epochs are whole numbers; a bad one (NaN, inf, 1e300,
 * 2.5) would leave the epoch axis without a usable scale. */
static bool good_epoch(double e)
{
    return e >= 0 && e <= PLOT_MAX_EPOCH && e == floor(e);
}

static CtStatus read_jsonl_line(const char *path, int line, const char *text, PlotData *d)
{
    json_error_t jerr;
    json_t *o = json_loads(text, 0, &jerr);
    CtStatus st = CT_OK;
    json_t *epoch = json_object_get(o, "epoch");
    if (!json_is_object(o))
        st = ct_error(CT_ERR_FORMAT, "%s:%d: not a JSON object%s%s", path, line,
                      o ? "" : ": ", o ? "" : jerr.text);
    else if (!json_is_number(epoch))
        st = ct_error(CT_ERR_FORMAT, "%s:%d: no numeric \"epoch\"", path, line);
    else if (!good_epoch(json_number_value(epoch)))
        st = ct_error(CT_ERR_FORMAT,
                      "%s:%d: bad epoch %.17g: expected a whole number from 0 to %.0f",
                      path, line, json_number_value(epoch), PLOT_MAX_EPOCH);
    const char *key;
    json_t *v;
    json_object_foreach(st == CT_OK ? o : NULL, key, v)
    {
        if (st != CT_OK || v == epoch || json_is_null(v)) continue;
        if (!json_is_number(v))
            st = ct_error(CT_ERR_FORMAT, "%s:%d: \"%s\" is not a number or null", path,
                          line, key);
        else
            st = add_point(d, key, strlen(key), json_number_value(epoch),
                           json_number_value(v));
    }
    json_decref(o);
    return st;
}

/* The next line of *p (NUL-terminated in place; "\r\n" accepted), or NULL. */
static char *next_line(char **p)
{
    if (!*p || !**p) return NULL;
    char *s = *p, *e = strchr(s, '\n');
    *p = e ? e + 1 : NULL;
    if (e) *e = '\0';
    size_t n = strlen(s);
    if (n && s[n - 1] == '\r') s[n - 1] = '\0';
    return s;
}

static CtStatus read_jsonl(const char *path, char *text, PlotData *d)
{
    CtStatus st = CT_OK;
    int line = 0;
    for (char *l; st == CT_OK && (l = next_line(&text));) {
        line++;
        if (l[strspn(l, " \t")]) st = read_jsonl_line(path, line, l, d); /* not blank */
    }
    return st;
}

/* Splits a CSV line in place at the commas into cells[0..n); returns n, or
 * cap + 1 when the line has more than cap fields. */
static int split(char *s, char **cells, int cap)
{
    int n = 0;
    char *c = s;
    for (; c && n < cap; n++) {
        cells[n] = c;
        c = strchr(c, ',');
        if (c) *c++ = '\0';
    }
    return c ? cap + 1 : n;
}

#define PLOT_MAX_COLUMNS 256

static CtStatus read_csv(const char *path, char *text, PlotData *d)
{
    char *head[PLOT_MAX_COLUMNS], *cells[PLOT_MAX_COLUMNS];
    char *h = next_line(&text);
    int nh = h ? split(h, head, PLOT_MAX_COLUMNS) : 0;
    if (nh > PLOT_MAX_COLUMNS)
        return ct_error(CT_ERR_FORMAT, "%s:1: more than %d columns", path,
                        PLOT_MAX_COLUMNS);
    if (nh < 1 || strcmp(head[0], "epoch") != 0)
        return ct_error(CT_ERR_FORMAT, "%s:1: the header does not start with \"epoch\"",
                        path);
    int line = 1;
    CtStatus st = CT_OK;
    for (char *l; st == CT_OK && (l = next_line(&text));) {
        line++;
        if (!l[0]) continue;
        int n = split(l, cells, PLOT_MAX_COLUMNS);
        char *end;
        double epoch = strtod(cells[0], &end);
        if (n != nh)
            return ct_error(CT_ERR_FORMAT, "%s:%d: %d fields (header: %d)", path, line, n,
                            nh);
        if (end == cells[0] || *end || !good_epoch(epoch))
            return ct_error(
                CT_ERR_FORMAT,
                "%s:%d: bad epoch '%s': expected a whole number from 0 to %.0f", path,
                line, cells[0], PLOT_MAX_EPOCH);
        for (int c = 1; c < n && st == CT_OK; c++) {
            if (!cells[c][0]) continue; /* no value that epoch */
            double v = strtod(cells[c], &end);
            if (*end)
                return ct_error(CT_ERR_FORMAT, "%s:%d: %s is not a number: '%s'", path,
                                line, head[c], cells[c]);
            st = add_point(d, head[c], strlen(head[c]), epoch, v);
        }
    }
    return st;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

static CtStatus read_text(const char *path, char **out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return ct_error(CT_ERR_IO, "%s: cannot open", path);
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (cap - n - 1 > 0) continue;
        char *b = realloc(buf, cap *= 2);
        if (!b) free(buf);
        buf = b;
    }
    bool err = ferror(f);
    fclose(f);
    if (!buf) return ct_error(CT_ERR_OOM, "%s: out of memory", path);
    if (err) {
        free(buf);
        return ct_error(CT_ERR_IO, "%s: read error", path);
    }
    buf[n] = '\0';
    *out = buf;
    return CT_OK;
}

CtStatus plot_read(const char *path, PlotData *d)
{
    memset(d, 0, sizeof *d);
    bool jsonl = ends_with(path, ".jsonl"), csv = ends_with(path, ".csv");
    if (!jsonl && !csv)
        return ct_error(
            CT_ERR_INVALID,
            "%s: unknown format: expected a MetricsLogger .jsonl or .csv file", path);
    char *text = NULL;
    CtStatus st = read_text(path, &text);
    if (st != CT_OK) return st;
    st = jsonl ? read_jsonl(path, text, d) : read_csv(path, text, d);
    free(text);
    int points = 0;
    for (int i = 0; i < d->n; i++) points += d->s[i].n;
    if (st == CT_OK && points == 0)
        st = ct_error(CT_ERR_FORMAT, "%s: no metric values to plot", path);
    if (st != CT_OK) plot_data_free(d);
    return st;
}
