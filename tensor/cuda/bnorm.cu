/* BATCH_NORM and BATCH_NORM_BWD on CUDA (tensor/norm.h): data (x, y, dy,
 * dx) in f32, f64, bf16 or f16; weight, bias and statistics in the data's
 * dtype, or f32 for bf16 and f16 data (ct_bn_param_dtype), as cuDNN
 * takes them.
 *
 * Training mode runs cuDNN's spatial batch norm (legacy API, as conv.cu
 * says why; descriptors from dnn_desc.h), on channels-last data in its
 * persistent mode, whose NHWC kernels are the fast ones: its saved mean and inverse
 * standard deviation are the op's stats, its running-average factor the
 * momentum, and it updates the running statistics in place. A missing
 * weight or bias is a block of ones or zeros from the caching allocator.
 * Eval mode normalises with the running statistics, which cuDNN's backward
 * does not model, so it runs the hand kernels of bnorm_body.h (NCHW or
 * channels last). */
#include "bnorm_body.h"
#include "common.cuh"
#include "dnn_desc.h"

template <typename P>
__global__ void eval_stats_kernel(int64_t C, double eps, const P *rm, const P *rv,
                                  P *stats)
{
    ct_bn_eval_stats_body<P>(ct_cuda_thread(), C, eps, rm, rv, stats);
}

/* S: DT's storage type; P: the parameters' type (bnorm_body.h). */
template <int DT, typename S = typename CtHdType<DT>::S,
          typename P = typename CtHdType<DT>::C>
__global__ void eval_fwd_kernel(int64_t N, int64_t C, int64_t K, const S *x, const P *w,
                                const P *b, const P *stats, S *y, bool nhwc)
{
    ct_bn_eval_fwd_body<DT>(ct_cuda_thread(), N, C, K, x, w, b, stats, y, nhwc);
}

template <int DT, typename S = typename CtHdType<DT>::S,
          typename P = typename CtHdType<DT>::C>
__global__ void eval_dx_kernel(int64_t N, int64_t C, int64_t K, const S *g, const S *x,
                               const P *w, const P *stats, S *dx, bool nhwc)
{
    ct_bn_eval_dx_body<DT>(ct_cuda_thread(), N, C, K, g, x, w, stats, dx, nhwc);
}

template <int DT, typename S = typename CtHdType<DT>::S,
          typename P = typename CtHdType<DT>::C>
__global__ void eval_dparams_kernel(int64_t N, int64_t C, int64_t K, const S *g,
                                    const S *x, const P *stats, P *dw, P *db, bool nhwc)
{
    ct_bn_eval_dparams_body<DT>(ct_cuda_thread(), N, C, K, g, x, stats, dw, db, nhwc);
}

static const void *cptr(const Tensor *t)
{
    return t ? ct_ptr(t) : NULL;
}

static void *mptr(Tensor *t)
{
    return t ? ct_ptr(t) : NULL;
}

template <int DT> static CtStatus eval_forward(const CtOpCall *call, CtCudaCtx *c)
{
    typedef typename CtHdType<DT>::S S;
    typedef typename CtHdType<DT>::C P;
    const CtBatchNormParams *p = (const CtBatchNormParams *)call->params;
    P *stats = (P *)ct_ptr(call->out[1]);
    if (p->c == 0) return CT_OK; /* nothing to write, and no grid of 0 blocks */
    eval_stats_kernel<P><<<ct_cuda_blocks(p->c), CT_CUDA_THREADS, 0, c->stream>>>(
        p->c, p->eps, (const P *)cptr(call->out[2]), (const P *)cptr(call->out[3]),
        stats);
    CT_CUDA_CHECK_LAUNCH("eval_stats_kernel", c->stream);
    int64_t n = p->n * p->c * p->inner;
    if (n == 0) return CT_OK;
    eval_fwd_kernel<DT><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(
        p->n, p->c, p->inner, (const S *)ct_ptr(call->in[0]),
        (const P *)cptr(call->in[1]), (const P *)cptr(call->in[2]), stats,
        (S *)ct_ptr(call->out[0]), p->nhwc);
    CT_CUDA_CHECK_LAUNCH("eval_fwd_kernel", c->stream);
    return CT_OK;
}

template <int DT> static CtStatus eval_backward(const CtOpCall *call, CtCudaCtx *c)
{
    typedef typename CtHdType<DT>::S S;
    typedef typename CtHdType<DT>::C P;
    const CtBatchNormParams *p = (const CtBatchNormParams *)call->params;
    const S *g = (const S *)ct_ptr(call->in[0]), *x = (const S *)ct_ptr(call->in[1]);
    const P *stats = (const P *)ct_ptr(call->in[3]);
    int64_t n = p->n * p->c * p->inner;
    if (call->out[0] && n > 0) {
        eval_dx_kernel<DT><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(
            p->n, p->c, p->inner, g, x, (const P *)cptr(call->in[2]), stats,
            (S *)ct_ptr(call->out[0]), p->nhwc);
        CT_CUDA_CHECK_LAUNCH("eval_dx_kernel", c->stream);
    }
    if ((!call->out[1] && !call->out[2]) || p->c == 0) return CT_OK;
    eval_dparams_kernel<DT><<<ct_cuda_blocks(p->c), CT_CUDA_THREADS, 0, c->stream>>>(
        p->n, p->c, p->inner, g, x, stats, (P *)mptr(call->out[1]),
        (P *)mptr(call->out[2]), p->nhwc);
    CT_CUDA_CHECK_LAUNCH("eval_dparams_kernel", c->stream);
    return CT_OK;
}

/* The cuDNN side of one training-mode call: handle, descriptors, and the
 * scale/bias (or dscale/dbias) blocks standing in for missing operands. */
typedef struct BnCall {
    CtDnnBatchNorm d;
    cudnnHandle_t h;
    cudnnTensorDescriptor_t x, param;
    void *scratch; /* 4 c parameters: ones, zeros, spare dscale, spare dbias;
                      NULL when the call has every operand */
    size_t scratch_bytes;
} BnCall;

static void bn_destroy(const CtBackend *be, BnCall *k)
{
    if (k->param) (void)CT_CUDNN_STATUS(cudnnDestroyTensorDescriptor(k->param));
    if (k->x) (void)CT_CUDNN_STATUS(cudnnDestroyTensorDescriptor(k->x));
    ct_cuda_scratch_free(be, k->scratch, k->scratch_bytes);
}

/* The descriptors, and (only when the call misses an operand) scratch of
 * 4 c parameters: a scale of ones (filled when `ones`), a bias of zeros
 * (filled when `zeros`), and room for the dscale/dbias nobody asked for
 * (`spare`). A call with all its operands runs no fill. */
static CtStatus bn_build(const CtOpCall *call, CtCudaCtx *c, bool ones, bool zeros,
                         bool spare, BnCall *k)
{
    const CtBatchNormParams *p = (const CtBatchNormParams *)call->params;
    CT_RETURN_IF_ERROR(ct_dnn_batch_norm(p, call->in[0]->dtype, &k->d));
    CtDType pdt = k->d.param_dtype;
    CT_RETURN_IF_ERROR(ct_cuda_dnn(c, &k->h));
    CT_RETURN_IF_ERROR(ct_dnn_tensor_create(&k->d.x, k->d.dtype, &k->x));
    CT_RETURN_IF_ERROR(ct_dnn_tensor_create(&k->d.param, pdt, &k->param));
    size_t row = (size_t)p->c * ct_dtype_size(pdt);
    k->scratch_bytes = ones || zeros || spare ? 4 * row : 0;
    CT_RETURN_IF_ERROR(ct_cuda_scratch(call->backend, k->scratch_bytes, &k->scratch));
    if (ones) CT_CUDNN_CHECK(cudnnSetTensor(k->h, k->param, k->scratch, ct_dnn_one(pdt)));
    if (zeros)
        CT_CUDA_CHECK(cudaMemsetAsync((char *)k->scratch + row, 0, row, c->stream));
    return CT_OK;
}

/* cuDNN's status for a training call, or CT_BN_LOW_REJECTED when cuDNN
 * turned down bf16/f16 data (which the caller then runs widened). */
#define CT_BN_LOW_REJECTED ((CtStatus)-1)
static CtStatus bn_status(const BnCall *k, cudnnStatus_t st)
{
    if (k->d.dtype != k->d.param_dtype &&
        (st == CUDNN_STATUS_NOT_SUPPORTED || st == CUDNN_STATUS_BAD_PARAM))
        return CT_BN_LOW_REJECTED;
    return CT_CUDNN_STATUS(st);
}

/* The mode of k's call: persistent for channels last (cuDNN's NHWC
 * kernels), unless cuDNN turned that mode down before. */
static bool persistent_rejected;

static cudnnBatchNormMode_t bn_mode(const BnCall *k)
{
    return k->d.persistent && !__atomic_load_n(&persistent_rejected, __ATOMIC_RELAXED)
               ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT
               : CUDNN_BATCHNORM_SPATIAL;
}

/* Runs `call(mode)` in k's mode; when cuDNN turns the persistent mode down,
 * again in the plain spatial mode, which every later call then uses. */
template <typename Call> static cudnnStatus_t bn_run(const BnCall *k, Call call)
{
    cudnnBatchNormMode_t mode = bn_mode(k);
    cudnnStatus_t st = call(mode);
    if (mode != CUDNN_BATCHNORM_SPATIAL_PERSISTENT ||
        (st != CUDNN_STATUS_NOT_SUPPORTED && st != CUDNN_STATUS_BAD_PARAM))
        return st;
    __atomic_store_n(&persistent_rejected, true, __ATOMIC_RELAXED);
    return call(CUDNN_BATCHNORM_SPATIAL);
}

static CtStatus train_forward(const CtOpCall *call, CtCudaCtx *c, BnCall *k)
{
    CT_RETURN_IF_ERROR(bn_build(call, c, !call->in[1], !call->in[2], false, k));
    /* alpha and beta: double for f64 data, float otherwise */
    const void *one = ct_dnn_one(k->d.dtype), *zero = ct_dnn_zero(k->d.dtype);
    char *stats = (char *)ct_ptr(call->out[1]);
    size_t row = (size_t)k->d.param.dims[1] * ct_dtype_size(k->d.param_dtype);
    const void *w = call->in[1] ? ct_ptr(call->in[1]) : k->scratch;
    const void *b = call->in[2] ? ct_ptr(call->in[2]) : (char *)k->scratch + row;
    return bn_status(k, bn_run(k, [&](cudnnBatchNormMode_t mode) {
                         return cudnnBatchNormalizationForwardTraining(
                             k->h, mode, one, zero, k->x, ct_ptr(call->in[0]), k->x,
                             ct_ptr(call->out[0]), k->param, w, b, k->d.factor,
                             mptr(call->out[2]), mptr(call->out[3]), k->d.eps, stats,
                             stats + row);
                     }));
}

static CtStatus train_backward(const CtOpCall *call, CtCudaCtx *c, BnCall *k)
{
    CT_RETURN_IF_ERROR(
        bn_build(call, c, !call->in[2], false, !call->out[1] || !call->out[2], k));
    const void *one = ct_dnn_one(k->d.dtype), *zero = ct_dnn_zero(k->d.dtype);
    const char *stats = (const char *)ct_ptr(call->in[3]);
    size_t row = (size_t)k->d.param.dims[1] * ct_dtype_size(k->d.param_dtype);
    /* cuDNN always writes dx, dscale and dbias: missing ones go to scratch
     * (a whole x for dx, when only the parameters need gradients) */
    char *spare = k->scratch ? (char *)k->scratch + 2 * row : NULL;
    void *dw = call->out[1] ? ct_ptr(call->out[1]) : spare;
    void *db = call->out[2] ? ct_ptr(call->out[2]) : spare + row;
    const void *w = call->in[2] ? ct_ptr(call->in[2]) : k->scratch;
    size_t dx_bytes =
        call->out[0] ? 0 : (size_t)tensor_numel(call->in[1]) * ct_dtype_size(k->d.dtype);
    void *dx = mptr(call->out[0]);
    if (!dx) CT_RETURN_IF_ERROR(ct_cuda_scratch(call->backend, dx_bytes, &dx));
    CtStatus st =
        bn_status(k, bn_run(k, [&](cudnnBatchNormMode_t mode) {
                      return cudnnBatchNormalizationBackward(
                          k->h, mode, one, zero, one, zero, k->x, ct_ptr(call->in[1]),
                          k->x, ct_ptr(call->in[0]), k->x, dx, k->param, w, dw, db,
                          k->d.eps, stats, stats + row);
                  }));
    if (dx_bytes) ct_cuda_scratch_free(call->backend, dx, dx_bytes);
    return st;
}

/* Set once cuDNN has turned down bf16/f16 batch norm: later calls go
 * straight to the widened run. */
static bool low_rejected;

/* A training call through cuDNN (`body`), falling back, for bf16/f16 data
 * cuDNN turns down, to the data widened to f32 around the same call. */
static CtStatus train_call(const CtOpCall *call, CtCudaCtx *c,
                           CtStatus (*body)(const CtOpCall *, CtCudaCtx *, BnCall *))
{
    CtDType dt = call->in[0]->dtype;
    bool low = dt == CT_BF16 || dt == CT_F16;
    CtStatus st = CT_BN_LOW_REJECTED;
    if (!low || !__atomic_load_n(&low_rejected, __ATOMIC_RELAXED)) {
        BnCall k = {};
        st = body(call, c, &k);
        bn_destroy(call->backend, &k);
    }
    if (st != CT_BN_LOW_REJECTED) return st;
    __atomic_store_n(&low_rejected, true, __ATOMIC_RELAXED);
    struct Widened {
        CtCudaCtx *c;
        CtStatus (*body)(const CtOpCall *, CtCudaCtx *, BnCall *);
    } a = {c, body};
    return ct_cuda_run_as(
        call, dt, CT_F32,
        [](const CtOpCall *wide, void *arg) {
            const Widened *w = (const Widened *)arg;
            BnCall k = {};
            CtStatus s = w->body(wide, w->c, &k);
            bn_destroy(wide->backend, &k);
            return s;
        },
        &a);
}

static CtStatus bn_forward(const CtOpCall *call)
{
    const CtBatchNormParams *p = (const CtBatchNormParams *)call->params;
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    CtStatus st;
    if (p->training)
        st = train_call(call, c, train_forward);
    else
        switch (call->in[0]->dtype) {
        case CT_F64: st = eval_forward<CT_F64>(call, c); break;
        case CT_BF16: st = eval_forward<CT_BF16>(call, c); break;
        case CT_F16: st = eval_forward<CT_F16>(call, c); break;
        default: st = eval_forward<CT_F32>(call, c); break;
        }
    if (st == CT_OK && p->relu) st = ct_cuda_bias_relu(call->out[0], NULL, c->stream);
    return st;
}

static CtStatus bn_backward(const CtOpCall *call)
{
    const CtBatchNormParams *p = (const CtBatchNormParams *)call->params;
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    if (p->training) return train_call(call, c, train_backward);
    switch (call->in[0]->dtype) {
    case CT_F64: return eval_backward<CT_F64>(call, c);
    case CT_BF16: return eval_backward<CT_BF16>(call, c);
    case CT_F16: return eval_backward<CT_F16>(call, c);
    default: return eval_backward<CT_F32>(call, c);
    }
}

/* Whether operand t (data or not) has dtype dt and the layout the call
 * wants: contiguous, or for data of a channels-last call, channels last. */
static bool bn_operand_ok(const CtBatchNormParams *p, const Tensor *t, bool data,
                          CtDType dt)
{
    if (!t) return true;
    if (t->dtype != dt) return false;
    return data && p->nhwc ? ct_is_channels_last(t) : tensor_is_contiguous(t);
}

/* All operands contiguous, or the data channels last (p->nhwc); data
 * (forward: x, y; backward: gout, x, dx) of one dtype among f32, f64, bf16
 * and f16, the rest of the parameter dtype (ct_bn_param_dtype). Training
 * needs more than one value per channel (n · inner > 1, as the front-end
 * checks) and a channel. */
static bool bn_supports(const CtOpCall *call)
{
    const CtBatchNormParams *p = (const CtBatchNormParams *)call->params;
    CtDType dt = call->in[0]->dtype;
    if (dt != CT_F32 && dt != CT_F64 && dt != CT_BF16 && dt != CT_F16) return false;
    CtDType pdt = ct_bn_param_dtype(dt);
    bool bwd = call->op == CT_OP_BATCH_NORM_BWD;
    for (int i = 0; i < CT_CALL_MAX_IN; i++) {
        bool data = i == 0 || (bwd && i == 1);
        if (!bn_operand_ok(p, call->in[i], data, data ? dt : pdt)) return false;
    }
    for (int i = 0; i < CT_CALL_MAX_OUT; i++)
        if (!bn_operand_ok(p, call->out[i], i == 0, i == 0 ? dt : pdt)) return false;
    if (!p->training) return true;
    return p->n * p->inner >= 2 && p->c > 0;
}

void ct_cuda_register_bnorm(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_BATCH_NORM] = bn_forward;
    k[CT_OP_BATCH_NORM_BWD] = bn_backward;
    s[CT_OP_BATCH_NORM] = bn_supports;
    s[CT_OP_BATCH_NORM_BWD] = bn_supports;
}
