/* Tensor creation helpers. */
#include <math.h>

#include "internal.h"

Tensor *tensor_full(int ndim, const int64_t *shape, double value, CtDType dt,
                    CtDevice dev)
{
    Tensor *t = ct_tensor_new(ndim, shape, dt, dev);
    if (t && tensor_fill_(t, value) != CT_OK) return ct_op_discard(t);
    return t;
}

Tensor *tensor_zeros(int ndim, const int64_t *shape, CtDType dt, CtDevice dev)
{
    return tensor_full(ndim, shape, 0.0, dt, dev);
}

Tensor *tensor_ones(int ndim, const int64_t *shape, CtDType dt, CtDevice dev)
{
    return tensor_full(ndim, shape, 1.0, dt, dev);
}

Tensor *tensor_scalar(double value, CtDType dt, CtDevice dev)
{
    return tensor_full(0, NULL, value, dt, dev);
}

Tensor *tensor_zeros_like(const Tensor *like)
{
    return like
               ? tensor_zeros(like->ndim, like->shape, like->dtype, like->storage->device)
               : NULL;
}

Tensor *tensor_ones_like(const Tensor *like)
{
    return like ? tensor_ones(like->ndim, like->shape, like->dtype, like->storage->device)
                : NULL;
}

Tensor *tensor_empty_like(const Tensor *like)
{
    return like ? ct_tensor_new(like->ndim, like->shape, like->dtype,
                                like->storage->device)
                : NULL;
}

Tensor *tensor_from_data(const void *data, int ndim, const int64_t *shape, CtDType dt,
                         CtDevice dev)
{
    if (!data) {
        ct_error(CT_ERR_NULL, "tensor_from_data: NULL data");
        return NULL;
    }
    Tensor *t = ct_tensor_new(ndim, shape, dt, dev);
    if (!t) return NULL;
    size_t n = (size_t)tensor_numel(t) * ct_dtype_size(dt);
    const CtBackend *be = ct_backend_for(dev);
    if (ct_backend_memcpy(be, t->storage->data, dev, data, ct_cpu(), n) != CT_OK)
        return ct_op_discard(t);
    return t;
}

Tensor *tensor_arange(double start, double end, double step, CtDType dt, CtDevice dev)
{
    if (step == 0 || !isfinite(start) || !isfinite(end) || !isfinite(step)) {
        ct_error(CT_ERR_INVALID,
                 "tensor_arange: need finite bounds and step != 0 "
                 "(got %g, %g, %g)",
                 start, end, step);
        return NULL;
    }
    double span = ceil((end - start) / step);
    /* (a span past int64 is refused as too large by the allocation) */
    int64_t n = span > 0 ? span < 0x1p62 ? (int64_t)span : INT64_MAX : 0;
    Tensor *src = ct_tensor_new_persistent(1, &n, CT_F64, ct_cpu());
    if (!src) return NULL;
    double *v = ct_ptr(src);
    for (int64_t i = 0; i < n; i++) v[i] = start + (double)i * step;
    Tensor *t = ct_tensor_new(1, &n, dt, dev);
    if (t && tensor_copy_(t, src) != CT_OK) t = ct_op_discard(t);
    tensor_free(src);
    return t;
}
