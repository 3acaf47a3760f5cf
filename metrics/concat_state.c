/* The growing CONCAT states of the exact AUROCs (metrics_internal.h). */
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

/* The capacity for `need` doubles: doubled, or need if more. */
static int64_t grown(int64_t cap, int64_t need)
{
    return cap * 2 > need ? cap * 2 : need;
}

static CtStatus oom(const char *what, int64_t need)
{
    return ct_error(CT_ERR_OOM, "%s: out of memory for a state of %lld values", what,
                    (long long)need);
}

CtStatus metric_concat_reserve(double **buf, int64_t *cap, int64_t more, const char *what)
{
    int64_t need = 1 + (int64_t)(*buf)[0] + more;
    if (need <= *cap) return CT_OK;
    int64_t n = grown(*cap, need);
    double *b = realloc(*buf, (size_t)n * sizeof *b);
    if (!b) return oom(what, need);
    *buf = b;
    *cap = n;
    return CT_OK;
}

CtStatus metric_concat_append(double **buf, int64_t *cap, const double *other,
                              const char *what)
{
    int64_t used = 1 + (int64_t)(*buf)[0], k = (int64_t)other[0], need = used + k;
    double *b = *buf;
    int64_t n = *cap;
    if (need > n) {
        n = grown(n, need);
        b = malloc((size_t)n * sizeof *b);
        if (!b) return oom(what, need);
        memcpy(b, *buf, (size_t)used * sizeof *b);
    }
    memmove(b + used, other + 1, (size_t)k * sizeof *other);
    if (b != *buf) {
        free(*buf);
        *buf = b;
        *cap = n;
    }
    (*buf)[0] += (double)k;
    return CT_OK;
}
