/* CONV2D, CONV2D_BWD_DATA and CONV2D_BWD_WEIGHT through cuDNN 9, for f32,
 * f64, bf16 and f16, and f32 under bf16/f16 autocast (the operands rounded
 * to the low type by the COPY kernel, convolved on the tensor cores with
 * f32 accumulation, the results widened back to f32); descriptors from
 * dnn_desc.h.
 *
 * cuDNN's legacy (descriptor) API, not the graph API: each op is one call
 * on a few descriptors that dnn_desc.h builds as plain values, and its v7
 * heuristics list every algorithm with its workspace, math type and a
 * determinism flag, which is what the deterministic switch and the
 * workspace cap filter on (ct_dnn_pick). The graph API would add operation
 * graphs, engine configurations and execution plans to finalise and cache
 * for the same three convolutions, without a fusion that these separate
 * ops could use. The legacy calls are deprecated in cuDNN 9 (still shipped
 * there); moving to the graph API changes this file only.
 *
 * A large bf16/f16 convolution whose input channels are not a multiple of 8
 * (an RGB stem) runs on channels padded with zeros (pad_channels.cu,
 * ct_dnn_padded_channels), where cuDNN has tensor-core kernels.
 *
 * Channels-last calls (CtConv2dParams.nhwc) describe x, y and their
 * gradients with NHWC strides and the filter with cuDNN's NHWC format, the
 * layout its tensor-core kernels use, so cuDNN transposes nothing.
 *
 * Workspace comes from the instance's caching allocator, capped at
 * CT_DNN_WORKSPACE_MAX. The bias is added with cudnnAddTensor, or with the
 * ReLU in one kernel of ours when the forward is ReLU-fused
 * (bias_relu.cu), and its gradient summed with
 * cudnnConvolutionBackwardBias. */
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "dnn_desc.h"

static cudnnDataType_t dnn_type(CtDType dt)
{
    switch (dt) {
    case CT_F64: return CUDNN_DATA_DOUBLE;
    case CT_BF16: return CUDNN_DATA_BFLOAT16;
    case CT_F16: return CUDNN_DATA_HALF;
    default: return CUDNN_DATA_FLOAT;
    }
}

static cudnnMathType_t dnn_math(CtDnnMath m)
{
    switch (m) {
    case CT_DNN_MATH_TENSOR_OP: return CUDNN_TENSOR_OP_MATH;
    case CT_DNN_MATH_FMA: return CUDNN_FMA_MATH;
    default: return CUDNN_DEFAULT_MATH;
    }
}

/* Every descriptor of one call, destroyed together. */
typedef struct ConvObjects {
    cudnnTensorDescriptor_t x, y, b;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
} ConvObjects;

static void conv_destroy(ConvObjects *o)
{
    if (o->conv) (void)CT_CUDNN_STATUS(cudnnDestroyConvolutionDescriptor(o->conv));
    if (o->w) (void)CT_CUDNN_STATUS(cudnnDestroyFilterDescriptor(o->w));
    if (o->b) (void)CT_CUDNN_STATUS(cudnnDestroyTensorDescriptor(o->b));
    if (o->y) (void)CT_CUDNN_STATUS(cudnnDestroyTensorDescriptor(o->y));
    if (o->x) (void)CT_CUDNN_STATUS(cudnnDestroyTensorDescriptor(o->x));
}

static const double one64 = 1.0, zero64 = 0.0;
static const float one32 = 1.0f, zero32 = 0.0f;

const void *ct_dnn_one(CtDType dt)
{
    return dt == CT_F64 ? (const void *)&one64 : (const void *)&one32;
}

const void *ct_dnn_zero(CtDType dt)
{
    return dt == CT_F64 ? (const void *)&zero64 : (const void *)&zero32;
}

CtStatus ct_dnn_tensor_create(const CtDnnTensor *t, CtDType dt,
                              cudnnTensorDescriptor_t *out)
{
    CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(out));
    CT_CUDNN_CHECK(
        cudnnSetTensorNdDescriptor(*out, dnn_type(dt), 4, t->dims, t->strides));
    return CT_OK;
}

static CtStatus conv_build(const CtDnnConv *d, ConvObjects *o)
{
    CT_RETURN_IF_ERROR(ct_dnn_tensor_create(&d->x, d->data, &o->x));
    CT_RETURN_IF_ERROR(ct_dnn_tensor_create(&d->y, d->data, &o->y));
    CtDnnTensor b;
    CT_RETURN_IF_ERROR(ct_dnn_tensor_nchw("conv2d", 1, d->bias[1], 1, 1, &b));
    CT_RETURN_IF_ERROR(ct_dnn_tensor_create(&b, d->data, &o->b));
    CT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&o->w));
    CT_CUDNN_CHECK(cudnnSetFilterNdDescriptor(
        o->w, dnn_type(d->data), d->filter_nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
        4, d->w));
    CT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&o->conv));
    CT_CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(o->conv, 2, d->pad, d->stride,
                                                   d->dilation, CUDNN_CROSS_CORRELATION,
                                                   dnn_type(d->compute)));
    CT_CUDNN_CHECK(cudnnSetConvolutionGroupCount(o->conv, d->groups));
    CT_CUDNN_CHECK(cudnnSetConvolutionMathType(o->conv, dnn_math(d->math)));
    return CT_OK;
}

/* The chosen entry of cuDNN's heuristic list (any of the three AlgoPerf
 * types); records CT_ERR_UNSUPPORTED naming `what` when none qualifies. */
template <typename Perf>
static CtStatus pick(const char *what, const CtDnnConv *d, const Perf *perf, int n,
                     Perf *out)
{
    CtDnnAlgo r[16];
    n = n < 16 ? n : 16;
    for (int i = 0; i < n; i++)
        r[i] = (CtDnnAlgo){(int)perf[i].algo, perf[i].status == CUDNN_STATUS_SUCCESS,
                           perf[i].determinism == CUDNN_DETERMINISTIC,
                           perf[i].mathType == CUDNN_TENSOR_OP_MATH ||
                               perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION,
                           perf[i].memory};
    bool det = ct_deterministic();
    int i = ct_dnn_pick(r, n, det, ct_dnn_tensor_ops_ok(d->data, ct_allow_tf32()),
                        CT_DNN_WORKSPACE_MAX);
    if (i < 0)
        return ct_error(CT_ERR_UNSUPPORTED,
                        "%s: cuDNN offers no %salgorithm within %zu MiB of workspace for "
                        "%s input (%d, %d, %d, %d), filter (%d, %d, %d, %d) on cuda",
                        what, det ? "deterministic " : "", CT_DNN_WORKSPACE_MAX >> 20,
                        ct_dtype_name(d->data), d->x.dims[0], d->x.dims[1], d->x.dims[2],
                        d->x.dims[3], d->w[0], d->w[1], d->w[2], d->w[3]);
    *out = perf[i];
    return CT_OK;
}

/* One convolution call (operands in the dtype cuDNN convolves in): its
 * descriptors (o: the instance's cached ones for the call's key, else
 * `own`, built for this call), handle and instance. */
typedef struct ConvCall {
    const CtOpCall *call;
    CtDnnConv d;
    ConvObjects own;
    const ConvObjects *o;
    cudnnHandle_t h;
    CtCudaCtx *c;
} ConvCall;

/* k's descriptors: the cached ones choose() found, else built now. */
static CtStatus objects(ConvCall *k)
{
    if (k->o) return CT_OK;
    CT_RETURN_IF_ERROR(conv_build(&k->d, &k->own));
    k->o = &k->own;
    return CT_OK;
}

/* Moves k's own descriptors (math type set) into the cache's keeping;
 * NULL when out of memory (they then stay k's, destroyed after the call). */
static ConvObjects *keep_objects(ConvCall *k)
{
    ConvObjects *kept = (ConvObjects *)malloc(sizeof *kept);
    if (!kept) return NULL;
    *kept = k->own;
    k->own = ConvObjects{};
    k->o = kept;
    return kept;
}

void ct_cuda_conv_free(CtCudaCtx *c)
{
    for (int i = 0; i < CT_ALGO_CACHE_SLOTS; i++) {
        ConvObjects *o = (ConvObjects *)c->conv_algos.choice[i].objects;
        if (!c->conv_algos.used[i] || !o) continue;
        conv_destroy(o);
        free(o);
        c->conv_algos.choice[i].objects = NULL;
    }
}

/* cuDNN's list of algorithms for k's call, best first: its heuristics
 * (`heuristics(perf, capacity, &n)`), or in benchmark mode every algorithm
 * run once on the call's own operands and sorted by time (`find(perf,
 * capacity, &n, workspace, bytes)`; it writes the call's output, which the
 * call then overwrites). */
template <typename Perf, typename Heuristics, typename Find>
static CtStatus list_algorithms(ConvCall *k, bool benchmark, Heuristics heuristics,
                                Find find, Perf *perf, int *n)
{
    if (!benchmark) return CT_CUDNN_STATUS(heuristics(perf, 16, n));
    /* as much workspace as any algorithm may use, or none if that is not free */
    size_t bytes = CT_DNN_WORKSPACE_MAX;
    void *ws = ct_backend_alloc(k->call->backend, bytes);
    if (!ws) bytes = 0;
    CtStatus st = CT_CUDNN_STATUS(find(perf, 16, n, ws, bytes));
    ct_cuda_scratch_free(k->call->backend, ws, bytes);
    return st;
}

/* The algorithm of k's call of `kind`, and k->o set to descriptors whose
 * convolution has the algorithm's math type: the instance's earlier choice
 * for the same call with the descriptors it keeps for it (only read from
 * then on, so calls on any thread share them, and a call builds none), or
 * the first of list_algorithms' that ct_dnn_pick accepts, with its
 * workspace size (`workspace(algo, &bytes)`), stored with the descriptors
 * built for it. */
template <typename Perf, typename Heuristics, typename Find, typename Workspace>
static CtStatus choose(ConvCall *k, CtDnnCallKind kind, const char *what,
                       Heuristics heuristics, Find find, Workspace workspace,
                       CtDnnChoice *out)
{
    CtDnnAlgoKey key;
    /* timings could pick another algorithm each run: not when deterministic */
    const bool det = ct_deterministic(), benchmark = ct_cudnn_benchmark() && !det;
    ct_dnn_algo_key(&key, kind, &k->d, det, ct_allow_tf32(), benchmark);
    pthread_mutex_lock(&k->c->mu);
    bool found = ct_algo_cache_get(&k->c->conv_algos, &key, out);
    pthread_mutex_unlock(&k->c->mu);
    if (found && out->objects) {
        k->o = (const ConvObjects *)out->objects;
        return CT_OK;
    }
    CT_RETURN_IF_ERROR(objects(k));
    if (found) /* kept without descriptors (out of memory then) */
        return CT_CUDNN_STATUS(
            cudnnSetConvolutionMathType(k->own.conv, (cudnnMathType_t)out->math));
    Perf perf[16], best = {};
    int n = 0;
    CT_RETURN_IF_ERROR(list_algorithms(k, benchmark, heuristics, find, perf, &n));
    CT_RETURN_IF_ERROR(pick(what, &k->d, perf, n, &best));
    /* the workspace depends on the math type */
    CT_CUDNN_CHECK(cudnnSetConvolutionMathType(k->own.conv, best.mathType));
    *out = (CtDnnChoice){(int)best.algo, (int)best.mathType, 0, NULL};
    CT_CUDNN_CHECK(workspace(best.algo, &out->workspace));
    /* stored with the descriptors, unless another thread stored the key's
     * meanwhile or the table is full: then they stay this call's */
    pthread_mutex_lock(&k->c->mu);
    CtDnnChoice stored = *out, prior;
    bool raced = ct_algo_cache_get(&k->c->conv_algos, &key, &prior) && prior.objects;
    stored.objects = raced ? NULL : keep_objects(k);
    if (!raced && !ct_algo_cache_put(&k->c->conv_algos, &key, stored) && stored.objects) {
        k->own = *(ConvObjects *)stored.objects;
        free(stored.objects);
        k->o = &k->own;
    }
    pthread_mutex_unlock(&k->c->mu);
    return CT_OK;
}

static CtStatus forward(ConvCall *k)
{
    const CtOpCall *call = k->call;
    CtDnnChoice ch;
    CT_RETURN_IF_ERROR(choose<cudnnConvolutionFwdAlgoPerf_t>(
        k, CT_DNN_CALL_FORWARD, "conv2d",
        [&](cudnnConvolutionFwdAlgoPerf_t *perf, int cap, int *n) {
            return cudnnGetConvolutionForwardAlgorithm_v7(
                k->h, k->o->x, k->o->w, k->o->conv, k->o->y, cap, n, perf);
        },
        [&](cudnnConvolutionFwdAlgoPerf_t *perf, int cap, int *n, void *ws,
            size_t bytes) {
            return cudnnFindConvolutionForwardAlgorithmEx(
                k->h, k->o->x, ct_ptr(call->in[0]), k->o->w, ct_ptr(call->in[1]),
                k->o->conv, k->o->y, ct_ptr(call->out[0]), cap, n, perf, ws, bytes);
        },
        [&](cudnnConvolutionFwdAlgo_t algo, size_t *bytes) {
            return cudnnGetConvolutionForwardWorkspaceSize(
                k->h, k->o->x, k->o->w, k->o->conv, k->o->y, algo, bytes);
        },
        &ch));
    const ConvObjects *o = k->o;
    const cudnnConvolutionFwdAlgo_t algo = (cudnnConvolutionFwdAlgo_t)ch.algo;
    const size_t ws_size = ch.workspace;
    void *ws;
    CT_RETURN_IF_ERROR(ct_cuda_scratch(call->backend, ws_size, &ws));
    CtDType dt = k->d.data;
    void *Y = ct_ptr(call->out[0]);
    CtStatus st = CT_CUDNN_STATUS(cudnnConvolutionForward(
        k->h, ct_dnn_one(dt), o->x, ct_ptr(call->in[0]), o->w, ct_ptr(call->in[1]),
        o->conv, algo, ws, ws_size, ct_dnn_zero(dt), o->y, Y));
    ct_cuda_scratch_free(call->backend, ws, ws_size);
    if (st == CT_OK && ((const CtConv2dParams *)call->params)->relu)
        return ct_cuda_bias_relu(call->out[0], call->in[2], k->c->stream);
    if (st == CT_OK && call->in[2])
        st = CT_CUDNN_STATUS(cudnnAddTensor(
            k->h, ct_dnn_one(dt), o->b, ct_ptr(call->in[2]), ct_dnn_one(dt), o->y, Y));
    return st;
}

static CtStatus backward_data(ConvCall *k)
{
    const CtOpCall *call = k->call;
    CtDnnChoice ch;
    CT_RETURN_IF_ERROR(choose<cudnnConvolutionBwdDataAlgoPerf_t>(
        k, CT_DNN_CALL_BACKWARD_DATA, "conv2d backward (input)",
        [&](cudnnConvolutionBwdDataAlgoPerf_t *perf, int cap, int *n) {
            return cudnnGetConvolutionBackwardDataAlgorithm_v7(
                k->h, k->o->w, k->o->y, k->o->conv, k->o->x, cap, n, perf);
        },
        [&](cudnnConvolutionBwdDataAlgoPerf_t *perf, int cap, int *n, void *ws,
            size_t bytes) {
            return cudnnFindConvolutionBackwardDataAlgorithmEx(
                k->h, k->o->w, ct_ptr(call->in[1]), k->o->y, ct_ptr(call->in[0]),
                k->o->conv, k->o->x, ct_ptr(call->out[0]), cap, n, perf, ws, bytes);
        },
        [&](cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes) {
            return cudnnGetConvolutionBackwardDataWorkspaceSize(
                k->h, k->o->w, k->o->y, k->o->conv, k->o->x, algo, bytes);
        },
        &ch));
    const ConvObjects *o = k->o;
    const cudnnConvolutionBwdDataAlgo_t algo = (cudnnConvolutionBwdDataAlgo_t)ch.algo;
    const size_t ws_size = ch.workspace;
    void *ws;
    CT_RETURN_IF_ERROR(ct_cuda_scratch(call->backend, ws_size, &ws));
    CtDType dt = k->d.data;
    CtStatus st = CT_CUDNN_STATUS(cudnnConvolutionBackwardData(
        k->h, ct_dnn_one(dt), o->w, ct_ptr(call->in[1]), o->y, ct_ptr(call->in[0]),
        o->conv, algo, ws, ws_size, ct_dnn_zero(dt), o->x, ct_ptr(call->out[0])));
    ct_cuda_scratch_free(call->backend, ws, ws_size);
    return st;
}

static CtStatus backward_filter(ConvCall *k)
{
    const CtOpCall *call = k->call;
    CtDnnChoice ch;
    CT_RETURN_IF_ERROR(choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
        k, CT_DNN_CALL_BACKWARD_FILTER, "conv2d backward (weight)",
        [&](cudnnConvolutionBwdFilterAlgoPerf_t *perf, int cap, int *n) {
            return cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                k->h, k->o->x, k->o->y, k->o->conv, k->o->w, cap, n, perf);
        },
        [&](cudnnConvolutionBwdFilterAlgoPerf_t *perf, int cap, int *n, void *ws,
            size_t bytes) {
            return cudnnFindConvolutionBackwardFilterAlgorithmEx(
                k->h, k->o->x, ct_ptr(call->in[1]), k->o->y, ct_ptr(call->in[0]),
                k->o->conv, k->o->w, ct_ptr(call->out[0]), cap, n, perf, ws, bytes);
        },
        [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t *bytes) {
            return cudnnGetConvolutionBackwardFilterWorkspaceSize(
                k->h, k->o->x, k->o->y, k->o->conv, k->o->w, algo, bytes);
        },
        &ch));
    const ConvObjects *o = k->o;
    const cudnnConvolutionBwdFilterAlgo_t algo = (cudnnConvolutionBwdFilterAlgo_t)ch.algo;
    const size_t ws_size = ch.workspace;
    void *ws;
    CT_RETURN_IF_ERROR(ct_cuda_scratch(call->backend, ws_size, &ws));
    CtDType dt = k->d.data;
    CtStatus st = CT_CUDNN_STATUS(cudnnConvolutionBackwardFilter(
        k->h, ct_dnn_one(dt), o->x, ct_ptr(call->in[1]), o->y, ct_ptr(call->in[0]),
        o->conv, algo, ws, ws_size, ct_dnn_zero(dt), o->w, ct_ptr(call->out[0])));
    ct_cuda_scratch_free(call->backend, ws, ws_size);
    return st;
}

static CtStatus run_native(const CtOpCall *call, CtCudaCtx *c, CtDType dt,
                           CtStatus (*body)(ConvCall *));

/* run_native's arguments for ct_cuda_run_as. */
typedef struct NativeArgs {
    CtCudaCtx *c;
    CtDType dt;
    CtStatus (*body)(ConvCall *);
} NativeArgs;

static CtStatus run_native_as(const CtOpCall *call, void *arg)
{
    const NativeArgs *a = (const NativeArgs *)arg;
    return run_native(call, a->c, a->dt, a->body);
}

static CtStatus backward_weight(ConvCall *k);

/* cuDNN has no bf16/f16 bias gradient: gb of a `low` call summed from gy
 * widened to f32, and rounded back. */
static CtStatus bias_grad_widened(const CtOpCall *call, CtCudaCtx *c, CtDType low)
{
    CtOpCall sub = *call;
    sub.out[0] = NULL; /* gb only: x is not read */
    sub.in[1] = NULL;
    NativeArgs a = {c, CT_F32, backward_weight};
    return ct_cuda_run_as(&sub, low, CT_F32, run_native_as, &a);
}

/* BWD_WEIGHT: gw and gb, each optional. */
static CtStatus backward_weight(ConvCall *k)
{
    const CtOpCall *call = k->call;
    if (call->out[0]) CT_RETURN_IF_ERROR(backward_filter(k));
    if (!call->out[1]) return CT_OK;
    CtDType dt = k->d.data;
    if (dt == CT_BF16 || dt == CT_F16) return bias_grad_widened(call, k->c, dt);
    CT_RETURN_IF_ERROR(objects(k)); /* (built, when gw was not asked for) */
    CT_CUDNN_CHECK(cudnnConvolutionBackwardBias(k->h, ct_dnn_one(dt), k->o->y,
                                                ct_ptr(call->in[0]), ct_dnn_zero(dt),
                                                k->o->b, ct_ptr(call->out[1])));
    return CT_OK;
}

/* An empty batch, channel range or output: the outputs that exist are
 * empty, or zero for the backward ops (cuDNN rejects empty operands). */
static CtStatus run_empty(const CtOpCall *call, CtCudaCtx *c)
{
    for (int i = 0; i < CT_CALL_MAX_OUT; i++) {
        Tensor *t = call->out[i];
        if (!t) continue;
        size_t bytes = (size_t)tensor_numel(t) * ct_dtype_size(t->dtype);
        if (bytes) CT_CUDA_CHECK(cudaMemsetAsync(ct_ptr(t), 0, bytes, c->stream));
    }
    return CT_OK;
}

static CtStatus run_native(const CtOpCall *call, CtCudaCtx *c, CtDType dt,
                           CtStatus (*body)(ConvCall *))
{
    const int64_t c_pad =
        ct_dnn_padded_channels((const CtConv2dParams *)call->params, dt);
    if (c_pad != ((const CtConv2dParams *)call->params)->c) {
        NativeArgs a = {c, dt, body};
        return ct_cuda_conv_padded(call, c, c_pad, run_native_as, &a);
    }
    ConvCall k = {};
    k.call = call;
    k.c = c;
    CT_RETURN_IF_ERROR(
        ct_dnn_conv((const CtConv2dParams *)call->params, dt, ct_allow_tf32(), &k.d));
    CT_RETURN_IF_ERROR(ct_cuda_dnn(c, &k.h));
    CtStatus st = body(&k);
    conv_destroy(&k.own);
    return st;
}

/* Whether an operand lies less than 16 bytes aligned (a parameter or its
 * gradient at an odd offset of a packed bf16/f16 block): cuDNN's engines
 * may assume vector alignment, and a pointer is not part of what their
 * choice reads. */
static bool misaligned(const CtOpCall *call)
{
    for (int i = 0; i < CT_CALL_MAX_IN; i++)
        if (call->in[i] && (uintptr_t)ct_ptr(call->in[i]) % 16 != 0) return true;
    for (int i = 0; i < CT_CALL_MAX_OUT; i++)
        if (call->out[i] && (uintptr_t)ct_ptr(call->out[i]) % 16 != 0) return true;
    return false;
}

static CtStatus run(const CtOpCall *call, CtStatus (*body)(ConvCall *))
{
    const CtConv2dParams *p = (const CtConv2dParams *)call->params;
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    if (p->n == 0 || p->c == 0 || p->o == 0 || p->oh == 0 || p->ow == 0)
        return run_empty(call, c);
    CtDType dt = (call->op == CT_OP_CONV2D_BWD_WEIGHT ? call->in[1] : call->in[0])->dtype;
    CtDType low = ct_dnn_conv_dtype(p, dt);
    /* autocast: the f32 operands rounded to `low`, the convolution in `low`
     * with f32 accumulation, the results widened back to f32; operands
     * misaligned: the call on aligned scratch copies (of the same dtype) */
    NativeArgs a = {c, low, body};
    CT_RETURN_IF_ERROR(low == dt && !misaligned(call)
                           ? run_native(call, c, dt, body)
                           : ct_cuda_run_as(call, dt, low, run_native_as, &a));
    if (ct_cuda_sync_mode()) CT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return CT_OK;
}

static CtStatus conv_forward(const CtOpCall *call)
{
    return run(call, forward);
}

static CtStatus conv_backward_data(const CtOpCall *call)
{
    return run(call, backward_data);
}

static CtStatus conv_backward_weight(const CtOpCall *call)
{
    return run(call, backward_weight);
}

/* Operands of one dtype among f32, f64, bf16, f16; f64 only in NCHW (the
 * front-end then runs it so). A forward over zero input channels (y = bias,
 * which cuDNN does not express) is left to the dispatcher's "not supported"
 * error. */
static bool conv_supports(const CtOpCall *call)
{
    const CtConv2dParams *p = (const CtConv2dParams *)call->params;
    const Tensor *ref = call->op == CT_OP_CONV2D_BWD_WEIGHT ? call->in[1] : call->in[0];
    CtDType dt = ref->dtype;
    if (dt != CT_F32 && dt != CT_F64 && dt != CT_BF16 && dt != CT_F16) return false;
    if (dt == CT_F64 && p->nhwc) return false; /* cuDNN's f64 engines are NCHW's */
    if (call->op == CT_OP_CONV2D && p->c == 0 && call->in[2] && p->n > 0 && p->oh > 0 &&
        p->ow > 0)
        return false;
    for (int i = 0; i < CT_CALL_MAX_IN; i++)
        if (call->in[i] && call->in[i]->dtype != dt) return false;
    for (int i = 0; i < CT_CALL_MAX_OUT; i++)
        if (call->out[i] && call->out[i]->dtype != dt) return false;
    return true;
}

void ct_cuda_register_conv(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_CONV2D] = conv_forward;
    k[CT_OP_CONV2D_BWD_DATA] = conv_backward_data;
    k[CT_OP_CONV2D_BWD_WEIGHT] = conv_backward_weight;
    for (int op = CT_OP_CONV2D; op <= CT_OP_CONV2D_BWD_WEIGHT; op++)
        s[op] = conv_supports;
}
