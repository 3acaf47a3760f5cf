/* cuda_host_copy: the FILL and COPY thread bodies (tensor/cuda/copy_body.h)
 * against tensor_fill_ / tensor_copy_ on the CPU, for every dtype (every
 * dtype pair for copies), every layout of output and input, every shape. */
#include "tensor/cuda/copy_body.h"
#include "layouts.h"

typedef void (*ConvertBody)(CtThread, void *, const void *, const CtCudaIndex &, int64_t);
#define ROW(S)                                                                           \
    {                                                                                    \
        ct_convert_thread<S, CT_F32>, ct_convert_thread<S, CT_F64>,                      \
            ct_convert_thread<S, CT_BF16>, ct_convert_thread<S, CT_F16>,                 \
            ct_convert_thread<S, CT_I64>, ct_convert_thread<S, CT_I32>,                  \
            ct_convert_thread<S, CT_U8>, ct_convert_thread<S, CT_BOOL>                   \
    }
static const ConvertBody convert_bodies[CT_DTYPE_COUNT][CT_DTYPE_COUNT] = {
    ROW(CT_F32), ROW(CT_F64), ROW(CT_BF16), ROW(CT_F16),
    ROW(CT_I64), ROW(CT_I32), ROW(CT_U8),   ROW(CT_BOOL)};
#undef ROW

template <typename W>
static void move(const ChShape &g, void *out, const void *in, const CtCudaIndex &ix,
                 int64_t n)
{
    ch_launch(g.grid, g.block,
              [&](CtThread t) { ct_move_thread<W>(t, (W *)out, (const W *)in, ix, n); });
}

/* What copy.cu launches for out <- in, run on the host under shape g. */
static void run_copy(const ChShape &g, Tensor *out, const Tensor *in)
{
    CtCudaIndex ix;
    const Tensor *ops[2] = {out, in};
    int64_t n = ct_cuda_index_init(&ix, tensor_ndim(out), tensor_shape(out), 2, ops);
    ck_assert_int_eq(n, tensor_numel(out));
    void *po = ct_ptr(out);
    const void *pi = ct_ptr(in);
    CtDType s = tensor_dtype(in), d = tensor_dtype(out);
    if (s != d) {
        ch_launch(g.grid, g.block,
                  [&](CtThread t) { convert_bodies[s][d](t, po, pi, ix, n); });
        return;
    }
    switch (ct_dtype_size(d)) {
    case 1: move<uint8_t>(g, po, pi, ix, n); break;
    case 2: move<uint16_t>(g, po, pi, ix, n); break;
    case 4: move<uint32_t>(g, po, pi, ix, n); break;
    default: move<uint64_t>(g, po, pi, ix, n); break;
    }
}

START_TEST(test_copy_every_dtype_pair_and_layout)
{
    int checked = 0;
    for (int c = 0; c < CH_NCASES; c++) {
        const ChShapeCase &sc = ch_cases[c];
        int64_t nb = ch_buffer_size(sc);
        for (int s = 0; s < CT_DTYPE_COUNT; s++) {
            Tensor *src = ch_buffer(nb, (CtDType)s);
            Tensor *r = tu_rand64(1, &nb, -200, 200, 7 + c, false);
            ck_assert_int_eq(tensor_copy_(src, r), CT_OK);
            tensor_free(r);
            for (int d = 0; d < CT_DTYPE_COUNT; d++) {
                for (int lo = 0; lo < CH_BROADCAST; lo++) {
                    for (int li = 0; li < CH_LAYOUTS; li++) {
                        CtScope *scope = ct_scope_open();
                        Tensor *in = ch_view(src, li, sc);
                        ChShape shapes[2];
                        int ns = ch_shapes(ch_numel(sc), shapes);
                        for (int k = 0; in && k < ns; k++) {
                            Tensor *want = ch_buffer(nb, (CtDType)d);
                            Tensor *got = ch_clone(want);
                            Tensor *ow = ch_view(want, lo, sc),
                                   *og = ch_view(got, lo, sc);
                            if (ow) {
                                ck_assert_int_eq(tensor_copy_(ow, in), CT_OK);
                                run_copy(shapes[k], og, in);
                                char what[96];
                                snprintf(what, sizeof what, "%s -> %s, %s <- %s, case %d",
                                         ct_dtype_name((CtDType)s),
                                         ct_dtype_name((CtDType)d), ch_layout_names[lo],
                                         ch_layout_names[li], c);
                                ch_assert_same_bytes(want, got, what);
                                checked++;
                            }
                            tensor_free(want);
                            tensor_free(got);
                        }
                        ct_scope_close(scope);
                    }
                }
            }
            tensor_free(src);
        }
    }
    ck_assert_int_gt(checked, 2000);
}
END_TEST

template <typename W>
static void fill(const ChShape &g, void *out, uint64_t bits, const CtCudaIndex &ix,
                 int64_t n)
{
    ch_launch(g.grid, g.block,
              [&](CtThread t) { ct_fill_thread<W>(t, (W *)out, (W)bits, ix, n); });
}

START_TEST(test_fill_every_dtype_and_layout)
{
    const double values[] = {2.5, -3, 1.00390625, 300, 0, 65519.0, 3e9, -1e19, NAN};
    for (int c = 0; c < CH_NCASES; c++) {
        const ChShapeCase &sc = ch_cases[c];
        int64_t nb = ch_buffer_size(sc);
        for (int d = 0; d < CT_DTYPE_COUNT; d++) {
            for (int lo = 0; lo < CH_BROADCAST; lo++) {
                for (double v : values) {
                    /* tensor_fill_ refuses those (test_elementwise.c) */
                    if (!ct_int_value_fits((CtDType)d, v)) continue;
                    CtScope *scope = ct_scope_open();
                    Tensor *want = ch_buffer(nb, (CtDType)d);
                    Tensor *got = ch_clone(want);
                    Tensor *ow = ch_view(want, lo, sc), *og = ch_view(got, lo, sc);
                    ChShape shapes[2];
                    int ns = ch_shapes(ch_numel(sc), shapes);
                    for (int k = 0; ow && k < ns; k++) {
                        ck_assert_int_eq(tensor_fill_(ow, v), CT_OK);
                        CtCudaIndex ix;
                        const Tensor *ops[1] = {og};
                        int64_t n = ct_cuda_index_init(&ix, tensor_ndim(og),
                                                       tensor_shape(og), 1, ops);
                        uint64_t bits = ct_fill_bits((CtDType)d, v);
                        void *po = ct_ptr(og);
                        switch (ct_dtype_size((CtDType)d)) {
                        case 1: fill<uint8_t>(shapes[k], po, bits, ix, n); break;
                        case 2: fill<uint16_t>(shapes[k], po, bits, ix, n); break;
                        case 4: fill<uint32_t>(shapes[k], po, bits, ix, n); break;
                        default: fill<uint64_t>(shapes[k], po, bits, ix, n); break;
                        }
                        char what[64];
                        snprintf(what, sizeof what, "fill %g %s %s, case %d", v,
                                 ct_dtype_name((CtDType)d), ch_layout_names[lo], c);
                        ch_assert_same_bytes(want, got, what);
                    }
                    tensor_free(want);
                    tensor_free(got);
                    ct_scope_close(scope);
                }
            }
        }
    }
}
END_TEST

/* Values that no double round trip keeps, and casts out of range: i64
 * beyond 2^53 (also into i32, wrapping), floats past every integer range,
 * NaN; every pair of dtypes, against the CPU. */
START_TEST(test_copy_extreme_values)
{
    enum { N = 8 };
    const int64_t big[N] = {(1LL << 53) + 1, -(1LL << 62) - 3,
                            INT64_MIN,       INT64_MAX,
                            (1LL << 40) + 7, -5,
                            3000000000LL,    255};
    const double wide[N] = {NAN,           1e10,         -1e20, 3e9,
                            -2147483648.5, 2147483647.9, 1e300, -0.5};
    Tensor *srcs[3] = {tensor_from_data(big, 1, (const int64_t[]){N}, CT_I64, ct_cpu()),
                       tensor_from_data(wide, 1, (const int64_t[]){N}, CT_F64, ct_cpu()),
                       tensor_zeros(1, (const int64_t[]){N}, CT_F32, ct_cpu())};
    ck_assert_int_eq(tensor_copy_(srcs[2], srcs[1]), CT_OK);
    for (Tensor *in : srcs)
        for (int d = 0; d < CT_DTYPE_COUNT; d++) {
            Tensor *want = tensor_zeros(1, (const int64_t[]){N}, (CtDType)d, ct_cpu());
            Tensor *got = tensor_zeros(1, (const int64_t[]){N}, (CtDType)d, ct_cpu());
            ck_assert_int_eq(tensor_copy_(want, in), CT_OK);
            ChShape shapes[2];
            int ns = ch_shapes(N, shapes);
            for (int k = 0; k < ns; k++) {
                run_copy(shapes[k], got, in);
                char what[64];
                snprintf(what, sizeof what, "%s -> %s", ct_dtype_name(tensor_dtype(in)),
                         ct_dtype_name((CtDType)d));
                ch_assert_same_bytes(want, got, what);
            }
            tensor_free(want);
            tensor_free(got);
        }
    for (Tensor *in : srcs) tensor_free(in);
}
END_TEST

/* An empty tensor is zero work items: the backend launches nothing, and a
 * body run anyway touches nothing. */
START_TEST(test_empty_runs_nothing)
{
    Tensor *buf = ch_buffer(8, CT_F32);
    Tensor *copy = ch_clone(buf);
    CtScope *scope = ct_scope_open();
    Tensor *e = ch_view(buf, CH_CONTIGUOUS, ch_cases[1]);
    CtCudaIndex ix;
    const Tensor *ops[1] = {e};
    ck_assert_int_eq(ct_cuda_index_init(&ix, tensor_ndim(e), tensor_shape(e), 1, ops), 0);
    fill<uint32_t>(ChShape{1, CT_CUDA_THREADS}, ct_ptr(e), 1, ix, 0);
    ch_assert_same_bytes(copy, buf, "empty fill");
    ct_scope_close(scope);
    tensor_free(buf);
    tensor_free(copy);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_copy");
    TCase *tc = tcase_create("copy");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_copy_every_dtype_pair_and_layout);
    tcase_add_test(tc, test_fill_every_dtype_and_layout);
    tcase_add_test(tc, test_copy_extreme_values);
    tcase_add_test(tc, test_empty_runs_nothing);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
