/* Private to trainer/: the trainer's state behind Trainer.state. */
#ifndef CTRAINER_TRAINER_INTERNAL_H
#define CTRAINER_TRAINER_INTERNAL_H

#include "ctrainer/trainer.h"

/* Sample-weighted running loss of one epoch (pytorch-accelerated's
 * LossTracker); totals are reduced across processes at the epoch end. The
 * steps' losses are logged on the loss's device (`log`, loss_tracker.c)
 * so a step never reads one back; `total` is the sum folded on the host
 * before them (0, or a resumed checkpoint's). Copy with
 * loss_tracker_assign, not `=`; release with loss_tracker_reset. */
typedef struct LossLog LossLog;
typedef struct LossTracker {
    double total; /* sum of loss * batch_size of the steps before log */
    double count; /* samples */
    LossLog *log; /* later steps' losses (shared, a reference), or NULL */
    int64_t n;    /* how many of log's steps are this tracker's */
} LossTracker;

/* total += loss * batch_size: one op on the loss's device, and no host
 * read but one every few thousand steps. */
CtStatus loss_tracker_add(LossTracker *lt, Tensor *loss, int64_t batch_size);
/* The running total in *total: one host read (a device synchronisation)
 * when it lives on a device. */
CtStatus loss_tracker_total(const LossTracker *lt, double *total);
/* dst <- src: dst shares src's log, whose written steps no tracker
 * changes (no op, no read). */
CtStatus loss_tracker_assign(LossTracker *dst, const LossTracker *src);
/* Releases lt's log; lt becomes the empty tracker. */
void loss_tracker_reset(LossTracker *lt);

/* A loaded checkpoint's position and the parts applied once a run reaches
 * them (trainer_load_state; consumed by the next trainer_train). */
typedef struct TrainerResume {
    bool pending;
    int64_t epoch, batch; /* 1-based epoch, next batch of that epoch */
    int64_t global_step;
    LossTracker train_loss; /* the partial epoch's loss so far */
    CtStateDict *scheduler; /* applied once the run's scheduler exists */
    CtStateDict *callbacks; /* applied after on_training_run_start */
    CtStateDict *trainer;   /* its trainer_state, to check the run's loader */
    char dir[512];          /* the checkpoint, for messages */
} TrainerResume;

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
    Tensor *seed; /* ones like the last loss backward_step seeded, or NULL */
    /* where a checkpoint saved now resumes: 1-based epoch and next batch */
    int64_t pos_epoch, pos_batch;
    LossTracker pos_loss; /* the epoch's loss up to pos_batch */
    TrainerResume resume;

    /* stopping: requested on this process / agreed by all processes */
    bool stop_requested, stop_agreed;
    char stop_reason[256];
    /* the stop agreement itself failed (a collective across processes): the
     * run unwinds as for a stop and ends with this error */
    CtStatus stop_error;
};

/* The hook to call: the user's, or the default. */
#define HOOK(t, name) ((t)->hooks.name ? (t)->hooks.name : trainer_default_##name)

/* A stop point: agrees on the stop flag across processes; true when the run
 * must stop (also sets state->stop_agreed; and state->stop_error when the
 * agreement failed). Every process calls it at the same points. Defined
 * next to the loops (loop.c), as is trainer_fire. */
bool trainer_stop_point(Trainer *t);
/* Fires an event on the trainer's callbacks. */
CtStatus trainer_fire(Trainer *t, CallbackEvent ev, const CallbackEventArgs *args);
/* Records the tracker's epoch mean (reduced over processes) as `name`. */
CtStatus trainer_record_loss(Trainer *t, const LossTracker *lt, const char *name);
/* Frees the loaders and scheduler of the previous run. */
void trainer_release_run(Trainer *t);
/* Builds state->rc for a training (train_dl set) or evaluation run. */
CtStatus trainer_make_run_config(Trainer *t, const TrainArgs *a);

/* Resume (checkpoint_resume.c). Called by trainer_train: after the
 * scheduler exists (loads TrainArgs.resume_from, applies a pending
 * scheduler state and the counters); after on_training_run_start (callback
 * states; returns the run epoch index to start from); at a train epoch's
 * start (the batch to continue from, restoring the partial epoch loss);
 * and at the end of the run (drops what was not consumed). */
CtStatus trainer_resume_prepare(Trainer *t, const TrainArgs *a);
CtStatus trainer_resume_run_start(Trainer *t, int64_t *first_epoch);
int64_t trainer_resume_epoch_start(Trainer *t);
void trainer_resume_clear(Trainer *t);

#endif
