/* Checkpoint: training-state checkpoints every n updates, every epoch and
 * at the end of the run (trainer_save_checkpoint does the writing). */
#include <stdlib.h>

#include "cb_internal.h"

typedef struct Checkpoint {
    Callback base;
    char *dir;
    int64_t every_n;
    bool every_epoch, at_end;
    int total_limit;
    int64_t last_step; /* global step of the last save (or of the run start) */
    bool dirty;        /* a step ran since the last save */
    int64_t saves;
} Checkpoint;

static void ck_free(Callback *cb)
{
    free(((Checkpoint *)cb)->dir);
    free(cb);
}

static CtStatus save(Checkpoint *c, Trainer *t)
{
    CtStatus st = trainer_save_checkpoint(t, c->dir, c->total_limit);
    if (st != CT_OK) return st;
    c->last_step = trainer_global_step(t);
    c->dirty = false;
    c->saves++;
    return CT_OK;
}

static CtStatus ck_run_start(Callback *cb, Trainer *t)
{
    Checkpoint *c = (Checkpoint *)cb;
    c->last_step = trainer_global_step(t); /* a resumed run does not save again */
    c->dirty = false;
    return CT_OK;
}

/* At the start of the step after an update, the trainer's position is the
 * step about to run: a resumed run continues exactly there. */
static CtStatus ck_step_start(Callback *cb, Trainer *t)
{
    Checkpoint *c = (Checkpoint *)cb;
    int64_t gs = trainer_global_step(t);
    if (c->every_n > 0 && gs != c->last_step && gs % c->every_n == 0) return save(c, t);
    return CT_OK;
}

static CtStatus ck_step_end(Callback *cb, Trainer *t, const DataBatch *b,
                            const TrainerBatchOutput *out, int64_t step)
{
    (void)t, (void)b, (void)out, (void)step;
    ((Checkpoint *)cb)->dirty = true;
    return CT_OK;
}

static CtStatus ck_epoch_end(Callback *cb, Trainer *t)
{
    Checkpoint *c = (Checkpoint *)cb;
    return c->every_epoch ? save(c, t) : CT_OK;
}

static CtStatus ck_run_end(Callback *cb, Trainer *t)
{
    Checkpoint *c = (Checkpoint *)cb;
    return c->at_end && (c->dirty || c->saves == 0) ? save(c, t) : CT_OK;
}

static const CallbackVtable checkpoint_vt = {
    .type = "Checkpoint",
    .free = ck_free,
    .on_training_run_start = ck_run_start,
    .on_train_step_start = ck_step_start,
    .on_train_step_end = ck_step_end,
    .on_training_run_epoch_end = ck_epoch_end,
    .on_training_run_end = ck_run_end,
};

Callback *callback_checkpoint_create(const CheckpointArgs *args)
{
    if (!args || !args->dir || !*args->dir) {
        ct_error(CT_ERR_NULL, "Checkpoint: CheckpointArgs.dir is required");
        return NULL;
    }
    if (args->every_n_updates < 0 || args->total_limit < 0) {
        ct_error(CT_ERR_INVALID,
                 "Checkpoint: every_n_updates %lld and total_limit %d must be >= 0",
                 (long long)args->every_n_updates, args->total_limit);
        return NULL;
    }
    Checkpoint *c = (Checkpoint *)cb_alloc(sizeof *c, &checkpoint_vt);
    if (!c) return NULL;
    c->dir = cb_strdup(args->dir, NULL);
    if (!c->dir) {
        free(c);
        return NULL;
    }
    c->every_n = args->every_n_updates;
    c->every_epoch = args->every_epoch;
    c->at_end = !args->no_at_end;
    c->total_limit = args->total_limit;
    return &c->base;
}

int64_t callback_checkpoint_num_saves(const Callback *cb)
{
    return cb_is(cb, &checkpoint_vt) ? ((const Checkpoint *)cb)->saves : 0;
}
