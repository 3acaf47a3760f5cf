/* The Trainer's own sharded loaders across processes, run under mpirun with
 * 2 and 3 ranks:
 *
 *   mpi_sharded equivalence  W ranks x batch B through the default loaders
 *                            == 1 process x batch W*B after 20 updates,
 *                            shuffle off and on, with and without gradient
 *                            accumulation
 *   mpi_sharded gather       accuracy gathered with trainer_gather_for_metrics
 *                            and the recorded eval loss over eval sets whose
 *                            length is not a multiple of W*B equal the
 *                            single-process values, counting every sample once
 *   mpi_sharded coverage     runtime_prepare_dataloader + set_epoch +
 *                            runtime_gather_for_metrics of i64, f32 (3-d) and
 *                            bool fields: every sample once per epoch, as
 *                            one process's order, drop_last on and off
 *   mpi_sharded accelerator  runtime_prepare_dataloader deals rank::world
 *                            shards; runtime_backward averages gradients;
 *                            collectives called inside an open scope
 *
 * Every rank trains on the whole table: the default loaders shard it. The
 * reference is a hand-written single-process loop on rank 0. Exit status 0
 * when every check passed on this rank. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrainer/ctrainer.h"
#include "mpi_test.h"

enum { FEATURES = 3, HIDDEN = 16, CLASSES = 3, B = 4, UPDATES = 20 };

/* n rows: x = sin(0.7 i + j); y a smooth function of x (regression), or
 * one of CLASSES labels (classification, as i64). */
static Dataset *table(int64_t n, bool labels)
{
    float *x = malloc(sizeof(float) * (size_t)(n * FEATURES)),
          *y = malloc(sizeof(float) * (size_t)n);
    int64_t *c = malloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        float *xi = x + i * FEATURES;
        for (int j = 0; j < FEATURES; j++) xi[j] = (float)sin(0.7 * (double)i + j);
        y[i] = (float)(0.5 * xi[0] - xi[1] * xi[2] + 0.1);
        c[i] = (int64_t)(i * 7 % CLASSES);
    }
    Tensor *tx = tensor_from_data(x, 2, (int64_t[]){n, FEATURES}, CT_F32, ct_cpu());
    Tensor *ty = labels ? tensor_from_data(c, 1, (int64_t[]){n}, CT_I64, ct_cpu())
                        : tensor_from_data(y, 2, (int64_t[]){n, 1}, CT_F32, ct_cpu());
    free(x);
    free(y);
    free(c);
    return test_dataset(tx, ty);
}

/* --------------------------------------------------------- equivalence */

/* One process, batch W*B, accumulation k, written out by hand over the
 * order the default train loader uses (the runtime's base seed, reshuffled
 * by epoch). */
static void reference_run(Module *m, const Dataset *ds, bool shuffle, int64_t epochs,
                          int64_t k)
{
    DataLoader *dl = data_loader_create(
        ds, &(DataLoaderArgs){
                .batch_size = W * B, .shuffle = shuffle, .seed = runtime_base_seed(rt)});
    Optimizer *o = test_sgd(m);
    NnLoss *mse = nn_loss_mse(CT_REDUCTION_MEAN);
    nn_module_pack(m);
    for (int64_t e = 0; e < epochs; e++) {
        data_loader_set_epoch(dl, e);
        test_reference_epoch(m, o, mse, dl, k);
    }
    nn_loss_free(mse);
    optim_free(o);
    data_loader_free(dl);
}

/* Two epochs of `batches` batches per rank, in windows of k. The table
 * has W*B*batches rows, a multiple of W*B: the distributed sampler deals position p of
 * the epoch's order to rank p % W, so batch j of every rank together is
 * positions j*W*B .. (j+1)*W*B - 1, which is batch j of one process with
 * batch W*B, and no rank needs wrap-around padding. (With any other length
 * the last batches differ: one process gets a short batch, the ranks pad
 * theirs with duplicates.) */
static void equivalence(bool shuffle, int64_t k, int64_t batches)
{
    /* batches per epoch not a multiple of k: a partial last window, which
     * both divide by its own length and flush */
    int64_t epochs = 2, n = (int64_t)W * B * batches,
            updates = epochs * ((batches + k - 1) / k);
    Dataset *ds = table(n, false);
    /* different initial weights per rank: prepare broadcasts rank 0's */
    Module *m = test_mlp(7 + 100 * (uint64_t)R, FEATURES, HIDDEN, 1);
    Optimizer *o = test_sgd(m);
    NnLoss *mse = nn_loss_mse(CT_REDUCTION_MEAN);
    Trainer *t = trainer_create(&(TrainerConfig){
        .model = m, .loss = mse, .optimizer = o, .runtime = rt, .no_callbacks = true});
    CtStatus st = trainer_train(
        t, &(TrainArgs){.train_dataset = ds,
                        .num_epochs = epochs,
                        .per_device_batch_size = B,
                        .gradient_accumulation_steps = k,
                        .train_dataloader_args = &(TrainerLoaderArgs){
                            .shuffle = shuffle ? TRAINER_YES : TRAINER_NO}});
    EXPECT(st == CT_OK, "trainer_train: %s", ct_last_error());
    EXPECT(trainer_global_step(t) == updates, "%lld updates, %lld expected",
           (long long)trainer_global_step(t), (long long)updates);
    Tensor *p = nn_module_param_block(m);
    if (R == 0) {
        Module *ref = test_mlp(7, FEATURES, HIDDEN, 1);
        reference_run(ref, ds, shuffle, epochs, k);
        const float *a = tensor_data(p), *r = tensor_data(nn_module_param_block(ref));
        double worst = 0;
        for (int64_t i = 0; i < tensor_numel(p); i++)
            worst = fmax(worst, fabs((double)a[i] - r[i]));
        EXPECT(worst <= 1e-5,
               "shuffle=%d k=%lld batches=%lld: parameters differ from one process by %g",
               shuffle, (long long)k, (long long)batches, worst);
        printf("equivalence W=%d shuffle=%d k=%lld batches=%lld: max |param - "
               "single-process param| = %.3g\n",
               W, shuffle, (long long)k, (long long)batches, worst);
        nn_module_free(ref);
    }
    trainer_free(t);
    nn_loss_free(mse);
    optim_free(o);
    nn_module_free(m);
    data_dataset_free(ds);
}

/* -------------------------------------------------------------- gather */

/* Accuracy over the gathered outputs of every eval step, and the number of
 * rows it saw. */
typedef struct Counted {
    Callback base;
    Metric *acc;
    int64_t rows;
} Counted;

static CtStatus counted_step_end(Callback *cb, Trainer *t, const DataBatch *b,
                                 const TrainerBatchOutput *out, int64_t step)
{
    (void)step;
    Counted *c = (Counted *)cb;
    Tensor *target = trainer_gather_for_metrics(t, b->t[1]);
    if (target) c->rows += tensor_shape(target)[0];
    return metric_update(c->acc, trainer_gather_for_metrics(t, out->model_outputs),
                         target);
}

static void counted_free(Callback *cb)
{
    metric_free(((Counted *)cb)->acc);
    free(cb);
}

static const CallbackVtable counted_vt = {
    .type = "Counted", .free = counted_free, .on_eval_step_end = counted_step_end};

/* Accuracy and mean cross entropy of m over ds on one process. */
static void reference_eval(Module *m, const Dataset *ds, double *acc, double *loss)
{
    DataLoader *dl = data_loader_create(ds, &(DataLoaderArgs){.batch_size = 1000});
    NnLoss *ce = nn_loss_cross_entropy(NULL);
    DataBatch b;
    int64_t right = 0, n = 0;
    double total = 0;
    nn_module_eval(m);
    while (data_loader_next(dl, &b)) {
        CtScope *s = ct_scope_open();
        Tensor *y = nn_forward(m, b.t[0]);
        total += tensor_item(nn_loss(ce, y, b.t[1])) * (double)b.size;
        const float *v = tensor_data(tensor_contiguous(y));
        const int64_t *c = tensor_data(b.t[1]);
        for (int64_t i = 0; i < b.size; i++) {
            int best = 0;
            for (int j = 1; j < CLASSES; j++)
                if (v[i * CLASSES + j] > v[i * CLASSES + best]) best = j;
            right += best == c[i];
        }
        n += b.size;
        ct_scope_close(s);
    }
    *acc = (double)right / (double)n;
    *loss = total / (double)n;
    nn_loss_free(ce);
    data_loader_free(dl);
}

/* trainer_evaluate over n samples in batches of bs: with n not a multiple
 * of W*bs the sharded eval loader pads some ranks with a duplicate, which
 * neither the gathered accuracy nor the eval loss may count. */
static void gather(int64_t n, int64_t bs, bool drop_last)
{
    Dataset *ds = table(n, true);
    /* drop_last: every rank keeps whole batches of its ceil(n / W) samples;
     * the kept positions of the (sequential) order are the first
     * min(n, W * kept), duplicates excluded */
    int64_t kept = (n + W - 1) / W / bs * bs,
            expect = drop_last ? (W * kept < n ? W * kept : n) : n;
    Module *m = test_mlp(11, FEATURES, HIDDEN, CLASSES);
    Optimizer *o = test_sgd(m);
    NnLoss *ce = nn_loss_cross_entropy(NULL);
    Counted *c = calloc(1, sizeof *c);
    c->base.vt = &counted_vt;
    c->acc = metric_accuracy_create(&(MetricClassArgs){.num_classes = CLASSES});
    Callback *cbs[] = {&c->base};
    Trainer *t = trainer_create(&(TrainerConfig){.model = m,
                                                 .loss = ce,
                                                 .optimizer = o,
                                                 .runtime = rt,
                                                 .callbacks = cbs,
                                                 .n_callbacks = 1});
    CtStatus st = trainer_evaluate(
        t, &(EvalArgs){.dataset = ds,
                       .per_device_batch_size = bs,
                       .dataloader_args = &(TrainerLoaderArgs){
                           .drop_last = drop_last ? TRAINER_YES : TRAINER_NO}});
    EXPECT(st == CT_OK, "trainer_evaluate: %s", ct_last_error());
    double acc = NAN,
           loss = run_history_latest(trainer_run_history(t), "evaluation_loss");
    EXPECT(c->rows == expect,
           "n=%lld bs=%lld drop_last=%d: %lld rows gathered, %lld expected", (long long)n,
           (long long)bs, drop_last, (long long)c->rows, (long long)expect);
    /* every rank holds the whole set's values; rank 0 checks them against
     * one process (the model is rank 0's after prepare) */
    if (expect > 0)
        EXPECT(metric_compute(c->acc, &acc) == CT_OK, "accuracy: %s", ct_last_error());
    if (R == 0 && expect > 0) {
        double ref_acc, ref_loss;
        Dataset *kept_ds = table(expect, true);
        reference_eval(m, kept_ds, &ref_acc, &ref_loss);
        data_dataset_free(kept_ds);
        EXPECT(acc == ref_acc, "n=%lld bs=%lld: accuracy %.9g, one process %.9g",
               (long long)n, (long long)bs, acc, ref_acc);
        EXPECT(fabs(loss - ref_loss) <= 1e-6 * fabs(ref_loss),
               "n=%lld bs=%lld: eval loss %.9g, one process %.9g", (long long)n,
               (long long)bs, loss, ref_loss);
        printf("gather W=%d n=%lld bs=%lld: %lld rows, accuracy %.6f (one process %.6f), "
               "eval loss %.6f (one process %.6f)\n",
               W, (long long)n, (long long)bs, (long long)c->rows, acc, ref_acc, loss,
               ref_loss);
    }
    trainer_free(t);
    nn_loss_free(ce);
    optim_free(o);
    nn_module_free(m);
    data_dataset_free(ds);
}

/* ------------------------------------------------------------ coverage */

/* One epoch of a loader prepared by the runtime over the rows 0..n-1 (field
 * 0: the index, i64 (n); field 1: (n, 2, 2) f32 holding 4 i + j; field 2:
 * bool, i odd), each batch gathered with runtime_gather_for_metrics: the
 * indices land in seen[] (counted); every field must describe the same
 * rows. Returns the rows gathered. */
static int64_t gathered_epoch(DataLoader *dl, int64_t n, int64_t *seen, int64_t *order)
{
    int64_t rows = 0;
    DataBatch b;
    while (data_loader_next(dl, &b)) {
        CtScope *s = ct_scope_open();
        int64_t pad = data_loader_batch_padding(dl);
        Tensor *gi = runtime_gather_for_metrics(rt, b.t[0], pad),
               *gf = runtime_gather_for_metrics(rt, b.t[1], pad),
               *gb = runtime_gather_for_metrics(rt, b.t[2], pad);
        EXPECT(gi && gf && gb, "gather_for_metrics: %s", ct_last_error());
        if (gi && gf && gb) {
            int64_t k = tensor_shape(gi)[0];
            EXPECT(tensor_shape(gf)[0] == k && tensor_shape(gb)[0] == k &&
                       tensor_ndim(gf) == 3 && tensor_dtype(gb) == CT_BOOL,
                   "fields gathered with %lld, %lld, %lld rows", (long long)k,
                   (long long)tensor_shape(gf)[0], (long long)tensor_shape(gb)[0]);
            const int64_t *ix = tensor_data(gi);
            const float *fx = tensor_data(gf);
            const bool *bx = tensor_data(gb);
            for (int64_t i = 0; i < k && tensor_shape(gf)[0] == k; i++) {
                EXPECT(ix[i] >= 0 && ix[i] < n, "index %lld", (long long)ix[i]);
                if (ix[i] < 0 || ix[i] >= n) continue;
                seen[ix[i]]++;
                order[rows + i] = ix[i];
                EXPECT(fx[4 * i + 3] == (float)(4 * ix[i] + 3) && bx[i] == (ix[i] % 2),
                       "row %lld: features of another sample", (long long)ix[i]);
            }
            rows += k;
        }
        ct_scope_close(s);
    }
    EXPECT(data_loader_status(dl) == CT_OK, "loader: %s", ct_last_error());
    return rows;
}

/* Every sample seen exactly once per epoch across the ranks (drop_last: the
 * first min(n, W * kept) positions of the epoch's order, kept = whole
 * batches of a rank's ceil(n / W) samples), shuffled or not, each epoch a
 * new order the same on every rank (set_epoch), as one process's order. */
static void coverage(int64_t n, int64_t bs, bool shuffle, bool drop_last)
{
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)n);
    float *f = malloc(sizeof(float) * (size_t)(4 * n));
    bool *odd = malloc(sizeof(bool) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        idx[i] = i;
        odd[i] = i % 2;
        for (int j = 0; j < 4; j++) f[4 * i + j] = (float)(4 * i + j);
    }
    Tensor *fields[3] = {tensor_from_data(idx, 1, (int64_t[]){n}, CT_I64, ct_cpu()),
                         tensor_from_data(f, 3, (int64_t[]){n, 2, 2}, CT_F32, ct_cpu()),
                         tensor_from_data(odd, 1, (int64_t[]){n}, CT_BOOL, ct_cpu())};
    Dataset *ds = data_tensor_dataset_create(3, fields);
    for (int i = 0; i < 3; i++) tensor_free(fields[i]);
    DataLoader *dl = runtime_prepare_dataloader(
        rt, ds,
        &(DataLoaderArgs){.batch_size = bs, .shuffle = shuffle, .drop_last = drop_last});
    EXPECT(dl, "runtime_prepare_dataloader: %s", ct_last_error());
    Sampler *one = shuffle ? data_sampler_random_create(n, runtime_base_seed(rt)) : NULL;
    int64_t kept = (n + W - 1) / W / bs * bs,
            expect = drop_last && W * kept < n ? W * kept : n;
    int64_t *seen = calloc((size_t)n, sizeof(int64_t)),
            *ref = malloc(sizeof(int64_t) * (size_t)n),
            *got = malloc(sizeof(int64_t) * (size_t)(n + W * bs)),
            *first = malloc(sizeof(int64_t) * (size_t)n);
    for (int64_t e = 0; dl && e < 3; e++) {
        memset(seen, 0, sizeof(int64_t) * (size_t)n);
        EXPECT(data_loader_set_epoch(dl, e) == CT_OK, "set_epoch: %s", ct_last_error());
        int64_t rows = gathered_epoch(dl, n, seen, got);
        for (int64_t i = 0; i < n; i++) ref[i] = i;
        if (one) data_sampler_fill(one, e, ref);
        int64_t wrong = 0;
        for (int64_t i = 0; i < n; i++) wrong += seen[ref[i]] != (i < expect);
        EXPECT(rows == expect && wrong == 0,
               "n=%lld bs=%lld shuffle=%d drop_last=%d epoch %lld: %lld rows gathered "
               "(%lld expected), %lld samples seen a wrong number of times",
               (long long)n, (long long)bs, shuffle, drop_last, (long long)e,
               (long long)rows, (long long)expect, (long long)wrong);
        if (e == 0)
            memcpy(first, got, sizeof(int64_t) * (size_t)(rows < n ? rows : n));
        else if (shuffle && n >= 8)
            EXPECT(memcmp(first, got, sizeof(int64_t) * (size_t)(rows < n ? rows : n)) !=
                       0,
                   "n=%lld: epoch %lld has epoch 0's order", (long long)n, (long long)e);
    }
    free(first);
    free(got);
    free(ref);
    free(seen);
    data_sampler_free(one);
    data_loader_free(dl);
    data_dataset_free(ds);
    free(idx);
    free(f);
    free(odd);
}

/* --------------------------------------------------------- accelerator */

static void accelerator(void)
{
    /* rows 0..9 hold their own index; batch 2 */
    int64_t idx[10];
    for (int i = 0; i < 10; i++) idx[i] = i;
    Tensor *ti = tensor_from_data(idx, 1, (int64_t[]){10}, CT_I64, ct_cpu());
    Dataset *ds = data_tensor_dataset_create(1, (Tensor *[]){ti});
    tensor_free(ti);
    DataLoader *dl =
        runtime_prepare_dataloader(rt, ds, &(DataLoaderArgs){.batch_size = 2});
    EXPECT(dl, "runtime_prepare_dataloader: %s", ct_last_error());
    DataBatch b;
    if (dl && data_loader_next(dl, &b)) {
        const int64_t *got = tensor_data(b.t[0]);
        EXPECT(b.size == 2 && got[0] == R && got[1] == R + W,
               "first batch %lld, %lld (rows %d and %d expected)", (long long)got[0],
               (long long)got[1], R, R + W);
    } else {
        EXPECT(false, "no first batch: %s", ct_last_error());
    }
    data_loader_free(dl);
    EXPECT(!runtime_prepare_dataloader(
               rt, ds, &(DataLoaderArgs){.batch_size = 2, .shard_world_size = 2}) &&
               strstr(ct_last_error(), "already shard"),
           "a sharded argument set: %s", ct_last_error());
    EXPECT(!runtime_prepare_dataloader(rt, ds, NULL) &&
               strstr(ct_last_error(), "NULL loader arguments"),
           "NULL args: %s", ct_last_error());
    data_dataset_free(ds);

    /* collectives inside an open scope: their temporaries are freed once
     * (the sanitizer build checks), the inputs stay intact */
    CtScope *sc = ct_scope_open();
    float v[2] = {(float)R, 1.0f};
    Tensor *t = tensor_from_data(v, 1, (int64_t[]){2}, CT_F32, ct_cpu());
    Tensor *all = runtime_gather(rt, t), *sum = runtime_reduce(rt, t, RUNTIME_REDUCE_SUM);
    Tensor *some = runtime_gather_for_metrics(rt, t, R == 0 ? 1 : 0);
    EXPECT(all && tensor_shape(all)[0] == 2 * W && sum &&
               fabs(tensor_item(tensor_select(sum, 0, 1)) - W) < 1e-6 && some &&
               tensor_shape(some)[0] == 2 * W - 1 &&
               ((const float *)tensor_data(t))[0] == R,
           "collectives in a scope: %s", ct_last_error());
    ct_scope_close(sc);

    /* loss_r = (r + 1) * L with the same L everywhere: the averaged
     * gradient is (W + 1) / 2 times L's */
    Module *m = test_mlp(7, FEATURES, HIDDEN, 1);
    EXPECT(runtime_prepare_model(rt, m) == CT_OK, "prepare: %s", ct_last_error());
    float xs[FEATURES] = {0.5f, -1.0f, 2.0f};
    CtScope *s = ct_scope_open();
    Tensor *x = tensor_from_data(xs, 2, (int64_t[]){1, FEATURES}, CT_F32, ct_cpu());
    tensor_backward(tensor_sum(nn_forward(m, x), 0, NULL, false), NULL);
    Tensor *g = nn_module_grad_block(m), *g0 = tensor_clone(g);
    nn_module_zero_grad(m);
    CtStatus st = runtime_backward(
        rt, m, tensor_mul_scalar(tensor_sum(nn_forward(m, x), 0, NULL, false), R + 1.0));
    EXPECT(st == CT_OK, "runtime_backward: %s", ct_last_error());
    const float *a = tensor_data(g), *a0 = tensor_data(g0);
    double worst = 0;
    for (int64_t i = 0; i < tensor_numel(g); i++)
        worst = fmax(worst, fabs(a[i] - 0.5 * (W + 1) * a0[i]));
    EXPECT(worst <= 1e-6, "averaged gradient off by %g", worst);
    EXPECT(runtime_backward(rt, m, NULL) != CT_OK, "a NULL loss succeeded");
    ct_scope_close(s);
    nn_module_free(m);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!test_begin()) return runtime_abort(NULL, ct_last_status());
    if (!strcmp(mode, "equivalence")) {
        for (int shuffle = 0; shuffle < 2; shuffle++) {
            equivalence(shuffle, 1, UPDATES / 2);
            equivalence(shuffle, 2, UPDATES);
            equivalence(shuffle, 3, 7); /* windows of 3, 3, 1 */
        }
    } else if (!strcmp(mode, "gather")) {
        for (int drop = 0; drop < 2; drop++) {
            gather(83, 8, drop);
            /* batches of one row: some rank's last batch is a duplicate only */
            gather(5, 1, drop);
            /* fewer samples than ranks: the order repeats */
            gather(1, 1, drop);
            gather(2, 4, drop);
            gather(13, 2, drop);
            gather(31, 8, drop);
        }
    } else if (!strcmp(mode, "coverage")) {
        const int64_t sizes[][2] = {{1, 1},  {2, 4},  {5, 2}, {12, 2},
                                    {13, 3}, {31, 4}, {83, 8}};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            for (int shuffle = 0; shuffle < 2; shuffle++)
                for (int drop = 0; drop < 2; drop++)
                    coverage(sizes[i][0], sizes[i][1], shuffle, drop);
        if (R == 0)
            printf("coverage W=%d: %zu sizes x shuffle x drop_last x 3 epochs checked\n",
                   W, sizeof sizes / sizeof sizes[0]);
    } else if (!strcmp(mode, "accelerator")) {
        accelerator();
    } else {
        fprintf(stderr, "usage: %s equivalence|gather|coverage|accelerator\n", argv[0]);
        failures++;
    }
    runtime_free(rt);
    return failures ? 1 : 0;
}
