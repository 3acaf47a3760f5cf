/* CUDA backend: UNARY, UNARY_BWD, WHERE, REDUCE, ARG_REDUCE and UNSCALE on
 * cuda:0 against the CPU backend, the same CtOpCall dispatched on both.
 *
 * Without a device the tests are skipped with a loud count on stderr.
 * Tolerances (|gpu - cpu| <= atol + rtol |cpu|, a NaN must meet a NaN): the
 * device's math functions differ from the host's by a few ulp, so f32
 * 1e-5 relative (1e-6 absolute), f64 1e-12; bf16 and f16 results may round
 * the other way: 1e-2 and 2e-3 relative. Integer kinds, WHERE, MAX/MIN with
 * their indices, ARG_REDUCE and UNSCALE are exact.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tensor/elementwise.h"
#include "tensor/internal.h"
#include "tensor/reduce.h"
#include "testutil.h"

static CtDevice gpu(void)
{
    return ct_cuda(0);
}

static double *host_f64(const Tensor *t)
{
    int64_t n = tensor_numel(t);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    ck_assert_int_eq(tensor_copy_to_host(t, v, CT_F64), CT_OK);
    return v;
}

/* Asserts the CUDA tensor g holds the CPU tensor c's values within tolerance. */
#define assert_near(c, g, atol, rtol, what)                                              \
    assert_near_at(__LINE__, c, g, atol, rtol, what)
static void assert_near_at(int line, const Tensor *c, const Tensor *g, double atol,
                           double rtol, const char *what)
{
    ck_assert_int_eq(tensor_numel(c), tensor_numel(g));
    double *w = host_f64(c), *v = host_f64(g);
    for (int64_t i = 0; i < tensor_numel(c); i++) {
        bool ok = isnan(w[i])
                      ? isnan(v[i])
                      : (w[i] == v[i] || fabs(v[i] - w[i]) <= atol + rtol * fabs(w[i]));
        ck_assert_msg(ok, "line %d: %s: element %lld: gpu %.17g, cpu %.17g", line, what,
                      (long long)i, v[i], w[i]);
    }
    free(w);
    free(v);
}

static void tolerance(CtDType dt, double *atol, double *rtol)
{
    switch (dt) {
    case CT_F32: *atol = 1e-6, *rtol = 1e-5; break;
    case CT_F64: *atol = *rtol = 1e-12; break;
    case CT_BF16: *atol = 1e-6, *rtol = 1e-2; break;
    case CT_F16: *atol = 1e-6, *rtol = 2e-3; break;
    default: *atol = *rtol = 0; break;
    }
}

/* Runs `call` (operands on the CPU) on the CPU and, with every operand
 * copied to cuda:0, on the GPU; returns the GPU outputs in gout[]. */
static void run_both(const CtOpCall *call, int nout, int nin, Tensor **gout)
{
    CtOpCall g = *call;
    for (int i = 0; i < nout; i++)
        g.out[i] = gout[i] = tensor_to_device(call->out[i], gpu());
    for (int i = 0; i < nin; i++)
        g.in[i] = tensor_to_device((Tensor *)call->in[i], gpu());
    ck_assert_msg(ct_dispatch(call) == CT_OK, "cpu: %s", ct_last_error());
    ck_assert_msg(ct_dispatch(&g) == CT_OK, "cuda: %s", ct_last_error());
}

/* Values in [-3, 3) as dt (whole numbers in [-50, 50) for integers). */
static Tensor *rand_cpu(CtDType dt, int ndim, const int64_t *shape, unsigned seed)
{
    bool is_int = !ct_dtype_is_float(dt);
    Tensor *x = tu_rand64(ndim, shape, is_int ? -50 : -3, is_int ? 50 : 3, seed, false);
    double *v = ct_ptr(x);
    for (int64_t i = 0; is_int && i < tensor_numel(x); i++) v[i] = floor(v[i]);
    Tensor *y = tensor_cast(x, dt);
    tensor_free(x);
    return y; /* scope-owned */
}

static const int64_t shape2[2] = {70, 3}; /* transposed to (3, 70) */

static const CtUnaryParams unary_cases[] = {
    {CT_UN_NEG, 0, 0},           {CT_UN_EXP, 0, 0},          {CT_UN_LOG, 0, 0},
    {CT_UN_SQRT, 0, 0},          {CT_UN_ABS, 0, 0},          {CT_UN_CLAMP, -1.25, 1.5},
    {CT_UN_RELU, 0, 0},          {CT_UN_LEAKY_RELU, 0.1, 0}, {CT_UN_GELU_ERF, 0, 0},
    {CT_UN_GELU_TANH, 0, 0},     {CT_UN_SILU, 0, 0},         {CT_UN_SIGMOID, 0, 0},
    {CT_UN_TANH, 0, 0},          {CT_UN_ADD_SCALAR, 0.7, 0}, {CT_UN_MUL_SCALAR, -1.3, 0},
    {CT_UN_RSUB_SCALAR, 2.5, 0}, {CT_UN_POW_SCALAR, 2, 0},   {CT_UN_POW_SCALAR, -1, 0},
    {CT_UN_POW_SCALAR, 0, 0},    {CT_UN_POW_SCALAR, 3, 0},   {CT_UN_RDIV_SCALAR, 1.7, 0},
    {CT_UN_DIV_SCALAR, 0.3, 0},
};
#define NUNARY ((int)(sizeof unary_cases / sizeof *unary_cases))

START_TEST(test_unary_every_kind)
{
    const CtDType dts[] = {CT_F32, CT_F64, CT_BF16, CT_F16, CT_I64, CT_I32};
    CtScope *s = ct_scope_open();
    for (int di = 0; di < 6; di++) {
        CtDType dt = dts[di];
        double atol, rtol;
        tolerance(dt, &atol, &rtol);
        Tensor *x = tensor_transpose(rand_cpu(dt, 2, shape2, 3 + di), 0, 1);
        Tensor *gy = rand_cpu(dt, 2, (const int64_t[]){3, 70}, 5 + di);
        for (int k = 0; k < NUNARY; k++) {
            const CtUnaryParams *p = &unary_cases[k];
            bool is_int = !ct_dtype_is_float(dt);
            if (is_int && !ct_unary_kind_has_int(p->kind)) continue;
            for (int bwd = 0; bwd < (is_int ? 1 : 2); bwd++) {
                CtOpCall call = {
                    .op = bwd ? CT_OP_UNARY_BWD : CT_OP_UNARY,
                    .out = {tensor_empty(2, (const int64_t[]){3, 70}, dt, ct_cpu())},
                    .in = {x, gy},
                    .params = p};
                Tensor *g;
                run_both(&call, 1, bwd ? 2 : 1, &g);
                char what[64];
                snprintf(what, sizeof what, "%s %s kind %d a %g", ct_dtype_name(dt),
                         bwd ? "backward" : "forward", (int)p->kind, p->a);
                assert_near(call.out[0], g, atol, rtol, what);
            }
        }
    }
    ct_scope_close(s);
}
END_TEST

START_TEST(test_where_every_dtype)
{
    const CtDType dts[] = {CT_F32, CT_F64, CT_BF16, CT_F16,
                           CT_I64, CT_I32, CT_U8,   CT_BOOL};
    CtScope *s = ct_scope_open();
    Tensor *cond = tensor_cast(rand_cpu(CT_I64, 2, (const int64_t[]){1, 70}, 7), CT_BOOL);
    for (int di = 0; di < 8; di++) {
        CtDType dt = dts[di];
        Tensor *a = tensor_transpose(rand_cpu(dt, 2, shape2, 9), 0, 1);
        Tensor *b = rand_cpu(dt, 2, (const int64_t[]){3, 70}, 11);
        CtOpCall call = {.op = CT_OP_WHERE,
                         .out = {tensor_empty(2, (const int64_t[]){3, 70}, dt, ct_cpu())},
                         .in = {tensor_expand(cond, 2, (const int64_t[]){3, 70}), a, b}};
        Tensor *g;
        run_both(&call, 1, 3, &g);
        assert_near(call.out[0], g, 0, 0, ct_dtype_name(dt));
    }
    ct_scope_close(s);
}
END_TEST

/* Every kind over each subset of the dims of a (4, 5, 6) input seen
 * transposed; the max/min indices then drive ARG_REDUCE. */
START_TEST(test_reduce_every_dims)
{
    const CtReduceParams kinds[] = {{CT_RED_SUM, 1.0},
                                    {CT_RED_SUM, 0.1},
                                    {CT_RED_MAX, 1},
                                    {CT_RED_MIN, 1},
                                    {CT_RED_VAR, 0.5}};
    CtScope *s = ct_scope_open();
    for (int dt = CT_F32; dt <= CT_F64; dt++) {
        double atol, rtol;
        tolerance((CtDType)dt, &atol, &rtol);
        Tensor *x =
            tensor_transpose(rand_cpu((CtDType)dt, 3, (const int64_t[]){6, 5, 4}, 13), 0,
                             2); /* (4, 5, 6) */
        for (int mask = 0; mask < 8; mask++) {
            int64_t ys[3] = {4, 5, 6};
            for (int d = 0; d < 3; d++)
                if (mask >> d & 1) ys[d] = 1;
            for (int k = 0; k < 5; k++) {
                bool ext = kinds[k].kind == CT_RED_MAX || kinds[k].kind == CT_RED_MIN;
                CtOpCall call = {
                    .op = CT_OP_REDUCE,
                    .out = {tensor_empty(3, ys, (CtDType)dt, ct_cpu()),
                            ext ? tensor_empty(3, ys, CT_I64, ct_cpu()) : NULL},
                    .in = {x},
                    .params = &kinds[k]};
                Tensor *g[2];
                run_both(&call, ext ? 2 : 1, 1, g);
                char what[64];
                snprintf(what, sizeof what, "%s kind %d mask %d",
                         ct_dtype_name((CtDType)dt), (int)kinds[k].kind, mask);
                assert_near(call.out[0], g[0], ext ? 0 : atol, ext ? 0 : rtol, what);
                if (!ext) continue;
                assert_near(call.out[1], g[1], 0, 0, what);
                CtOpCall sc = {.op = CT_OP_ARG_REDUCE,
                               .out = {tensor_empty(3, (const int64_t[]){4, 5, 6},
                                                    (CtDType)dt, ct_cpu())},
                               .in = {rand_cpu((CtDType)dt, 3, ys, 17), call.out[1]}};
                Tensor *gs;
                run_both(&sc, 1, 2, &gs);
                assert_near(sc.out[0], gs, 0, 0, what);
            }
        }
    }
    ct_scope_close(s);
}
END_TEST

/* A sum over 2^20 elements into one output (one thread's slice). */
START_TEST(test_reduce_long_slice)
{
    CtScope *s = ct_scope_open();
    int64_t n = 1 << 20, one = 1;
    CtReduceParams p = {CT_RED_SUM, 1.0 / (double)n};
    CtOpCall call = {.op = CT_OP_REDUCE,
                     .out = {tensor_empty(1, &one, CT_F32, ct_cpu())},
                     .in = {rand_cpu(CT_F32, 1, &n, 19)},
                     .params = &p};
    Tensor *g;
    run_both(&call, 1, 1, &g);
    /* the CPU sums in f32 lanes: allow its rounding over 2^20 terms */
    assert_near(call.out[0], g, 1e-5, 1e-4, "mean of 2^20");
    ct_scope_close(s);
}
END_TEST

START_TEST(test_unscale_flags_non_finite)
{
    CtScope *s = ct_scope_open();
    int64_t n = 10001, one = 1;
    for (int bad = 0; bad < 2; bad++) {
        Tensor *grads = rand_cpu(CT_F32, 1, &n, 23);
        if (bad) ((float *)ct_ptr(grads))[n - 1] = INFINITY;
        CtUnscaleParams p = {1.0 / 1024};
        CtOpCall call = {.op = CT_OP_UNSCALE,
                         .out = {grads, tensor_zeros(1, &one, CT_F32, ct_cpu())},
                         .params = &p};
        Tensor *g[2];
        run_both(&call, 2, 0, g);
        assert_near(call.out[0], g[0], 0, 0, "unscaled");
        assert_near(call.out[1], g[1], 0, 0, "flag");
        double flag;
        ck_assert_int_eq(tensor_copy_to_host(g[1], &flag, CT_F64), CT_OK);
        ck_assert(flag == (bad ? 1.0 : 0.0));
    }
    ct_scope_close(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_elem");
    TCase *tc = tcase_create("cuda_elem");
    tcase_set_timeout(tc, 300);
    const TTest *device_tests[] = {test_unary_every_kind, test_where_every_dtype,
                                   test_reduce_every_dims, test_reduce_long_slice,
                                   test_unscale_flags_non_finite};
    int n = (int)(sizeof device_tests / sizeof *device_tests);
    if (ct_cuda_device_count() > 0) {
        /* CUDA does not work in a fork()ed child once initialised */
        setenv("CK_FORK", "no", 1);
        for (int i = 0; i < n; i++) tcase_add_test(tc, device_tests[i]);
    } else {
        fprintf(stderr, "\n*** SKIPPED %d CUDA tests: no CUDA device ***\n\n", n);
    }
    suite_add_tcase(s, tc);
    return tu_run(s);
}
