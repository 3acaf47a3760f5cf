/* bf16 autocast: which ops run in which precision, values against f32 within
 * the documented tolerance, gradients, every GEMM engine the CPU runs (AMX,
 * avx512_bf16, portable) against a reference, bad input. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "tensor/cpu/gemm_bf16.h"
#include "testutil.h"

/* ------------------------------------------------------------ helpers */

/* f32 CPU tensor of full-precision pseudo-random values in [-1, 1) (most are
 * not bf16 values, so rounding shows); owned by the open scope. */
static Tensor *rand_f32(int ndim, const int64_t *shape, unsigned seed, bool grad)
{
    Tensor *r = tu_rand64(ndim, shape, -1, 1, seed, false);
    Tensor *t = tensor_cast(r, CT_F32);
    tensor_free(r);
    if (grad) ck_assert_int_eq(tensor_set_requires_grad(t, true), CT_OK);
    return t;
}

/* t with its values rounded to bf16, still f32. */
static Tensor *rounded(Tensor *t)
{
    return tensor_cast(tensor_cast(t, CT_BF16), CT_F32);
}

static double *host(const Tensor *t)
{
    double *v = malloc((size_t)tensor_numel(t) * sizeof *v + 8);
    ck_assert_int_eq(tensor_copy_to_host(t, v, CT_F64), CT_OK);
    return v;
}

static Tensor *in_bf16(Tensor *(*fn)(Tensor **in), Tensor **in)
{
    CtDType prev;
    ck_assert_int_eq(tensor_autocast_begin(CT_BF16, &prev), CT_OK);
    Tensor *y = fn(in);
    tensor_autocast_end(prev);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(tensor_dtype(y), CT_F32);
    return y;
}

/* The three autocast ops on in[0], in[1] (in[2]: bias or NULL). */
static Tensor *op_linear(Tensor **in)
{
    return tensor_linear(in[0], in[1], in[2]);
}

static Tensor *op_matmul(Tensor **in)
{
    return tensor_matmul(in[0], in[1]);
}

static const CtConv2dArgs CONV = {.stride = {2, 1}, .padding = {1, 1}};

static Tensor *op_conv(Tensor **in)
{
    return tensor_conv2d(in[0], in[1], in[2], &CONV);
}

typedef struct OpCase {
    const char *name;
    Tensor *(*fn)(Tensor **in);
    int nd[2];
    int64_t shape[2][4];
    int64_t bias; /* 0: none */
} OpCase;

static const OpCase CASES[] = {
    {"linear", op_linear, {2, 2}, {{7, 37}, {19, 37}}, 19},
    {"linear 3-d", op_linear, {3, 2}, {{2, 5, 64}, {33, 64}}, 0},
    {"matmul", op_matmul, {2, 2}, {{9, 70}, {70, 41}}, 0},
    {"matmul batched", op_matmul, {3, 3}, {{3, 6, 40}, {3, 40, 7}}, 0},
    {"conv2d", op_conv, {4, 4}, {{2, 3, 9, 8}, {5, 3, 3, 3}}, 5},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

/* The case's inputs (in[2] NULL without bias). */
static void case_inputs(const OpCase *c, Tensor **in, bool grad)
{
    in[0] = rand_f32(c->nd[0], c->shape[0], 11, grad);
    in[1] = rand_f32(c->nd[1], c->shape[1], 12, grad);
    in[2] = c->bias ? rand_f32(1, &c->bias, 13, grad) : NULL;
}

/* The case's inputs, and rin: the same with the operands (not the bias)
 * rounded to bf16 values. */
static void rounded_inputs(const OpCase *c, Tensor **in, Tensor **rin)
{
    case_inputs(c, in, false);
    rin[0] = rounded(in[0]);
    rin[1] = rounded(in[1]);
    rin[2] = in[2];
}

/* ------------------------------------------------------------- op list */

/* Inside a bf16 region the op equals the f32 op on bf16-rounded operands
 * (products of bf16 values are exact in f32; only the summation order may
 * differ), and it differs from the f32 op on the raw operands. */
static void check_rounds_operands(const OpCase *c)
{
    CtScope *s = ct_scope_open();
    Tensor *in[3], *rin[3];
    rounded_inputs(c, in, rin);
    Tensor *y = in_bf16(c->fn, in);
    Tensor *ref = c->fn(rin), *raw = c->fn(in);
    int64_t n = tensor_numel(y);
    double *vy = host(y), *vref = host(ref), *vraw = host(raw);
    double max_raw = 0;
    for (int64_t i = 0; i < n; i++) {
        ck_assert_msg(fabs(vy[i] - vref[i]) <= 1e-5 + 1e-5 * fabs(vref[i]),
                      "%s: element %lld: %g, rounded-operand f32 %g", c->name,
                      (long long)i, vy[i], vref[i]);
        max_raw = fmax(max_raw, fabs(vy[i] - vraw[i]));
    }
    ck_assert_msg(max_raw > 1e-4, "%s: autocast result equals the f32 one (%g)", c->name,
                  max_raw);
    free(vy);
    free(vref);
    free(vraw);
    ct_scope_close(s);
}

START_TEST(test_autocast_ops_round_operands)
{
    TU_MEM_BEGIN;
    for (int i = 0; i < N_CASES; i++) check_rounds_operands(&CASES[i]);
    TU_MEM_END;
}
END_TEST

/* The documented tolerance: |y_bf16 - y_f32| <= 2^-8 * sum_l |a_l * b_l|
 * (each operand is off by at most 2^-9 relative) + 1e-6. The bound is the
 * op on |operands| in f64, with no bias. */
START_TEST(test_autocast_tolerance_vs_f32)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    for (int i = 0; i < N_CASES; i++) {
        const OpCase *c = &CASES[i];
        Tensor *in[3], *absin[3];
        case_inputs(c, in, false);
        absin[0] = tensor_abs(tensor_cast(in[0], CT_F64));
        absin[1] = tensor_abs(tensor_cast(in[1], CT_F64));
        absin[2] = NULL;
        Tensor *y = in_bf16(c->fn, in), *f = c->fn(in), *bound = c->fn(absin);
        double *vy = host(y), *vf = host(f), *vb = host(bound);
        for (int64_t e = 0; e < tensor_numel(y); e++)
            ck_assert_msg(fabs(vy[e] - vf[e]) <= ldexp(vb[e], -8) + 1e-6,
                          "%s: element %lld: bf16 %g, f32 %g, bound %g", c->name,
                          (long long)e, vy[e], vf[e], ldexp(vb[e], -8));
        free(vy);
        free(vf);
        free(vb);
    }
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* Ops outside the autocast list run in their inputs' dtype: bitwise the same
 * inside and outside a region. */
START_TEST(test_autocast_f32_ops_unchanged)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *x = rand_f32(2, (const int64_t[]){6, 10}, 21, false);
    Tensor *target =
        tu_tensor(CT_I64, 1, (const int64_t[]){6}, (double[]){1, 0, 9, 3, 3, 7});
    Tensor *out[2][6];
    for (int r = 0; r < 2; r++) {
        CtDType prev;
        ck_assert_int_eq(tensor_autocast_begin(r ? CT_BF16 : CT_F32, &prev), CT_OK);
        out[r][0] = tensor_softmax(x, 1);
        out[r][1] = tensor_log_softmax(x, 1);
        out[r][2] = tensor_sum(x, 1, (const int[]){1}, false);
        out[r][3] = tensor_exp(x);
        out[r][4] = tensor_cross_entropy(x, target, NULL);
        out[r][5] = tensor_mean(tensor_mul(x, x), 0, NULL, false);
        tensor_autocast_end(prev);
    }
    for (int k = 0; k < 6; k++) {
        ck_assert_ptr_nonnull(out[1][k]);
        ck_assert_int_eq(tensor_dtype(out[1][k]), CT_F32);
        double *a = host(out[0][k]), *b = host(out[1][k]);
        for (int64_t e = 0; e < tensor_numel(out[0][k]); e++)
            ck_assert_msg(a[e] == b[e], "op %d element %lld: %g vs %g", k, (long long)e,
                          a[e], b[e]);
        free(a);
        free(b);
    }
    tensor_free(target);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* Asserts a and b hold the same values (any dtypes). */
static void assert_same_values(const Tensor *a, const Tensor *b, const char *what)
{
    ck_assert_int_eq(tensor_numel(a), tensor_numel(b));
    double *x = host(a), *y = host(b);
    for (int64_t e = 0; e < tensor_numel(a); e++)
        ck_assert_msg(x[e] == y[e], "%s element %lld: %g vs %g", what, (long long)e, x[e],
                      y[e]);
    free(x);
    free(y);
}

/* A bf16 tensor (what autocast's convolutions leave on CUDA) meeting f32
 * ops inside a region: binary ops promote it, softmax, the losses and
 * linear widen it; each gives what the op gives on the widened tensor, in
 * f32, and the gradient that reaches the bf16 tensor is bf16 (the five
 * paths' gradients summed in bf16). */
START_TEST(test_autocast_widens_low_inputs)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *xb = tensor_cast(rand_f32(2, (const int64_t[]){4, 6}, 41, false), CT_BF16);
    ck_assert_int_eq(tensor_set_requires_grad(xb, true), CT_OK);
    Tensor *xf = tensor_cast(xb, CT_F32); /* exact */
    Tensor *y = rand_f32(2, (const int64_t[]){4, 6}, 42, false);
    Tensor *w = rand_f32(2, (const int64_t[]){3, 6}, 43, false);
    Tensor *target = tu_tensor(CT_I64, 1, (const int64_t[]){4}, (double[]){1, 0, 5, 2});
    CtDType prev;
    ck_assert_int_eq(tensor_autocast_begin(CT_BF16, &prev), CT_OK);
    Tensor *got[5] = {tensor_add(xb, y), tensor_mul(y, xb), tensor_softmax(xb, 1),
                      tensor_cross_entropy(xb, target, NULL), tensor_linear(xb, w, NULL)};
    Tensor *want[5] = {tensor_add(xf, y), tensor_mul(y, xf), tensor_softmax(xf, 1),
                       tensor_cross_entropy(xf, target, NULL),
                       tensor_linear(xf, w, NULL)};
    tensor_autocast_end(prev);
    for (int k = 0; k < 5; k++) {
        ck_assert_msg(got[k], "op %d: %s", k, ct_last_error());
        ck_assert_int_eq(tensor_dtype(got[k]), CT_F32);
        assert_same_values(want[k], got[k], "widened op");
    }
    Tensor *total = tensor_sum_all(got[0]);
    for (int k = 1; k < 5; k++) total = tensor_add(total, tensor_sum_all(got[k]));
    ck_assert_msg(tensor_backward(total, NULL) == CT_OK, "%s", ct_last_error());
    ck_assert_int_eq(tensor_dtype(tensor_grad(xb)), CT_BF16);
    /* outside a region, mixed f32 and f64 still do not mix */
    ck_assert_ptr_null(tensor_add(y, tensor_cast(y, CT_F64)));
    tu_assert_error(CT_ERR_DTYPE, "add: dtypes differ");
    tensor_free(target);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* The same bf16 tensor meeting f32 operands of the ops autocast runs in
 * f32: cross-entropy with f32 class weights, MSE, L1 and BCE against f32
 * targets (BCE with an f32 pos_weight), layer norm with f32 affine
 * parameters. Each gives, in f32, what it gives on the widened tensor; the
 * gradient that reaches the bf16 tensor is bf16. Outside a region, a bf16
 * gather's gradient (an index accumulation) is bf16 too. */
START_TEST(test_autocast_widens_losses_and_layer_norm)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *xb = tensor_cast(rand_f32(2, (const int64_t[]){4, 6}, 44, false), CT_BF16);
    ck_assert_int_eq(tensor_set_requires_grad(xb, true), CT_OK);
    Tensor *xf = tensor_cast(xb, CT_F32); /* exact */
    Tensor *y = rand_f32(2, (const int64_t[]){4, 6}, 45, false);
    Tensor *y01 = tensor_mul_scalar(tensor_add_scalar(y, 1.0), 0.5); /* in [0, 1) */
    Tensor *w6 = tensor_add_scalar(rand_f32(1, (const int64_t[]){6}, 46, false), 2.0);
    Tensor *b6 = rand_f32(1, (const int64_t[]){6}, 47, false);
    Tensor *target = tu_tensor(CT_I64, 1, (const int64_t[]){4}, (double[]){1, 0, 5, 2});
    const CtCrossEntropyArgs ce = {.reduction = CT_REDUCTION_MEAN, .weight = w6};
    Tensor *in[2] = {xb, xf}, *out[2][5];
    CtDType prev;
    ck_assert_int_eq(tensor_autocast_begin(CT_BF16, &prev), CT_OK);
    for (int k = 0; k < 2; k++) {
        Tensor *x = in[k];
        out[k][0] = tensor_cross_entropy(x, target, &ce);
        out[k][1] = tensor_mse_loss(x, y, CT_REDUCTION_MEAN);
        out[k][2] = tensor_l1_loss(x, y, CT_REDUCTION_SUM);
        out[k][3] = tensor_bce_with_logits(x, y01, w6, CT_REDUCTION_MEAN);
        out[k][4] = tensor_layer_norm(x, 1, w6, b6, 1e-5);
    }
    tensor_autocast_end(prev);
    for (int i = 0; i < 5; i++) {
        ck_assert_msg(out[0][i], "op %d: %s", i, ct_last_error());
        ck_assert_int_eq(tensor_dtype(out[0][i]), CT_F32);
        assert_same_values(out[1][i], out[0][i], "widened op");
    }
    Tensor *total = tensor_sum_all(out[0][4]);
    for (int i = 0; i < 4; i++) total = tensor_add(total, out[0][i]);
    ck_assert_msg(tensor_backward(total, NULL) == CT_OK, "%s", ct_last_error());
    ck_assert_int_eq(tensor_dtype(tensor_grad(xb)), CT_BF16);
    tensor_set_grad(xb, NULL);
    Tensor *idx =
        tu_tensor(CT_I64, 2, (const int64_t[]){4, 2}, (double[]){0, 5, 1, 1, 2, 0, 3, 3});
    Tensor *g = tensor_gather(xb, 1, idx);
    ck_assert_msg(g && tensor_backward(tensor_sum_all(g), NULL) == CT_OK, "%s",
                  ct_last_error());
    ck_assert_int_eq(tensor_dtype(tensor_grad(xb)), CT_BF16);
    double v[24];
    ck_assert_int_eq(tensor_copy_to_host(tensor_grad(xb), v, CT_F64), CT_OK);
    ck_assert(v[5] == 1 && v[6 + 1] == 2 && v[0] == 1 && v[1] == 0);
    tensor_free(target);
    tensor_free(idx);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* cat, stack and where given f32 beside bf16 join in f32, as binary ops
 * promote (a CUDA convolution's bf16 output beside an f32 tensor); the
 * gradient that reaches the bf16 tensor is bf16. */
START_TEST(test_joins_promote_low_inputs)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *xb = tensor_cast(rand_f32(2, (const int64_t[]){2, 3}, 48, false), CT_BF16);
    ck_assert_int_eq(tensor_set_requires_grad(xb, true), CT_OK);
    Tensor *xf = tensor_cast(xb, CT_F32); /* exact */
    Tensor *y = rand_f32(2, (const int64_t[]){2, 3}, 49, false);
    Tensor *cond =
        tu_tensor(CT_BOOL, 2, (const int64_t[]){2, 3}, (double[]){1, 0, 0, 1, 1, 0});
    Tensor *got[3] = {tensor_cat(2, (Tensor *[]){xb, y}, 1),
                      tensor_stack(2, (Tensor *[]){y, xb}, 0), tensor_where(cond, xb, y)};
    Tensor *want[3] = {tensor_cat(2, (Tensor *[]){xf, y}, 1),
                       tensor_stack(2, (Tensor *[]){y, xf}, 0),
                       tensor_where(cond, xf, y)};
    Tensor *total = NULL;
    for (int k = 0; k < 3; k++) {
        ck_assert_msg(got[k], "op %d: %s", k, ct_last_error());
        ck_assert_int_eq(tensor_dtype(got[k]), CT_F32);
        assert_same_values(want[k], got[k], "promoted join");
        total =
            total ? tensor_add(total, tensor_sum_all(got[k])) : tensor_sum_all(got[k]);
    }
    ck_assert_msg(tensor_backward(total, NULL) == CT_OK, "%s", ct_last_error());
    ck_assert_int_eq(tensor_dtype(tensor_grad(xb)), CT_BF16);
    double g[6];
    ck_assert_int_eq(tensor_copy_to_host(tensor_grad(xb), g, CT_F64), CT_OK);
    ck_assert(g[0] == 3 && g[1] == 2);
    tensor_free(cond);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------ gradients */

/* Gradients through an autocast op (backward outside the region) are f32
 * and within 2^-6 of the largest f32 gradient of the f32 run; they are not
 * the f32 gradients (the backward GEMMs run in bf16 too). */
START_TEST(test_autocast_gradients)
{
    TU_MEM_BEGIN;
    for (int i = 0; i < N_CASES; i++) {
        const OpCase *c = &CASES[i];
        CtScope *s = ct_scope_open();
        Tensor *in[3];
        case_inputs(c, in, true);
        double *g[2][3] = {{0}};
        for (int r = 0; r < 2; r++) {
            for (int k = 0; k < 3; k++)
                if (in[k]) tensor_set_grad(in[k], NULL);
            CtDType prev;
            ck_assert_int_eq(tensor_autocast_begin(r ? CT_BF16 : CT_F32, &prev), CT_OK);
            Tensor *y = c->fn(in);
            tensor_autocast_end(prev);
            Tensor *loss = tensor_sum(tensor_mul(y, y), 0, NULL, false);
            ck_assert_int_eq(tensor_backward(loss, NULL), CT_OK);
            for (int k = 0; k < 3; k++)
                if (in[k]) {
                    ck_assert_int_eq(tensor_dtype(tensor_grad(in[k])), CT_F32);
                    g[r][k] = host(tensor_grad(in[k]));
                }
        }
        for (int k = 0; k < 3; k++) {
            if (!in[k]) continue;
            int64_t n = tensor_numel(in[k]);
            double gmax = 0, dmax = 0;
            for (int64_t e = 0; e < n; e++) gmax = fmax(gmax, fabs(g[0][k][e]));
            for (int64_t e = 0; e < n; e++)
                dmax = fmax(dmax, fabs(g[0][k][e] - g[1][k][e]));
            ck_assert_msg(dmax <= ldexp(gmax, -6),
                          "%s input %d: max diff %g, max grad %g", c->name, k, dmax,
                          gmax);
            if (k < 2) ck_assert_msg(dmax > 0, "%s input %d: f32 gradients", c->name, k);
            free(g[0][k]);
            free(g[1][k]);
        }
        ct_scope_close(s);
    }
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------ engines (CPU) */

/* The portable engine (forced) equals the f32 op on rounded operands
 * bit for bit: it is that computation. */
START_TEST(test_autocast_baseline_is_rounded_f32)
{
    TU_MEM_BEGIN;
    setenv("CTRAINER_CPU_ISA", "baseline", 1);
    ck_assert(ct_cpu_bf16_engine() == CT_BF16_PORTABLE);
    for (int i = 0; i < N_CASES; i++) {
        const OpCase *c = &CASES[i];
        CtScope *s = ct_scope_open();
        Tensor *in[3], *rin[3];
        rounded_inputs(c, in, rin);
        Tensor *y = in_bf16(c->fn, in), *ref = c->fn(rin);
        double *a = host(y), *b = host(ref);
        for (int64_t e = 0; e < tensor_numel(y); e++)
            ck_assert_msg(a[e] == b[e], "%s element %lld: %g vs %g", c->name,
                          (long long)e, a[e], b[e]);
        free(a);
        free(b);
        ct_scope_close(s);
    }
    unsetenv("CTRAINER_CPU_ISA");
    TU_MEM_END;
}
END_TEST

static float round_bf16(float x)
{
    return ct_bf16_to_f32(ct_f32_to_bf16(x));
}

/* The engine running now against a double-precision reference on rounded
 * operands, for every transpose, odd sizes, edges of the avx512_bf16 8 x 32
 * tile and of the AMX 32 x 32 block, k past one k block and not a whole
 * number of AMX tile steps, column and row panel items, alpha and beta. */
static void check_engine(const char *engine)
{
    static const int SHAPES[][3] = {{1, 1, 1},    {8, 32, 2},   {9, 33, 3},
                                    {17, 5, 600}, {3, 70, 513}, {40, 31, 64},
                                    {64, 96, 9},  {70, 160, 40}};
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++)
        for (int tr = 0; tr < 4; tr++) {
            int m = SHAPES[s][0], n = SHAPES[s][1], k = SHAPES[s][2];
            bool ta = tr & 1, tb = tr >> 1;
            float *a = malloc(sizeof *a * (size_t)(m * k)),
                  *b = malloc(sizeof *b * (size_t)(k * n));
            float *c = malloc(sizeof *c * (size_t)(m * n)),
                  *c0 = malloc(sizeof *c0 * (size_t)(m * n));
            for (int i = 0; i < m * k; i++) a[i] = sinf(0.37f * (float)i + 0.1f);
            for (int i = 0; i < k * n; i++) b[i] = cosf(0.23f * (float)i);
            for (int i = 0; i < m * n; i++) c[i] = c0[i] = 0.5f - 0.01f * (float)(i % 97);
            float beta = tr == 1 ? 0.0f : 0.75f;
            CtGemmBf16 g = {.trans_a = ta,
                            .trans_b = tb,
                            .m = m,
                            .n = n,
                            .k = k,
                            .alpha = 1.5f,
                            .beta = beta,
                            .a = a,
                            .lda = ta ? m : k,
                            .b = b,
                            .ldb = tb ? k : n,
                            .c = c,
                            .ldc = n};
            ct_cpu_gemm_bf16(&g, s % 2 ? 2 : 1);
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    double acc = 0, mag = 0;
                    for (int l = 0; l < k; l++) {
                        double p = (double)round_bf16(ta ? a[l * m + i] : a[i * k + l]) *
                                   (double)round_bf16(tb ? b[j * k + l] : b[l * n + j]);
                        acc += p;
                        mag += fabs(p);
                    }
                    double want = 1.5 * acc + (beta != 0 ? beta * c0[i * n + j] : 0.0);
                    ck_assert_msg(fabs(c[i * n + j] - want) <= 1e-6 * (mag + 1),
                                  "%s %dx%dx%d ta %d tb %d (%d, %d): %g, want %g", engine,
                                  m, n, k, ta, tb, i, j, c[i * n + j], want);
                }
            free(a);
            free(b);
            free(c);
            free(c0);
        }
}

START_TEST(test_gemm_engines)
{
    /* the CPU's best engine, then with AMX ruled out, then the portable one */
    static const char *const ISA[] = {NULL, "avx512", "baseline"};
    static const char *const NAME[] = {"portable", "avx512_bf16", "amx"};
    bool tested[3] = {false};
    for (int i = 0; i < 3; i++) {
        if (ISA[i]) setenv("CTRAINER_CPU_ISA", ISA[i], 1);
        CtBf16Engine e = ct_cpu_bf16_engine();
        if (!tested[e]) check_engine(NAME[e]);
        tested[e] = true;
        unsetenv("CTRAINER_CPU_ISA");
    }
    for (int e = 0; e < 3; e++)
        if (!tested[e])
            fprintf(stderr,
                    "test_gemm_engines: the %s engine does not run on this CPU, "
                    "not tested\n",
                    NAME[e]);
    ck_assert(tested[CT_BF16_PORTABLE]);
}
END_TEST

/* --------------------------------------------------------- threads */

/* Shapes big enough for the engine pool: a GEMM split into column blocks,
 * one into row panels (few columns), a batch of small GEMMs one per item,
 * and conv2d over samples (batch >= threads) and inside one sample. */
static const OpCase THREAD_CASES[] = {
    {"linear, column blocks", op_linear, {2, 2}, {{256, 300}, {200, 300}}, 200},
    {"matmul, row panels", op_matmul, {2, 2}, {{512, 400}, {400, 40}}, 0},
    {"matmul, batch of small", op_matmul, {3, 3}, {{128, 16, 64}, {128, 64, 16}}, 0},
    {"conv2d, samples", op_conv, {4, 4}, {{8, 16, 32, 32}, {32, 16, 3, 3}}, 32},
    {"conv2d, one sample", op_conv, {4, 4}, {{1, 16, 64, 64}, {32, 16, 3, 3}}, 32},
    /* 48 output columns: a 32 + 16 split, below the engine's width alone */
    {"conv2d, one sample, narrow",
     op_conv,
     {4, 4},
     {{1, 128, 12, 8}, {256, 128, 3, 3}},
     256},
};

/* The output and every input gradient of c, in bf16 or in f32, on nt
 * threads, as f32 bits: out[0] the output, out[1 + k] input k's gradient. */
static void thread_run(const OpCase *c, bool bf16, int nt, float *out[4], int64_t n[4])
{
    omp_set_num_threads(nt);
    CtScope *s = ct_scope_open();
    Tensor *in[3];
    case_inputs(c, in, true);
    Tensor *y = bf16 ? in_bf16(c->fn, in) : c->fn(in);
    Tensor *loss = tensor_sum(tensor_mul(y, y), 0, NULL, false);
    ck_assert_int_eq(tensor_backward(loss, NULL), CT_OK);
    Tensor *t[4] = {y, tensor_grad(in[0]), tensor_grad(in[1]),
                    in[2] ? tensor_grad(in[2]) : NULL};
    for (int k = 0; k < 4; k++) {
        n[k] = t[k] ? tensor_numel(t[k]) : 0;
        out[k] = malloc((size_t)n[k] * sizeof(float) + 4);
        if (t[k]) ck_assert_int_eq(tensor_copy_to_host(t[k], out[k], CT_F32), CT_OK);
    }
    ct_scope_close(s);
}

/* bf16 and f32 results (forward and backward) are bitwise the same on 1 and
 * 2 threads: the work is split by the shape alone, and the GEMM engines
 * are chosen on the whole product, not on a thread's block of it. */
START_TEST(test_autocast_same_bits_over_threads)
{
    int saved = omp_get_max_threads();
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (size_t i = 0; i < sizeof THREAD_CASES / sizeof THREAD_CASES[0]; i++) {
            const OpCase *c = &THREAD_CASES[i];
            float *a[4], *b[4];
            int64_t na[4], nb[4];
            thread_run(c, bf16, 1, a, na);
            thread_run(c, bf16, 2, b, nb);
            for (int k = 0; k < 4; k++) {
                ck_assert_int_eq(na[k], nb[k]);
                ck_assert_msg(memcmp(a[k], b[k], (size_t)na[k] * sizeof(float)) == 0,
                              "%s, %s: %s differs between 1 and 2 threads", c->name,
                              bf16 ? "bf16" : "f32", k ? "a gradient" : "the output");
                free(a[k]);
                free(b[k]);
            }
        }
    omp_set_num_threads(saved);
}
END_TEST

/* ----------------------------------------------------------- bad input */

START_TEST(test_autocast_state_and_errors)
{
    TU_MEM_BEGIN;
    ck_assert_int_eq(tensor_autocast_dtype(), CT_F32);
    CtDType outer, inner;
    ck_assert_int_eq(tensor_autocast_begin(CT_BF16, &outer), CT_OK);
    ck_assert_int_eq(tensor_autocast_begin(CT_F32, &inner), CT_OK);
    ck_assert_int_eq(tensor_autocast_dtype(), CT_F32);
    tu_assert_error(tensor_autocast_begin(CT_I32, NULL),
                    "tensor_autocast_begin: dtype i32 is not one of bf16, f16, f32");
    ck_assert_int_eq(tensor_autocast_dtype(), CT_F32);
    tensor_autocast_end(inner);
    ck_assert_int_eq(tensor_autocast_dtype(), CT_BF16);
    tensor_autocast_end(outer);
    ck_assert_int_eq(tensor_autocast_dtype(), CT_F32);

    /* f16 autocast is CUDA only: a CPU op says so, and suggests bf16 */
    CtScope *s = ct_scope_open();
    Tensor *x = rand_f32(2, (const int64_t[]){2, 3}, 1, false);
    Tensor *w = rand_f32(2, (const int64_t[]){4, 3}, 2, false);
    ck_assert_int_eq(tensor_autocast_begin(CT_F16, &outer), CT_OK);
    ck_assert_ptr_null(tensor_linear(x, w, NULL));
    tu_assert_error(CT_ERR_UNSUPPORTED, "linear: f16 autocast needs a CUDA device");
    ck_assert_ptr_null(tensor_matmul(x, tensor_transpose(w, 0, 1)));
    tu_assert_error(CT_ERR_UNSUPPORTED, "use bf16 on the CPU");
    tensor_autocast_end(outer);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("autocast");
    TCase *tc = tcase_create("autocast");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_autocast_ops_round_operands);
    tcase_add_test(tc, test_autocast_tolerance_vs_f32);
    tcase_add_test(tc, test_autocast_f32_ops_unchanged);
    tcase_add_test(tc, test_autocast_widens_low_inputs);
    tcase_add_test(tc, test_autocast_widens_losses_and_layer_norm);
    tcase_add_test(tc, test_joins_promote_low_inputs);
    tcase_add_test(tc, test_autocast_gradients);
    tcase_add_test(tc, test_autocast_baseline_is_rounded_f32);
    tcase_add_test(tc, test_gemm_engines);
    tcase_add_test(tc, test_autocast_same_bits_over_threads);
    tcase_add_test(tc, test_autocast_state_and_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
