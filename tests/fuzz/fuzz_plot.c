/* libFuzzer target for the metric files `ctrainer plot` reads (plot_read:
 * MetricsLogger JSON lines and CSV) and for the SVG drawn from what it
 * reads (plot_layout, plot_svg). The first byte picks the format (even:
 * .jsonl, odd: .csv), the rest is the file. Any file must read or fail
 * with a message naming it; what reads must hold whole epochs in range
 * and finite values, and draw. Built with -DCTRAINER_FUZZ=ON and clang.
 * Run e.g.
 *   ./fuzz_plot -max_total_time=20 corpus-dir tests/fuzz/corpus/plot */
#define _GNU_SOURCE
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/plot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input's file, in a private directory of tmpfs or /tmp; removed at
 * exit. */
static char dir[64], paths[2][96];

static void remove_dir(void)
{
    unlink(paths[0]);
    unlink(paths[1]);
    rmdir(dir);
}

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/dev/shm/ct_fuzz_plot_XXXXXX");
    if (!mkdtemp(dir)) {
        snprintf(dir, sizeof dir, "/tmp/ct_fuzz_plot_XXXXXX");
        if (!mkdtemp(dir)) __builtin_trap();
    }
    snprintf(paths[0], sizeof paths[0], "%s/run.jsonl", dir);
    snprintf(paths[1], sizeof paths[1], "%s/run.csv", dir);
    atexit(remove_dir);
}

static void check_data(const PlotData *d)
{
    int points = 0;
    for (int i = 0; i < d->n; i++) {
        const PlotSeries *s = &d->s[i];
        if (!s->name || s->n < 0 || s->n > s->cap) __builtin_trap();
        for (int k = 0; k < s->n; k++)
            if (!(s->x[k] >= 0 && s->x[k] <= PLOT_MAX_EPOCH &&
                  s->x[k] == floor(s->x[k])) ||
                !isfinite(s->y[k]))
                __builtin_trap();
        points += s->n;
    }
    if (points == 0) __builtin_trap(); /* "no metric values" is an error */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    if (!dir[0]) make_dir();
    const char *path = paths[data[0] & 1];
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    bool ok = fwrite(data + 1, 1, size - 1, f) == size - 1;
    if (fclose(f) != 0 || !ok) return 0;
    PlotData d;
    if (plot_read(path, &d) != CT_OK) {
        if (!strstr(ct_last_error(), path) || d.n != 0 || d.s) __builtin_trap();
        ct_clear_error();
        return 0;
    }
    check_data(&d);
    PlotPanel panels[2];
    int np = plot_layout(&d, panels);
    if (np < 1 || np > 2) __builtin_trap();
    for (int p = 0; p < np; p++) {
        double ticks[PLOT_MAX_XTICKS];
        int nt = plot_xticks(&panels[p], ticks);
        if (nt < 0 || nt > PLOT_MAX_XTICKS) __builtin_trap();
        for (int i = 0; i < d.n; i++)
            for (int k = 0; k < d.s[i].n; k++)
                if (plot_is_loss(&d.s[i]) == panels[p].losses &&
                    (!isfinite(plot_px(&panels[p], d.s[i].x[k])) ||
                     !isfinite(plot_py(&panels[p], d.s[i].y[k]))))
                    __builtin_trap();
    }
    char *svg = plot_svg(&d, "fuzz");
    if (!svg || !strstr(svg, "</svg>")) __builtin_trap();
    free(svg);
    plot_data_free(&d);
    ct_clear_error();
    return 0;
}
