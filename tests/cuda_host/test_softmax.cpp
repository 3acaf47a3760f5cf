/* cuda_host_softmax: the SOFTMAX and SOFTMAX_BWD thread body
 * (tensor/cuda/softmax_body.h) against the CPU backend, bit for bit: f32
 * and f64, softmax and log_softmax, the last dim (unit-stride runs, with
 * and without a tail past the lanes) and outer dims (strided runs), more
 * runs than a block, a run of one element, and empty tensors. */
#include "data.h"
#include "tensor/cuda/softmax_body.h"

/* (outer, n, inner) */
static const int64_t cases[][3] = {
    {1, 1, 1},   {0, 4, 1},   {2, 0, 3},    {3, 257, 1}, {2, 5, 7},
    {1, 300, 1}, {4, 33, 70}, {300, 10, 1}, {2, 16, 1},  {5, 1, 9},
};
#define NCASES ((int)(sizeof cases / sizeof *cases))

template <typename T>
static void run_body(const CtSoftmaxParams &p, const Tensor *x, const Tensor *g,
                     Tensor *y, const ChShape &sh)
{
    ch_launch(sh.grid, sh.block, [&](CtThread t) {
        ct_softmax_thread<T>(t, p, (const T *)ct_ptr(x), g ? (const T *)ct_ptr(g) : NULL,
                             (T *)ct_ptr(y));
    });
}

static void check_case(const int64_t *c, CtDType dt, bool log_out, int *checked)
{
    CtSoftmaxParams p = {c[0], c[1], c[2], log_out};
    Tensor *x = ch_rand(3, c, dt, -4, 4, 7 + (unsigned)c[1]);
    Tensor *g = ch_rand(3, c, dt, -1, 1, 9 + (unsigned)c[2]);
    Tensor *y = ch_out(3, c, dt), *gx = ch_out(3, c, dt);
    CtOpCall fwd = {CT_OP_SOFTMAX, {y}, {x}, &p, NULL, NULL};
    CtOpCall bwd = {CT_OP_SOFTMAX_BWD, {gx}, {y, g}, &p, NULL, NULL};
    ch_cpu(fwd);
    ch_cpu(bwd);
    ChShape shapes[2];
    int ns = ch_shapes(c[0] * c[2], shapes);
    for (int k = 0; k < ns; k++) {
        Tensor *gy = ch_out(3, c, dt), *ggx = ch_out(3, c, dt);
        if (dt == CT_F32) {
            run_body<float>(p, x, NULL, gy, shapes[k]);
            run_body<float>(p, y, g, ggx, shapes[k]);
        } else {
            run_body<double>(p, x, NULL, gy, shapes[k]);
            run_body<double>(p, y, g, ggx, shapes[k]);
        }
        char what[96];
        snprintf(what, sizeof what, "%s %s (%lld, %lld, %lld) launch %d",
                 ct_dtype_name(dt), log_out ? "log_softmax" : "softmax", (long long)c[0],
                 (long long)c[1], (long long)c[2], k);
        ch_assert_same_bytes(y, gy, what);
        ch_assert_same_bytes(gx, ggx, what);
        tensor_free(gy);
        tensor_free(ggx);
        ++*checked;
    }
    tensor_free(x);
    tensor_free(g);
    tensor_free(y);
    tensor_free(gx);
}

START_TEST(test_softmax_matches_cpu)
{
    int checked = 0;
    for (int c = 0; c < NCASES; c++)
        for (int dt = CT_F32; dt <= CT_F64; dt++)
            for (int lg = 0; lg < 2; lg++)
                check_case(cases[c], (CtDType)dt, lg, &checked);
    ck_assert_int_eq(checked, NCASES * 2 * 2 * 2);
}
END_TEST

/* A row of -inf but one finite value, and a large value, as the CPU has them. */
START_TEST(test_softmax_extremes)
{
    int64_t shape[3] = {2, 20, 1};
    Tensor *x = ch_rand(3, shape, CT_F32, -1, 1, 3);
    float *xv = (float *)ct_ptr(x);
    for (int i = 0; i < 19; i++) xv[i] = -INFINITY;
    xv[20] = 80.0f;
    for (int lg = 0; lg < 2; lg++) {
        CtSoftmaxParams p = {2, 20, 1, lg == 1};
        Tensor *want = ch_out(3, shape, CT_F32), *got = ch_out(3, shape, CT_F32);
        CtOpCall call = {CT_OP_SOFTMAX, {want}, {x}, &p, NULL, NULL};
        ch_cpu(call);
        run_body<float>(p, x, NULL, got, ChShape{1, 32});
        ch_assert_same_bytes(want, got, lg ? "log_softmax extremes" : "softmax extremes");
        ck_assert_float_eq(((float *)ct_ptr(got))[19], lg ? 0.0f : 1.0f);
        tensor_free(want);
        tensor_free(got);
    }
    tensor_free(x);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_softmax");
    TCase *tc = tcase_create("softmax");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_softmax_matches_cpu);
    tcase_add_test(tc, test_softmax_extremes);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
