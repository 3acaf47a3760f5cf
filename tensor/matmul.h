/* Private to tensor/: helpers shared by the matmul and linear front-ends.
 * The kernel's params struct, CtMatmulParams, is in internal.h. */
#ifndef CTRAINER_TENSOR_MATMUL_H
#define CTRAINER_TENSOR_MATMUL_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether a (rows, cols) matrix with element strides (rs, cs) is packed the
 * way the MATMUL kernel needs: row-major (*trans = false) or its transpose
 * row-major, i.e. column-major (*trans = true). Strides of size-1 dims do not
 * matter. */
static inline bool ct_mat_packed(int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                                 bool *trans)
{
    if ((rows == 1 || rs == cols) && (cols == 1 || cs == 1)) {
        *trans = false;
        return true;
    }
    if ((cols == 1 || cs == rows) && (rows == 1 || rs == 1)) {
        *trans = true;
        return true;
    }
    return false;
}

/* A caller-owned contiguous copy of t (never in a scope, no autograd), or
 * NULL with an error recorded. */
Tensor *ct_packed_copy(const Tensor *t);

/* out <- a @ b as tensor_matmul computes it under the current autocast,
 * into out (contiguous, the product's shape, a's dtype; a and b of one
 * dtype, shapes checked by the caller). No autograd. */
CtStatus ct_matmul_into(Tensor *out, const Tensor *a, const Tensor *b);

#ifdef __cplusplus
}
#endif
#endif
