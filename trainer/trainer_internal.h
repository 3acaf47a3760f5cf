/* Private to trainer/: the trainer's state behind Trainer.state. */
#ifndef CTRAINER_TRAINER_INTERNAL_H
#define CTRAINER_TRAINER_INTERNAL_H

#include "ctrainer/trainer.h"

/* Sample-weighted running loss of one epoch (pytorch-accelerated's
 * LossTracker); totals are reduced across processes at the epoch end. */
typedef struct LossTracker {
    double total; /* sum of loss * batch_size */
    double count; /* samples */
} LossTracker;

struct TrainerState {
    Runtime *rt;
    bool own_rt;
    GradScaler *scaler; /* loss scaling (fp16 runs), or NULL */
    bool own_scaler;
    CallbackList *callbacks;
    RunHistory *history;

    /* the current (or last) run */
    bool running;
    const Dataset *train_ds, *eval_ds;
    DataCollateFn collate;
    void *collate_user;
    TrainerSchedulerFn scheduler_fn;
    void *scheduler_user;
    DataLoader *train_dl, *eval_dl;
    TrainerRunConfig rc;
    bool have_rc;
    int64_t limit_train, limit_eval; /* 0: no cap */
    int64_t global_step;             /* optimizer updates this run */
    bool max_steps_set;              /* TrainArgs.max_num_train_steps given */
    int64_t epoch_step;              /* -1 outside a step */
    bool in_eval;
    LossTracker train_loss, eval_loss;

    /* stopping: requested on this process / agreed by all processes */
    bool stop_requested, stop_agreed;
    char stop_reason[256];
};

/* The hook to call: the user's, or the default. */
#define HOOK(t, name) ((t)->hooks.name ? (t)->hooks.name : trainer_default_##name)

/* A stop point: agrees on the stop flag across processes; true when the run
 * must stop (also sets state->stop_agreed). Every process calls it at the
 * same points. Defined next to the loops (loop.c), as is trainer_fire. */
bool trainer_stop_point(Trainer *t);
/* Fires an event on the trainer's callbacks. */
CtStatus trainer_fire(Trainer *t, CallbackEvent ev, const CallbackEventArgs *args);
/* Records the tracker's epoch mean (reduced over processes) as `name`. */
CtStatus trainer_record_loss(Trainer *t, const LossTracker *lt, const char *name);
/* Frees the loaders and scheduler of the previous run. */
void trainer_release_run(Trainer *t);
/* Builds state->rc for a training (train_dl set) or evaluation run. */
CtStatus trainer_make_run_config(Trainer *t, const TrainArgs *a);

#endif
