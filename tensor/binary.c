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

/* d(a^b)/da = b * a^(b-1), 0 where b == 0 (not 0 * inf at a = 0);
 * d(a^b)/db = a^b * log(a), 0 where a == 0 and b >= 0: PyTorch's masks. */
static CtStatus pow_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    Tensor *y = n->saved[0]; /* a ** b */
    Tensor *zero = tensor_scalar(0.0, A->dtype, A->storage->device);
    if (NEED(0)) {
        Tensor *d = tensor_mul(B, tensor_pow(A, tensor_sub_scalar(B, 1.0)));
        d = tensor_masked_fill(d, tensor_eq(B, zero), 0.0);
        if (!(gin[0] = grad_to(tensor_mul(g, d), A))) return ct_last_status();
    }
    if (NEED(1)) {
        Tensor *a0 = tensor_mul(tensor_cast(tensor_eq(A, zero), y->dtype),
                                tensor_cast(tensor_ge(B, zero), y->dtype));
        Tensor *d = tensor_masked_fill(tensor_mul(y, tensor_log(A)),
                                       tensor_cast(a0, CT_BOOL), 0.0);
        if (!(gin[1] = grad_to(tensor_mul(g, d), B))) return ct_last_status();
    }
    return CT_OK;
}

/* max/min: the gradient goes to a where b does not win (ties included), to
 * b where a does not; where a or b is NaN neither wins, and both get it,
 * as in PyTorch 1.13. */
static CtStatus extremum_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    Tensor *b_wins = n->saved[0], *a_wins = n->saved[1]; /* bool, out shape */
    if (NEED(0)) {
        Tensor *m = tensor_rsub_scalar(tensor_cast(b_wins, g->dtype), 1.0);
        if (!(gin[0] = grad_to(tensor_mul(g, m), A))) return ct_last_status();
    }
    if (NEED(1)) {
        Tensor *m = tensor_rsub_scalar(tensor_cast(a_wins, g->dtype), 1.0);
        if (!(gin[1] = grad_to(tensor_mul(g, m), B))) return ct_last_status();
    }
    return CT_OK;
}

/* Runs the BINARY kernel on out <- a (kind) b, broadcasting both; errors
 * name op. */
static CtStatus run_binary(const char *op, CtBinaryKind kind, Tensor *out,
                           const Tensor *a, const Tensor *b)
{
    Tensor *ea = ct_broadcast_alias(a, out->ndim, out->shape);
    Tensor *eb = ct_broadcast_alias(b, out->ndim, out->shape);
    CtStatus st;
    if (!ea || !eb) {
        st = ct_error(CT_ERR_OOM, "binary op: out of memory");
    } else {
        CtBinaryParams p = {kind};
        CtOpCall c = {
            .op = CT_OP_BINARY, .out = {out}, .in = {ea, eb}, .params = &p, .name = op};
        st = ct_elementwise_dispatch(&c);
    }
    tensor_free(ea);
    tensor_free(eb);
    return st;
}

static Tensor *binary(const char *op, CtBinaryKind kind, Tensor *a, Tensor *b,
                      CtBackwardFn bw);

/* Saves where b wins and where a wins (ties, for max a >= b) in n, for
 * extremum_backward. The masks are made in a private scope, so they are
 * released with or without the caller's; the node keeps its own
 * references. */
static CtStatus save_winners(CtNode *n, CtBinaryKind kind, Tensor *a, Tensor *b)
{
    CtScope *s = ct_scope_open();
    if (!s) return ct_last_status();
    bool prev = ct_set_grad_enabled(false);
    bool max = kind == CT_BIN_MAX;
    Tensor *b_wins = max ? tensor_lt(a, b) : tensor_gt(a, b);
    Tensor *a_wins = max ? tensor_ge(a, b) : tensor_le(a, b);
    ct_set_grad_enabled(prev);
    if (b_wins && a_wins) {
        ct_node_save(n, 0, b_wins);
        ct_node_save(n, 1, a_wins);
    }
    CtStatus st = b_wins && a_wins ? CT_OK : ct_last_status();
    ct_scope_close(s);
    return st;
}

/* Which inputs kind's backward reads: mul the other factor, div the
 * divisor (and a for b's gradient), pow both. */
static void mark_reads(CtNode *n, CtBinaryKind kind)
{
    if (kind == CT_BIN_MUL) ct_node_reads_factors(n);
    if (kind == CT_BIN_DIV) {
        ct_node_reads(n, 1);
        if (n->needs_grad[1]) ct_node_reads(n, 0);
    }
    if (kind == CT_BIN_POW) {
        ct_node_reads(n, 0);
        ct_node_reads(n, 1);
    }
}

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

/* a / b for integer or bool a and b: true division in f32 (PyTorch's
 * default float dtype), as torch.div divides them; the casts live in a
 * scope of their own. */
static Tensor *true_divide(Tensor *a, Tensor *b)
{
    CtScope *s = ct_scope_open();
    if (!s) return NULL;
    Tensor *y = tensor_retain(tensor_div(tensor_cast(a, CT_F32), tensor_cast(b, CT_F32)));
    ct_scope_close(s);
    return ct_scope_adopt(y);
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
    if (kind == CT_BIN_DIV && !ct_dtype_is_float(a->dtype)) return true_divide(a, b);
    int64_t shape[CT_MAX_DIMS];
    int nd = ct_broadcast_shape(op, a, b, shape);
    if (nd < 0) return NULL;
    CtDType dt = kind >= CT_BIN_EQ ? CT_BOOL : a->dtype;
    Tensor *out =
        ct_tensor_new_for(nd, shape, dt, a->storage->device, 2, (const Tensor *[]){a, b});
    if (!out || run_binary(op, kind, out, a, b) != CT_OK) return ct_op_discard(out);
    if (!bw) return out;
    CtNode *n;
    if (ct_node_new(out, op, bw, 2, (Tensor *[]){a, b}, &n) != CT_OK)
        return ct_op_discard(out);
    if (n) mark_reads(n, kind);
    if (n && kind == CT_BIN_POW && ct_node_save_output(n, 0, out) != CT_OK)
        return ct_op_discard(out);
    if (n && kind == CT_BIN_ADD_RELU && ct_node_fuse_relu(n, out) != CT_OK)
        return ct_op_discard(out);
    if (n && (kind == CT_BIN_MAX || kind == CT_BIN_MIN) &&
        save_winners(n, kind, a, b) != CT_OK)
        return ct_op_discard(out);
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
