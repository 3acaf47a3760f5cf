/* Private to tensor/cuda: the thread bodies of LAYER_NORM(_BWD)
 * (layer_norm.cu), shared with the host harness (hd.h). Params and
 * semantics: tensor/norm.h; operands are contiguous.
 *
 * One thread normalises one row (forward) or computes one row of dx
 * (backward); dweight and dbias take a second pass with one thread per
 * column, which sums the rows itself in the CPU kernel's fixed order (rows
 * in CT_LN_ROW_BLOCK-sized blocks, each block from zero, the block sums
 * added in order), so no atomics are needed and the results match
 * tensor/cpu/norm.c bit for bit. Sums accumulate in double, row sums in
 * CT_LN_LANES lanes (lanes.h) as on the CPU. */
#ifndef CTRAINER_TENSOR_CUDA_NORM_BODY_H
#define CTRAINER_TENSOR_CUDA_NORM_BODY_H

#include <math.h>

#include "../norm.h"
#include "lanes.h"

/* The partial sums of a row (LANES in tensor/cpu/norm.c). */
#define CT_LN_LANES 8

/* LAYER_NORM: y (rows, d) and stats (2, rows); w and b may be NULL. */
template <typename T>
CT_HD void ct_ln_fwd_thread(CtThread t, const CtLayerNormParams &p, const T *x,
                            const T *w, const T *b, T *y, T *stats)
{
    const int64_t R = p.rows, D = p.d;
    CT_THREAD_FOR(r, t, R)
    {
        const T *xr = x + r * D;
        T *yr = y + r * D;
        double mean = ct_lane_sum<double, CT_LN_LANES>(
                          D, [&](int64_t k) { return (double)xr[k]; }) /
                      (double)D;
        double sq = ct_lane_sum<double, CT_LN_LANES>(D, [&](int64_t k) {
            double dv = (double)xr[k] - mean;
            return dv * dv;
        });
        double rstd = 1.0 / sqrt(sq / (double)D + p.eps);
        T tm = (T)mean, ts = (T)rstd;
        for (int64_t k = 0; k < D; k++) {
            T v = (xr[k] - tm) * ts;
            if (w) v = v * w[k];
            yr[k] = b ? v + b[k] : v;
        }
        stats[r] = tm;
        stats[R + r] = ts;
    }
}

/* LAYER_NORM_BWD, dx: one thread per row. */
template <typename T>
CT_HD void ct_ln_bwd_dx_thread(CtThread t, const CtLayerNormParams &p, const T *g,
                               const T *x, const T *w, const T *stats, T *dx)
{
    const int64_t R = p.rows, D = p.d;
    CT_THREAD_FOR(r, t, R)
    {
        const T *gr = g + r * D, *xr = x + r * D;
        double mean = (double)stats[r], rstd = (double)stats[R + r];
        /* a = mean(g*w), c = mean(g*w*xhat) */
        double a = 0, c = 0;
        for (int64_t k = 0; k < D; k++) {
            double gw = (double)gr[k] * (w ? (double)w[k] : 1.0);
            a += gw;
            c += gw * ((double)xr[k] - mean);
        }
        a /= (double)D;
        c *= rstd / (double)D;
        /* dx = rstd * (g*w - a - xhat*c) */
        T t1 = (T)rstd, t2 = (T)(rstd * a), t3 = (T)(rstd * rstd * c), tm = (T)mean;
        T *dr = dx + r * D;
        for (int64_t k = 0; k < D; k++) {
            T v = t1 * gr[k];
            if (w) v = v * w[k];
            dr[k] = v - t2 - (xr[k] - tm) * t3;
        }
    }
}

/* Rows per block of the dweight/dbias sums (tensor/norm.h). */
static inline int64_t ct_ln_row_block(int64_t rows)
{
    int64_t nblk = (rows + CT_LN_ROW_BLOCK - 1) / CT_LN_ROW_BLOCK;
    if (nblk > CT_LN_MAX_BLOCKS) nblk = CT_LN_MAX_BLOCKS;
    if (nblk < 1) nblk = 1;
    return (rows + nblk - 1) / nblk;
}

/* LAYER_NORM_BWD, dweight and dbias (either may be NULL): one thread per
 * column, rows summed in blocks of blk (ct_ln_row_block). */
template <typename T>
CT_HD void ct_ln_bwd_wb_thread(CtThread t, const CtLayerNormParams &p, int64_t blk,
                               const T *g, const T *x, const T *stats, T *dw, T *db)
{
    const int64_t R = p.rows, D = p.d;
    CT_THREAD_FOR(k, t, D)
    {
        double sw = 0, sb = 0;
        for (int64_t r0 = 0; r0 < R; r0 += blk) {
            int64_t r1 = r0 + blk < R ? r0 + blk : R;
            double pw = 0, pb = 0;
            for (int64_t r = r0; r < r1; r++) {
                double gv = (double)g[r * D + k];
                pw +=
                    gv * ((double)x[r * D + k] - (double)stats[r]) * (double)stats[R + r];
                pb += gv;
            }
            sw += pw;
            sb += pb;
        }
        if (dw) dw[k] = (T)sw;
        if (db) db[k] = (T)sb;
    }
}

#endif
