/* Elementwise ops: unary, scalar forms, binary (grads), comparisons, where,
 * masked_fill. Reference values from tests/fixtures/elementwise.py (PyTorch). */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"

#define SHAPE(...)                                                                       \
    (const int64_t[])                                                                    \
    {                                                                                    \
        __VA_ARGS__                                                                      \
    }

/* ------------------------------------------------------------ unary ops */

typedef Tensor *(*UnFn)(Tensor *);

static Tensor *f_neg(Tensor *t)
{
    return tensor_neg(t);
}
static Tensor *f_exp(Tensor *t)
{
    return tensor_exp(t);
}
static Tensor *f_log(Tensor *t)
{
    return tensor_log(t);
}
static Tensor *f_sqrt(Tensor *t)
{
    return tensor_sqrt(t);
}
static Tensor *f_abs(Tensor *t)
{
    return tensor_abs(t);
}
static Tensor *f_clamp(Tensor *t)
{
    return tensor_clamp(t, -0.5, 0.5);
}
static Tensor *f_clamp_lo(Tensor *t)
{
    return tensor_clamp(t, -0.5, INFINITY);
}
static Tensor *f_relu(Tensor *t)
{
    return tensor_relu(t);
}
static Tensor *f_leaky(Tensor *t)
{
    return tensor_leaky_relu(t, 0.1);
}
static Tensor *f_gelu(Tensor *t)
{
    return tensor_gelu(t, CT_GELU_ERF);
}
static Tensor *f_gelu_tanh(Tensor *t)
{
    return tensor_gelu(t, CT_GELU_TANH);
}
static Tensor *f_silu(Tensor *t)
{
    return tensor_silu(t);
}
static Tensor *f_sigmoid(Tensor *t)
{
    return tensor_sigmoid(t);
}
static Tensor *f_tanh(Tensor *t)
{
    return tensor_tanh(t);
}
static Tensor *f_add_s(Tensor *t)
{
    return tensor_add_scalar(t, 1.5);
}
static Tensor *f_sub_s(Tensor *t)
{
    return tensor_sub_scalar(t, 1.5);
}
static Tensor *f_rsub_s(Tensor *t)
{
    return tensor_rsub_scalar(t, 1.5);
}
static Tensor *f_mul_s(Tensor *t)
{
    return tensor_mul_scalar(t, -3);
}
static Tensor *f_div_s(Tensor *t)
{
    return tensor_div_scalar(t, 3);
}
static Tensor *f_pow_15(Tensor *t)
{
    return tensor_pow_scalar(t, 1.5);
}
static Tensor *f_pow_2(Tensor *t)
{
    return tensor_pow_scalar(t, 2);
}
static Tensor *f_pow_3(Tensor *t)
{
    return tensor_pow_scalar(t, 3);
}
static Tensor *f_pow_m1(Tensor *t)
{
    return tensor_pow_scalar(t, -1);
}

typedef struct UnCase {
    const char *name;
    UnFn fn;
    bool positive; /* domain x > 0: input POS, else X */
    double expect[5];
} UnCase;

static const double X[5] = {-2.0, -0.5, 0.0, 0.5, 3.0};
static const double POS[4] = {0.25, 1.0, 2.0, 9.0};

/* PyTorch's values on X (or POS), from tests/fixtures/elementwise.py */
static const UnCase CASES[] = {
    {"neg", f_neg, false, {2.0, 0.5, -0.0, -0.5, -3.0}},
    {"abs", f_abs, false, {2.0, 0.5, 0.0, 0.5, 3.0}},
    {"exp",
     f_exp,
     false,
     {0.1353352832366127, 0.6065306597126334, 1.0, 1.6487212707001282,
      20.085536923187668}},
    {"log",
     f_log,
     true,
     {-1.3862943611198906, 0.0, 0.6931471805599453, 2.1972245773362196}},
    {"sqrt", f_sqrt, true, {0.5, 1.0, 1.4142135623730951, 3.0}},
    {"clamp", f_clamp, false, {-0.5, -0.5, 0.0, 0.5, 0.5}},
    {"clamp_lo", f_clamp_lo, false, {-0.5, -0.5, 0.0, 0.5, 3.0}},
    {"relu", f_relu, false, {0.0, 0.0, 0.0, 0.5, 3.0}},
    {"leaky_relu", f_leaky, false, {-0.2, -0.05, 0.0, 0.5, 3.0}},
    {"gelu",
     f_gelu,
     false,
     {-0.04550026389635842, -0.15426876936299344, 0.0, 0.34573123063700656,
      2.99595030590511}},
    {"gelu_tanh",
     f_gelu_tanh,
     false,
     {-0.04540230591222494, -0.15428599017485606, 0.0, 0.34571400982514394,
      2.996362607918227}},
    {"silu",
     f_silu,
     false,
     {-0.2384058440442351, -0.1887703343990727, 0.0, 0.3112296656009273,
      2.8577223804672998}},
    {"sigmoid",
     f_sigmoid,
     false,
     {0.11920292202211755, 0.3775406687981454, 0.5, 0.6224593312018546,
      0.9525741268224334}},
    {"tanh",
     f_tanh,
     false,
     {-0.9640275800758169, -0.46211715726000974, 0.0, 0.46211715726000974,
      0.9950547536867305}},
    {"add_scalar", f_add_s, false, {-0.5, 1.0, 1.5, 2.0, 4.5}},
    {"sub_scalar", f_sub_s, false, {-3.5, -2.0, -1.5, -1.0, 1.5}},
    {"rsub_scalar", f_rsub_s, false, {3.5, 2.0, 1.5, 1.0, -1.5}},
    {"mul_scalar", f_mul_s, false, {6.0, 1.5, -0.0, -1.5, -9.0}},
    {"div_scalar",
     f_div_s,
     false,
     {-0.6666666666666666, -0.16666666666666666, 0.0, 0.16666666666666666, 1.0}},
    {"pow_scalar_1.5", f_pow_15, true, {0.125, 1.0, 2.8284271247461903, 27.0}},
    {"pow_scalar_2", f_pow_2, false, {4.0, 0.25, 0.0, 0.25, 9.0}},
    {"pow_scalar_3", f_pow_3, false, {-8.0, -0.125, 0.0, 0.125, 27.0}},
    {"pow_scalar_-1", f_pow_m1, true, {4.0, 1.0, 0.5, 1.0 / 9.0}},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

START_TEST(test_unary_forward_values)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    /* bf16 and f16 compute in f32 and round once: half an ulp */
    const CtDType dts[4] = {CT_F64, CT_F32, CT_BF16, CT_F16};
    const double rtols[4] = {1e-15, 2e-6, 4e-3, 5e-4};
    for (int d = 0; d < 4; d++) {
        Tensor *x = tu_tensor(dts[d], 1, SHAPE(5), X);
        Tensor *pos = tu_tensor(dts[d], 1, SHAPE(4), POS);
        double rtol = rtols[d];
        for (int i = 0; i < N_CASES; i++) {
            const UnCase *c = &CASES[i];
            Tensor *y = c->fn(c->positive ? pos : x);
            ck_assert_msg(y != NULL, "%s: %s", c->name, ct_last_error());
            ck_assert_int_eq(tensor_dtype(y), dts[d]);
            tu_assert_values(y, c->expect, c->positive ? 4 : 5, 1e-300, rtol);
        }
        /* lo > hi gives hi everywhere (PyTorch's min(max(x, lo), hi)); NaN stays */
        tu_assert_values(tensor_clamp(x, 1, -1), ((double[]){-1, -1, -1, -1, -1}), 5, 0,
                         0);
        Tensor *nan = tensor_full(1, SHAPE(1), NAN, dts[d], ct_cpu());
        tu_assert_values(tensor_clamp(nan, -1, 1), ((double[]){NAN}), 1, 0, 0);
        tu_assert_values(tensor_relu(nan), ((double[]){NAN}), 1, 0, 0);
        tensor_free(x);
        tensor_free(pos);
    }
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* Strided inputs give the same values as their contiguous copies. */
START_TEST(test_unary_noncontiguous_forward)
{
    CtScope *s = ct_scope_open();
    Tensor *x = tu_rand64(2, SHAPE(5, 7), 0.1, 2, 11, false);
    Tensor *xt = tensor_transpose(x, 0, 1);   /* (7, 5), strided */
    Tensor *xs = tensor_slice(x, 1, 1, 7, 2); /* (5, 3), strided */
    for (int i = 0; i < N_CASES; i++) {
        const UnCase *c = &CASES[i];
        Tensor *views[2] = {xt, xs};
        for (int v = 0; v < 2; v++) {
            Tensor *y = c->fn(views[v]);
            Tensor *ref = c->fn(tensor_contiguous(views[v]));
            ck_assert_msg(y && ref, "%s: %s", c->name, ct_last_error());
            ck_assert(tensor_is_contiguous(y));
            int64_t n = tensor_numel(ref);
            double *r = malloc((size_t)n * sizeof *r);
            tensor_copy_to_host(ref, r, CT_F64);
            tu_assert_values(y, r, n, 0, 0);
            free(r);
        }
    }
    tensor_free(x);
    ct_scope_close(s);
}
END_TEST

/* Larger than CT_CPU_PAR_MIN and CT_ITER_CHUNK: parallel, chunked rows. */
START_TEST(test_unary_large)
{
    CtScope *s = ct_scope_open();
    int64_t n = 100003;
    Tensor *x = tensor_arange(-50000, 50003, 1, CT_F32, ct_cpu());
    Tensor *y = tensor_relu(tensor_mul_scalar(x, 0.5));
    Tensor *g = tensor_sigmoid(tensor_div_scalar(x, 10000));
    float *vy = malloc((size_t)n * sizeof *vy), *vg = malloc((size_t)n * sizeof *vg);
    ck_assert_int_eq(tensor_copy_to_host(y, vy, CT_F32), CT_OK);
    ck_assert_int_eq(tensor_copy_to_host(g, vg, CT_F32), CT_OK);
    for (int64_t i = 0; i < n; i++) {
        double v = (double)(i - 50000);
        ck_assert(vy[i] == (float)(v > 0 ? v * 0.5 : 0));
        ck_assert(fabs(vg[i] - 1 / (1 + exp(-v / 10000))) < 1e-6);
    }
    free(vy);
    free(vg);
    ct_scope_close(s);
}
END_TEST

START_TEST(test_integer_unary)
{
    CtScope *s = ct_scope_open();
    Tensor *x = tu_tensor(CT_I64, 1, SHAPE(4), (double[]){-3, -1, 0, 5});
    tu_assert_values(tensor_neg(x), ((double[]){3, 1, 0, -5}), 4, 0, 0);
    tu_assert_values(tensor_abs(x), ((double[]){3, 1, 0, 5}), 4, 0, 0);
    tu_assert_values(tensor_relu(x), ((double[]){0, 0, 0, 5}), 4, 0, 0);
    tu_assert_values(tensor_clamp(x, -INFINITY, 1), ((double[]){-3, -1, 0, 1}), 4, 0, 0);
    tu_assert_values(tensor_clamp(x, -1, 2), ((double[]){-1, -1, 0, 2}), 4, 0, 0);
    tu_assert_values(tensor_clamp(x, 1, -1), ((double[]){-1, -1, -1, -1}), 4, 0, 0);
    tu_assert_values(tensor_add_scalar(x, 2), ((double[]){-1, 1, 2, 7}), 4, 0, 0);
    tu_assert_values(tensor_sub_scalar(x, 2), ((double[]){-5, -3, -2, 3}), 4, 0, 0);
    tu_assert_values(tensor_rsub_scalar(x, 2), ((double[]){5, 3, 2, -3}), 4, 0, 0);
    tu_assert_values(tensor_mul_scalar(x, -2), ((double[]){6, 2, 0, -10}), 4, 0, 0);
    ck_assert_int_eq(tensor_dtype(tensor_mul_scalar(x, -2)), CT_I64);
    Tensor *y = tu_tensor(CT_I32, 1, SHAPE(2), (double[]){-7, 8});
    tu_assert_values(tensor_neg(y), ((double[]){7, -8}), 2, 0, 0);
    ck_assert_int_eq(tensor_dtype(tensor_neg(y)), CT_I32);
    /* a scalar the integer kernel would truncate is refused */
    ck_assert_ptr_null(tensor_mul_scalar(x, 2.5));
    tu_assert_error(CT_ERR_INVALID,
                    "mul_scalar: scalar 2.5 must be an integer for i64[4]");
    ck_assert_ptr_null(tensor_add_scalar(y, INFINITY));
    tu_assert_error(CT_ERR_INVALID, "add_scalar: scalar inf must be an integer");
    tensor_free(x);
    tensor_free(y);
    ct_scope_close(s);
}
END_TEST

/* ------------------------------------------------------- unary gradients */

static Tensor *unary_fn(Tensor **in, void *ctx)
{
    return ((const UnCase *)ctx)->fn(in[0]);
}

/* the op applied to a transposed (non-contiguous) view of the input */
static Tensor *unary_t_fn(Tensor **in, void *ctx)
{
    return ((const UnCase *)ctx)->fn(tensor_transpose(in[0], 0, 1));
}

START_TEST(test_unary_gradcheck)
{
    for (int i = 0; i < N_CASES; i++) {
        const UnCase *c = &CASES[i];
        double lo = c->positive ? 0.3 : -2, hi = 2;
        Tensor *x = tu_rand64(2, SHAPE(3, 4), lo, hi, 100 + (unsigned)i, true);
        tu_gradcheck(c->name, unary_fn, (void *)c, 1, &x);
        tensor_set_grad(x, NULL);
        tu_gradcheck(c->name, unary_t_fn, (void *)c, 1, &x);
        tensor_free(x);
    }
}
END_TEST

/* Gradients at kinks follow PyTorch (fixtures/elementwise.py). */
static void assert_grad_at(UnFn fn, int n, const double *x, const double *expect)
{
    Tensor *t = tu_tensor(CT_F64, 1, (const int64_t[]){n}, x);
    tensor_set_requires_grad(t, true);
    CtScope *s = ct_scope_open();
    Tensor *y = fn(t);
    ck_assert_int_eq(tensor_backward(y, tensor_ones_like(y)), CT_OK);
    ct_scope_close(s);
    tu_assert_values(tensor_grad(t), expect, n, 0, 0);
    tensor_free(t);
}

static Tensor *f_pow_0(Tensor *t)
{
    return tensor_pow_scalar(t, 0);
}

START_TEST(test_unary_grad_at_kinks)
{
    TU_MEM_BEGIN;
    assert_grad_at(f_clamp, 5, (double[]){-0.5, 0.5, -1, 1, 0},
                   (double[]){1, 1, 0, 0, 1});
    assert_grad_at(f_abs, 3, (double[]){-1, 0, 1}, (double[]){-1, 0, 1});
    assert_grad_at(f_relu, 3, (double[]){-1, 0, 1}, (double[]){0, 0, 1});
    assert_grad_at(f_leaky, 3, (double[]){-1, 0, 1}, (double[]){0.1, 0.1, 1});
    assert_grad_at(f_pow_0, 2, (double[]){0, 2}, (double[]){0, 0});
    TU_MEM_END;
}
END_TEST

/* Composite: several unary ops chained, with a shared input. */
static Tensor *chain_fn(Tensor **in, void *ctx)
{
    (void)ctx;
    Tensor *x = in[0];
    Tensor *h = tensor_gelu(tensor_mul_scalar(x, 1.3), CT_GELU_TANH);
    Tensor *e = tensor_exp(tensor_neg(tensor_abs(x)));
    return tensor_add(tensor_tanh(h), tensor_mul(e, tensor_sigmoid(x)));
}

START_TEST(test_unary_chain_gradcheck)
{
    Tensor *x = tu_rand64(1, SHAPE(9), -2, 2, 7, true);
    tu_gradcheck("chain", chain_fn, NULL, 1, &x);
    tensor_free(x);
}
END_TEST

/* f32 backward kernels agree with f64 (the f32 path is what training uses). */
START_TEST(test_unary_backward_f32)
{
    for (int i = 0; i < N_CASES; i++) {
        const UnCase *c = &CASES[i];
        double lo = c->positive ? 0.3 : -2, hi = 2;
        Tensor *x64 = tu_rand64(1, SHAPE(16), lo, hi, 300 + (unsigned)i, true);
        CtScope *s = ct_scope_open();
        Tensor *x32 = tensor_detach(tensor_cast(x64, CT_F32));
        tensor_retain(x32);
        ct_scope_close(s);
        tensor_set_requires_grad(x32, true);
        s = ct_scope_open();
        Tensor *y64 = c->fn(x64), *y32 = c->fn(x32);
        ck_assert_int_eq(tensor_backward(y64, tensor_ones_like(y64)), CT_OK);
        ck_assert_int_eq(tensor_backward(y32, tensor_ones_like(y32)), CT_OK);
        double g[16];
        tensor_copy_to_host(tensor_grad(x64), g, CT_F64);
        tu_assert_values(tensor_grad(x32), g, 16, 1e-6, 1e-5);
        ct_scope_close(s);
        tensor_free(x32);
        tensor_free(x64);
    }
}
END_TEST

/* bf16 backward runs the same kernel (computed in f32). */
START_TEST(test_unary_backward_bf16)
{
    Tensor *x = tu_tensor(CT_BF16, 1, SHAPE(3), (double[]){-1, 0, 0.5});
    tensor_set_requires_grad(x, true);
    CtScope *s = ct_scope_open();
    Tensor *y = tensor_tanh(x);
    ck_assert_int_eq(tensor_backward(y, tensor_ones_like(y)), CT_OK);
    ct_scope_close(s);
    /* 1 - tanh(x)^2 of the bf16-rounded tanh values */
    tu_assert_values(tensor_grad(x), ((double[]){0.41997434, 1, 0.78644773}), 3, 0, 8e-3);
    ck_assert_int_eq(tensor_dtype(tensor_grad(x)), CT_BF16);
    tensor_free(x);
}
END_TEST

/* ------------------------------------------------------ binary gradients */

typedef Tensor *(*BinFn)(Tensor *, Tensor *);

typedef struct BinCase {
    const char *name;
    BinFn fn;
    double alo, ahi, blo, bhi; /* input ranges keeping away from poles */
} BinCase;

static const BinCase BINS[] = {
    {"add", tensor_add, -2, 2, -2, 2},         {"sub", tensor_sub, -2, 2, -2, 2},
    {"mul", tensor_mul, -2, 2, -2, 2},         {"div", tensor_div, -2, 2, 0.5, 2},
    {"pow", tensor_pow, 0.5, 2, -1.5, 1.5},    {"maximum", tensor_maximum, -2, 2, -2, 2},
    {"minimum", tensor_minimum, -2, 2, -2, 2},
};
#define N_BINS ((int)(sizeof BINS / sizeof BINS[0]))

typedef struct BinCtx {
    const BinCase *c;
    bool transpose_a; /* a is given transposed and viewed back */
} BinCtx;

static Tensor *binary_fn(Tensor **in, void *ctx)
{
    const BinCtx *b = ctx;
    Tensor *a = b->transpose_a ? tensor_transpose(in[0], 0, 1) : in[0];
    return b->c->fn(a, in[1]);
}

static void binary_gradcheck(int nda, const int64_t *sa, int ndb, const int64_t *sb,
                             bool transpose_a)
{
    for (int i = 0; i < N_BINS; i++) {
        const BinCase *c = &BINS[i];
        Tensor *in[2] = {tu_rand64(nda, sa, c->alo, c->ahi, 20 + (unsigned)i, true),
                         tu_rand64(ndb, sb, c->blo, c->bhi, 40 + (unsigned)i, true)};
        BinCtx ctx = {c, transpose_a};
        tu_gradcheck(c->name, binary_fn, &ctx, 2, in);
        tensor_free(in[0]);
        tensor_free(in[1]);
    }
}

START_TEST(test_binary_gradcheck_same_shape)
{
    binary_gradcheck(2, SHAPE(3, 4), 2, SHAPE(3, 4), false);
}
END_TEST

START_TEST(test_binary_gradcheck_transposed)
{
    /* a: (4, 3) stored, used as its (3, 4) transpose */
    binary_gradcheck(2, SHAPE(4, 3), 2, SHAPE(3, 4), true);
}
END_TEST

START_TEST(test_binary_gradcheck_broadcast)
{
    binary_gradcheck(2, SHAPE(3, 1), 2, SHAPE(1, 4), false);
    binary_gradcheck(3, SHAPE(2, 3, 4), 1, SHAPE(4), false);
    binary_gradcheck(1, SHAPE(4), 3, SHAPE(2, 3, 4), false);
    binary_gradcheck(2, SHAPE(4, 3), 3, SHAPE(2, 1, 4), true); /* strided too */
}
END_TEST

/* ---------------------------------------------------------- comparisons */

START_TEST(test_comparisons)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *a = tu_tensor(CT_F32, 1, SHAPE(3), (double[]){1, 2, 3});
    Tensor *b = tu_tensor(CT_F32, 1, SHAPE(3), (double[]){2, 2, 2});
    struct {
        BinFn fn;
        double v[3];
    } cmp[] = {{tensor_eq, {0, 1, 0}}, {tensor_ne, {1, 0, 1}}, {tensor_lt, {1, 0, 0}},
               {tensor_le, {1, 1, 0}}, {tensor_gt, {0, 0, 1}}, {tensor_ge, {0, 1, 1}}};
    for (int i = 0; i < 6; i++) {
        Tensor *r = cmp[i].fn(a, b);
        ck_assert_int_eq(tensor_dtype(r), CT_BOOL);
        tu_assert_values(r, cmp[i].v, 3, 0, 0);
    }
    /* broadcast (3, 1) x (1, 3) */
    Tensor *r = tensor_lt(tensor_view(a, 2, SHAPE(3, 1)), tensor_view(a, 2, SHAPE(1, 3)));
    tu_assert_shape(r, 2, 3, 3);
    tu_assert_values(r, ((double[]){0, 1, 1, 0, 0, 1, 0, 0, 0}), 9, 0, 0);
    /* not differentiable: no graph even when inputs require grad */
    Tensor *x = tu_rand64(1, SHAPE(3), -1, 1, 5, true);
    ck_assert(!tensor_requires_grad(tensor_gt(x, x)));
    tensor_free(x);
    tensor_free(a);
    tensor_free(b);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* bf16 and f16 binary ops compute in f32 and round once: every kind equals
 * the f32 op on the widened inputs, rounded, over broadcast and transposed
 * operands and rows longer than one conversion block. */
START_TEST(test_binary_low_dtypes)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    BinFn ops[] = {tensor_add,     tensor_sub,     tensor_mul, tensor_div, tensor_pow,
                   tensor_maximum, tensor_minimum, tensor_eq,  tensor_lt,  tensor_ge};
    const CtDType dts[] = {CT_BF16, CT_F16};
    for (int d = 0; d < 2; d++) {
        Tensor *r[3] = {tu_rand64(2, SHAPE(3, 300), 0.25, 3, 61, false),
                        tu_rand64(2, SHAPE(300, 1), -2, 2, 62, false),
                        tu_rand64(2, SHAPE(300, 3), -2, 2, 63, false)};
        Tensor *a = tensor_cast(r[0], dts[d]);
        /* a row broadcast down a's rows, and a transposed (strided) operand */
        Tensor *bt = tensor_transpose(tensor_cast(r[1], dts[d]), 0, 1);
        Tensor *ct = tensor_transpose(tensor_cast(r[2], dts[d]), 0, 1);
        for (int i = 0; i < 3; i++) tensor_free(r[i]);
        Tensor *af = tensor_cast(a, CT_F32), *bf = tensor_cast(bt, CT_F32),
               *cf = tensor_cast(ct, CT_F32);
        for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
            Tensor *got[2] = {ops[k](a, bt), ops[k](a, ct)};
            Tensor *want[2] = {ops[k](af, bf), ops[k](af, cf)};
            for (int v = 0; v < 2; v++) {
                ck_assert_msg(got[v], "op %zu: %s", k, ct_last_error());
                CtDType dt = tensor_dtype(got[v]);
                ck_assert_int_eq(dt, k >= 7 ? CT_BOOL : dts[d]);
                Tensor *w = dt == CT_BOOL ? want[v] : tensor_cast(want[v], dts[d]);
                double *x = malloc(900 * sizeof *x), *y = malloc(900 * sizeof *y);
                ck_assert_int_eq(tensor_copy_to_host(w, x, CT_F64), CT_OK);
                ck_assert_int_eq(tensor_copy_to_host(got[v], y, CT_F64), CT_OK);
                for (int i = 0; i < 900; i++)
                    ck_assert_msg(x[i] == y[i] || (x[i] != x[i] && y[i] != y[i]),
                                  "%s op %zu variant %d element %d: %g vs %g",
                                  ct_dtype_name(dts[d]), k, v, i, x[i], y[i]);
                free(x);
                free(y);
            }
        }
    }
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------ integer binaries */

/* t's n elements (any dtype) as doubles equal want[] exactly, NaN equal to
 * NaN. */
static void assert_exact(const Tensor *t, const double *want, int n)
{
    double got[8];
    ck_assert_int_eq(tensor_numel(t), n);
    ck_assert_int_eq(tensor_copy_to_host(t, got, CT_F64), CT_OK);
    for (int i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i] || (got[i] != got[i] && want[i] != want[i]),
                      "element %d: %.17g, want %.17g", i, got[i], want[i]);
}

/* Integers and bools divide as torch.div does: true division, f32 result;
 * by 0 and INT_MIN by -1 included. */
START_TEST(test_integer_division)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const int64_t a64[6] = {7, -7, 1, 0, INT64_MIN, 5}, b64[6] = {2, 2, 0, 0, -1, -1};
    Tensor *q = tensor_div(tensor_from_data(a64, 1, SHAPE(6), CT_I64, ct_cpu()),
                           tensor_from_data(b64, 1, SHAPE(6), CT_I64, ct_cpu()));
    ck_assert_msg(q, "%s", ct_last_error());
    ck_assert_int_eq(tensor_dtype(q), CT_F32);
    assert_exact(q, (double[]){3.5, -3.5, INFINITY, NAN, 0x1p63, -5}, 6);
    const int32_t a32[4] = {7, -7, INT32_MIN, 0}, b32[4] = {2, 0, -1, 0};
    q = tensor_div(tensor_from_data(a32, 1, SHAPE(4), CT_I32, ct_cpu()),
                   tensor_from_data(b32, 1, SHAPE(4), CT_I32, ct_cpu()));
    ck_assert_int_eq(tensor_dtype(q), CT_F32);
    assert_exact(q, (double[]){3.5, -INFINITY, 0x1p31, NAN}, 4);
    Tensor *u = tensor_from_data((const uint8_t[]){3, 255}, 1, SHAPE(2), CT_U8, ct_cpu());
    Tensor *u2 = tensor_from_data((const uint8_t[]){2, 0}, 1, SHAPE(2), CT_U8, ct_cpu());
    assert_exact(tensor_div(u, u2), (double[]){1.5, INFINITY}, 2);
    Tensor *c = tensor_from_data((const uint8_t[]){1, 0}, 1, SHAPE(2), CT_BOOL, ct_cpu());
    assert_exact(tensor_div(c, tensor_ones(1, SHAPE(2), CT_BOOL, ct_cpu())),
                 (double[]){1, 0}, 2);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* Integer add, sub, mul and pow wrap around (two's complement), as
 * PyTorch's do. */
START_TEST(test_integer_wraps)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const int64_t v[3] = {INT64_C(1) << 62, INT64_MIN, 3}, one[3] = {1, 1, 1},
                  base[3] = {4, 2, 3}, e[3] = {2, 64, 41};
    Tensor *x = tensor_from_data(v, 1, SHAPE(3), CT_I64, ct_cpu());
    Tensor *o = tensor_from_data(one, 1, SHAPE(3), CT_I64, ct_cpu());
    const int64_t want[4][3] = {{INT64_MIN, 0, 6},
                                {0, 0, 9},
                                {(INT64_C(1) << 62) - 1, INT64_MAX, 2},
                                {16, 0, INT64_C(-420491770248316829)}};
    Tensor *r[4] = {tensor_add(x, x), tensor_mul(x, x), tensor_sub(x, o),
                    tensor_pow(tensor_from_data(base, 1, SHAPE(3), CT_I64, ct_cpu()),
                               tensor_from_data(e, 1, SHAPE(3), CT_I64, ct_cpu()))};
    for (int k = 0; k < 4; k++) {
        int64_t got[3];
        ck_assert_int_eq(tensor_copy_to_host(r[k], got, CT_I64), CT_OK);
        for (int i = 0; i < 3; i++)
            ck_assert_msg(got[i] == want[k][i], "op %d element %d: %lld", k, i,
                          (long long)got[i]);
    }
    const int32_t m[2] = {INT32_MAX, -3};
    Tensor *y = tensor_from_data(m, 1, SHAPE(2), CT_I32, ct_cpu());
    int32_t g32[2];
    ck_assert_int_eq(tensor_copy_to_host(tensor_add(y, y), g32, CT_I32), CT_OK);
    ck_assert(g32[0] == -2 && g32[1] == -6);
    Tensor *p = tensor_pow(y, tensor_full(1, SHAPE(2), 21, CT_I32, ct_cpu()));
    ck_assert_int_eq(tensor_copy_to_host(p, g32, CT_I32), CT_OK);
    ck_assert_int_eq(g32[1], -1870418611); /* (-3)^21 in 32 bits, as PyTorch */
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------- binary gradients at special points */

/* The gradients of sum(g * f(a, b)) for f64 a and b of n elements equal
 * ga[] and gb[] exactly (NaN equal to NaN; 1e-15 relative for the rest). */
static void assert_binary_grads(BinFn f, int n, const double *a, const double *b,
                                const double *g, const double *ga, const double *gb)
{
    Tensor *x = tu_tensor(CT_F64, 1, SHAPE(n), a), *y = tu_tensor(CT_F64, 1, SHAPE(n), b);
    tensor_set_requires_grad(x, true);
    tensor_set_requires_grad(y, true);
    CtScope *s = ct_scope_open();
    Tensor *out = f(x, y);
    ck_assert_int_eq(
        tensor_backward(out, tensor_from_data(g, 1, SHAPE(n), CT_F64, ct_cpu())), CT_OK);
    double got[2][8];
    ck_assert_int_eq(tensor_copy_to_host(tensor_grad(x), got[0], CT_F64), CT_OK);
    ck_assert_int_eq(tensor_copy_to_host(tensor_grad(y), got[1], CT_F64), CT_OK);
    ct_scope_close(s);
    const double *want[2] = {ga, gb};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < n; i++) {
            double u = got[k][i], w = want[k][i];
            bool same = u == w || (u != u && w != w) || fabs(u - w) <= 1e-15 * fabs(w);
            ck_assert_msg(same, "grad %c[%d]: %.17g, want %.17g", "ab"[k], i, u, w);
        }
    tensor_free(x);
    tensor_free(y);
}

/* pow at a = 0 as torch 1.13: d/da is 0 where b == 0 (not 0 * inf); d/db is
 * 0 where a == 0 and b >= 0, a^b log a elsewhere (-inf for b < 0). */
START_TEST(test_pow_grad_at_zero)
{
    TU_MEM_BEGIN;
    assert_binary_grads(tensor_pow, 7, (double[]){0, 0, 0, 2, -1, 0, 0},
                        (double[]){0, 2, -1, 0, 3, 0.5, -0.5},
                        (double[]){1, 1, 1, 1, 1, 1, 1},
                        (double[]){0, 0, -INFINITY, 0, 3, INFINITY, -INFINITY},
                        (double[]){0, 0, -INFINITY, M_LN2, NAN, 0, -INFINITY});
    TU_MEM_END;
}
END_TEST

/* maximum/minimum: the gradient goes to a on ties (documented), and to both
 * where a, b or both are NaN, as torch 1.13. */
START_TEST(test_extremum_grad_with_nan)
{
    TU_MEM_BEGIN;
    const double a[6] = {1, NAN, 2, NAN, 1, 3}, b[6] = {1, 2, NAN, NAN, 3, 1},
                 g[6] = {1, 2, 4, 8, 16, 32};
    assert_binary_grads(tensor_maximum, 6, a, b, g, (double[]){1, 2, 4, 8, 0, 32},
                        (double[]){0, 2, 4, 8, 16, 0});
    assert_binary_grads(tensor_minimum, 6, a, b, g, (double[]){1, 2, 4, 8, 16, 0},
                        (double[]){0, 2, 4, 8, 0, 32});
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------- where and masked_fill */

START_TEST(test_where_forward)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *c = tu_tensor(CT_BOOL, 1, SHAPE(3), (double[]){1, 0, 1});
    Tensor *a = tu_tensor(CT_F32, 1, SHAPE(3), (double[]){1, 2, 3});
    Tensor *b = tu_tensor(CT_F32, 1, SHAPE(3), (double[]){10, 20, 30});
    tu_assert_values(tensor_where(c, a, b), ((double[]){1, 20, 3}), 3, 0, 0);
    /* all three broadcast: (2, 1), (3) and 0-d -> (2, 3) */
    Tensor *c2 = tu_tensor(CT_BOOL, 2, SHAPE(2, 1), (double[]){1, 0});
    Tensor *nine = tensor_scalar(9, CT_F32, ct_cpu());
    Tensor *w = tensor_where(c2, a, nine);
    tu_assert_shape(w, 2, 2, 3);
    tu_assert_values(w, ((double[]){1, 2, 3, 9, 9, 9}), 6, 0, 0);
    /* any dtype; strided operands */
    Tensor *ai = tu_tensor(CT_I64, 2, SHAPE(2, 2), (double[]){1, 2, 3, 4});
    Tensor *bi = tensor_zeros(2, SHAPE(2, 2), CT_I64, ct_cpu());
    Tensor *ci = tu_tensor(CT_BOOL, 2, SHAPE(2, 2), (double[]){1, 1, 0, 1});
    tu_assert_values(tensor_where(ci, tensor_transpose(ai, 0, 1), bi),
                     ((double[]){1, 3, 0, 4}), 4, 0, 0);
    Tensor *cn = tu_tensor(CT_BOOL, 1, SHAPE(3), (double[]){1, 1, 0});
    Tensor *wb = tensor_where(c, cn, c);
    ck_assert_int_eq(tensor_dtype(wb), CT_BOOL);
    tu_assert_values(wb, ((double[]){1, 0, 0}), 3, 0, 0);
    tensor_free(cn);
    tensor_free(c);
    tensor_free(a);
    tensor_free(b);
    tensor_free(c2);
    tensor_free(ai);
    tensor_free(ci);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_masked_fill_forward)
{
    CtScope *s = ct_scope_open();
    Tensor *t = tensor_arange(0, 6, 1, CT_F32, ct_cpu());
    t = tensor_view(t, 2, SHAPE(2, 3));
    Tensor *m = tu_tensor(CT_BOOL, 1, SHAPE(3), (double[]){0, 1, 0});
    Tensor *y = tensor_masked_fill(t, m, -INFINITY);
    tu_assert_shape(y, 2, 2, 3);
    tu_assert_values(y, ((double[]){0, -INFINITY, 2, 3, -INFINITY, 5}), 6, 0, 0);
    Tensor *ti = tensor_arange(0, 3, 1, CT_I32, ct_cpu());
    tu_assert_values(tensor_masked_fill(ti, m, -7), ((double[]){0, -7, 2}), 3, 0, 0);
    ck_assert_int_eq(tensor_dtype(tensor_masked_fill(ti, m, -7)), CT_I32);
    tensor_free(m);
    ct_scope_close(s);
}
END_TEST

static Tensor *where_fn(Tensor **in, void *ctx)
{
    return tensor_where((Tensor *)ctx, in[0], in[1]);
}

static Tensor *masked_fill_fn(Tensor **in, void *ctx)
{
    return tensor_masked_fill(tensor_transpose(in[0], 0, 1), (Tensor *)ctx, 0.25);
}

START_TEST(test_where_gradcheck)
{
    Tensor *c = tu_tensor(CT_BOOL, 2, SHAPE(3, 4),
                          (double[]){1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1});
    Tensor *in[2] = {tu_rand64(2, SHAPE(3, 4), -1, 1, 1, true),
                     tu_rand64(2, SHAPE(3, 4), -1, 1, 2, true)};
    tu_gradcheck("where", where_fn, c, 2, in);
    tensor_free(in[0]);
    tensor_free(in[1]);
    tensor_free(c);
    /* masked_fill: mask (4) broadcast over a transposed (3, 4) input */
    Tensor *m = tu_tensor(CT_BOOL, 1, SHAPE(4), (double[]){0, 1, 1, 0});
    Tensor *x = tu_rand64(2, SHAPE(4, 3), -1, 1, 3, true);
    tu_gradcheck("masked_fill", masked_fill_fn, m, 1, &x);
    tensor_free(x);
    tensor_free(m);
}
END_TEST

START_TEST(test_where_gradcheck_broadcast)
{
    /* cond (3, 1), a (1, 4), b (4) -> (3, 4): gradients summed back */
    Tensor *c = tu_tensor(CT_BOOL, 2, SHAPE(3, 1), (double[]){1, 0, 1});
    Tensor *in[2] = {tu_rand64(2, SHAPE(1, 4), -1, 1, 4, true),
                     tu_rand64(1, SHAPE(4), -1, 1, 5, true)};
    tu_gradcheck("where_broadcast", where_fn, c, 2, in);
    tensor_free(in[0]);
    tensor_free(in[1]);
    tensor_free(c);
}
END_TEST

/* No scope open: outputs are caller-owned and the fill constant of
 * masked_fill is released with the graph. */
START_TEST(test_masked_fill_no_scope_no_leak)
{
    TU_MEM_BEGIN;
    Tensor *x = tu_rand64(1, SHAPE(4), -1, 1, 9, true);
    Tensor *m = tu_tensor(CT_BOOL, 1, SHAPE(4), (double[]){1, 0, 0, 1});
    double xv[4];
    tensor_copy_to_host(x, xv, CT_F64);
    Tensor *y = tensor_masked_fill(x, m, 3.0);
    tu_assert_values(y, ((double[]){3, xv[1], xv[2], 3}), 4, 0, 0);
    Tensor *g = tensor_ones_like(y);
    ck_assert_int_eq(tensor_backward(y, g), CT_OK);
    tu_assert_values(tensor_grad(x), ((double[]){0, 1, 1, 0}), 4, 0, 0);
    tensor_free(g);
    tensor_free(y);
    tensor_free(x);
    tensor_free(m);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------ bad input */

START_TEST(test_bad_input)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *f = tensor_zeros(1, SHAPE(3), CT_F32, ct_cpu());
    Tensor *d = tensor_zeros(1, SHAPE(3), CT_F64, ct_cpu());
    Tensor *i = tensor_zeros(1, SHAPE(3), CT_I64, ct_cpu());
    Tensor *c = tensor_zeros(1, SHAPE(3), CT_BOOL, ct_cpu());
    Tensor *c2 = tensor_zeros(1, SHAPE(2), CT_BOOL, ct_cpu());
    Tensor *m23 = tensor_zeros(2, SHAPE(2, 3), CT_BOOL, ct_cpu());

    ck_assert_ptr_null(tensor_add(f, d));
    tu_assert_error(CT_ERR_DTYPE, "add: dtypes differ: f32[3] cpu and f64[3] cpu");
    ck_assert_ptr_null(tensor_pow(d, f));
    tu_assert_error(CT_ERR_DTYPE, "pow: dtypes differ");
    ck_assert_ptr_null(tensor_where(c, f, d));
    tu_assert_error(CT_ERR_DTYPE, "where: dtypes differ: f32[3] cpu and f64[3] cpu");
    ck_assert_ptr_null(tensor_where(f, f, f));
    tu_assert_error(CT_ERR_DTYPE, "where: cond must be a bool tensor, got f32[3] cpu");
    ck_assert_ptr_null(tensor_where(c2, f, f));
    tu_assert_error(
        CT_ERR_SHAPE,
        "where: shapes bool[2] cpu, f32[3] cpu and f32[3] cpu do not broadcast");
    ck_assert_ptr_null(tensor_masked_fill(f, m23, 1));
    tu_assert_error(CT_ERR_SHAPE,
                    "masked_fill: mask bool[2, 3] cpu does not broadcast to the input "
                    "f32[3] cpu");
    ck_assert_ptr_null(tensor_masked_fill(f, f, 1));
    tu_assert_error(CT_ERR_DTYPE, "masked_fill: mask must be a bool tensor");
    ck_assert_ptr_null(tensor_masked_fill(i, c, NAN));
    tu_assert_error(CT_ERR_INVALID, "masked_fill: value nan does not fit i64[3] cpu");

    /* float-only ops on integer tensors */
    ck_assert_ptr_null(tensor_exp(i));
    tu_assert_error(CT_ERR_UNSUPPORTED,
                    "exp: not supported on cpu for i64 (input i64[3] cpu)");
    ck_assert_ptr_null(tensor_sigmoid(c));
    tu_assert_error(CT_ERR_UNSUPPORTED, "sigmoid: not supported on cpu for bool");
    ck_assert_ptr_null(tensor_pow_scalar(i, 2));
    tu_assert_error(CT_ERR_UNSUPPORTED, "pow_scalar: not supported on cpu for i64");
    ck_assert_ptr_null(tensor_neg(c));
    tu_assert_error(CT_ERR_UNSUPPORTED, "neg: not supported on cpu for bool");

    ck_assert_ptr_null(tensor_gelu(f, (CtGeluApprox)7));
    tu_assert_error(CT_ERR_INVALID, "gelu: unknown approximation 7");
    ck_assert_ptr_null(tensor_clamp(f, NAN, 1));
    tu_assert_error(CT_ERR_INVALID, "clamp: bounds must not be NaN");
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_null_propagation)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *f = tensor_zeros(1, SHAPE(3), CT_F32, ct_cpu());
    Tensor *c = tensor_zeros(1, SHAPE(3), CT_BOOL, ct_cpu());
    ct_error(CT_ERR_IO, "the first error");
    Tensor *outs[] = {
        tensor_neg(NULL),
        tensor_exp(NULL),
        tensor_log(NULL),
        tensor_sqrt(NULL),
        tensor_abs(NULL),
        tensor_clamp(NULL, NAN, 0), /* NULL wins over bad bounds */
        tensor_relu(NULL),
        tensor_leaky_relu(NULL, 0.1),
        tensor_gelu(NULL, CT_GELU_ERF),
        tensor_gelu(NULL, (CtGeluApprox)7),
        tensor_silu(NULL),
        tensor_sigmoid(NULL),
        tensor_tanh(NULL),
        tensor_add_scalar(NULL, 1),
        tensor_sub_scalar(NULL, 1),
        tensor_rsub_scalar(NULL, 1),
        tensor_mul_scalar(NULL, 1),
        tensor_div_scalar(NULL, 1),
        tensor_pow_scalar(NULL, 1),
        tensor_add(NULL, f),
        tensor_maximum(f, NULL),
        tensor_lt(NULL, f),
        tensor_where(NULL, f, f),
        tensor_where(c, NULL, f),
        tensor_where(c, f, NULL),
        tensor_masked_fill(NULL, c, 0),
        tensor_masked_fill(f, NULL, 0),
        tensor_relu(tensor_exp(tensor_add(f, NULL))), /* a chain */
    };
    for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++)
        ck_assert_msg(outs[k] == NULL, "output %zu is not NULL", k);
    tu_assert_error(CT_ERR_IO, "the first error");
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

Suite *elementwise_suite(void)
{
    Suite *s = suite_create("tensor_elementwise");
    TCase *tc = tcase_create("forward");
    tcase_add_test(tc, test_unary_forward_values);
    tcase_add_test(tc, test_unary_noncontiguous_forward);
    tcase_add_test(tc, test_unary_large);
    tcase_add_test(tc, test_integer_unary);
    tcase_add_test(tc, test_comparisons);
    tcase_add_test(tc, test_binary_low_dtypes);
    tcase_add_test(tc, test_integer_division);
    tcase_add_test(tc, test_integer_wraps);
    tcase_add_test(tc, test_where_forward);
    tcase_add_test(tc, test_masked_fill_forward);
    tcase_add_test(tc, test_masked_fill_no_scope_no_leak);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_null_propagation);
    suite_add_tcase(s, tc);
    TCase *tg = tcase_create("grad");
    tcase_set_timeout(tg, 120);
    tcase_add_test(tg, test_unary_gradcheck);
    tcase_add_test(tg, test_unary_grad_at_kinks);
    tcase_add_test(tg, test_unary_chain_gradcheck);
    tcase_add_test(tg, test_unary_backward_f32);
    tcase_add_test(tg, test_unary_backward_bf16);
    tcase_add_test(tg, test_binary_gradcheck_same_shape);
    tcase_add_test(tg, test_binary_gradcheck_transposed);
    tcase_add_test(tg, test_binary_gradcheck_broadcast);
    tcase_add_test(tg, test_pow_grad_at_zero);
    tcase_add_test(tg, test_extremum_grad_with_nan);
    tcase_add_test(tg, test_where_gradcheck);
    tcase_add_test(tg, test_where_gradcheck_broadcast);
    suite_add_tcase(s, tg);
    return s;
}

int main(void)
{
    return tu_run(elementwise_suite());
}
