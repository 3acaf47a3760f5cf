/* Private to tensor/: backend instances, the registry, the caching allocator.
 *
 * The model (after ggml-backend):
 *
 *   CtBackendIface  one const table per kind of backend (cpu, cuda): memory,
 *                   copies, streams, and the kernel + `supports` slot of
 *                   every CtOp. Shared by all devices of that kind; holds no
 *                   state.
 *   CtBackend       one INSTANCE per device: {iface, device, context} plus
 *                   the device's caching allocator. The context is owned by
 *                   the instance and made by iface->init: on CUDA the
 *                   device's stream, cuBLAS handle and pinned-block cache
 *                   (tensor/cuda/common.cuh); on the CPU nothing (NULL).
 *   registry        ct_backend_for(dev) creates the instance of `dev` on
 *                   first use (thread-safe: concurrent callers get the same
 *                   instance) and returns it afterwards. Instances live until
 *                   ct_backend_registry_shutdown, which runs at process exit
 *                   (atexit) and frees every context and cached block.
 *
 * Streams are explicit: ct_dispatch runs a call through the instance of its
 * device and hands the instance to the kernel in CtOpCall.backend; a kernel
 * takes its stream (and any handle) from call->backend->context, never from
 * a global. Every kernel and copy of one instance runs on that instance's
 * one stream, so they are ordered among themselves.
 *
 * Adding a backend: write an iface (kernels[op] NULL = unsupported;
 * supports[op] NULL = accepts every call of a supported op; NULL memory or
 * async entries as documented below), give it a CtDeviceType and teach the
 * registry (tensor/registry.c) which iface serves that type. No op or layer
 * changes.
 */
#ifndef CTRAINER_TENSOR_BACKEND_H
#define CTRAINER_TENSOR_BACKEND_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most CUDA devices one process addresses (registry slots cuda:0..15). */
#define CT_MAX_CUDA_DEVICES 16

typedef struct CtAllocCache CtAllocCache;

typedef struct CtBackendIface {
    const char *name;
    CtDeviceType type;
    /* Optional. init fills be->context for be->device (records an error on
     * failure; the instance is then not created); teardown frees it. */
    CtStatus (*init)(CtBackend *be);
    void (*teardown)(CtBackend *be);
    /* System memory of the instance's device, behind the caching allocator:
     * alloc returns NULL on failure without recording an error. */
    void *(*alloc)(const CtBackend *be, size_t nbytes);
    void (*free)(const CtBackend *be, void *p);
    /* Copies n bytes between host and devices of this kind (either side may
     * be the host); synchronous, ordered after the instance's queued work. */
    CtStatus (*memcpy)(const CtBackend *be, void *dst, CtDevice ddev, const void *src,
                       CtDevice sdev, size_t n);
    /* Optional (NULL on the CPU; tensor/async.c then takes the synchronous
     * path). host_alloc/host_free: page-locked host memory the device can
     * DMA from (NULL on failure); host_free must not let a block be reused
     * before asynchronous copies that read it completed. memcpy_async: as
     * memcpy, but only enqueued on the instance's stream (the host side is
     * page-locked). synchronize: waits for the instance's stream. */
    void *(*host_alloc)(const CtBackend *be, size_t nbytes);
    void (*host_free)(const CtBackend *be, void *p);
    CtStatus (*memcpy_async)(const CtBackend *be, void *dst, CtDevice ddev,
                             const void *src, CtDevice sdev, size_t n);
    CtStatus (*synchronize)(const CtBackend *be);
    /* CT_OP_COUNT entries each. */
    const CtKernelFn *kernels;
    const CtSupportsFn *supports;
} CtBackendIface;

struct CtBackend {
    const CtBackendIface *iface;
    CtDevice device;
    void *context;       /* owned; iface->init / iface->teardown */
    CtAllocCache *cache; /* owned; this device's caching allocator */
};

/* ------------------------------------------------------------- registry */

/* The instance of `dev`, created on first use; NULL + CT_ERR_DEVICE when the
 * device does not exist or its backend is not built, or the error of a
 * failed creation (which is retried on the next call). */
const CtBackend *ct_backend_for(CtDevice dev);
/* The instance of `dev` if it exists already, else NULL; records nothing. */
const CtBackend *ct_backend_peek(CtDevice dev);
/* The instance that provides page-locked host memory, or NULL when no
 * CUDA device is visible: the first CUDA instance the process made (so a
 * process training on cuda:k pins through cuda:k and never starts a
 * context on GPU 0), cuda:0 when none was made yet; fixed from its first
 * call until ct_backend_registry_shutdown. */
const CtBackend *ct_pinned_backend(void);
/* Destroys every instance (CUDA devices first, the CPU last); a later
 * ct_backend_for creates fresh ones. Memory still in use must not be freed
 * afterwards. Registered with atexit when the first instance is made. */
void ct_backend_registry_shutdown(void);

/* An unregistered instance of iface for dev (the registry makes its
 * instances with it; tests make private ones). NULL + error on failure.
 * ct_backend_destroy returns its cached blocks and tears its context down. */
CtBackend *ct_backend_create(const CtBackendIface *iface, CtDevice dev);
void ct_backend_destroy(CtBackend *be);

/* The ifaces (tables filled on first call). */
const CtBackendIface *ct_cpu_iface(void);
const CtBackendIface *ct_cuda_iface(void); /* tensor/cuda; CUDA builds only */

/* ------------------------------------------------------- through an instance */

/* Whether the instance has a kernel for the call and that kernel accepts it
 * (dtypes, layout). */
bool ct_backend_supports(const CtBackend *be, const CtOpCall *c);
/* Runs the call on `be` (c->backend is ignored; the kernel sees be).
 * Records "<op>: not supported on <device> for <dtype>" when no kernel fits. */
CtStatus ct_backend_run(const CtBackend *be, const CtOpCall *c);
/* be->iface->memcpy. */
static inline CtStatus ct_backend_memcpy(const CtBackend *be, void *dst, CtDevice ddev,
                                         const void *src, CtDevice sdev, size_t n)
{
    return be->iface->memcpy(be, dst, ddev, src, sdev, n);
}

/* ------------------------------------------------ caching allocator */

/* A cache for one instance (tensor/allocator.c); NULL on OOM (nothing
 * recorded). ct_alloc_cache_free gives its blocks back through be->iface. */
CtAllocCache *ct_alloc_cache_new(void);
void ct_alloc_cache_free(const CtBackend *be);
/* nbytes from be's cache (or the system on a miss); NULL + CT_ERR_OOM. */
void *ct_backend_alloc(const CtBackend *be, size_t nbytes);
/* Returns a block of ct_backend_alloc(be, nbytes) to be's cache. */
void ct_backend_free(const CtBackend *be, void *p, size_t nbytes);
void ct_backend_empty_cache(const CtBackend *be);
CtAllocStats ct_backend_alloc_stats(const CtBackend *be);

#ifdef __cplusplus
}
#endif
#endif
