/* LambdaLR: lr(t) = base * fn(t, ctx). */
#include "scheduler_internal.h"

typedef struct LambdaLR {
    Scheduler base;
    double (*fn)(int64_t step, void *ctx);
    void *ctx;
} LambdaLR;

static double lambda_lr_at(const Scheduler *s, int64_t t, int g)
{
    const LambdaLR *p = (const LambdaLR *)s;
    return s->base_lrs[g] * p->fn(t, p->ctx);
}

static const SchedulerOps lambda_ops = {.name = "LambdaLR", .lr_at = lambda_lr_at};

Scheduler *scheduler_lambda_lr(Optimizer *o, double (*fn)(int64_t step, void *ctx),
                               void *ctx)
{
    if (o && !fn) {
        ct_error(CT_ERR_NULL, "LambdaLR: fn is NULL");
        return NULL;
    }
    LambdaLR *p = (LambdaLR *)scheduler_alloc(sizeof *p, &lambda_ops, o, "LambdaLR");
    if (!p) return NULL;
    p->fn = fn;
    p->ctx = ctx;
    return scheduler_start(&p->base);
}
