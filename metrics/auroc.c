/* Exact binary AUROC: keeps every (score, target) pair and integrates the
 * ROC with the trapezoid rule at each distinct score, as torchmetrics'
 * BinaryAUROC(thresholds=None) and sklearn's roc_auc_score do. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

typedef struct Auroc {
    double *buf; /* buf[0] = k, then k/2 pairs (score, target) */
    int64_t cap; /* doubles allocated in buf */
} Auroc;

typedef MetricScorePair Pair;

static int64_t used(const Auroc *a)
{
    return 1 + (int64_t)a->buf[0];
}

static CtStatus au_check(void *self, MetricBatch *b)
{
    Tensor *p = b->preds, *t = b->target;
    if (!t) return metric_null("auroc", "target");
    if (tensor_ndim(p) != 1 || tensor_ndim(t) != 1 ||
        tensor_size(p, 0) != tensor_size(t, 0)) {
        char ps[128], ts[128];
        return ct_error(
            CT_ERR_SHAPE,
            "auroc: preds %s and target %s do not fit: expected (N) scores and "
            "(N) targets",
            metric_shape_str(p, ps), metric_shape_str(t, ts));
    }
    if (!ct_dtype_is_float(tensor_dtype(p)))
        return ct_error(CT_ERR_DTYPE,
                        "auroc: preds must be floating point scores, got %s",
                        ct_dtype_name(tensor_dtype(p)));
    if (!metric_dtype_is_index(tensor_dtype(t)))
        return ct_error(CT_ERR_DTYPE,
                        "auroc: target must be 0/1 (" METRIC_INDEX_DTYPES "), got %s",
                        ct_dtype_name(tensor_dtype(t)));
    const double *s = metric_batch_preds_f64(b);
    const int64_t *y = metric_batch_target_i64(b);
    if (!s || !y) return ct_last_status();
    for (int64_t i = 0; i < tensor_numel(t); i++) {
        if (y[i] != 0 && y[i] != 1)
            return ct_error(CT_ERR_INVALID,
                            "auroc: target value %lld at position %lld is not 0 or 1",
                            (long long)y[i], (long long)i);
        if (isnan(s[i]))
            return ct_error(CT_ERR_INVALID, "auroc: preds value nan at position %lld",
                            (long long)i);
    }
    return CT_OK;
}

static CtStatus au_update(void *self, MetricBatch *b)
{
    Auroc *a = self;
    const double *s = metric_batch_preds_f64(b);
    const int64_t *y = metric_batch_target_i64(b);
    int64_t n = tensor_numel(b->target);
    if (metric_concat_reserve(&a->buf, &a->cap, 2 * n, "auroc") != CT_OK)
        return ct_last_status();
    /* like torchmetrics: a batch with a score outside [0, 1] holds logits */
    bool logits = false;
    for (int64_t i = 0; i < n; i++) logits |= s[i] < 0 || s[i] > 1;
    double *out = a->buf + used(a);
    for (int64_t i = 0; i < n; i++) {
        out[2 * i] = logits ? 1.0 / (1.0 + exp(-s[i])) : s[i];
        out[2 * i + 1] = (double)y[i];
    }
    a->buf[0] += (double)(2 * n);
    return CT_OK;
}

static int by_score_desc(const void *x, const void *y)
{
    double a = ((const Pair *)x)->score, b = ((const Pair *)y)->score;
    return (a < b) - (a > b);
}

double metric_roc_auc(MetricScorePair *p, int64_t n)
{
    qsort(p, (size_t)n, sizeof *p, by_score_desc);
    /* walk the thresholds from high to low; tied scores form one ROC point */
    double tp = 0, fp = 0, area = 0;
    for (int64_t i = 0; i < n;) {
        double tp0 = tp, fp0 = fp;
        int64_t j = i;
        for (; j < n && p[j].score == p[i].score; j++)
            tp += p[j].target, fp += 1 - p[j].target;
        area += (fp - fp0) * (tp + tp0) / 2;
        i = j;
    }
    /* only one class seen: torchmetrics' zero fpr/tpr curve has no area */
    return tp > 0 && fp > 0 ? area / (tp * fp) : 0.0;
}

static CtStatus au_compute(void *self, double *out)
{
    Auroc *a = self;
    int64_t n = (used(a) - 1) / 2;
    Pair *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    if (!p)
        return ct_error(CT_ERR_OOM, "auroc: out of memory sorting %lld scores",
                        (long long)n);
    memcpy(p, a->buf + 1, (size_t)n * sizeof *p);
    *out = metric_roc_auc(p, n);
    free(p);
    return CT_OK;
}

static void au_reset(void *self)
{
    ((Auroc *)self)->buf[0] = 0;
}

static const double *au_state(void *self, int64_t *n)
{
    Auroc *a = self;
    *n = used(a);
    return a->buf;
}

static CtStatus au_merge(void *self, const double *other)
{
    Auroc *a = self;
    double k = other[0];
    if (!(k >= 0 && k == floor(k) && fmod(k, 2) == 0 && k < 9e15))
        return ct_error(CT_ERR_INVALID,
                        "auroc: other_state[0] = %g is not a pair count (an even integer "
                        ">= 0): not an auroc state",
                        k);
    return metric_concat_append(&a->buf, &a->cap, other, "auroc");
}

static void au_free(void *self)
{
    Auroc *a = self;
    if (!a) return;
    free(a->buf);
    free(a);
}

static const MetricVtable au_vt = {
    .check = au_check,
    .update = au_update,
    .compute = au_compute,
    .reset = au_reset,
    .state = au_state,
    .merge = au_merge,
    .free = au_free,
    .merge_rule = METRIC_MERGE_CONCAT,
};

Metric *metric_auroc_create(void)
{
    Auroc *a = calloc(1, sizeof *a);
    if (a) a->buf = calloc(64, sizeof *a->buf);
    if (!a || !a->buf) {
        au_free(a);
        ct_error(CT_ERR_OOM, "auroc: out of memory");
        return NULL;
    }
    a->cap = 64;
    return metric_create("auroc", &au_vt, a);
}
