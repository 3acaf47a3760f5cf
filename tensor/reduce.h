/* Private to tensor/: kernel params of the reduction ops (tensor/reduce.c,
 * tensor/cpu/reduce.c, and a CUDA backend later).
 *
 * Geometry shared by both ops: x is the full tensor; y has x's ndim with
 * size 1 on every reduced dim ("keepdim geometry"). A dim of x is reduced
 * when y's size there is 1 and x's is not. Both may be strided (a stride-0
 * y is fine for inputs). The flat index of an element within the reduced
 * dims is row-major over them in x's dim order.
 */
#ifndef CTRAINER_TENSOR_REDUCE_H
#define CTRAINER_TENSOR_REDUCE_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum CtReduceKind {
    CT_RED_SUM, /* scale * sum (scale = 1/n gives the mean) */
    CT_RED_MAX, /* NaN wins; ties go to the first element */
    CT_RED_MIN,
    CT_RED_VAR, /* scale * sum (x - mean)^2, two passes; scale = 1/(n - correction) */
} CtReduceKind;

/* CT_OP_REDUCE: out0 (y geometry, x's dtype) <- reduction of in0 (x).
 * For MAX/MIN, out1 (optional, CT_I64, y geometry) receives the flat index
 * of the first extremal element. f32 accumulates in f32, f64 in f64 (on
 * the CPU; the CUDA backend sums in double, tensor/cuda/reduce_body.h). */
typedef struct CtReduceParams {
    CtReduceKind kind;
    double scale;
} CtReduceParams;

/* CT_OP_ARG_REDUCE (no params): the backward of an index-selecting
 * reduction. out0 (x geometry, contiguous) <- 0, then out0[idx] <- g where
 * in0 = g (y geometry) and in1 = idx (CT_I64, y geometry), idx being the
 * flat index within the reduced dims that CT_OP_REDUCE wrote to out1. */

#ifdef __cplusplus
}
#endif
#endif
