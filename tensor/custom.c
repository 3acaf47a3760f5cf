/* tensor_custom: a differentiable op whose forward and backward the caller
 * supplies (PyTorch's autograd.Function, for one input and one output), so
 * a layer above tensor/ can run code of its own inside backward, e.g. a
 * collective (SyncBatchNorm's all-reduce of the gradient sums). */
#include <string.h>

#include "internal.h"

typedef struct CustomParams {
    CtCustomFn backward;
    void *ctx;
    char name[CT_NODE_PARAMS_BYTES - 2 * sizeof(void *)];
} CustomParams;

_Static_assert(sizeof(CustomParams) <= CT_NODE_PARAMS_BYTES, "custom op params");

/* r is what fn returned for `like`: a tensor of like's shape, dtype and
 * device. */
static bool check_result(const char *op, const char *what, const Tensor *r,
                         const Tensor *like)
{
    if (!r) return false;
    if (r->dtype == like->dtype && ct_device_eq(tensor_device(r), tensor_device(like)) &&
        r->ndim == like->ndim &&
        !memcmp(r->shape, like->shape, (size_t)r->ndim * sizeof *r->shape))
        return true;
    char a[96], b[96];
    ct_error(CT_ERR_SHAPE, "%s: the %s function returned %s, expected one like %s", op,
             what, tensor_describe(r, a, sizeof a), tensor_describe(like, b, sizeof b));
    return false;
}

static CtStatus custom_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    const CustomParams *p = (const CustomParams *)n->params;
    Tensor *r = p->backward(p->ctx, g);
    if (!check_result(p->name, "backward", r, n->in[0])) {
        CtStatus st = ct_last_status();
        return st != CT_OK ? st
                           : ct_error(CT_ERR_BACKEND, "%s: backward failed", p->name);
    }
    gin[0] = r;
    return CT_OK;
}

/* forward(ctx, x) with grad mode off, in a scope of its own; the result as
 * a detached alias owned by the caller's scope (or the caller). */
static Tensor *run_forward(const char *op, Tensor *x, CtCustomFn forward, void *ctx)
{
    CtScope *s = ct_scope_open();
    if (!s) return NULL;
    bool prev = ct_set_grad_enabled(false);
    Tensor *r = forward(ctx, x);
    Tensor *alias = NULL;
    if (check_result(op, "forward", r, x))
        alias = ct_tensor_alias(r);
    else if (ct_last_status() == CT_OK)
        ct_error(CT_ERR_BACKEND, "%s: forward failed", op);
    ct_set_grad_enabled(prev);
    ct_scope_close(s);
    return alias ? ct_scope_adopt(alias) : NULL;
}

Tensor *tensor_custom(Tensor *x, CtCustomFn forward, CtCustomFn backward, void *ctx,
                      const char *name)
{
    if (!x) return NULL;
    const char *op = name ? name : "tensor_custom";
    if (!forward || !backward) {
        ct_error(CT_ERR_NULL, "%s: NULL forward or backward function", op);
        return NULL;
    }
    Tensor *out = run_forward(op, x, forward, ctx);
    if (!out) return NULL;
    CtNode *n;
    if (ct_node_new(out, op, custom_backward, 1, (Tensor *[]){x}, &n) != CT_OK)
        return ct_op_discard(out);
    if (n) {
        CustomParams *p = (CustomParams *)n->params;
        p->backward = backward;
        p->ctx = ctx;
        snprintf(p->name, sizeof p->name, "%s", op);
        n->op = p->name; /* the caller's string need not outlive the graph */
    }
    return out;
}
