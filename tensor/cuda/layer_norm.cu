/* LAYER_NORM(_BWD) on f32 and f64 (norm_body.h): one thread per row, and
 * for dweight/dbias one thread per column summing the rows in the CPU's
 * fixed block order (no atomics; bit-identical to tensor/cpu/norm.c where
 * sqrt and the arithmetic round alike). */
#include "common.cuh"
#include "norm_body.h"

template <typename T>
__global__ void ln_fwd_kernel(CtLayerNormParams p, const T *x, const T *w, const T *b,
                              T *y, T *stats)
{
    ct_ln_fwd_thread<T>(ct_cuda_thread(), p, x, w, b, y, stats);
}

template <typename T>
__global__ void ln_bwd_dx_kernel(CtLayerNormParams p, const T *g, const T *x, const T *w,
                                 const T *stats, T *dx)
{
    ct_ln_bwd_dx_thread<T>(ct_cuda_thread(), p, g, x, w, stats, dx);
}

template <typename T>
__global__ void ln_bwd_wb_kernel(CtLayerNormParams p, int64_t blk, const T *g, const T *x,
                                 const T *stats, T *dw, T *db)
{
    ct_ln_bwd_wb_thread<T>(ct_cuda_thread(), p, blk, g, x, stats, dw, db);
}

template <typename T> static T *opt(const Tensor *t)
{
    return t ? (T *)ct_ptr(t) : NULL;
}

template <typename T> static CtStatus launch_fwd(CtCudaCtx *c, const CtOpCall *call)
{
    const CtLayerNormParams *p = (const CtLayerNormParams *)call->params;
    ln_fwd_kernel<T><<<ct_cuda_blocks(p->rows), CT_CUDA_THREADS, 0, c->stream>>>(
        *p, opt<const T>(call->in[0]), opt<const T>(call->in[1]),
        opt<const T>(call->in[2]), opt<T>(call->out[0]), opt<T>(call->out[1]));
    CT_CUDA_CHECK_LAUNCH("ln_fwd_kernel", c->stream);
    return CT_OK;
}

template <typename T> static CtStatus launch_bwd(CtCudaCtx *c, const CtOpCall *call)
{
    const CtLayerNormParams *p = (const CtLayerNormParams *)call->params;
    const T *g = opt<const T>(call->in[0]), *x = opt<const T>(call->in[1]);
    const T *stats = opt<const T>(call->in[3]);
    if (call->out[0] && p->rows > 0) { /* no rows: dx is empty, no grid */
        ln_bwd_dx_kernel<T><<<ct_cuda_blocks(p->rows), CT_CUDA_THREADS, 0, c->stream>>>(
            *p, g, x, opt<const T>(call->in[2]), stats, opt<T>(call->out[0]));
        CT_CUDA_CHECK_LAUNCH("ln_bwd_dx_kernel", c->stream);
    }
    if ((call->out[1] || call->out[2]) && p->d > 0) {
        ln_bwd_wb_kernel<T><<<ct_cuda_blocks(p->d), CT_CUDA_THREADS, 0, c->stream>>>(
            *p, ct_ln_row_block(p->rows), g, x, stats, opt<T>(call->out[1]),
            opt<T>(call->out[2]));
        CT_CUDA_CHECK_LAUNCH("ln_bwd_wb_kernel", c->stream);
    }
    return CT_OK;
}

static CtStatus cuda_layer_norm(const CtOpCall *call)
{
    const CtLayerNormParams *p = (const CtLayerNormParams *)call->params;
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    if (p->rows == 0) return CT_OK;
    if (call->in[0]->dtype == CT_F32) return launch_fwd<float>(c, call);
    return launch_fwd<double>(c, call);
}

/* With no rows, dweight and dbias are still written (zeros). */
static CtStatus cuda_layer_norm_bwd(const CtOpCall *call)
{
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    if (call->in[0]->dtype == CT_F32) return launch_bwd<float>(c, call);
    return launch_bwd<double>(c, call);
}

/* f32 and f64 (every float operand has x's dtype). */
static bool float_input(const CtOpCall *call)
{
    return call->in[0]->dtype == CT_F32 || call->in[0]->dtype == CT_F64;
}

void ct_cuda_register_layer_norm(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_LAYER_NORM] = cuda_layer_norm;
    k[CT_OP_LAYER_NORM_BWD] = cuda_layer_norm_bwd;
    s[CT_OP_LAYER_NORM] = float_input;
    s[CT_OP_LAYER_NORM_BWD] = float_input;
}
