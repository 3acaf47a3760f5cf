/* cuda_host_pool: the pooling thread bodies (tensor/cuda/pool_body.h)
 * against the CPU backend's POOL2D and POOL2D_BWD, bit for bit: max (with
 * the 2x2 fast path of the CPU, ties, NaN, padding, ceil mode), average
 * (count_include_pad on and off, with ceil-mode windows hanging past the
 * padded edge) and adaptive average (uneven bins), f32 and f64, planes
 * past one block and an empty batch, NCHW and channels last; each with the
 * index arithmetic by multiply-shift (CtPoolDivs.fast) and by division. */
#include <math.h>

#include "harness.h"
#include "tensor/cuda/pool_body.h"

typedef struct PoolCase {
    CtPoolKind kind;
    int64_t n, c, h, w;
    int k, s, pad;
    bool ceil_mode, include_pad;
    int64_t oh, ow; /* adaptive only; else PyTorch's rule below */
} PoolCase;

static const PoolCase cases[] = {
    {CT_POOL_MAX, 2, 3, 8, 6, 2, 2, 0, false, false, 0, 0},  /* CPU's 2x2 path */
    {CT_POOL_MAX, 1, 2, 7, 9, 3, 2, 1, true, false, 0, 0},   /* padding, ceil */
    {CT_POOL_MAX, 0, 2, 5, 5, 2, 2, 0, false, false, 0, 0},  /* empty batch */
    {CT_POOL_AVG, 2, 2, 7, 5, 3, 2, 1, true, true, 0, 0},    /* window past the pad */
    {CT_POOL_AVG, 2, 2, 7, 5, 3, 2, 1, true, false, 0, 0},   /* clipped divisor */
    {CT_POOL_AVG, 1, 300, 4, 4, 2, 1, 0, false, true, 0, 0}, /* many planes */
    {CT_POOL_ADAPTIVE_AVG, 2, 3, 7, 10, 0, 0, 0, false, false, 3, 4},
    {CT_POOL_ADAPTIVE_AVG, 1, 2, 5, 5, 0, 0, 0, false, false, 1, 1},
};

/* Output length along one dim (tensor/pool.c's rule). */
static int64_t out_len(int64_t in, int k, int s, int pad, bool ceil_mode)
{
    int64_t span = in + 2 * (int64_t)pad - k;
    int64_t o = (ceil_mode ? span + s - 1 : span) / s + 1;
    if (ceil_mode && (o - 1) * s >= in + pad) o--;
    return o;
}

static CtPool2dParams params_of(const PoolCase &pc)
{
    CtPool2dParams p = {};
    p.kind = pc.kind;
    p.n = pc.n, p.c = pc.c, p.h = pc.h, p.w = pc.w;
    p.kh = p.kw = pc.k;
    p.sh = p.sw = pc.s;
    p.ph = p.pw = pc.pad;
    p.count_include_pad = pc.include_pad;
    p.oh = pc.kind == CT_POOL_ADAPTIVE_AVG
               ? pc.oh
               : out_len(pc.h, pc.k, pc.s, pc.pad, pc.ceil_mode);
    p.ow = pc.kind == CT_POOL_ADAPTIVE_AVG
               ? pc.ow
               : out_len(pc.w, pc.k, pc.s, pc.pad, pc.ceil_mode);
    return p;
}

/* Values with ties (multiples of 1/4) and, for max, a NaN. */
template <typename T> static Tensor *input(int64_t n, CtDType dt, bool nan, unsigned seed)
{
    Tensor *t = ch_buffer(n, dt);
    T *v = (T *)ct_ptr(t);
    for (int64_t i = 0; i < n; i++)
        v[i] = (T)((int64_t)((i * 37 + seed * 11) % 13) - 6) / 4;
    if (nan && n > 5) v[5] = (T)NAN;
    return t;
}

/* Channels last (CtPool2dParams.nhwc): the bodies on x and gy permuted
 * give the CPU's NCHW y, argmax and gx (check_case's), permuted, bit for
 * bit; by multiply-shift and by division, under both launch shapes. */
template <int DT>
static void check_nhwc(CtPool2dParams p, CtDType dt, const Tensor *x, const Tensor *gy,
                       const Tensor *y, const Tensor *idx, const Tensor *gx)
{
    typedef typename CtHdType<DT>::S T;
    bool max = p.kind == CT_POOL_MAX;
    int64_t nx = p.n * p.c * p.h * p.w, ny = p.n * p.c * p.oh * p.ow;
    const int64_t hw = p.h * p.w, ohw = p.oh * p.ow;
    Tensor *xl = ch_permuted(x, p.n, p.c, hw, false),
           *gyl = ch_permuted(gy, p.n, p.c, ohw, false);
    Tensor *idxl = max ? ch_permuted(idx, p.n, p.c, ohw, false) : NULL;
    p.nhwc = true;
    ChShape fs[2], bs[2];
    int nf = ch_shapes(ny, fs);
    ch_shapes(nx, bs);
    CtPoolDivs dv = ct_pool_divs(&p);
    for (int k = 0; k < 2 * nf; k++) {
        dv.fast = k < nf;
        Tensor *y2 = ch_buffer(ny, dt), *idx2 = max ? ch_buffer(ny, CT_I64) : NULL;
        Tensor *gx2 = ch_buffer(nx, dt);
        ch_launch(fs[k % nf].grid, fs[k % nf].block, [&](CtThread t) {
            ct_pool_fwd_body<DT>(t, p, dv, (const T *)ct_ptr(xl), (T *)ct_ptr(y2),
                                 idx2 ? (int64_t *)ct_ptr(idx2) : NULL);
        });
        ch_launch(bs[k % nf].grid, bs[k % nf].block, [&](CtThread t) {
            ct_pool_bwd_body<DT>(t, p, dv, (const T *)ct_ptr(gyl),
                                 idxl ? (const int64_t *)ct_ptr(idxl) : NULL,
                                 (T *)ct_ptr(gx2));
        });
        Tensor *yb = ch_permuted(y2, p.n, p.c, ohw, true),
               *gxb = ch_permuted(gx2, p.n, p.c, hw, true);
        Tensor *idxb = max ? ch_permuted(idx2, p.n, p.c, ohw, true) : NULL;
        ch_assert_same_bytes(y, yb, "y (nhwc)");
        if (max) ch_assert_same_bytes(idx, idxb, "argmax (nhwc)");
        ch_assert_same_bytes(gx, gxb, "gx (nhwc)");
        Tensor *tmp[] = {y2, idx2, gx2, yb, gxb, idxb};
        for (Tensor *t : tmp) tensor_free(t);
    }
    Tensor *all[] = {xl, gyl, idxl};
    for (Tensor *t : all) tensor_free(t);
}

template <int DT> static void check_case(const PoolCase &pc, CtDType dt)
{
    typedef typename CtHdType<DT>::S T;
    CtPool2dParams p = params_of(pc);
    bool max = p.kind == CT_POOL_MAX;
    int64_t nx = p.n * p.c * p.h * p.w, ny = p.n * p.c * p.oh * p.ow;
    Tensor *x = input<T>(nx, dt, max, 1), *gy = input<T>(ny, dt, false, 2);
    Tensor *y = ch_buffer(ny, dt), *idx = max ? ch_buffer(ny, CT_I64) : NULL;
    Tensor *gx = ch_buffer(nx, dt);
    CtOpCall fwd = {CT_OP_POOL2D, {y, idx}, {x}, &p, NULL, NULL};
    ck_assert_int_eq(ct_dispatch(&fwd), CT_OK);
    CtOpCall bwd = {CT_OP_POOL2D_BWD, {gx}, {gy, idx}, &p, NULL, NULL};
    ck_assert_int_eq(ct_dispatch(&bwd), CT_OK);
    ChShape fs[2], bs[2];
    int nf = ch_shapes(ny, fs);
    ch_shapes(nx, bs);
    CtPoolDivs dv = ct_pool_divs(&p);
    ck_assert(dv.fast);
    for (int k = 0; k < 2 * nf; k++) {
        dv.fast = k < nf; /* then the division path, same shapes */
        Tensor *y2 = ch_buffer(ny, dt), *idx2 = max ? ch_buffer(ny, CT_I64) : NULL;
        Tensor *gx2 = ch_buffer(nx, dt);
        ch_launch(fs[k % nf].grid, fs[k % nf].block, [&](CtThread t) {
            ct_pool_fwd_body<DT>(t, p, dv, (const T *)ct_ptr(x), (T *)ct_ptr(y2),
                                 idx2 ? (int64_t *)ct_ptr(idx2) : NULL);
        });
        ch_launch(bs[k % nf].grid, bs[k % nf].block, [&](CtThread t) {
            ct_pool_bwd_body<DT>(t, p, dv, (const T *)ct_ptr(gy),
                                 idx ? (const int64_t *)ct_ptr(idx) : NULL,
                                 (T *)ct_ptr(gx2));
        });
        ch_assert_same_bytes(y, y2, "y");
        if (max) ch_assert_same_bytes(idx, idx2, "argmax");
        ch_assert_same_bytes(gx, gx2, "gx");
        tensor_free(y2);
        tensor_free(idx2);
        tensor_free(gx2);
    }
    check_nhwc<DT>(p, dt, x, gy, y, idx, gx);
    Tensor *all[] = {x, gy, y, idx, gx};
    for (Tensor *t : all) tensor_free(t);
}

/* A copy of buffer b in dtype dt (rounded to nearest even). */
static Tensor *ch_convert(const Tensor *b, CtDType dt)
{
    Tensor *t = ch_buffer(tensor_numel(b), dt);
    ck_assert_int_eq(tensor_copy_(t, (Tensor *)b), CT_OK);
    return t;
}

/* bf16 and f16, which the CPU's kernel lacks: the bodies on the rounded
 * inputs (the values are exact in both) against the CPU's f32 results,
 * rounded once. */
template <int DT> static void check_case_low(const PoolCase &pc, CtDType dt)
{
    typedef typename CtHdType<DT>::S T;
    CtPool2dParams p = params_of(pc);
    bool max = p.kind == CT_POOL_MAX;
    int64_t nx = p.n * p.c * p.h * p.w, ny = p.n * p.c * p.oh * p.ow;
    Tensor *xf = input<float>(nx, CT_F32, max, 1),
           *gyf = input<float>(ny, CT_F32, false, 2);
    Tensor *yf = ch_buffer(ny, CT_F32), *idx = max ? ch_buffer(ny, CT_I64) : NULL;
    Tensor *gxf = ch_buffer(nx, CT_F32);
    CtOpCall fwd = {CT_OP_POOL2D, {yf, idx}, {xf}, &p, NULL, NULL};
    ck_assert_int_eq(ct_dispatch(&fwd), CT_OK);
    CtOpCall bwd = {CT_OP_POOL2D_BWD, {gxf}, {gyf, idx}, &p, NULL, NULL};
    ck_assert_int_eq(ct_dispatch(&bwd), CT_OK);
    Tensor *x = ch_convert(xf, dt), *gy = ch_convert(gyf, dt);
    Tensor *y = ch_convert(yf, dt), *gx = ch_convert(gxf, dt);
    Tensor *y2 = ch_buffer(ny, dt), *idx2 = max ? ch_buffer(ny, CT_I64) : NULL;
    Tensor *gx2 = ch_buffer(nx, dt);
    const CtPoolDivs dv = ct_pool_divs(&p);
    ch_launch(3, 32, [&](CtThread t) {
        ct_pool_fwd_body<DT>(t, p, dv, (const T *)ct_ptr(x), (T *)ct_ptr(y2),
                             idx2 ? (int64_t *)ct_ptr(idx2) : NULL);
    });
    ch_launch(3, 32, [&](CtThread t) {
        ct_pool_bwd_body<DT>(t, p, dv, (const T *)ct_ptr(gy),
                             idx ? (const int64_t *)ct_ptr(idx) : NULL, (T *)ct_ptr(gx2));
    });
    ch_assert_same_bytes(y, y2, "y (low)");
    if (max) ch_assert_same_bytes(idx, idx2, "argmax (low)");
    ch_assert_same_bytes(gx, gx2, "gx (low)");
    Tensor *all[] = {xf, gyf, yf, idx, gxf, x, gy, y, gx, y2, idx2, gx2};
    for (Tensor *t : all) tensor_free(t);
}

START_TEST(test_pool_bodies_match_cpu)
{
    int checked = 0;
    for (const PoolCase &pc : cases) {
        check_case<CT_F32>(pc, CT_F32);
        check_case<CT_F64>(pc, CT_F64);
        check_case_low<CT_BF16>(pc, CT_BF16);
        check_case_low<CT_F16>(pc, CT_F16);
        checked += 4;
    }
    ck_assert_int_eq(checked, 32);
}
END_TEST

/* ct_pool_candidates with stride s, by multiply-shift and by division. */
static void candidates(int64_t in, int64_t k, int s, int pad, int64_t out, bool adaptive,
                       int64_t lo, int64_t hi)
{
    const CtFastDiv d = ct_fastdiv_make(s > 0 ? s : 1);
    for (int fast = 0; fast < 2; fast++) {
        int64_t l, h;
        ct_pool_candidates(in, k, d, pad, out, adaptive, fast, &l, &h);
        ck_assert_int_eq(l, lo);
        ck_assert_int_eq(h, hi);
    }
}

START_TEST(test_candidates)
{
    /* k 3, s 2, pad 1: window o covers inputs [2o - 1, 2o + 2), so input 4
     * is in window 2 ([3, 6)) only */
    candidates(4, 3, 2, 1, 4, false, 2, 3);
    candidates(0, 3, 2, 1, 4, false, 0, 1); /* window 0: [-1, 2) */
    candidates(5, 3, 2, 1, 3, false, 2, 3); /* windows 2 and 3; 3 outputs */
    candidates(6, 3, 2, 1, 5, false, 3, 4); /* input 6: window 3 ([5, 8)) only */
    candidates(3, 3, 2, 1, 5, false, 1, 3); /* input 3: windows 1 and 2 */
    candidates(7, 3, 3, 0, 5, false, 2, 3); /* stride 3: window 2 ([6, 9)) */
    candidates(5, 0, 0, 0, 7, true, 0, 7);  /* adaptive: every output */
}
END_TEST

/* ct_fastdiv against '/' for divisors 1 to 600 over every dividend up to
 * 5000, and for divisors near the 2^31 limit and powers of two over
 * dividends near it. */
START_TEST(test_fastdiv)
{
    for (int64_t d = 1; d <= 600; d++) {
        const CtFastDiv f = ct_fastdiv_make(d);
        for (int64_t n = 0; n <= 5000; n++)
            if (ct_fastdiv(n, f, true) != n / d)
                ck_abort_msg("%lld / %lld: %lld", (long long)n, (long long)d,
                             (long long)ct_fastdiv(n, f, true));
    }
    const int64_t top = ((int64_t)1 << 31) - 1;
    const int64_t ds[] = {top,
                          top - 1,
                          (int64_t)1 << 30,
                          ((int64_t)1 << 30) + 1,
                          3,
                          7,
                          12544,
                          50176,
                          65535,
                          65536,
                          65537,
                          1000003};
    for (int64_t d : ds) {
        const CtFastDiv f = ct_fastdiv_make(d);
        for (int64_t n = top; n > top - 3000; n--)
            ck_assert_int_eq(ct_fastdiv(n, f, true), n / d);
        for (int64_t k = 1; k < 40; k++) { /* around multiples of d */
            int64_t m = d * k;
            for (int64_t n = m - 2; n <= m + 2 && m + 2 <= top; n++)
                ck_assert_int_eq(ct_fastdiv(n, f, true), n / d);
        }
    }
    /* a divisor past 2^31 divides, without the multiply-shift */
    const CtFastDiv big = ct_fastdiv_make((int64_t)1 << 33);
    ck_assert_int_eq(ct_fastdiv((int64_t)5 << 33, big, false), 5);
    /* the pool's switch: 31-bit indices take the multiply-shift */
    CtPool2dParams p = {};
    p.n = 128, p.c = 64, p.h = p.w = 112, p.oh = p.ow = 56, p.sh = p.sw = 2;
    ck_assert(ct_pool_divs(&p).fast);
    p.n = 2048; /* 1.6e9 inputs: still below 2^31 */
    ck_assert(ct_pool_divs(&p).fast);
    p.n = 4096; /* 3.3e9 */
    ck_assert(!ct_pool_divs(&p).fast);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_pool");
    TCase *tc = tcase_create("pool");
    tcase_add_test(tc, test_pool_bodies_match_cpu);
    tcase_add_test(tc, test_candidates);
    tcase_add_test(tc, test_fastdiv);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
