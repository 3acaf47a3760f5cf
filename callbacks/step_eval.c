/* StepBasedEvaluation: an intermediate evaluation every n train steps. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cb_internal.h"

typedef struct StepEval {
    Callback base;
    int64_t every;
    int64_t count;
} StepEval;

static CtStatus se_run_start(Callback *cb, Trainer *t)
{
    ((StepEval *)cb)->count = 0;
    return CT_OK;
}

static CtStatus se_step_end(Callback *cb, Trainer *t, const DataBatch *batch,
                            const TrainerBatchOutput *out, int64_t step)
{
    StepEval *s = (StepEval *)cb;
    if (step == 0 || step % s->every != 0) return CT_OK;
    if (!trainer_eval_dataloader(t))
        return ct_error(CT_ERR_STATE, "StepBasedEvaluation: the run has no eval set");
    /* every module's mode is put back, whatever happened (pytorch-
     * accelerated leaves the rest of the epoch in eval mode) */
    CtStatus st = trainer_run_eval_epoch(t, true);
    if (st != CT_OK) return st;
    s->count++;
    RunHistory *h = trainer_run_history(t);
    char name[RUN_HISTORY_MAX_NAME];
    snprintf(name, sizeof name, "%sintermediate_eval_loss", run_history_prefix(h));
    if (run_history_has_metric(h, name)) return run_history_delete(h, name);
    return CT_OK;
}

static CtStatus se_state_save(Callback *cb, Trainer *t, CtStateDict *out)
{
    (void)t;
    return cb_state_put(out, "count", (double)((StepEval *)cb)->count);
}

static CtStatus se_state_load(Callback *cb, Trainer *t, const CtStateDict *in)
{
    (void)t;
    double count;
    CtStatus st = cb_state_get(in, "StepBasedEvaluation", "count", &count);
    if (st == CT_OK && !(count >= 0 && count < 0x1p53 && count == floor(count)))
        st = ct_error(CT_ERR_INVALID,
                      "StepBasedEvaluation: state entry 'count' is %g, not a count",
                      count);
    if (st == CT_OK) ((StepEval *)cb)->count = (int64_t)count;
    return st;
}

static const CallbackVtable step_eval_vt = {
    .type = "StepBasedEvaluation",
    .state_save = se_state_save,
    .state_load = se_state_load,
    .on_training_run_start = se_run_start,
    .on_train_step_end = se_step_end,
};

Callback *callback_step_based_evaluation_create(int64_t eval_every_n_steps)
{
    if (eval_every_n_steps <= 0) {
        ct_error(CT_ERR_INVALID,
                 "StepBasedEvaluation: eval_every_n_steps must be > 0, got %lld",
                 (long long)eval_every_n_steps);
        return NULL;
    }
    StepEval *s = (StepEval *)cb_alloc(sizeof *s, &step_eval_vt);
    if (s) s->every = eval_every_n_steps;
    return &s->base;
}

int64_t callback_step_based_evaluation_count(const Callback *cb)
{
    return cb_is(cb, &step_eval_vt) ? ((const StepEval *)cb)->count : 0;
}
