/* MATMUL through cuBLAS: f32 and f64 natively, bf16 and f16 with f32
 * accumulation (cublasGemmStridedBatchedEx, CUBLAS_COMPUTE_32F). f32 uses
 * full-precision FMA, not TF32: cuBLAS's default math mode. f32 under
 * autocast (CtMatmulParams.autocast bf16 / f16) runs on the tensor cores
 * with CUBLAS_COMPUTE_32F_FAST_16BF / _16F: the operands are rounded to the
 * low precision and the products accumulated in f32, C stays f32. */
#include <limits.h>

#include "common.cuh"

/* CtMatmulParams describes row-major matrices; cuBLAS is column-major. A
 * row-major (r, c) matrix is the column-major (c, r) matrix of its transpose,
 * so C = op(A)·op(B) is computed as Cᵀ = op(B)ᵀ·op(A)ᵀ: cuBLAS's "A" is our B
 * and its "B" is our A, with the same transpose flags, M = n, N = m, and
 * leading dimensions the row lengths of the stored matrices. */
typedef struct Gemm {
    cublasOperation_t op_a, op_b; /* cuBLAS's operands: ours swapped */
    int m, n, k;
    int lda, ldb, ldc;
    long long stride_a, stride_b, stride_c;
    int batch;
} Gemm;

static bool fits_int(int64_t v)
{
    return v >= 0 && v <= INT_MAX;
}

static CtStatus gemm_setup(const CtMatmulParams *p, Gemm *g)
{
    int64_t lda = p->trans_b ? p->k : p->n; /* row length of stored B */
    int64_t ldb = p->trans_a ? p->m : p->k; /* row length of stored A */
    if (!fits_int(p->m) || !fits_int(p->n) || !fits_int(p->k) || !fits_int(p->batch))
        return ct_error(CT_ERR_UNSUPPORTED,
                        "matmul: sizes batch %lld, m %lld, n %lld, k %lld exceed "
                        "cuBLAS's 32-bit limits on cuda",
                        (long long)p->batch, (long long)p->m, (long long)p->n,
                        (long long)p->k);
    g->op_a = p->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    g->op_b = p->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    g->m = (int)p->n;
    g->n = (int)p->m;
    g->k = (int)p->k;
    /* cuBLAS requires ld >= 1 even for empty matrices */
    g->lda = (int)(lda > 0 ? lda : 1);
    g->ldb = (int)(ldb > 0 ? ldb : 1);
    g->ldc = (int)(p->n > 0 ? p->n : 1);
    g->stride_a = p->stride_b;
    g->stride_b = p->stride_a;
    g->stride_c = p->stride_c;
    g->batch = (int)p->batch;
    return CT_OK;
}

static cudaDataType_t cuda_type(CtDType dt)
{
    return dt == CT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

static CtStatus cuda_matmul(const CtOpCall *call)
{
    const CtMatmulParams *p = (const CtMatmulParams *)call->params;
    Tensor *out = call->out[0];
    const void *A = ct_ptr(call->in[0]), *B = ct_ptr(call->in[1]);
    void *C = ct_ptr(out);
    if (p->batch == 0 || p->m == 0 || p->n == 0) return CT_OK;
    Gemm g = {};
    CT_RETURN_IF_ERROR(gemm_setup(p, &g));
    CtCudaCtx *c;
    cublasHandle_t h;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    CT_RETURN_IF_ERROR(ct_cuda_blas(c, &h));
    if (p->autocast == CT_BF16 || p->autocast == CT_F16) {
        float alpha = (float)p->alpha, beta = (float)p->beta;
        cublasComputeType_t ct = p->autocast == CT_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                                        : CUBLAS_COMPUTE_32F_FAST_16F;
        CT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
            h, g.op_a, g.op_b, g.m, g.n, g.k, &alpha, B, CUDA_R_32F, g.lda, g.stride_a, A,
            CUDA_R_32F, g.ldb, g.stride_b, &beta, C, CUDA_R_32F, g.ldc, g.stride_c,
            g.batch, ct, CUBLAS_GEMM_DEFAULT));
        if (ct_cuda_sync_mode()) CT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
        return CT_OK;
    }
    switch (out->dtype) {
    case CT_F32: {
        float alpha = (float)p->alpha, beta = (float)p->beta;
        CT_CUBLAS_CHECK(cublasSgemmStridedBatched(
            h, g.op_a, g.op_b, g.m, g.n, g.k, &alpha, (const float *)B, g.lda, g.stride_a,
            (const float *)A, g.ldb, g.stride_b, &beta, (float *)C, g.ldc, g.stride_c,
            g.batch));
        break;
    }
    case CT_F64: {
        double alpha = p->alpha, beta = p->beta;
        CT_CUBLAS_CHECK(cublasDgemmStridedBatched(
            h, g.op_a, g.op_b, g.m, g.n, g.k, &alpha, (const double *)B, g.lda,
            g.stride_a, (const double *)A, g.ldb, g.stride_b, &beta, (double *)C, g.ldc,
            g.stride_c, g.batch));
        break;
    }
    default: { /* bf16, f16: f32 scalars and accumulation */
        float alpha = (float)p->alpha, beta = (float)p->beta;
        cudaDataType_t t = cuda_type(out->dtype);
        CT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
            h, g.op_a, g.op_b, g.m, g.n, g.k, &alpha, B, t, g.lda, g.stride_a, A, t,
            g.ldb, g.stride_b, &beta, C, t, g.ldc, g.stride_c, g.batch,
            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        break;
    }
    }
    if (ct_cuda_sync_mode()) CT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return CT_OK;
}

/* A, B and C of one dtype among f32, f64, bf16, f16; f32 under autocast. */
static bool cuda_matmul_supports(const CtOpCall *call)
{
    const CtMatmulParams *p = (const CtMatmulParams *)call->params;
    CtDType dt = call->out[0]->dtype;
    if (p->autocast != CT_F32 && dt != CT_F32) return false;
    if (dt != CT_F32 && dt != CT_F64 && dt != CT_BF16 && dt != CT_F16) return false;
    return call->in[0]->dtype == dt && call->in[1]->dtype == dt;
}

void ct_cuda_register_matmul(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_MATMUL] = cuda_matmul;
    s[CT_OP_MATMUL] = cuda_matmul_supports;
}
