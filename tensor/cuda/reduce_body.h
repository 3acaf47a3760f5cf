/* Private to tensor/cuda: the thread bodies of REDUCE and ARG_REDUCE
 * (reduce.cu), shared with the host harness (hd.h). Contracts in
 * ../reduce.h.
 *
 * One thread owns one output element and walks its whole reduced slice in
 * row-major order of the reduced dims (x's dim order); with few outputs and
 * long slices, the slices are cut into runs reduced by threads of their own
 * and folded in order (ct_reduce_split). Either way the result depends on
 * the geometry only, never on the launch shape:
 *   - SUM and VAR accumulate in double, also for f32 (the CPU accumulates
 *     f32 in f32 lanes, so f32 results agree to rounding; exactly when every
 *     partial sum is exact). The result is (T)(sum * scale), as on the CPU.
 *     VAR's mean is sum * (1/n) rounded to T, then the squared deviations
 *     (x - mean)^2 are formed in T and summed in double.
 *   - MAX and MIN match the CPU bit for bit: the first extremum wins, a NaN
 *     beats everything (the first NaN), and the index is the flat position
 *     within the reduced dims; an empty slice gives -inf / +inf and index 0.
 */
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

/* Offset in x (from the slice start) of reduced position pos; sets the
 * odometer cnt to it. Position 0 needs no division (and an empty slice,
 * with a size-0 dim, only ever seeks it). */
CT_HD int64_t ct_reduce_seek(const CtCudaReduce &g, int64_t pos, int64_t *cnt)
{
    int64_t off = 0;
    for (int d = g.nr - 1; d >= 0; d--) {
        if (pos == 0) {
            cnt[d] = 0;
            continue;
        }
        int64_t q = pos / g.rs[d];
        cnt[d] = pos - q * g.rs[d];
        pos = q;
        off += cnt[d] * g.rx[d];
    }
    return off;
}

/* Sum over positions [lo, hi) of the slice at p of x (SQ false) or of
 * (x - c)^2 formed in T (SQ true), accumulated in double in slice order. */
template <typename T, bool SQ>
CT_HD double ct_reduce_sum(const CtCudaReduce &g, const T *p, T c, int64_t lo, int64_t hi)
{
    int64_t cnt[CT_MAX_DIMS];
    int64_t off = ct_reduce_seek(g, lo, cnt);
    double acc = 0;
    for (int64_t r = lo; r < hi; r++) {
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

/* The first maximum (MAX) or minimum over positions [lo, hi) of the slice
 * at p, NaN first; its position goes to *index (lo when none beats the
 * initial -inf / +inf). */
template <typename T, int M>
CT_HD T ct_reduce_extremum(const CtCudaReduce &g, const T *p, int64_t lo, int64_t hi,
                           int64_t *index)
{
    int64_t cnt[CT_MAX_DIMS], bi = lo;
    int64_t off = ct_reduce_seek(g, lo, cnt);
    T b = M == CT_RED_MAX ? (T)-INFINITY : (T)INFINITY;
    for (int64_t r = lo; r < hi; r++) {
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
            y[yo] = ct_reduce_extremum<T, M>(g, p, 0, g.rn, &bi);
            if (yi) yi[io] = bi;
        } else if constexpr (M == CT_RED_SUM) {
            y[yo] = (T)(ct_reduce_sum<T, false>(g, p, 0, 0, g.rn) * scale);
        } else { /* CT_RED_VAR */
            T mean =
                (T)(ct_reduce_sum<T, false>(g, p, 0, 0, g.rn) * (1.0 / (double)g.rn));
            y[yo] = (T)(ct_reduce_sum<T, true>(g, p, mean, 0, g.rn) * scale);
        }
    }
}

/* ---------------------------------------------------------- long slices
 *
 * With few outputs and long slices, each slice is cut into `parts` runs of
 * `len` consecutive positions (the last one shorter). A first pass reduces
 * each run on a thread of its own (ct_reduce_part_thread); a second folds
 * each output's runs in order (ct_reduce_fold_thread): sums add the runs'
 * double sums, MAX/MIN keep the first extremum (so they still match the CPU
 * bit for bit). VAR runs SUM's two passes for the mean, then its own two.
 * The split depends on the geometry only, never on the launch shape. */
typedef struct CtReduceSplit {
    int64_t parts, len;
} CtReduceSplit;

#define CT_REDUCE_SPLIT_OUTPUTS 4096   /* split only below this many outputs */
#define CT_REDUCE_SPLIT_LEN     1024   /* run length aimed at */
#define CT_REDUCE_SPLIT_THREADS 262144 /* at most this many runs in all */

/* How g is split; parts == 1 means one thread per output (ct_reduce_thread). */
static inline CtReduceSplit ct_reduce_split(const CtCudaReduce &g)
{
    CtReduceSplit s = {1, g.rn};
    if (g.kn == 0 || g.kn >= CT_REDUCE_SPLIT_OUTPUTS || g.rn < 2 * CT_REDUCE_SPLIT_LEN)
        return s;
    int64_t parts = (g.rn + CT_REDUCE_SPLIT_LEN - 1) / CT_REDUCE_SPLIT_LEN;
    int64_t most = CT_REDUCE_SPLIT_THREADS / g.kn;
    if (parts > most) parts = most;
    s.len = (g.rn + parts - 1) / parts;
    s.parts = (g.rn + s.len - 1) / s.len;
    return s;
}

/* Pass 1: run q = k * parts + j reduces positions [j len, (j + 1) len) of
 * output k's slice into pv[q] (and, for MAX/MIN, its position into pi[q]).
 * For VAR, the squared deviations from (T)mean[k]. */
template <typename T, int M>
CT_HD void ct_reduce_part_thread(CtThread t, double *pv, int64_t *pi, const T *x,
                                 const double *mean, const CtCudaReduce &g,
                                 CtReduceSplit s)
{
    CT_THREAD_FOR(q, t, g.kn * s.parts)
    {
        int64_t k = q / s.parts, lo = (q - k * s.parts) * s.len;
        int64_t hi = lo + s.len < g.rn ? lo + s.len : g.rn;
        int64_t xo, yo, io;
        ct_reduce_kept(g, k, &xo, &yo, &io);
        const T *p = x + xo;
        if constexpr (M == CT_RED_MAX || M == CT_RED_MIN)
            pv[q] = (double)ct_reduce_extremum<T, M>(g, p, lo, hi, &pi[q]);
        else if constexpr (M == CT_RED_SUM)
            pv[q] = ct_reduce_sum<T, false>(g, p, 0, lo, hi);
        else /* CT_RED_VAR */
            pv[q] = ct_reduce_sum<T, true>(g, p, (T)mean[k], lo, hi);
    }
}

/* Pass 2: output k folds its runs in order. MAX/MIN: y (and yi, may be
 * NULL) <- the first extremum. SUM/VAR: y <- (T)(sum * scale), or, when
 * mean is given, mean[k] <- sum * scale (VAR's mean pass). */
template <typename T, int M>
CT_HD void ct_reduce_fold_thread(CtThread t, T *y, int64_t *yi, double *mean,
                                 const double *pv, const int64_t *pi, double scale,
                                 const CtCudaReduce &g, CtReduceSplit s)
{
    CT_THREAD_FOR(k, t, g.kn)
    {
        int64_t xo, yo, io;
        ct_reduce_kept(g, k, &xo, &yo, &io);
        const double *v = pv + k * s.parts;
        if constexpr (M == CT_RED_MAX || M == CT_RED_MIN) {
            const int64_t *vi = pi + k * s.parts;
            double b = v[0];
            int64_t bi = vi[0];
            for (int64_t j = 1; j < s.parts; j++)
                if ((M == CT_RED_MAX ? v[j] > b : v[j] < b) || (v[j] != v[j] && b == b))
                    b = v[j], bi = vi[j];
            y[yo] = (T)b;
            if (yi) yi[io] = bi;
        } else {
            double acc = 0;
            for (int64_t j = 0; j < s.parts; j++) acc += v[j];
            if (mean)
                mean[k] = acc * scale;
            else
                y[yo] = (T)(acc * scale);
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
