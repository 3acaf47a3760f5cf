/* The Trainer across processes, run under mpirun with 2 ranks:
 *
 *   mpi_trainer equivalence  2 ranks x batch B == 1 process x batch 2B after
 *                            20 updates (with and without accumulation)
 *   mpi_trainer stop         a stop requested on rank 1 stops both ranks at
 *                            the same step, in training and in evaluation
 *   mpi_trainer kill         rank 1 SIGKILLs itself mid-epoch (fault_driver.sh
 *                            checks that the run ends non-zero, quickly)
 *   mpi_trainer error        rank 1 fails with an error; the program ends the
 *                            run with runtime_abort
 *   mpi_trainer timeout      rank 1 stalls for 4 s; rank 0's collective gives
 *                            up after CTRAINER_COLLECTIVE_TIMEOUT and aborts
 *   mpi_trainer return       as error, but every rank just returns 1 from main
 *                            (no runtime_abort): rank 0 gives up after
 *                            CTRAINER_COLLECTIVE_TIMEOUT
 *
 * Each rank's data is its shard by hand: rows r, r + W, r + 2W, ... of one
 * table, so batch k of all ranks together is batch k of size W*B of the
 * whole table. Exit status 0 when every check passed on this rank. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrainer/ctrainer.h"
#include "mpi_test.h"

enum { FEATURES = 3, HIDDEN = 32, B = 4, UPDATES = 20 };

/* Row i of the table: x = sin(i + j), y = a fixed smooth function of x. */
static void row(int64_t i, float *x, float *y)
{
    for (int j = 0; j < FEATURES; j++) x[j] = (float)sin(0.7 * (double)i + j);
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

/* The shard as it is: no shuffling, no resharding by the default loader. */
static DataLoader *plain_loader(Trainer *t, int64_t bs, const TrainerLoaderArgs *a)
{
    return data_loader_create(t->user, &(DataLoaderArgs){.batch_size = bs});
}

/* A trainer over this rank's shard of `rows` table rows, with the MLP
 * initialised from `seed` and the given hooks (the plain loader added). */
typedef struct Run {
    Dataset *shard;
    Module *m;
    Optimizer *o;
    NnLoss *mse;
    Trainer *t;
} Run;

static Run run_open(int64_t rows, uint64_t seed, TrainerHooks hooks)
{
    Run r = {.shard = table(rows, R, W), .m = test_mlp(seed, FEATURES, HIDDEN, 1)};
    r.o = test_sgd(r.m);
    r.mse = nn_loss_mse(CT_REDUCTION_MEAN);
    hooks.create_train_dataloader = plain_loader;
    r.t = trainer_create(&(TrainerConfig){.model = r.m,
                                          .loss = r.mse,
                                          .optimizer = r.o,
                                          .runtime = rt,
                                          .user = r.shard,
                                          .hooks = hooks});
    return r;
}

static void run_close(Run *r)
{
    trainer_free(r->t);
    nn_loss_free(r->mse);
    optim_free(r->o);
    nn_module_free(r->m);
    data_dataset_free(r->shard);
}

/* --------------------------------------------------------- equivalence */

/* One process, batch W*B, accumulation k, written out by hand: the
 * reference. Returns the sample-weighted mean loss of the epoch. */
static double reference_run(Module *m, int64_t n, int64_t k)
{
    Dataset *ds = table(n, 0, 1);
    DataLoader *dl = data_loader_create(ds, &(DataLoaderArgs){.batch_size = W * B});
    Optimizer *o = test_sgd(m);
    NnLoss *mse = nn_loss_mse(CT_REDUCTION_MEAN);
    nn_module_pack(m);
    double total = test_reference_epoch(m, o, mse, dl, k);
    nn_loss_free(mse);
    optim_free(o);
    data_loader_free(dl);
    data_dataset_free(ds);
    return total / (double)n;
}

static void equivalence(int64_t k)
{
    int64_t n = (int64_t)W * B * UPDATES * k;
    /* different initial weights per rank: prepare broadcasts rank 0's */
    Run run = run_open(n, 7 + 100 * (uint64_t)R, (TrainerHooks){0});
    Trainer *t = run.t;
    Module *m = run.m;
    RuntimeCommStats before = runtime_comm_stats(rt);
    CtStatus st = trainer_train(t, &(TrainArgs){.train_dataset = run.shard,
                                                .num_epochs = 1,
                                                .per_device_batch_size = B,
                                                .gradient_accumulation_steps = k});
    /* one gradient all-reduce per update, none per micro-batch: besides them
     * only the broadcast at prepare and 8-byte stop flags and loss totals
     * (reducing every micro-batch would move k times the gradient bytes) */
    int64_t moved = runtime_comm_stats(rt).bytes - before.bytes;
    int64_t grad_bytes = tensor_numel(nn_module_grad_block(m)) * 4;
    EXPECT(moved <= (UPDATES + 1) * grad_bytes + UPDATES * k * 64 + 4096,
           "k=%lld: %lld bytes moved for %d updates of %lld gradient bytes", (long long)k,
           (long long)moved, UPDATES, (long long)grad_bytes);
    EXPECT(st == CT_OK, "trainer_train: %s", ct_last_error());
    EXPECT(trainer_global_step(t) == UPDATES, "k=%lld: %lld updates", (long long)k,
           (long long)trainer_global_step(t));
    double loss = run_history_latest(trainer_run_history(t), "train_loss_epoch");
    double lo = loss, hi = loss;
    runtime_reduce_f64(rt, &lo, 1, RUNTIME_REDUCE_MIN);
    runtime_reduce_f64(rt, &hi, 1, RUNTIME_REDUCE_MAX);
    EXPECT(lo == hi, "k=%lld: train loss differs between ranks (%g .. %g)", (long long)k,
           lo, hi);
    /* every rank holds rank 0's parameters */
    Tensor *p = nn_module_param_block(m);
    Tensor *p0 = tensor_clone(p);
    runtime_broadcast(rt, p0, 0);
    const float *a = tensor_data(p), *a0 = tensor_data(p0);
    for (int64_t i = 0; i < tensor_numel(p); i++)
        EXPECT(fabsf(a[i] - a0[i]) <= 1e-6f,
               "k=%lld: parameter %lld differs from rank 0's", (long long)k,
               (long long)i);
    if (R == 0) {
        Module *ref = test_mlp(7, FEATURES, HIDDEN, 1);
        double ref_loss = reference_run(ref, n, k);
        const float *r = tensor_data(nn_module_param_block(ref));
        double worst = 0;
        for (int64_t i = 0; i < tensor_numel(p); i++)
            worst = fmax(worst, fabs((double)a[i] - r[i]));
        EXPECT(worst <= 1e-5, "k=%lld: parameters differ from one process by %g",
               (long long)k, worst);
        EXPECT(fabs(loss - ref_loss) <= 1e-5 * fabs(ref_loss),
               "k=%lld: train loss %.9g, one process %.9g", (long long)k, loss, ref_loss);
        printf("equivalence k=%lld: max |param - single-process param| = %.3g, loss %.6f "
               "vs %.6f\n",
               (long long)k, worst, loss, ref_loss);
        nn_module_free(ref);
    }
    tensor_free(p0);
    run_close(&run);
}

/* ---------------------------------------------------- stop and faults */

static const char *g_mode;

/* The default loss, plus the mode's action on rank 1 at epoch step 5. */
static CtStatus loss_with_action(Trainer *t, const DataBatch *b, TrainerBatchOutput *out)
{
    if (R == 1 && trainer_epoch_step(t) == 5) {
        if (!strcmp(g_mode, "stop")) trainer_stop(t, "rank 1 asked to stop");
        if (!strcmp(g_mode, "kill")) raise(SIGKILL);
        if (!strcmp(g_mode, "timeout")) sleep(4);
        if (!strcmp(g_mode, "error") || !strcmp(g_mode, "return"))
            return ct_error(CT_ERR_INVALID, "injected failure at step 5");
    }
    return trainer_default_calculate_train_batch_loss(t, b, out);
}

/* Trains 40 steps with the mode's action; the status of trainer_train. */
static CtStatus run_with_action(const char *mode)
{
    g_mode = mode;
    Run run = run_open((int64_t)W * B * 40, 7,
                       (TrainerHooks){.calculate_train_batch_loss = loss_with_action});
    Trainer *t = run.t;
    CtStatus st = trainer_train(t, &(TrainArgs){.train_dataset = run.shard,
                                                .num_epochs = 2,
                                                .per_device_batch_size = B});
    if (st == CT_OK) {
        /* the stop came at rank 1's step 5, before its backward: 5 updates */
        double step = (double)trainer_global_step(t), lo = step, hi = step;
        runtime_reduce_f64(rt, &lo, 1, RUNTIME_REDUCE_MIN);
        runtime_reduce_f64(rt, &hi, 1, RUNTIME_REDUCE_MAX);
        EXPECT(lo == 5 && hi == 5, "stopped at global steps %g .. %g, 5 expected", lo,
               hi);
        const char *want =
            R == 1 ? "rank 1 asked to stop" : "stop requested by another process";
        EXPECT(!strcmp(trainer_stop_reason(t), want), "stop reason '%s'",
               trainer_stop_reason(t));
    }
    run_close(&run);
    return st;
}

/* The default eval loss, its outputs gathered every batch (the metrics
 * pattern of trainer.h); rank 1 asks to stop at its eval step 1. */
static CtStatus eval_loss_gathered(Trainer *t, const DataBatch *b,
                                   TrainerBatchOutput *out)
{
    CtStatus st = trainer_default_calculate_eval_batch_loss(t, b, out);
    if (st != CT_OK || !trainer_gather_for_metrics(t, out->model_outputs))
        return ct_last_status();
    if (R == 1 && trainer_epoch_step(t) == 1) trainer_stop(t, "rank 1 asked to stop");
    return CT_OK;
}

/* A stop asked on one rank during evaluation stops both ranks there, none
 * left waiting in the other's per-batch gather. */
static void eval_stop(void)
{
    Run run = run_open((int64_t)W * B * 4, 7,
                       (TrainerHooks){.calculate_eval_batch_loss = eval_loss_gathered});
    Dataset *eval = table((int64_t)W * B * 6, 0, 1);
    CtStatus st = trainer_train(run.t, &(TrainArgs){.train_dataset = run.shard,
                                                    .eval_dataset = eval,
                                                    .num_epochs = 2,
                                                    .per_device_batch_size = B});
    EXPECT(st == CT_OK, "eval stop: %s", ct_last_error());
    const char *want =
        R == 1 ? "rank 1 asked to stop" : "stop requested by another process";
    EXPECT(!strcmp(trainer_stop_reason(run.t), want), "eval stop reason '%s'",
           trainer_stop_reason(run.t));
    EXPECT(trainer_global_step(run.t) == 4, "eval stop after %lld updates, 4 expected",
           (long long)trainer_global_step(run.t));
    data_dataset_free(eval);
    run_close(&run);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!test_begin()) return runtime_abort(NULL, ct_last_status());
    if (!strcmp(mode, "equivalence")) {
        equivalence(1);
        equivalence(2);
    } else if (!strcmp(mode, "stop") || !strcmp(mode, "kill") || !strcmp(mode, "error") ||
               !strcmp(mode, "timeout") || !strcmp(mode, "return")) {
        CtStatus st = run_with_action(mode);
        if (st != CT_OK && !strcmp(mode, "return")) {
            fprintf(stderr, "rank %d: %s\n", R, ct_last_error());
            runtime_free(rt);
            return 1;
        }
        if (st != CT_OK) return runtime_abort(rt, st);
        EXPECT(!strcmp(mode, "stop"), "mode %s: the run should not have ended well",
               mode);
        if (!strcmp(mode, "stop")) eval_stop();
    } else {
        fprintf(stderr, "usage: %s equivalence|stop|kill|error|timeout|return\n",
                argv[0]);
        failures++;
    }
    runtime_free(rt);
    return failures ? 1 : 0;
}
