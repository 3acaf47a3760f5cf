/* Private to tensor/cuda: the thread body of UNSCALE (unscale.cu), shared
 * with the host harness (hd.h). Semantics of tensor/cpu/unscale.c. */
#ifndef CTRAINER_TENSOR_CUDA_UNSCALE_BODY_H
#define CTRAINER_TENSOR_CUDA_UNSCALE_BODY_H

#include <math.h>

#include "hd.h"

/* g[0..n) *= inv in place; *flag <- 1 when a thread saw an inf or NaN, else
 * left as is. Every writer stores the same value, so the flag needs no
 * atomic. */
CT_HD void ct_unscale_thread(CtThread t, float *g, float *flag, float inv, int64_t n)
{
    bool bad = false;
    CT_THREAD_FOR(i, t, n)
    {
        float x = g[i];
        bad |= !isfinite(x);
        g[i] = x * inv;
    }
    if (bad) *flag = 1.0f;
}

#endif
