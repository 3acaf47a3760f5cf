/* The collectives across real processes: run under mpirun with 2 or 3
 * ranks (tests/runtime/mpi/CMakeLists.txt). Every rank runs every test in
 * the same order; values are asserted on every rank. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ctrainer/ctrainer.h"
#include "testutil.h"

static Runtime *rt;
static int R, W; /* this rank, world size */

static const CtDType all_dtypes[] = {CT_F32, CT_F64, CT_BF16, CT_I64, CT_I32, CT_U8};

START_TEST(identity)
{
    ck_assert_int_eq(W, atoi(getenv("OMPI_COMM_WORLD_SIZE")));
    ck_assert_int_eq(R, atoi(getenv("OMPI_COMM_WORLD_RANK")));
    ck_assert_int_eq(runtime_local_rank(rt), atoi(getenv("OMPI_COMM_WORLD_LOCAL_RANK")));
    ck_assert_int_eq(runtime_local_world_size(rt), W); /* one machine */
    ck_assert(runtime_is_distributed(rt));
    ck_assert(runtime_is_main_process(rt) == (R == 0));
    ck_assert_uint_eq(runtime_seed(rt, 42), 42u + (unsigned)R);
}
END_TEST

/* rank r holds {r+1, 2(r+1), 3-r} (non-negative for u8, exact in bf16) */
static double val(int r, int i)
{
    return i == 0 ? r + 1 : i == 1 ? 2 * (r + 1) : 3 - r;
}

START_TEST(reduce_ops_all_dtypes)
{
    for (size_t d = 0; d < sizeof all_dtypes / sizeof all_dtypes[0]; d++) {
        CtDType dt = all_dtypes[d];
        Tensor *t =
            tu_tensor(dt, 1, (int64_t[]){3}, (double[]){val(R, 0), val(R, 1), val(R, 2)});
        double sum[3] = {0}, mx[3], mn[3];
        for (int i = 0; i < 3; i++) {
            mx[i] = -1e9, mn[i] = 1e9;
            for (int r = 0; r < W; r++) {
                sum[i] += val(r, i);
                mx[i] = val(r, i) > mx[i] ? val(r, i) : mx[i];
                mn[i] = val(r, i) < mn[i] ? val(r, i) : mn[i];
            }
        }
        Tensor *s = runtime_reduce(rt, t, RUNTIME_REDUCE_SUM);
        Tensor *a = runtime_reduce(rt, t, RUNTIME_REDUCE_MAX);
        Tensor *b = runtime_reduce(rt, t, RUNTIME_REDUCE_MIN);
        ck_assert_int_eq(tensor_dtype(s), dt);
        tu_assert_values(s, sum, 3, 0, 0);
        tu_assert_values(a, mx, 3, 0, 0);
        tu_assert_values(b, mn, 3, 0, 0);
        if (ct_dtype_is_float(dt)) {
            Tensor *m = runtime_reduce(rt, t, RUNTIME_REDUCE_MEAN);
            double mean[3];
            for (int i = 0; i < 3; i++) mean[i] = sum[i] / W;
            tu_assert_values(m, mean, 3, dt == CT_BF16 ? 1e-2 : 1e-6, 0);
            tensor_free(m);
        }
        tensor_free(s);
        tensor_free(a);
        tensor_free(b);
        tensor_free(t);
    }
}
END_TEST

START_TEST(reduce_f64_ops)
{
    double v[2] = {R, -R * 0.5};
    ck_assert_int_eq(runtime_reduce_f64(rt, v, 2, RUNTIME_REDUCE_SUM), CT_OK);
    double s = W * (W - 1) / 2.0;
    ck_assert_double_eq_tol(v[0], s, 1e-12);
    ck_assert_double_eq_tol(v[1], -0.5 * s, 1e-12);
    double m = R == 1 ? 1.0 : 0.0;
    ck_assert_int_eq(runtime_reduce_f64(rt, &m, 1, RUNTIME_REDUCE_MAX), CT_OK);
    ck_assert_double_eq(m, 1.0);
    double mean = R;
    ck_assert_int_eq(runtime_reduce_f64(rt, &mean, 1, RUNTIME_REDUCE_MEAN), CT_OK);
    ck_assert_double_eq_tol(mean, (W - 1) / 2.0, 1e-12);
}
END_TEST

START_TEST(gather_all_dtypes)
{
    const CtDType dts[] = {CT_F32, CT_F64, CT_BF16, CT_I64, CT_I32, CT_U8, CT_BOOL};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        /* rank r: 2 rows of 2, values 10r + i (bool: i odd) */
        double v[4], expect[4 * 3];
        for (int r = 0; r < W; r++)
            for (int i = 0; i < 4; i++) {
                double x = dts[d] == CT_BOOL ? (i + r) % 2 : 10 * r + i;
                expect[r * 4 + i] = x;
                if (r == R) v[i] = x;
            }
        Tensor *t = tu_tensor(dts[d], 2, (int64_t[]){2, 2}, v);
        Tensor *g = runtime_gather(rt, t);
        tu_assert_shape(g, 2, 2 * W, 2);
        ck_assert_int_eq(tensor_dtype(g), dts[d]);
        tu_assert_values(g, expect, 4 * W, 0, 0);
        tensor_free(g);
        tensor_free(t);
    }
}
END_TEST

START_TEST(gather_padded_differing_sizes)
{
    /* rank r holds r+1 rows of 3 (i64); row values include the pad value */
    int64_t rows = R + 1;
    double v[3 * 3], expect[3 * 6];
    int n = 0;
    for (int r = 0; r < W; r++)
        for (int i = 0; i < 3 * (r + 1); i++) {
            double x = i == 0 ? -1 : 100 * r + i;
            expect[n++] = x;
            if (r == R) v[i] = x;
        }
    Tensor *t = tu_tensor(CT_I64, 2, (int64_t[]){rows, 3}, v);
    Tensor *g = runtime_gather_padded(rt, t, -1);
    tu_assert_shape(g, 2, W * (W + 1) / 2, 3);
    tu_assert_values(g, expect, n, 0, 0);
    tensor_free(g);
    tensor_free(t);
}
END_TEST

/* Every dtype with arithmetic (f16 too), reduced on an empty tensor, and a
 * non-contiguous view: the result has t's shape and dtype, row-major. */
START_TEST(reduce_f16_empty_and_strided)
{
    Tensor *h =
        tu_tensor(CT_F16, 1, (int64_t[]){3}, (double[]){val(R, 0), val(R, 1), val(R, 2)});
    double sum[3] = {0}, mx[3] = {-1e9, -1e9, -1e9};
    for (int r = 0; r < W; r++)
        for (int i = 0; i < 3; i++) {
            sum[i] += val(r, i);
            mx[i] = val(r, i) > mx[i] ? val(r, i) : mx[i];
        }
    Tensor *s = runtime_reduce(rt, h, RUNTIME_REDUCE_SUM);
    Tensor *m = runtime_reduce(rt, h, RUNTIME_REDUCE_MAX);
    ck_assert_int_eq(tensor_dtype(s), CT_F16);
    tu_assert_values(s, sum, 3, 0, 0);
    tu_assert_values(m, mx, 3, 0, 0);
    tensor_free(s);
    tensor_free(m);
    tensor_free(h);
    const CtDType dts[] = {CT_F32, CT_F64, CT_BF16, CT_F16, CT_I64, CT_I32, CT_U8};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        Tensor *e = tensor_zeros(2, (int64_t[]){0, 3}, dts[d], ct_cpu());
        for (int op = RUNTIME_REDUCE_SUM; op <= RUNTIME_REDUCE_MIN; op++) {
            if (op == RUNTIME_REDUCE_MEAN && !ct_dtype_is_float(dts[d])) continue;
            Tensor *r = runtime_reduce(rt, e, (RuntimeReduceOp)op);
            ck_assert_msg(r, "%s op %d: %s", ct_dtype_name(dts[d]), op, ct_last_error());
            tu_assert_shape(r, 2, 0, 3);
            ck_assert_int_eq(tensor_dtype(r), dts[d]);
            tensor_free(r);
        }
        tensor_free(e);
    }
    /* (2, 3) transposed to (3, 2): element [i][j] is 10 i' + j' + R */
    double v[6];
    for (int i = 0; i < 6; i++) v[i] = i + R;
    Tensor *a = tu_tensor(CT_F32, 2, (int64_t[]){2, 3}, v);
    CtScope *sc = ct_scope_open();
    Tensor *tt = tensor_transpose(a, 0, 1);
    ck_assert(!tensor_is_contiguous(tt));
    Tensor *r = runtime_reduce(rt, tt, RUNTIME_REDUCE_SUM);
    tu_assert_shape(r, 2, 3, 2);
    double want[6], off = W * (W - 1) / 2.0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) want[i * 2 + j] = W * (j * 3 + i) + off;
    tu_assert_values(tensor_contiguous(r), want, 6, 0, 0);
    Tensor *g = runtime_gather(rt, tt);
    tu_assert_shape(g, 2, 3 * W, 2);
    double gw[6 * 3];
    for (int q = 0; q < W; q++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++) gw[q * 6 + i * 2 + j] = j * 3 + i + q;
    tu_assert_values(tensor_contiguous(g), gw, 6 * W, 0, 0);
    ct_scope_close(sc);
    tensor_free(a);
}
END_TEST

/* Broadcast of every dtype, of an empty tensor; a non-contiguous tensor is
 * refused on every rank (it is overwritten in place). */
START_TEST(broadcast_every_dtype_and_empty)
{
    const CtDType dts[] = {CT_F32, CT_F64, CT_BF16, CT_F16,
                           CT_I64, CT_I32, CT_U8,   CT_BOOL};
    int root = 1 % W;
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        double v[3], want[3];
        for (int i = 0; i < 3; i++) {
            v[i] = dts[d] == CT_BOOL ? (R + i) % 2 : 3 * R + i;
            want[i] = dts[d] == CT_BOOL ? (root + i) % 2 : 3 * root + i;
        }
        Tensor *t = tu_tensor(dts[d], 1, (int64_t[]){3}, v);
        ck_assert_int_eq(runtime_broadcast(rt, t, root), CT_OK);
        tu_assert_values(t, want, 3, 0, 0);
        tensor_free(t);
        Tensor *e = tensor_zeros(2, (int64_t[]){2, 0}, dts[d], ct_cpu());
        ck_assert_int_eq(runtime_broadcast(rt, e, root), CT_OK);
        tu_assert_shape(e, 2, 2, 0);
        tensor_free(e);
    }
    Tensor *a = tu_tensor(CT_F32, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
    CtScope *sc = ct_scope_open();
    ck_assert_int_eq(runtime_broadcast(rt, tensor_transpose(a, 0, 1), 0), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "not contiguous");
    ct_scope_close(sc);
    tensor_free(a);
}
END_TEST

/* pad_across_processes semantics: rank r has r rows (rank 0 none), 3-d
 * rows, every dtype; all ranks empty gives an empty result. */
START_TEST(gather_padded_empty_ranks_every_dtype)
{
    const CtDType dts[] = {CT_F32, CT_F64, CT_BF16, CT_F16,
                           CT_I64, CT_I32, CT_U8,   CT_BOOL};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        double v[2 * 2 * 2 * 3] = {0}, want[8 * 3] = {0};
        int n = 0;
        for (int r = 0; r < W; r++)
            for (int i = 0; i < r * 4; i++) {
                double x = dts[d] == CT_BOOL ? (i + r) % 2 : 10 * r + i;
                want[n++] = x;
                if (r == R) v[i] = x;
            }
        Tensor *t = tu_tensor(dts[d], 3, (int64_t[]){R, 2, 2}, v);
        Tensor *g = runtime_gather_padded(rt, t, 0);
        ck_assert_msg(g, "%s: %s", ct_dtype_name(dts[d]), ct_last_error());
        tu_assert_shape(g, 3, W * (W - 1) / 2, 2, 2);
        ck_assert_int_eq(tensor_dtype(g), dts[d]);
        tu_assert_values(g, want, n, 0, 0);
        Tensor *f = runtime_gather_for_metrics(rt, t, R > 0 ? 1 : 0);
        tu_assert_shape(f, 3, W * (W - 1) / 2 - (W - 1), 2, 2);
        tensor_free(f);
        tensor_free(g);
        tensor_free(t);
        Tensor *e = tensor_zeros(2, (int64_t[]){0, 5}, dts[d], ct_cpu());
        Tensor *ge = runtime_gather(rt, e), *gp = runtime_gather_padded(rt, e, -1);
        tu_assert_shape(ge, 2, 0, 5);
        tu_assert_shape(gp, 2, 0, 5);
        tensor_free(ge);
        tensor_free(gp);
        tensor_free(e);
    }
}
END_TEST

/* Inside a scope (as in a trainer step) the results belong to the scope and
 * the inputs keep their references: nothing is freed twice. */
START_TEST(collectives_inside_a_scope)
{
    Tensor *t = tu_tensor(CT_F32, 2, (int64_t[]){R + 1, 2}, (double[]){1, 2, 3, 4, 5, 6});
    CtScope *s = ct_scope_open();
    Tensor *g = runtime_gather_padded(rt, t, 0);
    Tensor *row = tensor_slice(t, 0, 0, 1, 1); /* the same shape on every rank */
    Tensor *e = runtime_gather(rt, row);
    Tensor *m = runtime_reduce(rt, row, RUNTIME_REDUCE_MAX);
    Tensor *h = runtime_reduce(rt, tensor_cast(row, CT_BF16), RUNTIME_REDUCE_SUM);
    Tensor *f = runtime_gather_for_metrics(rt, t, R);
    tu_assert_shape(g, 2, W * (W + 1) / 2, 2);
    tu_assert_shape(e, 2, W, 2);
    tu_assert_shape(f, 2, W, 2); /* one real row per rank */
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(h);
    ct_scope_close(s);
    ck_assert_int_eq(tensor_shape(t)[0], R + 1); /* t is still ours */
    tensor_free(t);
}
END_TEST

/* CUDA tensors go through NCCL (-DCTRAINER_NCCL=ON), on the local rank's
 * GPU; other builds refuse them clearly. Skips loudly without a GPU. */
START_TEST(cuda_collectives)
{
    int dev = runtime_local_rank(rt);
    if (ct_cuda_device_count() <= dev) {
        if (R == 0) printf("*** SKIPPED CUDA collective tests: no CUDA device ***\n");
        return;
    }
    CtScope *s = ct_scope_open();
    Tensor *h = tu_tensor(CT_F32, 1, (int64_t[]){3}, (double[]){R + 1, 2 * (R + 1), 3});
    Tensor *d = tensor_to_device(h, ct_cuda(dev));
    Tensor *sum = runtime_reduce(rt, d, RUNTIME_REDUCE_SUM);
#ifdef CTRAINER_HAVE_NCCL
    Tensor *all = runtime_gather(rt, d);
    double tri = W * (W + 1) / 2.0, want[3] = {tri, 2 * tri, 3.0 * W}, rows[3 * 3];
    for (int r = 0; r < W; r++)
        for (int i = 0; i < 3; i++)
            rows[3 * r + i] = i == 0 ? r + 1 : i == 1 ? 2 * (r + 1) : 3;
    tu_assert_values(tensor_to_device(sum, ct_cpu()), want, 3, 0, 0);
    tu_assert_values(tensor_to_device(all, ct_cpu()), rows, 3 * W, 0, 0);
#else
    ck_assert_ptr_null(sum);
    tu_assert_error(ct_last_status(), "NCCL module could not be loaded");
#endif
    ct_scope_close(s);
}
END_TEST

START_TEST(gather_unequal_dim0_is_an_error_everywhere)
{
    Tensor *t = tu_tensor(CT_F32, 1, (int64_t[]){R + 1}, (double[]){1, 2, 3});
    ck_assert_ptr_null(runtime_gather(rt, t));
    tu_assert_error(CT_ERR_SHAPE, "rank 1 has 2: dim 0 must be equal on every rank");
    tensor_free(t);
}
END_TEST

START_TEST(reduce_shape_mismatch_is_an_error_everywhere)
{
    int64_t n = R == 1 ? 3 : 2;
    Tensor *t = tu_tensor(CT_F32, 1, (int64_t[]){n}, (double[]){1, 2, 3});
    ck_assert_ptr_null(runtime_reduce(rt, t, RUNTIME_REDUCE_SUM));
    tu_assert_error(CT_ERR_SHAPE, "rank 0 passed f32 (2), rank 1 passed f32 (3)");
    tensor_free(t);
}
END_TEST

START_TEST(broadcast_from_last_rank)
{
    double v[4] = {R, R * 2, R * 3, -R};
    Tensor *t = tu_tensor(CT_F64, 2, (int64_t[]){2, 2}, v);
    ck_assert_int_eq(runtime_broadcast(rt, t, W - 1), CT_OK);
    int L = W - 1;
    tu_assert_values(t, ((double[]){L, 2 * L, 3 * L, -L}), 4, 0, 0);
    ck_assert_int_eq(runtime_broadcast(rt, t, W), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "root");
    tensor_free(t);
}
END_TEST

/* The main process's section finishes before the others' start: it writes
 * a file they must see. */
START_TEST(main_process_first_orders)
{
    double tag = (double)getpid();
    ck_assert_int_eq(runtime_reduce_f64(rt, &tag, 1, RUNTIME_REDUCE_MAX), CT_OK);
    char path[128];
    snprintf(path, sizeof path, "/tmp/ctrainer_mpf_%.0f", tag);
    ck_assert_int_eq(runtime_main_process_first_begin(rt), CT_OK);
    if (R == 0) {
        usleep(200000); /* the others would run now if they did not wait */
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fclose(f);
    } else {
        ck_assert_int_eq(access(path, F_OK), 0);
    }
    ck_assert_int_eq(runtime_main_process_first_end(rt), CT_OK);
    ck_assert_int_eq(runtime_barrier(rt), CT_OK);
    if (R == 0) unlink(path);
}
END_TEST

/* prepare broadcasts rank 0's parameters; reduce_gradients averages the
 * packed gradient block. */
START_TEST(prepare_and_gradient_mean)
{
    CtGenerator g = ct_generator(7 + (uint64_t)R, 0); /* different per rank */
    Module *m = nn_linear(3, 2, true, &g);
    ck_assert_int_eq(runtime_prepare_model(rt, m), CT_OK);
    Tensor *p = nn_module_param_block(m);
    Tensor *row = tensor_unsqueeze(p, 0);
    Tensor *all = runtime_gather(rt, row);
    ck_assert_ptr_nonnull(all);
    const float *a = tensor_data(all);
    int64_t n = tensor_numel(p);
    for (int r = 1; r < W; r++)
        for (int64_t i = 0; i < n; i++) ck_assert_float_eq(a[r * n + i], a[i]);
    Tensor *gb = nn_module_grad_block(m);
    float *gd = tensor_data(gb);
    for (int64_t i = 0; i < n; i++) gd[i] = (float)(R * 10 + i);
    ck_assert_int_eq(runtime_reduce_gradients(rt, m), CT_OK);
    for (int64_t i = 0; i < n; i++)
        ck_assert_float_eq_tol(gd[i], (float)(10 * (W - 1) / 2.0 + i), 1e-5);
    tensor_free(all);
    tensor_free(row);
    nn_module_free(m);
}
END_TEST

START_TEST(stats_count_collectives)
{
    RuntimeCommStats before = runtime_comm_stats(rt);
    double v[4] = {0};
    ck_assert_int_eq(runtime_reduce_f64(rt, v, 4, RUNTIME_REDUCE_SUM), CT_OK);
    RuntimeCommStats after = runtime_comm_stats(rt);
    ck_assert_int_eq(after.calls - before.calls, 1);
    ck_assert_int_eq(after.bytes - before.bytes, 32);
    ck_assert(after.seconds >= before.seconds);
}
END_TEST

int main(void)
{
    rt = runtime_create(NULL);
    if (!rt) {
        fprintf(stderr, "runtime_create: %s\n", ct_last_error());
        return 1;
    }
    R = runtime_rank(rt), W = runtime_world_size(rt);
    Suite *s = suite_create("runtime_mpi");
    TCase *tc = tcase_create("collectives");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, identity);
    tcase_add_test(tc, reduce_ops_all_dtypes);
    tcase_add_test(tc, reduce_f64_ops);
    tcase_add_test(tc, gather_all_dtypes);
    tcase_add_test(tc, gather_padded_differing_sizes);
    tcase_add_test(tc, reduce_f16_empty_and_strided);
    tcase_add_test(tc, broadcast_every_dtype_and_empty);
    tcase_add_test(tc, gather_padded_empty_ranks_every_dtype);
    tcase_add_test(tc, gather_unequal_dim0_is_an_error_everywhere);
    tcase_add_test(tc, reduce_shape_mismatch_is_an_error_everywhere);
    tcase_add_test(tc, broadcast_from_last_rank);
    tcase_add_test(tc, main_process_first_orders);
    tcase_add_test(tc, prepare_and_gradient_mean);
    tcase_add_test(tc, stats_count_collectives);
    tcase_add_test(tc, collectives_inside_a_scope);
    tcase_add_test(tc, cuda_collectives);
    suite_add_tcase(s, tc);
    int rc = tu_run(s);
    runtime_free(rt);
    /* a second runtime after the first was freed (a second trainer) */
    rt = runtime_create(NULL);
    double one = 1;
    if (!rt || runtime_reduce_f64(rt, &one, 1, RUNTIME_REDUCE_SUM) != CT_OK || one != W) {
        fprintf(stderr, "rank %d: second runtime: %s\n", R, ct_last_error());
        rc = 1;
    }
    runtime_free(rt);
    return rc;
}
