/* cuda_host_packed: the packed thread bodies (16-byte loads and stores over
 * contiguous operands: ct_unary_packed_thread, ct_unary_bwd_packed_thread,
 * ct_arith_packed_thread) against the strided bodies on the same operands,
 * bit for bit, for f32, f64, bf16, f16 and i32, lengths around every pack
 * size (partial last items, empty), and an output aliasing an input. */
#include "tensor/cuda/elementwise_body.h"
#include "tensor/cuda/unary_body.h"
#include "harness.h"

static const int64_t lengths[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1027};

/* A contiguous index over n elements of nops operands. */
static CtCudaIndex contiguous(int64_t n, int nops)
{
    CtCudaIndex ix = {};
    ix.ndim = 1;
    ix.shape[0] = n ? n : 1;
    for (int k = 0; k < nops; k++) ix.stride[k][0] = 1;
    return ix;
}

/* n values of dt in [-3, 3), with ties and zeros. */
static Tensor *values(int64_t n, CtDType dt, unsigned seed)
{
    int64_t m = n ? n : 1;
    Tensor *d = tu_rand64(1, &m, -3, 3, seed, false);
    double *v = (double *)ct_ptr(d);
    for (int64_t i = 0; i < m; i++) v[i] = (double)(int64_t)(v[i] * 8) / 4;
    Tensor *t = ch_buffer(m, dt);
    ck_assert_int_eq(tensor_copy_(t, d), CT_OK);
    tensor_free(d);
    return t;
}

template <int DT, int K> static void check_unary(int64_t n)
{
    typedef typename CtHdType<DT>::C C;
    int64_t m = n ? n : 1;
    Tensor *x = values(n, (CtDType)DT, 1 + (unsigned)n), *g = values(n, (CtDType)DT, 2);
    Tensor *want = ch_buffer(m, (CtDType)DT), *got = ch_clone(want);
    C a = (C)0.25, b = (C)2;
    CtCudaIndex ix2 = contiguous(n, 2), ix3 = contiguous(n, 3);
    ch_launch(3, 32, [&](CtThread t) {
        ct_unary_thread<DT, K>(t, ct_ptr(want), ct_ptr(x), a, b, ix2, n);
    });
    ch_launch(2, 32, [&](CtThread t) {
        ct_unary_packed_thread<DT, K>(t, ct_ptr(got), ct_ptr(x), a, b, n);
    });
    ch_assert_same_bytes(want, got, "unary packed");
    if constexpr (DT != CT_I32) {
        ch_launch(3, 32, [&](CtThread t) {
            ct_unary_bwd_thread<DT, K>(t, ct_ptr(want), ct_ptr(x), ct_ptr(g), a, b, ix3,
                                       n);
        });
        ch_launch(2, 32, [&](CtThread t) {
            ct_unary_bwd_packed_thread<DT, K>(t, ct_ptr(got), ct_ptr(x), ct_ptr(g), a, b,
                                              n);
        });
        ch_assert_same_bytes(want, got, "unary backward packed");
    }
    Tensor *all[] = {x, g, want, got};
    for (Tensor *t : all) tensor_free(t);
}

template <int DT, int K> static void check_arith(int64_t n)
{
    typedef typename CtHdType<DT>::S S;
    int64_t m = n ? n : 1;
    Tensor *a = values(n, (CtDType)DT, 3), *b = values(n, (CtDType)DT, 4);
    Tensor *want = ch_buffer(m, (CtDType)DT), *got = ch_clone(want);
    CtCudaIndex ix = contiguous(n, 3);
    ch_launch(3, 32, [&](CtThread t) {
        ct_arith_thread<DT, K>(t, (S *)ct_ptr(want), (const S *)ct_ptr(a),
                               (const S *)ct_ptr(b), ix, n);
    });
    ch_launch(2, 32, [&](CtThread t) {
        ct_arith_packed_thread<DT, K>(t, (S *)ct_ptr(got), (const S *)ct_ptr(a),
                                      (const S *)ct_ptr(b), n);
    });
    ch_assert_same_bytes(want, got, "arith packed");
    /* out aliasing a (an in-place add) */
    Tensor *a2 = ch_clone(a);
    ch_launch(2, 32, [&](CtThread t) {
        ct_arith_packed_thread<DT, K>(t, (S *)ct_ptr(a2), (const S *)ct_ptr(a2),
                                      (const S *)ct_ptr(b), n);
    });
    if (n) ck_assert(memcmp(ct_ptr(a2), ct_ptr(want), (size_t)n * sizeof(S)) == 0);
    Tensor *all[] = {a, b, want, got, a2};
    for (Tensor *t : all) tensor_free(t);
}

template <int DT> static void check_dtype(void)
{
    for (int64_t n : lengths) {
        check_unary<DT, CT_UN_RELU>(n);
        check_unary<DT, CT_UN_ADD_SCALAR>(n);
        if constexpr (DT != CT_I32) {
            check_unary<DT, CT_UN_EXP>(n);
            check_arith<DT, CT_BIN_ADD>(n);
            check_arith<DT, CT_BIN_MUL>(n);
            check_arith<DT, CT_BIN_MAX>(n);
            check_arith<DT, CT_BIN_ADD_RELU>(n);
        }
    }
}

START_TEST(test_packed_bodies_match_strided)
{
    check_dtype<CT_F32>();
    check_dtype<CT_F64>();
    check_dtype<CT_BF16>();
    check_dtype<CT_F16>();
    check_dtype<CT_I32>();
}
END_TEST

/* Only contiguous, 16-byte aligned runs take the packed bodies. */
START_TEST(test_packed_ok)
{
    alignas(16) float buf[8];
    const void *ok[2] = {buf, buf + 4}, *off[2] = {buf, buf + 1};
    CtCudaIndex ix = contiguous(8, 2);
    ck_assert(ct_cuda_packed_ok(ix, 2, ok));
    ck_assert(!ct_cuda_packed_ok(ix, 2, off));
    ix.stride[1][0] = 0; /* a broadcast operand */
    ck_assert(!ct_cuda_packed_ok(ix, 2, ok));
    ix = contiguous(8, 2);
    ix.ndim = 2;
    ck_assert(!ct_cuda_packed_ok(ix, 2, ok));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_packed");
    TCase *tc = tcase_create("packed");
    tcase_add_test(tc, test_packed_bodies_match_strided);
    tcase_add_test(tc, test_packed_ok);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
