/* cuda_host_bnorm: the eval-mode batch-norm thread bodies
 * (tensor/cuda/bnorm_body.h) against the CPU backend's BATCH_NORM and
 * BATCH_NORM_BWD with training off: stats bit for bit, y and dx within one
 * rounding (a fused multiply-add or not), dweight and dbias within rounding
 * of the CPU's sums; f32 and f64, with and without
 * weight and bias, empty and single-element batches, channel counts past
 * one block; channels last against NCHW, bit for bit. bf16 and f16 data
 * (with f32 parameters) against the f32 bodies on the widened data,
 * rounded once. */
#include <math.h>

#include "tensor/cuda/bnorm_body.h"
#include "harness.h"
#include "tensor/norm.h"

typedef struct BnCase {
    int64_t n, c, inner;
} BnCase;

static const BnCase cases[] = {{2, 3, 5}, {1, 4, 1}, {0, 3, 4}, {3, 300, 2}, {2, 2, 300}};

static Tensor *rand_t(CtDType dt, int64_t n, double lo, double hi, unsigned seed)
{
    Tensor *d = tu_rand64(1, &n, lo, hi, seed, false);
    Tensor *t = ct_tensor_new_persistent(1, &n, dt, ct_cpu());
    ck_assert_ptr_nonnull(t);
    CtOpCall cp = {CT_OP_COPY, {t}, {d}, NULL, NULL, NULL};
    ck_assert_int_eq(ct_dispatch(&cp), CT_OK);
    tensor_free(d);
    return t;
}

static void assert_close(const Tensor *want, const Tensor *got, double tol,
                         const char *what)
{
    int64_t n = tensor_numel(want);
    bool f64 = tensor_dtype(want) == CT_F64;
    for (int64_t i = 0; i < n; i++) {
        double w =
            f64 ? ((const double *)ct_ptr(want))[i] : ((const float *)ct_ptr(want))[i];
        double g =
            f64 ? ((const double *)ct_ptr(got))[i] : ((const float *)ct_ptr(got))[i];
        ck_assert_msg(fabs(w - g) <= tol * (1 + fabs(w)), "%s: element %lld: %g vs %g",
                      what, (long long)i, w, g);
    }
}

template <int DT>
static void check_case(const BnCase &bc, CtDType dt, bool affine, unsigned seed)
{
    typedef typename CtHdType<DT>::S T;
    int64_t numel = bc.n * bc.c * bc.inner, C = bc.c;
    CtBatchNormParams p = {bc.n, bc.c, bc.inner, false, 0.1, 1e-5, false, false};
    Tensor *x = rand_t(dt, numel, -2, 2, seed), *g = rand_t(dt, numel, -1, 1, seed + 1);
    Tensor *w = affine ? rand_t(dt, C, 0.5, 1.5, seed + 2) : NULL;
    Tensor *b = affine ? rand_t(dt, C, -0.5, 0.5, seed + 3) : NULL;
    Tensor *rm = rand_t(dt, C, -0.3, 0.3, seed + 4),
           *rv = rand_t(dt, C, 0.2, 2, seed + 5);
    Tensor *y = ch_buffer(numel, dt), *stats = ch_buffer(2 * C, dt);
    CtOpCall fwd = {CT_OP_BATCH_NORM, {y, stats, rm, rv}, {x, w, b}, &p, NULL, NULL};
    ck_assert_int_eq(ct_dispatch(&fwd), CT_OK);
    Tensor *dx = ch_buffer(numel, dt), *dw = ch_buffer(C, dt), *db = ch_buffer(C, dt);
    CtOpCall bwd = {CT_OP_BATCH_NORM_BWD, {dx, dw, db}, {g, x, w, stats}, &p, NULL, NULL};
    ck_assert_int_eq(ct_dispatch(&bwd), CT_OK);
    const T *W = w ? (const T *)ct_ptr(w) : NULL, *B = b ? (const T *)ct_ptr(b) : NULL;
    ChShape shapes[2];
    for (int k = 0, ns = ch_shapes(numel > C ? numel : C, shapes); k < ns; k++) {
        Tensor *s2 = ch_buffer(2 * C, dt), *y2 = ch_buffer(numel, dt);
        Tensor *dx2 = ch_buffer(numel, dt), *dw2 = ch_buffer(C, dt),
               *db2 = ch_buffer(C, dt);
        T *S = (T *)ct_ptr(s2);
        ch_launch(shapes[k].grid, shapes[k].block, [&](CtThread t) {
            ct_bn_eval_stats_body<T>(t, C, p.eps, (const T *)ct_ptr(rm),
                                     (const T *)ct_ptr(rv), S);
        });
        ch_launch(shapes[k].grid, shapes[k].block, [&](CtThread t) {
            ct_bn_eval_fwd_body<DT>(t, bc.n, C, bc.inner, (const T *)ct_ptr(x), W, B, S,
                                    (T *)ct_ptr(y2));
            ct_bn_eval_dx_body<DT>(t, bc.n, C, bc.inner, (const T *)ct_ptr(g),
                                   (const T *)ct_ptr(x), W, S, (T *)ct_ptr(dx2));
            ct_bn_eval_dparams_body<DT>(t, bc.n, C, bc.inner, (const T *)ct_ptr(g),
                                        (const T *)ct_ptr(x), S, (T *)ct_ptr(dw2),
                                        (T *)ct_ptr(db2));
        });
        ch_assert_same_bytes(stats, s2, "stats");
        /* y and dx: one multiply-add, which either compiler may fuse */
        assert_close(y, y2, dt == CT_F64 ? 1e-14 : 1e-6, "y");
        assert_close(dx, dx2, dt == CT_F64 ? 1e-14 : 1e-6, "dx");
        double tol = dt == CT_F64 ? 1e-12 : 1e-5;
        assert_close(dw, dw2, tol, "dweight");
        assert_close(db, db2, tol, "dbias");
        /* channels last: the same bits as the NCHW bodies, permuted */
        Tensor *xl = ch_permuted(x, bc.n, C, bc.inner, false),
               *gl = ch_permuted(g, bc.n, C, bc.inner, false);
        Tensor *y3 = ch_buffer(numel, dt), *dx3 = ch_buffer(numel, dt),
               *dw3 = ch_buffer(C, dt), *db3 = ch_buffer(C, dt);
        ch_launch(shapes[k].grid, shapes[k].block, [&](CtThread t) {
            ct_bn_eval_fwd_body<DT>(t, bc.n, C, bc.inner, (const T *)ct_ptr(xl), W, B, S,
                                    (T *)ct_ptr(y3), true);
            ct_bn_eval_dx_body<DT>(t, bc.n, C, bc.inner, (const T *)ct_ptr(gl),
                                   (const T *)ct_ptr(xl), W, S, (T *)ct_ptr(dx3), true);
            ct_bn_eval_dparams_body<DT>(t, bc.n, C, bc.inner, (const T *)ct_ptr(gl),
                                        (const T *)ct_ptr(xl), S, (T *)ct_ptr(dw3),
                                        (T *)ct_ptr(db3), true);
        });
        Tensor *yb = ch_permuted(y3, bc.n, C, bc.inner, true),
               *dxb = ch_permuted(dx3, bc.n, C, bc.inner, true);
        ch_assert_same_bytes(y2, yb, "y (nhwc)");
        ch_assert_same_bytes(dx2, dxb, "dx (nhwc)");
        ch_assert_same_bytes(dw2, dw3, "dweight (nhwc)");
        ch_assert_same_bytes(db2, db3, "dbias (nhwc)");
        Tensor *tmp[] = {s2, y2, dx2, dw2, db2, xl, gl, y3, dx3, dw3, db3, yb, dxb};
        for (Tensor *t : tmp) tensor_free(t);
    }
    Tensor *all[] = {x, g, w, b, rm, rv, y, stats, dx, dw, db};
    for (Tensor *t : all) tensor_free(t);
}

START_TEST(test_eval_bodies_match_cpu)
{
    int checked = 0;
    unsigned seed = 1;
    for (const BnCase &bc : cases)
        for (int affine = 0; affine < 2; affine++, checked += 2, seed += 8) {
            check_case<CT_F32>(bc, CT_F32, affine, seed);
            check_case<CT_F64>(bc, CT_F64, affine, seed);
        }
    ck_assert_int_eq(checked, 5 * 2 * 2);
}
END_TEST

/* Runs the three data bodies of dtype DT (f32 parameters) over x, g. */
template <int DT>
static void run_low(int64_t N, int64_t C, int64_t K, const Tensor *x, const Tensor *g,
                    const float *w, const float *b, const float *stats, Tensor *y,
                    Tensor *dx, Tensor *dw, Tensor *db)
{
    typedef typename CtHdType<DT>::S S;
    ch_launch(3, 32, [&](CtThread t) {
        ct_bn_eval_fwd_body<DT>(t, N, C, K, (const S *)ct_ptr(x), w, b, stats,
                                (S *)ct_ptr(y));
        ct_bn_eval_dx_body<DT>(t, N, C, K, (const S *)ct_ptr(g), (const S *)ct_ptr(x), w,
                               stats, (S *)ct_ptr(dx));
        ct_bn_eval_dparams_body<DT>(t, N, C, K, (const S *)ct_ptr(g),
                                    (const S *)ct_ptr(x), stats, (float *)ct_ptr(dw),
                                    (float *)ct_ptr(db));
    });
}

/* A copy of t in dtype dt (rounded to nearest even). */
static Tensor *converted(const Tensor *t, CtDType dt)
{
    Tensor *c = ch_buffer(tensor_numel(t), dt);
    ck_assert_int_eq(tensor_copy_(c, (Tensor *)t), CT_OK);
    return c;
}

template <int DT> static void check_low(CtDType dt)
{
    const int64_t N = 3, C = 5, K = 7, numel = N * C * K;
    Tensor *x0 = rand_t(CT_F32, numel, -2, 2, 11), *g0 = rand_t(CT_F32, numel, -1, 1, 12);
    Tensor *x = converted(x0, dt), *g = converted(g0, dt);
    Tensor *xf = converted(x, CT_F32), *gf = converted(g, CT_F32); /* exact */
    Tensor *w = rand_t(CT_F32, C, 0.5, 1.5, 13), *b = rand_t(CT_F32, C, -0.5, 0.5, 14);
    Tensor *stats = rand_t(CT_F32, 2 * C, 0.3, 1.7, 15);
    const float *W = (const float *)ct_ptr(w), *B = (const float *)ct_ptr(b),
                *S = (const float *)ct_ptr(stats);
    Tensor *y = ch_buffer(numel, dt), *dx = ch_buffer(numel, dt);
    Tensor *dw = ch_buffer(C, CT_F32), *db = ch_buffer(C, CT_F32);
    run_low<DT>(N, C, K, x, g, W, B, S, y, dx, dw, db);
    Tensor *yf = ch_buffer(numel, CT_F32), *dxf = ch_buffer(numel, CT_F32);
    Tensor *dwf = ch_buffer(C, CT_F32), *dbf = ch_buffer(C, CT_F32);
    run_low<CT_F32>(N, C, K, xf, gf, W, B, S, yf, dxf, dwf, dbf);
    Tensor *yr = converted(yf, dt), *dxr = converted(dxf, dt);
    ch_assert_same_bytes(yr, y, "y (low)");
    ch_assert_same_bytes(dxr, dx, "dx (low)");
    ch_assert_same_bytes(dwf, dw, "dweight (low)");
    ch_assert_same_bytes(dbf, db, "dbias (low)");
    Tensor *all[] = {x0, g0, x,  g,  xf,  gf,  w,   b,  stats, y,
                     dx, dw, db, yf, dxf, dwf, dbf, yr, dxr};
    for (Tensor *t : all) tensor_free(t);
}

START_TEST(test_eval_bodies_low_dtypes)
{
    check_low<CT_BF16>(CT_BF16);
    check_low<CT_F16>(CT_F16);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_bnorm");
    TCase *tc = tcase_create("bnorm");
    tcase_add_test(tc, test_eval_bodies_match_cpu);
    tcase_add_test(tc, test_eval_bodies_low_dtypes);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
