/* Private to tensor/cuda: thread bodies of POOL2D and POOL2D_BWD (pool.cu),
 * f32, f64, bf16 and f16, over contiguous NCHW operands (tensor/conv.h).
 * bf16 and f16 compute in f32 and round each result once (dtype_hd.h), so
 * they match the CPU's f32 kernel on the widened input, rounded.
 *
 * The forward gives each thread one output element and walks its window
 * (ct_pool_window, shared with the CPU kernels) in the CPU's order, so y
 * and the argmax match the CPU bit for bit: max takes the first maximum, a
 * NaN wins at the first NaN; average sums in row order and divides once.
 * The backward gathers instead of scattering: each thread owns one input
 * element and adds the gradients of the outputs whose window holds it (for
 * max: whose argmax it is), in increasing output order, which is the order
 * the CPU's scatter adds them in. No atomics, so it is deterministic and
 * matches the CPU bit for bit.
 *
 * With CtPool2dParams.nhwc every operand is channels last: a thread's
 * linear index runs over (n, oh, ow, c) (forward) or (n, ih, iw, c)
 * (backward), so neighbouring threads read neighbouring channels, and a
 * pixel of a plane is C elements from the next. The argmax is the same
 * index into the H*W plane, stored in y's layout.
 *
 * Splitting a thread's linear index into coordinates and finding an
 * input's candidate outputs divide by the plane sizes and the strides: by
 * multiply-shift (fastdiv.h, CtPoolDivs) when every index fits in 31 bits,
 * which was most of the backward's time with 64-bit divisions. */
#ifndef CTRAINER_TENSOR_CUDA_POOL_BODY_H
#define CTRAINER_TENSOR_CUDA_POOL_BODY_H

#include "../conv.h"
#include "dtype_hd.h"
#include "fastdiv.h"

/* The divisors of one launch's index arithmetic (ct_pool_divs). */
typedef struct CtPoolDivs {
    CtFastDiv w, h, ow, oh, sh, sw, c;
    bool fast; /* every index and divisor below 2^31: multiply-shift */
} CtPoolDivs;

static inline CtPoolDivs ct_pool_divs(const CtPool2dParams *p)
{
    CtPoolDivs d;
    d.w = ct_fastdiv_make(p->w > 0 ? p->w : 1);
    d.h = ct_fastdiv_make(p->h > 0 ? p->h : 1);
    d.ow = ct_fastdiv_make(p->ow > 0 ? p->ow : 1);
    d.oh = ct_fastdiv_make(p->oh > 0 ? p->oh : 1);
    d.sh = ct_fastdiv_make(p->sh > 0 ? p->sh : 1); /* adaptive: unused */
    d.sw = ct_fastdiv_make(p->sw > 0 ? p->sw : 1);
    d.c = ct_fastdiv_make(p->c > 0 ? p->c : 1);
    const int64_t lim = (int64_t)1 << 31;
    d.fast = p->n * p->c * p->h * p->w < lim && p->n * p->c * p->oh * p->ow < lim &&
             p->h + p->ph + p->sh < lim && p->w + p->pw + p->sw < lim;
    return d;
}

/* Where one (n, c) plane of an operand lies: pixel k of the plane is
 * element base + k * ps (ps = 1 for NCHW, C for channels last). */
typedef struct CtPoolPlane {
    int64_t base, ps;
} CtPoolPlane;

/* Splits thread index i over an operand of (rows, cols) pixels per plane
 * (dh, dw their divisors), laid out as p says, into its pixel (*a, *b) and
 * where the same (n, c) plane lies in the other operand, of `other`
 * pixels per plane. NCHW: i = (q * rows + a) * cols + b with plane
 * q = n * C + c; channels last: i = ((n * rows + a) * cols + b) * C + c. */
CT_HD void ct_pool_split(const CtPool2dParams &p, const CtPoolDivs &dv, int64_t i,
                         const CtFastDiv &dh, const CtFastDiv &dw, int64_t other,
                         int64_t *a, int64_t *b, CtPoolPlane *pl)
{
    const int64_t rows = dh.d, cols = dw.d;
    if (p.nhwc) {
        int64_t r = ct_fastdiv(i, dv.c, dv.fast), s = ct_fastdiv(r, dw, dv.fast);
        int64_t n = ct_fastdiv(s, dh, dv.fast);
        *b = r - s * cols, *a = s - n * rows;
        pl->base = n * other * p.c + (i - r * p.c), pl->ps = p.c;
    } else {
        int64_t r = ct_fastdiv(i, dw, dv.fast), q = ct_fastdiv(r, dh, dv.fast);
        *b = i - r * cols, *a = r - q * rows;
        pl->base = q * other, pl->ps = 1;
    }
}

/* One output element, (oh, ow) of the plane at x + xs (pixel stride xs.ps),
 * stored at y[o] (and idx[o]); elements of dtype DT (storage S, computed
 * in T). */
template <int DT, typename S = typename CtHdType<DT>::S>
CT_HD void ct_pool_out(const CtPool2dParams &p, const S *x, CtPoolPlane xs, int64_t oh,
                       int64_t ow, int64_t o, S *y, int64_t *idx)
{
    typedef CtHdType<DT> V;
    typedef typename V::C T;
    CtPoolWindow r = ct_pool_window(&p, oh, ow);
    const S *xp = x + xs.base;
    const int64_t ps = xs.ps;
    if (p.kind != CT_POOL_MAX) {
        T s = 0;
        for (int64_t ih = r.h0; ih < r.h1; ih++)
            for (int64_t iw = r.w0; iw < r.w1; iw++)
                s += V::load(xp[(ih * p.w + iw) * ps]);
        y[o] = V::store(r.div ? s / (T)r.div : (T)0);
        return;
    }
    int64_t best = r.h0 * p.w + r.w0;
    T m = -(T)INFINITY;
    bool nan = false;
    for (int64_t ih = r.h0; ih < r.h1 && !nan; ih++)
        for (int64_t iw = r.w0; iw < r.w1 && !nan; iw++) {
            T v = V::load(xp[(ih * p.w + iw) * ps]);
            nan = v != v;
            if (v > m || nan) {
                m = v;
                best = ih * p.w + iw;
            }
        }
    y[o] = V::store(m);
    if (idx) idx[o] = best;
}

template <int DT, typename S = typename CtHdType<DT>::S>
CT_HD void ct_pool_fwd_body(CtThread t, const CtPool2dParams &p, const CtPoolDivs &dv,
                            const S *x, S *y, int64_t *idx)
{
    CT_THREAD_FOR(i, t, p.n * p.c * p.oh * p.ow)
    {
        int64_t oh, ow;
        CtPoolPlane xs;
        ct_pool_split(p, dv, i, dv.oh, dv.ow, p.h * p.w, &oh, &ow, &xs);
        ct_pool_out<DT>(p, x, xs, oh, ow, i, y, idx);
    }
}

/* The outputs along one dim whose window may hold input position `in`:
 * [*lo, *hi), for windows of k with stride s (its divisor) and padding
 * pad. Adaptive windows are checked one by one (every output). */
CT_HD void ct_pool_candidates(int64_t in, int64_t k, const CtFastDiv &s, int pad,
                              int64_t out, bool adaptive, bool fast, int64_t *lo,
                              int64_t *hi)
{
    if (adaptive) {
        *lo = 0, *hi = out;
        return;
    }
    int64_t first = in + pad - k + 1; /* o * s >= first */
    *lo = first <= 0 ? 0 : ct_fastdiv(first + s.d - 1, s, fast);
    int64_t last = ct_fastdiv(in + pad, s, fast) + 1;
    *hi = last < out ? last : out;
}

template <int DT, typename S = typename CtHdType<DT>::S>
CT_HD void ct_pool_bwd_body(CtThread t, const CtPool2dParams &p, const CtPoolDivs &dv,
                            const S *gy, const int64_t *idx, S *gx)
{
    typedef CtHdType<DT> V;
    typedef typename V::C T;
    bool adaptive = p.kind == CT_POOL_ADAPTIVE_AVG;
    CT_THREAD_FOR(i, t, p.n * p.c * p.h * p.w)
    {
        int64_t ih, iw;
        CtPoolPlane ys; /* where gy's plane lies */
        ct_pool_split(p, dv, i, dv.h, dv.w, p.oh * p.ow, &ih, &iw, &ys);
        int64_t e = ih * p.w + iw, h_lo, h_hi, w_lo, w_hi;
        ct_pool_candidates(ih, p.kh, dv.sh, p.ph, p.oh, adaptive, dv.fast, &h_lo, &h_hi);
        ct_pool_candidates(iw, p.kw, dv.sw, p.pw, p.ow, adaptive, dv.fast, &w_lo, &w_hi);
        T acc = 0;
        for (int64_t oh = h_lo; oh < h_hi; oh++)
            for (int64_t ow = w_lo; ow < w_hi; ow++) {
                int64_t o = ys.base + (oh * p.ow + ow) * ys.ps;
                if (p.kind == CT_POOL_MAX) {
                    if (idx[o] == e) acc += V::load(gy[o]);
                    continue;
                }
                CtPoolWindow r = ct_pool_window(&p, oh, ow);
                if (r.div && ih >= r.h0 && ih < r.h1 && iw >= r.w0 && iw < r.w1)
                    acc += V::load(gy[o]) / (T)r.div;
            }
        gx[i] = V::store(acc);
    }
}

#endif
