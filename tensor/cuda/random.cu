/* CT_OP_RNG on CUDA (random_body.h). Uniform and bernoulli draws
 * are bit-identical to the CPU's; normals agree to the last bits of CUDA's
 * and libm's log/cos. */
#include "common.cuh"
#include "random_body.h"

template <typename T>
__global__ void rng_kernel(T *out, int64_t n, int64_t nblocks, int per, CtRngParams p,
                           int wide)
{
    ct_rng_thread<T>(ct_cuda_thread(), out, n, nblocks, per, p, wide);
}

static CtStatus cuda_rng(const CtOpCall *call)
{
    const CtRngParams *p = (const CtRngParams *)call->params;
    Tensor *out = call->out[0];
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    int64_t n = tensor_numel(out);
    if (n == 0) return CT_OK;
    bool wide = out->dtype == CT_F64;
    int per = ct_rng_per_block(p->kind, wide);
    int64_t nblocks = (n + per - 1) / per;
    if (wide)
        rng_kernel<double><<<ct_cuda_blocks(nblocks), CT_CUDA_THREADS, 0, c->stream>>>(
            (double *)ct_ptr(out), n, nblocks, per, *p, 1);
    else
        rng_kernel<float><<<ct_cuda_blocks(nblocks), CT_CUDA_THREADS, 0, c->stream>>>(
            (float *)ct_ptr(out), n, nblocks, per, *p, 0);
    CT_CUDA_CHECK_LAUNCH("rng_kernel", c->stream);
    return CT_OK;
}

/* f32 and f64, contiguous output (other dtypes: draw f32 and cast). */
static bool cuda_rng_supports(const CtOpCall *call)
{
    const Tensor *out = call->out[0];
    return (out->dtype == CT_F32 || out->dtype == CT_F64) && tensor_is_contiguous(out);
}

void ct_cuda_register_random(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_RNG] = cuda_rng;
    s[CT_OP_RNG] = cuda_rng_supports;
}
