/* ctrainer — the built-in callbacks.
 *
 * Progress, metric logging, moving modules to the device, NaN termination,
 * early stopping, best-model saving, EMA, batch and eval-step limits,
 * step-based evaluation, WSD checkpoints, SyncBatchNorm conversion, metric
 * files and TensorBoard event files, written against the public callback interface
 * (callback.h) and trainer API (trainer.h) only, so each one is also an example to copy
 * for your own callbacks.
 */
#ifndef CTRAINER_CALLBACKS_H
#define CTRAINER_CALLBACKS_H

#include <stdio.h>

#include "ctrainer/callback.h"
#include "ctrainer/trainer.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Constructors return a new Callback (free with callback_free, or hand it
 * to a trainer/list which then owns it), or NULL with an error recorded.
 * The default list (pytorch-accelerated's DEFAULT_CALLBACKS) is at the end. */

/* Common conventions of the built-ins:
 *  - Callbacks that print write to an output FILE* (NULL: stdout), on the
 *    main process only (runtime_is_main_process), so logs are not repeated
 *    per rank. Files (checkpoints, logs) are written by the main process.
 *  - Constructors copy the strings they are given. Argument structs are
 *    zero-initialised for the defaults, so options whose default is "on"
 *    are spelled as no_<option>.
 *  - Queries (callback_*_triggered, ...) take the callback returned by the
 *    constructor; a NULL or other-typed callback gives the "nothing" value.
 *
 * Defaults are pytorch-accelerated's; where we deliberately differ, the
 * comment says so. */

/* ------------------------------------------------------- ProgressBar */

typedef enum ProgressBarMode {
    PROGRESS_BAR_AUTO = 0, /* TTY when isatty(fileno(out)), else LINES */
    PROGRESS_BAR_TTY,      /* one line redrawn in place with '\r' */
    PROGRESS_BAR_LINES,    /* a plain line every line_percent % (log files) */
} ProgressBarMode;

typedef struct ProgressBarArgs {
    FILE *out;            /* NULL: stdout */
    ProgressBarMode mode; /* default AUTO */
    int line_percent;     /* LINES: a line every this many percent (0 -> 10) */
    double min_interval;  /* TTY: seconds between redraws (0 -> 0.1) */
} ProgressBarArgs;

/* Type "ProgressBar": one bar per train and eval epoch ("train 1", "eval 1",
 * "eval (intermediate)", "evaluation") showing count/total batches,
 * percentage, rates (batches/s and samples/s, TrainerBatchOutput.batch_size
 * summed), ETA and the running sample-weighted mean of the batch losses, e.g.
 *     train 1 [#######.............]  7/20  35% | 41.2 it/s 1318 samples/s eta 0:00 |
 * loss 0.6931 The bar ends with a newline at the end of its epoch. args NULL: defaults.
 * The loss is the trainer's running loss (trainer_running_loss), read only
 * when a line is drawn, so a GPU run is not synchronised every step.
 */
Callback *callback_progress_bar_create(const ProgressBarArgs *args);

/* ----------------------------------------------------- PrintProgress */

/* Type "PrintProgress": pytorch-accelerated's messages ("Starting training
 * run", "Starting epoch 3", "Starting eval epoch", "Finishing training run",
 * "Starting evaluation run", "Finishing evaluation run"), one per line. */
Callback *callback_print_progress_create(FILE *out);

/* -------------------------------------------------------- LogMetrics */

/* The override point (pytorch-accelerated's LogMetricsCallback.log_metrics):
 * called with the latest value of each metric to log, in run-history order.
 * phase: "train" (after a train epoch: metrics whose name contains "train"),
 * "eval" (after an eval epoch: every other metric), "intermediate" (after a
 * step-based evaluation: only metrics whose name contains "intermediate"),
 * "evaluation" (after trainer_evaluate: every metric). names and values are
 * valid for the call. A non-OK return aborts the run. */
typedef CtStatus (*LogMetricsFn)(Trainer *t, const char *phase, int n,
                                 const char *const *names, const double *values,
                                 void *user);

typedef struct LogMetricsArgs {
    FILE *out;                /* default printer's output; NULL: stdout */
    LogMetricsFn log_metrics; /* NULL: print a table (main process only) */
    void *user;
} LogMetricsArgs;

/* Type "LogMetrics". The default printer writes
 *     epoch 2 train
 *       train_loss_epoch   0.412345
 * Deliberate difference: pytorch-accelerated also logs every non-train
 * metric after a step-based (intermediate) evaluation; we log only the
 * intermediate ones then, so an epoch's eval metrics are not repeated.
 * args NULL: defaults. */
Callback *callback_log_metrics_create(const LogMetricsArgs *args);

/* ----------------------------------------------- MoveModulesToDevice */

/* Moves an object to dev (e.g. a metric's state); CT_OK or an error. */
typedef CtStatus (*MoveToDeviceFn)(void *object, CtDevice dev);

/* Type "MoveModulesToDevice": at training and evaluation run start, moves
 * every registered object to the trainer's device (trainer_device).
 * pytorch-accelerated finds nn.Module attributes of the trainer by
 * reflection; C has none, so register what lives beside the model: extra
 * modules, persistent tensors such as a loss's pos_weight or class weights
 * (moved in place with tensor_rebind, so the loss holding them sees the
 * move), or anything with a move function (metric state). The model itself
 * is placed by the runtime. Registered objects are borrowed: they must
 * outlive the callback's runs. */
Callback *callback_move_modules_to_device_create(void);
CtStatus callback_move_modules_add_module(Callback *cb, Module *m);
/* t must be a persistent tensor not part of a pending autograd graph. */
CtStatus callback_move_modules_add_tensor(Callback *cb, Tensor *t);
CtStatus callback_move_modules_add(Callback *cb, MoveToDeviceFn fn, void *object);

/* ---------------------------------------------------- TerminateOnNaN */

/* Type "TerminateOnNaN": a NaN or infinite loss in a train or eval step
 * stops the run (trainer_stop, with "NaN loss in training step" /
 * "validation step", the epoch, step and value), before backward, so the
 * weights never see it. Deliberate difference: pytorch-accelerated then
 * calls sys.exit(); we never exit. Ask callback_terminate_on_nan_triggered
 * after the run and exit non-zero yourself. */
Callback *callback_terminate_on_nan_create(void);
/* The same, looking every `every` steps (and at each epoch end) instead of
 * every step. It looks at the epoch's running loss, which stays non-finite
 * once a step's loss was, so no bad step goes unnoticed; but a look is a
 * host read (a device synchronisation on a GPU), and a step between two
 * looks may update the weights. every = 1 is callback_terminate_on_nan_create.
 * Errors: every < 1. */
Callback *callback_terminate_on_nan_create_every(int64_t every);
/* True when the last training or evaluation run was stopped by a
 * non-finite loss (reset at each run start). */
bool callback_terminate_on_nan_triggered(const Callback *cb);

/* ----------------------------------------------------- EarlyStopping */

#define EARLY_STOPPING_ANY_IMPROVEMENT (-1.0)

typedef struct EarlyStoppingArgs {
    int patience; /* epochs without improvement (0 -> 1) */
    /* The improvement must be larger than this, in absolute value (0 ->
     * 0.01, pytorch-accelerated's default; EARLY_STOPPING_ANY_IMPROVEMENT
     * for any strict improvement). */
    double threshold;
    const char *watch_metric; /* NULL: "eval_loss_epoch" */
    bool greater_is_better;   /* false: lower is better */
    bool no_reset_on_train;   /* default: counter and best reset at run start */
} EarlyStoppingArgs;

/* Type "EarlyStopping", with pytorch-accelerated's semantics: after each
 * epoch (on_training_run_epoch_end) the watched metric's latest value is
 * compared with the best so far. The first value becomes the best. Then a
 * value that is better (strictly) AND differs from the best by more than
 * the threshold becomes the new best and resets the counter; any other
 * value, including a better one within the threshold, increments it, and
 * the best is NOT updated (so small improvements add up until they pass the
 * threshold). A NaN value after the first never improves, and any other
 * value improves on a NaN best. When the counter reaches patience, trainer_stop. A
 * watched metric that was never recorded is an error (CT_ERR_INVALID naming it). args
 * NULL: defaults. */
Callback *callback_early_stopping_create(const EarlyStoppingArgs *args);
/* The counter, and the best value (NAN before the first epoch). */
int callback_early_stopping_counter(const Callback *cb);
double callback_early_stopping_best(const Callback *cb);

/* ----------------------------------------------------- SaveBestModel */

typedef struct SaveBestModelArgs {
    const char *save_path;    /* NULL: "best_model.safetensors" */
    const char *watch_metric; /* NULL: "eval_loss_epoch" */
    bool greater_is_better;   /* false: lower is better */
    bool no_reset_on_train;   /* default: forget the best at run start */
    /* Default: the optimizer's and (when the run has one) the scheduler's
     * state are saved with the model, to <save_path without .safetensors>
     * followed by .optimizer.safetensors / .scheduler.safetensors. */
    bool no_save_optimizer;
    bool no_save_scheduler;
    /* Default: at training run end, load the best model (and the saved
     * optimizer/scheduler state) back. */
    bool no_load_saved_checkpoint;
} SaveBestModelArgs;

/* Type "SaveBestModel": after each epoch, when the watched metric is
 * strictly better than the best so far (the first epoch always is), saves
 * the model's state dict as safetensors (atomically, PyTorch names) with
 * metadata {"format": "pt", "<watch_metric>": "<value>", "epoch": "<n>"},
 * the same keys on every save (pytorch-accelerated writes "loss" after the
 * first save and ignores save_scheduler on the first: fixed). args NULL:
 * defaults. */
Callback *callback_save_best_model_create(const SaveBestModelArgs *args);
/* The best value (NAN before the first save) and the number of saves in
 * the current (or last) run. */
double callback_save_best_model_best(const Callback *cb);
int64_t callback_save_best_model_num_saves(const Callback *cb);

/* ---------------------------------------------------------- ModelEma */

typedef struct ModelEmaArgs {
    double decay; /* ema = decay * ema + (1 - decay) * weight (0 -> 0.99) */
    /* false (pytorch-accelerated): update once per train epoch, at its end;
     * true: after every optimizer update (timm's usual use) */
    bool update_every_step;
    /* false (default): buffers (batch-norm running stats, counters) are
     * copied from the model at each update; true: float buffers are
     * averaged like parameters (pytorch-accelerated's ModelEma, timm's
     * ModelEmaV2), integer buffers still copied. Copying keeps the running
     * statistics those of the live model's own averaging. */
    bool average_buffers;
    /* Default: after each eval epoch (not intermediate ones), evaluate the
     * EMA weights on the eval set; its losses/metrics are recorded under the
     * run-history prefix "ema_model_" (ema_model_eval_loss_epoch). */
    bool no_evaluation;
    /* Callbacks that see the EMA evaluation's events (owned by the EMA
     * callback; NULL: none). Metric callbacks go here. */
    CallbackList *callbacks;
    /* NULL: never save. Otherwise save the EMA weights after each epoch:
     * on improvement of watch_metric when evaluating, else every epoch. */
    const char *save_path;
    const char *watch_metric; /* NULL: "ema_model_eval_loss_epoch" */
    bool greater_is_better;
} ModelEmaArgs;

/* Type "ModelEma": an exponential moving average of the model's
 * parameters (and buffers, see average_buffers), taken at training run
 * start (a copy of the weights) and updated as configured. For an EMA
 * evaluation the model's values are swapped with the EMA's (t->model keeps
 * its identity), the trainer's callback list is swapped for `callbacks`,
 * the run-history prefix is set, trainer_run_eval_epoch runs, and all three
 * are restored, also on error. Put it after callbacks that record metrics
 * and before loggers. args NULL: defaults. */
Callback *callback_model_ema_create(const ModelEmaArgs *args);
/* The EMA tensors by the model's state-dict names (NULL before the first
 * training run). Owned by the callback. */
const CtStateDict *callback_model_ema_state(const Callback *cb);
/* Copies the EMA values into m (same architecture as the trained model). */
CtStatus callback_model_ema_copy_to(const Callback *cb, Module *m);
/* Updates applied in the last training run. */
int64_t callback_model_ema_num_updates(const Callback *cb);

/* ------------------------------------------------------ LimitBatches */

/* Type "LimitBatches": at most num_batches (> 0) train and eval batches per
 * epoch (trainer_limit_batches), for quick debugging runs. It applies the
 * cap when the trainer is created (on_init_end) and at each run start. */
Callback *callback_limit_batches_create(int64_t num_batches);
/* (CTRAINER_LIMIT_BATCHES=N in the environment sets the same cap through
 * the trainer itself: see TrainerConfig.) */

/* ----------------------------------------------- StepBasedEvaluation */

/* Type "StepBasedEvaluation": at on_train_step_end of every step with
 * step != 0 and step % eval_every_n_steps == 0 (step: the 0-based
 * micro-batch index within the epoch, as pytorch-accelerated), runs an
 * intermediate evaluation (trainer_run_eval_epoch(t, true)); its loss is
 * recorded as "intermediate_eval_loss" for the callbacks of that eval and
 * deleted afterwards. The model is put back in training mode afterwards
 * (pytorch-accelerated forgets). Needs an eval set (else CT_ERR_STATE). */
Callback *callback_step_based_evaluation_create(int64_t eval_every_n_steps);
/* Intermediate evaluations run in the last training run. */
int64_t callback_step_based_evaluation_count(const Callback *cb);

/* ---------------------------------------------------- LimitEvalSteps */

/* Type "LimitEvalSteps" (pytorch-accelerated's LimitEvalStepsCallback):
 * caps the eval loop of intermediate (step-based) evaluations, or of every
 * evaluation when !limit_intermediate_only, at num_eval_steps batches in
 * total over all processes: num_eval_steps / num_processes (rounded down,
 * as pytorch-accelerated's //) per process, but at least 1 (its 0 would run
 * an empty evaluation). E.g. 5 steps on 2 processes run 2 batches each, 4
 * in total. The first batches of each process's shard are taken. The cap is
 * set at on_eval_epoch_start (through trainer_limit_batches, keeping a
 * smaller cap already there, e.g. LimitBatches') and taken off at
 * on_eval_epoch_end (also at a stop or at the run's end). Put it before
 * ProgressBar, whose total then shows the capped length. Errors:
 * num_eval_steps < 1. */
typedef struct LimitEvalStepsArgs {
    int64_t num_eval_steps;
    bool limit_every_eval; /* default (false): intermediate evaluations only
                              (pytorch-accelerated's limit_intermediate_only=True) */
} LimitEvalStepsArgs;
Callback *callback_limit_eval_steps_create(const LimitEvalStepsArgs *args);
/* Evaluations limited in the last run (0 for another callback). */
int64_t callback_limit_eval_steps_count(const Callback *cb);

/* ----------------------------------------------------- MetricsLogger */

typedef struct MetricsLoggerArgs {
    const char *csv_path;   /* NULL: no CSV */
    const char *jsonl_path; /* NULL: no JSON lines; at least one path */
} MetricsLoggerArgs;

/* Type "MetricsLogger": one row per epoch (after on_training_run_epoch_end,
 * and one after trainer_evaluate) with the latest value of every metric
 * updated during that epoch. CSV: header "epoch,<metric>,..." (columns in
 * order of first appearance; empty cells where a metric has no value that
 * epoch); JSON lines: {"epoch": 1, "train_loss_epoch": 0.69, ...} per line,
 * NaN/inf as null. Both files are rewritten atomically (temp file + fsync +
 * rename) after each row, so a reader never sees a partial file; a training
 * run that starts at epoch 1 starts new files. */
Callback *callback_metrics_logger_create(const MetricsLoggerArgs *args);

/* -------------------------------------------------------- Checkpoint */

typedef struct CheckpointArgs {
    const char *dir;         /* required: the checkpoint root */
    int64_t every_n_updates; /* > 0: every n optimizer updates (mid-epoch) */
    bool every_epoch;        /* after every epoch (after its evaluation) */
    int total_limit;         /* keep the last K checkpoints (0: all) */
    bool no_at_end;          /* default: also save at the end of the run */
} CheckpointArgs;

/* Type "Checkpoint": training-state checkpoints (trainer_save_checkpoint
 * into dir: checkpoint_<n> directories, the `latest` pointer, rotation),
 * for a run resumed with TrainArgs.resume_from = "latest" and
 * .checkpoint_dir = dir. every_n_updates saves at the start of the step
 * after every n-th optimizer update (the position is then exact: the
 * resumed run continues with that step); every_epoch at
 * on_training_run_epoch_end; at the end of the run (on_training_run_end)
 * unless nothing ran since the last save. Put it LAST in the callback list,
 * so the callbacks before it have handled the event whose state it saves.
 * Every process calls it (each writes its own random_states file).
 * Errors: NULL/empty dir, every_n_updates or total_limit < 0. */
Callback *callback_checkpoint_create(const CheckpointArgs *args);
/* Checkpoints written by this callback so far (0 for another callback). */
int64_t callback_checkpoint_num_saves(const Callback *cb);

/* ----------------------------------------------------- WSDCheckpoint */

typedef struct WsdCheckpointArgs {
    const char *save_dir; /* NULL: "checkpoints"; created (with parents) */
    bool no_pre_decay;    /* default: save the pre-decay training states */
    bool no_post_decay;   /* default: save the post-decay weights */
} WsdCheckpointArgs;

/* Type "WSDCheckpoint" (pytorch-accelerated's WSDCheckpointCallback), for a
 * run whose scheduler is scheduler_wsd (else the run fails at its start
 * with CT_ERR_INVALID naming the scheduler). For each period of the
 * schedule, counted in scheduler steps (scheduler_step_count):
 *  - when the scheduler reaches the period's pre_decay_step, a training
 *    state (trainer_save_state, collective) into
 *    <save_dir>/checkpoint_<step>_wsd_pre_decay, at the start of the next
 *    train step (or at the epoch's or the run's end), so a run resumed from
 *    it (TrainArgs.resume_from) continues exactly there: it takes the decay
 *    and reproduces the post-decay weights bit for bit;
 *  - when it reaches the period's end, the model's weights (main process,
 *    as SaveBestModel: safetensors, PyTorch names, atomic) into
 *    <save_dir>/checkpoint_<step>_wsd_post_decay.safetensors, with metadata
 *    {"format": "pt", "step", "type": "post_decay", "total_steps",
 *    "decay_fraction"} (no timestamp, unlike pytorch-accelerated: the file
 *    is a function of the run).
 * A save happens once per step (its state records which ones it made, so a
 * resumed run does not repeat them). Deliberate difference: no
 * initial_checkpoint; resume a pre-decay state with TrainArgs.resume_from,
 * load a post-decay file with nn_module_load. Errors: I/O naming the path. */
Callback *callback_wsd_checkpoint_create(const WsdCheckpointArgs *args);
/* Saves made in the last run: pre-decay states and post-decay files. */
int64_t callback_wsd_checkpoint_num_pre_decay(const Callback *cb);
int64_t callback_wsd_checkpoint_num_post_decay(const Callback *cb);

/* ------------------------------------------------------- TensorBoard */

typedef struct TensorBoardArgs {
    const char *log_dir;       /* required; created (with parents) if missing */
    int64_t log_every_n_steps; /* step scalars every this many train steps (0 -> 50) */
} TensorBoardArgs;

/* Type "TensorBoard": scalars in a TensorBoard event file, written by the
 * main process to log_dir/events.out.tfevents.<unix time>.<host>.<pid>
 * (opened at the first training or evaluation run; later runs of the same
 * callback append to it; `tensorboard --logdir log_dir` shows it live).
 * Scalars (32-bit floats, as TensorBoard stores them):
 *   every log_every_n_steps train steps, at step = train steps seen so far
 *   (micro-batches, counted over all runs of this callback):
 *     train/loss             the step's batch loss (TrainerBatchOutput.loss)
 *     train/lr               the learning rate of parameter group 0
 *     train/samples_per_sec  samples since the previous step log / seconds
 *   after each epoch (on_training_run_epoch_end), at step = the epoch:
 *     epoch/<metric>         every run-history metric with a new value that
 *                            epoch (train_loss_epoch, eval_loss_epoch, ...)
 *     epoch/lr               the learning rate of parameter group 0
 *     epoch/samples_per_sec  the train epoch's samples / its seconds
 *   after trainer_evaluate: evaluation/<metric> at step = the epoch.
 * The file is TFRecord-framed (masked CRC-32C) tensorflow.Event messages,
 * flushed after every event. Errors: a missing log_dir or a negative
 * log_every_n_steps (at creation); a directory or file that cannot be
 * created or written (CT_ERR_IO from the run). */
Callback *callback_tensorboard_create(const TensorBoardArgs *args);
/* The event file's path (borrowed), or NULL before the first run, for
 * another type, or on a process that is not the main one. */
const char *callback_tensorboard_path(const Callback *cb);

/* ---------------------------------------------- ConvertSyncBatchNorm */

/* Type "ConvertSyncBatchNorm" (pytorch-accelerated's
 * ConvertSyncBatchNormCallback): at training run start, when more than one
 * process runs (runtime_is_distributed), converts the trainer's model in
 * place with runtime_convert_sync_batch_norm, so its BatchNorm1d/2d layers
 * take their training statistics over all processes (SyncBatchNorm, see
 * nn.h); parameters, buffers and the state dict are unchanged. With one
 * process (or no runtime) it does nothing. Put it after a ModelEma
 * callback, as pytorch-accelerated's docs advise. */
Callback *callback_convert_sync_batch_norm_create(void);
/* Layers converted at the last training run start (0 for another
 * callback, or with one process). */
int64_t callback_convert_sync_batch_norm_count(const Callback *cb);

/* ------------------------------------------------------ default list */

#define CALLBACKS_DEFAULT_MAX 5

/* pytorch-accelerated's DEFAULT_CALLBACKS: MoveModulesToDevice,
 * TerminateOnNaN, PrintProgress, ProgressBar (only when progress_bar),
 * LogMetrics, all with default arguments. Writes them to out[0..n) and
 * returns n; -1 with nothing written (and an error) when cap is too small
 * or a constructor fails. The caller owns them (pass them to TrainerConfig
 * or trainer_add_callback). Put your metric callbacks BEFORE these, so
 * LogMetrics sees their values. */
int callbacks_default(Callback **out, int cap, bool progress_bar);

#ifdef __cplusplus
}
#endif
#endif
