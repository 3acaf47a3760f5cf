/* The training loop: whole hook/event sequences, accumulation, clipping,
 * max steps, stopping, evaluate. */
#include "trainer_testutil.h"

/* Trace fragments (literal text: each test asserts the whole sequence). */
#define STEP(i)                                                                          \
    "E:on_train_step_start H:calculate_train_batch_loss E:on_train_step_end:" #i         \
    " H:backward_step "
#define UPD           "H:optimizer_step H:optimizer_zero_grad "
#define UPD_SCHED     "H:optimizer_step H:scheduler_step H:optimizer_zero_grad "
#define EPOCH_BEG     "H:train_epoch_start E:on_train_epoch_start "
#define EPOCH_END     "H:train_epoch_end E:on_train_epoch_end "
#define RUN_EPOCH_END "H:training_run_epoch_end E:on_training_run_epoch_end "
#define RUN_BEG       "H:training_run_start E:on_training_run_start "
#define RUN_END       "H:training_run_end E:on_training_run_end"
#define TRAIN_DL      "H:create_train_dataloader H:get_default_train_dl_args "
#define EVAL_DL       "H:create_eval_dataloader H:get_default_eval_dl_args "
#define STOPPED       "E:on_stop_training_error "
#define EVAL_STEP(i)                                                                     \
    "E:on_eval_step_start H:calculate_eval_batch_loss E:on_eval_step_end:" #i " "

static const TrainerLoaderArgs sequential = {.shuffle = TRAINER_NO};

/* The fragments end in a space; the trace does not. */
static void assert_trace(Fixture *f, const char *expect)
{
    char buf[sizeof f->rt.trace];
    snprintf(buf, sizeof buf, "%s", expect);
    size_t n = strlen(buf);
    while (n && buf[n - 1] == ' ') buf[--n] = '\0';
    ck_assert_str_eq(f->rt.trace, buf);
}

/* A loader hook that fails without recording why. */
static DataLoader *silent_null_dl(Trainer *t, int64_t bs, const TrainerLoaderArgs *u)
{
    (void)t;
    (void)bs;
    (void)u;
    return NULL;
}

/* An error provoked and handled before a run is not reported as the cause of
 * the run's own, unrelated failure. */
START_TEST(stale_error_is_not_reported)
{
    TU_MEM_BEGIN;
    Fixture f;
    fixture_init(&f, 0.1, false);
    Dataset *ds = regression_dataset(4);
    ck_assert_int_eq(
        nn_module_load(f.model, "/nonexistent/ctrainer.safetensors", true, NULL),
        CT_ERR_IO); /* handled: the program goes on */
    f.rt.base.hooks.create_train_dataloader = silent_null_dl;
    TrainArgs a = {.train_dataset = ds, .num_epochs = 1, .per_device_batch_size = 2};
    ck_assert_int_eq(trainer_train(&f.rt.base, &a), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "create_train_dataloader returned NULL");
    /* a public entry point starts from a clean status */
    f.rt.base.hooks.create_train_dataloader = trainer_default_create_train_dataloader;
    ck_assert_int_eq(nn_module_load(f.model, "/nonexistent/x", true, NULL), CT_ERR_IO);
    ck_assert_int_eq(
        trainer_evaluate(&f.rt.base,
                         &(EvalArgs){.dataset = ds, .per_device_batch_size = 2}),
        CT_OK);
    ck_assert_int_eq(ct_last_status(), CT_OK);
    fixture_free(&f);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

START_TEST(plain_run)
{
    TU_MEM_BEGIN;
    Fixture f;
    fixture_init(&f, 0.1, true);
    Dataset *ds = regression_dataset(4);
    ck_assert_int_eq(trainer_train(&f.rt.base, &(TrainArgs){.train_dataset = ds,
                                                            .num_epochs = 2,
                                                            .per_device_batch_size = 2}),
                     CT_OK);
    assert_trace(&f, "E:on_init_end " TRAIN_DL RUN_BEG EPOCH_BEG STEP(0) UPD STEP(1)
                         UPD EPOCH_END RUN_EPOCH_END EPOCH_BEG STEP(0) UPD STEP(1)
                             UPD EPOCH_END RUN_EPOCH_END RUN_END);
    RunHistory *h = trainer_run_history(&f.rt.base);
    int64_t n;
    const double *v = run_history_values(h, "train_loss_epoch", &n);
    ck_assert_int_eq(n, 2);
    ck_assert(v[1] < v[0]); /* it learns */
    ck_assert_int_eq(run_history_current_epoch(h), 3);
    ck_assert_int_eq(trainer_global_step(&f.rt.base), 4);
    ck_assert_int_eq(optim_step_count(f.opt), 4);
    ck_assert_str_eq(trainer_stop_reason(&f.rt.base), "");
    const TrainerRunConfig *rc = trainer_run_config(&f.rt.base);
    ck_assert_int_eq(rc->num_update_steps_per_epoch, 2);
    ck_assert_int_eq(rc->max_num_train_steps, 4);
    ck_assert_int_eq(rc->train_total_batch_size, 2);
    ck_assert(!rc->has_eval);
    ck_assert(rc->train_dl_args.shuffle); /* the default */
    fixture_free(&f);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

START_TEST(run_with_eval)
{
    TU_MEM_BEGIN;
    Fixture f;
    fixture_init(&f, 0.1, true);
    Dataset *train = regression_dataset(4), *eval = regression_dataset(3);
    ck_assert_int_eq(trainer_train(&f.rt.base, &(TrainArgs){.train_dataset = train,
                                                            .eval_dataset = eval,
                                                            .num_epochs = 2,
                                                            .per_device_batch_size = 2}),
                     CT_OK);
#define EVAL_EPOCH                                                                       \
    "H:eval_epoch_start E:on_eval_epoch_start " EVAL_STEP(0)                             \
        EVAL_STEP(1) "H:eval_epoch_end E:on_eval_epoch_end "
    assert_trace(&f,
                 "E:on_init_end " TRAIN_DL EVAL_DL RUN_BEG EPOCH_BEG STEP(0) UPD STEP(1)
                     UPD EPOCH_END EVAL_EPOCH RUN_EPOCH_END EPOCH_BEG STEP(0) UPD STEP(1)
                         UPD EPOCH_END EVAL_EPOCH RUN_EPOCH_END RUN_END);
    /* the last eval loss is the model's MSE on the eval set */
    RunHistory *h = trainer_run_history(&f.rt.base);
    int64_t n;
    run_history_values(h, "eval_loss_epoch", &n);
    ck_assert_int_eq(n, 2);
    ck_assert_double_eq_tol(run_history_latest(h, "eval_loss_epoch"),
                            direct_mse(f.model, eval), 1e-6);
    ck_assert(
        !f.model->training); /* eval mode after an eval epoch, as in the reference */
    const TrainerRunConfig *rc = trainer_run_config(&f.rt.base);
    ck_assert(rc->has_eval);
    ck_assert(!rc->eval_dl_args.shuffle);
    ck_assert_int_eq(rc->eval_per_device_batch_size, 2);
    fixture_free(&f);
    data_dataset_free(train);
    data_dataset_free(eval);
    TU_MEM_END;
}
END_TEST

static Scheduler *make_step_lr(Trainer *t, Optimizer *o, void *user)
{
    return scheduler_step_lr(o, 1, 0.5);
}

/* 5 batches, k = 2: windows {0,1} {2,3} {4}; clipping once per update. */
START_TEST(accumulation_partial_window)
{
    TU_MEM_BEGIN;
    Fixture f;
    fixture_init(&f, 0.1, true);
    Dataset *ds = regression_dataset(10);
    ck_assert_int_eq(
        trainer_train(&f.rt.base, &(TrainArgs){.train_dataset = ds,
                                               .num_epochs = 1,
                                               .per_device_batch_size = 2,
                                               .gradient_accumulation_steps = 2,
                                               .gradient_clip_value = 10,
                                               .create_scheduler_fn = make_step_lr}),
        CT_OK);
#define CLIP_UPD "H:clip_gradients " UPD_SCHED
    assert_trace(&f,
                 "E:on_init_end " TRAIN_DL "H:create_scheduler " RUN_BEG EPOCH_BEG STEP(0)
                     STEP(1) CLIP_UPD STEP(2) STEP(3) CLIP_UPD STEP(4)
                         CLIP_UPD EPOCH_END RUN_EPOCH_END RUN_END);
    ck_assert_int_eq(f.rt.n_clip, 3); /* once per update, not per micro-batch */
    ck_assert_int_eq(trainer_global_step(&f.rt.base), 3);
    ck_assert_int_eq(scheduler_step_count(f.rt.base.scheduler), 3);
    ck_assert_double_eq_tol(optim_get_lr(f.opt, 0), 0.1 * 0.125, 1e-12);
    const TrainerRunConfig *rc = trainer_run_config(&f.rt.base);
    ck_assert_int_eq(rc->num_update_steps_per_epoch, 3);
    ck_assert_int_eq(rc->train_total_batch_size, 4);
    fixture_free(&f);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* TrainArgs gives no accumulation: the runtime's, from the environment that
 * `ctrainer launch` sets, applies. */
START_TEST(accumulation_from_environment)
{
    TU_MEM_BEGIN;
    setenv("CTRAINER_GRADIENT_ACCUMULATION_STEPS", "2", 1);
    Fixture f;
    fixture_init(&f, 0.1, true);
    unsetenv("CTRAINER_GRADIENT_ACCUMULATION_STEPS");
    Dataset *ds = regression_dataset(10);
    ck_assert_int_eq(trainer_train(&f.rt.base, &(TrainArgs){.train_dataset = ds,
                                                            .num_epochs = 1,
                                                            .per_device_batch_size = 2}),
                     CT_OK);
    ck_assert_int_eq(trainer_run_config(&f.rt.base)->gradient_accumulation_steps, 2);
    ck_assert_int_eq(trainer_global_step(&f.rt.base), 3);
    fixture_free(&f);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* max 4 updates with 3 per epoch: num_epochs becomes 2 and epoch 2 ends after
 * its first update; its end hooks and events still run. */
START_TEST(max_steps)
{
    TU_MEM_BEGIN;
    Fixture f;
    fixture_init(&f, 0.1, true);
    Dataset *ds = regression_dataset(10);
    ck_assert_int_eq(
        trainer_train(&f.rt.base, &(TrainArgs){.train_dataset = ds,
                                               .num_epochs = 10,
                                               .per_device_batch_size = 2,
                                               .gradient_accumulation_steps = 2,
                                               .max_num_train_steps = 4}),
        CT_OK);
    assert_trace(&f,
                 "E:on_init_end " TRAIN_DL RUN_BEG EPOCH_BEG STEP(0) STEP(1) UPD STEP(2)
                     STEP(3) UPD STEP(4) UPD EPOCH_END RUN_EPOCH_END EPOCH_BEG STEP(0)
                         STEP(1) UPD EPOCH_END RUN_EPOCH_END RUN_END);
    ck_assert_int_eq(trainer_run_config(&f.rt.base)->num_epochs, 2);
    ck_assert_int_eq(trainer_global_step(&f.rt.base), 4);
    ck_assert_int_eq(optim_step_count(f.opt), 4);
    ck_assert_int_eq(run_history_current_epoch(trainer_run_history(&f.rt.base)), 3);
    fixture_free(&f);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* A second callback, after the recorder, that records step ends. */
static CtStatus tail_step_end(Callback *cb, Trainer *t, const DataBatch *b,
                              const TrainerBatchOutput *o, int64_t step)
{
    rec(t, "T:%lld", (long long)step);
    return CT_OK;
}
static const CallbackVtable tail_vt = {.type = "Tail",
                                       .on_train_step_end = tail_step_end};

/* Stop from a callback mid-epoch: the step's backward and update are skipped
 * (before backward), later callbacks miss the event, the epoch ends. */
START_TEST(stop_from_callback_mid_epoch)
{
    TU_MEM_BEGIN;
    Fixture f;
    fixture_init(&f, 0.1, true);
    Callback *tail = calloc(1, sizeof *tail);
    tail->vt = &tail_vt;
    ck_assert_int_eq(trainer_add_callback(&f.rt.base, tail), CT_OK);
    f.rt.stop_at = "E:on_train_step_end";
    f.rt.stop_epoch = 2;
    f.rt.stop_step = 1;
    Dataset *ds = regression_dataset(6);
    ck_assert_int_eq(trainer_train(&f.rt.base, &(TrainArgs){.train_dataset = ds,
                                                            .num_epochs = 3,
                                                            .per_device_batch_size = 2}),
                     CT_OK);
#define TSTEP(i)                                                                         \
    "E:on_train_step_start H:calculate_train_batch_loss E:on_train_step_end:" #i         \
    " T:" #i " H:backward_step "
    assert_trace(&f, "E:on_init_end " TRAIN_DL RUN_BEG EPOCH_BEG TSTEP(0) UPD TSTEP(1)
                         UPD TSTEP(2) UPD EPOCH_END RUN_EPOCH_END EPOCH_BEG TSTEP(0) UPD
                 "E:on_train_step_start H:calculate_train_batch_loss "
                 "E:on_train_step_end:1 " STOPPED RUN_END);
    ck_assert_str_eq(trainer_stop_reason(&f.rt.base), "E:on_train_step_end");
    ck_assert_int_eq(optim_step_count(f.opt), 4);
    RunHistory *h = trainer_run_history(&f.rt.base);
    ck_assert_int_eq(run_history_current_epoch(h), 2); /* no increment after a stop */
    int64_t n;
    run_history_values(h, "train_loss_epoch", &n);
    ck_assert_int_eq(n, 1);
    fixture_free(&f);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* Stop from a hook at the epoch end: the epoch's loss and end events are
 * skipped. */
START_TEST(stop_from_hook_at_epoch_end)
{
    TU_MEM_BEGIN;
    Fixture f;
    fixture_init(&f, 0.1, true);
    f.rt.stop_at = "H:train_epoch_end";
    f.rt.stop_epoch = 1;
    Dataset *ds = regression_dataset(4), *eval = regression_dataset(2);
    ck_assert_int_eq(trainer_train(&f.rt.base, &(TrainArgs){.train_dataset = ds,
                                                            .eval_dataset = eval,
                                                            .num_epochs = 2,
                                                            .per_device_batch_size = 2}),
                     CT_OK);
    assert_trace(&f, "E:on_init_end " TRAIN_DL EVAL_DL RUN_BEG EPOCH_BEG STEP(0)
                         UPD STEP(1) UPD "H:train_epoch_end " STOPPED RUN_END);
    RunHistory *h = trainer_run_history(&f.rt.base);
    ck_assert(!run_history_has_metric(h, "train_loss_epoch"));
    ck_assert_int_eq(run_history_current_epoch(h), 1);
    fixture_free(&f);
    data_dataset_free(ds);
    data_dataset_free(eval);
    TU_MEM_END;
}
END_TEST

/* Stop from the optimizer_step hook mid-epoch: the update completes, then the
 * run stops at the end of the step. */
START_TEST(stop_from_hook_mid_epoch)
{
    TU_MEM_BEGIN;
    Fixture f;
    fixture_init(&f, 0.1, true);
    f.rt.stop_at = "H:optimizer_step";
    f.rt.stop_epoch = 1;
    f.rt.stop_step = 0;
    Dataset *ds = regression_dataset(4);
    ck_assert_int_eq(trainer_train(&f.rt.base, &(TrainArgs){.train_dataset = ds,
                                                            .num_epochs = 2,
                                                            .per_device_batch_size = 2}),
                     CT_OK);
    assert_trace(&f,
                 "E:on_init_end " TRAIN_DL RUN_BEG EPOCH_BEG STEP(0) UPD STOPPED RUN_END);
    ck_assert_int_eq(optim_step_count(f.opt), 1);
    ck_assert_str_eq(trainer_stop_reason(&f.rt.base), "H:optimizer_step");
    fixture_free(&f);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* Stop from a callback at the run-epoch end: the epoch counter stays. */
START_TEST(stop_from_callback_at_epoch_end)
{
    TU_MEM_BEGIN;
    Fixture f;
    fixture_init(&f, 0.1, true);
    f.rt.stop_at = "E:on_training_run_epoch_end";
    f.rt.stop_epoch = 1;
    Dataset *ds = regression_dataset(2);
    ck_assert_int_eq(trainer_train(&f.rt.base, &(TrainArgs){.train_dataset = ds,
                                                            .num_epochs = 3,
                                                            .per_device_batch_size = 2}),
                     CT_OK);
    assert_trace(&f, "E:on_init_end " TRAIN_DL RUN_BEG EPOCH_BEG STEP(0)
                         UPD EPOCH_END RUN_EPOCH_END STOPPED RUN_END);
    RunHistory *h = trainer_run_history(&f.rt.base);
    ck_assert_int_eq(run_history_current_epoch(h), 1);
    int64_t n;
    run_history_values(h, "train_loss_epoch", &n);
    ck_assert_int_eq(n, 1);
    /* a new run clears the request and trains again */
    f.rt.stop_at = NULL;
    f.rt.len = 0;
    f.rt.trace[0] = '\0';
    ck_assert_int_eq(trainer_train(&f.rt.base, &(TrainArgs){.train_dataset = ds,
                                                            .num_epochs = 1,
                                                            .per_device_batch_size = 2}),
                     CT_OK);
    assert_trace(&f,
                 TRAIN_DL RUN_BEG EPOCH_BEG STEP(0) UPD EPOCH_END RUN_EPOCH_END RUN_END);
    ck_assert_str_eq(trainer_stop_reason(&f.rt.base), "");
    fixture_free(&f);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* Stop during an eval epoch: the loop ends after the current batch. */
START_TEST(stop_in_eval)
{
    TU_MEM_BEGIN;
    Fixture f;
    fixture_init(&f, 0.1, true);
    f.rt.stop_at = "E:on_eval_step_end";
    f.rt.stop_epoch = 1;
    f.rt.stop_step = 0;
    Dataset *ds = regression_dataset(2), *eval = regression_dataset(6);
    ck_assert_int_eq(trainer_train(&f.rt.base, &(TrainArgs){.train_dataset = ds,
                                                            .eval_dataset = eval,
                                                            .num_epochs = 2,
                                                            .per_device_batch_size = 2}),
                     CT_OK);
    assert_trace(
        &f, "E:on_init_end " TRAIN_DL EVAL_DL RUN_BEG EPOCH_BEG STEP(0) UPD EPOCH_END
        "H:eval_epoch_start E:on_eval_epoch_start " EVAL_STEP(0) STOPPED RUN_END);
    ck_assert(ct_grad_enabled()); /* grad mode restored */
    fixture_free(&f);
    data_dataset_free(ds);
    data_dataset_free(eval);
    TU_MEM_END;
}
END_TEST

START_TEST(evaluate_run)
{
    TU_MEM_BEGIN;
    Fixture f;
    fixture_init(&f, 0.1, true);
    Dataset *ds = regression_dataset(5);
    RunHistory *h = trainer_run_history(&f.rt.base);
    run_history_update(h, "stale", 1.0);
    ck_assert_int_eq(
        trainer_evaluate(&f.rt.base,
                         &(EvalArgs){.dataset = ds, .per_device_batch_size = 2}),
        CT_OK);
    assert_trace(&f, "E:on_init_end " EVAL_DL
                     "H:evaluation_run_start E:on_evaluation_run_start "
                     "H:eval_epoch_start E:on_eval_epoch_start " EVAL_STEP(0) EVAL_STEP(1)
                         EVAL_STEP(2) "H:eval_epoch_end E:on_eval_epoch_end "
                                      "H:evaluation_run_end E:on_evaluation_run_end");
    ck_assert(!run_history_has_metric(h, "stale")); /* evaluate resets the history */
    /* the sample-weighted mean over batches of 2, 2, 1 is the dataset mean */
    ck_assert_double_eq_tol(run_history_latest(h, "evaluation_loss"),
                            direct_mse(f.model, ds), 1e-6);
    ck_assert_ptr_null(trainer_train_dataloader(&f.rt.base));
    ck_assert_int_eq(trainer_eval_dataloader_len(&f.rt.base), 3);
    ck_assert_int_eq(optim_step_count(f.opt), 0);
    fixture_free(&f);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* Copies the model's parameters (weight then bias) into out[3]. */
static void params_of(Module *m, double *out)
{
    tensor_copy_to_host(nn_module_get(m, "weight"), out, CT_F64);
    tensor_copy_to_host(nn_module_get(m, "bias"), out + 2, CT_F64);
}

/* k micro-batches of B give the parameters of one batch of k*B, also for a
 * partial last window (10 samples: windows 2+2, 2+2, 2 vs batches 4, 4, 2). */
START_TEST(accumulation_equivalence)
{
    TU_MEM_BEGIN;
    Dataset *ds = regression_dataset(10);
    double pa[3], pb[3], p0[3];
    Fixture a, b;
    fixture_init(&a, 0.3, false);
    fixture_init(&b, 0.3, false);
    params_of(a.model, p0);
    ck_assert_int_eq(
        trainer_train(&a.rt.base, &(TrainArgs){.train_dataset = ds,
                                               .num_epochs = 2,
                                               .per_device_batch_size = 2,
                                               .gradient_accumulation_steps = 2,
                                               .train_dataloader_args = &sequential}),
        CT_OK);
    ck_assert_int_eq(
        trainer_train(&b.rt.base, &(TrainArgs){.train_dataset = ds,
                                               .num_epochs = 2,
                                               .per_device_batch_size = 4,
                                               .train_dataloader_args = &sequential}),
        CT_OK);
    params_of(a.model, pa);
    params_of(b.model, pb);
    for (int i = 0; i < 3; i++) {
        ck_assert_double_eq_tol(pa[i], pb[i], 1e-5);
        ck_assert(fabs(pa[i] - p0[i]) > 1e-3); /* it did train */
    }
    ck_assert_int_eq(optim_step_count(a.opt), 6);
    fixture_free(&a);
    fixture_free(&b);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* The recorded epoch loss is the un-divided mean: with lr 0 it equals the
 * model's MSE over the data set, whatever k. */
START_TEST(epoch_loss_undivided)
{
    TU_MEM_BEGIN;
    Dataset *ds = regression_dataset(10);
    Fixture f;
    fixture_init(&f, 0.0, false);
    ck_assert_int_eq(
        trainer_train(&f.rt.base, &(TrainArgs){.train_dataset = ds,
                                               .num_epochs = 1,
                                               .per_device_batch_size = 2,
                                               .gradient_accumulation_steps = 4}),
        CT_OK);
    double expect = direct_mse(f.model, ds);
    ck_assert(expect > 0.1);
    ck_assert_double_eq_tol(
        run_history_latest(trainer_run_history(&f.rt.base), "train_loss_epoch"), expect,
        1e-6);
    fixture_free(&f);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* Clipping by value bounds each update: SGD lr 1 moves no parameter by more
 * than the clip value per update. */
START_TEST(clip_value_bounds_update)
{
    TU_MEM_BEGIN;
    Dataset *ds = regression_dataset(4);
    Fixture f;
    fixture_init(&f, 1.0, false);
    double p0[3], p1[3];
    params_of(f.model, p0);
    ck_assert_int_eq(
        trainer_train(&f.rt.base, &(TrainArgs){.train_dataset = ds,
                                               .num_epochs = 1,
                                               .per_device_batch_size = 2,
                                               .gradient_accumulation_steps = 2,
                                               .gradient_clip_value = 1e-3}),
        CT_OK);
    params_of(f.model, p1);
    ck_assert_int_eq(f.rt.n_clip, 1);
    for (int i = 0; i < 3; i++) {
        ck_assert(fabs(p1[i] - p0[i]) <= 1e-3 + 1e-7);
        ck_assert(fabs(p1[i] - p0[i]) > 1e-4);
    }
    fixture_free(&f);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* Clipping by norm: one update of SGD lr 1 moves the parameters by at most
 * the clip norm (in 2-norm). */
START_TEST(clip_norm_bounds_update)
{
    TU_MEM_BEGIN;
    Dataset *ds = regression_dataset(4);
    Fixture f;
    fixture_init(&f, 1.0, false);
    double p0[3], p1[3];
    params_of(f.model, p0);
    ck_assert_int_eq(trainer_train(&f.rt.base, &(TrainArgs){.train_dataset = ds,
                                                            .num_epochs = 1,
                                                            .per_device_batch_size = 4,
                                                            .gradient_clip_norm = 1e-3}),
                     CT_OK);
    params_of(f.model, p1);
    double d2 = 0;
    for (int i = 0; i < 3; i++) d2 += (p1[i] - p0[i]) * (p1[i] - p0[i]);
    ck_assert_double_eq_tol(sqrt(d2), 1e-3, 1e-6); /* the gradient norm is far above */
    ck_assert_int_eq(f.rt.n_clip, 1);
    fixture_free(&f);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------ placeholders */

/* Asserts the last error: status st and message "<fn>: <why>". */
static void assert_resolve_error(CtStatus st, const char *fn, const char *why)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s: %s", fn, why);
    ck_assert_int_eq(ct_last_status(), st);
    ck_assert_str_eq(ct_last_error(), msg);
    ct_clear_error();
}

typedef struct Resolved {
    double epochs, updates, train_len_x2p1, train_len_x0p3, constant;
    int64_t total;
} Resolved;

/* Records the placeholders, checks the errors of both resolvers inside a run
 * (identical in form, out left alone), then makes a OneCycle that lasts the
 * whole run. */
static Scheduler *make_one_cycle(Trainer *t, Optimizer *o, void *user)
{
    Resolved *r = user;
    ck_assert_int_eq(trainer_resolve(t, TRAINER_VALUE(TRAINER_NUM_EPOCHS), &r->epochs),
                     CT_OK);
    ck_assert_int_eq(trainer_resolve(t, TRAINER_VALUE(TRAINER_NUM_UPDATE_STEPS_PER_EPOCH),
                                     &r->updates),
                     CT_OK);
    ck_assert_int_eq(trainer_resolve(t, trainer_value(TRAINER_TRAIN_DATALOADER_LEN, 2, 1),
                                     &r->train_len_x2p1),
                     CT_OK);
    /* a constant ignores mul, even 0 */
    ck_assert_int_eq(
        trainer_resolve(t, (TrainerValue){.placeholder = TRAINER_CONSTANT, .add = 4.5},
                        &r->constant),
        CT_OK);
    double x = -7;
    int64_t n = -7;
    /* mul 0 with a placeholder is an error, not 0 and not 1 */
    ck_assert_int_eq(
        trainer_resolve(t, (TrainerValue){.placeholder = TRAINER_NUM_EPOCHS, .add = 3},
                        &x),
        CT_ERR_INVALID);
    assert_resolve_error(CT_ERR_INVALID, "trainer_resolve",
                         "TrainerValue.mul is 0 for NUM_EPOCHS: use TRAINER_VALUE(p) "
                         "for the placeholder itself, or TRAINER_CONSTANT for a "
                         "constant");
    /* a literal 0 for a mul that is wanted: an explicit constant */
    ck_assert_int_eq(
        trainer_resolve(t, trainer_value(TRAINER_CONSTANT, 0, 0.3), &r->train_len_x0p3),
        CT_OK);
    /* no eval set: the same error from both */
    ck_assert_int_eq(trainer_resolve(t, TRAINER_VALUE(TRAINER_EVAL_DATALOADER_LEN), &x),
                     CT_ERR_INVALID);
    assert_resolve_error(CT_ERR_INVALID, "trainer_resolve",
                         "EVAL_DATALOADER_LEN: this run has no eval loader");
    ck_assert_int_eq(
        trainer_resolve_product(t, TRAINER_NUM_EPOCHS, TRAINER_EVAL_DATALOADER_LEN, &n),
        CT_ERR_INVALID);
    assert_resolve_error(CT_ERR_INVALID, "trainer_resolve_product",
                         "EVAL_DATALOADER_LEN: this run has no eval loader");
    ck_assert_int_eq(trainer_resolve(t, TRAINER_VALUE((TrainerPlaceholder)99), &x),
                     CT_ERR_INVALID);
    assert_resolve_error(CT_ERR_INVALID, "trainer_resolve", "unknown placeholder 99");
    ck_assert_int_eq(
        trainer_resolve_product(t, (TrainerPlaceholder)99, TRAINER_NUM_EPOCHS, &n),
        CT_ERR_INVALID);
    assert_resolve_error(CT_ERR_INVALID, "trainer_resolve_product",
                         "unknown placeholder 99");
    ck_assert_double_eq(x, -7);
    ck_assert_int_eq(n, -7);
    ck_assert_int_eq(trainer_resolve_product(t, TRAINER_NUM_EPOCHS,
                                             TRAINER_NUM_UPDATE_STEPS_PER_EPOCH,
                                             &r->total),
                     CT_OK);
    return scheduler_one_cycle_lr(
        o, &(OneCycleArgs){.max_lr = 0.1, .total_steps = r->total});
}

START_TEST(placeholders_one_cycle)
{
    TU_MEM_BEGIN;
    Dataset *ds = regression_dataset(10);
    Fixture f;
    fixture_init(&f, 0.1, false);
    /* before a run: the same error from both, out left alone */
    double x = -7;
    int64_t n = -7;
    ck_assert_int_eq(trainer_resolve(&f.rt.base, TRAINER_VALUE(TRAINER_NUM_EPOCHS), &x),
                     CT_ERR_STATE);
    assert_resolve_error(CT_ERR_STATE, "trainer_resolve",
                         "placeholders resolve only during a run (e.g. in "
                         "create_scheduler_fn), once the run config exists");
    ck_assert_int_eq(trainer_resolve_product(&f.rt.base, TRAINER_NUM_EPOCHS,
                                             TRAINER_NUM_UPDATE_STEPS_PER_EPOCH, &n),
                     CT_ERR_STATE);
    assert_resolve_error(CT_ERR_STATE, "trainer_resolve_product",
                         "placeholders resolve only during a run (e.g. in "
                         "create_scheduler_fn), once the run config exists");
    ck_assert_int_eq(trainer_resolve(NULL, TRAINER_VALUE(TRAINER_NUM_EPOCHS), &x),
                     CT_ERR_NULL);
    assert_resolve_error(CT_ERR_NULL, "trainer_resolve", "NULL trainer");
    ck_assert_int_eq(
        trainer_resolve_product(NULL, TRAINER_NUM_EPOCHS, TRAINER_NUM_EPOCHS, &n),
        CT_ERR_NULL);
    assert_resolve_error(CT_ERR_NULL, "trainer_resolve_product", "NULL trainer");
    ck_assert_int_eq(trainer_resolve(&f.rt.base, TRAINER_VALUE(TRAINER_NUM_EPOCHS), NULL),
                     CT_ERR_NULL);
    assert_resolve_error(CT_ERR_NULL, "trainer_resolve", "NULL out");
    ck_assert_int_eq(
        trainer_resolve_product(&f.rt.base, TRAINER_NUM_EPOCHS, TRAINER_NUM_EPOCHS, NULL),
        CT_ERR_NULL);
    assert_resolve_error(CT_ERR_NULL, "trainer_resolve_product", "NULL out");
    ck_assert_double_eq(x, -7);
    ck_assert_int_eq(n, -7);
    Resolved r = {0};
    /* 5 batches, k = 2: 3 updates per epoch; OneCycle must last exactly 6
     * updates (one more scheduler step would be an error) */
    ck_assert_int_eq(
        trainer_train(&f.rt.base, &(TrainArgs){.train_dataset = ds,
                                               .num_epochs = 2,
                                               .per_device_batch_size = 2,
                                               .gradient_accumulation_steps = 2,
                                               .create_scheduler_fn = make_one_cycle,
                                               .scheduler_user = &r}),
        CT_OK);
    ck_assert_double_eq(r.epochs, 2);
    ck_assert_double_eq(r.updates, 3);
    ck_assert_double_eq(r.train_len_x2p1, 11);
    ck_assert_double_eq(r.train_len_x0p3, 0.3);
    ck_assert_double_eq(r.constant, 4.5);
    ck_assert_int_eq(r.total, 6);
    ck_assert_int_eq(scheduler_step_count(f.rt.base.scheduler), 6);
    /* the schedule is used up exactly: one more step is past its end */
    ck_assert_int_eq(scheduler_step(f.rt.base.scheduler), CT_ERR_STATE);
    ct_clear_error();
    fixture_free(&f);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------ bad input */

START_TEST(bad_config)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(1, 0);
    Module *m = nn_linear(2, 1, true, &g);
    Optimizer *o = optim_sgd_create(m, &(SgdArgs){.lr = 0.1});
    NnLoss *l = nn_loss_mse(CT_REDUCTION_MEAN);
    ck_assert_ptr_null(trainer_create(&(TrainerConfig){.loss = l, .optimizer = o}));
    tu_assert_error(CT_ERR_NULL, "TrainerConfig.model is NULL");
    /* the callbacks given are freed on failure (ASan checks) */
    ck_assert_ptr_null(
        trainer_create(&(TrainerConfig){.model = m,
                                        .loss = l,
                                        .callbacks = (Callback *[]){recorder_create()},
                                        .n_callbacks = 1}));
    tu_assert_error(CT_ERR_NULL, "TrainerConfig.optimizer is NULL");
    ck_assert_ptr_null(trainer_create(&(TrainerConfig){.model = m, .optimizer = o}));
    tu_assert_error(CT_ERR_NULL, "no loss");
    ck_assert_ptr_null(trainer_create(&(TrainerConfig){
        .model = m,
        .loss = l,
        .optimizer = o,
        .callbacks = (Callback *[]){recorder_create(), recorder_create()},
        .n_callbacks = 2}));
    tu_assert_error(CT_ERR_INVALID, "a Recorder callback is already in the list");
    ct_clear_error();
    ck_assert_ptr_null(trainer_create(&(TrainerConfig){.model = m,
                                                       .loss = l,
                                                       .optimizer = o,
                                                       .callbacks = (Callback *[]){NULL},
                                                       .n_callbacks = 1}));
    tu_assert_error(CT_ERR_NULL, "callback 0 is NULL");
    optim_free(o);
    nn_loss_free(l);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

START_TEST(bad_train_args)
{
    TU_MEM_BEGIN;
    Fixture f;
    fixture_init(&f, 0.1, true);
    Dataset *ds = regression_dataset(4);
    Trainer *t = &f.rt.base;
    ck_assert_int_eq(
        trainer_train(t, &(TrainArgs){.train_dataset = ds, .per_device_batch_size = 2}),
        CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "num_epochs 0: need at least 1 epoch");
    ck_assert_int_eq(trainer_train(t, &(TrainArgs){.train_dataset = ds, .num_epochs = 1}),
                     CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "per_device_batch_size 0: must be > 0");
    ck_assert_int_eq(
        trainer_train(t, &(TrainArgs){.num_epochs = 1, .per_device_batch_size = 2}),
        CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "train_dataset is NULL");
    ck_assert_int_eq(trainer_train(t, &(TrainArgs){.train_dataset = ds,
                                                   .num_epochs = 1,
                                                   .per_device_batch_size = 2,
                                                   .gradient_clip_value = 1,
                                                   .gradient_clip_norm = 1}),
                     CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "not both");
    ck_assert_int_eq(trainer_train(t, &(TrainArgs){.train_dataset = ds,
                                                   .num_epochs = 1,
                                                   .per_device_batch_size = 2,
                                                   .gradient_accumulation_steps = -1}),
                     CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "gradient_accumulation_steps -1");
    ck_assert_int_eq(trainer_evaluate(t, &(EvalArgs){.dataset = ds}), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "trainer_evaluate: per_device_batch_size 0");
    /* a sampler with shuffle YES is the loader's error, prefixed */
    Sampler *smp = data_sampler_sequential_create(4);
    ck_assert_int_eq(
        trainer_train(t, &(TrainArgs){.train_dataset = ds,
                                      .num_epochs = 1,
                                      .per_device_batch_size = 2,
                                      .train_dataloader_args =
                                          &(TrainerLoaderArgs){.sampler = smp,
                                                               .shuffle = TRAINER_YES}}),
        CT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(ct_last_error(), "trainer: train loader:"));
    /* 4 samples, batch 8, drop_last: no batches, whatever the step limit */
    for (int64_t max = 0; max <= 10; max += 10) {
        ck_assert_int_eq(
            trainer_train(
                t, &(TrainArgs){.train_dataset = ds,
                                .num_epochs = 1,
                                .max_num_train_steps = max,
                                .per_device_batch_size = 8,
                                .train_dataloader_args =
                                    &(TrainerLoaderArgs){.drop_last = TRAINER_YES}}),
            CT_ERR_INVALID);
        tu_assert_error(CT_ERR_INVALID, "the train loader has no batches");
    }
    ct_clear_error();
    /* nothing ran: only the loader hooks are in the trace */
    assert_trace(&f, "E:on_init_end " TRAIN_DL TRAIN_DL TRAIN_DL);
    data_sampler_free(smp);
    fixture_free(&f);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* A hook error aborts the run and is returned; no further hooks run. */
static CtStatus failing_zero_grad(Trainer *t)
{
    rec(t, "H:optimizer_zero_grad");
    return ct_error(CT_ERR_STATE, "zero_grad failed on purpose");
}

START_TEST(hook_error_aborts)
{
    TU_MEM_BEGIN;
    Fixture f;
    fixture_init(&f, 0.1, true);
    f.rt.base.hooks.optimizer_zero_grad = failing_zero_grad;
    Dataset *ds = regression_dataset(4);
    ck_assert_int_eq(trainer_train(&f.rt.base, &(TrainArgs){.train_dataset = ds,
                                                            .num_epochs = 1,
                                                            .per_device_batch_size = 2}),
                     CT_ERR_STATE);
    tu_assert_error(CT_ERR_STATE, "zero_grad failed on purpose");
    assert_trace(&f, "E:on_init_end " TRAIN_DL RUN_BEG EPOCH_BEG STEP(0) UPD);
    fixture_free(&f);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------- the update's own zeroing */

static int zero_grad_calls;
static CtStatus counting_zero_grad(Trainer *t)
{
    zero_grad_calls++;
    return trainer_default_optimizer_zero_grad(t);
}

static Scheduler *step_lr(Trainer *t, Optimizer *o, void *user)
{
    (void)t;
    (void)user;
    return scheduler_step_lr(o, 2, 0.5);
}

/* With the default step, schedule and zero hooks, the step zeroes the
 * gradients in its own pass: one op fewer per update (a packed model) than
 * with a zero_grad hook that calls the default, which still runs once per
 * update, and the same weights bit for bit; plainly, and with 2-batch
 * accumulation windows and a step scheduler (_i = 1). */
START_TEST(default_update_zeroes_in_the_step)
{
    TU_MEM_BEGIN;
    Dataset *ds = regression_dataset(8);
    Fixture f[2];
    uint64_t ops[2];
    double p[2][3];
    int64_t accum = _i ? 2 : 1, updates = 2 * 4 / accum;
    zero_grad_calls = 0;
    for (int k = 0; k < 2; k++) {
        fixture_init(&f[k], 0.1, false);
        ck_assert_int_eq(nn_module_pack(f[k].model), CT_OK);
        f[k].rt.base.hooks = (TrainerHooks){0};
        if (k == 1) f[k].rt.base.hooks.optimizer_zero_grad = counting_zero_grad;
        uint64_t before = ct_op_count();
        ck_assert_int_eq(
            trainer_train(&f[k].rt.base,
                          &(TrainArgs){.train_dataset = ds,
                                       .num_epochs = 2,
                                       .per_device_batch_size = 2,
                                       .gradient_accumulation_steps = accum,
                                       .create_scheduler_fn = _i ? step_lr : NULL,
                                       .train_dataloader_args = &sequential}),
            CT_OK);
        ops[k] = ct_op_count() - before;
        params_of(f[k].model, p[k]);
        if (_i) ck_assert_double_eq(optim_get_lr(f[k].opt, 0), 0.1 * 0.5 * 0.5);
    }
    ck_assert_int_eq(zero_grad_calls, updates);
    ck_assert_uint_eq(ops[1] - ops[0], (uint64_t)updates);
    for (int i = 0; i < 3; i++) ck_assert(p[0][i] == p[1][i]);
    for (int k = 0; k < 2; k++) fixture_free(&f[k]);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------ custom events */

typedef struct Custom {
    Callback base;
    int calls;
    int last_payload;
} Custom;

static CtStatus custom_event(Callback *cb, Trainer *t, const char *event, void *payload)
{
    Custom *c = (Custom *)cb;
    if (strcmp(event, "my_event") != 0) return CT_OK;
    c->calls++;
    c->last_payload = *(int *)payload;
    rec(t, "C:%s:%d", event, c->last_payload);
    return CT_OK;
}
static const CallbackVtable custom_vt = {.type = "Custom", .custom = custom_event};

/* A subclass that fires a custom event from a hook, calling the default as
 * super. */
static CtStatus epoch_end_with_event(Trainer *t)
{
    int epoch = (int)run_history_current_epoch(trainer_run_history(t));
    CtStatus st = trainer_callback_event(t, "my_event", &epoch);
    return st == CT_OK ? trainer_default_train_epoch_end(t) : st;
}

START_TEST(custom_events)
{
    TU_MEM_BEGIN;
    Fixture f;
    fixture_init(&f, 0.1, true);
    Custom *c = calloc(1, sizeof *c);
    c->base.vt = &custom_vt;
    ck_assert_int_eq(trainer_add_callback(&f.rt.base, &c->base), CT_OK);
    Custom *dup = calloc(1, sizeof *dup);
    dup->base.vt = &custom_vt;
    ck_assert_int_eq(trainer_add_callback(&f.rt.base, &dup->base), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "a Custom callback is already in the list");
    ck_assert_int_eq(callback_list_count(trainer_callbacks(&f.rt.base)), 2);
    int x = 42;
    ck_assert_int_eq(trainer_callback_event(&f.rt.base, "my_event", &x), CT_OK);
    ck_assert_int_eq(trainer_callback_event(&f.rt.base, "other_event", &x), CT_OK);
    ck_assert_int_eq(c->calls, 1);
    ck_assert_int_eq(trainer_callback_event(&f.rt.base, "", &x), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "empty event name");
    f.rt.base.hooks.train_epoch_end = epoch_end_with_event;
    f.rt.len = 0;
    Dataset *ds = regression_dataset(2);
    ck_assert_int_eq(trainer_train(&f.rt.base, &(TrainArgs){.train_dataset = ds,
                                                            .num_epochs = 2,
                                                            .per_device_batch_size = 2}),
                     CT_OK);
    assert_trace(&f, TRAIN_DL RUN_BEG EPOCH_BEG STEP(0) UPD
                 "C:my_event:1 E:on_train_epoch_end " RUN_EPOCH_END EPOCH_BEG STEP(0) UPD
                 "C:my_event:2 E:on_train_epoch_end " RUN_EPOCH_END RUN_END);
    ck_assert_int_eq(c->calls, 3);
    ck_assert_ptr_eq(callback_list_find(trainer_callbacks(&f.rt.base), "Custom"),
                     &c->base);
    fixture_free(&f);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* A loss function instead of an NnLoss, and a batch output's extras. */
static Tensor *l1_loss_fn(Trainer *t, Tensor *pred, Tensor *target)
{
    return tensor_l1_loss(pred, target, CT_REDUCTION_MEAN);
}

START_TEST(loss_fn_and_accessors)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(7, 0);
    Module *m = nn_linear(2, 1, true, &g);
    Optimizer *o = optim_sgd_create(m, &(SgdArgs){.lr = 0.0});
    Trainer *t = trainer_create(&(TrainerConfig){
        .model = m, .loss_fn = l1_loss_fn, .optimizer = o, .no_callbacks = true});
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_null(trainer_run_config(t));
    ck_assert_int_eq(trainer_device(t).type, CT_DEVICE_CPU);
    ck_assert_ptr_eq(trainer_model(t), m);
    Dataset *ds = regression_dataset(6);
    trainer_limit_batches(t, 2, 0);
    ck_assert_int_eq(trainer_train(t, &(TrainArgs){.train_dataset = ds,
                                                   .num_epochs = 1,
                                                   .per_device_batch_size = 2}),
                     CT_OK);
    ck_assert_int_eq(trainer_train_dataloader_len(t), 2);
    ck_assert_int_eq(trainer_run_config(t)->num_update_steps_per_epoch, 2);
    ck_assert_int_eq(trainer_global_step(t), 2);
    ck_assert_int_eq(trainer_epoch_step(t), -1);
    char *json = trainer_run_config_to_json(trainer_run_config(t));
    ck_assert_ptr_nonnull(strstr(json, "\"num_update_steps_per_epoch\": 2"));
    ck_assert_ptr_nonnull(strstr(json, "\"mixed_precision\": \"no\""));
    ck_assert_ptr_nonnull(strstr(json, "\"eval_dl_args\": null"));
    free(json);
    /* the L1 loss of the first 4 samples at lr 0 */
    DataLoader *dl = data_loader_create(ds, &(DataLoaderArgs){.batch_size = 4});
    DataBatch b;
    data_loader_next(dl, &b);
    CtScope *s = ct_scope_open();
    double expect =
        tensor_item(tensor_l1_loss(nn_forward(m, b.t[0]), b.t[1], CT_REDUCTION_MEAN));
    ct_scope_close(s);
    data_loader_free(dl);
    (void)expect; /* the train order is shuffled: compare with a bound below */
    double got = run_history_latest(trainer_run_history(t), "train_loss_epoch");
    ck_assert(got > 0 && isfinite(got));
    /* gather through the trainer: a detached copy on one process */
    Tensor *x = tu_tensor(CT_F32, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    s = ct_scope_open();
    tu_assert_values(trainer_gather_padded(t, x, -1), ((double[]){1, 2, 3}), 3, 0, 0);
    ct_scope_close(s);
    tensor_free(x);
    trainer_free(t);
    optim_free(o);
    nn_module_free(m);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* Loaders built by overridden hooks that never call the defaults: the run
 * config reads their arguments back from the loaders themselves. */
static DataLoader *own_train_dl(Trainer *t, int64_t bs, const TrainerLoaderArgs *u)
{
    const Dataset *const *ds = t->user;
    return data_loader_create(ds[0],
                              &(DataLoaderArgs){.batch_size = 5, .drop_last = true});
}
static DataLoader *own_eval_dl(Trainer *t, int64_t bs, const TrainerLoaderArgs *u)
{
    const Dataset *const *ds = t->user;
    return data_loader_create(ds[1], &(DataLoaderArgs){.batch_size = 4, .seed = 11});
}

START_TEST(run_config_from_own_loaders)
{
    TU_MEM_BEGIN;
    Fixture f; /* for its model, loss and optimizer */
    fixture_init(&f, 0.1, false);
    const Dataset *ds[2] = {regression_dataset(12), regression_dataset(6)};
    Trainer *t = trainer_create(&(TrainerConfig){
        .model = f.model,
        .loss = f.loss,
        .optimizer = f.opt,
        .no_callbacks = true,
        .user = ds,
        .hooks = {.create_train_dataloader = own_train_dl,
                  .create_eval_dataloader = own_eval_dl},
    });
    ck_assert_ptr_nonnull(t);
    /* 12 samples in batches of 5 with drop_last: 2 batches; k = 2 */
    ck_assert_int_eq(trainer_train(t, &(TrainArgs){.train_dataset = ds[0],
                                                   .eval_dataset = ds[1],
                                                   .num_epochs = 3,
                                                   .per_device_batch_size = 2,
                                                   .gradient_accumulation_steps = 2}),
                     CT_OK);
    const TrainerRunConfig *rc = trainer_run_config(t);
    ck_assert_int_eq(rc->train_per_device_batch_size, 5);
    ck_assert_int_eq(rc->train_total_batch_size, 10);
    ck_assert_int_eq(rc->num_update_steps_per_epoch, 1);
    ck_assert_int_eq(rc->max_num_train_steps, 3);
    ck_assert_int_eq(trainer_global_step(t), 3);
    ck_assert(rc->train_dl_args.drop_last && !rc->train_dl_args.shuffle);
    ck_assert_int_eq(rc->eval_per_device_batch_size, 4);
    ck_assert_int_eq(rc->eval_total_batch_size, 4);
    ck_assert_uint_eq(rc->eval_dl_args.seed, 11);
    char *json = trainer_run_config_to_json(rc);
    ck_assert_ptr_nonnull(json);
    ck_assert_ptr_nonnull(strstr(json, "\"train_dl_args\": {\"batch_size\": 5, "
                                       "\"shuffle\": false, \"drop_last\": true"));
    ck_assert_ptr_nonnull(strstr(json, "\"eval_dl_args\": {\"batch_size\": 4, "
                                       "\"shuffle\": false, \"drop_last\": false, "
                                       "\"seed\": 11"));
    ck_assert_ptr_nonnull(strstr(json, "\"train_per_device_batch_size\": 5"));
    ck_assert_ptr_nonnull(strstr(json, "\"train_total_batch_size\": 10"));
    free(json);
    /* an evaluation run: its batch size is the eval loader's */
    ck_assert_int_eq(
        trainer_evaluate(t, &(EvalArgs){.dataset = ds[1], .per_device_batch_size = 2}),
        CT_OK);
    ck_assert_int_eq(trainer_run_config(t)->eval_per_device_batch_size, 4);
    ck_assert_int_eq(trainer_run_config(t)->train_per_device_batch_size, 4);
    trainer_free(t);
    fixture_free(&f);
    data_dataset_free((Dataset *)ds[0]);
    data_dataset_free((Dataset *)ds[1]);
    TU_MEM_END;
}
END_TEST

/* CTRAINER_LIMIT_BATCHES: trainer_init caps the batches itself (no callback
 * is added); an explicit LimitBatches in the config wins; a bad value fails
 * trainer_init. */
START_TEST(limit_batches_from_env)
{
    TU_MEM_BEGIN;
    setenv("CTRAINER_LIMIT_BATCHES", "2", 1);
    Fixture f;
    fixture_init(&f, 0.1, false);
    Trainer *t = &f.rt.base;
    CallbackList *l = trainer_callbacks(t);
    ck_assert_int_eq(callback_list_count(l), 1);
    ck_assert_str_eq(callback_type(callback_list_at(l, 0)), "Recorder");
    Dataset *train = regression_dataset(10), *eval = regression_dataset(6);
    f.rt.record = true;
    ck_assert_int_eq(trainer_train(t, &(TrainArgs){.train_dataset = train,
                                                   .eval_dataset = eval,
                                                   .num_epochs = 2,
                                                   .per_device_batch_size = 2,
                                                   .train_dataloader_args = &sequential}),
                     CT_OK);
    /* 5 train and 3 eval batches per epoch, limited to 2 each */
    assert_trace(
        &f, TRAIN_DL EVAL_DL RUN_BEG EPOCH_BEG STEP(0) UPD STEP(1) UPD EPOCH_END
        "H:eval_epoch_start E:on_eval_epoch_start " EVAL_STEP(0) EVAL_STEP(
            1) "H:eval_epoch_end E:on_eval_epoch_end " RUN_EPOCH_END EPOCH_BEG STEP(0)
            UPD STEP(1) UPD EPOCH_END
        "H:eval_epoch_start E:on_eval_epoch_start " EVAL_STEP(0)
            EVAL_STEP(1) "H:eval_epoch_end E:on_eval_epoch_end " RUN_EPOCH_END RUN_END);
    ck_assert_int_eq(trainer_global_step(t), 4);
    ck_assert_int_eq(trainer_run_config(t)->num_update_steps_per_epoch, 2);
    fixture_free(&f);

    /* an explicit LimitBatches wins over the environment's */
    CtGenerator g = ct_generator(1, 0);
    Module *m = nn_linear(2, 1, true, &g);
    Optimizer *o = optim_sgd_create(m, &(SgdArgs){.lr = 0.1});
    NnLoss *loss = nn_loss_mse(CT_REDUCTION_MEAN);
    Trainer *t2 = trainer_create(
        &(TrainerConfig){.model = m,
                         .loss = loss,
                         .optimizer = o,
                         .callbacks = (Callback *[]){callback_limit_batches_create(3)},
                         .n_callbacks = 1});
    ck_assert_ptr_nonnull(t2);
    ck_assert_int_eq(callback_list_count(trainer_callbacks(t2)), 1);
    ck_assert_int_eq(trainer_train(t2, &(TrainArgs){.train_dataset = train,
                                                    .num_epochs = 1,
                                                    .per_device_batch_size = 2}),
                     CT_OK);
    ck_assert_int_eq(trainer_global_step(t2), 3);
    trainer_free(t2);

    /* a bad value: trainer_init fails and frees the callbacks given */
    setenv("CTRAINER_LIMIT_BATCHES", "two", 1);
    ck_assert_ptr_null(
        trainer_create(&(TrainerConfig){.model = m,
                                        .loss = loss,
                                        .optimizer = o,
                                        .callbacks = (Callback *[]){recorder_create()},
                                        .n_callbacks = 1}));
    tu_assert_error(CT_ERR_INVALID, "CTRAINER_LIMIT_BATCHES=\"two\"");

    /* "none": all 5 batches */
    setenv("CTRAINER_LIMIT_BATCHES", "none", 1);
    t2 = trainer_create(
        &(TrainerConfig){.model = m, .loss = loss, .optimizer = o, .no_callbacks = true});
    ck_assert_ptr_nonnull(t2);
    ck_assert_int_eq(callback_list_count(trainer_callbacks(t2)), 0);
    ck_assert_int_eq(trainer_train(t2, &(TrainArgs){.train_dataset = train,
                                                    .num_epochs = 1,
                                                    .per_device_batch_size = 2}),
                     CT_OK);
    ck_assert_int_eq(trainer_global_step(t2), 5);
    trainer_free(t2);
    unsetenv("CTRAINER_LIMIT_BATCHES");

    optim_free(o);
    nn_loss_free(loss);
    nn_module_free(m);
    data_dataset_free(train);
    data_dataset_free(eval);
    TU_MEM_END;
}
END_TEST

static Suite *trainer_loop_suite(void)
{
    Suite *s = suite_create("trainer_loop");
    TCase *tc = tcase_create("sequences");
    tcase_add_test(tc, plain_run);
    tcase_add_test(tc, run_with_eval);
    tcase_add_test(tc, accumulation_partial_window);
    tcase_add_test(tc, accumulation_from_environment);
    tcase_add_test(tc, max_steps);
    tcase_add_test(tc, stop_from_callback_mid_epoch);
    tcase_add_test(tc, stop_from_hook_at_epoch_end);
    tcase_add_test(tc, stop_from_hook_mid_epoch);
    tcase_add_test(tc, stop_from_callback_at_epoch_end);
    tcase_add_test(tc, stop_in_eval);
    tcase_add_test(tc, evaluate_run);
    tcase_add_test(tc, custom_events);
    tcase_add_test(tc, hook_error_aborts);
    tcase_add_test(tc, limit_batches_from_env);
    suite_add_tcase(s, tc);
    TCase *num = tcase_create("numerics");
    tcase_add_test(num, accumulation_equivalence);
    tcase_add_loop_test(num, default_update_zeroes_in_the_step, 0, 2);
    tcase_add_test(num, epoch_loss_undivided);
    tcase_add_test(num, clip_value_bounds_update);
    tcase_add_test(num, clip_norm_bounds_update);
    tcase_add_test(num, placeholders_one_cycle);
    tcase_add_test(num, loss_fn_and_accessors);
    tcase_add_test(num, run_config_from_own_loaders);
    suite_add_tcase(s, num);
    TCase *bad = tcase_create("bad_input");
    tcase_add_test(bad, bad_config);
    tcase_add_test(bad, bad_train_args);
    tcase_add_test(bad, stale_error_is_not_reported);
    suite_add_tcase(s, bad);
    return s;
}

int main(void)
{
    return tu_run(trainer_loop_suite());
}
