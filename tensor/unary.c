/* Unary elementwise ops (activations, exp/log, ...) and the tensor-scalar
 * arithmetic forms, all through the UNARY / UNARY_BWD kernels. */
#include <math.h>

#include "elementwise.h"

/* New tensor f'(.) * g by the fused UNARY_BWD kernel, x being what the
 * kind reads (the input or the output, elementwise.h). NULL on error. */
static Tensor *unary_grad(const CtUnaryParams *p, const Tensor *x, Tensor *g)
{
    Tensor *gx = ct_tensor_new_for(g->ndim, g->shape, g->dtype, g->storage->device, 2,
                                   (const Tensor *[]){x, g});
    if (!gx) return NULL;
    CtOpCall c = {.op = CT_OP_UNARY_BWD, .out = {gx}, .in = {x, g}, .params = p};
    return ct_elementwise_dispatch(&c) == CT_OK ? gx : ct_op_discard(gx);
}

static CtStatus unary_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    const CtUnaryParams *p = CT_NODE_PARAMS(n, CtUnaryParams);
    if (p->kind == CT_UN_ADD_SCALAR) { /* d(x + s) = 1 */
        gin[0] = g;
        return CT_OK;
    }
    const Tensor *x = ct_unary_bwd_uses_output(p->kind) ? n->saved[0] : n->in[0];
    return (gin[0] = unary_grad(p, x, g)) ? CT_OK : ct_last_status();
}

Tensor *ct_act_grad(CtUnaryKind act, const Tensor *x, Tensor *g)
{
    const CtUnaryParams p = {act, 0, 0};
    return unary_grad(&p, x, g);
}

CtStatus ct_act_run(CtUnaryKind act, Tensor *out, const Tensor *x)
{
    const CtUnaryParams p = {act, 0, 0};
    CtOpCall c = {.op = CT_OP_UNARY, .out = {out}, .in = {x}, .params = &p};
    return ct_elementwise_dispatch(&c);
}

/* Whether kind's backward reads x (elementwise.h: not for the kinds that
 * read the output, nor for those whose derivative is a constant). */
static bool unary_bwd_reads_input(CtUnaryKind k)
{
    return !ct_unary_bwd_uses_output(k) && k != CT_UN_NEG && k != CT_UN_ADD_SCALAR &&
           k != CT_UN_MUL_SCALAR && k != CT_UN_RSUB_SCALAR;
}

/* Params an integer kernel would have to truncate, or that do not fit its
 * dtype, are refused up front (clamp bounds may lie outside it, infinite
 * ones included). */
static bool int_params_ok(const char *op, const Tensor *t, const CtUnaryParams *p)
{
    if (ct_dtype_is_float(t->dtype)) return true;
    bool clamp = p->kind == CT_UN_CLAMP;
    double v[2] = {p->a, p->b};
    for (int i = 0; i < (clamp ? 2 : 1); i++) {
        char d[96];
        if (v[i] != floor(v[i]) || (!isfinite(v[i]) && !clamp)) {
            ct_error(CT_ERR_INVALID, "%s: scalar %g must be an integer for %s", op, v[i],
                     tensor_describe(t, d, sizeof d));
            return false;
        }
        if (!clamp && !ct_int_value_fits(t->dtype, v[i])) {
            ct_error(CT_ERR_INVALID, "%s: scalar %g does not fit %s", op, v[i],
                     tensor_describe(t, d, sizeof d));
            return false;
        }
    }
    return true;
}

/* out <- f(t) for kind, with scalars a, b (CtUnaryParams). */
static Tensor *unary(const char *op, CtUnaryKind kind, Tensor *t, double a, double b)
{
    if (!ct_check_inputs(op, 1, (const Tensor *[]){t})) return NULL;
    CtUnaryParams p = {kind, a, b};
    CtDevice dev = t->storage->device;
    const CtBackend *be = ct_backend_for(dev);
    if (!be) return NULL;
    /* probe before allocating, so the error names the op, not the kernel */
    CtOpCall c = {.op = CT_OP_UNARY, .out = {t}, .in = {t}, .params = &p};
    if (!ct_backend_supports(be, &c)) {
        char d[96], ds[16];
        ct_error(CT_ERR_UNSUPPORTED, "%s: not supported on %s for %s (input %s)", op,
                 ct_device_str(dev, ds), ct_dtype_name(t->dtype),
                 tensor_describe(t, d, sizeof d));
        return NULL;
    }
    if (!int_params_ok(op, t, &p)) return NULL;
    Tensor *out =
        ct_tensor_new_for(t->ndim, t->shape, t->dtype, dev, 1, (const Tensor *[]){t});
    if (!out) return NULL;
    c.out[0] = out;
    CtNode *n;
    if (ct_elementwise_dispatch(&c) != CT_OK ||
        ct_node_new(out, op, unary_backward, 1, &t, &n) != CT_OK)
        return ct_op_discard(out);
    if (n) {
        *CT_NODE_PARAMS(n, CtUnaryParams) = p;
        if (ct_unary_bwd_uses_output(kind) && ct_node_save_output(n, 0, out) != CT_OK)
            return ct_op_discard(out);
        if (unary_bwd_reads_input(kind)) ct_node_reads(n, 0);
    }
    return out;
}

Tensor *tensor_neg(Tensor *t)
{
    return unary("neg", CT_UN_NEG, t, 0, 0);
}
Tensor *tensor_exp(Tensor *t)
{
    return unary("exp", CT_UN_EXP, t, 0, 0);
}
Tensor *tensor_log(Tensor *t)
{
    return unary("log", CT_UN_LOG, t, 0, 0);
}
Tensor *tensor_sqrt(Tensor *t)
{
    return unary("sqrt", CT_UN_SQRT, t, 0, 0);
}
Tensor *tensor_abs(Tensor *t)
{
    return unary("abs", CT_UN_ABS, t, 0, 0);
}

Tensor *tensor_clamp(Tensor *t, double lo, double hi)
{
    if (t && (isnan(lo) || isnan(hi))) {
        ct_error(CT_ERR_INVALID, "clamp: bounds must not be NaN (got [%g, %g])", lo, hi);
        return NULL;
    }
    return unary("clamp", CT_UN_CLAMP, t, lo, hi);
}

Tensor *tensor_relu(Tensor *t)
{
    return unary("relu", CT_UN_RELU, t, 0, 0);
}
Tensor *tensor_leaky_relu(Tensor *t, double negative_slope)
{
    return unary("leaky_relu", CT_UN_LEAKY_RELU, t, negative_slope, 0);
}

Tensor *tensor_gelu(Tensor *t, CtGeluApprox approx)
{
    if (approx == CT_GELU_TANH) return unary("gelu", CT_UN_GELU_TANH, t, 0, 0);
    if (approx == CT_GELU_ERF || !t) return unary("gelu", CT_UN_GELU_ERF, t, 0, 0);
    ct_error(CT_ERR_INVALID,
             "gelu: unknown approximation %d (CT_GELU_ERF or CT_GELU_TANH)", (int)approx);
    return NULL;
}

Tensor *tensor_silu(Tensor *t)
{
    return unary("silu", CT_UN_SILU, t, 0, 0);
}
Tensor *tensor_sigmoid(Tensor *t)
{
    return unary("sigmoid", CT_UN_SIGMOID, t, 0, 0);
}
Tensor *tensor_tanh(Tensor *t)
{
    return unary("tanh", CT_UN_TANH, t, 0, 0);
}

Tensor *tensor_add_scalar(Tensor *a, double s)
{
    return unary("add_scalar", CT_UN_ADD_SCALAR, a, s, 0);
}
/* a + (-s) is exactly a - s in IEEE arithmetic. */
Tensor *tensor_sub_scalar(Tensor *a, double s)
{
    return unary("sub_scalar", CT_UN_ADD_SCALAR, a, -s, 0);
}
Tensor *tensor_rsub_scalar(Tensor *a, double s)
{
    return unary("rsub_scalar", CT_UN_RSUB_SCALAR, a, s, 0);
}
Tensor *tensor_mul_scalar(Tensor *a, double s)
{
    return unary("mul_scalar", CT_UN_MUL_SCALAR, a, s, 0);
}
Tensor *tensor_div_scalar(Tensor *a, double s)
{
    return unary("div_scalar", CT_UN_DIV_SCALAR, a, s, 0);
}
Tensor *tensor_pow_scalar(Tensor *a, double e)
{
    return unary("pow_scalar", CT_UN_POW_SCALAR, a, e, 0);
}
