/* Losses with PyTorch's semantics: cross_entropy and nll_loss (fused
 * kernels; cross_entropy against class probabilities composed), mse, l1 and
 * bce_with_logits (composed from other ops).
 *
 * Each loss runs in a scope of its own so that intermediates are released
 * even when no scope is open; what backward needs stays alive through the
 * graph, and the result is handed to the caller's scope. */
#include <math.h>

#include "softmax.h"

/* ---------------------------------------------------- cross-entropy, nll */

static CtStatus ce_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    const CtCrossEntropyParams *p = CT_NODE_PARAMS(n, CtCrossEntropyParams);
    Tensor *x = n->in[0], *gc = tensor_contiguous(g);
    if (!gc) return ct_last_status();
    Tensor *gx = ct_node_grad_buffer(n, 0, x);
    if (!gx) return ct_last_status();
    CtOpCall c = {.op = CT_OP_CROSS_ENTROPY_BWD,
                  .out = {gx},
                  .in = {x, n->saved[0], n->saved[1], gc, n->saved[2]},
                  .params = p};
    CtStatus st = ct_dispatch(&c);
    if (st == CT_OK) gin[0] = gx;
    return st;
}

static bool check_reduction(const char *op, CtReduction r)
{
    if (r == CT_REDUCTION_MEAN || r == CT_REDUCTION_SUM || r == CT_REDUCTION_NONE)
        return true;
    ct_error(CT_ERR_INVALID, "%s: unknown reduction %d", op, (int)r);
    return false;
}

/* Non-NULL operands, floating logits of 2 dims or more, a known reduction. */
static bool check_operands(const char *op, const Tensor *x, const Tensor *target,
                           const CtCrossEntropyArgs *a)
{
    const Tensor *w = a->weight;
    return ct_check_inputs(op, w ? 3 : 2, (const Tensor *[]){x, target, w}) &&
           ct_check_float(op, x) && ct_check_ndim(op, x, 2, CT_MAX_DIMS) &&
           check_reduction(op, a->reduction);
}

/* The class weights (C) of x's dtype, and label_smoothing in [0, 1]. */
static bool check_weight_smoothing(const char *op, const Tensor *x,
                                   const CtCrossEntropyArgs *a)
{
    const Tensor *w = a->weight;
    char d[96];
    if (w && (w->dtype != x->dtype || w->ndim != 1 || w->shape[0] != x->shape[1])) {
        ct_error(CT_ERR_SHAPE,
                 "%s: weight %s must be a (%lld) tensor of the input's dtype %s", op,
                 tensor_describe(w, d, sizeof d), (long long)x->shape[1],
                 ct_dtype_name(x->dtype));
        return false;
    }
    if (!(a->label_smoothing >= 0 && a->label_smoothing <= 1)) {
        ct_error(CT_ERR_INVALID, "%s: label_smoothing %g is not in [0, 1]", op,
                 a->label_smoothing);
        return false;
    }
    return true;
}

static bool check_ce_args(const char *op, const Tensor *x, const Tensor *target,
                          const CtCrossEntropyArgs *a)
{
    if (!check_operands(op, x, target, a)) return false;
    char d1[96], d2[96];
    if (target->dtype != CT_I64) {
        ct_error(CT_ERR_DTYPE, "%s: target must hold i64 class indices, got %s", op,
                 tensor_describe(target, d1, sizeof d1));
        return false;
    }
    bool fits = target->ndim == x->ndim - 1 && target->shape[0] == x->shape[0];
    for (int d = 1; fits && d < target->ndim; d++)
        fits = target->shape[d] == x->shape[d + 1];
    if (!fits) {
        ct_error(CT_ERR_SHAPE,
                 "%s: target %s does not fit input %s (expected the input's shape "
                 "without the class dim 1)",
                 op, tensor_describe(target, d1, sizeof d1),
                 tensor_describe(x, d2, sizeof d2));
        return false;
    }
    return check_weight_smoothing(op, x, a);
}

static Tensor *reduce_loss(Tensor *loss, CtReduction r)
{
    switch (r) {
    case CT_REDUCTION_SUM: return tensor_sum_all(loss);
    case CT_REDUCTION_MEAN: return tensor_mean_all(loss);
    default: return loss;
    }
}

/* Whether the backend of c's logits sums (and averages) this CROSS_ENTROPY
 * call in its kernel; sets the params' fold accordingly. */
static bool backend_folds(CtOpCall *c)
{
    const CtBackend *be = ct_backend_peek(c->in[0]->storage->device);
    CtCrossEntropyParams *p = (CtCrossEntropyParams *)c->params;
    p->fold = true;
    p->fold = be && ct_backend_supports(be, c);
    return p->fold;
}

/* Runs inside the caller's private scope. */
static Tensor *ce_body(const char *op, Tensor *logits, Tensor *target,
                       const CtCrossEntropyArgs *a, bool log_input)
{
    Tensor *x = tensor_contiguous(logits), *t = tensor_contiguous(target);
    Tensor *w = a->weight ? tensor_contiguous((Tensor *)a->weight) : NULL;
    if (!x || !t || (a->weight && !w)) return NULL;
    CtDevice dev = x->storage->device;
    Tensor *loss = ct_tensor_new(t->ndim, t->shape, x->dtype, dev);
    Tensor *wsum = a->reduction == CT_REDUCTION_MEAN
                       ? ct_tensor_new(t->ndim, t->shape, x->dtype, dev)
                       : NULL;
    if (!loss || (a->reduction == CT_REDUCTION_MEAN && !wsum)) return NULL;
    CtCrossEntropyParams p = {
        .n = x->shape[0],
        .c = x->shape[1],
        .inner = tensor_numel(t) / (x->shape[0] ? x->shape[0] : 1),
        .ignore_index = a->ignore_index,
        .use_ignore_index = a->use_ignore_index,
        .log_input = log_input,
        .label_smoothing = log_input ? 0.0 : a->label_smoothing,
    };
    CtOpCall c = {
        .op = CT_OP_CROSS_ENTROPY, .out = {loss, wsum}, .in = {x, t, w}, .params = &p};
    /* a summed or mean loss is reduced outside the graph (loss has no
     * node), by the kernel itself where the backend can (fold); its one
     * node hands the one gradient, over the mean's divisor, straight to
     * the backward kernel: no division or spread of the gradient as ops of
     * their own */
    Tensor *out = loss, *den = NULL;
    if (a->reduction != CT_REDUCTION_NONE) {
        p.go_scalar = true;
        if (backend_folds(&c)) { /* the sum (and divisor): out2 (and out3) */
            c.out[2] = out = ct_tensor_new(0, NULL, x->dtype, dev);
            if (wsum) c.out[3] = den = ct_tensor_new(0, NULL, x->dtype, dev);
            if (!out || (wsum && !den)) return NULL;
        }
    }
    if (ct_dispatch(&c) != CT_OK) return NULL; /* the caller's scope releases loss */
    if (a->reduction != CT_REDUCTION_NONE && !p.fold) {
        out = tensor_sum_all(loss);
        /* PyTorch: divided by the summed weights of the non-ignored targets */
        if (a->reduction == CT_REDUCTION_MEAN)
            out = tensor_div(out, den = tensor_sum_all(wsum));
        if (!out) return NULL;
    }
    CtNode *n;
    if (ct_node_new(out, op, ce_backward, 1, &x, &n) != CT_OK) return NULL;
    if (n) {
        *CT_NODE_PARAMS(n, CtCrossEntropyParams) = p;
        ct_node_reads(n, 0);
        ct_node_save(n, 0, t);
        if (w) ct_node_save(n, 1, w);
        if (den) ct_node_save(n, 2, den);
    }
    return out;
}

/* t, or inside an autocast region an f32 cast of a bf16/f16 t (in the open
 * scope): autocast runs the losses in f32, as PyTorch's does. */
static Tensor *loss_operand(Tensor *t)
{
    return t && ct_autocast_widens(t) ? tensor_cast(t, CT_F32) : t;
}

/* True when target holds class probabilities (a floating tensor, checked
 * against logits by check_soft_args), not class indices. */
static bool soft_target(const Tensor *target)
{
    return target && ct_dtype_is_float(target->dtype);
}

static bool check_soft_args(const char *op, const Tensor *x, const Tensor *target,
                            const CtCrossEntropyArgs *a)
{
    if (!check_operands(op, x, target, a)) return false;
    char d[96], d2[96];
    bool shape = x->ndim == target->ndim &&
                 !memcmp(x->shape, target->shape, (size_t)x->ndim * sizeof *x->shape);
    if (!shape || target->dtype != x->dtype) {
        ct_error(shape ? CT_ERR_DTYPE : CT_ERR_SHAPE,
                 "%s: a floating-point target holds class probabilities and must have "
                 "the input's shape and dtype (%s), got %s; class indices must be i64",
                 op, tensor_describe(x, d, sizeof d),
                 tensor_describe(target, d2, sizeof d2));
        return false;
    }
    if (a->use_ignore_index && a->ignore_index >= 0) {
        ct_error(CT_ERR_INVALID,
                 "%s: ignore_index %lld is not supported with class-probability "
                 "targets (a floating-point target)",
                 op, (long long)a->ignore_index);
        return false;
    }
    return check_weight_smoothing(op, x, a);
}

/* Cross-entropy against class probabilities, PyTorch's formula:
 * loss = -sum_c w_c t'_c log_softmax(x)_c with t' = (1 - ls) t + ls / C,
 * and the mean divides by the number of samples, not by the weights. Built
 * from ops, so it runs on every backend and target gets a gradient too.
 * Runs inside the caller's private scope. */
static Tensor *soft_ce_body(Tensor *logits, Tensor *target, const CtCrossEntropyArgs *a)
{
    const int64_t c = logits->shape[1];
    Tensor *t = target;
    if (a->label_smoothing > 0)
        t = tensor_add_scalar(tensor_mul_scalar(t, 1 - a->label_smoothing),
                              a->label_smoothing / (double)c);
    Tensor *prod = tensor_mul(tensor_log_softmax(logits, 1), t);
    if (a->weight) {
        int64_t shape[CT_MAX_DIMS] = {1, c};
        for (int d = 2; d < logits->ndim; d++) shape[d] = 1;
        prod = tensor_mul(prod, tensor_reshape((Tensor *)a->weight, logits->ndim, shape));
    }
    Tensor *loss = tensor_neg(tensor_sum(prod, 1, (const int[]){1}, false));
    return loss ? reduce_loss(loss, a->reduction) : NULL;
}

static Tensor *ce_op(const char *op, Tensor *logits, Tensor *target,
                     const CtCrossEntropyArgs *args, bool log_input)
{
    /* NULL args: PyTorch's defaults (mean, ignore_index -100) */
    static const CtCrossEntropyArgs defaults = {
        .reduction = CT_REDUCTION_MEAN, .ignore_index = -100, .use_ignore_index = true};
    CtCrossEntropyArgs wa = args ? *args : defaults;
    CtScope *sc = ct_scope_open();
    if (!sc) return NULL;
    /* autocast runs losses in f32: bf16/f16 logits (a CUDA convolution's
     * output) and class weights are widened before they are checked */
    logits = loss_operand(logits);
    if (wa.weight && ct_autocast_widens(wa.weight))
        wa.weight = tensor_cast((Tensor *)wa.weight, CT_F32);
    Tensor *r = NULL;
    if (!log_input && soft_target(target)) {
        target = loss_operand(target);
        if (check_soft_args(op, logits, target, &wa))
            r = tensor_retain(soft_ce_body(logits, target, &wa));
    } else if (check_ce_args(op, logits, target, &wa)) {
        r = tensor_retain(ce_body(op, logits, target, &wa, log_input));
    }
    ct_scope_close(sc);
    return r ? ct_scope_adopt(r) : NULL;
}

Tensor *tensor_cross_entropy(Tensor *logits, Tensor *target,
                             const CtCrossEntropyArgs *args)
{
    return ce_op("cross_entropy", logits, target, args, false);
}

Tensor *tensor_nll_loss(Tensor *logp, Tensor *target, const CtCrossEntropyArgs *args)
{
    return ce_op("nll_loss", logp, target, args, true);
}

/* ------------------------------------------------- elementwise losses */

static bool check_pair(const char *op, const Tensor *input, const Tensor *target,
                       CtReduction r)
{
    return ct_check_inputs(op, 2, (const Tensor *[]){input, target}) &&
           ct_check_float(op, input) && ct_check_same_dtype(op, input, target) &&
           ct_check_same_shape(op, input, target) && check_reduction(op, r);
}

static Tensor *finish(CtScope *sc, Tensor *r)
{
    tensor_retain(r);
    ct_scope_close(sc);
    return r ? ct_scope_adopt(r) : NULL;
}

Tensor *tensor_mse_loss(Tensor *input, Tensor *target, CtReduction r)
{
    CtScope *sc = ct_scope_open();
    if (!sc) return NULL;
    input = loss_operand(input), target = loss_operand(target);
    if (!check_pair("mse_loss", input, target, r)) return finish(sc, NULL);
    Tensor *d = tensor_sub(input, target);
    return finish(sc, reduce_loss(tensor_mul(d, d), r));
}

/* |input - target|; the gradient at 0 is 0, as in PyTorch. */
Tensor *tensor_l1_loss(Tensor *input, Tensor *target, CtReduction r)
{
    CtScope *sc = ct_scope_open();
    if (!sc) return NULL;
    input = loss_operand(input), target = loss_operand(target);
    if (!check_pair("l1_loss", input, target, r)) return finish(sc, NULL);
    return finish(sc, reduce_loss(tensor_abs(tensor_sub(input, target)), r));
}

/* loss = -(pos_weight * y * log σ(x) + (1 - y) * log(1 - σ(x))), with
 * log σ(x) and log(1 - σ(x)) taken stably as log_softmax([0, x]). */
static Tensor *bce_body(Tensor *logits, Tensor *target, Tensor *pos_weight, CtReduction r)
{
    const char *op = "bce_with_logits";
    if (!check_pair(op, logits, target, r)) return NULL;
    int64_t shape[CT_MAX_DIMS + 1];
    int nd = logits->ndim;
    if (nd >= CT_MAX_DIMS) {
        char d[96];
        ct_error(CT_ERR_SHAPE, "%s: input %s has too many dims", op,
                 tensor_describe(logits, d, sizeof d));
        return NULL;
    }
    if (pos_weight) {
        if (!ct_check_inputs(op, 2, (const Tensor *[]){logits, pos_weight}) ||
            !ct_check_same_dtype(op, logits, pos_weight))
            return NULL;
        bool fits = pos_weight->ndim <= nd;
        for (int i = 1; fits && i <= pos_weight->ndim; i++) {
            int64_t p = pos_weight->shape[pos_weight->ndim - i];
            fits = p == 1 || p == logits->shape[nd - i];
        }
        if (!fits) {
            char d1[96], d2[96];
            ct_error(CT_ERR_SHAPE, "%s: pos_weight %s does not broadcast to input %s", op,
                     tensor_describe(pos_weight, d1, sizeof d1),
                     tensor_describe(logits, d2, sizeof d2));
            return NULL;
        }
    }
    CtScope *sc = ct_scope_open();
    if (!sc) return NULL;
    CtDevice dev = logits->storage->device;
    CtDType dt = logits->dtype;
    for (int i = 0; i < nd; i++) shape[i] = logits->shape[i];
    shape[nd] = 2;
    /* [0, 1] made by fills on the device (no host copy, which a GPU would
     * wait for) */
    Tensor *sel = tensor_zeros(1, (const int64_t[]){2}, dt, dev);
    if (sel && tensor_fill_(tensor_slice(sel, 0, 1, 2, 1), 1.0) != CT_OK) sel = NULL;
    Tensor *z = tensor_mul(tensor_expand(tensor_unsqueeze(logits, nd), nd + 1, shape),
                           sel); /* (..., 2): [0, x] */
    Tensor *ls = tensor_log_softmax(z, nd);
    Tensor *log_not = tensor_select(ls, nd, 0), *log_p = tensor_select(ls, nd, 1);
    Tensor *one = tensor_scalar(1.0, dt, dev);
    Tensor *cpos = pos_weight ? tensor_mul(target, pos_weight) : target;
    Tensor *loss = tensor_add(tensor_mul(tensor_sub(target, one), log_not),
                              tensor_mul(tensor_neg(cpos), log_p));
    return finish(sc, reduce_loss(loss, r));
}

Tensor *tensor_bce_with_logits(Tensor *logits, Tensor *target, Tensor *pos_weight,
                               CtReduction r)
{
    CtScope *sc = ct_scope_open();
    if (!sc) return NULL;
    return finish(sc, bce_body(loss_operand(logits), loss_operand(target),
                               loss_operand(pos_weight), r));
}
