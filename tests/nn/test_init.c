/* Initialisation: fans and gains as PyTorch computes them, and the moments of
 * every init on large tensors against its distribution. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctrainer/nn.h"
#include "testutil.h"

typedef struct Moments {
    double mean, var, min, max;
} Moments;

static Moments moments(const Tensor *t)
{
    int64_t n = tensor_numel(t);
    double *v = malloc((size_t)n * sizeof *v);
    ck_assert_int_eq(tensor_copy_to_host(t, v, CT_F64), CT_OK);
    Moments m = {0, 0, INFINITY, -INFINITY};
    for (int64_t i = 0; i < n; i++) {
        m.mean += v[i];
        m.min = fmin(m.min, v[i]);
        m.max = fmax(m.max, v[i]);
    }
    m.mean /= (double)n;
    for (int64_t i = 0; i < n; i++) m.var += (v[i] - m.mean) * (v[i] - m.mean);
    m.var /= (double)n;
    free(v);
    return m;
}

/* With n >= 1e5 samples the mean is within 5 standard errors (sd * 0.016)
 * and the variance within 3% — failures by chance are far below 1e-6. */
static void assert_normal(const Tensor *t, double mean, double sd)
{
    Moments m = moments(t);
    double n = (double)tensor_numel(t);
    ck_assert_msg(fabs(m.mean - mean) <= 5 * sd / sqrt(n), "mean %g, expected %g", m.mean,
                  mean);
    ck_assert_msg(fabs(m.var / (sd * sd) - 1) <= 0.03, "variance %g, expected %g", m.var,
                  sd * sd);
    /* 4.5 sd is exceeded by ~1e5 samples a handful of times; 7 sd never */
    ck_assert_msg(m.max > mean + 3.5 * sd && m.max < mean + 7 * sd, "max %g", m.max);
    ck_assert_msg(m.min < mean - 3.5 * sd && m.min > mean - 7 * sd, "min %g", m.min);
}

static void assert_uniform(const Tensor *t, double lo, double hi)
{
    Moments m = moments(t);
    double n = (double)tensor_numel(t), w = hi - lo, sd = w / sqrt(12.0);
    ck_assert_msg(fabs(m.mean - (lo + hi) / 2) <= 5 * sd / sqrt(n), "mean %g", m.mean);
    ck_assert_msg(fabs(m.var / (sd * sd) - 1) <= 0.03, "variance %g, expected %g", m.var,
                  sd * sd);
    ck_assert_msg(m.min >= lo && m.max <= hi, "range [%g, %g] outside [%g, %g]", m.min,
                  m.max, lo, hi);
    ck_assert_msg(m.min < lo + 1e-3 * w && m.max > hi - 1e-3 * w,
                  "range [%g, %g] does not reach the bounds [%g, %g]", m.min, m.max, lo,
                  hi);
}

START_TEST(test_fans)
{
    Tensor *w2 = tensor_empty(2, (const int64_t[]){3, 5}, CT_F32, ct_cpu());
    ck_assert_int_eq(nn_init_fan_in(w2), 5);
    ck_assert_int_eq(nn_init_fan_out(w2), 3);
    Tensor *w4 = tensor_empty(4, (const int64_t[]){16, 8, 3, 5}, CT_F32, ct_cpu());
    ck_assert_int_eq(nn_init_fan_in(w4), 8 * 15);
    ck_assert_int_eq(nn_init_fan_out(w4), 16 * 15);
    Tensor *b = tensor_empty(1, (const int64_t[]){7}, CT_F32, ct_cpu());
    ck_assert_int_eq(nn_init_fan_in(b), -1);
    tu_assert_error(CT_ERR_SHAPE,
                    "nn_init_fan_in: fan in and fan out need a tensor of at "
                    "least 2 dims, got f32[7] cpu");
    ck_assert_int_eq(nn_init_fan_out(b), -1);
    tu_assert_error(CT_ERR_SHAPE, "nn_init_fan_out");
    ck_assert_int_eq(nn_init_fan_in(NULL), -1);
    tu_assert_error(CT_ERR_NULL, "NULL tensor");
    tensor_free(w2);
    tensor_free(w4);
    tensor_free(b);
}
END_TEST

START_TEST(test_gains)
{
    /* torch.nn.init.calculate_gain */
    ck_assert_double_eq_tol(nn_init_gain(NN_NONLIN_LEAKY_RELU, 0), sqrt(2.0), 1e-15);
    ck_assert_double_eq_tol(nn_init_gain(NN_NONLIN_LEAKY_RELU, 0.01), 1.4141428569978354,
                            1e-15);
    ck_assert_double_eq_tol(nn_init_gain(NN_NONLIN_LEAKY_RELU, sqrt(5.0)), sqrt(1.0 / 3),
                            1e-15);
    ck_assert_double_eq_tol(nn_init_gain(NN_NONLIN_RELU, 0), 1.4142135623730951, 1e-15);
    ck_assert(nn_init_gain(NN_NONLIN_LINEAR, 0) == 1.0);
    ck_assert_double_eq_tol(nn_init_gain(NN_NONLIN_TANH, 0), 5.0 / 3, 1e-15);
    ck_assert(isnan(nn_init_gain((NnNonlinearity)42, 0)));
    tu_assert_error(CT_ERR_INVALID, "nn_init_gain: unknown nonlinearity 42");
}
END_TEST

static const int64_t BIG[] = {384, 96, 3, 3}; /* 331776 elements, fan_in 864 */

START_TEST(test_uniform_normal_constant)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(1, 0);
    Tensor *t = tensor_empty(4, BIG, CT_F32, ct_cpu());
    ck_assert_int_eq(nn_init_uniform_(t, -0.5, 2.0, &g), CT_OK);
    assert_uniform(t, -0.5, 2.0);
    ck_assert_int_eq(nn_init_normal_(t, 0.3, 2.5, &g), CT_OK);
    assert_normal(t, 0.3, 2.5);
    ck_assert_int_eq(nn_init_constant_(t, 0.75), CT_OK);
    Moments m = moments(t);
    ck_assert(m.min == 0.75 && m.max == 0.75);
    tensor_free(t);

    /* f64 and bf16 storage, and a non-contiguous view */
    Tensor *d = tensor_empty(2, (const int64_t[]){400, 300}, CT_F64, ct_cpu());
    ck_assert_int_eq(nn_init_normal_(d, -1, 0.1, &g), CT_OK);
    assert_normal(d, -1, 0.1);
    Tensor *h = tensor_empty(2, (const int64_t[]){400, 300}, CT_BF16, ct_cpu());
    ck_assert_int_eq(nn_init_uniform_(h, 0, 1, &g), CT_OK);
    assert_uniform(h, 0, 1);
    Tensor *tr = tensor_transpose(d, 0, 1);
    ck_assert_int_eq(nn_init_uniform_(tr, 2, 3, &g), CT_OK);
    assert_uniform(d, 2, 3);
    tensor_free(tr);
    tensor_free(d);
    tensor_free(h);
    TU_MEM_END;
}
END_TEST

START_TEST(test_kaiming)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(2, 0);
    Tensor *t = tensor_empty(4, BIG, CT_F32, ct_cpu());
    /* PyTorch's Linear/Conv2d default: a = sqrt(5) gives bound 1/sqrt(fan_in) */
    ck_assert_int_eq(
        nn_init_kaiming_uniform_(t, sqrt(5.0), NN_FAN_IN, NN_NONLIN_LEAKY_RELU, &g),
        CT_OK);
    assert_uniform(t, -1 / sqrt(864.0), 1 / sqrt(864.0));
    /* fan_out = 384 * 9, relu: std sqrt(2 / 3456), bound sqrt(3) std */
    ck_assert_int_eq(nn_init_kaiming_uniform_(t, 0, NN_FAN_OUT, NN_NONLIN_RELU, &g),
                     CT_OK);
    double b = sqrt(3.0) * sqrt(2.0 / 3456);
    assert_uniform(t, -b, b);
    ck_assert_int_eq(nn_init_kaiming_normal_(t, 0, NN_FAN_OUT, NN_NONLIN_RELU, &g),
                     CT_OK);
    assert_normal(t, 0, sqrt(2.0 / 3456));
    ck_assert_int_eq(nn_init_kaiming_normal_(t, 0.2, NN_FAN_IN, NN_NONLIN_LEAKY_RELU, &g),
                     CT_OK);
    assert_normal(t, 0, sqrt(2.0 / 1.04) / sqrt(864.0));
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

START_TEST(test_xavier)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(3, 0);
    Tensor *t = tensor_empty(2, (const int64_t[]){500, 300}, CT_F32, ct_cpu());
    ck_assert_int_eq(nn_init_xavier_uniform_(t, 1.0, &g), CT_OK);
    assert_uniform(t, -sqrt(6.0 / 800), sqrt(6.0 / 800));
    ck_assert_int_eq(nn_init_xavier_normal_(t, 5.0 / 3, &g), CT_OK);
    assert_normal(t, 0, 5.0 / 3 * sqrt(2.0 / 800));
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

START_TEST(test_deterministic_and_not_recorded)
{
    TU_MEM_BEGIN;
    const int64_t s[] = {64, 32};
    Tensor *a = tensor_empty(2, s, CT_F32, ct_cpu()),
           *b = tensor_empty(2, s, CT_F32, ct_cpu());
    ck_assert_int_eq(tensor_set_requires_grad(a, true), CT_OK);
    CtGenerator g1 = ct_generator(9, 1), g2 = ct_generator(9, 1);
    ck_assert_int_eq(nn_init_kaiming_uniform_(a, 0, NN_FAN_IN, NN_NONLIN_RELU, &g1),
                     CT_OK);
    ck_assert_int_eq(nn_init_kaiming_uniform_(b, 0, NN_FAN_IN, NN_NONLIN_RELU, &g2),
                     CT_OK);
    ck_assert(g1.offset > 0 && g1.offset == g2.offset);
    ck_assert_mem_eq(tensor_data(a), tensor_data(b), 64 * 32 * sizeof(float));
    /* the next draw differs; a parameter stays a leaf requiring grad */
    ck_assert_int_eq(nn_init_kaiming_uniform_(b, 0, NN_FAN_IN, NN_NONLIN_RELU, &g2),
                     CT_OK);
    ck_assert(memcmp(tensor_data(a), tensor_data(b), 64 * 32 * sizeof(float)) != 0);
    ck_assert(tensor_requires_grad(a));
    ck_assert_ptr_null(tensor_grad(a));
    /* zero-size tensors are left alone, as in PyTorch */
    Tensor *e = tensor_empty(2, (const int64_t[]){0, 4}, CT_F32, ct_cpu());
    ck_assert_int_eq(nn_init_kaiming_normal_(e, 0, NN_FAN_IN, NN_NONLIN_RELU, &g1),
                     CT_OK);
    tensor_free(e);
    tensor_free(a);
    tensor_free(b);
    TU_MEM_END;
}
END_TEST

START_TEST(test_bad_input)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(1, 0);
    Tensor *v = tensor_zeros(1, (const int64_t[]){10}, CT_F32, ct_cpu());
    ck_assert_int_eq(nn_init_kaiming_uniform_(v, 0, NN_FAN_IN, NN_NONLIN_RELU, &g),
                     CT_ERR_SHAPE);
    tu_assert_error(CT_ERR_SHAPE, "nn_init_kaiming_uniform_: fan in and fan out need a "
                                  "tensor of at least 2 dims");
    ck_assert_int_eq(nn_init_xavier_normal_(v, 1, &g), CT_ERR_SHAPE);
    tu_assert_error(CT_ERR_SHAPE, "nn_init_xavier_normal_");
    Moments m = moments(v);
    ck_assert(m.min == 0 && m.max == 0); /* untouched */
    Tensor *w = tensor_zeros(2, (const int64_t[]){4, 4}, CT_F32, ct_cpu());
    ck_assert_int_eq(nn_init_kaiming_normal_(w, 0, (NnFanMode)3, NN_NONLIN_RELU, &g),
                     CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "unknown fan mode 3");
    ck_assert_int_eq(nn_init_uniform_(w, 1, 0, &g), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "low 1 > high 0");
    ck_assert_int_eq(nn_init_normal_(w, 0, -1, &g), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "std must be >= 0");
    ck_assert_int_eq(nn_init_normal_(w, 0, 1, NULL), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "NULL generator");
    Tensor *i = tensor_zeros(2, (const int64_t[]){4, 4}, CT_I64, ct_cpu());
    ck_assert_int_eq(nn_init_uniform_(i, 0, 1, &g), CT_ERR_DTYPE);
    tu_assert_error(CT_ERR_DTYPE, "nn_init_uniform_: needs a floating-point tensor, got "
                                  "i64[4, 4] cpu");
    ck_assert_int_eq(nn_init_constant_(i, 3), CT_OK); /* any dtype */
    ck_assert_int_eq(nn_init_constant_(NULL, 3), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "nn_init_constant_");
    m = moments(w);
    ck_assert(m.min == 0 && m.max == 0);
    tensor_free(v);
    tensor_free(w);
    tensor_free(i);
    TU_MEM_END;
}
END_TEST

/* Truncated normal N(mean, sd²) on [a, b]: its moments and CDF, as
 * torch.nn.init.trunc_normal_ produces them. The closed forms (φ, Φ the
 * standard normal pdf and cdf; α, β the standardised bounds; Z = Φ(β) -
 * Φ(α)): mean + sd (φ(α) - φ(β)) / Z, and variance sd² (1 + (αφ(α) -
 * βφ(β)) / Z - ((φ(α) - φ(β)) / Z)²), agree with PyTorch's samples; e.g.
 *   t = torch.empty(2000000); torch.nn.init.trunc_normal_(t, 1, 2, 0, 5)
 *   t.mean(), t.var() -> 1.8920, 1.5079 (formulas: 1.8915, 1.5064)
 * and likewise for (0, 1, -2, 2) -> var 0.7736 (0.7737) and (0, 1, 3, 4),
 * where PyTorch warns that mean is far from [a, b] -> mean 3.2606, var
 * 0.04936 (3.2605, 0.04928). */
typedef struct TruncCase {
    double mean, sd, a, b;
} TruncCase;

static double pdf(double x)
{
    return exp(-x * x / 2) / sqrt(2 * M_PI);
}

static double cdf(double x)
{
    return 0.5 * erfc(-x / M_SQRT2);
}

static void assert_trunc_normal(const Tensor *t, TruncCase c)
{
    int64_t n = tensor_numel(t);
    double al = (c.a - c.mean) / c.sd, be = (c.b - c.mean) / c.sd;
    double z = cdf(be) - cdf(al), d = (pdf(al) - pdf(be)) / z;
    double want_mean = c.mean + c.sd * d;
    double want_var = c.sd * c.sd * (1 + (al * pdf(al) - be * pdf(be)) / z - d * d);
    Moments m = moments(t);
    ck_assert_msg(m.min >= c.a && m.max <= c.b, "range [%g, %g] outside [%g, %g]", m.min,
                  m.max, c.a, c.b);
    double w = c.b - c.a;
    /* bounds within 2.5 sd of the mean are reached (to 2% of b - a) */
    ck_assert_msg((al < -2.5 || m.min < c.a + 0.02 * w) &&
                      (be > 2.5 || m.max > c.b - 0.02 * w),
                  "range [%g, %g] does not reach near [%g, %g]", m.min, m.max, c.a, c.b);
    ck_assert_msg(fabs(m.mean - want_mean) <= 5 * sqrt(want_var / (double)n),
                  "mean %g, expected %g", m.mean, want_mean);
    ck_assert_msg(fabs(m.var / want_var - 1) <= 0.03, "variance %g, expected %g", m.var,
                  want_var);
    /* the empirical CDF at 9 points within 5 standard errors */
    double *v = malloc((size_t)n * sizeof *v);
    ck_assert_int_eq(tensor_copy_to_host(t, v, CT_F64), CT_OK);
    for (int k = 1; k < 10; k++) {
        double q = c.a + w * k / 10.0;
        double p = (cdf((q - c.mean) / c.sd) - cdf(al)) / z;
        int64_t below = 0;
        for (int64_t i = 0; i < n; i++) below += v[i] < q;
        double f = (double)below / (double)n;
        ck_assert_msg(fabs(f - p) <= 5 * sqrt(p * (1 - p) / (double)n) + 1e-9,
                      "P(x < %g) = %g, expected %g", q, f, p);
    }
    free(v);
}

START_TEST(test_trunc_normal)
{
    TU_MEM_BEGIN;
    const TruncCase cases[] = {
        {0, 1, -2, 2}, {1, 2, 0, 5}, {0, 1, 3, 4}, {0.5, 0.1, -1, 1}, {0, 0.02, -2, 2}};
    CtGenerator g = ct_generator(11, 0);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        TruncCase c = cases[k];
        CtDType dt = k % 2 ? CT_F64 : CT_F32;
        Tensor *t = tensor_empty(2, (const int64_t[]){400, 500}, dt, ct_cpu());
        ck_assert_int_eq(nn_init_trunc_normal_(t, c.mean, c.sd, c.a, c.b, &g), CT_OK);
        assert_trunc_normal(t, c);
        tensor_free(t);
    }
    /* deterministic for a generator state; a parameter stays a leaf */
    Tensor *a = tensor_empty(2, (const int64_t[]){8, 8}, CT_F32, ct_cpu()),
           *b = tensor_empty(2, (const int64_t[]){8, 8}, CT_F32, ct_cpu());
    ck_assert_int_eq(tensor_set_requires_grad(a, true), CT_OK);
    CtGenerator g1 = ct_generator(3, 0), g2 = ct_generator(3, 0);
    ck_assert_int_eq(nn_init_trunc_normal_(a, 0, 1, -2, 2, &g1), CT_OK);
    ck_assert_int_eq(nn_init_trunc_normal_(b, 0, 1, -2, 2, &g2), CT_OK);
    ck_assert_mem_eq(tensor_data(a), tensor_data(b), 64 * sizeof(float));
    ck_assert(tensor_requires_grad(a) && !tensor_grad(a));
    /* bad arguments leave t alone */
    ck_assert_int_eq(nn_init_constant_(b, 7), CT_OK);
    ck_assert_int_eq(nn_init_trunc_normal_(b, 0, 0, -2, 2, &g), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "nn_init_trunc_normal_: need a finite mean, a finite "
                                    "std > 0 and a < b, got mean 0, std 0, a -2, b 2");
    ck_assert_int_eq(nn_init_trunc_normal_(b, 0, 1, 2, 2, &g), CT_ERR_INVALID);
    ck_assert_int_eq(nn_init_trunc_normal_(b, NAN, 1, -2, 2, &g), CT_ERR_INVALID);
    ck_assert_int_eq(nn_init_trunc_normal_(b, 0, 1, -2, 2, NULL), CT_ERR_NULL);
    Moments m = moments(b);
    ck_assert(m.min == 7 && m.max == 7);
    Tensor *i = tensor_zeros(1, (const int64_t[]){4}, CT_I64, ct_cpu());
    ck_assert_int_eq(nn_init_trunc_normal_(i, 0, 1, -2, 2, &g), CT_ERR_DTYPE);
    tu_assert_error(CT_ERR_DTYPE, "nn_init_trunc_normal_: needs a floating-point tensor");
    ck_assert_int_eq(nn_init_trunc_normal_(NULL, 0, 1, -2, 2, &g), CT_ERR_NULL);
    tensor_free(a);
    tensor_free(b);
    tensor_free(i);
    TU_MEM_END;
}
END_TEST

START_TEST(test_cuda_matches_cpu)
{
    /* Philox draws do not depend on the device */
    if (ct_cuda_device_count() == 0) {
        fprintf(stderr, "skipped 1 CUDA test: no device\n");
        return;
    }
    const int64_t s[] = {64, 48};
    Tensor *c = tensor_empty(2, s, CT_F32, ct_cpu());
    Tensor *gpu = tensor_empty(2, s, CT_F32, ct_cuda(0));
    CtGenerator g1 = ct_generator(4, 2), g2 = ct_generator(4, 2);
    ck_assert_int_eq(nn_init_xavier_normal_(c, 1, &g1), CT_OK);
    ck_assert_int_eq(nn_init_xavier_normal_(gpu, 1, &g2), CT_OK);
    double *v = malloc(64 * 48 * sizeof *v);
    ck_assert_int_eq(tensor_copy_to_host(c, v, CT_F64), CT_OK);
    tu_assert_values(gpu, v, 64 * 48, 1e-6, 1e-5);
    free(v);
    tensor_free(c);
    tensor_free(gpu);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nn_init");
    TCase *tc = tcase_create("init");
    tcase_add_test(tc, test_fans);
    tcase_add_test(tc, test_gains);
    tcase_add_test(tc, test_uniform_normal_constant);
    tcase_add_test(tc, test_kaiming);
    tcase_add_test(tc, test_xavier);
    tcase_add_test(tc, test_deterministic_and_not_recorded);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_trunc_normal);
    tcase_add_test(tc, test_cuda_matches_cpu);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
