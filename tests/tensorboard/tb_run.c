/* Trains a small linear regression with the TensorBoard callback and
 * writes, beside the event file, expected.tsv: every scalar the file should
 * hold ("tag\tstep\tvalue", value "*" for timing-dependent ones), taken
 * independently of the callback (a recording callback and the run
 * history). tb_read.py then reads the event file with TensorBoard's own
 * reader and compares. Usage: tb_run OUT_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrainer/callbacks.h"
#include "ctrainer/trainer.h"

#define EVERY 3

typedef struct Expect {
    Callback base;
    FILE *f;
    int64_t steps;
} Expect;

static CtStatus ex_step_end(Callback *cb, Trainer *t, const DataBatch *batch,
                            const TrainerBatchOutput *out, int64_t step)
{
    Expect *e = (Expect *)cb;
    if (++e->steps % EVERY) return CT_OK;
    fprintf(e->f, "train/loss\t%lld\t%.9g\n", (long long)e->steps,
            tensor_item(out->loss));
    fprintf(e->f, "train/lr\t%lld\t%.9g\n", (long long)e->steps,
            optim_get_lr(t->optimizer, 0));
    fprintf(e->f, "train/samples_per_sec\t%lld\t*\n", (long long)e->steps);
    return CT_OK;
}

static CtStatus ex_epoch_end(Callback *cb, Trainer *t)
{
    Expect *e = (Expect *)cb;
    int64_t epoch = run_history_current_epoch(trainer_run_history(t));
    fprintf(e->f, "epoch/lr\t%lld\t%.9g\n", (long long)epoch,
            optim_get_lr(t->optimizer, 0));
    fprintf(e->f, "epoch/samples_per_sec\t%lld\t*\n", (long long)epoch);
    return CT_OK;
}

static const CallbackVtable expect_vt = {.type = "Expect",
                                         .on_train_step_end = ex_step_end,
                                         .on_training_run_epoch_end = ex_epoch_end};

static Scheduler *step_lr(Trainer *t, Optimizer *o, void *user)
{
    return scheduler_step_lr(o, 4, 0.5);
}

static int fail(const char *what)
{
    fprintf(stderr, "tb_run: %s: %s\n", what, ct_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) return fprintf(stderr, "usage: tb_run OUT_DIR\n"), 2;
    char path[1024];
    snprintf(path, sizeof path, "%s/expected.tsv", argv[1]);
    Expect *ex = calloc(1, sizeof *ex);
    if (!ex || !(ex->f = fopen(path, "w"))) return fail("cannot write expected.tsv");
    ex->base.vt = &expect_vt;

    CtGenerator g = ct_generator(7, 0);
    Module *model = nn_linear(2, 1, true, &g);
    Optimizer *opt = optim_sgd_create(model, &(SgdArgs){.lr = 0.1});
    NnLoss *loss = nn_loss_mse(CT_REDUCTION_MEAN);
    float xs[40], ys[20];
    for (int i = 0; i < 20; i++) {
        xs[2 * i] = (float)((i % 5) * 0.3 - 0.6);
        xs[2 * i + 1] = (float)((i % 3) * 0.5 - 0.5);
        ys[i] = 1.5f * xs[2 * i] - 2.0f * xs[2 * i + 1] + 0.25f;
    }
    Tensor *x = tensor_from_data(xs, 2, (int64_t[]){20, 2}, CT_F32, ct_cpu());
    Tensor *y = tensor_from_data(ys, 2, (int64_t[]){20, 1}, CT_F32, ct_cpu());
    Dataset *train = data_tensor_dataset_create(2, (Tensor *[]){x, y});
    Dataset *eval = data_subset_create(train, 6, (int64_t[]){0, 3, 5, 9, 12, 17});
    snprintf(path, sizeof path, "%s/logs", argv[1]);
    Callback *cbs[] = {callback_tensorboard_create(&(TensorBoardArgs){
                           .log_dir = path, .log_every_n_steps = EVERY}),
                       &ex->base};
    Trainer *t = trainer_create(&(TrainerConfig){.model = model,
                                                 .loss = loss,
                                                 .optimizer = opt,
                                                 .callbacks = cbs,
                                                 .n_callbacks = 2});
    if (!t) return fail("trainer_create");
    CtStatus st = trainer_train(t, &(TrainArgs){.train_dataset = train,
                                                .eval_dataset = eval,
                                                .num_epochs = 3,
                                                .per_device_batch_size = 4,
                                                .create_scheduler_fn = step_lr});
    if (st != CT_OK) return fail("trainer_train");
    /* the epoch metrics: every value of the run history, one per epoch */
    RunHistory *h = trainer_run_history(t);
    for (int i = 0; i < run_history_num_metrics(h); i++) {
        const char *name = run_history_metric_name(h, i);
        int64_t n = 0;
        const double *v = run_history_values(h, name, &n);
        for (int64_t k = 0; k < n; k++)
            fprintf(ex->f, "epoch/%s\t%lld\t%.9g\n", name, (long long)k + 1, v[k]);
    }
    st = trainer_evaluate(t, &(EvalArgs){.dataset = eval, .per_device_batch_size = 4});
    if (st != CT_OK) return fail("trainer_evaluate");
    for (int i = 0; i < run_history_num_metrics(h); i++) {
        const char *name = run_history_metric_name(h, i);
        fprintf(ex->f, "evaluation/%s\t%lld\t%.9g\n", name,
                (long long)run_history_current_epoch(h), run_history_latest(h, name));
    }
    printf("event file %s\n", callback_tensorboard_path(callback_list_find(
                                  trainer_callbacks(t), "TensorBoard")));
    fclose(ex->f);
    trainer_free(t);
    data_dataset_free(eval);
    data_dataset_free(train);
    tensor_free(x);
    tensor_free(y);
    nn_loss_free(loss);
    optim_free(opt);
    nn_module_free(model);
    return 0;
}
