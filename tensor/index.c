/* Indexing: embedding, index_select, gather (differentiable through
 * index_add / scatter_add into zeros) and one_hot. */
#include <string.h>

#include "index.h"

/* Runs a kernel with out[0] = out, in = {src, index}, making src and index
 * contiguous first (bf16/f16 through f32 where the backend has no kernel
 * for them). */
static CtStatus run_indexed(CtOp op, Tensor *out, Tensor *src, Tensor *index,
                            const void *params)
{
    Tensor *sc = ct_contiguous_ref(src), *ic = ct_contiguous_ref(index);
    CtStatus st = CT_ERR_OOM; /* recorded by whichever copy failed */
    if (sc && ic) {
        CtOpCall c = {.op = op, .out = {out}, .in = {sc, ic}, .params = params};
        st = ct_dispatch_widening(&c);
    }
    tensor_free(sc);
    tensor_free(ic);
    return st;
}

/* ------------------------------------------------ index_select, embedding */

/* gout (outer, k, inner) added into zeros (outer, size, inner) at index. */
static CtStatus index_select_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    const CtIndexParams *p = CT_NODE_PARAMS(n, CtIndexParams);
    Tensor *z = tensor_zeros_like(n->in[0]);
    if (!z) return ct_last_status();
    CtStatus st = run_indexed(CT_OP_INDEX_ADD, z, g, n->in[1], p);
    if (st != CT_OK) return st;
    gin[0] = z;
    return CT_OK;
}

/* Common checks of an index argument: given, on t's device, CT_I64. */
static bool check_index(const char *op, const Tensor *t, const Tensor *index)
{
    return ct_check_inputs(op, 2, (const Tensor *[]){t, index}) &&
           ct_check_dtype(op, index, CT_I64);
}

/* Rows index[...] of t along dim d into a tensor of shape (nd, shape); the
 * node is recorded under `op`. */
static Tensor *select_rows(const char *op, Tensor *t, int d, Tensor *index, int nd,
                           const int64_t *shape)
{
    CtIndexParams p = {.name = op,
                       .dim = d,
                       .outer = ct_shape_numel(d, t->shape),
                       .size = t->shape[d],
                       .inner = ct_shape_numel(t->ndim - d - 1, t->shape + d + 1),
                       .k = tensor_numel(index)};
    Tensor *out = ct_tensor_new(nd, shape, t->dtype, t->storage->device);
    CtNode *n;
    if (!out || run_indexed(CT_OP_INDEX_SELECT, out, t, index, &p) != CT_OK ||
        ct_node_new(out, op, index_select_backward, 2, (Tensor *[]){t, index}, &n) !=
            CT_OK)
        return ct_op_discard(out);
    if (n) {
        *CT_NODE_PARAMS(n, CtIndexParams) = p;
        ct_node_reads(n, 1);
    }
    return out;
}

Tensor *tensor_index_select(Tensor *t, int dim, Tensor *index)
{
    const char *op = "index_select";
    if (!t || !index) return NULL;
    if (!check_index(op, t, index)) return NULL;
    int d = ct_norm_dim(op, dim, t->ndim);
    if (d < 0) return NULL;
    if (index->ndim > 1) {
        char b[96];
        ct_error(CT_ERR_SHAPE, "%s: index must be 0-d or 1-d, got %s", op,
                 tensor_describe(index, b, sizeof b));
        return NULL;
    }
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    shape[d] = tensor_numel(index);
    return select_rows(op, t, d, index, t->ndim, shape);
}

Tensor *tensor_embedding(Tensor *weight, Tensor *indices)
{
    const char *op = "embedding";
    if (!weight || !indices) return NULL;
    if (!check_index(op, weight, indices) || !ct_check_ndim(op, weight, 2, 2))
        return NULL;
    if (indices->ndim >= CT_MAX_DIMS) {
        char b[96];
        ct_error(CT_ERR_SHAPE, "%s: indices %s leave no room for the embedding dim", op,
                 tensor_describe(indices, b, sizeof b));
        return NULL;
    }
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, indices->shape, (size_t)indices->ndim * sizeof *shape);
    shape[indices->ndim] = weight->shape[1];
    return select_rows(op, weight, 0, indices, indices->ndim + 1, shape);
}

/* ---------------------------------------------------------------- gather */

static CtStatus gather_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    const CtGatherParams *p = CT_NODE_PARAMS(n, CtGatherParams);
    Tensor *z = tensor_zeros_like(n->in[0]);
    if (!z) return ct_last_status();
    CtStatus st = run_indexed(CT_OP_SCATTER_ADD, z, g, n->in[1], p);
    if (st != CT_OK) return st;
    gin[0] = z;
    return CT_OK;
}

Tensor *tensor_gather(Tensor *t, int dim, Tensor *index)
{
    const char *op = "gather";
    if (!t || !index) return NULL;
    if (!check_index(op, t, index)) return NULL;
    int d = ct_norm_dim(op, dim, t->ndim);
    if (d < 0) return NULL;
    bool ok = index->ndim == t->ndim;
    for (int i = 0; ok && i < t->ndim; i++) ok = i == d || index->shape[i] <= t->shape[i];
    if (!ok) {
        char b1[96], b2[96];
        ct_error(CT_ERR_SHAPE,
                 "%s: index %s does not fit input %s along dim %d (same ndim, and no "
                 "larger in the other dims)",
                 op, tensor_describe(index, b1, sizeof b1),
                 tensor_describe(t, b2, sizeof b2), dim);
        return NULL;
    }
    CtGatherParams p = {.name = op, .dim = d};
    Tensor *out = ct_tensor_new(index->ndim, index->shape, t->dtype, t->storage->device);
    CtNode *n;
    if (!out || run_indexed(CT_OP_GATHER, out, t, index, &p) != CT_OK ||
        ct_node_new(out, op, gather_backward, 2, (Tensor *[]){t, index}, &n) != CT_OK)
        return ct_op_discard(out);
    if (n) {
        *CT_NODE_PARAMS(n, CtGatherParams) = p;
        ct_node_reads(n, 1);
    }
    return out;
}

/* --------------------------------------------------------------- one_hot */

Tensor *tensor_one_hot(Tensor *indices, int64_t num_classes, CtDType dt)
{
    const char *op = "one_hot";
    if (!indices) return NULL;
    if (!ct_check_dtype(op, indices, CT_I64)) return NULL;
    if (num_classes < 1) {
        ct_error(CT_ERR_INVALID, "%s: num_classes must be positive, got %lld", op,
                 (long long)num_classes);
        return NULL;
    }
    if ((unsigned)dt >= CT_DTYPE_COUNT) {
        ct_error(CT_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dt);
        return NULL;
    }
    if (indices->ndim >= CT_MAX_DIMS) {
        char b[96];
        ct_error(CT_ERR_SHAPE, "%s: indices %s leave no room for the class dim", op,
                 tensor_describe(indices, b, sizeof b));
        return NULL;
    }
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, indices->shape, (size_t)indices->ndim * sizeof *shape);
    shape[indices->ndim] = num_classes;
    Tensor *out = ct_tensor_new(indices->ndim + 1, shape, dt, indices->storage->device);
    Tensor *ic = ct_contiguous_ref(indices);
    CtOneHotParams p = {num_classes};
    CtStatus st = CT_ERR_OOM; /* recorded by whichever allocation failed */
    if (out && ic) {
        CtOpCall c = {.op = CT_OP_ONE_HOT, .out = {out}, .in = {ic}, .params = &p};
        st = ct_dispatch(&c);
    }
    tensor_free(ic);
    return st == CT_OK ? out : ct_op_discard(out);
}
