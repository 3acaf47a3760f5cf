/* cuda_host_elementwise: the BINARY thread bodies
 * (tensor/cuda/elementwise_body.h) against the CPU's tensor_add ... tensor_ge,
 * for every dtype and kind the CUDA kernel supports (f32, f64, bf16, f16
 * every kind; i64 and i32 all but division; u8 and bool the comparisons),
 * inputs in every layout (broadcast included), contiguous and strided
 * outputs; integers wrapping around at their limits. */
#include "tensor/cuda/elementwise_body.h"
#include "layouts.h"

typedef Tensor *(*CpuOp)(Tensor *, Tensor *);
static const CpuOp cpu_ops[] = {
    tensor_add,     tensor_sub,     tensor_mul,      tensor_div, tensor_pow,
    tensor_maximum, tensor_minimum, tensor_add_relu, tensor_eq,  tensor_ne,
    tensor_lt,      tensor_le,      tensor_gt,       tensor_ge,
};
#define NKINDS ((int)(sizeof cpu_ops / sizeof *cpu_ops))

template <int DT, int K>
static void body(CtThread t, Tensor *out, const Tensor *a, const Tensor *b,
                 const CtCudaIndex &ix, int64_t n)
{
    typedef typename CtHdType<DT>::S T;
    if constexpr (K >= CT_BIN_EQ)
        ct_compare_thread<DT, K>(t, (uint8_t *)ct_ptr(out), (const T *)ct_ptr(a),
                                 (const T *)ct_ptr(b), ix, n);
    else
        ct_arith_thread<DT, K>(t, (T *)ct_ptr(out), (const T *)ct_ptr(a),
                               (const T *)ct_ptr(b), ix, n);
}

typedef void (*Body)(CtThread, Tensor *, const Tensor *, const Tensor *,
                     const CtCudaIndex &, int64_t);
#define ROW(T)                                                                           \
    {                                                                                    \
        body<T, CT_BIN_ADD>, body<T, CT_BIN_SUB>, body<T, CT_BIN_MUL>,                   \
            body<T, CT_BIN_DIV>, body<T, CT_BIN_POW>, body<T, CT_BIN_MAX>,               \
            body<T, CT_BIN_MIN>, body<T, CT_BIN_ADD_RELU>, body<T, CT_BIN_EQ>,           \
            body<T, CT_BIN_NE>, body<T, CT_BIN_LT>, body<T, CT_BIN_LE>,                  \
            body<T, CT_BIN_GT>, body<T, CT_BIN_GE>                                       \
    }
#define ROW_INT(T)                                                                       \
    {                                                                                    \
        body<T, CT_BIN_ADD>, body<T, CT_BIN_SUB>, body<T, CT_BIN_MUL>, NULL,             \
            body<T, CT_BIN_POW>, body<T, CT_BIN_MAX>, body<T, CT_BIN_MIN>,               \
            body<T, CT_BIN_ADD_RELU>, body<T, CT_BIN_EQ>, body<T, CT_BIN_NE>,            \
            body<T, CT_BIN_LT>, body<T, CT_BIN_LE>, body<T, CT_BIN_GT>,                  \
            body<T, CT_BIN_GE>                                                           \
    }
#define ROW_CMP(T)                                                                       \
    {                                                                                    \
        NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, body<T, CT_BIN_EQ>,              \
            body<T, CT_BIN_NE>, body<T, CT_BIN_LT>, body<T, CT_BIN_LE>,                  \
            body<T, CT_BIN_GT>, body<T, CT_BIN_GE>                                       \
    }
#define NDTYPES 8
static const CtDType dtypes[NDTYPES] = {CT_F32, CT_F64, CT_BF16, CT_F16,
                                        CT_I64, CT_I32, CT_U8,   CT_BOOL};
static const Body bodies[NDTYPES][NKINDS] = {
    ROW(CT_F32),     ROW(CT_F64),     ROW(CT_BF16),   ROW(CT_F16),
    ROW_INT(CT_I64), ROW_INT(CT_I32), ROW_CMP(CT_U8), ROW_CMP(CT_BOOL)};
#undef ROW
#undef ROW_INT
#undef ROW_CMP

/* Rounds the buffer's values to multiples of 1/4 so comparisons see equal
 * pairs too; pow needs a positive base: the first input is made so. u8 and
 * bool take 0..3 and 0..1 (conversions of the values). */
static Tensor *input_buffer(int64_t n, CtDType dt, unsigned seed, bool positive)
{
    bool unsig = dt == CT_U8 || dt == CT_BOOL;
    Tensor *r = tu_rand64(1, &n, positive || unsig ? 0.25 : -3, 3, seed, false);
    Tensor *buf = ch_buffer(n, dt);
    double *v = (double *)ct_ptr(r);
    for (int64_t i = 0; i < n; i++) v[i] = (double)(int64_t)(v[i] * 4) / 4;
    ck_assert_int_eq(tensor_copy_(buf, r), CT_OK);
    tensor_free(r);
    return buf;
}

START_TEST(test_binary_every_kind_and_layout)
{
    int checked = 0;
    for (int c = 0; c < CH_NCASES; c++) {
        const ChShapeCase &sc = ch_cases[c];
        int64_t nb = ch_buffer_size(sc);
        for (int di = 0; di < NDTYPES; di++) {
            CtDType dt = dtypes[di];
            Tensor *abuf = input_buffer(nb, dt, 3 + c, true);
            Tensor *bbuf = input_buffer(nb, dt, 5 + c, false);
            for (int kind = 0; kind < NKINDS; kind++) {
                if (!bodies[di][kind]) continue;
                CtDType odt = kind >= CT_BIN_EQ ? CT_BOOL : dt;
                for (int la = 0; la < CH_LAYOUTS; la++) {
                    for (int lb = 0; lb < CH_LAYOUTS; lb++) {
                        for (int lo = 0; lo < CH_BROADCAST; lo += CH_STRIDED) {
                            CtScope *scope = ct_scope_open();
                            Tensor *a = ch_view(abuf, la, sc), *b = ch_view(bbuf, lb, sc);
                            Tensor *want = ch_buffer(nb, odt);
                            Tensor *got = ch_clone(want);
                            Tensor *ow = ch_view(want, lo, sc),
                                   *og = ch_view(got, lo, sc);
                            ChShape shapes[2];
                            int ns = ch_shapes(ch_numel(sc), shapes);
                            for (int k = 0; a && b && k < ns; k++) {
                                ck_assert_int_eq(tensor_copy_(ow, cpu_ops[kind](a, b)),
                                                 CT_OK);
                                CtCudaIndex ix;
                                const Tensor *ops[3] = {og, a, b};
                                int64_t n = ct_cuda_index_init(&ix, tensor_ndim(og),
                                                               tensor_shape(og), 3, ops);
                                ch_launch(shapes[k].grid, shapes[k].block,
                                          [&](CtThread t) {
                                              bodies[di][kind](t, og, a, b, ix, n);
                                          });
                                char what[96];
                                snprintf(what, sizeof what,
                                         "%s kind %d, %s (op) %s -> %s, case %d",
                                         ct_dtype_name(dt), kind, ch_layout_names[la],
                                         ch_layout_names[lb], ch_layout_names[lo], c);
                                ch_assert_same_bytes(want, got, what);
                                checked++;
                            }
                            tensor_free(want);
                            tensor_free(got);
                            ct_scope_close(scope);
                        }
                    }
                }
            }
            tensor_free(abuf);
            tensor_free(bbuf);
        }
    }
    ck_assert_int_gt(checked, 8000);
}
END_TEST

/* max/min keep a NaN of the first operand, as the CPU does. */
START_TEST(test_max_min_nan)
{
    float nan = NAN;
    ck_assert((isnan(ct_arith<float, CT_BIN_MAX>(nan, 1.0f))));
    ck_assert((isnan(ct_arith<float, CT_BIN_MIN>(nan, 1.0f))));
    ck_assert((ct_arith<double, CT_BIN_MAX>(2.0, 1.0) == 2.0));
    ck_assert((ct_arith<double, CT_BIN_MIN>(2.0, 1.0) == 1.0));
    ck_assert((!ct_compare<float, CT_BIN_EQ>(nan, nan)));
    ck_assert((ct_compare<float, CT_BIN_NE>(nan, nan)));
}
END_TEST

/* i64 and i32 at their limits: add, sub, mul and pow wrap around, as the
 * CPU's, a negative power is 0; ADD_RELU clamps the wrapped sum. */
static void check_int_limits(CtDType dt, int row)
{
    const double lo = dt == CT_I64 ? -9223372036854775808.0 : -2147483648.0;
    const double v[8] = {lo, -lo - 1, -1, 0, 1, 3, 63, -2},
                 w[8] = {-2, 63, 3, 1, 0, -1, -lo - 1, lo};
    Tensor *va = tu_tensor(CT_F64, 1, (const int64_t[]){8}, v); /* caller-owned */
    Tensor *vb = tu_tensor(CT_F64, 1, (const int64_t[]){8}, w);
    CtScope *s = ct_scope_open();
    Tensor *a = tensor_cast(va, dt), *b = tensor_cast(vb, dt);
    const int kinds[] = {CT_BIN_ADD, CT_BIN_SUB, CT_BIN_MUL, CT_BIN_POW, CT_BIN_ADD_RELU};
    for (int k : kinds) {
        Tensor *want = cpu_ops[k](a, b), *got = tensor_empty_like(want);
        ck_assert_ptr_nonnull(got);
        CtCudaIndex ix;
        const Tensor *ops[3] = {got, a, b};
        int64_t n = ct_cuda_index_init(&ix, 1, tensor_shape(got), 3, ops);
        ch_launch(1, 32, [&](CtThread t) { bodies[row][k](t, got, a, b, ix, n); });
        char what[48];
        snprintf(what, sizeof what, "%s kind %d at the limits", ct_dtype_name(dt), k);
        ch_assert_same_bytes(want, got, what);
    }
    ct_scope_close(s);
    tensor_free(va);
    tensor_free(vb);
}

START_TEST(test_int_limits)
{
    check_int_limits(CT_I64, 4);
    check_int_limits(CT_I32, 5);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_elementwise");
    TCase *tc = tcase_create("binary");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_binary_every_kind_and_layout);
    tcase_add_test(tc, test_max_min_nan);
    tcase_add_test(tc, test_int_limits);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
