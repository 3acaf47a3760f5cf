/* Validation of multiclass inputs and the argmax / top-k selections shared
 * by the stat-score metrics and the confusion matrix. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

CtStatus metric_check_num_classes(const char *name, int64_t num_classes)
{
    /* the cap keeps C * C (confusion matrix) far from overflow */
    if (num_classes >= 2 && num_classes <= (1 << 24)) return CT_OK;
    return ct_error(CT_ERR_INVALID, "%s: num_classes = %lld must be in [2, %d]", name,
                    (long long)num_classes, 1 << 24);
}

static CtStatus check_shapes(const char *name, const Tensor *p, const Tensor *t,
                             int64_t c)
{
    int pd = tensor_ndim(p);
    bool fits = tensor_ndim(t) == 1 && (pd == 1 || pd == 2) &&
                tensor_size(p, 0) == tensor_size(t, 0) &&
                (pd == 1 || tensor_size(p, 1) == c);
    if (fits) return CT_OK;
    char ps[128], ts[128];
    return ct_error(CT_ERR_SHAPE,
                    "%s: preds %s and target %s do not fit: expected preds (N, %lld) "
                    "scores or (N) class indices, and target (N)",
                    name, metric_shape_str(p, ps), metric_shape_str(t, ts), (long long)c);
}

static CtStatus check_dtypes(const char *name, const Tensor *p, const Tensor *t,
                             int top_k)
{
    if (!metric_dtype_is_index(tensor_dtype(t)))
        return ct_error(CT_ERR_DTYPE,
                        "%s: target must be class indices (" METRIC_INDEX_DTYPES
                        "), got %s",
                        name, ct_dtype_name(tensor_dtype(t)));
    if (tensor_ndim(p) == 2) {
        if (!ct_dtype_is_float(tensor_dtype(p)))
            return ct_error(CT_ERR_DTYPE,
                            "%s: preds of shape (N, C) are scores and must be floating "
                            "point, got %s",
                            name, ct_dtype_name(tensor_dtype(p)));
        return CT_OK;
    }
    if (!metric_dtype_is_index(tensor_dtype(p)))
        return ct_error(CT_ERR_DTYPE,
                        "%s: preds of shape (N) are class indices (" METRIC_INDEX_DTYPES
                        "), got %s",
                        name, ct_dtype_name(tensor_dtype(p)));
    if (top_k > 1)
        return ct_error(CT_ERR_INVALID,
                        "%s: top_k = %d needs (N, C) scores, got class indices", name,
                        top_k);
    return CT_OK;
}

/* First position of v[0 .. n) outside [0, c) and not ignored, or -1. */
static int64_t first_out_of_range_i64(const int64_t *v, int64_t n, int64_t c,
                                      MetricIgnore ig)
{
    for (int64_t i = 0; i < n; i++)
        if ((v[i] < 0 || v[i] >= c) && !metric_ignored(ig, v[i])) return i;
    return -1;
}

/* The same for index preds v of the samples whose target t is kept. */
static int64_t first_out_of_range_f64(const double *v, const int64_t *t, int64_t n,
                                      int64_t c, MetricIgnore ig)
{
    for (int64_t i = 0; i < n; i++)
        if (!(v[i] >= 0 && v[i] < (double)c) && !metric_ignored(ig, t[i])) return i;
    return -1;
}

CtStatus metric_class_check(const char *name, MetricBatch *b, int64_t num_classes,
                            int top_k, MetricIgnore ig)
{
    if (!b->target) return metric_null(name, "target");
    CtStatus st = check_shapes(name, b->preds, b->target, num_classes);
    if (st == CT_OK) st = check_dtypes(name, b->preds, b->target, top_k);
    if (st != CT_OK) return st;
    int64_t n = tensor_numel(b->target);
    const int64_t *t = metric_batch_target_i64(b);
    if (!t) return ct_last_status();
    int64_t at = first_out_of_range_i64(t, n, num_classes, ig);
    if (at >= 0)
        return ct_error(CT_ERR_INVALID,
                        "%s: target value %lld at position %lld is outside [0, %lld)",
                        name, (long long)t[at], (long long)at, (long long)num_classes);
    const double *p = metric_batch_preds_f64(b);
    if (!p) return ct_last_status();
    if (tensor_ndim(b->preds) == 1 &&
        (at = first_out_of_range_f64(p, t, n, num_classes, ig)) >= 0)
        return ct_error(CT_ERR_INVALID,
                        "%s: pred value %.0f at position %lld is outside [0, %lld)", name,
                        p[at], (long long)at, (long long)num_classes);
    return CT_OK;
}

bool metric_class_has_scores(const MetricBatch *b)
{
    return tensor_ndim(b->preds) == 2;
}

/* a ranks above b: NaN is the highest value, as in torch.argmax/topk. */
static inline bool above(double a, double b)
{
    return a > b || (isnan(a) && !isnan(b));
}

int64_t metric_argmax(const double *row, int64_t c)
{
    int64_t best = 0;
    for (int64_t j = 1; j < c; j++)
        if (above(row[j], row[best])) best = j;
    return best;
}

void metric_topk_mask(const double *row, int64_t c, int k, unsigned char *in)
{
    memset(in, 0, (size_t)c);
    for (int r = 0; r < k; r++) {
        int64_t best = -1;
        for (int64_t j = 0; j < c; j++)
            if (!in[j] && (best < 0 || above(row[j], row[best]))) best = j;
        in[best] = 1;
    }
}
