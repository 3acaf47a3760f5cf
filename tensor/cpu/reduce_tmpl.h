/* Per-dtype inner loops of the reduction kernels; included by reduce.c once
 * per dtype with T (element and accumulator type) and SFX (name suffix)
 * defined. Not a standalone header. */

#define RT_CAT_(a, b) a##_##b
#define RT_CAT(a, b)  RT_CAT_(a, b)
#define FN(name)      RT_CAT(name, SFX)

/* Sum of p[i*s] (sq = 0) or of (p[i*s] - c)^2 (sq = 1) over n elements.
 * Independent lanes let the unit-stride loops vectorise without reordering
 * a single accumulator, and keep the rounding error of long runs small. */
static T FN(run_sum)(const T *p, int64_t n, int64_t s, T c, int sq)
{
    T lane[LANES] = {0};
    int64_t i = 0;
    if (s == 1 && !sq) {
        for (; i + LANES <= n; i += LANES)
            for (int j = 0; j < LANES; j++) lane[j] += p[i + j];
    } else if (s == 1) {
        for (; i + LANES <= n; i += LANES)
            for (int j = 0; j < LANES; j++) {
                T d = p[i + j] - c;
                lane[j] += d * d;
            }
    } else {
        for (; i + LANES <= n; i += LANES)
            for (int j = 0; j < LANES; j++) {
                T d = p[(i + j) * s] - c * (T)sq;
                lane[j] += sq ? d * d : d;
            }
    }
    T acc = 0;
    for (; i < n; i++) {
        T d = p[i * s] - c * (T)sq;
        acc += sq ? d * d : d;
    }
    for (int w = LANES / 2; w > 0; w /= 2)
        for (int j = 0; j < w; j++) lane[j] += lane[j + w];
    return acc + lane[0];
}

/* Max (sign = 1) or min (sign = -1) of n elements; the first extremum wins
 * and NaN beats everything. base is the flat index of p[0]. */
static void FN(run_ext)(const T *p, int64_t n, int64_t s, int64_t base, int sign, T *best,
                        int64_t *bi)
{
    T b = *best;
    int64_t k = *bi;
    if (sign > 0) {
        for (int64_t i = 0; i < n; i++) {
            T v = p[i * s];
            if (v > b || (v != v && b == b)) b = v, k = base + i;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            T v = p[i * s];
            if (v < b || (v != v && b == b)) b = v, k = base + i;
        }
    }
    *best = b;
    *bi = k;
}

/* One task: tile outputs j < w (x already at the tile's base) over reduced
 * positions [lo, hi). Results go to val[] (as double) and idx[]. */
static void FN(task)(const Plan *p, int mode, const void *xv, const double *shift,
                     int64_t w, int64_t lo, int64_t hi, double *val, int64_t *idx)
{
    const T *x = xv;
    const int nr = p->nr;
    T init = mode == M_MAX ? (T)-INFINITY : mode == M_MIN ? (T)INFINITY : (T)0;
    int64_t cnt[CT_MAX_DIMS] = {0}, off = 0;
    if (!p->col) {
        T acc = init;
        int64_t bi = lo;
        T c = shift ? (T)shift[0] : (T)0;
        int64_t ri = p->rs[nr - 1], si = p->rx[nr - 1];
        if (lo < hi) {
            int64_t row = lo / ri, col = lo % ri;
            for (int d = nr - 2; d >= 0; d--) {
                cnt[d] = row % p->rs[d];
                row /= p->rs[d];
                off += cnt[d] * p->rx[d];
            }
            for (int64_t pos = lo; pos < hi;) {
                int64_t n = ri - col < hi - pos ? ri - col : hi - pos;
                const T *q = x + off + col * si;
                switch (mode) {
                case M_SUM: acc += FN(run_sum)(q, n, si, 0, 0); break;
                case M_SQDEV: acc += FN(run_sum)(q, n, si, c, 1); break;
                case M_MAX: FN(run_ext)(q, n, si, pos, 1, &acc, &bi); break;
                default: FN(run_ext)(q, n, si, pos, -1, &acc, &bi); break;
                }
                pos += n;
                col = 0;
                for (int d = nr - 2; d >= 0; d--) { /* odometer over outer dims */
                    off += p->rx[d];
                    if (++cnt[d] < p->rs[d]) break;
                    off -= p->rx[d] * p->rs[d];
                    cnt[d] = 0;
                }
            }
        }
        val[0] = (double)acc;
        idx[0] = bi;
        return;
    }
    /* column mode: w outputs side by side along the innermost kept dim */
    T acc[TW], c[TW];
    int64_t bi[TW];
    const int64_t ks = p->kx[p->nk - 1];
    for (int64_t j = 0; j < w; j++) {
        acc[j] = init;
        c[j] = shift ? (T)shift[j] : (T)0;
        bi[j] = lo;
    }
    if (lo < hi) {
        int64_t rem = lo;
        for (int d = nr - 1; d >= 0; d--) {
            cnt[d] = rem % p->rs[d];
            rem /= p->rs[d];
            off += cnt[d] * p->rx[d];
        }
    }
    for (int64_t r = lo; r < hi; r++) {
        const T *q = x + off;
        switch (mode) {
        case M_SUM:
            if (ks == 1)
                for (int64_t j = 0; j < w; j++) acc[j] += q[j];
            else
                for (int64_t j = 0; j < w; j++) acc[j] += q[j * ks];
            break;
        case M_SQDEV:
            for (int64_t j = 0; j < w; j++) {
                T d = q[j * ks] - c[j];
                acc[j] += d * d;
            }
            break;
        case M_MAX:
            for (int64_t j = 0; j < w; j++) {
                T v = q[j * ks];
                if (v > acc[j] || (v != v && acc[j] == acc[j])) acc[j] = v, bi[j] = r;
            }
            break;
        default:
            for (int64_t j = 0; j < w; j++) {
                T v = q[j * ks];
                if (v < acc[j] || (v != v && acc[j] == acc[j])) acc[j] = v, bi[j] = r;
            }
            break;
        }
        for (int d = nr - 1; d >= 0; d--) {
            off += p->rx[d];
            if (++cnt[d] < p->rs[d]) break;
            off -= p->rx[d] * p->rs[d];
            cnt[d] = 0;
        }
    }
    for (int64_t j = 0; j < w; j++) {
        val[j] = (double)acc[j];
        idx[j] = bi[j];
    }
}

/* Writes a tile's results: to lin[klin + j] when lin is given, else to y
 * (and the index tensor yi when given). */
static void FN(store)(const Plan *p, const Tile *g, const double *val, const int64_t *idx,
                      double scale, void *yv, int64_t *yi, double *lin)
{
    T *y = yv;
    if (lin) {
        for (int64_t j = 0; j < g->w; j++) lin[g->klin + j] = val[j] * scale;
        return;
    }
    const int64_t ky = p->col ? p->ky[p->nk - 1] : 0, ki = p->col ? p->ki[p->nk - 1] : 0;
    for (int64_t j = 0; j < g->w; j++) {
        y[g->yoff + j * ky] = (T)(val[j] * scale);
        if (yi) yi[g->ioff + j * ki] = idx[j];
    }
}

/* Backward of an index-selecting reduction (see reduce.h). */
static void FN(scatter)(const Plan *p, void *outv, const void *gv, const int64_t *gi)
{
    T *out = outv;
    const T *g = gv;
#pragma omp parallel for if (p->kn >= CT_CPU_PAR_MIN)
    for (int64_t k = 0; k < p->kn; k++) {
        int64_t xo = 0, yo = 0, io = 0, rem = k;
        for (int d = p->nk - 1; d >= 0; d--) {
            int64_t i = rem % p->ks[d];
            rem /= p->ks[d];
            xo += i * p->kx[d];
            yo += i * p->ky[d];
            io += i * p->ki[d];
        }
        int64_t r = gi[io];
        if (r < 0 || r >= p->rn) continue;
        for (int d = p->nr - 1; d >= 0; d--) {
            xo += (r % p->rs[d]) * p->rx[d];
            r /= p->rs[d];
        }
        out[xo] = g[yo];
    }
}

#undef FN
#undef RT_CAT
#undef RT_CAT_

/* the parameters too, so the next instantiation defines them afresh */
#undef T
#undef SFX
