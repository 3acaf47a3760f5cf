/* SyncBatchNorm across processes, run under mpirun with 2 and 3 ranks:
 * each rank holds a shard (rows [start, end)) of one global batch, shards
 * of equal and unequal sizes and an empty one; the outputs, running
 * statistics and input gradients of SyncBatchNorm on the shard equal
 * BatchNorm's on the whole batch in one process (rows [start, end)), and
 * the weight and bias gradients summed over the ranks equal BatchNorm's
 * (f32 modules to ~1e-6, the f64 function to 1e-12). Then: a model with
 * two SyncBatchNorms and a fused ReLU, a global batch of one sample (an
 * error on every rank, which stay in step), an input without a gradient
 * (no all-reduce in backward), and the ConvertSyncBatchNorm callback in a
 * Trainer run against one process holding the whole batch.
 * Exit status 0 when every check passed on this rank. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctrainer/ctrainer.h"
#include "mpi_test.h"
#include "testutil.h"

enum { C = 3 };

/* Rank sizes of the shard cases: equal, unequal, and with an empty rank. */
static int64_t shard_size(int kase, int r)
{
    static const int64_t uneven[3] = {5, 2, 3}, empty[3] = {3, 0, 4};
    return kase == 0 ? 4 : kase == 1 ? uneven[r] : empty[r];
}

static int64_t shard_start(int kase, int r)
{
    int64_t s = 0;
    for (int i = 0; i < r; i++) s += shard_size(kase, i);
    return s;
}

/* Rows [a, b) of t (dim 0) as a persistent contiguous tensor of dtype dt,
 * requiring grad when asked. */
static Tensor *rows(Tensor *t, int64_t a, int64_t b, CtDType dt, bool grad)
{
    CtScope *s = ct_scope_open();
    Tensor *v =
        tensor_retain(tensor_contiguous(tensor_cast(tensor_slice(t, 0, a, b, 1), dt)));
    ct_scope_close(s);
    Tensor *out = tensor_clone(v);
    tensor_free(v);
    if (grad) tensor_set_requires_grad(out, true);
    return out;
}

/* |a - b| <= atol + rtol |b| elementwise, with the first mismatch reported. */
static void expect_close(const char *what, Tensor *a, Tensor *b, double atol, double rtol)
{
    int64_t n = tensor_numel(b);
    EXPECT(a && tensor_numel(a) == n, "%s: %lld elements, expected %lld", what,
           a ? (long long)tensor_numel(a) : -1LL, (long long)n);
    if (!a || tensor_numel(a) != n || n == 0) return;
    double *va = malloc(sizeof(double) * (size_t)n),
           *vb = malloc(sizeof(double) * (size_t)n);
    tensor_copy_to_host(a, va, CT_F64);
    tensor_copy_to_host(b, vb, CT_F64);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (!(fabs(va[i] - vb[i]) <= atol + rtol * fabs(vb[i]))) bad = i;
    EXPECT(bad < 0, "%s[%lld]: %.12g, expected %.12g", what, (long long)bad,
           bad >= 0 ? va[bad] : 0.0, bad >= 0 ? vb[bad] : 0.0);
    free(va);
    free(vb);
}

/* Sets a BatchNorm's weight, bias and running stats to fixed values. */
static void set_bn(Module *bn)
{
    static const double v[4][C] = {
        {0.7, 1.3, 0.9}, {0.2, -0.4, 0.1}, {0.1, -0.2, 0.3}, {1.1, 0.8, 1.6}};
    const char *names[4] = {"weight", "bias", "running_mean", "running_var"};
    for (int i = 0; i < 4; i++) {
        Tensor *t = tu_tensor(CT_F32, 1, (int64_t[]){C}, v[i]);
        tensor_copy_(nn_module_get(bn, names[i]), t);
        tensor_free(t);
    }
}

/* Two train steps (forward + backward with gy, then forward only) and an
 * eval forward of bn on x: [y of step 1, dx, dweight, dbias, running_mean,
 * running_var, y_eval], persistent. */
static void run_module(Module *bn, Tensor *x, Tensor *gy, Tensor *out[7])
{
    CtScope *s = ct_scope_open();
    nn_module_train(bn);
    Tensor *y = nn_forward(bn, x);
    CtStatus st = tensor_backward(y, gy);
    EXPECT(y && st == CT_OK, "forward/backward: %s", ct_last_error());
    out[0] = tensor_retain(y);
    out[1] = tensor_retain(tensor_grad(x));
    out[2] = tensor_retain(tensor_clone(tensor_grad(nn_module_get(bn, "weight"))));
    out[3] = tensor_retain(tensor_clone(tensor_grad(nn_module_get(bn, "bias"))));
    EXPECT(nn_forward(bn, x), "second forward: %s", ct_last_error());
    out[4] = tensor_retain(tensor_clone(nn_module_get(bn, "running_mean")));
    out[5] = tensor_retain(tensor_clone(nn_module_get(bn, "running_var")));
    nn_module_eval(bn);
    out[6] = tensor_retain(nn_forward(bn, x));
    ct_scope_close(s);
}

static const char *const what7[7] = {
    "y", "dx", "dweight", "dbias", "running_mean", "running_var", "y_eval"};

/* SyncBatchNorm1d/2d modules (f32) on every shard case. */
static void modules_f32(int kase, bool is2d)
{
    const int64_t n = shard_start(kase, W), a = shard_start(kase, R),
                  b = a + shard_size(kase, R);
    int64_t shape[4] = {n, C, 2, 3};
    int nd = is2d ? 4 : 2;
    /* (f32 rounds x - mean to ~1e-7 |x|: f64 tests the far-from-0 mean) */
    Tensor *X = tu_rand64(nd, shape, -2, 3, 100 + (unsigned)kase, false);
    Tensor *G = tu_rand64(nd, shape, -1, 1, 200 + (unsigned)kase, false);
    Module *ref = is2d ? nn_batch_norm2d(C, 1e-5, 0.1) : nn_batch_norm1d(C, 1e-5, 0.1);
    Module *sbn = is2d ? nn_batch_norm2d(C, 1e-5, 0.1) : nn_batch_norm1d(C, 1e-5, 0.1);
    set_bn(ref);
    set_bn(sbn);
    EXPECT(runtime_convert_sync_batch_norm(rt, sbn) == 1, "convert: %s", ct_last_error());
    Tensor *xf = rows(X, 0, n, CT_F32, true), *gf = rows(G, 0, n, CT_F32, false);
    Tensor *xr = rows(X, a, b, CT_F32, true), *gr = rows(G, a, b, CT_F32, false);
    Tensor *e[7], *o[7];
    run_module(ref, xf, gf, e);
    run_module(sbn, xr, gr, o);
    /* weight and bias gradients: this rank's share; their sum is the whole */
    for (int i = 2; i < 4; i++) {
        Tensor *sum = runtime_reduce(rt, o[i], RUNTIME_REDUCE_SUM);
        tensor_free(o[i]);
        o[i] = sum;
    }
    char what[64];
    for (int i = 0; i < 7; i++) {
        Tensor *want = i == 0 || i == 1 || i == 6 ? rows(e[i], a, b, CT_F32, false)
                                                  : tensor_retain(e[i]);
        snprintf(what, sizeof what, "case %d %s %s", kase, is2d ? "2d" : "1d", what7[i]);
        expect_close(what, o[i], want, 2e-6, 2e-6);
        tensor_free(want);
    }
    EXPECT(*(int64_t *)tensor_data(nn_module_get(sbn, "num_batches_tracked")) == 2,
           "num_batches_tracked");
    for (int i = 0; i < 7; i++) tensor_free(e[i]), tensor_free(o[i]);
    Tensor *ts[] = {X, G, xf, gf, xr, gr};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) tensor_free(ts[i]);
    nn_module_free(ref);
    nn_module_free(sbn);
}

static Tensor *reduce_sum(void *ctx, Tensor *t)
{
    return runtime_reduce((Runtime *)ctx, t, RUNTIME_REDUCE_SUM);
}

/* The function in f64 (the modules are f32) against tensor_batch_norm. */
static void function_f64(int kase)
{
    const int64_t n = shard_start(kase, W), a = shard_start(kase, R),
                  b = a + shard_size(kase, R), c = C;
    int64_t shape[3] = {n, C, 4};
    Tensor *X = tu_rand64(3, shape, 100, 110, 300 + (unsigned)kase, false);
    Tensor *G = tu_rand64(3, shape, -1, 1, 400 + (unsigned)kase, false);
    Tensor *w[2], *bias[2], *rm[2], *rv[2];
    for (int k = 0; k < 2; k++) {
        w[k] = tu_rand64(1, &c, 0.5, 1.5, 1, true);
        bias[k] = tu_rand64(1, &c, -1, 1, 2, true);
        rm[k] = tu_rand64(1, &c, -1, 1, 3, false);
        rv[k] = tu_rand64(1, &c, 0.5, 2, 4, false);
    }
    Tensor *xf = rows(X, 0, n, CT_F64, true), *xr = rows(X, a, b, CT_F64, true);
    CtScope *s = ct_scope_open();
    Tensor *ye = tensor_batch_norm(xf, rm[0], rv[0], w[0], bias[0], true, 0.1, 1e-5);
    tensor_backward(ye, G);
    Tensor *yo = nn_sync_batch_norm(xr, rm[1], rv[1], w[1], bias[1], true, 0.1, 1e-5,
                                    reduce_sum, rt);
    EXPECT(yo && tensor_backward(yo, tensor_slice(G, 0, a, b, 1)) == CT_OK,
           "f64 forward/backward: %s", ct_last_error());
    char what[64];
    snprintf(what, sizeof what, "f64 case %d y", kase);
    expect_close(what, yo, tensor_slice(ye, 0, a, b, 1), 1e-12, 1e-12);
    snprintf(what, sizeof what, "f64 case %d dx", kase);
    expect_close(what, tensor_grad(xr), tensor_slice(tensor_grad(xf), 0, a, b, 1), 1e-12,
                 1e-12);
    Tensor *pairs[4][2] = {{tensor_grad(w[1]), tensor_grad(w[0])},
                           {tensor_grad(bias[1]), tensor_grad(bias[0])},
                           {rm[1], rm[0]},
                           {rv[1], rv[0]}};
    static const char *const names[4] = {"dweight", "dbias", "running_mean",
                                         "running_var"};
    for (int i = 0; i < 4; i++) {
        /* retained: the reduced tensors belong to the open scope */
        Tensor *got = tensor_retain(
            i < 2 ? runtime_reduce(rt, pairs[i][0], RUNTIME_REDUCE_SUM) : pairs[i][0]);
        snprintf(what, sizeof what, "f64 case %d %s", kase, names[i]);
        expect_close(what, got, pairs[i][1], 1e-12, 1e-12);
        tensor_free(got);
    }
    ct_scope_close(s);
    Tensor *ts[] = {X,       G,       xf,    xr,    w[0],  w[1],
                    bias[0], bias[1], rm[0], rm[1], rv[0], rv[1]};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) tensor_free(ts[i]);
}

/* Linear(4, 3) -> SyncBatchNorm -> ReLU (fused) -> Linear(3, 3) ->
 * SyncBatchNorm: two layers' all-reduces in forward and backward, in the
 * same order on every rank. Parameter gradients summed over the ranks
 * equal one process's on the whole batch. */
static Module *two_bn_net(void)
{
    CtGenerator g = ct_generator(5, 0);
    return nn_sequential(5, (Module *[]){nn_linear(4, C, true, &g),
                                         nn_batch_norm1d(C, 1e-5, 0.1), nn_relu(),
                                         nn_linear(C, C, true, &g),
                                         nn_batch_norm1d(C, 1e-5, 0.1)});
}

static void two_layers(int kase)
{
    const int64_t n = shard_start(kase, W), a = shard_start(kase, R),
                  b = a + shard_size(kase, R);
    Tensor *X = tu_rand64(2, (int64_t[]){n, 4}, -2, 2, 500, false);
    Tensor *G = tu_rand64(2, (int64_t[]){n, C}, -1, 1, 600, false);
    Module *ref = two_bn_net(), *sbn = two_bn_net();
    EXPECT(runtime_convert_sync_batch_norm(rt, sbn) == 2, "convert two");
    Tensor *xf = rows(X, 0, n, CT_F32, true), *xr = rows(X, a, b, CT_F32, true);
    CtScope *s = ct_scope_open();
    tensor_backward(nn_forward(ref, xf), tensor_cast(G, CT_F32));
    Tensor *y = nn_forward(sbn, xr);
    EXPECT(y && tensor_backward(y, tensor_cast(tensor_slice(G, 0, a, b, 1), CT_F32)) ==
                    CT_OK,
           "two layers: %s", ct_last_error());
    char what[64];
    snprintf(what, sizeof what, "two layers case %d dx", kase);
    expect_close(what, tensor_grad(xr), tensor_slice(tensor_grad(xf), 0, a, b, 1), 5e-6,
                 5e-6);
    CtStateDict *pe = nn_module_parameters(ref), *po = nn_module_parameters(sbn);
    for (int64_t i = 0; i < ct_state_dict_size(pe); i++) {
        Tensor *sum = runtime_reduce(rt, tensor_grad(ct_state_dict_tensor(po, i)),
                                     RUNTIME_REDUCE_SUM); /* the open scope's */
        snprintf(what, sizeof what, "two layers case %d d%s", kase,
                 ct_state_dict_name(pe, i));
        expect_close(what, sum, tensor_grad(ct_state_dict_tensor(pe, i)), 5e-6, 5e-6);
    }
    ct_state_dict_free(pe);
    ct_state_dict_free(po);
    ct_scope_close(s);
    Tensor *ts[] = {X, G, xf, xr};
    for (size_t i = 0; i < 4; i++) tensor_free(ts[i]);
    nn_module_free(ref);
    nn_module_free(sbn);
}

/* One sample over all ranks: an error on every rank, after which the ranks
 * are still in step. An input without a gradient: no all-reduce in
 * backward, the ranks still in step. */
static void errors_and_no_input_grad(void)
{
    Module *bn = nn_batch_norm1d(C, 1e-5, 0.1);
    runtime_convert_sync_batch_norm(rt, bn);
    Tensor *x = tu_tensor(CT_F32, 2, (int64_t[]){R == 0 ? 1 : 0, C}, (double[]){1, 2, 3});
    CtScope *s = ct_scope_open();
    EXPECT(!nn_forward(bn, x) && ct_last_status() == CT_ERR_SHAPE &&
               strstr(ct_last_error(), "got 1 over all processes"),
           "one sample: %s", ct_last_error());
    ct_clear_error();
    double one = 1;
    EXPECT(runtime_reduce_f64(rt, &one, 1, RUNTIME_REDUCE_SUM) == CT_OK && one == W,
           "in step after the error");
    Tensor *x2 = tu_tensor(CT_F32, 2, (int64_t[]){2, C}, (double[]){1, 2, 3, R, 5, 9});
    RuntimeCommStats before = runtime_comm_stats(rt);
    Tensor *y = nn_forward(bn, x2);
    int64_t fwd = runtime_comm_stats(rt).calls - before.calls;
    EXPECT(y && tensor_backward(tensor_sum_all(tensor_mul(y, y)), NULL) == CT_OK,
           "no input grad: %s", ct_last_error());
    EXPECT(runtime_comm_stats(rt).calls - before.calls == fwd,
           "backward made %lld collective calls without an input gradient",
           (long long)(runtime_comm_stats(rt).calls - before.calls - fwd));
    one = 1;
    EXPECT(runtime_reduce_f64(rt, &one, 1, RUNTIME_REDUCE_SUM) == CT_OK && one == W,
           "in step after backward");
    ct_scope_close(s);
    tensor_free(x);
    tensor_free(x2);
    nn_module_free(bn);
}

/* ------------------------------------------------- the callback, trained */

enum { FEATURES = 3, B = 4, UPDATES = 5 };

static void row(int64_t i, float *x, float *y)
{
    for (int j = 0; j < FEATURES; j++) x[j] = (float)sin(0.7 * (double)i + j) + 2.0f;
    *y = (float)(0.5 * x[0] - x[1] * x[2] + 0.1);
}

/* Rows first, first + step, ... below n. */
static Dataset *table(int64_t n, int64_t first, int64_t step)
{
    int64_t m = (n - first + step - 1) / step;
    float *x = malloc(sizeof(float) * (size_t)(m * FEATURES)),
          *y = malloc(sizeof(float) * (size_t)m);
    for (int64_t k = 0; k < m; k++) row(first + k * step, x + k * FEATURES, y + k);
    Tensor *tx = tensor_from_data(x, 2, (int64_t[]){m, FEATURES}, CT_F32, ct_cpu());
    Tensor *ty = tensor_from_data(y, 2, (int64_t[]){m, 1}, CT_F32, ct_cpu());
    free(x);
    free(y);
    return test_dataset(tx, ty);
}

static DataLoader *plain_loader(Trainer *t, int64_t bs, const TrainerLoaderArgs *a)
{
    (void)a;
    return data_loader_create(t->user, &(DataLoaderArgs){.batch_size = bs});
}

static Module *bn_mlp(void)
{
    CtGenerator g = ct_generator(9, 0);
    return nn_sequential(4, (Module *[]){nn_linear(FEATURES, 8, true, &g),
                                         nn_batch_norm1d(8, 1e-5, 0.1), nn_relu(),
                                         nn_linear(8, 1, true, &g)});
}

/* W ranks x batch B with ConvertSyncBatchNorm == one process x batch W*B:
 * the same weights and running statistics after UPDATES updates (batch k
 * of the ranks together is batch k of the whole table). */
static void callback_in_trainer(void)
{
    const int64_t n = (int64_t)W * B * UPDATES;
    Module *ref = bn_mlp();
    Dataset *all = table(n, 0, 1);
    DataLoader *dl = data_loader_create(all, &(DataLoaderArgs){.batch_size = W * B});
    Optimizer *ro = test_sgd(ref);
    NnLoss *mse = nn_loss_mse(CT_REDUCTION_MEAN);
    nn_module_pack(ref);
    test_reference_epoch(ref, ro, mse, dl, 1);

    Module *m = bn_mlp();
    Dataset *shard = table(n, R, W);
    Optimizer *o = test_sgd(m);
    Callback *cb = callback_convert_sync_batch_norm_create();
    Trainer *t = trainer_create(&(TrainerConfig){
        .model = m,
        .loss = mse,
        .optimizer = o,
        .runtime = rt,
        .user = shard,
        .hooks = {.create_train_dataloader = plain_loader},
        .callbacks = (Callback *[]){cb},
        .n_callbacks = 1,
    });
    EXPECT(t, "trainer_create: %s", ct_last_error());
    CtStatus st = t ? trainer_train(t, &(TrainArgs){.train_dataset = shard,
                                                    .num_epochs = 1,
                                                    .per_device_batch_size = B})
                    : CT_ERR_NULL;
    EXPECT(st == CT_OK, "trainer_train: %s", ct_last_error());
    EXPECT(callback_convert_sync_batch_norm_count(cb) == 1, "converted %lld",
           (long long)callback_convert_sync_batch_norm_count(cb));
    EXPECT(nn_is_sync_batch_norm(nn_module_find(m, "1")), "layer 1 is not SyncBatchNorm");
    CtStateDict *se = nn_module_state_dict(ref), *so = nn_module_state_dict(m);
    for (int64_t i = 0; i < ct_state_dict_size(se); i++) {
        if (tensor_dtype(ct_state_dict_tensor(se, i)) != CT_F32) continue;
        char what[64];
        snprintf(what, sizeof what, "trained %s", ct_state_dict_name(se, i));
        expect_close(what, ct_state_dict_tensor(so, i), ct_state_dict_tensor(se, i), 2e-5,
                     2e-5);
    }
    ct_state_dict_free(se);
    ct_state_dict_free(so);
    trainer_free(t);
    optim_free(o);
    optim_free(ro);
    nn_loss_free(mse);
    data_loader_free(dl);
    data_dataset_free(all);
    data_dataset_free(shard);
    nn_module_free(ref);
    nn_module_free(m);
}

/* One check test, so the testutil helpers (check assertions) can run;
 * EXPECT counts the value mismatches, reported per rank. */
START_TEST(sync_batch_norm)
{
    for (int kase = 0; kase < 3; kase++) {
        modules_f32(kase, false);
        modules_f32(kase, true);
        function_f64(kase);
        two_layers(kase);
    }
    errors_and_no_input_grad();
    callback_in_trainer();
    double f = failures;
    runtime_reduce_f64(rt, &f, 1, RUNTIME_REDUCE_SUM);
    if (R == 0) printf("mpi_sync_batch_norm: %d ranks, %.0f failed checks\n", W, f);
    ck_assert_int_eq(failures, 0);
}
END_TEST

int main(void)
{
    if (!test_begin()) {
        fprintf(stderr, "runtime_create: %s\n", ct_last_error());
        return 1;
    }
    Suite *s = suite_create("runtime_mpi_sync_batch_norm");
    TCase *tc = tcase_create("sync_batch_norm");
    tcase_set_timeout(tc, 100);
    tcase_add_test(tc, sync_batch_norm);
    suite_add_tcase(s, tc);
    int rc = tu_run(s);
    runtime_free(rt);
    return rc;
}
