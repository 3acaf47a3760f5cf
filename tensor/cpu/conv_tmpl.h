/* Per-dtype conv2d kernels, included by conv.c once per dtype with
 *   T     the element type (float, double)
 *   SFX   the name suffix (f32, f64)
 *   GEMM  the row-major cblas gemm of T (cblas_sgemm, cblas_dgemm)
 * defined. No include guard on purpose.
 *
 * One sample at a time: for group g, with Ckk = C/groups * kh * kw,
 *   forward:  y_g (O/g, OH*OW)  = w_g (O/g, Ckk) @ col (Ckk, OH*OW)
 *   data:     col               = w_gᵀ @ gy_g,  then col2im into gx
 *   weight:   gw_g             += gy_g @ colᵀ
 * where col = im2col(x_g). A 1x1, stride-1, unpadded conv uses x_g as col.
 * `par` parallelises im2col/col2im inside one sample (used when the caller
 * is not already parallel over the batch). */

#define CAT_(a, b) a##_##b
#define CAT(a, b)  CAT_(a, b)
#define FN(name)   CAT(name, SFX)

/* col: (Cg*kh*kw, OH*OW) <- patches of x: (Cg, H, W). */
static void FN(im2col)(const CtConv2dParams *p, const T *x, T *col, bool par)
{
    const int64_t cg = p->c / p->groups, rows = cg * p->kh * p->kw;
    const int64_t oh_n = p->oh, ow_n = p->ow, ohw = oh_n * ow_n;
#pragma omp parallel for if (par && rows * ohw >= CT_CPU_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t c = r / (p->kh * p->kw), i = r / p->kw % p->kh, j = r % p->kw;
        const int64_t offw = j * p->dw - p->pw;
        const int64_t lo = out_lo(offw, p->sw, ow_n),
                      hi = out_hi(offw, p->sw, p->w, ow_n);
        T *row = col + r * ohw;
        for (int64_t oh = 0; oh < oh_n; oh++) {
            const int64_t ih = oh * p->sh - p->ph + i * p->dh;
            T *dst = row + oh * ow_n;
            if (ih < 0 || ih >= p->h) {
                for (int64_t ow = 0; ow < ow_n; ow++) dst[ow] = 0;
                continue;
            }
            const T *src = x + (c * p->h + ih) * p->w + offw;
            for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0;
            if (p->sw == 1)
                for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow];
            else
                for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow * p->sw];
            for (int64_t ow = hi; ow < ow_n; ow++) dst[ow] = 0;
        }
    }
}

/* gx: (Cg, H, W) <- sum of col's patches (gx is overwritten). Parallel over
 * input channels, so no two threads write the same element. */
static void FN(col2im)(const CtConv2dParams *p, const T *col, T *gx, bool par)
{
    const int64_t cg = p->c / p->groups, hw = p->h * p->w;
    const int64_t oh_n = p->oh, ow_n = p->ow, ohw = oh_n * ow_n;
#pragma omp parallel for if (par && cg * p->kh * p->kw * ohw >= CT_CPU_PAR_MIN)
    for (int64_t c = 0; c < cg; c++) {
        T *plane = gx + c * hw;
        for (int64_t e = 0; e < hw; e++) plane[e] = 0;
        for (int64_t i = 0; i < p->kh; i++) {
            for (int64_t j = 0; j < p->kw; j++) {
                const T *row = col + ((c * p->kh + i) * p->kw + j) * ohw;
                const int64_t offw = j * p->dw - p->pw;
                const int64_t lo = out_lo(offw, p->sw, ow_n);
                const int64_t hi = out_hi(offw, p->sw, p->w, ow_n);
                for (int64_t oh = 0; oh < oh_n; oh++) {
                    const int64_t ih = oh * p->sh - p->ph + i * p->dh;
                    if (ih < 0 || ih >= p->h) continue;
                    T *dst = plane + ih * p->w + offw;
                    const T *src = row + oh * ow_n;
                    if (p->sw == 1)
                        for (int64_t ow = lo; ow < hi; ow++) dst[ow] += src[ow];
                    else
                        for (int64_t ow = lo; ow < hi; ow++) dst[ow * p->sw] += src[ow];
                }
            }
        }
    }
}

/* y: (O, OH, OW) of one sample <- conv(x: (C, H, W)) + b. */
static void FN(fwd_sample)(const CtConv2dParams *p, const T *x, const T *w, const T *b,
                           T *y, T *col, bool par)
{
    const int64_t g_n = p->groups, cg = p->c / g_n, og = p->o / g_n;
    const int64_t ckk = cg * p->kh * p->kw, ohw = p->oh * p->ow, hw = p->h * p->w;
    for (int64_t g = 0; g < g_n; g++) {
        const T *xg = x + g * cg * hw;
        const T *src = xg;
        if (col) {
            FN(im2col)(p, xg, col, par);
            src = col;
        }
        GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)og, (int)ohw, (int)ckk, 1,
             w + g * og * ckk, (int)ckk, src, (int)ohw, 0, y + g * og * ohw, (int)ohw);
    }
    if (b)
        for (int64_t o = 0; o < p->o; o++) {
            T *row = y + o * ohw;
            const T bo = b[o];
            for (int64_t e = 0; e < ohw; e++) row[e] += bo;
        }
}

/* gx: (C, H, W) of one sample <- conv_transpose(gy: (O, OH, OW), w). */
static void FN(data_sample)(const CtConv2dParams *p, const T *gy, const T *w, T *gx,
                            T *col, bool par)
{
    const int64_t g_n = p->groups, cg = p->c / g_n, og = p->o / g_n;
    const int64_t ckk = cg * p->kh * p->kw, ohw = p->oh * p->ow, hw = p->h * p->w;
    for (int64_t g = 0; g < g_n; g++) {
        T *dst = col ? col : gx + g * cg * hw;
        GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)ckk, (int)ohw, (int)og, 1,
             w + g * og * ckk, (int)ckk, gy + g * og * ohw, (int)ohw, 0, dst, (int)ohw);
        if (col) FN(col2im)(p, col, gx + g * cg * hw, par);
    }
}

/* gw += gy ⊗ im2col(x) and gb += row sums of gy, for one sample. */
static void FN(weight_sample)(const CtConv2dParams *p, const T *gy, const T *x, T *gw,
                              T *gb, T *col, bool par)
{
    const int64_t g_n = p->groups, cg = p->c / g_n, og = p->o / g_n;
    const int64_t ckk = cg * p->kh * p->kw, ohw = p->oh * p->ow, hw = p->h * p->w;
    if (gw)
        for (int64_t g = 0; g < g_n; g++) {
            const T *xg = x + g * cg * hw;
            const T *src = xg;
            if (col) {
                FN(im2col)(p, xg, col, par);
                src = col;
            }
            GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)og, (int)ckk, (int)ohw, 1,
                 gy + g * og * ohw, (int)ohw, src, (int)ohw, 1, gw + g * og * ckk,
                 (int)ckk);
        }
    if (gb)
        for (int64_t o = 0; o < p->o; o++) {
            const T *row = gy + o * ohw;
            T acc = 0;
            for (int64_t e = 0; e < ohw; e++) acc += row[e];
            gb[o] += acc;
        }
}

/* The three kernels. Scratch: one column buffer per thread (batch-parallel)
 * or one in total (GEMM-parallel), plus per-thread gw/gb accumulators for the
 * weight gradient. */
static CtStatus FN(conv_fwd)(const CtOpCall *c)
{
    const CtConv2dParams *p = c->params;
    const T *x = ct_ptr(c->in[0]), *w = ct_ptr(c->in[1]);
    const T *b = c->in[2] ? ct_ptr(c->in[2]) : NULL;
    T *y = ct_ptr(c->out[0]);
    ConvPlan pl = plan(p, 0);
    T *scratch = NULL;
    Tensor *st = scratch_new(&pl, c->out[0]->dtype, (void **)&scratch);
    if (pl.total && !st) return ct_last_status();
    const int64_t xs = p->c * p->h * p->w, ys = p->o * p->oh * p->ow;
    if (pl.batch) {
        int saved = blas_single_begin();
#pragma omp parallel num_threads(pl.nt)
        {
            T *col = pl.col ? scratch + (int64_t)omp_get_thread_num() * pl.col : NULL;
#pragma omp for schedule(static)
            for (int64_t n = 0; n < p->n; n++)
                FN(fwd_sample)(p, x + n * xs, w, b, y + n * ys, col, false);
        }
        blas_single_end(saved);
    } else {
        for (int64_t n = 0; n < p->n; n++)
            FN(fwd_sample)(p, x + n * xs, w, b, y + n * ys, scratch, true);
    }
    tensor_free(st);
    return CT_OK;
}

static CtStatus FN(conv_bwd_data)(const CtOpCall *c)
{
    const CtConv2dParams *p = c->params;
    const T *gy = ct_ptr(c->in[0]), *w = ct_ptr(c->in[1]);
    T *gx = ct_ptr(c->out[0]);
    ConvPlan pl = plan(p, 0);
    T *scratch = NULL;
    Tensor *st = scratch_new(&pl, c->out[0]->dtype, (void **)&scratch);
    if (pl.total && !st) return ct_last_status();
    const int64_t xs = p->c * p->h * p->w, ys = p->o * p->oh * p->ow;
    if (pl.batch) {
        int saved = blas_single_begin();
#pragma omp parallel num_threads(pl.nt)
        {
            T *col = pl.col ? scratch + (int64_t)omp_get_thread_num() * pl.col : NULL;
#pragma omp for schedule(static)
            for (int64_t n = 0; n < p->n; n++)
                FN(data_sample)(p, gy + n * ys, w, gx + n * xs, col, false);
        }
        blas_single_end(saved);
    } else {
        for (int64_t n = 0; n < p->n; n++)
            FN(data_sample)(p, gy + n * ys, w, gx + n * xs, scratch, true);
    }
    tensor_free(st);
    return CT_OK;
}

static CtStatus FN(conv_bwd_weight)(const CtOpCall *c)
{
    const CtConv2dParams *p = c->params;
    const T *gy = ct_ptr(c->in[0]), *x = ct_ptr(c->in[1]);
    T *gw = c->out[0] ? ct_ptr(c->out[0]) : NULL;
    T *gb = c->out[1] ? ct_ptr(c->out[1]) : NULL;
    const int64_t nw = gw ? tensor_numel(c->out[0]) : 0, nb = gb ? p->o : 0;
    if (gw)
        for (int64_t e = 0; e < nw; e++) gw[e] = 0;
    if (gb)
        for (int64_t e = 0; e < nb; e++) gb[e] = 0;
    /* batch-parallel threads accumulate into private (gw, gb) blocks */
    ConvPlan pl = plan(p, nw + nb);
    T *scratch = NULL;
    Tensor *st =
        scratch_new(&pl, (c->out[0] ? c->out[0] : c->out[1])->dtype, (void **)&scratch);
    if (pl.total && !st) return ct_last_status();
    const int64_t xs = p->c * p->h * p->w, ys = p->o * p->oh * p->ow;
    if (pl.batch) {
        /* zeroed up front: a block stays valid (zero) if the runtime gives
         * us fewer threads than asked for */
        for (int64_t e = 0; e < pl.nt * (nw + nb); e++) scratch[pl.nt * pl.col + e] = 0;
        int saved = blas_single_begin();
#pragma omp parallel num_threads(pl.nt)
        {
            const int64_t t = omp_get_thread_num();
            T *col = pl.col ? scratch + t * pl.col : NULL;
            T *acc = scratch + pl.nt * pl.col + t * (nw + nb);
            T *aw = gw ? acc : NULL, *ab = gb ? acc + nw : NULL;
#pragma omp for schedule(static)
            for (int64_t n = 0; n < p->n; n++)
                FN(weight_sample)(p, gy + n * ys, x + n * xs, aw, ab, col, false);
                /* implicit barrier: every private block is complete */
#pragma omp for schedule(static)
            for (int64_t e = 0; e < nw + nb; e++) {
                const T *blocks = scratch + pl.nt * pl.col + e;
                T s = 0;
                for (int k = 0; k < pl.nt; k++) s += blocks[(int64_t)k * (nw + nb)];
                if (e < nw)
                    gw[e] = s;
                else
                    gb[e - nw] = s;
            }
        }
        blas_single_end(saved);
    } else {
        for (int64_t n = 0; n < p->n; n++)
            FN(weight_sample)(p, gy + n * ys, x + n * xs, gw, gb, scratch, true);
    }
    tensor_free(st);
    return CT_OK;
}

#undef FN
#undef CAT
#undef CAT_
