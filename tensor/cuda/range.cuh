/* Private to tensor/cuda: checking an op's index tensor before its kernel
 * (range.cu, range_body.h). CUDA sources only. */
#ifndef CTRAINER_TENSOR_CUDA_RANGE_CUH
#define CTRAINER_TENSOR_CUDA_RANGE_CUH

#include "common.cuh"
#include "range_body.h"

/* Checks every element of `index` (contiguous CT_I64 on c's device) on c's
 * stream (flag scratch from be's caching allocator) and waits for the answer: *pos <- the
 * position (linear, in index's elements) of the first index rc does not accept and *value
 * <- that index, or *pos <- -1 when all are fine. CT_ERR_BACKEND when a CUDA call fails.
 */
CtStatus ct_cuda_check_range(const CtBackend *be, CtCudaCtx *c, const Tensor *index,
                             CtRangeCheck rc, int64_t *pos, int64_t *value);

#endif
