/* Per-dtype pooling loops; included by pool.c once per dtype with T
 * (element type: float, double), SFX (name suffix: f32, f64) and
 * MAX_2X2_KERNEL() (a vector max_plane_2x2 for this CPU, of type
 * void (*)(const T *x, int64_t w, int64_t oh, int64_t ow, T *y, int64_t *idx),
 * or NULL) and MAX_ANY_KERNEL(p) (a vector max_plane for the other windows
 * of p, of type void (*)(const CtPool2dParams *, const T *x, T *y,
 * int64_t *idx), or NULL) defined. Not a standalone header. */

#define PT_CAT_(a, b) a##_##b
#define PT_CAT(a, b)  PT_CAT_(a, b)
#define FN(name)      PT_CAT(name, SFX)

/* Max: NaN wins (propagates); ties go to the first element. */
static void FN(max_plane)(const CtPool2dParams *p, const T *x, T *y, int64_t *idx)
{
    for (int64_t oh = 0; oh < p->oh; oh++)
        for (int64_t ow = 0; ow < p->ow; ow++) {
            CtPoolWindow r = ct_pool_window(p, oh, ow);
            int64_t best = r.h0 * p->w + r.w0;
            T m = -INFINITY;
            for (int64_t ih = r.h0; ih < r.h1; ih++)
                for (int64_t iw = r.w0; iw < r.w1; iw++) {
                    T v = x[ih * p->w + iw];
                    if (v > m || isnan(v)) {
                        m = v;
                        best = ih * p->w + iw;
                        if (isnan(v)) goto done;
                    }
                }
        done:
            y[oh * p->ow + ow] = m;
            if (idx) idx[oh * p->ow + ow] = best;
        }
}

/* max_plane for the common 2x2, stride-2, unpadded window that fits the
 * input, without the general window arithmetic and without data-dependent
 * branches (a max over random values mispredicts half its compares); same
 * NaN and tie rules. */
static void FN(max_plane_2x2)(const CtPool2dParams *p, const T *x, T *y, int64_t *idx)
{
    for (int64_t oh = 0; oh < p->oh; oh++)
        for (int64_t ow = 0; ow < p->ow; ow++) {
            const int64_t at[4] = {2 * oh * p->w + 2 * ow, 2 * oh * p->w + 2 * ow + 1,
                                   (2 * oh + 1) * p->w + 2 * ow,
                                   (2 * oh + 1) * p->w + 2 * ow + 1};
            T m = x[at[0]];
            int64_t best = at[0];
            bool nan = isnan(m);
            for (int e = 1; e < 4; e++) {
                T v = x[at[e]];
                bool take = (!nan) & ((v > m) | (bool)isnan(v));
                m = take ? v : m;
                best = take ? at[e] : best;
                nan |= isnan(v);
            }
            y[oh * p->ow + ow] = m;
            if (idx) idx[oh * p->ow + ow] = best;
        }
}

static void FN(avg_plane)(const CtPool2dParams *p, const T *x, T *y)
{
    for (int64_t oh = 0; oh < p->oh; oh++)
        for (int64_t ow = 0; ow < p->ow; ow++) {
            CtPoolWindow r = ct_pool_window(p, oh, ow);
            T s = 0;
            for (int64_t ih = r.h0; ih < r.h1; ih++)
                for (int64_t iw = r.w0; iw < r.w1; iw++) s += x[ih * p->w + iw];
            y[oh * p->ow + ow] = r.div ? s / (T)r.div : 0;
        }
}

static void FN(avg_plane_bwd)(const CtPool2dParams *p, const T *gy, T *gx)
{
    for (int64_t oh = 0; oh < p->oh; oh++)
        for (int64_t ow = 0; ow < p->ow; ow++) {
            CtPoolWindow r = ct_pool_window(p, oh, ow);
            if (!r.div) continue;
            T g = gy[oh * p->ow + ow] / (T)r.div;
            for (int64_t ih = r.h0; ih < r.h1; ih++)
                for (int64_t iw = r.w0; iw < r.w1; iw++) gx[ih * p->w + iw] += g;
        }
}

/* One POOL2D or POOL2D_BWD call: planes (sample, channel) are independent,
 * so they run as pool items (CT_CPU_POOL_MIN) with a sequential run's bits. */
typedef struct FN(PoolJob) {
    const CtPool2dParams *p;
    const T *x;         /* forward: x; backward: gy */
    T *y;               /* forward: y; backward: gx */
    int64_t *idx;       /* forward: argmax out, or NULL */
    const int64_t *arg; /* backward: the forward's argmax (max pooling) */
    bool k2;
    /* the vector 2x2 kernel (k2 only; chosen once per op), or NULL */
    void (*max2x2)(const T *x, int64_t w, int64_t oh, int64_t ow, T *y, int64_t *idx);
    /* the vector kernel for other max windows, or NULL */
    void (*max_any)(const CtPool2dParams *p, const T *x, T *y, int64_t *idx);
} FN(PoolJob);

static void FN(pool_plane)(void *ctx, int64_t q, int slot)
{
    (void)slot;
    const FN(PoolJob) *j = ctx;
    const CtPool2dParams *p = j->p;
    const int64_t hw = p->h * p->w, ohw = p->oh * p->ow;
    const T *x = j->x + q * hw;
    T *y = j->y + q * ohw;
    int64_t *idx = j->idx ? j->idx + q * ohw : NULL;
    if (j->max2x2)
        j->max2x2(x, p->w, p->oh, p->ow, y, idx);
    else if (j->k2)
        FN(max_plane_2x2)(p, x, y, idx);
    else if (j->max_any)
        j->max_any(p, x, y, idx);
    else if (p->kind == CT_POOL_MAX)
        FN(max_plane)(p, x, y, idx);
    else
        FN(avg_plane)(p, x, y);
}

static void FN(pool_bwd_plane)(void *ctx, int64_t q, int slot)
{
    (void)slot;
    const FN(PoolJob) *j = ctx;
    const CtPool2dParams *p = j->p;
    const int64_t hw = p->h * p->w, ohw = p->oh * p->ow;
    const T *gy = j->x + q * ohw;
    T *g = j->y + q * hw;
    for (int64_t e = 0; e < hw; e++) g[e] = 0;
    if (p->kind == CT_POOL_MAX)
        for (int64_t e = 0; e < ohw; e++) g[j->arg[q * ohw + e]] += gy[e];
    else
        FN(avg_plane_bwd)(p, gy, g);
}

static void FN(pool)(const CtOpCall *c)
{
    const CtPool2dParams *p = c->params;
    FN(PoolJob) j = {.p = p, .x = ct_ptr(c->in[0]), .y = ct_ptr(c->out[0])};
    j.idx = c->out[1] ? ct_ptr(c->out[1]) : NULL;
    j.k2 = p->kind == CT_POOL_MAX && p->kh == 2 && p->kw == 2 && p->sh == 2 &&
           p->sw == 2 && p->ph == 0 && p->pw == 0 && 2 * p->oh <= p->h &&
           2 * p->ow <= p->w;
    if (j.k2) j.max2x2 = MAX_2X2_KERNEL();
    if (!j.k2 && p->kind == CT_POOL_MAX) j.max_any = MAX_ANY_KERNEL(p);
    ct_cpu_items(p->n * p->c, p->n * p->c * p->h * p->w, FN(pool_plane), &j);
}

static void FN(pool_bwd)(const CtOpCall *c)
{
    const CtPool2dParams *p = c->params;
    FN(PoolJob) j = {.p = p, .x = ct_ptr(c->in[0]), .y = ct_ptr(c->out[0])};
    j.arg = c->in[1] ? ct_ptr(c->in[1]) : NULL;
    ct_cpu_items(p->n * p->c, p->n * p->c * p->h * p->w, FN(pool_bwd_plane), &j);
}

#undef FN
#undef PT_CAT
#undef PT_CAT_

/* the parameters too, so the next instantiation defines them afresh */
#undef T
#undef SFX
#undef MAX_2X2_KERNEL
#undef MAX_ANY_KERNEL
