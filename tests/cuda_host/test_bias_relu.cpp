/* cuda_host_bias_relu: the ReLU-fused convolution's bias + ReLU body
 * (tensor/cuda/bias_relu_body.h) against the CPU backend's tensor_relu of
 * tensor_add(y, b) (tensor_relu alone without bias), bit for bit, for f32,
 * f64, bf16 and f16: values with ties at zero, -0, NaN and inf, planes from
 * one element to past a block, and an empty batch; NCHW and channels
 * last. */
#include "harness.h"
#include "tensor/cuda/bias_relu_body.h"

typedef struct Case {
    int64_t n, o, hw;
} Case;

static const Case cases[] = {{2, 3, 5}, {1, 1, 1}, {3, 4, 300}, {0, 2, 4}, {2, 70, 9}};

/* Buffer of n values of dt: multiples of 1/4 around zero (exact in every
 * dtype), with -0, NaN and inf among them. */
static Tensor *values(int64_t n, CtDType dt, int seed)
{
    Tensor *d = ch_buffer(n > 0 ? n : 1, CT_F64);
    double *v = (double *)ct_ptr(d);
    for (int64_t i = 0; i < n; i++) v[i] = (double)((i * 29 + seed * 7) % 11 - 5) / 4;
    if (n > 4) v[1] = -0.0, v[2] = NAN, v[3] = INFINITY, v[4] = -INFINITY;
    Tensor *t = ch_buffer(n > 0 ? n : 1, dt);
    ck_assert_int_eq(tensor_copy_(t, d), CT_OK);
    tensor_free(d);
    return t;
}

template <int DT> static void check_case(const Case &c, CtDType dt, bool bias)
{
    typedef typename CtHdType<DT>::S S;
    const int64_t n = c.n * c.o * c.hw;
    Tensor *y = values(n, dt, 1), *b = values(c.o, dt, 2);
    /* the reference from the CPU backend's ops */
    Tensor *want = ch_clone(y);
    CtScope *s = ct_scope_open();
    if (n > 0) {
        const int64_t ys[4] = {c.n, c.o, 1, c.hw}, bs[4] = {1, c.o, 1, 1};
        Tensor *y4 = tensor_reshape(y, 4, ys), *b4 = tensor_reshape(b, 4, bs);
        Tensor *r = tensor_relu(bias ? tensor_add(y4, b4) : y4);
        ck_assert_ptr_nonnull(r);
        memcpy(ct_ptr(want), ct_ptr(r), (size_t)n * sizeof(S));
    }
    ct_scope_close(s);
    ChShape shapes[2];
    int ns = ch_shapes(n, shapes);
    for (int k = 0; k < ns; k++) {
        Tensor *got = ch_clone(y);
        ch_launch(shapes[k].grid, shapes[k].block, [&](CtThread t) {
            ct_bias_relu_thread<DT>(t, (S *)ct_ptr(got),
                                    bias ? (const S *)ct_ptr(b) : NULL, c.o, c.hw, n);
        });
        ch_assert_same_bytes(want, got, bias ? "relu(y + b)" : "relu(y)");
        tensor_free(got);
        if (n == 0) continue;
        /* channels last: the channel is i % o, the body's with hw = 1 */
        Tensor *yl = ch_permuted(y, c.n, c.o, c.hw, false);
        ch_launch(shapes[k].grid, shapes[k].block, [&](CtThread t) {
            ct_bias_relu_thread<DT>(t, (S *)ct_ptr(yl),
                                    bias ? (const S *)ct_ptr(b) : NULL, c.o, 1, n);
        });
        Tensor *back = ch_permuted(yl, c.n, c.o, c.hw, true);
        ch_assert_same_bytes(want, back, bias ? "relu(y + b), nhwc" : "relu(y), nhwc");
        Tensor *tmp[] = {yl, back};
        for (Tensor *t : tmp) tensor_free(t);
    }
    tensor_free(want);
    tensor_free(y);
    tensor_free(b);
}

START_TEST(test_bias_relu_matches_cpu)
{
    int checked = 0;
    for (const Case &c : cases)
        for (int bias = 0; bias < 2; bias++) {
            check_case<CT_F32>(c, CT_F32, bias);
            check_case<CT_F64>(c, CT_F64, bias);
            check_case<CT_BF16>(c, CT_BF16, bias);
            check_case<CT_F16>(c, CT_F16, bias);
            checked += 4;
        }
    ck_assert_int_eq(checked, 40);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_bias_relu");
    TCase *tc = tcase_create("bias_relu");
    tcase_add_test(tc, test_bias_relu_matches_cpu);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
