/* cuda_host_unary: the UNARY and UNARY_BWD thread bodies
 * (tensor/cuda/unary_body.h) against the CPU backend's kernels, bit for bit
 * (a NaN matches any NaN, values.h):
 * every kind (POW_SCALAR with each special exponent and a generic one) on
 * f32, f64, bf16 and f16, the integer kinds on i64 and i32, inputs in every
 * layout (broadcast included), contiguous and strided outputs, and inputs
 * holding NaN, infinities and zero. */
#include "tensor/cuda/unary_body.h"
#include "layouts.h"
#include "values.h"

typedef struct Case {
    CtUnaryKind kind;
    double a, b;
} Case;

static const Case float_cases[] = {
    {CT_UN_NEG, 0, 0},           {CT_UN_EXP, 0, 0},           {CT_UN_LOG, 0, 0},
    {CT_UN_SQRT, 0, 0},          {CT_UN_ABS, 0, 0},           {CT_UN_CLAMP, -1.25, 1.5},
    {CT_UN_CLAMP, 1, -1},        {CT_UN_RELU, 0, 0},          {CT_UN_LEAKY_RELU, 0.1, 0},
    {CT_UN_GELU_ERF, 0, 0},      {CT_UN_GELU_TANH, 0, 0},     {CT_UN_SILU, 0, 0},
    {CT_UN_SIGMOID, 0, 0},       {CT_UN_TANH, 0, 0},          {CT_UN_ADD_SCALAR, 0.7, 0},
    {CT_UN_MUL_SCALAR, -1.3, 0}, {CT_UN_RSUB_SCALAR, 2.5, 0}, {CT_UN_POW_SCALAR, 2, 0},
    {CT_UN_POW_SCALAR, 1, 0},    {CT_UN_POW_SCALAR, -1, 0},   {CT_UN_POW_SCALAR, 0, 0},
    {CT_UN_POW_SCALAR, 0.5, 0},  {CT_UN_POW_SCALAR, 3, 0},    {CT_UN_RDIV_SCALAR, 1.7, 0},
    {CT_UN_DIV_SCALAR, 0.3, 0},
};
static const Case int_cases[] = {
    {CT_UN_NEG, 0, 0},           {CT_UN_ABS, 0, 0},         {CT_UN_CLAMP, -10, 20},
    {CT_UN_CLAMP, -INFINITY, 5}, {CT_UN_RELU, 0, 0},        {CT_UN_ADD_SCALAR, 7, 0},
    {CT_UN_ADD_SCALAR, 1e30, 0}, {CT_UN_MUL_SCALAR, -3, 0}, {CT_UN_RSUB_SCALAR, 4, 0},
};
#define NFLOAT ((int)(sizeof float_cases / sizeof *float_cases))
#define NINT   ((int)(sizeof int_cases / sizeof *int_cases))

/* The body of effective kind `kind` over one launch shape. */
template <int DT>
static void run_fwd(ChShape sh, int kind, void *out, const void *in, double a, double b,
                    const CtCudaIndex &ix, int64_t n)
{
    typename CtHdType<DT>::C ca = ct_unary_param<DT>(a), cb = ct_unary_param<DT>(b);
    ch_launch(sh.grid, sh.block, [&](CtThread t) {
#define CASE(K)                                                                          \
    case K:                                                                              \
        ct_unary_thread<DT, K>(t, out, in, ca, cb, ix, n);                               \
        break;
        if constexpr (DT == CT_I64 || DT == CT_I32) {
            switch (kind) {
                CT_UNARY_INT_KINDS(CASE) default : ck_abort();
            }
        } else {
            switch (kind) {
                CT_UNARY_FWD_KINDS(CASE) default : ck_abort();
            }
        }
#undef CASE
    });
}

/* The backward body of `kind` (floating DT only: there is no integer
 * backward). */
template <int DT>
static void run_bwd(ChShape sh, int kind, void *out, const void *x, const void *g,
                    double a, double b, const CtCudaIndex &ix, int64_t n)
{
    ck_assert(ct_dtype_is_float((CtDType)DT));
    if constexpr (DT != CT_I64 && DT != CT_I32) {
        typename CtHdType<DT>::C ca = ct_unary_param<DT>(a), cb = ct_unary_param<DT>(b);
        ch_launch(sh.grid, sh.block, [&](CtThread t) {
#define CASE(K)                                                                          \
    case K:                                                                              \
        ct_unary_bwd_thread<DT, K>(t, out, x, g, ca, cb, ix, n);                         \
        break;
            switch (kind) {
                CT_UNARY_BWD_KINDS(CASE) default : ck_abort();
            }
#undef CASE
        });
    }
}

/* Random values in [-3, 3) (integers in [-50, 50) for integer dtypes), with
 * NaN, ±inf, 0 and -0 (the dtype's extremes for integers) in front. */
static Tensor *input_buffer(int64_t n, CtDType dt, unsigned seed)
{
    bool is_int = !ct_dtype_is_float(dt);
    Tensor *r = tu_rand64(1, &n, is_int ? -50 : -3, is_int ? 50 : 3, seed, false);
    double *v = (double *)ct_ptr(r);
    if (is_int) {
        for (int64_t i = 0; i < n; i++) v[i] = floor(v[i]);
        v[0] = dt == CT_I64 ? -9223372036854775808.0 : -2147483648.0;
        v[1] = dt == CT_I64 ? 9223372036854774784.0 : 2147483647.0;
    } else {
        const double special[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0};
        for (int i = 0; i < 5; i++) v[i] = special[i];
    }
    Tensor *buf = ch_buffer(n, dt);
    ck_assert_int_eq(tensor_copy_(buf, r), CT_OK);
    tensor_free(r);
    return buf;
}

/* The CPU backend's kernel on CPU tensors. */
static void cpu_unary(bool bwd, const Case &k, Tensor *out, const Tensor *x,
                      const Tensor *g)
{
    CtUnaryParams p = {k.kind, k.a, k.b};
    CtOpCall call = {};
    call.op = bwd ? CT_OP_UNARY_BWD : CT_OP_UNARY;
    call.out[0] = out;
    call.in[0] = x;
    call.in[1] = g;
    call.params = &p;
    ck_assert_int_eq(ct_dispatch(&call), CT_OK);
}

/* One dtype: every case, the input (x) in every layout and, for the
 * backward, the gradient in the next one; a strided output for contiguous
 * and broadcast inputs, a contiguous one for the others. */
template <int DT> static int check_dtype(bool bwd, const Case *cases, int ncases)
{
    const CtDType dt = (CtDType)DT;
    int checked = 0;
    for (int c = 0; c < CH_NCASES; c++) {
        const ChShapeCase &sc = ch_cases[c];
        int64_t nb = ch_buffer_size(sc);
        Tensor *xbuf = input_buffer(nb, dt, 11 + c), *gbuf = input_buffer(nb, dt, 31 + c);
        for (int k = 0; k < ncases; k++) {
            int kind = ct_unary_pow_kind(bwd, cases[k].kind, cases[k].a);
            for (int lx = 0; lx < CH_LAYOUTS; lx++) {
                CtScope *scope = ct_scope_open();
                int lg = (lx + 1) % CH_LAYOUTS;
                int lo = lx == CH_CONTIGUOUS || lx == CH_BROADCAST ? CH_STRIDED
                                                                   : CH_CONTIGUOUS;
                Tensor *x = ch_view(xbuf, lx, sc), *g = ch_view(gbuf, lg, sc);
                Tensor *want = ch_buffer(nb, dt), *got = ch_clone(want);
                Tensor *ow = ch_view(want, lo, sc), *og = ch_view(got, lo, sc);
                if (x && (g || !bwd)) {
                    cpu_unary(bwd, cases[k], ow, x, g);
                    CtCudaIndex ix;
                    const Tensor *ops[3] = {og, x, g};
                    int64_t n = ct_cuda_index_init(&ix, tensor_ndim(og), tensor_shape(og),
                                                   bwd ? 3 : 2, ops);
                    ChShape shapes[2];
                    int ns = ch_shapes(n, shapes);
                    for (int s = 0; s < ns; s++) {
                        if (bwd)
                            run_bwd<DT>(shapes[s], kind, ct_ptr(og), ct_ptr(x), ct_ptr(g),
                                        cases[k].a, cases[k].b, ix, n);
                        else
                            run_fwd<DT>(shapes[s], kind, ct_ptr(og), ct_ptr(x),
                                        cases[k].a, cases[k].b, ix, n);
                        char what[128];
                        snprintf(what, sizeof what,
                                 "%s %s kind %d a=%g, %s -> %s, case %d, shape %d",
                                 bwd ? "backward" : "forward", ct_dtype_name(dt),
                                 (int)cases[k].kind, cases[k].a, ch_layout_names[lx],
                                 ch_layout_names[lo], c, s);
                        ch_assert_same_values(want, got, what);
                        checked++;
                    }
                }
                tensor_free(want);
                tensor_free(got);
                ct_scope_close(scope);
            }
        }
        tensor_free(xbuf);
        tensor_free(gbuf);
    }
    return checked;
}

/* Every floating dtype, forward or backward. */
static int check_floats(bool bwd)
{
    return check_dtype<CT_F32>(bwd, float_cases, NFLOAT) +
           check_dtype<CT_F64>(bwd, float_cases, NFLOAT) +
           check_dtype<CT_BF16>(bwd, float_cases, NFLOAT) +
           check_dtype<CT_F16>(bwd, float_cases, NFLOAT);
}

START_TEST(test_unary_float_every_kind_and_layout)
{
    ck_assert_int_ge(check_floats(false), 4000);
}
END_TEST

START_TEST(test_unary_int_kinds)
{
    int checked = check_dtype<CT_I64>(false, int_cases, NINT);
    checked += check_dtype<CT_I32>(false, int_cases, NINT);
    ck_assert_int_ge(checked, 720);
}
END_TEST

START_TEST(test_unary_bwd_every_kind_and_layout)
{
    ck_assert_int_ge(check_floats(true), 3200);
}
END_TEST

/* The special exponents map to their own kinds exactly where the CPU
 * special-cases them; integer params saturate as on the CPU. */
START_TEST(test_pow_kinds_and_params)
{
    ck_assert_int_eq(ct_unary_pow_kind(false, CT_UN_POW_SCALAR, 2.0), CT_UNK_POW_2);
    ck_assert_int_eq(ct_unary_pow_kind(false, CT_UN_POW_SCALAR, -1.0), CT_UNK_POW_M1);
    ck_assert_int_eq(ct_unary_pow_kind(false, CT_UN_POW_SCALAR, 0.0), CT_UN_POW_SCALAR);
    ck_assert_int_eq(ct_unary_pow_kind(true, CT_UN_POW_SCALAR, 0.0), CT_UNK_POW_0);
    ck_assert_int_eq(ct_unary_pow_kind(true, CT_UN_POW_SCALAR, -1.0), CT_UN_POW_SCALAR);
    ck_assert_int_eq(ct_unary_pow_kind(true, CT_UN_EXP, 2.0), CT_UN_EXP);
    ck_assert_int_eq(ct_unary_param<CT_I32>(1e30), INT32_MAX);
    ck_assert_int_eq(ct_unary_param<CT_I32>(-INFINITY), INT32_MIN);
    ck_assert_int_eq(ct_unary_param<CT_I64>(NAN), 0);
    ck_assert(isnan((ct_unary_float<float, CT_UN_CLAMP>(NAN, -1.0f, 1.0f))));
    ck_assert((ct_unary_float<float, CT_UN_CLAMP>(0.0f, 1.0f, -1.0f) == -1.0f));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_unary");
    TCase *tc = tcase_create("unary");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_unary_float_every_kind_and_layout);
    tcase_add_test(tc, test_unary_int_kinds);
    tcase_add_test(tc, test_unary_bwd_every_kind_and_layout);
    tcase_add_test(tc, test_pow_kinds_and_params);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
