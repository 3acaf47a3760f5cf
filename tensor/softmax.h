/* Private to tensor/: kernel params of softmax and cross-entropy
 * (tensor/softmax.c, tensor/loss.c, tensor/cpu/softmax.c, and a CUDA
 * backend later). All operands of these ops are contiguous. */
#ifndef CTRAINER_TENSOR_SOFTMAX_H
#define CTRAINER_TENSOR_SOFTMAX_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x viewed as (outer, n, inner), normalised over n.
 * CT_OP_SOFTMAX:     out0 <- softmax(in0) or log_softmax(in0).
 * CT_OP_SOFTMAX_BWD: out0 <- gradient w.r.t. x, from in0 = the forward's
 *                    output y and in1 = its gradient g:
 *                    softmax:     y * (g - sum_n(g * y))
 *                    log_softmax: g - exp(y) * sum_n(g) */
typedef struct CtSoftmaxParams {
    int64_t outer, n, inner;
    bool log;
} CtSoftmaxParams;

/* Logits (n, c, inner), target (n, inner) CT_I64, weight (c) or absent.
 * Per position i with target t (w_k = weight[k] or 1, W = sum_k w_k,
 * e = label_smoothing, logp = log_softmax over c, or the input itself when
 * log_input):
 *     loss_i = (1 - e) * w_t * -logp_t + e / c * sum_k w_k * -logp_k
 * and 0 when t is ignored.
 * CT_OP_CROSS_ENTROPY:     in0 = logits, in1 = target, in2 = weight or NULL;
 *                          out0 <- loss (n, inner); out1 (optional) <- w_t,
 *                          or 0 where ignored (the weighted mean's divisor).
 *                          A target outside [0, c) that is not ignored makes
 *                          the kernel record an error naming it and its index,
 *                          and return CT_ERR_INVALID before writing anything.
 *                          With `fold` (a summed or mean loss), also out2 (one
 *                          element) <- the sum of out0 and, when out1 is given
 *                          (a mean), out3 (one element) <- the sum of out1 and
 *                          out2 <- that sum of out0 / out3, divided in the
 *                          dtype: the bits of a REDUCE of out0 (and of out1)
 *                          and a division op, in one op. A backend may refuse
 *                          `fold` for some sizes (supports); tensor/loss.c
 *                          then runs those ops.
 * CT_OP_CROSS_ENTROPY_BWD: in0..in2 as above, in3 = d loss (n, inner), or
 *                          one element, every position's, when go_scalar
 *                          (a summed loss); in4 (optional, one element): the
 *                          gradients are in3 / in4 (a mean's divisor),
 *                          divided in the dtype as a division op would;
 *                          out0 <- d logits (n, c, inner). The targets are
 *                          the forward's, which checked them: a backend
 *                          may skip the check (CUDA does, giving a target
 *                          outside [0, c) a zero row). */
typedef struct CtCrossEntropyParams {
    int64_t n, c, inner;
    int64_t ignore_index;
    bool use_ignore_index;
    bool log_input; /* nll_loss: in0 holds log-probabilities, e is 0 */
    double label_smoothing;
    bool go_scalar; /* BWD: in3 holds one element */
    bool fold;      /* FWD: the sum (and mean) in out2 (and out3) too */
} CtCrossEntropyParams;

#ifdef __cplusplus
}
#endif
#endif
