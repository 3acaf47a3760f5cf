/* Exact multiclass AUROC, one-vs-rest: keeps every kept sample's C scores
 * and target and, per class, integrates the ROC of that class's scores
 * against "target is this class", as torchmetrics' MulticlassAUROC
 * (thresholds=None) does; then averages (macro, weighted) or not. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

typedef struct McAuroc {
    int64_t c;
    MetricAverage average; /* MACRO, WEIGHTED or NONE */
    MetricIgnore ignore;
    double *buf; /* buf[0] = k, then k / (C + 1) rows: C scores, the target */
    int64_t cap; /* doubles allocated in buf */
} McAuroc;

static int64_t used(const McAuroc *a)
{
    return 1 + (int64_t)a->buf[0];
}

static int64_t rows(const McAuroc *a)
{
    return (int64_t)a->buf[0] / (a->c + 1);
}

static CtStatus check_shapes(const McAuroc *a, const Tensor *p, const Tensor *t)
{
    if (tensor_ndim(p) == 2 && tensor_ndim(t) == 1 &&
        tensor_size(p, 0) == tensor_size(t, 0) && tensor_size(p, 1) == a->c)
        return CT_OK;
    char ps[128], ts[128];
    return ct_error(CT_ERR_SHAPE,
                    "auroc: preds %s and target %s do not fit: expected (N, %lld) scores "
                    "and (N) class indices",
                    metric_shape_str(p, ps), metric_shape_str(t, ts), (long long)a->c);
}

static CtStatus check_dtypes(const Tensor *p, const Tensor *t)
{
    if (!ct_dtype_is_float(tensor_dtype(p)))
        return ct_error(CT_ERR_DTYPE,
                        "auroc: preds must be floating point scores, got %s",
                        ct_dtype_name(tensor_dtype(p)));
    if (!metric_dtype_is_index(tensor_dtype(t)))
        return ct_error(CT_ERR_DTYPE,
                        "auroc: target must be class indices (" METRIC_INDEX_DTYPES
                        "), got %s",
                        ct_dtype_name(tensor_dtype(t)));
    return CT_OK;
}

/* Targets in [0, C) or ignored; no NaN score in a kept row. */
static CtStatus check_values(const McAuroc *a, const double *s, const int64_t *y,
                             int64_t n)
{
    int64_t c = a->c;
    for (int64_t i = 0; i < n; i++) {
        if (metric_ignored(a->ignore, y[i])) continue;
        if (y[i] < 0 || y[i] >= c)
            return ct_error(CT_ERR_INVALID,
                            "auroc: target value %lld at position %lld is outside [0, "
                            "%lld)",
                            (long long)y[i], (long long)i, (long long)c);
        for (int64_t j = 0; j < c; j++)
            if (isnan(s[i * c + j]))
                return ct_error(CT_ERR_INVALID,
                                "auroc: preds value nan at position (%lld, %lld)",
                                (long long)i, (long long)j);
    }
    return CT_OK;
}

static CtStatus mc_check(void *self, MetricBatch *b)
{
    McAuroc *a = self;
    if (!b->target) return metric_null("auroc", "target");
    CtStatus st = check_shapes(a, b->preds, b->target);
    if (st == CT_OK) st = check_dtypes(b->preds, b->target);
    if (st != CT_OK) return st;
    const double *s = metric_batch_preds_f64(b);
    const int64_t *y = metric_batch_target_i64(b);
    if (!s || !y) return ct_last_status();
    return check_values(a, s, y, tensor_numel(b->target));
}

/* torchmetrics: a batch (after dropping ignored samples) with a score
 * outside [0, 1] holds logits. */
static bool kept_all_in_unit(const McAuroc *a, const double *s, const int64_t *y,
                             int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (metric_ignored(a->ignore, y[i])) continue;
        for (int64_t j = 0; j < a->c; j++)
            if (!(s[i * a->c + j] >= 0 && s[i * a->c + j] <= 1)) return false;
    }
    return true;
}

/* out[0 .. c) = softmax(row) in f64, rounded to dt as torch's result is. */
static void softmax_row(const double *row, int64_t c, CtDType dt, double *out)
{
    double mx = row[0], sum = 0;
    for (int64_t j = 1; j < c; j++) mx = fmax(mx, row[j]);
    for (int64_t j = 0; j < c; j++) sum += out[j] = exp(row[j] - mx);
    double inv = 1 / sum;
    for (int64_t j = 0; j < c; j++) out[j] = metric_round_to(dt, out[j] * inv);
}

static CtStatus mc_update(void *self, MetricBatch *b)
{
    McAuroc *a = self;
    const double *s = metric_batch_preds_f64(b);
    const int64_t *y = metric_batch_target_i64(b);
    int64_t n = tensor_numel(b->target), c = a->c, kept = 0;
    for (int64_t i = 0; i < n; i++) kept += !metric_ignored(a->ignore, y[i]);
    if (metric_concat_reserve(&a->buf, &a->cap, kept * (c + 1), "auroc") != CT_OK)
        return ct_last_status();
    bool softmax = !kept_all_in_unit(a, s, y, n);
    CtDType dt = tensor_dtype(b->preds);
    double *out = a->buf + used(a);
    for (int64_t i = 0; i < n; i++) {
        if (metric_ignored(a->ignore, y[i])) continue;
        if (softmax)
            softmax_row(s + i * c, c, dt, out);
        else
            memcpy(out, s + i * c, (size_t)c * sizeof *out);
        out[c] = (double)y[i];
        out += c + 1;
    }
    a->buf[0] += (double)(kept * (c + 1));
    return CT_OK;
}

/* per[0 .. C) = each class's one-vs-rest AUROC; support[j] = its samples. */
static CtStatus per_class(const McAuroc *a, double *per, double *support)
{
    int64_t n = rows(a), c = a->c;
    MetricScorePair *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    if (!p)
        return ct_error(CT_ERR_OOM, "auroc: out of memory sorting %lld scores",
                        (long long)n);
    const double *r = a->buf + 1;
    for (int64_t j = 0; j < c; j++) {
        support[j] = 0;
        for (int64_t i = 0; i < n; i++) {
            bool pos = r[i * (c + 1) + c] == (double)j;
            p[i] = (MetricScorePair){r[i * (c + 1) + j], pos};
            support[j] += pos;
        }
        per[j] = metric_roc_auc(p, n);
    }
    free(p);
    return CT_OK;
}

static CtStatus mc_compute(void *self, double *out)
{
    McAuroc *a = self;
    int64_t c = a->c;
    double *per = malloc((size_t)(2 * c) * sizeof *per);
    if (!per) return ct_error(CT_ERR_OOM, "auroc: out of memory");
    double *support = per + c;
    CtStatus st = per_class(a, per, support);
    if (st == CT_OK) {
        /* macro: every class, one without positives or negatives as 0 */
        bool weighted = a->average == METRIC_AVG_WEIGHTED;
        double num = 0, den = 0;
        for (int64_t j = 0; j < c; j++) {
            double w = weighted ? support[j] : 1;
            num += w * per[j];
            den += w;
        }
        *out = den == 0 ? 0.0 : num / den;
    }
    free(per);
    return st;
}

/* average NONE: (C) f64. */
static Tensor *mc_compute_per_class(void *self)
{
    McAuroc *a = self;
    int64_t c = a->c;
    double *per = malloc((size_t)(2 * c) * sizeof *per);
    if (!per) {
        ct_error(CT_ERR_OOM, "auroc: out of memory");
        return NULL;
    }
    Tensor *r = NULL;
    if (per_class(a, per, per + c) == CT_OK)
        r = tensor_from_data(per, 1, &c, CT_F64, ct_cpu());
    free(per);
    return r;
}

static void mc_reset(void *self)
{
    ((McAuroc *)self)->buf[0] = 0;
}

static const double *mc_state(void *self, int64_t *n)
{
    McAuroc *a = self;
    *n = used(a);
    return a->buf;
}

static CtStatus mc_merge(void *self, const double *other)
{
    McAuroc *a = self;
    double k = other[0], row = (double)(a->c + 1);
    if (!(k >= 0 && k == floor(k) && fmod(k, row) == 0 && k < 9e15))
        return ct_error(CT_ERR_INVALID,
                        "auroc: other_state[0] = %g is not a multiple of num_classes + 1 "
                        "= %g: not the state of a multiclass auroc with %lld classes",
                        k, row, (long long)a->c);
    return metric_concat_append(&a->buf, &a->cap, other, "auroc");
}

static void mc_free(void *self)
{
    McAuroc *a = self;
    if (!a) return;
    free(a->buf);
    free(a);
}

static const MetricVtable mc_scalar_vt = {
    .check = mc_check,
    .update = mc_update,
    .compute = mc_compute,
    .reset = mc_reset,
    .state = mc_state,
    .merge = mc_merge,
    .free = mc_free,
    .merge_rule = METRIC_MERGE_CONCAT,
};

static const MetricVtable mc_per_class_vt = {
    .check = mc_check,
    .update = mc_update,
    .compute_tensor = mc_compute_per_class,
    .reset = mc_reset,
    .state = mc_state,
    .merge = mc_merge,
    .free = mc_free,
    .merge_rule = METRIC_MERGE_CONCAT,
};

static CtStatus check_args(const MetricClassArgs *a)
{
    if (!a) return ct_error(CT_ERR_NULL, "auroc: args is NULL");
    CtStatus st = metric_check_num_classes("auroc", a->num_classes);
    if (st != CT_OK) return st;
    if (a->average == METRIC_AVG_MICRO)
        return ct_error(CT_ERR_INVALID,
                        "auroc: multiclass AUROC has no micro average (torchmetrics' "
                        "default is macro): use METRIC_AVG_MACRO, _WEIGHTED or _NONE");
    if ((unsigned)a->average > METRIC_AVG_NONE)
        return ct_error(CT_ERR_INVALID, "auroc: unknown average %d", (int)a->average);
    if (a->task != METRIC_TASK_MULTICLASS || a->top_k > 1 || a->top_k < 0 ||
        a->threshold != 0)
        return ct_error(CT_ERR_INVALID,
                        "auroc: multiclass AUROC takes no task, top_k or threshold (got "
                        "task %d, top_k %d, threshold %g): leave them 0",
                        (int)a->task, a->top_k, a->threshold);
    return CT_OK;
}

Metric *metric_multiclass_auroc_create(const MetricClassArgs *args)
{
    if (check_args(args) != CT_OK) return NULL;
    McAuroc *a = calloc(1, sizeof *a);
    int64_t cap = 64; /* grows with the first update */
    if (a) a->buf = calloc((size_t)cap, sizeof *a->buf);
    if (!a || !a->buf) {
        mc_free(a);
        ct_error(CT_ERR_OOM, "auroc: out of memory");
        return NULL;
    }
    a->c = args->num_classes;
    a->average = args->average;
    a->ignore = metric_ignore_of(args);
    a->cap = cap;
    return metric_create(
        "auroc", args->average == METRIC_AVG_NONE ? &mc_per_class_vt : &mc_scalar_vt, a);
}
