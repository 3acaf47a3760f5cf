/* Shape utilities and the validation helpers ops share. */
#include <stdio.h>

#include "internal.h"

int64_t ct_shape_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

void ct_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        stride[i] = s;
        s *= shape[i] ? shape[i] : 1;
    }
}

const char *ct_shape_str(int ndim, const int64_t *shape, char *buf, size_t n)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

int ct_norm_dim(const char *op, int dim, int ndim)
{
    int d = dim < 0 ? dim + ndim : dim;
    if (d < 0 || d >= ndim) {
        ct_error(CT_ERR_SHAPE, "%s: dim %d out of range for a %d-d tensor", op, dim,
                 ndim);
        return -1;
    }
    return d;
}

int ct_broadcast_shape(const char *op, const Tensor *a, const Tensor *b, int64_t *out)
{
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - a->ndim), ib = i - (n - b->ndim);
        int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            char d1[96], d2[96];
            ct_error(CT_ERR_SHAPE, "%s: shapes %s and %s do not broadcast", op,
                     tensor_describe(a, d1, sizeof d1),
                     tensor_describe(b, d2, sizeof d2));
            return -1;
        }
        out[i] = sa == 1 ? sb : sa;
    }
    return n;
}

bool ct_check_inputs(const char *op, int n, const Tensor *const *ts)
{
    for (int i = 0; i < n; i++)
        if (!ts[i]) return false; /* sticky: keep the first error */
    for (int i = 1; i < n; i++) {
        if (!ct_device_eq(ts[i]->storage->device, ts[0]->storage->device)) {
            char d1[96], d2[96];
            ct_error(CT_ERR_DEVICE, "%s: tensors on different devices: %s and %s", op,
                     tensor_describe(ts[0], d1, sizeof d1),
                     tensor_describe(ts[i], d2, sizeof d2));
            return false;
        }
    }
    return true;
}

bool ct_check_same_dtype(const char *op, const Tensor *a, const Tensor *b)
{
    if (!a || !b) return false;
    if (a->dtype == b->dtype) return true;
    char d1[96], d2[96];
    ct_error(CT_ERR_DTYPE, "%s: dtypes differ: %s and %s", op,
             tensor_describe(a, d1, sizeof d1), tensor_describe(b, d2, sizeof d2));
    return false;
}

bool ct_check_same_shape(const char *op, const Tensor *a, const Tensor *b)
{
    if (!a || !b) return false;
    bool same = a->ndim == b->ndim;
    for (int i = 0; same && i < a->ndim; i++) same = a->shape[i] == b->shape[i];
    if (same) return true;
    char d1[96], d2[96];
    ct_error(CT_ERR_SHAPE, "%s: shapes differ: %s and %s", op,
             tensor_describe(a, d1, sizeof d1), tensor_describe(b, d2, sizeof d2));
    return false;
}

bool ct_check_float(const char *op, const Tensor *t)
{
    if (!t) return false;
    if (ct_dtype_is_float(t->dtype)) return true;
    char d[96];
    ct_error(CT_ERR_DTYPE, "%s: expected a floating-point tensor, got %s", op,
             tensor_describe(t, d, sizeof d));
    return false;
}

bool ct_check_dtype(const char *op, const Tensor *t, CtDType dt)
{
    if (!t) return false;
    if (t->dtype == dt) return true;
    char d[96];
    ct_error(CT_ERR_DTYPE, "%s: expected a %s tensor, got %s", op, ct_dtype_name(dt),
             tensor_describe(t, d, sizeof d));
    return false;
}

bool ct_check_ndim(const char *op, const Tensor *t, int lo, int hi)
{
    if (!t) return false;
    if (t->ndim >= lo && t->ndim <= hi) return true;
    char d[96];
    if (lo == hi)
        ct_error(CT_ERR_SHAPE, "%s: expected a %d-d tensor, got %s", op, lo,
                 tensor_describe(t, d, sizeof d));
    else
        ct_error(CT_ERR_SHAPE, "%s: expected a %d-d to %d-d tensor, got %s", op, lo, hi,
                 tensor_describe(t, d, sizeof d));
    return false;
}
