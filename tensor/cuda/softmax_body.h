/* Private to tensor/cuda: the thread bodies of SOFTMAX(_BWD) and
 * CROSS_ENTROPY(_BWD) (softmax.cu), shared with the host harness (hd.h).
 * Params and semantics: tensor/softmax.h; operands are contiguous.
 *
 * One thread normalises one run (a (outer, inner) position: n elements at
 * stride inner) or handles one cross-entropy position, and sums in the
 * order of tensor/cpu/softmax.c: a unit-stride run in CT_SM_LANES
 * interleaved partial sums (the tail first, then the lanes in order), a
 * strided run element by element. The results therefore match the CPU
 * backend bit for bit wherever exp and log do (the host harness, which
 * uses the same libm). */
#ifndef CTRAINER_TENSOR_CUDA_SOFTMAX_BODY_H
#define CTRAINER_TENSOR_CUDA_SOFTMAX_BODY_H

#include <math.h>

#include "../softmax.h"
#include "lanes.h"
#include "range_body.h"
#include "reduce_body.h"

/* The partial sums of a unit-stride run (LANES in tensor/cpu/softmax.c). */
#define CT_SM_LANES 16

CT_HD float ct_sm_exp(float x)
{
    return expf(x);
}
CT_HD double ct_sm_exp(double x)
{
    return exp(x);
}
CT_HD float ct_sm_log(float x)
{
    return logf(x);
}
CT_HD double ct_sm_log(double x)
{
    return log(x);
}

/* max_i x[i * s] */
template <typename T> CT_HD T ct_sm_max(const T *x, int64_t n, int64_t s)
{
    T m = -INFINITY;
    int64_t i = 0;
    if (s == 1) {
        T lane[CT_SM_LANES];
        for (int j = 0; j < CT_SM_LANES; j++) lane[j] = -INFINITY;
        for (; i + CT_SM_LANES <= n; i += CT_SM_LANES)
            for (int j = 0; j < CT_SM_LANES; j++)
                lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
        for (int64_t k = i; k < n; k++) m = x[k] > m ? x[k] : m;
        for (int j = 0; j < CT_SM_LANES; j++) m = lane[j] > m ? lane[j] : m;
        return m;
    }
    for (; i < n; i++) m = x[i * s] > m ? x[i * s] : m;
    return m;
}

/* sum_i f(i) over n terms: in CT_SM_LANES lanes (lanes.h) when unit is
 * set, else in order. */
template <typename T, typename F> CT_HD T ct_sm_sum(int64_t n, bool unit, F f)
{
    if (unit) return ct_lane_sum<T, CT_SM_LANES>(n, f);
    T s = 0;
    for (int64_t i = 0; i < n; i++) s += f(i);
    return s;
}

/* Of x[k * s], k < c: *m <- the max, and log sum_k exp(x_k - m) returned
 * (log-sum-exp less m, so that x_k - m - it keeps its bits when m is
 * large) */
template <typename T> CT_HD T ct_sm_log_sum(const T *x, int64_t c, int64_t s, T *m)
{
    T mx = ct_sm_max(x, c, s);
    *m = mx;
    return ct_sm_log(
        ct_sm_sum<T>(c, s == 1, [&](int64_t k) { return ct_sm_exp(x[k * s] - mx); }));
}

/* One run of n elements at stride s: y <- softmax(x) or log_softmax(x). */
template <typename T>
CT_HD void ct_softmax_run(const T *x, T *y, int64_t n, int64_t s, bool log_out)
{
    if (log_out) {
        T m, ls = ct_sm_log_sum(x, n, s, &m);
        for (int64_t i = 0; i < n; i++) y[i * s] = (x[i * s] - m) - ls;
        return;
    }
    T m = ct_sm_max(x, n, s);
    for (int64_t i = 0; i < n; i++) y[i * s] = ct_sm_exp(x[i * s] - m);
    T inv = 1 / ct_sm_sum<T>(n, s == 1, [&](int64_t i) { return y[i * s]; });
    for (int64_t i = 0; i < n; i++) y[i * s] *= inv;
}

/* One run of the backward: gx from the forward's output y and its
 * gradient g. */
template <typename T>
CT_HD void ct_softmax_bwd_run(const T *y, const T *g, T *gx, int64_t n, int64_t s,
                              bool log_out)
{
    if (log_out) {
        T sum = ct_sm_sum<T>(n, s == 1, [&](int64_t i) { return g[i * s]; });
        for (int64_t i = 0; i < n; i++) gx[i * s] = g[i * s] - ct_sm_exp(y[i * s]) * sum;
        return;
    }
    T sum = ct_sm_sum<T>(n, s == 1, [&](int64_t i) { return g[i * s] * y[i * s]; });
    for (int64_t i = 0; i < n; i++) gx[i * s] = y[i * s] * (g[i * s] - sum);
}

/* SOFTMAX (g NULL: x is the input) or SOFTMAX_BWD (x is the forward's
 * output, g its gradient); one thread per run, outer * inner runs. */
template <typename T>
CT_HD void ct_softmax_thread(CtThread t, const CtSoftmaxParams &p, const T *x, const T *g,
                             T *y)
{
    CT_THREAD_FOR(r, t, p.outer * p.inner)
    {
        int64_t o = r / p.inner * p.n * p.inner + r % p.inner;
        if (g)
            ct_softmax_bwd_run(x + o, g + o, y + o, p.n, p.inner, p.log);
        else
            ct_softmax_run(x + o, y + o, p.n, p.inner, p.log);
    }
}

/* W = sum_k w_k (c when there are no weights) */
template <typename T> CT_HD T ct_ce_weight_sum(const T *w, int64_t c)
{
    return w ? ct_sm_sum<T>(c, true, [&](int64_t k) { return w[k]; }) : (T)c;
}

/* CROSS_ENTROPY: loss (n * inner positions) and, when wout is given, the
 * weight of each position's target. A target that is neither a class nor
 * ignored gives a NaN loss and lowers *first_bad (when given) to its
 * position, as a range check (range_body.h) does. */
template <typename T>
CT_HD void ct_ce_fwd_thread(CtThread t, const CtCrossEntropyParams &p, const T *x,
                            const int64_t *tg, const T *w, T *loss, T *wout,
                            unsigned long long *first_bad)
{
    const int64_t c = p.c, inner = p.inner;
    const T eps = p.log_input ? 0 : (T)p.label_smoothing;
    CT_THREAD_FOR(i, t, p.n * inner)
    {
        int64_t tk = tg[i];
        if (p.use_ignore_index && tk == p.ignore_index) {
            loss[i] = 0;
            if (wout) wout[i] = 0;
            continue;
        }
        if (tk < 0 || tk >= c) { /* reported through first_bad (range.cuh) */
            if (first_bad) ct_atomic_min_u64(first_bad, (unsigned long long)i);
            loss[i] = (T)NAN;
            if (wout) wout[i] = 0;
            continue;
        }
        const T *xr = x + i / inner * c * inner + i % inner;
        T wt = w ? w[tk] : (T)1;
        if (wout) wout[i] = wt;
        if (p.log_input) {
            loss[i] = -wt * xr[tk * inner];
            continue;
        }
        T m, ls = ct_sm_log_sum(xr, c, inner, &m);
        T l = (1 - eps) * wt * (ls - (xr[tk * inner] - m));
        if (eps > 0) {
            /* sum_k w_k (ls - (x_k - m)) = ls W - sum_k w_k (x_k - m) */
            T wx = ct_sm_sum<T>(c, inner == 1, [&](int64_t k) {
                return w ? (xr[k * inner] - m) * w[k] : xr[k * inner] - m;
            });
            l += eps / (T)c * (ls * ct_ce_weight_sum(w, c) - wx);
        }
        loss[i] = l;
    }
}

/* Positions up to which CROSS_ENTROPY folds its sum into the kernel: the
 * runs a REDUCE sums in one thread, in order (reduce_body.h). */
#define CT_CE_FOLD_MAX (2 * CT_REDUCE_SPLIT_LEN - 1)

/* CROSS_ENTROPY's fold (one thread, after every position's loss is in):
 * out <- the sum of loss in double, rounded to T, as a REDUCE's thread
 * does; for a mean (wout given), den <- the sum of wout the same way and
 * out <- out / den in T, as a division op does. */
template <typename T>
CT_HD void ct_ce_fold(int64_t np, const T *loss, const T *wout, T *out, T *den)
{
    double s = 0;
    for (int64_t i = 0; i < np; i++) s += (double)loss[i];
    T r = (T)s;
    if (wout) {
        double d = 0;
        for (int64_t i = 0; i < np; i++) d += (double)wout[i];
        *den = (T)d;
        r = r / *den;
    }
    *out = r;
}

/* CROSS_ENTROPY_BWD: gx (n, c, inner) from the loss gradient go (n, inner);
 * one thread per position writes that position's c elements. */
template <typename T>
CT_HD void ct_ce_bwd_thread(CtThread t, const CtCrossEntropyParams &p, const T *x,
                            const int64_t *tg, const T *w, const T *go, const T *div,
                            T *gx)
{
    const int64_t c = p.c, inner = p.inner;
    const T eps = p.log_input ? 0 : (T)p.label_smoothing;
    CT_THREAD_FOR(i, t, p.n * inner)
    {
        int64_t tk = tg[i], base = i / inner * c * inner + i % inner;
        const T *xr = x + base;
        T *gr = gx + base;
        /* ignored, or (the forward checked them, the backward does not)
         * outside the classes: no gradient, and no read out of bounds */
        if ((p.use_ignore_index && tk == p.ignore_index) || tk < 0 || tk >= c) {
            for (int64_t k = 0; k < c; k++) gr[k * inner] = 0;
            continue;
        }
        T g = p.go_scalar ? go[0] : go[i], wt = w ? w[tk] : (T)1;
        if (div) g = g / div[0];
        if (p.log_input) {
            for (int64_t k = 0; k < c; k++) gr[k * inner] = 0;
            gr[tk * inner] = -g * wt;
            continue;
        }
        /* d loss / d x_k = p_k ((1-e) w_t + e W / c) - (1-e) w_t [k == t] - e w_k / c */
        T m, ls = ct_sm_log_sum(xr, c, inner, &m);
        T a = g * ((1 - eps) * wt + eps * ct_ce_weight_sum(w, c) / (T)c),
          b = g * eps / (T)c;
        for (int64_t k = 0; k < c; k++)
            gr[k * inner] =
                ct_sm_exp((xr[k * inner] - m) - ls) * a - b * (w ? w[k] : (T)1);
        gr[tk * inner] -= g * (1 - eps) * wt;
    }
}

#endif
