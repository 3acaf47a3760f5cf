/* SOFTMAX(_BWD) and CROSS_ENTROPY(_BWD) (see tensor/softmax.h).
 *
 * Softmax over the innermost dim reads each row with unit stride; over an
 * outer dim, up to TW neighbouring runs are normalised side by side so every
 * load stays contiguous. Cross-entropy handles one target position per
 * iteration, in parallel; its backward recomputes the log-sum-exp instead of
 * keeping it from the forward. */
#include <math.h>
#include <stdio.h>

#include "../softmax.h"
#include "cpu.h"

#define TW    64 /* runs normalised side by side when inner > 1 */
#define LANES 16 /* independent accumulators of a unit-stride run */

#define T   float
#define SFX f32
#define EXP expf
#define LOG logf
#include "softmax_tmpl.h"

#define T   double
#define SFX f64
#define EXP exp
#define LOG log
#include "softmax_tmpl.h"

static CtStatus cpu_softmax(const CtOpCall *c)
{
    const CtSoftmaxParams *p = c->params;
    const void *g = c->op == CT_OP_SOFTMAX_BWD ? ct_ptr(c->in[1]) : NULL;
    if (p->outer == 0 || p->n == 0 || p->inner == 0) return CT_OK; /* no elements */
    if (c->in[0]->dtype == CT_F32)
        softmax_f32(p, ct_ptr(c->in[0]), g, ct_ptr(c->out[0]));
    else
        softmax_f64(p, ct_ptr(c->in[0]), g, ct_ptr(c->out[0]));
    return CT_OK;
}

/* Every target is a class index or the ignored value; else an error naming
 * the first bad one and where it is. */
static CtStatus check_targets(const CtOpCall *c, const CtCrossEntropyParams *p)
{
    const Tensor *target = c->in[1];
    const int64_t *tg = ct_ptr(target), np = p->n * p->inner;
    for (int64_t i = 0; i < np; i++) {
        int64_t t = tg[i];
        if ((p->use_ignore_index && t == p->ignore_index) || (t >= 0 && t < p->c))
            continue;
        char at[160];
        size_t k = 0;
        int64_t rem = i, idx[CT_MAX_DIMS];
        for (int d = target->ndim - 1; d >= 0; d--) {
            idx[d] = rem % target->shape[d];
            rem /= target->shape[d];
        }
        for (int d = 0; d < target->ndim && k < sizeof at; d++)
            k += (size_t)snprintf(at + k, sizeof at - k, d ? ", %lld" : "%lld",
                                  (long long)idx[d]);
        return ct_error(CT_ERR_INVALID,
                        "%s: target %lld at index [%s] is out of range for %lld classes",
                        p->log_input ? "nll_loss" : "cross_entropy", (long long)t, at,
                        (long long)p->c);
    }
    return CT_OK;
}

/* out2 <- sum(out0), and for a mean (out1 given) out3 <- sum(out1) and
 * out2 <- out2 / out3: a REDUCE of each and a division op, bit for bit. */
static CtStatus fold(const CtOpCall *c, CtDType dt)
{
    int64_t np = tensor_numel(c->out[0]);
    void *sum = ct_ptr(c->out[2]);
    CtStatus st = ct_cpu_sum_contiguous(dt, ct_ptr(c->out[0]), np, sum);
    if (st != CT_OK || !c->out[1]) return st;
    void *den = ct_ptr(c->out[3]);
    st = ct_cpu_sum_contiguous(dt, ct_ptr(c->out[1]), np, den);
    if (st != CT_OK) return st;
    if (dt == CT_F32)
        *(float *)sum = *(const float *)sum / *(const float *)den;
    else
        *(double *)sum = *(const double *)sum / *(const double *)den;
    return CT_OK;
}

static CtStatus cpu_cross_entropy(const CtOpCall *c)
{
    const CtCrossEntropyParams *p = c->params;
    CtStatus st = check_targets(c, p);
    if (st != CT_OK) return st;
    const int64_t *tg = ct_ptr(c->in[1]);
    const void *w = c->in[2] ? ct_ptr(c->in[2]) : NULL;
    void *wo = c->out[1] ? ct_ptr(c->out[1]) : NULL;
    CtDType dt = c->in[0]->dtype;
    if (dt == CT_F32)
        ce_fwd_f32(p, ct_ptr(c->in[0]), tg, w, ct_ptr(c->out[0]), wo);
    else
        ce_fwd_f64(p, ct_ptr(c->in[0]), tg, w, ct_ptr(c->out[0]), wo);
    return p->fold ? fold(c, dt) : CT_OK;
}

static CtStatus cpu_cross_entropy_bwd(const CtOpCall *c)
{
    const CtCrossEntropyParams *p = c->params;
    CtStatus st = check_targets(c, p);
    if (st != CT_OK) return st;
    const int64_t *tg = ct_ptr(c->in[1]);
    const void *w = c->in[2] ? ct_ptr(c->in[2]) : NULL;
    const void *div = c->in[4] ? ct_ptr(c->in[4]) : NULL;
    if (c->in[0]->dtype == CT_F32)
        ce_bwd_f32(p, ct_ptr(c->in[0]), tg, w, ct_ptr(c->in[3]), div, ct_ptr(c->out[0]));
    else
        ce_bwd_f64(p, ct_ptr(c->in[0]), tg, w, ct_ptr(c->in[3]), div, ct_ptr(c->out[0]));
    return CT_OK;
}

static bool float_only(const CtOpCall *c)
{
    CtDType dt = c->in[0]->dtype;
    return dt == CT_F32 || dt == CT_F64;
}

void ct_cpu_register_softmax(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_SOFTMAX] = cpu_softmax;
    k[CT_OP_SOFTMAX_BWD] = cpu_softmax;
    k[CT_OP_CROSS_ENTROPY] = cpu_cross_entropy;
    k[CT_OP_CROSS_ENTROPY_BWD] = cpu_cross_entropy_bwd;
    for (int op = CT_OP_SOFTMAX; op <= CT_OP_CROSS_ENTROPY_BWD; op++) s[op] = float_only;
}
