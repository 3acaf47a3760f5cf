/* MATMUL through cuBLAS (cublasGemmStridedBatchedEx; arguments from
 * gemm_desc.h): f32 and f64 natively, bf16 and f16 with f32 accumulation.
 * f32 uses full-precision FMA, not TF32 (no opt-in flag is exposed yet).
 * f32 under autocast (CtMatmulParams.autocast bf16 / f16) runs on the tensor
 * cores with CUBLAS_COMPUTE_32F_FAST_16BF / _16F: the operands are rounded
 * to the low precision and the products accumulated in f32, C stays f32. */
#include "common.cuh"
#include "gemm_desc.h"

static cudaDataType_t cuda_type(CtDType dt)
{
    switch (dt) {
    case CT_F64: return CUDA_R_64F;
    case CT_BF16: return CUDA_R_16BF;
    case CT_F16: return CUDA_R_16F;
    default: return CUDA_R_32F;
    }
}

static cublasComputeType_t compute_type(CtGemmCompute c)
{
    switch (c) {
    case CT_GEMM_COMPUTE_64F: return CUBLAS_COMPUTE_64F;
    case CT_GEMM_COMPUTE_32F_FAST_TF32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    default: return CUBLAS_COMPUTE_32F;
    }
}

static cublasOperation_t op(CtGemmOp o)
{
    return o == CT_GEMM_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
}

/* f32 under autocast: the tensor-core compute type of the low precision. */
static cublasComputeType_t autocast_compute(CtDType autocast, cublasComputeType_t dflt)
{
    if (autocast == CT_BF16) return CUBLAS_COMPUTE_32F_FAST_16BF;
    if (autocast == CT_F16) return CUBLAS_COMPUTE_32F_FAST_16F;
    return dflt;
}

static CtStatus cuda_matmul(const CtOpCall *call)
{
    const CtMatmulParams *p = (const CtMatmulParams *)call->params;
    Tensor *out = call->out[0];
    const void *A = ct_ptr(call->in[0]), *B = ct_ptr(call->in[1]);
    void *C = ct_ptr(out);
    if (p->batch == 0 || p->m == 0 || p->n == 0) return CT_OK;
    CtGemmDesc g = {};
    CT_RETURN_IF_ERROR(ct_gemm_desc(p, out->dtype, false, &g));
    CtCudaCtx *c;
    cublasHandle_t h;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    CT_RETURN_IF_ERROR(ct_cuda_blas(c, &h));
    float alpha32 = (float)p->alpha, beta32 = (float)p->beta;
    double alpha64 = p->alpha, beta64 = p->beta;
    const void *alpha = g.scale_f64 ? (const void *)&alpha64 : (const void *)&alpha32;
    const void *beta = g.scale_f64 ? (const void *)&beta64 : (const void *)&beta32;
    cudaDataType_t t = cuda_type(g.dtype);
    /* cuBLAS's A is our B (gemm_desc.h) */
    CT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        h, op(g.op_a), op(g.op_b), g.m, g.n, g.k, alpha, B, t, g.lda, g.stride_a, A, t,
        g.ldb, g.stride_b, beta, C, t, g.ldc, g.stride_c, g.batch,
        autocast_compute(p->autocast, compute_type(g.compute)), CUBLAS_GEMM_DEFAULT));
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
