/* Validation and thresholding of per-element inputs: task BINARY (one 0/1
 * label per element) and task MULTILABEL (L labels per sample), as
 * torchmetrics' _binary_* and _multilabel_stat_scores_tensor_validation and
 * _format. Binary is the L = 1 case of the counting. */
#include <math.h>
#include <stdlib.h>

#include "metrics_internal.h"

static bool same_shape(const Tensor *p, const Tensor *t)
{
    int nd = tensor_ndim(p);
    bool fits = nd == tensor_ndim(t);
    for (int i = 0; fits && i < nd; i++) fits = tensor_size(p, i) == tensor_size(t, i);
    return fits;
}

/* binary: (N, ...); multilabel: (N, L, ...), L = num_labels. */
static CtStatus check_shapes(const char *name, const Tensor *p, const Tensor *t,
                             int64_t num_labels)
{
    bool fits = same_shape(p, t) && tensor_ndim(p) >= (num_labels ? 2 : 1) &&
                (!num_labels || tensor_size(p, 1) == num_labels);
    if (fits) return CT_OK;
    char ps[128], ts[128];
    if (num_labels)
        return ct_error(CT_ERR_SHAPE,
                        "%s: preds %s and target %s do not fit: task multilabel expects "
                        "preds and target of one shape (N, L = %lld, ...)",
                        name, metric_shape_str(p, ps), metric_shape_str(t, ts),
                        (long long)num_labels);
    return ct_error(CT_ERR_SHAPE,
                    "%s: preds %s and target %s do not fit: task binary expects preds "
                    "and target of one shape (N, ...)",
                    name, metric_shape_str(p, ps), metric_shape_str(t, ts));
}

static CtStatus check_dtypes(const char *name, const Tensor *p, const Tensor *t,
                             const char *task)
{
    CtDType pd = tensor_dtype(p), td = tensor_dtype(t);
    if (!ct_dtype_is_float(pd) && !metric_dtype_is_index(pd))
        return ct_error(CT_ERR_DTYPE,
                        "%s: %s preds must be float scores or 0/1 labels "
                        "(" METRIC_INDEX_DTYPES "), got %s",
                        name, task, ct_dtype_name(pd));
    if (!ct_dtype_is_float(td) && !metric_dtype_is_index(td))
        return ct_error(CT_ERR_DTYPE,
                        "%s: %s target must be 0/1 (" METRIC_INDEX_DTYPES
                        " or float), got %s",
                        name, task, ct_dtype_name(td));
    return CT_OK;
}

static bool ignored_f64(MetricIgnore ig, double target)
{
    return ig.on && target == (double)ig.index;
}

/* First position of v[0 .. n) that is neither 0 nor 1 nor ignored, or -1. */
static int64_t first_not_01(const double *v, int64_t n, MetricIgnore ig)
{
    for (int64_t i = 0; i < n; i++)
        if (v[i] != 0 && v[i] != 1 && !ignored_f64(ig, v[i])) return i;
    return -1;
}

CtStatus metric_label_check(const char *name, MetricBatch *b, int64_t num_labels,
                            MetricIgnore ig)
{
    if (!b->target) return metric_null(name, "target");
    CtStatus st = check_shapes(name, b->preds, b->target, num_labels);
    if (st == CT_OK)
        st =
            check_dtypes(name, b->preds, b->target, num_labels ? "multilabel" : "binary");
    if (st != CT_OK) return st;
    int64_t n = tensor_numel(b->target);
    const double *t = metric_batch_target_f64(b), *p = metric_batch_preds_f64(b);
    if (!t || !p) return ct_last_status();
    int64_t at = first_not_01(t, n, ig);
    if (at >= 0)
        return ct_error(CT_ERR_INVALID,
                        "%s: target value %g at position %lld is not 0 or 1", name, t[at],
                        (long long)at);
    /* like torchmetrics, label preds are checked at ignored elements too */
    MetricIgnore none = {false, 0};
    if (!ct_dtype_is_float(tensor_dtype(b->preds)) &&
        (at = first_not_01(p, n, none)) >= 0)
        return ct_error(CT_ERR_INVALID,
                        "%s: pred value %g at position %lld is not 0 or 1 (integer preds "
                        "are labels)",
                        name, p[at], (long long)at);
    return CT_OK;
}

/* v rounded to dt, as torch stores a Python float compared with a tensor of
 * that dtype (through f32 for the half types). */
double metric_round_to(CtDType dt, double v)
{
    switch (dt) {
    case CT_F32: return (float)v;
    case CT_BF16: return ct_bf16_to_f32(ct_f32_to_bf16((float)v));
    case CT_F16: return ct_f16_to_f32(ct_f32_to_f16((float)v));
    default: return v;
    }
}

/* torch's sigmoid in dt: f64 in f64, the others in f32 (then rounded). */
static double sigmoid_in(CtDType dt, double x)
{
    if (dt == CT_F64) return 1.0 / (1.0 + exp(-x));
    return metric_round_to(dt, 1.0f / (1.0f + expf(-(float)x)));
}

static bool all_in_unit(const double *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!(p[i] >= 0 && p[i] <= 1)) return false;
    return true;
}

void metric_label_count(MetricBatch *b, int64_t num_labels, double threshold,
                        MetricIgnore ig, double *counts)
{
    const double *p = metric_batch_preds_f64(b), *t = metric_batch_target_f64(b);
    int64_t n = tensor_numel(b->target);
    if (n == 0) return;
    int64_t nl = num_labels ? num_labels : 1;
    /* element i of (N, L, ...) belongs to label (i / inner) % L */
    int64_t inner = num_labels ? n / (tensor_size(b->target, 0) * nl) : n;
    double *tp = counts, *fp = tp + nl, *fn = fp + nl, *kept = fn + nl;
    CtDType dt = tensor_dtype(b->preds);
    bool scores = ct_dtype_is_float(dt);
    bool sigmoid = scores && !all_in_unit(p, n);
    double thr = metric_round_to(dt, threshold);
    for (int64_t i = 0; i < n; i++) {
        if (ignored_f64(ig, t[i])) continue;
        int64_t j = (i / inner) % nl;
        kept[j] += 1;
        bool pred = scores ? (sigmoid ? sigmoid_in(dt, p[i]) : p[i]) > thr : p[i] == 1;
        bool pos = t[i] == 1;
        if (pred && pos)
            tp[j] += 1;
        else if (pred)
            fp[j] += 1;
        else if (pos)
            fn[j] += 1;
    }
}
