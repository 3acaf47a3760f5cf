/* Reductions: values against PyTorch, gradients, kernel paths, bad input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

/* From tests/fixtures/reductions.py. x: (2, 3, 4) with x[1][0][1] ==
 * x[1][0][3] (a tied maximum). */
static const double X[] = {-10.0, -2.75, 4.5,   11.0, -5.75, 1.5,  8.0,  -8.75,
                           -1.5,  5.0,   12.25, -4.5, 2.0,   9.25, -7.5, 9.25,
                           6.25,  13.5,  -4.0,  3.25, 10.5,  -7.0, 0.25, 7.5};
static const double SUM_d0[] = {-8.0, 6.5,  -3.0, 20.25, 0.5,  15.0,
                                4.0,  -5.5, 9.0,  -2.0,  12.5, 3.0};
static const double MEAN_d0[] = {-4.0, 3.25,  -1.5, 10.125, 0.25, 7.5,
                                 2.0,  -2.75, 4.5,  -1.0,   6.25, 1.5};
static const double MAX_d0[] = {2.0, 9.25, 4.5,  11.0, 6.25,  13.5,
                                8.0, 3.25, 10.5, 5.0,  12.25, 7.5};
static const double MIN_d0[] = {-10.0, -2.75, -7.5, 9.25, -5.75, 1.5,
                                -4.0,  -8.75, -1.5, -7.0, 0.25,  -4.5};
static const double VAR1_d0[] = {72.0, 72.0, 72.0, 1.53125, 72.0, 72.0,
                                 72.0, 72.0, 72.0, 72.0,    72.0, 72.0};
static const double VAR0_d0[] = {36.0, 36.0, 36.0, 0.765625, 36.0, 36.0,
                                 36.0, 36.0, 36.0, 36.0,     36.0, 36.0};
static const double SUM_d1[] = {-17.25, 3.75, 24.75, -2.25, 18.75, 15.75, -11.25, 20.0};
static const double MEAN_d1[] = {-5.75, 1.25, 8.25,  -0.75,
                                 6.25,  5.25, -3.75, 6.666666666666667};
static const double MAX_d1[] = {-1.5, 5.0, 12.25, 11.0, 10.5, 13.5, 0.25, 9.25};
static const double MIN_d1[] = {-10.0, -2.75, 4.5, -8.75, 2.0, -7.0, -7.5, 3.25};
static const double VAR1_d1[] = {18.0625, 15.0625,  15.0625, 108.0625,
                                 18.0625, 117.0625, 15.0625, 9.520833333333334};
static const double VAR0_d1[] = {
    12.041666666666666, 10.041666666666666, 10.041666666666666, 72.04166666666667,
    12.041666666666666, 78.04166666666667,  10.041666666666666, 6.347222222222222};
static const double SUM_d2[] = {2.75, -5.0, 11.25, 13.0, 19.0, 11.25};
static const double MEAN_d2[] = {0.6875, -1.25, 2.8125, 3.25, 4.75, 2.8125};
static const double MAX_d2[] = {11.0, 8.0, 12.25, 9.25, 13.5, 10.5};
static const double MIN_d2[] = {-10.0, -8.75, -4.5, -7.5, -4.0, -7.0};
static const double VAR1_d2[] = {82.30729166666667,  56.541666666666664,
                                 55.307291666666664, 63.041666666666664,
                                 52.541666666666664, 61.307291666666664};
static const double VAR0_d2[] = {61.73046875, 42.40625, 41.48046875,
                                 47.28125,    39.40625, 45.98046875};
static const double SUM_d02[] = {15.75, 14.0, 22.5};
static const double MEAN_d02[] = {1.96875, 1.75, 2.8125};
static const double MAX_d02[] = {11.0, 13.5, 12.25};
static const double MIN_d02[] = {-10.0, -8.75, -7.0};
static const double VAR1_d02[] = {64.16852678571429, 57.03571428571428,
                                  49.97767857142857};
static const double VAR0_d02[] = {56.14746093750001, 49.90624999999999, 43.73046875};
static const double SUM_all[] = {52.25};
static const double MEAN_all[] = {2.1770833333333335};
static const double MAX_all[] = {13.5};
static const double MIN_all[] = {-10.0};
static const double VAR1_all[] = {52.31782155797101};
static const double VAR0_all[] = {50.137912326388886};
static const double ARGMAX_d0[] = {1.0, 1.0, 0.0, 0.0, 1.0, 1.0,
                                   0.0, 1.0, 1.0, 0.0, 0.0, 1.0};
static const double ARGMAX_d1[] = {2.0, 2.0, 2.0, 0.0, 2.0, 1.0, 2.0, 0.0};
static const double ARGMAX_d2[] = {3.0, 2.0, 2.0, 1.0, 1.0, 0.0};

static const int64_t XS[] = {2, 3, 4};

typedef enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_VAR1, R_VAR0, R_KINDS } Kind;
static const char *const kind_name[] = {"sum", "mean", "max", "min", "var1", "var0"};

static Tensor *reduce(Kind k, Tensor *t, int nd, const int *dims, bool keep)
{
    switch (k) {
    case R_SUM: return tensor_sum(t, nd, dims, keep);
    case R_MEAN: return tensor_mean(t, nd, dims, keep);
    case R_MAX: return tensor_max(t, nd, dims, keep);
    case R_MIN: return tensor_min(t, nd, dims, keep);
    case R_VAR1: return tensor_var(t, nd, dims, 1, keep);
    default: return tensor_var(t, nd, dims, 0, keep);
    }
}

typedef struct Case {
    int nd;
    int dims[3];
    const double *expect[R_KINDS];
    int n;
    int64_t shape[3]; /* without keepdim */
    int ondim;
} Case;

#define EXPECT(s)                                                                        \
    {                                                                                    \
        SUM_##s, MEAN_##s, MAX_##s, MIN_##s, VAR1_##s, VAR0_##s                          \
    }
static const Case cases[] = {
    {1, {0}, EXPECT(d0), 12, {3, 4}, 2},    {1, {1}, EXPECT(d1), 8, {2, 4}, 2},
    {1, {-1}, EXPECT(d2), 6, {2, 3}, 2},    {2, {2, 0}, EXPECT(d02), 3, {3}, 1},
    {2, {-3, -1}, EXPECT(d02), 3, {3}, 1},  {0, {0}, EXPECT(all), 1, {0}, 0},
    {3, {1, 2, 0}, EXPECT(all), 1, {0}, 0},
};
#define NCASES ((int)(sizeof cases / sizeof *cases))

static void check_case(CtDType dt, const Case *c, Kind k, bool keep, double tol)
{
    Tensor *x = tu_tensor(dt, 3, XS, X);
    Tensor *y = reduce(k, x, c->nd, c->dims, keep);
    ck_assert_msg(y != NULL, "%s: %s", kind_name[k], ct_last_error());
    ck_assert_int_eq(tensor_dtype(y), dt);
    tu_assert_values(y, c->expect[k], c->n, tol, tol);
    if (keep) {
        unsigned mask = c->nd ? 0 : 7u;
        for (int i = 0; i < c->nd; i++) mask |= 1u << ((c->dims[i] + 3) % 3);
        int64_t ks[3];
        for (int d = 0; d < 3; d++) ks[d] = mask >> d & 1u ? 1 : XS[d];
        tu_assert_shape_at(__FILE__, __LINE__, y, 3, ks);
    } else {
        tu_assert_shape_at(__FILE__, __LINE__, y, c->ondim, c->shape);
    }
    tensor_free(y);
    tensor_free(x);
}

START_TEST(test_values_each_dim)
{
    TU_MEM_BEGIN;
    for (int i = 0; i < NCASES; i++)
        for (int k = 0; k < R_KINDS; k++)
            for (int keep = 0; keep < 2; keep++) {
                check_case(CT_F64, &cases[i], (Kind)k, keep, 1e-12);
                check_case(CT_F32, &cases[i], (Kind)k, keep, 1e-5);
            }
    TU_MEM_END;
}
END_TEST

START_TEST(test_sum_all_mean_all_argmax)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *x = tu_tensor(CT_F64, 3, XS, X);
    Tensor *a = tensor_sum_all(x), *m = tensor_mean_all(x);
    tu_assert_shape_at(__FILE__, __LINE__, a, 0, NULL);
    tu_assert_values(a, SUM_all, 1, 1e-12, 0);
    tu_assert_values(m, MEAN_all, 1, 1e-12, 0);
    const double *am[] = {ARGMAX_d0, ARGMAX_d1, ARGMAX_d2};
    const int nexp[] = {12, 8, 6};
    for (int d = 0; d < 3; d++) {
        Tensor *i = tensor_argmax(x, d - 3 * (d == 2), false);
        ck_assert_int_eq(tensor_dtype(i), CT_I64);
        ck_assert_int_eq(tensor_ndim(i), 2);
        tu_assert_values(i, am[d], nexp[d], 0, 0);
        Tensor *ik = tensor_argmax(x, d, true);
        ck_assert_int_eq(tensor_ndim(ik), 3);
        ck_assert_int_eq(tensor_size(ik, d), 1);
        tu_assert_values(ik, am[d], nexp[d], 0, 0);
    }
    /* 0-d input */
    Tensor *z = tensor_scalar(3.5, CT_F32, ct_cpu());
    tu_assert_values(tensor_sum_all(z), ((double[]){3.5}), 1, 0, 0);
    tu_assert_values(tensor_max(z, 1, (const int[]){0}, false), ((double[]){3.5}), 1, 0,
                     0);
    tu_assert_values(tensor_argmax(z, -1, false), ((double[]){0}), 1, 0, 0);
    tensor_free(x);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_sum_to)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *x = tu_tensor(CT_F64, 3, XS, X);
    /* (2, 3, 4) -> (3, 1): sum over dims 0 and 2 */
    Tensor *y = tensor_sum_to(x, 2, (const int64_t[]){3, 1});
    tu_assert_shape(y, 2, 3, 1);
    tu_assert_values(y, SUM_d02, 3, 1e-12, 0);
    y = tensor_sum_to(x, 1, (const int64_t[]){4});
    tu_assert_shape(y, 1, 4);
    tu_assert_values(y,
                     ((double[]){-8.0 + 0.5 + 9.0, 6.5 + 15.0 - 2.0, -3.0 + 4.0 + 12.5,
                                 20.25 - 5.5 + 3.0}),
                     4, 1e-12, 0);
    y = tensor_sum_to(x, 3, (const int64_t[]){1, 1, 1});
    tu_assert_shape(y, 3, 1, 1, 1);
    tu_assert_values(y, SUM_all, 1, 1e-12, 0);
    y = tensor_sum_to(x, 0, NULL);
    tu_assert_values(y, SUM_all, 1, 1e-12, 0);
    y = tensor_sum_to(x, 3, XS); /* same shape: the values unchanged */
    tu_assert_values(y, X, 24, 0, 0);
    y = tensor_sum_to(x, 2, (const int64_t[]){2, 4});
    ck_assert_ptr_null(y);
    tu_assert_error(CT_ERR_SHAPE, "sum_to: cannot sum f64[2, 3, 4] cpu down to [2, 4]");
    ck_assert_ptr_null(tensor_sum_to(x, 4, (const int64_t[]){1, 2, 3, 4}));
    tu_assert_error(CT_ERR_SHAPE, "sum_to: cannot sum");
    tensor_free(x);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------ gradients */

typedef struct GradCtx {
    Kind kind;
    int nd;
    int dims[3];
    bool keep;
    int transpose; /* 1: reduce a transposed view of the input */
} GradCtx;

static Tensor *reduce_fn(Tensor **in, void *vctx)
{
    GradCtx *c = vctx;
    Tensor *x = in[0];
    if (c->transpose) x = tensor_transpose(x, 0, 2); /* (4, 3, 2), strided */
    return reduce(c->kind, x, c->nd, c->dims, c->keep);
}

START_TEST(test_gradcheck_each_dim)
{
    static const struct {
        int nd;
        int dims[3];
    } ds[] = {{1, {0}},    {1, {1}},     {1, {2}}, {1, {-1}},
              {2, {0, 2}}, {2, {-1, 1}}, {0, {0}}};
    for (int k = 0; k < R_KINDS; k++)
        for (size_t i = 0; i < sizeof ds / sizeof *ds; i++)
            for (int tr = 0; tr < 2; tr++) {
                Tensor *x = tu_rand64(3, XS, -2, 2, 11 + (unsigned)i, true);
                GradCtx c = {(Kind)k, ds[i].nd, {ds[i].dims[0], ds[i].dims[1]}, tr, tr};
                char name[64];
                snprintf(name, sizeof name, "%s dims#%zu transposed=%d", kind_name[k], i,
                         tr);
                tu_gradcheck(name, reduce_fn, &c, 1, &x);
                tensor_free(x);
            }
}
END_TEST

static Tensor *sum_to_fn(Tensor **in, void *ctx)
{
    (void)ctx;
    /* (2, 3, 4) -> (3, 1), then through a broadcast mul to involve expand */
    Tensor *y = tensor_sum_to(tensor_transpose(in[0], 0, 1), 2, (const int64_t[]){2, 1});
    return tensor_mul(y, in[1]);
}

START_TEST(test_gradcheck_sum_to_all)
{
    Tensor *in[2] = {tu_rand64(3, XS, -1, 1, 5, true),
                     tu_rand64(1, (const int64_t[]){3}, -1, 1, 6, true)};
    /* transpose: (3, 2, 4) -> (2, 1); times (3) broadcasts to (2, 3) */
    tu_gradcheck("sum_to", sum_to_fn, NULL, 2, in);
    GradCtx c = {R_SUM, 0, {0}, false, 0};
    tu_gradcheck("sum_all", reduce_fn, &c, 1, in);
    c.kind = R_MEAN;
    tu_gradcheck("mean_all", reduce_fn, &c, 1, in);
    tensor_free(in[0]);
    tensor_free(in[1]);
}
END_TEST

START_TEST(test_max_grad_goes_to_first)
{
    TU_MEM_BEGIN;
    Tensor *x =
        tu_tensor(CT_F64, 2, (const int64_t[]){2, 3}, (double[]){1, 5, 5, 2, 2, 0});
    tensor_set_requires_grad(x, true);
    CtScope *s = ct_scope_open();
    Tensor *m = tensor_max(x, 1, (const int[]){1}, false);
    tu_assert_values(m, ((double[]){5, 2}), 2, 0, 0);
    Tensor *mn = tensor_min(x, 0, NULL, false); /* 0 at [1][2] */
    ck_assert_int_eq(tensor_backward(m, tensor_ones_like(m)), CT_OK);
    ck_assert_int_eq(tensor_backward(mn, NULL), CT_OK);
    ct_scope_close(s);
    tu_assert_values(tensor_grad(x), ((double[]){0, 1, 0, 1, 0, 1}), 6, 0, 0);
    tensor_free(x);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------- larger kernel paths */

/* Naive reference: reduce x (contiguous, row-major `shape`) over mask. */
static void naive(const double *x, int nd, const int64_t *shape, unsigned mask, Kind k,
                  double *out, int64_t *oidx)
{
    int64_t n = 1, kn = 1, rn = 1;
    for (int d = 0; d < nd; d++) {
        n *= shape[d];
        if (mask >> d & 1u)
            rn *= shape[d];
        else
            kn *= shape[d];
    }
    double *sum = calloc((size_t)kn, sizeof *sum), *sq = calloc((size_t)kn, sizeof *sq);
    for (int64_t o = 0; o < kn; o++) out[o] = NAN, oidx[o] = -1;
    for (int pass = 0; pass < 2; pass++)
        for (int64_t e = 0; e < n; e++) {
            int64_t rem = e, ko = 0, kmul = 1, ro = 0, rmul = 1;
            for (int d = nd - 1; d >= 0; d--) {
                int64_t i = rem % shape[d];
                rem /= shape[d];
                if (mask >> d & 1u)
                    ro += i * rmul, rmul *= shape[d];
                else
                    ko += i * kmul, kmul *= shape[d];
            }
            double v = x[e];
            if (pass == 0) {
                sum[ko] += v;
                bool better =
                    oidx[ko] < 0 || (k == R_MAX ? v > out[ko] : v < out[ko]) ||
                    (k == R_MAX || k == R_MIN ? (v == out[ko] && ro < oidx[ko]) : 0);
                if ((k == R_MAX || k == R_MIN) && better) out[ko] = v, oidx[ko] = ro;
            } else {
                double d = v - sum[ko] / (double)rn;
                sq[ko] += d * d;
            }
        }
    for (int64_t o = 0; o < kn; o++) {
        if (k == R_SUM) out[o] = sum[o];
        if (k == R_MEAN) out[o] = sum[o] / (double)rn;
        if (k == R_VAR1) out[o] = sq[o] / (double)(rn - 1);
    }
    free(sum);
    free(sq);
}

static void check_big(CtDType dt, int nd, const int64_t *shape, const int *perm,
                      unsigned mask, double tol)
{
    CtScope *s = ct_scope_open();
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    /* values on a coarse grid in [-1, 1) so that ties occur */
    double *v = malloc((size_t)n * sizeof *v);
    uint64_t st = 42;
    for (int64_t i = 0; i < n; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (double)(int)(st >> 57) / 64.0 - 1.0;
    }
    Tensor *xc = tensor_from_data(v, nd, shape, CT_F64, ct_cpu());
    Tensor *x = tensor_cast(perm ? tensor_permute(xc, perm) : xc, dt);
    /* reference on the permuted values, contiguous */
    int64_t pshape[CT_MAX_DIMS];
    for (int d = 0; d < nd; d++) pshape[d] = tensor_size(x, d);
    double *xv = malloc((size_t)n * sizeof *xv);
    tensor_copy_to_host(x, xv, CT_F64);
    int dims[CT_MAX_DIMS], ndims = 0;
    int64_t kn = 1;
    for (int d = 0; d < nd; d++)
        if (mask >> d & 1u)
            dims[ndims++] = d;
        else
            kn *= pshape[d];
    double *ref = malloc((size_t)kn * sizeof *ref),
           *got = malloc((size_t)kn * sizeof *got);
    int64_t *ridx = malloc((size_t)kn * sizeof *ridx);
    for (int k = 0; k < R_VAR0; k++) {
        naive(xv, nd, pshape, mask, (Kind)k, ref, ridx);
        Tensor *y = reduce((Kind)k, x, ndims, dims, false);
        ck_assert_msg(y != NULL, "%s", ct_last_error());
        tu_assert_values(y, ref, kn, tol, tol);
        if (k == R_MAX && ndims == 1) {
            Tensor *am = tensor_argmax(x, dims[0], false);
            double *ri = malloc((size_t)kn * sizeof *ri);
            for (int64_t o = 0; o < kn; o++) ri[o] = (double)ridx[o];
            tu_assert_values(am, ri, kn, 0, 0);
            free(ri);
        }
    }
    free(ref);
    free(got);
    free(ridx);
    free(xv);
    free(v);
    ct_scope_close(s);
}

START_TEST(test_kernel_paths)
{
    /* column mode with split reduction: bias-grad style (N, C) -> (C) */
    check_big(CT_F64, 2, (const int64_t[]){3000, 37}, NULL, 1u, 1e-9);
    check_big(CT_F32, 2, (const int64_t[]){3000, 37}, NULL, 1u, 1e-4);
    /* column mode, many tiles */
    check_big(CT_F64, 2, (const int64_t[]){100, 1000}, NULL, 1u, 1e-9);
    /* row mode, many rows; and row mode with one split row */
    check_big(CT_F64, 2, (const int64_t[]){500, 257}, NULL, 2u, 1e-9);
    check_big(CT_F64, 1, (const int64_t[]){100003}, NULL, 1u, 1e-9);
    check_big(CT_F32, 1, (const int64_t[]){100003}, NULL, 1u, 1e-4);
    /* all dims of a large tensor */
    check_big(CT_F64, 3, (const int64_t[]){50, 40, 30}, NULL, 7u, 1e-9);
    /* permuted (non-contiguous) inputs, middle and outer dims */
    check_big(CT_F64, 3, (const int64_t[]){30, 40, 50}, (const int[]){2, 0, 1}, 2u, 1e-9);
    check_big(CT_F64, 3, (const int64_t[]){30, 40, 50}, (const int[]){1, 2, 0}, 5u, 1e-9);
    check_big(CT_F64, 4, (const int64_t[]){6, 7, 8, 9}, (const int[]){3, 1, 0, 2}, 10u,
              1e-9);
}
END_TEST

/* ------------------------------------------------------------ bad input */

START_TEST(test_bad_input)
{
    CtScope *s = ct_scope_open();
    Tensor *x = tensor_zeros(3, XS, CT_F32, ct_cpu());
    ck_assert_ptr_null(tensor_sum(x, 1, (const int[]){3}, false));
    tu_assert_error(CT_ERR_SHAPE, "sum: dim 3 out of range for a 3-d tensor");
    ck_assert_ptr_null(tensor_mean(x, 1, (const int[]){-4}, false));
    tu_assert_error(CT_ERR_SHAPE, "mean: dim -4 out of range");
    ck_assert_ptr_null(tensor_var(x, 2, (const int[]){1, -2}, 1, false));
    tu_assert_error(CT_ERR_INVALID, "var: dim -2 appears more than once");
    ck_assert_ptr_null(tensor_argmax(x, 5, false));
    tu_assert_error(CT_ERR_SHAPE, "argmax: dim 5 out of range");
    Tensor *i = tensor_zeros(1, (const int64_t[]){3}, CT_I64, ct_cpu());
    ck_assert_ptr_null(tensor_max(i, 0, NULL, false));
    tu_assert_error(CT_ERR_DTYPE,
                    "max: expected a floating-point tensor, got i64[3] cpu");
    Tensor *e = tensor_zeros(2, (const int64_t[]){2, 0}, CT_F32, ct_cpu());
    ck_assert_ptr_null(tensor_min(e, 1, (const int[]){1}, false));
    tu_assert_error(CT_ERR_SHAPE, "min: cannot reduce f32[2, 0] cpu over an empty dim");
    /* empty sums are 0, as in PyTorch */
    tu_assert_values(tensor_sum(e, 1, (const int[]){1}, false), ((double[]){0, 0}), 2, 0,
                     0);
    /* NULL in: NULL out, first error kept */
    ct_error(CT_ERR_INVALID, "first");
    ck_assert_ptr_null(tensor_sum(NULL, 0, NULL, false));
    ck_assert_ptr_null(tensor_argmax(NULL, 0, false));
    ck_assert_ptr_null(tensor_sum_to(NULL, 0, NULL));
    ck_assert_ptr_null(tensor_var(NULL, 0, NULL, 1, true));
    tu_assert_error(CT_ERR_INVALID, "first");
    ct_scope_close(s);
}
END_TEST

/* bf16 and f16 tensors (on a GPU, what autocast's convolutions leave):
 * backends without low-precision reduction kernels run the f32 reduction
 * and round the result once, as PyTorch does; so do the max's gradient and
 * the sums a broadcast op's gradient takes. */
START_TEST(test_low_precision_reductions)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const int64_t shape[3] = {3, 5, 4};
    for (int k = 0; k < 2; k++) {
        CtDType dt = k ? CT_F16 : CT_BF16;
        Tensor *r = tu_rand64(3, shape, -2, 2, 90 + (unsigned)k, false);
        Tensor *x = tensor_cast(r, dt), *xf = tensor_cast(x, CT_F32); /* exact */
        tensor_free(r);
        const int d02[2] = {0, 2};
        Tensor *got[4] = {tensor_sum_all(x), tensor_mean(x, 2, d02, true),
                          tensor_var(x, 1, (const int[]){1}, 1, false),
                          tensor_max(x, 1, (const int[]){2}, false)};
        Tensor *want[4] = {tensor_sum_all(xf), tensor_mean(xf, 2, d02, true),
                           tensor_var(xf, 1, (const int[]){1}, 1, false),
                           tensor_max(xf, 1, (const int[]){2}, false)};
        for (int i = 0; i < 4; i++) {
            ck_assert_msg(got[i], "%d: %s", i, ct_last_error());
            ck_assert_int_eq(tensor_dtype(got[i]), dt);
            tu_assert_same_bits("reduction", tensor_cast(want[i], dt), got[i]);
        }
        /* gradients: the max's (scattered to the first maximum) and a
         * broadcast product's (summed over the broadcast dims) */
        ck_assert_int_eq(tensor_set_requires_grad(x, true), CT_OK);
        Tensor *gate =
            tensor_cast(tensor_ones(3, (const int64_t[]){3, 1, 1}, CT_F32, ct_cpu()), dt);
        ck_assert_int_eq(tensor_set_requires_grad(gate, true), CT_OK);
        Tensor *loss =
            tensor_add(tensor_sum_all(tensor_max(x, 1, (const int[]){2}, false)),
                       tensor_sum_all(tensor_mul(x, gate)));
        ck_assert_msg(tensor_backward(loss, NULL) == CT_OK, "%s", ct_last_error());
        ck_assert_int_eq(tensor_dtype(tensor_grad(gate)), dt);
        tu_assert_same_bits("broadcast gradient",
                            tensor_cast(tensor_sum(xf, 2, (const int[]){1, 2}, true), dt),
                            tensor_grad(gate));
        ck_assert_int_eq(tensor_dtype(tensor_grad(x)), dt);
    }
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tensor_reduce");
    TCase *tc = tcase_create("reduce");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_values_each_dim);
    tcase_add_test(tc, test_sum_all_mean_all_argmax);
    tcase_add_test(tc, test_sum_to);
    tcase_add_test(tc, test_gradcheck_each_dim);
    tcase_add_test(tc, test_gradcheck_sum_to_all);
    tcase_add_test(tc, test_max_grad_goes_to_first);
    tcase_add_test(tc, test_kernel_paths);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_low_precision_reductions);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
