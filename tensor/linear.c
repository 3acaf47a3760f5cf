/* y = x · wᵀ + b as one op with its own autograd node.
 *
 * Forward is one GEMM: x's leading dims are flattened to rows; the bias is
 * the GEMM's epilogue where the backend fuses it (CUDA), else the output is
 * pre-filled with the broadcast bias and the GEMM accumulates onto it
 * (beta = 1); w goes in with a trans flag, so neither w nor a transposed
 * view of it is copied. Backward is one GEMM per gradient: dx = g·w,
 * dw = gᵀ·x, db = 1ᵀ·g (column sums as a GEMM against a ones vector, which
 * every backend with a MATMUL kernel runs). */
#include <string.h>

#include "matmul.h"

typedef struct LinearParams {
    int64_t rows;     /* x's leading dims flattened */
    CtDType autocast; /* the forward's precision; dx's and dw's too */
} LinearParams;

/* dx and dw of linear_backward, in the forward's precision. */
static CtStatus linear_input_grads(CtNode *nd, Tensor *g2, Tensor **gin)
{
    Tensor *x = nd->in[0], *w = nd->in[1];
    int64_t rows = CT_NODE_PARAMS(nd, LinearParams)->rows, in_f = w->shape[1];
    if (nd->needs_grad[0]) {
        Tensor *dx = tensor_matmul(g2, w); /* (rows, in) */
        if (!dx || !(gin[0] = tensor_reshape(dx, x->ndim, x->shape)))
            return ct_last_status();
    }
    if (nd->needs_grad[1]) {
        Tensor *x2 = tensor_reshape(x, 2, (const int64_t[]){rows, in_f});
        if (!(gin[1] = tensor_matmul(tensor_transpose(g2, 0, 1), x2))) /* (out, in) */
            return ct_last_status();
    }
    return CT_OK;
}

/* x: (*, in), w: (out, in), g: (*, out). The bias gradient is an f32
 * column sum whatever the forward's precision. */
static CtStatus linear_backward(CtNode *nd, Tensor *g, Tensor **gin)
{
    const LinearParams *lp = CT_NODE_PARAMS(nd, LinearParams);
    int64_t rows = lp->rows, out_f = nd->in[1]->shape[0];
    Tensor *g2 = tensor_reshape(g, 2, (const int64_t[]){rows, out_f}); /* (rows, out) */
    if (!g2) return ct_last_status();
    CtDType prev;
    tensor_autocast_begin(lp->autocast, &prev);
    CtStatus st = linear_input_grads(nd, g2, gin);
    tensor_autocast_begin(CT_F32, NULL);
    if (st == CT_OK && nd->needs_grad[2]) {
        Tensor *ones = tensor_ones(1, &rows, g->dtype, g->storage->device);
        if (!(gin[2] = tensor_matmul(ones, g2))) st = ct_last_status(); /* (out) */
    }
    tensor_autocast_end(prev);
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

/* Makes the bias (when b) and the ReLU (when relu) the GEMM's epilogue
 * (beta 0, in2 = b) when out's backend fuses them (CUDA's cuBLASLt): one
 * kernel instead of a broadcast copy, a GEMM and a ReLU pass. Leaves c and
 * p as they were and returns false otherwise. */
static bool epilogue_fused(CtOpCall *c, CtMatmulParams *p, const Tensor *b, bool relu)
{
    const CtBackend *be = ct_backend_peek(c->out[0]->storage->device);
    if (!be || (b && !tensor_is_contiguous(b))) return false;
    const CtMatmulParams before = *p;
    p->bias = b != NULL;
    p->act = relu ? CT_MATMUL_ACT_RELU : CT_MATMUL_ACT_NONE;
    p->beta = 0.0;
    c->in[2] = b;
    if (ct_backend_supports(be, c)) return true;
    *p = before;
    c->in[2] = NULL;
    return false;
}

/* out (contiguous, (*, out)) <- x·wᵀ + b, then relu(out) when relu. No
 * autograd. */
static CtStatus linear_run(Tensor *out, const Tensor *x, const Tensor *w, const Tensor *b,
                           int64_t rows, CtDType autocast, bool relu)
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
    CtOpCall c = {.op = CT_OP_MATMUL, .out = {out}, .in = {x, w}, .params = &p};
    CtStatus st = CT_OK;
    bool fused = (b || relu) && epilogue_fused(&c, &p, b, relu);
    if (b && !fused) { /* out <- broadcast bias; the GEMM adds onto it */
        Tensor *bb = ct_broadcast_alias(b, out->ndim, out->shape);
        CtOpCall fill = {.op = CT_OP_COPY, .out = {out}, .in = {bb}};
        st = bb ? ct_dispatch(&fill) : ct_error(CT_ERR_OOM, "linear: out of memory");
        tensor_free(bb);
    }
    if (st == CT_OK) st = ct_dispatch(&c);
    if (st == CT_OK && relu && !fused) st = ct_relu_inplace(out);
    tensor_free(xc);
    tensor_free(wc);
    return st;
}

static Tensor *linear(Tensor *x, Tensor *w, Tensor *b, bool relu);

static Tensor *linear_again(Tensor **ops, const void *relu)
{
    return linear(ops[0], ops[1], ops[2], *(const bool *)relu);
}

static Tensor *linear(Tensor *x, Tensor *w, Tensor *b, bool relu)
{
    const char *op = relu ? "linear_relu" : "linear";
    if (!ct_check_inputs(op, b ? 3 : 2, (const Tensor *[]){x, w, b})) return NULL;
    /* a bf16/f16 input (a CUDA convolution's output) to f32 weights is
     * widened first */
    if (ct_autocast_widens(x) && w->dtype == CT_F32)
        return ct_autocast_call(3, (Tensor *[]){x, w, b}, CT_F32, linear_again, &relu);
    if (!ct_check_float(op, x) || !ct_check_same_dtype(op, x, w) ||
        (b && !ct_check_same_dtype(op, x, b)) || !ct_check_ndim(op, w, 2, 2))
        return NULL;
    CtDType autocast;
    if (!ct_autocast_pick(op, x, &autocast)) return NULL;
    char d1[96], d2[96];
    int64_t out_f = w->shape[0], in_f = w->shape[1];
    if (x->ndim == 0 || x->shape[x->ndim - 1] != in_f) {
        ct_error(CT_ERR_SHAPE, "%s: input %s has %lld features, weight %s expects %lld",
                 op, tensor_describe(x, d1, sizeof d1),
                 (long long)(x->ndim ? x->shape[x->ndim - 1] : 0),
                 tensor_describe(w, d2, sizeof d2), (long long)in_f);
        return NULL;
    }
    if (b && (b->ndim != 1 || b->shape[0] != out_f)) {
        ct_error(CT_ERR_SHAPE, "%s: bias %s does not match weight %s (expected [%lld])",
                 op, tensor_describe(b, d1, sizeof d1), tensor_describe(w, d2, sizeof d2),
                 (long long)out_f);
        return NULL;
    }
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, x->shape, (size_t)x->ndim * sizeof *shape);
    shape[x->ndim - 1] = out_f;
    int64_t rows = ct_shape_numel(x->ndim - 1, x->shape);
    /* persistent until it is complete, so a failure frees it */
    Tensor *out = ct_tensor_new_persistent(x->ndim, shape, x->dtype, x->storage->device);
    if (!out) return NULL;
    CtNode *n;
    if (linear_run(out, x, w, b, rows, autocast, relu) != CT_OK ||
        ct_node_new(out, op, linear_backward, 3, (Tensor *[]){x, w, b}, &n) != CT_OK ||
        (n && relu && ct_node_fuse_relu(n, out) != CT_OK)) {
        tensor_free(out);
        return NULL;
    }
    if (n) *CT_NODE_PARAMS(n, LinearParams) = (LinearParams){rows, autocast};
    return ct_scope_adopt(out);
}

Tensor *tensor_linear(Tensor *x, Tensor *w, Tensor *b)
{
    return linear(x, w, b, false);
}

Tensor *tensor_linear_relu(Tensor *x, Tensor *w, Tensor *b)
{
    return linear(x, w, b, true);
}
