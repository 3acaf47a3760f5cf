/* matmul and linear: values, every rank combination, batching and broadcast,
 * transposed and strided operands, bf16, gradients, bad input. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/cpu/cpu.h"
#include "testutil.h"

/* ------------------------------------------------------------ reference */

/* Naive a @ b with PyTorch's matmul rules on host doubles; returns the
 * values (caller frees) and writes the element count. */
static double *naive_matmul(const Tensor *a, const Tensor *b, int64_t *numel)
{
    int na = tensor_ndim(a), nb = tensor_ndim(b);
    const int64_t *sa = tensor_shape(a), *sb = tensor_shape(b);
    int64_t n = na > 1 ? sa[na - 2] : 1, k = sa[na - 1];
    int64_t m = nb > 1 ? sb[nb - 1] : 1;
    int ba = na > 2 ? na - 2 : 0, bb = nb > 2 ? nb - 2 : 0, bo = ba > bb ? ba : bb;
    int64_t bshape[8], nbatch = 1;
    for (int i = 0; i < bo; i++) {
        int ia = i - (bo - ba), ib = i - (bo - bb);
        int64_t x = ia >= 0 ? sa[ia] : 1, y = ib >= 0 ? sb[ib] : 1;
        bshape[i] = x == 1 ? y : x;
        nbatch *= bshape[i];
    }
    double *av = malloc((size_t)tensor_numel(a) * sizeof *av + 8);
    double *bv = malloc((size_t)tensor_numel(b) * sizeof *bv + 8);
    ck_assert_int_eq(tensor_copy_to_host(a, av, CT_F64), CT_OK);
    ck_assert_int_eq(tensor_copy_to_host(b, bv, CT_F64), CT_OK);
    double *out = calloc((size_t)(nbatch * n * m) + 1, sizeof *out);
    for (int64_t r = 0; r < nbatch; r++) {
        /* batch offsets of a and b for out batch index r */
        int64_t rem = r, oa = 0, ob = 0, ma = 1, mb = 1;
        for (int i = bo - 1; i >= 0; i--) {
            int64_t idx = rem % bshape[i];
            rem /= bshape[i];
            int ia = i - (bo - ba), ib = i - (bo - bb);
            if (ia >= 0) {
                oa += (sa[ia] == 1 ? 0 : idx) * ma;
                ma *= sa[ia];
            }
            if (ib >= 0) {
                ob += (sb[ib] == 1 ? 0 : idx) * mb;
                mb *= sb[ib];
            }
        }
        const double *A = av + oa * n * k, *B = bv + ob * k * m;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < m; j++) {
                double s = 0;
                for (int64_t p = 0; p < k; p++) s += A[i * k + p] * B[p * m + j];
                out[(r * n + i) * m + j] = s;
            }
    }
    free(av);
    free(bv);
    *numel = nbatch * n * m;
    return out;
}

static void check_matmul(Tensor *a, Tensor *b, double atol, double rtol)
{
    int64_t n;
    double *expect = naive_matmul(a, b, &n);
    Tensor *y = tensor_matmul(a, b);
    tu_assert_values(y, expect, n, atol, rtol);
    free(expect);
}

/* Uniform [-1, 1) values in dt, owned by the open scope. */
static Tensor *rnd(CtDType dt, int ndim, const int64_t *shape, unsigned seed)
{
    Tensor *t = tu_rand64(ndim, shape, -1, 1, seed, false);
    Tensor *c = dt == CT_F64 ? tensor_clone(t) : tensor_cast(t, dt);
    tensor_free(t);
    ck_assert_ptr_nonnull(c);
    return c;
}

/* --------------------------------------------------------------- values */

START_TEST(test_matmul_values)
{
    TU_MEM_BEGIN;
    for (int dt = CT_F32; dt <= CT_F64; dt++) {
        Tensor *a = tu_tensor((CtDType)dt, 2, (const int64_t[]){2, 3},
                              (double[]){1, 2, 3, 4, 5, 6});
        Tensor *b = tu_tensor((CtDType)dt, 2, (const int64_t[]){3, 2},
                              (double[]){7, 8, 9, 10, 11, 12});
        Tensor *y = tensor_matmul(a, b); /* no scope: caller-owned */
        tu_assert_shape(y, 2, 2, 2);
        tu_assert_values(y, ((double[]){58, 64, 139, 154}), 4, 0, 0);
        tensor_free(y);
        tensor_free(a);
        tensor_free(b);
    }
    TU_MEM_END;
}
END_TEST

START_TEST(test_matmul_ranks)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *v3 = tu_tensor(CT_F32, 1, (const int64_t[]){3}, (double[]){1, 2, 3});
    Tensor *w3 = tu_tensor(CT_F32, 1, (const int64_t[]){3}, (double[]){4, 5, 6});
    Tensor *v2 = tu_tensor(CT_F32, 1, (const int64_t[]){2}, (double[]){1, 2});
    Tensor *m23 =
        tu_tensor(CT_F32, 2, (const int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
    /* 1-d . 1-d: a 0-d dot product */
    Tensor *y = tensor_matmul(v3, w3);
    ck_assert_int_eq(tensor_ndim(y), 0);
    tu_assert_values(y, ((double[]){32}), 1, 0, 0);
    /* 1-d @ 2-d: (2) @ (2, 3) -> (3) */
    y = tensor_matmul(v2, m23);
    tu_assert_shape(y, 1, 3);
    tu_assert_values(y, ((double[]){9, 12, 15}), 3, 0, 0);
    /* 2-d @ 1-d: (2, 3) @ (3) -> (2) */
    y = tensor_matmul(m23, v3);
    tu_assert_shape(y, 1, 2);
    tu_assert_values(y, ((double[]){14, 32}), 2, 0, 0);
    /* batched with broadcast: (2, 1, 3, 4) @ (5, 4, 2) -> (2, 5, 3, 2) */
    Tensor *a = rnd(CT_F64, 4, (const int64_t[]){2, 1, 3, 4}, 1);
    Tensor *b = rnd(CT_F64, 3, (const int64_t[]){5, 4, 2}, 2);
    tu_assert_shape(tensor_matmul(a, b), 4, 2, 5, 3, 2);
    check_matmul(a, b, 1e-12, 1e-12);
    /* 1-d @ 3-d, 3-d @ 1-d, 2-d @ 3-d, 3-d @ 2-d (folded), 3-d @ 3-d */
    struct {
        int na, nb;
        int64_t sa[4], sb[4];
        int nout;
        int64_t so[4];
    } cases[] = {
        {1, 3, {4}, {2, 4, 5}, 2, {2, 5}},
        {3, 1, {2, 3, 4}, {4}, 2, {2, 3}},
        {2, 3, {3, 4}, {2, 4, 5}, 3, {2, 3, 5}},
        {3, 2, {2, 3, 4}, {4, 5}, 3, {2, 3, 5}},
        {4, 2, {2, 3, 3, 4}, {4, 5}, 4, {2, 3, 3, 5}},
        {3, 3, {6, 3, 4}, {6, 4, 5}, 3, {6, 3, 5}},
        {3, 3, {1, 3, 4}, {6, 4, 5}, 3, {6, 3, 5}},
        {4, 4, {2, 1, 3, 4}, {1, 3, 4, 2}, 4, {2, 3, 3, 2}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        a = rnd(CT_F32, cases[i].na, cases[i].sa, 10 + (unsigned)i);
        b = rnd(CT_F32, cases[i].nb, cases[i].sb, 20 + (unsigned)i);
        y = tensor_matmul(a, b);
        tu_assert_shape_at(__FILE__, __LINE__, y, cases[i].nout, cases[i].so);
        check_matmul(a, b, 1e-5, 1e-5);
    }
    tensor_free(v3);
    tensor_free(w3);
    tensor_free(v2);
    tensor_free(m23);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* Peak memory of one matmul above the memory in use before it. */
static size_t matmul_peak(Tensor *a, Tensor *b)
{
    size_t before = ct_alloc_stats(ct_cpu()).in_use;
    ct_alloc_reset_peak(ct_cpu());
    Tensor *y = tensor_matmul(a, b);
    ck_assert_ptr_nonnull(y);
    return ct_alloc_stats(ct_cpu()).peak - before;
}

START_TEST(test_matmul_layouts)
{
    CtScope *s = ct_scope_open();
    /* transposed operands: values right, and no copy (the peak is the
     * output alone, as for contiguous operands) */
    Tensor *x = rnd(CT_F32, 2, (const int64_t[]){40, 30}, 3); /* (40, 30) */
    Tensor *w = rnd(CT_F32, 2, (const int64_t[]){20, 40}, 4); /* (20, 40) */
    Tensor *xt = tensor_transpose(x, 0, 1);                   /* (30, 40) */
    Tensor *wt = tensor_transpose(w, 0, 1);                   /* (40, 20) */
    Tensor *xc = tensor_contiguous(xt), *wc = tensor_contiguous(wt);
    check_matmul(xt, wc, 1e-5, 1e-5);
    check_matmul(xc, wt, 1e-5, 1e-5);
    check_matmul(xt, wt, 1e-5, 1e-5);
    check_matmul(w, x, 1e-5, 1e-5);
    size_t ref = matmul_peak(xc, wc);
    ck_assert_uint_eq(matmul_peak(xt, wt), ref);
    ck_assert_uint_eq(matmul_peak(xt, wc), ref);
    /* a batched transpose: (3, 5, 4) viewed as (3, 4, 5) */
    Tensor *bt = tensor_transpose(rnd(CT_F32, 3, (const int64_t[]){3, 5, 4}, 5), 1, 2);
    check_matmul(bt, rnd(CT_F32, 3, (const int64_t[]){3, 5, 2}, 6), 1e-5, 1e-5);
    /* batch dim in the middle of memory: permuted (4, 3, 5) -> (3, 4, 5) */
    Tensor *pm = tensor_permute(rnd(CT_F32, 3, (const int64_t[]){4, 3, 5}, 7),
                                (const int[]){1, 0, 2});
    check_matmul(pm, rnd(CT_F32, 2, (const int64_t[]){5, 6}, 8), 1e-5, 1e-5);
    check_matmul(pm, rnd(CT_F32, 3, (const int64_t[]){3, 5, 6}, 9), 1e-5, 1e-5);
    /* strided (non-packed) operand: copied, still right */
    Tensor *sl = tensor_slice(rnd(CT_F32, 2, (const int64_t[]){3, 8}, 10), 1, 0, 8, 2);
    check_matmul(sl, rnd(CT_F32, 2, (const int64_t[]){4, 3}, 11), 1e-5, 1e-5);
    Tensor *v = tensor_slice(rnd(CT_F32, 1, (const int64_t[]){8}, 12), 0, 0, 8, 2);
    check_matmul(v, rnd(CT_F32, 2, (const int64_t[]){4, 3}, 13), 1e-5, 1e-5);
    check_matmul(rnd(CT_F32, 2, (const int64_t[]){3, 4}, 14), v, 1e-5, 1e-5);
    /* many small matrices: the OpenMP batch loop */
    check_matmul(rnd(CT_F32, 3, (const int64_t[]){300, 16, 12}, 15),
                 rnd(CT_F32, 3, (const int64_t[]){300, 12, 16}, 16), 1e-5, 1e-5);
    check_matmul(rnd(CT_F64, 3, (const int64_t[]){300, 16, 12}, 15),
                 rnd(CT_F64, 2, (const int64_t[]){12, 16}, 16), 1e-12, 1e-12);
    /* empty inner dim gives zeros; empty outer dims give empty results */
    Tensor *z = tensor_matmul(tensor_zeros(2, (const int64_t[]){2, 0}, CT_F32, ct_cpu()),
                              tensor_zeros(2, (const int64_t[]){0, 3}, CT_F32, ct_cpu()));
    tu_assert_values(z, ((double[]){0, 0, 0, 0, 0, 0}), 6, 0, 0);
    z = tensor_matmul(tensor_zeros(3, (const int64_t[]){0, 2, 4}, CT_F32, ct_cpu()),
                      tensor_zeros(2, (const int64_t[]){4, 3}, CT_F32, ct_cpu()));
    tu_assert_shape(z, 3, 0, 2, 3);
    ct_scope_close(s);
}
END_TEST

/* Products big enough for the engine pool (m*n*k from 1M): split into row
 * blocks (m >= n) or column blocks with a short last block, transposed
 * operands, batches of split GEMMs, and batches of small GEMMs one per
 * item; f32 and f64 against the f64 reference. */
START_TEST(test_matmul_pool_split)
{
    CtScope *s = ct_scope_open();
    const double tol[2] = {1e-4, 1e-11};
    for (int d = 0; d < 2; d++) {
        CtDType dt = d ? CT_F64 : CT_F32;
        /* 131 rows in blocks of 48: 48, 48, 35 */
        check_matmul(rnd(dt, 2, (const int64_t[]){131, 97}, 20),
                     rnd(dt, 2, (const int64_t[]){97, 83}, 21), tol[d], tol[d]);
        /* both transposed */
        check_matmul(tensor_transpose(rnd(dt, 2, (const int64_t[]){97, 131}, 22), 0, 1),
                     tensor_transpose(rnd(dt, 2, (const int64_t[]){83, 97}, 23), 0, 1),
                     tol[d], tol[d]);
        /* column blocks, B transposed */
        check_matmul(rnd(dt, 2, (const int64_t[]){45, 257}, 24),
                     tensor_transpose(rnd(dt, 2, (const int64_t[]){301, 257}, 25), 0, 1),
                     tol[d], tol[d]);
        /* a batch of split GEMMs, B broadcast */
        check_matmul(rnd(dt, 3, (const int64_t[]){3, 50, 70}, 26),
                     rnd(dt, 2, (const int64_t[]){70, 110}, 27), tol[d], tol[d]);
        /* a batch of small GEMMs, one per item */
        check_matmul(rnd(dt, 3, (const int64_t[]){400, 16, 12}, 28),
                     rnd(dt, 3, (const int64_t[]){400, 12, 17}, 29), tol[d], tol[d]);
    }
    ct_scope_close(s);
}
END_TEST

/* Values in [-2, 2) from seed, n of them, in dt (f32 or f64). */
static void *outer_data(CtDType dt, int64_t n, unsigned seed)
{
    size_t es = ct_dtype_size(dt);
    void *v = malloc((size_t)n * es + 1);
    srand(seed);
    for (int64_t i = 0; i < n; i++) {
        double x = 4.0 * rand() / RAND_MAX - 2;
        if (dt == CT_F32)
            ((float *)v)[i] = (float)x;
        else
            ((double *)v)[i] = x;
    }
    return v;
}

/* n NaNs of dt (f32 or f64) at v. */
static void nan_fill(CtDType dt, void *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (dt == CT_F32)
            ((float *)v)[i] = NAN;
        else
            ((double *)v)[i] = NAN;
    }
}

/* c <- a_i b_j alpha (+ beta c), each step rounded in T. */
#define OUTER_REF(T)                                                                     \
    static void outer_ref_##T(const CtMatmulParams *p, const T *a, const T *b, T *c)     \
    {                                                                                    \
        for (int64_t x = 0; x < p->batch; x++)                                           \
            for (int64_t i = 0; i < p->m; i++)                                           \
                for (int64_t j = 0; j < p->n; j++) {                                     \
                    T t = a[x * p->stride_a + i] * b[x * p->stride_b + j];               \
                    t = (T)p->alpha * t;                                                 \
                    T *cij = c + x * p->stride_c + i * p->n + j;                         \
                    if (p->beta != 0) {                                                  \
                        T u = (T)p->beta * *cij;                                         \
                        t = t + u;                                                       \
                    }                                                                    \
                    *cij = t;                                                            \
                }                                                                        \
    }
OUTER_REF(float)
OUTER_REF(double)

/* An outer product (k == 1, a weight gradient at batch 1) is a pass of its
 * own: each element a_i b_j alpha + beta c, rounded step by step, for every
 * layout, batch (with a broadcast operand), size (split over the pool or
 * not) and dtype; C is not read when beta is 0 (NaN there stays out);
 * with alpha 1 the bits are those of the GEMM of k = 2 with a zero second
 * column (BLAS or the f32 engine). */
START_TEST(test_matmul_outer_product)
{
    const int64_t sizes[][2] = {{3, 5}, {130, 700}};
    const double ab[][2] = {{1, 0}, {1, 1}, {2.5, 0.5}};
    int checked = 0;
    for (int d = 0; d < 2; d++)
        for (int sz = 0; sz < 2; sz++)
            for (int lay = 0; lay < 4; lay++)
                for (int bt = 0; bt < 2; bt++)
                    for (int k = 0; k < 3; k++) {
                        CtDType dt = d ? CT_F64 : CT_F32;
                        size_t es = ct_dtype_size(dt);
                        int64_t m = sizes[sz][0], n = sizes[sz][1], batch = bt ? 3 : 1;
                        CtMatmulParams p = {.batch = batch,
                                            .m = m,
                                            .n = n,
                                            .k = 1,
                                            .trans_a = lay & 1,
                                            .trans_b = lay >> 1,
                                            .alpha = ab[k][0],
                                            .beta = ab[k][1],
                                            .stride_a = m,
                                            .stride_b = bt ? 0 : n, /* B broadcast */
                                            .stride_c = m * n,
                                            .autocast = CT_F32};
                        void *a = outer_data(dt, batch * m, 1), *b = outer_data(dt, n, 2);
                        void *got = outer_data(dt, batch * m * n, 3);
                        void *want = malloc((size_t)(batch * m * n) * es);
                        memcpy(want, got, (size_t)(batch * m * n) * es);
                        if (p.beta == 0)
                            nan_fill(dt, got, batch * m * n); /* never read */
                        ck_assert_int_eq(ct_cpu_matmul(&p, dt, a, b, got), CT_OK);
                        if (dt == CT_F32)
                            outer_ref_float(&p, a, b, want);
                        else
                            outer_ref_double(&p, a, b, want);
                        ck_assert_msg(
                            !memcmp(got, want, (size_t)(batch * m * n) * es),
                            "%s %lldx%lld layout %d batch %lld alpha %g beta %g",
                            ct_dtype_name(dt), (long long)m, (long long)n, lay,
                            (long long)batch, p.alpha, p.beta);
                        if (p.alpha == 1) {
                            /* k = 2, the second column zero: A (m, 2), B (2, n) */
                            CtMatmulParams q = p;
                            q.k = 2, q.trans_a = q.trans_b = false;
                            q.stride_a = 2 * m, q.stride_b = bt ? 0 : 2 * n;
                            char *a2 = calloc((size_t)(batch * m * 2), es);
                            char *b2 = calloc((size_t)(n * 2), es);
                            for (int64_t i = 0; i < batch * m; i++)
                                memcpy(a2 + (size_t)(2 * i) * es,
                                       (char *)a + (size_t)i * es, es);
                            memcpy(b2, b, (size_t)n * es);
                            void *gemm = outer_data(dt, batch * m * n, 3);
                            ck_assert_int_eq(ct_cpu_matmul(&q, dt, a2, b2, gemm), CT_OK);
                            ck_assert(!memcmp(got, gemm, (size_t)(batch * m * n) * es));
                            free(a2);
                            free(b2);
                            free(gemm);
                        }
                        free(a);
                        free(b);
                        free(got);
                        free(want);
                        checked++;
                    }
    ck_assert_int_eq(checked, 2 * 2 * 4 * 2 * 3);
}
END_TEST

/* One row (m == 1, a linear layer at batch 1) reads B once: against an f64
 * reference for both layouts of B, a tail of the dot's lanes, column
 * blocks, a batch with B broadcast, alpha and beta (C not read at beta 0),
 * and the same bits on 1 and 2 threads (the pool splits the columns from
 * 1M multiply-adds). */
START_TEST(test_matmul_one_row)
{
    const int64_t shapes[][2] = {{5, 3}, {700, 13}, {3000, 400}}; /* (n, k) */
    int checked = 0;
    for (int d = 0; d < 2; d++)
        for (int sh = 0; sh < 3; sh++)
            for (int tb = 0; tb < 2; tb++)
                for (int bt = 0; bt < 2; bt++) {
                    CtDType dt = d ? CT_F64 : CT_F32;
                    size_t es = ct_dtype_size(dt);
                    int64_t n = shapes[sh][0], k = shapes[sh][1], batch = bt ? 3 : 1;
                    double alpha = bt ? 1.5 : 1, beta = bt ? 0.5 : 0;
                    CtMatmulParams p = {.batch = batch,
                                        .m = 1,
                                        .n = n,
                                        .k = k,
                                        .trans_a = tb,
                                        .trans_b = tb,
                                        .alpha = alpha,
                                        .beta = beta,
                                        .stride_a = k,
                                        .stride_b = bt ? 0 : n * k,
                                        .stride_c = n,
                                        .autocast = CT_F32};
                    void *a = outer_data(dt, batch * k, 4), *b = outer_data(dt, n * k, 5);
                    void *c0 = outer_data(dt, batch * n, 6);
                    void *got[2];
                    for (int t = 0; t < 2; t++) {
                        got[t] = malloc((size_t)(batch * n) * es);
                        memcpy(got[t], c0, (size_t)(batch * n) * es);
                        if (beta == 0) nan_fill(dt, got[t], batch * n); /* never read */
                        omp_set_num_threads(t + 1);
                        ck_assert_int_eq(ct_cpu_matmul(&p, dt, a, b, got[t]), CT_OK);
                    }
                    omp_set_num_threads(2);
                    ck_assert_msg(!memcmp(got[0], got[1], (size_t)(batch * n) * es),
                                  "threads: %s n %lld k %lld", ct_dtype_name(dt),
                                  (long long)n, (long long)k);
#define AT(v, i) (dt == CT_F32 ? (double)((float *)(v))[i] : ((double *)(v))[i])
                    for (int64_t x = 0; x < batch; x++)
                        for (int64_t j = 0; j < n; j++) {
                            double want = 0;
                            for (int64_t i = 0; i < k; i++)
                                want +=
                                    AT(a, x * k + i) * AT(b, tb ? j * k + i : i * n + j);
                            want =
                                alpha * want + (beta != 0 ? beta * AT(c0, x * n + j) : 0);
                            double g = AT(got[0], x * n + j);
                            ck_assert_msg(
                                fabs(g - want) <= (d ? 1e-12 : 1e-4) * (1 + fabs(want)),
                                "%s n %lld k %lld trans %d batch %lld [%lld]: %g != %g",
                                ct_dtype_name(dt), (long long)n, (long long)k, tb,
                                (long long)batch, (long long)j, g, want);
                        }
#undef AT
                    free(a);
                    free(b);
                    free(c0);
                    free(got[0]);
                    free(got[1]);
                    checked++;
                }
    ck_assert_int_eq(checked, 2 * 3 * 2 * 2);
}
END_TEST

START_TEST(test_matmul_bf16)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    /* bf16 products accumulate in f32 and round once: compare with f32 on
     * the same (bf16-representable) inputs within bf16's half-ulp (2^-9),
     * plus a little for summation order */
    struct {
        int na, nb;
        int64_t sa[3], sb[3];
    } cases[] = {
        {2, 2, {17, 33}, {33, 9}},
        {3, 2, {4, 8, 16}, {16, 8}},
        {3, 3, {5, 7, 16}, {1, 16, 3}},
        {1, 3, {16}, {3, 16, 5}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        Tensor *a = rnd(CT_BF16, cases[i].na, cases[i].sa, 30 + (unsigned)i);
        Tensor *b = rnd(CT_BF16, cases[i].nb, cases[i].sb, 40 + (unsigned)i);
        Tensor *y = tensor_matmul(a, b);
        ck_assert_ptr_nonnull(y);
        ck_assert_int_eq(tensor_dtype(y), CT_BF16);
        Tensor *ref = tensor_matmul(tensor_cast(a, CT_F32), tensor_cast(b, CT_F32));
        int64_t n = tensor_numel(ref);
        double *e = malloc((size_t)n * sizeof *e);
        ck_assert_int_eq(tensor_copy_to_host(ref, e, CT_F64), CT_OK);
        tu_assert_values(y, e, n, 1e-3, 1.0 / 256);
        free(e);
    }
    /* transposed bf16 operand and bf16 linear with bias */
    Tensor *x = rnd(CT_BF16, 2, (const int64_t[]){6, 16}, 50);
    Tensor *w = rnd(CT_BF16, 2, (const int64_t[]){5, 16}, 51);
    Tensor *bias = rnd(CT_BF16, 1, (const int64_t[]){5}, 52);
    Tensor *y = tensor_linear(x, w, bias);
    Tensor *ref_mm = tensor_matmul(tensor_cast(x, CT_F32),
                                   tensor_transpose(tensor_cast(w, CT_F32), 0, 1));
    Tensor *ref = tensor_add(ref_mm, tensor_cast(bias, CT_F32));
    double e[30];
    ck_assert_int_eq(tensor_copy_to_host(ref, e, CT_F64), CT_OK);
    tu_assert_values(y, e, 30, 1e-2, 1.0 / 128);
    /* x @ wᵀ with the transposed bf16 view going in with a trans flag */
    ck_assert_int_eq(tensor_copy_to_host(ref_mm, e, CT_F64), CT_OK);
    tu_assert_values(tensor_matmul(x, tensor_transpose(w, 0, 1)), e, 30, 1e-3, 1.0 / 256);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* --------------------------------------------------------------- linear */

START_TEST(test_linear_values)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *x = tu_tensor(CT_F32, 2, (const int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
    Tensor *w =
        tu_tensor(CT_F32, 2, (const int64_t[]){3, 2}, (double[]){1, 0, 0, 1, 1, 1});
    Tensor *b = tu_tensor(CT_F32, 1, (const int64_t[]){3}, (double[]){10, 20, 30});
    Tensor *y = tensor_linear(x, w, b);
    tu_assert_shape(y, 2, 2, 3);
    tu_assert_values(y, ((double[]){11, 22, 33, 13, 24, 37}), 6, 0, 0);
    tu_assert_values(tensor_linear(x, w, NULL), ((double[]){1, 2, 3, 3, 4, 7}), 6, 0, 0);
    /* 1-d input -> (out); 3-d input keeps its leading dims */
    y = tensor_linear(tensor_select(x, 0, 1), w, b);
    tu_assert_shape(y, 1, 3);
    tu_assert_values(y, ((double[]){13, 24, 37}), 3, 0, 0);
    /* a 3-d input as a broadcast view: its rows do not flatten, so it is copied */
    Tensor *x3 = tensor_expand(tensor_unsqueeze(x, 0), 3, (const int64_t[]){2, 2, 2});
    y = tensor_linear(x3, w, b);
    tu_assert_shape(y, 3, 2, 2, 3);
    tu_assert_values(y, ((double[]){11, 22, 33, 13, 24, 37, 11, 22, 33, 13, 24, 37}), 12,
                     0, 0);
    y = tensor_linear(tensor_contiguous(x3), w, b);
    tu_assert_values(y, ((double[]){11, 22, 33, 13, 24, 37, 11, 22, 33, 13, 24, 37}), 12,
                     0, 0);
    /* transposed x and transposed weight views */
    Tensor *xt = tensor_transpose(tensor_contiguous(tensor_transpose(x, 0, 1)), 0, 1);
    Tensor *wt = tensor_transpose(tensor_contiguous(tensor_transpose(w, 0, 1)), 0, 1);
    tu_assert_values(tensor_linear(xt, wt, b), ((double[]){11, 22, 33, 13, 24, 37}), 6, 0,
                     0);
    /* no-scope result is caller-owned and complete */
    ct_scope_close(s);
    y = tensor_linear(x, w, b);
    tu_assert_values(y, ((double[]){11, 22, 33, 13, 24, 37}), 6, 0, 0);
    tensor_free(y);
    tensor_free(x);
    tensor_free(w);
    tensor_free(b);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------ gradients */

typedef struct MmCase {
    int na, nb;
    int64_t sa[4], sb[4];
    bool ta, tb; /* operand stored transposed (last two dims), viewed back */
} MmCase;

static Tensor *view_back(Tensor *t, bool tr)
{
    return tr ? tensor_transpose(t, -1, -2) : t;
}

static Tensor *mm_fn(Tensor **in, void *ctx)
{
    const MmCase *c = ctx;
    return tensor_matmul(view_back(in[0], c->ta), view_back(in[1], c->tb));
}

static void gradcheck_mm(const MmCase *c, unsigned seed)
{
    int64_t sa[4], sb[4];
    memcpy(sa, c->sa, sizeof sa);
    memcpy(sb, c->sb, sizeof sb);
    if (c->ta) { /* store the transpose */
        int64_t t = sa[c->na - 1];
        sa[c->na - 1] = sa[c->na - 2];
        sa[c->na - 2] = t;
    }
    if (c->tb) {
        int64_t t = sb[c->nb - 1];
        sb[c->nb - 1] = sb[c->nb - 2];
        sb[c->nb - 2] = t;
    }
    Tensor *in[2] = {tu_rand64(c->na, sa, -1, 1, seed, true),
                     tu_rand64(c->nb, sb, -1, 1, seed + 1, true)};
    tu_gradcheck("matmul", mm_fn, (void *)c, 2, in);
    tensor_free(in[0]);
    tensor_free(in[1]);
}

START_TEST(test_matmul_grad)
{
    TU_MEM_BEGIN;
    static const MmCase cases[] = {
        {2, 2, {3, 4}, {4, 5}, false, false},
        {3, 3, {2, 3, 4}, {2, 4, 5}, false, false},
        {3, 2, {2, 3, 4}, {4, 5}, false, false}, /* folded into one GEMM */
        {4, 2, {2, 2, 3, 4}, {4, 5}, false, false},
        {1, 2, {4}, {4, 5}, false, false},
        {2, 1, {3, 4}, {4}, false, false},
        {1, 1, {4}, {4}, false, false},
        {3, 1, {2, 3, 4}, {4}, false, false},
        {2, 2, {3, 4}, {4, 5}, true, false}, /* transposed inputs */
        {2, 2, {3, 4}, {4, 5}, false, true},
        {2, 2, {3, 4}, {4, 5}, true, true},
        {3, 3, {2, 3, 4}, {2, 4, 5}, true, true},
        {3, 2, {2, 3, 4}, {4, 5}, true, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        gradcheck_mm(&cases[i], 100 + 2 * (unsigned)i);
    TU_MEM_END;
}
END_TEST

/* Broadcast batch dims: the gradient is summed back over them. */
START_TEST(test_matmul_grad_broadcast)
{
    TU_MEM_BEGIN;
    static const MmCase cases[] = {
        {4, 3, {2, 1, 3, 4}, {5, 4, 2}, false, false},
        {2, 3, {3, 4}, {2, 4, 5}, false, false},
        {1, 3, {4}, {2, 4, 5}, false, false},
        {3, 3, {1, 3, 4}, {2, 4, 5}, false, true},
        {3, 3, {2, 3, 4}, {1, 4, 5}, true, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        gradcheck_mm(&cases[i], 200 + 2 * (unsigned)i);
    TU_MEM_END;
}
END_TEST

typedef struct LinCase {
    int nx;
    int64_t sx[3];
    int64_t out;
    bool bias, wt; /* wt: weight stored as (in, out) and viewed transposed */
    bool xt;       /* 2-d x stored transposed */
} LinCase;

static Tensor *lin_fn(Tensor **in, void *ctx)
{
    const LinCase *c = ctx;
    Tensor *x = c->xt ? tensor_transpose(in[0], 0, 1) : in[0];
    Tensor *w = c->wt ? tensor_transpose(in[1], 0, 1) : in[1];
    return tensor_linear(x, w, c->bias ? in[2] : NULL);
}

START_TEST(test_linear_grad)
{
    TU_MEM_BEGIN;
    static const LinCase cases[] = {
        {2, {3, 4}, 5, true, false, false},    {2, {3, 4}, 5, false, false, false},
        {3, {2, 3, 4}, 5, true, false, false}, {3, {2, 3, 4}, 5, false, false, false},
        {2, {3, 4}, 5, true, true, false},     {3, {2, 3, 4}, 5, true, true, false},
        {2, {3, 4}, 5, true, false, true},     {1, {4}, 3, true, false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const LinCase *c = &cases[i];
        int64_t in_f = c->sx[c->nx - 1];
        int64_t sx[3];
        memcpy(sx, c->sx, sizeof sx);
        if (c->xt) {
            sx[0] = c->sx[1];
            sx[1] = c->sx[0];
        }
        int64_t sw[2] = {c->wt ? in_f : c->out, c->wt ? c->out : in_f};
        Tensor *in[3] = {tu_rand64(c->nx, sx, -1, 1, 300 + 3 * (unsigned)i, true),
                         tu_rand64(2, sw, -1, 1, 301 + 3 * (unsigned)i, true),
                         tu_rand64(1, &c->out, -1, 1, 302 + 3 * (unsigned)i, true)};
        tu_gradcheck("linear", lin_fn, (void *)c, c->bias ? 3 : 2, in);
        for (int j = 0; j < 3; j++) tensor_free(in[j]);
    }
    TU_MEM_END;
}
END_TEST

/* A leaf of dt from tu_rand64's values (inside a scope). */
static Tensor *leaf(CtDType dt, int ndim, const int64_t *shape, unsigned seed)
{
    Tensor *r = tu_rand64(ndim, shape, -1, 1, seed, false);
    Tensor *t = tensor_contiguous(tensor_cast(r, dt));
    tensor_free(r);
    ck_assert_int_eq(tensor_set_requires_grad(t, true), CT_OK);
    return t;
}

/* On the CPU a linear layer's bias gradient is summed in its weight
 * gradient's product (CtMatmulParams.bias_grad): the bits of gᵀ·x and of
 * a separate sum of g over its rows, one op fewer. g reaches the layer
 * row-major (a 3-d output) or column-major (through a transpose after
 * it); f32 and f64. */
START_TEST(test_linear_bias_grad_in_product)
{
    CtScope *s = ct_scope_open();
    for (int dt = CT_F32; dt <= CT_F64; dt++)
        for (int col = 0; col < 2; col++) {
            int64_t sx[3] = {2, 7, 5};
            Tensor *r = tu_rand64(3, sx, -1, 1, 60 + (unsigned)col, false);
            Tensor *x = tensor_cast(r, (CtDType)dt);
            tensor_free(r);
            if (col) x = tensor_reshape(x, 2, (int64_t[]){14, 5});
            Tensor *w = leaf((CtDType)dt, 2, (int64_t[]){4, 5}, 62);
            Tensor *b = leaf((CtDType)dt, 1, (int64_t[]){4}, 63);
            Tensor *y = tensor_linear(x, w, b);
            Tensor *root = col ? tensor_transpose(y, 0, 1) : y;
            r = tu_rand64(tensor_ndim(root), tensor_shape(root), -1, 1, 64, false);
            Tensor *seed = tensor_cast(r, (CtDType)dt);
            tensor_free(r);
            /* g as the layer sees it, (rows, out) */
            Tensor *g = tensor_reshape(col ? tensor_transpose(seed, 0, 1) : seed, 2,
                                       (int64_t[]){14, 4});
            ck_assert_int_eq(tensor_strides(g)[0], col ? 1 : 4);
            /* a second backward writes into the zeroed leaf gradients: the
             * layer's one op is all it runs */
            ck_assert_int_eq(tensor_backward(root, seed), CT_OK);
            ck_assert_int_eq(tensor_zero_(tensor_grad(w)), CT_OK);
            ck_assert_int_eq(tensor_zero_(tensor_grad(b)), CT_OK);
            y = tensor_linear(x, w, b);
            root = col ? tensor_transpose(y, 0, 1) : y;
            uint64_t ops = ct_op_count();
            ck_assert_int_eq(tensor_backward(root, seed), CT_OK);
            if (!col) ck_assert_uint_eq(ct_op_count() - ops, 1); /* dw and db */
            Tensor *x2 = tensor_reshape(x, 2, (int64_t[]){14, 5});
            tu_assert_same_bits("dw", tensor_grad(w),
                                tensor_matmul(tensor_transpose(g, 0, 1), x2));
            tu_assert_same_bits("db", tensor_grad(b),
                                tensor_sum(g, 1, (int[]){0}, false));
        }
    ct_scope_close(s);
}
END_TEST

/* A batch of one row, and a layer of one output: gᵀ is then packed both
 * ways, and goes in as a transpose (the form cuBLASLt's bias gradient
 * takes); still one op, with the bits of the product and the sum. */
START_TEST(test_linear_bias_grad_one_row_or_output)
{
    CtScope *s = ct_scope_open();
    const int64_t shapes[][2] = {{1, 4}, {9, 1}, {1, 1}}; /* (rows, out) */
    for (int dt = CT_F32; dt <= CT_F64; dt++)
        for (int i = 0; i < 3; i++) {
            int64_t rows = shapes[i][0], out = shapes[i][1];
            Tensor *r =
                tu_rand64(2, (int64_t[]){rows, 5}, -1, 1, 70 + (unsigned)i, false);
            Tensor *x = tensor_cast(r, (CtDType)dt);
            tensor_free(r);
            Tensor *w = leaf((CtDType)dt, 2, (int64_t[]){out, 5}, 71);
            Tensor *b = leaf((CtDType)dt, 1, (int64_t[]){out}, 72);
            r = tu_rand64(2, (int64_t[]){rows, out}, -1, 1, 73, false);
            Tensor *g = tensor_cast(r, (CtDType)dt);
            tensor_free(r);
            ck_assert_int_eq(tensor_backward(tensor_linear(x, w, b), g), CT_OK);
            ck_assert_int_eq(tensor_zero_(tensor_grad(w)), CT_OK);
            ck_assert_int_eq(tensor_zero_(tensor_grad(b)), CT_OK);
            Tensor *y = tensor_linear(x, w, b);
            uint64_t ops = ct_op_count();
            ck_assert_int_eq(tensor_backward(y, g), CT_OK);
            ck_assert_uint_eq(ct_op_count() - ops, 1); /* dw and db */
            tu_assert_same_bits("dw", tensor_grad(w),
                                tensor_matmul(tensor_transpose(g, 0, 1), x));
            tu_assert_same_bits("db", tensor_grad(b),
                                tensor_sum(g, 1, (int[]){0}, false));
        }
    ct_scope_close(s);
}
END_TEST

/* ------------------------------------------------------------ bad input */

START_TEST(test_matmul_bad_input)
{
    TU_MEM_BEGIN; /* no scope: failures must not leave half-made outputs */
    Tensor *a =
        tu_tensor(CT_F32, 2, (const int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
    Tensor *b = tensor_zeros(2, (const int64_t[]){4, 5}, CT_F32, ct_cpu());
    Tensor *d = tensor_zeros(2, (const int64_t[]){3, 2}, CT_F64, ct_cpu());
    Tensor *h = tensor_zeros(2, (const int64_t[]){3, 2}, CT_F16, ct_cpu());
    Tensor *ah = tensor_zeros(2, (const int64_t[]){2, 3}, CT_F16, ct_cpu());
    Tensor *i64 = tensor_zeros(2, (const int64_t[]){3, 2}, CT_I64, ct_cpu());
    Tensor *ai = tensor_zeros(2, (const int64_t[]){2, 3}, CT_I64, ct_cpu());
    Tensor *sc = tensor_scalar(2.0, CT_F32, ct_cpu());
    Tensor *b3 = tensor_zeros(3, (const int64_t[]){3, 3, 4}, CT_F32, ct_cpu());
    Tensor *a3 = tensor_zeros(3, (const int64_t[]){2, 2, 3}, CT_F32, ct_cpu());

    ck_assert_ptr_null(tensor_matmul(a, b));
    tu_assert_error(CT_ERR_SHAPE, "matmul: f32[2, 3] cpu and f32[4, 5] cpu cannot be "
                                  "multiplied (inner dims 3 and 4 differ)");
    ck_assert_ptr_null(tensor_matmul(a, d));
    tu_assert_error(CT_ERR_DTYPE, "matmul: dtypes differ");
    ck_assert_ptr_null(tensor_matmul(sc, a));
    tu_assert_error(CT_ERR_SHAPE, "matmul: both operands need at least 1 dim");
    ck_assert_ptr_null(tensor_matmul(a, sc));
    tu_assert_error(CT_ERR_SHAPE, "f32[] cpu");
    ck_assert_ptr_null(tensor_matmul(a3, b3));
    tu_assert_error(CT_ERR_SHAPE,
                    "matmul: batch dims of f32[2, 2, 3] cpu and f32[3, 3, 4] "
                    "cpu do not broadcast");
    ck_assert_ptr_null(tensor_matmul(ah, h));
    tu_assert_error(CT_ERR_UNSUPPORTED, "matmul: not supported on cpu for f16");
    ck_assert_ptr_null(tensor_matmul(ai, i64));
    tu_assert_error(CT_ERR_UNSUPPORTED, "matmul: not supported on cpu for i64");
    /* sticky: a NULL input keeps the first error */
    ct_error(CT_ERR_IO, "first failure");
    ck_assert_ptr_null(tensor_matmul(NULL, a));
    ck_assert_ptr_null(tensor_matmul(a, NULL));
    tu_assert_error(CT_ERR_IO, "first failure");

    tensor_free(a);
    tensor_free(b);
    tensor_free(d);
    tensor_free(h);
    tensor_free(ah);
    tensor_free(i64);
    tensor_free(ai);
    tensor_free(sc);
    tensor_free(b3);
    tensor_free(a3);
    TU_MEM_END;
}
END_TEST

START_TEST(test_linear_bad_input)
{
    TU_MEM_BEGIN;
    Tensor *x = tensor_zeros(2, (const int64_t[]){2, 3}, CT_F32, ct_cpu());
    Tensor *w = tensor_zeros(2, (const int64_t[]){4, 5}, CT_F32, ct_cpu());
    Tensor *w3 = tensor_zeros(2, (const int64_t[]){4, 3}, CT_F32, ct_cpu());
    Tensor *bad_b = tensor_zeros(1, (const int64_t[]){3}, CT_F32, ct_cpu());
    Tensor *wd = tensor_zeros(2, (const int64_t[]){4, 3}, CT_F64, ct_cpu());
    Tensor *w1 = tensor_zeros(1, (const int64_t[]){3}, CT_F32, ct_cpu());
    Tensor *xi = tensor_zeros(2, (const int64_t[]){2, 3}, CT_I64, ct_cpu());
    Tensor *xh = tensor_zeros(2, (const int64_t[]){2, 3}, CT_F16, ct_cpu());
    Tensor *wh = tensor_zeros(2, (const int64_t[]){4, 3}, CT_F16, ct_cpu());
    Tensor *sc = tensor_scalar(1.0, CT_F32, ct_cpu());

    ck_assert_ptr_null(tensor_linear(x, w, NULL));
    tu_assert_error(CT_ERR_SHAPE, "linear: input f32[2, 3] cpu has 3 features, weight "
                                  "f32[4, 5] cpu expects 5");
    ck_assert_ptr_null(tensor_linear(x, w3, bad_b));
    tu_assert_error(CT_ERR_SHAPE, "linear: bias f32[3] cpu does not match weight f32[4, "
                                  "3] cpu (expected [4])");
    ck_assert_ptr_null(tensor_linear(x, wd, NULL));
    tu_assert_error(CT_ERR_DTYPE, "linear: dtypes differ");
    ck_assert_ptr_null(tensor_linear(x, w1, NULL));
    tu_assert_error(CT_ERR_SHAPE, "linear: expected a 2-d tensor");
    ck_assert_ptr_null(tensor_linear(xi, w3, NULL));
    tu_assert_error(CT_ERR_DTYPE, "linear: expected a floating-point tensor");
    ck_assert_ptr_null(tensor_linear(sc, w3, NULL));
    tu_assert_error(CT_ERR_SHAPE, "linear: input f32[] cpu");
    ck_assert_ptr_null(tensor_linear(xh, wh, NULL));
    tu_assert_error(CT_ERR_UNSUPPORTED, "matmul: not supported on cpu for f16");
    ct_error(CT_ERR_IO, "first failure");
    ck_assert_ptr_null(tensor_linear(NULL, w3, NULL));
    ck_assert_ptr_null(tensor_linear(x, NULL, NULL));
    tu_assert_error(CT_ERR_IO, "first failure");

    tensor_free(x);
    tensor_free(w);
    tensor_free(w3);
    tensor_free(bad_b);
    tensor_free(wd);
    tensor_free(w1);
    tensor_free(xi);
    tensor_free(xh);
    tensor_free(wh);
    tensor_free(sc);
    TU_MEM_END;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("matmul");
    TCase *tc = tcase_create("matmul");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_matmul_values);
    tcase_add_test(tc, test_matmul_ranks);
    tcase_add_test(tc, test_matmul_layouts);
    tcase_add_test(tc, test_matmul_pool_split);
    tcase_add_test(tc, test_matmul_outer_product);
    tcase_add_test(tc, test_matmul_one_row);
    tcase_add_test(tc, test_matmul_bf16);
    tcase_add_test(tc, test_linear_values);
    tcase_add_test(tc, test_matmul_grad);
    tcase_add_test(tc, test_matmul_grad_broadcast);
    tcase_add_test(tc, test_linear_grad);
    tcase_add_test(tc, test_linear_bias_grad_in_product);
    tcase_add_test(tc, test_linear_bias_grad_one_row_or_output);
    tcase_add_test(tc, test_matmul_bad_input);
    tcase_add_test(tc, test_linear_bad_input);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
