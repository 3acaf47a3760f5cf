/* Channels-last (NHWC) memory layout of 4-d (N, C, H, W) tensors: the
 * shape stays (N, C, H, W) and the strides are (H*W*C, 1, W*C, C), as
 * PyTorch's torch.channels_last. Convolution, batch norm and pooling on
 * backends that take this layout (CUDA) read and write it as it is
 * (ct_pick_channels_last asks the backend); the elementwise ops keep it,
 * running over the operands' (N, H, W, C) views, which are contiguous;
 * every other op reads it as any strided tensor. */
#include <string.h>

#include "backend.h"

Tensor *ct_tensor_new_laid_out(int ndim, const int64_t *shape, CtDType dt, CtDevice dev,
                               bool cl)
{
    if (!cl) return ct_tensor_new_persistent(ndim, shape, dt, dev);
    const int64_t nhwc[4] = {shape[0], shape[2], shape[3], shape[1]};
    Tensor *t = ct_tensor_new_persistent(4, nhwc, dt, dev);
    if (t) {
        memcpy(t->shape, shape, 4 * sizeof *shape);
        ct_channels_last_strides(shape, t->stride);
    }
    return t;
}

Tensor *ct_tensor_new_for(int ndim, const int64_t *shape, CtDType dt, CtDevice dev, int n,
                          const Tensor *const *in)
{
    bool cl = false;
    for (int i = 0; ndim == 4 && i < n; i++) {
        const Tensor *t = in[i];
        if (!t || t->ndim != 4 || memcmp(t->shape, shape, 4 * sizeof *shape) != 0)
            continue; /* broadcast operands have no say */
        if (!ct_is_channels_last(t)) return ct_tensor_new(ndim, shape, dt, dev);
        cl = cl || !tensor_is_contiguous(t);
    }
    if (!cl) return ct_tensor_new(ndim, shape, dt, dev);
    return ct_scope_adopt(ct_tensor_new_laid_out(4, shape, dt, dev, true));
}

/* A caller-owned alias of t (4-d) with its dims in (N, H, W, C) order. */
static Tensor *nhwc_alias(const Tensor *t)
{
    Tensor *a = ct_tensor_alias(t);
    if (!a) return NULL;
    static const int perm[4] = {0, 2, 3, 1};
    for (int d = 0; d < 4; d++) {
        a->shape[d] = t->shape[perm[d]];
        a->stride[d] = t->stride[perm[d]];
    }
    return a;
}

CtStatus ct_elementwise_dispatch(const CtOpCall *c)
{
    if (!ct_channels_last_only(c->out[0])) return ct_dispatch(c);
    CtOpCall v = *c;
    CtStatus st = CT_OK;
    for (int i = 0; i < CT_CALL_MAX_IN && st == CT_OK; i++)
        if (c->in[i] && !(v.in[i] = nhwc_alias(c->in[i])))
            st = ct_error(CT_ERR_OOM, "elementwise op: out of memory");
    if (st == CT_OK && !(v.out[0] = nhwc_alias(c->out[0])))
        st = ct_error(CT_ERR_OOM, "elementwise op: out of memory");
    if (st == CT_OK) st = ct_dispatch(&v);
    for (int i = 0; i < CT_CALL_MAX_IN; i++) /* the aliases made, no more */
        if (v.in[i] != c->in[i]) tensor_free((Tensor *)v.in[i]);
    if (v.out[0] != c->out[0]) tensor_free(v.out[0]);
    return st;
}

void ct_pick_channels_last(const Tensor *x, const CtOpCall *probe, bool *nhwc)
{
    if (!ct_channels_last_only(x)) return;
    const CtBackend *be = ct_backend_peek(x->storage->device);
    *nhwc = true;
    if (!be || !ct_backend_supports(be, probe)) *nhwc = false;
}

Tensor *ct_layout_ref(Tensor *t, bool cl)
{
    if (!cl) return ct_contiguous_ref(t);
    if (!t || ct_is_channels_last(t)) return tensor_retain(t);
    Tensor *c = ct_tensor_new_laid_out(4, t->shape, t->dtype, t->storage->device, true);
    if (c && tensor_copy_(c, t) != CT_OK) {
        tensor_free(c);
        return NULL;
    }
    return c;
}

bool tensor_is_channels_last(const Tensor *t)
{
    return ct_is_channels_last(t);
}

Tensor *tensor_channels_last(Tensor *t)
{
    if (!t) return NULL;
    if (t->ndim != 4) {
        char d[96];
        ct_error(CT_ERR_SHAPE, "tensor_channels_last: %s must be 4-d (N, C, H, W)",
                 tensor_describe(t, d, sizeof d));
        return NULL;
    }
    if (ct_is_channels_last(t)) return ct_scope_adopt(tensor_retain(t));
    static const int to_nhwc[4] = {0, 2, 3, 1}, to_nchw[4] = {0, 3, 1, 2};
    /* the permuted copy is contiguous in (N, H, W, C): channels last when
     * permuted back; both permutes and the copy are differentiable. The
     * intermediates live in a private scope (the caller may have none). */
    CtScope *s = ct_scope_open();
    if (!s) return NULL;
    Tensor *r = tensor_retain(
        tensor_permute(tensor_contiguous(tensor_permute(t, to_nhwc)), to_nchw));
    ct_scope_close(s);
    return ct_scope_adopt(r);
}
