/* cuda_host_index: the INDEX_SELECT, INDEX_ADD, GATHER, SCATTER_ADD and
 * ONE_HOT thread bodies (tensor/cuda/index_body.h) against the CPU backend,
 * bit for bit: copies in every element size (f64, f32, bf16, u8, i64, ...),
 * the accumulating ops in f32 and f64 with repeated indices (terms added in
 * index order) into non-zero outputs, every gather/scatter dim with an
 * index smaller than the source, empty indices; the range check finding
 * the first bad index where the CPU reports it, and the bodies skipping a
 * bad index (the check reports it after the op has run). */
#include "data.h"
#include "tensor/cuda/index_body.h"
#include "tensor/cuda/range_body.h"

static const CtDType copy_dtypes[] = {CT_F64, CT_F32, CT_BF16, CT_U8, CT_I64, CT_BOOL};
#define NCOPY ((int)(sizeof copy_dtypes / sizeof *copy_dtypes))

/* Runs a copy body templated on the element word W for dt's size. */
template <template <typename> class Body, typename... A>
static void by_size(CtDType dt, A &&...a)
{
    switch (ct_dtype_size(dt)) {
    case 8: Body<uint64_t>::run(a...); break;
    case 4: Body<uint32_t>::run(a...); break;
    case 2: Body<uint16_t>::run(a...); break;
    default: Body<uint8_t>::run(a...); break;
    }
}

/* Source data for a copy: random bytes are fine (the op moves words). */
static Tensor *copy_src(int ndim, const int64_t *shape, CtDType dt, unsigned seed)
{
    Tensor *t = ch_out(ndim, shape, dt);
    unsigned char *b = (unsigned char *)ct_ptr(t);
    size_t n = (size_t)tensor_numel(t) * ct_dtype_size(dt);
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(seed * 131 + i * 7 + i / 3);
    if (dt == CT_BOOL)
        for (size_t i = 0; i < n; i++) b[i] &= 1;
    return t;
}

/* Runs acc(launch, got) on a copy `got` of orig under each of the nsh
 * launches and compares with want. */
template <typename F>
static void check_accumulate(const ChShape *sh, int nsh, const Tensor *orig,
                             const Tensor *want, const char *what, int *checked, F acc)
{
    for (int s = 0; s < nsh; s++) {
        Tensor *got = ch_clone(orig);
        acc(sh[s], got);
        ch_assert_same_bytes(want, got, what);
        tensor_free(got);
        ++*checked;
    }
}

/* ---------------------------------------------------- index_select / add */

/* (outer, size, inner), index shape */
struct SelectCase {
    int64_t outer, size, inner;
    int ind;
    int64_t ishape[2];
};
static const SelectCase select_cases[] = {
    {1, 5, 1, 1, {7}},  {3, 10, 4, 2, {2, 3}}, {2, 4, 300, 1, {6}},
    {1, 30, 9, 1, {0}}, {4, 1, 70, 1, {5}},    {0, 3, 2, 1, {4}},
};

template <typename W> struct SelectBody {
    static void run(const ChShape &sh, const CtIndexParams &p, const Tensor *ix,
                    const Tensor *src, Tensor *out)
    {
        ch_launch(sh.grid, sh.block, [&](CtThread t) {
            ct_index_select_thread<W>(t, p, (const int64_t *)ct_ptr(ix),
                                      (const W *)ct_ptr(src), (W *)ct_ptr(out));
        });
    }
};

template <typename T>
static void index_add_body(const ChShape &sh, const CtIndexParams &p, const Tensor *ix,
                           const Tensor *src, Tensor *out)
{
    ch_launch(sh.grid, sh.block, [&](CtThread t) {
        ct_index_add_thread<T>(t, p, (const int64_t *)ct_ptr(ix), (const T *)ct_ptr(src),
                               (T *)ct_ptr(out));
    });
}

START_TEST(test_index_select_and_add)
{
    int checked = 0;
    for (const SelectCase &c : select_cases) {
        int64_t k = c.ind == 1 ? c.ishape[0] : c.ishape[0] * c.ishape[1];
        CtIndexParams p = {"index_select", 1, c.outer, c.size, c.inner, k};
        int64_t big[3] = {c.outer, c.size, c.inner}, small[3] = {c.outer, k, c.inner};
        Tensor *ix = ch_index(c.ind, c.ishape, c.size, 3);
        ChShape sel[2], add[2];
        ch_shapes(c.outer * k * c.inner, sel);
        ch_shapes(c.outer * c.inner, add);
        for (CtDType dt : copy_dtypes) {
            Tensor *src = copy_src(3, big, dt, 5), *want = ch_out(3, small, dt);
            CtOpCall call = {CT_OP_INDEX_SELECT, {want}, {src, ix}, &p, NULL, NULL};
            ch_cpu(call);
            for (int s = 0; s < 2; s++) {
                Tensor *got = ch_out(3, small, dt);
                by_size<SelectBody>(dt, sel[s], p, ix, src, got);
                ch_assert_same_bytes(want, got, "index_select");
                tensor_free(got);
                checked++;
            }
            tensor_free(src);
            tensor_free(want);
        }
        for (int dt = CT_F32; dt <= CT_F64; dt++) {
            Tensor *src = ch_rand(3, small, (CtDType)dt, -1, 1, 7);
            Tensor *orig = ch_rand(3, big, (CtDType)dt, -1, 1, 9), *want = ch_clone(orig);
            CtIndexParams pa = p;
            pa.name = "index_add";
            CtOpCall call = {CT_OP_INDEX_ADD, {want}, {src, ix}, &pa, NULL, NULL};
            ch_cpu(call);
            check_accumulate(add, 2, orig, want, "index_add", &checked,
                             [&](const ChShape &sh, Tensor *got) {
                                 if (dt == CT_F32)
                                     index_add_body<float>(sh, pa, ix, src, got);
                                 else
                                     index_add_body<double>(sh, pa, ix, src, got);
                             });
            tensor_free(src);
            tensor_free(orig);
            tensor_free(want);
        }
        tensor_free(ix);
    }
    ck_assert_int_eq(checked, 6 * (NCOPY + 2) * 2);
}
END_TEST

/* ------------------------------------------------------ gather / scatter */

template <typename W> struct GatherBody {
    static void run(const ChShape &sh, const CtGatherGeom &g, const Tensor *ix,
                    const Tensor *src, Tensor *out)
    {
        ch_launch(sh.grid, sh.block, [&](CtThread t) {
            ct_gather_thread<W>(t, g, tensor_numel(ix), (const int64_t *)ct_ptr(ix),
                                (const W *)ct_ptr(src), (W *)ct_ptr(out));
        });
    }
};

template <typename T>
static void scatter_body(const ChShape &sh, const CtGatherGeom &g, const Tensor *ix,
                         const Tensor *src, Tensor *out)
{
    int64_t outer = tensor_numel(ix) / (g.j * g.inner);
    ch_launch(sh.grid, sh.block, [&](CtThread t) {
        ct_scatter_add_thread<T>(t, g, outer, (const int64_t *)ct_ptr(ix),
                                 (const T *)ct_ptr(src), (T *)ct_ptr(out));
    });
}

/* big shape, index shape (index.shape[d] <= big.shape[d] for d != dim) */
struct GatherCase {
    int ndim;
    int64_t big[3], ind[3];
};
static const GatherCase gather_cases[] = {
    {1, {5}, {9}},
    {2, {4, 6}, {3, 5}},
    {3, {3, 4, 5}, {2, 6, 4}},
    {3, {2, 3, 300}, {2, 2, 290}},
    {2, {3, 4}, {0, 4}},
};

static void check_gather_case(const GatherCase &c, int dim, int *checked)
{
    int64_t ind[3] = {c.ind[0], c.ind[1], c.ind[2]};
    if (c.ndim == 3 && dim != 1) { /* keep index.shape[d] <= big.shape[d] off dim */
        ind[1] = c.big[1];
        ind[dim] = c.ind[1];
    }
    if (c.ndim == 2 && dim == 1) ind[0] = c.ind[0], ind[1] = c.big[1] + 2;
    CtGatherParams p = {"gather", dim};
    Tensor *ix = ch_index(c.ndim, ind, c.big[dim], 11 + dim);
    int64_t n = tensor_numel(ix);
    CtGatherGeom g;
    ChShape gs[2], ss[2];
    ch_shapes(n, gs);
    for (CtDType dt : copy_dtypes) {
        Tensor *src = copy_src(c.ndim, c.big, dt, 13), *want = ch_out(c.ndim, ind, dt);
        CtOpCall call = {CT_OP_GATHER, {want}, {src, ix}, &p, NULL, NULL};
        ch_cpu(call);
        ct_gather_geom_init(&g, ix, src, dim);
        for (int s = 0; s < 2 && n > 0; s++) {
            Tensor *got = ch_out(c.ndim, ind, dt);
            by_size<GatherBody>(dt, gs[s], g, ix, src, got);
            ch_assert_same_bytes(want, got, "gather");
            tensor_free(got);
            ++*checked;
        }
        tensor_free(src);
        tensor_free(want);
    }
    CtGatherParams ps = {"scatter_add", dim};
    for (int dt = CT_F32; dt <= CT_F64; dt++) {
        Tensor *src = ch_rand(c.ndim, ind, (CtDType)dt, -1, 1, 17);
        Tensor *want = ch_rand(c.ndim, c.big, (CtDType)dt, -1, 1, 19);
        Tensor *base = ch_clone(want);
        CtOpCall call = {CT_OP_SCATTER_ADD, {want}, {src, ix}, &ps, NULL, NULL};
        ch_cpu(call);
        ct_gather_geom_init(&g, ix, want, dim);
        ch_shapes(n > 0 ? n / (g.j * g.inner) * g.inner : 0, ss);
        check_accumulate(ss, n > 0 ? 2 : 0, base, want, "scatter_add", checked,
                         [&](const ChShape &sh, Tensor *got) {
                             if (dt == CT_F32)
                                 scatter_body<float>(sh, g, ix, src, got);
                             else
                                 scatter_body<double>(sh, g, ix, src, got);
                         });
        tensor_free(src);
        tensor_free(want);
        tensor_free(base);
    }
    tensor_free(ix);
}

START_TEST(test_gather_and_scatter_add)
{
    int checked = 0;
    for (const GatherCase &c : gather_cases)
        for (int dim = 0; dim < c.ndim; dim++) check_gather_case(c, dim, &checked);
    /* 1 + 2 + 3 + 3 dims with data, (NCOPY + 2) ops, 2 launches */
    ck_assert_int_eq(checked, 9 * (NCOPY + 2) * 2);
}
END_TEST

/* --------------------------------------------------------------- one_hot */

template <typename W> struct OneHotBody {
    static void run(const ChShape &sh, int64_t classes, const Tensor *ix, Tensor *out,
                    const Tensor *one)
    {
        int64_t n = tensor_numel(ix);
        ch_launch(sh.grid, sh.block, [&](CtThread t) {
            ct_one_hot_thread<W>(t, n, classes, (const int64_t *)ct_ptr(ix),
                                 *(const W *)ct_ptr(one), (W *)ct_ptr(out));
        });
    }
};

START_TEST(test_one_hot_every_dtype)
{
    int checked = 0;
    const int64_t classes[] = {1, 5, 300};
    int64_t ishape[2] = {3, 4}, one_shape = 1;
    for (int64_t nc : classes) {
        Tensor *ix = ch_index(2, ishape, nc, 23);
        int64_t oshape[3] = {3, 4, nc};
        ChShape sh[2];
        ch_shapes(12 * nc, sh);
        for (int dt = 0; dt < CT_DTYPE_COUNT; dt++) {
            Tensor *want = ch_out(3, oshape, (CtDType)dt);
            CtOneHotParams p = {nc};
            CtOpCall call = {CT_OP_ONE_HOT, {want}, {ix}, &p, NULL, NULL};
            ch_cpu(call);
            /* the dtype's 1, as index.cu passes it */
            Tensor *one = ch_out(1, &one_shape, (CtDType)dt);
            ck_assert_int_eq(tensor_fill_(one, 1.0), CT_OK);
            for (int s = 0; s < 2; s++) {
                Tensor *got = ch_out(3, oshape, (CtDType)dt);
                by_size<OneHotBody>((CtDType)dt, sh[s], nc, ix, got, one);
                ch_assert_same_bytes(want, got, "one_hot");
                tensor_free(got);
                checked++;
            }
            tensor_free(one);
            tensor_free(want);
        }
        tensor_free(ix);
    }
    ck_assert_int_eq(checked, 3 * CT_DTYPE_COUNT * 2);
}
END_TEST

/* ----------------------------------------------------------- range check */

/* Bad indices at positions 4 (too big) and 7 (negative): the body finds 4,
 * which the CPU names, and the CPU writes nothing. */
START_TEST(test_bad_index_position)
{
    int64_t ishape[2] = {3, 3}, big[2] = {5, 2}, small[2] = {9, 2};
    Tensor *ix = ch_index(2, ishape, 5, 29);
    int64_t *v = (int64_t *)ct_ptr(ix);
    v[4] = 5;
    v[7] = -2;
    Tensor *src = ch_rand(2, big, CT_F32, -1, 1, 31), *out = ch_out(2, small, CT_F32);
    Tensor *before = ch_clone(out);
    CtIndexParams p = {"embedding", 0, 1, 5, 2, 9};
    CtOpCall call = {CT_OP_INDEX_SELECT, {out}, {src, ix}, &p, NULL, NULL};
    ck_assert_int_eq(ct_dispatch(&call), CT_ERR_INVALID);
    ck_assert_str_eq(ct_last_error(), "embedding: index 5 at position [1, 1] is out of "
                                      "range for dim 0 of size 5");
    ch_assert_same_bytes(before, out, "untouched");
    CtRangeCheck rc = {5, false, 0};
    ChShape sh[2];
    ch_shapes(9, sh);
    for (int s = 0; s < 2; s++) {
        unsigned long long first = ~0ull;
        ch_launch(sh[s].grid, sh[s].block,
                  [&](CtThread t) { ct_range_thread(t, v, 9, rc, &first); });
        ck_assert_int_eq((int64_t)first, 4);
        char at[32];
        ck_assert_str_eq(ct_position_str(ix, (int64_t)first, at, sizeof at), "[1, 1]");
    }
    unsigned long long none = ~0ull;
    v[4] = 0, v[7] = 4;
    ch_launch(1, 4, [&](CtThread t) { ct_range_thread(t, v, 9, rc, &none); });
    ck_assert(none == ~0ull);
    tensor_free(ix);
    tensor_free(src);
    tensor_free(out);
    tensor_free(before);
}
END_TEST

/* The range check reports a bad index after the op has run (range.cuh),
 * so the bodies skip it: a copy writes 0 where it would read, an add adds
 * nothing; no access out of bounds (ASan), the other elements as usual. */
START_TEST(test_bad_indices_are_skipped)
{
    const int64_t ix[3] = {2, 7, -1};
    float src[12], out[12];
    for (int i = 0; i < 12; i++) src[i] = (float)(i + 1);
    CtIndexParams p = {"index_select", 1, 2, 3, 2, 3}; /* (2, 3, 2), k = 3 */
    for (int64_t grid = 1; grid <= 3; grid++) {
        ch_launch(grid, 4,
                  [&](CtThread t) { ct_index_select_thread<float>(t, p, ix, src, out); });
        const float want_sel[12] = {5, 6, 0, 0, 0, 0, 11, 12, 0, 0, 0, 0};
        ck_assert_mem_eq(out, want_sel, sizeof want_sel);
        float acc[12];
        for (int i = 0; i < 12; i++) acc[i] = 100;
        /* out (2, 3, 2) += src (2, 3, 2) rows: only row 0 -> row 2 */
        ch_launch(grid, 4,
                  [&](CtThread t) { ct_index_add_thread<float>(t, p, ix, src, acc); });
        const float want_add[12] = {100, 100, 100, 100, 101, 102,
                                    100, 100, 100, 100, 107, 108};
        ck_assert_mem_eq(acc, want_add, sizeof want_add);
    }
    int64_t bshape[2] = {2, 3}, ishape[2] = {2, 2};
    Tensor *big = ch_out(2, bshape, CT_F32), *index = ch_out(2, ishape, CT_I64);
    float *b = (float *)ct_ptr(big);
    for (int i = 0; i < 6; i++) b[i] = (float)(10 + i);
    const int64_t gix[4] = {0, 3, -2, 2};
    memcpy(ct_ptr(index), gix, sizeof gix);
    CtGatherGeom g;
    ct_gather_geom_init(&g, index, big, 1);
    for (int64_t grid = 1; grid <= 2; grid++) {
        float got[4], sum[6] = {0, 0, 0, 0, 0, 0};
        const float add[4] = {1, 2, 3, 4};
        ch_launch(grid, 2,
                  [&](CtThread t) { ct_gather_thread<float>(t, g, 4, gix, b, got); });
        const float want_g[4] = {10, 0, 0, 15};
        ck_assert_mem_eq(got, want_g, sizeof want_g);
        ch_launch(grid, 2, [&](CtThread t) {
            ct_scatter_add_thread<float>(t, g, 2, gix, add, sum);
        });
        const float want_s[6] = {1, 0, 0, 0, 0, 4};
        ck_assert_mem_eq(sum, want_s, sizeof want_s);
    }
    tensor_free(big);
    tensor_free(index);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_index");
    TCase *tc = tcase_create("index");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_index_select_and_add);
    tcase_add_test(tc, test_gather_and_scatter_add);
    tcase_add_test(tc, test_one_hot_every_dtype);
    tcase_add_test(tc, test_bad_index_position);
    tcase_add_test(tc, test_bad_indices_are_skipped);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
