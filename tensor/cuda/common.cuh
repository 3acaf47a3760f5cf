/* Private to tensor/cuda: the instance context, strided indexing, kernel
 * registration. CUDA sources only. */
#ifndef CTRAINER_TENSOR_CUDA_COMMON_CUH
#define CTRAINER_TENSOR_CUDA_COMMON_CUH

#include "check.cuh"
#include "cuda.h"

#include <pthread.h>

/* Freed pinned blocks kept for reuse (pinned.cu). */
typedef struct CtPinnedBlock CtPinnedBlock;
typedef struct CtPinnedCache {
    pthread_mutex_t mu;
    CtPinnedBlock *head;
    int n;
} CtPinnedCache;

/* The context of one cuda:N instance (CtBackend.context), made by the
 * iface's init and freed by its teardown. A kernel takes it from its call
 * (ct_cuda_call_ctx) and launches on its stream; there is no other stream
 * state. */
typedef struct CtCudaCtx {
    int device;
    cudaStream_t stream;  /* non-blocking; every kernel and copy runs on it */
    pthread_mutex_t mu;   /* guards the lazy creation of blas */
    cublasHandle_t blas;  /* bound to `stream`; NULL until ct_cuda_blas */
    bool async_copies;    /* atomic: asynchronous copies were queued on stream */
    CtPinnedCache pinned; /* used on the pinned provider (ct_pinned_backend) */
} CtCudaCtx;

/* Makes be's device current on this thread and returns be's context. */
CtStatus ct_cuda_enter(const CtBackend *be, CtCudaCtx **out);
/* The context of the instance running a call (ct_dispatch sets it). */
static inline CtStatus ct_cuda_call_ctx(const CtOpCall *call, CtCudaCtx **out)
{
    return ct_cuda_enter(call->backend, out);
}
/* The context's cuBLAS handle, created on first use. */
CtStatus ct_cuda_blas(CtCudaCtx *ctx, cublasHandle_t *out);

/* Pinned host memory (pinned.cu): the iface's host_alloc/host_free, an
 * empty cache for a new context, and emptying it (when cudaHostAlloc fails,
 * and at teardown). A block freed while asynchronous copies may read it is
 * reused only after they finish: it waits for the stream of every instance
 * whose context has async_copies set. */
void *ct_cuda_host_alloc(const CtBackend *be, size_t nbytes);
void ct_cuda_host_free(const CtBackend *be, void *p);
void ct_cuda_pinned_init(CtPinnedCache *pc);
void ct_cuda_host_empty_cache(CtCudaCtx *ctx);

/* Kernel table slots, filled by each kernel file. */
void ct_cuda_register_copy(CtKernelFn *k, CtSupportsFn *s);        /* FILL, COPY */
void ct_cuda_register_elementwise(CtKernelFn *k, CtSupportsFn *s); /* BINARY */
void ct_cuda_register_matmul(CtKernelFn *k, CtSupportsFn *s);      /* MATMUL */
void ct_cuda_register_random(CtKernelFn *k, CtSupportsFn *s);      /* RNG */

/* ------------------------------------------------------ strided indexing */

/* Geometry of up to CT_CUDA_MAX_OPS operands of one shape, passed to kernels
 * by value. Size-1 dims are dropped and dims contiguous for every operand
 * merged, so contiguous operands become one dim and the offset of linear
 * index i is a multiply. */
#define CT_CUDA_MAX_OPS 3
typedef struct CtCudaIndex {
    int ndim;
    int64_t shape[CT_MAX_DIMS];
    int64_t stride[CT_CUDA_MAX_OPS][CT_MAX_DIMS]; /* in elements */
} CtCudaIndex;

/* Fills ix for ts[0..nops) over `shape`; returns the element count. */
int64_t ct_cuda_index_init(CtCudaIndex *ix, int ndim, const int64_t *shape, int nops,
                           const Tensor *const *ts);

/* Element offsets of row-major linear index i for the first NOPS operands. */
template <int NOPS>
__device__ __forceinline__ void ct_cuda_offsets(const CtCudaIndex &ix, int64_t i,
                                                int64_t *off)
{
#pragma unroll
    for (int k = 0; k < NOPS; k++) off[k] = 0;
    if (ix.ndim == 1) {
#pragma unroll
        for (int k = 0; k < NOPS; k++) off[k] = i * ix.stride[k][0];
        return;
    }
    for (int d = ix.ndim - 1; d >= 0; d--) {
        int64_t q = i / ix.shape[d];
        int64_t r = i - q * ix.shape[d];
        i = q;
#pragma unroll
        for (int k = 0; k < NOPS; k++) off[k] += r * ix.stride[k][d];
    }
}

/* Launch shape for a grid-stride loop over n elements (n > 0). */
#define CT_CUDA_THREADS 256
static inline unsigned ct_cuda_blocks(int64_t n)
{
    int64_t b = (n + CT_CUDA_THREADS - 1) / CT_CUDA_THREADS;
    return (unsigned)(b < 65536 ? b : 65536);
}

/* Grid-stride loop over [0, n). */
#define CT_CUDA_FOR(i, n)                                                                \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);            \
         i += (int64_t)blockDim.x * gridDim.x)

#endif
