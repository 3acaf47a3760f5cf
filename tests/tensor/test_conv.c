/* conv2d: values (hand-computed and PyTorch), gradients, both parallel
 * paths, bad input. */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"

/* Reference values from tests/fixtures/conv.py (PyTorch, f64). */
/* conv_stride_pad: [2, 4, 3, 3] */
static const double conv_stride_pad[] = {
    -2.909866849,  -2.75964493,   0.02697166268, 0.993171731,   0.09764424718,
    -3.086719017,  -1.611130079,  -1.874701263,  -2.401843633,  0.4736380042,
    -0.5874750037, -0.8380724772, 0.934546164,   -1.415402624,  5.777154563,
    1.044481295,   2.972784471,   -1.991367117,  0.6888260255,  -2.078671414,
    -1.247671073,  -3.440911086,  2.239867336,   1.967760815,   3.304053065,
    -0.3777495976, -1.42247476,   1.438667512,   -0.8371945569, -1.637467688,
    -3.994586158,  -2.164268644,  -1.524801249,  -1.862117739,  -0.3421450519,
    -1.665463591,  1.38374872,    0.6886309321,  -3.714919768,  -2.292591328,
    -5.242744964,  1.160464322,   -1.652099693,  3.017753499,   1.521679754,
    1.493781398,   0.1813880895,  -0.0514558845, 1.068380237,   -1.134760767,
    -0.8530946691, -0.8906501488, 1.875481637,   1.219284983,   0.3364873433,
    0.0107789104,  0.2654733454,  2.013510218,   0.1415402624,  -1.242891284,
    -2.62425011,   -1.563819929,  -0.8256840462, -2.385163147,  -1.427157001,
    2.503194654,   0.6814124762,  3.457445252,   -1.315856216,  -1.882602546,
    -3.51797298,   -1.583524362};
/* conv_dilation: [1, 3, 2, 2] */
static const double conv_dilation[] = {
    2.167634005,  -2.35609423,   -2.423011267, 0.2946398088, -1.80768668,   2.119250841,
    -1.073647759, -0.1122274789, 1.801151051,  -1.821245671, -0.1401258352, 3.065063649};
/* conv_groups: [1, 4, 3, 3] */
static const double conv_groups[] = {
    -0.6695117788, -0.3560942301, -0.3185387504, -0.5882553773,  -2.274837829,
    -1.547627177,  -2.506998976,  -1.779788324,  -0.08706043018, -0.3245866459,
    0.4709066966,  0.9905379701,  0.4435936204,  0.4804662732,   1.689752719,
    0.4531531971,  1.662439643,   -0.1627566698, -2.133980393,   -0.2357216017,
    1.041847535,   0.4935375311,  1.012485978,   -1.020289714,   -0.672047993,
    -0.3599960981, 0.9175730381,  -1.934497391,  0.2737648149,   -0.8972833244,
    -1.101448569,  -0.2724967078, -0.7538896747, -1.302882505,   0.5605521143,
    -0.610496025};
/* conv_depthwise: [1, 3, 3, 3] */
static const double conv_depthwise[] = {
    -1.675315807,  -1.770228747,  -1.041652441,  -1.120177535,  -0.3796517583,
    -2.15329464,   -1.034824172,  -1.594742233,  -1.287470126,  -0.2692776667,
    -0.1852899576, 0.4797834463,  0.7208213432,  1.040725747,   0.3261473931,
    0.3309271814,  -0.2474272058, -0.2890796469, -0.6795590889, -0.5184119397,
    0.8745549432,  1.678242208,   -0.2777154563, -0.9738574843, -0.6215188021,
    0.2531824611,  -0.5395795737};

/* The fixture's input sequence: ((i * mul) % mod) / (mod / 2) - 1. */
static Tensor *seq(CtDType dt, int nd, const int64_t *shape, int mul, int mod)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    double v[1024];
    ck_assert(n <= 1024);
    for (int64_t i = 0; i < n; i++) v[i] = (double)((i * mul) % mod) / (mod / 2.0) - 1;
    return tu_tensor(dt, nd, shape, v);
}

typedef struct Config {
    const char *name;
    int64_t x[4], w[4];
    CtConv2dArgs args;
    const double *expect;
    int64_t n_expect;
} Config;

#define ARGS(s, p, d, g)                                                                 \
    {                                                                                    \
        .stride = {s, s}, .padding = {p, p}, .dilation = {d, d}, .groups = g             \
    }

static const Config configs[] = {
    {"stride 2 + padding 1",
     {2, 3, 5, 5},
     {4, 3, 3, 3},
     ARGS(2, 1, 1, 1),
     conv_stride_pad,
     72},
    {"dilation 2", {1, 2, 6, 6}, {3, 2, 3, 3}, ARGS(1, 0, 2, 1), conv_dilation, 12},
    {"groups 2", {1, 4, 4, 4}, {4, 2, 2, 2}, ARGS(1, 0, 1, 2), conv_groups, 36},
    {"depthwise", {1, 3, 5, 5}, {3, 1, 3, 3}, ARGS(2, 1, 1, 3), conv_depthwise, 27},
};
#define N_CONFIGS (int)(sizeof configs / sizeof *configs)

START_TEST(test_conv_hand_computed)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    for (int d = 0; d < 2; d++) {
        CtDType dt = d ? CT_F32 : CT_F64;
        /* x: 1..9 as 3x3; w: [[1, 2], [3, 4]]; b: 0.5 */
        Tensor *x = tu_tensor(dt, 4, (const int64_t[]){1, 1, 3, 3},
                              (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
        Tensor *w =
            tu_tensor(dt, 4, (const int64_t[]){1, 1, 2, 2}, (double[]){1, 2, 3, 4});
        Tensor *b = tu_tensor(dt, 1, (const int64_t[]){1}, (double[]){0.5});
        Tensor *y = tensor_conv2d(x, w, b, NULL);
        tu_assert_shape(y, 4, 1, 1, 2, 2);
        /* 1+4+12+20, 2+6+15+24, 4+10+21+32, 5+12+24+36 */
        tu_assert_values(y, ((double[]){37.5, 47.5, 67.5, 77.5}), 4, 0, 0);
        /* padding 1, stride 2: windows at (-1,-1), (-1,1), (1,-1), (1,1) */
        CtConv2dArgs a = {.stride = {2, 2}, .padding = {1, 1}};
        tu_assert_values(tensor_conv2d(x, w, NULL, &a),
                         ((double[]){4, 2 * 3 + 3 * 4, 4 * 2 + 7 * 4, 5 + 12 + 24 + 36}),
                         4, 0, 0);
        /* 1x1 conv (no im2col): y[o] = sum_c w[o, c] x[c] */
        Tensor *x2 =
            tu_tensor(dt, 4, (const int64_t[]){1, 2, 1, 2}, (double[]){1, 2, 3, 4});
        Tensor *w2 = tu_tensor(dt, 4, (const int64_t[]){3, 2, 1, 1},
                               (double[]){1, 0, 0, 1, 1, -1});
        tu_assert_values(tensor_conv2d(x2, w2, NULL, NULL),
                         ((double[]){1, 2, 3, 4, -2, -2}), 6, 0, 0);
        tensor_free(x);
        tensor_free(w);
        tensor_free(b);
        tensor_free(x2);
        tensor_free(w2);
    }
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_conv_matches_pytorch)
{
    CtScope *s = ct_scope_open();
    for (int i = 0; i < N_CONFIGS; i++) {
        const Config *c = &configs[i];
        for (int d = 0; d < 2; d++) {
            CtDType dt = d ? CT_F32 : CT_F64;
            Tensor *x = seq(dt, 4, c->x, 37, 101), *w = seq(dt, 4, c->w, 17, 29);
            Tensor *b = seq(dt, 1, c->w, 5, 7);
            Tensor *y = tensor_conv2d(x, w, b, &c->args);
            ck_assert_msg(y != NULL, "%s: %s", c->name, ct_last_error());
            tu_assert_values(y, c->expect, c->n_expect, d ? 1e-5 : 1e-9, d ? 1e-5 : 1e-9);
            tensor_free(x);
            tensor_free(w);
            tensor_free(b);
        }
    }
    ct_scope_close(s);
}
END_TEST

typedef struct GradCtx {
    CtConv2dArgs args;
    bool transpose_x; /* feed x through a transposed (non-contiguous) view */
} GradCtx;

static Tensor *conv_fn(Tensor **in, void *ctx)
{
    const GradCtx *g = ctx;
    Tensor *x = in[0];
    if (g->transpose_x) x = tensor_transpose(x, 2, 3);
    return tensor_conv2d(x, in[1], in[2], &g->args);
}

static Tensor *conv_nobias_fn(Tensor **in, void *ctx)
{
    const GradCtx *g = ctx;
    return tensor_conv2d(in[0], in[1], NULL, &g->args);
}

START_TEST(test_conv_gradcheck)
{
    /* each configuration with N = 2 (batch-parallel path with 2 threads) and
     * N = 1 (sample-serial path) */
    for (int i = 0; i < N_CONFIGS; i++) {
        const Config *c = &configs[i];
        for (int64_t nb = 1; nb <= 2; nb++) {
            int64_t xs[4] = {nb, c->x[1], c->x[2], c->x[3]};
            Tensor *in[3] = {tu_rand64(4, xs, -1, 1, 10 + i, true),
                             tu_rand64(4, c->w, -1, 1, 20 + i, true),
                             tu_rand64(1, c->w, -1, 1, 30 + i, true)};
            GradCtx g = {.args = c->args};
            tu_gradcheck(c->name, conv_fn, &g, 3, in);
            for (int k = 0; k < 3; k++) tensor_free(in[k]);
        }
    }
}
END_TEST

START_TEST(test_conv_gradcheck_special)
{
    /* 1x1 conv (direct gemm, no im2col), asymmetric stride/padding, no bias,
     * non-contiguous x */
    GradCtx one = {.args = {{0}}};
    Tensor *a[3] = {tu_rand64(4, (const int64_t[]){2, 3, 2, 3}, -1, 1, 1, true),
                    tu_rand64(4, (const int64_t[]){4, 3, 1, 1}, -1, 1, 2, true),
                    tu_rand64(1, (const int64_t[]){4}, -1, 1, 3, true)};
    tu_gradcheck("1x1", conv_fn, &one, 3, a);
    GradCtx asym = {.args = {.stride = {1, 2}, .padding = {2, 0}, .dilation = {1, 2}}};
    Tensor *b[2] = {tu_rand64(4, (const int64_t[]){2, 2, 4, 6}, -1, 1, 4, true),
                    tu_rand64(4, (const int64_t[]){3, 2, 2, 3}, -1, 1, 5, true)};
    tu_gradcheck("asymmetric, no bias", conv_nobias_fn, &asym, 2, b);
    GradCtx tr = {.args = {.padding = {1, 1}, .groups = 2}, .transpose_x = true};
    Tensor *t[3] = {tu_rand64(4, (const int64_t[]){2, 4, 5, 4}, -1, 1, 6, true),
                    tu_rand64(4, (const int64_t[]){2, 2, 3, 2}, -1, 1, 7, true),
                    tu_rand64(1, (const int64_t[]){2}, -1, 1, 8, true)};
    tu_gradcheck("transposed x", conv_fn, &tr, 3, t);
    /* only w requires grad; only b requires grad */
    tensor_set_requires_grad(t[0], false);
    tensor_set_requires_grad(t[2], false);
    tu_gradcheck("w only", conv_fn, &tr, 3, t);
    tensor_set_requires_grad(t[1], false);
    tensor_set_requires_grad(t[2], true);
    tu_gradcheck("b only", conv_fn, &tr, 3, t);
    for (int k = 0; k < 3; k++) {
        tensor_free(a[k]);
        tensor_free(t[k]);
    }
    tensor_free(b[0]);
    tensor_free(b[1]);
}
END_TEST

/* Larger shapes, so that several threads share the work: the
 * batch-parallel result (threads take samples, private weight-gradient
 * blocks; or chunks of samples in one GEMM) must equal the sum over samples
 * run one at a time (threads share a sample), and f32 must follow f64. */
static void check_paths_agree(const int64_t *xs, const int64_t *ws,
                              const CtConv2dArgs *args)
{
    Tensor *x = tu_rand64(4, xs, -1, 1, 41, true);
    Tensor *w = tu_rand64(4, ws, -1, 1, 42, true);
    Tensor *b = tu_rand64(1, ws, -1, 1, 43, true);
    CtScope *s = ct_scope_open();
    Tensor *y = tensor_conv2d(x, w, b, args);
    Tensor *gy = tu_rand64(4, tensor_shape(y), -1, 1, 44, false);
    ck_assert_int_eq(tensor_backward(y, gy), CT_OK);
    Tensor *gx_batch = tensor_clone(tensor_grad(x)),
           *gw_batch = tensor_clone(tensor_grad(w));
    Tensor *gb_batch = tensor_clone(tensor_grad(b));
    tensor_set_grad(x, NULL);
    tensor_set_grad(w, NULL);
    tensor_set_grad(b, NULL);
    /* sample by sample: w and b gradients accumulate */
    for (int64_t n = 0; n < xs[0]; n++) {
        Tensor *yn = tensor_conv2d(tensor_slice(x, 0, n, n + 1, 1), w, b, args);
        Tensor *y_n = tensor_contiguous(tensor_slice(tensor_detach(y), 0, n, n + 1, 1));
        tu_assert_values(yn, (double *)tensor_data(y_n), tensor_numel(yn), 1e-12, 1e-12);
        Tensor *gy_n = tensor_contiguous(tensor_slice(gy, 0, n, n + 1, 1));
        ck_assert_int_eq(tensor_backward(yn, gy_n), CT_OK);
    }
    tu_assert_values(tensor_grad(x), (double *)tensor_data(gx_batch), tensor_numel(x),
                     1e-11, 1e-11);
    tu_assert_values(tensor_grad(w), (double *)tensor_data(gw_batch), tensor_numel(w),
                     1e-10, 1e-10);
    tu_assert_values(tensor_grad(b), (double *)tensor_data(gb_batch), tensor_numel(b),
                     1e-10, 1e-10);
    /* f32 forward and backward against f64 */
    Tensor *leaves[3] = {tensor_retain(tensor_cast(tensor_detach(x), CT_F32)),
                         tensor_retain(tensor_cast(tensor_detach(w), CT_F32)),
                         tensor_retain(tensor_cast(tensor_detach(b), CT_F32))};
    for (int k = 0; k < 3; k++) tensor_set_requires_grad(leaves[k], true);
    Tensor *y32 = tensor_conv2d(leaves[0], leaves[1], leaves[2], args);
    tu_assert_values(y32, (double *)tensor_data(tensor_detach(y)), tensor_numel(y), 1e-4,
                     1e-4);
    ck_assert_int_eq(tensor_backward(y32, tensor_cast(gy, CT_F32)), CT_OK);
    tu_assert_values(tensor_grad(leaves[0]), (double *)tensor_data(gx_batch),
                     tensor_numel(x), 1e-4, 1e-4);
    tu_assert_values(tensor_grad(leaves[1]), (double *)tensor_data(gw_batch),
                     tensor_numel(w), 1e-3, 1e-4);
    tu_assert_values(tensor_grad(leaves[2]), (double *)tensor_data(gb_batch),
                     tensor_numel(b), 1e-3, 1e-4);
    ct_scope_close(s);
    for (int k = 0; k < 3; k++) tensor_free(leaves[k]);
    tensor_free(gy);
    tensor_free(x);
    tensor_free(w);
    tensor_free(b);
}

START_TEST(test_conv_paths_agree)
{
    TU_MEM_BEGIN;
    CtConv2dArgs pad = {.padding = {1, 1}};
    check_paths_agree((const int64_t[]){4, 8, 24, 24}, (const int64_t[]){16, 8, 3, 3},
                      &pad);
    CtConv2dArgs mixed = {
        .stride = {2, 1}, .padding = {2, 1}, .dilation = {2, 1}, .groups = 2};
    check_paths_agree((const int64_t[]){3, 6, 30, 27}, (const int64_t[]){10, 3, 3, 2},
                      &mixed);
    CtConv2dArgs depthwise = {.padding = {1, 1}, .groups = 16};
    check_paths_agree((const int64_t[]){5, 16, 20, 20}, (const int64_t[]){16, 1, 3, 3},
                      &depthwise);
    CtConv2dArgs one = {.groups = 1};
    check_paths_agree((const int64_t[]){3, 32, 16, 16}, (const int64_t[]){24, 32, 1, 1},
                      &one);
    /* fewer than 64 output pixels a sample: the batch in chunks of samples
     * side by side (conv.c), here 18 + 2, and one chunk of 9 */
    check_paths_agree((const int64_t[]){20, 8, 6, 5}, (const int64_t[]){12, 8, 3, 3},
                      &pad);
    CtConv2dArgs strided = {.stride = {2, 2}, .padding = {1, 1}, .dilation = {2, 1}};
    check_paths_agree((const int64_t[]){9, 4, 7, 7}, (const int64_t[]){6, 4, 3, 3},
                      &strided);
    check_paths_agree((const int64_t[]){6, 32, 4, 4}, (const int64_t[]){24, 32, 1, 1},
                      &one);
    /* a chunked conv whose input planes are too large to stage (conv.c,
     * CHUNK_STACK_PLANE) */
    CtConv2dArgs far = {.stride = {9, 9}};
    check_paths_agree((const int64_t[]){3, 2, 64, 64}, (const int64_t[]){4, 2, 3, 3},
                      &far);
    TU_MEM_END;
}
END_TEST

START_TEST(test_conv_bad_input)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *x = tensor_zeros(4, (const int64_t[]){2, 3, 5, 5}, CT_F32, ct_cpu());
    Tensor *w = tensor_zeros(4, (const int64_t[]){4, 2, 3, 3}, CT_F32, ct_cpu());
    ck_assert_ptr_null(tensor_conv2d(x, w, NULL, NULL));
    tu_assert_error(CT_ERR_SHAPE, "conv2d: x f32[2, 3, 5, 5] cpu has 3 channels but w "
                                  "f32[4, 2, 3, 3] cpu expects 2");
    CtConv2dArgs g2 = {.groups = 2};
    ck_assert_ptr_null(tensor_conv2d(x, w, NULL, &g2));
    tu_assert_error(CT_ERR_SHAPE, "conv2d: groups 2 must divide the input channels");
    Tensor *w3 = tensor_zeros(4, (const int64_t[]){4, 3, 6, 3}, CT_F32, ct_cpu());
    ck_assert_ptr_null(tensor_conv2d(x, w3, NULL, NULL));
    tu_assert_error(CT_ERR_SHAPE, "kernel 6x3 (dilated 6x3) is larger than the padded "
                                  "input 5x5");
    CtConv2dArgs dil = {.dilation = {3, 3}};
    ck_assert_ptr_null(tensor_conv2d(
        x, tensor_zeros(4, (const int64_t[]){4, 3, 3, 3}, CT_F32, ct_cpu()), NULL, &dil));
    tu_assert_error(CT_ERR_SHAPE, "(dilated 7x7) is larger than the padded input 5x5");
    Tensor *x3 = tensor_zeros(3, (const int64_t[]){3, 5, 5}, CT_F32, ct_cpu());
    ck_assert_ptr_null(tensor_conv2d(x3, w3, NULL, NULL));
    tu_assert_error(CT_ERR_SHAPE, "conv2d: x must be 4-d (N, C, H, W), got f32[3, 5, 5]");
    ck_assert_ptr_null(tensor_conv2d(x, x3, NULL, NULL));
    tu_assert_error(CT_ERR_SHAPE, "conv2d: w must be 4-d");
    Tensor *w33 = tensor_zeros(4, (const int64_t[]){4, 3, 3, 3}, CT_F32, ct_cpu());
    Tensor *b5 = tensor_zeros(1, (const int64_t[]){5}, CT_F32, ct_cpu());
    ck_assert_ptr_null(tensor_conv2d(x, w33, b5, NULL));
    tu_assert_error(CT_ERR_SHAPE, "conv2d: bias f32[5] cpu must be (4)");
    Tensor *w64 = tensor_zeros(4, (const int64_t[]){4, 3, 3, 3}, CT_F64, ct_cpu());
    ck_assert_ptr_null(tensor_conv2d(x, w64, NULL, NULL));
    tu_assert_error(CT_ERR_DTYPE, "conv2d: dtypes differ");
    Tensor *xi = tensor_zeros(4, (const int64_t[]){2, 3, 5, 5}, CT_I64, ct_cpu());
    ck_assert_ptr_null(tensor_conv2d(xi, w33, NULL, NULL));
    tu_assert_error(CT_ERR_DTYPE, "conv2d: expected a floating-point tensor");
    Tensor *xb = tensor_cast(x, CT_BF16), *wb = tensor_cast(w33, CT_BF16);
    ck_assert_ptr_null(tensor_conv2d(xb, wb, NULL, NULL));
    tu_assert_error(CT_ERR_UNSUPPORTED, "conv2d: not supported on cpu for bf16");
    CtConv2dArgs neg = {.padding = {-1, 0}};
    ck_assert_ptr_null(tensor_conv2d(x, w33, NULL, &neg));
    tu_assert_error(CT_ERR_INVALID, "conv2d: negative argument");
    /* NULL input: NULL out, the earlier error kept */
    ct_error(CT_ERR_IO, "earlier failure");
    ck_assert_ptr_null(tensor_conv2d(NULL, w33, NULL, NULL));
    ck_assert_ptr_null(tensor_conv2d(x, NULL, NULL, NULL));
    tu_assert_error(CT_ERR_IO, "earlier failure");
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* No scope open: a non-contiguous x's internal copy must not leak. */
/* The flat index into sample n's input (N, C, H, W) that tap (i, j) of
 * channel c reads for output pixel (oh, ow), or -1 in the padding. */
static int64_t tap_at(const int64_t *xs, const CtConv2dArgs *a, int64_t n, int64_t c,
                      int64_t oh, int64_t ow, int64_t i, int64_t j)
{
    const int64_t dh = a->dilation[0] ? a->dilation[0] : 1;
    const int64_t dw = a->dilation[1] ? a->dilation[1] : 1;
    const int64_t ih = oh - a->padding[0] + i * dh, iw = ow - a->padding[1] + j * dw;
    if (ih < 0 || ih >= xs[2] || iw < 0 || iw >= xs[3]) return -1;
    return ((n * xs[1] + c) * xs[2] + ih) * xs[3] + iw;
}

/* Against a direct loop in f64 (y and the weight gradient; stride 1,
 * groups 1): stride-1 convs whose output is as wide as the input take
 * im2col's plane-copy rows (conv.c, same_rows), with taps hanging over
 * every edge. */
static void check_direct(const int64_t *xs, const int64_t *ws, const CtConv2dArgs *a)
{
    Tensor *x = tu_rand64(4, xs, -1, 1, 61, true), *w = tu_rand64(4, ws, -1, 1, 62, true);
    CtScope *sc = ct_scope_open();
    Tensor *y = tensor_conv2d(x, w, NULL, a);
    ck_assert_ptr_nonnull(y);
    const int64_t *ys = tensor_shape(y), ny = tensor_numel(y), nw = tensor_numel(w);
    Tensor *gy = tu_rand64(4, ys, -1, 1, 63, false);
    ck_assert_int_eq(tensor_backward(y, gy), CT_OK);
    const double *xd = tensor_data(x), *wd = tensor_data(w), *gd = tensor_data(gy);
    double *ry = calloc((size_t)ny, sizeof *ry), *rgw = calloc((size_t)nw, sizeof *rgw);
    const int64_t taps = ws[2] * ws[3], ohw = ys[2] * ys[3];
    for (int64_t yi = 0; yi < ny; yi++) {
        const int64_t n = yi / (ws[0] * ohw), o = yi / ohw % ws[0], e = yi % ohw;
        for (int64_t q = 0; q < xs[1] * taps; q++) {
            const int64_t c = q / taps, t = q % taps;
            const int64_t at =
                tap_at(xs, a, n, c, e / ys[3], e % ys[3], t / ws[3], t % ws[3]);
            if (at < 0) continue;
            ry[yi] += xd[at] * wd[o * xs[1] * taps + q];
            rgw[o * xs[1] * taps + q] += xd[at] * gd[yi];
        }
    }
    tu_assert_values(y, ry, ny, 1e-12, 1e-12);
    tu_assert_values(tensor_grad(w), rgw, nw, 1e-11, 1e-11);
    free(ry);
    free(rgw);
    ct_scope_close(sc);
    tensor_free(gy);
    tensor_free(x);
    tensor_free(w);
}

START_TEST(test_conv_same_width_direct)
{
    TU_MEM_BEGIN;
    const int64_t xs[4] = {2, 3, 6, 7};
    check_direct(xs, (const int64_t[]){4, 3, 3, 3}, &(CtConv2dArgs){.padding = {1, 1}});
    check_direct(xs, (const int64_t[]){4, 3, 5, 5}, &(CtConv2dArgs){.padding = {2, 2}});
    check_direct(xs, (const int64_t[]){2, 3, 3, 3},
                 &(CtConv2dArgs){.padding = {2, 2}, .dilation = {2, 2}});
    check_direct(xs, (const int64_t[]){2, 3, 3, 5}, &(CtConv2dArgs){.padding = {0, 2}});
    check_direct(xs, (const int64_t[]){2, 3, 1, 3}, &(CtConv2dArgs){.padding = {1, 1}});
    check_direct((const int64_t[]){2, 2, 1, 1}, (const int64_t[]){3, 2, 3, 3},
                 &(CtConv2dArgs){.padding = {1, 1}});
    check_direct((const int64_t[]){1, 2, 9, 2}, (const int64_t[]){3, 2, 7, 3},
                 &(CtConv2dArgs){.padding = {3, 1}});
    TU_MEM_END;
}
END_TEST

START_TEST(test_conv_no_scope_no_leak)
{
    TU_MEM_BEGIN;
    Tensor *x = tu_rand64(4, (const int64_t[]){1, 2, 4, 4}, -1, 1, 51, false);
    Tensor *w = tu_rand64(4, (const int64_t[]){2, 2, 3, 3}, -1, 1, 52, false);
    Tensor *xt = tensor_transpose(x, 2, 3);
    Tensor *y = tensor_conv2d(xt, w, NULL, NULL);
    tu_assert_shape(y, 4, 1, 2, 2, 2);
    tensor_free(y);
    tensor_free(xt);
    tensor_free(x);
    tensor_free(w);
    TU_MEM_END;
}
END_TEST

Suite *conv_suite(void)
{
    Suite *s = suite_create("tensor_conv");
    TCase *tc = tcase_create("conv2d");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_conv_hand_computed);
    tcase_add_test(tc, test_conv_matches_pytorch);
    tcase_add_test(tc, test_conv_gradcheck);
    tcase_add_test(tc, test_conv_gradcheck_special);
    tcase_add_test(tc, test_conv_paths_agree);
    tcase_add_test(tc, test_conv_same_width_direct);
    tcase_add_test(tc, test_conv_bad_input);
    tcase_add_test(tc, test_conv_no_scope_no_leak);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(conv_suite());
}
