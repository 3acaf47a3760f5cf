/* Edge cases where PyTorch 1.13's behaviour is the contract, each found by
 * differential testing against it: log_softmax and cross-entropy of large
 * logits, empty tensors (contiguous, random fills, reduction and product
 * gradients), integer scalars out of range, copies into expanded views,
 * Python slice bounds, and errors that name what is wrong. */
#include <math.h>

#include "testutil.h"

static Tensor *f32(int nd, const int64_t *shape, const double *v, bool grad)
{
    Tensor *t = tu_tensor(CT_F32, nd, shape, v);
    ck_assert_ptr_nonnull(t);
    if (grad) ck_assert_int_eq(tensor_set_requires_grad(t, true), CT_OK);
    return t;
}

/* torch.log_softmax(tensor([[1e8, 1e8]]), 1) = [-ln 2, -ln 2], gradient of
 * y[0] [0.5, -0.5]; cross_entropy with target 0 = ln 2; in f64 the same
 * with 1e30, along a dim that is not the last too. */
START_TEST(test_log_softmax_large_logits)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const double ln2 = log(2.0);
    Tensor *x = f32(2, (const int64_t[]){1, 2}, (const double[]){1e8, 1e8}, true);
    Tensor *y = tensor_log_softmax(x, 1);
    tu_assert_values(y, ((const double[]){-ln2, -ln2}), 2, 1e-6, 0);
    Tensor *g = f32(2, (const int64_t[]){1, 2}, (const double[]){1, 0}, false);
    ck_assert_int_eq(tensor_backward(y, g), CT_OK);
    tu_assert_values(tensor_grad(x), ((const double[]){0.5, -0.5}), 2, 1e-6, 0);
    Tensor *t = tu_tensor(CT_I64, 1, (const int64_t[]){1}, (const double[]){0});
    Tensor *l = tensor_cross_entropy(tensor_detach(x), t, NULL);
    tu_assert_values(l, &ln2, 1, 1e-6, 0);
    CtCrossEntropyArgs smooth = {.label_smoothing = 0.2};
    tu_assert_values(tensor_cross_entropy(tensor_detach(x), t, &smooth), &ln2, 1, 1e-6,
                     0);
    Tensor *d =
        tu_tensor(CT_F64, 2, (const int64_t[]){3, 1}, (const double[]){1e30, 1e30, 1});
    tu_assert_values(tensor_log_softmax(d, 0), ((const double[]){-ln2, -ln2, -1e30}), 3,
                     1e-12, 1e-12);
    ct_scope_close(s);
    tensor_free(x);
    tensor_free(g);
    tensor_free(t);
    tensor_free(d);
    TU_MEM_END;
}
END_TEST

/* torch's ReLU passes the gradient at a NaN input (its backward masks by
 * result <= 0): relu, add_relu and linear_relu alike. */
START_TEST(test_relu_grad_at_nan)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const int64_t n4[] = {4};
    Tensor *x = f32(1, n4, (const double[]){NAN, 1, -1, 0}, true);
    Tensor *z = f32(1, n4, (const double[]){0, 0, 0, 0}, false);
    const double pass[] = {1, 1, 0, 0};
    ck_assert_int_eq(tensor_backward(tensor_sum_all(tensor_relu(x)), NULL), CT_OK);
    tu_assert_values(tensor_grad(x), pass, 4, 0, 0);
    ck_assert_int_eq(tensor_set_grad(x, NULL), CT_OK);
    ck_assert_int_eq(tensor_backward(tensor_sum_all(tensor_add_relu(x, z)), NULL), CT_OK);
    tu_assert_values(tensor_grad(x), pass, 4, 0, 0);
    Tensor *in = f32(2, (const int64_t[]){1, 1}, (const double[]){1}, false);
    Tensor *w = f32(2, (const int64_t[]){2, 1}, (const double[]){NAN, 2}, false);
    Tensor *b = f32(1, (const int64_t[]){2}, (const double[]){0, -3}, true);
    ck_assert_int_eq(tensor_backward(tensor_sum_all(tensor_linear_relu(in, w, b)), NULL),
                     CT_OK);
    tu_assert_values(tensor_grad(b), ((const double[]){1, 0}), 2, 0, 0);
    ct_scope_close(s);
    tensor_free(x);
    tensor_free(z);
    tensor_free(in);
    tensor_free(w);
    tensor_free(b);
    TU_MEM_END;
}
END_TEST

/* torch.tensor(3.).squeeze(0), .squeeze(-1) and .transpose(0, -1) are 0-d
 * views; dim 1 is out of range. */
START_TEST(test_scalar_squeeze_transpose)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *x = tensor_full(0, (const int64_t[]){1}, 3.0, CT_F32, ct_cpu());
    Tensor *v[] = {tensor_squeeze(x, 0), tensor_squeeze(x, -1),
                   tensor_transpose(x, 0, -1)};
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(v[i] != NULL, "%d: %s", i, ct_last_error());
        ck_assert_int_eq(tensor_ndim(v[i]), 0);
        tu_assert_values(v[i], ((const double[]){3}), 1, 0, 0);
    }
    ck_assert_ptr_null(tensor_squeeze(x, 1));
    tu_assert_error(CT_ERR_SHAPE, "squeeze: dim 1 out of range for a 0-d tensor");
    ck_assert_ptr_null(tensor_transpose(x, 0, -2));
    tu_assert_error(CT_ERR_SHAPE, "transpose: dim -2 out of range for a 0-d tensor");
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* F.cross_entropy(x, t, ...) with class probabilities t, f64, x and t of
 * shape (2, 3, 2) requiring grad, backward of the summed loss:
 * x = [[[.5, -1], [2, .25], [-.5, 1.5]], [[1, 0], [-2, 3], [.75, -.25]]],
 * t = [[[.2, .5], [.3, .25], [.5, .25]], [[1, 0], [0, .6], [0, .4]]],
 * weight [1, 2, .5]. */
static const struct {
    const char *name;
    CtCrossEntropyArgs args;
    int n;
    double loss[4], gx[12], gt[12];
} SOFT_CE[] = {
    {"defaults",
     {.reduction = CT_REDUCTION_MEAN},
     1,
     {1.420262415126},
     {-0.007261804951, -0.110005551171, 0.116539301639, -0.010164231129, -0.109277496689,
      0.120169782301, -0.113282477895, 0.01143414465, 0.00680676462, 0.079660934544,
      0.106475713275, -0.091095079193},
     {0.441591974952, 0.703445215834, 0.066591974952, 0.390945215834, 0.691591974952,
      0.078445215834, 0.150886000771, 0.771214223568, 0.900886000771, 0.021214223568,
      0.213386000771, 0.833714223568}},
    {"weight, label_smoothing .1",
     {.reduction = CT_REDUCTION_MEAN, .label_smoothing = 0.1},
     1,
     {1.272298551517},
     {-0.007959616256, -0.103902101531, 0.05168422524, -0.070070860984, -0.043724608984,
      0.173972962515, -0.09433718586, 0.007407672468, -0.00974645597, 0.029499886555,
      0.10408364183, -0.036907559023},
     {0.397432777457, 0.633100694251, 0.119865554913, 0.703701388502, 0.311216388728,
      0.035300347125, 0.135797400694, 0.694092801212, 1.621594801389, 0.038185602423,
      0.096023700347, 0.375171400606}},
    {"weight, sum",
     {.reduction = CT_REDUCTION_SUM},
     1,
     {4.805033421121},
     {-0.020499580792, -0.43252498027, 0.204465066884, -0.264489040083, -0.183965486092,
      0.697014020353, -0.45312991158, 0.064031210037, 0.02722705848, 0.086101233444,
      0.4259028531, -0.150132443482},
     {1.766367899807, 2.813780863337, 0.532735799614, 3.127561726675, 1.383183949904,
      0.156890431669, 0.603544003086, 3.084856894274, 7.207088006172, 0.169713788548,
      0.426772001543, 1.667428447137}},
    {"label_smoothing .3, none",
     {.reduction = CT_REDUCTION_NONE, .label_smoothing = 0.3},
     4,
     {1.751367899807, 1.782530863337, 0.928544003086, 1.619856894274},
     {-0.069047219802, -0.390022204685, 0.456157206556, -0.065656924518, -0.387109986754,
      0.455679129203, -0.25312991158, -0.054263421402, -0.07277294152, 0.398643738175,
      0.3259028531, -0.344380316773},
     {1.236457529865, 1.969646604336, 0.186457529865, 1.094646604336, 1.936457529865,
      0.219646604336, 0.42248080216, 2.159399825992, 2.52248080216, 0.059399825992,
      0.59748080216, 2.334399825992}},
};

START_TEST(test_cross_entropy_class_probabilities)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const int64_t shape[] = {2, 3, 2};
    const double xv[] = {.5, -1, 2, .25, -.5, 1.5, 1, 0, -2, 3, .75, -.25};
    const double tv[] = {.2, .5, .3, .25, .5, .25, 1, 0, 0, .6, 0, .4};
    Tensor *w = tu_tensor(CT_F64, 1, (const int64_t[]){3}, (const double[]){1, 2, .5});
    for (size_t i = 0; i < sizeof SOFT_CE / sizeof SOFT_CE[0]; i++) {
        Tensor *x = tu_tensor(CT_F64, 3, shape, xv), *t = tu_tensor(CT_F64, 3, shape, tv);
        ck_assert_int_eq(tensor_set_requires_grad(x, true), CT_OK);
        ck_assert_int_eq(tensor_set_requires_grad(t, true), CT_OK);
        CtCrossEntropyArgs a = SOFT_CE[i].args;
        if (strstr(SOFT_CE[i].name, "weight")) a.weight = w;
        Tensor *l = tensor_cross_entropy(x, t, &a);
        ck_assert_msg(l != NULL, "%s: %s", SOFT_CE[i].name, ct_last_error());
        tu_assert_values(l, SOFT_CE[i].loss, SOFT_CE[i].n, 1e-11, 1e-11);
        ck_assert_int_eq(tensor_backward(tensor_sum_all(l), NULL), CT_OK);
        tu_assert_values(tensor_grad(x), SOFT_CE[i].gx, 12, 1e-11, 1e-11);
        tu_assert_values(tensor_grad(t), SOFT_CE[i].gt, 12, 1e-11, 1e-11);
        tensor_free(x);
        tensor_free(t);
    }
    Tensor *x = tu_tensor(CT_F32, 2, (const int64_t[]){2, 3}, xv);
    Tensor *t = tu_tensor(CT_F32, 2, (const int64_t[]){2, 3}, tv);
    CtCrossEntropyArgs ii = {.use_ignore_index = true, .ignore_index = 0};
    ck_assert_ptr_null(tensor_cross_entropy(x, t, &ii));
    tu_assert_error(CT_ERR_INVALID,
                    "ignore_index 0 is not supported with class-probability");
    ii.ignore_index = -1;
    ck_assert_ptr_nonnull(tensor_cross_entropy(x, t, &ii));
    ck_assert_ptr_null(tensor_cross_entropy(x, tensor_cast(t, CT_F64), NULL));
    tu_assert_error(CT_ERR_DTYPE, "cross_entropy");
    ck_assert_ptr_null(tensor_cross_entropy(x, tensor_slice(t, 1, 0, 2, 1), NULL));
    tu_assert_error(CT_ERR_SHAPE, "cross_entropy");
    ck_assert_ptr_null(tensor_nll_loss(x, t, NULL));
    tu_assert_error(CT_ERR_DTYPE, "nll_loss: target must hold i64 class indices");
    ct_scope_close(s);
    tensor_free(x);
    tensor_free(t);
    tensor_free(w);
    TU_MEM_END;
}
END_TEST

/* Training batch norm updates its running statistics in place: an
 * expanded running_var (one element behind three) is refused, unchanged,
 * as PyTorch refuses writing to it. */
START_TEST(test_batch_norm_running_stats_writable)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *x = tensor_arange(0, 12, 1, CT_F32, ct_cpu());
    x = tensor_reshape(x, 2, (const int64_t[]){4, 3});
    Tensor *rm = tensor_zeros(1, (const int64_t[]){3}, CT_F32, ct_cpu());
    Tensor *rv = tensor_expand(tensor_ones(1, (const int64_t[]){1}, CT_F32, ct_cpu()), 1,
                               (const int64_t[]){3});
    ck_assert_ptr_null(tensor_batch_norm(x, rm, rv, NULL, NULL, true, 0.1, 1e-5));
    tu_assert_error(CT_ERR_SHAPE, "batch_norm: running_mean and running_var are updated "
                                  "in place and must be contiguous");
    tu_assert_values(rm, ((const double[]){0, 0, 0}), 3, 0, 0);
    tu_assert_values(rv, ((const double[]){1, 1, 1}), 3, 0, 0);
    /* evaluation only reads them */
    ck_assert_ptr_nonnull(tensor_batch_norm(x, rm, rv, NULL, NULL, false, 0.1, 1e-5));
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* torch.zeros(2, 0, 3) is contiguous, and rand, dropout, max's backward
 * and a batched product's backward work on such tensors. */
START_TEST(test_empty_tensors)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const int64_t shape[3] = {2, 0, 3};
    Tensor *x = tensor_zeros(3, shape, CT_F32, ct_cpu());
    ck_assert(tensor_is_contiguous(x));
    ck_assert(tensor_is_contiguous(tensor_transpose(x, 0, 2)));
    CtGenerator gen = ct_generator(1, 0);
    tu_assert_shape(tensor_rand(&gen, 3, shape, CT_F32, ct_cpu()), 3, 2, 0, 3);
    tu_assert_shape(tensor_dropout(x, 0.5, true, &gen), 3, 2, 0, 3);
    ck_assert_int_eq(tensor_set_requires_grad(x, true), CT_OK);
    Tensor *m = tensor_max(x, 1, (const int[]){-1}, false);
    ck_assert_int_eq(
        tensor_backward(m, tensor_zeros(2, (const int64_t[]){2, 0}, CT_F32, ct_cpu())),
        CT_OK);
    tu_assert_shape(tensor_grad(x), 3, 2, 0, 3);
    /* (2, 3, k) @ (k, n) with k or n 0 */
    for (int c = 0; c < 2; c++) {
        int64_t k = c ? 0 : 4, n = c ? 5 : 0;
        Tensor *a = tensor_ones(3, (const int64_t[]){2, 3, k}, CT_F32, ct_cpu());
        Tensor *b = tensor_ones(2, (const int64_t[]){k, n}, CT_F32, ct_cpu());
        tensor_set_requires_grad(a, true);
        tensor_set_requires_grad(b, true);
        Tensor *y = tensor_matmul(a, b);
        ck_assert_msg(tensor_backward(y, tensor_ones(3, (const int64_t[]){2, 3, n},
                                                     CT_F32, ct_cpu())) == CT_OK,
                      "%s", ct_last_error());
        tu_assert_shape(tensor_grad(a), 3, 2, 3, k);
        tu_assert_shape(tensor_grad(b), 2, k, n);
        double zeros[8] = {0};
        if (!c) tu_assert_values(tensor_grad(b), zeros, 0, 0, 0);
    }
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* An integer tensor refuses a scalar it cannot hold, as torch does
 * ("value cannot be converted to type int32_t without overflow"); clamp
 * bounds outside the range are fine. */
START_TEST(test_integer_scalars_must_fit)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *a = tensor_full(1, (const int64_t[]){2}, 3, CT_I32, ct_cpu());
    ck_assert_ptr_null(tensor_add_scalar(a, 1e30));
    tu_assert_error(CT_ERR_INVALID, "add_scalar: scalar 1e+30 does not fit i32[2] cpu");
    ck_assert_ptr_null(tensor_mul_scalar(a, 4294967296.0));
    tu_assert_error(CT_ERR_INVALID, "does not fit");
    tu_assert_values(tensor_clamp(a, -1e30, 1e30), ((const double[]){3, 3}), 2, 0, 0);
    ck_assert_ptr_null(tensor_full(1, (const int64_t[]){2}, 3e9, CT_I32, ct_cpu()));
    tu_assert_error(CT_ERR_INVALID, "tensor_fill_: value 3e+09 does not fit i32[2] cpu");
    tu_assert_values(tensor_full(1, (const int64_t[]){1}, 2.5, CT_I32, ct_cpu()),
                     ((const double[]){2}), 1, 0, 0); /* truncated, as torch.full */
    Tensor *u = tensor_zeros(1, (const int64_t[]){2}, CT_U8, ct_cpu());
    Tensor *mask = tensor_ones(1, (const int64_t[]){2}, CT_BOOL, ct_cpu());
    ck_assert_ptr_null(tensor_masked_fill(u, mask, 300));
    tu_assert_error(CT_ERR_INVALID, "masked_fill: value 300 does not fit u8[2] cpu");
    ck_assert_ptr_null(tensor_masked_fill(u, mask, -1));
    tu_assert_error(CT_ERR_INVALID, "does not fit");
    tu_assert_values(tensor_masked_fill(u, mask, 255), ((const double[]){255, 255}), 2, 0,
                     0);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* A copy into an expanded view is refused (its elements share memory);
 * slices take Python's bounds. */
START_TEST(test_copy_into_expanded_and_slices)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *row = tensor_zeros(2, (const int64_t[]){1, 3}, CT_F32, ct_cpu());
    Tensor *e = tensor_expand(row, 2, (const int64_t[]){2, 3});
    Tensor *src = tensor_ones(2, (const int64_t[]){2, 3}, CT_F32, ct_cpu());
    ck_assert_int_eq(tensor_copy_(e, src), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "tensor_copy_: elements of the destination f32[2, 3] "
                                    "cpu share memory (dim 0 is expanded)");
    Tensor *x = tensor_arange(0, 3, 1, CT_F32, ct_cpu());
    tu_assert_shape(tensor_slice(x, 0, 5, 9, 1), 1, 0);  /* x[5:9] */
    tu_assert_shape(tensor_slice(x, 0, 2, 1, 1), 1, 0);  /* x[2:1] */
    tu_assert_shape(tensor_slice(x, 0, -9, 2, 1), 1, 2); /* x[-9:2] */
    tu_assert_values(tensor_slice(x, 0, -2, 99, 1), ((const double[]){1, 2}), 2, 0, 0);
    ck_assert_ptr_null(tensor_slice(x, 0, 0, 3, 0));
    tu_assert_error(CT_ERR_INVALID, "slice: step 0 must be positive");
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* NULL arguments and unsupported dtypes: errors that say what is wrong. */
START_TEST(test_error_messages)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *x = tensor_zeros(2, (const int64_t[]){2, 3}, CT_F32, ct_cpu());
    ck_assert_ptr_null(tensor_permute(x, NULL));
    tu_assert_error(CT_ERR_NULL, "permute: NULL dims");
    ck_assert_ptr_null(tensor_full(2, NULL, 0, CT_F32, ct_cpu()));
    tu_assert_error(CT_ERR_NULL, "NULL shape for ndim 2");
    ck_assert_ptr_null(tensor_view(x, 2, NULL));
    tu_assert_error(CT_ERR_NULL, "view: NULL shape for ndim 2");
    ck_assert_ptr_null(tensor_cat(1, NULL, 0));
    tu_assert_error(CT_ERR_NULL, "cat: NULL list of 1 tensors");
    ck_assert_int_eq(tensor_copy_to_host(x, NULL, CT_F32), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "tensor_copy_to_host: NULL destination");
    Tensor *u = tensor_zeros(1, (const int64_t[]){2}, CT_U8, ct_cpu());
    ck_assert_ptr_null(tensor_add(u, u));
    tu_assert_error(CT_ERR_UNSUPPORTED, "add: not supported on cpu for u8");
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pytorch_edges");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_log_softmax_large_logits);
    tcase_add_test(tc, test_empty_tensors);
    tcase_add_test(tc, test_relu_grad_at_nan);
    tcase_add_test(tc, test_scalar_squeeze_transpose);
    tcase_add_test(tc, test_cross_entropy_class_probabilities);
    tcase_add_test(tc, test_batch_norm_running_stats_writable);
    tcase_add_test(tc, test_integer_scalars_must_fit);
    tcase_add_test(tc, test_copy_into_expanded_and_slices);
    tcase_add_test(tc, test_error_messages);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
