/* cuda_host_layer_norm: the LAYER_NORM and LAYER_NORM_BWD thread bodies
 * (tensor/cuda/norm_body.h) against the CPU backend, bit for bit: f32 and
 * f64, with weight and bias, either, or neither; dx, dweight and dbias each
 * asked for or not; rows that are one lane group, have a tail, fill several
 * CT_LN_ROW_BLOCK blocks (the fixed-order column sums) or reach
 * CT_LN_MAX_BLOCKS; no rows. */
#include "data.h"
#include "tensor/cuda/norm_body.h"

/* (rows, d) */
static const int64_t cases[][2] = {
    {1, 1}, {0, 6}, {3, 8}, {5, 37}, {300, 9}, {700, 3}, {2, 300}, {16500, 2},
};
#define NCASES ((int)(sizeof cases / sizeof *cases))

template <typename T> static const T *cptr(const Tensor *t)
{
    return t ? (const T *)ct_ptr(t) : NULL;
}
template <typename T> static T *mptr(Tensor *t)
{
    return t ? (T *)ct_ptr(t) : NULL;
}

struct LnTensors {
    Tensor *x, *w, *b, *g;            /* inputs */
    Tensor *y, *stats, *dx, *dw, *db; /* outputs */
};

template <typename T>
static void run_bodies(const ChShape &rs, const ChShape &cs, const CtLayerNormParams &p,
                       const LnTensors &in, LnTensors &o)
{
    ch_launch(rs.grid, rs.block, [&](CtThread t) {
        ct_ln_fwd_thread<T>(t, p, cptr<T>(in.x), cptr<T>(in.w), cptr<T>(in.b),
                            mptr<T>(o.y), mptr<T>(o.stats));
    });
    if (o.dx)
        ch_launch(rs.grid, rs.block, [&](CtThread t) {
            ct_ln_bwd_dx_thread<T>(t, p, cptr<T>(in.g), cptr<T>(in.x), cptr<T>(in.w),
                                   cptr<T>(in.stats), mptr<T>(o.dx));
        });
    if (o.dw || o.db)
        ch_launch(cs.grid, cs.block, [&](CtThread t) {
            ct_ln_bwd_wb_thread<T>(t, p, ct_ln_row_block(p.rows), cptr<T>(in.g),
                                   cptr<T>(in.x), cptr<T>(in.stats), mptr<T>(o.dw),
                                   mptr<T>(o.db));
        });
}

static LnTensors outputs(const int64_t *c, CtDType dt, int grads)
{
    int64_t st[2] = {2, c[0]};
    LnTensors o = {};
    o.y = ch_out(2, c, dt);
    o.stats = ch_out(2, st, dt);
    o.dx = grads & 1 ? ch_out(2, c, dt) : NULL;
    o.dw = grads & 2 ? ch_out(1, c + 1, dt) : NULL;
    o.db = grads & 4 ? ch_out(1, c + 1, dt) : NULL;
    return o;
}

static void free_all(LnTensors &t)
{
    Tensor *all[] = {t.x, t.w, t.b, t.g, t.y, t.stats, t.dx, t.dw, t.db};
    for (Tensor *a : all) tensor_free(a);
}

static void check_case(const int64_t *c, CtDType dt, int affine, int grads, int *checked)
{
    CtLayerNormParams p = {c[0], c[1], 1e-5};
    LnTensors in = {};
    in.x = ch_rand(2, c, dt, -2, 3, 3);
    in.g = ch_rand(2, c, dt, -1, 1, 5);
    in.w = affine & 1 ? ch_rand(1, c + 1, dt, 0.5, 1.5, 7) : NULL;
    in.b = affine & 2 ? ch_rand(1, c + 1, dt, -1, 1, 9) : NULL;
    LnTensors want = outputs(c, dt, grads);
    CtOpCall fwd = {
        CT_OP_LAYER_NORM, {want.y, want.stats}, {in.x, in.w, in.b}, &p, NULL, NULL};
    ch_cpu(fwd);
    in.stats = want.stats;
    CtOpCall bwd = {CT_OP_LAYER_NORM_BWD,
                    {want.dx, want.dw, want.db},
                    {in.g, in.x, in.w, in.stats},
                    &p,
                    NULL,
                    NULL};
    ch_cpu(bwd);
    ChShape rs[2], cs[2];
    ch_shapes(c[0], rs);
    ch_shapes(c[1], cs);
    for (int k = 0; k < 2; k++) {
        LnTensors got = outputs(c, dt, grads);
        if (dt == CT_F32)
            run_bodies<float>(rs[k], cs[k], p, in, got);
        else
            run_bodies<double>(rs[k], cs[k], p, in, got);
        char what[96];
        snprintf(what, sizeof what, "%s (%lld, %lld) affine %d grads %d launch %d",
                 ct_dtype_name(dt), (long long)c[0], (long long)c[1], affine, grads, k);
        ch_assert_same_bytes(want.y, got.y, what);
        ch_assert_same_bytes(want.stats, got.stats, what);
        if (got.dx) ch_assert_same_bytes(want.dx, got.dx, what);
        if (got.dw) ch_assert_same_bytes(want.dw, got.dw, what);
        if (got.db) ch_assert_same_bytes(want.db, got.db, what);
        free_all(got);
        ++*checked;
    }
    in.stats = NULL;
    free_all(in);
    free_all(want);
}

START_TEST(test_layer_norm_matches_cpu)
{
    int checked = 0;
    for (int c = 0; c < NCASES; c++)
        for (int dt = CT_F32; dt <= CT_F64; dt++)
            for (int affine = 0; affine < 4; affine++)
                for (int grads = 1; grads < 8; grads += 3) /* dx; dx+db; dw+db */
                    check_case(cases[c], (CtDType)dt, affine, grads, &checked);
    ck_assert_int_eq(checked, NCASES * 2 * 4 * 3 * 2);
}
END_TEST

/* The column sums of 16500 rows use CT_LN_MAX_BLOCKS blocks, not 65. */
START_TEST(test_row_blocks)
{
    ck_assert_int_eq(ct_ln_row_block(0), 0);
    ck_assert_int_eq(ct_ln_row_block(10), 10);
    ck_assert_int_eq(ct_ln_row_block(257), 129);
    ck_assert_int_eq(ct_ln_row_block(16500), 258);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_layer_norm");
    TCase *tc = tcase_create("layer_norm");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_layer_norm_matches_cpu);
    tcase_add_test(tc, test_row_blocks);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
