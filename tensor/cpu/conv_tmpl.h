/* Per-dtype conv2d kernels, included by conv.c once per dtype with
 *   T     the element type (float, double)
 *   SFX   the name suffix (f32, f64)
 *   GEMM  GEMM(n_all, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
 *         the row-major gemm of T over n of the n_all columns of C
 *   SPLITS(m, n, k)  whether GEMM gives the same bits for any split of the
 *         columns of an m x n x k product among a team
 * defined. No include guard on purpose.
 *
 * One sample at a time: for group g, with Ckk = C/groups * kh * kw,
 *   forward:  y_g (O/g, OH*OW)  = w_g (O/g, Ckk) @ col (Ckk, OH*OW)
 *   data:     col               = w_gᵀ @ gy_g,  then col2im into gx
 *   weight:   gw_g             += gy_g @ colᵀ
 * where col = im2col(x_g). A 1x1, stride-1, unpadded conv uses x_g as col.
 * The per-sample functions take a Team: {0, 1} when each thread runs whole
 * samples, or every thread of a parallel region, which then splits im2col,
 * col2im and the gemm's columns and meets at barriers around the shared
 * column buffer. The gemm itself is always single-threaded. Convs with few
 * output pixels a sample run in chunks of samples instead (below). */

#define CAT_(a, b) a##_##b
#define CAT(a, b)  CAT_(a, b)
#define FN(name)   CAT(name, SFX)

/* x[0] + ... + x[n - 1] (a bias gradient's row) in 8 interleaved partial
 * sums, which vectorise (one running sum is a chain of dependent adds),
 * added pairwise, then the tail: a fixed order, so the same bits on any
 * thread. */
static inline T FN(row_sum)(const T *x, int64_t n)
{
    T part[8] = {0};
    int64_t e = 0;
    for (; e + 8 <= n; e += 8)
        for (int q = 0; q < 8; q++) part[q] += x[e + q];
    T acc = ((part[0] + part[4]) + (part[2] + part[6])) +
            ((part[1] + part[5]) + (part[3] + part[7]));
    for (; e < n; e++) acc += x[e];
    return acc;
}

/* One im2col row (channel plane xc, tap i, j) under same_rows(): one copy
 * of the input rows the tap reads, then zeros where a window hangs over the
 * top, bottom, left or right edge. */
static void FN(im2col_row_same)(const CtConv2dParams *p, const T *xc, int64_t i,
                                int64_t j, T *row)
{
    const int64_t w = p->w, offh = i * p->dh - p->ph, offw = j * p->dw - p->pw;
    /* output rows [a, b) read input rows a + offh in [0, H) */
    int64_t a = offh < 0 ? -offh : 0, b = p->h - offh < p->oh ? p->h - offh : p->oh;
    if (b < a) b = a;
    if (a > p->oh) a = b = p->oh;
    memset(row, 0, (size_t)(a * w) * sizeof(T));
    memset(row + b * w, 0, (size_t)((p->oh - b) * w) * sizeof(T));
    if (b == a) return;
    /* row[e] = xc[e + offh * w + offw] for e in [a w, b w), read inside
     * the input rows; the columns that wrap into the next or previous
     * input row are zeroed after */
    const int64_t e0 = a * w + (offw < 0 ? -offw : 0), e1 = b * w - (offw > 0 ? offw : 0);
    if (e1 > e0)
        memcpy(row + e0, xc + e0 + offh * w + offw, (size_t)(e1 - e0) * sizeof(T));
    const int64_t z0 = offw < 0 ? 0 : w - offw, z1 = offw < 0 ? -offw : w;
    for (int64_t oh = a; oh < b; oh++)
        for (int64_t ow = z0 < 0 ? 0 : z0; ow < (z1 < w ? z1 : w); ow++)
            row[oh * w + ow] = 0;
}

/* col: (Cg*kh*kw, OH*OW), rows ld apart, <- patches of x: (Cg, H, W); the
 * team's rows. */
static void FN(im2col)(const CtConv2dParams *p, const T *x, T *col, int64_t ld, Team tm)
{
    const int64_t rows = p->c / p->groups * p->kh * p->kw;
    const int64_t oh_n = p->oh, ow_n = p->ow;
    const bool same = same_rows(p);
    int64_t r0, r1;
    team_range(tm, rows, 1, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t c = r / (p->kh * p->kw), i = r / p->kw % p->kh, j = r % p->kw;
        if (same) {
            FN(im2col_row_same)(p, x + c * p->h * p->w, i, j, col + r * ld);
            continue;
        }
        const int64_t offw = j * p->dw - p->pw;
        const int64_t lo = out_lo(offw, p->sw, ow_n),
                      hi = out_hi(offw, p->sw, p->w, ow_n);
        T *row = col + r * ld;
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

/* gx: (Cg, H, W) <- sum of col's patches (overwritten; col's rows ld apart).
 * The team splits the input channels, so no two threads write the same
 * element. */
static void FN(col2im)(const CtConv2dParams *p, const T *col, int64_t ld, T *gx, Team tm)
{
    const int64_t hw = p->h * p->w;
    const int64_t oh_n = p->oh, ow_n = p->ow;
    int64_t c0, c1;
    team_range(tm, p->c / p->groups, 1, &c0, &c1);
    for (int64_t c = c0; c < c1; c++) {
        T *plane = gx + c * hw;
        for (int64_t e = 0; e < hw; e++) plane[e] = 0;
        for (int64_t i = 0; i < p->kh; i++) {
            for (int64_t j = 0; j < p->kw; j++) {
                const T *row = col + ((c * p->kh + i) * p->kw + j) * ld;
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

/* dst[0..n) <- src (+ *bias unless NULL), then ReLU when relu, with
 * tensor_relu's expression (NaN and -0 pass as they do there). dst may be
 * src. */
static inline void FN(bias_relu_row)(T *dst, const T *src, int64_t n, const T *bias,
                                     bool relu)
{
    const T bo = bias ? *bias : 0;
    if (bias && relu)
        for (int64_t e = 0; e < n; e++) {
            const T v = src[e] + bo;
            dst[e] = v < 0 ? (T)0 : v;
        }
    else if (relu)
        for (int64_t e = 0; e < n; e++) dst[e] = src[e] < 0 ? (T)0 : src[e];
    else if (bias)
        for (int64_t e = 0; e < n; e++) dst[e] = src[e] + bo;
    else if (dst != src)
        memcpy(dst, src, (size_t)n * sizeof(T));
}

/* y: (O, OH, OW) of one sample <- conv(x: (C, H, W)) + b, then ReLU when
 * p->relu; the team splits the output columns. */
static void FN(fwd_sample)(const CtConv2dParams *p, const T *x, const T *w, const T *b,
                           T *y, T *col, Team tm)
{
    const int64_t g_n = p->groups, cg = p->c / g_n, og = p->o / g_n;
    const int64_t ckk = cg * p->kh * p->kw, ohw = p->oh * p->ow, hw = p->h * p->w;
    int64_t e0, e1;
    gemm_range(tm, ohw, 16, SPLITS(og, ohw, ckk), &e0, &e1);
    for (int64_t g = 0; g < g_n; g++) {
        const T *src = x + g * cg * hw;
        if (col) {
            FN(im2col)(p, src, col, ohw, tm);
            team_barrier(tm);
            src = col;
        }
        if (e1 > e0)
            GEMM(ohw, CblasNoTrans, CblasNoTrans, (int)og, (int)(e1 - e0), (int)ckk, 1,
                 w + g * og * ckk, (int)ckk, src + e0, (int)ohw, 0, y + g * og * ohw + e0,
                 (int)ohw);
        if (col) team_barrier(tm); /* col is refilled for the next group */
    }
    for (int64_t o = 0; (b || p->relu) && o < p->o; o++) {
        T *row = y + o * ohw + e0;
        FN(bias_relu_row)(row, row, e1 - e0, b ? b + o : NULL, p->relu);
    }
}

/* gx: (C, H, W) of one sample <- conv_transpose(gy: (O, OH, OW), w). */
static void FN(data_sample)(const CtConv2dParams *p, const T *gy, const T *w, T *gx,
                            T *col, Team tm)
{
    const int64_t g_n = p->groups, cg = p->c / g_n, og = p->o / g_n;
    const int64_t ckk = cg * p->kh * p->kw, ohw = p->oh * p->ow, hw = p->h * p->w;
    int64_t e0, e1;
    gemm_range(tm, ohw, 16, SPLITS(ckk, ohw, og), &e0, &e1);
    for (int64_t g = 0; g < g_n; g++) {
        T *dst = col ? col : gx + g * cg * hw; /* 1x1: ohw == hw */
        if (e1 > e0)
            GEMM(ohw, CblasTrans, CblasNoTrans, (int)ckk, (int)(e1 - e0), (int)og, 1,
                 w + g * og * ckk, (int)ckk, gy + g * og * ohw + e0, (int)ohw, 0,
                 dst + e0, (int)ohw);
        if (col) {
            team_barrier(tm);
            FN(col2im)(p, col, ohw, gx + g * cg * hw, tm);
            team_barrier(tm);
        }
    }
}

/* gw += gy ⊗ im2col(x) and gb += row sums of gy, for one sample (fresh:
 * gw = and gb = instead, so nothing needs zeroing first); the team splits
 * gw's columns and gb. */
static void FN(weight_sample)(const CtConv2dParams *p, const T *gy, const T *x, T *gw,
                              T *gb, T *col, bool fresh, Team tm)
{
    const int64_t g_n = p->groups, cg = p->c / g_n, og = p->o / g_n;
    const int64_t ckk = cg * p->kh * p->kw, ohw = p->oh * p->ow, hw = p->h * p->w;
    int64_t k0, k1;
    gemm_range(tm, ckk, 1, SPLITS(og, ckk, ohw), &k0, &k1);
    if (gw)
        for (int64_t g = 0; g < g_n; g++) {
            const T *src = x + g * cg * hw;
            if (col) {
                FN(im2col)(p, src, col, ohw, tm);
                team_barrier(tm);
                src = col;
            }
            if (k1 > k0)
                GEMM(ckk, CblasNoTrans, CblasTrans, (int)og, (int)(k1 - k0), (int)ohw, 1,
                     gy + g * og * ohw, (int)ohw, src + k0 * ohw, (int)ohw, fresh ? 0 : 1,
                     gw + g * og * ckk + k0, (int)ckk);
            if (col) team_barrier(tm);
        }
    if (gb) {
        int64_t o0, o1;
        team_range(tm, p->o, 1, &o0, &o1);
        for (int64_t o = o0; o < o1; o++)
            gb[o] = (fresh ? 0 : gb[o]) + FN(row_sum)(gy + o * ohw, ohw);
    }
}

/* ---- chunks of samples: the columns of `per` samples side by side ----
 * With G (O, L) the chunk's outputs or output gradients, sample s's OHW
 * columns at s * OHW (L = samples * OHW), and col: (Ckk, L):
 *   forward:  G = w @ col, then copied out to y (+ bias)
 *   data:     col = wᵀ @ G, then col2im of each sample's columns into gx
 *   weight:   gw += G @ colᵀ, gb += row sums of G
 * Each product is one GEMM on the engine pool (ct_cpu_matmul), wide enough
 * to run near the engine's speed where a sample's own GEMM would be a
 * few columns wide; im2col, col2im and the copies run one sample per pool
 * item. groups == 1 only. */
typedef struct FN(ChunkJob) {
    const CtConv2dParams *p;
    const int32_t *taps; /* tap_table() */
    int64_t n0, ld;      /* the chunk's first sample; L */
    const T *x, *w, *b, *gy;
    T *y, *gx, *gw, *gb; /* the kernel's outputs */
    T *col, *g;          /* scratch: col (Ckk, L), G (O, L) */
} FN(ChunkJob);

/* im2col and col2im of one sample through the tap table: a few output
 * pixels a row, where the row-wise loops above spend more on bounds than
 * on copying. Padding taps point at slot hw, which in a plane-sized buffer
 * on the stack holds a zero for im2col and is a sink for col2im, so the
 * loops take no branch per element; planes too large for that
 * (CHUNK_STACK_PLANE) test each tap instead. Same sums in the same order
 * as col2im(). */
#define CHUNK_STACK_PLANE 2048
/* col's rows are L = samples * OHW apart, a cache line or two of this
 * sample's in each: the loops prefetch the row this many ahead (halved
 * col2im's share of a ResNet-18 step on Zen 3; the hardware prefetchers
 * did not follow the stride). */
#define CHUNK_PREFETCH_ROWS 8
static void FN(im2col_taps)(const FN(ChunkJob) * j, const T *x, T *col)
{
    const CtConv2dParams *p = j->p;
    const int64_t taps = p->kh * p->kw, ohw = p->oh * p->ow, hw = p->h * p->w;
    const bool staged = hw < CHUNK_STACK_PLANE;
    T buf[CHUNK_STACK_PLANE];
    for (int64_t c = 0; c < p->c; c++) {
        const T *xc = x + c * hw;
        if (staged) {
            memcpy(buf, xc, (size_t)hw * sizeof(T));
            buf[hw] = 0;
        }
        for (int64_t t = 0; t < taps; t++) {
            const int32_t *ti = j->taps + t * ohw;
            T *row = col + (c * taps + t) * j->ld;
            __builtin_prefetch(row + CHUNK_PREFETCH_ROWS * j->ld, 1);
            if (staged)
                for (int64_t e = 0; e < ohw; e++) row[e] = buf[ti[e]];
            else
                for (int64_t e = 0; e < ohw; e++) row[e] = ti[e] < hw ? xc[ti[e]] : 0;
        }
    }
}

static void FN(col2im_taps)(const FN(ChunkJob) * j, const T *col, T *gx)
{
    const CtConv2dParams *p = j->p;
    const int64_t taps = p->kh * p->kw, ohw = p->oh * p->ow, hw = p->h * p->w;
    const bool staged = hw < CHUNK_STACK_PLANE;
    T buf[CHUNK_STACK_PLANE];
    for (int64_t c = 0; c < p->c; c++) {
        T *plane = staged ? buf : gx + c * hw;
        memset(plane, 0, (size_t)hw * sizeof(T));
        for (int64_t t = 0; t < taps; t++) {
            const int32_t *ti = j->taps + t * ohw;
            const T *row = col + (c * taps + t) * j->ld;
            __builtin_prefetch(row + CHUNK_PREFETCH_ROWS * j->ld);
            if (staged)
                for (int64_t e = 0; e < ohw; e++) plane[ti[e]] += row[e];
            else
                for (int64_t e = 0; e < ohw; e++)
                    if (ti[e] < hw) plane[ti[e]] += row[e];
        }
        if (staged) memcpy(gx + c * hw, buf, (size_t)hw * sizeof(T));
    }
}

/* G's columns of chunk sample s <- gy's sample, or y's sample <- them + b. */
static void FN(chunk_copy)(const FN(ChunkJob) * j, int64_t s, bool to_g)
{
    const CtConv2dParams *p = j->p;
    const int64_t ohw = p->oh * p->ow;
    for (int64_t o = 0; o < p->o; o++) {
        T *gc = j->g + o * j->ld + s * ohw;
        if (to_g) {
            memcpy(gc, j->gy + ((j->n0 + s) * p->o + o) * ohw, (size_t)ohw * sizeof(T));
            continue;
        }
        FN(bias_relu_row)
        (j->y + ((j->n0 + s) * p->o + o) * ohw, gc, ohw, j->b ? j->b + o : NULL, p->relu);
    }
}

static void FN(chunk_im2col_item)(void *ctx, int64_t s, int slot)
{
    (void)slot;
    const FN(ChunkJob) *j = ctx;
    const CtConv2dParams *p = j->p;
    FN(im2col_taps)
    (j, j->x + (j->n0 + s) * p->c * p->h * p->w, j->col + s * p->oh * p->ow);
    if (j->gy) FN(chunk_copy)(j, s, true);
}

static void FN(chunk_out_item)(void *ctx, int64_t s, int slot)
{
    (void)slot;
    FN(chunk_copy)(ctx, s, false);
}

static void FN(chunk_gather_item)(void *ctx, int64_t s, int slot)
{
    (void)slot;
    FN(chunk_copy)(ctx, s, true);
}

static void FN(chunk_col2im_item)(void *ctx, int64_t s, int slot)
{
    (void)slot;
    const FN(ChunkJob) *j = ctx;
    const CtConv2dParams *p = j->p;
    FN(col2im_taps)
    (j, j->col + s * p->oh * p->ow, j->gx + (j->n0 + s) * p->c * p->h * p->w);
}

/* One chunk of cnt samples from j->n0 (j->ld = cnt * OHW), nt threads. */
typedef CtStatus (*FN(ChunkStep))(FN(ChunkJob) * j, int64_t cnt, int nt);

static CtStatus FN(chunk_fwd)(FN(ChunkJob) * j, int64_t cnt, int nt)
{
    const CtConv2dParams *p = j->p;
    ct_workers_run(cnt, nt, FN(chunk_im2col_item), j);
    CtMatmulParams mm = {.batch = 1,
                         .m = p->o,
                         .n = j->ld,
                         .k = p->c * p->kh * p->kw,
                         .alpha = 1,
                         .autocast = p->autocast};
    CtStatus st = ct_cpu_matmul(&mm, DT, j->w, j->col, j->g);
    if (st == CT_OK) ct_workers_run(cnt, nt, FN(chunk_out_item), j);
    return st;
}

static CtStatus FN(chunk_data)(FN(ChunkJob) * j, int64_t cnt, int nt)
{
    const CtConv2dParams *p = j->p;
    ct_workers_run(cnt, nt, FN(chunk_gather_item), j);
    CtMatmulParams mm = {.batch = 1,
                         .m = p->c * p->kh * p->kw,
                         .n = j->ld,
                         .k = p->o,
                         .trans_a = true,
                         .alpha = 1,
                         .autocast = p->autocast};
    CtStatus st = ct_cpu_matmul(&mm, DT, j->w, j->g, j->col);
    if (st == CT_OK) ct_workers_run(cnt, nt, FN(chunk_col2im_item), j);
    return st;
}

/* gw and gb accumulate over the chunks; the first one writes them. */
static CtStatus FN(chunk_weight)(FN(ChunkJob) * j, int64_t cnt, int nt)
{
    const CtConv2dParams *p = j->p;
    CtStatus st = CT_OK;
    ct_workers_run(cnt, nt, j->gw ? FN(chunk_im2col_item) : FN(chunk_gather_item), j);
    if (j->gw) {
        CtMatmulParams mm = {.batch = 1,
                             .m = p->o,
                             .n = p->c * p->kh * p->kw,
                             .k = j->ld,
                             .trans_b = true,
                             .alpha = 1,
                             .beta = j->n0 ? 1 : 0,
                             .autocast = p->autocast};
        st = ct_cpu_matmul(&mm, DT, j->g, j->col, j->gw);
    }
    for (int64_t o = 0; j->gb && o < p->o; o++)
        j->gb[o] = (j->n0 ? j->gb[o] : 0) + FN(row_sum)(j->g + o * j->ld, j->ld);
    return st;
}

/* Runs step over the batch's chunks of `per` samples, in order, with the
 * scratch (col and G of a whole chunk) and tap table they share. */
static CtStatus FN(conv_chunks)(FN(ChunkJob) * j, int64_t per, FN(ChunkStep) step)
{
    const CtConv2dParams *p = j->p;
    const int64_t ckk = p->c * p->kh * p->kw, ohw = p->oh * p->ow;
    const ConvPlan pl = {.total = (ckk + p->o) * per * ohw};
    Tensor *st = scratch_new(&pl, DT, (void **)&j->col);
    int32_t *taps = st ? tap_table(p) : NULL;
    if (!taps) {
        tensor_free(st);
        return ct_last_status();
    }
    j->taps = taps;
    j->g = j->col + ckk * per * ohw;
    CtStatus s = CT_OK;
    for (j->n0 = 0; j->n0 < p->n && s == CT_OK; j->n0 += per) {
        const int64_t cnt = p->n - j->n0 < per ? p->n - j->n0 : per;
        j->ld = cnt * ohw;
        s = step(j, cnt, ct_workers_max());
    }
    free(taps);
    tensor_free(st);
    return s;
}

/* The three kernels. Scratch: a column buffer per thread (batch-parallel)
 * or one shared by the team, plus per-thread gw/gb accumulators for the
 * batch-parallel weight gradient. */
/* Pool items of the batch-parallel path: one sample each, with the slot's
 * own column buffer (and weight-gradient accumulators). */
typedef struct FN(ConvJob) {
    const CtConv2dParams *p;
    const ConvPlan *pl;
    const T *x, *w, *b, *gy;
    T *y, *gx, *scratch, *blocks;
    int64_t per; /* samples per weight-gradient chunk */
    bool want_w, want_b;
} FN(ConvJob);

static T *FN(slot_col)(const FN(ConvJob) * j, int slot)
{
    return j->pl->col ? j->scratch + (int64_t)slot * j->pl->col : NULL;
}

static void FN(fwd_item)(void *ctx, int64_t n, int slot)
{
    const FN(ConvJob) *j = ctx;
    const CtConv2dParams *p = j->p;
    FN(fwd_sample)
    (p, j->x + n * p->c * p->h * p->w, j->w, j->b, j->y + n * p->o * p->oh * p->ow,
     FN(slot_col)(j, slot), SOLO);
}

static void FN(data_item)(void *ctx, int64_t n, int slot)
{
    const FN(ConvJob) *j = ctx;
    const CtConv2dParams *p = j->p;
    FN(data_sample)
    (p, j->gy + n * p->o * p->oh * p->ow, j->w, j->gx + n * p->c * p->h * p->w,
     FN(slot_col)(j, slot), SOLO);
}

/* Item ch: the samples of chunk ch, in order, into the chunk's own block
 * (written by the first, so blocks need no zeroing). */
static void FN(weight_item)(void *ctx, int64_t ch, int slot)
{
    const FN(ConvJob) *j = ctx;
    const CtConv2dParams *p = j->p;
    const int64_t nw = p->o * (p->c / p->groups) * p->kh * p->kw;
    T *acc = j->blocks + ch * (nw + p->o);
    const int64_t n1 = (ch + 1) * j->per < p->n ? (ch + 1) * j->per : p->n;
    for (int64_t n = ch * j->per; n < n1; n++) FN(weight_sample)
    (p, j->gy + n * p->o * p->oh * p->ow, j->x + n * p->c * p->h * p->w,
     j->want_w ? acc : NULL, j->want_b ? acc + nw : NULL, FN(slot_col)(j, slot),
     n == ch * j->per, SOLO);
}

static CtStatus FN(conv_fwd)(const CtOpCall *c)
{
    const CtConv2dParams *p = c->params;
    const T *x = ct_ptr(c->in[0]), *w = ct_ptr(c->in[1]);
    const T *b = c->in[2] ? ct_ptr(c->in[2]) : NULL;
    T *y = ct_ptr(c->out[0]);
    if (chunk_samples(p)) {
        FN(ChunkJob) j = {.p = p, .x = x, .w = w, .b = b, .y = y};
        return FN(conv_chunks)(&j, chunk_samples(p), FN(chunk_fwd));
    }
    ConvPlan pl = plan(p, 0);
    T *scratch = NULL;
    Tensor *st = scratch_new(&pl, c->out[0]->dtype, (void **)&scratch);
    if (pl.total && !st) return ct_last_status();
    const int64_t xs = p->c * p->h * p->w, ys = p->o * p->oh * p->ow;
    if (pl.batch) {
        FN(ConvJob)
        j = {.p = p, .pl = &pl, .x = x, .w = w, .b = b, .y = y, .scratch = scratch};
        ct_workers_run(p->n, pl.nt, FN(fwd_item), &j);
    } else {
#pragma omp parallel num_threads(pl.nt)
        {
            Team tm = team_here();
            for (int64_t n = 0; n < p->n; n++)
                FN(fwd_sample)(p, x + n * xs, w, b, y + n * ys, scratch, tm);
        }
    }
    tensor_free(st);
    return CT_OK;
}

static CtStatus FN(conv_bwd_data)(const CtOpCall *c)
{
    const CtConv2dParams *p = c->params;
    const T *gy = ct_ptr(c->in[0]), *w = ct_ptr(c->in[1]);
    T *gx = ct_ptr(c->out[0]);
    if (chunk_samples(p)) {
        FN(ChunkJob) j = {.p = p, .gy = gy, .w = w, .gx = gx};
        return FN(conv_chunks)(&j, chunk_samples(p), FN(chunk_data));
    }
    ConvPlan pl = plan(p, 0);
    T *scratch = NULL;
    Tensor *st = scratch_new(&pl, c->out[0]->dtype, (void **)&scratch);
    if (pl.total && !st) return ct_last_status();
    const int64_t xs = p->c * p->h * p->w, ys = p->o * p->oh * p->ow;
    if (pl.batch) {
        FN(ConvJob)
        j = {.p = p, .pl = &pl, .gy = gy, .w = w, .gx = gx, .scratch = scratch};
        ct_workers_run(p->n, pl.nt, FN(data_item), &j);
    } else {
#pragma omp parallel num_threads(pl.nt)
        {
            Team tm = team_here();
            for (int64_t n = 0; n < p->n; n++)
                FN(data_sample)(p, gy + n * ys, w, gx + n * xs, scratch, tm);
        }
    }
    tensor_free(st);
    return CT_OK;
}

/* out[e] = blocks[0][e] + blocks[1][e] + ... (nblk blocks, stride apart),
 * added in block order, one pass over out in tiles that stay in L1. */
static void FN(sum_blocks)(const T *blocks, int64_t nblk, int64_t stride, int64_t n,
                           T *out)
{
    enum { TILE = 512 };
    for (int64_t e0 = 0; e0 < n; e0 += TILE) {
        const int64_t len = n - e0 < TILE ? n - e0 : TILE;
        T *o = out + e0;
        memcpy(o, blocks + e0, (size_t)len * sizeof(T));
        for (int64_t k = 1; k < nblk; k++) {
            const T *src = blocks + k * stride + e0;
            for (int64_t e = 0; e < len; e++) o[e] += src[e];
        }
    }
}

static CtStatus FN(conv_bwd_weight)(const CtOpCall *c)
{
    const CtConv2dParams *p = c->params;
    const T *gy = ct_ptr(c->in[0]), *x = ct_ptr(c->in[1]);
    T *gw = c->out[0] ? ct_ptr(c->out[0]) : NULL;
    T *gb = c->out[1] ? ct_ptr(c->out[1]) : NULL;
    const int64_t nw = p->o * (p->c / p->groups) * p->kh * p->kw, nb = p->o;
    if (p->n == 0) { /* no sample writes them */
        if (gw) memset(gw, 0, (size_t)nw * sizeof(T));
        if (gb) memset(gb, 0, (size_t)nb * sizeof(T));
        return CT_OK;
    }
    if (chunk_samples(p)) {
        FN(ChunkJob) j = {.p = p, .gy = gy, .x = x, .gw = gw, .gb = gb};
        return FN(conv_chunks)(&j, chunk_samples(p), FN(chunk_weight));
    }
    ConvPlan pl = weight_plan(p, nw + nb);
    T *scratch = NULL;
    Tensor *st =
        scratch_new(&pl, (c->out[0] ? c->out[0] : c->out[1])->dtype, (void **)&scratch);
    if (pl.total && !st) return ct_last_status();
    const int64_t xs = p->c * p->h * p->w, ys = p->o * p->oh * p->ow;
    if (pl.chunks > 0) {
        /* every chunk sums its samples into its own (gw, gb) block after
         * the slots' column buffers; the blocks are then added in chunk
         * order (chunks past the last sample stay empty) */
        const int64_t per = (p->n + pl.chunks - 1) / pl.chunks;
        const int64_t used = (p->n + per - 1) / per;
        T *blocks = scratch + pl.nt * pl.col;
        FN(ConvJob)
        j = {.p = p,
             .pl = &pl,
             .gy = gy,
             .x = x,
             .scratch = scratch,
             .blocks = blocks,
             .per = per,
             .want_w = gw != NULL,
             .want_b = gb != NULL};
        ct_workers_run(used, pl.nt, FN(weight_item), &j);
        if (gw) FN(sum_blocks)(blocks, used, nw + nb, nw, gw);
        if (gb) FN(sum_blocks)(blocks + nw, used, nw + nb, nb, gb);
    } else {
#pragma omp parallel num_threads(pl.nt)
        {
            Team tm = team_here();
            for (int64_t n = 0; n < p->n; n++) FN(weight_sample)
            (p, gy + n * ys, x + n * xs, gw, gb, scratch, n == 0, tm);
        }
    }
    tensor_free(st);
    return CT_OK;
}

#undef FN
#undef CAT
#undef CAT_

/* the parameters too, so the next instantiation defines them afresh */
#undef T
#undef SFX
#undef GEMM
#undef SPLITS
#undef DT
