/* ctrainer plot: loss and metric curves per epoch from a MetricsLogger
 * file, as SVG or PNG.
 *
 *     ctrainer plot RUN.jsonl|RUN.csv [-o curves.svg|curves.png] [--title TEXT]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "ctrainer/io.h"
#include "plot.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ctrainer plot RUN.jsonl|RUN.csv [-o OUT.svg|OUT.png] [--title TEXT]\n"
            "\n"
            "Draws the loss and metric curves per epoch of a MetricsLogger file\n"
            "(JSON lines or CSV) as an SVG or PNG image: one panel for losses, one\n"
            "for the other metrics, one line per metric.\n"
            "\n"
            "  -o, --output OUT      where to write (default: curves.svg); a name\n"
            "                        ending in .png gives a PNG, any other an SVG\n"
            "  --title TEXT          the image title (default: the input's path)\n");
}

static bool ends_with_png(const char *path)
{
    size_t n = strlen(path);
    return n >= 4 && !strcasecmp(path + n - 4, ".png");
}

static CtStatus write_svg(const PlotData *d, const char *title, const char *out)
{
    char *svg = plot_svg(d, title);
    CtStatus st = svg ? ct_write_file_atomic(out, svg, strlen(svg)) : ct_last_status();
    free(svg);
    return st;
}

int cli_plot(int argc, char **argv)
{
    const char *in = NULL, *out = "curves.svg", *title = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "-o") || cli_is(argv[i], "output")) {
            if (!(out = cli_value(argc, argv, &i))) return 2;
        } else if (cli_is(argv[i], "title")) {
            if (!(title = cli_value(argc, argv, &i))) return 2;
        } else if (argv[i][0] == '-' || in) {
            fprintf(stderr, "ctrainer plot: unexpected argument '%s'\n\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            in = argv[i];
        }
    }
    if (!in) {
        usage(stderr);
        return 2;
    }
    PlotData d;
    if (plot_read(in, &d) != CT_OK) return cli_fail();
    CtStatus st =
        ends_with_png(out) ? plot_png(&d, out) : write_svg(&d, title ? title : in, out);
    int series = 0;
    for (int i = 0; i < d.n; i++) series += d.s[i].n > 0;
    plot_data_free(&d);
    if (st != CT_OK) return cli_fail();
    printf("ctrainer plot: %d curves written to %s\n", series, out);
    return 0;
}
