/* REDUCE and ARG_REDUCE: sum/mean, max/min (+ index), var, and the scatter
 * that backs max/min's gradient.
 *
 * The kept dims and the reduced dims of x are each coalesced. Work is cut
 * into tiles of output elements:
 *   - row mode (the reduced dims are the innermost in memory, e.g. (N, C) ->
 *     (N)): one output per tile, its reduced run read with unit stride;
 *   - column mode (a kept dim is innermost, e.g. the bias gradient (N, C) ->
 *     (C)): up to TW adjacent outputs per tile, accumulated side by side
 *     while walking the reduced positions, so every load is contiguous.
 * Tiles run in parallel. When there are too few tiles to occupy the threads
 * (sum of everything, (N, 4) -> (4)), the reduced positions are also split
 * into chunks whose partial results are combined in order, so the result
 * does not depend on the thread count.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../reduce.h"
#include "cpu.h"

#define TW         128 /* outputs per column-mode tile */
#define LANES      16  /* independent accumulators of a unit-stride run */
#define FEW_TILES  64  /* below this many tiles, also split the reduction */
#define MAX_CHUNKS 1024

enum { M_SUM, M_SQDEV, M_MAX, M_MIN };

typedef struct Plan {
    int nk, nr;
    /* kept dims: size, strides in x, y and the index tensor */
    int64_t ks[CT_MAX_DIMS], kx[CT_MAX_DIMS], ky[CT_MAX_DIMS], ki[CT_MAX_DIMS];
    /* reduced dims: size, stride in x */
    int64_t rs[CT_MAX_DIMS], rx[CT_MAX_DIMS];
    int64_t kn, rn;
    bool col;      /* column mode */
    int64_t inner; /* size of the kept dim tiles run along (1 in row mode) */
    int64_t nblk;  /* tiles per run of `inner` */
    int nouter;    /* kept dims a tile index unravels over */
    int64_t tw, ntiles;
} Plan;

typedef struct Tile {
    int64_t xoff, yoff, ioff, klin, w;
} Tile;

/* Stable insertion sort of dims by descending stride in `key`. */
static void sort_dims(int n, int64_t *key, int64_t *a, int64_t *b, int64_t *c, int64_t *e)
{
    for (int i = 1; i < n; i++) {
        for (int j = i; j > 0 && key[j - 1] < key[j]; j--) {
#define SWAP(v)                                                                          \
    if (v) {                                                                             \
        int64_t t_ = v[j];                                                               \
        v[j] = v[j - 1];                                                                 \
        v[j - 1] = t_;                                                                   \
    }
            SWAP(key) SWAP(a) SWAP(b) SWAP(c) SWAP(e)
#undef SWAP
        }
    }
}

/* Merges neighbouring dims that are contiguous with each other in every
 * stride array given; returns the new count. */
static int coalesce(int n, int64_t *size, int64_t *s0, int64_t *s1, int64_t *s2)
{
    int m = 0;
    for (int d = 0; d < n; d++) {
        bool merge = m > 0 && s0[m - 1] == s0[d] * size[d] &&
                     (!s1 || s1[m - 1] == s1[d] * size[d]) &&
                     (!s2 || s2[m - 1] == s2[d] * size[d]);
        if (merge) {
            size[m - 1] *= size[d];
        } else {
            size[m] = size[d];
            m++;
        }
        s0[m - 1] = s0[d];
        if (s1) s1[m - 1] = s1[d];
        if (s2) s2[m - 1] = s2[d];
    }
    return m;
}

/* keep_order: keep the reduced dims in x's order (needed for indices). */
static void plan_init(Plan *p, const Tensor *x, const Tensor *y, const Tensor *yi,
                      bool keep_order)
{
    memset(p, 0, sizeof *p);
    for (int d = 0; d < x->ndim; d++) {
        if (x->shape[d] == 1) continue;
        if (y->shape[d] == 1) {
            p->rs[p->nr] = x->shape[d];
            p->rx[p->nr++] = x->stride[d];
        } else {
            p->ks[p->nk] = x->shape[d];
            p->kx[p->nk] = x->stride[d];
            p->ky[p->nk] = y->stride[d];
            p->ki[p->nk++] = yi ? yi->stride[d] : 0;
        }
    }
    sort_dims(p->nk, p->kx, p->ks, p->ky, p->ki, NULL);
    p->nk = coalesce(p->nk, p->ks, p->kx, p->ky, p->ki);
    if (!keep_order) sort_dims(p->nr, p->rx, p->rs, NULL, NULL, NULL);
    p->nr = coalesce(p->nr, p->rs, p->rx, NULL, NULL);
    if (p->nr == 0) p->rs[p->nr++] = 1; /* nothing reduced: one position */
    if (p->nk == 0) p->ks[p->nk++] = 1;
    p->kn = p->rn = 1;
    for (int d = 0; d < p->nk; d++) p->kn *= p->ks[d];
    for (int d = 0; d < p->nr; d++) p->rn *= p->rs[d];
    int64_t kin = p->ks[p->nk - 1];
    p->col = kin > 1 && (p->rn == 1 || p->kx[p->nk - 1] < p->rx[p->nr - 1]);
    p->inner = p->col ? kin : 1;
    p->tw = p->col ? (kin < TW ? kin : TW) : 1;
    p->nblk = p->col ? (kin + TW - 1) / TW : 1;
    p->nouter = p->col ? p->nk - 1 : p->nk;
    p->ntiles = p->inner ? p->kn / p->inner * p->nblk : 0;
}

static void tile_at(const Plan *p, int64_t t, Tile *g)
{
    int64_t o = t / p->nblk, j0 = (t % p->nblk) * TW, rem = o;
    g->klin = o * p->inner + j0;
    g->w = p->col ? (p->inner - j0 < TW ? p->inner - j0 : TW) : 1;
    g->xoff = g->yoff = g->ioff = 0;
    for (int d = p->nouter - 1; d >= 0; d--) {
        int64_t i = rem % p->ks[d];
        rem /= p->ks[d];
        g->xoff += i * p->kx[d];
        g->yoff += i * p->ky[d];
        g->ioff += i * p->ki[d];
    }
    if (p->col) {
        g->xoff += j0 * p->kx[p->nk - 1];
        g->yoff += j0 * p->ky[p->nk - 1];
        g->ioff += j0 * p->ki[p->nk - 1];
    }
}

#define T   float
#define SFX f32
#include "reduce_tmpl.h"

#define T   double
#define SFX f64
#include "reduce_tmpl.h"

typedef void (*TaskFn)(const Plan *, int, const void *, const double *, int64_t, int64_t,
                       int64_t, double *, int64_t *);
typedef void (*StoreFn)(const Plan *, const Tile *, const double *, const int64_t *,
                        double, void *, int64_t *, double *);
typedef struct Typed {
    TaskFn task;
    StoreFn store;
    size_t esize;
} Typed;

static const Typed typed_f32 = {task_f32, store_f32, sizeof(float)};
static const Typed typed_f64 = {task_f64, store_f64, sizeof(double)};

/* Folds chunk results in order (the first extremum keeps winning). */
static void combine(int mode, int64_t w, int64_t nchunks, const double *pv,
                    const int64_t *pi, double *val, int64_t *idx)
{
    for (int64_t j = 0; j < w; j++) {
        double b = pv[j];
        int64_t k = pi[j];
        for (int64_t c = 1; c < nchunks; c++) {
            double v = pv[c * TW + j];
            if (mode == M_SUM || mode == M_SQDEV) {
                b += v;
            } else if ((mode == M_MAX ? v > b : v < b) || (v != v && b == b)) {
                b = v;
                k = pi[c * TW + j];
            }
        }
        val[j] = b;
        idx[j] = k;
    }
}

/* Runs `mode` over every tile and stores scale * result (see store_*). */
static CtStatus drive(const Plan *p, const Typed *ty, int mode, const void *x,
                      const double *shift, double scale, void *y, int64_t *yi,
                      double *lin)
{
    const char *xb = x;
    int64_t chunk = CT_ITER_CHUNK / p->tw, nchunks = 1;
    if (p->ntiles < FEW_TILES && p->rn > chunk) {
        nchunks = (p->rn + chunk - 1) / chunk;
        if (nchunks > MAX_CHUNKS) {
            chunk = (p->rn + MAX_CHUNKS - 1) / MAX_CHUNKS;
            nchunks = (p->rn + chunk - 1) / chunk;
        }
    }
    bool par = p->kn * p->rn >= CT_CPU_PAR_MIN;
    if (nchunks == 1) {
#pragma omp parallel for if (par && p->ntiles > 1) schedule(static)
        for (int64_t t = 0; t < p->ntiles; t++) {
            Tile g;
            double val[TW];
            int64_t idx[TW];
            tile_at(p, t, &g);
            ty->task(p, mode, xb + g.xoff * (int64_t)ty->esize,
                     shift ? shift + g.klin : NULL, g.w, 0, p->rn, val, idx);
            ty->store(p, &g, val, idx, scale, y, yi, lin);
        }
        return CT_OK;
    }
    int64_t ntasks = p->ntiles * nchunks;
    double *pv = ct_malloc((size_t)ntasks * TW * sizeof *pv);
    int64_t *pi = ct_malloc((size_t)ntasks * TW * sizeof *pi);
    if (!pv || !pi) {
        free(pv);
        free(pi);
        return ct_error(CT_ERR_OOM, "reduce: out of memory for partial results");
    }
#pragma omp parallel for if (par) schedule(static)
    for (int64_t k = 0; k < ntasks; k++) {
        Tile g;
        int64_t t = k / nchunks, lo = k % nchunks * chunk;
        int64_t hi = lo + chunk < p->rn ? lo + chunk : p->rn;
        tile_at(p, t, &g);
        ty->task(p, mode, xb + g.xoff * (int64_t)ty->esize, shift ? shift + g.klin : NULL,
                 g.w, lo, hi, pv + k * TW, pi + k * TW);
    }
    for (int64_t t = 0; t < p->ntiles; t++) {
        Tile g;
        double val[TW];
        int64_t idx[TW];
        tile_at(p, t, &g);
        combine(mode, g.w, nchunks, pv + t * nchunks * TW, pi + t * nchunks * TW, val,
                idx);
        ty->store(p, &g, val, idx, scale, y, yi, lin);
    }
    free(pv);
    free(pi);
    return CT_OK;
}

static CtStatus cpu_reduce(const CtOpCall *c)
{
    const CtReduceParams *rp = c->params;
    const Tensor *x = c->in[0];
    Tensor *y = c->out[0], *yi = c->out[1];
    bool ext = rp->kind == CT_RED_MAX || rp->kind == CT_RED_MIN;
    Plan p;
    plan_init(&p, x, y, ext ? yi : NULL, ext);
    const Typed *ty = x->dtype == CT_F32 ? &typed_f32 : &typed_f64;
    void *yp = ct_ptr(y);
    int64_t *ip = ext && yi ? ct_ptr(yi) : NULL;
    switch (rp->kind) {
    case CT_RED_SUM:
        return drive(&p, ty, M_SUM, ct_ptr(x), NULL, rp->scale, yp, NULL, NULL);
    case CT_RED_MAX: return drive(&p, ty, M_MAX, ct_ptr(x), NULL, 1.0, yp, ip, NULL);
    case CT_RED_MIN: return drive(&p, ty, M_MIN, ct_ptr(x), NULL, 1.0, yp, ip, NULL);
    case CT_RED_VAR: break;
    }
    /* two passes: the mean of each output, then the squared deviations */
    double *mean = ct_malloc((size_t)(p.kn ? p.kn : 1) * sizeof *mean);
    if (!mean) return ct_error(CT_ERR_OOM, "var: out of memory");
    CtStatus st =
        drive(&p, ty, M_SUM, ct_ptr(x), NULL, 1.0 / (double)p.rn, NULL, NULL, mean);
    if (st == CT_OK)
        st = drive(&p, ty, M_SQDEV, ct_ptr(x), mean, rp->scale, yp, NULL, NULL);
    free(mean);
    return st;
}

CtStatus ct_cpu_sum_contiguous(CtDType dt, const void *x, int64_t n, void *y)
{
    /* the plan of a contiguous tensor summed over every dim: its dims
     * coalesce to one run of n */
    Plan p;
    Tensor xs = {.ndim = 1, .shape = {n}, .stride = {1}};
    Tensor ys = {.ndim = 1, .shape = {1}, .stride = {1}};
    plan_init(&p, &xs, &ys, NULL, false);
    const Typed *ty = dt == CT_F32 ? &typed_f32 : &typed_f64;
    return drive(&p, ty, M_SUM, x, NULL, 1.0, y, NULL, NULL);
}

CtStatus ct_cpu_sum_op_a_rows(const CtMatmulParams *p, CtDType dt, const void *A, void *y)
{
    /* op(A) is (m, k): its transpose (k, m), which A stores row-major
     * when trans_a, is g as a linear's backward sees it, summed over dim 0
     * into a (1, m) row, as that backward's REDUCE did */
    Tensor xs = {.ndim = 2,
                 .shape = {p->k, p->m},
                 .stride = {p->trans_a ? p->m : 1, p->trans_a ? 1 : p->k}};
    Tensor ys = {.ndim = 2, .shape = {1, p->m}, .stride = {p->m, 1}};
    Plan plan;
    plan_init(&plan, &xs, &ys, NULL, false);
    const Typed *ty = dt == CT_F32 ? &typed_f32 : &typed_f64;
    return drive(&plan, ty, M_SUM, A, NULL, 1.0, y, NULL, NULL);
}

static CtStatus cpu_scatter(const CtOpCall *c)
{
    Tensor *out = c->out[0];
    Plan p;
    plan_init(&p, out, c->in[0], c->in[1], true);
    memset(ct_ptr(out), 0, (size_t)tensor_numel(out) * ct_dtype_size(out->dtype));
    if (out->dtype == CT_F32)
        scatter_f32(&p, ct_ptr(out), ct_ptr(c->in[0]), ct_ptr(c->in[1]));
    else
        scatter_f64(&p, ct_ptr(out), ct_ptr(c->in[0]), ct_ptr(c->in[1]));
    return CT_OK;
}

static bool float_only(const CtOpCall *c)
{
    CtDType dt = c->in[0]->dtype;
    return dt == CT_F32 || dt == CT_F64;
}

static bool scatter_supports(const CtOpCall *c)
{
    return float_only(c) && tensor_is_contiguous(c->out[0]) && c->in[1]->dtype == CT_I64;
}

void ct_cpu_register_reduce(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_REDUCE] = cpu_reduce;
    s[CT_OP_REDUCE] = float_only;
    k[CT_OP_ARG_REDUCE] = cpu_scatter;
    s[CT_OP_ARG_REDUCE] = scatter_supports;
}
