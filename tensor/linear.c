/* y = x · wᵀ + b as one op with its own autograd node.
 *
 * Forward is one GEMM: x's leading dims are flattened to rows; the bias is
 * the GEMM's epilogue where the backend fuses it (CUDA), else the output is
 * pre-filled with the broadcast bias and the GEMM accumulates onto it
 * (beta = 1); w goes in with a trans flag, so neither w nor a transposed
 * view of it is copied. Backward: dx = g·w and dw = gᵀ·x (a GEMM each),
 * db = g's column sums (one reduction, or in dw's GEMM where the backend
 * sums them there: CtMatmulParams.bias_grad); dw and db go straight into
 * zeroed leaf gradients (ct_node_grad_buffer).
 *
 * linear_relu and linear_gelu apply the activation to the product in the
 * same op: in cuBLASLt's epilogue on CUDA (ReLU, and tanh-GELU, which also
 * stores its input for the backward), else in one pass after the GEMM. The
 * node carries the activation (ct_node_fuse_act): ReLU's gradient reads the
 * output, GELU's the pre-activation, which is kept only when a node is
 * recorded. */
#include <string.h>

#include "matmul.h"
#include "reduce.h"

typedef struct LinearParams {
    int64_t rows;     /* x's leading dims flattened */
    CtDType autocast; /* the forward's precision; dx's and dw's too */
} LinearParams;

/* Whether a (m, k) is stored as a packed transpose, row-major (k, m). Also
 * true for a matrix of one row or column that is packed both ways (gᵀ of a
 * single-row batch or a single output), which ct_mat_packed calls
 * row-major: cuBLASLt's bias gradient takes only a transposed A. */
static bool packed_transposed(const Tensor *a)
{
    int64_t m = a->shape[0], k = a->shape[1];
    return (k == 1 || a->stride[1] == m) && (m == 1 || a->stride[0] == 1);
}

/* dw <- a·b and db <- the sums of a's rows in one MATMUL where dw's
 * backend takes a bias gradient (CtMatmulParams.bias_grad, cuBLASLt's
 * epilogue on CUDA): *done tells. a (m, k) and b (k, n) are packed 2-d
 * matrices, dw and db contiguous. A backend that finds no algorithm for
 * it at run time (nothing ran) leaves *done false too. */
static CtStatus matmul_bias_grad(Tensor *dw, Tensor *db, const Tensor *a, const Tensor *b,
                                 bool *done)
{
    *done = false;
    bool ta = packed_transposed(a), tb;
    const CtBackend *be = ct_backend_peek(dw->storage->device);
    if (!be || tensor_numel(dw) == 0 || a->shape[1] == 0 || !tensor_is_contiguous(dw) ||
        (!ta &&
         !ct_mat_packed(a->shape[0], a->shape[1], a->stride[0], a->stride[1], &ta)) ||
        !ct_mat_packed(b->shape[0], b->shape[1], b->stride[0], b->stride[1], &tb))
        return CT_OK;
    CtMatmulParams p = {.batch = 1,
                        .m = a->shape[0],
                        .n = b->shape[1],
                        .k = a->shape[1],
                        .trans_a = ta,
                        .trans_b = tb,
                        .alpha = 1.0,
                        .bias_grad = true};
    CtOpCall c = {.op = CT_OP_MATMUL, .out = {dw, db}, .in = {a, b}, .params = &p};
    if (!ct_backend_supports(be, &c)) return CT_OK;
    CtStatus st = ct_dispatch(&c);
    if (st == CT_ERR_UNSUPPORTED) {
        ct_clear_error();
        return CT_OK;
    }
    *done = st == CT_OK;
    return st;
}

/* dx and dw of linear_backward, in the forward's precision, into dw (when
 * w needs one); db too where the product sums it (*db_done). Not under
 * autocast: there the product rounds its operands, the bias gradient sums
 * g as it is. */
static CtStatus linear_input_grads(CtNode *nd, Tensor *g2, Tensor *dw, Tensor *db,
                                   Tensor **gin, bool *db_done)
{
    Tensor *x = nd->in[0], *w = nd->in[1];
    const LinearParams *lp = CT_NODE_PARAMS(nd, LinearParams);
    int64_t in_f = w->shape[1];
    *db_done = false;
    if (nd->needs_grad[0]) {
        Tensor *dx = tensor_matmul(g2, w); /* (rows, in) */
        if (!dx || !(gin[0] = tensor_reshape(dx, x->ndim, x->shape)))
            return ct_last_status();
    }
    if (!dw) return CT_OK;
    Tensor *x2 = tensor_reshape(x, 2, (const int64_t[]){lp->rows, in_f});
    Tensor *gt = tensor_transpose(g2, 0, 1);
    if (!x2 || !gt) return ct_last_status();
    CtStatus st = CT_OK;
    if (db && lp->autocast == CT_F32) st = matmul_bias_grad(dw, db, gt, x2, db_done);
    if (st == CT_OK && !*db_done) st = ct_matmul_into(dw, gt, x2);
    if (st == CT_OK) gin[1] = dw;
    return st;
}

/* db = the column sums of g2 (rows, out) in g's dtype, whatever the
 * forward's precision: one reduction, or where the backend has none for
 * the dtype (bf16, f16), a product with a ones vector. */
static CtStatus bias_grad(Tensor *g2, Tensor *db)
{
    int64_t rows = g2->shape[0], out_f = g2->shape[1];
    Tensor *y = ct_tensor_view(db, 2, (const int64_t[]){1, out_f},
                               (const int64_t[]){out_f, 1}, db->offset); /* keepdim */
    if (!y) return ct_last_status();
    CtReduceParams p = {CT_RED_SUM, 1.0};
    CtOpCall c = {.op = CT_OP_REDUCE, .out = {y}, .in = {g2}, .params = &p};
    const CtBackend *be = ct_backend_peek(g2->storage->device);
    if (!be || ct_backend_supports(be, &c)) return ct_dispatch(&c);
    CtDType prev;
    tensor_autocast_begin(CT_F32, &prev);
    Tensor *ones = tensor_ones(1, &rows, g2->dtype, g2->storage->device);
    CtStatus st = ones ? ct_matmul_into(db, ones, g2) : ct_last_status();
    tensor_autocast_end(prev);
    return st;
}

/* x: (*, in), w: (out, in), g: (*, out). dw and db go into the leaves'
 * zeroed gradients where they have them (ct_node_grad_buffer). */
static CtStatus linear_backward(CtNode *nd, Tensor *g, Tensor **gin)
{
    const LinearParams *lp = CT_NODE_PARAMS(nd, LinearParams);
    int64_t rows = lp->rows, out_f = nd->in[1]->shape[0];
    Tensor *g2 = tensor_reshape(g, 2, (const int64_t[]){rows, out_f}); /* (rows, out) */
    Tensor *dw = nd->needs_grad[1] ? ct_node_grad_buffer(nd, 1, nd->in[1]) : NULL;
    Tensor *db = nd->needs_grad[2] ? ct_node_grad_buffer(nd, 2, nd->in[2]) : NULL;
    if (!g2 || (nd->needs_grad[1] && !dw) || (nd->needs_grad[2] && !db))
        return ct_last_status();
    CtDType prev;
    bool db_done;
    tensor_autocast_begin(lp->autocast, &prev);
    CtStatus st = linear_input_grads(nd, g2, dw, db, gin, &db_done);
    tensor_autocast_end(prev);
    if (st == CT_OK && db && !db_done) st = bias_grad(g2, db);
    if (st == CT_OK && db) gin[2] = db;
    return st;
}

/* Row stride of x seen as a (rows, in) matrix: its leading dims must
 * coalesce into one dim. Returns false when they do not. */
static bool flat_row_stride(const Tensor *x, int64_t *rs)
{
    bool set = false;
    int64_t expect = 0;
    *rs = 0;
    for (int d = x->ndim - 2; d >= 0; d--) {
        if (x->shape[d] == 1) continue;
        if (!set) {
            *rs = x->stride[d];
            expect = *rs * x->shape[d];
            set = true;
        } else if (x->stride[d] != expect) {
            return false;
        } else {
            expect *= x->shape[d];
        }
    }
    return true;
}

/* The activation applied to the product (tensor_linear_relu/_gelu). */
typedef enum LinearAct { ACT_NONE, ACT_RELU, ACT_GELU_ERF, ACT_GELU_TANH } LinearAct;

static const CtUnaryKind act_kind[] = {CT_UN_NEG, CT_UN_RELU, CT_UN_GELU_ERF,
                                       CT_UN_GELU_TANH}; /* [ACT_NONE] unused */
static const char *const act_op[] = {"linear", "linear_relu", "linear_gelu",
                                     "linear_gelu"};

/* Makes the bias (when b) and the activation act (the matmul's epilogue
 * form) the GEMM's epilogue (beta 0, in2 = b), writing act's input to aux
 * as well when aux, when out's backend fuses them (CUDA's cuBLASLt): one
 * kernel instead of a broadcast copy, a GEMM and an activation pass. Leaves
 * c and p as they were and returns false otherwise. */
static bool epilogue_fused(CtOpCall *c, CtMatmulParams *p, const Tensor *b,
                           CtMatmulAct act, Tensor *aux)
{
    const CtBackend *be = ct_backend_peek(c->out[0]->storage->device);
    if (!be || (b && !tensor_is_contiguous(b))) return false;
    const CtMatmulParams before = *p;
    p->bias = b != NULL;
    p->act = act;
    p->aux = aux != NULL;
    p->beta = 0.0;
    c->in[2] = b;
    c->out[1] = aux;
    if (ct_backend_supports(be, c)) return true;
    *p = before;
    c->in[2] = NULL;
    c->out[1] = NULL;
    return false;
}

/* Sets the epilogue for the activation and bias where the backend fuses
 * them; else, for the bias alone. *act_done tells whether the activation
 * is in it. The product goes to c->out[0] (pre, or out without pre); a
 * fused activation writes out and stores its input in pre. Returns whether
 * the bias is in the epilogue. */
static bool epilogue_pick(CtOpCall *c, CtMatmulParams *p, const Tensor *b, LinearAct act,
                          Tensor *out, Tensor *pre, bool *act_done)
{
    CtMatmulAct mact = act == ACT_RELU        ? CT_MATMUL_ACT_RELU
                       : act == ACT_GELU_TANH ? CT_MATMUL_ACT_GELU_TANH
                                              : CT_MATMUL_ACT_NONE;
    *act_done = false;
    if (mact != CT_MATMUL_ACT_NONE) {
        Tensor *dst = c->out[0];
        c->out[0] = out;
        if ((*act_done = epilogue_fused(c, p, b, mact, pre))) return b != NULL;
        c->out[0] = dst;
    }
    return b && epilogue_fused(c, p, b, CT_MATMUL_ACT_NONE, NULL);
}

/* The product of `plain` (x, w; beta 1 with a bias) with bias and
 * activation into pre (or out without pre) and out: in the GEMM's epilogue
 * where the backend fuses them, else a broadcast copy of the bias, the
 * GEMM onto it and an activation pass. A backend that finds no algorithm
 * for the fused form at run time (cuBLASLt, for some alignments) queues
 * nothing and says CT_ERR_UNSUPPORTED: the plain forms run then. */
static CtStatus linear_product(Tensor *out, Tensor *pre, const Tensor *x, const Tensor *w,
                               const Tensor *b, CtMatmulParams plain, LinearAct act)
{
    Tensor *dst = pre ? pre : out; /* the product, before the activation */
    CtMatmulParams p = plain;
    CtOpCall c = {.op = CT_OP_MATMUL, .out = {dst}, .in = {x, w}, .params = &p};
    bool act_done;
    bool bias_done = epilogue_pick(&c, &p, b, act, out, pre, &act_done);
    CtStatus st = CT_OK;
    if (bias_done || act_done) {
        st = ct_dispatch(&c);
        if (st != CT_ERR_UNSUPPORTED) {
            if (st == CT_OK && act != ACT_NONE && !act_done)
                st = ct_act_run(act_kind[act], out, dst);
            return st;
        }
        ct_clear_error(); /* nothing ran */
        p = plain;
        c = (CtOpCall){.op = CT_OP_MATMUL, .out = {dst}, .in = {x, w}, .params = &p};
        st = CT_OK;
    }
    if (b) { /* dst <- broadcast bias; the GEMM adds onto it */
        Tensor *bb = ct_broadcast_alias(b, dst->ndim, dst->shape);
        CtOpCall fill = {.op = CT_OP_COPY, .out = {dst}, .in = {bb}};
        st = bb ? ct_dispatch(&fill) : ct_error(CT_ERR_OOM, "linear: out of memory");
        tensor_free(bb);
    }
    if (st == CT_OK) st = ct_dispatch(&c);
    if (st == CT_OK && act != ACT_NONE) st = ct_act_run(act_kind[act], out, dst);
    return st;
}

/* pre (contiguous, (*, out), or NULL) <- x·wᵀ + b, and out <- act(pre),
 * or in place in out without pre. No autograd. */
static CtStatus linear_run(Tensor *out, Tensor *pre, const Tensor *x, const Tensor *w,
                           const Tensor *b, int64_t rows, CtDType autocast, LinearAct act)
{
    if (tensor_numel(out) == 0) return CT_OK;
    int64_t out_f = w->shape[0], in_f = w->shape[1];
    int64_t rs, cs = x->stride[x->ndim - 1];
    bool xt = false, wt = false;
    Tensor *xc = NULL, *wc = NULL;
    if (!flat_row_stride(x, &rs) || !ct_mat_packed(rows, in_f, rs, cs, &xt)) {
        if (!(xc = ct_packed_copy(x))) return ct_last_status();
        x = xc;
        xt = false;
    }
    if (!ct_mat_packed(out_f, in_f, w->stride[0], w->stride[1], &wt)) {
        if (!(wc = ct_packed_copy(w))) {
            tensor_free(xc);
            return ct_last_status();
        }
        w = wc;
        wt = false;
    }
    /* B = wᵀ: a row-major w is B transposed; a column-major w is B itself */
    CtMatmulParams p = {.batch = 1,
                        .m = rows,
                        .n = out_f,
                        .k = in_f,
                        .trans_a = xt,
                        .trans_b = !wt,
                        .alpha = 1.0,
                        .beta = b ? 1.0 : 0.0,
                        .autocast = autocast};
    CtStatus st = linear_product(out, pre, x, w, b, p, act);
    tensor_free(xc);
    tensor_free(wc);
    return st;
}

static Tensor *linear(Tensor *x, Tensor *w, Tensor *b, LinearAct act);

static Tensor *linear_again(Tensor **ops, const void *act)
{
    return linear(ops[0], ops[1], ops[2], *(const LinearAct *)act);
}

/* Checks x, w and b for op; records an error and returns false otherwise. */
static bool linear_shapes_ok(const char *op, const Tensor *x, const Tensor *w,
                             const Tensor *b)
{
    char d1[96], d2[96];
    int64_t out_f = w->shape[0], in_f = w->shape[1];
    if (x->ndim == 0 || x->shape[x->ndim - 1] != in_f) {
        ct_error(CT_ERR_SHAPE, "%s: input %s has %lld features, weight %s expects %lld",
                 op, tensor_describe(x, d1, sizeof d1),
                 (long long)(x->ndim ? x->shape[x->ndim - 1] : 0),
                 tensor_describe(w, d2, sizeof d2), (long long)in_f);
        return false;
    }
    if (b && (b->ndim != 1 || b->shape[0] != out_f)) {
        ct_error(CT_ERR_SHAPE, "%s: bias %s does not match weight %s (expected [%lld])",
                 op, tensor_describe(b, d1, sizeof d1), tensor_describe(w, d2, sizeof d2),
                 (long long)out_f);
        return false;
    }
    return true;
}

/* Records the node of out (with act fused, reading pre for GELU). */
static CtStatus linear_node(Tensor *out, Tensor *pre, Tensor *const in[3], LinearAct act,
                            LinearParams lp)
{
    CtNode *n;
    CtStatus st = ct_node_new(out, act_op[act], linear_backward, 3, in, &n);
    if (st != CT_OK || !n) return st;
    *CT_NODE_PARAMS(n, LinearParams) = lp;
    ct_node_reads_factors(n);
    return act == ACT_NONE ? CT_OK : ct_node_fuse_act(n, act_kind[act], pre ? pre : out);
}

static Tensor *linear(Tensor *x, Tensor *w, Tensor *b, LinearAct act)
{
    const char *op = act_op[act];
    if (!ct_check_inputs(op, b ? 3 : 2, (const Tensor *[]){x, w, b})) return NULL;
    /* a bf16/f16 input (a CUDA convolution's output) to f32 weights is
     * widened first */
    if (ct_autocast_widens(x) && w->dtype == CT_F32)
        return ct_autocast_call(3, (Tensor *[]){x, w, b}, CT_F32, linear_again, &act);
    if (!ct_check_float(op, x) || !ct_check_same_dtype(op, x, w) ||
        (b && !ct_check_same_dtype(op, x, b)) || !ct_check_ndim(op, w, 2, 2) ||
        !linear_shapes_ok(op, x, w, b))
        return NULL;
    CtDType autocast;
    if (!ct_autocast_pick(op, x, &autocast)) return NULL;
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, x->shape, (size_t)x->ndim * sizeof *shape);
    shape[x->ndim - 1] = w->shape[0];
    int64_t rows = ct_shape_numel(x->ndim - 1, x->shape);
    Tensor *const in[3] = {x, w, b};
    /* GELU's backward reads its input: kept when a node will be recorded */
    bool keep_pre =
        (act == ACT_GELU_ERF || act == ACT_GELU_TANH) && ct_node_wanted(3, in);
    CtDevice dev = x->storage->device;
    /* persistent until complete, so a failure frees them */
    Tensor *out = ct_tensor_new_persistent(x->ndim, shape, x->dtype, dev);
    Tensor *pre =
        keep_pre ? ct_tensor_new_persistent(x->ndim, shape, x->dtype, dev) : NULL;
    CtStatus st = !out || (keep_pre && !pre)
                      ? ct_last_status()
                      : linear_run(out, pre, x, w, b, rows, autocast, act);
    if (st == CT_OK) st = linear_node(out, pre, in, act, (LinearParams){rows, autocast});
    tensor_free(pre); /* the node holds its own alias */
    if (st != CT_OK) {
        tensor_free(out);
        return NULL;
    }
    return ct_scope_adopt(out);
}

Tensor *tensor_linear(Tensor *x, Tensor *w, Tensor *b)
{
    return linear(x, w, b, ACT_NONE);
}

Tensor *tensor_linear_relu(Tensor *x, Tensor *w, Tensor *b)
{
    return linear(x, w, b, ACT_RELU);
}

Tensor *tensor_linear_gelu(Tensor *x, Tensor *w, Tensor *b, CtGeluApprox approx)
{
    if (x && approx != CT_GELU_ERF && approx != CT_GELU_TANH) {
        ct_error(CT_ERR_INVALID,
                 "linear_gelu: unknown approximation %d (CT_GELU_ERF or CT_GELU_TANH)",
                 (int)approx);
        return NULL;
    }
    return linear(x, w, b, approx == CT_GELU_TANH ? ACT_GELU_TANH : ACT_GELU_ERF);
}
