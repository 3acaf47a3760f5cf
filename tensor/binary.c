/* Broadcasting binary ops: arithmetic (differentiable) and comparisons. */
#include "internal.h"

/* gout summed down to x's shape (the reverse of broadcasting). */
static Tensor *grad_to(Tensor *gout, const Tensor *x)
{
    if (!gout) return NULL;
    bool same = gout->ndim == x->ndim;
    for (int i = 0; same && i < x->ndim; i++) same = gout->shape[i] == x->shape[i];
    return same ? gout : tensor_sum_to(gout, x->ndim, x->shape);
}

static CtStatus done(Tensor **gin, int n)
{
    for (int i = 0; i < n; i++)
        if (!gin[i]) return ct_last_status();
    return CT_OK;
}

#define NEED(i) (n->needs_grad[i])
#define A       (n->in[0])
#define B       (n->in[1])

static CtStatus add_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    if (NEED(0) && !(gin[0] = grad_to(g, A))) return ct_last_status();
    if (NEED(1) && !(gin[1] = grad_to(g, B))) return ct_last_status();
    return CT_OK;
}

static CtStatus sub_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    if (NEED(0) && !(gin[0] = grad_to(g, A))) return ct_last_status();
    if (NEED(1) && !(gin[1] = grad_to(tensor_neg(g), B))) return ct_last_status();
    return CT_OK;
}

static CtStatus mul_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    if (NEED(0) && !(gin[0] = grad_to(tensor_mul(g, B), A))) return ct_last_status();
    if (NEED(1) && !(gin[1] = grad_to(tensor_mul(g, A), B))) return ct_last_status();
    return CT_OK;
}

static CtStatus div_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    Tensor *ga = tensor_div(g, B); /* g / b */
    if (NEED(0) && !(gin[0] = grad_to(ga, A))) return ct_last_status();
    /* d(a/b)/db = -a/b² = -(g/b) * (a/b) */
    if (NEED(1) && !(gin[1] = grad_to(tensor_neg(tensor_mul(ga, tensor_div(A, B))), B)))
        return ct_last_status();
    return CT_OK;
}

static CtStatus pow_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    Tensor *y = n->saved[0]; /* a ** b */
    if (NEED(0)) {           /* b * a^(b-1) = b * y / a */
        Tensor *d = tensor_mul(B, tensor_pow(A, tensor_sub_scalar(B, 1.0)));
        if (!(gin[0] = grad_to(tensor_mul(g, d), A))) return ct_last_status();
    }
    if (NEED(1) && !(gin[1] = grad_to(tensor_mul(g, tensor_mul(y, tensor_log(A))), B)))
        return ct_last_status();
    return CT_OK;
}

/* max/min: the gradient goes to a where a wins, ties included. */
static CtStatus extremum_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    Tensor *wins = n->saved[0]; /* bool, out shape */
    Tensor *m = tensor_cast(wins, g->dtype);
    if (NEED(0) && !(gin[0] = grad_to(tensor_mul(g, m), A))) return ct_last_status();
    if (NEED(1) && !(gin[1] = grad_to(tensor_mul(g, tensor_rsub_scalar(m, 1.0)), B)))
        return ct_last_status();
    return done(gin, 0);
}

/* Runs the BINARY kernel on out <- a (kind) b, broadcasting both. */
static CtStatus run_binary(CtBinaryKind kind, Tensor *out, const Tensor *a,
                           const Tensor *b)
{
    Tensor *ea = ct_broadcast_alias(a, out->ndim, out->shape);
    Tensor *eb = ct_broadcast_alias(b, out->ndim, out->shape);
    CtStatus st;
    if (!ea || !eb) {
        st = ct_error(CT_ERR_OOM, "binary op: out of memory");
    } else {
        CtBinaryParams p = {kind};
        CtOpCall c = {.op = CT_OP_BINARY, .out = {out}, .in = {ea, eb}, .params = &p};
        st = ct_elementwise_dispatch(&c);
    }
    tensor_free(ea);
    tensor_free(eb);
    return st;
}

static Tensor *binary(const char *op, CtBinaryKind kind, Tensor *a, Tensor *b,
                      CtBackwardFn bw);

typedef struct BinaryArgs {
    const char *op;
    CtBinaryKind kind;
    CtBackwardFn bw;
} BinaryArgs;

static Tensor *binary_again(Tensor **ops, const void *arg)
{
    const BinaryArgs *ba = arg;
    return binary(ba->op, ba->kind, ops[0], ops[1], ba->bw);
}

static Tensor *binary(const char *op, CtBinaryKind kind, Tensor *a, Tensor *b,
                      CtBackwardFn bw)
{
    if (!ct_check_inputs(op, 2, (const Tensor *[]){a, b})) return NULL;
    if (ct_promotes_to_f32(2, (Tensor *[]){a, b})) {
        BinaryArgs ba = {op, kind, bw};
        return ct_autocast_call(2, (Tensor *[]){a, b}, CT_F32, binary_again, &ba);
    }
    if (!ct_check_same_dtype(op, a, b)) return NULL;
    int64_t shape[CT_MAX_DIMS];
    int nd = ct_broadcast_shape(op, a, b, shape);
    if (nd < 0) return NULL;
    CtDType dt = kind >= CT_BIN_EQ ? CT_BOOL : a->dtype;
    Tensor *out =
        ct_tensor_new_for(nd, shape, dt, a->storage->device, 2, (const Tensor *[]){a, b});
    if (!out || run_binary(kind, out, a, b) != CT_OK) return ct_op_discard(out);
    if (!bw) return out;
    CtNode *n;
    if (ct_node_new(out, op, bw, 2, (Tensor *[]){a, b}, &n) != CT_OK)
        return ct_op_discard(out);
    if (n && kind == CT_BIN_POW && ct_node_save_output(n, 0, out) != CT_OK)
        return ct_op_discard(out);
    if (n && kind == CT_BIN_ADD_RELU && ct_node_fuse_relu(n, out) != CT_OK)
        return ct_op_discard(out);
    if (n && (kind == CT_BIN_MAX || kind == CT_BIN_MIN)) {
        /* in a private scope, so it is released with or without the
         * caller's; the node keeps its own reference */
        CtScope *s = ct_scope_open();
        bool prev = ct_set_grad_enabled(false);
        Tensor *wins = !s ? NULL : kind == CT_BIN_MAX ? tensor_ge(a, b) : tensor_le(a, b);
        ct_set_grad_enabled(prev);
        if (wins) ct_node_save(n, 0, wins);
        ct_scope_close(s);
        if (!wins) return ct_op_discard(out);
    }
    return out;
}

Tensor *tensor_add(Tensor *a, Tensor *b)
{
    return binary("add", CT_BIN_ADD, a, b, add_backward);
}
/* The engine masks g by the output first (ct_node_fuse_relu), so the
 * gradient is add's. */
Tensor *tensor_add_relu(Tensor *a, Tensor *b)
{
    return binary("add_relu", CT_BIN_ADD_RELU, a, b, add_backward);
}
Tensor *tensor_sub(Tensor *a, Tensor *b)
{
    return binary("sub", CT_BIN_SUB, a, b, sub_backward);
}
Tensor *tensor_mul(Tensor *a, Tensor *b)
{
    return binary("mul", CT_BIN_MUL, a, b, mul_backward);
}
Tensor *tensor_div(Tensor *a, Tensor *b)
{
    return binary("div", CT_BIN_DIV, a, b, div_backward);
}
Tensor *tensor_pow(Tensor *a, Tensor *b)
{
    return binary("pow", CT_BIN_POW, a, b, pow_backward);
}
Tensor *tensor_maximum(Tensor *a, Tensor *b)
{
    return binary("maximum", CT_BIN_MAX, a, b, extremum_backward);
}
Tensor *tensor_minimum(Tensor *a, Tensor *b)
{
    return binary("minimum", CT_BIN_MIN, a, b, extremum_backward);
}
Tensor *tensor_eq(Tensor *a, Tensor *b)
{
    return binary("eq", CT_BIN_EQ, a, b, NULL);
}
Tensor *tensor_ne(Tensor *a, Tensor *b)
{
    return binary("ne", CT_BIN_NE, a, b, NULL);
}
Tensor *tensor_lt(Tensor *a, Tensor *b)
{
    return binary("lt", CT_BIN_LT, a, b, NULL);
}
Tensor *tensor_le(Tensor *a, Tensor *b)
{
    return binary("le", CT_BIN_LE, a, b, NULL);
}
Tensor *tensor_gt(Tensor *a, Tensor *b)
{
    return binary("gt", CT_BIN_GT, a, b, NULL);
}
Tensor *tensor_ge(Tensor *a, Tensor *b)
{
    return binary("ge", CT_BIN_GE, a, b, NULL);
}
