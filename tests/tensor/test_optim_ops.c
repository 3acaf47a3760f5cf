/* The optimizer block ops (ctrainer/tensor_optim.h) on the CPU: values
 * against hand-written reference loops, bit for bit, in f32 and f64; the
 * norm's chunked order; the gradient zeroed in the same pass; spans; bad
 * operands rejected with nothing written. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "ctrainer/tensor_optim.h"
#include "testutil.h"

#define N 300

/* Five operands of N elements: param, grad and three state buffers (>= 0). */
static void make_ops(CtDType dt, Tensor **t, unsigned seed)
{
    int64_t n = N;
    for (int k = 0; k < 5; k++) {
        Tensor *r = tu_rand64(1, &n, k >= 2 ? 0.0 : -2.0, 2.0, seed + k, false);
        t[k] = tensor_zeros(1, &n, dt, ct_cpu()); /* no scope open: ours */
        ck_assert_int_eq(tensor_copy_(t[k], r), CT_OK);
        tensor_free(r);
    }
}

static void free_ops(Tensor **t)
{
    for (int k = 0; k < 5; k++) tensor_free(t[k]);
}

/* The reference loops, written once per element type. */
#define REFS(T, SQRT)                                                                    \
    static void ref_sgd_##T(T *p, const T *g, T *b, const TensorSgdArgs *a)              \
    {                                                                                    \
        T lr = (T)a->lr, wd = (T)a->weight_decay, mom = (T)a->momentum;                  \
        T damp = (T)(1.0 - a->dampening);                                                \
        for (int i = 0; i < N; i++) {                                                    \
            T d = g[i] + wd * p[i];                                                      \
            b[i] = a->first ? d : mom * b[i] + damp * d;                                 \
            d = a->nesterov ? d + mom * b[i] : b[i];                                     \
            p[i] -= lr * d;                                                              \
        }                                                                                \
    }                                                                                    \
    static void ref_adam_##T(T *p, const T *g, T *m, T *v, T *vm,                        \
                             const TensorAdamArgs *a)                                    \
    {                                                                                    \
        double t = (double)a->step;                                                      \
        T mul = (T)(a->decoupled ? 1.0 - a->lr * a->weight_decay : 1.0);                 \
        T l2 = (T)(a->decoupled ? 0.0 : a->weight_decay);                                \
        T b1 = (T)a->beta1, b2 = (T)a->beta2, a1 = (T)(1.0 - a->beta1);                  \
        T a2 = (T)(1.0 - a->beta2), eps = (T)a->eps;                                     \
        T step = (T)(a->lr / (1.0 - pow(a->beta1, t)));                                  \
        T bc2 = (T)sqrt(1.0 - pow(a->beta2, t));                                         \
        for (int i = 0; i < N; i++) {                                                    \
            T pi = p[i] * mul, gi = g[i] + l2 * pi;                                      \
            m[i] = b1 * m[i] + a1 * gi;                                                  \
            v[i] = b2 * v[i] + a2 * gi * gi;                                             \
            vm[i] = vm[i] > v[i] ? vm[i] : v[i];                                         \
            p[i] = pi - step * m[i] / (SQRT(vm[i]) / bc2 + eps);                         \
        }                                                                                \
    }                                                                                    \
    static void ref_rms_##T(T *p, const T *g, T *sq, T *mb, T *ga,                       \
                            const TensorRmspropArgs *a)                                  \
    {                                                                                    \
        T lr = (T)a->lr, wd = (T)a->weight_decay, mom = (T)a->momentum;                  \
        T al = (T)a->alpha, a1 = (T)(1.0 - a->alpha), eps = (T)a->eps;                   \
        for (int i = 0; i < N; i++) {                                                    \
            T gi = g[i] + wd * p[i];                                                     \
            sq[i] = al * sq[i] + a1 * gi * gi;                                           \
            ga[i] = al * ga[i] + a1 * gi;                                                \
            T avg = SQRT(sq[i] - ga[i] * ga[i]) + eps;                                   \
            mb[i] = mom * mb[i] + gi / avg;                                              \
            p[i] -= lr * mb[i];                                                          \
        }                                                                                \
    }

REFS(float, sqrtf)
REFS(double, sqrt)

/* Runs the reference on copies of want's data, then compares bytes. */
static void assert_same(Tensor *const *got, Tensor *const *want, int n)
{
    for (int k = 0; k < n; k++)
        ck_assert_msg(memcmp(tensor_data(got[k]), tensor_data(want[k]),
                             (size_t)N * ct_dtype_size(tensor_dtype(got[k]))) == 0,
                      "operand %d differs from the reference", k);
}

#define RUN_REF(T, CALL)                                                                 \
    do {                                                                                 \
        T *x[5];                                                                         \
        for (int k = 0; k < 5; k++) x[k] = tensor_data(r[k]);                            \
        CALL;                                                                            \
    } while (0)

/* op 0 SGD, 1 Adam, 2 RMSprop; round 0 and 1 vary the flags; round 1
 * zeroes the gradient in the pass. */
START_TEST(test_steps_match_reference_loops)
{
    TU_MEM_BEGIN;
    CtDType dt = _i ? CT_F64 : CT_F32;
    Tensor *t[5], *r[5];
    for (int op = 0; op < 3; op++)
        for (int round = 0; round < 2; round++) {
            make_ops(dt, t, 7 + op);
            make_ops(dt, r, 7 + op);
            bool zero = round == 1;
            TensorSgdArgs sa = {0.1,        0.01,       0.9, round ? 0 : 0.2,
                                round == 1, round == 0, zero};
            TensorAdamArgs aa = {1e-2, 0.1,        0.9,       0.999,
                                 1e-8, round == 1, 4 + round, zero};
            TensorRmspropArgs ra = {1e-2, 0.01, 0.99, 1e-8, 0.9, zero};
            if (op == 0) {
                ck_assert_int_eq(tensor_sgd_step_(t[0], t[1], t[2], &sa), CT_OK);
                if (dt == CT_F32)
                    RUN_REF(float, ref_sgd_float(x[0], x[1], x[2], &sa));
                else
                    RUN_REF(double, ref_sgd_double(x[0], x[1], x[2], &sa));
            } else if (op == 1) {
                ck_assert_int_eq(tensor_adam_step_(t[0], t[1], t[2], t[3], t[4], &aa),
                                 CT_OK);
                if (dt == CT_F32)
                    RUN_REF(float, ref_adam_float(x[0], x[1], x[2], x[3], x[4], &aa));
                else
                    RUN_REF(double, ref_adam_double(x[0], x[1], x[2], x[3], x[4], &aa));
            } else {
                /* centered: square_avg (2) in [0, 2] >= grad_avg (4)^2 */
                ck_assert_int_eq(tensor_scale_(t[4], 0.25), CT_OK);
                ck_assert_int_eq(tensor_scale_(r[4], 0.25), CT_OK);
                ck_assert_int_eq(tensor_rmsprop_step_(t[0], t[1], t[2], t[3], t[4], &ra),
                                 CT_OK);
                if (dt == CT_F32)
                    RUN_REF(float, ref_rms_float(x[0], x[1], x[2], x[3], x[4], &ra));
                else
                    RUN_REF(double, ref_rms_double(x[0], x[1], x[2], x[3], x[4], &ra));
            }
            if (zero) ck_assert_int_eq(tensor_zero_(r[1]), CT_OK);
            assert_same(t, r, 5);
            free_ops(t);
            free_ops(r);
        }
    TU_MEM_END;
}
END_TEST

/* Zeroing in the pass over several chunks and pieces of chunks, on 1 and 2
 * threads: the same parameters and state as without it, and a gradient of
 * zeros. */
START_TEST(test_zero_grad_over_chunks)
{
    TU_MEM_BEGIN;
    CtDType dt = _i ? CT_F64 : CT_F32;
    int64_t n = 2 * 65536 + 2048 * 3 + 5;
    size_t es = ct_dtype_size(dt);
    int threads_before = omp_get_max_threads();
    for (int op = 0; op < 3; op++)
        for (int threads = 1; threads <= 2; threads++) {
            omp_set_num_threads(threads);
            Tensor *t[2][5];
            for (int z = 0; z < 2; z++)
                for (int k = 0; k < 5; k++) {
                    Tensor *r = tu_rand64(1, &n, k >= 2 ? 0.0 : -2.0, 2.0, 31 + k, false);
                    t[z][k] = tensor_zeros(1, &n, dt, ct_cpu());
                    ck_assert_int_eq(tensor_copy_(t[z][k], r), CT_OK);
                    tensor_free(r);
                }
            for (int z = 0; z < 2; z++) {
                Tensor **x = t[z];
                TensorSgdArgs sa = {0.1, 0.01, 0.9, 0, true, false, z};
                TensorAdamArgs aa = {1e-2, 0.1, 0.9, 0.999, 1e-8, true, 2, z};
                TensorRmspropArgs ra = {1e-2, 0.01, 0.99, 1e-8, 0.9, z};
                CtStatus st =
                    op == 0   ? tensor_sgd_step_(x[0], x[1], x[2], &sa)
                    : op == 1 ? tensor_adam_step_(x[0], x[1], x[2], x[3], x[4], &aa)
                              : tensor_rmsprop_step_(x[0], x[1], x[2], x[3], NULL, &ra);
                ck_assert_int_eq(st, CT_OK);
            }
            for (int k = 0; k < 5; k++)
                if (k != 1)
                    ck_assert(memcmp(tensor_data(t[0][k]), tensor_data(t[1][k]),
                                     (size_t)n * es) == 0);
            const unsigned char *g = tensor_data(t[1][1]);
            for (size_t b = 0; b < (size_t)n * es; b++) ck_assert_uint_eq(g[b], 0);
            for (int z = 0; z < 2; z++) free_ops(t[z]);
        }
    omp_set_num_threads(threads_before);
    TU_MEM_END;
}
END_TEST

START_TEST(test_clip_ops)
{
    TU_MEM_BEGIN;
    double v[] = {3, -4, 0.5, NAN, -0.25};
    int64_t n = 5;
    Tensor *x = tu_tensor(_i ? CT_F64 : CT_F32, 1, &n, v);
    ck_assert_int_eq(tensor_clamp_abs_(x, 1), CT_OK);
    double *got = malloc(5 * sizeof *got);
    ck_assert_int_eq(tensor_copy_to_host(x, got, CT_F64), CT_OK);
    ck_assert(got[0] == 1 && got[1] == -1 && got[2] == 0.5 && isnan(got[3]) &&
              got[4] == -0.25);
    double norm;
    ck_assert_int_eq(tensor_norm_parts(x, INFINITY, &norm), CT_OK);
    ck_assert(isnan(norm));
    ck_assert_int_eq(tensor_scale_(x, 2), CT_OK);
    ck_assert_int_eq(tensor_copy_to_host(x, got, CT_F64), CT_OK);
    ck_assert(got[0] == 2 && got[1] == -2 && got[2] == 1 && got[4] == -0.5);
    free(got);
    tensor_free(x);
    TU_MEM_END;
}
END_TEST

/* Over several chunks: the sum of the per-chunk sums, in order. */
START_TEST(test_norm_chunked_order)
{
    TU_MEM_BEGIN;
    int64_t n = 3 * 65536 + 17;
    Tensor *x = tu_rand64(1, &n, -1, 1, 3, false);
    const double *d = tensor_data(x);
    double want = 0, maxabs = 0;
    for (int64_t lo = 0; lo < n; lo += 65536) {
        double s = 0;
        for (int64_t i = lo; i < n && i < lo + 65536; i++) {
            s += d[i] * d[i];
            maxabs = fabs(d[i]) > maxabs ? fabs(d[i]) : maxabs;
        }
        want += s;
    }
    double got;
    ck_assert_int_eq(tensor_norm_parts(x, 2, &got), CT_OK);
    ck_assert(memcmp(&got, &want, sizeof got) == 0);
    ck_assert_int_eq(tensor_norm_parts(x, INFINITY, &got), CT_OK);
    ck_assert(got == maxabs);
    tensor_free(x);
    TU_MEM_END;
}
END_TEST

START_TEST(test_span)
{
    TU_MEM_BEGIN;
    int64_t n = 10;
    Tensor *block = tensor_zeros(1, &n, CT_F32, ct_cpu()); /* no scope open: ours */
    Tensor *a = tensor_zeros(2, (const int64_t[]){2, 2}, CT_F32, ct_cpu());
    Tensor *b = tensor_zeros(1, (const int64_t[]){3}, CT_F32, ct_cpu());
    Tensor *ab[] = {a, b}, *ba[] = {b, a};
    ck_assert_ptr_null(tensor_span(ab, 2)); /* separate storages */
    ck_assert_int_eq(ct_last_status(), CT_OK);
    ck_assert_int_eq(tensor_rebind(a, block, 2), CT_OK);
    ck_assert_int_eq(tensor_rebind(b, block, 6), CT_OK);
    Tensor *s = tensor_span(ab, 2);
    ck_assert_ptr_nonnull(s);
    tu_assert_shape(s, 1, 7);
    ck_assert_ptr_eq(tensor_data(s), tensor_data(a));
    ck_assert(tensor_is_span(s, ab, 2));
    ck_assert(!tensor_is_span(s, ab, 1));
    ck_assert_ptr_null(tensor_span(ba, 2)); /* wrong order */
    ck_assert_int_eq(tensor_fill_(s, 1.5), CT_OK);
    ck_assert(((float *)tensor_data(b))[2] == 1.5f &&
              ((float *)tensor_data(block))[1] == 0);
    ck_assert_int_eq(tensor_rebind(b, block, 7), CT_OK); /* a gap now */
    ck_assert(!tensor_is_span(s, ab, 2));
    ck_assert_ptr_null(tensor_span(ab, 2));
    tensor_free(s);
    tensor_free(a);
    tensor_free(b);
    tensor_free(block);
    TU_MEM_END;
}
END_TEST

START_TEST(test_bad_operands_change_nothing)
{
    TU_MEM_BEGIN;
    Tensor *t[5];
    make_ops(CT_F32, t, 9);
    float before = ((float *)tensor_data(t[0]))[0];
    int64_t n3 = 3;
    Tensor *shortg = tensor_zeros(1, &n3, CT_F32, ct_cpu());
    Tensor *g64 = tensor_zeros(1, (const int64_t[]){N}, CT_F64, ct_cpu());
    Tensor *i32 = tensor_zeros(1, (const int64_t[]){N}, CT_I32, ct_cpu());
    Tensor *m2 = tensor_zeros(2, (const int64_t[]){20, 15}, CT_F32, ct_cpu());
    Tensor *strided = tensor_transpose(m2, 0, 1);
    TensorSgdArgs sa = {0.1, 0, 0.9, 0, false, false, true};
    TensorAdamArgs aa = {0.1, 0, 0.9, 0.99, 1e-8, false, 1, true};
    TensorRmspropArgs ra = {0.1, 0, 0.99, 1e-8, 0, true};
    float gbefore = ((float *)tensor_data(t[1]))[0];
    ck_assert_int_eq(tensor_sgd_step_(t[0], shortg, t[2], &sa), CT_ERR_SHAPE);
    tu_assert_error(CT_ERR_SHAPE, "tensor_sgd_step_: grad f32[3] cpu has another numel "
                                  "than param f32[300] cpu");
    ck_assert_int_eq(tensor_adam_step_(t[0], t[1], t[2], g64, NULL, &aa), CT_ERR_DTYPE);
    tu_assert_error(CT_ERR_DTYPE, "exp_avg_sq f64[300] cpu has another dtype than param");
    ck_assert_int_eq(tensor_rmsprop_step_(i32, t[1], t[2], NULL, NULL, &ra),
                     CT_ERR_DTYPE);
    tu_assert_error(CT_ERR_DTYPE,
                    "tensor_rmsprop_step_: param i32[300] cpu must be f32 or f64");
    ck_assert_int_eq(tensor_rmsprop_step_(strided, t[1], t[2], NULL, NULL, &ra),
                     CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "param f32[15, 20] cpu must be contiguous");
    ck_assert_int_eq(tensor_adam_step_(t[0], t[1], NULL, t[3], NULL, &aa), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "tensor_adam_step_: exp_avg is NULL");
    aa.step = 0;
    ck_assert_int_eq(tensor_adam_step_(t[0], t[1], t[2], t[3], NULL, &aa),
                     CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "step 0 must be >= 1");
    sa.nesterov = true;
    ck_assert_int_eq(tensor_sgd_step_(t[0], t[1], NULL, &sa), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "nesterov needs a momentum_buf");
    ck_assert_int_eq(tensor_clamp_abs_(t[0], -1), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "clip -1 must be >= 0");
    double norm;
    ck_assert_int_eq(tensor_norm_parts(t[0], 1, &norm), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "unsupported norm_type (norm_type 1");
    ck_assert(((float *)tensor_data(t[0]))[0] == before);
    ck_assert(((float *)tensor_data(t[1]))[0] == gbefore); /* zero_grad set */
    Tensor *extra[] = {shortg, g64, i32, strided, m2};
    for (int k = 0; k < 5; k++) tensor_free(extra[k]);
    free_ops(t);
    TU_MEM_END;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor_optim_ops");
    TCase *tc = tcase_create("ops");
    tcase_add_loop_test(tc, test_steps_match_reference_loops, 0, 2);
    tcase_add_loop_test(tc, test_zero_grad_over_chunks, 0, 2);
    tcase_add_loop_test(tc, test_clip_ops, 0, 2);
    tcase_add_test(tc, test_norm_chunked_order);
    tcase_add_test(tc, test_span);
    tcase_add_test(tc, test_bad_operands_change_nothing);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
