/* Joining: cat and stack. cat copies each input into its slice of the
 * output (a view), so it runs on any backend with a COPY kernel. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A node records at most CT_NODE_MAX_IN inputs, so a cat of more tensors is
 * recorded as a tree: interior nodes sit on views of the output covering
 * consecutive inputs (no extra copies). Each node slices its gradient along
 * `dim` into pieces of the saved sizes. */
typedef struct CatParams {
    int dim;
    int64_t sizes[CT_NODE_MAX_IN];
} CatParams;

static CtStatus cat_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    const CatParams *p = CT_NODE_PARAMS(n, CatParams);
    int64_t start = 0;
    for (int i = 0; i < n->n_in; i++) {
        int64_t end = start + p->sizes[i];
        if (n->needs_grad[i] && !(gin[i] = tensor_slice(g, p->dim, start, end, 1)))
            return ct_last_status();
        start = end;
    }
    return CT_OK;
}

/* A caller-owned view of `out` covering [start, start + len) along dim. */
static Tensor *region(const Tensor *out, int dim, int64_t start, int64_t len)
{
    Tensor *v = ct_tensor_alias(out);
    if (!v) return NULL;
    v->offset += start * v->stride[dim];
    v->shape[dim] = len;
    return v;
}

/* Records the graph of out = cat(ts[0..n)) along dim. */
static CtStatus record(Tensor *out, int n, Tensor *const *ts, int dim)
{
    if (n <= CT_NODE_MAX_IN) {
        CtNode *node;
        CtStatus st = ct_node_new(out, "cat", cat_backward, n, ts, &node);
        if (node) {
            CatParams *p = CT_NODE_PARAMS(node, CatParams);
            p->dim = dim;
            for (int i = 0; i < n; i++) p->sizes[i] = ts[i]->shape[dim];
        }
        return st;
    }
    /* split into CT_NODE_MAX_IN groups of consecutive inputs */
    Tensor *groups[CT_NODE_MAX_IN] = {0};
    int per = (n + CT_NODE_MAX_IN - 1) / CT_NODE_MAX_IN, ng = 0;
    int64_t start = 0;
    CtStatus st = CT_OK;
    for (int lo = 0; lo < n && st == CT_OK; lo += per, ng++) {
        int cnt = n - lo < per ? n - lo : per;
        int64_t len = 0;
        for (int i = lo; i < lo + cnt; i++) len += ts[i]->shape[dim];
        groups[ng] = region(out, dim, start, len);
        st = groups[ng] ? record(groups[ng], cnt, ts + lo, dim) : ct_last_status();
        start += len;
    }
    if (st == CT_OK) st = record(out, ng, groups, dim);
    for (int i = 0; i < ng; i++) tensor_free(groups[i]);
    return st;
}

/* Shapes of ts[i] and ts[0] must be equal except along `except` (-1: all
 * dims); dtypes equal. Errors name the tensor's position in the list. */
static bool check_list(const char *op, int n, Tensor *const *ts, int except)
{
    const Tensor *a = ts[0];
    for (int i = 1; i < n; i++) {
        const Tensor *b = ts[i];
        char d1[96], d2[96];
        if (b->dtype != a->dtype) {
            ct_error(CT_ERR_DTYPE,
                     "%s: tensor %d is %s but tensor 0 is %s: dtypes must match", op, i,
                     tensor_describe(b, d1, sizeof d1),
                     tensor_describe(a, d2, sizeof d2));
            return false;
        }
        bool ok = b->ndim == a->ndim;
        for (int d = 0; ok && d < a->ndim; d++)
            ok = d == except || b->shape[d] == a->shape[d];
        if (!ok) {
            if (except >= 0)
                ct_error(CT_ERR_SHAPE,
                         "%s: tensor %d is %s but tensor 0 is %s: sizes must match "
                         "except in dim %d",
                         op, i, tensor_describe(b, d1, sizeof d1),
                         tensor_describe(a, d2, sizeof d2), except);
            else
                ct_error(CT_ERR_SHAPE,
                         "%s: tensor %d is %s but tensor 0 is %s: shapes must match", op,
                         i, tensor_describe(b, d1, sizeof d1),
                         tensor_describe(a, d2, sizeof d2));
            return false;
        }
    }
    return true;
}

/* Validates the list itself; NULL entries give false without an error. */
static bool check_given(const char *op, int n, Tensor *const *ts)
{
    if (n < 1) {
        ct_error(CT_ERR_INVALID, "%s: need at least one tensor, got %d", op, n);
        return false;
    }
    if (!ts) {
        ct_error(CT_ERR_NULL, "%s: NULL list of %d tensors", op, n);
        return false;
    }
    for (int i = 0; i < n; i++)
        if (!ts[i]) return false; /* sticky */
    return ct_check_inputs(op, n, (const Tensor *const *)ts);
}

static Tensor *cat_impl(int n, Tensor *const *ts, int d)
{
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, ts[0]->shape, sizeof shape);
    shape[d] = 0;
    for (int i = 0; i < n; i++) shape[d] += ts[i]->shape[d];
    Tensor *out = ct_tensor_new(ts[0]->ndim, shape, ts[0]->dtype, ts[0]->storage->device);
    if (!out) return NULL;
    int64_t start = 0;
    for (int i = 0; i < n; i++) {
        Tensor *v = region(out, d, start, ts[i]->shape[d]);
        CtStatus st = v ? tensor_copy_(v, ts[i]) : ct_last_status();
        tensor_free(v);
        if (st != CT_OK) return ct_op_discard(out);
        start += ts[i]->shape[d];
    }
    return record(out, n, ts, d) == CT_OK ? out : ct_op_discard(out);
}

typedef struct JoinArgs {
    Tensor *(*join)(int n, Tensor *const *ts, int dim);
    int n, dim;
} JoinArgs;

static Tensor *join_again(Tensor **ops, const void *arg)
{
    const JoinArgs *a = arg;
    return a->join(a->n, ops, a->dim);
}

/* join(ts) on the list cast to f32 (differentiable casts); op names it. */
static Tensor *join_promoted(const char *op, Tensor *(*join)(int, Tensor *const *, int),
                             int n, Tensor *const *ts, int dim)
{
    Tensor **ops = ct_malloc((size_t)n * sizeof *ops);
    if (!ops) {
        ct_error(CT_ERR_OOM, "%s: out of memory", op);
        return NULL;
    }
    memcpy(ops, ts, (size_t)n * sizeof *ops);
    const JoinArgs a = {join, n, dim};
    Tensor *out = ct_autocast_call(n, ops, CT_F32, join_again, &a);
    free(ops);
    return out;
}

Tensor *tensor_cat(int n, Tensor *const *ts, int dim)
{
    const char *op = "cat";
    if (!check_given(op, n, ts)) return NULL;
    if (ct_promotes_to_f32(n, ts)) return join_promoted(op, tensor_cat, n, ts, dim);
    if (ts[0]->ndim == 0) {
        ct_error(CT_ERR_SHAPE, "%s: 0-d tensors cannot be concatenated (use stack)", op);
        return NULL;
    }
    int d = ct_norm_dim(op, dim, ts[0]->ndim);
    if (d < 0 || !check_list(op, n, ts, d)) return NULL;
    return cat_impl(n, ts, d);
}

Tensor *tensor_stack(int n, Tensor *const *ts, int dim)
{
    const char *op = "stack";
    if (!check_given(op, n, ts)) return NULL;
    if (ct_promotes_to_f32(n, ts)) return join_promoted(op, tensor_stack, n, ts, dim);
    if (!check_list(op, n, ts, -1)) return NULL;
    int d = ct_norm_dim(op, dim, ts[0]->ndim + 1);
    if (d < 0) return NULL;
    Tensor **u = ct_malloc((size_t)n * sizeof *u);
    if (!u) {
        ct_error(CT_ERR_OOM, "%s: out of memory", op);
        return NULL;
    }
    /* the unsqueezed views live in a private scope; the graph keeps what
     * backward needs */
    CtScope *s = ct_scope_open();
    Tensor *out = NULL;
    if (s) {
        bool ok = true;
        for (int i = 0; i < n && ok; i++)
            ok = (u[i] = tensor_unsqueeze(ts[i], d)) != NULL;
        out = ok ? tensor_retain(cat_impl(n, u, d)) : NULL;
        ct_scope_close(s);
    }
    free(u);
    return ct_scope_adopt(out);
}
