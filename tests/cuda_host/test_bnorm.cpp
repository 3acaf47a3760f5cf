/* cuda_host_bnorm: the eval-mode batch-norm thread bodies
 * (tensor/cuda/bnorm_body.h) against the CPU backend's BATCH_NORM and
 * BATCH_NORM_BWD with training off: stats bit for bit, y and dx within one
 * rounding (a fused multiply-add or not), dweight and dbias within rounding
 * of the CPU's sums; f32 and f64, with and without
 * weight and bias, empty and single-element batches, channel counts past
 * one block. */
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
    CtOpCall cp = {CT_OP_COPY, {t}, {d}, NULL, NULL};
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

template <typename T>
static void check_case(const BnCase &bc, CtDType dt, bool affine, unsigned seed)
{
    int64_t numel = bc.n * bc.c * bc.inner, C = bc.c;
    CtBatchNormParams p = {bc.n, bc.c, bc.inner, false, 0.1, 1e-5};
    Tensor *x = rand_t(dt, numel, -2, 2, seed), *g = rand_t(dt, numel, -1, 1, seed + 1);
    Tensor *w = affine ? rand_t(dt, C, 0.5, 1.5, seed + 2) : NULL;
    Tensor *b = affine ? rand_t(dt, C, -0.5, 0.5, seed + 3) : NULL;
    Tensor *rm = rand_t(dt, C, -0.3, 0.3, seed + 4),
           *rv = rand_t(dt, C, 0.2, 2, seed + 5);
    Tensor *y = ch_buffer(numel, dt), *stats = ch_buffer(2 * C, dt);
    CtOpCall fwd = {CT_OP_BATCH_NORM, {y, stats, rm, rv}, {x, w, b}, &p, NULL};
    ck_assert_int_eq(ct_dispatch(&fwd), CT_OK);
    Tensor *dx = ch_buffer(numel, dt), *dw = ch_buffer(C, dt), *db = ch_buffer(C, dt);
    CtOpCall bwd = {CT_OP_BATCH_NORM_BWD, {dx, dw, db}, {g, x, w, stats}, &p, NULL};
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
            ct_bn_eval_fwd_body<T>(t, bc.n, C, bc.inner, (const T *)ct_ptr(x), W, B, S,
                                   (T *)ct_ptr(y2));
            ct_bn_eval_dx_body<T>(t, bc.n, C, bc.inner, (const T *)ct_ptr(g),
                                  (const T *)ct_ptr(x), W, S, (T *)ct_ptr(dx2));
            ct_bn_eval_dparams_body<T>(t, bc.n, C, bc.inner, (const T *)ct_ptr(g),
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
        Tensor *tmp[] = {s2, y2, dx2, dw2, db2};
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
            check_case<float>(bc, CT_F32, affine, seed);
            check_case<double>(bc, CT_F64, affine, seed);
        }
    ck_assert_int_eq(checked, 5 * 2 * 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_bnorm");
    TCase *tc = tcase_create("bnorm");
    tcase_add_test(tc, test_eval_bodies_match_cpu);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
