/* CT_OP_RNG on CUDA (random_body.h). Uniform and bernoulli draws, and
 * dropout (a Bernoulli draw multiplying the input), are bit-identical to
 * the CPU's; normals agree to the last bits of CUDA's and libm's log/cos. */
#include "common.cuh"
#include "random_body.h"

template <int DT>
__global__ void rng_kernel(void *out, const void *x, int64_t n, int64_t nblocks, int per,
                           CtRngParams p)
{
    ct_rng_thread<DT>(ct_cuda_thread(), out, x, n, nblocks, per, p);
}

template <int DT>
static CtStatus launch_rng(CtCudaCtx *c, Tensor *out, const Tensor *x, int64_t n,
                           const CtRngParams &p)
{
    int per = ct_rng_per_block(p.kind, DT == CT_F64);
    int64_t nblocks = (n + per - 1) / per;
    rng_kernel<DT><<<ct_cuda_blocks(nblocks), CT_CUDA_THREADS, 0, c->stream>>>(
        ct_ptr(out), x ? ct_ptr(x) : NULL, n, nblocks, per, p);
    CT_CUDA_CHECK_LAUNCH("rng_kernel", c->stream);
    return CT_OK;
}

static CtStatus cuda_rng(const CtOpCall *call)
{
    const CtRngParams *p = (const CtRngParams *)call->params;
    Tensor *out = call->out[0];
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    int64_t n = tensor_numel(out);
    if (n == 0) return CT_OK;
    const Tensor *x = call->in[0];
    switch (out->dtype) {
    case CT_F32: return launch_rng<CT_F32>(c, out, x, n, *p);
    case CT_F64: return launch_rng<CT_F64>(c, out, x, n, *p);
    case CT_BF16: return launch_rng<CT_BF16>(c, out, x, n, *p);
    default: return launch_rng<CT_F16>(c, out, x, n, *p);
    }
}

/* Float dtypes, contiguous output (integer draws: draw f32 and cast); an
 * input only to a Bernoulli draw, contiguous, of the output's dtype and
 * size. */
static bool cuda_rng_supports(const CtOpCall *call)
{
    const Tensor *out = call->out[0], *x = call->in[0];
    CtDType dt = out->dtype;
    if (x && (((const CtRngParams *)call->params)->kind != CT_RNG_BERNOULLI ||
              x->dtype != dt || !tensor_is_contiguous(x) ||
              tensor_numel(x) != tensor_numel(out)))
        return false;
    return (dt == CT_F32 || dt == CT_F64 || dt == CT_BF16 || dt == CT_F16) &&
           tensor_is_contiguous(out);
}

void ct_cuda_register_random(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_RNG] = cuda_rng;
    s[CT_OP_RNG] = cuda_rng_supports;
}
