/* POOL2D and POOL2D_BWD on CUDA, f32, f64, bf16 and f16: hand kernels (pool_body.h),
 * not cuDNN. cuDNN's pooling cannot carry the op's contract: its max
 * pooling returns no argmax (the forward must hand one to the backward),
 * its backward reads x and y (which the op's backward does not keep), and
 * its include-padding average divides by the whole window where PyTorch
 * (and the CPU kernel) clips a ceil-mode window at the padded edge. The
 * hand kernels give the CPU's bits, and their gather backward needs no
 * atomics, so pooling is deterministic with or without the switch. */
#include "common.cuh"
#include "pool_body.h"

template <int DT, typename T = typename CtHdType<DT>::S>
__global__ void pool_fwd_kernel(CtPool2dParams p, CtPoolDivs dv, const T *x, T *y,
                                int64_t *idx)
{
    ct_pool_fwd_body<DT>(ct_cuda_thread(), p, dv, x, y, idx);
}

template <int DT, typename T = typename CtHdType<DT>::S>
__global__ void pool_bwd_kernel(CtPool2dParams p, CtPoolDivs dv, const T *gy,
                                const int64_t *idx, T *gx)
{
    ct_pool_bwd_body<DT>(ct_cuda_thread(), p, dv, gy, idx, gx);
}

template <int DT> static CtStatus forward(const CtOpCall *call, CtCudaCtx *c)
{
    typedef typename CtHdType<DT>::S T;
    const CtPool2dParams *p = (const CtPool2dParams *)call->params;
    int64_t n = p->n * p->c * p->oh * p->ow;
    if (n == 0) return CT_OK;
    int64_t *idx = call->out[1] ? (int64_t *)ct_ptr(call->out[1]) : NULL;
    pool_fwd_kernel<DT><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(
        *p, ct_pool_divs(p), (const T *)ct_ptr(call->in[0]), (T *)ct_ptr(call->out[0]),
        idx);
    CT_CUDA_CHECK_LAUNCH("pool_fwd_kernel", c->stream);
    return CT_OK;
}

template <int DT> static CtStatus backward(const CtOpCall *call, CtCudaCtx *c)
{
    typedef typename CtHdType<DT>::S T;
    const CtPool2dParams *p = (const CtPool2dParams *)call->params;
    int64_t n = p->n * p->c * p->h * p->w;
    if (n == 0) return CT_OK;
    const int64_t *idx = call->in[1] ? (const int64_t *)ct_ptr(call->in[1]) : NULL;
    pool_bwd_kernel<DT><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(
        *p, ct_pool_divs(p), (const T *)ct_ptr(call->in[0]), idx,
        (T *)ct_ptr(call->out[0]));
    CT_CUDA_CHECK_LAUNCH("pool_bwd_kernel", c->stream);
    return CT_OK;
}

static CtStatus cuda_pool(const CtOpCall *call)
{
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    switch (call->in[0]->dtype) {
    case CT_F64: return forward<CT_F64>(call, c);
    case CT_BF16: return forward<CT_BF16>(call, c);
    case CT_F16: return forward<CT_F16>(call, c);
    default: return forward<CT_F32>(call, c);
    }
}

static CtStatus cuda_pool_bwd(const CtOpCall *call)
{
    const CtPool2dParams *p = (const CtPool2dParams *)call->params;
    if (p->kind == CT_POOL_MAX && !call->in[1])
        return ct_error(CT_ERR_STATE, "pool2d_backward: max pooling needs the argmax");
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    switch (call->out[0]->dtype) {
    case CT_F64: return backward<CT_F64>(call, c);
    case CT_BF16: return backward<CT_BF16>(call, c);
    case CT_F16: return backward<CT_F16>(call, c);
    default: return backward<CT_F32>(call, c);
    }
}

static bool float_only(const CtOpCall *call)
{
    CtDType dt = call->out[0]->dtype;
    return dt == CT_F32 || dt == CT_F64 || dt == CT_BF16 || dt == CT_F16;
}

void ct_cuda_register_pool(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_POOL2D] = cuda_pool;
    k[CT_OP_POOL2D_BWD] = cuda_pool_bwd;
    s[CT_OP_POOL2D] = s[CT_OP_POOL2D_BWD] = float_only;
}
