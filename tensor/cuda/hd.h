/* Private to tensor/cuda: what a kernel shares with the host test harness.
 *
 * Every hand-written kernel keeps its work in a `__host__ __device__`
 * "thread body" (the tensor/cuda body headers): a function of the thread's
 * coordinates (CtThread) and the kernel's arguments, holding the whole
 * grid-stride loop. The __global__ kernel only calls it with its own
 * coordinates (ct_cuda_thread). These headers compile with nvcc and with the
 * host C++ compiler, so tests/cuda_host runs the very same bodies on the
 * CPU over a grid × block index space and compares with the CPU backend.
 *
 * C++ only (templates); no CUDA runtime header is needed.
 */
#ifndef CTRAINER_TENSOR_CUDA_HD_H
#define CTRAINER_TENSOR_CUDA_HD_H

#include "../internal.h"

#ifdef __CUDACC__
#define CT_HD __host__ __device__ __forceinline__
#else
#define CT_HD inline
#endif

/* One thread's place in a 1-D launch: blockIdx.x, threadIdx.x, gridDim.x,
 * blockDim.x. */
typedef struct CtThread {
    int64_t block, thread, nblocks, nthreads;
} CtThread;

#ifdef __CUDACC__
__device__ __forceinline__ CtThread ct_cuda_thread(void)
{
    CtThread t = {(int64_t)blockIdx.x, (int64_t)threadIdx.x, (int64_t)gridDim.x,
                  (int64_t)blockDim.x};
    return t;
}
#endif

/* Grid-stride loop of thread t over [0, n). */
#define CT_THREAD_FOR(i, t, n)                                                           \
    for (int64_t i = (t).block * (t).nthreads + (t).thread; i < (n);                     \
         i += (t).nthreads * (t).nblocks)

/* Launch shape for a grid-stride loop over n elements (n > 0): blocks of
 * CT_CUDA_THREADS, at most CT_CUDA_MAX_BLOCKS of them. */
#define CT_CUDA_THREADS    256
#define CT_CUDA_MAX_BLOCKS 65536
static inline unsigned ct_cuda_blocks(int64_t n)
{
    int64_t b = (n + CT_CUDA_THREADS - 1) / CT_CUDA_THREADS;
    return (unsigned)(b < CT_CUDA_MAX_BLOCKS ? b : CT_CUDA_MAX_BLOCKS);
}

/* ------------------------------------------------------ strided indexing */

/* Geometry of up to CT_CUDA_MAX_OPS operands of one shape, passed to kernels
 * by value. Size-1 dims are dropped and dims contiguous for every operand
 * merged, so contiguous operands become one dim and the offset of linear
 * index i is a multiply. */
#define CT_CUDA_MAX_OPS 4
typedef struct CtCudaIndex {
    int ndim;
    int64_t shape[CT_MAX_DIMS];
    int64_t stride[CT_CUDA_MAX_OPS][CT_MAX_DIMS]; /* in elements */
} CtCudaIndex;

/* Fills ix for ts[0..nops) (nops <= CT_CUDA_MAX_OPS) over `shape` (each
 * operand has that shape, broadcast operands through stride 0); returns the
 * element count. Host code. */
static inline int64_t ct_cuda_index_init(CtCudaIndex *ix, int ndim, const int64_t *shape,
                                         int nops, const Tensor *const *ts)
{
    int n = 0;
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        numel *= shape[d];
        if (shape[d] == 1) continue;
        bool merge = n > 0;
        for (int k = 0; merge && k < nops; k++)
            merge = ix->stride[k][n - 1] == ts[k]->stride[d] * shape[d];
        if (merge) {
            ix->shape[n - 1] *= shape[d];
            for (int k = 0; k < nops; k++) ix->stride[k][n - 1] = ts[k]->stride[d];
        } else {
            ix->shape[n] = shape[d];
            for (int k = 0; k < nops; k++) ix->stride[k][n] = ts[k]->stride[d];
            n++;
        }
    }
    if (n == 0) { /* scalar: one element at offset 0 */
        ix->shape[0] = 1;
        for (int k = 0; k < CT_CUDA_MAX_OPS; k++) ix->stride[k][0] = 0;
        n = 1;
    }
    for (int k = nops; k < CT_CUDA_MAX_OPS; k++)
        for (int d = 0; d < n; d++) ix->stride[k][d] = 0;
    ix->ndim = n;
    return numel;
}

/* ------------------------------------------------------ packed access */

/* CtPack<S>: the elements of type S in one 16-byte load or store. The
 * packed thread bodies give item j the elements [j * N, j * N + N) of
 * contiguous, 16-byte aligned operands (the last item may be partial and
 * goes element by element), with the same per-element arithmetic as the
 * strided bodies, so both give the same bits. */
template <typename S> struct CtPack {
    enum { N = 16 / sizeof(S) };
    struct alignas(16) V {
        S v[N];
    };
};

/* Whether ix (over NOPS operands at ptrs) is one contiguous run of every
 * operand, each 16-byte aligned: the packed bodies apply. Host code. */
static inline bool ct_cuda_packed_ok(const CtCudaIndex &ix, int nops,
                                     const void *const *ptrs)
{
    if (ix.ndim != 1) return false;
    for (int k = 0; k < nops; k++)
        if (ix.stride[k][0] != 1 || (uintptr_t)ptrs[k] % 16 != 0) return false;
    return true;
}

/* Element offsets of row-major linear index i for the first NOPS operands. */
template <int NOPS>
CT_HD void ct_cuda_offsets(const CtCudaIndex &ix, int64_t i, int64_t *off)
{
    for (int k = 0; k < NOPS; k++) off[k] = 0;
    if (ix.ndim == 1) {
        for (int k = 0; k < NOPS; k++) off[k] = i * ix.stride[k][0];
        return;
    }
    for (int d = ix.ndim - 1; d >= 0; d--) {
        int64_t q = i / ix.shape[d];
        int64_t r = i - q * ix.shape[d];
        i = q;
        for (int k = 0; k < NOPS; k++) off[k] += r * ix.stride[k][d];
    }
}

#endif
