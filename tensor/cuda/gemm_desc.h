/* Private to tensor/cuda: the argument building of the cuBLAS GEMM call
 * (matmul.cu; lt_desc.h builds cuBLASLt's descriptors on it), as a pure function that
 * names no CUDA type, so it is unit tested on the CPU (tests/tensor/test_gemm_desc.c). C
 * and C++.
 *
 * CtMatmulParams describes row-major matrices; cuBLAS is column-major. A
 * row-major (r, c) matrix is the column-major (c, r) matrix of its
 * transpose, so C = op(A)·op(B) is computed as Cᵀ = op(B)ᵀ·op(A)ᵀ: cuBLAS's
 * "A" is our B and its "B" is our A, with the same transpose flags, M = n,
 * N = m, and leading dimensions the row lengths of the stored matrices.
 */
#ifndef CTRAINER_TENSOR_CUDA_GEMM_DESC_H
#define CTRAINER_TENSOR_CUDA_GEMM_DESC_H

#include <limits.h>

#include "../internal.h"

typedef enum CtGemmOp { CT_GEMM_OP_N, CT_GEMM_OP_T } CtGemmOp;

/* Accumulation: f32 for f32, bf16 and f16 (TF32 tensor cores for f32 only
 * when allowed), f64 for f64. f32 under autocast (CtMatmulParams.autocast
 * bf16 / f16) runs on the tensor cores: the operands are rounded to the low
 * precision and the products accumulated in f32, C stays f32. */
typedef enum CtGemmCompute {
    CT_GEMM_COMPUTE_32F,
    CT_GEMM_COMPUTE_32F_FAST_TF32,
    CT_GEMM_COMPUTE_32F_FAST_16BF,
    CT_GEMM_COMPUTE_32F_FAST_16F,
    CT_GEMM_COMPUTE_64F,
} CtGemmCompute;

/* The compute type of dtype dt (f32 under p->autocast). */
static inline CtGemmCompute ct_gemm_compute(const CtMatmulParams *p, CtDType dt,
                                            bool allow_tf32)
{
    if (dt == CT_F64) return CT_GEMM_COMPUTE_64F;
    if (dt != CT_F32) return CT_GEMM_COMPUTE_32F;
    if (p->autocast == CT_BF16) return CT_GEMM_COMPUTE_32F_FAST_16BF;
    if (p->autocast == CT_F16) return CT_GEMM_COMPUTE_32F_FAST_16F;
    return allow_tf32 ? CT_GEMM_COMPUTE_32F_FAST_TF32 : CT_GEMM_COMPUTE_32F;
}

/* The arguments of one strided-batched GEMM, in cuBLAS's (column-major)
 * terms. */
typedef struct CtGemmDesc {
    CtGemmOp op_a, op_b; /* cuBLAS's operands: ours swapped */
    int m, n, k;
    int lda, ldb, ldc; /* >= 1 even for empty matrices, as cuBLAS requires */
    long long stride_a, stride_b, stride_c;
    int batch;
    CtDType dtype;         /* of A, B and C */
    CtGemmCompute compute; /* accumulation */
    bool scale_f64;        /* alpha and beta are doubles (else floats) */
} CtGemmDesc;

/* Fills g for p over matrices of dtype dt (f32, f64, bf16 or f16).
 * allow_tf32 lets f32 outside autocast use TF32 tensor cores. Records CT_ERR_UNSUPPORTED
 * naming the sizes when one exceeds cuBLAS's 32-bit ints, CT_ERR_DTYPE for
 * another dtype. */
static inline CtStatus ct_gemm_desc(const CtMatmulParams *p, CtDType dt, bool allow_tf32,
                                    CtGemmDesc *g)
{
    if (dt != CT_F32 && dt != CT_F64 && dt != CT_BF16 && dt != CT_F16)
        return ct_error(CT_ERR_DTYPE, "matmul: cuBLAS has no GEMM for %s on cuda",
                        ct_dtype_name(dt));
    int64_t lda = p->trans_b ? p->k : p->n; /* row length of stored B */
    int64_t ldb = p->trans_a ? p->m : p->k; /* row length of stored A */
    const int64_t sizes[4] = {p->batch, p->m, p->n, p->k};
    for (int i = 0; i < 4; i++)
        if (sizes[i] < 0 || sizes[i] > INT_MAX)
            return ct_error(CT_ERR_UNSUPPORTED,
                            "matmul: sizes batch %lld, m %lld, n %lld, k %lld exceed "
                            "cuBLAS's 32-bit limits on cuda",
                            (long long)p->batch, (long long)p->m, (long long)p->n,
                            (long long)p->k);
    g->op_a = p->trans_b ? CT_GEMM_OP_T : CT_GEMM_OP_N;
    g->op_b = p->trans_a ? CT_GEMM_OP_T : CT_GEMM_OP_N;
    g->m = (int)p->n;
    g->n = (int)p->m;
    g->k = (int)p->k;
    g->lda = (int)(lda > 0 ? lda : 1);
    g->ldb = (int)(ldb > 0 ? ldb : 1);
    g->ldc = (int)(p->n > 0 ? p->n : 1);
    g->stride_a = p->stride_b;
    g->stride_b = p->stride_a;
    g->stride_c = p->stride_c;
    g->batch = (int)p->batch;
    g->dtype = dt;
    g->scale_f64 = dt == CT_F64;
    g->compute = ct_gemm_compute(p, dt, allow_tf32);
    return CT_OK;
}

#endif
