/* Activations fused into their producer: conv2d with CtConv2dArgs.relu,
 * tensor_linear_relu and tensor_batch_norm_relu give the bits of
 * tensor_relu over the plain op, and tensor_linear_gelu those of
 * tensor_gelu over tensor_linear, for the output and every gradient: every
 * conv path (samples per thread, a team per sample, chunks of samples),
 * without bias, with groups, f64, bf16 autocast, NaN input; batch norm in
 * training and eval; tensor_add_relu, broadcast, every float dtype. The
 * fused graph holds one node, not two. */
#include <math.h>
#include <stdio.h>

#include "tensor/internal.h"
#include "testutil.h"

/* Persistent leaf of dt from seeded values in [-1, 1), requiring grad. */
static Tensor *leaf(int nd, const int64_t *shape, unsigned seed, CtDType dt)
{
    Tensor *r = tu_rand64(nd, shape, -1, 1, seed, false);
    Tensor *t = tensor_cast(r, dt); /* no scope open: the caller's */
    tensor_free(r);
    ck_assert_int_eq(tensor_set_requires_grad(t, true), CT_OK);
    return t;
}

typedef Tensor *(*Producer)(Tensor **in, const void *ctx, bool fused);

static Tensor *conv(Tensor **in, const void *ctx, bool fused)
{
    CtConv2dArgs a = *(const CtConv2dArgs *)ctx;
    a.relu = fused;
    Tensor *y = tensor_conv2d(in[0], in[1], in[2], &a);
    return fused ? y : tensor_relu(y);
}

/* The activation a linear producer applies (its ctx). */
typedef enum LinAct { LIN_RELU, LIN_GELU_ERF, LIN_GELU_TANH } LinAct;

static Tensor *linear(Tensor **in, const void *ctx, bool fused)
{
    LinAct act = *(const LinAct *)ctx;
    if (act == LIN_RELU)
        return fused ? tensor_linear_relu(in[0], in[1], in[2])
                     : tensor_relu(tensor_linear(in[0], in[1], in[2]));
    CtGeluApprox ap = act == LIN_GELU_TANH ? CT_GELU_TANH : CT_GELU_ERF;
    return fused ? tensor_linear_gelu(in[0], in[1], in[2], ap)
                 : tensor_gelu(tensor_linear(in[0], in[1], in[2]), ap);
}

/* Runs the unfused and the fused forms on the same leaves (in[2] may be
 * NULL) and compares outputs and gradients bit for bit. */
static void check_fused(const char *name, Producer f, const void *ctx, Tensor **in,
                        CtDType autocast)
{
    const int n_in = in[2] ? 3 : 2;
    Tensor *grads[2][3] = {{0}};
    Tensor *outs[2];
    CtScope *s = ct_scope_open();
    for (int fused = 0; fused < 2; fused++) {
        CtDType prev;
        ck_assert_int_eq(tensor_autocast_begin(autocast, &prev), CT_OK);
        Tensor *y = f(in, ctx, fused);
        tensor_autocast_end(prev);
        ck_assert_msg(y, "%s: %s", name, ct_last_error());
        if (fused) { /* one node: the producer's, with the activation on it */
            ck_assert_ptr_nonnull(y->grad_fn);
            ck_assert_ptr_nonnull(y->grad_fn->act_x);
            ck_assert_ptr_eq(y->grad_fn->in[0], in[0]);
        }
        outs[fused] = tensor_detach(y);
        Tensor *g64 = tu_rand64(tensor_ndim(y), tensor_shape(y), -1, 1, 7, false);
        Tensor *gy = tensor_cast(g64, tensor_dtype(y));
        tensor_free(g64);
        ck_assert_msg(tensor_backward(y, gy) == CT_OK, "%s: %s", name, ct_last_error());
        for (int i = 0; i < n_in; i++) {
            grads[fused][i] = tensor_clone(tensor_grad(in[i]));
            tensor_set_grad(in[i], NULL);
        }
    }
    char what[96];
    snprintf(what, sizeof what, "%s: y", name);
    tu_assert_same_bits(what, outs[0], outs[1]);
    for (int i = 0; i < n_in; i++) {
        snprintf(what, sizeof what, "%s: grad of input %d", name, i);
        tu_assert_same_bits(what, grads[0][i], grads[1][i]);
    }
    ct_scope_close(s);
}

static void check_conv(const char *name, const int64_t *xs, const int64_t *ws,
                       const CtConv2dArgs *args, CtDType dt, bool bias, CtDType autocast)
{
    Tensor *in[3] = {leaf(4, xs, 11, dt), leaf(4, ws, 12, dt),
                     bias ? leaf(1, ws, 13, dt) : NULL};
    check_fused(name, conv, args, in, autocast);
    for (int i = 0; i < 3; i++) tensor_free(in[i]);
}

START_TEST(test_conv_relu_fused_bits)
{
    TU_MEM_BEGIN;
    const CtConv2dArgs pad = {.padding = {1, 1}}, plain = {0};
    const CtConv2dArgs mixed = {
        .stride = {2, 1}, .padding = {2, 1}, .dilation = {2, 1}, .groups = 2};
    /* BasicNet's conv2 shape on a small batch: samples across threads */
    check_conv("samples", (const int64_t[]){4, 32, 26, 26},
               (const int64_t[]){64, 32, 3, 3}, &plain, CT_F32, true, CT_F32);
    /* one sample: the threads share its output columns */
    check_conv("team", (const int64_t[]){1, 8, 24, 24}, (const int64_t[]){16, 8, 3, 3},
               &pad, CT_F32, true, CT_F32);
    /* fewer than 64 output pixels a sample: chunks of samples */
    check_conv("chunks", (const int64_t[]){20, 8, 6, 5}, (const int64_t[]){12, 8, 3, 3},
               &pad, CT_F32, true, CT_F32);
    check_conv("chunks, no bias", (const int64_t[]){20, 8, 6, 5},
               (const int64_t[]){12, 8, 3, 3}, &pad, CT_F32, false, CT_F32);
    check_conv("no bias", (const int64_t[]){3, 4, 9, 9}, (const int64_t[]){6, 4, 3, 3},
               &pad, CT_F32, false, CT_F32);
    check_conv("groups", (const int64_t[]){3, 6, 30, 27}, (const int64_t[]){10, 3, 3, 2},
               &mixed, CT_F32, true, CT_F32);
    check_conv("f64", (const int64_t[]){2, 3, 10, 10}, (const int64_t[]){5, 3, 3, 3},
               &pad, CT_F64, true, CT_F32);
    check_conv("bf16 autocast", (const int64_t[]){4, 32, 26, 26},
               (const int64_t[]){64, 32, 3, 3}, &plain, CT_F32, true, CT_BF16);
    check_conv("bf16 autocast, chunks", (const int64_t[]){20, 8, 6, 5},
               (const int64_t[]){12, 8, 3, 3}, &pad, CT_F32, true, CT_BF16);
    TU_MEM_END;
}
END_TEST

/* NaN in the input reaches the output of both forms alike, and its
 * gradient is cut alike. */
START_TEST(test_conv_relu_fused_nan)
{
    TU_MEM_BEGIN;
    const int64_t xs[] = {2, 3, 8, 8}, ws[] = {4, 3, 3, 3};
    Tensor *in[3] = {leaf(4, xs, 21, CT_F32), leaf(4, ws, 22, CT_F32),
                     leaf(1, ws, 23, CT_F32)};
    ((float *)tensor_data(in[0]))[37] = NAN;
    const CtConv2dArgs pad = {.padding = {1, 1}};
    check_fused("nan", conv, &pad, in, CT_F32);
    for (int i = 0; i < 3; i++) tensor_free(in[i]);
    TU_MEM_END;
}
END_TEST

static void check_linear(const char *name, LinAct act, int nd, const int64_t *xs,
                         int64_t out_f, CtDType dt, bool bias, bool wt, CtDType autocast)
{
    const int64_t in_f = xs[nd - 1];
    Tensor *w = wt ? leaf(2, (const int64_t[]){in_f, out_f}, 32, dt)
                   : leaf(2, (const int64_t[]){out_f, in_f}, 32, dt);
    Tensor *in[3] = {leaf(nd, xs, 31, dt), w, bias ? leaf(1, &out_f, 33, dt) : NULL};
    if (wt) { /* a column-major leaf as the weight */
        CtScope *s = ct_scope_open();
        in[1] = tensor_retain(tensor_detach(tensor_transpose(w, 0, 1)));
        ct_scope_close(s);
        ck_assert_int_eq(tensor_set_requires_grad(in[1], true), CT_OK);
    }
    check_fused(name, linear, &act, in, autocast);
    if (wt) tensor_free(w);
    for (int i = 0; i < 3; i++) tensor_free(in[i]);
}

/* Every linear case with activation act. */
static void check_linear_cases(LinAct act)
{
    check_linear("2-d", act, 2, (const int64_t[]){64, 96}, 128, CT_F32, true, false,
                 CT_F32);
    check_linear("3-d", act, 3, (const int64_t[]){2, 5, 7}, 9, CT_F32, true, false,
                 CT_F32);
    check_linear("no bias", act, 2, (const int64_t[]){8, 16}, 12, CT_F32, false, false,
                 CT_F32);
    check_linear("transposed weight", act, 2, (const int64_t[]){8, 16}, 12, CT_F32, true,
                 true, CT_F32);
    check_linear("f64", act, 2, (const int64_t[]){6, 10}, 4, CT_F64, true, false, CT_F32);
    check_linear("bf16 autocast", act, 2, (const int64_t[]){32, 64}, 24, CT_F32, true,
                 false, CT_BF16);
}

START_TEST(test_linear_relu_fused_bits)
{
    TU_MEM_BEGIN;
    check_linear_cases(LIN_RELU);
    TU_MEM_END;
}
END_TEST

START_TEST(test_linear_gelu_fused_bits)
{
    TU_MEM_BEGIN;
    check_linear_cases(LIN_GELU_ERF);
    check_linear_cases(LIN_GELU_TANH);
    TU_MEM_END;
}
END_TEST

/* GELU's gradient reads the pre-activation, which the node keeps (not the
 * output); without a node nothing is kept and the values are the same. */
START_TEST(test_linear_gelu_keeps_pre_activation)
{
    TU_MEM_BEGIN;
    Tensor *x = leaf(2, (const int64_t[]){3, 4}, 51, CT_F32);
    Tensor *w = leaf(2, (const int64_t[]){8, 4}, 52, CT_F32);
    Tensor *b = leaf(1, (const int64_t[]){8}, 53, CT_F32);
    CtScope *s = ct_scope_open();
    Tensor *y = tensor_linear_gelu(x, w, b, CT_GELU_TANH);
    ck_assert_ptr_nonnull(y);
    ck_assert_str_eq(y->grad_fn->op, "linear_gelu");
    ck_assert_int_eq(y->grad_fn->act, CT_UN_GELU_TANH);
    tu_assert_same_bits("pre-activation", y->grad_fn->act_x, tensor_linear(x, w, b));
    bool prev = ct_set_grad_enabled(false);
    Tensor *y0 = tensor_linear_gelu(x, w, b, CT_GELU_TANH);
    ck_assert_ptr_null(y0->grad_fn);
    tu_assert_same_bits("no grad", y0, tensor_detach(y));
    ct_set_grad_enabled(prev);
    ck_assert_ptr_null(tensor_linear_gelu(x, w, b, (CtGeluApprox)5));
    tu_assert_error(CT_ERR_INVALID, "linear_gelu: unknown approximation 5");
    ck_assert_ptr_null(tensor_linear_gelu(NULL, w, b, (CtGeluApprox)5));
    ck_assert_int_eq(ct_last_status(), CT_OK); /* NULL input: keeps the first error */
    Tensor *w_bad = tensor_zeros(2, (const int64_t[]){8, 5}, CT_F32, ct_cpu());
    ck_assert_ptr_null(tensor_linear_gelu(x, w_bad, b, CT_GELU_ERF));
    tu_assert_error(CT_ERR_SHAPE, "linear_gelu: input f32[3, 4] cpu has 4 features");
    ct_scope_close(s);
    tensor_free(x);
    tensor_free(w);
    tensor_free(b);
    TU_MEM_END;
}
END_TEST

/* Batch norm's arguments besides x, weight and bias (in[0..2]); each run
 * gets its own copy of the running statistics. */
typedef struct BnArgs {
    Tensor *rm, *rv;
    bool training;
} BnArgs;

static Tensor *bnorm(Tensor **in, const void *ctx, bool fused)
{
    const BnArgs *a = ctx;
    Tensor *rm = a->rm ? tensor_clone(a->rm) : NULL,
           *rv = a->rv ? tensor_clone(a->rv) : NULL;
    return fused ? tensor_batch_norm_relu(in[0], rm, rv, in[1], in[2], a->training, 0.1,
                                          1e-5)
                 : tensor_relu(tensor_batch_norm(in[0], rm, rv, in[1], in[2], a->training,
                                                 0.1, 1e-5));
}

static void check_bnorm(const char *name, int nd, const int64_t *xs, CtDType dt,
                        bool training, bool stats)
{
    const int64_t c = xs[1];
    Tensor *in[3] = {leaf(nd, xs, 51, dt), leaf(1, &c, 52, dt), leaf(1, &c, 53, dt)};
    BnArgs a = {stats ? tu_rand64(1, &c, -0.5, 0.5, 54, false) : NULL,
                stats ? tu_rand64(1, &c, 0.5, 2, 55, false) : NULL, training};
    CtScope *s = ct_scope_open();
    BnArgs at = {stats ? tensor_cast(a.rm, dt) : NULL,
                 stats ? tensor_cast(a.rv, dt) : NULL, training};
    check_fused(name, bnorm, &at, in, CT_F32);
    ct_scope_close(s);
    tensor_free(a.rm);
    tensor_free(a.rv);
    for (int i = 0; i < 3; i++) tensor_free(in[i]);
}

START_TEST(test_batch_norm_relu_fused_bits)
{
    TU_MEM_BEGIN;
    const int64_t x4[] = {4, 8, 10, 10}, x2[] = {16, 12};
    check_bnorm("training", 4, x4, CT_F32, true, true);
    check_bnorm("batch statistics only", 4, x4, CT_F32, false, false);
    check_bnorm("eval", 4, x4, CT_F32, false, true);
    check_bnorm("2-d", 2, x2, CT_F32, true, true);
    check_bnorm("f64", 4, x4, CT_F64, true, true);
    TU_MEM_END;
}
END_TEST

static Tensor *add(Tensor **in, const void *ctx, bool fused)
{
    (void)ctx;
    return fused ? tensor_add_relu(in[0], in[1]) : tensor_relu(tensor_add(in[0], in[1]));
}

/* tensor_add_relu: same shapes in each float dtype, and a broadcast
 * operand (its gradient summed, which the CPU does in f32 and f64). */
START_TEST(test_add_relu_fused_bits)
{
    TU_MEM_BEGIN;
    const int64_t xs[] = {3, 4, 5, 6}, bs[] = {1, 4, 1, 6};
    const CtDType dts[] = {CT_F32, CT_F64, CT_BF16, CT_F16};
    for (int d = 0; d < 4; d++)
        for (int bc = 0; bc < (d < 2 ? 2 : 1); bc++) {
            Tensor *in[3] = {leaf(4, xs, 61, dts[d]), leaf(4, bc ? bs : xs, 62, dts[d]),
                             NULL};
            char name[48];
            snprintf(name, sizeof name, "add_relu, %s%s", ct_dtype_name(dts[d]),
                     bc ? ", broadcast" : "");
            check_fused(name, add, NULL, in, CT_F32);
            tensor_free(in[0]);
            tensor_free(in[1]);
        }
    TU_MEM_END;
}
END_TEST

/* Without grad mode the fused ops record nothing and give the same values;
 * bad input is refused by name. */
START_TEST(test_relu_fused_no_grad_and_errors)
{
    TU_MEM_BEGIN;
    Tensor *x = leaf(2, (const int64_t[]){4, 6}, 41, CT_F32);
    Tensor *w = leaf(2, (const int64_t[]){5, 6}, 42, CT_F32);
    CtScope *s = ct_scope_open();
    bool prev = ct_set_grad_enabled(false);
    Tensor *y = tensor_linear_relu(x, w, NULL);
    ck_assert_ptr_null(y->grad_fn);
    tu_assert_same_bits("no grad", y, tensor_relu(tensor_linear(x, w, NULL)));
    Tensor *w_bad = tensor_zeros(2, (const int64_t[]){5, 7}, CT_F32, ct_cpu());
    ck_assert_ptr_null(tensor_linear_relu(x, w_bad, NULL));
    tu_assert_error(CT_ERR_SHAPE, "linear_relu: input f32[4, 6] cpu has 6 features");
    ct_set_grad_enabled(prev);
    ct_scope_close(s);
    tensor_free(x);
    tensor_free(w);
    TU_MEM_END;
}
END_TEST

Suite *relu_fused_suite(void)
{
    Suite *s = suite_create("tensor_relu_fused");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_conv_relu_fused_bits);
    tcase_add_test(tc, test_conv_relu_fused_nan);
    tcase_add_test(tc, test_linear_relu_fused_bits);
    tcase_add_test(tc, test_linear_gelu_fused_bits);
    tcase_add_test(tc, test_linear_gelu_keeps_pre_activation);
    tcase_add_test(tc, test_batch_norm_relu_fused_bits);
    tcase_add_test(tc, test_add_relu_fused_bits);
    tcase_add_test(tc, test_relu_fused_no_grad_and_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(relu_fused_suite());
}
