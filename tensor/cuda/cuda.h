/* Private to tensor/: the CUDA backend's C-visible entry points.
 *
 * The .cu files of tensor/cuda (the CUDA module, tensor/cuda/module.h)
 * define these; in the library, tensor/cuda_module.c defines them too, as
 * calls into the module that load it first. They exist when the library is
 * built with CTRAINER_HAVE_CUDA. C code (registry.c, tests) may include this
 * header; it names no CUDA types.
 */
#ifndef CTRAINER_TENSOR_CUDA_H
#define CTRAINER_TENSOR_CUDA_H

#include "../internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices the runtime sees, counted once per process. 0 (and
 * no recorded error) when there is no driver or no device. */
int ct_cuda_device_count(void);

/* The stream of a cuda:N instance (a cudaStream_t), for tests that check
 * instances apart. */
void *ct_cuda_stream(const CtBackend *be);

/* Makes `device` current on this thread (cudaSetDevice). On failure records
 * CT_ERR_BACKEND with the call, file:line and the CUDA error string. */
CtStatus ct_cuda_select_device(int device);
/* Records that this process made a CUDA context (ct_cuda_initialized). */
void ct_cuda_mark_used(void);

#ifdef __cplusplus
}
#endif
#endif
