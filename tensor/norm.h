/* Private to tensor/: kernel params of the normalisation ops (batch norm,
 * layer norm), shared by the front-end (tensor/norm.c) and the backends.
 *
 * Every operand of these kernels is contiguous (the front-end makes it so),
 * and all float operands share one dtype (f32 or f64), except that batch
 * norm's data (x, y, gout, dx) may be bf16 or f16 with f32 parameters and
 * statistics (ct_bn_param_dtype), which only backends that say so support
 * (CUDA). Statistics are kept in the parameters' dtype; kernels accumulate
 * in double.
 */
#ifndef CTRAINER_TENSOR_NORM_H
#define CTRAINER_TENSOR_NORM_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The dtype of batch norm's weight, bias and statistics for data of dtype
 * dt: f32 for bf16 and f16 data (as autocast produces it), dt otherwise. */
static inline CtDType ct_bn_param_dtype(CtDType dt)
{
    return dt == CT_BF16 || dt == CT_F16 ? CT_F32 : dt;
}

/* CT_OP_BATCH_NORM. x is viewed as (n, c, inner).
 *   in:  [0] x, [1] weight (c) or NULL, [2] bias (c) or NULL
 *   out: [0] y (n, c, inner)
 *        [1] stats (2, c): row 0 the mean used, row 1 the invstd used
 *            (1 / sqrt(var + eps)), saved for backward
 *        [2] running_mean (c) or NULL, [3] running_var (c) or NULL
 * y is relu'd after normalising when params.relu.
 * training: normalise with the batch mean and biased variance; when running
 *   stats are given update them in place: r = (1 - momentum) r +
 *   momentum * stat, with the unbiased variance.
 * !training: normalise with the running stats (both given, read only). */
typedef struct CtBatchNormParams {
    int64_t n, c, inner;
    bool training;
    double momentum, eps;
    bool relu; /* y <- relu(y) after normalising */
    /* x, y, gout and dx channels last (tensor/layout.c: stored (n, inner,
     * c)) instead of contiguous; only backends whose `supports` accepts it
     * get such calls (CUDA) */
    bool nhwc;
} CtBatchNormParams;

/* CT_OP_BATCH_NORM_BWD (same params as the forward).
 *   in:  [0] gout (n, c, inner), [1] x, [2] weight (c) or NULL,
 *        [3] stats (2, c) from the forward
 *   out: [0] dx or NULL, [1] dweight (c) or NULL, [2] dbias (c) or NULL
 * training: dx includes the terms through the batch mean and variance;
 * !training: the statistics are constants, dx = gout * weight * invstd. */

/* CT_OP_LAYER_NORM. x is viewed as (rows, d): each row is normalised.
 *   in:  [0] x, [1] weight (d) or NULL, [2] bias (d) or NULL
 *   out: [0] y (rows, d), [1] stats (2, rows): mean and rstd per row */
typedef struct CtLayerNormParams {
    int64_t rows, d;
    double eps;
} CtLayerNormParams;

/* CT_OP_LAYER_NORM_BWD (same params as the forward).
 *   in:  [0] gout (rows, d), [1] x, [2] weight (d) or NULL, [3] stats
 *   out: [0] dx or NULL, [1] dweight (d) or NULL, [2] dbias (d) or NULL
 * dweight and dbias are summed over rows in a fixed order (rows split into
 * at most CT_LN_MAX_BLOCKS blocks of at least CT_LN_ROW_BLOCK rows, then the
 * block sums added in order), so results do not depend on the thread count. */
#define CT_LN_ROW_BLOCK  256
#define CT_LN_MAX_BLOCKS 64

#ifdef __cplusplus
}
#endif
#endif
