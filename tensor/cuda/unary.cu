/* Elementwise kernels: UNARY and UNARY_BWD, strided and broadcasting through
 * stride-0 inputs, on the dtypes of tensor/cpu/unary.c: f32, f64, bf16 and
 * f16 (computed in f32), and i64/i32 for the integer kinds. The thread
 * bodies are in unary_body.h; the kind is a template parameter. */
#include "common.cuh"
#include "unary_body.h"

template <int DT, int K>
__global__ void unary_kernel(void *out, const void *in, typename CtHdType<DT>::C a,
                             typename CtHdType<DT>::C b, CtCudaIndex ix, int64_t n)
{
    ct_unary_thread<DT, K>(ct_cuda_thread(), out, in, a, b, ix, n);
}

template <int DT, int K>
__global__ void unary_bwd_kernel(void *out, const void *x, const void *g,
                                 typename CtHdType<DT>::C a, typename CtHdType<DT>::C b,
                                 CtCudaIndex ix, int64_t n)
{
    ct_unary_bwd_thread<DT, K>(ct_cuda_thread(), out, x, g, a, b, ix, n);
}

template <int DT, int K>
__global__ void unary_packed_kernel(void *out, const void *in, typename CtHdType<DT>::C a,
                                    typename CtHdType<DT>::C b, int64_t n)
{
    ct_unary_packed_thread<DT, K>(ct_cuda_thread(), out, in, a, b, n);
}

template <int DT, int K>
__global__ void unary_bwd_packed_kernel(void *out, const void *x, const void *g,
                                        typename CtHdType<DT>::C a,
                                        typename CtHdType<DT>::C b, int64_t n)
{
    ct_unary_bwd_packed_thread<DT, K>(ct_cuda_thread(), out, x, g, a, b, n);
}

/* Launch shape of a packed body over n elements of DT. */
template <int DT> static unsigned packed_blocks(int64_t n)
{
    const int64_t per = CtPack<typename CtHdType<DT>::S>::N;
    return ct_cuda_blocks((n + per - 1) / per);
}

template <int DT, int K>
static CtStatus launch_unary(CtCudaCtx *c, const CtOpCall *call, const CtCudaIndex &ix,
                             int64_t n)
{
    const CtUnaryParams *p = (const CtUnaryParams *)call->params;
    void *out = ct_ptr(call->out[0]);
    const void *in = ct_ptr(call->in[0]);
    typename CtHdType<DT>::C a = ct_unary_param<DT>(p->a), b = ct_unary_param<DT>(p->b);
    const void *ptrs[2] = {out, in};
    if (ct_cuda_packed_ok(ix, 2, ptrs))
        unary_packed_kernel<DT, K>
            <<<packed_blocks<DT>(n), CT_CUDA_THREADS, 0, c->stream>>>(out, in, a, b, n);
    else
        unary_kernel<DT, K>
            <<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(out, in, a, b, ix, n);
    CT_CUDA_CHECK_LAUNCH("unary_kernel", c->stream);
    return CT_OK;
}

template <int DT, int K>
static CtStatus launch_unary_bwd(CtCudaCtx *c, const CtOpCall *call,
                                 const CtCudaIndex &ix, int64_t n)
{
    const CtUnaryParams *p = (const CtUnaryParams *)call->params;
    void *out = ct_ptr(call->out[0]);
    const void *x = ct_ptr(call->in[0]), *g = ct_ptr(call->in[1]);
    typename CtHdType<DT>::C a = ct_unary_param<DT>(p->a), b = ct_unary_param<DT>(p->b);
    const void *ptrs[3] = {out, x, g};
    if (ct_cuda_packed_ok(ix, 3, ptrs))
        unary_bwd_packed_kernel<DT, K>
            <<<packed_blocks<DT>(n), CT_CUDA_THREADS, 0, c->stream>>>(out, x, g, a, b, n);
    else
        unary_bwd_kernel<DT, K><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(
            out, x, g, a, b, ix, n);
    CT_CUDA_CHECK_LAUNCH("unary_bwd_kernel", c->stream);
    return CT_OK;
}

template <int DT>
static CtStatus run_unary(CtCudaCtx *c, const CtOpCall *call, int kind,
                          const CtCudaIndex &ix, int64_t n)
{
#define CASE(K)                                                                          \
    case K: return launch_unary<DT, K>(c, call, ix, n);
    if constexpr (DT == CT_I64 || DT == CT_I32) {
        switch (kind) {
            CT_UNARY_INT_KINDS(CASE)
        }
    } else {
        switch (kind) {
            CT_UNARY_FWD_KINDS(CASE)
        }
    }
#undef CASE
    return ct_error(CT_ERR_INVALID, "unary: kind %d not supported on cuda for %s", kind,
                    ct_dtype_name((CtDType)DT));
}

template <int DT>
static CtStatus run_unary_bwd(CtCudaCtx *c, const CtOpCall *call, int kind,
                              const CtCudaIndex &ix, int64_t n)
{
#define CASE(K)                                                                          \
    case K: return launch_unary_bwd<DT, K>(c, call, ix, n);
    switch (kind) {
        CT_UNARY_BWD_KINDS(CASE)
    }
#undef CASE
    return ct_error(CT_ERR_INVALID, "unary backward: kind %d not supported on cuda",
                    kind);
}

/* out, in0 (and in1 = gout for the backward): one shape and dtype, any
 * strides. */
static CtStatus cuda_unary_any(const CtOpCall *call, bool bwd)
{
    const CtUnaryParams *p = (const CtUnaryParams *)call->params;
    Tensor *out = call->out[0];
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    CtCudaIndex ix;
    const Tensor *ops[3] = {out, call->in[0], bwd ? call->in[1] : NULL};
    int64_t n = ct_cuda_index_init(&ix, out->ndim, out->shape, bwd ? 3 : 2, ops);
    if (n == 0) return CT_OK;
    int kind = ct_unary_pow_kind(bwd, p->kind, p->a);
    if (bwd) {
        switch (out->dtype) {
        case CT_F32: return run_unary_bwd<CT_F32>(c, call, kind, ix, n);
        case CT_F64: return run_unary_bwd<CT_F64>(c, call, kind, ix, n);
        case CT_BF16: return run_unary_bwd<CT_BF16>(c, call, kind, ix, n);
        default: return run_unary_bwd<CT_F16>(c, call, kind, ix, n);
        }
    }
    switch (out->dtype) {
    case CT_F32: return run_unary<CT_F32>(c, call, kind, ix, n);
    case CT_F64: return run_unary<CT_F64>(c, call, kind, ix, n);
    case CT_BF16: return run_unary<CT_BF16>(c, call, kind, ix, n);
    case CT_F16: return run_unary<CT_F16>(c, call, kind, ix, n);
    case CT_I64: return run_unary<CT_I64>(c, call, kind, ix, n);
    default: return run_unary<CT_I32>(c, call, kind, ix, n);
    }
}

static CtStatus cuda_unary(const CtOpCall *call)
{
    return cuda_unary_any(call, false);
}

static CtStatus cuda_unary_bwd(const CtOpCall *call)
{
    return cuda_unary_any(call, true);
}

static bool valid_kind(CtUnaryKind k)
{
    return (unsigned)k <= (unsigned)CT_UN_DIV_SCALAR;
}

static bool is_float(CtDType dt)
{
    return dt == CT_F32 || dt == CT_F64 || dt == CT_BF16 || dt == CT_F16;
}

/* The CPU's dtypes: the floating ones for every kind, i64 and i32 for the
 * integer kinds. */
static bool cuda_unary_supports(const CtOpCall *call)
{
    const CtUnaryParams *p = (const CtUnaryParams *)call->params;
    if (!valid_kind(p->kind)) return false;
    CtDType dt = call->in[0]->dtype;
    if (call->out[0]->dtype != dt) return false;
    if (dt == CT_I64 || dt == CT_I32) return ct_unary_kind_has_int(p->kind);
    return is_float(dt);
}

static bool cuda_unary_bwd_supports(const CtOpCall *call)
{
    const CtUnaryParams *p = (const CtUnaryParams *)call->params;
    CtDType dt = call->in[0]->dtype;
    return valid_kind(p->kind) && is_float(dt) && call->in[1]->dtype == dt &&
           call->out[0]->dtype == dt;
}

void ct_cuda_register_unary(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_UNARY] = cuda_unary;
    s[CT_OP_UNARY] = cuda_unary_supports;
    k[CT_OP_UNARY_BWD] = cuda_unary_bwd;
    s[CT_OP_UNARY_BWD] = cuda_unary_bwd_supports;
}
