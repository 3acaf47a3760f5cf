/* Normalisation: batch norm and layer norm, each one fused forward kernel
 * (which saves the statistics) and one fused backward kernel. */
#include <string.h>

#include "norm.h"

/* A (C) parameter of batch norm: given or NULL, of dtype
 * ct_bn_param_dtype(x), shape (C). */
static bool check_channel_vec(const char *op, const char *what, const Tensor *t,
                              const Tensor *x)
{
    if (!t) return true;
    CtDType want = ct_bn_param_dtype(x->dtype);
    if (want == x->dtype && !ct_check_same_dtype(op, x, t)) return false;
    if (t->dtype != want) {
        char d1[96], d2[96];
        ct_error(CT_ERR_DTYPE, "%s: %s is %s, but input %s needs %s parameters", op, what,
                 tensor_describe(t, d1, sizeof d1), tensor_describe(x, d2, sizeof d2),
                 ct_dtype_name(want));
        return false;
    }
    if (t->ndim == 1 && t->shape[0] == x->shape[1]) return true;
    char d1[96], d2[96];
    ct_error(CT_ERR_SHAPE, "%s: %s is %s, expected [%lld] (the channels of input %s)", op,
             what, tensor_describe(t, d1, sizeof d1), (long long)x->shape[1],
             tensor_describe(x, d2, sizeof d2));
    return false;
}

/* The non-NULL tensors of ts[0..n) must share x's device. */
static bool check_devices(const char *op, int n, Tensor *const *ts)
{
    const Tensor *given[8];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (ts[i]) given[k++] = ts[i];
    return ct_check_inputs(op, k, given);
}

/* ------------------------------------------------------------ batch norm */

/* A new data operand (in the scope) of like's shape: channels last when cl,
 * else contiguous. */
static Tensor *data_new(const Tensor *like, bool cl)
{
    return ct_scope_adopt(ct_tensor_new_laid_out(like->ndim, like->shape, like->dtype,
                                                 like->storage->device, cl));
}

/* Runs a fused normalisation forward: out0 = y, out1 = (2, nstats) saved
 * statistics (mean and inverse std) of dtype sdt, out2/out3 = running stats
 * updated in place (batch norm); in = x (channels last when cl, else
 * contiguous, as y), weight, bias made contiguous. Records the node with
 * the params block and the statistics, and the fused ReLU when relu (the
 * kernel applied it: params say so). */
static Tensor *run_norm(const char *op, CtOp kind, CtBackwardFn bw, Tensor *x,
                        Tensor *weight, Tensor *bias, Tensor *rmean, Tensor *rvar,
                        int64_t nstats, CtDType sdt, const void *params, size_t psize,
                        bool relu, bool cl)
{
    Tensor *xc = ct_layout_ref(x, cl), *wc = ct_contiguous_ref(weight),
           *bc = ct_contiguous_ref(bias);
    Tensor *stats = ct_tensor_new_persistent(2, (const int64_t[]){2, nstats}, sdt,
                                             x->storage->device);
    Tensor *y = xc && (wc || !weight) && (bc || !bias) && stats ? data_new(x, cl) : NULL;
    if (y) {
        CtOpCall c = {.op = kind,
                      .out = {y, stats, rmean, rvar},
                      .in = {xc, wc, bc},
                      .params = params};
        if (ct_dispatch(&c) != CT_OK) y = ct_op_discard(y);
    }
    CtNode *n;
    if (ct_node_new(y, op, bw, 3, (Tensor *[]){x, weight, bias}, &n) != CT_OK)
        y = ct_op_discard(y);
    if (n) {
        memcpy(n->params, params, psize);
        ct_node_reads(n, 0);
        ct_node_reads(n, 1);
        ct_node_save(n, 0, stats);
        if (relu && ct_node_fuse_relu(n, y) != CT_OK) y = ct_op_discard(y);
    }
    tensor_free(xc);
    tensor_free(wc);
    tensor_free(bc);
    tensor_free(stats);
    return y;
}

/* Runs a fused normalisation backward: in = g, x (both laid out as the
 * forward's, cl), weight (contiguous) and the saved statistics; out = dx
 * (as g), dweight, dbias, each only when needed. */
static CtStatus run_norm_backward(CtNode *n, CtOp kind, Tensor *g, Tensor **gin, bool cl)
{
    Tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    Tensor *gc = ct_scope_adopt(ct_layout_ref(g, cl)),
           *xc = ct_scope_adopt(ct_layout_ref(x, cl));
    Tensor *wc = w ? tensor_contiguous(w) : NULL;
    if (!gc || !xc || (w && !wc)) return ct_last_status();
    Tensor *dx = !n->needs_grad[0] ? NULL
                 : cl              ? data_new(x, true)
                                   : ct_node_grad_buffer(n, 0, x);
    Tensor *dw = n->needs_grad[1] ? ct_node_grad_buffer(n, 1, w) : NULL;
    Tensor *db = n->needs_grad[2] ? ct_node_grad_buffer(n, 2, b) : NULL;
    if ((n->needs_grad[0] && !dx) || (n->needs_grad[1] && !dw) ||
        (n->needs_grad[2] && !db))
        return ct_last_status();
    CtOpCall c = {.op = kind,
                  .out = {dx, dw, db},
                  .in = {gc, xc, wc, n->saved[0]},
                  .params = n->params};
    CtStatus st = ct_dispatch(&c);
    if (st != CT_OK) return st;
    gin[0] = dx;
    gin[1] = dw;
    gin[2] = db;
    return CT_OK;
}

static CtStatus batch_norm_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    return run_norm_backward(n, CT_OP_BATCH_NORM_BWD, g, gin,
                             CT_NODE_PARAMS(n, CtBatchNormParams)->nhwc);
}

static Tensor *batch_norm(Tensor *x, Tensor *running_mean, Tensor *running_var,
                          Tensor *weight, Tensor *bias, bool training, double momentum,
                          double eps, bool relu)
{
    const char *op = relu ? "batch_norm_relu" : "batch_norm";
    if (!x) return NULL;
    Tensor *all[5] = {x, running_mean, running_var, weight, bias};
    if (!check_devices(op, 5, all) || !ct_check_float(op, x) ||
        !ct_check_ndim(op, x, 2, CT_MAX_DIMS) ||
        !check_channel_vec(op, "running_mean", running_mean, x) ||
        !check_channel_vec(op, "running_var", running_var, x) ||
        !check_channel_vec(op, "weight", weight, x) ||
        !check_channel_vec(op, "bias", bias, x))
        return NULL;
    if (!running_mean != !running_var) {
        ct_error(CT_ERR_INVALID,
                 "%s: give both running_mean and running_var, or neither (got %s)", op,
                 running_mean ? "running_mean only" : "running_var only");
        return NULL;
    }
    if (training && running_mean &&
        (!tensor_is_contiguous(running_mean) || !tensor_is_contiguous(running_var))) {
        ct_error(CT_ERR_SHAPE,
                 "%s: running_mean and running_var are updated in place and must be "
                 "contiguous (not expanded or strided views)",
                 op);
        return NULL;
    }
    CtBatchNormParams p = {.n = x->shape[0],
                           .c = x->shape[1],
                           .inner = ct_shape_numel(x->ndim - 2, x->shape + 2),
                           .training = training || !running_mean,
                           .relu = relu,
                           .momentum = momentum,
                           .eps = eps};
    if (p.training && p.n * p.inner <= 1) {
        char d[96];
        ct_error(CT_ERR_SHAPE,
                 "%s: expected more than 1 value per channel when using batch "
                 "statistics, got input %s",
                 op, tensor_describe(x, d, sizeof d));
        return NULL;
    }
    CtOpCall probe = {.op = CT_OP_BATCH_NORM,
                      .out = {x, NULL, running_mean, running_var},
                      .in = {x, weight, bias},
                      .params = &p};
    ct_pick_channels_last(x, &probe, &p.nhwc);
    return run_norm(op, CT_OP_BATCH_NORM, batch_norm_backward, x, weight, bias,
                    running_mean, running_var, p.c, ct_bn_param_dtype(x->dtype), &p,
                    sizeof p, relu, p.nhwc);
}

Tensor *tensor_batch_norm(Tensor *x, Tensor *running_mean, Tensor *running_var,
                          Tensor *weight, Tensor *bias, bool training, double momentum,
                          double eps)
{
    return batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps,
                      false);
}

Tensor *tensor_batch_norm_relu(Tensor *x, Tensor *running_mean, Tensor *running_var,
                               Tensor *weight, Tensor *bias, bool training,
                               double momentum, double eps)
{
    return batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps,
                      true);
}

/* ------------------------------------------------------------ layer norm */

static CtStatus layer_norm_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    return run_norm_backward(n, CT_OP_LAYER_NORM_BWD, g, gin, false);
}

/* weight/bias of layer norm: given or NULL, x's dtype, the normalised shape. */
static bool check_affine(const char *op, const char *what, const Tensor *t,
                         const Tensor *x, int nnorm)
{
    if (!t) return true;
    if (!ct_check_same_dtype(op, x, t)) return false;
    const int64_t *norm = x->shape + (x->ndim - nnorm);
    bool ok = t->ndim == nnorm;
    for (int i = 0; ok && i < nnorm; i++) ok = t->shape[i] == norm[i];
    if (ok) return true;
    char d1[96], d2[80];
    ct_error(CT_ERR_SHAPE, "%s: %s is %s, expected the normalised shape %s", op, what,
             tensor_describe(t, d1, sizeof d1), ct_shape_str(nnorm, norm, d2, sizeof d2));
    return false;
}

static Tensor *layer_norm(Tensor *x, int nnorm, Tensor *weight, Tensor *bias, double eps)
{
    const char *op = "layer_norm";
    if (!x) return NULL;
    Tensor *all[3] = {x, weight, bias};
    if (!check_devices(op, 3, all) || !ct_check_float(op, x)) return NULL;
    if (nnorm < 1 || nnorm > x->ndim) {
        char d[96];
        ct_error(CT_ERR_SHAPE, "%s: cannot normalise over the last %d dims of %s", op,
                 nnorm, tensor_describe(x, d, sizeof d));
        return NULL;
    }
    if (!check_affine(op, "weight", weight, x, nnorm) ||
        !check_affine(op, "bias", bias, x, nnorm))
        return NULL;
    CtLayerNormParams p = {.rows = ct_shape_numel(x->ndim - nnorm, x->shape),
                           .d = ct_shape_numel(nnorm, x->shape + (x->ndim - nnorm)),
                           .eps = eps};
    return run_norm(op, CT_OP_LAYER_NORM, layer_norm_backward, x, weight, bias, NULL,
                    NULL, p.rows, x->dtype, &p, sizeof p, false, false);
}

typedef struct LayerNormArgs {
    int nnorm;
    double eps;
} LayerNormArgs;

static Tensor *layer_norm_again(Tensor **ops, const void *arg)
{
    const LayerNormArgs *a = arg;
    return layer_norm(ops[0], a->nnorm, ops[1], ops[2], a->eps);
}

Tensor *tensor_layer_norm(Tensor *x, int nnorm, Tensor *weight, Tensor *bias, double eps)
{
    /* autocast runs layer norm in f32, as PyTorch's does: bf16/f16 operands
     * (a CUDA convolution's output, beside f32 parameters) are widened */
    Tensor *ops[3] = {x, weight, bias};
    bool widen = false;
    for (int i = 0; i < 3; i++) widen = widen || ct_autocast_widens(ops[i]);
    if (!widen) return layer_norm(x, nnorm, weight, bias, eps);
    const LayerNormArgs a = {nnorm, eps};
    return ct_autocast_call(3, ops, CT_F32, layer_norm_again, &a);
}
