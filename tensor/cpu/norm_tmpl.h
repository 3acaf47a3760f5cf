/* Per-dtype loops of the normalisation kernels; included by norm.c once per
 * dtype with T (element type: float, double) and SFX (name suffix: f32, f64)
 * defined. Sums accumulate in double. Not a standalone header. */

#define NT_CAT_(a, b) a##_##b
#define NT_CAT(a, b)  NT_CAT_(a, b)
#define FN(name)      NT_CAT(name, SFX)

static inline double FN(sum)(const T *x, int64_t n)
{
    double acc[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += (double)x[i + j];
    double s = 0;
    for (; i < n; i++) s += (double)x[i];
    for (int j = 0; j < LANES; j++) s += acc[j];
    return s;
}
/* sum of (x - m)^2 */
static inline double FN(sqdev)(const T *x, int64_t n, double m)
{
    double acc[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            double d = (double)x[i + j] - m;
            acc[j] += d * d;
        }
    double s = 0;
    for (; i < n; i++) {
        double d = (double)x[i] - m;
        s += d * d;
    }
    for (int j = 0; j < LANES; j++) s += acc[j];
    return s;
}
/* sum of g and of g * (x - m) */
static inline void FN(gsums)(const T *g, const T *x, int64_t n, double m, double *sg,
                             double *sgx)
{
    double a[LANES] = {0}, b[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            a[j] += (double)g[i + j];
            b[j] += (double)g[i + j] * ((double)x[i + j] - m);
        }
    double s = 0, t = 0;
    for (; i < n; i++) {
        s += (double)g[i];
        t += (double)g[i] * ((double)x[i] - m);
    }
    for (int j = 0; j < LANES; j++) {
        s += a[j];
        t += b[j];
    }
    *sg = s;
    *sgx = t;
}

/* One batch norm call, forward or backward: x, y, g, dx: (n, c, inner); w,
 * b, dw, db: (c) or NULL; stats: (2, c); rm, rv: (c) with strides rms,
 * rvs, or NULL. Channels are independent, so they run as pool items
 * (CT_CPU_POOL_MIN) with the bits of a sequential run. */
typedef struct FN(BnJob) {
    const CtBatchNormParams *p;
    const T *x, *w, *b, *g, *saved; /* saved: the forward's stats (backward) */
    T *y, *stats, *rm, *rv, *dx, *dw, *db;
    int64_t rms, rvs;
} FN(BnJob);

static void FN(bn_fwd_channel)(void *ctx, int64_t c, int slot)
{
    (void)slot;
    const FN(BnJob) *j = ctx;
    const CtBatchNormParams *p = j->p;
    int64_t N = p->n, C = p->c, K = p->inner;
    double m = (double)(N * K), mean, invstd;
    const T *x = j->x;
    if (p->training) {
        double s = 0, v = 0;
        for (int64_t i = 0; i < N; i++) s += FN(sum)(x + (i * C + c) * K, K);
        mean = s / m;
        for (int64_t i = 0; i < N; i++) v += FN(sqdev)(x + (i * C + c) * K, K, mean);
        double var = v / m;
        invstd = 1.0 / sqrt(var + p->eps);
        double mo = p->momentum;
        if (j->rm)
            j->rm[c * j->rms] = (T)((1 - mo) * (double)j->rm[c * j->rms] + mo * mean);
        if (j->rv)
            j->rv[c * j->rvs] =
                (T)((1 - mo) * (double)j->rv[c * j->rvs] + mo * var * m / (m - 1));
    } else {
        mean = (double)j->rm[c * j->rms];
        invstd = 1.0 / sqrt((double)j->rv[c * j->rvs] + p->eps);
    }
    double sc = invstd * (j->w ? (double)j->w[c] : 1.0);
    T scale = (T)sc, shift = (T)((j->b ? (double)j->b[c] : 0.0) - mean * sc);
    for (int64_t i = 0; i < N; i++) {
        const T *xr = x + (i * C + c) * K;
        T *yr = j->y + (i * C + c) * K;
        if (p->relu)
            for (int64_t k = 0; k < K; k++) {
                const T v = xr[k] * scale + shift;
                yr[k] = v < 0 ? (T)0 : v; /* tensor_relu's expression */
            }
        else
            for (int64_t k = 0; k < K; k++) yr[k] = xr[k] * scale + shift;
    }
    j->stats[c] = (T)mean;
    j->stats[C + c] = (T)invstd;
}

/* dx = a*g + k2*x + k3 per channel, where a = w*invstd and, in training,
 * k2 and k3 carry the terms through the batch mean and variance. */
static void FN(bn_bwd_channel)(void *ctx, int64_t c, int slot)
{
    (void)slot;
    const FN(BnJob) *j = ctx;
    const CtBatchNormParams *p = j->p;
    int64_t N = p->n, C = p->c, K = p->inner;
    double m = (double)(N * K);
    double mean = (double)j->saved[c], invstd = (double)j->saved[C + c];
    double sg = 0, sgx = 0;
    if (p->training || j->dw || j->db)
        for (int64_t i = 0; i < N; i++) {
            double a_, b_;
            FN(gsums)(j->g + (i * C + c) * K, j->x + (i * C + c) * K, K, mean, &a_, &b_);
            sg += a_;
            sgx += b_;
        }
    if (j->db) j->db[c] = (T)sg;
    if (j->dw) j->dw[c] = (T)(sgx * invstd);
    if (!j->dx) return;
    double a = invstd * (j->w ? (double)j->w[c] : 1.0), k2 = 0, k3 = 0;
    if (p->training) {
        k2 = -a * invstd * invstd * sgx / m;
        k3 = -a * sg / m - k2 * mean;
    }
    T ta = (T)a, t2 = (T)k2, t3 = (T)k3;
    for (int64_t i = 0; i < N; i++) {
        const T *gr = j->g + (i * C + c) * K, *xr = j->x + (i * C + c) * K;
        T *dr = j->dx + (i * C + c) * K;
        for (int64_t k = 0; k < K; k++) dr[k] = ta * gr[k] + t2 * xr[k] + t3;
    }
}

static void FN(bn_fwd)(const CtBatchNormParams *p, const T *x, const T *w, const T *b,
                       T *y, T *stats, T *rm, int64_t rms, T *rv, int64_t rvs)
{
    FN(BnJob)
    j = {.p = p,
         .x = x,
         .w = w,
         .b = b,
         .y = y,
         .stats = stats,
         .rm = rm,
         .rv = rv,
         .rms = rms,
         .rvs = rvs};
    ct_cpu_items(p->c, p->n * p->c * p->inner, FN(bn_fwd_channel), &j);
}

static void FN(bn_bwd)(const CtBatchNormParams *p, const T *g, const T *x, const T *w,
                       const T *stats, T *dx, T *dw, T *db)
{
    FN(BnJob)
    j = {.p = p, .g = g, .x = x, .w = w, .saved = stats, .dx = dx, .dw = dw, .db = db};
    ct_cpu_items(p->c, p->n * p->c * p->inner, FN(bn_bwd_channel), &j);
}

static void FN(ln_fwd)(const CtLayerNormParams *p, const T *x, const T *w, const T *b,
                       T *y, T *stats)
{
    int64_t R = p->rows, D = p->d;
    bool par = R * D >= CT_CPU_PAR_MIN;
#pragma omp parallel for if (par)
    for (int64_t r = 0; r < R; r++) {
        const T *xr = x + r * D;
        T *yr = y + r * D;
        double mean = FN(sum)(xr, D) / (double)D;
        double rstd = 1.0 / sqrt(FN(sqdev)(xr, D, mean) / (double)D + p->eps);
        T tm = (T)mean, ts = (T)rstd;
        if (w && b)
            for (int64_t k = 0; k < D; k++) yr[k] = (xr[k] - tm) * ts * w[k] + b[k];
        else if (w)
            for (int64_t k = 0; k < D; k++) yr[k] = (xr[k] - tm) * ts * w[k];
        else if (b)
            for (int64_t k = 0; k < D; k++) yr[k] = (xr[k] - tm) * ts + b[k];
        else
            for (int64_t k = 0; k < D; k++) yr[k] = (xr[k] - tm) * ts;
        stats[r] = tm;
        stats[R + r] = ts;
    }
}

/* part: per-block partial sums, (nblk, 2, D) doubles (dweight then dbias),
 * or NULL when neither is needed. */
static void FN(ln_bwd)(const CtLayerNormParams *p, const T *g, const T *x, const T *w,
                       const T *stats, T *dx, double *part, int64_t nblk, int64_t blk)
{
    int64_t R = p->rows, D = p->d;
    bool par = R * D >= CT_CPU_PAR_MIN;
#pragma omp parallel for if (par)
    for (int64_t q = 0; q < nblk; q++) {
        double *pw = part ? part + q * 2 * D : NULL, *pb = pw ? pw + D : NULL;
        if (pw)
            for (int64_t k = 0; k < 2 * D; k++) pw[k] = 0;
        int64_t r1 = (q + 1) * blk < R ? (q + 1) * blk : R;
        for (int64_t r = q * blk; r < r1; r++) {
            const T *gr = g + r * D, *xr = x + r * D;
            double mean = (double)stats[r], rstd = (double)stats[R + r];
            if (pw)
                for (int64_t k = 0; k < D; k++) {
                    pw[k] += (double)gr[k] * ((double)xr[k] - mean) * rstd;
                    pb[k] += (double)gr[k];
                }
            if (!dx) continue;
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
            if (w)
                for (int64_t k = 0; k < D; k++)
                    dr[k] = t1 * gr[k] * w[k] - t2 - (xr[k] - tm) * t3;
            else
                for (int64_t k = 0; k < D; k++)
                    dr[k] = t1 * gr[k] - t2 - (xr[k] - tm) * t3;
        }
    }
}

/* Adds the block partials in order into dweight / dbias. */
static void FN(ln_reduce)(const double *part, int64_t nblk, int64_t D, T *dw, T *db)
{
    for (int64_t k = 0; k < D; k++) {
        double sw = 0, sb = 0;
        for (int64_t q = 0; q < nblk; q++) {
            sw += part[q * 2 * D + k];
            sb += part[q * 2 * D + D + k];
        }
        if (dw) dw[k] = (T)sw;
        if (db) db[k] = (T)sb;
    }
}

#undef FN
#undef NT_CAT
#undef NT_CAT_

/* the parameters too, so the next instantiation defines them afresh */
#undef T
#undef SFX
