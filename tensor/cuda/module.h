/* Private to tensor/: the interface between libctrainer and the CUDA module.
 *
 * The CUDA backend is built as a separate shared object,
 * libctrainer_cuda.so, that links cudart and cuBLAS; libctrainer links no
 * CUDA library. tensor/cuda_module.c opens the module with dlopen the first
 * time a CUDA device is asked for (ct_cuda_device_count, a cuda:N
 * instance), so a CPU-only run never maps a CUDA library.
 *
 * The module exports one symbol, CT_CUDA_MODULE_ENTRY, of type
 * CtCudaModuleEntry. The library passes it the table of library functions
 * the module calls (the module resolves no symbol against the program, so
 * it works the same whether the program links libctrainer statically or
 * shared) and gets back the module's table. Both tables carry
 * CT_CUDA_MODULE_ABI; a module of another ABI is refused.
 *
 * C only: the library's C sources and the module's .cu files include it.
 */
#ifndef CTRAINER_TENSOR_CUDA_MODULE_H
#define CTRAINER_TENSOR_CUDA_MODULE_H

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a table below, CtBackendIface, CtOpCall, Tensor or an
 * op's params struct changes layout. */
#define CT_CUDA_MODULE_ABI   6
#define CT_CUDA_MODULE_ENTRY "ct_cuda_module_open"
#define CT_CUDA_MODULE_FILE  "libctrainer_cuda.so"

/* Library functions the module calls (each is the function of that name). */
typedef struct CtCudaHost {
    int abi;
    CtStatus (*error)(CtStatus s, const char *fmt, ...);
    CtStatus (*last_status)(void);
    const CtBackend *(*backend_for)(CtDevice dev);
    const CtBackend *(*backend_peek)(CtDevice dev);
    size_t (*dtype_size)(CtDType dt);
    const char *(*dtype_name)(CtDType dt);
    uint16_t (*f32_to_bf16)(float x);
    uint16_t (*f32_to_f16)(float x);
    int64_t (*tensor_numel)(const Tensor *t);
    bool (*tensor_is_contiguous)(const Tensor *t);
    Tensor *(*tensor_retain)(Tensor *t);
    void (*tensor_free)(Tensor *t);
    void *(*backend_alloc)(const CtBackend *be, size_t nbytes);
    void (*backend_free)(const CtBackend *be, void *p, size_t nbytes);
    bool (*deterministic)(void);
    bool (*allow_tf32)(void);
    bool (*cudnn_benchmark)(void);
} CtCudaHost;

/* What the module provides; the functions are those of tensor/cuda/cuda.h
 * and ct_cuda_initialized (tensor.h). */
typedef struct CtCudaModule {
    int abi;
    int (*device_count)(void);
    bool (*initialized)(void);
    CtStatus (*select_device)(int device);
    void *(*stream)(const CtBackend *be);
    const CtBackendIface *(*iface)(void);
} CtCudaModule;

/* The entry point: keeps `host` (which outlives the module) and returns the
 * module's table (static storage), or NULL when host->abi differs. */
typedef const CtCudaModule *(*CtCudaModuleEntry)(const CtCudaHost *host);

/* Library side (tensor/cuda_module.c): the loaded module, loading it on the
 * first call; NULL when it cannot be loaded, with the reason in
 * ct_cuda_module_error (nothing recorded). Thread-safe. */
const CtCudaModule *ct_cuda_module(void);
/* Why the module could not be loaded: names every path tried and dlerror();
 * "" when it loaded. */
const char *ct_cuda_module_error(void);

#ifdef __cplusplus
}
#endif
#endif
