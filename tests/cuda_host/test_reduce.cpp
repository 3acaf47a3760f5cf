/* cuda_host_reduce: the REDUCE and ARG_REDUCE thread bodies
 * (tensor/cuda/reduce_body.h) against the CPU backend's kernels on f32 and
 * f64, over every subset of dims of every shape case, inputs in every layout
 * (broadcast included), contiguous and strided outputs.
 *
 * Inputs are multiples of 1/4 in [-3, 3), so every partial sum is exact in
 * f32 and the sums (scaled or not) must match bit for bit although the CPU
 * adds in another order; MAX/MIN values and indices and ARG_REDUCE match bit
 * for bit by construction. VAR's squared deviations round, so it is checked
 * within (n + 4) ulp of the result (n terms summed in T on the CPU, in
 * double here). */
#include <vector>

#include "tensor/cuda/reduce_body.h"
#include "layouts.h"
#include "values.h"

typedef struct Kind {
    CtReduceKind kind;
    double scale;
} Kind;
static const Kind kinds[] = {
    {CT_RED_SUM, 1.0}, {CT_RED_SUM, 0.25}, {CT_RED_MAX, 1.0},
    {CT_RED_MIN, 1.0}, {CT_RED_VAR, 0.5},
};
#define NKINDS ((int)(sizeof kinds / sizeof *kinds))

static Tensor *input_buffer(int64_t n, CtDType dt, unsigned seed)
{
    Tensor *r = tu_rand64(1, &n, -3, 3, seed, false);
    double *v = (double *)ct_ptr(r);
    for (int64_t i = 0; i < n; i++) v[i] = floor(v[i] * 4) / 4;
    Tensor *buf = ch_buffer(n, dt);
    ck_assert_int_eq(tensor_copy_(buf, r), CT_OK);
    tensor_free(r);
    return buf;
}

static void cpu_call(CtOp op, Tensor *out0, Tensor *out1, const Tensor *in0,
                     const Tensor *in1, const void *params)
{
    CtOpCall call = {};
    call.op = op;
    call.out[0] = out0;
    call.out[1] = out1;
    call.in[0] = in0;
    call.in[1] = in1;
    call.params = params;
    ck_assert_int_eq(ct_dispatch(&call), CT_OK);
}

template <typename T>
static void run_reduce(ChShape sh, CtReduceKind kind, Tensor *y, Tensor *yi,
                       const Tensor *x, double scale, const CtCudaReduce &g)
{
    T *py = (T *)ct_ptr(y);
    int64_t *pi = yi ? (int64_t *)ct_ptr(yi) : NULL;
    const T *px = (const T *)ct_ptr(x);
    ch_launch(sh.grid, sh.block, [&](CtThread t) {
        switch (kind) {
        case CT_RED_SUM: ct_reduce_thread<T, CT_RED_SUM>(t, py, pi, px, scale, g); break;
        case CT_RED_MAX: ct_reduce_thread<T, CT_RED_MAX>(t, py, pi, px, scale, g); break;
        case CT_RED_MIN: ct_reduce_thread<T, CT_RED_MIN>(t, py, pi, px, scale, g); break;
        case CT_RED_VAR: ct_reduce_thread<T, CT_RED_VAR>(t, py, pi, px, scale, g); break;
        }
    });
}

/* The split path (ct_reduce_split) as reduce.cu launches it, with a given
 * split: VAR's mean passes first, then the kind's part and fold passes. */
template <typename T, int M>
static void run_split_kind(ChShape sh, T *y, int64_t *yi, const T *x, double scale,
                           const CtCudaReduce &g, CtReduceSplit s)
{
    int64_t nq = g.kn * s.parts;
    std::vector<double> pv((size_t)nq + 1), mean((size_t)g.kn + 1);
    std::vector<int64_t> pi((size_t)nq + 1);
    if (M == CT_RED_VAR) {
        ch_launch(sh.grid, sh.block, [&](CtThread t) {
            ct_reduce_part_thread<T, CT_RED_SUM>(t, pv.data(), NULL, x, NULL, g, s);
        });
        ch_launch(sh.grid, sh.block, [&](CtThread t) {
            ct_reduce_fold_thread<T, CT_RED_SUM>(t, NULL, NULL, mean.data(), pv.data(),
                                                 NULL, 1.0 / (double)g.rn, g, s);
        });
    }
    ch_launch(sh.grid, sh.block, [&](CtThread t) {
        ct_reduce_part_thread<T, M>(t, pv.data(), pi.data(), x, mean.data(), g, s);
    });
    ch_launch(sh.grid, sh.block, [&](CtThread t) {
        ct_reduce_fold_thread<T, M>(t, y, yi, NULL, pv.data(), pi.data(), scale, g, s);
    });
}

template <typename T>
static void run_split(ChShape sh, CtReduceKind kind, Tensor *y, Tensor *yi,
                      const Tensor *x, double scale, const CtCudaReduce &g,
                      CtReduceSplit s)
{
    T *py = (T *)ct_ptr(y);
    int64_t *pi = yi ? (int64_t *)ct_ptr(yi) : NULL;
    const T *px = (const T *)ct_ptr(x);
    switch (kind) {
    case CT_RED_SUM: run_split_kind<T, CT_RED_SUM>(sh, py, pi, px, scale, g, s); break;
    case CT_RED_MAX: run_split_kind<T, CT_RED_MAX>(sh, py, pi, px, scale, g, s); break;
    case CT_RED_MIN: run_split_kind<T, CT_RED_MIN>(sh, py, pi, px, scale, g, s); break;
    case CT_RED_VAR: run_split_kind<T, CT_RED_VAR>(sh, py, pi, px, scale, g, s); break;
    }
}

/* |got - want| <= (n + 4) ulp(want) elementwise (NaN matches NaN). */
template <typename T>
static void assert_close(const Tensor *want, const Tensor *got, int64_t n,
                         const char *what)
{
    const T *w = (const T *)ct_ptr(want), *g = (const T *)ct_ptr(got);
    const double eps = sizeof(T) == 4 ? 0x1p-23 : 0x1p-52;
    for (int64_t i = 0; i < tensor_numel(want); i++) {
        if (w[i] != w[i] && g[i] != g[i]) continue;
        double tol = (double)(n + 4) * eps * fabs((double)w[i]);
        if (!(fabs((double)g[i] - (double)w[i]) <= tol))
            ck_abort_msg("%s: element %lld: %.17g vs %.17g", what, (long long)i,
                         (double)g[i], (double)w[i]);
    }
}

/* ARG_REDUCE of gy at the indices yi (y geometry) into a contiguous x-shaped
 * out, CPU against the body (after the zeroing the kernel does with a
 * memset). */
template <typename T>
static void check_scatter(const ChShapeCase &sc, const Tensor *gy, const Tensor *yi,
                          const char *what)
{
    int64_t nb = ch_buffer_size(sc);
    CtDType dt = sizeof(T) == 4 ? CT_F32 : CT_F64;
    Tensor *want = ch_buffer(nb, dt), *got = ch_clone(want);
    Tensor *ow = ch_view(want, CH_CONTIGUOUS, sc), *og = ch_view(got, CH_CONTIGUOUS, sc);
    cpu_call(CT_OP_ARG_REDUCE, ow, NULL, gy, yi, NULL);
    memset(ct_ptr(og), 0, (size_t)tensor_numel(og) * sizeof(T));
    CtCudaReduce g;
    ct_cuda_reduce_init(&g, og, gy, yi);
    ChShape shapes[2];
    int ns = ch_shapes(g.kn, shapes);
    for (int s = 0; s < ns; s++) {
        ch_launch(shapes[s].grid, shapes[s].block, [&](CtThread t) {
            ct_scatter_thread<T>(t, (T *)ct_ptr(og), (const T *)ct_ptr(gy),
                                 (const int64_t *)ct_ptr(yi), g);
        });
        ch_assert_same_bytes(want, got, what);
    }
    tensor_free(want);
    tensor_free(got);
}

/* One dtype, one shape case: every dims mask, kind and layout. */
template <typename T> static int check_case(int c)
{
    const CtDType dt = sizeof(T) == 4 ? CT_F32 : CT_F64;
    const ChShapeCase &sc = ch_cases[c];
    int64_t nb = ch_buffer_size(sc);
    Tensor *xbuf = input_buffer(nb, dt, 41 + c);
    int checked = 0;
    for (int mask = 0; mask < (1 << sc.ndim); mask++) {
        ChShapeCase yc = sc;
        for (int d = 0; d < sc.ndim; d++)
            if (mask >> d & 1) yc.shape[d] = 1;
        int64_t nyb = ch_buffer_size(yc);
        Tensor *gbuf = input_buffer(nyb, dt, 43 + c);
        for (int k = 0; k < NKINDS; k++) {
            bool ext = kinds[k].kind == CT_RED_MAX || kinds[k].kind == CT_RED_MIN;
            CtReduceParams p = {kinds[k].kind, kinds[k].scale};
            for (int lx = 0; lx < CH_LAYOUTS; lx++) {
                for (int ly = 0; ly < CH_BROADCAST; ly += CH_STRIDED) {
                    CtScope *scope = ct_scope_open();
                    Tensor *x = ch_view(xbuf, lx, sc);
                    Tensor *want = ch_buffer(nyb, dt), *got = ch_clone(want);
                    Tensor *iwant = ch_buffer(nyb, CT_I64), *igot = ch_clone(iwant);
                    Tensor *yw = ch_view(want, ly, yc), *yg = ch_view(got, ly, yc);
                    Tensor *iw = ext ? ch_view(iwant, ly, yc) : NULL;
                    Tensor *ig = ext ? ch_view(igot, ly, yc) : NULL;
                    if (x) {
                        cpu_call(CT_OP_REDUCE, yw, iw, x, NULL, &p);
                        CtCudaReduce g;
                        ct_cuda_reduce_init(&g, x, yg, ig);
                        ChShape shapes[2];
                        int ns = ch_shapes(g.kn, shapes);
                        char what[128];
                        snprintf(what, sizeof what,
                                 "%s kind %d scale %g, mask %d, %s -> %s, case %d",
                                 ct_dtype_name(dt), (int)p.kind, p.scale, mask,
                                 ch_layout_names[lx], ch_layout_names[ly], c);
                        /* the one-thread path under both shapes, then a split
                         * into runs of a third of each slice */
                        int64_t len = g.rn > 2 ? (g.rn + 2) / 3 : 1;
                        CtReduceSplit split = {(g.rn + len - 1) / len, len};
                        for (int s = 0; s < ns + 1; s++) {
                            if (s < ns)
                                run_reduce<T>(shapes[s], p.kind, yg, ig, x, p.scale, g);
                            else if (split.parts > 0)
                                run_split<T>(shapes[1], p.kind, yg, ig, x, p.scale, g,
                                             split);
                            if (p.kind == CT_RED_VAR)
                                assert_close<T>(want, got, g.rn, what);
                            else
                                ch_assert_same_values(want, got, what);
                            ch_assert_same_bytes(iwant, igot, what);
                            checked++;
                        }
                        if (ext) check_scatter<T>(sc, ch_view(gbuf, ly, yc), iw, what);
                    }
                    tensor_free(want);
                    tensor_free(got);
                    tensor_free(iwant);
                    tensor_free(igot);
                    ct_scope_close(scope);
                }
            }
        }
        tensor_free(gbuf);
    }
    tensor_free(xbuf);
    return checked;
}

START_TEST(test_reduce_every_dims_kind_and_layout)
{
    int checked = 0;
    for (int c = 0; c < CH_NCASES; c++)
        checked += check_case<float>(c) + check_case<double>(c);
    ck_assert_int_gt(checked, 2000);
}
END_TEST

/* Max/min: NaN wins (the first one), ties go to the first element, an
 * all -inf slice keeps index 0; out-of-range indices scatter nothing. */
START_TEST(test_extremum_nan_ties_and_scatter_range)
{
    const float v[6] = {2, 5, 5, NAN, 1, NAN};
    Tensor *x = ch_buffer(6, CT_F32), *y = ch_buffer(1, CT_F32),
           *yi = ch_buffer(1, CT_I64);
    memcpy(ct_ptr(x), v, sizeof v);
    CtCudaReduce g;
    int64_t idx;
    ct_cuda_reduce_init(&g, x, y, yi);
    ck_assert_int_eq(g.rn, 6);
    ck_assert(isnan((ct_reduce_extremum<float, CT_RED_MAX>(g, (const float *)ct_ptr(x), 0,
                                                           g.rn, &idx))));
    ck_assert_int_eq(idx, 3);
    CtScope *scope = ct_scope_open();
    Tensor *head = tensor_slice(x, 0, 0, 3, 1);
    ct_cuda_reduce_init(&g, head, y, yi);
    ck_assert_float_eq((ct_reduce_extremum<float, CT_RED_MAX>(g, (const float *)ct_ptr(x),
                                                              0, g.rn, &idx)),
                       5);
    ck_assert_int_eq(idx, 1);
    ck_assert_float_eq((ct_reduce_extremum<float, CT_RED_MIN>(g, (const float *)ct_ptr(x),
                                                              0, g.rn, &idx)),
                       2);
    ck_assert_int_eq(idx, 0);
    const float ninf[2] = {-INFINITY, -INFINITY};
    memcpy(ct_ptr(x), ninf, sizeof ninf);
    ct_cuda_reduce_init(&g, tensor_slice(x, 0, 0, 2, 1), y, yi);
    ck_assert_float_eq((ct_reduce_extremum<float, CT_RED_MAX>(g, (const float *)ct_ptr(x),
                                                              0, g.rn, &idx)),
                       -INFINITY);
    ck_assert_int_eq(idx, 0);
    /* scatter: index 6 is outside the slice of 6 */
    memset(ct_ptr(x), 0, 6 * sizeof(float));
    *(float *)ct_ptr(y) = 7;
    *(int64_t *)ct_ptr(yi) = 6;
    ct_cuda_reduce_init(&g, x, y, yi);
    ct_scatter_thread<float>(CtThread{0, 0, 1, 1}, (float *)ct_ptr(x),
                             (const float *)ct_ptr(y), (const int64_t *)ct_ptr(yi), g);
    for (int i = 0; i < 6; i++) ck_assert_float_eq(((float *)ct_ptr(x))[i], 0);
    *(int64_t *)ct_ptr(yi) = 4;
    ct_scatter_thread<float>(CtThread{0, 0, 1, 1}, (float *)ct_ptr(x),
                             (const float *)ct_ptr(y), (const int64_t *)ct_ptr(yi), g);
    ck_assert_float_eq(((float *)ct_ptr(x))[4], 7);
    ct_scope_close(scope);
    tensor_free(x);
    tensor_free(y);
    tensor_free(yi);
}
END_TEST

/* Splits only few outputs with long slices, into runs that cover each slice
 * exactly, and bounds the runs in all. */
START_TEST(test_split_choice)
{
    const int64_t kn[] = {1, 1, 7, 1000, 4095, 4096, 3};
    const int64_t rn[] = {2047, 1 << 20, 5000, 1000000, 1 << 22, 1 << 22, 0};
    for (int i = 0; i < 7; i++) {
        CtCudaReduce g = {};
        g.kn = kn[i];
        g.rn = rn[i];
        CtReduceSplit s = ct_reduce_split(g);
        bool split = kn[i] < CT_REDUCE_SPLIT_OUTPUTS && rn[i] >= 2 * CT_REDUCE_SPLIT_LEN;
        ck_assert_int_eq(s.parts > 1, split);
        if (!split) {
            ck_assert_int_eq(s.parts, 1);
            continue;
        }
        ck_assert_int_le((s.parts - 1) * s.len, rn[i] - 1);
        ck_assert_int_ge(s.parts * s.len, rn[i]);
        ck_assert_int_le(s.parts * kn[i], CT_REDUCE_SPLIT_THREADS);
    }
    CtCudaReduce g = {};
    g.kn = 1;
    g.rn = 1 << 20;
    ck_assert_int_eq(ct_reduce_split(g).parts, 1024);
    ck_assert_int_eq(ct_reduce_split(g).len, 1024);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_reduce");
    TCase *tc = tcase_create("reduce");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_reduce_every_dims_kind_and_layout);
    tcase_add_test(tc, test_extremum_nan_ties_and_scatter_range);
    tcase_add_test(tc, test_split_choice);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
