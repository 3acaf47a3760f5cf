/* TerminateOnNaN: a non-finite loss stops the run (never exits). */
#include <math.h>

#include "cb_internal.h"

typedef struct TerminateOnNaN {
    Callback base;
    bool triggered;
} TerminateOnNaN;

static CtStatus check(Callback *cb, Trainer *t, const TrainerBatchOutput *out,
                      int64_t step, const char *where)
{
    if (!out || !out->loss) return CT_OK;
    if (tensor_numel(out->loss) != 1)
        return ct_error(CT_ERR_SHAPE,
                        "TerminateOnNaN: the loss has %lld elements, expected 1",
                        (long long)tensor_numel(out->loss));
    double v = tensor_item(out->loss);
    if (isfinite(v)) return CT_OK;
    ((TerminateOnNaN *)cb)->triggered = true;
    char reason[256];
    snprintf(reason, sizeof reason,
             "Stopping training due to a non-finite (NaN or Inf) loss in %s step (epoch "
             "%lld, step %lld: loss %g)",
             where, (long long)run_history_current_epoch(trainer_run_history(t)),
             (long long)step, v);
    trainer_stop(t, reason);
    return CT_OK;
}

static CtStatus tn_train_step_end(Callback *cb, Trainer *t, const DataBatch *batch,
                                  const TrainerBatchOutput *out, int64_t step)
{
    return check(cb, t, out, step, "training");
}

static CtStatus tn_eval_step_end(Callback *cb, Trainer *t, const DataBatch *batch,
                                 const TrainerBatchOutput *out, int64_t step)
{
    return check(cb, t, out, step, "validation");
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
};

Callback *callback_terminate_on_nan_create(void)
{
    return cb_alloc(sizeof(TerminateOnNaN), &terminate_on_nan_vt);
}

bool callback_terminate_on_nan_triggered(const Callback *cb)
{
    return cb_is(cb, &terminate_on_nan_vt) && ((const TerminateOnNaN *)cb)->triggered;
}
