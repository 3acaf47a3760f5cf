/* Reductions: sum, mean, max, min, var, argmax, sum_all, mean_all, sum_to.
 * All run CT_OP_REDUCE; max/min also keep the index of the first extremum
 * so that backward (CT_OP_ARG_REDUCE) sends the gradient to it alone. */
#include <math.h>
#include <string.h>

#include "reduce.h"

/* A reduction of x: which dims, x's keepdim shape and the output shape. */
typedef struct Shapes {
    unsigned mask; /* bit d: dim d of x is reduced */
    int kndim, ondim;
    int64_t kshape[CT_MAX_DIMS], oshape[CT_MAX_DIMS];
    int64_t n; /* elements reduced into each output */
} Shapes;

/* What backward needs (fits CT_NODE_PARAMS_BYTES). */
typedef struct ReduceNode {
    int ndim;
    int64_t shape[CT_MAX_DIMS]; /* x's shape */
    unsigned mask;
    double scale; /* sum: 1, mean: 1/n, var: 1/(n - correction) */
} ReduceNode;

static void shapes_from_mask(int ndim, const int64_t *shape, unsigned mask, bool keepdim,
                             Shapes *s)
{
    s->mask = mask;
    s->kndim = ndim;
    s->ondim = 0;
    s->n = 1;
    for (int d = 0; d < ndim; d++) {
        bool red = mask >> d & 1u;
        s->kshape[d] = red ? 1 : shape[d];
        if (red) s->n *= shape[d];
        if (!red || keepdim) s->oshape[s->ondim++] = s->kshape[d];
    }
}

/* Parses `dims` (ndims == 0: all dims). Records an error and returns false
 * on a bad or repeated dim. */
static bool parse_dims(const char *op, const Tensor *t, int ndims, const int *dims,
                       bool keepdim, Shapes *s)
{
    if (ndims < 0 || ndims > CT_MAX_DIMS || (ndims > 0 && !dims)) {
        ct_error(CT_ERR_INVALID, "%s: bad dim list (ndims = %d%s)", op, ndims,
                 ndims > 0 && !dims ? ", dims NULL" : "");
        return false;
    }
    unsigned mask = ndims == 0 ? (1u << t->ndim) - 1u : 0;
    for (int i = 0; i < ndims; i++) {
        /* a 0-d tensor accepts dim 0 or -1, as in PyTorch */
        int d = ct_norm_dim(op, dims[i], t->ndim ? t->ndim : 1);
        if (d < 0) return false;
        if (t->ndim == 0) continue;
        if (mask >> d & 1u) {
            ct_error(CT_ERR_INVALID, "%s: dim %d appears more than once", op, dims[i]);
            return false;
        }
        mask |= 1u << d;
    }
    shapes_from_mask(t->ndim, t->shape, mask, keepdim, s);
    return true;
}

/* Runs CT_OP_REDUCE of x into fresh outputs of s's output shape: values in
 * x's dtype and, when idx is given, first-extremum indices (CT_I64, caller-
 * owned, never in a scope). Returns the values (scope-owned), or NULL with
 * the error recorded. */
static Tensor *run_reduce(const Tensor *x, const Shapes *s, CtReduceKind kind,
                          double scale, Tensor **idx)
{
    CtDevice dev = x->storage->device;
    /* the kernel writes the keepdim geometry; both are contiguous, so the
     * output shape is then set in place */
    Tensor *y = ct_tensor_new_persistent(s->kndim, s->kshape, x->dtype, dev);
    Tensor *i =
        idx && y ? ct_tensor_new_persistent(s->kndim, s->kshape, CT_I64, dev) : NULL;
    if (!y || (idx && !i)) {
        tensor_free(y);
        return NULL;
    }
    CtReduceParams p = {kind, scale};
    CtOpCall c = {.op = CT_OP_REDUCE, .out = {y, i}, .in = {x}, .params = &p};
    if (ct_dispatch_widening(&c) != CT_OK) {
        tensor_free(y);
        tensor_free(i);
        return NULL;
    }
    Tensor *r[2] = {y, i};
    for (int k = 0; k < 2 && r[k]; k++) {
        r[k]->ndim = s->ondim;
        memcpy(r[k]->shape, s->oshape, sizeof s->oshape);
        ct_contiguous_strides(s->ondim, s->oshape, r[k]->stride);
    }
    y = ct_scope_adopt(y);
    if (idx && y)
        *idx = i;
    else
        tensor_free(i);
    return y;
}

static ReduceNode *save_node(CtNode *n, const Tensor *x, const Shapes *s, double scale)
{
    ReduceNode *p = CT_NODE_PARAMS(n, ReduceNode);
    p->ndim = x->ndim;
    memcpy(p->shape, x->shape, sizeof p->shape);
    p->mask = s->mask;
    p->scale = scale;
    return p;
}

/* g (the output's shape) reshaped to x's keepdim shape. */
static Tensor *keepdim_grad(Tensor *g, const ReduceNode *p)
{
    Shapes s;
    shapes_from_mask(p->ndim, p->shape, p->mask, true, &s);
    return tensor_reshape(g, s.kndim, s.kshape);
}

static Tensor *scaled(Tensor *g, double scale)
{
    if (!g || scale == 1.0) return g;
    return tensor_mul(g, tensor_scalar(scale, g->dtype, g->storage->device));
}

static CtStatus sum_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    ReduceNode *p = CT_NODE_PARAMS(n, ReduceNode);
    gin[0] = tensor_expand(keepdim_grad(scaled(g, p->scale), p), p->ndim, p->shape);
    return gin[0] ? CT_OK : ct_last_status();
}

/* d var / dx = 2 (x - mean) / (n - correction) */
static CtStatus var_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    ReduceNode *p = CT_NODE_PARAMS(n, ReduceNode);
    Tensor *x = n->in[0];
    Shapes s;
    shapes_from_mask(p->ndim, p->shape, p->mask, true, &s);
    Tensor *mean = run_reduce(x, &s, CT_RED_SUM, 1.0 / (double)s.n, NULL);
    Tensor *gk = keepdim_grad(scaled(g, 2.0 * p->scale), p);
    gin[0] = tensor_mul(tensor_sub(x, mean), gk);
    return gin[0] ? CT_OK : ct_last_status();
}

/* The gradient goes to the first extremal element only. */
static CtStatus extremum_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    ReduceNode *p = CT_NODE_PARAMS(n, ReduceNode);
    Tensor *gk = keepdim_grad(g, p), *ik = keepdim_grad(n->saved[0], p);
    if (!gk || !ik) return ct_last_status();
    Tensor *out = ct_tensor_new(p->ndim, p->shape, g->dtype, g->storage->device);
    if (!out) return ct_last_status();
    CtOpCall c = {.op = CT_OP_ARG_REDUCE, .out = {out}, .in = {gk, ik}};
    CtStatus st = ct_dispatch_widening(&c);
    if (st == CT_OK) gin[0] = out;
    return st;
}

static Tensor *reduce_op(const char *op, Tensor *t, int ndims, const int *dims,
                         bool keepdim, CtReduceKind kind, bool mean, int correction)
{
    if (!ct_check_inputs(op, 1, (const Tensor *[]){t}) || !ct_check_float(op, t))
        return NULL;
    Shapes s;
    if (!parse_dims(op, t, ndims, dims, keepdim, &s)) return NULL;
    bool ext = kind == CT_RED_MAX || kind == CT_RED_MIN;
    if (ext && s.n == 0) {
        char d[96];
        ct_error(CT_ERR_SHAPE, "%s: cannot reduce %s over an empty dim", op,
                 tensor_describe(t, d, sizeof d));
        return NULL;
    }
    double scale = 1.0;
    if (mean) scale = 1.0 / (double)s.n;
    if (kind == CT_RED_VAR) {
        double dof = (double)s.n - correction;
        scale = 1.0 / (dof > 0 ? dof : 0.0); /* PyTorch: inf/nan when dof <= 0 */
    }
    bool grad = ct_grad_enabled() && t->requires_grad;
    Tensor *idx = NULL;
    Tensor *out = run_reduce(t, &s, kind, scale, ext && grad ? &idx : NULL);
    if (!out) return NULL;
    CtBackwardFn bw = ext                  ? extremum_backward
                      : kind == CT_RED_VAR ? var_backward
                                           : sum_backward;
    CtNode *n;
    CtStatus st = ct_node_new(out, op, bw, 1, &t, &n);
    if (n) {
        save_node(n, t, &s, scale);
        if (bw == var_backward) ct_node_reads(n, 0);
        if (idx) ct_node_save(n, 0, idx);
    }
    tensor_free(idx);
    return st == CT_OK ? out : ct_op_discard(out);
}

Tensor *tensor_sum(Tensor *t, int ndims, const int *dims, bool keepdim)
{
    return reduce_op("sum", t, ndims, dims, keepdim, CT_RED_SUM, false, 0);
}

Tensor *tensor_mean(Tensor *t, int ndims, const int *dims, bool keepdim)
{
    return reduce_op("mean", t, ndims, dims, keepdim, CT_RED_SUM, true, 0);
}

Tensor *tensor_max(Tensor *t, int ndims, const int *dims, bool keepdim)
{
    return reduce_op("max", t, ndims, dims, keepdim, CT_RED_MAX, false, 0);
}

Tensor *tensor_min(Tensor *t, int ndims, const int *dims, bool keepdim)
{
    return reduce_op("min", t, ndims, dims, keepdim, CT_RED_MIN, false, 0);
}

Tensor *tensor_var(Tensor *t, int ndims, const int *dims, int correction, bool keepdim)
{
    return reduce_op("var", t, ndims, dims, keepdim, CT_RED_VAR, false, correction);
}

Tensor *tensor_sum_all(Tensor *t)
{
    return reduce_op("sum", t, 0, NULL, false, CT_RED_SUM, false, 0);
}

Tensor *tensor_mean_all(Tensor *t)
{
    return reduce_op("mean", t, 0, NULL, false, CT_RED_SUM, true, 0);
}

Tensor *tensor_argmax(Tensor *t, int dim, bool keepdim)
{
    const char *op = "argmax";
    if (!ct_check_inputs(op, 1, (const Tensor *[]){t}) || !ct_check_float(op, t))
        return NULL;
    Shapes s;
    if (!parse_dims(op, t, 1, &dim, keepdim, &s)) return NULL;
    if (s.n == 0) {
        char d[96];
        ct_error(CT_ERR_SHAPE, "argmax: cannot reduce %s over an empty dim",
                 tensor_describe(t, d, sizeof d));
        return NULL;
    }
    /* values go to a scratch tensor of this call's own scope */
    CtScope *sc = ct_scope_open();
    if (!sc) return NULL;
    Tensor *idx = NULL;
    Tensor *v = run_reduce(t, &s, CT_RED_MAX, 1.0, &idx);
    ct_scope_close(sc);
    return v ? ct_scope_adopt(idx) : NULL;
}

Tensor *tensor_sum_to(Tensor *t, int ndim, const int64_t *shape)
{
    const char *op = "sum_to";
    if (!ct_check_inputs(op, 1, (const Tensor *[]){t}) || !ct_check_float(op, t))
        return NULL;
    int lead = t->ndim - ndim;
    bool ok = lead >= 0 && ndim >= 0 && (ndim == 0 || shape);
    unsigned mask = 0;
    for (int d = 0; ok && d < t->ndim; d++) {
        if (d < lead) {
            mask |= 1u << d;
            continue;
        }
        int64_t want = shape[d - lead];
        if (want == 1 && t->shape[d] != 1)
            mask |= 1u << d;
        else
            ok = want == t->shape[d];
    }
    if (!ok) {
        char b1[96], b2[80];
        ct_error(CT_ERR_SHAPE, "sum_to: cannot sum %s down to %s",
                 tensor_describe(t, b1, sizeof b1),
                 ndim >= 0 && ndim <= CT_MAX_DIMS && (ndim == 0 || shape)
                     ? ct_shape_str(ndim, shape, b2, sizeof b2)
                     : "(bad shape)");
        return NULL;
    }
    if (mask == 0) return ct_scope_adopt(tensor_retain(t)); /* already that shape */
    Shapes s;
    shapes_from_mask(t->ndim, t->shape, mask, true, &s);
    s.ondim = ndim;
    if (ndim) memcpy(s.oshape, shape, (size_t)ndim * sizeof *shape);
    Tensor *out = run_reduce(t, &s, CT_RED_SUM, 1.0, NULL);
    CtNode *n;
    if (ct_node_new(out, op, sum_backward, 1, &t, &n) != CT_OK) return ct_op_discard(out);
    if (n) save_node(n, t, &s, 1.0);
    return out;
}
