/* ctrainer — the Trainer: pytorch-accelerated's training loop in C.
 *
 * A Trainer holds a model, a loss, an optimizer, an ordered list of
 * callbacks, a run history and a runtime. trainer_train runs the training
 * loop; trainer_evaluate runs one evaluation epoch. The loop is built from
 * overridable HOOKS (function pointers in t->hooks; NULL means the default)
 * and fires CALLBACK EVENTS (callbacks.h) after the hook of the same name:
 *
 *     Trainer *t = trainer_create(&(TrainerConfig){
 *         .model = model, .loss = nn_loss_cross_entropy(NULL), .optimizer = opt});
 *     CtStatus st = trainer_train(t, &(TrainArgs){
 *         .train_dataset = train, .eval_dataset = test, .num_epochs = 8,
 *         .per_device_batch_size = 32});
 *
 * "Subclassing": embed Trainer as the FIRST member of your struct, set the
 * hooks you override, and call the exported default as "super":
 *
 *     typedef struct MyTrainer { Trainer base; double best; } MyTrainer;
 *     static CtStatus my_eval_epoch_end(Trainer *t) {
 *         MyTrainer *m = (MyTrainer *)t;
 *         ...;
 *         return trainer_default_eval_epoch_end(t);
 *     }
 *     MyTrainer mt = {0};
 *     trainer_init(&mt.base, &(TrainerConfig){...});
 *     mt.base.hooks.eval_epoch_end = my_eval_epoch_end;
 *
 * The loop (one training epoch; H: hook, E: callback event):
 *
 *     H:train_epoch_start (model.train)  [reset loss tracker]  E:on_train_epoch_start
 *     for step, batch in train loader:              // per micro-batch
 *         [open a scope]  E:on_train_step_start
 *         H:calculate_train_batch_loss              // forward + loss
 *         [track the UN-divided loss]  E:on_train_step_end(batch, out, step)
 *         H:backward_step(loss / w)                 // w: micro-batches in this window
 *         if update step ((step+1) % k == 0 or last batch):
 *             H:clip_gradients (if clipping)  H:optimizer_step
 *             H:scheduler_step (if a scheduler)  H:optimizer_zero_grad
 *         [close the scope]
 *         stop at max_num_train_steps optimizer updates
 *     H:train_epoch_end  [record train_loss_epoch]  E:on_train_epoch_end
 *
 * then, with an eval set, an evaluation epoch under no_grad
 * (H:eval_epoch_start (model.eval), E:on_eval_epoch_start, per batch
 * E:on_eval_step_start H:calculate_eval_batch_loss E:on_eval_step_end,
 * H:eval_epoch_end [record eval_loss_epoch] E:on_eval_epoch_end), then
 * H:training_run_epoch_end E:on_training_run_epoch_end and the run
 * history's epoch counter moves on. Around the epochs:
 * H:training_run_start E:on_training_run_start ... H:training_run_end
 * E:on_training_run_end (always, also after a stop).
 *
 * Where we deliberately differ from pytorch-accelerated (its bugs, fixed):
 *  - gradients are clipped once per optimizer update, after the backward of
 *    the window's last micro-batch, not after every micro-batch;
 *  - the recorded train_loss_epoch is the sample-weighted mean of the
 *    UN-divided batch losses, comparable to eval_loss_epoch;
 *  - the loss is divided by the number of micro-batches in the current
 *    accumulation window (k, or fewer for the last, partial window of an
 *    epoch), so a partial window's update is not under-weighted;
 *  - max_num_train_steps, NUM_UPDATE_STEPS_PER_EPOCH and the scheduler all
 *    count optimizer updates of this process (every process takes the same
 *    updates in lockstep), never batches or a sum over processes;
 *  - a stop request is agreed across processes (no rank left waiting);
 *  - each run re-creates the scheduler (none without create_scheduler_fn).
 *
 * Ownership: the trainer BORROWS the model, loss, optimizer, datasets and a
 * runtime given in the config (they must outlive it); it OWNS its callbacks,
 * run history, the scheduler made by create_scheduler_fn, the data loaders
 * it creates, and a runtime it creates itself. Loaders and the scheduler of
 * a run live until the next trainer_train/trainer_evaluate or the trainer is
 * freed, so they can be inspected after a run.
 *
 * Errors: functions return CtStatus or NULL with the message recorded
 * (status.h). An error from a hook or callback aborts the run at once (no
 * further hooks run, training_run_end included) and is returned.
 */
#ifndef CTRAINER_TRAINER_H
#define CTRAINER_TRAINER_H

#include <stdarg.h>

#include "ctrainer/callback.h"
#include "ctrainer/data.h"
#include "ctrainer/nn.h"
#include "ctrainer/optim.h"
#include "ctrainer/runtime.h"
#include "ctrainer/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct Trainer Trainer;
typedef struct TrainerState TrainerState; /* private to trainer/ */
typedef struct RunHistory RunHistory;

/* ============================================================ run history
 *
 * Per-epoch metrics by name (double values), like pytorch-accelerated's
 * InMemoryRunHistory. The epoch counter starts at 1; while epoch k runs,
 * every hook and callback sees current_epoch == k. Names are at most
 * RUN_HISTORY_MAX_NAME - 1 bytes (prefix included). */

#define RUN_HISTORY_MAX_NAME 128

RunHistory *run_history_create(void);
void run_history_free(RunHistory *h); /* NULL is a no-op */

/* Appends value to metric prefix + name (the metric is created on first
 * use). Only update applies the prefix; the other functions take full
 * names. Errors: NULL/empty name, a name too long. */
CtStatus run_history_update(RunHistory *h, const char *name, double value);
/* Metric names in order of first update. */
int run_history_num_metrics(const RunHistory *h);
const char *run_history_metric_name(const RunHistory *h, int i);
bool run_history_has_metric(const RunHistory *h, const char *name);
/* All values of a metric, oldest first; *n gets the count. An unknown name
 * gives NULL and *n = 0 (not an error). The pointer is valid until the
 * metric is next updated or deleted, or the history reset. */
const double *run_history_values(const RunHistory *h, const char *name, int64_t *n);
/* The latest value, or NAN with CT_ERR_INVALID ("no values recorded for
 * metric 'x'") when there is none. */
double run_history_latest(const RunHistory *h, const char *name);
/* Removes a metric. Unknown names: CT_ERR_INVALID. */
CtStatus run_history_delete(RunHistory *h, const char *name);
/* The prefix update() puts before names ("" by default; "ema_model_" for
 * an EMA evaluation). NULL means "". Copied. Errors: too long. */
CtStatus run_history_set_prefix(RunHistory *h, const char *prefix);
const char *run_history_prefix(const RunHistory *h);
/* 1-based epoch counter. set_epoch: epoch >= 1. */
int64_t run_history_current_epoch(const RunHistory *h);
void run_history_increment_epoch(RunHistory *h);
CtStatus run_history_set_epoch(RunHistory *h, int64_t epoch);
/* Clears every metric and sets the epoch to 1; keeps the prefix. */
void run_history_reset(RunHistory *h);
/* {"current_epoch": 3, "metric_name_prefix": "", "metrics": {"train_loss_epoch":
 * [0.9, 0.5], ...}} as a malloc'd string (free()); NaN and infinities are
 * written as null. NULL on allocation failure. */
char *run_history_to_json(const RunHistory *h);
/* Writes run_history_to_json to path (atomically: temp file + rename). */
CtStatus run_history_save_json(const RunHistory *h, const char *path);

/* ============================================================== batches */

/* What calculate_train_batch_loss / calculate_eval_batch_loss produce
 * (pytorch-accelerated's batch output dict). Tensors belong to the step's
 * scope. */
struct TrainerBatchOutput {
    Tensor *loss;          /* one-element, float; what backward starts from */
    Tensor *model_outputs; /* the model's output (NULL allowed) */
    int64_t batch_size;    /* samples, for the sample-weighted epoch loss */
    void *extras;          /* anything a custom hook wants callbacks to see */
};

/* =========================================================== data loaders */

/* Tri-state options whose default is not "false". */
typedef enum TrainerFlag {
    TRAINER_DEFAULT = 0, /* the documented default */
    TRAINER_NO,
    TRAINER_YES,
} TrainerFlag;

/* User overrides for a loader (pytorch-accelerated's train_dataloader_kwargs):
 * zero fields keep the trainer's default, set fields win. */
typedef struct TrainerLoaderArgs {
    int64_t batch_size;    /* 0: per_device_batch_size */
    TrainerFlag shuffle;   /* default: YES for train, NO for eval */
    TrainerFlag drop_last; /* default: NO */
    uint64_t seed;         /* shuffle order; 0: the runtime's base seed (same on
                              every process, so processes agree on the order) */
    Sampler *sampler;      /* borrowed; drops the default shuffle (giving it
                              with shuffle YES is an error, as in PyTorch) */
    int num_workers;       /* 0: batches built on the training thread */
    int prefetch;          /* 0: the loader's default */
} TrainerLoaderArgs;

/* =========================================================== placeholders
 *
 * Values a scheduler factory needs but that exist only once the run's
 * loaders are built (pytorch-accelerated's TrainerPlaceholderValues). A
 * TrainerValue is placeholder * mul + add, so (P + 1) * 2 is {P, 2, 2}.
 * TRAINER_VALUE(P) is P itself (mul 1, add 0). In a scheduler factory
 * (TrainArgs.create_scheduler_fn):
 *
 *     static Scheduler *make_sched(Trainer *t, Optimizer *o, void *user) {
 *         int64_t total;
 *         double every_7_epochs;
 *         if (trainer_resolve_product(t, TRAINER_NUM_EPOCHS,
 *                                     TRAINER_NUM_UPDATE_STEPS_PER_EPOCH,
 *                                     &total) != CT_OK ||
 *             trainer_resolve(t, trainer_value(TRAINER_NUM_UPDATE_STEPS_PER_EPOCH,
 *                                              7, 0), &every_7_epochs) != CT_OK)
 *             return NULL; // the trainer reports the recorded error
 *         ...
 *     }
 */
typedef enum TrainerPlaceholder {
    TRAINER_CONSTANT = 0,               /* the value is just `add` (mul unused) */
    TRAINER_NUM_EPOCHS,                 /* run_config.num_epochs */
    TRAINER_NUM_UPDATE_STEPS_PER_EPOCH, /* optimizer updates per epoch */
    TRAINER_TRAIN_DATALOADER_LEN,       /* batches per epoch, this process */
    TRAINER_EVAL_DATALOADER_LEN,        /* eval batches, this process */
} TrainerPlaceholder;

typedef struct TrainerValue {
    TrainerPlaceholder placeholder;
    /* No default: 0 with a placeholder other than TRAINER_CONSTANT is an
     * error, so a forgotten mul (e.g. (TrainerValue){TRAINER_NUM_EPOCHS})
     * is reported instead of silently meaning 0 or 1. Use TRAINER_VALUE(p)
     * or trainer_value(p, mul, add). */
    double mul;
    double add;
} TrainerValue;

/* placeholder * mul + add */
static inline TrainerValue trainer_value(TrainerPlaceholder placeholder, double mul,
                                         double add)
{
    return (TrainerValue){.placeholder = placeholder, .mul = mul, .add = add};
}
/* The placeholder itself: mul 1, add 0. */
#define TRAINER_VALUE(placeholder) trainer_value((placeholder), 1, 0)

/* Both resolvers return CT_OK and write the value to *out, or return an
 * error (recorded, named after the function) and leave *out unchanged:
 *  - CT_ERR_NULL: t or out is NULL;
 *  - CT_ERR_STATE: no run config yet (outside trainer_train /
 *    trainer_evaluate, e.g. before create_scheduler_fn is called);
 *  - CT_ERR_INVALID: an unknown placeholder, mul 0 with a placeholder, a
 *    loader length the run does not have (an eval length without an eval
 *    set, a train length in an evaluation run).
 *
 * trainer_resolve: the value of v for the current run, placeholder * mul +
 * add. */
CtStatus trainer_resolve(const Trainer *t, TrainerValue v, double *out);
/* Two bare placeholders multiplied, rounded to an integer: e.g. the total
 * number of updates, NUM_EPOCHS x NUM_UPDATE_STEPS_PER_EPOCH. */
CtStatus trainer_resolve_product(const Trainer *t, TrainerPlaceholder a,
                                 TrainerPlaceholder b, int64_t *out);

/* ============================================================ run config */

/* Fixed for a run; made by trainer_train / trainer_evaluate once the loaders
 * exist (pytorch-accelerated's TrainerRunConfig, with its formulas fixed):
 *   num_update_steps_per_epoch = ceil(len(train loader) / k)   (this process)
 *   max_num_train_steps        = the given value, or num_epochs * that
 *   num_epochs                 = ceil(max_num_train_steps / updates per epoch)
 *                                when max_num_train_steps was given (it wins,
 *                                as in pytorch-accelerated)
 *   train_total_batch_size     = per-device batch * processes * k
 *   eval_total_batch_size      = eval per-device batch * processes */
typedef struct TrainerRunConfig {
    int64_t num_epochs;
    int64_t train_per_device_batch_size;
    int64_t eval_per_device_batch_size; /* 0 without an eval set */
    DataLoaderArgs train_dl_args;       /* data_loader_args of the loaders the
                                           create_*_dataloader hooks returned */
    DataLoaderArgs eval_dl_args;
    bool has_eval;
    int64_t gradient_accumulation_steps;
    double gradient_clip_value; /* 0: none */
    double gradient_clip_norm;  /* 0: none */
    int64_t train_total_batch_size;
    int64_t eval_total_batch_size;
    int64_t num_update_steps_per_epoch;
    int64_t max_num_train_steps;
    bool is_local_process_zero;
    bool is_world_process_zero;
    bool is_distributed;
    const char *mixed_precision; /* "no" */
    int num_processes;
} TrainerRunConfig;

/* The run config as a JSON object (for loggers), malloc'd (free()). Samplers
 * and collate functions are left out. NULL on allocation failure. */
char *trainer_run_config_to_json(const TrainerRunConfig *rc);

/* ================================================================= hooks
 *
 * The 20 overridable steps of the loop (§2.3 of pytorch-accelerated) plus
 * clip_gradients (one of its "internal" methods, overridable at the user's
 * risk). NULL means the default, trainer_default_<hook>. Hooks that create
 * something return it (NULL with an error recorded on failure); the others
 * return CT_OK or an error, which aborts the run. Any hook may call
 * trainer_stop. */
typedef struct TrainerHooks {
    /* The train loader: get_default_train_dl_args(t, batch_size) with the
     * user's overrides applied (a user batch size wins), on the runtime's
     * device, with the run's collate function. */
    DataLoader *(*create_train_dataloader)(Trainer *t, int64_t batch_size,
                                           const TrainerLoaderArgs *user);
    /* shuffle on, seed = the runtime's base seed, device = the runtime's,
     * collate = TrainArgs.collate_fn, no workers, sharded by the runtime
     * (shard_rank / shard_world_size = runtime_rank / runtime_world_size:
     * each process loads its rank::world share, padded by wrapping around;
     * no change in a single-process run). */
    DataLoaderArgs (*get_default_train_dl_args)(Trainer *t, int64_t batch_size);
    DataLoader *(*create_eval_dataloader)(Trainer *t, int64_t batch_size,
                                          const TrainerLoaderArgs *user);
    /* as the train defaults, shuffle off (sharded and padded the same way:
     * count metrics through trainer_gather_for_metrics) */
    DataLoaderArgs (*get_default_eval_dl_args)(Trainer *t, int64_t batch_size);
    /* TrainArgs.create_scheduler_fn(t, optimizer, user); called once the run
     * config exists, so placeholders resolve. The trainer owns the result. */
    Scheduler *(*create_scheduler)(Trainer *t);
    CtStatus (*training_run_start)(Trainer *t); /* no-op */
    CtStatus (*train_epoch_start)(Trainer *t);  /* nn_module_train(model) */
    /* out->model_outputs = model(batch->t[0]); out->loss = loss(outputs,
     * batch->t[1]); out->batch_size = batch->size. */
    CtStatus (*calculate_train_batch_loss)(Trainer *t, const DataBatch *batch,
                                           TrainerBatchOutput *out);
    /* tensor_backward of the loss (scaled, with a loss scaler); a one-
     * element loss is seeded with a ones tensor the run keeps, so a step
     * fills no seed. */
    CtStatus (*backward_step)(Trainer *t, Tensor *loss);
    /* Default: clip by value (optim_clip_grad_value) or by norm
     * (optim_clip_grad_norm; a non-finite norm is not an error here, the
     * gradients are left as they are) over the model's parameters. Called
     * once per update, only when clipping is configured. */
    CtStatus (*clip_gradients)(Trainer *t);
    /* With all three of these at their defaults, the update runs as
     * optim_step_zero_grad then scheduler_step: the same results, with the
     * gradients zeroed in the optimizer's own pass. Overriding any of them
     * runs the three hooks in the order above. */
    CtStatus (*optimizer_step)(Trainer *t);      /* optim_step */
    CtStatus (*scheduler_step)(Trainer *t);      /* scheduler_step when a scheduler */
    CtStatus (*optimizer_zero_grad)(Trainer *t); /* optim_zero_grad */
    CtStatus (*train_epoch_end)(Trainer *t);     /* no-op; before train_loss_epoch */
    CtStatus (*eval_epoch_start)(Trainer *t);    /* nn_module_eval(model) */
    /* as the train one, under no_grad, except that the loss is taken over
     * the batch's real rows only (the wrap-around duplicates of a sharded
     * eval loader, trainer_batch_padding, left out) and out->batch_size
     * counts them, so the recorded eval loss weighs every sample of the
     * eval set exactly once, as one process would. model_outputs keep every
     * row (trainer_gather_for_metrics drops the duplicates). A batch of
     * duplicates only (possible when the last batch has one row) gets the
     * loss of all its rows and batch_size 0: it counts nothing. */
    CtStatus (*calculate_eval_batch_loss)(Trainer *t, const DataBatch *batch,
                                          TrainerBatchOutput *out);
    CtStatus (*eval_epoch_end)(Trainer *t);         /* no-op; before the eval loss */
    CtStatus (*training_run_epoch_end)(Trainer *t); /* no-op */
    CtStatus (*training_run_end)(Trainer *t);       /* no-op */
    CtStatus (*evaluation_run_start)(Trainer *t);   /* no-op */
    CtStatus (*evaluation_run_end)(Trainer *t);     /* no-op */
} TrainerHooks;

DataLoader *trainer_default_create_train_dataloader(Trainer *t, int64_t batch_size,
                                                    const TrainerLoaderArgs *user);
DataLoaderArgs trainer_default_get_default_train_dl_args(Trainer *t, int64_t batch_size);
DataLoader *trainer_default_create_eval_dataloader(Trainer *t, int64_t batch_size,
                                                   const TrainerLoaderArgs *user);
DataLoaderArgs trainer_default_get_default_eval_dl_args(Trainer *t, int64_t batch_size);
Scheduler *trainer_default_create_scheduler(Trainer *t);
CtStatus trainer_default_training_run_start(Trainer *t);
CtStatus trainer_default_train_epoch_start(Trainer *t);
CtStatus trainer_default_calculate_train_batch_loss(Trainer *t, const DataBatch *batch,
                                                    TrainerBatchOutput *out);
CtStatus trainer_default_backward_step(Trainer *t, Tensor *loss);
CtStatus trainer_default_clip_gradients(Trainer *t);
CtStatus trainer_default_optimizer_step(Trainer *t);
CtStatus trainer_default_scheduler_step(Trainer *t);
CtStatus trainer_default_optimizer_zero_grad(Trainer *t);
CtStatus trainer_default_train_epoch_end(Trainer *t);
CtStatus trainer_default_eval_epoch_start(Trainer *t);
CtStatus trainer_default_calculate_eval_batch_loss(Trainer *t, const DataBatch *batch,
                                                   TrainerBatchOutput *out);
CtStatus trainer_default_eval_epoch_end(Trainer *t);
CtStatus trainer_default_training_run_epoch_end(Trainer *t);
CtStatus trainer_default_training_run_end(Trainer *t);
CtStatus trainer_default_evaluation_run_start(Trainer *t);
CtStatus trainer_default_evaluation_run_end(Trainer *t);

/* =============================================================== trainer */

/* A loss as a function: returns a one-element loss tensor (in the open
 * scope) for pred and target, or NULL with an error recorded. */
typedef Tensor *(*TrainerLossFn)(Trainer *t, Tensor *pred, Tensor *target);

typedef struct TrainerConfig {
    Module *model;         /* required; borrowed */
    TrainerLossFn loss_fn; /* one of loss_fn and loss is required (or both */
    NnLoss *loss;          /* NULL when calculate_*_batch_loss are overridden);
                              loss is borrowed. loss_fn wins when both are set */
    Optimizer *optimizer;  /* required; borrowed */
    /* Callbacks in firing order; the trainer takes ownership of every
     * entry, also when creation fails. NULL entries are an error (keeping
     * a constructor's error). Default (callbacks NULL, n_callbacks 0, as
     * pytorch-accelerated's Trainer): the default list, callbacks_default
     * with a progress bar (callbacks.h). A list given here replaces the
     * default list; put callbacks_default(...) in it to keep those. Set
     * no_callbacks for none at all (a silent run).
     * With CTRAINER_LIMIT_BATCHES=N in the environment, trainer_init caps
     * train and eval batches per epoch at N (trainer_limit_batches; a
     * LimitBatches callback in the list sets its own cap, which wins); an
     * invalid value is an error of trainer_init. */
    Callback *const *callbacks;
    int n_callbacks;
    bool no_callbacks;
    /* Borrowed. NULL: the trainer creates a default runtime (CPU, seed 42,
     * ranks from the environment) and owns it. */
    Runtime *runtime;
    /* Borrowed. NULL: an fp16 run (runtime_mixed_precision) gets a scaler
     * with PyTorch's defaults that the trainer creates and frees; other runs scale
     * nothing. Given: the trainer scales the loss, unscales, skips steps with
     * inf/NaN gradients and updates the scale with it, whatever the
     * precision (see runtime.h, "loss scaler"). */
    GradScaler *scaler;
    /* Hooks to override (zero struct: all defaults). Copied; t->hooks can
     * also be set after init. */
    TrainerHooks hooks;
    void *user; /* t->user, for hooks and callbacks */
} TrainerConfig;

/* The trainer. Public fields may be read by hooks and callbacks; hooks are
 * set by users. Everything else is behind the accessors below. */
struct Trainer {
    TrainerHooks hooks;
    Module *model; /* a callback may swap it for a nested evaluation (EMA) and
                      must put it back */
    NnLoss *loss;
    TrainerLossFn loss_fn;
    Optimizer *optimizer;
    Scheduler *scheduler; /* of the current/last run; NULL without one */
    void *user;
    TrainerState *state; /* private */
};

/* Initialises t in place (for a struct that embeds Trainer), then fires
 * on_init_end. Errors: NULL model or optimizer, neither loss nor loss_fn
 * (and calculate_*_batch_loss not overridden), NULL callback entries,
 * duplicate callback types, a failed runtime. On failure t holds nothing
 * (the callbacks given have been freed) and trainer_deinit is a no-op.
 * trainer_init and trainer_create are defined with the built-in callbacks
 * (callbacks/), the layer that knows the default list: they resolve the
 * config's callbacks (TrainerConfig.callbacks) and call trainer_init_exact. */
CtStatus trainer_init(Trainer *t, const TrainerConfig *cfg);
/* As trainer_init, with cfg's callbacks exactly as given: none when the
 * config lists none (no default list). For code that builds trainers
 * below the built-in callbacks; users call trainer_init. */
CtStatus trainer_init_exact(Trainer *t, const TrainerConfig *cfg);
/* Frees what t owns (callbacks, run history, scheduler, loaders, its own
 * runtime); not t itself nor anything borrowed. No-op on a zeroed or
 * already deinitialised trainer. */
void trainer_deinit(Trainer *t);
/* Heap-allocated trainer: malloc + trainer_init; NULL on failure. */
Trainer *trainer_create(const TrainerConfig *cfg);
/* trainer_deinit + free. NULL is a no-op. */
void trainer_free(Trainer *t);

/* ---------------------------------------------------------------- train */

/* create_scheduler_fn: builds the run's scheduler on `o` (t->optimizer);
 * call trainer_resolve for placeholder values. Return NULL with an error
 * recorded on failure (the run fails). */
typedef Scheduler *(*TrainerSchedulerFn)(Trainer *t, Optimizer *o, void *user);

typedef struct TrainArgs {
    const Dataset *train_dataset;  /* required; borrowed */
    const Dataset *eval_dataset;   /* NULL: no evaluation epochs */
    int64_t num_epochs;            /* >= 1; may be 0 when max_num_train_steps is set */
    int64_t per_device_batch_size; /* required, > 0 (per process) */
    int64_t max_num_train_steps;   /* optimizer updates; 0: no limit */
    int64_t gradient_accumulation_steps; /* 0 -> the runtime's (CTRAINER_
                                            GRADIENT_ACCUMULATION_STEPS, else 1) */
    double gradient_clip_value;          /* > 0: clamp gradients to [-v, v] */
    double gradient_clip_norm; /* > 0: rescale to this global 2-norm (at most one
                                  of the two clip options) */
    TrainerSchedulerFn create_scheduler_fn; /* NULL: no scheduler */
    void *scheduler_user;
    const TrainerLoaderArgs *train_dataloader_args; /* NULL: defaults */
    const TrainerLoaderArgs *eval_dataloader_args;  /* NULL: defaults */
    DataCollateFn collate_fn;                       /* NULL: data_collate_default */
    void *collate_user;
    /* DEFAULT/YES: clear the run history first (epoch 1); NO: continue its
     * epochs and metrics (progressive resizing, gradual unfreezing). */
    TrainerFlag reset_run_history;
    /* Resume from a training-state checkpoint (trainer_load_state, after the
     * loaders and the scheduler exist): a checkpoint directory, or "latest"
     * for the one checkpoint_dir's `latest` pointer names. The run
     * continues at the checkpoint's epoch and batch (the remaining epochs of
     * num_epochs, not all of them again) with its history, counters, RNG
     * states and callback states. NULL/"": a fresh run. */
    const char *resume_from;
    /* The checkpoint root "latest" is looked up in (trainer_save_checkpoint
     * writes there; CheckpointArgs.dir of the checkpoint callback). */
    const char *checkpoint_dir;
} TrainArgs;

/* Runs training (see the top of this file). Returns CT_OK also when the run
 * was stopped by a request (trainer_stop_reason tells) or by
 * max_num_train_steps. Errors: NULL args or train_dataset, num_epochs < 1
 * without max_num_train_steps, per_device_batch_size <= 0, negative
 * accumulation/step/clip values, both clip options, a loader that cannot be
 * built, a failing hook or callback (its error). Bad arguments are reported
 * before any hook runs. Not reentrant: a hook cannot start another run. */
CtStatus trainer_train(Trainer *t, const TrainArgs *args);

typedef struct EvalArgs {
    const Dataset *dataset;                   /* required; borrowed */
    int64_t per_device_batch_size;            /* required, > 0 */
    const TrainerLoaderArgs *dataloader_args; /* NULL: defaults */
    DataCollateFn collate_fn;
    void *collate_user;
} EvalArgs;

/* One evaluation epoch over args->dataset: resets the run history, then
 * H:evaluation_run_start E:on_evaluation_run_start, the eval epoch (records
 * "evaluation_loss"), H:evaluation_run_end E:on_evaluation_run_end. A stop
 * request ends the epoch early and fires on_stop_training_error. */
CtStatus trainer_evaluate(Trainer *t, const EvalArgs *args);

/* ------------------------------------------------- training-state checkpoints
 *
 * trainer_save_state writes everything an exact resume needs into `dir`
 * ("x/" names x; docs/checkpoints.md has the layout): the model keyed by
 * parameter name and the optimizer state (optim_state_save: its type and
 * options, the groups' hyper-parameters and each parameter's buffers keyed
 * by the parameter's index over all groups, "state.<i>.*"), as
 * safetensors, the scheduler, the loss scaler
 * (scale, growth tracker, skipped steps; when the run has one), the trainer's
 * counters and run history, the position (epoch, next batch), every
 * process's RNG states (the model's generators; the loaders' order is a
 * function of (seed, epoch), so their position is the batch index) and
 * every callback's state (CallbackVtable.state_save), plus manifest.json
 * with the format version, the library version and each file's SHA-256.
 * The write is atomic: a temporary directory next to `dir`, every file and
 * the directory fsynced, renamed to `dir` (an existing one is replaced),
 * the parent fsynced; on failure nothing is left behind. Called from a
 * callback, the position is exact at on_train_step_start (before the step
 * at an update boundary: gradients of a partial accumulation window are not
 * saved), at on_training_run_epoch_end, at on_training_run_end and outside a
 * run. Only the main process writes the model, optimizer, scheduler,
 * trainer and callback files; every process writes random_states_<rank>.
 * Collective: every process calls it (the Checkpoint callback does, at the
 * same point everywhere), with the same dir on a file system every process
 * sees. The main process names the temporary directory, every process
 * writes its files into it, and only when all did does the main process
 * write the manifest (hashing every process's files) and rename; every
 * process returns once the checkpoint is complete, and a failure on any
 * process is an error on every process ("rank R: ..." naming the first
 * failed rank), with nothing left behind.
 * Errors: I/O (naming the path), a failing state_save. */
CtStatus trainer_save_state(Trainer *t, const char *dir);

/* Loads a checkpoint, all or nothing: the manifest and every file's hash
 * are verified, every file parsed and checked against the model (names,
 * shapes, dtypes), the optimizer (its type and options, parameter groups,
 * buffers) and the per-process file (RNG states, partial loss) before
 * anything changes; a failure leaves the trainer as it was, a resume
 * pending from an earlier load included. Errors name the file: a
 * missing, truncated or corrupt file (SHA-256 mismatch), another format
 * version, a mismatched model, optimizer (an SGD state into AdamW, Adam
 * into AdamW, other options such as amsgrad), scheduler or callback list, a
 * loss scaler state without a scaler in the trainer or the reverse (an
 * fp16 checkpoint resumed without fp16), and in a run, a train loader of
 * another seed, batch size or length. The model, optimizer, loss scaler,
 * RNG states and run history are applied at once; the
 * position, the scheduler state (when no run is active) and the callback
 * states are applied by the next trainer_train, which resumes there and
 * refuses a run with a scheduler when the checkpoint has none, or the
 * reverse.
 * Collective: every process checks the files it reads (the shared ones and
 * its own random_states_<rank>), and applies them only when every process
 * could, so all processes load or none does (each reports the first failed
 * rank's error). A checkpoint saved with another number of processes is
 * CT_ERR_INVALID (manifest.json records the world size). */
CtStatus trainer_load_state(Trainer *t, const char *dir);

/* Saves into root/checkpoint_<n> (n one above the highest there; root is
 * created when missing), then points root/latest at it (a one-line file
 * written atomically, the last step: a crash at any moment leaves the
 * previous latest loadable), then removes the oldest checkpoint_<i>
 * beyond total_limit (0: keep all). Collective, as trainer_save_state: the
 * main process picks n, moves the pointer and rotates; every process
 * returns after the pointer moved, with the same status. */
CtStatus trainer_save_checkpoint(Trainer *t, const char *root, int total_limit);
/* root/<the name in root/latest>, malloc'd (free()); NULL with CT_ERR_IO
 * when root has no latest pointer, CT_ERR_FORMAT when it is malformed. */
char *trainer_latest_checkpoint(const char *root);

/* ------------------------------------------------------------- stopping
 *
 * trainer_stop asks the run to stop; callable from any hook or callback
 * (pytorch-accelerated's StopTrainingError, without exceptions). The
 * request is agreed across processes (a MAX reduce of the flag), so every
 * process stops at the same point, and is honoured at the next stop point:
 *  - at epoch level (run/epoch start and end hooks and events): at once;
 *    hooks and events of the epoch after the request are skipped;
 *  - inside a training step: after on_train_step_end, before backward (a
 *    loss a callback rejected, e.g. NaN, never reaches the weights), and at
 *    the end of the step (a request from backward_step or the update hooks:
 *    the update completes first);
 *  - inside an evaluation epoch: after the current batch (processes may have
 *    different numbers of eval batches, so agreement happens after the loop).
 * A stop skips the rest of the epoch, including its *_epoch_end hooks and
 * events and the run history's epoch increment; then on_stop_training_error
 * fires, then H:training_run_end and E:on_training_run_end, as in
 * pytorch-accelerated. The first reason is kept (copied) and printed with
 * trainer_print. A new run clears the request. */
void trainer_stop(Trainer *t, const char *reason);
bool trainer_stop_requested(const Trainer *t);
/* The reason of the last stop ("" when the last run was not stopped). */
const char *trainer_stop_reason(const Trainer *t);

/* ------------------------------------------------------------ callbacks */

/* Appends a callback (takes ownership; see callback_list_add). */
CtStatus trainer_add_callback(Trainer *t, Callback *cb);
CallbackList *trainer_callbacks(const Trainer *t);
/* Replaces the callback list and returns the previous one (ownership moves
 * both ways), for a nested run with other callbacks; put the old one back
 * afterwards. list must not be NULL. */
CallbackList *trainer_set_callbacks(Trainer *t, CallbackList *list);
/* Fires a custom named event on every callback, in order (their `custom`
 * slot). Errors: NULL/empty name, or the first callback error. */
CtStatus trainer_callback_event(Trainer *t, const char *event, void *payload);

/* ------------------------------------------------------------ accessors */

Runtime *trainer_runtime(const Trainer *t);
CtDevice trainer_device(const Trainer *t);
Module *trainer_model(const Trainer *t);
RunHistory *trainer_run_history(const Trainer *t);
/* NULL outside a run and before the first one; the last run's afterwards. */
const TrainerRunConfig *trainer_run_config(const Trainer *t);
/* The current run's loaders (NULL when there is none: no eval set, or the
 * train loader during trainer_evaluate). */
DataLoader *trainer_train_dataloader(const Trainer *t);
DataLoader *trainer_eval_dataloader(const Trainer *t);
/* Batches the loop will take per epoch: the loader's length, capped by
 * trainer_limit_batches. 0 without a loader. */
int64_t trainer_train_dataloader_len(const Trainer *t);
int64_t trainer_eval_dataloader_len(const Trainer *t);
/* Caps the batches per epoch (0: no cap), for debugging runs and limited
 * evaluations (pytorch-accelerated's LimitBatches/LimitEvalSteps). A cap on
 * the train loader set before trainer_train is part of the run config;
 * set during a run it changes only the loop. */
void trainer_limit_batches(Trainer *t, int64_t train_batches, int64_t eval_batches);
/* The caps trainer_limit_batches set (0: none); either pointer may be NULL. */
void trainer_batch_limits(const Trainer *t, int64_t *train_batches,
                          int64_t *eval_batches);
/* Updates in this run so far: the ends of gradient-accumulation windows,
 * including those a loss scaler skipped for inf/NaN gradients (no optimizer
 * or scheduler step; counted by scaler_skipped_steps), as accelerate's
 * loops count completed steps. max_num_train_steps, the Checkpoint
 * callback's every_n_updates and ModelEma's per-step updates count these. */
int64_t trainer_global_step(const Trainer *t);
/* The 0-based micro-batch index in the current train epoch (eval batch in an
 * eval epoch); -1 outside a step. */
int64_t trainer_epoch_step(const Trainer *t);
/* True while an evaluation epoch runs (inside trainer_train or evaluate). */
bool trainer_in_eval(const Trainer *t);
/* The sample-weighted mean loss of the current epoch so far on this process
 * (the eval epoch's inside one, else the train epoch's), in *mean; 0 when
 * no sample has been tracked yet. The running sum stays on the loss's
 * device during the epoch, so this is one host read (a device
 * synchronisation on a GPU): callbacks call it when they draw or log, not
 * every step. Errors: NULL argument, the read failed. */
CtStatus trainer_running_loss(const Trainer *t, double *mean);

/* Runs one evaluation epoch over the current eval loader from inside a
 * training run (pytorch-accelerated's _run_eval_epoch), e.g. for a step
 * based evaluation: the hooks and events of an eval epoch, with
 * is_intermediate passed to the events and the loss recorded as
 * "intermediate_eval_loss" (or "eval_loss_epoch" when !is_intermediate).
 * The eval epoch has its own loss tracker, so the train epoch's loss is
 * unaffected; afterwards every module of the model is put back in the mode
 * it had (training or eval), so a submodule kept in eval mode while the
 * rest trains stays so. Errors: no eval loader, out of memory. */
CtStatus trainer_run_eval_epoch(Trainer *t, bool is_intermediate);

/* ---------------------------------------------------------- utilities */

/* printf on the main process only (runtime_print). */
void trainer_print(const Trainer *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* runtime_gather / runtime_gather_padded through the trainer's runtime. */
Tensor *trainer_gather(Trainer *t, Tensor *x);
Tensor *trainer_gather_padded(Trainer *t, Tensor *x, double pad_value);
/* Rows at the end of the batch being iterated that are wrap-around
 * duplicates of the sharded loader (data_loader_batch_padding of the eval
 * loader during an eval epoch, of the train loader otherwise; 0 outside a
 * run). At most one per process and epoch. */
int64_t trainer_batch_padding(const Trainer *t);
/* runtime_gather_for_metrics with trainer_batch_padding: x's last rows
 * that are wrap-around duplicates of the sharded loader are dropped before
 * the gather, so metrics updated with the results of every batch count
 * each sample of the epoch exactly once, on every process. Call it per
 * batch, on rows that follow the batch's samples (model outputs,
 * targets). */
Tensor *trainer_gather_for_metrics(Trainer *t, Tensor *x);

#ifdef __cplusplus
}
#endif
#endif
