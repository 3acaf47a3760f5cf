/* Linear schedules: PyTorch's LinearLR and transformers'
 * get_linear_schedule_with_warmup. */
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
