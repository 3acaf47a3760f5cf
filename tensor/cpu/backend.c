/* The CPU backend iface: host memory and the kernels of tensor/cpu. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

static CtKernelFn kernels[CT_OP_COUNT];
static CtSupportsFn supports[CT_OP_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void register_all(void)
{
    static const CtCpuRegisterFn groups[] = {
        ct_cpu_register_copy,    ct_cpu_register_random,  ct_cpu_register_elementwise,
        ct_cpu_register_reduce,  ct_cpu_register_softmax, ct_cpu_register_matmul,
        ct_cpu_register_conv,    ct_cpu_register_norm,    ct_cpu_register_index,
        ct_cpu_register_unscale, ct_cpu_register_optim,
    };
    for (size_t i = 0; i < sizeof groups / sizeof *groups; i++)
        groups[i](kernels, supports);
}

static void *cpu_alloc(const CtBackend *be, size_t nbytes)
{
    (void)be;
    return aligned_alloc(64, (nbytes + 63) / 64 * 64);
}

static void cpu_free(const CtBackend *be, void *p)
{
    (void)be;
    free(p);
}

static CtStatus cpu_memcpy(const CtBackend *be, void *dst, CtDevice ddev, const void *src,
                           CtDevice sdev, size_t n)
{
    (void)be;
    if (ddev.type != CT_DEVICE_CPU || sdev.type != CT_DEVICE_CPU)
        return ct_error(CT_ERR_DEVICE, "cpu backend: cannot copy to or from a GPU");
    memmove(dst, src, n);
    return CT_OK;
}

/* No context: the CPU instance is its allocator cache. No stream either:
 * kernels run on the calling thread (and the OpenMP pool) and are complete
 * when they return, so there is nothing asynchronous to wait for. */
static const CtBackendIface iface = {
    .name = "cpu",
    .type = CT_DEVICE_CPU,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memcpy = cpu_memcpy,
    .kernels = kernels,
    .supports = supports,
};

const CtBackendIface *ct_cpu_iface(void)
{
    pthread_once(&once, register_all);
    return &iface;
}
