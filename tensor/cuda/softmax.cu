/* SOFTMAX(_BWD) and CROSS_ENTROPY(_BWD) on f32 and f64 (softmax_body.h),
 * one thread per run or position, summing in the CPU kernel's order. A
 * summed or mean cross-entropy of up to CT_CE_FOLD_MAX positions (a
 * classifier's batch) is one block whose thread 0 then folds the losses:
 * one launch for what were three ops.
 * The forward checks its targets in its own kernel (range.cuh): a bad one
 * is reported later, with the CPU's message. */
#include "range.cuh"
#include "softmax_body.h"

template <typename T>
__global__ void softmax_kernel(CtSoftmaxParams p, const T *x, const T *g, T *y)
{
    ct_softmax_thread<T>(ct_cuda_thread(), p, x, g, y);
}

template <typename T>
__global__ void ce_fwd_kernel(CtCrossEntropyParams p, const T *x, const int64_t *tg,
                              const T *w, T *loss, T *wout, unsigned long long *bad)
{
    ct_ce_fwd_thread<T>(ct_cuda_thread(), p, x, tg, w, loss, wout, bad);
}

/* One block: every position's loss, then the fold on one thread. */
template <typename T>
__global__ void ce_fold_kernel(CtCrossEntropyParams p, const T *x, const int64_t *tg,
                               const T *w, T *loss, T *wout, T *out, T *den,
                               unsigned long long *bad)
{
    ct_ce_fwd_thread<T>(ct_cuda_thread(), p, x, tg, w, loss, wout, bad);
    __syncthreads(); /* the block's global writes are visible to thread 0 */
    if (threadIdx.x == 0) ct_ce_fold<T>(p.n * p.inner, loss, wout, out, den);
}

template <typename T>
__global__ void ce_bwd_kernel(CtCrossEntropyParams p, const T *x, const int64_t *tg,
                              const T *w, const T *go, const T *div, T *gx)
{
    ct_ce_bwd_thread<T>(ct_cuda_thread(), p, x, tg, w, go, div, gx);
}

template <typename T> static const T *opt_ptr(const Tensor *t)
{
    return t ? (const T *)ct_ptr(t) : NULL;
}

template <typename T> static CtStatus launch_softmax(CtCudaCtx *c, const CtOpCall *call)
{
    const CtSoftmaxParams *p = (const CtSoftmaxParams *)call->params;
    int64_t runs = p->outer * p->inner;
    if (runs == 0 || p->n == 0) return CT_OK;
    const T *g = call->op == CT_OP_SOFTMAX_BWD ? (const T *)ct_ptr(call->in[1]) : NULL;
    softmax_kernel<T><<<ct_cuda_blocks(runs), CT_CUDA_THREADS, 0, c->stream>>>(
        *p, (const T *)ct_ptr(call->in[0]), g, (T *)ct_ptr(call->out[0]));
    CT_CUDA_CHECK_LAUNCH("softmax_kernel", c->stream);
    return CT_OK;
}

static CtStatus cuda_softmax(const CtOpCall *call)
{
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    if (call->in[0]->dtype == CT_F32) return launch_softmax<float>(c, call);
    return launch_softmax<double>(c, call);
}

/* The forward, with the check of its targets in the same kernel: it
 * lowers `bad`, a slot of the context's range log. */
template <typename T>
static cudaError_t launch_fwd(CtCudaCtx *c, const CtOpCall *call, unsigned long long *bad)
{
    const CtCrossEntropyParams *p = (const CtCrossEntropyParams *)call->params;
    const T *x = (const T *)ct_ptr(call->in[0]), *w = opt_ptr<T>(call->in[2]);
    const int64_t *tg = (const int64_t *)ct_ptr(call->in[1]);
    T *loss = (T *)ct_ptr(call->out[0]);
    T *wout = call->out[1] ? (T *)ct_ptr(call->out[1]) : NULL;
    if (p->fold)
        ce_fold_kernel<T><<<1, CT_CUDA_THREADS, 0, c->stream>>>(
            *p, x, tg, w, loss, wout, (T *)ct_ptr(call->out[2]),
            wout ? (T *)ct_ptr(call->out[3]) : NULL, bad);
    else
        ce_fwd_kernel<T>
            <<<ct_cuda_blocks(p->n * p->inner), CT_CUDA_THREADS, 0, c->stream>>>(
                *p, x, tg, w, loss, wout, bad);
    return ct_cuda_after_launch(c->stream);
}

static CtStatus cuda_ce_fwd(CtCudaCtx *c, const CtOpCall *call)
{
    const CtCrossEntropyParams *p = (const CtCrossEntropyParams *)call->params;
    unsigned long long *bad = NULL;
    /* the CPU's message for a bad target (range.cuh reports it later) */
    const CtRangeMsg m = {p->log_input ? "nll_loss" : "cross_entropy", "target", "index",
                          -1, p->c};
    bool check = p->n * p->inner > 0;
    if (check) CT_RETURN_IF_ERROR(ct_cuda_range_begin(c, &bad));
    cudaError_t e = call->in[0]->dtype == CT_F32 ? launch_fwd<float>(c, call, bad)
                                                 : launch_fwd<double>(c, call, bad);
    CtStatus st =
        ct_cuda_status_at(e, "launch of the cross-entropy kernel", __FILE__, __LINE__);
    return check ? ct_cuda_range_end(c, call->in[1], &m, st) : st;
}

/* The backward reads the targets the forward checked (the node keeps
 * them): no second check. */
template <typename T> static CtStatus launch_bwd(CtCudaCtx *c, const CtOpCall *call)
{
    const CtCrossEntropyParams *p = (const CtCrossEntropyParams *)call->params;
    ce_bwd_kernel<T><<<ct_cuda_blocks(p->n * p->inner), CT_CUDA_THREADS, 0, c->stream>>>(
        *p, (const T *)ct_ptr(call->in[0]), (const int64_t *)ct_ptr(call->in[1]),
        opt_ptr<T>(call->in[2]), (const T *)ct_ptr(call->in[3]), opt_ptr<T>(call->in[4]),
        (T *)ct_ptr(call->out[0]));
    CT_CUDA_CHECK_LAUNCH("ce_bwd_kernel", c->stream);
    return CT_OK;
}

/* CROSS_ENTROPY and CROSS_ENTROPY_BWD. */
static CtStatus cuda_cross_entropy(const CtOpCall *call)
{
    const CtCrossEntropyParams *p = (const CtCrossEntropyParams *)call->params;
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    if (call->op == CT_OP_CROSS_ENTROPY) {
        if (p->n * p->inner == 0 && !p->fold) return CT_OK;
        return cuda_ce_fwd(c, call);
    }
    if (p->n * p->inner == 0) return CT_OK;
    return call->in[0]->dtype == CT_F32 ? launch_bwd<float>(c, call)
                                        : launch_bwd<double>(c, call);
}

/* f32 and f64 (every float operand has in0's dtype). */
static bool float_only(const CtOpCall *call)
{
    CtDType dt = call->in[0]->dtype;
    return dt == CT_F32 || dt == CT_F64;
}

/* A fold runs in one block: up to CT_CE_FOLD_MAX positions. */
static bool ce_supports(const CtOpCall *call)
{
    const CtCrossEntropyParams *p = (const CtCrossEntropyParams *)call->params;
    return float_only(call) && (!p->fold || p->n * p->inner <= CT_CE_FOLD_MAX);
}

void ct_cuda_register_softmax(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_SOFTMAX] = cuda_softmax;
    k[CT_OP_SOFTMAX_BWD] = cuda_softmax;
    k[CT_OP_CROSS_ENTROPY] = cuda_cross_entropy;
    k[CT_OP_CROSS_ENTROPY_BWD] = cuda_cross_entropy;
    for (int op = CT_OP_SOFTMAX; op <= CT_OP_CROSS_ENTROPY_BWD; op++) s[op] = float_only;
    s[CT_OP_CROSS_ENTROPY] = ce_supports;
}
