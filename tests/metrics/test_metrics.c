/* Metrics against torchmetrics 1.2.1 (tests/fixtures/metrics.py): values,
 * accumulation over updates, reset and merging across ranks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_fixtures.h"

/* ------------------------------------------------------------ fixtures */

START_TEST(test_class_metrics_match_torchmetrics)
{
    TU_MEM_BEGIN;
    Tensor *x = logits_tensor(), *t = i64_tensor(fx_target, N);
    for (int kind = 0; kind < 4; kind++)
        for (int avg = 0; avg < 3; avg++)
            for (int k = 1; k <= 2; k++) {
                Metric *m = class_create[kind](
                    &(MetricClassArgs){.num_classes = C, .top_k = k, .average = avg});
                ck_assert_ptr_nonnull(m);
                ck_assert(metric_is_scalar(m));
                feed(m, x, t);
                double want = fx_class_scalar[kind * 6 + avg * 2 + (k - 1)];
                ck_assert_msg(fabs(value_of(m) - want) < TOL_F32,
                              "%s avg %d top_k %d: %g vs %g", metric_name(m), avg, k,
                              value_of(m), want);
                metric_free(m);
            }
    tensor_free(x);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

/* average NONE gives one value per class; metric_compute refuses it. */
START_TEST(test_class_per_class_values)
{
    TU_MEM_BEGIN;
    Tensor *x = logits_tensor(), *t = i64_tensor(fx_target, N);
    for (int kind = 0; kind < 4; kind++) {
        Metric *m = class_create[kind](
            &(MetricClassArgs){.num_classes = C, .average = METRIC_AVG_NONE});
        feed(m, x, t);
        ck_assert(!metric_is_scalar(m));
        double v;
        ck_assert_int_eq(metric_compute(m, &v), CT_ERR_STATE);
        tu_assert_error(CT_ERR_STATE, "is not a scalar: use metric_compute_tensor");
        Tensor *r = metric_compute_tensor(m);
        tu_assert_shape(r, 1, C);
        tu_assert_values(r, fx_class_none + 4 * kind, C, TOL_F32, 0);
        tensor_free(r);
        metric_free(m);
    }
    tensor_free(x);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

/* Class-index predictions with a fifth class that is never predicted and
 * never present: macro averaging leaves it out. */
START_TEST(test_class_index_preds_absent_class)
{
    TU_MEM_BEGIN;
    Tensor *p = i64_tensor(fx_pred_idx, N), *t = i64_tensor(fx_target, N);
    for (int kind = 0; kind < 4; kind++)
        for (int avg = 0; avg < 3; avg++) {
            Metric *m =
                class_create[kind](&(MetricClassArgs){.num_classes = 5, .average = avg});
            feed(m, p, t);
            ck_assert_double_eq_tol(value_of(m), fx_class5[kind * 3 + avg], TOL_F32);
            metric_free(m);
        }
    tensor_free(p);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

/* Inputs in any layout and dtype: f32 logits seen through a transpose (not
 * contiguous), i32 targets. */
START_TEST(test_class_strided_inputs)
{
    TU_MEM_BEGIN;
    double xt[C * N];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < C; j++) xt[j * N + i] = fx_logits[i * C + j];
    Tensor *base = tu_tensor(CT_F32, 2, (const int64_t[]){C, N}, xt);
    Tensor *x = tensor_transpose(base, 0, 1);
    ck_assert(!tensor_is_contiguous(x));
    double tv[N];
    for (int i = 0; i < N; i++) tv[i] = (double)fx_target[i];
    Tensor *t = tu_tensor(CT_I32, 1, (const int64_t[]){N}, tv);
    Metric *m = metric_f1_create(
        &(MetricClassArgs){.num_classes = C, .average = METRIC_AVG_MACRO});
    feed(m, x, t);
    ck_assert_double_eq_tol(value_of(m), fx_class_scalar[3 * 6 + 2], TOL_F32);
    metric_free(m);
    tensor_free(x);
    tensor_free(base);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

START_TEST(test_confusion_matrix)
{
    TU_MEM_BEGIN;
    Tensor *x = logits_tensor(), *p = i64_tensor(fx_pred_idx, N),
           *t = i64_tensor(fx_target, N);
    Metric *a = metric_confusion_matrix_create(C), *b = metric_confusion_matrix_create(C);
    feed(a, x, t);
    feed(b, p, t);
    for (int k = 0; k < 2; k++) {
        Tensor *r = metric_compute_tensor(k ? b : a);
        tu_assert_shape(r, 2, C, C);
        ck_assert_int_eq(tensor_dtype(r), CT_I64);
        const int64_t *v = tensor_data(r);
        for (int i = 0; i < C * C; i++) ck_assert_int_eq(v[i], fx_confmat[i]);
        tensor_free(r);
    }
    double v;
    ck_assert_int_eq(metric_compute(a, &v), CT_ERR_STATE);
    tu_assert_error(CT_ERR_STATE, "confusion_matrix: the value is not a scalar");
    metric_free(a);
    metric_free(b);
    tensor_free(x);
    tensor_free(p);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

START_TEST(test_aggregators)
{
    TU_MEM_BEGIN;
    Tensor *v = tu_tensor(CT_F64, 1, (const int64_t[]){N}, fx_values);
    Tensor *w = tu_tensor(CT_F64, 1, (const int64_t[]){N}, fx_weights);
    Metric *m[5] = {metric_mean_create(), metric_sum_create(), metric_min_create(),
                    metric_max_create(), metric_mean_create()};
    feed(m[0], v, w);
    for (int i = 1; i < 5; i++) feed(m[i], v, NULL);
    for (int i = 0; i < 5; i++) {
        double tol = 1e-5 + 1e-6 * fabs(fx_aggs[i]);
        ck_assert_msg(fabs(value_of(m[i]) - fx_aggs[i]) < tol, "%s: %.9g vs %.9g",
                      metric_name(m[i]), value_of(m[i]), fx_aggs[i]);
        metric_free(m[i]);
    }
    tensor_free(v);
    tensor_free(w);
    TU_MEM_END;
}
END_TEST

/* Scalar updates (a loss per step) and a single broadcast weight. */
START_TEST(test_aggregators_scalar_updates)
{
    TU_MEM_BEGIN;
    Metric *mean = metric_mean_create(), *sum = metric_sum_create(),
           *mx = metric_max_create();
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(metric_update_scalar(mean, fx_values[i], fx_weights[i]), CT_OK);
        ck_assert_int_eq(metric_update_scalar(sum, fx_values[i], 1.0), CT_OK);
        ck_assert_int_eq(metric_update_scalar(mx, fx_values[i], 1.0), CT_OK);
    }
    ck_assert_double_eq_tol(value_of(mean), fx_aggs[0], 1e-6);
    ck_assert_double_eq_tol(value_of(sum), fx_aggs[1], 1e-4);
    ck_assert_double_eq_tol(value_of(mx), fx_aggs[3], 1e-5);
    /* a single weight applies to every value: 2 * (1 + 3) / (2 * 2) */
    metric_reset(mean);
    Tensor *v = tu_tensor(CT_F32, 2, (const int64_t[]){1, 2}, (double[]){1, 3});
    Tensor *w = tu_tensor(CT_F32, 1, (const int64_t[]){1}, (double[]){2});
    ck_assert_int_eq(metric_update(mean, v, w), CT_OK);
    ck_assert_double_eq(value_of(mean), 2.0);
    /* a NaN weight drops its value too (torchmetrics: 3.25) */
    metric_reset(mean);
    Tensor *v3 = tu_tensor(CT_F64, 1, (const int64_t[]){3}, (double[]){1, 2, 4});
    Tensor *w3 = tu_tensor(CT_F64, 1, (const int64_t[]){3}, (double[]){1, NAN, 3});
    ck_assert_int_eq(metric_update(mean, v3, w3), CT_OK);
    ck_assert_double_eq(value_of(mean), 3.25);
    tensor_free(v3);
    tensor_free(w3);
    /* nothing seen */
    metric_reset(mean);
    metric_reset(sum);
    metric_reset(mx);
    Metric *mn = metric_min_create();
    ck_assert(isnan(value_of(mean)));
    ck_assert_double_eq(value_of(sum), 0.0);
    ck_assert(isinf(value_of(mn)) && value_of(mn) > 0);
    ck_assert(isinf(value_of(mx)) && value_of(mx) < 0);
    tensor_free(v);
    tensor_free(w);
    metric_free(mean);
    metric_free(sum);
    metric_free(mn);
    metric_free(mx);
    TU_MEM_END;
}
END_TEST

START_TEST(test_auroc)
{
    TU_MEM_BEGIN;
    Tensor *s = tu_tensor(CT_F64, 1, (const int64_t[]){N}, fx_scores);
    Tensor *l = tu_tensor(CT_F32, 1, (const int64_t[]){N}, fx_blogits);
    Tensor *t = i64_tensor(fx_btarget, N);
    Metric *a = metric_auroc_create(), *b = metric_auroc_create();
    feed(a, s, t);
    feed(b, l, t);
    ck_assert_double_eq_tol(value_of(a), fx_auroc[0], TOL_F32);
    ck_assert_double_eq_tol(value_of(b), fx_auroc[1], TOL_F32);
    ck_assert_int_eq(metric_merge_rule(a), METRIC_MERGE_CONCAT);
    /* one class only: 0, like torchmetrics */
    metric_reset(a);
    ck_assert_double_eq(value_of(a), 0.0);
    Tensor *ones = tensor_ones(1, (const int64_t[]){3}, CT_I64, ct_cpu());
    Tensor *few = tu_tensor(CT_F64, 1, (const int64_t[]){3}, (double[]){0.1, 0.5, 0.9});
    ck_assert_int_eq(metric_update(a, few, ones), CT_OK);
    ck_assert_double_eq(value_of(a), 0.0);
    /* perfect separation with a tie across classes at 0.5: (1 + 0.5) / 2 */
    metric_reset(a);
    Tensor *y = i64_tensor((const int64_t[]){0, 0, 1, 1}, 4);
    Tensor *p =
        tu_tensor(CT_F64, 1, (const int64_t[]){4}, (double[]){0.1, 0.5, 0.5, 0.9});
    ck_assert_int_eq(metric_update(a, p, y), CT_OK);
    ck_assert_double_eq_tol(value_of(a), 0.875, 1e-15);
    tensor_free(ones);
    tensor_free(few);
    tensor_free(y);
    tensor_free(p);
    metric_free(a);
    metric_free(b);
    tensor_free(s);
    tensor_free(l);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

/* Merging a metric's own state doubles every pair: the value stays, and the
 * state read while the pair buffer grows must not be freed under it. */
START_TEST(test_auroc_merge_own_state)
{
    TU_MEM_BEGIN;
    /* 20 pairs fit the first buffer (64 doubles), 40 do not: merging grows it */
    enum { K = 20 };
    Tensor *s = tu_tensor(CT_F64, 1, (const int64_t[]){K}, fx_scores);
    Tensor *t = i64_tensor(fx_btarget, K);
    Metric *a = metric_auroc_create();
    ck_assert_int_eq(metric_update(a, s, t), CT_OK);
    double before = value_of(a);
    int64_t n;
    const double *st = metric_state(a, &n);
    ck_assert_int_eq(n, 1 + 2 * K);
    ck_assert_int_eq(metric_merge(a, st), CT_OK);
    st = metric_state(a, &n);
    ck_assert_int_eq(n, 1 + 4 * K);
    for (int i = 0; i < 2 * K; i++) {
        ck_assert_double_eq(st[1 + 2 * i], fx_scores[i % K]);
        ck_assert_double_eq(st[2 + 2 * i], (double)fx_btarget[i % K]);
    }
    ck_assert_double_eq_tol(value_of(a), before, 1e-15);
    metric_free(a);
    tensor_free(s);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------ binary, F-beta, bool */

/* accuracy, precision, recall, specificity, f1, fbeta 2, fbeta 0.5 (the
 * order of fx_binary and fx_class_ext_*). */
static Metric *make_kind(int kind, const MetricClassArgs *a)
{
    switch (kind) {
    case 0: return metric_accuracy_create(a);
    case 1: return metric_precision_create(a);
    case 2: return metric_recall_create(a);
    case 3: return metric_specificity_create(a);
    case 4: return metric_f1_create(a);
    case 5: return metric_fbeta_create(a, 2.0);
    default: return metric_fbeta_create(a, 0.5);
    }
}

static Metric *make_binary(int kind, double threshold)
{
    return make_kind(
        kind, &(MetricClassArgs){.task = METRIC_TASK_BINARY, .threshold = threshold});
}

/* Scores and logits, f64 and f32: the f32 scores at threshold 0.3 count the
 * f32 0.3 (0.300000012) as not above it, as torch compares in f32. */
START_TEST(test_binary_match_torchmetrics)
{
    TU_MEM_BEGIN;
    Tensor *in[4] = {tu_tensor(CT_F64, 1, (const int64_t[]){N}, fx_scores),
                     tu_tensor(CT_F32, 1, (const int64_t[]){N}, fx_scores),
                     tu_tensor(CT_F64, 1, (const int64_t[]){N}, fx_blogits),
                     tu_tensor(CT_F32, 1, (const int64_t[]){N}, fx_blogits)};
    const double thr[4] = {0 /* 0.5 */, 0.3, 0.5, 0.7};
    Tensor *t = i64_tensor(fx_btarget, N);
    for (int kind = 0; kind < 7; kind++)
        for (int i = 0; i < 4; i++) {
            Metric *m = make_binary(kind, thr[i]);
            ck_assert_msg(m != NULL, "%s", ct_last_error());
            feed(m, in[i], t);
            double want = fx_binary[kind * 4 + i];
            ck_assert_msg(fabs(value_of(m) - want) < TOL_F32, "%s input %d: %.9g vs %.9g",
                          metric_name(m), i, value_of(m), want);
            int64_t n;
            metric_state(m, &n);
            ck_assert_int_eq(n, 4);
            metric_free(m);
        }
    for (int i = 0; i < 4; i++) tensor_free(in[i]);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

/* 0/1 labels (i64 and bool from a comparison), bool and float targets and a
 * (20, 2) layout give the value of the f64 scores (torchmetrics agrees). */
START_TEST(test_binary_labels_bool_and_2d)
{
    TU_MEM_BEGIN;
    CtScope *sc = ct_scope_open();
    Tensor *s = tu_tensor(CT_F64, 1, (const int64_t[]){N}, fx_scores);
    Tensor *t = i64_tensor(fx_btarget, N);
    Tensor *half = tensor_scalar(0.5, CT_F64, ct_cpu());
    Tensor *pb = tensor_gt(s, half); /* bool labels */
    ck_assert_int_eq(tensor_dtype(pb), CT_BOOL);
    Tensor *tb = tensor_gt(t, tensor_scalar(0, CT_I64, ct_cpu()));
    Tensor *pairs[4][2] = {{tensor_cast(pb, CT_I64), t},
                           {pb, tb},
                           {s, tensor_cast(t, CT_F32)},
                           {tensor_reshape(s, 2, (const int64_t[]){20, 2}),
                            tensor_reshape(tb, 2, (const int64_t[]){20, 2})}};
    for (int kind = 0; kind < 7; kind++)
        for (int i = 0; i < 4; i++) {
            Metric *m = make_binary(kind, 0);
            if (i < 3)
                feed(m, pairs[i][0], pairs[i][1]);
            else
                ck_assert_int_eq(metric_update(m, pairs[i][0], pairs[i][1]), CT_OK);
            ck_assert_msg(fabs(value_of(m) - fx_binary[kind * 4]) < TOL_F32,
                          "%s pair %d: %.9g vs %.9g", metric_name(m), i, value_of(m),
                          fx_binary[kind * 4]);
            metric_free(m);
        }
    ct_scope_close(sc);
    tensor_free(s); /* tu_tensor's are persistent */
    TU_MEM_END;
}
END_TEST

/* The sigmoid runs in the logits' dtype: in f32 sigmoid(1e-8) is 0.5, not
 * above 0.5; a NaN score is never positive (torchmetrics 1.2.1: accuracy
 * 0.4 for f32 logits, 0.8 for f64). */
START_TEST(test_binary_sigmoid_in_dtype)
{
    TU_MEM_BEGIN;
    const double v[5] = {1e-8, -1e-8, NAN, 2.0, 3e-8};
    Tensor *t = i64_tensor((const int64_t[]){1, 0, 1, 1, 1}, 5);
    const CtDType dt[2] = {CT_F32, CT_F64};
    const double want[2] = {0.4, 0.8};
    for (int i = 0; i < 2; i++) {
        Tensor *p = tu_tensor(dt[i], 1, (const int64_t[]){5}, v);
        Metric *m =
            metric_accuracy_create(&(MetricClassArgs){.task = METRIC_TASK_BINARY});
        ck_assert_int_eq(metric_update(m, p, t), CT_OK);
        ck_assert_double_eq_tol(value_of(m), want[i], 1e-15);
        metric_free(m);
        tensor_free(p);
    }
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

START_TEST(test_class_specificity_fbeta_match_torchmetrics)
{
    TU_MEM_BEGIN;
    Tensor *x = logits_tensor(), *t = i64_tensor(fx_target, N),
           *p = i64_tensor(fx_pred_idx, N);
    for (int e = 0; e < 3; e++) {
        for (int avg = 0; avg < 3; avg++) {
            for (int k = 1; k <= 2; k++) {
                Metric *m = make_kind(
                    3 + 2 * (e > 0) + (e == 2),
                    &(MetricClassArgs){.num_classes = C, .top_k = k, .average = avg});
                feed(m, x, t);
                double want = fx_class_ext_scalar[e * 6 + avg * 2 + (k - 1)];
                ck_assert_msg(fabs(value_of(m) - want) < TOL_F32,
                              "%s avg %d top_k %d: %.9g vs %.9g", metric_name(m), avg, k,
                              value_of(m), want);
                metric_free(m);
            }
            Metric *m5 = make_kind(3 + 2 * (e > 0) + (e == 2),
                                   &(MetricClassArgs){.num_classes = 5, .average = avg});
            feed(m5, p, t);
            ck_assert_double_eq_tol(value_of(m5), fx_class5_ext[e * 3 + avg], TOL_F32);
            metric_free(m5);
        }
        Metric *m =
            make_kind(3 + 2 * (e > 0) + (e == 2),
                      &(MetricClassArgs){.num_classes = C, .average = METRIC_AVG_NONE});
        feed(m, x, t);
        Tensor *r = metric_compute_tensor(m);
        tu_assert_values(r, fx_class_ext_none + 4 * e, C, TOL_F32, 0);
        tensor_free(r);
        metric_free(m);
    }
    tensor_free(x);
    tensor_free(t);
    tensor_free(p);
    TU_MEM_END;
}
END_TEST

/* F1 is F-beta with beta 1: the same state and, bit for bit, the same value. */
START_TEST(test_f1_is_fbeta_1)
{
    TU_MEM_BEGIN;
    Tensor *x = logits_tensor(), *t = i64_tensor(fx_target, N);
    for (int avg = 0; avg < 3; avg++) {
        MetricClassArgs a = {.num_classes = C, .average = avg};
        Metric *f1 = metric_f1_create(&a), *fb = metric_fbeta_create(&a, 1.0);
        feed(f1, x, t);
        feed(fb, x, t);
        ck_assert_str_eq(metric_name(fb), "fbeta");
        ck_assert_double_eq(value_of(f1), value_of(fb));
        ck_assert_double_eq_tol(value_of(fb), fx_class_scalar[3 * 6 + avg * 2], TOL_F32);
        metric_free(f1);
        metric_free(fb);
    }
    tensor_free(x);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

/* Bool class indices and bool targets (what comparisons give), two classes;
 * the confusion matrix and AUROC take bool targets too. */
START_TEST(test_bool_class_inputs)
{
    TU_MEM_BEGIN;
    CtScope *sc = ct_scope_open();
    Tensor *s = tu_tensor(CT_F64, 1, (const int64_t[]){N}, fx_scores);
    Tensor *t = i64_tensor(fx_btarget, N);
    Tensor *pb = tensor_gt(s, tensor_scalar(0.5, CT_F64, ct_cpu()));
    Tensor *tb = tensor_gt(t, tensor_scalar(0, CT_I64, ct_cpu()));
    for (int kind = 0; kind < 5; kind++) {
        Metric *m = make_kind(
            kind, &(MetricClassArgs){.num_classes = 2, .average = METRIC_AVG_MACRO});
        feed(m, pb, tb);
        ck_assert_double_eq_tol(value_of(m), fx_bool_class[kind], TOL_F32);
        metric_free(m);
    }
    Metric *cm = metric_confusion_matrix_create(2),
           *ci = metric_confusion_matrix_create(2);
    feed(cm, pb, tb);
    feed(ci, tensor_cast(pb, CT_I64), t);
    const int64_t *a = tensor_data(metric_compute_tensor(cm)),
                  *b = tensor_data(metric_compute_tensor(ci));
    for (int i = 0; i < 4; i++) ck_assert_int_eq(a[i], b[i]);
    Metric *au = metric_auroc_create();
    feed(au, s, tb);
    ck_assert_double_eq_tol(value_of(au), fx_auroc[0], TOL_F32);
    metric_free(au);
    metric_free(cm);
    metric_free(ci);
    ct_scope_close(sc);
    tensor_free(s);
    TU_MEM_END;
}
END_TEST

/* Normalized by rows, columns, total; class 2 is never a target (row of 0 /
 * 0) and class 3 never predicted (column of 0 / 0): 0s, as torchmetrics. */
START_TEST(test_confusion_matrix_normalized)
{
    TU_MEM_BEGIN;
    Tensor *x = logits_tensor(), *t = i64_tensor(fx_target, N);
    for (int k = 0; k < 3; k++) {
        Metric *m =
            metric_confusion_matrix_normalized_create(C, METRIC_NORMALIZE_TRUE + k);
        ck_assert_ptr_nonnull(m);
        feed(m, x, t);
        Tensor *r = metric_compute_tensor(m);
        tu_assert_shape(r, 2, C, C);
        ck_assert_int_eq(tensor_dtype(r), CT_F64);
        tu_assert_values(r, fx_confmat_norm + 16 * k, C * C, TOL_F32, 0);
        tensor_free(r);
        /* the state is the counts, whatever the normalization */
        const double *st = metric_state(m, NULL);
        for (int i = 0; i < C * C; i++) ck_assert_double_eq(st[i], (double)fx_confmat[i]);
        metric_free(m);
    }
    /* nothing seen: all 0 */
    Metric *m = metric_confusion_matrix_normalized_create(C, METRIC_NORMALIZE_ALL);
    Tensor *r = metric_compute_tensor(m);
    tu_assert_values(r, (const double[16]){0}, C * C, 0, 0);
    tensor_free(r);
    metric_free(m);
    tensor_free(x);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------- ignore_index */

static MetricClassArgs ignoring(int64_t c, MetricAverage avg, int top_k, int64_t ign)
{
    return (MetricClassArgs){.num_classes = c,
                             .average = avg,
                             .top_k = top_k,
                             .ignore_index = ign,
                             .use_ignore_index = true};
}

/* ignore_index -1 (outside [0, C)) and 0 (a class): the samples are dropped
 * before counting, tn included. */
START_TEST(test_ignore_index_class)
{
    TU_MEM_BEGIN;
    Tensor *x = logits_tensor();
    Tensor *targets[2] = {i64_tensor(fx_target_ign, N), i64_tensor(fx_target, N)};
    const int64_t ign[2] = {-1, 0};
    const double *want = fx_ignore_class;
    for (int v = 0; v < 2; v++)
        for (int kind = 0; kind < 7; kind++) {
            for (int avg = 0; avg < 3; avg++)
                for (int k = 1; k <= 2; k++) {
                    MetricClassArgs a = ignoring(C, (MetricAverage)avg, k, ign[v]);
                    Metric *m = make_kind(kind, &a);
                    feed(m, x, targets[v]);
                    double got = value_of(m), w = *want++;
                    ck_assert_msg(fabs(got - w) < TOL_F32,
                                  "ignore %lld kind %d avg %d top_k %d: %.9g vs %.9g",
                                  (long long)ign[v], kind, avg, k, got, w);
                    metric_free(m);
                }
            MetricClassArgs a = ignoring(C, METRIC_AVG_NONE, 1, ign[v]);
            Metric *m = make_kind(kind, &a);
            feed(m, x, targets[v]);
            Tensor *r = metric_compute_tensor(m);
            tu_assert_values(r, want, C, TOL_F32, 0);
            want += C;
            tensor_free(r);
            metric_free(m);
        }
    ck_assert_ptr_eq(want, fx_ignore_class + 140);
    /* without use_ignore_index, -1 is an error and 0 a class (today's values) */
    Metric *m = metric_accuracy_create(&(MetricClassArgs){.num_classes = C});
    Tensor *t = tensor_slice(targets[0], 0, 0, 15, 1), *p = tensor_slice(x, 0, 0, 15, 1);
    ck_assert_int_eq(metric_update(m, p, t), CT_ERR_INVALID);
    ck_assert_str_eq(ct_last_error(),
                     "accuracy: target value -1 at position 0 is outside [0, 4)");
    ct_clear_error();
    metric_free(m);
    m = metric_accuracy_create(&(MetricClassArgs){.num_classes = C, .ignore_index = 0});
    feed(m, x, targets[1]);
    ck_assert_double_eq_tol(value_of(m), fx_class_scalar[0], TOL_F32);
    metric_free(m);
    /* index preds of ignored samples are not checked (torchmetrics drops them) */
    m = metric_recall_create(&(MetricClassArgs){
        .num_classes = 2, .ignore_index = 255, .use_ignore_index = true});
    Tensor *pi = i64_tensor((const int64_t[]){1, 7, 0}, 3);
    Tensor *ti = i64_tensor((const int64_t[]){1, 255, 1}, 3);
    ck_assert_int_eq(metric_update(m, pi, ti), CT_OK);
    ck_assert_double_eq(value_of(m), 0.5);
    metric_free(m);
    tensor_free(pi);
    tensor_free(ti);
    tensor_free(t);
    tensor_free(p);
    tensor_free(targets[0]);
    tensor_free(targets[1]);
    tensor_free(x);
    TU_MEM_END;
}
END_TEST

START_TEST(test_ignore_index_confusion_matrix)
{
    TU_MEM_BEGIN;
    Tensor *x = logits_tensor();
    Tensor *targets[2] = {i64_tensor(fx_target_ign, N), i64_tensor(fx_target, N)};
    const int64_t ign[2] = {-1, 0};
    for (int v = 0; v < 2; v++) {
        MetricClassArgs a = ignoring(C, METRIC_AVG_MICRO, 0, ign[v]);
        Metric *m = metric_confusion_matrix_create_args(&a, METRIC_NORMALIZE_NONE);
        Metric *n = metric_confusion_matrix_create_args(&a, METRIC_NORMALIZE_TRUE);
        feed(m, x, targets[v]);
        feed(n, x, targets[v]);
        Tensor *rm = metric_compute_tensor(m), *rn = metric_compute_tensor(n);
        ck_assert_int_eq(tensor_dtype(rm), CT_I64);
        tu_assert_values(rm, fx_ignore_confmat + 32 * v, C * C, 0, 0);
        tu_assert_values(rn, fx_ignore_confmat + 32 * v + 16, C * C, TOL_F32, 0);
        tensor_free(rm);
        tensor_free(rn);
        metric_free(m);
        metric_free(n);
    }
    /* arguments the confusion matrix does not take */
    MetricClassArgs bad = ignoring(C, METRIC_AVG_MACRO, 0, -1);
    ck_assert_ptr_null(metric_confusion_matrix_create_args(&bad, METRIC_NORMALIZE_NONE));
    ck_assert_ptr_nonnull(strstr(ct_last_error(), "takes no average"));
    ct_clear_error();
    bad = (MetricClassArgs){.num_classes = C, .task = METRIC_TASK_BINARY};
    ck_assert_ptr_null(metric_confusion_matrix_create_args(&bad, METRIC_NORMALIZE_NONE));
    ct_clear_error();
    ck_assert_ptr_null(metric_confusion_matrix_create_args(NULL, METRIC_NORMALIZE_NONE));
    ct_clear_error();
    tensor_free(targets[0]);
    tensor_free(targets[1]);
    tensor_free(x);
    TU_MEM_END;
}
END_TEST

/* Binary: an ignored element is dropped, but its logit 5.0 still sends the
 * batch through the sigmoid, as torchmetrics formats before dropping. */
START_TEST(test_ignore_index_binary)
{
    TU_MEM_BEGIN;
    double sig[N];
    for (int i = 0; i < N; i++) sig[i] = i % 4 == 0 ? 5.0 : fx_scores[i];
    Tensor *s = tu_tensor(CT_F64, 1, (const int64_t[]){N}, fx_scores);
    Tensor *l = tu_tensor(CT_F64, 1, (const int64_t[]){N}, sig);
    Tensor *tign = i64_tensor(fx_btarget_ign, N), *t = i64_tensor(fx_btarget, N);
    Tensor *ft = tensor_cast(tign, CT_F32);
    for (int kind = 0; kind < 7; kind++) {
        Tensor *preds[3] = {s, l, s}, *tg[3] = {tign, tign, t};
        const int64_t ign[3] = {-1, -1, 0};
        for (int v = 0; v < 3; v++) {
            Metric *m = make_kind(kind, &(MetricClassArgs){.task = METRIC_TASK_BINARY,
                                                           .ignore_index = ign[v],
                                                           .use_ignore_index = true});
            feed(m, preds[v], tg[v]);
            double got = value_of(m), w = fx_ignore_binary[kind * 3 + v];
            ck_assert_msg(fabs(got - w) < TOL_F32, "kind %d case %d: %.9g vs %.9g", kind,
                          v, got, w);
            /* float targets holding -1 work the same */
            if (v == 0) {
                metric_reset(m);
                feed(m, preds[v], ft);
                ck_assert_double_eq_tol(value_of(m), w, TOL_F32);
            }
            metric_free(m);
        }
    }
    /* label preds must still be 0/1 at ignored elements, as in torchmetrics */
    Metric *m = metric_accuracy_create(&(MetricClassArgs){
        .task = METRIC_TASK_BINARY, .ignore_index = -1, .use_ignore_index = true});
    Tensor *pl = i64_tensor((const int64_t[]){1, 2}, 2);
    Tensor *tl = i64_tensor((const int64_t[]){1, -1}, 2);
    ck_assert_int_eq(metric_update(m, pl, tl), CT_ERR_INVALID);
    ct_clear_error();
    ck_assert_int_eq(metric_state(m, NULL)[3], 0);
    metric_free(m);
    tensor_free(pl);
    tensor_free(tl);
    tensor_free(ft);
    tensor_free(s);
    tensor_free(l);
    tensor_free(tign);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

/* ----------------------------------------------------------- multilabel */

#define L 3

static MetricClassArgs ml_args(MetricAverage avg, double threshold, int64_t ign,
                               bool use_ign)
{
    return (MetricClassArgs){.num_classes = L,
                             .average = avg,
                             .task = METRIC_TASK_MULTILABEL,
                             .threshold = threshold,
                             .ignore_index = ign,
                             .use_ignore_index = use_ign};
}

static Tensor *ml_tensor(CtDType dt, const double *v)
{
    return tu_tensor(dt, 2, (const int64_t[]){N, L}, v);
}

static Tensor *ml_i64(const int64_t *v)
{
    return tensor_from_data(v, 2, (const int64_t[]){N, L}, CT_I64, ct_cpu());
}

/* Asserts m's value under average avg: a scalar, or (L) per label for NONE. */
static void assert_ml_value(Metric *m, MetricAverage avg, const double *want,
                            const char *what)
{
    if (avg != METRIC_AVG_NONE) {
        double got = value_of(m);
        ck_assert_msg(fabs(got - want[0]) < TOL_F32, "%s %s avg %d: %.9g vs %.9g",
                      metric_name(m), what, avg, got, want[0]);
        return;
    }
    Tensor *r = metric_compute_tensor(m);
    tu_assert_shape(r, 1, L);
    tu_assert_values(r, want, L, TOL_F32, 0);
    tensor_free(r);
}

/* Every metric and average on probabilities (f64 at 0.5, f32 at 0.3: torch
 * compares in f32), logits (sigmoid; f64 at 0.5, f32 at 0.7) and
 * ignore_index -1 (with and without a logit at the ignored elements) and 0.
 * Label 2 is never a target nor predicted: its 0 / 0 scores are 0 and, unlike
 * multiclass, still count in the macro mean. */
START_TEST(test_multilabel_match_torchmetrics)
{
    TU_MEM_BEGIN;
    double sig[N * L];
    for (int i = 0; i < N * L; i++)
        sig[i] = fx_ml_target_ign[i] == -1 ? 5.0 : fx_ml_probs[i];
    Tensor *t = ml_i64(fx_ml_target), *tign = ml_i64(fx_ml_target_ign);
    Tensor *pr = ml_tensor(CT_F64, fx_ml_probs), *pr32 = ml_tensor(CT_F32, fx_ml_probs),
           *lg = ml_tensor(CT_F64, fx_ml_logits), *lg32 = ml_tensor(CT_F32, fx_ml_logits),
           *sg = ml_tensor(CT_F64, sig);
    const struct {
        Tensor *p, *t;
        double thr;
        int64_t ign;
        bool use_ign;
    } v[7] = {{pr, t, 0, 0, false},     {pr32, t, 0.3, 0, false}, {lg, t, 0.5, 0, false},
              {lg32, t, 0.7, 0, false}, {pr, tign, 0, -1, true},  {sg, tign, 0, -1, true},
              {pr, t, 0, 0, true}};
    const double *want = fx_multilabel;
    for (int kind = 0; kind < 7; kind++)
        for (int i = 0; i < 7; i++)
            for (int avg = 0; avg < 4; avg++) {
                MetricClassArgs a = ml_args(avg, v[i].thr, v[i].ign, v[i].use_ign);
                Metric *m = make_kind(kind, &a);
                ck_assert_msg(m != NULL, "%s", ct_last_error());
                feed(m, v[i].p, v[i].t);
                char what[32];
                snprintf(what, sizeof what, "variant %d", i);
                assert_ml_value(m, avg, want, what);
                want += avg == METRIC_AVG_NONE ? L : 1;
                int64_t n;
                metric_state(m, &n);
                ck_assert_int_eq(n, 4 * L);
                metric_free(m);
            }
    ck_assert_ptr_eq(want, fx_multilabel + sizeof fx_multilabel / sizeof *want);
    Tensor *all[7] = {t, tign, pr, pr32, lg, lg32, sg};
    for (int i = 0; i < 7; i++) tensor_free(all[i]);
    TU_MEM_END;
}
END_TEST

/* 0/1 label preds (i64, bool), bool and float targets and a (20, L, 2)
 * layout (extra dimensions are more samples) give the values of the f64
 * probabilities (torchmetrics agrees). */
START_TEST(test_multilabel_labels_bool_and_3d)
{
    TU_MEM_BEGIN;
    CtScope *sc = ct_scope_open();
    Tensor *pr = ml_tensor(CT_F64, fx_ml_probs), *t = ml_i64(fx_ml_target);
    Tensor *pb = tensor_gt(pr, tensor_scalar(0.5, CT_F64, ct_cpu()));
    Tensor *tb = tensor_gt(t, tensor_scalar(0, CT_I64, ct_cpu()));
    double p3[N * L], t3[N * L];
    for (int i = 0; i < N / 2; i++)
        for (int j = 0; j < L; j++)
            for (int k = 0; k < 2; k++) {
                p3[(i * L + j) * 2 + k] = fx_ml_probs[(k * N / 2 + i) * L + j];
                t3[(i * L + j) * 2 + k] = (double)fx_ml_target[(k * N / 2 + i) * L + j];
            }
    const int64_t shape3[3] = {N / 2, L, 2};
    Tensor *pairs[4][2] = {
        {tensor_cast(pb, CT_I64), t},
        {pb, tb},
        {pr, tensor_cast(t, CT_F32)},
        {tensor_from_data(p3, 3, shape3, CT_F64, ct_cpu()),
         tensor_cast(tensor_from_data(t3, 3, shape3, CT_F64, ct_cpu()), CT_U8)}};
    for (int kind = 0; kind < 7; kind++)
        for (int avg = 0; avg < 3; avg++)
            for (int i = 0; i < 4; i++) {
                MetricClassArgs a = ml_args(avg, 0, 0, false);
                Metric *m = make_kind(kind, &a);
                if (i < 3)
                    feed(m, pairs[i][0], pairs[i][1]);
                else
                    ck_assert_int_eq(metric_update(m, pairs[i][0], pairs[i][1]), CT_OK);
                char what[32];
                snprintf(what, sizeof what, "pair %d", i);
                assert_ml_value(m, avg, fx_multilabel + kind * 7 * 6 + avg, what);
                metric_free(m);
            }
    ct_scope_close(sc);
    tensor_free(pr); /* tu_tensor's are persistent */
    TU_MEM_END;
}
END_TEST

START_TEST(test_multilabel_errors)
{
    TU_MEM_BEGIN;
    /* creation */
    MetricClassArgs bad[5] = {
        ml_args(METRIC_AVG_MICRO, 0, 0, false), ml_args(METRIC_AVG_MICRO, 0, 0, false),
        ml_args(METRIC_AVG_MICRO, 0, 0, false), ml_args((MetricAverage)7, 0, 0, false),
        ml_args(METRIC_AVG_MICRO, 1.5, 0, false)};
    bad[0].num_classes = 0;
    bad[1].num_classes = 1;
    bad[2].top_k = 2;
    const char *msg[5] = {"in [2, 16777216], got 0", "in [2, 16777216], got 1",
                          "takes no top_k, got 2", "unknown average 7",
                          "threshold = 1.5 must be in [0, 1]"};
    for (int i = 0; i < 5; i++) {
        ck_assert_ptr_null(metric_f1_create(&bad[i]));
        tu_assert_error(CT_ERR_INVALID, msg[i]);
    }
    /* the confusion matrix and the AUROC have no multilabel task */
    MetricClassArgs mla = ml_args(METRIC_AVG_MACRO, 0, 0, false);
    ck_assert_ptr_null(metric_multiclass_auroc_create(&mla));
    tu_assert_error(CT_ERR_INVALID, "takes no task");
    mla.average = METRIC_AVG_MICRO;
    ck_assert_ptr_null(metric_confusion_matrix_create_args(&mla, METRIC_NORMALIZE_NONE));
    tu_assert_error(CT_ERR_INVALID, "only task multiclass is implemented");
    /* top_k 1 is accepted (it is the default) */
    MetricClassArgs ok = ml_args(METRIC_AVG_MACRO, 0, -1, true);
    ok.top_k = 1;
    Metric *m = metric_recall_create(&ok);
    ck_assert_ptr_nonnull(m);
    /* updates: a bad batch leaves the state unchanged */
    const int64_t s1[1] = {6}, s2[2] = {2, L}, s4[2] = {2, 4}, s3[3] = {1, L, 2};
    double pv[8] = {0.1, 0.9, 0.4, 1, 0, 1, 0.5, 0.5};
    double tv[8] = {0, 1, -1, 1, 0, 1, 0, 0};
    Tensor *p1 = tu_tensor(CT_F64, 1, s1, pv), *t1 = tu_tensor(CT_I64, 1, s1, tv);
    Tensor *p4 = tu_tensor(CT_F64, 2, s4, pv), *t4 = tu_tensor(CT_I64, 2, s4, tv);
    Tensor *p2 = tu_tensor(CT_F64, 2, s2, pv), *t3 = tu_tensor(CT_I64, 3, s3, tv);
    ck_assert_int_eq(metric_update(m, p1, t1), CT_ERR_SHAPE);
    tu_assert_error(CT_ERR_SHAPE,
                    "preds [6] and target [6] do not fit: task multilabel "
                    "expects preds and target of one shape (N, L = 3, ...)");
    ck_assert_int_eq(metric_update(m, p4, t4), CT_ERR_SHAPE);
    ct_clear_error();
    ck_assert_int_eq(metric_update(m, p2, t3), CT_ERR_SHAPE);
    ct_clear_error();
    double tbad[6] = {0, 1, -1, 1, 2, 1};
    Tensor *t2 = tu_tensor(CT_I64, 2, s2, tbad);
    ck_assert_int_eq(metric_update(m, p2, t2), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "target value 2 at position 4 is not 0 or 1");
    /* label preds must be 0/1, also where the target is ignored */
    double lv[6] = {2, 1, 0, 1, 0, 1};
    Tensor *l2 = tu_tensor(CT_I64, 2, s2, lv), *tg = tu_tensor(CT_I64, 2, s2, tv);
    ck_assert_int_eq(metric_update(m, l2, tg), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "pred value 2 at position 0 is not 0 or 1");
    int64_t n;
    const double *st = metric_state(m, &n);
    ck_assert_int_eq(n, 4 * L);
    for (int64_t i = 0; i < n; i++) ck_assert_double_eq(st[i], 0);
    /* the ignored element (label 2 of sample 0) counts for no label */
    ck_assert_int_eq(metric_update(m, p2, tg), CT_OK);
    st = metric_state(m, NULL);
    const double want[4 * L] = {1, 1, 1, 0, 0, 0, 0, 0, 0, 2, 2, 1};
    for (int i = 0; i < 4 * L; i++) ck_assert_double_eq(st[i], want[i]);
    metric_free(m);
    Tensor *all[9] = {p1, t1, p4, t4, p2, t3, t2, l2, tg};
    for (int i = 0; i < 9; i++) tensor_free(all[i]);
    TU_MEM_END;
}
END_TEST

/* ---------------------------------------------------- multiclass AUROC */

static Metric *mc_auroc(MetricAverage avg)
{
    return metric_multiclass_auroc_create(
        &(MetricClassArgs){.num_classes = C, .average = avg});
}

/* f64 and f32 logits (softmax), probabilities with ties (no softmax); class
 * 2 has no positives: 0, and still in the macro mean. */
START_TEST(test_auroc_multiclass)
{
    TU_MEM_BEGIN;
    Tensor *in[3] = {logits_tensor(),
                     tu_tensor(CT_F32, 2, (const int64_t[]){N, C}, fx_logits),
                     tu_tensor(CT_F64, 2, (const int64_t[]){N, C}, fx_probs)};
    Tensor *t = i64_tensor(fx_target, N);
    const double *want = fx_auroc_mc;
    for (int v = 0; v < 3; v++) {
        Metric *ma = mc_auroc(METRIC_AVG_MACRO), *mw = mc_auroc(METRIC_AVG_WEIGHTED),
               *mn = mc_auroc(METRIC_AVG_NONE);
        feed(ma, in[v], t);
        feed(mw, in[v], t);
        feed(mn, in[v], t);
        ck_assert_msg(fabs(value_of(ma) - want[0]) < TOL_F32,
                      "input %d macro: %.9g vs %.9g", v, value_of(ma), want[0]);
        ck_assert_msg(fabs(value_of(mw) - want[1]) < TOL_F32,
                      "input %d weighted: %.9g vs %.9g", v, value_of(mw), want[1]);
        ck_assert(!metric_is_scalar(mn));
        Tensor *r = metric_compute_tensor(mn);
        tu_assert_values(r, want + 2, C, TOL_F32, 0);
        ck_assert_double_eq(want[2 + 2], 0.0); /* class 2: no positives */
        want += 2 + C;
        ck_assert_int_eq(metric_merge_rule(ma), METRIC_MERGE_CONCAT);
        tensor_free(r);
        metric_free(ma);
        metric_free(mw);
        metric_free(mn);
    }
    /* ignore_index -1 and 0 */
    Tensor *targets[2] = {i64_tensor(fx_target_ign, N), t};
    for (int v = 0; v < 2; v++)
        for (int avg = 0; avg < 2; avg++) {
            MetricClassArgs a =
                ignoring(C, avg ? METRIC_AVG_WEIGHTED : METRIC_AVG_MACRO, 0, v ? 0 : -1);
            Metric *m = metric_multiclass_auroc_create(&a);
            feed(m, in[0], targets[v]);
            ck_assert_double_eq_tol(value_of(m), *want++, TOL_F32);
            metric_free(m);
        }
    /* bool targets (classes 0 and 1) */
    int64_t b01[N];
    for (int i = 0; i < N; i++) b01[i] = fx_target[i] > 0;
    Tensor *bi = i64_tensor(b01, N), *bb = tensor_cast(bi, CT_BOOL);
    Metric *m = mc_auroc(METRIC_AVG_MACRO);
    feed(m, in[0], bb);
    ck_assert_double_eq_tol(value_of(m), *want++, TOL_F32);
    ck_assert_ptr_eq(want, fx_auroc_mc + 23);
    /* nothing seen: 0 (torchmetrics raises) */
    metric_reset(m);
    ck_assert_double_eq(value_of(m), 0.0);
    metric_free(m);
    tensor_free(bi);
    tensor_free(bb);
    tensor_free(targets[0]);
    for (int v = 0; v < 3; v++) tensor_free(in[v]);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

/* 30000 samples, scores with 1000 distinct values: the per-class sort is
 * O(n log n) (a quadratic walk would take seconds) and ties form one point. */
START_TEST(test_auroc_multiclass_many_samples)
{
    TU_MEM_BEGIN;
    enum { BIG = 30000, BC = 3 };
    double *p = malloc(BIG * BC * sizeof *p);
    int64_t *y = malloc(BIG * sizeof *y);
    for (int64_t i = 0; i < BIG; i++) {
        for (int64_t j = 0; j < BC; j++)
            p[i * BC + j] = (double)((i * 7919 + j * 104729) % 1000) / 1000;
        y[i] = (i * 31 + i / 7) % BC;
    }
    Tensor *tp = tensor_from_data(p, 2, (const int64_t[]){BIG, BC}, CT_F64, ct_cpu());
    Tensor *ty = i64_tensor(y, BIG);
    for (int avg = 0; avg < 2; avg++) {
        Metric *m = metric_multiclass_auroc_create(&(MetricClassArgs){
            .num_classes = BC, .average = avg ? METRIC_AVG_WEIGHTED : METRIC_AVG_MACRO});
        ck_assert_int_eq(metric_update(m, tp, ty), CT_OK);
        ck_assert_double_eq_tol(value_of(m), fx_auroc_mc[23 + avg], TOL_F32);
        metric_free(m);
    }
    tensor_free(tp);
    tensor_free(ty);
    free(p);
    free(y);
    TU_MEM_END;
}
END_TEST

START_TEST(test_auroc_multiclass_errors)
{
    TU_MEM_BEGIN;
    ck_assert_ptr_null(
        metric_multiclass_auroc_create(&(MetricClassArgs){.num_classes = C}));
    ck_assert_ptr_nonnull(strstr(ct_last_error(), "no micro average"));
    ct_clear_error();
    ck_assert_ptr_null(mc_auroc((MetricAverage)9));
    ct_clear_error();
    ck_assert_ptr_null(metric_multiclass_auroc_create(
        &(MetricClassArgs){.num_classes = 1, .average = METRIC_AVG_MACRO}));
    ct_clear_error();
    ck_assert_ptr_null(metric_multiclass_auroc_create(
        &(MetricClassArgs){.num_classes = C, .average = METRIC_AVG_MACRO, .top_k = 2}));
    ct_clear_error();
    ck_assert_ptr_null(metric_multiclass_auroc_create(NULL));
    ct_clear_error();

    Metric *m = mc_auroc(METRIC_AVG_MACRO);
    Tensor *x = logits_tensor(), *t = i64_tensor(fx_target, N);
    Tensor *x3 = tensor_slice(x, 1, 0, 3, 1), *t39 = tensor_slice(t, 0, 0, 39, 1);
    ck_assert_int_eq(metric_update(m, x3, t), CT_ERR_SHAPE);
    ck_assert_str_eq(ct_last_error(), "auroc: preds [40, 3] and target [40] do not fit: "
                                      "expected (N, 4) scores and (N) class indices");
    ct_clear_error();
    ck_assert_int_eq(metric_update(m, x, t39), CT_ERR_SHAPE);
    ct_clear_error();
    Tensor *tf = tensor_cast(t, CT_F32), *xi = tensor_cast(x, CT_I64);
    ck_assert_int_eq(metric_update(m, x, tf), CT_ERR_DTYPE);
    ct_clear_error();
    ck_assert_int_eq(metric_update(m, xi, t), CT_ERR_DTYPE);
    ct_clear_error();
    int64_t bad[N];
    double nanx[N * C];
    for (int i = 0; i < N; i++) bad[i] = i == 5 ? 4 : fx_target[i];
    for (int i = 0; i < N * C; i++) nanx[i] = i == 9 ? NAN : fx_logits[i];
    Tensor *tb = i64_tensor(bad, N),
           *xn = tu_tensor(CT_F64, 2, (const int64_t[]){N, C}, nanx);
    ck_assert_int_eq(metric_update(m, x, tb), CT_ERR_INVALID);
    ck_assert_str_eq(ct_last_error(),
                     "auroc: target value 4 at position 5 is outside [0, 4)");
    ct_clear_error();
    ck_assert_int_eq(metric_update(m, xn, t), CT_ERR_INVALID);
    ck_assert_str_eq(ct_last_error(), "auroc: preds value nan at position (2, 1)");
    ct_clear_error();
    /* nothing was kept; a state of the wrong row length is refused */
    int64_t n;
    metric_state(m, &n);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(metric_merge(m, (const double[]){3, 0.5, 0.5, 1}), CT_ERR_INVALID);
    ct_clear_error();
    metric_free(m);
    /* ... unless the sample is ignored */
    MetricClassArgs a = ignoring(C, METRIC_AVG_MACRO, 0, 4);
    m = metric_multiclass_auroc_create(&a);
    ck_assert_int_eq(metric_update(m, x, tb), CT_OK);
    metric_state(m, &n);
    ck_assert_int_eq(n, 1 + (N - 1) * (C + 1));
    metric_free(m);
    Tensor *all[] = {x, t, x3, t39, tf, xi, tb, xn};
    for (int i = 0; i < 8; i++) tensor_free(all[i]);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------- accumulation, reset, merge */

static Metric *mk_acc_top2(void)
{
    return metric_accuracy_create(&(MetricClassArgs){.num_classes = C, .top_k = 2});
}
static Metric *mk_prec_macro(void)
{
    return metric_precision_create(
        &(MetricClassArgs){.num_classes = C, .average = METRIC_AVG_MACRO});
}
static Metric *mk_f1_weighted(void)
{
    return metric_f1_create(
        &(MetricClassArgs){.num_classes = C, .average = METRIC_AVG_WEIGHTED});
}
static Metric *mk_recall_none(void)
{
    return metric_recall_create(
        &(MetricClassArgs){.num_classes = C, .average = METRIC_AVG_NONE});
}
static Metric *mk_confmat(void)
{
    return metric_confusion_matrix_create(C);
}
static Metric *mk_confmat_true(void)
{
    return metric_confusion_matrix_normalized_create(C, METRIC_NORMALIZE_TRUE);
}
static Metric *mk_spec_macro_top2(void)
{
    return metric_specificity_create(
        &(MetricClassArgs){.num_classes = C, .top_k = 2, .average = METRIC_AVG_MACRO});
}
static Metric *mk_fbeta_none(void)
{
    return metric_fbeta_create(
        &(MetricClassArgs){.num_classes = C, .average = METRIC_AVG_NONE}, 2.0);
}
static Metric *mk_binary_acc(void)
{
    return metric_accuracy_create(&(MetricClassArgs){.task = METRIC_TASK_BINARY});
}
static Metric *mk_auroc_mc_macro(void)
{
    return mc_auroc(METRIC_AVG_MACRO);
}
static Metric *mk_auroc_mc_none_ign0(void)
{
    MetricClassArgs a = ignoring(C, METRIC_AVG_NONE, 0, 0);
    return metric_multiclass_auroc_create(&a);
}
static Metric *mk_f1_macro_top2_ign0(void)
{
    MetricClassArgs a = ignoring(C, METRIC_AVG_MACRO, 2, 0);
    return metric_f1_create(&a);
}
static Metric *mk_confmat_ign0(void)
{
    MetricClassArgs a = ignoring(C, METRIC_AVG_MICRO, 0, 0);
    return metric_confusion_matrix_create_args(&a, METRIC_NORMALIZE_NONE);
}
static Metric *mk_binary_acc_ign0(void)
{
    return metric_accuracy_create(&(MetricClassArgs){
        .task = METRIC_TASK_BINARY, .ignore_index = 0, .use_ignore_index = true});
}
static Metric *mk_binary_fbeta(void)
{
    return metric_fbeta_create(
        &(MetricClassArgs){.task = METRIC_TASK_BINARY, .threshold = 0.3}, 0.5);
}

static Metric *mk_ml_f1_macro_ign(void)
{
    MetricClassArgs a = ml_args(METRIC_AVG_MACRO, 0, -1, true);
    return metric_f1_create(&a);
}
static Metric *mk_ml_acc_none(void)
{
    MetricClassArgs a = ml_args(METRIC_AVG_NONE, 0.7, -1, true);
    return metric_accuracy_create(&a);
}
static Metric *mk_ml_spec_weighted(void)
{
    MetricClassArgs a = ml_args(METRIC_AVG_WEIGHTED, 0, -1, true);
    return metric_specificity_create(&a);
}

enum { IN_CLASS, IN_WEIGHTED, IN_VALUES, IN_BINARY, IN_LOGITS01, IN_MULTILABEL };
static const struct {
    Metric *(*make)(void);
    int input;
} cases[] = {
    {mk_acc_top2, IN_CLASS},
    {mk_prec_macro, IN_CLASS},
    {mk_f1_weighted, IN_CLASS},
    {mk_recall_none, IN_CLASS},
    {mk_confmat, IN_CLASS},
    {metric_mean_create, IN_WEIGHTED},
    {metric_sum_create, IN_VALUES},
    {metric_min_create, IN_VALUES},
    {metric_max_create, IN_VALUES},
    {metric_auroc_create, IN_BINARY},
    {mk_confmat_true, IN_CLASS},
    {mk_spec_macro_top2, IN_CLASS},
    {mk_fbeta_none, IN_CLASS},
    {mk_binary_acc, IN_BINARY},
    {mk_binary_fbeta, IN_BINARY},
    {mk_binary_acc, IN_LOGITS01},
    {mk_auroc_mc_macro, IN_CLASS},
    {mk_auroc_mc_none_ign0, IN_CLASS},
    {mk_f1_macro_top2_ign0, IN_CLASS},
    {mk_confmat_ign0, IN_CLASS},
    {mk_binary_acc_ign0, IN_BINARY},
    {mk_ml_f1_macro_ign, IN_MULTILABEL},
    {mk_ml_acc_none, IN_MULTILABEL},
    {mk_ml_spec_weighted, IN_MULTILABEL},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

typedef struct Inputs {
    Tensor *logits, *target, *values, *weights, *scores, *btarget, *blogits;
    Tensor *ml_logits, *ml_target; /* f32 logits, targets with -1 */
} Inputs;

static Inputs inputs_make(void)
{
    return (Inputs){logits_tensor(),
                    i64_tensor(fx_target, N),
                    tu_tensor(CT_F64, 1, (const int64_t[]){N}, fx_values),
                    tu_tensor(CT_F64, 1, (const int64_t[]){N}, fx_weights),
                    tu_tensor(CT_F64, 1, (const int64_t[]){N}, fx_scores),
                    i64_tensor(fx_btarget, N),
                    tu_tensor(CT_F32, 1, (const int64_t[]){N}, fx_blogits),
                    ml_tensor(CT_F32, fx_ml_logits),
                    ml_i64(fx_ml_target_ign)};
}

static void inputs_free(Inputs *in)
{
    Tensor *all[9] = {in->logits,  in->target,  in->values,    in->weights,  in->scores,
                      in->btarget, in->blogits, in->ml_logits, in->ml_target};
    for (int i = 0; i < 9; i++) tensor_free(all[i]);
}

/* Batches k0 .. k1-1 of the case's inputs. */
static void feed_case(Metric *m, int input, const Inputs *in, int k0, int k1)
{
    switch (input) {
    case IN_CLASS: feed_range(m, in->logits, in->target, k0, k1); break;
    case IN_WEIGHTED: feed_range(m, in->values, in->weights, k0, k1); break;
    case IN_VALUES: feed_range(m, in->values, NULL, k0, k1); break;
    case IN_LOGITS01: feed_range(m, in->blogits, in->btarget, k0, k1); break;
    case IN_MULTILABEL: feed_range(m, in->ml_logits, in->ml_target, k0, k1); break;
    default: feed_range(m, in->scores, in->btarget, k0, k1); break;
    }
}

/* Every state element and the computed value agree (NaN == NaN). */
static void assert_same(Metric *a, Metric *b, double tol)
{
    int64_t na, nb;
    const double *sa = metric_state(a, &na), *sb = metric_state(b, &nb);
    ck_assert_int_eq(na, nb);
    for (int64_t i = 0; i < na; i++)
        ck_assert_msg(fabs(sa[i] - sb[i]) <= tol || (isnan(sa[i]) && isnan(sb[i])) ||
                          sa[i] == sb[i],
                      "%s: state[%lld] %.17g vs %.17g", metric_name(a), (long long)i,
                      sa[i], sb[i]);
    Tensor *ta = metric_compute_tensor(a), *tb = metric_compute_tensor(b);
    int64_t n = tensor_numel(ta);
    double *vb = malloc((size_t)n * sizeof *vb);
    ck_assert_int_eq(tensor_copy_to_host(tb, vb, CT_F64), CT_OK);
    tu_assert_values(ta, vb, n, tol, tol);
    free(vb);
    tensor_free(ta);
    tensor_free(tb);
}

START_TEST(test_accumulation_equals_one_update)
{
    TU_MEM_BEGIN;
    Inputs in = inputs_make();
    for (int c = 0; c < NCASES; c++) {
        Metric *a = cases[c].make(), *b = cases[c].make();
        feed_case(a, cases[c].input, &in, 0, 3);
        int input = cases[c].input;
        const Tensor *p = input == IN_CLASS        ? in.logits
                          : input == IN_BINARY     ? in.scores
                          : input == IN_LOGITS01   ? in.blogits
                          : input == IN_MULTILABEL ? in.ml_logits
                                                   : in.values;
        Tensor *t = input == IN_CLASS                            ? in.target
                    : input == IN_BINARY || input == IN_LOGITS01 ? in.btarget
                    : input == IN_MULTILABEL                     ? in.ml_target
                    : input == IN_WEIGHTED                       ? in.weights
                                                                 : NULL;
        ck_assert_int_eq(metric_update(b, (Tensor *)p, t), CT_OK);
        assert_same(a, b, 1e-12);
        metric_free(a);
        metric_free(b);
    }
    inputs_free(&in);
    TU_MEM_END;
}
END_TEST

START_TEST(test_reset)
{
    TU_MEM_BEGIN;
    Inputs in = inputs_make();
    for (int c = 0; c < NCASES; c++) {
        Metric *a = cases[c].make(), *fresh = cases[c].make(), *b = cases[c].make();
        feed_case(a, cases[c].input, &in, 0, 2);
        metric_reset(a);
        assert_same(a, fresh, 0);
        feed_case(a, cases[c].input, &in, 0, 3);
        feed_case(b, cases[c].input, &in, 0, 3);
        assert_same(a, b, 0);
        metric_free(a);
        metric_free(b);
        metric_free(fresh);
    }
    inputs_free(&in);
    TU_MEM_END;
}
END_TEST

/* Rank 0 sees batch 0, rank 1 batches 1 and 2: merging rank 1's state into
 * rank 0 equals one metric that saw everything. */
START_TEST(test_merge_equals_one_metric)
{
    TU_MEM_BEGIN;
    Inputs in = inputs_make();
    for (int c = 0; c < NCASES; c++) {
        Metric *r0 = cases[c].make(), *r1 = cases[c].make(), *all = cases[c].make();
        feed_case(r0, cases[c].input, &in, 0, 1);
        feed_case(r1, cases[c].input, &in, 1, 3);
        feed_case(all, cases[c].input, &in, 0, 3);
        ck_assert_int_eq(metric_merge(r0, metric_state(r1, NULL)), CT_OK);
        assert_same(r0, all, 1e-12);
        metric_free(r0);
        metric_free(r1);
        metric_free(all);
    }
    inputs_free(&in);
    TU_MEM_END;
}
END_TEST

/* The all-reduce recipe of metrics.h: reduce copies of the states with the
 * metric's rule, then reset + merge the result on every rank. */
START_TEST(test_allreduce_recipe)
{
    TU_MEM_BEGIN;
    Inputs in = inputs_make();
    for (int c = 0; c < NCASES; c++) {
        Metric *r0 = cases[c].make(), *r1 = cases[c].make(), *all = cases[c].make();
        /* CONCAT: gathered, tested above */
        if (metric_merge_rule(r0) == METRIC_MERGE_CONCAT) {
            metric_free(r0);
            metric_free(r1);
            metric_free(all);
            continue;
        }
        feed_case(r0, cases[c].input, &in, 0, 2);
        feed_case(r1, cases[c].input, &in, 2, 3);
        feed_case(all, cases[c].input, &in, 0, 3);
        int64_t n;
        const double *s0 = metric_state(r0, &n), *s1 = metric_state(r1, NULL);
        double *buf = malloc((size_t)n * sizeof *buf);
        for (int64_t i = 0; i < n; i++) {
            switch (metric_merge_rule(r0)) {
            case METRIC_MERGE_MIN: buf[i] = fmin(s0[i], s1[i]); break;
            case METRIC_MERGE_MAX: buf[i] = fmax(s0[i], s1[i]); break;
            default: buf[i] = s0[i] + s1[i]; break;
            }
        }
        Metric *ranks[2] = {r0, r1};
        for (int r = 0; r < 2; r++) {
            metric_reset(ranks[r]);
            ck_assert_int_eq(metric_merge(ranks[r], buf), CT_OK);
            assert_same(ranks[r], all, 1e-12);
        }
        free(buf);
        metric_free(r0);
        metric_free(r1);
        metric_free(all);
    }
    inputs_free(&in);
    TU_MEM_END;
}
END_TEST

Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("values");
    tcase_add_test(tc, test_class_metrics_match_torchmetrics);
    tcase_add_test(tc, test_class_per_class_values);
    tcase_add_test(tc, test_class_index_preds_absent_class);
    tcase_add_test(tc, test_class_strided_inputs);
    tcase_add_test(tc, test_confusion_matrix);
    tcase_add_test(tc, test_aggregators);
    tcase_add_test(tc, test_aggregators_scalar_updates);
    tcase_add_test(tc, test_auroc);
    tcase_add_test(tc, test_auroc_merge_own_state);
    tcase_add_test(tc, test_binary_match_torchmetrics);
    tcase_add_test(tc, test_binary_labels_bool_and_2d);
    tcase_add_test(tc, test_binary_sigmoid_in_dtype);
    tcase_add_test(tc, test_class_specificity_fbeta_match_torchmetrics);
    tcase_add_test(tc, test_f1_is_fbeta_1);
    tcase_add_test(tc, test_bool_class_inputs);
    tcase_add_test(tc, test_confusion_matrix_normalized);
    tcase_add_test(tc, test_ignore_index_class);
    tcase_add_test(tc, test_ignore_index_confusion_matrix);
    tcase_add_test(tc, test_ignore_index_binary);
    tcase_add_test(tc, test_multilabel_match_torchmetrics);
    tcase_add_test(tc, test_multilabel_labels_bool_and_3d);
    tcase_add_test(tc, test_multilabel_errors);
    tcase_add_test(tc, test_auroc_multiclass);
    tcase_add_test(tc, test_auroc_multiclass_many_samples);
    tcase_add_test(tc, test_auroc_multiclass_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("state");
    tcase_add_test(tc, test_accumulation_equals_one_update);
    tcase_add_test(tc, test_reset);
    tcase_add_test(tc, test_merge_equals_one_metric);
    tcase_add_test(tc, test_allreduce_recipe);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(metrics_suite());
}
