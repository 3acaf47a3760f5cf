/* The module's side of tensor/cuda/module.h: its one exported symbol, and
 * the library functions the CUDA sources call, forwarded to the library
 * through the table it passed in. The module is built with hidden
 * visibility, so these definitions serve the module's own calls only. */
#include <stdarg.h>
#include <stdio.h>

#include "common.cuh"
#include "module.h"

static const CtCudaHost *host; /* set by the entry point, before any other call */

extern "C" CtStatus ct_error(CtStatus s, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return host->error(s, "%s", msg);
}

extern "C" CtStatus ct_last_status(void)
{
    return host->last_status();
}

extern "C" const CtBackend *ct_backend_for(CtDevice dev)
{
    return host->backend_for(dev);
}

extern "C" const CtBackend *ct_backend_peek(CtDevice dev)
{
    return host->backend_peek(dev);
}

extern "C" size_t ct_dtype_size(CtDType dt)
{
    return host->dtype_size(dt);
}

extern "C" const char *ct_dtype_name(CtDType dt)
{
    return host->dtype_name(dt);
}

extern "C" uint16_t ct_f32_to_bf16(float x)
{
    return host->f32_to_bf16(x);
}

extern "C" uint16_t ct_f32_to_f16(float x)
{
    return host->f32_to_f16(x);
}

extern "C" int64_t tensor_numel(const Tensor *t)
{
    return host->tensor_numel(t);
}

extern "C" bool tensor_is_contiguous(const Tensor *t)
{
    return host->tensor_is_contiguous(t);
}

extern "C" Tensor *tensor_retain(Tensor *t)
{
    return host->tensor_retain(t);
}

extern "C" void tensor_free(Tensor *t)
{
    host->tensor_free(t);
}

extern "C" void *ct_backend_alloc(const CtBackend *be, size_t nbytes)
{
    return host->backend_alloc(be, nbytes);
}

extern "C" void ct_backend_free(const CtBackend *be, void *p, size_t nbytes)
{
    host->backend_free(be, p, nbytes);
}

extern "C" bool ct_deterministic(void)
{
    return host->deterministic();
}

extern "C" bool ct_allow_tf32(void)
{
    return host->allow_tf32();
}

extern "C" bool ct_cudnn_benchmark(void)
{
    return host->cudnn_benchmark();
}

static const CtCudaModule table = {
    CT_CUDA_MODULE_ABI,    ct_cuda_device_count, ct_cuda_initialized,
    ct_cuda_select_device, ct_cuda_stream,       ct_cuda_iface,
};

extern "C" __attribute__((visibility("default"))) const CtCudaModule *
ct_cuda_module_open(const CtCudaHost *h)
{
    if (!h || h->abi != CT_CUDA_MODULE_ABI) return NULL;
    host = h;
    return &table;
}
