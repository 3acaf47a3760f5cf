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
    tcase_add_test(tc, test_integer_scalars_must_fit);
    tcase_add_test(tc, test_copy_into_expanded_and_slices);
    tcase_add_test(tc, test_error_messages);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
