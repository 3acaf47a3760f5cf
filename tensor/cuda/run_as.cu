/* Scratch tensors (common.cuh, ct_cuda_scratch_tensor), and running a
 * kernel on operands converted to another dtype (ct_cuda_run_as): scratch
 * copies from the instance's caching allocator, converted by the
 * instance's COPY kernel. */
#include <string.h>

#include "common.cuh"

CtStatus ct_cuda_scratch_tensor(const CtBackend *be, int ndim, const int64_t *shape,
                                CtDType dt, CtDevice dev, CtScratchTensor *l)
{
    memset(l, 0, sizeof *l);
    l->t.refcount = 1;
    l->t.storage = &l->s;
    l->t.dtype = dt;
    l->t.ndim = ndim;
    int64_t stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        l->t.shape[d] = shape[d];
        l->t.stride[d] = stride;
        stride *= shape[d];
    }
    l->s.refcount = 1;
    l->s.device = dev;
    l->s.nbytes = (size_t)stride * ct_dtype_size(dt);
    return ct_cuda_scratch(be, l->s.nbytes, &l->s.data);
}

/* A scratch tensor of like's shape in dtype dt, laid out as like when it is
 * channels last (the kernel took like so; cuDNN's NHWC calls read the
 * layout from the strides), else contiguous. */
static CtStatus scratch_make(const CtBackend *be, const Tensor *like, CtDType dt,
                             CtScratchTensor *l)
{
    CtStatus st =
        ct_cuda_scratch_tensor(be, like->ndim, like->shape, dt, like->storage->device, l);
    if (st == CT_OK && ct_channels_last_only(like))
        ct_channels_last_strides(like->shape, l->t.stride);
    return st;
}

/* dst <- src converted, through the instance's COPY kernel. */
static CtStatus convert(const CtOpCall *call, Tensor *dst, const Tensor *src)
{
    CtOpCall c = {};
    c.op = CT_OP_COPY;
    c.out[0] = dst;
    c.in[0] = src;
    c.backend = call->backend;
    return call->backend->iface->kernels[CT_OP_COPY](&c);
}

CtStatus ct_cuda_run_as(const CtOpCall *call, CtDType from, CtDType to,
                        CtStatus (*fn)(const CtOpCall *converted, void *arg), void *arg)
{
    CtScratchTensor in[CT_CALL_MAX_IN], out[CT_CALL_MAX_OUT];
    CtOpCall lc = *call;
    CtStatus st = CT_OK;
    for (int i = 0; i < CT_CALL_MAX_IN; i++) {
        in[i].s.data = NULL;
        in[i].s.nbytes = 0;
        if (!call->in[i] || call->in[i]->dtype != from || st != CT_OK) continue;
        st = scratch_make(call->backend, call->in[i], to, &in[i]);
        if (st == CT_OK) st = convert(call, &in[i].t, call->in[i]);
        lc.in[i] = &in[i].t;
    }
    for (int i = 0; i < CT_CALL_MAX_OUT; i++) {
        out[i].s.data = NULL;
        out[i].s.nbytes = 0;
        if (!call->out[i] || call->out[i]->dtype != from || st != CT_OK) continue;
        st = scratch_make(call->backend, call->out[i], to, &out[i]);
        lc.out[i] = &out[i].t;
    }
    if (st == CT_OK) st = fn(&lc, arg);
    for (int i = 0; i < CT_CALL_MAX_OUT && st == CT_OK; i++)
        if (out[i].s.data) st = convert(call, call->out[i], &out[i].t);
    for (int i = 0; i < CT_CALL_MAX_IN; i++)
        ct_cuda_scratch_free(call->backend, in[i].s.data, in[i].s.nbytes);
    for (int i = 0; i < CT_CALL_MAX_OUT; i++)
        ct_cuda_scratch_free(call->backend, out[i].s.data, out[i].s.nbytes);
    return st;
}
