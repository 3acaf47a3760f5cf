/* SequentialLR: scheds[i] runs from milestones[i-1] (0 for i = 0), restarted
 * from its own step 0, as torch 1.13's SequentialLR does (it steps the
 * child with step(0), the closed form at 0, at each milestone). So after t
 * updates the LR is scheds[i].lr_at(t - milestones[i-1]) for the last
 * milestone <= t.
 *
 * Base LRs: torch gives every child the group's initial_lr, i.e. the LR
 * before any scheduler touched it, and resets the optimizer to it. Our
 * children read the optimizer's LR when created, so the second child would
 * see what the first one wrote; we therefore hand every child the first
 * child's base LRs (OneCycleLR's are max_lr / div_factor, as torch's
 * initial_lr would be after it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler_internal.h"

typedef struct SeqLR {
    Scheduler base;
    int n;
    Scheduler **scheds;  /* [n], owned */
    int64_t *milestones; /* [n - 1], strictly increasing, >= 1 */
} SeqLR;

/* Index of the child active after t updates, and t in its own steps. */
static int child_at(const SeqLR *p, int64_t t, int64_t *local)
{
    int i = 0;
    while (i < p->n - 1 && p->milestones[i] <= t) i++;
    *local = i > 0 ? t - p->milestones[i - 1] : t;
    return i;
}

static double seq_lr_at(const Scheduler *s, int64_t t, int g)
{
    int64_t local;
    const Scheduler *c =
        ((const SeqLR *)s)->scheds[child_at((const SeqLR *)s, t, &local)];
    return c->ops->lr_at(c, local, g);
}

static double seq_momentum_at(const Scheduler *s, int64_t t, int g)
{
    int64_t local;
    const Scheduler *c =
        ((const SeqLR *)s)->scheds[child_at((const SeqLR *)s, t, &local)];
    return c->ops->momentum_at ? c->ops->momentum_at(c, local, g) : NAN;
}

static CtStatus seq_check(const Scheduler *s, int64_t t)
{
    int64_t local;
    const Scheduler *c =
        ((const SeqLR *)s)->scheds[child_at((const SeqLR *)s, t, &local)];
    return c->ops->check_step ? c->ops->check_step(c, local) : CT_OK;
}

static void seq_rebase(Scheduler *s)
{
    SeqLR *p = (SeqLR *)s;
    for (int i = 0; i < p->n; i++) {
        Scheduler *c = p->scheds[i];
        memcpy(c->base_lrs, s->base_lrs, (size_t)s->ngroups * sizeof *s->base_lrs);
        if (c->ops->rebase) c->ops->rebase(c);
    }
}

static void seq_destroy(Scheduler *s)
{
    SeqLR *p = (SeqLR *)s;
    for (int i = 0; i < p->n; i++) scheduler_destroy(p->scheds[i]);
    free(p->scheds);
    free(p->milestones);
}

static const SchedulerOps seq_ops = {.name = "SequentialLR",
                                     .lr_at = seq_lr_at,
                                     .momentum_at = seq_momentum_at,
                                     .check_step = seq_check,
                                     .rebase = seq_rebase,
                                     .destroy = seq_destroy};

/* Frees the distinct non-NULL schedulers of scheds[0..n) (we own them, also
 * when creation fails). */
static void free_children(int n, Scheduler *const *scheds)
{
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = scheds[j] == scheds[i];
        if (!seen) scheduler_destroy(scheds[i]);
    }
}

/* Records the first problem with the arguments; false when there is one. A
 * NULL child keeps the error that made it NULL (sticky). */
static bool args_ok(Optimizer *o, int n, Scheduler *const *scheds,
                    const int64_t *milestones)
{
    const char *who = "SequentialLR";
    if (n < 1 || !scheds)
        return scheduler_fail(who, "needs at least one scheduler, got %d%s", n,
                              scheds ? "" : " (NULL array)") != NULL;
    for (int i = 0; i < n; i++) {
        if (!scheds[i]) {
            if (ct_last_status() == CT_OK)
                ct_error(CT_ERR_NULL, "%s: scheduler %d is NULL", who, i);
            return false;
        }
        if (!scheds[i]->ops->lr_at)
            return scheduler_fail(who,
                                  "scheduler %d (%s) follows a metric, not the step "
                                  "count, and cannot be part of a SequentialLR",
                                  i, scheds[i]->ops->name) != NULL;
        if (scheds[i]->opt != o)
            return scheduler_fail(who,
                                  "scheduler %d (%s) belongs to a different optimizer", i,
                                  scheds[i]->ops->name) != NULL;
        for (int j = 0; j < i; j++)
            if (scheds[j] == scheds[i])
                return scheduler_fail(who, "schedulers %d and %d are the same object", j,
                                      i) != NULL;
    }
    if (n > 1 && !milestones)
        return scheduler_fail(who, "%d schedulers need %d milestones, got NULL", n,
                              n - 1) != NULL;
    for (int i = 0; i < n - 1; i++) {
        if (milestones[i] < 1 || (i > 0 && milestones[i] <= milestones[i - 1]))
            return scheduler_fail(who,
                                  "milestones must be strictly increasing and >= 1: "
                                  "milestones[%d]=%lld%s",
                                  i, (long long)milestones[i],
                                  i > 0 ? " after a larger or equal one" : "") != NULL;
    }
    return true;
}

static SeqLR *seq_create(Optimizer *o, int n, Scheduler *const *scheds,
                         const int64_t *milestones)
{
    SeqLR *p = (SeqLR *)scheduler_alloc(sizeof *p, &seq_ops, o, "SequentialLR");
    if (!p) return NULL;
    p->scheds = calloc((size_t)n, sizeof *p->scheds);
    p->milestones = n > 1 ? malloc((size_t)(n - 1) * sizeof *p->milestones) : NULL;
    if (!p->scheds || (n > 1 && !p->milestones)) {
        scheduler_destroy(&p->base); /* n is still 0: children not yet owned */
        ct_error(CT_ERR_OOM, "SequentialLR: out of memory");
        return NULL;
    }
    memcpy(p->scheds, scheds, (size_t)n * sizeof *scheds);
    if (n > 1) memcpy(p->milestones, milestones, (size_t)(n - 1) * sizeof *milestones);
    p->n = n;
    return p;
}

Scheduler *scheduler_sequential_lr(Optimizer *o, int n, Scheduler *const *scheds,
                                   const int64_t *milestones)
{
    SeqLR *p = NULL;
    if (!o) {
        if (ct_last_status() == CT_OK)
            ct_error(CT_ERR_NULL, "SequentialLR: optimizer is NULL");
    } else if (args_ok(o, n, scheds, milestones)) {
        p = seq_create(o, n, scheds, milestones);
    }
    if (!p) {
        if (scheds && n > 0) free_children(n, scheds);
        return NULL;
    }
    /* torch's initial_lr once every child exists: the first child's base
     * LRs, unless a child overwrote them (the last OneCycleLR) */
    const Scheduler *initial = p->scheds[0];
    for (int i = 1; i < n; i++)
        if (p->scheds[i]->ops->sets_initial_lr) initial = p->scheds[i];
    memcpy(p->base.base_lrs, initial->base_lrs,
           (size_t)p->base.ngroups * sizeof *p->base.base_lrs);
    seq_rebase(&p->base);
    return scheduler_start(&p->base);
}
