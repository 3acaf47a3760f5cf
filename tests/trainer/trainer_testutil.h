/* Shared by the trainer suites: a recording trainer (every hook and event
 * appended to a trace) on a tiny linear-regression problem. */
#ifndef CTRAINER_TRAINER_TESTUTIL_H
#define CTRAINER_TRAINER_TESTUTIL_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrainer/ctrainer.h"
#include "testutil.h"

/* not every suite uses every helper */
#pragma GCC diagnostic ignored "-Wunused-function"

typedef struct RecTrainer {
    Trainer base;
    char trace[32768];
    size_t len;
    int n_clip;
    /* stop requests: at hook/event `stop_at` in epoch `stop_epoch` and, for
     * step-level names, at step `stop_step` (-1: any) */
    const char *stop_at;
    int64_t stop_epoch, stop_step;
    bool record;
} RecTrainer;

static void rec(Trainer *t, const char *fmt, ...)
{
    RecTrainer *r = (RecTrainer *)t;
    if (!r->record) return;
    va_list ap;
    va_start(ap, fmt);
    if (r->len) r->trace[r->len++] = ' ';
    int n = vsnprintf(r->trace + r->len, sizeof r->trace - r->len, fmt, ap);
    va_end(ap);
    r->len += (size_t)n;
    ck_assert_uint_lt(r->len, sizeof r->trace - 64);
}

static void maybe_stop(Trainer *t, const char *name)
{
    RecTrainer *r = (RecTrainer *)t;
    if (!r->stop_at || strcmp(r->stop_at, name) != 0) return;
    if (run_history_current_epoch(trainer_run_history(t)) != r->stop_epoch) return;
    if (r->stop_step >= 0 && trainer_epoch_step(t) != r->stop_step) return;
    trainer_stop(t, name);
}

#define REC_HOOK(name)                                                                   \
    static CtStatus rec_##name(Trainer *t)                                               \
    {                                                                                    \
        rec(t, "H:" #name);                                                              \
        maybe_stop(t, "H:" #name);                                                       \
        return trainer_default_##name(t);                                                \
    }
REC_HOOK(training_run_start)
REC_HOOK(train_epoch_start)
REC_HOOK(optimizer_step)
REC_HOOK(scheduler_step)
REC_HOOK(optimizer_zero_grad)
REC_HOOK(train_epoch_end)
REC_HOOK(eval_epoch_start)
REC_HOOK(eval_epoch_end)
REC_HOOK(training_run_epoch_end)
REC_HOOK(training_run_end)
REC_HOOK(evaluation_run_start)
REC_HOOK(evaluation_run_end)

static CtStatus rec_clip_gradients(Trainer *t)
{
    ((RecTrainer *)t)->n_clip++;
    rec(t, "H:clip_gradients");
    return trainer_default_clip_gradients(t);
}
static CtStatus rec_backward_step(Trainer *t, Tensor *loss)
{
    rec(t, "H:backward_step");
    maybe_stop(t, "H:backward_step");
    return trainer_default_backward_step(t, loss);
}
static CtStatus rec_calc_train(Trainer *t, const DataBatch *b, TrainerBatchOutput *o)
{
    rec(t, "H:calculate_train_batch_loss");
    maybe_stop(t, "H:calculate_train_batch_loss");
    return trainer_default_calculate_train_batch_loss(t, b, o);
}
static CtStatus rec_calc_eval(Trainer *t, const DataBatch *b, TrainerBatchOutput *o)
{
    rec(t, "H:calculate_eval_batch_loss");
    maybe_stop(t, "H:calculate_eval_batch_loss");
    return trainer_default_calculate_eval_batch_loss(t, b, o);
}
static DataLoader *rec_create_train_dl(Trainer *t, int64_t bs, const TrainerLoaderArgs *u)
{
    rec(t, "H:create_train_dataloader");
    return trainer_default_create_train_dataloader(t, bs, u);
}
static DataLoaderArgs rec_train_dl_args(Trainer *t, int64_t bs)
{
    rec(t, "H:get_default_train_dl_args");
    return trainer_default_get_default_train_dl_args(t, bs);
}
static DataLoader *rec_create_eval_dl(Trainer *t, int64_t bs, const TrainerLoaderArgs *u)
{
    rec(t, "H:create_eval_dataloader");
    return trainer_default_create_eval_dataloader(t, bs, u);
}
static DataLoaderArgs rec_eval_dl_args(Trainer *t, int64_t bs)
{
    rec(t, "H:get_default_eval_dl_args");
    return trainer_default_get_default_eval_dl_args(t, bs);
}
static Scheduler *rec_create_scheduler(Trainer *t)
{
    rec(t, "H:create_scheduler");
    return trainer_default_create_scheduler(t);
}

static const TrainerHooks rec_hooks = {
    .create_train_dataloader = rec_create_train_dl,
    .get_default_train_dl_args = rec_train_dl_args,
    .create_eval_dataloader = rec_create_eval_dl,
    .get_default_eval_dl_args = rec_eval_dl_args,
    .create_scheduler = rec_create_scheduler,
    .training_run_start = rec_training_run_start,
    .train_epoch_start = rec_train_epoch_start,
    .calculate_train_batch_loss = rec_calc_train,
    .backward_step = rec_backward_step,
    .clip_gradients = rec_clip_gradients,
    .optimizer_step = rec_optimizer_step,
    .scheduler_step = rec_scheduler_step,
    .optimizer_zero_grad = rec_optimizer_zero_grad,
    .train_epoch_end = rec_train_epoch_end,
    .eval_epoch_start = rec_eval_epoch_start,
    .calculate_eval_batch_loss = rec_calc_eval,
    .eval_epoch_end = rec_eval_epoch_end,
    .training_run_epoch_end = rec_training_run_epoch_end,
    .training_run_end = rec_training_run_end,
    .evaluation_run_start = rec_evaluation_run_start,
    .evaluation_run_end = rec_evaluation_run_end,
};

/* ------------------------------------------------- the recording callback */

#define REC_EVENT(name)                                                                  \
    static CtStatus cb_##name(Callback *cb, Trainer *t)                                  \
    {                                                                                    \
        rec(t, "E:" #name);                                                              \
        maybe_stop(t, "E:" #name);                                                       \
        return CT_OK;                                                                    \
    }
REC_EVENT(on_init_end)
REC_EVENT(on_training_run_start)
REC_EVENT(on_train_epoch_start)
REC_EVENT(on_train_step_start)
REC_EVENT(on_train_epoch_end)
REC_EVENT(on_eval_step_start)
REC_EVENT(on_training_run_epoch_end)
REC_EVENT(on_training_run_end)
REC_EVENT(on_evaluation_run_start)
REC_EVENT(on_evaluation_run_end)
REC_EVENT(on_stop_training_error)

static CtStatus cb_on_train_step_end(Callback *cb, Trainer *t, const DataBatch *b,
                                     const TrainerBatchOutput *o, int64_t step)
{
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(o);
    ck_assert_ptr_nonnull(o->loss);
    rec(t, "E:on_train_step_end:%lld", (long long)step);
    maybe_stop(t, "E:on_train_step_end");
    return CT_OK;
}
static CtStatus cb_on_eval_step_end(Callback *cb, Trainer *t, const DataBatch *b,
                                    const TrainerBatchOutput *o, int64_t step)
{
    ck_assert_ptr_nonnull(o);
    rec(t, "E:on_eval_step_end:%lld", (long long)step);
    maybe_stop(t, "E:on_eval_step_end");
    return CT_OK;
}
static CtStatus cb_on_eval_epoch_start(Callback *cb, Trainer *t, bool inter)
{
    rec(t, inter ? "E:on_eval_epoch_start:i" : "E:on_eval_epoch_start");
    maybe_stop(t, "E:on_eval_epoch_start");
    return CT_OK;
}
static CtStatus cb_on_eval_epoch_end(Callback *cb, Trainer *t, bool inter)
{
    rec(t, inter ? "E:on_eval_epoch_end:i" : "E:on_eval_epoch_end");
    maybe_stop(t, "E:on_eval_epoch_end");
    return CT_OK;
}

static const CallbackVtable recorder_vt = {
    .type = "Recorder",
    .on_init_end = cb_on_init_end,
    .on_training_run_start = cb_on_training_run_start,
    .on_train_epoch_start = cb_on_train_epoch_start,
    .on_train_step_start = cb_on_train_step_start,
    .on_train_step_end = cb_on_train_step_end,
    .on_train_epoch_end = cb_on_train_epoch_end,
    .on_eval_epoch_start = cb_on_eval_epoch_start,
    .on_eval_step_start = cb_on_eval_step_start,
    .on_eval_step_end = cb_on_eval_step_end,
    .on_eval_epoch_end = cb_on_eval_epoch_end,
    .on_training_run_epoch_end = cb_on_training_run_epoch_end,
    .on_training_run_end = cb_on_training_run_end,
    .on_evaluation_run_start = cb_on_evaluation_run_start,
    .on_evaluation_run_end = cb_on_evaluation_run_end,
    .on_stop_training_error = cb_on_stop_training_error,
};

static Callback *recorder_create(void)
{
    Callback *cb = calloc(1, sizeof *cb);
    cb->vt = &recorder_vt;
    return cb;
}

/* ------------------------------------------------------------ the problem */

/* n samples: x_i = (i/n, 1 - 2i/n) and y_i = 3 x_i0 - x_i1 + 0.5 + sin(i). */
static Dataset *regression_dataset(int64_t n)
{
    double *x = malloc((size_t)n * 2 * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    for (int64_t i = 0; i < n; i++) {
        x[2 * i] = (double)i / (double)n;
        x[2 * i + 1] = 1.0 - 2.0 * (double)i / (double)n;
        y[i] = 3 * x[2 * i] - x[2 * i + 1] + 0.5 + sin((double)i);
    }
    Tensor *tx = tu_tensor(CT_F32, 2, (int64_t[]){n, 2}, x);
    Tensor *ty = tu_tensor(CT_F32, 2, (int64_t[]){n, 1}, y);
    Dataset *ds = data_tensor_dataset_create(2, (Tensor *[]){tx, ty});
    tensor_free(tx);
    tensor_free(ty);
    free(x);
    free(y);
    return ds;
}

typedef struct Fixture {
    RecTrainer rt;
    Module *model;
    Optimizer *opt;
    NnLoss *loss;
} Fixture;

/* A recording trainer over Linear(2, 1) with SGD(lr) and MSE. */
static void fixture_init(Fixture *f, double lr, bool record)
{
    memset(f, 0, sizeof *f);
    CtGenerator g = ct_generator(7, 0);
    f->model = nn_linear(2, 1, true, &g);
    f->opt = optim_sgd_create(f->model, &(SgdArgs){.lr = lr});
    f->loss = nn_loss_mse(CT_REDUCTION_MEAN);
    ck_assert_ptr_nonnull(f->opt);
    f->rt.record = record;
    f->rt.stop_step = -1;
    CtStatus st =
        trainer_init(&f->rt.base, &(TrainerConfig){
                                      .model = f->model,
                                      .loss = f->loss,
                                      .optimizer = f->opt,
                                      .callbacks = (Callback *[]){recorder_create()},
                                      .n_callbacks = 1,
                                      .hooks = rec_hooks,
                                  });
    ck_assert_int_eq(st, CT_OK);
}

static void fixture_free(Fixture *f)
{
    trainer_deinit(&f->rt.base);
    optim_free(f->opt);
    nn_loss_free(f->loss);
    nn_module_free(f->model);
}

/* The mean MSE of the model over ds, computed directly. */
static double direct_mse(Module *m, const Dataset *ds)
{
    DataLoader *dl = data_loader_create(ds, &(DataLoaderArgs){.batch_size = 1000});
    DataBatch b;
    ck_assert(data_loader_next(dl, &b));
    CtScope *s = ct_scope_open();
    bool g = ct_set_grad_enabled(false);
    double v =
        tensor_item(tensor_mse_loss(nn_forward(m, b.t[0]), b.t[1], CT_REDUCTION_MEAN));
    ct_set_grad_enabled(g);
    ct_scope_close(s);
    data_loader_free(dl);
    return v;
}

/* Stops the run at the start of the step after update `at`. */
typedef struct Stopper {
    Callback base;
    int64_t at;
} Stopper;

static CtStatus stopper_step_start(Callback *cb, Trainer *t)
{
    if (trainer_global_step(t) == ((Stopper *)cb)->at) trainer_stop(t, "test stop");
    return CT_OK;
}
static const CallbackVtable stopper_vt = {.type = "Stopper",
                                          .on_train_step_start = stopper_step_start};

static Callback *stopper(int64_t at)
{
    Stopper *s = calloc(1, sizeof *s);
    s->base.vt = &stopper_vt;
    s->at = at;
    return &s->base;
}

#endif
