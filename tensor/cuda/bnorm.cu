/* BATCH_NORM and BATCH_NORM_BWD on CUDA, f32 and f64 (tensor/norm.h).
 *
 * Training mode runs cuDNN's spatial batch norm (legacy API, as conv.cu
 * says why; descriptors from dnn_desc.h): its saved mean and inverse
 * standard deviation are the op's stats, its running-average factor the
 * momentum, and it updates the running statistics in place. A missing
 * weight or bias is a block of ones or zeros from the caching allocator.
 * Eval mode normalises with the running statistics, which cuDNN's backward
 * does not model, so it runs the hand kernels of bnorm_body.h. */
#include "bnorm_body.h"
#include "common.cuh"
#include "dnn_desc.h"

template <typename T>
__global__ void eval_stats_kernel(int64_t C, double eps, const T *rm, const T *rv,
                                  T *stats)
{
    ct_bn_eval_stats_body<T>(ct_cuda_thread(), C, eps, rm, rv, stats);
}

template <typename T>
__global__ void eval_fwd_kernel(int64_t N, int64_t C, int64_t K, const T *x, const T *w,
                                const T *b, const T *stats, T *y)
{
    ct_bn_eval_fwd_body<T>(ct_cuda_thread(), N, C, K, x, w, b, stats, y);
}

template <typename T>
__global__ void eval_dx_kernel(int64_t N, int64_t C, int64_t K, const T *g, const T *x,
                               const T *w, const T *stats, T *dx)
{
    ct_bn_eval_dx_body<T>(ct_cuda_thread(), N, C, K, g, x, w, stats, dx);
}

template <typename T>
__global__ void eval_dparams_kernel(int64_t N, int64_t C, int64_t K, const T *g,
                                    const T *x, const T *stats, T *dw, T *db)
{
    ct_bn_eval_dparams_body<T>(ct_cuda_thread(), N, C, K, g, x, stats, dw, db);
}

static const void *cptr(const Tensor *t)
{
    return t ? ct_ptr(t) : NULL;
}

static void *mptr(Tensor *t)
{
    return t ? ct_ptr(t) : NULL;
}

template <typename T> static CtStatus eval_forward(const CtOpCall *call, CtCudaCtx *c)
{
    const CtBatchNormParams *p = (const CtBatchNormParams *)call->params;
    T *stats = (T *)ct_ptr(call->out[1]);
    eval_stats_kernel<T><<<ct_cuda_blocks(p->c), CT_CUDA_THREADS, 0, c->stream>>>(
        p->c, p->eps, (const T *)cptr(call->out[2]), (const T *)cptr(call->out[3]),
        stats);
    CT_CUDA_CHECK_LAUNCH("eval_stats_kernel", c->stream);
    int64_t n = p->n * p->c * p->inner;
    if (n == 0) return CT_OK;
    eval_fwd_kernel<T><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(
        p->n, p->c, p->inner, (const T *)ct_ptr(call->in[0]),
        (const T *)cptr(call->in[1]), (const T *)cptr(call->in[2]), stats,
        (T *)ct_ptr(call->out[0]));
    CT_CUDA_CHECK_LAUNCH("eval_fwd_kernel", c->stream);
    return CT_OK;
}

template <typename T> static CtStatus eval_backward(const CtOpCall *call, CtCudaCtx *c)
{
    const CtBatchNormParams *p = (const CtBatchNormParams *)call->params;
    const T *g = (const T *)ct_ptr(call->in[0]), *x = (const T *)ct_ptr(call->in[1]);
    const T *stats = (const T *)ct_ptr(call->in[3]);
    int64_t n = p->n * p->c * p->inner;
    if (call->out[0] && n > 0) {
        eval_dx_kernel<T><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(
            p->n, p->c, p->inner, g, x, (const T *)cptr(call->in[2]), stats,
            (T *)ct_ptr(call->out[0]));
        CT_CUDA_CHECK_LAUNCH("eval_dx_kernel", c->stream);
    }
    if (!call->out[1] && !call->out[2]) return CT_OK;
    eval_dparams_kernel<T><<<ct_cuda_blocks(p->c), CT_CUDA_THREADS, 0, c->stream>>>(
        p->n, p->c, p->inner, g, x, stats, (T *)mptr(call->out[1]),
        (T *)mptr(call->out[2]));
    CT_CUDA_CHECK_LAUNCH("eval_dparams_kernel", c->stream);
    return CT_OK;
}

/* The cuDNN side of one training-mode call: handle, descriptors, and the
 * scale/bias (or dscale/dbias) blocks standing in for missing operands. */
typedef struct BnCall {
    CtDnnBatchNorm d;
    cudnnHandle_t h;
    cudnnTensorDescriptor_t x, param;
    void *scratch; /* 4 c elements: ones, zeros, spare dscale, spare dbias */
    size_t scratch_bytes;
} BnCall;

static void bn_destroy(const CtBackend *be, BnCall *k)
{
    if (k->param) (void)CT_CUDNN_STATUS(cudnnDestroyTensorDescriptor(k->param));
    if (k->x) (void)CT_CUDNN_STATUS(cudnnDestroyTensorDescriptor(k->x));
    ct_cuda_scratch_free(be, k->scratch, k->scratch_bytes);
}

/* The descriptors, and scratch holding a scale of ones and a bias of zeros
 * for missing operands, and room for the dscale/dbias nobody asked for. */
static CtStatus bn_build(const CtOpCall *call, CtCudaCtx *c, BnCall *k)
{
    const CtBatchNormParams *p = (const CtBatchNormParams *)call->params;
    CtDType dt = call->in[0]->dtype;
    CT_RETURN_IF_ERROR(ct_dnn_batch_norm(p, dt, &k->d));
    CT_RETURN_IF_ERROR(ct_cuda_dnn(c, &k->h));
    CT_RETURN_IF_ERROR(ct_dnn_tensor_create(&k->d.x, dt, &k->x));
    CT_RETURN_IF_ERROR(ct_dnn_tensor_create(&k->d.param, dt, &k->param));
    size_t row = (size_t)p->c * ct_dtype_size(dt);
    k->scratch_bytes = 4 * row;
    CT_RETURN_IF_ERROR(ct_cuda_scratch(call->backend, k->scratch_bytes, &k->scratch));
    CT_CUDNN_CHECK(cudnnSetTensor(k->h, k->param, k->scratch, ct_dnn_one(dt)));
    CT_CUDA_CHECK(cudaMemsetAsync((char *)k->scratch + row, 0, row, c->stream));
    return CT_OK;
}

static CtStatus train_forward(const CtOpCall *call, CtCudaCtx *c, BnCall *k)
{
    CT_RETURN_IF_ERROR(bn_build(call, c, k));
    const void *one = ct_dnn_one(k->d.dtype), *zero = ct_dnn_zero(k->d.dtype);
    char *stats = (char *)ct_ptr(call->out[1]);
    size_t row = (size_t)k->d.param.dims[1] * ct_dtype_size(k->d.dtype);
    const void *w = call->in[1] ? ct_ptr(call->in[1]) : k->scratch;
    const void *b = call->in[2] ? ct_ptr(call->in[2]) : (char *)k->scratch + row;
    CT_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
        k->h, CUDNN_BATCHNORM_SPATIAL, one, zero, k->x, ct_ptr(call->in[0]), k->x,
        ct_ptr(call->out[0]), k->param, w, b, k->d.factor, mptr(call->out[2]),
        mptr(call->out[3]), k->d.eps, stats, stats + row));
    return CT_OK;
}

static CtStatus train_backward(const CtOpCall *call, CtCudaCtx *c, BnCall *k)
{
    CT_RETURN_IF_ERROR(bn_build(call, c, k));
    const void *one = ct_dnn_one(k->d.dtype), *zero = ct_dnn_zero(k->d.dtype);
    const char *stats = (const char *)ct_ptr(call->in[3]);
    size_t row = (size_t)k->d.param.dims[1] * ct_dtype_size(k->d.dtype);
    /* cuDNN always writes dx, dscale and dbias: missing ones go to scratch
     * (a whole x for dx, when only the parameters need gradients) */
    char *spare = (char *)k->scratch + 2 * row;
    void *dw = call->out[1] ? ct_ptr(call->out[1]) : spare;
    void *db = call->out[2] ? ct_ptr(call->out[2]) : spare + row;
    const void *w = call->in[2] ? ct_ptr(call->in[2]) : k->scratch;
    size_t dx_bytes =
        call->out[0] ? 0 : (size_t)tensor_numel(call->in[1]) * ct_dtype_size(k->d.dtype);
    void *dx = mptr(call->out[0]);
    if (!dx) CT_RETURN_IF_ERROR(ct_cuda_scratch(call->backend, dx_bytes, &dx));
    CtStatus st = CT_CUDNN_STATUS(cudnnBatchNormalizationBackward(
        k->h, CUDNN_BATCHNORM_SPATIAL, one, zero, one, zero, k->x, ct_ptr(call->in[1]),
        k->x, ct_ptr(call->in[0]), k->x, dx, k->param, w, dw, db, k->d.eps, stats,
        stats + row));
    if (dx_bytes) ct_cuda_scratch_free(call->backend, dx, dx_bytes);
    return st;
}

static CtStatus bn_forward(const CtOpCall *call)
{
    const CtBatchNormParams *p = (const CtBatchNormParams *)call->params;
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    if (!p->training)
        return call->in[0]->dtype == CT_F64 ? eval_forward<double>(call, c)
                                            : eval_forward<float>(call, c);
    BnCall k = {};
    CtStatus st = train_forward(call, c, &k);
    bn_destroy(call->backend, &k);
    return st;
}

static CtStatus bn_backward(const CtOpCall *call)
{
    const CtBatchNormParams *p = (const CtBatchNormParams *)call->params;
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    if (!p->training)
        return call->in[0]->dtype == CT_F64 ? eval_backward<double>(call, c)
                                            : eval_backward<float>(call, c);
    BnCall k = {};
    CtStatus st = train_backward(call, c, &k);
    bn_destroy(call->backend, &k);
    return st;
}

/* f32 or f64 operands, all contiguous. Training needs more than one value
 * per channel (n · inner > 1, as the front-end checks) and a channel. */
static bool bn_supports(const CtOpCall *call)
{
    const CtBatchNormParams *p = (const CtBatchNormParams *)call->params;
    CtDType dt = call->in[0]->dtype;
    if (dt != CT_F32 && dt != CT_F64) return false;
    for (int i = 0; i < CT_CALL_MAX_IN; i++)
        if (call->in[i] &&
            (call->in[i]->dtype != dt || !tensor_is_contiguous(call->in[i])))
            return false;
    for (int i = 0; i < CT_CALL_MAX_OUT; i++)
        if (call->out[i] &&
            (call->out[i]->dtype != dt || !tensor_is_contiguous(call->out[i])))
            return false;
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
