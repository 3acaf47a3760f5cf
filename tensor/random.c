/* Philox-4x32-10 generator, random tensors, randperm and dropout. */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "philox.h"

void ct_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    ct_philox_block(ctr[0], ctr[1], ctr[2], ctr[3], key[0], key[1], out);
}

CtGenerator ct_generator(uint64_t seed, uint64_t stream)
{
    CtGenerator g = {seed, stream, 0};
    return g;
}

/* 32-bit draws use one lane each (4 per block); f64 uniforms and all
 * normals use two lanes (2 per block). */
static int64_t blocks_for(CtRngKind kind, CtDType dt, int64_t n)
{
    int per = (kind == CT_RNG_NORMAL || dt == CT_F64) ? 2 : 4;
    return (n + per - 1) / per;
}

static Tensor *draw(const char *op, CtGenerator *g, int ndim, const int64_t *shape,
                    CtRngKind kind, double a, double b, CtDType dt, CtDevice dev)
{
    if (!g) {
        ct_error(CT_ERR_NULL, "%s: NULL generator", op);
        return NULL;
    }
    if (!ct_dtype_is_float(dt) && kind != CT_RNG_BERNOULLI) {
        ct_error(CT_ERR_DTYPE, "%s: needs a floating-point dtype, got %s", op,
                 ct_dtype_name(dt));
        return NULL;
    }
    Tensor *out = ct_tensor_new(ndim, shape, dt, dev);
    if (!out) return NULL;
    CtRngParams p = {kind, a, b, g->seed, g->stream, g->offset};
    CtOpCall c = {.op = CT_OP_RNG, .out = {out}, .params = &p};
    const CtBackend *be = ct_backend_peek(dev);
    if (!ct_dtype_is_float(dt) && be && !ct_backend_supports(be, &c)) {
        /* integer draws where the backend has only float ones (CUDA): the
         * f32 draw, which uses the same lanes and offsets, cast */
        ct_op_discard(out);
        CtScope *sc = ct_scope_open();
        Tensor *r = sc ? tensor_retain(tensor_cast(
                             draw(op, g, ndim, shape, kind, a, b, CT_F32, dev), dt))
                       : NULL;
        ct_scope_close(sc);
        return ct_scope_adopt(r);
    }
    if (ct_dispatch(&c) != CT_OK) return ct_op_discard(out);
    g->offset += (uint64_t)blocks_for(kind, dt, tensor_numel(out));
    return out;
}

Tensor *tensor_rand(CtGenerator *g, int ndim, const int64_t *shape, CtDType dt,
                    CtDevice dev)
{
    return draw("tensor_rand", g, ndim, shape, CT_RNG_UNIFORM, 0, 1, dt, dev);
}

Tensor *tensor_uniform(CtGenerator *g, int ndim, const int64_t *shape, double low,
                       double high, CtDType dt, CtDevice dev)
{
    if (!(low <= high)) {
        ct_error(CT_ERR_INVALID, "tensor_uniform: low %g > high %g", low, high);
        return NULL;
    }
    return draw("tensor_uniform", g, ndim, shape, CT_RNG_UNIFORM, low, high, dt, dev);
}

Tensor *tensor_normal(CtGenerator *g, int ndim, const int64_t *shape, double mean,
                      double std, CtDType dt, CtDevice dev)
{
    if (!(std >= 0)) {
        ct_error(CT_ERR_INVALID, "tensor_normal: std must be >= 0, got %g", std);
        return NULL;
    }
    return draw("tensor_normal", g, ndim, shape, CT_RNG_NORMAL, mean, std, dt, dev);
}

Tensor *tensor_bernoulli(CtGenerator *g, int ndim, const int64_t *shape, double p,
                         CtDType dt, CtDevice dev)
{
    if (!(p >= 0 && p <= 1)) {
        ct_error(CT_ERR_INVALID, "tensor_bernoulli: p must be in [0, 1], got %g", p);
        return NULL;
    }
    return draw("tensor_bernoulli", g, ndim, shape, CT_RNG_BERNOULLI, p, 1, dt, dev);
}

/* Uniform integer in [0, bound) from a 64-bit draw (Lemire's multiply-shift;
 * the bias is below 2^-40 for the sizes a dataset has). */
__extension__ typedef unsigned __int128 u128;
static uint64_t below(uint64_t r, uint64_t bound)
{
    return (uint64_t)(((u128)r * bound) >> 64);
}

CtStatus ct_randperm(CtGenerator *g, int64_t n, int64_t *out)
{
    if (!g || !out) return ct_error(CT_ERR_NULL, "ct_randperm: NULL argument");
    if (n < 0)
        return ct_error(CT_ERR_INVALID, "ct_randperm: negative n %lld", (long long)n);
    for (int64_t i = 0; i < n; i++) out[i] = i;
    uint32_t key[2] = {(uint32_t)g->seed, (uint32_t)(g->seed >> 32)};
    /* Fisher-Yates from the back; two 64-bit draws per Philox block */
    uint32_t blk[4];
    for (int64_t i = n - 1, k = 0; i > 0; i--, k++) {
        if ((k & 1) == 0) {
            uint64_t ctr64 = g->offset + (uint64_t)(k / 2);
            uint32_t ctr[4] = {(uint32_t)ctr64, (uint32_t)(ctr64 >> 32),
                               (uint32_t)g->stream, (uint32_t)(g->stream >> 32)};
            ct_philox4x32_10(ctr, key, blk);
        }
        uint64_t r = (k & 1) ? ((uint64_t)blk[2] << 32 | blk[3])
                             : ((uint64_t)blk[0] << 32 | blk[1]);
        int64_t j = (int64_t)below(r, (uint64_t)i + 1);
        int64_t t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
    g->offset += (uint64_t)(n / 2 + 1);
    return CT_OK;
}

/* out <- x * the Bernoulli draw of rp (one RNG call with an input); x
 * contiguous. NULL on error. */
static Tensor *dropout_apply(const Tensor *x, const CtRngParams *rp)
{
    Tensor *out = ct_tensor_new(x->ndim, x->shape, x->dtype, x->storage->device);
    if (!out) return NULL;
    CtOpCall c = {.op = CT_OP_RNG, .out = {out}, .in = {x}, .params = rp};
    return ct_dispatch(&c) == CT_OK ? out : ct_op_discard(out);
}

/* d(x * mask) = g * mask: the same draw, from the params the forward
 * used, applied to g. */
static CtStatus dropout_backward(CtNode *n, Tensor *g, Tensor **gin)
{
    Tensor *gc = ct_contiguous_ref(g);
    if (!gc) return ct_last_status();
    gin[0] = dropout_apply(gc, CT_NODE_PARAMS(n, CtRngParams));
    tensor_free(gc);
    return gin[0] ? CT_OK : ct_last_status();
}

/* Whether x's backend runs dropout as one RNG call with an input. */
static bool dropout_fused(const Tensor *x, const CtRngParams *rp)
{
    const CtBackend *be = ct_backend_peek(x->storage->device);
    if (!be || !ct_dtype_is_float(x->dtype)) return false;
    CtOpCall c = {.op = CT_OP_RNG, .out = {(Tensor *)x}, .in = {x}, .params = rp};
    return ct_backend_supports(be, &c);
}

Tensor *tensor_dropout(Tensor *x, double p, bool training, CtGenerator *g)
{
    if (!x) return NULL;
    if (!(p >= 0 && p <= 1)) {
        ct_error(CT_ERR_INVALID, "dropout: p must be in [0, 1], got %g", p);
        return NULL;
    }
    if (!training || p == 0) return tensor_contiguous(x);
    if (!g) {
        ct_error(CT_ERR_NULL, "dropout: NULL generator");
        return NULL;
    }
    /* the mask: 1/(1-p) with probability 1-p, else 0, in x's dtype */
    double scale = p == 1 ? 0.0 : 1.0 / (1.0 - p);
    CtRngParams rp = {CT_RNG_BERNOULLI, 1 - p, scale, g->seed, g->stream, g->offset};
    Tensor *xc = ct_contiguous_ref(x);
    if (!xc) return NULL;
    if (!dropout_fused(xc, &rp)) { /* the mask as a tensor, then a product */
        tensor_free(xc);
        CtScope *s = ct_scope_open(); /* the node keeps the mask's reference */
        if (!s) return NULL;
        Tensor *mask = draw("dropout", g, x->ndim, x->shape, CT_RNG_BERNOULLI, 1 - p,
                            scale, x->dtype, x->storage->device);
        Tensor *y = tensor_retain(tensor_mul(x, mask));
        ct_scope_close(s);
        return ct_scope_adopt(y);
    }
    /* one pass, no mask tensor: backward draws the same mask again */
    Tensor *y = dropout_apply(xc, &rp);
    tensor_free(xc);
    CtNode *n;
    if (!y || ct_node_new(y, "dropout", dropout_backward, 1, &x, &n) != CT_OK)
        return y ? ct_op_discard(y) : NULL;
    if (n) *CT_NODE_PARAMS(n, CtRngParams) = rp;
    g->offset += (uint64_t)blocks_for(CT_RNG_BERNOULLI, x->dtype, tensor_numel(x));
    return y;
}
