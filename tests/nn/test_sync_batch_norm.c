/* SyncBatchNorm in one process: conversion (names, state dict, repr,
 * identity of the tensors), exact BatchNorm behaviour without an
 * all-reduce and in eval mode, and the synchronised path itself with a
 * one-process all-reduce (a copy): BatchNorm's values, running statistics
 * and gradients, finite-difference gradients in f64, the all-reduce calls
 * made in forward and backward, and its errors. The multi-process values
 * are tested under mpirun (tests/runtime/mpi/mpi_sync_batch_norm.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctrainer/nn.h"
#include "testutil.h"

/* A process group of one: the sum over the group is a copy. Counts calls. */
static int n_reduce;
static Tensor *reduce_one(void *ctx, Tensor *t)
{
    (void)ctx;
    n_reduce++;
    return tensor_clone(t);
}

/* A failing all-reduce, as a broken process group. */
static Tensor *reduce_fail(void *ctx, Tensor *t)
{
    (void)ctx, (void)t;
    ct_error(CT_ERR_BACKEND, "test all-reduce: broken group");
    return NULL;
}

static char *repr_of(const Module *m)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    nn_module_print(m, f);
    fclose(f);
    return buf;
}

/* Sequential(Linear(4, 3), BatchNorm1d(3), ReLU, Sequential(BatchNorm1d(3))) */
static Module *small_net(void)
{
    CtGenerator g = ct_generator(7, 0);
    Module *inner = nn_sequential(1, (Module *[]){nn_batch_norm1d(3, 1e-5, 0.1)});
    return nn_sequential(4,
                         (Module *[]){nn_linear(4, 3, true, &g),
                                      nn_batch_norm1d(3, 1e-5, 0.1), nn_relu(), inner});
}

START_TEST(test_convert_keeps_names_and_tensors)
{
    TU_MEM_BEGIN;
    Module *m = small_net();
    CtStateDict *before = nn_module_state_dict(m);
    char *repr0 = repr_of(m);
    ck_assert_int_eq(nn_convert_sync_batch_norm(m, reduce_one, NULL), 2);
    ck_assert(nn_is_sync_batch_norm(nn_module_find(m, "1")));
    ck_assert(nn_is_sync_batch_norm(nn_module_find(m, "3.0")));
    ck_assert(!nn_is_sync_batch_norm(nn_module_find(m, "0")));
    ck_assert_str_eq(nn_module_find(m, "1")->vt->type, "SyncBatchNorm");
    CtStateDict *after = nn_module_state_dict(m);
    ck_assert_int_eq(ct_state_dict_size(after), ct_state_dict_size(before));
    for (int64_t i = 0; i < ct_state_dict_size(after); i++) {
        ck_assert_str_eq(ct_state_dict_name(after, i), ct_state_dict_name(before, i));
        ck_assert_ptr_eq(ct_state_dict_tensor(after, i), ct_state_dict_tensor(before, i));
    }
    /* torch: the repr lines of the layers become SyncBatchNorm(...) */
    char *repr1 = repr_of(m);
    ck_assert_ptr_nonnull(strstr(repr1, "(1): SyncBatchNorm(3, eps=1e-05, momentum=0.1, "
                                        "affine=True, track_running_stats=True)"));
    ck_assert_ptr_nonnull(strstr(repr1, "(0): SyncBatchNorm(3, eps=1e-05"));
    ck_assert_ptr_null(strstr(repr1, "BatchNorm1d"));
    ck_assert_ptr_nonnull(strstr(repr0, "(1): BatchNorm1d(3, eps=1e-05"));
    /* converting again re-targets, counts the same; other modules: 0 */
    ck_assert_int_eq(nn_convert_sync_batch_norm(m, NULL, NULL), 2);
    ck_assert_int_eq(nn_convert_sync_batch_norm(nn_module_find(m, "0"), NULL, NULL), 0);
    ck_assert_int_eq(nn_convert_sync_batch_norm(NULL, NULL, NULL), -1);
    tu_assert_error(CT_ERR_NULL, "NULL module");
    /* ModelFreezer keeps SyncBatchNorm trainable like BatchNorm */
    Module *net = nn_sequential(
        2, (Module *[]){nn_sequential(1, (Module *[]){nn_batch_norm2d(2, 1e-5, 0.1)}),
                        nn_batch_norm1d(2, 1e-5, 0.1)});
    ck_assert_int_eq(nn_convert_sync_batch_norm(net, NULL, NULL), 2);
    ck_assert_int_eq(nn_module_freeze_groups(net, 1, true), CT_OK);
    ck_assert(tensor_requires_grad(nn_module_get(net, "0.0.weight")));
    ck_assert_int_eq(nn_module_freeze_groups(net, 1, false), CT_OK);
    ck_assert(!tensor_requires_grad(nn_module_get(net, "0.0.weight")));
    /* a state dict without num_batches_tracked still loads strictly
     * (BatchNorm's rule), and a plain model's dict loads into the converted */
    Module *other = small_net();
    CtStateDict *partial = nn_module_state_dict(other);
    ck_assert(ct_state_dict_remove(partial, "1.num_batches_tracked"));
    ck_assert_int_eq(nn_module_load_state_dict(m, partial, true, NULL), CT_OK);
    ct_state_dict_free(partial);
    nn_module_free(other);
    free(repr0);
    free(repr1);
    ct_state_dict_free(before);
    ct_state_dict_free(after);
    nn_module_free(net);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

/* weight, bias and running stats set to distinct values */
static void set_bn(Module *bn, unsigned seed)
{
    const char *names[] = {"weight", "bias", "running_mean", "running_var"};
    const double lo[] = {0.5, -1, -0.5, 0.5}, hi[] = {1.5, 1, 0.5, 2};
    for (int i = 0; i < 4; i++) {
        Tensor *t = nn_module_get(bn, names[i]);
        Tensor *v =
            tu_rand64(1, tensor_shape(t), lo[i], hi[i], seed + (unsigned)i, false);
        ck_assert_int_eq(tensor_copy_(t, v), CT_OK);
        tensor_free(v);
    }
}

/* Runs a train step (forward, backward with upstream gradient gy), then an
 * eval forward, through bn on x (f32 copy of x64, requiring grad); returns
 * [y_train, dx, dweight, dbias, running_mean, running_var, y_eval] as
 * persistent tensors. relu: nn_forward_relu. */
static void run_bn(Module *bn, Tensor *x64, Tensor *gy64, bool relu, Tensor *out[7])
{
    CtScope *s = ct_scope_open();
    Tensor *x = tensor_cast(x64, CT_F32);
    Tensor *leaf = tensor_retain(tensor_contiguous(x));
    ct_scope_close(s);
    Tensor *xl = tensor_clone(leaf); /* persistent leaf */
    tensor_free(leaf);
    ck_assert_int_eq(tensor_set_requires_grad(xl, true), CT_OK);
    s = ct_scope_open();
    nn_module_train(bn);
    Tensor *y = relu ? nn_forward_relu(bn, xl) : nn_forward(bn, xl);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(tensor_backward(y, tensor_cast(gy64, CT_F32)), CT_OK);
    out[0] = tensor_retain(y);
    out[1] = tensor_retain(tensor_grad(xl));
    out[2] = tensor_retain(tensor_grad(nn_module_get(bn, "weight")));
    out[3] = tensor_retain(tensor_grad(nn_module_get(bn, "bias")));
    out[4] = tensor_retain(tensor_clone(nn_module_get(bn, "running_mean")));
    out[5] = tensor_retain(tensor_clone(nn_module_get(bn, "running_var")));
    nn_module_eval(bn);
    out[6] = tensor_retain(nn_forward(bn, xl));
    ck_assert_ptr_nonnull(out[6]);
    ct_scope_close(s);
    tensor_free(xl);
}

static const char *const what7[7] = {
    "y", "dx", "dweight", "dbias", "running_mean", "running_var", "y_eval"};

/* Two BatchNorm2d(3) from the same values, one converted with all_reduce. */
static void bn_pair(NnAllReduceFn ar, Module **plain, Module **sync)
{
    *plain = nn_batch_norm2d(3, 1e-5, 0.1);
    *sync = nn_batch_norm2d(3, 1e-5, 0.1);
    set_bn(*plain, 11);
    set_bn(*sync, 11);
    ck_assert_int_eq(nn_convert_sync_batch_norm(*sync, ar, NULL), 1);
}

START_TEST(test_single_process_is_exactly_batch_norm)
{
    TU_MEM_BEGIN;
    const int64_t shape[4] = {4, 3, 2, 5};
    Tensor *x = tu_rand64(4, shape, -2, 5, 1, false);
    Tensor *gy = tu_rand64(4, shape, -1, 1, 2, false);
    for (int relu = 0; relu < 2; relu++) {
        Module *plain, *sync;
        bn_pair(NULL, &plain, &sync); /* no all-reduce: one process */
        Tensor *a[7], *b[7];
        run_bn(plain, x, gy, relu, a);
        run_bn(sync, x, gy, relu, b);
        CtScope *s = ct_scope_open();
        for (int i = 0; i < 7; i++) tu_assert_same_bits(what7[i], a[i], b[i]);
        ct_scope_close(s);
        ck_assert_int_eq(
            *(int64_t *)tensor_data(nn_module_get(sync, "num_batches_tracked")), 1);
        for (int i = 0; i < 7; i++) tensor_free(a[i]), tensor_free(b[i]);
        nn_module_free(plain);
        nn_module_free(sync);
    }
    tensor_free(x);
    tensor_free(gy);
    TU_MEM_END;
}
END_TEST

/* The synchronised path over a group of one equals BatchNorm (f32). */
START_TEST(test_sync_path_matches_batch_norm)
{
    TU_MEM_BEGIN;
    const int64_t shapes[2][4] = {{4, 3, 2, 5}, {7, 3, 1, 1}};
    for (int k = 0; k < 2; k++) {
        /* a large mean relative to the spread: E[x^2] - mean^2 would cancel */
        Tensor *x = tu_rand64(4, shapes[k], 100, 103, 3 + k, false);
        Tensor *gy = tu_rand64(4, shapes[k], -1, 1, 4 + k, false);
        for (int relu = 0; relu < 2; relu++) {
            Module *plain, *sync;
            bn_pair(reduce_one, &plain, &sync);
            Tensor *a[7], *b[7];
            n_reduce = 0;
            run_bn(plain, x, gy, relu, a);
            ck_assert_int_eq(n_reduce, 0);
            run_bn(sync, x, gy, relu, b);
            ck_assert_int_eq(n_reduce, 4); /* 2 in forward, 2 in backward; eval: 0 */
            for (int i = 0; i < 7; i++) {
                double va[256], vb[256];
                int64_t n = tensor_numel(a[i]);
                ck_assert_int_eq(tensor_numel(b[i]), n);
                tensor_copy_to_host(a[i], va, CT_F64);
                tensor_copy_to_host(b[i], vb, CT_F64);
                for (int64_t j = 0; j < n; j++)
                    ck_assert_msg(fabs(va[j] - vb[j]) <= 2e-5 + 1e-5 * fabs(va[j]),
                                  "%s[%lld]: BatchNorm %.9g, SyncBatchNorm %.9g",
                                  what7[i], (long long)j, va[j], vb[j]);
            }
            ck_assert_int_eq(
                *(int64_t *)tensor_data(nn_module_get(sync, "num_batches_tracked")), 1);
            for (int i = 0; i < 7; i++) tensor_free(a[i]), tensor_free(b[i]);
            nn_module_free(plain);
            nn_module_free(sync);
        }
        tensor_free(x);
        tensor_free(gy);
    }
    TU_MEM_END;
}
END_TEST

/* f64: the function against tensor_batch_norm to 1e-12, and its gradients
 * against finite differences. */
static Tensor *sync_fn(Tensor **in, void *ctx)
{
    (void)ctx;
    return nn_sync_batch_norm(in[0], NULL, NULL, in[1], in[2], true, 0.1, 1e-5,
                              reduce_one, NULL);
}

START_TEST(test_sync_function_f64)
{
    TU_MEM_BEGIN;
    const int64_t shape[3] = {5, 2, 3}, c = 2;
    Tensor *in[3] = {tu_rand64(3, shape, -1, 3, 5, true),
                     tu_rand64(1, &c, 0.5, 2, 6, true), tu_rand64(1, &c, -1, 1, 7, true)};
    tu_gradcheck("nn_sync_batch_norm", sync_fn, NULL, 3, in);
    Tensor *rm[2] = {tu_rand64(1, &c, -1, 1, 8, false),
                     tu_rand64(1, &c, -1, 1, 8, false)};
    Tensor *rv[2] = {tu_rand64(1, &c, 1, 2, 9, false), tu_rand64(1, &c, 1, 2, 9, false)};
    CtScope *s = ct_scope_open();
    Tensor *a = tensor_batch_norm(in[0], rm[0], rv[0], in[1], in[2], true, 0.1, 1e-5);
    Tensor *b = nn_sync_batch_norm(in[0], rm[1], rv[1], in[1], in[2], true, 0.1, 1e-5,
                                   reduce_one, NULL);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(tensor_dtype(b), CT_F64);
    double va[30], vb[30];
    tensor_copy_to_host(a, va, CT_F64);
    tensor_copy_to_host(b, vb, CT_F64);
    tu_assert_values(b, va, 30, 1e-12, 1e-12);
    tensor_copy_to_host(rm[0], va, CT_F64);
    tu_assert_values(rm[1], va, 2, 1e-14, 1e-12);
    tensor_copy_to_host(rv[0], va, CT_F64);
    tu_assert_values(rv[1], va, 2, 1e-14, 1e-12);
    (void)vb;
    /* eval mode and all_reduce NULL are tensor_batch_norm itself */
    n_reduce = 0;
    tu_assert_same_bits(
        "eval", tensor_batch_norm(in[0], rm[0], rv[0], in[1], in[2], false, 0.1, 1e-5),
        nn_sync_batch_norm(in[0], rm[0], rv[0], in[1], in[2], false, 0.1, 1e-5,
                           reduce_one, NULL));
    ck_assert_int_eq(n_reduce, 0);
    ct_scope_close(s);
    for (int i = 0; i < 3; i++) tensor_free(in[i]);
    for (int i = 0; i < 2; i++) tensor_free(rm[i]), tensor_free(rv[i]);
    TU_MEM_END;
}
END_TEST

/* Backward all-reduces only when the input needs a gradient (as PyTorch);
 * every process then makes the same calls. */
START_TEST(test_backward_reduces_only_for_input_grad)
{
    TU_MEM_BEGIN;
    Module *bn = nn_batch_norm1d(3, 1e-5, 0.1);
    nn_convert_sync_batch_norm(bn, reduce_one, NULL);
    Tensor *x = tu_tensor(CT_F32, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 6, 8});
    CtScope *s = ct_scope_open();
    n_reduce = 0;
    Tensor *y = nn_forward(bn, x);
    ck_assert_int_eq(n_reduce, 2);
    ck_assert_int_eq(tensor_backward(tensor_sum_all(tensor_mul(y, y)), NULL), CT_OK);
    ck_assert_int_eq(n_reduce, 2);
    /* weight got its (local) gradient */
    tu_assert_values(tensor_grad(nn_module_get(bn, "bias")), ((double[]){0, 0, 0}), 3,
                     1e-6, 0);
    /* 3-d input (N, C, L) works as torch's SyncBatchNorm */
    ck_assert_ptr_nonnull(nn_forward(bn, tensor_reshape(x, 3, (int64_t[]){2, 3, 1})));
    ct_scope_close(s);
    tensor_free(x);
    nn_module_free(bn);
    TU_MEM_END;
}
END_TEST

START_TEST(test_errors)
{
    TU_MEM_BEGIN;
    Module *bn = nn_batch_norm1d(3, 1e-5, 0.1);
    nn_convert_sync_batch_norm(bn, reduce_one, NULL);
    Tensor *one = tu_tensor(CT_F32, 2, (int64_t[]){1, 3}, (double[]){1, 2, 3});
    Tensor *x1 = tu_tensor(CT_F32, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    Tensor *x4 =
        tu_tensor(CT_F32, 2, (int64_t[]){2, 4}, (double[]){1, 2, 3, 4, 5, 6, 7, 8});
    Tensor *rm0 = tensor_clone(nn_module_get(bn, "running_mean"));
    CtScope *s = ct_scope_open();
    ck_assert_ptr_null(nn_forward(bn, one));
    tu_assert_error(CT_ERR_SHAPE, "expected more than 1 value per channel when training, "
                                  "got 1 over all processes");
    /* nothing written half-way */
    tu_assert_same_bits("running_mean", rm0, nn_module_get(bn, "running_mean"));
    ck_assert_int_eq(*(int64_t *)tensor_data(nn_module_get(bn, "num_batches_tracked")),
                     0);
    ck_assert_ptr_null(nn_forward(bn, x1));
    tu_assert_error(CT_ERR_SHAPE,
                    "SyncBatchNorm(3): expected at least 2-d (N, C, *) input");
    ck_assert_ptr_null(nn_forward(bn, x4));
    tu_assert_error(CT_ERR_SHAPE, "SyncBatchNorm: running_mean is");
    nn_convert_sync_batch_norm(bn, reduce_fail, NULL);
    ck_assert_ptr_null(nn_forward(bn, tensor_reshape(x4, 2, (int64_t[]){4, 2})));
    tu_assert_error(CT_ERR_SHAPE, "running_mean is");
    ck_assert_ptr_null(nn_forward(bn, tensor_cat(2, (Tensor *[]){one, one}, 0)));
    tu_assert_error(CT_ERR_BACKEND, "broken group");
    ck_assert_ptr_null(
        nn_sync_batch_norm(x4, NULL, NULL, NULL, NULL, true, 0.1, 0, reduce_one, NULL));
    tu_assert_error(CT_ERR_INVALID, "eps > 0");
    ck_assert_ptr_null(nn_sync_batch_norm(NULL, NULL, NULL, NULL, NULL, true, 0.1, 1e-5,
                                          reduce_one, NULL));
    /* a running statistic that cannot be written (expanded) is refused
     * before anything is reduced or written */
    Tensor *rm = tensor_zeros(1, (int64_t[]){2}, CT_F32, ct_cpu());
    Tensor *rv = tensor_expand(tensor_ones(1, (int64_t[]){1}, CT_F32, ct_cpu()), 1,
                               (int64_t[]){2});
    Tensor *x42 = tensor_reshape(x4, 2, (int64_t[]){4, 2});
    n_reduce = 0;
    ck_assert_ptr_null(
        nn_sync_batch_norm(x42, rm, rv, NULL, NULL, true, 0.1, 1e-5, reduce_one, NULL));
    tu_assert_error(CT_ERR_SHAPE,
                    "running_var is f32[2] cpu, expected (2) and contiguous");
    ck_assert_int_eq(n_reduce, 0);
    tu_assert_values(rm, ((const double[]){0, 0}), 2, 0, 0);
    ct_scope_close(s);
    tensor_free(one);
    tensor_free(x1);
    tensor_free(x4);
    tensor_free(rm0);
    nn_module_free(bn);
    TU_MEM_END;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("nn_sync_batch_norm");
    TCase *tc = tcase_create("sync_batch_norm");
    tcase_add_test(tc, test_convert_keeps_names_and_tensors);
    tcase_add_test(tc, test_single_process_is_exactly_batch_norm);
    tcase_add_test(tc, test_sync_path_matches_batch_norm);
    tcase_add_test(tc, test_sync_function_f64);
    tcase_add_test(tc, test_backward_reduces_only_for_input_grad);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
