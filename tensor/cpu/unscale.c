/* UNSCALE: the loss scaler's one pass over a gradient block. */
#include <math.h>

#include "cpu.h"

static bool unscale_supports(const CtOpCall *c)
{
    return c->out[0]->dtype == CT_F32 && c->out[1]->dtype == CT_F32 &&
           tensor_is_contiguous(c->out[0]);
}

static CtStatus unscale_kernel(const CtOpCall *c)
{
    const CtUnscaleParams *p = c->params;
    float *g = ct_ptr(c->out[0]);
    const float inv = (float)p->inv_scale;
    const int64_t n = tensor_numel(c->out[0]);
    int bad = 0;
    /* branch-free: the loop vectorizes; a non-finite x gives a non-finite
     * x - x (NaN), a finite one 0 */
#pragma omp parallel for reduction(| : bad) schedule(static) if (n >= CT_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float x = g[i];
        bad |= (x - x) != 0.0f;
        g[i] = x * inv;
    }
    if (bad) *(float *)ct_ptr(c->out[1]) = 1.0f;
    return CT_OK;
}

void ct_cpu_register_unscale(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_UNSCALE] = unscale_kernel;
    s[CT_OP_UNSCALE] = unscale_supports;
}
