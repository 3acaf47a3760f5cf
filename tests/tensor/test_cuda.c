/* CUDA backend: every kernel compared with the CPU (or a host reference)
 * on cuda:0, transfers, the caching allocator and error reporting.
 *
 * Without a device (or without the CUDA backend built) the device tests are
 * skipped with a loud count on stderr, and only the "no device" behaviour is
 * checked. test_two_gpu_instances needs two GPUs and says so when it has
 * fewer. Tolerances: copies, fills and comparisons exact; f32 arithmetic
 * 1e-6 relative; f32 matmul 1e-4 relative; f64 1e-12; bf16/f16 matmul 1e-2.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctrainer/data.h"
#include "testutil.h"
#include "tensor/internal.h"
#ifdef CTRAINER_HAVE_CUDA
#include "tensor/cuda/cuda.h"
#endif

static CtDevice gpu(void)
{
    return ct_cuda(0);
}

/* Bytes in use on cuda:0 before and after must match. */
#define GPU_MEM_BEGIN size_t gpu_mem0_ = ct_alloc_stats(gpu()).in_use
#define GPU_MEM_END                                                                      \
    ck_assert_msg(ct_alloc_stats(gpu()).in_use == gpu_mem0_,                             \
                  "cuda:0 memory leaked: %zu bytes in use, %zu before",                  \
                  ct_alloc_stats(gpu()).in_use, gpu_mem0_)

static double *host_f64(const Tensor *t)
{
    int64_t n = tensor_numel(t);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    ck_assert_int_eq(tensor_copy_to_host(t, v, CT_F64), CT_OK);
    return v;
}

/* Asserts that the CUDA tensor g holds the values of the CPU tensor c. */
#define assert_same(c, g, atol, rtol) assert_same_at(__LINE__, (c), (g), (atol), (rtol))
static void assert_same_at(int line, const Tensor *c, const Tensor *g, double atol,
                           double rtol)
{
    ck_assert_msg(c && g, "line %d: NULL tensor (%s)", line, ct_last_error());
    ck_assert_msg(tensor_device(g).type == CT_DEVICE_CUDA, "line %d: not on cuda", line);
    ck_assert_int_eq(tensor_ndim(c), tensor_ndim(g));
    for (int d = 0; d < tensor_ndim(c); d++)
        ck_assert_int_eq(tensor_shape(c)[d], tensor_shape(g)[d]);
    double *v = host_f64(c);
    tu_assert_values_at(__FILE__, line, g, v, tensor_numel(c), atol, rtol);
    free(v);
}

static Tensor *rand_cpu(CtDType dt, int ndim, const int64_t *shape, unsigned seed)
{
    Tensor *x = tu_rand64(ndim, shape, -1, 1, seed, false);
    Tensor *y = tensor_cast(x, dt);
    tensor_free(x);
    return y; /* scope-owned */
}

/* ------------------------------------------------------------ fill, copy */

START_TEST(test_fill_every_dtype)
{
    GPU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const int64_t shape[3] = {2, 3, 5};
    const double values[] = {2.5, -3, 1.00390625, 300, 0};
    for (int dt = 0; dt < CT_DTYPE_COUNT; dt++) {
        for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
            Tensor *c = tensor_full(3, shape, values[i], (CtDType)dt, ct_cpu());
            Tensor *g = tensor_full(3, shape, values[i], (CtDType)dt, gpu());
            assert_same(c, g, 0, 0);
        }
    }
    /* strided out: every other column of a transposed view */
    Tensor *c = tensor_zeros(2, (const int64_t[]){4, 6}, CT_F32, ct_cpu());
    Tensor *g = tensor_zeros(2, (const int64_t[]){4, 6}, CT_F32, gpu());
    ck_assert_int_eq(tensor_fill_(tensor_slice(tensor_transpose(c, 0, 1), 0, 1, 6, 2), 7),
                     CT_OK);
    ck_assert_int_eq(tensor_fill_(tensor_slice(tensor_transpose(g, 0, 1), 0, 1, 6, 2), 7),
                     CT_OK);
    assert_same(c, g, 0, 0);
    /* empty and 0-d */
    ck_assert_ptr_nonnull(tensor_zeros(2, (const int64_t[]){0, 3}, CT_F32, gpu()));
    tu_assert_values(tensor_scalar(-1, CT_U8, gpu()), ((double[]){255}), 1, 0, 0);
    ct_scope_close(s);
    GPU_MEM_END;
}
END_TEST

START_TEST(test_cast_round_trips)
{
    TU_MEM_BEGIN;
    GPU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const int64_t n = 10;
    Tensor *x = tu_tensor(CT_F64, 1, &n,
                          (double[]){0, 1, -2, 3.5, 100, 255, -0.25, 1000, 0.1, 7});
    for (int a = 0; a < CT_DTYPE_COUNT; a++) {
        Tensor *xa = tensor_cast(x, (CtDType)a);
        Tensor *ga = tensor_to_device(xa, gpu());
        assert_same(xa, ga, 0, 0);
        for (int b = 0; b < CT_DTYPE_COUNT; b++) {
            /* CPU: a -> b; CUDA: a -> b on the device; then b -> f64 both */
            Tensor *cb = tensor_cast(xa, (CtDType)b);
            Tensor *gb = tensor_cast(ga, (CtDType)b);
            ck_assert_int_eq(tensor_dtype(gb), b);
            assert_same(cb, gb, 0, 0);
            assert_same(tensor_cast(cb, CT_F64), tensor_cast(gb, CT_F64), 0, 0);
        }
    }
    /* strided source and destination, with conversion and without */
    Tensor *m = rand_cpu(CT_F32, 2, (const int64_t[]){5, 7}, 1);
    Tensor *gm = tensor_to_device(m, gpu());
    Tensor *t = tensor_transpose(m, 0, 1), *gt = tensor_transpose(gm, 0, 1);
    assert_same(tensor_contiguous(t), tensor_contiguous(gt), 0, 0);
    assert_same(tensor_cast(t, CT_BF16), tensor_cast(gt, CT_BF16), 0, 0);
    assert_same(tensor_cast(t, CT_F64), tensor_cast(gt, CT_F64), 0, 0);
    Tensor *ce = tensor_expand(tensor_slice(m, 0, 1, 2, 1), 2, (const int64_t[]){4, 7});
    Tensor *ge = tensor_expand(tensor_slice(gm, 0, 1, 2, 1), 2, (const int64_t[]){4, 7});
    assert_same(tensor_contiguous(ce), tensor_contiguous(ge), 0, 0);
    ct_scope_close(s);
    tensor_free(x);
    GPU_MEM_END;
    TU_MEM_END;
}
END_TEST

START_TEST(test_host_device_transfer)
{
    GPU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    float data[12];
    for (int i = 0; i < 12; i++) data[i] = (float)i * 0.5f - 2;
    const int64_t shape[2] = {3, 4};
    Tensor *g = tensor_from_data(data, 2, shape, CT_F32, gpu()); /* host -> device */
    float back[12];
    ck_assert_int_eq(tensor_copy_to_host(g, back, CT_F32), CT_OK); /* device -> host */
    for (int i = 0; i < 12; i++) ck_assert_float_eq(back[i], data[i]);
    /* device -> device */
    Tensor *g2 = tensor_clone(g);
    ck_assert(!tensor_shares_storage(g, g2));
    assert_same(tensor_from_data(data, 2, shape, CT_F32, ct_cpu()), g2, 0, 0);
    /* strided host view into a strided device view */
    Tensor *c = tensor_from_data(data, 2, shape, CT_F32, ct_cpu());
    Tensor *dst = tensor_zeros(2, (const int64_t[]){4, 3}, CT_F64, gpu());
    ck_assert_int_eq(tensor_copy_(tensor_slice(dst, 1, 0, 3, 2),
                                  tensor_slice(tensor_transpose(c, 0, 1), 1, 1, 3, 1)),
                     CT_OK);
    Tensor *ref = tensor_zeros(2, (const int64_t[]){4, 3}, CT_F64, ct_cpu());
    ck_assert_int_eq(tensor_copy_(tensor_slice(ref, 1, 0, 3, 2),
                                  tensor_slice(tensor_transpose(c, 0, 1), 1, 1, 3, 1)),
                     CT_OK);
    assert_same(ref, dst, 0, 0);
    /* device view back to a host tensor, and item */
    Tensor *h = tensor_to_device(tensor_transpose(g, 0, 1), ct_cpu());
    assert_same(h, tensor_transpose(g, 0, 1), 0, 0);
    ck_assert_double_eq(tensor_item(tensor_select(tensor_select(g, 0, 2), 0, 3)),
                        (double)data[11]);
    ct_scope_close(s);
    GPU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------------ binary */

typedef Tensor *(*BinFn)(Tensor *, Tensor *);

START_TEST(test_binary_broadcast)
{
    GPU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const BinFn arith[] = {tensor_add,     tensor_sub,     tensor_mul,     tensor_div,
                           tensor_maximum, tensor_minimum, tensor_add_relu};
    const BinFn cmp[] = {tensor_eq, tensor_ne, tensor_lt,
                         tensor_le, tensor_gt, tensor_ge};
    for (int dt = CT_F32; dt <= CT_F64; dt++) {
        double tol = dt == CT_F32 ? 1e-6 : 1e-12;
        /* (3, 1, 4) with (5, 1) -> (3, 5, 4); a transposed operand */
        Tensor *a = rand_cpu((CtDType)dt, 3, (const int64_t[]){3, 1, 4}, 2);
        Tensor *b = rand_cpu((CtDType)dt, 2, (const int64_t[]){5, 1}, 3);
        Tensor *m = tensor_transpose(rand_cpu((CtDType)dt, 2, (const int64_t[]){4, 5}, 4),
                                     0, 1); /* (5, 4), strided */
        Tensor *ga = tensor_to_device(a, gpu()), *gb = tensor_to_device(b, gpu());
        Tensor *gm =
            tensor_transpose(tensor_to_device(tensor_transpose(m, 0, 1), gpu()), 0, 1);
        for (size_t i = 0; i < sizeof arith / sizeof *arith; i++) {
            assert_same(arith[i](a, b), arith[i](ga, gb), tol, tol);
            assert_same(arith[i](m, a), arith[i](gm, ga), tol, tol);
        }
        for (size_t i = 0; i < sizeof cmp / sizeof *cmp; i++) {
            Tensor *r = cmp[i](ga, gb);
            ck_assert_int_eq(tensor_dtype(r), CT_BOOL);
            assert_same(cmp[i](a, b), r, 0, 0);
            assert_same(cmp[i](a, a), cmp[i](ga, ga), 0, 0);
        }
        /* pow on a positive base */
        Tensor *x = tu_rand64(2, (const int64_t[]){5, 1}, 0.5, 2, 5, false);
        Tensor *pa = tensor_cast(x, (CtDType)dt);
        tensor_free(x);
        Tensor *gpa = tensor_to_device(pa, gpu());
        assert_same(tensor_pow(pa, m), tensor_pow(gpa, gm), tol, tol);
    }
    ct_scope_close(s);
    GPU_MEM_END;
}
END_TEST

/* Integer arithmetic (division aside) and comparisons, and u8/bool
 * comparisons, as on the CPU; the accuracy pattern argmax == labels. */
START_TEST(test_binary_integers)
{
    GPU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const BinFn ops[] = {tensor_add,     tensor_sub, tensor_mul, tensor_maximum,
                         tensor_minimum, tensor_eq,  tensor_ne,  tensor_lt,
                         tensor_le,      tensor_gt,  tensor_ge};
    const CtDType dts[] = {CT_I64, CT_I32, CT_U8, CT_BOOL};
    for (int d = 0; d < 4; d++) {
        Tensor *x = tu_rand64(2, (const int64_t[]){3, 4}, 0, 3, 6, false);
        Tensor *y = tu_rand64(1, (const int64_t[]){4}, 0, 3, 7, false);
        Tensor *a = tensor_cast(x, dts[d]), *b = tensor_cast(y, dts[d]);
        tensor_free(x);
        tensor_free(y);
        Tensor *ga = tensor_to_device(a, gpu()), *gb = tensor_to_device(b, gpu());
        for (size_t i = d < 2 ? 0 : 5; i < sizeof ops / sizeof *ops; i++)
            assert_same(ops[i](a, b), ops[i](ga, gb), 0, 0);
    }
    Tensor *logits =
        tensor_to_device(rand_cpu(CT_F32, 2, (const int64_t[]){6, 3}, 8), gpu());
    Tensor *l = tu_rand64(1, (const int64_t[]){6}, 0, 2.9, 9, false);
    Tensor *labels = tensor_to_device(tensor_cast(l, CT_I64), gpu());
    tensor_free(l);
    Tensor *hits = tensor_sum_all(
        tensor_cast(tensor_eq(tensor_argmax(logits, 1, false), labels), CT_F32));
    Tensor *want = tensor_sum_all(
        tensor_cast(tensor_eq(tensor_argmax(tensor_to_device(logits, ct_cpu()), 1, false),
                              tensor_to_device(labels, ct_cpu())),
                    CT_F32));
    ck_assert_ptr_nonnull(hits);
    ck_assert_double_eq(tensor_item(hits), tensor_item(want));
    ct_scope_close(s);
    GPU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------------ matmul */

/* Row-major reference of CtMatmulParams on host doubles. */
static void matmul_ref(const CtMatmulParams *p, const double *A, const double *B,
                       double *C)
{
    for (int64_t bi = 0; bi < p->batch; bi++) {
        const double *a = A + bi * p->stride_a, *b = B + bi * p->stride_b;
        double *c = C + bi * p->stride_c;
        for (int64_t i = 0; i < p->m; i++)
            for (int64_t j = 0; j < p->n; j++) {
                double acc = 0;
                for (int64_t l = 0; l < p->k; l++) {
                    double x = p->trans_a ? a[l * p->m + i] : a[i * p->k + l];
                    double y = p->trans_b ? b[j * p->k + l] : b[l * p->n + j];
                    acc += x * y;
                }
                c[i * p->n + j] = p->alpha * acc + p->beta * c[i * p->n + j];
            }
    }
}

/* Runs the MATMUL kernel on cuda:0 for dt and checks it against the host
 * reference computed from the same (dt-rounded) inputs. */
static void check_matmul(CtDType dt, const CtMatmulParams *p, double tol)
{
    int64_t na = (p->batch - 1) * p->stride_a + p->m * p->k;
    int64_t nb = (p->batch - 1) * p->stride_b + p->k * p->n;
    int64_t nc = (p->batch - 1) * p->stride_c + p->m * p->n;
    Tensor *a = rand_cpu(dt, 1, &na, 11), *b = rand_cpu(dt, 1, &nb, 12);
    Tensor *c = rand_cpu(dt, 1, &nc, 13);
    double *va = host_f64(a), *vb = host_f64(b), *vc = host_f64(c);
    matmul_ref(p, va, vb, vc);
    Tensor *ga = tensor_to_device(a, gpu()), *gb = tensor_to_device(b, gpu());
    Tensor *gc = tensor_to_device(c, gpu());
    CtOpCall call = {.op = CT_OP_MATMUL, .out = {gc}, .in = {ga, gb}, .params = p};
    ck_assert_msg(ct_dispatch(&call) == CT_OK, "%s", ct_last_error());
    tu_assert_values(gc, vc, nc, tol, tol);
    free(va);
    free(vb);
    free(vc);
}

START_TEST(test_matmul_f32)
{
    GPU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            CtMatmulParams p = {.batch = 1,
                                .m = 33,
                                .n = 17,
                                .k = 65,
                                .trans_a = ta,
                                .trans_b = tb,
                                .alpha = 1,
                                .beta = 0};
            check_matmul(CT_F32, &p, 1e-4);
            p.alpha = 1.5;
            p.beta = 0.5;
            check_matmul(CT_F32, &p, 1e-4);
            check_matmul(CT_F64, &p, 1e-12);
        }
    /* through the front-end-sized path: (64, 128) @ (128, 96) */
    CtMatmulParams p = {.batch = 1, .m = 64, .n = 96, .k = 128, .alpha = 1};
    check_matmul(CT_F32, &p, 1e-4);
    /* k == 0: zeros, and a linear layer without inputs gives its bias */
    Tensor *a = tensor_zeros(2, (const int64_t[]){3, 0}, CT_F32, gpu());
    Tensor *b = tensor_zeros(2, (const int64_t[]){0, 4}, CT_F32, gpu());
    Tensor *bias = tensor_to_device(rand_cpu(CT_F32, 1, (const int64_t[]){4}, 11), gpu());
    Tensor *w = tensor_transpose(b, 0, 1);
    assert_same(tensor_zeros(2, (const int64_t[]){3, 4}, CT_F32, ct_cpu()),
                tensor_matmul(a, b), 0, 0);
    assert_same(tensor_linear(tensor_to_device(a, ct_cpu()),
                              tensor_to_device(w, ct_cpu()),
                              tensor_to_device(bias, ct_cpu())),
                tensor_linear(a, w, bias), 0, 0);
    assert_same(tensor_relu(tensor_linear(tensor_to_device(a, ct_cpu()),
                                          tensor_to_device(w, ct_cpu()),
                                          tensor_to_device(bias, ct_cpu()))),
                tensor_linear_relu(a, w, bias), 0, 0);
    ct_scope_close(s);
    GPU_MEM_END;
}
END_TEST

START_TEST(test_matmul_half)
{
    GPU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    for (int ta = 0; ta < 2; ta++) {
        CtMatmulParams p = {.batch = 2,
                            .m = 24,
                            .n = 40,
                            .k = 32,
                            .trans_a = ta,
                            .trans_b = !ta,
                            .stride_a = 24 * 32,
                            .stride_b = 32 * 40,
                            .stride_c = 24 * 40,
                            .alpha = 1,
                            .beta = 0};
        check_matmul(CT_BF16, &p, 1e-2);
        check_matmul(CT_F16, &p, 1e-2);
    }
    ct_scope_close(s);
    GPU_MEM_END;
}
END_TEST

START_TEST(test_matmul_batched_broadcast)
{
    GPU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    /* one A for every batch (stride 0), then one B for every batch */
    CtMatmulParams p = {.batch = 3,
                        .m = 9,
                        .n = 11,
                        .k = 7,
                        .stride_a = 0,
                        .stride_b = 7 * 11,
                        .stride_c = 9 * 11,
                        .alpha = 1,
                        .beta = 0};
    check_matmul(CT_F32, &p, 1e-4);
    check_matmul(CT_F64, &p, 1e-12);
    p.stride_a = 9 * 7;
    p.stride_b = 0;
    p.trans_b = true;
    check_matmul(CT_F32, &p, 1e-4);
    check_matmul(CT_BF16, &p, 1e-2);
    ct_scope_close(s);
    GPU_MEM_END;
}
END_TEST

/* --------------------------------------------------- allocator and errors */

START_TEST(test_allocator_reuses_blocks)
{
    GPU_MEM_BEGIN;
    const int64_t shape[2] = {1000, 257};
    Tensor *t = tensor_empty(2, shape, CT_F32, gpu());
    ck_assert_ptr_nonnull(t);
    tensor_free(t);
    CtAllocStats st0 = ct_alloc_stats(gpu());
    ck_assert_uint_ge(st0.cached, 1000 * 257 * 4);
    for (int i = 0; i < 20; i++) {
        CtScope *s = ct_scope_open();
        Tensor *x = tensor_ones(2, shape, CT_F32, gpu());
        ck_assert_ptr_nonnull(tensor_add(x, x));
        ct_scope_close(s);
    }
    CtAllocStats st1 = ct_alloc_stats(gpu());
    /* the second block of the loop comes from the system once at most */
    ck_assert_uint_le(st1.n_allocs, st0.n_allocs + 1);
    ck_assert_uint_eq(st1.in_use, st0.in_use);
    GPU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------ instances */

START_TEST(test_gpu_instance)
{
    GPU_MEM_BEGIN;
    const CtBackend *be = ct_backend_for(gpu());
    ck_assert_ptr_nonnull(be);
    ck_assert_ptr_eq(ct_backend_for(gpu()), be);
    ck_assert_ptr_ne(be, ct_backend_for(ct_cpu()));
    ck_assert_str_eq(be->iface->name, "cuda");
    ck_assert(ct_device_eq(be->device, gpu()));
    ck_assert_ptr_nonnull(be->context);
#ifdef CTRAINER_HAVE_CUDA
    ck_assert_ptr_nonnull(ct_cuda_stream(be)); /* its own stream, not the legacy 0 */
#endif
    /* GPU memory is counted on cuda:0's cache only */
    size_t cpu0 = ct_alloc_stats(ct_cpu()).in_use, gpu0 = ct_alloc_stats(gpu()).in_use;
    Tensor *t = tensor_empty(1, (const int64_t[]){1000}, CT_F32, gpu());
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(ct_alloc_stats(gpu()).in_use, gpu0 + 4096);
    ck_assert_uint_eq(ct_alloc_stats(ct_cpu()).in_use, cpu0);
    tensor_free(t);
    GPU_MEM_END;
}
END_TEST

/* Needs two GPUs; on fewer it says so and checks nothing. */
START_TEST(test_two_gpu_instances)
{
    if (ct_cuda_device_count() < 2) {
        fprintf(stderr, "*** SKIPPED test_two_gpu_instances: %d CUDA device(s) ***\n",
                ct_cuda_device_count());
        return;
    }
    const CtBackend *b0 = ct_backend_for(ct_cuda(0)), *b1 = ct_backend_for(ct_cuda(1));
    ck_assert_ptr_nonnull(b0);
    ck_assert_ptr_nonnull(b1);
    ck_assert_ptr_ne(b0, b1);
    ck_assert_ptr_eq(b0->iface, b1->iface); /* one table, two contexts */
    ck_assert_ptr_ne(b0->context, b1->context);
    ck_assert_ptr_ne(b0->cache, b1->cache);
#ifdef CTRAINER_HAVE_CUDA
    ck_assert_ptr_ne(ct_cuda_stream(b0), ct_cuda_stream(b1));
#endif
    CtScope *s = ct_scope_open();
    CtAllocStats s0 = ct_alloc_stats(ct_cuda(0)), s1 = ct_alloc_stats(ct_cuda(1));
    const int64_t shape[1] = {1000};
    Tensor *c = rand_cpu(CT_F32, 1, shape, 5);
    Tensor *g1 = tensor_to_device(c, ct_cuda(1));
    ck_assert_uint_eq(ct_alloc_stats(ct_cuda(0)).in_use, s0.in_use);
    ck_assert_uint_ge(ct_alloc_stats(ct_cuda(1)).in_use, s1.in_use + 4000);
    /* kernels run on cuda:1's instance; peer copies reach cuda:0 */
    Tensor *sum1 = tensor_add(g1, g1);
    Tensor *sum0 = tensor_to_device(sum1, ct_cuda(0));
    assert_same(tensor_add(c, c), sum0, 0, 0);
    ck_assert_int_eq(tensor_device(sum0).index, 0);
    ct_scope_close(s);
    ck_assert_uint_eq(ct_alloc_stats(ct_cuda(0)).in_use, s0.in_use);
    ck_assert_uint_eq(ct_alloc_stats(ct_cuda(1)).in_use, s1.in_use);
}
END_TEST

START_TEST(test_error_reporting)
{
    CtScope *s = ct_scope_open();
#ifdef CTRAINER_HAVE_CUDA
    /* a failing CUDA call is reported with its text and file:line */
    ck_assert_int_eq(ct_cuda_select_device(ct_cuda_device_count() + 7), CT_ERR_BACKEND);
    ck_assert_ptr_nonnull(strstr(ct_last_error(), "backend.cu:"));
    tu_assert_error(CT_ERR_BACKEND, "cudaSetDevice(device) failed at ");
#endif
    /* a device past the last one */
    ck_assert_ptr_null(
        tensor_zeros(1, (const int64_t[]){2}, CT_F32, ct_cuda(ct_cuda_device_count())));
    tu_assert_error(CT_ERR_DEVICE, "no such device");
    /* kernels the backend does not have say so */
    Tensor *i = tensor_zeros(1, (const int64_t[]){4}, CT_I64, gpu());
    ck_assert_ptr_null(tensor_add(i, i));
    tu_assert_error(CT_ERR_UNSUPPORTED, "binary: not supported on cuda:0 for i64");
    Tensor *m = tensor_zeros(2, (const int64_t[]){2, 2}, CT_I32, gpu());
    CtMatmulParams p = {.batch = 1, .m = 2, .n = 2, .k = 2, .alpha = 1};
    CtOpCall call = {.op = CT_OP_MATMUL, .out = {m}, .in = {m, m}, .params = &p};
    ck_assert_int_eq(ct_dispatch(&call), CT_ERR_UNSUPPORTED);
    tu_assert_error(CT_ERR_UNSUPPORTED, "matmul: not supported on cuda:0 for i32");
    /* nothing sticky was left in CUDA: the device still works */
    Tensor *x = tensor_full(1, (const int64_t[]){3}, 2, CT_F32, gpu());
    tu_assert_values(tensor_mul(x, x), ((double[]){4, 4, 4}), 3, 0, 0);
    ct_scope_close(s);
}
END_TEST

/* ------------------------------------------- pinned memory, async copies */

START_TEST(test_pinned_round_trip)
{
    TU_MEM_BEGIN;
    GPU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *x = rand_cpu(CT_F32, 2, (const int64_t[]){33, 17}, 21);
    Tensor *p = tensor_pin_memory(x);
    ck_assert(tensor_is_pinned(p) && !tensor_is_pinned(x));
    ck_assert(!tensor_shares_storage(p, x));
    ck_assert(tensor_shares_storage(tensor_pin_memory(p), p)); /* already pinned */
    /* a strided source is pinned contiguously */
    Tensor *pt = tensor_pin_memory(tensor_transpose(x, 0, 1));
    ck_assert(tensor_is_pinned(pt) && tensor_is_contiguous(pt));
    double *ref = host_f64(tensor_contiguous(tensor_transpose(x, 0, 1)));
    tu_assert_values(pt, ref, 33 * 17, 0, 0);
    free(ref);
    Tensor *g = tensor_to_device_async(p, gpu());
    ck_assert_int_eq(ct_device_synchronize(gpu()), CT_OK);
    assert_same(x, g, 0, 0);
    /* device -> pinned host, then device ops right after the upload */
    Tensor *h = tensor_to_device_async(tensor_add(g, g), ct_cpu());
    ck_assert(tensor_is_pinned(h));
    ck_assert_int_eq(ct_device_synchronize(gpu()), CT_OK);
    ref = host_f64(tensor_add(x, x));
    tu_assert_values(h, ref, 33 * 17, 0, 0);
    free(ref);
    /* a strided device source */
    Tensor *ht = tensor_to_device_async(tensor_transpose(g, 0, 1), ct_cpu());
    ck_assert_int_eq(ct_device_synchronize(gpu()), CT_OK);
    assert_same(ht, tensor_transpose(g, 0, 1), 0, 0);
    /* gradient flows back through both copies (the GPU op: binary add) */
    Tensor *leaf = tensor_ones(1, (const int64_t[]){3}, CT_F32, ct_cpu());
    ck_assert_int_eq(tensor_set_requires_grad(leaf, true), CT_OK);
    Tensor *y = tensor_to_device_async(tensor_pin_memory(leaf), gpu());
    Tensor *z = tensor_to_device(tensor_add(y, y), ct_cpu());
    ck_assert_int_eq(tensor_backward(tensor_sum_all(z), NULL), CT_OK);
    tu_assert_values(tensor_grad(leaf), ((double[]){2, 2, 2}), 3, 0, 0);
    ct_scope_close(s);
    GPU_MEM_END;
    TU_MEM_END;
}
END_TEST

/* Pinned sources freed right after their copy is queued: blocks are reused
 * (same size every round) but never before the copy that reads them. */
START_TEST(test_async_copy_then_synchronize)
{
    GPU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const int64_t n = 1 << 22; /* 16 MB per copy: long enough to be in flight */
    enum { ROUNDS = 12 };
    Tensor *g[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        CtScope *round = ct_scope_open();
        Tensor *p = tensor_empty_pinned(1, &n, CT_F32);
        ck_assert(tensor_is_pinned(p));
        float *v = tensor_data(p);
        for (int64_t i = 0; i < n; i++) v[i] = (float)(r * 1000 + i % 1000);
        g[r] = tensor_retain(tensor_to_device_async(p, gpu()));
        ct_scope_close(round); /* frees p: its block goes back to the cache */
    }
    ck_assert_int_eq(ct_device_synchronize(gpu()), CT_OK);
    for (int r = 0; r < ROUNDS; r++) {
        float back[1000];
        Tensor *head = tensor_slice(g[r], 0, n - 1000, n, 1);
        ck_assert_int_eq(tensor_copy_to_host(head, back, CT_F32), CT_OK);
        for (int i = 0; i < 1000; i++)
            ck_assert_float_eq(back[i], (float)(r * 1000 + (n - 1000 + i) % 1000));
        tensor_free(g[r]);
    }
    /* an unpinned source takes the synchronous path */
    Tensor *c = rand_cpu(CT_F64, 1, (const int64_t[]){100}, 5);
    assert_same(c, tensor_to_device_async(c, gpu()), 0, 0);
    ck_assert_ptr_null(tensor_to_device_async(c, ct_cuda(ct_cuda_device_count())));
    tu_assert_error(CT_ERR_DEVICE, "no such device");
    ct_scope_close(s);
    GPU_MEM_END;
}
END_TEST

/* A (n, 3) f32 / (n) i64 tensor dataset; call with no scope open (the
 * caller frees *x and *y after the dataset). */
static Dataset *rows_dataset(int64_t n, Tensor **x, Tensor **y)
{
    *x = rand_cpu(CT_F32, 2, (const int64_t[]){n, 3}, 9);
    *y = tensor_arange(0, (double)n, 1, CT_I64, ct_cpu());
    return data_tensor_dataset_create(2, (Tensor *[]){*x, *y});
}

START_TEST(test_loader_to_cuda)
{
    TU_MEM_BEGIN;
    GPU_MEM_BEGIN;
    Tensor *x, *y;
    Dataset *ds = rows_dataset(50, &x, &y);
    ck_assert_ptr_nonnull(ds);
    for (int nw = 0; nw <= 2; nw += 2) {
        DataLoaderArgs a = {
            .batch_size = 7, .shuffle = true, .seed = 3, .num_workers = nw};
        DataLoader *cpu = data_loader_create(ds, &a);
        a.device = gpu();
        DataLoader *gl = data_loader_create(ds, &a);
        DataBatch bc, bg;
        int batches = 0;
        while (data_loader_next(cpu, &bc)) {
            ck_assert(data_loader_next(gl, &bg));
            ck_assert_int_eq(bg.size, bc.size);
            ck_assert_int_eq(bg.n, 2);
            /* used on the device straight away, then compared */
            CtScope *s = ct_scope_open();
            assert_same(tensor_add(bc.t[0], bc.t[0]), tensor_add(bg.t[0], bg.t[0]), 0, 0);
            assert_same(bc.t[1], bg.t[1], 0, 0);
            ct_scope_close(s);
            batches++;
        }
        ck_assert(!data_loader_next(gl, &bg));
        ck_assert_int_eq(data_loader_status(gl), CT_OK);
        ck_assert_int_eq(batches, 8);
        data_loader_free(cpu);
        data_loader_free(gl);
    }
    data_dataset_free(ds);
    tensor_free(x);
    tensor_free(y);
    GPU_MEM_END;
    TU_MEM_END;
}
END_TEST

/* Without a GPU: pinned memory is ordinary memory and copies are
 * synchronous, so GPU-ready code runs unchanged on the CPU. */
START_TEST(test_pinned_fallback)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const int64_t shape[2] = {3, 4};
    Tensor *p = tensor_empty_pinned(2, shape, CT_F32);
    ck_assert_ptr_nonnull(p);
    ck_assert(!tensor_is_pinned(p) && tensor_device(p).type == CT_DEVICE_CPU);
    ck_assert_int_eq(tensor_fill_(p, 1.5), CT_OK);
    Tensor *x = tensor_arange(0, 12, 1, CT_F32, ct_cpu());
    Tensor *xt = tensor_transpose(tensor_view(x, 2, shape), 0, 1);
    Tensor *q = tensor_pin_memory(xt); /* a contiguous copy, never an alias */
    ck_assert(!tensor_is_pinned(q) && tensor_is_contiguous(q));
    ck_assert(!tensor_shares_storage(q, x));
    tu_assert_values(q, ((double[]){0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}), 12, 0, 0);
    ck_assert(!tensor_shares_storage(tensor_pin_memory(x), x));
    Tensor *c = tensor_to_device_async(q, ct_cpu()); /* CPU to CPU: a copy */
    ck_assert(!tensor_shares_storage(c, q));
    tu_assert_values(c, ((double[]){0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}), 12, 0, 0);
    ck_assert_int_eq(ct_device_synchronize(ct_cpu()), CT_OK);
    /* gradients pass through */
    Tensor *leaf = tensor_ones(1, (const int64_t[]){2}, CT_F32, ct_cpu());
    ck_assert_int_eq(tensor_set_requires_grad(leaf, true), CT_OK);
    Tensor *y = tensor_to_device_async(tensor_pin_memory(leaf), ct_cpu());
    ck_assert_int_eq(tensor_backward(tensor_sum_all(tensor_mul_scalar(y, 3)), NULL),
                     CT_OK);
    tu_assert_values(tensor_grad(leaf), ((double[]){3, 3}), 2, 0, 0);
    /* errors: no device, NULL stays sticky */
    ck_assert_ptr_null(tensor_to_device_async(q, ct_cuda(0)));
    tu_assert_error(CT_ERR_DEVICE, "cuda:0");
    ck_assert_int_eq(ct_device_synchronize(ct_cuda(0)), CT_ERR_DEVICE);
    ck_assert_ptr_null(tensor_pin_memory(NULL));
    ck_assert_ptr_null(tensor_to_device_async(NULL, ct_cpu()));
    tu_assert_error(CT_ERR_DEVICE, "cuda:0");
    ct_scope_close(s);
    /* a loader aimed at the missing GPU fails on its first batch */
    Tensor *dx, *dy;
    Dataset *ds = rows_dataset(10, &dx, &dy);
    DataLoader *dl = data_loader_create(
        ds, &(DataLoaderArgs){.batch_size = 4, .num_workers = 1, .device = ct_cuda(0)});
    DataBatch b;
    ck_assert(!data_loader_next(dl, &b));
    ck_assert_ptr_nonnull(strstr(ct_last_error(), "cuda:0"));
    tu_assert_error(CT_ERR_DEVICE, "data loader: batch 0 (samples 0..3):");
    data_loader_free(dl);
    data_dataset_free(ds);
    tensor_free(dx);
    tensor_free(dy);
    TU_MEM_END;
}
END_TEST

/* Runs everywhere: what a build without a usable GPU does. */
START_TEST(test_no_device)
{
    TU_MEM_BEGIN;
    ct_clear_error();
    ck_assert_int_eq(ct_cuda_device_count(), 0);
    ck_assert_int_eq(ct_cuda_device_count(), 0);
    ck_assert_int_eq(ct_last_status(), CT_OK); /* no device is not an error */
    ck_assert_ptr_null(tensor_zeros(1, (const int64_t[]){2}, CT_F32, ct_cuda(0)));
    tu_assert_error(CT_ERR_DEVICE, "cuda:0");
    CtScope *s = ct_scope_open();
    Tensor *c = tensor_ones(1, (const int64_t[]){2}, CT_F32, ct_cpu());
    ck_assert_ptr_null(tensor_to_device(c, ct_cuda(0)));
    tu_assert_error(CT_ERR_DEVICE, "cuda:0");
#ifdef CTRAINER_HAVE_CUDA
    /* the runtime's own failure comes back through the check macro */
    ck_assert_int_eq(ct_cuda_select_device(0), CT_ERR_BACKEND);
    ck_assert_ptr_nonnull(strstr(ct_last_error(), "backend.cu:"));
    tu_assert_error(CT_ERR_BACKEND, "cudaSetDevice(device) failed at ");
#else
    ck_assert_ptr_null(tensor_zeros(1, (const int64_t[]){2}, CT_F32, ct_cuda(0)));
    tu_assert_error(CT_ERR_DEVICE, "built without CUDA");
#endif
    /* CPU work is unaffected */
    tu_assert_values(tensor_add(c, c), ((double[]){2, 2}), 2, 0, 0);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------------ rng */

START_TEST(test_rng_matches_cpu)
{
    CtScope *s = ct_scope_open();
    const int64_t shape[1] = {100003};
    for (int dt = CT_F32; dt <= CT_F64; dt++) {
        CtGenerator gc = ct_generator(11, 3), gg = ct_generator(11, 3);
        assert_same(tensor_uniform(&gc, 1, shape, -1, 2, (CtDType)dt, ct_cpu()),
                    tensor_uniform(&gg, 1, shape, -1, 2, (CtDType)dt, gpu()), 0, 0);
        assert_same(tensor_bernoulli(&gc, 1, shape, 0.3, (CtDType)dt, ct_cpu()),
                    tensor_bernoulli(&gg, 1, shape, 0.3, (CtDType)dt, gpu()), 0, 0);
        assert_same(tensor_normal(&gc, 1, shape, 0, 1, (CtDType)dt, ct_cpu()),
                    tensor_normal(&gg, 1, shape, 0, 1, (CtDType)dt, gpu()), 1e-12, 1e-6);
        ck_assert_uint_eq(gc.offset, gg.offset);
    }
    ct_scope_close(s);
}
END_TEST

/* Run first: counting devices (cuda_suite did) makes no context, so a
 * program may count before runtime_launch; using a device does. */
START_TEST(test_counting_is_not_using)
{
    ck_assert_int_gt(ct_cuda_device_count(), 0);
    ck_assert(!ct_cuda_initialized());
    Tensor *t = tensor_zeros(1, (const int64_t[]){4}, CT_F32, gpu());
    ck_assert_ptr_nonnull(t);
    ck_assert(ct_cuda_initialized());
    tensor_free(t);
}
END_TEST

Suite *cuda_suite(void)
{
    Suite *s = suite_create("tensor_cuda");
    TCase *tc = tcase_create("cuda");
    tcase_set_timeout(tc, 120);
    const TTest *device_tests[] = {
        test_counting_is_not_using,
        test_fill_every_dtype,
        test_cast_round_trips,
        test_host_device_transfer,
        test_binary_broadcast,
        test_binary_integers,
        test_matmul_f32,
        test_matmul_half,
        test_matmul_batched_broadcast,
        test_allocator_reuses_blocks,
        test_gpu_instance,
        test_two_gpu_instances,
        test_error_reporting,
        test_rng_matches_cpu,
        test_pinned_round_trip,
        test_async_copy_then_synchronize,
        test_loader_to_cuda,
    };
    int n = (int)(sizeof device_tests / sizeof *device_tests);
    int ndev = ct_cuda_device_count();
    if (ndev > 0) {
        /* counting initialised the CUDA driver in this process, and CUDA
         * does not work in a fork()ed child after that: run the tests
         * in-process */
        setenv("CK_FORK", "no", 1);
        for (int i = 0; i < n; i++) tcase_add_test(tc, device_tests[i]);
    } else {
        fprintf(stderr, "\n*** SKIPPED %d CUDA tests: no CUDA device (%s) ***\n\n", n,
#ifdef CTRAINER_HAVE_CUDA
                "backend built, no GPU or driver visible"
#else
                "built with CTRAINER_CUDA=OFF"
#endif
        );
        tcase_add_test(tc, test_no_device);
        tcase_add_test(tc, test_pinned_fallback);
    }
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(cuda_suite());
}
