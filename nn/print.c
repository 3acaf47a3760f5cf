/* Module summaries in PyTorch's repr style, and the formatting helpers the
 * layers' extra_repr use. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

CtStatus nn_error_context(CtStatus st, const char *fmt, ...)
{
    char ctx[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    return ct_error_wrap(st, "%s", ctx);
}

const char *nn_format_float(double x, char *buf, size_t n)
{
    if (isnan(x)) {
        snprintf(buf, n, "nan");
        return buf;
    }
    if (isinf(x)) {
        snprintf(buf, n, x > 0 ? "inf" : "-inf");
        return buf;
    }
    /* shortest precision that round-trips, as Python's repr */
    int p = 1;
    char tmp[64];
    for (; p < 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, x);
        if (strtod(tmp, NULL) == x) break;
    }
    snprintf(tmp, sizeof tmp, "%.*e", p - 1, x);
    int exp10 = atoi(strchr(tmp, 'e') + 1); /* the exponent after rounding */
    if (exp10 < -4 || exp10 >= 16) {
        snprintf(buf, n, "%s",
                 tmp); /* C prints at least two exponent digits, as Python */
        return buf;
    }
    int decimals = p - 1 - exp10;
    snprintf(buf, n, "%.*f", decimals > 0 ? decimals : 0, x);
    if (!strchr(buf, '.') && strlen(buf) + 2 < n) strcat(buf, ".0");
    return buf;
}

const char *nn_format_pair(int a, int b, bool force_tuple, char *buf, size_t n)
{
    if (a == b && !force_tuple)
        snprintf(buf, n, "%d", a);
    else
        snprintf(buf, n, "(%d, %d)", a, b);
    return buf;
}

const char *nn_module_describe(const Module *m, char *buf, size_t n)
{
    char extra[256] = "";
    if (m->vt->extra_repr) m->vt->extra_repr(m, extra, sizeof extra);
    snprintf(buf, n, "%s(%s)", m->vt->type, extra);
    return buf;
}

static void indent(FILE *out, int n)
{
    fprintf(out, "%*s", n, "");
}

/* PyTorch's Module.__repr__: one line when there are no children, else the
 * extra repr and "(name): child" lines indented by two more spaces. */
static void print_rec(const Module *m, FILE *out, int depth)
{
    char extra[256] = "";
    if (m->vt->extra_repr) m->vt->extra_repr(m, extra, sizeof extra);
    fprintf(out, "%s(", m->vt->type);
    int nc = nn_module_num_children(m);
    if (nc == 0) {
        fprintf(out, "%s)", extra);
        return;
    }
    if (*extra) {
        fputc('\n', out);
        indent(out, depth + 2);
        fputs(extra, out);
    }
    for (int i = 0; i < nc; i++) {
        fputc('\n', out);
        indent(out, depth + 2);
        fprintf(out, "(%s): ", nn_module_child_name(m, i));
        print_rec(nn_module_child_at(m, i), out, depth + 2);
    }
    fputc('\n', out);
    indent(out, depth);
    fputc(')', out);
}

void nn_module_print(const Module *m, FILE *out)
{
    if (!out) return;
    if (!m || !m->reg) {
        fprintf(out, "(null module)\n");
        return;
    }
    print_rec(m, out, 0);
    fprintf(out, "\nTotal params: %" PRId64 "\nTrainable params: %" PRId64 "\n",
            nn_module_num_parameters(m, false), nn_module_num_parameters(m, true));
}
