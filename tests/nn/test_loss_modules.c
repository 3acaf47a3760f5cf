/* nn_smooth_l1_loss against PyTorch, its gradient, and the NnLoss objects. */
#include <math.h>
#include <stdlib.h>

#include "ctrainer/nn.h"
#include "testutil.h"

/* From tests/fixtures/smooth_l1.py. */
static const double X[] = {0.1, -0.3, 1.7, 2.5,   -1.2, 0.45,
                           0.0, 3.0,  0.8, -0.05, -2.2, 0.6};
static const double Y[] = {0.0, 0.2, 0.5, -0.5, 0.3, 0.5, 0.0, 2.2, -0.1, 0.3, -1.0, 1.4};
static const double SL1_B1_mean[] = {0.5114583333333332};
static const double SL1_B1_sum[] = {6.137499999999999};
static const double SL1_B1_none[] = {0.005000000000000001,
                                     0.125,
                                     0.7,
                                     2.5,
                                     1.0,
                                     0.0012499999999999994,
                                     0.0,
                                     0.31999999999999984,
                                     0.405,
                                     0.06124999999999999,
                                     0.7000000000000002,
                                     0.31999999999999995};
static const double SL1_B05_mean[] = {0.6695833333333333};
static const double SL1_B05_sum[] = {8.035};
static const double SL1_B05_none[] = {0.010000000000000002,
                                      0.25,
                                      0.95,
                                      2.75,
                                      1.25,
                                      0.0024999999999999988,
                                      0.0,
                                      0.5499999999999998,
                                      0.65,
                                      0.12249999999999998,
                                      0.9500000000000002,
                                      0.5499999999999999};
static const double SL1_B0_mean[] = {0.8666666666666667};
static const double SL1_B0_sum[] = {10.4};
static const double SL1_B0_none[] = {0.1,
                                     0.5,
                                     1.2,
                                     3.0,
                                     1.5,
                                     0.04999999999999999,
                                     0.0,
                                     0.7999999999999998,
                                     0.9,
                                     0.35,
                                     1.2000000000000002,
                                     0.7999999999999999};

static const int64_t S34[] = {3, 4};

static void check_smooth_l1(CtDType dt, double tol)
{
    CtScope *s = ct_scope_open();
    Tensor *x = tu_tensor(dt, 2, S34, X), *y = tu_tensor(dt, 2, S34, Y);
    const double betas[] = {1.0, 0.5, 0.0};
    const double *want[3][3] = {{SL1_B1_mean, SL1_B1_sum, SL1_B1_none},
                                {SL1_B05_mean, SL1_B05_sum, SL1_B05_none},
                                {SL1_B0_mean, SL1_B0_sum, SL1_B0_none}};
    const CtReduction red[] = {CT_REDUCTION_MEAN, CT_REDUCTION_SUM, CT_REDUCTION_NONE};
    for (int b = 0; b < 3; b++)
        for (int r = 0; r < 3; r++) {
            Tensor *l = nn_smooth_l1_loss(x, y, red[r], betas[b]);
            if (red[r] == CT_REDUCTION_NONE)
                tu_assert_shape(l, 2, 3, 4);
            else
                ck_assert_int_eq(tensor_ndim(l), 0);
            ck_assert_int_eq(tensor_dtype(l), dt);
            tu_assert_values(l, want[b][r], red[r] == CT_REDUCTION_NONE ? 12 : 1, tol,
                             tol);
        }
    tensor_free(x);
    tensor_free(y);
    ct_scope_close(s);
}

START_TEST(test_smooth_l1_values)
{
    TU_MEM_BEGIN;
    check_smooth_l1(CT_F64, 1e-12);
    check_smooth_l1(CT_F32, 1e-6);
    TU_MEM_END;
}
END_TEST

START_TEST(test_smooth_l1_no_scope)
{
    /* with no scope open the result is the caller's and nothing else leaks */
    TU_MEM_BEGIN;
    Tensor *x = tu_tensor(CT_F64, 2, S34, X), *y = tu_tensor(CT_F64, 2, S34, Y);
    Tensor *l = nn_smooth_l1_loss(x, y, CT_REDUCTION_SUM, 0.5);
    tu_assert_values(l, SL1_B05_sum, 1, 1e-12, 1e-12);
    tensor_free(l);
    tensor_free(x);
    tensor_free(y);
    TU_MEM_END;
}
END_TEST

static Tensor *sl1_fn(Tensor **in, void *ctx)
{
    const double *p = ctx; /* beta, reduction */
    return nn_smooth_l1_loss(in[0], in[1], (CtReduction)p[1], p[0]);
}

START_TEST(test_smooth_l1_gradcheck)
{
    TU_MEM_BEGIN;
    const int64_t shape[] = {4, 5};
    /* differences in (-2, 2): both branches of beta 1 and 0.5 are visited */
    Tensor *x = tu_rand64(2, shape, -1, 1, 7, true);
    Tensor *y = tu_rand64(2, shape, -1, 1, 8, true);
    Tensor *in[] = {x, y};
    const double cases[][2] = {{1.0, CT_REDUCTION_MEAN},
                               {0.5, CT_REDUCTION_NONE},
                               {0.5, CT_REDUCTION_SUM},
                               {0.0, CT_REDUCTION_MEAN}};
    for (int i = 0; i < 4; i++)
        tu_gradcheck("smooth_l1", sl1_fn, (void *)cases[i], 2, in);
    tensor_free(x);
    tensor_free(y);
    TU_MEM_END;
}
END_TEST

START_TEST(test_smooth_l1_bad_input)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *x = tu_tensor(CT_F32, 2, S34, X), *y = tu_tensor(CT_F32, 2, S34, Y);
    ck_assert_ptr_null(nn_smooth_l1_loss(x, y, CT_REDUCTION_MEAN, -1.0));
    tu_assert_error(CT_ERR_INVALID, "smooth_l1_loss: beta must be >= 0, got -1");
    ck_assert_ptr_null(nn_smooth_l1_loss(x, y, (CtReduction)7, 1.0));
    tu_assert_error(CT_ERR_INVALID, "smooth_l1_loss: unknown reduction 7");
    Tensor *y3 = tensor_zeros(1, (const int64_t[]){3}, CT_F32, ct_cpu());
    ck_assert_ptr_null(nn_smooth_l1_loss(x, y3, CT_REDUCTION_MEAN, 1.0));
    tu_assert_error(CT_ERR_SHAPE, "target f32[3] cpu must have the same shape");
    Tensor *y64 = tensor_zeros(2, S34, CT_F64, ct_cpu());
    ck_assert_ptr_null(nn_smooth_l1_loss(x, y64, CT_REDUCTION_MEAN, 1.0));
    tu_assert_error(CT_ERR_DTYPE, "same shape and dtype");
    Tensor *xi = tensor_zeros(2, S34, CT_I64, ct_cpu());
    ck_assert_ptr_null(nn_smooth_l1_loss(xi, xi, CT_REDUCTION_MEAN, 1.0));
    tu_assert_error(CT_ERR_DTYPE, "must be floating point");
    /* sticky: a NULL input keeps the first error */
    ct_error(CT_ERR_SHAPE, "first");
    ck_assert_ptr_null(nn_smooth_l1_loss(NULL, y, CT_REDUCTION_MEAN, 1.0));
    tu_assert_error(CT_ERR_SHAPE, "first");
    tensor_free(x);
    tensor_free(y);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------ NnLoss */

static void assert_same(Tensor *a, Tensor *b)
{
    ck_assert_msg(a && b, "loss failed: %s", ct_last_error());
    ck_assert_int_eq(tensor_numel(a), tensor_numel(b));
    double *v = malloc((size_t)tensor_numel(b) * sizeof *v);
    ck_assert_int_eq(tensor_copy_to_host(b, v, CT_F64), CT_OK);
    tu_assert_values(a, v, tensor_numel(b), 0, 0);
    free(v);
}

START_TEST(test_loss_objects_match_functions)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const int64_t s45[] = {4, 5};
    Tensor *logits = tu_rand64(2, s45, -2, 2, 3, false);
    Tensor *tgt = tensor_from_data((const int64_t[]){3, 1, 4, 1}, 1, (const int64_t[]){4},
                                   CT_I64, ct_cpu());
    /* the losses keep their own references to the weights */
    Tensor *w =
        tu_tensor(CT_F64, 1, (const int64_t[]){5}, (double[]){.5, 2, 1, 1.5, .25});
    CtCrossEntropyArgs ca = {.reduction = CT_REDUCTION_SUM,
                             .label_smoothing = 0.1,
                             .ignore_index = 1,
                             .use_ignore_index = true,
                             .weight = w};
    NnLoss *ce = nn_loss_cross_entropy(&ca);
    NnLoss *ce_def = nn_loss_cross_entropy(NULL);
    NnLoss *nll = nn_loss_nll(&ca);
    Tensor *pw = tu_tensor(CT_F64, 1, (const int64_t[]){5}, (double[]){1, 2, 3, 0.5, 1});
    NnLoss *bce = nn_loss_bce_with_logits(pw, CT_REDUCTION_MEAN);
    tensor_free(pw);
    tensor_free(w);

    Tensor *lp = tensor_log_softmax(logits, 1);
    assert_same(nn_loss(ce, logits, tgt), tensor_cross_entropy(logits, tgt, &ca));
    assert_same(nn_loss(ce_def, logits, tgt), tensor_cross_entropy(logits, tgt, NULL));
    assert_same(nn_loss(nll, lp, tgt), tensor_nll_loss(lp, tgt, &ca));
    /* ignore_index 1 and the weights matter: not the unweighted value */
    Tensor *plain = tensor_cross_entropy(logits, tgt, NULL);
    ck_assert(fabs(tensor_item(nn_loss(ce, logits, tgt)) - tensor_item(plain)) > 1e-3);

    Tensor *x = tu_tensor(CT_F64, 2, S34, X), *y = tu_tensor(CT_F64, 2, S34, Y);
    Tensor *prob = tu_rand64(2, s45, 0, 1, 4, false);
    NnLoss *mse = nn_loss_mse(CT_REDUCTION_NONE), *l1 = nn_loss_l1(CT_REDUCTION_SUM);
    NnLoss *sl1 = nn_loss_smooth_l1(CT_REDUCTION_MEAN, 0.5);
    assert_same(nn_loss(mse, x, y), tensor_mse_loss(x, y, CT_REDUCTION_NONE));
    assert_same(nn_loss(l1, x, y), tensor_l1_loss(x, y, CT_REDUCTION_SUM));
    tu_assert_values(nn_loss(sl1, x, y), SL1_B05_mean, 1, 1e-12, 1e-12);
    Tensor *pw2 = tu_tensor(CT_F64, 1, (const int64_t[]){5}, (double[]){1, 2, 3, 0.5, 1});
    assert_same(nn_loss(bce, logits, prob),
                tensor_bce_with_logits(logits, prob, pw2, CT_REDUCTION_MEAN));

    ck_assert_str_eq(nn_loss_name(ce), "CrossEntropyLoss");
    ck_assert_str_eq(nn_loss_name(nll), "NLLLoss");
    ck_assert_str_eq(nn_loss_name(mse), "MSELoss");
    ck_assert_str_eq(nn_loss_name(l1), "L1Loss");
    ck_assert_str_eq(nn_loss_name(sl1), "SmoothL1Loss");
    ck_assert_str_eq(nn_loss_name(bce), "BCEWithLogitsLoss");

    NnLoss *all[] = {ce, ce_def, nll, bce, mse, l1, sl1};
    for (int i = 0; i < 7; i++) nn_loss_free(all[i]);
    nn_loss_free(NULL);
    Tensor *own[] = {logits, x, y, prob, pw2};
    for (int i = 0; i < 5; i++) tensor_free(own[i]);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_loss_object_gradient)
{
    /* a loss object is differentiable like its function */
    TU_MEM_BEGIN;
    Tensor *x = tu_rand64(2, S34, -.5, .5, 5, true),
           *y = tu_rand64(2, S34, -.4, .4, 6, false);
    NnLoss *l = nn_loss_smooth_l1(CT_REDUCTION_SUM, 1.0);
    CtScope *s = ct_scope_open();
    ck_assert_int_eq(tensor_backward(nn_loss(l, x, y), NULL), CT_OK);
    ct_scope_close(s);
    /* |d| < 1 everywhere: the gradient is d / beta */
    double xv[12], yv[12], want[12];
    tensor_copy_to_host(x, xv, CT_F64);
    tensor_copy_to_host(y, yv, CT_F64);
    for (int i = 0; i < 12; i++) want[i] = xv[i] - yv[i];
    tu_assert_values(tensor_grad(x), want, 12, 1e-12, 1e-12);
    nn_loss_free(l);
    tensor_free(x);
    tensor_free(y);
    TU_MEM_END;
}
END_TEST

START_TEST(test_loss_objects_bad_input)
{
    ck_assert_ptr_null(nn_loss_mse((CtReduction)9));
    tu_assert_error(CT_ERR_INVALID, "MSELoss: unknown reduction 9");
    ck_assert_ptr_null(nn_loss_smooth_l1(CT_REDUCTION_MEAN, -0.5));
    tu_assert_error(CT_ERR_INVALID, "SmoothL1Loss: beta must be >= 0");
    CtCrossEntropyArgs a = {.label_smoothing = 1.5};
    ck_assert_ptr_null(nn_loss_cross_entropy(&a));
    tu_assert_error(CT_ERR_INVALID, "CrossEntropyLoss: label_smoothing 1.5");
    ck_assert_ptr_null(nn_loss(NULL, NULL, NULL));
    tu_assert_error(CT_ERR_NULL, "nn_loss: NULL loss");
    ck_assert_str_eq(nn_loss_name(NULL), "(null)");
    /* a shape error names the wrapped op */
    CtScope *s = ct_scope_open();
    NnLoss *l = nn_loss_mse(CT_REDUCTION_MEAN);
    Tensor *a3 = tensor_zeros(1, (const int64_t[]){3}, CT_F32, ct_cpu());
    Tensor *a4 = tensor_zeros(1, (const int64_t[]){4}, CT_F32, ct_cpu());
    ck_assert_ptr_null(nn_loss(l, a3, a4));
    tu_assert_error(CT_ERR_SHAPE, "mse_loss");
    nn_loss_free(l);
    ct_scope_close(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nn_loss");
    TCase *tc = tcase_create("loss");
    tcase_add_test(tc, test_smooth_l1_values);
    tcase_add_test(tc, test_smooth_l1_no_scope);
    tcase_add_test(tc, test_smooth_l1_gradcheck);
    tcase_add_test(tc, test_smooth_l1_bad_input);
    tcase_add_test(tc, test_loss_objects_match_functions);
    tcase_add_test(tc, test_loss_object_gradient);
    tcase_add_test(tc, test_loss_objects_bad_input);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
