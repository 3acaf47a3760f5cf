/* Private to tensor/cuda: the instance context and kernel registration.
 * CUDA sources only. */
#ifndef CTRAINER_TENSOR_CUDA_COMMON_CUH
#define CTRAINER_TENSOR_CUDA_COMMON_CUH

#include "algo_cache.h"
#include "lt_cache.h"
#include "check.cuh"
#include "cuda.h"
#include "hd.h"

#include <pthread.h>

/* Freed pinned blocks kept for reuse, and the events of blocks handed out
 * again, kept per device for the next free to record (pinned.cu). */
#define CT_PINNED_SPARE_EVENTS 8
typedef struct CtPinnedBlock CtPinnedBlock;
typedef struct CtPinnedCache {
    pthread_mutex_t mu;
    CtPinnedBlock *head;
    int n;
    cudaEvent_t spare[CT_MAX_CUDA_DEVICES][CT_PINNED_SPARE_EVENTS];
    int n_spare[CT_MAX_CUDA_DEVICES];
} CtPinnedCache;

/* The context of one cuda:N instance (CtBackend.context), made by the
 * iface's init and freed by its teardown. A kernel takes it from its call
 * (ct_cuda_call_ctx) and launches on its stream; there is no other stream
 * state. */
typedef struct CtRangeLog CtRangeLog;

typedef struct CtCudaCtx {
    int device;
    cudaStream_t stream;    /* non-blocking; every kernel and copy runs on it */
    pthread_mutex_t mu;     /* guards the lazy creation of the handles, the caches */
    cublasHandle_t blas;    /* bound to `stream`; NULL until ct_cuda_blas */
    cublasLtHandle_t lt;    /* NULL until ct_cuda_lt */
    cudnnHandle_t dnn;      /* bound to `stream`; NULL until ct_cuda_dnn */
    bool async_copies;      /* atomic: asynchronous copies were queued on stream */
    CtPinnedCache pinned;   /* used on the pinned provider (ct_pinned_backend) */
    CtAlgoCache conv_algos; /* under mu: conv.cu's chosen algorithms */
    CtLtCache lt_algos;     /* under mu: matmul.cu's chosen algorithms */
    CtRangeLog *ranges;     /* under mu: range.cu's queued index checks */
} CtCudaCtx;

/* Makes be's device current on this thread and returns be's context. */
CtStatus ct_cuda_enter(const CtBackend *be, CtCudaCtx **out);
/* The context of the instance running a call (ct_dispatch sets it). */
static inline CtStatus ct_cuda_call_ctx(const CtOpCall *call, CtCudaCtx **out)
{
    return ct_cuda_enter(call->backend, out);
}
/* The context's cuBLAS, cuBLASLt and cuDNN handles, each created on first
 * use (a run that never convolves never initialises cuDNN). */
CtStatus ct_cuda_blas(CtCudaCtx *ctx, cublasHandle_t *out);
CtStatus ct_cuda_lt(CtCudaCtx *ctx, cublasLtHandle_t *out);
CtStatus ct_cuda_dnn(CtCudaCtx *ctx, cudnnHandle_t *out);

/* Scratch memory from the instance's caching allocator (a library's
 * workspace), freed with ct_cuda_scratch_free once the work using it is
 * queued: every kernel of an instance runs on its one stream, so a later
 * reuse of the block is ordered after that work. NULL for nbytes 0. */
CtStatus ct_cuda_scratch(const CtBackend *be, size_t nbytes, void **out);
void ct_cuda_scratch_free(const CtBackend *be, void *p, size_t nbytes);

/* A contiguous tensor of this shape and dtype on `dev` over scratch memory
 * (run_as.cu), for a kernel's temporary operand; its block is released with
 * ct_cuda_scratch_free(be, s.data, s.nbytes) (a no-op while s.data is NULL,
 * as in a zeroed one). */
typedef struct CtScratchTensor {
    Tensor t;
    CtStorage s;
} CtScratchTensor;
CtStatus ct_cuda_scratch_tensor(const CtBackend *be, int ndim, const int64_t *shape,
                                CtDType dt, CtDevice dev, CtScratchTensor *out);

/* Runs fn on a copy of call in which every operand of dtype `from` is a
 * contiguous scratch copy in dtype `to` (run_as.cu): inputs converted
 * before fn, outputs converted back after it (so an output of dtype `from`
 * must be write-only). Other operands are passed as they are. */
CtStatus ct_cuda_run_as(const CtOpCall *call, CtDType from, CtDType to,
                        CtStatus (*fn)(const CtOpCall *converted, void *arg), void *arg);

/* Runs fn (the convolution body) on a copy of the convolution call whose
 * input-channel count is c_pad (> the call's, a multiple of 8; see
 * ct_dnn_padded_channels): x and w padded with zero channels into scratch
 * tensors, dx and dw computed padded and their first channels copied back
 * (pad_channels.cu). */
/* Destroys the convolution descriptors the instance keeps with its
 * algorithm choices (conv.cu); teardown only. */
void ct_cuda_conv_free(CtCudaCtx *c);
CtStatus ct_cuda_conv_padded(const CtOpCall *call, CtCudaCtx *c, int64_t c_pad,
                             CtStatus (*fn)(const CtOpCall *padded, void *arg),
                             void *arg);

/* Pinned host memory (pinned.cu): the iface's host_alloc/host_free, an
 * empty cache for a new context, and emptying it (when cudaHostAlloc fails,
 * and at teardown). A block freed while asynchronous copies may read it is
 * reused only after they finish: it waits for the stream of every instance
 * whose context has async_copies set. */
void *ct_cuda_host_alloc(const CtBackend *be, size_t nbytes);
void ct_cuda_host_free(const CtBackend *be, void *p);
void ct_cuda_pinned_init(CtPinnedCache *pc);
void ct_cuda_host_empty_cache(CtCudaCtx *ctx);

/* cuDNN's host scaling factors alpha = 1 and beta = 0: double for f64
 * data, float otherwise (conv.cu). */
const void *ct_dnn_one(CtDType dt);
const void *ct_dnn_zero(CtDType dt);
/* A cuDNN 4-D tensor descriptor of t's dims and strides (conv.cu). */
typedef struct CtDnnTensor CtDnnTensor;
CtStatus ct_dnn_tensor_create(const CtDnnTensor *t, CtDType dt,
                              cudnnTensorDescriptor_t *out);

/* y <- relu(y + b) in place, b (C) added along dim 1 of the contiguous
 * y (N, C, ...) of dtype f32, f64, bf16 or f16, or y <- relu(y) when b is
 * NULL: the ReLU of a ReLU-fused convolution or batch norm
 * (bias_relu.cu). */
CtStatus ct_cuda_bias_relu(Tensor *y, const Tensor *b, cudaStream_t stream);

/* Kernel table slots, filled by each kernel file. */
void ct_cuda_register_copy(CtKernelFn *k, CtSupportsFn *s);        /* FILL, COPY */
void ct_cuda_register_elementwise(CtKernelFn *k, CtSupportsFn *s); /* BINARY, WHERE */
void ct_cuda_register_matmul(CtKernelFn *k, CtSupportsFn *s);      /* MATMUL */
void ct_cuda_register_random(CtKernelFn *k, CtSupportsFn *s);      /* RNG */
/* SOFTMAX*, CROSS_ENTROPY* */
void ct_cuda_register_softmax(CtKernelFn *k, CtSupportsFn *s);
void ct_cuda_register_layer_norm(CtKernelFn *k, CtSupportsFn *s); /* LAYER_NORM* */
/* INDEX_SELECT, INDEX_ADD, GATHER, SCATTER_ADD, ONE_HOT */
void ct_cuda_register_index(CtKernelFn *k, CtSupportsFn *s);
void ct_cuda_register_conv(CtKernelFn *k, CtSupportsFn *s);    /* CONV2D (+BWD) */
void ct_cuda_register_bnorm(CtKernelFn *k, CtSupportsFn *s);   /* BATCH_NORM (+BWD) */
void ct_cuda_register_pool(CtKernelFn *k, CtSupportsFn *s);    /* POOL2D (+BWD) */
void ct_cuda_register_unary(CtKernelFn *k, CtSupportsFn *s);   /* UNARY(_BWD) */
void ct_cuda_register_reduce(CtKernelFn *k, CtSupportsFn *s);  /* (ARG_)REDUCE */
void ct_cuda_register_unscale(CtKernelFn *k, CtSupportsFn *s); /* UNSCALE */
void ct_cuda_register_optim(CtKernelFn *k, CtSupportsFn *s);   /* OPTIM_*, BLOCK_* */

/* Grid-stride kernels: the launch shape, strided indexing and the thread
 * bodies are in hd.h and the *_body.h headers. */

#endif
