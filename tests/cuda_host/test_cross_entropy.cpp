/* cuda_host_cross_entropy: the CROSS_ENTROPY and CROSS_ENTROPY_BWD thread
 * bodies (tensor/cuda/softmax_body.h) against the CPU backend, bit for bit:
 * f32 and f64, class weights or none, label smoothing, nll_loss (log
 * input), ignore_index (outside the classes, and a class itself), classes
 * per position in one run (inner 1) or strided (inner > 1), empty batches;
 * and the target check (range_body.h) finding the position the CPU
 * reports; the backward, which does not check again, giving a bad target
 * a zero row; one gradient for every position, over a divisor. */
#include "data.h"
#include "tensor/cuda/range_body.h"
#include "tensor/cuda/reduce_body.h"
#include "tensor/cuda/softmax_body.h"

/* (n, c, inner) */
static const int64_t cases[][3] = {
    {1, 1, 1}, {0, 5, 1}, {7, 5, 1}, {3, 37, 1}, {2, 5, 3}, {300, 10, 1}, {4, 17, 70},
};
#define NCASES ((int)(sizeof cases / sizeof *cases))

struct Variant {
    bool weight, log_input, use_ignore;
    int64_t ignore;
    double smoothing;
};
static const Variant variants[] = {
    {false, false, false, 0, 0},     {true, false, false, 0, 0},
    {false, false, true, -100, 0.1}, {true, false, true, 2, 0.2},
    {false, true, true, -100, 0},    {true, true, false, 0, 0},
};
#define NVARIANTS ((int)(sizeof variants / sizeof *variants))

/* Targets in [0, c), every fifth position set to v.ignore when used. */
static Tensor *targets(int64_t n, int64_t c, int64_t inner, const Variant &v,
                       unsigned seed)
{
    int64_t shape[2] = {n, inner};
    Tensor *t = ch_index(2, shape, c, seed);
    int64_t *o = (int64_t *)ct_ptr(t);
    for (int64_t i = 1; v.use_ignore && i < n * inner; i += 5) o[i] = v.ignore;
    return t;
}

template <typename T>
static void run_bodies(const ChShape &sh, const CtCrossEntropyParams &p, const Tensor *x,
                       const Tensor *tg, const Tensor *w, const Tensor *go, Tensor *loss,
                       Tensor *wout, Tensor *gx)
{
    const T *wp = w ? (const T *)ct_ptr(w) : NULL;
    ch_launch(sh.grid, sh.block, [&](CtThread t) {
        ct_ce_fwd_thread<T>(t, p, (const T *)ct_ptr(x), (const int64_t *)ct_ptr(tg), wp,
                            (T *)ct_ptr(loss), wout ? (T *)ct_ptr(wout) : NULL, NULL);
    });
    ch_launch(sh.grid, sh.block, [&](CtThread t) {
        ct_ce_bwd_thread<T>(t, p, (const T *)ct_ptr(x), (const int64_t *)ct_ptr(tg), wp,
                            (const T *)ct_ptr(go), (const T *)NULL, (T *)ct_ptr(gx));
    });
}

static void check_case(const int64_t *c, const Variant &v, CtDType dt, int *checked)
{
    int64_t n = c[0], nc = c[1], inner = c[2], pos[2] = {n, inner};
    CtCrossEntropyParams p = {n,           nc,          inner, v.ignore, v.use_ignore,
                              v.log_input, v.smoothing, false, false};
    Tensor *x = ch_rand(3, c, dt, v.log_input ? -6 : -3, v.log_input ? 0 : 3, 5);
    Tensor *tg = targets(n, nc, inner, v, 11);
    Tensor *w = v.weight ? ch_rand(1, &nc, dt, 0.5, 2, 13) : NULL;
    Tensor *go = ch_rand(2, pos, dt, -1, 1, 17);
    Tensor *loss = ch_out(2, pos, dt), *wout = v.weight ? ch_out(2, pos, dt) : NULL;
    Tensor *gx = ch_out(3, c, dt);
    CtOpCall fwd = {CT_OP_CROSS_ENTROPY, {loss, wout}, {x, tg, w}, &p, NULL, NULL};
    CtOpCall bwd = {CT_OP_CROSS_ENTROPY_BWD, {gx}, {x, tg, w, go}, &p, NULL, NULL};
    ch_cpu(fwd);
    ch_cpu(bwd);
    ChShape shapes[2];
    int ns = ch_shapes(n * inner, shapes);
    for (int k = 0; k < ns; k++) {
        Tensor *gl = ch_out(2, pos, dt), *gw = wout ? ch_out(2, pos, dt) : NULL;
        Tensor *ggx = ch_out(3, c, dt);
        if (dt == CT_F32)
            run_bodies<float>(shapes[k], p, x, tg, w, go, gl, gw, ggx);
        else
            run_bodies<double>(shapes[k], p, x, tg, w, go, gl, gw, ggx);
        char what[128];
        snprintf(what, sizeof what,
                 "%s (%lld, %lld, %lld) weight %d log %d ignore %d:%lld eps %g launch %d",
                 ct_dtype_name(dt), (long long)n, (long long)nc, (long long)inner,
                 v.weight, v.log_input, v.use_ignore, (long long)v.ignore, v.smoothing,
                 k);
        ch_assert_same_bytes(loss, gl, what);
        if (wout) ch_assert_same_bytes(wout, gw, what);
        ch_assert_same_bytes(gx, ggx, what);
        tensor_free(gl);
        tensor_free(gw);
        tensor_free(ggx);
        ++*checked;
    }
    tensor_free(x);
    tensor_free(tg);
    tensor_free(w);
    tensor_free(go);
    tensor_free(loss);
    tensor_free(wout);
    tensor_free(gx);
}

START_TEST(test_cross_entropy_matches_cpu)
{
    int checked = 0;
    for (int c = 0; c < NCASES; c++)
        for (int v = 0; v < NVARIANTS; v++)
            for (int dt = CT_F32; dt <= CT_F64; dt++)
                check_case(cases[c], variants[v], (CtDType)dt, &checked);
    ck_assert_int_eq(checked, NCASES * NVARIANTS * 2 * 2);
}
END_TEST

/* Two bad targets (one negative, not the ignored value): the check finds the
 * first, where the CPU kernel reports it. */
START_TEST(test_bad_target_position)
{
    int64_t shape[3] = {3, 5, 2}, ts[2] = {3, 2};
    Variant v = {false, false, true, -100, 0};
    Tensor *x = ch_rand(3, shape, CT_F32, -1, 1, 3);
    Tensor *tg = targets(3, 5, 2, v, 7);
    int64_t *t = (int64_t *)ct_ptr(tg);
    t[3] = -1;
    t[5] = 5;
    CtCrossEntropyParams p = {3, 5, 2, -100, true, false, 0, false, false};
    Tensor *loss = ch_out(2, ts, CT_F32);
    CtOpCall call = {CT_OP_CROSS_ENTROPY, {loss}, {x, tg}, &p, NULL, NULL};
    ck_assert_int_eq(ct_dispatch(&call), CT_ERR_INVALID);
    ck_assert_str_eq(ct_last_error(),
                     "cross_entropy: target -1 at index [1, 1] is out of range for 5 "
                     "classes");
    CtRangeCheck rc = {5, true, -100};
    for (int64_t grid = 1; grid <= 3; grid++) {
        unsigned long long first = ~0ull;
        ch_launch(grid, 2, [&](CtThread th) { ct_range_thread(th, t, 6, rc, &first); });
        ck_assert_int_eq((int64_t)first, 3);
        /* the forward's own check, as the range check */
        unsigned long long own = ~0ull;
        ch_launch(grid, 2, [&](CtThread th) {
            ct_ce_fwd_thread<float>(th, p, (const float *)ct_ptr(x), t,
                                    (const float *)NULL, (float *)ct_ptr(loss),
                                    (float *)NULL, &own);
        });
        ck_assert_int_eq((int64_t)own, 3);
        char at[32];
        ck_assert_str_eq(ct_position_str(tg, (int64_t)first, at, sizeof at), "[1, 1]");
    }
    tensor_free(x);
    tensor_free(tg);
    tensor_free(loss);
}
END_TEST

/* g (one element) over div (one element, or none), given to every one of
 * spread's positions, in T as a division op computes it. */
template <typename T>
static void spread_gradient(const Tensor *g, const Tensor *div, Tensor *spread)
{
    T q = ((const T *)ct_ptr(g))[0];
    if (div) q = q / ((const T *)ct_ptr(div))[0];
    for (int64_t i = 0; i < tensor_numel(spread); i++) ((T *)ct_ptr(spread))[i] = q;
}

template <typename T>
static void scalar_body(const ChShape &sh, const CtCrossEntropyParams &p, const Tensor *x,
                        const Tensor *tg, const Tensor *w, const Tensor *g,
                        const Tensor *div, Tensor *gx)
{
    ch_launch(sh.grid, sh.block, [&](CtThread th) {
        ct_ce_bwd_thread<T>(th, p, (const T *)ct_ptr(x), (const int64_t *)ct_ptr(tg),
                            w ? (const T *)ct_ptr(w) : NULL, (const T *)ct_ptr(g),
                            div ? (const T *)ct_ptr(div) : NULL, (T *)ct_ptr(gx));
    });
}

/* One case of test_backward_scalar_gradient. */
static void check_scalar(const int64_t *sh, const Variant &va, CtDType d, bool with_div,
                         int *checked)
{
    int64_t pos[2] = {sh[0], sh[2]}, one = 1;
    CtCrossEntropyParams p = {sh[0],        sh[1],        sh[2], va.ignore, va.use_ignore,
                              va.log_input, va.smoothing, true,  false};
    Tensor *x = ch_rand(3, sh, d, -3, 3, 5), *tg = targets(sh[0], sh[1], sh[2], va, 11);
    Tensor *w = va.weight ? ch_rand(1, &sh[1], d, 0.5, 2, 13) : NULL;
    Tensor *g = ch_rand(1, &one, d, -1, 1, 17);
    Tensor *div = with_div ? ch_rand(1, &one, d, 3, 9, 19) : NULL;
    Tensor *want = ch_out(3, sh, d), *spread_gx = ch_out(3, sh, d),
           *spread = ch_out(2, pos, d);
    CtOpCall bwd = {CT_OP_CROSS_ENTROPY_BWD, {want}, {x, tg, w, g, div}, &p, NULL, NULL};
    ch_cpu(bwd);
    if (d == CT_F32)
        spread_gradient<float>(g, div, spread);
    else
        spread_gradient<double>(g, div, spread);
    CtCrossEntropyParams ps = p;
    ps.go_scalar = false;
    CtOpCall each = {
        CT_OP_CROSS_ENTROPY_BWD, {spread_gx}, {x, tg, w, spread}, &ps, NULL, NULL};
    ch_cpu(each);
    ch_assert_same_bytes(want, spread_gx, "scalar against spread");
    ChShape shapes[2];
    int ns = ch_shapes(pos[0] * pos[1], shapes);
    for (int k = 0; k < ns; k++) {
        Tensor *got = ch_out(3, sh, d);
        if (d == CT_F32)
            scalar_body<float>(shapes[k], p, x, tg, w, g, div, got);
        else
            scalar_body<double>(shapes[k], p, x, tg, w, g, div, got);
        ch_assert_same_bytes(want, got, "scalar gradient");
        tensor_free(got);
        ++*checked;
    }
    Tensor *all[] = {x, tg, w, g, div, want, spread_gx, spread};
    for (Tensor *t : all) tensor_free(t);
}

/* A summed or mean loss: one gradient for every position (go_scalar), over
 * the mean's divisor; the body as the CPU, and both as the gradient
 * divided first and spread over the positions. */
START_TEST(test_backward_scalar_gradient)
{
    int checked = 0;
    for (int c = 0; c < NCASES; c++)
        for (int v = 0; v < NVARIANTS; v++)
            for (int dt = CT_F32; dt <= CT_F64; dt++)
                for (int with_div = 0; with_div < 2; with_div++)
                    check_scalar(cases[c], variants[v], (CtDType)dt, with_div, &checked);
    ck_assert_int_gt(checked, NCASES * NVARIANTS * 2 * 2);
}
END_TEST

/* The target check reports a bad target after the op has run (range.cuh),
 * and the backward does not check again: a target outside the classes gets
 * a NaN loss and weight 0 in the forward and a zero row in the backward
 * (no read out of bounds, which ASan would catch); every other position is
 * the CPU's, as with that target ignored. */
START_TEST(test_backward_bad_target_zero_row)
{
    int64_t shape[3] = {4, 5, 3}, pos[2] = {4, 3};
    Variant v = {true, false, true, -100, 0.1};
    CtCrossEntropyParams p = {4, 5, 3, -100, true, false, 0.1, false, false};
    Tensor *x = ch_rand(3, shape, CT_F32, -3, 3, 5);
    Tensor *w = ch_rand(1, &shape[1], CT_F32, 0.5, 2, 13);
    Tensor *go = ch_rand(2, pos, CT_F32, -1, 1, 17);
    Tensor *tg = targets(4, 5, 3, v, 11), *ignored = targets(4, 5, 3, v, 11);
    int64_t *t = (int64_t *)ct_ptr(tg), *ti = (int64_t *)ct_ptr(ignored);
    t[2] = 5, t[7] = -1, t[10] = 1000000;
    ti[2] = ti[7] = ti[10] = -100;
    Tensor *want = ch_out(3, shape, CT_F32), *got = ch_out(3, shape, CT_F32);
    Tensor *loss = ch_out(2, pos, CT_F32), *wout = ch_out(2, pos, CT_F32);
    Tensor *gl = ch_out(2, pos, CT_F32), *gw = ch_out(2, pos, CT_F32);
    CtOpCall fwd = {CT_OP_CROSS_ENTROPY, {loss, wout}, {x, ignored, w}, &p, NULL, NULL};
    CtOpCall bwd = {CT_OP_CROSS_ENTROPY_BWD, {want}, {x, ignored, w, go}, &p, NULL, NULL};
    ch_cpu(fwd);
    ch_cpu(bwd);
    ChShape shapes[2];
    int ns = ch_shapes(12, shapes);
    for (int k = 0; k < ns; k++) {
        ch_launch(shapes[k].grid, shapes[k].block, [&](CtThread th) {
            ct_ce_bwd_thread<float>(th, p, (const float *)ct_ptr(x), t,
                                    (const float *)ct_ptr(w), (const float *)ct_ptr(go),
                                    (const float *)NULL, (float *)ct_ptr(got));
        });
        ch_assert_same_bytes(want, got, "bad targets");
        /* the forward: NaN loss and weight 0 there, the rest as the CPU's */
        unsigned long long first = ~0ull;
        ch_launch(shapes[k].grid, shapes[k].block, [&](CtThread th) {
            ct_ce_fwd_thread<float>(th, p, (const float *)ct_ptr(x), t,
                                    (const float *)ct_ptr(w), (float *)ct_ptr(gl),
                                    (float *)ct_ptr(gw), &first);
        });
        ck_assert_int_eq((int64_t)first, 2);
        float *l = (float *)ct_ptr(gl), *lw = (float *)ct_ptr(gw);
        float *ref = (float *)ct_ptr(loss), *refw = (float *)ct_ptr(wout);
        for (int i = 0; i < 12; i++) {
            bool bad = i == 2 || i == 7 || i == 10;
            ck_assert_msg(bad ? isnan(l[i]) && lw[i] == 0
                              : !memcmp(&l[i], &ref[i], 4) &&
                                    !memcmp(&lw[i], &refw[i], 4),
                          "forward at %d", i);
        }
    }
    tensor_free(x);
    tensor_free(w);
    tensor_free(go);
    tensor_free(tg);
    tensor_free(ignored);
    tensor_free(want);
    tensor_free(got);
    tensor_free(loss);
    tensor_free(wout);
    tensor_free(gl);
    tensor_free(gw);
}
END_TEST

/* out <- the CUDA REDUCE thread's sum of x (every dim), as the backend
 * launches it for up to CT_CE_FOLD_MAX elements (one thread, no split). */
template <typename T> static void reduce_sum(const Tensor *x, Tensor *out)
{
    int64_t ones[2] = {1, 1};
    Tensor *y = ch_out(2, ones, tensor_dtype(x));
    CtCudaReduce g;
    ct_cuda_reduce_init(&g, x, y, NULL);
    ck_assert_int_eq(ct_reduce_split(g).parts, 1);
    ch_launch(1, 1, [&](CtThread th) {
        ct_reduce_thread<T, CT_RED_SUM>(th, (T *)ct_ptr(y), (int64_t *)NULL,
                                        (const T *)ct_ptr(x), 1.0, g);
    });
    memcpy(ct_ptr(out), ct_ptr(y), sizeof(T));
    tensor_free(y);
}

/* One case of test_fold_as_reduce: the fold kernel's work (one block of
 * CT_CUDA_THREADS, then thread 0's fold) against the unfolded forward, a
 * REDUCE of each output and a division in T. */
template <typename T>
static void check_fold(const int64_t *c, const Variant &v, bool mean, int *checked)
{
    CtDType dt = sizeof(T) == 4 ? CT_F32 : CT_F64;
    int64_t n = c[0], nc = c[1], inner = c[2], pos[2] = {n, inner}, np = n * inner;
    CtCrossEntropyParams p = {n,           nc,          inner, v.ignore, v.use_ignore,
                              v.log_input, v.smoothing, true,  true};
    Tensor *x = ch_rand(3, c, dt, v.log_input ? -6 : -3, v.log_input ? 0 : 3, 5);
    Tensor *tg = targets(n, nc, inner, v, 11);
    Tensor *w = v.weight ? ch_rand(1, &nc, dt, 0.5, 2, 13) : NULL;
    Tensor *loss = ch_out(2, pos, dt), *wout = mean ? ch_out(2, pos, dt) : NULL;
    CtCrossEntropyParams pn = p;
    pn.fold = false;
    CtOpCall fwd = {CT_OP_CROSS_ENTROPY, {loss, wout}, {x, tg, w}, &pn, NULL, NULL};
    ch_cpu(fwd);
    Tensor *want = ch_out(0, NULL, dt), *wden = ch_out(0, NULL, dt);
    reduce_sum<T>(loss, want);
    if (mean) {
        reduce_sum<T>(wout, wden);
        *(T *)ct_ptr(want) = *(T *)ct_ptr(want) / *(T *)ct_ptr(wden);
    }
    Tensor *gl = ch_out(2, pos, dt), *gw = mean ? ch_out(2, pos, dt) : NULL;
    Tensor *got = ch_out(0, NULL, dt), *gden = ch_out(0, NULL, dt);
    unsigned long long bad = ~0ull;
    ch_launch(1, CT_CUDA_THREADS, [&](CtThread th) {
        ct_ce_fwd_thread<T>(th, p, (const T *)ct_ptr(x), (const int64_t *)ct_ptr(tg),
                            w ? (const T *)ct_ptr(w) : NULL, (T *)ct_ptr(gl),
                            gw ? (T *)ct_ptr(gw) : NULL, &bad);
    });
    ct_ce_fold<T>(np, (const T *)ct_ptr(gl), gw ? (const T *)ct_ptr(gw) : NULL,
                  (T *)ct_ptr(got), (T *)ct_ptr(gden));
    ck_assert(bad == ~0ull);
    ch_assert_same_bytes(loss, gl, "fold: per position");
    ch_assert_same_bytes(want, got, "fold: sum or mean");
    if (mean) ch_assert_same_bytes(wden, gden, "fold: divisor");
    Tensor *all[] = {x, tg, w, loss, wout, want, wden, gl, gw, got, gden};
    for (Tensor *t : all) tensor_free(t);
    ++*checked;
}

/* CROSS_ENTROPY's fold: the bits of the CUDA path it replaces (the loss
 * per position, a REDUCE of it, and of the weights for a mean, and a
 * division), up to CT_CE_FOLD_MAX positions and for none. */
START_TEST(test_fold_as_reduce)
{
    static const int64_t more[][3] = {{CT_CE_FOLD_MAX, 3, 1}, {5, 4, 409}};
    int checked = 0;
    for (int k = 0; k < NCASES + 2; k++) {
        const int64_t *c = k < NCASES ? cases[k] : more[k - NCASES];
        ck_assert_int_le(c[0] * c[2], CT_CE_FOLD_MAX);
        for (int v = 0; v < NVARIANTS; v++)
            for (int mean = 0; mean < 2; mean++) {
                check_fold<float>(c, variants[v], mean, &checked);
                check_fold<double>(c, variants[v], mean, &checked);
            }
    }
    ck_assert_int_eq(checked, (NCASES + 2) * NVARIANTS * 2 * 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_cross_entropy");
    TCase *tc = tcase_create("cross_entropy");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_cross_entropy_matches_cpu);
    tcase_add_test(tc, test_bad_target_position);
    tcase_add_test(tc, test_backward_bad_target_zero_row);
    tcase_add_test(tc, test_backward_scalar_gradient);
    tcase_add_test(tc, test_fold_as_reduce);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
