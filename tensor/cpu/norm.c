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
#define DEFINE_SUMS(T, S)                                                                \
    static inline double sum_##S(const T *x, int64_t n)                                  \
    {                                                                                    \
        double acc[LANES] = {0};                                                         \
        int64_t i = 0;                                                                   \
        for (; i + LANES <= n; i += LANES)                                               \
            for (int j = 0; j < LANES; j++) acc[j] += (double)x[i + j];                  \
        double s = 0;                                                                    \
        for (; i < n; i++) s += (double)x[i];                                            \
        for (int j = 0; j < LANES; j++) s += acc[j];                                     \
        return s;                                                                        \
    }                                                                                    \
    /* sum of (x - m)^2 */                                                               \
    static inline double sqdev_##S(const T *x, int64_t n, double m)                      \
    {                                                                                    \
        double acc[LANES] = {0};                                                         \
        int64_t i = 0;                                                                   \
        for (; i + LANES <= n; i += LANES)                                               \
            for (int j = 0; j < LANES; j++) {                                            \
                double d = (double)x[i + j] - m;                                         \
                acc[j] += d * d;                                                         \
            }                                                                            \
        double s = 0;                                                                    \
        for (; i < n; i++) {                                                             \
            double d = (double)x[i] - m;                                                 \
            s += d * d;                                                                  \
        }                                                                                \
        for (int j = 0; j < LANES; j++) s += acc[j];                                     \
        return s;                                                                        \
    }                                                                                    \
    /* sum of g and of g * (x - m) */                                                    \
    static inline void gsums_##S(const T *g, const T *x, int64_t n, double m,            \
                                 double *sg, double *sgx)                                \
    {                                                                                    \
        double a[LANES] = {0}, b[LANES] = {0};                                           \
        int64_t i = 0;                                                                   \
        for (; i + LANES <= n; i += LANES)                                               \
            for (int j = 0; j < LANES; j++) {                                            \
                a[j] += (double)g[i + j];                                                \
                b[j] += (double)g[i + j] * ((double)x[i + j] - m);                       \
            }                                                                            \
        double s = 0, t = 0;                                                             \
        for (; i < n; i++) {                                                             \
            s += (double)g[i];                                                           \
            t += (double)g[i] * ((double)x[i] - m);                                      \
        }                                                                                \
        for (int j = 0; j < LANES; j++) {                                                \
            s += a[j];                                                                   \
            t += b[j];                                                                   \
        }                                                                                \
        *sg = s;                                                                         \
        *sgx = t;                                                                        \
    }

DEFINE_SUMS(float, f32)
DEFINE_SUMS(double, f64)

/* ------------------------------------------------------------ batch norm */

/* x, y: (n, c, inner); w, b: (c) or NULL; stats: (2, c); rm, rv: (c) with
 * strides rms, rvs, or NULL. */
#define DEFINE_BN_FWD(T, S)                                                              \
    static void bn_fwd_##S(const CtBatchNormParams *p, const T *x, const T *w,           \
                           const T *b, T *y, T *stats, T *rm, int64_t rms, T *rv,        \
                           int64_t rvs)                                                  \
    {                                                                                    \
        int64_t N = p->n, C = p->c, K = p->inner;                                        \
        double m = (double)(N * K);                                                      \
        bool par = N * C * K >= CT_CPU_PAR_MIN;                                          \
        _Pragma("omp parallel for if (par)") for (int64_t c = 0; c < C; c++)             \
        {                                                                                \
            double mean, invstd;                                                         \
            if (p->training) {                                                           \
                double s = 0, v = 0;                                                     \
                for (int64_t i = 0; i < N; i++) s += sum_##S(x + (i * C + c) * K, K);    \
                mean = s / m;                                                            \
                for (int64_t i = 0; i < N; i++)                                          \
                    v += sqdev_##S(x + (i * C + c) * K, K, mean);                        \
                double var = v / m;                                                      \
                invstd = 1.0 / sqrt(var + p->eps);                                       \
                double mo = p->momentum;                                                 \
                if (rm) rm[c * rms] = (T)((1 - mo) * (double)rm[c * rms] + mo * mean);   \
                if (rv)                                                                  \
                    rv[c * rvs] =                                                        \
                        (T)((1 - mo) * (double)rv[c * rvs] + mo * var * m / (m - 1));    \
            } else {                                                                     \
                mean = (double)rm[c * rms];                                              \
                invstd = 1.0 / sqrt((double)rv[c * rvs] + p->eps);                       \
            }                                                                            \
            double sc = invstd * (w ? (double)w[c] : 1.0);                               \
            T scale = (T)sc, shift = (T)((b ? (double)b[c] : 0.0) - mean * sc);          \
            for (int64_t i = 0; i < N; i++) {                                            \
                const T *xr = x + (i * C + c) * K;                                       \
                T *yr = y + (i * C + c) * K;                                             \
                for (int64_t k = 0; k < K; k++) yr[k] = xr[k] * scale + shift;           \
            }                                                                            \
            stats[c] = (T)mean;                                                          \
            stats[C + c] = (T)invstd;                                                    \
        }                                                                                \
    }

/* dx = a*g + k2*x + k3 per channel, where a = w*invstd and, in training,
 * k2 and k3 carry the terms through the batch mean and variance. */
#define DEFINE_BN_BWD(T, S)                                                              \
    static void bn_bwd_##S(const CtBatchNormParams *p, const T *g, const T *x,           \
                           const T *w, const T *stats, T *dx, T *dw, T *db)              \
    {                                                                                    \
        int64_t N = p->n, C = p->c, K = p->inner;                                        \
        double m = (double)(N * K);                                                      \
        bool need_sums = p->training || dw || db;                                        \
        bool par = N * C * K >= CT_CPU_PAR_MIN;                                          \
        _Pragma("omp parallel for if (par)") for (int64_t c = 0; c < C; c++)             \
        {                                                                                \
            double mean = (double)stats[c], invstd = (double)stats[C + c];               \
            double sg = 0, sgx = 0;                                                      \
            if (need_sums)                                                               \
                for (int64_t i = 0; i < N; i++) {                                        \
                    double a_, b_;                                                       \
                    gsums_##S(g + (i * C + c) * K, x + (i * C + c) * K, K, mean, &a_,    \
                              &b_);                                                      \
                    sg += a_;                                                            \
                    sgx += b_;                                                           \
                }                                                                        \
            if (db) db[c] = (T)sg;                                                       \
            if (dw) dw[c] = (T)(sgx * invstd);                                           \
            if (!dx) continue;                                                           \
            double a = invstd * (w ? (double)w[c] : 1.0), k2 = 0, k3 = 0;                \
            if (p->training) {                                                           \
                k2 = -a * invstd * invstd * sgx / m;                                     \
                k3 = -a * sg / m - k2 * mean;                                            \
            }                                                                            \
            T ta = (T)a, t2 = (T)k2, t3 = (T)k3;                                         \
            for (int64_t i = 0; i < N; i++) {                                            \
                const T *gr = g + (i * C + c) * K, *xr = x + (i * C + c) * K;            \
                T *dr = dx + (i * C + c) * K;                                            \
                for (int64_t k = 0; k < K; k++) dr[k] = ta * gr[k] + t2 * xr[k] + t3;    \
            }                                                                            \
        }                                                                                \
    }

DEFINE_BN_FWD(float, f32)
DEFINE_BN_FWD(double, f64)
DEFINE_BN_BWD(float, f32)
DEFINE_BN_BWD(double, f64)

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

#define DEFINE_LN_FWD(T, S)                                                              \
    static void ln_fwd_##S(const CtLayerNormParams *p, const T *x, const T *w,           \
                           const T *b, T *y, T *stats)                                   \
    {                                                                                    \
        int64_t R = p->rows, D = p->d;                                                   \
        bool par = R * D >= CT_CPU_PAR_MIN;                                              \
        _Pragma("omp parallel for if (par)") for (int64_t r = 0; r < R; r++)             \
        {                                                                                \
            const T *xr = x + r * D;                                                     \
            T *yr = y + r * D;                                                           \
            double mean = sum_##S(xr, D) / (double)D;                                    \
            double rstd = 1.0 / sqrt(sqdev_##S(xr, D, mean) / (double)D + p->eps);       \
            T tm = (T)mean, ts = (T)rstd;                                                \
            if (w && b)                                                                  \
                for (int64_t k = 0; k < D; k++) yr[k] = (xr[k] - tm) * ts * w[k] + b[k]; \
            else if (w)                                                                  \
                for (int64_t k = 0; k < D; k++) yr[k] = (xr[k] - tm) * ts * w[k];        \
            else if (b)                                                                  \
                for (int64_t k = 0; k < D; k++) yr[k] = (xr[k] - tm) * ts + b[k];        \
            else                                                                         \
                for (int64_t k = 0; k < D; k++) yr[k] = (xr[k] - tm) * ts;               \
            stats[r] = tm;                                                               \
            stats[R + r] = ts;                                                           \
        }                                                                                \
    }

/* part: per-block partial sums, (nblk, 2, D) doubles (dweight then dbias),
 * or NULL when neither is needed. */
#define DEFINE_LN_BWD(T, S)                                                              \
    static void ln_bwd_##S(const CtLayerNormParams *p, const T *g, const T *x,           \
                           const T *w, const T *stats, T *dx, double *part,              \
                           int64_t nblk, int64_t blk)                                    \
    {                                                                                    \
        int64_t R = p->rows, D = p->d;                                                   \
        bool par = R * D >= CT_CPU_PAR_MIN;                                              \
        _Pragma("omp parallel for if (par)") for (int64_t q = 0; q < nblk; q++)          \
        {                                                                                \
            double *pw = part ? part + q * 2 * D : NULL, *pb = pw ? pw + D : NULL;       \
            if (pw)                                                                      \
                for (int64_t k = 0; k < 2 * D; k++) pw[k] = 0;                           \
            int64_t r1 = (q + 1) * blk < R ? (q + 1) * blk : R;                          \
            for (int64_t r = q * blk; r < r1; r++) {                                     \
                const T *gr = g + r * D, *xr = x + r * D;                                \
                double mean = (double)stats[r], rstd = (double)stats[R + r];             \
                if (pw)                                                                  \
                    for (int64_t k = 0; k < D; k++) {                                    \
                        pw[k] += (double)gr[k] * ((double)xr[k] - mean) * rstd;          \
                        pb[k] += (double)gr[k];                                          \
                    }                                                                    \
                if (!dx) continue;                                                       \
                /* a = mean(g*w), c = mean(g*w*xhat) */                                  \
                double a = 0, c = 0;                                                     \
                for (int64_t k = 0; k < D; k++) {                                        \
                    double gw = (double)gr[k] * (w ? (double)w[k] : 1.0);                \
                    a += gw;                                                             \
                    c += gw * ((double)xr[k] - mean);                                    \
                }                                                                        \
                a /= (double)D;                                                          \
                c *= rstd / (double)D;                                                   \
                /* dx = rstd * (g*w - a - xhat*c) */                                     \
                T t1 = (T)rstd, t2 = (T)(rstd * a), t3 = (T)(rstd * rstd * c),           \
                  tm = (T)mean;                                                          \
                T *dr = dx + r * D;                                                      \
                if (w)                                                                   \
                    for (int64_t k = 0; k < D; k++)                                      \
                        dr[k] = t1 * gr[k] * w[k] - t2 - (xr[k] - tm) * t3;              \
                else                                                                     \
                    for (int64_t k = 0; k < D; k++)                                      \
                        dr[k] = t1 * gr[k] - t2 - (xr[k] - tm) * t3;                     \
            }                                                                            \
        }                                                                                \
    }

DEFINE_LN_FWD(float, f32)
DEFINE_LN_FWD(double, f64)
DEFINE_LN_BWD(float, f32)
DEFINE_LN_BWD(double, f64)

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

/* Adds the block partials in order into dweight / dbias. */
#define DEFINE_LN_REDUCE(T, S)                                                           \
    static void ln_reduce_##S(const double *part, int64_t nblk, int64_t D, T *dw, T *db) \
    {                                                                                    \
        for (int64_t k = 0; k < D; k++) {                                                \
            double sw = 0, sb = 0;                                                       \
            for (int64_t q = 0; q < nblk; q++) {                                         \
                sw += part[q * 2 * D + k];                                               \
                sb += part[q * 2 * D + D + k];                                           \
            }                                                                            \
            if (dw) dw[k] = (T)sw;                                                       \
            if (db) db[k] = (T)sb;                                                       \
        }                                                                                \
    }
DEFINE_LN_REDUCE(float, f32)
DEFINE_LN_REDUCE(double, f64)

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

void ct_cpu_register_norm(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_BATCH_NORM] = cpu_batch_norm;
    k[CT_OP_BATCH_NORM_BWD] = cpu_batch_norm_bwd;
    k[CT_OP_LAYER_NORM] = cpu_layer_norm;
    k[CT_OP_LAYER_NORM_BWD] = cpu_layer_norm_bwd;
    s[CT_OP_BATCH_NORM] = float_input;
    s[CT_OP_BATCH_NORM_BWD] = float_input;
    s[CT_OP_LAYER_NORM] = float_input;
    s[CT_OP_LAYER_NORM_BWD] = float_input;
}
