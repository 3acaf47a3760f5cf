/* Per-dtype loops of the softmax and cross-entropy kernels; included by
 * softmax.c once per dtype with T, SFX, EXP and LOG defined. Not a
 * standalone header. */

#define ST_CAT_(a, b) a##_##b
#define ST_CAT(a, b)  ST_CAT_(a, b)
#define FN(name)      ST_CAT(name, SFX)

/* Max and sum of a unit-stride run, in independent lanes so they vectorise. */
static T FN(run_max)(const T *x, int64_t n)
{
    T lane[LANES], m = -INFINITY;
    int64_t i = 0;
    for (int j = 0; j < LANES; j++) lane[j] = -INFINITY;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    for (int j = 0; j < LANES; j++) m = lane[j] > m ? lane[j] : m;
    return m;
}

/* sum_i exp(x[i] - m) */
static T FN(run_sum_exp)(const T *x, int64_t n, T m)
{
    T lane[LANES] = {0}, s = 0;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) lane[j] += EXP(x[i + j] - m);
    for (; i < n; i++) s += EXP(x[i] - m);
    for (int j = 0; j < LANES; j++) s += lane[j];
    return s;
}

/* sum_i (a[i] - m) * b[i], or sum_i (a[i] - m) when b is NULL (m 0: the
 * plain sums; a[i] - 0 is a[i]) */
static T FN(run_dot)(const T *a, T m, const T *b, int64_t n)
{
    T lane[LANES] = {0}, s = 0;
    int64_t i = 0;
    if (b) {
        for (; i + LANES <= n; i += LANES)
            for (int j = 0; j < LANES; j++) lane[j] += (a[i + j] - m) * b[i + j];
        for (; i < n; i++) s += (a[i] - m) * b[i];
    } else {
        for (; i + LANES <= n; i += LANES)
            for (int j = 0; j < LANES; j++) lane[j] += a[i + j] - m;
        for (; i < n; i++) s += a[i] - m;
    }
    for (int j = 0; j < LANES; j++) s += lane[j];
    return s;
}

/* One normalisation run of n elements at stride 1 (inner == 1). */
static void FN(softmax_run)(const T *x, T *y, int64_t n, bool log_out)
{
    T m = FN(run_max)(x, n);
    if (log_out) { /* (x - m) - log(s), not x - (m + log(s)): m may be large */
        T ls = LOG(FN(run_sum_exp)(x, n, m));
        for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) - ls;
    } else {
        for (int64_t i = 0; i < n; i++) y[i] = EXP(x[i] - m);
        T inv = 1 / FN(run_dot)(y, 0, NULL, n);
        for (int64_t i = 0; i < n; i++) y[i] *= inv;
    }
}

/* w runs side by side (inner > 1): element i of run j at x[i * inner + j]. */
static void FN(softmax_cols)(const T *x, T *y, int64_t n, int64_t inner, int64_t w,
                             bool log_out)
{
    T m[TW], s[TW];
    for (int64_t j = 0; j < w; j++) m[j] = -INFINITY, s[j] = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < w; j++) {
            T v = x[i * inner + j];
            m[j] = v > m[j] ? v : m[j];
        }
    if (log_out) {
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < w; j++) s[j] += EXP(x[i * inner + j] - m[j]);
        for (int64_t j = 0; j < w; j++) s[j] = LOG(s[j]);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < w; j++)
                y[i * inner + j] = (x[i * inner + j] - m[j]) - s[j];
    } else {
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < w; j++) {
                T e = EXP(x[i * inner + j] - m[j]);
                y[i * inner + j] = e;
                s[j] += e;
            }
        for (int64_t j = 0; j < w; j++) s[j] = 1 / s[j];
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < w; j++) y[i * inner + j] *= s[j];
    }
}

static void FN(softmax_bwd_run)(const T *y, const T *g, T *gx, int64_t n, bool log_out)
{
    if (log_out) {
        T s = FN(run_dot)(g, 0, NULL, n);
        for (int64_t i = 0; i < n; i++) gx[i] = g[i] - EXP(y[i]) * s;
    } else {
        T s = FN(run_dot)(g, 0, y, n);
        for (int64_t i = 0; i < n; i++) gx[i] = y[i] * (g[i] - s);
    }
}

static void FN(softmax_bwd_cols)(const T *y, const T *g, T *gx, int64_t n, int64_t inner,
                                 int64_t w, bool log_out)
{
    T s[TW];
    for (int64_t j = 0; j < w; j++) s[j] = 0;
    if (log_out) {
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < w; j++) s[j] += g[i * inner + j];
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < w; j++) {
                int64_t k = i * inner + j;
                gx[k] = g[k] - EXP(y[k]) * s[j];
            }
    } else {
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < w; j++) s[j] += g[i * inner + j] * y[i * inner + j];
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < w; j++) {
                int64_t k = i * inner + j;
                gx[k] = y[k] * (g[k] - s[j]);
            }
    }
}

/* fwd: y <- softmax(x); bwd: y <- backward from (x = y_fwd, g). */
static void FN(softmax)(const CtSoftmaxParams *p, const void *xv, const void *gv,
                        void *yv)
{
    const T *x = xv, *g = gv;
    T *y = yv;
    const int64_t n = p->n, inner = p->inner;
    const int64_t nblk = (inner + TW - 1) / TW,
                  ntiles = p->outer * (inner > 1 ? nblk : 1);
#pragma omp parallel for if (p->outer * n * inner >= CT_CPU_PAR_MIN && ntiles > 1)
    for (int64_t t = 0; t < ntiles; t++) {
        if (inner == 1) {
            int64_t o = t * n;
            if (g)
                FN(softmax_bwd_run)(x + o, g + o, y + o, n, p->log);
            else
                FN(softmax_run)(x + o, y + o, n, p->log);
            continue;
        }
        int64_t j0 = t % nblk * TW, w = inner - j0 < TW ? inner - j0 : TW;
        int64_t o = t / nblk * n * inner + j0;
        if (g)
            FN(softmax_bwd_cols)(x + o, g + o, y + o, n, inner, w, p->log);
        else
            FN(softmax_cols)(x + o, y + o, n, inner, w, p->log);
    }
}

/* Over c elements at stride s: *m <- their max, and log sum_k exp(x_k - m)
 * returned (log-sum-exp less m, so that x_k - m - it keeps its bits when m
 * is large) */
static T FN(log_sum)(const T *x, int64_t c, int64_t s, T *m)
{
    if (s == 1) {
        *m = FN(run_max)(x, c);
        return LOG(FN(run_sum_exp)(x, c, *m));
    }
    T sum = 0;
    *m = -INFINITY;
    for (int64_t k = 0; k < c; k++) *m = x[k * s] > *m ? x[k * s] : *m;
    for (int64_t k = 0; k < c; k++) sum += EXP(x[k * s] - *m);
    return LOG(sum);
}

static void FN(ce_fwd)(const CtCrossEntropyParams *p, const void *xv, const int64_t *tg,
                       const void *wv, void *lv, void *wov)
{
    const T *x = xv, *w = wv;
    T *loss = lv, *wout = wov;
    const int64_t c = p->c, inner = p->inner, np = p->n * inner;
    const T eps = p->log_input ? 0 : (T)p->label_smoothing;
    const T wsum = w ? FN(run_dot)(w, 0, NULL, c) : (T)c;
#pragma omp parallel for if (np * c >= CT_CPU_PAR_MIN)
    for (int64_t i = 0; i < np; i++) {
        int64_t t = tg[i];
        if (p->use_ignore_index && t == p->ignore_index) {
            loss[i] = 0;
            if (wout) wout[i] = 0;
            continue;
        }
        const T *xr = x + i / inner * c * inner + i % inner;
        T wt = w ? w[t] : (T)1;
        if (wout) wout[i] = wt;
        if (p->log_input) {
            loss[i] = -wt * xr[t * inner];
            continue;
        }
        T m, ls = FN(log_sum)(xr, c, inner, &m);
        T l = (1 - eps) * wt * (ls - (xr[t * inner] - m));
        if (eps > 0) {
            /* sum_k w_k (ls - (x_k - m)) = ls W - sum_k w_k (x_k - m) */
            T wx = 0;
            if (inner == 1)
                wx = FN(run_dot)(xr, m, w, c);
            else
                for (int64_t k = 0; k < c; k++)
                    wx += (xr[k * inner] - m) * (w ? w[k] : (T)1);
            l += eps / (T)c * (ls * wsum - wx);
        }
        loss[i] = l;
    }
}

static void FN(ce_bwd)(const CtCrossEntropyParams *p, const void *xv, const int64_t *tg,
                       const void *wv, const void *gv, const void *dv, void *gxv)
{
    const T *x = xv, *w = wv, *go = gv, *div = dv;
    T *gx = gxv;
    const T g0 = p->go_scalar ? (div ? go[0] / div[0] : go[0]) : 0;
    const int64_t c = p->c, inner = p->inner, np = p->n * inner;
    const T eps = p->log_input ? 0 : (T)p->label_smoothing;
    const T wsum = w ? FN(run_dot)(w, 0, NULL, c) : (T)c;
#pragma omp parallel for if (np * c >= CT_CPU_PAR_MIN)
    for (int64_t i = 0; i < np; i++) {
        int64_t t = tg[i], base = i / inner * c * inner + i % inner;
        const T *xr = x + base;
        T *gr = gx + base;
        if (p->use_ignore_index && t == p->ignore_index) {
            for (int64_t k = 0; k < c; k++) gr[k * inner] = 0;
            continue;
        }
        T g = p->go_scalar ? g0 : div ? go[i] / div[0] : go[i], wt = w ? w[t] : (T)1;
        if (p->log_input) {
            for (int64_t k = 0; k < c; k++) gr[k * inner] = 0;
            gr[t * inner] = -g * wt;
            continue;
        }
        /* d loss / d x_k = p_k ((1-e) w_t + e W / c) - (1-e) w_t [k == t] - e w_k / c */
        T m, ls = FN(log_sum)(xr, c, inner, &m);
        T a = g * ((1 - eps) * wt + eps * wsum / (T)c), b = g * eps / (T)c;
        if (w)
            for (int64_t k = 0; k < c; k++)
                gr[k * inner] = EXP((xr[k * inner] - m) - ls) * a - b * w[k];
        else
            for (int64_t k = 0; k < c; k++)
                gr[k * inner] = EXP((xr[k * inner] - m) - ls) * a - b;
        gr[t * inner] -= g * (1 - eps) * wt;
    }
}

#undef FN
#undef ST_CAT
#undef ST_CAT_

/* the parameters too, so the next instantiation defines them afresh */
#undef T
#undef SFX
#undef EXP
#undef LOG
