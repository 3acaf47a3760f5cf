/* CUDA kernels of the nn ops (softmax, cross-entropy, layer norm, indexing,
 * dropout) against the CPU kernels on cuda:0: each kernel call runs on the
 * CPU and, with every operand copied to the device, on the GPU, and every
 * output is compared. The thread bodies are checked bit for bit on the host
 * (tests/cuda_host); here the device's own exp/log/sqrt may differ in the
 * last bits: f32 1e-5 relative, f64 1e-12; copies, indexing and masks
 * exact. Bad indices give the CPU's message and write nothing.
 *
 * Without a device the tests are skipped with a loud count on stderr. */
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"
#include "tensor/index.h"
#include "tensor/internal.h"
#include "tensor/norm.h"
#include "tensor/softmax.h"

static CtDevice gpu(void)
{
    return ct_cuda(0);
}

/* A contiguous CPU tensor uniform in [lo, hi), in dt. Scope-owned. */
static Tensor *rnd(CtDType dt, int ndim, const int64_t *shape, double lo, double hi,
                   unsigned seed)
{
    Tensor *x = tu_rand64(ndim, shape, lo, hi, seed, false);
    Tensor *y = tensor_cast(x, dt);
    tensor_free(x);
    ck_assert_ptr_nonnull(y);
    return y;
}

/* Integer indices in [0, size). Scope-owned. */
static Tensor *idx(int ndim, const int64_t *shape, int64_t size, unsigned seed)
{
    return rnd(CT_I64, ndim, shape, 0, (double)size - 0.001, seed);
}

static Tensor *on_gpu(const Tensor *t)
{
    if (!t) return NULL;
    Tensor *g = tensor_to_device((Tensor *)t, gpu());
    ck_assert_msg(g, "%s", ct_last_error());
    return g;
}

/* Runs c (CPU operands; outputs hold their initial values) on the CPU and
 * on cuda:0 and compares the outputs within rtol (atol = rtol). */
static void check_call(CtOpCall c, double rtol)
{
    CtOpCall g = c;
    for (int i = 0; i < CT_CALL_MAX_IN; i++) g.in[i] = on_gpu(c.in[i]);
    for (int i = 0; i < CT_CALL_MAX_OUT; i++) g.out[i] = on_gpu(c.out[i]);
    ck_assert_msg(ct_dispatch(&c) == CT_OK, "cpu %s: %s", ct_op_name(c.op),
                  ct_last_error());
    ck_assert_msg(ct_dispatch(&g) == CT_OK, "cuda %s: %s", ct_op_name(c.op),
                  ct_last_error());
    for (int i = 0; i < CT_CALL_MAX_OUT; i++) {
        if (!c.out[i]) continue;
        int64_t n = tensor_numel(c.out[i]);
        double *want = malloc((size_t)(n ? n : 1) * sizeof *want);
        ck_assert_int_eq(tensor_copy_to_host(c.out[i], want, CT_F64), CT_OK);
        tu_assert_values_at(__FILE__, __LINE__, g.out[i], want, n, rtol, rtol);
        free(want);
    }
}

static double tol(CtDType dt)
{
    return dt == CT_F32 ? 1e-5 : 1e-12;
}

START_TEST(test_softmax)
{
    CtScope *s = ct_scope_open();
    const int64_t shapes[][3] = {{4, 1000, 1}, {3, 7, 50}, {300, 10, 1}};
    for (int dt = CT_F32; dt <= CT_F64; dt++)
        for (int k = 0; k < 3; k++)
            for (int lg = 0; lg < 2; lg++) {
                const int64_t *sh = shapes[k];
                CtSoftmaxParams p = {sh[0], sh[1], sh[2], lg == 1};
                Tensor *x = rnd(dt, 3, sh, -5, 5, 1),
                       *y = tensor_empty(3, sh, dt, ct_cpu());
                check_call(
                    (CtOpCall){.op = CT_OP_SOFTMAX, .out = {y}, .in = {x}, .params = &p},
                    tol(dt));
                Tensor *g = rnd(dt, 3, sh, -1, 1, 2),
                       *gx = tensor_empty(3, sh, dt, ct_cpu());
                check_call(
                    (CtOpCall){
                        .op = CT_OP_SOFTMAX_BWD, .out = {gx}, .in = {y, g}, .params = &p},
                    tol(dt));
            }
    ct_scope_close(s);
}
END_TEST

START_TEST(test_cross_entropy)
{
    CtScope *s = ct_scope_open();
    const int64_t shapes[][3] = {{64, 1000, 1}, {4, 5, 30}};
    for (int dt = CT_F32; dt <= CT_F64; dt++)
        for (int k = 0; k < 2; k++)
            for (int v = 0; v < 3; v++) {
                const int64_t *sh = shapes[k], ts[2] = {sh[0], sh[2]};
                CtCrossEntropyParams p = {
                    sh[0], sh[1], sh[2], 3, v > 0, v == 2, v == 1 ? 0.1 : 0,
                    false, false};
                Tensor *x = rnd(dt, 3, sh, v == 2 ? -6 : -3, v == 2 ? 0 : 3, 3);
                Tensor *tg = idx(2, ts, sh[1], 4),
                       *w = v == 1 ? rnd(dt, 1, sh + 1, 0.5, 2, 5) : NULL;
                Tensor *loss = tensor_empty(2, ts, dt, ct_cpu()),
                       *wout = tensor_empty(2, ts, dt, ct_cpu());
                check_call((CtOpCall){.op = CT_OP_CROSS_ENTROPY,
                                      .out = {loss, wout},
                                      .in = {x, tg, w},
                                      .params = &p},
                           tol(dt));
                /* the fold (a summed, then a mean loss) in the same kernel */
                CtCrossEntropyParams pf = p;
                pf.fold = true;
                Tensor *sum = tensor_empty(0, NULL, dt, ct_cpu()),
                       *den = tensor_empty(0, NULL, dt, ct_cpu());
                check_call((CtOpCall){.op = CT_OP_CROSS_ENTROPY,
                                      .out = {loss, NULL, sum},
                                      .in = {x, tg, w},
                                      .params = &pf},
                           tol(dt));
                check_call((CtOpCall){.op = CT_OP_CROSS_ENTROPY,
                                      .out = {loss, wout, sum, den},
                                      .in = {x, tg, w},
                                      .params = &pf},
                           tol(dt));
                Tensor *go = rnd(dt, 2, ts, -1, 1, 6),
                       *gx = tensor_empty(3, sh, dt, ct_cpu());
                check_call((CtOpCall){.op = CT_OP_CROSS_ENTROPY_BWD,
                                      .out = {gx},
                                      .in = {x, tg, w, go},
                                      .params = &p},
                           tol(dt));
            }
    ct_scope_close(s);
}
END_TEST

START_TEST(test_layer_norm)
{
    CtScope *s = ct_scope_open();
    const int64_t shapes[][2] = {{1000, 64}, {3, 4096}};
    for (int dt = CT_F32; dt <= CT_F64; dt++)
        for (int k = 0; k < 2; k++) {
            const int64_t *sh = shapes[k], st[2] = {2, sh[0]};
            CtLayerNormParams p = {sh[0], sh[1], 1e-5};
            Tensor *x = rnd(dt, 2, sh, -2, 3, 7), *w = rnd(dt, 1, sh + 1, 0.5, 1.5, 8);
            Tensor *b = rnd(dt, 1, sh + 1, -1, 1, 9);
            Tensor *y = tensor_empty(2, sh, dt, ct_cpu()),
                   *stats = tensor_empty(2, st, dt, ct_cpu());
            check_call((CtOpCall){.op = CT_OP_LAYER_NORM,
                                  .out = {y, stats},
                                  .in = {x, w, b},
                                  .params = &p},
                       tol(dt));
            Tensor *g = rnd(dt, 2, sh, -1, 1, 10),
                   *dx = tensor_empty(2, sh, dt, ct_cpu());
            Tensor *dw = tensor_empty(1, sh + 1, dt, ct_cpu()),
                   *db = tensor_empty(1, sh + 1, dt, ct_cpu());
            check_call((CtOpCall){.op = CT_OP_LAYER_NORM_BWD,
                                  .out = {dx, dw, db},
                                  .in = {g, x, w, stats},
                                  .params = &p},
                       tol(dt));
        }
    ct_scope_close(s);
}
END_TEST

START_TEST(test_indexing)
{
    CtScope *s = ct_scope_open();
    int64_t big[3] = {2, 50, 33}, ish[1] = {300}, small[3] = {2, 300, 33};
    Tensor *ix = idx(1, ish, 50, 11);
    for (int dt = CT_F32; dt <= CT_BF16; dt++) {
        CtIndexParams p = {"index_select", 1, 2, 50, 33, 300};
        Tensor *src = rnd(dt, 3, big, -1, 1, 12),
               *out = tensor_empty(3, small, dt, ct_cpu());
        check_call(
            (CtOpCall){
                .op = CT_OP_INDEX_SELECT, .out = {out}, .in = {src, ix}, .params = &p},
            0);
        CtGatherParams gp = {"gather", 1};
        int64_t gsh[3] = {2, 70, 30};
        Tensor *gix = idx(3, gsh, 50, 13), *gout = tensor_empty(3, gsh, dt, ct_cpu());
        check_call(
            (CtOpCall){
                .op = CT_OP_GATHER, .out = {gout}, .in = {src, gix}, .params = &gp},
            0);
        if (dt == CT_BF16) continue;
        /* accumulation in index order, as on the CPU: exact */
        Tensor *gsrc = rnd(dt, 3, small, -1, 1, 14), *acc = rnd(dt, 3, big, -1, 1, 15);
        check_call(
            (CtOpCall){
                .op = CT_OP_INDEX_ADD, .out = {acc}, .in = {gsrc, ix}, .params = &p},
            0);
        Tensor *ssrc = rnd(dt, 3, gsh, -1, 1, 16), *sacc = rnd(dt, 3, big, -1, 1, 17);
        check_call(
            (CtOpCall){
                .op = CT_OP_SCATTER_ADD, .out = {sacc}, .in = {ssrc, gix}, .params = &gp},
            0);
    }
    for (int dt = 0; dt < CT_DTYPE_COUNT; dt++) {
        CtOneHotParams p = {50};
        int64_t osh[2] = {300, 50};
        Tensor *out = tensor_empty(2, osh, dt, ct_cpu());
        check_call(
            (CtOpCall){.op = CT_OP_ONE_HOT, .out = {out}, .in = {ix}, .params = &p}, 0);
    }
    ct_scope_close(s);
}
END_TEST

/* A bad index: the op returns at once (nothing waits for the check), its
 * kernel leaves the bad index's elements alone, and the next wait for the
 * device reports the CPU's message; the log is then empty and ops run. */
START_TEST(test_bad_index)
{
    CtScope *s = ct_scope_open();
    int64_t big[2] = {5, 4}, ish[2] = {2, 3}, small[2] = {6, 4};
    Tensor *ix = idx(2, ish, 5, 21);
    ((int64_t *)ct_ptr(ix))[4] = 7;
    Tensor *src = rnd(CT_F32, 2, big, -1, 1, 22);
    Tensor *out = on_gpu(tensor_zeros(2, small, CT_F32, ct_cpu()));
    CtIndexParams p = {"embedding", 0, 1, 5, 4, 6};
    CtOpCall c = {.op = CT_OP_INDEX_SELECT,
                  .out = {out},
                  .in = {on_gpu(src), on_gpu(ix)},
                  .params = &p};
    ck_assert_int_eq(ct_dispatch(&c), CT_OK);
    ck_assert_int_eq(ct_device_synchronize(ct_cuda(0)), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID,
                    "embedding: index 7 at position [1, 1] is out of range "
                    "for dim 0 of size 5 (found on cuda:0 after the op "
                    "had returned)");
    Tensor *host = tensor_to_device(out, ct_cpu()); /* the log is empty: no error */
    ck_assert_ptr_nonnull(host);
    const float *o = (const float *)tensor_data(host);
    for (int k = 0; k < 4; k++) ck_assert(o[4 * 4 + k] == 0.0f); /* row 4: index 7 */
    int64_t ts[1] = {4}, ls[3] = {4, 3, 1};
    Tensor *tg = idx(1, ts, 3, 23);
    ((int64_t *)ct_ptr(tg))[2] = -1;
    CtCrossEntropyParams cp = {4, 3, 1, -100, true, false, 0, false, false};
    Tensor *loss = on_gpu(tensor_zeros(1, ts, CT_F32, ct_cpu()));
    CtOpCall ce = {.op = CT_OP_CROSS_ENTROPY,
                   .out = {loss},
                   .in = {on_gpu(rnd(CT_F32, 3, ls, -1, 1, 24)), on_gpu(tg)},
                   .params = &cp};
    ck_assert_int_eq(ct_dispatch(&ce), CT_OK);
    ck_assert_ptr_null(tensor_to_device(loss, ct_cpu())); /* the copy waits: reported */
    tu_assert_error(CT_ERR_INVALID,
                    "cross_entropy: target -1 at index [2] is out of range "
                    "for 3 classes (found on cuda:0 after the op had "
                    "returned)");
    ck_assert_int_eq(ct_device_synchronize(ct_cuda(0)), CT_OK);
    ct_scope_close(s);
}
END_TEST

/* Dropout draws the CPU's mask on the device (same generator, same offset
 * afterwards). */
START_TEST(test_dropout_mask)
{
    CtScope *s = ct_scope_open();
    int64_t n = 100003;
    for (int dt = CT_F32; dt <= CT_F64; dt++) {
        CtGenerator gc = ct_generator(7, 1), gg = ct_generator(7, 1);
        Tensor *ones = tensor_ones(1, &n, dt, ct_cpu());
        Tensor *want = tensor_dropout(ones, 0.3, true, &gc);
        Tensor *got = tensor_dropout(on_gpu(ones), 0.3, true, &gg);
        ck_assert_msg(want && got, "%s", ct_last_error());
        double *v = malloc((size_t)n * sizeof *v);
        ck_assert_int_eq(tensor_copy_to_host(want, v, CT_F64), CT_OK);
        tu_assert_values(got, v, n, 0, 0);
        free(v);
        ck_assert_uint_eq(gc.offset, gg.offset);
    }
    ct_scope_close(s);
}
END_TEST

/* Without a device, asking for cuda:0 is an error, not a crash. */
START_TEST(test_no_device)
{
    int64_t n = 4;
    ck_assert_ptr_null(tensor_zeros(1, &n, CT_F32, gpu()));
    tu_assert_error(CT_ERR_DEVICE, "cuda:0");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor_cuda_nn");
    TCase *tc = tcase_create("cuda_nn");
    tcase_set_timeout(tc, 120);
    const TTest *tests[] = {test_softmax,  test_cross_entropy, test_layer_norm,
                            test_indexing, test_bad_index,     test_dropout_mask};
    int n = (int)(sizeof tests / sizeof *tests);
    if (ct_cuda_device_count() > 0) {
        setenv("CK_FORK", "no", 1); /* CUDA does not work in a fork()ed child */
        for (int i = 0; i < n; i++) tcase_add_test(tc, tests[i]);
    } else {
        fprintf(stderr, "\n*** SKIPPED %d CUDA nn tests: no CUDA device ***\n\n", n);
        tcase_add_test(tc, test_no_device);
    }
    suite_add_tcase(s, tc);
    return tu_run(s);
}
