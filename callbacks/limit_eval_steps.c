/* LimitEvalSteps: caps the eval loop of intermediate (or all) evaluations
 * at num_eval_steps batches over all processes. */
#include "cb_internal.h"

typedef struct LimitEval {
    Callback base;
    int64_t n;
    bool every;
    bool active;                     /* our cap is set */
    int64_t saved_train, saved_eval; /* the caps to put back */
    int64_t count;
} LimitEval;

static void put_back(LimitEval *l, Trainer *t)
{
    if (!l->active) return;
    trainer_limit_batches(t, l->saved_train, l->saved_eval);
    l->active = false;
}

static CtStatus le_eval_start(Callback *cb, Trainer *t, bool is_intermediate)
{
    LimitEval *l = (LimitEval *)cb;
    if (!is_intermediate && !l->every) return CT_OK;
    put_back(l, t); /* an evaluation that ended without on_eval_epoch_end */
    Runtime *rt = trainer_runtime(t);
    int64_t procs = rt ? runtime_world_size(rt) : 1;
    int64_t per = l->n / (procs > 0 ? procs : 1); /* pytorch-accelerated's // */
    if (per < 1) per = 1;
    int64_t len = trainer_eval_dataloader_len(t);
    trainer_batch_limits(t, &l->saved_train, &l->saved_eval);
    trainer_limit_batches(t, l->saved_train, per < len ? per : len);
    l->active = true;
    l->count++;
    return CT_OK;
}

static CtStatus le_eval_end(Callback *cb, Trainer *t, bool is_intermediate)
{
    (void)is_intermediate;
    put_back((LimitEval *)cb, t);
    return CT_OK;
}

static CtStatus le_put_back(Callback *cb, Trainer *t)
{
    put_back((LimitEval *)cb, t);
    return CT_OK;
}

static CtStatus le_run_start(Callback *cb, Trainer *t)
{
    LimitEval *l = (LimitEval *)cb;
    put_back(l, t); /* a run that failed inside a limited evaluation */
    l->count = 0;
    return CT_OK;
}

static const CallbackVtable limit_eval_vt = {
    .type = "LimitEvalSteps",
    .on_training_run_start = le_run_start,
    .on_evaluation_run_start = le_run_start,
    .on_eval_epoch_start = le_eval_start,
    .on_eval_epoch_end = le_eval_end,
    .on_stop_training_error = le_put_back,
    .on_training_run_end = le_put_back,
    .on_evaluation_run_end = le_put_back,
};

Callback *callback_limit_eval_steps_create(const LimitEvalStepsArgs *args)
{
    if (!args) {
        ct_error(CT_ERR_NULL, "LimitEvalSteps: args is NULL");
        return NULL;
    }
    if (args->num_eval_steps < 1) {
        ct_error(CT_ERR_INVALID, "LimitEvalSteps: num_eval_steps must be >= 1, got %lld",
                 (long long)args->num_eval_steps);
        return NULL;
    }
    LimitEval *l = (LimitEval *)cb_alloc(sizeof *l, &limit_eval_vt);
    if (!l) return NULL;
    l->n = args->num_eval_steps;
    l->every = args->limit_every_eval;
    return &l->base;
}

int64_t callback_limit_eval_steps_count(const Callback *cb)
{
    return cb_is(cb, &limit_eval_vt) ? ((const LimitEval *)cb)->count : 0;
}
