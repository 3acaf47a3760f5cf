/* Indexing and joining: embedding, index_select, gather, one_hot, cat,
 * stack: values, gradients (repeated indices accumulate), bad input. */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"

static Tensor *arange2(CtDType dt, int64_t r, int64_t c, double base)
{
    double *v = malloc((size_t)(r * c) * sizeof *v);
    for (int64_t i = 0; i < r * c; i++) v[i] = base + (double)i;
    Tensor *t = tu_tensor(dt, 2, (const int64_t[]){r, c}, v);
    free(v);
    return t;
}

static Tensor *idx(int nd, const int64_t *shape, const double *v)
{
    return tu_tensor(CT_I64, nd, shape, v);
}

/* ------------------------------------------------------------ embedding */

START_TEST(test_embedding_values)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *w = arange2(CT_F32, 5, 3, 0); /* row v = {3v, 3v+1, 3v+2} */
    Tensor *ix = idx(2, (const int64_t[]){2, 3}, (double[]){4, 0, 4, 1, 1, 2});
    Tensor *y = tensor_embedding(w, ix);
    tu_assert_shape(y, 3, 2, 3, 3);
    tu_assert_values(
        y, ((double[]){12, 13, 14, 0, 1, 2, 12, 13, 14, 3, 4, 5, 3, 4, 5, 6, 7, 8}), 18,
        0, 0);
    /* 0-d indices give one row */
    Tensor *i0 = tensor_scalar(3, CT_I64, ct_cpu());
    Tensor *y0 = tensor_embedding(w, i0);
    tu_assert_shape(y0, 1, 3);
    tu_assert_values(y0, ((double[]){9, 10, 11}), 3, 0, 0);
    tensor_free(w);
    tensor_free(ix);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

static Tensor *embedding_fn(Tensor **in, void *ctx)
{
    return tensor_embedding(in[0], ctx);
}

START_TEST(test_embedding_grad)
{
    Tensor *w = tu_rand64(2, (const int64_t[]){5, 3}, -1, 1, 1, true);
    Tensor *ix = idx(2, (const int64_t[]){2, 3}, (double[]){4, 0, 4, 1, 4, 2});
    tu_gradcheck("embedding", embedding_fn, ix, 1, &w);
    /* gradient of the sum: the count of each row */
    CtScope *s = ct_scope_open();
    tensor_set_grad(w, NULL);
    Tensor *y = tensor_embedding(w, ix);
    ck_assert_int_eq(tensor_backward(y, tensor_ones_like(y)), CT_OK);
    tu_assert_values(tensor_grad(w),
                     ((double[]){1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 3, 3, 3}), 15, 0, 0);
    ct_scope_close(s);
    tensor_free(w);
    tensor_free(ix);
}
END_TEST

/* Large enough for the parallel paths: forward rows and the backward
 * counts, with an uneven index distribution. */
START_TEST(test_embedding_large)
{
    const int64_t V = 100, D = 512, T = 300;
    Tensor *w = tu_rand64(2, (const int64_t[]){V, D}, -1, 1, 2, true);
    double *iv = malloc((size_t)T * sizeof *iv), counts[100] = {0};
    for (int64_t i = 0; i < T; i++) {
        iv[i] = (double)((i * i) % V);
        counts[(i * i) % V] += 1;
    }
    Tensor *ix = idx(1, &T, iv);
    CtScope *s = ct_scope_open();
    Tensor *y = tensor_embedding(w, ix);
    const double *wv = tensor_data(w), *yv = tensor_data(y);
    for (int64_t i = 0; i < T; i++)
        for (int64_t k = 0; k < D; k++)
            ck_assert(yv[i * D + k] == wv[(int64_t)iv[i] * D + k]);
    ck_assert_int_eq(tensor_backward(y, tensor_ones_like(y)), CT_OK);
    ct_scope_close(s);
    const double *g = tensor_data(tensor_grad(w));
    for (int64_t v = 0; v < V; v++)
        for (int64_t k = 0; k < D; k++) ck_assert(g[v * D + k] == counts[v]);
    free(iv);
    tensor_free(w);
    tensor_free(ix);
}
END_TEST

/* --------------------------------------------------------- index_select */

START_TEST(test_index_select_values)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *t = arange2(CT_F64, 3, 4, 0);
    Tensor *i0 = idx(1, (const int64_t[]){3}, (double[]){2, 0, 2});
    Tensor *i1 = idx(1, (const int64_t[]){3}, (double[]){3, 1, 1});
    Tensor *y0 = tensor_index_select(t, 0, i0);
    tu_assert_shape(y0, 2, 3, 4);
    tu_assert_values(y0, ((double[]){8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}), 12, 0, 0);
    const double e1[] = {3, 1, 1, 7, 5, 5, 11, 9, 9};
    Tensor *y1 = tensor_index_select(t, 1, i1);
    tu_assert_shape(y1, 2, 3, 3);
    tu_assert_values(y1, e1, 9, 0, 0);
    tu_assert_values(tensor_index_select(t, -1, i1), e1, 9, 0, 0);
    /* a transposed input, and other dtypes (element copies) */
    tu_assert_values(tensor_index_select(tensor_transpose(t, 0, 1), 0, i1),
                     ((double[]){3, 7, 11, 1, 5, 9, 1, 5, 9}), 9, 0, 0);
    tu_assert_values(tensor_index_select(tensor_cast(t, CT_I32), 1, i1), e1, 9, 0, 0);
    tu_assert_values(tensor_index_select(tensor_cast(t, CT_BF16), 1, i1), e1, 9, 0, 0);
    tu_assert_values(tensor_index_select(tensor_cast(t, CT_U8), 1, i1), e1, 9, 0, 0);
    /* 0-d index keeps the dim with size 1 */
    Tensor *y2 = tensor_index_select(t, 0, tensor_scalar(1, CT_I64, ct_cpu()));
    tu_assert_shape(y2, 2, 1, 4);
    tu_assert_values(y2, ((double[]){4, 5, 6, 7}), 4, 0, 0);
    tensor_free(t);
    tensor_free(i0);
    tensor_free(i1);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

typedef struct SelCtx {
    int dim;
    Tensor *index;
    bool transpose;
} SelCtx;

static Tensor *index_select_fn(Tensor **in, void *ctx)
{
    SelCtx *c = ctx;
    Tensor *t = c->transpose ? tensor_transpose(in[0], 0, 2) : in[0];
    return tensor_index_select(t, c->dim, c->index);
}

START_TEST(test_index_select_grad)
{
    Tensor *t = tu_rand64(3, (const int64_t[]){3, 4, 5}, -1, 1, 3, true);
    Tensor *ix = idx(1, (const int64_t[]){5}, (double[]){2, 0, 2, 2, 1});
    for (int d = -1; d < 3; d++) {
        SelCtx c = {d, ix, false};
        tu_gradcheck("index_select", index_select_fn, &c, 1, &t);
    }
    SelCtx c = {1, ix, true}; /* (5, 4, 3) view */
    tu_gradcheck("index_select transposed", index_select_fn, &c, 1, &t);
    tensor_free(t);
    tensor_free(ix);
}
END_TEST

/* outer > 1 on the parallel path: the row-partitioned accumulation. */
START_TEST(test_index_select_large_backward)
{
    const int64_t shape[] = {8, 50, 128}, K = 300;
    Tensor *t = tu_rand64(3, shape, -1, 1, 4, true);
    double *iv = malloc((size_t)K * sizeof *iv), counts[50] = {0};
    for (int64_t i = 0; i < K; i++) {
        iv[i] = (double)((i * 7 + i / 13) % 50);
        counts[(i * 7 + i / 13) % 50] += 1;
    }
    Tensor *ix = idx(1, &K, iv);
    CtScope *s = ct_scope_open();
    Tensor *y = tensor_index_select(t, 1, ix);
    ck_assert_int_eq(tensor_backward(y, tensor_ones_like(y)), CT_OK);
    ct_scope_close(s);
    const double *g = tensor_data(tensor_grad(t));
    for (int64_t o = 0; o < 8; o++)
        for (int64_t v = 0; v < 50; v++)
            for (int64_t k = 0; k < 128; k++)
                ck_assert(g[(o * 50 + v) * 128 + k] == counts[v]);
    free(iv);
    tensor_free(t);
    tensor_free(ix);
}
END_TEST

/* --------------------------------------------------------------- gather */

START_TEST(test_gather_values)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *t = tu_tensor(CT_F32, 2, (const int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
    Tensor *i1 = idx(2, (const int64_t[]){2, 2}, (double[]){0, 0, 1, 0});
    tu_assert_values(tensor_gather(t, 1, i1), ((double[]){1, 1, 4, 3}), 4, 0, 0);
    /* more rows than the input along dim */
    Tensor *i0 = idx(2, (const int64_t[]){3, 2}, (double[]){1, 0, 0, 0, 1, 1});
    Tensor *y0 = tensor_gather(t, 0, i0);
    tu_assert_shape(y0, 2, 3, 2);
    tu_assert_values(y0, ((double[]){3, 2, 1, 2, 3, 4}), 6, 0, 0);
    /* an index smaller than the input in the other dim */
    Tensor *a = arange2(CT_F64, 3, 4, 0);
    Tensor *i2 = idx(2, (const int64_t[]){2, 2}, (double[]){3, 0, 1, 1});
    tu_assert_values(tensor_gather(a, -1, i2), ((double[]){3, 0, 5, 5}), 4, 0, 0);
    tensor_free(t);
    tensor_free(i0);
    tensor_free(i1);
    tensor_free(i2);
    tensor_free(a);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

typedef struct GatherCtx {
    int dim;
    Tensor *index;
} GatherCtx;

static Tensor *gather_fn(Tensor **in, void *ctx)
{
    GatherCtx *c = ctx;
    return tensor_gather(in[0], c->dim, c->index);
}

/* 3-d, every dim, index smaller in the other dims, repeated entries; the
 * forward checked against a naive loop. */
START_TEST(test_gather_grad)
{
    const int64_t ts[] = {3, 4, 5}, is[] = {2, 3, 4};
    Tensor *t = tu_rand64(3, ts, -1, 1, 5, true);
    const double *tv = tensor_data(t);
    for (int d = 0; d < 3; d++) {
        double iv[24];
        for (int i = 0; i < 24; i++) iv[i] = (double)((i * 5 + 1) % ts[d]);
        Tensor *ix = idx(3, is, iv);
        GatherCtx c = {d, ix};
        CtScope *s = ct_scope_open();
        Tensor *y = tensor_gather(t, d, ix);
        double expect[24];
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 3; b++)
                for (int k = 0; k < 4; k++) {
                    int64_t p[3] = {a, b, k}, j = (int64_t)iv[(a * 3 + b) * 4 + k];
                    p[d] = j;
                    expect[(a * 3 + b) * 4 + k] = tv[(p[0] * 4 + p[1]) * 5 + p[2]];
                }
        tu_assert_values(y, expect, 24, 0, 0);
        ct_scope_close(s);
        tu_gradcheck("gather", gather_fn, &c, 1, &t);
        tensor_free(ix);
    }
    tensor_free(t);
}
END_TEST

START_TEST(test_gather_large_backward)
{
    const int64_t ts[] = {200, 300}, is[] = {400, 300};
    Tensor *t = tu_rand64(2, ts, -1, 1, 6, true);
    double *iv = malloc(400 * 300 * sizeof *iv);
    double *counts = calloc(200 * 300, sizeof *counts);
    for (int64_t i = 0; i < 400; i++)
        for (int64_t j = 0; j < 300; j++) {
            int64_t r = (i * 31 + j * 17 + i * j) % 200;
            iv[i * 300 + j] = (double)r;
            counts[r * 300 + j] += 1;
        }
    Tensor *ix = idx(2, is, iv);
    CtScope *s = ct_scope_open();
    Tensor *y = tensor_gather(t, 0, ix);
    ck_assert_int_eq(tensor_backward(y, tensor_ones_like(y)), CT_OK);
    ct_scope_close(s);
    tu_assert_values(tensor_grad(t), counts, 200 * 300, 0, 0);
    free(iv);
    free(counts);
    tensor_free(t);
    tensor_free(ix);
}
END_TEST

/* -------------------------------------------------------------- one_hot */

START_TEST(test_one_hot_values)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *ix = idx(2, (const int64_t[]){2, 2}, (double[]){2, 0, 1, 2});
    const double e[] = {0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1};
    CtDType dts[] = {CT_F32, CT_F64, CT_I64, CT_I32, CT_BF16, CT_F16, CT_U8, CT_BOOL};
    for (int i = 0; i < 8; i++) {
        Tensor *y = tensor_one_hot(ix, 3, dts[i]);
        tu_assert_shape(y, 3, 2, 2, 3);
        ck_assert_int_eq(tensor_dtype(y), dts[i]);
        tu_assert_values(y, e, 12, 0, 0);
    }
    tensor_free(ix);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------ cat, stack */

START_TEST(test_cat_values)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *a = arange2(CT_F32, 2, 3, 0), *b = arange2(CT_F32, 2, 2, 100),
           *c = arange2(CT_F32, 1, 3, 200);
    Tensor *y1 = tensor_cat(2, (Tensor *[]){a, b}, 1);
    tu_assert_shape(y1, 2, 2, 5);
    tu_assert_values(y1, ((double[]){0, 1, 2, 100, 101, 3, 4, 5, 102, 103}), 10, 0, 0);
    Tensor *y0 = tensor_cat(3, (Tensor *[]){a, c, a}, 0);
    tu_assert_shape(y0, 2, 5, 3);
    tu_assert_values(y0, ((double[]){0, 1, 2, 3, 4, 5, 200, 201, 202, 0, 1, 2, 3, 4, 5}),
                     15, 0, 0);
    /* dim -1 of 3-d tensors, one of them transposed (non-contiguous) */
    Tensor *p8 = arange2(CT_F32, 1, 8, 0), *q4 = arange2(CT_F32, 1, 4, 10);
    Tensor *p = tensor_view(p8, 3, (const int64_t[]){2, 2, 2});
    Tensor *q = tensor_transpose(tensor_view(q4, 3, (const int64_t[]){1, 2, 2}), 0, 2);
    Tensor *y2 = tensor_cat(2, (Tensor *[]){p, q}, -1); /* q: (2, 2, 1) */
    tu_assert_shape(y2, 3, 2, 2, 3);
    tu_assert_values(y2, ((double[]){0, 1, 10, 2, 3, 12, 4, 5, 11, 6, 7, 13}), 12, 0, 0);
    /* one tensor, and an empty one */
    tu_assert_values(tensor_cat(1, &b, 0), ((double[]){100, 101, 102, 103}), 4, 0, 0);
    Tensor *e = tensor_zeros(2, (const int64_t[]){0, 3}, CT_F32, ct_cpu());
    tu_assert_shape(tensor_cat(3, (Tensor *[]){e, c, e}, 0), 2, 1, 3);
    tensor_free(a);
    tensor_free(b);
    tensor_free(c);
    tensor_free(p8);
    tensor_free(q4);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_stack_values)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *a = arange2(CT_F64, 2, 3, 0), *b = arange2(CT_F64, 2, 3, 10);
    Tensor *ab[] = {a, b};
    Tensor *y0 = tensor_stack(2, ab, 0);
    tu_assert_shape(y0, 3, 2, 2, 3);
    tu_assert_values(y0, ((double[]){0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15}), 12, 0,
                     0);
    Tensor *y1 = tensor_stack(2, ab, 1);
    tu_assert_shape(y1, 3, 2, 2, 3);
    tu_assert_values(y1, ((double[]){0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15}), 12, 0,
                     0);
    Tensor *y2 = tensor_stack(2, ab, -1);
    tu_assert_shape(y2, 3, 2, 3, 2);
    tu_assert_values(y2, ((double[]){0, 10, 1, 11, 2, 12, 3, 13, 4, 14, 5, 15}), 12, 0,
                     0);
    /* 0-d tensors stack into a vector */
    Tensor *z[] = {tensor_scalar(1, CT_F32, ct_cpu()),
                   tensor_scalar(2, CT_F32, ct_cpu())};
    tu_assert_values(tensor_stack(2, z, 0), ((double[]){1, 2}), 2, 0, 0);
    tensor_free(a);
    tensor_free(b);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* Results made with no scope open are caller-owned; nothing else leaks. */
START_TEST(test_join_no_scope)
{
    TU_MEM_BEGIN;
    Tensor *a = arange2(CT_F32, 2, 3, 0), *b = arange2(CT_F32, 2, 3, 10);
    Tensor *ts[6] = {a, b, a, b, a, b};
    Tensor *c = tensor_cat(6, ts, 0);
    Tensor *st = tensor_stack(6, ts, 1);
    tu_assert_shape(c, 2, 12, 3);
    tu_assert_shape(st, 3, 2, 6, 3);
    tu_assert_values(
        st, ((double[]){0, 1, 2, 10, 11, 12, 0, 1, 2, 10, 11, 12, 0, 1, 2, 10, 11, 12,
                        3, 4, 5, 13, 14, 15, 3, 4, 5, 13, 14, 15, 3, 4, 5, 13, 14, 15}),
        36, 0, 0);
    tensor_free(c);
    tensor_free(st);
    tensor_free(a);
    tensor_free(b);
    TU_MEM_END;
}
END_TEST

typedef struct JoinCtx {
    int n, dim;
    bool stack, transpose_first;
} JoinCtx;

static Tensor *join_fn(Tensor **in, void *ctx)
{
    JoinCtx *c = ctx;
    Tensor *ts[20];
    for (int i = 0; i < c->n; i++) ts[i] = in[i];
    if (c->transpose_first) ts[0] = tensor_transpose(in[0], 0, 1);
    return c->stack ? tensor_stack(c->n, ts, c->dim) : tensor_cat(c->n, ts, c->dim);
}

START_TEST(test_join_grad)
{
    const int64_t s23[] = {2, 3};
    Tensor *in[20];
    for (int i = 0; i < 20; i++) in[i] = tu_rand64(2, s23, -1, 1, 40 + (unsigned)i, true);
    JoinCtx c3 = {3, 1, false, false};
    tu_gradcheck("cat dim 1", join_fn, &c3, 3, in);
    JoinCtx c8 = {8, 0, false, false}; /* more inputs than a node holds */
    tu_gradcheck("cat 8 tensors", join_fn, &c8, 8, in);
    JoinCtx c20 = {20, 1, false, false}; /* a two-level tree of nodes */
    tu_gradcheck("cat 20 tensors", join_fn, &c20, 20, in);
    JoinCtx s20 = {20, 2, true, false};
    tu_gradcheck("stack 20 tensors", join_fn, &s20, 20, in);
    JoinCtx cm = {5, -1, false, false};
    tensor_set_requires_grad(in[1], false); /* some inputs without grad */
    tensor_set_requires_grad(in[3], false);
    tu_gradcheck("cat dim -1, mixed", join_fn, &cm, 5, in);
    tensor_set_requires_grad(in[1], true);
    tensor_set_requires_grad(in[3], true);
    JoinCtx s0 = {6, 0, true, false};
    tu_gradcheck("stack dim 0", join_fn, &s0, 6, in);
    JoinCtx s2 = {3, -1, true, false};
    tu_gradcheck("stack dim -1", join_fn, &s2, 3, in);
    tensor_free(in[0]);
    in[0] = tu_rand64(2, (const int64_t[]){3, 2}, -1, 1, 50, true);
    JoinCtx ct = {2, 0, false, true}; /* first input transposed */
    tu_gradcheck("cat transposed", join_fn, &ct, 2, in);
    for (int i = 0; i < 20; i++) tensor_free(in[i]);
}
END_TEST

/* ------------------------------------------------------------- bad input */

START_TEST(test_index_bad_input)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *t = arange2(CT_F32, 3, 4, 0);
    Tensor *bad = idx(1, (const int64_t[]){3}, (double[]){0, 3, 1});
    Tensor *neg = idx(1, (const int64_t[]){2}, (double[]){0, -1});
    ck_assert_ptr_null(tensor_index_select(t, 0, bad));
    tu_assert_error(CT_ERR_INVALID,
                    "index_select: index 3 at position [1] is out of range "
                    "for dim 0 of size 3");
    ck_assert_ptr_null(tensor_index_select(t, 1, neg));
    tu_assert_error(CT_ERR_INVALID,
                    "index -1 at position [1] is out of range for dim 1 of "
                    "size 4");
    Tensor *e2 = idx(2, (const int64_t[]){2, 2}, (double[]){0, 1, 2, 5});
    ck_assert_ptr_null(tensor_embedding(t, e2));
    tu_assert_error(CT_ERR_INVALID,
                    "embedding: index 5 at position [1, 1] is out of range "
                    "for dim 0 of size 3");
    ck_assert_ptr_null(tensor_gather(t, 1, e2));
    tu_assert_error(CT_ERR_INVALID, "gather: index 5 at position [1, 1] is out of range "
                                    "for dim 1 of size 4");
    ck_assert_ptr_null(tensor_one_hot(e2, 4, CT_F32));
    tu_assert_error(CT_ERR_INVALID, "one_hot: index 5 at position [1, 1] is out of range "
                                    "for 4 classes");
    ck_assert_ptr_null(tensor_one_hot(e2, 0, CT_F32));
    tu_assert_error(CT_ERR_INVALID, "one_hot: num_classes must be positive, got 0");
    /* wrong index dtypes */
    Tensor *fi = tensor_zeros(1, (const int64_t[]){2}, CT_F32, ct_cpu());
    Tensor *ii = tensor_zeros(1, (const int64_t[]){2}, CT_I32, ct_cpu());
    ck_assert_ptr_null(tensor_index_select(t, 0, fi));
    tu_assert_error(CT_ERR_DTYPE, "index_select: expected a i64 tensor, got f32[2] cpu");
    ck_assert_ptr_null(tensor_embedding(t, ii));
    tu_assert_error(CT_ERR_DTYPE, "embedding: expected a i64 tensor, got i32[2] cpu");
    ck_assert_ptr_null(
        tensor_gather(t, 0, tensor_zeros(2, (const int64_t[]){1, 1}, CT_I32, ct_cpu())));
    tu_assert_error(CT_ERR_DTYPE, "gather: expected a i64 tensor");
    ck_assert_ptr_null(tensor_one_hot(ii, 3, CT_F32));
    tu_assert_error(CT_ERR_DTYPE, "one_hot: expected a i64 tensor");
    /* shapes and dims */
    ck_assert_ptr_null(tensor_index_select(t, 2, neg));
    tu_assert_error(CT_ERR_SHAPE, "index_select: dim 2 out of range for a 2-d tensor");
    ck_assert_ptr_null(tensor_index_select(t, 0, e2));
    tu_assert_error(CT_ERR_SHAPE, "index_select: index must be 0-d or 1-d");
    ck_assert_ptr_null(
        tensor_embedding(tensor_zeros(1, (const int64_t[]){3}, CT_F32, ct_cpu()), bad));
    tu_assert_error(CT_ERR_SHAPE, "embedding: expected a 2-d tensor, got f32[3] cpu");
    ck_assert_ptr_null(tensor_gather(t, 0, bad));
    tu_assert_error(CT_ERR_SHAPE,
                    "gather: index i64[3] cpu does not fit input f32[3, 4] cpu");
    Tensor *wide = idx(2, (const int64_t[]){1, 5}, (double[]){0, 0, 0, 0, 0});
    ck_assert_ptr_null(tensor_gather(t, 0, wide));
    tu_assert_error(CT_ERR_SHAPE, "does not fit input");
    /* gradients of integer tensors are unsupported by the add kernels, but
     * forward on them works (checked in the values tests) */

    /* cat and stack */
    Tensor *a = arange2(CT_F32, 2, 3, 0), *b = arange2(CT_F32, 2, 4, 0),
           *d = arange2(CT_F64, 2, 3, 0);
    ck_assert_ptr_null(tensor_cat(3, (Tensor *[]){a, a, b}, 0));
    tu_assert_error(CT_ERR_SHAPE,
                    "cat: tensor 2 is f32[2, 4] cpu but tensor 0 is f32[2, 3] "
                    "cpu: sizes must match except in dim 0");
    ck_assert_ptr_null(tensor_cat(2, (Tensor *[]){a, d}, 0));
    tu_assert_error(CT_ERR_DTYPE,
                    "cat: tensor 1 is f64[2, 3] cpu but tensor 0 is f32[2, 3] "
                    "cpu: dtypes must match");
    ck_assert_ptr_null(tensor_cat(2, (Tensor *[]){a, fi}, 0));
    tu_assert_error(CT_ERR_SHAPE, "cat: tensor 1 is f32[2] cpu");
    ck_assert_ptr_null(tensor_cat(2, (Tensor *[]){a, a}, 2));
    tu_assert_error(CT_ERR_SHAPE, "cat: dim 2 out of range for a 2-d tensor");
    ck_assert_ptr_null(tensor_cat(0, (Tensor *[]){a}, 0));
    tu_assert_error(CT_ERR_INVALID, "cat: need at least one tensor, got 0");
    ck_assert_ptr_null(
        tensor_cat(1, (Tensor *[]){tensor_scalar(1, CT_F32, ct_cpu())}, 0));
    tu_assert_error(CT_ERR_SHAPE, "cat: 0-d tensors cannot be concatenated");
    ck_assert_ptr_null(tensor_stack(2, (Tensor *[]){a, b}, 0));
    tu_assert_error(CT_ERR_SHAPE,
                    "stack: tensor 1 is f32[2, 4] cpu but tensor 0 is f32[2, 3] "
                    "cpu: shapes must match");
    ck_assert_ptr_null(tensor_stack(2, (Tensor *[]){a, a}, 3));
    tu_assert_error(CT_ERR_SHAPE, "stack: dim 3 out of range for a 3-d tensor");

    /* NULL inputs: NULL results, the first error kept */
    ct_error(CT_ERR_IO, "earlier failure");
    ck_assert_ptr_null(tensor_embedding(NULL, bad));
    ck_assert_ptr_null(tensor_index_select(t, 0, NULL));
    ck_assert_ptr_null(tensor_gather(NULL, 0, bad));
    ck_assert_ptr_null(tensor_one_hot(NULL, 3, CT_F32));
    ck_assert_ptr_null(tensor_cat(2, (Tensor *[]){a, NULL}, 0));
    ck_assert_ptr_null(tensor_stack(2, (Tensor *[]){NULL, a}, 0));
    tu_assert_error(CT_ERR_IO, "earlier failure");
    Tensor *own[] = {t, bad, neg, e2, wide, a, b, d};
    for (int i = 0; i < 8; i++) tensor_free(own[i]);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tensor_index");
    TCase *tc = tcase_create("index");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_embedding_values);
    tcase_add_test(tc, test_embedding_grad);
    tcase_add_test(tc, test_embedding_large);
    tcase_add_test(tc, test_index_select_values);
    tcase_add_test(tc, test_index_select_grad);
    tcase_add_test(tc, test_index_select_large_backward);
    tcase_add_test(tc, test_gather_values);
    tcase_add_test(tc, test_gather_grad);
    tcase_add_test(tc, test_gather_large_backward);
    tcase_add_test(tc, test_one_hot_values);
    tcase_add_test(tc, test_cat_values);
    tcase_add_test(tc, test_stack_values);
    tcase_add_test(tc, test_join_no_scope);
    tcase_add_test(tc, test_join_grad);
    tcase_add_test(tc, test_index_bad_input);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
