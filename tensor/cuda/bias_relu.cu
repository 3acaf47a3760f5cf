/* The ReLU of ReLU-fused convolutions and batch norms, with a
 * convolution's bias: one grid-stride launch over the output in place
 * (bias_relu_body.h). */
#include "bias_relu_body.h"
#include "common.cuh"

template <int DT, typename S = typename CtHdType<DT>::S>
__global__ void bias_relu_kernel(S *y, const S *b, int64_t o, int64_t hw, int64_t n)
{
    ct_bias_relu_thread<DT>(ct_cuda_thread(), y, b, o, hw, n);
}

template <int DT> static CtStatus launch(Tensor *y, const Tensor *b, cudaStream_t stream)
{
    typedef typename CtHdType<DT>::S S;
    const int64_t n = tensor_numel(y);
    if (n == 0) return CT_OK;
    /* channels last: the channel is i % o */
    const int64_t o = y->shape[1],
                  hw = ct_channels_last_only(y) ? 1 : n / (y->shape[0] * o);
    bias_relu_kernel<DT><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, stream>>>(
        (S *)ct_ptr(y), b ? (const S *)ct_ptr(b) : NULL, o, hw, n);
    CT_CUDA_CHECK_LAUNCH("bias_relu_kernel", stream);
    return CT_OK;
}

CtStatus ct_cuda_bias_relu(Tensor *y, const Tensor *b, cudaStream_t stream)
{
    switch (y->dtype) {
    case CT_F64: return launch<CT_F64>(y, b, stream);
    case CT_BF16: return launch<CT_BF16>(y, b, stream);
    case CT_F16: return launch<CT_F16>(y, b, stream);
    default: return launch<CT_F32>(y, b, stream);
    }
}
