/* Accuracy, precision, recall, specificity and F-beta (F1 is beta 1) for
 * multiclass, binary and multilabel inputs: per-class (per-label)
 * true-positive, false-positive and false-negative counts and the number of
 * samples (tn is what remains; one number for multiclass, one per label for
 * the per-element tasks, where ignored elements differ between labels),
 * reduced the way torchmetrics' _adjust_weights_safe_divide does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

typedef enum StatKind {
    STAT_ACCURACY,
    STAT_PRECISION,
    STAT_RECALL,
    STAT_SPECIFICITY,
    STAT_FBETA
} StatKind;

typedef struct StatScores {
    const char *name;
    StatKind kind;
    MetricTask task;
    int64_t c; /* classes; labels; 1 (the positive class) for binary */
    int top_k;
    MetricAverage average;
    double beta2;        /* FBETA: beta^2 */
    double threshold;    /* binary, multilabel */
    MetricIgnore ignore; /* targets dropped before counting */
    double *state;       /* tp[C], fp[C], fn[C], then samples (multiclass) or
                            samples[C] (binary, multilabel) */
    unsigned char *mask; /* (C) scratch for top-k */
} StatScores;

typedef struct Counts {
    double tp, fp, tn, fn;
} Counts;

/* Binary and multilabel count each element (label) on its own. */
static bool per_element(MetricTask task)
{
    return task != METRIC_TASK_MULTICLASS;
}

static int64_t state_len(MetricTask task, int64_t c)
{
    return per_element(task) ? 4 * c : 3 * c + 1;
}

static double safe_div(double num, double den)
{
    return den == 0 ? 0.0 : num / den;
}

static double score(const StatScores *s, Counts k)
{
    double b2 = s->beta2;
    switch (s->kind) {
    case STAT_ACCURACY:
        return per_element(s->task) ? safe_div(k.tp + k.tn, k.tp + k.tn + k.fp + k.fn)
                                    : safe_div(k.tp, k.tp + k.fn);
    case STAT_PRECISION: return safe_div(k.tp, k.tp + k.fp);
    case STAT_SPECIFICITY: return safe_div(k.tn, k.tn + k.fp);
    case STAT_FBETA: return safe_div((1 + b2) * k.tp, (1 + b2) * k.tp + b2 * k.fn + k.fp);
    default: return safe_div(k.tp, k.tp + k.fn); /* recall */
    }
}

/* The counts of class (label) j. */
static Counts class_counts(const StatScores *s, int64_t j)
{
    const double *tp = s->state, *fp = tp + s->c, *fn = fp + s->c;
    double samples = s->state[3 * s->c + (per_element(s->task) ? j : 0)];
    return (Counts){tp[j], fp[j], samples - tp[j] - fp[j] - fn[j], fn[j]};
}

static CtStatus ss_check(void *self, MetricBatch *b)
{
    StatScores *s = self;
    if (s->task == METRIC_TASK_BINARY)
        return metric_label_check(s->name, b, 0, s->ignore);
    if (s->task == METRIC_TASK_MULTILABEL)
        return metric_label_check(s->name, b, s->c, s->ignore);
    return metric_class_check(s->name, b, s->c, s->top_k, s->ignore);
}

static void multiclass_update(StatScores *s, MetricBatch *b)
{
    const double *p = metric_batch_preds_f64(b);
    const int64_t *t = metric_batch_target_i64(b);
    int64_t n = tensor_numel(b->target), c = s->c;
    double *tp = s->state, *fp = tp + c, *fn = fp + c;
    bool scores = metric_class_has_scores(b);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t y = t[i];
        if (metric_ignored(s->ignore, y)) continue;
        kept++;
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
    s->state[3 * c] += (double)kept;
}

static CtStatus ss_update(void *self, MetricBatch *b)
{
    StatScores *s = self;
    if (s->task == METRIC_TASK_MULTICLASS)
        multiclass_update(s, b);
    else
        metric_label_count(b, s->task == METRIC_TASK_MULTILABEL ? s->c : 0, s->threshold,
                           s->ignore, s->state);
    return CT_OK;
}

static CtStatus ss_compute(void *self, double *out)
{
    StatScores *s = self;
    if (s->average == METRIC_AVG_MICRO) {
        Counts sum = {0, 0, 0, 0};
        for (int64_t j = 0; j < s->c; j++) {
            Counts k = class_counts(s, j);
            sum = (Counts){sum.tp + k.tp, sum.fp + k.fp, sum.tn + k.tn, sum.fn + k.fn};
        }
        *out = score(s, sum);
        return CT_OK;
    }
    double num = 0, den = 0;
    for (int64_t j = 0; j < s->c; j++) {
        Counts k = class_counts(s, j);
        /* multiclass macro leaves out classes never predicted and never
         * present; multilabel macro keeps every label (torchmetrics) */
        double w = s->average == METRIC_AVG_WEIGHTED ? k.tp + k.fn
                   : per_element(s->task)            ? 1
                                                     : (k.tp + k.fp + k.fn > 0);
        num += w * score(s, k);
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
    double *v = malloc((size_t)c * sizeof *v);
    if (!v) {
        ct_error(CT_ERR_OOM, "%s: out of memory", s->name);
        return NULL;
    }
    for (int64_t j = 0; j < c; j++) v[j] = score(s, class_counts(s, j));
    Tensor *r = tensor_from_data(v, 1, &c, CT_F64, ct_cpu());
    free(v);
    return r;
}

static void ss_reset(void *self)
{
    StatScores *s = self;
    memset(s->state, 0, (size_t)state_len(s->task, s->c) * sizeof *s->state);
}

static const double *ss_state(void *self, int64_t *n)
{
    StatScores *s = self;
    *n = state_len(s->task, s->c);
    return s->state;
}

static CtStatus ss_merge(void *self, const double *other)
{
    StatScores *s = self;
    for (int64_t i = 0; i < state_len(s->task, s->c); i++) s->state[i] += other[i];
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

static CtStatus check_threshold(const char *name, const MetricClassArgs *a)
{
    if (!(a->threshold >= 0 && a->threshold <= 1))
        return ct_error(CT_ERR_INVALID, "%s: threshold = %g must be in [0, 1]", name,
                        a->threshold);
    return CT_OK;
}

static CtStatus check_binary_args(const char *name, const MetricClassArgs *a)
{
    if (a->num_classes != 0 && a->num_classes != 2)
        return ct_error(CT_ERR_INVALID,
                        "%s: task binary takes num_classes 0 (or 2), got %lld", name,
                        (long long)a->num_classes);
    if (a->top_k > 1)
        return ct_error(CT_ERR_INVALID, "%s: task binary takes no top_k, got %d", name,
                        a->top_k);
    if (a->average != METRIC_AVG_MICRO)
        return ct_error(CT_ERR_INVALID,
                        "%s: task binary takes no average (it scores the positive "
                        "class), got %d",
                        name, (int)a->average);
    return check_threshold(name, a);
}

static CtStatus check_multilabel_args(const char *name, const MetricClassArgs *a)
{
    if (a->num_classes < 2 || a->num_classes > (1 << 24))
        return ct_error(CT_ERR_INVALID,
                        "%s: task multilabel takes the number of labels in num_classes, "
                        "in [2, %d], got %lld",
                        name, 1 << 24, (long long)a->num_classes);
    if (a->top_k != 0 && a->top_k != 1)
        return ct_error(CT_ERR_INVALID, "%s: task multilabel takes no top_k, got %d",
                        name, a->top_k);
    if ((unsigned)a->average > METRIC_AVG_NONE)
        return ct_error(CT_ERR_INVALID, "%s: unknown average %d", name, (int)a->average);
    return check_threshold(name, a);
}

static CtStatus check_args(const char *name, const MetricClassArgs *a)
{
    if (!a) return ct_error(CT_ERR_NULL, "%s: args is NULL", name);
    if (a->task == METRIC_TASK_BINARY) return check_binary_args(name, a);
    if (a->task == METRIC_TASK_MULTILABEL) return check_multilabel_args(name, a);
    if (a->task != METRIC_TASK_MULTICLASS)
        return ct_error(CT_ERR_INVALID, "%s: unknown task %d", name, (int)a->task);
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
                                  const MetricClassArgs *a, double beta)
{
    if (check_args(name, a) != CT_OK) return NULL;
    if (!(beta > 0 && isfinite(beta))) {
        ct_error(CT_ERR_INVALID, "%s: beta = %g must be finite and > 0", name, beta);
        return NULL;
    }
    int64_t c = a->task == METRIC_TASK_BINARY ? 1 : a->num_classes;
    StatScores *s = calloc(1, sizeof *s);
    if (s) s->state = calloc((size_t)state_len(a->task, c), sizeof *s->state);
    if (s) s->mask = calloc((size_t)c, 1);
    if (!s || !s->state || !s->mask) {
        ss_free(s);
        ct_error(CT_ERR_OOM, "%s: out of memory", name);
        return NULL;
    }
    *s = (StatScores){.name = name,
                      .kind = kind,
                      .task = a->task,
                      .c = c,
                      .top_k = a->top_k ? a->top_k : 1,
                      .average = a->average,
                      .beta2 = beta * beta,
                      .threshold =
                          per_element(a->task) && a->threshold == 0 ? 0.5 : a->threshold,
                      .ignore = metric_ignore_of(a),
                      .state = s->state,
                      .mask = s->mask};
    return metric_create(
        name, a->average == METRIC_AVG_NONE ? &ss_per_class_vt : &ss_scalar_vt, s);
}

Metric *metric_accuracy_create(const MetricClassArgs *args)
{
    return stat_scores_create("accuracy", STAT_ACCURACY, args, 1);
}

Metric *metric_precision_create(const MetricClassArgs *args)
{
    return stat_scores_create("precision", STAT_PRECISION, args, 1);
}

Metric *metric_recall_create(const MetricClassArgs *args)
{
    return stat_scores_create("recall", STAT_RECALL, args, 1);
}

Metric *metric_specificity_create(const MetricClassArgs *args)
{
    return stat_scores_create("specificity", STAT_SPECIFICITY, args, 1);
}

Metric *metric_fbeta_create(const MetricClassArgs *args, double beta)
{
    return stat_scores_create("fbeta", STAT_FBETA, args, beta);
}

Metric *metric_f1_create(const MetricClassArgs *args)
{
    return stat_scores_create("f1", STAT_FBETA, args, 1);
}
