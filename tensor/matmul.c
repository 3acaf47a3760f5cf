/* Matrix product with PyTorch's matmul rules, on the MATMUL (GEMM) kernel.
 *
 * Operands are handed to the kernel without copies whenever each matrix is
 * packed row-major or column-major (a transposed view goes in with a trans
 * flag). Batch dims are broadcast with stride 0 and coalesced, so one kernel
 * call covers every batch whose matrices sit at a constant stride; the rare
 * layouts that do not coalesce loop over the outer batch dims. A batched
 * left operand times an unbatched right one is folded into one tall GEMM. */
#include <string.h>

#include "matmul.h"

Tensor *ct_packed_copy(const Tensor *t)
{
    Tensor *c = ct_tensor_new_persistent(t->ndim, t->shape, t->dtype, t->storage->device);
    if (!c) return NULL;
    CtOpCall call = {.op = CT_OP_COPY, .out = {c}, .in = {t}};
    if (ct_dispatch(&call) != CT_OK) {
        tensor_free(c);
        return NULL;
    }
    return c;
}

/* One operand as the kernel sees it. A 1-d left operand is a (1, k) row, a
 * 1-d right operand a (k, 1) column. */
typedef struct MatOperand {
    const Tensor *t; /* the input, or `copy` */
    Tensor *copy;    /* owned packed copy when the input's matrices are not packed */
    int nbatch;      /* leading (batch) dims of t */
    int64_t rows, cols;
    bool trans;
} MatOperand;

static bool mat_operand(MatOperand *o, const Tensor *t, bool left)
{
    int nd = t->ndim;
    int64_t rows, cols, rs, cs;
    if (nd == 1) {
        rows = left ? 1 : t->shape[0];
        cols = left ? t->shape[0] : 1;
        rs = cs = t->stride[0]; /* only the stride of the non-unit dim matters */
    } else {
        rows = t->shape[nd - 2];
        cols = t->shape[nd - 1];
        rs = t->stride[nd - 2];
        cs = t->stride[nd - 1];
    }
    o->t = t;
    o->copy = NULL;
    o->nbatch = nd > 2 ? nd - 2 : 0;
    o->rows = rows;
    o->cols = cols;
    if (ct_mat_packed(rows, cols, rs, cs, &o->trans)) return true;
    o->copy = ct_packed_copy(t);
    o->t = o->copy;
    o->trans = false;
    return o->copy != NULL;
}

/* Stride of o's matrices along dim i of the nb broadcast batch dims. */
static int64_t batch_stride(const MatOperand *o, int i, int nb)
{
    int j = i - (nb - o->nbatch);
    return (j >= 0 && o->t->shape[j] != 1) ? o->t->stride[j] : 0;
}

static CtStatus dispatch_at(Tensor *out, const Tensor *a, const Tensor *b,
                            const CtMatmulParams *p)
{
    CtOpCall c = {.op = CT_OP_MATMUL, .out = {out}, .in = {a, b}, .params = p};
    return ct_dispatch(&c);
}

/* Runs the kernels for out (contiguous, nb batch dims then the matrix dims)
 * <- A @ B, looping over outer batch dims that do not coalesce. */
static CtStatus run_batched(Tensor *out, int nb, const MatOperand *A, const MatOperand *B,
                            CtMatmulParams *p)
{
    /* batch shape and strides (A, B, C), size-1 dims dropped, adjacent dims
     * merged where all three operands allow it */
    int64_t shape[CT_MAX_DIMS], st[3][CT_MAX_DIMS];
    int64_t cstride = p->m * p->n;
    int64_t cs[CT_MAX_DIMS];
    for (int i = nb - 1; i >= 0; i--) {
        cs[i] = cstride;
        cstride *= out->shape[i];
    }
    int d = 0;
    for (int i = 0; i < nb; i++) {
        int64_t sz = out->shape[i];
        int64_t s[3] = {batch_stride(A, i, nb), batch_stride(B, i, nb), cs[i]};
        if (sz == 1) continue;
        bool merge = d > 0;
        for (int o = 0; merge && o < 3; o++) merge = st[o][d - 1] == s[o] * sz;
        if (merge) {
            shape[d - 1] *= sz;
            for (int o = 0; o < 3; o++) st[o][d - 1] = s[o];
            continue;
        }
        shape[d] = sz;
        for (int o = 0; o < 3; o++) st[o][d] = s[o];
        d++;
    }
    if (d == 0) return dispatch_at(out, A->t, B->t, p);
    p->batch = shape[d - 1];
    p->stride_a = st[0][d - 1];
    p->stride_b = st[1][d - 1];
    p->stride_c = st[2][d - 1];
    int64_t outer = ct_shape_numel(d - 1, shape);
    if (outer == 1) return dispatch_at(out, A->t, B->t, p);
    /* kernel pointers are those of the tensors: walk aliases over the outer
     * dims */
    Tensor *ta = ct_tensor_alias(A->t), *tb = ct_tensor_alias(B->t);
    Tensor *tc = ct_tensor_alias(out);
    CtStatus status = CT_OK;
    if (!ta || !tb || !tc) status = ct_error(CT_ERR_OOM, "matmul: out of memory");
    for (int64_t r = 0; status == CT_OK && r < outer; r++) {
        int64_t off[3] = {0, 0, 0}, rem = r;
        for (int i = d - 2; i >= 0; i--) {
            int64_t idx = rem % shape[i];
            rem /= shape[i];
            for (int o = 0; o < 3; o++) off[o] += idx * st[o][i];
        }
        ta->offset = A->t->offset + off[0];
        tb->offset = B->t->offset + off[1];
        tc->offset = out->offset + off[2];
        status = dispatch_at(tc, ta, tb, p);
    }
    tensor_free(ta);
    tensor_free(tb);
    tensor_free(tc);
    return status;
}

/* out (contiguous, validated shape) <- a @ b, computed in `autocast`
 * (CtMatmulParams). No autograd. */
static CtStatus matmul_run(Tensor *out, const Tensor *a, const Tensor *b,
                           CtDType autocast)
{
    if (tensor_numel(out) == 0) return CT_OK;
    MatOperand A, B;
    if (!mat_operand(&A, a, true)) return ct_last_status();
    if (!mat_operand(&B, b, false)) {
        tensor_free(A.copy);
        return ct_last_status();
    }
    int nb = out->ndim - (a->ndim > 1) - (b->ndim > 1);
    CtMatmulParams p = {.batch = 1,
                        .m = A.rows,
                        .n = B.cols,
                        .k = A.cols,
                        .trans_a = A.trans,
                        .trans_b = B.trans,
                        .alpha = 1.0,
                        .beta = 0.0,
                        .autocast = autocast};
    /* (.., n, k) @ (k, m) with the left rows packed across the batch: one
     * (batch*n, k) @ (k, m) GEMM */
    bool fold = nb > 0 && B.nbatch == 0 && !A.trans && A.nbatch == nb;
    int64_t expect = A.rows * A.cols;
    for (int i = nb - 1; fold && i >= 0; i--) {
        if (A.t->shape[i] != 1 && A.t->stride[i] != expect) fold = false;
        expect *= A.t->shape[i];
    }
    CtStatus st;
    if (fold) {
        p.m = ct_shape_numel(nb, out->shape) * A.rows;
        st = dispatch_at(out, A.t, B.t, &p);
    } else {
        st = run_batched(out, nb, &A, &B, &p);
    }
    tensor_free(A.copy);
    tensor_free(B.copy);
    return st;
}

CtStatus ct_matmul_into(Tensor *out, const Tensor *a, const Tensor *b)
{
    CtDType autocast;
    if (!ct_autocast_pick("matmul", a, &autocast)) return ct_last_status();
    return matmul_run(out, a, b, autocast);
}

/* ------------------------------------------------------------- autograd */

static bool same_shape(const Tensor *t, int ndim, const int64_t *shape)
{
    if (t->ndim != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (t->shape[i] != shape[i]) return false;
    return true;
}

/* g summed down to x's shape (broadcast batch dims), then viewed as `like`. */
static Tensor *reduce_to(Tensor *g, const Tensor *x, const Tensor *like)
{
    if (!g) return NULL;
    if (!same_shape(g, x->ndim, x->shape)) g = tensor_sum_to(g, x->ndim, x->shape);
    if (!g || same_shape(g, like->ndim, like->shape)) return g;
    return tensor_reshape(g, like->ndim, like->shape);
}

typedef struct MatmulParams {
    CtDType autocast; /* the forward's precision; the backward's too */
} MatmulParams;

/* dA = g @ Bᵀ, dB = Aᵀ @ g on the promoted (.., n, k), (.., k, m) forms. */
static CtStatus matmul_grads(CtNode *nd, Tensor *g, Tensor **gin)
{
    Tensor *a = nd->in[0], *b = nd->in[1];
    Tensor *a2 = a->ndim == 1 ? tensor_unsqueeze(a, 0) : a; /* (.., n, k) */
    Tensor *b2 = b->ndim == 1 ? tensor_unsqueeze(b, 1) : b; /* (.., k, m) */
    if (!a2 || !b2) return ct_last_status();
    int64_t k = a2->shape[a2->ndim - 1], m = b2->shape[b2->ndim - 1];
    int64_t gshape[CT_MAX_DIMS]; /* g as (batch.., n, m) */
    int gnd = g->ndim + (a->ndim == 1) + (b->ndim == 1);
    memcpy(gshape, g->shape, (size_t)g->ndim * sizeof *gshape);
    gshape[gnd - 2] = a2->shape[a2->ndim - 2];
    gshape[gnd - 1] = m;
    Tensor *g2 = same_shape(g, gnd, gshape) ? g : tensor_reshape(g, gnd, gshape);
    if (!g2) return ct_last_status();
    if (nd->needs_grad[0]) {
        Tensor *bt = tensor_transpose(b2, -1, -2);
        if (!(gin[0] = reduce_to(tensor_matmul(g2, bt), a2, a))) return ct_last_status();
    }
    if (nd->needs_grad[1]) {
        Tensor *db;
        if (b2->ndim == 2 && a2->ndim > 2) {
            /* sum over the batch inside one GEMM: (k, rows) @ (rows, m); rows
             * given, not -1, which k or m of 0 leaves undetermined */
            int64_t rows = ct_shape_numel(a2->ndim - 1, a2->shape);
            Tensor *af = tensor_reshape(a2, 2, (const int64_t[]){rows, k});
            Tensor *gf = tensor_reshape(g2, 2, (const int64_t[]){rows, m});
            db = tensor_matmul(tensor_transpose(af, 0, 1), gf);
        } else {
            db = tensor_matmul(tensor_transpose(a2, -1, -2), g2);
        }
        if (!(gin[1] = reduce_to(db, b2, b))) return ct_last_status();
    }
    return CT_OK;
}

static CtStatus matmul_backward(CtNode *nd, Tensor *g, Tensor **gin)
{
    CtDType prev;
    tensor_autocast_begin(CT_NODE_PARAMS(nd, MatmulParams)->autocast, &prev);
    CtStatus st = matmul_grads(nd, g, gin);
    tensor_autocast_end(prev);
    return st;
}

/* ---------------------------------------------------------------- op */

static Tensor *matmul_again(Tensor **ops, const void *unused)
{
    (void)unused;
    return tensor_matmul(ops[0], ops[1]);
}

Tensor *tensor_matmul(Tensor *a, Tensor *b)
{
    const char *op = "matmul";
    if (!ct_check_inputs(op, 2, (const Tensor *[]){a, b})) return NULL;
    /* a bf16/f16 operand (a CUDA convolution's output) with an f32 one is
     * widened first */
    if (a->dtype != b->dtype && (ct_autocast_widens(a) || ct_autocast_widens(b)))
        return ct_autocast_call(2, (Tensor *[]){a, b}, CT_F32, matmul_again, NULL);
    if (!ct_check_same_dtype(op, a, b)) return NULL;
    CtDType autocast;
    if (!ct_autocast_pick(op, a, &autocast)) return NULL;
    char d1[96], d2[96];
    if (a->ndim == 0 || b->ndim == 0) {
        ct_error(CT_ERR_SHAPE, "matmul: both operands need at least 1 dim, got %s and %s",
                 tensor_describe(a, d1, sizeof d1), tensor_describe(b, d2, sizeof d2));
        return NULL;
    }
    int64_t ka = a->shape[a->ndim - 1];
    int64_t kb = b->ndim == 1 ? b->shape[0] : b->shape[b->ndim - 2];
    if (ka != kb) {
        ct_error(CT_ERR_SHAPE,
                 "matmul: %s and %s cannot be multiplied (inner dims %lld and %lld "
                 "differ)",
                 tensor_describe(a, d1, sizeof d1), tensor_describe(b, d2, sizeof d2),
                 (long long)ka, (long long)kb);
        return NULL;
    }
    /* batch dims broadcast from the right */
    int na = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
    int nb = na > nbb ? na : nbb;
    int64_t shape[CT_MAX_DIMS];
    for (int i = 0; i < nb; i++) {
        int ia = i - (nb - na), ib = i - (nb - nbb);
        int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            ct_error(CT_ERR_SHAPE, "matmul: batch dims of %s and %s do not broadcast",
                     tensor_describe(a, d1, sizeof d1),
                     tensor_describe(b, d2, sizeof d2));
            return NULL;
        }
        shape[i] = sa == 1 ? sb : sa;
    }
    int nd = nb;
    if (a->ndim > 1) shape[nd++] = a->shape[a->ndim - 2];
    if (b->ndim > 1) shape[nd++] = b->shape[b->ndim - 1];
    /* persistent until it is complete, so a failure frees it */
    Tensor *out = ct_tensor_new_persistent(nd, shape, a->dtype, a->storage->device);
    if (!out) return NULL;
    CtNode *n;
    if (matmul_run(out, a, b, autocast) != CT_OK ||
        ct_node_new(out, op, matmul_backward, 2, (Tensor *[]){a, b}, &n) != CT_OK) {
        tensor_free(out);
        return NULL;
    }
    if (n) {
        CT_NODE_PARAMS(n, MatmulParams)->autocast = autocast;
        ct_node_reads_factors(n);
    }
    return ct_scope_adopt(out);
}
