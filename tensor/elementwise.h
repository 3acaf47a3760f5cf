/* Private to tensor/: the contracts of the UNARY, UNARY_BWD and WHERE kernels,
 * shared by the front-ends (unary.c, where.c) and every backend.
 *
 * CT_OP_UNARY      out <- f(in0)            CtUnaryParams (internal.h)
 * CT_OP_UNARY_BWD  out <- f'(.) * in1       CtUnaryParams; in1 is gout
 * CT_OP_WHERE      out <- in0 ? in1 : in2   no params
 *
 * All operands have out's shape and may be strided (the WHERE front-end
 * passes stride-0 broadcast views); out is contiguous and never aliases an
 * input. UNARY and UNARY_BWD keep the dtype: out, in0 and in1 share it.
 * WHERE: in0 is CT_BOOL, in1, in2 and out share one dtype of any kind.
 *
 * What in0 of UNARY_BWD holds, per kind (ct_unary_bwd_uses_output):
 *   the op's output y  EXP (y g), SQRT (g / 2y), SIGMOID (y (1-y) g),
 *                      TANH ((1 - y²) g);
 *   the op's input x   every other kind. NEG, ADD_SCALAR, MUL_SCALAR and
 *                      RSUB_SCALAR do not read it (-g, g, a g, -g).
 * Conventions at kinks follow PyTorch: ABS has derivative sign(x) (0 at 0);
 * CLAMP 1 for lo <= x <= hi, else 0; RELU 0 for x <= 0 (1 at NaN: the
 * gradient passes); LEAKY_RELU the slope for x <= 0 and at NaN; POW_SCALAR
 * with exponent 0 has derivative 0 everywhere.
 */
#ifndef CTRAINER_TENSOR_ELEMENTWISE_H
#define CTRAINER_TENSOR_ELEMENTWISE_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* sqrt(2/pi) and the cubic coefficient of the tanh approximation of GELU. */
#define CT_GELU_TANH_K 0.7978845608028654
#define CT_GELU_TANH_C 0.044715

/* True when UNARY_BWD of `k` takes the forward output y as in0. */
static inline bool ct_unary_bwd_uses_output(CtUnaryKind k)
{
    return k == CT_UN_EXP || k == CT_UN_SQRT || k == CT_UN_SIGMOID || k == CT_UN_TANH;
}

/* True for the kinds the CPU backend also runs on i64 and i32 tensors (the
 * params a, b must then be integral; CLAMP bounds may be infinite). */
static inline bool ct_unary_kind_has_int(CtUnaryKind k)
{
    return k == CT_UN_NEG || k == CT_UN_ABS || k == CT_UN_CLAMP || k == CT_UN_RELU ||
           k == CT_UN_ADD_SCALAR || k == CT_UN_MUL_SCALAR || k == CT_UN_RSUB_SCALAR;
}

#ifdef __cplusplus
}
#endif
#endif
