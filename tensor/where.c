/* where and masked_fill: elementwise selection under a bool condition. */
#include <math.h>

#include "elementwise.h"

/* Broadcast shape of three tensors into out; -1 + error when they do not
 * broadcast. */
static int broadcast3(const char *op, const Tensor *const *ts, int64_t *out)
{
    int n = 0;
    for (int k = 0; k < 3; k++) n = ts[k]->ndim > n ? ts[k]->ndim : n;
    for (int i = 0; i < n; i++) {
        int64_t size = 1;
        for (int k = 0; k < 3; k++) {
            int j = i - (n - ts[k]->ndim);
            int64_t s = j >= 0 ? ts[k]->shape[j] : 1;
            if (s == 1 || s == size || size == 1) {
                size = s == 1 ? size : s;
                continue;
            }
            char d0[96], d1[96], d2[96];
            ct_error(CT_ERR_SHAPE, "%s: shapes %s, %s and %s do not broadcast", op,
                     tensor_describe(ts[0], d0, sizeof d0),
                     tensor_describe(ts[1], d1, sizeof d1),
                     tensor_describe(ts[2], d2, sizeof d2));
            return -1;
        }
        out[i] = size;
    }
    return n;
}

/* A caller-owned 0-d tensor holding v (never in a scope, so it is freed the
 * same way whether or not a scope is open). */
static Tensor *constant(double v, CtDType dt, CtDevice dev)
{
    Tensor *t = ct_tensor_new_persistent(0, (const int64_t[]){1}, dt, dev);
    if (t && tensor_fill_(t, v) != CT_OK) {
        tensor_free(t);
        return NULL;
    }
    return t;
}

/* out <- cond ? a : b, broadcast, with no autograd. Inputs validated. */
static Tensor *select_into(const char *op, const Tensor *cond, const Tensor *a,
                           const Tensor *b)
{
    const Tensor *ts[3] = {cond, a, b};
    int64_t shape[CT_MAX_DIMS];
    int nd = broadcast3(op, ts, shape);
    if (nd < 0) return NULL;
    Tensor *out = ct_tensor_new_for(nd, shape, a->dtype, a->storage->device, 3, ts);
    if (!out) return NULL;
    Tensor *e[3];
    for (int k = 0; k < 3; k++) e[k] = ct_broadcast_alias(ts[k], nd, shape);
    CtStatus st;
    if (!e[0] || !e[1] || !e[2]) {
        st = ct_error(CT_ERR_OOM, "%s: out of memory", op);
    } else {
        CtOpCall c = {.op = CT_OP_WHERE, .out = {out}, .in = {e[0], e[1], e[2]}};
        st = ct_elementwise_dispatch(&c);
    }
    for (int k = 0; k < 3; k++) tensor_free(e[k]);
    return st == CT_OK ? out : ct_op_discard(out);
}

/* gout summed down to x's shape (the reverse of broadcasting). */
static Tensor *grad_to(Tensor *g, const Tensor *x)
{
    if (!g) return NULL;
    bool same = g->ndim == x->ndim;
    for (int i = 0; same && i < x->ndim; i++) same = g->shape[i] == x->shape[i];
    return same ? g : tensor_sum_to(g, x->ndim, x->shape);
}

/* in = {cond, a, b}: d/da = g where cond, d/db = g elsewhere. */
static CtStatus where_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    Tensor *cond = n->in[0];
    Tensor *zero = constant(0.0, g->dtype, g->storage->device);
    if (!zero) return ct_last_status();
    CtStatus st = CT_OK;
    if (n->needs_grad[1] &&
        !(gin[1] = grad_to(select_into(n->op, cond, g, zero), n->in[1])))
        st = ct_last_status();
    if (st == CT_OK && n->needs_grad[2] &&
        !(gin[2] = grad_to(select_into(n->op, cond, zero, g), n->in[2])))
        st = ct_last_status();
    tensor_free(zero);
    return st;
}

static bool check_cond(const char *op, const char *what, const Tensor *c)
{
    if (c->dtype == CT_BOOL) return true;
    char d[96];
    ct_error(CT_ERR_DTYPE, "%s: %s must be a bool tensor, got %s", op, what,
             tensor_describe(c, d, sizeof d));
    return false;
}

/* The selection with its autograd node; a and b must share a dtype. */
static Tensor *where_op(const char *op, Tensor *cond, Tensor *a, Tensor *b)
{
    Tensor *out = select_into(op, cond, a, b);
    CtNode *n;
    if (ct_node_new(out, op, where_backward, 3, (Tensor *[]){cond, a, b}, &n) != CT_OK)
        return ct_op_discard(out);
    if (n) ct_node_reads(n, 0);
    return out;
}

static Tensor *where_again(Tensor **ops, const void *cond)
{
    return tensor_where((Tensor *)cond, ops[0], ops[1]);
}

Tensor *tensor_where(Tensor *cond, Tensor *a, Tensor *b)
{
    const char *op = "where";
    if (!ct_check_inputs(op, 3, (const Tensor *[]){cond, a, b}) ||
        !check_cond(op, "cond", cond))
        return NULL;
    if (ct_promotes_to_f32(2, (Tensor *[]){a, b}))
        return ct_autocast_call(2, (Tensor *[]){a, b}, CT_F32, where_again, cond);
    if (!ct_check_same_dtype(op, a, b)) return NULL;
    return where_op(op, cond, a, b);
}

Tensor *tensor_masked_fill(Tensor *t, Tensor *mask, double value)
{
    const char *op = "masked_fill";
    if (!ct_check_inputs(op, 2, (const Tensor *[]){t, mask}) ||
        !check_cond(op, "mask", mask))
        return NULL;
    char d1[96], d2[96];
    int64_t shape[CT_MAX_DIMS];
    int nd = broadcast3(op, (const Tensor *[]){mask, t, t}, shape);
    if (nd < 0) return NULL;
    bool same = nd == t->ndim;
    for (int i = 0; same && i < nd; i++) same = shape[i] == t->shape[i];
    if (!same) {
        ct_error(CT_ERR_SHAPE, "%s: mask %s does not broadcast to the input %s", op,
                 tensor_describe(mask, d1, sizeof d1), tensor_describe(t, d2, sizeof d2));
        return NULL;
    }
    if (!ct_int_value_fits(t->dtype, value)) {
        ct_error(CT_ERR_INVALID, "%s: value %g does not fit %s", op, value,
                 tensor_describe(t, d2, sizeof d2));
        return NULL;
    }
    Tensor *fill = constant(value, t->dtype, t->storage->device);
    if (!fill) return NULL;
    Tensor *out = where_op(op, mask, fill, t); /* the node keeps its own reference */
    tensor_free(fill);
    return out;
}
