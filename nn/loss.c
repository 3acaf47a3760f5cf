/* Smooth L1 loss and the NnLoss objects that wrap the tensor layer's losses
 * for code that takes "a loss" (the Trainer). */
#include <math.h>
#include <stdlib.h>

#include "ctrainer/nn.h"

static bool valid_reduction(CtReduction r)
{
    return r == CT_REDUCTION_MEAN || r == CT_REDUCTION_SUM || r == CT_REDUCTION_NONE;
}

/* Hands r from a private scope to the caller's: owned by the caller's open
 * scope, or by the caller when none is open. tensor_contiguous of a
 * contiguous tensor adds exactly that reference. */
static Tensor *leave_scope(CtScope *sc, Tensor *r)
{
    tensor_retain(r);
    ct_scope_close(sc);
    if (!r) return NULL;
    Tensor *out = tensor_contiguous(r);
    tensor_free(r);
    return out;
}

static bool check_smooth_l1(const Tensor *input, const Tensor *target, CtReduction r,
                            double beta)
{
    const char *op = "smooth_l1_loss";
    char d1[96], d2[96];
    if (!ct_dtype_is_float(tensor_dtype(input))) {
        ct_error(CT_ERR_DTYPE, "%s: input %s must be floating point", op,
                 tensor_describe(input, d1, sizeof d1));
        return false;
    }
    bool same = tensor_ndim(input) == tensor_ndim(target);
    for (int i = 0; same && i < tensor_ndim(input); i++)
        same = tensor_shape(input)[i] == tensor_shape(target)[i];
    if (!same || tensor_dtype(input) != tensor_dtype(target)) {
        ct_error(same ? CT_ERR_DTYPE : CT_ERR_SHAPE,
                 "%s: input %s and target %s must have the same shape and dtype", op,
                 tensor_describe(input, d1, sizeof d1),
                 tensor_describe(target, d2, sizeof d2));
        return false;
    }
    if (!valid_reduction(r)) {
        ct_error(CT_ERR_INVALID, "%s: unknown reduction %d", op, (int)r);
        return false;
    }
    if (!(beta >= 0)) {
        ct_error(CT_ERR_INVALID, "%s: beta must be >= 0, got %g", op, beta);
        return false;
    }
    return true;
}

/* With a = |d| and c = min(a, beta):  c * (a - c/2) / beta  equals
 * a²/(2 beta) where a < beta and a - beta/2 elsewhere, and its gradient
 * (clamp passes gradient only inside) is a/beta resp. 1 — PyTorch's
 * derivative, without evaluating both branches of a where(). */
Tensor *nn_smooth_l1_loss(Tensor *input, Tensor *target, CtReduction r, double beta)
{
    if (!input || !target) return NULL;
    if (!check_smooth_l1(input, target, r, beta)) return NULL;
    if (beta == 0) return tensor_l1_loss(input, target, r); /* as PyTorch does */
    CtScope *sc = ct_scope_open();
    if (!sc) {
        ct_error(CT_ERR_OOM, "smooth_l1_loss: out of memory opening a scope");
        return NULL;
    }
    Tensor *a = tensor_abs(tensor_sub(input, target));
    Tensor *c = tensor_clamp(a, -INFINITY, beta);
    Tensor *loss =
        tensor_div_scalar(tensor_mul(c, tensor_sub(a, tensor_mul_scalar(c, 0.5))), beta);
    switch (r) {
    case CT_REDUCTION_SUM: loss = tensor_sum_all(loss); break;
    case CT_REDUCTION_MEAN: loss = tensor_mean_all(loss); break;
    default: break;
    }
    return leave_scope(sc, loss);
}

/* ------------------------------------------------------------ NnLoss */

typedef enum LossKind {
    LOSS_CROSS_ENTROPY,
    LOSS_NLL,
    LOSS_MSE,
    LOSS_L1,
    LOSS_SMOOTH_L1,
    LOSS_BCE_WITH_LOGITS,
} LossKind;

struct NnLoss {
    LossKind kind;
    CtReduction reduction;
    double beta;           /* smooth L1 */
    CtCrossEntropyArgs ce; /* cross-entropy / NLL; ce.weight is retained */
    Tensor *pos_weight;    /* BCE, retained, or NULL */
};

/* PyTorch's class names. */
static const char *const loss_names[] = {
    [LOSS_CROSS_ENTROPY] = "CrossEntropyLoss",
    [LOSS_NLL] = "NLLLoss",
    [LOSS_MSE] = "MSELoss",
    [LOSS_L1] = "L1Loss",
    [LOSS_SMOOTH_L1] = "SmoothL1Loss",
    [LOSS_BCE_WITH_LOGITS] = "BCEWithLogitsLoss",
};

static NnLoss *loss_new(LossKind kind, CtReduction r)
{
    if (!valid_reduction(r)) {
        ct_error(CT_ERR_INVALID, "%s: unknown reduction %d", loss_names[kind], (int)r);
        return NULL;
    }
    NnLoss *l = calloc(1, sizeof *l);
    if (!l) {
        ct_error(CT_ERR_OOM, "%s: out of memory", loss_names[kind]);
        return NULL;
    }
    l->kind = kind;
    l->reduction = r;
    return l;
}

static NnLoss *class_loss(LossKind kind, const CtCrossEntropyArgs *args)
{
    /* NULL: PyTorch's defaults, as tensor_cross_entropy takes them */
    CtCrossEntropyArgs a = {
        .reduction = CT_REDUCTION_MEAN, .ignore_index = -100, .use_ignore_index = true};
    if (args) a = *args;
    if (!(a.label_smoothing >= 0 && a.label_smoothing <= 1)) {
        ct_error(CT_ERR_INVALID, "%s: label_smoothing %g is not in [0, 1]",
                 loss_names[kind], a.label_smoothing);
        return NULL;
    }
    NnLoss *l = loss_new(kind, a.reduction);
    if (!l) return NULL;
    l->ce = a;
    /* The loss keeps the class weights alive; tensor_retain takes a mutable
     * pointer but the weights are never written. */
    if (a.weight) tensor_retain((Tensor *)a.weight);
    return l;
}

NnLoss *nn_loss_cross_entropy(const CtCrossEntropyArgs *args)
{
    return class_loss(LOSS_CROSS_ENTROPY, args);
}

NnLoss *nn_loss_nll(const CtCrossEntropyArgs *args)
{
    return class_loss(LOSS_NLL, args);
}

NnLoss *nn_loss_mse(CtReduction r)
{
    return loss_new(LOSS_MSE, r);
}

NnLoss *nn_loss_l1(CtReduction r)
{
    return loss_new(LOSS_L1, r);
}

NnLoss *nn_loss_smooth_l1(CtReduction r, double beta)
{
    if (!(beta >= 0)) {
        ct_error(CT_ERR_INVALID, "SmoothL1Loss: beta must be >= 0, got %g", beta);
        return NULL;
    }
    NnLoss *l = loss_new(LOSS_SMOOTH_L1, r);
    if (l) l->beta = beta;
    return l;
}

NnLoss *nn_loss_bce_with_logits(Tensor *pos_weight, CtReduction r)
{
    NnLoss *l = loss_new(LOSS_BCE_WITH_LOGITS, r);
    if (l) l->pos_weight = tensor_retain(pos_weight);
    return l;
}

Tensor *nn_loss(const NnLoss *l, Tensor *input, Tensor *target)
{
    if (!l) {
        ct_error(CT_ERR_NULL, "nn_loss: NULL loss");
        return NULL;
    }
    switch (l->kind) {
    case LOSS_CROSS_ENTROPY: return tensor_cross_entropy(input, target, &l->ce);
    case LOSS_NLL: return tensor_nll_loss(input, target, &l->ce);
    case LOSS_MSE: return tensor_mse_loss(input, target, l->reduction);
    case LOSS_L1: return tensor_l1_loss(input, target, l->reduction);
    case LOSS_SMOOTH_L1: return nn_smooth_l1_loss(input, target, l->reduction, l->beta);
    case LOSS_BCE_WITH_LOGITS:
        return tensor_bce_with_logits(input, target, l->pos_weight, l->reduction);
    }
    return NULL;
}

const char *nn_loss_name(const NnLoss *l)
{
    return l ? loss_names[l->kind] : "(null)";
}

void nn_loss_free(NnLoss *l)
{
    if (!l) return;
    tensor_free((Tensor *)l->ce.weight);
    tensor_free(l->pos_weight);
    free(l);
}
