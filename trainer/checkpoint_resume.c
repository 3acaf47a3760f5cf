/* Resuming a run from a loaded checkpoint: the counters, the scheduler once
 * it exists, the callbacks after on_training_run_start, and the batch the
 * first resumed epoch continues from (data_loader_skip). */
#include <stdlib.h>
#include <string.h>

#include "checkpoint_internal.h"

void ckpt_resume_free(TrainerResume *r)
{
    ct_state_dict_free(r->scheduler);
    ct_state_dict_free(r->callbacks);
    ct_state_dict_free(r->trainer);
    *r = (TrainerResume){0};
}

void trainer_resume_clear(Trainer *t)
{
    ckpt_resume_free(&t->state->resume);
}

/* The directory TrainArgs.resume_from names ("latest": the checkpoint_dir's
 * latest pointer), malloc'd. */
static char *resume_dir(const TrainArgs *a)
{
    if (strcmp(a->resume_from, "latest") != 0) {
        char *d = strdup(a->resume_from);
        if (!d) ct_error(CT_ERR_OOM, "trainer_train: out of memory");
        return d;
    }
    if (!a->checkpoint_dir) {
        ct_error(CT_ERR_INVALID, "trainer_train: resume_from \"latest\" needs "
                                 "TrainArgs.checkpoint_dir (where `latest` is)");
        return NULL;
    }
    return trainer_latest_checkpoint(a->checkpoint_dir);
}

/* The run's parts that exist only now: its loader must be the saved one,
 * and its scheduler takes the checkpoint's scheduler state (resume.scheduler,
 * NULL when the checkpoint has none: then the run must have none either). */
static CtStatus resume_into_run(Trainer *t)
{
    TrainerState *s = t->state;
    CtStatus st = ckpt_check_loader(t, s->resume.trainer, s->resume.dir);
    if (st != CT_OK) return st;
    if (s->resume.scheduler && !t->scheduler)
        return ct_error(CT_ERR_INVALID,
                        "trainer_train: the checkpoint has a scheduler "
                        "state, the run no scheduler (create_scheduler_fn)");
    if (!s->resume.scheduler && t->scheduler)
        return ct_error(CT_ERR_INVALID,
                        "checkpoint %s: the run has a scheduler, the checkpoint none "
                        "(mismatched scheduler)",
                        s->resume.dir);
    if (s->resume.scheduler) {
        st = scheduler_state_load(t->scheduler, s->resume.scheduler);
        if (st != CT_OK) return st;
    }
    s->global_step = s->resume.global_step;
    return CT_OK;
}

/* Collective when resuming: every process resumes or none does. */
CtStatus trainer_resume_prepare(Trainer *t, const TrainArgs *a)
{
    if (a->resume_from && *a->resume_from) {
        char *dir = resume_dir(a);
        CtStatus st = ckpt_load(t, dir);
        free(dir);
        if (st != CT_OK) return st;
    }
    if (!t->state->resume.pending) return CT_OK;
    return ckpt_agree(t, resume_into_run(t), NULL);
}

CtStatus trainer_resume_run_start(Trainer *t, int64_t *first_epoch)
{
    TrainerResume *r = &t->state->resume;
    *first_epoch = 0;
    if (!r->pending) return CT_OK;
    if (r->callbacks) {
        CtStatus st = ckpt_apply_callback_state(t, r->callbacks);
        if (st != CT_OK) return st;
    }
    *first_epoch = r->epoch - 1;
    return CT_OK;
}

int64_t trainer_resume_epoch_start(Trainer *t)
{
    TrainerState *s = t->state;
    if (!s->resume.pending) return 0;
    int64_t batch = s->resume.batch;
    /* the resumed tracker holds host values only: no device tensor */
    loss_tracker_reset(&s->train_loss);
    s->train_loss = s->resume.train_loss;
    trainer_resume_clear(t);
    return batch;
}
