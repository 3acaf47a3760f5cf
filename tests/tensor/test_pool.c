/* Pooling: max, avg (count_include_pad both ways), adaptive avg, ceil_mode:
 * values (PyTorch), gradients, bad input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* Reference values from tests/fixtures/conv.py (PyTorch, f64). */
/* max_k3s2p1: [1, 1, 4, 4] */
static const double max_k3s2p1[] = {
    0.8613861386, 0.8613861386, 0.6633663366, 0.6633663366, 0.8613861386, 0.8613861386,
    0.9207920792, 0.9207920792, 0.6435643564, 0.9801980198, 0.8415841584, 0.7821782178,
    0.6435643564, 0.8415841584, 0.8415841584, 0.3069306931};
/* avg_k3s2p1_incl: [1, 1, 4, 4] */
static const double avg_k3s2p1_incl[] = {
    -0.03080308031, 0.0198019802,   -0.1144114411,  0.04180418042,
    -0.02860286029, 0.05610561056,  -0.03410341034, 0.1914191419,
    -0.07920792079, 0.09130913091,  0.001100110011, -0.08140814081,
    0.03300330033,  0.004400440044, 0.09240924092,  -0.1166116612};
/* avg_k3s2p1_excl: [1, 1, 4, 4] */
static const double avg_k3s2p1_excl[] = {
    -0.06930693069, 0.0297029703,   -0.1716171617,  0.09405940594,
    -0.04290429043, 0.05610561056,  -0.03410341034, 0.2871287129,
    -0.1188118812,  0.09130913091,  0.001100110011, -0.1221122112,
    0.07425742574,  0.006600660066, 0.1386138614,   -0.2623762376};
/* max_k2s2_ceil: [1, 1, 3, 3] */
static const double max_k2s2_ceil[] = {0.6633663366, 0.8613861386,  -0.06930693069,
                                       0.7227722772, 0.5247524752,  0.9207920792,
                                       0.3861386139, -0.1485148515, 0.5841584158};
/* avg_k3s2p1_ceil_incl: [1, 1, 4, 4] */
static const double avg_k3s2p1_ceil_incl[] = {
    -0.1936193619, -0.002200220022, -0.1364136414,  -0.04620462046,
    0.1056105611,  0.1463146315,    -0.1661166117,  -0.2722772277,
    0.1892189219,  0.0495049505,    -0.04070407041, 0.1237623762,
    0.1155115512,  -0.1105610561,   -0.04455445545, 0.1608910891};
/* avg_k3s2p1_ceil_excl: [1, 1, 4, 4] */
static const double avg_k3s2p1_ceil_excl[] = {
    -0.4356435644, -0.003300330033, -0.204620462,   -0.1386138614,
    0.1584158416,  0.1463146315,    -0.1661166117,  -0.5445544554,
    0.2838283828,  0.0495049505,    -0.04070407041, 0.2475247525,
    0.3465346535,  -0.2211221122,   -0.08910891089, 0.6435643564};
/* adaptive_7to3: [1, 1, 3, 3] */
static const double adaptive_7to3[] = {-0.02750275028, -0.1177117712, 0.01430143014,
                                       0.007700770077, 0.1397139714,  0.0495049505,
                                       0.04290429043,  0.1749174917,  -0.1375137514};
/* adaptive_5x7to3x4: [1, 1, 3, 4] */
static const double adaptive_5x7to3x4[] = {-0.06930693069, 0.0297029703,   -0.1716171617,
                                           0.09405940594,  -0.04290429043, 0.05610561056,
                                           -0.03410341034, 0.2871287129,   -0.1831683168,
                                           0.08250825083,  -0.1188118812,  -0.0198019802};

/* The fixture's input sequence: ((i * 37) % 101) / 50.5 - 1. */
static Tensor *seq(CtDType dt, int64_t h, int64_t w)
{
    double v[64];
    ck_assert(h * w <= 64);
    for (int64_t i = 0; i < h * w; i++) v[i] = (double)((i * 37) % 101) / 50.5 - 1;
    return tu_tensor(dt, 4, (const int64_t[]){1, 1, h, w}, v);
}

typedef enum Kind { MAX, AVG, ADAPTIVE } Kind;

typedef struct Case {
    const char *name;
    Kind kind;
    int64_t h, w;
    CtPool2dArgs args;
    int out_h, out_w; /* adaptive */
    const double *expect;
    int64_t oh, ow;
} Case;

static const Case cases[] = {
    {"max k3 s2 p1",
     MAX,
     7,
     7,
     {{3, 3}, {2, 2}, {1, 1}, false, false},
     0,
     0,
     max_k3s2p1,
     4,
     4},
    {"avg k3 s2 p1 include pad",
     AVG,
     7,
     7,
     {{3, 3}, {2, 2}, {1, 1}, false, true},
     0,
     0,
     avg_k3s2p1_incl,
     4,
     4},
    {"avg k3 s2 p1 exclude pad",
     AVG,
     7,
     7,
     {{3, 3}, {2, 2}, {1, 1}, false, false},
     0,
     0,
     avg_k3s2p1_excl,
     4,
     4},
    {"max k2 ceil",
     MAX,
     5,
     5,
     {{2, 2}, {0, 0}, {0, 0}, true, false},
     0,
     0,
     max_k2s2_ceil,
     3,
     3},
    {"avg k3 s2 p1 ceil include pad",
     AVG,
     6,
     6,
     {{3, 3}, {2, 2}, {1, 1}, true, true},
     0,
     0,
     avg_k3s2p1_ceil_incl,
     4,
     4},
    {"avg k3 s2 p1 ceil exclude pad",
     AVG,
     6,
     6,
     {{3, 3}, {2, 2}, {1, 1}, true, false},
     0,
     0,
     avg_k3s2p1_ceil_excl,
     4,
     4},
    {"adaptive 7 -> 3", ADAPTIVE, 7, 7, {.kernel = {0, 0}}, 3, 3, adaptive_7to3, 3, 3},
    {"adaptive 5x7 -> 3x4",
     ADAPTIVE,
     5,
     7,
     {.kernel = {0, 0}},
     3,
     4,
     adaptive_5x7to3x4,
     3,
     4},
};
#define N_CASES (int)(sizeof cases / sizeof *cases)

static Tensor *run_case(const Case *c, Tensor *x)
{
    switch (c->kind) {
    case MAX: return tensor_max_pool2d(x, &c->args);
    case AVG: return tensor_avg_pool2d(x, &c->args);
    default: return tensor_adaptive_avg_pool2d(x, c->out_h, c->out_w);
    }
}

START_TEST(test_pool_matches_pytorch)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    for (int i = 0; i < N_CASES; i++) {
        for (int d = 0; d < 2; d++) {
            CtDType dt = d ? CT_F32 : CT_F64;
            Tensor *x = seq(dt, cases[i].h, cases[i].w);
            Tensor *y = run_case(&cases[i], x);
            ck_assert_msg(y != NULL, "%s: %s", cases[i].name, ct_last_error());
            tu_assert_shape(y, 4, 1, 1, cases[i].oh, cases[i].ow);
            tu_assert_values(y, cases[i].expect, cases[i].oh * cases[i].ow,
                             d ? 1e-6 : 1e-9, d ? 1e-6 : 1e-9);
            tensor_free(x);
        }
    }
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* A NaN in a window wins and takes the gradient (the 2x2 fast path and the
 * general one: PyTorch's rule). */
START_TEST(test_max_pool_nan)
{
    TU_MEM_BEGIN;
    Tensor *x = tu_tensor(CT_F32, 4, (const int64_t[]){1, 1, 2, 4},
                          (double[]){1, NAN, 3, 2, 5, 0, NAN, 9});
    tensor_set_requires_grad(x, true);
    CtScope *s = ct_scope_open();
    CtPool2dArgs args[2] = {{.kernel = {2, 2}}, {.kernel = {2, 2}, .padding = {1, 1}}};
    Tensor *y = tensor_max_pool2d(x, &args[0]);
    float v[6];
    ck_assert_int_eq(tensor_copy_to_host(y, v, CT_F32), CT_OK);
    ck_assert(isnan(v[0]) && isnan(v[1]));
    ck_assert_int_eq(tensor_backward(y, tensor_full(4, (const int64_t[]){1, 1, 1, 2}, 1.0,
                                                    CT_F32, ct_cpu())),
                     CT_OK);
    tu_assert_values(tensor_grad(x), ((double[]){0, 1, 0, 0, 0, 0, 1, 0}), 8, 0, 0);
    /* padded (the general path): windows {1}, {NaN, 3}, {2}, {5}, {0, NaN}, {9} */
    Tensor *yp = tensor_max_pool2d(x, &args[1]);
    ck_assert_int_eq(tensor_copy_to_host(yp, v, CT_F32), CT_OK);
    ck_assert(v[0] == 1 && isnan(v[1]) && v[2] == 2 && v[3] == 5 && isnan(v[4]) &&
              v[5] == 9);
    ct_scope_close(s);
    tensor_free(x);
    TU_MEM_END;
}
END_TEST

/* f32 max pooling with args (values and where the gradient goes) on plane
 * widths with and without a tail of a vector's outputs, odd sizes, many
 * ties, NaN, +-0 and inf, under CTRAINER_CPU_ISA=isa ("baseline": the
 * scalar kernel); v (2 x the input's elements) gets the output then the
 * input gradient. */
static void max_pool_run(const char *isa, const int64_t shape[4],
                         const CtPool2dArgs *args, float *v)
{
    if (isa)
        setenv("CTRAINER_CPU_ISA", isa, 1);
    else
        unsetenv("CTRAINER_CPU_ISA");
    const int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
    double *d = malloc((size_t)n * sizeof *d);
    const double special[5] = {NAN, 0.0, -0.0, INFINITY, -INFINITY};
    for (int64_t i = 0; i < n; i++)
        d[i] = i % 23 == 7 ? special[i / 23 % 5] : (double)((i * 7919) % 5);
    Tensor *x = tu_tensor(CT_F32, 4, shape, d);
    tensor_set_requires_grad(x, true);
    CtScope *s = ct_scope_open();
    Tensor *y = tensor_max_pool2d(x, args);
    ck_assert_ptr_nonnull(y);
    Tensor *g64 = tu_rand64(4, tensor_shape(y), -1, 1, 5, false);
    ck_assert_int_eq(tensor_backward(y, tensor_cast(g64, CT_F32)), CT_OK);
    tensor_free(g64);
    ck_assert_int_eq(tensor_copy_to_host(y, v, CT_F32), CT_OK);
    ck_assert_int_eq(tensor_copy_to_host(tensor_grad(x), v + tensor_numel(y), CT_F32),
                     CT_OK);
    ct_scope_close(s);
    tensor_free(x);
    free(d);
    unsetenv("CTRAINER_CPU_ISA");
}

/* Every vector kernel of this CPU, then AVX2 alone, against the scalar
 * loops, bit for bit. */
static void max_pool_kernels_agree(const int64_t shape[4], const CtPool2dArgs *args)
{
    const size_t n = (size_t)(2 * shape[0] * shape[1] * shape[2] * shape[3]);
    float *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b);
    max_pool_run("baseline", shape, args, a);
    for (int k = 0; k < 2; k++) {
        max_pool_run(k ? "avx2" : NULL, shape, args, b);
        ck_assert_msg(memcmp(a, b, n * sizeof *a) == 0,
                      "shape %lld x %lld, window %dx%d stride %dx%d padding %dx%d%s, %s "
                      "kernel: differs from the scalar one",
                      (long long)shape[2], (long long)shape[3], args->kernel[0],
                      args->kernel[1], args->stride[0], args->stride[1], args->padding[0],
                      args->padding[1], args->ceil_mode ? " ceil" : "",
                      k ? "AVX2" : "best");
    }
    free(a);
    free(b);
}

START_TEST(test_max_pool_2x2_kernels_agree)
{
    TU_MEM_BEGIN;
    static const int64_t SHAPES[][4] = {
        {2, 3, 9, 70}, {1, 1, 4, 34}, {1, 2, 5, 33}, {3, 2, 24, 24}, {1, 1, 2, 2}};
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++)
        max_pool_kernels_agree(SHAPES[i], &(CtPool2dArgs){.kernel = {2, 2}});
    TU_MEM_END;
}
END_TEST

/* The other windows: ResNet's 3x3 stride-2 padded pool, stride 1, uneven
 * windows and strides, ceil mode, a column stride the vector kernel leaves
 * to the scalar loop. */
START_TEST(test_max_pool_windows_kernels_agree)
{
    TU_MEM_BEGIN;
    static const int64_t SHAPES[][4] = {
        {2, 3, 9, 70}, {1, 2, 5, 33}, {2, 2, 16, 16}, {1, 1, 3, 3}, {1, 1, 7, 2}};
    static const CtPool2dArgs ARGS[] = {
        {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}},
        {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}},
        {.kernel = {2, 2}, .stride = {1, 1}},
        {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 0}},
        {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true},
        {.kernel = {2, 2}, .stride = {2, 2}, .padding = {1, 1}},
        {.kernel = {5, 5}, .stride = {2, 2}, .padding = {2, 2}},
        {.kernel = {3, 3}, .stride = {3, 3}},
    };
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++)
        for (size_t k = 0; k < sizeof ARGS / sizeof ARGS[0]; k++) {
            const CtPool2dArgs *a = &ARGS[k];
            if (SHAPES[i][2] + 2 * a->padding[0] < a->kernel[0] ||
                SHAPES[i][3] + 2 * a->padding[1] < a->kernel[1])
                continue; /* no output */
            max_pool_kernels_agree(SHAPES[i], a);
        }
    TU_MEM_END;
}
END_TEST

/* With ceil_mode and a stride above 1, PyTorch lets a window be larger than
 * the padded input (F.max_pool2d / F.avg_pool2d on arange(4) as 2x2), and
 * refuses it at stride 1. */
START_TEST(test_pool_ceil_window_past_input)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    static const struct {
        int k, st, pad;
        double avg_incl, avg_excl, gavg_incl;
    } C[] = {{3, 2, 0, 1.5, 1.5, 0.25},
             {3, 3, 1, 6.0 / 9, 1.5, 1.0 / 9},
             {5, 4, 2, 0.24, 1.5, 0.04}};
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        CtPool2dArgs a = {.kernel = {C[i].k, C[i].k},
                          .stride = {C[i].st, C[i].st},
                          .padding = {C[i].pad, C[i].pad},
                          .ceil_mode = true,
                          .count_include_pad = true};
        for (int d = 0; d < 2; d++) {
            Tensor *x = tu_tensor(d ? CT_F32 : CT_F64, 4, (const int64_t[]){1, 1, 2, 2},
                                  (const double[]){0, 1, 2, 3});
            ck_assert_int_eq(tensor_set_requires_grad(x, true), CT_OK);
            Tensor *m = tensor_max_pool2d(x, &a);
            ck_assert_msg(m != NULL, "k%d s%d: %s", C[i].k, C[i].st, ct_last_error());
            tu_assert_shape(m, 4, 1, 1, 1, 1);
            tu_assert_values(m, (const double[]){3}, 1, 0, 0);
            ck_assert_int_eq(tensor_backward(m, NULL), CT_OK);
            tu_assert_values(tensor_grad(x), ((const double[]){0, 0, 0, 1}), 4, 0, 0);
            ck_assert_int_eq(tensor_set_grad(x, NULL), CT_OK);
            Tensor *v = tensor_avg_pool2d(x, &a);
            tu_assert_values(v, &C[i].avg_incl, 1, 1e-6, 1e-6);
            ck_assert_int_eq(tensor_backward(v, NULL), CT_OK);
            const double g = C[i].gavg_incl;
            tu_assert_values(tensor_grad(x), ((const double[]){g, g, g, g}), 4, 1e-7,
                             1e-6);
            a.count_include_pad = false;
            tu_assert_values(tensor_avg_pool2d(x, &a), &C[i].avg_excl, 1, 1e-6, 1e-6);
            a.count_include_pad = true;
            tensor_free(x);
        }
    }
    Tensor *x = tensor_zeros(4, (const int64_t[]){1, 1, 2, 2}, CT_F32, ct_cpu());
    CtPool2dArgs s1 = {.kernel = {3, 3}, .stride = {1, 1}, .ceil_mode = true};
    ck_assert_ptr_null(tensor_max_pool2d(x, &s1));
    tu_assert_error(CT_ERR_SHAPE, "kernel 3x3 is larger than the padded input");
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_max_pool_ties_and_overlap)
{
    TU_MEM_BEGIN;
    /* equal values: the gradient goes to the first of the window */
    Tensor *x = tu_tensor(CT_F64, 4, (const int64_t[]){1, 1, 2, 4},
                          (double[]){1, 1, 2, 0, 1, 1, 2, 2});
    tensor_set_requires_grad(x, true);
    CtScope *s = ct_scope_open();
    CtPool2dArgs k2 = {.kernel = {2, 2}};
    Tensor *y = tensor_max_pool2d(x, &k2);
    tu_assert_values(y, ((double[]){1, 2}), 2, 0, 0);
    ck_assert_int_eq(tensor_backward(y, tensor_full(4, (const int64_t[]){1, 1, 1, 2}, 1.0,
                                                    CT_F64, ct_cpu())),
                     CT_OK);
    tu_assert_values(tensor_grad(x), ((double[]){1, 0, 1, 0, 0, 0, 0, 0}), 8, 0, 0);
    /* overlapping windows (stride 1) sharing one max accumulate into it */
    tensor_set_grad(x, NULL);
    CtPool2dArgs k2s1 = {.kernel = {2, 2}, .stride = {1, 1}};
    Tensor *y2 = tensor_max_pool2d(x, &k2s1);
    tu_assert_values(y2, ((double[]){1, 2, 2}), 3, 0, 0);
    ck_assert_int_eq(tensor_backward(y2, tensor_full(4, (const int64_t[]){1, 1, 1, 3},
                                                     1.0, CT_F64, ct_cpu())),
                     CT_OK);
    tu_assert_values(tensor_grad(x), ((double[]){1, 0, 2, 0, 0, 0, 0, 0}), 8, 0, 0);
    ct_scope_close(s);
    tensor_free(x);
    TU_MEM_END;
}
END_TEST

typedef struct GradCtx {
    const Case *c;
    bool transpose;
} GradCtx;

static Tensor *pool_fn(Tensor **in, void *ctx)
{
    const GradCtx *g = ctx;
    Tensor *x = g->transpose ? tensor_transpose(in[0], 2, 3) : in[0];
    return run_case(g->c, x);
}

START_TEST(test_pool_gradcheck)
{
    for (int i = 0; i < N_CASES; i++) {
        const Case *c = &cases[i];
        /* N = 2, C = 3; random values have no ties */
        Tensor *x =
            tu_rand64(4, (const int64_t[]){2, 3, c->h, c->w}, -1, 1, 60 + i, true);
        GradCtx g = {c, false};
        tu_gradcheck(c->name, pool_fn, &g, 1, &x);
        tensor_free(x);
        /* through a transposed (non-contiguous) view */
        Tensor *xt =
            tu_rand64(4, (const int64_t[]){2, 3, c->w, c->h}, -1, 1, 80 + i, true);
        GradCtx gt = {c, true};
        tu_gradcheck(c->name, pool_fn, &gt, 1, &xt);
        tensor_free(xt);
    }
}
END_TEST

START_TEST(test_pool_bad_input)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *x = tensor_zeros(4, (const int64_t[]){1, 2, 4, 4}, CT_F32, ct_cpu());
    Tensor *x3 = tensor_zeros(3, (const int64_t[]){2, 4, 4}, CT_F32, ct_cpu());
    CtPool2dArgs k2 = {.kernel = {2, 2}};
    ck_assert_ptr_null(tensor_max_pool2d(x3, &k2));
    tu_assert_error(CT_ERR_SHAPE,
                    "max_pool2d: x must be 4-d (N, C, H, W), got f32[2, 4, 4]");
    ck_assert_ptr_null(tensor_adaptive_avg_pool2d(x3, 2, 2));
    tu_assert_error(CT_ERR_SHAPE, "adaptive_avg_pool2d: x must be 4-d");
    CtPool2dArgs k5 = {.kernel = {5, 5}};
    ck_assert_ptr_null(tensor_avg_pool2d(x, &k5));
    tu_assert_error(CT_ERR_SHAPE,
                    "avg_pool2d: kernel 5x5 is larger than the padded input "
                    "of x f32[1, 2, 4, 4] cpu");
    CtPool2dArgs pad = {.kernel = {3, 3}, .padding = {2, 2}};
    ck_assert_ptr_null(tensor_max_pool2d(x, &pad));
    tu_assert_error(CT_ERR_INVALID,
                    "padding 2x2 must be between 0 and half the kernel 3x3");
    CtPool2dArgs k0 = {.kernel = {0, 2}};
    ck_assert_ptr_null(tensor_max_pool2d(x, &k0));
    tu_assert_error(CT_ERR_INVALID, "kernel 0x2 and stride 0x2 must be positive");
    ck_assert_ptr_null(tensor_max_pool2d(x, NULL));
    tu_assert_error(CT_ERR_NULL, "max_pool2d: args is NULL");
    ck_assert_ptr_null(tensor_adaptive_avg_pool2d(x, 0, 2));
    tu_assert_error(CT_ERR_INVALID, "output size 0x2 must be positive");
    Tensor *xi = tensor_zeros(4, (const int64_t[]){1, 2, 4, 4}, CT_I32, ct_cpu());
    ck_assert_ptr_null(tensor_avg_pool2d(xi, &k2));
    tu_assert_error(CT_ERR_DTYPE, "avg_pool2d: expected a floating-point tensor");
    ck_assert_ptr_null(tensor_max_pool2d(tensor_cast(x, CT_F16), &k2));
    tu_assert_error(CT_ERR_UNSUPPORTED, "pool2d: not supported on cpu for f16");
    ct_error(CT_ERR_IO, "earlier failure");
    ck_assert_ptr_null(tensor_max_pool2d(NULL, &k2));
    ck_assert_ptr_null(tensor_avg_pool2d(NULL, &k2));
    ck_assert_ptr_null(tensor_adaptive_avg_pool2d(NULL, 1, 1));
    tu_assert_error(CT_ERR_IO, "earlier failure");
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

Suite *pool_suite(void)
{
    Suite *s = suite_create("tensor_pool");
    TCase *tc = tcase_create("pool2d");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pool_matches_pytorch);
    tcase_add_test(tc, test_max_pool_ties_and_overlap);
    tcase_add_test(tc, test_max_pool_nan);
    tcase_add_test(tc, test_max_pool_2x2_kernels_agree);
    tcase_add_test(tc, test_max_pool_windows_kernels_agree);
    tcase_add_test(tc, test_pool_gradcheck);
    tcase_add_test(tc, test_pool_ceil_window_past_input);
    tcase_add_test(tc, test_pool_bad_input);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(pool_suite());
}
