/* Cosine schedules: CosineAnnealingLR and CosineAnnealingWarmRestarts.
 *
 * CosineAnnealingLR:
 *   lr(t) = eta_min + (base - eta_min) * (1 + cos(pi * t / t_max)) / 2
 * for every t >= 0, so past t_max the LR climbs back up and the curve has
 * period 2 * t_max. That is torch's closed form, and also what its chainable
 * recurrence produces when stepped one step at a time (it adds
 * (base - eta_min) * (1 - cos(pi / t_max)) / 2 at t = t_max + 1 + 2k t_max and
 * scales by a cosine ratio elsewhere, which telescopes to the same curve):
 * torch 1.13's step-by-step values agree with this to ~1e-14 relative over
 * several periods (tests/fixtures/scheduler.py, 45 steps with t_max 10 and 7). */
#include <math.h>

#include "scheduler_internal.h"

typedef struct CosineLR {
    Scheduler base;
    int64_t t_max;
    double eta_min;
} CosineLR;

static double cosine_lr_at(const Scheduler *s, int64_t t, int g)
{
    const CosineLR *p = (const CosineLR *)s;
    double c = cos(M_PI * (double)t / (double)p->t_max);
    return p->eta_min + (s->base_lrs[g] - p->eta_min) * (1 + c) / 2;
}

static const SchedulerOps cosine_ops = {.name = "CosineAnnealingLR",
                                        .lr_at = cosine_lr_at};

Scheduler *scheduler_cosine_annealing_lr(Optimizer *o, int64_t t_max, double eta_min)
{
    const char *who = "CosineAnnealingLR";
    if (o && t_max < 1)
        return scheduler_fail(who, "t_max must be >= 1, got %lld", (long long)t_max);
    if (o && !isfinite(eta_min)) return scheduler_fail(who, "eta_min must be finite");
    CosineLR *p = (CosineLR *)scheduler_alloc(sizeof *p, &cosine_ops, o, who);
    if (!p) return NULL;
    p->t_max = t_max;
    p->eta_min = eta_min;
    return scheduler_start(&p->base);
}

/* ------------------------------------------------- warm restarts (SGDR) */

/* CosineAnnealingWarmRestarts, stepped as torch's step() without an epoch:
 * each step T_cur += 1, and when T_cur reaches T_i, T_cur -= T_i and
 * T_i *= T_mult; then
 *   lr = eta_min + (base - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2.
 * torch keeps T_cur and T_i as Python ints, so replaying the restarts from
 * t gives its values exactly (T_i at least doubles per restart when
 * T_mult > 1: a few dozen iterations at most). */
typedef struct WarmRestarts {
    Scheduler base;
    int64_t t_0, t_mult;
    double eta_min;
} WarmRestarts;

static double restarts_lr_at(const Scheduler *s, int64_t t, int g)
{
    const WarmRestarts *p = (const WarmRestarts *)s;
    int64_t cur = t, ti = p->t_0;
    if (p->t_mult == 1) {
        cur = t % ti;
    } else {
        while (cur >= ti) {
            cur -= ti;
            if (ti > INT64_MAX / p->t_mult) break; /* the next period outlasts any t */
            ti *= p->t_mult;
        }
    }
    double c = cos(M_PI * (double)cur / (double)ti);
    return p->eta_min + (s->base_lrs[g] - p->eta_min) * (1 + c) / 2;
}

static const SchedulerOps restarts_ops = {.name = "CosineAnnealingWarmRestarts",
                                          .lr_at = restarts_lr_at};

Scheduler *scheduler_cosine_warm_restarts(Optimizer *o, int64_t t_0, int64_t t_mult,
                                          double eta_min)
{
    const char *who = "CosineAnnealingWarmRestarts";
    if (o && t_0 < 1)
        return scheduler_fail(who, "t_0 must be >= 1, got %lld", (long long)t_0);
    if (o && t_mult < 1)
        return scheduler_fail(who, "t_mult must be >= 1, got %lld", (long long)t_mult);
    if (o && !isfinite(eta_min))
        return scheduler_fail(who, "eta_min must be finite, got %g", eta_min);
    WarmRestarts *p = (WarmRestarts *)scheduler_alloc(sizeof *p, &restarts_ops, o, who);
    if (!p) return NULL;
    p->t_0 = t_0;
    p->t_mult = t_mult;
    p->eta_min = eta_min;
    return scheduler_start(&p->base);
}
