/* Scheduler base shared by the LR schedulers (private to optim/).
 *
 * A scheduler is a pure function of the step count: ops->lr_at(s, step, g)
 * gives group g's LR after `step` updates. scheduler_step only advances the count
 * and writes lr_at(count) into the optimizer, so state save/load is just the
 * count (and the base LRs), and a resumed run reproduces an uninterrupted
 * one exactly. PyTorch computes most schedules with chainable recurrences
 * (lr_t from the optimizer's lr_{t-1}); we use their closed forms, which
 * agree to rounding (checked against torch 1.13's step-by-step values in
 * tests/optim/test_scheduler.c). Unlike torch, an LR changed by hand in the
 * optimizer is overwritten at the next step instead of being chained from.
 *
 * ReduceLROnPlateau is the exception: its LRs follow the metrics it is given
 * (scheduler_step_metric), not the step count. It has no lr_at, so
 * scheduler_step only counts, and its own state (best metric, counters,
 * current LRs) travels as extra state entries.
 *
 * A concrete scheduler embeds Scheduler as its first member:
 *     typedef struct { Scheduler base; double gamma; } ExpLR;
 */
#ifndef CTRAINER_OPTIM_SCHED_INTERNAL_H
#define CTRAINER_OPTIM_SCHED_INTERNAL_H

#include "ctrainer/optim.h"

/* One extra state entry: a 0-d tensor, i64 when is_count (a non-negative
 * integer, checked on load), else f64 (not NaN, checked on load). */
typedef struct SchedulerExtra {
    char name[48];
    double value;
    bool is_count;
} SchedulerExtra;

typedef struct SchedulerOps {
    const char *name; /* PyTorch's class name where there is one */
    /* LR of group g after `step` updates (step >= 0). Pure. NULL: the LRs
     * are not a function of the step (ReduceLROnPlateau): scheduler_step
     * only counts, and scheduler_apply writes last_lrs. */
    double (*lr_at)(const Scheduler *s, int64_t step, int g);
    /* Momentum (beta1 for Adam) of group g after `step` updates, or NAN to
     * leave the optimizer's momentum alone. NULL: never touches momentum. */
    double (*momentum_at)(const Scheduler *s, int64_t step, int g);
    /* Records an error and returns it when `step` is past the schedule's end
     * (OneCycleLR). NULL: every step is valid. */
    CtStatus (*check_step)(const Scheduler *s, int64_t step);
    /* Called after scheduler_state_load replaced base_lrs (SequentialLR passes
     * them on to its children). NULL: nothing to do. */
    void (*rebase)(Scheduler *s);
    /* Extra state beyond step and base LRs: n_extra entries, which
     * extra_get fills (names and values) in save order. extra_set receives
     * them back with the values loaded by those names, checks them and
     * commits, or records an error and changes nothing; it runs after every
     * other check of a load, before anything is committed. NULL n_extra:
     * none. */
    int (*n_extra)(const Scheduler *s);
    void (*extra_get)(const Scheduler *s, SchedulerExtra *out);
    CtStatus (*extra_set)(Scheduler *s, const SchedulerExtra *in);
    /* scheduler_step_metric. NULL: the scheduler takes no metric. */
    CtStatus (*step_metric)(Scheduler *s, double metric);
    /* Frees what the concrete scheduler owns, not s itself. NULL: nothing. */
    void (*destroy)(Scheduler *s);
    /* Its creation overwrites torch's initial_lr with its base LRs
     * (OneCycleLR), which SequentialLR then gives every child. */
    bool sets_initial_lr;
} SchedulerOps;

struct Scheduler {
    const SchedulerOps *ops;
    Optimizer *opt; /* borrowed */
    int ngroups;
    int64_t step;     /* updates taken */
    double *base_lrs; /* [ngroups]: the group LRs at creation (torch's initial_lr) */
    double *last_lrs; /* [ngroups]: what was last written into the optimizer */
};

/* Allocates `size` zeroed bytes (size >= sizeof(Scheduler)) and fills the base
 * from `o`: group count and base LRs. `who` names the constructor in errors.
 * A NULL o returns NULL and keeps an earlier error (sticky), else records
 * CT_ERR_NULL. */
Scheduler *scheduler_alloc(size_t size, const SchedulerOps *ops, Optimizer *o,
                           const char *who);
/* Writes step 0 into the optimizer, as PyTorch does at construction. Returns s,
 * or frees s and returns NULL when step 0 is invalid. */
Scheduler *scheduler_start(Scheduler *s);
/* Frees a scheduler that scheduler_alloc returned (also a half-filled one). */
void scheduler_destroy(Scheduler *s);
/* Writes lr_at(step) (and momentum_at(step)) into the optimizer and
 * last_lrs (without lr_at: last_lrs into the optimizer); does not change
 * s->step. Checks the step first. */
CtStatus scheduler_apply(Scheduler *s, int64_t step);

/* Records a CT_ERR_INVALID error "<who>: <msg>" and returns NULL. */
Scheduler *scheduler_fail(const char *who, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
