/* Copies between dtypes and devices; fill; item; cast, to_device, clone. */
#include <math.h>
#include <string.h>

#include "internal.h"

static CtStatus null_arg(const char *op)
{
    CtStatus st = ct_last_status();
    return st != CT_OK ? st : ct_error(CT_ERR_NULL, "%s: NULL tensor", op);
}

CtStatus tensor_fill_(Tensor *t, double value)
{
    if (!t) return null_arg("tensor_fill_");
    if (!ct_int_value_fits(t->dtype, value)) {
        char d[96];
        return ct_error(CT_ERR_INVALID, "tensor_fill_: value %g does not fit %s", value,
                        tensor_describe(t, d, sizeof d));
    }
    CtFillParams p = {value};
    CtOpCall c = {.op = CT_OP_FILL, .out = {t}, .params = &p};
    CtStatus st = ct_dispatch(&c);
    if (st == CT_OK && value == 0.0 && tensor_is_contiguous(t) && !ct_in_backward())
        ct_storage_zeroed(t);
    return st;
}

CtStatus tensor_zero_(Tensor *t)
{
    return tensor_fill_(t, 0.0);
}

/* The strides of src broadcast to shape; false when it does not broadcast. */
static bool broadcast_strides(const Tensor *src, int ndim, const int64_t *shape,
                              int64_t *stride)
{
    int off = ndim - src->ndim;
    if (off < 0) return false;
    for (int i = 0; i < ndim; i++) {
        int j = i - off;
        int64_t s = j >= 0 ? src->shape[j] : 1;
        if (s != shape[i] && s != 1) return false;
        stride[i] = (j >= 0 && s == shape[i]) ? src->stride[j] : 0;
    }
    return true;
}

Tensor *ct_broadcast_alias(const Tensor *src, int ndim, const int64_t *shape)
{
    int64_t stride[CT_MAX_DIMS];
    if (!broadcast_strides(src, ndim, shape, stride)) return NULL;
    Tensor *a = ct_tensor_alias(src);
    if (!a) return NULL;
    a->ndim = ndim;
    memcpy(a->shape, shape, (size_t)ndim * sizeof *shape);
    memcpy(a->stride, stride, (size_t)ndim * sizeof *stride);
    return a;
}

static CtStatus copy_across(Tensor *dst, const Tensor *src)
{
    CtDevice sd = src->storage->device, dd = dst->storage->device;
    const CtBackend *be = ct_backend_for(dd.type != CT_DEVICE_CPU ? dd : sd);
    if (!be) return ct_last_status();
    /* materialise src contiguously in dst's dtype on its own device */
    Tensor *tmp = ct_tensor_new_persistent(dst->ndim, dst->shape, dst->dtype, sd);
    if (!tmp) return ct_last_status();
    CtOpCall c = {.op = CT_OP_COPY, .out = {tmp}, .in = {src}};
    CtStatus st = ct_dispatch(&c);
    size_t n = (size_t)tensor_numel(dst) * ct_dtype_size(dst->dtype);
    if (st == CT_OK && tensor_is_contiguous(dst)) {
        st = ct_backend_memcpy(be, ct_ptr(dst), dd, ct_ptr(tmp), sd, n);
        ct_storage_written(dst); /* as a COPY op's output is */
    } else if (st == CT_OK) {
        Tensor *tmp2 = ct_tensor_new_persistent(dst->ndim, dst->shape, dst->dtype, dd);
        st = tmp2 ? ct_backend_memcpy(be, ct_ptr(tmp2), dd, ct_ptr(tmp), sd, n)
                  : ct_last_status();
        if (st == CT_OK) {
            CtOpCall c2 = {.op = CT_OP_COPY, .out = {dst}, .in = {tmp2}};
            st = ct_dispatch(&c2);
        }
        tensor_free(tmp2);
    }
    tensor_free(tmp);
    return st;
}

/* Whether dst and src are different views whose bytes may share memory: a
 * copy between them would read what it has already written, in an order
 * that depends on the backend (a GPU copies in parallel). */
static bool overlapping(const Tensor *dst, const Tensor *src)
{
    if (dst->storage != src->storage || tensor_numel(dst) == 0) return false;
    if (dst->offset == src->offset && dst->dtype == src->dtype &&
        !memcmp(dst->stride, src->stride, (size_t)dst->ndim * sizeof *dst->stride))
        return false; /* the same elements: each is copied onto itself */
    size_t dlo, dhi, slo, shi;
    ct_byte_span(dst, &dlo, &dhi);
    ct_byte_span(src, &slo, &shi);
    return dlo < shi && slo < dhi;
}

/* dst <- src (on dst's device) through a copy of src, for overlapping views. */
static CtStatus copy_staged(Tensor *dst, const Tensor *src)
{
    Tensor *tmp =
        ct_tensor_new_persistent(src->ndim, src->shape, src->dtype, src->storage->device);
    if (!tmp) return ct_last_status();
    CtOpCall c = {.op = CT_OP_COPY, .out = {tmp}, .in = {src}};
    CtStatus st = ct_dispatch(&c);
    CtOpCall c2 = {.op = CT_OP_COPY, .out = {dst}, .in = {tmp}};
    if (st == CT_OK) st = ct_dispatch(&c2);
    tensor_free(tmp);
    return st;
}

CtStatus tensor_copy_(Tensor *dst, const Tensor *src)
{
    if (!dst || !src) return null_arg("tensor_copy_");
    for (int i = 0; i < dst->ndim; i++)
        if (dst->stride[i] == 0 && dst->shape[i] > 1) {
            char d[96];
            return ct_error(CT_ERR_INVALID,
                            "tensor_copy_: elements of the destination %s share memory "
                            "(dim %d is expanded); copy into a contiguous tensor instead",
                            tensor_describe(dst, d, sizeof d), i);
        }
    int64_t stride[CT_MAX_DIMS];
    if (!broadcast_strides(src, dst->ndim, dst->shape, stride)) {
        char d1[96], d2[96];
        return ct_error(CT_ERR_SHAPE, "tensor_copy_: cannot copy %s into %s",
                        tensor_describe(src, d1, sizeof d1),
                        tensor_describe(dst, d2, sizeof d2));
    }
    Tensor *b = ct_broadcast_alias(src, dst->ndim, dst->shape);
    if (!b) return ct_last_status(); /* out of memory, recorded */
    CtStatus st;
    if (overlapping(dst, b)) {
        st = copy_staged(dst, b);
    } else if (ct_device_eq(src->storage->device, dst->storage->device)) {
        CtOpCall c = {.op = CT_OP_COPY, .out = {dst}, .in = {b}};
        st = ct_dispatch(&c);
    } else {
        st = copy_across(dst, b);
    }
    tensor_free(b);
    return st;
}

Tensor *ct_contiguous_ref(Tensor *t)
{
    if (!t || tensor_is_contiguous(t)) return tensor_retain(t);
    Tensor *c = ct_tensor_new_persistent(t->ndim, t->shape, t->dtype, t->storage->device);
    if (c && tensor_copy_(c, t) != CT_OK) {
        tensor_free(c);
        return NULL;
    }
    return c;
}

CtStatus tensor_copy_to_host(const Tensor *t, void *dst, CtDType dt)
{
    if (!t) return null_arg("tensor_copy_to_host");
    if (!dst) return ct_error(CT_ERR_NULL, "tensor_copy_to_host: NULL destination");
    ct_host_sync_note();
    Tensor *host = ct_tensor_new_persistent(0, NULL, dt, ct_cpu());
    if (!host) return ct_last_status();
    /* point a host tensor header at dst with t's shape */
    CtStorage *own = host->storage;
    CtStorage ext = {.data = dst,
                     .nbytes = (size_t)tensor_numel(t) * ct_dtype_size(dt),
                     .device = ct_cpu(),
                     .external = true};
    ext.refcount = 2; /* never released through this header */
    host->storage = &ext;
    host->ndim = t->ndim;
    memcpy(host->shape, t->shape, sizeof host->shape);
    ct_contiguous_strides(t->ndim, t->shape, host->stride);
    CtStatus st = tensor_copy_(host, t);
    host->storage = own;
    tensor_free(host);
    return st;
}

double tensor_item(const Tensor *t)
{
    if (!t) return NAN;
    if (tensor_numel(t) != 1) {
        char d[96];
        ct_error(CT_ERR_SHAPE, "tensor_item: expected one element, got %s",
                 tensor_describe(t, d, sizeof d));
        return NAN;
    }
    double v;
    return tensor_copy_to_host(t, &v, CT_F64) == CT_OK ? v : NAN;
}

/* ---------------------------------------------- differentiable conversions */

static CtStatus cast_backward(CtNode *n, Tensor *gout, Tensor **gin)
{
    Tensor *g = ct_node_grad_buffer(n, 0, n->in[0]);
    if (!g) return ct_last_status();
    CtStatus st = tensor_copy_(g, gout);
    if (st == CT_OK) gin[0] = g;
    return st;
}

static CtStatus to_device_backward(CtNode *n, Tensor *gout, Tensor **gin)
{
    gin[0] = tensor_to_device(gout, n->in[0]->storage->device);
    return gin[0] ? CT_OK : ct_last_status();
}

/* keep_layout: a channels-last t gives a channels-last copy (a cast);
 * else the copy is contiguous (a clone, a move). */
static Tensor *copy_op(const char *op, Tensor *t, CtDType dt, CtDevice dev,
                       CtBackwardFn bw, bool keep_layout)
{
    if (!t) return NULL;
    if (bw == cast_backward && !ct_dtype_is_float(dt) && t->requires_grad &&
        ct_grad_enabled()) {
        ct_error(CT_ERR_DTYPE,
                 "%s: casting a tensor that requires grad to %s "
                 "is not differentiable; detach it first",
                 op, ct_dtype_name(dt));
        return NULL;
    }
    Tensor *out = keep_layout ? ct_tensor_new_for(t->ndim, t->shape, dt, dev, 1,
                                                  (const Tensor *[]){t})
                              : ct_tensor_new(t->ndim, t->shape, dt, dev);
    CtNode *n;
    if (!out || tensor_copy_(out, t) != CT_OK ||
        ct_node_new(out, op, bw, 1, &t, &n) != CT_OK)
        return ct_op_discard(out);
    return out;
}

Tensor *tensor_cast(Tensor *t, CtDType dt)
{
    return t ? copy_op("tensor_cast", t, dt, t->storage->device, cast_backward, true)
             : NULL;
}

Tensor *tensor_clone(Tensor *t)
{
    return t ? copy_op("tensor_clone", t, t->dtype, t->storage->device, cast_backward,
                       false)
             : NULL;
}

Tensor *tensor_to_device(Tensor *t, CtDevice dev)
{
    return t ? copy_op("tensor_to_device", t, t->dtype, dev, to_device_backward, false)
             : NULL;
}
