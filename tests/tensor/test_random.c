/* Philox generator, random tensors, randperm, dropout. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "tensor/internal.h"
#include "tensor/philox.h"
#include "testutil.h"

START_TEST(test_philox_known_answers)
{
    /* Known-answer vectors of Philox-4x32-10 (Salmon et al., Random123) */
    uint32_t out[4];
    ct_philox4x32_10((uint32_t[]){0, 0, 0, 0}, (uint32_t[]){0, 0}, out);
    ck_assert_uint_eq(out[0], 0x6627e8d5u);
    ck_assert_uint_eq(out[1], 0xe169c58du);
    ck_assert_uint_eq(out[2], 0xbc57ac4cu);
    ck_assert_uint_eq(out[3], 0x9b00dbd8u);
    ct_philox4x32_10((uint32_t[]){~0u, ~0u, ~0u, ~0u}, (uint32_t[]){~0u, ~0u}, out);
    ck_assert_uint_eq(out[0], 0x408f276du);
    ck_assert_uint_eq(out[1], 0x41c83b0eu);
    ck_assert_uint_eq(out[2], 0xa20bc7c6u);
    ck_assert_uint_eq(out[3], 0x6d5451fdu);
    ct_philox4x32_10((uint32_t[]){0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                     (uint32_t[]){0xa4093822u, 0x299f31d0u}, out);
    ck_assert_uint_eq(out[0], 0xd16cfe09u);
    ck_assert_uint_eq(out[1], 0x94fdccebu);
    ck_assert_uint_eq(out[2], 0x5001e420u);
    ck_assert_uint_eq(out[3], 0x24126ea1u);
}
END_TEST

static double *draw_all(int threads, CtDType dt, int kind, int64_t n)
{
    omp_set_num_threads(threads);
    CtGenerator g = ct_generator(42, 7);
    CtScope *s = ct_scope_open();
    const int64_t shape[1] = {n};
    Tensor *t = kind == 0   ? tensor_uniform(&g, 1, shape, -2, 3, dt, ct_cpu())
                : kind == 1 ? tensor_normal(&g, 1, shape, 1, 2, dt, ct_cpu())
                            : tensor_bernoulli(&g, 1, shape, 0.3, dt, ct_cpu());
    ck_assert_ptr_nonnull(t);
    double *v = malloc((size_t)n * sizeof *v);
    ck_assert_int_eq(tensor_copy_to_host(t, v, CT_F64), CT_OK);
    ct_scope_close(s);
    omp_set_num_threads(2);
    return v;
}

/* Bernoulli f32 draws (dropout's masks, vectorised on the CPU) against
 * ct_rng_block and ct_rng_value one block at a time: sizes around the
 * 8-block vector step and a pool item, a counter whose low word wraps
 * inside the draw, p at 0, 1 and in between, and dropout's scaled hits. */
START_TEST(test_bernoulli_f32_blockwise)
{
    static const int64_t N[] = {1, 31, 32, 33, 129, 4096 * 4 + 37, 70001};
    static const double P[][2] = {{0.3, 1}, {0.75, 4.0 / 3}, {0, 1}, {1, 1}, {0.5, 2}};
    static const uint64_t OFFSET[] = {0, 0xfffffff3u, 12345};
    for (size_t in = 0; in < sizeof N / sizeof N[0]; in++)
        for (size_t ip = 0; ip < sizeof P / sizeof P[0]; ip++)
            for (size_t io = 0; io < sizeof OFFSET / sizeof OFFSET[0]; io++) {
                int64_t n = N[in];
                double a = P[ip][0], b = P[ip][1];
                CtGenerator g = {
                    .seed = 0x9e3779b97f4a7c15u, .stream = 3 + io, .offset = OFFSET[io]};
                CtScope *s = ct_scope_open();
                Tensor *t;
                if (b == 1) {
                    t = tensor_bernoulli(&g, 1, (const int64_t[]){n}, a, CT_F32,
                                         ct_cpu());
                } else { /* dropout with keep probability a: mask values 1 / a */
                    Tensor *x = tensor_ones(1, (const int64_t[]){n}, CT_F32, ct_cpu());
                    t = tensor_dropout(x, 1 - a, true, &g);
                    b = 1 / a;
                }
                ck_assert_ptr_nonnull(t);
                ck_assert_uint_eq(g.offset, OFFSET[io] + (uint64_t)((n + 3) / 4));
                float *got = malloc((size_t)n * sizeof *got);
                ck_assert_int_eq(tensor_copy_to_host(t, got, CT_F32), CT_OK);
                for (int64_t e = 0; e < n; e++) {
                    uint32_t r[4];
                    ct_rng_block(g.seed, g.stream, OFFSET[io], e / 4, r);
                    float want =
                        (float)ct_rng_value(CT_RNG_BERNOULLI, 0, a, b, r, (int)(e % 4));
                    ck_assert_msg(got[e] == want,
                                  "n %lld p %g offset %llu: [%lld] %g, want %g",
                                  (long long)n, a, (unsigned long long)OFFSET[io],
                                  (long long)e, got[e], want);
                }
                free(got);
                ct_scope_close(s);
            }
}
END_TEST

/* An integer or bool Bernoulli draw is the f32 draw cast: the same lanes
 * and the same offset advance (a backend with float draws only, CUDA, makes
 * it so). */
START_TEST(test_bernoulli_integer_is_f32_cast)
{
    static const CtDType DT[] = {CT_BOOL, CT_U8, CT_I32, CT_I64};
    CtScope *s = ct_scope_open();
    for (size_t i = 0; i < sizeof DT / sizeof DT[0]; i++) {
        CtGenerator g1 = {.seed = 77, .stream = 5, .offset = 9}, g2 = g1;
        const int64_t shape[2] = {7, 13};
        Tensor *t = tensor_bernoulli(&g1, 2, shape, 0.4, DT[i], ct_cpu());
        Tensor *f = tensor_bernoulli(&g2, 2, shape, 0.4, CT_F32, ct_cpu());
        ck_assert_ptr_nonnull(t);
        tu_assert_same_bits("draw", tensor_cast(f, DT[i]), t);
        ck_assert_uint_eq(g1.offset, g2.offset);
    }
    ct_scope_close(s);
}
END_TEST

START_TEST(test_same_numbers_for_any_thread_count)
{
    const int64_t n = 200003; /* large enough to run in parallel, odd */
    for (int kind = 0; kind < 3; kind++) {
        for (int dt = CT_F32; dt <= CT_F64; dt++) {
            double *a = draw_all(1, (CtDType)dt, kind, n);
            double *b = draw_all(2, (CtDType)dt, kind, n);
            ck_assert_msg(memcmp(a, b, (size_t)n * sizeof *a) == 0,
                          "kind %d dtype %d differs between 1 and 2 threads", kind, dt);
            free(a);
            free(b);
        }
    }
}
END_TEST

static void moments(const double *v, int64_t n, double *mean, double *var)
{
    double m = 0, q = 0;
    for (int64_t i = 0; i < n; i++) m += v[i];
    m /= (double)n;
    for (int64_t i = 0; i < n; i++) q += (v[i] - m) * (v[i] - m);
    *mean = m;
    *var = q / (double)(n - 1);
}

START_TEST(test_distributions)
{
    const int64_t n = 400000;
    double m, v;
    double *u = draw_all(2, CT_F32, 0, n); /* uniform [-2, 3) */
    moments(u, n, &m, &v);
    ck_assert_double_eq_tol(m, 0.5, 0.02);
    ck_assert_double_eq_tol(v, 25.0 / 12.0, 0.03);
    for (int64_t i = 0; i < n; i++) ck_assert(u[i] >= -2 && u[i] < 3);
    free(u);
    double *z = draw_all(2, CT_F64, 1, n); /* normal(1, 2) */
    moments(z, n, &m, &v);
    ck_assert_double_eq_tol(m, 1.0, 0.02);
    ck_assert_double_eq_tol(v, 4.0, 0.05);
    free(z);
    double *b = draw_all(2, CT_F32, 2, n); /* bernoulli(0.3) */
    moments(b, n, &m, &v);
    ck_assert_double_eq_tol(m, 0.3, 0.005);
    free(b);
}
END_TEST

START_TEST(test_draws_advance_and_reproduce)
{
    CtScope *s = ct_scope_open();
    CtGenerator g = ct_generator(1, 0);
    Tensor *a = tensor_rand(&g, 1, (const int64_t[]){10}, CT_F32, ct_cpu());
    ck_assert_uint_eq(g.offset, 3); /* 10 draws, 4 per block */
    Tensor *b = tensor_rand(&g, 1, (const int64_t[]){10}, CT_F32, ct_cpu());
    CtGenerator g2 = ct_generator(1, 0);
    Tensor *a2 = tensor_rand(&g2, 1, (const int64_t[]){10}, CT_F32, ct_cpu());
    double va[10], vb[10], va2[10];
    tensor_copy_to_host(a, va, CT_F64);
    tensor_copy_to_host(b, vb, CT_F64);
    tensor_copy_to_host(a2, va2, CT_F64);
    ck_assert(memcmp(va, va2, sizeof va) == 0);
    ck_assert(memcmp(va, vb, sizeof va) != 0);
    /* another stream gives other numbers */
    CtGenerator g3 = ct_generator(1, 1);
    double v3[10];
    tensor_copy_to_host(tensor_rand(&g3, 1, (const int64_t[]){10}, CT_F32, ct_cpu()), v3,
                        CT_F64);
    ck_assert(memcmp(va, v3, sizeof va) != 0);
    ct_scope_close(s);
}
END_TEST

START_TEST(test_randperm)
{
    CtGenerator g = ct_generator(5, 0);
    int64_t p[1000], q[1000];
    ck_assert_int_eq(ct_randperm(&g, 1000, p), CT_OK);
    int seen[1000] = {0};
    int fixed = 0;
    for (int i = 0; i < 1000; i++) {
        ck_assert(p[i] >= 0 && p[i] < 1000);
        seen[p[i]]++;
        fixed += p[i] == i;
    }
    for (int i = 0; i < 1000; i++) ck_assert_int_eq(seen[i], 1);
    ck_assert_int_lt(fixed, 10);
    CtGenerator h = ct_generator(5, 0);
    ct_randperm(&h, 1000, q);
    ck_assert(memcmp(p, q, sizeof p) == 0);
    ck_assert_int_eq(ct_randperm(&g, -1, p), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "negative n");
}
END_TEST

START_TEST(test_dropout)
{
    TU_MEM_BEGIN;
    Tensor *x = tu_rand64(1, (const int64_t[]){1000}, 1, 2, 9, true);
    CtGenerator g = ct_generator(3, 0);
    CtScope *s = ct_scope_open();
    Tensor *y = tensor_dropout(x, 0.25, true, &g);
    double xv[1000], yv[1000], gv[1000];
    tensor_copy_to_host(x, xv, CT_F64);
    tensor_copy_to_host(y, yv, CT_F64);
    int zeros = 0;
    for (int i = 0; i < 1000; i++) {
        if (yv[i] == 0)
            zeros++;
        else
            ck_assert_double_eq_tol(yv[i], xv[i] / 0.75, 1e-12);
    }
    ck_assert_int_gt(zeros, 200);
    ck_assert_int_lt(zeros, 300);
    ck_assert_int_eq(tensor_backward(y, tensor_ones_like(y)), CT_OK);
    tensor_copy_to_host(tensor_grad(x), gv, CT_F64);
    for (int i = 0; i < 1000; i++)
        ck_assert_double_eq_tol(gv[i], yv[i] == 0 ? 0 : 1 / 0.75, 1e-12);
    /* eval mode is the identity and draws nothing */
    uint64_t before = g.offset;
    Tensor *e = tensor_dropout(x, 0.25, false, &g);
    tu_assert_values(e, xv, 1000, 0, 0);
    ck_assert_uint_eq(g.offset, before);
    ck_assert_ptr_null(tensor_dropout(x, 1.5, true, &g));
    tu_assert_error(CT_ERR_INVALID, "dropout: p must be in [0, 1], got 1.5");
    ct_scope_close(s);
    tensor_free(x);
    TU_MEM_END;
}
END_TEST

/* y and x's gradient of the one-pass dropout (one RNG call with an input,
 * the mask drawn again in backward) against x times the mask drawn as a
 * tensor from the same generator state, bit for bit. */
static void check_dropout_bits(CtDType dt, bool transposed, int64_t rows, int64_t cols,
                               double p)
{
    Tensor *x64 = tu_rand64(2, (const int64_t[]){rows, cols}, -2, 2, 17, false);
    Tensor *x = tensor_cast(x64, dt); /* no scope open: persistent */
    tensor_free(x64);
    if (transposed) { /* a non-contiguous view as the input */
        CtScope *v = ct_scope_open();
        Tensor *t = tensor_retain(tensor_transpose(x, 0, 1));
        ct_scope_close(v);
        tensor_free(x);
        x = t;
    }
    ck_assert_int_eq(tensor_set_requires_grad(x, true), CT_OK);
    CtGenerator g = ct_generator(8, 2);
    g.offset = 11;
    CtRngParams rp = {CT_RNG_BERNOULLI, 1 - p,    p == 1 ? 0.0 : 1 / (1 - p),
                      g.seed,           g.stream, g.offset};
    CtScope *s = ct_scope_open();
    Tensor *y = tensor_dropout(x, p, true, &g);
    ck_assert_msg(y, "%s", ct_last_error());
    ck_assert_str_eq(y->grad_fn->op, "dropout"); /* one node, nothing saved */
    ck_assert_ptr_null(y->grad_fn->saved[0]);
    int per = dt == CT_F64 ? 2 : 4;
    ck_assert_uint_eq(g.offset, 11 + (uint64_t)((rows * cols + per - 1) / per));
    Tensor *gy64 = tu_rand64(tensor_ndim(y), tensor_shape(y), -1, 1, 18, false);
    Tensor *gy = tensor_cast(gy64, dt);
    tensor_free(gy64);
    ck_assert_int_eq(tensor_backward(y, gy), CT_OK);
    Tensor *gx = tensor_clone(tensor_grad(x));
    tensor_set_grad(x, NULL);
    Tensor *m = tensor_empty(tensor_ndim(x), tensor_shape(x), dt, ct_cpu());
    CtOpCall call = {.op = CT_OP_RNG, .out = {m}, .params = &rp};
    ck_assert_int_eq(ct_dispatch(&call), CT_OK);
    Tensor *want = tensor_mul(x, m);
    ck_assert_int_eq(tensor_backward(want, gy), CT_OK);
    tu_assert_same_bits("dropout y", want, y);
    tu_assert_same_bits("dropout gx", tensor_grad(x), gx);
    ct_scope_close(s);
    tensor_free(x);
}

START_TEST(test_dropout_one_pass)
{
    TU_MEM_BEGIN;
    for (int dt = CT_F32; dt <= CT_F16; dt++) {
        /* 40000 values: past one pool item (4096 Philox blocks) */
        check_dropout_bits((CtDType)dt, false, 100, 400, 0.3);
        check_dropout_bits((CtDType)dt, true, 7, 33, 0.3); /* a cut last block */
        check_dropout_bits((CtDType)dt, false, 5, 9, 1.0); /* everything dropped */
    }
    TU_MEM_END;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor_random");
    TCase *tc = tcase_create("random");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_philox_known_answers);
    tcase_add_test(tc, test_bernoulli_f32_blockwise);
    tcase_add_test(tc, test_bernoulli_integer_is_f32_cast);
    tcase_add_test(tc, test_same_numbers_for_any_thread_count);
    tcase_add_test(tc, test_distributions);
    tcase_add_test(tc, test_draws_advance_and_reproduce);
    tcase_add_test(tc, test_randperm);
    tcase_add_test(tc, test_dropout);
    tcase_add_test(tc, test_dropout_one_pass);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
