/* Core: creation, dtypes, copies, views, scopes, errors, autograd engine. */
#include <math.h>
#include <string.h>

#include "testutil.h"

START_TEST(test_create_and_fill)
{
    TU_MEM_BEGIN;
    Tensor *t = tensor_full(2, (const int64_t[]){2, 3}, 1.5, CT_F32, ct_cpu());
    tu_assert_shape(t, 2, 2, 3);
    tu_assert_values(t, ((double[]){1.5, 1.5, 1.5, 1.5, 1.5, 1.5}), 6, 0, 0);
    ck_assert(tensor_is_contiguous(t));
    ck_assert_int_eq(tensor_strides(t)[0], 3);
    tensor_free(t);
    Tensor *a = tensor_arange(0, 5, 1, CT_I64, ct_cpu());
    tu_assert_values(a, ((double[]){0, 1, 2, 3, 4}), 5, 0, 0);
    tensor_free(a);
    TU_MEM_END;
}
END_TEST

START_TEST(test_dtype_round_trip)
{
    /* bf16 and f16 round to nearest even */
    ck_assert_uint_eq(ct_f32_to_bf16(1.0f), 0x3f80);
    ck_assert_uint_eq(ct_f32_to_bf16(1.00390625f), 0x3f80); /* tie -> even */
    ck_assert_uint_eq(ct_f32_to_bf16(1.01171875f), 0x3f82); /* tie -> even (up) */
    ck_assert_uint_eq(ct_f32_to_f16(1.0f), 0x3c00);
    ck_assert_uint_eq(ct_f32_to_f16(65504.0f), 0x7bff);
    ck_assert_uint_eq(ct_f32_to_f16(65520.0f), 0x7c00);       /* overflow -> inf */
    ck_assert_uint_eq(ct_f32_to_f16(5.9604645e-8f), 0x0001);  /* smallest subnormal */
    ck_assert_uint_eq(ct_f32_to_f16(2.98023224e-8f), 0x0000); /* half of it: tie -> 0 */
    ck_assert_uint_eq(ct_f32_to_f16(1.00048828125f), 0x3c00); /* tie -> even */
    ck_assert(isnan(ct_f16_to_f32(ct_f32_to_f16(NAN))));
    ck_assert(isnan(ct_bf16_to_f32(ct_f32_to_bf16(NAN))));
    /* every f16 value survives f16 -> f32 -> f16 */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaNs */
        ck_assert_uint_eq(ct_f32_to_f16(ct_f16_to_f32((uint16_t)h)), h);
    }
    for (uint32_t b = 0; b < 0x10000; b++) {
        if ((b & 0x7f80) == 0x7f80 && (b & 0x7f)) continue;
        ck_assert_uint_eq(ct_f32_to_bf16(ct_bf16_to_f32((uint16_t)b)), b);
    }
    /* tensor casts through every dtype keep small integers */
    CtScope *s = ct_scope_open();
    Tensor *x = tu_tensor(CT_F32, 1, (const int64_t[]){4}, (double[]){0, 1, 2, 100});
    for (int dt = 0; dt < CT_DTYPE_COUNT; dt++) {
        if (dt == CT_BOOL) continue;
        Tensor *y = tensor_cast(tensor_cast(x, (CtDType)dt), CT_F32);
        tu_assert_values(y, ((double[]){0, 1, 2, 100}), 4, 0, 0);
    }
    tu_assert_values(tensor_cast(x, CT_BOOL), ((double[]){0, 1, 1, 1}), 4, 0, 0);
    tensor_free(x);
    ct_scope_close(s);
}
END_TEST

START_TEST(test_views_share_storage)
{
    CtScope *s = ct_scope_open();
    Tensor *x = tensor_arange(0, 12, 1, CT_F32, ct_cpu());
    Tensor *m = tensor_view(x, 2, (const int64_t[]){3, 4});
    ck_assert(tensor_shares_storage(x, m));
    Tensor *t = tensor_transpose(m, 0, 1);
    tu_assert_shape(t, 2, 4, 3);
    ck_assert(!tensor_is_contiguous(t));
    tu_assert_values(tensor_contiguous(t),
                     ((double[]){0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}), 12, 0, 0);
    Tensor *sl = tensor_slice(m, 1, 1, 4, 2);
    tu_assert_values(sl, ((double[]){1, 3, 5, 7, 9, 11}), 6, 0, 0);
    tu_assert_values(tensor_select(m, 0, -1), ((double[]){8, 9, 10, 11}), 4, 0, 0);
    Tensor *e = tensor_expand(
        tensor_view(tensor_slice(x, 0, 0, 3, 1), 2, (const int64_t[]){3, 1}), 2,
        (const int64_t[]){3, 2});
    tu_assert_values(e, ((double[]){0, 0, 1, 1, 2, 2}), 6, 0, 0);
    /* reshape of a non-viewable transpose copies */
    Tensor *r = tensor_reshape(t, 1, (const int64_t[]){-1});
    ck_assert(!tensor_shares_storage(r, x));
    tu_assert_values(r, ((double[]){0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}), 12, 0, 0);
    ck_assert_ptr_null(tensor_view(t, 1, (const int64_t[]){12}));
    tu_assert_error(CT_ERR_SHAPE, "not contiguous enough");
    ct_scope_close(s);
}
END_TEST

START_TEST(test_scope_releases_everything)
{
    TU_MEM_BEGIN;
    Tensor *keep;
    CtScope *s = ct_scope_open();
    Tensor *a = tensor_ones(1, (const int64_t[]){1000}, CT_F32, ct_cpu());
    Tensor *b = tensor_add(a, a);
    keep = tensor_retain(tensor_add(b, a));
    ck_assert_uint_eq(ct_scope_count(s), 3);
    ct_scope_close(s);
    Tensor *head = tensor_slice(keep, 0, 0, 2, 1); /* no scope: caller-owned */
    tu_assert_values(head, ((double[]){3, 3}), 2, 0, 0);
    tensor_free(head);
    tensor_free(keep);
    TU_MEM_END;
}
END_TEST

START_TEST(test_sticky_errors)
{
    ct_clear_error();
    CtScope *s = ct_scope_open();
    Tensor *a = tensor_zeros(2, (const int64_t[]){2, 3}, CT_F32, ct_cpu());
    Tensor *b = tensor_zeros(2, (const int64_t[]){4, 5}, CT_F32, ct_cpu());
    Tensor *y = tensor_add(tensor_add(a, b), a); /* first failure kept */
    ck_assert_ptr_null(y);
    tu_assert_error(CT_ERR_SHAPE,
                    "add: shapes f32[2, 3] cpu and f32[4, 5] cpu do not broadcast");
    Tensor *c = tensor_zeros(2, (const int64_t[]){2, 3}, CT_F64, ct_cpu());
    ck_assert_ptr_null(tensor_mul(a, c));
    tu_assert_error(CT_ERR_DTYPE, "mul: dtypes differ");
    ck_assert_ptr_null(tensor_zeros(1, (const int64_t[]){-2}, CT_F32, ct_cpu()));
    tu_assert_error(CT_ERR_SHAPE, "negative size -2");
    /* sizes whose bytes (or strides, an empty dim counting as 1) overflow */
    ck_assert_ptr_null(
        tensor_empty(2, (const int64_t[]){INT64_MAX / 2, 3}, CT_U8, ct_cpu()));
    tu_assert_error(CT_ERR_SHAPE, "tensor_empty: shape [4611686018427387903, 3] of u8 "
                                  "is too large to address");
    ck_assert_ptr_null(tensor_empty(4, (const int64_t[]){3267543552, 1, 0, 3322086406},
                                    CT_U8, ct_cpu()));
    tu_assert_error(CT_ERR_SHAPE, "too large to address");
    ck_assert_ptr_null(
        tensor_empty(1, (const int64_t[]){INT64_MAX / 4 + 1}, CT_F32, ct_cpu()));
    tu_assert_error(CT_ERR_SHAPE, "too large to address");
    int ngpu = ct_cuda_device_count();
    ck_assert_ptr_null(tensor_zeros(1, (const int64_t[]){2}, CT_F32, ct_cuda(ngpu)));
    tu_assert_error(CT_ERR_DEVICE, "cuda:");
    ct_scope_close(s);
}
END_TEST

START_TEST(test_backward_mul_add_accumulates)
{
    TU_MEM_BEGIN;
    Tensor *x = tu_tensor(CT_F64, 1, (const int64_t[]){3}, (double[]){1, 2, 3});
    Tensor *w = tu_tensor(CT_F64, 1, (const int64_t[]){3}, (double[]){4, 5, 6});
    tensor_set_requires_grad(x, true);
    tensor_set_requires_grad(w, true);
    for (int step = 0; step < 2; step++) {
        CtScope *s = ct_scope_open();
        Tensor *y = tensor_add(tensor_mul(x, w), x); /* x used twice */
        ck_assert_int_eq(tensor_backward(y, tensor_ones_like(y)), CT_OK);
        ct_scope_close(s);
    }
    /* dy/dx = w + 1, dy/dw = x; accumulated over two steps */
    tu_assert_values(tensor_grad(x), ((double[]){10, 12, 14}), 3, 0, 0);
    tu_assert_values(tensor_grad(w), ((double[]){2, 4, 6}), 3, 0, 0);
    tensor_free(x);
    tensor_free(w);
    TU_MEM_END;
}
END_TEST

START_TEST(test_backward_twice_is_an_error)
{
    Tensor *x = tu_tensor(CT_F64, 1, (const int64_t[]){1}, (double[]){2});
    tensor_set_requires_grad(x, true);
    CtScope *s = ct_scope_open();
    Tensor *y = tensor_mul(x, x);
    ck_assert_int_eq(tensor_backward(y, NULL), CT_OK);
    ck_assert_int_eq(tensor_backward(y, NULL), CT_ERR_STATE);
    tu_assert_error(CT_ERR_STATE, "already released");
    ct_scope_close(s);
    tu_assert_values(tensor_grad(x), ((double[]){4}), 1, 0, 0);
    tensor_free(x);
}
END_TEST

/* The op profile counts every op by kind while on, and nothing while off;
 * reset zeroes it; print lists the kinds that ran. */
START_TEST(test_op_profile)
{
    TU_MEM_BEGIN;
    bool was = ct_set_op_profile(false);
    ct_op_profile_reset();
    int64_t n = 1000;
    Tensor *a = tensor_zeros(1, &n, CT_F32, ct_cpu());
    ck_assert_int_eq(tensor_fill_(a, 1), CT_OK); /* off: not counted */
    ck_assert_uint_eq(ct_op_profile_get("fill", NULL), 0);
    ck_assert(!ct_set_op_profile(true));
    uint64_t before = ct_op_count();
    for (int i = 0; i < 3; i++) ck_assert_int_eq(tensor_fill_(a, i), CT_OK);
    CtScope *s = ct_scope_open();
    ck_assert_ptr_nonnull(tensor_add(a, a));
    ct_scope_close(s);
    uint64_t ns;
    ck_assert_uint_eq(ct_op_profile_get("fill", &ns), 3);
    ck_assert_uint_gt(ns, 0);
    ck_assert_uint_eq(ct_op_profile_get("binary", NULL), 1);
    ck_assert_uint_eq(ct_op_count() - before, 4);
    ck_assert_uint_eq(ct_op_profile_get("no_such_op", &ns), 0);
    ck_assert_uint_eq(ns, 0);
    char buf[1024] = {0};
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    ct_op_profile_print(f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "op_profile fill"));
    ck_assert_ptr_nonnull(strstr(buf, "calls          3"));
    ck_assert_ptr_nonnull(strstr(buf, "op_profile binary"));
    ck_assert_ptr_null(strstr(buf, "matmul"));
    ct_op_profile_reset();
    ck_assert_uint_eq(ct_op_profile_get("fill", NULL), 0);
    ct_set_op_profile(was);
    tensor_free(a);
    TU_MEM_END;
}
END_TEST

/* A contiguous seed of the root's dtype is used as it is (no copy op) and
 * only read: it reaches leaves through identity backwards (reshape, add)
 * as copies and sums, never as their gradient buffer. */
START_TEST(test_backward_seed_is_read_only)
{
    TU_MEM_BEGIN;
    Tensor *x = tu_tensor(CT_F64, 1, (const int64_t[]){4}, (double[]){1, 2, 3, 4});
    Tensor *z = tu_tensor(CT_F64, 1, (const int64_t[]){1}, (double[]){5});
    tensor_set_requires_grad(x, true);
    tensor_set_requires_grad(z, true);
    CtScope *s = ct_scope_open();
    Tensor *g = tu_tensor(CT_F64, 2, (const int64_t[]){2, 2}, (double[]){1, -2, 3, 0.5});
    Tensor *m = tensor_reshape(x, 2, (const int64_t[]){2, 2});
    ck_assert_int_eq(tensor_backward(tensor_add(m, m), g), CT_OK);
    tu_assert_values(tensor_grad(x), ((double[]){2, -4, 6, 1}), 4, 0, 0);
    tu_assert_values(g, ((double[]){1, -2, 3, 0.5}), 4, 0, 0);
    ck_assert(!tensor_shares_storage(tensor_grad(x), g));
    /* a one-element root: ones passed in cost one op less than implied */
    Tensor *one = tensor_ones(1, (const int64_t[]){1}, CT_F64, ct_cpu());
    uint64_t ops[2];
    for (int k = 0; k < 2; k++) {
        Tensor *r = tensor_mul(z, z);
        uint64_t before = ct_op_count();
        ck_assert_int_eq(tensor_backward(r, k ? one : NULL), CT_OK);
        ops[k] = ct_op_count() - before;
    }
    ck_assert_uint_eq(ops[1] + 1, ops[0]);
    tu_assert_values(tensor_grad(z), ((double[]){20}), 1, 0, 0);
    tu_assert_values(one, ((double[]){1}), 1, 0, 0);
    /* a strided seed, or another dtype, is copied first */
    Tensor *gt = tensor_transpose(g, 0, 1);
    ck_assert_int_eq(tensor_zero_(tensor_grad(x)), CT_OK);
    m = tensor_reshape(x, 2, (const int64_t[]){2, 2}); /* the old graph is released */
    ck_assert_int_eq(tensor_backward(tensor_mul_scalar(m, 3), gt), CT_OK);
    tu_assert_values(tensor_grad(x), ((double[]){3, 9, -6, 1.5}), 4, 0, 0);
    ck_assert_int_eq(tensor_zero_(tensor_grad(x)), CT_OK);
    m = tensor_reshape(x, 2, (const int64_t[]){2, 2});
    ck_assert_int_eq(tensor_backward(m, tensor_cast(g, CT_F32)), CT_OK);
    tu_assert_values(tensor_grad(x), ((double[]){1, -2, 3, 0.5}), 4, 0, 0);
    ct_scope_close(s);
    tensor_free(x);
    tensor_free(z);
    tensor_free(g);
    TU_MEM_END;
}
END_TEST

static Tensor *views_fn(Tensor **in, void *ctx)
{
    (void)ctx;
    Tensor *m = tensor_reshape(in[0], 2, (const int64_t[]){3, 4});
    Tensor *t = tensor_transpose(m, 0, 1);             /* (4, 3) */
    Tensor *s = tensor_slice(t, 0, 1, 4, 2);           /* rows 1, 3 */
    Tensor *p = tensor_mul(s, tensor_select(t, 0, 0)); /* broadcast (3) */
    return tensor_mul(p, tensor_unsqueeze(tensor_select(m, 1, 2), 0));
}

START_TEST(test_grad_through_views)
{
    Tensor *x = tu_rand64(1, (const int64_t[]){12}, -1, 1, 3, true);
    tu_gradcheck("views", views_fn, NULL, 1, &x);
    tensor_free(x);
}
END_TEST

static Tensor *more_views_fn(Tensor **in, void *ctx)
{
    (void)ctx;
    Tensor *t = tensor_view(in[0], 3, (const int64_t[]){2, 1, 6}); /* (2, 1, 6) */
    Tensor *p = tensor_permute(t, (const int[]){2, 0, 1});         /* (6, 2, 1) */
    Tensor *e = tensor_expand(p, 3, (const int64_t[]){6, 2, 3});   /* (6, 2, 3) */
    Tensor *f = tensor_flatten(tensor_contiguous(e), 1, 2);        /* (6, 6) */
    Tensor *q = tensor_squeeze(tensor_unsqueeze(f, 0), 0);
    Tensor *c = tensor_cast(tensor_clone(q), CT_F64);
    return tensor_mul(c, c); /* nonlinear, so every path's gradient matters */
}

START_TEST(test_grad_through_more_views)
{
    Tensor *x = tu_rand64(1, (const int64_t[]){12}, -1, 1, 4, true);
    tu_gradcheck("more views", more_views_fn, NULL, 1, &x);
    tensor_free(x);
}
END_TEST

START_TEST(test_rebind_and_state_dict)
{
    TU_MEM_BEGIN;
    Tensor *a = tu_tensor(CT_F32, 2, (const int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
    Tensor *b = tu_tensor(CT_F32, 1, (const int64_t[]){3}, (double[]){5, 6, 7});
    tensor_set_requires_grad(a, true);
    Tensor *block = tensor_zeros(1, (const int64_t[]){8}, CT_F32, ct_cpu());
    ck_assert_int_eq(tensor_rebind(a, block, 0), CT_OK);
    ck_assert_int_eq(tensor_rebind(b, block, 4), CT_OK);
    ck_assert(tensor_shares_storage(a, block) && tensor_shares_storage(b, block));
    ck_assert(tensor_requires_grad(a));
    tu_assert_values(block, ((double[]){1, 2, 3, 4, 5, 6, 7, 0}), 8, 0, 0);
    tensor_fill_(block, 9); /* one write reaches both */
    tu_assert_values(a, ((double[]){9, 9, 9, 9}), 4, 0, 0);
    tu_assert_values(b, ((double[]){9, 9, 9}), 3, 0, 0);
    ck_assert_int_eq(tensor_rebind(b, block, 6), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "cannot place f32[3] cpu at offset 6");

    CtStateDict *d = ct_state_dict_create();
    ck_assert_int_eq(ct_state_dict_add(d, "fc1.weight", a), CT_OK);
    ck_assert_int_eq(ct_state_dict_add(d, "fc1.bias", b), CT_OK);
    ck_assert_int_eq(ct_state_dict_add(d, "fc1.bias", b), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "duplicate name \"fc1.bias\"");
    ck_assert_int_eq(ct_state_dict_size(d), 2);
    ck_assert_str_eq(ct_state_dict_name(d, 1), "fc1.bias");
    ck_assert_ptr_eq(ct_state_dict_get(d, "fc1.weight"), a);
    ck_assert_ptr_null(ct_state_dict_get(d, "nope"));
    tensor_free(a);
    tensor_free(b);
    tensor_free(block);
    ct_state_dict_free(d); /* holds the last references */
    TU_MEM_END;
}
END_TEST

START_TEST(test_allocator_reuses_blocks)
{
    ct_alloc_empty_cache(ct_cpu());
    CtAllocStats a0 = ct_alloc_stats(ct_cpu());
    for (int i = 0; i < 50; i++) {
        CtScope *s = ct_scope_open();
        Tensor *t = tensor_zeros(2, (const int64_t[]){64, 100 + i % 3}, CT_F32, ct_cpu());
        ck_assert_ptr_nonnull(tensor_add(t, t));
        ct_scope_close(s);
    }
    CtAllocStats a1 = ct_alloc_stats(ct_cpu());
    /* three shapes, two live tensors each: a handful of system allocations */
    ck_assert_uint_le(a1.n_allocs - a0.n_allocs, 6);
    ck_assert_uint_eq(a1.in_use, a0.in_use);
    ck_assert_uint_gt(a1.cached, 0);
    ck_assert_uint_ge(a1.peak, 2 * 64 * 100 * sizeof(float));
    ct_alloc_empty_cache(ct_cpu());
    ck_assert_uint_eq(ct_alloc_stats(ct_cpu()).cached, 0);
}
END_TEST

START_TEST(test_no_grad_and_detach)
{
    Tensor *x = tu_tensor(CT_F64, 1, (const int64_t[]){2}, (double[]){1, 2});
    ck_assert_int_eq(tensor_set_requires_grad(x, true), CT_OK);
    CtScope *s = ct_scope_open();
    bool prev = ct_set_grad_enabled(false);
    ck_assert(prev);
    ck_assert(!tensor_requires_grad(tensor_mul(x, x)));
    ct_set_grad_enabled(true);
    Tensor *y = tensor_mul(x, x);
    ck_assert(tensor_requires_grad(y));
    Tensor *d = tensor_detach(y);
    ck_assert(!tensor_requires_grad(d));
    ck_assert(tensor_shares_storage(d, y));
    /* y is not a leaf */
    ck_assert_int_eq(tensor_set_requires_grad(y, false), CT_ERR_STATE);
    tu_assert_error(CT_ERR_STATE, "is not a leaf (it is the output of mul)");
    /* a detached tensor's graph stops: backward has nothing to do */
    ck_assert_int_eq(tensor_backward(tensor_mul(d, d), NULL), CT_ERR_STATE);
    tu_assert_error(CT_ERR_STATE, "does not require grad");
    /* an implied gradient needs a one-element output */
    ck_assert_int_eq(tensor_backward(y, NULL), CT_ERR_SHAPE);
    tu_assert_error(CT_ERR_SHAPE, "one-element output");
    Tensor *i = tensor_zeros(1, (const int64_t[]){2}, CT_I64, ct_cpu());
    ck_assert_int_eq(tensor_set_requires_grad(i, true), CT_ERR_DTYPE);
    tu_assert_error(CT_ERR_DTYPE, "only floating-point tensors can require grad");
    /* a leaf that stops requiring grad between forward and backward gets no
     * gradient, as in PyTorch; the other leaf still does */
    Tensor *w = tu_tensor(CT_F64, 1, (const int64_t[]){2}, (double[]){3, 4});
    ck_assert_int_eq(tensor_set_requires_grad(w, true), CT_OK);
    Tensor *loss = tensor_sum_all(tensor_mul(x, w));
    ck_assert_int_eq(tensor_set_requires_grad(x, false), CT_OK);
    ck_assert_int_eq(tensor_backward(loss, NULL), CT_OK);
    ck_assert_ptr_null(tensor_grad(x));
    tu_assert_values(tensor_grad(w), ((double[]){1, 2}), 2, 0, 0);
    ct_scope_close(s);
    tensor_free(x);
    tensor_free(w);
}
END_TEST

START_TEST(test_copy_and_item)
{
    CtScope *s = ct_scope_open();
    Tensor *dst = tensor_zeros(2, (const int64_t[]){2, 3}, CT_F64, ct_cpu());
    Tensor *row = tu_tensor(CT_F32, 1, (const int64_t[]){3}, (double[]){1, 2, 3});
    ck_assert_int_eq(tensor_copy_(dst, row), CT_OK); /* broadcasts */
    tu_assert_values(dst, ((double[]){1, 2, 3, 1, 2, 3}), 6, 0, 0);
    Tensor *bad = tensor_zeros(1, (const int64_t[]){4}, CT_F32, ct_cpu());
    ck_assert_int_eq(tensor_copy_(dst, bad), CT_ERR_SHAPE);
    tu_assert_error(CT_ERR_SHAPE,
                    "tensor_copy_: cannot copy f32[4] cpu into f64[2, 3] cpu");
    ck_assert(isnan(tensor_item(dst)));
    tu_assert_error(CT_ERR_SHAPE, "tensor_item: expected one element");
    ck_assert_double_eq(tensor_item(tensor_select(row, 0, 2)), 3.0);
    ck_assert_ptr_null(tensor_arange(0, 1, 0, CT_F32, ct_cpu()));
    tu_assert_error(CT_ERR_INVALID, "step != 0");
    tensor_free(row);
    ct_scope_close(s);
}
END_TEST

/* Views of one storage that overlap copy as if through a temporary, in
 * either direction and across rows; the same view copies onto itself in
 * one op. */
START_TEST(test_copy_overlapping_views)
{
    CtScope *s = ct_scope_open();
    Tensor *x = tensor_arange(0, 6, 1, CT_F32, ct_cpu());
    ck_assert_int_eq(
        tensor_copy_(tensor_slice(x, 0, 1, 6, 1), tensor_slice(x, 0, 0, 5, 1)), CT_OK);
    tu_assert_values(x, ((double[]){0, 0, 1, 2, 3, 4}), 6, 0, 0);
    ck_assert_int_eq(
        tensor_copy_(tensor_slice(x, 0, 0, 5, 1), tensor_slice(x, 0, 1, 6, 1)), CT_OK);
    tu_assert_values(x, ((double[]){0, 1, 2, 3, 4, 4}), 6, 0, 0);
    Tensor *m = tensor_reshape(tensor_arange(0, 9, 1, CT_F32, ct_cpu()), 2,
                               (const int64_t[]){3, 3});
    uint64_t ops = ct_op_count();
    ck_assert_int_eq(tensor_copy_(m, tensor_transpose(m, 0, 1)), CT_OK);
    ck_assert_uint_eq(ct_op_count() - ops, 2); /* through a temporary */
    tu_assert_values(m, ((double[]){0, 3, 6, 1, 4, 7, 2, 5, 8}), 9, 0, 0);
    ops = ct_op_count();
    ck_assert_int_eq(tensor_copy_(m, m), CT_OK);
    ck_assert_uint_eq(ct_op_count() - ops, 1);
    tu_assert_values(m, ((double[]){0, 3, 6, 1, 4, 7, 2, 5, 8}), 9, 0, 0);
    ct_scope_close(s);
}
END_TEST

/* Copies within one dtype move bits: i64 beyond 2^53 and a signalling
 * NaN's payload survive strided copies (transpose, clone, expand,
 * copy_to_host). */
START_TEST(test_strided_copies_keep_bits)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const int64_t big = (INT64_C(1) << 53) + 1;
    const int64_t v[4] = {big, 1, 2, big + 2}, vt[4] = {big, 2, 1, big + 2};
    Tensor *t = tensor_transpose(
        tensor_from_data(v, 2, (const int64_t[]){2, 2}, CT_I64, ct_cpu()), 0, 1);
    Tensor *e =
        tensor_expand(tensor_from_data(v, 2, (const int64_t[]){4, 1}, CT_I64, ct_cpu()),
                      2, (const int64_t[]){4, 2});
    int64_t got[8];
    Tensor *copies[2] = {tensor_contiguous(t), tensor_clone(t)};
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(tensor_copy_to_host(copies[k], got, CT_I64), CT_OK);
        ck_assert_int_eq(memcmp(got, vt, sizeof vt), 0);
    }
    ck_assert_int_eq(tensor_copy_to_host(t, got, CT_I64), CT_OK);
    ck_assert_int_eq(memcmp(got, vt, sizeof vt), 0);
    ck_assert_int_eq(tensor_copy_to_host(tensor_contiguous(e), got, CT_I64), CT_OK);
    for (int i = 0; i < 8; i++) ck_assert(got[i] == v[i / 2]);
    const uint32_t snan = 0x7fa00001u, bits[4] = {snan, 0x3f800000u, 0, snan};
    Tensor *f = tensor_transpose(
        tensor_from_data(bits, 2, (const int64_t[]){2, 2}, CT_F32, ct_cpu()), 0, 1);
    uint32_t fb[4];
    ck_assert_int_eq(tensor_copy_to_host(tensor_contiguous(f), fb, CT_F32), CT_OK);
    ck_assert(fb[0] == snan && fb[1] == 0 && fb[2] == 0x3f800000u && fb[3] == snan);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* Casts between integer dtypes wrap around (two's complement) and never
 * pass through double; an integer rounds to f32 once; floats out of an
 * integer's range give its minimum: PyTorch's values (on x86). */
START_TEST(test_integer_casts)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const int64_t v[4] = {INT64_C(4294967301), INT64_C(-4294967301),
                          (INT64_C(1) << 40) + 300, -1};
    Tensor *x = tensor_from_data(v, 1, (const int64_t[]){4}, CT_I64, ct_cpu());
    int32_t i32[4];
    ck_assert_int_eq(tensor_copy_to_host(tensor_cast(x, CT_I32), i32, CT_I32), CT_OK);
    ck_assert(i32[0] == 5 && i32[1] == -5 && i32[2] == 300 && i32[3] == -1);
    uint8_t u8[4];
    ck_assert_int_eq(tensor_copy_to_host(tensor_cast(x, CT_U8), u8, CT_U8), CT_OK);
    ck_assert(u8[0] == 5 && u8[1] == 251 && u8[2] == 44 && u8[3] == 255);
    ck_assert_int_eq(tensor_copy_to_host(tensor_cast(x, CT_BOOL), u8, CT_BOOL), CT_OK);
    ck_assert(u8[0] == 1 && u8[1] == 1 && u8[2] == 1 && u8[3] == 1);
    const int32_t w[2] = {70000, -1};
    Tensor *y = tensor_from_data(w, 1, (const int64_t[]){2}, CT_I32, ct_cpu());
    ck_assert_int_eq(tensor_copy_to_host(tensor_cast(y, CT_U8), u8, CT_U8), CT_OK);
    ck_assert(u8[0] == 112 && u8[1] == 255);
    /* 2^60 + 2^36 + 1 rounds up to f32; through double it would tie down */
    const int64_t r = (INT64_C(1) << 60) + (INT64_C(1) << 36) + 1;
    float f;
    Tensor *z = tensor_from_data(&r, 1, (const int64_t[]){1}, CT_I64, ct_cpu());
    ck_assert_int_eq(tensor_copy_to_host(tensor_cast(z, CT_F32), &f, CT_F32), CT_OK);
    ck_assert(f == 0x1p60f + 0x1p37f);
    const double d[5] = {3e9, NAN, -1.5, 300.7, -INFINITY};
    Tensor *fd = tensor_from_data(d, 1, (const int64_t[]){5}, CT_F64, ct_cpu());
    int32_t fi[5];
    ck_assert_int_eq(tensor_copy_to_host(tensor_cast(fd, CT_I32), fi, CT_I32), CT_OK);
    ck_assert(fi[0] == INT32_MIN && fi[1] == INT32_MIN && fi[2] == -1 && fi[3] == 300 &&
              fi[4] == INT32_MIN);
    int64_t fl[5];
    ck_assert_int_eq(tensor_copy_to_host(tensor_cast(fd, CT_I64), fl, CT_I64), CT_OK);
    ck_assert(fl[0] == 3000000000 && fl[1] == INT64_MIN && fl[2] == -1 && fl[3] == 300 &&
              fl[4] == INT64_MIN);
    uint8_t fu[5];
    ck_assert_int_eq(tensor_copy_to_host(tensor_cast(fd, CT_U8), fu, CT_U8), CT_OK);
    ck_assert(fu[0] == 0 && fu[1] == 0 && fu[2] == 255 && fu[3] == 44 && fu[4] == 0);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* expand to a shape whose size does not fit int64: a clear error. */
START_TEST(test_expand_too_large)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *x = tensor_zeros(2, (const int64_t[]){1, 1}, CT_F32, ct_cpu());
    const int64_t huge = INT64_C(1) << 40;
    ck_assert_ptr_null(tensor_expand(x, 2, (const int64_t[]){huge, huge}));
    tu_assert_error(CT_ERR_SHAPE, "expand: shape [1099511627776, 1099511627776] of f32 "
                                  "is too large to address");
    ck_assert_ptr_nonnull(tensor_expand(x, 2, (const int64_t[]){huge, 1}));
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

Suite *core_suite(void)
{
    Suite *s = suite_create("tensor_core");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_create_and_fill);
    tcase_add_test(tc, test_dtype_round_trip);
    tcase_add_test(tc, test_views_share_storage);
    tcase_add_test(tc, test_scope_releases_everything);
    tcase_add_test(tc, test_sticky_errors);
    tcase_add_test(tc, test_backward_mul_add_accumulates);
    tcase_add_test(tc, test_backward_twice_is_an_error);
    tcase_add_test(tc, test_backward_seed_is_read_only);
    tcase_add_test(tc, test_op_profile);
    tcase_add_test(tc, test_grad_through_views);
    tcase_add_test(tc, test_grad_through_more_views);
    tcase_add_test(tc, test_allocator_reuses_blocks);
    tcase_add_test(tc, test_no_grad_and_detach);
    tcase_add_test(tc, test_copy_and_item);
    tcase_add_test(tc, test_copy_overlapping_views);
    tcase_add_test(tc, test_strided_copies_keep_bits);
    tcase_add_test(tc, test_integer_casts);
    tcase_add_test(tc, test_expand_too_large);
    tcase_add_test(tc, test_rebind_and_state_dict);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(core_suite());
}
