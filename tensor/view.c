/* Views: reshape, slice, transpose, permute, expand, squeeze; contiguous.
 * Each is differentiable; backward maps the gradient back to the input's
 * geometry. */
#include <string.h>

#include "internal.h"

typedef struct ShapeParams {
    int ndim;
    int64_t shape[CT_MAX_DIMS];
} ShapeParams;

static void save_input_shape(CtNode *n, const Tensor *t)
{
    ShapeParams *p = CT_NODE_PARAMS(n, ShapeParams);
    p->ndim = t->ndim;
    memcpy(p->shape, t->shape, sizeof p->shape);
}

static CtStatus reshape_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    ShapeParams *p = CT_NODE_PARAMS(n, ShapeParams);
    gin[0] = tensor_reshape(g, p->ndim, p->shape);
    return gin[0] ? CT_OK : ct_last_status();
}

/* Strides that let t be viewed with `shape` without copying, or false.
 * Dims of t are grouped into runs that are contiguous with each other; each
 * run must map onto a run of the new shape with the same element count. */
static bool view_strides(const Tensor *t, int nd, const int64_t *shape, int64_t *stride)
{
    if (tensor_numel(t) == 0 || t->ndim == 0) {
        ct_contiguous_strides(nd, shape, stride);
        return true;
    }
    int vd = nd - 1;
    int64_t base = t->stride[t->ndim - 1], tn = 1, vn = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        tn *= t->shape[d];
        bool run_ends = d == 0 || (t->shape[d - 1] != 1 && t->stride[d - 1] != tn * base);
        if (!run_ends) continue;
        while (vd >= 0 && (vn < tn || shape[vd] == 1)) {
            stride[vd] = vn * base;
            vn *= shape[vd];
            vd--;
        }
        if (vn != tn) return false;
        if (d > 0) {
            base = t->stride[d - 1];
            tn = vn = 1;
        }
    }
    return vd == -1;
}

/* Resolves one -1 and checks the element count. */
static bool infer_shape(const char *op, const Tensor *t, int nd, const int64_t *in,
                        int64_t *out)
{
    char b1[96], b2[80];
    if (nd < 0 || nd > CT_MAX_DIMS) {
        ct_error(CT_ERR_SHAPE, "%s: invalid target ndim %d", op, nd);
        return false;
    }
    if (nd && !in) {
        ct_error(CT_ERR_NULL, "%s: NULL shape for ndim %d", op, nd);
        return false;
    }
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < nd; i++) {
        out[i] = in[i];
        if (in[i] == -1 && infer < 0) {
            infer = i;
        } else if (in[i] < 0) {
            ct_error(CT_ERR_SHAPE, "%s: invalid target shape %s", op,
                     ct_shape_str(nd, in, b2, sizeof b2));
            return false;
        } else {
            known *= in[i];
        }
    }
    int64_t numel = tensor_numel(t);
    if (infer >= 0 && known > 0 && numel % known == 0) out[infer] = numel / known;
    if (ct_shape_numel(nd, out) != numel || (infer >= 0 && known == 0)) {
        ct_error(CT_ERR_SHAPE, "%s: cannot reshape %s to %s", op,
                 tensor_describe(t, b1, sizeof b1), ct_shape_str(nd, in, b2, sizeof b2));
        return false;
    }
    return true;
}

static Tensor *make_view(const char *op, Tensor *t, int nd, const int64_t *shape,
                         const int64_t *stride, int64_t offset, CtBackwardFn bw)
{
    Tensor *v = ct_tensor_view(t, nd, shape, stride, offset);
    CtNode *n;
    if (!v || ct_node_new(v, op, bw, 1, &t, &n) != CT_OK) return ct_op_discard(v);
    if (n) save_input_shape(n, t);
    return v;
}

Tensor *tensor_view(Tensor *t, int ndim, const int64_t *shape)
{
    if (!t) return NULL;
    int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
    if (!infer_shape("view", t, ndim, shape, sh)) return NULL;
    if (!view_strides(t, ndim, sh, st)) {
        char b1[96], b2[80];
        ct_error(CT_ERR_SHAPE,
                 "view: %s is not contiguous enough to view as %s; use "
                 "tensor_reshape (which copies)",
                 tensor_describe(t, b1, sizeof b1),
                 ct_shape_str(ndim, sh, b2, sizeof b2));
        return NULL;
    }
    return make_view("view", t, ndim, sh, st, t->offset, reshape_backward);
}

Tensor *tensor_reshape(Tensor *t, int ndim, const int64_t *shape)
{
    if (!t) return NULL;
    int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
    if (!infer_shape("reshape", t, ndim, shape, sh)) return NULL;
    if (view_strides(t, ndim, sh, st))
        return make_view("reshape", t, ndim, sh, st, t->offset, reshape_backward);
    /* the copy lives in a private scope (the view and its node keep theirs) */
    CtScope *s = ct_scope_open();
    if (!s) return NULL;
    Tensor *c = tensor_clone(t);
    ct_contiguous_strides(ndim, sh, st);
    Tensor *v =
        c ? make_view("reshape", c, ndim, sh, st, c->offset, reshape_backward) : NULL;
    tensor_retain(v);
    ct_scope_close(s);
    return ct_scope_adopt(v);
}

Tensor *tensor_flatten(Tensor *t, int start_dim, int end_dim)
{
    if (!t) return NULL;
    if (t->ndim == 0) return tensor_reshape(t, 1, (const int64_t[]){1});
    int s = ct_norm_dim("flatten", start_dim, t->ndim);
    int e = s < 0 ? -1 : ct_norm_dim("flatten", end_dim, t->ndim);
    if (s < 0 || e < 0) return NULL;
    if (s > e) {
        ct_error(CT_ERR_SHAPE, "flatten: start_dim %d is after end_dim %d", start_dim,
                 end_dim);
        return NULL;
    }
    int64_t sh[CT_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < s; i++) sh[nd++] = t->shape[i];
    sh[nd] = 1;
    for (int i = s; i <= e; i++) sh[nd] *= t->shape[i];
    nd++;
    for (int i = e + 1; i < t->ndim; i++) sh[nd++] = t->shape[i];
    return tensor_reshape(t, nd, sh);
}

/* True for the dims a 0-d tensor takes, 0 and -1 as in PyTorch. */
static bool scalar_dim(const char *op, int dim)
{
    if (dim == 0 || dim == -1) return true;
    ct_error(CT_ERR_SHAPE, "%s: dim %d out of range for a 0-d tensor (0 or -1)", op, dim);
    return false;
}

/* The op of a 0-d tensor over dims that scalar_dim takes: a view of it. */
static Tensor *scalar_view(Tensor *t)
{
    return tensor_reshape(t, 0, t->shape);
}

Tensor *tensor_squeeze(Tensor *t, int dim)
{
    if (!t) return NULL;
    if (t->ndim == 0) return scalar_dim("squeeze", dim) ? scalar_view(t) : NULL;
    int d = ct_norm_dim("squeeze", dim, t->ndim);
    if (d < 0) return NULL;
    if (t->shape[d] != 1) return tensor_reshape(t, t->ndim, t->shape);
    int64_t sh[CT_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != d) sh[nd++] = t->shape[i];
    return tensor_reshape(t, nd, sh);
}

Tensor *tensor_unsqueeze(Tensor *t, int dim)
{
    if (!t) return NULL;
    if (t->ndim == CT_MAX_DIMS) {
        ct_error(CT_ERR_SHAPE, "unsqueeze: tensor already has %d dims", CT_MAX_DIMS);
        return NULL;
    }
    int d = ct_norm_dim("unsqueeze", dim, t->ndim + 1);
    if (d < 0) return NULL;
    int64_t sh[CT_MAX_DIMS];
    for (int i = 0, j = 0; i <= t->ndim; i++) sh[i] = i == d ? 1 : t->shape[j++];
    return tensor_reshape(t, t->ndim + 1, sh);
}

/* ---------------------------------------------------------------- slicing */

typedef struct SliceParams {
    ShapeParams in;
    int dim;
    int64_t start, end, step; /* select: end = -1 marks the removed dim */
} SliceParams;

static CtStatus slice_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    SliceParams *p = CT_NODE_PARAMS(n, SliceParams);
    Tensor *z = tensor_zeros(p->in.ndim, p->in.shape, g->dtype, g->storage->device);
    Tensor *region = p->end < 0 ? tensor_select(z, p->dim, p->start)
                                : tensor_slice(z, p->dim, p->start, p->end, p->step);
    if (!region || tensor_copy_(region, g) != CT_OK) return ct_last_status();
    gin[0] = z;
    return CT_OK;
}

static Tensor *slice_node(Tensor *t, Tensor *v, const char *op, int d, int64_t start,
                          int64_t end, int64_t step)
{
    CtNode *n;
    if (!v || ct_node_new(v, op, slice_backward, 1, &t, &n) != CT_OK)
        return ct_op_discard(v);
    if (n) {
        SliceParams *p = CT_NODE_PARAMS(n, SliceParams);
        p->in.ndim = t->ndim;
        memcpy(p->in.shape, t->shape, sizeof p->in.shape);
        p->dim = d;
        p->start = start;
        p->end = end;
        p->step = step;
    }
    return v;
}

/* A slice bound as Python takes it: negative counts from the end, and
 * both clamp to [0, size]. */
static int64_t clamp_index(int64_t i, int64_t size)
{
    if (i < 0) i = i < -size ? 0 : i + size;
    return i > size ? size : i;
}

Tensor *tensor_slice(Tensor *t, int dim, int64_t start, int64_t end, int64_t step)
{
    if (!t) return NULL;
    int d = ct_norm_dim("slice", dim, t->ndim);
    if (d < 0) return NULL;
    int64_t size = t->shape[d];
    if (step <= 0) {
        ct_error(CT_ERR_INVALID,
                 "slice: step %lld must be positive (dim %d of size %lld)",
                 (long long)step, dim, (long long)size);
        return NULL;
    }
    start = clamp_index(start, size);
    end = clamp_index(end, size);
    if (end < start) end = start;
    int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
    memcpy(sh, t->shape, sizeof sh);
    memcpy(st, t->stride, sizeof st);
    sh[d] = (end - start + step - 1) / step;
    st[d] = t->stride[d] * step;
    Tensor *v = ct_tensor_view(t, t->ndim, sh, st, t->offset + start * t->stride[d]);
    return slice_node(t, v, "slice", d, start, end, step);
}

Tensor *tensor_select(Tensor *t, int dim, int64_t index)
{
    if (!t) return NULL;
    int d = ct_norm_dim("select", dim, t->ndim);
    if (d < 0) return NULL;
    int64_t size = t->shape[d];
    if (index < -size || index >= size) {
        ct_error(CT_ERR_INVALID,
                 "select: index %lld out of range for dim %d of size %lld",
                 (long long)index, dim, (long long)size);
        return NULL;
    }
    if (index < 0) index += size;
    int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (i == d) continue;
        sh[nd] = t->shape[i];
        st[nd++] = t->stride[i];
    }
    Tensor *v = ct_tensor_view(t, nd, sh, st, t->offset + index * t->stride[d]);
    return slice_node(t, v, "select", d, index, -1, 1);
}

/* ------------------------------------------------------------ permutation */

typedef struct PermuteParams {
    int dims[CT_MAX_DIMS];
} PermuteParams;

static CtStatus permute_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    PermuteParams *p = CT_NODE_PARAMS(n, PermuteParams);
    int inv[CT_MAX_DIMS];
    for (int i = 0; i < g->ndim; i++) inv[p->dims[i]] = i;
    gin[0] = tensor_permute(g, inv);
    return gin[0] ? CT_OK : ct_last_status();
}

Tensor *tensor_permute(Tensor *t, const int *dims)
{
    if (!t) return NULL;
    if (!dims && t->ndim > 0) {
        ct_error(CT_ERR_NULL, "permute: NULL dims");
        return NULL;
    }
    int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
    int norm[CT_MAX_DIMS];
    bool seen[CT_MAX_DIMS] = {false};
    for (int i = 0; i < t->ndim; i++) {
        int d = ct_norm_dim("permute", dims[i], t->ndim);
        if (d < 0) return NULL;
        if (seen[d]) {
            ct_error(CT_ERR_INVALID, "permute: dim %d repeated", dims[i]);
            return NULL;
        }
        seen[d] = true;
        norm[i] = d;
        sh[i] = t->shape[d];
        st[i] = t->stride[d];
    }
    Tensor *v = ct_tensor_view(t, t->ndim, sh, st, t->offset);
    CtNode *n;
    if (!v || ct_node_new(v, "permute", permute_backward, 1, &t, &n) != CT_OK)
        return ct_op_discard(v);
    if (n) memcpy(CT_NODE_PARAMS(n, PermuteParams)->dims, norm, sizeof norm);
    return v;
}

Tensor *tensor_transpose(Tensor *t, int dim0, int dim1)
{
    if (!t) return NULL;
    if (t->ndim == 0)
        return scalar_dim("transpose", dim0) && scalar_dim("transpose", dim1)
                   ? scalar_view(t)
                   : NULL;
    int a = ct_norm_dim("transpose", dim0, t->ndim);
    int b = a < 0 ? -1 : ct_norm_dim("transpose", dim1, t->ndim);
    if (a < 0 || b < 0) return NULL;
    int dims[CT_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) dims[i] = i;
    dims[a] = b;
    dims[b] = a;
    return tensor_permute(t, dims);
}

/* -------------------------------------------------------------- broadcast */

static CtStatus expand_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    ShapeParams *p = CT_NODE_PARAMS(n, ShapeParams);
    gin[0] = tensor_sum_to(g, p->ndim, p->shape);
    return gin[0] ? CT_OK : ct_last_status();
}

Tensor *tensor_expand(Tensor *t, int ndim, const int64_t *shape)
{
    if (!t) return NULL;
    if (ndim > 0 && !shape) {
        ct_error(CT_ERR_NULL, "expand: NULL shape");
        return NULL;
    }
    int64_t sh[CT_MAX_DIMS];
    bool ok = ndim >= t->ndim && ndim <= CT_MAX_DIMS;
    for (int i = 0; ok && i < ndim; i++) {
        int j = i - (ndim - t->ndim);
        sh[i] = (shape[i] == -1 && j >= 0) ? t->shape[j] : shape[i];
        ok = sh[i] >= 0 && (j < 0 || t->shape[j] == 1 || t->shape[j] == sh[i]);
    }
    if (!ok) {
        char b1[96], b2[80];
        ct_error(CT_ERR_SHAPE, "expand: cannot expand %s to %s",
                 tensor_describe(t, b1, sizeof b1),
                 ct_shape_str(ndim, shape, b2, sizeof b2));
        return NULL;
    }
    if (!ct_check_geometry("expand", ndim, sh, t->dtype)) return NULL;
    Tensor *a = ct_broadcast_alias(t, ndim, sh);
    if (!a) return NULL; /* out of memory, recorded */
    Tensor *v = ct_tensor_view(t, ndim, a->shape, a->stride, a->offset);
    tensor_free(a);
    CtNode *n;
    if (!v || ct_node_new(v, "expand", expand_backward, 1, &t, &n) != CT_OK)
        return ct_op_discard(v);
    if (n) save_input_shape(n, t);
    return v;
}

Tensor *tensor_contiguous(Tensor *t)
{
    if (!t) return NULL;
    if (tensor_is_contiguous(t)) return ct_scope_adopt(tensor_retain(t));
    return tensor_clone(t);
}
