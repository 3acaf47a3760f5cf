/* cuda_host_where: the WHERE thread body (tensor/cuda/elementwise_body.h)
 * against the CPU backend's kernel, bit for bit, on every dtype, with the
 * condition and both values in every layout (broadcast included) and
 * contiguous and strided outputs. */
#include "tensor/cuda/elementwise_body.h"
#include "layouts.h"

static const CtDType dtypes[] = {CT_F32, CT_F64, CT_BF16, CT_F16,
                                 CT_I64, CT_I32, CT_U8,   CT_BOOL};
#define NDTYPES ((int)(sizeof dtypes / sizeof *dtypes))

/* Whole numbers in [lo, hi) (0 and 1 for the condition), as dt. */
static Tensor *input_buffer(int64_t n, CtDType dt, double lo, double hi, unsigned seed)
{
    Tensor *r = tu_rand64(1, &n, lo, hi, seed, false);
    double *v = (double *)ct_ptr(r);
    for (int64_t i = 0; i < n; i++) v[i] = floor(v[i]);
    Tensor *buf = ch_buffer(n, dt);
    ck_assert_int_eq(tensor_copy_(buf, r), CT_OK);
    tensor_free(r);
    return buf;
}

static void cpu_where(Tensor *out, const Tensor *cond, const Tensor *a, const Tensor *b)
{
    CtOpCall call = {};
    call.op = CT_OP_WHERE;
    call.out[0] = out;
    call.in[0] = cond;
    call.in[1] = a;
    call.in[2] = b;
    ck_assert_int_eq(ct_dispatch(&call), CT_OK);
}

template <typename W>
static void run_body(ChShape sh, Tensor *out, const Tensor *cond, const Tensor *a,
                     const Tensor *b, const CtCudaIndex &ix, int64_t n)
{
    ch_launch(sh.grid, sh.block, [&](CtThread t) {
        ct_where_thread<W>(t, (W *)ct_ptr(out), (const uint8_t *)ct_ptr(cond),
                           (const W *)ct_ptr(a), (const W *)ct_ptr(b), ix, n);
    });
}

static void run_where(ChShape sh, Tensor *out, const Tensor *cond, const Tensor *a,
                      const Tensor *b, const CtCudaIndex &ix, int64_t n)
{
    switch (ct_dtype_size(tensor_dtype(out))) {
    case 1: run_body<uint8_t>(sh, out, cond, a, b, ix, n); break;
    case 2: run_body<uint16_t>(sh, out, cond, a, b, ix, n); break;
    case 4: run_body<uint32_t>(sh, out, cond, a, b, ix, n); break;
    default: run_body<uint64_t>(sh, out, cond, a, b, ix, n); break;
    }
}

/* One shape case and dtype: the condition, a and b (layout lc + la) over
 * every layout pair, into contiguous and strided outputs; returns the
 * comparisons made. */
static int check_case(int c, CtDType dt, Tensor *cbuf, Tensor *abuf, Tensor *bbuf)
{
    const ChShapeCase &sc = ch_cases[c];
    int64_t nb = ch_buffer_size(sc);
    int checked = 0;
    for (int l = 0; l < CH_LAYOUTS * CH_LAYOUTS * 2; l++) {
        int lc = l / (2 * CH_LAYOUTS), la = l / 2 % CH_LAYOUTS, lo = l % 2 * CH_STRIDED;
        int lb = (lc + la) % CH_LAYOUTS;
        CtScope *scope = ct_scope_open();
        Tensor *cond = ch_view(cbuf, lc, sc), *a = ch_view(abuf, la, sc);
        Tensor *b = ch_view(bbuf, lb, sc);
        Tensor *want = ch_buffer(nb, dt), *got = ch_clone(want);
        Tensor *ow = ch_view(want, lo, sc), *og = ch_view(got, lo, sc);
        if (cond && a && b) {
            cpu_where(ow, cond, a, b);
            CtCudaIndex ix;
            const Tensor *ops[4] = {og, cond, a, b};
            int64_t n =
                ct_cuda_index_init(&ix, tensor_ndim(og), tensor_shape(og), 4, ops);
            ChShape shapes[2];
            int ns = ch_shapes(n, shapes);
            char what[96];
            snprintf(what, sizeof what, "%s, %s/%s/%s -> %s, case %d", ct_dtype_name(dt),
                     ch_layout_names[lc], ch_layout_names[la], ch_layout_names[lb],
                     ch_layout_names[lo], c);
            for (int s = 0; s < ns; s++, checked++) {
                run_where(shapes[s], og, cond, a, b, ix, n);
                ch_assert_same_bytes(want, got, what);
            }
        }
        tensor_free(want);
        tensor_free(got);
        ct_scope_close(scope);
    }
    return checked;
}

START_TEST(test_where_every_dtype_and_layout)
{
    int checked = 0;
    for (int c = 0; c < CH_NCASES; c++) {
        int64_t nb = ch_buffer_size(ch_cases[c]);
        Tensor *cbuf = input_buffer(nb, CT_BOOL, 0, 2, 7 + c);
        for (int di = 0; di < NDTYPES; di++) {
            Tensor *abuf = input_buffer(nb, dtypes[di], -40, 40, 13 + c);
            Tensor *bbuf = input_buffer(nb, dtypes[di], -40, 40, 17 + c);
            checked += check_case(c, dtypes[di], cbuf, abuf, bbuf);
            tensor_free(abuf);
            tensor_free(bbuf);
        }
        tensor_free(cbuf);
    }
    ck_assert_int_gt(checked, 1000);
}
END_TEST

/* Four operands index independently: a broadcast condition picks from
 * a transposed and a strided value. */
START_TEST(test_where_index_four_operands)
{
    int64_t shape[2] = {2, 3};
    Tensor *out = ch_buffer(6, CT_F32), *cond = ch_buffer(3, CT_BOOL);
    Tensor *a = ch_buffer(6, CT_F32), *b = ch_buffer(12, CT_F32);
    const uint8_t cv[3] = {1, 0, 1};
    memcpy(ct_ptr(cond), cv, 3);
    for (int i = 0; i < 6; i++) ((float *)ct_ptr(a))[i] = (float)i;
    for (int i = 0; i < 12; i++) ((float *)ct_ptr(b))[i] = (float)(100 + i);
    CtScope *scope = ct_scope_open();
    int64_t one[2] = {1, 3}, ts[2] = {3, 2}, bw[2] = {2, 6};
    const Tensor *ops[4] = {tensor_view(out, 2, shape),
                            tensor_expand(tensor_view(cond, 2, one), 2, shape),
                            tensor_transpose(tensor_view(a, 2, ts), 0, 1),
                            tensor_slice(tensor_view(b, 2, bw), 1, 0, 6, 2)};
    CtCudaIndex ix;
    int64_t n = ct_cuda_index_init(&ix, 2, shape, 4, ops);
    ck_assert_int_eq(n, 6);
    ch_launch(1, 4, [&](CtThread t) {
        ct_where_thread<uint32_t>(
            t, (uint32_t *)ct_ptr(out), (const uint8_t *)ct_ptr(cond),
            (const uint32_t *)ct_ptr(a), (const uint32_t *)ct_ptr(b), ix, n);
    });
    /* a^T = [[0, 2, 4], [1, 3, 5]]; b strided = [[100, 102, 104], [106, 108, 110]] */
    const float expect[6] = {0, 102, 4, 1, 108, 5};
    for (int i = 0; i < 6; i++) ck_assert_float_eq(((float *)ct_ptr(out))[i], expect[i]);
    ct_scope_close(scope);
    tensor_free(out);
    tensor_free(cond);
    tensor_free(a);
    tensor_free(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_where");
    TCase *tc = tcase_create("where");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_where_every_dtype_and_layout);
    tcase_add_test(tc, test_where_index_four_operands);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
