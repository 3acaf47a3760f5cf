/* Normalisation kernels: BATCH_NORM(_BWD) parallel over channels,
 * LAYER_NORM(_BWD) parallel over rows. Operands are contiguous (see
 * tensor/norm.h); sums accumulate in double. */
#include <math.h>
#include <stdlib.h>

#include "../norm.h"
#include "cpu.h"

/* Row sums with 8 independent accumulators, so the loop vectorises without
 * reassociating one long dependency chain. */
#define LANES 8

#define T   float
#define SFX f32
#include "norm_tmpl.h"

#define T   double
#define SFX f64
#include "norm_tmpl.h"

/* ------------------------------------------------------------ batch norm */

#define PTR(t)  ((t) ? ct_ptr(t) : NULL)
#define STR0(t) ((t) ? (t)->stride[0] : 0)

static CtStatus cpu_batch_norm(const CtOpCall *c)
{
    const CtBatchNormParams *p = c->params;
    Tensor *const *o = c->out;
    if (c->in[0]->dtype == CT_F32)
        bn_fwd_f32(p, ct_ptr(c->in[0]), PTR(c->in[1]), PTR(c->in[2]), ct_ptr(o[0]),
                   ct_ptr(o[1]), PTR(o[2]), STR0(o[2]), PTR(o[3]), STR0(o[3]));
    else
        bn_fwd_f64(p, ct_ptr(c->in[0]), PTR(c->in[1]), PTR(c->in[2]), ct_ptr(o[0]),
                   ct_ptr(o[1]), PTR(o[2]), STR0(o[2]), PTR(o[3]), STR0(o[3]));
    return CT_OK;
}

static CtStatus cpu_batch_norm_bwd(const CtOpCall *c)
{
    const CtBatchNormParams *p = c->params;
    Tensor *const *o = c->out;
    if (c->in[0]->dtype == CT_F32)
        bn_bwd_f32(p, ct_ptr(c->in[0]), ct_ptr(c->in[1]), PTR(c->in[2]), ct_ptr(c->in[3]),
                   PTR(o[0]), PTR(o[1]), PTR(o[2]));
    else
        bn_bwd_f64(p, ct_ptr(c->in[0]), ct_ptr(c->in[1]), PTR(c->in[2]), ct_ptr(c->in[3]),
                   PTR(o[0]), PTR(o[1]), PTR(o[2]));
    return CT_OK;
}

/* ------------------------------------------------------------ layer norm */

static CtStatus cpu_layer_norm(const CtOpCall *c)
{
    const CtLayerNormParams *p = c->params;
    if (c->in[0]->dtype == CT_F32)
        ln_fwd_f32(p, ct_ptr(c->in[0]), PTR(c->in[1]), PTR(c->in[2]), ct_ptr(c->out[0]),
                   ct_ptr(c->out[1]));
    else
        ln_fwd_f64(p, ct_ptr(c->in[0]), PTR(c->in[1]), PTR(c->in[2]), ct_ptr(c->out[0]),
                   ct_ptr(c->out[1]));
    return CT_OK;
}

static CtStatus cpu_layer_norm_bwd(const CtOpCall *c)
{
    const CtLayerNormParams *p = c->params;
    Tensor *dx = c->out[0], *dw = c->out[1], *db = c->out[2];
    int64_t nblk = (p->rows + CT_LN_ROW_BLOCK - 1) / CT_LN_ROW_BLOCK;
    if (nblk > CT_LN_MAX_BLOCKS) nblk = CT_LN_MAX_BLOCKS;
    if (nblk < 1) nblk = 1;
    int64_t blk = (p->rows + nblk - 1) / nblk;
    double *part = NULL;
    if (dw || db) {
        part = ct_malloc((size_t)(nblk * 2 * p->d) * sizeof *part + 1);
        if (!part) return ct_error(CT_ERR_OOM, "layer_norm_backward: out of memory");
    }
    if (c->in[0]->dtype == CT_F32) {
        ln_bwd_f32(p, ct_ptr(c->in[0]), ct_ptr(c->in[1]), PTR(c->in[2]), ct_ptr(c->in[3]),
                   PTR(dx), part, nblk, blk);
        if (part) ln_reduce_f32(part, nblk, p->d, PTR(dw), PTR(db));
    } else {
        ln_bwd_f64(p, ct_ptr(c->in[0]), ct_ptr(c->in[1]), PTR(c->in[2]), ct_ptr(c->in[3]),
                   PTR(dx), part, nblk, blk);
        if (part) ln_reduce_f64(part, nblk, p->d, PTR(dw), PTR(db));
    }
    free(part);
    return CT_OK;
}

/* f32 and f64 only (every float operand has x's dtype). */
static bool float_input(const CtOpCall *c)
{
    return c->in[0]->dtype == CT_F32 || c->in[0]->dtype == CT_F64;
}

/* As float_input, on contiguous data (not channels last). */
static bool float_nchw(const CtOpCall *c)
{
    return float_input(c) && !((const CtBatchNormParams *)c->params)->nhwc;
}

void ct_cpu_register_norm(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_BATCH_NORM] = cpu_batch_norm;
    k[CT_OP_BATCH_NORM_BWD] = cpu_batch_norm_bwd;
    k[CT_OP_LAYER_NORM] = cpu_layer_norm;
    k[CT_OP_LAYER_NORM_BWD] = cpu_layer_norm_bwd;
    s[CT_OP_BATCH_NORM] = float_nchw;
    s[CT_OP_BATCH_NORM_BWD] = float_nchw;
    s[CT_OP_LAYER_NORM] = float_input;
    s[CT_OP_LAYER_NORM_BWD] = float_input;
}
