/* The cuBLAS GEMM arguments (tensor/cuda/gemm_desc.h) against hand-computed
 * expectations: row-major operands swapped into cuBLAS's column-major
 * terms, transposes, leading dims, batch strides, compute type per dtype,
 * and the errors. Runs in every build (no CUDA needed). */
#include <limits.h>

#include "tensor/cuda/gemm_desc.h"
#include "testutil.h"

static CtGemmDesc desc(CtMatmulParams p, CtDType dt, bool tf32)
{
    CtGemmDesc g;
    memset(&g, 0xff, sizeof g);
    ck_assert_int_eq(ct_gemm_desc(&p, dt, tf32, &g), CT_OK);
    return g;
}

START_TEST(test_plain_and_transposed)
{
    /* C(2,3) = A(2,4)·B(4,3): cuBLAS computes Cᵀ(3,2) = Bᵀ·Aᵀ */
    CtGemmDesc g = desc((CtMatmulParams){.batch = 1, .m = 2, .n = 3, .k = 4, .alpha = 1},
                        CT_F32, false);
    ck_assert_int_eq(g.op_a, CT_GEMM_OP_N);
    ck_assert_int_eq(g.op_b, CT_GEMM_OP_N);
    ck_assert_int_eq(g.m, 3);
    ck_assert_int_eq(g.n, 2);
    ck_assert_int_eq(g.k, 4);
    ck_assert_int_eq(g.lda, 3); /* row length of B */
    ck_assert_int_eq(g.ldb, 4); /* row length of A */
    ck_assert_int_eq(g.ldc, 3);
    ck_assert_int_eq(g.batch, 1);
    /* A stored (4,2) and B stored (3,4), both transposed */
    g = desc(
        (CtMatmulParams){
            .batch = 1, .m = 2, .n = 3, .k = 4, .trans_a = true, .trans_b = true},
        CT_F32, false);
    ck_assert_int_eq(g.op_a, CT_GEMM_OP_T); /* cuBLAS's A is our B */
    ck_assert_int_eq(g.op_b, CT_GEMM_OP_T);
    ck_assert_int_eq(g.lda, 4);
    ck_assert_int_eq(g.ldb, 2);
    ck_assert_int_eq(g.ldc, 3);
    /* only A transposed */
    g = desc((CtMatmulParams){.batch = 1, .m = 2, .n = 3, .k = 4, .trans_a = true},
             CT_F32, false);
    ck_assert_int_eq(g.op_a, CT_GEMM_OP_N);
    ck_assert_int_eq(g.op_b, CT_GEMM_OP_T);
    ck_assert_int_eq(g.lda, 3);
    ck_assert_int_eq(g.ldb, 2);
}
END_TEST

START_TEST(test_batch_strides_and_empty)
{
    CtGemmDesc g = desc((CtMatmulParams){.batch = 5,
                                         .m = 2,
                                         .n = 3,
                                         .k = 4,
                                         .stride_a = 8,
                                         .stride_b = 0,
                                         .stride_c = 6},
                        CT_F64, false);
    ck_assert_int_eq(g.batch, 5);
    ck_assert_int_eq(g.stride_a, 0); /* B broadcast over the batch */
    ck_assert_int_eq(g.stride_b, 8);
    ck_assert_int_eq(g.stride_c, 6);
    /* empty: leading dims stay >= 1 */
    g = desc((CtMatmulParams){.batch = 1, .m = 2, .n = 0, .k = 0}, CT_F32, false);
    ck_assert_int_eq(g.m, 0);
    ck_assert_int_eq(g.lda, 1);
    ck_assert_int_eq(g.ldb, 1);
    ck_assert_int_eq(g.ldc, 1);
}
END_TEST

START_TEST(test_compute_type_per_dtype)
{
    CtMatmulParams p = {.batch = 1, .m = 1, .n = 1, .k = 1};
    CtGemmDesc g = desc(p, CT_F32, false);
    ck_assert_int_eq(g.compute, CT_GEMM_COMPUTE_32F);
    ck_assert(!g.scale_f64);
    ck_assert_int_eq(desc(p, CT_F32, true).compute, CT_GEMM_COMPUTE_32F_FAST_TF32);
    g = desc(p, CT_F64, true);
    ck_assert_int_eq(g.compute, CT_GEMM_COMPUTE_64F);
    ck_assert(g.scale_f64);
    for (CtDType dt = CT_BF16; dt <= CT_F16; dt++) {
        g = desc(p, dt, true); /* TF32 concerns f32 inputs only */
        ck_assert_int_eq(g.compute, CT_GEMM_COMPUTE_32F);
        ck_assert_int_eq(g.dtype, dt);
        ck_assert(!g.scale_f64);
    }
}
END_TEST

START_TEST(test_errors)
{
    CtGemmDesc g;
    CtMatmulParams big = {.batch = 1, .m = 2, .n = 3, .k = (int64_t)INT_MAX + 1};
    ck_assert_int_eq(ct_gemm_desc(&big, CT_F32, false, &g), CT_ERR_UNSUPPORTED);
    tu_assert_error(
        CT_ERR_UNSUPPORTED,
        "matmul: sizes batch 1, m 2, n 3, k 2147483648 exceed cuBLAS's 32-bit "
        "limits on cuda");
    CtMatmulParams p = {.batch = 1, .m = 1, .n = 1, .k = 1};
    ck_assert_int_eq(ct_gemm_desc(&p, CT_I32, false, &g), CT_ERR_DTYPE);
    tu_assert_error(CT_ERR_DTYPE, "matmul: cuBLAS has no GEMM for i32 on cuda");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor_gemm_desc");
    TCase *tc = tcase_create("gemm_desc");
    tcase_add_test(tc, test_plain_and_transposed);
    tcase_add_test(tc, test_batch_strides_and_empty);
    tcase_add_test(tc, test_compute_type_per_dtype);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
