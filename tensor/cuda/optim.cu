/* Optimizer block ops on CUDA: one launch per update over the flat blocks
 * (tensor/cuda/optim_body.h; semantics of tensor/cpu/optim.c, bit for
 * bit). Operands are contiguous f32 or f64 of one numel (the front-ends in
 * tensor/optim_ops.c check it). */
#include "common.cuh"
#include "optim_body.h"

template <typename T> static T *opnd(Tensor *t)
{
    return t ? (T *)ct_ptr(t) : NULL;
}

template <typename T, bool MOM, bool FIRST, bool NESTEROV>
__global__ void sgd_kernel(T *p, const T *g, T *buf, T *gz, CtSgdParams q, int64_t n)
{
    ct_sgd_thread<T, MOM, FIRST, NESTEROV>(ct_cuda_thread(), p, g, buf, gz, q, n);
}

template <typename T, bool AMS>
__global__ void adam_kernel(T *p, const T *g, T *m, T *v, T *vmax, T *gz, CtAdamParams q,
                            int64_t n)
{
    ct_adam_thread<T, AMS>(ct_cuda_thread(), p, g, m, v, vmax, gz, q, n);
}

template <typename T, bool CENTERED, bool MOM>
__global__ void rms_kernel(T *p, const T *g, T *sq, T *mb, T *ga, T *gz,
                           CtRmspropParams q, int64_t n)
{
    ct_rms_thread<T, CENTERED, MOM>(ct_cuda_thread(), p, g, sq, mb, ga, gz, q, n);
}

template <typename T, bool CLAMP> __global__ void clip_kernel(T *x, T value, int64_t n)
{
    ct_clip_thread<T, CLAMP>(ct_cuda_thread(), x, value, n);
}

template <typename T, bool MAX_ABS>
__global__ void norm_kernel(const T *x, double *part, int64_t n)
{
    ct_norm_thread<T, MAX_ABS>(ct_cuda_thread(), x, part, n);
}

/* Launches KERNEL<ARGS> over n elements on the call's stream. */
#define LAUNCH(c, n, KERNEL, ...)                                                        \
    do {                                                                                 \
        KERNEL<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (c)->stream>>>(__VA_ARGS__);     \
        CT_CUDA_CHECK_LAUNCH(#KERNEL, (c)->stream);                                      \
    } while (0)

template <typename T>
static CtStatus run_sgd(CtCudaCtx *c, const CtOpCall *call, int64_t n)
{
    const CtSgdParams &q = *(const CtSgdParams *)call->params;
    T *p = opnd<T>(call->out[0]), *b = opnd<T>(call->out[1]);
    const T *g = (const T *)ct_ptr(call->in[0]);
    T *gz = opnd<T>(call->out[CT_OPTIM_ZERO_GRAD]);
    if (!b)
        LAUNCH(c, n, (sgd_kernel<T, false, false, false>), p, g, b, gz, q, n);
    else if (q.first && q.nesterov)
        LAUNCH(c, n, (sgd_kernel<T, true, true, true>), p, g, b, gz, q, n);
    else if (q.first)
        LAUNCH(c, n, (sgd_kernel<T, true, true, false>), p, g, b, gz, q, n);
    else if (q.nesterov)
        LAUNCH(c, n, (sgd_kernel<T, true, false, true>), p, g, b, gz, q, n);
    else
        LAUNCH(c, n, (sgd_kernel<T, true, false, false>), p, g, b, gz, q, n);
    return CT_OK;
}

template <typename T>
static CtStatus run_adam(CtCudaCtx *c, const CtOpCall *call, int64_t n)
{
    const CtAdamParams &q = *(const CtAdamParams *)call->params;
    T *p = opnd<T>(call->out[0]), *m = opnd<T>(call->out[1]), *v = opnd<T>(call->out[2]);
    T *vmax = opnd<T>(call->out[3]);
    const T *g = (const T *)ct_ptr(call->in[0]);
    T *gz = opnd<T>(call->out[CT_OPTIM_ZERO_GRAD]);
    if (vmax)
        LAUNCH(c, n, (adam_kernel<T, true>), p, g, m, v, vmax, gz, q, n);
    else
        LAUNCH(c, n, (adam_kernel<T, false>), p, g, m, v, vmax, gz, q, n);
    return CT_OK;
}

template <typename T>
static CtStatus run_rms(CtCudaCtx *c, const CtOpCall *call, int64_t n)
{
    const CtRmspropParams &q = *(const CtRmspropParams *)call->params;
    T *p = opnd<T>(call->out[0]), *sq = opnd<T>(call->out[1]),
      *mb = opnd<T>(call->out[2]);
    T *ga = opnd<T>(call->out[3]);
    const T *g = (const T *)ct_ptr(call->in[0]);
    T *gz = opnd<T>(call->out[CT_OPTIM_ZERO_GRAD]);
    if (ga && mb)
        LAUNCH(c, n, (rms_kernel<T, true, true>), p, g, sq, mb, ga, gz, q, n);
    else if (ga)
        LAUNCH(c, n, (rms_kernel<T, true, false>), p, g, sq, mb, ga, gz, q, n);
    else if (mb)
        LAUNCH(c, n, (rms_kernel<T, false, true>), p, g, sq, mb, ga, gz, q, n);
    else
        LAUNCH(c, n, (rms_kernel<T, false, false>), p, g, sq, mb, ga, gz, q, n);
    return CT_OK;
}

template <typename T, bool CLAMP>
static CtStatus run_clip(CtCudaCtx *c, const CtOpCall *call, int64_t n)
{
    T value = (T)((const CtFillParams *)call->params)->value;
    LAUNCH(c, n, (clip_kernel<T, CLAMP>), opnd<T>(call->out[0]), value, n);
    return CT_OK;
}

template <typename T>
static CtStatus run_norm(CtCudaCtx *c, const CtOpCall *call, int64_t n)
{
    bool max_abs = ((const CtBlockNormParams *)call->params)->max_abs;
    const T *x = (const T *)ct_ptr(call->in[0]);
    double *part = (double *)ct_ptr(call->out[0]);
    int64_t nch = (n + CT_NORM_CHUNK - 1) / CT_NORM_CHUNK;
    if (max_abs)
        LAUNCH(c, nch, (norm_kernel<T, true>), x, part, n);
    else
        LAUNCH(c, nch, (norm_kernel<T, false>), x, part, n);
    return CT_OK;
}

/* One kernel fn per op: operand `which` of the call picks dtype and size. */
#define CUDA_OP(NAME, RUN_F32, RUN_F64, OPND)                                            \
    static CtStatus cuda_##NAME(const CtOpCall *call)                                    \
    {                                                                                    \
        CtCudaCtx *c;                                                                    \
        CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));                                  \
        const Tensor *t = call->OPND[0];                                                 \
        int64_t n = tensor_numel(t);                                                     \
        if (n == 0) return CT_OK;                                                        \
        return t->dtype == CT_F32 ? RUN_F32(c, call, n) : RUN_F64(c, call, n);           \
    }

CUDA_OP(sgd, run_sgd<float>, run_sgd<double>, out)
CUDA_OP(adam, run_adam<float>, run_adam<double>, out)
CUDA_OP(rms, run_rms<float>, run_rms<double>, out)
CUDA_OP(scale, (run_clip<float, false>), (run_clip<double, false>), out)
CUDA_OP(clamp, (run_clip<float, true>), (run_clip<double, true>), out)
CUDA_OP(norm, run_norm<float>, run_norm<double>, in)

void ct_cuda_register_optim(CtKernelFn *k, CtSupportsFn *s)
{
    (void)s; /* the front-ends admit only contiguous f32/f64 operands */
    k[CT_OP_OPTIM_SGD] = cuda_sgd;
    k[CT_OP_OPTIM_ADAM] = cuda_adam;
    k[CT_OP_OPTIM_RMSPROP] = cuda_rms;
    k[CT_OP_BLOCK_SCALE] = cuda_scale;
    k[CT_OP_BLOCK_CLAMP] = cuda_clamp;
    k[CT_OP_BLOCK_NORM] = cuda_norm;
}
