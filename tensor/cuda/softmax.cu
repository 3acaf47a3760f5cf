/* SOFTMAX(_BWD) and CROSS_ENTROPY(_BWD) on f32 and f64 (softmax_body.h),
 * one thread per run or position, summing in the CPU kernel's order.
 * Cross-entropy checks its targets first (range.cuh): a bad one is reported
 * as the CPU reports it, and nothing is written. */
#include "range.cuh"
#include "softmax_body.h"

template <typename T>
__global__ void softmax_kernel(CtSoftmaxParams p, const T *x, const T *g, T *y)
{
    ct_softmax_thread<T>(ct_cuda_thread(), p, x, g, y);
}

template <typename T>
__global__ void ce_fwd_kernel(CtCrossEntropyParams p, const T *x, const int64_t *tg,
                              const T *w, T *loss, T *wout)
{
    ct_ce_fwd_thread<T>(ct_cuda_thread(), p, x, tg, w, loss, wout);
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

/* Queues the check that every target is a class or the ignored value
 * (range.cuh: a bad one is reported later, with the CPU's message). */
static CtStatus check_targets(CtCudaCtx *c, const CtOpCall *call)
{
    const CtCrossEntropyParams *p = (const CtCrossEntropyParams *)call->params;
    CtRangeMsg m;
    m.where = "index";
    snprintf(m.head, sizeof m.head, "%s: target",
             p->log_input ? "nll_loss" : "cross_entropy");
    snprintf(m.tail, sizeof m.tail, "is out of range for %lld classes", (long long)p->c);
    return ct_cuda_check_range(c, call->in[1],
                               {p->c, p->use_ignore_index, p->ignore_index}, &m);
}

template <typename T> static CtStatus launch_ce(CtCudaCtx *c, const CtOpCall *call)
{
    const CtCrossEntropyParams *p = (const CtCrossEntropyParams *)call->params;
    int64_t np = p->n * p->inner;
    const T *x = (const T *)ct_ptr(call->in[0]), *w = opt_ptr<T>(call->in[2]);
    const int64_t *tg = (const int64_t *)ct_ptr(call->in[1]);
    if (call->op == CT_OP_CROSS_ENTROPY) {
        T *wout = call->out[1] ? (T *)ct_ptr(call->out[1]) : NULL;
        ce_fwd_kernel<T><<<ct_cuda_blocks(np), CT_CUDA_THREADS, 0, c->stream>>>(
            *p, x, tg, w, (T *)ct_ptr(call->out[0]), wout);
        CT_CUDA_CHECK_LAUNCH("ce_fwd_kernel", c->stream);
    } else {
        ce_bwd_kernel<T><<<ct_cuda_blocks(np), CT_CUDA_THREADS, 0, c->stream>>>(
            *p, x, tg, w, (const T *)ct_ptr(call->in[3]), opt_ptr<T>(call->in[4]),
            (T *)ct_ptr(call->out[0]));
        CT_CUDA_CHECK_LAUNCH("ce_bwd_kernel", c->stream);
    }
    return CT_OK;
}

/* CROSS_ENTROPY and CROSS_ENTROPY_BWD. */
static CtStatus cuda_cross_entropy(const CtOpCall *call)
{
    const CtCrossEntropyParams *p = (const CtCrossEntropyParams *)call->params;
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    if (p->n * p->inner == 0) return CT_OK;
    /* the backward reads the targets the forward checked (the node keeps
     * them): no second check */
    if (call->op == CT_OP_CROSS_ENTROPY) CT_RETURN_IF_ERROR(check_targets(c, call));
    if (call->in[0]->dtype == CT_F32) return launch_ce<float>(c, call);
    return launch_ce<double>(c, call);
}

/* f32 and f64 (every float operand has in0's dtype). */
static bool float_only(const CtOpCall *call)
{
    CtDType dt = call->in[0]->dtype;
    return dt == CT_F32 || dt == CT_F64;
}

void ct_cuda_register_softmax(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_SOFTMAX] = cuda_softmax;
    k[CT_OP_SOFTMAX_BWD] = cuda_softmax;
    k[CT_OP_CROSS_ENTROPY] = cuda_cross_entropy;
    k[CT_OP_CROSS_ENTROPY_BWD] = cuda_cross_entropy;
    for (int op = CT_OP_SOFTMAX; op <= CT_OP_CROSS_ENTROPY_BWD; op++) s[op] = float_only;
}
