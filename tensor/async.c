/* Pinned host memory and asynchronous host <-> device copies.
 *
 * Both go through optional entries of the backend instance
 * (CtBackendIface host_alloc, host_free, memcpy_async, synchronize): pinned
 * memory comes from ct_pinned_backend(), and an asynchronous copy runs on the
 * stream of the GPU side's instance. Only the CUDA backend has them; without a
 * CUDA device there is no pinned memory, and every function here falls back
 * to the ordinary synchronous path, so callers (the data loader) need no
 * special case for CPU-only builds.
 *
 * The guarantee of an asynchronous copy is stream order: the copy is queued
 * on the stream of the device's instance, behind the kernels already queued
 * there and ahead of every kernel queued later (every op on that device runs
 * on that stream). The pinned source of a host-to-device copy may be freed
 * at once: the backend does not hand the block out again before the copy
 * has read it. Writing to the source, or reading the pinned destination of a
 * device-to-host copy, needs ct_device_synchronize first.
 */
#include <string.h>

#include "internal.h"

static CtStatus async_backward(CtNode *n, Tensor *gout, Tensor **gin)
{
    gin[0] = tensor_to_device(gout, n->in[0]->storage->device);
    return gin[0] ? CT_OK : ct_last_status();
}

Tensor *tensor_empty_pinned(int ndim, const int64_t *shape, CtDType dt)
{
    const CtBackend *be = ct_pinned_backend();
    if (!be || !be->iface->host_alloc) return tensor_empty(ndim, shape, dt, ct_cpu());
    if (ndim < 0 || ndim > CT_MAX_DIMS || (ndim > 0 && !shape) ||
        (unsigned)dt >= CT_DTYPE_COUNT)
        return tensor_empty(ndim, shape, dt, ct_cpu()); /* records the error */
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) return tensor_empty(ndim, shape, dt, ct_cpu());
    size_t nbytes = (size_t)ct_shape_numel(ndim, shape) * ct_dtype_size(dt);
    void *p = be->iface->host_alloc(be, nbytes ? nbytes : 1);
    if (!p) {
        ct_error(CT_ERR_OOM,
                 "tensor_empty_pinned: allocating %zu bytes of pinned memory "
                 "failed",
                 nbytes);
        return NULL;
    }
    /* a wrapped storage that owns its block: released through host_free */
    Tensor *t = ct_tensor_wrap(p, ndim, shape, dt, ct_cpu());
    if (!t) {
        be->iface->host_free(be, p);
        return NULL;
    }
    t->storage->external = false;
    t->storage->pinned = true;
    return t;
}

void ct_pinned_free(void *p)
{
    const CtBackend *be = ct_pinned_backend(); /* the one that provided p */
    if (be) be->iface->host_free(be, p);
}

bool tensor_is_pinned(const Tensor *t)
{
    return t && t->storage->pinned;
}

Tensor *tensor_pin_memory(Tensor *t)
{
    if (!t) return NULL;
    if (t->storage->device.type != CT_DEVICE_CPU) {
        char d[96];
        ct_error(CT_ERR_DEVICE, "tensor_pin_memory: %s is not on the CPU",
                 tensor_describe(t, d, sizeof d));
        return NULL;
    }
    if (t->storage->pinned && tensor_is_contiguous(t))
        return ct_scope_adopt(tensor_retain(t));
    Tensor *out = tensor_empty_pinned(t->ndim, t->shape, t->dtype);
    CtNode *n;
    if (!out || tensor_copy_(out, t) != CT_OK ||
        ct_node_new(out, "tensor_pin_memory", async_backward, 1, &t, &n) != CT_OK)
        return ct_op_discard(out);
    return out;
}

/* The instance whose stream would run an asynchronous copy of t to dev (the
 * GPU side's), or NULL when the copy must take the synchronous path. */
static const CtBackend *async_backend(const Tensor *t, CtDevice dev)
{
    CtDevice from = t->storage->device;
    const CtBackend *be = NULL;
    if (from.type == CT_DEVICE_CPU && dev.type == CT_DEVICE_CUDA) {
        if (!t->storage->pinned || !tensor_is_contiguous(t)) return NULL;
        be = ct_backend_for(dev);
    } else if (from.type == CT_DEVICE_CUDA && dev.type == CT_DEVICE_CPU) {
        if (!ct_pinned_backend()) return NULL;
        be = ct_backend_for(from);
    }
    return be && be->iface->memcpy_async ? be : NULL;
}

Tensor *tensor_to_device_async(Tensor *t, CtDevice dev)
{
    if (!t) return NULL;
    const CtBackend *be = async_backend(t, dev);
    if (!be) return tensor_to_device(t, dev);
    CtDevice from = t->storage->device;
    bool to_host = dev.type == CT_DEVICE_CPU;
    Tensor *src = ct_contiguous_ref(t); /* a device-side copy if strided */
    Tensor *out = !src      ? NULL
                  : to_host ? tensor_empty_pinned(t->ndim, t->shape, t->dtype)
                            : ct_tensor_new(t->ndim, t->shape, t->dtype, dev);
    size_t n = (size_t)tensor_numel(t) * ct_dtype_size(t->dtype);
    CtStatus st = out ? CT_OK : ct_last_status();
    if (st == CT_OK && n)
        st = be->iface->memcpy_async(be, ct_ptr(out), dev, ct_ptr(src), from, n);
    /* src may be freed now: device blocks are reused in stream order, pinned
     * blocks only after the copies that read them */
    tensor_free(src);
    CtNode *node;
    if (st != CT_OK ||
        ct_node_new(out, "tensor_to_device_async", async_backward, 1, &t, &node) != CT_OK)
        return ct_op_discard(out);
    return out;
}

CtStatus ct_device_synchronize(CtDevice dev)
{
    if (dev.type == CT_DEVICE_CPU) return CT_OK;
    const CtBackend *be = ct_backend_for(dev);
    if (!be) return ct_last_status();
    ct_host_sync_note();
    return be->iface->synchronize ? be->iface->synchronize(be) : CT_OK;
}
