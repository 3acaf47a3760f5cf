/* Private to tensor/cuda: thread bodies of batch norm in eval mode
 * (bnorm.cu), where the statistics are the running ones and cuDNN's
 * training kernels do not apply. Each follows the CPU kernel's formula
 * (tensor/cpu/norm_tmpl.h) in the same precision per element: stats match
 * it bit for bit, y and dx within one rounding (whether a compiler fuses
 * the multiply-add); dweight and dbias sum each channel in row order in
 * double, within rounding of the CPU's sums. x, y, g, dx:
 * (n, c, inner) contiguous, or with `nhwc` channels last (stored (n,
 * inner, c)), of dtype DT (storage S); w, b: (c) or NULL;
 * stats: (2, c), of type P: DT's compute type (f32 for bf16 and f16, which
 * compute in f32 and round each result once, dtype_hd.h). */
#ifndef CTRAINER_TENSOR_CUDA_BNORM_BODY_H
#define CTRAINER_TENSOR_CUDA_BNORM_BODY_H

#include <math.h>

#include "dtype_hd.h"

/* The channel of element i of an (n, c, k) operand. */
CT_HD int64_t ct_bn_channel(int64_t i, int64_t C, int64_t K, bool nhwc)
{
    return nhwc ? i % C : (i / K) % C;
}

/* stats[0][c] = running mean, stats[1][c] = 1 / sqrt(running var + eps);
 * one item per channel. */
template <typename T>
CT_HD void ct_bn_eval_stats_body(CtThread t, int64_t C, double eps, const T *rm,
                                 const T *rv, T *stats)
{
    CT_THREAD_FOR(c, t, C)
    {
        stats[c] = rm[c];
        stats[C + c] = (T)(1.0 / sqrt((double)rv[c] + eps));
    }
}

/* y = x * scale + shift with scale = invstd * w and shift = b - mean *
 * scale, rounded to T as the CPU does; one item per element. */
template <int DT, typename P = typename CtHdType<DT>::C,
          typename S = typename CtHdType<DT>::S>
CT_HD void ct_bn_eval_fwd_body(CtThread t, int64_t N, int64_t C, int64_t K, const S *x,
                               const P *w, const P *b, const P *stats, S *y,
                               bool nhwc = false)
{
    typedef CtHdType<DT> V;
    typedef typename V::C T;
    CT_THREAD_FOR(i, t, N * C * K)
    {
        int64_t c = ct_bn_channel(i, C, K, nhwc);
        double sc = (double)stats[C + c] * (w ? (double)w[c] : 1.0);
        T scale = (T)sc, shift = (T)((b ? (double)b[c] : 0.0) - (double)stats[c] * sc);
        y[i] = V::store(V::load(x[i]) * scale + shift);
    }
}

/* dx = a * g with a = invstd * w (the CPU's a*g + 0*x + 0); one item per
 * element. */
template <int DT, typename P = typename CtHdType<DT>::C,
          typename S = typename CtHdType<DT>::S>
CT_HD void ct_bn_eval_dx_body(CtThread t, int64_t N, int64_t C, int64_t K, const S *g,
                              const S *x, const P *w, const P *stats, S *dx,
                              bool nhwc = false)
{
    typedef CtHdType<DT> V;
    typedef typename V::C T;
    CT_THREAD_FOR(i, t, N * C * K)
    {
        int64_t c = ct_bn_channel(i, C, K, nhwc);
        T a = (T)((double)stats[C + c] * (w ? (double)w[c] : 1.0)), zero = 0;
        dx[i] = V::store(a * V::load(g[i]) + zero * V::load(x[i]) + zero);
    }
}

/* db = sum g, dw = invstd * sum g * (x - mean) per channel (either NULL);
 * one item per channel. */
template <int DT, typename P = typename CtHdType<DT>::C,
          typename S = typename CtHdType<DT>::S>
CT_HD void ct_bn_eval_dparams_body(CtThread t, int64_t N, int64_t C, int64_t K,
                                   const S *g, const S *x, const P *stats, P *dw, P *db,
                                   bool nhwc = false)
{
    typedef CtHdType<DT> V;
    CT_THREAD_FOR(c, t, C)
    {
        double mean = (double)stats[c], sg = 0, sgx = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < K; k++) {
                int64_t i = nhwc ? (n * K + k) * C + c : (n * C + c) * K + k;
                double gi = (double)V::load(g[i]);
                sg += gi;
                sgx += gi * ((double)V::load(x[i]) - mean);
            }
        if (db) db[c] = (P)sg;
        if (dw) dw[c] = (P)(sgx * (double)stats[C + c]);
    }
}

#endif
