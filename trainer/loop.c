/* The training and evaluation loops (pytorch-accelerated §2.5, with its
 * bugs fixed: see trainer.h). Control flow: every function returns CT_OK or
 * an error (which ends the run at once); a stop agreed at a stop point sets
 * state->stop_agreed and unwinds with CT_OK to the run level, which fires
 * on_stop_training_error and the run-end hook and event. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer_internal.h"

/* Return on error; unwind (CT_OK) when a stop is agreed. */
#define TRY(expr)                                                                        \
    do {                                                                                 \
        CtStatus try_st_ = (expr);                                                       \
        if (try_st_ != CT_OK) return try_st_;                                            \
    } while (0)
#define TRY_STOP(t, expr)                                                                \
    do {                                                                                 \
        TRY(expr);                                                                       \
        if (trainer_stop_point(t)) return CT_OK;                                         \
    } while (0)

/* ------------------------------------------------ stop points and events */

bool trainer_stop_point(Trainer *t)
{
    TrainerState *s = t->state;
    if (s->stop_agreed) return true;
    double flag = s->stop_requested ? 1.0 : 0.0;
    /* the reduce fails when the processes cannot agree (a rank died): unwind
     * as for a stop, and end the run with that error */
    CtStatus st = runtime_reduce_f64(s->rt, &flag, 1, RUNTIME_REDUCE_MAX);
    if (st != CT_OK) {
        s->stop_error = st;
        return s->stop_agreed = true;
    }
    if (flag > 0 && !s->stop_requested)
        trainer_stop(t, "stop requested by another process");
    s->stop_agreed = flag > 0;
    return s->stop_agreed;
}

CtStatus trainer_fire(Trainer *t, CallbackEvent ev, const CallbackEventArgs *args)
{
    return callback_list_dispatch(t->state->callbacks, t, ev, args);
}

CtStatus trainer_record_loss(Trainer *t, const LossTracker *lt, const char *name)
{
    double v[2] = {0, lt->count};
    TRY(loss_tracker_total(lt, &v[0])); /* the epoch's one host read */
    TRY(runtime_reduce_f64(t->state->rt, v, 2, RUNTIME_REDUCE_SUM));
    if (v[1] <= 0) return CT_OK; /* no batches: nothing to record */
    return run_history_update(t->state->history, name, v[0] / v[1]);
}

/* Validates a batch output and adds its loss to the tracker. A batch whose
 * rows are all wrap-around duplicates of a sharded loader may count 0
 * samples. */
static CtStatus track(LossTracker *lt, const TrainerBatchOutput *out, bool all_padding,
                      const char *hook)
{
    if (!out->loss || tensor_numel(out->loss) != 1)
        return ct_error(CT_ERR_INVALID,
                        "trainer: %s gave %s loss (one-element tensor "
                        "expected)",
                        hook, out->loss ? "a multi-element" : "no");
    if (out->batch_size < 0 || (out->batch_size == 0 && !all_padding))
        return ct_error(CT_ERR_INVALID, "trainer: %s gave batch_size %lld (must be > 0)",
                        hook, (long long)out->batch_size);
    /* accumulated on the device: no host read per step */
    CtStatus st = loss_tracker_add(lt, out->loss, out->batch_size);
    return st == CT_OK ? st : ct_error_wrap(st, "trainer: tracking the %s loss", hook);
}

/* Fetches batch `step` of a loader; false (status in *st) at its end. */
static bool next_batch(DataLoader *dl, DataBatch *b, CtStatus *st)
{
    if (data_loader_next(dl, b)) return true;
    *st = data_loader_status(dl);
    return false;
}

/* ------------------------------------------------------------ train step */

typedef struct StepPlan {
    int64_t step, window; /* micro-batches in this accumulation window */
    bool update;
} StepPlan;

/* With a loss scaler: unscales the gradients once; true when they hold an
 * inf or NaN and the step must be skipped (counted in the run history as
 * skipped_steps). */
static CtStatus unscale(Trainer *t, bool *skip)
{
    TrainerState *s = t->state;
    *skip = false;
    if (!s->scaler) return CT_OK;
    TRY(scaler_unscale(s->scaler, nn_module_grad_block(t->model)));
    *skip = scaler_found_inf(s->scaler);
    scaler_update(s->scaler);
    if (!*skip) return CT_OK;
    return run_history_update(s->history, "skipped_steps",
                              (double)scaler_skipped_steps(s->scaler));
}

/* Whether step, schedule and zero are the default hooks: then the step
 * zeroes the gradients in its own pass (optim_step_zero_grad), which is the
 * same as stepping, scheduling and zeroing, since the default scheduler
 * step does not look at the gradients. */
static bool default_update(const Trainer *t)
{
    return HOOK(t, optimizer_step) == trainer_default_optimizer_step &&
           HOOK(t, optimizer_zero_grad) == trainer_default_optimizer_zero_grad &&
           (!t->scheduler || HOOK(t, scheduler_step) == trainer_default_scheduler_step);
}

static CtStatus step_schedule_zero(Trainer *t)
{
    if (!default_update(t)) {
        TRY(HOOK(t, optimizer_step)(t));
        if (t->scheduler) TRY(HOOK(t, scheduler_step)(t));
        return HOOK(t, optimizer_zero_grad)(t);
    }
    TRY(optim_step_zero_grad(t->optimizer));
    return t->scheduler ? trainer_default_scheduler_step(t) : CT_OK;
}

/* The update part of a step: average the gradients over the processes
 * (once per update, not per micro-batch), unscale and clip once, step,
 * schedule, zero; a step with inf/NaN gradients under loss scaling only
 * zeroes (after the average, every process sees the same inf/NaN). */
static CtStatus update(Trainer *t)
{
    TrainerState *s = t->state;
    TRY(runtime_reduce_gradients(s->rt, t->model));
    bool skip;
    TRY(unscale(t, &skip));
    if (!skip && (s->rc.gradient_clip_value > 0 || s->rc.gradient_clip_norm > 0))
        TRY(HOOK(t, clip_gradients)(t));
    TRY(skip ? HOOK(t, optimizer_zero_grad)(t) : step_schedule_zero(t));
    s->global_step++;
    return CT_OK;
}

/* The run's mixed_precision as an autocast dtype (CT_F32: none). */
static CtDType autocast_dtype(const TrainerState *s)
{
    const char *mp = s->rc.mixed_precision;
    if (mp && strcmp(mp, "bf16") == 0) return CT_BF16;
    if (mp && strcmp(mp, "fp16") == 0) return CT_F16;
    return CT_F32;
}

typedef CtStatus (*BatchLossFn)(Trainer *t, const DataBatch *batch,
                                TrainerBatchOutput *out);

/* A batch-loss hook under the run's autocast; backward runs outside it, as
 * in PyTorch. */
static CtStatus autocast_forward(Trainer *t, BatchLossFn fn, const DataBatch *batch,
                                 TrainerBatchOutput *out)
{
    CtDType prev;
    TRY(tensor_autocast_begin(autocast_dtype(t->state), &prev));
    CtStatus st = fn(t, batch, out);
    tensor_autocast_end(prev);
    return st;
}

/* One micro-batch, inside the step's scope. */
static CtStatus train_step(Trainer *t, const DataBatch *batch, StepPlan p)
{
    TrainerState *s = t->state;
    TRY(trainer_fire(t, CB_ON_TRAIN_STEP_START, NULL));
    TrainerBatchOutput out = {0};
    TRY(autocast_forward(t, HOOK(t, calculate_train_batch_loss), batch, &out));
    /* the tracked loss is the un-divided one, comparable to the eval loss */
    TRY(track(&s->train_loss, &out, false, "calculate_train_batch_loss"));
    CallbackEventArgs ea = {.batch = batch, .batch_output = &out, .step = p.step};
    TRY_STOP(t, trainer_fire(t, CB_ON_TRAIN_STEP_END, &ea));
    /* dividing by the window's length makes the accumulated gradient the
     * mean over its micro-batches, also for a partial last window */
    Tensor *loss =
        p.window > 1 ? tensor_div_scalar(out.loss, (double)p.window) : out.loss;
    if (!loss) return ct_last_status();
    TRY(HOOK(t, backward_step)(t, loss));
    if (p.update) TRY(update(t));
    trainer_stop_point(t);
    return CT_OK;
}

/* ----------------------------------------------------------- train epoch */

static CtStatus train_epoch(Trainer *t, bool *reached_max)
{
    TrainerState *s = t->state;
    TRY_STOP(t, HOOK(t, train_epoch_start)(t));
    loss_tracker_reset(&s->train_loss);
    int64_t first = trainer_resume_epoch_start(t); /* > 0: resumed mid-epoch */
    s->pos_epoch = run_history_current_epoch(s->history);
    s->pos_batch = first;
    TRY(loss_tracker_assign(&s->pos_loss, &s->train_loss));
    TRY_STOP(t, trainer_fire(t, CB_ON_TRAIN_EPOCH_START, NULL));
    /* the shuffle order is a function of (seed, epoch) */
    TRY(data_loader_set_epoch(s->train_dl, s->pos_epoch - 1));
    if (first > 0) TRY(data_loader_skip(s->train_dl, first));
    int64_t n = trainer_train_dataloader_len(t), k = s->rc.gradient_accumulation_steps;
    for (int64_t step = first; step < n; step++) {
        DataBatch batch;
        CtStatus st = CT_OK;
        if (!next_batch(s->train_dl, &batch, &st)) {
            if (st != CT_OK) return st;
            break;
        }
        int64_t start = step / k * k;
        StepPlan p = {.step = step,
                      .window = (start + k <= n ? k : n - start),
                      .update = (step + 1) % k == 0 || step + 1 == n};
        CtScope *scope = ct_scope_open();
        if (!scope) return ct_error(CT_ERR_OOM, "trainer: cannot open the step's scope");
        s->epoch_step = step;
        st = train_step(t, &batch, p);
        s->epoch_step = -1;
        ct_scope_close(scope);
        if (st != CT_OK || s->stop_agreed) return st;
        s->pos_batch = step + 1;
        TRY(loss_tracker_assign(&s->pos_loss, &s->train_loss));
        if (p.update && s->max_steps_set && s->global_step >= s->rc.max_num_train_steps) {
            *reached_max = true;
            break;
        }
    }
    TRY_STOP(t, HOOK(t, train_epoch_end)(t));
    TRY(trainer_record_loss(t, &s->train_loss, "train_loss_epoch"));
    TRY_STOP(t, trainer_fire(t, CB_ON_TRAIN_EPOCH_END, NULL));
    return CT_OK;
}

/* ------------------------------------------------------------ eval epoch */

static CtStatus eval_step(Trainer *t, const DataBatch *batch, int64_t step)
{
    TRY(trainer_fire(t, CB_ON_EVAL_STEP_START, NULL));
    TrainerBatchOutput out = {0};
    TRY(autocast_forward(t, HOOK(t, calculate_eval_batch_loss), batch, &out));
    TRY(track(&t->state->eval_loss, &out, trainer_batch_padding(t) == batch->size,
              "calculate_eval_batch_loss"));
    CallbackEventArgs ea = {.batch = batch, .batch_output = &out, .step = step};
    return trainer_fire(t, CB_ON_EVAL_STEP_END, &ea);
}

/* Whether every process has n eval batches (the default, padded, loaders):
 * then the processes run each batch together, and may meet in per-batch
 * collectives such as trainer_gather_for_metrics. */
static CtStatus same_eval_length(Trainer *t, int64_t n, bool *same)
{
    double v[2] = {(double)n, -(double)n};
    TRY(runtime_reduce_f64(t->state->rt, v, 2, RUNTIME_REDUCE_MAX));
    *same = v[0] == -v[1];
    return CT_OK;
}

/* The batches of an eval epoch under no_grad. Where the processes have as
 * many batches, a stop is agreed before each batch, so that none stops
 * while another waits for it in a per-batch collective; otherwise a stop
 * request ends the loop locally, and is agreed after the loop. */
static CtStatus eval_batches(Trainer *t)
{
    TrainerState *s = t->state;
    TRY(data_loader_set_epoch(s->eval_dl, 0));
    int64_t n = trainer_eval_dataloader_len(t);
    bool lockstep;
    TRY(same_eval_length(t, n, &lockstep));
    bool grad = ct_set_grad_enabled(false);
    CtStatus st = CT_OK;
    for (int64_t step = 0; st == CT_OK && step < n; step++) {
        if (lockstep ? trainer_stop_point(t) : s->stop_requested) break;
        DataBatch batch;
        if (!next_batch(s->eval_dl, &batch, &st)) break;
        CtScope *scope = ct_scope_open();
        if (!scope) {
            st = ct_error(CT_ERR_OOM, "trainer: cannot open the eval step's scope");
            break;
        }
        s->epoch_step = step;
        st = eval_step(t, &batch, step);
        s->epoch_step = -1;
        ct_scope_close(scope);
    }
    ct_set_grad_enabled(grad);
    return st;
}

/* _run_eval_epoch: name is the metric the epoch loss is recorded as. */
static CtStatus eval_epoch_inner(Trainer *t, bool is_intermediate, const char *name)
{
    TrainerState *s = t->state;
    CallbackEventArgs ea = {.is_intermediate = is_intermediate};
    TRY_STOP(t, HOOK(t, eval_epoch_start)(t));
    loss_tracker_reset(&s->eval_loss);
    TRY_STOP(t, trainer_fire(t, CB_ON_EVAL_EPOCH_START, &ea));
    TRY(eval_batches(t));
    if (trainer_stop_point(t)) return CT_OK;
    TRY_STOP(t, HOOK(t, eval_epoch_end)(t));
    TRY(trainer_record_loss(t, &s->eval_loss, name));
    TRY_STOP(t, trainer_fire(t, CB_ON_EVAL_EPOCH_END, &ea));
    return CT_OK;
}

static CtStatus eval_epoch(Trainer *t, bool is_intermediate, const char *name)
{
    TrainerState *s = t->state;
    bool was_eval = s->in_eval;
    int64_t step = s->epoch_step;
    s->in_eval = true;
    CtStatus st = eval_epoch_inner(t, is_intermediate, name);
    s->in_eval = was_eval;
    s->epoch_step = step;
    return st;
}

/* The training flags of a module tree, depth first, parents first. */
static int64_t tree_size(const Module *m)
{
    int64_t n = 1;
    for (int i = 0; i < nn_module_num_children(m); i++)
        n += tree_size(nn_module_child_at(m, i));
    return n;
}

static void modes_get(const Module *m, bool *modes, int64_t *k)
{
    modes[(*k)++] = m->training;
    for (int i = 0; i < nn_module_num_children(m); i++)
        modes_get(nn_module_child_at(m, i), modes, k);
}

static void modes_set(Module *m, const bool *modes, int64_t *k)
{
    m->training = modes[(*k)++];
    for (int i = 0; i < nn_module_num_children(m); i++)
        modes_set(nn_module_child_at(m, i), modes, k);
}

CtStatus trainer_run_eval_epoch(Trainer *t, bool is_intermediate)
{
    if (!t || !t->state)
        return ct_error(CT_ERR_NULL, "trainer_run_eval_epoch: NULL trainer");
    if (!t->state->eval_dl)
        return ct_error(CT_ERR_STATE,
                        "trainer_run_eval_epoch: this run has no eval loader "
                        "(TrainArgs.eval_dataset is NULL)");
    /* every module's mode is put back afterwards, such as a batch norm kept
     * in eval mode while the rest trains (the reference's §9.8 leaves the
     * model in eval mode) */
    int64_t k = 0;
    bool *modes = malloc((size_t)tree_size(t->model) * sizeof *modes);
    if (!modes) return ct_error(CT_ERR_OOM, "trainer_run_eval_epoch: out of memory");
    modes_get(t->model, modes, &k);
    LossTracker saved = t->state->eval_loss; /* moved out, moved back */
    t->state->eval_loss = (LossTracker){0};
    CtStatus st =
        eval_epoch(t, is_intermediate,
                   is_intermediate ? "intermediate_eval_loss" : "eval_loss_epoch");
    loss_tracker_reset(&t->state->eval_loss);
    t->state->eval_loss = saved;
    k = 0;
    modes_set(t->model, modes, &k);
    free(modes);
    return st;
}

/* ---------------------------------------------------------- training run */

/* The epochs; returns at an agreed stop with CT_OK. */
static CtStatus run_epochs(Trainer *t)
{
    TrainerState *s = t->state;
    TRY_STOP(t, HOOK(t, training_run_start)(t));
    TRY_STOP(t, trainer_fire(t, CB_ON_TRAINING_RUN_START, NULL));
    int64_t first = 0; /* a resumed run continues its remaining epochs */
    TRY(trainer_resume_run_start(t, &first));
    for (int64_t e = first; e < s->rc.num_epochs; e++) {
        bool reached = false;
        TRY(train_epoch(t, &reached));
        if (s->stop_agreed) return CT_OK;
        if (s->eval_dl) {
            TRY(eval_epoch(t, false, "eval_loss_epoch"));
            if (s->stop_agreed) return CT_OK;
        }
        s->pos_epoch = run_history_current_epoch(s->history) + 1; /* epoch done */
        s->pos_batch = 0;
        loss_tracker_reset(&s->pos_loss);
        TRY_STOP(t, HOOK(t, training_run_epoch_end)(t));
        TRY_STOP(t, trainer_fire(t, CB_ON_TRAINING_RUN_EPOCH_END, NULL));
        run_history_increment_epoch(s->history);
        if (reached) {
            trainer_print(t,
                          "Reached the maximum number of training steps (%lld optimizer "
                          "updates); ending training\n",
                          (long long)s->rc.max_num_train_steps);
            break;
        }
    }
    return CT_OK;
}

/* What every run ends with: the stop event when stopped, then the end hook
 * and event (which run also after a stop). */
static CtStatus finish_run(Trainer *t, CtStatus (*end_hook)(Trainer *), CallbackEvent end)
{
    TrainerState *s = t->state;
    if (s->stop_agreed) {
        trainer_print(t, "%s\n", s->stop_reason);
        TRY(trainer_fire(t, CB_ON_STOP_TRAINING_ERROR, NULL));
    }
    TRY(end_hook(t));
    return trainer_fire(t, end, NULL);
}

static CtStatus check_train_args(const Trainer *t, const TrainArgs *a)
{
    if (!t || !t->state) return ct_error(CT_ERR_NULL, "trainer_train: NULL trainer");
    if (t->state->running)
        return ct_error(CT_ERR_STATE,
                        "trainer_train: a run is in progress (a hook cannot "
                        "start another run)");
    if (!a) return ct_error(CT_ERR_NULL, "trainer_train: NULL TrainArgs");
    if (!a->train_dataset)
        return ct_error(CT_ERR_NULL, "trainer_train: TrainArgs.train_dataset is NULL");
    if (a->max_num_train_steps < 0)
        return ct_error(CT_ERR_INVALID, "trainer_train: max_num_train_steps %lld < 0",
                        (long long)a->max_num_train_steps);
    if (a->num_epochs < 1 && !(a->num_epochs == 0 && a->max_num_train_steps > 0))
        return ct_error(CT_ERR_INVALID,
                        "trainer_train: num_epochs %lld: need at least 1 "
                        "epoch (or max_num_train_steps > 0)",
                        (long long)a->num_epochs);
    if (a->per_device_batch_size <= 0)
        return ct_error(CT_ERR_INVALID,
                        "trainer_train: per_device_batch_size %lld: must be "
                        "> 0",
                        (long long)a->per_device_batch_size);
    if (a->gradient_accumulation_steps < 0)
        return ct_error(CT_ERR_INVALID,
                        "trainer_train: gradient_accumulation_steps %lld < 0",
                        (long long)a->gradient_accumulation_steps);
    if (!(a->gradient_clip_value >= 0) || !(a->gradient_clip_norm >= 0) ||
        isinf(a->gradient_clip_value) || isinf(a->gradient_clip_norm))
        return ct_error(CT_ERR_INVALID,
                        "trainer_train: gradient_clip_value %g / "
                        "gradient_clip_norm %g: must be finite and >= 0",
                        a->gradient_clip_value, a->gradient_clip_norm);
    if (a->gradient_clip_value > 0 && a->gradient_clip_norm > 0)
        return ct_error(CT_ERR_INVALID, "trainer_train: set gradient_clip_value or "
                                        "gradient_clip_norm, not both");
    return CT_OK;
}

/* State shared by trainer_train and trainer_evaluate before the loaders. */
/* The status of a hook that returned NULL: the error it recorded (the status
 * is cleared before each such call), or one naming the hook. */
static CtStatus hook_null(const char *hook)
{
    CtStatus st = ct_last_status();
    return st != CT_OK
               ? st
               : ct_error(CT_ERR_INVALID,
                          "trainer: %s returned NULL without recording an error", hook);
}

static void begin_run(Trainer *t)
{
    TrainerState *s = t->state;
    trainer_release_run(t);
    s->stop_requested = s->stop_agreed = false;
    s->stop_error = CT_OK;
    s->stop_reason[0] = '\0';
    s->global_step = 0;
    s->epoch_step = -1;
    loss_tracker_reset(&s->train_loss);
    loss_tracker_reset(&s->eval_loss);
    loss_tracker_reset(&s->pos_loss);
}

static CtStatus prepare_training(Trainer *t, const TrainArgs *a)
{
    TrainerState *s = t->state;
    s->train_ds = a->train_dataset;
    s->eval_ds = a->eval_dataset;
    s->collate = a->collate_fn;
    s->collate_user = a->collate_user;
    s->scheduler_fn = a->create_scheduler_fn;
    s->scheduler_user = a->scheduler_user;
    s->max_steps_set = a->max_num_train_steps > 0;
    if (a->reset_run_history != TRAINER_NO && !s->resume.pending)
        run_history_reset(s->history);
    TRY(runtime_prepare_model(s->rt, t->model));
    TRY(nn_module_zero_grad(t->model)); /* a run starts from clean gradients */
    int64_t bs = a->per_device_batch_size;
    ct_clear_error();
    s->train_dl = HOOK(t, create_train_dataloader)(t, bs, a->train_dataloader_args);
    if (!s->train_dl) return hook_null("create_train_dataloader");
    if (a->eval_dataset) {
        ct_clear_error();
        s->eval_dl = HOOK(t, create_eval_dataloader)(t, bs, a->eval_dataloader_args);
        if (!s->eval_dl) return hook_null("create_eval_dataloader");
    }
    TRY(trainer_make_run_config(t, a));
    if (a->create_scheduler_fn) {
        ct_clear_error();
        t->scheduler = HOOK(t, create_scheduler)(t);
        if (!t->scheduler) return hook_null("create_scheduler");
    }
    return trainer_resume_prepare(t, a);
}

CtStatus trainer_train(Trainer *t, const TrainArgs *a)
{
    ct_clear_error();
    TRY(check_train_args(t, a));
    begin_run(t);
    TrainerState *s = t->state;
    s->running = true;
    CtStatus st = prepare_training(t, a);
    if (st == CT_OK) st = run_epochs(t);
    if (st == CT_OK) st = s->stop_error;
    if (st == CT_OK)
        st = finish_run(t, HOOK(t, training_run_end), CB_ON_TRAINING_RUN_END);
    trainer_resume_clear(t);
    s->running = false;
    return st;
}

/* ------------------------------------------------------------ evaluation */

static CtStatus run_evaluation(Trainer *t)
{
    TRY_STOP(t, HOOK(t, evaluation_run_start)(t));
    TRY_STOP(t, trainer_fire(t, CB_ON_EVALUATION_RUN_START, NULL));
    return eval_epoch(t, false, "evaluation_loss");
}

CtStatus trainer_evaluate(Trainer *t, const EvalArgs *a)
{
    ct_clear_error();
    if (!t || !t->state) return ct_error(CT_ERR_NULL, "trainer_evaluate: NULL trainer");
    TrainerState *s = t->state;
    if (s->running)
        return ct_error(CT_ERR_STATE, "trainer_evaluate: a run is in progress");
    if (!a) return ct_error(CT_ERR_NULL, "trainer_evaluate: NULL EvalArgs");
    if (!a->dataset)
        return ct_error(CT_ERR_NULL, "trainer_evaluate: EvalArgs.dataset is NULL");
    if (a->per_device_batch_size <= 0)
        return ct_error(CT_ERR_INVALID,
                        "trainer_evaluate: per_device_batch_size %lld: must "
                        "be > 0",
                        (long long)a->per_device_batch_size);
    begin_run(t);
    s->running = true;
    s->train_ds = NULL;
    s->eval_ds = a->dataset;
    s->collate = a->collate_fn;
    s->collate_user = a->collate_user;
    run_history_reset(s->history);
    CtStatus st = runtime_prepare_model(s->rt, t->model);
    if (st == CT_OK) {
        ct_clear_error();
        s->eval_dl = HOOK(t, create_eval_dataloader)(t, a->per_device_batch_size,
                                                     a->dataloader_args);
        if (!s->eval_dl) st = hook_null("create_eval_dataloader");
    }
    if (st == CT_OK) st = trainer_make_run_config(t, NULL);
    if (st == CT_OK) st = run_evaluation(t);
    if (st == CT_OK) st = s->stop_error;
    if (st == CT_OK)
        st = finish_run(t, HOOK(t, evaluation_run_end), CB_ON_EVALUATION_RUN_END);
    s->running = false;
    return st;
}
