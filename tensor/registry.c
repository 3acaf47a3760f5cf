/* The backend registry: one instance per device, made on first use.
 *
 * Slot 0 is the CPU, slot 1 + i is cuda:i. A slot is read without a lock
 * (an acquire load of a pointer published with a release store) and filled
 * under `mu`, so concurrent first callers create one instance between them.
 */
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"
#ifdef CTRAINER_HAVE_CUDA
#include "cuda/module.h"
#endif

#define N_SLOTS (1 + CT_MAX_CUDA_DEVICES)

static CtBackend *slots[N_SLOTS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bool exit_hook; /* under mu: shutdown registered with atexit */

/* The slot of dev, or -1 when no slot can hold it. */
static int slot_of(CtDevice dev)
{
    if (dev.type == CT_DEVICE_CPU) return 0;
    if (dev.type == CT_DEVICE_CUDA && dev.index >= 0 && dev.index < CT_MAX_CUDA_DEVICES)
        return 1 + dev.index;
    return -1;
}

/* The iface serving dev, or NULL + CT_ERR_DEVICE. */
static const CtBackendIface *iface_for(CtDevice dev)
{
    if (dev.type == CT_DEVICE_CPU) return ct_cpu_iface();
    char d[16];
#ifdef CTRAINER_HAVE_CUDA
    int n = ct_cuda_device_count();
    if (dev.type == CT_DEVICE_CUDA && dev.index >= 0 && dev.index < n)
        return ct_cuda_iface();
    if (dev.type == CT_DEVICE_CUDA && !ct_cuda_module()) {
        ct_error(CT_ERR_DEVICE, "%s: the CUDA backend module could not be loaded: %s",
                 ct_device_str(dev, d), ct_cuda_module_error());
        return NULL;
    }
    ct_error(CT_ERR_DEVICE, "%s: no such device (%d CUDA device%s visible)",
             ct_device_str(dev, d), n, n == 1 ? "" : "s");
#else
    ct_error(CT_ERR_DEVICE,
             "%s: ctrainer was built without CUDA (configure with "
             "-DCTRAINER_CUDA=ON)",
             ct_device_str(dev, d));
#endif
    return NULL;
}

CtBackend *ct_backend_create(const CtBackendIface *iface, CtDevice dev)
{
    char d[16];
    CtBackend *be = calloc(1, sizeof *be);
    CtAllocCache *cache = be ? ct_alloc_cache_new() : NULL;
    if (!cache) {
        free(be);
        ct_error(CT_ERR_OOM, "%s: allocating the backend instance failed",
                 ct_device_str(dev, d));
        return NULL;
    }
    be->iface = iface;
    be->device = dev;
    be->cache = cache;
    if (iface->init && iface->init(be) != CT_OK) {
        ct_alloc_cache_free(be);
        free(be);
        return NULL;
    }
    return be;
}

void ct_backend_destroy(CtBackend *be)
{
    if (!be) return;
    ct_alloc_cache_free(be);
    if (be->iface->teardown) be->iface->teardown(be);
    free(be);
}

const CtBackend *ct_backend_peek(CtDevice dev)
{
    int i = slot_of(dev);
    return i < 0 ? NULL : __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE);
}

const CtBackend *ct_backend_for(CtDevice dev)
{
    const CtBackend *found = ct_backend_peek(dev);
    if (found) return found;
    const CtBackendIface *iface = iface_for(dev); /* range checks too */
    if (!iface) return NULL;
    int i = slot_of(dev);
    pthread_mutex_lock(&mu);
    CtBackend *be = slots[i];
    if (!be) {
        be = ct_backend_create(iface, dev);
        if (be) __atomic_store_n(&slots[i], be, __ATOMIC_RELEASE);
        if (be && !exit_hook) exit_hook = atexit(ct_backend_registry_shutdown) == 0;
    }
    pthread_mutex_unlock(&mu);
    return be;
}

static pthread_mutex_t pinned_mu = PTHREAD_MUTEX_INITIALIZER;
static const CtBackend *pinned; /* atomic: ct_pinned_backend's choice */

/* The first CUDA instance the process made: its own GPU (a rank of a
 * multi-GPU launch makes its cuda:local_rank first), whose context exists
 * already; cuda:0 where none was made yet. */
static const CtBackend *first_cuda_instance(void)
{
    int n = ct_cuda_device_count();
    for (int d = 0; d < n; d++) {
        const CtBackend *be = ct_backend_peek(ct_cuda(d));
        if (be) return be;
    }
    return n > 0 ? ct_backend_for(ct_cuda(0)) : NULL;
}

const CtBackend *ct_pinned_backend(void)
{
    const CtBackend *be = __atomic_load_n(&pinned, __ATOMIC_ACQUIRE);
    if (be) return be;
    pthread_mutex_lock(&pinned_mu);
    if (!(be = pinned) && (be = first_cuda_instance()))
        __atomic_store_n(&pinned, be, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&pinned_mu);
    return be;
}

void ct_backend_registry_shutdown(void)
{
    __atomic_store_n(&pinned, NULL, __ATOMIC_RELEASE);
    pthread_mutex_lock(&mu);
    for (int i = N_SLOTS - 1; i >= 0; i--) {
        CtBackend *be = slots[i];
        __atomic_store_n(&slots[i], NULL, __ATOMIC_RELEASE);
        ct_backend_destroy(be);
    }
    pthread_mutex_unlock(&mu);
}
