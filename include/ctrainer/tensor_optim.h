/* ctrainer — optimizer block ops of the tensor layer.
 *
 * One in-place pass of an optimizer update, or of gradient clipping, over a
 * parameter, its gradient and its state buffers: typically the flat blocks
 * of a packed model (nn_module_pack), so a whole model updates in one op on
 * the tensors' device (CPU or CUDA). optim/ builds these calls; programs
 * with their own optimizer may use them too.
 *
 * Operands of one call: contiguous, one device, one dtype (f32 or f64) and
 * one numel (shapes may differ). State buffers hold the values of the
 * previous step, or zeros when just created; a NULL buffer means "not used
 * in this configuration". Errors (NULL operand, mismatched numel, dtype or
 * device, non-contiguous) name the operand and change nothing. None of these
 * ops is recorded by autograd; only tensor_norm_parts and tensor_span
 * allocate.
 *
 * The update steps read grad and leave it as it is, unless their args set
 * zero_grad: then the same pass zeroes grad once it has read each element,
 * which saves a zero fill over the block before the next backward (an
 * optimizer's step followed by its zero_grad, optim_step_zero_grad). The
 * zeroed grad counts as zero-filled: the next backward writes it in place
 * (tensor_backward).
 */
#ifndef CTRAINER_TENSOR_OPTIM_H
#define CTRAINER_TENSOR_OPTIM_H

#include "ctrainer/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.optim.SGD, per element:
 *   d = grad + weight_decay * param
 *   buf = d when first, else momentum * buf + (1 - dampening) * d
 *   d = nesterov ? d + momentum * buf : buf       (only with a momentum_buf)
 *   param -= lr * d */
typedef struct TensorSgdArgs {
    double lr, weight_decay, momentum, dampening;
    bool nesterov;  /* needs momentum_buf */
    bool first;     /* momentum_buf was just created (its first update) */
    bool zero_grad; /* also zero grad, in the same pass */
} TensorSgdArgs;
CtStatus tensor_sgd_step_(Tensor *param, Tensor *grad, Tensor *momentum_buf,
                          const TensorSgdArgs *args);

/* torch.optim.Adam (decoupled false) and AdamW (decoupled true), with
 * amsgrad when max_exp_avg_sq is given; step is the update count including
 * this one (>= 1), from which the bias corrections are computed in f64:
 *   AdamW: param *= 1 - lr * wd        Adam: grad' = grad + wd * param
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;  vmax = max(vmax, v)
 *   param -= lr / (1 - b1^t) * m / (sqrt(v or vmax) / sqrt(1 - b2^t) + eps) */
typedef struct TensorAdamArgs {
    double lr, weight_decay, beta1, beta2, eps;
    bool decoupled;
    int64_t step;
    bool zero_grad; /* also zero grad, in the same pass */
} TensorAdamArgs;
CtStatus tensor_adam_step_(Tensor *param, Tensor *grad, Tensor *exp_avg,
                           Tensor *exp_avg_sq, Tensor *max_exp_avg_sq,
                           const TensorAdamArgs *args);

/* torch.optim.RMSprop; centered when grad_avg is given, with momentum when
 * momentum_buf is given:
 *   g = grad + wd * param;  sq = alpha sq + (1 - alpha) g g
 *   avg = sqrt(sq - ga ga) + eps (ga = alpha ga + (1 - alpha) g), or sqrt(sq) + eps
 *   buf = momentum buf + g / avg, param -= lr buf;  or param -= lr g / avg */
typedef struct TensorRmspropArgs {
    double lr, weight_decay, alpha, eps, momentum;
    bool zero_grad; /* also zero grad, in the same pass */
} TensorRmspropArgs;
CtStatus tensor_rmsprop_step_(Tensor *param, Tensor *grad, Tensor *square_avg,
                              Tensor *momentum_buf, Tensor *grad_avg,
                              const TensorRmspropArgs *args);

/* *out = the sum of t's squared elements (norm_type 2, accumulated in f64)
 * or max |t| (norm_type INFINITY; NaN when t holds one), reduced in fixed
 * chunks in index order: the same bits on every device and thread count.
 * t: contiguous f32/f64. Copies one small result to the host. */
CtStatus tensor_norm_parts(const Tensor *t, double norm_type, double *out);
/* t *= scale, in place (t contiguous f32/f64). */
CtStatus tensor_scale_(Tensor *t, double scale);
/* t = clamp(t, -clip, clip), in place; a NaN stays NaN (t contiguous
 * f32/f64, clip >= 0). */
CtStatus tensor_clamp_abs_(Tensor *t, double clip);

/* A new 1-d view over n tensors (n >= 1) that lie back to back in one
 * storage, each contiguous, all of one dtype: ts[0]'s first element to
 * ts[n-1]'s last, as the parameters and gradients of a packed model do.
 * The caller owns it (tensor_free; in no scope). Returns NULL without
 * recording an error when they do not lie so (or out of memory: then
 * CT_ERR_OOM is recorded). */
Tensor *tensor_span(Tensor *const *ts, int64_t n);
/* True when span (from tensor_span) still covers exactly ts[0..n), back to
 * back. No allocation: cheap enough to check before every use. */
bool tensor_is_span(const Tensor *span, Tensor *const *ts, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
