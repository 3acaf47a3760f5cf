/* Cosine with linear warmup and cooldown: pytorch-accelerated's
 * CosineLrScheduler, counted in update steps, with its truncation fixed.
 *
 * With W = warmup_steps, C = cooldown_steps, D = total_steps - W - C (>= 1),
 * k = k_decay, and per group b = base LR,
 *   lo = min_lr_ratio > 0 ? min_lr_ratio * b : lr_min
 *   s0 = warmup_start_ratio > 0 ? warmup_start_ratio * b : warmup_start_lr
 * the LR after t updates is
 *   t < W:           s0 + t * (b - s0) / W                    (linear warmup)
 *   W <= t < W + D:  lo + (b - lo) * (1 + cos(pi * c^k / D^k)) / 2, c = t - W
 *   t >= W + D:      lo                                       (cooldown, and after)
 * so the warmup ends at b, the cosine starts at b and reaches lo exactly at
 * the first cooldown step (t = W + D = total - C). The reference instead
 * measures the cosine with t (warmup included) and stops it once t reaches
 * total - W - C, i.e. W steps early and before reaching lo; its warmup slope
 * also ignores warmup_start_ratio. Both are fixed here. */
#include <math.h>

#include "scheduler_internal.h"

typedef struct CosineWarmup {
    Scheduler base;
    CosineWarmupArgs a; /* k_decay resolved */
    int64_t decay;      /* D */
} CosineWarmup;

static double cw_lr_at(const Scheduler *s, int64_t t, int g)
{
    const CosineWarmup *p = (const CosineWarmup *)s;
    const CosineWarmupArgs *a = &p->a;
    double b = s->base_lrs[g];
    double lo = a->min_lr_ratio > 0 ? a->min_lr_ratio * b : a->lr_min;
    if (t < a->warmup_steps) {
        double s0 =
            a->warmup_start_ratio > 0 ? a->warmup_start_ratio * b : a->warmup_start_lr;
        return s0 + (double)t * (b - s0) / (double)a->warmup_steps;
    }
    int64_t c = t - a->warmup_steps;
    if (c >= p->decay) return lo;
    double x = pow((double)c, a->k_decay) / pow((double)p->decay, a->k_decay);
    return lo + (b - lo) * (1 + cos(M_PI * x)) / 2;
}

static const SchedulerOps cw_ops = {.name = "CosineLrScheduler", .lr_at = cw_lr_at};

/* Records the first bad argument; false when there is one. */
static bool args_ok(const char *who, const CosineWarmupArgs *a)
{
    if (a->total_steps < 1)
        return scheduler_fail(who, "total_steps must be >= 1, got %lld",
                              (long long)a->total_steps) != NULL;
    if (a->warmup_steps < 0 || a->cooldown_steps < 0)
        return scheduler_fail(
                   who, "warmup_steps (%lld) and cooldown_steps (%lld) must be >= 0",
                   (long long)a->warmup_steps, (long long)a->cooldown_steps) != NULL;
    if (a->warmup_steps + a->cooldown_steps >= a->total_steps)
        return scheduler_fail(who,
                              "warmup_steps + cooldown_steps (%lld + %lld) must be < "
                              "total_steps (%lld) to leave a cosine phase",
                              (long long)a->warmup_steps, (long long)a->cooldown_steps,
                              (long long)a->total_steps) != NULL;
    if (!(isfinite(a->lr_min) && a->lr_min >= 0 && isfinite(a->warmup_start_lr) &&
          a->warmup_start_lr >= 0))
        return scheduler_fail(who,
                              "lr_min (%g) and warmup_start_lr (%g) must be finite, >= 0",
                              a->lr_min, a->warmup_start_lr) != NULL;
    if (!(a->min_lr_ratio >= 0 && a->min_lr_ratio <= 1 && a->warmup_start_ratio >= 0 &&
          a->warmup_start_ratio <= 1))
        return scheduler_fail(who,
                              "min_lr_ratio (%g) and warmup_start_ratio (%g) must be in "
                              "[0, 1]",
                              a->min_lr_ratio, a->warmup_start_ratio) != NULL;
    if (!(isfinite(a->k_decay) && a->k_decay >= 0))
        return scheduler_fail(who, "k_decay must be finite and >= 0 (0: 1), got %g",
                              a->k_decay) != NULL;
    return true;
}

Scheduler *scheduler_cosine_warmup(Optimizer *o, const CosineWarmupArgs *args)
{
    const char *who = "CosineLrScheduler";
    if (o && !args) {
        ct_error(CT_ERR_NULL, "%s: args is NULL", who);
        return NULL;
    }
    if (o && !args_ok(who, args)) return NULL;
    CosineWarmup *p = (CosineWarmup *)scheduler_alloc(sizeof *p, &cw_ops, o, who);
    if (!p) return NULL;
    p->a = *args;
    if (p->a.k_decay == 0) p->a.k_decay = 1;
    p->decay = args->total_steps - args->warmup_steps - args->cooldown_steps;
    return scheduler_start(&p->base);
}
