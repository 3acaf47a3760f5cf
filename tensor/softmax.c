/* softmax and log_softmax over one dim, with a fused backward. */
#include "softmax.h"

static void softmax_geometry(const Tensor *t, int d, CtSoftmaxParams *p)
{
    p->outer = p->n = p->inner = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (i < d)
            p->outer *= t->shape[i];
        else if (i == d)
            p->n = t->shape[i];
        else
            p->inner *= t->shape[i];
    }
}

static CtStatus softmax_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    const CtSoftmaxParams *p = CT_NODE_PARAMS(n, CtSoftmaxParams);
    Tensor *y = n->saved[0];
    Tensor *gc = tensor_contiguous(g);
    if (!gc) return ct_last_status();
    Tensor *gx = ct_tensor_new(y->ndim, y->shape, y->dtype, y->storage->device);
    if (!gx) return ct_last_status();
    CtOpCall c = {.op = CT_OP_SOFTMAX_BWD, .out = {gx}, .in = {y, gc}, .params = p};
    CtStatus st = tensor_numel(gx) ? ct_dispatch(&c) : CT_OK;
    if (st == CT_OK) gin[0] = gx;
    return st;
}

/* The kernel needs a contiguous input; the copy (when one is made) lives in
 * a scope of this call and stays alive through the autograd graph. */
static Tensor *softmax_op(const char *op, Tensor *t, int dim, bool log_out)
{
    if (!ct_check_inputs(op, 1, (const Tensor *[]){t}) || !ct_check_float(op, t))
        return NULL;
    int d = ct_norm_dim(op, dim, t->ndim ? t->ndim : 1); /* 0-d: dim 0 or -1 */
    if (d < 0) return NULL;
    CtSoftmaxParams p = {.log = log_out};
    softmax_geometry(t, d, &p);
    CtScope *sc = ct_scope_open();
    if (!sc) return NULL;
    /* autocast runs softmax in f32: a bf16/f16 input is widened */
    if (ct_autocast_widens(t)) t = tensor_cast(t, CT_F32);
    Tensor *x = t ? tensor_contiguous(t) : NULL;
    Tensor *y = x ? ct_tensor_new(t->ndim, t->shape, t->dtype, t->storage->device) : NULL;
    if (y && tensor_numel(y)) { /* (no elements: nothing to compute) */
        CtOpCall c = {.op = CT_OP_SOFTMAX, .out = {y}, .in = {x}, .params = &p};
        if (ct_dispatch(&c) != CT_OK) y = NULL;
    }
    /* on failure y stays in the scope, which releases it */
    CtNode *n = NULL;
    if (y && ct_node_new(y, op, softmax_backward, 1, &x, &n) != CT_OK) y = NULL;
    if (n) {
        *CT_NODE_PARAMS(n, CtSoftmaxParams) = p;
        if (ct_node_save_output(n, 0, y) != CT_OK) y = NULL;
    }
    tensor_retain(y);
    ct_scope_close(sc);
    return y ? ct_scope_adopt(y) : NULL;
}

Tensor *tensor_softmax(Tensor *t, int dim)
{
    return softmax_op("softmax", t, dim, false);
}

Tensor *tensor_log_softmax(Tensor *t, int dim)
{
    return softmax_op("log_softmax", t, dim, true);
}
