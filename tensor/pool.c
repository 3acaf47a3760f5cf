/* 2-d pooling (NCHW, or channels last where the backend takes it): max,
 * average and adaptive average, with autograd. */
#include "conv.h"

_Static_assert(sizeof(CtPool2dParams) <= CT_NODE_PARAMS_BYTES,
               "pool2d params must fit in a node");

/* in: x. saved[0]: argmax indices (max pooling). */
static CtStatus pool2d_backward(CtNode *n, Tensor *gout, Tensor **gin)
{
    const CtPool2dParams *p = CT_NODE_PARAMS(n, CtPool2dParams);
    Tensor *x = n->in[0];
    Tensor *gy = ct_scope_adopt(ct_layout_ref(gout, p->nhwc));
    if (!gy) return ct_last_status();
    gin[0] = ct_scope_adopt(
        ct_tensor_new_laid_out(4, x->shape, x->dtype, x->storage->device, p->nhwc));
    if (!gin[0]) return ct_last_status();
    CtOpCall c = {
        .op = CT_OP_POOL2D_BWD, .out = {gin[0]}, .in = {gy, n->saved[0]}, .params = p};
    return ct_dispatch(&c);
}

/* Runs the pool kernel on x (any layout) and records the node. */
static Tensor *pool2d(const char *op, Tensor *x, CtPool2dParams *p)
{
    p->n = x->shape[0];
    p->c = x->shape[1];
    p->h = x->shape[2];
    p->w = x->shape[3];
    /* the backend sees the params as its kernel would */
    CtOpCall probe = {.op = CT_OP_POOL2D, .out = {x}, .in = {x}, .params = p};
    ct_pick_channels_last(x, &probe, &p->nhwc);
    Tensor *xc = x;
    if (!p->nhwc && !tensor_is_contiguous(x)) {
        /* own scope: the copy must not leak when the caller has none open;
         * the node keeps its own reference */
        CtScope *s = ct_scope_open();
        if (!s) return NULL;
        xc = tensor_retain(tensor_contiguous(x));
        ct_scope_close(s);
        if (!xc) return NULL;
    } else {
        tensor_retain(xc);
    }
    int64_t shape[4] = {p->n, p->c, p->oh, p->ow};
    CtDevice dev = x->storage->device;
    Tensor *y = ct_scope_adopt(ct_tensor_new_laid_out(4, shape, x->dtype, dev, p->nhwc));
    /* argmax indices only when a backward can need them */
    bool need_idx = p->kind == CT_POOL_MAX && ct_grad_enabled() && xc->requires_grad;
    Tensor *idx = NULL;
    if (y && need_idx) idx = ct_tensor_new_laid_out(4, shape, CT_I64, dev, p->nhwc);
    CtOpCall c = {.op = CT_OP_POOL2D, .out = {y, idx}, .in = {xc}, .params = p};
    CtNode *n = NULL;
    if (!y || (need_idx && !idx) || ct_dispatch(&c) != CT_OK ||
        ct_node_new(y, op, pool2d_backward, 1, &xc, &n) != CT_OK) {
        y = ct_op_discard(y);
    } else if (n) {
        *CT_NODE_PARAMS(n, CtPool2dParams) = *p;
        if (idx) ct_node_save(n, 0, idx);
    }
    tensor_free(idx);
    tensor_free(xc);
    return y;
}

static bool check_input(const char *op, const Tensor *x)
{
    if (!x) return false;
    if (!ct_check_float(op, x)) return false;
    if (x->ndim != 4) {
        char d[96];
        ct_error(CT_ERR_SHAPE, "%s: x must be 4-d (N, C, H, W), got %s", op,
                 tensor_describe(x, d, sizeof d));
        return false;
    }
    return true;
}

/* Output length of one dim, PyTorch's rule: floor((in + 2 pad - k) / s) + 1,
 * rounded up with ceil_mode, where the last window must start inside the
 * input or the left padding (so with a stride above 1 a window may be
 * larger than the padded input). Below 1 when no window fits. */
static int64_t pool_out_len(int64_t in, int k, int s, int pad, bool ceil_mode)
{
    int64_t span = in + 2 * (int64_t)pad - k + (ceil_mode ? s - 1 : 0);
    int64_t o = (span >= 0 ? span / s : -((-span + s - 1) / s)) + 1;
    if (ceil_mode && o > 0 && (o - 1) * s >= in + pad) o--;
    return o;
}

/* Validates args and fills the window fields and output size of p. */
static bool window_params(const char *op, const Tensor *x, const CtPool2dArgs *a,
                          CtPool2dParams *p)
{
    char d[96];
    if (!a) {
        ct_error(CT_ERR_NULL, "%s: args is NULL (the kernel size is required)", op);
        return false;
    }
    p->kh = a->kernel[0];
    p->kw = a->kernel[1];
    p->sh = a->stride[0] ? a->stride[0] : a->kernel[0];
    p->sw = a->stride[1] ? a->stride[1] : a->kernel[1];
    p->ph = a->padding[0];
    p->pw = a->padding[1];
    p->count_include_pad = a->count_include_pad;
    if (p->kh < 1 || p->kw < 1 || p->sh < 1 || p->sw < 1) {
        ct_error(CT_ERR_INVALID, "%s: kernel %dx%d and stride %dx%d must be positive", op,
                 p->kh, p->kw, p->sh, p->sw);
        return false;
    }
    if (p->ph < 0 || p->pw < 0 || p->ph > p->kh / 2 || p->pw > p->kw / 2) {
        ct_error(CT_ERR_INVALID,
                 "%s: padding %dx%d must be between 0 and half the kernel %dx%d", op,
                 p->ph, p->pw, p->kh, p->kw);
        return false;
    }
    p->oh = pool_out_len(x->shape[2], p->kh, p->sh, p->ph, a->ceil_mode);
    p->ow = pool_out_len(x->shape[3], p->kw, p->sw, p->pw, a->ceil_mode);
    if (p->oh < 1 || p->ow < 1) {
        ct_error(CT_ERR_SHAPE, "%s: kernel %dx%d is larger than the padded input of x %s",
                 op, p->kh, p->kw, tensor_describe(x, d, sizeof d));
        return false;
    }
    return true;
}

Tensor *tensor_max_pool2d(Tensor *x, const CtPool2dArgs *args)
{
    CtPool2dParams p = {.kind = CT_POOL_MAX};
    if (!check_input("max_pool2d", x) || !window_params("max_pool2d", x, args, &p))
        return NULL;
    return pool2d("max_pool2d", x, &p);
}

Tensor *tensor_avg_pool2d(Tensor *x, const CtPool2dArgs *args)
{
    CtPool2dParams p = {.kind = CT_POOL_AVG};
    if (!check_input("avg_pool2d", x) || !window_params("avg_pool2d", x, args, &p))
        return NULL;
    return pool2d("avg_pool2d", x, &p);
}

Tensor *tensor_adaptive_avg_pool2d(Tensor *x, int out_h, int out_w)
{
    const char *op = "adaptive_avg_pool2d";
    if (!check_input(op, x)) return NULL;
    if (out_h < 1 || out_w < 1) {
        ct_error(CT_ERR_INVALID, "%s: output size %dx%d must be positive", op, out_h,
                 out_w);
        return NULL;
    }
    if (x->shape[2] < 1 || x->shape[3] < 1) {
        char d[96];
        ct_error(CT_ERR_SHAPE, "%s: x %s has an empty plane", op,
                 tensor_describe(x, d, sizeof d));
        return NULL;
    }
    CtPool2dParams p = {.kind = CT_POOL_ADAPTIVE_AVG, .oh = out_h, .ow = out_w};
    return pool2d(op, x, &p);
}
