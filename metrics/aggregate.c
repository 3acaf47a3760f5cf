/* Mean, Sum, Min and Max over every value seen, like torchmetrics'
 * aggregation metrics with nan_strategy="ignore" (NaN values and their
 * weights are skipped). */
#include <math.h>
#include <stdlib.h>

#include "metrics_internal.h"

typedef enum AggKind { AGG_MEAN, AGG_SUM, AGG_MIN, AGG_MAX } AggKind;

typedef struct Aggregate {
    const char *name;
    AggKind kind;
    double state[2]; /* mean: sum(w v), sum(w); sum/min/max: the value */
} Aggregate;

static CtStatus agg_check(void *self, MetricBatch *b)
{
    Aggregate *a = self;
    if (!b->target) return CT_OK;
    if (a->kind != AGG_MEAN)
        return ct_error(CT_ERR_INVALID, "%s: takes no weights (target must be NULL)",
                        a->name);
    int64_t nw = tensor_numel(b->target);
    if (nw != 1 && nw != tensor_numel(b->preds)) {
        char ps[128], ts[128];
        return ct_error(CT_ERR_SHAPE,
                        "%s: weights %s do not fit values %s: expected one weight per "
                        "value or a single weight",
                        a->name, metric_shape_str(b->target, ts),
                        metric_shape_str(b->preds, ps));
    }
    return CT_OK;
}

static void mean_update(Aggregate *a, const double *v, const double *w, int64_t n,
                        int64_t nw)
{
    double sv = 0, sw = 0;
    for (int64_t i = 0; i < n; i++) {
        double wi = w ? w[nw == 1 ? 0 : i] : 1.0;
        if (isnan(v[i]) || isnan(wi)) continue;
        sv += v[i] * wi;
        sw += wi;
    }
    a->state[0] += sv;
    a->state[1] += sw;
}

static CtStatus agg_update(void *self, MetricBatch *b)
{
    Aggregate *a = self;
    const double *v = metric_batch_preds_f64(b);
    const double *w = b->target ? metric_batch_target_f64(b) : NULL;
    if (!v || (b->target && !w)) return ct_last_status();
    int64_t n = tensor_numel(b->preds);
    if (a->kind == AGG_MEAN) {
        mean_update(a, v, w, n, w ? tensor_numel(b->target) : 0);
        return CT_OK;
    }
    double acc = a->state[0];
    for (int64_t i = 0; i < n; i++) {
        if (isnan(v[i])) continue;
        if (a->kind == AGG_SUM)
            acc += v[i];
        else if (a->kind == AGG_MIN)
            acc = v[i] < acc ? v[i] : acc;
        else
            acc = v[i] > acc ? v[i] : acc;
    }
    a->state[0] = acc;
    return CT_OK;
}

static CtStatus agg_compute(void *self, double *out)
{
    Aggregate *a = self;
    /* an empty mean is 0/0 = NaN, as in torchmetrics */
    *out = a->kind == AGG_MEAN ? a->state[0] / a->state[1] : a->state[0];
    return CT_OK;
}

static void agg_reset(void *self)
{
    Aggregate *a = self;
    a->state[0] = a->kind == AGG_MIN ? INFINITY : a->kind == AGG_MAX ? -INFINITY : 0.0;
    a->state[1] = 0.0;
}

static const double *agg_state(void *self, int64_t *n)
{
    Aggregate *a = self;
    *n = a->kind == AGG_MEAN ? 2 : 1;
    return a->state;
}

static CtStatus agg_merge(void *self, const double *other)
{
    Aggregate *a = self;
    switch (a->kind) {
    case AGG_MEAN: a->state[0] += other[0], a->state[1] += other[1]; break;
    case AGG_SUM: a->state[0] += other[0]; break;
    case AGG_MIN: a->state[0] = fmin(a->state[0], other[0]); break;
    case AGG_MAX: a->state[0] = fmax(a->state[0], other[0]); break;
    }
    return CT_OK;
}

static void agg_free(void *self)
{
    free(self);
}

#define AGG_VTABLE(rule)                                                                 \
    {                                                                                    \
        .check = agg_check, .update = agg_update, .compute = agg_compute,                \
        .reset = agg_reset, .state = agg_state, .merge = agg_merge, .free = agg_free,    \
        .merge_rule = rule,                                                              \
    }
static const MetricVtable sum_vt = AGG_VTABLE(METRIC_MERGE_SUM);
static const MetricVtable min_vt = AGG_VTABLE(METRIC_MERGE_MIN);
static const MetricVtable max_vt = AGG_VTABLE(METRIC_MERGE_MAX);

static Metric *aggregate_create(const char *name, AggKind kind, const MetricVtable *vt)
{
    Aggregate *a = calloc(1, sizeof *a);
    if (!a) {
        ct_error(CT_ERR_OOM, "%s: out of memory", name);
        return NULL;
    }
    a->name = name;
    a->kind = kind;
    agg_reset(a);
    return metric_create(name, vt, a);
}

Metric *metric_mean_create(void)
{
    return aggregate_create("mean", AGG_MEAN, &sum_vt);
}
Metric *metric_sum_create(void)
{
    return aggregate_create("sum", AGG_SUM, &sum_vt);
}
Metric *metric_min_create(void)
{
    return aggregate_create("min", AGG_MIN, &min_vt);
}
Metric *metric_max_create(void)
{
    return aggregate_create("max", AGG_MAX, &max_vt);
}
