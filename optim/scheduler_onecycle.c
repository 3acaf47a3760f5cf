/* OneCycleLR, as torch 1.13 defines it.
 *
 * initial = max_lr / div_factor, min = initial / final_div_factor, total = T,
 * p = pct_start. Phases (end steps are fractional, as in torch):
 *   two-phase:   [0, pT-1]: initial -> max,  momentum max_m -> base_m
 *                (.., T-1]: max -> min,      momentum base_m -> max_m
 *   three-phase: [0, pT-1]: initial -> max,  max_m -> base_m
 *                (.., 2pT-2]: max -> initial, base_m -> max_m
 *                (.., T-1]: initial -> min,  max_m
 * Within a phase from step a to b, pct = (t - a) / (b - a) and the value is
 * anneal(start, end, pct): cosine end + (start - end)(1 + cos(pi pct)) / 2,
 * or linear start + (end - start) pct. Step T extrapolates the last phase
 * (torch allows it); stepping past T is an error, as in torch. */
#include <math.h>

#include "scheduler_internal.h"

typedef struct Phase {
    double end_step;
    double start_lr, end_lr, start_m, end_m;
} Phase;

typedef struct OneCycle {
    Scheduler base;
    Phase phases[3];
    int nphases;
    int64_t total;
    bool linear, cycle_momentum;
} OneCycle;

static double anneal(const OneCycle *p, double start, double end, double pct)
{
    if (p->linear) return (end - start) * pct + start;
    return end + (start - end) / 2.0 * (cos(M_PI * pct) + 1);
}

/* Phase holding step t and the fraction of it done. */
static const Phase *phase_at(const OneCycle *p, int64_t t, double *pct)
{
    double start = 0;
    for (int i = 0;; i++) {
        const Phase *ph = &p->phases[i];
        if ((double)t <= ph->end_step || i == p->nphases - 1) {
            double len = ph->end_step - start;
            /* len is 0 only for an empty last phase (pct_start 1), which
             * torch divides by; we take that phase as done. */
            *pct = len != 0 ? ((double)t - start) / len : 1.0;
            return ph;
        }
        start = ph->end_step;
    }
}

static double onecycle_lr_at(const Scheduler *s, int64_t t, int g)
{
    (void)g; /* max_lr is the same for every group */
    double pct;
    const OneCycle *p = (const OneCycle *)s;
    const Phase *ph = phase_at(p, t, &pct);
    return anneal(p, ph->start_lr, ph->end_lr, pct);
}

static double onecycle_momentum_at(const Scheduler *s, int64_t t, int g)
{
    (void)g;
    const OneCycle *p = (const OneCycle *)s;
    if (!p->cycle_momentum) return NAN;
    double pct;
    const Phase *ph = phase_at(p, t, &pct);
    return anneal(p, ph->start_m, ph->end_m, pct);
}

static CtStatus onecycle_check(const Scheduler *s, int64_t t)
{
    int64_t total = ((const OneCycle *)s)->total;
    if (t <= total) return CT_OK;
    return ct_error(CT_ERR_STATE, "OneCycleLR: step %lld is past total_steps=%lld",
                    (long long)t, (long long)total);
}

static const SchedulerOps onecycle_ops = {.name = "OneCycleLR",
                                          .lr_at = onecycle_lr_at,
                                          .momentum_at = onecycle_momentum_at,
                                          .check_step = onecycle_check,
                                          .sets_initial_lr = true};

static double or_default(double v, double dflt)
{
    return v == 0 ? dflt : v;
}

static void set_phase(Phase *ph, double end_step, double lr0, double lr1, double m0,
                      double m1)
{
    *ph = (Phase){end_step, lr0, lr1, m0, m1};
}

Scheduler *scheduler_one_cycle_lr(Optimizer *o, const OneCycleArgs *args)
{
    const char *who = "OneCycleLR";
    if (o && !args) {
        ct_error(CT_ERR_NULL, "%s: args is NULL", who);
        return NULL;
    }
    OneCycleArgs a = args ? *args : (OneCycleArgs){0};
    a.pct_start = or_default(a.pct_start, 0.3);
    a.div_factor = or_default(a.div_factor, 25.0);
    a.final_div_factor = or_default(a.final_div_factor, 1e4);
    a.base_momentum = or_default(a.base_momentum, 0.85);
    a.max_momentum = or_default(a.max_momentum, 0.95);
    if (o) {
        if (a.total_steps < 1)
            return scheduler_fail(who, "total_steps must be >= 1, got %lld",
                                  (long long)a.total_steps);
        if (!(isfinite(a.max_lr) && a.max_lr > 0))
            return scheduler_fail(who, "max_lr must be finite and > 0, got %g", a.max_lr);
        if (!(a.pct_start > 0 && a.pct_start <= (a.three_phase ? 0.5 : 1.0)))
            return scheduler_fail(who, "pct_start must be in (0, %g]%s, got %g",
                                  a.three_phase ? 0.5 : 1.0,
                                  a.three_phase ? " with three_phase" : "", a.pct_start);
        if (!(isfinite(a.div_factor) && a.div_factor > 0 &&
              isfinite(a.final_div_factor) && a.final_div_factor > 0))
            return scheduler_fail(
                who, "div_factor and final_div_factor must be > 0, got %g, %g",
                a.div_factor, a.final_div_factor);
        if (!(a.base_momentum > 0 && a.max_momentum > 0 && a.base_momentum < 1 &&
              a.max_momentum < 1))
            return scheduler_fail(who, "momenta must be in (0, 1), got base %g, max %g",
                                  a.base_momentum, a.max_momentum);
    }
    OneCycle *p = (OneCycle *)scheduler_alloc(sizeof *p, &onecycle_ops, o, who);
    if (!p) return NULL;
    double T = (double)a.total_steps, pct = a.pct_start;
    double lr0 = a.max_lr / a.div_factor, lr_min = lr0 / a.final_div_factor;
    double m_lo = a.base_momentum, m_hi = a.max_momentum;
    p->total = a.total_steps;
    p->linear = a.anneal_linear;
    p->cycle_momentum = !a.no_cycle_momentum;
    set_phase(&p->phases[0], pct * T - 1, lr0, a.max_lr, m_hi, m_lo);
    if (a.three_phase) {
        set_phase(&p->phases[1], 2 * pct * T - 2, a.max_lr, lr0, m_lo, m_hi);
        set_phase(&p->phases[2], T - 1, lr0, lr_min, m_hi, m_hi);
        p->nphases = 3;
    } else {
        set_phase(&p->phases[1], T - 1, a.max_lr, lr_min, m_lo, m_hi);
        p->nphases = 2;
    }
    /* torch overwrites each group's initial_lr with max_lr / div_factor:
     * later schedulers start from it, and SequentialLR hands it to all */
    for (int g = 0; g < p->base.ngroups; g++) p->base.base_lrs[g] = lr0;
    return scheduler_start(&p->base);
}
