/* Built-in callbacks, through small real trainings: a linear regression on
 * 16 samples (8 batches of 2) with an 8-sample eval set (4 batches), CPU. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrainer/callbacks.h"
#include "ctrainer/trainer.h"
#include "testutil.h"

/* ------------------------------------------------------------ fixture */

typedef struct Fx {
    Module *model;
    Optimizer *opt;
    NnLoss *loss;
    Tensor *x, *y, *ex, *ey;
    Dataset *train, *eval;
    Trainer *t;
} Fx;

static void fx_init(Fx *f)
{
    memset(f, 0, sizeof *f);
    CtGenerator g = ct_generator(7, 0);
    f->model = nn_linear(2, 1, true, &g);
    ck_assert_ptr_nonnull(f->model);
    f->opt = optim_sgd_create(f->model, &(SgdArgs){.lr = 0.1});
    f->loss = nn_loss_mse(CT_REDUCTION_MEAN);
    double xs[32], ys[16], exs[16], eys[8];
    for (int i = 0; i < 16; i++) {
        xs[2 * i] = (i % 5) * 0.3 - 0.6;
        xs[2 * i + 1] = (i % 3) * 0.5 - 0.5;
        ys[i] = 1.5 * xs[2 * i] - 2.0 * xs[2 * i + 1] + 0.25;
    }
    for (int i = 0; i < 8; i++) {
        exs[2 * i] = xs[2 * i + 1];
        exs[2 * i + 1] = xs[2 * i];
        eys[i] = 1.5 * exs[2 * i] - 2.0 * exs[2 * i + 1] + 0.25;
    }
    f->x = tu_tensor(CT_F32, 2, (int64_t[]){16, 2}, xs);
    f->y = tu_tensor(CT_F32, 2, (int64_t[]){16, 1}, ys);
    f->ex = tu_tensor(CT_F32, 2, (int64_t[]){8, 2}, exs);
    f->ey = tu_tensor(CT_F32, 2, (int64_t[]){8, 1}, eys);
    f->train = data_tensor_dataset_create(2, (Tensor *[]){f->x, f->y});
    f->eval = data_tensor_dataset_create(2, (Tensor *[]){f->ex, f->ey});
    ck_assert_ptr_nonnull(f->train);
    ck_assert_ptr_nonnull(f->eval);
}

static void fx_trainer(Fx *f, int n, Callback **cbs)
{
    f->t = trainer_create(&(TrainerConfig){.model = f->model,
                                           .loss = f->loss,
                                           .optimizer = f->opt,
                                           .callbacks = cbs,
                                           .n_callbacks = n,
                                           .no_callbacks = n == 0});
    ck_assert_msg(f->t != NULL, "%s", ct_last_error());
}

static CtStatus fx_train(Fx *f, int64_t epochs, bool with_eval)
{
    return trainer_train(f->t, &(TrainArgs){.train_dataset = f->train,
                                            .eval_dataset = with_eval ? f->eval : NULL,
                                            .num_epochs = epochs,
                                            .per_device_batch_size = 2,
                                            .train_dataloader_args = &(TrainerLoaderArgs){
                                                .shuffle = TRAINER_NO}});
}

static void fx_free(Fx *f)
{
    trainer_free(f->t);
    data_dataset_free(f->train);
    data_dataset_free(f->eval);
    tensor_free(f->x);
    tensor_free(f->y);
    tensor_free(f->ex);
    tensor_free(f->ey);
    nn_loss_free(f->loss);
    optim_free(f->opt);
    nn_module_free(f->model);
}

/* The model's 3 values (weight[0], weight[1], bias). */
static void params_of(Module *m, double out[3])
{
    float w[2], b[1];
    ck_assert_int_eq(tensor_copy_to_host(nn_module_get(m, "weight"), w, CT_F32), CT_OK);
    ck_assert_int_eq(tensor_copy_to_host(nn_module_get(m, "bias"), b, CT_F32), CT_OK);
    out[0] = w[0];
    out[1] = w[1];
    out[2] = b[0];
}

/* ------------------------------------------------- a recording callback */

#define MAX_REC 64

typedef struct Recorder {
    Callback base;
    const double *script; /* "score" per epoch, recorded at on_eval_epoch_end
                             (or train epoch end without eval) */
    int n_script;
    int train_epochs, train_steps, eval_steps, run_ends, stops;
    int train_steps_in_epoch[8];
    int64_t intermediate_at[MAX_REC]; /* train step index at each intermediate eval */
    int n_intermediate;
    bool always_training; /* model in train mode at every train step start */
    double start_params[3];
    double epoch_params[MAX_REC][3]; /* params at each train epoch end */
    double step_params[MAX_REC][3];  /* params at each train step start */
    int n_epoch_params, n_step_params;
} Recorder;

static CtStatus rec_run_start(Callback *cb, Trainer *t)
{
    Recorder *r = (Recorder *)cb;
    r->always_training = true;
    params_of(t->model, r->start_params);
    return CT_OK;
}

static CtStatus rec_epoch_start(Callback *cb, Trainer *t)
{
    ((Recorder *)cb)->train_epochs++;
    return CT_OK;
}

static CtStatus rec_step_start(Callback *cb, Trainer *t)
{
    Recorder *r = (Recorder *)cb;
    if (!t->model->training) r->always_training = false;
    if (r->n_step_params < MAX_REC)
        params_of(t->model, r->step_params[r->n_step_params++]);
    return CT_OK;
}

static CtStatus rec_step_end(Callback *cb, Trainer *t, const DataBatch *b,
                             const TrainerBatchOutput *out, int64_t step)
{
    Recorder *r = (Recorder *)cb;
    r->train_steps++;
    int64_t e = run_history_current_epoch(trainer_run_history(t));
    if (e >= 1 && e <= 8) r->train_steps_in_epoch[e - 1]++;
    return CT_OK;
}

static CtStatus record_score(Recorder *r, Trainer *t)
{
    int64_t e = run_history_current_epoch(trainer_run_history(t));
    if (!r->script || e > r->n_script) return CT_OK;
    return run_history_update(trainer_run_history(t), "score", r->script[e - 1]);
}

static CtStatus rec_train_epoch_end(Callback *cb, Trainer *t)
{
    Recorder *r = (Recorder *)cb;
    if (r->n_epoch_params < MAX_REC)
        params_of(t->model, r->epoch_params[r->n_epoch_params++]);
    if (!trainer_eval_dataloader(t)) return record_score(r, t);
    return CT_OK;
}

static CtStatus rec_eval_start(Callback *cb, Trainer *t, bool is_intermediate)
{
    Recorder *r = (Recorder *)cb;
    if (is_intermediate && r->n_intermediate < MAX_REC)
        r->intermediate_at[r->n_intermediate++] = r->train_steps - 1;
    return CT_OK;
}

static CtStatus rec_eval_step_end(Callback *cb, Trainer *t, const DataBatch *b,
                                  const TrainerBatchOutput *out, int64_t step)
{
    ((Recorder *)cb)->eval_steps++;
    return CT_OK;
}

static CtStatus rec_eval_end(Callback *cb, Trainer *t, bool is_intermediate)
{
    return is_intermediate ? CT_OK : record_score((Recorder *)cb, t);
}

static CtStatus rec_run_end(Callback *cb, Trainer *t)
{
    ((Recorder *)cb)->run_ends++;
    return CT_OK;
}

static CtStatus rec_stop(Callback *cb, Trainer *t)
{
    ((Recorder *)cb)->stops++;
    return CT_OK;
}

static const CallbackVtable recorder_vt = {
    .type = "Recorder",
    .on_training_run_start = rec_run_start,
    .on_train_epoch_start = rec_epoch_start,
    .on_train_step_start = rec_step_start,
    .on_train_step_end = rec_step_end,
    .on_train_epoch_end = rec_train_epoch_end,
    .on_eval_epoch_start = rec_eval_start,
    .on_eval_step_end = rec_eval_step_end,
    .on_eval_epoch_end = rec_eval_end,
    .on_training_run_end = rec_run_end,
    .on_evaluation_run_end = rec_run_end,
    .on_stop_training_error = rec_stop,
};

static Recorder *recorder(const double *script, int n)
{
    Recorder *r = calloc(1, sizeof *r);
    r->base.vt = &recorder_vt;
    r->script = script;
    r->n_script = n;
    return r;
}

/* ------------------------------------------------------ EarlyStopping */

START_TEST(test_early_stopping)
{
    /* best 1 -> 0.5 (improved by 0.5: reset) -> 0.495 (better, but within
     * the 0.01 threshold: counter 1, best stays 0.5) -> 0.6 (counter 2 =
     * patience: stop after epoch 4) */
    static const double script[] = {1.0, 0.5, 0.495, 0.6, 0.1, 0.05};
    Fx f;
    fx_init(&f);
    Recorder *r = recorder(script, 6);
    Callback *es = callback_early_stopping_create(
        &(EarlyStoppingArgs){.patience = 2, .watch_metric = "score"});
    fx_trainer(&f, 2, (Callback *[]){&r->base, es});
    ck_assert_int_eq(fx_train(&f, 6, true), CT_OK);
    ck_assert_int_eq(r->train_epochs, 4);
    ck_assert_int_eq(r->stops, 1);
    ck_assert_int_eq(r->run_ends, 1);
    ck_assert_int_eq(callback_early_stopping_counter(es), 2);
    ck_assert_double_eq(callback_early_stopping_best(es), 0.5);
    ck_assert_ptr_nonnull(strstr(trainer_stop_reason(f.t), "score"));
    /* the stopped epoch is not counted as finished */
    ck_assert_int_eq(run_history_current_epoch(trainer_run_history(f.t)), 4);
    fx_free(&f);
}
END_TEST

START_TEST(test_early_stopping_max_and_any_improvement)
{
    /* greater is better, any strict improvement resets: 1, 1.001 (reset),
     * 1.001 (equal: counter 1), 0.9 (counter 2 = patience: stop at epoch 4) */
    static const double script[] = {1.0, 1.001, 1.001, 0.9, 2.0};
    Fx f;
    fx_init(&f);
    Recorder *r = recorder(script, 5);
    Callback *es = callback_early_stopping_create(
        &(EarlyStoppingArgs){.patience = 2,
                             .watch_metric = "score",
                             .greater_is_better = true,
                             .threshold = EARLY_STOPPING_ANY_IMPROVEMENT});
    fx_trainer(&f, 2, (Callback *[]){&r->base, es});
    ck_assert_int_eq(fx_train(&f, 5, false), CT_OK);
    ck_assert_int_eq(r->train_epochs, 4);
    ck_assert_double_eq(callback_early_stopping_best(es), 1.001);
    fx_free(&f);

    /* an unknown metric is an error naming it */
    fx_init(&f);
    fx_trainer(&f, 1,
               (Callback *[]){callback_early_stopping_create(
                   &(EarlyStoppingArgs){.watch_metric = "nope"})});
    tu_assert_error(fx_train(&f, 2, true), "'nope'");
    fx_free(&f);
}
END_TEST

/* A NaN metric never improves: NaN every epoch stops after patience more
 * epochs; a value after a NaN first one is an improvement. */
START_TEST(test_early_stopping_nan_metric)
{
    static const double nans[] = {NAN, NAN, NAN, NAN, NAN, NAN};
    static const double nan_first[] = {NAN, 1.0, NAN, 0.5, NAN, NAN};
    const double *scripts[2] = {nans, nan_first};
    const int epochs[2] = {3, 6}, counters[2] = {2, 2};
    for (int i = 0; i < 2; i++) {
        Fx f;
        fx_init(&f);
        Recorder *r = recorder(scripts[i], 6);
        Callback *es = callback_early_stopping_create(
            &(EarlyStoppingArgs){.patience = 2, .watch_metric = "score"});
        fx_trainer(&f, 2, (Callback *[]){&r->base, es});
        ck_assert_int_eq(fx_train(&f, 6, true), CT_OK);
        ck_assert_int_eq(r->train_epochs, epochs[i]);
        ck_assert_int_eq(callback_early_stopping_counter(es), counters[i]);
        fx_free(&f);
    }
}
END_TEST

/* ------------------------------------------------------ SaveBestModel */

START_TEST(test_save_best_model)
{
    char dir[] = "/tmp/ct_cb_best_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256], opt_path[256];
    snprintf(path, sizeof path, "%s/best.safetensors", dir);
    snprintf(opt_path, sizeof opt_path, "%s/best.optimizer.safetensors", dir);
    /* improvements at epochs 1, 2 and 4 */
    static const double script[] = {3.0, 2.0, 2.5, 1.0, 1.5};
    Fx f;
    fx_init(&f);
    Recorder *r = recorder(script, 5);
    Callback *sb = callback_save_best_model_create(
        &(SaveBestModelArgs){.save_path = path, .watch_metric = "score"});
    fx_trainer(&f, 2, (Callback *[]){&r->base, sb});
    ck_assert_int_eq(fx_train(&f, 5, true), CT_OK);
    ck_assert_int_eq(callback_save_best_model_num_saves(sb), 3);
    ck_assert_double_eq(callback_save_best_model_best(sb), 1.0);
    /* reloaded at the end: the weights of epoch 4, not of epoch 5 */
    double now[3];
    params_of(f.model, now);
    ck_assert_int_eq(r->n_epoch_params, 5);
    double moved = 0;
    for (int i = 0; i < 3; i++) {
        ck_assert_double_eq(now[i], r->epoch_params[3][i]);
        moved += fabs(r->epoch_params[4][i] - r->epoch_params[3][i]);
    }
    ck_assert(moved > 0); /* epoch 5 did change the weights */
    ck_assert_int_eq(access(opt_path, F_OK), 0);
    /* the metadata names the watched metric on every save (the last: epoch 4) */
    FILE *fp = fopen(path, "rb");
    ck_assert_ptr_nonnull(fp);
    unsigned char len8[8];
    ck_assert_int_eq(fread(len8, 1, 8, fp), 8);
    size_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen * 256 + len8[i];
    char *header = calloc(hlen + 1, 1);
    ck_assert_int_eq(fread(header, 1, hlen, fp), hlen);
    fclose(fp);
    ck_assert_ptr_nonnull(strstr(header, "\"score\""));
    ck_assert_ptr_nonnull(strstr(header, "\"epoch\""));
    ck_assert_ptr_nonnull(strstr(header, "\"4\""));
    ck_assert_ptr_null(strstr(header, "\"loss\""));
    free(header);
    /* the file loads into a fresh model with the same values */
    CtGenerator g = ct_generator(99, 0);
    Module *m2 = nn_linear(2, 1, true, &g);
    ck_assert_int_eq(nn_module_load(m2, path, true, NULL), CT_OK);
    double loaded[3];
    params_of(m2, loaded);
    for (int i = 0; i < 3; i++) ck_assert_double_eq(loaded[i], r->epoch_params[3][i]);
    nn_module_free(m2);
    fx_free(&f);
    remove(path);
    remove(opt_path);
    rmdir(dir);
}
END_TEST

/* With no_reset_on_train, a later run that never beats the kept best still
 * ends with the best model (of the earlier run) loaded back. */
START_TEST(test_save_best_model_kept_across_runs)
{
    char dir[] = "/tmp/ct_cb_best_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256], opt_path[256];
    snprintf(path, sizeof path, "%s/best.safetensors", dir);
    snprintf(opt_path, sizeof opt_path, "%s/best.optimizer.safetensors", dir);
    static const double first[] = {3.0, 2.0}, second[] = {5.0, 4.0};
    Fx f;
    fx_init(&f);
    Recorder *r = recorder(first, 2);
    Callback *sb = callback_save_best_model_create(&(SaveBestModelArgs){
        .save_path = path, .watch_metric = "score", .no_reset_on_train = true});
    fx_trainer(&f, 2, (Callback *[]){&r->base, sb});
    ck_assert_int_eq(fx_train(&f, 2, true), CT_OK);
    double best[3], now[3];
    params_of(f.model, best);
    r->script = second;
    ck_assert_int_eq(fx_train(&f, 2, true), CT_OK);
    ck_assert_int_eq(callback_save_best_model_num_saves(sb), 0);
    ck_assert_double_eq(callback_save_best_model_best(sb), 2.0);
    ck_assert_int_eq(r->n_epoch_params, 4);
    params_of(f.model, now);
    for (int i = 0; i < 3; i++) {
        ck_assert_double_ne(r->epoch_params[3][i], best[i]); /* the run moved them */
        ck_assert_double_eq(now[i], best[i]);
    }
    fx_free(&f);
    remove(path);
    remove(opt_path);
    rmdir(dir);
}
END_TEST

/* ----------------------------------------------------- TerminateOnNaN */

static int g_bad_step;     /* the train/eval batch (counted over the run) made bad */
static double g_bad_value; /* NAN or INFINITY */
static int g_batches;

static CtStatus bad_train_loss(Trainer *t, const DataBatch *b, TrainerBatchOutput *out)
{
    CtStatus st = trainer_default_calculate_train_batch_loss(t, b, out);
    if (st == CT_OK && g_batches++ == g_bad_step)
        out->loss = tensor_mul_scalar(out->loss, g_bad_value);
    return st;
}

static CtStatus bad_eval_loss(Trainer *t, const DataBatch *b, TrainerBatchOutput *out)
{
    CtStatus st = trainer_default_calculate_eval_batch_loss(t, b, out);
    if (st == CT_OK && g_batches++ == g_bad_step)
        out->loss = tensor_mul_scalar(out->loss, g_bad_value);
    return st;
}

static void run_nan_case(double bad, bool in_eval)
{
    Fx f;
    fx_init(&f);
    Recorder *r = recorder(NULL, 0);
    Callback *tn = callback_terminate_on_nan_create();
    fx_trainer(&f, 2, (Callback *[]){tn, &r->base});
    g_bad_step = 3;
    g_bad_value = bad;
    g_batches = 0;
    if (in_eval)
        f.t->hooks.calculate_eval_batch_loss = bad_eval_loss;
    else
        f.t->hooks.calculate_train_batch_loss = bad_train_loss;
    ck_assert_int_eq(fx_train(&f, 3, true), CT_OK);
    ck_assert(callback_terminate_on_nan_triggered(tn));
    ck_assert_int_eq(r->run_ends, 1);
    ck_assert_int_eq(r->stops, 1);
    ck_assert_int_eq(r->train_epochs, 1);
    ck_assert_ptr_nonnull(strstr(trainer_stop_reason(f.t),
                                 in_eval
                                     ? "non-finite (NaN or Inf) loss in validation step"
                                     : "non-finite (NaN or Inf) loss in training step"));
    if (!in_eval) {
        /* the callbacks after TerminateOnNaN did not see the bad step, and the
         * bad loss never reached the weights */
        ck_assert_int_eq(r->train_steps, 3);
        double now[3];
        params_of(f.model, now);
        for (int i = 0; i < 3; i++) ck_assert_double_eq(now[i], r->step_params[3][i]);
    }
    fx_free(&f);
}

START_TEST(test_terminate_on_nan)
{
    run_nan_case(NAN, false);
    run_nan_case(INFINITY, false);
    run_nan_case(-INFINITY, false);
    run_nan_case(NAN, true);
    /* finite losses: not triggered */
    Fx f;
    fx_init(&f);
    Callback *tn = callback_terminate_on_nan_create();
    fx_trainer(&f, 1, (Callback *[]){tn});
    ck_assert_int_eq(fx_train(&f, 2, true), CT_OK);
    ck_assert(!callback_terminate_on_nan_triggered(tn));
    ck_assert(!callback_terminate_on_nan_triggered(NULL));
    fx_free(&f);
}
END_TEST

/* ----------------------------------------------------------- ModelEma */

static void ema_expect(const Recorder *r, double (*snaps)[3], int n, double d,
                       double out[3])
{
    for (int i = 0; i < 3; i++) out[i] = r->start_params[i];
    for (int k = 0; k < n; k++)
        for (int i = 0; i < 3; i++) out[i] = d * out[i] + (1 - d) * snaps[k][i];
}

static void ema_values(const Callback *ema, double out[3])
{
    const CtStateDict *s = callback_model_ema_state(ema);
    ck_assert_ptr_nonnull(s);
    float w[2], b[1];
    ck_assert_int_eq(tensor_copy_to_host(ct_state_dict_get(s, "weight"), w, CT_F32),
                     CT_OK);
    ck_assert_int_eq(tensor_copy_to_host(ct_state_dict_get(s, "bias"), b, CT_F32), CT_OK);
    out[0] = w[0];
    out[1] = w[1];
    out[2] = b[0];
}

START_TEST(test_model_ema_per_epoch)
{
    Fx f;
    fx_init(&f);
    Recorder *r = recorder(NULL, 0);
    Callback *ema = callback_model_ema_create(&(ModelEmaArgs){.decay = 0.6});
    fx_trainer(&f, 2, (Callback *[]){&r->base, ema});
    ck_assert_int_eq(fx_train(&f, 3, true), CT_OK);
    ck_assert_int_eq(callback_model_ema_num_updates(ema), 3);
    double want[3], got[3];
    ema_expect(r, r->epoch_params, 3, 0.6, want);
    ema_values(ema, got);
    for (int i = 0; i < 3; i++) ck_assert_double_eq_tol(got[i], want[i], 1e-6);
    /* the EMA was evaluated under the prefix, the model got its own values
     * back, and the prefix was restored */
    RunHistory *h = trainer_run_history(f.t);
    int64_t n = 0;
    run_history_values(h, "ema_model_eval_loss_epoch", &n);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(run_history_prefix(h), "");
    double now[3];
    params_of(f.model, now);
    for (int i = 0; i < 3; i++) ck_assert_double_eq(now[i], r->epoch_params[2][i]);
    /* copy_to gives a module the EMA values */
    CtGenerator g = ct_generator(5, 0);
    Module *m2 = nn_linear(2, 1, true, &g);
    ck_assert_int_eq(callback_model_ema_copy_to(ema, m2), CT_OK);
    double copied[3];
    params_of(m2, copied);
    for (int i = 0; i < 3; i++) ck_assert_double_eq(copied[i], got[i]);
    nn_module_free(m2);
    fx_free(&f);
}
END_TEST

START_TEST(test_model_ema_every_step)
{
    Fx f;
    fx_init(&f);
    Recorder *r = recorder(NULL, 0);
    Callback *ema = callback_model_ema_create(
        &(ModelEmaArgs){.decay = 0.9, .update_every_step = true, .no_evaluation = true});
    fx_trainer(&f, 2, (Callback *[]){&r->base, ema});
    ck_assert_int_eq(fx_train(&f, 2, true), CT_OK);
    /* 16 updates: the weights after update k are seen at step k+1's start,
     * the last at the end of epoch 2 */
    ck_assert_int_eq(callback_model_ema_num_updates(ema), 16);
    ck_assert_int_eq(r->n_step_params, 16);
    double snaps[16][3];
    for (int k = 0; k < 15; k++) memcpy(snaps[k], r->step_params[k + 1], sizeof snaps[k]);
    memcpy(snaps[15], r->epoch_params[1], sizeof snaps[15]);
    double want[3], got[3];
    ema_expect(r, snaps, 16, 0.9, want);
    ema_values(ema, got);
    for (int i = 0; i < 3; i++) ck_assert_double_eq_tol(got[i], want[i], 1e-6);
    ck_assert(
        !run_history_has_metric(trainer_run_history(f.t), "ema_model_eval_loss_epoch"));
    fx_free(&f);
    ck_assert_ptr_null(callback_model_ema_create(&(ModelEmaArgs){.decay = 1.0}));
    tu_assert_error(ct_last_status(), "decay");
}
END_TEST

/* ------------------------------------------------------ MetricsLogger */

static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    ck_assert_ptr_nonnull(fp);
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

/* A MetricsLogger writing m.csv and m.jsonl in a fresh directory made from
 * the template dir; csv and jsonl (256 bytes) receive the paths. */
static Callback *logger_in(char *dir, char *csv, char *jsonl)
{
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(csv, 256, "%s/m.csv", dir);
    snprintf(jsonl, 256, "%s/m.jsonl", dir);
    return callback_metrics_logger_create(
        &(MetricsLoggerArgs){.csv_path = csv, .jsonl_path = jsonl});
}

static void remove_logs(const char *dir, const char *csv, const char *jsonl)
{
    ck_assert_int_eq(remove(csv), 0);
    ck_assert_int_eq(remove(jsonl), 0);
    ck_assert_int_eq(rmdir(dir), 0);
}

START_TEST(test_metrics_logger)
{
    char dir[] = "/tmp/ct_cb_log_XXXXXX", csv[256], jsonl[256];
    Callback *lg = logger_in(dir, csv, jsonl);
    Fx f;
    fx_init(&f);
    fx_trainer(&f, 1, (Callback *[]){lg});
    ck_assert_int_eq(fx_train(&f, 3, true), CT_OK);
    RunHistory *h = trainer_run_history(f.t);
    int64_t nt = 0, ne = 0;
    const double *tl = run_history_values(h, "train_loss_epoch", &nt);
    const double *el = run_history_values(h, "eval_loss_epoch", &ne);
    ck_assert_int_eq(nt, 3);
    ck_assert_int_eq(ne, 3);

    char *s = slurp(csv);
    char *line = strtok(s, "\n");
    ck_assert_str_eq(line, "epoch,train_loss_epoch,eval_loss_epoch");
    for (int e = 0; e < 3; e++) {
        line = strtok(NULL, "\n");
        ck_assert_ptr_nonnull(line);
        char *end;
        ck_assert_int_eq(strtol(line, &end, 10), e + 1);
        ck_assert_int_eq(*end, ',');
        double a = strtod(end + 1, &end);
        ck_assert_int_eq(*end, ',');
        double b = strtod(end + 1, &end);
        ck_assert_int_eq(*end, '\0');
        ck_assert_double_eq(a, tl[e]);
        ck_assert_double_eq(b, el[e]);
    }
    ck_assert_ptr_null(strtok(NULL, "\n"));

    s = slurp(jsonl);
    line = strtok(s, "\n");
    for (int e = 0; e < 3; e++) {
        ck_assert_ptr_nonnull(line);
        char want[32];
        snprintf(want, sizeof want, "{\"epoch\": %d, ", e + 1);
        ck_assert_int_eq(strncmp(line, want, strlen(want)), 0);
        char *p = strstr(line, "\"train_loss_epoch\": ");
        ck_assert_ptr_nonnull(p);
        ck_assert_double_eq(strtod(p + 20, NULL), tl[e]);
        p = strstr(line, "\"eval_loss_epoch\": ");
        ck_assert_ptr_nonnull(p);
        ck_assert_double_eq(strtod(p + 19, NULL), el[e]);
        ck_assert_int_eq(line[strlen(line) - 1], '}');
        line = strtok(NULL, "\n");
    }
    ck_assert_ptr_null(line);
    fx_free(&f);
    remove_logs(dir, csv, jsonl);
    ck_assert_ptr_null(callback_metrics_logger_create(&(MetricsLoggerArgs){0}));
    tu_assert_error(ct_last_status(), "csv_path");
}
END_TEST

/* Non-finite values: null in JSON lines, nan / inf in CSV. */
START_TEST(test_metrics_logger_non_finite)
{
    char dir[] = "/tmp/ct_cb_log_XXXXXX", csv[256], jsonl[256];
    Callback *lg = logger_in(dir, csv, jsonl);
    static const double score[] = {NAN, 1.5, -INFINITY};
    Fx f;
    fx_init(&f);
    fx_trainer(&f, 2, (Callback *[]){&recorder(score, 3)->base, lg});
    ck_assert_int_eq(fx_train(&f, 3, false), CT_OK);
    char *s = slurp(jsonl);
    const char *want[] = {"\"score\": null}", "\"score\": 1.5}", "\"score\": null}"};
    char *line = strtok(s, "\n");
    for (int e = 0; e < 3; e++, line = strtok(NULL, "\n")) {
        ck_assert_ptr_nonnull(line);
        ck_assert_ptr_nonnull(strstr(line, want[e]));
    }
    ck_assert_ptr_null(line);
    s = slurp(csv);
    ck_assert_ptr_nonnull(strstr(s, ",nan\n2,"));
    ck_assert_ptr_nonnull(strstr(s, ",-inf\n"));
    fx_free(&f);
    remove_logs(dir, csv, jsonl);
}
END_TEST

/* ------------------------------------------------------- LimitBatches */

START_TEST(test_limit_batches)
{
    Fx f;
    fx_init(&f);
    Recorder *r = recorder(NULL, 0);
    fx_trainer(&f, 2, (Callback *[]){callback_limit_batches_create(3), &r->base});
    ck_assert_int_eq(fx_train(&f, 2, true), CT_OK);
    ck_assert_int_eq(r->train_steps_in_epoch[0], 3);
    ck_assert_int_eq(r->train_steps_in_epoch[1], 3);
    ck_assert_int_eq(r->eval_steps, 6);
    fx_free(&f);

    /* from the environment, through the trainer */
    setenv("CTRAINER_LIMIT_BATCHES", "2", 1);
    fx_init(&f);
    r = recorder(NULL, 0);
    fx_trainer(&f, 1, (Callback *[]){&r->base});
    ck_assert_int_eq(fx_train(&f, 1, true), CT_OK);
    ck_assert_int_eq(r->train_steps, 2);
    ck_assert_int_eq(r->eval_steps, 2);
    fx_free(&f);

    /* an explicit LimitBatches wins over the environment */
    fx_init(&f);
    r = recorder(NULL, 0);
    fx_trainer(&f, 2, (Callback *[]){callback_limit_batches_create(3), &r->base});
    ck_assert_int_eq(fx_train(&f, 1, true), CT_OK);
    ck_assert_int_eq(r->train_steps, 3);
    fx_free(&f);

    setenv("CTRAINER_LIMIT_BATCHES", "none", 1);
    fx_init(&f);
    r = recorder(NULL, 0);
    fx_trainer(&f, 1, (Callback *[]){&r->base});
    ck_assert_int_eq(fx_train(&f, 1, true), CT_OK);
    ck_assert_int_eq(r->train_steps, 8);
    fx_free(&f);

    setenv("CTRAINER_LIMIT_BATCHES", "2x", 1);
    fx_init(&f);
    f.t = trainer_create(&(TrainerConfig){
        .model = f.model, .loss = f.loss, .optimizer = f.opt, .no_callbacks = true});
    ck_assert_ptr_null(f.t);
    tu_assert_error(ct_last_status(), "CTRAINER_LIMIT_BATCHES=\"2x\"");
    fx_free(&f);
    unsetenv("CTRAINER_LIMIT_BATCHES");
    ck_assert_ptr_null(callback_limit_batches_create(0));
}
END_TEST

/* ------------------------------------------------ StepBasedEvaluation */

START_TEST(test_step_based_evaluation)
{
    Fx f;
    fx_init(&f);
    Recorder *r = recorder(NULL, 0);
    Callback *se = callback_step_based_evaluation_create(3);
    fx_trainer(&f, 2, (Callback *[]){&r->base, se});
    ck_assert_int_eq(fx_train(&f, 2, true), CT_OK);
    /* steps 3 and 6 of each 8-step epoch (0-based), counted over the run */
    ck_assert_int_eq(r->n_intermediate, 4);
    ck_assert_int_eq(r->intermediate_at[0], 3);
    ck_assert_int_eq(r->intermediate_at[1], 6);
    ck_assert_int_eq(r->intermediate_at[2], 8 + 3);
    ck_assert_int_eq(r->intermediate_at[3], 8 + 6);
    ck_assert_int_eq(callback_step_based_evaluation_count(se), 4);
    /* 4 intermediate evals and 2 epoch evals of 4 batches */
    ck_assert_int_eq(r->eval_steps, 6 * 4);
    ck_assert(r->always_training);
    ck_assert(
        !run_history_has_metric(trainer_run_history(f.t), "intermediate_eval_loss"));
    fx_free(&f);
}
END_TEST

/* A submodule kept in eval mode while the rest trains (a frozen batch
 * norm, set in train_epoch_start) stays so after intermediate evaluations. */
static Module *g_frozen;
static int g_bad_modes;

static CtStatus freeze_epoch_start(Trainer *t)
{
    CtStatus st = trainer_default_train_epoch_start(t);
    nn_module_eval(g_frozen);
    return st;
}

static CtStatus modes_checked_loss(Trainer *t, const DataBatch *b,
                                   TrainerBatchOutput *out)
{
    if (!t->model->training || g_frozen->training) g_bad_modes++;
    return trainer_default_calculate_train_batch_loss(t, b, out);
}

START_TEST(test_step_based_evaluation_keeps_modes)
{
    Fx f;
    fx_init(&f);
    g_frozen = nn_batch_norm1d(1, 1e-5, 0.1);
    f.model = nn_sequential(2, (Module *[]){f.model, g_frozen});
    optim_free(f.opt);
    f.opt = optim_sgd_create(f.model, &(SgdArgs){.lr = 0.1});
    fx_trainer(&f, 1, (Callback *[]){callback_step_based_evaluation_create(2)});
    f.t->hooks.train_epoch_start = freeze_epoch_start;
    f.t->hooks.calculate_train_batch_loss = modes_checked_loss;
    g_bad_modes = 0;
    ck_assert_int_eq(fx_train(&f, 2, true), CT_OK);
    ck_assert_int_eq(g_bad_modes, 0);
    fx_free(&f);
}
END_TEST

/* ---------------------------------------------------------- printing */

static char *read_all(FILE *fp)
{
    static char buf[16384];
    fflush(fp);
    rewind(fp);
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    buf[n] = '\0';
    return buf;
}

static int count_lines_with(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) n++;
    return n;
}

START_TEST(test_progress_bar_lines)
{
    FILE *out = tmpfile();
    ck_assert_ptr_nonnull(out);
    Fx f;
    fx_init(&f);
    fx_trainer(&f, 1,
               (Callback *[]){callback_progress_bar_create(&(ProgressBarArgs){
                   .out = out, .mode = PROGRESS_BAR_LINES, .line_percent = 25})});
    ck_assert_int_eq(fx_train(&f, 2, true), CT_OK);
    char *s = read_all(out);
    /* 8 train batches: lines at 2, 4, 6, 8; 4 eval batches: every batch */
    ck_assert_int_eq(count_lines_with(s, "train 1: "), 4);
    ck_assert_int_eq(count_lines_with(s, "train 2: "), 4);
    ck_assert_int_eq(count_lines_with(s, "eval 1: "), 4);
    ck_assert_int_eq(count_lines_with(s, "eval 2: "), 4);
    ck_assert_ptr_nonnull(strstr(s, "train 1: 2/8 (25%) | "));
    ck_assert_ptr_nonnull(strstr(s, "train 2: 8/8 (100%) | "));
    ck_assert_ptr_nonnull(strstr(s, "eval 1: 4/4 (100%) | "));
    ck_assert_ptr_nonnull(strstr(s, "| loss "));
    ck_assert_int_eq(count_lines_with(s, " samples/s eta "), 16);
    ck_assert_ptr_null(strchr(s, '\r'));
    ck_assert_int_eq(count_lines_with(s, "\n"), 16);
    fclose(out);
    fx_free(&f);

    /* the tty form redraws in place and ends each bar with a newline */
    out = tmpfile();
    fx_init(&f);
    fx_trainer(&f, 1,
               (Callback *[]){callback_progress_bar_create(
                   &(ProgressBarArgs){.out = out, .mode = PROGRESS_BAR_TTY})});
    ck_assert_int_eq(fx_train(&f, 1, false), CT_OK);
    s = read_all(out);
    ck_assert_ptr_nonnull(strstr(s, "\rtrain 1 ["));
    ck_assert_ptr_nonnull(strstr(s, "[####################] 8/8 100%"));
    ck_assert_ptr_nonnull(strstr(s, " samples/s eta "));
    ck_assert_int_eq(count_lines_with(s, "\n"), 1);
    ck_assert_int_eq(s[strlen(s) - 1], '\n');
    fclose(out);
    fx_free(&f);
}
END_TEST

/* What an AUTO bar on stdout writes with CTRAINER_STDOUT_TTY=v (stdout
 * redirected to a file, as mpirun's pseudo-terminal stands for the
 * launching process's output). */
static char *auto_bar_output(const char *v)
{
    FILE *cap = tmpfile();
    ck_assert_ptr_nonnull(cap);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_ge(dup2(fileno(cap), STDOUT_FILENO), 0);
    setenv("CTRAINER_STDOUT_TTY", v, 1);
    Fx f;
    fx_init(&f);
    fx_trainer(&f, 1,
               (Callback *[]){callback_progress_bar_create(
                   &(ProgressBarArgs){.mode = PROGRESS_BAR_AUTO, .line_percent = 50})});
    ck_assert_int_eq(fx_train(&f, 1, false), CT_OK);
    fx_free(&f);
    fflush(stdout);
    unsetenv("CTRAINER_STDOUT_TTY");
    ck_assert_int_ge(dup2(saved, STDOUT_FILENO), 0);
    close(saved);
    char *s = strdup(read_all(cap));
    fclose(cap);
    return s;
}

START_TEST(test_progress_bar_follows_launcher_tty)
{
    char *s = auto_bar_output("1");
    ck_assert_ptr_nonnull(strstr(s, "\rtrain 1 ["));
    free(s);
    s = auto_bar_output("0");
    ck_assert_ptr_null(strchr(s, '\r'));
    ck_assert_ptr_nonnull(strstr(s, "train 1: 8/8 (100%) | "));
    free(s);
}
END_TEST

typedef struct LogCalls {
    char phases[16][16];
    int n_names[16];
    char first[16][32];
    int n;
} LogCalls;

static CtStatus capture_log(Trainer *t, const char *phase, int n,
                            const char *const *names, const double *values, void *user)
{
    LogCalls *c = user;
    if (c->n < 16) {
        snprintf(c->phases[c->n], 16, "%s", phase);
        snprintf(c->first[c->n], 32, "%s", names[0]);
        c->n_names[c->n++] = n;
    }
    return CT_OK;
}

START_TEST(test_print_and_log_metrics)
{
    FILE *out = tmpfile();
    Fx f;
    fx_init(&f);
    LogCalls calls = {0};
    /* one type per list: a second LogMetrics is refused at creation */
    f.t = trainer_create(&(TrainerConfig){
        .model = f.model,
        .loss = f.loss,
        .optimizer = f.opt,
        .callbacks = (Callback *[]){callback_log_metrics_create(NULL),
                                    callback_log_metrics_create(&(LogMetricsArgs){
                                        .log_metrics = capture_log, .user = &calls})},
        .n_callbacks = 2});
    ck_assert_ptr_null(f.t);
    tu_assert_error(ct_last_status(), "LogMetrics");
    fx_free(&f);

    fx_init(&f);
    fx_trainer(
        &f, 2,
        (Callback *[]){callback_print_progress_create(out),
                       callback_log_metrics_create(&(LogMetricsArgs){.out = out})});
    ck_assert_int_eq(fx_train(&f, 2, true), CT_OK);
    char *s = read_all(out);
    const char *expect[] = {"Starting training run\nStarting epoch 1\n",
                            "epoch 1 train\n  train_loss_epoch  ",
                            "Starting eval epoch\n",
                            "epoch 1 eval\n  eval_loss_epoch  ",
                            "Starting epoch 2\n",
                            "Finishing training run\n"};
    const char *p = s;
    for (int i = 0; i < 6; i++) {
        p = strstr(p, expect[i]);
        ck_assert_msg(p != NULL, "missing \"%s\" in order in:\n%s", expect[i], s);
    }
    fclose(out);
    fx_free(&f);

    fx_init(&f);
    fx_trainer(&f, 2,
               (Callback *[]){callback_step_based_evaluation_create(5),
                              callback_log_metrics_create(&(LogMetricsArgs){
                                  .log_metrics = capture_log, .user = &calls})});
    ck_assert_int_eq(fx_train(&f, 2, true), CT_OK);
    /* per epoch: intermediate (step 5), train, eval */
    ck_assert_int_eq(calls.n, 6);
    const char *phases[] = {"intermediate", "train", "eval"};
    const char *first[] = {"intermediate_eval_loss", "train_loss_epoch",
                           "eval_loss_epoch"};
    for (int i = 0; i < 6; i++) {
        ck_assert_str_eq(calls.phases[i], phases[i % 3]);
        ck_assert_str_eq(calls.first[i], first[i % 3]);
        ck_assert_int_eq(calls.n_names[i], 1);
    }
    fx_free(&f);
}
END_TEST

/* ------------------------------------------- defaults, MoveModulesToDevice */

START_TEST(test_defaults_and_move)
{
    Callback *cbs[CALLBACKS_DEFAULT_MAX];
    ck_assert_int_eq(callbacks_default(cbs, 5, true), 5);
    const char *types[] = {"MoveModulesToDevice", "TerminateOnNaN", "PrintProgress",
                           "ProgressBar", "LogMetrics"};
    for (int i = 0; i < 5; i++) ck_assert_str_eq(callback_type(cbs[i]), types[i]);
    for (int i = 0; i < 5; i++) callback_free(cbs[i]);
    ck_assert_int_eq(callbacks_default(cbs, 5, false), 4);
    ck_assert_str_eq(callback_type(cbs[3]), "LogMetrics");
    for (int i = 0; i < 4; i++) callback_free(cbs[i]);
    ck_assert_int_eq(callbacks_default(cbs, 3, false), -1);
    tu_assert_error(ct_last_status(), "room for 4");

    /* a config without callbacks gets the default list (with a progress
     * bar); no_callbacks gets none; a given list replaces the defaults */
    Fx d;
    fx_init(&d);
    TrainerConfig cfg = {.model = d.model, .loss = d.loss, .optimizer = d.opt};
    d.t = trainer_create(&cfg);
    ck_assert_ptr_nonnull(d.t);
    CallbackList *l = trainer_callbacks(d.t);
    ck_assert_int_eq(callback_list_count(l), 5);
    for (int i = 0; i < 5; i++)
        ck_assert_str_eq(callback_type(callback_list_at(l, i)), types[i]);
    trainer_free(d.t);
    cfg.no_callbacks = true;
    d.t = trainer_create(&cfg);
    ck_assert_int_eq(callback_list_count(trainer_callbacks(d.t)), 0);
    trainer_free(d.t);
    cfg.no_callbacks = false;
    cfg.callbacks = (Callback *[]){callback_terminate_on_nan_create()};
    cfg.n_callbacks = 1;
    d.t = trainer_create(&cfg);
    ck_assert_int_eq(callback_list_count(trainer_callbacks(d.t)), 1);
    d.t = (trainer_free(d.t), NULL);
    fx_free(&d);

    /* registered objects follow the trainer's device (the CPU here) */
    Fx f;
    fx_init(&f);
    Callback *mv = callback_move_modules_to_device_create();
    CtGenerator g = ct_generator(3, 0);
    Module *extra = nn_linear(2, 2, true, &g);
    Tensor *w = tensor_ones(1, (int64_t[]){1}, CT_F32, ct_cpu());
    ck_assert_int_eq(callback_move_modules_add_module(mv, extra), CT_OK);
    ck_assert_int_eq(callback_move_modules_add_tensor(mv, w), CT_OK);
    tu_assert_error(callback_move_modules_add_tensor(mv, NULL), "NULL");
    Callback *tn = callback_terminate_on_nan_create();
    tu_assert_error(callback_move_modules_add_module(tn, extra),
                    "not a MoveModulesToDevice");
    callback_free(tn);
    fx_trainer(&f, 1, (Callback *[]){mv});
    ck_assert_int_eq(fx_train(&f, 1, false), CT_OK);
    ck_assert(ct_device_eq(tensor_device(w), ct_cpu()));
    ck_assert_double_eq(tensor_item(w), 1.0);
    fx_free(&f);
    tensor_free(w);
    nn_module_free(extra);
}
END_TEST

/* ----------------------------------------------------- LimitEvalSteps */

/* Checks each evaluation's recorded loss against the mean MSE of exactly
 * the eval samples it should have seen (computed here from the weights and
 * the eval set), and counts its batches. */
typedef struct EvalCheck {
    Callback base;
    Fx *f;
    int64_t limit_inter, limit_end; /* batches expected (of 2 samples) */
    double expected;
    int64_t steps, n_checked;
    int64_t steps_of[16];
    double full_minus_limited; /* largest |full mean - limited mean| */
} EvalCheck;

/* Mean MSE of the model over the first n eval samples. */
static double eval_mse(Fx *f, Module *m, int64_t n)
{
    double p[3];
    float x[16], y[8];
    params_of(m, p);
    ck_assert_int_eq(tensor_copy_to_host(f->ex, x, CT_F32), CT_OK);
    ck_assert_int_eq(tensor_copy_to_host(f->ey, y, CT_F32), CT_OK);
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = p[0] * x[2 * i] + p[1] * x[2 * i + 1] + p[2] - y[i];
        sum += e * e;
    }
    return sum / (double)n;
}

static CtStatus ec_start(Callback *cb, Trainer *t, bool inter)
{
    EvalCheck *c = (EvalCheck *)cb;
    int64_t batches = inter ? c->limit_inter : c->limit_end;
    c->expected = eval_mse(c->f, t->model, 2 * batches);
    double d = fabs(eval_mse(c->f, t->model, 8) - c->expected);
    if (d > c->full_minus_limited) c->full_minus_limited = d;
    c->steps = 0;
    return CT_OK;
}

static CtStatus ec_step(Callback *cb, Trainer *t, const DataBatch *b,
                        const TrainerBatchOutput *o, int64_t step)
{
    ((EvalCheck *)cb)->steps++;
    return CT_OK;
}

static CtStatus ec_end(Callback *cb, Trainer *t, bool inter)
{
    EvalCheck *c = (EvalCheck *)cb;
    const char *name = inter ? "intermediate_eval_loss" : "eval_loss_epoch";
    RunHistory *h = trainer_run_history(t);
    if (!run_history_has_metric(h, name)) name = "evaluation_loss";
    double got = run_history_latest(h, name);
    ck_assert_msg(fabs(got - c->expected) <= 1e-5 * fabs(c->expected),
                  "%s: %.9g, expected %.9g", name, got, c->expected);
    if (c->n_checked < 16) c->steps_of[c->n_checked] = c->steps;
    c->n_checked++;
    return CT_OK;
}

static const CallbackVtable eval_check_vt = {.type = "EvalCheck",
                                             .on_eval_epoch_start = ec_start,
                                             .on_eval_step_end = ec_step,
                                             .on_eval_epoch_end = ec_end};

static EvalCheck *eval_check(Fx *f, int64_t inter, int64_t end)
{
    EvalCheck *c = calloc(1, sizeof *c);
    c->base.vt = &eval_check_vt;
    c->f = f;
    c->limit_inter = inter;
    c->limit_end = end;
    return c;
}

START_TEST(test_limit_eval_steps)
{
    Fx f;
    fx_init(&f);
    EvalCheck *c = eval_check(&f, 3, 4);
    Callback *le =
        callback_limit_eval_steps_create(&(LimitEvalStepsArgs){.num_eval_steps = 3});
    fx_trainer(&f, 3,
               (Callback *[]){le, callback_step_based_evaluation_create(3), &c->base});
    ck_assert_int_eq(fx_train(&f, 2, true), CT_OK);
    /* per epoch: intermediate evaluations at steps 3 and 6 (3 batches of 4),
     * then the unlimited end-of-epoch one (4) */
    ck_assert_int_eq(c->n_checked, 6);
    const int64_t want[6] = {3, 3, 4, 3, 3, 4};
    for (int i = 0; i < 6; i++) ck_assert_int_eq(c->steps_of[i], want[i]);
    ck_assert_int_eq(callback_limit_eval_steps_count(le), 4);
    ck_assert(c->full_minus_limited > 1e-3); /* the limit does change the mean */
    ck_assert_int_eq(trainer_eval_dataloader_len(f.t), 4);
    ck_assert_int_eq(trainer_train_dataloader_len(f.t), 8);
    fx_free(&f);

    /* every evaluation, trainer_evaluate included; one step */
    fx_init(&f);
    c = eval_check(&f, 1, 1);
    le = callback_limit_eval_steps_create(
        &(LimitEvalStepsArgs){.num_eval_steps = 1, .limit_every_eval = true});
    fx_trainer(&f, 2, (Callback *[]){le, &c->base});
    ck_assert_int_eq(fx_train(&f, 1, true), CT_OK);
    ck_assert_int_eq(c->n_checked, 1);
    ck_assert_int_eq(c->steps_of[0], 1);
    /* a train cap survives an evaluation, which has no train loader */
    trainer_limit_batches(f.t, 5, 0);
    ck_assert_int_eq(
        trainer_evaluate(f.t, &(EvalArgs){.dataset = f.eval, .per_device_batch_size = 2}),
        CT_OK);
    ck_assert_int_eq(c->n_checked, 2);
    ck_assert_int_eq(c->steps_of[1], 1);
    ck_assert_int_eq(trainer_eval_dataloader_len(f.t), 4);
    int64_t cap_train = -1, cap_eval = -1;
    trainer_batch_limits(f.t, &cap_train, &cap_eval);
    ck_assert_int_eq(cap_train, 5);
    ck_assert_int_eq(cap_eval, 0);
    fx_free(&f);

    /* a smaller LimitBatches cap stays, and is put back afterwards */
    fx_init(&f);
    c = eval_check(&f, 2, 2);
    fx_trainer(&f, 4,
               (Callback *[]){callback_limit_batches_create(2),
                              callback_limit_eval_steps_create(
                                  &(LimitEvalStepsArgs){.num_eval_steps = 3}),
                              callback_step_based_evaluation_create(1), &c->base});
    ck_assert_int_eq(fx_train(&f, 1, true), CT_OK);
    ck_assert_int_eq(c->n_checked, 2); /* at step 1, then the epoch's */
    ck_assert_int_eq(c->steps_of[0], 2);
    ck_assert_int_eq(c->steps_of[1], 2);
    ck_assert_int_eq(trainer_eval_dataloader_len(f.t), 2);
    ck_assert_int_eq(trainer_train_dataloader_len(f.t), 2);
    fx_free(&f);

    ck_assert_ptr_null(
        callback_limit_eval_steps_create(&(LimitEvalStepsArgs){.num_eval_steps = 0}));
    tu_assert_error(CT_ERR_INVALID, "num_eval_steps must be >= 1, got 0");
    ck_assert_ptr_null(callback_limit_eval_steps_create(NULL));
    tu_assert_error(CT_ERR_NULL, "args is NULL");
}
END_TEST

/* ------------------------------------------------------ WSDCheckpoint */

/* 3 epochs of 8 updates: total 24, two checkpoints (ends 12 and 24), decay
 * 0.25 (3 steps each: pre-decay steps 9 and 21), warmup 2 from 0.01. */
static Scheduler *make_wsd_sched(Trainer *t, Optimizer *o, void *user)
{
    int64_t total;
    if (trainer_resolve_product(t, TRAINER_NUM_EPOCHS, TRAINER_NUM_UPDATE_STEPS_PER_EPOCH,
                                &total) != CT_OK)
        return NULL;
    return scheduler_wsd(o, &(WsdArgs){.total_steps = total,
                                       .warmup_steps = 2,
                                       .warmup_start_lr = 0.01,
                                       .decay_fraction = 0.25,
                                       .num_checkpoints = 2});
}

static Scheduler *make_exp_sched(Trainer *t, Optimizer *o, void *user)
{
    return scheduler_exponential_lr(o, 0.9);
}

static CtStatus fx_train_wsd(Fx *f, TrainerSchedulerFn fn, const char *resume)
{
    return trainer_train(f->t, &(TrainArgs){.train_dataset = f->train,
                                            .eval_dataset = f->eval,
                                            .num_epochs = 3,
                                            .per_device_batch_size = 2,
                                            .create_scheduler_fn = fn,
                                            .resume_from = resume,
                                            .train_dataloader_args = &(TrainerLoaderArgs){
                                                .shuffle = TRAINER_NO}});
}

/* The 3 weights of a saved safetensors file, and its header. */
static void file_params(const char *path, double out[3], char **header)
{
    CtGenerator g = ct_generator(99, 0);
    Module *m = nn_linear(2, 1, true, &g);
    ck_assert_msg(nn_module_load(m, path, true, NULL) == CT_OK, "%s", ct_last_error());
    params_of(m, out);
    nn_module_free(m);
    if (!header) return;
    FILE *fp = fopen(path, "rb");
    ck_assert_ptr_nonnull(fp);
    unsigned char len8[8];
    ck_assert_int_eq(fread(len8, 1, 8, fp), 8);
    size_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen * 256 + len8[i];
    *header = calloc(hlen + 1, 1);
    ck_assert_int_eq(fread(*header, 1, hlen, fp), hlen);
    fclose(fp);
}

static int count_entries(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -A %s | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    ck_assert_int_eq(fscanf(p, "%d", &n), 1);
    pclose(p);
    return n;
}

START_TEST(test_wsd_checkpoint)
{
    char root[] = "/tmp/ct_cb_wsd_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(root));
    char dir[300], dir2[300], path[400];
    snprintf(dir, sizeof dir, "%s/run/ckpts", root); /* created with parents */
    snprintf(dir2, sizeof dir2, "%s/resumed", root);
    Fx f;
    fx_init(&f);
    Recorder *r = recorder(NULL, 0);
    Callback *wc = callback_wsd_checkpoint_create(&(WsdCheckpointArgs){.save_dir = dir});
    fx_trainer(&f, 2, (Callback *[]){&r->base, wc});
    ck_assert_msg(fx_train_wsd(&f, make_wsd_sched, NULL) == CT_OK, "%s", ct_last_error());
    ck_assert_int_eq(callback_wsd_checkpoint_num_pre_decay(wc), 2);
    ck_assert_int_eq(callback_wsd_checkpoint_num_post_decay(wc), 2);
    /* exactly these four, at those steps */
    ck_assert_int_eq(count_entries(dir), 4);
    const char *names[4] = {"checkpoint_9_wsd_pre_decay/manifest.json",
                            "checkpoint_21_wsd_pre_decay/manifest.json",
                            "checkpoint_12_wsd_post_decay.safetensors",
                            "checkpoint_24_wsd_post_decay.safetensors"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        ck_assert_msg(access(path, F_OK) == 0, "missing %s", path);
    }
    /* post-decay weights: after exactly 12 updates (the 13th step's start)
     * and 24 (the end) */
    ck_assert_int_eq(r->n_step_params, 24);
    double w[3], final[3];
    char *header;
    snprintf(path, sizeof path, "%s/%s", dir, names[2]);
    file_params(path, w, &header);
    for (int i = 0; i < 3; i++) ck_assert(w[i] == r->step_params[12][i]);
    ck_assert_ptr_nonnull(strstr(header, "\"type\":\"post_decay\""));
    ck_assert_ptr_nonnull(strstr(header, "\"step\":\"12\""));
    ck_assert_ptr_nonnull(strstr(header, "\"total_steps\":\"24\""));
    ck_assert_ptr_nonnull(strstr(header, "\"decay_fraction\":\"0.25\""));
    free(header);
    params_of(f.model, final);
    snprintf(path, sizeof path, "%s/%s", dir, names[3]);
    file_params(path, w, NULL);
    for (int i = 0; i < 3; i++) ck_assert(w[i] == final[i]);
    /* the pre-decay state holds the weights after 9 updates */
    snprintf(path, sizeof path, "%s/checkpoint_9_wsd_pre_decay/model.safetensors", dir);
    file_params(path, w, NULL);
    for (int i = 0; i < 3; i++) ck_assert(w[i] == r->step_params[9][i]);
    fx_free(&f);

    /* resumed from the first pre-decay state: the same post-decay weights,
     * bit for bit, and the pre-decay state is not saved again */
    fx_init(&f);
    wc = callback_wsd_checkpoint_create(&(WsdCheckpointArgs){.save_dir = dir2});
    fx_trainer(&f, 2, (Callback *[]){&recorder(NULL, 0)->base, wc});
    snprintf(path, sizeof path, "%s/checkpoint_9_wsd_pre_decay", dir);
    ck_assert_msg(fx_train_wsd(&f, make_wsd_sched, path) == CT_OK, "%s", ct_last_error());
    ck_assert_int_eq(callback_wsd_checkpoint_num_pre_decay(wc), 1);
    ck_assert_int_eq(callback_wsd_checkpoint_num_post_decay(wc), 2);
    ck_assert_int_eq(count_entries(dir2), 3);
    for (int k = 2; k < 4; k++) {
        double a[3], b[3];
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        file_params(path, a, NULL);
        snprintf(path, sizeof path, "%s/%s", dir2, names[k]);
        file_params(path, b, NULL);
        for (int i = 0; i < 3; i++) ck_assert(a[i] == b[i]);
    }
    fx_free(&f);

    /* a run without a WSD scheduler */
    fx_init(&f);
    fx_trainer(&f, 1,
               (Callback *[]){callback_wsd_checkpoint_create(
                   &(WsdCheckpointArgs){.save_dir = dir2})});
    ck_assert_int_eq(fx_train_wsd(&f, make_exp_sched, NULL), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID,
                    "WSDCheckpoint: the run's scheduler is ExponentialLR; it needs a "
                    "WSDLrScheduler");
    ck_assert_int_eq(fx_train_wsd(&f, NULL, NULL), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "WSDCheckpoint: the run has no scheduler");
    fx_free(&f);
    ck_assert_ptr_null(
        callback_wsd_checkpoint_create(&(WsdCheckpointArgs){.save_dir = ""}));
    tu_assert_error(CT_ERR_INVALID, "save_dir is empty");

    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("callbacks");
    TCase *tc = tcase_create("callbacks");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_early_stopping);
    tcase_add_test(tc, test_early_stopping_max_and_any_improvement);
    tcase_add_test(tc, test_early_stopping_nan_metric);
    tcase_add_test(tc, test_save_best_model);
    tcase_add_test(tc, test_save_best_model_kept_across_runs);
    tcase_add_test(tc, test_terminate_on_nan);
    tcase_add_test(tc, test_model_ema_per_epoch);
    tcase_add_test(tc, test_model_ema_every_step);
    tcase_add_test(tc, test_metrics_logger);
    tcase_add_test(tc, test_metrics_logger_non_finite);
    tcase_add_test(tc, test_limit_batches);
    tcase_add_test(tc, test_step_based_evaluation);
    tcase_add_test(tc, test_step_based_evaluation_keeps_modes);
    tcase_add_test(tc, test_limit_eval_steps);
    tcase_add_test(tc, test_wsd_checkpoint);
    tcase_add_test(tc, test_progress_bar_lines);
    tcase_add_test(tc, test_progress_bar_follows_launcher_tty);
    tcase_add_test(tc, test_print_and_log_metrics);
    tcase_add_test(tc, test_defaults_and_move);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
