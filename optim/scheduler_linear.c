/* Factor schedules over total_iters: PyTorch's LinearLR, ConstantLR and
 * PolynomialLR, and transformers' get_linear_schedule_with_warmup. */
#include <math.h>

#include "scheduler_internal.h"

/* LinearLR: lr(t) = base * (start + (end - start) * min(t, total) / total),
 * the closed form of torch's recurrence
 * lr_t = lr_{t-1} * (1 + (end - start) / (total * start + (t - 1) * (end - start))). */
typedef struct LinearLR {
    Scheduler base;
    double start, end;
    int64_t total;
} LinearLR;

static double linear_lr_at(const Scheduler *s, int64_t t, int g)
{
    const LinearLR *p = (const LinearLR *)s;
    int64_t k = t < p->total ? t : p->total;
    return s->base_lrs[g] *
           (p->start + (p->end - p->start) * (double)k / (double)p->total);
}

static const SchedulerOps linear_ops = {.name = "LinearLR", .lr_at = linear_lr_at};

Scheduler *scheduler_linear_lr(Optimizer *o, double start_factor, double end_factor,
                               int64_t total_iters)
{
    const char *who = "LinearLR";
    if (o) {
        /* torch 1.13 accepts start_factor 0 and then divides by zero at step 1;
         * later versions reject it, as we do. */
        if (!(start_factor > 0 && start_factor <= 1))
            return scheduler_fail(who, "start_factor must be in (0, 1], got %g",
                                  start_factor);
        if (!(end_factor >= 0 && end_factor <= 1))
            return scheduler_fail(who, "end_factor must be in [0, 1], got %g",
                                  end_factor);
        if (total_iters < 1)
            return scheduler_fail(who, "total_iters must be >= 1, got %lld",
                                  (long long)total_iters);
    }
    LinearLR *p = (LinearLR *)scheduler_alloc(sizeof *p, &linear_ops, o, who);
    if (!p) return NULL;
    p->start = start_factor;
    p->end = end_factor;
    p->total = total_iters;
    return scheduler_start(&p->base);
}

/* ConstantLR: lr(t) = base * (t < total ? factor : 1), the closed form of
 * torch's recurrence (lr * factor at 0, lr / factor at total). */
typedef struct ConstantLR {
    Scheduler base;
    double factor;
    int64_t total;
} ConstantLR;

static double constant_lr_at(const Scheduler *s, int64_t t, int g)
{
    const ConstantLR *p = (const ConstantLR *)s;
    return t < p->total ? s->base_lrs[g] * p->factor : s->base_lrs[g];
}

static const SchedulerOps constant_ops = {.name = "ConstantLR", .lr_at = constant_lr_at};

Scheduler *scheduler_constant_lr(Optimizer *o, double factor, int64_t total_iters)
{
    const char *who = "ConstantLR";
    if (o) {
        /* torch 1.13 accepts factor 0 and then divides by zero at
         * total_iters, and total_iters 0 leaves the factor on for good
         * (its recurrence never divides it out): both rejected here */
        if (!(factor > 0 && factor <= 1))
            return scheduler_fail(who, "factor must be in (0, 1], got %g", factor);
        if (total_iters < 1)
            return scheduler_fail(who, "total_iters must be >= 1, got %lld",
                                  (long long)total_iters);
    }
    ConstantLR *p = (ConstantLR *)scheduler_alloc(sizeof *p, &constant_ops, o, who);
    if (!p) return NULL;
    p->factor = factor;
    p->total = total_iters;
    return scheduler_start(&p->base);
}

/* PolynomialLR: lr(t) = base * (1 - min(t, total) / total)^power, the closed
 * form of torch's recurrence, which multiplies by
 * ((1 - t/total) / (1 - (t-1)/total))^power for t <= total (so the LR is 0
 * from total on when power > 0, and pow(0, 0) = 1 keeps base for power 0,
 * as Python's 0.0 ** 0 does). */
typedef struct PolyLR {
    Scheduler base;
    int64_t total;
    double power;
} PolyLR;

static double poly_lr_at(const Scheduler *s, int64_t t, int g)
{
    const PolyLR *p = (const PolyLR *)s;
    int64_t k = t < p->total ? t : p->total;
    return s->base_lrs[g] * pow(1.0 - (double)k / (double)p->total, p->power);
}

static const SchedulerOps poly_ops = {.name = "PolynomialLR", .lr_at = poly_lr_at};

Scheduler *scheduler_polynomial_lr(Optimizer *o, int64_t total_iters, double power)
{
    const char *who = "PolynomialLR";
    if (o) {
        if (total_iters < 1)
            return scheduler_fail(who, "total_iters must be >= 1, got %lld",
                                  (long long)total_iters);
        /* torch does not check; a negative power divides by zero at total */
        if (!(isfinite(power) && power >= 0))
            return scheduler_fail(who, "power must be finite and >= 0, got %g", power);
    }
    PolyLR *p = (PolyLR *)scheduler_alloc(sizeof *p, &poly_ops, o, who);
    if (!p) return NULL;
    p->total = total_iters;
    p->power = power;
    return scheduler_start(&p->base);
}

/* ------------------------------------------------- linear warmup, decay */

/* transformers' lr_lambda, times the base LR:
 *   t < warmup: t / max(1, warmup)
 *   otherwise:  max(0, (total - t) / max(1, total - warmup)) */
typedef struct WarmupDecay {
    Scheduler base;
    int64_t warmup, total;
} WarmupDecay;

static double warmup_decay_at(const Scheduler *s, int64_t t, int g)
{
    const WarmupDecay *p = (const WarmupDecay *)s;
    double f;
    if (t < p->warmup) {
        f = (double)t / (double)(p->warmup > 1 ? p->warmup : 1);
    } else {
        int64_t span = p->total - p->warmup;
        f = (double)(p->total - t) / (double)(span > 1 ? span : 1);
        if (f < 0) f = 0;
    }
    return s->base_lrs[g] * f;
}

static const SchedulerOps warmup_decay_ops = {.name = "LinearWarmupDecay",
                                              .lr_at = warmup_decay_at};

Scheduler *scheduler_linear_warmup_decay(Optimizer *o, int64_t warmup_steps,
                                         int64_t total_steps)
{
    const char *who = "LinearWarmupDecay";
    if (o) {
        if (total_steps < 1)
            return scheduler_fail(who, "total_steps must be >= 1, got %lld",
                                  (long long)total_steps);
        if (warmup_steps < 0 || warmup_steps > total_steps)
            return scheduler_fail(
                who, "warmup_steps must be in [0, total_steps=%lld], got %lld",
                (long long)total_steps, (long long)warmup_steps);
    }
    WarmupDecay *p = (WarmupDecay *)scheduler_alloc(sizeof *p, &warmup_decay_ops, o, who);
    if (!p) return NULL;
    p->warmup = warmup_steps;
    p->total = total_steps;
    return scheduler_start(&p->base);
}
