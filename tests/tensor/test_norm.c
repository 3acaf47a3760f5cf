/* Normalisation: batch norm and layer norm values (against PyTorch, see
 * tests/fixtures/norm.py), running statistics, gradients, bad input. */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"

/* ---- reference values printed by tests/fixtures/norm.py (torch 1.13) ---- */
static const double bn2d_train1[] = {0.363233378186, -0.165773280113, 1.37194744023,
                                     1.48484468474,  0.34761436944,   -2.68237043834,
                                     -2.40552229864, 0.949633213607,  -1.85220587518,
                                     0.957444235718, -0.331474302933, 1.96262887328};
static const double bn2d_train2[] = {0.736999008513,  0.425755127814,  -3.19461848412,
                                     -2.23043613313,  0.108426802835,  2.1474168984,
                                     0.0168632471077, 0.815415639187,  -0.951353190171,
                                     1.87657387751,   -0.549597569836, 0.798554775883};
static const double bn2d_rmean[] = {0.103365244863, 0.135395029528, 0.123952987019};
static const double bn2d_rvar[] = {1.05695516904, 1.13233171646, 1.16796812013};
static const double bn2d_eval[] = {0.811527293345, -0.550645487798, 3.32602310209,
                                   2.13906809826,  0.130568485932,  -2.3313462178,
                                   -2.46557602968, 0.929387174798,  -1.17293987899,
                                   1.51483614508,  -0.770514143199, 4.15025620794};
static const double bn4d_train1[] = {
    -0.239586726128, 1.2785747409,   1.74441615059,   0.970109309137,   0.0849127821886,
    0.526272751748,  0.765530962129, 0.681902830187,  -3.42703539757,   -0.98427692673,
    0.954665866143,  1.51830716532,  1.53516414093,   -0.0953217812182, -1.75679115687,
    -2.63656467734,  0.518262379768, 0.13745270789,   -0.361683080559,  -0.752651333352,
    2.28307237558,   1.21204031789,  -0.910618417453, -3.04615498318};
static const double bn4d_train2[] = {
    0.482351584609,  -0.444629380727,    -1.94595116891,   -1.60746605316,
    0.363584567346,  -0.000592814016836, 0.492086601306,   1.0321064371,
    -3.94419751287,  -0.315175990603,    0.68277935553,    -2.0060565768,
    -0.681579131978, 0.380100623643,     2.23570164621,    2.38147188031,
    0.147445356543,  0.4609656165,       -0.0977200514039, -0.797875713373,
    2.73352179662,   -0.341010521347,    -1.13337955482,   1.92351900428};
static const double bn4d_rmean[] = {0.283256761415, 0.22119883411, 0.545988757773};
static const double bn4d_rvar[] = {1.11219372658, 1.17003127531, 1.00633098259};
static const double bn4d_eval[] = {
    0.537768627108, 2.16192466494,  2.6602900593,   1.83192288032,   0.171358333722,
    0.752339733992, 1.06728576372,  0.957202401956, -2.08184378194,  0.750861456366,
    2.99932501579,  3.65294250592,  2.43642855161,  0.692105821412,  -1.08536355635,
    -2.02656085731, 0.741795331576, 0.240518932121, -0.416515301382, -0.931163884478,
    4.53979007724,  3.29778512405,  0.836278351883, -1.64016198741};
static const double ln1_affine[] = {
    -2.30779638667, -0.0317905682074,  1.89675423613,  0.430267535642,
    2.55520630098,  0.222125203466,    -2.21107714478, -0.0459106549339,
    -2.17990829708, 0.329059338354,    1.18690555953,  1.12422333317,
    2.23323177653,  -0.00112353894055, -1.57408248721, -0.431152246373,
    -1.86657865451, 0.461113300367,    0.723410271966, 1.32510173076,
    1.85883592441,  -0.124478983959,   -1.07750776762, -0.602932956934};
static const double ln2_plain[] = {
    -0.0303131957628, 0.7871175315,   1.03794268454,   0.621029056921,  -0.250708575556,
    -1.15044460078,   -1.63818532503, -1.46770488226,  -0.702349106255, 0.314757004808,
    1.12208633645,    1.35677307142,  0.758655785754,  -0.132534640728, -1.04065999242,
    -1.5215262963,    -1.33188618565, -0.543841937441, 0.48906535512,   1.29813168299,
    1.51992894043,    1.06723084185,  0.17003680689,   -0.732600360507};

/* The closed-form inputs of norm.py. */
static Tensor *xa(CtDType dt, int nd, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = 2 * sin(0.7 * (double)i + 0.3) + 0.05 * (double)i;
    Tensor *t = tu_tensor(dt, nd, shape, v);
    free(v);
    return t;
}

static Tensor *xb(CtDType dt, int nd, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = cos(1.3 * (double)i) + 0.1 * (double)i;
    Tensor *t = tu_tensor(dt, nd, shape, v);
    free(v);
    return t;
}

static const double bn_w[] = {1.5, -0.5, 2.0}, bn_b[] = {0.1, 0.2, -0.3};

/* Two training calls, the running stats, then eval, against PyTorch. */
static void check_batch_norm(CtDType dt, int nd, const int64_t *shape, double momentum,
                             const double *t1, const double *t2, const double *rmean,
                             const double *rvar, const double *ev, double tol)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    const int64_t c3[] = {3};
    Tensor *w = tu_tensor(dt, 1, c3, bn_w), *b = tu_tensor(dt, 1, c3, bn_b);
    Tensor *rm = tu_tensor(dt, 1, c3, (double[]){0, 0, 0});
    Tensor *rv = tu_tensor(dt, 1, c3, (double[]){1, 1, 1});
    Tensor *x1 = xa(dt, nd, shape), *x2 = xb(dt, nd, shape);
    CtScope *s = ct_scope_open();
    tu_assert_values(tensor_batch_norm(x1, rm, rv, w, b, true, momentum, 1e-5), t1, n,
                     tol, tol);
    tu_assert_values(tensor_batch_norm(x2, rm, rv, w, b, true, momentum, 1e-5), t2, n,
                     tol, tol);
    tu_assert_values(rm, rmean, 3, tol, tol);
    tu_assert_values(rv, rvar, 3, tol, tol);
    tu_assert_values(tensor_batch_norm(x1, rm, rv, w, b, false, momentum, 1e-5), ev, n,
                     tol, tol);
    tu_assert_values(rm, rmean, 3, tol, tol); /* eval leaves them alone */
    ct_scope_close(s);
    Tensor *all[] = {w, b, rm, rv, x1, x2};
    for (int i = 0; i < 6; i++) tensor_free(all[i]);
}

START_TEST(test_batch_norm_values)
{
    TU_MEM_BEGIN;
    const int64_t s2[] = {4, 3}, s4[] = {2, 3, 2, 2};
    check_batch_norm(CT_F64, 2, s2, 0.1, bn2d_train1, bn2d_train2, bn2d_rmean, bn2d_rvar,
                     bn2d_eval, 1e-9);
    check_batch_norm(CT_F32, 2, s2, 0.1, bn2d_train1, bn2d_train2, bn2d_rmean, bn2d_rvar,
                     bn2d_eval, 2e-5);
    check_batch_norm(CT_F64, 4, s4, 0.2, bn4d_train1, bn4d_train2, bn4d_rmean, bn4d_rvar,
                     bn4d_eval, 1e-9);
    check_batch_norm(CT_F32, 4, s4, 0.2, bn4d_train1, bn4d_train2, bn4d_rmean, bn4d_rvar,
                     bn4d_eval, 2e-5);
    TU_MEM_END;
}
END_TEST

/* No running stats, no affine: y = (x - mean) / sqrt(var + eps) per channel,
 * by hand; also what eval mode does without running stats. */
START_TEST(test_batch_norm_plain)
{
    CtScope *s = ct_scope_open();
    /* x: (2, 2, 1): channel 0 = {1, 3}, channel 1 = {2, 6} */
    Tensor *x = tu_tensor(CT_F64, 3, (const int64_t[]){2, 2, 1}, (double[]){1, 2, 3, 6});
    double k0 = 1 / sqrt(1 + 1e-5), k1 = 2 / sqrt(4 + 1e-5);
    double expect[] = {-k0, -k1, k0, k1};
    tu_assert_values(tensor_batch_norm(x, NULL, NULL, NULL, NULL, true, 0.1, 1e-5),
                     expect, 4, 1e-12, 0);
    tu_assert_values(tensor_batch_norm(x, NULL, NULL, NULL, NULL, false, 0.1, 1e-5),
                     expect, 4, 1e-12, 0);
    tensor_free(x);
    ct_scope_close(s);
}
END_TEST

/* A large input takes the parallel path; channels checked against a naive
 * f64 computation, and f32 against f64. */
START_TEST(test_batch_norm_large)
{
    CtScope *s = ct_scope_open();
    const int64_t shape[] = {16, 4, 32, 32};
    Tensor *x = tu_rand64(4, shape, -3, 5, 7, false);
    Tensor *y = tensor_batch_norm(x, NULL, NULL, NULL, NULL, true, 0.1, 1e-5);
    Tensor *y32 = tensor_batch_norm(tensor_cast(x, CT_F32), NULL, NULL, NULL, NULL, true,
                                    0.1, 1e-5);
    const double *xv = tensor_data(x), *yv = tensor_data(y);
    int64_t K = 32 * 32, n = tensor_numel(x);
    double *expect = malloc((size_t)n * sizeof *expect);
    for (int c = 0; c < 4; c++) {
        double m = 0, v = 0;
        for (int i = 0; i < 16; i++)
            for (int64_t k = 0; k < K; k++) m += xv[(i * 4 + c) * K + k];
        m /= 16.0 * (double)K;
        for (int i = 0; i < 16; i++)
            for (int64_t k = 0; k < K; k++) {
                double d = xv[(i * 4 + c) * K + k] - m;
                v += d * d;
            }
        v /= 16.0 * (double)K;
        for (int i = 0; i < 16; i++)
            for (int64_t k = 0; k < K; k++)
                expect[(i * 4 + c) * K + k] =
                    (xv[(i * 4 + c) * K + k] - m) / sqrt(v + 1e-5);
    }
    ck_assert(fabs(yv[5] - expect[5]) < 1e-12);
    tu_assert_values(y, expect, n, 1e-10, 0);
    tu_assert_values(y32, expect, n, 1e-5, 1e-5);
    free(expect);
    tensor_free(x);
    ct_scope_close(s);
}
END_TEST

typedef struct BnCtx {
    bool training, affine, transpose;
    Tensor *rm, *rv; /* NULL: no running stats */
} BnCtx;

static Tensor *bn_fn(Tensor **in, void *ctx)
{
    BnCtx *c = ctx;
    /* transpose: in[0] is (C, N, K) and is fed as the (N, C, K) view */
    Tensor *x = c->transpose ? tensor_transpose(in[0], 0, 1) : in[0];
    return tensor_batch_norm(x, c->rm, c->rv, c->affine ? in[1] : NULL,
                             c->affine ? in[2] : NULL, c->training, 0.1, 1e-5);
}

START_TEST(test_batch_norm_grad)
{
    const int64_t xs[] = {4, 3, 5}, xt[] = {3, 4, 5}, c3[] = {3};
    Tensor *rm = tu_tensor(CT_F64, 1, c3, (double[]){0.2, -0.1, 0.3});
    Tensor *rv = tu_tensor(CT_F64, 1, c3, (double[]){1.5, 0.7, 2.0});
    Tensor *in[3] = {tu_rand64(3, xs, -2, 2, 1, true),
                     tu_rand64(1, c3, 0.5, 1.5, 2, true),
                     tu_rand64(1, c3, -1, 1, 3, true)};
    BnCtx train = {.training = true, .affine = true, .rm = rm, .rv = rv};
    tu_gradcheck("batch_norm train", bn_fn, &train, 3, in);
    BnCtx bare = {.training = true};
    tu_gradcheck("batch_norm train, no weight/bias", bn_fn, &bare, 1, in);
    BnCtx eval = {.training = false, .affine = true, .rm = rm, .rv = rv};
    tu_gradcheck("batch_norm eval", bn_fn, &eval, 3, in);
    BnCtx eval_bare = {.training = false, .rm = rm, .rv = rv};
    tu_gradcheck("batch_norm eval, no weight/bias", bn_fn, &eval_bare, 1, in);
    /* only the weight requires grad */
    tensor_set_requires_grad(in[0], false);
    tu_gradcheck("batch_norm weight only", bn_fn, &train, 3, in);
    tensor_free(in[0]);
    /* a non-contiguous (transposed) input, 2-d (N, C) */
    in[0] = tu_rand64(3, xt, -2, 2, 4, true);
    BnCtx tr = {.training = true, .affine = true, .transpose = true};
    tu_gradcheck("batch_norm transposed", bn_fn, &tr, 3, in);
    tensor_free(in[0]);
    in[0] = tu_rand64(2, (const int64_t[]){5, 3}, -2, 2, 5, true);
    tu_gradcheck("batch_norm 2-d", bn_fn, &train, 3, in);
    for (int i = 0; i < 3; i++) tensor_free(in[i]);
    tensor_free(rm);
    tensor_free(rv);
}
END_TEST

/* ------------------------------------------------------------ layer norm */

START_TEST(test_layer_norm_values)
{
    TU_MEM_BEGIN;
    const int64_t xs[] = {2, 3, 4}, d4[] = {4};
    for (int k = 0; k < 2; k++) {
        CtDType dt = k ? CT_F32 : CT_F64;
        double tol = k ? 2e-5 : 1e-9;
        CtScope *s = ct_scope_open();
        Tensor *x = xa(dt, 3, xs);
        Tensor *w = tu_tensor(dt, 1, d4, (double[]){1.5, -0.5, 2.0, 0.7});
        Tensor *b = tu_tensor(dt, 1, d4, (double[]){0.1, 0.2, -0.3, 0.4});
        tu_assert_values(tensor_layer_norm(x, 1, w, b, 1e-5), ln1_affine, 24, tol, tol);
        Tensor *y = tensor_layer_norm(x, 2, NULL, NULL, 1e-5);
        tu_assert_shape(y, 3, 2, 3, 4);
        tu_assert_values(y, ln2_plain, 24, tol, tol);
        tensor_free(x);
        tensor_free(w);
        tensor_free(b);
        ct_scope_close(s);
    }
    TU_MEM_END;
}
END_TEST

typedef struct LnCtx {
    int nnorm;
    bool weight, bias, transpose;
} LnCtx;

static Tensor *ln_fn(Tensor **in, void *ctx)
{
    LnCtx *c = ctx;
    Tensor *x = c->transpose ? tensor_transpose(in[0], 0, 1) : in[0];
    return tensor_layer_norm(x, c->nnorm, c->weight ? in[1] : NULL,
                             c->bias ? in[2] : NULL, 1e-5);
}

START_TEST(test_layer_norm_grad)
{
    const int64_t xs[] = {3, 2, 4};
    Tensor *x = tu_rand64(3, xs, -2, 2, 11, true);
    Tensor *in1[3] = {x, tu_rand64(1, (const int64_t[]){4}, 0.5, 1.5, 12, true),
                      tu_rand64(1, (const int64_t[]){4}, -1, 1, 13, true)};
    LnCtx c1 = {1, true, true, false};
    tu_gradcheck("layer_norm nnorm 1 affine", ln_fn, &c1, 3, in1);
    LnCtx c1w = {1, true, false, false};
    tu_gradcheck("layer_norm nnorm 1 weight only", ln_fn, &c1w, 2, in1);
    LnCtx c1n = {1, false, false, false};
    tu_gradcheck("layer_norm nnorm 1 plain", ln_fn, &c1n, 1, in1);
    Tensor *in2[3] = {x, tu_rand64(2, (const int64_t[]){2, 4}, 0.5, 1.5, 14, true),
                      tu_rand64(2, (const int64_t[]){2, 4}, -1, 1, 15, true)};
    LnCtx c2 = {2, true, true, false};
    tu_gradcheck("layer_norm nnorm 2 affine", ln_fn, &c2, 3, in2);
    LnCtx c2n = {2, false, false, false};
    tu_gradcheck("layer_norm nnorm 2 plain", ln_fn, &c2n, 1, in2);
    /* transposed input: x (3, 2, 4) viewed as (2, 3, 4) */
    Tensor *in3[3] = {x, tu_rand64(1, (const int64_t[]){4}, 0.5, 1.5, 16, true),
                      tu_rand64(1, (const int64_t[]){4}, -1, 1, 17, true)};
    LnCtx c3 = {1, true, true, true};
    tu_gradcheck("layer_norm transposed", ln_fn, &c3, 3, in3);
    /* bias only */
    tensor_set_requires_grad(x, false);
    tensor_set_requires_grad(in1[1], false);
    LnCtx cb = {1, false, true, false};
    tu_gradcheck("layer_norm bias only", ln_fn, &cb, 3, in1);
    tensor_free(x);
    for (int i = 1; i < 3; i++) {
        tensor_free(in1[i]);
        tensor_free(in2[i]);
        tensor_free(in3[i]);
    }
}
END_TEST

/* Many rows (several blocks, parallel path): with a gradient of ones,
 * dbias = rows and dweight = column sums of xhat. */
START_TEST(test_layer_norm_large_backward)
{
    const int64_t xs[] = {1000, 40}, d[] = {40};
    Tensor *x = tu_rand64(2, xs, -1, 3, 21, true);
    Tensor *w = tu_rand64(1, d, 0.5, 1.5, 22, true);
    Tensor *b = tu_rand64(1, d, -1, 1, 23, true);
    CtScope *s = ct_scope_open();
    Tensor *y = tensor_layer_norm(x, 1, w, b, 1e-5);
    ck_assert_int_eq(tensor_backward(y, tensor_ones_like(y)), CT_OK);
    ct_scope_close(s);
    /* naive f64: with g = 1, dx = rstd * (w - mean(w) - xhat * mean(w * xhat)) */
    const double *xv = tensor_data(x), *wv = tensor_data(w);
    double dw[40] = {0}, db[40];
    double *dx = malloc(40000 * sizeof *dx);
    for (int r = 0; r < 1000; r++) {
        const double *xr = xv + r * 40;
        double m = 0, v = 0, wm = 0, wx = 0;
        for (int k = 0; k < 40; k++) m += xr[k] / 40;
        for (int k = 0; k < 40; k++) v += (xr[k] - m) * (xr[k] - m) / 40;
        double rstd = 1 / sqrt(v + 1e-5);
        for (int k = 0; k < 40; k++) {
            dw[k] += (xr[k] - m) * rstd;
            wm += wv[k] / 40;
            wx += wv[k] * (xr[k] - m) * rstd / 40;
        }
        for (int k = 0; k < 40; k++)
            dx[r * 40 + k] = rstd * (wv[k] - wm - (xr[k] - m) * rstd * wx);
    }
    for (int k = 0; k < 40; k++) db[k] = 1000;
    tu_assert_values(tensor_grad(w), dw, 40, 1e-9, 1e-9);
    tu_assert_values(tensor_grad(b), db, 40, 1e-9, 0);
    tu_assert_values(tensor_grad(x), dx, 40000, 1e-9, 1e-9);
    free(dx);
    tensor_free(x);
    tensor_free(w);
    tensor_free(b);
}
END_TEST

/* ------------------------------------------------------------- bad input */

START_TEST(test_norm_bad_input)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const int64_t c3[] = {3}, c4[] = {4};
    Tensor *x = tensor_zeros(2, (const int64_t[]){2, 3}, CT_F32, ct_cpu());
    Tensor *w4 = tensor_ones(1, c4, CT_F32, ct_cpu());
    Tensor *w3 = tensor_ones(1, c3, CT_F32, ct_cpu());
    Tensor *w3d = tensor_ones(1, c3, CT_F64, ct_cpu());
    ck_assert_ptr_null(tensor_batch_norm(x, NULL, NULL, w4, NULL, true, 0.1, 1e-5));
    tu_assert_error(CT_ERR_SHAPE, "batch_norm: weight is f32[4] cpu, expected [3] (the "
                                  "channels of input f32[2, 3] cpu)");
    ck_assert_ptr_null(tensor_batch_norm(x, w4, w4, NULL, NULL, true, 0.1, 1e-5));
    tu_assert_error(CT_ERR_SHAPE, "running_mean is f32[4] cpu");
    ck_assert_ptr_null(tensor_batch_norm(x, w3, NULL, NULL, NULL, true, 0.1, 1e-5));
    tu_assert_error(CT_ERR_INVALID, "running_mean only");
    ck_assert_ptr_null(tensor_batch_norm(x, NULL, NULL, NULL, w3d, true, 0.1, 1e-5));
    tu_assert_error(CT_ERR_DTYPE, "batch_norm: dtypes differ");
    Tensor *x1 = tensor_zeros(1, c3, CT_F32, ct_cpu());
    ck_assert_ptr_null(tensor_batch_norm(x1, NULL, NULL, NULL, NULL, true, 0.1, 1e-5));
    tu_assert_error(CT_ERR_SHAPE, "batch_norm: expected a 2-d to 8-d tensor");
    Tensor *one = tensor_zeros(3, (const int64_t[]){1, 3, 1}, CT_F32, ct_cpu());
    ck_assert_ptr_null(tensor_batch_norm(one, NULL, NULL, NULL, NULL, true, 0.1, 1e-5));
    tu_assert_error(CT_ERR_SHAPE, "more than 1 value per channel");
    Tensor *xi = tensor_zeros(2, (const int64_t[]){2, 3}, CT_I64, ct_cpu());
    ck_assert_ptr_null(tensor_batch_norm(xi, NULL, NULL, NULL, NULL, true, 0.1, 1e-5));
    tu_assert_error(CT_ERR_DTYPE, "batch_norm: expected a floating-point tensor");
    Tensor *xh = tensor_zeros(2, (const int64_t[]){2, 3}, CT_BF16, ct_cpu());
    ck_assert_ptr_null(tensor_batch_norm(xh, NULL, NULL, NULL, NULL, true, 0.1, 1e-5));
    tu_assert_error(CT_ERR_UNSUPPORTED, "batch_norm: not supported on cpu for bf16");

    ck_assert_ptr_null(tensor_layer_norm(x, 3, NULL, NULL, 1e-5));
    tu_assert_error(CT_ERR_SHAPE, "layer_norm: cannot normalise over the last 3 dims");
    ck_assert_ptr_null(tensor_layer_norm(x, 0, NULL, NULL, 1e-5));
    tu_assert_error(CT_ERR_SHAPE, "last 0 dims");
    ck_assert_ptr_null(tensor_layer_norm(x, 1, w4, NULL, 1e-5));
    tu_assert_error(
        CT_ERR_SHAPE,
        "layer_norm: weight is f32[4] cpu, expected the normalised shape [3]");
    ck_assert_ptr_null(tensor_layer_norm(x, 2, NULL, w3, 1e-5));
    tu_assert_error(CT_ERR_SHAPE,
                    "bias is f32[3] cpu, expected the normalised shape [2, 3]");
    ck_assert_ptr_null(tensor_layer_norm(xi, 1, NULL, NULL, 1e-5));
    tu_assert_error(CT_ERR_DTYPE, "layer_norm: expected a floating-point tensor");

    /* NULL input: NULL result, the first error kept */
    ct_error(CT_ERR_IO, "earlier failure");
    ck_assert_ptr_null(tensor_batch_norm(NULL, NULL, NULL, w3, NULL, true, 0.1, 1e-5));
    ck_assert_ptr_null(tensor_layer_norm(NULL, 1, NULL, NULL, 1e-5));
    tu_assert_error(CT_ERR_IO, "earlier failure");
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* Without a scope open, results are caller-owned and temporaries (the
 * contiguous copy of a transposed input) are not leaked. */
START_TEST(test_norm_no_scope)
{
    TU_MEM_BEGIN;
    Tensor *x = tu_rand64(2, (const int64_t[]){3, 4}, -1, 1, 31, false);
    CtScope *s = ct_scope_open();
    Tensor *xt = tensor_retain(tensor_transpose(x, 0, 1)); /* (4, 3) */
    ct_scope_close(s);
    Tensor *y = tensor_batch_norm(xt, NULL, NULL, NULL, NULL, true, 0.1, 1e-5);
    Tensor *z = tensor_layer_norm(xt, 1, NULL, NULL, 1e-5);
    ck_assert_ptr_nonnull(y);
    ck_assert_ptr_nonnull(z);
    tensor_free(y);
    tensor_free(z);
    tensor_free(xt);
    tensor_free(x);
    TU_MEM_END;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tensor_norm");
    TCase *tc = tcase_create("norm");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_batch_norm_values);
    tcase_add_test(tc, test_batch_norm_plain);
    tcase_add_test(tc, test_batch_norm_large);
    tcase_add_test(tc, test_batch_norm_grad);
    tcase_add_test(tc, test_layer_norm_values);
    tcase_add_test(tc, test_layer_norm_grad);
    tcase_add_test(tc, test_layer_norm_large_backward);
    tcase_add_test(tc, test_norm_bad_input);
    tcase_add_test(tc, test_norm_no_scope);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
