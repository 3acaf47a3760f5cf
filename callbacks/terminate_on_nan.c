/* TerminateOnNaN: a non-finite loss stops the run (never exits). It looks
 * at the trainer's running epoch loss, which a non-finite step loss makes
 * non-finite for the rest of the epoch, so looking only every few steps
 * still catches it. */
#include <math.h>

#include "cb_internal.h"

typedef struct TerminateOnNaN {
    Callback base;
    int64_t every;
    bool triggered;
} TerminateOnNaN;

/* step: the step just ended, or -1 at an epoch end. */
static CtStatus check(Callback *cb, Trainer *t, int64_t step, const char *where)
{
    TerminateOnNaN *tn = (TerminateOnNaN *)cb;
    if (step >= 0 && (step + 1) % tn->every != 0) return CT_OK;
    double v;
    CtStatus st = trainer_running_loss(t, &v);
    if (st != CT_OK) return ct_error_wrap(st, "TerminateOnNaN");
    if (isfinite(v)) return CT_OK;
    tn->triggered = true;
    char at[64] = "at the epoch end";
    if (step >= 0) snprintf(at, sizeof at, "step %lld", (long long)step);
    char reason[256];
    snprintf(reason, sizeof reason,
             "Stopping training due to a non-finite (NaN or Inf) loss in %s step (epoch "
             "%lld, %s: running loss %g)",
             where, (long long)run_history_current_epoch(trainer_run_history(t)), at, v);
    trainer_stop(t, reason);
    return CT_OK;
}

static CtStatus tn_train_step_end(Callback *cb, Trainer *t, const DataBatch *batch,
                                  const TrainerBatchOutput *out, int64_t step)
{
    return check(cb, t, step, "training");
}

static CtStatus tn_eval_step_end(Callback *cb, Trainer *t, const DataBatch *batch,
                                 const TrainerBatchOutput *out, int64_t step)
{
    return check(cb, t, step, "validation");
}

static CtStatus tn_train_epoch_end(Callback *cb, Trainer *t)
{
    return ((TerminateOnNaN *)cb)->every > 1 ? check(cb, t, -1, "training") : CT_OK;
}

static CtStatus tn_eval_epoch_end(Callback *cb, Trainer *t, bool is_intermediate)
{
    return ((TerminateOnNaN *)cb)->every > 1 ? check(cb, t, -1, "validation") : CT_OK;
}

static CtStatus tn_run_start(Callback *cb, Trainer *t)
{
    ((TerminateOnNaN *)cb)->triggered = false;
    return CT_OK;
}

static const CallbackVtable terminate_on_nan_vt = {
    .type = "TerminateOnNaN",
    .on_training_run_start = tn_run_start,
    .on_evaluation_run_start = tn_run_start,
    .on_train_step_end = tn_train_step_end,
    .on_eval_step_end = tn_eval_step_end,
    .on_train_epoch_end = tn_train_epoch_end,
    .on_eval_epoch_end = tn_eval_epoch_end,
};

Callback *callback_terminate_on_nan_create_every(int64_t every)
{
    if (every < 1) {
        ct_error(CT_ERR_INVALID,
                 "callback_terminate_on_nan_create_every: every %lld must be >= 1",
                 (long long)every);
        return NULL;
    }
    TerminateOnNaN *tn = (TerminateOnNaN *)cb_alloc(sizeof *tn, &terminate_on_nan_vt);
    if (!tn) return NULL;
    tn->every = every;
    return &tn->base;
}

Callback *callback_terminate_on_nan_create(void)
{
    return callback_terminate_on_nan_create_every(1);
}

bool callback_terminate_on_nan_triggered(const Callback *cb)
{
    return cb_is(cb, &terminate_on_nan_vt) && ((const TerminateOnNaN *)cb)->triggered;
}
