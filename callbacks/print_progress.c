/* PrintProgress: pytorch-accelerated's PrintProgressCallback messages. */
#include "cb_internal.h"

typedef struct PrintProgress {
    Callback base;
    FILE *out;
} PrintProgress;

static void say(Callback *cb, Trainer *t, const char *msg, int64_t epoch)
{
    if (!cb_is_main(t)) return;
    FILE *f = cb_out(((PrintProgress *)cb)->out);
    if (epoch > 0)
        fprintf(f, "%s %lld\n", msg, (long long)epoch);
    else
        fprintf(f, "%s\n", msg);
    fflush(f);
}

static CtStatus pp_run_start(Callback *cb, Trainer *t)
{
    say(cb, t, "Starting training run", 0);
    return CT_OK;
}

static CtStatus pp_epoch_start(Callback *cb, Trainer *t)
{
    say(cb, t, "Starting epoch", run_history_current_epoch(trainer_run_history(t)));
    return CT_OK;
}

static CtStatus pp_eval_start(Callback *cb, Trainer *t, bool is_intermediate)
{
    say(cb, t,
        is_intermediate ? "Starting intermediate eval epoch" : "Starting eval epoch", 0);
    return CT_OK;
}

static CtStatus pp_run_end(Callback *cb, Trainer *t)
{
    say(cb, t, "Finishing training run", 0);
    return CT_OK;
}

static CtStatus pp_evaluation_start(Callback *cb, Trainer *t)
{
    say(cb, t, "Starting evaluation run", 0);
    return CT_OK;
}

static CtStatus pp_evaluation_end(Callback *cb, Trainer *t)
{
    say(cb, t, "Finishing evaluation run", 0);
    return CT_OK;
}

static const CallbackVtable print_progress_vt = {
    .type = "PrintProgress",
    .on_training_run_start = pp_run_start,
    .on_train_epoch_start = pp_epoch_start,
    .on_eval_epoch_start = pp_eval_start,
    .on_training_run_end = pp_run_end,
    .on_evaluation_run_start = pp_evaluation_start,
    .on_evaluation_run_end = pp_evaluation_end,
};

Callback *callback_print_progress_create(FILE *out)
{
    PrintProgress *p = (PrintProgress *)cb_alloc(sizeof *p, &print_progress_vt);
    if (p) p->out = out;
    return &p->base;
}
