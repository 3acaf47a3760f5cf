/* Metrics API: collections, a custom metric through the vtable, bad input
 * and inputs on the GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_fixtures.h"

/* ------------------------------------------------------------ collection */

static MetricCollection *make_collection(void)
{
    MetricCollection *c = metric_collection_create();
    ck_assert_int_eq(
        metric_collection_add(
            c, NULL, metric_accuracy_create(&(MetricClassArgs){.num_classes = C})),
        CT_OK);
    ck_assert_int_eq(
        metric_collection_add(c, "f1_macro",
                              metric_f1_create(&(MetricClassArgs){
                                  .num_classes = C, .average = METRIC_AVG_MACRO})),
        CT_OK);
    ck_assert_int_eq(metric_collection_add(c, NULL, metric_confusion_matrix_create(C)),
                     CT_OK);
    return c;
}

static void feed_collection(MetricCollection *c, Tensor *x, Tensor *t)
{
    CtScope *s = ct_scope_open();
    for (int k = 0; k < 3; k++) {
        Tensor *p = tensor_slice(x, 0, splits[k], splits[k + 1], 1);
        Tensor *y = tensor_slice(t, 0, splits[k], splits[k + 1], 1);
        ck_assert_msg(metric_collection_update(c, p, y) == CT_OK, "%s", ct_last_error());
    }
    ct_scope_close(s);
}

START_TEST(test_collection)
{
    TU_MEM_BEGIN;
    Tensor *x = logits_tensor(), *t = i64_tensor(fx_target, N);
    MetricCollection *c = make_collection();
    ck_assert_int_eq(metric_collection_size(c), 3);
    feed_collection(c, x, t);
    MetricValue out[3];
    ck_assert_int_eq(metric_collection_compute(c, out, 3), CT_OK);
    ck_assert_str_eq(out[0].name, "accuracy");
    ck_assert_str_eq(out[1].name, "f1_macro");
    ck_assert_str_eq(out[2].name, "confusion_matrix");
    ck_assert(out[0].scalar && out[1].scalar && !out[2].scalar);
    ck_assert_double_eq_tol(out[0].value, fx_class_scalar[0], TOL_F32);
    ck_assert_double_eq_tol(out[1].value, fx_class_scalar[3 * 6 + 2], TOL_F32);
    ck_assert(isnan(out[2].value));
    Tensor *cm = metric_compute_tensor(metric_collection_find(c, "confusion_matrix"));
    ck_assert_int_eq(((const int64_t *)tensor_data(cm))[0], fx_confmat[0]);
    tensor_free(cm);
    ck_assert_ptr_eq(metric_collection_get(c, 1), metric_collection_find(c, "f1_macro"));
    ck_assert_str_eq(metric_collection_name(c, 2), "confusion_matrix");
    ck_assert_ptr_null(metric_collection_get(c, 3));
    ck_assert_ptr_null(metric_collection_find(c, "nope"));
    /* too small an output array */
    ck_assert_int_eq(metric_collection_compute(c, out, 2), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "out holds 2 values, the collection has 3 metrics");
    /* reset all */
    metric_collection_reset(c);
    ck_assert_int_eq(metric_collection_compute(c, out, 3), CT_OK);
    ck_assert_double_eq(out[0].value, 0.0);
    ck_assert_double_eq(out[1].value, 0.0);
    /* a duplicate name is refused and the metric freed (ASan checks) */
    ck_assert_int_eq(metric_collection_add(c, "f1_macro", metric_sum_create()),
                     CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID,
                    "a metric named 'f1_macro' is already in the collection");
    ck_assert_int_eq(metric_collection_size(c), 3);
    /* names up to 63 bytes */
    char longname[65];
    memset(longname, 'n', 64);
    longname[64] = '\0';
    ck_assert_int_eq(metric_collection_add(c, longname, metric_sum_create()),
                     CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "' is longer than 63");
    longname[63] = '\0';
    ck_assert_int_eq(metric_collection_add(c, longname, metric_sum_create()), CT_OK);
    ck_assert_str_eq(metric_collection_name(c, 3), longname);
    ck_assert_int_eq(metric_collection_size(c), 4);
    /* a failed creation inline: the first error stays */
    ck_assert_int_eq(metric_collection_add(c, NULL, metric_confusion_matrix_create(1)),
                     CT_ERR_NULL);
    tu_assert_error(CT_ERR_INVALID, "confusion_matrix: num_classes = 1 must be in [2,");
    metric_collection_free(c);
    tensor_free(x);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

/* A batch that one metric rejects changes no metric of the collection. */
START_TEST(test_collection_update_is_atomic)
{
    TU_MEM_BEGIN;
    Tensor *x = logits_tensor(), *t = i64_tensor(fx_target, N);
    MetricCollection *c = make_collection();
    ck_assert_int_eq(
        metric_collection_add(
            c, "acc3", metric_accuracy_create(&(MetricClassArgs){.num_classes = 3})),
        CT_OK);
    ck_assert_int_eq(metric_collection_update(c, x, t), CT_ERR_SHAPE);
    tu_assert_error(CT_ERR_SHAPE, "accuracy: preds [40, 4] and target [40] do not fit");
    for (int64_t i = 0; i < metric_collection_size(c); i++) {
        int64_t n;
        const double *s = metric_state(metric_collection_get(c, i), &n);
        for (int64_t j = 0; j < n; j++) ck_assert_double_eq(s[j], 0.0);
    }
    metric_collection_free(c);
    tensor_free(x);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------ a custom metric */

/* Counts samples whose target equals the first score column rounded: shows
 * the vtable and the shared host copies. */
typedef struct Hits {
    double state[2]; /* hits, samples */
} Hits;

static CtStatus hits_update(void *self, MetricBatch *b)
{
    Hits *h = self;
    const double *p = metric_batch_preds_f64(b);
    const int64_t *t = metric_batch_target_i64(b);
    if (!p || !t) return ct_last_status();
    int64_t n = tensor_numel(metric_batch_target(b));
    int64_t c = tensor_size(metric_batch_preds(b), 1);
    for (int64_t i = 0; i < n; i++) h->state[0] += p[i * c] > 0 && t[i] == 0;
    h->state[1] += (double)n;
    return CT_OK;
}
static CtStatus hits_compute(void *self, double *out)
{
    Hits *h = self;
    *out = h->state[1] ? h->state[0] / h->state[1] : 0;
    return CT_OK;
}
static void hits_reset(void *self)
{
    *(Hits *)self = (Hits){{0, 0}};
}
static const double *hits_state(void *self, int64_t *n)
{
    *n = 2;
    return ((Hits *)self)->state;
}
static CtStatus hits_merge(void *self, const double *o)
{
    Hits *h = self;
    h->state[0] += o[0], h->state[1] += o[1];
    return CT_OK;
}
static const MetricVtable hits_vt = {.update = hits_update,
                                     .compute = hits_compute,
                                     .reset = hits_reset,
                                     .state = hits_state,
                                     .merge = hits_merge,
                                     .free = free};

START_TEST(test_custom_metric)
{
    TU_MEM_BEGIN;
    Tensor *x = logits_tensor(), *t = i64_tensor(fx_target, N);
    int expect = 0;
    for (int i = 0; i < N; i++) expect += fx_logits[i * C] > 0 && fx_target[i] == 0;
    MetricCollection *c = make_collection();
    ck_assert_int_eq(
        metric_collection_add(c, NULL,
                              metric_create("hits", &hits_vt, calloc(1, sizeof(Hits)))),
        CT_OK);
    feed_collection(c, x, t);
    ck_assert_double_eq_tol(value_of(metric_collection_find(c, "hits")), expect / 40.0,
                            1e-15);
    ck_assert_double_eq_tol(value_of(metric_collection_get(c, 0)), fx_class_scalar[0],
                            TOL_F32);
    /* a vtable without the required slots is refused (self is freed) */
    static const MetricVtable partial = {.update = hits_update, .free = free};
    ck_assert_ptr_null(metric_create("partial", &partial, calloc(1, sizeof(Hits))));
    tu_assert_error(CT_ERR_INVALID, "metric_create(partial): the vtable needs");
    metric_collection_free(c);
    tensor_free(x);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------ bad input */

/* The update fails with `st` and `msg`, and the state is still all zero. */
static void assert_rejected(Metric *m, Tensor *p, Tensor *t, CtStatus st, const char *msg)
{
    ck_assert_int_eq(metric_update(m, p, t), st);
    tu_assert_error(st, msg);
    int64_t n;
    const double *s = metric_state(m, &n);
    for (int64_t i = 0; i < n; i++) ck_assert_double_eq(s[i], 0.0);
}

START_TEST(test_class_bad_input)
{
    TU_MEM_BEGIN;
    Tensor *x = logits_tensor(), *t = i64_tensor(fx_target, N);
    Metric *m = metric_accuracy_create(&(MetricClassArgs){.num_classes = C});
    CtScope *s = ct_scope_open();
    Tensor *t39 = tensor_slice(t, 0, 0, 39, 1);
    assert_rejected(
        m, x, t39, CT_ERR_SHAPE,
        "accuracy: preds [40, 4] and target [39] do not fit: expected preds (N, "
        "4) scores or (N) class indices, and target (N)");
    Tensor *x3 = tensor_slice(x, 1, 0, 3, 1);
    assert_rejected(m, x3, t, CT_ERR_SHAPE,
                    "accuracy: preds [40, 3] and target [40] do not fit");
    assert_rejected(
        m, x, tensor_cast(t, CT_F32), CT_ERR_DTYPE,
        "accuracy: target must be class indices (i64, i32, u8 or bool), got f32");
    assert_rejected(
        m, tensor_cast(x, CT_I64), t, CT_ERR_DTYPE,
        "accuracy: preds of shape (N, C) are scores and must be floating point, "
        "got i64");
    assert_rejected(
        m, tensor_cast(t, CT_F32), t, CT_ERR_DTYPE,
        "accuracy: preds of shape (N) are class indices (i64, i32, u8 or bool), got f32");
    int64_t bad[N];
    for (int i = 0; i < N; i++) bad[i] = fx_target[i];
    bad[17] = 4;
    Tensor *tb = tensor_from_data(bad, 1, (const int64_t[]){N}, CT_I64, ct_cpu());
    assert_rejected(m, x, tb, CT_ERR_INVALID,
                    "accuracy: target value 4 at position 17 is outside [0, 4)");
    bad[17] = fx_target[17];
    bad[3] = -1;
    tb = tensor_from_data(bad, 1, (const int64_t[]){N}, CT_I64, ct_cpu());
    assert_rejected(m, x, tb, CT_ERR_INVALID,
                    "accuracy: target value -1 at position 3 is outside [0, 4)");
    for (int i = 0; i < N; i++) bad[i] = fx_pred_idx[i];
    bad[9] = 7;
    Tensor *pb = tensor_from_data(bad, 1, (const int64_t[]){N}, CT_I64, ct_cpu());
    assert_rejected(m, pb, t, CT_ERR_INVALID,
                    "accuracy: pred value 7 at position 9 is outside [0, 4)");
    ct_scope_close(s);
    /* top-k needs scores */
    Metric *k2 =
        metric_precision_create(&(MetricClassArgs){.num_classes = C, .top_k = 2});
    Tensor *pi = i64_tensor(fx_pred_idx, N);
    assert_rejected(k2, pi, t, CT_ERR_INVALID,
                    "precision: top_k = 2 needs (N, C) scores, got class indices");
    /* NULL target; sticky NULL preds keep the first message */
    assert_rejected(m, x, NULL, CT_ERR_NULL, "accuracy: target is NULL");
    ct_error(CT_ERR_SHAPE, "first failure");
    ck_assert_int_eq(metric_update(m, NULL, t), CT_ERR_NULL);
    tu_assert_error(CT_ERR_SHAPE, "first failure");
    ck_assert_int_eq(metric_update(NULL, x, t), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "metric_update: metric is NULL");
    /* creation */
    ck_assert_ptr_null(
        metric_accuracy_create(&(MetricClassArgs){.num_classes = C, .top_k = 5}));
    tu_assert_error(CT_ERR_INVALID,
                    "accuracy: top_k = 5 must be in [1, num_classes = 4]");
    ck_assert_ptr_null(metric_f1_create(&(MetricClassArgs){.num_classes = 1}));
    tu_assert_error(CT_ERR_INVALID, "f1: num_classes = 1 must be in [2, 16777216]");
    ck_assert_ptr_null(
        metric_recall_create(&(MetricClassArgs){.num_classes = C, .average = 9}));
    tu_assert_error(CT_ERR_INVALID, "recall: unknown average 9");
    ck_assert_ptr_null(metric_recall_create(NULL));
    tu_assert_error(CT_ERR_NULL, "recall: args is NULL");
    metric_free(k2);
    metric_free(m);
    tensor_free(pi);
    tensor_free(x);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

/* Binary task: bad shapes, dtypes and values, and bad arguments. */
START_TEST(test_binary_bad_input)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Metric *m = metric_precision_create(&(MetricClassArgs){.task = METRIC_TASK_BINARY});
    Tensor *p = tu_tensor(CT_F32, 1, (const int64_t[]){4}, (double[]){.1, .9, .4, .6});
    Tensor *t = i64_tensor((const int64_t[]){0, 1, 1, 0}, 4);
    assert_rejected(m, p, tensor_reshape(t, 2, (const int64_t[]){2, 2}), CT_ERR_SHAPE,
                    "precision: preds [4] and target [2, 2] do not fit: task binary "
                    "expects preds and target of one shape (N, ...)");
    assert_rejected(m, tensor_scalar(0.5, CT_F32, ct_cpu()),
                    tensor_scalar(1, CT_I64, ct_cpu()), CT_ERR_SHAPE,
                    "precision: preds [] and target [] do not fit");
    assert_rejected(m, p, i64_tensor((const int64_t[]){0, 1, 2, 0}, 4), CT_ERR_INVALID,
                    "precision: target value 2 at position 2 is not 0 or 1");
    assert_rejected(m, p,
                    tensor_from_data((const float[]){0, 1, .5f, 0}, 1,
                                     (const int64_t[]){4}, CT_F32, ct_cpu()),
                    CT_ERR_INVALID,
                    "precision: target value 0.5 at position 2 is not 0 or 1");
    assert_rejected(
        m, i64_tensor((const int64_t[]){0, 1, 1, 3}, 4), t, CT_ERR_INVALID,
        "precision: pred value 3 at position 3 is not 0 or 1 (integer preds are "
        "labels)");
    assert_rejected(m, p, NULL, CT_ERR_NULL, "precision: target is NULL");
    ck_assert_int_eq(metric_update(m, p, t), CT_OK);
    ck_assert_double_eq(metric_state(m, NULL)[3], 4.0);
    ct_scope_close(s);
    tensor_free(p);
    metric_free(m);
    /* creation */
    struct {
        MetricClassArgs a;
        const char *msg;
    } bad[] = {
        {{.task = METRIC_TASK_BINARY, .threshold = 1.5},
         "threshold = 1.5 must be in [0, 1]"},
        {{.task = METRIC_TASK_BINARY, .threshold = NAN},
         "threshold = nan must be in [0, 1]"},
        {{.task = METRIC_TASK_BINARY, .num_classes = 3},
         "task binary takes num_classes 0 (or 2), got 3"},
        {{.task = METRIC_TASK_BINARY, .top_k = 2}, "task binary takes no top_k, got 2"},
        {{.task = METRIC_TASK_BINARY, .average = METRIC_AVG_MACRO},
         "task binary takes no average (it scores the positive class), got 1"},
        {{.num_classes = 3, .task = 7}, "unknown task 7"},
    };
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        ck_assert_ptr_null(metric_accuracy_create(&bad[i].a));
        tu_assert_error(CT_ERR_INVALID, bad[i].msg);
    }
    for (int i = 0; i < 3; i++) {
        double beta = i == 0 ? 0 : i == 1 ? -1 : INFINITY;
        ck_assert_ptr_null(
            metric_fbeta_create(&(MetricClassArgs){.num_classes = 3}, beta));
        tu_assert_error(CT_ERR_INVALID, "fbeta: beta = ");
    }
    ck_assert_ptr_null(metric_confusion_matrix_normalized_create(3, 4));
    tu_assert_error(CT_ERR_INVALID, "confusion_matrix: unknown normalize 4");
    /* num_classes 2 and a threshold of 1 are fine: nothing is above 1 */
    m = metric_recall_create(
        &(MetricClassArgs){.task = METRIC_TASK_BINARY, .num_classes = 2, .threshold = 1});
    ck_assert_ptr_nonnull(m);
    metric_free(m);
    TU_MEM_END;
}
END_TEST

START_TEST(test_other_bad_input)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *v = tensor_ones(2, (const int64_t[]){2, 3}, CT_F32, ct_cpu());
    Tensor *w = tensor_ones(1, (const int64_t[]){4}, CT_F32, ct_cpu());
    Metric *mean = metric_mean_create(), *sum = metric_sum_create();
    ck_assert_int_eq(metric_update(mean, v, w), CT_ERR_SHAPE);
    tu_assert_error(CT_ERR_SHAPE,
                    "mean: weights [4] do not fit values [2, 3]: expected one "
                    "weight per value or a single weight");
    ck_assert_double_eq(metric_state(mean, NULL)[1], 0.0);
    ck_assert_int_eq(metric_update(sum, v, w), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "sum: takes no weights (target must be NULL)");
    ck_assert_int_eq(metric_update_scalar(sum, 1.0, 2.0), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "sum: takes no weights");
    ck_assert_double_eq(metric_state(sum, NULL)[0], 0.0);

    Metric *au = metric_auroc_create();
    Tensor *p = tu_tensor(CT_F64, 1, (const int64_t[]){3}, (double[]){0.2, 0.4, 0.6});
    Tensor *y = i64_tensor((const int64_t[]){0, 2, 1}, 3);
    ck_assert_int_eq(metric_update(au, p, y), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "auroc: target value 2 at position 1 is not 0 or 1");
    Tensor *y2 = i64_tensor((const int64_t[]){0, 1}, 2);
    ck_assert_int_eq(metric_update(au, p, y2), CT_ERR_SHAPE);
    tu_assert_error(CT_ERR_SHAPE, "auroc: preds [3] and target [2] do not fit");
    Tensor *pn = tu_tensor(CT_F64, 1, (const int64_t[]){2}, (double[]){0.2, NAN});
    ck_assert_int_eq(metric_update(au, pn, y2), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "auroc: preds value nan at position 1");
    ck_assert_int_eq(metric_update(au, tensor_cast(y2, CT_I64), y2), CT_ERR_DTYPE);
    tu_assert_error(CT_ERR_DTYPE, "auroc: preds must be floating point scores, got i64");
    int64_t n;
    metric_state(au, &n);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(metric_merge(au, (const double[]){3, 0.5, 1, 0.5}), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "auroc: other_state[0] = 3 is not a pair count");
    ck_assert_int_eq(metric_merge(au, NULL), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "auroc: other_state is NULL");
    ck_assert_ptr_null(metric_state(NULL, &n));
    ck_assert_int_eq(n, 0);
    metric_free(au);
    metric_free(mean);
    metric_free(sum);
    tensor_free(p); /* tu_tensor: persistent even inside a scope */
    tensor_free(pn);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* Inputs on the GPU are copied to the host once per update. */
START_TEST(test_cuda_inputs)
{
    if (ct_cuda_device_count() == 0) {
        fprintf(stderr, "skipped 1 CUDA test: no device\n");
        return;
    }
    TU_MEM_BEGIN;
    Tensor *x = logits_tensor(), *t = i64_tensor(fx_target, N);
    Tensor *xg = tensor_to_device(x, ct_cuda(0)), *tg = tensor_to_device(t, ct_cuda(0));
    ck_assert_ptr_nonnull(xg);
    Metric *m = metric_f1_create(
        &(MetricClassArgs){.num_classes = C, .average = METRIC_AVG_MACRO});
    feed(m, xg, tg);
    ck_assert_double_eq_tol(value_of(m), fx_class_scalar[3 * 6 + 2], TOL_F32);
    metric_free(m);
    tensor_free(xg);
    tensor_free(tg);
    tensor_free(x);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

Suite *metrics_api_suite(void)
{
    Suite *s = suite_create("metrics_api");
    TCase *tc = tcase_create("collection");
    tcase_add_test(tc, test_collection);
    tcase_add_test(tc, test_collection_update_is_atomic);
    tcase_add_test(tc, test_custom_metric);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, test_class_bad_input);
    tcase_add_test(tc, test_binary_bad_input);
    tcase_add_test(tc, test_other_bad_input);
    tcase_add_test(tc, test_cuda_inputs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(metrics_api_suite());
}
