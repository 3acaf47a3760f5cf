/* Convolutions on input channels padded to a multiple of 8
 * (ct_dnn_padded_channels): cuDNN's tensor-core kernels for bf16/f16 want
 * the channels in multiples of 8, and a 3-channel image stem otherwise runs
 * on its legacy kernels. The operands that carry the input channels
 * (ct_dnn_channel_operands) are copied into scratch tensors with zero
 * channels appended; zero channels of x and w add exact zeros to y, and the
 * gradients of the padded channels are dropped when dx and dw are copied
 * back. One grid-stride launch per copy (pad_channels_body.h). */
#include <string.h>

#include "common.cuh"
#include "dnn_desc.h"
#include "pad_channels_body.h"

template <typename S>
__global__ void pad_channels_kernel(S *dst, const S *src, int64_t c_in, int64_t c_out,
                                    int64_t plane, int64_t n)
{
    ct_pad_channels_thread<S>(ct_cuda_thread(), dst, src, c_in, c_out, plane, n);
}

template <typename S>
static CtStatus launch(Tensor *dst, const Tensor *src, cudaStream_t stream)
{
    const int64_t n = tensor_numel(dst);
    if (n == 0) return CT_OK;
    const int64_t plane = dst->shape[2] * dst->shape[3];
    pad_channels_kernel<S><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, stream>>>(
        (S *)ct_ptr(dst), (const S *)ct_ptr(src), src->shape[1], dst->shape[1], plane, n);
    CT_CUDA_CHECK_LAUNCH("pad_channels_kernel", stream);
    return CT_OK;
}

/* dst <- src with dim 1 padded or cut to dst's (both contiguous 4-D). */
static CtStatus pad_copy(Tensor *dst, const Tensor *src, cudaStream_t stream)
{
    switch (ct_dtype_size(dst->dtype)) {
    case 2: return launch<uint16_t>(dst, src, stream);
    case 4: return launch<uint32_t>(dst, src, stream);
    default: return launch<uint64_t>(dst, src, stream);
    }
}

/* A scratch tensor shaped as `like` (4-D) with dim 1 = c. */
static CtStatus pad_make(const CtBackend *be, const Tensor *like, int64_t c,
                         CtScratchTensor *l)
{
    int64_t shape[4] = {like->shape[0], c, like->shape[2], like->shape[3]};
    return ct_cuda_scratch_tensor(be, 4, shape, like->dtype, like->storage->device, l);
}

CtStatus ct_cuda_conv_padded(const CtOpCall *call, CtCudaCtx *c, int64_t c_pad,
                             CtStatus (*fn)(const CtOpCall *padded, void *arg), void *arg)
{
    CtConv2dParams p = *(const CtConv2dParams *)call->params;
    p.c = c_pad;
    CtOpCall lc = *call;
    lc.params = &p;
    unsigned in_mask, out_mask;
    ct_dnn_channel_operands(call->op, &in_mask, &out_mask);
    CtScratchTensor in[CT_CALL_MAX_IN] = {}, out[CT_CALL_MAX_OUT] = {};
    CtStatus st = CT_OK;
    for (int i = 0; i < CT_CALL_MAX_IN && st == CT_OK; i++) {
        if (!(in_mask >> i & 1u) || !call->in[i]) continue;
        st = pad_make(call->backend, call->in[i], c_pad, &in[i]);
        if (st == CT_OK) st = pad_copy(&in[i].t, call->in[i], c->stream);
        lc.in[i] = &in[i].t;
    }
    for (int i = 0; i < CT_CALL_MAX_OUT && st == CT_OK; i++) {
        if (!(out_mask >> i & 1u) || !call->out[i]) continue;
        st = pad_make(call->backend, call->out[i], c_pad, &out[i]);
        lc.out[i] = &out[i].t;
    }
    if (st == CT_OK) st = fn(&lc, arg);
    for (int i = 0; i < CT_CALL_MAX_OUT && st == CT_OK; i++)
        if (out[i].s.data) st = pad_copy(call->out[i], &out[i].t, c->stream);
    for (int i = 0; i < CT_CALL_MAX_IN; i++)
        ct_cuda_scratch_free(call->backend, in[i].s.data, in[i].s.nbytes);
    for (int i = 0; i < CT_CALL_MAX_OUT; i++)
        ct_cuda_scratch_free(call->backend, out[i].s.data, out[i].s.nbytes);
    return st;
}
