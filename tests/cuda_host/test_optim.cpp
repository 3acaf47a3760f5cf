/* cuda_host_optim: the optimizer block ops' thread bodies
 * (tensor/cuda/optim_body.h) against the CPU backend's kernels, bit for bit:
 * SGD (plain, momentum first/later, Nesterov), Adam/AdamW (amsgrad on and
 * off), RMSprop (centered x momentum), each also zeroing its gradient (the
 * CPU's gradient zeroed too), scale, clamp and the norm partials,
 * f32 and f64, sizes with tails smaller than a block and more than one norm
 * chunk, under both launch shapes of the harness. */
extern "C" {
#include "ctrainer/tensor_optim.h"
}
#include "harness.h"
#include "tensor/cuda/optim_body.h"

#define NBUF 5 /* param, grad, and up to 3 state buffers */

/* NBUF buffers of n elements of dt: param and grad in [-2, 2), states in
 * [0, 2) except the last in [0, 0.5), so that a centered RMSprop's
 * square_avg (2) >= grad_avg (4)^2. */
struct Set {
    Tensor *t[NBUF];
};
static Set make_set(int64_t n, CtDType dt, unsigned seed)
{
    Set s;
    for (int k = 0; k < NBUF; k++) {
        Tensor *r = tu_rand64(1, &n, k >= 2 ? 0.0 : -2.0, k == 4 ? 0.5 : 2.0,
                              seed * 7 + k, false);
        s.t[k] = ch_buffer(n, dt);
        ck_assert_int_eq(tensor_copy_(s.t[k], r), CT_OK);
        tensor_free(r);
    }
    return s;
}
static Set clone_set(const Set &a)
{
    Set s;
    for (int k = 0; k < NBUF; k++) s.t[k] = ch_clone(a.t[k]);
    return s;
}
static void check_and_free(Set &want, Set &got, const char *what)
{
    for (int k = 0; k < NBUF; k++) {
        ch_assert_same_bytes(want.t[k], got.t[k], what);
        tensor_free(want.t[k]);
        tensor_free(got.t[k]);
    }
}
template <typename T> static T *P(const Set &s, int k)
{
    return (T *)ct_ptr(s.t[k]);
}

static const int64_t sizes[] = {1, 257, 70001};
#define NSIZES ((int)(sizeof sizes / sizeof *sizes))

/* Under each launch shape: cpu(want) through the CPU backend, body(t, got)
 * over the grid, then the sets compared byte for byte. */
template <typename Cpu, typename Body>
static void run_case(CtDType dt, int64_t n, unsigned seed, const char *what, Cpu cpu,
                     Body body)
{
    ChShape shapes[2];
    int ns = ch_shapes(n, shapes);
    for (int k = 0; k < ns; k++) {
        Set want = make_set(n, dt, seed), got = clone_set(want);
        cpu(want);
        ch_launch(shapes[k].grid, shapes[k].block, [&](CtThread t) { body(t, got); });
        check_and_free(want, got, what);
    }
}

/* zero: the update zeroes the gradient (operand 1) in its pass. */
template <typename T> static T *gz(const Set &s, bool zero)
{
    return zero ? P<T>(s, 1) : NULL;
}

template <typename T, bool MOM, bool FIRST, bool NES>
static void sgd_case(CtDType dt, int64_t n, unsigned seed, bool zero)
{
    TensorSgdArgs a = {0.05, 0.01, MOM ? 0.9 : 0, NES ? 0 : 0.1, NES, FIRST, zero};
    CtSgdParams q = {a.lr, a.weight_decay, a.momentum, 1.0 - a.dampening, FIRST, NES};
    run_case(
        dt, n, seed, "sgd",
        [&](Set &w) {
            ck_assert_int_eq(tensor_sgd_step_(w.t[0], w.t[1], MOM ? w.t[2] : NULL, &a),
                             CT_OK);
        },
        [&](CtThread t, Set &g) {
            ct_sgd_thread<T, MOM, FIRST, NES>(
                t, P<T>(g, 0), P<T>(g, 1), MOM ? P<T>(g, 2) : NULL, gz<T>(g, zero), q, n);
        });
}

template <typename T, bool AMS, bool DEC>
static void adam_case(CtDType dt, int64_t n, unsigned seed, bool zero)
{
    TensorAdamArgs a = {1e-2, 0.1, 0.9, 0.999, 1e-8, DEC, 3, zero};
    CtAdamParams q = {DEC ? 1.0 - a.lr * a.weight_decay : 1.0,
                      DEC ? 0.0 : a.weight_decay,
                      a.beta1,
                      a.beta2,
                      1.0 - a.beta1,
                      1.0 - a.beta2,
                      a.lr / (1.0 - pow(a.beta1, 3.0)),
                      sqrt(1.0 - pow(a.beta2, 3.0)),
                      a.eps};
    run_case(
        dt, n, seed, "adam",
        [&](Set &w) {
            ck_assert_int_eq(tensor_adam_step_(w.t[0], w.t[1], w.t[2], w.t[3],
                                               AMS ? w.t[4] : NULL, &a),
                             CT_OK);
        },
        [&](CtThread t, Set &g) {
            ct_adam_thread<T, AMS>(t, P<T>(g, 0), P<T>(g, 1), P<T>(g, 2), P<T>(g, 3),
                                   AMS ? P<T>(g, 4) : NULL, gz<T>(g, zero), q, n);
        });
}

template <typename T, bool CEN, bool MOM>
static void rms_case(CtDType dt, int64_t n, unsigned seed, bool zero)
{
    TensorRmspropArgs a = {1e-2, 0.01, 0.99, 1e-8, MOM ? 0.9 : 0, zero};
    CtRmspropParams q = {a.lr, a.weight_decay, a.momentum, a.alpha, 1.0 - a.alpha, a.eps};
    run_case(
        dt, n, seed, "rmsprop",
        [&](Set &w) {
            ck_assert_int_eq(tensor_rmsprop_step_(w.t[0], w.t[1], w.t[2],
                                                  MOM ? w.t[3] : NULL,
                                                  CEN ? w.t[4] : NULL, &a),
                             CT_OK);
        },
        [&](CtThread t, Set &g) {
            ct_rms_thread<T, CEN, MOM>(t, P<T>(g, 0), P<T>(g, 1), P<T>(g, 2),
                                       MOM ? P<T>(g, 3) : NULL, CEN ? P<T>(g, 4) : NULL,
                                       gz<T>(g, zero), q, n);
        });
}

/* The norm partials of x under one launch shape, summed in order as the
 * front-end does. */
template <typename T, bool MAX_ABS>
static double body_norm(const Tensor *x, int64_t n, ChShape sh)
{
    int64_t nch = (n + CT_NORM_CHUNK - 1) / CT_NORM_CHUNK;
    Tensor *part = ch_buffer(nch, CT_F64);
    double *pd = (double *)ct_ptr(part), acc = 0;
    ch_launch(sh.grid, sh.block, [&](CtThread t) {
        ct_norm_thread<T, MAX_ABS>(t, (const T *)ct_ptr(x), pd, n);
    });
    for (int64_t c = 0; c < nch; c++)
        acc = MAX_ABS ? (pd[c] > acc ? pd[c] : acc) : acc + pd[c];
    tensor_free(part);
    return acc;
}

template <typename T> static void clip_norm_case(CtDType dt, int64_t n, unsigned seed)
{
    run_case(
        dt, n, seed, "clip",
        [&](Set &w) {
            ck_assert_int_eq(tensor_scale_(w.t[0], 0.3), CT_OK);
            ck_assert_int_eq(tensor_clamp_abs_(w.t[1], 0.5), CT_OK);
        },
        [&](CtThread t, Set &g) {
            ct_clip_thread<T, false>(t, P<T>(g, 0), (T)0.3, n);
            ct_clip_thread<T, true>(t, P<T>(g, 1), (T)0.5, n);
        });
    Set s = make_set(n, dt, seed);
    ChShape shapes[2];
    int ns = ch_shapes(n, shapes);
    for (int k = 0; k < ns; k++)
        for (int mx = 0; mx < 2; mx++) {
            double want, got = mx ? body_norm<T, true>(s.t[2], n, shapes[k])
                                  : body_norm<T, false>(s.t[2], n, shapes[k]);
            ck_assert_int_eq(tensor_norm_parts(s.t[2], mx ? INFINITY : 2, &want), CT_OK);
            ck_assert_msg(memcmp(&want, &got, sizeof got) == 0, "norm %s: %.17g vs %.17g",
                          mx ? "inf" : "2", want, got);
        }
    for (int k = 0; k < NBUF; k++) tensor_free(s.t[k]);
}

template <typename T> static void all_cases(CtDType dt)
{
    for (int si = 0; si < NSIZES; si++) {
        int64_t n = sizes[si];
        unsigned seed = 11 + si;
        for (int z = 0; z < 2; z++) {
            sgd_case<T, false, false, false>(dt, n, seed, z);
            sgd_case<T, true, true, false>(dt, n, seed, z);
            sgd_case<T, true, true, true>(dt, n, seed, z);
            sgd_case<T, true, false, false>(dt, n, seed, z);
            sgd_case<T, true, false, true>(dt, n, seed, z);
            adam_case<T, false, false>(dt, n, seed, z);
            adam_case<T, true, false>(dt, n, seed, z);
            adam_case<T, false, true>(dt, n, seed, z);
            adam_case<T, true, true>(dt, n, seed, z);
            rms_case<T, false, false>(dt, n, seed, z);
            rms_case<T, true, false>(dt, n, seed, z);
            rms_case<T, false, true>(dt, n, seed, z);
            rms_case<T, true, true>(dt, n, seed, z);
        }
        clip_norm_case<T>(dt, n, seed);
    }
}

START_TEST(test_optim_f32)
{
    all_cases<float>(CT_F32);
}
END_TEST

START_TEST(test_optim_f64)
{
    all_cases<double>(CT_F64);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_optim");
    TCase *tc = tcase_create("bodies");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_optim_f32);
    tcase_add_test(tc, test_optim_f64);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
