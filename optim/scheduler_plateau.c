/* ReduceLROnPlateau: torch 1.13's, stepped with a metric.
 *
 * Per metric step (scheduler_step_metric), as torch's step(metrics):
 *   better = mode min: m < best * (1 - threshold)   (rel)  or  m < best - threshold (abs)
 *            mode max: m > best * (1 + threshold)   (rel)  or  m > best + threshold (abs)
 *   better ? (best = m, bad = 0) : bad++          (best starts at +-inf; NaN is never
 * better) in cooldown (cooldown_counter > 0): cooldown_counter--, bad = 0 bad > patience:
 * every group's lr = max(lr * factor, min_lr[g]) where that lowers it by more than eps;
 * cooldown_counter = cooldown; bad = 0 The LR reduced is the optimizer's current one
 * (torch reads param_group['lr']), so an LR set by hand is reduced from, unlike the step
 * schedulers. scheduler_step (per update) only counts: the trainer's automatic per-update
 * step leaves the LRs alone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler_internal.h"

typedef struct PlateauLR {
    Scheduler base;
    PlateauArgs a;   /* min_lrs not kept: see min_lrs */
    double *min_lrs; /* [ngroups] */
    double best;
    int64_t num_bad, cooldown_counter;
    int64_t last_epoch; /* metric steps taken */
} PlateauLR;

static bool is_better(const PlateauLR *p, double m)
{
    const PlateauArgs *a = &p->a;
    if (!a->mode_max)
        return a->threshold_abs ? m < p->best - a->threshold
                                : m < p->best * (1.0 - a->threshold);
    return a->threshold_abs ? m > p->best + a->threshold
                            : m > p->best * (1.0 + a->threshold);
}

static void reduce_lrs(PlateauLR *p)
{
    Scheduler *s = &p->base;
    for (int g = 0; g < s->ngroups; g++) {
        double old = optim_get_lr(s->opt, g);
        double lr = fmax(old * p->a.factor, p->min_lrs[g]);
        if (old - lr > p->a.eps) optim_set_lr(s->opt, g, lr);
    }
}

static CtStatus plateau_step_metric(Scheduler *s, double metric)
{
    PlateauLR *p = (PlateauLR *)s;
    p->last_epoch++;
    if (is_better(p, metric)) {
        p->best = metric;
        p->num_bad = 0;
    } else {
        p->num_bad++;
    }
    if (p->cooldown_counter > 0) {
        p->cooldown_counter--;
        p->num_bad = 0; /* bad epochs in cooldown do not count */
    }
    if (p->num_bad > p->a.patience) {
        reduce_lrs(p);
        p->cooldown_counter = p->a.cooldown;
        p->num_bad = 0;
    }
    for (int g = 0; g < s->ngroups; g++) s->last_lrs[g] = optim_get_lr(s->opt, g);
    return CT_OK;
}

/* ------------------------------------------------------------ state */

enum { X_BEST, X_BAD, X_COOLDOWN, X_EPOCH, X_LRS };

static int plateau_n_extra(const Scheduler *s)
{
    return X_LRS + s->ngroups;
}

static void plateau_extra_get(const Scheduler *s, SchedulerExtra *x)
{
    const PlateauLR *p = (const PlateauLR *)s;
    x[X_BEST] = (SchedulerExtra){"best", p->best, false};
    x[X_BAD] = (SchedulerExtra){"num_bad_epochs", (double)p->num_bad, true};
    x[X_COOLDOWN] =
        (SchedulerExtra){"cooldown_counter", (double)p->cooldown_counter, true};
    x[X_EPOCH] = (SchedulerExtra){"last_epoch", (double)p->last_epoch, true};
    for (int g = 0; g < s->ngroups; g++) {
        x[X_LRS + g] = (SchedulerExtra){.value = s->last_lrs[g]};
        snprintf(x[X_LRS + g].name, sizeof x[X_LRS + g].name, "last_lrs.%d", g);
    }
}

static CtStatus plateau_extra_set(Scheduler *s, const SchedulerExtra *x)
{
    PlateauLR *p = (PlateauLR *)s;
    const char *who = s->ops->name;
    /* best is +-inf until a metric improves on it, never NaN */
    for (int g = 0; g < s->ngroups; g++)
        if (!(isfinite(x[X_LRS + g].value) && x[X_LRS + g].value >= 0))
            return ct_error(CT_ERR_FORMAT, "%s state load: \"%s\" = %g is not a valid LR",
                            who, x[X_LRS + g].name, x[X_LRS + g].value);
    if (x[X_COOLDOWN].value > (double)p->a.cooldown)
        return ct_error(CT_ERR_FORMAT,
                        "%s state load: cooldown_counter %g is above cooldown=%lld", who,
                        x[X_COOLDOWN].value, (long long)p->a.cooldown);
    p->best = x[X_BEST].value;
    p->num_bad = (int64_t)x[X_BAD].value;
    p->cooldown_counter = (int64_t)x[X_COOLDOWN].value;
    p->last_epoch = (int64_t)x[X_EPOCH].value;
    for (int g = 0; g < s->ngroups; g++) s->last_lrs[g] = x[X_LRS + g].value;
    return CT_OK;
}

static void plateau_destroy(Scheduler *s)
{
    free(((PlateauLR *)s)->min_lrs);
}

static const SchedulerOps plateau_ops = {.name = "ReduceLROnPlateau",
                                         .n_extra = plateau_n_extra,
                                         .extra_get = plateau_extra_get,
                                         .extra_set = plateau_extra_set,
                                         .step_metric = plateau_step_metric,
                                         .destroy = plateau_destroy};

/* ------------------------------------------------------------ creation */

PlateauArgs scheduler_plateau_args(void)
{
    return (PlateauArgs){.factor = 0.1, .patience = 10, .threshold = 1e-4, .eps = 1e-8};
}

static bool lr_ok(double v)
{
    return isfinite(v) && v >= 0;
}

/* Records the first bad argument; false when there is one. */
static bool args_ok(const char *who, const PlateauArgs *a, int ngroups)
{
    if (!(a->factor >= 0 && a->factor < 1))
        return scheduler_fail(who, "factor must be in [0, 1), got %g", a->factor) != NULL;
    if (a->patience < 0 || a->cooldown < 0)
        return scheduler_fail(who, "patience (%lld) and cooldown (%lld) must be >= 0",
                              (long long)a->patience, (long long)a->cooldown) != NULL;
    if (!(isfinite(a->threshold) && a->threshold >= 0))
        return scheduler_fail(who, "threshold must be finite and >= 0, got %g",
                              a->threshold) != NULL;
    if (!(isfinite(a->eps) && a->eps >= 0))
        return scheduler_fail(who, "eps must be finite and >= 0, got %g", a->eps) != NULL;
    for (int g = 0; g < ngroups; g++) {
        double m = a->min_lrs ? a->min_lrs[g] : a->min_lr;
        if (lr_ok(m)) continue;
        if (a->min_lrs)
            return scheduler_fail(who, "min_lrs[%d] must be finite and >= 0, got %g", g,
                                  m) != NULL;
        return scheduler_fail(who, "min_lr must be finite and >= 0, got %g", m) != NULL;
    }
    return true;
}

Scheduler *scheduler_reduce_on_plateau(Optimizer *o, const PlateauArgs *args)
{
    const char *who = "ReduceLROnPlateau";
    if (o && !args) {
        ct_error(CT_ERR_NULL, "%s: args is NULL", who);
        return NULL;
    }
    if (o && !args_ok(who, args, optim_num_groups(o))) return NULL;
    PlateauLR *p = (PlateauLR *)scheduler_alloc(sizeof *p, &plateau_ops, o, who);
    if (!p) return NULL;
    Scheduler *s = &p->base;
    p->min_lrs = malloc((size_t)s->ngroups * sizeof *p->min_lrs);
    if (!p->min_lrs) {
        scheduler_destroy(s);
        ct_error(CT_ERR_OOM, "%s: out of memory", who);
        return NULL;
    }
    p->a = *args;
    p->a.min_lrs = NULL;
    for (int g = 0; g < s->ngroups; g++) {
        p->min_lrs[g] = args->min_lrs ? args->min_lrs[g] : args->min_lr;
        s->last_lrs[g] = s->base_lrs[g]; /* torch writes nothing at creation */
    }
    p->best = args->mode_max ? -INFINITY : INFINITY;
    return s;
}
