/* Multiclass confusion matrix: counts (C, C), row = target, column = the
 * argmax (or index) prediction, like torchmetrics' MulticlassConfusionMatrix;
 * normalized by row, column or total as its normalize= does. */
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

typedef struct ConfMat {
    int64_t c;
    MetricNormalize normalize;
    MetricIgnore ignore; /* targets not counted */
    double *counts;      /* (C, C) */
} ConfMat;

static CtStatus cm_check(void *self, MetricBatch *b)
{
    ConfMat *m = self;
    return metric_class_check("confusion_matrix", b, m->c, 1, m->ignore);
}

static CtStatus cm_update(void *self, MetricBatch *b)
{
    ConfMat *m = self;
    const double *p = metric_batch_preds_f64(b);
    const int64_t *t = metric_batch_target_i64(b);
    int64_t n = tensor_numel(b->target), c = m->c;
    bool scores = metric_class_has_scores(b);
    for (int64_t i = 0; i < n; i++) {
        if (metric_ignored(m->ignore, t[i])) continue;
        int64_t k = scores ? metric_argmax(p + i * c, c) : (int64_t)p[i];
        m->counts[t[i] * c + k] += 1;
    }
    return CT_OK;
}

static Tensor *counts_tensor(const ConfMat *m)
{
    int64_t c = m->c, shape[2] = {c, c};
    int64_t *v = malloc((size_t)(c * c) * sizeof *v);
    if (!v) {
        ct_error(CT_ERR_OOM, "confusion_matrix: out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < c * c; i++) v[i] = (int64_t)m->counts[i];
    Tensor *r = tensor_from_data(v, 2, shape, CT_I64, ct_cpu());
    free(v);
    return r;
}

/* The sum that divides counts[i * c + j]: its row's, column's or all. */
static void divisors(const ConfMat *m, double *row, double *col, double *all)
{
    int64_t c = m->c;
    *all = 0;
    for (int64_t i = 0; i < c; i++) row[i] = col[i] = 0;
    for (int64_t i = 0; i < c; i++)
        for (int64_t j = 0; j < c; j++) {
            double v = m->counts[i * c + j];
            row[i] += v;
            col[j] += v;
            *all += v;
        }
}

/* f64 (C, C); an empty row, column or matrix gives 0s (torchmetrics turns
 * the NaNs of 0 / 0 into 0). */
static Tensor *normalized_tensor(const ConfMat *m)
{
    int64_t c = m->c, shape[2] = {c, c};
    double *v = malloc((size_t)(c * c + 2 * c) * sizeof *v);
    if (!v) {
        ct_error(CT_ERR_OOM, "confusion_matrix: out of memory");
        return NULL;
    }
    double *row = v + c * c, *col = row + c, all;
    divisors(m, row, col, &all);
    for (int64_t i = 0; i < c; i++)
        for (int64_t j = 0; j < c; j++) {
            double d = m->normalize == METRIC_NORMALIZE_TRUE   ? row[i]
                       : m->normalize == METRIC_NORMALIZE_PRED ? col[j]
                                                               : all;
            v[i * c + j] = d == 0 ? 0.0 : m->counts[i * c + j] / d;
        }
    Tensor *r = tensor_from_data(v, 2, shape, CT_F64, ct_cpu());
    free(v);
    return r;
}

static Tensor *cm_compute_tensor(void *self)
{
    ConfMat *m = self;
    return m->normalize == METRIC_NORMALIZE_NONE ? counts_tensor(m)
                                                 : normalized_tensor(m);
}

static void cm_reset(void *self)
{
    ConfMat *m = self;
    memset(m->counts, 0, (size_t)(m->c * m->c) * sizeof *m->counts);
}

static const double *cm_state(void *self, int64_t *n)
{
    ConfMat *m = self;
    *n = m->c * m->c;
    return m->counts;
}

static CtStatus cm_merge(void *self, const double *other)
{
    ConfMat *m = self;
    for (int64_t i = 0; i < m->c * m->c; i++) m->counts[i] += other[i];
    return CT_OK;
}

static void cm_free(void *self)
{
    ConfMat *m = self;
    if (!m) return;
    free(m->counts);
    free(m);
}

static const MetricVtable cm_vt = {
    .check = cm_check,
    .update = cm_update,
    .compute_tensor = cm_compute_tensor,
    .reset = cm_reset,
    .state = cm_state,
    .merge = cm_merge,
    .free = cm_free,
    .merge_rule = METRIC_MERGE_SUM,
};

static ConfMat *confmat_new(int64_t num_classes, MetricNormalize normalize,
                            MetricIgnore ignore)
{
    if (metric_check_num_classes("confusion_matrix", num_classes) != CT_OK) return NULL;
    if ((unsigned)normalize > METRIC_NORMALIZE_ALL) {
        ct_error(CT_ERR_INVALID, "confusion_matrix: unknown normalize %d",
                 (int)normalize);
        return NULL;
    }
    ConfMat *m = calloc(1, sizeof *m);
    if (m) m->counts = calloc((size_t)(num_classes * num_classes), sizeof *m->counts);
    if (!m || !m->counts) {
        cm_free(m);
        ct_error(CT_ERR_OOM, "confusion_matrix: out of memory");
        return NULL;
    }
    m->c = num_classes;
    m->normalize = normalize;
    m->ignore = ignore;
    return m;
}

Metric *metric_confusion_matrix_normalized_create(int64_t num_classes,
                                                  MetricNormalize normalize)
{
    ConfMat *m = confmat_new(num_classes, normalize, (MetricIgnore){false, 0});
    return m ? metric_create("confusion_matrix", &cm_vt, m) : NULL;
}

/* The fields of args that the multiclass confusion matrix does not take are
 * left at 0 (or top_k 1). */
static CtStatus check_unused_args(const MetricClassArgs *a)
{
    if (a->task != METRIC_TASK_MULTICLASS)
        return ct_error(CT_ERR_INVALID,
                        "confusion_matrix: only task multiclass is implemented, got "
                        "task %d",
                        (int)a->task);
    if (a->top_k > 1 || a->top_k < 0)
        return ct_error(CT_ERR_INVALID, "confusion_matrix: takes no top_k, got %d",
                        a->top_k);
    if (a->average != METRIC_AVG_MICRO || a->threshold != 0)
        return ct_error(CT_ERR_INVALID,
                        "confusion_matrix: takes no average or threshold (got average "
                        "%d, threshold %g): leave them 0",
                        (int)a->average, a->threshold);
    return CT_OK;
}

Metric *metric_confusion_matrix_create_args(const MetricClassArgs *args,
                                            MetricNormalize normalize)
{
    if (!args) {
        ct_error(CT_ERR_NULL, "confusion_matrix: args is NULL");
        return NULL;
    }
    if (check_unused_args(args) != CT_OK) return NULL;
    ConfMat *m = confmat_new(args->num_classes, normalize, metric_ignore_of(args));
    return m ? metric_create("confusion_matrix", &cm_vt, m) : NULL;
}

Metric *metric_confusion_matrix_create(int64_t num_classes)
{
    return metric_confusion_matrix_normalized_create(num_classes, METRIC_NORMALIZE_NONE);
}
