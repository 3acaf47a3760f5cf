/* UNSCALE: the loss scaler's one pass over a contiguous f32 gradient block
 * (unscale_body.h). */
#include "common.cuh"
#include "unscale_body.h"

__global__ void unscale_kernel(float *g, float *flag, float inv, int64_t n)
{
    ct_unscale_thread(ct_cuda_thread(), g, flag, inv, n);
}

static CtStatus cuda_unscale(const CtOpCall *call)
{
    const CtUnscaleParams *p = (const CtUnscaleParams *)call->params;
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    int64_t n = tensor_numel(call->out[0]);
    if (n == 0) return CT_OK;
    unscale_kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(
        (float *)ct_ptr(call->out[0]), (float *)ct_ptr(call->out[1]), (float)p->inv_scale,
        n);
    CT_CUDA_CHECK_LAUNCH("unscale_kernel", c->stream);
    return CT_OK;
}

/* As the CPU: a contiguous f32 block and an f32 flag. */
static bool cuda_unscale_supports(const CtOpCall *call)
{
    return call->out[0]->dtype == CT_F32 && call->out[1]->dtype == CT_F32 &&
           tensor_is_contiguous(call->out[0]);
}

void ct_cuda_register_unscale(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_UNSCALE] = cuda_unscale;
    s[CT_OP_UNSCALE] = cuda_unscale_supports;
}
