/* Private to tensor/: kernel params of the indexing ops (index_select,
 * embedding, gather, one_hot and their index_add / scatter_add backwards),
 * shared by the front-end (tensor/index.c) and the backends.
 *
 * Every operand is contiguous (the front-end makes it so) and every index
 * tensor is CT_I64. Kernels check each index against its range and report
 * the first bad one through ct_error:
 *   "<name>: index 7 at position [1, 2] is out of range for dim 0 of size 5"
 * (position in the index tensor's own shape); on the CPU at once, with
 * nothing written; on CUDA once the device's check is read back, with the
 * bad index's elements left alone (tensor/cuda/range.cuh).
 */
#ifndef CTRAINER_TENSOR_INDEX_H
#define CTRAINER_TENSOR_INDEX_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CT_OP_INDEX_SELECT: rows of src picked along one dim.
 *   in:  [0] src (outer, size, inner), [1] index (any shape, k elements)
 *   out: [0] (outer, k, inner): out[o, j, :] = src[o, index[j], :]
 *   Any dtype.
 * CT_OP_INDEX_ADD: the adjoint, accumulating.
 *   in:  [0] src (outer, k, inner), [1] index (k elements)
 *   out: [0] (outer, size, inner), read and written:
 *        out[o, index[j], :] += src[o, j, :]
 *   f32 and f64. Each output element receives its terms in order of j, from
 *   one thread (no atomics), so the result does not depend on thread count. */
typedef struct CtIndexParams {
    const char *name; /* the op named in range errors */
    int dim;          /* the indexed dim of the original tensor (messages) */
    int64_t outer, size, inner, k;
} CtIndexParams;

/* CT_OP_GATHER: PyTorch's gather along `dim`.
 *   in:  [0] src, [1] index (src's ndim; index.shape[d] <= src.shape[d]
 *        for d != dim)
 *   out: [0] index's shape: out[..i..] = src[..index[..i..] at dim..]
 *   Any dtype.
 * CT_OP_SCATTER_ADD: the adjoint, accumulating.
 *   in:  [0] src (index's shape), [1] index
 *   out: [0] the gathered-from shape, read and written:
 *        out[..index[..i..] at dim..] += src[..i..]
 *   f32 and f64; deterministic as INDEX_ADD (terms in index order along
 *   dim, each output element owned by one thread). */
typedef struct CtGatherParams {
    const char *name;
    int dim;
} CtGatherParams;

/* CT_OP_ONE_HOT.
 *   in:  [0] index (k elements, any shape)
 *   out: [0] (k, classes) in any dtype: 1 at index[j], 0 elsewhere */
typedef struct CtOneHotParams {
    int64_t classes;
} CtOneHotParams;

#ifdef __cplusplus
}
#endif
#endif
