/* Index range checks before the indexing and cross-entropy kernels
 * (range.cuh). The position of the first bad index is the minimum over
 * threads, so it does not depend on the launch. */
#include "range.cuh"

__global__ void range_kernel(const int64_t *ix, int64_t n, CtRangeCheck rc,
                             unsigned long long *first_bad)
{
    ct_range_thread(ct_cuda_thread(), ix, n, rc, first_bad);
}

/* The check proper, on a device word `flag` the caller frees. */
static CtStatus check_into(CtCudaCtx *c, const int64_t *ix, int64_t n, CtRangeCheck rc,
                           unsigned long long *flag, int64_t *pos, int64_t *value)
{
    unsigned long long first = ~0ull;
    CT_CUDA_CHECK(cudaMemsetAsync(flag, 0xFF, sizeof *flag, c->stream));
    range_kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(ix, n, rc, flag);
    CT_CUDA_CHECK_LAUNCH("range_kernel", c->stream);
    CT_CUDA_CHECK(
        cudaMemcpyAsync(&first, flag, sizeof first, cudaMemcpyDeviceToHost, c->stream));
    CT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    if (first == ~0ull) return CT_OK;
    *pos = (int64_t)first;
    CT_CUDA_CHECK(cudaMemcpy(value, ix + first, sizeof *value, cudaMemcpyDeviceToHost));
    return CT_OK;
}

CtStatus ct_cuda_check_range(const CtBackend *be, CtCudaCtx *c, const Tensor *index,
                             CtRangeCheck rc, int64_t *pos, int64_t *value)
{
    *pos = -1;
    int64_t n = tensor_numel(index);
    if (n == 0) return CT_OK;
    void *flag;
    CT_RETURN_IF_ERROR(ct_cuda_scratch(be, sizeof(unsigned long long), &flag));
    CtStatus st = check_into(c, (const int64_t *)ct_ptr(index), n, rc,
                             (unsigned long long *)flag, pos, value);
    ct_cuda_scratch_free(be, flag, sizeof(unsigned long long));
    return st;
}
