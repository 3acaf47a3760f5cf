/* Accuracy, precision, recall and F1 for multiclass inputs: per-class
 * true-positive, false-positive and false-negative counts, reduced the way
 * torchmetrics' _adjust_weights_safe_divide does. */
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

typedef enum StatKind { STAT_ACCURACY, STAT_PRECISION, STAT_RECALL, STAT_F1 } StatKind;

typedef struct StatScores {
    const char *name;
    StatKind kind;
    int64_t c;
    int top_k;
    MetricAverage average;
    double *state;       /* (3, C): tp, fp, fn per class */
    unsigned char *mask; /* (C) scratch for top-k */
} StatScores;

static double safe_div(double num, double den)
{
    return den == 0 ? 0.0 : num / den;
}

static double score(StatKind kind, double tp, double fp, double fn)
{
    switch (kind) {
    case STAT_PRECISION: return safe_div(tp, tp + fp);
    case STAT_F1: return safe_div(2 * tp, 2 * tp + fp + fn);
    default: return safe_div(tp, tp + fn); /* accuracy, recall */
    }
}

static CtStatus ss_check(void *self, MetricBatch *b)
{
    StatScores *s = self;
    return metric_class_check(s->name, b, s->c, s->top_k);
}

static CtStatus ss_update(void *self, MetricBatch *b)
{
    StatScores *s = self;
    const double *p = metric_batch_preds_f64(b);
    const int64_t *t = metric_batch_target_i64(b);
    int64_t n = tensor_numel(b->target), c = s->c;
    double *tp = s->state, *fp = tp + c, *fn = fp + c;
    bool scores = metric_class_has_scores(b);
    for (int64_t i = 0; i < n; i++) {
        int64_t y = t[i];
        if (s->top_k > 1) {
            metric_topk_mask(p + i * c, c, s->top_k, s->mask);
            for (int64_t j = 0; j < c; j++)
                if (s->mask[j]) (j == y ? tp : fp)[j] += 1;
            if (!s->mask[y]) fn[y] += 1;
            continue;
        }
        int64_t k = scores ? metric_argmax(p + i * c, c) : (int64_t)p[i];
        if (k == y) {
            tp[y] += 1;
        } else {
            fp[k] += 1;
            fn[y] += 1;
        }
    }
    return CT_OK;
}

static CtStatus ss_compute(void *self, double *out)
{
    StatScores *s = self;
    int64_t c = s->c;
    const double *tp = s->state, *fp = tp + c, *fn = fp + c;
    if (s->average == METRIC_AVG_MICRO) {
        double stp = 0, sfp = 0, sfn = 0;
        for (int64_t j = 0; j < c; j++) stp += tp[j], sfp += fp[j], sfn += fn[j];
        *out = score(s->kind, stp, sfp, sfn);
        return CT_OK;
    }
    double num = 0, den = 0;
    for (int64_t j = 0; j < c; j++) {
        /* macro leaves out classes never predicted and never present */
        double w = s->average == METRIC_AVG_WEIGHTED ? tp[j] + fn[j]
                                                     : (tp[j] + fp[j] + fn[j] > 0);
        num += w * score(s->kind, tp[j], fp[j], fn[j]);
        den += w;
    }
    *out = safe_div(num, den);
    return CT_OK;
}

/* average NONE: one value per class, (C) f64. */
static Tensor *ss_compute_per_class(void *self)
{
    StatScores *s = self;
    int64_t c = s->c;
    const double *tp = s->state, *fp = tp + c, *fn = fp + c;
    double *v = malloc((size_t)c * sizeof *v);
    if (!v) {
        ct_error(CT_ERR_OOM, "%s: out of memory", s->name);
        return NULL;
    }
    for (int64_t j = 0; j < c; j++) v[j] = score(s->kind, tp[j], fp[j], fn[j]);
    Tensor *r = tensor_from_data(v, 1, &c, CT_F64, ct_cpu());
    free(v);
    return r;
}

static void ss_reset(void *self)
{
    StatScores *s = self;
    memset(s->state, 0, (size_t)(3 * s->c) * sizeof *s->state);
}

static const double *ss_state(void *self, int64_t *n)
{
    StatScores *s = self;
    *n = 3 * s->c;
    return s->state;
}

static CtStatus ss_merge(void *self, const double *other)
{
    StatScores *s = self;
    for (int64_t i = 0; i < 3 * s->c; i++) s->state[i] += other[i];
    return CT_OK;
}

static void ss_free(void *self)
{
    StatScores *s = self;
    if (!s) return;
    free(s->state);
    free(s->mask);
    free(s);
}

static const MetricVtable ss_scalar_vt = {
    .check = ss_check,
    .update = ss_update,
    .compute = ss_compute,
    .reset = ss_reset,
    .state = ss_state,
    .merge = ss_merge,
    .free = ss_free,
    .merge_rule = METRIC_MERGE_SUM,
};

static const MetricVtable ss_per_class_vt = {
    .check = ss_check,
    .update = ss_update,
    .compute_tensor = ss_compute_per_class,
    .reset = ss_reset,
    .state = ss_state,
    .merge = ss_merge,
    .free = ss_free,
    .merge_rule = METRIC_MERGE_SUM,
};

static CtStatus check_args(const char *name, const MetricClassArgs *a)
{
    if (!a) return ct_error(CT_ERR_NULL, "%s: args is NULL", name);
    CtStatus st = metric_check_num_classes(name, a->num_classes);
    if (st != CT_OK) return st;
    int top_k = a->top_k ? a->top_k : 1;
    if (top_k < 1 || top_k > a->num_classes)
        return ct_error(CT_ERR_INVALID,
                        "%s: top_k = %d must be in [1, num_classes = %lld]", name, top_k,
                        (long long)a->num_classes);
    if ((unsigned)a->average > METRIC_AVG_NONE)
        return ct_error(CT_ERR_INVALID, "%s: unknown average %d", name, (int)a->average);
    return CT_OK;
}

static Metric *stat_scores_create(const char *name, StatKind kind,
                                  const MetricClassArgs *a)
{
    if (check_args(name, a) != CT_OK) return NULL;
    int top_k = a->top_k ? a->top_k : 1;
    StatScores *s = calloc(1, sizeof *s);
    if (s) s->state = calloc((size_t)(3 * a->num_classes), sizeof *s->state);
    if (s) s->mask = calloc((size_t)a->num_classes, 1);
    if (!s || !s->state || !s->mask) {
        ss_free(s);
        ct_error(CT_ERR_OOM, "%s: out of memory", name);
        return NULL;
    }
    *s = (StatScores){name, kind, a->num_classes, top_k, a->average, s->state, s->mask};
    return metric_create(
        name, a->average == METRIC_AVG_NONE ? &ss_per_class_vt : &ss_scalar_vt, s);
}

Metric *metric_accuracy_create(const MetricClassArgs *args)
{
    return stat_scores_create("accuracy", STAT_ACCURACY, args);
}

Metric *metric_precision_create(const MetricClassArgs *args)
{
    return stat_scores_create("precision", STAT_PRECISION, args);
}

Metric *metric_recall_create(const MetricClassArgs *args)
{
    return stat_scores_create("recall", STAT_RECALL, args);
}

Metric *metric_f1_create(const MetricClassArgs *args)
{
    return stat_scores_create("f1", STAT_F1, args);
}
