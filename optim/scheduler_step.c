/* Multiplicative decays: StepLR, MultiStepLR, ExponentialLR.
 *
 * Closed forms of torch's recurrences (which multiply the previous LR by gamma
 * at each decay point):
 *   StepLR:        base * gamma^floor(t / step_size)
 *   MultiStepLR:   base * gamma^(number of milestones <= t)
 *   ExponentialLR: base * gamma^t
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler_internal.h"

typedef struct StepLR {
    Scheduler base;
    int64_t step_size;
    double gamma;
} StepLR;

static double step_lr_at(const Scheduler *s, int64_t t, int g)
{
    const StepLR *p = (const StepLR *)s;
    return s->base_lrs[g] * pow(p->gamma, (double)(t / p->step_size));
}

static const SchedulerOps step_ops = {.name = "StepLR", .lr_at = step_lr_at};

static bool gamma_ok(const char *who, double gamma)
{
    if (isfinite(gamma) && gamma > 0) return true;
    scheduler_fail(who, "gamma must be finite and > 0, got %g", gamma);
    return false;
}

Scheduler *scheduler_step_lr(Optimizer *o, int64_t step_size, double gamma)
{
    const char *who = "StepLR";
    if (o && step_size < 1)
        return scheduler_fail(who, "step_size must be >= 1, got %lld",
                              (long long)step_size);
    if (o && !gamma_ok(who, gamma)) return NULL;
    StepLR *p = (StepLR *)scheduler_alloc(sizeof *p, &step_ops, o, who);
    if (!p) return NULL;
    p->step_size = step_size;
    p->gamma = gamma;
    return scheduler_start(&p->base);
}

/* ------------------------------------------------------------ MultiStepLR */

typedef struct MultiStepLR {
    Scheduler base;
    int n;
    int64_t *milestones; /* strictly increasing */
    double gamma;
} MultiStepLR;

static double multistep_lr_at(const Scheduler *s, int64_t t, int g)
{
    const MultiStepLR *p = (const MultiStepLR *)s;
    int k = 0; /* milestones <= t; a handful, so a linear scan */
    while (k < p->n && p->milestones[k] <= t) k++;
    return s->base_lrs[g] * pow(p->gamma, (double)k);
}

static void multistep_destroy(Scheduler *s)
{
    free(((MultiStepLR *)s)->milestones);
}

static const SchedulerOps multistep_ops = {
    .name = "MultiStepLR", .lr_at = multistep_lr_at, .destroy = multistep_destroy};

Scheduler *scheduler_multistep_lr(Optimizer *o, int n, const int64_t *milestones,
                                  double gamma)
{
    const char *who = "MultiStepLR";
    if (o) {
        if (n < 0 || (n > 0 && !milestones))
            return scheduler_fail(
                who, "need n >= 0 milestones and a non-NULL array, got n=%d%s", n,
                milestones ? "" : " and NULL");
        for (int i = 0; i < n; i++) {
            if (milestones[i] < 0)
                return scheduler_fail(who, "milestone %d is negative (%lld)", i,
                                      (long long)milestones[i]);
            if (i > 0 && milestones[i] <= milestones[i - 1])
                return scheduler_fail(who,
                                      "milestones must be strictly increasing: "
                                      "milestones[%d]=%lld after milestones[%d]=%lld",
                                      i, (long long)milestones[i], i - 1,
                                      (long long)milestones[i - 1]);
        }
        if (!gamma_ok(who, gamma)) return NULL;
    }
    MultiStepLR *p = (MultiStepLR *)scheduler_alloc(sizeof *p, &multistep_ops, o, who);
    if (!p) return NULL;
    p->n = n;
    p->gamma = gamma;
    if (n > 0) {
        p->milestones = malloc((size_t)n * sizeof *p->milestones);
        if (!p->milestones) {
            scheduler_destroy(&p->base);
            ct_error(CT_ERR_OOM, "%s: out of memory", who);
            return NULL;
        }
        memcpy(p->milestones, milestones, (size_t)n * sizeof *p->milestones);
    }
    return scheduler_start(&p->base);
}

/* ---------------------------------------------------------- ExponentialLR */

typedef struct ExpLR {
    Scheduler base;
    double gamma;
} ExpLR;

static double exp_lr_at(const Scheduler *s, int64_t t, int g)
{
    return s->base_lrs[g] * pow(((const ExpLR *)s)->gamma, (double)t);
}

static const SchedulerOps exp_ops = {.name = "ExponentialLR", .lr_at = exp_lr_at};

Scheduler *scheduler_exponential_lr(Optimizer *o, double gamma)
{
    if (o && !gamma_ok("ExponentialLR", gamma)) return NULL;
    ExpLR *p = (ExpLR *)scheduler_alloc(sizeof *p, &exp_ops, o, "ExponentialLR");
    if (!p) return NULL;
    p->gamma = gamma;
    return scheduler_start(&p->base);
}
