/* Scheduler base: creation, stepping, last LR, state save/load, free. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "scheduler_internal.h"

Scheduler *scheduler_fail(const char *who, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ct_error(CT_ERR_INVALID, "%s: %s", who, msg);
    return NULL;
}

Scheduler *scheduler_alloc(size_t size, const SchedulerOps *ops, Optimizer *o,
                           const char *who)
{
    if (!o) {
        if (ct_last_status() == CT_OK)
            ct_error(CT_ERR_NULL, "%s: optimizer is NULL", who);
        return NULL;
    }
    int ng = optim_num_groups(o);
    if (ng < 1)
        return scheduler_fail(who, "optimizer %s has no parameter groups", optim_name(o));
    Scheduler *s = calloc(1, size);
    double *lrs = calloc(2 * (size_t)ng, sizeof *lrs);
    if (!s || !lrs) {
        free(s);
        free(lrs);
        ct_error(CT_ERR_OOM, "%s: out of memory", who);
        return NULL;
    }
    s->ops = ops;
    s->opt = o;
    s->ngroups = ng;
    s->base_lrs = lrs;
    s->last_lrs = lrs + ng;
    for (int g = 0; g < ng; g++) s->base_lrs[g] = optim_get_lr(o, g);
    return s;
}

void scheduler_destroy(Scheduler *s)
{
    if (!s) return;
    if (s->ops && s->ops->destroy) s->ops->destroy(s);
    free(s->base_lrs); /* last_lrs shares this block */
    free(s);
}

Scheduler *scheduler_start(Scheduler *s)
{
    if (!s) return NULL;
    if (scheduler_apply(s, 0) != CT_OK) {
        scheduler_destroy(s);
        return NULL;
    }
    return s;
}

CtStatus scheduler_apply(Scheduler *s, int64_t step)
{
    const SchedulerOps *ops = s->ops;
    if (ops->check_step) {
        CtStatus st = ops->check_step(s, step);
        if (st != CT_OK) return st;
    }
    for (int g = 0; g < s->ngroups; g++) {
        double lr = ops->lr_at ? ops->lr_at(s, step, g) : s->last_lrs[g];
        optim_set_lr(s->opt, g, lr);
        s->last_lrs[g] = lr;
        if (ops->momentum_at) {
            double m = ops->momentum_at(s, step, g);
            if (!isnan(m)) optim_set_momentum(s->opt, g, m);
        }
    }
    return CT_OK;
}

CtStatus scheduler_step(Scheduler *s)
{
    if (!s) {
        CtStatus st = ct_last_status();
        return st != CT_OK ? st
                           : ct_error(CT_ERR_NULL, "scheduler_step: scheduler is NULL");
    }
    if (!s->ops->lr_at) { /* ReduceLROnPlateau: moves on scheduler_step_metric */
        s->step++;
        return CT_OK;
    }
    CtStatus st = scheduler_apply(s, s->step + 1);
    if (st == CT_OK) s->step++;
    return st;
}

CtStatus scheduler_step_metric(Scheduler *s, double metric)
{
    if (!s) {
        CtStatus st = ct_last_status();
        return st != CT_OK
                   ? st
                   : ct_error(CT_ERR_NULL, "scheduler_step_metric: scheduler is NULL");
    }
    if (!s->ops->step_metric)
        return ct_error(CT_ERR_INVALID,
                        "scheduler_step_metric: %s takes no metric (use scheduler_step)",
                        s->ops->name);
    return s->ops->step_metric(s, metric);
}

double scheduler_get_last_lr(const Scheduler *s, int group)
{
    if (!s) {
        ct_error(CT_ERR_NULL, "scheduler_get_last_lr: scheduler is NULL");
        return NAN;
    }
    if (group < 0 || group >= s->ngroups) {
        ct_error(CT_ERR_INVALID, "%s: group %d out of range [0, %d)", s->ops->name, group,
                 s->ngroups);
        return NAN;
    }
    return s->last_lrs[group];
}

int64_t scheduler_step_count(const Scheduler *s)
{
    return s ? s->step : 0;
}

const char *scheduler_name(const Scheduler *s)
{
    return s ? s->ops->name : "(null)";
}

void scheduler_free(Scheduler *s)
{
    scheduler_destroy(s);
}

/* ------------------------------------------------------------ state dict */

/* State: "step" (0-d i64) and "base_lrs.<g>" (0-d f64) for every group.
 * Everything else is a function of these, except for ReduceLROnPlateau,
 * whose extra entries follow (ops->n_extra). */

static CtStatus add_scalar(CtStateDict *out, const char *name, double v, CtDType dt)
{
    /* Created inside a private scope so the dict ends up holding the only
     * reference, whether or not the caller has a scope open. */
    CtScope *scope = ct_scope_open();
    if (!scope) return ct_error(CT_ERR_OOM, "scheduler_state_save: out of memory");
    Tensor *t = tensor_scalar(v, dt, ct_cpu());
    CtStatus st = t ? ct_state_dict_add(out, name, t) : ct_last_status();
    ct_scope_close(scope);
    return st;
}

/* The extra state entries (ops->n_extra) in a new array, *n of them; NULL
 * when there are none, or with an OOM error. */
static SchedulerExtra *get_extra(const Scheduler *s, int *n)
{
    *n = s->ops->n_extra ? s->ops->n_extra(s) : 0;
    if (*n == 0) return NULL;
    SchedulerExtra *x = calloc((size_t)*n, sizeof *x);
    if (!x) {
        ct_error(CT_ERR_OOM, "%s state: out of memory", s->ops->name);
        return NULL;
    }
    s->ops->extra_get(s, x);
    return x;
}

CtStatus scheduler_state_save(const Scheduler *s, CtStateDict *out)
{
    if (!s || !out) {
        CtStatus st = ct_last_status();
        return st != CT_OK ? st
                           : ct_error(CT_ERR_NULL, "scheduler_state_save: %s is NULL",
                                      s ? "state dict" : "scheduler");
    }
    char name[64];
    /* Check every name first so a clash leaves `out` unchanged. */
    if (ct_state_dict_get(out, "step"))
        return ct_error(CT_ERR_INVALID, "%s state save: \"step\" already in the dict",
                        s->ops->name);
    for (int g = 0; g < s->ngroups; g++) {
        snprintf(name, sizeof name, "base_lrs.%d", g);
        if (ct_state_dict_get(out, name))
            return ct_error(CT_ERR_INVALID, "%s state save: \"%s\" already in the dict",
                            s->ops->name, name);
    }
    int nx = 0;
    SchedulerExtra *x = get_extra(s, &nx);
    if (nx > 0 && !x) return ct_last_status();
    CtStatus st = CT_OK;
    for (int i = 0; i < nx && st == CT_OK; i++)
        if (ct_state_dict_get(out, x[i].name))
            st = ct_error(CT_ERR_INVALID, "%s state save: \"%s\" already in the dict",
                          s->ops->name, x[i].name);
    bool clashed = st != CT_OK; /* then nothing was added */
    if (st == CT_OK) st = add_scalar(out, "step", (double)s->step, CT_I64);
    for (int g = 0; g < s->ngroups && st == CT_OK; g++) {
        snprintf(name, sizeof name, "base_lrs.%d", g);
        st = add_scalar(out, name, s->base_lrs[g], CT_F64);
    }
    for (int i = 0; i < nx && st == CT_OK; i++)
        st = add_scalar(out, x[i].name, x[i].value, x[i].is_count ? CT_I64 : CT_F64);
    if (st != CT_OK && !clashed) { /* out of memory half-way: take ours back out */
        ct_state_dict_remove(out, "step");
        for (int g = 0; g < s->ngroups; g++) {
            snprintf(name, sizeof name, "base_lrs.%d", g);
            ct_state_dict_remove(out, name);
        }
        for (int i = 0; i < nx; i++) ct_state_dict_remove(out, x[i].name);
    }
    free(x);
    return st;
}

/* Reads the one-element tensor `name` into *v. */
static CtStatus get_scalar(const Scheduler *s, const CtStateDict *in, const char *name,
                           double *v)
{
    Tensor *t = ct_state_dict_get(in, name);
    if (!t)
        return ct_error(CT_ERR_FORMAT, "%s state load: missing \"%s\"", s->ops->name,
                        name);
    if (tensor_numel(t) != 1)
        return ct_error(CT_ERR_SHAPE,
                        "%s state load: \"%s\" has %lld elements, expected 1",
                        s->ops->name, name, (long long)tensor_numel(t));
    *v = tensor_item(t);
    return isnan(*v) ? ct_error(CT_ERR_FORMAT, "%s state load: \"%s\" is NaN",
                                s->ops->name, name)
                     : CT_OK;
}

/* A non-negative integer that a double holds exactly. */
static bool is_count(double v)
{
    return v >= 0 && v == floor(v) && v <= 9007199254740992.0;
}

CtStatus scheduler_state_load(Scheduler *s, const CtStateDict *in)
{
    if (!s || !in) {
        CtStatus st = ct_last_status();
        return st != CT_OK ? st
                           : ct_error(CT_ERR_NULL, "scheduler_state_load: %s is NULL",
                                      s ? "state dict" : "scheduler");
    }
    const char *who = s->ops->name;
    int nx = 0;
    SchedulerExtra *x = get_extra(s, &nx);
    if (nx > 0 && !x) return ct_last_status();
    int64_t n = ct_state_dict_size(in);
    if (n != 1 + s->ngroups + nx) {
        free(x);
        char more[48] = "";
        if (nx > 0) snprintf(more, sizeof more, " and %d of %s's own", nx, who);
        return ct_error(
            CT_ERR_FORMAT,
            "%s state load: %lld entries, expected %d (step and %d base LRs%s); "
            "saved with a different number of parameter groups or scheduler?",
            who, (long long)n, 1 + s->ngroups + nx, s->ngroups, more);
    }
    double step;
    CtStatus st = get_scalar(s, in, "step", &step);
    if (st == CT_OK && !is_count(step))
        st = ct_error(CT_ERR_FORMAT, "%s state load: step %g is not a count", who, step);
    double *base = st == CT_OK ? malloc((size_t)s->ngroups * sizeof *base) : NULL;
    if (st == CT_OK && !base)
        st = ct_error(CT_ERR_OOM, "%s state load: out of memory", who);
    char name[64];
    for (int g = 0; g < s->ngroups && st == CT_OK; g++) {
        snprintf(name, sizeof name, "base_lrs.%d", g);
        st = get_scalar(s, in, name, &base[g]);
        if (st == CT_OK && !(isfinite(base[g]) && base[g] >= 0))
            st = ct_error(CT_ERR_FORMAT, "%s state load: \"%s\" = %g is not a valid LR",
                          who, name, base[g]);
    }
    for (int i = 0; i < nx && st == CT_OK; i++) {
        st = get_scalar(s, in, x[i].name, &x[i].value);
        if (st == CT_OK && x[i].is_count && !is_count(x[i].value))
            st = ct_error(CT_ERR_FORMAT, "%s state load: \"%s\" = %g is not a count", who,
                          x[i].name, x[i].value);
    }
    if (st == CT_OK && s->ops->check_step) st = s->ops->check_step(s, (int64_t)step);
    if (st == CT_OK && nx > 0) st = s->ops->extra_set(s, x); /* commits when valid */
    free(x);
    if (st != CT_OK) {
        free(base);
        return st;
    }
    /* Valid: commit, then write the LRs of the loaded step. */
    for (int g = 0; g < s->ngroups; g++) s->base_lrs[g] = base[g];
    free(base);
    if (s->ops->rebase) s->ops->rebase(s);
    s->step = (int64_t)step;
    return scheduler_apply(s, s->step);
}
