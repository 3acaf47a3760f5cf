/* Check macros for CUDA runtime, cuBLAS(Lt) and cuDNN calls (CUDA sources
 * only).
 *
 * Every call is evaluated exactly once. On failure the macro records
 *     CT_ERR_BACKEND "<call text> failed at <file>:<line>: <error string>"
 * and makes the enclosing function return that status. The checks never
 * compile out (they do not depend on NDEBUG).
 *
 *     CT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, kind, ctx->stream));
 *     my_kernel<<<grid, block, 0, ctx->stream>>>(...);
 *     CT_CUDA_CHECK_LAUNCH("my_kernel", ctx->stream);
 *
 * Kernel launches are asynchronous: a fault inside a kernel is reported by
 * whichever CUDA call happens to run next. With CTRAINER_CUDA_SYNC=1 in the
 * environment, CT_CUDA_CHECK_LAUNCH also synchronises the stream, so the
 * error is reported at the launch that caused it (slow; for debugging).
 */
#ifndef CTRAINER_TENSOR_CUDA_CHECK_CUH
#define CTRAINER_TENSOR_CUDA_CHECK_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <cuda_runtime_api.h>

#include "ctrainer/status.h"

/* Record a failed call (and clear CUDA's non-sticky last error). */
CtStatus ct_cuda_fail(cudaError_t e, const char *call, const char *file, int line);
CtStatus ct_cublas_fail(cublasStatus_t s, const char *call, const char *file, int line);
CtStatus ct_cudnn_fail(cudnnStatus_t s, const char *call, const char *file, int line);
/* cudaGetLastError after a launch, then a stream synchronise when
 * CTRAINER_CUDA_SYNC=1. */
cudaError_t ct_cuda_after_launch(cudaStream_t stream);
/* Whether CTRAINER_CUDA_SYNC=1 (read once). */
bool ct_cuda_sync_mode(void);

static inline CtStatus ct_cuda_status_at(cudaError_t e, const char *call,
                                         const char *file, int line)
{
    return e == cudaSuccess ? CT_OK : ct_cuda_fail(e, call, file, line);
}

static inline CtStatus ct_cublas_status_at(cublasStatus_t s, const char *call,
                                           const char *file, int line)
{
    return s == CUBLAS_STATUS_SUCCESS ? CT_OK : ct_cublas_fail(s, call, file, line);
}

static inline CtStatus ct_cudnn_status_at(cudnnStatus_t s, const char *call,
                                          const char *file, int line)
{
    return s == CUDNN_STATUS_SUCCESS ? CT_OK : ct_cudnn_fail(s, call, file, line);
}

/* Expression forms: evaluate to the CtStatus without returning. */
#define CT_CUDA_STATUS(call)   ct_cuda_status_at((call), #call, __FILE__, __LINE__)
#define CT_CUBLAS_STATUS(call) ct_cublas_status_at((call), #call, __FILE__, __LINE__)
#define CT_CUDNN_STATUS(call)  ct_cudnn_status_at((call), #call, __FILE__, __LINE__)

/* Statement forms: return the status from the enclosing function on failure. */
#define CT_RETURN_IF_ERROR(expr)                                                         \
    do {                                                                                 \
        CtStatus ct_st_ = (expr);                                                        \
        if (ct_st_ != CT_OK) return ct_st_;                                              \
    } while (0)
#define CT_CUDA_CHECK(call)   CT_RETURN_IF_ERROR(CT_CUDA_STATUS(call))
#define CT_CUBLAS_CHECK(call) CT_RETURN_IF_ERROR(CT_CUBLAS_STATUS(call))
#define CT_CUDNN_CHECK(call)  CT_RETURN_IF_ERROR(CT_CUDNN_STATUS(call))
/* After a <<<...>>> launch; `what` names the kernel (a string). */
#define CT_CUDA_CHECK_LAUNCH(what, stream)                                               \
    CT_RETURN_IF_ERROR(ct_cuda_status_at(ct_cuda_after_launch(stream),                   \
                                         "launch of " what, __FILE__, __LINE__))

#endif
