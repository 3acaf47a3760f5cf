/* Private to tensor/cuda: the thread bodies of REDUCE and ARG_REDUCE
 * (reduce.cu), shared with the host harness (hd.h). Contracts in
 * ../reduce.h.
 *
 * One thread owns one output element and walks its whole reduced slice in
 * row-major order of the reduced dims (x's dim order), so every result is
 * deterministic and independent of the launch shape:
 *   - SUM and VAR accumulate in double, also for f32 (the CPU accumulates
 *     f32 in f32 lanes, so f32 results agree to rounding; exactly when every
 *     partial sum is exact). The result is (T)(sum * scale), as on the CPU.
 *     VAR's mean is sum * (1/n) rounded to T, then the squared deviations
 *     (x - mean)^2 are formed in T and summed in double.
 *   - MAX and MIN match the CPU bit for bit: the first extremum wins, a NaN
 *     beats everything (the first NaN), and the index is the flat position
 *     within the reduced dims; an empty slice gives -inf / +inf and index 0.
 * A slice is read by one thread, so a reduction with few outputs and long
 * slices (the sum of a whole tensor) runs on few threads. */
#ifndef CTRAINER_TENSOR_CUDA_REDUCE_BODY_H
#define CTRAINER_TENSOR_CUDA_REDUCE_BODY_H

#include <math.h>

#include "../reduce.h"
#include "hd.h"

/* Geometry of a reduction, passed to kernels by value: the kept dims (size,
 * strides in x, y and the index tensor) and the reduced dims (size, stride
 * in x), both in x's dim order, size-1 dims dropped and dims contiguous
 * with each other merged. */
typedef struct CtCudaReduce {
    int nk, nr;
    int64_t ks[CT_MAX_DIMS], kx[CT_MAX_DIMS], ky[CT_MAX_DIMS], ki[CT_MAX_DIMS];
    int64_t rs[CT_MAX_DIMS], rx[CT_MAX_DIMS];
    int64_t kn, rn; /* outputs; positions per output */
} CtCudaReduce;

/* Fills g for x and y (keepdim geometry) and the optional index tensor yi
 * (y geometry). Host code. */
static inline void ct_cuda_reduce_init(CtCudaReduce *g, const Tensor *x, const Tensor *y,
                                       const Tensor *yi)
{
    memset(g, 0, sizeof *g);
    for (int d = 0; d < x->ndim; d++) {
        int64_t n = x->shape[d], sx = x->stride[d];
        if (n == 1) continue;
        if (y->shape[d] == 1) {
            if (g->nr > 0 && g->rx[g->nr - 1] == sx * n) {
                g->rs[g->nr - 1] *= n;
                g->rx[g->nr - 1] = sx;
            } else {
                g->rs[g->nr] = n;
                g->rx[g->nr++] = sx;
            }
            continue;
        }
        int64_t sy = y->stride[d], si = yi ? yi->stride[d] : 0;
        int m = g->nk - 1;
        if (m >= 0 && g->kx[m] == sx * n && g->ky[m] == sy * n && g->ki[m] == si * n) {
            g->ks[m] *= n;
        } else {
            m = g->nk++;
            g->ks[m] = n;
        }
        g->kx[m] = sx;
        g->ky[m] = sy;
        g->ki[m] = si;
    }
    if (g->nk == 0) g->ks[g->nk++] = 1;
    if (g->nr == 0) g->rs[g->nr++] = 1;
    g->kn = g->rn = 1;
    for (int d = 0; d < g->nk; d++) g->kn *= g->ks[d];
    for (int d = 0; d < g->nr; d++) g->rn *= g->rs[d];
}

/* Offsets in x, y and the index tensor of output k (row-major over the
 * kept dims). */
CT_HD void ct_reduce_kept(const CtCudaReduce &g, int64_t k, int64_t *xo, int64_t *yo,
                          int64_t *io)
{
    *xo = *yo = *io = 0;
    for (int d = g.nk - 1; d >= 0; d--) {
        int64_t q = k / g.ks[d], i = k - q * g.ks[d];
        k = q;
        *xo += i * g.kx[d];
        *yo += i * g.ky[d];
        *io += i * g.ki[d];
    }
}

/* Steps the reduced-position counter cnt and its x offset to the next
 * position (an odometer over the reduced dims, the last fastest). */
CT_HD void ct_reduce_next(const CtCudaReduce &g, int64_t *cnt, int64_t *off)
{
    for (int d = g.nr - 1; d >= 0; d--) {
        *off += g.rx[d];
        if (++cnt[d] < g.rs[d]) return;
        *off -= g.rx[d] * g.rs[d];
        cnt[d] = 0;
    }
}

/* Sum over the slice at p of x (SQ false) or of (x - c)^2 formed in T (SQ
 * true), accumulated in double in slice order. */
template <typename T, bool SQ>
CT_HD double ct_reduce_sum(const CtCudaReduce &g, const T *p, T c)
{
    int64_t cnt[CT_MAX_DIMS] = {0}, off = 0;
    double acc = 0;
    for (int64_t r = 0; r < g.rn; r++) {
        if constexpr (SQ) {
            T d = p[off] - c;
            acc += (double)(d * d);
        } else {
            acc += (double)p[off];
        }
        ct_reduce_next(g, cnt, &off);
    }
    return acc;
}

/* The first maximum (MAX) or minimum of the slice at p, NaN first. */
template <typename T, int M>
CT_HD T ct_reduce_extremum(const CtCudaReduce &g, const T *p, int64_t *index)
{
    int64_t cnt[CT_MAX_DIMS] = {0}, off = 0, bi = 0;
    T b = M == CT_RED_MAX ? (T)-INFINITY : (T)INFINITY;
    for (int64_t r = 0; r < g.rn; r++) {
        T v = p[off];
        if ((M == CT_RED_MAX ? v > b : v < b) || (v != v && b == b)) b = v, bi = r;
        ct_reduce_next(g, cnt, &off);
    }
    *index = bi;
    return b;
}

/* REDUCE of kind M: y (and yi, may be NULL, for MAX/MIN) <- the reduction
 * of x over g; thread t runs outputs t, t + stride, ... of g.kn. */
template <typename T, int M>
CT_HD void ct_reduce_thread(CtThread t, T *y, int64_t *yi, const T *x, double scale,
                            const CtCudaReduce &g)
{
    CT_THREAD_FOR(k, t, g.kn)
    {
        int64_t xo, yo, io;
        ct_reduce_kept(g, k, &xo, &yo, &io);
        const T *p = x + xo;
        if constexpr (M == CT_RED_MAX || M == CT_RED_MIN) {
            int64_t bi;
            y[yo] = ct_reduce_extremum<T, M>(g, p, &bi);
            if (yi) yi[io] = bi;
        } else if constexpr (M == CT_RED_SUM) {
            y[yo] = (T)(ct_reduce_sum<T, false>(g, p, 0) * scale);
        } else { /* CT_RED_VAR */
            T mean = (T)(ct_reduce_sum<T, false>(g, p, 0) * (1.0 / (double)g.rn));
            y[yo] = (T)(ct_reduce_sum<T, true>(g, p, mean) * scale);
        }
    }
}

/* ARG_REDUCE after out was zeroed: out (the x of g, contiguous) at the
 * position idx names <- gy (y geometry); an index outside the slice writes
 * nothing. g is built with out as x, gy as y and idx as the index tensor. */
template <typename T>
CT_HD void ct_scatter_thread(CtThread t, T *out, const T *gy, const int64_t *idx,
                             const CtCudaReduce &g)
{
    CT_THREAD_FOR(k, t, g.kn)
    {
        int64_t xo, yo, io;
        ct_reduce_kept(g, k, &xo, &yo, &io);
        int64_t r = idx[io];
        if (r < 0 || r >= g.rn) continue;
        for (int d = g.nr - 1; d >= 0; d--) {
            xo += (r % g.rs[d]) * g.rx[d];
            r /= g.rs[d];
        }
        out[xo] = gy[yo];
    }
}

#endif
